//! Page-time benchmark (not a test): fills a database with 150,000 synthetic runs (about
//! 1.2 million spans, started over the last two days so every trends range holds them)
//! and one 500-span run, then times every page the server renders through the real router
//! with a signed-in session: the run list with each filter, flag, sort and search, a run,
//! the approval inbox, history and bulk page, the escalation queue (open and resolved), an
//! escalation, the alerts and one alert, the three trends ranges, every admin page; one
//! evaluation of the alert rules over that data; and, last, the one-off rebuild of the
//! trends' rollups. Prints the fill's rate and size per tenth, then p50 and p95 per page
//! (warm) and its first view; asserts nothing.
//! On PostgreSQL the runs arrive over 30 days, so they fill 30 days' partitions.
//!
//!   cargo bench -p flightdeck --bench pages            # SQLite
//!   FLIGHTDECK_TEST_PG_URL=postgres:///postgres?host=/var/run/postgresql cargo bench ...
//!                                                      # and PostgreSQL
//!   FLIGHTDECK_BENCH_RUNS=20000 cargo bench ...        # a smaller database (default 150,000)
//!
//! For iterating on queries, `FLIGHTDECK_BENCH_SQLITE=/path/file.db` and
//! `FLIGHTDECK_BENCH_PG=postgres://.../dbname` name databases to keep: each is migrated,
//! filled only if it holds no runs yet, and left in place (the PostgreSQL database must
//! exist). `FLIGHTDECK_BENCH_ONLY=sqlite` or `postgres` measures one backend.
//! `FLIGHTDECK_BENCH_NO_REBUILD=1` leaves the rollups' rebuild out (it reads every run:
//! minutes at 10 million spans, far longer at 100 million).

use app::auth::password;
use app::state::AppState;
use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use domain::access::Role;
use flightdeck::config::{Config, Overrides};
use ingest::pipeline::{prepare, IngestSettings};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value::Value as V, AnyValue, KeyValue};
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
use std::time::{Duration, Instant};
use store::sql::Sql;
use store::testing::TestDb;
use store::{spans, users, write, Db};
use tower::ServiceExt;

fn kv(key: &str, value: V) -> KeyValue {
    KeyValue { key: key.into(), value: Some(AnyValue { value: Some(value) }), ..Default::default() }
}

/// One run of 500 spans: a root, 250 steps, and a tool call in each.
fn big_run() -> ExportTraceServiceRequest {
    let start = 1_900_000_000_000_000_000u64;
    let mut spans = vec![Span {
        trace_id: vec![0xbb; 16],
        span_id: vec![0xbb; 8],
        name: "agent.run".into(),
        start_time_unix_nano: start,
        end_time_unix_nano: start + 600_000_000_000,
        attributes: vec![kv("run.id", V::StringValue("bench-big-run".into()))],
        ..Default::default()
    }];
    for i in 0..249u64 {
        let step_id = (2 * i + 1).to_be_bytes().to_vec();
        let t = start + i * 2_000_000_000;
        spans.push(Span {
            trace_id: vec![0xbb; 16],
            span_id: step_id.clone(),
            parent_span_id: vec![0xbb; 8],
            name: format!("step {i}"),
            start_time_unix_nano: t,
            end_time_unix_nano: t + 1_000_000_000,
            attributes: vec![kv("step.index", V::IntValue(i as i64 + 1))],
            ..Default::default()
        });
        spans.push(Span {
            trace_id: vec![0xbb; 16],
            span_id: (2 * i + 2).to_be_bytes().to_vec(),
            parent_span_id: step_id,
            name: "tool lookup".into(),
            start_time_unix_nano: t + 500_000_000,
            end_time_unix_nano: t + 900_000_000,
            attributes: vec![
                kv("tool.name", V::StringValue("lookup".into())),
                kv("tool.side_effect", V::StringValue("read".into())),
            ],
            ..Default::default()
        });
    }
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            scope_spans: vec![ScopeSpans { spans, ..Default::default() }],
            ..Default::default()
        }],
    }
}

