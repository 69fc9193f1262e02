//! The run list: every agent run with its termination reason, cost and flags.

use crate::components::empty_state::EmptyState;
use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn RunsPage() -> impl IntoView {
    view! {
        <Title text="Runs"/>
        <h1>"Runs"</h1>
        <EmptyState title="No runs yet">
            <p>
                "Every run your agents make will be listed here: its termination reason (completed, "
                "step limit, budget, error, escalated), cost, tokens, steps and tool calls, and flags "
                "for duplicate side effects, runs that completed without reading anything, and tool "
                "calls that ran without their approval."
            </p>
            <p>
                "Agents send their OpenTelemetry traces to Flightdeck with a token that has the "
                <code>"ingest"</code> " scope (create one under Admin → API tokens). "
                "The README's “Sending traces” section shows the exporter settings."
            </p>
        </EmptyState>
    }
}
