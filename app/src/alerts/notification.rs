//! How an alert becomes a notification (pure): the title, summary, fields and link a
//! webhook, Slack or PagerDuty message carries when it fires or resolves.

use super::{Alert, ItemKind};
use crate::notify::{Event, EventKind};

/// The webhook event for an alert that fired or resolved.
pub fn event(alert: &Alert, kind: EventKind) -> Event {
    let (title, summary) = match kind {
        EventKind::AlertResolved => {
            (format!("Resolved: {}", alert.rule.title()), format!("No longer breached. It was: {}", alert.title))
        }
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

fn capitalised(s: &str) -> String {
    let mut chars = s.chars();
    chars.next().map(|c| c.to_uppercase().chain(chars).collect()).unwrap_or_default()
}
