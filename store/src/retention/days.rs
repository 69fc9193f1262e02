//! Whole days on PostgreSQL (ADR 0016, ADR 0018, ADR 0023): a day past the horizon goes
//! with its partitions once none of its runs started inside the horizon, and nothing of
//! it is deleted or read a run at a time. Its runs' counts in the trends' rollups are the
//! day's own partitions, and go with them; the per-reason totals lose what the day's
//! rollup rows count per reason, and the tools' run counts what is kept per day; the rows
//! kept outside the partitions (`run_ids`, `trace_runs`, `irreversible_calls`) are deleted
//! by the day's number range.
//!
//! One transaction in two steps. First the day's `runs` partition is locked against
//! writes (SHARE: new runs are numbered into today, and go on being written; a late span
//! of one of the day's runs waits, so the day's rollup rows hold still), its runs counted
//! per reason, and the rows outside the partitions deleted. Then the parent tables are
//! locked for as long as subtracting the per-reason and tool counts (rows every writer
//! updates) and dropping the partitions takes: ingest waits only for that. A day listed
//! before `runs` was partitioned keeps its runs in `runs_early`: the batches delete them,
//! and the day goes once none is left.

use super::RUN_TABLES;
use crate::partitions::{self, ListedDay, RUNS};
use crate::sql::{Sql, Tx};
use crate::{reason_counts, tools, trends, Db, StoreResult};
use std::collections::BTreeMap;

/// What dropping one day did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DroppedDay {
    pub day: i64,
    /// Runs that went with the day (not counting those the batches deleted before).
    pub runs: u64,
    /// Bytes the day's partitions held, indexes included.
    pub bytes: i64,
    /// From the start to the commit.
    pub took_ms: u64,
    /// Of which waiting for the parent tables' lock (for the writers in progress).
    pub waited_ms: u64,
    /// Of which from taking it to the end of the commit. Ingest waits for this, less the
    /// end of the commit: PostgreSQL removes the dropped files after releasing the locks.
    pub locked_ms: u64,
    /// Of which the commit, the files' removal included.
    pub commit_ms: u64,
}

/// The days of `dropping` that go whole: each has a `runs` partition, and none of its runs
/// started at or after `horizon_ms` (an agent's clock ahead of the server's). The batches
/// leave their runs alone. A run's start only moves earlier, so such a day stays whole.
pub async fn whole(db: &Db, dropping: &[ListedDay], horizon_ms: i64) -> StoreResult<Vec<ListedDay>> {
    let mut whole = Vec::new();
    for day in dropping.iter().filter(|d| d.with_runs) {
        let (inside,): (i64,) = db.fetch_one(any_run(*day, horizon_ms)).await?;
        if inside == 0 {
            whole.push(*day);
        }
    }
    Ok(whole)
}

/// Counts 1 if a run of `day` is stored that started at or after `started_from_ms`
/// (any run, with `i64::MIN`), else 0.
fn any_run(day: ListedDay, started_from_ms: i64) -> Sql {
    let (from, to) = day.range();
    let mut sql = Sql::new("SELECT COUNT(*) FROM (SELECT 1 FROM runs WHERE run_no >= ");
    sql.bind(from).push(" AND run_no < ").bind(to);
    if started_from_ms > i64::MIN {
        sql.push(" AND started_ns >= ").bind(started_from_ms.saturating_mul(1_000_000));
    }
    sql.push(" LIMIT 1) AS t");
    sql
}

/// The run number ranges `(after, before)`, both exclusive, around the `whole` days (in
/// order): the ranges the batches sweep.
pub fn between(whole: &[ListedDay]) -> Vec<(i64, i64)> {
    let mut ranges = Vec::new();
    let mut after = i64::MIN;
    for day in whole {
        let (from, to) = day.range();
        if after.saturating_add(1) < from {
            ranges.push((after, from));
        }
        after = to - 1;
    }
    ranges.push((after, i64::MAX));
    ranges
}

