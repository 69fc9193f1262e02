//! Claims against evidence: each item the agent says it did is matched to a side effect
//! observed in the run's traces, by idempotency key, else external id, else tool name.
//! What was observed but never claimed is the dangerous list: a person taking over would
//! not know it happened and might do it again.

use super::DoneItem;
use crate::canonical::ToolCallView;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    pub claimed_and_observed: Vec<(DoneItem, ToolCallView)>,
    pub claimed_not_observed: Vec<DoneItem>,
    pub observed_not_claimed: Vec<ToolCallView>,
    /// The agent sent no `what_was_done`: the observed side effects stand in for it.
    pub observed_only: bool,
}

/// The side effects that count as done: successful write or irreversible calls.
pub fn observed_side_effects(calls: &[ToolCallView]) -> Vec<ToolCallView> {
    calls
        .iter()
        .filter(|c| c.side_effect.changes_the_world() && c.outcome == crate::canonical::Outcome::Ok)
        .cloned()
        .collect()
}

pub fn compare(claimed: &[DoneItem], observed: &[ToolCallView]) -> Evidence {
    let mut unmatched: Vec<Option<&ToolCallView>> = observed.iter().map(Some).collect();
    let mut take = |pred: &dyn Fn(&ToolCallView) -> bool| -> Option<ToolCallView> {
        let slot = unmatched.iter_mut().find(|s| s.is_some_and(pred))?;
        slot.take().cloned()
    };
    let mut matched = Vec::new();
    let mut claimed_only = Vec::new();
    // Strong identifiers first for every claim, so a tool-name match cannot steal the
    // call another claim names by key.
    let mut pending: Vec<&DoneItem> = Vec::new();
    for item in claimed {
        let by_key = item.idempotency_key.as_deref().and_then(|k| take(&|c| c.idempotency_key.as_deref() == Some(k)));
        let found =
            by_key.or_else(|| item.external_id.as_deref().and_then(|e| take(&|c| c.external_id.as_deref() == Some(e))));
        match found {
            Some(call) => matched.push((item.clone(), call)),
            None => pending.push(item),
        }
    }
    for item in pending {
        // A claim with an id that matched nothing is not matched by tool name: the ids
        // disagree, which the person must see.
        let has_id = item.idempotency_key.is_some() || item.external_id.is_some();
        let found = match (&item.tool, has_id) {
            (Some(tool), false) => take(&|c| &c.tool == tool),
            _ => None,
        };
        match found {
            Some(call) => matched.push((item.clone(), call)),
            None => claimed_only.push(item.clone()),
        }
    }
    Evidence {
        claimed_and_observed: matched,
        claimed_not_observed: claimed_only,
        observed_not_claimed: unmatched.into_iter().flatten().cloned().collect(),
        observed_only: claimed.is_empty(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canonical::{Outcome, SideEffect};

    fn call(tool: &str, key: Option<&str>, ext: Option<&str>) -> ToolCallView {
        ToolCallView {
            trace_id: "t".into(),
            span_id: format!("{tool}-{}", ext.unwrap_or("-")),
            step_index: None,
            tool: tool.into(),
            side_effect: SideEffect::Irreversible,
            idempotency_key: key.map(Into::into),
            attempt: 1,
            outcome: Outcome::Ok,
            latency_ms: None,
            external_id: ext.map(Into::into),
            args_sha256: None,
            approval_id: None,
            credential_in_arguments: false,
            started_at: None,
        }
    }

    fn done(tool: Option<&str>, key: Option<&str>, ext: Option<&str>) -> DoneItem {
        DoneItem {
            tool: tool.map(Into::into),
            description: None,
            external_id: ext.map(Into::into),
            idempotency_key: key.map(Into::into),
            at: None,
        }
    }

    #[test]
    fn claims_match_by_key_then_external_id_then_tool() {
        let observed = vec![
            call("send_email", Some("k1"), Some("msg_1")),
            call("create_ticket", None, Some("T-9")),
            call("refund", None, None),
            call("send_email", Some("k2"), Some("msg_2")),
        ];
        let claimed = vec![
            done(Some("send_email"), Some("k1"), None),
            done(None, None, Some("T-9")),
            done(Some("refund"), None, None),
            done(Some("charge_card"), Some("k9"), None),
        ];
        let e = compare(&claimed, &observed);
        assert_eq!(e.claimed_and_observed.len(), 3);
        assert_eq!(e.claimed_not_observed, vec![done(Some("charge_card"), Some("k9"), None)]);
        assert_eq!(e.observed_not_claimed.len(), 1, "the second email was never claimed");
        assert_eq!(e.observed_not_claimed[0].external_id.as_deref(), Some("msg_2"));
        assert!(!e.observed_only);
    }

    #[test]
    fn a_claim_whose_id_disagrees_is_not_matched_by_tool_name() {
        let observed = vec![call("send_email", Some("k1"), Some("msg_1"))];
        let e = compare(&[done(Some("send_email"), Some("other-key"), None)], &observed);
        assert!(e.claimed_and_observed.is_empty());
        assert_eq!(e.claimed_not_observed.len(), 1);
        assert_eq!(e.observed_not_claimed.len(), 1);
    }

    #[test]
    fn without_claims_the_observed_effects_stand_in() {
        let observed = vec![call("send_email", Some("k1"), Some("msg_1"))];
        let e = compare(&[], &observed);
        assert!(e.observed_only);
        assert_eq!(e.observed_not_claimed.len(), 1);
    }

    #[test]
    fn only_successful_world_changing_calls_count_as_observed() {
        let mut read = call("lookup", None, None);
        read.side_effect = SideEffect::Read;
        let mut failed = call("send_email", None, None);
        failed.outcome = Outcome::Error;
        let ok = call("send_email", Some("k"), None);
        assert_eq!(observed_side_effects(&[read, failed, ok.clone()]), vec![ok]);
    }
}
