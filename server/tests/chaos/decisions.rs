//! SIGKILL while people decide: two approvers decide the same requests from opposite ends
//! (alice approves, bob denies) and two operators claim the same escalations, while the
//! server is killed at random moments and started again. Afterwards no approval has two
//! decisions, every decision answered 200 is the stored one, and each decision and claim
//! has exactly one audit entry and (claims) one timeline entry: the act and its record
//! are one transaction.

use super::people::{self, sign_in};
use super::server::{Server, Setup};
use super::{kills, Lcg};
use domain::access::Role;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use store::testing::TestDb;
use store::{approvals, audit, escalations, Db};

/// Approval or escalation id, who acted, and the HTTP status they got.
type Answers = Arc<Mutex<Vec<(String, &'static str, u16)>>>;

/// One person working through `items` in order, each once: a decision (or claim) that got
/// an answer is done; one that got none is tried again in the next round.
async fn work(base: String, user: &'static str, items: Vec<(String, String)>, endpoint: &str, answers: Answers) {
    let Some(http) = sign_in(&base, user).await else { return };
    for (id, sha) in items {
        let answered = answers.lock().unwrap().iter().any(|(i, u, s)| i == &id && *u == user && *s != 0);
        if answered {
            continue;
        }
        let form: Vec<(&str, &str)> = match endpoint {
            "decide_approval" if user == "alice" => {
                vec![("id", &id), ("decision", "approve"), ("payload_sha256", &sha)]
            }
            "decide_approval" => vec![("id", &id), ("decision", "deny"), ("payload_sha256", &sha), ("reason", "no")],
            _ => vec![("id", &id)],
        };
        let sent =
            http.post(format!("{base}/fn/{endpoint}")).header("sec-fetch-site", "same-origin").form(&form).send().await;
        match sent {
            Ok(r) => answers.lock().unwrap().push((id, user, r.status().as_u16())),
            Err(_) => return, // the server is gone; the next round tries again
        }
    }
}

async fn file_requests(base: &str, agent: &str, count: usize) -> (Vec<(String, String)>, Vec<(String, String)>) {
    let http = reqwest::Client::new();
    let mut requests = Vec::new();
    let mut escalated = Vec::new();
    for i in 0..count {
        let body = json!({
            "run_id": format!("run-{i}"), "step_index": 3, "tool": "send_email", "idempotency_key": format!("k{i}"),
            "arguments": {"to": "ana@example.com", "subject": "Invoice", "body": format!("invoice {i}")}
        });
        let r: Value = http
            .post(format!("{base}/api/v1/approvals"))
            .bearer_auth(agent)
            .json(&body)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        requests.push((r["id"].as_str().unwrap().to_string(), r["payload_sha256"].as_str().unwrap().to_string()));
        let body = json!({
            "run_id": format!("run-e{i}"), "reason": "insufficient_permission", "idempotency_key": format!("e{i}"),
            "blocking_fact": "refunds over 500 EUR need a manager", "what_remains": ["refund order 77"]
        });
        let r: Value = http
            .post(format!("{base}/api/v1/escalations"))
            .bearer_auth(agent)
            .json(&body)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        escalated.push((r["id"].as_str().unwrap().to_string(), String::new()));
    }
    (requests, escalated)
}

async fn decisions_under_kills(t: &TestDb, kills: usize, seed: u64) {
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let postgres = (t.backend() == "postgres").then_some(t.url.as_str());
    let setup = Setup::new(dir.path(), postgres);
    let mut first = Some(Server::start(&setup));
    let db = super::verify::server_db(dir.path(), postgres.map(|_| &t.db)).await;
    let approver: &[Role] = &[Role::Approver, Role::Viewer];
    let operator: &[Role] = &[Role::Operator, Role::Viewer];
    people::add(&db, &[("alice", approver), ("bob", approver), ("olga", operator), ("oscar", operator)]).await;
    let agent = people::agent_token(&db).await;
    let (requests, escalated) = file_requests(&setup.web_base(), &agent, 100 * (kills + 1)).await;
    let answers: Answers = Arc::default();
    let mut rng = Lcg(seed);
    for round in 0..=kills {
        let server = first.take().unwrap_or_else(|| Server::start(&setup));
        let reversed = |v: &Vec<(String, String)>| v.iter().rev().cloned().collect::<Vec<_>>();
        let base = setup.web_base();
        let workers = [
            tokio::spawn(work(base.clone(), "alice", requests.clone(), "decide_approval", answers.clone())),
            tokio::spawn(work(base.clone(), "bob", reversed(&requests), "decide_approval", answers.clone())),
            tokio::spawn(work(base.clone(), "olga", escalated.clone(), "claim_escalation", answers.clone())),
            tokio::spawn(work(base.clone(), "oscar", reversed(&escalated), "claim_escalation", answers.clone())),
        ];
        if round < kills {
            tokio::time::sleep(Duration::from_millis(100 + rng.below(300))).await;
            let answered = answers.lock().unwrap().len();
            assert!(answered < 4 * requests.len(), "each kill lands while people are still deciding");
            server.kill9();
            for w in workers {
                w.await.unwrap();
            }
        } else {
            for w in workers {
                w.await.unwrap();
            }
            assert!(server.stop(), "a graceful stop at the end");
        }
    }
    let answers = answers.lock().unwrap().clone();
    check(&db, &requests, &escalated, &answers, t.backend()).await;
    eprintln!(
        "chaos decisions {}: {kills} kills while 2 approvers decided {} requests and 2 operators claimed {} \
         escalations ({} answers); one decision, one claim and one audit entry each, {:.1} s",
        t.backend(),
        requests.len(),
        escalated.len(),
        answers.len(),
        started.elapsed().as_secs_f64()
    );
}

async fn check(
    db: &Db,
    requests: &[(String, String)],
    escalated: &[(String, String)],
    answers: &[(String, &'static str, u16)],
    backend: &str,
) {
    let ok_by = |id: &str| -> Vec<&'static str> {
        answers.iter().filter(|(i, _, s)| i == id && *s == 200).map(|(_, u, _)| *u).collect()
    };
    let mut audited: HashMap<String, usize> = HashMap::new();
    for act in [audit::action::APPROVAL_APPROVED, audit::action::APPROVAL_DENIED, audit::action::ESCALATION_CLAIMED] {
        for e in audit::list(db, None, Some(act), 100_000).await.unwrap().entries {
            *audited.entry(e.target.unwrap_or_default()).or_default() += 1;
        }
    }
    for (id, _) in requests {
        let a = approvals::get(db, id).await.unwrap().unwrap();
        let decided_by = a.decided_by.clone().unwrap_or_else(|| panic!("{id} was never decided ({backend})"));
        let expected = if decided_by == "alice" { "approved" } else { "denied" };
        assert_eq!(a.status.as_str(), expected, "{id}: the decision is the decider's ({backend})");
        let winners = ok_by(id);
        assert!(winners.len() <= 1, "{id} was decided twice: {winners:?} ({backend})");
        if let Some(w) = winners.first() {
            assert_eq!(*w, decided_by, "{id}: the decision answered 200 is the stored one ({backend})");
        }
        assert_eq!(audited.get(id), Some(&1), "{id}: one audit entry for its decision ({backend})");
    }
    for (id, _) in escalated {
        let e = escalations::get(db, id).await.unwrap().unwrap();
        let holder = e.claimed_by.clone().unwrap_or_else(|| panic!("{id} was never claimed ({backend})"));
        for w in ok_by(id) {
            assert_eq!(w, holder, "{id}: a claim answered 200 is the stored one ({backend})");
        }
        let timeline = escalations::timeline(db, id).await.unwrap();
        let claims = timeline.iter().filter(|e| e.kind == "claimed").count();
        assert_eq!(claims, 1, "{id}: one claim on the timeline ({backend})");
        assert_eq!(audited.get(id), Some(&1), "{id}: one audit entry for its claim ({backend})");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kills_while_people_decide_leave_one_decision_and_one_record_each() {
    let _one_at_a_time = super::SERIAL.lock().await;
    for (i, t) in TestDb::each_backend().await.into_iter().enumerate() {
        decisions_under_kills(&t, kills(), 2_000 + i as u64).await;
        t.cleanup().await;
    }
}
