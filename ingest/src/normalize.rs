//! One OTLP span in, one [`NormalizedSpan`] out: ids checked, attributes read through the
//! mapping table, secrets redacted, bodies split off. Pure: no I/O, no clock.

use super::attributes::{as_bool, as_f64, as_i64, as_text, to_map};
use super::mapping::{marker_matches, MappingTable};
use domain::canonical::{Outcome, SideEffect, TerminalReason, Trigger};
use domain::policy::{policy_for, ToolPolicy};
use domain::redact::Redactor;
use domain::span::{args_sha256, encode_record, json_text, EscalationDetails, NormalizedSpan, SpanRole, StoredJson};
use opentelemetry_proto::tonic::trace::v1::{status::StatusCode, Span};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// Limits a span must respect to be accepted.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// The largest attribute value (as JSON text) accepted, in bytes.
    pub max_attribute_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_attribute_bytes: 256 * 1024 }
    }
}

/// Everything normalization needs besides the span.
pub struct Context<'a> {
    pub mapping: &'a MappingTable,
    pub redactor: &'a Redactor,
    pub policies: &'a [ToolPolicy],
    pub limits: Limits,
}

fn lookup<'v>(keys: &[String], attrs: &'v Map<String, Value>, resource: &'v Map<String, Value>) -> Option<&'v Value> {
    keys.iter().find_map(|key| {
        let value = match key.strip_prefix("resource:") {
            Some(rkey) => resource.get(rkey),
            None => attrs.get(key.as_str()),
        };
        value.filter(|v| !v.is_null() && v.as_str() != Some(""))
    })
}

/// Lowercase hex, as ids are stored. `hex::encode` builds the string a character at a
/// time; this writes it in one go (three ids per span, so it showed in profiles).
fn hex_id(bytes: &[u8]) -> String {
    let mut text = vec![0; bytes.len() * 2];
    hex::encode_to_slice(bytes, &mut text).expect("the buffer is twice the input");
    String::from_utf8(text).expect("hex digits are ASCII")
}

