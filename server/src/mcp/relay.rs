//! One client session relayed to its upstream: every message passes unchanged, except
//! that each `tools/call` goes through the gate ([`super::gate`]), `server/discover` (the
//! stateless 2026 revision) is answered "method not found" so the client uses
//! `initialize`, and what the gateway itself must refuse (a batch the protocol does not
//! allow, too many requests in flight) gets the specification's error. The same loop
//! serves `flightdeck mcp proxy` (stdio) and `/mcp/{server}` (Streamable HTTP); the
//! transport only moves frames.

use super::gate::{self, CallInput, GateIo};
use super::jsonrpc::{self, Frame, Kind};
use super::link::SharedLink;
use super::messages::{Outbound, RelayEvent, UpstreamReply};
use super::spans::{self, CallRecord, RunRecord};
use super::upstream::{FromUpstream, Upstream};
use domain::canonical::{Outcome, TerminalReason};
use domain::mcp::{self as rules, ToolHints};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, watch, Semaphore};

/// What bounds one session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionLimits {
    /// Largest JSON-RPC message either way.
    pub max_message_bytes: usize,
    /// Requests from the client awaiting their answer.
    pub max_in_flight: usize,
}

impl Default for SessionLimits {
    fn default() -> Self {
        SessionLimits { max_message_bytes: 4 * 1024 * 1024, max_in_flight: 32 }
    }
}

/// Who the session is.
#[derive(Debug, Clone)]
pub struct SessionInfo {
    /// The upstream's name in Flightdeck (`[[mcp_servers]]` name or `--name`).
    pub server: String,
    /// The MCP session id (HTTP) or the proxy process's own id (stdio).
    pub session_id: String,
    pub limits: SessionLimits,
}

/// What a transport sends in.
#[derive(Debug)]
pub enum ToRelay {
    Frame(Frame),
    /// The client went away (stdin closed, the session deleted or expired).
    Close,
}

/// Starts a session over a connected upstream; returns where to send the client's
/// frames and where its messages come out. The output ends when the session does.
pub fn start(
    info: SessionInfo,
    upstream: Upstream,
    link: SharedLink,
) -> (mpsc::Sender<ToRelay>, mpsc::Receiver<Outbound>) {
    let (to_relay, inbox) = mpsc::channel(64);
    let (out, outbound) = mpsc::channel(64);
    let (events_tx, events) = mpsc::channel(64);
    let session = Session {
        run_id: format!("mcp-{}", info.session_id),
        in_flight: Arc::new(Semaphore::new(info.limits.max_in_flight)),
        info,
        link,
        upstream_tx: Some(upstream.to),
        out,
        events_tx,
        pending: HashMap::new(),
        hints: HashMap::new(),
        client_name: None,
        protocol_version: None,
        runs: BTreeMap::new(),
        upstream_gone: None,
        started_ns: now_ns(),
        recording: Arc::new(Semaphore::new(64)),
    };
    tokio::spawn(session.run(inbox, upstream.from, events));
    (to_relay, outbound)
}

fn now_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
}

enum Pending {
    /// Relayed as is; its answer goes back as is.
    Relayed { method: String, progress_token: Option<Value> },
    /// A `tools/call` in the gate.
    Call {
        progress_token: Option<Value>,
        cancel: watch::Sender<bool>,
        reply: Option<oneshot::Sender<UpstreamReply>>,
        cancelled: bool,
    },
}

/// What the session knows of a run it worked on.
struct RunFacts {
    started_ns: u64,
    unknown: bool,
}

struct Session {
    info: SessionInfo,
    link: SharedLink,
    upstream_tx: Option<mpsc::Sender<Value>>,
    out: mpsc::Sender<Outbound>,
    events_tx: mpsc::Sender<RelayEvent>,
    pending: HashMap<String, Pending>,
    hints: HashMap<String, ToolHints>,
    client_name: Option<String>,
    protocol_version: Option<String>,
    run_id: String,
    runs: BTreeMap<String, RunFacts>,
    upstream_gone: Option<String>,
    started_ns: u64,
    in_flight: Arc<Semaphore>,
    /// Span exports on their way, at most this many at once; more are dropped (logged).
    recording: Arc<Semaphore>,
}

