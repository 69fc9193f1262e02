//! MCP gateway benchmark (not a test): the latency of a `tools/call` that needs no
//! person, with the official Python SDK as client and upstream (`tests/mcp/bench.py`,
//! `tests/mcp/upstream.py`): directly over stdio, through `flightdeck mcp proxy`, and
//! through `/mcp/{server}` of a `flightdeck serve` on SQLite. Two tools: `read_file`
//! (read-only: forwarded at once) and `append_line` (a write with fresh arguments each
//! call: the ledger's ask, the call, the report). Prints p50 and p99; asserts nothing.
//!
//!   FLIGHTDECK_PYTHON=/path/to/venv/bin/python cargo bench -p flightdeck --bench mcp_gateway
//!   FLIGHTDECK_BENCH_CALLS=500 (calls per series)

use app::auth::secrets;
use domain::access::Scope;
use serde_json::Value;
use std::io::BufRead;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;
use store::testing::TestDb;
use store::tokens;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn here() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/mcp")
}

fn run(python: &str, mode: &str, calls: &str, extra: &[String], env: &[(&str, &str)]) -> Vec<Value> {
    let out = Command::new(python)
        .arg(here().join("bench.py"))
        .args(["--mode", mode, "--calls", calls])
        .args(extra)
        .envs(env.iter().copied())
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    assert!(out.status.success(), "{mode} failed");
    out.stdout.lines().map(|l| serde_json::from_str(&l.unwrap()).unwrap()).collect()
}

#[tokio::main]
async fn main() {
    let python = std::env::var("FLIGHTDECK_PYTHON").unwrap_or_else(|_| "python3".into());
    let calls = std::env::var("FLIGHTDECK_BENCH_CALLS").unwrap_or_else(|_| "500".into());
    let t = TestDb::sqlite().await;
    let (secret, prefix) = secrets::generate_token();
    let new = tokens::NewToken {
        name: "bench",
        prefix: &prefix,
        secret_sha256: &secrets::sha256_hex(&secret),
        scopes: &[Scope::Mcp],
        created_by: None,
    };
    tokens::create(&t.db, new).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let outbox = dir.path().join("outbox.jsonl");
    let upstream = [here().join("upstream.py").display().to_string(), "--outbox".into(), outbox.display().to_string()];
    let config = dir.path().join("flightdeck.toml");
    std::fs::write(
        &config,
        format!("[[mcp_servers]]\nname = \"files\"\ncommand = {python:?}\nargs = {:?}\n", upstream.to_vec()),
    )
    .unwrap();
    let web = free_port();
    let mut server = Command::new(env!("CARGO_BIN_EXE_flightdeck"))
        .env("DATABASE_URL", &t.url)
        .env("RUST_LOG", "warn")
        .args(["--config", config.to_str().unwrap(), "serve", "--data-dir", dir.path().to_str().unwrap()])
        .args(["--listen", &format!("127.0.0.1:{web}")])
        .args(["--otlp-http-listen", &format!("127.0.0.1:{}", free_port())])
        .args(["--otlp-grpc-listen", &format!("127.0.0.1:{}", free_port())])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let base = format!("http://127.0.0.1:{web}");
    for _ in 0..600 {
        if reqwest::get(format!("{base}/readyz")).await.is_ok_and(|r| r.status().is_success()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let fd = env!("CARGO_BIN_EXE_flightdeck").to_string();
    let mut rows = Vec::new();
    let mut direct = vec!["--".to_string(), python.clone()];
    direct.extend(upstream.iter().cloned());
    rows.extend(run(&python, "direct (stdio)", &calls, &direct, &[]));
    let mut proxied = vec![
        "--".into(),
        fd,
        "mcp".into(),
        "proxy".into(),
        "--name".into(),
        "files".into(),
        "--".into(),
        python.clone(),
    ];
    proxied.extend(upstream.iter().cloned());
    let env = [("FLIGHTDECK_URL", base.as_str()), ("FLIGHTDECK_TOKEN", secret.as_str())];
    rows.extend(run(&python, "flightdeck mcp proxy (stdio)", &calls, &proxied, &env));
    let http = vec!["--url".into(), format!("{base}/mcp/files"), "--token".into(), secret.clone()];
    rows.extend(run(&python, "/mcp/files (Streamable HTTP)", &calls, &http, &[]));
    let _ = server.kill();
    println!("\n| path | tool | calls | p50 | p99 |\n|---|---|---|---|---|");
    for r in &rows {
        println!(
            "| {} | {} | {} | {} ms | {} ms |",
            r["mode"].as_str().unwrap(),
            r["tool"].as_str().unwrap(),
            r["calls"],
            r["p50_ms"],
            r["p99_ms"]
        );
    }
    t.cleanup().await;
}
