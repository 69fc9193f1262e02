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
    /// Guarded calls (the execution ledger): top-level argument fields left out of a
    /// derived idempotency key (default: request_id, timestamp, now, attempt, trace_id).
    #[serde(default)]
    pub volatile_fields: Option<Vec<String>>,
    /// Key guarded calls run-wide (the step left out), for tools that cannot be undone:
    /// the same call in a later step is found too.
    #[serde(default)]
    pub run_wide_key: bool,
    /// How long a succeeded call answers `already_done` (default 24 h).
    #[serde(default)]
    pub ledger_window_seconds: Option<i64>,
    /// How long a started call may go unreported before its outcome is unknown (default
    /// 300 s).
    #[serde(default)]
    pub call_timeout_seconds: Option<i64>,
    /// A JSON Schema (draft 2020-12 or earlier) the arguments must match when an approver
    /// edits them before approving.
    #[serde(default)]
    pub arguments_schema: Option<serde_json::Value>,
    /// What happens to a request nobody decided in time: denied (the default) or escalated.
    #[serde(default)]
    pub on_expiry: crate::approvals::OnExpiry,
    /// The MCP gateway forwards this tool's calls even when Flightdeck cannot be reached
    /// (recording them later where it can). Allowed only for `read` and `none` tools:
    /// every other call fails closed without Flightdeck.
    #[serde(default)]
    pub fail_open: bool,
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
            volatile_fields: None,
            run_wide_key: false,
            ledger_window_seconds: None,
            call_timeout_seconds: None,
            arguments_schema: None,
            on_expiry: crate::approvals::OnExpiry::Deny,
            fail_open: false,
        }
    }
}

/// The longest pattern a policy may have.
pub const MAX_PATTERN_CHARS: usize = 200;
/// The most executions per run a limit may allow.
pub const MAX_RUN_LIMIT: i64 = 1_000_000;
/// The longest an approval may stay usable after its decision.
pub const MAX_USE_WITHIN_SECONDS: i64 = 7 * 24 * 3600;

impl ToolPolicy {
    /// Whether this policy can be applied, and if not, what to change. The one check for
    /// every way a policy arrives: the admin page, the tools catalogue, the config file,
    /// and storage itself.
    pub fn validate(&self) -> Result<(), String> {
        let chars = self.pattern.trim().chars().count();
        if chars == 0 || chars > MAX_PATTERN_CHARS || self.pattern.trim() != self.pattern {
            return Err(format!(
                "a pattern needs 1 to {MAX_PATTERN_CHARS} characters without surrounding spaces, e.g. send_* or delete_repository"
            ));
        }
        // No default: a class guessed for the admin would be applied as if they had said it.
        if self.side_effect == SideEffect::Unknown {
            return Err("choose the side effect: none, read, write or irreversible (there is no default)".into());
        }
        let max_expiry = crate::approvals::payload::MAX_EXPIRES_IN_SECONDS;
        let ranges = [
            ("expiry (seconds)", self.expiry_seconds, max_expiry),
            ("per-run limit", self.run_limit, MAX_RUN_LIMIT),
            ("use within (seconds)", self.use_within_seconds, MAX_USE_WITHIN_SECONDS),
            ("ledger window (seconds)", self.ledger_window_seconds, MAX_LEDGER_WINDOW_SECONDS),
            ("call timeout (seconds)", self.call_timeout_seconds, MAX_CALL_TIMEOUT_SECONDS),
        ];
        for (field, value, max) in ranges {
            if let Some(n) = value.filter(|n| !(1..=max).contains(n)) {
                return Err(format!("{field} must be a whole number from 1 to {max}, got {n}"));
            }
        }
        #[cfg(feature = "server")]
        if let Some(schema) = &self.arguments_schema {
            crate::approvals::edit::check_schema(schema).map_err(|why| format!("arguments schema: {why}"))?;
        }
        if self.fail_open && !matches!(self.side_effect, SideEffect::Read | SideEffect::None) {
            return Err(format!(
                "fail open is allowed only for read and none tools: a {} call must not run when Flightdeck cannot gate it",
                self.side_effect
            ));
        }
        if let Some(fields) = &self.volatile_fields {
            if fields.len() > MAX_VOLATILE_FIELDS || fields.iter().any(|f| f.trim().is_empty() || f.len() > 200) {
                return Err(format!(
                    "volatile fields: at most {MAX_VOLATILE_FIELDS} argument names of 1 to 200 characters"
                ));
            }
        }
        Ok(())
    }
}

