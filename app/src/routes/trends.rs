//! Trends: the distributions worth a weekly look.

use crate::components::empty_state::EmptyState;
use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn TrendsPage() -> impl IntoView {
    view! {
        <Title text="Trends"/>
        <h1>"Trends"</h1>
        <EmptyState title="No data to chart yet">
            <p>
                "Once runs arrive, this page charts the termination reasons over time, tool calls per "
                "run, the share of runs that completed without a read tool, deduplicated calls and "
                "duplicate side effects, and cost per run at p50, p95 and p99."
            </p>
        </EmptyState>
    }
}
