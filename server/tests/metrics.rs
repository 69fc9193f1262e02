//! `/metrics` end to end on SQLite and PostgreSQL: known runs exported over OTLP/HTTP (one
//! export partly invalid), an escalation and an approval filed through the API, then a
//! scrape whose every figure is asserted, and whose text is parsed line by line as
//! Prometheus would. Also the 401 and 403 answers.

mod common;

use app::state::AppState;
use common::token;
use domain::access::Scope;
use flightdeck::config::{Config, IngestAuth, Overrides};
use flightdeck::otlp::IngestService;
use ingest::pipeline::IngestSettings;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value::Value as V, AnyValue, KeyValue};
use opentelemetry_proto::tonic::trace::v1::{
    status::StatusCode as SpanStatus, ResourceSpans, ScopeSpans, Span, Status,
};
use prost::Message;
use reqwest::StatusCode;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashSet};
use store::testing::TestDb;

/// The web listener (with `/metrics` fed by the receiver's counters) and the OTLP/HTTP
/// receiver, on free ports over one database.
struct Server {
    web: String,
    otlp: String,
    http: reqwest::Client,
}

async fn serve(t: &TestDb) -> Server {
    let config = Config::resolve(Overrides::default(), None).unwrap();
    let ingest =
        IngestService::start(t.db.clone(), IngestSettings::default(), IngestAuth::Token, 20 << 20, 64 << 20).unwrap().0;
    let state = AppState {
        db: t.db.clone(),
        leptos_options: flightdeck::commands::serve::leptos_options(&config),
        approvals: Default::default(),
        notifications: Default::default(),

        redactor: Default::default(),
        rules: Default::default(),
    };
    let web = flightdeck::web::router_with_ingest(state, &config, ingest.shared_counters());
    let otlp = flightdeck::otlp::http::router(ingest);
    let web_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let otlp_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server = Server {
        web: format!("http://{}", web_listener.local_addr().unwrap()),
        otlp: format!("http://{}", otlp_listener.local_addr().unwrap()),
        http: reqwest::Client::new(),
    };
    tokio::spawn(async move {
        axum::serve(web_listener, web.into_make_service_with_connect_info::<std::net::SocketAddr>()).await.unwrap()
    });
    tokio::spawn(async move { axum::serve(otlp_listener, otlp).await.unwrap() });
    server
}

impl Server {
    async fn export(&self, token: &str, spans: Vec<Span>) -> (StatusCode, Vec<u8>) {
        let request = ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                scope_spans: vec![ScopeSpans { spans, ..Default::default() }],
                ..Default::default()
            }],
        };
        let res = self
            .http
            .post(format!("{}/v1/traces", self.otlp))
            .bearer_auth(token)
            .header("content-type", "application/x-protobuf")
            .body(request.encode_to_vec())
            .send()
            .await
            .unwrap();
        (res.status(), res.bytes().await.unwrap().to_vec())
    }

    async fn post(&self, path: &str, token: &str, body: Value) -> (StatusCode, Value) {
        let res = self.http.post(format!("{}{path}", self.web)).bearer_auth(token).json(&body).send().await.unwrap();
        (res.status(), res.json().await.unwrap_or(Value::Null))
    }

    /// `/metrics` with `authorization` as the header value, if any.
    async fn scrape(&self, authorization: Option<&str>) -> reqwest::Response {
        let mut req = self.http.get(format!("{}/metrics", self.web));
        if let Some(a) = authorization {
            req = req.header("authorization", a);
        }
        req.send().await.unwrap()
    }
}

fn kv(key: &str, value: V) -> KeyValue {
    KeyValue { key: key.into(), value: Some(AnyValue { value: Some(value) }), ..Default::default() }
}
fn s(key: &str, v: &str) -> KeyValue {
    kv(key, V::StringValue(v.into()))
}

/// A span `ms_ago` milliseconds before now, lasting 1 ms.
fn span(trace: u8, id: u8, parent: Option<u8>, ms_ago: u64, attributes: Vec<KeyValue>) -> Span {
    let now_ns = chrono::Utc::now().timestamp_nanos_opt().unwrap() as u64;
    let start = now_ns - ms_ago * 1_000_000 + u64::from(id) * 1_000;
    Span {
        trace_id: vec![trace; 16],
        span_id: vec![id; 8],
        parent_span_id: parent.map(|p| vec![p; 8]).unwrap_or_default(),
        name: format!("span {id}"),
        start_time_unix_nano: start,
        end_time_unix_nano: start + 1_000_000,
        attributes,
        ..Default::default()
    }
}

