//! Alert silences for automation (scope `alerts`): a deploy script silences what it is
//! about to disturb, lists what is silenced, and ends its silence when it is done. People
//! do the same from the alert page and /alerts.
//!
//! `POST /api/v1/silences`, `GET /api/v1/silences`, `GET /api/v1/silences/{id}`,
//! `DELETE /api/v1/silences/{id}`.

use super::{AgentToken, ApiError, ErrorBody};
use app::auth::client_address::ClientAddress;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use domain::access::Scope;
use domain::alerts::silences::{Silence, SilenceRequest};
use store::audit::{self, action};
use store::{silences, Db};

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
    from: Option<Extension<ClientAddress>>,
    body: Result<Json<SilenceRequest>, JsonRejection>,
) -> Result<(StatusCode, Json<Silence>), ApiError> {
    token.require(Scope::Alerts)?;
    let Json(request) = body.map_err(|e| ApiError::BadRequest(format!("invalid silence: {}", e.body_text())))?;
    let valid = request.validate().map_err(ApiError::BadRequest)?;
    let by = format!("token:{}", token.name);
    let silence = silences::create(&db, &valid, &by).await?;
    let source = from.map(|Extension(ClientAddress(ip))| ip.to_string());
    let entry = audit::NewEntry {
        actor: Some(&by),
        action: action::SILENCE_CREATED,
        target: Some(&silence.id),
        detail: Some(&format!("{}: {}", silence.scope(), silence.reason)),
        source: source.as_deref(),
    };
    audit::record(&db, entry).await?;
    // Open alerts it matches show as silenced at once.
    store::alerts::hold_under(&db, &silence, store::now_ms()).await?;
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

#[utoipa::path(
    get,
    path = "/silences/{id}",
    tag = "alerts",
    security(("bearer" = [])),
    params(("id" = String, Path, description = "The silence's id (`sil_...`)")),
    responses(
        (status = 200, description = "The silence: `ended_by` is set once someone ended it early", body = Silence),
        (status = 404, description = "No such silence", body = ErrorBody),
    )
)]
/// `GET /api/v1/silences/{id}`
pub async fn get(
    State(db): State<Db>,
    Extension(token): Extension<AgentToken>,
    Path(id): Path<String>,
) -> Result<Json<Silence>, ApiError> {
    token.require(Scope::Alerts)?;
    silences::get(&db, &id).await?.map(Json).ok_or_else(|| ApiError::NotFound(format!("silence `{id}` not found")))
}

#[utoipa::path(
    delete,
    path = "/silences/{id}",
    tag = "alerts",
    security(("bearer" = [])),
    params(("id" = String, Path, description = "The silence's id (`sil_...`)")),
    responses(
        (status = 200, description = "Ended now (audited as `silence_ended` by `token:NAME`); a silence that was \
            over already is answered as it is, unchanged, so a script may end its silence twice", body = Silence),
        (status = 404, description = "No such silence", body = ErrorBody),
    )
)]
/// `DELETE /api/v1/silences/{id}`: ends (expires) a silence now, so the alerts it held
/// back notify again at the next evaluation.
pub async fn end(
    State(db): State<Db>,
    Extension(token): Extension<AgentToken>,
    from: Option<Extension<ClientAddress>>,
    Path(id): Path<String>,
) -> Result<Json<Silence>, ApiError> {
    token.require(Scope::Alerts)?;
    let by = format!("token:{}", token.name);
    match silences::end(&db, &id, &by).await {
        Ok(silence) => {
            let source = from.map(|Extension(ClientAddress(ip))| ip.to_string());
            let entry = audit::NewEntry {
                actor: Some(&by),
                action: action::SILENCE_ENDED,
                target: Some(&silence.id),
                detail: Some(&format!("{}: {}", silence.scope(), silence.reason)),
                source: source.as_deref(),
            };
            audit::record(&db, entry).await?;
            Ok(Json(silence))
        }
        // Over already (ended by someone, or past its end): nothing to do.
        Err(store::StoreError::Conflict(_)) => get(State(db), Extension(token), Path(id)).await,
        Err(e) => Err(e.into()),
    }
}
