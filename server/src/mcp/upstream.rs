//! The MCP server behind the gateway, one upstream session per client session: a child
//! process spoken to over stdio (newline-delimited JSON-RPC), or a remote server over
//! Streamable HTTP (POST each message; answers as JSON or an SSE stream; `Mcp-Session-Id`;
//! a GET stream for what the server sends on its own; DELETE at the end). Messages are
//! relayed as `serde_json::Value`s, so nothing the gateway does not know is dropped.

use super::jsonrpc;
use serde_json::Value;
use std::collections::BTreeMap;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

/// Where the upstream is.
#[derive(Debug, Clone, PartialEq)]
pub enum UpstreamSpec {
    Command { command: String, args: Vec<String>, env: BTreeMap<String, String> },
    Url { url: String, headers: BTreeMap<String, String> },
}

/// What the upstream sent or what became of it.
#[derive(Debug, Clone, PartialEq)]
pub enum FromUpstream {
    Message(Value),
    /// A request was sent but its answer will not come (an HTTP error, a stream that
    /// ended first): whether the server acted on it is unknown.
    Failed {
        id: Value,
        why: String,
    },
    /// The upstream is gone (its process exited, it ended the session).
    Closed(String),
}

/// A connected upstream: send messages into `to`, read what comes back from `from`.
/// Dropping `to` ends the upstream session (stdin closed, then the process killed; or a
/// DELETE).
pub struct Upstream {
    pub to: mpsc::Sender<Value>,
    pub from: mpsc::Receiver<FromUpstream>,
}

/// Messages queued towards or from one upstream before the sender waits.
const QUEUE: usize = 64;

pub async fn connect(spec: &UpstreamSpec, max_message_bytes: usize) -> anyhow::Result<Upstream> {
    match spec {
        UpstreamSpec::Command { command, args, env } => spawn(command, args, env, max_message_bytes),
        UpstreamSpec::Url { url, headers } => Ok(http(url, headers, max_message_bytes)?),
    }
}

/// How reading one newline-delimited frame went.
#[derive(Debug, PartialEq)]
pub enum Line {
    Frame(Vec<u8>),
    /// Longer than the limit: skipped up to its newline.
    TooLong(usize),
    Eof,
}

/// Reads one line of at most `max` bytes without holding more than that in memory.
pub async fn read_line<R: AsyncBufRead + Unpin>(reader: &mut R, max: usize) -> std::io::Result<Line> {
    let mut buf = Vec::new();
    let mut seen = 0usize;
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(match (seen, seen > max) {
                (0, _) => Line::Eof,
                (n, true) => Line::TooLong(n),
                _ => Line::Frame(buf),
            });
        }
        let (take, done) = match available.iter().position(|b| *b == b'\n') {
            Some(i) => (i, true),
            None => (available.len(), false),
        };
        if seen + take <= max {
            buf.extend_from_slice(&available[..take]);
        } else {
            buf = Vec::new();
        }
        seen += take;
        reader.consume(take + usize::from(done));
        if done {
            if buf.last() == Some(&b'\r') {
                buf.pop();
            }
            return Ok(if seen > max { Line::TooLong(seen) } else { Line::Frame(buf) });
        }
    }
}

