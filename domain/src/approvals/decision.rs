//! A person's decision on a request and what it does, pure: a denial is final; an
//! approval is a vote for the payload's hash, final once the request's quorum of distinct
//! people approved that hash; an edit replaces the payload and votes for the new hash,
//! and earlier votes for the old hash stop counting. Storage applies the result in one
//! transaction with the decision's audit entry.

use super::edit::Edit;
use super::ApprovalStatus;

/// An approver's decision, as checked (the edit against the tool's schema).
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    Approve,
    Deny,
    /// Approve the edited arguments (checked by `approvals::edit::check`) instead.
    ApproveWithChanges(Edit),
}

impl Decision {
    /// The status the request has once this decision is final.
    pub fn final_status(&self) -> ApprovalStatus {
        match self {
            Decision::Deny => ApprovalStatus::Denied,
            Decision::Approve => ApprovalStatus::Approved,
            Decision::ApproveWithChanges(_) => ApprovalStatus::ApprovedWithChanges,
        }
    }
}

/// What an approval vote leaves the request as: still pending with `votes` of `required`
/// approvals, or approved (with changes, when an approver edited the payload at any point).
pub fn after_vote(votes: i64, required: i64, edited: bool) -> Option<ApprovalStatus> {
    (votes >= required).then_some(if edited { ApprovalStatus::ApprovedWithChanges } else { ApprovalStatus::Approved })
}

/// Why a second approval of the same payload by the same person is refused.
pub fn already_voted(required: i64) -> String {
    format!(
        "you already approved this payload; it needs {required} distinct approvers, so another person must approve it"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_approval_is_final_once_the_quorum_of_distinct_people_approved() {
        assert_eq!(after_vote(1, 1, false), Some(ApprovalStatus::Approved));
        assert_eq!(after_vote(1, 2, false), None, "one of two");
        assert_eq!(after_vote(2, 2, true), Some(ApprovalStatus::ApprovedWithChanges));
        assert!(already_voted(2).contains("2 distinct approvers"));
        assert_eq!(Decision::Deny.final_status(), ApprovalStatus::Denied);
    }
}
