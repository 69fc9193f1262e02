//! End-to-end checks of `run_load` against small local receivers: a hand-written
//! HTTP/1.1 server (enough of one for reqwest) and a tonic gRPC server, each answering
//! by a script and recording exactly what arrived.

use std::collections::{HashMap, HashSet};
use std::io::Read;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use flate2::read::GzDecoder;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{TraceService, TraceServiceServer};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTracePartialSuccess, ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use prost::Message;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tonic::codec::CompressionEncoding;

use super::retry::MAX_RETRIES;
use super::*;
use crate::rpc::{ProtoAny, ProtoDuration, RetryInfo, RpcStatus, RETRY_INFO_TYPE};
use crate::synth::SynthRun;

/// One request as the receiver saw it.
struct Received {
    request_line: String,
    headers: HashMap<String, String>,
    request: ExportTraceServiceRequest,
}

impl Received {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }
}

struct Reply {
    status: u16,
    headers: Vec<(&'static str, String)>,
    body: Vec<u8>,
}

impl Reply {
    fn empty(status: u16) -> Self {
        Self { status, headers: Vec::new(), body: Vec::new() }
    }
}

/// What the receiver has seen and said so far, shared with the script.
#[derive(Default)]
struct Log {
    received: Vec<Received>,
    /// First span id of every distinct request, to tell first attempts from retries.
    distinct: HashSet<Vec<u8>>,
    throttled: u64,
    rejected: u64,
}

type Script = dyn Fn(&Received, bool, &mut Log) -> Reply + Send + Sync;

fn span_ids(request: &ExportTraceServiceRequest) -> Vec<Vec<u8>> {
    request
        .resource_spans
        .iter()
        .flat_map(|r| &r.scope_spans)
        .flat_map(|s| &s.spans)
        .map(|s| s.span_id.clone())
        .collect()
}

/// Records the request, tells the script whether it is a first attempt, and logs it.
fn handle(log: &Mutex<Log>, script: &Script, received: Received) -> Reply {
    let mut log = log.lock().unwrap();
    let first_span = span_ids(&received.request).first().cloned().unwrap_or_default();
    let first_attempt = log.distinct.insert(first_span);
    let reply = script(&received, first_attempt, &mut log);
    log.received.push(received);
    reply
}

/// Starts a receiver on a free loopback port; returns its base URL and its log.
async fn http_receiver(
    script: impl Fn(&Received, bool, &mut Log) -> Reply + Send + Sync + 'static,
) -> (String, Arc<Mutex<Log>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let log = Arc::new(Mutex::new(Log::default()));
    let script: Arc<Script> = Arc::new(script);
    let state = Arc::clone(&log);
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let (log, script) = (Arc::clone(&state), Arc::clone(&script));
            tokio::spawn(async move { serve_connection(stream, &log, script.as_ref()).await });
        }
    });
    (endpoint, log)
}

/// HTTP/1.1 with keep-alive and Content-Length bodies: all reqwest needs here.
async fn serve_connection(stream: TcpStream, log: &Mutex<Log>, script: &Script) -> std::io::Result<()> {
    let (read, mut write) = stream.into_split();
    let mut reader = BufReader::new(read);
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line).await? == 0 {
            return Ok(());
        }
        let mut headers = HashMap::new();
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).await?;
            let Some((name, value)) = line.trim_end().split_once(':') else {
                break;
            };
            headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_string());
        }
        let length = headers.get("content-length").map_or(0, |v| v.parse().unwrap());
        let mut body = vec![0; length];
        reader.read_exact(&mut body).await?;

        if headers.get("content-encoding").map(String::as_str) == Some("gzip") {
            let mut plain = Vec::new();
            GzDecoder::new(body.as_slice()).read_to_end(&mut plain)?;
            body = plain;
        }
        let request = if headers.get("content-type").map(String::as_str) == Some("application/json") {
            serde_json::from_slice(&body).expect("OTLP JSON body")
        } else {
            ExportTraceServiceRequest::decode(body.as_slice()).expect("OTLP protobuf body")
        };
        let received = Received { request_line: request_line.trim_end().to_string(), headers, request };
        let reply = handle(log, script, received);
        let mut head = format!("HTTP/1.1 {} Scripted\r\ncontent-length: {}\r\n", reply.status, reply.body.len());
        for (name, value) in &reply.headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        write.write_all(head.as_bytes()).await?;
        write.write_all(&reply.body).await?;
    }
}

