//! Reading runs: the filtered, keyset-paginated list and one run in full.

use super::spans::FACT_COLUMNS;
use super::{from_ms, now_ms, on_pool, Db, StoreResult};
use crate::canonical::{DuplicateView, RunDetail, RunSummary, TerminalReason, Trigger};
use crate::ingest::derive::{derive_run, SpanFacts};
use serde::{Deserialize, Serialize};

/// Derived flags a run can be filtered by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunFlag {
    /// At least one duplicate side effect.
    Duplicates,
    /// Completed without calling a read tool.
    NoRead,
    /// At least one tool call ran without a valid approval.
    ApprovalViolation,
}

impl std::str::FromStr for RunFlag {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "duplicates" => Ok(RunFlag::Duplicates),
            "no_read" => Ok(RunFlag::NoRead),
            "approval_violation" => Ok(RunFlag::ApprovalViolation),
            other => Err(format!(
                "unknown flag `{other}` (expected duplicates, no_read or approval_violation)"
            )),
        }
    }
}

/// A run-list query. Times are Unix nanoseconds on the run's start.
#[derive(Debug, Clone, Default)]
pub struct RunQuery {
    pub terminal_reason: Option<TerminalReason>,
    pub agent: Option<String>,
    pub since_ns: Option<i64>,
    pub until_ns: Option<i64>,
    pub flag: Option<RunFlag>,
    /// The cursor of the previous page's last run.
    pub after: Option<Cursor>,
    pub limit: i64,
}

/// Keyset position: runs are listed newest first by (start, run id).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    pub started_ns: i64,
    pub run_id: String,
}

impl Cursor {
    /// An opaque text form for URLs: `<started_ns>.<hex of run id>`.
    pub fn encode(&self) -> String {
        format!(
            "{}.{}",
            self.started_ns,
            hex::encode(self.run_id.as_bytes())
        )
    }

    pub fn decode(text: &str) -> Result<Cursor, String> {
        let bad = || {
            format!("invalid cursor `{text}`: pass the next_cursor of the previous page unchanged")
        };
        let (ns, id) = text.split_once('.').ok_or_else(bad)?;
        let started_ns = ns.parse().map_err(|_| bad())?;
        let run_id = String::from_utf8(hex::decode(id).map_err(|_| bad())?).map_err(|_| bad())?;
        Ok(Cursor { started_ns, run_id })
    }
}

/// One page of runs and the cursor for the next, if there is one.
#[derive(Debug, Clone, PartialEq)]
pub struct RunPage {
    pub runs: Vec<RunSummary>,
    pub next: Option<Cursor>,
}

#[derive(Debug, sqlx::FromRow)]
struct RunRow {
    run_id: String,
    agent: Option<String>,
    run_trigger: String,
    terminal_reason: String,
    started_ns: i64,
    ended_ns: Option<i64>,
    wall_clock_ms: Option<i64>,
    cost: f64,
    input_tokens: i64,
    output_tokens: i64,
    cache_tokens: i64,
    steps: i64,
    tool_calls: i64,
    trace_ids: String,
    duplicate_side_effects: i64,
    deduped_calls: i64,
    completed_without_read: bool,
    approval_violations: i64,
    escalation_reason: Option<String>,
    duplicates: String,
}

const RUN_COLUMNS: &str = "run_id, agent, run_trigger, terminal_reason, started_ns, ended_ns, wall_clock_ms, cost, \
    input_tokens, output_tokens, cache_tokens, steps, tool_calls, trace_ids, duplicate_side_effects, deduped_calls, \
    completed_without_read, approval_violations, escalation_reason, duplicates";

impl RunRow {
    fn summary(&self) -> RunSummary {
        RunSummary {
            run_id: self.run_id.clone(),
            agent: self.agent.clone(),
            trigger: Trigger::parse(&self.run_trigger).unwrap_or(Trigger::Unknown),
            terminal_reason: TerminalReason::parse(&self.terminal_reason)
                .unwrap_or(TerminalReason::Running),
            started_at: (self.started_ns > 0).then(|| from_ms(self.started_ns / 1_000_000)),
            ended_at: self.ended_ns.map(|ns| from_ms(ns / 1_000_000)),
            wall_clock_ms: self.wall_clock_ms,
            cost: self.cost,
            input_tokens: self.input_tokens,
            output_tokens: self.output_tokens,
            cache_tokens: self.cache_tokens,
            steps: self.steps,
            tool_calls: self.tool_calls,
            trace_ids: serde_json::from_str(&self.trace_ids).unwrap_or_default(),
            duplicate_side_effects: self.duplicate_side_effects,
            deduped_calls: self.deduped_calls,
            completed_without_read: self.completed_without_read,
            approval_violations: self.approval_violations,
            escalation_reason: self.escalation_reason.clone(),
        }
    }
}