fn root(trace: u8, run_id: &str, cost: f64, ms_ago: u64, mut extra: Vec<KeyValue>) -> Span {
    extra.extend([s("run.id", run_id), kv("budget.cost_spent", V::DoubleValue(cost))]);
    let mut root = span(trace, 1, None, ms_ago, extra);
    // The root spans its children.
    root.end_time_unix_nano += 1_000_000_000;
    root
}

fn tool(trace: u8, id: u8, ms_ago: u64, name: &str, side_effect: &str, outcome: &str, extra: Vec<KeyValue>) -> Span {
    let mut attrs = vec![s("tool.name", name), s("tool.side_effect", side_effect), s("tool.outcome", outcome)];
    attrs.extend(extra);
    span(trace, id, Some(1), ms_ago, attrs)
}

/// Five runs:
/// - run-a, completed, cost 0.1: send_email (irreversible) ok twice under one key (one
///   duplicate), charge_card (irreversible) timed out, then deduped; a read; an
///   update_crm naming an approval that does not exist (a violation);
/// - run-b, error, cost 0.3: an irreversible tool with quotes and a line break in its
///   name that failed, and a denied irreversible call (not an execution);
/// - run-c, escalated from its trace, cost 0.2;
/// - run-d, running (its root has not arrived), escalated through the API;
/// - run-e, completed two hours ago, cost 5: counted, but outside the cost window.
fn known_runs() -> Vec<Vec<Span>> {
    let key = |k: &str| vec![s("tool.idempotency_key", k)];
    let run_a = vec![
        root(1, "run-a", 0.1, 20_000, vec![]),
        tool(1, 2, 20_000, "send_email", "irreversible", "ok", key("mail-1")),
        tool(1, 3, 20_000, "send_email", "irreversible", "ok", key("mail-1")),
        tool(1, 4, 20_000, "charge_card", "irreversible", "timeout", key("card-1")),
        tool(1, 5, 20_000, "charge_card", "irreversible", "deduped", key("card-1")),
        tool(1, 6, 20_000, "lookup_order", "read", "ok", vec![]),
        tool(1, 7, 20_000, "update_crm", "write", "ok", vec![s("approval.id", "apr_missing")]),
    ];
    let mut b_root = root(2, "run-b", 0.3, 15_000, vec![]);
    b_root.status = Some(Status { code: SpanStatus::Error as i32, message: "boom".into() });
    let run_b = vec![
        b_root,
        tool(2, 2, 15_000, "wire \"money\"\nnow", "irreversible", "error", vec![]),
        tool(2, 3, 15_000, "delete_account", "irreversible", "denied", vec![]),
    ];
    let run_c = vec![root(3, "run-c", 0.2, 10_000, vec![s("escalation.reason", "low_confidence")])];
    let run_d = vec![tool(4, 2, 5_000, "lookup_order", "read", "ok", vec![s("run.id", "run-d")])];
    let run_e = vec![
        root(5, "run-e", 5.0, 7_200_000, vec![]),
        tool(5, 2, 7_200_000, "send_email", "irreversible", "ok", key("mail-old")),
    ];
    vec![run_a, run_b, run_c, run_d, run_e]
}

/// One parsed sample: the family name and its labels.
type Series = (String, BTreeMap<String, String>);

