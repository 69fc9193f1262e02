//! The execution ledger's storage: one row per idempotency key. An ask for a new key is
//! one insert that returns the entry (`insert_new`); for a key with an entry it reads the
//! entry under a lock and applies `ledger::answer::next_step` in the same transaction. So
//! two instances asking for one key at once never both get `proceed`: the key is unique,
//! the loser's insert does nothing, and it reads the winner's entry and is told
//! `in_progress`.
//!
//! Every function takes the main [`Db`] and works on [`Db::ledger`]: on SQLite a file of
//! its own with its own write lock, so no transaction here writes anything else. What the
//! ledger reads from the main database (an approval's status) and writes there (a
//! settlement's audit entry) goes through the main database, outside or beside the
//! ledger's transaction, as each function says.

use super::sql::{Sql, Tx};
use super::{from_ms, now_ms, Db, StoreError, StoreResult};
use domain::approvals::payload::canonical_json;
use domain::approvals::ApprovalStatus;
use domain::ledger::answer::{next_step, CallRule, EntryFacts, Step};
use domain::ledger::key::natural_key;
use domain::ledger::request::{Outcome, ValidCall, ValidCompletion};
use domain::ledger::{EntryState, LedgerEntry};
use serde_json::Value;

const COLUMNS: &str = "id, idempotency_key, natural_key, run_id, step_index, tool, arguments, state, attempts, \
    deduped, external_id, response, error, verified_by, approval_id, escalation_id, settled_by, requested_by_token, \
    created_at, started_at, completed_at";

#[derive(sqlx::FromRow)]
struct Row {
    id: String,
    idempotency_key: String,
    natural_key: String,
    run_id: String,
    step_index: i64,
    tool: String,
    arguments: String,
    state: String,
    attempts: i64,
    deduped: i64,
    external_id: Option<String>,
    response: Option<String>,
    error: Option<String>,
    verified_by: Option<String>,
    approval_id: Option<String>,
    escalation_id: Option<String>,
    settled_by: Option<String>,
    requested_by_token: Option<i64>,
    created_at: i64,
    started_at: i64,
    completed_at: Option<i64>,
}

impl Row {
    fn entry(self) -> Result<(LedgerEntry, Option<i64>), sqlx::Error> {
        let state = EntryState::parse(&self.state).ok_or_else(|| {
            sqlx::Error::Decode(format!("ledger entry {} has the unknown state `{}`", self.id, self.state).into())
        })?;
        let entry = LedgerEntry {
            id: self.id,
            idempotency_key: self.idempotency_key,
            natural_key: self.natural_key,
            run_id: self.run_id,
            step_index: self.step_index,
            tool: self.tool,
            arguments: super::stored_json(&self.arguments)?,
            state,
            attempts: self.attempts,
            deduped: self.deduped,
            external_id: self.external_id,
            response: self.response.as_deref().map(super::stored_json).transpose()?,
            error: self.error,
            verified_by: self.verified_by,
            approval_id: self.approval_id,
            escalation_id: self.escalation_id,
            settled_by: self.settled_by,
            created_at: from_ms(self.created_at),
            started_at: from_ms(self.started_at),
            completed_at: self.completed_at.map(from_ms),
        };
        Ok((entry, self.requested_by_token))
    }
}

/// A new id: `call_` and 16 random bytes in hex.
fn new_id() -> String {
    use rand::RngCore;
    let mut bytes = [0u8; 16];
    rand::thread_rng().fill_bytes(&mut bytes);
    format!("call_{}", hex::encode(bytes))
}

/// What an ask found and did.
#[derive(Debug, Clone)]
pub struct Asked {
    pub entry: LedgerEntry,
    pub step: Step,
    /// The token that asked first (only it may report the outcome).
    pub owner: Option<i64>,
}

/// Asks for `key`. A key never asked before (nearly every ask) is one statement that
/// inserts the entry and returns it ([`insert_new`]); a key with an entry is read under a
/// lock, decided by the rule and changed in one transaction ([`ask_known`]).
/// `stored_arguments` are the redacted arguments.
pub async fn ask(
    db: &Db,
    call: &ValidCall,
    key: &str,
    stored_arguments: &Value,
    rule: &CallRule,
    token: Option<i64>,
) -> StoreResult<Asked> {
    let (insert, step) = insert_new(call, key, stored_arguments, rule, token, now_ms());
    let inserted: Vec<Row> = db.ledger().write_returning(insert).await?;
    if let Some(row) = inserted.into_iter().next() {
        let (entry, owner) = row.entry()?;
        return Ok(Asked { entry, step, owner });
    }
    ask_known(db, call, key, stored_arguments, rule, token).await
}

