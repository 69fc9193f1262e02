//! Phase 6 of the write path: what derivation found, stored. Each touched run's row
//! (`runs`, what the run list reads), the tools it called (`run_tools`, the list's tool
//! filter), the catalogue of every tool seen (`tools`, the admin's tools page), and the
//! bodies the body policy keeps.

use super::super::sql::{cacheable_chunks, cacheable_parts, Sql, Tx};
use super::super::tools::{self, RunDeltas};
use super::super::{partitions, StoreResult};
use super::assign::Assignment;
use super::span_rows::Gathered;
use super::{IDS_PER_QUERY, ROWS_PER_INSERT};
use crate::packing;
use domain::canonical::{RunDetail, TerminalReason};
use domain::derive::SpanFacts;
use domain::record;
use domain::span::BodyPolicy;
use domain::span::NormalizedSpan;
use std::collections::{BTreeMap, BTreeSet};

/// Inserts or updates the row of each derived run, with the tool of its first failed
/// call (`''` for none) and the model most of its steps used, read from `facts_by_run`.
pub async fn store_runs(
    tx: &mut Tx,
    derived: &[RunDetail],
    facts_by_run: &BTreeMap<String, Vec<SpanFacts>>,
    run_nos: &BTreeMap<String, i64>,
    now: i64,
) -> StoreResult<()> {
    for chunk in cacheable_chunks(derived, ROWS_PER_INSERT / 2) {
        let mut sql = Sql::new(
            "INSERT INTO runs (run_id, run_no, agent, run_trigger, terminal_reason, started_ns, ended_ns, \
             wall_clock_ms, cost, cost_source, unpriced_models, input_tokens, output_tokens, cache_tokens, \
             steps, tool_calls, trace_ids, duplicate_side_effects, possible_duplicates, deduped_calls, \
             completed_without_read, approval_violations, escalation_reason, duplicates, failed_tool, model, \
             updated_at) ",
        );
        sql.values(chunk, |row, d| {
            let r = &d.run;
            row.bind(&r.run_id)
                .bind(run_nos[r.run_id.as_str()])
                .bind(&r.agent)
                .bind(r.trigger.as_str())
                .bind(r.terminal_reason.as_str())
                .bind(r.started_at.and_then(|t| t.timestamp_nanos_opt()).unwrap_or(0))
                .bind(r.ended_at.and_then(|t| t.timestamp_nanos_opt()))
                .bind(r.wall_clock_ms)
                .bind(r.cost)
                .bind(r.cost_source.as_str())
                .bind(unpriced_json(&r.unpriced_models))
                .bind(r.input_tokens)
                .bind(r.output_tokens)
                .bind(r.cache_tokens)
                .bind(r.steps)
                .bind(r.tool_calls)
                .bind(json(&r.trace_ids))
                .bind(r.duplicate_side_effects)
                .bind(r.possible_duplicates)
                .bind(r.deduped_calls)
                .bind(r.completed_without_read)
                .bind(r.approval_violations)
                .bind(&r.escalation_reason)
                .bind(json(&d.duplicates))
                .bind(
                    facts_by_run
                        .get(&r.run_id)
                        .and_then(|facts| domain::derive::first_failed_tool(facts))
                        .unwrap_or(""),
                )
                .bind(facts_by_run.get(&r.run_id).and_then(|facts| domain::derive::main_model(facts)))
                .bind(now);
        });
        sql.push(
            " ON CONFLICT (run_no) DO UPDATE SET agent = excluded.agent, run_trigger = excluded.run_trigger, \
             terminal_reason = excluded.terminal_reason, started_ns = excluded.started_ns, \
             ended_ns = excluded.ended_ns, wall_clock_ms = excluded.wall_clock_ms, cost = excluded.cost, \
             cost_source = excluded.cost_source, unpriced_models = excluded.unpriced_models, \
             possible_duplicates = excluded.possible_duplicates, \
             input_tokens = excluded.input_tokens, output_tokens = excluded.output_tokens, \
             cache_tokens = excluded.cache_tokens, steps = excluded.steps, tool_calls = excluded.tool_calls, \
             trace_ids = excluded.trace_ids, duplicate_side_effects = excluded.duplicate_side_effects, \
             deduped_calls = excluded.deduped_calls, completed_without_read = excluded.completed_without_read, \
             approval_violations = excluded.approval_violations, escalation_reason = excluded.escalation_reason, \
             duplicates = excluded.duplicates, failed_tool = excluded.failed_tool, model = excluded.model, \
             updated_at = excluded.updated_at",
        );
        tx.execute(sql).await?;
    }
    Ok(())
}

