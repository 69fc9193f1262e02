//! Redaction before anything is stored: attribute keys that name a secret lose their
//! value, and secret-looking substrings (credentials of common providers, private keys,
//! JWTs, passwords in URLs, Flightdeck's own tokens) are cut out of every string. Extra
//! patterns come from the config file. Everything an agent sends that is stored passes
//! through here: span attributes, names, status messages and events, the canonical text
//! fields read from them, approval arguments and display fields, and escalation texts.

use regex::Regex;
use serde_json::Value;
use std::borrow::Cow;

pub use crate::canonical::REDACTED;

/// Secrets recognisable by their shape wherever they appear in a string. Each names a
/// documented format; the test corpus below holds a real-format example of each and
/// near-misses that must survive.
const SECRET_VALUES: &[&str] = &[
    // HTTP credentials.
    r"(?i)\bbearer\s+[a-z0-9._~+/=\-]{8,}",
    r"(?i)\bbasic\s+[a-z0-9+/=]{8,}",
    // OpenAI (sk-, sk-proj-) and Anthropic (sk-ant-api03-) keys.
    r"\bsk-[A-Za-z0-9_\-]{16,}",
    // Stripe secret and restricted keys, webhook signing secrets.
    r"\b[rs]k_(?:live|test)_[0-9A-Za-z]{10,}",
    r"\bwhsec_[0-9A-Za-z]{16,}",
    // AWS access key ids (long-term, temporary and others).
    r"\b(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[0-9A-Z]{16}\b",
    // An AWS secret access key, recognisable only next to its name (alone it is 40
    // characters of base64, which a git hash also is).
    r#"(?i)aws_?secret_?access_?key["']?\s*[=:]\s*["']?[A-Za-z0-9/+=]{40}"#,
    // GitHub tokens: classic (ghp_, gho_, ghu_, ghs_, ghr_) and fine-grained.
    r"\bgh[pousr]_[A-Za-z0-9]{20,}",
    r"\bgithub_pat_[A-Za-z0-9_]{22,}",
    // Slack tokens and incoming-webhook URLs.
    r"\bxox[abposr]-[A-Za-z0-9\-]{10,}",
    r"\bxapp-[0-9]-[A-Za-z0-9\-]{10,}",
    r"https://hooks\.slack\.com/services/T[A-Za-z0-9]+/B[A-Za-z0-9]+/[A-Za-z0-9]+",
    // Google API keys, OAuth access tokens and client secrets.
    r"\bAIza[0-9A-Za-z_\-]{30,}",
    r"\bya29\.[0-9A-Za-z_\-]{20,}",
    r"\bGOCSPX-[0-9A-Za-z_\-]{20,}",
    // npm and Hugging Face tokens.
    r"\bnpm_[A-Za-z0-9]{36}\b",
    r"\bhf_[A-Za-z]{30,}\b",
    // Flightdeck's own agent tokens.
    r"\bfdk_[0-9a-f]{64}\b",
    // JSON Web Tokens.
    r"\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",
    // PEM private keys, whole.
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----",
    // `password=...`, `api_key: ...` and the like inside text.
    r#"(?i)\b[a-z0-9_.\-]*(?:password|passwd|secret|api[_\-]?key|access[_\-]?token|auth[_\-]?token|private[_\-]?key)["']?\s*[=:]\s*["']?[^\s&"',;]{4,}"#,
];

/// `scheme://user:password@host`: only the password goes.
const URL_PASSWORD: &str = r"(?i)\b([a-z][a-z0-9+.\-]*://[^/\s:@]*):([^/\s@]+)@";

/// How many attribute keys each thread remembers the secret-key answer for.
const KNOWN_KEYS: usize = 4096;

