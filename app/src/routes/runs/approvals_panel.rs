//! The run page's approval panel: every approval request the run filed (linked to its
//! page) and every violation ingest recorded: tool calls that ran without a valid approval.

use crate::components::badges::Tag;
use crate::components::status::ErrorBox;
use crate::components::time::format_utc;
use crate::errors::AppError;
use crate::routes::approvals::approval_href;
use domain::approvals::{Approval, Violation};
use leptos::prelude::*;

#[component]
pub fn RunApprovals(data: Resource<Result<(Vec<Approval>, Vec<Violation>), AppError>>) -> impl IntoView {
    view! {
        <Suspense fallback=|| ()>
            {move || Suspend::new(async move {
                match data.await {
                    Ok((requests, violations)) if requests.is_empty() && violations.is_empty() => None,
                    Ok((requests, violations)) => Some(view! {
                        <section class="panel" data-testid="run-approvals">
                            <h2>"Approvals"</h2>
                            {(!violations.is_empty()).then(|| view! {
                                <div class="callout danger" data-testid="violations">
                                    <strong>{format!("{} approval violation(s)", violations.len())}</strong>
                                    <ul>
                                        {violations.into_iter().map(|v| view! {
                                            <li>
                                                <code>{v.tool.clone()}</code> " " {v.kind.describe()} ": " {v.detail.clone()}
                                                " " <span class="muted small">{format!("(span {})", v.span_id)}</span>
                                            </li>
                                        }).collect_view()}
                                    </ul>
                                </div>
                            })}
                            {(!requests.is_empty()).then(|| view! {
                                <table class="grid">
                                    <thead><tr><th>"Requested"</th><th>"Tool"</th><th>"Status"</th><th>"Decided by"</th><th>"Executed"</th><th></th></tr></thead>
                                    <tbody>
                                        {requests.into_iter().map(|a| view! {
                                            <tr>
                                                <td>{format_utc(&a.created_at)}</td>
                                                <td><code>{a.tool.clone()}</code></td>
                                                <td><Tag kind="approval" value=a.status.as_str()/></td>
                                                <td>{a.decided_by.clone().unwrap_or_else(|| "—".into())}</td>
                                                <td>{if a.used_by_span.is_some() { "yes" } else { "no" }}</td>
                                                <td><a href=approval_href(&a.id)>"Open"</a></td>
                                            </tr>
                                        }).collect_view()}
                                    </tbody>
                                </table>
                            })}
                        </section>
                    }.into_any()),
                    Err(error) => Some(view! { <section class="panel"><ErrorBox error/></section> }.into_any()),
                }
            })}
        </Suspense>
    }
}
