//! OTLP ingest end to end: the official OpenTelemetry exporter over HTTP (protobuf and
//! JSON) and gRPC into running receivers, read back through the REST API; every error
//! case of the receivers; re-sent, out-of-order and multi-trace runs. SQLite and
//! PostgreSQL.

use app::auth::secrets;
use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use axum::Router;
use domain::access::Scope;
use flate2::write::GzEncoder;
use flightdeck::config::IngestAuth;
use flightdeck::otlp::IngestService;
use ingest::pipeline::IngestSettings;
use opentelemetry::trace::{Span as _, TraceContextExt as _, Tracer as _, TracerProvider as _};
use opentelemetry::KeyValue as OtelKv;
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig, WithTonicConfig};
use opentelemetry_proto::tonic::collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse};
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, KeyValue};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span, Status};
use prost::Message;
use serde_json::Value;
use std::future::IntoFuture;
use std::io::Write;
use std::net::SocketAddr;
use store::testing::TestDb;
use store::{tokens, Db};
use tower::ServiceExt;

async fn token(db: &Db, scopes: &[Scope]) -> String {
    let (secret, prefix) = secrets::generate_token();
    tokens::create(
        db,
        tokens::NewToken {
            name: "test",
            prefix: &prefix,
            secret_sha256: &secrets::sha256_hex(&secret),
            scopes,
            created_by: None,
        },
    )
    .await
    .unwrap();
    secret
}

struct Harness {
    db: Db,
    service: IngestService,
    http: Router,
    api: Router,
    ingest_token: String,
    read_token: String,
}

async fn harness(t: &TestDb, max_body: usize) -> Harness {
    harness_with_budget(t, max_body, 64 << 20).await
}

/// A harness whose exports in flight may hold at most `budget` bytes of memory.
async fn harness_with_budget(t: &TestDb, max_body: usize, budget: usize) -> Harness {
    let service =
        IngestService::start(t.db.clone(), IngestSettings::default(), IngestAuth::Token, max_body, budget).unwrap().0;
    let state = app::state::AppState::unconfigured(
        t.db.clone(),
        leptos::config::LeptosOptions::builder().output_name("flightdeck").build(),
    );
    Harness {
        db: t.db.clone(),
        http: flightdeck::otlp::http::router(service.clone()),
        api: Router::new().nest("/api/v1", flightdeck::api::router(&state)).with_state(state),
        service,
        ingest_token: token(&t.db, &[Scope::Ingest]).await,
        read_token: token(&t.db, &[Scope::Read]).await,
    }
}

impl Harness {
    async fn post(
        &self,
        content_type: &str,
        body: Vec<u8>,
        extra: &[(&str, &str)],
        auth: Option<&str>,
    ) -> (StatusCode, axum::http::HeaderMap, Vec<u8>) {
        let mut req = Request::post("/v1/traces").header(header::CONTENT_TYPE, content_type);
        let bearer = format!("Bearer {}", auth.unwrap_or(&self.ingest_token));
        req = req.header(header::AUTHORIZATION, bearer);
        for (k, v) in extra {
            req = req.header(*k, *v);
        }
        let res = self.http.clone().oneshot(req.body(Body::from(body)).unwrap()).await.unwrap();
        let status = res.status();
        let headers = res.headers().clone();
        let bytes = axum::body::to_bytes(res.into_body(), 1 << 24).await.unwrap().to_vec();
        (status, headers, bytes)
    }

    async fn post_proto(&self, request: &ExportTraceServiceRequest) -> (StatusCode, ExportTraceServiceResponse) {
        let (status, _, body) = self.post("application/x-protobuf", request.encode_to_vec(), &[], None).await;
        (status, ExportTraceServiceResponse::decode(body.as_slice()).unwrap_or_default())
    }

    async fn api(&self, path: &str) -> (StatusCode, Value) {
        let req = Request::get(path)
            .header(header::AUTHORIZATION, format!("Bearer {}", self.read_token))
            .body(Body::empty())
            .unwrap();
        let res = self.api.clone().oneshot(req).await.unwrap();
        let status = res.status();
        let bytes = axum::body::to_bytes(res.into_body(), 1 << 24).await.unwrap();
        (status, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
    }

    async fn run(&self, run_id: &str) -> Value {
        let (status, body) = self.api(&format!("/api/v1/runs/{run_id}")).await;
        assert_eq!(status, StatusCode::OK, "run {run_id}: {body}");
        body
    }

    async fn stored_spans(&self) -> i64 {
        store::spans::count(&self.db).await.unwrap()
    }
}

fn kv(key: &str, value: any_value::Value) -> KeyValue {
    KeyValue { key: key.into(), value: Some(AnyValue { value: Some(value) }), ..Default::default() }
}
fn s(key: &str, v: &str) -> KeyValue {
    kv(key, any_value::Value::StringValue(v.into()))
}
fn i(key: &str, v: i64) -> KeyValue {
    kv(key, any_value::Value::IntValue(v))
}

fn span(trace: u8, id: u8, parent: Option<u8>, name: &str, attrs: Vec<KeyValue>) -> Span {
    Span {
        trace_id: vec![trace; 16],
        span_id: vec![id; 8],
        parent_span_id: parent.map(|p| vec![p; 8]).unwrap_or_default(),
        name: name.into(),
        start_time_unix_nano: 1_800_000_000_000_000_000 + u64::from(id) * 1_000_000,
        end_time_unix_nano: 1_800_000_000_000_000_000 + u64::from(id) * 1_000_000 + 500_000,
        attributes: attrs,
        ..Default::default()
    }
}

fn request(spans: Vec<Span>) -> ExportTraceServiceRequest {
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource { attributes: vec![s("service.name", "billing-agent")], ..Default::default() }),
            scope_spans: vec![ScopeSpans { spans, ..Default::default() }],
            ..Default::default()
        }],
    }
}

fn tool(trace: u8, id: u8, name: &str, class: &str, outcome: &str, key: &str, external: Option<&str>) -> Span {
    let mut attrs = vec![
        s("tool.name", name),
        s("tool.side_effect", class),
        s("tool.outcome", outcome),
        s("tool.idempotency_key", key),
        i("step.index", 1),
    ];
    if let Some(e) = external {
        attrs.push(s("tool.external_id", e));
    }
    span(trace, id, Some(1), &format!("tool {name}"), attrs)
}

