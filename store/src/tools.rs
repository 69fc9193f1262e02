//! Every tool ingest has seen (`tools`, kept by the write path), with how many runs
//! called it (kept beside it by the write path and retention), for the admin's tools page.
//! On PostgreSQL those run counts are also kept per arrival day (`tool_day_runs`), so
//! dropping a day's partitions takes its runs out of the counts without reading them.

use super::sql::{cacheable_chunks, Backend, Sql, Tx, ROWS_PER_INSERT};
use super::{Db, StoreResult};
use std::collections::BTreeMap;

/// One tool as stored.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct SeenTool {
    pub tool_name: String,
    pub calls: i64,
    pub runs: i64,
    pub first_seen_ns: i64,
    pub last_seen_ns: i64,
    pub declared_class: Option<String>,
    pub read_only_hint: Option<bool>,
    pub destructive_hint: Option<bool>,
}

/// The most recently seen tools first, at most `limit`.
pub async fn list(db: &Db, limit: i64) -> StoreResult<Vec<SeenTool>> {
    let sql = "SELECT t.tool_name, t.calls, t.runs, t.first_seen_ns, t.last_seen_ns, t.declared_class, t.read_only_hint, t.destructive_hint \
               FROM tools t ORDER BY t.last_seen_ns DESC, t.tool_name LIMIT $1";
    Ok(db.fetch_all(Sql::with_args(sql, vec![limit.into()])).await?)
}

/// Adds each delta to its tool's run count, in name order, as the catalogue's upsert and
/// retention take the `tools` rows. (After a trace move these updates follow that upsert,
/// so two PostgreSQL writers could wait on each other; PostgreSQL then aborts one, and the
/// ingest writer commits its batch again (the server's `otlp::writer`). Moves are rare.)
pub async fn adjust_runs<'a>(tx: &mut Tx, deltas: impl Iterator<Item = (&'a String, &'a i64)>) -> StoreResult<()> {
    for (name, delta) in deltas.filter(|(_, d)| **d != 0) {
        let mut sql = Sql::new("UPDATE tools SET runs = runs + $1 WHERE tool_name = $2");
        sql.arg(*delta);
        sql.arg(name.as_str());
        tx.execute(sql).await?;
    }
    Ok(())
}

/// Changes to how many runs called each tool, by the arrival day of each run (the day its
/// number carries, `partitions::day_of_run_no`).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct RunDeltas(BTreeMap<(i64, String), i64>);

impl RunDeltas {
    /// `n` more (or fewer) runs of `day` called `tool`.
    pub fn add(&mut self, day: i64, tool: &str, n: i64) {
        *self.0.entry((day, tool.to_string())).or_default() += n;
    }

    /// Adds `other`'s changes to these.
    pub fn merge(&mut self, other: RunDeltas) {
        for (key, n) in other.0 {
            *self.0.entry(key).or_default() += n;
        }
    }

    /// The change to each tool's run count, all days together.
    pub fn by_tool(&self) -> BTreeMap<String, i64> {
        let mut totals: BTreeMap<String, i64> = BTreeMap::new();
        for ((_, tool), n) in &self.0 {
            *totals.entry(tool.clone()).or_default() += n;
        }
        totals
    }

    /// Each day's change per tool, in (day, tool) order.
    pub fn by_day(&self) -> impl Iterator<Item = (i64, &str, i64)> {
        self.0.iter().filter(|(_, n)| **n != 0).map(|((day, tool), n)| (*day, tool.as_str(), *n))
    }
}

/// Adds `deltas` to the per-day run counts on PostgreSQL, in (day, tool) order (after the
/// `tools` rows, as every writer takes them); SQLite has no days to drop and keeps none.
pub async fn count_days(tx: &mut Tx, deltas: &RunDeltas) -> StoreResult<()> {
    let rows: Vec<(i64, &str, i64)> = deltas.by_day().collect();
    if tx.backend() != Backend::Postgres || rows.is_empty() {
        return Ok(());
    }
    for chunk in cacheable_chunks(&rows, ROWS_PER_INSERT / 3) {
        let mut sql = Sql::new("INSERT INTO tool_day_runs (day, tool_name, runs) ");
        sql.values(chunk, |row, (day, tool, n)| {
            row.bind(*day).bind(*tool).bind(*n);
        });
        sql.push(" ON CONFLICT (day, tool_name) DO UPDATE SET runs = tool_day_runs.runs + excluded.runs");
        tx.execute(sql).await?;
    }
    Ok(())
}

/// Takes a day's runs out of the tools' run counts and forgets the day's counts
/// (PostgreSQL, as its partitions are dropped). The `tools` rows are taken before the
/// day's rows, in the order every writer takes them.
pub async fn forget_day(tx: &mut Tx, day: i64) -> StoreResult<()> {
    let mut sql = Sql::new("SELECT tool_name, runs FROM tool_day_runs WHERE day = $1");
    sql.arg(day);
    let counts: BTreeMap<String, i64> =
        tx.fetch_all::<(String, i64)>(sql).await?.into_iter().map(|(tool, n)| (tool, -n)).collect();
    adjust_runs(tx, counts.iter()).await?;
    let mut sql = Sql::new("DELETE FROM tool_day_runs WHERE day = $1");
    sql.arg(day);
    tx.execute(sql).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deltas_sum_per_tool_across_days_and_skip_days_that_net_to_nothing() {
        let mut d = RunDeltas::default();
        d.add(20_000, "send_email", 2);
        d.add(20_001, "send_email", 1);
        d.add(20_001, "search", 1);
        d.add(20_001, "search", -1);
        assert_eq!(d.by_tool(), BTreeMap::from([("search".to_string(), 0), ("send_email".to_string(), 3)]));
        assert_eq!(d.by_day().collect::<Vec<_>>(), vec![(20_000, "send_email", 2), (20_001, "send_email", 1)]);
    }
}
