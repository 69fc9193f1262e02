//! The panel a page shows when it has nothing yet: what will appear and how to get there.

use leptos::prelude::*;

#[component]
pub fn EmptyState(#[prop(into)] title: String, children: Children) -> impl IntoView {
    view! {
        <section class="empty-state">
            <h2>{title}</h2>
            <div class="empty-body">{children()}</div>
        </section>
    }
}
