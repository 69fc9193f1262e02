//! The escalation API for agents (scope `escalations`): hand a run to a human with what
//! was done and what remains, and read the state and the resolution back.
//!
//! `POST /api/v1/escalations`, `GET /api/v1/escalations/{id}`.

use super::{AgentToken, ApiError};
use app::access::Scope;
use app::escalations::request::EscalationRequest;
use app::escalations::Escalation;
use app::storage::escalations::{self, Filed};
use app::storage::Db;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use serde_json::Value;

/// `POST /api/v1/escalations`: 201 when new; 200 when it merged into the escalation the
/// run's traces opened, or repeats an earlier call (same idempotency key and body).
pub async fn file(
    State(db): State<Db>,
    Extension(token): Extension<AgentToken>,
    Extension(redactor): Extension<std::sync::Arc<app::ingest::redact::Redactor>>,
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