/// Checks and normalizes one span; the error says why the span was rejected. Long because
/// it reads every canonical field through the mapping into one `NormalizedSpan` literal
/// (about fifty fields, each one line); the checks, escalation details and the split of
/// bodies from metadata are functions of their own.
pub fn normalize(span: &Span, res: &SpanResource, cx: &Context<'_>) -> Result<NormalizedSpan, String> {
    let resource = &res.attributes;
    let (start_ns, end_ns) = check_ids_and_times(span)?;

    let attrs = to_map(&span.attributes);
    check_attribute_sizes(&attrs, cx.limits.max_attribute_bytes)?;
    let m = cx.mapping;
    let text = |keys: &[String]| lookup(keys, &attrs, resource).and_then(as_text);
    let int = |keys: &[String]| lookup(keys, &attrs, resource).and_then(as_i64);

    // Escalation: an attribute, or a span event named `escalation`.
    let events: Vec<(String, Map<String, Value>, u64)> =
        span.events.iter().map(|e| (e.name.clone(), to_map(&e.attributes), e.time_unix_nano)).collect();
    let escalation_reason = text(&m.escalation_reason).or_else(|| {
        events.iter().find(|(name, _, _)| name == "escalation").map(|(_, ea, _)| {
            lookup(&m.escalation_reason, ea, resource).and_then(as_text).unwrap_or_else(|| "unspecified".into())
        })
    });

    let is_tool = m.tool_span.iter().any(|mk| marker_matches(mk, &attrs));
    let is_step = !is_tool && m.step_span.iter().any(|mk| marker_matches(mk, &attrs));
    let role = if is_tool {
        Some(SpanRole::Tool)
    } else if is_step {
        Some(SpanRole::Step)
    } else {
        None
    };

    let status_code = span.status.as_ref().map(|s| s.code).unwrap_or(0);
    let status_message = span.status.as_ref().map(|s| s.message.clone()).filter(|m| !m.is_empty());
    let raw_args = text(&m.tool_arguments);
    let mut policy = None;
    let mut side_effect_declared = false;
    let (tool_name, side_effect, outcome) = if is_tool {
        let name = text(&m.tool_name).unwrap_or_else(|| span.name.trim_start_matches("execute_tool ").to_string());
        policy = policy_for(&name, cx.policies);
        let declared =
            text(&m.tool_side_effect).and_then(|s| SideEffect::parse(&s)).filter(|s| *s != SideEffect::Unknown);
        side_effect_declared = declared.is_some();
        let side_effect = declared.or_else(|| policy.map(|p| p.side_effect)).unwrap_or(SideEffect::Unknown);
        let outcome = text(&m.tool_outcome).and_then(|s| Outcome::parse(&s)).unwrap_or_else(|| {
            let timed_out = status_message.as_deref().is_some_and(|msg| msg.to_ascii_lowercase().contains("timed out"));
            match (status_code == StatusCode::Error as i32, timed_out) {
                (true, true) => Outcome::Timeout,
                (true, false) => Outcome::Error,
                _ => Outcome::Ok,
            }
        });
        (Some(name), Some(side_effect), Some(outcome))
    } else {
        (None, None, None)
    };

    // Tokens: input means uncached input whatever the convention (see the mapping).
    let cache_read = if is_step { int(&m.cache_tokens) } else { None };
    let cache_write = if is_step { int(&m.cache_write_tokens) } else { None };
    let input_tokens = if is_step {
        m.input_tokens.iter().find(|k| lookup(std::slice::from_ref(*k), &attrs, resource).is_some()).and_then(|key| {
            let n = lookup(std::slice::from_ref(key), &attrs, resource).and_then(as_i64)?;
            Some(if m.input_tokens_include_cache.contains(key) {
                n.saturating_sub(cache_read.unwrap_or(0)).saturating_sub(cache_write.unwrap_or(0)).max(0)
            } else {
                n
            })
        })
    } else {
        None
    };
    let hint = |keys: &[String]| lookup(keys, &attrs, resource).and_then(as_bool);
    let tool_hints =
        if is_tool { (hint(&m.tool_read_only_hint), hint(&m.tool_destructive_hint)) } else { (None, None) };
    let escalation_details = escalation_details(&attrs, resource, cx);

    let mut normalized = NormalizedSpan {
        trace_id: hex_id(&span.trace_id),
        span_id: hex_id(&span.span_id),
        parent_span_id: (!span.parent_span_id.is_empty()).then(|| hex_id(&span.parent_span_id)),
        name: span.name.clone(),
        kind: span.kind,
        start_ns,
        end_ns,
        status_code,
        status_message,
        explicit_run_id: text(&m.run_id),
        agent: text(&m.agent),
        trigger: text(&m.trigger).map(|t| Trigger::parse(&t).unwrap_or(Trigger::Unknown)),
        terminal_reason: text(&m.terminal_reason).and_then(|t| TerminalReason::parse(&t)),
        escalation_reason,
        escalation_details,
        cost: lookup(&m.cost, &attrs, resource).and_then(as_f64),
        step_limit: int(&m.step_limit),
        cost_limit: lookup(&m.cost_limit, &attrs, resource).and_then(as_f64),
        wall_clock_ms: int(&m.wall_clock_ms),
        role,
        step_index: int(&m.step_index),
        stop_reason: if is_step { text(&m.step_stop_reason) } else { None },
        model_id: if is_step { text(&m.step_model_id) } else { None },
        input_tokens,
        output_tokens: if is_step { int(&m.output_tokens) } else { None },
        cache_tokens: cache_read,
        cache_write_tokens: cache_write,
        reasoning_tokens: if is_step { int(&m.reasoning_tokens) } else { None },
        tool_name,
        side_effect,
        side_effect_declared,
        tool_hints,
        idempotency_key: if is_tool { text(&m.tool_idempotency_key) } else { None },
        attempt: if is_tool { Some(int(&m.tool_attempt).unwrap_or(1)) } else { None },
        outcome,
        latency_ms: if is_tool {
            int(&m.tool_latency_ms).or_else(|| (end_ns > start_ns).then(|| (end_ns - start_ns) / 1_000_000))
        } else {
            None
        },
        external_id: if is_tool { text(&m.tool_external_id) } else { None },
        args_sha256: if is_tool { raw_args.as_deref().map(args_sha256) } else { None },
        approval_id: if is_tool { text(&m.tool_approval_id) } else { None },
        requires_approval: policy.is_some_and(|p| p.requires_approval),
        run_limit: policy.and_then(|p| p.run_limit),
        credential_in_arguments: is_tool && raw_args.as_deref().is_some_and(|a| cx.redactor.finds_secret_in_text(a)),
        sent_by_token: None,
        json: StoredJson::default(),
        events: Vec::new(),
    };
    // The argument hash above binds what ran; everything kept as text is redacted.
    redact_texts(&mut normalized, cx.redactor);

    let attributes = split_bodies(&mut normalized, attrs, events, cx);
    normalized.json.record = encode_record(&normalized, &attributes, &normalized.events, &res.stored);
    Ok(normalized)
}

