//! What an agent sends to `POST /api/v1/escalations`, checked field by field: the error
//! names the field and says what was wrong.

use super::{DoneItem, EscalationReason, RemainingItem};
use serde::Deserialize;
use serde_json::Value;

pub const MAX_ITEMS: usize = 200;
pub const MAX_TEXT: usize = 10_000;
const MAX_ID: usize = 200;

#[derive(utoipa::ToSchema, Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EscalationRequest {
    pub run_id: Option<String>,
    pub reason: Option<String>,
    /// The text for `other` (also accepted for any reason).
    pub reason_text: Option<String>,
    #[serde(default)]
    pub what_was_done: Vec<DoneInput>,
    #[serde(default)]
    pub what_remains: Vec<RemainingInput>,
    pub blocking_fact: Option<String>,
    pub idempotency_key: Option<String>,
    pub agent: Option<String>,
}

#[derive(utoipa::ToSchema, Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DoneInput {
    pub tool: Option<String>,
    pub description: Option<String>,
    pub external_id: Option<String>,
    pub idempotency_key: Option<String>,
    pub at: Option<String>,
}

/// A remaining item: a plain string or `{"description": "..."}`.
#[derive(utoipa::ToSchema, Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum RemainingInput {
    Text(String),
    Item { description: String },
}

/// A request that passed validation.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidEscalation {
    pub run_id: String,
    pub reason: EscalationReason,
    pub reason_text: Option<String>,
    pub what_was_done: Vec<DoneItem>,
    pub what_remains: Vec<RemainingItem>,
    pub blocking_fact: Option<String>,
    pub idempotency_key: Option<String>,
    pub agent: Option<String>,
    /// SHA-256 of the canonical request body, to tell a repeat from a different request.
    pub body_sha256: String,
    /// How the timeline's "opened" entry describes who filed it.
    pub opened_by: OpenedBy,
}

/// Who filed an escalation through the API, in the timeline's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenedBy {
    /// The agent, through `POST /api/v1/escalations`.
    Agent,
    /// The execution ledger, for a guarded call of unknown outcome.
    Ledger,
    /// An approval request expired undecided and its policy says `escalate`.
    ApprovalExpiry,
}

impl OpenedBy {
    pub fn describe(self) -> &'static str {
        match self {
            OpenedBy::Agent => "filed by the agent through the API",
            OpenedBy::Ledger => "opened by the execution ledger: a guarded call never reported its outcome",
            OpenedBy::ApprovalExpiry => {
                "opened when an approval request expired undecided and its policy said escalate"
            }
        }
    }
}

fn text(field: &str, value: Option<String>, max: usize) -> Result<Option<String>, String> {
    match value.map(|v| v.trim().to_string()).filter(|v| !v.is_empty()) {
        Some(v) if v.len() > max => Err(format!("`{field}` may have at most {max} characters, got {}", v.len())),
        other => Ok(other),
    }
}

impl EscalationRequest {
    pub fn validate(self, raw: &Value) -> Result<ValidEscalation, String> {
        let run_id = text("run_id", self.run_id, MAX_ID)?.ok_or("`run_id` is required")?;
        let reason_raw = text("reason", self.reason, MAX_ID)?.ok_or(
            "`reason` is required (insufficient_permission, contradictory_information, budget_exceeded, \
             low_confidence, approval_required_by_policy, or other with `reason_text`)",
        )?;
        let reason = EscalationReason::from_words(&reason_raw).ok_or_else(|| {
            format!(
                "unknown `reason` `{reason_raw}` (expected insufficient_permission, contradictory_information, \
                 budget_exceeded, low_confidence, approval_required_by_policy or other)"
            )
        })?;
        let reason_text = text("reason_text", self.reason_text, MAX_TEXT)?;
        if reason == EscalationReason::Other && reason_text.is_none() {
            return Err("`reason` `other` needs `reason_text` saying what happened".into());
        }
        for (field, n) in [("what_was_done", self.what_was_done.len()), ("what_remains", self.what_remains.len())] {
            if n > MAX_ITEMS {
                return Err(format!("`{field}` may have at most {MAX_ITEMS} items, got {n}"));
            }
        }
        let mut what_was_done = Vec::with_capacity(self.what_was_done.len());
        for (i, d) in self.what_was_done.into_iter().enumerate() {
            let f = |name: &str| format!("what_was_done[{i}].{name}");
            let item = DoneItem {
                tool: text(&f("tool"), d.tool, MAX_ID)?,
                description: text(&f("description"), d.description, MAX_TEXT)?,
                external_id: text(&f("external_id"), d.external_id, MAX_ID)?,
                idempotency_key: text(&f("idempotency_key"), d.idempotency_key, MAX_ID)?,
                at: text(&f("at"), d.at, MAX_ID)?,
            };
            if item.tool.is_none() && item.description.is_none() {
                return Err(format!("`what_was_done[{i}]` needs a `tool` or a `description`"));
            }
            what_was_done.push(item);
        }
        let mut what_remains = Vec::with_capacity(self.what_remains.len());
        for (i, r) in self.what_remains.into_iter().enumerate() {
            let description = match r {
                RemainingInput::Text(t) | RemainingInput::Item { description: t } => t,
            };
            let description = text(&format!("what_remains[{i}]"), Some(description), MAX_TEXT)?
                .ok_or_else(|| format!("`what_remains[{i}]` must not be empty"))?;
            what_remains.push(RemainingItem { description, done: false, done_by: None, call_id: None });
        }
        Ok(ValidEscalation {
            run_id,
            reason,
            reason_text,
            what_was_done,
            what_remains,
            blocking_fact: text("blocking_fact", self.blocking_fact, MAX_TEXT)?,
            idempotency_key: text("idempotency_key", self.idempotency_key, MAX_ID)?,
            agent: text("agent", self.agent, MAX_ID)?,
            body_sha256: crate::approvals::payload::arguments_sha256(raw),
            opened_by: OpenedBy::Agent,
        })
    }
}

