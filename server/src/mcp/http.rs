//! `/mcp/{server}`: Streamable HTTP for remote MCP clients, one upstream session per
//! client session. POST carries the client's messages (answered 202, or with an SSE
//! stream holding the requests' progress and answers, or JSON for a client that accepts
//! only JSON); GET opens the stream for what the upstream sends unasked, or resumes a
//! broken stream from `Last-Event-ID`; DELETE ends the session. Sessions are named by
//! `Mcp-Session-Id`, belong to the bearer token (scope `mcp`) that opened them, and are
//! bounded: their number, each one's buffered events, and their idle time.

use super::jsonrpc::{self, Frame, Kind};
use super::link::{Local, SharedLink};
use super::messages::Outbound;
use super::relay::{self, SessionInfo, SessionLimits, ToRelay};
use super::upstream;
use super::McpServerConfig;
use crate::api::{AgentToken, TokenAuth};
use crate::otlp::IngestService;
use app::services::calls::CallsContext;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use domain::access::Scope;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use store::rules::RulesCache;
use store::Db;
use tokio::sync::mpsc;

/// What bounds the HTTP gateway as a whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GatewayLimits {
    pub session: SessionLimits,
    /// Client sessions open at once, over every server.
    pub max_sessions: usize,
    /// Events kept per session for resumption (and for a GET stream not yet opened).
    pub max_buffered_events: usize,
    /// Bytes of those events per session, and over all sessions together; past either,
    /// the session's oldest events go first.
    pub max_buffered_bytes: usize,
    pub max_buffered_bytes_total: usize,
    /// A session with no request for this long is ended.
    pub idle: Duration,
}

impl Default for GatewayLimits {
    fn default() -> Self {
        GatewayLimits {
            session: SessionLimits::default(),
            max_sessions: 256,
            max_buffered_events: 1024,
            max_buffered_bytes: 16 * 1024 * 1024,
            max_buffered_bytes_total: 256 * 1024 * 1024,
            idle: Duration::from_secs(30 * 60),
        }
    }
}

/// What a session's link needs from the server.
#[derive(Clone)]
pub struct LocalDeps {
    pub db: Db,
    pub ctx: CallsContext,
    pub rules: RulesCache,
    pub ingest: Option<IngestService>,
}

#[derive(Clone)]
pub struct Gateway {
    inner: Arc<Inner>,
}

struct Inner {
    servers: HashMap<String, McpServerConfig>,
    sessions: Mutex<HashMap<String, Arc<HttpSession>>>,
    limits: GatewayLimits,
    deps: LocalDeps,
    tokens: TokenAuth,
    /// Bytes of buffered events over every session.
    buffered_total: Arc<AtomicUsize>,
}

/// One client session.
struct HttpSession {
    id: String,
    server: String,
    token_id: i64,
    to_relay: mpsc::Sender<ToRelay>,
    streams: Mutex<Streams>,
    last_active: Mutex<Instant>,
}

/// The SSE streams of a session. Stream 0 is the GET stream; each POST holding requests
/// gets the next number. Event ids are `{stream}-{seq}`.
#[derive(Default)]
struct Streams {
    next: u64,
    by_id: BTreeMap<u64, Stream>,
    /// Which stream a pending request's messages go to.
    of_request: HashMap<String, u64>,
    buffered: usize,
    buffered_bytes: usize,
    ended: bool,
}

/// What bounds a session's buffer.
#[derive(Clone)]
struct BufferLimits {
    events: usize,
    bytes: usize,
    total_bytes: usize,
    total: Arc<AtomicUsize>,
}

type Live = mpsc::Sender<(String, Arc<String>)>;

#[derive(Default)]
struct Stream {
    events: std::collections::VecDeque<(u64, Arc<String>)>,
    next_seq: u64,
    /// The highest sequence number a connection was given.
    sent: Option<u64>,
    live: Option<Live>,
    open_requests: HashSet<String>,
    /// Every request it held is answered: it closes after its last event.
    done: bool,
}

