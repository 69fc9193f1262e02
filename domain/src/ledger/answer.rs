//! What a guarded call is answered, from its ledger entry (if any), the state of the
//! approval it waits for, and the tool's policy. Pure: storage applies the result in one
//! transaction, under a lock on the entry, so two instances never both answer `proceed`.

use super::{Answer, EntryState};
use crate::approvals::ApprovalStatus;

/// The ledger facts the rule reads.
#[derive(Debug, Clone, PartialEq)]
pub struct EntryFacts {
    pub state: EntryState,
    /// When the current attempt started (ms), or when the entry was last settled.
    pub started_at: i64,
    pub completed_at: Option<i64>,
    /// The approval this call waits for or was approved by.
    pub approval: Option<ApprovalStatus>,
}

/// The tool policy's say over guarded calls.
#[derive(Debug, Clone, PartialEq)]
pub struct CallRule {
    pub requires_approval: bool,
    /// A succeeded entry answers `already_done` for this long (ms) after it completed.
    pub window_ms: i64,
    /// A started attempt with no `complete` for this long has an unknown outcome.
    pub timeout_ms: i64,
}

/// Defaults: the article's 24-hour window; five minutes for a tool call to report back.
pub const DEFAULT_WINDOW_SECONDS: i64 = 24 * 3600;
pub const DEFAULT_TIMEOUT_SECONDS: i64 = 300;

impl Default for CallRule {
    fn default() -> Self {
        CallRule {
            requires_approval: false,
            window_ms: DEFAULT_WINDOW_SECONDS * 1000,
            timeout_ms: DEFAULT_TIMEOUT_SECONDS * 1000,
        }
    }
}

/// What storage does with the entry, and what the agent is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Record a new attempt as `started` (a new entry, or the next attempt of one).
    Start,
    /// File an approval request for exactly this call and wait for it.
    AskApproval,
    /// Change nothing but, for `AlreadyDone`, count a dedupe; for `OutcomeUnknown`,
    /// open the escalation if the entry has none.
    Tell(Answer),
    /// Record the denial.
    Deny,
}

/// The rule. `entry` is None for a key never seen.
pub fn next_step(entry: Option<&EntryFacts>, rule: &CallRule, now: i64) -> Step {
    let Some(e) = entry else {
        return if rule.requires_approval { Step::AskApproval } else { Step::Start };
    };
    match e.state {
        EntryState::Succeeded => {
            let done_at = e.completed_at.unwrap_or(e.started_at);
            if now - done_at <= rule.window_ms {
                Step::Tell(Answer::AlreadyDone)
            } else if rule.requires_approval {
                Step::AskApproval
            } else {
                Step::Start
            }
        }
        // A failed attempt did nothing the agent must not repeat; a new approval is needed
        // if the tool needs one (the last one was used).
        EntryState::Failed | EntryState::NotDone => {
            if rule.requires_approval {
                Step::AskApproval
            } else {
                Step::Start
            }
        }
        EntryState::Started => {
            if now - e.started_at > rule.timeout_ms {
                Step::Tell(Answer::OutcomeUnknown)
            } else {
                Step::Tell(Answer::InProgress)
            }
        }
        EntryState::Unknown => Step::Tell(Answer::OutcomeUnknown),
        EntryState::AwaitingApproval => match e.approval {
            Some(ApprovalStatus::Approved | ApprovalStatus::ApprovedWithChanges) => Step::Start,
            Some(ApprovalStatus::Denied | ApprovalStatus::Expired | ApprovalStatus::Cancelled) => Step::Deny,
            _ => Step::Tell(Answer::ApprovalRequired),
        },
        EntryState::Denied => Step::Tell(Answer::Denied),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(state: EntryState, started_at: i64) -> EntryFacts {
        EntryFacts { state, started_at, completed_at: Some(started_at), approval: None }
    }

    #[test]
    fn a_new_key_proceeds_or_asks_for_approval() {
        assert_eq!(next_step(None, &CallRule::default(), 0), Step::Start);
        let gated = CallRule { requires_approval: true, ..CallRule::default() };
        assert_eq!(next_step(None, &gated, 0), Step::AskApproval);
    }

    #[test]
    fn a_success_inside_the_window_is_already_done_and_outside_it_runs_again() {
        let rule = CallRule::default();
        let done = entry(EntryState::Succeeded, 1_000);
        assert_eq!(next_step(Some(&done), &rule, 1_000 + rule.window_ms), Step::Tell(Answer::AlreadyDone));
        assert_eq!(next_step(Some(&done), &rule, 1_001 + rule.window_ms), Step::Start);
    }

    #[test]
    fn a_started_attempt_is_in_progress_until_its_timeout_then_unknown() {
        let rule = CallRule::default();
        let running = entry(EntryState::Started, 0);
        assert_eq!(next_step(Some(&running), &rule, rule.timeout_ms), Step::Tell(Answer::InProgress));
        assert_eq!(next_step(Some(&running), &rule, rule.timeout_ms + 1), Step::Tell(Answer::OutcomeUnknown));
        let unknown = entry(EntryState::Unknown, 0);
        assert_eq!(next_step(Some(&unknown), &rule, 1), Step::Tell(Answer::OutcomeUnknown));
    }

    #[test]
    fn failures_and_settled_not_done_run_again_with_a_new_approval_when_needed() {
        let failed = entry(EntryState::Failed, 0);
        assert_eq!(next_step(Some(&failed), &CallRule::default(), 1), Step::Start);
        let gated = CallRule { requires_approval: true, ..CallRule::default() };
        assert_eq!(next_step(Some(&entry(EntryState::NotDone, 0)), &gated, 1), Step::AskApproval);
    }

    #[test]
    fn an_approval_decides_a_waiting_call() {
        let rule = CallRule { requires_approval: true, ..CallRule::default() };
        let mut waiting = entry(EntryState::AwaitingApproval, 0);
        waiting.approval = Some(ApprovalStatus::Pending);
        assert_eq!(next_step(Some(&waiting), &rule, 1), Step::Tell(Answer::ApprovalRequired));
        waiting.approval = Some(ApprovalStatus::Approved);
        assert_eq!(next_step(Some(&waiting), &rule, 1), Step::Start);
        for refused in [ApprovalStatus::Denied, ApprovalStatus::Expired, ApprovalStatus::Cancelled] {
            waiting.approval = Some(refused);
            assert_eq!(next_step(Some(&waiting), &rule, 1), Step::Deny);
        }
        assert_eq!(next_step(Some(&entry(EntryState::Denied, 0)), &rule, 1), Step::Tell(Answer::Denied));
    }
}