fn options(endpoint: String, protocol: Protocol, runs: usize) -> LoadOptions {
    LoadOptions {
        target: Target { endpoint, protocol, token: None, gzip: false },
        runs: Some(runs),
        duration: None,
        rate_spans_per_sec: None,
        concurrency: 4,
        spans_per_request: 40,
        synth: SynthOptions { seed: 7, ..Default::default() },
        rss_pid: None,
    }
}

/// The runs `opts` makes `run_load` send.
fn runs_of(opts: &LoadOptions) -> Vec<SynthRun> {
    let mut synth = Synth::new(opts.synth.clone());
    (0..opts.runs.unwrap()).map(|_| synth.next_run()).collect()
}

fn sorted_span_ids(runs: &[SynthRun]) -> Vec<Vec<u8>> {
    let mut ids: Vec<Vec<u8>> = crate::synth::requests_for(runs, usize::MAX).iter().flat_map(span_ids).collect();
    ids.sort();
    ids
}

fn received_span_ids(log: &Log) -> Vec<Vec<u8>> {
    let mut ids: Vec<Vec<u8>> = log.received.iter().flat_map(|r| span_ids(&r.request)).collect();
    ids.sort();
    ids
}

fn partial_success(rejected: i64) -> Vec<u8> {
    ExportTraceServiceResponse {
        partial_success: Some(ExportTracePartialSuccess {
            rejected_spans: rejected,
            error_message: "rejected for the test".into(),
        }),
    }
    .encode_to_vec()
}

#[tokio::test]
async fn http_protobuf_gzip_with_token_delivers_every_span_once_through_429s() {
    // Every third distinct request is refused once with 429; every fourth answer reports
    // one rejected span.
    let (endpoint, log) = http_receiver(|_, first_attempt, log| {
        if first_attempt && log.distinct.len() % 3 == 0 {
            log.throttled += 1;
            return Reply { headers: vec![("retry-after", "0".into())], ..Reply::empty(429) };
        }
        let rejected = i64::from(log.received.len() % 4 == 0);
        log.rejected += rejected as u64;
        Reply {
            headers: vec![("content-type", "application/x-protobuf".into())],
            body: partial_success(rejected),
            ..Reply::empty(200)
        }
    })
    .await;
    let mut opts = options(endpoint, Protocol::HttpProtobuf, 30);
    opts.target.gzip = true;
    opts.target.token = Some("fd_t0ken".into());
    let runs = runs_of(&opts);
    let total: usize = runs.iter().map(|r| r.span_count).sum();

    let report = run_load(opts).await.unwrap();

    let log = log.lock().unwrap();
    assert_eq!(report.runs, 30);
    assert_eq!(report.requests, crate::synth::requests_for(&runs, 40).len() as u64);
    assert_eq!(report.requests, log.distinct.len() as u64);
    assert_eq!(report.spans_sent, total as u64);
    assert!(log.throttled > 0);
    assert_eq!(report.retries, log.throttled);
    assert_eq!(report.failures, 0, "{:?}", report.last_failure);
    assert_eq!(report.partial_rejections, log.rejected);
    assert_eq!(report.spans_accepted, total as u64 - log.rejected);
    assert!(report.latency_p50_ms > 0.0 && report.latency_p99_ms >= report.latency_p50_ms);
    let mut delivered: Vec<Vec<u8>> = Vec::new();
    let mut seen = HashSet::new();
    for received in &log.received {
        let ids = span_ids(&received.request);
        // A retry repeats a request that was throttled; count its spans once.
        if seen.insert(ids[0].clone()) {
            delivered.extend(ids);
        }
    }
    delivered.sort();
    assert_eq!(delivered, sorted_span_ids(&runs));
    for received in log.received.iter() {
        assert_eq!(received.request_line, "POST /v1/traces HTTP/1.1");
        assert_eq!(received.header("content-type"), Some("application/x-protobuf"));
        assert_eq!(received.header("content-encoding"), Some("gzip"));
        assert_eq!(received.header("authorization"), Some("Bearer fd_t0ken"));
    }
}

