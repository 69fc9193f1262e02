//! Tool policies: an admin-maintained list of tool-name patterns and what they say about a
//! tool: its side-effect class (ingest uses it when a span does not declare one), whether
//! each call needs a per-call approval, who may give it, how long a request waits, and an
//! optional absolute limit of executions per run.

use crate::access::Role;
use crate::canonical::SideEffect;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolPolicy {
    /// A tool name, or a pattern with `*` wildcards (`send_*`, `*delete*`).
    pub pattern: String,
    pub side_effect: SideEffect,
    /// Every execution needs an approved request naming this exact payload.
    #[serde(default)]
    pub requires_approval: bool,
    /// The role that may decide requests for this tool.
    #[serde(default = "default_approver_role")]
    pub approver_role: Role,
    /// How long a request waits for a decision when the agent does not say.
    #[serde(default)]
    pub expiry_seconds: Option<i64>,
    /// At most this many successful executions per run; more is a violation.
    #[serde(default)]
    pub run_limit: Option<i64>,
    /// How long after its decision an approval for this tool may be used (default 900 s);
    /// a call that starts later is a `stale_approval` violation.
    #[serde(default)]
    pub use_within_seconds: Option<i64>,
}

fn default_approver_role() -> Role {
    Role::Approver
}

impl ToolPolicy {
    /// A policy that only sets the side-effect class.
    pub fn class(pattern: &str, side_effect: SideEffect) -> ToolPolicy {
        ToolPolicy {
            pattern: pattern.to_string(),
            side_effect,
            requires_approval: false,
            approver_role: Role::Approver,
            expiry_seconds: None,
            run_limit: None,
            use_within_seconds: None,
        }
    }
}

/// Whether `name` matches a `*`-wildcard pattern (case-sensitive, whole name).
pub fn glob_matches(pattern: &str, name: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == name;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !name.starts_with(first) || !name[first.len()..].ends_with(last) || name.len() < first.len() + last.len() {
        return false;
    }
    let mut rest = &name[first.len()..name.len() - last.len()];
    for middle in &parts[1..parts.len() - 1] {
        match rest.find(middle) {
            Some(at) => rest = &rest[at + middle.len()..],
            None => return false,
        }
    }
    true
}

/// The policy that governs `tool`: its exact name first, else the first matching pattern.
pub fn policy_for<'a>(tool: &str, policies: &'a [ToolPolicy]) -> Option<&'a ToolPolicy> {
    policies.iter().find(|p| p.pattern == tool).or_else(|| policies.iter().find(|p| glob_matches(&p.pattern, tool)))
}

/// The class of `tool` by the first matching policy; exact names beat patterns.
pub fn classify(tool: &str, policies: &[ToolPolicy]) -> Option<SideEffect> {
    policy_for(tool, policies).map(|p| p.side_effect)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_whole_names() {
        assert!(glob_matches("send_*", "send_email"));
        assert!(glob_matches("*delete*", "hard_delete_repo"));
        assert!(glob_matches("*", "anything"));
        assert!(glob_matches("a*b*c", "a-x-b-y-c"));
        assert!(!glob_matches("send_*", "resend_email"));
        assert!(!glob_matches("a*a", "a"));
        assert!(glob_matches("exact", "exact"));
        assert!(!glob_matches("exact", "exactly"));
    }

    #[test]
    fn exact_names_win_over_patterns() {
        let policies = vec![
            ToolPolicy::class("send_*", SideEffect::Write),
            ToolPolicy::class("send_invoice", SideEffect::Irreversible),
        ];
        assert_eq!(classify("send_invoice", &policies), Some(SideEffect::Irreversible));
        assert_eq!(classify("send_email", &policies), Some(SideEffect::Write));
        assert_eq!(classify("search", &policies), None);
    }
}
