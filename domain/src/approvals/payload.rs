//! The exact payload an approval is bound to: a canonical JSON form (object keys sorted,
//! no insignificant whitespace) so the same tool and arguments always hash the same,
//! however an agent formatted them, and validation of a new request.

use super::DisplayField;
use crate::redact::Redactor;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// Longest run id, tool name or idempotency key accepted.
pub const MAX_ID_LEN: usize = 200;
/// Most display fields one request may carry.
pub const MAX_DISPLAY_FIELDS: usize = 50;
/// Longest wait a request may ask for: one week.
pub const MAX_EXPIRES_IN_SECONDS: i64 = 7 * 24 * 3600;
/// The wait when the tool's policy does not say: one hour.
pub const DEFAULT_EXPIRES_IN_SECONDS: i64 = 3600;
/// How long after its decision an approval may be used when the policy does not say:
/// fifteen minutes.
pub const DEFAULT_USE_WITHIN_SECONDS: i64 = 900;

/// How long a request waits for a decision: the tool policy's expiry (or the default),
/// which the agent's `expires_in` may shorten but never lengthen: how long a request may
/// stay open is the policy's call, not the requester's.
pub fn expiry_seconds(requested: Option<i64>, policy: Option<i64>) -> i64 {
    let limit = policy.unwrap_or(DEFAULT_EXPIRES_IN_SECONDS);
    requested.map_or(limit, |r| r.min(limit))
}

/// `value` as canonical JSON: object keys sorted by their UTF-8 bytes, no whitespace,
/// strings escaped as serde_json does, numbers as serde_json prints them.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            // Sorted here rather than trusting serde_json's map order, which a
            // dependency enabling `preserve_order` would silently change.
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out.push('{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(item, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

pub fn sha256_hex(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// The hash an approval is bound to: tool and arguments together.
pub fn payload_sha256(tool: &str, arguments: &Value) -> String {
    let payload = serde_json::json!({ "tool": tool, "arguments": arguments });
    sha256_hex(&canonical_json(&payload))
}

/// The hash ingest computes for an executed tool span's arguments
/// (`ingest::normalize::args_sha256` of the same JSON gives the same value).
pub fn arguments_sha256(arguments: &Value) -> String {
    sha256_hex(&canonical_json(arguments))
}

/// A request as an agent sends it (`POST /api/v1/approvals`).
#[derive(utoipa::ToSchema, Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalRequest {
    pub run_id: Option<String>,
    pub step_index: Option<i64>,
    pub tool: Option<String>,
    pub arguments: Option<Value>,
    #[serde(default)]
    pub display: Option<Vec<DisplayInput>>,
    pub idempotency_key: Option<String>,
    pub expires_in: Option<i64>,
    /// The agent's name, when the run is not known yet (else the run's agent is used).
    pub agent: Option<String>,
}

#[derive(utoipa::ToSchema, Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DisplayInput {
    pub label: String,
    pub value: Value,
    /// The argument this field shows (a key, dotted path or JSON pointer).
    pub argument: Option<String>,
}

/// A request that passed validation, ready to store.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidRequest {
    pub run_id: String,
    pub step_index: Option<i64>,
    pub tool: String,
    /// The arguments as the agent sent them: what the hashes bind.
    pub arguments: Value,
    /// The arguments as stored and shown: credentials replaced by `[REDACTED]` (see
    /// [`ValidRequest::redact`]); the same as `arguments` until then.
    pub stored_arguments: Value,
    pub display: Vec<DisplayField>,
    pub idempotency_key: Option<String>,
    pub expires_in: Option<i64>,
    pub agent: Option<String>,
}

impl ValidRequest {
    /// Cuts credentials out of what will be stored and shown to the approver: the
    /// arguments and the display fields. The hashes are still computed from the original
    /// arguments, so the approval binds exactly what the agent will run.
    pub fn redact(&mut self, redactor: &Redactor) {
        redactor.redact_strings(&mut self.stored_arguments);
        for field in &mut self.display {
            redactor.redact_string(&mut field.label);
            redactor.redact_string(&mut field.value);
        }
    }
}

