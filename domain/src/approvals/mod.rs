//! Per-call approval: the request an agent files before running a tool that needs one, the
//! decision an approver takes on its exact payload, and the violations ingest records when
//! a tool ran without a valid approval.
//!
//! The types here are shared by server and browser. The rules live in `payload` (canonical
//! form and hashes, request validation), `check` (an executed tool call against the
//! approval it names) and `hub` (waking agents that wait for a decision); storage is in
//! `storage::approvals`.

use crate::access::Role;
use crate::canonical::SideEffect;
use crate::vocabulary::vocabulary;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

#[cfg(feature = "server")]
pub mod check;
#[cfg(feature = "server")]
pub mod decision;
pub mod display;
#[cfg(feature = "server")]
pub mod edit;
#[cfg(feature = "server")]
pub mod notification;
#[cfg(feature = "server")]
pub mod payload;
pub mod rules;
#[cfg(feature = "server")]
pub mod slack;

vocabulary! {
    /// Where a request stands. Everything but `Pending` is final.
    ApprovalStatus {
        Pending = "pending",
        Approved = "approved",
        /// Approved after an approver edited the arguments: the approved payload (and its
        /// hash) is the edited one, which the agent must run.
        ApprovedWithChanges = "approved_with_changes",
        Denied = "denied",
        Expired = "expired",
        Cancelled = "cancelled",
    }
}

impl ApprovalStatus {
    pub fn is_final(self) -> bool {
        self != ApprovalStatus::Pending
    }

    /// Whether the call may run (as asked, or as edited).
    pub fn is_approved(self) -> bool {
        matches!(self, ApprovalStatus::Approved | ApprovalStatus::ApprovedWithChanges)
    }
}

vocabulary! {
    /// Why an executed tool call broke the approval rules.
    ViolationKind {
        /// The tool's policy requires approval and the call named none.
        NoApproval = "no_approval",
        /// The call named an approval id that does not exist.
        UnknownApproval = "unknown_approval",
        /// The named approval was denied, expired, cancelled or still pending.
        NotApproved = "not_approved",
        /// The named approval had already been used by another execution.
        Reused = "reused",
        /// The executed tool or arguments differ from what was approved.
        PayloadMismatch = "payload_mismatch",
        /// More successful executions in the run than the tool's policy allows.
        RunLimitExceeded = "run_limit_exceeded",
        /// The approval was requested for another run.
        WrongRun = "wrong_run",
        /// The approval was requested for another step of the run.
        WrongStep = "wrong_step",
        /// The call started after the approval's use-by time (the policy's window after
        /// the decision).
        StaleApproval = "stale_approval",
        /// The call was reported by another API token than the one that requested the
        /// approval.
        WrongToken = "wrong_token",
    }
}

impl ViolationKind {
    pub fn describe(self) -> &'static str {
        match self {
            ViolationKind::NoApproval => "ran without an approval although its policy requires one",
            ViolationKind::UnknownApproval => "named an approval that does not exist",
            ViolationKind::NotApproved => "ran under an approval that was not approved",
            ViolationKind::Reused => "reused an approval another execution had already used",
            ViolationKind::PayloadMismatch => "ran with a tool or arguments different from what was approved",
            ViolationKind::RunLimitExceeded => "ran more often in this run than its policy allows",
            ViolationKind::WrongRun => "ran under an approval requested for another run",
            ViolationKind::WrongStep => "ran under an approval requested for another step",
            ViolationKind::StaleApproval => "ran after its approval's window to be used had closed",
            ViolationKind::WrongToken => "was reported by another agent token than the one that asked for the approval",
        }
    }
}

/// One labelled field of the agent's own description of a call (recipient, subject,
/// body). It is not what runs: the page holds it against the arguments (see `display`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DisplayField {
    pub label: String,
    /// Verbatim text; JSON values other than strings are pretty-printed.
    pub value: String,
    /// The argument this field describes (`to`, `message.to` or `/message/to`), when the
    /// agent said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub argument: Option<String>,
}

