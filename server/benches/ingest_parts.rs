//! Ingest benchmark by part (not a test): where the time of one acknowledged span goes,
//! without the HTTP server, the network or the load generator competing for the cores.
//! `cargo xtask bench` measures the whole path; this one splits it in two:
//!
//! 1. measure + decode + normalize: protobuf export requests (512 spans each, made by the
//!    load generator's synthesizer beforehand) measured within the decoding limits,
//!    decoded and normalized on one thread: what each OTLP worker does before a batch
//!    reaches the writer;
//! 2. storage: the normalized spans committed by `spans::write`, the single writer's
//!    transaction, in commits of a fixed size on a fresh database, on the writer's own
//!    connection with its log restarts and the server's background log checkpoint
//!    running beside it (SQLite), as in `flightdeck serve`.
//!
//! Prints spans per second and commit times; asserts nothing.
//!
//!   cargo bench -p flightdeck --bench ingest_parts          # SQLite
//!   FLIGHTDECK_TEST_PG_URL=postgres:///postgres?host=/var/run/postgresql cargo bench ...
//!                                                           # and PostgreSQL
//!   FLIGHTDECK_BENCH_SPANS=100000   spans per measurement (default 300,000)
//!   FLIGHTDECK_BENCH_COMMIT=2048    spans per commit (default: 2,048 and 8,192)
//!   FLIGHTDECK_BENCH_ROUNDS=3       decode + normalize rounds, the best reported (default 3)
//!   RUST_LOG=store=debug              each commit's phases (span rows, runs, commit)

use domain::span::NormalizedSpan;
use flightdeck::otlp::service::{memory_for, MEMORY_PER_WIRE_BYTE};
use ingest::decode::{self, Encoding};
use ingest::pipeline::{prepare, IngestSettings};
use loadgen::synth::{requests_for, Synth, SynthOptions};
use prost::Message;
use std::time::{Duration, Instant};
use store::testing::TestDb;
use store::{write, Db};

/// Spans per export request, as `cargo xtask bench` sends them.
const SPANS_PER_REQUEST: usize = 512;

fn env_usize(name: &str) -> Option<usize> {
    std::env::var(name).ok().and_then(|v| v.replace([',', '_'], "").parse().ok())
}

/// Export requests holding about `spans` spans of realistic runs, encoded as an exporter
/// sends them.
fn encoded_requests(spans: usize) -> Vec<Vec<u8>> {
    let mut synth = Synth::new(SynthOptions { seed: 29, ..SynthOptions::default() });
    let mut runs = Vec::new();
    let mut total = 0;
    while total < spans {
        let run = synth.next_run();
        total += run.span_count;
        runs.push(run);
    }
    requests_for(&runs, SPANS_PER_REQUEST).iter().map(Message::encode_to_vec).collect()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 * p).ceil() as usize).saturating_sub(1).min(sorted.len() - 1)]
}