/// The span's ids are the sizes OTLP prescribes and not all zeros, and it does not end
/// before it starts; returns its start and end in nanoseconds.
fn check_ids_and_times(span: &Span) -> Result<(i64, i64), String> {
    if span.trace_id.len() != 16 {
        return Err(format!("trace_id must be 16 bytes, got {}", span.trace_id.len()));
    }
    if span.span_id.len() != 8 {
        return Err(format!("span_id must be 8 bytes, got {}", span.span_id.len()));
    }
    if !span.parent_span_id.is_empty() && span.parent_span_id.len() != 8 {
        return Err(format!("parent_span_id must be empty or 8 bytes, got {}", span.parent_span_id.len()));
    }
    if span.trace_id.iter().all(|b| *b == 0) || span.span_id.iter().all(|b| *b == 0) {
        return Err("trace_id and span_id must not be all zeros".into());
    }
    let start_ns = i64::try_from(span.start_time_unix_nano).map_err(|_| "start time out of range".to_string())?;
    let end_ns = i64::try_from(span.end_time_unix_nano).map_err(|_| "end time out of range".to_string())?;
    if end_ns != 0 && end_ns < start_ns {
        return Err("end_time_unix_nano is before start_time_unix_nano".into());
    }
    Ok((start_ns, end_ns))
}

/// No attribute is larger than the configured limit.
fn check_attribute_sizes(attrs: &Map<String, Value>, limit: usize) -> Result<(), String> {
    for (key, value) in attrs {
        let size = match value {
            Value::String(s) => s.len(),
            Value::Array(_) | Value::Object(_) => value.to_string().len(),
            _ => 0,
        };
        if size > limit {
            return Err(format!("attribute `{key}` is {size} bytes, over the {} byte limit", limit));
        }
    }
    Ok(())
}

/// The escalation details sent as attributes (`escalation.blocking_fact`, ...), redacted.
fn escalation_details(
    attrs: &Map<String, Value>,
    resource: &Map<String, Value>,
    cx: &Context<'_>,
) -> Option<EscalationDetails> {
    let m = cx.mapping;
    let text = |keys: &[String]| lookup(keys, attrs, resource).and_then(as_text);

    let json = |keys: &[String]| {
        lookup(keys, attrs, resource).map(|v| match v {
            Value::String(s) => serde_json::from_str(s).unwrap_or_else(|_| Value::String(s.clone())),
            other => other.clone(),
        })
    };
    let details = EscalationDetails {
        blocking_fact: text(&m.escalation_blocking_fact).map(|t| cx.redactor.redact_text(&t)),
        what_was_done: json(&m.escalation_what_was_done).map(|mut v| {
            cx.redactor.redact_strings(&mut v);
            v
        }),
        what_remains: json(&m.escalation_what_remains).map(|mut v| {
            cx.redactor.redact_strings(&mut v);
            v
        }),
    };
    (details != EscalationDetails::default()).then_some(details)
}