impl Session {
    async fn run(
        mut self,
        mut inbox: mpsc::Receiver<ToRelay>,
        mut from_upstream: mpsc::Receiver<FromUpstream>,
        mut events: mpsc::Receiver<RelayEvent>,
    ) {
        let mut client_open = true;
        loop {
            let calls = self.pending.values().filter(|p| matches!(p, Pending::Call { .. })).count();
            if (!client_open || self.upstream_gone.is_some()) && calls == 0 {
                break;
            }
            tokio::select! {
                frame = inbox.recv(), if client_open => match frame {
                    Some(ToRelay::Frame(frame)) => self.from_client(frame).await,
                    Some(ToRelay::Close) | None => {
                        client_open = false;
                        for p in self.pending.values() {
                            if let Pending::Call { cancel, .. } = p {
                                let _ = cancel.send(true);
                            }
                        }
                        // Closing the upstream ends what was forwarded: those calls are lost.
                        self.upstream_tx = None;
                    }
                },
                message = from_upstream.recv(), if self.upstream_gone.is_none() => match message {
                    Some(m) => self.from_upstream(m).await,
                    None => self.upstream_closed("the upstream connection ended".into()).await,
                },
                Some(event) = events.recv() => self.event(event).await,
            }
        }
        self.end(client_open).await;
    }

    async fn send(&self, message: Value, related: Option<String>, answers: bool) {
        let _ = self.out.send(Outbound { message, related, answers }).await;
    }

    async fn to_upstream(&self, message: Value) -> bool {
        match &self.upstream_tx {
            Some(tx) => tx.send(message).await.is_ok(),
            None => false,
        }
    }

    async fn from_client(&mut self, frame: Frame) {
        match frame {
            Frame::One(message) => self.client_message(message).await,
            Frame::Batch(items) if jsonrpc::allows_batches(self.protocol_version.as_deref()) => {
                for item in items {
                    self.client_message(item).await;
                }
            }
            Frame::Batch(_) => {
                let why = format!(
                    "invalid request: JSON-RPC batches are not allowed in protocol version {}",
                    self.protocol_version.as_deref().unwrap_or("(not negotiated yet)")
                );
                self.send(jsonrpc::error(Value::Null, jsonrpc::INVALID_REQUEST, &why), None, false).await;
            }
        }
    }

    async fn client_message(&mut self, message: Value) {
        let kind = match jsonrpc::classify(&message) {
            Ok(kind) => kind,
            Err(error) => return self.send(error, None, false).await,
        };
        match kind {
            Kind::Request { id, method } => self.client_request(message, id, method).await,
            Kind::Notification { method } if method == "notifications/cancelled" => self.cancelled(message).await,
            Kind::Notification { .. } | Kind::Response { .. } => {
                self.to_upstream(message).await;
            }
        }
    }

    async fn client_request(&mut self, mut message: Value, id: Value, method: String) {
        let key = jsonrpc::id_key(&id);
        let refuse = |code: i64, why: &str| jsonrpc::error(id.clone(), code, why);
        if self.pending.contains_key(&key) {
            let why = "invalid request: a request with this id is still in progress";
            return self.send(refuse(jsonrpc::INVALID_REQUEST, why), None, false).await;
        }
        if self.pending.len() >= self.info.limits.max_in_flight {
            let why =
                format!("too many requests in flight in this session (at most {})", self.info.limits.max_in_flight);
            return self.send(refuse(jsonrpc::SERVER_ERROR, &why), Some(key), true).await;
        }
        if let Some(why) = &self.upstream_gone {
            let why = format!("the upstream MCP server is gone: {why}");
            return self.send(refuse(jsonrpc::SERVER_ERROR, &why), Some(key), true).await;
        }
        let progress_token = message["params"]["_meta"].get("progressToken").cloned();
        match method.as_str() {
            "server/discover" => {
                let why = format!(
                    "method not found: the Flightdeck gateway speaks the initialize handshake (protocol revisions {})",
                    jsonrpc::PROTOCOL_VERSIONS.join(", ")
                );
                return self.send(refuse(jsonrpc::METHOD_NOT_FOUND, &why), Some(key), true).await;
            }
            "initialize" => {
                self.client_name = message["params"]["clientInfo"]["name"].as_str().map(str::to_string);
                let asked = message["params"]["protocolVersion"].as_str().unwrap_or_default();
                if !jsonrpc::PROTOCOL_VERSIONS.contains(&asked) {
                    // The gateway answers for the versions it relays: offer the newest.
                    message["params"]["protocolVersion"] = json!(jsonrpc::PROTOCOL_VERSIONS[3]);
                }
            }
            "tools/call" => return self.call(message, id, key, progress_token).await,
            _ => {}
        }
        self.pending.insert(key.clone(), Pending::Relayed { method, progress_token });
        if !self.to_upstream(message).await {
            self.pending.remove(&key);
            let why = "the upstream MCP server is gone";
            self.send(refuse(jsonrpc::SERVER_ERROR, why), Some(key), true).await;
        }
    }