/// Parses the text as Prometheus does, failing on any line that is not a comment or a
/// `name{labels} value` sample of a family whose HELP and TYPE came before it.
fn parse(text: &str) -> BTreeMap<Series, f64> {
    let mut help = HashSet::new();
    let mut typed = HashSet::new();
    let mut samples = BTreeMap::new();
    assert!(text.ends_with('\n'), "the exposition ends with a line feed");
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, text) = rest.split_once(' ').expect("HELP name text");
            assert!(!text.is_empty(), "{line}");
            assert!(help.insert(name.to_string()), "HELP twice: {line}");
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("TYPE name kind");
            assert!(["counter", "gauge", "summary", "histogram", "untyped"].contains(&kind), "{line}");
            assert!(help.contains(name), "TYPE before HELP: {line}");
            assert!(typed.insert(name.to_string()), "TYPE twice: {line}");
            continue;
        }
        assert!(!line.starts_with('#') && !line.is_empty(), "unexpected line: {line:?}");
        let name_end = line.find(['{', ' ']).expect("a name");
        let name = &line[..name_end];
        let mut chars = name.chars();
        assert!(chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':'), "{line}");
        assert!(chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':'), "{line}");
        assert!(typed.contains(name), "sample before its TYPE: {line}");
        let mut rest = &line[name_end..];
        let mut labels = BTreeMap::new();
        if let Some(inner) = rest.strip_prefix('{') {
            rest = inner;
            loop {
                let (label, after) = rest.split_once("=\"").expect("label=\"value\"");
                assert!(label.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'), "label {label} in {line}");
                let mut value = String::new();
                let mut it = after.char_indices();
                let end = loop {
                    match it.next().expect("unterminated label value") {
                        (_, '\\') => match it.next().expect("escape").1 {
                            'n' => value.push('\n'),
                            c @ ('\\' | '"') => value.push(c),
                            c => panic!("bad escape \\{c} in {line}"),
                        },
                        (i, '"') => break i,
                        (_, c) => value.push(c),
                    }
                };
                labels.insert(label.to_string(), value);
                rest = &after[end + 1..];
                if let Some(r) = rest.strip_prefix(',') {
                    rest = r;
                } else {
                    rest = rest.strip_prefix('}').expect("} after labels");
                    break;
                }
            }
        }
        let value = rest.strip_prefix(' ').expect("one space before the value");
        let value: f64 = match value {
            "NaN" => f64::NAN,
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            v => v.parse().unwrap_or_else(|_| panic!("bad value in {line}")),
        };
        assert!(samples.insert((name.to_string(), labels), value).is_none(), "series twice: {line}");
    }
    samples
}

fn get(samples: &BTreeMap<Series, f64>, name: &str, labels: &[(&str, &str)]) -> f64 {
    let key = (name.to_string(), labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect());
    *samples.get(&key).unwrap_or_else(|| panic!("no series {name}{labels:?}"))
}

