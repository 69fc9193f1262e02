//! Regression-test results from replay fixtures (scope `replays`): a team's test runner
//! posts each fixture's outcome; /trends charts the pass rate per agent.
//!
//! `POST /api/v1/replays/results`.

use super::{AgentToken, ApiError, ErrorBody};
use axum::extract::rejection::JsonRejection;
use axum::extract::State;
use axum::http::StatusCode;
use axum::{Extension, Json};
use domain::access::Scope;
use domain::redact::Redactor;
use domain::replay_results::{ReplayResult, ResultRequest};
use std::sync::Arc;
use store::{replay_results, Db};

#[utoipa::path(
    post,
    path = "/replays/results",
    tag = "replays",
    security(("bearer" = [])),
    request_body = ResultRequest,
    responses(
        (status = 201, description = "Recorded", body = ReplayResult),
        (status = 400, description = "A field is missing, unknown or too large, or no agent can be found", body = ErrorBody),
    )
)]
/// `POST /api/v1/replays/results`: `details` are redacted like everything agents send.
pub async fn record(
    State(db): State<Db>,
    Extension(token): Extension<AgentToken>,
    State(redactor): State<Arc<Redactor>>,
    body: Result<Json<ResultRequest>, JsonRejection>,
) -> Result<(StatusCode, Json<ReplayResult>), ApiError> {
    token.require(Scope::Replays)?;
    let Json(request) = body.map_err(|e| ApiError::BadRequest(format!("invalid result: {}", e.body_text())))?;
    let mut valid = request.validate().map_err(ApiError::BadRequest)?;
    if let Some(details) = valid.details.as_mut() {
        redactor.redact_strings(details);
    }
    Ok((StatusCode::CREATED, Json(replay_results::record(&db, &valid).await?)))
}
