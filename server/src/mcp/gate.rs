//! One `tools/call` through the gate: the tool's decision (policy, else annotations);
//! a read-only call forwarded at once; any other asked of the ledger first (held, with
//! progress notifications, while a person decides), forwarded with exactly the approved
//! arguments, and reported after (`ok`, `error`, or `unknown` when the upstream died or
//! did not answer after the call was sent). Denials, expiries, duplicates and an
//! unreachable Flightdeck become tool results the model can read; nothing of those
//! reaches the upstream.

use super::jsonrpc::{self, notification, tool_error};
use super::link::{Answered, Ask, LinkError, Report, SharedLink};
use super::messages::{Finished, Outbound, RelayEvent, UpstreamReply};
use super::spans::CallRecord;
use domain::canonical::{Outcome, SideEffect};
use domain::ledger::request::{Outcome as Reported_, MAX_RESPONSE_BYTES};
use domain::ledger::Answer;
use domain::mcp::{self as rules, CallMeta, Reported, Route, ToolHints};
use serde_json::{json, Value};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot, watch};

/// How often a held call tells the client it is still waiting (when it sent a progress
/// token), and how long one ask is held before it is asked again.
pub const PROGRESS_EVERY: Duration = Duration::from_secs(5);
const ASK_WAIT: Duration = Duration::from_secs(30);
/// The longest a call is held for a person or another attempt; then the client is told to
/// try again later (the approval stays in the inbox, and the retry finds it).
pub const MAX_HOLD: Duration = Duration::from_secs(3600);

/// One call as the relay hands it over.
#[derive(Debug, Clone)]
pub struct CallInput {
    /// The client's request id as a map key.
    pub key: String,
    pub request: Value,
    pub server: String,
    /// The tool's name on its server.
    pub tool: String,
    pub hints: ToolHints,
    pub meta: CallMeta,
    pub progress_token: Option<Value>,
    /// The session's run, unless the client named one.
    pub session_run: String,
    pub session_id: String,
    pub agent: Option<String>,
}

/// What the gate talks to.
#[derive(Clone)]
pub struct GateIo {
    pub link: SharedLink,
    pub relay: mpsc::Sender<RelayEvent>,
    pub out: mpsc::Sender<Outbound>,
}

fn now_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
}

/// A running record of the call, finished into the span.
struct Recorder {
    record: CallRecord,
    began: Instant,
}

impl Recorder {
    fn finish(mut self, outcome: Outcome, error: Option<String>) -> CallRecord {
        self.record.outcome = outcome;
        self.record.error = error;
        self.record.ended_ns = self.record.started_ns + self.began.elapsed().as_nanos() as u64;
        self.record
    }
}

