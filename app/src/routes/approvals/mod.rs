//! The approval inbox (`/approvals`): pending requests oldest first, filterable by agent
//! and tool (filters in the URL), refreshed every few seconds with JavaScript on; and the
//! decided history (`/approvals?view=decided`) filterable by approver, outcome and tool.

pub mod bulk;
pub mod request;

use crate::components::badges::Tag;
use crate::components::empty_state::EmptyState;
use crate::components::status::ErrorBox;
use crate::components::time::{ago, format_utc};
use crate::functions::approvals::{load_approval_history, load_inbox, InboxView};
use domain::approvals::{Approval, ApprovalStatus};
use domain::url::{encode, run_href};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

/// The link to one request's page.
pub fn approval_href(id: &str) -> String {
    format!("/approvals/{}", encode(id))
}

/// The first display field, which the agent chose as the one to read first.
fn headline(a: &Approval) -> String {
    a.display.first().map(|f| format!("{}: {}", f.label, f.value)).unwrap_or_else(|| a.arguments.clone())
}

/// "in 12 min", "in 2 h 5 min", or "expired" for a pending request's expiry.
fn expires_in(expires_at: &chrono::DateTime<chrono::Utc>, now: &chrono::DateTime<chrono::Utc>) -> String {
    match (*expires_at - *now).num_seconds() {
        s if s <= 0 => "expired".into(),
        s if s < 60 => format!("in {s} s"),
        s if s < 3600 => format!("in {} min", s / 60),
        s if s < 86_400 => format!("in {} h {} min", s / 3600, (s % 3600) / 60),
        s => format!("in {} d", s / 86_400),
    }
}

/// At most `n` characters of a one-line preview; the request page shows everything.
fn preview(text: &str, n: usize) -> String {
    let line: String = text.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    match line.char_indices().nth(n) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line,
    }
}

#[component]
pub fn ApprovalsPage() -> impl IntoView {
    let q = use_query_map();
    let decided = move || q.with(|q| q.get("view").as_deref() == Some("decided"));
    view! {
        <Title text="Approvals"/>
        <h1>"Approvals"</h1>
        <nav class="tabs" aria-label="Approval views">
            <a href="/approvals" class:active=move || !decided()>"Pending"</a>
            <a href="/approvals?view=decided" class:active=decided>"Decided"</a>
        </nav>
        {move || if decided() { view! { <History/> }.into_any() } else { view! { <Inbox/> }.into_any() }}
    }
}

#[component]
fn Inbox() -> impl IntoView {
    let q = use_query_map();
    let filters = Memo::new(move |_| q.with(|q| (q.get("agent"), q.get("tool"))));
    let tick = RwSignal::new(0u32);
    #[cfg(feature = "hydrate")]
    {
        if let Ok(handle) =
            set_interval_with_handle(move || tick.update(|t| *t += 1), std::time::Duration::from_secs(5))
        {
            on_cleanup(move || handle.clear());
        }
    }
    let inbox = Resource::new(move || (filters.get(), tick.get()), |((agent, tool), _)| load_inbox(agent, tool));
    view! {
        <Transition fallback=|| view! { <p class="loading">"Loading requests…"</p> }>
            {move || Suspend::new(async move {
                let (agent, tool) = filters.get_untracked();
                match inbox.await {
                    Ok(view) => view! { <InboxTable view agent tool/> }.into_any(),
                    Err(error) => view! { <ErrorBox error/> }.into_any(),
                }
            })}
        </Transition>
    }
}

fn options(values: Vec<String>, current: Option<String>) -> impl IntoView {
    values
        .into_iter()
        .map(|v| {
            let selected = current.as_deref() == Some(v.as_str());
            view! { <option value=v.clone() selected=selected>{v.clone()}</option> }
        })
        .collect_view()
}

