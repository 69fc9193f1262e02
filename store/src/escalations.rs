//! Escalations and their timelines. Claims are conditional updates (`... WHERE claimed_by
//! IS NULL`), so two people can never both hold one; the loser is told who has it.

use super::audit::NewEntry;
use super::sql::{cacheable_chunks, Sql, Tx};
use super::{from_ms, is_unique_violation, now_ms, trends, Db, StoreError, StoreResult};
use domain::canonical::{RunDetail, RunSummary};
use domain::escalations::from_traces::{self, Decision, Latest, ToOpen};
use domain::escalations::request::ValidEscalation;
use domain::escalations::{
    ClaimFilter, Escalation, EscalationReason, QueueFilter, RemainingItem, Resolution, TimelineEntry, COUNT_LIMIT,
};
use domain::span::NormalizedSpan;
use domain::trends::events::{EventCounts, EventKind};
use std::collections::BTreeMap;

const COLUMNS: &str = "id, run_id, reason, reason_text, blocking_fact, what_was_done, what_remains, from_api, \
    from_trace, agent, status, opened_at, claimed_by, claimed_at, resolved_by, resolved_at, outcome, \
    resolution_note, instructions, idempotency_key, body_sha256, needed_at";

#[derive(sqlx::FromRow)]
struct Row {
    id: String,
    run_id: String,
    reason: String,
    reason_text: Option<String>,
    blocking_fact: Option<String>,
    what_was_done: String,
    what_remains: String,
    from_api: bool,
    from_trace: bool,
    agent: Option<String>,
    status: String,
    opened_at: i64,
    claimed_by: Option<String>,
    claimed_at: Option<i64>,
    resolved_by: Option<String>,
    resolved_at: Option<i64>,
    outcome: Option<String>,
    resolution_note: Option<String>,
    instructions: Option<String>,
    #[allow(dead_code)] // selected with the rest; matched in SQL, not read here
    idempotency_key: Option<String>,
    body_sha256: Option<String>,
    needed_at: Option<i64>,
}

impl TryFrom<Row> for Escalation {
    type Error = sqlx::Error;
    fn try_from(r: Row) -> Result<Self, sqlx::Error> {
        // Escalations opened from traces before reasons were read in words ("budget
        // exceeded" stored as `other`) are shown as they would be opened now.
        let stored = EscalationReason::parse(&r.reason).unwrap_or(EscalationReason::Other);
        let in_words = r.reason_text.as_deref().and_then(EscalationReason::from_words);
        let (reason, reason_text) = match (stored, in_words) {
            (EscalationReason::Other, Some(reason)) => (reason, None),
            _ => (stored, r.reason_text),
        };
        Ok(Escalation {
            id: r.id,
            run_id: r.run_id,
            // Escalations opened from traces before reasons were read in words are shown
            // as they would be opened now.
            reason,
            reason_text,
            blocking_fact: r.blocking_fact,
            what_was_done: super::stored_json(&r.what_was_done)?,
            what_remains: super::stored_json(&r.what_remains)?,
            from_api: r.from_api,
            from_trace: r.from_trace,
            agent: r.agent,
            open: r.status == "open",
            opened_at: from_ms(r.opened_at),
            needed_at: from_ms(r.needed_at.unwrap_or(r.opened_at)),
            claimed_by: r.claimed_by,
            claimed_at: r.claimed_at.map(from_ms),
            resolved_by: r.resolved_by,
            resolved_at: r.resolved_at.map(from_ms),
            outcome: r.outcome.as_deref().and_then(Resolution::parse),
            resolution_note: r.resolution_note,
            instructions: r.instructions,
        })
    }
}

/// A new id: `esc_` and 12 random bytes in hex.
pub(crate) fn new_id() -> String {
    use rand::RngCore;
    let mut bytes = [0u8; 12];
    rand::thread_rng().fill_bytes(&mut bytes);
    format!("esc_{}", hex::encode(bytes))
}

pub(crate) fn json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "[]".into())
}

/// What filing through the API did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Filed {
    Created,
    /// The run's traces had opened it; the API's details were merged in.
    Merged,
    /// The same idempotency key and body as an earlier call.
    Repeated,
}

