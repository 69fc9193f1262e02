//! Overload: first the sustainable rate is measured (eight exporters back to back), then
//! two and four times that rate is offered open-loop, as a fleet of agents would, whatever
//! the server answers. Every answer must be a 200, or a 429/503 with `Retry-After` (gRPC:
//! UNAVAILABLE with `RetryInfo`); every acknowledged span must be stored once; peak RSS
//! must stay under the documented bound for the memory setting (`ingest_queue_bytes`);
//! and while ingest is saturated the run list and the approval long poll keep answering
//! (their p95 is printed).

use super::load::{send_one, send_one_grpc, Exporters, Ledger, Workload};
use super::server::{Server, Setup};
use super::{people, percentile_ms, phase_seconds};
use domain::access::Role;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use store::testing::TestDb;

/// The memory setting the scenario runs with (the default), and the bound PRODUCT.md and
/// docs/security.md state for it: the process' baseline, the queue budget, and the bodies
/// being read, under 128 MiB + twice the budget.
const QUEUE_BYTES: usize = 64 << 20;
const RSS_BOUND_MIB: f64 = 128.0 + 2.0 * (QUEUE_BYTES >> 20) as f64;

/// What the probes measured while ingest was saturated.
#[derive(Default)]
struct Probes {
    run_list: Vec<Duration>,
    decision: Vec<Duration>,
    wake: Vec<Duration>,
}

/// Loads the run list as a signed-in operator, every 100 ms until `stop`.
async fn probe_run_list(base: String, stop: Arc<AtomicBool>) -> Vec<Duration> {
    let person = people::sign_in(&base, "alice").await.expect("alice signs in");
    let mut took = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let started = Instant::now();
        let r = person.get(format!("{base}/runs")).send().await.expect("the run list answers");
        assert_eq!(r.status(), 200, "the run list under load");
        r.text().await.unwrap();
        took.push(started.elapsed());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    took
}

/// Files approval requests and decides them, measuring the decision's round trip and the
/// time from sending the decision to the agent's long poll returning it.
async fn probe_approvals(
    base: String,
    agent: String,
    phase: u32,
    stop: Arc<AtomicBool>,
) -> (Vec<Duration>, Vec<Duration>) {
    let person = people::sign_in(&base, "alice").await.expect("alice signs in");
    let http = reqwest::Client::builder().timeout(Duration::from_secs(60)).build().unwrap();
    let (mut decision, mut wake) = (Vec::new(), Vec::new());
    let mut n = 0;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let body = json!({
            "run_id": format!("probe-{phase}-{n}"), "step_index": 1, "tool": "send_email",
            "idempotency_key": format!("p{phase}-{n}"),
            "arguments": {"to": "ana@example.com", "subject": "probe", "body": format!("probe {n}")}
        });
        let filed: Value = http
            .post(format!("{base}/api/v1/approvals"))
            .bearer_auth(&agent)
            .json(&body)
            .send()
            .await
            .expect("filing answers")
            .json()
            .await
            .unwrap();
        let id = filed["id"].as_str().expect("filed").to_string();
        let sha = filed["payload_sha256"].as_str().unwrap().to_string();
        let poll = {
            let (http, url, agent) = (http.clone(), format!("{base}/api/v1/approvals/{id}?wait=30"), agent.clone());
            tokio::spawn(async move {
                let v: Value = http.get(url).bearer_auth(agent).send().await.unwrap().json().await.unwrap();
                (Instant::now(), v)
            })
        };
        tokio::time::sleep(Duration::from_millis(50)).await; // the agent is waiting
        let sent = Instant::now();
        let form = [("id", id.as_str()), ("decision", "approve"), ("payload_sha256", sha.as_str())];
        let r = person
            .post(format!("{base}/fn/decide_approval"))
            .header("sec-fetch-site", "same-origin")
            .form(&form)
            .send()
            .await
            .expect("deciding answers");
        assert_eq!(r.status(), 200, "deciding under load");
        decision.push(sent.elapsed());
        let (woken_at, state) = poll.await.unwrap();
        assert_eq!(state["status"], "approved", "the agent learns the decision");
        wake.push(woken_at.saturating_duration_since(sent));
    }
    (decision, wake)
}

