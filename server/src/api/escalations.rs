//! The escalation API for agents (scope `escalations`): hand a run to a human with what
//! was done and what remains, and read the state and the resolution back.
//!
//! `POST /api/v1/escalations`, `GET /api/v1/escalations/{id}`.

use super::{AgentToken, ApiError, ErrorBody};
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use domain::access::Scope;
use domain::escalations::request::EscalationRequest;
use domain::escalations::Escalation;
use serde_json::Value;
use store::escalations::{self, Filed};
use store::Db;

#[utoipa::path(
    post,
    path = "/escalations",
    tag = "escalations",
    security(("bearer" = [])),
    request_body = EscalationRequest,
    responses(
        (status = 201, description = "Opened", body = Escalation),
        (status = 200, description = "Merged into the escalation the run's traces opened, or a repeat", body = Escalation),
        (status = 400, description = "A field is missing, unknown or too large", body = ErrorBody),
        (status = 422, description = "Same key with another body, or the run already has an open API escalation", body = ErrorBody),
    )
)]
/// `POST /api/v1/escalations`: 201 when new; 200 when it merged into the escalation the
/// run's traces opened, or repeats an earlier call (same idempotency key and body).
pub async fn file(
    State(db): State<Db>,
    Extension(token): Extension<AgentToken>,
    State(redactor): State<std::sync::Arc<domain::redact::Redactor>>,
    body: Result<Json<Value>, JsonRejection>,
) -> Result<(StatusCode, Json<Escalation>), ApiError> {
    token.require(Scope::Escalations)?;
    let Json(raw) = body.map_err(|e| ApiError::BadRequest(format!("invalid escalation: {}", e.body_text())))?;
    let request: EscalationRequest =
        serde_json::from_value(raw.clone()).map_err(|e| ApiError::BadRequest(format!("invalid escalation: {e}")))?;
    let mut valid = request.validate(&raw).map_err(ApiError::BadRequest)?;
    valid.redact(&redactor);
    let (escalation, filed) = escalations::file(&db, &valid, &format!("token:{}", token.name)).await?;
    if filed != Filed::Repeated {
        tracing::info!(escalation = %escalation.id, run = %escalation.run_id, ?filed, "escalation filed");
    }
    let status = if filed == Filed::Created { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, Json(escalation)))
}

#[utoipa::path(
    get,
    path = "/escalations/{id}",
    tag = "escalations",
    security(("bearer" = [])),
    params(("id" = String, Path, description = "The escalation's id")),
    responses(
        (status = 200, description = "The escalation", body = Escalation),
        (status = 404, description = "No such escalation", body = ErrorBody),
    )
)]
/// `GET /api/v1/escalations/{id}`: the state, and once resolved the outcome, the note and
/// (for `handed_back`) the instructions the agent should follow.
pub async fn get(
    State(db): State<Db>,
    Extension(token): Extension<AgentToken>,
    Path(id): Path<String>,
) -> Result<Json<Escalation>, ApiError> {
    token.require(Scope::Escalations)?;
    escalations::get(&db, &id).await?.map(Json).ok_or_else(|| ApiError::NotFound(format!("no escalation `{id}`")))
}
