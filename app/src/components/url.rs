//! Building links: run ids and other agent-supplied values go into URLs percent-encoded,
//! so any text an agent chose survives the round trip and cannot break out of the link.

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

/// Reverses [`encode`] (and any other percent-encoding); invalid escapes stay as they are.
pub fn decode(value: &str) -> String {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let Ok(b) = u8::from_str_radix(&value[i + 1..i + 3], 16) {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
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
        for value in ["run-1", "a/b c?d=e&f#g", "<script>alert(1)</script>", "ünïcødé", "100%"] {
            assert_eq!(decode(&encode(value)), value);
        }
        assert_eq!(encode("a b/c"), "a%20b%2Fc");
        assert_eq!(decode("bad%zzescape%"), "bad%zzescape%");
        assert_eq!(query(&[("q", Some("x y".into())), ("flag", None), ("sort", Some(String::new()))]), "?q=x%20y");
    }
}