/// A complete run: root (named), one step, a duplicated email, a deduped call, a read.
fn whole_run(trace: u8, run_id: &str) -> Vec<Span> {
    vec![
        span(trace, 1, None, "agent.run", vec![s("run.id", run_id), s("run.trigger", "user")]),
        span(
            trace,
            2,
            Some(1),
            "step 1",
            vec![i("step.index", 1), i("step.input_tokens", 100), i("step.output_tokens", 20)],
        ),
        tool(trace, 3, "send_email", "irreversible", "ok", "k-mail", Some("msg_1")),
        tool(trace, 4, "send_email", "irreversible", "ok", "k-mail", Some("msg_2")),
        tool(trace, 5, "create_doc", "write", "deduped", "k-doc", Some("doc_1")),
        tool(trace, 6, "lookup", "read", "ok", "k-read", None),
    ]
}

#[tokio::test]
async fn a_run_is_derived_and_read_back_through_the_api() {
    for t in TestDb::each_backend().await {
        let h = harness(&t, 20 << 20).await;
        let (status, response) = h.post_proto(&request(whole_run(1, "run-a"))).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(response.partial_success, None);
        let run = h.run("run-a").await;
        assert_eq!(run["terminal_reason"], "completed", "{run}");
        assert_eq!(run["agent"], "billing-agent");
        assert_eq!(run["trigger"], "user");
        assert_eq!((run["steps"].as_i64(), run["tool_calls"].as_i64()), (Some(1), Some(4)));
        assert_eq!((run["input_tokens"].as_i64(), run["output_tokens"].as_i64()), (Some(100), Some(20)));
        assert_eq!(run["duplicate_side_effects"], 1);
        assert_eq!(run["deduped_calls"], 1);
        assert_eq!(run["completed_without_read"], false);
        assert_eq!(run["trace_ids"], serde_json::json!(["01010101010101010101010101010101"]));
        assert_eq!(
            run["duplicates"][0],
            serde_json::json!({"tool": "send_email", "key": "k-mail", "count": 2, "external_ids": ["msg_1", "msg_2"]})
        );
        assert_eq!(run["step_list"][0]["index"], 1);
        let call = &run["tool_call_list"][0];
        for field in [
            "span_id",
            "step_index",
            "tool",
            "side_effect",
            "idempotency_key",
            "attempt",
            "outcome",
            "latency_ms",
            "external_id",
            "args_sha256",
            "approval_id",
        ] {
            assert!(call.get(field).is_some(), "tool call lacks {field}: {call}");
        }
        assert!(run["started_at"].as_str().unwrap().ends_with('Z'), "RFC 3339 UTC: {}", run["started_at"]);
        t.cleanup().await;
    }
}

#[tokio::test]
async fn resent_spans_are_stored_once() {
    for t in TestDb::each_backend().await {
        let h = harness(&t, 20 << 20).await;
        let req = request(whole_run(2, "run-resent"));
        assert_eq!(h.post_proto(&req).await.0, StatusCode::OK);
        assert_eq!(h.post_proto(&req).await.0, StatusCode::OK, "a retry after a lost response is fine");
        assert_eq!(h.stored_spans().await, 6);
        let run = h.run("run-resent").await;
        assert_eq!((run["tool_calls"].as_i64(), run["duplicate_side_effects"].as_i64()), (Some(4), Some(1)));

        // A new run whose spans come twice in one commit (a retry grouped with the
        // original): derived from the batch itself, each span still counts once.
        let mut doubled = whole_run(3, "run-doubled");
        doubled.extend(whole_run(3, "run-doubled"));
        assert_eq!(h.post_proto(&request(doubled)).await.0, StatusCode::OK);
        assert_eq!(h.stored_spans().await, 12);
        let run = h.run("run-doubled").await;
        assert_eq!((run["tool_calls"].as_i64(), run["duplicate_side_effects"].as_i64()), (Some(4), Some(1)));
        assert_eq!((run["steps"].as_i64(), run["deduped_calls"].as_i64()), (Some(1), Some(1)));
        t.cleanup().await;
    }
}

/// Exports sent at once, each with one span of every one of the same runs and each sent
/// twice: on PostgreSQL the ingest writers (`postgres_writers`, four here) commit them side
/// by side, on SQLite the one writer in turn; either way every span is stored once and
/// every run is whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn exports_of_the_same_runs_sent_at_once_are_stored_once_and_whole() {
    for t in TestDb::each_backend().await {
        let h = std::sync::Arc::new(harness(&t, 20 << 20).await);
        let runs: Vec<Vec<Span>> = (1..=30u8).map(|n| whole_run(n, &format!("run-at-once-{n}"))).collect();
        let posts: Vec<_> = (0..6)
            .flat_map(|part| [part, part])
            .map(|part| {
                let spans = runs.iter().map(|run| run[part].clone()).collect();
                let h = h.clone();
                tokio::spawn(async move { h.post_proto(&request(spans)).await.0 })
            })
            .collect();
        for post in posts {
            assert_eq!(post.await.unwrap(), StatusCode::OK, "{}", t.backend());
        }
        assert_eq!(h.stored_spans().await, 180, "{}", t.backend());
        for n in 1..=30 {
            let run = h.run(&format!("run-at-once-{n}")).await;
            assert_eq!(run["terminal_reason"], "completed", "{run}");
            assert_eq!((run["steps"].as_i64(), run["tool_calls"].as_i64()), (Some(1), Some(4)), "{run}");
            assert_eq!(run["duplicate_side_effects"], 1, "{run}");
        }
        let (status, list) = h.api("/api/v1/runs?limit=100").await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(list["runs"].as_array().map(Vec::len), Some(30), "one row per run on {}", t.backend());
        t.cleanup().await;
    }
}