impl Streams {
    fn push(&mut self, stream_id: u64, data: Arc<String>, answers: Option<&str>, limits: &BufferLimits) {
        let size = data.len();
        let stream = self.by_id.entry(stream_id).or_default();
        let seq = stream.next_seq;
        stream.next_seq += 1;
        stream.events.push_back((seq, data.clone()));
        if let Some(live) = &stream.live {
            if live.try_send((format!("{stream_id}-{seq}"), data)).is_ok() {
                stream.sent = Some(seq);
            } else {
                // A client too slow or gone: it may resume with Last-Event-ID.
                stream.live = None;
            }
        }
        if let Some(key) = answers {
            stream.open_requests.remove(key);
            self.of_request.remove(key);
            if stream.open_requests.is_empty() && stream_id != 0 {
                stream.done = true;
                stream.live = None;
            }
        }
        self.buffered += 1;
        self.buffered_bytes += size;
        limits.total.fetch_add(size, Ordering::Relaxed);
        while self.buffered > limits.events
            || self.buffered_bytes > limits.bytes
            || (limits.total.load(Ordering::Relaxed) > limits.total_bytes && self.buffered > 0)
        {
            // The oldest event of the oldest stream goes first.
            let Some((&oldest, _)) = self.by_id.iter().find(|(_, s)| !s.events.is_empty()) else { break };
            let s = self.by_id.get_mut(&oldest).expect("present");
            if let Some((_, gone)) = s.events.pop_front() {
                self.buffered -= 1;
                self.buffered_bytes -= gone.len();
                limits.total.fetch_sub(gone.len(), Ordering::Relaxed);
            }
            if s.done && s.events.is_empty() {
                self.by_id.remove(&oldest);
            }
        }
    }

    /// Gives back what the session held of the total.
    fn release(&mut self, limits: &BufferLimits) {
        limits.total.fetch_sub(self.buffered_bytes, Ordering::Relaxed);
        self.buffered_bytes = 0;
        self.buffered = 0;
        self.by_id.values_mut().for_each(|s| s.events.clear());
    }

    /// Opens a connection to `stream_id` after `after` (a fresh one: after what was sent).
    fn attach(
        &mut self,
        stream_id: u64,
        after: Option<u64>,
        capacity: usize,
    ) -> Option<mpsc::Receiver<(String, Arc<String>)>> {
        let stream = self.by_id.get_mut(&stream_id)?;
        let (tx, rx) = mpsc::channel(capacity.max(1));
        let from = after.or(stream.sent);
        for (seq, data) in &stream.events {
            if from.is_none_or(|f| *seq > f) {
                let _ = tx.try_send((format!("{stream_id}-{seq}"), data.clone()));
                stream.sent = Some(*seq);
            }
        }
        if !stream.done && !self.ended {
            stream.live = Some(tx);
        }
        Some(rx)
    }
}

fn jsonrpc_response(status: StatusCode, body: Value) -> Response {
    (status, Json(body)).into_response()
}

fn http_error(status: StatusCode, code: i64, message: &str) -> Response {
    jsonrpc_response(status, jsonrpc::error(Value::Null, code, message))
}

impl Gateway {
    pub fn new(servers: &[McpServerConfig], limits: GatewayLimits, deps: LocalDeps) -> Gateway {
        let gateway = Gateway {
            inner: Arc::new(Inner {
                servers: servers.iter().map(|s| (s.name.clone(), s.clone())).collect(),
                sessions: Mutex::default(),
                limits,
                tokens: TokenAuth::new(deps.db.clone()),
                deps,
                buffered_total: Arc::default(),
            }),
        };
        let weak = Arc::downgrade(&gateway.inner);
        tokio::spawn(async move {
            let mut every = tokio::time::interval(Duration::from_secs(10));
            loop {
                every.tick().await;
                let Some(inner) = weak.upgrade() else { return };
                let idle: Vec<Arc<HttpSession>> = inner
                    .sessions
                    .lock()
                    .expect("sessions lock")
                    .values()
                    .filter(|s| s.last_active.lock().expect("activity lock").elapsed() > inner.limits.idle)
                    // A call held for a person is not idleness.
                    .filter(|s| s.streams.lock().expect("streams lock").of_request.is_empty())
                    .cloned()
                    .collect();
                for s in idle {
                    tracing::info!(session = %s.id, "mcp session idle too long; ended");
                    inner.sessions.lock().expect("sessions lock").remove(&s.id);
                    let _ = s.to_relay.send(ToRelay::Close).await;
                }
            }
        });
        gateway
    }

