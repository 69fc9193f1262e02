//! Readying a new PostgreSQL connection before it serves a page.
//!
//! `runs`, the span-side tables and the trends' rollups are partitioned by day (ADR
//! 0016, 0018, 0023), and a statement on one of them is planned against every day's
//! partition and each partition's indexes. A connection reads what it needs of them from
//! the catalog the first time it plans such a statement and keeps it for its life; that
//! first plan costs tens of milliseconds with a month of partitions, later ones about a
//! millisecond. A page read on a new connection paid it: the first view after a start,
//! and the first view that needed a second connection at once (the run list's counts
//! beside its list).
//!
//! So each new connection plans, without running, one statement per partitioned table
//! ([`STATEMENTS`]) as it opens. `Db::connect` opens [`WARM_CONNECTIONS`] of them, and
//! the server all the pool may hold before it serves. Before the first migration the
//! tables do not exist yet; the statements then fail, which is no error: there is
//! nothing to ready.

use sqlx::postgres::PgConnection;
use sqlx::Executor;

/// Connections `Db::connect` opens and readies before it returns: enough for a command or
/// a test; `flightdeck serve` then opens every one the pool may hold
/// (`Db::open_every_connection`).
pub const WARM_CONNECTIONS: u32 = 4;

/// Planned (`EXPLAIN`, not run) on each new connection. None names a run number, so none
/// is pruned to one day at planning: each opens every partition of its table and every
/// index of each, and looks up the statistics of the columns the pages filter on.
pub const STATEMENTS: [&str; 7] = [
    "EXPLAIN SELECT run_no FROM runs WHERE agent = '' AND run_trigger = '' AND terminal_reason = '' \
     AND model = '' AND started_ns > 0 AND cost > 0 AND wall_clock_ms > 0 AND duplicate_side_effects > 0 \
     AND completed_without_read AND approval_violations > 0 AND run_id = '' ORDER BY started_ns DESC LIMIT 1",
    "EXPLAIN SELECT run_no FROM run_tools WHERE tool_name = '' AND started_ns > 0 AND terminal_reason = '' \
     ORDER BY started_ns DESC LIMIT 1",
    "EXPLAIN SELECT 1 FROM span_chunks WHERE run_no = (SELECT run_no FROM run_ids WHERE run_id = '')",
    "EXPLAIN SELECT 1 FROM body_chunks WHERE run_no = (SELECT run_no FROM run_ids WHERE run_id = '')",
    "EXPLAIN SELECT run_no FROM run_terms WHERE term = ''",
    "EXPLAIN SELECT runs FROM trend_runs WHERE period_ms = 0 AND start_ms > 0 AND agent = '' AND runs <> 0",
    "EXPLAIN SELECT runs FROM trend_values WHERE period_ms = 0 AND scope = '' AND measure = '' AND start_ms > 0 \
     AND runs <> 0",
];

/// Plans [`STATEMENTS`] on `conn`. Returns how many were planned (fewer before the
/// migrations have made the tables).
pub async fn ready(conn: &mut PgConnection) -> usize {
    let mut planned = 0;
    for statement in STATEMENTS {
        match conn.execute(statement).await {
            Ok(_) => planned += 1,
            Err(e) => tracing::debug!(error = %e, "a new connection's warm-up statement failed"),
        }
    }
    planned
}
