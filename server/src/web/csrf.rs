//! Cross-site request forgery protection for every state-changing browser request.
//!
//! Browsers say where a request comes from: `Sec-Fetch-Site` in current ones, `Origin` on
//! every cross-origin POST. A request that is not same-origin by either is refused. The
//! SameSite=Lax session cookie is the second line. Agent API calls authenticated with a
//! bearer token carry no cookie, so they cannot be forged this way and are exempt.

use axum::extract::Request;
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

pub async fn refuse_cross_site(req: Request, next: Next) -> Response {
    match cross_site_verdict(req.method(), req.uri().path(), req.headers()) {
        Ok(()) => next.run(req).await,
        Err(reason) => {
            tracing::warn!(path = %req.uri().path(), reason, "cross-site request refused");
            (StatusCode::FORBIDDEN, format!("cross-site request refused: {reason}\n")).into_response()
        }
    }
}

/// Decides whether a request may proceed; the error says why not.
pub fn cross_site_verdict(method: &Method, path: &str, headers: &HeaderMap) -> Result<(), &'static str> {
    if matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS) {
        return Ok(());
    }
    let bearer =
        headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).is_some_and(|v| v.starts_with("Bearer "));
    if bearer && path.starts_with("/api/v1/") && !headers.contains_key(header::COOKIE) {
        return Ok(());
    }
    if let Some(site) = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()) {
        return match site {
            "same-origin" | "none" => Ok(()),
            _ => Err("the browser reports it came from another site (Sec-Fetch-Site)"),
        };
    }
    if let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) {
        let host = headers.get(header::HOST).and_then(|v| v.to_str().ok()).unwrap_or("");
        let origin_host = origin.split_once("://").map(|(_, h)| h).unwrap_or("");
        return if !host.is_empty() && origin_host.eq_ignore_ascii_case(host) {
            Ok(())
        } else {
            Err("its Origin does not match this server")
        };
    }
    // No browser provenance headers at all: not a browser (curl, scripts), which cannot
    // ride on someone's session cookie.
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn reads_are_never_refused() {
        let h = headers(&[("sec-fetch-site", "cross-site")]);
        assert!(cross_site_verdict(&Method::GET, "/runs", &h).is_ok());
    }

    #[test]
    fn cross_site_posts_are_refused_by_either_header() {
        let h = headers(&[("sec-fetch-site", "cross-site"), ("host", "fd:3000"), ("origin", "http://fd:3000")]);
        assert!(cross_site_verdict(&Method::POST, "/fn/logout", &h).is_err());
        let h = headers(&[("sec-fetch-site", "same-site")]);
        assert!(cross_site_verdict(&Method::POST, "/fn/logout", &h).is_err());
        let h = headers(&[("host", "fd:3000"), ("origin", "http://evil.example")]);
        assert!(cross_site_verdict(&Method::POST, "/fn/logout", &h).is_err());
        let h = headers(&[("host", "fd:3000"), ("origin", "null")]);
        assert!(cross_site_verdict(&Method::POST, "/fn/logout", &h).is_err());
    }

    #[test]
    fn same_origin_posts_pass() {
        let h = headers(&[("sec-fetch-site", "same-origin")]);
        assert!(cross_site_verdict(&Method::POST, "/fn/login", &h).is_ok());
        let h = headers(&[("host", "fd:3000"), ("origin", "http://fd:3000")]);
        assert!(cross_site_verdict(&Method::POST, "/fn/login", &h).is_ok());
    }

    #[test]
    fn bearer_api_calls_are_exempt_but_not_with_a_cookie() {
        let h = headers(&[("authorization", "Bearer fdk_x"), ("origin", "http://evil.example")]);
        assert!(cross_site_verdict(&Method::POST, "/api/v1/approvals", &h).is_ok());
        let h = headers(&[
            ("authorization", "Bearer fdk_x"),
            ("origin", "http://evil.example"),
            ("cookie", "flightdeck_session=abc"),
        ]);
        assert!(cross_site_verdict(&Method::POST, "/api/v1/approvals", &h).is_err());
    }
}
