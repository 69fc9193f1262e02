//! The `flightdeck` binary as a user runs it: settings precedence, user and token
//! commands, first start, and graceful shutdown.

#[path = "common/serving.rs"]
mod serving;

use serving::Serving;
use std::io::Write;
use std::process::{Command, Stdio};

fn flightdeck(data_dir: &std::path::Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_flightdeck"));
    cmd.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("FLIGHTDECK_DATA_DIR", data_dir)
        .env("RUST_LOG", "warn");
    cmd
}

fn run_with_stdin(mut cmd: Command, input: &str) -> (bool, String, String) {
    let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

#[test]
fn flags_beat_environment_beat_file_beat_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("flightdeck.toml");
    std::fs::write(&file, "listen = \"127.0.0.1:7001\"\nsession_idle_minutes = 30\nsecure_cookies = true\n").unwrap();

    let mut cmd = flightdeck(dir.path());
    cmd.args(["--config", file.to_str().unwrap(), "config"]);
    let out = String::from_utf8(cmd.output().unwrap().stdout).unwrap();
    assert!(out.contains("listen               127.0.0.1:7001"), "file beats default:\n{out}");
    assert!(out.contains("session_idle_minutes 30"), "{out}");

    let mut cmd = flightdeck(dir.path());
    cmd.env("FLIGHTDECK_LISTEN", "127.0.0.1:7002").args(["--config", file.to_str().unwrap(), "config"]);
    let out = String::from_utf8(cmd.output().unwrap().stdout).unwrap();
    assert!(out.contains("listen               127.0.0.1:7002"), "environment beats file:\n{out}");

    let mut cmd = flightdeck(dir.path());
    cmd.env("FLIGHTDECK_LISTEN", "127.0.0.1:7002").env("FLIGHTDECK_CONFIG", &file).args([
        "config",
        "--listen",
        "127.0.0.1:7003",
    ]);
    let out = String::from_utf8(cmd.output().unwrap().stdout).unwrap();
    assert!(out.contains("listen               127.0.0.1:7003"), "flag beats environment:\n{out}");
    assert!(out.contains("secure_cookies       true"), "the file still fills the rest:\n{out}");

    let mut cmd = flightdeck(dir.path());
    cmd.env("DATABASE_URL", "postgres://fd:hunter2@db.internal/fd").arg("config");
    let out = String::from_utf8(cmd.output().unwrap().stdout).unwrap();
    assert!(!out.contains("hunter2") && out.contains("[REDACTED]"), "{out}");

    let mut cmd = flightdeck(dir.path());
    cmd.args(["config", "--listen", "nonsense"]);
    let out = cmd.output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("invalid value 'nonsense'"));
}

#[test]
fn users_and_tokens_are_managed_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let mut add = flightdeck(dir.path());
    add.args(["user", "add", "--role", "approver,operator", "olga"]);
    let (ok, _, err) = run_with_stdin(add, "olga-password-123\n");
    assert!(ok, "{err}");
    assert!(err.contains("created user olga with roles approver,operator"), "{err}");

    let mut weak = flightdeck(dir.path());
    weak.args(["user", "add", "pete"]);
    let (ok, _, err) = run_with_stdin(weak, "short\n");
    assert!(!ok && err.contains("at least 12 characters"), "{err}");

    let mut bad_role = flightdeck(dir.path());
    bad_role.args(["user", "add", "--role", "root", "pete"]);
    let (ok, _, err) = run_with_stdin(bad_role, "pete-password-123\n");
    assert!(!ok && err.contains("unknown role `root`"), "{err}");

    let mut generated = flightdeck(dir.path());
    generated.args(["user", "reset", "olga"]);
    let (ok, out, err) = run_with_stdin(generated, "");
    assert!(ok, "{err}");
    assert_eq!(out.trim().len(), 20, "a generated password on stdout: {out}");

    let list = flightdeck(dir.path()).args(["user", "list"]).output().unwrap();
    let listing = String::from_utf8_lossy(&list.stdout);
    assert!(listing.contains("olga") && listing.contains("approver,operator"), "{listing}");
    assert!(!listing.contains("pete"), "refused users were not created");

    let created =
        flightdeck(dir.path()).args(["token", "create", "ci-agent", "--scope", "ingest,read"]).output().unwrap();
    assert!(created.status.success(), "{}", String::from_utf8_lossy(&created.stderr));
    let secret = String::from_utf8(created.stdout).unwrap();
    assert!(secret.trim().starts_with("fdk_") && secret.trim().len() == 68, "only the secret on stdout: {secret}");

    let list = flightdeck(dir.path()).args(["token", "list"]).output().unwrap();
    let listing = String::from_utf8_lossy(&list.stdout);
    assert!(listing.contains("ci-agent") && listing.contains("ingest,read") && listing.contains("active"), "{listing}");
    assert!(!listing.contains(secret.trim()), "secrets are never listed");

    let revoked = flightdeck(dir.path()).args(["token", "revoke", "1"]).output().unwrap();
    assert!(revoked.status.success());
    let again = flightdeck(dir.path()).args(["token", "revoke", "1"]).output().unwrap();
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("already revoked"));

    let bad_scope = flightdeck(dir.path()).args(["token", "create", "x", "--scope", "write"]).output().unwrap();
    assert!(!bad_scope.status.success());
    assert!(String::from_utf8_lossy(&bad_scope.stderr).contains("unknown scope `write`"));
}