impl ValidEscalation {
    /// Cuts credentials out of every text an agent wrote, before it is stored.
    pub fn redact(&mut self, redactor: &crate::redact::Redactor) {
        let texts = [&mut self.reason_text, &mut self.blocking_fact, &mut self.agent].into_iter().flatten();
        let done = self.what_was_done.iter_mut().flat_map(|d| {
            [&mut d.tool, &mut d.description, &mut d.external_id, &mut d.idempotency_key].into_iter().flatten()
        });
        let remaining = self.what_remains.iter_mut().map(|r| &mut r.description);
        for text in texts.chain(done).chain(remaining) {
            redactor.redact_string(text);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(body: Value) -> Result<ValidEscalation, String> {
        serde_json::from_value::<EscalationRequest>(body.clone()).map_err(|e| e.to_string())?.validate(&body)
    }

    #[test]
    fn a_full_request_is_accepted() {
        let v = check(json!({
            "run_id": "r1", "reason": "insufficient_permission", "blocking_fact": "no refund rights",
            "what_was_done": [{"tool": "send_email", "external_id": "msg_1", "idempotency_key": "k1"}],
            "what_remains": ["refund the order", {"description": "tell the customer"}]
        }))
        .unwrap();
        assert_eq!(v.what_remains[1].description, "tell the customer");
        assert_eq!(v.reason, EscalationReason::InsufficientPermission);
    }

    #[test]
    fn credentials_in_any_text_are_redacted() {
        let mut v = check(json!({
            "run_id": "r1", "reason": "other", "reason_text": "login failed with password=hunter2hunter2",
            "blocking_fact": "the token ghp_0123456789abcdefghijABCDEFGHIJ012345 expired",
            "what_was_done": [{"description": "called https://admin:s3cret@api.example.com/x"}],
            "what_remains": ["rotate sk_live_4eC39HqLyjWDarjtT1zdp7dc"]
        }))
        .unwrap();
        v.redact(&crate::redact::Redactor::default());
        let all = format!("{v:?}");
        for leaked in ["hunter2", "ghp_0123", "s3cret", "sk_live_4eC3"] {
            assert!(!all.contains(leaked), "{leaked} in {all}");
        }
        assert_eq!(v.what_remains[0].description, "rotate [REDACTED]");
    }

    #[test]
    fn every_field_problem_is_named() {
        assert!(check(json!({"reason": "low_confidence"})).unwrap_err().contains("`run_id` is required"));
        assert!(check(json!({"run_id": "r"})).unwrap_err().contains("`reason` is required"));
        assert!(check(json!({"run_id": "r", "reason": "bored"})).unwrap_err().contains("unknown `reason` `bored`"));
        assert!(check(json!({"run_id": "r", "reason": "other"})).unwrap_err().contains("reason_text"));
        assert!(check(json!({"run_id": "r", "reason": "low_confidence", "what_was_done": [{}]}))
            .unwrap_err()
            .contains("`what_was_done[0]` needs"));
        assert!(check(json!({"run_id": "r", "reason": "low_confidence", "what_remains": [" "]}))
            .unwrap_err()
            .contains("`what_remains[0]` must not be empty"));
        let many: Vec<Value> = (0..201).map(|i| json!(format!("step {i}"))).collect();
        assert!(check(json!({"run_id": "r", "reason": "low_confidence", "what_remains": many}))
            .unwrap_err()
            .contains("at most 200 items"));
        assert!(check(json!({"run_id": "r", "reason": "low_confidence", "mood": "sad"}))
            .unwrap_err()
            .contains("unknown field"));
    }
}
