//! PostgreSQL's day partitions of the span-side tables (ADR 0016) and of `runs` (ADR
//! 0018): a run that first arrives on day `d` is numbered in `[d << 40, (d + 1) << 40)`,
//! and each table in [`TABLES`] has a partition per day holding those numbers; `runs` has
//! one for each day made since it was partitioned (the days before are in `runs_early`).
//! The trends' rollups ([`TREND_TABLES`], ADR 0023) have a partition per day too, keyed
//! by the day of the runs they count (`run_day`, the day of their numbers), so a day's
//! counts go with its runs. This module makes each day's partitions ahead of time, and gives retention
//! (`retention::days`) what it needs to drop a whole day. SQLite keeps one table each;
//! every function here does nothing there.

use super::sql::{Sql, Tx};
use super::{Db, StoreResult};

/// The tables partitioned by their run's arrival day.
pub const TABLES: [&str; 4] = ["span_chunks", "body_chunks", "run_tools", "run_terms"];
/// The trends' rollups, partitioned by the day of the runs they count (`run_day`, the
/// day of their numbers, [`day_of_run_no`]); updated in place by every write, so their
/// pages keep room for it.
pub const TREND_TABLES: [&str; 2] = ["trend_runs", "trend_values"];
/// The runs themselves, partitioned the same way for the days made since migration 0048
/// (`run_no_days.runs_partition`).
pub const RUNS: &str = "runs";
/// The condition that picks the rows of the run whose id is `$1` from `runs` or a
/// span-side table, by its number read from `run_ids`: on PostgreSQL the number names the
/// one day's partition to read (ADR 0018).
pub const RUN_BY_ID: &str = "run_no = (SELECT run_no FROM run_ids WHERE run_id = $1)";
/// A day's numbers start at the day (days since 1970-01-01 UTC) shifted this far.
pub const DAY_SHIFT: u32 = 40;
const DAY_MS: i64 = 86_400_000;
/// Days are made this many days ahead of today (tomorrow's before midnight).
const DAYS_AHEAD: i64 = 1;
/// How long making or dropping a partition waits for its parent table's lock before
/// giving up until the next hour: ingest queues behind a waiting lock.
const LOCK_TIMEOUT: &str = "5s";
/// Serializes partition changes between instances sharing the database.
const ADVISORY_KEY: i64 = 0x0F1D_0044;

/// The UTC day of a time in ms since the epoch.
pub fn day_of(ms: i64) -> i64 {
    ms.div_euclid(DAY_MS)
}

/// The first run number of `day`.
pub fn base(day: i64) -> i64 {
    day << DAY_SHIFT
}

/// The day whose range holds run number `run_no` (0 for numbers given before the
/// partitions, which are in the `_early` partitions).
pub fn day_of_run_no(run_no: i64) -> i64 {
    run_no >> DAY_SHIFT
}

/// `day` as its date, e.g. `20261206`.
pub fn date_label(day: i64) -> String {
    let date = chrono::DateTime::from_timestamp_millis(day.saturating_mul(DAY_MS));
    date.map(|t| t.format("%Y%m%d").to_string()).unwrap_or_else(|| format!("d{day}"))
}

/// The name of `table`'s partition for `day`, e.g. `span_chunks_20261206`.
pub fn partition_name(table: &str, day: i64) -> String {
    format!("{table}_{}", date_label(day))
}

/// Whether retention may drop `day` under a horizon of `horizon_ms`: the whole day ended
/// more than a day before it. A run is numbered on the day its first span arrives, so it
/// started before that day ended; the extra day covers agents' clocks running ahead.
pub fn droppable(day: i64, horizon_ms: i64) -> bool {
    (day + 2) * DAY_MS <= horizon_ms
}

/// Makes today's and tomorrow's partitions where missing. Returns the days made.
pub async fn ensure_days(db: &Db, now_ms: i64) -> StoreResult<Vec<i64>> {
    let today = day_of(now_ms);
    ensure_range(db, today, today + DAYS_AHEAD, now_ms).await
}

