//! The agent-facing REST API under `/api/v1`, authenticated with bearer tokens.
//! Later features add their resources here, one module each.

pub mod approvals;
mod auth;
pub mod calls;
mod error;
pub mod escalations;
pub mod mcp;
mod openapi;
pub mod replays;
pub mod runs;
pub mod silences;

pub use auth::{AgentToken, TokenAuth};
pub use error::{ApiError, ErrorBody};

use app::state::AppState;
use axum::http::Method;
use axum::middleware::from_fn_with_state;
use axum::routing::{delete, get, post, MethodRouter};
use axum::{Extension, Json, Router};
use domain::access::Scope;

/// One authenticated route of the API and the scope its handler requires (`None`: any
/// valid token). The access test walks this list, which is the one the router is built
/// from, so a route cannot be added without appearing in it.
#[derive(Debug, Clone)]
pub struct ApiRoute {
    pub method: Method,
    /// The path under `/api/v1`, with `{parameters}`.
    pub path: &'static str,
    pub scope: Option<Scope>,
}

type Entry = (Method, &'static str, Option<Scope>, MethodRouter<AppState>);

/// Every authenticated route: method, path, the scope its handler checks, the handler.
fn table() -> Vec<Entry> {
    use Method as M;
    vec![
        (M::GET, "/token", None, get(describe_token)),
        (M::GET, "/runs", Some(Scope::Read), get(runs::list)),
        (M::GET, "/runs/{run_id}", Some(Scope::Read), get(runs::get)),
        (M::GET, "/runs/{run_id}/replay", Some(Scope::Read), get(runs::replay)),
        (M::POST, "/approvals", Some(Scope::Approvals), post(approvals::create)),
        (M::GET, "/approvals/{id}", Some(Scope::Approvals), get(approvals::get)),
        (M::POST, "/approvals/{id}/cancel", Some(Scope::Approvals), post(approvals::cancel)),
        (M::POST, "/escalations", Some(Scope::Escalations), post(escalations::file)),
        (M::GET, "/escalations/{id}", Some(Scope::Escalations), get(escalations::get)),
        (M::POST, "/calls", Some(Scope::Calls), post(calls::ask)),
        (M::GET, "/calls/{id}", Some(Scope::Calls), get(calls::get)),
        (M::POST, "/calls/{id}/complete", Some(Scope::Calls), post(calls::complete)),
        (M::POST, "/silences", Some(Scope::Alerts), post(silences::create)),
        (M::GET, "/silences", Some(Scope::Alerts), get(silences::list)),
        (M::GET, "/silences/{id}", Some(Scope::Alerts), get(silences::get)),
        (M::DELETE, "/silences/{id}", Some(Scope::Alerts), delete(silences::end)),
        (M::POST, "/replays/results", Some(Scope::Replays), post(replays::record)),
        (M::POST, "/mcp/tools", Some(Scope::Mcp), post(mcp::tools)),
        (M::POST, "/mcp/calls", Some(Scope::Mcp), post(mcp::ask)),
        (M::POST, "/mcp/calls/{id}/complete", Some(Scope::Mcp), post(mcp::complete)),
        (M::POST, "/mcp/spans", Some(Scope::Mcp), post(mcp::spans)),
    ]
}

/// The authenticated routes with their scopes (see [`ApiRoute`]).
pub fn routes() -> Vec<ApiRoute> {
    table().into_iter().map(|(method, path, scope, _)| ApiRoute { method, path, scope }).collect()
}

/// The agent API under `/api/v1`, on the web server's one state: handlers take what they
/// need of it by `State` (`FromRef`), and the bearer token by `Extension<AgentToken>`.
pub fn router(state: &AppState) -> Router<AppState> {
    let auth = TokenAuth::new(state.db.clone());
    let authenticated = table()
        .into_iter()
        .fold(Router::new(), |router, (_, path, _, handler)| router.route(path, handler))
        .fallback(not_found)
        .layer(from_fn_with_state(auth, auth::require_token));
    Router::new().route("/openapi.json", get(openapi::document)).merge(authenticated)
}

/// What a token is and may do.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct TokenView {
    pub id: i64,
    pub name: String,
    pub scopes: Vec<Scope>,
}

/// `GET /api/v1/token`: what the calling token is and may do, so an agent can check its
/// configuration before it needs it (any scope).
#[utoipa::path(
    get,
    path = "/token",
    tag = "tokens",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The calling token", body = TokenView),
        (status = 401, description = "Missing, unknown or revoked token", body = ErrorBody),
    )
)]
pub async fn describe_token(Extension(token): Extension<AgentToken>) -> Json<TokenView> {
    Json(TokenView { id: token.id, name: token.name, scopes: token.scopes })
}

async fn not_found() -> ApiError {
    ApiError::NotFound("no such API endpoint; see /api/v1/openapi.json".into())
}
