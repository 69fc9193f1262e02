//! Writes a planned run down as OTLP spans, one `ResourceSpans` per trace, in the run's
//! attribute convention.
//!
//! Ids, times, parentage, status and events are the same in every convention and are
//! built here; each convention module ([`article`], [`genai`], [`openinference`]) only
//! supplies span names, kinds and attributes through [`Vocabulary`].

mod article;
mod genai;
mod openinference;

use opentelemetry_proto::tonic::common::v1::{InstrumentationScope, KeyValue};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::span::{Event, SpanKind};
use opentelemetry_proto::tonic::trace::v1::status::StatusCode;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span, Status};

use super::attr;
use super::catalog;
use super::plan::{Outcome, RunPlan, StepPlan, ToolExec, TracePlan};
use super::Convention;

/// A span's convention-specific part.
struct Named {
    name: String,
    kind: SpanKind,
    attributes: Vec<KeyValue>,
}

/// How one convention spells the three kinds of span.
trait Vocabulary {
    /// Instrumentation scope name and version, as the emitting library would set them.
    fn scope(&self) -> (&'static str, &'static str);
    fn root(&self, run: &RunPlan, trace: &TracePlan) -> Named;
    fn step(&self, run: &RunPlan, step: &StepPlan) -> Named;
    /// `result` is the recorded tool result, present only when bodies are on.
    fn tool(&self, run: &RunPlan, step: &StepPlan, exec: &ToolExec, result: Option<String>) -> Named;
}

fn vocabulary(convention: Convention) -> &'static dyn Vocabulary {
    match convention {
        Convention::Article => &article::Article,
        Convention::GenAi => &genai::GenAi,
        Convention::OpenInference => &openinference::OpenInference,
    }
}

pub(crate) fn emit(run: &RunPlan, bodies: bool) -> Vec<ResourceSpans> {
    let vocabulary = vocabulary(run.convention);
    let (scope_name, scope_version) = vocabulary.scope();
    run.traces
        .iter()
        .map(|trace| ResourceSpans {
            resource: Some(resource(&run.agent)),
            scope_spans: vec![ScopeSpans {
                scope: Some(InstrumentationScope {
                    name: scope_name.to_string(),
                    version: scope_version.to_string(),
                    ..Default::default()
                }),
                spans: spans(run, trace, vocabulary, bodies),
                schema_url: String::new(),
            }],
            schema_url: String::new(),
        })
        .collect()
}

fn resource(agent: &str) -> Resource {
    Resource {
        attributes: vec![
            attr::string("service.name", agent),
            attr::string("service.version", "2.3.1"),
            attr::string("deployment.environment.name", "production"),
            attr::string("telemetry.sdk.name", "opentelemetry"),
            attr::string("telemetry.sdk.language", "python"),
            attr::string("telemetry.sdk.version", "1.38.0"),
        ],
        ..Default::default()
    }
}

/// The trace's spans, parents before children and in start order, the way a reader
/// would list them; `requests_for_shuffled` exists for the other orders.
fn spans(run: &RunPlan, trace: &TracePlan, vocabulary: &dyn Vocabulary, bodies: bool) -> Vec<Span> {
    let mut spans = Vec::new();
    let mut root =
        span(trace, trace.span_id, None, vocabulary.root(run, trace), (trace.start, trace.end), trace.error.as_deref());
    if let Some(escalation) = trace.escalation.as_ref().filter(|e| e.as_event) {
        root.events.push(event(
            "escalation",
            escalation.at,
            vec![attr::string("escalation.reason", escalation.reason)],
        ));
    }
    spans.push(root);

    for step in &trace.steps {
        spans.push(span(
            trace,
            step.span_id,
            Some(trace.span_id),
            vocabulary.step(run, step),
            (step.start, step.end),
            step.error.as_deref(),
        ));
        let parent = if trace.tools_under_steps { step.span_id } else { trace.span_id };
        for exec in &step.tools {
            let tool = run.calls[exec.call].tool;
            let result = bodies.then(|| catalog::result_body(tool, exec.external_id.as_deref(), exec.error.as_deref()));
            let mut tool_span = span(
                trace,
                exec.span_id,
                Some(parent),
                vocabulary.tool(run, step, exec, result),
                (exec.start, exec.end),
                exec.error.as_deref(),
            );
            // What OpenTelemetry SDKs record when the tool function raised.
            let exception_type = match exec.outcome {
                Outcome::Timeout => Some("TimeoutError"),
                Outcome::Error => Some("ToolError"),
                Outcome::Ok | Outcome::Deduped | Outcome::Denied => None,
            };
            if let (Some(exception_type), Some(message)) = (exception_type, &exec.error) {
                tool_span.events.push(event(
                    "exception",
                    exec.end,
                    vec![
                        attr::string("exception.type", exception_type),
                        attr::string("exception.message", message.as_str()),
                    ],
                ));
            }
            spans.push(tool_span);
        }
    }
    spans
}

/// A span with status ERROR and `error` as its message when `error` is given, unset
/// status otherwise (what SDKs do for spans that simply ended).
fn span(
    trace: &TracePlan,
    span_id: [u8; 8],
    parent: Option<[u8; 8]>,
    named: Named,
    (start, end): (u64, u64),
    error: Option<&str>,
) -> Span {
    Span {
        trace_id: trace.trace_id.to_vec(),
        span_id: span_id.to_vec(),
        parent_span_id: parent.map(|p| p.to_vec()).unwrap_or_default(),
        name: named.name,
        kind: named.kind as i32,
        start_time_unix_nano: start,
        end_time_unix_nano: end,
        attributes: named.attributes,
        status: error.map(|message| Status { message: message.to_string(), code: StatusCode::Error as i32 }),
        ..Default::default()
    }
}

fn event(name: &str, time_unix_nano: u64, attributes: Vec<KeyValue>) -> Event {
    Event { time_unix_nano, name: name.to_string(), attributes, ..Default::default() }
}
