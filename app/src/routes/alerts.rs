//! Alerts for on-call: what must never happen, and what is drifting.

use crate::components::empty_state::EmptyState;
use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn AlertsPage() -> impl IntoView {
    view! {
        <Title text="Alerts"/>
        <h1>"Alerts"</h1>
        <EmptyState title="Nothing is firing">
            <p>
                "Alerts fire on what must never happen: irreversible tool executions over a count, a "
                "tool that needed approval running without one, a spike in deduplicated calls, an "
                "escalation nobody has picked up, and jumps in the upper percentiles of cost per run."
            </p>
        </EmptyState>
    }
}
