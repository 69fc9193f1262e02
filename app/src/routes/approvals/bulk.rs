//! A bulk decision (`/approvals/bulk?id=…&id=…`): pending requests of one tool, picked on
//! the inbox, side by side as a compact table whose first columns are the arguments that
//! differ between them (highlighted) and whose shared values are listed once above it.
//! Approve or deny them in one action; the form carries each request's own hash, so every
//! decision is still bound to the payload shown for it.

use crate::components::payload::{ExactInline, ExactText};
use crate::components::status::{ActionError, ErrorBox};
use crate::functions::approvals::{load_bulk, BulkView, DecideBulk};
use crate::routes::approvals::approval_href;
use domain::approvals::display::text_at;
use domain::approvals::ApprovalStatus;
use domain::url::run_href;
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

#[component]
pub fn BulkPage() -> impl IntoView {
    let q = use_query_map();
    let ids = Memo::new(move |_| q.with(|q| q.get_all("id").unwrap_or_default().join(",")));
    let decide = ServerAction::<DecideBulk>::new();
    crate::components::layout::refresh_nav_after(decide);
    let view = Resource::new(move || (ids.get(), decide.version().get()), |(ids, _)| load_bulk(ids));
    view! {
        <Title text="Decide together"/>
        <p class="breadcrumb"><a href="/approvals">"Approvals"</a> " / decide together"</p>
        <h1>"Decide several requests together"</h1>
        <Transition fallback=|| view! { <p class="loading">"Loading requests…"</p> }>
            {move || Suspend::new(async move {
                match view.await {
                    Ok(v) => view! { <Bulk v decide/> }.into_any(),
                    Err(error) => view! { <ErrorBox error/> }.into_any(),
                }
            })}
        </Transition>
    }
}

