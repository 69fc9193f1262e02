//! Checks of the generator against the spans it actually produces: structure, ids, times,
//! conventions, and an independent re-derivation of every run's `Expected` from its spans
//! (a miniature ingest following PRODUCT.md's mapping table).

use std::collections::{HashMap, HashSet};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::trace::v1::status::StatusCode;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, Span};
use prost::Message;

use super::*;

const RUNS: usize = 1_000;

fn runs_with(opts: SynthOptions, n: usize) -> Vec<SynthRun> {
    let mut synth = Synth::new(opts);
    (0..n).map(|_| synth.next_run()).collect()
}

fn runs(n: usize) -> Vec<SynthRun> {
    runs_with(SynthOptions::default(), n)
}

fn value<'a>(attributes: &'a [KeyValue], key: &str) -> Option<&'a Value> {
    attributes.iter().find(|kv| kv.key == key).and_then(|kv| kv.value.as_ref()).and_then(|v| v.value.as_ref())
}

fn text<'a>(attributes: &'a [KeyValue], key: &str) -> Option<&'a str> {
    match value(attributes, key) {
        Some(Value::StringValue(s)) => Some(s),
        _ => None,
    }
}

fn int(attributes: &[KeyValue], key: &str) -> Option<i64> {
    match value(attributes, key) {
        Some(Value::IntValue(i)) => Some(*i),
        _ => None,
    }
}

fn spans(trace: &ResourceSpans) -> impl Iterator<Item = &Span> {
    trace.scope_spans.iter().flat_map(|s| &s.spans)
}

fn run_spans(run: &SynthRun) -> impl Iterator<Item = &Span> {
    run.traces.iter().flat_map(spans)
}

fn root(trace: &ResourceSpans) -> &Span {
    spans(trace).find(|s| s.parent_span_id.is_empty()).expect("every trace has a root")
}

/// Tool spans as the mapping table recognises them.
fn is_tool(span: &Span) -> bool {
    let a = &span.attributes;
    text(a, "gen_ai.operation.name") == Some("execute_tool")
        || text(a, "openinference.span.kind") == Some("TOOL")
        || text(a, "tool.name").is_some()
}

fn is_step(span: &Span) -> bool {
    !span.parent_span_id.is_empty() && !is_tool(span)
}

fn is_error(span: &Span) -> bool {
    span.status.as_ref().is_some_and(|s| s.code == StatusCode::Error as i32)
}

fn has_escalation(span: &Span) -> bool {
    text(&span.attributes, "escalation.reason").is_some()
        || span.events.iter().any(|e| e.name == "escalation" && text(&e.attributes, "escalation.reason").is_some())
}

/// What an ingest following the default mapping table concludes from the spans alone.
fn ingest(run: &SynthRun) -> Expected {
    let last_root = run.traces.iter().map(root).max_by_key(|r| r.start_time_unix_nano).unwrap();
    let terminal_reason = match text(&last_root.attributes, "run.terminal_reason") {
        Some(reason) => reason.to_string(),
        None if is_error(last_root) => "error".into(),
        None if has_escalation(last_root) => "escalated".into(),
        None => "completed".into(),
    };
    let tools: Vec<&Span> = run_spans(run).filter(|s| is_tool(s)).collect();
    let side_effect = |s: &Span| text(&s.attributes, "tool.side_effect").map(str::to_string);
    let mut successes: HashMap<&str, usize> = HashMap::new();
    for span in &tools {
        let a = &span.attributes;
        if matches!(text(a, "tool.side_effect"), Some("write" | "irreversible"))
            && text(a, "tool.outcome") == Some("ok")
        {
            *successes.entry(text(a, "tool.idempotency_key").unwrap()).or_default() += 1;
        }
    }
    let all_classified = tools.iter().all(|s| side_effect(s).is_some());
    Expected {
        convention: run.expected.convention,
        completed_without_read: terminal_reason == "completed"
            && all_classified
            && !tools.iter().any(|s| side_effect(s).as_deref() == Some("read")),
        terminal_reason,
        steps: run_spans(run).filter(|s| is_step(s)).count(),
        tool_calls: tools.len(),
        duplicate_side_effects: successes.values().map(|n| n - 1).sum(),
        deduped_calls: tools.iter().filter(|s| text(&s.attributes, "tool.outcome") == Some("deduped")).count(),
    }
}

