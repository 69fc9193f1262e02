//! The canonical span: what normalization makes of one OTLP span and storage keeps,
//! with its stored record and the facts derivation reads. Pure types and their encoding;
//! reading OTLP into it is `ingest::normalize`.

use crate::canonical::{Outcome, SideEffect, TerminalReason, Trigger};
use crate::derive::SpanFacts;
use crate::record;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// What a span is in the agent loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpanRole {
    Step,
    Tool,
}

impl SpanRole {
    pub fn as_str(self) -> &'static str {
        match self {
            SpanRole::Step => "step",
            SpanRole::Tool => "tool",
        }
    }
}

/// A span in canonical terms, ready to store.
#[derive(Debug, Clone, PartialEq)]
pub struct NormalizedSpan {
    pub trace_id: String,
    pub span_id: String,
    pub parent_span_id: Option<String>,
    pub name: String,
    pub kind: i32,
    pub start_ns: i64,
    /// 0 when the span has not ended.
    pub end_ns: i64,
    pub status_code: i32,
    pub status_message: Option<String>,
    /// The run id the span names itself, if any; otherwise the trace decides.
    pub explicit_run_id: Option<String>,
    pub agent: Option<String>,
    pub trigger: Option<Trigger>,
    pub terminal_reason: Option<TerminalReason>,
    pub escalation_reason: Option<String>,
    /// An escalation's details sent as attributes: blocking fact, what was done and
    /// what remains (JSON arrays, as the API takes them).
    pub escalation_details: Option<EscalationDetails>,
    pub cost: Option<f64>,
    pub step_limit: Option<i64>,
    pub cost_limit: Option<f64>,
    pub wall_clock_ms: Option<i64>,
    pub role: Option<SpanRole>,
    pub step_index: Option<i64>,
    pub stop_reason: Option<String>,
    pub model_id: Option<String>,
    pub input_tokens: Option<i64>,
    pub output_tokens: Option<i64>,
    pub cache_tokens: Option<i64>,
    pub cache_write_tokens: Option<i64>,
    pub reasoning_tokens: Option<i64>,
    pub tool_name: Option<String>,
    pub side_effect: Option<SideEffect>,
    /// The span declared its class itself (a policy did not).
    pub side_effect_declared: bool,
    /// MCP annotations of the tool, when sent: (read-only, destructive).
    pub tool_hints: (Option<bool>, Option<bool>),
    pub idempotency_key: Option<String>,
    pub attempt: Option<i64>,
    pub outcome: Option<Outcome>,
    pub latency_ms: Option<i64>,
    pub external_id: Option<String>,
    pub args_sha256: Option<String>,
    pub approval_id: Option<String>,
    /// The tool's policy demands an approved request for every execution.
    pub requires_approval: bool,
    /// The tool's policy allows at most this many successful executions per run.
    pub run_limit: Option<i64>,
    /// The tool call's arguments carried a credential (redacted before storage): a
    /// credential reached the model's context, which the run page flags.
    pub credential_in_arguments: bool,
    /// The API token the span arrived with, set by the receiver after normalization (not
    /// stored with the span): the approval check compares it with the requester's.
    pub sent_by_token: Option<i64>,
    /// Span events, redacted, bodies moved out; kept as values too because filing an
    /// escalation reads them.
    pub events: Vec<Value>,
    /// The span as stored and its bodies, as JSON text, serialized here because
    /// normalization runs on many threads while the writer that stores them is one.
    pub json: StoredJson,
}

/// An escalation's details read from span attributes, redacted.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EscalationDetails {
    pub blocking_fact: Option<String>,
    pub what_was_done: Option<Value>,
    pub what_remains: Option<Value>,
}

/// A span as stored (JSON text).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StoredJson {
    /// The span's stored record: canonical fields and its attributes (redacted, without
    /// bodies), events and resource (see `ingest::record`).
    pub record: String,
    /// Body attributes (prompts, arguments, results), redacted, stored apart; empty
    /// when the span has none.
    pub bodies: String,
}

/// A value as the JSON text a record holds.
pub fn json_text<T: serde::Serialize + ?Sized>(value: &T) -> String {
    serde_json::to_string(value).expect("JSON values always serialize")
}

impl NormalizedSpan {
    /// Re-encodes the stored record from the current fields, keeping its attributes,
    /// events and resource. The record is made once, at normalization; code that changes
    /// a normalized span afterwards (tests building variants of one) calls this, or the
    /// writer would store the span as it was.
    pub fn refresh_record(&mut self) {
        let old: Value = serde_json::from_str(&self.json.record).unwrap_or_default();
        let map = |key: &str| old.get(key).and_then(Value::as_object).cloned().unwrap_or_default();
        let events = old.get("events").and_then(Value::as_array).cloned().unwrap_or_default();
        let resource = serde_json::value::to_raw_value(&map("resource")).expect("JSON values always serialize");
        self.json.record = encode_record(self, &map("attributes"), &events, &resource);
    }

