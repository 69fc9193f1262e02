//! Every page reads what it shows through indexes, never every row of a table that grows
//! with the traffic: each page of the console is rendered through the real router on a
//! small SQLite database filled by `flightdeck demo`, every statement it runs is caught
//! from sqlx's query log, and SQLite's plan for each is checked. On a small database a
//! full scan is as fast as an index, so the plan is what tells a page that will not grow
//! from one that will (docs/benchmarks.md measures them at 10 million spans).
//!
//! One test in this file: it installs the process' tracing subscriber.

use app::auth::password;
use app::state::AppState;
use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use domain::access::Role;
use flightdeck::config::{Config, Overrides};
use std::sync::{Arc, Mutex};
use store::testing::TestDb;
use store::{users, Db};
use tower::ServiceExt;
use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::Layer;

/// Tables that grow with the runs, spans, requests and alerts agents send: a page may read
/// them only through an index. The others (users, tokens, prices, policies, rules,
/// webhooks, ...) hold what people configured and stay small.
const GROWING: &[&str] = &[
    "runs",
    "span_chunks",
    "body_chunks",
    "run_tools",
    "trace_runs",
    "irreversible_calls",
    "approvals",
    "approval_edits",
    "approval_votes",
    "approval_violations",
    "escalations",
    "escalation_events",
    "alerts",
    "alert_events",
    "audit_log",
    "trend_runs",
    "trend_values",
    "replay_results",
    "webhook_deliveries",
    "slack_seen",
    "tower_sessions",
    "call_ledger",
    "call_ledger_hours",
];

/// The statements sqlx logged, as SQLite ran them.
#[derive(Clone, Default)]
struct Statements(Arc<Mutex<Vec<String>>>);

impl<S: tracing::Subscriber> Layer<S> for Statements {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        if event.metadata().target() != "sqlx::query" {
            return;
        }
        #[derive(Default)]
        struct Text {
            summary: String,
            statement: String,
        }
        impl Visit for Text {
            fn record_str(&mut self, field: &Field, value: &str) {
                match field.name() {
                    "summary" => self.summary = value.to_string(),
                    "db.statement" => self.statement = value.to_string(),
                    _ => {}
                }
            }
            fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
                if field.name() == "summary" {
                    self.summary = format!("{value:?}").trim_matches('"').to_string();
                }
            }
        }
        let mut text = Text::default();
        event.record(&mut text);
        // sqlx logs the whole statement only when it is longer than its summary.
        let sql = if text.statement.trim().is_empty() { text.summary } else { text.statement.trim().to_string() };
        self.0.lock().unwrap().push(sql);
    }
}