/// Drops each day of `dropping` that may go: whole, or (listed before `runs` was
/// partitioned) with no run left. A day that may not is kept for a later pass.
pub async fn drop_expired(db: &Db, dropping: &[ListedDay], horizon_ms: i64) -> StoreResult<Vec<DroppedDay>> {
    let mut dropped = Vec::new();
    for day in dropping {
        match drop_day(db, *day, horizon_ms).await {
            Ok(Some(gone)) => dropped.push(gone),
            Ok(None) => {}
            // Writers kept the tables past the lock timeout, or PostgreSQL broke a
            // deadlock against this transaction (a late span of one of the day's runs):
            // nothing was dropped, and the day is tried again with the next pass.
            Err(e) if e.is_write_conflict() || e.is_lock_timeout() => {
                let label = partitions::date_label(day.day);
                tracing::warn!(day = label, error = %e, "retention: a day's partitions wait for the next pass");
            }
            Err(e) => return Err(e),
        }
    }
    Ok(dropped)
}

async fn drop_day(db: &Db, day: ListedDay, horizon_ms: i64) -> StoreResult<Option<DroppedDay>> {
    let started = std::time::Instant::now();
    let mut tx = partitions::begin_change(db).await?;
    let (from, to) = day.range();
    // The runs that go with the day, per reason, as taken out of the totals.
    let mut departed: BTreeMap<String, i64> = BTreeMap::new();
    if day.with_runs {
        // From here to the commit a write to one of the day's runs (a late span) waits;
        // so does autovacuum of the partition, which would be wasted on it.
        let partition = partitions::partition_name(RUNS, day.day);
        tx.execute(Sql::new(format!("LOCK TABLE {partition} IN SHARE MODE"))).await?;
        // A day that is not whole (a run started inside the horizon) waits for a later
        // pass; checked under the lock, so no write changes the answer meanwhile.
        let (inside,): (i64,) = tx.fetch_one(any_run(day, horizon_ms)).await?;
        if inside > 0 {
            return Ok(None);
        }
        departed = trends::runs_per_reason(&mut tx, day.day).await?;
        departed.values_mut().for_each(|n| *n = -*n);
        forget_outside(&mut tx, from, to).await?;
    } else {
        let (left,): (i64,) = tx.fetch_one(any_run(day, i64::MIN)).await?;
        if left > 0 {
            return Ok(None);
        }
    }
    let waiting = std::time::Instant::now();
    partitions::lock_parents(&mut tx).await?;
    let locked = std::time::Instant::now();
    reason_counts::apply(&mut tx, &departed).await?;
    tools::forget_day(&mut tx, day.day).await?;
    let bytes = partitions::drop_partitions(&mut tx, day).await?;
    let committing = std::time::Instant::now();
    tx.commit().await?;
    Ok(Some(DroppedDay {
        day: day.day,
        runs: departed.values().map(|n| n.unsigned_abs()).sum(),
        bytes,
        took_ms: started.elapsed().as_millis() as u64,
        waited_ms: (locked - waiting).as_millis() as u64,
        locked_ms: locked.elapsed().as_millis() as u64,
        commit_ms: committing.elapsed().as_millis() as u64,
    }))
}

/// Deletes the rows of the runs numbered in `[from, to)` kept outside the day's
/// partitions: their ids in `run_ids`, their traces and their irreversible calls, each a
/// range of the table's index by number.
async fn forget_outside(tx: &mut Tx, from: i64, to: i64) -> StoreResult<()> {
    for table in std::iter::once("run_ids").chain(RUN_TABLES) {
        let mut sql = Sql::new(format!("DELETE FROM {table} WHERE run_no >= "));
        sql.bind(from).push(" AND run_no < ").bind(to);
        tx.execute(sql).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_batches_sweep_around_the_whole_days_and_past_the_last() {
        let day = |d: i64| ListedDay { day: d, with_runs: true };
        assert_eq!(between(&[]), [(i64::MIN, i64::MAX)]);
        let (a_from, a_to) = day(20_000).range();
        let (_, b_to) = day(20_001).range();
        let (c_from, c_to) = day(20_005).range();
        assert_eq!(
            between(&[day(20_000), day(20_001), day(20_005)]),
            // Nothing between two days in a row.
            [(i64::MIN, a_from), (b_to - 1, c_from), (c_to - 1, i64::MAX)]
        );
        assert_eq!(a_to, day(20_001).range().0);
    }
}
