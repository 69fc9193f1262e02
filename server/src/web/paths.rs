//! Refuses a request whose path has malformed percent-encoding (a `%` not followed by two
//! hex digits, or escapes that decode to invalid UTF-8) with 400, before routing. Pages
//! and the API then decode each path parameter exactly once, and can neither panic on a
//! crafted path nor read it as a different id.

use axum::extract::Request;
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

pub async fn refuse_malformed(req: Request, next: Next) -> Response {
    match path_problem(req.uri().path()) {
        None => next.run(req).await,
        Some(problem) => {
            tracing::info!(path = %req.uri().path(), problem, "malformed path refused");
            (
                StatusCode::BAD_REQUEST,
                [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
                format!("malformed URL path: {problem}; percent-encode ids with two hex digits per byte of UTF-8\n"),
            )
                .into_response()
        }
    }
}

/// What is wrong with a path's percent-encoding, if anything.
pub fn path_problem(path: &str) -> Option<String> {
    let bytes = path.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'%' {
            decoded.push(bytes[i]);
            i += 1;
            continue;
        }
        let value = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .filter(|h| h.bytes().all(|b| b.is_ascii_hexdigit()))
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        let Some(value) = value else {
            return Some(format!("`%` at byte {i} is not followed by two hex digits"));
        };
        decoded.push(value);
        i += 3;
    }
    match std::str::from_utf8(&decoded) {
        Ok(_) => None,
        Err(e) => Some(format!("the escapes decode to invalid UTF-8 at byte {}", e.valid_up_to())),
    }
}

#[cfg(test)]
mod tests {
    use super::path_problem;

    #[test]
    fn well_formed_paths_pass_and_malformed_ones_are_named() {
        for ok in ["/runs", "/runs/run-1", "/runs/%C3%A9t%C3%A9", "/runs/100%25", "/runs/a%2Fb", "/"] {
            assert_eq!(path_problem(ok), None, "{ok}");
        }
        assert!(path_problem("/runs/%a%C3%A9").unwrap().contains("two hex digits"));
        assert!(path_problem("/runs/%").unwrap().contains("two hex digits"));
        assert!(path_problem("/runs/%zz").unwrap().contains("two hex digits"));
        assert!(path_problem("/runs/%C3").unwrap().contains("invalid UTF-8"));
        assert!(path_problem("/runs/%FF%FE").unwrap().contains("invalid UTF-8"));
    }
}
