//! Replay fixtures (pure): a run's tool calls in order with the arguments and responses
//! its retained bodies hold, in the documented `flightdeck.replay_fixture` format, for
//! an agent team's regression tests. Storage fetches the run and its bodies.

use crate::canonical::{ReplayCall, ReplayFixture, RunDetail};
use serde_json::Value;
use std::collections::HashMap;

/// Body keys that hold a tool call's arguments and its response, in order of preference.
const ARGUMENT_KEYS: &[&str] = &["gen_ai.tool.call.arguments", "tool.parameters", "tool.arguments", "input.value"];
const RESPONSE_KEYS: &[&str] = &["gen_ai.tool.call.result", "tool.result", "output.value"];

/// A JSON text as JSON, anything else as a string.
fn as_json(value: &Value) -> Value {
    match value {
        Value::String(text) => serde_json::from_str(text).unwrap_or_else(|_| value.clone()),
        other => other.clone(),
    }
}

/// The replay fixture of a run from its detail and its retained bodies by span id, or
/// `None` when none were retained (a fixture without arguments replays nothing).
pub fn fixture(detail: RunDetail, bodies: &HashMap<String, Value>) -> Option<ReplayFixture> {
    if bodies.is_empty() {
        return None;
    }
    let pick = |span_id: &str, keys: &[&str]| {
        bodies.get(span_id).and_then(|b| keys.iter().find_map(|k| b.get(*k))).map(as_json).unwrap_or(Value::Null)
    };
    let tool_calls = detail
        .tool_call_list
        .iter()
        .enumerate()
        .map(|(i, c)| ReplayCall {
            sequence: i + 1,
            trace_id: c.trace_id.clone(),
            span_id: c.span_id.clone(),
            step_index: c.step_index,
            tool: c.tool.clone(),
            side_effect: c.side_effect,
            attempt: c.attempt,
            outcome: c.outcome,
            idempotency_key: c.idempotency_key.clone(),
            external_id: c.external_id.clone(),
            args_sha256: c.args_sha256.clone(),
            arguments: pick(&c.span_id, ARGUMENT_KEYS),
            response: pick(&c.span_id, RESPONSE_KEYS),
            started_at: c.started_at,
        })
        .collect();
    Some(ReplayFixture { format: "flightdeck.replay_fixture".into(), version: 1, run: detail.run, tool_calls })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canonical::{Outcome, SideEffect, ToolCallView};
    use crate::derive::{derive_run_with, Rules};

    #[test]
    fn a_fixture_holds_each_call_with_its_arguments_and_response_in_order() {
        let call = |span: &str, tool: &str| ToolCallView {
            trace_id: "t1".into(),
            span_id: span.into(),
            step_index: Some(1),
            tool: tool.into(),
            side_effect: SideEffect::Write,
            idempotency_key: None,
            attempt: 1,
            outcome: Outcome::Ok,
            latency_ms: None,
            external_id: None,
            args_sha256: None,
            approval_id: None,
            credential_in_arguments: false,
            started_at: None,
        };
        let mut detail = derive_run_with("r1", &[], &Rules::default());
        detail.tool_call_list = vec![call("s1", "lookup"), call("s2", "send_email")];
        let mut bodies = HashMap::new();
        bodies.insert(
            "s2".to_string(),
            serde_json::json!({"gen_ai.tool.call.arguments": "{\"to\":\"a@b.c\"}", "tool.result": "sent"}),
        );
        let f = fixture(detail.clone(), &bodies).unwrap();
        assert_eq!(f.format, "flightdeck.replay_fixture");
        assert_eq!(f.tool_calls.len(), 2);
        assert_eq!((f.tool_calls[0].sequence, f.tool_calls[0].arguments.clone()), (1, Value::Null));
        assert_eq!(f.tool_calls[1].arguments, serde_json::json!({"to": "a@b.c"}), "JSON text is read as JSON");
        assert_eq!(f.tool_calls[1].response, serde_json::json!("sent"), "other text stays text");
        assert!(fixture(detail, &HashMap::new()).is_none(), "no bodies, no fixture");
    }
}
