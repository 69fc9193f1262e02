//! Escalation: a run handed to a human, who must see at once what was already executed
//! (with external ids) and what remains, so no side effect fires twice.
//!
//! Shared types here; `request` validates what agents send, `evidence` (pure) matches the
//! agent's claims of what it did against the side effects observed in the run's traces.
//! Storage is in `storage::escalations`.

use crate::canonical::vocabulary;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

pub mod evidence;
#[cfg(feature = "ssr")]
pub mod request;

vocabulary! {
    /// Why the agent stopped and asked for a person.
    EscalationReason {
        InsufficientPermission = "insufficient_permission",
        ContradictoryInformation = "contradictory_information",
        BudgetExceeded = "budget_exceeded",
        LowConfidence = "low_confidence",
        ApprovalRequiredByPolicy = "approval_required_by_policy",
        Other = "other",
    }
}

vocabulary! {
    /// How a person closed an escalation.
    Resolution {
        /// The person finished the task.
        CompletedByHuman = "completed_by_human",
        /// The agent may continue, following the instructions.
        HandedBack = "handed_back",
        /// Nobody will finish it.
        Abandoned = "abandoned",
    }
}

/// One thing the agent says it already did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DoneItem {
    pub tool: Option<String>,
    pub description: Option<String>,
    pub external_id: Option<String>,
    pub idempotency_key: Option<String>,
    pub at: Option<String>,
}

/// One thing left to do: a checklist item the human ticks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RemainingItem {
    pub description: String,
    #[serde(default)]
    pub done: bool,
    #[serde(default)]
    pub done_by: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Escalation {
    pub id: String,
    pub run_id: String,
    pub reason: EscalationReason,
    /// The text that goes with `other` (or an unrecognised reason from a trace).
    pub reason_text: Option<String>,
    pub blocking_fact: Option<String>,
    pub what_was_done: Vec<DoneItem>,
    pub what_remains: Vec<RemainingItem>,
    pub from_api: bool,
    pub from_trace: bool,
    pub agent: Option<String>,
    pub open: bool,
    pub opened_at: DateTime<Utc>,
    pub claimed_by: Option<String>,
    pub claimed_at: Option<DateTime<Utc>>,
    pub resolved_by: Option<String>,
    pub resolved_at: Option<DateTime<Utc>>,
    pub outcome: Option<Resolution>,
    pub resolution_note: Option<String>,
    /// For `handed_back`: what the agent should do next.
    pub instructions: Option<String>,
}

/// One entry of an escalation's timeline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimelineEntry {
    pub at: DateTime<Utc>,
    pub actor: Option<String>,
    pub kind: String,
    pub detail: Option<String>,
}
