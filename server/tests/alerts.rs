//! Alerts end to end, on SQLite and on PostgreSQL: spans that break a rule are ingested,
//! the evaluator fires the alert, the webhook reaches a local receiver, an operator
//! acknowledges it on the page, and it resolves after the hold time. Every rule reads its
//! window from each backend; admins alone change the rules; and two evaluators on one
//! PostgreSQL never both evaluate, with the survivor taking over from a dead leader.

mod common;

use app::services::alert_evaluation::evaluate_once;
use common::receiver::Receiver;
use common::spans::{ingest, kv, kv_f64, span_at};
use domain::access::{Role, Scope};
use domain::alerts::settings::RuleSettings;
use domain::alerts::{AlertRule, AlertState, ItemKind};
use domain::notify::{Notifications, RetryPolicy, WebhookFormat};
use flightdeck::alerts::{Evaluator, EvaluatorSettings, Tick};
use flightdeck::webhooks::{Worker, WorkerSettings};
use reqwest::StatusCode;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use store::testing::TestDb;
use store::{alerts, now_ms, Db};

const MINUTE_MS: i64 = 60_000;

fn ns(ms: i64) -> u64 {
    (ms as u64) * 1_000_000
}

/// A run in its own trace: a root span with the run's id, reason and cost, started at
/// `start_ms`, and `tools` tool spans (name, side effect, outcome) shortly after.
fn run(
    trace: u8,
    run_id: &str,
    reason: &str,
    cost: f64,
    start_ms: i64,
    tools: &[(&str, &str, &str)],
) -> Vec<opentelemetry_proto::tonic::trace::v1::Span> {
    let mut root = span_at(
        trace,
        1,
        None,
        "agent run",
        ns(start_ms),
        vec![kv("run.id", run_id), kv("run.terminal_reason", reason), kv_f64("budget.cost_spent", cost)],
    );
    root.end_time_unix_nano = ns(start_ms) + 60_000_000;
    let mut spans = vec![root];
    for (i, (tool, effect, outcome)) in tools.iter().enumerate() {
        let at = ns(start_ms) + (i as u64 + 1) * 2_000_000;
        spans.push(span_at(
            trace,
            2 + i as u8,
            Some(1),
            &format!("tool {tool}"),
            at,
            vec![
                kv("tool.name", tool),
                kv("tool.side_effect", effect),
                kv("tool.outcome", outcome),
                kv("tool.idempotency_key", &format!("{run_id}-{i}")),
            ],
        ));
    }
    spans
}

async fn tune(db: &Db, rule: AlertRule, change: impl FnOnce(&mut RuleSettings)) {
    let mut s = RuleSettings::default_for(rule);
    change(&mut s);
    s.validate(rule).unwrap();
    alerts::save_settings(db, rule, &s, "test").await.unwrap();
}

fn worker(db: &Db) -> Worker {
    Worker::new(
        db.clone(),
        WorkerSettings {
            public_url: "https://fd.example".into(),
            retry: RetryPolicy {
                base: Duration::from_millis(5),
                max_delay: Duration::from_millis(20),
                max_attempts: 3,
            },
            timeout: Duration::from_secs(5),
            poll_interval: Duration::from_millis(10),
            batch: 16,
            targets: Vec::new(),
        },
    )
    .unwrap()
}