/// The words of a key, lowercased: split at anything not a letter or digit and where a
/// lowercase letter meets an uppercase one (`apiKey` → `api`, `key`).
fn words(key: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut previous_lower = false;
    for c in key.chars() {
        if !c.is_alphanumeric() {
            if !word.is_empty() {
                out.push(std::mem::take(&mut word));
            }
            previous_lower = false;
            continue;
        }
        if c.is_uppercase() && previous_lower && !word.is_empty() {
            out.push(std::mem::take(&mut word));
        }
        previous_lower = c.is_lowercase() || c.is_ascii_digit();
        word.extend(c.to_lowercase());
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}

/// Words after `token` that make a key a count or a setting, not a credential
/// (`llm.token_count.prompt`, `token_type`).
const TOKEN_QUALIFIERS: &[&str] =
    &["count", "counts", "type", "usage", "limit", "limits", "budget", "estimate", "length", "index", "kind"];

/// Whether a key names a secret: `*secret*`, `*password*`, `*token*` (but not token
/// counts), `*api_key*`, access and private keys, authorization headers, cookies,
/// credentials. Pure; the word rules are spelled out here rather than in one regular
/// expression so each near-miss in the tests has a visible reason.
pub fn key_names_a_secret(key: &str) -> bool {
    let words = words(key);
    let joined: String = words.concat();
    if ["password", "passwd", "passphrase", "apikey", "accesskey", "privatekey", "clientsecret", "credential"]
        .iter()
        .any(|w| joined.contains(w))
    {
        return true;
    }
    words.iter().enumerate().any(|(i, w)| {
        let secret = w.ends_with("secret") || matches!(w.as_str(), "secrets" | "secretkey" | "secrettoken");
        let next = words.get(i + 1).map(String::as_str).unwrap_or("");
        let token = w.ends_with("token") && !TOKEN_QUALIFIERS.contains(&next);
        secret
            || token
            || matches!(
                w.as_str(),
                "pwd" | "authorization" | "cookie" | "cookies" | "setcookie" | "credentials" | "signingkey"
            )
    }) || joined.contains("setcookie")
        || joined.ends_with("proxyauthorization")
}

#[derive(Debug, Clone)]
pub struct Redactor {
    secret_values: Regex,
    url_password: Regex,
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
            secret_values: Regex::new(&patterns.join("|")).map_err(|e| format!("redaction patterns: {e}"))?,
            url_password: Regex::new(URL_PASSWORD).expect("built-in URL pattern"),
        })
    }

    pub fn is_secret_key(&self, key: &str) -> bool {
        // The same few dozen keys come with every span, so each thread remembers its
        // answers: the key check ran for every attribute of every span and was a tenth of
        // normalization's time.
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
            let secret = key_names_a_secret(key);
            known.insert(key.to_string(), secret);
            secret
        })
    }

    /// `text` with every secret-shaped part replaced by `[REDACTED]` (borrowed when there
    /// was none, which is almost always).
    pub fn redact_str<'t>(&self, text: &'t str) -> Cow<'t, str> {
        let text = match self.url_password.is_match(text) {
            true => Cow::Owned(self.url_password.replace_all(text, format!("$1:{REDACTED}@")).into_owned()),
            false => Cow::Borrowed(text),
        };
        if !self.secret_values.is_match(&text) {
            return text;
        }
        Cow::Owned(self.secret_values.replace_all(&text, REDACTED).into_owned())
    }

    /// Redacts a string in place.
    pub fn redact_string(&self, text: &mut String) {
        if let Cow::Owned(redacted) = self.redact_str(text) {
            *text = redacted;
        }
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

    /// Redacts every string in a JSON value, and the values of secret-named keys.
    pub fn redact_strings(&self, value: &mut Value) {
        match value {
            Value::String(s) => self.redact_string(s),
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
            _ => self.redact_str(text).into_owned(),
        }
    }

    /// Whether redaction would change `value`: a secret-shaped string, or a non-empty
    /// value under a secret-named key, anywhere in it.
    pub fn finds_secret(&self, value: &Value) -> bool {
        let mut copy = value.clone();
        self.redact_strings(&mut copy);
        &copy != value
    }

    /// Like [`Redactor::finds_secret`], for a text that may be JSON.
    pub fn finds_secret_in_text(&self, text: &str) -> bool {
        match serde_json::from_str::<Value>(text) {
            Ok(parsed) if parsed.is_object() || parsed.is_array() => self.finds_secret(&parsed),
            _ => matches!(self.redact_str(text), Cow::Owned(_)),
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
    fn keys_naming_secrets_are_recognised_and_counts_are_not() {
        let secret = [
            "http.request.header.authorization",
            "Proxy-Authorization",
            "openai.api_key",
            "x-api-key",
            "apiKey",
            "OPENAI_API_KEY",
            "db.password",
            "userPassword",
            "pwd",
            "user.cookie",
            "set-cookie",
            "secret",
            "secret_key",
            "client_secret",
            "aws_secret_access_key",
            "AWS_ACCESS_KEY_ID",
            "secretKey",
            "token",
            "access_token",
            "refreshToken",
            "auth.token",
            "github_token",
            "csrftoken",
            "deploy.token",
            "private_key",
            "credentials",
            "google.credential.json",
        ];
        for key in secret {
            assert!(key_names_a_secret(key), "{key} names a secret");
        }
        let not_secret = [
            "gen_ai.usage.input_tokens",
            "gen_ai.usage.output_tokens",
            "llm.token_count.prompt",
            "llm.token_count.completion",
            "max_tokens",
            "tokens",
            "token_type",
            "tokenizer",
            "tool.idempotency_key",
            "secretary",
            "keyboard",
            "passage",
            "session.turns",
            "approval.id",
            "cache_key",
            // The mapping layer's run id: an id, not a credential.
            "session.id",
        ];
        for key in not_secret {
            assert!(!key_names_a_secret(key), "{key} is not a secret");
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
            "secret_key": "plain-looking",
            "aws_secret_access_key": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "gen_ai.usage.input_tokens": 120,
            "llm.token_count.prompt": 7,
            "tool.idempotency_key": "k-1",
            "max_tokens": "300",
        });
        r.redact_map(attrs.as_object_mut().unwrap());
        for key in ["http.request.header.authorization", "openai.api_key", "db.password", "user.cookie", "secret_key"] {
            assert_eq!(attrs[key], REDACTED, "{key}");
        }
        assert_eq!(attrs["aws_secret_access_key"], REDACTED);
        assert_eq!(attrs["gen_ai.usage.input_tokens"], 120);
        assert_eq!(attrs["llm.token_count.prompt"], 7);
        assert_eq!(attrs["tool.idempotency_key"], "k-1");
        assert_eq!(attrs["max_tokens"], "300");
    }

    /// Real-format examples of every credential the patterns cover (the published example
    /// or test values of each provider, or values built to its documented format).
    const CORPUS: &[(&str, &str)] = &[
        ("curl -H 'Authorization: Bearer sk-live-0123456789abcdef'", "sk-live"),
        ("Authorization: Basic YWxhZGRpbjpvcGVuc2VzYW1l", "YWxhZGRpbjpvcGVuc2VzYW1l"),
        ("key sk-ant-api03-AbCdEfGhIjKlMnOpQrStUv here", "sk-ant"),
        ("OPENAI sk-proj-4f3kQ9xT7bLm2VpN8rZs1WcY", "sk-proj"),
        ("charge sk_live_4eC39HqLyjWDarjtT1zdp7dc now", "sk_live_4eC39HqLyjWDarjtT1zdp7dc"),
        ("test key sk_test_51H8bDqLkdIwHu7ixAbCdEf", "sk_test_51H8"),
        ("restricted rk_live_51H8bDqLkdIwHu7ix", "rk_live_51H8"),
        ("signing whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_MfKQ"),
        ("aws AKIAIOSFODNN7EXAMPLE creds", "AKIAIOSFODNN7EXAMPLE"),
        ("session ASIAY34FZKBOKMUTVV7A used", "ASIAY34FZKBOKMUTVV7A"),
        ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI"),
        ("token ghp_0123456789abcdefghijABCDEFGHIJ012345", "ghp_"),
        ("status: push failed for gho_16C7e42F292c6912E7710c838347Ae178B4a", "gho_16C7"),
        ("pat github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOP", "github_pat_"),
        ("slack xoxb-123456789012-abcdefghij", "xoxb-"),
        ("app xapp-1-A0123456789-1234567890123-abcdef", "xapp-1"),
        ("hook https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX", "XXXXXXXXXXXX"),
        ("google AIzaSyA-1234567890abcdefghijklmnopqrstu", "AIzaSy"),
        ("oauth ya29.a0AfH6SMBx1234567890abcdefghijklmnop", "ya29."),
        ("client GOCSPX-1234567890abcdefghijklmnopqr", "GOCSPX-"),
        ("npm npm_abcdefghijklmnopqrstuvwxyz0123456789", "npm_abcdef"),
        ("hf hf_abcdefghijklmnopqrstuvwxyzABCDEFGH", "hf_abcdef"),
        ("jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U", "eyJ"),
        ("-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----", "MIIE"),
        ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjE\n-----END OPENSSH PRIVATE KEY-----", "b3BlbnNz"),
        ("connect with password=s3cr3t!! now", "s3cr3t"),
        ("{\"api_key\": \"abcd1234efgh\"}", "abcd1234efgh"),
        ("db postgres://app:hunter2@db.internal:5432/prod", "hunter2"),
        ("fetch https://deploy:tok3n@git.example.com/repo.git", "tok3n"),
        ("token fdk_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef ok", "fdk_0123"),
    ];

    /// Texts that look a little like secrets and must come through unchanged.
    const NEAR_MISSES: &[&str] = &[
        "nothing secret in here: 42 tokens used",
        "commit 9fceb02d0ae598e95dc970b74767f19372d61af8 fixed it",
        "request 123e4567-e89b-12d3-a456-426614174000 done",
        "scikit sk-learn 1.5",
        "task_live_stream and disk_test_suite",
        "AKIA is not enough",
        "ghp_short",
        "eyJ alone",
        "https://user@example.com/path and https://example.com:8443/x",
        "mailto:ana@example.com",
        "the token budget was 4096 tokens",
        "max_tokens: 300",
        "the password field is empty",
        "SGVsbG8sIHdvcmxkIQ== is base64 for a greeting",
        "hf_model and hf_dataset",
    ];

    #[test]
    fn every_credential_in_the_corpus_is_cut_out_of_any_string() {
        let r = Redactor::default();
        for (text, leaked) in CORPUS {
            let out = r.redact_str(text);
            assert!(!out.contains(leaked), "{leaked} leaked in {out}");
            assert!(out.contains(REDACTED), "{out}");
            assert!(r.finds_secret_in_text(text), "{text}");
        }
        assert_eq!(
            r.redact_str("db postgres://app:hunter2@db.internal:5432/prod"),
            "db postgres://app:[REDACTED]@db.internal:5432/prod",
            "only the password of a URL goes"
        );
    }

    #[test]
    fn near_misses_come_through_unchanged() {
        let r = Redactor::default();
        for text in NEAR_MISSES {
            assert_eq!(r.redact_str(text), *text);
            assert!(!r.finds_secret_in_text(text), "{text}");
        }
    }

    #[test]
    fn json_text_stays_json_and_nested_values_are_redacted() {
        let r = Redactor::default();
        let args = r#"{"to":"a@b.c","headers":{"Authorization":"Bearer abcdefgh12345"},"body":"hi"}"#;
        let out: serde_json::Value = serde_json::from_str(&r.redact_text(args)).unwrap();
        assert_eq!(out["headers"]["Authorization"], REDACTED);
        assert_eq!(out["body"], "hi");
        assert!(r.finds_secret_in_text(args));
        assert!(!r.finds_secret_in_text(r#"{"to":"a@b.c","body":"hi","max_tokens":5}"#));
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