#[tokio::test]
async fn http_json_sends_otlp_json_and_reads_json_partial_success() {
    let (endpoint, log) = http_receiver(|_, _, log| {
        let body = if log.received.is_empty() {
            r#"{"partialSuccess":{"rejectedSpans":"2","errorMessage":"two bad spans"}}"#
        } else {
            "{}"
        };
        Reply {
            headers: vec![("content-type", "application/json".into())],
            body: body.as_bytes().to_vec(),
            ..Reply::empty(200)
        }
    })
    .await;
    let opts = options(format!("{endpoint}/"), Protocol::HttpJson, 5);
    let runs = runs_of(&opts);

    let report = run_load(opts).await.unwrap();

    let log = log.lock().unwrap();
    assert_eq!(report.partial_rejections, 2);
    assert_eq!(report.failures, 0, "{:?}", report.last_failure);
    assert_eq!(received_span_ids(&log), sorted_span_ids(&runs));
    for received in log.received.iter() {
        // The trailing slash of the endpoint is not doubled.
        assert_eq!(received.request_line, "POST /v1/traces HTTP/1.1");
        assert_eq!(received.header("content-type"), Some("application/json"));
        assert_eq!(received.header("content-encoding"), None);
        assert_eq!(received.header("authorization"), None);
    }
}

#[tokio::test]
async fn a_client_error_fails_the_request_without_retrying() {
    let (endpoint, log) =
        http_receiver(|_, _, _| Reply { body: b"trace_id must be 16 bytes".to_vec(), ..Reply::empty(400) }).await;
    let report = run_load(options(endpoint, Protocol::HttpProtobuf, 3)).await.unwrap();

    assert_eq!(report.failures, report.requests);
    assert_eq!(report.retries, 0);
    assert_eq!(report.spans_accepted, 0);
    assert_eq!(log.lock().unwrap().received.len() as u64, report.requests);
    let failure = report.last_failure.unwrap();
    assert!(failure.contains("400") && failure.contains("16 bytes"), "{failure}");
}

#[tokio::test]
async fn retries_stop_at_the_limit() {
    let (endpoint, log) =
        http_receiver(|_, _, _| Reply { headers: vec![("retry-after", "0".into())], ..Reply::empty(503) }).await;
    let mut opts = options(endpoint, Protocol::HttpProtobuf, 1);
    opts.spans_per_request = 10_000;
    let report = run_load(opts).await.unwrap();

    assert_eq!(report.requests, 1);
    assert_eq!(report.retries, u64::from(MAX_RETRIES));
    assert_eq!(report.failures, 1);
    assert_eq!(log.lock().unwrap().received.len(), 1 + MAX_RETRIES as usize);
}

#[tokio::test]
async fn a_duration_and_a_rate_bound_the_load() {
    let (endpoint, _log) = http_receiver(|_, _, _| Reply::empty(200)).await;
    let mut opts = options(endpoint, Protocol::HttpProtobuf, 0);
    opts.runs = None;
    opts.duration = Some(Duration::from_millis(400));
    opts.rate_spans_per_sec = Some(500.0);
    opts.spans_per_request = 20;

    let report = run_load(opts).await.unwrap();

    assert!(report.elapsed >= Duration::from_millis(380), "{:?}", report.elapsed);
    assert!(report.elapsed < Duration::from_secs(5), "{:?}", report.elapsed);
    assert!(report.requests >= 2);
    // 400 ms at 500 spans/s is 200 spans, plus the request that opened the window.
    assert!(report.spans_sent <= 220, "{}", report.spans_sent);
    assert_eq!(report.spans_accepted, report.spans_sent);
}

#[tokio::test]
async fn unbounded_or_degenerate_options_are_refused() {
    let mut opts = options("http://127.0.0.1:9".into(), Protocol::HttpProtobuf, 1);
    opts.runs = None;
    assert!(run_load(opts.clone()).await.is_err());
    opts.runs = Some(1);
    opts.concurrency = 0;
    assert!(run_load(opts.clone()).await.is_err());
    opts.concurrency = 1;
    opts.rate_spans_per_sec = Some(0.0);
    assert!(run_load(opts).await.is_err());
}

