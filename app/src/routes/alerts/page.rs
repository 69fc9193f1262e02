//! One alert (`/alerts/{id}`), where webhook notifications link: the same card as the
//! list, with the rule's description, the thresholds it fired under, its timeline (every
//! transition, and every delivery of its notifications with how it went), and for
//! operators a form to silence alerts like it (prefilled with its rule, and its tool and
//! agent when it has one of each).
//!
//! The form keeps what was chosen: typed values live outside the part of the page that
//! reloads after an action and are mirrored into the address, so neither a refused
//! submit nor a reload loses them; without JavaScript a refused post comes back with them
//! in the address (`functions::ssr::form_back_with`).

use super::AlertCard;
use crate::components::status::{ActionError, ErrorBox};
use crate::components::time::format_utc;
use crate::functions::alerts::{load_alert, AcknowledgeAlert, AlertView, CreateSilence, ThresholdsInForce};
use domain::alerts::{AlertEvent, AlertRule};
use domain::models::WebhookDelivery;
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::{use_navigate, use_query_map};
use leptos_router::NavigateOptions;

/// What the silence form holds; `None`: the alert's own value (its rule, tool, agent) or
/// the default.
#[derive(Debug, Clone, Default, PartialEq)]
struct Draft {
    rule: Option<String>,
    agent: Option<String>,
    tool: Option<String>,
    minutes: Option<String>,
    reason: Option<String>,
}

impl Draft {
    fn from_query(q: &leptos_router::params::ParamsMap) -> Draft {
        Draft {
            rule: q.get("rule"),
            agent: q.get("agent"),
            tool: q.get("tool"),
            minutes: q.get("minutes"),
            reason: q.get("reason"),
        }
    }

    /// The query string that brings this draft back.
    fn query(&self) -> String {
        let pairs = [
            ("rule", &self.rule),
            ("agent", &self.agent),
            ("tool", &self.tool),
            ("minutes", &self.minutes),
            ("reason", &self.reason),
        ];
        pairs
            .iter()
            .filter_map(|(k, v)| v.as_ref().map(|v| format!("{k}={}", domain::url::encode(v))))
            .collect::<Vec<_>>()
            .join("&")
    }
}

#[component]
pub fn AlertPage() -> impl IntoView {
    // From the path, decoded once (see `path_id`).
    let id = crate::path_id::path_id("/alerts/");
    let acknowledge = ServerAction::<AcknowledgeAlert>::new();
    crate::components::layout::refresh_nav_after(acknowledge);
    let silence = ServerAction::<CreateSilence>::new();
    let q = use_query_map();
    let draft = RwSignal::new(q.with_untracked(Draft::from_query));
    let data = Resource::new(
        move || (id.get(), acknowledge.version().get(), silence.version().get()),
        |(id, _, _)| load_alert(id),
    );
    view! {
        <Title text="Alert"/>
        <p class="breadcrumb"><a href="/alerts">"Alerts"</a> " / " <code>{move || id.get()}</code></p>
        <ActionError value=acknowledge.value()/>
        <Transition fallback=|| view! { <p class="loading">"Loading alert…"</p> }>
            {move || Suspend::new(async move {
                match data.await {
                    Ok(v) => {
                        let description = v.alert.rule.description();
                        let form = v.can_acknowledge.then(|| view! { <SilenceForm view=v.clone() silence draft/> });
                        let thresholds = v.thresholds.clone().map(|t| view! { <Thresholds rule=v.alert.rule t/> });
                        let timeline = view! { <Timeline events=v.timeline.clone() deliveries=v.deliveries.clone()/> };
                        view! {
                            <h1>{v.alert.rule.title()}</h1>
                            <p class="muted">{description}</p>
                            <AlertCard alert=v.alert now=v.now can_acknowledge=v.can_acknowledge acknowledge linked=false
                                silence=v.silence/>
                            {thresholds}
                            {timeline}
                            {form}
                        }.into_any()
                    }
                    Err(error) => view! { <ErrorBox error/> }.into_any(),
                }
            })}
        </Transition>
    }
}

