//! The idempotency key of a guarded call, derived the article's way when the agent sends
//! none: run, step, tool and the stable arguments (volatile fields dropped), as canonical
//! JSON with sorted keys, hashed with SHA-256. For an irreversible tool a policy may make
//! the key run-wide (the step left out), so the same call in another step of the run is
//! also found. The same JSON as Python's `json.dumps(..., sort_keys=True,
//! separators=(",", ":"), ensure_ascii=False)`, so a client can compute it too.

use crate::approvals::payload::{canonical_json, sha256_hex};
use serde_json::{json, Map, Value};

/// Fields left out of the key when the policy names none: what differs between retries of
/// the same call (the article's list).
pub const DEFAULT_VOLATILE_FIELDS: [&str; 5] = ["request_id", "timestamp", "now", "attempt", "trace_id"];

/// How a tool's calls are keyed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRule {
    /// Top-level argument names left out of the key.
    pub volatile_fields: Vec<String>,
    /// Leave the step out: one execution per run for this call.
    pub run_wide: bool,
}

impl Default for KeyRule {
    fn default() -> Self {
        KeyRule { volatile_fields: DEFAULT_VOLATILE_FIELDS.iter().map(|s| s.to_string()).collect(), run_wide: false }
    }
}

/// The arguments without the volatile fields (only top-level fields are dropped: a nested
/// field of the same name may well be part of what the call does).
pub fn stable_arguments(arguments: &Value, rule: &KeyRule) -> Value {
    match arguments {
        Value::Object(map) => {
            let kept: Map<String, Value> = map
                .iter()
                .filter(|(k, _)| !rule.volatile_fields.contains(k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            Value::Object(kept)
        }
        other => other.clone(),
    }
}

/// The derived key: hex SHA-256 of `{"args", "run", "step", "tool"}` in canonical JSON.
pub fn derive_key(run_id: &str, step_index: i64, tool: &str, arguments: &Value, rule: &KeyRule) -> String {
    let args = stable_arguments(arguments, rule);
    let material = if rule.run_wide {
        json!({"run": run_id, "tool": tool, "args": args})
    } else {
        json!({"run": run_id, "step": step_index, "tool": tool, "args": args})
    };
    sha256_hex(&canonical_json(&material))
}

/// The short key an agent plants in what it creates (a title suffix, a label), so that
/// read-before-write can find it: `fd-` and the first 12 hex digits of the key's hash.
pub fn natural_key(idempotency_key: &str) -> String {
    format!("fd-{}", &sha256_hex(idempotency_key)[..12])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The vectors the Python and TypeScript clients' tests read too: the server derives
    /// byte for byte the same canonical text and key.
    #[test]
    fn the_shared_test_vectors_derive_the_same_text_and_key() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../clients/testdata/idempotency-keys.json");
        let file: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let default: Vec<String> = serde_json::from_value(file["default_volatile_fields"].clone()).unwrap();
        assert_eq!(default, KeyRule::default().volatile_fields, "the clients' default volatile fields");
        let vectors = file["vectors"].as_array().unwrap();
        assert!(vectors.len() >= 20, "{}", vectors.len());
        for v in vectors {
            let name = v["name"].as_str().unwrap();
            let rule = KeyRule {
                volatile_fields: match v.get("volatile_fields") {
                    Some(list) => serde_json::from_value(list.clone()).unwrap(),
                    None => default.clone(),
                },
                run_wide: v["run_wide"].as_bool().unwrap_or(false),
            };
            let (run, step, tool) =
                (v["run_id"].as_str().unwrap(), v["step_index"].as_i64().unwrap(), v["tool"].as_str().unwrap());
            let args = stable_arguments(&v["arguments"], &rule);
            let material = if rule.run_wide {
                json!({"run": run, "tool": tool, "args": args})
            } else {
                json!({"run": run, "step": step, "tool": tool, "args": args})
            };
            assert_eq!(canonical_json(&material), v["canonical"].as_str().unwrap(), "{name}: canonical text");
            assert_eq!(derive_key(run, step, tool, &v["arguments"], &rule), v["key"].as_str().unwrap(), "{name}: key");
        }
    }

    #[test]
    fn volatile_fields_and_key_order_do_not_change_the_key() {
        let rule = KeyRule::default();
        let a = json!({"to": "ana@example.com", "subject": "Invoice", "request_id": "r-1", "attempt": 1});
        let b = json!({"attempt": 2, "subject": "Invoice", "to": "ana@example.com", "request_id": "r-2"});
        assert_eq!(derive_key("run-1", 3, "send_email", &a, &rule), derive_key("run-1", 3, "send_email", &b, &rule));
        let other = json!({"to": "bob@example.com", "subject": "Invoice"});
        assert_ne!(
            derive_key("run-1", 3, "send_email", &a, &rule),
            derive_key("run-1", 3, "send_email", &other, &rule)
        );
    }

    #[test]
    fn the_step_is_part_of_the_key_unless_the_policy_makes_it_run_wide() {
        let args = json!({"amount": 500});
        let step = KeyRule::default();
        assert_ne!(derive_key("r", 1, "refund", &args, &step), derive_key("r", 2, "refund", &args, &step));
        let run_wide = KeyRule { run_wide: true, ..KeyRule::default() };
        assert_eq!(derive_key("r", 1, "refund", &args, &run_wide), derive_key("r", 2, "refund", &args, &run_wide));
        assert_ne!(derive_key("r", 1, "refund", &args, &run_wide), derive_key("other", 1, "refund", &args, &run_wide));
    }

    #[test]
    fn the_key_is_the_articles_python_function() {
        // idempotency_key("run-1", 3, "send_email", {"to": "ana@example.com", "now": 1}) in
        // the article's Python: sha256 of this exact text.
        let text = r#"{"args":{"to":"ana@example.com"},"run":"run-1","step":3,"tool":"send_email"}"#;
        let args = json!({"to": "ana@example.com", "now": 1});
        assert_eq!(derive_key("run-1", 3, "send_email", &args, &KeyRule::default()), sha256_hex(text));
    }

    #[test]
    fn natural_keys_are_short_and_stable() {
        let k = natural_key("abc");
        assert_eq!(k.len(), 15);
        assert!(k.starts_with("fd-"));
        assert_eq!(k, natural_key("abc"));
        assert_ne!(k, natural_key("abd"));
    }
}
