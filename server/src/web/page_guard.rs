//! The server-side check in front of every page: anonymous visitors go to the sign-in
//! page, and a signed-in user without the page's role gets status 403 (the page itself
//! renders the explanation). The role each path needs comes from `domain::access`.

use axum::extract::Request;
use axum::http::{header, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use domain::access::required_role_for_path;
use domain::models::CurrentUser;

pub async fn require_page_role(req: Request, next: Next) -> Response {
    let path = req.uri().path();
    // Server functions check roles themselves; static files are public. HEAD is a GET
    // without the body, so it is guarded exactly like one.
    let read = matches!(*req.method(), Method::GET | Method::HEAD);
    let is_page = read && !path.starts_with("/pkg/") && !path.starts_with("/fn/");
    if !is_page {
        return next.run(req).await;
    }
    let user = req.extensions().get::<CurrentUser>().cloned();
    if path == "/login" && user.is_some() {
        return Redirect::to("/runs").into_response();
    }
    let Some(needed) = required_role_for_path(path) else {
        return next.run(req).await;
    };
    match user {
        None => {
            let wanted = req.uri().path_and_query().map(|p| p.as_str()).unwrap_or("/runs");
            let location = format!("/login?next={}", encode_query_value(wanted));
            (StatusCode::SEE_OTHER, [(header::LOCATION, location)]).into_response()
        }
        Some(user) if !user.can(needed) => {
            tracing::info!(user = %user.username, path, needed = %needed, "page refused: missing role");
            let mut response = next.run(req).await;
            *response.status_mut() = StatusCode::FORBIDDEN;
            response
        }
        Some(_) => next.run(req).await,
    }
}

/// Percent-encodes a value for a query string (RFC 3986 unreserved characters pass).
fn encode_query_value(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for byte in value.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => out.push(byte as char),
            _ => out.push_str(&format!("%{byte:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::encode_query_value;

    #[test]
    fn next_parameter_is_encoded() {
        assert_eq!(encode_query_value("/runs?reason=error&x=a b"), "/runs%3Freason%3Derror%26x%3Da%20b");
    }
}
