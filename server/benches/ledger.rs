//! Guarded-call benchmark (not a test): the round trip of an ask and its report
//! (`POST /api/v1/calls` then `POST /api/v1/calls/{id}/complete`) at a steady rate of
//! guarded calls while the load generator sends OTLP spans at a steady rate to the same
//! `flightdeck serve` process. Prints p50, p99 and max; asserts nothing.
//!
//!   cargo bench -p flightdeck --bench ledger
//!   FLIGHTDECK_TEST_PG_URL=postgres:///postgres?host=/var/run/postgresql cargo bench -p flightdeck --bench ledger
//!   FLIGHTDECK_BENCH_SECONDS=20 FLIGHTDECK_BENCH_CALLS_PER_SEC=500 FLIGHTDECK_BENCH_SPANS_PER_SEC=20000 ...
//!   FLIGHTDECK_BENCH_SPANS_PER_REQUEST=512 (spans per OTLP export)
//!   FLIGHTDECK_BENCH_FLOOR=1 (two GET /readyz, one database read each and no write, in
//!     place of each ask and complete: the round trip's floor on the machine, beside the
//!     same ingest)
//!   FLIGHTDECK_BENCH_RUST_LOG=store=debug FLIGHTDECK_BENCH_SERVER_LOG=/tmp/server.log
//!   FLIGHTDECK_BENCH_SAMPLES=/tmp/samples.txt (each round trip: start in µs since the epoch,
//!     ask µs, ask + complete µs; to lay the slow ones beside the server's log)
//!   FLIGHTDECK_BENCH_DATA_DIR=/dev/shm (where the databases go; default the temp folder)

use app::auth::secrets;
use domain::access::Scope;
use loadgen::send::{run_load, LoadOptions, Protocol, Target};
use loadgen::synth::SynthOptions;
use serde_json::{json, Value};
use std::io::BufRead;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use store::testing::TestDb;
use store::{tokens, Db};

fn setting(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1].as_secs_f64() * 1e3
}

