//! The agent-facing REST API under `/api/v1`, authenticated with bearer tokens.
//! Later features add their resources here, one module each.

pub mod approvals;
mod auth;
mod error;
pub mod escalations;
mod openapi;
pub mod runs;

pub use auth::{AgentToken, TokenAuth};
pub use error::ApiError;

use app::approvals::hub::ApprovalHub;
use app::storage::Db;
use axum::middleware::from_fn_with_state;
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use serde_json::json;

pub fn router<S: Clone + Send + Sync + 'static>(
    db: Db,
    approval_hub: ApprovalHub,
    webhooks: std::sync::Arc<Vec<app::notify::WebhookTarget>>,
) -> Router<S> {
    let auth = TokenAuth::new(db.clone());
    let authenticated = Router::new()
        .route("/token", get(describe_token))
        .route("/runs", get(runs::list))
        .route("/runs/{run_id}", get(runs::get))
        .route("/runs/{run_id}/replay", get(runs::replay))
        .route("/approvals", post(approvals::create))
        .route("/approvals/{id}", get(approvals::get))
        .route("/approvals/{id}/cancel", post(approvals::cancel))
        .route("/escalations", post(escalations::file))
        .route("/escalations/{id}", get(escalations::get))
        .fallback(not_found)
        .layer(Extension(approval_hub))
        .layer(Extension(webhooks))
        .layer(from_fn_with_state(auth, auth::require_token))
        .with_state(db);
    Router::new().route("/openapi.json", get(openapi::document)).merge(authenticated)
}

/// `GET /api/v1/token`: what the calling token is and may do, so an agent can check its
/// configuration before it needs it.
async fn describe_token(Extension(token): Extension<AgentToken>) -> Json<serde_json::Value> {
    Json(json!({
        "id": token.id,
        "name": token.name,
        "scopes": token.scopes,
    }))
}

async fn not_found() -> ApiError {
    ApiError::NotFound("no such API endpoint; see /api/v1/openapi.json".into())
}
