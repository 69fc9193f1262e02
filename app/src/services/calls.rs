//! Guarded calls on every path into the gate (the agent API, the MCP gateway): an ask
//! answered by the ledger (`ledger::answer` decides, `storage::ledger` applies), the
//! approval request filed for a call that needs a person, the escalation opened for an
//! outcome nobody reported, the report, and the waits that hold an ask or a read until
//! its answer changes. Only an ask can start an attempt; a read never changes the ledger.

use super::approval_hub::ApprovalHub;
use super::long_poll::{self, Check, Watch};
use domain::approvals::payload::ValidRequest;
use domain::approvals::ApprovalStatus;
use domain::escalations::request::{OpenedBy, ValidEscalation};
use domain::escalations::{EscalationReason, RemainingItem};
use domain::ledger::answer::{next_step, CallRule, EntryFacts, Step};
use domain::ledger::key::derive_key;
pub use domain::ledger::request::ValidAsk;
use domain::ledger::request::ValidCompletion;
use domain::ledger::rules::{call_rule, key_rule};
use domain::ledger::{Answer, EntryState, LedgerEntry};
use domain::notify::WebhookTarget;
use domain::redact::Redactor;
use serde::Serialize;
use std::sync::Arc;
use std::time::Duration;
use store::{approvals, escalations, ledger, now_ms, policies, Db, StoreError};
use tokio::time::Instant;

/// The longest one ask or read is held; agents ask again for longer.
pub const MAX_WAIT: Duration = Duration::from_secs(60);

/// What every path into the gate needs besides the database.
#[derive(Clone)]
pub struct CallsContext {
    pub hub: ApprovalHub,
    pub webhooks: Arc<Vec<WebhookTarget>>,
    pub redactor: Arc<Redactor>,
}

/// The API token asking: only the token that asked first may report or read a call.
#[derive(Debug, Clone, Copy)]
pub struct Caller<'a> {
    pub token_id: i64,
    pub token_name: &'a str,
}

