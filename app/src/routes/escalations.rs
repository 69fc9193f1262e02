//! The escalation queue: runs handed to a person, with what was done and what remains.

use crate::components::empty_state::EmptyState;
use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn EscalationsPage() -> impl IntoView {
    view! {
        <Title text="Escalations"/>
        <h1>"Escalations"</h1>
        <EmptyState title="No open escalations">
            <p>
                "When an agent hands a run to a human, it lands here, oldest first, with the reason, "
                "the blocking fact, what was already done (with external resource ids) and what "
                "remains, so whoever takes over does not fire the same side effects twice."
            </p>
            <p>
                "Agents escalate through " <code>"/api/v1/escalations"</code>
                " (scope " <code>"escalations"</code> ") or by ending a traced run as "
                <code>"escalated"</code> "."
            </p>
        </EmptyState>
    }
}
