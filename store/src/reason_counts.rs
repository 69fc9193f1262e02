//! `run_reason_counts`: how many runs there are per terminal reason, kept by every
//! statement that adds, changes or deletes runs, so the run list's reason tabs never
//! count the whole table.

use super::sql::{cacheable_chunks, Sql, Tx};
use super::StoreResult;
use std::collections::BTreeMap;

/// Adds each reason's change in the number of runs to the totals, inside the transaction
/// that changed `runs`: one statement (a round trip per reason added a few to every
/// ingest commit), rows in sorted order, so concurrent writers on PostgreSQL lock them in
/// one order and never deadlock. Callers run it last, so the rows are held only until
/// the commit.
pub async fn apply(tx: &mut Tx, deltas: &BTreeMap<String, i64>) -> StoreResult<()> {
    let changed: Vec<(&str, i64)> =
        deltas.iter().filter(|(_, d)| **d != 0).map(|(reason, d)| (reason.as_str(), *d)).collect();
    for chunk in cacheable_chunks(&changed, 64) {
        let mut sql = Sql::new("INSERT INTO run_reason_counts (terminal_reason, runs) ");
        sql.values(chunk, |row, (reason, delta)| {
            row.bind(*reason).bind(*delta);
        });
        sql.push(" ON CONFLICT (terminal_reason) DO UPDATE SET runs = run_reason_counts.runs + excluded.runs");
        tx.execute(sql).await?;
    }
    Ok(())
}