#[tokio::test]
async fn children_first_root_last_over_several_requests() {
    for t in TestDb::each_backend().await {
        let h = harness(&t, 20 << 20).await;
        let mut spans = whole_run(3, "run-late-root");
        let root = spans.remove(0);
        // Only the root names the run: until it arrives the trace is its own run, running.
        let (first, second) = spans.split_at(2);
        h.post_proto(&request(second.to_vec())).await;
        h.post_proto(&request(first.to_vec())).await;
        let trace_run = h.run("03030303030303030303030303030303").await;
        assert_eq!(trace_run["terminal_reason"], "running");
        h.post_proto(&request(vec![root])).await;
        let run = h.run("run-late-root").await;
        assert_eq!(run["terminal_reason"], "completed");
        assert_eq!((run["steps"].as_i64(), run["tool_calls"].as_i64()), (Some(1), Some(4)));
        let (status, _) = h.api("/api/v1/runs/03030303030303030303030303030303").await;
        assert_eq!(status, StatusCode::NOT_FOUND, "the placeholder run is gone");
        let (_, list) = h.api("/api/v1/runs").await;
        assert_eq!(list["runs"].as_array().unwrap().len(), 1);
        t.cleanup().await;
    }
}

#[tokio::test]
async fn one_run_over_two_traces_after_an_orchestrator_retry() {
    for t in TestDb::each_backend().await {
        let h = harness(&t, 20 << 20).await;
        let mut first = vec![
            span(4, 1, None, "agent.run", vec![s("run.id", "run-retried"), s("run.trigger", "user")]),
            tool(4, 3, "send_email", "irreversible", "ok", "k-mail", Some("msg_1")),
            tool(4, 4, "create_record", "write", "timeout", "k-rec", None),
        ];
        first[0].status = Some(Status { code: 2, message: "tool timed out".into() });
        let mut second = vec![
            span(5, 11, None, "agent.run", vec![s("run.id", "run-retried"), s("run.trigger", "retry")]),
            tool(5, 13, "send_email", "irreversible", "ok", "k-mail", Some("msg_2")),
            tool(5, 14, "create_record", "write", "ok", "k-rec", Some("rec_1")),
        ];
        for sp in &mut second {
            if sp.parent_span_id == vec![1; 8] {
                sp.parent_span_id = vec![11; 8];
            }
        }
        h.post_proto(&request(first)).await;
        let after_first = h.run("run-retried").await;
        assert_eq!(after_first["terminal_reason"], "error");
        h.post_proto(&request(second)).await;
        let run = h.run("run-retried").await;
        assert_eq!(run["trace_ids"].as_array().unwrap().len(), 2, "{run}");
        assert_eq!(run["terminal_reason"], "completed", "the latest attempt decides");
        assert_eq!(run["trigger"], "user");
        assert_eq!(run["duplicate_side_effects"], 1, "the email went out twice");
        assert_eq!(run["duplicates"][0]["external_ids"], serde_json::json!(["msg_1", "msg_2"]));
        t.cleanup().await;
    }
}

#[tokio::test]
async fn partial_success_keeps_the_valid_spans_and_explains_the_rest() {
    for t in TestDb::each_backend().await {
        let h = harness(&t, 20 << 20).await;
        let mut bad = span(6, 2, Some(1), "bad", vec![]);
        bad.trace_id = vec![6; 15];
        let mut huge = span(6, 3, Some(1), "huge", vec![s("blob", &"x".repeat(300 * 1024))]);
        huge.name = "huge".into();
        let good = span(6, 1, None, "agent.run", vec![s("run.id", "run-partial")]);
        let (status, response) = h.post_proto(&request(vec![good, bad, huge])).await;
        assert_eq!(status, StatusCode::OK);
        let partial = response.partial_success.expect("partial success reported");
        assert_eq!(partial.rejected_spans, 2);
        assert!(partial.error_message.contains("trace_id must be 16 bytes"), "{}", partial.error_message);
        assert!(partial.error_message.contains("attribute `blob`"), "{}", partial.error_message);
        assert_eq!(h.stored_spans().await, 1);
        t.cleanup().await;
    }
}

#[tokio::test]
async fn bad_requests_get_clear_errors_and_store_nothing() {
    for t in TestDb::each_backend().await {
        let h = harness(&t, 64 * 1024).await;
        let valid = request(whole_run(7, "run-never")).encode_to_vec();

        let (status, _, body) = h.post("text/plain", valid.clone(), &[], None).await;
        assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
        assert!(String::from_utf8_lossy(&body).contains("application/x-protobuf or application/json"));

        let (status, headers, body) = h.post("application/x-protobuf", b"\x0a\xff\xff\xff".to_vec(), &[], None).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_eq!(headers[header::CONTENT_TYPE], "application/x-protobuf");
        let rpc = flightdeck::otlp::http::RpcStatus::decode(body.as_slice()).unwrap();
        assert_eq!(rpc.code, 3);
        assert!(rpc.message.contains("not a valid OTLP protobuf"), "{}", rpc.message);

        let (status, headers, body) = h.post("application/json", b"{\"resourceSpans\": 5}".to_vec(), &[], None).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_eq!(headers[header::CONTENT_TYPE], "application/json");
        let rpc: Value = serde_json::from_slice(&body).unwrap();
        assert!(rpc["message"].as_str().unwrap().contains("not valid OTLP JSON"), "{rpc}");

        let oversize = request(vec![span(7, 1, None, "x", vec![s("pad", &"y".repeat(100 * 1024))])]).encode_to_vec();
        let declared = oversize.len().to_string();
        let (status, _, body) = h.post("application/x-protobuf", oversize.clone(), &[], None).await;
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
        assert!(String::from_utf8_lossy(&body).contains("byte limit"));
        // Refused on its declared length, before the body is read.
        let (status, _, body) =
            h.post("application/x-protobuf", oversize, &[("content-length", declared.as_str())], None).await;
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
        assert!(String::from_utf8_lossy(&body).contains("byte limit"));

        let mut gz = GzEncoder::new(Vec::new(), flate2::Compression::best());
        gz.write_all(&vec![0u8; 8 << 20]).unwrap();
        let bomb = gz.finish().unwrap();
        let (status, _, _) = h.post("application/x-protobuf", bomb, &[("content-encoding", "gzip")], None).await;
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "a gzip bomb stops at the limit");

        let (status, _, _) = h.post("application/x-protobuf", valid.clone(), &[("content-encoding", "br")], None).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);

        let (status, _, body) = h.post("application/x-protobuf", valid.clone(), &[], Some("fdk_wrong")).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        assert_eq!(flightdeck::otlp::http::RpcStatus::decode(body.as_slice()).unwrap().code, 16);
        let read_only = h.read_token.clone();
        let (status, _, body) = h.post("application/x-protobuf", valid.clone(), &[], Some(&read_only)).await;
        assert_eq!(status, StatusCode::FORBIDDEN);
        assert!(flightdeck::otlp::http::RpcStatus::decode(body.as_slice()).unwrap().message.contains("`ingest` scope"));

        let mut all_bad = span(7, 1, None, "x", vec![]);
        all_bad.span_id = vec![1; 3];
        let (status, _, _) = h.post("application/x-protobuf", request(vec![all_bad]).encode_to_vec(), &[], None).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "a request with nothing valid is refused");

        assert_eq!(h.stored_spans().await, 0, "no error stored anything");

        // the same request, gzip-compressed and as JSON with unknown fields, is fine
        let mut gz = GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(&valid).unwrap();
        let (status, _, _) =
            h.post("application/x-protobuf", gz.finish().unwrap(), &[("content-encoding", "gzip")], None).await;
        assert_eq!(status, StatusCode::OK);
        let mut json: Value = serde_json::to_value(request(whole_run(8, "run-json"))).unwrap();
        json["someFutureField"] = Value::Bool(true);
        let (status, headers, body) = h.post("application/json", json.to_string().into_bytes(), &[], None).await;
        assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
        assert_eq!(headers[header::CONTENT_TYPE], "application/json");
        assert_eq!(h.stored_spans().await, 12);
        t.cleanup().await;
    }
}

