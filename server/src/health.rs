//! Liveness and readiness for load balancers and orchestrators.

use app::state::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde_json::{json, Value};

/// `GET /healthz`: the process is up and serving.
pub async fn healthz() -> &'static str {
    "ok\n"
}

/// How long readiness waits for the database. A stopped PostgreSQL can leave a new
/// connection waiting for the pool's whole acquire timeout; an orchestrator's probe
/// should hear "not ready" well before its own timeout instead.
pub const READINESS_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// `GET /readyz`: the database answers (within [`READINESS_TIMEOUT`]) and every migration
/// is applied.
pub async fn readyz(State(state): State<AppState>) -> (StatusCode, Json<Value>) {
    let ready = tokio::time::timeout(READINESS_TIMEOUT, state.db.is_ready())
        .await
        .unwrap_or_else(|_| Err(format!("the database did not answer within {READINESS_TIMEOUT:?}")));
    match ready {
        Ok(()) => (StatusCode::OK, Json(json!({"status": "ready", "database": state.db.backend_name()}))),
        Err(reason) => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"status": "not ready", "database": state.db.backend_name(), "reason": reason})),
        ),
    }
}