/// Moves the attributes that are bodies (and event attributes that are) out of the
/// metadata, redacts both, stores the bodies' text and the span's events on `normalized`,
/// and returns the remaining attributes. After every lookup, so the attributes move
/// rather than being copied.
fn split_bodies(
    normalized: &mut NormalizedSpan,
    attrs: Map<String, Value>,
    events: Vec<(String, Map<String, Value>, u64)>,
    cx: &Context<'_>,
) -> Map<String, Value> {
    let m = cx.mapping;
    let mut attributes = Map::new();
    let mut bodies = Map::new();
    for (key, value) in attrs {
        if m.is_body(&key) {
            bodies.insert(key, value);
        } else {
            attributes.insert(key, value);
        }
    }
    cx.redactor.redact_map(&mut attributes);
    for value in bodies.values_mut() {
        if let Value::String(s) = value {
            *s = cx.redactor.redact_text(s);
        }
    }
    cx.redactor.redact_map(&mut bodies);
    normalized.events = events
        .into_iter()
        .map(|(mut name, mut ea, time)| {
            // Event attributes that are bodies (e.g. gen_ai message contents) go to bodies.
            let body_keys: Vec<String> = ea.keys().filter(|k| m.is_body(k)).cloned().collect();
            for key in body_keys {
                if let Some(v) = ea.remove(&key) {
                    bodies.insert(format!("event:{name}:{key}"), v);
                }
            }
            cx.redactor.redact_map(&mut ea);
            cx.redactor.redact_string(&mut name);
            serde_json::json!({"name": name, "time_unix_nano": time.to_string(), "attributes": ea})
        })
        .collect();
    cx.redactor.redact_map(&mut bodies);
    if !bodies.is_empty() {
        normalized.json.bodies = json_text(&bodies);
    }
    attributes
}

/// Redacts the free-text fields an agent chose (the span's name and status message, and
/// the canonical texts read from its attributes before redaction). Ids that join records
/// (run, trace and approval ids) are left as sent.
fn redact_texts(span: &mut NormalizedSpan, redactor: &Redactor) {
    redactor.redact_string(&mut span.name);
    for text in [
        &mut span.status_message,
        &mut span.agent,
        &mut span.escalation_reason,
        &mut span.stop_reason,
        &mut span.model_id,
        &mut span.tool_name,
        &mut span.idempotency_key,
        &mut span.external_id,
    ]
    .into_iter()
    .flatten()
    {
        redactor.redact_string(text);
    }
}

/// The resource of a `ResourceSpans`, read once for all its spans rather than once per
/// span: the mapping layer looks keys up in `attributes` (as sent), and every span's
/// record embeds `stored` (redacted JSON) as it is.
pub struct SpanResource {
    pub attributes: Map<String, Value>,
    pub stored: Box<RawValue>,
}

impl SpanResource {
    pub fn new(resource: Option<&opentelemetry_proto::tonic::resource::v1::Resource>, redactor: &Redactor) -> Self {
        SpanResource::from_map(resource.map(|r| to_map(&r.attributes)).unwrap_or_default(), redactor)
    }

    pub fn from_map(attributes: Map<String, Value>, redactor: &Redactor) -> Self {
        let mut redacted = attributes.clone();
        redactor.redact_map(&mut redacted);
        let stored = serde_json::value::to_raw_value(&redacted).expect("JSON values always serialize");
        SpanResource { attributes, stored }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use opentelemetry_proto::tonic::common::v1::any_value::Value as Otlp;
    use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue};
    use opentelemetry_proto::tonic::trace::v1::{span::Event, Status};
    use serde_json::json;

