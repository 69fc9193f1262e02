//! `flightdeck serve` as a child process on ports the system picks. Each listener binds
//! port 0 and the test reads the bound addresses from the line that says it is serving:
//! a port picked in advance and freed again can be taken by a parallel test's server or
//! by any outgoing connection before the child binds it.
#![allow(dead_code)] // each test file uses its own part

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// A serving child. Killed when dropped.
pub struct Serving {
    pub child: Child,
    /// `http://127.0.0.1:PORT`, the pages and the agent API.
    pub base: String,
    /// `http://127.0.0.1:PORT/v1/traces`.
    pub otlp_http: String,
    /// `http://127.0.0.1:PORT`, for a gRPC channel.
    pub otlp_grpc: String,
    log: Arc<Mutex<Vec<String>>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Serving {
    /// Starts `command` (a `flightdeck … serve …` without listen flags; stderr is taken
    /// here) with every listener on port 0, and waits until it serves. The log is kept
    /// and read on a thread of its own, so a full pipe never stalls the server; lines
    /// that say why a server failed are echoed to the test's output.
    pub fn start(mut command: Command) -> Serving {
        let mut child = command
            .args(["--listen", "127.0.0.1:0", "--otlp-http-listen", "127.0.0.1:0", "--otlp-grpc-listen", "127.0.0.1:0"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("flightdeck starts");
        let stderr = child.stderr.take().unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let (ready, serving) = mpsc::channel();
        let reader = std::thread::spawn({
            let log = log.clone();
            let echo = std::env::var_os("FLIGHTDECK_TEST_SERVER_LOG").is_some();
            move || {
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    if echo || line.contains("panicked") || line.contains("ERROR") || line.starts_with("Error") {
                        eprintln!("server: {line}");
                    }
                    let serving = line.contains("flightdeck is serving").then(|| line.clone());
                    log.lock().unwrap().push(line);
                    // After the push: what `log()` returns once serving holds this line.
                    if let Some(line) = serving {
                        let _ = ready.send(line);
                    }
                }
            }
        });
        let deadline = Instant::now() + Duration::from_secs(60);
        let line = loop {
            match serving.recv_timeout(Duration::from_millis(100)) {
                Ok(line) => break line,
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let status = child.wait().unwrap();
                    panic!("the server exited before serving ({status}): {:#?}", log.lock().unwrap());
                }
                Err(mpsc::RecvTimeoutError::Timeout) if Instant::now() > deadline => {
                    let _ = child.kill();
                    panic!("the server did not start serving within a minute: {:#?}", log.lock().unwrap());
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
            }
        };
        let field = |name: &str| {
            line.split_whitespace()
                .find_map(|word| word.strip_prefix(name))
                .unwrap_or_else(|| panic!("`{name}` in the serving line: {line}"))
                .to_string()
        };
        let (base, otlp_http) = (field("ui="), field("otlp_http="));
        let otlp_grpc = format!("http://{}", field("otlp_grpc="));
        Serving { child, base, otlp_http, otlp_grpc, log, reader: Some(reader) }
    }

    /// Every line the server has written so far.
    pub fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGTERM, as a supervisor stops it; returns how it exited once its log is read to
    /// the end.
    pub fn terminate(&mut self) -> ExitStatus {
        let sent = Command::new("kill").args(["-TERM", &self.pid().to_string()]).status().unwrap();
        assert!(sent.success(), "kill -TERM {}", self.pid());
        let status = self.child.wait().unwrap();
        if let Some(reader) = self.reader.take() {
            reader.join().unwrap();
        }
        status
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
