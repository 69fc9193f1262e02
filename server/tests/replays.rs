//! Regression-test results from replay fixtures through the real API, on SQLite and
//! PostgreSQL: recorded with the agent named or taken from the run, redacted, refused
//! when they say too little, and charted per agent on /trends.

mod common;

use common::spans::{ingest, kv, span_at};
use domain::access::{Role, Scope};
use reqwest::{Method, StatusCode};
use serde_json::json;
use store::testing::TestDb;

#[tokio::test]
async fn results_are_recorded_redacted_and_charted_per_agent() {
    for t in TestDb::each_backend().await {
        let s = common::live(&t, &[("victor", &[Role::Viewer])], &[Scope::Replays]).await;
        let start = ((store::now_ms() - 60_000) as u64) * 1_000_000;
        let root = span_at(
            1,
            1,
            None,
            "agent run",
            start,
            vec![kv("run.id", "run-7"), kv("gen_ai.agent.name", "billing-bot")],
        );
        ingest(&t.db, vec![root]).await;

        let post = |body: serde_json::Value| s.api(Method::POST, "/api/v1/replays/results", Some(body), &s.agent);
        let (status, r) = post(json!({"fixture": "refund-7", "run_id": "run-7", "passed": false,
                                      "details": {"diff": "expected 1 refund", "api_key": "sk-live-123"}}))
        .await;
        assert_eq!(status, StatusCode::CREATED, "{r}");
        assert_eq!(r["agent"], "billing-bot", "taken from the run, {}", t.backend());
        assert_eq!(r["details"]["api_key"], "[REDACTED]", "{r}");
        for passed in [true, true, true] {
            let (status, _) = post(json!({"fixture": "refund-8", "agent": "billing-bot", "passed": passed})).await;
            assert_eq!(status, StatusCode::CREATED);
        }
        post(json!({"fixture": "faq-1", "agent": "support-bot", "passed": true})).await;

        let (status, body) = post(json!({"fixture": "x", "passed": true})).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(body["error"]["message"].as_str().unwrap().contains("name the `agent`"), "{body}");
        let (status, body) = post(json!({"fixture": "x", "run_id": "nope", "passed": true})).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        let (status, _) = post(json!({"fixture": "x", "agent": "a", "passed": "yes"})).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        let reader = common::token(&t.db, "reader", &[Scope::Read]).await;
        let (status, _) = s.api(Method::POST, "/api/v1/replays/results", Some(json!({})), &reader).await;
        assert_eq!(status, StatusCode::FORBIDDEN);

        let now = store::now_ms();
        let window = domain::trends::Window::ending_at(domain::trends::Range::Day, now);
        let trends = domain::trends::compute(window, &store::trends::inputs(&t.db, &window).await.unwrap());
        let rates: Vec<(String, Option<f64>)> =
            trends.replay_pass_rate.iter().map(|s| (s.label.clone(), s.summary)).collect();
        assert_eq!(rates, [("billing-bot".into(), Some(75.0)), ("support-bot".into(), Some(100.0))]);
        // The alert input: billing-bot's 75% is below a 90% limit once 2 results suffice.
        let mut rule = domain::alerts::settings::RuleSettings::default_for(domain::alerts::AlertRule::ReplayPassRate);
        assert_eq!((rule.threshold, rule.min_samples, rule.severity), (90.0, 10, domain::alerts::Severity::Ticket));
        rule.min_samples = 2;
        store::alerts::save_settings(&t.db, domain::alerts::AlertRule::ReplayPassRate, &rule, "test").await.unwrap();
        let notifications = domain::notify::Notifications::default();
        let report = app::services::alert_evaluation::evaluate_once(&t.db, &notifications, now, 0).await.unwrap();
        let failing: Vec<&domain::alerts::Alert> =
            report.fired.iter().filter(|a| a.rule == domain::alerts::AlertRule::ReplayPassRate).collect();
        assert_eq!(failing.len(), 1, "{:#?}", report.fired);
        assert_eq!(failing[0].subject, "agent:billing-bot");
        assert!(
            failing[0].title.starts_with("billing-bot passed 3 of 4 replay tests in 1 d (75.0%"),
            "{}",
            failing[0].title
        );
        assert_eq!(failing[0].items[0].id, "run-7", "the failed fixture's run");
        let page = s.person("victor").await.page("/trends").await;
        assert!(page.contains("data-testid=\"chart-replays\"") && page.contains("billing-bot"), "{page}");
        t.cleanup().await;
    }
}
