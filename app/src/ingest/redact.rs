//! Redaction before anything is stored: attribute keys that name a secret lose their
//! value, and secret-looking substrings (bearer tokens, API keys of common providers,
//! private keys, JWTs, Flightdeck's own tokens) are cut out of every string. Extra
//! patterns come from the config file.

use regex::Regex;
use serde_json::Value;

pub const REDACTED: &str = "[REDACTED]";

/// Keys whose whole value is a secret. Anchored at the end of the key so that counters
/// such as `gen_ai.usage.input_tokens` are not mistaken for tokens.
const SECRET_KEY: &str = r"(?i)(^|[._\-])(authorization|proxy[._\-]?authorization|api[._\-]?key|apikey|x[._\-]?api[._\-]?key|secret|client[._\-]?secret|password|passwd|pwd|token|access[._\-]?token|refresh[._\-]?token|auth[._\-]?token|id[._\-]?token|session[._\-]?token|cookie|set[._\-]?cookie|credentials?|private[._\-]?key)$";

/// Secrets recognisable by their shape wherever they appear in a string.
const SECRET_VALUES: &[&str] = &[
    r"(?i)\bbearer\s+[a-z0-9._~+/=\-]{8,}",
    r"(?i)\bbasic\s+[a-z0-9+/=]{8,}",
    r"\bsk-[A-Za-z0-9_\-]{16,}",
    r"\bAKIA[0-9A-Z]{16}\b",
    r"\bgh[pousr]_[A-Za-z0-9]{20,}",
    r"\bxox[abprs]-[A-Za-z0-9\-]{10,}",
    r"\bAIza[0-9A-Za-z_\-]{30,}",
    r"\bfdk_[0-9a-f]{64}\b",
    r"\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----",
    r#"(?i)\b(password|passwd|secret|api[_\-]?key|access[_\-]?token)\s*[=:]\s*[^\s&"',;]{4,}"#,
];

/// How many attribute keys each thread remembers the secret-key answer for.
const KNOWN_KEYS: usize = 4096;

#[derive(Debug, Clone)]
pub struct Redactor {
    secret_key: Regex,
    secret_values: Regex,
}

impl Redactor {
    /// The default rules plus `extra` value patterns (regular expressions).
    pub fn new(extra: &[String]) -> Result<Redactor, String> {
        let mut patterns: Vec<String> = SECRET_VALUES.iter().map(|p| format!("(?:{p})")).collect();
        for p in extra {
            Regex::new(p).map_err(|e| format!("invalid redaction pattern `{p}`: {e}"))?;
            patterns.push(format!("(?:{p})"));
        }
        Ok(Redactor {
            secret_key: Regex::new(SECRET_KEY).expect("built-in key pattern"),
            secret_values: Regex::new(&patterns.join("|")).map_err(|e| format!("redaction patterns: {e}"))?,
        })
    }

    pub fn is_secret_key(&self, key: &str) -> bool {
        // The same few dozen keys come with every span, and the key pattern is fixed (extra
        // patterns apply to values), so each thread remembers its answers: the regex ran
        // for every attribute of every span and was a tenth of normalization's time.
        thread_local! {
            static KNOWN: std::cell::RefCell<std::collections::HashMap<String, bool>> = Default::default();
        }
        KNOWN.with_borrow_mut(|known| {
            if let Some(&secret) = known.get(key) {
                return secret;
            }
            // Bounded: keys inside tool arguments can be anything.
            if known.len() >= KNOWN_KEYS {
                known.clear();
            }
            let secret = self.secret_key.is_match(key);
            known.insert(key.to_string(), secret);
            secret
        })
    }

    /// Redacts one attribute value in place, given its key.
    pub fn redact_value(&self, key: &str, value: &mut Value) {
        if self.is_secret_key(key) && !value.is_null() && !value.is_number() && !value.is_boolean() {
            *value = Value::String(REDACTED.into());
            return;
        }
        self.redact_strings(value);
    }

    /// Redacts every key/value of an object, recursing into nested objects and arrays.
    pub fn redact_map(&self, map: &mut serde_json::Map<String, Value>) {
        for (key, value) in map.iter_mut() {
            self.redact_value(key, value);
        }
    }

