//! PostgreSQL stopped and started again under load. The scenario runs its own PostgreSQL
//! server (initdb in a temporary directory, on a socket of its own), so stopping it
//! disturbs nothing else. While it is down, `/readyz` says not ready and every export is
//! answered 503 with Retry-After; once it is back, Flightdeck recovers by itself (no
//! restart), and every acknowledged span is stored exactly once.

use super::load::{Exporters, Ledger, Workload};
use super::server::{free_port, readiness, wait_until, Server, Setup};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use store::Db;

/// A PostgreSQL server of the test's own.
pub struct PrivatePostgres {
    bin: PathBuf,
    data: PathBuf,
    pub url: String,
    port: u16,
    socket: PathBuf,
    _dir: tempfile::TempDir,
}

fn postgres_bin() -> Option<PathBuf> {
    let mut candidates: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("bin"))
        .filter(|p| p.join("initdb").exists())
        .collect();
    candidates.sort();
    candidates.pop().or_else(|| {
        let out = Command::new("pg_config").arg("--bindir").output().ok()?;
        Some(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
    })
}

/// Runs a PostgreSQL program; as root it runs as `postgres`, which PostgreSQL insists on.
fn pg(bin: &Path, program: &str, args: &[&str]) -> std::process::Output {
    let path = bin.join(program);
    let mut cmd = if unsafe { libc::geteuid() } == 0 {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(&path);
        c
    } else {
        Command::new(&path)
    };
    cmd.args(args).output().unwrap_or_else(|e| panic!("cannot run {program}: {e}"))
}

impl PrivatePostgres {
    /// None when no PostgreSQL server programs are installed.
    pub fn start() -> Option<PrivatePostgres> {
        let bin = postgres_bin()?;
        let dir = tempfile::tempdir().unwrap();
        if unsafe { libc::geteuid() } == 0 {
            let status = Command::new("chown").args(["-R", "postgres:postgres"]).arg(dir.path()).status().unwrap();
            assert!(status.success(), "chown the private PostgreSQL directory");
        }
        let data = dir.path().join("data");
        let socket = dir.path().to_path_buf();
        let out = pg(&bin, "initdb", &["-D", data.to_str().unwrap(), "-A", "trust", "-U", "flightdeck", "--no-sync"]);
        assert!(out.status.success(), "initdb: {}", String::from_utf8_lossy(&out.stderr));
        let port = free_port();
        let url = format!("postgres:///postgres?host={}&port={port}&user=flightdeck", socket.display());
        let db = PrivatePostgres { bin, data, url, port, socket, _dir: dir };
        db.up();
        Some(db)
    }

    pub fn up(&self) {
        let options = format!(
            "-p {} -k {} -c listen_addresses='' -c fsync=off -c max_connections=60",
            self.port,
            self.socket.display()
        );
        // The server's output goes to a file: a server holding this process' pipes open
        // would keep `output()` waiting for their end.
        let log = self.socket.join("postgres.log");
        let data = self.data.to_str().unwrap();
        let out = pg(&self.bin, "pg_ctl", &["-D", data, "-l", log.to_str().unwrap(), "-o", &options, "-w", "start"]);
        assert!(out.status.success(), "pg_ctl start: {}", String::from_utf8_lossy(&out.stderr));
    }

    /// Stops the server the way an operator's restart does (`fast`: sessions are cut).
    pub fn down(&self) {
        let out = pg(&self.bin, "pg_ctl", &["-D", self.data.to_str().unwrap(), "-m", "fast", "-w", "stop"]);
        assert!(out.status.success(), "pg_ctl stop: {}", String::from_utf8_lossy(&out.stderr));
    }
}

impl Drop for PrivatePostgres {
    fn drop(&mut self) {
        let _ = pg(&self.bin, "pg_ctl", &["-D", self.data.to_str().unwrap(), "-m", "immediate", "stop"]);
    }
}

/// A private PostgreSQL, or None (and a note) where the machine has none; CI has one.
pub fn private_postgres(scenario: &str) -> Option<PrivatePostgres> {
    let pg = PrivatePostgres::start();
    if pg.is_none() {
        assert!(std::env::var_os("CI").is_none(), "CI must run the {scenario} scenario: install PostgreSQL");
        eprintln!("skipping the {scenario} scenario: no PostgreSQL server programs (initdb) on this machine");
    }
    pg
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_stopped_under_load_answers_503_and_recovers_without_a_restart() {
    let _one_at_a_time = super::SERIAL.lock().await;
    let Some(postgres) = private_postgres("PostgreSQL outage") else { return };
    let dir = tempfile::tempdir().unwrap();
    let setup = Setup::new(dir.path(), Some(&postgres.url));
    let server = Server::start(&setup);
    let work = Workload::new(4_000, 1_500, 60);
    let ledger = Ledger::new(&work, false);
    let exporters = Exporters::start(&ledger, &work.bodies, &setup.otlp_url(), 4, false);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let acked_before_outage = ledger.acknowledged().len();

    postgres.down();
    let stopped = Instant::now();
    let base = setup.web_base();
    let not_ready_after =
        wait_until(Duration::from_secs(20), "readiness going false", || async { readiness(&base).await == Some(503) })
            .await;
    let refused_before = ledger.statuses().get(&503).copied().unwrap_or(0);
    tokio::time::sleep(Duration::from_secs(super::phase_seconds())).await;
    let refused_while_down = ledger.statuses().get(&503).copied().unwrap_or(0) - refused_before;

    postgres.up();
    let restarted = Instant::now();
    let ready_after =
        wait_until(Duration::from_secs(60), "readiness coming back", || async { readiness(&base).await == Some(200) })
            .await;
    let acked_now = ledger.acknowledged().len();
    let ingest_after =
        wait_until(Duration::from_secs(60), "ingest recovering", || async { ledger.acknowledged().len() > acked_now })
            .await
            .max(ready_after);
    exporters.stop().await;
    Exporters::start(&ledger, &work.bodies, &setup.otlp_url(), 4, true).finish().await;
    assert!(server.stop(), "a graceful stop at the end");

    let db = Db::connect(&postgres.url).await.unwrap();
    let v = super::verify::stored_exactly_once(&db, &work, &ledger.acknowledged(), true, "postgres outage").await;
    db.close().await;
    eprintln!(
        "chaos outage postgres: stopped under load for {:.1} s; not ready after {:.1} s; {refused_while_down} exports \
         answered 503 + Retry-After while down ({} acknowledged before the stop); ready {:.1} s and ingesting {:.1} s \
         after PostgreSQL was back, no restart; {} acknowledged spans stored once, 0 lost",
        restarted.duration_since(stopped).as_secs_f64(),
        not_ready_after.as_secs_f64(),
        acked_before_outage,
        ready_after.as_secs_f64(),
        ingest_after.as_secs_f64(),
        v.acknowledged_spans,
    );
    assert!(ledger.broken().is_empty(), "every refusal was a 503 with Retry-After: {:?}", ledger.broken());
    assert!(refused_while_down > 0, "exports were refused while PostgreSQL was down");
}
