//! A local webhook receiver on 127.0.0.1 for tests: records every request it gets and
//! answers by path, so a test can make a receiver succeed, fail for a while, or stay down.

use app::notify::{WebhookFormat, WebhookTarget};
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::Router;
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
}

#[derive(Default)]
struct ReceiverState {
    received: Mutex<Vec<Received>>,
    /// Requests seen per path, to fail the first ones.
    seen: Mutex<HashMap<String, u32>>,
}

/// A local webhook receiver: `/ok/*` answers 200, `/flaky/*` 500 twice and then 204,
/// `/down/*` always 503 with a reason.
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
            });
            let n = {
                let mut seen = state.seen.lock().unwrap();
                let n = seen.entry(path).or_default();
                *n += 1;
                *n
            };
            match kind.as_str() {
                "ok" => (StatusCode::OK, "ok"),
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
        WebhookTarget { name: name.into(), url: format!("http://{}{path}", self.addr), format, events: None }
    }

    pub fn received(&self) -> Vec<Received> {
        self.state.received.lock().unwrap().clone()
    }
}
