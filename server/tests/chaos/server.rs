//! A `flightdeck serve` process the scenarios can break: started on a data directory (and
//! a PostgreSQL URL), killed with SIGKILL or stopped with SIGTERM, its peak memory read.

use std::io::BufRead;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A port nothing listens on, never one this process handed out before: a setup takes
/// three at once and two instances' setups are made before either binds, and the kernel
/// may give a port just released to the next `bind(0)`, so two listeners of one test
/// could be told the same port (a server then exits at start).
pub fn free_port() -> u16 {
    static GIVEN: std::sync::Mutex<std::collections::BTreeSet<u16>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    loop {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        if GIVEN.lock().unwrap_or_else(|e| e.into_inner()).insert(port) {
            return port;
        }
    }
}

/// How to start a server; the ports stay the same across restarts, as a pod's would.
#[derive(Clone, Debug)]
pub struct Setup {
    pub data_dir: PathBuf,
    pub database_url: Option<String>,
    pub web: u16,
    pub otlp: u16,
    pub grpc: u16,
    /// Extra `FLIGHTDECK_*` settings.
    pub env: Vec<(String, String)>,
}

impl Setup {
    pub fn new(data_dir: &Path, database_url: Option<&str>) -> Setup {
        Setup {
            data_dir: data_dir.to_path_buf(),
            database_url: database_url.map(str::to_string),
            web: free_port(),
            otlp: free_port(),
            grpc: free_port(),
            env: Vec::new(),
        }
    }

    pub fn with(mut self, key: &str, value: &str) -> Setup {
        self.env.push((key.to_string(), value.to_string()));
        self
    }

    pub fn web_base(&self) -> String {
        format!("http://127.0.0.1:{}", self.web)
    }

    pub fn grpc_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.grpc)
    }

    pub fn otlp_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1/traces", self.otlp)
    }
}

pub struct Server {
    child: Option<Child>,
    pub pid: u32,
}

impl Server {
    /// Starts the server and returns once it says it is serving (migrations applied,
    /// both listeners bound).
    pub fn start(setup: &Setup) -> Server {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_flightdeck"));
        cmd.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("FLIGHTDECK_DATA_DIR", &setup.data_dir)
            .env("RUST_LOG", "warn,flightdeck=info")
            .args(["serve", "--ingest-auth", "none", "--listen", &format!("127.0.0.1:{}", setup.web)])
            .args([
                "--otlp-http-listen",
                &format!("127.0.0.1:{}", setup.otlp),
                "--otlp-grpc-listen",
                &format!("127.0.0.1:{}", setup.grpc),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if let Some(url) = &setup.database_url {
            cmd.env("DATABASE_URL", url);
        }
        for (k, v) in &setup.env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().unwrap();
        let pid = child.id();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        // Read the log on a thread of its own, so that a full pipe never stalls the server.
        let echo = std::env::var_os("FLIGHTDECK_CHAOS_SERVER_LOG").is_some();
        std::thread::spawn(move || {
            let mut said = false;
            for line in std::io::BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if !said && line.contains("flightdeck is serving") {
                    said = true;
                    let _ = ready_tx.send(());
                }
                // Why a server stopped, even without the full log.
                if echo || line.contains("panicked") || line.contains("ERROR") || line.contains("error:") {
                    eprintln!("server {pid}: {line}");
                }
            }
        });
        let deadline = Instant::now() + Duration::from_secs(60);
        while ready_rx.recv_timeout(Duration::from_millis(100)).is_err() {
            if let Ok(Some(status)) = child.try_wait() {
                panic!("the server exited before serving ({status}); FLIGHTDECK_CHAOS_SERVER_LOG=1 shows its log");
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("the server did not start serving within a minute");
            }
        }
        Server { child: Some(child), pid }
    }

    /// SIGKILL: no shutdown, no flush, as a node failure or the OOM killer would.
    pub fn kill9(mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().unwrap();
            child.wait().unwrap();
        }
    }

    /// SIGTERM and wait for a graceful exit; returns whether the process exited cleanly.
    pub fn stop(mut self) -> bool {
        let Some(mut child) = self.child.take() else { return true };
        let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
        child.wait().map(|s| s.success()).unwrap_or(false)
    }

    /// The process' peak resident memory so far (`VmHWM`), in MiB.
    pub fn peak_rss_mib(&self) -> f64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid)).unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse::<f64>().ok())
            .map(|kib| kib / 1024.0)
            .unwrap_or(0.0)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Polls `check` every 50 ms until it holds or `limit` passes; returns how long it took.
pub async fn wait_until<F, Fut>(limit: Duration, what: &str, mut check: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let started = Instant::now();
    loop {
        if check().await {
            return started.elapsed();
        }
        assert!(started.elapsed() < limit, "{what} did not happen within {limit:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `/readyz`'s status code, or None when nothing answers.
pub async fn readiness(base: &str) -> Option<u16> {
    let client = reqwest::Client::builder().timeout(Duration::from_secs(5)).build().unwrap();
    client.get(format!("{base}/readyz")).send().await.ok().map(|r| r.status().as_u16())
}
