//! The escalation queue (`/escalations`): open escalations, the longest waiting first,
//! with how long each has waited since its run needed a person, its reason in words,
//! agent, run, blocking fact and who holds the claim; `?view=resolved` lists the resolved
//! ones. A GET form filters by reason, agent, claim and waiting time (the filters travel
//! in the query string, so they work without JavaScript and survive a reload). A table on
//! a wide screen, a card per escalation on a phone. Refreshes itself every 10 s with
//! JavaScript on.

pub mod page;

use crate::components::empty_state::EmptyState;
use crate::components::numbers::counted;
use crate::components::status::ErrorBox;
use crate::components::time::format_utc;
use crate::functions::escalations::{load_escalations, QueueView};
use domain::escalations::{Escalation, EscalationReason, AGES, COUNT_LIMIT};
use domain::url::{encode, run_href};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

pub fn escalation_href(id: &str) -> String {
    format!("/escalations/{}", encode(id))
}

/// The reason as a person reads it, with the agent's text for `other`.
pub fn reason_text(e: &Escalation) -> String {
    match &e.reason_text {
        Some(text) => format!("{}: {text}", e.reason.label()),
        None => e.reason.label().to_string(),
    }
}

pub use crate::components::time::backlog_age;

/// The queue's query string: view, filters and page cursor.
#[derive(Debug, Clone, Default, PartialEq)]
struct QueueQuery {
    resolved: bool,
    reason: Option<String>,
    agent: Option<String>,
    claim: Option<String>,
    age: Option<String>,
    after: Option<String>,
}

impl QueueQuery {
    fn from(q: &leptos_router::params::ParamsMap) -> QueueQuery {
        let given = |k: &str| q.get(k).filter(|v| !v.trim().is_empty());
        QueueQuery {
            resolved: q.get("view").as_deref() == Some("resolved"),
            reason: given("reason"),
            agent: given("agent"),
            claim: given("claim"),
            age: given("age"),
            after: given("after"),
        }
    }

    fn filtered(&self) -> bool {
        self.reason.is_some() || self.agent.is_some() || self.claim.is_some() || self.age.is_some()
    }

    /// This view's address with its filters, on the page after `after` (`None`: the first).
    fn href(&self, after: Option<&str>) -> String {
        let mut pairs: Vec<(&str, &str)> = Vec::new();
        if self.resolved {
            pairs.push(("view", "resolved"));
        }
        for (key, value) in
            [("reason", &self.reason), ("agent", &self.agent), ("claim", &self.claim), ("age", &self.age)]
        {
            if let Some(v) = value {
                pairs.push((key, v.as_str()));
            }
        }
        if let Some(a) = after {
            pairs.push(("after", a));
        }
        let query: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}={}", encode(v))).collect();
        if query.is_empty() {
            "/escalations".into()
        } else {
            format!("/escalations?{}", query.join("&"))
        }
    }
}

#[component]
pub fn EscalationsPage() -> impl IntoView {
    let q = use_query_map();
    let query = Memo::new(move |_| q.with(QueueQuery::from));
    let resolved = Memo::new(move |_| query.with(|q| q.resolved));
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
        move || (query.get(), tick.get()),
        |(q, _)| load_escalations(q.resolved, q.after, q.reason, q.agent, q.claim, q.age),
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
                let query = query.get_untracked();
                match queue.await {
                    Ok(view) => view! { <Filters query=query.clone() agents=view.agents.clone()/> <Queue view query/> }.into_any(),
                    Err(error) => view! { <Filters query agents=Vec::new()/> <ErrorBox error/> }.into_any(),
                }
            })}
        </Transition>
    }
}