impl Statements {
    fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

/// The most rows a statement may walk to fill one page: the API's largest page, plus one.
const PAGE_LIMIT: u64 = 501;

/// What is wrong with `plan` (SQLite's `EXPLAIN QUERY PLAN` details): each step that reads
/// every row of a growing table, by name or by an alias the statement gives it. A walk of a
/// table in its own order (newest first by id) is not one when every LIMIT of the statement
/// is a page and it sorts nothing: it stops at the page. A walk that stops at a count's
/// limit (10,001) or a window's is one: when few rows pass its filter, it reads them all.
fn full_scans(sql: &str, plan: &[String]) -> Vec<String> {
    let upper = sql.to_ascii_uppercase();
    // A bound limit is a page: the pages bind their page size, and write counts' and
    // windows' limits into the text.
    let limits: Vec<u64> = upper
        .split(" LIMIT ")
        .skip(1)
        .map(|rest| rest.split(|c: char| !c.is_ascii_digit()).next().unwrap_or_default())
        .map(|digits| digits.parse().unwrap_or(0))
        .collect();
    let stops_at_its_page = !limits.is_empty()
        && limits.iter().all(|n| *n <= PAGE_LIMIT)
        && !plan.iter().any(|s| s.contains("TEMP B-TREE"));
    plan.iter()
        .filter_map(|step| {
            let scanned = step.strip_prefix("SCAN ")?.split_whitespace().next()?;
            let table = table_of(sql, scanned);
            let by_index = step.contains(" INDEX ") || step.contains("VIRTUAL TABLE");
            (GROWING.contains(&table.as_str()) && !by_index && !stops_at_its_page).then(|| step.clone())
        })
        .collect()
}

/// The table `name` stands for in `sql`: itself, or the table it aliases (`FROM runs r`,
/// `JOIN runs AS r`).
fn table_of(sql: &str, name: &str) -> String {
    let words: Vec<&str> = sql.split(|c: char| c.is_whitespace() || c == ',' || c == '(' || c == ')').collect();
    for (i, word) in words.iter().enumerate() {
        if *word == name && i > 0 {
            let before = if words[i - 1].eq_ignore_ascii_case("AS") && i > 1 { words[i - 2] } else { words[i - 1] };
            if GROWING.contains(&before) {
                return before.to_string();
            }
        }
    }
    name.to_string()
}

#[test]
fn a_walk_stops_at_a_page_not_at_a_count() {
    let walk = vec!["SCAN runs".to_string()];
    let page = "SELECT run_id FROM runs WHERE model = ? LIMIT 51";
    assert!(full_scans(page, &walk).is_empty());
    let count =
        "SELECT reason, COUNT(*) FROM (SELECT terminal_reason AS reason FROM runs WHERE model = ? LIMIT 10001) \
                 AS matched GROUP BY reason";
    assert_eq!(full_scans(count, &walk), walk, "a rare model's count reads every run");
    let window = "SELECT run_id FROM (SELECT * FROM runs WHERE model = ? LIMIT 5000) AS w LIMIT 51";
    assert_eq!(full_scans(window, &walk), walk, "a window's limit is not a page");
    let bound = "SELECT id FROM audit_log ORDER BY id DESC LIMIT ?";
    assert!(full_scans(bound, &["SCAN audit_log".to_string()]).is_empty(), "pages bind their size");
}

#[test]
fn aliases_are_resolved_and_only_scans_of_growing_tables_count() {
    let sql = "SELECT r.run_id FROM runs r JOIN prices AS p ON 1 WHERE r.cost > 0";
    assert_eq!(table_of(sql, "r"), "runs");
    assert_eq!(table_of(sql, "p"), "p");
    let plan = ["SCAN r".to_string(), "SCAN p".into(), "SEARCH runs USING INDEX runs_cost (cost>?)".into()];
    assert_eq!(full_scans(sql, &plan), ["SCAN r"]);
    let by_index = ["SCAN r USING COVERING INDEX runs_cost".to_string()];
    assert!(full_scans(sql, &by_index).is_empty());
    // Newest first by id, a page at a time: stops at the page unless it sorts.
    let page = "SELECT id FROM audit_log ORDER BY id DESC LIMIT ?";
    assert!(full_scans(page, &["SCAN audit_log".to_string()]).is_empty());
    let sorted = ["SCAN audit_log".to_string(), "USE TEMP B-TREE FOR ORDER BY".into()];
    assert_eq!(full_scans(page, &sorted), ["SCAN audit_log"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_page_reads_growing_tables_through_an_index() {
    let statements = Statements::default();
    tracing::subscriber::set_global_default(
        tracing_subscriber::registry().with(
            statements.clone().with_filter(
                tracing_subscriber::filter::Targets::new().with_target("sqlx::query", tracing::Level::DEBUG),
            ),
        ),
    )
    .expect("the only subscriber of this test binary");

    let t = TestDb::sqlite().await;
    let db = &t.db;
    flightdeck::commands::demo::run(db, &ingest::pipeline::IngestSettings::default(), 120, 7).await.unwrap();
    let roles = [Role::Viewer, Role::Approver, Role::Operator, Role::Admin];
    users::create(db, "ops", &password::hash("ops-password-1"), &roles).await.unwrap();
    let config = Config::resolve(Overrides::default(), None).unwrap();
    let state = AppState::unconfigured(db.clone(), flightdeck::commands::serve::leptos_options(&config));
    let app = flightdeck::web::router(state, &config);
    let login = Request::post("/fn/login")
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(Body::from("username=ops&password=ops-password-1"))
        .unwrap();
    let res = app.clone().oneshot(login).await.unwrap();
    let cookie = res.headers()[header::SET_COOKIE].to_str().unwrap().split(';').next().unwrap().to_string();

    let run = store::runs::list(db, &Default::default()).await.unwrap().runs.first().map(|r| r.run_id.clone());
    let escalation = store::escalations::list(db, true, 1).await.unwrap().first().map(|e| e.id.clone());
    let pages = [
        "/runs".to_string(),
        "/runs?terminal_reason=error".into(),
        "/runs?agent=billing-assistant".into(),
        "/runs?trigger=schedule".into(),
        "/runs?sort=cost".into(),
        "/runs?sort=duration".into(),
        "/runs?sort=duplicates".into(),
        "/runs?flag=approval_violation".into(),
        "/runs?flag=no_read".into(),
        "/runs?flag=duplicates".into(),
        "/runs?q=send_email".into(),
        "/runs?q=msg_000001".into(),
        // Filters no one index answers together read a window of one's runs (ADR 0022),
        // as a filtered search reads a window of the tool's (ADR 0021).
        "/runs?agent=billing-assistant&flag=duplicates".into(),
        "/runs?agent=billing&trigger=retry".into(),
        "/runs?agent=billing&sort=cost".into(),
        "/runs?flag=no_read&sort=duration".into(),
        "/runs?model=gpt-4.1".into(),
        "/runs?q=send_email&agent=billing".into(),
        format!("/runs/{}", run.expect("the demo stored runs")),
        "/approvals".into(),
        "/approvals?view=decided".into(),
        "/approvals/bulk".into(),
        "/escalations".into(),
        "/escalations?view=resolved".into(),
        format!("/escalations/{}", escalation.expect("the demo opened escalations")),
        "/alerts".into(),
        "/alerts?view=history".into(),
        "/trends".into(),
        "/trends?range=7d".into(),
        "/trends?range=30d".into(),
        "/trends?range=24h&agent=billing-assistant".into(),
        "/admin".into(),
        "/admin/users".into(),
        "/admin/tokens".into(),
        "/admin/prices".into(),
        "/admin/webhooks".into(),
        "/admin/webhooks?failed=1".into(),
        "/admin/alerts".into(),
        "/admin/tools".into(),
        "/admin/policies".into(),
        "/admin/rules".into(),
        "/admin/audit".into(),
        "/admin/audit?action=login".into(),
        "/admin/audit?before=1000000&action=login".into(),
    ];
    let Db::Sqlite { main, ledger } = db else { unreachable!("a SQLite test database") };
    let mut failures = Vec::new();
    for path in pages {
        statements.take();
        let req = Request::get(path.as_str()).header(header::COOKIE, &cookie).body(Body::empty()).unwrap();
        let res = app.clone().oneshot(req).await.unwrap();
        assert_eq!(res.status(), StatusCode::OK, "{path}");
        axum::body::to_bytes(res.into_body(), 64 << 20).await.unwrap();
        let reads: Vec<String> = statements
            .take()
            .into_iter()
            .filter(|sql| {
                let head = sql.trim_start().to_ascii_uppercase();
                (head.starts_with("SELECT") || head.starts_with("WITH")) && !head.contains("EXPLAIN QUERY PLAN")
            })
            .collect();
        assert!(!reads.is_empty(), "{path}: no statement was caught from sqlx's log");
        for sql in reads {
            // Unbound parameters read as NULL; SQLite plans without looking at values. A
            // statement on the execution ledger's tables runs on its own file.
            let explain = format!("EXPLAIN QUERY PLAN {sql}");
            let plan: Vec<(i64, i64, i64, String)> = match sqlx::query_as(&explain).fetch_all(main).await {
                Ok(plan) => plan,
                Err(_) => sqlx::query_as(&explain).fetch_all(ledger).await.unwrap_or_else(|e| panic!("{e}: {sql}")),
            };
            let plan: Vec<String> = plan.into_iter().map(|row| row.3).collect();
            let scans = full_scans(&sql, &plan);
            if !scans.is_empty() {
                failures.push(format!("{path}: {scans:?}\n  {sql}"));
            }
        }
    }
    statements.take();
    assert!(failures.is_empty(), "pages reading every row of a growing table:\n{}", failures.join("\n"));
    t.cleanup().await;
}
