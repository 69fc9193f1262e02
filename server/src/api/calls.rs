//! Guarded calls for agents (scope `calls`): ask before a tool with a side effect runs,
//! report after it ran. The execution ledger behind it is `app::storage::ledger`; the
//! rules are `app::ledger`.
//!
//! `POST /api/v1/calls`, `GET /api/v1/calls/{id}?wait=SECONDS`,
//! `POST /api/v1/calls/{id}/complete`.

use super::{AgentToken, ApiError, ErrorBody};
use app::access::Scope;
use app::approvals::payload::ValidRequest;
use app::escalations::request::ValidEscalation;
use app::escalations::{EscalationReason, RemainingItem};
use app::ingest::redact::Redactor;
use app::ledger::answer::Step;
use app::ledger::key::derive_key;
use app::ledger::request::{CallRequest, Completion, ValidCall};
use app::ledger::rules::{call_rule, key_rule};
use app::ledger::{Answer, EntryState, LedgerEntry};
use app::services::approval_hub::ApprovalHub;
use app::storage::{approvals, escalations, ledger, policies, Db, StoreError};
use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::{Extension, Json};
use chrono::Utc;
use serde::Serialize;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// What the agent is told, with the entry it concerns.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct CallAnswer {
    /// proceed, already_done, in_progress, outcome_unknown, approval_required or denied.
    pub answer: Answer,
    pub call: LedgerEntry,
    /// With `proceed` after an approver edited the arguments: run these, not the ones
    /// asked with (their hash is what was approved).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approved_arguments: Option<serde_json::Value>,
    /// The approver's message to the agent (with a denial or an edit), or the denial's
    /// reason.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl CallAnswer {
    /// The answer with what the call's approval says to the agent.
    async fn with_approval(db: &Db, answer: Answer, call: LedgerEntry) -> Result<CallAnswer, ApiError> {
        let mut out = CallAnswer { answer, call, approved_arguments: None, message: None };
        let Some(id) = out.call.approval_id.clone() else { return Ok(out) };
        if !matches!(answer, Answer::Proceed | Answer::Denied) {
            return Ok(out);
        }
        if let Some(a) = approvals::get(db, &id).await? {
            if a.status == app::approvals::ApprovalStatus::ApprovedWithChanges && answer == Answer::Proceed {
                out.approved_arguments = serde_json::from_str(&a.arguments).ok();
            }
            out.message = a.respond.or(if answer == Answer::Denied { a.reason } else { None });
        }
        Ok(out)
    }
}

fn answer_of(step: Step) -> Answer {
    match step {
        Step::Start => Answer::Proceed,
        Step::AskApproval => Answer::ApprovalRequired,
        Step::Tell(answer) => answer,
        Step::Deny => Answer::Denied,
    }
}