#[test]
fn same_seed_same_runs_other_seed_other_runs() {
    let a = runs(50);
    let b = runs(50);
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(x.run_id, y.run_id);
        assert_eq!(x.traces, y.traces);
        assert_eq!(x.expected, y.expected);
    }
    let other = runs_with(SynthOptions { seed: 2, ..Default::default() }, 50);
    assert_ne!(a[0].traces, other[0].traces);
}

#[test]
fn ids_have_otlp_lengths_and_are_unique() {
    let mut span_ids = HashSet::new();
    let mut trace_ids = HashSet::new();
    for run in runs(RUNS) {
        for trace in &run.traces {
            let trace_id = &root(trace).trace_id;
            assert_eq!(trace_id.len(), 16);
            assert!(trace_id.iter().any(|&b| b != 0));
            assert!(trace_ids.insert(trace_id.clone()), "trace ids repeat");
            for span in spans(trace) {
                assert_eq!(&span.trace_id, trace_id, "one trace per ResourceSpans");
                assert_eq!(span.span_id.len(), 8);
                assert!(span.span_id.iter().any(|&b| b != 0));
                assert!(span.parent_span_id.is_empty() || span.parent_span_id.len() == 8);
                assert!(span_ids.insert(span.span_id.clone()), "span ids repeat");
            }
        }
        assert_eq!(run.span_count, run_spans(&run).count());
    }
}

#[test]
fn parents_exist_and_contain_their_children_in_time() {
    for run in runs(RUNS) {
        for trace in &run.traces {
            let by_id: HashMap<&[u8], &Span> = spans(trace).map(|s| (s.span_id.as_slice(), s)).collect();
            assert_eq!(spans(trace).filter(|s| s.parent_span_id.is_empty()).count(), 1);
            for span in spans(trace) {
                assert!(span.start_time_unix_nano < span.end_time_unix_nano, "{}", span.name);
                if span.parent_span_id.is_empty() {
                    continue;
                }
                let parent = by_id
                    .get(span.parent_span_id.as_slice())
                    .unwrap_or_else(|| panic!("{} has no parent in its trace", span.name));
                assert!(parent.start_time_unix_nano <= span.start_time_unix_nano);
                assert!(span.end_time_unix_nano <= parent.end_time_unix_nano);
                for event in &span.events {
                    assert!(event.time_unix_nano >= span.start_time_unix_nano);
                    assert!(event.time_unix_nano <= span.end_time_unix_nano);
                }
            }
            // One loop turn after another, and one tool call after another.
            for filter in [is_step as fn(&Span) -> bool, is_tool] {
                let mut sequence: Vec<&Span> = spans(trace).filter(|s| filter(s)).collect();
                sequence.sort_by_key(|s| s.start_time_unix_nano);
                for pair in sequence.windows(2) {
                    assert!(pair[0].end_time_unix_nano <= pair[1].start_time_unix_nano);
                }
            }
        }
    }
}

#[test]
fn runs_start_at_the_base_time_and_move_forward() {
    let opts = SynthOptions::default();
    let base = opts.base_time_unix_nano;
    let runs = runs_with(opts, 100);
    let starts: Vec<u64> = runs.iter().map(|r| root(&r.traces[0]).start_time_unix_nano).collect();
    assert!(starts[0] >= base && starts[0] < base + 1_000_000_000);
    assert!(starts.windows(2).all(|w| w[0] < w[1]));
    for run in runs.iter().filter(|r| r.traces.len() == 2) {
        // The orchestrator restarts after the first attempt ended.
        assert!(root(&run.traces[0]).end_time_unix_nano < root(&run.traces[1]).start_time_unix_nano);
    }
}

