//! What a session's loop and its gate tasks send each other: the call to forward and
//! the upstream's reply, a message for the client, and a finished call with its record.

use super::spans::CallRecord;
use serde_json::Value;
use tokio::sync::oneshot;

/// What became of a call: the response for the client (none when the client cancelled
/// it) and its record for the spans.
pub struct Finished {
    pub response: Option<Value>,
    pub record: CallRecord,
}

/// A message for the client. `related` names the client request it belongs to (its
/// progress, its answer); `answers` is set on that request's response, the last.
#[derive(Debug, Clone, PartialEq)]
pub struct Outbound {
    pub message: Value,
    pub related: Option<String>,
    pub answers: bool,
}

/// What the upstream did with a forwarded call.
#[derive(Debug)]
pub enum UpstreamReply {
    Answered(Value),
    /// Never sent: the upstream was already gone.
    NotSent(String),
    /// Sent, and no answer will come.
    Lost(String),
}

/// From the gate tasks to the session loop.
pub enum RelayEvent {
    Forward { key: String, request: Value, reply: oneshot::Sender<UpstreamReply> },
    Done { key: String, finished: Finished },
}