    /// Sessions open now.
    pub fn session_count(&self) -> usize {
        self.inner.sessions.lock().expect("sessions lock").len()
    }

    pub fn router<S: Clone + Send + Sync + 'static>(&self) -> Router<S> {
        // Read a body up to twice the message limit, so an oversized message is answered
        // with its JSON-RPC error (413) on a connection that stays usable; past that axum
        // refuses it unread.
        let limit = 2 * self.inner.limits.session.max_message_bytes + 1024;
        Router::new()
            .route("/mcp/{server}", post(post_message).get(get_stream).delete(delete_session))
            .layer(axum::extract::DefaultBodyLimit::max(limit))
            .with_state(self.clone())
    }

    async fn token(&self, headers: &HeaderMap) -> Result<AgentToken, Response> {
        let authorization = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
        let token = self.inner.tokens.authenticate(authorization).await.map_err(|e| e.into_response())?;
        token.require(Scope::Mcp).map_err(|e| e.into_response())?;
        Ok(token)
    }

    fn session(&self, headers: &HeaderMap, server: &str, token: &AgentToken) -> Result<Arc<HttpSession>, Response> {
        let Some(id) = headers.get("mcp-session-id").and_then(|v| v.to_str().ok()) else {
            return Err(http_error(
                StatusCode::BAD_REQUEST,
                jsonrpc::INVALID_REQUEST,
                "bad request: no Mcp-Session-Id header (send initialize first)",
            ));
        };
        let found = self.inner.sessions.lock().expect("sessions lock").get(id).cloned();
        match found {
            Some(s) if s.server == server && s.token_id == token.id => {
                *s.last_active.lock().expect("activity lock") = Instant::now();
                Ok(s)
            }
            // Another token's session is as unknown as an ended one.
            _ => Err(http_error(
                StatusCode::NOT_FOUND,
                jsonrpc::INVALID_REQUEST,
                "session not found: it ended or expired; initialize a new one",
            )),
        }
    }

    async fn open(&self, server: &McpServerConfig, token: AgentToken) -> Result<Arc<HttpSession>, Response> {
        if self.session_count() >= self.inner.limits.max_sessions {
            let why =
                format!("too many MCP sessions open (at most {}); try again later", self.inner.limits.max_sessions);
            return Err(http_error(StatusCode::SERVICE_UNAVAILABLE, jsonrpc::SERVER_ERROR, &why));
        }
        let limits = self.inner.limits;
        let upstream =
            upstream::connect(&super::upstream_of(server), limits.session.max_message_bytes).await.map_err(|e| {
                tracing::error!(server = %server.name, error = %e, "cannot reach the upstream MCP server");
                http_error(
                    StatusCode::BAD_GATEWAY,
                    jsonrpc::SERVER_ERROR,
                    &format!("the upstream MCP server `{}` cannot be reached", server.name),
                )
            })?;
        let id = hex::encode(rand::random::<[u8; 16]>());
        let deps = &self.inner.deps;
        let token_id = token.id;
        let link: SharedLink = Arc::new(Local {
            db: deps.db.clone(),
            ctx: deps.ctx.clone(),
            rules: deps.rules.clone(),
            ingest: deps.ingest.clone(),
            token,
        });
        let info = SessionInfo { server: server.name.clone(), session_id: id.clone(), limits: limits.session };
        let (to_relay, mut out) = relay::start(info, upstream, link);
        let session = Arc::new(HttpSession {
            id: id.clone(),
            server: server.name.clone(),
            token_id,
            to_relay,
            streams: Mutex::new(Streams { next: 1, ..Default::default() }),
            last_active: Mutex::new(Instant::now()),
        });
        session.streams.lock().expect("streams lock").by_id.insert(0, Stream::default());
        self.inner.sessions.lock().expect("sessions lock").insert(id.clone(), session.clone());
        let (weak, gateway) = (Arc::downgrade(&session), self.clone());
        let buffer = BufferLimits {
            events: limits.max_buffered_events,
            bytes: limits.max_buffered_bytes,
            total_bytes: limits.max_buffered_bytes_total,
            total: self.inner.buffered_total.clone(),
        };
        tokio::spawn(async move {
            while let Some(Outbound { message, related, answers }) = out.recv().await {
                let Some(session) = weak.upgrade() else { continue };
                let mut streams = session.streams.lock().expect("streams lock");
                let stream_id = related.as_ref().and_then(|k| streams.of_request.get(k).copied()).unwrap_or(0);
                let key = related.as_deref().filter(|_| answers);
                streams.push(stream_id, Arc::new(message.to_string()), key, &buffer);
            }
            // The session is over (the upstream went away or the client closed it).
            if let Some(session) = weak.upgrade() {
                let mut streams = session.streams.lock().expect("streams lock");
                streams.ended = true;
                for s in streams.by_id.values_mut() {
                    s.live = None;
                }
                // The session leaves the map below, so nothing can be resumed any more.
                streams.release(&buffer);
            }
            gateway.inner.sessions.lock().expect("sessions lock").remove(&id);
        });
        Ok(session)
    }
}

