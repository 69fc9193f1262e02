//! The MCP gateway with real MCP peers, no mocks: the official Python SDK (`mcp`, pinned in
//! `tests/mcp/requirements.txt`) as the upstream server (`tests/mcp/upstream.py`) and as
//! the client (`tests/mcp/client.py`), through both ways in (`flightdeck mcp proxy` over
//! stdio, `/mcp/{server}` over Streamable HTTP) of a real `flightdeck serve`, on SQLite and
//! PostgreSQL. The interpreter is `FLIGHTDECK_PYTHON`; without it (or without `mcp`) the
//! tests are skipped loudly, and fail when `CI` is set.

mod common;

use common::serving::Serving;

use app::auth::password;
use domain::access::{Role, Scope};
use domain::approvals::ApprovalStatus;
use domain::ledger::EntryState;
use serde_json::{json, Value};
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use store::approvals::{self, ApprovalFilter};
use store::testing::TestDb;
use store::{ledger, runs, spans, users, Db};

fn here() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/mcp")
}

/// The interpreter with the pinned SDK, or none (skipped loudly; CI fails instead).
fn python() -> Option<String> {
    let python = std::env::var("FLIGHTDECK_PYTHON").unwrap_or_else(|_| "python3".into());
    let ok = Command::new(&python)
        .args(["-c", "import mcp, httpx2; from mcp.server.mcpserver import MCPServer"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must run the MCP gateway tests: set FLIGHTDECK_PYTHON to an interpreter with server/tests/mcp/requirements.txt"
        );
        eprintln!(
            "SKIPPED: the MCP gateway tests need FLIGHTDECK_PYTHON with `pip install -r server/tests/mcp/requirements.txt` ({python} lacks it)"
        );
    }
    ok.then_some(python)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A `flightdeck serve` process on the test's database, with `config` as its file.
fn serve(database_url: &str, dir: &Path, config: &str) -> Serving {
    let file = dir.join("flightdeck.toml");
    std::fs::write(&file, config).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_flightdeck"));
    command
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("RUST_LOG", "warn,flightdeck=info")
        .env("DATABASE_URL", database_url)
        .args(["--config", file.to_str().unwrap(), "serve", "--data-dir", dir.to_str().unwrap()]);
    Serving::start(command)
}

/// The test client: its events as they come, one JSON object per line.
struct Peer {
    child: Child,
    events: mpsc::Receiver<Value>,
    seen: Vec<Value>,
}

impl Peer {
    fn start(mut command: Command) -> Peer {
        let mut child = command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        let stdout = child.stdout.take().unwrap();
        let stderr = child.stderr.take().unwrap();
        let (tx, events) = mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
                match serde_json::from_str::<Value>(&line) {
                    Ok(v) => drop(tx.send(v)),
                    Err(_) => eprintln!("client: {line}"),
                }
            }
        });
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
                if std::env::var_os("FLIGHTDECK_MCP_TEST_LOG").is_some()
                    || line.contains("Error")
                    || line.contains("panicked")
                {
                    eprintln!("client/proxy: {line}");
                }
            }
        });
        Peer { child, events, seen: Vec::new() }
    }

    /// The next event named `event` (others before it are kept in `seen`).
    fn next(&mut self, event: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let v =
                self.events.recv_timeout(left).unwrap_or_else(|_| panic!("no `{event}` event; saw {:#?}", self.seen));
            self.seen.push(v.clone());
            if v["event"] == event {
                return v;
            }
            assert_ne!(v["event"], "closed", "the client closed while waiting for `{event}`: {:#?}", self.seen);
        }
    }

    fn called(&mut self, label: &str) -> Value {
        let v = self.next("called");
        assert_eq!(v["label"], label, "{:#?}", self.seen);
        v
    }

    fn finish(mut self) {
        self.next("closed");
        let _ = self.child.wait();
    }
}

fn outbox(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path).unwrap_or_default().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