#[test]
fn expected_agrees_with_the_spans() {
    for run in runs(RUNS) {
        assert_eq!(ingest(&run), run.expected, "run {}", run.run_id);
    }
}

#[test]
fn each_convention_uses_its_own_names() {
    let runs = runs(RUNS);
    let of = |c: Convention| runs.iter().filter(move |r| r.expected.convention == c);
    for convention in [Convention::Article, Convention::GenAi, Convention::OpenInference] {
        assert!(of(convention).count() >= 50, "{convention:?} too rare");
    }
    let has_all = |span: &Span, wanted: &[&str]| {
        let keys: HashSet<&str> = span.attributes.iter().map(|kv| kv.key.as_str()).collect();
        for key in wanted {
            assert!(keys.contains(key), "{} lacks {key}: {keys:?}", span.name);
        }
    };

    for run in runs.iter() {
        for trace in &run.traces {
            let service = text(&trace.resource.as_ref().unwrap().attributes, "service.name").unwrap();
            assert!(SynthOptions::default().agents.iter().any(|a| a == service));
            if let Some(agent) = text(&root(trace).attributes, "gen_ai.agent.name") {
                assert_eq!(agent, service);
            }
        }
    }

    for run in of(Convention::Article) {
        for span in run_spans(run) {
            if span.parent_span_id.is_empty() {
                has_all(
                    span,
                    &[
                        "run.id",
                        "run.trigger",
                        "run.terminal_reason",
                        "budget.cost_spent",
                        "budget.wall_clock_ms",
                        "gen_ai.agent.name",
                    ],
                );
                assert_eq!(text(&span.attributes, "run.id"), Some(run.run_id.as_str()));
            } else if is_tool(span) {
                has_all(
                    span,
                    &[
                        "tool.name",
                        "tool.side_effect",
                        "tool.idempotency_key",
                        "tool.attempt",
                        "tool.outcome",
                        "tool.latency_ms",
                        "step.index",
                        "gen_ai.tool.call.arguments",
                    ],
                );
                assert_eq!(span.name, format!("tool {}", text(&span.attributes, "tool.name").unwrap()));
            } else {
                has_all(
                    span,
                    &[
                        "step.index",
                        "step.model_id",
                        "step.input_tokens",
                        "step.output_tokens",
                        "step.cache_read_tokens",
                    ],
                );
                assert_eq!(span.name, format!("step {}", int(&span.attributes, "step.index").unwrap()));
            }
        }
    }

    for run in of(Convention::GenAi) {
        assert_eq!(run.traces.len(), 1);
        for span in run_spans(run) {
            let attributes = span.attributes.iter().chain(span.events.iter().flat_map(|e| &e.attributes));
            for kv in attributes {
                assert!(
                    !["run.", "step.", "tool."].iter().any(|p| kv.key.starts_with(p)),
                    "{} has {}",
                    span.name,
                    kv.key
                );
            }
            let operation = text(&span.attributes, "gen_ai.operation.name").unwrap();
            match operation {
                "invoke_agent" => {
                    has_all(span, &["gen_ai.agent.name", "gen_ai.conversation.id"]);
                    assert_eq!(text(&span.attributes, "gen_ai.conversation.id"), Some(run.run_id.as_str()));
                }
                "chat" => {
                    has_all(span, &["gen_ai.request.model", "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"]);
                }
                "execute_tool" => {
                    has_all(span, &["gen_ai.tool.name", "gen_ai.tool.call.id", "gen_ai.tool.call.arguments"]);
                }
                other => panic!("unexpected operation {other}"),
            }
            assert!(span.name.starts_with(operation), "{}", span.name);
        }
    }

    for run in of(Convention::OpenInference) {
        for span in run_spans(run) {
            match text(&span.attributes, "openinference.span.kind").unwrap() {
                "AGENT" => assert_eq!(text(&span.attributes, "session.id"), Some(run.run_id.as_str())),
                "LLM" => {
                    has_all(span, &["llm.model_name", "llm.token_count.prompt", "llm.token_count.completion"]);
                }
                "TOOL" => {
                    has_all(span, &["tool.name", "input.value"]);
                }
                other => panic!("unexpected span kind {other}"),
            }
        }
    }
}