    async fn call(&mut self, message: Value, id: Value, key: String, progress_token: Option<Value>) {
        let params = &message["params"];
        let Some(tool) = params["name"].as_str().map(str::to_string) else {
            let e = jsonrpc::error(id, jsonrpc::INVALID_PARAMS, "invalid params: `name` must be the tool's name");
            return self.send(e, Some(key), true).await;
        };
        if !(params["arguments"].is_null() || params["arguments"].is_object()) {
            let e = jsonrpc::error(id, jsonrpc::INVALID_PARAMS, "invalid params: `arguments` must be an object");
            return self.send(e, Some(key), true).await;
        }
        if params.get("task").is_some() {
            let e = jsonrpc::error(
                id,
                jsonrpc::INVALID_PARAMS,
                "invalid params: task-augmented tools/call is not supported through the Flightdeck gateway",
            );
            return self.send(e, Some(key), true).await;
        }
        let meta = match rules::call_meta(params) {
            Ok(meta) => meta,
            Err(why) => {
                return self
                    .send(
                        jsonrpc::error(id, jsonrpc::INVALID_PARAMS, &format!("invalid params: {why}")),
                        Some(key),
                        true,
                    )
                    .await
            }
        };
        let run = meta.run_id.clone().unwrap_or_else(|| self.run_id.clone());
        self.runs.entry(run).or_insert(RunFacts { started_ns: now_ns(), unknown: false });
        let (cancel, cancelled) = watch::channel(false);
        let input = CallInput {
            key: key.clone(),
            hints: self.hints.get(&tool).copied().unwrap_or_default(),
            request: message,
            server: self.info.server.clone(),
            tool,
            meta,
            progress_token: progress_token.clone(),
            session_run: self.run_id.clone(),
            session_id: self.info.session_id.clone(),
            agent: self.client_name.clone(),
        };
        self.pending.insert(key.clone(), Pending::Call { progress_token, cancel, reply: None, cancelled: false });
        let io = GateIo { link: self.link.clone(), relay: self.events_tx.clone(), out: self.out.clone() };
        let events = self.events_tx.clone();
        let permit = self.in_flight.clone();
        tokio::spawn(async move {
            let _permit = permit.acquire_owned().await;
            let finished = gate::call(input, io, cancelled).await;
            let _ = events.send(RelayEvent::Done { key, finished }).await;
        });
    }

    async fn cancelled(&mut self, message: Value) {
        let key = jsonrpc::id_key(&message["params"]["requestId"]);
        match self.pending.get_mut(&key) {
            Some(Pending::Call { cancel, reply, cancelled, .. }) => {
                *cancelled = true;
                let _ = cancel.send(true);
                // Forwarded already: the upstream is told too; the call stays open until
                // it answers or times out, so the ledger learns how it ended.
                if reply.is_some() {
                    self.to_upstream(message).await;
                }
            }
            Some(Pending::Relayed { .. }) => {
                self.pending.remove(&key);
                self.to_upstream(message).await;
            }
            None => {
                self.to_upstream(message).await;
            }
        }
    }