async fn fill(db: &Db, runs: usize) -> usize {
    use loadgen::synth::{requests_for, Synth, SynthOptions};
    let settings = IngestSettings::default();
    // Runs start about a second apart: begin far enough back that the last one starts
    // before now, so all of them fall inside the 7- and 30-day trends and about half
    // inside the 24-hour one.
    let span_ns = runs as u64 * 1_100_000_000 + 3_600_000_000_000;
    let now_ns = u64::try_from(store::now_ms()).unwrap() * 1_000_000;
    let options = SynthOptions { seed: 11, base_time_unix_nano: now_ns - span_ns, ..SynthOptions::default() };
    let mut synth = Synth::new(options);
    let mut stored = 0usize;
    let mut done = 0;
    // On PostgreSQL the runs arrive over the last 30 days, so reads that cross the day
    // partitions (a tool search, the sorts across tools) meet a month of them (ADR 0016).
    let now_ms = store::now_ms();
    let today = store::partitions::day_of(now_ms);
    let partitioned = matches!(db, Db::Postgres(_));
    let mut arrival_day = None;
    // A line per tenth of the fill: the rate over that tenth and the size it ended at, so a
    // large fill shows how ingest holds as the database grows.
    let tenth = (runs / 10).max(1);
    let (mut slice_started, mut slice_spans) = (Instant::now(), 0usize);
    while done < runs {
        if partitioned {
            let day = today - 29 + (done * 30 / runs) as i64;
            if arrival_day != Some(day) {
                store::partitions::arrive_on(db, day, now_ms).await.unwrap();
                arrival_day = Some(day);
            }
        }
        let n = 2_000.min(runs - done);
        let batch: Vec<_> = (0..n).map(|_| synth.next_run()).collect();
        for req in requests_for(&batch, 8_000) {
            let prepared = prepare(&req, &settings, &[]);
            let spans = write::commit(db, &prepared.spans, settings.body_policy).await.unwrap().stored as usize;
            stored += spans;
            slice_spans += spans;
        }
        done += n;
        if done % tenth < n || done == runs {
            let rate = slice_spans as f64 / slice_started.elapsed().as_secs_f64();
            let gib = disk_bytes(db).await as f64 / (1u64 << 30) as f64;
            println!("filled {done} runs ({stored} spans): {rate:.0} spans/s over the last slice, {gib:.2} GiB");
            (slice_started, slice_spans) = (Instant::now(), 0);
        }
        // As `flightdeck serve` does once the deployment has enough chunks (unless
        // FLIGHTDECK_BENCH_NO_DICTIONARY is set, for the figures without one).
        if std::env::var_os("FLIGHTDECK_BENCH_NO_DICTIONARY").is_none() {
            let now = store::now_ms();
            if let Some(id) = store::dictionaries::train_if_due(db, now).await.unwrap() {
                println!("dictionary {id} trained after {done} runs");
            }
        }
    }
    store::partitions::ensure_days(db, now_ms).await.unwrap();
    let prepared = prepare(&big_run(), &settings, &[]);
    stored += write::commit(db, &prepared.spans, settings.body_policy).await.unwrap().stored as usize;
    stored
}

/// The database's size on disk: SQLite's pages (after a checkpoint, so the log is in
/// them), PostgreSQL's `pg_database_size`.
async fn disk_bytes(db: &Db) -> i64 {
    match db {
        Db::Sqlite { main: pool, .. } => {
            sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)").execute(pool).await.unwrap();
            let (pages,): (i64,) = sqlx::query_as("PRAGMA page_count").fetch_one(pool).await.unwrap();
            let (size,): (i64,) = sqlx::query_as("PRAGMA page_size").fetch_one(pool).await.unwrap();
            pages * size
        }
        Db::Postgres(pool) => {
            sqlx::query_as::<_, (i64,)>("SELECT pg_database_size(current_database())").fetch_one(pool).await.unwrap().0
        }
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 * p).ceil() as usize).saturating_sub(1).min(sorted.len() - 1)]
}

