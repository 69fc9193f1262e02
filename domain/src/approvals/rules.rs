//! Rules on a tool policy's calls: `when <expression> -> auto_approve | require_approval
//! (N approvers, role) | deny (reason)`, tried in order, the first enforced rule that
//! matches deciding. Expressions are CEL (the Common Expression Language, as Kubernetes and
//! Envoy use it) over the arguments, the agent, the run's cost so far and the time of day,
//! so nobody learns a home-made language and a bad expression is refused with its position.
//!
//! The types are shared with the browser (the admin page); compiling and evaluating need
//! the `cel` crate and run on the server only. Pure: storage keeps the rules and the
//! shadow records, the API applies the verdict.

use crate::access::Role;
use crate::vocabulary::vocabulary;
use serde::{Deserialize, Serialize};

vocabulary! {
    /// What a matching rule does with a request.
    RuleAction {
        /// Decided at once as approved, by `rule:<name>`.
        AutoApprove = "auto_approve",
        /// Left for people: N distinct approvers holding the role.
        RequireApproval = "require_approval",
        /// Decided at once as denied, with the rule's reason.
        Deny = "deny",
    }
}

vocabulary! {
    /// Whether a rule acts.
    RuleMode {
        /// Kept, not evaluated.
        Off = "off",
        /// Evaluated on every request and recorded, never acting: what it would have done
        /// is shown beside what people decided.
        Shadow = "shadow",
        /// Evaluated, and the first enforced rule that matches decides.
        Enforce = "enforce",
    }
}

/// One rule, as stored and edited.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovalRule {
    /// Unique; decisions it takes are recorded as by `rule:<name>`.
    pub name: String,
    /// The tool policy whose calls it reads (the policy's pattern).
    pub tool_pattern: String,
    /// Order among the policy's rules, lowest first.
    pub position: i64,
    /// A CEL expression that must yield a boolean.
    pub expression: String,
    pub action: RuleAction,
    /// For `require_approval`: how many distinct people (1 to [`MAX_APPROVERS`]).
    pub approvers: i64,
    /// For `require_approval`: the role they need (else the policy's).
    pub role: Option<Role>,
    /// For `deny`: what the agent is told.
    pub reason: Option<String>,
    pub mode: RuleMode,
}

/// The most distinct approvers a rule may require.
pub const MAX_APPROVERS: i64 = 5;
/// The longest expression accepted.
pub const MAX_EXPRESSION_CHARS: usize = 2000;

/// The variables an expression can read, for the admin page and the docs.
pub const VARIABLES: &[(&str, &str)] = &[
    ("args", "the call's arguments (a map; `has(args.x)` before reading an optional field)"),
    ("tool", "the tool's name"),
    ("agent", "the agent's name, or \"\" when unknown"),
    ("run_cost", "the run's cost so far in US dollars (0.0 when unknown)"),
    ("hour", "the hour of day the request was filed, 0 to 23, UTC"),
    ("weekday", "the day of week, 0 = Sunday to 6 = Saturday, UTC"),
];

/// What a rule reads besides the arguments, as it was when the request was filed.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct RuleContext {
    pub agent: Option<String>,
    pub run_cost: f64,
    pub hour: i64,
    pub weekday: i64,
}

impl RuleContext {
    /// The context at `at` for `agent`, with the run's cost so far.
    pub fn at(at: chrono::DateTime<chrono::Utc>, agent: Option<String>, run_cost: f64) -> RuleContext {
        use chrono::{Datelike, Timelike};
        RuleContext {
            agent,
            run_cost,
            hour: i64::from(at.hour()),
            weekday: i64::from(at.weekday().num_days_from_sunday()),
        }
    }
}

vocabulary! {
    /// What one rule made of one request.
    Would {
        AutoApprove = "auto_approve",
        RequireApproval = "require_approval",
        Deny = "deny",
        /// The expression was false.
        NoMatch = "no_match",
        /// The expression failed on this request (a missing field, a wrong type): the rule
        /// does not match, and the admin page counts these.
        Error = "error",
    }
}

