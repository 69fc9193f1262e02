//! The state every server function and page render can reach through `use_context`.

use crate::approvals::hub::ApprovalHub;
use crate::storage::Db;
use axum::extract::FromRef;
use leptos::config::LeptosOptions;

#[derive(Debug, Clone)]
pub struct AppState {
    pub db: Db,
    pub leptos_options: LeptosOptions,
    /// Wakes agents waiting on approval decisions (shared with the agent API).
    pub approvals: ApprovalHub,
}

impl FromRef<AppState> for LeptosOptions {
    fn from_ref(state: &AppState) -> Self {
        state.leptos_options.clone()
    }
}

impl FromRef<AppState> for Db {
    fn from_ref(state: &AppState) -> Self {
        state.db.clone()
    }
}
