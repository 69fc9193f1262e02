//! Guarded calls through the real API on SQLite and PostgreSQL: ask, run, report, and a
//! retry told `already_done` with the cached result; keys derived the article's way;
//! concurrent asks for one key through two servers, of which exactly one proceeds; a
//! silent attempt turning `outcome_unknown` with an escalation a person settles;
//! approval per call; and bad input refused with nothing changed.

mod common;

use common::{live, token, Live};
use domain::access::{Role, Scope};
use domain::canonical::SideEffect;
use domain::ledger::EntryState;
use domain::policy::ToolPolicy;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use std::time::Duration;
use store::testing::TestDb;
use store::{escalations, ledger, policies};

async fn server(t: &TestDb) -> Live {
    let approver: &[Role] = &[Role::Approver, Role::Viewer];
    let operator: &[Role] = &[Role::Operator, Role::Viewer];
    live(t, &[("alice", approver), ("olga", operator), ("victor", &[Role::Viewer])], &[Scope::Calls]).await
}

impl Live {
    async fn ask(&self, body: Value) -> (StatusCode, Value) {
        self.api(Method::POST, "/api/v1/calls", Some(body), &self.agent).await
    }

    async fn complete(&self, id: &str, body: Value) -> (StatusCode, Value) {
        self.api(Method::POST, &format!("/api/v1/calls/{id}/complete"), Some(body), &self.agent).await
    }
}

fn email(run: &str, step: i64, request_id: &str) -> Value {
    json!({
        "run_id": run, "step_index": step, "tool": "send_email",
        "arguments": {"to": "ana@example.com", "subject": "Invoice 77", "request_id": request_id}
    })
}

