//! On-call notifications end to end, on SQLite and PostgreSQL: alerts routed by rule and
//! severity to their targets; a PagerDuty incident triggered, acknowledged and resolved
//! under one dedup key, against a local stand-in that refuses what PagerDuty would;
//! Alertmanager's webhook shape; and every delivery signed the Standard Webhooks way
//! for a target with a secret.

mod common;

use app::services::alert_evaluation::evaluate_once;
use common::receiver::{Received, Receiver};
use common::spans::{ingest, kv, span_at};
use domain::alerts::settings::RuleSettings;
use domain::alerts::{AlertRule, Severity};
use domain::notify::{AlertRoute, Notifications, RetryPolicy, SigningSecret, WebhookFormat, WebhookTarget};
use flightdeck::webhooks::{Worker, WorkerSettings};
use std::time::{Duration, Instant};
use store::testing::TestDb;
use store::webhooks::{self, status};
use store::{alerts, now_ms, Db};

const MINUTE_MS: i64 = 60_000;
const ROUTING_KEY: &str = "R0UT1NGKEY0123456789abcdef012345";

async fn tune(db: &Db, rule: AlertRule, change: impl FnOnce(&mut RuleSettings)) {
    let mut s = RuleSettings::default_for(rule);
    change(&mut s);
    s.validate(rule).unwrap();
    alerts::save_settings(db, rule, &s, "test").await.unwrap();
}

/// A run whose root started `ago_ms` before now, with one tool span per (tool, side
/// effect, outcome), ending in `reason`.
async fn run(db: &Db, trace: u8, run_id: &str, reason: &str, ago_ms: i64, tools: &[(&str, &str, &str)]) {
    let start = ((now_ms() - ago_ms) as u64) * 1_000_000;
    let mut root =
        span_at(trace, 1, None, "agent run", start, vec![kv("run.id", run_id), kv("run.terminal_reason", reason)]);
    root.end_time_unix_nano = start + 60_000_000;
    let mut spans = vec![root];
    for (i, (tool, effect, outcome)) in tools.iter().enumerate() {
        let attrs = vec![kv("tool.name", tool), kv("tool.side_effect", effect), kv("tool.outcome", outcome)];
        spans.push(span_at(
            trace,
            2 + i as u8,
            Some(1),
            &format!("tool {tool}"),
            start + (i as u64 + 1) * 2_000_000,
            attrs,
        ));
    }
    ingest(db, spans).await;
}

/// Three irreversible executions against a limit of two: rule 1 fires (severity page).
async fn irreversible_burst(db: &Db) {
    tune(db, AlertRule::IrreversibleExecutions, |s| s.threshold = 2.0).await;
    let email = ("send_email", "irreversible", "ok");
    run(db, 1, "run-burst", "completed", MINUTE_MS, &[email, email, email]).await;
}

fn worker(db: &Db, n: &Notifications) -> Worker {
    let retry = RetryPolicy { base: Duration::from_millis(5), max_delay: Duration::from_millis(20), max_attempts: 3 };
    let settings = WorkerSettings {
        targets: n.targets.clone(),
        timeout: Duration::from_secs(5),
        poll_interval: Duration::from_millis(10),
        batch: 16,
        ..WorkerSettings::new("https://fd.example", retry, &[])
    };
    Worker::new(db.clone(), settings).unwrap()
}

