//! Alerts for on-call (`/alerts`): firing alerts first (then acknowledged), each with its
//! severity, value against threshold, since when, and links to the runs, approvals or
//! escalations behind it; acknowledging needs `operator`. `?view=history` lists resolved
//! alerts. Silences (active, then recently ended; `operator` may end one) and the rules
//! with their thresholds are below the list. Refreshes every 10 s with JavaScript on.

pub mod page;

use crate::components::badges::Tag;
use crate::components::empty_state::EmptyState;
use crate::components::status::{ActionError, ErrorBox};
use crate::components::time::{ago, format_utc};
use crate::functions::alerts::{
    load_alert_rules, load_alerts, AcknowledgeAlert, AlertsView, CreateMaintenanceWindow, EndSilence,
};
use domain::alerts::settings::RuleSettings;
use domain::alerts::silences::Silence;
use domain::alerts::{window_text, Alert, AlertItem, AlertRule, AlertState, ItemKind, Unit};
use domain::url::{encode, run_href};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

pub fn alert_href(id: &str) -> String {
    format!("/alerts/{}", encode(id))
}

fn item_href(item: &AlertItem) -> String {
    match item.kind {
        ItemKind::Run => run_href(&item.id),
        ItemKind::Approval => format!("/approvals/{}", encode(&item.id)),
        ItemKind::Escalation => format!("/escalations/{}", encode(&item.id)),
    }
}

#[component]
pub fn AlertsPage() -> impl IntoView {
    let q = use_query_map();
    let history = Memo::new(move |_| q.with(|q| q.get("view").as_deref() == Some("history")));
    let acknowledge = ServerAction::<AcknowledgeAlert>::new();
    crate::components::layout::refresh_nav_after(acknowledge);
    let end = ServerAction::<EndSilence>::new();
    let window = ServerAction::<CreateMaintenanceWindow>::new();
    let tick = RwSignal::new(0u32);
    #[cfg(feature = "hydrate")]
    {
        if let Ok(handle) =
            set_interval_with_handle(move || tick.update(|t| *t += 1), std::time::Duration::from_secs(10))
        {
            on_cleanup(move || handle.clear());
        }
    }
    let alerts = Resource::new(
        move || (history.get(), tick.get(), acknowledge.version().get(), end.version().get(), window.version().get()),
        |(history, _, _, _, _)| load_alerts(history),
    );
    let rules = Resource::new(|| (), |_| load_alert_rules());
    view! {
        <Title text="Alerts"/>
        <h1>"Alerts"</h1>
        <nav class="tabs" aria-label="Alert views">
            <a href="/alerts" class:active=move || !history.get()>"Open"</a>
            <a href="/alerts?view=history" class:active=move || history.get()>"History"</a>
        </nav>
        <ActionError value=acknowledge.value()/>
        <Transition fallback=|| view! { <p class="loading">"Loading alerts…"</p> }>
            {move || Suspend::new(async move {
                let history = history.get_untracked();
                match alerts.await {
                    Ok(view) => {
                        let silences = view.silences.clone();
                        let can = view.can_acknowledge;
                        let now = view.now;
                        view! {
                            <AlertList view history acknowledge/>
                            <Silences silences can_end=can now end/>
                            <div class="maintenance-wrap">{can.then(|| view! { <MaintenanceForm window/> })}</div>
                        }.into_any()
                    }
                    Err(error) => view! { <ErrorBox error/> }.into_any(),
                }
            })}
        </Transition>
        <Suspense fallback=|| ()>
            {move || Suspend::new(async move {
                rules.await.ok().map(|r| view! { <RulesSummary rules=r.rules can_edit=r.can_edit/> })
            })}
        </Suspense>
    }
}