    pub fn kv(key: &str, v: Value) -> KeyValue {
        let value = match v {
            Value::String(s) => Otlp::StringValue(s),
            Value::Bool(b) => Otlp::BoolValue(b),
            Value::Number(n) if n.is_i64() => Otlp::IntValue(n.as_i64().unwrap()),
            Value::Number(n) => Otlp::DoubleValue(n.as_f64().unwrap()),
            other => Otlp::StringValue(other.to_string()),
        };
        KeyValue { key: key.into(), value: Some(AnyValue { value: Some(value) }), ..Default::default() }
    }

    pub fn span(name: &str, parent: Option<u8>, attrs: Value) -> Span {
        Span {
            trace_id: vec![7; 16],
            span_id: vec![parent.map(|p| p + 1).unwrap_or(1); 8],
            parent_span_id: parent.map(|p| vec![p; 8]).unwrap_or_default(),
            name: name.into(),
            start_time_unix_nano: 1_000_000_000,
            end_time_unix_nano: 1_250_000_000,
            attributes: attrs.as_object().unwrap().iter().map(|(k, v)| kv(k, v.clone())).collect(),
            ..Default::default()
        }
    }

    fn run(s: &Span, resource: Value) -> Result<NormalizedSpan, String> {
        let mapping = MappingTable::default();
        let redactor = Redactor::default();
        let policies = vec![ToolPolicy::class("send_*", SideEffect::Write)];
        let cx = Context { mapping: &mapping, redactor: &redactor, policies: &policies, limits: Limits::default() };
        normalize(s, &SpanResource::from_map(resource.as_object().unwrap().clone(), &redactor), &cx)
    }