/// Sends queued deliveries until none is pending (or fails after 10 s).
async fn deliver_all(db: &Db, worker: &Worker) {
    let start = Instant::now();
    while webhooks::count(db, status::PENDING).await.unwrap() > 0 {
        worker.run_once().await.unwrap();
        assert!(start.elapsed() < Duration::from_secs(10), "deliveries still pending");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn at(received: &[Received], prefix: &str) -> Vec<Received> {
    received.iter().filter(|r| r.path.starts_with(prefix)).cloned().collect()
}

fn route(name: &str, rules: Option<&[&str]>, severities: Option<&[&str]>, targets: &[&str]) -> AlertRoute {
    let list = |l: &[&str]| l.iter().map(|s| s.to_string()).collect();
    AlertRoute {
        name: name.into(),
        rules: rules.map(list),
        severities: severities.map(list),
        targets: targets.iter().map(|s| s.to_string()).collect(),
    }
}

#[tokio::test]
async fn a_pagerduty_incident_is_triggered_acknowledged_and_resolved_under_one_dedup_key() {
    for t in TestDb::each_backend().await {
        let db = &t.db;
        let rx = Receiver::start().await;
        let secret_text = SigningSecret::generate();
        let n = Notifications {
            targets: vec![
                WebhookTarget {
                    routing_key: Some(ROUTING_KEY.into()),
                    secret: Some(SigningSecret::parse(&secret_text).unwrap()),
                    ..rx.target("pagerduty", "/pagerduty/v2/enqueue", WebhookFormat::Pagerduty)
                },
                rx.target("team-log", "/ok/log", WebhookFormat::Json),
            ],
            routes: vec![route("page-now", None, Some(&["page"]), &["pagerduty", "team-log"])],
        };
        irreversible_burst(db).await;
        let now = now_ms();
        let fired = evaluate_once(db, &n, now, 0).await.unwrap().fired;
        assert_eq!(fired.len(), 1, "{}", t.backend());
        let alert = &fired[0];
        assert_eq!(alert.severity, Severity::Page);
        alerts::acknowledge(db, &alert.id, "olga", &n).await.unwrap();
        // Ten minutes later the executions have left the window: resolved (no hold).
        let resolved = evaluate_once(db, &n, now + 20 * MINUTE_MS, 0).await.unwrap().resolved;
        assert_eq!(resolved.len(), 1);
        deliver_all(db, &worker(db, &n)).await;

        let received = rx.received();
        let pd = at(&received, "/pagerduty/");
        let actions: Vec<&str> = pd.iter().map(|r| r.body["event_action"].as_str().unwrap()).collect();
        assert_eq!(actions, ["trigger", "acknowledge", "resolve"], "{pd:#?}");
        for r in &pd {
            assert_eq!(r.body["dedup_key"], format!("flightdeck/{}", alert.id));
            assert_eq!(r.body["routing_key"], ROUTING_KEY);
        }
        assert_eq!(pd[0].body["payload"]["severity"], "critical");
        assert_eq!(pd[0].body["links"][0]["href"], format!("https://fd.example/alerts/{}", alert.id));
        // The stand-in accepted all three (202), so nothing failed or waits.
        assert_eq!(webhooks::count(db, status::FAILED).await.unwrap(), 0);
        assert_eq!(webhooks::count(db, status::DELIVERED).await.unwrap(), 6, "three events to two targets");

        // Signed for the target with a secret; a receiver can check it, and a changed body fails.
        let secret = SigningSecret::parse(&secret_text).unwrap();
        let now_s = now_ms() / 1000;
        for r in &pd {
            let [id, timestamp, signature] = &r.signed;
            assert!(id.starts_with("msg_") && signature.starts_with("v1,"), "{:?}", r.signed);
            secret.verify(id, timestamp, signature, r.raw.as_bytes(), now_s).expect("a valid signature");
            let forged = r.raw.replace("flightdeck/", "forged/");
            assert!(secret.verify(id, timestamp, signature, forged.as_bytes(), now_s).is_err());
        }
        // The team log got the same three events in the generic format, unsigned.
        let log = at(&received, "/ok/log");
        let events: Vec<&str> = log.iter().map(|r| r.event.as_str()).collect();
        assert_eq!(events, ["alert.firing", "alert.acknowledged", "alert.resolved"]);
        assert!(log[1].body["summary"].as_str().unwrap().starts_with("olga is on it."), "{}", log[1].body);
        assert!(log.iter().all(|r| r.signed[2].is_empty() && !r.signed[0].is_empty()));
        t.cleanup().await;
    }
}

#[tokio::test]
async fn alerts_follow_the_first_matching_route_and_alertmanager_gets_its_own_shape() {
    for t in TestDb::each_backend().await {
        let db = &t.db;
        let rx = Receiver::start().await;
        let n = Notifications {
            targets: vec![
                rx.target("alertmanager-relay", "/ok/am", WebhookFormat::Alertmanager),
                rx.target("catch-all", "/ok/default", WebhookFormat::Json),
            ],
            routes: vec![
                route("tickets", None, Some(&["ticket"]), &["alertmanager-relay"]),
                route("default", None, None, &["catch-all"]),
            ],
        };
        irreversible_burst(db).await; // page
        tune(db, AlertRule::FailedToRecover, |s| s.threshold = 0.0).await; // ticket
        run(db, 2, "run-stuck", "error", MINUTE_MS, &[("lookup", "read", "error")]).await;
        let fired = evaluate_once(db, &n, now_ms(), 0).await.unwrap().fired;
        let mut rules: Vec<AlertRule> = fired.iter().map(|a| a.rule).collect();
        rules.sort();
        assert_eq!(rules, [AlertRule::IrreversibleExecutions, AlertRule::FailedToRecover], "{}", t.backend());
        deliver_all(db, &worker(db, &n)).await;

        let received = rx.received();
        let am = at(&received, "/ok/am");
        assert_eq!(am.len(), 1, "only the ticket: {received:#?}");
        let body = &am[0].body;
        assert_eq!(body["version"], "4");
        assert_eq!(body["status"], "firing");
        assert_eq!(body["receiver"], "alertmanager-relay");
        assert_eq!(body["alerts"][0]["labels"]["alertname"], "failed_to_recover");
        assert_eq!(body["alerts"][0]["labels"]["severity"], "ticket");
        assert_eq!(body["alerts"][0]["endsAt"], "0001-01-01T00:00:00Z");
        let default = at(&received, "/ok/default");
        assert_eq!(default.len(), 1);
        assert_eq!(default[0].body["data"]["rule"], "irreversible_executions");
        t.cleanup().await;
    }
}

#[tokio::test]
async fn alertmanager_api_targets_get_alerts_posted_into_alertmanager_re_sent_while_firing_and_ended_on_resolve() {
    for t in TestDb::each_backend().await {
        let db = &t.db;
        let rx = Receiver::start().await;
        let n = Notifications {
            // The target names the Alertmanager; deliveries go to its /api/v2/alerts.
            targets: vec![rx.target("alertmanager", "/alertmanager", WebhookFormat::AlertmanagerApi)],
            routes: Vec::new(),
        };
        irreversible_burst(db).await;
        let now = now_ms();
        let fired = evaluate_once(db, &n, now, 0).await.unwrap().fired;
        let id = fired[0].id.clone();
        deliver_all(db, &worker(db, &n)).await;
        // Within a minute nothing is re-sent; after one, the still-firing alert is (and
        // acknowledging it changes nothing for Alertmanager, which has no such state).
        assert_eq!(evaluate_once(db, &n, now + 30_000, 0).await.unwrap().resent, 0, "{}", t.backend());
        alerts::acknowledge(db, &id, "olga", &n).await.unwrap();
        assert_eq!(evaluate_once(db, &n, now + 61_000, 0).await.unwrap().resent, 1);
        deliver_all(db, &worker(db, &n)).await;
        // Ten minutes on, the executions left the window: resolved.
        evaluate_once(db, &n, now + 10 * MINUTE_MS + 1, 0).await.unwrap();
        deliver_all(db, &worker(db, &n)).await;

        let got = rx.received();
        let statuses: Vec<&str> = got.iter().map(|r| r.event.as_str()).collect();
        assert_eq!(statuses, ["alert.firing", "alert.firing", "alert.resolved"], "{got:#?}");
        assert!(got.iter().all(|r| r.path == "/alertmanager/api/v2/alerts"), "{got:#?}");
        let failed = webhooks::list(db, true, 10).await.unwrap();
        assert!(failed.is_empty(), "the stand-in accepted every body: {failed:#?}");
        let first = &got[0].body[0];
        assert_eq!(first["labels"]["alertname"], "irreversible_executions");
        assert_eq!(first["labels"]["severity"], "page");
        assert_eq!(first["labels"]["flightdeck_alert"], id.as_str());
        assert_eq!(first["generatorURL"], format!("https://fd.example/alerts/{id}"));
        let at =
            |r: &Received, key: &str| chrono::DateTime::parse_from_rfc3339(r.body[0][key].as_str().unwrap()).unwrap();
        let sent = chrono::Utc::now();
        assert!(at(&got[0], "endsAt") > sent + chrono::Duration::minutes(3), "firing: endsAt ahead of now");
        assert_eq!(at(&got[0], "startsAt"), at(&got[2], "startsAt"), "one alert throughout");
        let resolved = alerts::get(db, &id).await.unwrap().unwrap().resolved_at.unwrap();
        assert_eq!(at(&got[2], "endsAt").timestamp_millis(), resolved.timestamp_millis(), "ended at its resolution");
        t.cleanup().await;
    }
}

#[tokio::test]
async fn without_routes_info_alerts_notify_nobody_and_a_refused_pagerduty_event_is_kept_as_failed() {
    for t in TestDb::each_backend().await {
        let db = &t.db;
        let rx = Receiver::start().await;
        let n = Notifications {
            targets: vec![WebhookTarget {
                // One character short: PagerDuty (and its stand-in) refuse the event.
                routing_key: Some(ROUTING_KEY[1..].into()),
                ..rx.target("pagerduty", "/pagerduty/v2/enqueue", WebhookFormat::Pagerduty)
            }],
            routes: Vec::new(),
        };
        tune(db, AlertRule::IrreversibleExecutions, |s| {
            s.threshold = 2.0;
            s.severity = Severity::Info;
        })
        .await;
        let email = ("send_email", "irreversible", "ok");
        run(db, 1, "run-burst", "completed", MINUTE_MS, &[email, email, email]).await;
        let now = now_ms();
        assert_eq!(evaluate_once(db, &n, now, 0).await.unwrap().fired.len(), 1);
        assert_eq!(webhooks::count(db, status::PENDING).await.unwrap(), 0, "an info alert is shown, not sent");

        tune(db, AlertRule::FailedToRecover, |s| s.threshold = 0.0).await; // ticket
        run(db, 2, "run-stuck", "error", MINUTE_MS, &[("lookup", "read", "error")]).await;
        assert_eq!(evaluate_once(db, &n, now, 0).await.unwrap().fired.len(), 1);
        deliver_all(db, &worker(db, &n)).await;
        let start = Instant::now();
        while webhooks::count(db, status::FAILED).await.unwrap() == 0 {
            worker(db, &n).run_once().await.unwrap();
            assert!(start.elapsed() < Duration::from_secs(10));
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let failed = webhooks::list(db, true, 10).await.unwrap();
        assert!(failed[0].last_error.as_deref().unwrap_or("").contains("routing_key"), "{failed:#?}");
        t.cleanup().await;
    }
}

/// Runs the `flightdeck` binary with `args` off the runtime (the receiver keeps serving).
async fn flightdeck(dir: &std::path::Path, args: &[&str]) -> (bool, String, String) {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_flightdeck"));
    cmd.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("FLIGHTDECK_DATA_DIR", dir)
        .env("RUST_LOG", "warn")
        .args(args);
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap()).await.unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

#[tokio::test]
async fn flightdeck_alerts_test_sends_a_signed_test_through_a_route_and_says_what_each_target_answered() {
    let dir = tempfile::tempdir().unwrap();
    let rx = Receiver::start().await;
    let (ok, secret, _) = flightdeck(dir.path(), &["webhook-secret"]).await;
    let secret = secret.trim().to_string();
    assert!(ok && SigningSecret::parse(&secret).is_ok(), "{secret}");
    let config = dir.path().join("flightdeck.toml");
    std::fs::write(
        &config,
        format!(
            "[[webhooks]]\nname = \"pd\"\nurl = \"http://{0}/pagerduty/v2/enqueue\"\nformat = \"pagerduty\"\n\
             routing_key = \"{ROUTING_KEY}\"\nsecret = \"{secret}\"\n\
             [[webhooks]]\nname = \"maintenance\"\nurl = \"http://{0}/down/hook\"\nformat = \"json\"\n\
             [[alert_routes]]\nname = \"oncall\"\nseverities = [\"page\"]\ntargets = [\"pd\"]\n\
             [[alert_routes]]\nname = \"broken\"\ntargets = [\"maintenance\"]\n",
            rx.addr
        ),
    )
    .unwrap();
    let config = config.to_str().unwrap();

    let (ok, out, err) = flightdeck(dir.path(), &["--config", config, "alerts", "test", "oncall"]).await;
    assert!(ok, "{out}\n{err}");
    assert!(err.contains("queued a test alert (test_") && err.contains("2 deliveries"), "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    assert!(lines[0].starts_with("pd") && lines[0].contains("alert.firing") && lines[0].contains("HTTP 202"), "{out}");
    assert!(lines[1].contains("alert.resolved") && lines[1].contains("delivered"), "{out}");
    let pd = at(&rx.received(), "/pagerduty/");
    let actions: Vec<&str> = pd.iter().map(|r| r.body["event_action"].as_str().unwrap()).collect();
    assert_eq!(actions, ["trigger", "resolve"]);
    assert!(pd[0].body["dedup_key"].as_str().unwrap().starts_with("flightdeck/test_"));
    assert!(pd[0].body["payload"]["summary"].as_str().unwrap().contains("nothing is wrong"), "{}", pd[0].body);
    let key = SigningSecret::parse(&secret).unwrap();
    for r in &pd {
        let [id, timestamp, signature] = &r.signed;
        key.verify(id, timestamp, signature, r.raw.as_bytes(), now_ms() / 1000).expect("signed");
    }

    verify_with_the_docs_snippet(&secret, &pd[0]);

    let (ok, out, err) = flightdeck(dir.path(), &["--config", config, "alerts", "test", "broken"]).await;
    assert!(!ok, "a target that refuses is a failure: {out}");
    assert!(out.contains("maintenance") && out.contains("HTTP 503"), "{out}");
    assert!(err.contains("not every target accepted the test"), "{err}");

    let (ok, _, err) = flightdeck(dir.path(), &["--config", config, "alerts", "test", "nope"]).await;
    assert!(!ok && err.contains("no alert route `nope` (routes: oncall, broken)"), "{err}");
}

/// The Python verification snippet in docs/on-call.md, run on a real delivery (and on the
/// same delivery with its body changed, which it must refuse).
fn verify_with_the_docs_snippet(secret: &str, delivery: &Received) {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/on-call.md")).unwrap();
    let snippet = doc.split("```python\n").nth(1).and_then(|rest| rest.split("```").next()).expect("the snippet");
    let [id, timestamp, signature] = &delivery.signed;
    let script = format!(
        "{snippet}\nimport json, sys\nh = json.loads(sys.argv[1])\nbody = sys.argv[2].encode()\n\
         verify(sys.argv[3], h, body)\ntry:\n    verify(sys.argv[3], h, body + b' ')\n    sys.exit('forged body accepted')\n\
         except ValueError:\n    print('ok')\n"
    );
    let headers = serde_json::json!({"webhook-id": id, "webhook-timestamp": timestamp, "webhook-signature": signature});
    let out = std::process::Command::new("python3")
        .args(["-c", &script, &headers.to_string(), &delivery.raw, secret])
        .output()
        .expect("python3 runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "ok");
}

#[tokio::test]
async fn a_silence_holds_notifications_back_marks_the_alert_and_when_ended_lets_it_page() {
    use domain::access::{Role, Scope};
    use reqwest::{Method, StatusCode};
    for t in TestDb::each_backend().await {
        let db = &t.db;
        let operator: &[Role] = &[Role::Operator, Role::Viewer];
        let live = common::live(&t, &[("olga", operator), ("victor", &[Role::Viewer])], &[Scope::Alerts]).await;
        let rx = Receiver::start().await;
        let n = Notifications {
            targets: vec![rx.target("on-call", "/ok/oncall", WebhookFormat::Json)],
            routes: Vec::new(),
        };

        // A deploy script silences irreversible executions of the agent it is about to restart.
        let bad = serde_json::json!({"rule": "irreversible_executions", "minutes": 60, "reason": " "});
        let (status, body) = live.api(Method::POST, "/api/v1/silences", Some(bad), &live.agent).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        assert!(body["error"]["message"].as_str().unwrap().contains("say why"), "{body}");
        let request = serde_json::json!({
            "rule": "irreversible_executions", "agent": "billing-bot", "minutes": 60, "reason": "restarting billing-bot"
        });
        let (status, silence) = live.api(Method::POST, "/api/v1/silences", Some(request), &live.agent).await;
        assert_eq!(status, StatusCode::CREATED, "{silence}");
        let silence_id = silence["id"].as_str().unwrap().to_string();

        tune(db, AlertRule::IrreversibleExecutions, |s| s.threshold = 2.0).await;
        let email = ("send_email", "irreversible", "ok");
        let start = ((now_ms() - MINUTE_MS) as u64) * 1_000_000;
        let mut root = span_at(
            1,
            1,
            None,
            "agent run",
            start,
            vec![kv("run.id", "run-b"), kv("gen_ai.agent.name", "billing-bot")],
        );
        root.end_time_unix_nano = start + 60_000_000;
        let mut spans = vec![root];
        for i in 0..3u8 {
            let attrs = vec![kv("tool.name", email.0), kv("tool.side_effect", email.1), kv("tool.outcome", email.2)];
            spans.push(span_at(1, 2 + i, Some(1), "tool send_email", start + (u64::from(i) + 1) * 2_000_000, attrs));
        }
        ingest(db, spans).await;
        let now = now_ms();
        let fired = evaluate_once(db, &n, now, 0).await.unwrap().fired;
        assert_eq!(fired.len(), 1, "it fires all the same, {}", t.backend());
        assert_eq!(fired[0].silenced_by.as_deref(), Some(silence_id.as_str()));
        assert_eq!(webhooks::count(db, status::PENDING).await.unwrap(), 0, "nobody is notified");

        // On the page: the alert, marked, and the silence with who and why.
        let olga = live.person("olga").await;
        let page = olga.page("/alerts").await;
        assert!(
            page.contains("Silenced: not notified (rule “Irreversible tool executions”, agent billing-bot"),
            "{page}"
        );
        assert!(page.contains("data-testid=\"end-silence\""));
        assert!(page.contains("data-testid=\"maintenance-form\""), "operators may add a maintenance window");
        let alert_page = olga.page(&format!("/alerts/{}", fired[0].id)).await;
        assert!(alert_page.contains("data-testid=\"silence-form\"") && alert_page.contains("value=\"billing-bot\""));
        let victor = live.person("victor").await;
        assert!(!victor.page(&format!("/alerts/{}", fired[0].id)).await.contains("silence-form"), "viewers cannot");
        let (status, _) = victor.call("end_silence", &[("id", &silence_id)]).await;
        assert_eq!(status, StatusCode::FORBIDDEN);

        // Ended early: the next evaluation finds it still breaching and pages.
        let (status, body) = olga.call("end_silence", &[("id", &silence_id)]).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let (status, body) = olga.call("end_silence", &[("id", &silence_id)]).await;
        assert_eq!(status, StatusCode::CONFLICT);
        assert!(body.contains("already ended by olga"), "{body}");
        evaluate_once(db, &n, now + 5_000, 0).await.unwrap();
        deliver_all(db, &worker(db, &n)).await;
        let got = rx.received();
        assert_eq!(got.len(), 1, "{got:#?}");
        assert_eq!(got[0].event, "alert.firing");
        assert!(alerts::get(db, &fired[0].id).await.unwrap().unwrap().silenced_by.is_none());
        let audit = store::audit::list(db, None, Some("silence_created"), 10).await.unwrap();
        assert_eq!(audit.entries[0].actor.as_deref(), Some("token:agent-7"), "{:?}", audit.entries);

        // An operator silences from the alert page's form too (blank parts match any).
        let (status, body) = olga
            .call(
                "create_silence",
                &[("rule", ""), ("agent", ""), ("tool", "send_email"), ("minutes", "60"), ("reason", "mail outage")],
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let (_, listed) = live.api(Method::GET, "/api/v1/silences", None, &live.agent).await;
        assert_eq!(listed[0]["tool"], "send_email", "{listed}");
        assert_eq!(listed[0]["created_by"], "olga");
        t.cleanup().await;
    }
}

#[tokio::test]
async fn a_silence_made_from_an_alert_matches_it_keeps_what_was_chosen_and_the_page_shows_the_timeline() {
    use domain::access::{Role, Scope};
    use reqwest::StatusCode;
    for t in TestDb::each_backend().await {
        let db = &t.db;
        let operator: &[Role] = &[Role::Operator, Role::Viewer];
        let live = common::live(&t, &[("olga", operator)], &[Scope::Alerts]).await;
        let rx = Receiver::start().await;
        let n = Notifications {
            targets: vec![
                rx.target("on-call", "/ok/oncall", WebhookFormat::Json),
                rx.target("old-pager", "/down/pager", WebhookFormat::Json),
            ],
            routes: Vec::new(),
        };
        irreversible_burst(db).await; // three executions, one run
        let now = now_ms();
        let fired = evaluate_once(db, &n, now, 0).await.unwrap().fired;
        let alert = &fired[0];
        assert!(alert.notified_at.is_some(), "{}", t.backend());
        deliver_all(db, &worker(db, &n)).await;

        let olga = live.person("olga").await;
        let path = format!("/alerts/{}", alert.id);
        let page = olga.page(&path).await.replace("<!>", "");
        // The count beside the list says what it counts: three executions, one run.
        assert!(page.contains("3 irreversible executions of any tool"), "{page}");
        assert!(page.contains("Behind it: 1 run"), "{page}");
        let timeline = &page[page.find("data-testid=\"alert-timeline\"").expect("a timeline")..];
        assert!(timeline.contains("Fired"), "{timeline}");
        assert!(timeline.contains("alert.firing to on-call: delivered at "), "{timeline}");
        assert!(timeline.contains("alert.firing to old-pager: failed after 3 attempts"), "{timeline}");
        assert!(timeline.contains("HTTP 503: 503 Service Unavailable down for maintenance"), "{timeline}");

        // One that would not match the alert it is made from is refused, saying why.
        let id = alert.id.as_str();
        let form = |tool: &'static str, minutes: &'static str| {
            vec![
                ("alert", id),
                ("rule", "irreversible_executions"),
                ("agent", ""),
                ("tool", tool),
                ("minutes", minutes),
                ("reason", "mail provider migration"),
            ]
        };
        let (status, body) = olga.call("create_silence", &form("wire_money", "1440")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        assert!(body.contains("would not match the alert it is made from"), "{body}");
        assert!(body.contains("not about the tool `wire_money` alone"), "{body}");
        // Without JavaScript the refused form comes back with what was chosen.
        let back = olga
            .http
            .post(format!("{}/fn/create_silence", live.base))
            .header("accept", "text/html")
            .header("sec-fetch-site", "same-origin")
            .header("referer", format!("{}{path}", live.base))
            .form(&form("wire_money", "1440"))
            .send()
            .await
            .unwrap();
        assert_eq!(back.url().path(), path, "back on the alert's page");
        let query = back.url().query().unwrap_or_default().to_string();
        assert!(
            query.contains("minutes=1440") && query.contains("tool=wire_money") && query.contains("__err="),
            "{query}"
        );
        let again = back.text().await.unwrap().replace("<!>", "");
        assert!(again.contains("not about the tool `wire_money` alone"), "the error shows: {again}");
        assert!(again.contains("<option value=\"1440\" selected"), "the chosen duration stays: {again}");
        assert!(again.contains("value=\"wire_money\""), "and the tool");
        assert!(again.contains(">mail provider migration</textarea>"), "and the reason");
        // A reload of that address shows them too.
        let reload = olga.page(&format!("{path}?minutes=1440&reason=x")).await;
        assert!(reload.contains("<option value=\"1440\" selected"), "{reload}");

        // Matching: made, kept for the chosen day, and the alert shows as silenced at once.
        let (status, body) = olga.call("create_silence", &form("", "1440")).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let made: serde_json::Value = serde_json::from_str(&body).unwrap();
        let ends = chrono::DateTime::parse_from_rfc3339(made["ends_at"].as_str().unwrap()).unwrap();
        let created = chrono::DateTime::parse_from_rfc3339(made["created_at"].as_str().unwrap()).unwrap();
        assert_eq!((ends - created).num_minutes(), 1440, "the chosen duration");
        let stored = alerts::get(db, id).await.unwrap().unwrap();
        assert_eq!(stored.silenced_by.as_deref(), made["id"].as_str());
        let page = olga.page(&path).await.replace("<!>", "");
        assert!(page.contains("Silenced: notified when it fired"), "{page}");
        assert!(page.contains("Silenced: further notifications held back by olga"), "{page}");

        // It had been notified, so its resolution is sent all the same (the incident closes).
        let before = rx.received().len();
        evaluate_once(db, &n, now + 11 * MINUTE_MS, 0).await.unwrap();
        deliver_all(db, &worker(db, &n)).await;
        let resolved: Vec<String> = rx.received()[before..].iter().map(|r| r.event.clone()).collect();
        assert!(resolved.contains(&"alert.resolved".to_string()), "{resolved:?}");
        let page = olga.page(&path).await.replace("<!>", "");
        assert!(page.contains("alert.resolved to on-call: delivered"), "{page}");
        t.cleanup().await;
    }
}

#[tokio::test]
async fn a_long_list_behind_an_alert_says_how_many_there_were() {
    for t in TestDb::each_backend().await {
        let db = &t.db;
        tune(db, AlertRule::IrreversibleExecutions, |s| s.threshold = 2.0).await;
        let email = ("send_email", "irreversible", "ok");
        for i in 0..60u8 {
            run(db, 100 + i, &format!("run-{i:02}"), "completed", MINUTE_MS, &[email]).await;
        }
        let fired = evaluate_once(db, &Notifications::default(), now_ms(), 0).await.unwrap().fired;
        let alert = &fired[0];
        assert_eq!((alert.value, alert.items.len(), alert.items_total), (60.0, 50, Some(60)), "{}", t.backend());
        assert_eq!(domain::alerts::behind_it(&alert.items, alert.items_total), "the first 50 of 60: 50 runs");
        t.cleanup().await;
    }
}

#[tokio::test]
async fn a_deploy_script_ends_the_silence_it_created_and_the_alert_pages_again() {
    use domain::access::Scope;
    use reqwest::{Method, StatusCode};
    for t in TestDb::each_backend().await {
        let db = &t.db;
        let live = common::live(&t, &[], &[Scope::Alerts]).await;
        let rx = Receiver::start().await;
        let n =
            Notifications { targets: vec![rx.target("on-call", "/ok/oncall", WebhookFormat::Json)], routes: vec![] };
        let request = serde_json::json!({"rule": "irreversible_executions", "minutes": 120, "reason": "deploying"});
        let (status, silence) = live.api(Method::POST, "/api/v1/silences", Some(request), &live.agent).await;
        assert_eq!(status, StatusCode::CREATED, "{silence}");
        let id = silence["id"].as_str().unwrap().to_string();
        irreversible_burst(db).await;
        let now = now_ms();
        let fired = evaluate_once(db, &n, now, 0).await.unwrap().fired;
        assert_eq!(fired[0].silenced_by.as_deref(), Some(id.as_str()), "{}", t.backend());

        let (status, got) = live.api(Method::GET, &format!("/api/v1/silences/{id}"), None, &live.agent).await;
        assert_eq!((status, got["reason"].as_str()), (StatusCode::OK, Some("deploying")), "{got}");
        let (status, ended) = live.api(Method::DELETE, &format!("/api/v1/silences/{id}"), None, &live.agent).await;
        assert_eq!(status, StatusCode::OK, "{ended}");
        assert_eq!(ended["ended_by"], "token:agent-7", "{ended}");
        // Ending it again changes nothing and is no error: a script may retry.
        let (status, again) = live.api(Method::DELETE, &format!("/api/v1/silences/{id}"), None, &live.agent).await;
        assert_eq!((status, &again), (StatusCode::OK, &ended));
        let (status, body) = live.api(Method::DELETE, "/api/v1/silences/sil_nope", None, &live.agent).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
        let audit = store::audit::list(db, None, Some("silence_ended"), 10).await.unwrap().entries;
        assert_eq!(audit.len(), 1, "ended once: {audit:?}");
        assert_eq!((audit[0].actor.as_deref(), audit[0].target.as_deref()), (Some("token:agent-7"), Some(id.as_str())));
        assert!(audit[0].source.is_some(), "from the script's address");

        // The next evaluation finds the alert still breaching and pages.
        evaluate_once(db, &n, now + 5_000, 0).await.unwrap();
        deliver_all(db, &worker(db, &n)).await;
        let got = rx.received();
        assert_eq!(got.iter().map(|r| r.event.as_str()).collect::<Vec<_>>(), ["alert.firing"], "{got:#?}");
        let token = common::token(db, "reader", &[Scope::Read]).await;
        let (status, _) = live.api(Method::DELETE, &format!("/api/v1/silences/{id}"), None, &token).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "scope alerts");
        t.cleanup().await;
    }
}

#[tokio::test]
async fn an_alert_shows_the_thresholds_that_fired_it_after_they_change() {
    use domain::access::{Role, Scope};
    for t in TestDb::each_backend().await {
        let db = &t.db;
        let operator: &[Role] = &[Role::Operator, Role::Viewer];
        let live = common::live(&t, &[("olga", operator)], &[Scope::Read]).await;
        tune(db, AlertRule::IrreversibleExecutions, |s| s.threshold = 5.0).await; // version 1
        irreversible_burst(db).await; // version 2: more than 2
        assert_eq!(alerts::current_version(db, AlertRule::IrreversibleExecutions).await.unwrap(), 2);
        let fired = evaluate_once(db, &Notifications::default(), now_ms(), 0).await.unwrap().fired;
        assert_eq!(fired[0].rule_version, Some(2), "{}", t.backend());
        tune(db, AlertRule::IrreversibleExecutions, |s| s.threshold = 50.0).await; // version 3

        let olga = live.person("olga").await;
        let page = olga.page(&format!("/alerts/{}", fired[0].id)).await;
        assert!(page.contains("Fired under version 2, saved by test at "), "{page}");
        assert!(page.contains("more than 2 irreversible executions in 10 min"), "{page}");
        assert!(page.contains("version 3 is in force now"), "{page}");
        let (kept, by, _) = alerts::settings_version(db, AlertRule::IrreversibleExecutions, 1).await.unwrap().unwrap();
        assert_eq!((kept.threshold, by.as_deref()), (5.0, Some("test")), "every version is kept");

        // A rule never changed fires under the defaults (version 0).
        let start = ((now_ms() - MINUTE_MS) as u64) * 1_000_000;
        let root = span_at(3, 1, None, "agent run", start, vec![kv("run.id", "run-forged")]);
        let attrs = vec![
            kv("tool.name", "wire_money"),
            kv("tool.side_effect", "irreversible"),
            kv("tool.outcome", "ok"),
            kv("approval.id", "apr_forged"),
        ];
        ingest(db, vec![root, span_at(3, 2, Some(1), "tool wire_money", start + 2_000_000, attrs)]).await;
        let fired = evaluate_once(db, &Notifications::default(), now_ms(), 0).await.unwrap().fired;
        let forged = fired.iter().find(|a| a.rule == AlertRule::ApprovalViolation).expect("the violation fires");
        assert_eq!(forged.rule_version, Some(0));
        let page = olga.page(&format!("/alerts/{}", forged.id)).await;
        assert!(page.contains("Fired under the defaults of this rule"), "{page}");
        t.cleanup().await;
    }
}

#[tokio::test]
async fn a_maintenance_window_silences_only_inside_its_hours() {
    use chrono::{Datelike, Timelike};
    use domain::access::{Role, Scope};
    use reqwest::{Method, StatusCode};
    for t in TestDb::each_backend().await {
        let db = &t.db;
        let operator: &[Role] = &[Role::Operator, Role::Viewer];
        let live = common::live(&t, &[("olga", operator)], &[Scope::Alerts]).await;
        let rx = Receiver::start().await;
        let n = Notifications {
            targets: vec![rx.target("on-call", "/ok/oncall", WebhookFormat::Json)],
            routes: Vec::new(),
        };
        let now = chrono::Utc::now();
        let minute = i64::from(now.hour() * 60 + now.minute());
        let at = |m: i64| {
            let m = m.rem_euclid(24 * 60);
            format!("{:02}:{:02}", m / 60, m % 60)
        };
        let today = now.weekday().to_string().to_ascii_lowercase();
        // With yesterday too, a window around now also covers the first hour after midnight.
        let yesterday = now.weekday().pred().to_string().to_ascii_lowercase();
        // Later today (and so not now): created through the page's form by an operator.
        let olga = live.person("olga").await;
        let later = [
            ("rule", "irreversible_executions"),
            (today.as_str(), "on"),
            ("from", &at(minute + 120)),
            ("to", &at(minute + 180)),
            ("weeks", "2"),
            ("reason", "nightly batch"),
        ];
        let (status, body) = olga.call("create_maintenance_window", &later).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let (status, body) = olga
            .call(
                "create_maintenance_window",
                &[("rule", "deduped_spike"), ("from", "01:00"), ("to", "02:00"), ("weeks", "1"), ("reason", "x")],
            )
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "no day ticked");
        assert!(body.contains("at least one day"), "{body}");

        irreversible_burst(db).await;
        let fired = evaluate_once(db, &n, now_ms(), 0).await.unwrap().fired;
        assert_eq!(fired[0].silenced_by, None, "outside its hours: notified, {}", t.backend());
        let (_, listed) = live.api(Method::GET, "/api/v1/silences", None, &live.agent).await;
        assert!(listed[0]["schedule"]["days"][0].is_string(), "{listed}");

        // Around now, through the API: the next alert of the rule is held back.
        let request = serde_json::json!({
            "rule": "failed_to_recover", "minutes": 7 * 24 * 60, "reason": "restart window",
            "schedule": {"days": [yesterday, today], "from_minute": (minute - 60).rem_euclid(1440), "to_minute": (minute + 60).rem_euclid(1440)}
        });
        let (status, window) = live.api(Method::POST, "/api/v1/silences", Some(request), &live.agent).await;
        assert_eq!(status, StatusCode::CREATED, "{window}");
        tune(db, AlertRule::FailedToRecover, |s| s.threshold = 0.0).await;
        run(db, 2, "run-stuck", "error", MINUTE_MS, &[("lookup", "read", "error")]).await;
        let fired = evaluate_once(db, &n, now_ms(), 0).await.unwrap().fired;
        assert_eq!(fired.len(), 1);
        assert_eq!(fired[0].silenced_by.as_deref(), window["id"].as_str(), "inside its hours: held back");
        deliver_all(db, &worker(db, &n)).await;
        let events: Vec<String> =
            rx.received().iter().map(|r| r.body["data"]["rule"].as_str().unwrap().to_string()).collect();
        assert_eq!(events, ["irreversible_executions"]);
        t.cleanup().await;
    }
}
