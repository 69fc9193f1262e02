//! Delivering one request: attempts until it is accepted, fails for good, or has been
//! retried [`MAX_RETRIES`] times; waits as the receiver asked, or backs off exponentially.

use std::sync::Arc;
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use tokio::time::Instant;

use super::transport::{Attempt, Transport};

pub(crate) const MAX_RETRIES: u32 = 5;

/// A receiver's Retry-After is honoured up to this, so that a load run still ends in
/// bounded time (and a bogus header cannot park it for an hour).
const MAX_WAIT: Duration = Duration::from_secs(30);
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// What happened to one request.
#[derive(Debug, Default)]
pub(crate) struct Delivery {
    pub spans: u64,
    pub accepted: bool,
    pub rejected: u64,
    pub retries: u64,
    /// Round-trip time of every attempt, answered or not.
    pub latencies: Vec<Duration>,
    pub failure: Option<String>,
}

pub(crate) async fn deliver<T: Transport>(
    transport: Arc<T>,
    request: ExportTraceServiceRequest,
    spans: u64,
) -> Delivery {
    let mut delivery = Delivery { spans, ..Default::default() };
    // Encoding here rather than in the dispatcher spreads protobuf, JSON and gzip work
    // over the runtime's threads.
    let payload = match transport.encode(request) {
        Ok(payload) => payload,
        Err(e) => {
            delivery.failure = Some(format!("encoding the request: {e:#}"));
            return delivery;
        }
    };
    for retry in 0..=MAX_RETRIES {
        let sent = Instant::now();
        let attempt = transport.send(&payload).await;
        delivery.latencies.push(sent.elapsed());
        match attempt {
            Attempt::Accepted { rejected } => {
                delivery.accepted = true;
                delivery.rejected = rejected;
                return delivery;
            }
            Attempt::Retryable { retry_after } if retry < MAX_RETRIES => {
                delivery.retries += 1;
                tokio::time::sleep(wait_before_retry(retry, retry_after)).await;
            }
            Attempt::Retryable { .. } => {
                delivery.failure = Some(format!("still refused after {MAX_RETRIES} retries"));
            }
            Attempt::Failed(message) => {
                delivery.failure = Some(message);
                return delivery;
            }
        }
    }
    delivery
}

/// The receiver's hint when it gave one, else 100 ms doubling per retry up to 5 s.
pub(crate) fn wait_before_retry(retry: u32, retry_after: Option<Duration>) -> Duration {
    match retry_after {
        Some(hint) => hint.min(MAX_WAIT),
        None => FIRST_BACKOFF.saturating_mul(1 << retry.min(16)).min(MAX_BACKOFF),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_is_capped_and_hints_win() {
        assert_eq!(wait_before_retry(0, None), Duration::from_millis(100));
        assert_eq!(wait_before_retry(3, None), Duration::from_millis(800));
        assert_eq!(wait_before_retry(10, None), MAX_BACKOFF);
        assert_eq!(wait_before_retry(0, Some(Duration::from_secs(2))), Duration::from_secs(2));
        assert_eq!(wait_before_retry(0, Some(Duration::from_secs(3_600))), MAX_WAIT);
    }
}