/// An ask for a key that has an entry: the entry read under a lock, the rule's decision
/// applied and the entry read back, in one transaction.
async fn ask_known(
    db: &Db,
    call: &ValidCall,
    key: &str,
    stored_arguments: &Value,
    rule: &CallRule,
    token: Option<i64>,
) -> StoreResult<Asked> {
    let now = now_ms();
    let mut tx = Tx::begin_write(&db.ledger()).await?;
    let select = format!("SELECT {COLUMNS} FROM call_ledger WHERE idempotency_key = $1{}", tx.lock_rows());
    let found: Option<Row> = tx.fetch_optional(Sql::with_args(select, vec![key.into()])).await?;
    let Some((found, _)) = found.map(Row::entry).transpose()? else {
        // The entry the insert ran into went before this read (pruned meanwhile): the key
        // is new again.
        let (insert, step) = insert_new(call, key, stored_arguments, rule, token, now);
        let row: Row = tx
            .fetch_optional(insert)
            .await?
            .ok_or_else(|| StoreError::Conflict("this call's entry changed while it was asked; ask again".into()))?;
        tx.commit().await?;
        let (entry, owner) = row.entry()?;
        return Ok(Asked { entry, step, owner });
    };
    // Read from the main database beside this transaction: the entry is locked, so its
    // approval cannot change here, and a decision on that approval changes no entry, so
    // reading the status now or inside one transaction with the entry comes to the same.
    let approval = match &found.approval_id {
        Some(id) => approval_status(db, id, now).await?,
        None => None,
    };
    let facts = EntryFacts {
        state: found.state,
        started_at: found.started_at.timestamp_millis(),
        completed_at: found.completed_at.map(|t| t.timestamp_millis()),
        approval,
    };
    let step = next_step(Some(&facts), rule, now);
    let arguments = canonical_json(stored_arguments);
    let id = found.id.clone();
    let change = match step {
        // The next attempt of a known key: what the last attempt reported is cleared.
        Step::Start => {
            // An approved call consumes its approval; a retry after a failure is a new attempt.
            let next_attempt = found.state != EntryState::AwaitingApproval;
            Some(Sql::with_args(
                "UPDATE call_ledger SET state = 'started', started_at = $1, updated_at = $1, completed_at = NULL, \
                 external_id = NULL, response = NULL, error = NULL, verified_by = NULL, arguments = $2, \
                 attempts = attempts + $3 WHERE id = $4",
                vec![now.into(), arguments.as_str().into(), i64::from(next_attempt).into(), id.as_str().into()],
            ))
        }
        Step::AskApproval => Some(Sql::with_args(
            "UPDATE call_ledger SET state = 'awaiting_approval', approval_id = NULL, started_at = $1, \
             updated_at = $1, completed_at = NULL, external_id = NULL, response = NULL, error = NULL, \
             arguments = $2, attempts = attempts + 1 WHERE id = $3",
            vec![now.into(), arguments.as_str().into(), id.as_str().into()],
        )),
        Step::Tell(domain::ledger::Answer::AlreadyDone) => Some(Sql::with_args(
            "UPDATE call_ledger SET deduped = deduped + 1, updated_at = $1 WHERE id = $2",
            vec![now.into(), id.as_str().into()],
        )),
        Step::Tell(domain::ledger::Answer::OutcomeUnknown) if found.state == EntryState::Started => {
            Some(Sql::with_args(
                "UPDATE call_ledger SET state = 'unknown', updated_at = $1 WHERE id = $2",
                vec![now.into(), id.as_str().into()],
            ))
        }
        Step::Deny => Some(Sql::with_args(
            "UPDATE call_ledger SET state = 'denied', updated_at = $1 WHERE id = $2",
            vec![now.into(), id.as_str().into()],
        )),
        _ => None,
    };
    if let Some(sql) = change {
        tx.execute(sql).await?;
    }
    if step == Step::Tell(domain::ledger::Answer::AlreadyDone) {
        count_dedupe_hour(&mut tx, &found.tool, now).await?;
    }
    let (entry, owner) = read(&mut tx, &id).await?;
    tx.commit().await?;
    Ok(Asked { entry, step, owner })
}

