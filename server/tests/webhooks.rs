//! Outgoing webhooks end to end: events queued in the outbox, sent by the worker to a real
//! HTTP receiver on 127.0.0.1, retried, given up on, shown to admins, and never sent twice
//! by two workers sharing a database. On SQLite and on PostgreSQL.

mod common;

use app::auth::password;
use app::state::AppState;
use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use common::receiver::Receiver;
use domain::access::Role;
use domain::notify::{self, Event, EventKind, RetryPolicy, WebhookFormat, WebhookTarget};
use flightdeck::config::{Config, Overrides};
use flightdeck::webhooks::{Worker, WorkerSettings};
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};
use store::testing::TestDb;
use store::webhooks::{self, status};
use store::{users, Db};
use tower::ServiceExt;

const PUBLIC_URL: &str = "https://fd.example";

fn settings() -> WorkerSettings {
    WorkerSettings {
        public_url: PUBLIC_URL.into(),
        retry: RetryPolicy { base: Duration::from_millis(5), max_delay: Duration::from_millis(20), max_attempts: 3 },
        timeout: Duration::from_secs(5),
        poll_interval: Duration::from_millis(10),
        batch: 16,
        targets: Vec::new(),
    }
}

fn approval_event() -> Event {
    Event {
        kind: EventKind::ApprovalRequested,
        title: "Approval requested: send_email".into(),
        summary: "billing-bot wants to email <!channel> & the customer".into(),
        link_path: "/approvals/apr_1".into(),
        fields: vec![("Agent".into(), "billing-bot".into()), ("Tool".into(), "send_email".into())],
        data: json!({ "approval_id": "apr_1", "arguments": { "to": "c@example.com" } }),
    }
}

