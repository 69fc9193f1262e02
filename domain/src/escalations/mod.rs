//! Escalation: a run handed to a human, who must see at once what was already executed
//! (with external ids) and what remains, so no side effect fires twice.
//!
//! Shared types here; `request` validates what agents send, `evidence` (pure) matches the
//! agent's claims of what it did against the side effects observed in the run's traces.
//! Storage is in `storage::escalations`.

use crate::vocabulary::vocabulary;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

pub mod evidence;
#[cfg(feature = "server")]
pub mod from_traces;
#[cfg(feature = "server")]
pub mod request;

/// Where the queue and the navigation stop counting escalations: past it they say
/// "10,000+", as counting every one of a large backlog takes time in proportion to it.
pub const COUNT_LIMIT: i64 = 10_000;

vocabulary! {
    /// Why the agent stopped and asked for a person.
    EscalationReason {
        InsufficientPermission = "insufficient_permission",
        ContradictoryInformation = "contradictory_information",
        BudgetExceeded = "budget_exceeded",
        LowConfidence = "low_confidence",
        ApprovalRequiredByPolicy = "approval_required_by_policy",
        /// A guarded call started and never reported: a person must say whether it
        /// happened (the execution ledger opens these).
        OutcomeUnknown = "outcome_unknown",
        Other = "other",
    }
}

impl EscalationReason {
    /// Reads a reason as people and agents write it: the canonical spelling in any case,
    /// with spaces, hyphens or underscores ("Budget exceeded", "budget-exceeded"), and the
    /// article's other wordings of the same reasons ("over budget", "permission denied").
    pub fn from_words(text: &str) -> Option<EscalationReason> {
        let words: Vec<String> = text
            .split(|c: char| c.is_whitespace() || c == '_' || c == '-' || c == '.')
            .filter(|w| !w.is_empty())
            .map(|w| w.to_lowercase())
            .collect();
        let joined = words.join("_");
        if let Some(reason) = EscalationReason::parse(&joined) {
            return Some(reason);
        }
        let phrase = words.join(" ");
        const ALIASES: &[(&str, EscalationReason)] = &[
            ("insufficient permissions", EscalationReason::InsufficientPermission),
            ("permission denied", EscalationReason::InsufficientPermission),
            ("missing permission", EscalationReason::InsufficientPermission),
            ("missing permissions", EscalationReason::InsufficientPermission),
            ("not permitted", EscalationReason::InsufficientPermission),
            ("contradictory info", EscalationReason::ContradictoryInformation),
            ("conflicting information", EscalationReason::ContradictoryInformation),
            ("contradiction", EscalationReason::ContradictoryInformation),
            ("budget", EscalationReason::BudgetExceeded),
            ("over budget", EscalationReason::BudgetExceeded),
            ("budget exhausted", EscalationReason::BudgetExceeded),
            ("out of budget", EscalationReason::BudgetExceeded),
            ("uncertain", EscalationReason::LowConfidence),
            ("not confident", EscalationReason::LowConfidence),
            ("approval required", EscalationReason::ApprovalRequiredByPolicy),
            ("requires approval", EscalationReason::ApprovalRequiredByPolicy),
            ("needs approval", EscalationReason::ApprovalRequiredByPolicy),
            ("approval required by policy", EscalationReason::ApprovalRequiredByPolicy),
        ];
        ALIASES.iter().find(|(alias, _)| *alias == phrase).map(|(_, reason)| *reason)
    }

    /// How pages show the reason.
    pub fn label(self) -> &'static str {
        match self {
            EscalationReason::InsufficientPermission => "insufficient permission",
            EscalationReason::ContradictoryInformation => "contradictory information",
            EscalationReason::BudgetExceeded => "budget exceeded",
            EscalationReason::LowConfidence => "low confidence",
            EscalationReason::ApprovalRequiredByPolicy => "approval required by policy",
            EscalationReason::OutcomeUnknown => "outcome unknown",
            EscalationReason::Other => "other",
        }
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
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DoneItem {
    pub tool: Option<String>,
    pub description: Option<String>,
    pub external_id: Option<String>,
    pub idempotency_key: Option<String>,
    pub at: Option<String>,
}

/// One thing left to do: a checklist item the human ticks.
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RemainingItem {
    pub description: String,
    #[serde(default)]
    pub done: bool,
    #[serde(default)]
    pub done_by: Option<String>,
    /// The guarded call this item asks a person to settle (set by Flightdeck, never by an
    /// agent): settling the call ticks it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
}

#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
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
    /// When the escalation was stored.
    pub opened_at: DateTime<Utc>,
    /// When the run needed a person: the time its traces' `escalation` event (or the span
    /// or run reporting it) carried, or when the API filed it. Waiting time counts from
    /// here.
    pub needed_at: DateTime<Utc>,
    pub claimed_by: Option<String>,
    pub claimed_at: Option<DateTime<Utc>>,
    pub resolved_by: Option<String>,
    pub resolved_at: Option<DateTime<Utc>>,
    pub outcome: Option<Resolution>,
    pub resolution_note: Option<String>,
    /// For `handed_back`: what the agent should do next.
    pub instructions: Option<String>,
}

/// Whose claim the queue shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimFilter {
    Unclaimed,
    Claimed,
    /// Claimed by this user.
    By(String),
}