async fn row_by(db: &Db, where_sql: &str, a: &str, b: Option<&str>) -> StoreResult<Option<Row>> {
    let sql = format!("SELECT {COLUMNS} FROM escalations WHERE {where_sql} ORDER BY opened_at DESC LIMIT 1");
    Ok(db.fetch_optional(Sql::with_args(&sql, vec![a.into(), b.into()])).await?)
}

/// Files an escalation from the agent API, merging into one the run's traces opened.
pub async fn file(db: &Db, v: &ValidEscalation, requested_by: &str) -> StoreResult<(Escalation, Filed)> {
    for _attempt in 0..2 {
        if let Some(key) = &v.idempotency_key {
            if let Some(row) = row_by(db, "run_id = $1 AND idempotency_key = $2", &v.run_id, Some(key)).await? {
                if row.body_sha256.as_deref() == Some(v.body_sha256.as_str()) {
                    return Ok((Escalation::try_from(row)?, Filed::Repeated));
                }
                return Err(StoreError::Conflict(format!(
                    "idempotency key `{key}` was already used in run `{}` for a different escalation ({}); \
                     a changed escalation needs a new key",
                    v.run_id, row.id
                )));
            }
        }
        let open = row_by(db, "run_id = $1 AND status = 'open' AND ($2 IS NULL OR TRUE)", &v.run_id, None).await?;
        let now = now_ms();
        match open {
            Some(row) if row.from_api => {
                return Err(StoreError::Conflict(format!(
                    "run `{}` already has an open escalation {} filed through the API; read it with \
                     GET /api/v1/escalations/{} (or repeat its idempotency key)",
                    v.run_id, row.id, row.id
                )))
            }
            Some(row) => {
                let sql = "UPDATE escalations SET reason = $1, reason_text = $2, blocking_fact = $3, \
                           what_was_done = $4, what_remains = $5, from_api = $6, idempotency_key = $7, \
                           body_sha256 = $8, agent = COALESCE($9, agent), requested_by = $10 \
                           WHERE id = $11 AND status = 'open' AND NOT from_api";
                // A report naming another agent moves the escalation's count to it.
                let mut counts = EventCounts::default();
                if v.agent.is_some() && v.agent != row.agent {
                    counts.add(EventKind::EscalationOpened, row.agent.as_deref(), row.opened_at, -1);
                    counts.add(EventKind::EscalationOpened, v.agent.as_deref(), row.opened_at, 1);
                }
                let mut tx = Tx::begin_write(db).await?;
                let changed = tx
                    .execute(Sql::with_args(
                        sql,
                        vec![
                            v.reason.as_str().into(),
                            (&v.reason_text).into(),
                            (&v.blocking_fact).into(),
                            json(&v.what_was_done).into(),
                            json(&v.what_remains).into(),
                            true.into(),
                            (&v.idempotency_key).into(),
                            (&v.body_sha256).into(),
                            (&v.agent).into(),
                            requested_by.into(),
                            (&row.id).into(),
                        ],
                    ))
                    .await?;
                if changed != 1 {
                    // Resolved or filed through the API since it was read: look again.
                    continue;
                }
                trends::count_events(&mut tx, &counts.without_zeros()).await?;
                tx.commit().await?;
                event(
                    db,
                    &row.id,
                    Some(requested_by),
                    "merged",
                    Some("the agent's report merged into the escalation its traces opened"),
                )
                .await?;
                let merged = get(db, &row.id).await?.ok_or_else(|| StoreError::NotFound(row.id.clone()))?;
                return Ok((merged, Filed::Merged));
            }
            None => {}
        }
        let id = new_id();
        let agent = match &v.agent {
            Some(a) => Some(a.clone()),
            None => super::runs::agent_of(db, &v.run_id).await?,
        };
        let sql = "INSERT INTO escalations (id, run_id, reason, reason_text, blocking_fact, what_was_done, \
                   what_remains, from_api, from_trace, idempotency_key, body_sha256, agent, requested_by, status, \
                   opened_at, needed_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, 'open', $14, $14)";
        // The escalation and its count in the trends in one transaction.
        let mut tx = Tx::begin_write(db).await?;
        let inserted = tx
            .execute(Sql::with_args(
                sql,
                vec![
                    (&id).into(),
                    (&v.run_id).into(),
                    v.reason.as_str().into(),
                    (&v.reason_text).into(),
                    (&v.blocking_fact).into(),
                    json(&v.what_was_done).into(),
                    json(&v.what_remains).into(),
                    true.into(),
                    false.into(),
                    (&v.idempotency_key).into(),
                    (&v.body_sha256).into(),
                    (&agent).into(),
                    requested_by.into(),
                    now.into(),
                ],
            ))
            .await
            .map(|_| ());
        match inserted {
            Ok(()) => {
                trends::count_events(&mut tx, &EventCounts::one(EventKind::EscalationOpened, agent.as_deref(), now))
                    .await?;
                tx.commit().await?;
                event(db, &id, Some(requested_by), "opened", Some(v.opened_by.describe())).await?;
                let created = get(db, &id).await?.ok_or_else(|| StoreError::NotFound(id.clone()))?;
                return Ok((created, Filed::Created));
            }
            // Raced with the trace path or a repeat: look again.
            Err(e) if is_unique_violation(&e) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(StoreError::Conflict(format!("run `{}` is being escalated concurrently; retry", v.run_id)))
}

pub async fn get(db: &Db, id: &str) -> StoreResult<Option<Escalation>> {
    Ok(row_by(db, "id = $1 AND ($2 IS NULL OR TRUE)", id, None).await?.map(Escalation::try_from).transpose()?)
}

/// The run's escalations, newest first.
pub async fn for_run(db: &Db, run_id: &str) -> StoreResult<Vec<Escalation>> {
    let sql = format!("SELECT {COLUMNS} FROM escalations WHERE run_id = $1 ORDER BY opened_at DESC");
    let rows: Vec<Row> = db.fetch_all(Sql::with_args(&sql, vec![run_id.into()])).await?;
    Ok(rows.into_iter().map(Escalation::try_from).collect::<Result<_, _>>()?)
}

/// Open escalations longest waiting first, or resolved ones newest first.
pub async fn list(db: &Db, open: bool, limit: i64) -> StoreResult<Vec<Escalation>> {
    page(db, open, &QueueFilter::default(), None, limit).await
}

/// `WHERE` for the open or resolved escalations that pass `filter` (the claim and the
/// waiting time concern open ones only).
fn filtered(sql: &mut Sql, open: bool, filter: &QueueFilter) {
    sql.push(" WHERE status = ");
    sql.bind(if open { "open" } else { "resolved" });
    if let Some(reason) = filter.reason {
        sql.push(" AND reason = ").bind(reason.as_str());
    }
    if let Some(agent) = &filter.agent {
        sql.push(" AND agent = ").bind(agent.as_str());
    }
    if open {
        match &filter.claim {
            Some(ClaimFilter::Unclaimed) => sql.push(" AND claimed_by IS NULL"),
            Some(ClaimFilter::Claimed) => sql.push(" AND claimed_by IS NOT NULL"),
            Some(ClaimFilter::By(user)) => sql.push(" AND claimed_by = ").bind(user.as_str()),
            None => sql,
        };
        if let Some(seconds) = filter.waiting_longer_than_s {
            sql.push(" AND needed_at < ").bind(now_ms() - seconds * 1000);
        }
    }
}

/// One page of the queue: open escalations longest waiting first (by when their run
/// needed a person), or resolved ones newest first, that pass `filter`, after `after`
/// (the previous page's last escalation: its needed or resolved time in ms and its id).
/// Keyset paging: each page is one index range, however deep.
pub async fn page(
    db: &Db,
    open: bool,
    filter: &QueueFilter,
    after: Option<(i64, String)>,
    limit: i64,
) -> StoreResult<Vec<Escalation>> {
    let (column, order, cmp) = if open { ("needed_at", "ASC", ">") } else { ("resolved_at", "DESC", "<") };
    let mut sql = Sql::new(&format!("SELECT {COLUMNS} FROM escalations"));
    filtered(&mut sql, open, filter);
    if let Some((at, id)) = after {
        let (a, b, c) = (sql.arg(at), sql.arg(at), sql.arg(id));
        sql.push(&format!(" AND ({column} {cmp} {a} OR ({column} = {b} AND id {cmp} {c}))"));
    }
    sql.push(&format!(" ORDER BY {column} {order}, id {order} LIMIT "));
    sql.bind(limit);
    let rows: Vec<Row> = db.fetch_all(sql).await?;
    Ok(rows.into_iter().map(Escalation::try_from).collect::<Result<_, _>>()?)
}

/// How many escalations are open, or resolved, and pass `filter`, counted up to one past
/// [`COUNT_LIMIT`]: more than it reads "10,000+".
pub async fn count(db: &Db, open: bool, filter: &QueueFilter) -> StoreResult<i64> {
    count_up_to(db, open, filter, COUNT_LIMIT).await
}

/// [`count`] with its limit given (tests count to a handful).
pub async fn count_up_to(db: &Db, open: bool, filter: &QueueFilter, limit: i64) -> StoreResult<i64> {
    let mut sql = Sql::new("SELECT COUNT(*) FROM (SELECT 1 FROM escalations");
    filtered(&mut sql, open, filter);
    sql.push(" LIMIT ").bind(limit + 1).push(") AS t");
    let rows: Vec<(i64,)> = db.fetch_all(sql).await?;
    Ok(rows.first().map_or(0, |(n,)| *n))
}

/// The agents named by open (or resolved) escalations, for the queue's filter, by a
/// loose scan of `escalations_status_agent`: one seek per agent (a few), not a visit to
/// every open escalation (tens of thousands in a busy deployment).
pub async fn agents(db: &Db, open: bool) -> StoreResult<Vec<String>> {
    let sql = Sql::with_args(
        "WITH RECURSIVE a(agent) AS (\
           SELECT MIN(agent) FROM escalations WHERE status = $1 \
           UNION ALL SELECT (SELECT MIN(agent) FROM escalations WHERE status = $1 AND agent > a.agent) \
           FROM a WHERE a.agent IS NOT NULL) \
         SELECT agent FROM a WHERE agent IS NOT NULL",
        vec![(if open { "open" } else { "resolved" }).into()],
    );
    let rows: Vec<(String,)> = db.fetch_all(sql).await?;
    Ok(rows.into_iter().map(|(a,)| a).collect())
}

/// How many are open (up to one past [`COUNT_LIMIT`], as [`count`]) and when the
/// longest-waiting one's run needed a person (ms), for the navigation.
pub async fn backlog(db: &Db) -> StoreResult<(i64, Option<i64>)> {
    backlog_up_to(db, COUNT_LIMIT).await
}

/// [`backlog`] with its limit given (tests count to a handful).
pub async fn backlog_up_to(db: &Db, limit: i64) -> StoreResult<(i64, Option<i64>)> {
    let mut sql = Sql::new("SELECT (SELECT COUNT(*) FROM (SELECT 1 FROM escalations WHERE status = 'open' LIMIT ");
    sql.bind(limit + 1).push(") AS t), (SELECT MIN(needed_at) FROM escalations WHERE status = 'open')");
    Ok(db.fetch_one(sql).await?)
}

pub async fn timeline(db: &Db, id: &str) -> StoreResult<Vec<TimelineEntry>> {
    let sql = "SELECT at, actor, kind, detail FROM escalation_events WHERE escalation_id = $1 ORDER BY id";
    let rows: Vec<(i64, Option<String>, String, Option<String>)> =
        db.fetch_all(Sql::with_args(sql, vec![id.into()])).await?;
    Ok(rows
        .into_iter()
        .map(|(at, actor, kind, detail)| TimelineEntry { at: from_ms(at), actor, kind, detail })
        .collect())
}

pub async fn event(db: &Db, id: &str, actor: Option<&str>, kind: &str, detail: Option<&str>) -> StoreResult<()> {
    let sql = "INSERT INTO escalation_events (escalation_id, at, actor, kind, detail) VALUES ($1, $2, $3, $4, $5)";
    db.execute(Sql::with_args(sql, vec![id.into(), now_ms().into(), actor.into(), kind.into(), detail.into()]))
        .await
        .map(|_| ())?;
    Ok(())
}

/// Adds an operator's note to the timeline, with its audit entry, in one transaction.
pub async fn note(db: &Db, id: &str, user: &str, text: &str, audit: Option<&NewEntry<'_>>) -> StoreResult<Escalation> {
    current(db, id).await?;
    let mut tx = Tx::begin_write(db).await?;
    tx.execute(Sql::with_args(
        "INSERT INTO escalation_events (escalation_id, at, actor, kind, detail) VALUES ($1, $2, $3, 'note', $4)",
        vec![id.into(), now_ms().into(), user.into(), text.into()],
    ))
    .await?;
    if let Some(audit) = audit {
        tx.execute(super::audit::insert(audit)).await?;
    }
    tx.commit().await?;
    current(db, id).await
}

/// Applies `update` (a conditional UPDATE of one escalation) and, when it changed the
/// row, records `entry` on the timeline and `audit` in the audit log, in one transaction:
/// a claim, a tick or a resolution is never stored without its entries, nor an entry
/// without it. Returns whether the row changed.
async fn change_with_entry(
    db: &Db,
    id: &str,
    update: Sql,
    entry: (&str, &str, Option<&str>),
    audit: Option<&NewEntry<'_>>,
) -> StoreResult<bool> {
    change_counted(db, id, update, entry, audit, None).await
}

/// [`change_with_entry`], also counting the change in the trends as `counted` (a kind of
/// event, at when) of the escalation's agent, which the update returns, so the count
/// names the agent the row had when it changed.
async fn change_counted(
    db: &Db,
    id: &str,
    mut update: Sql,
    entry: (&str, &str, Option<&str>),
    audit: Option<&NewEntry<'_>>,
    counted: Option<(EventKind, i64)>,
) -> StoreResult<bool> {
    let mut tx = Tx::begin_write(db).await?;
    let mut counts = EventCounts::default();
    let changed = match counted {
        None => tx.execute(update).await? == 1,
        Some((kind, at)) => {
            update.push(" RETURNING agent");
            let agent: Option<(Option<String>,)> = tx.fetch_optional(update).await?;
            if let Some((agent,)) = &agent {
                counts.add(kind, agent.as_deref(), at, 1);
            }
            agent.is_some()
        }
    };
    if changed {
        if let Some(audit) = audit {
            tx.execute(super::audit::insert(audit)).await?;
        }
        let (actor, kind, detail) = entry;
        let mut sql = Sql::new("INSERT INTO escalation_events (escalation_id, at, actor, kind, detail) ");
        sql.values([()], |row, ()| {
            row.bind(id).bind(now_ms()).bind(actor).bind(kind).bind(detail);
        });
        tx.execute(sql).await?;
    }
    // Last, so the shared count rows are held only until the commit.
    trends::count_events(&mut tx, &counts).await?;
    tx.commit().await?;
    Ok(changed)
}

async fn current(db: &Db, id: &str) -> StoreResult<Escalation> {
    get(db, id).await?.ok_or_else(|| StoreError::NotFound(format!("escalation {id}")))
}

/// Claims an open escalation for `user`; claiming one you hold is a no-op.
/// `audit` is appended with the claim, in its transaction.
pub async fn claim(db: &Db, id: &str, user: &str, audit: Option<&NewEntry<'_>>) -> StoreResult<Escalation> {
    let mut sql = Sql::new(
        "UPDATE escalations SET claimed_by = $1, claimed_at = $2 \
                            WHERE id = $3 AND status = 'open' AND claimed_by IS NULL",
    );
    sql.arg(user);
    sql.arg(now_ms());
    sql.arg(id);
    let changed = change_with_entry(db, id, sql, (user, "claimed", None), audit).await?;
    let e = current(db, id).await?;
    if !changed {
        if let Some(why) = e.refusal(user) {
            return Err(StoreError::Conflict(why));
        }
    }
    Ok(e)
}

pub async fn release(db: &Db, id: &str, user: &str, audit: Option<&NewEntry<'_>>) -> StoreResult<Escalation> {
    let mut sql = Sql::new(
        "UPDATE escalations SET claimed_by = NULL, claimed_at = NULL \
                            WHERE id = $1 AND status = 'open' AND claimed_by = $2",
    );
    sql.arg(id);
    sql.arg(user);
    let changed = change_with_entry(db, id, sql, (user, "released", None), audit).await?;
    let e = current(db, id).await?;
    if !changed {
        return Err(StoreError::Conflict(
            e.refusal(user).unwrap_or_else(|| "you do not hold the claim on this escalation".into()),
        ));
    }
    Ok(e)
}

/// Ticks or unticks a remaining item; only the person holding the claim may.
pub async fn set_item(
    db: &Db,
    id: &str,
    user: &str,
    index: usize,
    done: bool,
    audit: Option<&NewEntry<'_>>,
) -> StoreResult<Escalation> {
    let e = current(db, id).await?;
    if let Some(why) = e.refusal(user) {
        return Err(StoreError::Conflict(why));
    }
    if e.claimed_by.as_deref() != Some(user) {
        return Err(StoreError::Conflict("claim the escalation before ticking its items".into()));
    }
    let mut items: Vec<RemainingItem> = e.what_remains.clone();
    let Some(item) = items.get_mut(index) else {
        return Err(StoreError::NotFound(format!("item {index} of escalation {id}")));
    };
    item.done = done;
    item.done_by = done.then(|| user.to_string());
    let description = item.description.clone();
    let mut sql =
        Sql::new("UPDATE escalations SET what_remains = $1 WHERE id = $2 AND status = 'open' AND claimed_by = $3");
    sql.arg(json(&items));
    sql.arg(id);
    sql.arg(user);
    let kind = if done { "item_done" } else { "item_undone" };
    if !change_with_entry(db, id, sql, (user, kind, Some(&description)), audit).await? {
        return Err(StoreError::Conflict("the escalation changed while ticking; reload it".into()));
    }
    current(db, id).await
}

/// Adds `item` to an open escalation's checklist unless an item for the same guarded
/// call is there already, with `note` on the timeline (a second call of unknown outcome
/// joining the run's escalation).
pub async fn add_call_item(db: &Db, id: &str, item: RemainingItem, note: &str) -> StoreResult<()> {
    let call = item.call_id.clone();
    let changed = change_items(db, id, ("flightdeck ledger", "note", Some(note)), |items| {
        if items.iter().any(|i| i.call_id.is_some() && i.call_id == call) {
            return false;
        }
        items.push(item.clone());
        true
    })
    .await?;
    if !changed {
        event(db, id, None, "note", Some(note)).await?;
    }
    Ok(())
}

/// Ticks the checklist item that asks to settle guarded call `call_id`, as done by `user`
/// (settling the call did what the item asked). No such item: nothing changes.
pub async fn tick_call_item(db: &Db, id: &str, call_id: &str, user: &str) -> StoreResult<()> {
    let description = get(db, id)
        .await?
        .and_then(|e| e.what_remains.into_iter().find(|i| i.call_id.as_deref() == Some(call_id)))
        .map(|i| i.description);
    change_items(db, id, (user, "item_done", description.as_deref()), |items| {
        let Some(item) = items.iter_mut().find(|i| i.call_id.as_deref() == Some(call_id) && !i.done) else {
            return false;
        };
        item.done = true;
        item.done_by = Some(user.to_string());
        true
    })
    .await
    .map(|_| ())
}

/// Applies `change` to the checklist of escalation `id` and stores it with `entry` on the
/// timeline, unless `change` says nothing changed. The update is conditional on the list
/// read, so two changes at once never lose one: the loser reads again and reapplies.
/// Returns whether the list changed.
async fn change_items(
    db: &Db,
    id: &str,
    entry: (&str, &str, Option<&str>),
    change: impl Fn(&mut Vec<RemainingItem>) -> bool,
) -> StoreResult<bool> {
    for _ in 0..8 {
        let read = Sql::with_args("SELECT what_remains FROM escalations WHERE id = $1", vec![id.into()]);
        let stored: Vec<(String,)> = db.fetch_all(read).await?;
        let Some((stored,)) = stored.into_iter().next() else {
            return Err(StoreError::NotFound(format!("escalation {id}")));
        };
        let mut items: Vec<RemainingItem> = super::stored_json(&stored)?;
        if !change(&mut items) {
            return Ok(false);
        }
        let update = Sql::with_args(
            "UPDATE escalations SET what_remains = $1 WHERE id = $2 AND what_remains = $3",
            vec![json(&items).into(), id.into(), stored.into()],
        );
        if change_with_entry(db, id, update, entry, None).await? {
            return Ok(true);
        }
    }
    Err(StoreError::Conflict("the escalation's checklist kept changing meanwhile; try again".into()))
}

/// Resolves an open escalation. Only the holder of its claim may, so two people never
/// finish the same task; `override_claim` (an administrator's explicit choice, audited by
/// the caller) resolves it whoever holds it, or while nobody does.
#[allow(clippy::too_many_arguments)]
pub async fn resolve(
    db: &Db,
    id: &str,
    user: &str,
    outcome: Resolution,
    note: &str,
    instructions: Option<&str>,
    override_claim: bool,
    audit: Option<&NewEntry<'_>>,
) -> StoreResult<Escalation> {
    let before = current(db, id).await?;
    let overridden = match (&before.claimed_by, override_claim) {
        (Some(holder), true) if holder != user => format!(" (overriding {holder}'s claim)"),
        (None, true) => " (without a claim, as administrator)".to_string(),
        _ => String::new(),
    };
    let mut sql = Sql::new(
        "UPDATE escalations SET status = 'resolved', resolved_by = $1, resolved_at = $2, outcome = $3, \
         resolution_note = $4, instructions = $5 \
         WHERE id = $6 AND status = 'open' AND (claimed_by = $1 OR $7)",
    );
    let resolved_at = now_ms();
    sql.arg(user);
    sql.arg(resolved_at);
    sql.arg(outcome.as_str());
    sql.arg(note);
    sql.arg(instructions);
    sql.arg(id);
    sql.arg(override_claim);
    let detail = format!("{outcome}{overridden}: {note}");
    let counted = Some((EventKind::EscalationResolved, resolved_at));
    let changed = change_counted(db, id, sql, (user, "resolved", Some(&detail)), audit, counted).await?;
    let e = current(db, id).await?;
    if !changed {
        let why = e.refusal(user).unwrap_or_else(|| match &e.claimed_by {
            None => "claim this escalation before resolving it, so nobody else works on it meanwhile".into(),
            Some(_) => "the escalation changed; reload it".into(),
        });
        return Err(StoreError::Conflict(why));
    }
    Ok(e)
}

/// Escalations whose `escalation.opened` webhook is not queued yet.
pub async fn unannounced(db: &Db) -> StoreResult<Vec<Escalation>> {
    let sql = format!("SELECT {COLUMNS} FROM escalations WHERE notified_at IS NULL ORDER BY opened_at LIMIT 100");
    let rows: Vec<Row> = db.fetch_all(Sql::new(&sql)).await?;
    Ok(rows.into_iter().map(Escalation::try_from).collect::<Result<_, _>>()?)
}

/// Marks the escalations `due` announced and queues the webhook `event` makes of each one
/// this caller marked (of several instances, one marks each): one transaction, so an
/// escalation is never marked without its webhook, and one write however many opened
/// (a write per escalation kept taking the lock from the ingest writer). Returns the ids
/// this caller announced.
pub async fn announce(
    db: &Db,
    due: &[Escalation],
    event: impl Fn(&Escalation) -> domain::notify::Event,
    targets: &[domain::notify::WebhookTarget],
) -> StoreResult<Vec<String>> {
    if due.is_empty() {
        return Ok(Vec::new());
    }
    let now = now_ms();
    let mut tx = Tx::begin_write(db).await?;
    let mut announced: Vec<String> = Vec::new();
    for chunk in cacheable_chunks(due, 100) {
        let mut sql = Sql::new("UPDATE escalations SET notified_at = ");
        sql.bind(now).push(" WHERE notified_at IS NULL AND id IN ");
        sql.list(chunk.iter().map(|e| e.id.as_str())).push(" RETURNING id");
        announced.extend(tx.fetch_all::<(String,)>(sql).await?.into_iter().map(|(id,)| id));
    }
    for e in due.iter().filter(|e| announced.contains(&e.id)) {
        super::webhooks::enqueue_in(&mut tx, &event(e), targets).await?;
    }
    tx.commit().await?;
    Ok(announced)
}

/// Inside the ingest transaction: opens an escalation for every recomputed run that
/// escalated and has none yet, and marks an API-filed one the traces now report too
/// (which runs, and with what details, is decided by [`from_traces::decide`]). Returns
/// the trends' counts of the escalations it opened, for the caller to add last
/// ([`trends::count_events`]).
pub async fn open_from_traces(
    tx: &mut Tx,
    derived: &[RunDetail],
    spans: &[NormalizedSpan],
    now: i64,
) -> StoreResult<EventCounts> {
    let escalated: Vec<&RunSummary> = from_traces::escalated(derived).collect();
    // Each run's latest escalation, if it has one.
    let mut latest: BTreeMap<String, Latest> = BTreeMap::new();
    for chunk in cacheable_chunks(&escalated, 500) {
        let mut sql = Sql::new("SELECT run_id, opened_at, id, from_trace FROM escalations WHERE run_id IN ");
        sql.list(chunk.iter().map(|run| run.run_id.as_str()));
        let rows: Vec<(String, i64, String, bool)> = tx.fetch_all(sql).await?;
        for (run, opened_at, id, from_trace) in rows {
            let candidate = Latest { opened_at, id, from_trace };
            match latest.get(&run) {
                Some(kept) if (kept.opened_at, &kept.id) >= (candidate.opened_at, &candidate.id) => {}
                _ => {
                    latest.insert(run, candidate);
                }
            }
        }
    }
    let Decision { merged, opened } = from_traces::decide(&escalated, &latest, spans);
    // An agent may file after its run stopped: the traces' earlier time is when it needed a person.
    for (id, needed_at) in &merged {
        let sql = Sql::with_args(
            "UPDATE escalations SET from_trace = $1, \
             needed_at = CASE WHEN $2 IS NOT NULL AND $2 < needed_at THEN $2 ELSE needed_at END WHERE id = $3",
            vec![true.into(), needed_at.map(|t| t.min(now)).into(), (*id).into()],
        );
        tx.execute(sql).await?;
    }
    let opened: Vec<(String, &ToOpen<'_>)> = opened.iter().map(|o| (new_id(), o)).collect();
    for chunk in cacheable_chunks(&opened, 100) {
        let mut sql = Sql::new(
            "INSERT INTO escalations (id, run_id, reason, reason_text, blocking_fact, what_was_done, \
             what_remains, from_api, from_trace, agent, status, opened_at, needed_at) ",
        );
        sql.values(chunk, |row, (id, o)| {
            row.bind(id.as_str())
                .bind(o.run.run_id.as_str())
                .bind(o.reason.as_str())
                .bind(&o.reason_text)
                .bind(&o.details.blocking_fact)
                .bind(json(&o.details.done))
                .bind(json(&o.details.remains))
                .bind(false)
                .bind(true)
                .bind(&o.run.agent)
                .bind("open")
                .bind(now)
                // An agent's clock ahead of ours must not make the wait negative.
                .bind(o.needed_at_ms.map_or(now, |t| t.min(now)));
        });
        tx.execute(sql).await?;
    }
    // The timeline's first entry for each, after the rows it refers to.
    let events: Vec<(&str, &str, &str)> = merged
        .iter()
        .map(|(id, _)| (*id, "merged", "the run's traces report the same escalation"))
        .chain(opened.iter().map(|(id, _)| (id.as_str(), "opened", "opened from the run's traces")))
        .collect();
    for chunk in cacheable_chunks(&events, 200) {
        let mut sql = Sql::new("INSERT INTO escalation_events (escalation_id, at, actor, kind, detail) ");
        sql.values(chunk, |row, (id, kind, detail)| {
            row.bind(*id).bind(now).bind(None::<&str>).bind(*kind).bind(*detail);
        });
        tx.execute(sql).await?;
    }
    let mut counts = EventCounts::default();
    for (_, o) in &opened {
        counts.add(EventKind::EscalationOpened, o.run.agent.as_deref(), now, 1);
    }
    Ok(counts)
}