impl Would {
    #[cfg(feature = "server")]
    fn of(action: RuleAction) -> Would {
        match action {
            RuleAction::AutoApprove => Would::AutoApprove,
            RuleAction::RequireApproval => Would::RequireApproval,
            RuleAction::Deny => Would::Deny,
        }
    }
}

/// One past request as "try on history" shows it: what people decided beside what the
/// rule would have done.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryItem {
    pub approval_id: String,
    pub tool: String,
    pub agent: Option<String>,
    /// The stored (redacted) arguments, canonical JSON.
    pub arguments: String,
    /// approved, approved_with_changes, denied, expired, cancelled or pending.
    pub people: String,
    pub decided_by: Option<String>,
    pub reason: Option<String>,
    pub created_at: chrono::DateTime<chrono::Utc>,
}

/// A rule held against the stored requests of a period (or, in shadow mode, against the
/// requests filed while it ran).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct HistoryReport {
    /// Requests of the rule's policy in the period.
    pub requests: i64,
    /// Requests the expression matched.
    pub matched: i64,
    /// Requests the expression failed on (they count as not matched).
    pub errors: i64,
    /// The first error, to fix the expression by.
    pub first_error: Option<String>,
    /// Matched requests people approved, and those they denied.
    pub matched_people_approved: i64,
    pub matched_people_denied: i64,
    /// Matched requests nobody decided (expired, cancelled, still pending).
    pub matched_undecided: i64,
    /// What the rule would have got wrong, listed with payload: for an auto-approve rule
    /// the requests people denied, for a deny rule those people approved.
    pub disagreements: Vec<HistoryItem>,
}

#[cfg(feature = "server")]
pub use eval::*;

#[cfg(feature = "server")]
mod eval {
    use super::*;
    use serde_json::Value;

    /// A rule ready to evaluate.
    pub struct Compiled {
        pub rule: ApprovalRule,
        program: cel::Program,
    }

