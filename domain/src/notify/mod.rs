//! Notifications: what happened (an [`Event`]), who wants to hear about it (a
//! [`WebhookTarget`], and for alerts the [`routes`]), the generic JSON and Slack
//! formats (PagerDuty's and Alertmanager's, which only alerts use, are in `alerts`), how
//! deliveries are signed ([`signature`]), and the retry schedule. Pure: storage queues
//! the deliveries (`storage::webhooks`) and the server's worker sends them.
//!
//! One mechanism for every feature: approvals, escalations and alerts each build an
//! [`Event`] and call `storage::webhooks::enqueue`; nothing here knows about them.

pub mod routes;
pub mod signature;

pub use routes::{AlertRoute, Notifications};
pub use signature::SigningSecret;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::fmt;
use std::time::Duration;

/// What happened. The dotted names are what receivers see and what `events = [...]` in a
/// webhook's configuration lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EventKind {
    #[serde(rename = "approval.requested")]
    ApprovalRequested,
    #[serde(rename = "escalation.opened")]
    EscalationOpened,
    #[serde(rename = "alert.firing")]
    AlertFiring,
    #[serde(rename = "alert.acknowledged")]
    AlertAcknowledged,
    #[serde(rename = "alert.resolved")]
    AlertResolved,
}

impl EventKind {
    pub const ALL: [EventKind; 5] = [
        EventKind::ApprovalRequested,
        EventKind::EscalationOpened,
        EventKind::AlertFiring,
        EventKind::AlertAcknowledged,
        EventKind::AlertResolved,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::ApprovalRequested => "approval.requested",
            EventKind::EscalationOpened => "escalation.opened",
            EventKind::AlertFiring => "alert.firing",
            EventKind::AlertAcknowledged => "alert.acknowledged",
            EventKind::AlertResolved => "alert.resolved",
        }
    }

    /// About an alert (and so routed by `[[alert_routes]]`).
    pub fn is_alert(self) -> bool {
        matches!(self, EventKind::AlertFiring | EventKind::AlertAcknowledged | EventKind::AlertResolved)
    }

    pub fn parse(s: &str) -> Option<EventKind> {
        EventKind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One notification, as the feature that raised it describes it. Every text may come from
/// an agent and is untrusted: the formats escape it for their receiver.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub kind: EventKind,
    /// One line, e.g. "Approval requested: send_email".
    pub title: String,
    /// A sentence or two under the title.
    pub summary: String,
    /// Where to act, relative to the public URL, e.g. `/approvals/apr_x` (already
    /// URL-encoded where it holds agent-chosen ids).
    pub link_path: String,
    /// Short labelled facts shown as a list (agent, tool, run…), in this order.
    pub fields: Vec<(String, String)>,
    /// The machine-readable detail for generic receivers; not shown in Slack.
    pub data: Value,
}

/// The body a webhook receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WebhookFormat {
    /// [`generic_json`]
    #[default]
    Json,
    /// [`slack_message`], for Slack incoming webhooks and compatible receivers.
    Slack,
    /// PagerDuty Events API v2 (`alerts::pagerduty`): alerts only; needs `routing_key`.
    Pagerduty,
    /// Alertmanager's webhook receiver format (`alerts::alertmanager`): alerts only.
    Alertmanager,
    /// Alertmanager's own API (`POST {url}/api/v2/alerts`, `alerts::alertmanager`):
    /// alerts only, re-sent while they fire so Alertmanager's routing, grouping and
    /// silences apply.
    AlertmanagerApi,
}