fn accepts(headers: &HeaderMap, kind: &str) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.split(',').any(|t| t.trim().starts_with(kind) || t.trim().starts_with("*/*")))
}

fn sse(rx: mpsc::Receiver<(String, Arc<String>)>, session_id: &str) -> Response {
    let events = tokio_stream::wrappers::ReceiverStream::new(rx)
        .map(|(id, data)| Ok::<_, Infallible>(Event::default().id(id).data(data.as_str())));
    let mut response = Sse::new(events).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))).into_response();
    if let Ok(v) = HeaderValue::from_str(session_id) {
        response.headers_mut().insert("mcp-session-id", v);
    }
    response
}

use tokio_stream::StreamExt as _;

/// `POST /mcp/{server}`: one JSON-RPC message (or a batch where allowed).
async fn post_message(
    State(gw): State<Gateway>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Some(server) = gw.inner.servers.get(&name).cloned() else {
        return http_error(
            StatusCode::NOT_FOUND,
            jsonrpc::INVALID_REQUEST,
            &format!("no MCP server `{name}` is configured"),
        );
    };
    let token = match gw.token(&headers).await {
        Ok(t) => t,
        Err(r) => return r,
    };
    let (sse_ok, json_ok) = (accepts(&headers, "text/event-stream"), accepts(&headers, "application/json"));
    if !sse_ok && !json_ok {
        return http_error(
            StatusCode::NOT_ACCEPTABLE,
            jsonrpc::INVALID_REQUEST,
            "the client must accept application/json or text/event-stream",
        );
    }
    let max = gw.inner.limits.session.max_message_bytes;
    let frame = match jsonrpc::parse(&body, max) {
        Ok(f) => f,
        Err(e) if body.len() > max => return jsonrpc_response(StatusCode::PAYLOAD_TOO_LARGE, e),
        Err(e) => return jsonrpc_response(StatusCode::BAD_REQUEST, e),
    };
    let messages: Vec<&Value> = match &frame {
        Frame::One(v) => vec![v],
        Frame::Batch(items) => items.iter().collect(),
    };
    let kinds: Vec<Result<Kind, Value>> = messages.iter().map(|m| jsonrpc::classify(m)).collect();
    if let (Frame::One(_), Some(Err(e))) = (&frame, kinds.first()) {
        return jsonrpc_response(StatusCode::BAD_REQUEST, e.clone());
    }
    let initialize = matches!(kinds.as_slice(), [Ok(Kind::Request { method, .. })] if method == "initialize");
    let session = if initialize && !headers.contains_key("mcp-session-id") {
        match gw.open(&server, token).await {
            Ok(s) => s,
            Err(r) => return r,
        }
    } else {
        match gw.session(&headers, &name, &token) {
            Ok(s) => s,
            Err(r) => return r,
        }
    };
    let requests: Vec<String> = kinds
        .iter()
        .filter_map(|k| match k {
            Ok(Kind::Request { id, .. }) => Some(jsonrpc::id_key(id)),
            _ => None,
        })
        .collect();
    if requests.is_empty() {
        return match session.to_relay.send(ToRelay::Frame(frame)).await {
            Ok(()) => StatusCode::ACCEPTED.into_response(),
            Err(_) => http_error(StatusCode::NOT_FOUND, jsonrpc::INVALID_REQUEST, "session not found: it has ended"),
        };
    }
    let capacity = gw.inner.limits.max_buffered_events;
    let receiver = {
        let mut streams = session.streams.lock().expect("streams lock");
        if let Some(key) = requests.iter().find(|k| streams.of_request.contains_key(*k)) {
            let why = format!("invalid request: request id {} is still in progress in this session", &key[2..]);
            return http_error(StatusCode::BAD_REQUEST, jsonrpc::INVALID_REQUEST, &why);
        }
        let stream_id = streams.next;
        streams.next += 1;
        streams
            .by_id
            .insert(stream_id, Stream { open_requests: requests.iter().cloned().collect(), ..Default::default() });
        for key in &requests {
            streams.of_request.insert(key.clone(), stream_id);
        }
        streams.attach(stream_id, None, capacity).expect("just inserted")
    };
    if session.to_relay.send(ToRelay::Frame(frame)).await.is_err() {
        return http_error(StatusCode::NOT_FOUND, jsonrpc::INVALID_REQUEST, "session not found: it has ended");
    }
    if sse_ok {
        return sse(receiver, &session.id);
    }
    json_answer(receiver, requests.len(), &session.id).await
}

