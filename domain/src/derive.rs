//! The run as a whole, recomputed from its spans: terminal reason, totals, steps, tool
//! calls, duplicate side effects and the flags. Pure, so every rule here is unit-tested
//! and gives the same answer whatever order the spans arrived in.

use super::policy::{policy_for, ToolPolicy};
use crate::canonical::{
    CostSource, DuplicateView, Outcome, PriceUse, RunDetail, RunSummary, SideEffect, StepView, TerminalReason,
    ToolCallView, Trigger,
};
use crate::clock::from_ms;
use crate::pricing::{PriceTable, Tokens};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::LazyLock;

/// What derivation reads besides the spans, and an admin can change: the price table
/// (cost of runs whose agent sent none) and the tool policies (the class of a tool whose
/// spans do not declare one). Stored runs are recomputed when either changes.
#[derive(Debug, Clone, PartialEq)]
pub struct Rules {
    pub prices: PriceTable,
    pub policies: Vec<ToolPolicy>,
}

impl Default for Rules {
    /// The shipped prices and no policies.
    fn default() -> Self {
        Rules { prices: PriceTable::with_overrides([]), policies: Vec::new() }
    }
}

static SHIPPED: LazyLock<Rules> = LazyLock::new(Rules::default);

/// The stored canonical fields of one span: what derivation needs, nothing more. Read
/// straight from a stored chunk (`ingest::record`), skipping the rest of a record.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
pub struct SpanFacts {
    pub trace_id: String,
    pub span_id: String,
    pub parent_span_id: Option<String>,
    pub start_ns: i64,
    pub end_ns: i64,
    pub status_code: i32,
    pub agent: Option<String>,
    pub trigger: Option<String>,
    pub terminal_reason: Option<String>,
    pub escalation_reason: Option<String>,
    pub cost: Option<f64>,
    #[serde(default)]
    pub step_limit: Option<i64>,
    #[serde(default)]
    pub cost_limit: Option<f64>,
    pub role: Option<String>,
    pub step_index: Option<i64>,
    pub stop_reason: Option<String>,
    pub model_id: Option<String>,
    pub input_tokens: Option<i64>,
    pub output_tokens: Option<i64>,
    pub cache_tokens: Option<i64>,
    #[serde(default)]
    pub cache_write_tokens: Option<i64>,
    #[serde(default)]
    pub reasoning_tokens: Option<i64>,
    pub tool_name: Option<String>,
    pub side_effect: Option<String>,
    /// The span declared `side_effect` itself; otherwise it came from a policy (or is
    /// unknown) and the current policies decide it again. Absent in records stored
    /// before this was kept, which are judged as not declared.
    #[serde(default)]
    pub side_effect_declared: Option<bool>,
    pub idempotency_key: Option<String>,
    pub attempt: Option<i64>,
    pub outcome: Option<String>,
    pub latency_ms: Option<i64>,
    pub external_id: Option<String>,
    pub args_sha256: Option<String>,
    pub approval_id: Option<String>,
    /// The call's arguments carried a credential (stored redacted).
    #[serde(default)]
    pub credential_in_arguments: bool,
}

const STATUS_ERROR: i32 = 2;

fn ns_to_time(ns: i64) -> Option<chrono::DateTime<chrono::Utc>> {
    (ns > 0).then(|| from_ms(ns / 1_000_000))
}

/// The tool of a run's first failed call (outcome `error` or `timeout`, earliest end),
/// what the "failed to recover" alert names; `None` when no call with a tool name failed.
/// Kept in `runs.failed_tool` at ingest so the alert never reads spans (pure).
pub fn first_failed_tool(spans: &[SpanFacts]) -> Option<&str> {
    spans
        .iter()
        .filter(|f| matches!(f.outcome.as_deref(), Some("error" | "timeout")))
        .min_by_key(|f| f.end_ns)?
        .tool_name
        .as_deref()
}

