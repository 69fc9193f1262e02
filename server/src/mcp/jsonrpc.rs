//! JSON-RPC 2.0 as MCP frames it, over `serde_json::Value` so that a relayed message keeps
//! every field, known or not: what kind a message is, the specification's errors, size
//! limits. Pure.

use serde_json::{json, Value};

/// Invalid JSON was received.
pub const PARSE_ERROR: i64 = -32700;
/// The JSON sent is not a valid request object.
pub const INVALID_REQUEST: i64 = -32600;
/// The method does not exist or is not available.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// Invalid method parameters.
pub const INVALID_PARAMS: i64 = -32602;
/// Internal JSON-RPC error.
pub const INTERNAL_ERROR: i64 = -32603;
/// A server error (the implementation-defined range -32000 to -32099): the upstream MCP
/// server closed, failed or did not answer; or a limit of the gateway was reached.
pub const SERVER_ERROR: i64 = -32000;

/// What one message is.
#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    Request {
        id: Value,
        method: String,
    },
    Notification {
        method: String,
    },
    /// A result or an error, answering `id`.
    Response {
        id: Value,
    },
}

/// One message off the wire, or a batch (an array, allowed only in protocol 2025-03-26).
#[derive(Debug, Clone, PartialEq)]
pub enum Frame {
    One(Value),
    Batch(Vec<Value>),
}

/// Parses one frame of at most `max_bytes`; the error is the response to send back
/// (its id is null: an unreadable message has none).
pub fn parse(bytes: &[u8], max_bytes: usize) -> Result<Frame, Value> {
    if bytes.len() > max_bytes {
        return Err(error(
            Value::Null,
            INVALID_REQUEST,
            &format!("message of {} bytes is larger than the gateway's limit of {max_bytes} bytes", bytes.len()),
        ));
    }
    let value: Value =
        serde_json::from_slice(bytes).map_err(|e| error(Value::Null, PARSE_ERROR, &format!("parse error: {e}")))?;
    match value {
        Value::Array(items) if items.is_empty() => {
            Err(error(Value::Null, INVALID_REQUEST, "invalid request: an empty batch"))
        }
        Value::Array(items) => Ok(Frame::Batch(items)),
        other => Ok(Frame::One(other)),
    }
}

/// What `message` is, or the error response to send back (with its id when readable).
pub fn classify(message: &Value) -> Result<Kind, Value> {
    let Some(object) = message.as_object() else {
        return Err(error(Value::Null, INVALID_REQUEST, "invalid request: a message must be a JSON object"));
    };
    let id = object.get("id").cloned();
    let readable_id = id.clone().filter(valid_id).unwrap_or(Value::Null);
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(error(readable_id, INVALID_REQUEST, "invalid request: `jsonrpc` must be \"2.0\""));
    }
    if let Some(method) = object.get("method") {
        let Some(method) = method.as_str() else {
            return Err(error(readable_id, INVALID_REQUEST, "invalid request: `method` must be a string"));
        };
        if let Some(params) = object.get("params") {
            if !params.is_object() {
                return Err(error(readable_id, INVALID_REQUEST, "invalid request: `params` must be an object"));
            }
        }
        return match id {
            None => Ok(Kind::Notification { method: method.to_string() }),
            Some(id) if valid_id(&id) => Ok(Kind::Request { id, method: method.to_string() }),
            Some(_) => Err(error(Value::Null, INVALID_REQUEST, "invalid request: `id` must be a string or an integer")),
        };
    }
    let answers = object.contains_key("result") as u8 + object.contains_key("error") as u8;
    match id {
        Some(id) if answers == 1 && (valid_id(&id) || id.is_null() && object.contains_key("error")) => {
            Ok(Kind::Response { id })
        }
        _ => Err(error(
            readable_id,
            INVALID_REQUEST,
            "invalid request: neither a request (`method`) nor a response (`id` with `result` or `error`)",
        )),
    }
}

/// MCP ids are strings or integers, never null.
fn valid_id(id: &Value) -> bool {
    id.is_string() || id.is_i64() || id.is_u64()
}