/// An approval request as approvers and agents see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Approval {
    pub id: String,
    pub run_id: String,
    pub step_index: Option<i64>,
    pub tool: String,
    /// The arguments in canonical JSON (sorted keys, no whitespace): exactly what was hashed.
    pub arguments: String,
    pub display: Vec<DisplayField>,
    pub idempotency_key: Option<String>,
    /// SHA-256 over the canonical JSON of `{"arguments": ..., "tool": ...}`.
    pub payload_sha256: String,
    pub side_effect: SideEffect,
    pub required_role: Role,
    pub agent: Option<String>,
    /// The API token that filed the request.
    pub requested_by: String,
    pub status: ApprovalStatus,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    pub decided_by: Option<String>,
    pub decided_at: Option<DateTime<Utc>>,
    pub reason: Option<String>,
    /// The tool span (`trace_id:span_id`) that executed under this approval.
    pub used_by_span: Option<String>,
    /// An approved request must be used (its call must start) by then.
    pub use_by: Option<DateTime<Utc>>,
    /// When an approver edited the arguments: what the agent asked for (canonical JSON)
    /// and its hash; `arguments` and `payload_sha256` are then the edited payload.
    #[serde(default)]
    pub original_arguments: Option<String>,
    #[serde(default)]
    pub original_payload_sha256: Option<String>,
    /// The readable diff from the original arguments to the approved ones.
    #[serde(default)]
    pub changes: Option<String>,
    /// The approver's message back to the agent (with a denial or an edit).
    #[serde(default)]
    pub respond: Option<String>,
    /// How many distinct people must approve the current payload.
    #[serde(default = "one")]
    pub required_approvals: i64,
    /// The people who approved the current payload so far, in order.
    #[serde(default)]
    pub approved_by: Vec<String>,
    /// Every change approvers made to the arguments before approving, oldest first: what
    /// the agent asked for is `original_arguments`, what will run is `arguments`.
    #[serde(default)]
    pub edits: Vec<ApprovalEdit>,
    /// What happens when nobody decides in time: `deny` or `escalate`.
    #[serde(default)]
    pub on_expiry: OnExpiry,
    /// The escalation opened when it expired under `escalate`.
    #[serde(default)]
    pub escalation_id: Option<String>,
    /// The rule that decided the request or set what it needs.
    #[serde(default)]
    pub rule_name: Option<String>,
    /// The Flightdeck user the run acts for (its `enduser.id`), who may not approve it.
    #[serde(default)]
    pub requester_user: Option<String>,
}

/// One approver's change to a request's arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovalEdit {
    pub username: String,
    pub at: DateTime<Utc>,
    /// The readable diff from the arguments before this change.
    pub changes: String,
    /// The arguments after it (canonical JSON) and their payload hash.
    pub arguments: String,
    pub payload_sha256: String,
}

fn one() -> i64 {
    1
}

vocabulary! {
    /// What a person chose on a request, as forms and buttons send it.
    Choice {
        Approve = "approve",
        Deny = "deny",
    }
}

vocabulary! {
    /// What a tool policy does with a request nobody decided in time.
    OnExpiry {
        /// The request expires; the agent is told, as for a denial.
        Deny = "deny",
        /// The request expires and an escalation is opened for a person to take over.
        Escalate = "escalate",
    }
}

impl Default for OnExpiry {
    fn default() -> Self {
        OnExpiry::Deny
    }
}

/// A tool call that ran without a valid approval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Violation {
    pub trace_id: String,
    pub span_id: String,
    pub kind: ViolationKind,
    pub run_id: String,
    pub tool: String,
    pub approval_id: Option<String>,
    pub detail: String,
    pub at: DateTime<Utc>,
}

impl Approval {
    /// The audit log's line for a decision on this request, as `status` with `reason`.
    pub fn decision_detail(&self, status: ApprovalStatus, reason: Option<&str>) -> String {
        format!(
            "{} {} in run {} (payload sha256 {}){}",
            self.tool,
            status,
            self.run_id,
            self.payload_sha256,
            reason.map(|r| format!("; reason: {r}")).unwrap_or_default()
        )
    }

    /// Why a decision on this request was not recorded, for the person who tried: the
    /// payload they saw is not the bound one, it expired, or someone decided first.
    pub fn refusal(&self, shown_sha256: &str, now_ms: i64) -> String {
        let current = self;
        let when = |t: Option<chrono::DateTime<chrono::Utc>>| {
            t.map(|t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string()).unwrap_or_else(|| "earlier".into())
        };
        match current.status {
            ApprovalStatus::Pending if current.payload_sha256 != shown_sha256 => format!(
                "the payload you were shown (sha256 {shown_sha256}) is not the one this request is bound to ({}); \
                 reload the request and read it again",
                current.payload_sha256
            ),
            ApprovalStatus::Pending if current.expires_at.timestamp_millis() <= now_ms => {
                format!("this request expired at {}", when(Some(current.expires_at)))
            }
            ApprovalStatus::Pending => "the request changed while deciding; reload it".into(),
            ApprovalStatus::Expired => format!("this request expired at {}", when(current.decided_at)),
            ApprovalStatus::Cancelled => format!("the agent cancelled this request at {}", when(current.decided_at)),
            decided => format!(
                "already {decided} by {} at {}",
                current.decided_by.as_deref().unwrap_or("someone"),
                when(current.decided_at)
            ),
        }
    }
}