/// The statement that inserts the entry of a key never asked before and returns it, or,
/// when the key has an entry already, changes nothing and returns no row; with the step
/// the rule gives a new key. One statement because most asks are for new keys, and a read,
/// an insert and a read back took three round trips to the database while holding the
/// write lock every other writer queues for (on SQLite the whole database's).
fn insert_new(
    call: &ValidCall,
    key: &str,
    stored_arguments: &Value,
    rule: &CallRule,
    token: Option<i64>,
    now: i64,
) -> (Sql, Step) {
    let step = next_step(None, rule, now);
    let state = if step == Step::Start { EntryState::Started } else { EntryState::AwaitingApproval };
    let arguments = canonical_json(stored_arguments);
    let mut sql = Sql::new(
        "INSERT INTO call_ledger (id, idempotency_key, natural_key, run_id, step_index, tool, arguments, state, \
         requested_by_token, created_at, started_at, updated_at) ",
    );
    sql.values([()], |row, ()| {
        row.bind(new_id())
            .bind(key)
            .bind(natural_key(key))
            .bind(call.run_id.as_str())
            .bind(call.step_index)
            .bind(call.tool.as_str())
            .bind(arguments.as_str())
            .bind(state.as_str())
            .bind(token)
            .bind(now)
            .bind(now)
            .bind(now);
    });
    sql.push(&format!(" ON CONFLICT (idempotency_key) DO NOTHING RETURNING {COLUMNS}"));
    (sql, step)
}

/// One more dedupe in the hour of `now` for `tool`, for the trends page.
async fn count_dedupe_hour(tx: &mut Tx, tool: &str, now: i64) -> StoreResult<()> {
    const HOUR_MS: i64 = 3_600_000;
    tx.execute(Sql::with_args(
        "INSERT INTO call_ledger_hours (hour_ms, tool, deduped) VALUES ($1, $2, 1) \
         ON CONFLICT (hour_ms, tool) DO UPDATE SET deduped = call_ledger_hours.deduped + 1",
        vec![now.div_euclid(HOUR_MS).saturating_mul(HOUR_MS).into(), tool.into()],
    ))
    .await?;
    Ok(())
}

/// Dedupes per hour in `[from_ms, to_ms)`, all tools together: (hour start, count).
pub async fn deduped_hours(db: &Db, from_ms: i64, to_ms: i64) -> StoreResult<Vec<(i64, i64)>> {
    let db = &db.ledger();
    let sql =
        "SELECT hour_ms, CAST(SUM(deduped) AS BIGINT) FROM call_ledger_hours WHERE hour_ms >= $1 AND hour_ms < $2 \
               GROUP BY hour_ms ORDER BY hour_ms";
    let rows: Vec<(i64, i64)> = db.fetch_all(Sql::with_args(sql, vec![from_ms.into(), to_ms.into()])).await?;
    Ok(rows)
}

/// The status of the approval `id` in the main database `db`, an expired pending one read
/// as expired.
async fn approval_status(db: &Db, id: &str, now: i64) -> StoreResult<Option<ApprovalStatus>> {
    let rows: Vec<(String, i64)> =
        db.fetch_all(Sql::with_args("SELECT status, expires_at FROM approvals WHERE id = $1", vec![id.into()])).await?;
    Ok(rows.into_iter().next().map(|(status, expires_at)| match ApprovalStatus::parse(&status) {
        Some(ApprovalStatus::Pending) if expires_at <= now => ApprovalStatus::Expired,
        Some(s) => s,
        None => ApprovalStatus::Pending,
    }))
}

async fn read(tx: &mut Tx, id: &str) -> StoreResult<(LedgerEntry, Option<i64>)> {
    let sql = Sql::with_args(format!("SELECT {COLUMNS} FROM call_ledger WHERE id = $1"), vec![id.into()]);
    let row: Option<Row> = tx.fetch_optional(sql).await?;
    let row = row.ok_or_else(|| StoreError::NotFound(format!("no guarded call `{id}`")))?;
    Ok(row.entry()?)
}

