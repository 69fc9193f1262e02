//! The body a webhook target receives for an event, in the target's format: generic JSON
//! and Slack from `notify`, PagerDuty and Alertmanager from `alerts` (they speak of alerts
//! only, so an alert event carries its [`Alert`] in `data`). Its own module because it is
//! the one place that knows both.

use crate::alerts::{alertmanager, pagerduty, Alert};
use crate::notify::{generic_json, slack_message, Event, WebhookFormat, WebhookTarget};
use serde_json::Value;

/// The body, or why this target cannot be sent this event (a delivery that then fails
/// with that reason, listed under Admin → Webhooks).
pub fn render(target: &WebhookTarget, event: &Event, base_url: &str) -> Result<Value, String> {
    if !target.format.takes(event.kind) {
        return Err(format!("a {} target does not take {}", target.format.as_str(), event.kind));
    }
    match target.format {
        WebhookFormat::Json => Ok(generic_json(event, base_url)),
        WebhookFormat::Slack => Ok(slack_message(event, base_url)),
        WebhookFormat::Pagerduty | WebhookFormat::Alertmanager => {
            let alert: Alert = serde_json::from_value(event.data.clone())
                .map_err(|e| format!("the {} event does not describe an alert: {e}", event.kind))?;
            let body = match target.format {
                WebhookFormat::Pagerduty => {
                    let key = target.routing_key.as_deref().ok_or("the pagerduty target has no routing_key")?;
                    pagerduty::message(event, &alert, key, base_url)
                }
                _ => alertmanager::message(event, &alert, &target.name, base_url),
            };
            body.ok_or_else(|| format!("a {} target does not take {}", target.format.as_str(), event.kind))
        }
    }
}
