//! Approvals for the browser: the inbox, the decided history, one request, and the
//! decision. Reading needs `viewer`; deciding needs the role the tool's policy names
//! (default `approver`), checked here on the server for every decision.

use crate::approvals::{Approval, Violation};
use crate::errors::AppError;
use chrono::{DateTime, Utc};
use leptos::prelude::*;
use serde::{Deserialize, Serialize};

/// The inbox: pending requests oldest first, and the choices for its filters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InboxView {
    pub pending: Vec<Approval>,
    pub agents: Vec<String>,
    pub tools: Vec<String>,
    /// The server's clock, for ages that match between server render and hydration.
    pub now: DateTime<Utc>,
}

/// One request as its page shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovalView {
    pub approval: Approval,
    /// Whether the signed-in user holds the role this request needs.
    pub can_decide: bool,
    /// Whether the signed-in user may cancel it (administrators, while it is pending).
    pub can_cancel: bool,
    /// Whether any span of the run has arrived yet (for the link to its trace).
    pub run_known: bool,
    pub now: DateTime<Utc>,
}

#[cfg(feature = "ssr")]
fn filter_text(value: Option<String>) -> Option<String> {
    value.map(|v| v.trim().to_string()).filter(|v| !v.is_empty())
}

#[server(prefix = "/fn", endpoint = "load_inbox")]
pub async fn load_inbox(agent: Option<String>, tool: Option<String>) -> Result<InboxView, AppError> {
    use super::ssr;
    use crate::storage::approvals::{self, ApprovalFilter};
    ssr::require(crate::access::Role::Viewer)?;
    let db = ssr::db()?;
    let filter = ApprovalFilter { agent: filter_text(agent), tool: filter_text(tool), ..Default::default() };
    let pending = approvals::pending(&db, &filter, 500).await?;
    let (agents, tools) = approvals::pending_facets(&db).await?;
    Ok(InboxView { pending, agents, tools, now: Utc::now() })
}

#[server(prefix = "/fn", endpoint = "load_approval_history")]
pub async fn load_approval_history(
    decided_by: Option<String>,
    status: Option<String>,
    tool: Option<String>,
) -> Result<Vec<Approval>, AppError> {
    use super::ssr;
    use crate::approvals::ApprovalStatus;
    use crate::storage::approvals::{self, ApprovalFilter};
    ssr::require(crate::access::Role::Viewer)?;
    let status = match filter_text(status) {
        None => None,
        Some(s) => match ApprovalStatus::parse(&s).filter(|s| s.is_final()) {
            Some(s) => Some(s),
            None => {
                return ssr::fail(AppError::Invalid(format!(
                    "unknown outcome `{s}` (expected approved, denied, expired or cancelled)"
                )))
            }
        },
    };
    let filter = ApprovalFilter { decided_by: filter_text(decided_by), status, tool: filter_text(tool), agent: None };
    Ok(approvals::decided(&ssr::db()?, &filter, 200).await?)
}

#[server(prefix = "/fn", endpoint = "load_approval")]
pub async fn load_approval(id: String) -> Result<ApprovalView, AppError> {
    use super::ssr;
    use crate::storage::{approvals, runs};
    let me = ssr::require(crate::access::Role::Viewer)?;
    let db = ssr::db()?;
    let Some(approval) = approvals::get(&db, &id).await? else {
        return ssr::fail(AppError::NotFound(format!("approval request `{id}`")));
    };
    let run_known = runs::get(&db, &approval.run_id).await?.is_some();
    let can_cancel = me.can(crate::access::Role::Admin);
    Ok(ApprovalView { can_decide: me.can(approval.required_role), can_cancel, approval, run_known, now: Utc::now() })
}

/// The number of pending requests, for the navigation.
#[server(prefix = "/fn", endpoint = "pending_approvals")]
pub async fn pending_approvals() -> Result<i64, AppError> {
    use super::ssr;
    ssr::require(crate::access::Role::Viewer)?;
    Ok(crate::storage::approvals::count_pending(&ssr::db()?).await?)
}

/// A run's approval requests and violations, for its page.
#[server(prefix = "/fn", endpoint = "load_run_approvals")]
pub async fn load_run_approvals(run_id: String) -> Result<(Vec<Approval>, Vec<Violation>), AppError> {
    use super::ssr;
    use crate::storage::approvals;
    ssr::require(crate::access::Role::Viewer)?;
    let db = ssr::db()?;
    Ok((approvals::for_run(&db, &run_id).await?, approvals::violations_for_run(&db, &run_id).await?))
}

