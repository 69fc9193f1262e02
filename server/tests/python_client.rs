//! The Python client (`clients/python/`) and the example agent (`examples/`) against a
//! real Flightdeck on SQLite: the client's own tests, then the example agent killed after
//! its second email and run again, which must leave each email in the outbox once.

mod common;

use domain::access::Scope;
use domain::canonical::SideEffect;
use domain::policy::ToolPolicy;
use std::path::PathBuf;
use std::process::Command;
use store::policies;
use store::testing::TestDb;

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn python() -> Option<&'static str> {
    let found = Command::new("python3").arg("--version").output().is_ok_and(|o| o.status.success());
    if !found {
        assert!(std::env::var_os("CI").is_none(), "CI must run the Python client's tests: install python3");
        eprintln!("skipping the Python client's tests: no python3");
    }
    found.then_some("python3")
}

#[tokio::test(flavor = "multi_thread")]
async fn the_python_client_and_the_example_agent_work_against_a_real_flightdeck() {
    let Some(python) = python() else { return };
    let t = TestDb::sqlite().await;
    let s = common::live(&t, &[], &[Scope::Calls, Scope::Approvals, Scope::Escalations]).await;
    // Approvals for `wire_money` expire after a second: the client must see a denial.
    let policy = ToolPolicy {
        requires_approval: true,
        expiry_seconds: Some(1),
        ..ToolPolicy::class("wire_money", SideEffect::Irreversible)
    };
    policies::upsert(&t.db, &policy).await.unwrap();
    let root = workspace();
    let run = |args: &[&str]| {
        let mut cmd = Command::new(python);
        cmd.args(args).current_dir(&root).env("FLIGHTDECK_URL", &s.base).env("FLIGHTDECK_TOKEN", &s.agent);
        cmd
    };

    let tests = tokio::task::spawn_blocking({
        let mut cmd = run(&["-m", "unittest", "discover", "-s", "clients/python/tests", "-v"]);
        move || cmd.output().unwrap()
    })
    .await
    .unwrap();
    let log = String::from_utf8_lossy(&tests.stderr);
    assert!(tests.status.success(), "the Python client's tests:\n{log}");
    assert!(log.contains("Ran 16 tests"), "{log}");
    assert!(!log.contains("skipped"), "every test ran: {log}");

    let dir = tempfile::tempdir().unwrap();
    let outbox = dir.path().join("outbox.txt");
    let outbox = outbox.to_str().unwrap();
    let agent = ["examples/guarded_agent.py", "--run-id", "example-1", "--outbox", outbox];
    let crashed = tokio::task::spawn_blocking({
        let mut cmd = run(&[&agent[..], &["--crash-after", "2"]].concat());
        move || cmd.output().unwrap()
    })
    .await
    .unwrap();
    assert_eq!(crashed.status.code(), Some(3), "{}", String::from_utf8_lossy(&crashed.stderr));
    let rerun = tokio::task::spawn_blocking({
        let mut cmd = run(&agent);
        move || cmd.output().unwrap()
    })
    .await
    .unwrap();
    let said = String::from_utf8_lossy(&rerun.stdout);
    assert!(rerun.status.success(), "{said}{}", String::from_utf8_lossy(&rerun.stderr));
    assert_eq!(said.matches("already done").count(), 2, "{said}");
    let lines: Vec<String> = std::fs::read_to_string(outbox).unwrap().lines().map(str::to_string).collect();
    assert_eq!(lines.len(), 3, "each email sent exactly once: {lines:?}");
    for to in ["ana@example.com", "bo@example.com", "cy@example.com"] {
        assert_eq!(lines.iter().filter(|l| l.contains(to)).count(), 1, "{to}: {lines:?}");
    }
    t.cleanup().await;
}
