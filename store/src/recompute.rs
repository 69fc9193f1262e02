//! Recomputes stored runs after a rule changed: a price (their cost) or a tool's class
//! (their duplicate and no-read flags). In batches, each its own short transaction, so a
//! recompute of weeks of runs never holds the write lock for long and ingest goes on.
//!
//! Only the columns a rule can change are written, and only where the row is as it was
//! read: a run the ingest writer updated meanwhile was derived by it under the same new
//! rules, and is left alone. The trends' rollups change with the rows written.

use super::spans::facts_of_runs;
use super::sql::{Sql, Tx};
use super::trends::{self, point, DayRollups};
use super::write::run_rows::unpriced_json;
use super::{Db, StoreResult};
use domain::derive::{derive_run_with, Rules};
use domain::trends::RunPoint;

/// Which stored runs to recompute.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Scope {
    /// Runs that started at or after this (ns since the epoch).
    pub since_ns: Option<i64>,
    /// Runs that started before this.
    pub until_ns: Option<i64>,
    /// Only runs that called one of these tools.
    pub tools: Option<Vec<String>>,
}

/// How a recompute went.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Recomputed {
    /// Runs read and derived again.
    pub runs: u64,
    /// Runs whose stored figures changed.
    pub changed: u64,
}

/// Recomputes the runs in `scope` under `rules`, `batch` runs at a time.
pub async fn recompute(db: &Db, rules: &Rules, scope: &Scope, batch: i64) -> StoreResult<Recomputed> {
    let mut done = Recomputed::default();
    let mut after_no: i64 = -1;
    loop {
        // Only `runs` is in the outer FROM, so the point's columns need no alias.
        let columns = trends::POINT_COLUMNS;
        let mut select =
            Sql::new(format!("SELECT r.run_no, r.run_id, r.updated_at, {columns} FROM runs r WHERE r.run_no > "));
        select.bind(after_no);
        if let Some(since) = scope.since_ns {
            select.push(" AND r.started_ns >= ").bind(since);
        }
        if let Some(until) = scope.until_ns {
            select.push(" AND r.started_ns < ").bind(until);
        }
        if let Some(tools) = &scope.tools {
            select.push(" AND r.run_no IN (SELECT rt.run_no FROM run_tools rt WHERE rt.tool_name IN ");
            select.list(std::iter::once("").chain(tools.iter().map(String::as_str))).push(")");
        }
        select.push(" ORDER BY r.run_no LIMIT ").bind(batch);
        type Row = (i64, String, i64, i64, String, f64, i64, i64, i64, bool, Option<String>, Option<String>);
        let rows: Vec<Row> = db.fetch_all(select).await?;
        let Some(last) = rows.last() else { break };
        after_no = last.0;
        let ids: Vec<&str> = rows.iter().map(|row| row.1.as_str()).collect();
        let facts = facts_of_runs(db, &ids).await?;
        let mut changed = 0u64;
        let derived: Vec<_> = rows
            .into_iter()
            .map(|(run_no, id, updated_at, started_ns, reason, cost, calls, deduped, dups, no_read, agent, model)| {
                let d = derive_run_with(&id, facts.get(&id).map(Vec::as_slice).unwrap_or(&[]), rules);
                let stored = point((started_ns, reason, cost, calls, deduped, dups, no_read, agent, model));
                (d, run_no, updated_at, stored)
            })
            .collect();
        let mut tx = Tx::begin_write(db).await?;
        let mut rollup = DayRollups::default();
        for (d, run_no, updated_at, stored) in &derived {
            let r = &d.run;
            let updated = tx
                .execute(Sql::with_args(
                    "UPDATE runs SET cost = $1, cost_source = $2, unpriced_models = $3, duplicate_side_effects = $4, \
                     possible_duplicates = $5, completed_without_read = $6, duplicates = $7 \
                     WHERE run_no = $8 AND updated_at = $9 AND (cost <> $1 OR cost_source <> $2 \
                     OR COALESCE(unpriced_models, '') <> COALESCE($3, '') OR duplicate_side_effects <> $4 \
                     OR possible_duplicates <> $5 OR completed_without_read <> $6 OR duplicates <> $7)",
                    vec![
                        r.cost.into(),
                        r.cost_source.as_str().into(),
                        unpriced_json(&r.unpriced_models).into(),
                        r.duplicate_side_effects.into(),
                        r.possible_duplicates.into(),
                        r.completed_without_read.into(),
                        serde_json::to_string(&d.duplicates).unwrap_or_default().into(),
                        (*run_no).into(),
                        (*updated_at).into(),
                    ],
                ))
                .await?;
            if updated > 0 {
                // Only the columns written here change; the rest stays as stored.
                let now = RunPoint {
                    cost: r.cost,
                    duplicate_side_effects: r.duplicate_side_effects,
                    completed_without_read: r.completed_without_read,
                    ..stored.clone()
                };
                rollup.add_all([(*run_no, stored)], -1);
                rollup.add_all([(*run_no, &now)], 1);
            }
            changed += updated;
        }
        trends::apply(&mut tx, &rollup.without_zeros()).await?;
        tx.commit().await?;
        done.runs += derived.len() as u64;
        done.changed += changed;
        if (derived.len() as i64) < batch {
            break;
        }
    }
    Ok(done)
}
