//! Alertmanager, two ways (pure).
//!
//! [`message`]: its webhook receiver format (version 4), the body Alertmanager itself
//! sends to a `webhook_config` receiver. Teams whose incident tooling already takes
//! Alertmanager's webhooks (or who relay through a receiver of their own) point a target
//! of format `alertmanager` at it and get Flightdeck's alerts in the shape they already
//! parse: one alert per message, `firing` then `resolved`, labels `alertname`,
//! `severity`, `source` and (for a per-tool limit) `tool`.
//!
//! [`api_alerts`]: a client of Alertmanager's API (format `alertmanager_api`): Flightdeck
//! posts its alerts into Alertmanager (`POST /api/v2/alerts`, an array), as Prometheus
//! does, so Alertmanager's own routing, grouping, inhibition and silences apply. A firing
//! alert is re-sent every [`RESEND_EVERY_MS`] while it fires with an `endsAt` a few
//! re-sends ahead ([`ENDS_AFTER_MS`]): Alertmanager resolves an alert whose `endsAt`
//! passes, so one Flightdeck stopped re-sending (it went away) resolves there after that
//! long instead of firing forever. The resolution carries the real `endsAt`.

use super::Alert;
use crate::notify::{event_url, Event, EventKind};
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

/// Alertmanager's "not ended" time.
const NOT_ENDED: &str = "0001-01-01T00:00:00Z";

/// The message for `alert`, addressed from the receiver `receiver` (the target's name);
/// `None` for an event kind Alertmanager has no word for (acknowledgements).
pub fn message(event: &Event, alert: &Alert, receiver: &str, base_url: &str) -> Option<Value> {
    let status = match event.kind {
        EventKind::AlertFiring => "firing",
        EventKind::AlertResolved => "resolved",
        _ => return None,
    };
    let time = |t: chrono::DateTime<chrono::Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let labels = labels(alert);
    let annotations = json!({ "summary": alert.rule.title(), "description": alert.title });
    let ends_at = match (status, alert.resolved_at) {
        ("resolved", Some(at)) => time(at),
        _ => NOT_ENDED.to_string(),
    };
    let one = json!({
        "status": status,
        "labels": labels,
        "annotations": annotations,
        "startsAt": time(alert.fired_at),
        "endsAt": ends_at,
        "generatorURL": event_url(event, base_url),
        "fingerprint": fingerprint(&alert.id),
    });
    Some(json!({
        "version": "4",
        "groupKey": format!("{{}}:{{alertname=\"{}\"}}", alert.rule.as_str()),
        "truncatedAlerts": 0,
        "status": status,
        "receiver": receiver,
        "groupLabels": { "alertname": alert.rule.as_str() },
        "commonLabels": labels,
        "commonAnnotations": annotations,
        "externalURL": base_url.trim_end_matches('/'),
        "alerts": [one],
    }))
}

/// How often a firing alert is re-sent to Alertmanager's API: well inside its default
/// `resolve_timeout` (5 min), as Prometheus re-sends every minute.
pub const RESEND_EVERY_MS: i64 = 60_000;
/// How far ahead of a send a firing alert's `endsAt` lies: four re-sends, so a re-send or
/// two lost on the way do not resolve it.
pub const ENDS_AFTER_MS: i64 = 4 * RESEND_EVERY_MS;

/// The labels of an alert: what Alertmanager identifies, routes, groups and silences it by.
fn labels(alert: &Alert) -> Map<String, Value> {
    let mut labels = Map::new();
    labels.insert("alertname".into(), json!(alert.rule.as_str()));
    labels.insert("severity".into(), json!(alert.severity.as_str()));
    labels.insert("source".into(), json!("flightdeck"));
    if let Some(tool) = alert.subject.strip_prefix("tool:") {
        labels.insert("tool".into(), json!(tool));
    }
    if let Some(agent) = alert.subject.strip_prefix("agent:") {
        labels.insert("agent".into(), json!(agent));
    }
    labels
}

