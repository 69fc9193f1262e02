//! Approvals v2 end to end over real HTTP on SQLite and PostgreSQL: edit then approve
//! (schema, diff, the agent's long poll and the execution check on the new hash), rules on
//! arguments (enforced, shadow, tried on history, refused with their position), two
//! people, bulk decisions, expiry that escalates, guarded calls with edited arguments, and
//! Slack's buttons against a local stand-in for Slack's `response_url`.

mod common;

use common::receiver::Receiver;
use common::spans::{ingest, kv, span_at};
use common::{Live, Person};
use domain::access::{Role, Scope};
use domain::approvals::payload::payload_sha256;
use domain::approvals::rules::{ApprovalRule, RuleAction, RuleMode};
use domain::approvals::OnExpiry;
use domain::canonical::SideEffect;
use domain::policy::ToolPolicy;
use flightdeck::config::Overrides;
use reqwest::StatusCode;
use serde_json::{json, Value};
use store::testing::TestDb;
use store::{approval_rules, approvals, audit, escalations, policies, slack};

const SIGNING_SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";

async fn live(t: &TestDb, settings: Overrides) -> Live {
    let approver: &[Role] = &[Role::Approver, Role::Viewer];
    let people = [("alice", approver), ("bob", approver), ("carol", approver), ("admin", &[Role::Admin][..])];
    common::live_with(t, &people, &[Scope::Approvals, Scope::Calls], settings).await
}

async fn file(s: &Live, body: Value) -> Value {
    let (status, created) = s.api(reqwest::Method::POST, "/api/v1/approvals", Some(body), &s.agent).await;
    assert!(status.is_success(), "{status} {created}");
    created
}

async fn poll(s: &Live, id: &str) -> Value {
    s.api(reqwest::Method::GET, &format!("/api/v1/approvals/{id}"), None, &s.agent).await.1
}

fn refund(run: &str, key: &str, amount: i64) -> Value {
    json!({"run_id": run, "step_index": 1, "tool": "refund", "idempotency_key": key,
           "arguments": {"order": "o-1", "amount": amount, "currency": "EUR"}})
}

async fn policy(t: &TestDb, edit: impl FnOnce(&mut ToolPolicy)) {
    let mut p = ToolPolicy::class("refund", SideEffect::Irreversible);
    p.requires_approval = true;
    edit(&mut p);
    policies::upsert(&t.db, &p).await.unwrap();
}

async fn decide(p: &Person, id: &str, decision: &str, sha: &str, extra: &[(&str, &str)]) -> (StatusCode, String) {
    let mut form = vec![("id", id), ("decision", decision), ("payload_sha256", sha)];
    form.extend_from_slice(extra);
    p.call("decide_approval", &form).await
}

