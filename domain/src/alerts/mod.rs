//! Alerts for on-call: page on what must never happen, never on a single tool failure.
//!
//! Shared types here. `settings` holds each rule's editable thresholds and their defaults;
//! `rules` (pure) turns a window of data into findings, one function per rule;
//! `lifecycle` (pure) turns findings and the alerts already open into transitions (fire,
//! update, resolve after the hold time); `notification` (pure) words an alert for webhooks.
//! `services::alert_evaluation` reads the windows from storage, runs them, and records the
//! result with its webhooks. Storage is in `storage::alerts`; the periodic loop and its
//! leader election are in the server crate.

use crate::vocabulary::vocabulary;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

#[cfg(feature = "server")]
pub mod alertmanager;
pub mod lifecycle;
#[cfg(feature = "server")]
pub mod notification;
#[cfg(feature = "server")]
pub mod pagerduty;
pub mod rules;
pub mod settings;
pub mod silences;

vocabulary! {
    /// The seven rules. Each has one pure function in [`rules`].
    AlertRule {
        /// Irreversible tool executions over an absolute count in a window.
        IrreversibleExecutions = "irreversible_executions",
        /// A tool call that needed an approval ran without a valid one.
        ApprovalViolation = "approval_violation",
        /// The share of `deduped` tool calls well above its trailing baseline.
        DedupedSpike = "deduped_spike",
        /// An escalation waiting longer than anyone should.
        EscalationBacklog = "escalation_backlog",
        /// p95 or p99 cost per run above a multiple of its trailing baseline.
        CostPerRunJump = "cost_per_run_jump",
        /// Runs that ended in `error` after a failed tool call, over a count.
        FailedToRecover = "failed_to_recover",
        /// A guarded call whose outcome nobody knows, for longer than a threshold.
        CallOutcomeUnknown = "call_outcome_unknown",
        /// An agent's pass rate in regression tests from replay fixtures below a threshold.
        ReplayPassRate = "replay_pass_rate",
    }
}

impl AlertRule {
    /// The rule's name as on-call reads it.
    pub fn title(self) -> &'static str {
        match self {
            AlertRule::IrreversibleExecutions => "Irreversible tool executions",
            AlertRule::ApprovalViolation => "Tool ran without a valid approval",
            AlertRule::DedupedSpike => "Deduplicated-call spike",
            AlertRule::EscalationBacklog => "Escalation backlog",
            AlertRule::CostPerRunJump => "Cost per run jump",
            AlertRule::FailedToRecover => "Runs failed to recover",
            AlertRule::CallOutcomeUnknown => "Guarded call of unknown outcome",
            AlertRule::ReplayPassRate => "Replay tests failing",
        }
    }

    /// What the rule watches and why it pages.
    pub fn description(self) -> &'static str {
        match self {
            AlertRule::IrreversibleExecutions => {
                "More irreversible tool executions (ok, error or timeout) in the window than the limit: a count, \
                 not a rate, because each one changed the world for good. Optional limits per tool."
            }
            AlertRule::ApprovalViolation => {
                "Any tool call that needed an approval and ran without a valid one (none, unknown, not approved, \
                 reused, different arguments, over the run limit). One occurrence is enough."
            }
            AlertRule::DedupedSpike => {
                "The share of tool calls answered as deduplicated in the window, against its trailing baseline: \
                 agents retrying side effects far more than usual."
            }
            AlertRule::EscalationBacklog => {
                "An open escalation older than the threshold (or, if set, only one nobody has claimed): a run \
                 is waiting for a person."
            }
            AlertRule::CostPerRunJump => {
                "p95 or p99 cost per run in the window above a multiple of the same percentile over the \
                 trailing baseline. Percentiles, not the mean: one runaway run should show."
            }
            AlertRule::FailedToRecover => {
                "Runs that ended in error after a failed tool call (error or timeout), over a count in the \
                 window: agents that hit a failure and did not recover."
            }
            AlertRule::CallOutcomeUnknown => {
                "A guarded call (the execution ledger) that started and never reported, for longer than the \
                 threshold: it may or may not have happened, and until a person settles it the agent cannot go on \
                 safely. Also catches agents that died mid-call and never asked again."
            }
            AlertRule::ReplayPassRate => {
                "An agent's pass rate in the regression tests your team runs from replay fixtures, over the \
                 window, below the threshold (with at least 10 results): a prompt or model change broke runs \
                 that used to work. A trend to look at, so a ticket by default."
            }
        }
    }
}

