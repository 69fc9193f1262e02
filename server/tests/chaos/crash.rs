//! Crash under load, on both databases: `flightdeck serve` takes continuous OTLP/HTTP
//! exports from several exporters and is killed with SIGKILL at random moments, then
//! started again on the same database. Exporters re-send what got no answer, as OTLP
//! exporters do. At the end every acknowledged span is stored exactly once, and each
//! run's stored figures equal a recount from its stored spans.

use super::load::{Exporters, Ledger, Workload};
use super::server::{Server, Setup};
use super::{kills, Lcg};
use std::time::{Duration, Instant};
use store::testing::TestDb;

async fn crash_under_load(t: &TestDb, kills: usize, seed: u64) {
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let postgres = (t.backend() == "postgres").then_some(t.url.as_str());
    let setup = Setup::new(dir.path(), postgres);
    // Enough runs that the exporters are still busy at every kill (a release build
    // ingests about three times as fast).
    let runs_per_round = if cfg!(debug_assertions) { 1_500 } else { 5_000 };
    let work = Workload::new(seed, runs_per_round * (kills + 1), 60);
    let ledger = Ledger::new(&work, false);
    let mut rng = Lcg(seed);

    // Each round: start, export for a random while, kill. The last round drains the
    // queue and stops the server gracefully.
    for _ in 0..kills {
        let server = Server::start(&setup);
        let exporters = Exporters::start(&ledger, &work.bodies, &setup.otlp_url(), 4, false);
        tokio::time::sleep(Duration::from_millis(300 + rng.below(1200))).await;
        assert!(ledger.queued() > 0, "the workload lasts through every kill: each one lands under load");
        server.kill9();
        exporters.stop().await;
    }
    let server = Server::start(&setup);
    Exporters::start(&ledger, &work.bodies, &setup.otlp_url(), 4, true).finish().await;
    assert!(server.stop(), "a graceful stop at the end");

    let db = super::verify::server_db(dir.path(), postgres.map(|_| &t.db)).await;
    let acked = ledger.acknowledged();
    let v = super::verify::stored_exactly_once(&db, &work, &acked, true, t.backend()).await;
    let resent = ledger.resent.load(std::sync::atomic::Ordering::Relaxed);
    eprintln!(
        "chaos crash {}: {kills} kills under load, {} exports ({resent} re-sent after no answer), \
         {} acknowledged spans, {} stored, {} missing, {} duplicated, {} runs recounted, {:.1} s",
        t.backend(),
        work.bodies.len(),
        v.acknowledged_spans,
        v.stored_spans,
        v.missing,
        v.duplicated,
        v.runs_checked,
        started.elapsed().as_secs_f64()
    );
    assert!(ledger.broken().is_empty(), "every refusal was a 503 with Retry-After: {:?}", ledger.broken());
    assert!(resent > 0, "the kills interrupted exports, on {}", t.backend());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn acknowledged_spans_survive_kill_9_under_load_exactly_once() {
    let _one_at_a_time = super::SERIAL.lock().await;
    for (i, t) in TestDb::each_backend().await.into_iter().enumerate() {
        crash_under_load(&t, kills(), 1_000 + i as u64).await;
        t.cleanup().await;
    }
}
