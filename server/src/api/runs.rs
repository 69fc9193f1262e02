//! `GET /api/v1/runs` and `GET /api/v1/runs/{run_id}` (scope `read`): the canonical run
//! model for scripts, dashboards and our own checks.

use super::{AgentToken, ApiError, ErrorBody};
use axum::extract::{Path, Query, State};
use axum::{Extension, Json};
use domain::access::Scope;
use domain::canonical::QueryParams;
use domain::canonical::{RunDetail, RunSummary};
use serde::Serialize;
use store::runs;
use store::Db;

/// A page of runs, newest first unless `sort` says otherwise.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct RunList {
    pub runs: Vec<RunSummary>,
    /// Pass as `cursor` for the next page; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// Present when a search that filters or sorts read only the newest 2,500 runs that
    /// called the tool: the start of the oldest of them. Pass it as `until` to search the
    /// runs before.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub searched_since: Option<chrono::DateTime<chrono::Utc>>,
    /// Present when, without a search term, no one index answered the filters together
    /// (two of agent, trigger, flag and model; the model; one of them with a reason or
    /// another sort) and the list read only the newest 2,500 runs of one of them: the
    /// start of the oldest of those. Pass it as `until` for the runs before.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filtered_since: Option<chrono::DateTime<chrono::Utc>>,
}

/// `GET /api/v1/runs`: a page of runs matching the filters, with the cursor of the next.
#[utoipa::path(
    get,
    path = "/runs",
    tag = "runs",
    security(("bearer" = [])),
    params(QueryParams),
    responses(
        (status = 200, description = "A page of runs", body = RunList),
        (status = 400, description = "A parameter is invalid; the message names it", body = ErrorBody),
    )
)]
pub async fn list(
    State(db): State<Db>,
    Extension(token): Extension<AgentToken>,
    params: Result<Query<QueryParams>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<RunList>, ApiError> {
    token.require(Scope::Read)?;
    let Query(params) = params.map_err(|e| ApiError::BadRequest(format!("invalid query: {}", e.body_text())))?;
    let query = params.into_query(chrono::Utc::now()).map_err(ApiError::BadRequest)?;
    let page = runs::list(&db, &query).await?;
    Ok(Json(RunList {
        runs: page.runs,
        next_cursor: page.next.map(|c| c.encode()),
        searched_since: page.searched.map(|w| chrono::DateTime::from_timestamp_nanos(w.since_ns)),
        filtered_since: page.filtered.and_then(|w| w.since_ns).map(chrono::DateTime::from_timestamp_nanos),
    }))
}

/// `GET /api/v1/runs/{run_id}`: one run with its steps, tool calls and duplicate side effects.
#[utoipa::path(
    get,
    path = "/runs/{run_id}",
    tag = "runs",
    security(("bearer" = [])),
    params(("run_id" = String, Path, description = "The run's id")),
    responses(
        (status = 200, description = "The run", body = RunDetail),
        (status = 404, description = "No such run", body = ErrorBody),
    )
)]
pub async fn get(
    State(db): State<Db>,
    Extension(token): Extension<AgentToken>,
    State(rules): State<store::rules::RulesCache>,
    Path(run_id): Path<String>,
) -> Result<Json<RunDetail>, ApiError> {
    token.require(Scope::Read)?;
    runs::get_with(&db, &run_id, &rules.current())
        .await?
        .map(Json)
        .ok_or_else(|| ApiError::NotFound(format!("no run `{run_id}`")))
}

#[utoipa::path(
    get,
    path = "/runs/{run_id}/replay",
    tag = "runs",
    security(("bearer" = [])),
    params(("run_id" = String, Path, description = "The run's id")),
    responses(
        (status = 200, description = "The replay fixture", body = domain::canonical::ReplayFixture),
        (status = 404, description = "No such run, or none of its bodies were retained", body = ErrorBody),
    )
)]
/// `GET /api/v1/runs/{run_id}/replay`: the run's replay fixture (scope `read`).
pub async fn replay(
    State(db): State<Db>,
    Extension(token): Extension<AgentToken>,
    Path(run_id): Path<String>,
) -> Result<Json<domain::canonical::ReplayFixture>, ApiError> {
    token.require(Scope::Read)?;
    fixture(&db, &run_id).await.map(Json)
}

/// The fixture, or a 404 that says whether the run or its bodies are missing.
pub async fn fixture(db: &Db, run_id: &str) -> Result<domain::canonical::ReplayFixture, ApiError> {
    match runs::replay_fixture(db, run_id).await? {
        Some(f) => Ok(f),
        None if runs::get(db, run_id).await?.is_some() => {
            Err(ApiError::NotFound(format!("run `{run_id}` has no retained bodies to replay (see the body policy)")))
        }
        None => Err(ApiError::NotFound(format!("no run `{run_id}`"))),
    }
}
