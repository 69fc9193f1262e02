//! Edit, then approve: an approver's changed arguments, checked (JSON, the tool policy's
//! JSON Schema, no credentials) and described as a readable diff. The approved payload is
//! then the edited one, bound by its own hash, and the agent's long poll returns it.
//! Pure: storage records the result, the server function calls this first.

use crate::canonical::REDACTED;
use crate::redact::Redactor;
use serde_json::Value;

/// The longest edited arguments accepted, in bytes.
pub const MAX_EDIT_BYTES: usize = 256 * 1024;
/// The longest message back to the agent.
pub const MAX_RESPOND_CHARS: usize = 2000;

/// A checked edit.
#[derive(Debug, Clone, PartialEq)]
pub struct Edit {
    pub arguments: Value,
    /// One line per change, e.g. `~ /amount: 500 → 50`.
    pub changes: String,
}

/// Checks `edited` (the approver's text) against the request's stored arguments and the
/// policy's schema. `Ok(None)` when nothing changed (a plain approval).
pub fn check(stored: &str, edited: &str, schema: Option<&Value>, redactor: &Redactor) -> Result<Option<Edit>, String> {
    if edited.len() > MAX_EDIT_BYTES {
        return Err(format!("the edited arguments may have at most {MAX_EDIT_BYTES} bytes"));
    }
    let original: Value = serde_json::from_str(stored).unwrap_or(Value::Null);
    let arguments: Value = serde_json::from_str(edited)
        .map_err(|e| format!("the edited arguments are not JSON: {e} (line {}, column {})", e.line(), e.column()))?;
    if arguments == original {
        return Ok(None);
    }
    if stored.contains(REDACTED) {
        return Err(format!(
            "these arguments hold a credential Flightdeck does not store (shown as {REDACTED}), so an edited copy \
             could not carry it; deny with a message telling the agent what to change instead"
        ));
    }
    if let Some(schema) = schema {
        against_schema(schema, &arguments)?;
    }
    let mut redacted = arguments.clone();
    redactor.redact_strings(&mut redacted);
    if redacted != arguments {
        return Err("the edited arguments hold what looks like a credential; Flightdeck never stores one, so it \
                    cannot hand it to the agent"
            .into());
    }
    let changes = diff(&original, &arguments).join("\n");
    Ok(Some(Edit { arguments, changes }))
}

/// The changes from `before` to `after`, one line each, by JSON pointer: `+` added,
/// `-` removed, `~` changed. Arrays of different lengths are compared as a whole.
pub fn diff(before: &Value, after: &Value) -> Vec<String> {
    let mut out = Vec::new();
    walk("", before, after, &mut out);
    out
}

fn walk(path: &str, before: &Value, after: &Value, out: &mut Vec<String>) {
    let here = if path.is_empty() { "/" } else { path };
    match (before, after) {
        (Value::Object(a), Value::Object(b)) => {
            let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
            keys.sort();
            keys.dedup();
            for key in keys {
                let child = format!("{path}/{}", key.replace('~', "~0").replace('/', "~1"));
                match (a.get(key), b.get(key)) {
                    (Some(x), Some(y)) => walk(&child, x, y, out),
                    (Some(x), None) => out.push(format!("- {child}: {}", short(x))),
                    (None, Some(y)) => out.push(format!("+ {child}: {}", short(y))),
                    (None, None) => {}
                }
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                walk(&format!("{path}/{i}"), x, y, out);
            }
        }
        (x, y) if x != y => out.push(format!("~ {here}: {} → {}", short(x), short(y))),
        _ => {}
    }
}