    /// The canonical facts derivation reads, exactly as the writer stores them: a run
    /// whose spans all arrive in one write is derived from these without reading back.
    pub fn facts(&self) -> SpanFacts {
        SpanFacts {
            trace_id: self.trace_id.clone(),
            span_id: self.span_id.clone(),
            parent_span_id: self.parent_span_id.clone(),
            start_ns: self.start_ns,
            end_ns: self.end_ns,
            status_code: self.status_code,
            agent: self.agent.clone(),
            trigger: self.trigger.map(|t| t.as_str().to_string()),
            terminal_reason: self.terminal_reason.map(|t| t.as_str().to_string()),
            escalation_reason: self.escalation_reason.clone(),
            cost: self.cost,
            step_limit: self.step_limit,
            cost_limit: self.cost_limit,
            role: self.role.map(|r| r.as_str().to_string()),
            step_index: self.step_index,
            stop_reason: self.stop_reason.clone(),
            model_id: self.model_id.clone(),
            input_tokens: self.input_tokens,
            output_tokens: self.output_tokens,
            cache_tokens: self.cache_tokens,
            cache_write_tokens: self.cache_write_tokens,
            reasoning_tokens: self.reasoning_tokens,
            tool_name: self.tool_name.clone(),
            side_effect: self.side_effect.map(|v| v.as_str().to_string()),
            side_effect_declared: Some(self.side_effect_declared),
            idempotency_key: self.idempotency_key.clone(),
            attempt: self.attempt,
            outcome: self.outcome.map(|v| v.as_str().to_string()),
            latency_ms: self.latency_ms,
            external_id: self.external_id.clone(),
            args_sha256: self.args_sha256.clone(),
            approval_id: self.approval_id.clone(),
            credential_in_arguments: self.credential_in_arguments,
        }
    }
}

/// SHA-256 of the arguments in a canonical form: JSON is re-serialized with sorted keys
/// and no whitespace, so the same arguments hash the same however they were formatted.
pub fn args_sha256(text: &str) -> String {
    let canonical = match serde_json::from_str::<Value>(text) {
        Ok(value) => crate::approvals::payload::canonical_json(&value),
        Err(_) => text.to_string(),
    };
    hex::encode(Sha256::digest(canonical.as_bytes()))
}

impl NormalizedSpan {
    /// What the run search finds this span by (see [`record::terms_of`]).
    pub fn search_terms(&self) -> impl Iterator<Item = &str> {
        record::terms_of(self.idempotency_key.as_deref(), self.external_id.as_deref())
    }
}

/// The stored object of `span` with its (redacted, body-free) attributes, events and
/// resource: what `NormalizedSpan::json.record` holds.
pub fn encode_record(
    span: &NormalizedSpan,
    attributes: &Map<String, Value>,
    events: &[Value],
    resource: &RawValue,
) -> String {
    record::encode(&record::Record {
        trace_id: &span.trace_id,
        span_id: &span.span_id,
        parent_span_id: span.parent_span_id.as_deref(),
        name: &span.name,
        kind: span.kind,
        start_ns: span.start_ns,
        end_ns: span.end_ns,
        status_code: span.status_code,
        status_message: span.status_message.as_deref(),
        agent: span.agent.as_deref(),
        trigger: span.trigger.map(|t| t.as_str()),
        terminal_reason: span.terminal_reason.map(|t| t.as_str()),
        escalation_reason: span.escalation_reason.as_deref(),
        cost: span.cost,
        step_limit: span.step_limit,
        cost_limit: span.cost_limit,
        wall_clock_ms: span.wall_clock_ms,
        role: span.role.map(|r| r.as_str()),
        step_index: span.step_index,
        stop_reason: span.stop_reason.as_deref(),
        model_id: span.model_id.as_deref(),
        input_tokens: span.input_tokens,
        output_tokens: span.output_tokens,
        cache_tokens: span.cache_tokens,
        cache_write_tokens: span.cache_write_tokens,
        reasoning_tokens: span.reasoning_tokens,
        tool_name: span.tool_name.as_deref(),
        side_effect: span.side_effect.map(|v| v.as_str()),
        side_effect_declared: span.side_effect_declared,
        idempotency_key: span.idempotency_key.as_deref(),
        attempt: span.attempt,
        outcome: span.outcome.map(|v| v.as_str()),
        latency_ms: span.latency_ms,
        external_id: span.external_id.as_deref(),
        args_sha256: span.args_sha256.as_deref(),
        approval_id: span.approval_id.as_deref(),
        credential_in_arguments: span.credential_in_arguments,
        attributes,
        events,
        resource,
    })
}

/// Which bodies (prompts, tool arguments and results) are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BodyPolicy {
    /// Never store bodies; argument hashes are still kept.
    None,
    /// Keep bodies while a run is open, and afterwards only if it did not complete.
    #[default]
    FailedRuns,
    /// Keep every body (until the retention job removes it).
    All,
}

impl BodyPolicy {
    /// The name used by the flag and the config file.
    pub fn as_str(self) -> &'static str {
        match self {
            BodyPolicy::None => "none",
            BodyPolicy::FailedRuns => "failed_runs",
            BodyPolicy::All => "all",
        }
    }
}

impl std::str::FromStr for BodyPolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "none" => Ok(BodyPolicy::None),
            "failed_runs" => Ok(BodyPolicy::FailedRuns),
            "all" => Ok(BodyPolicy::All),
            other => Err(format!("unknown body policy `{other}` (expected none, failed_runs or all)")),
        }
    }
}