async fn measure(db: &Db, runs: usize) {
    let started = Instant::now();
    let kept = spans::count(db).await.unwrap();
    if kept == 0 {
        let spans = fill(db, runs).await;
        // What autovacuum does soon after a bulk load in a real deployment: statistics and
        // the visibility map (index-only scans). Timed pages come after it either way.
        if let Db::Postgres(pool) = db {
            sqlx::query("VACUUM ANALYZE").execute(pool).await.unwrap();
        }
        println!(
            "\n{}: {runs} runs + one 500-span run, {spans} spans stored in {:.0?}",
            db.backend_name(),
            started.elapsed()
        );
        let bytes = disk_bytes(db).await;
        println!("on disk: {bytes} bytes, {:.0} bytes a span", bytes as f64 / spans as f64);
    } else {
        println!("\n{}: kept database, {kept} spans", db.backend_name());
    }
    let roles = [Role::Viewer, Role::Approver, Role::Operator, Role::Admin];
    if users::create(db, "bench", &password::hash("bench-password-1"), &roles).await.is_err() {
        println!("  (user `bench` kept from an earlier run)");
    }
    let config = Config::resolve(Overrides::default(), None).unwrap();
    let state = AppState::unconfigured(db.clone(), flightdeck::commands::serve::leptos_options(&config));
    let escalation: Option<String> = store::escalations::list(db, true, 1).await.unwrap().first().map(|e| e.id.clone());
    // As `flightdeck serve` does before it serves.
    db.open_every_connection().await.unwrap();
    let app = flightdeck::web::router(state, &config);
    let login = Request::post("/fn/login")
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(Body::from("username=bench&password=bench-password-1"))
        .unwrap();
    let res = app.clone().oneshot(login).await.unwrap();
    let cookie = res.headers()[header::SET_COOKIE].to_str().unwrap().split(';').next().unwrap().to_string();

    let escalation_path = escalation.map(|id| format!("/escalations/{id}")).unwrap_or_else(|| "/escalations".into());
    let pages: Vec<(&str, &str)> = vec![
        ("run list, first page", "/runs"),
        ("run list, reason = error", "/runs?terminal_reason=error"),
        ("run list, agent", "/runs?agent=billing"),
        ("run list, trigger", "/runs?trigger=schedule"),
        ("run list, sorted by cost", "/runs?sort=cost"),
        ("run list, sorted by duration", "/runs?sort=duration"),
        ("run list, sorted by duplicates", "/runs?sort=duplicates"),
        ("run list, flag approval_violation", "/runs?flag=approval_violation"),
        ("run list, flag no_read", "/runs?flag=no_read"),
        ("run list, flag duplicates", "/runs?flag=duplicates"),
        // Two conditions at once, no search term: an agent with a flag, a trigger, a
        // reason or a sort, and the model (which has no index of its own).
        ("run list, agent and flag duplicates", "/runs?agent=billing&flag=duplicates"),
        ("run list, agent and flag violation", "/runs?agent=docs&flag=approval_violation"),
        ("run list, agent and trigger retry", "/runs?agent=billing&trigger=retry"),
        ("run list, agent and reason budget", "/runs?agent=repo&terminal_reason=budget"),
        ("run list, agent sorted by cost", "/runs?agent=billing&sort=cost"),
        ("run list, flag sorted by cost", "/runs?flag=no_read&sort=cost"),
        ("run list, model", "/runs?model=gpt-4.1"),
        ("run list, a model no run used", "/runs?model=no-such-model"),
        ("run list, agent and model", "/runs?agent=docs&model=claude-haiku-4-5"),
        ("run list, search by tool name", "/runs?q=send_email"),
        ("run list, search by external id", "/runs?q=msg_000001"),
        // A filter that none of the tool's runs pass, a flag, another sort: each tests the
        // newest 2,500 of the tool's runs (the search window).
        ("run list, search and agent", "/runs?q=send_email&agent=billing"),
        ("run list, search and flag no_read", "/runs?q=send_email&flag=no_read"),
        ("run list, search sorted by cost", "/runs?q=send_email&sort=cost"),
        ("run page, 500 spans", "/runs/bench-big-run"),
        ("approvals, pending", "/approvals"),
        ("approvals, decided", "/approvals?view=decided"),
        ("approvals, bulk", "/approvals/bulk"),
        ("escalations, open", "/escalations"),
        ("escalations, resolved", "/escalations?view=resolved"),
        ("an escalation", &escalation_path),
        ("alerts", "/alerts"),
        ("trends, 24 h", "/trends"),
        ("trends, 7 d", "/trends?range=7d"),
        ("trends, 30 d", "/trends?range=30d"),
        ("admin, home", "/admin"),
        ("admin, users", "/admin/users"),
        ("admin, tokens", "/admin/tokens"),
        ("admin, prices", "/admin/prices"),
        ("admin, webhooks", "/admin/webhooks"),
        ("admin, alert rules", "/admin/alerts"),
        ("admin, tools", "/admin/tools"),
        ("admin, policies", "/admin/policies"),
        ("admin, approval rules", "/admin/rules"),
        ("admin, audit log", "/admin/audit"),
    ];
    for (label, path) in pages {
        time_page(&app, &cookie, db, label, path).await;
    }
    measure_data(&app, &cookie, "load_run", "run_id=bench-big-run").await;
    for range in ["24h", "7d", "30d"] {
        measure_data(&app, &cookie, "load_trends", &format!("range={range}")).await;
    }
    measure_alert_evaluation(db).await;
    // An alert exists only once the rules have run over the data.
    match store::alerts::list(db, false, 1).await.unwrap().first() {
        Some(alert) => time_page(&app, &cookie, db, "an alert", &format!("/alerts/{}", alert.id)).await,
        None => println!("  (no alert fired: the alert page is not timed)"),
    }
    // What the first start after migration 0041 does once: every stored run added up
    // into the trends' rollups (a test checks they equal what ingest kept). Last, so
    // the pages read the rollups as the writes kept them, not a table just rewritten
    // whose dead rows PostgreSQL's autovacuum has not yet cleared.
    if std::env::var_os("FLIGHTDECK_BENCH_NO_REBUILD").is_some() {
        return;
    }
    let t0 = Instant::now();
    let read = store::trends::rebuild_rollups(db).await.unwrap();
    println!(
        "  {:<36} {:>7.1} ms ({read} runs; once, on upgrade)",
        "trends rollups rebuilt",
        t0.elapsed().as_secs_f64() * 1000.0
    );
}

