//! The webhook delivery worker: claims due deliveries from the outbox
//! (`store::webhooks`), POSTs each in its target's format, and records the answer:
//! 2xx is delivered, anything else (another status, a refused connection, a timeout) is
//! tried again with backoff until the attempts run out.
//!
//! Every instance runs one; the outbox's leases keep them from sending the same delivery
//! at once. Receivers get `webhook-id` (and `X-Flightdeck-Delivery`, the same number,
//! stable across retries) to drop the rare duplicate that a worker dying mid-send can
//! cause, and, for a target with a `secret`, the Standard Webhooks signature
//! (`domain::notify::signature`) to tell Flightdeck's calls from a forger's.
//!
//! A delivery is sent to the URL and in the format it was queued with; the secret and
//! PagerDuty's routing key are read from the configuration when it is sent (they are
//! never stored in the outbox).

use domain::notify::{RetryPolicy, WebhookTarget};
use std::time::Duration;
use store::webhooks::{self, AfterFailure, Claimed};
use store::Db;
use tokio::sync::watch;

/// How the worker runs; [`WorkerSettings::new`] has the production values.
#[derive(Debug, Clone)]
pub struct WorkerSettings {
    /// Base of the links in messages, without a trailing slash.
    pub public_url: String,
    pub retry: RetryPolicy,
    /// How long to wait for a receiver's answer.
    pub timeout: Duration,
    /// How often to look for due deliveries when the last look found none.
    pub poll_interval: Duration,
    /// Deliveries claimed (and sent concurrently) at a time.
    pub batch: i64,
    /// The configured targets, for their secrets and routing keys.
    pub targets: Vec<WebhookTarget>,
}

impl WorkerSettings {
    pub fn new(public_url: &str, retry: RetryPolicy, targets: &[WebhookTarget]) -> WorkerSettings {
        WorkerSettings {
            public_url: public_url.trim_end_matches('/').to_string(),
            retry,
            targets: targets.to_vec(),
            timeout: Duration::from_secs(10),
            poll_interval: Duration::from_secs(1),
            batch: 16,
        }
    }

    /// Long enough to send and record a whole batch, so a live worker never loses its lease
    /// (that would let a second worker send the same delivery).
    fn lease(&self) -> Duration {
        self.timeout * 2 + Duration::from_secs(30)
    }
}

/// Sends webhook deliveries; cheap to clone.
#[derive(Debug, Clone)]
pub struct Worker {
    db: Db,
    client: reqwest::Client,
    settings: WorkerSettings,
}

impl Worker {
    pub fn new(db: Db, settings: WorkerSettings) -> anyhow::Result<Worker> {
        let client = reqwest::Client::builder()
            .user_agent("flightdeck")
            .timeout(settings.timeout)
            .connect_timeout(settings.timeout)
            // A webhook answers where it is; following redirects would re-send elsewhere.
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        Ok(Worker { db, client, settings })
    }

    /// Until `stop` turns true: claims due deliveries and sends them, resting
    /// `poll_interval` when there were none. A batch in flight is finished before stopping,
    /// so no send is cut off half way.
    pub async fn run(self, mut stop: watch::Receiver<bool>) {
        loop {
            if *stop.borrow() {
                break;
            }
            let sent = match self.run_once().await {
                Ok(n) => n,
                Err(e) => {
                    tracing::warn!(error = %e, "webhook worker cannot read the outbox; will retry");
                    0
                }
            };
            if sent == 0 {
                tokio::select! {
                    _ = tokio::time::sleep(self.settings.poll_interval) => {}
                    _ = stop.wait_for(|s| *s) => break,
                }
            }
        }
        tracing::debug!("webhook worker stopped");
    }

    /// Claims one batch of due deliveries, sends them concurrently and records each answer;
    /// returns how many it tried.
    pub async fn run_once(&self) -> anyhow::Result<usize> {
        let claimed = webhooks::claim_due(&self.db, self.settings.batch, self.settings.lease()).await?;
        let n = claimed.len();
        let mut sends = tokio::task::JoinSet::new();
        for delivery in claimed {
            let worker = self.clone();
            sends.spawn(async move { worker.deliver(delivery).await });
        }
        while let Some(done) = sends.join_next().await {
            if let Err(e) = done.map_err(anyhow::Error::from).and_then(|r| r) {
                tracing::warn!(error = %e, "could not record a webhook delivery; it is retried when its lease expires");
            }
        }
        Ok(n)
    }