#[test]
fn first_start_prints_an_admin_password_that_signs_in_and_sigterm_stops_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let mut command = flightdeck(dir.path());
    command.arg("serve").env("RUST_LOG", "info");
    let mut server = Serving::start(command);
    let log = server.log();
    let printed =
        |label: &str| log.iter().find_map(|l| l.trim_start().strip_prefix(label).map(|v| v.trim().to_string()));
    let password = printed("password ").expect("the first start prints the admin password");
    assert_eq!(password.len(), 20, "{password}");
    let ingest_token = printed("ingest token ").expect("and an ingest token");
    assert!(ingest_token.starts_with("fdk_") && ingest_token.len() == 68, "{ingest_token}");

    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let client = reqwest::Client::builder().cookie_store(true).build().unwrap();
        let base = &server.base;
        let health = client.get(format!("{base}/healthz")).send().await.unwrap();
        assert_eq!(health.status(), 200);
        let login = client
            .post(format!("{base}/fn/login"))
            .form(&[("username", "admin"), ("password", password.as_str()), ("next", "/runs")])
            .send()
            .await
            .unwrap();
        assert_eq!(login.status(), 200);
        let page = client.get(format!("{base}/admin/users")).send().await.unwrap();
        assert_eq!(page.status(), 200);
        let html = page.text().await.unwrap();
        assert!(html.contains("admin") && html.contains("Users and roles"), "{html}");
    });

    // a second start does not make another admin or print a password
    let exit = server.terminate();
    assert!(exit.success(), "graceful shutdown exits 0, got {exit}");
    let rest = server.log().join("\n");
    assert!(rest.contains("shutting down"), "{rest}");

    let users = flightdeck(dir.path()).args(["user", "list"]).output().unwrap();
    let listing = String::from_utf8_lossy(&users.stdout);
    assert!(listing.contains("admin") && listing.contains("viewer,approver,operator,admin"), "{listing}");
}

/// `flightdeck serve` without ingest tokens, serving.
fn serve_for_ingest(data_dir: &std::path::Path) -> Serving {
    let mut command = flightdeck(data_dir);
    command.args(["serve", "--ingest-auth", "none"]).env("RUST_LOG", "info");
    Serving::start(command)
}

#[test]
fn an_acknowledged_export_survives_kill_9() {
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
    use prost::Message;

    let dir = tempfile::tempdir().unwrap();
    let server = serve_for_ingest(dir.path());
    let spans: Vec<Span> = (1..=200u32)
        .map(|n| Span {
            trace_id: vec![9; 16],
            span_id: n.to_be_bytes().repeat(2),
            parent_span_id: if n == 1 { vec![] } else { 1u32.to_be_bytes().repeat(2) },
            name: format!("span {n}"),
            start_time_unix_nano: 1_800_000_000_000_000_000,
            end_time_unix_nano: 1_800_000_000_000_000_001,
            ..Default::default()
        })
        .collect();
    let body = ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            scope_spans: vec![ScopeSpans { spans, ..Default::default() }],
            ..Default::default()
        }],
    }
    .encode_to_vec();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let status = runtime.block_on(async {
        reqwest::Client::new()
            .post(&server.otlp_http)
            .header("content-type", "application/x-protobuf")
            .body(body)
            .send()
            .await
            .unwrap()
            .status()
    });
    assert_eq!(status, 200);
    // No graceful shutdown: the process dies (SIGKILL) the instant the exporter has its answer.
    drop(server);

    let stored = runtime.block_on(async {
        let url = format!("sqlite://{}", dir.path().join("flightdeck.db").display());
        let db = store::Db::connect(&url).await.unwrap();
        store::spans::count(&db).await.unwrap()
    });
    assert_eq!(stored, 200, "every acknowledged span is on disk");
}