pub async fn call(input: CallInput, io: GateIo, mut cancel: watch::Receiver<bool>) -> Finished {
    let id = input.request["id"].clone();
    let arguments = input.request["params"]["arguments"].clone();
    let arguments = if arguments.is_null() { json!({}) } else { arguments };
    let run_id = input.meta.run_id.clone().unwrap_or_else(|| input.session_run.clone());
    let mut rec = Recorder {
        record: CallRecord {
            run_id: run_id.clone(),
            server: input.server.clone(),
            tool: rules::qualified(&input.server, &input.tool),
            session_id: input.session_id.clone(),
            request_id: match &id {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            },
            arguments: arguments.clone(),
            class: SideEffect::Unknown,
            hints: input.hints,
            outcome: Outcome::Ok,
            step: input.meta.step,
            idempotency_key: input.meta.idempotency_key.clone(),
            call_id: None,
            approval_id: None,
            started_ns: now_ns(),
            ended_ns: 0,
            upstream_ms: None,
            held_ms: 0.0,
            result_bytes: None,
            error: None,
        },
        began: Instant::now(),
    };
    let tool_result = |text: &str| Some(jsonrpc::result(id.clone(), tool_error(text)));
    let decision = match io.link.decide(&input.server, &[(input.tool.clone(), input.hints)]).await {
        Ok(mut d) if !d.is_empty() => d.remove(0),
        Ok(_) => rules::decide(&input.server, &input.tool, None, &input.hints),
        Err(e) => {
            let why = format!("{e}; this call was not made (the gateway fails closed)");
            return Finished { response: tool_result(&why), record: rec.finish(Outcome::Denied, Some(why)) };
        }
    };
    rec.record.class = decision.class;
    let timeout = Duration::from_secs(decision.timeout_seconds.max(1) as u64);
    if decision.route == Route::Direct {
        return direct(&input, &io, rec, timeout, id).await;
    }
    let ask = Ask {
        run_id,
        step: input.meta.step.unwrap_or(0),
        tool: decision.tool.clone(),
        arguments: arguments.clone(),
        idempotency_key: input.meta.idempotency_key.clone(),
        agent: input.agent.clone(),
    };
    let held = Instant::now();
    let answered = match hold(&input, &io, &ask, &mut cancel).await {
        Held::Answered(a) => a,
        Held::Cancelled => {
            return Finished {
                response: None,
                record: rec.finish(Outcome::Denied, Some("cancelled by the client".into())),
            }
        }
        Held::TooLong(a) => {
            let text = format!(
                "still waiting after {} s: {}; nothing was run. Call again later: the same call finds the same request",
                MAX_HOLD.as_secs(),
                waiting_for(&a)
            );
            note(&mut rec, &a);
            return Finished { response: tool_result(&text), record: rec.finish(Outcome::Denied, Some(text)) };
        }
        Held::Failed(e) => {
            let why = match e {
                LinkError::Unreachable(_) => format!("{e}; this call was not made (the gateway fails closed)"),
                LinkError::Refused(_) => format!("{e}; this call was not made"),
            };
            return Finished { response: tool_result(&why), record: rec.finish(Outcome::Denied, Some(why)) };
        }
    };
    rec.record.held_ms = held.elapsed().as_secs_f64() * 1000.0;
    note(&mut rec, &answered);
    match answered.answer {
        Answer::Proceed => proceed(&input, &io, rec, answered, timeout, id).await,
        Answer::AlreadyDone => {
            let result = stored_result(&answered);
            rec.record.result_bytes = Some(result.to_string().len());
            Finished { response: Some(jsonrpc::result(id, result)), record: rec.finish(Outcome::Deduped, None) }
        }
        Answer::Denied => {
            let why = answered.message.clone().unwrap_or_else(|| "no reason given".into());
            let text = format!("Flightdeck denied this call ({}): {why}. It was not run.", denial_kind(&answered));
            Finished { response: tool_result(&text), record: rec.finish(Outcome::Denied, Some(text)) }
        }
        // A person must settle an earlier attempt first; holding the model for that
        // could take hours.
        _ => {
            let text = format!(
                "an earlier attempt of this call (Flightdeck call {}) may or may not have happened; a person must settle it{} before it can run again. It was not run now.",
                answered.call.id,
                answered.call.escalation_id.as_deref().map(|e| format!(" (escalation {e})")).unwrap_or_default()
            );
            Finished { response: tool_result(&text), record: rec.finish(Outcome::Denied, Some(text)) }
        }
    }
}

fn note(rec: &mut Recorder, answered: &Answered) {
    rec.record.call_id = Some(answered.call.id.clone());
    rec.record.idempotency_key = Some(answered.call.idempotency_key.clone());
    rec.record.approval_id = answered.call.approval_id.clone();
}

fn denial_kind(answered: &Answered) -> &'static str {
    if answered.message.as_deref().is_some_and(|m| m.contains("expired")) {
        "the approval expired"
    } else {
        "denied"
    }
}