/// The model most of a run's steps named (ties: the one with more tokens, then the first
/// by name), kept in `runs.model` at ingest for the trends' cost by model and the run
/// list's model filter; `None` when no step names one (pure).
pub fn main_model(spans: &[SpanFacts]) -> Option<&str> {
    let mut by_model: BTreeMap<&str, (usize, i64)> = BTreeMap::new();
    for s in spans.iter().filter(|s| s.role.as_deref() == Some("step")) {
        if let Some(model) = s.model_id.as_deref().filter(|m| !m.is_empty()) {
            let entry = by_model.entry(model).or_default();
            entry.0 += 1;
            entry.1 = entry.1.saturating_add(s.input_tokens.unwrap_or(0)).saturating_add(s.output_tokens.unwrap_or(0));
        }
    }
    // Ascending by name, so on a full tie `max_by` keeps the last: reverse the name order.
    by_model.into_iter().rev().max_by_key(|(_, (steps, tokens))| (*steps, *tokens)).map(|(m, _)| m)
}

/// Recomputes everything about a run from all of its spans, with the shipped prices and
/// no policies (tests and tools that have no database).
pub fn derive_run(run_id: &str, spans: &[SpanFacts]) -> RunDetail {
    derive_run_with(run_id, spans, &SHIPPED)
}

/// Recomputes everything about a run from all of its spans under `rules`.
pub fn derive_run_with(run_id: &str, spans: &[SpanFacts], rules: &Rules) -> RunDetail {
    // Traces in order of their first span; the last one is the latest attempt.
    let mut first_start: BTreeMap<&str, i64> = BTreeMap::new();
    for s in spans {
        let e = first_start.entry(&s.trace_id).or_insert(s.start_ns);
        *e = (*e).min(s.start_ns);
    }
    let mut traces: Vec<(&str, i64)> = first_start.into_iter().collect();
    traces.sort_by_key(|(t, start)| (*start, *t));
    let trace_ids: Vec<String> = traces.iter().map(|(t, _)| t.to_string()).collect();

    let roots: Vec<&SpanFacts> = spans.iter().filter(|s| s.parent_span_id.is_none()).collect();
    let root_of = |trace: &str| roots.iter().copied().filter(|r| r.trace_id == trace).min_by_key(|r| r.start_ns);
    // A trace whose root has not arrived (or not ended) is still running.
    let all_traces_ended = traces.iter().all(|(t, _)| root_of(t).is_some_and(|r| r.end_ns > 0));
    let latest_trace = traces.last().map(|(t, _)| *t);
    let in_latest = |s: &&SpanFacts| Some(s.trace_id.as_str()) == latest_trace;

    let explicit_reason = latest_trace
        .and_then(root_of)
        .and_then(|r| r.terminal_reason.as_deref())
        .or_else(|| spans.iter().filter(in_latest).find_map(|s| s.terminal_reason.as_deref()))
        .and_then(TerminalReason::parse);
    let escalation_reason = spans
        .iter()
        .filter(in_latest)
        .find_map(|s| s.escalation_reason.clone())
        .or_else(|| spans.iter().find_map(|s| s.escalation_reason.clone()));
    let terminal_reason = if !all_traces_ended || spans.is_empty() {
        TerminalReason::Running
    } else if let Some(reason) = explicit_reason.filter(|r| *r != TerminalReason::Running) {
        reason
    } else if latest_trace.and_then(root_of).is_some_and(|r| r.status_code == STATUS_ERROR) {
        TerminalReason::Error
    } else if spans.iter().filter(in_latest).any(|s| s.escalation_reason.is_some()) {
        TerminalReason::Escalated
    } else {
        TerminalReason::Completed
    };

    let earliest_root = traces.first().and_then(|(t, _)| root_of(t));
    let agent = earliest_root.and_then(|r| r.agent.clone()).or_else(|| spans.iter().find_map(|s| s.agent.clone()));
    let trigger = earliest_root
        .and_then(|r| r.trigger.as_deref())
        .or_else(|| spans.iter().find_map(|s| s.trigger.as_deref()))
        .and_then(Trigger::parse)
        .unwrap_or(Trigger::Unknown);

    let mut step_list = steps(spans);
    // Cost is a running total within an attempt: take each trace's highest, add attempts.
    // Without one from the agent, it is the steps' tokens at their models' prices.
    let priced = price_steps(&mut step_list, spans, &rules.prices);
    let (cost, cost_source, unpriced_models, prices_used) = if spans.iter().any(|s| s.cost.is_some()) {
        let sent = traces
            .iter()
            .map(|(t, _)| spans.iter().filter(|s| s.trace_id == *t).filter_map(|s| s.cost).fold(0.0, f64::max))
            .sum();
        (sent, CostSource::Agent, Vec::new(), Vec::new())
    } else {
        priced
    };

    let started_ns = spans.iter().map(|s| s.start_ns).filter(|n| *n > 0).min();
    let ended_ns = (terminal_reason != TerminalReason::Running)
        .then(|| spans.iter().map(|s| s.end_ns.max(s.start_ns)).max())
        .flatten();
    let wall_clock_ms = match (started_ns, ended_ns) {
        (Some(start), Some(end)) => Some((end - start) / 1_000_000),
        _ => None,
    };

    let tool_call_list = tool_calls(spans, &step_list, &rules.policies);
    let duplicates = duplicates(&tool_call_list);
    let unclassified_tools: Vec<String> = tool_call_list
        .iter()
        .filter(|c| c.side_effect == SideEffect::Unknown)
        .map(|c| c.tool.clone())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let deduped_calls = tool_call_list.iter().filter(|c| c.outcome == Outcome::Deduped).count() as i64;
    // "Never read anything" is only known when every call's class is known: a run whose
    // tools are unclassified is not flagged on a guess.
    let known_no_read =
        tool_call_list.iter().all(|c| c.side_effect != SideEffect::Read && c.side_effect != SideEffect::Unknown);

    RunDetail {
        run: RunSummary {
            run_id: run_id.to_string(),
            agent,
            trigger,
            terminal_reason,
            started_at: started_ns.and_then(ns_to_time),
            ended_at: ended_ns.and_then(ns_to_time),
            wall_clock_ms,
            cost,
            cost_source,
            unpriced_models,
            input_tokens: step_list.iter().map(|s| s.input_tokens).sum(),
            output_tokens: step_list.iter().map(|s| s.output_tokens).sum(),
            cache_tokens: step_list.iter().map(|s| s.cache_tokens).sum(),
            steps: step_list.len() as i64,
            tool_calls: tool_call_list.len() as i64,
            trace_ids,
            duplicate_side_effects: duplicates.iter().filter(|d| !d.possible).map(|d| d.count - 1).sum(),
            possible_duplicates: duplicates.iter().filter(|d| d.possible).map(|d| d.count - 1).sum(),
            deduped_calls,
            completed_without_read: terminal_reason == TerminalReason::Completed && known_no_read,
            approval_violations: 0,
            escalation_reason,
        },
        step_list,
        tool_call_list,
        duplicates,
        prices_used,
        unclassified_tools,
        step_limit: spans.iter().find_map(|s| s.step_limit),
        cost_limit: spans.iter().find_map(|s| s.cost_limit),
    }
}