/// Times `path` 30 times through the router (the first 5 warm the caches) and prints
/// its p50, p95 and size.
async fn time_page(app: &axum::Router, cookie: &str, db: &Db, label: &str, path: &str) {
    let mut times = Vec::new();
    let mut first = Duration::ZERO;
    let mut bytes = 0;
    let mut last = axum::body::Bytes::new();
    for i in 0..30 {
        let req = Request::get(path).header(header::COOKIE, cookie).body(Body::empty()).unwrap();
        let t0 = Instant::now();
        let res = app.clone().oneshot(req).await.unwrap();
        assert_eq!(res.status(), StatusCode::OK, "{path}");
        let body = axum::body::to_bytes(res.into_body(), 64 << 20).await.unwrap();
        if i == 0 {
            first = t0.elapsed();
        }
        if i >= 5 {
            times.push(t0.elapsed()); // the first five warm the caches
        }
        bytes = body.len();
        last = body;
    }
    times.sort();
    if let Ok(dir) = std::env::var("FLIGHTDECK_BENCH_DUMP") {
        let name = label.replace(|c: char| !c.is_ascii_alphanumeric(), "_");
        std::fs::write(format!("{dir}/{}-{name}.html", db.backend_name()), &last).unwrap();
    }
    println!(
        "  {label:<36} p50 {:>7.1} ms   p95 {:>7.1} ms   first {:>7.1} ms   page {:>6.1} KiB",
        percentile(&times, 0.50).as_secs_f64() * 1000.0,
        percentile(&times, 0.95).as_secs_f64() * 1000.0,
        first.as_secs_f64() * 1000.0,
        bytes as f64 / 1024.0
    );
}