    /// Compiles an expression; the error gives the line and column and what was expected.
    pub fn compile(expression: &str) -> Result<cel::Program, String> {
        if expression.trim().is_empty() {
            return Err("the expression is empty; write one that yields true or false, e.g. args.amount < 100".into());
        }
        if expression.chars().count() > MAX_EXPRESSION_CHARS {
            return Err(format!("the expression may have at most {MAX_EXPRESSION_CHARS} characters"));
        }
        // The parser is generated code; a panic on some input must refuse the rule, not
        // take the request down.
        let parsed = std::panic::catch_unwind(|| cel::Program::compile(expression))
            .map_err(|_| "the expression could not be parsed".to_string())?;
        let program = parsed.map_err(|errors| {
            let first = errors.errors.first();
            match first {
                Some(e) => format!("at line {}, column {}: {}", e.pos.0, e.pos.1, e.msg),
                None => "the expression could not be parsed".into(),
            }
        })?;
        // An unknown name parses, then fails on every request: refuse it when saved.
        let bound = macro_variables(expression);
        let references = program.references();
        let mut unknown: Vec<&str> = references
            .variables()
            .into_iter()
            .filter(|v| !VARIABLES.iter().any(|(name, _)| name == v) && !bound.iter().any(|b| b == v))
            .collect();
        unknown.sort_unstable();
        if let Some(name) = unknown.first() {
            let known: Vec<&str> = VARIABLES.iter().map(|(n, _)| *n).collect();
            let hint = known
                .iter()
                .find(|k| k.eq_ignore_ascii_case(name))
                .map(|k| format!(" (did you mean `{k}`? names are case-sensitive)"))
                .unwrap_or_default();
            return Err(format!(
                "`{name}` is not a variable a rule can read{hint}; rules read {}",
                known.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", ")
            ));
        }
        Ok(program)
    }

    /// The names CEL's macros bind (`items.all(x, x.price < 10)` binds `x`), which the
    /// expression may read besides [`VARIABLES`].
    fn macro_variables(expression: &str) -> Vec<String> {
        static MACRO: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
            regex::Regex::new(r"\.\s*(?:all|exists|exists_one|map|filter)\s*\(\s*([A-Za-z_][A-Za-z0-9_]*)\s*,")
                .expect("a valid pattern")
        });
        MACRO.captures_iter(expression).map(|c| c[1].to_string()).collect()
    }

    impl ApprovalRule {
        /// Whether this rule can be saved, and if not, what to change.
        pub fn validate(&self) -> Result<(), String> {
            let name_ok = !self.name.is_empty()
                && self.name.len() <= 64
                && self.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
            if !name_ok {
                return Err("a rule name needs 1 to 64 letters, digits, `-` or `_` (it is shown as rule:<name>)".into());
            }
            if self.tool_pattern.trim().is_empty() {
                return Err("name the tool policy (its pattern) the rule belongs to".into());
            }
            compile(&self.expression).map_err(|why| format!("expression: {why}"))?;
            if self.action == RuleAction::RequireApproval && !(1..=MAX_APPROVERS).contains(&self.approvers) {
                return Err(format!("approvers must be from 1 to {MAX_APPROVERS}, got {}", self.approvers));
            }
            if self.action == RuleAction::Deny && self.reason.as_deref().is_none_or(|r| r.trim().is_empty()) {
                return Err("a deny rule needs a reason: the agent is told it".into());
            }
            if self.reason.as_ref().is_some_and(|r| r.len() > 2000) {
                return Err("the reason may have at most 2000 characters".into());
            }
            Ok(())
        }

        pub fn compiled(self) -> Result<Compiled, String> {
            let program = compile(&self.expression)?;
            Ok(Compiled { rule: self, program })
        }
    }

    impl Compiled {
        /// What this rule makes of a request: its action when the expression is true.
        pub fn would(&self, tool: &str, arguments: &Value, context: &RuleContext) -> (Would, Option<String>) {
            match self.matches(tool, arguments, context) {
                Ok(true) => (Would::of(self.rule.action), None),
                Ok(false) => (Would::NoMatch, None),
                Err(why) => (Would::Error, Some(why)),
            }
        }

        fn matches(&self, tool: &str, arguments: &Value, context: &RuleContext) -> Result<bool, String> {
            let mut ctx = cel::Context::default();
            let args = cel::to_value(arguments).map_err(|e| format!("the arguments cannot be read: {e}"))?;
            ctx.add_variable_from_value("args", args);
            ctx.add_variable_from_value("tool", tool.to_string());
            ctx.add_variable_from_value("agent", context.agent.clone().unwrap_or_default());
            ctx.add_variable_from_value("run_cost", context.run_cost);
            ctx.add_variable_from_value("hour", context.hour);
            ctx.add_variable_from_value("weekday", context.weekday);
            let program = &self.program;
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| program.execute(&ctx)))
                .map_err(|_| "the expression failed".to_string())?;
            match result {
                Ok(cel::Value::Bool(b)) => Ok(b),
                Ok(other) => Err(format!("the expression yielded {other:?}, not true or false")),
                Err(e) => Err(format!("{e}")),
            }
        }
    }

    /// The rules' verdict on one request.
    #[derive(Debug, Clone, PartialEq)]
    pub struct Verdict {
        /// The first enforced rule that matched, if any.
        pub enforced: Option<ApprovalRule>,
        /// What each shadow rule would have done.
        pub shadow: Vec<(String, Would)>,
    }

    /// Tries `rules` (already in order) on a request: the first enforced match decides;
    /// every shadow rule is recorded; rules that are off are skipped.
    pub fn verdict(rules: &[Compiled], tool: &str, arguments: &Value, context: &RuleContext) -> Verdict {
        let mut enforced = None;
        let mut shadow = Vec::new();
        for c in rules {
            match c.rule.mode {
                RuleMode::Off => {}
                RuleMode::Shadow => shadow.push((c.rule.name.clone(), c.would(tool, arguments, context).0)),
                RuleMode::Enforce if enforced.is_none() => {
                    let (would, _) = c.would(tool, arguments, context);
                    if !matches!(would, Would::NoMatch | Would::Error) {
                        enforced = Some(c.rule.clone());
                    }
                }
                RuleMode::Enforce => {}
            }
        }
        Verdict { enforced, shadow }
    }

    /// How a new request is filed: what the first enforced rule that matched says, else
    /// what the tool's policy says (one approver of its role).
    #[derive(Debug, Clone, PartialEq)]
    pub struct Filing {
        pub required_approvals: i64,
        pub required_role: Role,
        /// Set when a rule decided at once: approved or denied, and the reason.
        pub decided: Option<(crate::approvals::ApprovalStatus, Option<String>)>,
        /// The rule that decided or set what the request needs.
        pub rule_name: Option<String>,
        /// What the rules read besides the arguments, kept with the request.
        pub context: RuleContext,
        /// What each shadow rule would have done.
        pub shadow: Vec<(String, Would)>,
    }

    impl Filing {
        /// A request no rule touched: one approver holding `role`.
        pub fn by_policy(role: Role, context: RuleContext) -> Filing {
            Filing {
                required_approvals: 1,
                required_role: role,
                decided: None,
                rule_name: None,
                context,
                shadow: vec![],
            }
        }

        pub fn from_verdict(verdict: Verdict, policy_role: Role, context: RuleContext) -> Filing {
            use crate::approvals::ApprovalStatus;
            let mut filing = Filing { shadow: verdict.shadow, ..Filing::by_policy(policy_role, context) };
            if let Some(rule) = verdict.enforced {
                match rule.action {
                    RuleAction::AutoApprove => {
                        filing.decided =
                            Some((ApprovalStatus::Approved, Some(format!("auto-approved by rule {}", rule.name))))
                    }
                    RuleAction::Deny => filing.decided = Some((ApprovalStatus::Denied, rule.reason.clone())),
                    RuleAction::RequireApproval => {
                        filing.required_approvals = rule.approvers.clamp(1, MAX_APPROVERS);
                        filing.required_role = rule.role.unwrap_or(policy_role);
                    }
                }
                filing.rule_name = Some(rule.name);
            }
            filing
        }
    }

    /// Whether people approved a request whose final status is `status`.
    fn approved(status: &str) -> bool {
        crate::approvals::ApprovalStatus::parse(status).is_some_and(crate::approvals::ApprovalStatus::is_approved)
    }

    /// "Try on history": `rule` on past requests (each with the context it was filed in),
    /// counted beside what people decided. Decisions taken by rules are left out, since
    /// they say nothing about what people would have done. Listed: every request the rule
    /// would have decided against the people (at most `list_limit`).
    pub fn try_on_history(rule: &Compiled, history: &[(HistoryItem, RuleContext)], list_limit: usize) -> HistoryReport {
        let verdicts = history.iter().map(|(item, context)| {
            let arguments: Value = serde_json::from_str(&item.arguments).unwrap_or(Value::Null);
            let (would, error) = rule.would(&item.tool, &arguments, context);
            (item, would, error)
        });
        tally(verdicts, list_limit)
    }

    /// A shadow rule's report: what it recorded for each request filed while it ran,
    /// beside what was decided.
    pub fn shadow_report(recorded: &[(HistoryItem, Would)], list_limit: usize) -> HistoryReport {
        tally(recorded.iter().map(|(item, would)| (item, *would, None)), list_limit)
    }

    fn tally<'a>(
        verdicts: impl Iterator<Item = (&'a HistoryItem, Would, Option<String>)>,
        list_limit: usize,
    ) -> HistoryReport {
        let mut report = HistoryReport::default();
        for (item, would, error) in verdicts {
            if item.decided_by.as_deref().is_some_and(|by| by.starts_with("rule:")) {
                continue;
            }
            report.requests += 1;
            match would {
                Would::NoMatch => continue,
                Would::Error => {
                    report.errors += 1;
                    if report.first_error.is_none() {
                        report.first_error = error.map(|e| format!("request {}: {e}", item.approval_id));
                    }
                    continue;
                }
                _ => report.matched += 1,
            }
            let people_approved = approved(&item.people);
            let people_denied = item.people == "denied";
            if people_approved {
                report.matched_people_approved += 1;
            } else if people_denied {
                report.matched_people_denied += 1;
            } else {
                report.matched_undecided += 1;
            }
            let against = match would {
                Would::AutoApprove => people_denied,
                Would::Deny => people_approved,
                _ => false,
            };
            if against && report.disagreements.len() < list_limit {
                report.disagreements.push(item.clone());
            }
        }
        report
    }
}