async fn measure(label: &str, database_url: Option<&str>) {
    let (seconds, calls_per_sec, spans_per_sec) = (
        setting("FLIGHTDECK_BENCH_SECONDS", 20),
        setting("FLIGHTDECK_BENCH_CALLS_PER_SEC", 500),
        setting("FLIGHTDECK_BENCH_SPANS_PER_SEC", 20_000),
    );
    // FLIGHTDECK_BENCH_FLOOR=1 measures the floor instead: see below.
    let floor = setting("FLIGHTDECK_BENCH_FLOOR", 0) == 1;
    // FLIGHTDECK_BENCH_DATA_DIR puts the databases under another folder (e.g. /dev/shm, to
    // see what the disk's syncs cost).
    let dir = match std::env::var("FLIGHTDECK_BENCH_DATA_DIR") {
        Ok(parent) => tempfile::tempdir_in(parent).unwrap(),
        Err(_) => tempfile::tempdir().unwrap(),
    };
    let (web, otlp) = (free_port(), free_port());
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_flightdeck"));
    cmd.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("FLIGHTDECK_DATA_DIR", dir.path())
        .env("RUST_LOG", std::env::var("FLIGHTDECK_BENCH_RUST_LOG").unwrap_or("warn,flightdeck=info".into()))
        .args(["serve", "--ingest-auth", "none", "--listen", &format!("127.0.0.1:{web}")])
        .args(["--otlp-http-listen", &format!("127.0.0.1:{otlp}"), "--otlp-grpc-listen", "127.0.0.1:0"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    if let Some(url) = database_url {
        cmd.env("DATABASE_URL", url);
    }
    let mut server = cmd.spawn().unwrap();
    let mut lines = std::io::BufReader::new(server.stderr.take().unwrap()).lines();
    for line in lines.by_ref() {
        if line.unwrap().contains("flightdeck is serving") {
            break;
        }
    }
    // FLIGHTDECK_BENCH_SERVER_LOG keeps the server's log (with FLIGHTDECK_BENCH_RUST_LOG,
    // e.g. store=debug for the write phases and the log restarts).
    let keep = std::env::var("FLIGHTDECK_BENCH_SERVER_LOG").ok().map(|p| std::fs::File::create(p).unwrap());
    std::thread::spawn(move || {
        use std::io::Write;
        let mut keep = keep;
        for line in lines.map_while(Result::ok) {
            if let Some(f) = keep.as_mut() {
                let _ = writeln!(f, "{line}");
            }
        }
    });
    let db = match database_url {
        Some(url) => Db::connect(url).await.unwrap(),
        None => Db::connect(&format!("sqlite://{}", dir.path().join("flightdeck.db").display())).await.unwrap(),
    };
    let (secret, prefix) = secrets::generate_token();
    let new = tokens::NewToken {
        name: "bench",
        prefix: &prefix,
        secret_sha256: &secrets::sha256_hex(&secret),
        scopes: &[Scope::Calls],
        created_by: None,
    };
    tokens::create(&db, new).await.unwrap();

    // The load generator stands in for other agents, whose encoding would not share this
    // client's threads or cores in production: it gets a runtime of its own at a lower
    // priority, so the calls measured are not queued behind span encoding in this
    // process (they were: 100-200 ms at the median).
    let loadgen = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .on_thread_start(flightdeck::priority::lower_this_thread)
        .build()
        .unwrap();
    let ingest = loadgen.spawn(run_load(LoadOptions {
        target: Target {
            endpoint: format!("http://127.0.0.1:{otlp}"),
            protocol: Protocol::HttpProtobuf,
            token: None,
            gzip: false,
        },
        runs: None,
        duration: Some(Duration::from_secs(seconds + 2)),
        rate_spans_per_sec: Some(spans_per_sec as f64),
        concurrency: 8,
        spans_per_request: setting("FLIGHTDECK_BENCH_SPANS_PER_REQUEST", 512) as usize,
        synth: SynthOptions { seed: 7, ..SynthOptions::default() },
        rss_pid: None,
    }));
    tokio::time::sleep(Duration::from_secs(1)).await;

    let http = reqwest::Client::builder().pool_max_idle_per_host(256).build().unwrap();
    let base = format!("http://127.0.0.1:{web}");
    let samples: Arc<Mutex<(Vec<Duration>, Vec<Duration>)>> = Arc::default();
    // FLIGHTDECK_BENCH_SAMPLES=/path writes each round trip as "start (µs since the epoch)
    // ask_µs trip_µs", to lay slow ones beside the server's log.
    let timeline: Arc<Mutex<Vec<(u128, Duration, Duration)>>> = Arc::default();
    let failures = Arc::new(Mutex::new(0usize));
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    let mut sent = 0u64;
    while started.elapsed() < Duration::from_secs(seconds) {
        let due = (started.elapsed().as_secs_f64() * calls_per_sec as f64) as u64;
        while sent < due {
            sent += 1;
            let floor = floor;
            let (http, base, secret, samples, failures, timeline) =
                (http.clone(), base.clone(), secret.clone(), samples.clone(), failures.clone(), timeline.clone());
            let n = sent;
            tasks.spawn(async move {
                let t0 = Instant::now();
                let wall = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
                if floor {
                    // Two requests that each read the database once and write nothing:
                    // what a round trip costs on this machine whatever the ledger does.
                    let mut first = None;
                    for _ in 0..2 {
                        let ready = http.get(format!("{base}/readyz")).send().await;
                        if !ready.is_ok_and(|r| r.status().is_success()) {
                            return *failures.lock().unwrap() += 1;
                        }
                        first.get_or_insert(t0.elapsed());
                    }
                    let mut s = samples.lock().unwrap();
                    s.0.push(first.unwrap_or_default());
                    s.1.push(t0.elapsed());
                    return;
                }
                let body = json!({"run_id": format!("bench-run-{}", n / 10), "step_index": n % 10,
                                  "tool": "send_email", "arguments": {"to": format!("user{n}@example.com")}});
                let asked = http.post(format!("{base}/api/v1/calls")).bearer_auth(&secret).json(&body).send().await;
                let Ok(asked) = asked else { return *failures.lock().unwrap() += 1 };
                let Ok(answer) = asked.json::<Value>().await else { return *failures.lock().unwrap() += 1 };
                let ask = t0.elapsed();
                let id = answer["call"]["id"].as_str().unwrap_or_default().to_string();
                let report = json!({"outcome": "ok", "external_id": format!("msg_{n}")});
                let done = http
                    .post(format!("{base}/api/v1/calls/{id}/complete"))
                    .bearer_auth(&secret)
                    .json(&report)
                    .send()
                    .await;
                if !done.is_ok_and(|r| r.status().is_success()) || answer["answer"] != "proceed" {
                    return *failures.lock().unwrap() += 1;
                }
                timeline.lock().unwrap().push((wall.as_micros(), ask, t0.elapsed()));
                let mut s = samples.lock().unwrap();
                s.0.push(ask);
                s.1.push(t0.elapsed());
            });
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    while tasks.join_next().await.is_some() {}
    let elapsed = started.elapsed().as_secs_f64();
    let report = ingest.await.unwrap().unwrap();
    loadgen.shutdown_background();
    let _ = Command::new("kill").args(["-TERM", &server.id().to_string()]).status();
    let _ = server.wait();
    if let Ok(path) = std::env::var("FLIGHTDECK_BENCH_SAMPLES") {
        let lines: Vec<String> = timeline
            .lock()
            .unwrap()
            .iter()
            .map(|(at, ask, trip)| format!("{at} {} {}", ask.as_micros(), trip.as_micros()))
            .collect();
        std::fs::write(path, lines.join("\n")).unwrap();
    }
    let (mut asks, mut trips) = samples.lock().unwrap().clone();
    asks.sort_unstable();
    trips.sort_unstable();
    println!(
        "{label}{}: {} guarded calls in {elapsed:.1} s ({:.0}/s, {} failed) beside {:.0} spans/s of ingest; \
         ask p50 {:.2} ms p99 {:.2} ms; ask + complete p50 {:.2} ms p99 {:.2} ms max {:.1} ms",
        if floor { " floor (two GET /readyz in place of each ask and complete)" } else { "" },
        trips.len(),
        trips.len() as f64 / elapsed,
        failures.lock().unwrap(),
        report.spans_per_sec,
        percentile(&asks, 50.0),
        percentile(&asks, 99.0),
        percentile(&trips, 50.0),
        percentile(&trips, 99.0),
        trips.last().map(|d| d.as_secs_f64() * 1e3).unwrap_or(0.0),
    );
    db.close().await;
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    measure("sqlite", None).await;
    if let Some(t) = TestDb::postgres().await {
        let url = t.url.clone();
        measure("postgres", Some(&url)).await;
        t.cleanup().await;
    } else {
        println!("postgres: skipped (set FLIGHTDECK_TEST_PG_URL)");
    }
}
