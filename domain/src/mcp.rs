//! The MCP gateway's rules (the gateway itself is `server::mcp`), pure: a tool's name as
//! Flightdeck records it, its class (the policy's, else its MCP annotations', else none:
//! unclassified is never harmless), which calls go through the ledger, what a client may
//! say in `_meta`, how an upstream's answer reads as an outcome, and what may name a
//! server.

use crate::canonical::SideEffect;
use crate::policy::{policy_for, ToolPolicy};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `_meta` key: the run a call belongs to (default: the MCP session).
pub const META_RUN_ID: &str = "io.flightdeck/run_id";
/// `_meta` key: the step of the run (default: none; the ledger key is then run-wide).
pub const META_STEP: &str = "io.flightdeck/step";
/// `_meta` key: the client's own idempotency key for the call.
pub const META_IDEMPOTENCY_KEY: &str = "io.flightdeck/idempotency_key";

/// A tool's MCP annotations (`tools/list`), as its server declares them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolHints {
    #[serde(rename = "readOnlyHint", skip_serializing_if = "Option::is_none")]
    pub read_only: Option<bool>,
    #[serde(rename = "destructiveHint", skip_serializing_if = "Option::is_none")]
    pub destructive: Option<bool>,
    #[serde(rename = "idempotentHint", skip_serializing_if = "Option::is_none")]
    pub idempotent: Option<bool>,
}

impl ToolHints {
    /// The annotations of one tool of a `tools/list` result (absent or malformed: none).
    pub fn of_tool(tool: &Value) -> ToolHints {
        let a = &tool["annotations"];
        ToolHints {
            read_only: a["readOnlyHint"].as_bool(),
            destructive: a["destructiveHint"].as_bool(),
            idempotent: a["idempotentHint"].as_bool(),
        }
    }
}

/// Where a call goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Route {
    /// Read-only: forwarded at once, recorded as a span.
    Direct,
    /// A side effect, or unclassified: asked of the ledger first (policy, approval,
    /// duplicates), reported after.
    Ledger,
}

/// Where a tool's class came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClassFrom {
    Policy,
    Annotations,
    /// Nobody classified it.
    Nothing,
}

/// What the gateway does with one tool's calls.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Decision {
    /// `{server}/{tool}`, as the ledger, approvals and spans record it.
    pub tool: String,
    #[schema(value_type = String)]
    pub class: SideEffect,
    #[schema(value_type = String)]
    pub class_from: ClassFrom,
    #[schema(value_type = String)]
    pub route: Route,
    /// Forward even when Flightdeck cannot be reached (a read tool's policy said so).
    pub fail_open: bool,
    /// How long a forwarded call waits for the upstream before its outcome is unknown.
    pub timeout_seconds: i64,
}

/// The default wait for an upstream's answer (the ledger's default call timeout).
pub const DEFAULT_TIMEOUT_SECONDS: i64 = crate::ledger::answer::DEFAULT_TIMEOUT_SECONDS;

/// `{server}/{tool}`.
pub fn qualified(server: &str, tool: &str) -> String {
    format!("{server}/{tool}")
}

/// The class the annotations give, the way Admin → Tools suggests it: `readOnlyHint`
/// → read; `destructiveHint` → irreversible; both false → write; anything else (no
/// annotations, or `readOnlyHint: false` alone, which the specification reads as
/// possibly destructive) → unclassified.
pub fn class_of_hints(hints: &ToolHints) -> Option<SideEffect> {
    match (hints.read_only, hints.destructive) {
        (Some(true), _) => Some(SideEffect::Read),
        (_, Some(true)) => Some(SideEffect::Irreversible),
        (Some(false), Some(false)) => Some(SideEffect::Write),
        _ => None,
    }
}

/// What the gateway does with calls of `tool` on `server` under `policy` (the one
/// [`policy_for`] found for the qualified name).
pub fn decide(server: &str, tool: &str, policy: Option<&ToolPolicy>, hints: &ToolHints) -> Decision {
    let (class, class_from) = match (policy, class_of_hints(hints)) {
        (Some(p), _) => (p.side_effect, ClassFrom::Policy),
        (None, Some(class)) => (class, ClassFrom::Annotations),
        (None, None) => (SideEffect::Unknown, ClassFrom::Nothing),
    };
    let route = match class {
        SideEffect::Read | SideEffect::None => Route::Direct,
        SideEffect::Write | SideEffect::Irreversible | SideEffect::Unknown => Route::Ledger,
    };
    Decision {
        tool: qualified(server, tool),
        class,
        class_from,
        route,
        fail_open: route == Route::Direct && policy.is_some_and(|p| p.fail_open),
        timeout_seconds: policy.and_then(|p| p.call_timeout_seconds).unwrap_or(DEFAULT_TIMEOUT_SECONDS),
    }
}

/// The decisions for `tools` of `server` (name, annotations) under `policies`.
pub fn decide_all(policies: &[ToolPolicy], server: &str, tools: &[(String, ToolHints)]) -> Vec<Decision> {
    tools
        .iter()
        .map(|(tool, hints)| decide(server, tool, policy_for(&qualified(server, tool), policies), hints))
        .collect()
}

/// Whether `name` may name a server: letters, digits, `-`, `_`, `.`, at most 64; no `/`,
/// which separates it from the tool in `{server}/{tool}`.
pub fn valid_server_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= 64 && name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
}

/// What a client said about a call in `params._meta`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallMeta {
    pub run_id: Option<String>,
    pub step: Option<i64>,
    pub idempotency_key: Option<String>,
}