fn spawn(command: &str, args: &[String], env: &BTreeMap<String, String>, max: usize) -> anyhow::Result<Upstream> {
    let mut cmd = tokio::process::Command::new(command);
    cmd.args(args)
        .envs(env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        // The server's own log goes where the gateway's goes (a host shows it).
        .stderr(Stdio::inherit())
        .kill_on_drop(true);
    // A proxy that dies (or exits without running destructors) takes its server along.
    #[cfg(target_os = "linux")]
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            Ok(())
        });
    }
    let mut child = cmd.spawn().map_err(|e| anyhow::anyhow!("cannot start the MCP server `{command}`: {e}"))?;
    let mut stdin = child.stdin.take().expect("piped stdin");
    let stdout = child.stdout.take().expect("piped stdout");
    let (to, mut outgoing) = mpsc::channel::<Value>(QUEUE);
    let (events, from) = mpsc::channel(QUEUE);
    // Told when the session no longer needs the server and it did not exit on its own.
    let stop = Arc::new(tokio::sync::Notify::new());
    tokio::spawn({
        let stop = stop.clone();
        async move {
            while let Some(message) = outgoing.recv().await {
                let mut line = message.to_string().into_bytes();
                line.push(b'\n');
                if stdin.write_all(&line).await.is_err() || stdin.flush().await.is_err() {
                    break;
                }
            }
            // Closing stdin asks the server to exit; one still running 2 s later is killed.
            drop(stdin);
            tokio::time::sleep(std::time::Duration::from_secs(2)).await;
            stop.notify_one();
        }
    });
    tokio::spawn(async move {
        let mut reader = BufReader::new(stdout);
        loop {
            let line = tokio::select! {
                line = read_line(&mut reader, max) => line,
                _ = stop.notified() => break,
            };
            match line {
                Ok(Line::Frame(bytes)) if bytes.iter().all(u8::is_ascii_whitespace) => continue,
                Ok(Line::Frame(bytes)) => match serde_json::from_slice::<Value>(&bytes) {
                    Ok(v) if jsonrpc::classify(&v).is_ok() => {
                        if events.send(FromUpstream::Message(v)).await.is_err() {
                            break;
                        }
                    }
                    _ => {
                        tracing::warn!(bytes = bytes.len(), "the MCP server wrote a line that is not JSON-RPC; skipped")
                    }
                },
                Ok(Line::TooLong(n)) => {
                    tracing::warn!(bytes = n, "the MCP server wrote a message over the limit; skipped")
                }
                Ok(Line::Eof) | Err(_) => break,
            }
        }
        let status = match tokio::time::timeout(std::time::Duration::from_secs(2), child.wait()).await {
            Ok(Ok(status)) => status.to_string(),
            _ => {
                let _ = child.kill().await;
                "killed: it did not exit".to_string()
            }
        };
        let _ = events.send(FromUpstream::Closed(format!("the MCP server's process ended ({status})"))).await;
    });
    Ok(Upstream { to, from })
}

/// What one Streamable HTTP upstream session keeps between requests.
struct HttpSession {
    url: String,
    headers: reqwest::header::HeaderMap,
    http: reqwest::Client,
    session_id: Mutex<Option<String>>,
    protocol_version: Mutex<Option<String>>,
    events: mpsc::Sender<FromUpstream>,
    max: usize,
}

fn http(url: &str, headers: &BTreeMap<String, String>, max: usize) -> anyhow::Result<Upstream> {
    let mut map = reqwest::header::HeaderMap::new();
    for (k, v) in headers {
        map.insert(reqwest::header::HeaderName::from_bytes(k.as_bytes())?, reqwest::header::HeaderValue::from_str(v)?);
    }
    let (to, mut outgoing) = mpsc::channel::<Value>(QUEUE);
    let (events, from) = mpsc::channel(QUEUE);
    let session = Arc::new(HttpSession {
        url: url.to_string(),
        headers: map,
        http: reqwest::Client::builder().connect_timeout(std::time::Duration::from_secs(5)).build()?,
        session_id: Mutex::default(),
        protocol_version: Mutex::default(),
        events,
        max,
    });
    tokio::spawn(async move {
        while let Some(message) = outgoing.recv().await {
            let initialized = message["method"] == "notifications/initialized";
            let session = session.clone();
            tokio::spawn(async move {
                session.post(message).await;
                if initialized {
                    session.listen().await;
                }
            });
        }
        session.end().await;
    });
    Ok(Upstream { to, from })
}

impl HttpSession {
    fn request(&self, method: reqwest::Method) -> reqwest::RequestBuilder {
        let mut r = self.http.request(method, &self.url).headers(self.headers.clone());
        if let Some(id) = self.session_id.lock().expect("session lock").clone() {
            r = r.header("mcp-session-id", id);
        }
        if let Some(v) = self.protocol_version.lock().expect("version lock").clone() {
            r = r.header("mcp-protocol-version", v);
        }
        r
    }