#[cfg(all(test, feature = "server"))]
mod tests {
    use super::*;
    use serde_json::json;

    fn rule(name: &str, expression: &str, action: RuleAction, mode: RuleMode) -> ApprovalRule {
        ApprovalRule {
            name: name.into(),
            tool_pattern: "refund".into(),
            position: 0,
            expression: expression.into(),
            action,
            approvers: 1,
            role: None,
            reason: (action == RuleAction::Deny).then(|| "too large".into()),
            mode,
        }
    }

    fn context() -> RuleContext {
        RuleContext { agent: Some("billing".into()), run_cost: 0.5, hour: 10, weekday: 2 }
    }

    #[test]
    fn a_bad_expression_is_refused_with_its_position() {
        let bad = rule("r", "args.amount >> 3", RuleAction::AutoApprove, RuleMode::Enforce);
        let why = bad.validate().unwrap_err();
        assert!(why.starts_with("expression: at line 1, column 14"), "{why}");
        let empty = rule("r", " ", RuleAction::AutoApprove, RuleMode::Enforce);
        assert!(empty.validate().unwrap_err().contains("empty"));
        let mut deny = rule("r", "true", RuleAction::Deny, RuleMode::Enforce);
        deny.reason = None;
        assert!(deny.validate().unwrap_err().contains("reason"));
        let mut many = rule("r", "true", RuleAction::RequireApproval, RuleMode::Enforce);
        many.approvers = 9;
        assert!(many.validate().unwrap_err().contains("approvers"));
        assert!(rule("bad name", "true", RuleAction::AutoApprove, RuleMode::Enforce).validate().is_err());
        assert!(rule("ok-1", "args.amount < 100", RuleAction::AutoApprove, RuleMode::Enforce).validate().is_ok());
    }

