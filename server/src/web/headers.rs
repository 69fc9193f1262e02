//! Security headers on every answer of the UI/API listener: no framing (the Approve button
//! cannot be clickjacked), no MIME sniffing, no referrer leaving the site, nothing signed-in
//! cached, and a Content-Security-Policy. Pages carry their own policy, made in
//! `app::app::shell` with the nonce of that render's inline scripts; every other answer
//! (API, server functions, errors) gets one that allows nothing at all.

use axum::extract::Request;
use axum::http::{header, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;

/// For answers that are not pages: JSON, text and redirects load nothing.
pub const LOCKED_DOWN_CSP: &str = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

/// What [`add`] sets, decided once from the configuration.
#[derive(Debug, Clone, Copy)]
pub struct SecurityHeaders {
    /// Served over HTTPS (the public URL says so): browsers are told to stay on it.
    pub https: bool,
}

pub async fn add(
    axum::extract::State(settings): axum::extract::State<SecurityHeaders>,
    req: Request,
    next: Next,
) -> Response {
    let static_asset = req.uri().path().starts_with("/pkg/");
    let mut response = next.run(req).await;
    let headers = response.headers_mut();
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    headers.insert("cross-origin-opener-policy", HeaderValue::from_static("same-origin"));
    if !headers.contains_key(header::CONTENT_SECURITY_POLICY) {
        headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(LOCKED_DOWN_CSP));
    }
    if settings.https {
        headers.insert(header::STRICT_TRANSPORT_SECURITY, HeaderValue::from_static("max-age=31536000"));
    }
    // The bundle and stylesheet may be cached; nothing else (pages, API answers, server
    // function results) may outlive the session that fetched it.
    if !static_asset {
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    response
}