/// The longest a succeeded guarded call may answer `already_done`: 30 days.
pub const MAX_LEDGER_WINDOW_SECONDS: i64 = 30 * 24 * 3600;
/// The longest a guarded call may run before its outcome is unknown: one day.
pub const MAX_CALL_TIMEOUT_SECONDS: i64 = 24 * 3600;
/// The most volatile fields a policy may name.
pub const MAX_VOLATILE_FIELDS: usize = 50;

/// Whether `name` matches a `*`-wildcard pattern (case-sensitive, whole name).
pub use crate::pattern::glob as glob_matches;

/// The policy that governs `tool`: its exact name first, else the first matching pattern.
///
/// A tool the MCP gateway reports is named `{server}/{tool}` (tool names collide across
/// servers). For such a name the policies that name the server (`github/delete_repo`,
/// `github/*`) come first, exact then pattern; then those naming the tool alone
/// (`delete_repo`, `delete_*`), which hold for it on any server.
pub fn policy_for<'a>(tool: &str, policies: &'a [ToolPolicy]) -> Option<&'a ToolPolicy> {
    let first = |name: &str, naming_server: bool| {
        let candidates = || policies.iter().filter(move |p| p.pattern.contains('/') == naming_server);
        candidates().find(|p| p.pattern == name).or_else(|| candidates().find(|p| glob_matches(&p.pattern, name)))
    };
    match tool.split_once('/') {
        Some((_server, bare)) => first(tool, true).or_else(|| first(bare, false)),
        None => policies
            .iter()
            .find(|p| p.pattern == tool)
            .or_else(|| policies.iter().find(|p| glob_matches(&p.pattern, tool))),
    }
}

/// The class of `tool` by the first matching policy; exact names beat patterns.
pub fn classify(tool: &str, policies: &[ToolPolicy]) -> Option<SideEffect> {
    policy_for(tool, policies).map(|p| p.side_effect)
}