/// The tools each derived run called, with its start and reason as just derived (the
/// run list's tool filter reads them without joining `runs`). A run's tools only grow,
/// except when a trace moves away, and that deletes the old run's rows. Returns how many
/// runs called each tool for the first time (for the tools' run counts): the rows this
/// write inserted, as the database reports them, so two writers racing for one row
/// count it once.
pub async fn store_run_tools(
    tx: &mut Tx,
    derived: &[RunDetail],
    facts_by_run: &BTreeMap<String, Vec<SpanFacts>>,
    run_nos: &BTreeMap<String, i64>,
) -> StoreResult<RunDeltas> {
    let mut run_tools: Vec<(&str, i64, &str, i64, &str)> = Vec::new();
    for d in derived {
        let r = &d.run;
        let started_ns = r.started_at.and_then(|t| t.timestamp_nanos_opt()).unwrap_or(0);
        let tools: BTreeSet<&str> =
            facts_by_run.get(&r.run_id).into_iter().flatten().filter_map(|f| f.tool_name.as_deref()).collect();
        let run_no = run_nos[r.run_id.as_str()];
        run_tools
            .extend(tools.into_iter().map(|t| (r.run_id.as_str(), run_no, t, started_ns, r.terminal_reason.as_str())));
    }
    // New rows first: `DO NOTHING` returns only the rows it inserted, on both backends.
    let mut inserted: BTreeSet<(i64, String)> = BTreeSet::new();
    for chunk in cacheable_chunks(&run_tools, ROWS_PER_INSERT) {
        let mut sql = Sql::new("INSERT INTO run_tools (run_id, run_no, tool_name, started_ns, terminal_reason) ");
        sql.values(chunk, |row, (run, run_no, tool, started_ns, reason)| {
            row.bind(*run).bind(*run_no).bind(*tool).bind(*started_ns).bind(*reason);
        });
        sql.push(" ON CONFLICT (run_no, tool_name) DO NOTHING RETURNING run_no, tool_name");
        inserted.extend(tx.fetch_all::<(i64, String)>(sql).await?);
    }
    // Rows that were there already take the run's start and reason as now derived.
    let existing: Vec<_> =
        run_tools.iter().filter(|(_, run_no, tool, ..)| !inserted.contains(&(*run_no, tool.to_string()))).collect();
    for chunk in cacheable_chunks(&existing, ROWS_PER_INSERT) {
        let mut sql = Sql::new("INSERT INTO run_tools (run_id, run_no, tool_name, started_ns, terminal_reason) ");
        sql.values(chunk, |row, (run, run_no, tool, started_ns, reason)| {
            row.bind(*run).bind(*run_no).bind(*tool).bind(*started_ns).bind(*reason);
        });
        sql.push(
            " ON CONFLICT (run_no, tool_name) DO UPDATE SET started_ns = excluded.started_ns, \
             terminal_reason = excluded.terminal_reason \
             WHERE run_tools.started_ns <> excluded.started_ns OR run_tools.terminal_reason <> excluded.terminal_reason",
        );
        tx.execute(sql).await?;
    }
    let mut new_runs = RunDeltas::default();
    for (run_no, tool) in inserted {
        new_runs.add(partitions::day_of_run_no(run_no), &tool, 1);
    }
    Ok(new_runs)
}

/// What one write saw of one tool.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ToolSeen {
    pub calls: i64,
    pub first_ns: i64,
    pub last_ns: i64,
    pub declared: Option<&'static str>,
    pub read_only: Option<bool>,
    pub destructive: Option<bool>,
}

/// Every tool among `spans`: how often it was called, when, and what its spans declare
/// about it (the last declaration wins) (pure).
pub fn tools_seen<'a>(spans: impl Iterator<Item = &'a NormalizedSpan>) -> BTreeMap<&'a str, ToolSeen> {
    let mut seen: BTreeMap<&str, ToolSeen> = BTreeMap::new();
    for s in spans {
        let Some(name) = s.tool_name.as_deref() else { continue };
        let t =
            seen.entry(name).or_insert(ToolSeen { first_ns: s.start_ns, last_ns: s.start_ns, ..Default::default() });
        t.calls += 1;
        t.first_ns = t.first_ns.min(s.start_ns);
        t.last_ns = t.last_ns.max(s.start_ns);
        if s.side_effect_declared {
            t.declared = s.side_effect.map(|c| c.as_str());
        }
        t.read_only = s.tool_hints.0.or(t.read_only);
        t.destructive = s.tool_hints.1.or(t.destructive);
    }
    seen
}