/// For a client that accepts only JSON: the answers, once all have come.
async fn json_answer(mut rx: mpsc::Receiver<(String, Arc<String>)>, requests: usize, session_id: &str) -> Response {
    let mut answers = Vec::new();
    while let Some((_, data)) = rx.recv().await {
        let Ok(v) = serde_json::from_str::<Value>(&data) else { continue };
        if v.get("method").is_none() {
            answers.push(v);
        }
    }
    let body = if requests == 1 && answers.len() == 1 { answers.remove(0) } else { Value::Array(answers) };
    let mut response = jsonrpc_response(StatusCode::OK, body);
    if let Ok(v) = HeaderValue::from_str(session_id) {
        response.headers_mut().insert("mcp-session-id", v);
    }
    response
}

/// `GET /mcp/{server}`: the stream of what the upstream sends unasked, or a broken stream
/// resumed after `Last-Event-ID`.
async fn get_stream(State(gw): State<Gateway>, Path(name): Path<String>, headers: HeaderMap) -> Response {
    let token = match gw.token(&headers).await {
        Ok(t) => t,
        Err(r) => return r,
    };
    if !accepts(&headers, "text/event-stream") {
        return http_error(
            StatusCode::METHOD_NOT_ALLOWED,
            jsonrpc::INVALID_REQUEST,
            "GET opens an SSE stream: accept text/event-stream",
        );
    }
    let session = match gw.session(&headers, &name, &token) {
        Ok(s) => s,
        Err(r) => return r,
    };
    let capacity = gw.inner.limits.max_buffered_events;
    let last = headers.get("last-event-id").and_then(|v| v.to_str().ok()).and_then(|v| {
        let (stream, seq) = v.split_once('-')?;
        Some((stream.parse::<u64>().ok()?, seq.parse::<u64>().ok()?))
    });
    let mut streams = session.streams.lock().expect("streams lock");
    let receiver = match last {
        Some((stream, seq)) => streams.attach(stream, Some(seq), capacity),
        None => {
            if streams.by_id.get(&0).is_some_and(|s| s.live.as_ref().is_some_and(|l| !l.is_closed())) {
                return http_error(
                    StatusCode::CONFLICT,
                    jsonrpc::INVALID_REQUEST,
                    "this session's GET stream is already open",
                );
            }
            streams.attach(0, None, capacity)
        }
    };
    drop(streams);
    match receiver {
        Some(rx) => sse(rx, &session.id),
        None => http_error(
            StatusCode::NOT_FOUND,
            jsonrpc::INVALID_REQUEST,
            "no such stream to resume (its events are gone)",
        ),
    }
}

