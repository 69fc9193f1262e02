//! Webhooks: the configured targets (from the config file, URLs without their secret part,
//! whether each is signed), the alert routes with a "Send test" button each, and the
//! newest deliveries, failures first to the eye. Every text is rendered as text: titles
//! and errors come from agents and receivers.

use super::AdminTabs;
use crate::components::status::{ActionError, ErrorBox};
use crate::components::time::{MaybeTimestamp, Timestamp};
use crate::functions::admin::{load_webhooks_page, SendTestAlert};
use domain::models::{AlertRouteSummary, WebhookDelivery, WebhookTargetSummary};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

#[component]
pub fn WebhooksAdmin() -> impl IntoView {
    let query = use_query_map();
    let failed_only = move || query.with(|q| q.get("failed").is_some_and(|f| f == "1"));
    let test = ServerAction::<SendTestAlert>::new();
    let page = Resource::new(move || (failed_only(), test.version().get()), |(failed, _)| load_webhooks_page(failed));
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
                        <h2>"Alert routes"</h2>
                        <p class="muted small">
                            "The first route that matches an alert's rule and severity decides where it goes. "
                            "Send test queues a test alert, firing and then resolved, to the route's targets."
                        </p>
                        <ActionError value=test.value()/>
                        {move || test.value().get().and_then(Result::ok).map(|done| view! {
                            <p class="callout ok" role="status" data-testid="test-sent">{done}</p>
                        })}
                        <Routes routes=page.routes test/>
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
            <thead><tr><th>"Name"</th><th>"URL"</th><th>"Format"</th><th>"Events"</th><th>"Signed"</th></tr></thead>
            <tbody>
                {targets.into_iter().map(|t| {
                    let events = if t.events.is_empty() { "all".to_string() } else { t.events.join(", ") };
                    view! {
                        <tr>
                            <td>{t.name}</td>
                            <td><code>{t.url}</code></td>
                            <td>{t.format}</td>
                            <td>{events}</td>
                            <td>{if t.signed { "yes" } else { "no: add a secret" }}</td>
                        </tr>
                    }
                }).collect_view()}
            </tbody>
        </table>
    }
    .into_any()
}

#[component]
fn Routes(routes: Vec<AlertRouteSummary>, test: ServerAction<SendTestAlert>) -> impl IntoView {
    let all = |list: Vec<String>| if list.is_empty() { "any".to_string() } else { list.join(", ") };
    view! {
        <table class="grid" data-testid="alert-routes">
            <thead><tr><th>"Route"</th><th>"Rules"</th><th>"Severities"</th><th>"Targets"</th><th></th></tr></thead>
            <tbody>
                {routes.into_iter().map(|r| {
                    let targets = if r.targets.is_empty() { "nobody".to_string() } else { r.targets.join(", ") };
                    let (name, hidden) = (r.name.clone(), r.name.clone());
                    view! {
                        <tr data-route=r.name>
                            <td>{name}</td>
                            <td>{all(r.rules)}</td>
                            <td>{all(r.severities)}</td>
                            <td>{targets}</td>
                            <td>
                                <ActionForm action=test>
                                    <input type="hidden" name="route" value=hidden/>
                                    <button type="submit" class="small">"Send test"</button>
                                </ActionForm>
                            </td>
                        </tr>
                    }
                }).collect_view()}
            </tbody>
        </table>
    }
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
                    let answer = d.last_answer();
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
