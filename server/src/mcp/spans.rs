//! A gateway session as OTLP spans, so that it shows in the console as a run with no
//! instrumentation in the agent: one `execute_tool {tool}` span per call (GenAI names)
//! and, when the session ends, the root `invoke_agent` span of each run it touched. They
//! go through the normal ingest path (redaction, normalization, the writer). Pure.

use domain::approvals::payload::sha256_hex;
use domain::canonical::{Outcome, SideEffect, TerminalReason};
use domain::mcp::{ToolHints, META_RUN_ID};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as V;
use opentelemetry_proto::tonic::common::v1::{AnyValue, InstrumentationScope, KeyValue};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use opentelemetry_proto::tonic::trace::v1::status::StatusCode;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span, Status};

/// One call through the gateway, as recorded.
#[derive(Debug, Clone, PartialEq)]
pub struct CallRecord {
    pub run_id: String,
    pub server: String,
    /// `{server}/{tool}`.
    pub tool: String,
    pub session_id: String,
    /// The JSON-RPC id of the client's request, as text.
    pub request_id: String,
    /// The arguments as forwarded (or as asked, when nothing was forwarded).
    pub arguments: serde_json::Value,
    pub class: SideEffect,
    pub hints: ToolHints,
    pub outcome: Outcome,
    pub step: Option<i64>,
    pub idempotency_key: Option<String>,
    pub call_id: Option<String>,
    pub approval_id: Option<String>,
    pub started_ns: u64,
    pub ended_ns: u64,
    /// From forwarding to the upstream's answer.
    pub upstream_ms: Option<f64>,
    /// Waiting for the ledger (a person's approval, another attempt).
    pub held_ms: f64,
    pub result_bytes: Option<usize>,
    /// Why it failed or was refused.
    pub error: Option<String>,
}

/// A session's run, ended.
#[derive(Debug, Clone, PartialEq)]
pub struct RunRecord {
    pub run_id: String,
    pub server: String,
    pub session_id: String,
    pub client_name: Option<String>,
    pub protocol_version: Option<String>,
    pub started_ns: u64,
    pub ended_ns: u64,
    pub terminal: TerminalReason,
    /// Why it ended, when not plainly (the upstream died, a call's outcome is unknown).
    pub reason: Option<String>,
}

/// The trace of a run: derived from its id, so every session and process that works on
/// the run (a retry, a second agent) adds to one trace.
pub fn trace_id(run_id: &str) -> Vec<u8> {
    hex::decode(&sha256_hex(&format!("flightdeck.mcp.trace/{run_id}"))[..32]).expect("hex")
}

/// The id of a run's root span (derived like the trace's).
pub fn root_span_id(run_id: &str) -> Vec<u8> {
    hex::decode(&sha256_hex(&format!("flightdeck.mcp.root/{run_id}"))[..16]).expect("hex")
}

fn kv(key: &str, value: V) -> KeyValue {
    KeyValue { key: key.into(), value: Some(AnyValue { value: Some(value) }), ..Default::default() }
}

fn text(key: &str, value: &str) -> KeyValue {
    kv(key, V::StringValue(value.to_string()))
}

/// The resource every span of a session carries: the MCP client's name from
/// `initialize`, else `mcp:{server}`.
pub fn service_name(client_name: Option<&str>, server: &str) -> String {
    client_name.map(str::to_string).unwrap_or_else(|| format!("mcp:{server}"))
}

