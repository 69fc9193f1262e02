//! A local webhook receiver on 127.0.0.1 for tests: records every request it gets and
//! answers by path, so a test can make a receiver succeed, fail for a while, or stay down.

use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::Router;
use domain::notify::{WebhookFormat, WebhookTarget};
use serde_json::Value;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

/// One request the receiver got.
#[derive(Debug, Clone)]
pub struct Received {
    pub path: String,
    pub delivery: String,
    pub event: String,
    pub user_agent: String,
    pub content_type: String,
    pub body: Value,
    /// The body exactly as sent, for checking its signature.
    pub raw: String,
    /// `webhook-id`, `webhook-timestamp`, `webhook-signature` (empty when absent).
    pub signed: [String; 3],
}

#[derive(Default)]
struct ReceiverState {
    received: Mutex<Vec<Received>>,
    /// Requests seen per path, to fail the first ones.
    seen: Mutex<HashMap<String, u32>>,
}

/// A local webhook receiver: `/ok/*` answers 200, `/flaky/*` 500 twice and then 204,
/// `/down/*` always 503 with a reason, `/pagerduty/*` stands in for PagerDuty's Events
/// API v2: 202 for an event it would accept, 400 with PagerDuty's message for one it
/// would refuse (see [`pagerduty_refusal`]), and `/alertmanager/*` for an Alertmanager's
/// `POST /api/v2/alerts` (see [`alertmanager_refusal`]).
pub struct Receiver {
    pub addr: SocketAddr,
    state: Arc<ReceiverState>,
}

impl Receiver {
    pub async fn start() -> Receiver {
        async fn hook(
            State(state): State<Arc<ReceiverState>>,
            Path((kind, rest)): Path<(String, String)>,
            headers: HeaderMap,
            body: String,
        ) -> (StatusCode, &'static str) {
            let path = format!("/{kind}/{rest}");
            let text = |name: header::HeaderName| {
                headers.get(name).map(|v| v.to_str().unwrap().to_string()).unwrap_or_default()
            };
            state.received.lock().unwrap().push(Received {
                path: path.clone(),
                delivery: text(header::HeaderName::from_static("x-flightdeck-delivery")),
                event: text(header::HeaderName::from_static("x-flightdeck-event")),
                user_agent: text(header::USER_AGENT),
                content_type: text(header::CONTENT_TYPE),
                body: serde_json::from_str(&body).unwrap_or(Value::Null),
                raw: body.clone(),
                signed: ["webhook-id", "webhook-timestamp", "webhook-signature"]
                    .map(|name| text(header::HeaderName::from_static(name))),
            });
            let n = {
                let mut seen = state.seen.lock().unwrap();
                let n = seen.entry(path.clone()).or_default();
                *n += 1;
                *n
            };
            match kind.as_str() {
                "ok" => (StatusCode::OK, "ok"),
                "pagerduty" => match pagerduty_refusal(&serde_json::from_str(&body).unwrap_or(Value::Null)) {
                    None => (StatusCode::ACCEPTED, r#"{"status":"success","message":"Event processed"}"#),
                    Some(why) => (StatusCode::BAD_REQUEST, why),
                },
                "alertmanager" => {
                    match alertmanager_refusal(&path, &serde_json::from_str(&body).unwrap_or(Value::Null)) {
                        None => (StatusCode::OK, ""),
                        Some(why) => (StatusCode::BAD_REQUEST, why),
                    }
                }
                "flaky" if n > 2 => (StatusCode::NO_CONTENT, ""),
                "flaky" => (StatusCode::INTERNAL_SERVER_ERROR, "try later"),
                _ => (StatusCode::SERVICE_UNAVAILABLE, "down for maintenance"),
            }
        }
        let state = Arc::new(ReceiverState::default());
        let app = Router::new().route("/{kind}/{*rest}", axum::routing::post(hook)).with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Receiver { addr, state }
    }

    pub fn target(&self, name: &str, path: &str, format: WebhookFormat) -> WebhookTarget {
        WebhookTarget {
            name: name.into(),
            url: format!("http://{}{path}", self.addr),
            format,
            ..WebhookTarget::default()
        }
    }

    pub fn received(&self) -> Vec<Received> {
        self.state.received.lock().unwrap().clone()
    }
}

/// Why PagerDuty's Events API v2 would refuse `event`, as its documentation states the
/// rules: a 32-character routing key, an action of trigger / acknowledge / resolve, a
/// dedup key for acknowledge and resolve, and for trigger a payload with a summary (at
/// most 1024 characters), a source and a severity of critical / error / warning / info.
pub fn pagerduty_refusal(event: &Value) -> Option<&'static str> {
    let text = |v: &Value| v.as_str().map(str::to_string);
    if text(&event["routing_key"]).is_none_or(|k| k.len() != 32) {
        return Some("Event object is invalid: routing_key");
    }
    match event["event_action"].as_str() {
        Some("trigger") => {
            let p = &event["payload"];
            if text(&p["summary"]).is_none_or(|s| s.is_empty() || s.chars().count() > 1024) {
                return Some("Event object is invalid: payload.summary");
            }
            if text(&p["source"]).is_none_or(|s| s.is_empty()) {
                return Some("Event object is invalid: payload.source");
            }
            if !matches!(p["severity"].as_str(), Some("critical" | "error" | "warning" | "info")) {
                return Some("Event object is invalid: payload.severity");
            }
            None
        }
        Some("acknowledge" | "resolve") if text(&event["dedup_key"]).is_some_and(|k| !k.is_empty()) => None,
        Some("acknowledge" | "resolve") => Some("Event object is invalid: dedup_key"),
        _ => Some("Event object is invalid: event_action"),
    }
}

/// Why Alertmanager's `POST /api/v2/alerts` (API v2, `postableAlerts`) would refuse
/// `body` sent to `path`: the path must be the endpoint, the body an array of alerts,
/// each with a non-empty `labels` map of strings (with `alertname`), optional
/// `annotations` of strings, `startsAt` / `endsAt` as RFC 3339 date-times with `endsAt`
/// not before `startsAt`, and `generatorURL` an absolute URL.
pub fn alertmanager_refusal(path: &str, body: &Value) -> Option<&'static str> {
    if !path.ends_with("/api/v2/alerts") {
        return Some("not found");
    }
    let Some(alerts) = body.as_array() else { return Some("body must be an array of alerts") };
    for a in alerts {
        let strings = |v: &Value| v.as_object().is_some_and(|m| m.values().all(Value::is_string));
        if !strings(&a["labels"]) || a["labels"]["alertname"].as_str().is_none_or(str::is_empty) {
            return Some("labels must be a map of strings with alertname");
        }
        if !a["annotations"].is_null() && !strings(&a["annotations"]) {
            return Some("annotations must be a map of strings");
        }
        let time = |v: &Value| v.as_str().and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok());
        let (Some(starts), Some(ends)) = (time(&a["startsAt"]), time(&a["endsAt"])) else {
            return Some("startsAt and endsAt must be date-times");
        };
        if ends < starts {
            return Some("endsAt before startsAt");
        }
        if !a["generatorURL"].as_str().is_some_and(|u| u.starts_with("http://") || u.starts_with("https://")) {
            return Some("generatorURL must be a URL");
        }
    }
    None
}
