//! The run page's link to its escalations: status, who holds it, and the way to the queue
//! page where a person takes over.

use crate::errors::AppError;
use crate::routes::escalations::{escalation_href, reason_text};
use domain::escalations::Escalation;
use leptos::prelude::*;

#[component]
pub fn RunEscalations(data: Resource<Result<Vec<Escalation>, AppError>>) -> impl IntoView {
    view! {
        <Suspense fallback=|| ()>
            {move || Suspend::new(async move {
                match data.await {
                    Ok(list) if !list.is_empty() => view! {
                        <section class="callout escalation" data-testid="run-escalations">
                            {list.into_iter().map(|e| {
                                let state = if e.open {
                                    format!("open, {}", e.claimed_by.clone().map(|h| format!("claimed by {h}")).unwrap_or_else(|| "unclaimed".into()))
                                } else {
                                    format!("resolved: {}", e.outcome.map(|o| o.as_str().replace('_', " ")).unwrap_or_default())
                                };
                                view! {
                                    <p>
                                        <strong>"Escalated"</strong> {format!(" ({}) · {state} · ", reason_text(&e))}
                                        <a href=escalation_href(&e.id)>"Open the escalation"</a>
                                    </p>
                                }
                            }).collect_view()}
                        </section>
                    }
                    .into_any(),
                    _ => ().into_any(),
                }
            })}
        </Suspense>
    }
}
