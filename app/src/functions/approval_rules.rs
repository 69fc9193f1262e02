//! Approval rules for the admin page: the rules with each shadow rule's report, saving
//! (refused with the expression's position when it does not parse), deleting, and "try on
//! history". Administrators only; every change is audited.

use crate::errors::AppError;
use domain::approvals::rules::{ApprovalRule, HistoryReport};
use leptos::prelude::*;
use serde::{Deserialize, Serialize};

/// One rule as the page lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RuleView {
    pub rule: ApprovalRule,
    /// For a rule in shadow mode: what it would have done with the requests filed while
    /// it ran, beside what was decided.
    pub shadow: Option<HistoryReport>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RulesPage {
    pub rules: Vec<RuleView>,
    /// The tool policies' patterns, the rules' owners.
    pub policies: Vec<String>,
}

/// How many disagreements a report lists.
#[cfg(feature = "ssr")]
const LIST_LIMIT: usize = 100;

#[server(prefix = "/fn", endpoint = "load_rules")]
pub async fn load_rules() -> Result<RulesPage, AppError> {
    use super::ssr;
    use domain::approvals::rules::{shadow_report, RuleMode};
    use store::{approval_rules, policies};
    ssr::require(domain::access::Role::Admin)?;
    let db = ssr::db()?;
    let mut rules = Vec::new();
    for rule in approval_rules::list(&db).await? {
        let shadow = if rule.mode == RuleMode::Shadow {
            let recorded: Vec<_> =
                approval_rules::shadow_history(&db, &rule.name).await?.into_iter().map(|(i, _, w)| (i, w)).collect();
            Some(shadow_report(&recorded, LIST_LIMIT))
        } else {
            None
        };
        rules.push(RuleView { rule, shadow });
    }
    let policies = policies::list(&db).await?.into_iter().map(|p| p.pattern).collect();
    Ok(RulesPage { rules, policies })
}

#[cfg(feature = "ssr")]
fn parse_rule(
    name: String,
    tool_pattern: String,
    position: Option<String>,
    expression: String,
    action: String,
    approvers: Option<String>,
    role: Option<String>,
    reason: Option<String>,
    mode: Option<String>,
) -> Result<ApprovalRule, String> {
    use domain::approvals::rules::{RuleAction, RuleMode};
    let text = |v: Option<String>| v.map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
    let action = RuleAction::parse(&action)
        .ok_or_else(|| format!("unknown action `{action}` (expected auto_approve, require_approval or deny)"))?;
    let number = |field: &str, v: Option<String>, default: i64| match text(v) {
        None => Ok(default),
        Some(t) => t.parse::<i64>().map_err(|_| format!("{field} must be a whole number, got `{t}`")),
    };
    let mode = match text(mode) {
        None => RuleMode::Shadow,
        Some(m) => {
            RuleMode::parse(&m).ok_or_else(|| format!("unknown mode `{m}` (expected off, shadow or enforce)"))?
        }
    };
    let role = match text(role) {
        None => None,
        Some(r) => Some(r.parse()?),
    };
    let rule = ApprovalRule {
        name: name.trim().to_string(),
        tool_pattern: tool_pattern.trim().to_string(),
        position: number("position", position, 0)?,
        expression: expression.trim().to_string(),
        action,
        approvers: number("approvers", approvers, 1)?,
        role,
        reason: text(reason),
        mode,
    };
    rule.validate()?;
    Ok(rule)
}

/// Creates or replaces a rule. A new rule starts in shadow mode unless the form says
/// otherwise, so it is watched before it acts.
#[server(prefix = "/fn", endpoint = "save_rule")]
#[allow(clippy::too_many_arguments)]
pub async fn save_rule(
    name: String,
    tool_pattern: String,
    expression: String,
    action: String,
    #[server(default)] position: Option<String>,
    #[server(default)] approvers: Option<String>,
    #[server(default)] role: Option<String>,
    #[server(default)] reason: Option<String>,
    #[server(default)] mode: Option<String>,
) -> Result<(), AppError> {
    use super::ssr;
    use store::audit::action;
    use store::{approval_rules, policies};
    let admin = ssr::require(domain::access::Role::Admin)?;
    let db = ssr::db()?;
    let rule = match parse_rule(name, tool_pattern, position, expression, action, approvers, role, reason, mode) {
        Ok(rule) => rule,
        Err(why) => return ssr::fail(AppError::Invalid(why)),
    };
    if !policies::list(&db).await?.iter().any(|p| p.pattern == rule.tool_pattern) {
        return ssr::fail(AppError::Invalid(format!(
            "there is no tool policy `{}`; a rule belongs to a policy (Admin → Tool policies)",
            rule.tool_pattern
        )));
    }
    approval_rules::upsert(&db, &rule, &admin.username).await?;
    let detail =
        format!("{} on {}: when {} -> {} ({})", rule.name, rule.tool_pattern, rule.expression, rule.action, rule.mode);
    ssr::audit(&db, &admin, action::APPROVAL_RULE_SAVED, &rule.name, Some(&detail)).await
}

#[server(prefix = "/fn", endpoint = "delete_rule")]
pub async fn delete_rule(name: String) -> Result<(), AppError> {
    use super::ssr;
    use store::approval_rules;
    use store::audit::action;
    let admin = ssr::require(domain::access::Role::Admin)?;
    let db = ssr::db()?;
    if !approval_rules::delete(&db, &name).await? {
        return ssr::fail(AppError::NotFound(format!("rule `{name}`")));
    }
    ssr::audit(&db, &admin, action::APPROVAL_RULE_DELETED, &name, None).await
}

/// A rule held against the requests of the last `days` days for the tools its policy
/// pattern matches, before it is enabled.
#[server(prefix = "/fn", endpoint = "try_rule")]
pub async fn try_rule(
    tool_pattern: String,
    expression: String,
    action: String,
    #[server(default)] days: Option<String>,
) -> Result<HistoryReport, AppError> {
    use super::ssr;
    use domain::approvals::rules::try_on_history;
    use store::approval_rules;
    ssr::require(domain::access::Role::Admin)?;
    let db = ssr::db()?;
    let days = match days.as_deref().map(str::trim).filter(|d| !d.is_empty()) {
        None => 30,
        Some(d) => match d.parse::<i64>() {
            Ok(n) if (1..=365).contains(&n) => n,
            _ => return ssr::fail(AppError::Invalid(format!("days must be a whole number from 1 to 365, got `{d}`"))),
        },
    };
    let rule = parse_rule(
        "try".into(),
        tool_pattern.clone(),
        None,
        expression,
        action,
        None,
        None,
        Some("tried on history".into()),
        Some("off".into()),
    );
    let compiled = match rule.and_then(|r| r.compiled()) {
        Ok(c) => c,
        Err(why) => return ssr::fail(AppError::Invalid(why)),
    };
    let since = store::now_ms() - days * 86_400_000;
    let pattern = tool_pattern.trim();
    let tools: Vec<String> = approval_rules::tools_since(&db, since)
        .await?
        .into_iter()
        .filter(|t| domain::pattern::glob(pattern, t))
        .collect();
    let history = approval_rules::history(&db, &tools, since).await?;
    Ok(try_on_history(&compiled, &history, LIST_LIMIT))
}