    async fn post(&self, message: Value) {
        let id = message.get("method").and(message.get("id")).cloned();
        let initialize = message["method"] == "initialize";
        let sent = self
            .request(reqwest::Method::POST)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .body(message.to_string())
            .send()
            .await;
        let failed = |why: String| async {
            match &id {
                Some(id) => drop(self.events.send(FromUpstream::Failed { id: id.clone(), why }).await),
                None => tracing::warn!(%why, "a message to the upstream MCP server was not delivered"),
            }
        };
        let response = match sent {
            Ok(r) => r,
            Err(e) => return failed(format!("the upstream MCP server could not be reached: {e}")).await,
        };
        let status = response.status();
        if status == reqwest::StatusCode::NOT_FOUND && self.session_id.lock().expect("session lock").is_some() {
            let _ = self.events.send(FromUpstream::Closed("the upstream MCP server ended the session".into())).await;
            return;
        }
        if !status.is_success() {
            return failed(format!("the upstream MCP server answered HTTP {status}")).await;
        }
        if initialize {
            let sid = response.headers().get("mcp-session-id").and_then(|v| v.to_str().ok()).map(str::to_string);
            *self.session_id.lock().expect("session lock") = sid;
        }
        if status == reqwest::StatusCode::ACCEPTED || id.is_none() {
            return;
        }
        let sse = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| t.starts_with("text/event-stream"));
        let answered =
            if sse { self.read_sse(response, id.as_ref()).await } else { self.read_json(response, id.as_ref()).await };
        if !answered {
            failed("the upstream MCP server's answer ended before the response".into()).await;
        }
    }

    /// Handles one message the upstream sent; whether it answered `id`.
    async fn deliver(&self, message: Value, id: Option<&Value>) -> bool {
        let answers = id.is_some_and(|id| message.get("method").is_none() && message.get("id") == Some(id));
        if answers && message["result"]["protocolVersion"].is_string() {
            *self.protocol_version.lock().expect("version lock") =
                message["result"]["protocolVersion"].as_str().map(str::to_string);
        }
        let _ = self.events.send(FromUpstream::Message(message)).await;
        answers
    }

    async fn read_json(&self, mut response: reqwest::Response, id: Option<&Value>) -> bool {
        let mut body = Vec::new();
        while let Ok(Some(chunk)) = response.chunk().await {
            body.extend_from_slice(&chunk);
            if body.len() > self.max {
                return false;
            }
        }
        let mut answered = false;
        match serde_json::from_slice::<Value>(&body) {
            Ok(Value::Array(items)) => {
                for item in items {
                    answered |= self.deliver(item, id).await;
                }
            }
            Ok(v) if jsonrpc::classify(&v).is_ok() => answered = self.deliver(v, id).await,
            _ => tracing::warn!("the upstream MCP server answered with something that is not JSON-RPC"),
        }
        answered
    }

    /// Reads an SSE stream, each event's data one message; stops at the end of the
    /// stream or once `id` is answered.
    async fn read_sse(&self, mut response: reqwest::Response, id: Option<&Value>) -> bool {
        let mut pending = Vec::<u8>::new();
        let mut data = String::new();
        loop {
            let chunk = match response.chunk().await {
                Ok(Some(chunk)) => chunk,
                _ => return false,
            };
            pending.extend_from_slice(&chunk);
            while let Some(end) = pending.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = pending.drain(..=end).collect();
                let line = String::from_utf8_lossy(&line);
                let line = line.trim_end_matches(['\n', '\r']);
                if line.is_empty() {
                    if !data.is_empty() {
                        let event = std::mem::take(&mut data);
                        match serde_json::from_str::<Value>(&event) {
                            Ok(v) if jsonrpc::classify(&v).is_ok() => {
                                if self.deliver(v, id).await {
                                    return true;
                                }
                            }
                            _ => tracing::warn!("the upstream MCP server sent an event that is not JSON-RPC"),
                        }
                    }
                } else if let Some(rest) = line.strip_prefix("data:") {
                    if data.len() + rest.len() > self.max {
                        return false;
                    }
                    if !data.is_empty() {
                        data.push('\n');
                    }
                    data.push_str(rest.strip_prefix(' ').unwrap_or(rest));
                }
            }
            if pending.len() > self.max {
                return false;
            }
        }
    }

    /// The GET stream for what the server sends unasked (if it offers one).
    async fn listen(&self) {
        let Ok(response) = self.request(reqwest::Method::GET).header("accept", "text/event-stream").send().await else {
            return;
        };
        if response.status().is_success() {
            self.read_sse(response, None).await;
        }
    }

    async fn end(&self) {
        if self.session_id.lock().expect("session lock").is_some() {
            let _ = self.request(reqwest::Method::DELETE).send().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lines_over_the_limit_are_skipped_whole() {
        let input: &[u8] = b"{\"a\":1}\r\n0123456789abcdef\n{}\nlast";
        let mut reader = BufReader::with_capacity(4, input);
        assert_eq!(read_line(&mut reader, 10).await.unwrap(), Line::Frame(b"{\"a\":1}".to_vec()));
        assert_eq!(read_line(&mut reader, 10).await.unwrap(), Line::TooLong(16));
        assert_eq!(read_line(&mut reader, 10).await.unwrap(), Line::Frame(b"{}".to_vec()));
        assert_eq!(read_line(&mut reader, 10).await.unwrap(), Line::Frame(b"last".to_vec()));
        assert_eq!(read_line(&mut reader, 10).await.unwrap(), Line::Eof);
    }
}