    #[test]
    fn a_name_no_rule_can_read_is_refused_when_saved() {
        let upper = rule("r", "ARGS.amount < 100", RuleAction::AutoApprove, RuleMode::Enforce).validate().unwrap_err();
        assert!(upper.contains("`ARGS` is not a variable"), "{upper}");
        assert!(upper.contains("did you mean `args`"), "{upper}");
        let typo = rule("r", "args.amount < limit", RuleAction::AutoApprove, RuleMode::Enforce).validate().unwrap_err();
        assert!(typo.contains("`limit`"), "{typo}");
        // Names a macro binds are fine, as are every documented variable.
        let all = "args.items.all(item, item.price < 10) && tool == 'refund' && agent != '' && run_cost < 1.0 \
                   && hour < 24 && weekday < 7 && args.tags.exists(t, t == 'vip')";
        assert_eq!(rule("r", all, RuleAction::AutoApprove, RuleMode::Enforce).validate(), Ok(()));
    }

    #[test]
    fn expressions_read_arguments_agent_cost_and_time() {
        let r = rule(
            "small",
            "args.amount < 100 && agent == 'billing' && run_cost < 1.0 && hour >= 9 && hour < 17 && weekday != 0 \
             && args.to.endsWith('@corp.example') && tool == 'refund'",
            RuleAction::AutoApprove,
            RuleMode::Enforce,
        )
        .compiled()
        .unwrap();
        let args = json!({"amount": 40, "to": "a@corp.example"});
        assert_eq!(r.would("refund", &args, &context()).0, Would::AutoApprove);
        let late = RuleContext { hour: 22, ..context() };
        assert_eq!(r.would("refund", &args, &late).0, Would::NoMatch);
        let big = json!({"amount": 400, "to": "a@corp.example"});
        assert_eq!(r.would("refund", &big, &context()).0, Would::NoMatch);
        let (would, why) = r.would("refund", &json!({"to": "b@corp.example"}), &context());
        assert_eq!(would, Would::Error, "a missing field fails the expression, it does not match");
        assert!(why.unwrap().contains("amount"));
        let not_bool = rule("n", "args.amount", RuleAction::AutoApprove, RuleMode::Enforce).compiled().unwrap();
        assert_eq!(not_bool.would("refund", &args, &context()).0, Would::Error);
    }