#[component]
fn InboxTable(view: InboxView, agent: Option<String>, tool: Option<String>) -> impl IntoView {
    let filtered = agent.is_some() || tool.is_some();
    if view.pending.is_empty() && !filtered {
        return view! {
            <EmptyState title="No pending approval requests">
                <p>
                    "When an agent asks before running a tool call, the request appears here with the "
                    "exact payload that would go out (every argument, verbatim), for one approver to "
                    "approve or deny with a reason."
                </p>
                <p>
                    "Agents ask through the REST API: " <code>"POST /api/v1/approvals"</code>
                    " with a token that has the " <code>"approvals"</code> " scope (see the README)."
                </p>
            </EmptyState>
        }
        .into_any();
    }
    let now = view.now;
    let count = view.pending.len();
    let my_roles = view.my_roles.clone();
    view! {
        <form method="get" action="/approvals" class="filters" data-testid="approval-filters">
            <label>"Agent" <select name="agent"><option value="">"any"</option>{options(view.agents, agent)}</select></label>
            <label>"Tool" <select name="tool"><option value="">"any"</option>{options(view.tools, tool)}</select></label>
            <button type="submit" class="primary">"Apply"</button>
            <a href="/approvals" class="small">"Clear"</a>
        </form>
        <p class="muted small" data-testid="pending-count">{format!("{count} pending, oldest first")}</p>
        // Ticking requests and "Decide selected together" is a plain GET form: it works
        // without JavaScript and the bulk page shows exactly what was picked.
        <form method="get" action="/approvals/bulk" data-testid="bulk-pick">
        <div class="table-scroll stack-scroll">
        <table class="grid approvals stack" data-testid="approval-table">
            <thead>
                <tr><th><span class="visually-hidden">"Pick"</span></th><th>"Waiting"</th><th>"Expires"</th><th>"Agent"</th><th>"Run"</th><th>"Tool"</th><th>"Side effect"</th><th>"What"</th><th>"Approvals"</th><th></th></tr>
            </thead>
            <tbody>
                {view.pending.into_iter().map(|a| {
                    let href = approval_href(&a.id);
                    let what = preview(&headline(&a), 120);
                    let may_decide = my_roles.contains(&a.required_role);
                    view! {
                        <tr data-approval=a.id.clone()>
                            <td data-label="Pick"><input type="checkbox" name="id" value=a.id.clone() aria-label=format!("pick {}", a.id)/></td>
                            <td data-label="Waiting" title=format_utc(&a.created_at)>{ago(&a.created_at, &now)}</td>
                            <td data-label="Expires" title=format_utc(&a.expires_at) data-testid="expires">{expires_in(&a.expires_at, &now)}</td>
                            <td data-label="Agent">{a.agent.clone().unwrap_or_else(|| "—".into())}</td>
                            <td data-label="Run"><a href=run_href(&a.run_id)><code>{a.run_id.clone()}</code></a></td>
                            <td data-label="Tool"><code>{a.tool.clone()}</code></td>
                            <td data-label="Side effect"><Tag kind="effect" value=a.side_effect.as_str()/></td>
                            <td class="preview" data-label="What">{what}</td>
                            <td data-label="Approvals">{(a.required_approvals > 1).then(|| format!("{} of {}", a.approved_by.len(), a.required_approvals))}</td>
                            <td class="actions">
                                <a href=href class="button primary small">{if may_decide { "Review" } else { "View" }}</a>
                                {(!may_decide).then(|| view! {
                                    <span class="muted small" data-testid="needs-role">{format!(" needs the {} role", a.required_role)}</span>
                                })}
                            </td>
                        </tr>
                    }
                }).collect_view()}
            </tbody>
        </table>
        </div>
        <button type="submit" class="small">"Decide selected together"</button>
        </form>
    }
    .into_any()
}

#[component]
fn History() -> impl IntoView {
    let q = use_query_map();
    let filters = Memo::new(move |_| q.with(|q| (q.get("decided_by"), q.get("status"), q.get("tool"))));
    let history = Resource::new(move || filters.get(), |(by, status, tool)| load_approval_history(by, status, tool));
    view! {
        {move || {
            let (by, status, tool) = filters.get();
            let selected = |v: &str| status.as_deref() == Some(v);
            view! {
                <form method="get" action="/approvals" class="filters" data-testid="history-filters">
                    <input type="hidden" name="view" value="decided"/>
                    <label>"Decided by" <input type="text" name="decided_by" value=by.unwrap_or_default()/></label>
                    <label>
                        "Outcome"
                        <select name="status">
                            <option value="">"any"</option>
                            {[ApprovalStatus::Approved, ApprovalStatus::ApprovedWithChanges, ApprovalStatus::Denied, ApprovalStatus::Expired, ApprovalStatus::Cancelled]
                                .into_iter()
                                .map(|s| view! { <option value=s.as_str() selected=selected(s.as_str())>{s.as_str()}</option> })
                                .collect_view()}
                        </select>
                    </label>
                    <label>"Tool" <input type="text" name="tool" value=tool.unwrap_or_default()/></label>
                    <button type="submit" class="primary">"Apply"</button>
                    <a href="/approvals?view=decided" class="small">"Clear"</a>
                </form>
            }
        }}
        <Transition fallback=|| view! { <p class="loading">"Loading history…"</p> }>
            {move || Suspend::new(async move {
                match history.await {
                    Ok(rows) if rows.is_empty() => view! { <p class="muted">"No decided requests match."</p> }.into_any(),
                    Ok(rows) => view! {
                        <table class="grid approvals" data-testid="history-table">
                            <thead>
                                <tr><th>"Decided"</th><th>"Outcome"</th><th>"By"</th><th>"Tool"</th><th>"Run"</th><th>"Reason"</th><th></th></tr>
                            </thead>
                            <tbody>
                                {rows.into_iter().map(|a| view! {
                                    <tr data-approval=a.id.clone()>
                                        <td>{a.decided_at.map(|t| format_utc(&t)).unwrap_or_default()}</td>
                                        <td><Tag kind="approval" value=a.status.as_str()/></td>
                                        <td data-testid="decided-by">{if a.approved_by.len() > 1 { a.approved_by.join(", ") } else { a.decided_by.clone().unwrap_or_else(|| "—".into()) }}</td>
                                        <td><code>{a.tool.clone()}</code></td>
                                        <td><a href=run_href(&a.run_id)><code>{a.run_id.clone()}</code></a></td>
                                        <td class="preview">{a.reason.clone().map(|r| preview(&r, 160)).unwrap_or_default()}</td>
                                        <td><a href=approval_href(&a.id) class="small">"Open"</a></td>
                                    </tr>
                                }).collect_view()}
                            </tbody>
                        </table>
                    }.into_any(),
                    Err(error) => view! { <ErrorBox error/> }.into_any(),
                }
            })}
        </Transition>
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn previews_are_one_line_and_bounded() {
        assert_eq!(super::preview("a\nb", 10), "a b");
        assert_eq!(super::preview("abcdef", 3), "abc…");
    }
}