impl WebhookFormat {
    pub const ALL: [WebhookFormat; 5] = [
        WebhookFormat::Json,
        WebhookFormat::Slack,
        WebhookFormat::Pagerduty,
        WebhookFormat::Alertmanager,
        WebhookFormat::AlertmanagerApi,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            WebhookFormat::Json => "json",
            WebhookFormat::Slack => "slack",
            WebhookFormat::Pagerduty => "pagerduty",
            WebhookFormat::Alertmanager => "alertmanager",
            WebhookFormat::AlertmanagerApi => "alertmanager_api",
        }
    }

    pub fn parse(s: &str) -> Option<WebhookFormat> {
        WebhookFormat::ALL.into_iter().find(|f| f.as_str() == s)
    }

    /// Whether a target of this format can say anything for `kind`: PagerDuty takes the
    /// three alert events, Alertmanager firing and resolved (it has no acknowledgement).
    pub fn takes(self, kind: EventKind) -> bool {
        match self {
            WebhookFormat::Json | WebhookFormat::Slack => true,
            WebhookFormat::Pagerduty => kind.is_alert(),
            WebhookFormat::Alertmanager | WebhookFormat::AlertmanagerApi => {
                matches!(kind, EventKind::AlertFiring | EventKind::AlertResolved)
            }
        }
    }

    /// Where a delivery to a target at `url` is posted: the URL itself, or for
    /// Alertmanager's API (whose targets name the Alertmanager) its alerts endpoint.
    pub fn post_url(self, url: &str) -> String {
        match self {
            WebhookFormat::AlertmanagerApi => format!("{}/api/v2/alerts", url.trim_end_matches('/')),
            _ => url.to_string(),
        }
    }
}

/// One configured receiver (`[[webhooks]]` in the config file).
#[derive(Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookTarget {
    /// Shown to admins and in logs instead of the URL, which may hold a secret.
    pub name: String,
    pub url: String,
    pub format: WebhookFormat,
    /// The event kinds this target receives; all its format takes when absent.
    #[serde(default)]
    pub events: Option<Vec<EventKind>>,
    /// The Standard Webhooks signing secret (`whsec_...`) every delivery is signed with.
    #[serde(default, skip_serializing)]
    pub secret: Option<SigningSecret>,
    /// PagerDuty: the integration's routing key (Events API v2).
    #[serde(default, skip_serializing)]
    pub routing_key: Option<String>,
}

/// Without the secret and the routing key: configurations end up in logs.
impl fmt::Debug for WebhookTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WebhookTarget")
            .field("name", &self.name)
            .field("url", &redact_webhook_url(&self.url))
            .field("format", &self.format)
            .field("events", &self.events)
            .field("signed", &self.secret.is_some())
            .finish_non_exhaustive()
    }
}

impl WebhookTarget {
    pub fn wants(&self, kind: EventKind) -> bool {
        self.format.takes(kind) && self.events.as_ref().is_none_or(|events| events.contains(&kind))
    }
}

/// Checks a configured target list: names present and unique, URLs http(s), event lists
/// not empty (an empty list would silently receive nothing).
pub fn validate_targets(targets: &[WebhookTarget]) -> Result<(), String> {
    for (i, t) in targets.iter().enumerate() {
        if t.name.trim().is_empty() {
            return Err(format!("webhook #{} needs a name", i + 1));
        }
        if targets[..i].iter().any(|other| other.name == t.name) {
            return Err(format!("two webhooks are named `{}`; names must be unique", t.name));
        }
        let has_host = ["http://", "https://"]
            .iter()
            .any(|scheme| t.url.strip_prefix(scheme).is_some_and(|rest| !rest.is_empty() && !rest.starts_with('/')));
        if !has_host {
            return Err(format!("webhook `{}`: url must start with https:// or http:// and name a host", t.name));
        }
        if t.events.as_ref().is_some_and(|e| e.is_empty()) {
            return Err(format!("webhook `{}`: `events` is empty; leave it out to receive every event", t.name));
        }
        if let Some(kind) = t.events.iter().flatten().find(|k| !t.format.takes(**k)) {
            return Err(format!("webhook `{}`: a {} target cannot take {kind}", t.name, t.format.as_str()));
        }
        match (t.format, &t.routing_key) {
            (WebhookFormat::Pagerduty, None) => {
                return Err(format!(
                    "webhook `{}`: a pagerduty target needs `routing_key` (the integration key)",
                    t.name
                ))
            }
            (WebhookFormat::Pagerduty, _) | (_, None) => {}
            (_, Some(_)) => return Err(format!("webhook `{}`: `routing_key` is for pagerduty targets", t.name)),
        }
    }
    Ok(())
}