#[tokio::test]
async fn a_retried_call_is_told_already_done_with_the_cached_result() {
    for t in TestDb::each_backend().await {
        let s = server(&t).await;
        let (status, first) = s.ask(email("run-1", 3, "r-1")).await;
        assert_eq!(status, StatusCode::OK, "{first}");
        assert_eq!(first["answer"], "proceed");
        let id = first["call"]["id"].as_str().unwrap().to_string();
        let natural = first["call"]["natural_key"].as_str().unwrap().to_string();
        assert!(natural.starts_with("fd-"), "{natural}");
        let (status, done) = s
            .complete(&id, json!({"outcome": "ok", "external_id": "msg_42", "response": {"message_id": "msg_42"}}))
            .await;
        assert_eq!(status, StatusCode::OK, "{done}");
        assert_eq!(done["state"], "succeeded");

        // The retry carries a new request id (volatile): same key, not run again.
        let (_, retry) = s.ask(email("run-1", 3, "r-2")).await;
        assert_eq!(retry["answer"], "already_done", "{retry}");
        assert_eq!(retry["call"]["id"], id.as_str());
        assert_eq!(retry["call"]["external_id"], "msg_42");
        assert_eq!(retry["call"]["response"]["message_id"], "msg_42");
        assert_eq!(retry["call"]["deduped"], 1, "the dedupe is counted");
        // The same arguments in another step are another call (the key includes the step).
        let (_, other_step) = s.ask(email("run-1", 4, "r-3")).await;
        assert_eq!(other_step["answer"], "proceed");
        // Repeating the identical report changes nothing; a contradicting one is refused.
        let (status, _) = s.complete(&id, json!({"outcome": "ok", "external_id": "msg_42"})).await;
        assert_eq!(status, StatusCode::OK);
        let (status, body) = s.complete(&id, json!({"outcome": "error", "error": "bounced"})).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
        assert!(body["error"]["message"].as_str().unwrap().contains("already reported ok"), "{body}");
        // /metrics counts the ledger per tool: states and dedupes.
        let reader = token(&t.db, "prometheus", &[Scope::Read]).await;
        let metrics = s.http.get(format!("{}/metrics", s.base)).bearer_auth(reader).send().await.unwrap();
        let text = metrics.text().await.unwrap();
        assert!(text.contains(r#"flightdeck_ledger_calls{tool="send_email",state="succeeded"} 1"#), "{text}");
        assert!(text.contains(r#"flightdeck_ledger_calls{tool="send_email",state="started"} 1"#), "{text}");
        assert!(text.contains(r#"flightdeck_ledger_deduped{tool="send_email"} 1"#), "{text}");
        // The trends page charts the dedupe in the hour it happened.
        let (_, again) = s.ask(email("run-1", 3, "r-4")).await;
        assert_eq!(again["answer"], "already_done");
        let now = store::now_ms();
        let window = domain::trends::Window::ending_at(domain::trends::Range::Day, now);
        let inputs = store::trends::inputs(&t.db, &window).await.unwrap();
        assert_eq!(inputs.ledger_deduped, vec![(now - now % 3_600_000, 2)], "{}", t.backend());
        let trends = domain::trends::compute(window, &inputs);
        let stopped = trends.duplicates.iter().find(|s| s.key == "ledger_deduped").unwrap();
        assert_eq!(stopped.summary, Some(2.0));
        t.cleanup().await;
    }
}

#[tokio::test]
async fn a_failed_attempt_runs_again_and_a_run_wide_key_spans_steps() {
    for t in TestDb::each_backend().await {
        let s = server(&t).await;
        let refund = |step: i64| json!({"run_id": "run-2", "step_index": step, "tool": "refund_order", "arguments": {"order": 77, "now": step}});
        let (_, first) = s.ask(refund(1)).await;
        let id = first["call"]["id"].as_str().unwrap().to_string();
        s.complete(&id, json!({"outcome": "error", "error": "gateway timeout before sending"})).await;
        let (_, again) = s.ask(refund(1)).await;
        assert_eq!(again["answer"], "proceed", "a failure did nothing that must not be repeated");
        assert_eq!(again["call"]["attempts"], 2);
        s.complete(&id, json!({"outcome": "ok", "external_id": "rf_1"})).await;
        // Per step, step 2 would run it again; the policy makes the key run-wide.
        let policy = ToolPolicy { run_wide_key: true, ..ToolPolicy::class("refund_*", SideEffect::Irreversible) };
        policies::upsert(&t.db, &policy).await.unwrap();
        let (_, step_one) = s.ask(refund(1)).await;
        assert_eq!(step_one["answer"], "proceed", "a new key under the new rule");
        let id = step_one["call"]["id"].as_str().unwrap().to_string();
        s.complete(&id, json!({"outcome": "ok", "external_id": "rf_2"})).await;
        let (_, step_two) = s.ask(refund(2)).await;
        assert_eq!(step_two["answer"], "already_done", "the same refund in a later step: {step_two}");
        t.cleanup().await;
    }
}

#[tokio::test]
async fn of_concurrent_asks_through_two_servers_exactly_one_proceeds() {
    for t in TestDb::each_backend().await {
        let a = server(&t).await;
        // A second server on the same database, as a second instance would be.
        let b = Live {
            base: common::live(&t, &[], &[Scope::Calls]).await.base,
            agent: a.agent.clone(),
            http: a.http.clone(),
        };
        let body = json!({"run_id": "run-3", "step_index": 1, "tool": "create_ticket",
                          "arguments": {"title": "Refund 77"}, "idempotency_key": "ticket-77"});
        let mut asks = tokio::task::JoinSet::new();
        for i in 0..16 {
            let base = if i % 2 == 0 { a.base.clone() } else { b.base.clone() };
            let (http, agent, body) = (a.http.clone(), a.agent.clone(), body.clone());
            asks.spawn(async move {
                let r = http.post(format!("{base}/api/v1/calls")).bearer_auth(agent).json(&body).send().await.unwrap();
                (r.status(), r.json::<Value>().await.unwrap())
            });
        }
        let answers = asks.join_all().await;
        let proceed = answers.iter().filter(|(_, v)| v["answer"] == "proceed").count();
        let waiting = answers.iter().filter(|(_, v)| v["answer"] == "in_progress").count();
        assert!(answers.iter().all(|(s, _)| *s == StatusCode::OK), "{answers:?}");
        assert_eq!(proceed, 1, "exactly one proceeds on {}: {answers:?}", t.backend());
        assert_eq!(waiting, 15);
        t.cleanup().await;
    }
}

/// On SQLite the ledger is a file of its own (`Db::ledger`), so an agent's ask and report
/// never wait for the main file's writer: here a write transaction on the main database
/// stays open (as an ingest commit would) through a whole ask and report. With the ledger
/// in the main file both waited for it, and this took the writer's 10 s gate timeout.
#[tokio::test]
async fn a_guarded_call_is_answered_while_the_main_database_is_being_written() {
    for t in TestDb::each_backend().await {
        let s = server(&t).await;
        // The agent's token was used once already, so the request path writes nothing
        // to the main database (its last-use time is throttled).
        s.ask(email("run-warm", 1, "w")).await;
        let mut writer = store::sql::Tx::begin_bulk_write(&t.db).await.unwrap();
        writer
            .execute(store::sql::Sql::with_args(
                "UPDATE users SET roles = roles WHERE username = $1",
                vec!["alice".into()],
            ))
            .await
            .unwrap();
        let round_trip = async {
            let (status, asked) = s.ask(email("run-busy", 1, "b")).await;
            assert_eq!((status, asked["answer"].as_str()), (StatusCode::OK, Some("proceed")), "{asked}");
            let id = asked["call"]["id"].as_str().unwrap().to_string();
            let (status, done) = s.complete(&id, json!({"outcome": "ok", "external_id": "msg_busy"})).await;
            assert_eq!(status, StatusCode::OK, "{done}");
            assert_eq!(done["state"], "succeeded");
        };
        tokio::time::timeout(Duration::from_secs(3), round_trip)
            .await
            .unwrap_or_else(|_| panic!("the guarded call waited for the main database's writer on {}", t.backend()));
        writer.commit().await.unwrap();
        t.cleanup().await;
    }
}

#[tokio::test]
async fn a_silent_attempt_becomes_outcome_unknown_and_a_person_settles_it() {
    for t in TestDb::each_backend().await {
        let s = server(&t).await;
        let policy =
            ToolPolicy { call_timeout_seconds: Some(1), ..ToolPolicy::class("charge_card", SideEffect::Irreversible) };
        policies::upsert(&t.db, &policy).await.unwrap();
        let body = json!({"run_id": "run-4", "step_index": 2, "tool": "charge_card", "arguments": {"amount": 500}});
        let (_, first) = s.ask(body.clone()).await;
        assert_eq!(first["answer"], "proceed");
        let id = first["call"]["id"].as_str().unwrap().to_string();
        let (_, meanwhile) = s.ask(body.clone()).await;
        assert_eq!(meanwhile["answer"], "in_progress", "within the timeout");
        tokio::time::sleep(Duration::from_millis(1_200)).await;
        let (_, unknown) = s.ask(body.clone()).await;
        assert_eq!(unknown["answer"], "outcome_unknown", "{unknown}");
        let escalation = unknown["call"]["escalation_id"].as_str().expect("an escalation was opened").to_string();
        let e = escalations::get(&t.db, &escalation).await.unwrap().unwrap();
        assert_eq!(e.reason.as_str(), "outcome_unknown");
        let opened = escalations::timeline(&t.db, &escalation).await.unwrap();
        assert!(opened[0].detail.as_deref().unwrap_or_default().contains("execution ledger"), "{opened:?}");
        assert!(e.blocking_fact.unwrap().contains(unknown["call"]["natural_key"].as_str().unwrap()));
        let (_, still) = s.ask(body.clone()).await;
        assert_eq!(still["answer"], "outcome_unknown", "Flightdeck does not guess");
        assert_eq!(still["call"]["escalation_id"], escalation.as_str(), "one escalation");

        // The escalation page lists the unknown call first with its settle action; the run
        // page lists the call.
        let olga = s.person("olga").await;
        let page = olga.page(&format!("/escalations/{escalation}")).await;
        assert!(page.contains("unknown-outcomes") && page.contains(&id), "the escalation page offers to settle it");
        let run_page = olga.page("/runs/run-4").await;
        assert!(run_page.contains("run-calls") && run_page.contains("charge_card"), "the run page lists the call");
        let victor = s.person("victor").await;
        let (status, _) = victor.call("settle_call", &[("id", &id), ("happened", "yes")]).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "settling needs the operator role");
        let (status, said) = olga
            .call("settle_call", &[("id", &id), ("happened", "yes"), ("external_id", "ch_9"), ("confirm", "yes")])
            .await;
        assert_eq!(status, StatusCode::OK, "{said}");
        let settled = ledger::get(&t.db, &id).await.unwrap().unwrap().0;
        assert_eq!(settled.state, EntryState::Succeeded);
        assert_eq!(settled.settled_by.as_deref(), Some("olga"));
        let audit = store::audit::list(&t.db, None, Some("call_settled"), 5).await.unwrap();
        assert_eq!(audit.entries.len(), 1, "settling is audited");
        let timeline = escalations::timeline(&t.db, &escalation).await.unwrap();
        assert!(timeline.iter().any(|e| e.detail.as_deref().is_some_and(|d| d.contains("happened"))), "and noted");
        let (_, after) = s.ask(body).await;
        assert_eq!(after["answer"], "already_done");
        assert_eq!(after["call"]["external_id"], "ch_9");
        let (status, _) = olga.call("settle_call", &[("id", &id), ("happened", "no"), ("confirm", "yes")]).await;
        assert_eq!(status, StatusCode::CONFLICT, "only an unknown outcome is settled");
        t.cleanup().await;
    }
}

#[tokio::test]
async fn a_call_that_needs_approval_waits_for_it_and_uses_it_once() {
    for t in TestDb::each_backend().await {
        let s = server(&t).await;
        let policy = ToolPolicy { requires_approval: true, ..ToolPolicy::class("delete_*", SideEffect::Irreversible) };
        policies::upsert(&t.db, &policy).await.unwrap();
        let body =
            json!({"run_id": "run-5", "step_index": 1, "tool": "delete_repo", "arguments": {"repo": "acme/old"}});
        let (_, first) = s.ask(body.clone()).await;
        assert_eq!(first["answer"], "approval_required", "{first}");
        let id = first["call"]["id"].as_str().unwrap().to_string();
        let approval_id = first["call"]["approval_id"].as_str().expect("filed for this call").to_string();
        let (status, early) = s.complete(&id, json!({"outcome": "ok"})).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "not started: {early}");

        // The agent repeats its ask with a wait; a read meanwhile says the same and starts nothing.
        let waiter = {
            let (http, url, agent) = (s.http.clone(), format!("{}/api/v1/calls", s.base), s.agent.clone());
            let mut waiting = body.clone();
            waiting["wait"] = json!(20);
            tokio::spawn(async move {
                http.post(url).bearer_auth(agent).json(&waiting).send().await.unwrap().json::<Value>().await.unwrap()
            })
        };
        let approval = store::approvals::get(&t.db, &approval_id).await.unwrap().unwrap();
        let alice = s.person("alice").await;
        let form =
            [("id", approval_id.as_str()), ("decision", "approve"), ("payload_sha256", &approval.payload_sha256)];
        let (status, decided) = alice.call("decide_approval", &form).await;
        assert_eq!(status, StatusCode::OK, "{decided}");
        let woken = tokio::time::timeout(Duration::from_secs(15), waiter).await.expect("woken").unwrap();
        assert_eq!(woken["answer"], "proceed", "the approval turns into proceed: {woken}");
        assert_eq!(woken["call"]["attempts"], 1, "{woken}");
        let (_, again) = s.ask(body.clone()).await;
        assert_eq!(again["answer"], "in_progress", "the approval is used once");

        // A denied call is denied.
        let other =
            json!({"run_id": "run-5", "step_index": 2, "tool": "delete_repo", "arguments": {"repo": "acme/new"}});
        let (_, asked) = s.ask(other.clone()).await;
        let approval_id = asked["call"]["approval_id"].as_str().unwrap().to_string();
        let approval = store::approvals::get(&t.db, &approval_id).await.unwrap().unwrap();
        let form = [
            ("id", approval_id.as_str()),
            ("decision", "deny"),
            ("payload_sha256", &approval.payload_sha256),
            ("reason", "still in use"),
        ];
        assert_eq!(alice.call("decide_approval", &form).await.0, StatusCode::OK);
        let (_, denied) = s.ask(other).await;
        assert_eq!(denied["answer"], "denied");
        t.cleanup().await;
    }
}

#[tokio::test]
async fn a_read_never_changes_the_ledger_and_waits_answer_as_soon_as_the_answer_changes() {
    for t in TestDb::each_backend().await {
        let s = server(&t).await;
        let policy =
            ToolPolicy { call_timeout_seconds: Some(1), ..ToolPolicy::class("charge_card", SideEffect::Irreversible) };
        policies::upsert(&t.db, &policy).await.unwrap();
        let s = &s;
        let get = |id: &str, wait: u64| {
            let path = format!("/api/v1/calls/{id}?wait={wait}");
            async move { s.api(Method::GET, &path, None, &s.agent).await }
        };
        let charge = |step: i64| json!({"run_id": "run-9", "step_index": step, "tool": "charge_card", "arguments": {"amount": step}});

        // A read's wait on a started call ends when its timeout passes, not with the wait.
        let (_, first) = s.ask(charge(1)).await;
        let id = first["call"]["id"].as_str().unwrap().to_string();
        let started = std::time::Instant::now();
        let (status, read) = get(&id, 30).await;
        assert_eq!(status, StatusCode::OK, "{read}");
        assert_eq!(read["answer"], "outcome_unknown", "{read}");
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "answered when the answer changed: {:?}",
            started.elapsed()
        );
        let entry = ledger::get(&t.db, &id).await.unwrap().unwrap().0;
        assert_eq!((entry.state, entry.escalation_id), (EntryState::Started, None), "a read records nothing");
        // An ask's wait likewise: in progress, then unknown once the timeout passes.
        let (_, second) = s.ask(charge(2)).await;
        let second_id = second["call"]["id"].as_str().unwrap().to_string();
        let mut waiting = charge(2);
        waiting["wait"] = json!(30);
        let started = std::time::Instant::now();
        let (_, unknown) = s.ask(waiting).await;
        assert_eq!(unknown["answer"], "outcome_unknown", "{unknown}");
        assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
        let escalation = unknown["call"]["escalation_id"].as_str().expect("the ask opened the escalation").to_string();

        // The first call joins the run's escalation with an item of its own.
        let (_, joined) = s.ask(charge(1)).await;
        assert_eq!(joined["call"]["escalation_id"], escalation.as_str(), "{joined}");
        let e = escalations::get(&t.db, &escalation).await.unwrap().unwrap();
        let items: Vec<Option<&str>> = e.what_remains.iter().map(|i| i.call_id.as_deref()).collect();
        assert_eq!(items, vec![Some(second_id.as_str()), Some(id.as_str())], "{:?}", e.what_remains);

        // "It did not" with an external id contradicts itself and is refused.
        let olga = s.person("olga").await;
        let (status, said) = olga
            .call("settle_call", &[("id", &id), ("happened", "no"), ("external_id", "ch_1"), ("confirm", "yes")])
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{said}");
        assert_eq!(ledger::get(&t.db, &id).await.unwrap().unwrap().0.state, EntryState::Unknown, "nothing stored");
        // The tool cannot be undone: settling needs the operator's confirmation.
        let (status, said) = olga.call("settle_call", &[("id", &id), ("happened", "no")]).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{said}");
        assert!(said.contains("cannot be undone"), "{said}");

        // An agent waiting on the unknown call is answered when a person settles it.
        let waiter = {
            let (http, url, agent) = (s.http.clone(), format!("{}/api/v1/calls", s.base), s.agent.clone());
            let mut waiting = charge(1);
            waiting["wait"] = json!(30);
            tokio::spawn(async move {
                http.post(url).bearer_auth(agent).json(&waiting).send().await.unwrap().json::<Value>().await.unwrap()
            })
        };
        tokio::time::sleep(Duration::from_millis(300)).await;
        let (status, said) = olga.call("settle_call", &[("id", &id), ("happened", "no"), ("confirm", "yes")]).await;
        assert_eq!(status, StatusCode::OK, "{said}");
        let woken = tokio::time::timeout(Duration::from_secs(10), waiter).await.expect("woken").unwrap();
        assert_eq!(woken["answer"], "proceed", "{woken}");
        assert_eq!(woken["call"]["attempts"], 2, "the waiting ask started the next attempt: {woken}");
        let e = escalations::get(&t.db, &escalation).await.unwrap().unwrap();
        let ticked = e.what_remains.iter().find(|i| i.call_id.as_deref() == Some(id.as_str())).unwrap();
        assert!(ticked.done && ticked.done_by.as_deref() == Some("olga"), "settling ticks its item: {ticked:?}");
        assert!(!e.what_remains[0].done, "the other call's item stays open");

        // A call settled "it did not happen" is read as ask_again, however often: only an ask starts it.
        let (_, third) = s.ask(charge(3)).await;
        let third_id = third["call"]["id"].as_str().unwrap().to_string();
        let (status, lost) = s
            .complete(&third_id, json!({"outcome": "unknown", "error": "the tool's process died after sending"}))
            .await;
        assert_eq!(status, StatusCode::OK, "{lost}");
        assert_eq!(lost["state"], "unknown");
        assert!(lost["escalation_id"].is_string(), "a lost call opens (or joins) the escalation: {lost}");
        let (status, said) =
            olga.call("settle_call", &[("id", &third_id), ("happened", "no"), ("confirm", "yes")]).await;
        assert_eq!(status, StatusCode::OK, "{said}");
        for _ in 0..3 {
            let (_, read) = get(&third_id, 0).await;
            assert_eq!(read["answer"], "ask_again", "{read}");
            assert_eq!(read["call"]["attempts"], 1, "{read}");
            assert_eq!(read["call"]["state"], "not_done");
        }
        let (_, asked) = s.ask(charge(3)).await;
        assert_eq!(asked["answer"], "proceed", "{asked}");
        assert_eq!(asked["call"]["attempts"], 2);
        t.cleanup().await;
    }
}

#[tokio::test]
async fn bad_asks_and_reports_are_refused_and_change_nothing() {
    for t in TestDb::each_backend().await {
        let s = server(&t).await;
        let (status, body) = s.ask(json!({"run_id": "r", "tool": "t", "arguments": {}})).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(body["error"]["message"].as_str().unwrap().contains("step_index"), "{body}");
        let big = "x".repeat(70 * 1024);
        let (status, _) = s.ask(json!({"run_id": "r", "step_index": 1, "tool": "t", "arguments": {"b": big}})).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);

        let (_, asked) = s.ask(email("run-6", 1, "r")).await;
        let id = asked["call"]["id"].as_str().unwrap().to_string();
        let (status, body) = s.complete(&id, json!({"outcome": "ok", "response": {"b": big}})).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        let other = token(&t.db, "another-agent", &[Scope::Calls]).await;
        let (status, _) =
            s.api(Method::POST, &format!("/api/v1/calls/{id}/complete"), Some(json!({"outcome": "ok"})), &other).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "only the asking token reports");
        let (status, _) = s.api(Method::GET, &format!("/api/v1/calls/{id}"), None, &other).await;
        assert_eq!(status, StatusCode::FORBIDDEN);
        let unscoped = token(&t.db, "reader", &[Scope::Read]).await;
        assert_eq!(
            s.api(Method::POST, "/api/v1/calls", Some(email("x", 1, "r")), &unscoped).await.0,
            StatusCode::FORBIDDEN
        );
        let entry = ledger::get(&t.db, &id).await.unwrap().unwrap().0;
        assert_eq!(entry.state, EntryState::Started, "nothing changed");
        assert_eq!(s.complete("call_nope", json!({"outcome": "ok"})).await.0, StatusCode::NOT_FOUND);
        // Secrets in arguments and responses are redacted before storage.
        let (_, secret) = s
            .ask(json!({"run_id": "run-6", "step_index": 2, "tool": "call_api",
                        "arguments": {"authorization": "Bearer sk-live-abcdefghijklmnopqrstuvwxyz"}}))
            .await;
        assert!(!secret.to_string().contains("sk-live-abcdefghijklmnopqrstuvwxyz"), "{secret}");
        t.cleanup().await;
    }
}

#[tokio::test]
async fn a_call_left_unreported_pages_on_call_until_it_is_reported() {
    use app::services::alert_evaluation::evaluate_once;
    use domain::alerts::AlertRule;
    for t in TestDb::each_backend().await {
        let s = server(&t).await;
        let (_, asked) = s.ask(email("run-7", 1, "r")).await;
        let id = asked["call"]["id"].as_str().unwrap().to_string();
        let now = store::now_ms();
        let quiet = evaluate_once(&t.db, &Default::default(), now + 9 * 60_000, 0).await.unwrap();
        assert!(quiet.fired.iter().all(|a| a.rule != AlertRule::CallOutcomeUnknown), "under 10 minutes");
        // The agent died mid-call: it never asks again, the call stays `started`.
        let late = evaluate_once(&t.db, &Default::default(), now + 11 * 60_000, 0).await.unwrap();
        let alert = late.fired.iter().find(|a| a.rule == AlertRule::CallOutcomeUnknown).expect("it pages");
        assert!(alert.items.iter().any(|i| i.id == "run-7"), "{alert:?}");
        s.complete(&id, json!({"outcome": "ok", "external_id": "msg_7"})).await;
        let after = evaluate_once(&t.db, &Default::default(), now + 12 * 60_000, 0).await.unwrap();
        assert!(after.resolved.iter().any(|a| a.rule == AlertRule::CallOutcomeUnknown), "a report resolves it");
        t.cleanup().await;
    }
}

#[tokio::test]
async fn retention_prunes_settled_calls_past_the_longest_window_and_keeps_open_ones() {
    for t in TestDb::each_backend().await {
        let s = server(&t).await;
        let (_, done) = s.ask(email("run-8", 1, "r")).await;
        let done_id = done["call"]["id"].as_str().unwrap().to_string();
        s.complete(&done_id, json!({"outcome": "ok", "external_id": "msg_8"})).await;
        let (_, repeat) = s.ask(email("run-8", 1, "r")).await;
        assert_eq!(repeat["answer"], "already_done", "counted in this hour's dedupes");
        let (_, open) = s.ask(email("run-8", 2, "r")).await;
        let open_id = open["call"]["id"].as_str().unwrap().to_string();
        let backdate = |days: i64| {
            store::sql::Sql::with_args(
                "UPDATE call_ledger SET updated_at = $1, started_at = $1",
                vec![(store::now_ms() - days * 86_400_000).into()],
            )
        };
        t.db.ledger().execute(backdate(20)).await.unwrap();
        store::retention::apply(&t.db, 7, 7).await.unwrap();
        assert!(ledger::get(&t.db, &done_id).await.unwrap().is_some(), "inside the longest window (30 days)");
        t.db.ledger().execute(backdate(31)).await.unwrap();
        let hour_back = store::sql::Sql::with_args(
            "UPDATE call_ledger_hours SET hour_ms = hour_ms - $1",
            vec![(31 * 86_400_000_i64).into()],
        );
        assert_eq!(t.db.ledger().execute(hour_back).await.unwrap(), 1);
        store::retention::apply(&t.db, 7, 7).await.unwrap();
        assert!(ledger::get(&t.db, &done_id).await.unwrap().is_none(), "a settled call past every window goes");
        assert!(ledger::get(&t.db, &open_id).await.unwrap().is_some(), "a started call stays until settled");
        let hours: Vec<(i64,)> =
            t.db.ledger().fetch_all(store::sql::Sql::new("SELECT hour_ms FROM call_ledger_hours")).await.unwrap();
        assert!(hours.is_empty(), "the hourly dedupe counts go with the entries: {hours:?}");
        t.cleanup().await;
    }
}