/// `DELETE /mcp/{server}`: the client ends its session.
async fn delete_session(State(gw): State<Gateway>, Path(name): Path<String>, headers: HeaderMap) -> Response {
    let token = match gw.token(&headers).await {
        Ok(t) => t,
        Err(r) => return r,
    };
    let session = match gw.session(&headers, &name, &token) {
        Ok(s) => s,
        Err(r) => return r,
    };
    gw.inner.sessions.lock().expect("sessions lock").remove(&session.id);
    let _ = session.to_relay.send(ToRelay::Close).await;
    StatusCode::NO_CONTENT.into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(events: usize, bytes: usize, total_bytes: usize, total: &Arc<AtomicUsize>) -> BufferLimits {
        BufferLimits { events, bytes, total_bytes, total: total.clone() }
    }

    #[test]
    fn a_sessions_buffer_is_bounded_in_events_bytes_and_over_all_sessions() {
        let total = Arc::new(AtomicUsize::new(0));
        let mut s = Streams::default();
        let l = limits(3, 1000, 10_000, &total);
        for i in 0..5 {
            s.push(0, Arc::new(format!("event {i}")), None, &l);
        }
        assert_eq!(s.buffered, 3, "at most 3 events");
        assert_eq!(s.by_id[&0].events.front().unwrap().1.as_str(), "event 2", "the oldest went first");
        let l = limits(100, 20, 10_000, &total);
        s.push(0, Arc::new("x".repeat(15)), None, &l);
        assert!(s.buffered_bytes <= 20, "{}", s.buffered_bytes);
        let mut other = Streams::default();
        let tight = limits(100, 1000, total.load(Ordering::Relaxed) + 10, &total);
        other.push(0, Arc::new("y".repeat(50)), None, &tight);
        assert!(total.load(Ordering::Relaxed) <= tight.total_bytes, "the total holds across sessions");
        s.release(&l);
        other.release(&l);
        assert_eq!(total.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_stream_resumes_after_the_last_event_its_client_saw_and_closes_when_answered() {
        let total = Arc::new(AtomicUsize::new(0));
        let l = limits(100, 1 << 20, 1 << 20, &total);
        let mut s = Streams::default();
        s.by_id.insert(1, Stream { open_requests: ["n:1".to_string()].into(), ..Default::default() });
        s.of_request.insert("n:1".into(), 1);
        let mut first = s.attach(1, None, 10).unwrap();
        s.push(1, Arc::new("progress".into()), None, &l);
        drop(first.try_recv());
        drop(first);
        s.push(1, Arc::new("answer".into()), Some("n:1"), &l);
        let mut resumed = s.attach(1, Some(0), 10).unwrap();
        assert_eq!(resumed.try_recv().unwrap(), ("1-1".to_string(), Arc::new("answer".to_string())));
        assert!(resumed.try_recv().is_err(), "answered: the stream closes");
        assert!(s.of_request.is_empty());
    }
}