/// Prices every step that reported tokens and names a model with a price (setting its
/// `cost`), and says what the run's cost is made of.
fn price_steps(
    steps: &mut [StepView],
    spans: &[SpanFacts],
    prices: &PriceTable,
) -> (f64, CostSource, Vec<String>, Vec<PriceUse>) {
    let started: BTreeMap<&str, i64> =
        spans.iter().filter(|s| s.role.as_deref() == Some("step")).map(|s| (s.span_id.as_str(), s.start_ns)).collect();
    let mut total = 0.0;
    let (mut with_tokens, mut priced) = (0, 0);
    let mut unpriced: BTreeSet<String> = BTreeSet::new();
    let mut used: Vec<PriceUse> = Vec::new();
    for step in steps.iter_mut() {
        let tokens = Tokens {
            input: step.input_tokens,
            output: step.output_tokens,
            cache_read: step.cache_tokens,
            cache_write: step.cache_write_tokens,
            reasoning: step.reasoning_tokens,
        };
        if tokens.is_empty() {
            continue;
        }
        with_tokens += 1;
        let model = step.model_id.clone().unwrap_or_default();
        let at = ns_to_time(started.get(step.span_id.as_str()).copied().unwrap_or(0)).unwrap_or_else(chrono::Utc::now);
        let Some(price) = prices.find(&model, at) else {
            unpriced.insert(if model.is_empty() { "(no model named)".to_string() } else { model });
            continue;
        };
        let cost = price.cost(&tokens);
        step.cost = Some(cost);
        total += cost;
        priced += 1;
        match used.iter_mut().find(|u| u.model == model && u.price == *price) {
            Some(u) => {
                u.steps += 1;
                u.cost += cost;
            }
            None => used.push(PriceUse { model, price: price.clone(), steps: 1, cost }),
        }
    }
    let source = match (with_tokens, priced) {
        (0, _) => CostSource::None,
        (_, 0) => CostSource::Unpriced,
        (n, p) if p < n => CostSource::Partial,
        _ => CostSource::Prices,
    };
    (total, source, unpriced.into_iter().collect(), used)
}

