//! The rule ingest applies to every executed tool call: if its policy requires approval,
//! or it names an approval, that approval must exist, be approved, name the same tool and
//! arguments, have been requested for this run (and step, when both say), be used within
//! its window after the decision, by the agent token that asked for it, and by this call
//! only. Pure: storage fetches the facts and records what this returns.

use super::{ApprovalStatus, ViolationKind};
use crate::canonical::Outcome;
use crate::derive::SpanFacts;
use crate::span::NormalizedSpan;
use std::collections::BTreeMap;

/// What ingest knows about one executed tool call.
#[derive(Debug, Clone)]
pub struct Execution<'a> {
    /// `trace_id:span_id`, the id an approval records as its one use.
    pub span_key: String,
    pub tool: &'a str,
    pub approval_id: Option<&'a str>,
    pub args_sha256: Option<&'a str>,
    pub requires_approval: bool,
    /// The run the call belongs to.
    pub run_id: &'a str,
    pub step_index: Option<i64>,
    /// When the call started (the span's start), in Unix milliseconds.
    pub started_ms: i64,
    /// The API token the span arrived with (none when ingest needs no token).
    pub sent_by_token: Option<i64>,
}

/// What storage knows about the approval an execution names.
#[derive(Debug, Clone)]
pub struct ApprovalFacts {
    pub id: String,
    pub tool: String,
    pub arguments_sha256: String,
    pub status: String,
    pub used_by_span: Option<String>,
    pub run_id: String,
    pub step_index: Option<i64>,
    pub decided_at: Option<i64>,
    pub use_by: Option<i64>,
    pub requested_by_token: Option<i64>,
}

/// How far an agent's clock may run behind the server's before a call that seems to have
/// started before its approval was decided counts as having done so.
pub const CLOCK_SKEW_MS: i64 = 60_000;

