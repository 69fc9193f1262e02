//! The run page's guarded calls: every execution-ledger entry of the run (asked before a
//! side effect through `POST /api/v1/calls`) with its state, attempts, dedupes and
//! external id, next to the spans that carried its key. Unknown outcomes come first.

use crate::components::badges::Tag;
use crate::components::status::ErrorBox;
use crate::components::time::format_utc;
use crate::errors::AppError;
use crate::functions::ledger::RunCall;
use crate::routes::approvals::approval_href;
use domain::ledger::EntryState;
use leptos::prelude::*;

#[component]
pub fn RunCalls(data: Resource<Result<Vec<RunCall>, AppError>>) -> impl IntoView {
    view! {
        <Suspense fallback=|| ()>
            {move || Suspend::new(async move {
                match data.await {
                    Ok(calls) if calls.is_empty() => None,
                    Ok(mut calls) => {
                        // Unknown outcomes first: each needs a person.
                        calls.sort_by_key(|c| (c.entry.state != EntryState::Unknown, c.entry.step_index));
                        let deduped: i64 = calls.iter().map(|c| c.entry.deduped).sum();
                        Some(view! {
                            <section class="panel" data-testid="run-calls">
                                <h2>"Guarded calls"</h2>
                                <p class="muted small">
                                    {format!("{} call(s) in the execution ledger; {deduped} repeat(s) answered already_done instead of running again.", calls.len())}
                                </p>
                                <div class="table-scroll">
                                <table class="grid">
                                    <thead><tr>
                                        <th>"Step"</th><th>"Tool"</th><th>"State"</th><th>"Attempts"</th><th>"Deduped"</th>
                                        <th>"External id"</th><th>"Natural key"</th><th>"Spans"</th><th>"Started"</th><th></th>
                                    </tr></thead>
                                    <tbody>
                                        {calls.into_iter().map(|c| {
                                            let e = c.entry;
                                            let unknown = e.state == EntryState::Unknown;
                                            let link = match (&e.escalation_id, &e.approval_id) {
                                                (Some(esc), _) => Some(view! { <a href=format!("/escalations/{esc}")>"Escalation"</a> }.into_any()),
                                                (None, Some(apr)) => Some(view! { <a href=approval_href(apr)>"Approval"</a> }.into_any()),
                                                _ => None,
                                            };
                                            view! {
                                                <tr class:danger=unknown data-testid="call-row">
                                                    <td>{e.step_index}</td>
                                                    <td><code>{e.tool.clone()}</code></td>
                                                    <td><Tag kind="call" value=e.state.as_str()/></td>
                                                    <td>{e.attempts}</td>
                                                    <td>{e.deduped}</td>
                                                    <td><code>{e.external_id.clone().unwrap_or_default()}</code></td>
                                                    <td><code>{e.natural_key.clone()}</code></td>
                                                    <td>{if c.span_ids.is_empty() { "none yet".to_string() } else { c.span_ids.join(", ") }}</td>
                                                    <td>{format_utc(&e.started_at)}</td>
                                                    <td>{link}</td>
                                                </tr>
                                            }
                                        }).collect_view()}
                                    </tbody>
                                </table>
                                </div>
                            </section>
                        }.into_any())
                    }
                    Err(error) => Some(view! { <section class="panel"><ErrorBox error/></section> }.into_any()),
                }
            })}
        </Suspense>
    }
}
