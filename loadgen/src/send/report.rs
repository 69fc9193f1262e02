//! Tallying deliveries into the figures a load run reports.

use std::fmt;
use std::time::Duration;

use super::retry::Delivery;
use crate::rss::MemoryPeak;

/// The outcome of a load run.
///
/// Every dispatched span ends up in exactly one of three places:
/// `spans_sent = spans_accepted + partial_rejections + spans of failed requests`.
#[derive(Debug, Clone)]
pub struct LoadReport {
    /// Runs generated (when a duration ended the run, the last may be partly sent).
    pub runs: usize,
    /// Requests dispatched; retries are not counted again.
    pub requests: u64,
    pub spans_sent: u64,
    /// Spans in accepted requests, minus those the receiver reported rejected.
    pub spans_accepted: u64,
    /// Spans rejected through OTLP partial success.
    pub partial_rejections: u64,
    /// Attempts repeated after 429/502/503/504 or UNAVAILABLE/RESOURCE_EXHAUSTED.
    pub retries: u64,
    /// Requests given up on: a non-retryable answer, a transport error, or retries used up.
    pub failures: u64,
    pub last_failure: Option<String>,
    pub elapsed: Duration,
    /// Accepted spans per second of elapsed time.
    pub spans_per_sec: f64,
    /// Round-trip time of single attempts (retries and failed attempts included).
    pub latency_p50_ms: f64,
    pub latency_p99_ms: f64,
    /// The receiver's memory, when a process id was given to watch.
    pub server_memory: Option<MemoryPeak>,
}

/// Running totals while the load is on.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    requests: u64,
    spans_sent: u64,
    spans_accepted: u64,
    partial_rejections: u64,
    retries: u64,
    failures: u64,
    last_failure: Option<String>,
    latencies: Vec<Duration>,
}

impl Tally {
    pub(crate) fn record(&mut self, delivery: Delivery) {
        self.requests += 1;
        self.spans_sent += delivery.spans;
        self.retries += delivery.retries;
        if delivery.accepted {
            // A receiver claiming more rejections than spans is not believed past the count.
            let rejected = delivery.rejected.min(delivery.spans);
            self.partial_rejections += rejected;
            self.spans_accepted += delivery.spans - rejected;
        } else {
            self.failures += 1;
        }
        if delivery.failure.is_some() {
            self.last_failure = delivery.failure;
        }
        self.latencies.extend(delivery.latencies);
    }

    pub(crate) fn into_report(
        mut self,
        runs: usize,
        elapsed: Duration,
        server_memory: Option<MemoryPeak>,
    ) -> LoadReport {
        self.latencies.sort_unstable();
        let seconds = elapsed.as_secs_f64();
        LoadReport {
            runs,
            requests: self.requests,
            spans_sent: self.spans_sent,
            spans_accepted: self.spans_accepted,
            partial_rejections: self.partial_rejections,
            retries: self.retries,
            failures: self.failures,
            last_failure: self.last_failure,
            elapsed,
            spans_per_sec: if seconds > 0.0 { self.spans_accepted as f64 / seconds } else { 0.0 },
            latency_p50_ms: percentile_ms(&self.latencies, 50.0),
            latency_p99_ms: percentile_ms(&self.latencies, 99.0),
            server_memory,
        }
    }
}

/// Nearest-rank percentile of sorted durations, in milliseconds; 0 when there are none.
fn percentile_ms(sorted: &[Duration], percent: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (percent / 100.0 * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1].as_secs_f64() * 1e3
}

impl fmt::Display for LoadReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "runs generated   {}", self.runs)?;
        writeln!(f, "requests         {} ({} retries, {} failed)", self.requests, self.retries, self.failures)?;
        writeln!(f, "spans sent       {}", self.spans_sent)?;
        writeln!(
            f,
            "spans accepted   {} ({} rejected by partial success)",
            self.spans_accepted, self.partial_rejections
        )?;
        writeln!(f, "elapsed          {:.2} s", self.elapsed.as_secs_f64())?;
        writeln!(f, "throughput       {:.1} spans/s accepted", self.spans_per_sec)?;
        write!(f, "latency          p50 {:.2} ms, p99 {:.2} ms", self.latency_p50_ms, self.latency_p99_ms)?;
        if let Some(memory) = &self.server_memory {
            write!(
                f,
                "\nserver memory    peak RSS {:.1} MiB sampled, VmHWM {:.1} MiB ({} samples)",
                memory.peak_rss_kib as f64 / 1024.0,
                memory.hwm_kib as f64 / 1024.0,
                memory.samples
            )?;
        }
        if let Some(failure) = &self.last_failure {
            write!(f, "\nlast failure     {failure}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn percentiles_use_nearest_rank() {
        let sorted: Vec<Duration> = (1..=100).map(ms).collect();
        assert_eq!(percentile_ms(&sorted, 50.0), 50.0);
        assert_eq!(percentile_ms(&sorted, 99.0), 99.0);
        assert_eq!(percentile_ms(&[ms(7)], 99.0), 7.0);
        assert_eq!(percentile_ms(&[], 50.0), 0.0);
    }

    #[test]
    fn every_span_is_accounted_for_once() {
        let mut tally = Tally::default();
        tally.record(Delivery {
            spans: 10,
            accepted: true,
            rejected: 2,
            retries: 1,
            latencies: vec![ms(5), ms(3)],
            failure: None,
        });
        tally.record(Delivery {
            spans: 7,
            failure: Some("HTTP 400 Bad Request: no".into()),
            latencies: vec![ms(4)],
            ..Default::default()
        });
        let report = tally.into_report(2, Duration::from_secs(2), None);
        assert_eq!(report.requests, 2);
        assert_eq!(report.spans_sent, 17);
        assert_eq!(report.spans_accepted, 8);
        assert_eq!(report.partial_rejections, 2);
        assert_eq!(report.failures, 1);
        assert_eq!(report.retries, 1);
        assert_eq!(report.spans_per_sec, 4.0);
        assert_eq!(report.latency_p50_ms, 4.0);
        assert_eq!(report.last_failure.as_deref(), Some("HTTP 400 Bad Request: no"));
        let text = report.to_string();
        assert!(text.contains("spans accepted   8 (2 rejected by partial success)"), "{text}");
        assert!(text.contains("last failure     HTTP 400"), "{text}");
    }
}