    #[test]
    fn the_first_enforced_match_decides_and_shadow_rules_are_only_recorded() {
        let rules: Vec<Compiled> = vec![
            rule("off", "true", RuleAction::Deny, RuleMode::Off),
            rule("shadow-all", "true", RuleAction::AutoApprove, RuleMode::Shadow),
            rule("broken", "args.nope > 1", RuleAction::Deny, RuleMode::Enforce),
            rule("big", "args.amount >= 1000", RuleAction::RequireApproval, RuleMode::Enforce),
            rule("small", "args.amount < 100", RuleAction::AutoApprove, RuleMode::Enforce),
            rule("any", "true", RuleAction::Deny, RuleMode::Enforce),
        ]
        .into_iter()
        .map(|r| r.compiled().unwrap())
        .collect();
        let v = verdict(&rules, "refund", &json!({"amount": 40}), &context());
        assert_eq!(v.enforced.unwrap().name, "small");
        assert_eq!(v.shadow, vec![("shadow-all".to_string(), Would::AutoApprove)]);
        let v = verdict(&rules, "refund", &json!({"amount": 5000}), &context());
        assert_eq!(v.enforced.unwrap().name, "big");
        let v = verdict(&rules, "refund", &json!({"amount": 500}), &context());
        assert_eq!(v.enforced.unwrap().name, "any", "no earlier match falls through to the last");
    }

    fn item(id: &str, amount: i64, people: &str, by: &str) -> (HistoryItem, RuleContext) {
        (
            HistoryItem {
                approval_id: id.into(),
                tool: "refund".into(),
                agent: Some("billing".into()),
                arguments: json!({ "amount": amount }).to_string(),
                people: people.into(),
                decided_by: Some(by.into()),
                reason: None,
                created_at: chrono::Utc::now(),
            },
            context(),
        )
    }

    #[test]
    fn try_on_history_lists_what_the_rule_would_have_got_wrong() {
        let history = vec![
            item("a", 10, "approved", "ann"),
            item("b", 20, "denied", "bob"),
            item("c", 30, "expired", "ann"),
            item("d", 500, "denied", "bob"),
            item("e", 15, "approved", "rule:old"),
            item("f", 25, "approved_with_changes", "ann"),
        ];
        let auto = rule("small", "args.amount < 100", RuleAction::AutoApprove, RuleMode::Enforce).compiled().unwrap();
        let report = try_on_history(&auto, &history, 50);
        assert_eq!(report.requests, 5, "the rule-decided request is left out");
        assert_eq!(report.matched, 4);
        assert_eq!(report.matched_people_approved, 2);
        assert_eq!(report.matched_people_denied, 1);
        assert_eq!(report.matched_undecided, 1);
        let listed: Vec<&str> = report.disagreements.iter().map(|d| d.approval_id.as_str()).collect();
        assert_eq!(listed, vec!["b"]);
        let deny = rule("big", "args.amount < 30", RuleAction::Deny, RuleMode::Enforce).compiled().unwrap();
        let listed: Vec<String> =
            try_on_history(&deny, &history, 50).disagreements.into_iter().map(|d| d.approval_id).collect();
        assert_eq!(listed, vec!["a", "f"]);
        let broken = rule("x", "args.to == 'a'", RuleAction::Deny, RuleMode::Enforce).compiled().unwrap();
        let report = try_on_history(&broken, &history, 50);
        assert_eq!((report.matched, report.errors), (0, 5));
        assert!(report.first_error.unwrap().contains("request a"));
    }
}
