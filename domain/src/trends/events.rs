//! Event counts: how many escalations and approvals changed state in each bucket, kept
//! as they change so the trends page reads a window's buckets instead of counting index
//! entries (a busy month holds hundreds of thousands of escalations). Pure: storage adds
//! each change's counts in the transaction that makes it (`store::trends::count_events`).
//!
//! Like the run rollups ([`super::rollup`]), a count is kept for every bucket size the
//! page draws and for every agent as well as each agent's own, so a range and an agent
//! filter each read their own rows and never add up smaller ones.

use super::rollup::{periods, ALL_AGENTS};
use std::collections::BTreeMap;

/// A change of state the trends page counts per bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EventKind {
    EscalationOpened,
    EscalationResolved,
    ApprovalRequested,
    /// Approved (with or without changes) or denied by a person or a rule.
    ApprovalDecided,
    ApprovalExpired,
}

impl EventKind {
    pub const ALL: [EventKind; 5] = [
        EventKind::EscalationOpened,
        EventKind::EscalationResolved,
        EventKind::ApprovalRequested,
        EventKind::ApprovalDecided,
        EventKind::ApprovalExpired,
    ];

    /// The name stored in the `kind` column.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::EscalationOpened => "escalation_opened",
            EventKind::EscalationResolved => "escalation_resolved",
            EventKind::ApprovalRequested => "approval_requested",
            EventKind::ApprovalDecided => "approval_decided",
            EventKind::ApprovalExpired => "approval_expired",
        }
    }

    pub fn parse(text: &str) -> Option<EventKind> {
        EventKind::ALL.into_iter().find(|k| k.as_str() == text)
    }

    /// What an approval's final `status` counts as when it is reached: a decision (by a
    /// person or a rule), an expiry, or nothing (pending, cancelled: a cancelled request
    /// was withdrawn, not decided).
    pub fn of_approval_status(status: &str) -> Option<EventKind> {
        match status {
            "approved" | "approved_with_changes" | "denied" => Some(EventKind::ApprovalDecided),
            "expired" => Some(EventKind::ApprovalExpired),
            _ => None,
        }
    }
}

/// One count row: the events of `kind` in the bucket of `period_ms` starting at
/// `start_ms`, of agent `scope` ([`ALL_AGENTS`]: every agent's, and those of no agent).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EventKey {
    pub period_ms: i64,
    pub scope: String,
    pub kind: EventKind,
    pub start_ms: i64,
}

/// Counts to add: what a write's changes add (or take away, when an escalation moves to
/// another agent), keyed in the order storage locks the rows in.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventCounts(pub BTreeMap<EventKey, i64>);

impl EventCounts {
    /// Counts one event of `kind` at `at_ms` of `agent` (`sign` 1), or takes it away
    /// (`sign` -1), in every period, for every agent and for its own.
    pub fn add(&mut self, kind: EventKind, agent: Option<&str>, at_ms: i64, sign: i64) {
        let agent = agent.filter(|a| !a.is_empty());
        for period_ms in periods() {
            let start_ms = at_ms.div_euclid(period_ms) * period_ms;
            for scope in std::iter::once(ALL_AGENTS).chain(agent) {
                let key = EventKey { period_ms, scope: scope.to_string(), kind, start_ms };
                *self.0.entry(key).or_default() += sign;
            }
        }
    }

    /// One event, counted.
    pub fn one(kind: EventKind, agent: Option<&str>, at_ms: i64) -> EventCounts {
        let mut counts = EventCounts::default();
        counts.add(kind, agent, at_ms, 1);
        counts
    }

    /// Adds `other`'s counts to these.
    pub fn merge(&mut self, other: &EventCounts) {
        for (key, n) in &other.0 {
            *self.0.entry(key.clone()).or_default() += n;
        }
    }

    /// Without the rows that add nothing (an event added and taken away).
    pub fn without_zeros(mut self) -> EventCounts {
        self.0.retain(|_, n| *n != 0);
        self
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trends::Range;

    const HOUR: i64 = 3_600_000;

    #[test]
    fn an_event_counts_once_per_period_for_every_agent_and_its_own() {
        let at = 1_700_000_000_000 + 7 * HOUR + 123;
        let counts = EventCounts::one(EventKind::EscalationOpened, Some("billing-bot"), at);
        assert_eq!(counts.0.len(), 6, "three periods, two scopes: {counts:?}");
        for range in Range::ALL {
            let period = range.bucket_ms();
            for scope in [ALL_AGENTS, "billing-bot"] {
                let key = EventKey {
                    period_ms: period,
                    scope: scope.into(),
                    kind: EventKind::EscalationOpened,
                    start_ms: at - at.rem_euclid(period),
                };
                assert_eq!(counts.0.get(&key), Some(&1), "{key:?}");
            }
        }
    }

    #[test]
    fn an_event_of_no_agent_counts_only_for_every_agent() {
        for agent in [None, Some("")] {
            let counts = EventCounts::one(EventKind::ApprovalRequested, agent, 5 * HOUR);
            assert_eq!(counts.0.len(), 3);
            assert!(counts.0.keys().all(|k| k.scope == ALL_AGENTS));
        }
    }

    #[test]
    fn moving_an_event_between_agents_leaves_every_agent_s_count_alone() {
        let mut counts = EventCounts::default();
        counts.add(EventKind::EscalationOpened, Some("a"), 9 * HOUR, -1);
        counts.add(EventKind::EscalationOpened, Some("b"), 9 * HOUR, 1);
        let counts = counts.without_zeros();
        assert_eq!(counts.0.len(), 6);
        assert!(counts.0.iter().all(|(k, n)| (k.scope == "a" && *n == -1) || (k.scope == "b" && *n == 1)));
    }

    #[test]
    fn approval_statuses_count_as_decisions_expiries_or_nothing() {
        for status in ["approved", "approved_with_changes", "denied"] {
            assert_eq!(EventKind::of_approval_status(status), Some(EventKind::ApprovalDecided));
        }
        assert_eq!(EventKind::of_approval_status("expired"), Some(EventKind::ApprovalExpired));
        for status in ["pending", "cancelled", "anything"] {
            assert_eq!(EventKind::of_approval_status(status), None);
        }
        for kind in EventKind::ALL {
            assert_eq!(EventKind::parse(kind.as_str()), Some(kind));
        }
    }
}