/// One line of the timeline: a transition of the alert or a delivery of one of its events.
struct Line {
    at: chrono::DateTime<chrono::Utc>,
    kind: &'static str,
    status: Option<String>,
    text: String,
    detail: Option<String>,
}

fn event_line(e: AlertEvent) -> Line {
    Line { at: e.at, kind: "transition", status: Some(e.kind.clone()), text: e.headline(), detail: e.detail }
}

/// "alert.firing to pagerduty: delivered after 2 attempts (HTTP 202)" and the like.
fn delivery_line(d: WebhookDelivery) -> Line {
    let attempts = |n: i64| if n == 1 { "1 attempt".to_string() } else { format!("{n} attempts") };
    let answer = d.last_answer();
    let (how, detail) = match d.status.as_str() {
        "delivered" => (
            format!(
                "delivered{} after {}",
                d.delivered_at.map(|t| format!(" at {}", format_utc(&t))).unwrap_or_default(),
                attempts(d.attempts)
            ),
            (!answer.is_empty()).then_some(answer),
        ),
        "failed" => (format!("failed after {}", attempts(d.attempts)), Some(answer)),
        _ if d.attempts == 0 => ("waiting to be sent".to_string(), None),
        _ => (
            format!(
                "not delivered yet: {} so far{}",
                attempts(d.attempts),
                d.next_attempt_at.map(|t| format!(", next at {}", format_utc(&t))).unwrap_or_default()
            ),
            (!answer.is_empty()).then_some(answer),
        ),
    };
    Line {
        at: d.created_at,
        kind: "delivery",
        status: Some(d.status.clone()),
        text: format!("{} to {}: {how}", d.event_kind, d.target_name),
        detail,
    }
}

/// What happened to the alert and who was told, oldest first.
#[component]
fn Timeline(events: Vec<AlertEvent>, deliveries: Vec<WebhookDelivery>) -> impl IntoView {
    let none_sent = deliveries.is_empty();
    let mut lines: Vec<Line> =
        events.into_iter().map(event_line).chain(deliveries.into_iter().map(delivery_line)).collect();
    lines.sort_by_key(|l| l.at);
    view! {
        <section class="card alert-timeline" data-testid="alert-timeline">
            <h2>"Timeline"</h2>
            <ol class="timeline">
                {lines.into_iter().map(|l| view! {
                    <li data-kind=l.kind data-status=l.status.clone().unwrap_or_default()
                        class:failed=l.status.as_deref() == Some("failed")>
                        <span class="muted small">{format_utc(&l.at)}</span> " " {l.text}
                        {l.detail.map(|d| view! { <span class="muted small detail">{format!(" · {d}")}</span> })}
                    </li>
                }).collect_view()}
            </ol>
            {none_sent.then(|| view! {
                <p class="muted small" data-testid="no-deliveries">
                    "No notification of this alert was queued: no target takes it (see Admin → Webhooks for the routes), or a silence held it back."
                </p>
            })}
        </section>
    }
}

/// Minutes the form offers.
const DURATIONS: [(&str, &str); 4] = [("60", "1 hour"), ("240", "4 hours"), ("1440", "1 day"), ("10080", "7 days")];

