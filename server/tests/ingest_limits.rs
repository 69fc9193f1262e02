//! The receivers under hostile input. A real `flightdeck serve` process gets the worst
//! bodies we know (millions of empty spans, values nested past the limit, arrays of
//! millions of empty values, gzip bombs) on both transports, with and without a token:
//! each is answered 4xx / 401 (or the gRPC code for them) and the process' peak resident
//! memory stays under [`PEAK_RSS_BOUND_MIB`]. Then the gRPC framing itself is fuzzed through
//! the real receiver: whatever the frame says, an answer comes back.

mod common;

use bytes::Bytes;
use domain::access::Scope;
use flate2::write::GzEncoder;
use flightdeck::config::IngestAuth;
use flightdeck::otlp::grpc::EXPORT_PATH;
use flightdeck::otlp::IngestService;
use http_body_util::{BodyExt, Full};
use ingest::pipeline::IngestSettings;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Otlp;
use opentelemetry_proto::tonic::common::v1::{AnyValue, ArrayValue, KeyValue, KeyValueList};
use proptest::prelude::*;
use prost::Message;
use std::io::Write;
use std::process::Command;
use std::time::Duration;
use store::testing::TestDb;
use tower::ServiceExt;

/// The peak resident memory `flightdeck serve` may reach while refusing every body below,
/// with the default limits (20 MiB bodies, a 64 MiB ingest budget). Before the limits, the
/// 16 MiB body of empty spans alone took it to 2.1 GB.
const PEAK_RSS_BOUND_MIB: u64 = 256;

fn flightdeck(data_dir: &std::path::Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_flightdeck"));
    cmd.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("FLIGHTDECK_DATA_DIR", data_dir)
        .env("RUST_LOG", "warn");
    cmd
}

/// `VmRSS` or `VmHWM` (the peak) of a process, in MiB.
fn memory_mib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with(field)).unwrap();
    line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() / 1024
}

/// Protobuf of one `ResourceSpans` holding `n` empty spans: two bytes each.
fn empty_spans_protobuf(n: usize) -> Vec<u8> {
    let spans = [0x12u8, 0x00].repeat(n);
    let resource_spans = [vec![0x12], varint(spans.len()), spans].concat();
    [vec![0x0a], varint(resource_spans.len()), resource_spans].concat()
}

fn empty_spans_json(n: usize) -> Vec<u8> {
    let mut body = br#"{"resourceSpans":[{"scopeSpans":[{"spans":["#.to_vec();
    body.extend(b"{},".repeat(n.saturating_sub(1)));
    body.extend(br#"{}]}]}]}"#);
    body
}

fn varint(mut n: usize) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let byte = u8::try_from(n & 0x7f).unwrap();
        n >>= 7;
        if n == 0 {
            out.push(byte);
            return out;
        }
        out.push(byte | 0x80);
    }
}

/// A request whose one span's one attribute holds `value`.
fn with_value(value: AnyValue) -> opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest {
    let mut span = common::spans::span_at(1, 1, None, "x", 1_800_000_000_000_000_000, vec![]);
    span.attributes = vec![KeyValue { key: "v".into(), value: Some(value), ..Default::default() }];
    common::spans::request(vec![span])
}