fn export(service: &str, span: Span) -> ExportTraceServiceRequest {
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource { attributes: vec![text("service.name", service)], ..Default::default() }),
            scope_spans: vec![ScopeSpans {
                scope: Some(InstrumentationScope {
                    name: "flightdeck.mcp_gateway".into(),
                    version: env!("CARGO_PKG_VERSION").into(),
                    ..Default::default()
                }),
                spans: vec![span],
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

/// The `execute_tool` span of one call, a child of its run's root.
pub fn call_span(call: &CallRecord, service: &str) -> ExportTraceServiceRequest {
    let mut attributes = vec![
        text("gen_ai.operation.name", "execute_tool"),
        text("gen_ai.tool.name", &call.tool),
        text("gen_ai.tool.call.id", &call.request_id),
        text("gen_ai.tool.call.arguments", &call.arguments.to_string()),
        text("tool.outcome", call.outcome.as_str()),
        text("run.id", &call.run_id),
        text("mcp.server", &call.server),
        text("mcp.session.id", &call.session_id),
        text("mcp.method.name", "tools/call"),
        kv("tool.held_ms", V::DoubleValue(call.held_ms)),
        kv("tool.latency_ms", V::DoubleValue((call.ended_ns.saturating_sub(call.started_ns)) as f64 / 1e6)),
    ];
    // An unclassified tool stays unclassified: ingest shows it so, never as harmless.
    if call.class != SideEffect::Unknown {
        attributes.push(text("tool.side_effect", call.class.as_str()));
    }
    let hints = [
        ("mcp.tool.annotations.readOnlyHint", call.hints.read_only),
        ("mcp.tool.annotations.destructiveHint", call.hints.destructive),
        ("mcp.tool.annotations.idempotentHint", call.hints.idempotent),
    ];
    attributes.extend(hints.into_iter().filter_map(|(k, v)| v.map(|v| kv(k, V::BoolValue(v)))));
    let optional = [
        ("tool.idempotency_key", &call.idempotency_key),
        ("tool.call_id", &call.call_id),
        ("approval.id", &call.approval_id),
    ];
    attributes.extend(optional.into_iter().filter_map(|(k, v)| v.as_deref().map(|v| text(k, v))));
    if let Some(step) = call.step {
        attributes.push(kv("step.index", V::IntValue(step)));
    }
    if let Some(ms) = call.upstream_ms {
        attributes.push(kv("tool.upstream_ms", V::DoubleValue(ms)));
    }
    if let Some(bytes) = call.result_bytes {
        attributes.push(kv("tool.result_bytes", V::IntValue(bytes as i64)));
    }
    let failed = matches!(call.outcome, Outcome::Error | Outcome::Timeout | Outcome::Unknown);
    let status = Status {
        code: if failed { StatusCode::Error } else { StatusCode::Unset } as i32,
        message: call.error.clone().filter(|_| failed).unwrap_or_default(),
    };
    if let Some(error) = &call.error {
        attributes.push(text("tool.error", error));
    }
    let span = Span {
        trace_id: trace_id(&call.run_id),
        span_id: rand::random::<[u8; 8]>().to_vec(),
        parent_span_id: root_span_id(&call.run_id),
        name: format!("execute_tool {}", call.tool),
        kind: SpanKind::Client as i32,
        start_time_unix_nano: call.started_ns,
        end_time_unix_nano: call.ended_ns.max(call.started_ns),
        attributes,
        status: Some(status),
        ..Default::default()
    };
    export(service, span)
}

/// The root span of a run the session worked on, sent when the session ends.
pub fn run_span(run: &RunRecord, service: &str) -> ExportTraceServiceRequest {
    let mut attributes = vec![
        text("gen_ai.operation.name", "invoke_agent"),
        text("gen_ai.agent.name", service),
        text("run.id", &run.run_id),
        text("run.terminal_reason", run.terminal.as_str()),
        text("mcp.server", &run.server),
        text("mcp.session.id", &run.session_id),
    ];
    if let Some(v) = &run.protocol_version {
        attributes.push(text("mcp.protocol.version", v));
    }
    if let Some(reason) = &run.reason {
        attributes.push(text("run.terminal_detail", reason));
        if run.terminal == TerminalReason::Escalated {
            attributes.push(text("escalation.reason", reason));
        }
    }
    let failed = run.terminal == TerminalReason::Error;
    let span = Span {
        trace_id: trace_id(&run.run_id),
        span_id: root_span_id(&run.run_id),
        name: format!("invoke_agent {service}"),
        kind: SpanKind::Internal as i32,
        start_time_unix_nano: run.started_ns,
        end_time_unix_nano: run.ended_ns.max(run.started_ns),
        attributes,
        status: Some(Status {
            code: if failed { StatusCode::Error } else { StatusCode::Ok } as i32,
            message: run.reason.clone().filter(|_| failed).unwrap_or_default(),
        }),
        ..Default::default()
    };
    export(service, span)
}

/// The `_meta` key naming the run, for the docs and error messages.
pub const RUN_META_KEY: &str = META_RUN_ID;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn attr<'a>(span: &'a Span, key: &str) -> Option<&'a V> {
        span.attributes.iter().find(|a| a.key == key).and_then(|a| a.value.as_ref()?.value.as_ref())
    }

    #[test]
    fn a_call_is_an_execute_tool_span_under_its_runs_root() {
        let call = CallRecord {
            run_id: "run-1".into(),
            server: "files".into(),
            tool: "files/append".into(),
            session_id: "s1".into(),
            request_id: "7".into(),
            arguments: json!({"text": "a"}),
            class: SideEffect::Unknown,
            hints: ToolHints { destructive: Some(true), ..Default::default() },
            outcome: Outcome::Ok,
            step: None,
            idempotency_key: Some("k".into()),
            call_id: Some("call_1".into()),
            approval_id: Some("apr_1".into()),
            started_ns: 1_000,
            ended_ns: 2_000_000,
            upstream_ms: Some(1.5),
            held_ms: 0.0,
            result_bytes: Some(42),
            error: None,
        };
        let export = call_span(&call, "claude-desktop");
        let span = &export.resource_spans[0].scope_spans[0].spans[0];
        assert_eq!(span.name, "execute_tool files/append");
        assert_eq!(span.trace_id, trace_id("run-1"));
        assert_eq!(span.parent_span_id, root_span_id("run-1"));
        assert_eq!(attr(span, "gen_ai.operation.name"), Some(&V::StringValue("execute_tool".into())));
        assert_eq!(attr(span, "approval.id"), Some(&V::StringValue("apr_1".into())));
        assert_eq!(attr(span, "tool.side_effect"), None, "unclassified stays unclassified");
        assert_eq!(attr(span, "mcp.tool.annotations.destructiveHint"), Some(&V::BoolValue(true)));
        assert_eq!(attr(span, "tool.result_bytes"), Some(&V::IntValue(42)));
        assert_eq!(trace_id("run-1").len(), 16);
        assert_ne!(trace_id("run-1"), trace_id("run-2"));
        assert_eq!(root_span_id("run-1").len(), 8);
    }

    #[test]
    fn the_client_names_the_service() {
        assert_eq!(service_name(Some("cursor"), "files"), "cursor");
        assert_eq!(service_name(None, "files"), "mcp:files");
    }
}
