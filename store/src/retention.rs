//! Retention: runs that started before the horizon go with everything stored for them
//! (their counts in the trends' rollups too), and bodies go earlier than spans; settled
//! guarded calls go too, never inside the longest ledger window. On PostgreSQL a day past
//! the horizon whose runs all started before it goes whole with its partitions
//! ([`days`]); every other run goes in batches of 500, each its own transaction, resting
//! twice as long as each batch took, so a large sweep never holds the write lock for long
//! and ingest goes on at most a third slower while it runs.

mod days;

pub use days::DroppedDay;

use super::sql::{Sql, Tx};
use super::trends::DayRollups;
use super::{now_ms, partitions, reason_counts, tools, trends, Db, StoreResult};
use domain::trends::RunPoint;
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
/// The tables holding a run's span-side rows, by run number (`run_tools` goes on its
/// own, counting each tool's runs down). On PostgreSQL they are partitioned by day, and a
/// day past the horizon goes whole ([`days`]).
const SPAN_TABLES: [&str; 2] = ["body_chunks", "span_chunks"];
/// The other tables holding a run's rows by run number, never partitioned (`runs` last).
const RUN_TABLES: [&str; 2] = ["irreversible_calls", "trace_runs"];

/// What one pass of retention deleted.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Swept {
    /// Runs deleted, those of the days dropped whole included.
    pub runs: u64,
    /// Spans whose bodies were deleted.
    pub bodies: u64,
    /// Days whose partitions were dropped (PostgreSQL).
    pub days: Vec<DroppedDay>,
}

/// Deletes runs that started before the retention horizon, with their spans and bodies,
/// and bodies older than the body retention.
pub async fn apply(db: &Db, keep_runs_days: i64, keep_bodies_days: i64) -> StoreResult<Swept> {
    let day_ns: i64 = 86_400 * 1_000_000_000;
    let now_ns = now_ms() * 1_000_000;
    let horizon_ms = now_ms() - keep_runs_days * 86_400_000;
    let mut runs = 0u64;
    // Runs numbered into these days lose their span-side rows with their day's
    // partitions, after the batches below; the runs of a day that goes whole are left to
    // it altogether.
    let dropping = partitions::droppable_days(db, horizon_ms).await?;
    let in_dropped_day = |run_no: i64| dropping.iter().any(|d| d.holds(run_no));
    let whole = days::whole(db, &dropping, horizon_ms).await?;
    for between in days::between(&whole) {
        runs += sweep_batches(db, now_ns - keep_runs_days * day_ns, between, &in_dropped_day).await?;
    }
    let days = days::drop_expired(db, &dropping, horizon_ms).await?;
    runs += days.iter().map(|d| d.runs).sum::<u64>();
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
    Ok(Swept { runs, bodies: bodies.iter().map(|(n,)| *n).sum::<i64>() as u64, days })
}

/// Deletes the runs numbered in `(after, before)` that started before `started_before_ns`,
/// in batches; returns how many went. The span-side rows of runs `in_dropped_day` are left
/// to their day's partitions.
async fn sweep_batches(
    db: &Db,
    started_before_ns: i64,
    (mut after_run_no, before_run_no): (i64, i64),
    in_dropped_day: &impl Fn(i64) -> bool,
) -> StoreResult<u64> {
    let mut runs = 0u64;
    loop {
        let batch_started = std::time::Instant::now();
        // The runs' search terms are found in their stored spans, read inside this
        // transaction under the lock the write path takes (the write lock on SQLite, the
        // run rows on PostgreSQL), so a span arriving meanwhile cannot leave one behind.
        let mut tx = Tx::begin_bulk_write(db).await?;
        let old_runs = tx.expired_runs_locked(started_before_ns, (after_run_no, before_run_no), RUNS_PER_BATCH).await?;
        if old_runs.is_empty() {
            break;
        }
        after_run_no = old_runs.iter().map(|(_, no)| *no).max().unwrap_or(after_run_no);
        let run_nos = || old_runs.iter().map(|(_, no)| *no);
        let numbered: Vec<(i64, &str)> =
            old_runs.iter().map(|(id, no)| (*no, id.as_str())).filter(|(no, _)| !in_dropped_day(*no)).collect();
        if !numbered.is_empty() {
            tx.forget_terms(&numbered).await?;
            for table in SPAN_TABLES {
                let mut sql = Sql::new(format!("DELETE FROM {table} WHERE run_no IN "));
                sql.list(numbered.iter().map(|(no, _)| *no));
                tx.execute(sql).await?;
            }
            let mut sql = Sql::new("DELETE FROM run_tools WHERE run_no IN ");
            sql.list(numbered.iter().map(|(no, _)| *no)).push(" RETURNING run_no, tool_name");
            let mut tool_deltas = tools::RunDeltas::default();
            for (run_no, tool) in tx.fetch_all::<(i64, String)>(sql).await? {
                tool_deltas.add(partitions::day_of_run_no(run_no), &tool, -1);
            }
            tools::adjust_runs(&mut tx, tool_deltas.by_tool().iter()).await?;
            tools::count_days(&mut tx, &tool_deltas).await?;
        }
        for table in RUN_TABLES {
            let mut sql = Sql::new(format!("DELETE FROM {table} WHERE run_no IN "));
            sql.list(run_nos());
            tx.execute(sql).await?;
        }
        let mut sql = Sql::new("DELETE FROM runs WHERE run_no IN ");
        sql.list(run_nos()).push(" RETURNING run_no, ").push(trends::POINT_COLUMNS);
        let gone: Vec<trends::NumberedRow> = tx.fetch_all(sql).await?;
        tx.forget_run_ids(&old_runs.iter().map(|(id, _)| id.as_str()).collect::<Vec<_>>()).await?;
        let mut departed = Departed::default();
        departed.add(gone.into_iter().map(trends::numbered));
        runs += departed.runs;
        departed.subtract(&mut tx).await?;
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
    Ok(runs)
}

/// Runs deleted one by one, as the counts kept of them see them.
#[derive(Default)]
struct Departed {
    runs: u64,
    rollup: DayRollups,
    reasons: BTreeMap<String, i64>,
}

impl Departed {
    /// Adds the runs of `rows`, each with its number.
    fn add(&mut self, rows: impl IntoIterator<Item = (i64, trends::PointRow)>) {
        let points: Vec<(i64, RunPoint)> = rows.into_iter().map(|(no, row)| (no, trends::point(row))).collect();
        for (_, point) in &points {
            *self.reasons.entry(point.reason.as_str().to_string()).or_default() -= 1;
        }
        self.rollup.add_all(points.iter().map(|(no, point)| (*no, point)), -1);
        self.runs += points.len() as u64;
    }

    /// Takes the runs out of the trends' rollups (the rows of their arrival days) and the
    /// per-reason totals.
    async fn subtract(self, tx: &mut Tx) -> StoreResult<()> {
        trends::apply(tx, &self.rollup.without_zeros()).await?;
        reason_counts::apply(tx, &self.reasons).await
    }
}
