//! Alert silences for automation (scope `alerts`): a deploy script silences what it is
//! about to disturb and lists what is silenced. People do the same from the alert page.
//!
//! `POST /api/v1/silences`, `GET /api/v1/silences`.

use super::{AgentToken, ApiError, ErrorBody};
use app::access::Scope;
use app::alerts::silences::{Silence, SilenceRequest};
use app::storage::audit::{self, action};
use app::storage::{silences, Db};
use axum::extract::rejection::JsonRejection;
use axum::extract::State;
use axum::http::StatusCode;
use axum::{Extension, Json};

#[utoipa::path(
    post,
    path = "/silences",
    tag = "alerts",
    security(("bearer" = [])),
    request_body = SilenceRequest,
    responses(
        (status = 201, description = "Silencing from now for `minutes`", body = Silence),
        (status = 400, description = "No rule, agent or tool; no reason; a duration outside 1 minute to 14 days", body = ErrorBody),
    )
)]
/// `POST /api/v1/silences`: audited as the token.
pub async fn create(
    State(db): State<Db>,
    Extension(token): Extension<AgentToken>,
    body: Result<Json<SilenceRequest>, JsonRejection>,
) -> Result<(StatusCode, Json<Silence>), ApiError> {
    token.require(Scope::Alerts)?;
    let Json(request) = body.map_err(|e| ApiError::BadRequest(format!("invalid silence: {}", e.body_text())))?;
    let valid = request.validate().map_err(ApiError::BadRequest)?;
    let by = format!("token:{}", token.name);
    let silence = silences::create(&db, &valid, &by).await?;
    let entry = audit::NewEntry {
        actor: Some(&by),
        action: action::SILENCE_CREATED,
        target: Some(&silence.id),
        detail: Some(&format!("{}: {}", silence.scope(), silence.reason)),
        source: None,
    };
    audit::record(&db, entry).await?;
    Ok((StatusCode::CREATED, Json(silence)))
}

#[utoipa::path(
    get,
    path = "/silences",
    tag = "alerts",
    security(("bearer" = [])),
    responses((status = 200, description = "Active silences (soonest to end first), then recent ended ones", body = Vec<Silence>))
)]
/// `GET /api/v1/silences`
pub async fn list(
    State(db): State<Db>,
    Extension(token): Extension<AgentToken>,
) -> Result<Json<Vec<Silence>>, ApiError> {
    token.require(Scope::Alerts)?;
    Ok(Json(silences::list(&db, 100).await?))
}