fn waiting_for(a: &Answered) -> String {
    match (a.answer, &a.call.approval_id) {
        (Answer::ApprovalRequired, Some(approval)) => {
            format!("waiting for a person to approve it (approval {approval})")
        }
        (Answer::ApprovalRequired, None) => "waiting for a person to approve it".into(),
        _ => "another attempt of the same call is in progress".into(),
    }
}

enum Held {
    Answered(Answered),
    TooLong(Answered),
    Cancelled,
    Failed(LinkError),
}

/// Asks until the answer is final, telling the client it waits.
async fn hold(input: &CallInput, io: &GateIo, ask: &Ask, cancel: &mut watch::Receiver<bool>) -> Held {
    let deadline = Instant::now() + MAX_HOLD;
    let mut ticker = tokio::time::interval(PROGRESS_EVERY);
    ticker.tick().await;
    let mut sent = 0u64;
    let mut last: Option<Answered> = None;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let wait = if last.is_none() { Duration::ZERO } else { ASK_WAIT.min(left) };
        let asking = io.link.ask(ask, wait);
        tokio::pin!(asking);
        let answered = loop {
            tokio::select! {
                answered = &mut asking => break answered,
                _ = ticker.tick() => {
                    if let (Some(token), Some(a)) = (&input.progress_token, &last) {
                        sent += 1;
                        let message = notification("notifications/progress", json!({
                            "progressToken": token, "progress": sent, "message": format!("Flightdeck: {}", waiting_for(a)),
                        }));
                        let _ = io.out.send(Outbound { message, related: Some(input.key.clone()), answers: false }).await;
                    }
                }
                changed = cancel.changed() => if changed.is_err() || *cancel.borrow() { return Held::Cancelled },
            }
        };
        let answered = match answered {
            Ok(a) => a,
            Err(e) => return Held::Failed(e),
        };
        if !matches!(answered.answer, Answer::ApprovalRequired | Answer::InProgress | Answer::AskAgain) {
            return Held::Answered(answered);
        }
        if Instant::now() >= deadline {
            return Held::TooLong(answered);
        }
        last = Some(answered);
    }
}

/// Sends `request` to the upstream through the relay and waits for its answer.
async fn forward(input: &CallInput, io: &GateIo, request: Value, timeout: Duration) -> UpstreamReply {
    let (reply, answer) = oneshot::channel();
    if io.relay.send(RelayEvent::Forward { key: input.key.clone(), request, reply }).await.is_err() {
        return UpstreamReply::NotSent("the session ended".into());
    }
    match tokio::time::timeout(timeout, answer).await {
        Ok(Ok(reply)) => reply,
        Ok(Err(_)) => UpstreamReply::Lost("the session ended before the upstream answered".into()),
        Err(_) => UpstreamReply::Lost(format!("the upstream MCP server did not answer within {} s", timeout.as_secs())),
    }
}

async fn direct(input: &CallInput, io: &GateIo, mut rec: Recorder, timeout: Duration, id: Value) -> Finished {
    let sent = Instant::now();
    let reply = forward(input, io, input.request.clone(), timeout).await;
    rec.record.upstream_ms = Some(sent.elapsed().as_secs_f64() * 1000.0);
    match reply {
        UpstreamReply::Answered(response) => {
            rec.record.result_bytes = Some(response["result"].to_string().len());
            let (outcome, error) = match rules::reported(&response) {
                Reported::Ok => (Outcome::Ok, None),
                Reported::Failed(why) => (Outcome::Error, Some(why)),
            };
            Finished { response: Some(response), record: rec.finish(outcome, error) }
        }
        UpstreamReply::NotSent(why) | UpstreamReply::Lost(why) => {
            let response = jsonrpc::error(id, jsonrpc::SERVER_ERROR, &format!("upstream MCP server: {why}"));
            Finished { response: Some(response), record: rec.finish(Outcome::Error, Some(why)) }
        }
    }
}

