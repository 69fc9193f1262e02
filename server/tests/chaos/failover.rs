//! Two instances on one PostgreSQL, as behind a load balancer. Agents long-poll their
//! approval requests through instance A, which also leads the alert evaluator; A is
//! killed with SIGKILL. The agents reconnect to B and, when an approver decides there,
//! every one of them gets the decision; the alert evaluator's lead moves to B.

use super::people;
use super::server::{wait_until, Server, Setup};
use domain::access::Role;
use serde_json::{json, Value};
use std::time::{Duration, Instant};
use store::testing::TestDb;

const AGENTS: usize = 5;

/// An agent waiting for its request's decision the way the Python client does: long
/// polls, and on a dropped connection the next instance in its list.
async fn wait_for_decision(bases: Vec<String>, agent: String, id: String) -> (Value, usize) {
    let http = reqwest::Client::builder().timeout(Duration::from_secs(60)).build().unwrap();
    let mut reconnects = 0;
    let mut at = 0;
    loop {
        let url = format!("{}/api/v1/approvals/{id}?wait=20", bases[at % bases.len()]);
        match http.get(url).bearer_auth(&agent).send().await {
            Ok(r) if r.status() == 200 => {
                let v: Value = r.json().await.unwrap();
                if v["status"] != "pending" {
                    return (v, reconnects);
                }
            }
            _ => {
                reconnects += 1;
                at += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

async fn leader(db: &store::Db) -> Option<String> {
    store::alerts::last_evaluation(db).await.ok().flatten().map(|(instance, _, _)| instance)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn agents_waiting_on_a_killed_instance_get_the_decision_from_the_other_and_the_lead_moves() {
    let _one_at_a_time = super::SERIAL.lock().await;
    let Some(t) = TestDb::postgres().await else { return };
    let dir = tempfile::tempdir().unwrap();
    let quick =
        |s: Setup| s.with("FLIGHTDECK_ALERT_INTERVAL_SECONDS", "1").with("FLIGHTDECK_APPROVAL_RECHECK_SECONDS", "60");
    let setup_a = quick(Setup::new(dir.path(), Some(&t.url)));
    let setup_b = quick(Setup::new(dir.path(), Some(&t.url)));
    let a = Server::start(&setup_a);
    let a_pid = format!("pid {}", a.pid);
    wait_until(Duration::from_secs(20), "A leading the alert evaluator", || async {
        leader(&t.db).await.is_some_and(|l| l.ends_with(&a_pid))
    })
    .await;
    let b = Server::start(&setup_b);
    let b_pid = format!("pid {}", b.pid);
    people::add(&t.db, &[("alice", &[Role::Approver, Role::Viewer])]).await;
    let agent = people::agent_token(&t.db).await;

    let http = reqwest::Client::new();
    let mut waiting = Vec::new();
    for i in 0..AGENTS {
        let body = json!({
            "run_id": format!("run-{i}"), "step_index": 1, "tool": "send_email", "idempotency_key": format!("k{i}"),
            "arguments": {"to": "ana@example.com", "subject": "failover", "body": format!("mail {i}")}
        });
        let filed: Value = http
            .post(format!("{}/api/v1/approvals", setup_a.web_base()))
            .bearer_auth(&agent)
            .json(&body)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let (id, sha) =
            (filed["id"].as_str().unwrap().to_string(), filed["payload_sha256"].as_str().unwrap().to_string());
        let bases = vec![setup_a.web_base(), setup_b.web_base()];
        waiting.push((id.clone(), sha, tokio::spawn(wait_for_decision(bases, agent.clone(), id))));
    }
    tokio::time::sleep(Duration::from_millis(500)).await; // every agent is waiting on A

    a.kill9();
    let lead_moved = wait_until(Duration::from_secs(30), "the alert evaluator's lead moving to B", || async {
        leader(&t.db).await.is_some_and(|l| l.ends_with(&b_pid))
    })
    .await;

    let alice = people::sign_in(&setup_b.web_base(), "alice").await.expect("alice signs in on B");
    let decided = Instant::now();
    for (id, sha, _) in &waiting {
        let form = [("id", id.as_str()), ("decision", "approve"), ("payload_sha256", sha.as_str())];
        let r = alice
            .post(format!("{}/fn/decide_approval", setup_b.web_base()))
            .header("sec-fetch-site", "same-origin")
            .form(&form)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
    }
    let mut reconnects = 0;
    for (id, _, agent) in waiting {
        let (state, r) = tokio::time::timeout(Duration::from_secs(30), agent).await.expect("woken").unwrap();
        assert_eq!(state["status"], "approved", "{id}: the agent got the decision through B");
        assert!(r >= 1, "{id}: the agent's poll on A was cut and it reconnected");
        reconnects += r;
    }
    let woken = decided.elapsed();
    eprintln!(
        "chaos failover postgres: A killed with {AGENTS} agents long-polling through it; they reconnected to B \
         ({reconnects} reconnects) and all got the decisions {:.2} s after they were made; the alert lead moved \
         to B {:.1} s after the kill",
        woken.as_secs_f64(),
        lead_moved.as_secs_f64()
    );
    assert!(b.stop(), "B stops gracefully");
    t.cleanup().await;
}