#[component]
fn AlertList(view: AlertsView, history: bool, acknowledge: ServerAction<AcknowledgeAlert>) -> impl IntoView {
    let evaluated = match &view.last_evaluation {
        Some(e) => format!("Rules last evaluated {} by {} (took {} ms).", ago(&e.at, &view.now), e.instance, e.took_ms),
        None => "The rules have not been evaluated yet.".to_string(),
    };
    let list = if view.alerts.is_empty() && !history {
        view! {
            <EmptyState title="Nothing is firing">
                <p>
                    "Alerts fire on what must never happen: irreversible tool executions over a count, a tool "
                    "that needed approval running without one, a spike in deduplicated calls, an escalation "
                    "nobody has picked up, a jump in the upper percentiles of cost per run, runs that "
                    "failed to recover, and a guarded call whose outcome nobody knows. Never on a single "
                    "tool failure."
                </p>
            </EmptyState>
        }
        .into_any()
    } else if view.alerts.is_empty() {
        view! { <p class="muted">"No resolved alerts yet."</p> }.into_any()
    } else {
        let now = view.now;
        let can = view.can_acknowledge;
        let silences = view.silences;
        view! {
            <ul class="alert-list" data-testid="alert-list">
                {view.alerts.into_iter().map(|alert| {
                    let silence = silences.iter().find(|s| Some(&s.id) == alert.silenced_by.as_ref()).cloned();
                    view! { <li><AlertCard alert now can_acknowledge=can acknowledge linked=true silence/></li> }
                }).collect_view()}
            </ul>
        }
        .into_any()
    };
    view! {
        <p class="muted small" data-testid="last-evaluation">{evaluated}</p>
        {list}
    }
}

/// One alert: what, how bad, since when, who is on it, and what is behind it.
#[component]
pub fn AlertCard(
    alert: Alert,
    now: chrono::DateTime<chrono::Utc>,
    can_acknowledge: bool,
    acknowledge: ServerAction<AcknowledgeAlert>,
    /// Whether the title links to the alert's own page.
    linked: bool,
    /// The silence that held its notifications back (when the alert names one).
    silence: Option<Silence>,
) -> impl IntoView {
    // Held back from the start, or silenced after its firing went out (then what it
    // opened elsewhere is still kept up to date).
    let held = if alert.notified_at.is_some() {
        "Silenced: notified when it fired; nothing more is sent but its acknowledgement and resolution"
    } else {
        "Silenced: not notified"
    };
    let silenced = alert.silenced_by.clone().map(|id| match silence {
        Some(s) => {
            format!("{held} ({}, by {} until {}): {}", s.scope(), s.created_by, format_utc(&s.ends_at), s.reason)
        }
        None => format!("{held} (silence {id})"),
    });
    let state = alert.state;
    let since = match state {
        AlertState::Resolved => format!(
            "Fired {} · resolved {}",
            format_utc(&alert.fired_at),
            alert.resolved_at.map(|t| format_utc(&t)).unwrap_or_default()
        ),
        _ => format!(
            "Firing for {} (since {})",
            ago(&alert.fired_at, &now).trim_end_matches(" ago"),
            format_utc(&alert.fired_at)
        ),
    };
    let acked = alert.acknowledged_by.clone().map(|who| {
        format!(
            "Acknowledged by {who}{}",
            alert.acknowledged_at.map(|t| format!(" at {}", format_utc(&t))).unwrap_or_default()
        )
    });
    let title = alert.title.clone();
    let heading = if linked {
        view! { <a href=alert_href(&alert.id)>{alert.rule.title()}</a> }.into_any()
    } else {
        view! { <span>{alert.rule.title()}</span> }.into_any()
    };
    let items = alert.items.clone();
    let behind = domain::alerts::behind_it(&alert.items, alert.items_total);
    let id = alert.id.clone();
    view! {
        <article class=format!("card alert state-{} level-{}", state.as_str(), alert.severity.as_str())
            data-alert=alert.id.clone() data-rule=alert.rule.as_str() data-state=state.as_str()>
            <header class="alert-head">
                <Tag kind="severity" value=alert.severity.as_str()/>
                " "
                <Tag kind="alert" value=state.as_str()/>
                " "
                <strong class="alert-rule">{heading}</strong>
                {alert.subject.strip_prefix("tool:").map(|t| view! { " " <code>{t.to_string()}</code> })}
            </header>
            <p class="alert-title" data-testid="alert-title">{title}</p>
            <p class="alert-figures">
                <span class="value" data-testid="alert-value">{alert.unit.format(alert.value)}</span>
                " against a threshold of "
                <span class="threshold">{alert.unit.format(alert.threshold)}</span>
                " · " {since}
            </p>
            {acked.map(|a| view! { <p class="small" data-testid="acknowledged-by">{a}</p> })}
            {silenced.map(|text| view! { <p class="small silenced" data-testid="silenced">{text}</p> })}
            {(!items.is_empty()).then(|| view! {
                <details class="alert-items" open=true>
                    <summary data-testid="behind-it">{format!("Behind it: {behind}")}</summary>
                    <ul>
                        {items.into_iter().map(|item| {
                            let kind = match item.kind { ItemKind::Run => "run", ItemKind::Approval => "approval", ItemKind::Escalation => "escalation" };
                            view! {
                                <li data-item-kind=kind>
                                    {kind} " " <a href=item_href(&item) data-testid="alert-item"><code>{item.id.clone()}</code></a>
                                    " " <span class="muted">{item.note.clone()}</span>
                                </li>
                            }
                        }).collect_view()}
                    </ul>
                </details>
            })}
            {(state == AlertState::Firing).then(|| if can_acknowledge {
                view! {
                    <ActionForm action=acknowledge attr:class="inline">
                        <input type="hidden" name="id" value=id.clone()/>
                        <button type="submit" class="primary" data-testid="acknowledge">"Acknowledge"</button>
                    </ActionForm>
                }.into_any()
            } else {
                view! { <p class="muted small" data-testid="cannot-acknowledge">"Acknowledging needs the operator role."</p> }.into_any()
            })}
        </article>
    }
}