async fn proceed(
    input: &CallInput,
    io: &GateIo,
    mut rec: Recorder,
    answered: Answered,
    timeout: Duration,
    id: Value,
) -> Finished {
    let mut request = input.request.clone();
    if let Some(approved) = &answered.approved_arguments {
        // Exactly what the person approved; everything else of the request as sent.
        request["params"]["arguments"] = approved.clone();
        rec.record.arguments = approved.clone();
    }
    let call_id = answered.call.id.clone();
    let sent = Instant::now();
    let reply = forward(input, io, request, timeout).await;
    rec.record.upstream_ms = Some(sent.elapsed().as_secs_f64() * 1000.0);
    let (report, response, outcome) = match reply {
        UpstreamReply::Answered(response) => {
            let result = response["result"].clone();
            rec.record.result_bytes = Some(result.to_string().len());
            match rules::reported(&response) {
                Reported::Ok => {
                    let cached = (domain::approvals::payload::canonical_json(&result).len() <= MAX_RESPONSE_BYTES)
                        .then_some(result);
                    (Report { outcome: Reported_::Ok, response: cached, error: None }, response, Outcome::Ok)
                }
                Reported::Failed(why) => {
                    (Report { outcome: Reported_::Error, response: None, error: Some(why) }, response, Outcome::Error)
                }
            }
        }
        // Never sent: it did not happen.
        UpstreamReply::NotSent(why) => {
            let text = format!("the upstream MCP server is gone ({why}); the call was not sent");
            let response = jsonrpc::result(id.clone(), tool_error(&text));
            (Report { outcome: Reported_::Error, response: None, error: Some(text) }, response, Outcome::Error)
        }
        // Sent, then lost: it may have happened.
        UpstreamReply::Lost(why) => {
            let text = format!(
                "the call was sent, then {why}: whether it happened is unknown. Flightdeck recorded its outcome as unknown (call {call_id}) and opened an escalation for a person to settle it; the same call is refused until then"
            );
            let response = jsonrpc::result(id.clone(), tool_error(&text));
            (Report { outcome: Reported_::Unknown, response: None, error: Some(why) }, response, Outcome::Unknown)
        }
    };
    let error = report.error.clone();
    report_with_retries(io, &call_id, &report).await;
    Finished { response: Some(response), record: rec.finish(outcome, error) }
}

/// Reports the outcome, trying a little longer when Flightdeck is briefly away; a report
/// that never arrives leaves the call started, which the ledger turns into an unknown
/// outcome after the tool's timeout.
async fn report_with_retries(io: &GateIo, call_id: &str, report: &Report) {
    for wait in [0u64, 500, 1000, 2000, 4000] {
        tokio::time::sleep(Duration::from_millis(wait)).await;
        match io.link.complete(call_id, report).await {
            Ok(()) => return,
            Err(LinkError::Refused(why)) => {
                tracing::warn!(call = call_id, %why, "flightdeck refused the report of a gateway call");
                return;
            }
            Err(LinkError::Unreachable(why)) => {
                tracing::warn!(call = call_id, %why, "could not report a gateway call; trying again")
            }
        }
    }
    tracing::error!(
        call = call_id,
        "gave up reporting a gateway call: it becomes of unknown outcome after its timeout"
    );
}

/// What a repeated call is answered: the stored tool result, marked.
fn stored_result(answered: &Answered) -> Value {
    let call = &answered.call;
    let mut result = match &call.response {
        Some(r) if r.get("content").is_some() => r.clone(),
        _ => json!({"content": [{"type": "text", "text": format!(
            "Already done: this exact call succeeded earlier in this run (Flightdeck call {}); it was not run again.",
            call.id
        )}]}),
    };
    if let Some(object) = result.as_object_mut() {
        let meta = object.entry("_meta").or_insert_with(|| json!({}));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert("io.flightdeck/deduped".into(), json!(true));
            meta.insert("io.flightdeck/call_id".into(), json!(call.id));
        }
    }
    result
}