    async fn deliver(&self, delivery: Claimed) -> anyhow::Result<()> {
        let (status, error) = match self.request(&delivery) {
            Ok(request) => match request.send().await {
                Ok(response) if response.status().is_success() => {
                    let status = response.status().as_u16();
                    if webhooks::mark_delivered(&self.db, &delivery, status).await? {
                        tracing::debug!(id = delivery.id, target = %delivery.target_name, "webhook delivered");
                    }
                    return Ok(());
                }
                Ok(response) => {
                    let status = response.status();
                    // The start of the body usually says why (Slack: "invalid_payload").
                    let text = response.text().await.unwrap_or_default();
                    let text: String = text.chars().take(200).collect();
                    (Some(status.as_u16()), format!("{status} {}", text.trim()).trim().to_string())
                }
                Err(e) => (e.status().map(|s| s.as_u16()), describe(&e)),
            },
            Err(why) => (None, why),
        };
        self.record_failure(&delivery, status, &error).await
    }

    /// The signed request for one attempt, or why it cannot be sent.
    fn request(&self, delivery: &Claimed) -> Result<reqwest::RequestBuilder, String> {
        let configured = self.settings.targets.iter().find(|t| t.name == delivery.target_name);
        let target = WebhookTarget {
            url: delivery.target_url.clone(),
            format: delivery.format,
            ..configured
                .cloned()
                .unwrap_or_else(|| WebhookTarget { name: delivery.target_name.clone(), ..Default::default() })
        };
        if target.format == domain::notify::WebhookFormat::Pagerduty && configured.is_none() {
            return Err(format!("the target `{}` is no longer configured (its routing key is gone)", target.name));
        }
        let body =
            domain::webhook_body::render(&target, &delivery.event, &self.settings.public_url, chrono::Utc::now())?;
        let body = serde_json::to_vec(&body).map_err(|e| format!("cannot encode the body: {e}"))?;
        let id = format!("msg_{}", delivery.id);
        let timestamp = store::now_ms() / 1000;
        let mut request = self
            .client
            .post(target.format.post_url(&delivery.target_url))
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header("webhook-id", &id)
            .header("webhook-timestamp", timestamp.to_string())
            .header("X-Flightdeck-Delivery", delivery.id.to_string())
            .header("X-Flightdeck-Event", delivery.event.kind.as_str());
        if let Some(secret) = &target.secret {
            request = request.header("webhook-signature", secret.sign(&id, timestamp, &body));
        }
        Ok(request.body(body))
    }

    async fn record_failure(&self, delivery: &Claimed, status: Option<u16>, error: &str) -> anyhow::Result<()> {
        let after = webhooks::record_failure(&self.db, delivery, status, error, &self.settings.retry).await?;
        match after {
            AfterFailure::RetryIn(delay) => tracing::info!(
                id = delivery.id, target = %delivery.target_name, attempt = delivery.attempts, %error,
                retry_in_ms = delay.as_millis() as u64, "webhook delivery failed; will retry"
            ),
            AfterFailure::GaveUp => tracing::warn!(
                id = delivery.id, target = %delivery.target_name, attempts = delivery.attempts, %error,
                "webhook delivery failed for good; listed under Admin → Webhooks"
            ),
            AfterFailure::LeaseLost => {}
        }
        Ok(())
    }
}

/// A transport error without the URL, which may hold the target's secret.
fn describe(e: &reqwest::Error) -> String {
    let kind = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "could not connect"
    } else if e.is_redirect() {
        "redirected"
    } else if e.is_body() || e.is_decode() {
        "broken response"
    } else {
        "request failed"
    };
    let mut detail = String::new();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        detail = s.to_string();
        source = s.source();
    }
    if detail.is_empty() {
        kind.to_string()
    } else {
        format!("{kind}: {detail}")
    }
}
