//! What the trends page reads: the few columns of the runs that started in a window, and
//! the instants escalations and approvals changed state in it. Each query is a range scan
//! on an index over its time column; the bucketing and the quantiles happen in Rust
//! (`domain::trends`), which keeps the SQL identical on both backends.

use super::sql::Sql;
use super::{Db, StoreResult};
use domain::canonical::TerminalReason;
use domain::trends::{Inputs, RunPoint, Window};

const NS_PER_MS: i64 = 1_000_000;

type RunRow = (i64, String, f64, i64, i64, i64, bool, Option<String>, Option<String>);

/// Runs that started in `[from_ms, to_ms)` (of `agent` only, when given), by the
/// `runs_started` index (`runs_agent_started` for one agent). Nearly all its time is
/// scanning and decoding rows; grouping in SQL is no faster on SQLite, and the cost
/// quantiles need every value anyway.
pub async fn runs(db: &Db, from_ms: i64, to_ms: i64, agent: Option<&str>) -> StoreResult<Vec<RunPoint>> {
    let mut sql = Sql::new(
        "SELECT started_ns, terminal_reason, cost, tool_calls, deduped_calls, duplicate_side_effects, \
         completed_without_read, agent, model FROM runs WHERE started_ns >= ",
    );
    sql.bind(from_ms.saturating_mul(NS_PER_MS)).push(" AND started_ns < ").bind(to_ms.saturating_mul(NS_PER_MS));
    if let Some(agent) = agent {
        sql.push(" AND agent = ").bind(agent);
    }
    let rows: Vec<RunRow> = db.fetch_all(sql).await?;
    Ok(rows
        .into_iter()
        .map(|(started_ns, reason, cost, tool_calls, deduped_calls, duplicate_side_effects, no_read, agent, model)| {
            RunPoint {
                started_ms: started_ns.div_euclid(NS_PER_MS),
                reason: TerminalReason::parse(&reason).unwrap_or(TerminalReason::Running),
                cost,
                tool_calls,
                deduped_calls,
                duplicate_side_effects,
                completed_without_read: no_read,
                agent,
                model,
            }
        })
        .collect())
}

/// The values of one time column (Unix ms) inside `[from_ms, to_ms)`, of `agent`'s rows
/// when given. `column` and `and` are constants of this module, never input.
async fn instants(
    db: &Db,
    table: &str,
    column: &str,
    and: &str,
    (from_ms, to_ms): (i64, i64),
    agent: Option<&str>,
) -> StoreResult<Vec<i64>> {
    let mut sql = Sql::new(&format!("SELECT {column} FROM {table} WHERE {column} >= "));
    sql.bind(from_ms).push(&format!(" AND {column} < ")).bind(to_ms).push(and);
    if let Some(agent) = agent {
        sql.push(" AND agent = ").bind(agent);
    }
    let rows: Vec<(i64,)> = db.fetch_all(sql).await?;
    Ok(rows.into_iter().map(|(at,)| at).collect())
}

/// Everything the page charts for `window`.
pub async fn inputs(db: &Db, window: &Window) -> StoreResult<Inputs> {
    inputs_for(db, window, None).await
}

/// Everything the page charts for `window`, of one agent's runs, escalations, approvals
/// and replay results when `agent` is given. The calls the ledger stopped are counted
/// per hour, not per agent: with an agent they are left out (the page says so).
pub async fn inputs_for(db: &Db, window: &Window, agent: Option<&str>) -> StoreResult<Inputs> {
    let range = (window.start_ms, window.end_ms());
    let mut replays = super::replay_results::in_window(db, range.0, range.1).await?;
    if let Some(agent) = agent {
        replays.retain(|(_, a, _)| a == agent);
    }
    Ok(Inputs {
        runs: runs(db, range.0, range.1, agent).await?,
        escalations_opened: instants(db, "escalations", "opened_at", "", range, agent).await?,
        escalations_resolved: instants(db, "escalations", "resolved_at", "", range, agent).await?,
        approvals_requested: instants(db, "approvals", "created_at", "", range, agent).await?,
        // An expired request gets `decided_at = expires_at` and no decider: count it apart.
        approvals_decided: instants(
            db,
            "approvals",
            "decided_at",
            " AND status IN ('approved', 'approved_with_changes', 'denied')",
            range,
            agent,
        )
        .await?,
        approvals_expired: instants(db, "approvals", "decided_at", " AND status = 'expired'", range, agent).await?,
        ledger_deduped: match agent {
            Some(_) => Vec::new(),
            None => super::ledger::deduped_hours(db, range.0, range.1).await?,
        },
        replays,
    })
}