async fn pending(db: &Db, tool: &str) -> domain::approvals::Approval {
    let filter = ApprovalFilter { tool: Some(tool.into()), ..Default::default() };
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(a) = approvals::pending(db, &filter, 10).await.unwrap().into_iter().next() {
            return a;
        }
        assert!(Instant::now() < deadline, "no pending approval for {tool}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A person signed in to the server under test.
async fn approver(base: &str) -> common::Person {
    let http = reqwest::Client::builder().cookie_store(true).build().unwrap();
    let p = common::Person { http, base: base.to_string() };
    let (status, body) =
        p.call("login", &[("username", "alice"), ("password", common::PASSWORD), ("next", "/runs")]).await;
    assert!(status.is_success(), "login: {status} {body}");
    p
}

async fn decide(p: &common::Person, a: &domain::approvals::Approval, decision: &str, extra: &[(&str, &str)]) {
    let mut form = vec![("id", a.id.as_str()), ("decision", decision), ("payload_sha256", a.payload_sha256.as_str())];
    form.extend_from_slice(extra);
    let (status, body) = p.call("decide_approval", &form).await;
    assert!(status.is_success(), "{decision}: {status} {body}");
}

/// The configuration both transports run under: a spawned upstream `files`, and the
/// policies the scenario exercises.
fn config(python: &str, outbox: &Path, extra: &str) -> String {
    let upstream = here().join("upstream.py");
    format!(
        r#"approval_recheck_seconds = 1
body_policy = "all"

[[mcp_servers]]
name = "files"
command = {python:?}
args = [{upstream:?}, "--outbox", {outbox:?}]
{extra}
[[tool_policies]]
pattern = "files/send_email"
side_effect = "irreversible"
requires_approval = true

[[tool_policies]]
pattern = "wire_money"
side_effect = "irreversible"
requires_approval = true
expiry_seconds = 2

[[tool_policies]]
pattern = "files/read_*"
side_effect = "read"
fail_open = true
"#,
        upstream = upstream.to_str().unwrap(),
        outbox = outbox.to_str().unwrap(),
    )
}

async fn people_and_token(t: &TestDb) -> String {
    users::create(&t.db, "alice", &password::hash(common::PASSWORD), &[Role::Approver]).await.unwrap();
    common::token(&t.db, "mcp-agent", &[Scope::Mcp]).await
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Way {
    Stdio,
    Http,
}

fn client(python: &str, way: Way, server: &Serving, token: &str, outbox: &Path, steps: &Value) -> Command {
    let mut c = Command::new(python);
    c.arg(here().join("client.py")).args(["--steps", &steps.to_string()]);
    match way {
        Way::Http => {
            c.args(["--url", &format!("{}/mcp/files", server.base), "--token", token]);
        }
        Way::Stdio => {
            c.env("FLIGHTDECK_URL", &server.base).env("FLIGHTDECK_TOKEN", token);
            c.args(["--", env!("CARGO_BIN_EXE_flightdeck"), "mcp", "proxy", "--name", "files", "--", python]);
            c.arg(here().join("upstream.py")).args(["--outbox", outbox.to_str().unwrap()]);
        }
    }
    c
}

/// An argument with a credential in it: the upstream gets it, Flightdeck stores none.
const SECRET_LINE: &str = "one, key sk-proj-4f3kQ9xT7bLm2VpN8rZs1WcY";
const SECRET: &str = "4f3kQ9xT7bLm2VpN8rZs1WcY";

/// Everything a client does through the gateway, on one transport and one database.
async fn the_whole_gate(python: &str, way: Way, t: &TestDb) {
    let dir = tempfile::tempdir().unwrap();
    let box_path = dir.path().join("outbox.jsonl");
    let token = people_and_token(t).await;
    let server = serve(&t.url, dir.path(), &config(python, &box_path, ""));
    let alice = approver(&server.base).await;
    let steps = json!([
        "list",
        {"tool": "read_file", "args": {"path": "/etc/motd"}, "label": "read"},
        {"tool": "append_line", "args": {"text": SECRET_LINE}, "label": "append"},
        {"tool": "append_line", "args": {"text": SECRET_LINE}, "label": "append-again"},
        {"tool": "send_email", "args": {"to": "ana@example.com", "body": "hi"}, "label": "approve"},
        {"tool": "send_email", "args": {"to": "bo@example.com", "body": "hey"}, "label": "deny"},
        {"tool": "wire_money", "args": {"amount": 5}, "label": "expire"},
        {"tool": "slow_write", "args": {"seconds": 120}, "label": "kill"},
    ]);
    let mut peer = Peer::start(client(python, way, &server, &token, &box_path, &steps));

    let connected = peer.next("connected");
    assert_eq!(connected["protocol"], "2025-11-25", "server/discover refused, so the SDK used initialize");
    let tools = peer.next("tools");
    let read_file = tools["tools"].as_array().unwrap().iter().find(|t| t["name"] == "read_file").unwrap().clone();
    assert_eq!(
        read_file["_meta"],
        json!({"io.example/unknown": {"kept": [1, 2]}}),
        "a field the gateway does not know, unchanged"
    );
    assert_eq!(read_file["annotations"], json!({"readOnlyHint": true}));
    assert_eq!(tools["tools"].as_array().unwrap().len(), 6);
    assert_eq!(peer.next("resource")["text"], json!(["buy milk"]));
    assert_eq!(peer.next("prompt")["text"], json!(["Say hello to Ana."]));
    peer.next("pong");

    let read = peer.called("read");
    assert_eq!((read["is_error"].as_bool(), read["text"].as_str()), (Some(false), Some("contents of /etc/motd")));
    let append = peer.called("append");
    assert_eq!(append["is_error"], false, "{append}");
    let again = peer.called("append-again");
    assert_eq!(again["is_error"], false, "{again}");
    assert_eq!(again["meta"]["io.flightdeck/deduped"], true, "answered from the ledger: {again}");
    assert_eq!(again["text"], append["text"], "with the stored result");
    assert_eq!(outbox(&box_path).len(), 1, "the upstream ran append_line once");

    peer.next("calling");
    let asked = pending(&t.db, "files/send_email").await;
    assert_eq!(
        serde_json::from_str::<Value>(&asked.arguments).unwrap(),
        json!({"to": "ana@example.com", "body": "hi"})
    );
    assert_eq!(asked.agent.as_deref(), Some("gateway-test-client"));
    // Held past a progress tick: the client hears that it waits.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let edited = r#"{"to": "ana@example.com", "body": "hello, edited"}"#;
    decide(&alice, &asked, "approve", &[("arguments", edited), ("respond", "friendlier")]).await;
    let approved = peer.called("approve");
    assert_eq!(approved["is_error"], false, "{approved}");
    assert!(approved["progress"].as_u64().unwrap() >= 1, "progress while held: {approved}");
    let sent = outbox(&box_path);
    assert_eq!(
        sent.last().unwrap()["arguments"],
        json!({"to": "ana@example.com", "body": "hello, edited"}),
        "exactly the edit"
    );

    peer.next("calling");
    let asked = pending(&t.db, "files/send_email").await;
    decide(&alice, &asked, "deny", &[("reason", "not to bo, ever")]).await;
    let denied = peer.called("deny");
    assert_eq!(denied["is_error"], true, "{denied}");
    assert!(denied["text"].as_str().unwrap().contains("not to bo, ever"), "the approver's message: {denied}");

    let expired = peer.called("expire");
    assert_eq!(expired["is_error"], true, "{expired}");
    assert_eq!(outbox(&box_path).len(), 2, "neither the denied nor the expired call reached the upstream");
    // The server's expiry job marks it within a second or so.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let wire = approvals::for_run(&t.db, &asked.run_id).await.unwrap();
        if wire.iter().any(|a| a.tool == "files/wire_money" && a.status == ApprovalStatus::Expired) {
            break;
        }
        assert!(Instant::now() < deadline, "{wire:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    peer.next("calling");
    let pid_file = PathBuf::from(format!("{}.pid", box_path.display()));
    let deadline = Instant::now() + Duration::from_secs(30);
    while !pid_file.exists() {
        assert!(Instant::now() < deadline, "slow_write never started");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    assert!(Command::new("kill").args(["-9", pid.trim()]).status().unwrap().success());
    let killed = peer.called("kill");
    assert_eq!(killed["is_error"], true, "{killed}");
    assert!(killed["text"].as_str().unwrap().contains("unknown"), "{killed}");
    peer.finish();

    let run_id = asked.run_id.clone();
    let calls = ledger::for_run(&t.db, &run_id).await.unwrap();
    let slow = calls.iter().find(|c| c.tool == "files/slow_write").expect("the killed call is in the ledger");
    assert_eq!(slow.state, EntryState::Unknown, "never started for ever: {slow:?}");
    assert!(slow.escalation_id.is_some(), "its escalation opened at once: {slow:?}");
    let append = calls.iter().find(|c| c.tool == "files/append_line").unwrap();
    assert_eq!((append.state, append.deduped), (EntryState::Succeeded, 1));
    assert!(calls.iter().all(|c| c.state != EntryState::Started), "{calls:?}");
    assert!(!calls.iter().any(|c| c.tool == "files/read_file"), "read-only calls do not go through the ledger");

    // The session as a run, with its tool spans, from the gateway alone.
    let deadline = Instant::now() + Duration::from_secs(20);
    let detail = loop {
        let detail = runs::get(&t.db, &run_id).await.unwrap();
        if let Some(d) = detail.clone().filter(|d| d.run.tool_calls >= 7 && d.run.ended_at.is_some()) {
            break d;
        }
        assert!(Instant::now() < deadline, "the run with its tool spans never arrived: {detail:#?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(detail.run.agent.as_deref(), Some("gateway-test-client"));
    assert_eq!(detail.run.terminal_reason, domain::canonical::TerminalReason::Escalated, "{:?}", detail.run);
    let outcomes: Vec<(String, String)> =
        detail.tool_call_list.iter().map(|c| (c.tool.clone(), c.outcome.as_str().to_string())).collect();
    for expected in [
        ("files/read_file", "ok"),
        ("files/append_line", "deduped"),
        ("files/send_email", "ok"),
        ("files/send_email", "denied"),
        ("files/wire_money", "denied"),
        ("files/slow_write", "unknown"),
    ] {
        assert!(outcomes.iter().any(|(t, o)| (t.as_str(), o.as_str()) == expected), "{expected:?} in {outcomes:?}");
    }
    let sent_email =
        detail.tool_call_list.iter().find(|c| c.tool == "files/send_email" && c.outcome.as_str() == "ok").unwrap();
    assert!(sent_email.approval_id.is_some(), "the execution names its approval");
    let stored = spans::of_run(&t.db, &run_id).await.unwrap();
    assert!(stored.iter().any(|s| s.name.starts_with("invoke_agent")), "the session's root span");
    assert!(outbox(&box_path)[0]["arguments"]["text"].as_str().unwrap().contains(SECRET), "the upstream got it");
    let kept = format!("{stored:?} {:?} {calls:?}", runs::bodies(&t.db, &run_id).await.unwrap());
    assert!(kept.contains("[REDACTED]") && !kept.contains(SECRET), "redacted as for ingest: {kept}");
    let violations = approvals::violations_for_run(&t.db, &run_id).await.unwrap();
    assert!(violations.is_empty(), "the gateway ran exactly what was approved: {violations:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn through_the_stdio_proxy_every_call_goes_through_the_gate() {
    let Some(python) = python() else { return };
    for t in TestDb::each_backend().await {
        the_whole_gate(&python, Way::Stdio, &t).await;
        t.cleanup().await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn through_streamable_http_every_call_goes_through_the_gate() {
    let Some(python) = python() else { return };
    for t in TestDb::each_backend().await {
        the_whole_gate(&python, Way::Http, &t).await;
        t.cleanup().await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_proxy_without_flightdeck_fails_closed_except_for_a_read_tool_that_fails_open() {
    let Some(python) = python() else { return };
    let t = TestDb::sqlite().await;
    let dir = tempfile::tempdir().unwrap();
    let box_path = dir.path().join("outbox.jsonl");
    let token = people_and_token(&t).await;
    let server = serve(&t.url, dir.path(), &config(&python, &box_path, ""));
    let go = dir.path().join("flightdeck-is-down");
    let steps = json!([
        "list",
        {"wait_file": go.to_str().unwrap()},
        {"tool": "read_file", "args": {"path": "/a"}, "label": "read"},
        {"tool": "append_line", "args": {"text": "x"}, "label": "write"},
        {"tool": "unclassified", "args": {"x": 1}, "label": "unclassified"},
    ]);
    let mut peer = Peer::start(client(&python, Way::Stdio, &server, &token, &box_path, &steps));
    peer.next("waiting");
    // The proxy asked about the listed tools in the background; give it a moment.
    tokio::time::sleep(Duration::from_millis(500)).await;
    drop(server);
    std::fs::write(&go, "").unwrap();
    let read = peer.called("read");
    assert_eq!(
        (read["is_error"].as_bool(), read["text"].as_str()),
        (Some(false), Some("contents of /a")),
        "fail_open: {read}"
    );
    for label in ["write", "unclassified"] {
        let refused = peer.called(label);
        assert_eq!(refused["is_error"], true, "{refused}");
        assert!(refused["text"].as_str().unwrap().contains("cannot be reached"), "{refused}");
    }
    peer.finish();
    assert!(outbox(&box_path).is_empty(), "nothing with a side effect ran without the gate");
    t.cleanup().await;
}

/// Writes raw lines to a proxy and reads its answers: what no SDK would send.
#[tokio::test(flavor = "multi_thread")]
async fn malformed_and_oversized_messages_get_the_specifications_errors_over_stdio() {
    let Some(python) = python() else { return };
    let t = TestDb::sqlite().await;
    let dir = tempfile::tempdir().unwrap();
    let box_path = dir.path().join("outbox.jsonl");
    let token = people_and_token(&t).await;
    let server = serve(&t.url, dir.path(), &config(&python, &box_path, ""));
    let mut proxy = Command::new(env!("CARGO_BIN_EXE_flightdeck"))
        .env("FLIGHTDECK_URL", &server.base)
        .env("FLIGHTDECK_TOKEN", &token)
        .args(["mcp", "proxy", "--name", "files", "--", &python])
        .arg(here().join("upstream.py"))
        .args(["--outbox", box_path.to_str().unwrap()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = proxy.stdin.take().unwrap();
    let mut lines = std::io::BufReader::new(proxy.stdout.take().unwrap()).lines();
    let mut send = move |sent: &[u8], answered: bool| -> Value {
        stdin.write_all(sent).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
        if !answered {
            return Value::Null;
        }
        serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap()
    };
    let code = |v: &Value| v["error"]["code"].as_i64().unwrap();
    assert_eq!(code(&send(b"{not json", true)), -32700);
    assert_eq!(code(&send(br#"{"jsonrpc":"2.0","id":1}"#, true)), -32600);
    assert_eq!(code(&send(br#"{"jsonrpc":"1.0","id":2,"method":"ping"}"#, true)), -32600);
    let huge = format!(r#"{{"jsonrpc":"2.0","id":3,"method":"ping","params":{{"pad":"{}"}}}}"#, "x".repeat(5 << 20));
    let refused = send(huge.as_bytes(), true);
    assert_eq!(code(&refused), -32600);
    assert!(refused["error"]["message"].as_str().unwrap().contains("limit"), "{refused}");
    let batch = send(br#"[{"jsonrpc":"2.0","id":4,"method":"ping"}]"#, true);
    assert_eq!(code(&batch), -32600, "no batches before 2025-03-26 is negotiated: {batch}");
    let discover = send(br#"{"jsonrpc":"2.0","id":5,"method":"server/discover","params":{}}"#, true);
    assert_eq!(code(&discover), -32601);
    let init = send(
        br#"{"jsonrpc":"2.0","id":6,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"},"x-unknown":{"a":1}}}"#,
        true,
    );
    assert_eq!(init["result"]["protocolVersion"], "2025-06-18", "{init}");
    send(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#, false);
    let bad_args = send(
        br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"append_line","arguments":"x"}}"#,
        true,
    );
    assert_eq!(code(&bad_args), -32602);
    let bad_meta = send(
        br#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"append_line","arguments":{"text":"a"},"_meta":{"io.flightdeck/step":-1}}}"#,
        true,
    );
    assert_eq!(code(&bad_meta), -32602);
    assert_eq!(send(br#"{"jsonrpc":"2.0","id":"p","method":"ping"}"#, true)["result"], json!({}), "still serving");
    drop(send);
    assert!(proxy.wait().unwrap().success(), "closing stdin ends the proxy");
    assert!(outbox(&box_path).is_empty(), "nothing reached a tool");
    t.cleanup().await;
}

/// The HTTP endpoint's own answers: tokens, sessions, sizes, and a stream resumed with
/// `Last-Event-ID` after its connection broke while a call was held.
#[tokio::test(flavor = "multi_thread")]
async fn the_http_endpoint_checks_tokens_and_sessions_and_resumes_a_broken_stream() {
    let Some(python) = python() else { return };
    let t = TestDb::sqlite().await;
    let dir = tempfile::tempdir().unwrap();
    let box_path = dir.path().join("outbox.jsonl");
    let token = people_and_token(&t).await;
    let reader = common::token(&t.db, "reader", &[Scope::Read, Scope::Calls]).await;
    let server = serve(&t.url, dir.path(), &config(&python, &box_path, ""));
    let url = format!("{}/mcp/files", server.base);
    let http = reqwest::Client::new();
    let post = |token: &str, session: Option<&str>, body: String| {
        let mut r = http
            .post(&url)
            .bearer_auth(token)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .body(body);
        if let Some(s) = session {
            r = r.header("mcp-session-id", s);
        }
        r.send()
    };
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw-http","version":"0"}}}"#;
    assert_eq!(post("fdk_nope", None, init.into()).await.unwrap().status(), 401);
    assert_eq!(post(&reader, None, init.into()).await.unwrap().status(), 403, "a token needs the mcp scope");
    let res = post(&token, None, "{not json".into()).await.unwrap();
    assert_eq!(res.status(), 400);
    assert_eq!(res.json::<Value>().await.unwrap()["error"]["code"], -32700);
    let res = post(&token, None, format!(r#"{{"pad":"{}"}}"#, "x".repeat(5 << 20))).await.unwrap();
    assert_eq!(res.status(), 413);
    let ping = r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#;
    assert_eq!(post(&token, None, ping.into()).await.unwrap().status(), 400, "no session yet");
    assert_eq!(post(&token, Some("nope"), ping.into()).await.unwrap().status(), 404);

    let res = post(&token, None, init.into()).await.unwrap();
    assert_eq!(res.status(), 200);
    let session = res.headers()["mcp-session-id"].to_str().unwrap().to_string();
    let body = res.text().await.unwrap();
    assert!(body.contains("\"protocolVersion\":\"2025-06-18\""), "{body}");
    let other = common::token(&t.db, "other-agent", &[Scope::Mcp]).await;
    assert_eq!(post(&other, Some(&session), ping.into()).await.unwrap().status(), 404, "a session is its token's");
    let note = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    assert_eq!(post(&token, Some(&session), note.into()).await.unwrap().status(), 202);

    // A held call: read its first progress event, then break the connection.
    let call = r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"send_email","arguments":{"to":"x@example.com","body":"b"},"_meta":{"progressToken":"t1"}}}"#;
    let mut res = post(&token, Some(&session), call.into()).await.unwrap();
    assert_eq!(res.headers()["content-type"], "text/event-stream");
    let mut seen = String::new();
    while !seen.contains("\n\n") {
        seen.push_str(&String::from_utf8_lossy(&res.chunk().await.unwrap().expect("a progress event")));
    }
    assert!(seen.contains("notifications/progress"), "{seen}");
    let last_id = seen.lines().find_map(|l| l.strip_prefix("id:")).unwrap().trim().to_string();
    drop(res);
    let asked = pending(&t.db, "files/send_email").await;
    let alice = approver(&server.base).await;
    decide(&alice, &asked, "approve", &[]).await;
    let resumed = http
        .get(&url)
        .bearer_auth(&token)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &session)
        .header("last-event-id", &last_id)
        .send()
        .await
        .unwrap();
    assert_eq!(resumed.status(), 200);
    let text = resumed.text().await.unwrap();
    assert!(text.contains(r#""id":3"#) && text.contains("sent to x@example.com"), "the answer after the break: {text}");
    assert_eq!(outbox(&box_path).len(), 1, "and the call ran once");

    let deleted = http.delete(&url).bearer_auth(&token).header("mcp-session-id", &session).send().await.unwrap();
    assert_eq!(deleted.status(), 204);
    assert_eq!(post(&token, Some(&session), ping.into()).await.unwrap().status(), 404, "an ended session is gone");
    t.cleanup().await;
}

/// `[[mcp_servers]]` with `url`: a remote Streamable HTTP server behind the gateway.
#[tokio::test(flavor = "multi_thread")]
async fn a_remote_streamable_http_server_is_relayed_too() {
    let Some(python) = python() else { return };
    let t = TestDb::sqlite().await;
    let dir = tempfile::tempdir().unwrap();
    let box_path = dir.path().join("outbox.jsonl");
    let port = free_port();
    let mut upstream = Command::new(&python)
        .arg(here().join("upstream.py"))
        .args(["--outbox", box_path.to_str().unwrap(), "--port", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "the upstream did not listen");
        std::thread::sleep(Duration::from_millis(100));
    }
    let token = people_and_token(&t).await;
    let remote = format!("[[mcp_servers]]\nname = \"remote\"\nurl = \"http://127.0.0.1:{port}/mcp\"\n");
    let server = serve(&t.url, dir.path(), &config(&python, &box_path, &remote));
    let steps = json!([
        "list",
        {"tool": "read_file", "args": {"path": "/r"}, "label": "read"},
        {"tool": "append_line", "args": {"text": "r"}, "label": "append"},
        {"tool": "append_line", "args": {"text": "r"}, "label": "append-again"},
    ]);
    let mut c = Command::new(&python);
    c.arg(here().join("client.py")).args(["--steps", &steps.to_string()]);
    c.args(["--url", &format!("{}/mcp/remote", server.base), "--token", &token]);
    let mut peer = Peer::start(c);
    assert_eq!(peer.next("connected")["protocol"], "2025-11-25");
    assert_eq!(peer.next("tools")["tools"].as_array().unwrap().len(), 6);
    assert_eq!(peer.called("read")["text"], "contents of /r");
    assert_eq!(peer.called("append")["is_error"], false);
    assert_eq!(peer.called("append-again")["meta"]["io.flightdeck/deduped"], true);
    peer.finish();
    assert_eq!(outbox(&box_path).len(), 1);
    let _ = upstream.kill();
    let _ = upstream.wait();
    t.cleanup().await;
}
