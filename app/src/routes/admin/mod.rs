//! The admin area: users and roles, agent API tokens, tool policies, webhooks, alert
//! rules, and the audit log.

pub mod alerts;
pub mod audit;
pub mod policies;
pub mod prices;
pub mod rules;
pub mod tokens;
pub mod tools;
pub mod users;
pub mod webhooks;

use domain::access::Role;
use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn AdminHome() -> impl IntoView {
    view! {
        <Title text="Admin"/>
        <h1>"Admin"</h1>
        <AdminTabs/>
        <ul class="cards">
            <li class="card">
                <h2><a href="/admin/users">"Users and roles"</a></h2>
                <p>
                    {Role::ALL
                        .iter()
                        .map(|r| view! { <span><strong>{r.to_string()}</strong> ": " {r.describe()} ". "</span> })
                        .collect_view()}
                </p>
            </li>
            <li class="card">
                <h2><a href="/admin/tokens">"API tokens"</a></h2>
                <p>"Bearer tokens for agents: sending traces, asking for approvals, filing escalations, reading runs."</p>
            </li>
            <li class="card">
                <h2><a href="/admin/policies">"Tool policies"</a></h2>
                <p>"Which tools read, write or do something irreversible, for agents whose spans do not say."</p>
            </li>
            <li class="card">
                <h2><a href="/admin/rules">"Approval rules"</a></h2>
                <p>"Rules on arguments that auto-approve, deny or ask two people, tried on history and watched in shadow first."</p>
            </li>
            <li class="card">
                <h2><a href="/admin/tools">"Tools"</a></h2>
                <p>"Every tool seen in spans, which ones nobody has classified yet, and a one-click classification."</p>
            </li>
            <li class="card">
                <h2><a href="/admin/prices">"Model prices"</a></h2>
                <p>"What tokens cost per model, for runs whose agent sends no cost; recompute stored runs after a change."</p>
            </li>
            <li class="card">
                <h2><a href="/admin/webhooks">"Webhooks"</a></h2>
                <p>"Where new approval requests, escalations and alerts are announced, and which deliveries failed."</p>
            </li>
            <li class="card">
                <h2><a href="/admin/alerts">"Alert rules"</a></h2>
                <p>"Which alerts page on-call, how loudly, and their thresholds, windows and baselines."</p>
            </li>
            <li class="card">
                <h2><a href="/admin/audit">"Audit log"</a></h2>
                <p>"Who signed in, failed to, and changed users or tokens: when and from where."</p>
            </li>
        </ul>
    }
}

#[component]
pub fn AdminTabs() -> impl IntoView {
    use leptos_router::components::A;
    view! {
        <nav class="tabs" aria-label="Admin">
            <A href="/admin/users">"Users"</A>
            <A href="/admin/tokens">"API tokens"</A>
            <A href="/admin/tools">"Tools"</A>
            <A href="/admin/policies">"Tool policies"</A>
            <A href="/admin/rules">"Approval rules"</A>
            <A href="/admin/prices">"Prices"</A>
            <A href="/admin/webhooks">"Webhooks"</A>
            <A href="/admin/alerts">"Alert rules"</A>
            <A href="/admin/audit">"Audit log"</A>
        </nav>
    }
}

/// The secret shown once after it was made.
#[component]
pub fn OneTimeSecretBox(secret: domain::models::OneTimeSecret) -> impl IntoView {
    view! {
        <div class="secret-box" role="status" data-testid="one-time-secret">
            <p>
                <strong>{secret.label}</strong>
                " (shown once; copy it now, Flightdeck keeps only a hash):"
            </p>
            <code class="secret">{secret.secret}</code>
        </div>
    }
}
