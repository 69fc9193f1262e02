//! The HTTP status of a server function's error, decided in one place: from the error
//! itself ([`AppError::status`]). The server-function machinery answers every error it
//! raises or is handed with 500, whether arguments failed to decode (the caller's
//! mistake) or a function returned `Conflict` without setting a status; this layer reads
//! the error a 500 carries and gives the response the status that error means.

use app::errors::AppError;
use axum::body::{to_bytes, Body};
use axum::extract::Request;
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::Response;

/// The largest error body read back (an error is a sentence, not a page).
const MAX_ERROR_BYTES: usize = 64 * 1024;

pub async fn from_error(request: Request, next: Next) -> Response {
    let is_fn = request.uri().path().starts_with("/fn/");
    let response = next.run(request).await;
    if !is_fn || response.status() != StatusCode::INTERNAL_SERVER_ERROR {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = to_bytes(body, MAX_ERROR_BYTES).await else {
        return Response::from_parts(parts, Body::from("server function error too large to report"));
    };
    if let Ok(error) = serde_json::from_slice::<AppError>(&bytes) {
        parts.status = StatusCode::from_u16(error.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    }
    Response::from_parts(parts, Body::from(bytes))
}