/// The queue's filters, as checked from its query string (`?reason=&agent=&claim=&age=`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueFilter {
    pub reason: Option<EscalationReason>,
    /// An agent's name, exactly.
    pub agent: Option<String>,
    /// Open escalations only.
    pub claim: Option<ClaimFilter>,
    /// Open escalations waiting longer than this, in seconds.
    pub waiting_longer_than_s: Option<i64>,
}

/// The waiting times the queue filters by, as the query string and the page name them.
pub const AGES: [(&str, i64, &str); 4] = [
    ("15m", 15 * 60, "over 15 min"),
    ("1h", 3600, "over 1 hour"),
    ("4h", 4 * 3600, "over 4 hours"),
    ("1d", 86_400, "over 1 day"),
];

impl QueueFilter {
    /// Reads the query string's values (blank is "any"); `me` is who `claim=mine` means.
    /// The error names the parameter that is wrong.
    pub fn parse(
        reason: Option<&str>,
        agent: Option<&str>,
        claim: Option<&str>,
        age: Option<&str>,
        me: &str,
    ) -> Result<QueueFilter, String> {
        let given = |v: Option<&str>| v.map(str::trim).filter(|v| !v.is_empty()).map(str::to_string);
        let reason = match given(reason) {
            Some(r) => Some(EscalationReason::parse(&r).ok_or_else(|| {
                let all: Vec<&str> = EscalationReason::ALL.iter().map(|r| r.as_str()).collect();
                format!("unknown reason `{r}` (expected {})", all.join(", "))
            })?),
            None => None,
        };
        let claim = match given(claim).as_deref() {
            None => None,
            Some("unclaimed") => Some(ClaimFilter::Unclaimed),
            Some("claimed") => Some(ClaimFilter::Claimed),
            Some("mine") => Some(ClaimFilter::By(me.to_string())),
            Some(other) => return Err(format!("unknown claim `{other}` (expected unclaimed, claimed or mine)")),
        };
        let waiting_longer_than_s = match given(age) {
            Some(a) => Some(
                AGES.iter()
                    .find(|(key, _, _)| *key == a)
                    .map(|(_, s, _)| *s)
                    .ok_or_else(|| format!("unknown age `{a}` (expected {})", AGES.map(|(k, _, _)| k).join(", ")))?,
            ),
            None => None,
        };
        Ok(QueueFilter { reason, agent: given(agent), claim, waiting_longer_than_s })
    }

    pub fn is_empty(&self) -> bool {
        *self == QueueFilter::default()
    }
}

/// One entry of an escalation's timeline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimelineEntry {
    pub at: DateTime<Utc>,
    pub actor: Option<String>,
    pub kind: String,
    pub detail: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_filters_read_the_query_string_or_name_what_is_wrong() {
        let f =
            QueueFilter::parse(Some("budget_exceeded"), Some(" billing "), Some("mine"), Some("1h"), "olga").unwrap();
        assert_eq!(f.reason, Some(EscalationReason::BudgetExceeded));
        assert_eq!(f.agent.as_deref(), Some("billing"));
        assert_eq!(f.claim, Some(ClaimFilter::By("olga".into())));
        assert_eq!(f.waiting_longer_than_s, Some(3600));
        assert!(QueueFilter::parse(Some(""), None, Some(" "), None, "olga").unwrap().is_empty(), "blank is any");
        assert!(QueueFilter::parse(Some("bored"), None, None, None, "o")
            .unwrap_err()
            .contains("unknown reason `bored`"));
        assert!(QueueFilter::parse(None, None, Some("yours"), None, "o").unwrap_err().contains("unknown claim"));
        assert!(QueueFilter::parse(None, None, None, Some("2h"), "o")
            .unwrap_err()
            .contains("expected 15m, 1h, 4h, 1d"));
    }

    #[test]
    fn reasons_in_the_articles_words_map_to_the_canonical_one() {
        for text in ["budget exceeded", "Budget Exceeded", "BUDGET_EXCEEDED", "budget-exceeded", " over budget "] {
            assert_eq!(EscalationReason::from_words(text), Some(EscalationReason::BudgetExceeded), "{text}");
        }
        assert_eq!(EscalationReason::from_words("Low confidence"), Some(EscalationReason::LowConfidence));
        assert_eq!(
            EscalationReason::from_words("insufficient permission"),
            Some(EscalationReason::InsufficientPermission)
        );
        assert_eq!(
            EscalationReason::from_words("Approval required by policy"),
            Some(EscalationReason::ApprovalRequiredByPolicy)
        );
        assert_eq!(EscalationReason::from_words("the moon is full"), None);
        assert_eq!(EscalationReason::from_words(""), None);
    }
}

impl Escalation {
    /// Why an action on this escalation by `user` is refused, when it is: it is resolved,
    /// or someone else holds the claim.
    pub fn refusal(&self, user: &str) -> Option<String> {
        if !self.open {
            return Some(format!(
                "this escalation was resolved ({}) by {}",
                self.outcome.map(|o| o.as_str()).unwrap_or("resolved"),
                self.resolved_by.as_deref().unwrap_or("someone")
            ));
        }
        match &self.claimed_by {
            Some(holder) if holder != user => Some(format!(
                "{holder} has claimed this escalation since {}; ask them to release it",
                self.claimed_at.map(|t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string()).unwrap_or_default()
            )),
            _ => None,
        }
    }
}