/// Steps in order. Explicit `step.index` values are kept; steps without one are numbered
/// by start time after the highest explicit index.
fn steps(spans: &[SpanFacts]) -> Vec<StepView> {
    let mut list: Vec<&SpanFacts> = spans.iter().filter(|s| s.role.as_deref() == Some("step")).collect();
    list.sort_by_key(|s| (s.start_ns, s.span_id.clone()));
    // Saturating: `step.index` is agent-supplied and may be i64::MAX (found by the fuzz test).
    let mut next = list.iter().filter_map(|s| s.step_index).max().unwrap_or(0).saturating_add(1);
    let mut out: Vec<StepView> = list
        .into_iter()
        .map(|s| {
            let index = s.step_index.unwrap_or_else(|| {
                let given = next;
                next = next.saturating_add(1);
                given
            });
            StepView {
                index,
                span_id: s.span_id.clone(),
                stop_reason: s.stop_reason.clone(),
                model_id: s.model_id.clone(),
                input_tokens: s.input_tokens.unwrap_or(0),
                output_tokens: s.output_tokens.unwrap_or(0),
                cache_tokens: s.cache_tokens.unwrap_or(0),
                cache_write_tokens: s.cache_write_tokens.unwrap_or(0),
                reasoning_tokens: s.reasoning_tokens.unwrap_or(0),
                cost: None,
            }
        })
        .collect();
    out.sort_by_key(|s| s.index);
    out
}

/// The class of one call: what its span declared, else what the current policies say,
/// else what was stored, else unknown.
fn class_of(c: &SpanFacts, policies: &[ToolPolicy]) -> SideEffect {
    let stored = c.side_effect.as_deref().and_then(SideEffect::parse).filter(|s| *s != SideEffect::Unknown);
    if c.side_effect_declared == Some(true) {
        if let Some(declared) = stored {
            return declared;
        }
    }
    c.tool_name
        .as_deref()
        .and_then(|t| policy_for(t, policies))
        .map(|p| p.side_effect)
        .filter(|s| *s != SideEffect::Unknown)
        .or(stored)
        .unwrap_or(SideEffect::Unknown)
}

/// Tool calls in start order, each placed in a step: its own `step.index`, else its
/// parent step, else the latest step that started before it in the same trace.
fn tool_calls(spans: &[SpanFacts], steps: &[StepView], policies: &[ToolPolicy]) -> Vec<ToolCallView> {
    let step_by_span: BTreeMap<&str, i64> = steps.iter().map(|s| (s.span_id.as_str(), s.index)).collect();
    let step_spans: Vec<&SpanFacts> = spans.iter().filter(|s| s.role.as_deref() == Some("step")).collect();
    let mut calls: Vec<&SpanFacts> = spans.iter().filter(|s| s.role.as_deref() == Some("tool")).collect();
    calls.sort_by_key(|s| (s.start_ns, s.span_id.clone()));
    calls
        .into_iter()
        .map(|c| {
            let step_index = c
                .step_index
                .or_else(|| c.parent_span_id.as_deref().and_then(|p| step_by_span.get(p).copied()))
                .or_else(|| {
                    step_spans
                        .iter()
                        .filter(|s| s.trace_id == c.trace_id && s.start_ns <= c.start_ns)
                        .max_by_key(|s| s.start_ns)
                        .and_then(|s| step_by_span.get(s.span_id.as_str()).copied())
                });
            ToolCallView {
                trace_id: c.trace_id.clone(),
                span_id: c.span_id.clone(),
                step_index,
                tool: c.tool_name.clone().unwrap_or_default(),
                side_effect: class_of(c, policies),
                idempotency_key: c.idempotency_key.clone(),
                attempt: c.attempt.unwrap_or(1),
                outcome: c.outcome.as_deref().and_then(Outcome::parse).unwrap_or(Outcome::Unknown),
                latency_ms: c.latency_ms,
                external_id: c.external_id.clone(),
                args_sha256: c.args_sha256.clone(),
                approval_id: c.approval_id.clone(),
                credential_in_arguments: c.credential_in_arguments,
                started_at: ns_to_time(c.start_ns),
            }
        })
        .collect()
}

