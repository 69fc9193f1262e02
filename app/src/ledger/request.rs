//! What an agent sends: the ask before a call (`POST /api/v1/calls`) and the report after
//! it (`POST /api/v1/calls/{id}/complete`), each checked field by field with an error that
//! names the field. Sizes are capped so one agent cannot fill the ledger.

use crate::approvals::payload::{canonical_json, required_id};
use serde_json::Value;

/// Largest canonical JSON of a call's arguments.
pub const MAX_ARGUMENTS_BYTES: usize = 64 * 1024;
/// Largest canonical JSON of a cached response.
pub const MAX_RESPONSE_BYTES: usize = 64 * 1024;
/// Longest error message kept.
pub const MAX_ERROR_CHARS: usize = 2000;

/// The ask, as the agent sends it.
#[derive(Debug, Clone, serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CallRequest {
    pub run_id: Option<String>,
    pub step_index: Option<i64>,
    pub tool: Option<String>,
    /// The call's arguments (any JSON; `{}` for none).
    pub arguments: Option<Value>,
    /// The agent's own key; when absent Flightdeck derives one from run, step, tool and
    /// the stable arguments (see docs/ledger.md).
    pub idempotency_key: Option<String>,
}

/// An ask that passed the checks.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidCall {
    pub run_id: String,
    pub step_index: i64,
    pub tool: String,
    pub arguments: Value,
    pub idempotency_key: Option<String>,
}

impl CallRequest {
    pub fn validate(self) -> Result<ValidCall, String> {
        let run_id = required_id("run_id", self.run_id)?;
        let tool = required_id("tool", self.tool)?;
        let step_index = self.step_index.ok_or("`step_index` is required (the step of the run making the call)")?;
        if step_index < 0 {
            return Err(format!("`step_index` must be 0 or more, got {step_index}"));
        }
        let arguments = self.arguments.ok_or("`arguments` is required (any JSON value; use {} for none)")?;
        let size = canonical_json(&arguments).len();
        if size > MAX_ARGUMENTS_BYTES {
            return Err(format!("`arguments` may have at most {MAX_ARGUMENTS_BYTES} bytes of JSON, got {size}"));
        }
        let idempotency_key = match self.idempotency_key {
            Some(key) => Some(required_id("idempotency_key", Some(key))?),
            None => None,
        };
        Ok(ValidCall { run_id, step_index, tool, arguments, idempotency_key })
    }
}

/// How the call ended, as the agent reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Ok,
    Error,
}

/// The report after the call.
#[derive(Debug, Clone, serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Completion {
    pub outcome: Option<Outcome>,
    /// The id of what the call created or changed (a message id, a ticket number).
    pub external_id: Option<String>,
    /// What to return to a later ask with the same key (redacted before it is stored).
    pub response: Option<Value>,
    /// Why it failed, for `error`.
    pub error: Option<String>,
    /// How the agent made sure the call had not happened before: `read_before_write`.
    pub verified_by: Option<String>,
}

/// A report that passed the checks.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidCompletion {
    pub outcome: Outcome,
    pub external_id: Option<String>,
    pub response: Option<Value>,
    pub error: Option<String>,
    pub verified_by: Option<String>,
}

/// The only verification named so far.
pub const VERIFIED_BY: &[&str] = &["read_before_write"];

impl Completion {
    pub fn validate(self) -> Result<ValidCompletion, String> {
        let outcome = self.outcome.ok_or("`outcome` is required: ok or error")?;
        let external_id = match self.external_id {
            Some(id) => Some(required_id("external_id", Some(id))?),
            None => None,
        };
        if let Some(response) = &self.response {
            let size = canonical_json(response).len();
            if size > MAX_RESPONSE_BYTES {
                return Err(format!(
                    "`response` may have at most {MAX_RESPONSE_BYTES} bytes of JSON, got {size}; cache less"
                ));
            }
        }
        let error = self.error.map(|e| e.chars().take(MAX_ERROR_CHARS).collect::<String>());
        if let Some(v) = self.verified_by.as_deref().filter(|v| !VERIFIED_BY.contains(v)) {
            return Err(format!("`verified_by` may be read_before_write, got `{v}`"));
        }
        Ok(ValidCompletion { outcome, external_id, response: self.response, error, verified_by: self.verified_by })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ask(v: Value) -> Result<ValidCall, String> {
        serde_json::from_value::<CallRequest>(v).map_err(|e| e.to_string())?.validate()
    }

    #[test]
    fn asks_name_the_field_that_is_wrong() {
        assert!(ask(json!({"run_id": "r", "step_index": 1, "tool": "t", "arguments": {}})).is_ok());
        assert!(ask(json!({"step_index": 1, "tool": "t", "arguments": {}})).unwrap_err().contains("run_id"));
        assert!(ask(json!({"run_id": "r", "tool": "t", "arguments": {}})).unwrap_err().contains("step_index"));
        assert!(ask(json!({"run_id": "r", "step_index": -1, "tool": "t", "arguments": {}}))
            .unwrap_err()
            .contains("0 or more"));
        assert!(ask(json!({"run_id": "r", "step_index": 1, "tool": "t"})).unwrap_err().contains("arguments"));
        let big = "x".repeat(MAX_ARGUMENTS_BYTES);
        let err = ask(json!({"run_id": "r", "step_index": 1, "tool": "t", "arguments": {"body": big}})).unwrap_err();
        assert!(err.contains("at most"), "{err}");
        assert!(ask(json!({"run_id": "r", "step_index": 1, "tool": "t", "arguments": {}, "extra": 1})).is_err());
    }

    #[test]
    fn completions_need_an_outcome_and_a_bounded_response() {
        let done = |v: Value| serde_json::from_value::<Completion>(v).map_err(|e| e.to_string())?.validate();
        assert_eq!(done(json!({"outcome": "ok", "external_id": "msg_1"})).unwrap().outcome, Outcome::Ok);
        assert!(done(json!({"external_id": "msg_1"})).unwrap_err().contains("outcome"));
        assert!(done(json!({"outcome": "maybe"})).is_err());
        let big = "x".repeat(MAX_RESPONSE_BYTES);
        assert!(done(json!({"outcome": "ok", "response": {"body": big}})).unwrap_err().contains("cache less"));
        assert!(done(json!({"outcome": "ok", "verified_by": "hope"})).unwrap_err().contains("read_before_write"));
    }
}
