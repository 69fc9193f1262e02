//! Phase 1 of the write path: which run each trace of the batch belongs to.
//!
//! A trace belongs to the run its spans name (`flightdeck.run.id` and its aliases) or,
//! when none names one, to a run of its own id. The assignment is stored in `trace_runs`
//! the first time a trace arrives. When a trace stored under its own id later names a
//! run, its stored rows move to that run ([`super::moves`]).

use super::super::sql::{cacheable_chunks, Sql, Tx};
use super::super::tools::RunDeltas;
use super::super::StoreResult;
use super::{moves, Move, IDS_PER_QUERY, ROWS_PER_INSERT};
use domain::span::NormalizedSpan;
use domain::trends::RunPoint;
use std::collections::{BTreeMap, BTreeSet};

/// What the batch's traces were assigned to, for the later phases.
#[derive(Debug, Default)]
pub struct Assignment<'s> {
    /// The run of each trace in the batch.
    pub run_of: BTreeMap<&'s str, String>,
    /// The runs this write changes (sorted, so locks and statements follow one order).
    pub touched: BTreeSet<String>,
    /// Runs that may hold spans stored by earlier writes (their spans are read back).
    pub had_spans: BTreeSet<String>,
    /// Each touched run's arrival number.
    pub run_nos: BTreeMap<String, i64>,
    /// How the number of runs per terminal reason changes: each touched run leaves its
    /// stored reason here (derivation adds its new one), a run moved away leaves for good.
    pub reason_deltas: BTreeMap<String, i64>,
    /// How each tool's run count changes: a run moved away no longer calls its tools.
    pub tool_run_deltas: RunDeltas,
    /// The touched runs as stored before this write, and the runs moved away (deleted),
    /// with their numbers: their old contributions leave the trends' rollups.
    pub old_points: Vec<(i64, RunPoint)>,
}

/// Where each trace goes, decided from what the batch names and what is stored (pure).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Plan<'s> {
    pub run_of: BTreeMap<&'s str, String>,
    pub touched: BTreeSet<String>,
    pub had_spans: BTreeSet<String>,
    /// Traces seen for the first time: (trace, run, whether a span named the run).
    pub new_traces: Vec<(&'s str, String, bool)>,
    pub moves: Vec<Move<'s>>,
}

/// The run each trace in `spans` names, if any span of it names one (the first wins).
pub fn runs_named(spans: &[NormalizedSpan]) -> BTreeMap<&str, Option<&str>> {
    let mut named: BTreeMap<&str, Option<&str>> = BTreeMap::new();
    for s in spans {
        let entry = named.entry(s.trace_id.as_str()).or_insert(None);
        if entry.is_none() {
            *entry = s.explicit_run_id.as_deref();
        }
    }
    named
}

/// Decides each trace's run from `named` (what this batch says) and `stored` (trace →
/// (run, whether a span named it), for traces seen before).
pub fn plan<'s>(named: &BTreeMap<&'s str, Option<&'s str>>, mut stored: BTreeMap<String, (String, bool)>) -> Plan<'s> {
    let mut plan = Plan::default();
    for (&trace, &explicit) in named {
        let run = match (stored.remove(trace), explicit) {
            (None, named_run) => {
                let run = named_run.unwrap_or(trace).to_string();
                plan.new_traces.push((trace, run.clone(), named_run.is_some()));
                run
            }
            // Stored under its own id, and now a span names its run: it moves.
            (Some((old, false)), Some(new)) if old != new => {
                plan.moves.push(Move { trace, from: old, to: new.to_string() });
                plan.had_spans.insert(new.to_string());
                new.to_string()
            }
            (Some((old, _)), _) => {
                plan.had_spans.insert(old.clone());
                old
            }
        };
        plan.touched.insert(run.clone());
        plan.run_of.insert(trace, run);
    }
    plan
}