#[test]
fn the_failure_modes_all_occur() {
    let runs = runs(RUNS);
    let article: Vec<&SynthRun> = runs.iter().filter(|r| r.expected.convention == Convention::Article).collect();

    let mut reasons: HashMap<&str, usize> = HashMap::new();
    for run in &article {
        *reasons.entry(run.expected.terminal_reason.as_str()).or_default() += 1;
    }
    for reason in ["completed", "step_limit", "budget", "error", "escalated"] {
        assert!(reasons.get(reason).copied().unwrap_or(0) > 0, "no {reason} run: {reasons:?}");
    }
    assert!(reasons["completed"] * 2 > article.len(), "completed should dominate: {reasons:?}");

    assert!(runs.iter().any(|r| r.expected.duplicate_side_effects > 0));
    assert!(runs.iter().any(|r| r.expected.deduped_calls > 0));
    assert!(runs.iter().any(|r| r.expected.completed_without_read));

    let retried: Vec<&&SynthRun> = article.iter().filter(|r| r.traces.len() == 2).collect();
    assert!(!retried.is_empty());
    for run in &retried {
        let (first, second) = (root(&run.traces[0]), root(&run.traces[1]));
        assert_eq!(text(&first.attributes, "run.id"), text(&second.attributes, "run.id"));
        assert_eq!(text(&second.attributes, "run.trigger"), Some("retry"));
        assert!(is_error(first));
    }
    // Duplicates come from the orchestrator replay or a repeated irreversible call.
    assert!(retried.iter().any(|r| r.expected.duplicate_side_effects > 0));

    let tool_spans: Vec<&Span> = article.iter().flat_map(|r| run_spans(r)).filter(|s| is_tool(s)).collect();
    for attempt in [2, 3] {
        assert!(tool_spans.iter().any(|s| int(&s.attributes, "tool.attempt") == Some(attempt)));
    }
    for outcome in ["ok", "error", "deduped", "denied", "timeout"] {
        assert!(tool_spans.iter().any(|s| text(&s.attributes, "tool.outcome") == Some(outcome)), "no {outcome}");
    }
    for side_effect in ["none", "read", "write", "irreversible"] {
        assert!(tool_spans.iter().any(|s| text(&s.attributes, "tool.side_effect") == Some(side_effect)));
    }
    let timeouts: Vec<&&Span> =
        tool_spans.iter().filter(|s| text(&s.attributes, "tool.outcome") == Some("timeout")).collect();
    assert!(!timeouts.is_empty());
    for span in timeouts {
        assert!(is_error(span));
        assert_eq!(span.status.as_ref().unwrap().message, "Timed out while waiting for response...10.0 seconds");
        assert!(int(&span.attributes, "tool.latency_ms").unwrap() >= 10_000);
    }

    let roots: Vec<&Span> = runs.iter().flat_map(|r| r.traces.iter().map(root)).collect();
    assert!(roots.iter().any(|r| text(&r.attributes, "escalation.reason").is_some()));
    assert!(roots.iter().any(|r| r.events.iter().any(|e| e.name == "escalation")));
    assert!(roots.iter().any(|r| is_error(r) && !r.status.as_ref().unwrap().message.is_empty()));

    // Tool spans hang off their step in some runs and off the root in others.
    let under_step = |run: &SynthRun| {
        let steps: HashSet<&[u8]> = run_spans(run).filter(|s| is_step(s)).map(|s| s.span_id.as_slice()).collect();
        run_spans(run).filter(|s| is_tool(s)).any(|s| steps.contains(s.parent_span_id.as_slice()))
    };
    assert!(article.iter().any(|r| under_step(r)));
    assert!(article.iter().any(|r| !under_step(r) && r.expected.tool_calls > 0));
}