fn nested(levels: usize) -> AnyValue {
    let mut value = AnyValue { value: Some(Otlp::StringValue("leaf".into())) };
    for i in 0..levels {
        value = if i % 2 == 0 {
            AnyValue { value: Some(Otlp::ArrayValue(ArrayValue { values: vec![value] })) }
        } else {
            let kv = KeyValue { key: "k".into(), value: Some(value), ..Default::default() };
            AnyValue { value: Some(Otlp::KvlistValue(KeyValueList { values: vec![kv] })) }
        };
    }
    value
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = GzEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

/// One gRPC message frame: compressed flag, big-endian length, message.
fn frame(compressed: bool, message: &[u8]) -> Vec<u8> {
    let mut out = vec![u8::from(compressed)];
    out.extend(u32::try_from(message.len()).unwrap().to_be_bytes());
    out.extend(message);
    out
}

/// Sends one raw gRPC request and returns its `grpc-status` (from the headers of a
/// trailers-only answer, or from the trailers).
async fn grpc_call(channel: &tonic::transport::Channel, body: Vec<u8>, token: Option<&str>, gzip: bool) -> i32 {
    let mut req = http::Request::post(format!("http://localhost{EXPORT_PATH}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers");
    if let Some(t) = token {
        req = req.header("authorization", format!("Bearer {t}"));
    }
    if gzip {
        req = req.header("grpc-encoding", "gzip");
    }
    let req = req.body(tonic::body::Body::new(Full::new(Bytes::from(body)))).unwrap();
    let res = tokio::time::timeout(Duration::from_secs(30), channel.clone().oneshot(req))
        .await
        .expect("the gRPC receiver answers within 30 s")
        .expect("the gRPC call completes");
    let status_of = |h: &http::HeaderMap| h.get("grpc-status").and_then(|v| v.to_str().ok()?.parse::<i32>().ok());
    if let Some(code) = status_of(res.headers()) {
        return code;
    }
    let collected = tokio::time::timeout(Duration::from_secs(30), res.into_body().collect())
        .await
        .expect("the body ends")
        .expect("the body is readable");
    collected.trailers().and_then(status_of).expect("a grpc-status in the trailers")
}

#[test]
fn worst_bodies_are_refused_with_4xx_and_peak_memory_stays_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let created = flightdeck(dir.path()).args(["token", "create", "--scope", "ingest", "hostile"]).output().unwrap();
    assert!(created.status.success(), "{}", String::from_utf8_lossy(&created.stderr));
    let token = String::from_utf8(created.stdout).unwrap().trim().to_string();

    let mut command = flightdeck(dir.path());
    command.arg("serve").env("RUST_LOG", "info");
    let server = common::serving::Serving::start(command);
    let pid = server.pid();
    let baseline = memory_mib(pid, "VmRSS:");

    let sixteen_mib_of_empty_spans = empty_spans_protobuf(8 << 20);
    let json_empty_spans = empty_spans_json(5 << 20);
    let deep = with_value(nested(200)).encode_to_vec();
    let deep_json = serde_json::to_vec(&with_value(nested(100))).unwrap();
    let wide = with_value(AnyValue {
        value: Some(Otlp::ArrayValue(ArrayValue { values: vec![AnyValue::default(); 8 << 20] })),
    })
    .encode_to_vec();
    // 16 MiB of empty spans that gzip to a few KiB, and 200 MiB of zeros past the limit.
    let bomb = gzip(&empty_spans_protobuf(8 << 20));
    let bigger_bomb = gzip(&vec![0u8; 200 << 20]);

    let runtime = tokio::runtime::Runtime::new().unwrap();
    let answers = runtime.block_on(async {
        let http = reqwest::Client::new();
        let url = server.otlp_http.clone();
        let proto = "application/x-protobuf";
        let json = "application/json";
        let bodies = [
            (sixteen_mib_of_empty_spans.clone(), proto, false),
            (json_empty_spans.clone(), json, false),
            (deep.clone(), proto, false),
            (deep_json.clone(), json, false),
            (wide.clone(), proto, false),
            (bomb.clone(), proto, true),
            (bigger_bomb.clone(), proto, true),
        ];
        let mut answers = Vec::new();
        for auth in [false, true] {
            // All at once, as an attacker would send them.
            let sent: Vec<_> = bodies
                .iter()
                .cloned()
                .map(|(body, content_type, gzip)| {
                    let mut req = http.post(&url).header("content-type", content_type).body(body);
                    if gzip {
                        req = req.header("content-encoding", "gzip");
                    }
                    if auth {
                        req = req.bearer_auth(&token);
                    }
                    tokio::spawn(async move { req.send().await.map(|r| r.status().as_u16()).unwrap_or(0) })
                })
                .collect();
            let mut statuses = Vec::new();
            for handle in sent {
                statuses.push(handle.await.unwrap());
            }
            answers.push((format!("http, token {auth}"), statuses));
        }
        let channel =
            tonic::transport::Endpoint::from_shared(server.otlp_grpc.clone()).unwrap().connect().await.unwrap();
        let four_mib = empty_spans_protobuf(2 << 20);
        let bigger_bomb_frame = frame(true, &bigger_bomb);
        let mut grpc = Vec::new();
        grpc.push(grpc_call(&channel, frame(false, &four_mib), None, false).await);
        grpc.push(grpc_call(&channel, frame(false, &sixteen_mib_of_empty_spans), Some(&token), false).await);
        grpc.push(grpc_call(&channel, frame(false, &deep), Some(&token), false).await);
        grpc.push(grpc_call(&channel, frame(false, &wide), Some(&token), false).await);
        grpc.push(grpc_call(&channel, frame(true, &bomb), Some(&token), true).await);
        grpc.push(grpc_call(&channel, bigger_bomb_frame.clone(), Some(&token), true).await);
        grpc.push(grpc_call(&channel, bigger_bomb_frame, None, true).await);
        answers.push(("grpc (codes)".into(), grpc.into_iter().map(|c| u16::try_from(c).unwrap()).collect()));
        answers
    });
    let peak = memory_mib(pid, "VmHWM:");
    drop(server);
    println!("flightdeck serve: {baseline} MiB resident after start, {peak} MiB peak while refusing: {answers:?}");

    assert_eq!(answers[0].1, vec![401; 7], "without a token every HTTP body is refused unread");
    // 413 for what passes a limit; the 200 MiB bomb passes the body limit while inflating.
    assert_eq!(answers[1].1, vec![413; 7], "with a token every hostile HTTP body is too large");
    // UNAUTHENTICATED 16, RESOURCE_EXHAUSTED 8 (tonic's own answer to a bomb, too).
    assert_eq!(answers[2].1, vec![16, 8, 8, 8, 8, 8, 16], "gRPC answers");
    assert!(peak < PEAK_RSS_BOUND_MIB, "peak RSS {peak} MiB, over the {PEAK_RSS_BOUND_MIB} MiB bound");
}

/// A receiver in this process on SQLite, its gRPC address and an ingest token.
async fn receiver() -> (TestDb, std::net::SocketAddr, String) {
    let t = TestDb::sqlite().await;
    let service =
        IngestService::start(t.db.clone(), IngestSettings::default(), IngestAuth::Token, 1 << 20, 16 << 20).unwrap().0;
    let token = common::token(&t.db, "fuzz", &[Scope::Ingest]).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = flightdeck::otlp::grpc::transport()
        .add_service(flightdeck::otlp::grpc::server(service))
        .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener));
    tokio::spawn(server);
    (t, addr, token)
}