/// Decodes and normalizes every request on this thread, `rounds` times (this machine's
/// timings vary by ±15 % from run to run, so the best round is the figure to compare);
/// returns the last round's normalized batches.
fn decode_and_normalize(requests: &[Vec<u8>], settings: &IngestSettings, rounds: usize) -> Vec<Vec<NormalizedSpan>> {
    let mut rates = Vec::new();
    let mut batches = Vec::new();
    for _ in 0..rounds.max(1) {
        drop(std::mem::take(&mut batches));
        let started = Instant::now();
        batches = requests
            .iter()
            .map(|bytes| {
                decode::measure(Encoding::Protobuf, bytes, &settings.decode).expect("within the limits");
                let request = decode::decode(Encoding::Protobuf, bytes).expect("decodes");
                prepare(&request, settings, &[]).spans
            })
            .collect();
        let spans: usize = batches.iter().map(Vec::len).sum();
        rates.push(spans as f64 / started.elapsed().as_secs_f64());
    }
    let spans: usize = batches.iter().map(Vec::len).sum();
    let bytes: usize = requests.iter().map(Vec::len).sum();
    let stored_bytes =
        |part: fn(&NormalizedSpan) -> usize| batches.iter().flatten().map(part).sum::<usize>() / spans.max(1);
    println!(
        "stored per span: record {} bytes, bodies {} bytes (JSON)",
        stored_bytes(|s| s.json.record.len()),
        stored_bytes(|s| s.json.bodies.len())
    );
    let shapes: Vec<_> = requests
        .iter()
        .map(|b| (b.len(), decode::measure(Encoding::Protobuf, b, &settings.decode).expect("within the limits")))
        .collect();
    let reserved: usize =
        shapes.iter().map(|(wire, shape)| memory_for(shape, *wire, usize::MAX).1).sum::<usize>() / shapes.len().max(1);
    let by_size: usize =
        shapes.iter().map(|(wire, _)| wire * MEMORY_PER_WIRE_BYTE).sum::<usize>() / shapes.len().max(1);
    println!(
        "memory reserved per request while it is stored: {:.2} MiB ({:.2} MiB by wire size alone)",
        reserved as f64 / (1 << 20) as f64,
        by_size as f64 / (1 << 20) as f64
    );
    let best = rates.iter().copied().fold(0.0, f64::max);
    let each: Vec<String> = rates.iter().map(|r| format!("{r:.0}")).collect();
    println!(
        "measure + decode + normalize, one thread: {spans} spans ({:.0} MiB of protobuf), best of {} rounds: {best:.0} spans/s \
         (each: {})",
        bytes as f64 / (1 << 20) as f64,
        rates.len(),
        each.join(", ")
    );
    batches
}

/// Commits the batches in commits of `per_commit` spans and prints the rate.
async fn store(db: &Db, batches: &[Vec<NormalizedSpan>], per_commit: usize, settings: &IngestSettings) {
    // The server's checkpoint loop (SQLite), so the writer runs as it does in `serve`.
    let checkpointer = tokio::spawn(flightdeck::commands::serve::checkpoint_wal(db.clone()));
    let requests_per_commit = (per_commit / SPANS_PER_REQUEST).max(1);
    // The writer concatenates the waiting exports the same way; done before the clock.
    let commits: Vec<Vec<NormalizedSpan>> =
        batches.chunks(requests_per_commit).map(|group| group.iter().flatten().cloned().collect()).collect();
    // The writer's own connection and its log restarts, as in `serve`.
    let writer = db.dedicated();
    let mut log = flightdeck::otlp::writer::LogRestarter::default();
    let mut commit_times = Vec::new();
    let mut stored = 0u64;
    let started = Instant::now();
    for all in &commits {
        let t = Instant::now();
        stored += write::commit(&writer, all, settings.body_policy).await.expect("write").stored;
        commit_times.push(t.elapsed());
        log.after_commit(&writer).await;
    }
    let elapsed = started.elapsed();
    checkpointer.abort();
    commit_times.sort();
    println!(
        "storage, {}, {} spans per commit: {stored} spans in {elapsed:.2?}: {:.0} spans/s \
         (commit p50 {:.0?}, p95 {:.0?})",
        db.backend_name(),
        requests_per_commit * SPANS_PER_REQUEST,
        stored as f64 / elapsed.as_secs_f64(),
        percentile(&commit_times, 0.5),
        percentile(&commit_times, 0.95),
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    // `RUST_LOG=store=debug` prints each commit's phases (the write path's own debug log).
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt().with_env_filter(tracing_subscriber::EnvFilter::from_default_env()).init();
    }
    let spans = env_usize("FLIGHTDECK_BENCH_SPANS").unwrap_or(300_000);
    let commits = match env_usize("FLIGHTDECK_BENCH_COMMIT") {
        Some(n) => vec![n],
        None => vec![2_048, 8_192],
    };
    let settings = IngestSettings::default();
    let requests = encoded_requests(spans);
    let batches = decode_and_normalize(&requests, &settings, env_usize("FLIGHTDECK_BENCH_ROUNDS").unwrap_or(3));
    drop(requests);
    for per_commit in commits {
        let sqlite = TestDb::sqlite().await;
        store(&sqlite.db, &batches, per_commit, &settings).await;
        sqlite.cleanup().await;
        if let Some(pg) = TestDb::postgres().await {
            store(&pg.db, &batches, per_commit, &settings).await;
            pg.cleanup().await;
        }
    }
}
