//! What the trends page reads: the few columns of the runs that started in a window, and
//! the instants escalations and approvals changed state in it. Each query is a range scan
//! on an index over its time column; the bucketing and the quantiles happen in Rust
//! (`crate::trends`), which keeps the SQL identical on both backends.

use super::{on_pool, Db, StoreResult};
use crate::canonical::TerminalReason;
use crate::trends::{Inputs, RunPoint, Window};

const NS_PER_MS: i64 = 1_000_000;

type RunRow = (i64, String, f64, i64, i64, i64, bool);

/// Runs that started in `[from_ms, to_ms)`, by the `runs_started` index. Over 100,000
/// runs this took 0.2 to 0.4 s on SQLite and 0.06 to 0.1 s on PostgreSQL (release build,
/// shared machine; `timing_thirty_days_of_100k_runs` in server/tests/trends.rs), nearly all
/// of it scanning and decoding rows. Grouping in SQL measured no faster on SQLite, and the
/// cost quantiles need every value anyway.
pub async fn runs(db: &Db, from_ms: i64, to_ms: i64) -> StoreResult<Vec<RunPoint>> {
    let sql = "SELECT started_ns, terminal_reason, cost, tool_calls, deduped_calls, duplicate_side_effects, \
               completed_without_read FROM runs WHERE started_ns >= $1 AND started_ns < $2";
    let rows: Vec<RunRow> = on_pool!(db, pool => sqlx::query_as(sql)
        .bind(from_ms.saturating_mul(NS_PER_MS))
        .bind(to_ms.saturating_mul(NS_PER_MS))
        .fetch_all(pool)
        .await?);
    Ok(rows
        .into_iter()
        .map(|(started_ns, reason, cost, tool_calls, deduped_calls, duplicate_side_effects, no_read)| RunPoint {
            started_ms: started_ns.div_euclid(NS_PER_MS),
            reason: TerminalReason::parse(&reason).unwrap_or(TerminalReason::Running),
            cost,
            tool_calls,
            deduped_calls,
            duplicate_side_effects,
            completed_without_read: no_read,
        })
        .collect())
}

/// The values of one time column (Unix ms) inside `[from_ms, to_ms)`. `column` and `and`
/// are constants of this module, never input.
async fn instants(db: &Db, table: &str, column: &str, and: &str, from_ms: i64, to_ms: i64) -> StoreResult<Vec<i64>> {
    let sql = format!("SELECT {column} FROM {table} WHERE {column} >= $1 AND {column} < $2{and}");
    let rows: Vec<i64> =
        on_pool!(db, pool => sqlx::query_scalar(&sql).bind(from_ms).bind(to_ms).fetch_all(pool).await?);
    Ok(rows)
}

/// Everything the page charts for `window`.
pub async fn inputs(db: &Db, window: &Window) -> StoreResult<Inputs> {
    let (from, to) = (window.start_ms, window.end_ms());
    Ok(Inputs {
        runs: runs(db, from, to).await?,
        escalations_opened: instants(db, "escalations", "opened_at", "", from, to).await?,
        escalations_resolved: instants(db, "escalations", "resolved_at", "", from, to).await?,
        approvals_requested: instants(db, "approvals", "created_at", "", from, to).await?,
        // An expired request gets `decided_at = expires_at` and no decider: count it apart.
        approvals_decided: instants(
            db,
            "approvals",
            "decided_at",
            " AND status IN ('approved', 'approved_with_changes', 'denied')",
            from,
            to,
        )
        .await?,
        approvals_expired: instants(db, "approvals", "decided_at", " AND status = 'expired'", from, to).await?,
        ledger_deduped: super::ledger::deduped_hours(db, from, to).await?,
        replays: super::replay_results::in_window(db, from, to).await?,
    })
}
