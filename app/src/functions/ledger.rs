//! Guarded calls for the browser: a run's ledger entries joined to the spans that ran
//! them (by `tool.idempotency_key`), and a person settling a call whose outcome is
//! unknown ("it happened", with its external id, or "it did not").

use crate::errors::AppError;
use domain::ledger::LedgerEntry;
use leptos::prelude::*;
use serde::{Deserialize, Serialize};

/// One ledger entry on the run page, with the spans that carried its key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunCall {
    pub entry: LedgerEntry,
    pub span_ids: Vec<String>,
}

/// A run's guarded calls in step order.
#[server(prefix = "/fn", endpoint = "load_run_calls")]
pub async fn load_run_calls(run_id: String) -> Result<Vec<RunCall>, AppError> {
    use super::ssr;
    use store::{ledger, spans};
    ssr::require(domain::access::Role::Viewer)?;
    let db = ssr::db()?;
    let entries = ledger::for_run(&db, &run_id).await?;
    if entries.is_empty() {
        return Ok(Vec::new());
    }
    let facts = spans::facts_of_runs(&db, &[run_id.as_str()]).await?;
    let facts = facts.get(&run_id).map(Vec::as_slice).unwrap_or(&[]);
    Ok(entries
        .into_iter()
        .map(|entry| {
            let span_ids = facts
                .iter()
                .filter(|f| f.idempotency_key.as_deref() == Some(entry.idempotency_key.as_str()))
                .map(|f| f.span_id.clone())
                .collect();
            RunCall { entry, span_ids }
        })
        .collect())
}

/// Settles a guarded call whose outcome is unknown: `happened` is "yes" (with the
/// external id when known; later asks get `already_done`) or "no" (the next ask runs the
/// call; an external id then contradicts the answer and is refused). Needs the operator
/// role; audited with the change, noted on the escalation, whose checklist item for the
/// call is ticked; the waiting agent is woken.
#[server(prefix = "/fn", endpoint = "settle_call")]
pub async fn settle_call(
    id: String,
    happened: String,
    #[server(default)] external_id: Option<String>,
    #[server(default)] confirm: Option<String>,
) -> Result<(), AppError> {
    use super::ssr;
    use store::{audit, escalations, ledger};
    let me = ssr::require(domain::access::Role::Operator)?;
    let state = ssr::state()?;
    let db = state.db.clone();
    let happened = match happened.as_str() {
        "yes" => true,
        "no" => false,
        other => return ssr::fail(AppError::Invalid(format!("`happened` is yes or no, not `{other}`"))),
    };
    let external_id = external_id.map(|e| e.trim().to_string()).filter(|e| !e.is_empty());
    if external_id.as_ref().is_some_and(|e| e.len() > 200) {
        return ssr::fail(AppError::Invalid("an external id has at most 200 characters".into()));
    }
    if let (false, Some(ext)) = (happened, &external_id) {
        return ssr::fail(AppError::Invalid(format!(
            "an external id ({ext}) says the call created something, but you answered that it did not happen; \
             clear the external id, or answer that it happened"
        )));
    }
    // A call that cannot be undone is settled only on purpose: "it did not happen" lets
    // the agent run it again, "it happened" stops it for good.
    if let Some((entry, _)) = ledger::get(&db, &id).await? {
        let policy = store::policies::for_tool(&db, &entry.tool).await?;
        let irreversible = policy.is_some_and(|p| p.side_effect == domain::canonical::SideEffect::Irreversible);
        if irreversible && confirm.as_deref() != Some("yes") {
            return ssr::fail(AppError::Invalid(format!(
                "{} cannot be undone: confirm that you checked whether it happened before settling it",
                entry.tool
            )));
        }
    }
    let detail = match (happened, &external_id) {
        (true, Some(ext)) => format!("call {id} happened (external id {ext})"),
        (true, None) => format!("call {id} happened"),
        (false, _) => format!("call {id} did not happen; the agent may run it again"),
    };
    let source = ssr::source();
    let entry = audit::NewEntry {
        actor: Some(&me.username),
        action: audit::action::CALL_SETTLED,
        target: Some(&id),
        detail: Some(&detail),
        source: source.as_deref(),
    };
    let settled = match ledger::settle(&db, &id, happened, external_id.as_deref(), &me.username, Some(&entry)).await {
        Ok(settled) => settled,
        Err(store::StoreError::Conflict(why)) => return ssr::fail(AppError::Conflict(why)),
        Err(store::StoreError::NotFound(what)) => return ssr::fail(AppError::NotFound(what)),
        Err(other) => return Err(other.into()),
    };
    if let Some(escalation) = &settled.escalation_id {
        escalations::event(&db, escalation, Some(&me.username), "note", Some(&detail)).await?;
        escalations::tick_call_item(&db, escalation, &id, &me.username).await?;
    }
    state.approvals.announce(&db, &id).await;
    Ok(())
}
