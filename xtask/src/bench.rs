//! `cargo xtask bench`: the ingest benchmarks, each on the release server and load
//! generator on this machine, printing figures and asserting nothing:
//!
//! - by default, throughput and server memory on a fresh database, SQLite and (when
//!   available) PostgreSQL, over OTLP/HTTP protobuf and OTLP/gRPC;
//! - `--grow-to GB`: ingest without pause until the database holds GB gigabytes, one line
//!   per interval with the database's size and that interval's rate, so the rate at 0, 5
//!   and 20 GB reads off one run;
//! - `--sweep GB`: fills GB gigabytes of runs 40 days old, measures ingest at that size,
//!   then restarts the server with 30 days' retention and measures ingest while the sweep
//!   deletes them;
//! - `--instances`: PostgreSQL only, one server and then two servers on one database,
//!   each with its own load generator, their rates summed; each with one ingest writer
//!   and with the default four (`FLIGHTDECK_POSTGRES_WRITERS`); `--concurrency N` sets
//!   each load generator's exports in flight.

use super::{
    check, flag_value, free_port, machine_description, missing, postgres_url, step, target_dir, tempdir, with_database,
};
use anyhow::{bail, Context, Result};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Exports in flight per load generator: the server commits what is waiting together,
/// so more exporters make bigger commits.
const CONCURRENCY: u64 = 8;

/// Reads the flags and runs the benchmark they name.
pub fn run(args: &[String]) -> Result<()> {
    let backend = flag_value::<String>(args, "--backend")?.unwrap_or_else(|| "sqlite".into());
    let seconds = flag_value::<u64>(args, "--seconds")?;
    if let Some(target) = flag_value::<f64>(args, "--grow-to")? {
        let interval = flag_value(args, "--interval")?.unwrap_or(60);
        return grow(&backend, target, interval, flag_value(args, "--hold-minutes")?.unwrap_or(0));
    }
    if let Some(target) = flag_value::<f64>(args, "--sweep")? {
        return sweep(&backend, target);
    }
    let concurrency = flag_value(args, "--concurrency")?.unwrap_or(CONCURRENCY);
    if args.iter().any(|a| a == "--instances") {
        return instances(seconds.unwrap_or(60), concurrency);
    }
    throughput(seconds.unwrap_or(30), concurrency)
}

/// Throughput and memory on a fresh database per backend and protocol, as fast as the
/// server answers.
fn throughput(seconds: u64, concurrency: u64) -> Result<()> {
    build()?;
    let mut backends = vec!["sqlite"];
    match postgres_url() {
        Some(_) => backends.push("postgres"),
        None => missing("PostgreSQL", "start it to benchmark the PostgreSQL backend too")?,
    }
    eprintln!("\nmachine: {}", machine_description());
    for backend in backends {
        for protocol in ["http", "grpc"] {
            let store = Store::new(backend, protocol)?;
            let server = Server::start(&store, 3650, "throughput")?;
            step(&format!(
                "{backend}, OTLP/{protocol} protobuf, {seconds} s as fast as the server answers, {concurrency} exports in flight"
            ));
            let port = if protocol == "grpc" { server.grpc } else { server.http };
            let result = check(
                Command::new(target_dir().join("release/flightdeck-loadgen"))
                    .args(["--endpoint", &format!("http://127.0.0.1:{port}"), "--protocol", protocol])
                    .args(["--duration", &seconds.to_string(), "--concurrency", &concurrency.to_string()])
                    .args(["--spans-per-request", "512"])
                    .args(["--rss-pid", &server.child.id().to_string()]),
            );
            server.stop();
            result?;
        }
    }
    Ok(())
}

/// Where a benchmark's data lives: a SQLite file in a directory, or a PostgreSQL database
/// created for it (dropped at the end).
struct Store {
    data: PathBuf,
    postgres: Option<(String, String)>,
}

impl Store {
    fn new(backend: &str, label: &str) -> Result<Store> {
        let data = tempdir()?;
        let postgres = match backend {
            "sqlite" => None,
            "postgres" => {
                let Some(url) = postgres_url() else { bail!("PostgreSQL is not running") };
                let name = format!("fdbench_{}_{label}", std::process::id());
                check(Command::new("psql").args([url.as_str(), "-XAtqc", &format!("CREATE DATABASE {name}")]))?;
                Some((url, name))
            }
            other => bail!("--backend is sqlite or postgres, not {other}"),
        };
        Ok(Store { data, postgres })
    }

    fn database_url(&self) -> Option<String> {
        self.postgres.as_ref().map(|(url, name)| with_database(url, name))
    }

