//! The one state of the web server: server functions and page renders reach it through
//! `use_context`, the agent API's handlers through `State` (each part by `FromRef`).

use crate::services::approval_hub::ApprovalHub;
use axum::extract::FromRef;
use domain::notify::Notifications;
use domain::redact::Redactor;
use leptos::config::LeptosOptions;
use std::sync::Arc;
use store::rules::RulesCache;
use store::Db;

#[derive(Debug, Clone)]
pub struct AppState {
    pub db: Db,
    pub leptos_options: LeptosOptions,
    /// Wakes agents waiting on approval decisions (shared with the agent API).
    pub approvals: ApprovalHub,
    /// The configured webhook targets and alert routes: whoever records an approval
    /// request, escalation or alert change passes the right targets to
    /// `storage::webhooks::enqueue`.
    pub notifications: Arc<Notifications>,
    /// The configured redaction rules, for what agents send outside OTLP (approval
    /// payloads, escalation texts).
    pub redactor: Arc<Redactor>,
    /// Tool policies and prices as derivation uses them; refreshed by whoever changes one.
    pub rules: RulesCache,
}

impl AppState {
    /// The state for `db` with nothing configured: no webhook targets, no redaction rules,
    /// empty caches (tests and benchmarks; `serve` fills them from its configuration).
    pub fn unconfigured(db: Db, leptos_options: LeptosOptions) -> AppState {
        AppState {
            db,
            leptos_options,
            approvals: Default::default(),
            notifications: Default::default(),
            redactor: Default::default(),
            rules: Default::default(),
        }
    }
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

impl FromRef<AppState> for ApprovalHub {
    fn from_ref(state: &AppState) -> Self {
        state.approvals.clone()
    }
}

impl FromRef<AppState> for RulesCache {
    fn from_ref(state: &AppState) -> Self {
        state.rules.clone()
    }
}

impl FromRef<AppState> for Arc<Redactor> {
    fn from_ref(state: &AppState) -> Self {
        state.redactor.clone()
    }
}

impl FromRef<AppState> for Arc<Notifications> {
    fn from_ref(state: &AppState) -> Self {
        state.notifications.clone()
    }
}

/// What every path into the gate needs besides the database.
impl FromRef<AppState> for crate::services::calls::CallsContext {
    fn from_ref(state: &AppState) -> Self {
        crate::services::calls::CallsContext {
            hub: state.approvals.clone(),
            webhooks: Arc::new(state.notifications.targets.clone()),
            redactor: state.redactor.clone(),
        }
    }
}