/// Active silences (with "End now" for operators), then recently ended ones.
#[component]
fn Silences(
    silences: Vec<Silence>,
    can_end: bool,
    now: chrono::DateTime<chrono::Utc>,
    end: ServerAction<EndSilence>,
) -> impl IntoView {
    if silences.is_empty() {
        return view! {
            <section class="card silences" data-testid="silences">
                <h2>"Silences"</h2>
                <ActionError value=end.value()/>
                <p class="muted small">"None. Silence an alert from its page when you know about it and are on it."</p>
            </section>
        }
        .into_any();
    }
    view! {
        <section class="card silences" data-testid="silences">
            <h2>"Silences"</h2>
            <ActionError value=end.value()/>
            <table class="grid">
                <thead><tr><th>"Silences"</th><th>"Why"</th><th>"By"</th><th>"Until"</th><th></th></tr></thead>
                <tbody>
                    {silences.into_iter().map(|s| {
                        let active = s.is_current(now);
                        let until = match &s.ended_by {
                            Some(who) => format!("ended by {who}"),
                            None if active && !s.is_active(now) => {
                                format!("{} (outside its hours now)", format_utc(&s.ends_at))
                            }
                            None if active => format_utc(&s.ends_at),
                            None => format!("ended {}", format_utc(&s.ends_at)),
                        };
                        let id = s.id.clone();
                        view! {
                            <tr class:muted=!active data-silence=s.id.clone() data-active=active.to_string()>
                                <td>{s.scope()}</td>
                                <td>{s.reason.clone()}</td>
                                <td>{s.created_by.clone()}</td>
                                <td>{until}</td>
                                <td>{(active && can_end).then(|| view! {
                                    <ActionForm action=end attr:class="inline">
                                        <input type="hidden" name="id" value=id/>
                                        <button type="submit" class="small" data-testid="end-silence">"End now"</button>
                                    </ActionForm>
                                })}</td>
                            </tr>
                        }
                    }).collect_view()}
                </tbody>
            </table>
        </section>
    }
    .into_any()
}