    /// Bytes the database takes on disk: the SQLite files (the main one and the ledger's)
    /// with their logs, or `pg_database_size`.
    fn bytes(&self) -> Result<u64> {
        match &self.postgres {
            None => Ok(std::fs::read_dir(&self.data)?
                .filter_map(|e| e.ok())
                .filter(|e| e.file_name().to_string_lossy().starts_with("flightdeck."))
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()),
            Some((url, name)) => {
                let out = Command::new("psql")
                    .args([url.as_str(), "-XAtqc", &format!("SELECT pg_database_size('{name}')")])
                    .output()?;
                String::from_utf8_lossy(&out.stdout).trim().parse().context("pg_database_size")
            }
        }
    }

    /// PostgreSQL's write-ahead log so far, cluster-wide (the bench is its only writer):
    /// what a commit costs the disk as indexes grow past what one checkpoint cycle touches.
    fn wal(&self) -> Option<Wal> {
        let (url, _) = self.postgres.as_ref()?;
        let sql = "SELECT w.wal_bytes::bigint, w.wal_fpi, b.checkpoints_timed + b.checkpoints_req \
                   FROM pg_stat_wal w, pg_stat_bgwriter b";
        let out = Command::new("psql").args([url.as_str(), "-XAtqc", sql]).output().ok()?;
        let text = String::from_utf8_lossy(&out.stdout);
        let mut figures = text.trim().split('|').map(|f| f.parse::<u64>().ok());
        Some(Wal { bytes: figures.next()??, full_pages: figures.next()??, checkpoints: figures.next()?? })
    }
}

/// Counters from `pg_stat_wal` and `pg_stat_bgwriter`.
#[derive(Clone, Copy)]
struct Wal {
    bytes: u64,
    full_pages: u64,
    checkpoints: u64,
}