/// One alert evaluation (all six rules: their windows read, the rules run, alerts
/// written) as of the newest run's start, so every window holds data.
async fn measure_alert_evaluation(db: &Db) {
    // The newest of the synthetic runs (the 500-span run starts in 2030).
    let newest = "SELECT COALESCE(MAX(started_ns), 0) FROM runs WHERE run_id <> 'bench-big-run'";
    let newest_ns: i64 = db.fetch_one_value(Sql::new(newest)).await.unwrap();
    let now_ms = newest_ns / 1_000_000 + 60_000;
    let mut times = Vec::new();
    let mut fired = 0;
    for i in 0..23 {
        let t0 = Instant::now();
        let report =
            app::services::alert_evaluation::evaluate_once(db, &Default::default(), now_ms, 120_000).await.unwrap();
        fired += report.fired.len();
        if i >= 3 {
            times.push(t0.elapsed());
        }
    }
    times.sort();
    println!(
        "  {:<34} p50 {:>7.1} ms   p95 {:>7.1} ms   ({fired} alerts fired)",
        "alert evaluation, six rules",
        percentile(&times, 0.50).as_secs_f64() * 1000.0,
        percentile(&times, 0.95).as_secs_f64() * 1000.0,
    );
}

/// A page's data alone: its server function as the browser calls it (SQL, figures and
/// JSON), to tell it apart from rendering the page.
async fn measure_data(app: &axum::Router, cookie: &str, function: &str, form: &str) {
    let mut times = Vec::new();
    let mut bytes = 0;
    for i in 0..60 {
        let req = Request::post(format!("/fn/{function}"))
            .header(header::COOKIE, cookie)
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(Body::from(form.to_string()))
            .unwrap();
        let t0 = Instant::now();
        let res = app.clone().oneshot(req).await.unwrap();
        let status = res.status();
        let body = axum::body::to_bytes(res.into_body(), 64 << 20).await.unwrap();
        if status != StatusCode::OK {
            println!("  {function} answered {status}: {}", String::from_utf8_lossy(&body));
            return;
        }
        if i >= 10 {
            times.push(t0.elapsed());
        }
        bytes = body.len();
    }
    times.sort();
    println!(
        "  {:<34} p50 {:>7.1} ms   p95 {:>7.1} ms   json {:>6.1} KiB",
        format!("  of which {function} {form} (data)"),
        percentile(&times, 0.50).as_secs_f64() * 1000.0,
        percentile(&times, 0.95).as_secs_f64() * 1000.0,
        bytes as f64 / 1024.0
    );
}

/// A kept database named by `var`, migrated.
async fn kept(var: &str) -> Option<Db> {
    let url = std::env::var(var).ok()?;
    let url = if url.contains("://") { url } else { format!("sqlite://{url}") };
    let db = Db::connect(&url).await.expect("open the kept bench database");
    db.migrate().await.expect("migrate the kept bench database");
    Some(db)
}

#[tokio::main]
async fn main() {
    let runs: usize = std::env::var("FLIGHTDECK_BENCH_RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(150_000);
    let only = std::env::var("FLIGHTDECK_BENCH_ONLY").unwrap_or_default();
    if only != "postgres" {
        match kept("FLIGHTDECK_BENCH_SQLITE").await {
            Some(db) => measure(&db, runs).await,
            None => {
                let t = TestDb::sqlite().await;
                measure(&t.db, runs).await;
                t.cleanup().await;
            }
        }
    }
    if only != "sqlite" {
        match kept("FLIGHTDECK_BENCH_PG").await {
            Some(db) => measure(&db, runs).await,
            None => {
                if let Some(t) = TestDb::postgres().await {
                    measure(&t.db, runs).await;
                    t.cleanup().await;
                }
            }
        }
    }
}