#[test]
fn step_limit_runs_stop_exactly_at_the_limit() {
    let opts = SynthOptions { max_steps: 5, ..Default::default() };
    let runs = runs_with(opts, RUNS);
    let limited: Vec<&SynthRun> = runs.iter().filter(|r| r.expected.terminal_reason == "step_limit").collect();
    assert!(!limited.is_empty());
    for run in limited {
        let last = run.traces.last().unwrap();
        assert_eq!(spans(last).filter(|s| is_step(s)).count(), 5);
    }
    for run in &runs {
        for trace in &run.traces {
            assert!(spans(trace).filter(|s| is_step(s)).count() <= 5);
        }
    }
}

#[test]
fn retries_and_duplicates_keep_their_keys_and_ids_straight() {
    for run in runs(RUNS).iter().filter(|r| r.expected.convention == Convention::Article) {
        let tools: Vec<&Span> = run_spans(run).filter(|s| is_tool(s)).collect();
        let mut by_key: HashMap<&str, Vec<&Span>> = HashMap::new();
        for span in &tools {
            let arguments = text(&span.attributes, "gen_ai.tool.call.arguments").unwrap();
            let parsed: serde_json::Value = serde_json::from_str(arguments).unwrap();
            assert!(parsed.is_object(), "{arguments}");
            let key = text(&span.attributes, "tool.idempotency_key").unwrap();
            assert_eq!(key.len(), 64);
            assert!(key.chars().all(|c| c.is_ascii_hexdigit()));
            by_key.entry(key).or_default().push(span);
        }
        for spans in by_key.values() {
            // One key is one call: same tool, same arguments.
            let first = spans[0];
            for span in spans {
                for k in ["tool.name", "gen_ai.tool.call.arguments"] {
                    assert_eq!(text(&span.attributes, k), text(&first.attributes, k));
                }
            }
            // Each extra success created something new; a dedupe points at the original.
            let created: Vec<&str> = spans
                .iter()
                .filter(|s| text(&s.attributes, "tool.outcome") == Some("ok"))
                .filter_map(|s| text(&s.attributes, "tool.external_id"))
                .collect();
            let distinct: HashSet<&&str> = created.iter().collect();
            assert_eq!(distinct.len(), created.len());
            for span in spans.iter().filter(|s| text(&s.attributes, "tool.outcome") == Some("deduped")) {
                if let Some(id) = text(&span.attributes, "tool.external_id") {
                    assert_eq!(Some(&id), created.first());
                }
            }
        }
    }
}

#[test]
fn bodies_are_recorded_only_when_asked() {
    let result_keys = ["gen_ai.tool.call.result", "output.value"];
    let has_results = |runs: &[SynthRun]| {
        runs.iter().flat_map(run_spans).any(|s| s.attributes.iter().any(|kv| result_keys.contains(&kv.key.as_str())))
    };
    assert!(has_results(&runs(100)));
    let without = runs_with(SynthOptions { bodies: false, ..Default::default() }, 100);
    assert!(!has_results(&without));
}

fn span_keys(requests: &[ExportTraceServiceRequest]) -> Vec<(Vec<u8>, Vec<u8>)> {
    requests
        .iter()
        .flat_map(|r| &r.resource_spans)
        .flat_map(|rs| rs.scope_spans.iter().flat_map(|s| &s.spans))
        .map(|s| (s.trace_id.clone(), s.span_id.clone()))
        .collect()
}