/// What the agent is told, with the entry it concerns.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct CallAnswer {
    /// proceed, already_done, in_progress, outcome_unknown, approval_required, denied, or
    /// (only from a read) ask_again.
    pub answer: Answer,
    pub call: LedgerEntry,
    /// With `proceed` after an approver edited the arguments: run these, not the ones
    /// asked with (their hash is what was approved).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approved_arguments: Option<serde_json::Value>,
    /// The approver's message to the agent (with a denial or an edit), or the denial's
    /// reason.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Why a call could not be asked, read or reported.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// Another token asked for this call.
    #[error("{0}")]
    NotYours(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

type CallResult<T> = Result<T, CallError>;

/// Whether an agent told `answer` waits and asks again.
pub fn is_waiting(answer: Answer) -> bool {
    matches!(answer, Answer::ApprovalRequired | Answer::InProgress | Answer::OutcomeUnknown)
}

/// What the ledger's step tells an asking agent.
fn answer_of(step: Step) -> Answer {
    match step {
        Step::Start => Answer::Proceed,
        Step::AskApproval => Answer::ApprovalRequired,
        Step::Tell(answer) => answer,
        Step::Deny => Answer::Denied,
    }
}

/// What a read reports for a step it does not take: where an ask would start an attempt
/// or file a new approval, the reader is told to ask.
fn read_answer_of(step: Step) -> Answer {
    match step {
        Step::Start | Step::AskApproval => Answer::AskAgain,
        other => answer_of(other),
    }
}

/// One ask: the ledger's answer, with the approval request filed for a call that needs
/// one and the escalation opened for an unknown outcome. A rule that decides the filed
/// request at once is answered now rather than after a wait.
pub async fn ask(db: &Db, ctx: &CallsContext, caller: Caller<'_>, ask: &ValidAsk) -> CallResult<CallAnswer> {
    let call = &ask.call;
    let policy = policies::for_tool(db, &call.tool).await?;
    let key = match &call.idempotency_key {
        Some(key) => key.clone(),
        None => derive_key(&call.run_id, call.step_index, &call.tool, &call.arguments, &key_rule(policy.as_ref())),
    };
    let mut stored = call.arguments.clone();
    ctx.redactor.redact_strings(&mut stored);
    let rule = call_rule(policy.as_ref());
    let mut asked = ledger::ask(db, call, &key, &stored, &rule, Some(caller.token_id)).await?;
    let mut entry = follow_up(db, ctx, caller, asked.entry, Some(ask)).await?;
    if entry.state == EntryState::AwaitingApproval {
        if let Some(id) = entry.approval_id.as_deref() {
            if approvals::get(db, id).await?.is_some_and(|a| a.status.is_final()) {
                asked = ledger::ask(db, call, &key, &stored, &rule, Some(caller.token_id)).await?;
                entry = follow_up(db, ctx, caller, asked.entry, Some(ask)).await?;
            }
        }
    }
    let answer = answer_of(asked.step);
    tracing::info!(call = %entry.id, run = %entry.run_id, tool = %entry.tool, %answer, "guarded call asked");
    Ok(with_approval(db, answer, entry).await?)
}

/// An ask held up to `wait` while its answer is one to wait on: as soon as the answer an
/// ask would get changes (an approval decided, the other attempt reported or past its
/// timeout, a person's settlement), the call is asked again and that answer returned.
pub async fn ask_waiting(
    db: &Db,
    ctx: &CallsContext,
    caller: Caller<'_>,
    request: &ValidAsk,
    wait: Duration,
) -> CallResult<CallAnswer> {
    let first = ask(db, ctx, caller, request).await?;
    if !is_waiting(first.answer) || wait.is_zero() {
        return Ok(first);
    }
    let asked_answer = first.answer;
    let id = first.call.id.clone();
    let deadline = Instant::now() + wait.min(MAX_WAIT);
    let mut latest = Some(first);
    long_poll::hold(&ctx.hub, deadline, || {
        let id = id.clone();
        let so_far = latest.take();
        async move {
            let (now, entry, watch) = standing(db, &id).await?;
            if now == asked_answer {
                let so_far = match so_far {
                    Some(answer) => answer,
                    None => with_approval(db, asked_answer, entry).await?,
                };
                return Ok(Check::Wait(so_far, watch));
            }
            Ok(Check::Done(ask(db, ctx, caller, request).await?))
        }
    })
    .await
}

/// The call as it stands, for the token that asked for it: never changes the ledger.
pub async fn read(db: &Db, caller: Caller<'_>, id: &str) -> CallResult<CallAnswer> {
    let (answer, entry, _) = standing_of(db, caller, id).await?;
    Ok(with_approval(db, answer, entry).await?)
}

/// [`read`], held up to `wait` until the answer changes.
pub async fn read_waiting(
    db: &Db,
    ctx: &CallsContext,
    caller: Caller<'_>,
    id: &str,
    wait: Duration,
) -> CallResult<CallAnswer> {
    let (first, _, _) = standing_of(db, caller, id).await?;
    let deadline = Instant::now() + wait.min(MAX_WAIT);
    long_poll::hold(&ctx.hub, deadline, || async move {
        let (answer, entry, watch) = standing(db, id).await?;
        let view = with_approval(db, answer, entry).await?;
        Ok(if answer == first && is_waiting(answer) { Check::Wait(view, watch) } else { Check::Done(view) })
    })
    .await
}

/// A read's answer for the caller's own call.
async fn standing_of(db: &Db, caller: Caller<'_>, id: &str) -> CallResult<(Answer, LedgerEntry, Watch)> {
    let (_, owner) = ledger::get(db, id).await?.ok_or_else(|| not_found(id))?;
    if owner.is_some_and(|o| o != caller.token_id) {
        return Err(CallError::NotYours("another token asked for this call".into()));
    }
    standing(db, id).await
}

/// What an ask would be told now (a read's view of it), the entry, and what may change it.
async fn standing(db: &Db, id: &str) -> CallResult<(Answer, LedgerEntry, Watch)> {
    let (entry, _) = ledger::get(db, id).await?.ok_or_else(|| not_found(id))?;
    let policy = policies::for_tool(db, &entry.tool).await?;
    let rule = call_rule(policy.as_ref());
    let approval = match &entry.approval_id {
        Some(approval) => approvals::get(db, approval).await?,
        None => None,
    };
    let now = now_ms();
    let status = approval.as_ref().map(|a| match a.status {
        ApprovalStatus::Pending if a.expires_at.timestamp_millis() <= now => ApprovalStatus::Expired,
        status => status,
    });
    let facts = EntryFacts {
        state: entry.state,
        started_at: entry.started_at.timestamp_millis(),
        completed_at: entry.completed_at.map(|t| t.timestamp_millis()),
        approval: status,
    };
    let answer = read_answer_of(next_step(Some(&facts), &rule, now));
    let watch = Watch {
        ids: std::iter::once(entry.id.clone()).chain(entry.approval_id.clone()).collect(),
        wake_at: changes_by_itself_at(&entry, approval.as_ref().map(|a| a.expires_at.timestamp_millis()), &rule),
    };
    Ok((answer, entry, watch))
}

/// When the answer changes with nobody acting: a started attempt passing its timeout, a
/// pending approval expiring.
fn changes_by_itself_at(entry: &LedgerEntry, approval_expires_ms: Option<i64>, rule: &CallRule) -> Option<Instant> {
    match entry.state {
        EntryState::Started => Some(long_poll::instant_at(entry.started_at.timestamp_millis() + rule.timeout_ms + 1)),
        EntryState::AwaitingApproval => approval_expires_ms.map(long_poll::instant_at),
        _ => None,
    }
}

/// The report after the call: stored (the response redacted), the waiters on the call
/// woken, and for an outcome the caller lost track of, the escalation opened.
pub async fn complete(
    db: &Db,
    ctx: &CallsContext,
    caller: Caller<'_>,
    id: &str,
    report: &ValidCompletion,
) -> CallResult<LedgerEntry> {
    let (_, owner) = ledger::get(db, id).await?.ok_or_else(|| not_found(id))?;
    if owner.is_some_and(|o| o != caller.token_id) {
        return Err(CallError::NotYours("another token asked for this call; only it may report the outcome".into()));
    }
    let response = report.response.clone().map(|mut r| {
        ctx.redactor.redact_strings(&mut r);
        r
    });
    let entry = ledger::complete(db, id, report, response.as_ref()).await?;
    let entry = follow_up(db, ctx, caller, entry, None).await?;
    ctx.hub.announce(db, id).await;
    tracing::info!(call = %entry.id, state = %entry.state, "guarded call completed");
    Ok(entry)
}

/// What an answer needs besides the entry: the approval request for a call that waits
/// for one (filed here, after the entry is committed, and found again by its key if a
/// crash came between), and the escalation for an unknown outcome.
async fn follow_up(
    db: &Db,
    ctx: &CallsContext,
    caller: Caller<'_>,
    entry: LedgerEntry,
    ask: Option<&ValidAsk>,
) -> CallResult<LedgerEntry> {
    if entry.state == EntryState::AwaitingApproval && entry.approval_id.is_none() {
        let arguments = ask.map(|a| a.call.arguments.clone()).unwrap_or_else(|| entry.arguments.clone());
        let request = ValidRequest {
            run_id: entry.run_id.clone(),
            step_index: Some(entry.step_index),
            tool: entry.tool.clone(),
            stored_arguments: entry.arguments.clone(),
            arguments,
            display: ask.map(|a| redacted_display(&ctx.redactor, &a.display)).unwrap_or_default(),
            // One approval per attempt of this call, found again if filing is repeated.
            idempotency_key: Some(format!("{}:{}", entry.id, entry.attempts)),
            expires_in: None,
            agent: ask.and_then(|a| a.agent.clone()),
        };
        let requester = approvals::Requester { name: caller.token_name, token_id: Some(caller.token_id) };
        let (approval, created) = super::approvals::file(db, &request, requester, &ctx.webhooks).await?;
        if created {
            ctx.hub.announce(db, &approval.id).await;
        }
        ledger::link_approval(db, &entry.id, &approval.id).await?;
        return reread(db, &entry.id).await;
    }
    if entry.state == EntryState::Unknown && entry.escalation_id.is_none() {
        let escalation = open_escalation(db, &entry).await?;
        ledger::link_escalation(db, &entry.id, &escalation).await?;
        return reread(db, &entry.id).await;
    }
    Ok(entry)
}

/// The agent's description as stored and shown: credentials cut out like the arguments'.
fn redacted_display(
    redactor: &Redactor,
    display: &[domain::approvals::DisplayField],
) -> Vec<domain::approvals::DisplayField> {
    let mut out = display.to_vec();
    for field in &mut out {
        redactor.redact_string(&mut field.label);
        redactor.redact_string(&mut field.value);
    }
    out
}

/// Opens (or joins) the run's escalation for a call whose outcome is unknown: its
/// checklist gets an item to settle this call, ticked when someone settles it.
async fn open_escalation(db: &Db, entry: &LedgerEntry) -> CallResult<String> {
    let fact = format!(
        "{} (step {}, natural key {}) started at {} and never reported whether it happened: retrying may do \
         it twice, not retrying may lose it",
        entry.tool,
        entry.step_index,
        entry.natural_key,
        entry.started_at.format("%Y-%m-%d %H:%M:%S UTC")
    );
    let item = RemainingItem {
        description: format!(
            "Settle {} (step {}): did it happen? Look for natural key {} where it acts",
            entry.tool, entry.step_index, entry.natural_key
        ),
        done: false,
        done_by: None,
        call_id: Some(entry.id.clone()),
    };
    let body = serde_json::json!({"call": entry.id, "key": entry.idempotency_key});
    let escalation = ValidEscalation {
        run_id: entry.run_id.clone(),
        reason: EscalationReason::OutcomeUnknown,
        reason_text: None,
        what_was_done: Vec::new(),
        what_remains: vec![item.clone()],
        blocking_fact: Some(fact.clone()),
        idempotency_key: Some(format!("ledger:{}", entry.id)),
        agent: None,
        body_sha256: domain::approvals::payload::sha256_hex(&body.to_string()),
        opened_by: OpenedBy::Ledger,
    };
    match escalations::file(db, &escalation, "flightdeck ledger").await {
        Ok((e, _)) => Ok(e.id),
        // The run already has an open escalation: the unknown call joins it.
        Err(StoreError::Conflict(_)) => {
            let open = escalations::for_run(db, &entry.run_id).await?.into_iter().find(|e| e.open);
            let Some(open) = open else {
                return Err(StoreError::Conflict("could not open an escalation for the unknown outcome".into()).into());
            };
            escalations::add_call_item(db, &open.id, item, &fact).await?;
            Ok(open.id)
        }
        Err(other) => Err(other.into()),
    }
}

/// The answer with what the call's approval says to the agent.
async fn with_approval(db: &Db, answer: Answer, call: LedgerEntry) -> Result<CallAnswer, StoreError> {
    let mut out = CallAnswer { answer, call, approved_arguments: None, message: None };
    let Some(id) = out.call.approval_id.clone() else { return Ok(out) };
    if !matches!(answer, Answer::Proceed | Answer::Denied) {
        return Ok(out);
    }
    if let Some(a) = approvals::get(db, &id).await? {
        if a.status == ApprovalStatus::ApprovedWithChanges && answer == Answer::Proceed {
            out.approved_arguments = serde_json::from_str(&a.arguments).ok();
        }
        out.message = a.respond.or(if answer == Answer::Denied { a.reason } else { None });
    }
    Ok(out)
}

async fn reread(db: &Db, id: &str) -> CallResult<LedgerEntry> {
    Ok(ledger::get(db, id).await?.map(|(e, _)| e).ok_or_else(|| not_found(id))?)
}

fn not_found(id: &str) -> StoreError {
    StoreError::NotFound(format!("guarded call `{id}`"))
}
