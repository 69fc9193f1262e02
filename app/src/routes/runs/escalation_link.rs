//! The run page's link to its escalations: status, who holds it, and the way to the queue
//! page where a person takes over.

use crate::functions::escalations::load_run_escalations;
use crate::routes::escalations::{escalation_href, reason_text};
use leptos::prelude::*;

#[component]
pub fn RunEscalations(run_id: String) -> impl IntoView {
    let data = Resource::new(move || run_id.clone(), load_run_escalations);
    view! {
        <Suspense fallback=|| ()>
            {move || Suspend::new(async move {
                match data.await {
                    Ok(list) if !list.is_empty() => Some(view! {
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
                    }),
                    _ => None,
                }
            })}
        </Suspense>
    }
}
