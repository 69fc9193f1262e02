//! A tool policy's say over its guarded calls, read into the key rule and the call rule
//! (defaults where the policy is silent or there is none).

use super::answer::{CallRule, DEFAULT_TIMEOUT_SECONDS, DEFAULT_WINDOW_SECONDS};
use super::key::KeyRule;
use crate::policy::ToolPolicy;

pub fn key_rule(policy: Option<&ToolPolicy>) -> KeyRule {
    let mut rule = KeyRule::default();
    if let Some(p) = policy {
        if let Some(fields) = &p.volatile_fields {
            rule.volatile_fields = fields.clone();
        }
        rule.run_wide = p.run_wide_key;
    }
    rule
}

pub fn call_rule(policy: Option<&ToolPolicy>) -> CallRule {
    CallRule {
        requires_approval: policy.is_some_and(|p| p.requires_approval),
        window_ms: policy.and_then(|p| p.ledger_window_seconds).unwrap_or(DEFAULT_WINDOW_SECONDS) * 1000,
        timeout_ms: policy.and_then(|p| p.call_timeout_seconds).unwrap_or(DEFAULT_TIMEOUT_SECONDS) * 1000,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canonical::SideEffect;

    #[test]
    fn a_policy_sets_the_rules_and_no_policy_means_the_defaults() {
        assert_eq!(key_rule(None), KeyRule::default());
        assert_eq!(call_rule(None), CallRule::default());
        let p = ToolPolicy {
            requires_approval: true,
            volatile_fields: Some(vec!["nonce".into()]),
            run_wide_key: true,
            ledger_window_seconds: Some(60),
            call_timeout_seconds: Some(5),
            ..ToolPolicy::class("refund_*", SideEffect::Irreversible)
        };
        assert_eq!(key_rule(Some(&p)), KeyRule { volatile_fields: vec!["nonce".into()], run_wide: true });
        assert_eq!(call_rule(Some(&p)), CallRule { requires_approval: true, window_ms: 60_000, timeout_ms: 5_000 });
    }
}