#[component]
fn Bulk(v: BulkView, decide: ServerAction<DecideBulk>) -> impl IntoView {
    let results = move || {
        decide.value().get().and_then(|r| r.ok()).map(|rows| {
            view! {
                <section class="card bulk-results" data-testid="bulk-results">
                    <h2>"Your decision"</h2>
                    <ul>
                        {rows.into_iter().map(|r| view! {
                            <li class:refused=!r.ok><code>{r.id.clone()}</code> ": " {r.detail.clone()}</li>
                        }).collect_view()}
                    </ul>
                </section>
            }
        })
    };
    let tools: std::collections::BTreeSet<String> = v.requests.iter().map(|a| a.tool.clone()).collect();
    let pending: Vec<&domain::approvals::Approval> =
        v.requests.iter().filter(|a| a.status == ApprovalStatus::Pending).collect();
    let decided = v.requests.len() - pending.len();
    let items = pending.iter().map(|a| format!("{}:{}", a.id, a.payload_sha256)).collect::<Vec<_>>().join(",");
    let items_deny = items.clone();
    let can_decide = v.can_decide && v.problem.is_none() && !pending.is_empty();
    let first: serde_json::Value =
        v.requests.first().and_then(|a| serde_json::from_str(&a.arguments).ok()).unwrap_or_default();
    let shared: Vec<(String, String)> = v.same.iter().map(|p| (p.clone(), text_at(&first, p))).collect();
    let differing = v.differing.clone();
    let summary = match tools.len() {
        1 => format!("{} request{} for ", v.requests.len(), if v.requests.len() == 1 { "" } else { "s" }),
        n => format!("{} requests for {n} tools: ", v.requests.len()),
    };
    let tool_names = tools.into_iter().collect::<Vec<_>>().join(", ");
    view! {
        {results}
        {v.problem.clone().map(|p| view! { <p class="callout warn" data-testid="bulk-problem">{p}</p> })}
        <p data-testid="bulk-summary">
            {summary} <code><ExactInline text=tool_names/></code>
            ". Each is decided on its own payload hash; one refused (decided meanwhile, changed) does not stop the others."
        </p>
        {(decided > 0).then(|| view! {
            <p class="muted" data-testid="bulk-decided-note">
                {if pending.is_empty() {
                    "Every picked request is decided; their status is below.".to_string()
                } else {
                    format!("{decided} of the picked requests {} decided and left out of the decision below.",
                        if decided == 1 { "is" } else { "are" })
                }}
            </p>
        })}
        {(!shared.is_empty()).then(|| view! {
            <section class="card">
                <h2>"The same in every request"</h2>
                <dl class="facts" data-testid="bulk-same">
                    {shared.into_iter().map(|(path, value)| view! {
                        <dt><code>{path}</code></dt><dd><CellText text=value/></dd>
                    }).collect_view()}
                </dl>
            </section>
        })}
        <div class="table-scroll">
            <table class="grid compact bulk" data-testid="bulk-table">
                <thead><tr>
                    <th>"Request"</th>
                    {differing.iter().map(|p| view! { <th class="differs"><code>{p.clone()}</code></th> }).collect_view()}
                    <th>"Agent"</th><th>"Run"</th><th>"Status"</th>
                </tr></thead>
                <tbody>
                    {v.requests.iter().map(|a| {
                        let args: serde_json::Value = serde_json::from_str(&a.arguments).unwrap_or_default();
                        view! {
                            <tr data-approval=a.id.clone()>
                                <td><a href=approval_href(&a.id)><code>{a.id.chars().take(12).collect::<String>()}"…"</code></a></td>
                                {differing.iter().map(|p| view! {
                                    <td class="differs"><CellText text=text_at(&args, p)/></td>
                                }).collect_view()}
                                <td>{a.agent.clone().unwrap_or_else(|| "—".into())}</td>
                                <td><a href=run_href(&a.run_id)><code>{a.run_id.clone()}</code></a></td>
                                <td data-testid="bulk-status">{status_of(a)}</td>
                            </tr>
                        }
                    }).collect_view()}
                </tbody>
            </table>
        </div>
        {can_decide.then(move || view! {
            <section class="card decide" data-testid="bulk-decide">
                <h2>{format!("Decision for the {} pending request{}", pending.len(), if pending.len() == 1 { "" } else { "s" })}</h2>
                <div>
                    <ActionError value=decide.value()/>
                </div>
                <div class="decide-forms">
                    <ActionForm action=decide attr:class="inline" attr:data-testid="bulk-approve">
                        <input type="hidden" name="items" value=items/>
                        <input type="hidden" name="decision" value="approve"/>
                        <button type="submit" class="primary">"Approve these exact payloads"</button>
                    </ActionForm>
                    <ActionForm action=decide attr:class="form" attr:data-testid="bulk-deny">
                        <input type="hidden" name="items" value=items_deny/>
                        <input type="hidden" name="decision" value="deny"/>
                        <label>"Reason (required to deny; each agent reads it)"
                            <textarea name="reason" required maxlength="2000" rows="2"></textarea>
                        </label>
                        <button type="submit" class="danger">"Deny all"</button>
                    </ActionForm>
                </div>
            </section>
        })}
    }
}

/// A request's standing in words: "pending, 1 of 2 approvals", "approved by alice".
fn status_of(a: &domain::approvals::Approval) -> String {
    let by = if a.approved_by.is_empty() { a.decided_by.clone().unwrap_or_default() } else { a.approved_by.join(", ") };
    match a.status {
        ApprovalStatus::Pending if a.required_approvals > 1 => {
            format!("pending, {} of {} approvals", a.approved_by.len(), a.required_approvals)
        }
        ApprovalStatus::Pending => "pending".into(),
        ApprovalStatus::Approved | ApprovalStatus::ApprovedWithChanges | ApprovalStatus::Denied if !by.is_empty() => {
            format!("{} by {by}", a.status.as_str().replace('_', " "))
        }
        other => other.as_str().replace('_', " "),
    }
}

/// Longest text a cell shows before "show all".
const CELL_CHARS: usize = 240;

/// A value in a cell: verbatim (line breaks and spaces kept, invisible characters marked),
/// and a long one cut to its start with the whole text one click away, so one long body
/// does not make the table as tall as the body.
#[component]
fn CellText(text: String) -> impl IntoView {
    let count = text.chars().count();
    if count <= CELL_CHARS {
        return view! { <div class="cell-text"><ExactText text=text/></div> }.into_any();
    }
    let start: String = text.chars().take(CELL_CHARS).collect();
    view! {
        <div class="cell-text">
            <details class="long-text">
                <summary><ExactText text=format!("{start}…")/><span class="muted small">{format!("show all {count} characters")}</span></summary>
                <ExactText text=text/>
            </details>
        </div>
    }
    .into_any()
}
