//! Building links: run ids and other agent-supplied values go into URLs percent-encoded,
//! so any text an agent chose survives the round trip and cannot break out of the link.
//! Decoding happens once, in [`path_param`]: the server refuses a path whose
//! percent-encoding is malformed before any page sees it, and pages read their id from
//! the path through it rather than from the router's parameters, which Leptos decodes
//! twice under a parent route (so `a%2541` became `aA` instead of `a%41`).

/// Percent-encodes everything but RFC 3986 unreserved characters.
pub fn encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for byte in value.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => out.push(byte as char),
            _ => out.push_str(&format!("%{byte:02X}")),
        }
    }
    out
}

/// Percent-decodes once. Malformed escapes stay as they are (the server answers such
/// paths with 400 before a page sees them); invalid UTF-8 becomes U+FFFD.
fn decode_once(value: &str) -> String {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .filter(|h| h.bytes().all(|b| b.is_ascii_hexdigit()))
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], escaped) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The id in a page's path (`/runs/{id}`): the one segment after `prefix`, decoded once.
pub fn path_param(pathname: &str, prefix: &str) -> Option<String> {
    let rest = pathname.strip_prefix(prefix)?;
    let segment = rest.split('/').next().unwrap_or(rest);
    (!segment.is_empty()).then(|| decode_once(segment))
}

/// The link to a run's page.
pub fn run_href(run_id: &str) -> String {
    format!("/runs/{}", encode(run_id))
}

/// A query string from the pairs that have a value.
pub fn query(pairs: &[(&str, Option<String>)]) -> String {
    let parts: Vec<String> = pairs
        .iter()
        .filter_map(|(k, v)| v.as_ref().filter(|v| !v.is_empty()).map(|v| format!("{k}={}", encode(v))))
        .collect();
    if parts.is_empty() {
        String::new()
    } else {
        format!("?{}", parts.join("&"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_through_urls() {
        for value in ["run-1", "a/b c?d=e&f#g", "<script>alert(1)</script>", "ünïcødé", "100%", "%2541"] {
            assert_eq!(path_param(&run_href(value), "/runs/").as_deref(), Some(value));
        }
        assert_eq!(path_param("/runs/a%2541%2Fb", "/runs/").as_deref(), Some("a%41/b"), "decoded once");
        assert_eq!(path_param("/runs/x/replay.json", "/runs/").as_deref(), Some("x"));
        assert_eq!(path_param("/runs/", "/runs/"), None);
        assert_eq!(path_param("/runs/%a%C3%A9", "/runs/").as_deref(), Some("%aé"), "no panic on bad escapes");
        assert_eq!(encode("a b/c"), "a%20b%2Fc");
        assert_eq!(query(&[("q", Some("x y".into())), ("flag", None), ("sort", Some(String::new()))]), "?q=x%20y");
    }
}
