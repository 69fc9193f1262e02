//! Disk full on SQLite: the data directory is a small tmpfs that ingest fills. Exports
//! are then answered 503 with Retry-After (nothing half-stored), the server stays up,
//! and once space is freed (the tmpfs grown, as an operator would free the disk) writes
//! resume without a restart. At the end the database passes SQLite's integrity check and
//! every acknowledged span is stored exactly once.
//!
//! Mounting needs root (CI runs as root); elsewhere the scenario says it is skipped.

use super::load::{Exporters, Ledger, Workload};
use super::server::{wait_until, Server, Setup};
use std::process::Command;
use std::time::{Duration, Instant};
use store::Db;

/// A tmpfs mounted on a temporary directory, unmounted when dropped.
struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    fn mount(mib: u32) -> Option<SmallDisk> {
        let dir = tempfile::tempdir().unwrap();
        let size = format!("size={mib}m");
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &size, "tmpfs"])
            .arg(dir.path())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        ok.then_some(SmallDisk { dir })
    }

    fn grow(&self, mib: u32) {
        let size = format!("remount,size={mib}m");
        let status = Command::new("mount").args(["-o", &size]).arg(self.dir.path()).status().unwrap();
        assert!(status.success(), "growing the tmpfs");
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(self.dir.path()).status();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_full_disk_is_answered_503_and_writes_resume_once_space_is_freed() {
    let _one_at_a_time = super::SERIAL.lock().await;
    let Some(disk) = SmallDisk::mount(12) else {
        assert!(std::env::var_os("CI").is_none(), "CI runs as root and must run the disk-full scenario");
        eprintln!("skipping the disk-full scenario: mounting a tmpfs needs root");
        return;
    };
    let setup = Setup::new(disk.dir.path(), None);
    let server = Server::start(&setup);
    let work = Workload::new(5_000, 2_500, 60);
    let ledger = Ledger::new(&work, false);
    let exporters = Exporters::start(&ledger, &work.bodies, &setup.otlp_url(), 4, false);
    let started = Instant::now();
    let full_after = wait_until(Duration::from_secs(120), "the disk filling up (503s)", || async {
        ledger.statuses().get(&503).copied().unwrap_or(0) >= 20
    })
    .await;
    let acked_when_full = ledger.acknowledged().len();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let base = setup.web_base();
    let health = reqwest::get(format!("{base}/healthz")).await.expect("the server is still up");
    assert_eq!(health.status(), 200, "the server stays up on a full disk");

    disk.grow(512);
    let acked_now = ledger.acknowledged().len();
    let resumed_after =
        wait_until(Duration::from_secs(60), "writes resuming", || async { ledger.acknowledged().len() > acked_now })
            .await;
    exporters.stop().await;
    Exporters::start(&ledger, &work.bodies, &setup.otlp_url(), 4, true).finish().await;
    assert!(server.stop(), "a graceful stop at the end");

    let path = disk.dir.path().join("flightdeck.db");
    let db = Db::connect(&format!("sqlite://{}", path.display())).await.unwrap();
    let Db::Sqlite { main: pool, ledger: ledger_pool } = &db else { unreachable!() };
    for pool in [pool, ledger_pool] {
        let integrity: String = sqlx::query_scalar("PRAGMA integrity_check").fetch_one(pool).await.unwrap();
        assert_eq!(integrity, "ok", "no corruption after the disk filled up");
    }
    let v = super::verify::stored_exactly_once(&db, &work, &ledger.acknowledged(), true, "sqlite disk full").await;
    db.close().await;
    let refused = ledger.statuses().get(&503).copied().unwrap_or(0);
    eprintln!(
        "chaos disk full sqlite: a 12 MiB data directory filled after {:.1} s ({acked_when_full} exports stored); \
         {refused} exports answered 503 + Retry-After; writes resumed {:.1} s after space was freed, no restart; \
         integrity_check ok; {} acknowledged spans stored once, 0 lost ({:.1} s)",
        full_after.as_secs_f64(),
        resumed_after.as_secs_f64(),
        v.acknowledged_spans,
        started.elapsed().as_secs_f64()
    );
    assert!(ledger.broken().is_empty(), "every refusal was a 503 with Retry-After: {:?}", ledger.broken());
}
