//! The execution ledger: before a tool with a side effect runs, the agent asks Flightdeck
//! (`POST /api/v1/calls`) and is told whether to go ahead; after it ran, it reports the
//! outcome. A retried run, a resumed run or a person taking over then finds what was
//! already done instead of doing it again (the article's section on retryable tool
//! calls). One entry per idempotency key.
//!
//! The rules are here and pure: `key` (the derived key and the natural key), `answer`
//! (what an ask is answered, from the entry and the policy), `request` (the ask and the
//! report, checked) and `rules` (a tool policy read into the two rules). Storage is `storage::ledger`; the API `server::api::calls`.

use crate::vocabulary::vocabulary;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

#[cfg(feature = "server")]
pub mod answer;
#[cfg(feature = "server")]
pub mod key;
#[cfg(feature = "server")]
pub mod request;
#[cfg(feature = "server")]
pub mod rules;

vocabulary! {
    /// Where an entry stands.
    EntryState {
        /// The tool needs a person's approval for this exact call; none given yet.
        AwaitingApproval = "awaiting_approval",
        /// Told `proceed`; the outcome is not reported yet.
        Started = "started",
        Succeeded = "succeeded",
        Failed = "failed",
        /// Started and never reported within the tool's timeout: it may or may not have
        /// happened. A person settles it.
        Unknown = "unknown",
        /// A person settled an unknown outcome as "it did not happen".
        NotDone = "not_done",
        /// The approval was refused, expired or was cancelled.
        Denied = "denied",
    }
}

vocabulary! {
    /// What an agent is told when it asks before a call.
    Answer {
        /// Run the tool now, then report with `complete`.
        Proceed = "proceed",
        /// It succeeded already: here is its external id and response. Do not run it.
        AlreadyDone = "already_done",
        /// Another attempt holds the key and may still finish; wait.
        InProgress = "in_progress",
        /// An attempt started and never reported: retrying may duplicate, not retrying may
        /// lose. A person decides; wait.
        OutcomeUnknown = "outcome_unknown",
        /// A person must approve exactly this call first; wait.
        ApprovalRequired = "approval_required",
        /// Refused: do not run it.
        Denied = "denied",
        /// Only from a read (`GET /api/v1/calls/{id}`), which never changes the ledger:
        /// an ask now would start an attempt (after a failure, a settled "it did not
        /// happen", an approval granted and not yet used). Ask (`POST /api/v1/calls`) to
        /// be told `proceed`.
        AskAgain = "ask_again",
    }
}

/// One ledger entry, as the API and the pages show it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct LedgerEntry {
    pub id: String,
    pub idempotency_key: String,
    /// Plant this in what the call creates (a title suffix, a label), so that
    /// read-before-write can find it.
    pub natural_key: String,
    pub run_id: String,
    pub step_index: i64,
    pub tool: String,
    pub arguments: serde_json::Value,
    pub state: EntryState,
    pub attempts: i64,
    /// Asks answered `already_done`.
    pub deduped: i64,
    pub external_id: Option<String>,
    pub response: Option<serde_json::Value>,
    pub error: Option<String>,
    pub verified_by: Option<String>,
    pub approval_id: Option<String>,
    pub escalation_id: Option<String>,
    pub settled_by: Option<String>,
    pub created_at: DateTime<Utc>,
    pub started_at: DateTime<Utc>,
    pub completed_at: Option<DateTime<Utc>>,
}