/// Approves or denies request `id`. `payload_sha256` is the hash of the payload the
/// approver was shown: a decision on anything else is refused, as is one on a request that
/// is no longer pending (the message says who decided first) or by someone without the
/// role the tool's policy names. Denying needs a reason. Every decision, and every refused
/// one, goes to the audit log.
#[server(prefix = "/fn", endpoint = "decide_approval")]
pub async fn decide_approval(
    id: String,
    decision: String,
    payload_sha256: String,
    #[server(default)] reason: Option<String>,
) -> Result<Approval, AppError> {
    use super::ssr;
    use crate::storage::approvals::{self, Decision};
    use crate::storage::audit::action;
    use crate::storage::StoreError;

    let me = ssr::require(crate::access::Role::Viewer)?;
    let db = ssr::db()?;
    let decision = match decision.as_str() {
        "approve" => Decision::Approve,
        "deny" => Decision::Deny,
        other => return ssr::fail(AppError::Invalid(format!("unknown decision `{other}` (expected approve or deny)"))),
    };
    let reason = filter_text(reason);
    if decision == Decision::Deny && reason.is_none() {
        return ssr::fail(AppError::Invalid("a denial needs a reason, for the agent and for the record".into()));
    }
    if reason.as_ref().is_some_and(|r| r.len() > 2000) {
        return ssr::fail(AppError::Invalid("the reason may have at most 2000 characters".into()));
    }
    let Some(request) = approvals::get(&db, &id).await? else {
        return ssr::fail(AppError::NotFound(format!("approval request `{id}`")));
    };
    if !me.can(request.required_role) {
        ssr::audit(&db, &me, action::APPROVAL_DECISION_REFUSED, &id, Some("lacks the required role")).await?;
        return ssr::fail(AppError::Forbidden(request.required_role.to_string()));
    }
    let (act, status) = match decision {
        Decision::Approve => (action::APPROVAL_APPROVED, crate::approvals::ApprovalStatus::Approved),
        Decision::Deny => (action::APPROVAL_DENIED, crate::approvals::ApprovalStatus::Denied),
    };
    let detail = format!(
        "{} {} in run {} (payload sha256 {}){}",
        request.tool,
        status,
        request.run_id,
        request.payload_sha256,
        reason.as_deref().map(|r| format!("; reason: {r}")).unwrap_or_default()
    );
    let source = ssr::source();
    let entry = crate::storage::audit::NewEntry {
        actor: Some(&me.username),
        action: act,
        target: Some(&id),
        detail: Some(&detail),
        source: source.as_deref(),
    };
    // The decision and its audit entry are one transaction.
    let decided =
        approvals::decide(&db, &id, decision, payload_sha256.trim(), &me.username, reason.as_deref(), Some(&entry))
            .await;
    match decided {
        Ok(decided) => {
            if let Some(state) = use_context::<crate::state::AppState>() {
                state.approvals.announce(&db, &id).await;
            }
            Ok(decided)
        }
        Err(StoreError::Conflict(why)) => {
            ssr::audit(&db, &me, action::APPROVAL_DECISION_REFUSED, &id, Some(&why)).await?;
            ssr::fail(AppError::Conflict(why))
        }
        Err(other) => Err(other.into()),
    }
}

/// Cancels a pending request as an administrator (the agent's own token cancels through
/// the API). The agent waiting on it is woken and sees `cancelled`; audited.
#[server(prefix = "/fn", endpoint = "cancel_approval")]
pub async fn cancel_approval(id: String, #[server(default)] reason: Option<String>) -> Result<Approval, AppError> {
    use super::ssr;
    use crate::approvals::ApprovalStatus;
    use crate::storage::approvals;
    use crate::storage::audit::action;

    let admin = ssr::require(crate::access::Role::Admin)?;
    let db = ssr::db()?;
    let reason = filter_text(reason);
    let Some(after) = approvals::cancel(&db, &id, &format!("user:{}", admin.username)).await? else {
        return ssr::fail(AppError::NotFound(format!("approval request `{id}`")));
    };
    if after.status != ApprovalStatus::Cancelled
        || after.decided_by.as_deref() != Some(&format!("user:{}", admin.username))
    {
        return ssr::fail(AppError::Conflict(format!(
            "the request is already {}; nothing was cancelled",
            after.status
        )));
    }
    let detail = format!(
        "{} in run {}{}",
        after.tool,
        after.run_id,
        reason.map(|r| format!("; reason: {r}")).unwrap_or_default()
    );
    ssr::audit(&db, &admin, action::APPROVAL_CANCELLED, &id, Some(&detail)).await?;
    if let Some(state) = use_context::<crate::state::AppState>() {
        state.approvals.announce(&db, &id).await;
    }
    Ok(after)
}
