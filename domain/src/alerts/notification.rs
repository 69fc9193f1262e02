//! How an alert becomes a notification (pure): the title, summary, fields and link a
//! webhook, Slack or PagerDuty message carries when it fires or resolves.

use super::{Alert, AlertRule, ItemKind, Severity};
use crate::notify::{AlertRoute, Event, EventKind};
use chrono::{DateTime, Utc};

/// The id prefix of the alerts `flightdeck alerts test` and the admin button send.
pub const TEST_PREFIX: &str = "test_";

/// An alert for testing a route: never stored, sent firing and then resolved to the
/// route's targets, and saying so in every title. `rule` and `severity` are what the
/// route matches (the first of each it names), so a receiver sees what a real one would.
pub fn test_alert(route: &str, rule: AlertRule, severity: Severity, id: &str, now: DateTime<Utc>) -> Alert {
    Alert {
        id: format!("{TEST_PREFIX}{id}"),
        rule,
        subject: String::new(),
        severity,
        state: super::AlertState::Firing,
        title: format!("A test of the alert route `{route}` from Flightdeck: nothing is wrong"),
        value: 0.0,
        threshold: 0.0,
        unit: super::Unit::Count,
        items: Vec::new(),
        fired_at: now,
        last_breach_at: now,
        acknowledged_by: None,
        acknowledged_at: None,
        resolved_at: None,
        silenced_by: None,
        rule_version: None,
        notified_at: Some(now),
        items_total: None,
    }
}

/// The webhook event for an alert that fired, was acknowledged or resolved.
pub fn event(alert: &Alert, kind: EventKind) -> Event {
    let mut event = describe(alert, kind);
    if alert.id.starts_with(TEST_PREFIX) {
        event.title = format!("TEST {}: {}", alert.id, event.title);
    }
    event
}

fn describe(alert: &Alert, kind: EventKind) -> Event {
    let (title, summary) = match kind {
        EventKind::AlertResolved => {
            (format!("Resolved: {}", alert.rule.title()), format!("No longer breached. It was: {}", alert.title))
        }
        EventKind::AlertAcknowledged => (
            format!("Acknowledged: {}", alert.rule.title()),
            format!("{} is on it. {}", alert.acknowledged_by.as_deref().unwrap_or("Someone"), alert.title),
        ),
        _ => (
            format!("{} alert: {}", capitalised(alert.severity.as_str()), alert.rule.title()),
            format!("{}. Acknowledge it in Flightdeck.", alert.title),
        ),
    };
    let mut fields = vec![
        ("Value".to_string(), alert.unit.format(alert.value)),
        ("Threshold".to_string(), alert.unit.format(alert.threshold)),
        ("Since".to_string(), alert.fired_at.format("%Y-%m-%d %H:%M:%S UTC").to_string()),
    ];
    if let Some(tool) = alert.subject.strip_prefix("tool:") {
        fields.push(("Tool".to_string(), tool.to_string()));
    }
    let runs: Vec<&str> =
        alert.items.iter().filter(|i| i.kind == ItemKind::Run).take(5).map(|i| i.id.as_str()).collect();
    if !runs.is_empty() {
        fields.push(("Runs".to_string(), runs.join(", ")));
    }
    Event {
        kind,
        title,
        summary,
        link_path: format!("/alerts/{}", crate::url::encode(&alert.id)),
        fields,
        data: serde_json::to_value(alert).unwrap_or_default(),
    }
}

/// Checks that every rule and severity an alert route names exists (the rest of a route
/// is checked by `Notifications::validate`).
pub fn validate_route_names(routes: &[AlertRoute]) -> Result<(), String> {
    for r in routes {
        if let Some(bad) = r.rules.iter().flatten().find(|n| !AlertRule::ALL.iter().any(|r| r.as_str() == n.as_str())) {
            let known: Vec<&str> = AlertRule::ALL.iter().map(|r| r.as_str()).collect();
            return Err(format!("alert route `{}`: no rule `{bad}` (rules: {})", r.name, known.join(", ")));
        }
        if let Some(bad) =
            r.severities.iter().flatten().find(|n| !Severity::ALL.iter().any(|s| s.as_str() == n.as_str()))
        {
            return Err(format!("alert route `{}`: no severity `{bad}` (page, ticket or info)", r.name));
        }
    }
    Ok(())
}

fn capitalised(s: &str) -> String {
    let mut chars = s.chars();
    chars.next().map(|c| c.to_uppercase().chain(chars).collect()).unwrap_or_default()
}
