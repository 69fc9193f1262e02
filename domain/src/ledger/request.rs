//! What an agent sends: the ask before a call (`POST /api/v1/calls`) and the report after
//! it (`POST /api/v1/calls/{id}/complete`), each checked field by field with an error that
//! names the field. Sizes are capped so one agent cannot fill the ledger.

use crate::approvals::payload::{canonical_json, display_fields, required_id, DisplayInput};
use crate::approvals::DisplayField;
use serde_json::Value;

/// The longest an ask may ask to be held (`wait`); agents ask again for longer.
pub const MAX_WAIT_SECONDS: u64 = 60;

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
    /// Seconds (at most 60) to hold the ask while its answer is one to wait on
    /// (approval_required, in_progress, outcome_unknown): it is answered as soon as the
    /// answer changes. Repeat the same ask to wait longer.
    pub wait: Option<u64>,
    /// The agent's own description of the call for an approver (ordered `{label, value,
    /// argument}` fields, as for approval requests).
    #[serde(default)]
    pub display: Option<Vec<DisplayInput>>,
    /// The agent's name, for an approval request filed before the run's spans arrive.
    pub agent: Option<String>,
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

/// An ask that passed the checks, with what the gate needs besides the call.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidAsk {
    pub call: ValidCall,
    pub display: Vec<DisplayField>,
    pub agent: Option<String>,
    pub wait_seconds: u64,
}

impl CallRequest {
    pub fn validate(self) -> Result<ValidAsk, String> {
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
        // Longer waits are held for the longest, as `GET ...?wait=` does.
        let wait_seconds = self.wait.unwrap_or(0).min(MAX_WAIT_SECONDS);
        let display = display_fields(self.display)?;
        let agent = self.agent.map(|a| a.trim().to_string()).filter(|a| !a.is_empty());
        let call = ValidCall { run_id, step_index, tool, arguments, idempotency_key };
        Ok(ValidAsk { call, display, agent, wait_seconds })
    }
}

/// How the call ended, as the agent reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Ok,
    Error,
    /// The caller lost track of the call after sending it (its connection or the tool's
    /// process died): it may or may not have happened. A person settles it.
    Unknown,
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
        let outcome = self.outcome.ok_or("`outcome` is required: ok, error or unknown")?;
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

    fn ask(v: Value) -> Result<ValidAsk, String> {
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
    fn an_ask_may_wait_carry_a_description_and_name_its_agent() {
        let full = ask(json!({"run_id": "r", "step_index": 1, "tool": "t", "arguments": {"to": "a"}, "wait": 600,
            "display": [{"label": "To", "value": "a", "argument": "to"}, {"label": "N", "value": 3}],
            "agent": " mailer "}))
        .unwrap();
        assert_eq!(full.wait_seconds, MAX_WAIT_SECONDS, "a longer wait is held for the longest");
        assert_eq!(full.display.len(), 2);
        assert_eq!(full.display[1].value, "3");
        assert_eq!(full.agent.as_deref(), Some("mailer"));
        let plain = ask(json!({"run_id": "r", "step_index": 1, "tool": "t", "arguments": {}})).unwrap();
        assert_eq!((plain.wait_seconds, plain.display.len(), plain.agent), (0, 0, None));
        let err = ask(json!({"run_id": "r", "step_index": 1, "tool": "t", "arguments": {},
            "display": [{"label": " ", "value": "x"}]}))
        .unwrap_err();
        assert!(err.contains("display[0].label"), "{err}");
    }

    #[test]
    fn completions_need_an_outcome_and_a_bounded_response() {
        let done = |v: Value| serde_json::from_value::<Completion>(v).map_err(|e| e.to_string())?.validate();
        assert_eq!(done(json!({"outcome": "ok", "external_id": "msg_1"})).unwrap().outcome, Outcome::Ok);
        assert!(done(json!({"external_id": "msg_1"})).unwrap_err().contains("outcome"));
        assert!(done(json!({"outcome": "maybe"})).is_err());
        assert_eq!(
            done(json!({"outcome": "unknown", "error": "the tool's process died"})).unwrap().outcome,
            Outcome::Unknown
        );
        let big = "x".repeat(MAX_RESPONSE_BYTES);
        assert!(done(json!({"outcome": "ok", "response": {"body": big}})).unwrap_err().contains("cache less"));
        assert!(done(json!({"outcome": "ok", "verified_by": "hope"})).unwrap_err().contains("read_before_write"));
    }
}