/// An id as a map key: a string id and a number id with the same text stay apart.
pub fn id_key(id: &Value) -> String {
    match id {
        Value::String(s) => format!("s:{s}"),
        other => format!("n:{other}"),
    }
}

/// An error response.
pub fn error(id: Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

/// A result response.
pub fn result(id: Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// A notification.
pub fn notification(method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "method": method, "params": params})
}

/// A tool result the model reads as a failure: `isError` with one text block.
pub fn tool_error(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": true})
}

/// The protocol revisions the gateway relays: the ones negotiated with `initialize`.
/// 2026-07-28 and later are stateless (no `initialize`, no session), which the gateway's
/// runs and session-scoped ledger keys do not fit yet: its `server/discover` probe is
/// answered "method not found", so clients fall back to `initialize`.
pub const PROTOCOL_VERSIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

/// Only 2025-03-26 allowed JSON-RPC batches (2025-06-18 removed them).
pub fn allows_batches(protocol_version: Option<&str>) -> bool {
    protocol_version == Some("2025-03-26")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_told_apart_and_bad_ones_get_the_specifications_error() {
        let kind = |v: Value| classify(&v);
        assert_eq!(
            kind(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})),
            Ok(Kind::Request { id: json!(1), method: "tools/list".into() })
        );
        assert_eq!(
            kind(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})),
            Ok(Kind::Notification { method: "notifications/initialized".into() })
        );
        assert_eq!(kind(json!({"jsonrpc": "2.0", "id": "a", "result": {}})), Ok(Kind::Response { id: json!("a") }));
        let code = |r: Result<Kind, Value>| r.unwrap_err()["error"]["code"].as_i64().unwrap();
        assert_eq!(code(kind(json!({"id": 1, "method": "x"}))), INVALID_REQUEST, "no jsonrpc");
        assert_eq!(code(kind(json!({"jsonrpc": "2.0", "id": null, "method": "x"}))), INVALID_REQUEST, "null id");
        assert_eq!(code(kind(json!({"jsonrpc": "2.0", "id": 1.5, "method": "x"}))), INVALID_REQUEST);
        assert_eq!(code(kind(json!({"jsonrpc": "2.0", "id": 1, "method": 7}))), INVALID_REQUEST);
        assert_eq!(code(kind(json!({"jsonrpc": "2.0", "id": 1, "method": "x", "params": [1]}))), INVALID_REQUEST);
        assert_eq!(code(kind(json!({"jsonrpc": "2.0", "id": 1, "result": {}, "error": {}}))), INVALID_REQUEST);
        assert_eq!(code(kind(json!("hello"))), INVALID_REQUEST);
        let bad = kind(json!({"jsonrpc": "1.0", "id": 9, "method": "x"})).unwrap_err();
        assert_eq!(bad["id"], json!(9), "the id is returned when it can be read");
    }

    #[test]
    fn unreadable_or_oversized_frames_are_refused_before_anything_else() {
        assert_eq!(parse(b"{not json", 100).unwrap_err()["error"]["code"], json!(PARSE_ERROR));
        assert_eq!(parse(&[b' '; 101], 100).unwrap_err()["error"]["code"], json!(INVALID_REQUEST));
        assert_eq!(parse(b"[]", 100).unwrap_err()["error"]["code"], json!(INVALID_REQUEST));
        assert!(matches!(parse(b"[{}, {}]", 100), Ok(Frame::Batch(v)) if v.len() == 2));
        let kept = parse(br#"{"jsonrpc":"2.0","id":1,"method":"x","params":{"new":{"deep":[1]}}}"#, 100).unwrap();
        assert_eq!(kept, Frame::One(json!({"jsonrpc":"2.0","id":1,"method":"x","params":{"new":{"deep":[1]}}})));
        assert!(allows_batches(Some("2025-03-26")) && !allows_batches(Some("2025-06-18")) && !allows_batches(None));
    }

    #[test]
    fn ids_of_different_types_are_different_keys() {
        assert_ne!(id_key(&json!(1)), id_key(&json!("1")));
        assert_eq!(id_key(&json!(1)), id_key(&json!(1)));
    }
}
