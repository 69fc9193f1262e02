//! The ingest write path: normalized spans in, committed in one transaction together with
//! the trace→run assignment and the recomputed runs they touch. A caller acknowledges an
//! export only after this returns, so an acknowledged span is durable.
//!
//! Decoding and normalizing happen before (in [`ingest`], on many threads); this
//! single writer runs the phases below in order, each a function with one job:
//!
//! 1. [`assign::assign_runs`]: which run each trace belongs to; numbers new runs; moves a
//!    trace whose spans now name a run ([`moves`]).
//! 2. [`span_rows::gather`]: every span of each touched run, stored ones read back, and
//!    which of this batch's spans are new.
//! 3. [`span_rows::store`]: the new spans, one chunk per run, with their search terms and
//!    irreversible calls.
//! 4. [`approvals::record_violations`]: each executed call checked against its approval.
//! 5. Derivation ([`derive_run_with`], pure): each touched run recomputed from its spans.
//! 6. [`run_rows`]: the runs' facts, their tools, the tool catalogue, bodies.
//! 7. [`escalations::open_from_traces`], then the trends' rollups ([`trends::apply`]: the
//!    runs' new figures in, their old ones out; [`trends::count_events`]: the escalations
//!    opened) and the per-reason run totals ([`reason_counts::apply`]), last so those
//!    shared rows are held only until the commit.
//!
//! Every statement goes through [`Tx`], written once for both backends; where they differ
//! is in [`super::dialect`].

pub mod assign;
pub mod moves;
pub mod run_rows;
pub mod span_rows;

use super::sql::Tx;
use super::trends::DayRollups;
use super::{approvals, escalations, now_ms, reason_counts, trends, Db, StoreResult};
use domain::canonical::RunDetail;
use domain::derive::{derive_run_with, Rules, SpanFacts};
use domain::span::BodyPolicy;
use domain::span::NormalizedSpan;
use domain::trends::RunPoint;
use std::collections::BTreeMap;
use std::time::Instant;

/// What a write did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct WriteOutcome {
    /// Spans newly stored; re-sent spans already stored are not counted again.
    pub stored: u64,
    /// Runs recomputed by this write.
    pub runs: Vec<String>,
}

pub(crate) use super::sql::{IDS_PER_QUERY, ROWS_PER_INSERT};

/// A trace whose earlier spans named no run and whose spans now name one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Move<'s> {
    pub trace: &'s str,
    pub from: String,
    pub to: String,
}

/// Stores spans, assigns their traces to runs, and recomputes the touched runs with the
/// shipped prices and no tool policies (tests; the server uses [`commit_with`]).
pub async fn commit(db: &Db, spans: &[NormalizedSpan], body_policy: BodyPolicy) -> StoreResult<WriteOutcome> {
    commit_with(db, spans, body_policy, &Rules::default()).await
}