/// Sends queued webhooks until the receiver has `n` requests (or fails after 10 s).
async fn deliver_until(worker: &Worker, rx: &Receiver, n: usize) {
    let start = Instant::now();
    while rx.received().len() < n {
        worker.run_once().await.unwrap();
        assert!(start.elapsed() < Duration::from_secs(10), "only {} deliveries arrived", rx.received().len());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn an_alert_fires_notifies_is_acknowledged_and_resolves() {
    for t in TestDb::each_backend().await {
        let operator: &[Role] = &[Role::Operator, Role::Viewer];
        let live = common::live(
            &t,
            &[("olga", operator), ("victor", &[Role::Viewer]), ("alice", &[Role::Admin, Role::Viewer])],
            &[Scope::Read],
        )
        .await;
        let rx = Receiver::start().await;
        let targets = Arc::new(Notifications {
            targets: vec![rx.target("on-call", "/ok/alerts", WebhookFormat::Json)],
            routes: Vec::new(),
        });

        // An admin lowers the irreversible limit to "more than 2 in 10 minutes".
        let alice = live.person("alice").await;
        let (status, body) = alice
            .call(
                "save_alert_rule",
                &[
                    ("rule", "irreversible_executions"),
                    ("enabled", "on"),
                    ("severity", "page"),
                    ("window_seconds", "600"),
                    ("threshold", "2"),
                    ("per_tool", ""),
                ],
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");

        let now = now_ms();
        let email = ("send_email", "irreversible", "ok");
        ingest(&t.db, run(1, "run-two", "completed", 0.1, now - 2 * MINUTE_MS, &[email, email])).await;
        let mut evaluator = Evaluator::new(
            t.db.clone(),
            targets.clone(),
            EvaluatorSettings { interval: Duration::from_millis(50), hold: Duration::from_secs(900) },
            "test-instance".into(),
        );
        assert_eq!(evaluator.tick().await, Tick::Evaluated);
        assert!(alerts::list(&t.db, false, 10).await.unwrap().is_empty(), "2 executions are within the limit");

        ingest(&t.db, run(2, "run-three", "completed", 0.1, now - MINUTE_MS, &[email, ("lookup", "read", "ok")])).await;
        assert_eq!(evaluator.tick().await, Tick::Evaluated);
        let open = alerts::list(&t.db, false, 10).await.unwrap();
        assert_eq!(open.len(), 1, "{open:#?}");
        let alert = &open[0];
        assert_eq!(
            (alert.rule, alert.state, alert.value, alert.threshold),
            (AlertRule::IrreversibleExecutions, AlertState::Firing, 3.0, 2.0)
        );
        let runs: Vec<&str> = alert.items.iter().map(|i| i.id.as_str()).collect();
        assert_eq!(runs, ["run-two", "run-three"], "the runs behind it, most executions first");
        assert_eq!(alerts::last_evaluation(&t.db).await.unwrap().unwrap().0, "test-instance");

        // Evaluating again refreshes the same alert and notifies nobody twice.
        assert_eq!(evaluator.tick().await, Tick::Evaluated);
        assert_eq!(alerts::list(&t.db, false, 10).await.unwrap().len(), 1);
        let worker = worker(&t.db);
        deliver_until(&worker, &rx, 1).await;
        worker.run_once().await.unwrap();
        let got = rx.received();
        assert_eq!(got.len(), 1, "{got:#?}");
        assert_eq!(got[0].event, "alert.firing");
        assert_eq!(got[0].body["url"], format!("https://fd.example/alerts/{}", alert.id));
        assert!(got[0].body["title"].as_str().unwrap().contains("Irreversible tool executions"), "{}", got[0].body);
        assert_eq!(got[0].body["data"]["value"], 3.0);

        // On the page: the figure against the threshold, the runs, and who may acknowledge.
        let olga = live.person("olga").await;
        let page = olga.page("/alerts").await;
        assert!(page.contains("3 irreversible executions of any tool in 10 min (limit 2)"), "{page}");
        assert!(page.contains("href=\"/runs/run-two\""), "links to the run");
        assert!(page.contains("data-testid=\"acknowledge\""));
        let victor = live.person("victor").await;
        assert!(victor.page("/alerts").await.contains("Acknowledging needs the operator role."));
        let (status, _) = victor.call("acknowledge_alert", &[("id", &alert.id)]).await;
        assert_eq!(status, StatusCode::FORBIDDEN);

        let (status, body) = olga.call("acknowledge_alert", &[("id", &alert.id)]).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let (status, body) = olga.call("acknowledge_alert", &[("id", &alert.id)]).await;
        assert_eq!(status, StatusCode::CONFLICT);
        assert!(body.contains("already acknowledged by olga"), "{body}");
        let acked = alerts::get(&t.db, &alert.id).await.unwrap().unwrap();
        assert_eq!((acked.state, acked.acknowledged_by.as_deref()), (AlertState::Acknowledged, Some("olga")));
        let audit = store::audit::list(&t.db, None, Some("alert_acknowledged"), 10).await.unwrap();
        assert_eq!(audit.entries.len(), 1);

        // The executions leave the window; the alert holds for 15 minutes, then resolves.
        let hold = 15 * MINUTE_MS;
        let quiet = evaluate_once(&t.db, &targets, now + 11 * MINUTE_MS, hold).await.unwrap();
        assert!(quiet.resolved.is_empty(), "still within the hold time");
        let later = evaluate_once(&t.db, &targets, now + 20 * MINUTE_MS, hold).await.unwrap();
        assert_eq!(later.resolved.len(), 1);
        assert_eq!(later.resolved[0].id, alert.id);
        assert!(alerts::list(&t.db, false, 10).await.unwrap().is_empty());
        deliver_until(&worker, &rx, 2).await;
        assert_eq!(rx.received()[1].event, "alert.resolved");
        let history = olga.page("/alerts?view=history").await;
        assert!(history.contains(&alert.id) && history.contains("Acknowledged by olga"), "{history}");
        t.cleanup().await;
    }
}

#[tokio::test]
async fn every_rule_reads_its_window_and_fires() {
    for t in TestDb::each_backend().await {
        let db = &t.db;
        let now = now_ms();
        tune(db, AlertRule::IrreversibleExecutions, |s| s.threshold = 2.0).await;
        tune(db, AlertRule::DedupedSpike, |s| s.min_samples = 1).await;
        tune(db, AlertRule::EscalationBacklog, |s| s.threshold = 1.0).await;
        tune(db, AlertRule::CostPerRunJump, |s| s.min_samples = 1).await;
        tune(db, AlertRule::FailedToRecover, |s| s.threshold = 0.0).await;

        let email = ("send_email", "irreversible", "ok");
        // Rule 1: three irreversible executions.
        ingest(db, run(1, "r-irreversible", "completed", 1.0, now - MINUTE_MS, &[email, email, email])).await;
        // Rule 3: a deduplicated call among the window's seven tool calls.
        ingest(
            db,
            run(
                2,
                "r-deduped",
                "completed",
                0.0,
                now - MINUTE_MS,
                &[("charge", "write", "deduped"), ("charge", "write", "ok")],
            ),
        )
        .await;
        // Rule 5: a cheap run in the baseline, two hours ago.
        ingest(db, run(3, "r-cheap", "completed", 0.01, now - 120 * MINUTE_MS, &[])).await;
        // Rule 6: a run that ended in error after a tool failed.
        ingest(db, run(4, "r-failed", "error", 0.0, now - MINUTE_MS, &[("fetch_invoice", "read", "error")])).await;
        // Rule 4: a run that escalated (opens an escalation from the traces).
        ingest(db, run(5, "r-escalated", "escalated", 0.0, now - MINUTE_MS, &[])).await;
        // Rule 2: a tool call naming an approval that does not exist.
        let mut rogue = run(6, "r-rogue", "completed", 0.0, now - MINUTE_MS, &[("wire_money", "write", "ok")]);
        rogue[1].attributes.push(kv("approval.id", "apr_forged"));
        ingest(db, rogue).await;
        // Rule 7: a guarded call that started 11 minutes ago and never reported.
        let call = domain::ledger::request::ValidCall {
            run_id: "r-silent".into(),
            step_index: 1,
            tool: "charge_card".into(),
            arguments: serde_json::json!({"amount": 5}),
            idempotency_key: None,
        };
        let rule = domain::ledger::answer::CallRule::default();
        store::ledger::ask(db, &call, "k-silent", &call.arguments, &rule, None).await.unwrap();
        let backdate = store::sql::Sql::with_args(
            "UPDATE call_ledger SET started_at = $1 WHERE idempotency_key = 'k-silent'",
            vec![(now - 11 * MINUTE_MS).into()],
        );
        db.ledger().execute(backdate).await.unwrap();
        // Rule 8: one failed replay test of one (with a minimum of 1 result).
        tune(db, AlertRule::ReplayPassRate, |s| s.min_samples = 1).await;
        let result = domain::replay_results::ValidResult {
            fixture: "refund-1".into(),
            run_id: Some("r-failed".into()),
            agent: Some("billing-bot".into()),
            passed: false,
            details: None,
        };
        store::replay_results::record(db, &result).await.unwrap();

        let report = evaluate_once(db, &Default::default(), now + 5_000, 60_000).await.unwrap();
        assert!(report.failed_rules.is_empty(), "{:?}", report.failed_rules);
        let mut fired: Vec<AlertRule> = report.fired.iter().map(|a| a.rule).collect();
        fired.sort();
        assert_eq!(fired, AlertRule::ALL.to_vec(), "{:#?}", report.fired);
        let by_rule = |rule| report.fired.iter().find(|a| a.rule == rule).unwrap();
        assert_eq!(by_rule(AlertRule::IrreversibleExecutions).items[0].id, "r-irreversible");
        let violation = by_rule(AlertRule::ApprovalViolation);
        assert_eq!((violation.items[0].kind, violation.items[0].id.as_str()), (ItemKind::Run, "r-rogue"));
        assert_eq!(violation.items[0].note, "wire_money ran with unknown approval apr_forged");
        assert_eq!(violation.items.len(), 1, "an approval that does not exist is not linked");
        let deduped = by_rule(AlertRule::DedupedSpike);
        assert!((deduped.value - 100.0 / 7.0).abs() < 1e-9, "1 of 7 calls: {}", deduped.value);
        assert_eq!(deduped.items[0].id, "r-deduped");
        let backlog = by_rule(AlertRule::EscalationBacklog);
        assert_eq!(backlog.items[0].kind, ItemKind::Escalation);
        assert!(backlog.items[0].note.contains("r-escalated"), "{:?}", backlog.items);
        let cost = by_rule(AlertRule::CostPerRunJump);
        assert_eq!((cost.value, cost.items[0].id.as_str()), (1.0, "r-irreversible"));
        let failed = by_rule(AlertRule::FailedToRecover);
        assert_eq!(failed.items[0].id, "r-failed");
        assert!(failed.items[0].note.contains("fetch_invoice"));

        // Switching a rule off resolves its alert at the next evaluation.
        tune(db, AlertRule::CostPerRunJump, |s| s.enabled = false).await;
        let report = evaluate_once(db, &Default::default(), now + 6_000, 60_000).await.unwrap();
        assert_eq!(report.resolved.iter().map(|a| a.rule).collect::<Vec<_>>(), [AlertRule::CostPerRunJump]);
        assert!(report.fired.is_empty(), "the others were refreshed, not fired again");
        t.cleanup().await;
    }
}

#[tokio::test]
async fn only_admins_change_rules_and_bad_settings_are_refused() {
    for t in TestDb::each_backend().await {
        let live = common::live(
            &t,
            &[("alice", &[Role::Admin, Role::Viewer]), ("olga", &[Role::Operator, Role::Viewer])],
            &[Scope::Read],
        )
        .await;
        let form = [
            ("rule", "deduped_spike"),
            ("enabled", "on"),
            ("severity", "ticket"),
            ("window_seconds", "900"),
            ("threshold", "5"),
            ("baseline_seconds", "86400"),
            ("factor", "1"),
            ("min_samples", "20"),
        ];
        let (status, _) = live.person("olga").await.call("save_alert_rule", &form).await;
        assert_eq!(status, StatusCode::FORBIDDEN);
        let alice = live.person("alice").await;
        let (status, body) = alice.call("save_alert_rule", &form).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(body.contains("factor must be more than 1"), "{body}");
        let (status, body) = alice
            .call(
                "save_alert_rule",
                &[("rule", "irreversible_executions"), ("severity", "page"), ("per_tool", "delete_account: 2")],
            )
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(body.contains("`delete_account: 2` is not"), "{body}");
        assert_eq!(
            alerts::settings(&t.db).await.unwrap(),
            AlertRule::ALL.iter().map(|r| (*r, RuleSettings::default_for(*r))).collect::<Vec<_>>(),
            "nothing changed"
        );

        let (status, body) = alice
            .call(
                "save_alert_rule",
                &[
                    ("rule", "irreversible_executions"),
                    ("severity", "page"),
                    ("window_seconds", "300"),
                    ("threshold", "5"),
                    ("per_tool", "delete_account = 2\n"),
                ],
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let saved = alerts::settings(&t.db)
            .await
            .unwrap()
            .into_iter()
            .find(|(r, _)| *r == AlertRule::IrreversibleExecutions)
            .unwrap()
            .1;
        assert!(!saved.enabled, "an unticked checkbox switches the rule off");
        assert_eq!((saved.window_seconds, saved.threshold, saved.per_tool.len()), (300, 5.0, 1));
        let audit = store::audit::list(&t.db, None, Some("alert_rule_saved"), 10).await.unwrap();
        assert_eq!(audit.entries.len(), 1);
        let detail = audit.entries[0].detail.clone().unwrap();
        assert!(detail.contains("\"before\"") && detail.contains("delete_account"), "{detail}");
        let page = alice.page("/admin/alerts").await;
        assert!(page.contains("delete_account = 2"), "the form shows the saved limit");

        // The replay rule's minimum number of results is editable too.
        let replay = |min: &'static str| {
            [
                ("rule", "replay_pass_rate"),
                ("enabled", "on"),
                ("severity", "ticket"),
                ("window_seconds", "86400"),
                ("threshold", "95"),
                ("min_samples", min),
            ]
        };
        let (status, body) = alice.call("save_alert_rule", &replay("0")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(body.contains("minimum samples must be at least 1"), "{body}");
        let (status, body) = alice.call("save_alert_rule", &replay("3")).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let settings = alerts::settings(&t.db).await.unwrap();
        let saved = &settings.iter().find(|(r, _)| *r == AlertRule::ReplayPassRate).unwrap().1;
        assert_eq!((saved.threshold, saved.min_samples), (95.0, 3));
        t.cleanup().await;
    }
}

#[tokio::test]
async fn two_evaluators_on_one_postgres_never_both_evaluate() {
    let Some(t) = TestDb::postgres().await else { return };
    let settings = EvaluatorSettings { interval: Duration::from_millis(20), hold: Duration::from_secs(60) };
    let mut a = Evaluator::new(Db::connect(&t.url).await.unwrap(), Arc::default(), settings, "a".into());
    let mut b = Evaluator::new(Db::connect(&t.url).await.unwrap(), Arc::default(), settings, "b".into());
    let (count_a, count_b) = (a.evaluations(), b.evaluations());
    for _ in 0..20 {
        let (ta, tb) = tokio::join!(a.tick(), b.tick());
        assert!(!(ta == Tick::Evaluated && tb == Tick::Evaluated), "both evaluated in one round");
    }
    let (na, nb) = (count_a.load(Ordering::SeqCst), count_b.load(Ordering::SeqCst));
    assert!(na + nb == 20 && (na == 0 || nb == 0), "one leader evaluated every round: a {na}, b {nb}");
    let (leader, mut follower, follower_count, follower_name) =
        if na > 0 { (a, b, count_b, "b") } else { (b, a, count_a, "a") };

    // The leader dies: its database session ends, and with it the lock.
    drop(leader);
    let start = Instant::now();
    loop {
        if follower.tick().await == Tick::Evaluated {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(15), "the follower never took over");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(follower_count.load(Ordering::SeqCst) >= 1);
    assert_eq!(alerts::last_evaluation(&t.db).await.unwrap().unwrap().0, follower_name);
    t.cleanup().await;
}