#[tokio::test]
async fn a_scrape_reports_exactly_what_was_ingested_and_filed() {
    for t in TestDb::each_backend().await {
        let backend = t.backend();
        let server = serve(&t).await;
        let agent = token(&t.db, "agent", &[Scope::Ingest, Scope::Approvals, Scope::Escalations]).await;
        let prometheus = token(&t.db, "prometheus", &[Scope::Read]).await;

        let mut accepted = 0;
        for spans in known_runs() {
            accepted += spans.len();
            let (status, body) = server.export(&agent, spans).await;
            assert_eq!(status, StatusCode::OK, "{backend}: {}", String::from_utf8_lossy(&body));
        }
        // Partly invalid: one good span of run-c's trace, two with ids of the wrong length.
        let mut short_id = span(3, 9, Some(1), 10_000, vec![]);
        short_id.span_id = vec![9; 7];
        let mut short_trace = span(3, 10, Some(1), 10_000, vec![]);
        short_trace.trace_id = vec![3; 15];
        let (status, _) = server.export(&agent, vec![span(3, 8, Some(1), 10_000, vec![]), short_id, short_trace]).await;
        assert_eq!(status, StatusCode::OK, "{backend}: partial success is still 200");
        accepted += 1;

        let (status, body) = server
            .post("/api/v1/escalations", &agent, json!({"run_id": "run-d", "reason": "insufficient_permission"}))
            .await;
        assert_eq!(status, StatusCode::CREATED, "{backend}: {body}");
        let run_d_escalation = body["id"].as_str().unwrap().to_string();
        let (status, body) = server
            .post("/api/v1/approvals", &agent, json!({"run_id": "run-d", "tool": "refund", "arguments": {"amount": 5}}))
            .await;
        assert_eq!(status, StatusCode::CREATED, "{backend}: {body}");

        let res = server.scrape(Some(&format!("Bearer {prometheus}"))).await;
        assert_eq!(res.status(), StatusCode::OK, "{backend}");
        assert_eq!(res.headers()["content-type"], "text/plain; version=0.0.4; charset=utf-8");
        let text = res.text().await.unwrap();
        let m = parse(&text);
        let runs = |reason| get(&m, "flightdeck_runs", &[("terminal_reason", reason)]);
        assert_eq!(
            [runs("completed"), runs("error"), runs("escalated"), runs("running"), runs("step_limit"), runs("budget")],
            [2.0, 1.0, 1.0, 1.0, 0.0, 0.0],
            "{backend}:\n{text}"
        );

        assert_eq!(get(&m, "flightdeck_irreversible_executions", &[]), 5.0, "{backend}:\n{text}");
        let by_tool = |tool| get(&m, "flightdeck_irreversible_executions_by_tool", &[("tool", tool)]);
        assert_eq!(by_tool("send_email"), 3.0, "{backend}");
        assert_eq!(by_tool("charge_card"), 1.0, "{backend}: the deduped call did not execute");
        assert_eq!(by_tool("wire \"money\"\nnow"), 1.0, "{backend}: the escaped name reads back");
        assert!(!text.contains("delete_account"), "{backend}: a denied call did not execute");

        assert_eq!(get(&m, "flightdeck_deduped_calls", &[]), 1.0, "{backend}");
        assert_eq!(get(&m, "flightdeck_duplicate_side_effects", &[]), 1.0, "{backend}");
        assert_eq!(get(&m, "flightdeck_approval_violations", &[("kind", "unknown_approval")]), 1.0, "{backend}");
        assert_eq!(get(&m, "flightdeck_approval_violations", &[("kind", "no_approval")]), 0.0, "{backend}");
        assert_eq!(get(&m, "flightdeck_approvals_pending", &[]), 1.0, "{backend}");
        let pending_age = get(&m, "flightdeck_approval_oldest_pending_age_seconds", &[]);
        assert!((0.0..60.0).contains(&pending_age), "{backend}: {pending_age}");

        assert_eq!(get(&m, "flightdeck_escalations_open", &[]), 2.0, "{backend}: run-c from traces, run-d by API");
        assert_eq!(get(&m, "flightdeck_escalations_unclaimed", &[]), 2.0, "{backend}");
        let age = get(&m, "flightdeck_escalation_oldest_open_age_seconds", &[]);
        assert!((0.0..60.0).contains(&age), "{backend}: {age}");

        // Runs a, b and c ended in the window (0.1, 0.3, 0.2); e ended two hours ago and d
        // has not ended. Nearest rank: p50 is the 2nd of 3, p95 and p99 the 3rd.
        let cost = |q| get(&m, "flightdeck_cost_per_run", &[("quantile", q), ("window", "1h")]);
        assert_eq!([cost("0.5"), cost("0.95"), cost("0.99")], [0.2, 0.3, 0.3], "{backend}:\n{text}");
        assert_eq!(get(&m, "flightdeck_cost_per_run_runs", &[("window", "1h")]), 3.0, "{backend}");

        assert_eq!(get(&m, "flightdeck_ingest_spans_accepted_total", &[]), accepted as f64, "{backend}");
        assert_eq!(get(&m, "flightdeck_ingest_spans_rejected_total", &[]), 2.0, "{backend}");
        assert_eq!(get(&m, "flightdeck_ingest_requests_refused_total", &[]), 0.0, "{backend}");
        let memory = |part| get(&m, "flightdeck_memory_bytes", &[("part", part)]);
        assert!(memory("resident") > 0.0, "{backend}:\n{text}");
        assert!(memory("c_held") >= memory("c_allocated") && memory("c_allocated") > 0.0, "{backend}:\n{text}");
        if backend == "sqlite" {
            assert!(memory("sqlite_allocated") > 0.0, "the page caches of the test's SQLite connections:\n{text}");
        }

        // Claiming one leaves one unclaimed.
        store::escalations::claim(&t.db, &run_d_escalation, "olga", None).await.unwrap();
        let m = parse(&server.scrape(Some(&format!("Bearer {prometheus}"))).await.text().await.unwrap());
        assert_eq!(get(&m, "flightdeck_escalations_open", &[]), 2.0, "{backend}");
        assert_eq!(get(&m, "flightdeck_escalations_unclaimed", &[]), 1.0, "{backend}");
        t.cleanup().await;
    }
}

