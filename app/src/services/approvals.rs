//! The approval flow outside storage: filing a request through its tool's rules, a
//! person's decision with every check it needs (role, not the run's own user, the edit,
//! the hash), and expiry that escalates. The browser's server functions, the bulk
//! decision, Slack's buttons, the agent API and the expiry job all come through here, so
//! every path authorizes exactly one payload under the same rules.

use crate::errors::AppError;
use crate::services::approval_hub::ApprovalHub;
use domain::access::Role;
use domain::approvals::payload::ValidRequest;
use domain::approvals::rules::{self, Compiled, Filing, RuleContext};
use domain::approvals::{edit, Approval, Choice, OnExpiry};
use domain::escalations::request::{OpenedBy, ValidEscalation};
use domain::escalations::{EscalationReason, RemainingItem};
use domain::models::CurrentUser;
use domain::notify::WebhookTarget;
use domain::redact::Redactor;
use store::approvals::{self, Decider, Decision, Requester};
use store::audit::{self, action};
use store::{approval_rules, escalations, now_ms, policies, runs, Db, StoreError, StoreResult};

/// Files a request: the tool's enforced rules decide it at once, or set how many people
/// of which role must approve; shadow rules are recorded beside it.
pub async fn file(
    db: &Db,
    request: &ValidRequest,
    requester: Requester<'_>,
    targets: &[WebhookTarget],
) -> StoreResult<(Approval, bool)> {
    let policy = policies::for_tool(db, &request.tool).await?;
    let role = policy.as_ref().map(|p| p.approver_role).unwrap_or(Role::Approver);
    let (run_agent, cost) = runs::agent_and_cost(db, &request.run_id).await?.unwrap_or((None, 0.0));
    let context = RuleContext::at(chrono::Utc::now(), request.agent.clone().or(run_agent), cost);
    let stored = match &policy {
        Some(p) => approval_rules::of_policy(db, &p.pattern).await?,
        None => Vec::new(),
    };
    // Rules were validated when saved; one that no longer compiles (a newer parser) acts
    // as if it were off rather than failing every request.
    let compiled: Vec<Compiled> = stored.into_iter().filter_map(|r| r.compiled().ok()).collect();
    // Rules read what is stored and shown (credentials redacted), so "try on history" sees
    // exactly what a live rule saw.
    let verdict = rules::verdict(&compiled, &request.tool, &request.stored_arguments, &context);
    let filing = Filing::from_verdict(verdict, role, context);
    approvals::create(db, request, policy.as_ref(), requester, targets, &filing).await
}

/// Reads the decision word a form or a button sends.
pub fn choice(word: &str) -> Result<Choice, AppError> {
    Choice::parse(word.trim())
        .ok_or_else(|| AppError::Invalid(format!("unknown decision `{word}` (expected approve or deny)")))
}

/// A person's decision as a form or a button sends it.
#[derive(Debug, Clone)]
pub struct DecisionInput {
    pub id: String,
    pub choice: Choice,
    /// The hash of the payload the person was shown.
    pub payload_sha256: String,
    pub reason: Option<String>,
    /// A message back to the agent.
    pub respond: Option<String>,
    /// The arguments as the person edited them (approve only); unchanged text is a plain
    /// approval.
    pub arguments: Option<String>,
}

fn text(value: Option<String>) -> Option<String> {
    value.map(|v| v.trim().to_string()).filter(|v| !v.is_empty())
}