#[test]
fn any_grpc_frame_is_answered() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (t, addr, token) = runtime.block_on(receiver());
    let channel = runtime.block_on(async {
        tonic::transport::Endpoint::from_shared(format!("http://{addr}")).unwrap().connect().await.unwrap()
    });
    let valid =
        common::spans::request(vec![common::spans::span_at(3, 1, None, "ok", 1_800_000_000_000_000_000, vec![])])
            .encode_to_vec();
    // A valid frame is stored: the fuzzing below talks to a working receiver.
    assert_eq!(runtime.block_on(grpc_call(&channel, frame(false, &valid), Some(&token), false)), 0);

    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(96);
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    let frames = (
        any::<u8>(),
        prop_oneof![Just(None), (0u32..4096).prop_map(Some), Just(Some(u32::MAX))],
        proptest::collection::vec(any::<u8>(), 0..512),
        any::<bool>(),
        any::<bool>(),
    );
    runner
        .run(&frames, |(flag, declared, payload, use_valid, gzip)| {
            let message = if use_valid { valid.clone() } else { payload };
            let mut body = vec![flag];
            let length = declared.unwrap_or(u32::try_from(message.len()).unwrap());
            body.extend(length.to_be_bytes());
            body.extend(&message);
            let code = runtime.block_on(grpc_call(&channel, body, Some(&token), gzip));
            prop_assert!((0..=16).contains(&code), "grpc-status {code}");
            Ok(())
        })
        .unwrap();
    runtime.block_on(t.cleanup());
}