impl Wal {
    /// "WAL 2.1 KB/span, 0.19 full pages/span, 2 checkpoints" for the spans sent between two readings.
    fn note_since(self, before: Wal, spans: f64) -> String {
        let spans = spans.max(1.0);
        format!(
            "WAL {:.1} KB/span, {:.3} full pages/span, {} checkpoints",
            self.bytes.saturating_sub(before.bytes) as f64 / 1000.0 / spans,
            self.full_pages.saturating_sub(before.full_pages) as f64 / spans,
            self.checkpoints.saturating_sub(before.checkpoints)
        )
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        if let Some((url, name)) = &self.postgres {
            let _ = Command::new("psql")
                .args([url.as_str(), "-XAtqc", &format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")])
                .status();
        }
        let _ = std::fs::remove_dir_all(&self.data);
    }
}

/// One release server on a store, its log in the store's directory.
struct Server {
    child: Child,
    http: u16,
    grpc: u16,
    log: PathBuf,
}

impl Server {
    fn start(store: &Store, retention_days: u32, name: &str) -> Result<Server> {
        Server::start_with(store, retention_days, name, &[])
    }

    /// As [`Server::start`], with more environment for the server.
    fn start_with(store: &Store, retention_days: u32, name: &str, env: &[(&str, String)]) -> Result<Server> {
        let (ui, http, grpc) = (free_port()?, free_port()?, free_port()?);
        let log = store.data.join(format!("{name}.log"));
        let out = std::fs::File::create(&log)?;
        let mut cmd = Command::new(target_dir().join("release/flightdeck"));
        cmd.args(["serve", "--ingest-auth", "none"])
            .args(["--listen", &format!("127.0.0.1:{ui}")])
            .args(["--otlp-http-listen", &format!("127.0.0.1:{http}")])
            .args(["--otlp-grpc-listen", &format!("127.0.0.1:{grpc}")])
            .env("FLIGHTDECK_DATA_DIR", &store.data)
            .env("FLIGHTDECK_RETENTION_DAYS", retention_days.to_string())
            // Bodies as long as runs, so the sweep deletes everything a run stored.
            .env("FLIGHTDECK_BODY_RETENTION_DAYS", retention_days.to_string())
            .env("RUST_LOG", std::env::var("FLIGHTDECK_BENCH_LOG").unwrap_or_else(|_| "warn,flightdeck=info".into()))
            .stdout(out.try_clone()?)
            .stderr(out);
        if let Some(url) = store.database_url() {
            cmd.env("DATABASE_URL", url);
        }
        cmd.envs(env.iter().map(|(k, v)| (k, v)));
        let mut child = cmd.spawn().context("cannot start the release server")?;
        let ready = (0..600).any(|_| {
            std::thread::sleep(Duration::from_millis(100));
            std::net::TcpStream::connect(("127.0.0.1", http)).is_ok()
        });
        if !ready {
            let _ = child.kill();
            bail!("the server did not start listening (log: {})", log.display());
        }
        Ok(Server { child, http, grpc, log })
    }

    fn log_has(&self, text: &str) -> bool {
        std::fs::read_to_string(&self.log).map(|l| l.contains(text)).unwrap_or(false)
    }

    fn stop(mut self) {
        let _ = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status();
        let _ = self.child.wait();
    }
}

/// What one load interval measured.
struct Interval {
    spans_per_sec: f64,
    p99_ms: f64,
    peak_rss_mib: f64,
}

/// Starts a load generator against `server` for `seconds`: its own seed, so each interval
/// sends new runs, starting `days_ago` days back.
fn spawn_load(server: &Server, seconds: u64, seed: u64, days_ago: u32) -> Result<Child> {
    spawn_load_with(server, seconds, seed, days_ago, CONCURRENCY)
}

/// As [`spawn_load`], with `concurrency` exports in flight.
fn spawn_load_with(server: &Server, seconds: u64, seed: u64, days_ago: u32, concurrency: u64) -> Result<Child> {
    Command::new(target_dir().join("release/flightdeck-loadgen"))
        .args(["--endpoint", &format!("http://127.0.0.1:{}", server.http), "--protocol", "http"])
        .args(["--duration", &seconds.to_string(), "--concurrency", &concurrency.to_string()])
        .args(["--spans-per-request", "512", "--seed", &seed.to_string()])
        .args(["--days-ago", &days_ago.to_string()])
        .args(["--rss-pid", &server.child.id().to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("cannot start the load generator")
}

/// Reads a finished load generator's report.
fn finish_load(child: Child) -> Result<Interval> {
    let out = child.wait_with_output()?;
    let report = String::from_utf8_lossy(&out.stdout);
    let figure = |label: &str, after: &str| -> f64 {
        report
            .lines()
            .find(|l| l.starts_with(label))
            .and_then(|l| l.split(after).nth(1))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.trim_end_matches(',').parse().ok())
            .unwrap_or(0.0)
    };
    if !out.status.success() {
        bail!("the load generator failed:\n{report}");
    }
    Ok(Interval {
        spans_per_sec: figure("throughput", "throughput"),
        p99_ms: figure("latency", "p99"),
        peak_rss_mib: figure("server memory", "peak RSS"),
    })
}

fn load(server: &Server, seconds: u64, seed: u64, days_ago: u32) -> Result<Interval> {
    finish_load(spawn_load(server, seconds, seed, days_ago)?)
}

fn gib(bytes: u64) -> f64 {
    bytes as f64 / (1u64 << 30) as f64
}

fn print_header() {
    println!("{:>8}  {:>9}  {:>10}  {:>9}  {:>9}  note", "minute", "size GiB", "spans/s", "p99 ms", "RSS MiB");
}

fn print_line(started: Instant, bytes: u64, i: &Interval, note: &str) {
    println!(
        "{:>8.1}  {:>9.2}  {:>10.0}  {:>9.1}  {:>9.0}  {note}",
        started.elapsed().as_secs_f64() / 60.0,
        gib(bytes),
        i.spans_per_sec,
        i.p99_ms,
        i.peak_rss_mib
    );
}

/// Ingest until the store reaches `target_gib`, then on for `hold_minutes`.
pub fn grow(backend: &str, target_gib: f64, interval: u64, hold_minutes: u64) -> Result<()> {
    build()?;
    let store = Store::new(backend, "grow")?;
    let server = Server::start(&store, 3650, "grow")?;
    step(&format!(
        "{backend}: ingest over OTLP/HTTP until the database holds {target_gib} GiB, then {hold_minutes} more minutes; one line per {interval} s"
    ));
    eprintln!("machine: {}", machine_description());
    print_header();
    let started = Instant::now();
    let mut reached: Option<Instant> = None;
    let mut seed = 1;
    let mut wal = store.wal();
    loop {
        let i = load(&server, interval, seed, 0)?;
        seed += 1;
        let bytes = store.bytes()?;
        let now = store.wal();
        let note = match (wal, now) {
            (Some(before), Some(after)) => after.note_since(before, i.spans_per_sec * interval as f64),
            _ => String::new(),
        };
        wal = now;
        print_line(started, bytes, &i, &note);
        if reached.is_none() && gib(bytes) >= target_gib {
            reached = Some(Instant::now());
        }
        if reached.is_some_and(|r| r.elapsed() >= Duration::from_secs(hold_minutes * 60)) {
            break;
        }
    }
    server.stop();
    Ok(())
}

/// Fills `target_gib` of 40-day-old runs, measures ingest at that size, then restarts
/// with 30 days' retention and measures ingest while the sweep runs.
pub fn sweep(backend: &str, target_gib: f64) -> Result<()> {
    build()?;
    let store = Store::new(backend, "sweep")?;
    let server = Server::start(&store, 3650, "fill")?;
    step(&format!("{backend}: filling {target_gib} GiB of runs started 40 days ago"));
    eprintln!("machine: {}", machine_description());
    print_header();
    let started = Instant::now();
    let mut seed = 1;
    loop {
        let i = load(&server, 60, seed, 40)?;
        seed += 1;
        let bytes = store.bytes()?;
        print_line(started, bytes, &i, "filling, 40 days old");
        if gib(bytes) >= target_gib {
            break;
        }
    }
    for _ in 0..3 {
        let i = load(&server, 20, seed, 0)?;
        seed += 1;
        print_line(started, store.bytes()?, &i, "new runs, no sweep (the baseline)");
    }
    server.stop();
    step("restarting with 30 days' retention: the sweep starts at once; new runs sent meanwhile");
    let server = Server::start(&store, 30, "sweep")?;
    let sweep_started = Instant::now();
    let mut after = 0;
    while after < 3 {
        let done = server.log_has("retention: deleted old runs");
        let i = load(&server, 20, seed, 0)?;
        seed += 1;
        let note = if done {
            after += 1;
            "after the sweep".to_string()
        } else {
            format!("during the sweep ({:.0} s in)", sweep_started.elapsed().as_secs_f64())
        };
        print_line(started, store.bytes()?, &i, &note);
        if sweep_started.elapsed() > Duration::from_secs(3600) {
            eprintln!("the sweep did not finish within an hour");
            break;
        }
    }
    server_log_kept(&server, "sweep");
    server.stop();
    Ok(())
}

/// One PostgreSQL, one server and then two, each with its own load generator of
/// `concurrency` exports in flight; with one ingest writer per server and the default four.
pub fn instances(seconds: u64, concurrency: u64) -> Result<()> {
    build()?;
    eprintln!("machine: {}", machine_description());
    for (count, writers) in [(1u64, 1usize), (1, 4), (2, 1), (2, 4)] {
        let store = Store::new("postgres", &format!("instances{count}w{writers}"))?;
        let env = [("FLIGHTDECK_POSTGRES_WRITERS", writers.to_string())];
        let servers: Vec<Server> =
            (0..count).map(|n| Server::start_with(&store, 3650, &format!("server{n}"), &env)).collect::<Result<_>>()?;
        step(&format!(
            "PostgreSQL, {count} instance(s) with {writers} writer(s) each on one database, {seconds} s, one load generator each, {concurrency} exports in flight"
        ));
        let loads: Vec<Child> = servers
            .iter()
            .enumerate()
            .map(|(n, s)| spawn_load_with(s, seconds, 100 + n as u64, 0, concurrency))
            .collect::<Result<_>>()?;
        let mut total = 0.0;
        for (n, child) in loads.into_iter().enumerate() {
            let i = finish_load(child)?;
            println!(
                "instance {n}: {:.0} spans/s, p99 {:.1} ms, peak RSS {:.0} MiB",
                i.spans_per_sec, i.p99_ms, i.peak_rss_mib
            );
            total += i.spans_per_sec;
        }
        println!("{count} instance(s), {writers} writer(s) each: {total:.0} spans/s in all");
        for server in &servers {
            let log = std::fs::read_to_string(&server.log).unwrap_or_default();
            let retried = log.matches("met another writer").count();
            if retried > 0 {
                println!("({retried} commits tried again after a conflict with another writer)");
            }
        }
        servers.into_iter().for_each(Server::stop);
    }
    Ok(())
}

/// The server's retention lines, and its whole log kept beside the temporary directory
/// (the store's directory goes at the end).
fn server_log_kept(server: &Server, name: &str) {
    let log = std::fs::read_to_string(&server.log).unwrap_or_default();
    for line in log.lines().filter(|l| l.contains("INFO retention")) {
        println!("server: {line}");
    }
    let kept = std::env::temp_dir().join(format!("flightdeck-bench-{name}.log"));
    if std::fs::write(&kept, &log).is_ok() {
        eprintln!("the server's log: {}", kept.display());
    }
}

fn build() -> Result<()> {
    step("building the release server and load generator");
    check(super::cargo().args(["build", "--release", "--package", "flightdeck", "--package", "loadgen", "--bins"]))
}