/// Makes the partitions of every day in `first..=last` that has none.
pub async fn ensure_range(db: &Db, first: i64, last: i64, now_ms: i64) -> StoreResult<Vec<i64>> {
    if !matches!(db, Db::Postgres(_)) {
        return Ok(Vec::new());
    }
    let listed = listed_days(db).await?;
    let missing: Vec<i64> = (first..=last).filter(|d| !listed.contains(d)).collect();
    if missing.is_empty() {
        return Ok(missing);
    }
    let mut tx = Tx::begin_write(db).await?;
    take_lock(&mut tx).await?;
    let listed = listed_days_tx(&mut tx).await?;
    let mut made = Vec::new();
    for day in missing.into_iter().filter(|d| !listed.contains(d)) {
        for table in std::iter::once(RUNS).chain(TABLES) {
            let name = partition_name(table, day);
            tx.execute(Sql::new(format!(
                "CREATE TABLE {name} PARTITION OF {table} FOR VALUES FROM ({}) TO ({})",
                base(day),
                base(day + 1)
            )))
            .await?;
        }
        for table in TREND_TABLES {
            let name = partition_name(table, day);
            tx.execute(Sql::new(format!(
                "CREATE TABLE {name} PARTITION OF {table} FOR VALUES FROM ({day}) TO ({}) WITH (fillfactor = 70)",
                day + 1
            )))
            .await?;
        }
        let mut sql = Sql::new("INSERT INTO run_no_days (day, created_at, runs_partition) VALUES (");
        sql.bind(day).push(", ").bind(now_ms).push(", TRUE)");
        tx.execute(sql).await?;
        made.push(day);
    }
    tx.commit().await?;
    Ok(made)
}

/// Makes `day` the latest day with partitions, as it was when that day was today: the
/// partitions of later days are dropped (they must be empty) and `day`'s made, so new runs
/// are numbered into it. For tests and benchmarks that store runs as if they had arrived
/// long ago.
#[cfg(feature = "test-support")]
pub async fn arrive_on(db: &Db, day: i64, now_ms: i64) -> StoreResult<()> {
    let mut later = Sql::new("SELECT day, runs_partition FROM run_no_days WHERE day > ");
    later.bind(day);
    for (d, with_runs) in db.fetch_all::<(i64, bool)>(later).await? {
        let names = partitions_of(d, with_runs);
        db.execute(Sql::new(format!("DROP TABLE {}", names.join(", ")))).await?;
        let mut forget = Sql::new("DELETE FROM run_no_days WHERE day = ");
        forget.bind(d);
        db.execute(forget).await?;
    }
    ensure_range(db, day, day, now_ms).await?;
    Ok(())
}

/// A day listed in `run_no_days`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListedDay {
    pub day: i64,
    /// Whether the day has a `runs` partition (made since migration 0048); its runs are in
    /// `runs_early` otherwise.
    pub with_runs: bool,
}

impl ListedDay {
    /// The day's run numbers, `[from, to)`.
    pub fn range(&self) -> (i64, i64) {
        (base(self.day), base(self.day + 1))
    }

    /// Whether run number `run_no` is the day's.
    pub fn holds(&self, run_no: i64) -> bool {
        let (from, to) = self.range();
        (from..to).contains(&run_no)
    }
}

/// The days retention may drop under `horizon_ms` (see [`droppable`]), oldest first. None
/// on SQLite.
pub async fn droppable_days(db: &Db, horizon_ms: i64) -> StoreResult<Vec<ListedDay>> {
    if !matches!(db, Db::Postgres(_)) {
        return Ok(Vec::new());
    }
    let sql = Sql::new("SELECT day, runs_partition FROM run_no_days ORDER BY day");
    let days: Vec<(i64, bool)> = db.fetch_all(sql).await?;
    Ok(days
        .into_iter()
        .filter(|(day, _)| droppable(*day, horizon_ms))
        .map(|(day, with_runs)| ListedDay { day, with_runs })
        .collect())
}

