//! Approvals for the browser: the inbox, the decided history, one request, and the
//! decision. Reading needs `viewer`; deciding needs the role the tool's policy names
//! (default `approver`), checked here on the server for every decision.

use crate::errors::AppError;
use chrono::{DateTime, Utc};
use domain::approvals::{Approval, Violation};
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
    /// The signed-in user's roles: a request needing another role says so.
    #[serde(default)]
    pub my_roles: Vec<domain::access::Role>,
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
    /// The run acts for the signed-in user (its `enduser.id`): they may not approve.
    pub own_run: bool,
    /// The signed-in user already approved the current payload (two-person requests).
    pub already_approved: bool,
    /// The tool policy's JSON Schema for the arguments, pretty-printed, when it has one.
    pub arguments_schema: Option<String>,
    pub now: DateTime<Utc>,
}

#[cfg(feature = "ssr")]
fn filter_text(value: Option<String>) -> Option<String> {
    value.map(|v| v.trim().to_string()).filter(|v| !v.is_empty())
}

#[server(prefix = "/fn", endpoint = "load_inbox")]
pub async fn load_inbox(agent: Option<String>, tool: Option<String>) -> Result<InboxView, AppError> {
    use super::ssr;
    use store::approvals::{self, ApprovalFilter};
    let me = ssr::require(domain::access::Role::Viewer)?;
    let db = ssr::db()?;
    let filter = ApprovalFilter { agent: filter_text(agent), tool: filter_text(tool), ..Default::default() };
    let pending = approvals::pending(&db, &filter, 500).await?;
    let (agents, tools) = approvals::pending_facets(&db).await?;
    let my_roles = domain::access::Role::ALL.iter().copied().filter(|r| me.can(*r)).collect();
    Ok(InboxView { pending, agents, tools, now: Utc::now(), my_roles })
}

#[server(prefix = "/fn", endpoint = "load_approval_history")]
pub async fn load_approval_history(
    decided_by: Option<String>,
    status: Option<String>,
    tool: Option<String>,
) -> Result<Vec<Approval>, AppError> {
    use super::ssr;
    use domain::approvals::ApprovalStatus;
    use store::approvals::{self, ApprovalFilter};
    ssr::require(domain::access::Role::Viewer)?;
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
    use store::{approvals, runs};
    let me = ssr::require(domain::access::Role::Viewer)?;
    let db = ssr::db()?;
    let Some(approval) = approvals::get(&db, &id).await? else {
        return ssr::fail(AppError::NotFound(format!("approval request `{id}`")));
    };
    let run_known = runs::get(&db, &approval.run_id).await?.is_some();
    let can_cancel = me.can(domain::access::Role::Admin);
    let mut approval = approval;
    if approval.status == domain::approvals::ApprovalStatus::Pending {
        approval.requester_user = runs::enduser_of(&db, &approval.run_id).await?;
    }
    let policy = store::policies::for_tool(&db, &approval.tool).await?;
    let arguments_schema =
        policy.and_then(|p| p.arguments_schema).map(|s| serde_json::to_string_pretty(&s).unwrap_or_default());
    Ok(ApprovalView {
        can_decide: me.can(approval.required_role),
        can_cancel,
        own_run: approval.requester_user.as_deref() == Some(me.username.as_str()),
        already_approved: approval.approved_by.contains(&me.username),
        approval,
        run_known,
        arguments_schema,
        now: Utc::now(),
    })
}

/// The number of pending requests, for the navigation.
#[server(prefix = "/fn", endpoint = "pending_approvals")]
pub async fn pending_approvals() -> Result<i64, AppError> {
    use super::ssr;
    ssr::require(domain::access::Role::Viewer)?;
    Ok(store::approvals::count_pending(&ssr::db()?).await?)
}

/// A run's approval requests and violations, for its page.
#[server(prefix = "/fn", endpoint = "load_run_approvals")]
pub async fn load_run_approvals(run_id: String) -> Result<(Vec<Approval>, Vec<Violation>), AppError> {
    use super::ssr;
    use store::approvals;
    ssr::require(domain::access::Role::Viewer)?;
    let db = ssr::db()?;
    Ok((approvals::for_run(&db, &run_id).await?, approvals::violations_for_run(&db, &run_id).await?))
}

/// Approves or denies request `id`. `payload_sha256` is the hash of the payload the
/// approver was shown: a decision on anything else is refused, as is one on a request that
/// is no longer pending (the message says who decided first), by someone without the role
/// the tool's policy names, or by the person the run acts for. `arguments`, when changed,
/// approves the edited payload instead (checked as JSON and against the tool's schema);
/// `respond` is a message back to the agent. Denying needs a reason. Every decision, and
/// every refused one, goes to the audit log.
#[server(prefix = "/fn", endpoint = "decide_approval")]
pub async fn decide_approval(
    id: String,
    decision: String,
    payload_sha256: String,
    #[server(default)] reason: Option<String>,
    #[server(default)] respond: Option<String>,
    #[server(default)] arguments: Option<String>,
) -> Result<Approval, AppError> {
    use super::ssr;
    use crate::services::approvals::{choice, decide, DecisionInput};
    let me = ssr::require(domain::access::Role::Viewer)?;
    let state = ssr::state()?;
    let source = ssr::source();
    let choice = match choice(&decision) {
        Ok(c) => c,
        Err(e) => return ssr::fail(e),
    };
    let input = DecisionInput { id, choice, payload_sha256, reason, respond, arguments };
    match decide(&state.db, &state.approvals, &state.redactor, &me, input, source.as_deref()).await {
        Ok(decided) => Ok(decided),
        Err(e) => ssr::fail(e),
    }
}