/// A class to suggest for an unclassified tool, with why: from its MCP annotations when
/// its spans carry them, else from the words of its name. Only ever shown to an admin,
/// never applied: a wrong guess of `read` would hide duplicate side effects.
pub fn suggest_class(
    name: &str,
    read_only_hint: Option<bool>,
    destructive_hint: Option<bool>,
) -> Option<(SideEffect, String)> {
    match (read_only_hint, destructive_hint) {
        (Some(true), _) => return Some((SideEffect::Read, "its MCP annotations say readOnlyHint".into())),
        (_, Some(true)) => return Some((SideEffect::Irreversible, "its MCP annotations say destructiveHint".into())),
        (Some(false), Some(false)) => {
            return Some((SideEffect::Write, "its MCP annotations say it writes, but not destructively".into()))
        }
        _ => {}
    }
    let lower = name.to_ascii_lowercase();
    let words: Vec<&str> = lower.split(|c: char| !c.is_ascii_alphanumeric()).filter(|w| !w.is_empty()).collect();
    let any = |list: &[&str]| words.iter().find(|w| list.contains(w)).map(|w| w.to_string());
    const IRREVERSIBLE: &[&str] = &[
        "send",
        "email",
        "mail",
        "sms",
        "notify",
        "pay",
        "payment",
        "charge",
        "refund",
        "transfer",
        "wire",
        "delete",
        "drop",
        "destroy",
        "purge",
        "remove",
        "deploy",
        "publish",
        "post",
        "tweet",
        "merge",
        "cancel",
        "terminate",
        "execute",
        "exec",
        "shell",
        "run",
    ];
    const WRITE: &[&str] = &[
        "create", "update", "write", "set", "put", "insert", "upsert", "save", "upload", "add", "edit", "modify",
        "patch", "book", "reserve", "assign", "open", "comment", "store",
    ];
    const READ: &[&str] = &[
        "get", "list", "search", "find", "read", "fetch", "lookup", "query", "describe", "show", "view", "check",
        "retrieve", "browse", "load", "count", "status",
    ];
    if let Some(w) = any(IRREVERSIBLE) {
        return Some((SideEffect::Irreversible, format!("its name says `{w}`")));
    }
    if let Some(w) = any(WRITE) {
        return Some((SideEffect::Write, format!("its name says `{w}`")));
    }
    any(READ).map(|w| (SideEffect::Read, format!("its name says `{w}`")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_policy_is_checked_the_same_wherever_it_comes_from() {
        let ok = ToolPolicy {
            expiry_seconds: Some(600),
            run_limit: Some(3),
            ..ToolPolicy::class("send_*", SideEffect::Write)
        };
        assert_eq!(ok.validate(), Ok(()));
        let unknown = ToolPolicy::class("send_*", SideEffect::Unknown);
        assert!(unknown.validate().unwrap_err().contains("choose the side effect"));
        let empty = ToolPolicy::class(" ", SideEffect::Read);
        assert!(empty.validate().unwrap_err().contains("1 to 200 characters"));
        let long = ToolPolicy::class(&"x".repeat(201), SideEffect::Read);
        assert!(long.validate().is_err());
        let zero = ToolPolicy { run_limit: Some(0), ..ok.clone() };
        assert_eq!(zero.validate().unwrap_err(), "per-run limit must be a whole number from 1 to 1000000, got 0");
        let forever = ToolPolicy { use_within_seconds: Some(MAX_USE_WITHIN_SECONDS + 1), ..ok.clone() };
        assert!(forever.validate().unwrap_err().starts_with("use within (seconds)"));
    }

    #[test]
    fn suggestions_come_from_annotations_first_then_the_name() {
        assert_eq!(suggest_class("send_email", None, None).unwrap().0, SideEffect::Irreversible);
        assert_eq!(suggest_class("createTicket", None, None), None, "camelCase is one word: no guess");
        assert_eq!(suggest_class("create-ticket", None, None).unwrap().0, SideEffect::Write);
        assert_eq!(suggest_class("search_docs", None, None).unwrap().0, SideEffect::Read);
        assert_eq!(suggest_class("frobnicate", None, None), None);
        let (class, why) = suggest_class("send_email", Some(true), None).unwrap();
        assert_eq!(class, SideEffect::Read, "an annotation beats the name");
        assert!(why.contains("readOnlyHint"));
        assert_eq!(suggest_class("x", Some(false), Some(true)).unwrap().0, SideEffect::Irreversible);
    }

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
    fn a_policy_naming_the_server_wins_and_a_bare_name_holds_on_every_server() {
        let policies = vec![
            ToolPolicy::class("*delete*", SideEffect::Irreversible),
            ToolPolicy::class("files/*", SideEffect::Write),
            ToolPolicy::class("files/read_file", SideEffect::Read),
            ToolPolicy::class("search", SideEffect::Read),
        ];
        assert_eq!(classify("files/read_file", &policies), Some(SideEffect::Read), "server and tool, exact");
        assert_eq!(classify("files/delete_file", &policies), Some(SideEffect::Write), "the server's pattern first");
        assert_eq!(classify("github/delete_repo", &policies), Some(SideEffect::Irreversible), "a bare pattern");
        assert_eq!(classify("github/search", &policies), Some(SideEffect::Read), "a bare name on any server");
        assert_eq!(classify("github/list", &policies), None);
        assert_eq!(classify("delete_x", &policies), Some(SideEffect::Irreversible), "unqualified names as before");
    }

    #[test]
    fn only_read_tools_may_fail_open() {
        let read = ToolPolicy { fail_open: true, ..ToolPolicy::class("files/read_*", SideEffect::Read) };
        assert_eq!(read.validate(), Ok(()));
        let write = ToolPolicy { fail_open: true, ..ToolPolicy::class("files/write_*", SideEffect::Write) };
        assert!(write.validate().unwrap_err().contains("only for read and none tools"));
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