/// Runs the worker until `done` holds for the outbox (or fails the test after 10 s).
async fn work_until(worker: &Worker, db: &Db, done: impl Fn(&[domain::models::WebhookDelivery]) -> bool) {
    let start = Instant::now();
    loop {
        worker.run_once().await.unwrap();
        let all = webhooks::list(db, false, 1000).await.unwrap();
        if done(&all) {
            return;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "outbox never settled: {all:#?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn the_receiver_gets_the_exact_json_and_slack_bodies() {
    for t in TestDb::each_backend().await {
        let rx = Receiver::start().await;
        let targets = [
            rx.target("generic", "/ok/generic", WebhookFormat::Json),
            rx.target("slack", "/ok/slack", WebhookFormat::Slack),
            WebhookTarget {
                events: Some(vec![EventKind::AlertFiring]),
                ..rx.target("alerts", "/ok/a", WebhookFormat::Json)
            },
        ];
        let event = approval_event();
        assert_eq!(webhooks::enqueue(&t.db, &event, &targets).await.unwrap(), 2, "the alerts-only target is skipped");

        // The real loop, stopped the way `serve` stops it.
        let worker = Worker::new(t.db.clone(), settings()).unwrap();
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let running = tokio::spawn(worker.run(stopped));
        let start = Instant::now();
        while rx.received().len() < 2 || webhooks::count(&t.db, status::PENDING).await.unwrap() > 0 {
            assert!(start.elapsed() < Duration::from_secs(10), "{:?}", rx.received());
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        stop.send(true).unwrap();
        tokio::time::timeout(Duration::from_secs(5), running).await.expect("the worker stops").unwrap();

        let mut got = rx.received();
        got.sort_by(|a, b| a.path.cmp(&b.path));
        assert_eq!(got.len(), 2, "{}", t.backend());
        let (generic, slack) = (&got[0], &got[1]);
        assert_eq!(generic.path, "/ok/generic");
        assert_eq!(
            generic.body,
            json!({
                "event": "approval.requested",
                "title": "Approval requested: send_email",
                "summary": "billing-bot wants to email <!channel> & the customer",
                "url": "https://fd.example/approvals/apr_1",
                "fields": [{ "name": "Agent", "value": "billing-bot" }, { "name": "Tool", "value": "send_email" }],
                "data": { "approval_id": "apr_1", "arguments": { "to": "c@example.com" } }
            })
        );
        assert_eq!(slack.body, notify::slack_message(&event, PUBLIC_URL));
        assert!(slack.body["text"].as_str().unwrap().contains("&lt;!channel&gt; &amp; the customer"));
        for r in &got {
            assert_eq!(r.user_agent, "flightdeck");
            assert_eq!(r.content_type, "application/json");
            assert_eq!(r.event, "approval.requested");
            assert!(r.delivery.parse::<i64>().is_ok(), "delivery id header: {r:?}");
        }
        let all = webhooks::list(&t.db, false, 10).await.unwrap();
        assert!(all.iter().all(|d| d.status == "delivered" && d.attempts == 1 && d.last_status == Some(200)));
        assert!(all.iter().all(|d| d.delivered_at.is_some() && d.next_attempt_at.is_none()));
        t.cleanup().await;
    }
}

#[tokio::test]
async fn a_flaky_receiver_is_retried_until_delivered() {
    for t in TestDb::each_backend().await {
        let rx = Receiver::start().await;
        let event = Event { kind: EventKind::EscalationOpened, ..approval_event() };
        webhooks::enqueue(&t.db, &event, &[rx.target("flaky", "/flaky/x", WebhookFormat::Json)]).await.unwrap();
        let worker = Worker::new(t.db.clone(), settings()).unwrap();
        work_until(&worker, &t.db, |all| all.iter().all(|d| d.status != "pending")).await;

        let d = &webhooks::list(&t.db, false, 10).await.unwrap()[0];
        assert_eq!((d.status.as_str(), d.attempts, d.last_status), ("delivered", 3, Some(204)), "{}", t.backend());
        assert_eq!(d.last_error, None, "a success clears the last error");
        let got = rx.received();
        assert_eq!(got.len(), 3);
        assert!(got.iter().all(|r| r.delivery == got[0].delivery), "one delivery id across retries");
        assert!(got.iter().all(|r| r.body == notify::generic_json(&event, PUBLIC_URL)));
        t.cleanup().await;
    }
}

#[tokio::test]
async fn a_dead_receiver_ends_failed_and_is_listed_for_admins() {
    for t in TestDb::each_backend().await {
        let rx = Receiver::start().await;
        // Nothing listens here: bind a port, then let it go.
        let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap().local_addr().unwrap();
        let targets = [
            rx.target("down", "/down/s3cret-token", WebhookFormat::Slack),
            WebhookTarget {
                name: "nowhere".into(),
                url: format!("http://{closed}/hook"),
                format: WebhookFormat::Json,
                ..WebhookTarget::default()
            },
        ];
        let event = Event { kind: EventKind::AlertFiring, ..approval_event() };
        webhooks::enqueue(&t.db, &event, &targets).await.unwrap();
        let worker = Worker::new(t.db.clone(), settings()).unwrap();
        work_until(&worker, &t.db, |all| all.iter().all(|d| d.status != "pending")).await;

        let failed = webhooks::list(&t.db, true, 10).await.unwrap();
        assert_eq!(failed.len(), 2, "{}: {failed:#?}", t.backend());
        let down = failed.iter().find(|d| d.target_name == "down").unwrap();
        assert_eq!((down.attempts, down.last_status), (3, Some(503)));
        assert!(down.last_error.as_deref().unwrap().contains("down for maintenance"), "{down:?}");
        let nowhere = failed.iter().find(|d| d.target_name == "nowhere").unwrap();
        assert_eq!((nowhere.attempts, nowhere.last_status), (3, None));
        assert!(nowhere.last_error.as_deref().unwrap().starts_with("could not connect"), "{nowhere:?}");
        assert!(!nowhere.last_error.as_deref().unwrap().contains(&closed.to_string()), "no URL in errors");
        assert_eq!(rx.received().len(), 3);

        // The admin page lists them, highlighted, without the URL's secret.
        let html = admin_page(&t, &targets, "/admin/webhooks?failed=1").await;
        assert!(html.contains("delivery-failed"), "{html}");
        assert!(html.contains("down for maintenance") && html.contains("could not connect"));
        assert!(html.contains(&format!("http://{}/…", rx.addr)), "redacted target URL");
        assert!(!html.contains("s3cret-token"), "{html}");
        assert!(html.contains("Approval requested: send_email"), "the event title");
        t.cleanup().await;
    }
}

/// The real router with `targets` configured, and a signed-in admin's session cookie.
async fn admin_session(t: &TestDb, targets: &[WebhookTarget]) -> (axum::Router, String) {
    let config = Config::resolve(Overrides::default(), None).unwrap();
    users::create(&t.db, "alice", &password::hash("alice-password-123"), &[Role::Admin]).await.unwrap();
    let state = AppState {
        db: t.db.clone(),
        leptos_options: flightdeck::commands::serve::leptos_options(&config),
        approvals: Default::default(),
        notifications: Arc::new(domain::notify::Notifications { targets: targets.to_vec(), routes: Vec::new() }),
        redactor: Default::default(),
        rules: Default::default(),
    };
    let app = flightdeck::web::router(state, &config);
    let login = Request::post("/fn/login")
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .header("sec-fetch-site", "same-origin")
        .body(Body::from("username=alice&password=alice-password-123&next=%2Fruns"))
        .unwrap();
    let res = app.clone().oneshot(login).await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let cookie = res.headers()[header::SET_COOKIE].to_str().unwrap().split(';').next().unwrap().to_string();
    (app, cookie)
}

/// `path` as a signed-in admin sees it, through the real router.
async fn admin_page(t: &TestDb, targets: &[WebhookTarget], path: &str) -> String {
    let (app, cookie) = admin_session(t, targets).await;
    html(app, &cookie, path).await
}

async fn html(app: axum::Router, cookie: &str, path: &str) -> String {
    let page = Request::get(path).header(header::ACCEPT, "text/html").header(header::COOKIE, cookie);
    let res = app.oneshot(page.body(Body::empty()).unwrap()).await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let bytes = axum::body::to_bytes(res.into_body(), 10 << 20).await.unwrap();
    String::from_utf8_lossy(&bytes).into_owned()
}

#[tokio::test]
async fn an_admin_sends_a_test_alert_to_a_route_from_the_page() {
    for t in TestDb::each_backend().await {
        let rx = Receiver::start().await;
        let secret = domain::notify::SigningSecret::generate();
        let targets = [
            WebhookTarget {
                secret: Some(domain::notify::SigningSecret::parse(&secret).unwrap()),
                ..rx.target("on-call", "/ok/oncall", WebhookFormat::Slack)
            },
            WebhookTarget {
                events: Some(vec![EventKind::ApprovalRequested]),
                ..rx.target("approvals-only", "/ok/approvals", WebhookFormat::Json)
            },
        ];
        let (app, cookie) = admin_session(&t, &targets).await;
        let page = html(app.clone(), &cookie, "/admin/webhooks").await;
        assert!(page.contains("data-testid=\"alert-routes\"") && page.contains(">Send test<"), "{page}");
        assert!(page.contains("no: add a secret"), "the unsigned target is pointed out");

        let send = Request::post("/fn/send_test_alert")
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header("sec-fetch-site", "same-origin")
            .header(header::COOKIE, &cookie)
            .body(Body::from("route=default"))
            .unwrap();
        let res = app.oneshot(send).await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        let worker = Worker::new(t.db.clone(), WorkerSettings { targets: targets.to_vec(), ..settings() }).unwrap();
        // Firing, then resolved: an alert's events to one target go one after the other.
        let start = Instant::now();
        while rx.received().len() < 2 {
            worker.run_once().await.unwrap();
            assert!(start.elapsed() < Duration::from_secs(10));
        }
        let got = rx.received();
        let events: Vec<(&str, &str)> = got.iter().map(|r| (r.path.as_str(), r.event.as_str())).collect();
        assert_eq!(events, [("/ok/oncall", "alert.firing"), ("/ok/oncall", "alert.resolved")], "{got:#?}");
        assert!(got[0].body["text"].as_str().unwrap().starts_with("TEST test_"), "{}", got[0].body);
        assert!(got.iter().all(|r| r.signed[2].starts_with("v1,")));
        let audit = store::audit::list(&t.db, None, Some("alert_route_tested"), 10).await.unwrap();
        assert_eq!(audit.entries.len(), 1);
        t.cleanup().await;
    }
}

#[tokio::test]
async fn two_workers_never_send_the_same_delivery_twice() {
    for t in TestDb::each_backend().await {
        let rx = Receiver::start().await;
        let targets: Vec<_> =
            (0..40).map(|i| rx.target(&format!("t{i}"), &format!("/ok/{i}"), WebhookFormat::Json)).collect();
        webhooks::enqueue(&t.db, &approval_event(), &targets).await.unwrap();
        // Two instances: each its own pool on the same database.
        let small = WorkerSettings { batch: 3, ..settings() };
        let a = Worker::new(t.db.clone(), small.clone()).unwrap();
        let other_db = Db::connect(&t.url).await.unwrap();
        let b = Worker::new(other_db.clone(), small).unwrap();
        let drain = |w: Worker| async move {
            let mut sent = 0;
            for _ in 0..200 {
                match w.run_once().await.unwrap() {
                    0 => tokio::time::sleep(Duration::from_millis(2)).await,
                    n => sent += n,
                }
            }
            sent
        };
        let (sent_a, sent_b) = tokio::join!(drain(a), drain(b));
        assert_eq!(sent_a + sent_b, 40, "{}: a {sent_a}, b {sent_b}", t.backend());
        let got = rx.received();
        let mut ids: Vec<_> = got.iter().map(|r| r.delivery.clone()).collect();
        ids.sort();
        ids.dedup();
        assert_eq!((got.len(), ids.len()), (40, 40), "every delivery sent exactly once");
        assert_eq!(webhooks::count(&t.db, status::DELIVERED).await.unwrap(), 40);
        other_db.close().await;
        t.cleanup().await;
    }
}