/// Shared by the handlers: what they need besides the database.
#[derive(Clone)]
pub struct CallContext {
    pub hub: ApprovalHub,
    pub webhooks: Arc<Vec<app::notify::WebhookTarget>>,
    pub redactor: Arc<Redactor>,
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
/// `POST /api/v1/calls`: ask before running a tool with a side effect.
pub async fn ask(
    State(db): State<Db>,
    Extension(token): Extension<AgentToken>,
    Extension(ctx): Extension<CallContext>,
    body: Result<Json<CallRequest>, JsonRejection>,
) -> Result<Json<CallAnswer>, ApiError> {
    token.require(Scope::Calls)?;
    let Json(request) = body.map_err(|e| ApiError::BadRequest(format!("invalid call: {}", e.body_text())))?;
    let call = request.validate().map_err(ApiError::BadRequest)?;
    let policy = policies::for_tool(&db, &call.tool).await?;
    let key = match &call.idempotency_key {
        Some(key) => key.clone(),
        None => derive_key(&call.run_id, call.step_index, &call.tool, &call.arguments, &key_rule(policy.as_ref())),
    };
    let mut stored = call.arguments.clone();
    ctx.redactor.redact_strings(&mut stored);
    let rule = call_rule(policy.as_ref());
    let asked = ledger::ask(&db, &call, &key, &stored, &rule, Some(token.id)).await?;
    let mut answer = answer_of(asked.step);
    let mut entry = follow_up(&db, &ctx, &token, asked.entry, Some(&call)).await?;
    // A rule may have decided the approval as it was filed: answer with that decision now
    // rather than sending the agent into a wait.
    if entry.state == EntryState::AwaitingApproval {
        if let Some(id) = entry.approval_id.as_deref() {
            if approvals::get(&db, id).await?.is_some_and(|a| a.status.is_final()) {
                let asked = ledger::ask(&db, &call, &key, &stored, &rule, Some(token.id)).await?;
                answer = answer_of(asked.step);
                entry = follow_up(&db, &ctx, &token, asked.entry, Some(&call)).await?;
            }
        }
    }
    tracing::info!(call = %entry.id, run = %entry.run_id, tool = %entry.tool, %answer, "guarded call asked");
    Ok(Json(CallAnswer::with_approval(&db, answer, entry).await?))
}

/// What an answer needs besides the entry: the approval request for a call that waits
/// for one (filed here, after the entry is committed, and found again by its key if a
/// crash came between), and the escalation for an unknown outcome.
async fn follow_up(
    db: &Db,
    ctx: &CallContext,
    token: &AgentToken,
    entry: LedgerEntry,
    call: Option<&ValidCall>,
) -> Result<LedgerEntry, ApiError> {
    if entry.state == EntryState::AwaitingApproval && entry.approval_id.is_none() {
        let arguments = call.map(|c| c.arguments.clone()).unwrap_or_else(|| entry.arguments.clone());
        let request = ValidRequest {
            run_id: entry.run_id.clone(),
            step_index: Some(entry.step_index),
            tool: entry.tool.clone(),
            stored_arguments: entry.arguments.clone(),
            arguments,
            display: Vec::new(),
            // One approval per attempt of this call, found again if filing is repeated.
            idempotency_key: Some(format!("{}:{}", entry.id, entry.attempts)),
            expires_in: None,
            agent: None,
        };
        let requester = approvals::Requester { name: &token.name, token_id: Some(token.id) };
        let (approval, created) = app::services::approvals::file(db, &request, requester, &ctx.webhooks).await?;
        if created {
            ctx.hub.announce(db, &approval.id).await;
        }
        ledger::link_approval(db, &entry.id, &approval.id).await?;
        return reread(db, &entry.id).await;
    }
    if entry.state == EntryState::Unknown && entry.escalation_id.is_none() {
        let escalation = open_escalation(db, &entry).await?;
        ledger::link_escalation(db, &entry.id, &escalation).await?;
        return reread(db, &entry.id).await;
    }
    Ok(entry)
}

/// Opens (or joins) the run's escalation for a call whose outcome is unknown.
async fn open_escalation(db: &Db, entry: &LedgerEntry) -> Result<String, ApiError> {
    let fact = format!(
        "{} (step {}, natural key {}) started at {} and never reported whether it happened: retrying may do \
         it twice, not retrying may lose it",
        entry.tool,
        entry.step_index,
        entry.natural_key,
        entry.started_at.format("%Y-%m-%d %H:%M:%S UTC")
    );
    let body = serde_json::json!({"call": entry.id, "key": entry.idempotency_key});
    let escalation = ValidEscalation {
        run_id: entry.run_id.clone(),
        reason: EscalationReason::OutcomeUnknown,
        reason_text: None,
        what_was_done: Vec::new(),
        what_remains: vec![RemainingItem {
            description: format!(
                "Settle {} (step {}): did it happen? Look for natural key {} where it acts",
                entry.tool, entry.step_index, entry.natural_key
            ),
            done: false,
            done_by: None,
        }],
        blocking_fact: Some(fact),
        idempotency_key: Some(format!("ledger:{}", entry.id)),
        agent: None,
        body_sha256: app::approvals::payload::sha256_hex(&body.to_string()),
        opened_by: app::escalations::request::OpenedBy::Ledger,
    };
    match escalations::file(db, &escalation, "flightdeck ledger").await {
        Ok((e, _)) => Ok(e.id),
        // The run already has an open escalation from the agent: the unknown call joins it.
        Err(StoreError::Conflict(_)) => {
            let open = escalations::for_run(db, &entry.run_id).await?.into_iter().find(|e| e.open);
            let Some(open) = open else {
                return Err(ApiError::Unprocessable("could not open an escalation for the unknown outcome".into()));
            };
            escalations::event(db, &open.id, None, "note", Some(&escalation.blocking_fact.unwrap_or_default())).await?;
            Ok(open.id)
        }
        Err(other) => Err(other.into()),
    }
}

async fn reread(db: &Db, id: &str) -> Result<LedgerEntry, ApiError> {
    ledger::get(db, id).await?.map(|(e, _)| e).ok_or_else(|| ApiError::NotFound(format!("no guarded call `{id}`")))
}

#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct WaitParams {
    /// Seconds to wait while the answer is approval_required, in_progress or
    /// outcome_unknown (0 = answer now; at most 60).
    pub wait: Option<u64>,
}

