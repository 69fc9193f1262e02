//! `cargo xtask`: build, run and test Flightdeck with nothing but cargo, rustup and (for
//! the browser tests) Node.js. It replaces cargo-leptos, which takes longer to install
//! here than a whole build takes: the wasm bundle is bound with the wasm-bindgen library
//! pinned to the exact version the app links against.
//!
//!   cargo xtask run [--release] [-- FLIGHTDECK ARGS]   build everything, then serve
//!   cargo xtask build [--release]                       build the bundle and the server
//!   cargo xtask test                                    the whole test suite
//!   cargo xtask bench [--seconds N] [--concurrency N]   ingest throughput and server memory
//!   cargo xtask bench --grow-to GIB [--hold-minutes M] [--interval S] [--backend B]
//!                                                        ingest rate as the database grows
//!   cargo xtask bench --sweep GIB [--backend B]          ingest during a large retention sweep
//!   cargo xtask bench --instances [--seconds N]          one vs two servers on one PostgreSQL
//!   cargo xtask first-load [--runs N]                   bundle sizes and cold load in Chromium
//!   cargo xtask chaos [--kills N] [--seconds N]         crash, overload, outage, disk-full report

mod bench;
mod bundle;
mod compress;
mod wasm_opt;

use anyhow::{bail, Context, Result};
use std::env;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