pub async fn list(db: &Db, q: &RunQuery) -> StoreResult<RunPage> {
    let limit = q.limit.clamp(1, 500);
    let flag_sql = match q.flag {
        None => "",
        Some(RunFlag::Duplicates) => " AND duplicate_side_effects > 0",
        Some(RunFlag::NoRead) => " AND completed_without_read = $8",
        Some(RunFlag::ApprovalViolation) => " AND approval_violations > 0",
    };
    let sql = format!(
        "SELECT {RUN_COLUMNS} FROM runs WHERE ($1 IS NULL OR terminal_reason = $1) AND ($2 IS NULL OR agent = $2) \
         AND ($3 IS NULL OR started_ns >= $3) AND ($4 IS NULL OR started_ns < $4) \
         AND ($5 IS NULL OR started_ns < $5 OR (started_ns = $5 AND run_id < $6)){flag_sql} \
         ORDER BY started_ns DESC, run_id DESC LIMIT $7"
    );
    let reason = q.terminal_reason.map(|r| r.as_str());
    let (after_ns, after_id) = match &q.after {
        Some(c) => (Some(c.started_ns), Some(c.run_id.as_str())),
        None => (None, None),
    };
    let with_flag = matches!(q.flag, Some(RunFlag::NoRead));
    let rows: Vec<RunRow> = on_pool!(db, pool => {
        let query = sqlx::query_as(&sql)
            .bind(reason)
            .bind(q.agent.as_deref())
            .bind(q.since_ns)
            .bind(q.until_ns)
            .bind(after_ns)
            .bind(after_id)
            .bind(limit + 1);
        let query = if with_flag { query.bind(true) } else { query };
        query.fetch_all(pool).await
    })?;
    let more = rows.len() as i64 > limit;
    let runs: Vec<RunSummary> = rows
        .iter()
        .take(limit as usize)
        .map(RunRow::summary)
        .collect();
    let next = if more {
        rows.get(limit as usize - 1).map(|r| Cursor {
            started_ns: r.started_ns,
            run_id: r.run_id.clone(),
        })
    } else {
        None
    };
    Ok(RunPage { runs, next })
}

/// One run with its steps, tool calls and duplicates, derived from its spans.
pub async fn get(db: &Db, run_id: &str) -> StoreResult<Option<RunDetail>> {
    let sql = format!("SELECT {RUN_COLUMNS} FROM runs WHERE run_id = $1");
    let row: Option<RunRow> =
        on_pool!(db, pool => sqlx::query_as(&sql).bind(run_id).fetch_optional(pool).await)?;
    let Some(row) = row else { return Ok(None) };
    let facts_sql = format!("SELECT {FACT_COLUMNS} FROM spans WHERE run_id = $1");
    let facts: Vec<SpanFacts> =
        on_pool!(db, pool => sqlx::query_as(&facts_sql).bind(run_id).fetch_all(pool).await)?;
    let derived = derive_run(run_id, &facts);
    let duplicates: Vec<DuplicateView> = serde_json::from_str(&row.duplicates).unwrap_or_default();
    Ok(Some(RunDetail {
        run: row.summary(),
        step_list: derived.step_list,
        tool_call_list: derived.tool_call_list,
        duplicates,
    }))
}

/// Deletes runs that started before the retention horizon, with their spans and bodies,
/// and bodies older than the body retention. Returns (runs, bodies) deleted.
pub async fn apply_retention(
    db: &Db,
    keep_runs_days: i64,
    keep_bodies_days: i64,
) -> StoreResult<(u64, u64)> {
    let day_ns: i64 = 86_400 * 1_000_000_000;
    let now_ns = now_ms() * 1_000_000;
    let runs_before = now_ns - keep_runs_days * day_ns;
    let bodies_before = now_ns - keep_bodies_days * day_ns;
    let result: Result<(u64, u64), sqlx::Error> = on_pool!(db, pool => {
        async {
            let mut tx = pool.begin().await?;
            let old_runs = "SELECT run_id FROM runs WHERE started_ns < $1";
            for table in ["span_bodies", "spans", "trace_runs"] {
                sqlx::query(&format!("DELETE FROM {table} WHERE run_id IN ({old_runs})"))
                    .bind(runs_before)
                    .execute(&mut *tx)
                    .await?;
            }
            let runs = sqlx::query("DELETE FROM runs WHERE started_ns < $1")
                .bind(runs_before)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            let bodies = sqlx::query(
                "DELETE FROM span_bodies WHERE run_id IN \
                 (SELECT run_id FROM runs WHERE ended_ns IS NOT NULL AND ended_ns < $1)",
            )
            .bind(bodies_before)
            .execute(&mut *tx)
            .await?
            .rows_affected();
            tx.commit().await?;
            Ok((runs, bodies))
        }
        .await
    });
    Ok(result?)
}

/// Bodies stored for a run, keyed by span id (for replay fixtures and the span panel).
pub async fn bodies(db: &Db, run_id: &str) -> StoreResult<Vec<(String, serde_json::Value)>> {
    let sql = "SELECT span_id, bodies FROM span_bodies WHERE run_id = $1";
    let rows: Vec<(String, String)> =
        on_pool!(db, pool => sqlx::query_as(sql).bind(run_id).fetch_all(pool).await)?;
    Ok(rows
        .into_iter()
        .map(|(id, b)| (id, serde_json::from_str(&b).unwrap_or_default()))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_reject_garbage() {
        let c = Cursor {
            started_ns: 1_700_000_000_000_000_000,
            run_id: "run/with.dots".into(),
        };
        assert_eq!(Cursor::decode(&c.encode()), Ok(c));
        assert!(Cursor::decode("nonsense")
            .unwrap_err()
            .contains("invalid cursor"));
        assert!(Cursor::decode("12.zz").is_err());
    }
}
