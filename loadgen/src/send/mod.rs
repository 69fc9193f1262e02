//! Sending synthetic runs to a Flightdeck OTLP receiver and measuring how it copes.
//!
//! [`run_load`] generates runs as it goes ([`crate::synth`]), packs them into requests,
//! keeps `concurrency` requests in flight, paces them to a span rate when asked, retries
//! what the receiver says is retryable, and stops after a number of runs or a duration.

mod grpc;
mod http;
mod pace;
mod report;
mod retry;
mod transport;

#[cfg(test)]
mod tests;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use anyhow::ensure;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::rss::Sampler;
use crate::synth::{RequestStream, Synth, SynthOptions};

use grpc::Grpc;
use http::Http;
use retry::deliver;
use transport::Transport;

pub use report::LoadReport;

/// The OTLP transports a Flightdeck receiver accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// OTLP/HTTP with a protobuf body.
    HttpProtobuf,
    /// OTLP/HTTP with an OTLP JSON body.
    HttpJson,
    Grpc,
}

/// Where and how to send.
#[derive(Clone)]
pub struct Target {
    /// Base URL: `http://127.0.0.1:4318` for HTTP (`/v1/traces` is appended),
    /// `http://127.0.0.1:4317` for gRPC.
    pub endpoint: String,
    pub protocol: Protocol,
    /// Sent as `Authorization: Bearer <token>` (gRPC: `authorization` metadata).
    pub token: Option<String>,
    /// Compress request bodies with gzip.
    pub gzip: bool,
}

/// The token stays out of debug output, which ends up in logs.
impl fmt::Debug for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Target")
            .field("endpoint", &self.endpoint)
            .field("protocol", &self.protocol)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("gzip", &self.gzip)
            .finish()
    }
}

#[derive(Debug, Clone)]
pub struct LoadOptions {
    pub target: Target,
    /// Stop after this many runs have been generated and sent.
    pub runs: Option<usize>,
    /// Stop dispatching after this long; requests in flight still finish.
    pub duration: Option<Duration>,
    /// Offered load ceiling; None sends as fast as the receiver answers.
    pub rate_spans_per_sec: Option<f64>,
    /// Requests in flight at once (at least 1).
    pub concurrency: usize,
    /// Span budget per request (at least 1).
    pub spans_per_request: usize,
    pub synth: SynthOptions,
    /// A process (the receiver) whose memory to sample during the run.
    pub rss_pid: Option<u32>,
}

/// Runs the load described by `opts` and reports what happened. At least one of `runs`
/// and `duration` must be given: a load run always ends by itself.
pub async fn run_load(opts: LoadOptions) -> anyhow::Result<LoadReport> {
    ensure!(
        opts.runs.is_some() || opts.duration.is_some(),
        "give a number of runs or a duration, or the load would never stop"
    );
    ensure!(opts.concurrency >= 1, "concurrency must be at least 1");
    ensure!(opts.spans_per_request >= 1, "spans per request must be at least 1");
    if let Some(rate) = opts.rate_spans_per_sec {
        ensure!(rate.is_finite() && rate > 0.0, "the rate must be a positive number of spans per second");
    }
    match opts.target.protocol {
        Protocol::Grpc => drive(Grpc::connect(&opts.target).await?, opts).await,
        Protocol::HttpProtobuf | Protocol::HttpJson => drive(Http::new(&opts.target)?, opts).await,
    }
}

async fn drive<T: Transport>(transport: T, opts: LoadOptions) -> anyhow::Result<LoadReport> {
    let transport = Arc::new(transport);
    let memory = opts.rss_pid.map(Sampler::start).transpose()?;
    let started = Instant::now();
    let deadline = opts.duration.map(|d| started + d);
    let mut pacer = opts.rate_spans_per_sec.map(pace::Pacer::new);
    let mut requests = RequestStream::new(Synth::new(opts.synth), opts.spans_per_request, opts.runs);
    let mut in_flight = JoinSet::new();
    let mut tally = report::Tally::default();
    let past_deadline = || deadline.is_some_and(|d| Instant::now() >= d);

    for request in requests.by_ref() {
        let spans: usize = request.resource_spans.iter().flat_map(|r| &r.scope_spans).map(|s| s.spans.len()).sum();
        if let Some(pacer) = pacer.as_mut() {
            pacer.wait(spans, deadline).await;
        }
        while in_flight.len() >= opts.concurrency {
            if let Some(done) = in_flight.join_next().await {
                tally.record(done?);
            }
        }
        if past_deadline() {
            break;
        }
        in_flight.spawn(deliver(Arc::clone(&transport), request, spans as u64));
        // Collect what has finished as we go so results do not pile up in the set.
        while let Some(done) = in_flight.try_join_next() {
            tally.record(done?);
        }
    }
    while let Some(done) = in_flight.join_next().await {
        tally.record(done?);
    }
    let elapsed = started.elapsed();
    let server_memory = match memory {
        Some(sampler) => Some(sampler.finish().await?),
        None => None,
    };
    Ok(tally.into_report(requests.runs_generated(), elapsed, server_memory))
}