/// A transaction that may change partitions: it holds the lock that serializes such
/// changes between instances, and waits at most [`LOCK_TIMEOUT`] for a table's lock.
pub async fn begin_change(db: &Db) -> StoreResult<Tx> {
    let mut tx = Tx::begin_write(db).await?;
    take_lock(&mut tx).await?;
    Ok(tx)
}

/// Locks every partitioned table whole, as dropping a partition must. Writers take them
/// (`runs` first, the trends' rollups last) before any count they update, so a transaction that takes them before touching a count
/// waits for the writers in progress instead of deadlocking with one; writers arriving
/// meanwhile wait for its commit.
pub async fn lock_parents(tx: &mut Tx) -> StoreResult<()> {
    let parents: Vec<&str> = std::iter::once(RUNS).chain(TABLES).chain(TREND_TABLES).collect();
    tx.execute(Sql::new(format!("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE", parents.join(", ")))).await?;
    Ok(())
}

/// Drops `day`'s partitions and forgets the day; the parents must be locked
/// ([`lock_parents`]). Returns the bytes they held, indexes included.
pub async fn drop_partitions(tx: &mut Tx, day: ListedDay) -> StoreResult<i64> {
    let names = partitions_of(day.day, day.with_runs);
    let sizes = names.iter().map(|n| format!("pg_total_relation_size('{n}')")).collect::<Vec<_>>().join(" + ");
    let (bytes,): (i64,) = tx.fetch_one(Sql::new(format!("SELECT ({sizes})::BIGINT"))).await?;
    tx.execute(Sql::new(format!("DROP TABLE {}", names.join(", ")))).await?;
    let mut forget = Sql::new("DELETE FROM run_no_days WHERE day = ");
    forget.bind(day.day);
    tx.execute(forget).await?;
    Ok(bytes)
}

/// The names of `day`'s partitions: the span-side tables', the trends' rollups' and, when
/// it has one, `runs`'.
fn partitions_of(day: i64, with_runs: bool) -> Vec<String> {
    let runs = with_runs.then_some(RUNS);
    runs.into_iter().chain(TABLES).chain(TREND_TABLES).map(|t| partition_name(t, day)).collect()
}

async fn take_lock(tx: &mut Tx) -> StoreResult<()> {
    let mut lock = Sql::new("SELECT pg_advisory_xact_lock(");
    lock.bind(ADVISORY_KEY).push(")");
    tx.execute(lock).await?;
    tx.execute(Sql::new(format!("SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'"))).await?;
    Ok(())
}

async fn listed_days(db: &Db) -> StoreResult<Vec<i64>> {
    Ok(db.fetch_column(Sql::new("SELECT day FROM run_no_days ORDER BY day")).await?)
}

async fn listed_days_tx(tx: &mut Tx) -> StoreResult<Vec<i64>> {
    let rows: Vec<(i64,)> = tx.fetch_all(Sql::new("SELECT day FROM run_no_days ORDER BY day")).await?;
    Ok(rows.into_iter().map(|(d,)| d).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_day_s_numbers_follow_the_day_before_s_and_name_their_day() {
        let day = day_of(1_796_515_200_000); // 2026-12-06T00:00:00Z
        assert_eq!(partition_name("span_chunks", day), "span_chunks_20261206");
        assert_eq!(day_of(1_796_515_200_000 - 1), day - 1);
        assert_eq!(day_of_run_no(base(day) + 12_345), day);
        assert_eq!(day_of_run_no(base(day + 1) - 1), day);
        // Numbers given before the partitions (small) belong to no day.
        assert_eq!(day_of_run_no(5_000_000), 0);
    }

    #[test]
    fn a_day_goes_once_it_ended_a_full_day_before_the_horizon() {
        let horizon = 1_796_515_200_000 + 3_600_000; // 2026-12-06T01:00Z
        let today = day_of(horizon);
        assert!(!droppable(today, horizon));
        assert!(!droppable(today - 1, horizon), "ended an hour before the horizon");
        assert!(droppable(today - 2, horizon));
        assert!(droppable(today - 40, horizon));
    }
}