#[test]
fn demo_fills_a_fresh_database_through_the_ingest_path() {
    let dir = tempfile::tempdir().unwrap();
    let out = flightdeck(dir.path()).args(["demo", "--runs", "25"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("in 25 runs"), "{stderr}");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (runs, spans) = runtime.block_on(async {
        let url = format!("sqlite://{}", dir.path().join("flightdeck.db").display());
        let db = store::Db::connect(&url).await.unwrap();
        let page = store::runs::list(&db, &store::runs::RunQuery { limit: 100, ..Default::default() }).await.unwrap();
        (page.runs, store::spans::count(&db).await.unwrap())
    });
    assert_eq!(runs.len(), 25);
    assert!(spans > 25 * 3, "{spans} spans");
    assert!(runs.iter().any(|r| r.duplicate_side_effects > 0), "the demo shows duplicate side effects");
    assert!(runs.iter().any(|r| r.terminal_reason != domain::canonical::TerminalReason::Completed));
}

#[test]
fn a_backup_taken_while_serving_restores_into_a_new_server() {
    let dir = tempfile::tempdir().unwrap();
    let out = flightdeck(dir.path()).args(["demo", "--runs", "12"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // A guarded call, kept in the ledger's file of its own (flightdeck.ledger.db).
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let call_id = runtime.block_on(async {
        let url = format!("sqlite://{}", dir.path().join("flightdeck.db").display());
        let db = store::Db::connect(&url).await.unwrap();
        let call = domain::ledger::request::ValidCall {
            run_id: "run-backup".into(),
            step_index: 1,
            tool: "send_email".into(),
            arguments: serde_json::json!({"to": "ana@example.com"}),
            idempotency_key: None,
        };
        let rule = domain::ledger::answer::CallRule::default();
        let asked = store::ledger::ask(&db, &call, "k-backup", &call.arguments, &rule, None).await.unwrap();
        db.close().await;
        asked.entry.id
    });
    let server = serve_for_ingest(dir.path());
    let copy = dir.path().join("copy.db");
    let out = flightdeck(dir.path()).args(["backup", copy.to_str().unwrap()]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("backup written to") && stderr.contains("copy.ledger.db"), "{stderr}");
    let ledger_copy = dir.path().join("copy.ledger.db");
    assert!(ledger_copy.exists(), "the ledger's file is copied beside the main one");
    let again = flightdeck(dir.path()).args(["backup", copy.to_str().unwrap()]).output().unwrap();
    assert!(!again.status.success(), "an existing file is never overwritten");
    assert!(String::from_utf8_lossy(&again.stderr).contains("exists already"));
    let postgres = flightdeck(dir.path())
        .env("DATABASE_URL", "postgres://nobody@127.0.0.1:1/none")
        .args(["backup", dir.path().join("pg.db").to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!postgres.status.success());
    drop(server);

    // Restore: the two copies in place of flightdeck.db and flightdeck.ledger.db of a new
    // data directory, then serve.
    let restored = tempfile::tempdir().unwrap();
    std::fs::copy(&copy, restored.path().join("flightdeck.db")).unwrap();
    std::fs::copy(&ledger_copy, restored.path().join("flightdeck.ledger.db")).unwrap();
    drop(serve_for_ingest(restored.path()));
    let (runs, spans, call) = runtime.block_on(async {
        let url = format!("sqlite://{}", restored.path().join("flightdeck.db").display());
        let db = store::Db::connect(&url).await.unwrap();
        let page = store::runs::list(&db, &store::runs::RunQuery { limit: 100, ..Default::default() }).await.unwrap();
        let call = store::ledger::get(&db, &call_id).await.unwrap();
        (page.runs.len(), store::spans::count(&db).await.unwrap(), call)
    });
    assert_eq!(runs, 12, "every run is in the restored database");
    assert!(spans > 12 * 3, "{spans} spans");
    assert!(call.is_some_and(|(c, _)| c.idempotency_key == "k-backup"), "the guarded call is restored");
}

#[test]
fn serve_on_postgres_names_each_write_setting_that_slows_ingest_as_the_database_grows() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let Some(t) = runtime.block_on(store::testing::TestDb::postgres()) else { return };
    // The test server's own settings decide what is expected: CI's are PostgreSQL's
    // defaults (four lines); a tuned server gets none.
    let settings = runtime.block_on(store::postgres_settings::read(&t.db)).unwrap().expect("PostgreSQL");
    let expected = store::postgres_settings::advice(&settings);

    let dir = tempfile::tempdir().unwrap();
    let mut command = flightdeck(dir.path());
    command.args(["serve", "--ingest-auth", "none"]).env("DATABASE_URL", &t.url).env("RUST_LOG", "info");
    let log = Serving::start(command).log();
    runtime.block_on(t.cleanup());

    let advice: Vec<&String> = log.iter().filter(|l| l.contains("WARN") && l.contains("PostgreSQL: ")).collect();
    assert_eq!(advice.len(), expected.len(), "{log:#?}");
    for (logged, line) in advice.iter().zip(&expected) {
        assert!(logged.contains(line.as_str()) && logged.contains("docs/operations.md"), "{logged}");
    }
    assert!(log.iter().any(|l| l.contains("flightdeck is serving")), "{log:#?}");
}