/// "Silence alerts like this": blank parts match anything; the rule, tool and agent are
/// prefilled from the alert, and the silence must match it. Works without JavaScript.
#[component]
fn SilenceForm(view: AlertView, silence: ServerAction<CreateSilence>, draft: RwSignal<Draft>) -> impl IntoView {
    let alert_id = view.alert.id.clone();
    let d = draft.get_untracked();
    let rule = d.rule.clone().unwrap_or_else(|| view.alert.rule.as_str().to_string());
    let tool =
        d.tool.clone().unwrap_or_else(|| view.alert.subject.strip_prefix("tool:").unwrap_or_default().to_string());
    let agent = d.agent.clone().unwrap_or_else(|| view.agent.clone().unwrap_or_default());
    let minutes = d.minutes.clone().unwrap_or_else(|| "240".to_string());
    let reason = d.reason.clone().unwrap_or_default();
    let mut durations: Vec<(String, String)> = DURATIONS.iter().map(|(v, l)| (v.to_string(), l.to_string())).collect();
    if !durations.iter().any(|(v, _)| *v == minutes) {
        durations.push((minutes.clone(), format!("{minutes} minutes")));
    }
    // Each change is kept, and put in the address so a reload keeps it too.
    let navigate = use_navigate();
    let path = domain::url::encode(&alert_id);
    let remember = move |change: &dyn Fn(&mut Draft)| {
        draft.update(|d| change(d));
        let query = draft.with_untracked(Draft::query);
        let options = NavigateOptions { replace: true, scroll: false, ..Default::default() };
        navigate(&format!("/alerts/{path}?{query}"), options);
    };
    let remember = std::sync::Arc::new(remember);
    let on = move |set: fn(&mut Draft, String)| {
        let remember = remember.clone();
        move |ev: leptos::ev::Event| {
            let value = event_target_value(&ev);
            remember(&move |d: &mut Draft| set(d, value.clone()));
        }
    };
    let created = move || {
        silence.value().get().and_then(Result::ok).map(|s| {
            view! {
                <p class="callout ok" role="status" data-testid="silence-created">
                    {format!("Silenced {} until {}.", s.scope(), format_utc(&s.ends_at))}
                </p>
            }
        })
    };
    view! {
        <section class="card silence-form" data-testid="silence-form">
            <h2>"Silence alerts like this"</h2>
            <p class="muted small">
                "While a silence lasts, matching alerts still fire and show here, marked, but nobody is "
                "notified. Leave a field blank to match any; it must match this alert. Listed and ended on "
                "the Alerts page."
            </p>
            <ActionError value=silence.value()/>
            {created}
            <ActionForm action=silence attr:class="form">
                <input type="hidden" name="alert" value=alert_id.clone()/>
                <label>"Rule"
                    <select name="rule" on:change=on(|d, v| d.rule = Some(v))>
                        <option value="" selected=rule.is_empty()>"any rule"</option>
                        {AlertRule::ALL.iter().map(|r| view! {
                            <option value=r.as_str() selected=r.as_str() == rule>{r.title()}</option>
                        }).collect_view()}
                    </select>
                </label>
                <label>"Agent" <input type="text" name="agent" value=agent placeholder="any agent"
                    on:change=on(|d, v| d.agent = Some(v))/></label>
                <label>"Tool" <input type="text" name="tool" value=tool placeholder="any tool"
                    on:change=on(|d, v| d.tool = Some(v))/></label>
                <label>"For"
                    <select name="minutes" data-testid="silence-minutes" on:change=on(|d, v| d.minutes = Some(v))>
                        {durations.into_iter().map(|(value, label)| {
                            let on = value == minutes;
                            view! { <option value=value selected=on>{label}</option> }
                        }).collect_view()}
                    </select>
                </label>
                <label>"Why" <textarea name="reason" required=true rows="2"
                    placeholder="e.g. migrating the mail provider; refunds paused"
                    on:change=on(|d, v| d.reason = Some(v))>{reason}</textarea></label>
                <button type="submit" class="primary" data-testid="create-silence">"Silence"</button>
            </ActionForm>
        </section>
    }
}

/// Which version of the rule's settings fired the alert, and its thresholds, so a later
/// change does not rewrite what on-call was paged for.
#[component]
fn Thresholds(rule: domain::alerts::AlertRule, t: ThresholdsInForce) -> impl IntoView {
    let source = match (t.version, &t.saved_by, t.saved_at) {
        (0, _, _) => "the defaults".to_string(),
        (v, Some(by), Some(at)) => {
            format!("version {v}, saved by {by} at {}", crate::components::time::format_utc(&at))
        }
        (v, _, _) => format!("version {v}"),
    };
    let changed = (t.current_version != t.version)
        .then(|| format!(" The settings have changed since: version {} is in force now.", t.current_version));
    view! {
        <p class="small muted" data-testid="thresholds-in-force">
            {format!("Fired under {source} of this rule's settings ({}): {}.", t.settings.severity, super::fires_when(rule, &t.settings))}
            {changed}
        </p>
    }
}