fn when(ms: i64) -> String {
    crate::clock::from_ms(ms).format("%Y-%m-%d %H:%M:%S UTC").to_string()
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
    if !ApprovalStatus::parse(&a.status).is_some_and(ApprovalStatus::is_approved) {
        return Some((ViolationKind::NotApproved, format!("approval {id} is {}, not approved", a.status)));
    }
    if let Some(decided) = a.decided_at.filter(|d| e.started_ms + CLOCK_SKEW_MS < *d) {
        return Some((
            ViolationKind::NotApproved,
            format!(
                "the call started at {}, before approval {id} was decided at {}",
                when(e.started_ms),
                when(decided)
            ),
        ));
    }
    if a.tool != e.tool {
        return Some((
            ViolationKind::PayloadMismatch,
            format!("approval {id} was for tool {}, but {} ran", a.tool, e.tool),
        ));
    }
    if a.run_id != e.run_id {
        return Some((
            ViolationKind::WrongRun,
            format!("approval {id} was requested for run {}, but the call ran in run {}", a.run_id, e.run_id),
        ));
    }
    if let (Some(approved), Some(ran)) = (a.step_index, e.step_index) {
        if approved != ran {
            return Some((
                ViolationKind::WrongStep,
                format!("approval {id} was requested for step {approved}, but the call ran in step {ran}"),
            ));
        }
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
    if let Some(use_by) = a.use_by.filter(|u| e.started_ms > *u) {
        return Some((
            ViolationKind::StaleApproval,
            format!(
                "the call started at {}, after approval {id} had to be used (by {})",
                when(e.started_ms),
                when(use_by)
            ),
        ));
    }
    if let (Some(asked), Some(sent)) = (a.requested_by_token, e.sent_by_token) {
        if asked != sent {
            return Some((
                ViolationKind::WrongToken,
                format!(
                    "approval {id} was requested with API token {asked}, but the call was reported with token {sent}"
                ),
            ));
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

    const DECIDED: i64 = 1_800_000_000_000;

    fn exec<'a>(approval: Option<&'a str>, args: Option<&'a str>, requires: bool) -> Execution<'a> {
        Execution {
            span_key: "t:s1".into(),
            tool: "send_email",
            approval_id: approval,
            args_sha256: args,
            requires_approval: requires,
            run_id: "run-1",
            step_index: Some(3),
            started_ms: DECIDED + 5_000,
            sent_by_token: Some(7),
        }
    }

    fn approved() -> ApprovalFacts {
        ApprovalFacts {
            id: "apr_1".into(),
            tool: "send_email".into(),
            arguments_sha256: "h1".into(),
            status: "approved".into(),
            used_by_span: None,
            run_id: "run-1".into(),
            step_index: Some(3),
            decided_at: Some(DECIDED),
            use_by: Some(DECIDED + 900_000),
            requested_by_token: Some(7),
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
    fn an_approval_authorizes_one_call_in_its_run_and_step_within_its_window() {
        let a = approved();
        let in_other_run = Execution { run_id: "run-2", ..exec(Some("apr_1"), Some("h1"), true) };
        assert_eq!(kind(&in_other_run, Some(&a), None), Some(ViolationKind::WrongRun));
        let in_other_step = Execution { step_index: Some(4), ..exec(Some("apr_1"), Some("h1"), true) };
        assert_eq!(kind(&in_other_step, Some(&a), None), Some(ViolationKind::WrongStep));
        let step_unknown = Execution { step_index: None, ..exec(Some("apr_1"), Some("h1"), true) };
        assert_eq!(kind(&step_unknown, Some(&a), None), None, "a span without a step is not held to one");
        let late = Execution { started_ms: DECIDED + 900_001, ..exec(Some("apr_1"), Some("h1"), true) };
        assert_eq!(kind(&late, Some(&a), None), Some(ViolationKind::StaleApproval));
        let early = Execution { started_ms: DECIDED - CLOCK_SKEW_MS - 1, ..exec(Some("apr_1"), Some("h1"), true) };
        let (k, detail) = check(&early, Some(&a), None).unwrap();
        assert_eq!(k, ViolationKind::NotApproved);
        assert!(detail.contains("before approval apr_1 was decided"), "{detail}");
        let skewed = Execution { started_ms: DECIDED - CLOCK_SKEW_MS + 1, ..exec(Some("apr_1"), Some("h1"), true) };
        assert_eq!(kind(&skewed, Some(&a), None), None, "a clock a little behind is tolerated");
        let other_token = Execution { sent_by_token: Some(8), ..exec(Some("apr_1"), Some("h1"), true) };
        assert_eq!(kind(&other_token, Some(&a), None), Some(ViolationKind::WrongToken));
        let no_token = Execution { sent_by_token: None, ..exec(Some("apr_1"), Some("h1"), true) };
        assert_eq!(kind(&no_token, Some(&a), None), None, "ingest without tokens cannot tell");
        let legacy = ApprovalFacts { use_by: None, requested_by_token: None, ..approved() };
        assert_eq!(kind(&late, Some(&legacy), None), None, "requests decided before the window existed");
    }

    #[test]
    fn an_approval_named_by_a_tool_without_policy_is_still_checked() {
        let a = ApprovalFacts { status: "denied".into(), ..approved() };
        let e = exec(Some("apr_1"), Some("h1"), false);
        assert!(needs_check(&e));
        assert_eq!(kind(&e, Some(&a), None), Some(ViolationKind::NotApproved));
    }
}

/// The executed tool calls among `spans` that ingest must check (see [`needs_check`]),
/// each with its span; `run_of` gives each trace's run.
pub fn executions<'a>(
    spans: &'a [NormalizedSpan],
    run_of: &'a BTreeMap<&'a str, String>,
) -> Vec<(Execution<'a>, &'a NormalizedSpan)> {
    spans
        .iter()
        .filter(|s| matches!(s.outcome, Some(Outcome::Ok | Outcome::Error | Outcome::Timeout)))
        .filter_map(|s| {
            let e = Execution {
                span_key: format!("{}:{}", s.trace_id, s.span_id),
                tool: s.tool_name.as_deref()?,
                approval_id: s.approval_id.as_deref(),
                args_sha256: s.args_sha256.as_deref(),
                requires_approval: s.requires_approval,
                run_id: run_of[s.trace_id.as_str()].as_str(),
                step_index: s.step_index,
                started_ms: s.start_ns / 1_000_000,
                sent_by_token: s.sent_by_token,
            };
            needs_check(&e).then_some((e, s))
        })
        .collect()
}

/// The successful calls among `spans` over their policy's per-run limit: the n-th
/// successful execution of a tool in start order is over the limit when n > limit,
/// however the spans arrived. `facts_by_run` holds every span of each run (stored and
/// new, re-sent ones once).
pub fn over_run_limit<'a>(
    spans: &'a [NormalizedSpan],
    run_of: &BTreeMap<&str, String>,
    facts_by_run: &BTreeMap<String, Vec<SpanFacts>>,
) -> Vec<(&'a NormalizedSpan, ViolationKind, String)> {
    let mut found = Vec::new();
    for s in spans.iter().filter(|s| s.outcome == Some(Outcome::Ok)) {
        let (Some(tool), Some(limit)) = (s.tool_name.as_deref(), s.run_limit) else { continue };
        let run = &run_of[s.trace_id.as_str()];
        let nth = facts_by_run
            .get(run.as_str())
            .into_iter()
            .flatten()
            .filter(|f| {
                f.tool_name.as_deref() == Some(tool)
                    && f.outcome.as_deref() == Some("ok")
                    && (f.start_ns, f.span_id.as_str()) <= (s.start_ns, s.span_id.as_str())
            })
            .count() as i64;
        if nth > limit {
            let detail = format!("execution {nth} of {tool} in this run; its policy allows {limit}");
            found.push((s, ViolationKind::RunLimitExceeded, detail));
        }
    }
    found
}