#[tokio::test]
async fn overload_is_refused_with_retry_after_and_nothing_is_lost() {
    let t = TestDb::sqlite().await;
    let h = harness(&t, 20 << 20).await;
    // Fill the memory budget as a burst of in-flight exports would.
    let held = h.service.reserve(usize::MAX).unwrap();
    let (status, headers, body) =
        h.post("application/x-protobuf", request(whole_run(9, "run-busy")).encode_to_vec(), &[], None).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(headers[header::RETRY_AFTER], "1");
    assert_eq!(flightdeck::otlp::http::RpcStatus::decode(body.as_slice()).unwrap().code, 14);
    // With a declared length the body is refused before it is read; the answer is the same.
    let encoded = request(whole_run(9, "run-busy")).encode_to_vec();
    let length = encoded.len().to_string();
    let (status, headers, _) =
        h.post("application/x-protobuf", encoded, &[("content-length", length.as_str())], None).await;
    assert_eq!((status, &headers[header::RETRY_AFTER]), (StatusCode::SERVICE_UNAVAILABLE, &"1".parse().unwrap()));
    // A gzip body's size is known only after decompression; it is refused then, the same way.
    let mut gz = GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&request(whole_run(9, "run-busy")).encode_to_vec()).unwrap();
    let (status, headers, _) =
        h.post("application/x-protobuf", gz.finish().unwrap(), &[("content-encoding", "gzip")], None).await;
    assert_eq!((status, &headers[header::RETRY_AFTER]), (StatusCode::SERVICE_UNAVAILABLE, &"1".parse().unwrap()));
    assert_eq!(h.stored_spans().await, 0);
    drop(held);
    assert_eq!(h.post_proto(&request(whole_run(9, "run-busy"))).await.0, StatusCode::OK, "the retry succeeds");
    assert_eq!(h.stored_spans().await, 6);
    t.cleanup().await;
}

/// Serves the receivers on ephemeral ports, as `flightdeck serve` does.
async fn listen(h: &Harness) -> (SocketAddr, SocketAddr) {
    let http = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let grpc = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addrs = (http.local_addr().unwrap(), grpc.local_addr().unwrap());
    tokio::spawn(axum::serve(http, h.http.clone()).into_future());
    let grpc_server = flightdeck::otlp::grpc::transport()
        .add_service(flightdeck::otlp::grpc::server(h.service.clone()))
        .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(grpc));
    tokio::spawn(grpc_server);
    addrs
}