/// A webhook URL fit for logs and the admin page: scheme and host only, because
/// receivers such as Slack put the secret in the path.
pub fn redact_webhook_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return "[REDACTED]".into();
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..end];
    // user:password@host: the credentials go too
    let host = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
    let tail = if end < rest.len() { "/…" } else { "" };
    format!("{scheme}://{host}{tail}")
}

/// The link to act on the event: the public URL and the event's path.
pub fn event_url(event: &Event, base_url: &str) -> String {
    format!("{}{}", base_url.trim_end_matches('/'), event.link_path)
}

/// The generic JSON body:
///
/// ```json
/// { "event": "approval.requested", "title": "…", "summary": "…",
///   "url": "https://flightdeck.example/approvals/apr_x",
///   "fields": [{ "name": "Agent", "value": "billing-bot" }], "data": { … } }
/// ```
///
/// Text is passed through as is: JSON encoding is the escaping, and the receiver decides
/// how to display it.
pub fn generic_json(event: &Event, base_url: &str) -> Value {
    json!({
        "event": event.kind.as_str(),
        "title": event.title,
        "summary": event.summary,
        "url": event_url(event, base_url),
        "fields": event.fields.iter().map(|(name, value)| json!({ "name": name, "value": value })).collect::<Vec<_>>(),
        "data": event.data,
    })
}

/// Slack's limits: a header holds 150 characters, a section text 3000, a field 2000, and a
/// section at most 10 fields. Longer text is cut rather than rejected by Slack.
const SLACK_HEADER_MAX: usize = 150;
const SLACK_TEXT_MAX: usize = 3000;
const SLACK_FIELD_MAX: usize = 2000;
const SLACK_FIELDS_MAX: usize = 10;

/// A Slack incoming-webhook message: `text` is the notification and fallback, `blocks`
/// the message (header, summary with the link, the fields, a context line).
///
/// Agent text is escaped (`&`, `<`, `>`), so it can neither mention `<!channel>` nor
/// hide a link of its own, and mrkdwn texts are `verbatim` so Slack does not turn bare
/// names into mentions or links either.
pub fn slack_message(event: &Event, base_url: &str) -> Value {
    let url = slack_url(&event_url(event, base_url));
    let title = truncate(&slack_escape(&event.title), SLACK_HEADER_MAX);
    let summary = slack_escape(&event.summary);
    let mut body = truncate(&summary, SLACK_TEXT_MAX.saturating_sub(url.len() + 32));
    body.push_str(&format!("\n<{url}|Open in Flightdeck>"));
    let mut blocks = vec![
        json!({ "type": "header", "text": { "type": "plain_text", "text": title, "emoji": false } }),
        json!({ "type": "section", "text": mrkdwn(body) }),
    ];
    for chunk in event.fields.chunks(SLACK_FIELDS_MAX) {
        let fields: Vec<Value> = chunk
            .iter()
            .map(|(name, value)| {
                let text = format!("*{}*\n{}", slack_escape(name), slack_escape(value));
                mrkdwn(truncate(&text, SLACK_FIELD_MAX))
            })
            .collect();
        blocks.push(json!({ "type": "section", "fields": fields }));
    }
    blocks.push(json!({ "type": "context", "elements": [mrkdwn(format!("Flightdeck · {}", event.kind))] }));
    json!({
        "text": truncate(&format!("{title}: {summary}"), SLACK_TEXT_MAX),
        "blocks": blocks,
    })
}

fn mrkdwn(text: String) -> Value {
    json!({ "type": "mrkdwn", "text": text, "verbatim": true })
}

/// Slack's control characters as the entities Slack documents.
pub fn slack_escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// A URL inside `<url|label>`: the characters that would end or split the link encoded.
fn slack_url(url: &str) -> String {
    url.replace('|', "%7C").replace('<', "%3C").replace('>', "%3E").replace(' ', "%20")
}

/// At most `max` characters, with an ellipsis when cut; never splits an entity like
/// `&amp;` in the middle.
fn truncate(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    if let Some(amp) = out.rfind('&') {
        if !out[amp..].contains(';') {
            out.truncate(amp);
        }
    }
    out.push('…');
    out
}

