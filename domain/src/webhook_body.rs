//! The body a webhook target receives for an event, in the target's format: generic JSON
//! and Slack from `notify`, PagerDuty and Alertmanager from `alerts` (they speak of alerts
//! only, so an alert event carries its [`Alert`] in `data`). Its own module because it is
//! the one place that knows both.

use crate::alerts::{alertmanager, pagerduty, Alert};
use crate::approvals::slack::decision_blocks;
use crate::notify::{generic_json, slack_message, Event, EventKind, WebhookFormat, WebhookTarget};
use serde_json::Value;

/// The body, as sent at `now`, or why this target cannot be sent this event (a delivery
/// that then fails with that reason, listed under Admin → Webhooks).
pub fn render(
    target: &WebhookTarget,
    event: &Event,
    base_url: &str,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Value, String> {
    if !target.format.takes(event.kind) {
        return Err(format!("a {} target does not take {}", target.format.as_str(), event.kind));
    }
    match target.format {
        WebhookFormat::Json => Ok(generic_json(event, base_url)),
        WebhookFormat::Slack => Ok(with_decision_buttons(slack_message(event, base_url), event)),
        WebhookFormat::Pagerduty | WebhookFormat::Alertmanager | WebhookFormat::AlertmanagerApi => {
            let alert: Alert = serde_json::from_value(event.data.clone())
                .map_err(|e| format!("the {} event does not describe an alert: {e}", event.kind))?;
            let body = match target.format {
                WebhookFormat::Pagerduty => {
                    let key = target.routing_key.as_deref().ok_or("the pagerduty target has no routing_key")?;
                    pagerduty::message(event, &alert, key, base_url)
                }
                WebhookFormat::AlertmanagerApi => alertmanager::api_alerts(event, &alert, base_url, now),
                _ => alertmanager::message(event, &alert, &target.name, base_url),
            };
            body.ok_or_else(|| format!("a {} target does not take {}", target.format.as_str(), event.kind))
        }
    }
}

/// An `approval.requested` Slack message with the exact arguments and Approve / Deny
/// buttons bound to their hash, placed before the closing context line. Without Slack's
/// interactivity set up the buttons answer with Slack's own error and the link still
/// works; arguments too long to show leave the message without buttons.
fn with_decision_buttons(mut message: Value, event: &Event) -> Value {
    if event.kind != EventKind::ApprovalRequested {
        return message;
    }
    let field = |name: &str| event.data[name].as_str().unwrap_or_default().to_string();
    let (id, hash, arguments) = (field("id"), field("payload_sha256"), field("arguments"));
    // Buttons only for a request the event names with the hash and payload it shows.
    if id.is_empty() || hash.is_empty() || arguments.is_empty() {
        return message;
    }
    let Some(extra) = decision_blocks(&id, &hash, &arguments) else {
        return message;
    };
    if let Some(blocks) = message["blocks"].as_array_mut() {
        let at = blocks.len().saturating_sub(1);
        for (i, block) in extra.into_iter().enumerate() {
            blocks.insert(at + i, block);
        }
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::notify::WebhookTarget;

    fn event(data: Value) -> Event {
        Event {
            kind: EventKind::ApprovalRequested,
            title: "Approval requested: refund".into(),
            summary: "Decide".into(),
            link_path: "/approvals/apr_1".into(),
            fields: vec![],
            data,
        }
    }

    #[test]
    fn slack_gets_buttons_only_for_a_request_named_with_its_hash_and_payload() {
        let slack = WebhookTarget { format: WebhookFormat::Slack, ..WebhookTarget::default() };
        let full = event(serde_json::json!({"id": "apr_1", "payload_sha256": "abc", "arguments": "{\"amount\":5}"}));
        let body = render(&slack, &full, "https://fd.example", chrono::Utc::now()).unwrap();
        let blocks = body["blocks"].as_array().unwrap();
        let actions = blocks.iter().find(|b| b["type"] == "actions").expect("buttons");
        assert_eq!(actions["elements"][0]["value"], "apr_1:abc");
        assert_eq!(blocks.last().unwrap()["type"], "context", "the context line stays last");
        let bare = event(serde_json::json!({"approval_id": "apr_1"}));
        let body = render(&slack, &bare, "https://fd.example", chrono::Utc::now()).unwrap();
        assert_eq!(body, slack_message(&bare, "https://fd.example"), "no buttons without the hash and payload");
    }
}
