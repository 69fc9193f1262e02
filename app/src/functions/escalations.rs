//! Escalations for the browser: the queue, one escalation with its evidence and timeline,
//! and the operator's actions (claim, release, note, tick an item, resolve). Reading needs
//! `viewer`; every action needs `operator`, is checked here, audited, and put on the
//! escalation's timeline.

use crate::errors::AppError;
use chrono::{DateTime, Utc};
use domain::escalations::evidence::Evidence;
use domain::escalations::{Escalation, TimelineEntry};
use leptos::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueueView {
    pub escalations: Vec<Escalation>,
    pub now: DateTime<Utc>,
    /// How many there are in this view (open or resolved) that pass the filters, over all
    /// pages.
    #[serde(default)]
    pub total: i64,
    /// How many there are in this view without filters (the same as `total` when none is set).
    #[serde(default)]
    pub unfiltered: i64,
    /// The agents the view's escalations name, for the agent filter.
    #[serde(default)]
    pub agents: Vec<String>,
    /// The cursor of the next page, when there is one.
    #[serde(default)]
    pub next: Option<String>,
    /// Whether this is the first page.
    #[serde(default)]
    pub first: bool,
}

/// Escalations per page of the queue.
pub const PAGE_SIZE: i64 = 50;

/// A page cursor: the last escalation's time (ms) and id, `~` between (ids never hold one).
pub fn cursor_of(e: &Escalation, resolved: bool) -> String {
    let at = if resolved { e.resolved_at.unwrap_or(e.opened_at) } else { e.needed_at };
    format!("{}~{}", at.timestamp_millis(), e.id)
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EscalationView {
    pub escalation: Escalation,
    pub evidence: Evidence,
    pub timeline: Vec<TimelineEntry>,
    /// The signed-in user may act (holds `operator`).
    pub can_act: bool,
    /// And may resolve over someone's claim (also holds `admin`).
    #[serde(default)]
    pub can_override: bool,
    pub me: String,
    pub run_known: bool,
    pub now: DateTime<Utc>,
    /// The run's guarded calls from the execution ledger: unknown outcomes (to settle)
    /// and succeeded calls (evidence of what was done).
    #[serde(default)]
    pub calls: Vec<domain::ledger::LedgerEntry>,
    /// The unknown calls whose tool is irreversible: settling one asks to confirm.
    #[serde(default)]
    pub irreversible_calls: Vec<String>,
}

/// One page of the queue ([`PAGE_SIZE`]), after the cursor `after` from the page before,
/// filtered by reason, agent, claim (`unclaimed`, `claimed`, `mine`) and waiting time
/// (`15m`, `1h`, `4h`, `1d`; see `escalations::QueueFilter`).
#[allow(clippy::too_many_arguments)]
#[server(prefix = "/fn", endpoint = "load_escalations")]
pub async fn load_escalations(
    resolved: bool,
    #[server(default)] after: Option<String>,
    #[server(default)] reason: Option<String>,
    #[server(default)] agent: Option<String>,
    #[server(default)] claim: Option<String>,
    #[server(default)] age: Option<String>,
) -> Result<QueueView, AppError> {
    use super::ssr;
    use domain::escalations::QueueFilter;
    use store::escalations;
    let me = ssr::require(domain::access::Role::Viewer)?;
    let db = ssr::db()?;
    let filter =
        match QueueFilter::parse(reason.as_deref(), agent.as_deref(), claim.as_deref(), age.as_deref(), &me.username) {
            Ok(f) => f,
            Err(why) => return ssr::fail(AppError::Invalid(why)),
        };
    let after = match after.as_deref().map(str::trim).filter(|a| !a.is_empty()) {
        None => None,
        Some(text) => match text.split_once('~').and_then(|(ms, id)| Some((ms.parse::<i64>().ok()?, id.to_string()))) {
            Some(cursor) => Some(cursor),
            None => {
                return ssr::fail(AppError::Invalid(format!(
                    "`after` must be a page cursor from this page, got `{text}`"
                )))
            }
        },
    };
    let first = after.is_none();
    let mut list = escalations::page(&db, !resolved, &filter, after, PAGE_SIZE + 1).await?;
    let next = if list.len() as i64 > PAGE_SIZE {
        list.truncate(PAGE_SIZE as usize);
        list.last().map(|e| cursor_of(e, resolved))
    } else {
        None
    };
    let total = escalations::count(&db, !resolved, &filter).await?;
    let unfiltered =
        if filter.is_empty() { total } else { escalations::count(&db, !resolved, &QueueFilter::default()).await? };
    let agents = escalations::agents(&db, !resolved).await?;
    Ok(QueueView { escalations: list, now: Utc::now(), total, unfiltered, agents, next, first })
}

/// Open escalations and when the oldest was opened, for the navigation.
#[server(prefix = "/fn", endpoint = "escalation_backlog")]
pub async fn escalation_backlog() -> Result<(i64, Option<DateTime<Utc>>, DateTime<Utc>), AppError> {
    use super::ssr;
    ssr::require(domain::access::Role::Viewer)?;
    let (count, oldest) = store::escalations::backlog(&ssr::db()?).await?;
    // The server's clock travels with the data so the page hydrates without a mismatch.
    Ok((count, oldest.map(store::from_ms), Utc::now()))
}

#[server(prefix = "/fn", endpoint = "load_escalation")]
pub async fn load_escalation(id: String) -> Result<EscalationView, AppError> {
    use super::ssr;
    use domain::escalations::evidence::{compare, observed_side_effects};
    use store::{escalations, runs};
    let me = ssr::require(domain::access::Role::Viewer)?;
    let db = ssr::db()?;
    let Some(escalation) = escalations::get(&db, &id).await? else {
        return ssr::fail(AppError::NotFound(format!("escalation `{id}`")));
    };
    let run = runs::get(&db, &escalation.run_id).await?;
    let observed = run.as_ref().map(|r| observed_side_effects(&r.tool_call_list)).unwrap_or_default();
    let evidence = compare(&escalation.what_was_done, &observed);
    let timeline = escalations::timeline(&db, &id).await?;
    let calls: Vec<domain::ledger::LedgerEntry> = store::ledger::for_run(&db, &escalation.run_id)
        .await?
        .into_iter()
        .filter(|c| matches!(c.state, domain::ledger::EntryState::Unknown | domain::ledger::EntryState::Succeeded))
        .collect();
    let mut irreversible_calls = Vec::new();
    for call in calls.iter().filter(|c| c.state == domain::ledger::EntryState::Unknown) {
        let policy = store::policies::for_tool(&db, &call.tool).await?;
        if policy.is_some_and(|p| p.side_effect == domain::canonical::SideEffect::Irreversible) {
            irreversible_calls.push(call.id.clone());
        }
    }
    Ok(EscalationView {
        calls,
        irreversible_calls,
        can_act: me.can(domain::access::Role::Operator),
        can_override: me.can(domain::access::Role::Operator) && me.can(domain::access::Role::Admin),
        me: me.username,
        run_known: run.is_some(),
        escalation,
        evidence,
        timeline,
        now: Utc::now(),
    })
}

/// The run's escalations, newest first, for its page.
#[server(prefix = "/fn", endpoint = "load_run_escalations")]
pub async fn load_run_escalations(run_id: String) -> Result<Vec<Escalation>, AppError> {
    use super::ssr;
    ssr::require(domain::access::Role::Viewer)?;
    Ok(store::escalations::for_run(&ssr::db()?, &run_id).await?)
}

/// Runs an operator's act on an escalation. `f` gets the database, the operator's name
/// and the audit entry the act leaves, which storage appends in the act's own
/// transaction (an act without its entry, or an entry without its act, is never stored).
#[cfg(feature = "ssr")]
async fn act<F, Fut>(id: &str, action: &str, detail: Option<String>, f: F) -> Result<(), AppError>
where
    F: FnOnce(store::Db, String, store::audit::OwnedEntry) -> Fut,
    Fut: std::future::Future<Output = store::StoreResult<Escalation>>,
{
    use super::ssr;
    let me = ssr::require(domain::access::Role::Operator)?;
    let db = ssr::db()?;
    let entry = store::audit::OwnedEntry {
        actor: Some(me.username.clone()),
        action: action.to_string(),
        target: Some(id.to_string()),
        detail,
        source: ssr::source(),
    };
    match f(db.clone(), me.username.clone(), entry).await {
        Ok(_) => Ok(()),
        Err(store::StoreError::Conflict(why)) => ssr::fail(AppError::Conflict(why)),
        Err(store::StoreError::NotFound(what)) => ssr::fail(AppError::NotFound(what)),
        Err(e) => Err(e.into()),
    }
}

#[server(prefix = "/fn", endpoint = "claim_escalation")]
pub async fn claim_escalation(id: String) -> Result<(), AppError> {
    use store::{audit::action, escalations};
    let target = id.clone();
    act(&id, action::ESCALATION_CLAIMED, None, |db, me, audit| async move {
        escalations::claim(&db, &target, &me, Some(&audit.borrow())).await
    })
    .await
}

#[server(prefix = "/fn", endpoint = "release_escalation")]
pub async fn release_escalation(id: String) -> Result<(), AppError> {
    use store::{audit::action, escalations};
    let target = id.clone();
    act(&id, action::ESCALATION_RELEASED, None, |db, me, audit| async move {
        escalations::release(&db, &target, &me, Some(&audit.borrow())).await
    })
    .await
}

#[server(prefix = "/fn", endpoint = "note_escalation")]
pub async fn note_escalation(id: String, note: String) -> Result<(), AppError> {
    use super::ssr;
    use store::{audit::action, escalations};
    let note = note.trim().to_string();
    if note.is_empty() || note.len() > 5000 {
        return ssr::fail(AppError::Invalid("a note needs 1 to 5000 characters".into()));
    }
    let target = id.clone();
    let text = note.clone();
    act(&id, action::ESCALATION_NOTE, Some(note), |db, me, audit| async move {
        escalations::note(&db, &target, &me, &text, Some(&audit.borrow())).await
    })
    .await
}

/// Ticks (`done = "true"`) or unticks a remaining item, by its position.
#[server(prefix = "/fn", endpoint = "tick_escalation_item")]
pub async fn tick_escalation_item(id: String, index: usize, done: String) -> Result<(), AppError> {
    use store::{audit::action, escalations};
    let done = done == "true";
    let target = id.clone();
    let detail = format!("item {index} {}", if done { "done" } else { "not done" });
    act(&id, action::ESCALATION_ITEM, Some(detail), |db, me, audit| async move {
        escalations::set_item(&db, &target, &me, index, done, Some(&audit.borrow())).await
    })
    .await
}

#[server(prefix = "/fn", endpoint = "resolve_escalation")]
pub async fn resolve_escalation(
    id: String,
    outcome: String,
    note: String,
    #[server(default)] instructions: Option<String>,
    #[server(default)] accept_open_items: Option<String>,
    #[server(default)] override_claim: Option<String>,
) -> Result<(), AppError> {
    use super::ssr;
    use domain::escalations::Resolution;
    use store::{audit::action, escalations};
    let Some(outcome) = Resolution::parse(&outcome) else {
        return ssr::fail(AppError::Invalid(format!(
            "unknown outcome `{outcome}` (expected completed_by_human, handed_back or abandoned)"
        )));
    };
    let note = note.trim().to_string();
    if note.is_empty() || note.len() > 5000 {
        return ssr::fail(AppError::Invalid("resolving needs a note of 1 to 5000 characters".into()));
    }
    let instructions = instructions.map(|i| i.trim().to_string()).filter(|i| !i.is_empty());
    if outcome == Resolution::HandedBack && instructions.is_none() {
        return ssr::fail(AppError::Invalid("handing back needs instructions the agent can follow".into()));
    }
    let checked = |v: &Option<String>| v.as_deref().is_some_and(|v| !v.is_empty() && v != "false");
    let override_claim = checked(&override_claim);
    // Overriding someone's claim is an administrator's explicit act, and audited as one.
    let me = ssr::require(domain::access::Role::Operator)?;
    if override_claim && !me.can(domain::access::Role::Admin) {
        return ssr::fail(AppError::Forbidden("only an administrator may resolve over a claim".into()));
    }
    let db = ssr::db()?;
    if let Some(e) = escalations::get(&db, &id).await? {
        let open: Vec<&str> = e.what_remains.iter().filter(|i| !i.done).map(|i| i.description.as_str()).collect();
        if !open.is_empty() && !checked(&accept_open_items) {
            return ssr::fail(AppError::Conflict(format!(
                "{} checklist item(s) are still open ({}); tick them, or confirm that you resolve with them open",
                open.len(),
                open.join("; ")
            )));
        }
    }
    let target = id.clone();
    let (action_name, detail) = if override_claim {
        (action::ESCALATION_RESOLVED_OVERRIDE, format!("{outcome}, over the claim: {note}"))
    } else {
        (action::ESCALATION_RESOLVED, format!("{outcome}: {note}"))
    };
    act(&id, action_name, Some(detail), |db, me, audit| async move {
        let audit = Some(audit.borrow());
        escalations::resolve(&db, &target, &me, outcome, &note, instructions.as_deref(), override_claim, audit.as_ref())
            .await
    })
    .await
}