/// The entry `id` and the token that asked for it first.
pub async fn get(db: &Db, id: &str) -> StoreResult<Option<(LedgerEntry, Option<i64>)>> {
    let db = &db.ledger();
    let sql = Sql::with_args(format!("SELECT {COLUMNS} FROM call_ledger WHERE id = $1"), vec![id.into()]);
    let rows: Vec<Row> = db.fetch_all(sql).await?;
    Ok(rows.into_iter().next().map(Row::entry).transpose()?)
}

/// A run's entries in step order.
pub async fn for_run(db: &Db, run_id: &str) -> StoreResult<Vec<LedgerEntry>> {
    let db = &db.ledger();
    let sql = Sql::with_args(
        format!("SELECT {COLUMNS} FROM call_ledger WHERE run_id = $1 ORDER BY step_index, created_at"),
        vec![run_id.into()],
    );
    let rows: Vec<Row> = db.fetch_all(sql).await?;
    rows.into_iter().map(|r| r.entry().map(|(e, _)| e).map_err(StoreError::from)).collect()
}

/// Records the approval request filed for a waiting entry.
pub async fn link_approval(db: &Db, id: &str, approval_id: &str) -> StoreResult<()> {
    let db = &db.ledger();
    let sql = Sql::with_args(
        "UPDATE call_ledger SET approval_id = $1, updated_at = $2 WHERE id = $3 AND state = 'awaiting_approval'",
        vec![approval_id.into(), now_ms().into(), id.into()],
    );
    db.execute(sql).await?;
    Ok(())
}

/// Records the escalation opened for an unknown outcome.
pub async fn link_escalation(db: &Db, id: &str, escalation_id: &str) -> StoreResult<()> {
    let db = &db.ledger();
    let sql = Sql::with_args(
        "UPDATE call_ledger SET escalation_id = $1, updated_at = $2 WHERE id = $3",
        vec![escalation_id.into(), now_ms().into(), id.into()],
    );
    db.execute(sql).await?;
    Ok(())
}

/// Records how the call ended. Only a started call (or one whose outcome was unknown:
/// a late report settles it) takes a report; the same report again is accepted and
/// changes nothing; a report that contradicts the recorded outcome is refused.
pub async fn complete(
    db: &Db,
    id: &str,
    report: &ValidCompletion,
    stored_response: Option<&Value>,
) -> StoreResult<LedgerEntry> {
    let now = now_ms();
    let reported = match report.outcome {
        Outcome::Ok => EntryState::Succeeded,
        Outcome::Error => EntryState::Failed,
        Outcome::Unknown => EntryState::Unknown,
    };
    // An outcome the caller lost track of has not completed; a person settles it.
    let completed_at = (reported != EntryState::Unknown).then_some(now);
    // The usual report, of a started call: one statement, an update that returns the entry
    // (see `insert_new` for why one). Anything else is read under a lock below.
    let update = Sql::with_args(
        format!(
            "UPDATE call_ledger SET state = $1, external_id = $2, response = $3, error = $4, verified_by = $5, \
             completed_at = $6, updated_at = $7 WHERE id = $8 AND state IN ('started', 'unknown') RETURNING {COLUMNS}"
        ),
        vec![
            reported.as_str().into(),
            report.external_id.clone().into(),
            stored_response.map(canonical_json).into(),
            report.error.clone().into(),
            report.verified_by.clone().into(),
            completed_at.into(),
            now.into(),
            id.into(),
        ],
    );
    let updated: Vec<Row> = db.ledger().write_returning(update.clone()).await?;
    if let Some(row) = updated.into_iter().next() {
        return Ok(row.entry()?.0);
    }
    let mut tx = Tx::begin_write(&db.ledger()).await?;
    let select = format!("SELECT {COLUMNS} FROM call_ledger WHERE id = $1{}", tx.lock_rows());
    let found: Option<Row> = tx.fetch_optional(Sql::with_args(select, vec![id.into()])).await?;
    let (entry, _) = found.ok_or_else(|| StoreError::NotFound(format!("no guarded call `{id}`")))?.entry()?;
    match entry.state {
        // Asked again between the update and this read (PostgreSQL): started once more,
        // so this report settles it, as it would have a moment earlier.
        EntryState::Started | EntryState::Unknown => {
            let row: Option<Row> = tx.fetch_optional(update).await?;
            let (entry, _) =
                row.ok_or_else(|| StoreError::Conflict("this call changed while reported".into()))?.entry()?;
            tx.commit().await?;
            return Ok(entry);
        }
        state if state == reported && entry.external_id == report.external_id => {}
        EntryState::Succeeded | EntryState::Failed => {
            return Err(StoreError::Conflict(format!(
                "this call was already reported {} (external id {}); a different report is refused",
                if entry.state == EntryState::Succeeded { "ok" } else { "error" },
                entry.external_id.as_deref().unwrap_or("none")
            )))
        }
        other => {
            return Err(StoreError::Conflict(format!(
                "this call is {other}, not started: ask again (POST /api/v1/calls) before running the tool"
            )))
        }
    }
    // The same report again: nothing changed.
    tx.commit().await?;
    Ok(entry)
}