/// A value on one line, at most 200 characters.
fn short(v: &Value) -> String {
    let text = v.to_string();
    match text.char_indices().nth(200) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

/// Whether `schema` is a JSON Schema Flightdeck can check arguments against. References
/// to other documents are refused: a schema is checked here, never fetched.
pub fn check_schema(schema: &Value) -> Result<(), String> {
    compile(schema).map(|_| ())
}

fn compile(schema: &Value) -> Result<(boon::Schemas, boon::SchemaIndex), String> {
    struct Refuse;
    impl boon::UrlLoader for Refuse {
        fn load(&self, url: &str) -> Result<Value, Box<dyn std::error::Error>> {
            Err(format!("{url}: schemas are not fetched; put every definition in the schema itself").into())
        }
    }
    let mut schemas = boon::Schemas::new();
    let mut compiler = boon::Compiler::new();
    let mut loader = boon::SchemeUrlLoader::new();
    loader.register("file", Box::new(Refuse));
    loader.register("http", Box::new(Refuse));
    loader.register("https", Box::new(Refuse));
    compiler.use_loader(Box::new(loader));
    let url = "urn:flightdeck:arguments-schema";
    compiler.add_resource(url, schema.clone()).map_err(|e| format!("the schema cannot be used: {e}"))?;
    let index = compiler.compile(url, &mut schemas).map_err(|e| format!("the schema cannot be used: {e:#}"))?;
    Ok((schemas, index))
}

/// Checks `arguments` against the policy's schema; the error lists every failure with
/// where it is.
pub fn against_schema(schema: &Value, arguments: &Value) -> Result<(), String> {
    let (schemas, index) = compile(schema)?;
    schemas.validate(arguments, index).map_err(|e| {
        let text = format!("{e}");
        let lines: Vec<&str> = text.lines().skip(1).map(|l| l.trim_start_matches(['-', ' '])).collect();
        format!("the edited arguments do not match the tool's schema: {}", lines.join("; "))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_diff_names_every_change_by_its_path() {
        let before = json!({"amount": 500, "to": "a@b.c", "tags": ["x"], "meta": {"note": "hi"}});
        let after = json!({"amount": 50, "tags": ["x"], "meta": {"note": "hi", "by": "ann"}, "cc": "d"});
        assert_eq!(
            diff(&before, &after),
            vec!["~ /amount: 500 → 50", "+ /cc: \"d\"", "+ /meta/by: \"ann\"", "- /to: \"a@b.c\""]
        );
        assert!(diff(&before, &before).is_empty());
        assert_eq!(diff(&json!([1, 2]), &json!([1, 3])), vec!["~ /1: 2 → 3"]);
        assert_eq!(diff(&json!(1), &json!(2)), vec!["~ /: 1 → 2"]);
    }

    #[test]
    fn edits_are_checked_before_anything_is_stored() {
        let r = Redactor::default();
        let stored = r#"{"amount":500,"to":"a@b.c"}"#;
        let edit = check(stored, r#"{"amount": 50, "to": "a@b.c"}"#, None, &r).unwrap().unwrap();
        assert_eq!(edit.arguments, json!({"amount": 50, "to": "a@b.c"}));
        assert_eq!(edit.changes, "~ /amount: 500 → 50");
        assert_eq!(check(stored, "{\"to\":\"a@b.c\",\n \"amount\":500}", None, &r).unwrap(), None, "unchanged");
        assert!(check(stored, "{\"amount\": ", None, &r).unwrap_err().contains("not JSON"));
        let redacted = format!(r#"{{"key":"{REDACTED}"}}"#);
        assert!(check(&redacted, r#"{"key":"x"}"#, None, &r).unwrap_err().contains("credential"));
        let secret = r#"{"amount":500,"to":"sk-proj-4f3kQ9xT7bLm2VpN8rZs1WcY"}"#;
        assert!(check(stored, secret, None, &r).unwrap_err().contains("credential"));
    }

    #[test]
    fn the_policys_schema_is_enforced_and_never_fetches() {
        let r = Redactor::default();
        let schema = json!({
            "type": "object", "required": ["amount"], "additionalProperties": false,
            "properties": {"amount": {"type": "integer", "maximum": 100}, "to": {"type": "string"}}
        });
        assert!(check_schema(&schema).is_ok());
        let stored = r#"{"amount":500}"#;
        let why = check(stored, r#"{"amount": 5000, "x": 1}"#, Some(&schema), &r).unwrap_err();
        assert!(why.contains("/amount") && why.contains("100") && why.contains("'x'"), "{why}");
        assert!(check(stored, r#"{"amount": 80}"#, Some(&schema), &r).unwrap().is_some());
        assert!(check_schema(&json!({"type": "objectx"})).is_err());
        let remote = json!({"$ref": "https://example.com/s.json"});
        assert!(check_schema(&remote).unwrap_err().contains("not fetched"));
        let local = json!({"$ref": "file:///etc/passwd"});
        assert!(check_schema(&local).is_err());
    }
}
