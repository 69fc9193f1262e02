//! Escalations and their timelines. Claims are conditional updates (`... WHERE claimed_by
//! IS NULL`), so two people can never both hold one; the loser is told who has it.

use super::{from_ms, is_unique_violation, now_ms, on_pool, Db, StoreError, StoreResult};
use crate::escalations::request::ValidEscalation;
use crate::escalations::{DoneItem, Escalation, EscalationReason, RemainingItem, Resolution, TimelineEntry};

const COLUMNS: &str = "id, run_id, reason, reason_text, blocking_fact, what_was_done, what_remains, from_api, \
    from_trace, agent, status, opened_at, claimed_by, claimed_at, resolved_by, resolved_at, outcome, \
    resolution_note, instructions, idempotency_key, body_sha256";

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
}

impl From<Row> for Escalation {
    fn from(r: Row) -> Self {
        // Escalations opened from traces before reasons were read in words ("budget
        // exceeded" stored as `other`) are shown as they would be opened now.
        let stored = EscalationReason::parse(&r.reason).unwrap_or(EscalationReason::Other);
        let in_words = r.reason_text.as_deref().and_then(EscalationReason::from_words);
        let (reason, reason_text) = match (stored, in_words) {
            (EscalationReason::Other, Some(reason)) => (reason, None),
            _ => (stored, r.reason_text),
        };
        Escalation {
            id: r.id,
            run_id: r.run_id,
            // Escalations opened from traces before reasons were read in words are shown
            // as they would be opened now.
            reason,
            reason_text,
            blocking_fact: r.blocking_fact,
            what_was_done: serde_json::from_str(&r.what_was_done).unwrap_or_default(),
            what_remains: serde_json::from_str(&r.what_remains).unwrap_or_default(),
            from_api: r.from_api,
            from_trace: r.from_trace,
            agent: r.agent,
            open: r.status == "open",
            opened_at: from_ms(r.opened_at),
            claimed_by: r.claimed_by,
            claimed_at: r.claimed_at.map(from_ms),
            resolved_by: r.resolved_by,
            resolved_at: r.resolved_at.map(from_ms),
            outcome: r.outcome.as_deref().and_then(Resolution::parse),
            resolution_note: r.resolution_note,
            instructions: r.instructions,
        }
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
    Ok(on_pool!(db, pool => sqlx::query_as(&sql).bind(a).bind(b).fetch_optional(pool).await)?)
}

/// Files an escalation from the agent API, merging into one the run's traces opened.
pub async fn file(db: &Db, v: &ValidEscalation, requested_by: &str) -> StoreResult<(Escalation, Filed)> {
    for _attempt in 0..2 {
        if let Some(key) = &v.idempotency_key {
            if let Some(row) = row_by(db, "run_id = $1 AND idempotency_key = $2", &v.run_id, Some(key)).await? {
                if row.body_sha256.as_deref() == Some(v.body_sha256.as_str()) {
                    return Ok((row.into(), Filed::Repeated));
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
                           body_sha256 = $8, agent = COALESCE($9, agent), requested_by = $10 WHERE id = $11";
                on_pool!(db, pool => sqlx::query(sql)
                    .bind(v.reason.as_str())
                    .bind(&v.reason_text)
                    .bind(&v.blocking_fact)
                    .bind(json(&v.what_was_done))
                    .bind(json(&v.what_remains))
                    .bind(true)
                    .bind(&v.idempotency_key)
                    .bind(&v.body_sha256)
                    .bind(&v.agent)
                    .bind(requested_by)
                    .bind(&row.id)
                    .execute(pool)
                    .await
                    .map(|_| ()))?;
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
                   opened_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, 'open', $14)";
        let inserted = on_pool!(db, pool => sqlx::query(sql)
            .bind(&id)
            .bind(&v.run_id)
            .bind(v.reason.as_str())
            .bind(&v.reason_text)
            .bind(&v.blocking_fact)
            .bind(json(&v.what_was_done))
            .bind(json(&v.what_remains))
            .bind(true)
            .bind(false)
            .bind(&v.idempotency_key)
            .bind(&v.body_sha256)
            .bind(&agent)
            .bind(requested_by)
            .bind(now)
            .execute(pool)
            .await
            .map(|_| ()));
        match inserted {
            Ok(()) => {
                event(db, &id, Some(requested_by), "opened", Some("filed by the agent through the API")).await?;
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
    Ok(row_by(db, "id = $1 AND ($2 IS NULL OR TRUE)", id, None).await?.map(Escalation::from))
}

/// The run's escalations, newest first.
pub async fn for_run(db: &Db, run_id: &str) -> StoreResult<Vec<Escalation>> {
    let sql = format!("SELECT {COLUMNS} FROM escalations WHERE run_id = $1 ORDER BY opened_at DESC");
    let rows: Vec<Row> = on_pool!(db, pool => sqlx::query_as(&sql).bind(run_id).fetch_all(pool).await)?;
    Ok(rows.into_iter().map(Escalation::from).collect())
}

/// Open escalations oldest first, or resolved ones newest first.
pub async fn list(db: &Db, open: bool, limit: i64) -> StoreResult<Vec<Escalation>> {
    let sql = if open {
        format!("SELECT {COLUMNS} FROM escalations WHERE status = 'open' ORDER BY opened_at, id LIMIT $1")
    } else {
        format!("SELECT {COLUMNS} FROM escalations WHERE status = 'resolved' ORDER BY resolved_at DESC, id LIMIT $1")
    };
    let rows: Vec<Row> = on_pool!(db, pool => sqlx::query_as(&sql).bind(limit).fetch_all(pool).await)?;
    Ok(rows.into_iter().map(Escalation::from).collect())
}

/// How many are open and when the oldest was opened (ms), for the navigation.
pub async fn backlog(db: &Db) -> StoreResult<(i64, Option<i64>)> {
    let sql = "SELECT COUNT(*), MIN(opened_at) FROM escalations WHERE status = 'open'";
    Ok(on_pool!(db, pool => sqlx::query_as(sql).fetch_one(pool).await)?)
}

pub async fn timeline(db: &Db, id: &str) -> StoreResult<Vec<TimelineEntry>> {
    let sql = "SELECT at, actor, kind, detail FROM escalation_events WHERE escalation_id = $1 ORDER BY id";
    let rows: Vec<(i64, Option<String>, String, Option<String>)> =
        on_pool!(db, pool => sqlx::query_as(sql).bind(id).fetch_all(pool).await)?;
    Ok(rows
        .into_iter()
        .map(|(at, actor, kind, detail)| TimelineEntry { at: from_ms(at), actor, kind, detail })
        .collect())
}

pub async fn event(db: &Db, id: &str, actor: Option<&str>, kind: &str, detail: Option<&str>) -> StoreResult<()> {
    let sql = "INSERT INTO escalation_events (escalation_id, at, actor, kind, detail) VALUES ($1, $2, $3, $4, $5)";
    on_pool!(db, pool => sqlx::query(sql).bind(id).bind(now_ms()).bind(actor).bind(kind).bind(detail).execute(pool).await.map(|_| ()))?;
    Ok(())
}

/// Why an action on `e` by `user` is refused, when it is.
fn refusal(e: &Escalation, user: &str) -> Option<String> {
    if !e.open {
        return Some(format!(
            "this escalation was resolved ({}) by {}",
            e.outcome.map(|o| o.as_str()).unwrap_or("resolved"),
            e.resolved_by.as_deref().unwrap_or("someone")
        ));
    }
    match &e.claimed_by {
        Some(holder) if holder != user => Some(format!(
            "{holder} has claimed this escalation since {}; ask them to release it",
            e.claimed_at.map(|t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string()).unwrap_or_default()
        )),
        _ => None,
    }
}

async fn current(db: &Db, id: &str) -> StoreResult<Escalation> {
    get(db, id).await?.ok_or_else(|| StoreError::NotFound(format!("escalation {id}")))
}

/// Claims an open escalation for `user`; claiming one you hold is a no-op.
pub async fn claim(db: &Db, id: &str, user: &str) -> StoreResult<Escalation> {
    let sql = "UPDATE escalations SET claimed_by = $1, claimed_at = $2 \
               WHERE id = $3 AND status = 'open' AND claimed_by IS NULL";
    let n = on_pool!(db, pool => sqlx::query(sql).bind(user).bind(now_ms()).bind(id).execute(pool).await.map(|r| r.rows_affected()))?;
    let e = current(db, id).await?;
    if n == 0 {
        if let Some(why) = refusal(&e, user) {
            return Err(StoreError::Conflict(why));
        }
    } else {
        event(db, id, Some(user), "claimed", None).await?;
    }
    Ok(e)
}

pub async fn release(db: &Db, id: &str, user: &str) -> StoreResult<Escalation> {
    let sql = "UPDATE escalations SET claimed_by = NULL, claimed_at = NULL \
               WHERE id = $1 AND status = 'open' AND claimed_by = $2";
    let n = on_pool!(db, pool => sqlx::query(sql).bind(id).bind(user).execute(pool).await.map(|r| r.rows_affected()))?;
    let e = current(db, id).await?;
    if n == 0 {
        return Err(StoreError::Conflict(
            refusal(&e, user).unwrap_or_else(|| "you do not hold the claim on this escalation".into()),
        ));
    }
    event(db, id, Some(user), "released", None).await?;
    Ok(e)
}

/// Ticks or unticks a remaining item; only the person holding the claim may.
pub async fn set_item(db: &Db, id: &str, user: &str, index: usize, done: bool) -> StoreResult<Escalation> {
    let e = current(db, id).await?;
    if let Some(why) = refusal(&e, user) {
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
    let sql = "UPDATE escalations SET what_remains = $1 WHERE id = $2 AND status = 'open' AND claimed_by = $3";
    let n = on_pool!(db, pool => sqlx::query(sql).bind(json(&items)).bind(id).bind(user).execute(pool).await.map(|r| r.rows_affected()))?;
    if n == 0 {
        return Err(StoreError::Conflict("the escalation changed while ticking; reload it".into()));
    }
    event(db, id, Some(user), if done { "item_done" } else { "item_undone" }, Some(&description)).await?;
    current(db, id).await
}

/// Resolves an open escalation that is unclaimed or claimed by `user`.
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
) -> StoreResult<Escalation> {
    let before = current(db, id).await?;
    let sql = "UPDATE escalations SET status = 'resolved', resolved_by = $1, resolved_at = $2, outcome = $3, \
               resolution_note = $4, instructions = $5 \
               WHERE id = $6 AND status = 'open' AND (claimed_by = $1 OR $7)";
    let n = on_pool!(db, pool => sqlx::query(sql)
        .bind(user)
        .bind(now_ms())
        .bind(outcome.as_str())
        .bind(note)
        .bind(instructions)
        .bind(id)
        .bind(override_claim)
        .execute(pool)
        .await
        .map(|r| r.rows_affected()))?;
    let e = current(db, id).await?;
    if n == 0 {
        let why = refusal(&e, user).unwrap_or_else(|| match &e.claimed_by {
            None => "claim this escalation before resolving it, so nobody else works on it meanwhile".into(),
            Some(_) => "the escalation changed; reload it".into(),
        });
        return Err(StoreError::Conflict(why));
    }
    let overridden = match (&before.claimed_by, override_claim) {
        (Some(holder), true) if holder != user => format!(" (overriding {holder}'s claim)"),
        (None, true) => " (without a claim, as administrator)".to_string(),
        _ => String::new(),
    };
    event(db, id, Some(user), "resolved", Some(&format!("{outcome}{overridden}: {note}"))).await?;
    Ok(e)
}

/// Escalations whose `escalation.opened` webhook is not queued yet.
pub async fn unannounced(db: &Db) -> StoreResult<Vec<Escalation>> {
    let sql = format!("SELECT {COLUMNS} FROM escalations WHERE notified_at IS NULL ORDER BY opened_at LIMIT 100");
    let rows: Vec<Row> = on_pool!(db, pool => sqlx::query_as(&sql).fetch_all(pool).await)?;
    Ok(rows.into_iter().map(Escalation::from).collect())
}

/// Marks the escalations `due` announced and queues the webhook `event` makes of each one
/// this caller marked (of several instances, one marks each): one transaction, so an
/// escalation is never marked without its webhook, and one write however many opened
/// (a write per escalation kept taking the lock from the ingest writer). Returns the ids
/// this caller announced.
pub async fn announce(
    db: &Db,
    due: &[Escalation],
    event: impl Fn(&Escalation) -> crate::notify::Event,
    targets: &[crate::notify::WebhookTarget],
) -> StoreResult<Vec<String>> {
    if due.is_empty() {
        return Ok(Vec::new());
    }
    let now = now_ms();
    on_pool!(db, pool => {
        let mut tx = pool.begin().await?;
        let mut announced: Vec<String> = Vec::new();
        for chunk in super::spans::cacheable_chunks(due, 100) {
            let mut q = sqlx::QueryBuilder::new("UPDATE escalations SET notified_at = ");
            q.push_bind(now).push(" WHERE notified_at IS NULL AND id IN (");
            let mut list = q.separated(", ");
            for e in chunk {
                list.push_bind(e.id.as_str());
            }
            q.push(") RETURNING id");
            announced.extend(q.build_query_scalar::<String>().fetch_all(&mut *tx).await?);
        }
        for e in due.iter().filter(|e| announced.contains(&e.id)) {
            super::webhooks::enqueue_in(&mut *tx, &event(e), targets).await?;
        }
        tx.commit().await?;
        Ok(announced)
    })
}

/// The details sent as span attributes (`escalation.blocking_fact`, ...).
pub fn details_from_attributes(
    d: &crate::ingest::normalize::EscalationDetails,
) -> (Option<String>, Vec<DoneItem>, Vec<RemainingItem>) {
    let done: Vec<DoneItem> = d.what_was_done.clone().and_then(|v| done_items(v)).unwrap_or_default();
    let remains = d.what_remains.clone().map(remaining_items).unwrap_or_default();
    (d.blocking_fact.clone(), done, remains)
}

/// `what_was_done` as sent: an array of objects (the API's items) or of plain texts.
fn done_items(v: serde_json::Value) -> Option<Vec<DoneItem>> {
    let items = v.as_array()?;
    Some(
        items
            .iter()
            .filter_map(|item| match item {
                serde_json::Value::String(text) => Some(DoneItem {
                    tool: None,
                    description: Some(text.clone()),
                    external_id: None,
                    idempotency_key: None,
                    at: None,
                }),
                other => serde_json::from_value(other.clone()).ok(),
            })
            .collect(),
    )
}

/// `what_remains` as sent: an array of texts or of `{description}` objects.
fn remaining_items(v: serde_json::Value) -> Vec<RemainingItem> {
    v.as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter_map(|item| {
            let description =
                item.as_str().map(str::to_string).or_else(|| item["description"].as_str().map(str::to_string))?;
            Some(RemainingItem { description, done: false, done_by: None })
        })
        .collect()
}

/// The details an `escalation` span event carries (the same fields as the API), if any.
pub fn details_from_events(
    events: &[serde_json::Value],
) -> Option<(Option<String>, Vec<DoneItem>, Vec<RemainingItem>)> {
    let attrs = events.iter().find(|e| e["name"] == "escalation")?.get("attributes")?;
    let field = |key: &str| attrs.get(key).or_else(|| attrs.get(&format!("escalation.{key}")));
    let text = |key: &str| field(key).and_then(|v| v.as_str()).map(str::to_string);
    let parse = |key: &str| -> Option<serde_json::Value> {
        match field(key)? {
            serde_json::Value::String(s) => serde_json::from_str(s).ok(),
            other => Some(other.clone()),
        }
    };
    let done: Vec<DoneItem> = parse("what_was_done").and_then(done_items).unwrap_or_default();
    let remains: Vec<RemainingItem> = parse("what_remains").map(remaining_items).unwrap_or_default();
    Some((text("blocking_fact"), done, remains))
}

/// Inside the ingest transaction: opens an escalation for every recomputed run that
/// escalated (terminal reason `escalated`, or a span carrying `escalation.reason`) and has
/// none yet, with the details of an `escalation` span event when one came; marks an
/// API-filed one as also seen in the traces.
macro_rules! open_from_traces {
    ($tx:ident, $derived:expr, $spans:expr, $now:expr) => {{
        use $crate::storage::spans::cacheable_chunks;
        let escalated: Vec<&$crate::canonical::RunSummary> = $derived
            .iter()
            .map(|d| &d.run)
            .filter(|run| {
                run.terminal_reason == $crate::canonical::TerminalReason::Escalated || run.escalation_reason.is_some()
            })
            .collect();
        // Each run's latest escalation, if it has one: (opened_at, id, from_trace).
        let mut latest: std::collections::BTreeMap<String, (i64, String, bool)> = std::collections::BTreeMap::new();
        for chunk in cacheable_chunks(&escalated, 500) {
            let mut q =
                sqlx::QueryBuilder::new("SELECT run_id, opened_at, id, from_trace FROM escalations WHERE run_id IN (");
            let mut list = q.separated(", ");
            for run in chunk {
                list.push_bind(run.run_id.as_str());
            }
            q.push(")");
            let rows: Vec<(String, i64, String, bool)> = q.build_query_as().fetch_all(&mut *$tx).await?;
            for (run, opened_at, id, from_trace) in rows {
                let candidate = (opened_at, id, from_trace);
                match latest.get(&run) {
                    Some(kept) if (kept.0, &kept.1) >= (candidate.0, &candidate.1) => {}
                    _ => {
                        latest.insert(run, candidate);
                    }
                }
            }
        }
        // An API-filed escalation the traces now report too is marked so; a run without
        // one gets a new one, with the details of an `escalation` span event if one came.
        let mut merged: Vec<&str> = Vec::new();
        let mut opened = Vec::new();
        for run in &escalated {
            match latest.get(&run.run_id) {
                Some((_, _, true)) => {}
                Some((_, id, false)) => merged.push(id.as_str()),
                None => {
                    let raw = run.escalation_reason.clone().unwrap_or_else(|| "unspecified".into());
                    let (reason, reason_text) = match $crate::escalations::EscalationReason::from_words(&raw) {
                        Some(r) => (r, None),
                        None => ($crate::escalations::EscalationReason::Other, Some(raw)),
                    };
                    let details = $spans
                        .iter()
                        .filter(|s| run.trace_ids.contains(&s.trace_id))
                        .find_map(|s| $crate::storage::escalations::details_from_events(&s.events))
                        .or_else(|| {
                            $spans
                                .iter()
                                .filter(|s| run.trace_ids.contains(&s.trace_id))
                                .find_map(|s| s.escalation_details.as_ref())
                                .map($crate::storage::escalations::details_from_attributes)
                        });
                    let (blocking, done, remains) = details.unwrap_or_default();
                    opened.push((
                        $crate::storage::escalations::new_id(),
                        *run,
                        reason.as_str(),
                        reason_text,
                        blocking,
                        $crate::storage::escalations::json(&done),
                        $crate::storage::escalations::json(&remains),
                    ));
                }
            }
        }
        for chunk in cacheable_chunks(&merged, 500) {
            let mut q = sqlx::QueryBuilder::new("UPDATE escalations SET from_trace = ");
            q.push_bind(true).push(" WHERE id IN (");
            let mut list = q.separated(", ");
            for id in chunk {
                list.push_bind(*id);
            }
            q.push(")");
            q.build().execute(&mut *$tx).await?;
        }
        for chunk in cacheable_chunks(&opened, 100) {
            let mut q = sqlx::QueryBuilder::new(
                "INSERT INTO escalations (id, run_id, reason, reason_text, blocking_fact, what_was_done, \
                 what_remains, from_api, from_trace, agent, status, opened_at) ",
            );
            q.push_values(chunk, |mut row, (id, run, reason, reason_text, blocking, done, remains)| {
                row.push_bind(id.as_str())
                    .push_bind(run.run_id.as_str())
                    .push_bind(*reason)
                    .push_bind(reason_text.as_deref())
                    .push_bind(blocking.as_deref())
                    .push_bind(done.as_str())
                    .push_bind(remains.as_str())
                    .push_bind(false)
                    .push_bind(true)
                    .push_bind(run.agent.as_deref())
                    .push_bind("open")
                    .push_bind($now);
            });
            q.build().execute(&mut *$tx).await?;
        }
        // The timeline's first entry for each, after the rows it refers to.
        let events: Vec<(&str, &str, &str)> = merged
            .iter()
            .map(|id| (*id, "merged", "the run's traces report the same escalation"))
            .chain(opened.iter().map(|(id, ..)| (id.as_str(), "opened", "opened from the run's traces")))
            .collect();
        for chunk in cacheable_chunks(&events, 200) {
            let mut q =
                sqlx::QueryBuilder::new("INSERT INTO escalation_events (escalation_id, at, actor, kind, detail) ");
            q.push_values(chunk, |mut row, (id, kind, detail)| {
                row.push_bind(*id).push_bind($now).push_bind(None::<&str>).push_bind(*kind).push_bind(*detail);
            });
            q.build().execute(&mut *$tx).await?;
        }
    }};
}
pub(crate) use open_from_traces;