fn main() -> ExitCode {
    let args: Vec<String> = env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("run") => run(&args[1..]),
        Some("build") => build(has_flag(&args, "--release")).map(|_| ()),
        Some("test") => test(),
        Some("bench") => bench::run(&args[1..]),
        Some("first-load") => first_load(&args[1..]),
        Some("chaos") => chaos(&args[1..]),
        _ => {
            eprintln!(
                "usage: cargo xtask run [--release] [-- ARGS] | build [--release] | test | \
                 bench [--seconds N] [--concurrency N] [--grow-to GIB | --sweep GIB | --instances] | first-load [--runs N] | chaos [--kills N] [--seconds N]"
            );
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn has_flag(args: &[String], flag: &str) -> bool {
    args.iter().take_while(|a| *a != "--").any(|a| a == flag)
}

/// The workspace this command was run in: found from the working directory at run time,
/// not baked in at compile time. Clones of the workspace that share one `CARGO_TARGET_DIR`
/// (CI's clean clone and a developer's tree) build bit-identical xtask binaries that cargo
/// treats as one, so a path baked into the binary could name the other clone.
fn workspace_root() -> PathBuf {
    let baked = || Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask lives in the workspace").to_path_buf();
    let Ok(mut dir) = env::current_dir() else { return baked() };
    loop {
        let manifest = dir.join("Cargo.toml");
        if std::fs::read_to_string(&manifest).is_ok_and(|text| text.contains("[workspace]"))
            && dir.join("xtask").is_dir()
        {
            return dir;
        }
        if !dir.pop() {
            return baked();
        }
    }
}

fn target_dir() -> PathBuf {
    env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| workspace_root().join("target"))
}

/// Where the browser bundle goes; the server's default `site_root` points here.
fn site_root() -> PathBuf {
    workspace_root().join("target").join("site")
}

fn step(what: &str) {
    eprintln!("\n==> {what}");
}

fn cargo() -> Command {
    let mut cmd = Command::new(env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.current_dir(workspace_root());
    cmd
}

fn check(cmd: &mut Command) -> Result<()> {
    let status = cmd.status().with_context(|| format!("cannot start {cmd:?}"))?;
    if !status.success() {
        bail!("{cmd:?} failed with {status}");
    }
    Ok(())
}

/// Like [`check`], but gives up after `limit`: a test that never finishes must fail the
/// suite in minutes, not hold CI until its own deadline. On time-out it kills the command
/// and everything it started (cargo and the test binaries, or npx, node and the browser).
/// The command stays in our process group so Ctrl-C still reaches all of it.
fn check_within(cmd: &mut Command, limit: Duration) -> Result<()> {
    let mut child = cmd.spawn().with_context(|| format!("cannot start {cmd:?}"))?;
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait()? {
            if !status.success() {
                bail!("{cmd:?} failed with {status}");
            }
            return Ok(());
        }
        if Instant::now() >= deadline {
            // Children first, so none is re-parented and missed.
            for pid in descendants(child.id()).into_iter().rev() {
                let _ = Command::new("kill").args(["-KILL", &pid.to_string()]).status();
            }
            let _ = child.kill();
            let _ = child.wait();
            bail!(
                "{cmd:?} did not finish within {} minutes and was stopped; the output above \
                 names any test that ran for over 60 seconds",
                limit.as_secs() / 60
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Every process below `root`, parents before their children, read from `/proc`.
fn descendants(root: u32) -> Vec<u32> {
    let parent_of = |pid: u32| -> Option<u32> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // `pid (comm) state ppid ...`; comm may hold spaces, so split after its `)`.
        stat.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse().ok()
    };
    let all: Vec<(u32, u32)> = std::fs::read_dir("/proc")
        .map(|dir| dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect::<Vec<u32>>())
        .unwrap_or_default()
        .into_iter()
        .filter_map(|pid| Some((pid, parent_of(pid)?)))
        .collect();
    let mut found = vec![root];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        found.extend(all.iter().filter(|(_, ppid)| *ppid == parent).map(|(pid, _)| *pid));
        i += 1;
    }
    found.remove(0);
    found
}

fn ensure_wasm_target() -> Result<()> {
    let out = Command::new("rustup").args(["target", "list", "--installed"]).output();
    match out {
        Ok(out) if String::from_utf8_lossy(&out.stdout).lines().any(|l| l.trim() == "wasm32-unknown-unknown") => Ok(()),
        Ok(_) => {
            step("installing the wasm32-unknown-unknown target");
            check(Command::new("rustup").args(["target", "add", "wasm32-unknown-unknown"]))
        }
        Err(_) => {
            eprintln!("xtask: rustup not found; assuming the wasm32-unknown-unknown target is installed");
            Ok(())
        }
    }
}

/// Builds the wasm bundle, binds it, copies the stylesheet, and builds the server.
/// Returns the path of the server binary.
fn build(release: bool) -> Result<PathBuf> {
    let started = Instant::now();
    ensure_wasm_target()?;

    step("building the browser bundle (app, feature hydrate, wasm32)");
    check(cargo().args([
        "rustc",
        "--package",
        "app",
        "--lib",
        "--crate-type",
        "cdylib",
        "--target",
        "wasm32-unknown-unknown",
        "--no-default-features",
        "--features",
        "hydrate",
        "--profile",
        "wasm-release",
    ]))?;
    let wasm = target_dir().join("wasm32-unknown-unknown/wasm-release/app.wasm");
    let pkg = site_root().join("pkg");
    step("binding, optimizing, hashing and compressing the bundle");
    bundle::write(&wasm, &workspace_root().join("style/main.css"), &pkg, &target_dir().join("wasm-bindgen"))?;

    step(if release { "building the server (release)" } else { "building the server" });
    let mut server = cargo();
    server.args(["build", "--package", "flightdeck", "--bin", "flightdeck"]);
    if release {
        server.arg("--release");
    }
    check(&mut server)?;
    let binary = target_dir().join(if release { "release" } else { "debug" }).join("flightdeck");
    eprintln!("built in {:.0?}: bundle in {}, server {}", started.elapsed(), pkg.display(), binary.display());
    Ok(binary)
}

fn run(args: &[String]) -> Result<()> {
    let binary = build(has_flag(args, "--release"))?;
    let passthrough: Vec<&String> = args.iter().skip_while(|a| *a != "--").skip(1).collect();
    step("starting flightdeck (Ctrl-C stops it)");
    let mut cmd = Command::new(binary);
    cmd.current_dir(workspace_root()).env("FLIGHTDECK_SITE_ROOT", site_root()).args(passthrough);
    // Replace this process so Ctrl-C and exit codes belong to the server.
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        Err(cmd.exec()).context("cannot start flightdeck")
    }
    #[cfg(not(unix))]
    check(&mut cmd)
}

fn in_ci() -> bool {
    env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// A missing PostgreSQL or Chromium skips its tests loudly on a laptop and fails in CI.
fn missing(what: &str, how: &str) -> Result<()> {
    if in_ci() {
        bail!("{what} is required under CI=true: {how}");
    }
    eprintln!("\n!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!");
    eprintln!("!!! SKIPPING the tests that need {what}: {how}");
    eprintln!("!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n");
    Ok(())
}

/// The PostgreSQL server the storage tests create their databases on, if one answers.
fn postgres_url() -> Option<String> {
    let url = env::var("FLIGHTDECK_TEST_PG_URL")
        .unwrap_or_else(|_| "postgres:///postgres?host=/var/run/postgresql".to_string());
    let ok = Command::new("psql").args([url.as_str(), "-XAtqc", "SELECT 1"]).output().is_ok_and(|o| o.status.success());
    ok.then_some(url)
}

fn chromium() -> Option<PathBuf> {
    let path = env::var_os("FLIGHTDECK_CHROMIUM").map(PathBuf::from).unwrap_or_else(|| "/usr/bin/chromium".into());
    path.exists().then_some(path)
}

/// How long each test suite may run once built: they take two to three minutes here.
const TEST_RUN_LIMIT: Duration = Duration::from_secs(15 * 60);

fn test() -> Result<()> {
    let started = Instant::now();
    let binary = build(false)?;

    let pg = postgres_url();
    if pg.is_none() {
        missing(
            "PostgreSQL",
            "start one (`pg_ctlcluster 15 main start`) and allow this user \
             (`su postgres -c 'createuser -s root'`), or set FLIGHTDECK_TEST_PG_URL",
        )?;
    }
    let python = test_python()?;
    // Compiling has no time limit (a cold build is slow but cannot hang); running does.
    step("building the tests (cargo test --workspace --no-run)");
    check(cargo().args(["test", "--workspace", "--no-run"]))?;
    step("unit, HTTP and storage tests (cargo test --workspace)");
    let mut tests = cargo();
    tests.args(["test", "--workspace"]);
    match &pg {
        Some(url) => tests.env("FLIGHTDECK_TEST_PG_URL", url),
        None => tests.env_remove("FLIGHTDECK_TEST_PG_URL"),
    };
    tests.env("FLIGHTDECK_BIN", &binary).env("FLIGHTDECK_PYTHON", &python);
    check_within(&mut tests, TEST_RUN_LIMIT)?;

    step("the TypeScript client and its adapters against the server (clients/typescript/run-tests.sh)");
    check_within(
        Command::new("sh").arg(workspace_root().join("clients/typescript/run-tests.sh")).env("FLIGHTDECK_BIN", &binary),
        TEST_RUN_LIMIT,
    )?;
    step("the Python adapters against the server (clients/python/run-tests.sh)");
    check_within(
        Command::new("bash").arg(workspace_root().join("clients/python/run-tests.sh")).env("FLIGHTDECK_BIN", &binary),
        TEST_RUN_LIMIT,
    )?;

    match chromium() {
        None => missing("Chromium", "install it with `apt-get install -y chromium` or set FLIGHTDECK_CHROMIUM")?,
        Some(browser) => {
            let e2e = end2end_packages()?;
            step("browser tests (Playwright, headless Chromium)");
            check_within(
                Command::new("npx")
                    .args(["playwright", "test"])
                    .current_dir(&e2e)
                    .env("FLIGHTDECK_BIN", &binary)
                    .env("FLIGHTDECK_SITE_ROOT", site_root())
                    .env("FLIGHTDECK_PYTHON", &python)
                    .env("FLIGHTDECK_CHROMIUM", browser),
                TEST_RUN_LIMIT,
            )?;
        }
    }
    eprintln!("\nall test suites passed in {:.0?}", started.elapsed());
    Ok(())
}

/// A Python with the test peers' packages (the MCP SDK for the gateway's tests): a venv
/// under `$FLIGHTDECK_CACHE` (default `~/.cache/flightdeck`), made again when
/// `server/tests/mcp/requirements.txt` or the interpreter changes.
fn test_python() -> Result<PathBuf> {
    let requirements = workspace_root().join("server/tests/mcp/requirements.txt");
    let cache = env::var_os("FLIGHTDECK_CACHE")
        .map(PathBuf::from)
        .or_else(|| env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/flightdeck")))
        .context("set FLIGHTDECK_CACHE or HOME")?;
    let venv = cache.join("venv-mcp");
    let python = venv.join("bin/python");
    let version = Command::new("python3").arg("--version").output().context("python3 is needed for the MCP tests")?;
    let want = format!(
        "{}\n{}",
        std::fs::read_to_string(&requirements).context("server/tests/mcp/requirements.txt")?,
        String::from_utf8_lossy(&version.stdout).trim()
    );
    let stamp = venv.join(".requirements");
    if python.exists() && std::fs::read_to_string(&stamp).is_ok_and(|s| s == want) {
        return Ok(python);
    }
    step("installing the MCP test peers into a venv (server/tests/mcp/requirements.txt)");
    let _ = std::fs::remove_dir_all(&venv);
    std::fs::create_dir_all(&cache)?;
    check(Command::new("python3").args(["-m", "venv"]).arg(&venv))?;
    check(
        Command::new(&python)
            .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-input", "-r"])
            .arg(&requirements),
    )?;
    std::fs::write(&stamp, want)?;
    Ok(python)
}

/// The Playwright project, its packages installed.
fn end2end_packages() -> Result<PathBuf> {
    let e2e = workspace_root().join("end2end");
    if !e2e.join("node_modules/playwright-core").exists() {
        step("installing the browser-test packages (npm ci)");
        check(Command::new("npm").args(["ci", "--no-audit", "--no-fund"]).current_dir(&e2e))?;
    }
    Ok(e2e)
}

/// First load: the release bundle's sizes (printed by the build), then the cold-cache
/// time to a hydrated page in headless Chromium, unthrottled and on a throttled link
/// (end2end/bench/first-load.mjs). Prints the figures; asserts nothing.
fn first_load(args: &[String]) -> Result<()> {
    let Some(browser) = chromium() else {
        bail!("first-load needs Chromium: install it with `apt-get install -y chromium` or set FLIGHTDECK_CHROMIUM");
    };
    let binary = build(true)?;
    let e2e = end2end_packages()?;
    step("cold-cache first load in headless Chromium");
    eprintln!("machine: {}", machine_description());
    check(
        Command::new("node")
            .arg("bench/first-load.mjs")
            .args(args)
            .current_dir(&e2e)
            .env("FLIGHTDECK_BIN", &binary)
            .env("FLIGHTDECK_SITE_ROOT", site_root())
            .env("FLIGHTDECK_CHROMIUM", browser),
    )
}

/// A free TCP port on loopback (the OS picks it; it is released at once for the server).
fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

fn machine_description() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name").map(|v| v.trim_start_matches([' ', '\t', ':']).to_string()))
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem_gib = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").parse::<f64>().ok())
        .map(|kib| kib / 1024.0 / 1024.0)
        .unwrap_or(0.0);
    format!("{model}, {cores} cores, {mem_gib:.0} GiB RAM")
}

/// The chaos scenarios (`server/tests/chaos/`) in their long form, on a release build:
/// ten SIGKILLs per database by default, longer overload and outage phases. Prints each
/// scenario's report; CI runs the same scenarios in their short form as part of `test`.
/// Mounting the disk-full scenario's tmpfs needs root; elsewhere it says it is skipped.
fn chaos(args: &[String]) -> Result<()> {
    let kills = flag_value(args, "--kills")?.unwrap_or(10u64);
    let seconds = flag_value(args, "--seconds")?.unwrap_or(10u64);
    let pg = postgres_url();
    if pg.is_none() {
        missing("PostgreSQL", "start it to run the PostgreSQL scenarios too")?;
    }
    step("building the chaos scenarios (release)");
    check(cargo().args(["test", "--release", "--package", "flightdeck", "--test", "chaos", "--no-run"]))?;
    step(&format!("chaos: {kills} kills per database, {seconds} s load phases"));
    eprintln!("machine: {}", machine_description());
    let mut run = cargo();
    run.args([
        "test",
        "--release",
        "--package",
        "flightdeck",
        "--test",
        "chaos",
        "--",
        "--nocapture",
        "--test-threads",
        "1",
    ])
    .env("FLIGHTDECK_CHAOS_KILLS", kills.to_string())
    .env("FLIGHTDECK_CHAOS_SECONDS", seconds.to_string());
    match &pg {
        Some(url) => run.env("FLIGHTDECK_TEST_PG_URL", url),
        None => run.env_remove("FLIGHTDECK_TEST_PG_URL"),
    };
    check(&mut run)
}

/// The value after `flag` in `args`, parsed; `None` when the flag is absent.
fn flag_value<T: std::str::FromStr>(args: &[String], flag: &str) -> Result<Option<T>>
where
    T::Err: std::error::Error + Send + Sync + 'static,
{
    args.iter()
        .position(|a| a == flag)
        .and_then(|i| args.get(i + 1))
        .map(|v| v.parse::<T>())
        .transpose()
        .with_context(|| format!("{flag} takes a number"))
}

fn tempdir() -> Result<PathBuf> {
    let dir = env::temp_dir().join(format!("flightdeck-bench-{}-{}", std::process::id(), free_port()?));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// The same server as `url`, another database.
fn with_database(url: &str, name: &str) -> String {
    let (base, query) = url.split_once('?').map(|(b, q)| (b, Some(q))).unwrap_or((url, None));
    let (scheme, rest) = base.split_once("://").unwrap_or(("postgres", base));
    let authority = rest.split('/').next().unwrap_or("");
    match query {
        Some(q) => format!("{scheme}://{authority}/{name}?{q}"),
        None => format!("{scheme}://{authority}/{name}"),
    }
}
