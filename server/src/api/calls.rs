//! Guarded calls for agents (scope `calls`): ask before a tool with a side effect runs,
//! report after it ran. The flow is `app::services::calls`; the ledger's rules
//! `domain::ledger`; its storage `store::ledger`.
//!
//! `POST /api/v1/calls` (the only request that can start an attempt),
//! `GET /api/v1/calls/{id}?wait=SECONDS` (a read), `POST /api/v1/calls/{id}/complete`.

use super::{AgentToken, ApiError, ErrorBody};
use app::services::calls::{self, CallAnswer, CallError, Caller, CallsContext};
use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::{Extension, Json};
use domain::access::Scope;
use domain::ledger::request::{CallRequest, Completion};
use domain::ledger::LedgerEntry;
use std::time::Duration;
use store::Db;

impl From<CallError> for ApiError {
    fn from(err: CallError) -> Self {
        match err {
            CallError::NotYours(why) => ApiError::Forbidden(why),
            CallError::Store(e) => e.into(),
        }
    }
}

fn caller(token: &AgentToken) -> Caller<'_> {
    Caller { token_id: token.id, token_name: &token.name }
}

#[utoipa::path(
    post,
    path = "/calls",
    tag = "calls",
    security(("bearer" = [])),
    request_body = CallRequest,
    responses(
        (status = 200, description = "The answer: proceed, already_done, in_progress, outcome_unknown, approval_required or denied", body = CallAnswer),
        (status = 400, description = "A field is missing or invalid", body = ErrorBody),
    )
)]
/// `POST /api/v1/calls`: ask before running a tool with a side effect. With `wait`, an
/// answer to wait on (approval_required, in_progress, outcome_unknown) holds the request
/// up to that many seconds (at most 60) and is answered as soon as it changes; an agent
/// repeats the same ask until the answer is final. The only request that can start an
/// attempt.
pub async fn ask(
    State(db): State<Db>,
    Extension(token): Extension<AgentToken>,
    State(ctx): State<CallsContext>,
    body: Result<Json<CallRequest>, JsonRejection>,
) -> Result<Json<CallAnswer>, ApiError> {
    token.require(Scope::Calls)?;
    asked(&db, &token, &ctx, body).await
}

/// An ask, whatever the scope that let it in (`calls`, or `mcp` for the gateway).
pub(crate) async fn asked(
    db: &Db,
    token: &AgentToken,
    ctx: &CallsContext,
    body: Result<Json<CallRequest>, JsonRejection>,
) -> Result<Json<CallAnswer>, ApiError> {
    let Json(request) = body.map_err(|e| ApiError::BadRequest(format!("invalid call: {}", e.body_text())))?;
    let ask = request.validate().map_err(ApiError::BadRequest)?;
    let wait = Duration::from_secs(ask.wait_seconds);
    Ok(Json(calls::ask_waiting(db, ctx, caller(token), &ask, wait).await?))
}

#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct WaitParams {
    /// Seconds to wait for the answer to change while it is approval_required,
    /// in_progress or outcome_unknown (0 = answer now; at most 60).
    pub wait: Option<u64>,
}

#[utoipa::path(
    get,
    path = "/calls/{id}",
    tag = "calls",
    security(("bearer" = [])),
    params(("id" = String, Path, description = "The call's id"), WaitParams),
    responses(
        (status = 200, description = "What an ask would be told now (ask_again where an ask would start an attempt); never changes the ledger", body = CallAnswer),
        (status = 403, description = "Another token asked for this call", body = ErrorBody),
        (status = 404, description = "No such call", body = ErrorBody),
    )
)]
/// `GET /api/v1/calls/{id}?wait=SECONDS`: the call as it stands. A read: it never changes
/// the ledger, so where an ask would start an attempt (after a failure, a settled "it did
/// not happen", an approval granted and not yet used) it answers `ask_again`. With `wait`
/// it is held until the answer changes.
pub async fn get(
    State(db): State<Db>,
    Extension(token): Extension<AgentToken>,
    State(ctx): State<CallsContext>,
    Path(id): Path<String>,
    params: Result<Query<WaitParams>, QueryRejection>,
) -> Result<Json<CallAnswer>, ApiError> {
    token.require(Scope::Calls)?;
    let Query(params) = params
        .map_err(|e| ApiError::BadRequest(format!("invalid query: {} (`wait` is whole seconds)", e.body_text())))?;
    let wait = Duration::from_secs(params.wait.unwrap_or(0));
    Ok(Json(calls::read_waiting(&db, &ctx, caller(&token), &id, wait).await?))
}

#[utoipa::path(
    post,
    path = "/calls/{id}/complete",
    tag = "calls",
    security(("bearer" = [])),
    params(("id" = String, Path, description = "The call's id")),
    request_body = Completion,
    responses(
        (status = 200, description = "Recorded (a repeated identical report changes nothing)", body = LedgerEntry),
        (status = 400, description = "A field is missing or invalid", body = ErrorBody),
        (status = 403, description = "Another token asked for this call", body = ErrorBody),
        (status = 404, description = "No such call", body = ErrorBody),
        (status = 422, description = "The call was not started, or was reported with another outcome", body = ErrorBody),
    )
)]
/// `POST /api/v1/calls/{id}/complete`: how the call ended (`ok`, `error`, or `unknown`
/// when the caller lost track of it after it was sent). The response to cache is
/// redacted and size-capped (64 KiB of JSON).
pub async fn complete(
    State(db): State<Db>,
    Extension(token): Extension<AgentToken>,
    State(ctx): State<CallsContext>,
    Path(id): Path<String>,
    body: Result<Json<Completion>, JsonRejection>,
) -> Result<Json<LedgerEntry>, ApiError> {
    token.require(Scope::Calls)?;
    completed(&db, &token, &ctx, &id, body).await
}

/// A report, whatever the scope that let it in (`calls`, or `mcp` for the gateway).
pub(crate) async fn completed(
    db: &Db,
    token: &AgentToken,
    ctx: &CallsContext,
    id: &str,
    body: Result<Json<Completion>, JsonRejection>,
) -> Result<Json<LedgerEntry>, ApiError> {
    let Json(report) = body.map_err(|e| ApiError::BadRequest(format!("invalid report: {}", e.body_text())))?;
    let report = report.validate().map_err(ApiError::BadRequest)?;
    Ok(Json(calls::complete(db, ctx, caller(token), id, &report).await?))
}