/// Records `who`'s decision after every check, with its audit entry; a refused one is
/// audited too. Woken: the agent waiting on the request.
pub async fn decide(
    db: &Db,
    hub: &ApprovalHub,
    redactor: &Redactor,
    who: &CurrentUser,
    input: DecisionInput,
    source: Option<&str>,
) -> Result<Approval, AppError> {
    let id = input.id.trim().to_string();
    let approve = input.choice == Choice::Approve;
    let reason = text(input.reason);
    let respond = text(input.respond);
    if !approve && reason.is_none() {
        return Err(AppError::Invalid("a denial needs a reason, for the agent and for the record".into()));
    }
    if reason.as_ref().is_some_and(|r| r.len() > 2000) {
        return Err(AppError::Invalid("the reason may have at most 2000 characters".into()));
    }
    if respond.as_ref().is_some_and(|r| r.chars().count() > edit::MAX_RESPOND_CHARS) {
        return Err(AppError::Invalid(format!(
            "the message to the agent may have at most {} characters",
            edit::MAX_RESPOND_CHARS
        )));
    }
    let Some(request) = approvals::get(db, &id).await? else {
        return Err(AppError::NotFound(format!("approval request `{id}`")));
    };
    let target = id.clone();
    let refuse = |why: String| async move {
        let entry = audit::NewEntry {
            actor: Some(&who.username),
            action: action::APPROVAL_DECISION_REFUSED,
            target: Some(&target),
            detail: Some(&why),
            source,
        };
        audit::record(db, entry).await?;
        Ok::<_, AppError>(why)
    };
    if !who.can(request.required_role) {
        refuse("lacks the required role".into()).await?;
        return Err(AppError::Forbidden(request.required_role.to_string()));
    }
    if approve && runs::enduser_of(db, &request.run_id).await?.as_deref() == Some(who.username.as_str()) {
        let why =
            refuse("the run acts for this user (its enduser.id); another person must approve its requests".into())
                .await?;
        return Err(AppError::Conflict(why));
    }
    let decision = match (approve, input.arguments.as_deref().map(str::trim).filter(|t| !t.is_empty())) {
        (false, _) => Decision::Deny,
        (true, None) => Decision::Approve,
        (true, Some(edited)) => {
            let policy = policies::for_tool(db, &request.tool).await?;
            let schema = policy.as_ref().and_then(|p| p.arguments_schema.as_ref());
            match edit::check(&request.arguments, edited, schema, redactor) {
                Ok(Some(change)) => Decision::ApproveWithChanges(change),
                Ok(None) => Decision::Approve,
                Err(why) => return Err(AppError::Invalid(why)),
            }
        }
    };
    let status = decision.final_status();
    let act = if approve { action::APPROVAL_APPROVED } else { action::APPROVAL_DENIED };
    let mut detail = request.decision_detail(status, reason.as_deref());
    if let Decision::ApproveWithChanges(change) = &decision {
        detail.push_str(&format!("; changed: {}", change.changes.replace('\n', "; ")));
    }
    if request.required_approvals > 1 && approve {
        detail.push_str(&format!("; one of {} approvals needed", request.required_approvals));
    }
    let entry =
        audit::NewEntry { actor: Some(&who.username), action: act, target: Some(&id), detail: Some(&detail), source };
    let by = Decider { username: &who.username, reason: reason.as_deref(), respond: respond.as_deref() };
    match approvals::decide(db, &id, &decision, input.payload_sha256.trim(), by, Some(&entry)).await {
        Ok(decided) => {
            hub.announce(db, &id).await;
            Ok(decided)
        }
        Err(StoreError::Conflict(why)) => Err(AppError::Conflict(refuse(why).await?)),
        Err(other) => Err(other.into()),
    }
}

/// Expires every pending request past its time; for those whose policy says `escalate`,
/// opens an escalation for a person to take the call over. Returns the expired ids, for
/// their waiters.
pub async fn expire_due(db: &Db, hub: &ApprovalHub) -> StoreResult<Vec<String>> {
    let now = now_ms();
    let mut expired = Vec::new();
    for (id, on_expiry) in approvals::due(db, now).await? {
        // The escalation is opened first (idempotently, by the request's id) and stored with
        // the expiry in one statement: a poll never sees `expired` without it.
        let escalation = match on_expiry {
            OnExpiry::Escalate => match escalate(db, &id).await {
                Ok(e) => e,
                Err(e) => {
                    tracing::warn!(approval = %id, error = %e, "could not open the escalation for an expired request");
                    None
                }
            },
            OnExpiry::Deny => None,
        };
        if approvals::expire(db, &id, now, escalation.as_deref()).await? {
            hub.announce(db, &id).await;
            expired.push(id);
        }
    }
    Ok(expired)
}

/// Opens (or joins) the escalation for a request expiring under `escalate`.
async fn escalate(db: &Db, id: &str) -> StoreResult<Option<String>> {
    let Some(a) = approvals::get(db, id).await? else { return Ok(None) };
    let body = serde_json::json!({ "approval": a.id, "payload_sha256": a.payload_sha256 });
    let escalation = ValidEscalation {
        run_id: a.run_id.clone(),
        reason: EscalationReason::ApprovalRequiredByPolicy,
        reason_text: Some(format!("approval request {} for {} expired without a decision", a.id, a.tool)),
        what_was_done: Vec::new(),
        what_remains: vec![RemainingItem {
            description: format!(
                "Decide whether {} should run with the arguments of request {} (payload sha256 {}), and run it or tell the agent",
                a.tool, a.id, a.payload_sha256
            ),
            done: false,
            done_by: None,
            call_id: None,
        }],
        blocking_fact: Some(format!("nobody decided request {} before it expired", a.id)),
        idempotency_key: Some(format!("approval-expired:{}", a.id)),
        agent: a.agent.clone(),
        body_sha256: domain::approvals::payload::sha256_hex(&body.to_string()),
        opened_by: OpenedBy::ApprovalExpiry,
    };
    let escalation_id = match escalations::file(db, &escalation, "flightdeck approvals").await {
        Ok((e, _)) => e.id,
        // The run already has an open escalation from the agent: the expired request joins it.
        Err(StoreError::Conflict(_)) => match escalations::for_run(db, &a.run_id).await?.into_iter().find(|e| e.open) {
            Some(open) => open.id,
            None => return Ok(None),
        },
        Err(e) => return Err(e),
    };
    Ok(Some(escalation_id))
}