    fn redact_strings(&self, value: &mut Value) {
        match value {
            Value::String(s) => {
                if self.secret_values.is_match(s) {
                    *s = self.secret_values.replace_all(s, REDACTED).into_owned();
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|v| self.redact_strings(v)),
            Value::Object(map) => self.redact_map(map),
            _ => {}
        }
    }

    /// Redacts secrets inside a text that is JSON (like tool arguments), keeping it JSON.
    pub fn redact_text(&self, text: &str) -> String {
        match serde_json::from_str::<Value>(text) {
            Ok(mut parsed) if parsed.is_object() || parsed.is_array() => {
                self.redact_strings(&mut parsed);
                parsed.to_string()
            }
            _ => self.secret_values.replace_all(text, REDACTED).into_owned(),
        }
    }
}

impl Default for Redactor {
    fn default() -> Self {
        Redactor::new(&[]).expect("built-in patterns compile")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn remembered_key_answers_stay_right_past_the_bound() {
        let r = Redactor::default();
        for round in 0..2 {
            for i in 0..KNOWN_KEYS + 10 {
                assert!(!r.is_secret_key(&format!("arg.{i}")), "round {round}");
            }
            assert!(r.is_secret_key("db.password"), "round {round}");
            assert!(!r.is_secret_key("gen_ai.usage.input_tokens"), "round {round}");
        }
    }

    #[test]
    fn secret_keys_lose_their_values_but_token_counts_stay() {
        let r = Redactor::default();
        let mut attrs = json!({
            "http.request.header.authorization": "Bearer abc.def.ghi",
            "openai.api_key": "whatever",
            "db.password": "hunter2",
            "user.cookie": "sid=1",
            "gen_ai.usage.input_tokens": 120,
            "llm.token_count.prompt": 7,
            "tool.idempotency_key": "k-1",
            "max_tokens": "300",
        });
        r.redact_map(attrs.as_object_mut().unwrap());
        assert_eq!(attrs["http.request.header.authorization"], REDACTED);
        assert_eq!(attrs["openai.api_key"], REDACTED);
        assert_eq!(attrs["db.password"], REDACTED);
        assert_eq!(attrs["user.cookie"], REDACTED);
        assert_eq!(attrs["gen_ai.usage.input_tokens"], 120);
        assert_eq!(attrs["llm.token_count.prompt"], 7);
        assert_eq!(attrs["tool.idempotency_key"], "k-1");
        assert_eq!(attrs["max_tokens"], "300");
    }

    #[test]
    fn secret_shapes_are_cut_out_of_any_string() {
        let r = Redactor::default();
        let cases = [
            ("curl -H 'Authorization: Bearer sk-live-0123456789abcdef'", "sk-live"),
            ("key sk-ant-api03-AbCdEfGhIjKlMnOpQrStUv here", "sk-ant"),
            ("aws AKIAIOSFODNN7EXAMPLE creds", "AKIAIOSFODNN7EXAMPLE"),
            ("token ghp_0123456789abcdefghijABCDEFGHIJ", "ghp_"),
            ("slack xoxb-123456789012-abcdefghij", "xoxb-"),
            ("jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U", "eyJ"),
            ("-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----", "MIIE"),
            ("connect with password=s3cr3t!! now", "s3cr3t"),
        ];
        for (text, leaked) in cases {
            let mut v = json!(text);
            r.redact_value("message", &mut v);
            let out = v.as_str().unwrap();
            assert!(!out.contains(leaked), "{leaked} leaked in {out}");
            assert!(out.contains(REDACTED), "{out}");
        }
        let mut plain = json!("nothing secret in here: 42 tokens used");
        r.redact_value("message", &mut plain);
        assert_eq!(plain, "nothing secret in here: 42 tokens used");
    }

    #[test]
    fn json_text_stays_json_and_nested_values_are_redacted() {
        let r = Redactor::default();
        let args = r#"{"to":"a@b.c","headers":{"Authorization":"Bearer abcdefgh12345"},"body":"hi"}"#;
        let out: serde_json::Value = serde_json::from_str(&r.redact_text(args)).unwrap();
        assert_eq!(out["headers"]["Authorization"], REDACTED);
        assert_eq!(out["body"], "hi");
    }

    #[test]
    fn configured_patterns_are_added_and_bad_ones_refused() {
        let r = Redactor::new(&["ACME-[0-9]{6}".into()]).unwrap();
        let mut v = json!("order ACME-123456 shipped");
        r.redact_value("note", &mut v);
        assert_eq!(v, "order [REDACTED] shipped");
        assert!(Redactor::new(&["(".into()]).unwrap_err().contains("invalid redaction pattern"));
    }
}