vocabulary! {
    /// How loudly an alert asks for attention (the article's split: what pages now and
    /// what waits).
    Severity {
        /// Wake someone up now.
        Page = "page",
        /// Someone looks within the working day.
        Ticket = "ticket",
        /// Shown in Flightdeck; notifies only a route that asks for `info`.
        Info = "info",
    }
}

vocabulary! {
    /// Where an alert is in its life.
    AlertState {
        /// Breaching now (or within the hold time), nobody has acknowledged it.
        Firing = "firing",
        /// Still breaching, and a person said they are on it.
        Acknowledged = "acknowledged",
        /// Not breached for the hold time. Final: a new breach opens a new alert.
        Resolved = "resolved",
    }
}

/// What a linked item is, so the page can link to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ItemKind {
    Run,
    Approval,
    Escalation,
}

/// One run, approval or escalation behind an alert, with a short note of why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AlertItem {
    pub kind: ItemKind,
    pub id: String,
    /// Agent-supplied text may be in here (tool names): render as text.
    pub note: String,
}

/// How a rule's value is measured, for display.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Unit {
    Count,
    Percent,
    Seconds,
    Usd,
}

impl Unit {
    /// `value` as on-call reads it: "21", "12.5%", "17 min", "$0.4200".
    pub fn format(self, value: f64) -> String {
        match self {
            Unit::Count => format!("{}", value.round() as i64),
            Unit::Percent => format!("{value:.1}%"),
            Unit::Seconds if value >= 3600.0 => format!("{:.1} h", value / 3600.0),
            Unit::Seconds if value >= 60.0 => format!("{} min", (value / 60.0).floor() as i64),
            Unit::Seconds => format!("{} s", value.round() as i64),
            Unit::Usd => format!("${value:.4}"),
        }
    }
}

/// One alert as stored and shown.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Alert {
    pub id: String,
    pub rule: AlertRule,
    /// What within the rule breached: empty for the rule as a whole, `tool:NAME` for a
    /// per-tool limit. One alert that is not resolved per (rule, subject).
    pub subject: String,
    pub severity: Severity,
    pub state: AlertState,
    /// One line: what is wrong, with the figure.
    pub title: String,
    pub value: f64,
    pub threshold: f64,
    pub unit: Unit,
    pub items: Vec<AlertItem>,
    pub fired_at: DateTime<Utc>,
    /// The last evaluation that found the rule breached.
    pub last_breach_at: DateTime<Utc>,
    pub acknowledged_by: Option<String>,
    pub acknowledged_at: Option<DateTime<Utc>>,
    pub resolved_at: Option<DateTime<Utc>>,
    /// The silence that held back this alert's notifications, if one did.
    #[serde(default)]
    pub silenced_by: Option<String>,
    /// The version of the rule's settings in force when it fired (0: the defaults; None:
    /// fired before versions were kept).
    #[serde(default)]
    pub rule_version: Option<i64>,
    /// When its firing was sent to its route's targets; None while a silence holds it
    /// back. Once notified, its acknowledgement and resolution are sent too.
    #[serde(default)]
    pub notified_at: Option<DateTime<Utc>>,
    /// How many items were behind it when more than [`rules::MAX_ITEMS`] were (only the
    /// first ones are kept); None when `items` are all of them.
    #[serde(default)]
    pub items_total: Option<i64>,
}

impl ItemKind {
    /// "run", "approval", "escalation"; with `n`, the plural when it is not 1.
    pub fn noun(self, n: usize) -> String {
        let one = match self {
            ItemKind::Run => "run",
            ItemKind::Approval => "approval request",
            ItemKind::Escalation => "escalation",
        };
        format!("{n} {one}{}", if n == 1 { "" } else { "s" })
    }
}

/// What the list behind an alert holds, counted by kind, so the count beside the list
/// says what it counts: "2 runs", "1 run and 1 approval request", or for a list cut short
/// "the first 50 of 73: 50 runs".
pub fn behind_it(items: &[AlertItem], total: Option<i64>) -> String {
    let mut parts = Vec::new();
    for kind in [ItemKind::Run, ItemKind::Approval, ItemKind::Escalation] {
        let n = items.iter().filter(|i| i.kind == kind).count();
        if n > 0 {
            parts.push(kind.noun(n));
        }
    }
    let listed = match parts.len() {
        0 => "nothing".to_string(),
        1 => parts.remove(0),
        _ => {
            let last = parts.pop().unwrap_or_default();
            format!("{} and {last}", parts.join(", "))
        }
    };
    match total {
        Some(total) if total > items.len() as i64 => format!("the first {} of {total}: {listed}", items.len()),
        _ => listed,
    }
}