/// A silence on a weekly schedule. Works without JavaScript.
#[component]
fn MaintenanceForm(window: ServerAction<CreateMaintenanceWindow>) -> impl IntoView {
    const DAYS: [(&str, &str); 7] = [
        ("mon", "Mon"),
        ("tue", "Tue"),
        ("wed", "Wed"),
        ("thu", "Thu"),
        ("fri", "Fri"),
        ("sat", "Sat"),
        ("sun", "Sun"),
    ];
    view! {
        <details class="maintenance" data-testid="maintenance-form">
            <summary>"Add a maintenance window"</summary>
            <ActionError value=window.value()/>
            <ActionForm action=window attr:class="form">
                <p class="muted small">
                    "Silences matching alerts only inside these hours (UTC) on the ticked days, every week "
                    "until it ends. Leave rule, agent or tool blank to match any; name at least one."
                </p>
                <label>"Rule"
                    <select name="rule">
                        <option value="">"any rule"</option>
                        {AlertRule::ALL.iter().map(|r| view! { <option value=r.as_str()>{r.title()}</option> }).collect_view()}
                    </select>
                </label>
                <label>"Agent" <input type="text" name="agent" placeholder="any agent"/></label>
                <label>"Tool" <input type="text" name="tool" placeholder="any tool"/></label>
                <fieldset class="days">
                    <legend>"Days"</legend>
                    {DAYS.iter().map(|(name, label)| view! {
                        <label class="inline"><input type="checkbox" name=*name/> " " {*label}</label>
                    }).collect_view()}
                </fieldset>
                <label>"From (UTC)" <input type="time" name="from" required=true value="22:00"/></label>
                <label>"To (UTC)" <input type="time" name="to" required=true value="02:00"/></label>
                <label>"For how many weeks" <input type="number" name="weeks" min="1" max="52" value="4" required=true/></label>
                <label>"Why" <textarea name="reason" required=true rows="2" placeholder="e.g. nightly batch migration"></textarea></label>
                <button type="submit" class="primary" data-testid="create-window">"Add the window"</button>
            </ActionForm>
        </details>
    }
}

/// The rules and their thresholds as they stand, read-only; admins edit them under
/// Admin → Alert rules.
#[component]
fn RulesSummary(rules: Vec<(AlertRule, RuleSettings)>, can_edit: bool) -> impl IntoView {
    view! {
        <section class="card rules-summary" data-testid="rules-summary">
            <h2>"Rules"</h2>
            <table class="grid">
                <thead><tr><th>"Rule"</th><th>"Severity"</th><th>"Fires when"</th></tr></thead>
                <tbody>
                    {rules.into_iter().map(|(rule, s)| view! {
                        <tr class:muted=!s.enabled>
                            <td>{rule.title()}</td>
                            <td>{if s.enabled { s.severity.as_str().to_string() } else { "off".to_string() }}</td>
                            <td>{fires_when(rule, &s)}</td>
                        </tr>
                    }).collect_view()}
                </tbody>
            </table>
            {can_edit.then(|| view! { <p><a href="/admin/alerts">"Edit the rules and thresholds"</a></p> })}
        </section>
    }
}

/// One sentence with the rule's thresholds filled in.
pub fn fires_when(rule: AlertRule, s: &RuleSettings) -> String {
    let window = window_text(s.window_seconds);
    let baseline = window_text(s.baseline_seconds);
    match rule {
        AlertRule::IrreversibleExecutions => {
            let mut text = format!("more than {} irreversible executions in {window}", s.threshold);
            for t in &s.per_tool {
                text.push_str(&format!("; more than {} of {} in {window}", t.limit, t.tool));
            }
            text
        }
        AlertRule::ApprovalViolation => format!("any tool call without a valid approval in the last {window}"),
        AlertRule::DedupedSpike => format!(
            "deduplicated share in {window} above {}× its {baseline} baseline and above {}% (at least {} calls)",
            s.factor, s.threshold, s.min_samples
        ),
        AlertRule::EscalationBacklog => format!(
            "an {}escalation open longer than {}",
            if s.only_unclaimed { "unclaimed " } else { "" },
            Unit::Seconds.format(s.threshold)
        ),
        AlertRule::CostPerRunJump => format!(
            "p95 or p99 cost per run in {window} above {}× the {baseline} baseline (at least {} runs each)",
            s.factor, s.min_samples
        ),
        AlertRule::FailedToRecover => {
            format!("more than {} runs ended in error after a failed tool call in {window}", s.threshold)
        }
        AlertRule::CallOutcomeUnknown => {
            format!("a guarded call unreported for longer than {}", Unit::Seconds.format(s.threshold))
        }
        AlertRule::ReplayPassRate => format!(
            "an agent passes fewer than {}% of its replay regression tests in {window} (at least {} results)",
            s.threshold, s.min_samples
        ),
    }
}