/// Stores spans, assigns their traces to runs, and recomputes the touched runs under
/// `rules` (prices and tool policies): the phases of the module header, in order.
pub async fn commit_with(
    db: &Db,
    spans: &[NormalizedSpan],
    body_policy: BodyPolicy,
    rules: &Rules,
) -> StoreResult<WriteOutcome> {
    if spans.is_empty() {
        return Ok(WriteOutcome::default());
    }
    let received_at = now_ms();
    let t_begin = Instant::now();
    let mut tx = Tx::begin_bulk_write(db).await?;
    let t_began = Instant::now();

    let mut assignment = assign::assign_runs(&mut tx, spans, received_at).await?;
    let mut reason_deltas = std::mem::take(&mut assignment.reason_deltas);
    let mut tool_run_deltas = std::mem::take(&mut assignment.tool_run_deltas);
    let t_traces = Instant::now();

    let batch = span_rows::gather(&mut tx, spans, &assignment).await?;
    span_rows::store(&mut tx, &batch, &assignment, received_at).await?;
    approvals::record_violations(&mut tx, spans, &assignment.run_of, &batch.facts_by_run, received_at).await?;
    let t_spans = Instant::now();

    let mut derived: Vec<RunDetail> = assignment
        .touched
        .iter()
        .map(|run| derive_run_with(run, batch.facts_by_run.get(run).map(Vec::as_slice).unwrap_or(&[]), rules))
        .collect();
    let t_derived = Instant::now();

    approvals::count_violations(&mut tx, &mut derived).await?;
    let escalations_opened = escalations::open_from_traces(&mut tx, &derived, spans, received_at).await?;
    for d in &derived {
        *reason_deltas.entry(d.run.terminal_reason.as_str().to_string()).or_default() += 1;
    }
    run_rows::store_runs(&mut tx, &derived, &batch.facts_by_run, &assignment.run_nos, received_at).await?;
    tool_run_deltas
        .merge(run_rows::store_run_tools(&mut tx, &derived, &batch.facts_by_run, &assignment.run_nos).await?);
    run_rows::count_tools(&mut tx, batch.new_spans().map(|(_, s)| s), &tool_run_deltas).await?;
    run_rows::store_bodies(&mut tx, body_policy, &derived, &batch, &assignment).await?;
    let rollup = rollup_change(&assignment.old_points, &derived, &assignment.run_nos, &batch.facts_by_run);
    trends::apply(&mut tx, &rollup).await?;
    trends::count_events(&mut tx, &escalations_opened).await?;
    reason_counts::apply(&mut tx, &reason_deltas).await?;
    let t_runs = Instant::now();

    tx.commit().await?;
    tracing::debug!(
        begin_us = (t_began - t_begin).as_micros() as u64,
        traces_us = (t_traces - t_began).as_micros() as u64,
        spans_us = (t_spans - t_traces).as_micros() as u64,
        derive_us = (t_derived - t_spans).as_micros() as u64,
        runs_us = (t_runs - t_derived).as_micros() as u64,
        commit_us = t_runs.elapsed().as_micros() as u64,
        runs = assignment.touched.len(),
        read_back = assignment.had_spans.len(),
        "write phases"
    );
    Ok(WriteOutcome { stored: batch.stored, runs: assignment.touched.into_iter().collect() })
}

/// What this write changes in the trends' rollups, in the rows of each run's arrival day:
/// each run's old figures out (as stored before, or moved away; with their numbers), its
/// newly derived ones in (numbered in `run_nos`); runs whose figures did not change leave
/// nothing to write (pure).
pub fn rollup_change(
    old: &[(i64, RunPoint)],
    derived: &[RunDetail],
    run_nos: &BTreeMap<String, i64>,
    facts_by_run: &BTreeMap<String, Vec<SpanFacts>>,
) -> DayRollups {
    let mut change = DayRollups::default();
    change.add_all(old.iter().map(|(no, point)| (*no, point)), -1);
    let new: Vec<(i64, RunPoint)> = derived
        .iter()
        .map(|d| {
            let model = facts_by_run.get(&d.run.run_id).and_then(|facts| domain::derive::main_model(facts));
            (run_nos[d.run.run_id.as_str()], point_of(d, model))
        })
        .collect();
    change.add_all(new.iter().map(|(no, point)| (*no, point)), 1);
    change.without_zeros()
}

/// The trends figures of a derived run, as `run_rows::store_runs` stores them.
fn point_of(d: &RunDetail, model: Option<&str>) -> RunPoint {
    let r = &d.run;
    RunPoint {
        started_ms: r.started_at.and_then(|t| t.timestamp_nanos_opt()).unwrap_or(0).div_euclid(1_000_000),
        reason: r.terminal_reason,
        cost: r.cost,
        tool_calls: r.tool_calls,
        deduped_calls: r.deduped_calls,
        duplicate_side_effects: r.duplicate_side_effects,
        completed_without_read: r.completed_without_read,
        agent: r.agent.clone(),
        model: model.map(str::to_string),
    }
}
