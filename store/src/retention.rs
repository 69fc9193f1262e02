//! Retention: runs that started before the horizon go with everything stored for them
//! (their counts in the trends' rollups too), and bodies go earlier than spans; settled
//! guarded calls go too, never inside the longest ledger window. In batches of 500 runs,
//! each its own transaction, resting twice as long as each batch took, so a large sweep
//! never holds the write lock for long and ingest goes on at most a third slower while it
//! runs.

use super::sql::{Sql, Tx};
use super::write::run_rows;
use super::{now_ms, reason_counts, trends, Db, StoreResult};
use domain::trends::rollup::Rollup;
use std::collections::BTreeMap;

/// Runs per retention transaction.
const RUNS_PER_BATCH: i64 = 500;
/// After each batch the sweep rests this many times as long as the batch took, so it
/// uses at most a third of the write lock and of a core. Unpaced, a batch (reading the
/// runs' chunks for their search terms, then deleting) kept one of two cores busy back
/// to back, ingest's decoding threads (which run at a lower priority) starved, and
/// ingest slowed to a crawl for the whole sweep (`cargo xtask bench --sweep`,
/// docs/benchmarks.md).
const REST_PER_WORK: u32 = 2;
/// Every table holding a run's rows, by run number, children first (`runs` last).
/// `run_tools` goes on its own, counting each tool's runs down.
const RUN_TABLES: [&str; 4] = ["body_chunks", "span_chunks", "irreversible_calls", "trace_runs"];

/// Deletes runs that started before the retention horizon, with their spans and bodies,
/// and bodies older than the body retention. Returns (runs, bodies) deleted.
pub async fn apply(db: &Db, keep_runs_days: i64, keep_bodies_days: i64) -> StoreResult<(u64, u64)> {
    let day_ns: i64 = 86_400 * 1_000_000_000;
    let now_ns = now_ms() * 1_000_000;
    let mut runs = 0u64;
    loop {
        let batch_started = std::time::Instant::now();
        // The runs' search terms are found in their stored spans, read inside this
        // transaction under the lock the write path takes (the write lock on SQLite, the
        // run rows on PostgreSQL), so a span arriving meanwhile cannot leave one behind.
        let mut tx = Tx::begin_bulk_write(db).await?;
        let old_runs = tx.expired_runs_locked(now_ns - keep_runs_days * day_ns, RUNS_PER_BATCH).await?;
        if old_runs.is_empty() {
            break;
        }
        let numbered: Vec<(i64, &str)> = old_runs.iter().map(|(id, no)| (*no, id.as_str())).collect();
        tx.forget_terms(&numbered).await?;
        let run_nos = || old_runs.iter().map(|(_, no)| *no);
        for table in RUN_TABLES {
            let mut sql = Sql::new(format!("DELETE FROM {table} WHERE run_no IN "));
            sql.list(run_nos());
            tx.execute(sql).await?;
        }
        let mut sql = Sql::new("DELETE FROM run_tools WHERE run_no IN ");
        sql.list(run_nos()).push(" RETURNING tool_name");
        let tools_gone = tx.fetch_all::<(String,)>(sql).await?.into_iter().map(|(t,)| t);
        let tool_deltas = run_rows::runs_gone(tools_gone);
        run_rows::adjust_tool_runs(&mut tx, tool_deltas.iter()).await?;
        let mut sql = Sql::new("DELETE FROM runs WHERE run_no IN ");
        sql.list(run_nos()).push(" RETURNING ").push(trends::POINT_COLUMNS);
        let gone: Vec<trends::PointRow> = tx.fetch_all(sql).await?;
        runs += gone.len() as u64;
        let mut deltas: BTreeMap<String, i64> = BTreeMap::new();
        let mut rollup = Rollup::default();
        for point in gone.into_iter().map(trends::point) {
            *deltas.entry(point.reason.as_str().to_string()).or_default() -= 1;
            rollup.add(&point, -1);
        }
        trends::apply(&mut tx, &rollup.without_zeros()).await?;
        reason_counts::apply(&mut tx, &deltas).await?;
        let before_commit = batch_started.elapsed();
        tx.commit().await?;
        tracing::debug!(
            runs = old_runs.len(),
            work_ms = before_commit.as_millis() as u64,
            total_ms = batch_started.elapsed().as_millis() as u64,
            "retention batch"
        );
        tokio::time::sleep((batch_started.elapsed() * REST_PER_WORK).max(std::time::Duration::from_millis(5))).await;
    }
    // The trends' rows of the buckets those runs started in now count nothing.
    trends::forget_empty_before(db, (now_ns - keep_runs_days * day_ns) / 1_000_000).await?;
    // Counted in spans whose bodies went, as before bodies were stored per run.
    let mut sql = Sql::new(
        "DELETE FROM body_chunks WHERE run_no IN \
         (SELECT run_no FROM runs WHERE ended_ns IS NOT NULL AND ended_ns < ",
    );
    sql.bind(now_ns - keep_bodies_days * day_ns).push(") RETURNING spans");
    let bodies: Vec<(i64,)> = db.fetch_all(sql).await?;
    // Settled guarded calls go with the runs, but never inside the longest window a tool
    // policy may set: a retry must still find what was done.
    let longest_window_days = domain::policy::MAX_LEDGER_WINDOW_SECONDS / 86_400;
    super::ledger::prune(db, now_ms() - keep_runs_days.max(longest_window_days) * 86_400_000).await?;
    // Regression-test results are kept as long as runs (a trend older than its runs has
    // nothing left to look at).
    db.execute(super::sql::Sql::with_args(
        "DELETE FROM replay_results WHERE recorded_at < $1",
        vec![(now_ms() - keep_runs_days * 86_400_000).into()],
    ))
    .await?;
    Ok((runs, bodies.iter().map(|(n,)| *n).sum::<i64>() as u64))
}
