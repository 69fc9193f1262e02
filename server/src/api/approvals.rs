//! The approval API for agents (scope `approvals`): file a request for one tool call with
//! its exact arguments, long-poll for the decision, cancel it.
//!
//! `POST /api/v1/approvals`, `GET /api/v1/approvals/{id}?wait=SECONDS`,
//! `POST /api/v1/approvals/{id}/cancel`.

use super::{AgentToken, ApiError, ErrorBody};
use app::services::approval_hub::ApprovalHub;
use app::services::long_poll::{self, Check, Watch};
use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use chrono::{DateTime, Utc};
use domain::access::Scope;
use domain::approvals::payload::ApprovalRequest;
use domain::approvals::{Approval, ApprovalStatus};
use domain::redact::Redactor;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;
use store::{approvals, now_ms, Db};
use tokio::time::Instant;

/// The longest a single `GET ...?wait=` holds the connection; agents loop for longer.
pub const MAX_WAIT_SECONDS: u64 = 60;

/// What an agent sees of its request: the decision and the hash it is bound to. Every
/// status but `pending` is final.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct AgentView {
    pub id: String,
    pub status: ApprovalStatus,
    pub run_id: String,
    pub tool: String,
    /// SHA-256 of the canonical JSON (sorted keys, no whitespace) of
    /// `{"arguments": ..., "tool": ...}`: the payload the decision is bound to.
    pub payload_sha256: String,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    pub decided_by: Option<String>,
    pub decided_at: Option<DateTime<Utc>>,
    /// Why it was denied (or the approver's note).
    pub reason: Option<String>,
    /// With `approved_with_changes`: the arguments to run, as the approver edited them.
    /// `payload_sha256` is then their hash; running the original arguments is a violation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arguments: Option<serde_json::Value>,
    /// With `approved_with_changes`: the hash of what the agent asked for, and the changes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub original_payload_sha256: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub changes: Option<String>,
    /// A message from the approver to the agent (with a denial or an edit).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub respond: Option<String>,
    /// How many distinct people must approve, and how many have so far.
    pub required_approvals: i64,
    pub approvals_given: i64,
    /// The escalation opened when the request expired under an `escalate` policy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub escalation_id: Option<String>,
}

impl From<Approval> for AgentView {
    fn from(a: Approval) -> Self {
        AgentView {
            id: a.id,
            status: a.status,
            run_id: a.run_id,
            tool: a.tool,
            payload_sha256: a.payload_sha256,
            created_at: a.created_at,
            expires_at: a.expires_at,
            decided_by: a.decided_by,
            decided_at: a.decided_at,
            reason: a.reason,
            arguments: (a.status == ApprovalStatus::ApprovedWithChanges)
                .then(|| serde_json::from_str(&a.arguments).ok())
                .flatten(),
            original_payload_sha256: a.original_payload_sha256,
            changes: a.changes,
            respond: a.respond,
            approvals_given: if a.status.is_approved() {
                a.required_approvals.max(a.approved_by.len() as i64)
            } else {
                a.approved_by.len() as i64
            },
            required_approvals: a.required_approvals,
            escalation_id: a.escalation_id,
        }
    }
}

#[utoipa::path(
    post,
    path = "/approvals",
    tag = "approvals",
    security(("bearer" = [])),
    request_body = ApprovalRequest,
    responses(
        (status = 201, description = "Created, pending", body = AgentView),
        (status = 200, description = "The existing request with this idempotency key and payload", body = AgentView),
        (status = 400, description = "A field is missing or invalid", body = ErrorBody),
        (status = 422, description = "The idempotency key was used for a different payload", body = ErrorBody),
    )
)]
/// `POST /api/v1/approvals`: 201 with the new request, or 200 with the existing one when
/// the idempotency key and payload repeat an earlier request.
pub async fn create(
    State(db): State<Db>,
    Extension(token): Extension<AgentToken>,
    State(hub): State<ApprovalHub>,
    State(notifications): State<Arc<domain::notify::Notifications>>,
    State(redactor): State<Arc<Redactor>>,
    body: Result<Json<ApprovalRequest>, JsonRejection>,
) -> Result<(StatusCode, Json<AgentView>), ApiError> {
    token.require(Scope::Approvals)?;
    let Json(request) =
        body.map_err(|e| ApiError::BadRequest(format!("invalid approval request: {}", e.body_text())))?;
    let mut request = request.validate().map_err(ApiError::BadRequest)?;
    request.redact(&redactor);
    let requester = approvals::Requester { name: &token.name, token_id: Some(token.id) };
    // The tool's rules may decide it at once; otherwise the request and its
    // `approval.requested` webhook are committed together (the outbox), and delivery,
    // with retries, never delays the agent.
    let (approval, created) = app::services::approvals::file(&db, &request, requester, &notifications.targets).await?;
    if created {
        tracing::info!(approval = %approval.id, run = %approval.run_id, tool = %approval.tool, "approval requested");
        hub.announce(&db, &approval.id).await;
    }
    let status = if created { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, Json(approval.into())))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct WaitParams {
    /// Seconds to hold the request open while the request is pending (0 = answer now).
    pub wait: Option<u64>,
}

