//! Silences in storage: created, ended early, listed, and the active ones read inside
//! the transaction that records an alert change (see `alerts::apply`).

use super::sql::{Sql, Tx};
use super::{from_ms, now_ms, Db, StoreError, StoreResult};
use domain::alerts::silences::{Silence, ValidSilence, Weekly};
use domain::alerts::AlertRule;

const COLUMNS: &str =
    "id, rule, agent, tool, reason, created_by, created_at, ends_at, ended_by, weekdays, from_minute, to_minute";

type Row = (
    String,
    Option<String>,
    Option<String>,
    Option<String>,
    String,
    String,
    i64,
    i64,
    Option<String>,
    Option<String>,
    Option<i64>,
    Option<i64>,
);

fn silence(row: Row) -> Silence {
    let (id, rule, agent, tool, reason, created_by, created_at, ends_at, ended_by, weekdays, from, to) = row;
    let schedule = match (weekdays, from, to) {
        (Some(days), Some(from_minute), Some(to_minute)) => {
            Some(Weekly { days: days.split(',').map(str::to_string).collect(), from_minute, to_minute })
        }
        _ => None,
    };
    Silence {
        schedule,
        id,
        rule: rule.as_deref().and_then(AlertRule::parse),
        agent,
        tool,
        reason,
        created_by,
        created_at: from_ms(created_at),
        ends_at: from_ms(ends_at),
        ended_by,
    }
}

fn new_id() -> String {
    format!("sil_{:016x}", rand::random::<u64>())
}

/// Records a silence starting now.
pub async fn create(db: &Db, s: &ValidSilence, by: &str) -> StoreResult<Silence> {
    let (id, now) = (new_id(), now_ms());
    let days = s.schedule.as_ref().map(|w| w.days.join(","));
    let sql = Sql::with_args(
        "INSERT INTO alert_silences (id, rule, agent, tool, reason, created_by, created_at, ends_at, weekdays, \
         from_minute, to_minute) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
        vec![
            id.as_str().into(),
            s.rule.map(|r| r.as_str()).into(),
            s.agent.as_deref().into(),
            s.tool.as_deref().into(),
            s.reason.as_str().into(),
            by.into(),
            now.into(),
            (now + s.minutes * 60_000).into(),
            days.as_deref().into(),
            s.schedule.as_ref().map(|w| w.from_minute).into(),
            s.schedule.as_ref().map(|w| w.to_minute).into(),
        ],
    );
    db.execute(sql).await?;
    get(db, &id).await?.ok_or_else(|| StoreError::NotFound(format!("silence `{id}`")))
}

pub async fn get(db: &Db, id: &str) -> StoreResult<Option<Silence>> {
    let sql = Sql::with_args(format!("SELECT {COLUMNS} FROM alert_silences WHERE id = $1"), vec![id.into()]);
    let rows: Vec<Row> = db.fetch_all(sql).await?;
    Ok(rows.into_iter().next().map(silence))
}

/// Ends an active silence now. A conditional update: ending one that is over already is
/// a conflict that says when it ended.
pub async fn end(db: &Db, id: &str, by: &str) -> StoreResult<Silence> {
    let now = now_ms();
    let sql = Sql::with_args(
        "UPDATE alert_silences SET ended_by = $2, ended_at = $3 WHERE id = $1 AND ended_by IS NULL AND ends_at > $3",
        vec![id.into(), by.into(), now.into()],
    );
    let changed = db.execute(sql).await?;
    let s = get(db, id).await?.ok_or_else(|| StoreError::NotFound(format!("silence `{id}`")))?;
    match (changed, &s.ended_by) {
        (1, _) => Ok(s),
        (_, Some(who)) => Err(StoreError::Conflict(format!("already ended by {who}"))),
        _ => Err(StoreError::Conflict(format!("it ended at {}", s.ends_at.format("%Y-%m-%d %H:%M UTC")))),
    }
}

/// Active silences first (soonest to end first), then the most recent ended ones.
pub async fn list(db: &Db, limit: i64) -> StoreResult<Vec<Silence>> {
    let sql = Sql::with_args(
        format!(
            "SELECT {COLUMNS} FROM alert_silences ORDER BY \
             CASE WHEN ended_by IS NULL AND ends_at > $1 THEN 0 ELSE 1 END, \
             CASE WHEN ended_by IS NULL AND ends_at > $1 THEN ends_at ELSE -created_at END LIMIT $2"
        ),
        vec![now_ms().into(), limit.into()],
    );
    let rows: Vec<Row> = db.fetch_all(sql).await?;
    Ok(rows.into_iter().map(silence).collect())
}

/// The silences active at `now_ms`, inside a transaction.
pub async fn active_in(tx: &mut Tx, now_ms: i64) -> StoreResult<Vec<Silence>> {
    let sql = Sql::with_args(
        format!("SELECT {COLUMNS} FROM alert_silences WHERE ended_by IS NULL AND ends_at > $1"),
        vec![now_ms.into()],
    );
    let rows: Vec<Row> = tx.fetch_all(sql).await?;
    Ok(rows.into_iter().map(silence).collect())
}

/// The statement for the agents of the runs `run_ids` (an unnamed agent reads as "").
fn agents_sql(run_ids: &[&str]) -> Sql {
    let mut sql = Sql::new(
        "SELECT DISTINCT COALESCE(agent, '') FROM runs WHERE run_no IN (SELECT run_no FROM run_ids WHERE run_id IN ",
    );
    sql.list(run_ids.iter().copied()).push(")");
    sql
}

/// The agents of the runs `run_ids`, inside a transaction.
pub async fn agents_of_runs(tx: &mut Tx, run_ids: &[&str]) -> StoreResult<Vec<String>> {
    if run_ids.is_empty() {
        return Ok(Vec::new());
    }
    let rows: Vec<(String,)> = tx.fetch_all(agents_sql(run_ids)).await?;
    Ok(rows.into_iter().map(|(a,)| a).collect())
}

/// [`agents_of_runs`] outside a transaction, for pages.
pub async fn agents_of(db: &Db, run_ids: &[&str]) -> StoreResult<Vec<String>> {
    if run_ids.is_empty() {
        return Ok(Vec::new());
    }
    let rows: Vec<(String,)> = db.fetch_all(agents_sql(run_ids)).await?;
    Ok(rows.into_iter().map(|(a,)| a).collect())
}