/// A `write` or `irreversible` call that succeeded more than once for the same
/// idempotency key (or, without a key, the same tool and argument hash). The same for an
/// unclassified tool is a *possible* duplicate: nobody has said whether it writes.
pub fn duplicates(calls: &[ToolCallView]) -> Vec<DuplicateView> {
    let mut groups: BTreeMap<(String, String), (i64, BTreeSet<String>, bool)> = BTreeMap::new();
    let counted = |c: &&ToolCallView| {
        (c.side_effect.changes_the_world() || c.side_effect == SideEffect::Unknown) && c.outcome == Outcome::Ok
    };
    for c in calls.iter().filter(counted) {
        let key = match (&c.idempotency_key, &c.args_sha256) {
            (Some(k), _) => k.clone(),
            (None, Some(hash)) => format!("args:{hash}"),
            (None, None) => continue, // nothing says two calls are the same call
        };
        let entry = groups.entry((c.tool.clone(), key)).or_default();
        entry.0 += 1;
        entry.2 = c.side_effect == SideEffect::Unknown;
        if let Some(id) = &c.external_id {
            entry.1.insert(id.clone());
        }
    }
    groups
        .into_iter()
        .filter(|(_, (count, _, _))| *count > 1)
        .map(|((tool, key), (count, ids, possible))| DuplicateView {
            tool,
            key,
            count,
            external_ids: ids.into_iter().collect(),
            possible,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(trace: &str, id: &str, parent: Option<&str>, start: i64, end: i64) -> SpanFacts {
        SpanFacts {
            trace_id: trace.into(),
            span_id: id.into(),
            parent_span_id: parent.map(Into::into),
            start_ns: start * 1_000_000,
            end_ns: end * 1_000_000,
            ..Default::default()
        }
    }

    #[test]
    fn the_first_failed_tool_is_the_earliest_failed_call_to_end() {
        let call = |id: &str, end: i64, tool: Option<&str>, outcome: &str| SpanFacts {
            tool_name: tool.map(String::from),
            outcome: Some(outcome.into()),
            ..span("t", id, None, 0, end)
        };
        let spans = [
            call("a", 30, Some("send"), "error"),
            call("b", 10, Some("fetch"), "ok"),
            call("c", 20, Some("search"), "timeout"),
        ];
        assert_eq!(first_failed_tool(&spans), Some("search"));
        assert_eq!(first_failed_tool(&spans[1..2]), None, "nothing failed");
        assert_eq!(first_failed_tool(&[call("d", 5, None, "error")]), None, "a failed span without a tool");
    }

    #[test]
    fn the_main_model_is_the_one_most_steps_used() {
        let with = |id: &str, model: &str, tokens: i64| SpanFacts {
            model_id: Some(model.into()),
            ..step("t", id, 1, None, (tokens, 0))
        };
        assert_eq!(
            main_model(&[with("a", "gpt-4o", 10), with("b", "claude", 500), with("c", "gpt-4o", 10)]),
            Some("gpt-4o")
        );
        assert_eq!(
            main_model(&[with("a", "gpt-4o", 10), with("b", "claude", 500)]),
            Some("claude"),
            "a tie: more tokens"
        );
        assert_eq!(main_model(&[with("a", "b-model", 1), with("b", "a-model", 1)]), Some("a-model"), "then by name");
        assert_eq!(main_model(&[step("t", "s", 1, None, (1, 1))]), None, "no step names a model");
    }

    fn step(trace: &str, id: &str, start: i64, index: Option<i64>, tokens: (i64, i64)) -> SpanFacts {
        SpanFacts {
            role: Some("step".into()),
            step_index: index,
            input_tokens: Some(tokens.0),
            output_tokens: Some(tokens.1),
            ..span(trace, id, Some("root"), start, start + 10)
        }
    }

    fn tool(
        trace: &str,
        id: &str,
        start: i64,
        name: &str,
        class: &str,
        outcome: &str,
        key: Option<&str>,
        ext: Option<&str>,
    ) -> SpanFacts {
        SpanFacts {
            role: Some("tool".into()),
            tool_name: Some(name.into()),
            side_effect: Some(class.into()),
            outcome: Some(outcome.into()),
            idempotency_key: key.map(Into::into),
            external_id: ext.map(Into::into),
            ..span(trace, id, Some("root"), start, start + 5)
        }
    }

    #[test]
    fn a_step_index_at_the_end_of_the_range_does_not_overflow() {
        let spans = [step("t", "s1", 1, Some(i64::MAX), (1, 1)), step("t", "s2", 2, None, (1, 1))];
        let listed = steps(&spans);
        assert_eq!(listed.iter().map(|s| s.index).collect::<Vec<_>>(), [i64::MAX, i64::MAX]);
    }

    fn root(trace: &str, end: i64) -> SpanFacts {
        SpanFacts { agent: Some("billing".into()), trigger: Some("user".into()), ..span(trace, "root", None, 1, end) }
    }

    #[test]
    fn a_run_without_its_root_is_running_and_then_completes() {
        let mut spans =
            vec![step("t1", "s1", 10, None, (100, 10)), tool("t1", "c1", 15, "search", "read", "ok", None, None)];
        let d = derive_run("r", &spans);
        assert_eq!(d.run.terminal_reason, TerminalReason::Running);
        assert_eq!(d.run.ended_at, None);
        spans.push(root("t1", 100));
        let d = derive_run("r", &spans);
        assert_eq!(d.run.terminal_reason, TerminalReason::Completed);
        assert_eq!((d.run.steps, d.run.tool_calls, d.run.input_tokens, d.run.output_tokens), (1, 1, 100, 10));
        assert_eq!(d.run.wall_clock_ms, Some(99), "first span start to last span end");
        assert_eq!(d.run.agent.as_deref(), Some("billing"));
        assert_eq!(d.run.trigger, Trigger::User);
        assert!(!d.run.completed_without_read);
    }

    #[test]
    fn explicit_reason_beats_error_beats_escalation_beats_completed() {
        let mut r = root("t1", 50);
        r.status_code = STATUS_ERROR;
        assert_eq!(derive_run("r", &[r.clone()]).run.terminal_reason, TerminalReason::Error);
        r.terminal_reason = Some("step_limit".into());
        assert_eq!(derive_run("r", &[r.clone()]).run.terminal_reason, TerminalReason::StepLimit);
        let mut ok = root("t1", 50);
        let mut child = span("t1", "x", Some("root"), 1, 2);
        child.escalation_reason = Some("low_confidence".into());
        let d = derive_run("r", &[ok.clone(), child]);
        assert_eq!(d.run.terminal_reason, TerminalReason::Escalated);
        assert_eq!(d.run.escalation_reason.as_deref(), Some("low_confidence"));
        ok.terminal_reason = Some("nonsense".into());
        assert_eq!(derive_run("r", &[ok]).run.terminal_reason, TerminalReason::Completed, "unknown values are ignored");
    }

    #[test]
    fn completed_without_any_read_tool_is_flagged() {
        let spans = vec![root("t1", 100), tool("t1", "c1", 5, "send_email", "write", "ok", Some("k"), None)];
        assert!(derive_run("r", &spans).run.completed_without_read);
        let mut failed = spans.clone();
        failed[0].status_code = STATUS_ERROR;
        assert!(!derive_run("r", &failed).run.completed_without_read, "only completed runs are flagged");
        let mut unclassified = spans.clone();
        unclassified.push(tool("t1", "c2", 6, "mystery", "unknown", "ok", None, None));
        assert!(!derive_run("r", &unclassified).run.completed_without_read, "no flag on a guess");
        assert!(derive_run("r", &[root("t1", 100)]).run.completed_without_read, "no tool call at all");
    }

    #[test]
    fn duplicate_side_effects_across_an_orchestrator_retry() {
        // attempt 1: email sent, then the DB write timed out (it may have happened)
        let mut t1 = root("t1", 100);
        t1.status_code = STATUS_ERROR;
        t1.cost = Some(0.10);
        let mut t2 = root("t2", 400);
        t2.trigger = Some("retry".into());
        t2.cost = Some(0.15);
        let mut t2_root = t2.clone();
        t2_root.start_ns = 200 * 1_000_000;
        let spans = vec![
            t1,
            tool("t1", "a", 10, "send_email", "irreversible", "ok", Some("k-mail"), Some("msg_1")),
            tool("t1", "b", 20, "create_record", "write", "timeout", Some("k-rec"), None),
            t2_root,
            tool("t2", "c", 210, "send_email", "irreversible", "ok", Some("k-mail"), Some("msg_2")),
            tool("t2", "d", 220, "create_record", "write", "ok", Some("k-rec"), Some("rec_1")),
            tool("t2", "e", 230, "create_record", "write", "deduped", Some("k-rec"), Some("rec_1")),
            tool("t2", "f", 240, "lookup", "read", "ok", None, None),
        ];
        let d = derive_run("r", &spans);
        assert_eq!(d.run.trace_ids, vec!["t1", "t2"]);
        assert_eq!(d.run.terminal_reason, TerminalReason::Completed, "the latest attempt decides");
        assert_eq!(d.run.trigger, Trigger::User, "the first attempt's trigger");
        assert_eq!(d.run.duplicate_side_effects, 1);
        assert_eq!(d.run.deduped_calls, 1);
        assert_eq!(
            d.duplicates,
            vec![DuplicateView {
                tool: "send_email".into(),
                key: "k-mail".into(),
                count: 2,
                external_ids: vec!["msg_1".into(), "msg_2".into()],
                possible: false,
            }]
        );
        assert!((d.run.cost - 0.25).abs() < 1e-9, "costs of attempts add up: {}", d.run.cost);
    }

    #[test]
    fn without_a_key_the_argument_hash_identifies_a_call() {
        let mut a = tool("t", "a", 1, "create_doc", "write", "ok", None, Some("d1"));
        a.args_sha256 = Some("h1".into());
        let mut b = tool("t", "b", 2, "create_doc", "write", "ok", None, Some("d2"));
        b.args_sha256 = Some("h1".into());
        let mut c = tool("t", "c", 3, "create_doc", "write", "ok", None, Some("d3"));
        c.args_sha256 = Some("h2".into());
        let d = derive_run("r", &[root("t", 10), a, b, c]);
        assert_eq!(d.duplicates.len(), 1);
        assert_eq!(d.duplicates[0].key, "args:h1");
        assert_eq!(d.run.duplicate_side_effects, 1);
        // reads and failures never count
        let r1 = tool("t", "x", 1, "get", "read", "ok", Some("k"), None);
        let r2 = tool("t", "y", 2, "get", "read", "ok", Some("k"), None);
        let w1 = tool("t", "z", 3, "put", "write", "error", Some("k2"), None);
        let w2 = tool("t", "w", 4, "put", "write", "ok", Some("k2"), None);
        assert_eq!(derive_run("r", &[r1, r2, w1, w2]).run.duplicate_side_effects, 0);
    }

    #[test]
    fn steps_are_numbered_and_tool_calls_placed_in_them() {
        let spans = vec![
            root("t", 100),
            step("t", "s2", 30, None, (5, 1)),
            step("t", "s1", 10, None, (7, 2)),
            tool("t", "c1", 12, "search", "read", "ok", None, None),
            SpanFacts { parent_span_id: Some("s2".into()), ..tool("t", "c2", 35, "search", "read", "ok", None, None) },
            SpanFacts { step_index: Some(9), ..tool("t", "c3", 40, "search", "read", "ok", None, None) },
        ];
        let d = derive_run("r", &spans);
        assert_eq!(
            d.step_list.iter().map(|s| (s.index, s.span_id.as_str())).collect::<Vec<_>>(),
            vec![(1, "s1"), (2, "s2")]
        );
        let placed: Vec<_> = d.tool_call_list.iter().map(|c| c.step_index).collect();
        assert_eq!(placed, vec![Some(1), Some(2), Some(9)]);
        assert_eq!((d.run.input_tokens, d.run.output_tokens), (12, 3));
    }

    #[test]
    fn order_of_arrival_does_not_matter() {
        let spans = vec![
            root("t", 100),
            step("t", "s1", 10, Some(1), (1, 1)),
            tool("t", "c1", 12, "send", "write", "ok", Some("k"), Some("e1")),
            tool("t", "c2", 14, "send", "write", "ok", Some("k"), Some("e2")),
        ];
        let mut reversed = spans.clone();
        reversed.reverse();
        assert_eq!(derive_run("r", &spans), derive_run("r", &reversed));
    }

    fn model_step(id: &str, start: i64, model: &str, input: i64, output: i64, cache: i64) -> SpanFacts {
        SpanFacts {
            model_id: Some(model.into()),
            cache_tokens: Some(cache),
            // 2026: every shipped price holds by then.
            ..step("t", id, start, None, (input, output))
        }
    }

    fn in_2026(mut s: SpanFacts) -> SpanFacts {
        s.start_ns += 1_767_225_600_000_000_000;
        s.end_ns += 1_767_225_600_000_000_000;
        s
    }

    #[test]
    fn without_a_sent_cost_the_tokens_are_priced() {
        let spans: Vec<SpanFacts> = vec![
            root("t", 100),
            model_step("s1", 10, "claude-sonnet-4-5", 100_000, 10_000, 0),
            model_step("s2", 20, "anthropic/claude-sonnet-4-5-20250929", 5_000, 1_000, 100_000),
        ]
        .into_iter()
        .map(in_2026)
        .collect();
        let d = derive_run("r", &spans);
        // 105k input at $3, 11k output at $15, 100k cache reads at $0.30 per million.
        let want = (105_000.0 * 3.0 + 11_000.0 * 15.0 + 100_000.0 * 0.3) / 1e6;
        assert!((d.run.cost - want).abs() < 1e-9, "{} != {want}", d.run.cost);
        assert_eq!(d.run.cost_source, CostSource::Prices);
        assert_eq!(d.prices_used.len(), 2, "one line per model name");
        assert!(d.step_list.iter().all(|s| s.cost.is_some()));

        // The agent's own figure wins over any price.
        let mut sent = spans.clone();
        sent[0].cost = Some(0.5);
        let d = derive_run("r", &sent);
        assert_eq!((d.run.cost, d.run.cost_source), (0.5, CostSource::Agent));
        assert!(d.prices_used.is_empty());
    }

    #[test]
    fn a_model_without_a_price_is_named_never_counted_as_free() {
        let spans: Vec<SpanFacts> = vec![
            root("t", 100),
            model_step("s1", 10, "my-llama", 1000, 10, 0),
            model_step("s2", 20, "gpt-4.1-mini", 1_000_000, 0, 0),
        ]
        .into_iter()
        .map(in_2026)
        .collect();
        let d = derive_run("r", &spans);
        assert_eq!(d.run.cost_source, CostSource::Partial);
        assert_eq!(d.run.unpriced_models, vec!["my-llama"]);
        assert!((d.run.cost - 0.4).abs() < 1e-9);
        let d = derive_run("r", &spans[..2]);
        assert_eq!((d.run.cost_source, d.run.cost), (CostSource::Unpriced, 0.0));
        assert_eq!(derive_run("r", &spans[..1]).run.cost_source, CostSource::None, "no tokens, no cost");
    }

    #[test]
    fn unclassified_tools_are_named_and_their_repeats_are_possible_duplicates() {
        let mut a = tool("t", "a", 1, "send_email", "unknown", "ok", None, None);
        a.args_sha256 = Some("h".into());
        let mut b = tool("t", "b", 2, "send_email", "unknown", "ok", None, None);
        b.args_sha256 = Some("h".into());
        let spans = vec![root("t", 10), a, b];
        let d = derive_run("r", &spans);
        assert_eq!(d.unclassified_tools, vec!["send_email"]);
        assert_eq!((d.run.duplicate_side_effects, d.run.possible_duplicates), (0, 1));
        assert!(d.duplicates[0].possible);
        assert!(!d.run.completed_without_read, "an unclassified tool is never taken as harmless");

        // A policy made later classifies the stored calls, and the repeat is a duplicate.
        let rules = Rules { policies: vec![ToolPolicy::class("send_*", SideEffect::Irreversible)], ..Rules::default() };
        let d = derive_run_with("r", &spans, &rules);
        assert!(d.unclassified_tools.is_empty());
        assert_eq!((d.run.duplicate_side_effects, d.run.possible_duplicates), (1, 0));
        assert!(d.run.completed_without_read);
        // ...but never overrides what a span declared itself.
        let declared: Vec<SpanFacts> = spans
            .iter()
            .cloned()
            .map(|mut s| {
                if s.role.as_deref() == Some("tool") {
                    s.side_effect = Some("read".into());
                    s.side_effect_declared = Some(true);
                }
                s
            })
            .collect();
        assert_eq!(derive_run_with("r", &declared, &rules).run.duplicate_side_effects, 0);
    }
}
