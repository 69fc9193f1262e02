//! `GET /api/v1/runs` and `GET /api/v1/runs/{run_id}` (scope `read`): the canonical run
//! model for scripts, dashboards and our own checks.

use super::{AgentToken, ApiError};
use app::access::Scope;
use app::canonical::{RunDetail, RunSummary, TerminalReason};
use app::storage::runs::{self, Cursor, RunFlag, RunQuery};
use app::storage::Db;
use axum::extract::{Path, Query, State};
use axum::{Extension, Json};
use chrono::DateTime;
use serde::{Deserialize, Serialize};

/// Query parameters of the run list, all optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListParams {
    pub terminal_reason: Option<String>,
    pub agent: Option<String>,
    /// RFC 3339; runs that started at or after it.
    pub since: Option<String>,
    /// RFC 3339; runs that started before it.
    pub until: Option<String>,
    pub flag: Option<String>,
    pub cursor: Option<String>,
    /// 1 to 500, default 50.
    pub limit: Option<i64>,
}

#[derive(Debug, Serialize)]
pub struct RunList {
    pub runs: Vec<RunSummary>,
    /// Pass as `cursor` for the next page; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

fn time_ns(name: &str, value: &str) -> Result<i64, ApiError> {
    DateTime::parse_from_rfc3339(value)
        .ok()
        .and_then(|t| t.timestamp_nanos_opt())
        .ok_or_else(|| {
            ApiError::BadRequest(format!(
                "`{name}` must be an RFC 3339 time such as 2026-12-01T00:00:00Z, got `{value}`"
            ))
        })
}

impl ListParams {
    /// Checks every parameter, naming the first one that is wrong.
    pub fn into_query(self) -> Result<RunQuery, ApiError> {
        let terminal_reason = self
            .terminal_reason
            .map(|r| {
                TerminalReason::parse(&r).ok_or_else(|| {
                    ApiError::BadRequest(format!(
                        "unknown terminal_reason `{r}` (expected completed, step_limit, budget, error, escalated or running)"
                    ))
                })
            })
            .transpose()?;
        let limit = self.limit.unwrap_or(50);
        if !(1..=500).contains(&limit) {
            return Err(ApiError::BadRequest(format!(
                "`limit` must be between 1 and 500, got {limit}"
            )));
        }
        Ok(RunQuery {
            terminal_reason,
            agent: self.agent.filter(|a| !a.is_empty()),
            since_ns: self
                .since
                .as_deref()
                .map(|s| time_ns("since", s))
                .transpose()?,
            until_ns: self
                .until
                .as_deref()
                .map(|s| time_ns("until", s))
                .transpose()?,
            flag: self
                .flag
                .map(|f| f.parse::<RunFlag>().map_err(ApiError::BadRequest))
                .transpose()?,
            after: self
                .cursor
                .map(|c| Cursor::decode(&c).map_err(ApiError::BadRequest))
                .transpose()?,
            limit,
        })
    }
}

pub async fn list(
    State(db): State<Db>,
    Extension(token): Extension<AgentToken>,
    params: Result<Query<ListParams>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<RunList>, ApiError> {
    token.require(Scope::Read)?;
    let Query(params) =
        params.map_err(|e| ApiError::BadRequest(format!("invalid query: {}", e.body_text())))?;
    let page = runs::list(&db, &params.into_query()?).await?;
    Ok(Json(RunList {
        runs: page.runs,
        next_cursor: page.next.map(|c| c.encode()),
    }))
}

pub async fn get(
    State(db): State<Db>,
    Extension(token): Extension<AgentToken>,
    Path(run_id): Path<String>,
) -> Result<Json<RunDetail>, ApiError> {
    token.require(Scope::Read)?;
    runs::get(&db, &run_id)
        .await?
        .map(Json)
        .ok_or_else(|| ApiError::NotFound(format!("no run `{run_id}`")))
}
