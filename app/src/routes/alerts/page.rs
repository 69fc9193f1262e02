//! One alert (`/alerts/{id}`), where webhook notifications link: the same card as the
//! list, with the rule's description, and for operators a form to silence alerts like
//! it (prefilled with its rule, and its tool and agent when it has one of each).

use super::AlertCard;
use crate::components::status::{ActionError, ErrorBox};
use crate::functions::alerts::{load_alert, AcknowledgeAlert, AlertView, CreateSilence, ThresholdsInForce};
use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn AlertPage() -> impl IntoView {
    // From the path, decoded once (see `url::path_id`).
    let id = crate::url::path_id("/alerts/");
    let acknowledge = ServerAction::<AcknowledgeAlert>::new();
    crate::components::layout::refresh_nav_after(acknowledge);
    let silence = ServerAction::<CreateSilence>::new();
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
                        let form = v.can_acknowledge.then(|| view! { <SilenceForm view=v.clone() silence/> });
                        let thresholds = v.thresholds.clone().map(|t| view! { <Thresholds rule=v.alert.rule t/> });
                        view! {
                            <h1>{v.alert.rule.title()}</h1>
                            <p class="muted">{description}</p>
                            <AlertCard alert=v.alert now=v.now can_acknowledge=v.can_acknowledge acknowledge linked=false
                                silence=v.silence/>
                            {thresholds}
                            {form}
                        }.into_any()
                    }
                    Err(error) => view! { <ErrorBox error/> }.into_any(),
                }
            })}
        </Transition>
    }
}

/// "Silence alerts like this": blank parts match anything; the rule, tool and agent are
/// prefilled from the alert. Works without JavaScript.
#[component]
fn SilenceForm(view: AlertView, silence: ServerAction<CreateSilence>) -> impl IntoView {
    let rule = view.alert.rule;
    let tool = view.alert.subject.strip_prefix("tool:").unwrap_or_default().to_string();
    let agent = view.agent.unwrap_or_default();
    let created = move || {
        silence.value().get().and_then(Result::ok).map(|s| {
            view! {
                <p class="callout ok" role="status" data-testid="silence-created">
                    {format!("Silenced {} until {}.", s.scope(), crate::components::time::format_utc(&s.ends_at))}
                </p>
            }
        })
    };
    view! {
        <section class="card silence-form" data-testid="silence-form">
            <h2>"Silence alerts like this"</h2>
            <p class="muted small">
                "While a silence lasts, matching alerts still fire and show here, marked, but nobody is "
                "notified. Leave a field blank to match any. Listed and ended on the Alerts page."
            </p>
            <ActionError value=silence.value()/>
            {created}
            <ActionForm action=silence attr:class="form">
                <label>"Rule"
                    <select name="rule">
                        <option value="">"any rule"</option>
                        {crate::alerts::AlertRule::ALL.iter().map(|r| view! {
                            <option value=r.as_str() selected=*r == rule>{r.title()}</option>
                        }).collect_view()}
                    </select>
                </label>
                <label>"Agent" <input type="text" name="agent" value=agent placeholder="any agent"/></label>
                <label>"Tool" <input type="text" name="tool" value=tool placeholder="any tool"/></label>
                <label>"For"
                    <select name="minutes">
                        <option value="60">"1 hour"</option>
                        <option value="240" selected=true>"4 hours"</option>
                        <option value="1440">"1 day"</option>
                        <option value="10080">"7 days"</option>
                    </select>
                </label>
                <label>"Why" <textarea name="reason" required=true rows="2" placeholder="e.g. migrating the mail provider; refunds paused"></textarea></label>
                <button type="submit" class="primary" data-testid="create-silence">"Silence"</button>
            </ActionForm>
        </section>
    }
}

/// Which version of the rule's settings fired the alert, and its thresholds, so a later
/// change does not rewrite what on-call was paged for.
#[component]
fn Thresholds(rule: crate::alerts::AlertRule, t: ThresholdsInForce) -> impl IntoView {
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