/// Offers `spans_per_sec` open-loop for `seconds`: exports leave on schedule whether or
/// not earlier ones were answered (at most 1,024 in flight, beyond which the offered
/// rate is what the client managed). Returns spans offered per second.
async fn offer(ledger: &Arc<Ledger>, work: &Workload, url: &str, spans_per_sec: f64, seconds: u64) -> f64 {
    let per_sec = spans_per_sec / ledger.mean_export_spans();
    let in_flight = Arc::new(tokio::sync::Semaphore::new(1024));
    let client = super::load::client();
    let started = Instant::now();
    let (mut sent, mut spans) = (0usize, 0usize);
    let mut tasks = tokio::task::JoinSet::new();
    while started.elapsed() < Duration::from_secs(seconds) {
        let due = (started.elapsed().as_secs_f64() * per_sec) as usize;
        while sent < due {
            let Some(export) = ledger.next() else { break };
            let permit = in_flight.clone().acquire_owned().await.unwrap();
            let (ledger, bodies, client, url) = (ledger.clone(), work.bodies.clone(), client.clone(), url.to_string());
            tasks.spawn(async move {
                send_one(&client, &url, &ledger, &bodies, export).await;
                drop(permit);
            });
            sent += 1;
            spans += work.spans_of(export);
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let offered = spans as f64 / started.elapsed().as_secs_f64();
    while tasks.join_next().await.is_some() {}
    offered
}

/// A few gRPC exporters sending back to back until `stop`; returns the codes they got.
async fn grpc_exporters(
    url: String,
    ledger: Arc<Ledger>,
    work: Arc<Workload>,
    stop: Arc<AtomicBool>,
) -> Vec<tonic::Code> {
    let mut client = TraceServiceClient::connect(url).await.expect("gRPC connects");
    let mut codes = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let Some(export) = ledger.next() else { break };
        codes.push(send_one_grpc(&mut client, &ledger, &work, export).await);
    }
    codes
}

async fn overload(t: &TestDb, seed: u64) {
    let seconds = phase_seconds();
    let dir = tempfile::tempdir().unwrap();
    let postgres = (t.backend() == "postgres").then_some(t.url.as_str());
    let setup = Setup::new(dir.path(), postgres).with("FLIGHTDECK_INGEST_QUEUE_BYTES", &QUEUE_BYTES.to_string());
    let server = Server::start(&setup);
    let db = super::verify::server_db(dir.path(), postgres.map(|_| &t.db)).await;
    people::add(&db, &[("alice", &[Role::Approver, Role::Viewer])]).await;
    let agent = people::agent_token(&db).await;
    let work = Arc::new(Workload::new(seed, 3_000, 200));
    let ledger = Ledger::new(&work, true);
    let url = setup.otlp_url();

    // Sustainable: eight exporters back to back.
    let exporters = Exporters::start(&ledger, &work.bodies, &url, 8, false);
    tokio::time::sleep(Duration::from_secs(1)).await; // warm up
    let before = ledger.acked_spans.load(Ordering::Relaxed);
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    let sustainable = (ledger.acked_spans.load(Ordering::Relaxed) - before) as f64 / seconds as f64;
    exporters.stop().await;

    let mut lines = Vec::new();
    let mut probes = Probes::default();
    let mut refusals_at_4x = 0;
    for multiple in [2.0, 4.0] {
        let stop = Arc::new(AtomicBool::new(false));
        let list = tokio::spawn(probe_run_list(setup.web_base(), stop.clone()));
        let approvals = tokio::spawn(probe_approvals(setup.web_base(), agent.clone(), multiple as u32, stop.clone()));
        let grpc = tokio::spawn(grpc_exporters(setup.grpc_url(), ledger.clone(), work.clone(), stop.clone()));
        let refused_before = ledger.statuses().get(&503).copied().unwrap_or(0);
        let acked_before = ledger.acked_spans.load(Ordering::Relaxed);
        let offered = offer(&ledger, &work, &url, sustainable * multiple, seconds).await;
        let acked = (ledger.acked_spans.load(Ordering::Relaxed) - acked_before) as f64 / seconds as f64;
        stop.store(true, Ordering::Relaxed);
        probes.run_list.extend(list.await.unwrap());
        let (decision, wake) = approvals.await.unwrap();
        probes.decision.extend(decision);
        probes.wake.extend(wake);
        let codes = grpc.await.unwrap();
        let refused = ledger.statuses().get(&503).copied().unwrap_or(0) - refused_before;
        if multiple == 4.0 {
            refusals_at_4x = refused;
        }
        let grpc_refused = codes.iter().filter(|c| **c != tonic::Code::Ok).count();
        lines.push(format!(
            "{multiple}x: offered {offered:.0} spans/s, acknowledged {acked:.0} spans/s, {refused} HTTP exports \
             answered 503 + Retry-After, gRPC {} OK / {grpc_refused} UNAVAILABLE + RetryInfo",
            codes.len() - grpc_refused
        ));
    }
    let peak = server.peak_rss_mib();
    assert!(server.stop(), "a graceful stop after the overload");

    let acked = ledger.acknowledged();
    let v = super::verify::stored_exactly_once(&db, &work, &acked, false, t.backend()).await;
    eprintln!(
        "chaos overload {} ({} build): sustainable {sustainable:.0} spans/s\n  \
         {}\n  peak RSS {peak:.0} MiB (bound {RSS_BOUND_MIB:.0} MiB for ingest_queue_bytes = {} MiB); \
         {} acknowledged spans stored once, 0 lost\n  \
         under 2x-4x load: run list p95 {:.0} ms ({} loads), approval decision p95 {:.0} ms, \
         long-poll wake p95 {:.0} ms ({} approvals)",
        t.backend(),
        if cfg!(debug_assertions) { "debug" } else { "release" },
        lines.join("\n  "),
        QUEUE_BYTES >> 20,
        v.acknowledged_spans,
        percentile_ms(&mut probes.run_list, 95.0),
        probes.run_list.len(),
        percentile_ms(&mut probes.decision, 95.0),
        percentile_ms(&mut probes.wake, 95.0),
        probes.wake.len(),
    );
    assert!(ledger.broken().is_empty(), "every refusal kept the promise: {:?}", ledger.broken());
    let unexpected: Vec<_> = ledger.statuses().into_keys().filter(|s| ![200, 429, 503].contains(s)).collect();
    assert!(unexpected.is_empty(), "answers other than 200/429/503 under overload: {unexpected:?}");
    assert!(refusals_at_4x > 0, "four times the sustainable load was refused in part ({})", t.backend());
    assert!(peak < RSS_BOUND_MIB, "peak RSS {peak:.0} MiB is over the bound {RSS_BOUND_MIB:.0} MiB");
    assert!(!probes.wake.is_empty() && !probes.run_list.is_empty(), "the probes ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn overload_is_refused_with_retry_after_in_bounded_memory_and_people_are_still_served() {
    let _one_at_a_time = super::SERIAL.lock().await;
    for (i, t) in TestDb::each_backend().await.into_iter().enumerate() {
        overload(&t, 3_000 + i as u64).await;
        t.cleanup().await;
    }
}