/// A gRPC receiver that refuses the first request once with RESOURCE_EXHAUSTED and a
/// RetryInfo, reports one rejected span on the second answer, and logs metadata.
#[derive(Clone, Default)]
struct GrpcReceiver {
    log: Arc<Mutex<GrpcLog>>,
}

#[derive(Default)]
struct GrpcLog {
    spans: Vec<Vec<u8>>,
    calls: usize,
    authorization: HashSet<String>,
    encodings: HashSet<String>,
}

#[tonic::async_trait]
impl TraceService for GrpcReceiver {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let mut guard = self.log.lock().unwrap();
        let log = &mut *guard;
        log.calls += 1;
        let metadata = request.metadata();
        for (key, set) in [("authorization", &mut log.authorization), ("grpc-encoding", &mut log.encodings)] {
            if let Some(value) = metadata.get(key).and_then(|v| v.to_str().ok()) {
                set.insert(value.to_string());
            }
        }
        if log.calls == 1 {
            let details = RpcStatus {
                code: 14,
                message: String::new(),
                details: vec![ProtoAny {
                    type_url: RETRY_INFO_TYPE.into(),
                    value: RetryInfo { retry_delay: Some(ProtoDuration { seconds: 0, nanos: 1_000_000 }) }
                        .encode_to_vec(),
                }],
            };
            return Err(tonic::Status::with_details(
                tonic::Code::ResourceExhausted,
                "queue full",
                details.encode_to_vec().into(),
            ));
        }
        log.spans.extend(span_ids(request.get_ref()));
        let partial_success = (log.calls == 2)
            .then(|| ExportTracePartialSuccess { rejected_spans: 1, error_message: "one bad span".into() });
        Ok(tonic::Response::new(ExportTraceServiceResponse { partial_success }))
    }
}

#[tokio::test]
async fn grpc_sends_gzip_with_the_token_and_retries_resource_exhausted() {
    let receiver = GrpcReceiver::default();
    let incoming = tonic::transport::server::TcpIncoming::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let endpoint = format!("http://{}", incoming.local_addr().unwrap());
    let service = TraceServiceServer::new(receiver.clone()).accept_compressed(CompressionEncoding::Gzip);
    tokio::spawn(tonic::transport::Server::builder().add_service(service).serve_with_incoming(incoming));
    let mut opts = options(endpoint, Protocol::Grpc, 10);
    opts.target.gzip = true;
    opts.target.token = Some("fd_grpc".into());
    opts.concurrency = 1;
    let runs = runs_of(&opts);
    let total: u64 = runs.iter().map(|r| r.span_count as u64).sum();

    let report = run_load(opts).await.unwrap();

    let log = receiver.log.lock().unwrap();
    assert_eq!(report.retries, 1);
    assert_eq!(report.failures, 0, "{:?}", report.last_failure);
    assert_eq!(report.partial_rejections, 1);
    assert_eq!(report.spans_accepted, total - 1);
    let mut delivered = log.spans.clone();
    delivered.sort();
    assert_eq!(delivered, sorted_span_ids(&runs));
    assert_eq!(log.authorization, HashSet::from(["Bearer fd_grpc".to_string()]));
    assert_eq!(log.encodings, HashSet::from(["gzip".to_string()]));
}

#[tokio::test]
async fn memory_of_the_receiver_is_reported_when_asked() {
    let (endpoint, _log) = http_receiver(|_, _, _| Reply::empty(200)).await;
    let mut opts = options(endpoint, Protocol::HttpProtobuf, 3);
    // The receiver runs in this process, so this process is the one to watch.
    opts.rss_pid = Some(std::process::id());
    let report = run_load(opts).await.unwrap();
    let memory = report.server_memory.expect("memory figures");
    assert!(memory.samples >= 1 && memory.peak_rss_kib > 0);
    assert!(report.to_string().contains("peak RSS"));
}

#[test]
fn the_token_stays_out_of_debug_output() {
    let mut opts = options("http://127.0.0.1:4318".into(), Protocol::HttpProtobuf, 1);
    opts.target.token = Some("fd_secret_value".into());
    let printed = format!("{opts:?}");
    assert!(!printed.contains("fd_secret_value") && printed.contains("<redacted>"), "{printed}");
}
