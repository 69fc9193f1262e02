//! The one error type of the REST API. Every variant says which status it returns; the
//! body is always `{"error": {"status": N, "message": "..."}}`.

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// 401: no token, or one that is unknown or revoked.
    #[error("{0}")]
    Unauthorized(String),
    /// 403: a valid token without the scope this endpoint needs.
    #[error("{0}")]
    Forbidden(String),
    /// 400: the request could not be understood.
    #[error("{0}")]
    BadRequest(String),
    /// 404: no such endpoint or resource.
    #[error("{0}")]
    NotFound(String),
    /// 422: understood, but the content breaks a rule.
    #[error("{0}")]
    Unprocessable(String),
    /// 503: a part it needs is busy or absent; retrying later may work.
    #[error("{0}")]
    Unavailable(String),
    /// 500: logged on the server; the client only learns that it failed.
    #[error("internal error; the details are in the server log")]
    Internal,
}

impl ApiError {
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::Unprocessable(_) => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

impl From<store::StoreError> for ApiError {
    fn from(err: store::StoreError) -> Self {
        match err {
            store::StoreError::Invalid(m) => ApiError::BadRequest(m),
            store::StoreError::Conflict(m) => ApiError::Unprocessable(m),
            store::StoreError::NotFound(m) => ApiError::NotFound(format!("{m} not found")),
            store::StoreError::Database(e) => {
                tracing::error!(error = %e, "database error in API");
                ApiError::Internal
            }
        }
    }
}

/// Every error's body: `{"error": {"status": N, "message": "..."}}`; the message says what
/// was wrong in words a person can act on.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct ErrorDetail {
    /// The HTTP status again, for clients that lose it.
    pub status: u16,
    pub message: String,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        let body = Json(ErrorBody { error: ErrorDetail { status: status.as_u16(), message: self.to_string() } });
        let mut response = (status, body).into_response();
        if status == StatusCode::UNAUTHORIZED {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, header::HeaderValue::from_static("Bearer realm=\"flightdeck\""));
        }
        response
    }
}