#[tokio::test]
async fn an_approver_edits_the_arguments_and_the_agent_runs_the_edited_payload() {
    for t in TestDb::each_backend().await {
        let schema = json!({"type": "object", "required": ["order", "amount"], "additionalProperties": false,
            "properties": {"order": {"type": "string"}, "amount": {"type": "integer", "maximum": 100},
                           "currency": {"enum": ["EUR", "USD"]}}});
        policy(&t, |p| p.arguments_schema = Some(schema)).await;
        let s = live(&t, Overrides::default()).await;
        let created = file(&s, refund("run-e", "k1", 500)).await;
        let (id, sha) = (created["id"].as_str().unwrap(), created["payload_sha256"].as_str().unwrap());
        let alice = s.person("alice").await;

        let (status, body) = decide(&alice, id, "approve", sha, &[("arguments", "{\"amount\": ")]).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        assert!(body.contains("not JSON"), "{body}");
        let too_big = r#"{"order": "o-1", "amount": 5000, "currency": "GBP"}"#;
        let (status, body) = decide(&alice, id, "approve", sha, &[("arguments", too_big)]).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(body.contains("/amount") && body.contains("/currency"), "every schema failure, with where: {body}");
        assert_eq!(poll(&s, id).await["status"], "pending", "a refused edit changes nothing");

        let edited = r#"{"order": "o-1", "amount": 50, "currency": "EUR"}"#;
        let respond = "Refunds above 100 EUR need a manager; I approved 50.";
        let (status, body) = decide(&alice, id, "approve", sha, &[("arguments", edited), ("respond", respond)]).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let seen = poll(&s, id).await;
        assert_eq!(seen["status"], "approved_with_changes");
        let new_args = json!({"order": "o-1", "amount": 50, "currency": "EUR"});
        assert_eq!(seen["arguments"], new_args, "the long poll returns the edited arguments");
        assert_eq!(seen["payload_sha256"], payload_sha256("refund", &new_args), "bound to the new hash");
        assert_eq!(seen["original_payload_sha256"], sha);
        assert_eq!(seen["changes"], "~ /amount: 500 → 50");
        assert_eq!(seen["respond"], respond);
        let stored = approvals::get(&t.db, id).await.unwrap().unwrap();
        assert_eq!(stored.original_arguments.as_deref(), Some(r#"{"amount":500,"currency":"EUR","order":"o-1"}"#));

        // Execution is checked against the new hash: the original arguments are a violation.
        let now = u64::try_from(store::now_ms()).unwrap() * 1_000_000;
        let call = |id_byte: u8, args: &str| {
            span_at(
                7,
                id_byte,
                Some(1),
                "tool refund",
                now + u64::from(id_byte),
                vec![
                    kv("tool.name", "refund"),
                    kv("tool.outcome", "ok"),
                    kv("tool.arguments", args),
                    kv("approval.id", id),
                ],
            )
        };
        ingest(
            &t.db,
            vec![
                span_at(7, 1, None, "agent.run", now, vec![kv("run.id", "run-e")]),
                call(2, r#"{"order":"o-1","amount":500,"currency":"EUR"}"#),
            ],
        )
        .await;
        let v = approvals::violations_for_run(&t.db, "run-e").await.unwrap();
        assert_eq!(v.iter().map(|v| v.kind.as_str()).collect::<Vec<_>>(), vec!["payload_mismatch"]);
        t.cleanup().await;
    }
}

#[tokio::test]
async fn a_denial_carries_a_message_and_redacted_payloads_cannot_be_edited() {
    for t in TestDb::each_backend().await {
        policy(&t, |_| {}).await;
        let s = live(&t, Overrides::default()).await;
        let alice = s.person("alice").await;
        let created = file(&s, refund("run-d", "k1", 80)).await;
        let (id, sha) = (created["id"].as_str().unwrap(), created["payload_sha256"].as_str().unwrap());
        let (status, _) =
            decide(&alice, id, "deny", sha, &[("reason", "wrong order"), ("respond", "Refund o-2 instead")]).await;
        assert_eq!(status, StatusCode::OK);
        let seen = poll(&s, id).await;
        assert_eq!((seen["status"].as_str(), seen["respond"].as_str()), (Some("denied"), Some("Refund o-2 instead")));

        let secret = json!({"run_id": "run-d", "tool": "refund", "idempotency_key": "k2",
            "arguments": {"order": "o-1", "amount": 5, "api_key": "sk-proj-4f3kQ9xT7bLm2VpN8rZs1WcY"}});
        let created = file(&s, secret).await;
        let (id, sha) = (created["id"].as_str().unwrap(), created["payload_sha256"].as_str().unwrap());
        let (status, body) =
            decide(&alice, id, "approve", sha, &[("arguments", r#"{"order":"o-1","amount":4,"api_key":"x"}"#)]).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(body.contains("credential"), "{body}");
        t.cleanup().await;
    }
}

fn rule(name: &str, expression: &str, action: RuleAction, mode: RuleMode) -> ApprovalRule {
    ApprovalRule {
        name: name.into(),
        tool_pattern: "refund".into(),
        position: 0,
        expression: expression.into(),
        action,
        approvers: 1,
        role: None,
        reason: (action == RuleAction::Deny).then(|| "refunds in USD go through finance".into()),
        mode,
    }
}

#[tokio::test]
async fn rules_decide_in_order_and_are_ordinary_decisions_in_history_and_audit() {
    for t in TestDb::each_backend().await {
        policy(&t, |_| {}).await;
        let mut two = rule("big", "args.amount >= 1000", RuleAction::RequireApproval, RuleMode::Enforce);
        two.approvers = 2;
        let mut usd = rule("usd", "args.currency == 'USD'", RuleAction::Deny, RuleMode::Enforce);
        usd.position = 1;
        let mut small = rule("small", "args.amount < 100 && hour >= 0", RuleAction::AutoApprove, RuleMode::Enforce);
        small.position = 2;
        let shadow = rule("shadow-all", "true", RuleAction::AutoApprove, RuleMode::Shadow);
        for r in [&two, &usd, &small, &shadow] {
            approval_rules::upsert(&t.db, r, "admin").await.unwrap();
        }
        let s = live(&t, Overrides::default()).await;
        let auto = file(&s, refund("run-r", "a", 40)).await;
        assert_eq!(auto["status"], "approved");
        assert_eq!(auto["decided_by"], "rule:small");
        let mut dollars = refund("run-r", "b", 40);
        dollars["arguments"]["currency"] = json!("USD");
        let denied = file(&s, dollars).await;
        assert_eq!(
            (denied["status"].as_str(), denied["reason"].as_str()),
            (Some("denied"), Some("refunds in USD go through finance"))
        );
        let big = file(&s, refund("run-r", "c", 5000)).await;
        assert_eq!((big["status"].as_str(), big["required_approvals"].as_i64()), (Some("pending"), Some(2)));
        let plain = file(&s, refund("run-r", "d", 500)).await;
        assert_eq!((plain["status"].as_str(), plain["required_approvals"].as_i64()), (Some("pending"), Some(1)));

        let log = audit::list(&t.db, None, None, 50).await.unwrap();
        let by_rule: Vec<(&str, &str)> = log
            .entries
            .iter()
            .filter(|e| e.actor.as_deref().is_some_and(|a| a.starts_with("rule:")))
            .map(|e| (e.actor.as_deref().unwrap(), e.action.as_str()))
            .collect();
        assert!(
            by_rule.contains(&("rule:small", "approval_approved"))
                && by_rule.contains(&("rule:usd", "approval_denied")),
            "{by_rule:?}"
        );
        let history = approvals::decided(&t.db, &Default::default(), 50).await.unwrap();
        assert!(history.iter().any(|a| a.decided_by.as_deref() == Some("rule:small")));

        // The shadow rule recorded what it would have done with each of the four.
        let recorded = approval_rules::shadow_history(&t.db, "shadow-all").await.unwrap();
        assert_eq!(recorded.len(), 4);
        let admin = s.person("admin").await;
        let page: Value = serde_json::from_str(&admin.call("load_rules", &[]).await.1).unwrap();
        let shadow_view = page["rules"].as_array().unwrap().iter().find(|r| r["rule"]["name"] == "shadow-all").unwrap();
        assert_eq!(shadow_view["shadow"]["requests"], 2, "rule-decided requests are left out: {shadow_view}");
        assert_eq!(shadow_view["shadow"]["matched_undecided"], 2);

        // A bad expression is refused with its position, an unknown policy by name.
        let (status, body) = admin
            .call(
                "save_rule",
                &[
                    ("name", "bad"),
                    ("tool_pattern", "refund"),
                    ("expression", "args.amount >> 3"),
                    ("action", "auto_approve"),
                ],
            )
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(body.contains("line 1, column 14"), "{body}");
        let (status, body) = admin
            .call(
                "save_rule",
                &[("name", "x"), ("tool_pattern", "nope"), ("expression", "true"), ("action", "auto_approve")],
            )
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(body.contains("no tool policy `nope`"), "{body}");
        t.cleanup().await;
    }
}

#[tokio::test]
async fn try_on_history_lists_every_request_a_rule_would_have_decided_against_people() {
    for t in TestDb::each_backend().await {
        policy(&t, |_| {}).await;
        let s = live(&t, Overrides::default()).await;
        let alice = s.person("alice").await;
        for (key, amount, decision) in [("h1", 20, "approve"), ("h2", 30, "deny"), ("h3", 700, "deny"), ("h4", 10, "")]
        {
            let created = file(&s, refund("run-h", key, amount)).await;
            if !decision.is_empty() {
                let (id, sha) = (created["id"].as_str().unwrap(), created["payload_sha256"].as_str().unwrap());
                let (status, body) = decide(&alice, id, decision, sha, &[("reason", "checked")]).await;
                assert_eq!(status, StatusCode::OK, "{body}");
            }
        }
        let admin = s.person("admin").await;
        let (status, body) = admin
            .call(
                "try_rule",
                &[
                    ("tool_pattern", "refund"),
                    ("expression", "args.amount < 100"),
                    ("action", "auto_approve"),
                    ("days", "7"),
                ],
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let report: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(report["requests"], 4);
        assert_eq!(report["matched"], 3);
        assert_eq!(
            (report["matched_people_approved"].as_i64(), report["matched_people_denied"].as_i64()),
            (Some(1), Some(1))
        );
        let listed = report["disagreements"].as_array().unwrap();
        assert_eq!(listed.len(), 1, "{report}");
        assert_eq!(listed[0]["arguments"], r#"{"amount":30,"currency":"EUR","order":"o-1"}"#, "listed with payload");
        let (status, body) = admin
            .call(
                "try_rule",
                &[("tool_pattern", "refund"), ("expression", "args.amount <"), ("action", "auto_approve")],
            )
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(body.contains("column"), "{body}");
        t.cleanup().await;
    }
}

#[tokio::test]
async fn two_people_must_approve_the_same_hash_and_the_runs_own_user_cannot() {
    for t in TestDb::each_backend().await {
        policy(&t, |_| {}).await;
        let mut two = rule("two", "true", RuleAction::RequireApproval, RuleMode::Enforce);
        two.approvers = 2;
        approval_rules::upsert(&t.db, &two, "admin").await.unwrap();
        let s = live(&t, Overrides::default()).await;
        let (alice, bob, carol) = (s.person("alice").await, s.person("bob").await, s.person("carol").await);
        let created = file(&s, refund("run-2p", "k1", 10)).await;
        let (id, sha) = (created["id"].as_str().unwrap(), created["payload_sha256"].as_str().unwrap());
        assert_eq!(decide(&alice, id, "approve", sha, &[]).await.0, StatusCode::OK);
        let seen = poll(&s, id).await;
        assert_eq!((seen["status"].as_str(), seen["approvals_given"].as_i64()), (Some("pending"), Some(1)), "1 of 2");
        let (status, body) = decide(&alice, id, "approve", sha, &[]).await;
        assert_eq!(status, StatusCode::CONFLICT);
        assert!(body.contains("another person must approve"), "{body}");
        assert_eq!(decide(&bob, id, "approve", sha, &[]).await.0, StatusCode::OK);
        let seen = poll(&s, id).await;
        assert_eq!((seen["status"].as_str(), seen["approvals_given"].as_i64()), (Some("approved"), Some(2)));
        let a = approvals::get(&t.db, id).await.unwrap().unwrap();
        assert_eq!(a.approved_by, vec!["alice".to_string(), "bob".to_string()]);

        // Concurrent approvals by two people: both count, the request is approved once.
        let created = file(&s, refund("run-2p", "k2", 10)).await;
        let (id, sha) = (created["id"].as_str().unwrap(), created["payload_sha256"].as_str().unwrap());
        let (x, y) = tokio::join!(decide(&bob, id, "approve", sha, &[]), decide(&carol, id, "approve", sha, &[]));
        assert_eq!((x.0, y.0), (StatusCode::OK, StatusCode::OK), "{x:?} {y:?}");
        assert_eq!(poll(&s, id).await["status"], "approved");
        let approvals_logged = audit::list(&t.db, None, Some("approval_approved"), 50).await.unwrap().entries;
        assert_eq!(approvals_logged.iter().filter(|e| e.target.as_deref() == Some(id)).count(), 2);

        // The run acts for carol (enduser.id): she may deny it, not approve it.
        let now = u64::try_from(store::now_ms()).unwrap() * 1_000_000;
        ingest(
            &t.db,
            vec![span_at(9, 1, None, "agent.run", now, vec![kv("run.id", "run-own"), kv("enduser.id", "carol")])],
        )
        .await;
        let created = file(&s, refund("run-own", "k3", 10)).await;
        let (id, sha) = (created["id"].as_str().unwrap(), created["payload_sha256"].as_str().unwrap());
        let (status, body) = decide(&carol, id, "approve", sha, &[]).await;
        assert_eq!(status, StatusCode::CONFLICT);
        assert!(body.contains("enduser.id"), "{body}");
        assert_eq!(poll(&s, id).await["approvals_given"], 0);
        // OpenTelemetry also allows enduser.id on the resource: it counts the same.
        common::spans::ingest_with_resource(
            &t.db,
            vec![span_at(10, 1, None, "agent.run", now, vec![kv("run.id", "run-own-resource")])],
            vec![kv("service.name", "billing"), kv("enduser.id", "carol")],
        )
        .await;
        let created = file(&s, refund("run-own-resource", "k4", 10)).await;
        let (id, sha) = (created["id"].as_str().unwrap(), created["payload_sha256"].as_str().unwrap());
        let (status, body) = decide(&carol, id, "approve", sha, &[]).await;
        assert_eq!(status, StatusCode::CONFLICT, "{body}");
        assert!(body.contains("enduser.id"), "{body}");
        t.cleanup().await;
    }
}

#[tokio::test]
async fn the_second_approver_sees_the_first_ones_edit_and_the_history_names_both() {
    for t in TestDb::each_backend().await {
        policy(&t, |_| {}).await;
        let mut two = rule("two", "true", RuleAction::RequireApproval, RuleMode::Enforce);
        two.approvers = 2;
        approval_rules::upsert(&t.db, &two, "admin").await.unwrap();
        let s = live(&t, Overrides::default()).await;
        let (alice, bob) = (s.person("alice").await, s.person("bob").await);
        let body = json!({"run_id": "run-edit2", "step_index": 1, "tool": "refund", "idempotency_key": "e2",
                          "arguments": {"order": "o-1", "amount": 10, "archive_first": false}});
        let created = file(&s, body).await;
        let (id, sha) = (created["id"].as_str().unwrap(), created["payload_sha256"].as_str().unwrap());
        let edited = r#"{"order": "o-1", "amount": 10, "archive_first": true}"#;
        let (status, said) = decide(&alice, id, "approve", sha, &[("arguments", edited)]).await;
        assert_eq!(status, StatusCode::OK, "{said}");
        let a = approvals::get(&t.db, id).await.unwrap().unwrap();
        assert_eq!(a.status.as_str(), "pending", "one of two");
        assert_eq!(a.edits.len(), 1);
        assert_eq!(a.edits[0].username, "alice");
        assert!(a.edits[0].changes.contains("archive_first"), "{:?}", a.edits);
        // Bob's page says, before the payload, that alice changed it, and what the agent asked.
        let page = bob.page(&format!("/approvals/{id}")).await;
        let history = page.find("data-testid=\"edit-history\"").expect("the edit is shown");
        let payload = page.find("data-testid=\"payload\"").unwrap();
        assert!(history < payload, "the edit comes before the payload");
        assert!(page[history..payload].contains("alice"), "who changed it");
        assert!(page[history..payload].contains("archive_first"), "what changed");
        assert!(page.contains("original-arguments"), "what the agent asked for");
        let (status, said) = decide(&bob, id, "approve", &a.payload_sha256, &[]).await;
        assert_eq!(status, StatusCode::OK, "{said}");
        let a = approvals::get(&t.db, id).await.unwrap().unwrap();
        assert_eq!(a.status.as_str(), "approved_with_changes");
        assert_eq!(a.approved_by, vec!["alice".to_string(), "bob".to_string()]);
        let decided = bob.page(&format!("/approvals/{id}")).await;
        assert!(decided.contains("Approved with changes by alice and bob"), "every approver is named");
        t.cleanup().await;
    }
}

#[tokio::test]
async fn a_bulk_decision_binds_each_request_to_its_own_hash() {
    for t in TestDb::each_backend().await {
        policy(&t, |_| {}).await;
        let s = live(&t, Overrides::default()).await;
        let alice = s.person("alice").await;
        let mut picked = Vec::new();
        for (key, amount) in [("b1", 10), ("b2", 20), ("b3", 30)] {
            let c = file(&s, refund("run-b", key, amount)).await;
            picked.push((c["id"].as_str().unwrap().to_string(), c["payload_sha256"].as_str().unwrap().to_string()));
        }
        let ids = picked.iter().map(|(id, _)| id.as_str()).collect::<Vec<_>>().join(",");
        let (status, body) = alice.call("load_bulk", &[("ids", &ids)]).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let view: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(view["differing"], json!(["amount"]));
        assert_eq!(view["same"], json!(["currency", "order"]));
        assert!(view["problem"].is_null());
        // The third was shown with a hash it no longer has (say, another tab edited it).
        let items = format!(
            "{}:{},{}:{},{}:{}",
            picked[0].0,
            picked[0].1,
            picked[1].0,
            picked[1].1,
            picked[2].0,
            "0".repeat(64)
        );
        let (status, body) = alice.call("decide_bulk", &[("items", &items), ("decision", "approve")]).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let results: Value = serde_json::from_str(&body).unwrap();
        let oks: Vec<bool> = results.as_array().unwrap().iter().map(|r| r["ok"].as_bool().unwrap()).collect();
        assert_eq!(oks, vec![true, true, false], "{results}");
        assert!(results[2]["detail"].as_str().unwrap().contains("not the one this request is bound to"));
        assert_eq!(poll(&s, &picked[2].0).await["status"], "pending");
        let (status, body) = alice.call("decide_bulk", &[("items", &items), ("decision", "deny")]).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "a bulk denial needs its reason too: {body}");
        // The page after the decision: what was decided is shown as decided, not warned about.
        let (_, body) = alice.call("load_bulk", &[("ids", &ids)]).await;
        let after: Value = serde_json::from_str(&body).unwrap();
        assert!(after["problem"].is_null(), "no false 'already approved' warning: {after}");
        let page =
            alice.page(&format!("/approvals/bulk?id={}&id={}&id={}", picked[0].0, picked[1].0, picked[2].0)).await;
        assert!(page.contains("approved by alice"), "each decided request says who approved it");
        assert!(!page.contains("0 of 1"), "no stale count");
        assert!(page.contains("2 of the picked requests are decided"), "and the decision form is for the one left");
        // Requests of two tools are named as two tools.
        let other =
            file(&s, json!({"run_id": "run-b", "tool": "send_email", "arguments": {"to": "a@b.c", "body": "x"}})).await;
        let two = format!("{},{}", picked[2].0, other["id"].as_str().unwrap());
        let (_, body) = alice.call("load_bulk", &[("ids", &two)]).await;
        let view: Value = serde_json::from_str(&body).unwrap();
        let problem = view["problem"].as_str().unwrap();
        assert!(
            problem.contains("2 tools") && problem.contains("refund") && problem.contains("send_email"),
            "{problem}"
        );
        let page =
            alice.page(&format!("/approvals/bulk?id={}&id={}", picked[2].0, other["id"].as_str().unwrap())).await;
        assert!(page.contains("2 requests for 2 tools"), "not '2 request(s) for refund'");
        t.cleanup().await;
    }
}

#[tokio::test]
async fn a_request_nobody_decides_escalates_when_its_policy_says_so() {
    for t in TestDb::each_backend().await {
        policy(&t, |p| p.on_expiry = OnExpiry::Escalate).await;
        let s = live(&t, Overrides::default()).await;
        let mut body = refund("run-x", "k1", 10);
        body["expires_in"] = json!(1);
        let created = file(&s, body).await;
        let id = created["id"].as_str().unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(1300)).await;
        let seen = poll(&s, id).await;
        assert_eq!(seen["status"], "expired");
        let escalation = seen["escalation_id"].as_str().expect("an escalation was opened");
        let e = escalations::get(&t.db, escalation).await.unwrap().unwrap();
        assert_eq!(e.run_id, "run-x");
        assert!(e.what_remains[0].description.contains(id), "{:?}", e.what_remains);
        t.cleanup().await;
    }
}

#[tokio::test]
async fn a_guarded_call_gets_the_edited_arguments_and_the_approvers_message() {
    for t in TestDb::each_backend().await {
        policy(&t, |_| {}).await;
        let s = live(&t, Overrides::default()).await;
        let ask =
            json!({"run_id": "run-g", "step_index": 2, "tool": "refund", "arguments": {"order": "o-9", "amount": 900}});
        let (_, first) = s.api(reqwest::Method::POST, "/api/v1/calls", Some(ask.clone()), &s.agent).await;
        assert_eq!(first["answer"], "approval_required", "{first}");
        let call_id = first["call"]["id"].as_str().unwrap();
        let approval = approvals::get(&t.db, first["call"]["approval_id"].as_str().unwrap()).await.unwrap().unwrap();
        let alice = s.person("alice").await;
        let edited = r#"{"order": "o-9", "amount": 90}"#;
        let (status, body) = decide(
            &alice,
            &approval.id,
            "approve",
            &approval.payload_sha256,
            &[("arguments", edited), ("respond", "90, not 900")],
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        // A read starts nothing: the agent asks again to be told to proceed.
        let (_, read) = s.api(reqwest::Method::GET, &format!("/api/v1/calls/{call_id}?wait=5"), None, &s.agent).await;
        assert_eq!(read["answer"], "ask_again", "{read}");
        let (_, answer) = s.api(reqwest::Method::POST, "/api/v1/calls", Some(ask), &s.agent).await;
        assert_eq!(answer["answer"], "proceed", "{answer}");
        assert_eq!(answer["approved_arguments"], json!({"order": "o-9", "amount": 90}));
        assert_eq!(answer["message"], "90, not 900");
        t.cleanup().await;
    }
}

fn slack_body(user: &str, action: &str, value: &str, response_url: &str) -> String {
    let payload = json!({"type": "block_actions", "user": {"id": user, "username": user}, "response_url": response_url,
        "actions": [{"action_id": action, "value": value}]});
    format!("payload={}", urlencode(&payload.to_string()))
}

fn urlencode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

async fn click(s: &Live, body: &str, secret: &str, age: i64) -> (StatusCode, String) {
    let ts = (chrono::Utc::now().timestamp() - age).to_string();
    let signature = domain::approvals::slack::sign(secret, &ts, body.as_bytes());
    let res = s
        .http
        .post(format!("{}/slack/interactivity", s.base))
        .header("content-type", "application/x-www-form-urlencoded")
        .header("x-slack-request-timestamp", ts)
        .header("x-slack-signature", signature)
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    (res.status(), res.text().await.unwrap())
}

async fn wait_for(receiver: &Receiver, n: usize) -> Vec<Value> {
    for _ in 0..100 {
        let got = receiver.received();
        if got.len() >= n {
            return got.into_iter().map(|r| r.body).collect();
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("the Slack stand-in received {} messages, expected {n}", receiver.received().len());
}

#[tokio::test]
async fn slack_buttons_decide_only_signed_fresh_requests_from_linked_people() {
    for t in TestDb::each_backend().await {
        policy(&t, |_| {}).await;
        let slack_api = Receiver::start().await;
        let settings = Overrides {
            slack_signing_secret: Some(SIGNING_SECRET.into()),
            slack_response_url_prefix: Some(format!("http://{}/ok/", slack_api.addr)),
            ..Default::default()
        };
        let s = live(&t, settings).await;
        slack::link(&t.db, "U0ALICE", "alice", "admin").await.unwrap();
        let created = file(&s, refund("run-s", "k1", 10)).await;
        let (id, sha) = (created["id"].as_str().unwrap(), created["payload_sha256"].as_str().unwrap());
        let value = format!("{id}:{sha}");
        let response_url = format!("http://{}/ok/response/1", slack_api.addr);

        // Forged (another secret), stale, and unsigned requests decide nothing.
        let body = slack_body("U0ALICE", "flightdeck_approve", &value, &response_url);
        assert_eq!(click(&s, &body, "not-the-secret", 0).await.0, StatusCode::UNAUTHORIZED);
        assert_eq!(click(&s, &body, SIGNING_SECRET, 600).await.0, StatusCode::UNAUTHORIZED);
        let unsigned = s.http.post(format!("{}/slack/interactivity", s.base)).body(body.clone()).send().await.unwrap();
        assert_eq!(unsigned.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(poll(&s, id).await["status"], "pending");

        // An unlinked Slack user is told so; nothing is decided.
        let stranger = slack_body("U0EVE", "flightdeck_approve", &value, &response_url);
        assert_eq!(click(&s, &stranger, SIGNING_SECRET, 0).await.0, StatusCode::OK);
        let got = wait_for(&slack_api, 1).await;
        assert!(got[0]["text"].as_str().unwrap().contains("not linked"), "{}", got[0]);
        assert_eq!(poll(&s, id).await["status"], "pending");

        // Signed by Slack, from alice: approved, bound to the hash the message showed.
        let (status, _) = click(&s, &body, SIGNING_SECRET, 0).await;
        assert_eq!(status, StatusCode::OK);
        let seen = poll(&s, id).await;
        assert_eq!((seen["status"].as_str(), seen["decided_by"].as_str()), (Some("approved"), Some("alice")));
        let got = wait_for(&slack_api, 2).await;
        assert_eq!(got[1]["replace_original"], true);
        assert!(got[1]["text"].as_str().unwrap().contains("approved"), "{}", got[1]);
        let entries = audit::list(&t.db, None, Some("approval_approved"), 10).await.unwrap().entries;
        assert_eq!(entries[0].source.as_deref(), Some("slack"));

        // The same request again is a replay.
        let replay = {
            let ts = chrono::Utc::now().timestamp().to_string();
            let signature = domain::approvals::slack::sign(SIGNING_SECRET, &ts, body.as_bytes());
            let send = || {
                s.http
                    .post(format!("{}/slack/interactivity", s.base))
                    .header("x-slack-request-timestamp", ts.clone())
                    .header("x-slack-signature", signature.clone())
                    .body(body.clone())
                    .send()
            };
            send().await.unwrap();
            send().await.unwrap().status()
        };
        assert_eq!(replay, StatusCode::CONFLICT);

        // A button showing a payload the request is no longer bound to decides nothing.
        let other = file(&s, refund("run-s", "k2", 20)).await;
        let stale = slack_body(
            "U0ALICE",
            "flightdeck_deny",
            &format!("{}:{}", other["id"].as_str().unwrap(), "f".repeat(64)),
            &response_url,
        );
        assert_eq!(click(&s, &stale, SIGNING_SECRET, 0).await.0, StatusCode::OK);
        assert_eq!(poll(&s, other["id"].as_str().unwrap()).await["status"], "pending");
        t.cleanup().await;
    }
}