/// Reads the `io.flightdeck/*` keys of a call's `_meta`; a key of the wrong type is an
/// error naming it (invalid params), never ignored.
pub fn call_meta(params: &Value) -> Result<CallMeta, String> {
    let meta = &params["_meta"];
    let text = |key: &str| match &meta[key] {
        Value::Null => Ok(None),
        Value::String(s) if !s.trim().is_empty() && s.len() <= 200 => Ok(Some(s.clone())),
        _ => Err(format!("`_meta.{key}` must be a string of 1 to 200 characters")),
    };
    let step = match &meta[META_STEP] {
        Value::Null => None,
        v => Some(
            v.as_i64().filter(|n| *n >= 0).ok_or(format!("`_meta.{META_STEP}` must be a whole number, 0 or more"))?,
        ),
    };
    Ok(CallMeta { run_id: text(META_RUN_ID)?, step, idempotency_key: text(META_IDEMPOTENCY_KEY)? })
}

/// How a forwarded call ended, read from the upstream's response.
#[derive(Debug, Clone, PartialEq)]
pub enum Reported {
    /// A tool result without `isError`: it ran.
    Ok,
    /// A tool result with `isError`, or a JSON-RPC error: it ran and failed, or was
    /// refused (unknown tool, invalid arguments). Holds the text for the ledger.
    Failed(String),
}

/// Reads a JSON-RPC response to `tools/call`.
pub fn reported(response: &Value) -> Reported {
    if let Some(error) = response.get("error") {
        let message = error["message"].as_str().unwrap_or("the upstream answered an error");
        return Reported::Failed(format!("JSON-RPC error {}: {message}", error["code"]));
    }
    let result = &response["result"];
    if result["isError"].as_bool() == Some(true) {
        let text: Vec<&str> =
            result["content"].as_array().into_iter().flatten().filter_map(|c| c["text"].as_str()).collect();
        let text = if text.is_empty() { "the tool reported an error".to_string() } else { text.join("\n") };
        return Reported::Failed(text);
    }
    Reported::Ok
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_policy_beats_annotations_and_nothing_means_the_ledger() {
        let read = ToolHints { read_only: Some(true), ..Default::default() };
        let d = decide("files", "read_file", None, &read);
        assert_eq!(
            (d.tool.as_str(), d.class, d.route, d.class_from),
            ("files/read_file", SideEffect::Read, Route::Direct, ClassFrom::Annotations)
        );
        let policy = ToolPolicy::class("files/read_file", SideEffect::Write);
        let d = decide("files", "read_file", Some(&policy), &read);
        assert_eq!((d.class, d.route, d.class_from), (SideEffect::Write, Route::Ledger, ClassFrom::Policy));
        let d = decide("files", "frobnicate", None, &ToolHints::default());
        assert_eq!((d.class, d.route), (SideEffect::Unknown, Route::Ledger), "unclassified is never harmless");
        let maybe = ToolHints { read_only: Some(false), ..Default::default() };
        assert_eq!(decide("s", "t", None, &maybe).route, Route::Ledger, "readOnlyHint false alone: may destroy");
        let gentle = ToolHints { read_only: Some(false), destructive: Some(false), idempotent: Some(true) };
        assert_eq!(decide("s", "t", None, &gentle).class, SideEffect::Write);
        let boom = ToolHints { destructive: Some(true), ..Default::default() };
        assert_eq!(decide("s", "t", None, &boom).class, SideEffect::Irreversible);
    }

    #[test]
    fn only_a_read_tools_policy_fails_open() {
        let open = ToolPolicy { fail_open: true, ..ToolPolicy::class("files/*", SideEffect::Read) };
        assert!(decide("files", "read_file", Some(&open), &ToolHints::default()).fail_open);
        assert!(
            !decide("files", "read_file", None, &ToolHints { read_only: Some(true), ..Default::default() }).fail_open
        );
        let timeout = ToolPolicy { call_timeout_seconds: Some(5), ..ToolPolicy::class("x", SideEffect::Write) };
        assert_eq!(decide("s", "x", Some(&timeout), &ToolHints::default()).timeout_seconds, 5);
    }

    #[test]
    fn meta_keys_are_read_and_checked() {
        let p = json!({"name": "t", "_meta": {"io.flightdeck/run_id": "run-1", "io.flightdeck/step": 3, "progressToken": 1}});
        assert_eq!(
            call_meta(&p).unwrap(),
            CallMeta { run_id: Some("run-1".into()), step: Some(3), idempotency_key: None }
        );
        assert_eq!(call_meta(&json!({"name": "t"})).unwrap(), CallMeta::default());
        assert!(call_meta(&json!({"_meta": {"io.flightdeck/step": -1}})).unwrap_err().contains("io.flightdeck/step"));
        assert!(call_meta(&json!({"_meta": {"io.flightdeck/run_id": 5}})).unwrap_err().contains("run_id"));
    }

    #[test]
    fn answers_read_as_outcomes() {
        assert_eq!(reported(&json!({"result": {"content": []}})), Reported::Ok);
        assert_eq!(
            reported(&json!({"result": {"content": [{"type": "text", "text": "disk full"}], "isError": true}})),
            Reported::Failed("disk full".into())
        );
        assert!(
            matches!(reported(&json!({"error": {"code": -32602, "message": "unknown tool"}})), Reported::Failed(m) if m.contains("unknown tool"))
        );
    }

    #[test]
    fn hints_are_read_from_a_listed_tool() {
        let tool = json!({"name": "x", "annotations": {"readOnlyHint": true, "idempotentHint": false}});
        assert_eq!(
            ToolHints::of_tool(&tool),
            ToolHints { read_only: Some(true), destructive: None, idempotent: Some(false) }
        );
        assert_eq!(ToolHints::of_tool(&json!({"name": "y"})), ToolHints::default());
    }
}
