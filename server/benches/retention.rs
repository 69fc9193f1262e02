//! Retention benchmark on PostgreSQL (not a test): a day's partitions filled with runs
//! that arrived 40 days ago (`FLIGHTDECK_BENCH_RUNS`, default 1,000,000 runs, about
//! 8 million spans), then one pass of retention at 30 days while a writer keeps storing
//! new runs, as ingest would. Prints the day's size, how long the pass took, how long
//! dropping the day took and how long of it the tables were locked, and the writer's
//! commit times before and during the pass. Asserts nothing.
//!
//!   FLIGHTDECK_TEST_PG_URL=postgres:///postgres?host=/var/run/postgresql \
//!     cargo bench -p flightdeck --bench retention

use ingest::pipeline::{prepare, IngestSettings};
use loadgen::synth::{requests_for, Synth, SynthOptions};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use store::partitions;
use store::sql::Sql;
use store::testing::TestDb;
use store::{retention, write, Db};

const DAY_NS: u64 = 86_400 * 1_000_000_000;

/// Stores `runs` synthetic runs starting at `base_ns`, one second or so apart.
async fn fill(db: &Db, runs: usize, seed: u64, base_ns: u64) -> usize {
    let settings = IngestSettings::default();
    let mut synth = Synth::new(SynthOptions { seed, base_time_unix_nano: base_ns, ..SynthOptions::default() });
    let (mut stored, mut done) = (0, 0);
    while done < runs {
        let n = 2_000.min(runs - done);
        let batch: Vec<_> = (0..n).map(|_| synth.next_run()).collect();
        for req in requests_for(&batch, 8_000) {
            let prepared = prepare(&req, &settings, &[]);
            stored += write::commit(db, &prepared.spans, settings.body_policy).await.unwrap().stored as usize;
        }
        done += n;
        if done % 100_000 == 0 {
            println!("  {done} runs stored");
        }
    }
    stored
}

/// Commits batches of 100 new runs until `stop`; returns each commit's time.
async fn keep_writing(db: Db, stop: Arc<AtomicBool>, seed: u64) -> Vec<Duration> {
    let settings = IngestSettings::default();
    let now_ns = u64::try_from(store::now_ms()).unwrap() * 1_000_000;
    let mut synth = Synth::new(SynthOptions { seed, base_time_unix_nano: now_ns, ..SynthOptions::default() });
    let mut times = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let batch: Vec<_> = (0..100).map(|_| synth.next_run()).collect();
        for req in requests_for(&batch, 8_000) {
            let prepared = prepare(&req, &settings, &[]);
            let started = Instant::now();
            write::commit(&db, &prepared.spans, settings.body_policy).await.unwrap();
            times.push(started.elapsed());
        }
    }
    times
}

fn summary(mut times: Vec<Duration>) -> String {
    times.sort();
    let at = |p: f64| times[((times.len() - 1) as f64 * p) as usize].as_secs_f64() * 1000.0;
    match times.is_empty() {
        true => "no commits".into(),
        false => {
            format!("{} commits, p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms", times.len(), at(0.5), at(0.99), at(1.0))
        }
    }
}

/// The writer's commit times over `seconds` with nothing else running, or during `work`.
async fn while_writing<F: std::future::Future>(db: &Db, seed: u64, work: F) -> (F::Output, Vec<Duration>) {
    let stop = Arc::new(AtomicBool::new(false));
    let writer = tokio::spawn(keep_writing(db.clone(), stop.clone(), seed));
    let out = work.await;
    stop.store(true, Ordering::Relaxed);
    (out, writer.await.unwrap())
}

async fn size(db: &Db, expr: &str) -> f64 {
    let bytes: i64 = db.fetch_one_value(Sql::new(format!("SELECT ({expr})::BIGINT"))).await.unwrap();
    bytes as f64 / (1u64 << 30) as f64
}

#[tokio::main]
async fn main() {
    let runs: usize = std::env::var("FLIGHTDECK_BENCH_RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(1_000_000);
    let Some(t) = TestDb::postgres().await else { return };
    let db = &t.db;
    let now = store::now_ms();
    let today = partitions::day_of(now);
    let old_day = today - 40;
    // Runs arriving 40 days ago, started over the days before that, all past a 30-day
    // horizon.
    partitions::arrive_on(db, old_day, now).await.unwrap();
    let now_ns = u64::try_from(now).unwrap() * 1_000_000;
    let started = Instant::now();
    let spans = fill(db, runs, 7, now_ns - 60 * DAY_NS).await;
    println!("filled {runs} runs, {spans} spans in {:.0} s", started.elapsed().as_secs_f64());
    partitions::ensure_days(db, now).await.unwrap();
    fill(db, 20_000, 8, now_ns - DAY_NS).await;
    db.execute(Sql::new("VACUUM ANALYZE")).await.unwrap();

    let day_tables: Vec<String> = partitions::TABLES
        .iter()
        .map(|t| format!("pg_total_relation_size('{}')", partitions::partition_name(t, old_day)))
        .collect();
    println!(
        "day {}: {:.2} GiB in its partitions; database {:.2} GiB",
        partitions::date_label(old_day),
        size(db, &day_tables.join(" + ")).await,
        size(db, "pg_database_size(current_database())").await
    );

    let (_, quiet) = while_writing(db, 9, tokio::time::sleep(Duration::from_secs(20))).await;
    println!("writer alone, 20 s:      {}", summary(quiet));
    let started = Instant::now();
    let (swept, during) = while_writing(db, 10, retention::apply(db, 30, 7)).await;
    let swept = swept.unwrap();
    println!(
        "retention at 30 days:    {} runs in {:.1} s; partitions dropped: {}",
        swept.runs,
        started.elapsed().as_secs_f64(),
        swept
            .days
            .iter()
            .map(|d| format!(
                "{} ({} runs, {:.2} GiB) in {} ms: waited {} ms for the tables' lock, held it {} ms \
                 (the commit {} ms)",
                partitions::date_label(d.day),
                d.runs,
                d.bytes as f64 / (1u64 << 30) as f64,
                d.took_ms,
                d.waited_ms,
                d.locked_ms,
                d.commit_ms
            ))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!("writer during retention: {}", summary(during));
    t.cleanup().await;
}
