//! The load: synthetic agent runs cut into OTLP/HTTP exports, and exporters that send
//! them the way an OpenTelemetry exporter does. Every export answered 200 is recorded as
//! acknowledged; one that got no answer, or a 429/503, goes back in the queue to be sent
//! again. Refusals are checked as they arrive: a 429/503 without `Retry-After`, or any
//! other status, is recorded as a broken promise.

use loadgen::synth::{requests_for, Synth, SynthOptions, SynthRun};
use opentelemetry_proto::tonic::collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse};
use prost::Message;
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Runs, and the exports that carry them.
pub struct Workload {
    pub requests: Vec<ExportTraceServiceRequest>,
    pub bodies: Arc<Vec<Vec<u8>>>,
    pub spans: usize,
}

impl Workload {
    /// `runs` runs of the last hour (older ones would be past the retention horizon),
    /// `spans_per_export` spans per export at most.
    pub fn new(seed: u64, runs: usize, spans_per_export: usize) -> Workload {
        let hour_ago = (chrono::Utc::now().timestamp_nanos_opt().unwrap() - 3_600_000_000_000) as u64;
        let mut synth = Synth::new(SynthOptions { seed, base_time_unix_nano: hour_ago, ..SynthOptions::default() });
        let runs: Vec<SynthRun> = (0..runs).map(|_| synth.next_run()).collect();
        let requests = requests_for(&runs, spans_per_export);
        let bodies = Arc::new(requests.iter().map(|r| r.encode_to_vec()).collect());
        let spans = runs.iter().map(|r| r.span_count).sum();
        Workload { requests, bodies, spans }
    }

    pub fn spans_of(&self, export: usize) -> usize {
        self.requests[export].resource_spans.iter().flat_map(|r| &r.scope_spans).map(|s| s.spans.len()).sum()
    }
}

/// What the exporters saw, shared by all of them.
#[derive(Default)]
pub struct Ledger {
    queue: Mutex<VecDeque<usize>>,
    acked: Mutex<Vec<usize>>,
    total: usize,
    /// Spans in each export.
    sizes: Vec<usize>,
    /// Spans acknowledged so far (re-sends of acknowledged exports counted again).
    pub acked_spans: AtomicUsize,
    /// Send the workload again once it is all out (acknowledged exports are re-sent as
    /// retries would be; the server stores each span once).
    recycle: bool,
    /// Sends that got no answer, or a refusal, and went back in the queue.
    pub resent: AtomicUsize,
    /// Answers by status (0: no answer at all).
    statuses: Mutex<BTreeMap<u16, usize>>,
    /// Refusals that broke the promise: a 429/503 without Retry-After, any other status,
    /// or a 200 that rejected spans.
    broken: Mutex<Vec<String>>,
}

impl Ledger {
    pub fn new(work: &Workload, recycle: bool) -> Arc<Ledger> {
        let exports = work.requests.len();
        Arc::new(Ledger {
            queue: Mutex::new((0..exports).collect()),
            total: exports,
            sizes: (0..exports).map(|i| work.spans_of(i)).collect(),
            recycle,
            ..Default::default()
        })
    }

    /// The exports acknowledged at least once.
    pub fn acknowledged(&self) -> Vec<usize> {
        let mut acked = self.acked.lock().unwrap().clone();
        acked.sort_unstable();
        acked.dedup();
        acked
    }

    pub fn all_acknowledged(&self) -> bool {
        self.acknowledged().len() == self.total
    }

    /// Exports not yet sent (or waiting to be sent again).
    pub fn queued(&self) -> usize {
        self.queue.lock().unwrap().len()
    }

    pub fn mean_export_spans(&self) -> f64 {
        self.sizes.iter().sum::<usize>() as f64 / self.sizes.len().max(1) as f64
    }

    pub fn statuses(&self) -> BTreeMap<u16, usize> {
        self.statuses.lock().unwrap().clone()
    }

    pub fn broken(&self) -> Vec<String> {
        self.broken.lock().unwrap().clone()
    }

    pub fn next(&self) -> Option<usize> {
        let mut queue = self.queue.lock().unwrap();
        if queue.is_empty() && self.recycle {
            queue.extend(0..self.total);
        }
        queue.pop_front()
    }

    fn acknowledge(&self, export: usize) {
        self.acked_spans.fetch_add(self.sizes[export], Ordering::Relaxed);
        self.acked.lock().unwrap().push(export);
    }

    pub fn again(&self, export: usize) {
        self.resent.fetch_add(1, Ordering::Relaxed);
        self.queue.lock().unwrap().push_back(export);
    }