/// The filters as a GET form: they land in the query string, so they work without
/// JavaScript and a reload keeps them.
#[component]
fn Filters(query: QueueQuery, agents: Vec<String>) -> impl IntoView {
    let is = |current: &Option<String>, value: &str| current.as_deref() == Some(value);
    let mut agents = agents;
    // A filtered agent with nothing left in this view stays selectable.
    if let Some(a) = query.agent.clone().filter(|a| !agents.contains(a)) {
        agents.insert(0, a);
    }
    let open = !query.resolved;
    let clear = QueueQuery { resolved: query.resolved, ..Default::default() }.href(None);
    view! {
        <form method="get" action="/escalations" class="filters queue-filters" data-testid="queue-filters">
            {query.resolved.then(|| view! { <input type="hidden" name="view" value="resolved"/> })}
            <label>
                "Reason"
                <select name="reason">
                    <option value="">"any reason"</option>
                    {EscalationReason::ALL.iter().map(|r| view! {
                        <option value=r.as_str() selected=is(&query.reason, r.as_str())>{r.label()}</option>
                    }).collect_view()}
                </select>
            </label>
            <label>
                "Agent"
                <select name="agent">
                    <option value="">"any agent"</option>
                    {agents.into_iter().map(|a| {
                        let on = is(&query.agent, &a);
                        let value = a.clone();
                        view! { <option value=value selected=on>{a}</option> }
                    }).collect_view()}
                </select>
            </label>
            {open.then(|| view! {
                <label>
                    "Claim"
                    <select name="claim">
                        <option value="">"claimed or not"</option>
                        <option value="unclaimed" selected=is(&query.claim, "unclaimed")>"unclaimed"</option>
                        <option value="claimed" selected=is(&query.claim, "claimed")>"claimed"</option>
                        <option value="mine" selected=is(&query.claim, "mine")>"claimed by me"</option>
                    </select>
                </label>
                <label>
                    "Waiting"
                    <select name="age">
                        <option value="">"any time"</option>
                        {AGES.iter().map(|(key, _, label)| view! {
                            <option value=*key selected=is(&query.age, key)>{*label}</option>
                        }).collect_view()}
                    </select>
                </label>
            })}
            <button type="submit" class="primary" data-testid="apply-filters">"Filter"</button>
            {query.filtered().then(|| view! { <a href=clear.clone() class="small" data-testid="clear-filters">"Clear"</a> })}
        </form>
    }
}

/// A reason badge in words ("outcome unknown"), coloured by its stored value.
#[component]
pub fn ReasonTag(reason: EscalationReason) -> impl IntoView {
    view! { <span class=format!("badge reason-{}", reason.as_str()) data-reason=reason.as_str()>{reason.label()}</span> }
}

#[component]
fn Queue(view: QueueView, query: QueueQuery) -> impl IntoView {
    let resolved = query.resolved;
    let filtered = query.filtered();
    if view.escalations.is_empty() && !resolved && view.first && !filtered {
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
        let text = match (filtered, resolved) {
            (true, _) => format!(
                "None of the {} {} escalations match these filters.",
                counted(view.unfiltered, COUNT_LIMIT),
                if resolved { "resolved" } else { "open" }
            ),
            (false, _) => "No resolved escalations yet.".to_string(),
        };
        return view! { <p class="muted" data-testid="queue-count">{text}</p> }.into_any();
    }
    let now = view.now;
    let next = view.next.clone().map(|c| query.href(Some(&c)));
    let first_page = (!view.first).then(|| query.href(None));
    let shown = view.escalations.len();
    let kind = if resolved { "resolved" } else { "open" };
    let order = if resolved { "newest first" } else { "longest waiting first" };
    let (total, unfiltered) = (counted(view.total, COUNT_LIMIT), counted(view.unfiltered, COUNT_LIMIT));
    let summary = if filtered {
        format!("{shown} of {total} {kind} matching the filters ({unfiltered} {kind} in all), {order}")
    } else {
        format!("{shown} of {total} {kind}, {order}")
    };
    view! {
        <p class="muted small" data-testid="queue-count">{summary}</p>
        <table class="grid escalations stack" data-testid="escalation-table">
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
                        backlog_age(&e.needed_at, &now)
                    };
                    let when_title = format!(
                        "needed a person at {}; stored at {}",
                        format_utc(&e.needed_at),
                        format_utc(&e.opened_at)
                    );
                    let holder = if resolved {
                        e.outcome.map(|o| o.as_str().replace('_', " ")).unwrap_or_default()
                    } else {
                        e.claimed_by.clone().unwrap_or_else(|| "unclaimed".into())
                    };
                    view! {
                        <tr data-escalation=e.id.clone() data-run=e.run_id.clone()>
                            <td class="age" title=when_title data-label=if resolved { "Resolved" } else { "Waiting" }
                                data-testid="waiting">{when}</td>
                            <td data-label="Reason"><ReasonTag reason=e.reason/>{e.reason_text.clone().map(|t| view! { <br/><span class="small">{t}</span> })}</td>
                            <td data-label="Agent">{e.agent.clone().unwrap_or_else(|| "—".into())}</td>
                            <td data-label="Run"><a href=run_href(&e.run_id)><code>{e.run_id.clone()}</code></a></td>
                            <td class="preview" class:empty=e.blocking_fact.is_none() data-label="Blocking fact">{e.blocking_fact.clone().unwrap_or_default()}</td>
                            <td data-label=if resolved { "Outcome" } else { "Claimed by" }>{holder}</td>
                            <td class="open"><a href=escalation_href(&e.id) class="button primary small">"Open"</a></td>
                        </tr>
                    }
                }).collect_view()}
            </tbody>
        </table>
        <nav class="pagers" aria-label="Pages" data-testid="queue-pager">
            {first_page.map(|href| view! { <a href=href>"← First page"</a> })}
            {next.map(|href| view! { <a href=href data-testid="next-page">"Next page →"</a> })}
        </nav>
    }
    .into_any()
}