#[tokio::test]
async fn an_empty_database_gives_every_series() {
    for t in TestDb::each_backend().await {
        let server = serve(&t).await;
        let prometheus = token(&t.db, "prometheus", &[Scope::Read]).await;
        let res = server.scrape(Some(&format!("Bearer {prometheus}"))).await;
        assert_eq!(res.status(), StatusCode::OK);
        let m = parse(&res.text().await.unwrap());
        assert_eq!(get(&m, "flightdeck_runs", &[("terminal_reason", "completed")]), 0.0);
        assert_eq!(get(&m, "flightdeck_irreversible_executions", &[]), 0.0);
        assert_eq!(get(&m, "flightdeck_escalation_oldest_open_age_seconds", &[]), 0.0);
        assert!(get(&m, "flightdeck_cost_per_run", &[("quantile", "0.5"), ("window", "1h")]).is_nan());
        assert_eq!(get(&m, "flightdeck_cost_per_run_runs", &[("window", "1h")]), 0.0);
        assert_eq!(get(&m, "flightdeck_alerts_open", &[("rule", "escalation_backlog"), ("state", "firing")]), 0.0);

        // An alert firing shows up as one open alert of its rule.
        let mut settings =
            domain::alerts::settings::RuleSettings::default_for(domain::alerts::AlertRule::EscalationBacklog);
        settings.threshold = 1.0;
        store::alerts::save_settings(&t.db, domain::alerts::AlertRule::EscalationBacklog, &settings, "test")
            .await
            .unwrap();
        let escalation = json!({"run_id": "run-late", "reason": "low_confidence"});
        let escalator = token(&t.db, "escalator", &[Scope::Escalations]).await;
        assert_eq!(server.post("/api/v1/escalations", &escalator, escalation).await.0, StatusCode::CREATED);
        let now = store::now_ms();
        app::services::alert_evaluation::evaluate_once(&t.db, &Default::default(), now + 5_000, 60_000).await.unwrap();
        let m = parse(&server.scrape(Some(&format!("Bearer {prometheus}"))).await.text().await.unwrap());
        assert_eq!(get(&m, "flightdeck_alerts_open", &[("rule", "escalation_backlog"), ("state", "firing")]), 1.0);
        assert_eq!(get(&m, "flightdeck_alerts_open", &[("rule", "cost_per_run_jump"), ("state", "firing")]), 0.0);
        t.cleanup().await;
    }
}

#[tokio::test]
async fn metrics_need_a_token_with_the_read_scope() {
    for t in TestDb::each_backend().await {
        let backend = t.backend();
        let server = serve(&t).await;
        let ingest_only = token(&t.db, "ingest-only", &[Scope::Ingest]).await;
        for (authorization, status) in [
            (None, StatusCode::UNAUTHORIZED),
            (Some("Bearer fdk_not_a_token".to_string()), StatusCode::UNAUTHORIZED),
            (Some("Basic dXNlcjpwYXNz".to_string()), StatusCode::UNAUTHORIZED),
            (Some(format!("Bearer {ingest_only}")), StatusCode::FORBIDDEN),
        ] {
            let res = server.scrape(authorization.as_deref()).await;
            assert_eq!(res.status(), status, "{backend}: {authorization:?}");
            if status == StatusCode::UNAUTHORIZED {
                assert_eq!(res.headers()["www-authenticate"], "Bearer realm=\"flightdeck\"");
            }
            let body: Value = res.json().await.unwrap();
            assert_eq!(body["error"]["status"], status.as_u16(), "{backend}: {body}");
            assert!(body["error"]["message"].as_str().is_some_and(|m| !m.is_empty()), "{body}");
        }
        let res = server.scrape(Some(&format!("Bearer {ingest_only}"))).await;
        let body: Value = res.json().await.unwrap();
        assert!(body["error"]["message"].as_str().unwrap().contains("`read`"), "{body}");
        t.cleanup().await;
    }
}