#[utoipa::path(
    get,
    path = "/approvals/{id}",
    tag = "approvals",
    security(("bearer" = [])),
    params(("id" = String, Path, description = "The request's id"), WaitParams),
    responses(
        (status = 200, description = "The request (final, or still pending when the wait ran out)", body = AgentView),
        (status = 404, description = "No such request", body = ErrorBody),
    )
)]
/// `GET /api/v1/approvals/{id}?wait=SECONDS`: answers at once when the request is final or
/// `wait` is absent; otherwise as soon as it is decided, expires or is cancelled, or when
/// the wait (at most [`MAX_WAIT_SECONDS`]) runs out, with the status then.
pub async fn get(
    State(db): State<Db>,
    Extension(token): Extension<AgentToken>,
    State(hub): State<ApprovalHub>,
    Path(id): Path<String>,
    params: Result<Query<WaitParams>, QueryRejection>,
) -> Result<Json<AgentView>, ApiError> {
    token.require(Scope::Approvals)?;
    let Query(params) = params.map_err(|e| {
        ApiError::BadRequest(format!("invalid query: {} (`wait` is a whole number of seconds)", e.body_text()))
    })?;
    let wait = Duration::from_secs(params.wait.unwrap_or(0).min(MAX_WAIT_SECONDS));
    wait_for_final(&db, &hub, &id, Instant::now() + wait).await.map(|a| Json(a.into()))
}

/// The request once final, or as it stands at `deadline`.
async fn wait_for_final(db: &Db, hub: &ApprovalHub, id: &str, deadline: Instant) -> Result<Approval, ApiError> {
    long_poll::hold(hub, deadline, || async move {
        let approval = current(db, hub, id).await?;
        if approval.status.is_final() {
            return Ok(Check::Done(approval));
        }
        let watch = Watch {
            ids: vec![id.to_string()],
            wake_at: Some(long_poll::instant_at(approval.expires_at.timestamp_millis())),
        };
        Ok(Check::Wait(approval, watch))
    })
    .await
}

/// The request, expiring it first if its time has passed (the expiry job may not have run yet).
async fn current(db: &Db, hub: &ApprovalHub, id: &str) -> Result<Approval, ApiError> {
    let found =
        approvals::get(db, id).await?.ok_or_else(|| ApiError::NotFound(format!("no approval request `{id}`")))?;
    if found.status == ApprovalStatus::Pending && found.expires_at.timestamp_millis() <= now_ms() {
        app::services::approvals::expire_due(db, hub).await?;
        return approvals::get(db, id).await?.ok_or_else(|| ApiError::NotFound(format!("no approval request `{id}`")));
    }
    Ok(found)
}

#[utoipa::path(
    post,
    path = "/approvals/{id}/cancel",
    tag = "approvals",
    security(("bearer" = [])),
    params(("id" = String, Path, description = "The request's id")),
    responses(
        (status = 200, description = "The request after cancelling (a final one unchanged)", body = AgentView),
        (status = 403, description = "Another token filed the request", body = ErrorBody),
        (status = 404, description = "No such request", body = ErrorBody),
    )
)]
/// `POST /api/v1/approvals/{id}/cancel`: the agent no longer needs the decision. A request
/// that is already final is returned unchanged (check `status`). Only the token that filed
/// the request may cancel it (an administrator can, from its page): another agent must not
/// be able to withdraw a request a person is about to decide.
pub async fn cancel(
    State(db): State<Db>,
    Extension(token): Extension<AgentToken>,
    State(hub): State<ApprovalHub>,
    Path(id): Path<String>,
) -> Result<Json<AgentView>, ApiError> {
    token.require(Scope::Approvals)?;
    let before =
        approvals::get(&db, &id).await?.ok_or_else(|| ApiError::NotFound(format!("no approval request `{id}`")))?;
    if !approvals::filed_by(&db, &id, token.id, &token.name).await? {
        return Err(ApiError::Forbidden(format!(
            "only the token that filed request `{id}` ({}) may cancel it; ask an administrator to cancel it \
             from its page",
            before.requested_by
        )));
    }
    let after = approvals::cancel(&db, &id, &format!("token:{}", token.name))
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("no approval request `{id}`")))?;
    if before.status != after.status {
        hub.announce(&db, &id).await;
    }
    Ok(Json(after.into()))
}
