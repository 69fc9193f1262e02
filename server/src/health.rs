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

/// `GET /readyz`: the database answers and every migration is applied.
pub async fn readyz(State(state): State<AppState>) -> (StatusCode, Json<Value>) {
    match state.db.is_ready().await {
        Ok(()) => (StatusCode::OK, Json(json!({"status": "ready", "database": state.db.backend_name()}))),
        Err(reason) => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"status": "not ready", "database": state.db.backend_name(), "reason": reason})),
        ),
    }
}