/// A required identifier (run, tool, key): trimmed, 1 to [`MAX_ID_LEN`] characters; the
/// error names the field. Shared by every agent-facing request.
pub fn required_id(field: &str, value: Option<String>) -> Result<String, String> {
    let value = value.ok_or_else(|| format!("`{field}` is required"))?;
    let value = value.trim().to_string();
    if value.is_empty() || value.len() > MAX_ID_LEN {
        return Err(format!("`{field}` must have 1 to {MAX_ID_LEN} characters"));
    }
    Ok(value)
}

/// The agent's display fields checked: at most [`MAX_DISPLAY_FIELDS`], each labelled, values
/// other than strings as pretty JSON, argument paths of a sane length. Shared by approval
/// requests and guarded calls.
pub fn display_fields(input: Option<Vec<DisplayInput>>) -> Result<Vec<DisplayField>, String> {
    let display_in = input.unwrap_or_default();
    if display_in.len() > MAX_DISPLAY_FIELDS {
        return Err(format!("`display` may have at most {MAX_DISPLAY_FIELDS} fields, got {}", display_in.len()));
    }
    let mut display = Vec::with_capacity(display_in.len());
    for (i, field) in display_in.into_iter().enumerate() {
        if field.label.trim().is_empty() {
            return Err(format!("`display[{i}].label` must not be empty"));
        }
        let value = match field.value {
            Value::String(text) => text,
            other => serde_json::to_string_pretty(&other).unwrap_or_default(),
        };
        if let Some(path) = field.argument.as_deref().filter(|p| p.is_empty() || p.len() > MAX_ID_LEN) {
            return Err(format!("`display[{i}].argument` must have 1 to {MAX_ID_LEN} characters, got {}", path.len()));
        }
        display.push(DisplayField { label: field.label, value, argument: field.argument });
    }
    Ok(display)
}

