//! Approval wake-up benchmark (not a test): how long after an approver sends a decision
//! does the agent's long poll answer? Measured from sending the decision (a server
//! function call with a signed-in session) to the waiting agent receiving its response,
//! over real HTTP on loopback. Prints p50 and p99; asserts nothing.
//!
//! Setups: one instance on SQLite; one instance on PostgreSQL; two instances on one
//! PostgreSQL database (each with its own pool and wake-up hub, so the decision reaches
//! the other through LISTEN/NOTIFY), the agent waiting on one and the approver on the other.
//!
//!   cargo bench -p flightdeck --bench approvals
//!   FLIGHTDECK_TEST_PG_URL=postgres:///postgres?host=/var/run/postgresql cargo bench -p flightdeck --bench approvals
//!   FLIGHTDECK_BENCH_DECISIONS=500 ...   # more samples (default 200)

use app::auth::{password, secrets};
use app::services::approval_hub::ApprovalHub;
use app::state::AppState;
use domain::access::{Role, Scope};
use flightdeck::config::{Config, Overrides};
use serde_json::{json, Value};
use std::time::{Duration, Instant};
use store::testing::TestDb;
use store::{tokens, users, Db};

const PASSWORD: &str = "bench-password-123456";

/// Serves one instance on a free port over its own pool and hub; returns its base URL.
async fn instance(url: &str) -> String {
    let db = Db::connect(url).await.unwrap();
    let hub = ApprovalHub::new();
    tokio::spawn(hub.clone().listen(db.clone()));
    let config = Config::resolve(Overrides::default(), None).unwrap();
    let state = AppState {
        db,
        leptos_options: flightdeck::commands::serve::leptos_options(&config),
        approvals: hub,
        notifications: Default::default(),

        redactor: Default::default(),
        rules: Default::default(),
    };
    let app = flightdeck::web::router(state, &config);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        axum::serve(listener, app.into_make_service_with_connect_info::<std::net::SocketAddr>()).await.unwrap()
    });
    base
}

async fn measure(label: &str, t: &TestDb, two_instances: bool, decisions: usize) {
    let username: String =
        format!("approver-{label}").chars().filter(|c| c.is_ascii_alphanumeric() || *c == '-').collect();
    users::create(&t.db, &username, &password::hash(PASSWORD), &[Role::Approver, Role::Viewer]).await.unwrap();
    let (secret, prefix) = secrets::generate_token();
    let new = tokens::NewToken {
        name: "bench",
        prefix: &prefix,
        secret_sha256: &secrets::sha256_hex(&secret),
        scopes: &[Scope::Approvals],
        created_by: None,
    };
    tokens::create(&t.db, new).await.unwrap();
    let decider = instance(&t.url).await;
    let waiter = if two_instances { instance(&t.url).await } else { decider.clone() };

    let approver = reqwest::Client::builder().cookie_store(true).build().unwrap();
    let login = [("username", username.clone()), ("password", PASSWORD.into()), ("next", "/runs".into())];
    let res = approver.post(format!("{decider}/fn/login")).header("sec-fetch-site", "same-origin").form(&login);
    assert!(res.send().await.unwrap().status().is_success(), "sign-in failed");
    let agent = reqwest::Client::new();

    let mut samples = Vec::with_capacity(decisions);
    for i in 0..decisions {
        let body = json!({"run_id": "bench-run", "tool": "send_email", "arguments": {"to": "a@b.c", "n": i}});
        let created: Value = agent
            .post(format!("{decider}/api/v1/approvals"))
            .bearer_auth(&secret)
            .json(&body)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let id = created["id"].as_str().unwrap().to_string();
        let sha = created["payload_sha256"].as_str().unwrap().to_string();
        let poll = agent.get(format!("{waiter}/api/v1/approvals/{id}?wait=30")).bearer_auth(&secret).send();
        let poll = tokio::spawn(async move { poll.await.unwrap().json::<Value>().await.unwrap() });
        // Let the poll reach the server and subscribe before deciding.
        tokio::time::sleep(Duration::from_millis(20)).await;
        let started = Instant::now();
        let form = [("id", id.as_str()), ("decision", "approve"), ("payload_sha256", sha.as_str()), ("reason", "")];
        let decided = approver
            .post(format!("{decider}/fn/decide_approval"))
            .header("sec-fetch-site", "same-origin")
            .form(&form)
            .send()
            .await
            .unwrap();
        assert!(decided.status().is_success(), "decision refused: {}", decided.text().await.unwrap_or_default());
        let answer = poll.await.unwrap();
        samples.push(started.elapsed());
        assert_eq!(answer["status"], "approved", "the waiter must see the decision");
    }
    samples.sort();
    let pick = |q: f64| samples[((samples.len() as f64 * q).ceil() as usize).clamp(1, samples.len()) - 1];
    println!(
        "{label:<34} decisions {:>4}   p50 {:>7.2} ms   p99 {:>7.2} ms   max {:>7.2} ms",
        samples.len(),
        pick(0.50).as_secs_f64() * 1e3,
        pick(0.99).as_secs_f64() * 1e3,
        samples.last().unwrap().as_secs_f64() * 1e3
    );
}

fn main() {
    let decisions: usize = std::env::var("FLIGHTDECK_BENCH_DECISIONS").ok().and_then(|v| v.parse().ok()).unwrap_or(200);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        println!("decision → waiting agent's response (loopback HTTP, release build)");
        let t = TestDb::sqlite().await;
        measure("sqlite, one instance", &t, false, decisions).await;
        t.cleanup().await;
        if let Some(t) = TestDb::postgres().await {
            measure("postgres, one instance", &t, false, decisions).await;
            measure("postgres, two instances (NOTIFY)", &t, true, decisions).await;
            t.cleanup().await;
        }
    });
}