/// When to try a delivery again: exponential backoff from `base`, capped at `max_delay`,
/// giving up after `max_attempts` tries in all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    pub base: Duration,
    pub max_delay: Duration,
    pub max_attempts: u32,
}

impl Default for RetryPolicy {
    /// 1 s, 2 s, 4 s … 8.5 min, then every 10 min: 15 tries over about an hour, enough to
    /// ride out a receiver's restart or a short outage.
    fn default() -> Self {
        RetryPolicy { base: Duration::from_secs(1), max_delay: Duration::from_secs(600), max_attempts: 15 }
    }
}

impl RetryPolicy {
    /// The wait after the `attempt`-th try failed (1-based), or `None` when that was the
    /// last try.
    pub fn delay_after(&self, attempt: u32) -> Option<Duration> {
        if attempt >= self.max_attempts {
            return None;
        }
        let factor = 2u32.saturating_pow(attempt.saturating_sub(1));
        Some(self.base.saturating_mul(factor).min(self.max_delay))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event() -> Event {
        Event {
            kind: EventKind::ApprovalRequested,
            title: "Approval requested: send_email".into(),
            summary: "billing-bot wants to send an email to <!channel> & friends".into(),
            link_path: "/approvals/apr_1".into(),
            fields: vec![
                ("Agent".into(), "billing-bot".into()),
                ("Tool".into(), "<https://evil.example|click>".into()),
            ],
            data: json!({ "approval_id": "apr_1", "arguments": { "to": "a@b.example" } }),
        }
    }

    #[test]
    fn generic_json_has_the_documented_shape_and_text_unchanged() {
        let body = generic_json(&event(), "https://fd.example/");
        assert_eq!(
            body,
            json!({
                "event": "approval.requested",
                "title": "Approval requested: send_email",
                "summary": "billing-bot wants to send an email to <!channel> & friends",
                "url": "https://fd.example/approvals/apr_1",
                "fields": [
                    { "name": "Agent", "value": "billing-bot" },
                    { "name": "Tool", "value": "<https://evil.example|click>" }
                ],
                "data": { "approval_id": "apr_1", "arguments": { "to": "a@b.example" } }
            })
        );
    }

    #[test]
    fn slack_message_has_fallback_text_and_blocks() {
        let body = slack_message(&event(), "https://fd.example");
        let blocks = body["blocks"].as_array().unwrap();
        assert_eq!(blocks[0]["type"], "header");
        assert_eq!(blocks[0]["text"]["text"], "Approval requested: send_email");
        assert_eq!(blocks[1]["type"], "section");
        assert!(blocks[1]["text"]["text"]
            .as_str()
            .unwrap()
            .ends_with("\n<https://fd.example/approvals/apr_1|Open in Flightdeck>"));
        assert_eq!(blocks[2]["fields"][0]["text"], "*Agent*\nbilling-bot");
        assert_eq!(blocks[3]["type"], "context");
        assert_eq!(blocks[3]["elements"][0]["text"], "Flightdeck · approval.requested");
        assert!(body["text"].as_str().unwrap().starts_with("Approval requested: send_email: billing-bot"));
    }

    #[test]
    fn slack_message_escapes_agent_text_so_it_cannot_mention_or_link() {
        let body = slack_message(&event(), "https://fd.example");
        let text = body["text"].as_str().unwrap();
        assert!(text.contains("&lt;!channel&gt; &amp; friends"), "{text}");
        assert!(!text.contains("<!channel>"));
        let summary = body["blocks"][1]["text"]["text"].as_str().unwrap();
        assert!(summary.starts_with("billing-bot wants to send an email to &lt;!channel&gt; &amp; friends\n"));
        assert_eq!(body["blocks"][2]["fields"][1]["text"], "*Tool*\n&lt;https://evil.example|click&gt;");
        // the only real link is ours
        let all = body.to_string();
        assert_eq!(all.matches("<https://").count(), 1, "{all}");
    }

    #[test]
    fn slack_links_cannot_be_broken_by_the_path_and_long_text_is_cut() {
        let mut e = event();
        e.link_path = "/runs/a|b>c d".into();
        e.title = "&".repeat(200);
        e.fields = (0..12).map(|i| (format!("f{i}"), "x".repeat(3000))).collect();
        let body = slack_message(&e, "https://fd.example");
        let section = body["blocks"][1]["text"]["text"].as_str().unwrap();
        assert!(section.ends_with("<https://fd.example/runs/a%7Cb%3Ec%20d|Open in Flightdeck>"), "{section}");
        let header = body["blocks"][0]["text"]["text"].as_str().unwrap();
        assert!(header.chars().count() <= SLACK_HEADER_MAX);
        assert!(header.ends_with("&amp;…"), "no entity is cut in half: {header}");
        assert_eq!(body["blocks"][2]["fields"].as_array().unwrap().len(), 10);
        assert_eq!(body["blocks"][3]["fields"].as_array().unwrap().len(), 2);
        assert!(body["blocks"][2]["fields"][0]["text"].as_str().unwrap().chars().count() <= SLACK_FIELD_MAX);
    }

    #[test]
    fn backoff_doubles_up_to_the_cap_then_gives_up() {
        let policy = RetryPolicy { base: Duration::from_secs(1), max_delay: Duration::from_secs(10), max_attempts: 6 };
        let delays: Vec<_> = (1..=6).map(|a| policy.delay_after(a).map(|d| d.as_secs())).collect();
        assert_eq!(delays, vec![Some(1), Some(2), Some(4), Some(8), Some(10), None]);
        let default = RetryPolicy::default();
        assert_eq!(default.delay_after(1), Some(Duration::from_secs(1)));
        assert_eq!(default.delay_after(14), Some(Duration::from_secs(600)));
        assert_eq!(default.delay_after(15), None);
        // no overflow on absurd attempt counts
        let huge = RetryPolicy { max_attempts: u32::MAX, ..default };
        assert_eq!(huge.delay_after(1000), Some(Duration::from_secs(600)));
    }

    #[test]
    fn targets_filter_events_and_are_validated() {
        let target = |name: &str, url: &str, events: Option<Vec<EventKind>>| WebhookTarget {
            name: name.into(),
            url: url.into(),
            format: WebhookFormat::Json,
            events,
            ..WebhookTarget::default()
        };
        let alerts = target("pager", "https://x.example/h", Some(vec![EventKind::AlertFiring]));
        assert!(alerts.wants(EventKind::AlertFiring));
        assert!(!alerts.wants(EventKind::ApprovalRequested));
        assert!(target("all", "https://x.example", None).wants(EventKind::EscalationOpened));
        assert!(validate_targets(&[alerts.clone(), target("b", "http://localhost:9000/x", None)]).is_ok());
        assert!(validate_targets(&[alerts.clone(), alerts.clone()]).unwrap_err().contains("unique"));
        assert!(validate_targets(&[target("c", "ftp://x", None)]).unwrap_err().contains("https://"));
        assert!(validate_targets(&[target("c", "https:///path", None)]).is_err());
        assert!(validate_targets(&[target(" ", "https://x", None)]).is_err());
        assert!(validate_targets(&[target("d", "https://x", Some(vec![]))]).unwrap_err().contains("empty"));
    }

    #[test]
    fn webhook_urls_are_shown_without_their_secret_path() {
        assert_eq!(
            redact_webhook_url("https://hooks.slack.com/services/T000/B000/XXXXSECRET"),
            "https://hooks.slack.com/…"
        );
        assert_eq!(redact_webhook_url("https://user:pw@example.com:8443?token=1"), "https://example.com:8443/…");
        assert_eq!(redact_webhook_url("http://localhost:9000"), "http://localhost:9000");
        assert_eq!(redact_webhook_url("garbage"), "[REDACTED]");
    }

    #[test]
    fn event_kinds_round_trip_as_dotted_names() {
        for kind in EventKind::ALL {
            assert_eq!(EventKind::parse(kind.as_str()), Some(kind));
            assert_eq!(serde_json::to_value(kind).unwrap(), json!(kind.as_str()));
        }
        assert_eq!(serde_json::to_value(event()).unwrap()["kind"], "approval.requested");
    }
}