fn request_sizes(requests: &[ExportTraceServiceRequest]) -> Vec<usize> {
    requests
        .iter()
        .map(|r| r.resource_spans.iter().flat_map(|rs| &rs.scope_spans).map(|s| s.spans.len()).sum())
        .collect()
}

#[test]
fn batching_keeps_every_span_exactly_once_in_order() {
    let runs = runs(200);
    let all: Vec<(Vec<u8>, Vec<u8>)> =
        runs.iter().flat_map(run_spans).map(|s| (s.trace_id.clone(), s.span_id.clone())).collect();
    let service_of: HashMap<&[u8], &str> = runs
        .iter()
        .flat_map(|r| &r.traces)
        .map(|t| {
            let service = text(&t.resource.as_ref().unwrap().attributes, "service.name").unwrap();
            (root(t).trace_id.as_slice(), service)
        })
        .collect();
    for max in [0, 1, 7, 100, 100_000] {
        let requests = requests_for(&runs, max);
        assert_eq!(span_keys(&requests), all, "max {max}");
        let sizes = request_sizes(&requests);
        assert!(sizes.iter().all(|&n| n >= 1 && n <= max.max(1)));
        // Every request but the last is full.
        assert!(sizes[..sizes.len() - 1].iter().all(|&n| n == max.max(1)));
        for rs in requests.iter().flat_map(|r| &r.resource_spans) {
            let service = text(&rs.resource.as_ref().unwrap().attributes, "service.name").unwrap();
            for span in rs.scope_spans.iter().flat_map(|s| &s.spans) {
                assert_eq!(service_of[span.trace_id.as_slice()], service);
            }
        }
    }
}

#[test]
fn shuffled_batches_put_children_first_and_roots_last() {
    let runs = runs(200);
    let requests = requests_for_shuffled(&runs, 33, 9);
    let order = span_keys(&requests);
    let mut sorted_order = order.clone();
    sorted_order.sort();
    let mut all: Vec<(Vec<u8>, Vec<u8>)> =
        runs.iter().flat_map(run_spans).map(|s| (s.trace_id.clone(), s.span_id.clone())).collect();
    assert_ne!(order, all, "the order should change");
    all.sort();
    assert_eq!(sorted_order, all, "every span exactly once");
    assert!(request_sizes(&requests).iter().all(|&n| n <= 33));

    let position: HashMap<&[u8], usize> = order.iter().enumerate().map(|(i, (_, s))| (s.as_slice(), i)).collect();
    for run in &runs {
        let last_non_root =
            run_spans(run).filter(|s| !s.parent_span_id.is_empty()).map(|s| position[s.span_id.as_slice()]).max();
        for span in run_spans(run) {
            if span.parent_span_id.is_empty() {
                assert!(last_non_root.is_none_or(|last| position[span.span_id.as_slice()] > last));
            } else {
                assert!(position[span.span_id.as_slice()] < position[span.parent_span_id.as_slice()]);
            }
        }
    }
    assert_eq!(requests, requests_for_shuffled(&runs, 33, 9), "the seed fixes the shuffle");
}

#[test]
fn requests_round_trip_through_otlp_json_and_protobuf() {
    for request in requests_for(&runs(50), 64) {
        let json = serde_json::to_string(&request).unwrap();
        let back: ExportTraceServiceRequest = serde_json::from_str(&json).unwrap();
        assert_eq!(back, request);
        // OTLP JSON spells ids in hex and 64-bit integers as strings.
        let first = &request.resource_spans[0].scope_spans[0].spans[0];
        assert!(json.contains(&format!("\"traceId\":\"{}\"", hex::encode(&first.trace_id))));
        assert!(json.contains(&format!("\"startTimeUnixNano\":\"{}\"", first.start_time_unix_nano)));

        let decoded = ExportTraceServiceRequest::decode(request.encode_to_vec().as_slice()).unwrap();
        assert_eq!(decoded, request);
    }
}
