//! Webhooks: the configured targets (from the config file, URLs without their secret part)
//! and the newest deliveries, failures first to the eye. Every text is rendered as text:
//! titles and errors come from agents and receivers.

use super::AdminTabs;
use crate::components::status::ErrorBox;
use crate::components::time::{MaybeTimestamp, Timestamp};
use crate::functions::admin::load_webhooks_page;
use crate::models::{WebhookDelivery, WebhookTargetSummary};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

#[component]
pub fn WebhooksAdmin() -> impl IntoView {
    let query = use_query_map();
    let failed_only = move || query.with(|q| q.get("failed").is_some_and(|f| f == "1"));
    let page = Resource::new(failed_only, load_webhooks_page);
    view! {
        <Title text="Webhooks"/>
        <h1>"Webhooks"</h1>
        <AdminTabs/>
        <Suspense fallback=|| view! { <p class="loading">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match page.await {
                    Ok(page) => view! {
                        <h2>"Targets"</h2>
                        <Targets targets=page.targets/>
                        <h2>"Deliveries"</h2>
                        <p data-testid="webhook-counts">
                            {page.pending} " pending, "
                            <span class=(page.failed > 0).then_some("warn-text")>{page.failed} " failed"</span>
                            " · "
                            {if page.failed_only {
                                view! { <a href="/admin/webhooks">"Show all"</a> }.into_any()
                            } else {
                                view! { <a href="/admin/webhooks?failed=1">"Show failures only"</a> }.into_any()
                            }}
                        </p>
                        <Deliveries deliveries=page.deliveries/>
                    }
                    .into_any(),
                    Err(error) => view! { <ErrorBox error/> }.into_any(),
                }
            })}
        </Suspense>
    }
}

#[component]
fn Targets(targets: Vec<WebhookTargetSummary>) -> impl IntoView {
    if targets.is_empty() {
        return view! {
            <p class="muted">
                "No webhooks configured. Add " <code>"[[webhooks]]"</code>
                " entries with name, url and format to the config file and restart."
            </p>
        }
        .into_any();
    }
    view! {
        <table class="grid" data-testid="webhook-targets">
            <thead><tr><th>"Name"</th><th>"URL"</th><th>"Format"</th><th>"Events"</th></tr></thead>
            <tbody>
                {targets.into_iter().map(|t| {
                    let events = if t.events.is_empty() { "all".to_string() } else { t.events.join(", ") };
                    view! {
                        <tr>
                            <td>{t.name}</td>
                            <td><code>{t.url}</code></td>
                            <td>{t.format}</td>
                            <td>{events}</td>
                        </tr>
                    }
                }).collect_view()}
            </tbody>
        </table>
    }
    .into_any()
}

#[component]
fn Deliveries(deliveries: Vec<WebhookDelivery>) -> impl IntoView {
    if deliveries.is_empty() {
        return view! { <p class="muted">"No deliveries."</p> }.into_any();
    }
    view! {
        <table class="grid" data-testid="webhook-deliveries">
            <thead>
                <tr>
                    <th>"Queued"</th><th>"Event"</th><th>"Target"</th><th>"Status"</th><th>"Attempts"</th>
                    <th>"Last answer"</th><th>"Next attempt"</th>
                </tr>
            </thead>
            <tbody>
                {deliveries.into_iter().map(|d| {
                    let failed = d.is_failed();
                    let status_attr = d.status.clone();
                    let badge = match d.status.as_str() {
                        "delivered" => "badge badge-ok",
                        "failed" => "badge outcome-error",
                        _ => "badge badge-muted",
                    };
                    let answer = match (d.last_status, d.last_error) {
                        (Some(code), Some(error)) => format!("HTTP {code}: {error}"),
                        (Some(code), None) => format!("HTTP {code}"),
                        (None, Some(error)) => error,
                        (None, None) => String::new(),
                    };
                    view! {
                        <tr class:delivery-failed=failed data-status=status_attr>
                            <td><Timestamp at=d.created_at/></td>
                            <td><code>{d.event_kind}</code> " " {d.title}</td>
                            <td>{d.target_name}</td>
                            <td><span class=badge>{d.status}</span></td>
                            <td>{d.attempts}</td>
                            <td class="small">{answer}</td>
                            <td><MaybeTimestamp at=d.next_attempt_at none="—"/></td>
                        </tr>
                    }
                }).collect_view()}
            </tbody>
        </table>
    }
    .into_any()
}
