//! What a transport must do: encode a request once, then try to deliver it, saying
//! whether it was accepted, should be retried, or failed for good.

use std::future::Future;
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;

/// The result of one delivery attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Attempt {
    /// The receiver took the request; `rejected` spans were refused as a partial success.
    Accepted { rejected: u64 },
    /// The receiver is overloaded or briefly unavailable; try again, after `retry_after`
    /// when it said how long.
    Retryable { retry_after: Option<Duration> },
    /// Not worth retrying; the message says why.
    Failed(String),
}

pub(crate) trait Transport: Send + Sync + 'static {
    /// The request in the form this transport sends; built once, sent on every attempt.
    type Payload: Send + 'static;

    fn encode(&self, request: ExportTraceServiceRequest) -> anyhow::Result<Self::Payload>;

    fn send(&self, payload: &Self::Payload) -> impl Future<Output = Attempt> + Send;
}