    #[test]
    fn article_names_map_to_every_canonical_field() {
        let root = span(
            "agent.run",
            None,
            json!({
                "run.id": "run-42", "run.trigger": "webhook", "run.terminal_reason": "budget",
                "budget.cost_spent": 0.42, "budget.wall_clock_ms": 9000, "escalation.reason": "low confidence"
            }),
        );
        let n = run(&root, json!({"service.name": "billing-agent"})).unwrap();
        assert_eq!(n.explicit_run_id.as_deref(), Some("run-42"));
        assert_eq!(n.agent.as_deref(), Some("billing-agent"));
        assert_eq!(n.trigger, Some(Trigger::Webhook));
        assert_eq!(n.terminal_reason, Some(TerminalReason::Budget));
        assert_eq!(n.cost, Some(0.42));
        assert_eq!(n.wall_clock_ms, Some(9000));
        assert_eq!(n.escalation_reason.as_deref(), Some("low confidence"));
        assert_eq!(n.role, None);
        assert_eq!(n.trace_id, "07070707070707070707070707070707");
        assert_eq!(n.parent_span_id, None);

        let step = span(
            "step 2",
            Some(1),
            json!({
                "step.index": 2, "step.stop_reason": "tool_call", "step.model_id": "claude-x",
                "step.input_tokens": 1200, "step.output_tokens": 80, "step.cache_read_tokens": 900
            }),
        );
        let n = run(&step, json!({})).unwrap();
        assert_eq!(n.role, Some(SpanRole::Step));
        assert_eq!(
            (n.step_index, n.stop_reason.as_deref(), n.model_id.as_deref()),
            (Some(2), Some("tool_call"), Some("claude-x"))
        );
        assert_eq!((n.input_tokens, n.output_tokens, n.cache_tokens), (Some(1200), Some(80), Some(900)));

        let tool = span(
            "tool send_email",
            Some(2),
            json!({
                "tool.name": "send_email", "tool.side_effect": "irreversible", "tool.idempotency_key": "k1",
                "tool.attempt": 2, "tool.outcome": "deduped", "tool.latency_ms": 31, "tool.external_id": "msg_1",
                "approval.id": "apr_9", "gen_ai.tool.call.arguments": "{\"to\": \"a@b.c\", \"body\": \"hi\"}"
            }),
        );
        let n = run(&tool, json!({})).unwrap();
        assert_eq!(n.role, Some(SpanRole::Tool));
        assert_eq!(n.tool_name.as_deref(), Some("send_email"));
        assert_eq!(n.side_effect, Some(SideEffect::Irreversible), "the span's own class beats the policy");
        assert_eq!((n.attempt, n.outcome, n.latency_ms), (Some(2), Some(Outcome::Deduped), Some(31)));
        assert_eq!(n.external_id.as_deref(), Some("msg_1"));
        assert_eq!(n.approval_id.as_deref(), Some("apr_9"));
        assert_eq!(n.args_sha256.as_deref(), Some(args_sha256(r#"{"body":"hi","to":"a@b.c"}"#).as_str()));
        assert!(stored(&n.json.bodies).get("gen_ai.tool.call.arguments").is_some(), "arguments are a body");
        assert!(stored_field(&n.json.record, "attributes").get("gen_ai.tool.call.arguments").is_none());
    }

    #[test]
    fn genai_spans_as_pydantic_ai_emits_them() {
        let agent = span(
            "invoke_agent support",
            None,
            json!({
                "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support", "gen_ai.conversation.id": "conv-1"
            }),
        );
        let n = run(&agent, json!({"service.name": "svc"})).unwrap();
        assert_eq!(n.explicit_run_id.as_deref(), Some("conv-1"));
        assert_eq!(n.agent.as_deref(), Some("support"), "gen_ai.agent.name beats service.name");
        let chat = span(
            "chat gpt-x",
            Some(1),
            json!({
                "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-x",
                "gen_ai.usage.input_tokens": 50, "gen_ai.usage.output_tokens": 5, "gen_ai.response.finish_reasons": "[\"tool_call\"]"
            }),
        );
        let n = run(&chat, json!({})).unwrap();
        assert_eq!(n.role, Some(SpanRole::Step));
        assert_eq!((n.model_id.as_deref(), n.input_tokens, n.output_tokens), (Some("gpt-x"), Some(50), Some(5)));
        let mut tool = span(
            "execute_tool send_invoice",
            Some(1),
            json!({
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "send_invoice",
                "gen_ai.tool.call.arguments": "{\"amount\": 10}"
            }),
        );
        tool.status = Some(Status { code: 2, message: "Timed out while waiting for response...10.0 seconds".into() });
        let n = run(&tool, json!({})).unwrap();
        assert_eq!(n.role, Some(SpanRole::Tool));
        assert_eq!(n.tool_name.as_deref(), Some("send_invoice"));
        assert_eq!(n.side_effect, Some(SideEffect::Write), "class from the tool policy");
        assert_eq!(n.outcome, Some(Outcome::Timeout), "the timeout signature is recognised");
        assert_eq!(n.attempt, Some(1));
        assert_eq!(n.latency_ms, Some(250), "latency from the span when not reported");
        assert!(!n.side_effect_declared, "the class came from a policy");
    }

    #[test]
    fn standard_token_counts_become_uncached_input() {
        // GenAI counts cache reads and writes within input; the article keeps them apart.
        let chat = span(
            "chat",
            Some(1),
            json!({
                "gen_ai.operation.name": "chat", "gen_ai.request.model": "claude-sonnet-4-5",
                "gen_ai.usage.input_tokens": 1000, "gen_ai.usage.cache_read.input_tokens": 700,
                "gen_ai.usage.cache_creation.input_tokens": 200, "gen_ai.usage.output_tokens": 50,
                "gen_ai.usage.reasoning.output_tokens": 20
            }),
        );
        let n = run(&chat, json!({})).unwrap();
        assert_eq!(
            (n.input_tokens, n.cache_tokens, n.cache_write_tokens, n.output_tokens, n.reasoning_tokens),
            (Some(100), Some(700), Some(200), Some(50), Some(20))
        );
        let llm = span(
            "llm",
            Some(1),
            json!({
                "openinference.span.kind": "LLM", "llm.model_name": "m", "llm.token_count.prompt": 11,
                "llm.token_count.prompt_details.cache_read": 4, "llm.token_count.completion": 3
            }),
        );
        assert_eq!(run(&llm, json!({})).unwrap().input_tokens, Some(7));
        let article = span(
            "step",
            None,
            json!({"step.index": 1, "step.input_tokens": 10, "step.cache_read_tokens": 900, "step.output_tokens": 1}),
        );
        assert_eq!(run(&article, json!({})).unwrap().input_tokens, Some(10), "already uncached");
        // Nonsense never goes below zero.
        let odd = span(
            "chat",
            Some(1),
            json!({"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 5, "gen_ai.usage.cache_read.input_tokens": 50}),
        );
        assert_eq!(run(&odd, json!({})).unwrap().input_tokens, Some(0));
    }

    #[test]
    fn mcp_annotations_limits_and_escalation_details_are_read() {
        let tool = span(
            "tools/call delete_file",
            Some(1),
            json!({
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "delete_file",
                "mcp.tool.annotations.destructiveHint": true, "mcp.tool.annotations.readOnlyHint": "false",
                "tool.side_effect": "irreversible"
            }),
        );
        let n = run(&tool, json!({})).unwrap();
        assert_eq!(n.tool_hints, (Some(false), Some(true)));
        assert!(n.side_effect_declared);
        let root = span(
            "agent",
            None,
            json!({
                "budget.max_steps": 20, "budget.cost_limit": "1.5", "escalation.reason": "Budget Exceeded",
                "escalation.blocking_fact": "needs sk_live_4eC39HqLyjWDarjtT1zdp7dc to continue",
                "escalation.what_was_done": "[\"drafted the refund\"]", "escalation.what_remains": ["send it"]
            }),
        );
        let n = run(&root, json!({})).unwrap();
        assert_eq!((n.step_limit, n.cost_limit), (Some(20), Some(1.5)));
        let d = n.escalation_details.expect("details from attributes");
        assert!(!d.blocking_fact.unwrap().contains("sk_live_"), "redacted before storage");
        assert_eq!(d.what_was_done, Some(json!(["drafted the refund"])));
        assert_eq!(d.what_remains, Some(json!(["send it"])));
    }

    #[test]
    fn openinference_spans() {
        let root = span("agent", None, json!({"openinference.span.kind": "AGENT", "session.id": "sess-7"}));
        assert_eq!(run(&root, json!({})).unwrap().explicit_run_id.as_deref(), Some("sess-7"));
        let llm = span(
            "llm",
            Some(1),
            json!({
                "openinference.span.kind": "LLM", "llm.model_name": "m", "llm.token_count.prompt": 11, "llm.token_count.completion": 3
            }),
        );
        let n = run(&llm, json!({})).unwrap();
        assert_eq!((n.role, n.input_tokens, n.output_tokens), (Some(SpanRole::Step), Some(11), Some(3)));
        let tool = span(
            "search",
            Some(1),
            json!({
                "openinference.span.kind": "TOOL", "tool.name": "search_docs", "input.value": "{\"q\": \"x\"}", "output.value": "found"
            }),
        );
        let n = run(&tool, json!({})).unwrap();
        assert_eq!(
            (n.role, n.tool_name.as_deref(), n.outcome),
            (Some(SpanRole::Tool), Some("search_docs"), Some(Outcome::Ok))
        );
        assert_eq!(n.side_effect, Some(SideEffect::Unknown));
        assert!(n.args_sha256.is_some() && stored(&n.json.bodies).get("output.value").is_some());
    }

    #[test]
    fn escalation_from_a_span_event() {
        let mut s = span("agent.run", None, json!({"run.id": "r"}));
        s.events.push(Event {
            name: "escalation".into(),
            attributes: vec![kv("escalation.reason", json!("insufficient_permission"))],
            ..Default::default()
        });
        assert_eq!(run(&s, json!({})).unwrap().escalation_reason.as_deref(), Some("insufficient_permission"));
    }

    #[test]
    fn bad_ids_times_and_huge_values_are_rejected_with_reasons() {
        let mut s = span("x", None, json!({}));
        s.trace_id = vec![1; 15];
        assert!(run(&s, json!({})).unwrap_err().contains("trace_id must be 16 bytes"));
        let mut s = span("x", None, json!({}));
        s.span_id = vec![1; 4];
        assert!(run(&s, json!({})).unwrap_err().contains("span_id must be 8 bytes"));
        let mut s = span("x", None, json!({}));
        s.end_time_unix_nano = 1;
        assert!(run(&s, json!({})).unwrap_err().contains("before"));
        let s = span("x", None, json!({"big": "x".repeat(300 * 1024)}));
        assert!(run(&s, json!({})).unwrap_err().contains("attribute `big`"));
    }

    #[test]
    fn secrets_are_redacted_in_attributes_bodies_and_resource() {
        let s = span(
            "tool call_api",
            Some(1),
            json!({
                "tool.name": "call_api", "http.request.header.authorization": "Bearer abcdefgh1234",
                "gen_ai.tool.call.arguments": "{\"api_key\": \"sk-abcdefghijklmnop1234\"}"
            }),
        );
        let n = run(&s, json!({"deploy.token": "t0ps3cret"})).unwrap();
        assert_eq!(stored_field(&n.json.record, "attributes")["http.request.header.authorization"], "[REDACTED]");
        assert!(!stored(&n.json.bodies)["gen_ai.tool.call.arguments"].as_str().unwrap().contains("sk-abc"));
        assert_eq!(stored_field(&n.json.record, "resource")["deploy.token"], "[REDACTED]");
    }

    #[test]
    fn names_status_messages_events_and_canonical_texts_are_redacted_too() {
        let mut s = span(
            "charge sk_live_4eC39HqLyjWDarjtT1zdp7dc",
            Some(1),
            json!({
                "gen_ai.operation.name": "execute_tool", "tool.name": "charge",
                "secret_key": "plain-looking-value", "aws_secret_access_key": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                "tool.external_id": "ch_1 with ghp_0123456789abcdefghijABCDEFGHIJ012345",
                "gen_ai.tool.call.arguments": "{\"card\": \"tok_visa\", \"api_key\": \"sk_live_4eC39HqLyjWDarjtT1zdp7dc\"}"
            }),
        );
        s.status = Some(Status { code: 2, message: "push failed: ghp_0123456789abcdefghijABCDEFGHIJ012345".into() });
        s.events.push(Event { name: "retry with sk-proj-4f3kQ9xT7bLm2VpN8rZs1WcY".into(), ..Default::default() });
        let n = run(&s, json!({})).unwrap();
        let everything = format!("{}{}", n.json.record, n.json.bodies);
        for leaked in ["sk_live_4eC3", "ghp_0123", "plain-looking-value", "wJalrXUtnFEMI", "sk-proj-4f3k"] {
            assert!(!everything.contains(leaked), "{leaked} stored in {everything}");
        }
        assert_eq!(n.name, "charge [REDACTED]");
        assert!(n.status_message.as_deref().unwrap().starts_with("push failed: [REDACTED]"));
        assert!(n.credential_in_arguments, "the arguments carried a key");
        assert_eq!(n.args_sha256.as_deref().unwrap().len(), 64, "the hash binds what ran, from before redaction");

        let clean = span("lookup", Some(1), json!({"tool.name": "lookup", "input.value": "{\"q\": \"weather\"}"}));
        assert!(!run(&clean, json!({})).unwrap().credential_in_arguments);
    }

    /// One field of the stored record.
    fn stored_field(record: &str, field: &str) -> Value {
        stored(record)[field].clone()
    }

    /// Stored JSON text read back; no bodies reads as an empty object.
    fn stored(text: &str) -> Value {
        if text.is_empty() {
            return json!({});
        }
        serde_json::from_str(text).expect("stored JSON parses")
    }
}