/// Reads and writes `trace_runs` (and, for moves, every per-run table); gives new runs
/// their numbers; on PostgreSQL locks each trace, then each run, in sorted order, so
/// instances sharing the database never deadlock or lose an update.
pub async fn assign_runs<'s>(tx: &mut Tx, spans: &'s [NormalizedSpan], now: i64) -> StoreResult<Assignment<'s>> {
    let named = runs_named(spans);
    tx.lock_in_order(named.keys().map(|t| format!("trace:{t}"))).await?;
    let trace_ids: Vec<&str> = named.keys().copied().collect();
    let mut stored: BTreeMap<String, (String, bool)> = BTreeMap::new();
    for chunk in cacheable_chunks(&trace_ids, IDS_PER_QUERY) {
        let mut sql = Sql::new("SELECT trace_id, run_id, explicit FROM trace_runs WHERE trace_id IN ");
        sql.list(chunk.iter().copied());
        let rows: Vec<(String, String, bool)> = tx.fetch_all(sql).await?;
        stored.extend(rows.into_iter().map(|(t, r, e)| (t, (r, e))));
    }
    let Plan { run_of, touched, mut had_spans, new_traces, moves } = plan(&named, stored);
    // Before any run's spans are read: the runs this write changes, including those
    // traces move away from.
    let moved_from = moves.iter().map(|m| &m.from);
    tx.lock_in_order(touched.iter().chain(moved_from).map(|r| format!("run:{r}"))).await?;

    let mut run_nos: BTreeMap<String, i64> = BTreeMap::new();
    let mut reason_deltas: BTreeMap<String, i64> = BTreeMap::new();
    let mut tool_run_deltas = RunDeltas::default();
    let mut old_points: Vec<(i64, RunPoint)> = Vec::new();
    if !moves.is_empty() {
        // A move's two runs are numbered first (moves are rare).
        let ids: Vec<&str> = moves.iter().flat_map(|m| [m.from.as_str(), m.to.as_str()]).collect();
        for chunk in cacheable_chunks(&ids, IDS_PER_QUERY) {
            let mut sql = Sql::new("SELECT run_id, run_no FROM run_ids WHERE run_id IN ");
            sql.list(chunk.iter().copied());
            run_nos.extend(tx.fetch_all::<(String, i64)>(sql).await?);
        }
        number_new_runs(tx, &mut run_nos, moves.iter().map(|m| &m.to)).await?;
        for m in &moves {
            let gone = moves::move_trace(tx, m, &run_nos, now).await?;
            if let Some((run_no, point)) = gone.point {
                *reason_deltas.entry(point.reason.as_str().to_string()).or_default() -= 1;
                old_points.push((run_no, point));
            }
            tool_run_deltas.merge(gone.tools);
        }
    }
    // Each touched run's stored reason and number; it leaves that reason's total.
    let touched_ids: Vec<&str> = touched.iter().map(String::as_str).collect();
    for locked in tx.runs_locked(&touched_ids).await? {
        *reason_deltas.entry(locked.point.reason.as_str().to_string()).or_default() -= 1;
        run_nos.insert(locked.run_id.clone(), locked.run_no);
        had_spans.insert(locked.run_id);
        old_points.push((locked.run_no, locked.point));
    }
    number_new_runs(tx, &mut run_nos, touched.iter()).await?;
    for chunk in cacheable_chunks(&new_traces, ROWS_PER_INSERT) {
        let mut sql = Sql::new("INSERT INTO trace_runs (trace_id, run_id, explicit, run_no) ");
        sql.values(chunk, |row, (trace, run, explicit)| {
            row.bind(*trace).bind(run).bind(*explicit).bind(run_nos[run.as_str()]);
        });
        tx.execute(sql).await?;
    }
    Ok(Assignment { run_of, touched, had_spans, run_nos, reason_deltas, tool_run_deltas, old_points })
}

/// Gives each of `runs` that has no number in `run_nos` yet the next arrival numbers,
/// and keeps them under the runs' ids.
async fn number_new_runs<'a>(
    tx: &mut Tx,
    run_nos: &mut BTreeMap<String, i64>,
    runs: impl Iterator<Item = &'a String>,
) -> StoreResult<()> {
    // Once each: two traces moving to the same new run name it twice.
    let missing: Vec<String> = runs
        .filter(|r| !run_nos.contains_key(r.as_str()))
        .cloned()
        .collect::<std::collections::BTreeSet<String>>()
        .into_iter()
        .collect();
    let given = run_nos.values().copied().max().unwrap_or(0);
    let numbers = tx.next_run_numbers(missing.len(), given).await?;
    let numbered: Vec<(&str, i64)> = missing.iter().map(String::as_str).zip(numbers.iter().copied()).collect();
    tx.name_runs(&numbered).await?;
    run_nos.extend(missing.into_iter().zip(numbers));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named<'a>(pairs: &[(&'a str, Option<&'a str>)]) -> BTreeMap<&'a str, Option<&'a str>> {
        pairs.iter().copied().collect()
    }

    #[test]
    fn a_new_trace_goes_to_the_run_it_names_or_to_its_own() {
        let p = plan(&named(&[("t1", Some("run-a")), ("t2", None)]), BTreeMap::new());
        assert_eq!(p.run_of["t1"], "run-a");
        assert_eq!(p.run_of["t2"], "t2");
        assert_eq!(p.new_traces, vec![("t1", "run-a".to_string(), true), ("t2", "t2".to_string(), false)]);
        assert!(p.had_spans.is_empty() && p.moves.is_empty());
    }

    #[test]
    fn a_stored_trace_stays_unless_it_was_unnamed_and_now_names_a_run() {
        let stored: BTreeMap<String, (String, bool)> = [
            ("t1".to_string(), ("t1".to_string(), false)),
            ("t2".to_string(), ("run-b".to_string(), true)),
            ("t3".to_string(), ("t3".to_string(), false)),
        ]
        .into();
        let p = plan(&named(&[("t1", Some("run-a")), ("t2", Some("run-c")), ("t3", None)]), stored);
        assert_eq!(p.moves, vec![Move { trace: "t1", from: "t1".into(), to: "run-a".into() }]);
        // A trace that named its run keeps it, even when a later span names another.
        assert_eq!(p.run_of["t2"], "run-b");
        assert_eq!(p.run_of["t3"], "t3");
        assert_eq!(p.touched, ["run-a", "run-b", "t3"].map(String::from).into());
        assert_eq!(p.had_spans, ["run-a", "run-b", "t3"].map(String::from).into());
        assert!(p.new_traces.is_empty());
    }
}