    async fn from_upstream(&mut self, message: FromUpstream) {
        match message {
            FromUpstream::Message(m) => match jsonrpc::classify(&m) {
                Ok(Kind::Response { id }) => self.upstream_answer(m, &id).await,
                Ok(Kind::Notification { method }) if method == "notifications/progress" => {
                    let token = m["params"]["progressToken"].clone();
                    let related = self.pending.iter().find_map(|(k, p)| match p {
                        Pending::Relayed { progress_token: Some(t), .. }
                        | Pending::Call { progress_token: Some(t), .. }
                            if *t == token =>
                        {
                            Some(k.clone())
                        }
                        _ => None,
                    });
                    self.send(m, related, false).await;
                }
                // Requests of the server (sampling, elicitation, roots) and its other
                // notifications go to the client unchanged.
                _ => self.send(m, None, false).await,
            },
            FromUpstream::Failed { id, why } => {
                let key = jsonrpc::id_key(&id);
                match self.pending.remove(&key) {
                    Some(Pending::Call { reply, progress_token, cancel, cancelled }) => {
                        if let Some(reply) = reply {
                            let _ = reply.send(UpstreamReply::Lost(why));
                        }
                        self.pending.insert(key, Pending::Call { reply: None, progress_token, cancel, cancelled });
                    }
                    Some(Pending::Relayed { .. }) => {
                        let e = jsonrpc::error(id, jsonrpc::SERVER_ERROR, &format!("upstream MCP server: {why}"));
                        self.send(e, Some(key), true).await;
                    }
                    None => {}
                }
            }
            FromUpstream::Closed(why) => self.upstream_closed(why).await,
        }
    }

    async fn upstream_answer(&mut self, message: Value, id: &Value) {
        let key = jsonrpc::id_key(id);
        match self.pending.remove(&key) {
            Some(Pending::Call { reply, progress_token, cancel, cancelled }) => {
                if let Some(reply) = reply {
                    let _ = reply.send(UpstreamReply::Answered(message));
                }
                // The gate still has to report; the call leaves when it is done.
                self.pending.insert(key, Pending::Call { reply: None, progress_token, cancel, cancelled });
            }
            Some(Pending::Relayed { method, .. }) => {
                if method == "tools/list" {
                    self.learn_tools(&message);
                }
                if method == "initialize" {
                    self.protocol_version = message["result"]["protocolVersion"].as_str().map(str::to_string);
                }
                self.send(message, Some(key), true).await;
            }
            // Not a request the gateway knows of: relayed as it came.
            None => self.send(message, None, false).await,
        }
    }

    /// Keeps each listed tool's annotations, and has Flightdeck decide on them now, so a
    /// proxy knows its fail-open tools before Flightdeck may go away.
    fn learn_tools(&mut self, message: &Value) {
        let Some(tools) = message["result"]["tools"].as_array() else { return };
        let mut listed = Vec::new();
        for tool in tools.iter().take(10_000) {
            if let Some(name) = tool["name"].as_str() {
                let hints = ToolHints::of_tool(tool);
                self.hints.insert(name.to_string(), hints);
                listed.push((name.to_string(), hints));
            }
        }
        let (link, server) = (self.link.clone(), self.info.server.clone());
        tokio::spawn(async move {
            if let Err(e) = link.decide(&server, &listed).await {
                tracing::warn!(error = %e, "could not ask flightdeck about the listed tools");
            }
        });
    }

    async fn upstream_closed(&mut self, why: String) {
        if self.upstream_gone.is_some() {
            return;
        }
        tracing::warn!(server = %self.info.server, %why, "the upstream MCP server is gone");
        self.upstream_gone = Some(why.clone());
        self.upstream_tx = None;
        let keys: Vec<String> = self.pending.keys().cloned().collect();
        for key in keys {
            match self.pending.remove(&key) {
                Some(Pending::Relayed { .. }) => {
                    // The id is in the key; rebuild it for the error.
                    let id = id_of_key(&key);
                    let e =
                        jsonrpc::error(id, jsonrpc::SERVER_ERROR, &format!("the upstream MCP server is gone: {why}"));
                    self.send(e, Some(key), true).await;
                }
                Some(Pending::Call { reply, progress_token, cancel, cancelled }) => {
                    if let Some(reply) = reply {
                        let _ = reply.send(UpstreamReply::Lost(why.clone()));
                    }
                    self.pending.insert(key, Pending::Call { reply: None, progress_token, cancel, cancelled });
                }
                None => {}
            }
        }
    }