#[utoipa::path(
    get,
    path = "/calls/{id}",
    tag = "calls",
    security(("bearer" = [])),
    params(("id" = String, Path, description = "The call's id"), WaitParams),
    responses(
        (status = 200, description = "The answer now (asked again, so an approval given meanwhile is used)", body = CallAnswer),
        (status = 403, description = "Another token asked for this call", body = ErrorBody),
        (status = 404, description = "No such call", body = ErrorBody),
    )
)]
/// `GET /api/v1/calls/{id}?wait=SECONDS`: asks again for the call's key (an approval
/// given meanwhile turns `approval_required` into `proceed`), waiting up to `wait` seconds
/// while the answer is one to wait on.
pub async fn get(
    State(db): State<Db>,
    Extension(token): Extension<AgentToken>,
    Extension(ctx): Extension<CallContext>,
    Path(id): Path<String>,
    params: Result<Query<WaitParams>, QueryRejection>,
) -> Result<Json<CallAnswer>, ApiError> {
    token.require(Scope::Calls)?;
    let Query(params) = params
        .map_err(|e| ApiError::BadRequest(format!("invalid query: {} (`wait` is whole seconds)", e.body_text())))?;
    let deadline =
        Instant::now() + Duration::from_secs(params.wait.unwrap_or(0).min(super::approvals::MAX_WAIT_SECONDS));
    let mut changes = ctx.hub.subscribe();
    // Asking again is a write transaction; between asks the loop only reads the entry and
    // asks again when something that could change the answer happened: the entry moved
    // (a report, a settle), its approval was decided, a started attempt passed its timeout,
    // or (for decisions this instance did not announce, such as an expiry) a few seconds
    // went by.
    let mut asked_at: Option<(Instant, LedgerEntry)> = None;
    let mut approval_decided = false;
    loop {
        let (entry, owner) =
            ledger::get(&db, &id).await?.ok_or_else(|| ApiError::NotFound(format!("no guarded call `{id}`")))?;
        if owner.is_some_and(|o| o != token.id) {
            return Err(ApiError::Forbidden("another token asked for this call".into()));
        }
        let policy = policies::for_tool(&db, &entry.tool).await?;
        let rule = call_rule(policy.as_ref());
        let waiting_state =
            matches!(entry.state, EntryState::AwaitingApproval | EntryState::Started | EntryState::Unknown);
        let ask_again = match &asked_at {
            None => true,
            Some((at, seen)) => {
                seen.state != entry.state
                    || seen.attempts != entry.attempts
                    || seen.approval_id != entry.approval_id
                    || approval_decided
                    || at.elapsed() >= REASK_AT_LEAST_EVERY
                    || (entry.state == EntryState::Started
                        && Utc::now().timestamp_millis() - entry.started_at.timestamp_millis() > rule.timeout_ms)
            }
        };
        // Only a waiting entry is asked again: asking a succeeded one would count a dedupe.
        let (answer, entry) = if waiting_state && ask_again {
            let call = ValidCall {
                run_id: entry.run_id.clone(),
                step_index: entry.step_index,
                tool: entry.tool.clone(),
                arguments: entry.arguments.clone(),
                idempotency_key: Some(entry.idempotency_key.clone()),
            };
            let asked = ledger::ask(&db, &call, &entry.idempotency_key, &entry.arguments, &rule, owner).await?;
            let answer = answer_of(asked.step);
            let entry = follow_up(&db, &ctx, &token, asked.entry, None).await?;
            asked_at = Some((Instant::now(), entry.clone()));
            approval_decided = false;
            (answer, entry)
        } else {
            (entry.standing_answer(), entry)
        };
        let waiting = matches!(answer, Answer::ApprovalRequired | Answer::InProgress | Answer::OutcomeUnknown);
        if !waiting || Instant::now() >= deadline {
            return Ok(Json(CallAnswer::with_approval(&db, answer, entry).await?));
        }
        // Woken by a decision on the call's approval, else re-read every half second.
        let wake = deadline.min(Instant::now() + Duration::from_millis(500));
        let approval = entry.approval_id.clone();
        tokio::select! {
            _ = tokio::time::sleep_until(wake) => {}
            changed = changes.recv() => {
                match (changed, approval) {
                    (Ok(changed), Some(approval)) if changed == approval => approval_decided = true,
                    // Missed announcements may include ours.
                    (Err(tokio::sync::broadcast::error::RecvError::Lagged(_)), _) => approval_decided = true,
                    _ => tokio::time::sleep_until(wake).await,
                }
            }
        }
    }
}

/// How often a waiting call is asked again even when nothing seen changed: an approval
/// can expire, or be decided on another instance, without an announcement here.
const REASK_AT_LEAST_EVERY: Duration = Duration::from_secs(5);

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
/// `POST /api/v1/calls/{id}/complete`: how the call ended. The response to cache is
/// redacted and size-capped (64 KiB of JSON).
pub async fn complete(
    State(db): State<Db>,
    Extension(token): Extension<AgentToken>,
    Extension(ctx): Extension<CallContext>,
    Path(id): Path<String>,
    body: Result<Json<Completion>, JsonRejection>,
) -> Result<Json<LedgerEntry>, ApiError> {
    token.require(Scope::Calls)?;
    let Json(report) = body.map_err(|e| ApiError::BadRequest(format!("invalid report: {}", e.body_text())))?;
    let report = report.validate().map_err(ApiError::BadRequest)?;
    let (_, owner) =
        ledger::get(&db, &id).await?.ok_or_else(|| ApiError::NotFound(format!("no guarded call `{id}`")))?;
    if owner.is_some_and(|o| o != token.id) {
        return Err(ApiError::Forbidden("another token asked for this call; only it may report the outcome".into()));
    }
    let response = report.response.clone().map(|mut r| {
        ctx.redactor.redact_strings(&mut r);
        r
    });
    let entry = ledger::complete(&db, &id, &report, response.as_ref()).await?;
    tracing::info!(call = %entry.id, state = %entry.state, "guarded call completed");
    Ok(Json(entry))
}