    fn count(&self, status: u16) {
        *self.statuses.lock().unwrap().entry(status).or_default() += 1;
    }

    fn broke(&self, what: String) {
        self.broken.lock().unwrap().push(what);
    }
}

pub fn client() -> reqwest::Client {
    reqwest::Client::builder().timeout(Duration::from_secs(30)).build().unwrap()
}

/// Sends one export and books the answer; true when it was acknowledged.
pub async fn send_one(client: &reqwest::Client, url: &str, ledger: &Ledger, bodies: &[Vec<u8>], export: usize) -> bool {
    let answer =
        client.post(url).header("content-type", "application/x-protobuf").body(bodies[export].clone()).send().await;
    let Ok(response) = answer else {
        ledger.count(0);
        ledger.again(export);
        return false;
    };
    let status = response.status().as_u16();
    ledger.count(status);
    match status {
        200 => {
            let body = response.bytes().await.unwrap_or_default();
            let answer = ExportTraceServiceResponse::decode(body.as_ref()).unwrap_or_default();
            if let Some(p) = answer.partial_success.filter(|p| p.rejected_spans > 0) {
                ledger.broke(format!("a valid export had {} spans rejected: {}", p.rejected_spans, p.error_message));
            }
            ledger.acknowledge(export);
            true
        }
        429 | 503 => {
            if response.headers().get("retry-after").is_none() {
                ledger.broke(format!("{status} without Retry-After"));
            }
            ledger.again(export);
            false
        }
        other => {
            let text = response.text().await.unwrap_or_default();
            ledger.broke(format!("unexpected {other}: {text}"));
            ledger.again(export);
            false
        }
    }
}

/// Exporters sending back to back until stopped, or (when `drain`) until every export is
/// acknowledged.
pub struct Exporters {
    stop: Arc<AtomicBool>,
    handles: Vec<tokio::task::JoinHandle<()>>,
}

impl Exporters {
    pub fn start(ledger: &Arc<Ledger>, bodies: &Arc<Vec<Vec<u8>>>, url: &str, count: usize, drain: bool) -> Exporters {
        let stop = Arc::new(AtomicBool::new(false));
        let client = client();
        let handles = (0..count)
            .map(|_| {
                let (ledger, bodies, stop, client, url) =
                    (ledger.clone(), bodies.clone(), stop.clone(), client.clone(), url.to_string());
                tokio::spawn(async move {
                    while !stop.load(Ordering::Relaxed) {
                        let Some(export) = ledger.next() else {
                            if drain && ledger.all_acknowledged() {
                                break;
                            }
                            tokio::time::sleep(Duration::from_millis(10)).await;
                            continue;
                        };
                        if !send_one(&client, &url, &ledger, &bodies, export).await {
                            // An exporter backs off after a failure (shortly here, to keep
                            // the test short).
                            tokio::time::sleep(Duration::from_millis(20)).await;
                        }
                    }
                })
            })
            .collect();
        Exporters { stop, handles }
    }

    /// Stops sending; exports in flight finish (or fail and go back in the queue).
    pub async fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        for h in self.handles {
            h.await.unwrap();
        }
    }

    /// Waits until every export is acknowledged (exporters started with `drain`).
    pub async fn finish(self) {
        for h in self.handles {
            h.await.unwrap();
        }
    }
}

/// Sends one export over OTLP/gRPC and books the answer: OK is acknowledged; UNAVAILABLE
/// and RESOURCE_EXHAUSTED must carry a `RetryInfo` and are sent again; anything else
/// breaks the promise. Returns the gRPC code.
pub async fn send_one_grpc(
    client: &mut opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient<
        tonic::transport::Channel,
    >,
    ledger: &Ledger,
    work: &Workload,
    export: usize,
) -> tonic::Code {
    match client.export(work.requests[export].clone()).await {
        Ok(_) => {
            ledger.acknowledge(export);
            tonic::Code::Ok
        }
        Err(status) => {
            let code = status.code();
            match code {
                tonic::Code::Unavailable | tonic::Code::ResourceExhausted => {
                    if code == tonic::Code::Unavailable && loadgen::rpc::retry_delay(status.details()).is_none() {
                        ledger.broke(format!("gRPC {code:?} without RetryInfo: {}", status.message()));
                    }
                }
                // The server went away under the client: not an answer.
                tonic::Code::Unknown | tonic::Code::Cancelled => {}
                other => ledger.broke(format!("unexpected gRPC {other:?}: {}", status.message())),
            }
            ledger.again(export);
            code
        }
    }
}
