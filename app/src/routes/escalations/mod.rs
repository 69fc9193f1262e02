//! The escalation queue (`/escalations`): open escalations oldest first with their backlog
//! age, reason, agent, run, blocking fact and who holds the claim; `?view=resolved` lists
//! the resolved ones. Refreshes itself every 10 s with JavaScript on.

pub mod page;

use crate::components::badges::Tag;
use crate::components::empty_state::EmptyState;
use crate::components::status::ErrorBox;
use crate::components::time::format_utc;
use crate::escalations::Escalation;
use crate::functions::escalations::{load_escalations, QueueView};
use crate::url::{encode, run_href};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

pub fn escalation_href(id: &str) -> String {
    format!("/escalations/{}", encode(id))
}

/// The reason as a person reads it, with the agent's text for `other`.
pub fn reason_text(e: &Escalation) -> String {
    match &e.reason_text {
        Some(text) => format!("{}: {text}", e.reason.as_str().replace('_', " ")),
        None => e.reason.as_str().replace('_', " "),
    }
}

pub use crate::components::time::backlog_age;

#[component]
pub fn EscalationsPage() -> impl IntoView {
    let q = use_query_map();
    let resolved = Memo::new(move |_| q.with(|q| q.get("view").as_deref() == Some("resolved")));
    let after = Memo::new(move |_| q.with(|q| q.get("after")));
    let tick = RwSignal::new(0u32);
    #[cfg(feature = "hydrate")]
    {
        if let Ok(handle) =
            set_interval_with_handle(move || tick.update(|t| *t += 1), std::time::Duration::from_secs(10))
        {
            on_cleanup(move || handle.clear());
        }
    }
    let queue = Resource::new(
        move || (resolved.get(), after.get(), tick.get()),
        |(resolved, after, _)| load_escalations(resolved, after),
    );
    view! {
        <Title text="Escalations"/>
        <h1>"Escalations"</h1>
        <nav class="tabs" aria-label="Escalation views">
            <a href="/escalations" class:active=move || !resolved.get()>"Open"</a>
            <a href="/escalations?view=resolved" class:active=move || resolved.get()>"Resolved"</a>
        </nav>
        <Transition fallback=|| view! { <p class="loading">"Loading escalations…"</p> }>
            {move || Suspend::new(async move {
                let resolved = resolved.get_untracked();
                match queue.await {
                    Ok(view) => view! { <Queue view resolved/> }.into_any(),
                    Err(error) => view! { <ErrorBox error/> }.into_any(),
                }
            })}
        </Transition>
    }
}

#[component]
fn Queue(view: QueueView, resolved: bool) -> impl IntoView {
    if view.escalations.is_empty() && !resolved && view.first {
        return view! {
            <EmptyState title="No open escalations">
                <p>
                    "When an agent stops and hands a run to a person, the escalation appears here with what "
                    "was already done (with external ids) and what remains, so whoever takes over never "
                    "fires a side effect twice."
                </p>
                <p>
                    "Agents escalate through " <code>"POST /api/v1/escalations"</code>
                    " (token scope " <code>"escalations"</code> "), or by ending a run " <code>"escalated"</code>
                    " or sending a span with " <code>"escalation.reason"</code> "."
                </p>
            </EmptyState>
        }
        .into_any();
    }
    if view.escalations.is_empty() && view.first {
        return view! { <p class="muted">"No resolved escalations yet."</p> }.into_any();
    }
    let now = view.now;
    let base = if resolved { "/escalations?view=resolved&" } else { "/escalations?" };
    let next = view.next.clone().map(|c| format!("{base}after={}", encode(&c)));
    let first_page = (!view.first).then(|| base.trim_end_matches(['?', '&']).to_string());
    let shown = view.escalations.len();
    let summary = format!(
        "{shown} of {} {}, {}",
        view.total,
        if resolved { "resolved" } else { "open" },
        if resolved { "newest first" } else { "oldest first" }
    );
    view! {
        <p class="muted small" data-testid="queue-count">{summary}</p>
        <div class="table-scroll">
        <table class="grid escalations" data-testid="escalation-table">
            <thead>
                <tr>
                    <th>{if resolved { "Resolved" } else { "Waiting" }}</th><th>"Reason"</th><th>"Agent"</th><th>"Run"</th>
                    <th>"Blocking fact"</th><th>{if resolved { "Outcome" } else { "Claimed by" }}</th><th></th>
                </tr>
            </thead>
            <tbody>
                {view.escalations.into_iter().map(|e| {
                    let when = if resolved {
                        e.resolved_at.map(|t| format_utc(&t)).unwrap_or_default()
                    } else {
                        backlog_age(&e.opened_at, &now)
                    };
                    let holder = if resolved {
                        e.outcome.map(|o| o.as_str().replace('_', " ")).unwrap_or_default()
                    } else {
                        e.claimed_by.clone().unwrap_or_else(|| "unclaimed".into())
                    };
                    view! {
                        <tr data-escalation=e.id.clone() data-run=e.run_id.clone()>
                            <td class="age" title=format_utc(&e.opened_at)>{when}</td>
                            <td><Tag kind="reason" value=e.reason.as_str()/>{e.reason_text.clone().map(|t| view! { <br/><span class="small">{t}</span> })}</td>
                            <td>{e.agent.clone().unwrap_or_else(|| "—".into())}</td>
                            <td><a href=run_href(&e.run_id)><code>{e.run_id.clone()}</code></a></td>
                            <td class="preview">{e.blocking_fact.clone().unwrap_or_default()}</td>
                            <td>{holder}</td>
                            <td><a href=escalation_href(&e.id) class="button primary small">"Open"</a></td>
                        </tr>
                    }
                }).collect_view()}
            </tbody>
        </table>
        </div>
        <nav class="pagers" aria-label="Pages" data-testid="queue-pager">
            {first_page.map(|href| view! { <a href=href>"← First page"</a> })}
            {next.map(|href| view! { <a href=href data-testid="next-page">"Next page →"</a> })}
        </nav>
    }
    .into_any()
}
