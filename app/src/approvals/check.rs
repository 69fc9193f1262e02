//! The rule ingest applies to every executed tool call: if its policy requires approval,
//! or it names an approval, that approval must exist, be approved, be used by this call
//! only, and name the same tool and arguments. Pure: storage fetches the facts and records
//! what this returns.

use super::{ApprovalStatus, ViolationKind};

/// What ingest knows about one executed tool call.
#[derive(Debug, Clone)]
pub struct Execution<'a> {
    /// `trace_id:span_id`, the id an approval records as its one use.
    pub span_key: String,
    pub tool: &'a str,
    pub approval_id: Option<&'a str>,
    pub args_sha256: Option<&'a str>,
    pub requires_approval: bool,
}

/// What storage knows about the approval an execution names.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ApprovalFacts {
    pub id: String,
    pub tool: String,
    pub arguments_sha256: String,
    pub status: String,
    pub used_by_span: Option<String>,
}

/// Whether ingest must look at this call at all.
pub fn needs_check(e: &Execution<'_>) -> bool {
    e.requires_approval || e.approval_id.is_some()
}

/// The violation this execution commits, if any. `used_by` is the span that holds the
/// approval's one use after this execution claimed it (itself when it was first).
pub fn check(
    e: &Execution<'_>,
    approval: Option<&ApprovalFacts>,
    used_by: Option<&str>,
) -> Option<(ViolationKind, String)> {
    let Some(id) = e.approval_id else {
        return e.requires_approval.then(|| {
            (ViolationKind::NoApproval, format!("{} requires a per-call approval and the span named none", e.tool))
        });
    };
    let Some(a) = approval else {
        return Some((ViolationKind::UnknownApproval, format!("approval {id} does not exist")));
    };
    if a.status != ApprovalStatus::Approved.as_str() {
        return Some((ViolationKind::NotApproved, format!("approval {id} is {}, not approved", a.status)));
    }
    if a.tool != e.tool {
        return Some((
            ViolationKind::PayloadMismatch,
            format!("approval {id} was for tool {}, but {} ran", a.tool, e.tool),
        ));
    }
    match e.args_sha256 {
        Some(hash) if hash == a.arguments_sha256 => {}
        Some(hash) => {
            return Some((
                ViolationKind::PayloadMismatch,
                format!(
                    "the executed arguments hash to {}…, the approved ones to {}…",
                    &hash[..12.min(hash.len())],
                    &a.arguments_sha256[..12.min(a.arguments_sha256.len())]
                ),
            ))
        }
        None => {
            return Some((
                ViolationKind::PayloadMismatch,
                "the span carries no arguments, so they cannot be matched to the approved ones".into(),
            ))
        }
    }
    match used_by {
        Some(other) if other != e.span_key => {
            Some((ViolationKind::Reused, format!("approval {id} was already used by span {other}")))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exec<'a>(approval: Option<&'a str>, args: Option<&'a str>, requires: bool) -> Execution<'a> {
        Execution {
            span_key: "t:s1".into(),
            tool: "send_email",
            approval_id: approval,
            args_sha256: args,
            requires_approval: requires,
        }
    }

    fn approved() -> ApprovalFacts {
        ApprovalFacts {
            id: "apr_1".into(),
            tool: "send_email".into(),
            arguments_sha256: "h1".into(),
            status: "approved".into(),
            used_by_span: None,
        }
    }

    fn kind(e: &Execution<'_>, a: Option<&ApprovalFacts>, used_by: Option<&str>) -> Option<ViolationKind> {
        check(e, a, used_by).map(|(k, _)| k)
    }

    #[test]
    fn a_matching_approved_first_use_is_fine() {
        let a = approved();
        assert_eq!(kind(&exec(Some("apr_1"), Some("h1"), true), Some(&a), Some("t:s1")), None);
        assert!(!needs_check(&exec(None, Some("h1"), false)), "tools without a policy and without approval pass");
    }

    #[test]
    fn each_broken_rule_has_its_kind() {
        let a = approved();
        assert_eq!(kind(&exec(None, None, true), None, None), Some(ViolationKind::NoApproval));
        assert_eq!(kind(&exec(Some("apr_x"), Some("h1"), true), None, None), Some(ViolationKind::UnknownApproval));
        for status in ["denied", "expired", "cancelled", "pending"] {
            let a = ApprovalFacts { status: status.into(), ..approved() };
            assert_eq!(kind(&exec(Some("apr_1"), Some("h1"), true), Some(&a), None), Some(ViolationKind::NotApproved));
        }
        assert_eq!(kind(&exec(Some("apr_1"), Some("h2"), true), Some(&a), None), Some(ViolationKind::PayloadMismatch));
        assert_eq!(kind(&exec(Some("apr_1"), None, true), Some(&a), None), Some(ViolationKind::PayloadMismatch));
        let other_tool = ApprovalFacts { tool: "send_sms".into(), ..approved() };
        assert_eq!(
            kind(&exec(Some("apr_1"), Some("h1"), true), Some(&other_tool), None),
            Some(ViolationKind::PayloadMismatch)
        );
        assert_eq!(kind(&exec(Some("apr_1"), Some("h1"), true), Some(&a), Some("t:s0")), Some(ViolationKind::Reused));
    }

    #[test]
    fn an_approval_named_by_a_tool_without_policy_is_still_checked() {
        let a = ApprovalFacts { status: "denied".into(), ..approved() };
        let e = exec(Some("apr_1"), Some("h1"), false);
        assert!(needs_check(&e));
        assert_eq!(kind(&e, Some(&a), None), Some(ViolationKind::NotApproved));
    }
}