/// One entry of an alert's timeline (`alert_events`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AlertEvent {
    pub at: DateTime<Utc>,
    /// `fired`, `refreshed`, `acknowledged`, `silenced`, `unsilenced`, `notified`, `resolved`.
    pub kind: String,
    pub actor: Option<String>,
    /// Agent text may be in here (titles name tools): render as text.
    pub detail: Option<String>,
}

impl AlertEvent {
    /// The entry as a sentence's start: "Fired", "Silenced by olga", "Value changed".
    pub fn headline(&self) -> String {
        let what = match self.kind.as_str() {
            "fired" => "Fired",
            "refreshed" => "Still breaching, changed",
            "acknowledged" => "Acknowledged",
            "silenced" => "Silenced: further notifications held back",
            "unsilenced" => "Silence over",
            "notified" => "Silence over: notified",
            "resolved" => "Resolved",
            other => other,
        };
        match &self.actor {
            Some(who) => format!("{what} by {who}"),
            None => what.to_string(),
        }
    }
}

/// "17 min" style length of a window, for titles.
pub fn window_text(seconds: i64) -> String {
    if seconds % 86_400 == 0 && seconds >= 86_400 {
        format!("{} d", seconds / 86_400)
    } else if seconds % 3600 == 0 && seconds >= 3600 {
        format!("{} h", seconds / 3600)
    } else if seconds % 60 == 0 && seconds >= 60 {
        format!("{} min", seconds / 60)
    } else {
        format!("{seconds} s")
    }
}

/// An alert for the formats' tests.
#[cfg(test)]
pub(crate) mod tests_support {
    use super::*;
    use chrono::TimeZone;

    pub fn alert() -> Alert {
        let fired_at = Utc.with_ymd_and_hms(2026, 12, 4, 10, 0, 0).unwrap();
        Alert {
            id: "alr_1".into(),
            rule: AlertRule::ApprovalViolation,
            subject: String::new(),
            severity: Severity::Page,
            state: AlertState::Firing,
            title: "2 tool calls ran without a valid approval in 15 min (limit 0)".into(),
            value: 2.0,
            threshold: 0.0,
            unit: Unit::Count,
            items: vec![AlertItem { kind: ItemKind::Run, id: "run-1".into(), note: "send_email: no approval".into() }],
            fired_at,
            last_breach_at: fired_at,
            acknowledged_by: None,
            acknowledged_at: None,
            resolved_at: None,
            silenced_by: None,
            rule_version: Some(0),
            notified_at: Some(fired_at),
            items_total: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_and_windows_read_naturally() {
        assert_eq!(Unit::Count.format(21.0), "21");
        assert_eq!(Unit::Percent.format(12.54), "12.5%");
        assert_eq!(Unit::Seconds.format(59.0), "59 s");
        assert_eq!(Unit::Seconds.format(1020.0), "17 min");
        assert_eq!(Unit::Seconds.format(5400.0), "1.5 h");
        assert_eq!(Unit::Usd.format(0.42), "$0.4200");
        assert_eq!(window_text(600), "10 min");
        assert_eq!(window_text(3600), "1 h");
        assert_eq!(window_text(86_400), "1 d");
        assert_eq!(window_text(90), "90 s");
    }

    #[test]
    fn what_is_behind_an_alert_is_counted_by_kind() {
        let run = |id: &str| AlertItem { kind: ItemKind::Run, id: id.into(), note: String::new() };
        let approval = AlertItem { kind: ItemKind::Approval, id: "apr_1".into(), note: String::new() };
        assert_eq!(behind_it(&[run("a"), run("b")], None), "2 runs");
        assert_eq!(behind_it(&[run("a"), approval.clone()], None), "1 run and 1 approval request");
        let esc = AlertItem { kind: ItemKind::Escalation, ..approval.clone() };
        assert_eq!(behind_it(&[run("a"), approval, esc], None), "1 run, 1 approval request and 1 escalation");
        assert_eq!(behind_it(&[run("a"), run("b")], Some(73)), "the first 2 of 73: 2 runs");
        assert_eq!(behind_it(&[run("a")], Some(1)), "1 run");
    }

    #[test]
    fn rule_names_round_trip() {
        for rule in AlertRule::ALL {
            assert_eq!(AlertRule::parse(rule.as_str()), Some(*rule));
            assert!(!rule.title().is_empty() && !rule.description().is_empty());
        }
    }
}