/// Emits one agent run with the official SDK and exporter, the way an instrumented agent
/// does, and flushes it.
fn emit_with_sdk(exporter: opentelemetry_otlp::SpanExporter, run_id: &str) {
    let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
        .with_simple_exporter(exporter)
        .with_resource(opentelemetry_sdk::Resource::builder().with_service_name("sdk-agent").build())
        .build();
    let tracer = provider.tracer("agent");
    let mut root = tracer.start("agent.run");
    root.set_attribute(OtelKv::new("run.id", run_id.to_string()));
    root.set_attribute(OtelKv::new("run.trigger", "schedule"));
    let cx = opentelemetry::Context::current_with_span(root);
    {
        let mut step = tracer.start_with_context("chat", &cx);
        step.set_attribute(OtelKv::new("gen_ai.operation.name", "chat"));
        step.set_attribute(OtelKv::new("gen_ai.request.model", "model-x"));
        step.set_attribute(OtelKv::new("gen_ai.usage.input_tokens", 42i64));
        step.end();
        for (name, class, key, ext) in [
            ("lookup", "read", "k1", None),
            ("send_email", "irreversible", "k2", Some("m1")),
            ("send_email", "irreversible", "k2", Some("m2")),
        ] {
            let mut call = tracer.start_with_context(format!("execute_tool {name}"), &cx);
            call.set_attribute(OtelKv::new("gen_ai.operation.name", "execute_tool"));
            call.set_attribute(OtelKv::new("gen_ai.tool.name", name));
            call.set_attribute(OtelKv::new("tool.side_effect", class));
            call.set_attribute(OtelKv::new("tool.idempotency_key", key));
            if let Some(ext) = ext {
                call.set_attribute(OtelKv::new("tool.external_id", ext));
            }
            call.end();
        }
    }
    cx.span().end();
    provider.shutdown().expect("flush to flightdeck");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_exporter_over_http_protobuf_http_json_and_grpc() {
    for t in TestDb::each_backend().await {
        let h = harness(&t, 20 << 20).await;
        let (http, grpc) = listen(&h).await;
        let bearer = format!("Bearer {}", h.ingest_token);
        for (label, protocol) in
            [("proto", Protocol::HttpBinary), ("json", Protocol::HttpJson), ("grpc", Protocol::Grpc)]
        {
            let run_id = format!("sdk-{label}");
            let exporter = match protocol {
                Protocol::Grpc => {
                    let mut metadata = tonic::metadata::MetadataMap::new();
                    metadata.insert("authorization", bearer.parse().unwrap());
                    opentelemetry_otlp::SpanExporter::builder()
                        .with_tonic()
                        .with_endpoint(format!("http://{grpc}"))
                        .with_metadata(metadata)
                        .with_compression(opentelemetry_otlp::Compression::Gzip)
                        .build()
                        .unwrap()
                }
                protocol => opentelemetry_otlp::SpanExporter::builder()
                    .with_http()
                    .with_protocol(protocol)
                    .with_endpoint(format!("http://{http}/v1/traces"))
                    .with_headers([("authorization".to_string(), bearer.clone())].into())
                    .build()
                    .unwrap(),
            };
            let id = run_id.clone();
            // The simple processor exports synchronously: keep it off the async threads.
            tokio::task::spawn_blocking(move || emit_with_sdk(exporter, &id)).await.unwrap();
            let run = h.run(&run_id).await;
            assert_eq!(run["terminal_reason"], "completed", "{label}: {run}");
            assert_eq!(run["agent"], "sdk-agent");
            assert_eq!(run["trigger"], "schedule");
            assert_eq!((run["steps"].as_i64(), run["tool_calls"].as_i64()), (Some(1), Some(3)), "{label}");
            assert_eq!(run["input_tokens"], 42);
            assert_eq!(run["duplicate_side_effects"], 1, "{label}");
            assert_eq!(run["step_list"][0]["model_id"], "model-x");
        }
        t.cleanup().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_refuses_bad_tokens_and_invalid_requests_with_status_codes() {
    let t = TestDb::sqlite().await;
    let h = harness(&t, 20 << 20).await;
    let (_, grpc) = listen(&h).await;
    use opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient;
    let mut client = TraceServiceClient::connect(format!("http://{grpc}")).await.unwrap();
    let err = client.export(request(whole_run(10, "g"))).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unauthenticated);
    let mut bad = span(10, 1, None, "x", vec![]);
    bad.trace_id = vec![1; 2];
    let mut req = tonic::Request::new(request(vec![bad]));
    req.metadata_mut().insert("authorization", format!("Bearer {}", h.ingest_token).parse().unwrap());
    let err = client.export(req).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    assert!(err.message().contains("trace_id must be 16 bytes"));
    assert_eq!(h.stored_spans().await, 0);
    t.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exports_beyond_a_connections_stream_limit_wait_instead_of_being_refused() {
    use flightdeck::otlp::grpc::MAX_STREAMS_PER_CONNECTION;
    use flightdeck::otlp::service::memory_for;
    use ingest::decode::{measure, DecodeLimits, Encoding};
    use opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient;
    let t = TestDb::sqlite().await;
    // Room for a few more exports than one connection may have open at once.
    let wire = request(whole_run(100, "w-0")).encode_to_vec();
    let shape = measure(Encoding::Protobuf, &wire, &DecodeLimits::default()).unwrap();
    let (_, each) = memory_for(&shape, wire.len(), usize::MAX);
    let room = MAX_STREAMS_PER_CONNECTION as usize + 8;
    let h = harness_with_budget(&t, 20 << 20, room * each).await;
    let (_, grpc) = listen(&h).await;
    let client = TraceServiceClient::connect(format!("http://{grpc}")).await.unwrap();
    // Five times that many at once, on the one connection: the surplus waits for a
    // stream, so none is refused for want of memory.
    // (Trace ids from 1: an all-zero id is invalid.)
    let exports: Vec<_> = (1..=room as u8 * 5)
        .map(|i| {
            let mut client = client.clone();
            let mut req = tonic::Request::new(request(whole_run(i, &format!("w-{i}"))));
            req.metadata_mut().insert("authorization", format!("Bearer {}", h.ingest_token).parse().unwrap());
            tokio::spawn(async move { client.export(req).await.map(|_| ()).map_err(|e| e.code()) })
        })
        .collect();
    let mut results = Vec::new();
    for export in exports {
        results.push(export.await.unwrap());
    }
    let refused = results.iter().filter(|r| r.is_err()).count();
    assert_eq!(refused, 0, "{:?}", results.iter().filter_map(|r| r.err()).collect::<Vec<_>>());
    assert_eq!(h.stored_spans().await, results.len() as i64 * 6);
    t.cleanup().await;
}

#[tokio::test]
async fn the_run_list_filters_and_pages() {
    for t in TestDb::each_backend().await {
        let h = harness(&t, 20 << 20).await;
        for n in 0..7u8 {
            let mut spans = whole_run(20 + n, &format!("run-{n}"));
            for sp in spans.iter_mut() {
                sp.start_time_unix_nano += u64::from(n) * 1_000_000_000;
                sp.end_time_unix_nano += u64::from(n) * 1_000_000_000;
            }
            if n % 3 == 0 {
                spans[0].attributes.push(s("run.terminal_reason", "budget"));
            }
            if n == 5 {
                spans.retain(|sp| !sp.name.contains("lookup"));
                spans.truncate(2); // root and step only: completed without any read tool
            }
            h.post_proto(&request(spans)).await;
        }
        let (status, page) = h.api("/api/v1/runs?limit=3").await;
        assert_eq!(status, StatusCode::OK);
        let ids: Vec<&str> = page["runs"].as_array().unwrap().iter().map(|r| r["run_id"].as_str().unwrap()).collect();
        assert_eq!(ids, vec!["run-6", "run-5", "run-4"], "newest first");
        let cursor = page["next_cursor"].as_str().unwrap().to_string();
        let (_, next) = h.api(&format!("/api/v1/runs?limit=3&cursor={cursor}")).await;
        let ids: Vec<&str> = next["runs"].as_array().unwrap().iter().map(|r| r["run_id"].as_str().unwrap()).collect();
        assert_eq!(ids, vec!["run-3", "run-2", "run-1"]);

        let (_, budget) = h.api("/api/v1/runs?terminal_reason=budget").await;
        assert_eq!(budget["runs"].as_array().unwrap().len(), 3);
        assert!(budget.get("next_cursor").is_none(), "one page only");
        let (_, no_read) = h.api("/api/v1/runs?flag=no_read").await;
        assert_eq!(no_read["runs"][0]["run_id"], "run-5");
        assert_eq!(no_read["runs"].as_array().unwrap().len(), 1);
        let (_, dups) = h.api("/api/v1/runs?flag=duplicates&agent=billing-agent").await;
        assert_eq!(dups["runs"].as_array().unwrap().len(), 6);
        let (_, none) = h.api("/api/v1/runs?since=2099-01-01T00:00:00Z").await;
        assert_eq!(none["runs"].as_array().unwrap().len(), 0);

        for (query, complaint) in [
            ("terminal_reason=finished", "unknown terminal_reason"),
            ("since=yesterday", "`since` must be an RFC 3339 time"),
            ("flag=weird", "unknown flag"),
            ("limit=0", "`limit` must be between 1 and 500"),
            ("cursor=garbage", "invalid cursor"),
            ("colour=blue", "invalid query"),
        ] {
            let (status, body) = h.api(&format!("/api/v1/runs?{query}")).await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{query}");
            assert!(body["error"]["message"].as_str().unwrap().contains(complaint), "{query}: {body}");
        }
        let req = Request::get("/api/v1/runs")
            .header(header::AUTHORIZATION, format!("Bearer {}", h.ingest_token))
            .body(Body::empty())
            .unwrap();
        assert_eq!(
            h.api.clone().oneshot(req).await.unwrap().status(),
            StatusCode::FORBIDDEN,
            "ingest tokens cannot read"
        );
        t.cleanup().await;
    }
}

#[tokio::test]
async fn tool_policies_classify_calls_that_declare_no_side_effect() {
    for t in TestDb::each_backend().await {
        let h = harness(&t, 20 << 20).await;
        store::policies::upsert(
            &t.db,
            &domain::policy::ToolPolicy::class("charge_*", domain::canonical::SideEffect::Irreversible),
        )
        .await
        .unwrap();
        h.service.refresh_policies().await;
        let spans = vec![
            span(30, 1, None, "agent.run", vec![s("run.id", "run-policy")]),
            span(
                30,
                2,
                Some(1),
                "tool charge_card",
                vec![s("tool.name", "charge_card"), s("tool.idempotency_key", "k")],
            ),
            span(
                30,
                3,
                Some(1),
                "tool charge_card",
                vec![s("tool.name", "charge_card"), s("tool.idempotency_key", "k")],
            ),
            span(30, 4, Some(1), "tool mystery", vec![s("tool.name", "mystery")]),
        ];
        h.post_proto(&request(spans)).await;
        let run = h.run("run-policy").await;
        assert_eq!(run["tool_call_list"][0]["side_effect"], "irreversible");
        assert_eq!(run["tool_call_list"][2]["side_effect"], "unknown");
        assert_eq!(run["duplicate_side_effects"], 1, "a charge made twice is a duplicate");
        t.cleanup().await;
    }
}

/// The load generator's answer key: realistic runs in all three attribute conventions,
/// delivered shuffled (children first, roots last, runs split across requests), must come
/// out exactly as the generator says a correct ingest concludes.
#[tokio::test]
async fn synthetic_runs_in_every_convention_match_their_answer_key() {
    use loadgen::synth::{requests_for_shuffled, Synth, SynthOptions};
    for t in TestDb::each_backend().await {
        let h = harness(&t, 20 << 20).await;
        let mut synth = Synth::new(SynthOptions { seed: 42, ..SynthOptions::default() });
        let runs: Vec<_> = (0..120).map(|_| synth.next_run()).collect();
        for req in requests_for_shuffled(&runs, 97, 42) {
            let (status, response) = h.post_proto(&req).await;
            assert_eq!(status, StatusCode::OK);
            assert_eq!(response.partial_success, None);
        }
        let mut conventions = std::collections::HashSet::new();
        for r in &runs {
            let e = &r.expected;
            conventions.insert(format!("{:?}", e.convention));
            let got = h.run(&r.run_id).await;
            let what = format!("{} ({:?})", r.run_id, e.convention);
            assert_eq!(got["terminal_reason"], e.terminal_reason, "{what}");
            assert_eq!(got["steps"], e.steps, "{what}");
            assert_eq!(got["tool_calls"], e.tool_calls, "{what}");
            assert_eq!(got["duplicate_side_effects"], e.duplicate_side_effects, "{what}");
            assert_eq!(got["deduped_calls"], e.deduped_calls, "{what}");
            assert_eq!(got["completed_without_read"], e.completed_without_read, "{what}");
        }
        assert_eq!(conventions.len(), 3, "all three conventions were exercised");
        let total: usize = runs.iter().map(|r| r.span_count).sum();
        assert_eq!(h.stored_spans().await as usize, total);
        t.cleanup().await;
    }
}

#[tokio::test]
async fn runs_are_found_by_any_id_an_operator_has_and_sorted_by_cost() {
    for t in TestDb::each_backend().await {
        let h = harness(&t, 20 << 20).await;
        for (n, cost) in [(40u8, 0.5), (41, 2.0), (42, 1.0)] {
            let mut spans = whole_run(n, &format!("find-{n}"));
            spans[0].attributes.push(kv("budget.cost_spent", any_value::Value::DoubleValue(cost)));
            spans[2].attributes.retain(|a| a.key != "tool.external_id");
            spans[2].attributes.push(s("tool.external_id", &format!("ext-{n}")));
            h.post_proto(&request(spans)).await;
        }
        let ids = |v: &Value| -> Vec<String> {
            v["runs"].as_array().unwrap().iter().map(|r| r["run_id"].as_str().unwrap().to_string()).collect()
        };
        let (_, by_ext) = h.api("/api/v1/runs?q=ext-41").await;
        assert_eq!(ids(&by_ext), vec!["find-41"], "external id");
        let (_, by_trace) = h.api("/api/v1/runs?q=2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a").await;
        assert_eq!(ids(&by_trace), vec!["find-42"], "trace id");
        let (_, by_run) = h.api("/api/v1/runs?q=find-40").await;
        assert_eq!(ids(&by_run), vec!["find-40"], "run id");
        let (_, by_tool) = h.api("/api/v1/runs?q=create_doc").await;
        assert_eq!(ids(&by_tool).len(), 3, "tool name");
        let (_, by_key) = h.api("/api/v1/runs?q=k-mail").await;
        assert_eq!(ids(&by_key).len(), 3, "idempotency key");
        let (_, nothing) = h.api("/api/v1/runs?q=nope").await;
        assert!(ids(&nothing).is_empty());
        let (_, by_cost) = h.api("/api/v1/runs?sort=cost&limit=2").await;
        assert_eq!(ids(&by_cost), vec!["find-41", "find-42"]);
        let cursor = by_cost["next_cursor"].as_str().unwrap().to_string();
        let (_, rest) = h.api(&format!("/api/v1/runs?sort=cost&limit=2&cursor={cursor}")).await;
        assert_eq!(ids(&rest), vec!["find-40"]);
        let (status, _) = h.api("/api/v1/runs?sort=loudest").await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        let counts = store::runs::count_by_reason(
            &t.db,
            &store::runs::RunQuery {
                limit: 10,
                terminal_reason: Some(domain::canonical::TerminalReason::Error),
                ..Default::default()
            },
        )
        .await
        .unwrap();
        assert_eq!(
            counts.by_reason,
            vec![(domain::canonical::TerminalReason::Completed, 3)],
            "counts ignore the reason filter"
        );
        t.cleanup().await;
    }
}

#[tokio::test]
async fn replay_fixtures_list_every_call_with_arguments_and_response() {
    for t in TestDb::each_backend().await {
        let h = harness(&t, 20 << 20).await;
        let mut spans = whole_run(50, "run-replay");
        spans[0].status = Some(Status { code: 2, message: "gave up".into() });
        spans[2]
            .attributes
            .push(s("gen_ai.tool.call.arguments", r#"{"to":"a@example.com","body":"<script>alert(1)</script>"}"#));
        spans[2].attributes.push(s("gen_ai.tool.call.result", r#"{"id":"msg_1"}"#));
        h.post_proto(&request(spans)).await;
        let (status, fixture) = h.api("/api/v1/runs/run-replay/replay").await;
        assert_eq!(status, StatusCode::OK, "{fixture}");
        assert_eq!(fixture["format"], "flightdeck.replay_fixture");
        assert_eq!(fixture["version"], 1);
        assert_eq!(fixture["run"]["terminal_reason"], "error");
        let calls = fixture["tool_calls"].as_array().unwrap();
        assert_eq!(calls.len(), 4);
        assert_eq!(calls[0]["sequence"], 1);
        assert_eq!(calls[0]["arguments"]["body"], "<script>alert(1)</script>");
        assert_eq!(calls[0]["response"]["id"], "msg_1");
        assert_eq!(calls[1]["arguments"], Value::Null, "no body, no arguments");
        // a completed run keeps no bodies under the default policy: no fixture, and the 404 says why
        h.post_proto(&request(whole_run(51, "run-clean"))).await;
        let (status, body) = h.api("/api/v1/runs/run-clean/replay").await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert!(body["error"]["message"].as_str().unwrap().contains("no retained bodies"), "{body}");
        t.cleanup().await;
    }
}

/// An approval as an approver would leave it: filed for `args`, then decided (or not).
async fn approval(db: &Db, key: &str, args: Value, decision: Option<store::approvals::Decision>) -> String {
    use domain::approvals::payload::ApprovalRequest;
    let body =
        serde_json::json!({"run_id": "run-approved", "tool": "send_email", "arguments": args, "idempotency_key": key});
    let request = serde_json::from_value::<ApprovalRequest>(body).unwrap().validate().unwrap();
    let requester = store::approvals::Requester { name: "agent", token_id: None };
    let filing = domain::approvals::rules::Filing::by_policy(domain::access::Role::Approver, Default::default());
    let (a, _) = store::approvals::create(db, &request, None, requester, &[], &filing).await.unwrap();
    if let Some(d) = decision {
        let reason = (d == store::approvals::Decision::Deny).then_some("no");
        let by = store::approvals::Decider { username: "alice", reason, respond: None };
        store::approvals::decide(db, &a.id, &d, &a.payload_sha256, by, None).await.unwrap();
    }
    a.id
}

fn email_call(id: u8, approval: Option<&str>, args: &str) -> Span {
    email_call_in(40, id, approval, args, 0)
}

/// A `send_email` call in trace `trace`, started `offset_ms` from now (an approval must be
/// used within minutes of its decision, so these calls run now, not at the fixed test time).
fn email_call_in(trace: u8, id: u8, approval: Option<&str>, args: &str, offset_ms: i64) -> Span {
    let mut attrs = vec![s("tool.name", "send_email"), s("tool.outcome", "ok"), s("tool.arguments", args)];
    if let Some(a) = approval {
        attrs.push(s("approval.id", a));
    }
    let mut call = span(trace, id, Some(1), "tool send_email", attrs);
    let start = u64::try_from(store::now_ms() + offset_ms).unwrap() * 1_000_000 + u64::from(id);
    call.start_time_unix_nano = start;
    call.end_time_unix_nano = start + 500_000;
    call
}

#[tokio::test]
async fn executed_tool_calls_are_checked_against_their_approvals() {
    use domain::approvals::ViolationKind as K;
    use store::approvals::Decision;
    for t in TestDb::each_backend().await {
        let h = harness(&t, 20 << 20).await;
        let mut policy = domain::policy::ToolPolicy::class("send_*", domain::canonical::SideEffect::Irreversible);
        policy.requires_approval = true;
        policy.run_limit = Some(4);
        store::policies::upsert(&t.db, &policy).await.unwrap();
        h.service.refresh_policies().await;

        let args = serde_json::json!({"to": "ana@example.com", "body": "Hi"});
        let good = approval(&t.db, "a", args.clone(), Some(Decision::Approve)).await;
        let denied = approval(&t.db, "b", args.clone(), Some(Decision::Deny)).await;
        let undecided = approval(&t.db, "c", args.clone(), None).await;
        let other = approval(&t.db, "d", args.clone(), Some(Decision::Approve)).await;
        // Formatted differently from the request, same JSON: the hash still matches.
        let same = r#"{ "body": "Hi", "to": "ana@example.com" }"#;
        let spans = vec![
            span(40, 1, None, "agent.run", vec![s("run.id", "run-approved")]),
            email_call(2, Some(&good), same),
            email_call(3, Some(&good), same),
            email_call(4, None, same),
            email_call(5, Some(&denied), same),
            email_call(6, Some(&undecided), same),
            email_call(7, Some("apr_missing"), same),
            email_call(8, Some(&other), r#"{"to": "eve@example.com", "body": "Hi"}"#),
        ];
        let (status, _) = h.post_proto(&request(spans.clone())).await;
        assert_eq!(status, StatusCode::OK);
        // Re-sent, as an exporter retrying after a timeout would: nothing is recorded twice.
        h.post_proto(&request(spans)).await;

        let violations = store::approvals::violations_for_run(&t.db, "run-approved").await.unwrap();
        let mut kinds: Vec<(String, K)> = violations.iter().map(|v| (v.span_id.clone(), v.kind)).collect();
        kinds.sort();
        let span_hex = |b: u8| hex::encode([b; 8]);
        assert_eq!(
            kinds,
            vec![
                (span_hex(3), K::Reused),
                (span_hex(4), K::NoApproval),
                (span_hex(5), K::NotApproved),
                (span_hex(6), K::NotApproved),
                (span_hex(6), K::RunLimitExceeded),
                (span_hex(7), K::UnknownApproval),
                (span_hex(7), K::RunLimitExceeded),
                (span_hex(8), K::PayloadMismatch),
                (span_hex(8), K::RunLimitExceeded),
            ],
            "{violations:#?}"
        );
        let run = h.run("run-approved").await;
        assert_eq!(run["approval_violations"], 9, "the run carries the count for its flag");
        let used = store::approvals::get(&t.db, &good).await.unwrap().unwrap();
        assert_eq!(used.used_by_span, Some(format!("{}:{}", hex::encode([40u8; 16]), span_hex(2))));
        let (status, list) = h.api("/api/v1/runs?flag=approval_violation").await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(list["runs"][0]["run_id"], "run-approved");
        t.cleanup().await;
    }
}

/// An approval filed through storage as the API files it, for `run` and `step`, by the
/// token with id `token_id`, then approved.
async fn approved_for(db: &Db, run: &str, step: i64, key: &str, args: &Value, token_id: Option<i64>) -> String {
    use domain::approvals::payload::ApprovalRequest;
    use store::approvals::{create, decide, Decision, Requester};
    let body = serde_json::json!({"run_id": run, "step_index": step, "tool": "send_email", "arguments": args,
        "idempotency_key": key});
    let request = serde_json::from_value::<ApprovalRequest>(body).unwrap().validate().unwrap();
    let filing = domain::approvals::rules::Filing::by_policy(domain::access::Role::Approver, Default::default());
    let (a, _) = create(db, &request, None, Requester { name: "agent", token_id }, &[], &filing).await.unwrap();
    let by = store::approvals::Decider { username: "alice", reason: None, respond: None };
    decide(db, &a.id, &Decision::Approve, &a.payload_sha256, by, None).await.unwrap();
    a.id
}

#[tokio::test]
async fn an_approval_holds_only_for_its_run_step_window_and_token() {
    use domain::approvals::ViolationKind as K;
    for t in TestDb::each_backend().await {
        let h = harness(&t, 20 << 20).await;
        let own = tokens::active_by_hash(&t.db, &secrets::sha256_hex(&h.ingest_token)).await.unwrap().unwrap().id;
        let args = serde_json::json!({"to": "ana@example.com", "body": "Hi"});
        let text = r#"{"to": "ana@example.com", "body": "Hi"}"#;
        let for_other_run = approved_for(&t.db, "run-a", 3, "w1", &args, Some(own)).await;
        let for_step_3 = approved_for(&t.db, "run-b", 3, "w2", &args, Some(own)).await;
        let to_go_stale = approved_for(&t.db, "run-b", 3, "w3", &args, Some(own)).await;
        let asked_by_another = approved_for(&t.db, "run-b", 3, "w4", &args, Some(own + 1000)).await;
        let used_before = approved_for(&t.db, "run-b", 3, "w5", &args, Some(own)).await;
        let fine = approved_for(&t.db, "run-b", 3, "w6", &args, Some(own)).await;
        let step = |mut sp: Span, index: i64| {
            sp.attributes.push(i("step.index", index));
            sp
        };
        let spans = vec![
            span(41, 1, None, "agent.run", vec![s("run.id", "run-b")]),
            step(email_call_in(41, 2, Some(&for_other_run), text, 0), 3),
            step(email_call_in(41, 3, Some(&for_step_3), text, 0), 4),
            step(email_call_in(41, 4, Some(&to_go_stale), text, 16 * 60 * 1000), 3),
            step(email_call_in(41, 5, Some(&asked_by_another), text, 0), 3),
            step(email_call_in(41, 6, Some(&used_before), text, -2 * 3600 * 1000), 3),
            step(email_call_in(41, 7, Some(&fine), text, 0), 3),
        ];
        let (status, _) = h.post_proto(&request(spans)).await;
        assert_eq!(status, StatusCode::OK);
        let violations = store::approvals::violations_for_run(&t.db, "run-b").await.unwrap();
        let mut kinds: Vec<(String, K)> = violations.iter().map(|v| (v.span_id.clone(), v.kind)).collect();
        kinds.sort();
        let span_hex = |b: u8| hex::encode([b; 8]);
        assert_eq!(
            kinds,
            vec![
                (span_hex(2), K::WrongRun),
                (span_hex(3), K::WrongStep),
                (span_hex(4), K::StaleApproval),
                (span_hex(5), K::WrongToken),
                (span_hex(6), K::NotApproved),
            ],
            "{violations:#?}"
        );
        let detail = |id: u8| violations.iter().find(|v| v.span_id == span_hex(id)).unwrap().detail.clone();
        assert!(detail(2).contains("requested for run run-a"), "{}", detail(2));
        assert!(detail(5).contains(&format!("reported with token {own}")), "{}", detail(5));
        assert!(detail(6).contains("before approval"), "{}", detail(6));
        let used = store::approvals::get(&t.db, &fine).await.unwrap().unwrap();
        assert!(used.used_by_span.is_some(), "the good call used its approval");
        let unused = store::approvals::get(&t.db, &for_other_run).await.unwrap().unwrap();
        assert_eq!(unused.used_by_span, None, "a violating call does not use up the approval");
        t.cleanup().await;
    }
}