impl ApprovalRequest {
    /// Checks every field; the error names the field and what was wrong with it.
    pub fn validate(self) -> Result<ValidRequest, String> {
        let run_id = required_id("run_id", self.run_id)?;
        let tool = required_id("tool", self.tool)?;
        let arguments = self.arguments.ok_or("`arguments` is required (any JSON value; use {} for none)")?;
        if let Some(step) = self.step_index.filter(|s| *s < 0) {
            return Err(format!("`step_index` must be 0 or more, got {step}"));
        }
        let idempotency_key = match self.idempotency_key {
            Some(key) => Some(required_id("idempotency_key", Some(key))?),
            None => None,
        };
        if let Some(secs) = self.expires_in.filter(|s| !(1..=MAX_EXPIRES_IN_SECONDS).contains(s)) {
            return Err(format!("`expires_in` must be between 1 and {MAX_EXPIRES_IN_SECONDS} seconds, got {secs}"));
        }
        let display = display_fields(self.display)?;
        let agent = self.agent.map(|a| a.trim().to_string()).filter(|a| !a.is_empty());
        Ok(ValidRequest {
            run_id,
            step_index: self.step_index,
            tool,
            stored_arguments: arguments.clone(),
            arguments,
            display,
            idempotency_key,
            expires_in: self.expires_in,
            agent,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn canonical_form_sorts_keys_at_every_depth_and_drops_whitespace() {
        let a: Value = serde_json::from_str(r#"{ "b": [ {"y": 1, "x": "é\n"} ], "a": null }"#).unwrap();
        assert_eq!(canonical_json(&a), r#"{"a":null,"b":[{"x":"é\n","y":1}]}"#);
    }

    #[test]
    fn the_same_payload_hashes_the_same_however_it_was_formatted() {
        let one: Value = serde_json::from_str(r#"{"to":"a@b.c","body":"hi"}"#).unwrap();
        let two: Value = serde_json::from_str("{\n  \"body\": \"hi\",\n  \"to\": \"a@b.c\"\n}").unwrap();
        assert_eq!(payload_sha256("send_email", &one), payload_sha256("send_email", &two));
        assert_ne!(payload_sha256("send_email", &one), payload_sha256("send_sms", &one), "the tool is part of it");
        let changed = json!({"to": "a@b.c", "body": "hi "});
        assert_ne!(payload_sha256("send_email", &one), payload_sha256("send_email", &changed));
    }

    #[test]
    fn ingest_and_approvals_hash_arguments_alike() {
        let args = json!({"amount": 10, "currency": "EUR"});
        let as_sent = r#"{"currency": "EUR", "amount": 10}"#;
        assert_eq!(arguments_sha256(&args), crate::span::args_sha256(as_sent));
    }

    fn request(body: Value) -> Result<ValidRequest, String> {
        serde_json::from_value::<ApprovalRequest>(body).map_err(|e| e.to_string())?.validate()
    }

    #[test]
    fn the_agent_can_shorten_the_policys_expiry_but_never_lengthen_it() {
        assert_eq!(expiry_seconds(None, None), DEFAULT_EXPIRES_IN_SECONDS);
        assert_eq!(expiry_seconds(None, Some(900)), 900);
        assert_eq!(expiry_seconds(Some(60), Some(900)), 60);
        assert_eq!(expiry_seconds(Some(3 * 24 * 3600), Some(900)), 900, "3 days asked, 900 s allowed");
        assert_eq!(expiry_seconds(Some(7200), None), DEFAULT_EXPIRES_IN_SECONDS);
    }

    #[test]
    fn credentials_are_stored_redacted_while_the_hash_binds_the_original() {
        let mut valid = request(json!({
            "run_id": "r1", "tool": "call_api",
            "arguments": {"url": "https://api.example.com", "api_key": "sk-proj-4f3kQ9xT7bLm2VpN8rZs1WcY"},
            "display": [{"label": "Key", "value": "sk-proj-4f3kQ9xT7bLm2VpN8rZs1WcY"}]
        }))
        .unwrap();
        let hash_before = payload_sha256(&valid.tool, &valid.arguments);
        valid.redact(&Redactor::default());
        assert_eq!(valid.stored_arguments["api_key"], crate::redact::REDACTED);
        assert_eq!(valid.stored_arguments["url"], "https://api.example.com");
        assert_eq!(valid.display[0].value, crate::redact::REDACTED);
        assert_eq!(payload_sha256(&valid.tool, &valid.arguments), hash_before, "the original is what is hashed");
    }

    #[test]
    fn requests_are_validated_field_by_field() {
        let ok = request(json!({
            "run_id": "r1", "tool": "send_email", "arguments": {"to": "x"},
            "display": [{"label": "Recipient", "value": "x"}, {"label": "Count", "value": 3}]
        }))
        .unwrap();
        assert_eq!(ok.display[1].value, "3");
        assert!(request(json!({"tool": "t", "arguments": {}})).unwrap_err().contains("`run_id` is required"));
        assert!(request(json!({"run_id": "r", "arguments": {}})).unwrap_err().contains("`tool`"));
        assert!(request(json!({"run_id": "r", "tool": "t"})).unwrap_err().contains("`arguments` is required"));
        assert!(request(json!({"run_id": "r", "tool": "t", "arguments": {}, "expires_in": 0}))
            .unwrap_err()
            .contains("`expires_in`"));
        assert!(request(json!({"run_id": "r", "tool": "t", "arguments": {}, "step_index": -1}))
            .unwrap_err()
            .contains("`step_index`"));
        assert!(request(json!({"run_id": " ", "tool": "t", "arguments": {}})).unwrap_err().contains("1 to 200"));
        let many: Vec<Value> = (0..51).map(|i| json!({"label": format!("f{i}"), "value": i})).collect();
        assert!(request(json!({"run_id": "r", "tool": "t", "arguments": {}, "display": many}))
            .unwrap_err()
            .contains("at most 50"));
        assert!(request(json!({"run_id": "r", "tool": "t", "arguments": {}, "surprise": 1}))
            .unwrap_err()
            .contains("unknown field"));
    }
}
