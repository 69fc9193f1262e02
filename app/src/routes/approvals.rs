//! The approval inbox: tool calls waiting for a person to approve or deny them.

use crate::components::empty_state::EmptyState;
use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn ApprovalsPage() -> impl IntoView {
    view! {
        <Title text="Approvals"/>
        <h1>"Approvals"</h1>
        <EmptyState title="No approval requests">
            <p>
                "When an agent asks before running a tool call, the request appears here with the "
                "exact payload that would go out (every argument, verbatim), for one approver to "
                "approve or deny with a reason."
            </p>
            <p>
                "Agents ask through the REST API under " <code>"/api/v1/approvals"</code>
                " with a token that has the " <code>"approvals"</code> " scope."
            </p>
        </EmptyState>
    }
}
