//! What `flightdeck mcp proxy` needs of a Flightdeck server (scope `mcp`): the gate's
//! decision for the tools an upstream listed, the guarded-call ask and report (the same
//! service as `/calls`, so the same guarantees), and its spans, stored through the
//! ingest path. The HTTP gateway inside the server calls the same code in process.

use super::calls::{asked, completed};
use super::{AgentToken, ApiError, ErrorBody};
use crate::otlp::service::IngestError;
use crate::otlp::IngestService;
use app::services::calls::{CallAnswer, CallsContext};
use axum::body::Bytes;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::{Extension, Json};
use domain::access::Scope;
use domain::ledger::request::{CallRequest, Completion};
use domain::ledger::LedgerEntry;
use domain::mcp::{decide_all, Decision, ToolHints};
use serde::{Deserialize, Serialize};
use store::rules::RulesCache;
use store::Db;

/// One tool as its server listed it.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ListedTool {
    /// The tool's name on its server.
    pub name: String,
    /// Its MCP annotations (`readOnlyHint`, `destructiveHint`, `idempotentHint`).
    #[serde(default)]
    #[schema(value_type = Object)]
    pub annotations: Option<ToolHints>,
}

/// The tools of one server.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ListedTools {
    pub server: String,
    pub tools: Vec<ListedTool>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Decisions {
    pub decisions: Vec<Decision>,
}

/// The most tools one request may ask about.
const MAX_TOOLS: usize = 10_000;

#[utoipa::path(
    post,
    path = "/mcp/tools",
    tag = "mcp",
    security(("bearer" = [])),
    request_body = ListedTools,
    responses(
        (status = 200, description = "For each tool: `{server}/{tool}`, its class and where it came from (policy, annotations or nothing), its route (direct for read and none, ledger otherwise), whether it fails open, its upstream timeout", body = Decisions),
        (status = 400, description = "A field is missing or invalid", body = ErrorBody),
    )
)]
/// `POST /api/v1/mcp/tools`: what the MCP gateway does with these tools of a server,
/// under the tool policies in force.
pub async fn tools(
    Extension(token): Extension<AgentToken>,
    State(rules): State<RulesCache>,
    body: Result<Json<ListedTools>, JsonRejection>,
) -> Result<Json<Decisions>, ApiError> {
    token.require(Scope::Mcp)?;
    let Json(listed) = body.map_err(|e| ApiError::BadRequest(format!("invalid tool list: {}", e.body_text())))?;
    if !domain::mcp::valid_server_name(&listed.server) {
        return Err(ApiError::BadRequest("`server`: 1 to 64 letters, digits, `-`, `_` or `.`".into()));
    }
    if listed.tools.len() > MAX_TOOLS || listed.tools.iter().any(|t| t.name.is_empty() || t.name.len() > 256) {
        return Err(ApiError::BadRequest(format!("`tools`: at most {MAX_TOOLS}, each named with 1 to 256 characters")));
    }
    let tools: Vec<(String, ToolHints)> =
        listed.tools.into_iter().map(|t| (t.name, t.annotations.unwrap_or_default())).collect();
    Ok(Json(Decisions { decisions: decide_all(&rules.current().policies, &listed.server, &tools) }))
}

#[utoipa::path(
    post,
    path = "/mcp/calls",
    tag = "mcp",
    security(("bearer" = [])),
    request_body = CallRequest,
    responses(
        (status = 200, description = "As `POST /calls`", body = CallAnswer),
        (status = 400, description = "A field is missing or invalid", body = ErrorBody),
    )
)]
/// `POST /api/v1/mcp/calls`: the gateway's ask before a call, exactly `POST /calls`.
pub async fn ask(
    State(db): State<Db>,
    Extension(token): Extension<AgentToken>,
    State(ctx): State<CallsContext>,
    body: Result<Json<CallRequest>, JsonRejection>,
) -> Result<Json<CallAnswer>, ApiError> {
    token.require(Scope::Mcp)?;
    asked(&db, &token, &ctx, body).await
}

#[utoipa::path(
    post,
    path = "/mcp/calls/{id}/complete",
    tag = "mcp",
    security(("bearer" = [])),
    params(("id" = String, Path, description = "The call's id")),
    request_body = Completion,
    responses(
        (status = 200, description = "As `POST /calls/{id}/complete`", body = LedgerEntry),
        (status = 422, description = "The call was not started, or was reported with another outcome", body = ErrorBody),
    )
)]
/// `POST /api/v1/mcp/calls/{id}/complete`: the gateway's report, exactly
/// `POST /calls/{id}/complete`.
pub async fn complete(
    State(db): State<Db>,
    Extension(token): Extension<AgentToken>,
    State(ctx): State<CallsContext>,
    Path(id): Path<String>,
    body: Result<Json<Completion>, JsonRejection>,
) -> Result<Json<LedgerEntry>, ApiError> {
    token.require(Scope::Mcp)?;
    completed(&db, &token, &ctx, &id, body).await
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Recorded {
    pub accepted: usize,
    pub rejected: usize,
}

#[utoipa::path(
    post,
    path = "/mcp/spans",
    tag = "mcp",
    security(("bearer" = [])),
    request_body(content = Object, description = "An OTLP/JSON ExportTraceServiceRequest", content_type = "application/json"),
    responses(
        (status = 200, description = "Stored (committed) through the ingest path", body = Recorded),
        (status = 400, description = "Not OTLP/JSON, or no span could be stored", body = ErrorBody),
        (status = 503, description = "Ingest is busy or does not run in this process; retry", body = ErrorBody),
    )
)]
/// `POST /api/v1/mcp/spans`: the gateway's spans (OTLP/JSON), stored like an export with
/// the `ingest` scope: redacted, normalized, committed.
pub async fn spans(
    Extension(token): Extension<AgentToken>,
    ingest: Option<Extension<IngestService>>,
    body: Bytes,
) -> Result<Json<Recorded>, ApiError> {
    token.require(Scope::Mcp)?;
    let Some(Extension(ingest)) = ingest else {
        return Err(ApiError::Unavailable("this server stores no spans (no ingest service runs in it)".into()));
    };
    if body.len() > ingest.max_body_bytes() {
        return Err(ApiError::BadRequest(format!("at most {} bytes of spans per request", ingest.max_body_bytes())));
    }
    match ingest.receive(ingest::decode::Encoding::Json, &body, None, Some(&token)).await {
        Ok(outcome) => Ok(Json(Recorded { accepted: outcome.accepted, rejected: outcome.rejected })),
        Err(IngestError::Unavailable(m)) => Err(ApiError::Unavailable(m)),
        Err(e) => Err(ApiError::BadRequest(e.to_string())),
    }
}