/// The body for Alertmanager's `POST /api/v2/alerts` (an array of one alert), as sent
/// `now`; `None` for an event kind it has no word for (acknowledgements). Each Flightdeck
/// alert is its own Alertmanager alert (label `flightdeck_alert`), so a resolution that
/// arrives late never resolves the next alert of the same rule.
pub fn api_alerts(event: &Event, alert: &Alert, base_url: &str, now: chrono::DateTime<chrono::Utc>) -> Option<Value> {
    let time = |t: chrono::DateTime<chrono::Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let ends_at = match event.kind {
        EventKind::AlertFiring => now + chrono::Duration::milliseconds(ENDS_AFTER_MS),
        EventKind::AlertResolved => alert.resolved_at.unwrap_or(now),
        _ => return None,
    };
    let mut labels = labels(alert);
    labels.insert("flightdeck_alert".into(), json!(alert.id));
    Some(json!([{
        "labels": labels,
        "annotations": { "summary": alert.rule.title(), "description": alert.title },
        "startsAt": time(alert.fired_at),
        "endsAt": time(ends_at),
        "generatorURL": event_url(event, base_url),
    }]))
}

/// 16 hex digits identifying the alert, as Alertmanager's fingerprints look.
fn fingerprint(alert_id: &str) -> String {
    hex::encode(&Sha256::digest(alert_id.as_bytes())[..8])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alerts::notification;
    use crate::alerts::tests_support::alert;

    #[test]
    fn firing_and_resolved_have_alertmanagers_shape() {
        let mut a = alert();
        a.subject = "tool:delete_account".into();
        let fired =
            message(&notification::event(&a, EventKind::AlertFiring), &a, "team-pager", "https://fd.example/").unwrap();
        assert_eq!(fired["version"], "4");
        assert_eq!(fired["status"], "firing");
        assert_eq!(fired["receiver"], "team-pager");
        assert_eq!(fired["externalURL"], "https://fd.example");
        assert_eq!(fired["groupLabels"], json!({ "alertname": "approval_violation" }));
        let one = &fired["alerts"][0];
        assert_eq!(
            one["labels"],
            json!({ "alertname": "approval_violation", "severity": "page", "source": "flightdeck", "tool": "delete_account" })
        );
        assert_eq!(one["endsAt"], NOT_ENDED);
        assert_eq!(one["startsAt"], "2026-12-04T10:00:00.000Z");
        assert_eq!(one["generatorURL"], "https://fd.example/alerts/alr_1");
        assert_eq!(one["fingerprint"].as_str().unwrap().len(), 16);

        a.resolved_at = Some(a.fired_at + chrono::Duration::minutes(5));
        let resolved =
            message(&notification::event(&a, EventKind::AlertResolved), &a, "team-pager", "https://fd.example")
                .unwrap();
        assert_eq!(resolved["status"], "resolved");
        assert_eq!(resolved["alerts"][0]["endsAt"], "2026-12-04T10:05:00.000Z");
        assert_eq!(resolved["alerts"][0]["fingerprint"], one["fingerprint"], "the same alert");
        assert!(message(&notification::event(&a, EventKind::AlertAcknowledged), &a, "r", "https://x").is_none());
    }

    #[test]
    fn the_api_gets_an_array_ending_ahead_while_firing_and_at_the_resolution() {
        use chrono::TimeZone;
        let mut a = alert();
        a.subject = "agent:billing-bot".into();
        let now = chrono::Utc.with_ymd_and_hms(2026, 12, 4, 10, 3, 0).unwrap();
        let firing =
            api_alerts(&notification::event(&a, EventKind::AlertFiring), &a, "https://fd.example", now).unwrap();
        let one = &firing.as_array().expect("an array")[0];
        assert_eq!(
            one["labels"],
            json!({ "alertname": "approval_violation", "severity": "page", "source": "flightdeck",
                    "agent": "billing-bot", "flightdeck_alert": "alr_1" })
        );
        assert_eq!(one["annotations"]["summary"], "Tool ran without a valid approval");
        assert_eq!(one["startsAt"], "2026-12-04T10:00:00.000Z");
        assert_eq!(one["endsAt"], "2026-12-04T10:07:00.000Z", "four re-sends ahead");
        assert_eq!(one["generatorURL"], "https://fd.example/alerts/alr_1");
        a.resolved_at = Some(a.fired_at + chrono::Duration::minutes(5));
        let resolved =
            api_alerts(&notification::event(&a, EventKind::AlertResolved), &a, "https://fd.example", now).unwrap();
        assert_eq!(resolved[0]["endsAt"], "2026-12-04T10:05:00.000Z");
        assert!(api_alerts(&notification::event(&a, EventKind::AlertAcknowledged), &a, "x", now).is_none());
        assert_eq!(
            crate::notify::WebhookFormat::AlertmanagerApi.post_url("http://am:9093/"),
            "http://am:9093/api/v2/alerts"
        );
    }
}
