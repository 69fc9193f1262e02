//! PagerDuty Events API v2 (`https://events.pagerduty.com/v2/enqueue`): an alert that
//! fires triggers an incident, one acknowledged in Flightdeck acknowledges it, and one
//! that resolves resolves it. The three share one `dedup_key` per alert, which is what
//! lets PagerDuty tie them to the same incident (and drop a re-sent trigger).

use super::{Alert, Severity};
use crate::notify::{event_url, Event, EventKind};
use serde_json::{json, Value};

/// PagerDuty refuses a summary longer than this.
const SUMMARY_MAX: usize = 1024;
/// Items listed in the incident's details; the alert page has all of them.
const ITEMS_MAX: usize = 10;

/// The incident key of an alert: stable for its whole life, different for the next alert
/// of the same rule (a new breach is a new incident).
pub fn dedup_key(alert: &Alert) -> String {
    format!("flightdeck/{}", alert.id)
}

/// PagerDuty's severity for ours.
pub fn severity(severity: Severity) -> &'static str {
    match severity {
        Severity::Page => "critical",
        Severity::Ticket => "warning",
        Severity::Info => "info",
    }
}

/// The event for `alert`; `None` for an event kind PagerDuty does not take.
pub fn message(event: &Event, alert: &Alert, routing_key: &str, base_url: &str) -> Option<Value> {
    let action = match event.kind {
        EventKind::AlertFiring => "trigger",
        EventKind::AlertAcknowledged => "acknowledge",
        EventKind::AlertResolved => "resolve",
        _ => return None,
    };
    let mut body = json!({
        "routing_key": routing_key,
        "event_action": action,
        "dedup_key": dedup_key(alert),
    });
    if action == "trigger" {
        let url = event_url(event, base_url);
        let summary: String = format!("{}: {}", alert.rule.title(), alert.title).chars().take(SUMMARY_MAX).collect();
        let items: Vec<Value> =
            alert.items.iter().take(ITEMS_MAX).map(|i| json!({ "kind": i.kind, "id": i.id, "note": i.note })).collect();
        body["payload"] = json!({
            "summary": summary,
            "source": "flightdeck",
            "severity": severity(alert.severity),
            "timestamp": alert.fired_at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            "component": alert.subject.strip_prefix("tool:").unwrap_or(alert.rule.as_str()),
            "group": "flightdeck",
            "class": alert.rule.as_str(),
            "custom_details": {
                "value": alert.unit.format(alert.value),
                "threshold": alert.unit.format(alert.threshold),
                "items": items,
            },
        });
        body["links"] = json!([{ "href": url, "text": "Open in Flightdeck" }]);
        body["client"] = json!("Flightdeck");
        body["client_url"] = json!(url);
    }
    Some(body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alerts::notification;
    use crate::alerts::tests_support::alert;

    #[test]
    fn trigger_acknowledge_and_resolve_share_the_alerts_dedup_key() {
        let a = alert();
        let fired =
            message(&notification::event(&a, EventKind::AlertFiring), &a, "R0UT1NG", "https://fd.example").unwrap();
        assert_eq!(fired["event_action"], "trigger");
        assert_eq!(fired["routing_key"], "R0UT1NG");
        assert_eq!(fired["dedup_key"], "flightdeck/alr_1");
        assert_eq!(fired["payload"]["severity"], "critical");
        assert_eq!(fired["payload"]["source"], "flightdeck");
        assert_eq!(fired["payload"]["class"], "approval_violation");
        assert!(fired["payload"]["summary"].as_str().unwrap().starts_with("Tool ran without a valid approval: "));
        assert_eq!(fired["links"][0]["href"], "https://fd.example/alerts/alr_1");
        for (kind, action) in [(EventKind::AlertAcknowledged, "acknowledge"), (EventKind::AlertResolved, "resolve")] {
            let later = message(&notification::event(&a, kind), &a, "R0UT1NG", "https://fd.example").unwrap();
            assert_eq!(
                later,
                json!({ "routing_key": "R0UT1NG", "event_action": action, "dedup_key": "flightdeck/alr_1" })
            );
        }
    }

    #[test]
    fn summaries_fit_and_other_events_are_not_sent() {
        let mut a = alert();
        a.title = "x".repeat(5000);
        let fired = message(&notification::event(&a, EventKind::AlertFiring), &a, "k", "https://fd.example").unwrap();
        assert_eq!(fired["payload"]["summary"].as_str().unwrap().chars().count(), SUMMARY_MAX);
        let mut approval = notification::event(&a, EventKind::AlertFiring);
        approval.kind = EventKind::ApprovalRequested;
        assert!(message(&approval, &a, "k", "https://fd.example").is_none());
    }
}