/// A person settles an unknown outcome: it happened (with the external id when known), or
/// it did not (the next ask runs the call again). `audit` is appended in the same
/// transaction on PostgreSQL. On SQLite, where the ledger is a file of its own, the audit
/// entry commits in the main file while the ledger's transaction is still open, and the
/// settlement commits after it: no settlement is ever recorded without its audit entry.
/// (A crash between the two commits leaves an audit entry for a settlement that did not
/// happen; the call still shows as unknown and is settled again.)
pub async fn settle(
    db: &Db,
    id: &str,
    happened: bool,
    external_id: Option<&str>,
    by: &str,
    audit: Option<&super::audit::NewEntry<'_>>,
) -> StoreResult<LedgerEntry> {
    let now = now_ms();
    let state = if happened { EntryState::Succeeded } else { EntryState::NotDone };
    let mut tx = Tx::begin_write(&db.ledger()).await?;
    let changed = tx
        .execute(Sql::with_args(
            "UPDATE call_ledger SET state = $1, external_id = COALESCE($2, external_id), settled_by = $3, \
             completed_at = $4, updated_at = $4 WHERE id = $5 AND state IN ('unknown', 'started')",
            vec![state.as_str().into(), external_id.into(), by.into(), now.into(), id.into()],
        ))
        .await?;
    if changed == 1 {
        if let Some(audit) = audit {
            if db.ledger_is_separate() {
                let mut main = Tx::begin_write(db).await?;
                main.execute(super::audit::insert(audit)).await?;
                main.commit().await?;
            } else {
                tx.execute(super::audit::insert(audit)).await?;
            }
        }
    }
    let (entry, _) = read(&mut tx, id).await?;
    tx.commit().await?;
    if changed == 0 {
        return Err(StoreError::Conflict(format!("this call is {}, not of unknown outcome", entry.state)));
    }
    Ok(entry)
}

/// Entries per tool and state, and asks answered already_done, for `/metrics`.
pub async fn counts(db: &Db) -> StoreResult<Vec<(String, String, i64, i64)>> {
    let db = &db.ledger();
    let sql = Sql::new("SELECT tool, state, COUNT(*), CAST(SUM(deduped) AS BIGINT) FROM call_ledger GROUP BY tool, state ORDER BY tool, state");
    let rows: Vec<(String, String, i64, Option<i64>)> = db.fetch_all(sql).await?;
    Ok(rows.into_iter().map(|(t, s, n, d)| (t, s, n, d.unwrap_or(0))).collect())
}

/// Deletes settled entries (succeeded, failed, denied, not done) last changed before
/// `before_ms`, in batches; returns how many. Entries still started, unknown or awaiting
/// approval stay until someone settles them. The caller keeps `before_ms` behind the
/// longest window a policy may set, so no window is cut short.
pub async fn prune(db: &Db, before_ms: i64) -> StoreResult<u64> {
    let db = &db.ledger();
    let mut deleted = 0;
    loop {
        let sql = Sql::with_args(
            "DELETE FROM call_ledger WHERE id IN (SELECT id FROM call_ledger WHERE updated_at < $1 \
             AND state IN ('succeeded', 'failed', 'denied', 'not_done') LIMIT 5000)",
            vec![before_ms.into()],
        );
        let n = db.execute(sql).await?;
        deleted += n;
        if n == 0 {
            // The hourly dedupe counts go with the entries (a few rows per hour).
            db.execute(Sql::with_args("DELETE FROM call_ledger_hours WHERE hour_ms < $1", vec![before_ms.into()]))
                .await?;
            return Ok(deleted);
        }
    }
}