    async fn event(&mut self, event: RelayEvent) {
        match event {
            RelayEvent::Forward { key, request, reply } => {
                if let Some(why) = &self.upstream_gone {
                    let _ = reply.send(UpstreamReply::NotSent(why.clone()));
                    return;
                }
                if !self.to_upstream(request).await {
                    let _ = reply.send(UpstreamReply::NotSent("the session is closing".into()));
                    return;
                }
                if let Some(Pending::Call { reply: slot, .. }) = self.pending.get_mut(&key) {
                    *slot = Some(reply);
                }
            }
            RelayEvent::Done { key, finished } => {
                let cancelled = matches!(self.pending.remove(&key), Some(Pending::Call { cancelled: true, .. }));
                if let (Some(response), false) = (finished.response, cancelled) {
                    self.send(response, Some(key), true).await;
                }
                if finished.record.outcome == Outcome::Unknown {
                    if let Some(run) = self.runs.get_mut(&finished.record.run_id) {
                        run.unknown = true;
                    }
                }
                self.record(finished.record);
            }
        }
    }

    fn service(&self) -> String {
        spans::service_name(self.client_name.as_deref(), &self.info.server)
    }

    /// Sends a call's span in the background; never holds the client up.
    fn record(&self, record: CallRecord) {
        let Ok(permit) = self.recording.clone().try_acquire_owned() else {
            tracing::warn!(tool = %record.tool, "too many spans on their way to flightdeck; one dropped");
            return;
        };
        let (link, export) = (self.link.clone(), spans::call_span(&record, &self.service()));
        tokio::spawn(async move {
            let _permit = permit;
            if let Err(e) = link.record(export).await {
                tracing::warn!(error = %e, "could not record a gateway call's span");
            }
        });
    }

    /// The session is over: each run it worked on gets its root span.
    async fn end(self, client_open: bool) {
        let ended = now_ns();
        let service = self.service();
        for (run_id, facts) in &self.runs {
            let (terminal, reason) = match (&self.upstream_gone, facts.unknown) {
                (_, true) => (
                    TerminalReason::Escalated,
                    Some("outcome_unknown: a call's upstream did not answer after it was sent".to_string()),
                ),
                (Some(why), false) if client_open => (TerminalReason::Error, Some(why.clone())),
                _ => (TerminalReason::Completed, None),
            };
            let run = RunRecord {
                run_id: run_id.clone(),
                server: self.info.server.clone(),
                session_id: self.info.session_id.clone(),
                client_name: self.client_name.clone(),
                protocol_version: self.protocol_version.clone(),
                started_ns: facts.started_ns.min(self.started_ns.max(facts.started_ns)),
                ended_ns: ended,
                terminal,
                reason,
            };
            let export = spans::run_span(&run, &service);
            match tokio::time::timeout(Duration::from_secs(5), self.link.record(export)).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::warn!(error = %e, run = %run_id, "could not record the end of a gateway run"),
                Err(_) => tracing::warn!(run = %run_id, "flightdeck did not take the end of a gateway run in time"),
            }
        }
        // Let the last call spans go out before the process may exit.
        let _ = tokio::time::timeout(Duration::from_secs(5), self.recording.acquire_many(64)).await;
    }
}

/// The JSON-RPC id a map key was made from.
fn id_of_key(key: &str) -> Value {
    match key.split_once(':') {
        Some(("s", s)) => Value::String(s.to_string()),
        Some((_, n)) => serde_json::from_str(n).unwrap_or(Value::Null),
        None => Value::Null,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_give_back_their_ids() {
        for id in [json!(7), json!("abc"), json!("n:1"), json!(-3)] {
            assert_eq!(id_of_key(&jsonrpc::id_key(&id)), id);
        }
    }
}