/// Adds this write's calls to the catalogue of tools, and `run_deltas` to their run
/// counts (runs that called a tool for the first time, less runs whose rows went), and
/// on PostgreSQL to their counts per arrival day.
pub async fn count_tools<'a>(
    tx: &mut Tx,
    new_spans: impl Iterator<Item = &'a NormalizedSpan>,
    run_deltas: &RunDeltas,
) -> StoreResult<()> {
    let by_tool = run_deltas.by_tool();
    let seen: Vec<(&str, ToolSeen)> = tools_seen(new_spans).into_iter().collect();
    for chunk in cacheable_chunks(&seen, ROWS_PER_INSERT / 4) {
        let mut sql = Sql::new(
            "INSERT INTO tools (tool_name, calls, runs, first_seen_ns, last_seen_ns, declared_class, read_only_hint, destructive_hint) ",
        );
        sql.values(chunk, |row, (name, t)| {
            row.bind(*name)
                .bind(t.calls)
                .bind(by_tool.get(*name).copied().unwrap_or(0))
                .bind(t.first_ns)
                .bind(t.last_ns)
                .bind(t.declared)
                .bind(t.read_only)
                .bind(t.destructive);
        });
        sql.push(
            " ON CONFLICT (tool_name) DO UPDATE SET calls = tools.calls + excluded.calls, \
             runs = tools.runs + excluded.runs, \
             first_seen_ns = CASE WHEN excluded.first_seen_ns < tools.first_seen_ns THEN excluded.first_seen_ns ELSE tools.first_seen_ns END, \
             last_seen_ns = CASE WHEN excluded.last_seen_ns > tools.last_seen_ns THEN excluded.last_seen_ns ELSE tools.last_seen_ns END, \
             declared_class = COALESCE(excluded.declared_class, tools.declared_class), \
             read_only_hint = COALESCE(excluded.read_only_hint, tools.read_only_hint), \
             destructive_hint = COALESCE(excluded.destructive_hint, tools.destructive_hint)",
        );
        tx.execute(sql).await?;
    }
    // A tool whose run count changed without a new call here (a trace that moved runs).
    let called: BTreeSet<&str> = seen.iter().map(|(name, _)| *name).collect();
    let rest = by_tool.iter().filter(|(name, _)| !called.contains(name.as_str()));
    tools::adjust_runs(tx, rest).await?;
    tools::count_days(tx, run_deltas).await
}

/// Stores the bodies of this write's new spans, one chunk per run, after derivation:
/// under `failed_runs` a run that completed keeps none, so a run completing in this write
/// never has its bodies stored, and one stored by earlier writes has them deleted now.
pub async fn store_bodies(
    tx: &mut Tx,
    policy: BodyPolicy,
    derived: &[RunDetail],
    batch: &Gathered<'_>,
    assignment: &Assignment<'_>,
) -> StoreResult<()> {
    let completed: BTreeSet<&str> = derived
        .iter()
        .filter(|d| policy == BodyPolicy::FailedRuns && d.run.terminal_reason == TerminalReason::Completed)
        .map(|d| d.run.run_id.as_str())
        .collect();
    if policy != BodyPolicy::None {
        // Only spans stored by this write (a re-sent span's bodies are stored already).
        let chunks: Vec<(&str, i64, i64, Vec<u8>)> = batch
            .new_by_run
            .iter()
            .filter(|(run, _)| !completed.contains(**run))
            .filter_map(|(run, new)| {
                let with_bodies = new.iter().filter(|s| !s.json.bodies.is_empty());
                let n = with_bodies.clone().count() as i64;
                let entries = with_bodies.map(|s| (s.trace_id.as_str(), s.span_id.as_str(), s.json.bodies.as_str()));
                (n > 0).then(|| (*run, assignment.run_nos[*run], n, packing::pack(&record::body_chunk(entries), None)))
            })
            .collect();
        for part in cacheable_parts(chunks, ROWS_PER_INSERT) {
            let mut sql = Sql::new("INSERT INTO body_chunks (run_id, run_no, spans, bodies, packed) ");
            sql.values(part, |row, (run, run_no, n, packed)| {
                row.bind(run).bind(run_no).bind(n).bind("").bind(packed);
            });
            tx.execute(sql).await?;
        }
    }
    let stale: Vec<i64> = completed
        .iter()
        .filter(|run| assignment.had_spans.contains(**run))
        .map(|run| assignment.run_nos[*run])
        .collect();
    for chunk in cacheable_chunks(&stale, IDS_PER_QUERY) {
        let mut sql = Sql::new("DELETE FROM body_chunks WHERE run_no IN ");
        sql.list(chunk.iter().copied());
        tx.execute(sql).await?;
    }
    Ok(())
}

/// The stored form of a run's unpriced models: a JSON array, or NULL when there are none.
pub fn unpriced_json(models: &[String]) -> Option<String> {
    (!models.is_empty()).then(|| json(models))
}

/// A list stored as JSON text. Serializing plain strings and numbers cannot fail.
fn json<T: serde::Serialize + ?Sized>(value: &T) -> String {
    serde_json::to_string(value).expect("lists of strings and numbers serialize")
}