/// Pending requests picked for a bulk decision, with what differs between their payloads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BulkView {
    pub requests: Vec<Approval>,
    /// The argument paths (JSON pointers) whose values differ between the requests, in
    /// order; the table shows these columns first, highlighted.
    pub differing: Vec<String>,
    /// The paths every request has the same value at.
    pub same: Vec<String>,
    /// Why the selection cannot be decided together, if it cannot.
    pub problem: Option<String>,
    pub can_decide: bool,
}

/// The requests picked on the inbox (`ids`, comma-separated), side by side.
#[server(prefix = "/fn", endpoint = "load_bulk")]
pub async fn load_bulk(ids: String) -> Result<BulkView, AppError> {
    use super::ssr;
    use domain::approvals::display::differing_paths;
    let me = ssr::require(domain::access::Role::Viewer)?;
    let ids: Vec<String> = ids.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).take(200).collect();
    let requests = store::approvals::several(&ssr::db()?, &ids).await?;
    let tools: std::collections::BTreeSet<&str> = requests.iter().map(|a| a.tool.as_str()).collect();
    // Requests decided since they were picked (by this very page, or by someone else) are
    // shown with their status, not as a problem: only pending ones are decided together.
    let problem = if requests.is_empty() {
        Some("pick at least one pending request on the inbox".to_string())
    } else if tools.len() > 1 {
        Some(format!(
            "a bulk decision takes requests of one tool; these are for {} tools: {}",
            tools.len(),
            tools.into_iter().collect::<Vec<_>>().join(", ")
        ))
    } else {
        None
    };
    let args: Vec<serde_json::Value> =
        requests.iter().map(|a| serde_json::from_str(&a.arguments).unwrap_or(serde_json::Value::Null)).collect();
    let (differing, same) = differing_paths(&args);
    let can_decide = requests.iter().all(|a| me.can(a.required_role));
    Ok(BulkView { requests, differing, same, problem, can_decide })
}

/// One request's result in a bulk decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BulkResult {
    pub id: String,
    pub ok: bool,
    /// The status after, or why it was refused.
    pub detail: String,
}

/// Decides several requests in one action: `items` is `id:payload_sha256` pairs,
/// comma-separated, each the hash the page showed, so each decision is still bound to its
/// own payload. Each is checked and audited as if decided alone; one refused does not
/// stop the others.
#[server(prefix = "/fn", endpoint = "decide_bulk")]
pub async fn decide_bulk(
    items: String,
    decision: String,
    #[server(default)] reason: Option<String>,
) -> Result<Vec<BulkResult>, AppError> {
    use super::ssr;
    use crate::services::approvals::{choice, decide, DecisionInput};
    let me = ssr::require(domain::access::Role::Viewer)?;
    let state = ssr::state()?;
    let source = ssr::source();
    let choice = match choice(&decision) {
        Ok(c) => c,
        Err(e) => return ssr::fail(e),
    };
    let pairs: Vec<(String, String)> = items
        .split(',')
        .filter_map(|p| p.trim().split_once(':').map(|(a, b)| (a.to_string(), b.to_string())))
        .take(200)
        .collect();
    if pairs.is_empty() {
        return ssr::fail(AppError::Invalid("no requests were picked".into()));
    }
    let mut results = Vec::with_capacity(pairs.len());
    for (id, payload_sha256) in pairs {
        let input = DecisionInput {
            id: id.clone(),
            choice,
            payload_sha256,
            reason: reason.clone(),
            respond: None,
            arguments: None,
        };
        let result = decide(&state.db, &state.approvals, &state.redactor, &me, input, source.as_deref()).await;
        results.push(match result {
            Ok(a) if a.status.is_final() => BulkResult { id, ok: true, detail: a.status.to_string() },
            Ok(a) => BulkResult {
                id,
                ok: true,
                detail: format!("{} of {} approvals", a.approved_by.len(), a.required_approvals),
            },
            // A bad decision word or a missing reason is the same for every item.
            Err(AppError::Invalid(why)) => return ssr::fail(AppError::Invalid(why)),
            Err(e) => BulkResult { id, ok: false, detail: e.to_string() },
        });
    }
    Ok(results)
}

/// Cancels a pending request as an administrator (the agent's own token cancels through
/// the API). The agent waiting on it is woken and sees `cancelled`; audited.
#[server(prefix = "/fn", endpoint = "cancel_approval")]
pub async fn cancel_approval(id: String, #[server(default)] reason: Option<String>) -> Result<Approval, AppError> {
    use super::ssr;
    use domain::approvals::ApprovalStatus;
    use store::approvals;
    use store::audit::action;

    let admin = ssr::require(domain::access::Role::Admin)?;
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
