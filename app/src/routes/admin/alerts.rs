//! Alert rules (`/admin/alerts`): each rule on or off, its severity, and the thresholds,
//! windows and baselines it reads. Saving is audited with the settings before and after.

use super::AdminTabs;
use crate::components::status::{ActionError, ErrorBox};
use crate::functions::alerts::{load_alert_rules, SaveAlertRule};
use crate::routes::alerts::fires_when;
use domain::alerts::settings::{fields, RuleSettings};
use domain::alerts::{AlertRule, Severity};
use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn AlertRulesAdmin() -> impl IntoView {
    let save = ServerAction::<SaveAlertRule>::new();
    let rules = Resource::new(move || save.version().get(), |_| load_alert_rules());
    view! {
        <Title text="Alert rules"/>
        <h1>"Alert rules"</h1>
        <AdminTabs/>
        <p class="muted small">
            "Every rule is evaluated every few seconds by one Flightdeck instance. An alert resolves once its "
            "rule has not been breached for the hold time (" <code>"alert_hold_seconds"</code> "). Switching a "
            "rule off resolves its open alerts."
        </p>
        <ActionError value=save.value()/>
        <Transition fallback=|| view! { <p class="loading">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match rules.await {
                    Ok(view) => view.rules.into_iter().map(|(rule, s)| view! { <RuleForm rule settings=s save/> }).collect_view().into_any(),
                    Err(error) => view! { <ErrorBox error/> }.into_any(),
                }
            })}
        </Transition>
    }
}

#[component]
fn RuleForm(rule: AlertRule, settings: RuleSettings, save: ServerAction<SaveAlertRule>) -> impl IntoView {
    let f = fields(rule);
    let s = settings.clone();
    let per_tool = s.per_tool.iter().map(|t| format!("{} = {}", t.tool, t.limit)).collect::<Vec<_>>().join("\n");
    view! {
        <ActionForm action=save attr:class="card form rule-form" attr:data-rule=rule.as_str()>
            <h2>{rule.title()}</h2>
            <p class="muted small">{rule.description()}</p>
            <p class="small">"Now fires when " {fires_when(rule, &settings)} "."</p>
            <input type="hidden" name="rule" value=rule.as_str()/>
            <div class="inline-form">
                <label class="checkbox"><input type="checkbox" name="enabled" value="on" checked=s.enabled/>" On"</label>
                <label>"Severity"
                    <select name="severity">
                        {Severity::ALL.iter().map(|sev| view! {
                            <option value=sev.as_str() selected=*sev == s.severity>{sev.as_str()}</option>
                        }).collect_view()}
                    </select>
                </label>
                {f.window.then(|| view! {
                    <label>"Window (seconds)" <input type="number" name="window_seconds" min="10" value=s.window_seconds required/></label>
                })}
                {f.threshold.map(|label| view! {
                    <label>{label} <input type="number" name="threshold" min="0" step="any" value=s.threshold required/></label>
                })}
                {f.baseline.then(|| view! {
                    <label>"Baseline (seconds)" <input type="number" name="baseline_seconds" min="10" value=s.baseline_seconds required/></label>
                    <label>"Factor" <input type="number" name="factor" min="1" step="any" value=s.factor required/></label>
                })}
                {f.min_samples.then(|| view! {
                    <label>"Minimum samples" <input type="number" name="min_samples" min="1" value=s.min_samples required/></label>
                })}
                {f.only_unclaimed.then(|| view! {
                    <label class="checkbox"><input type="checkbox" name="only_unclaimed" value="on" checked=s.only_unclaimed/>" Only unclaimed escalations"</label>
                })}
            </div>
            {f.per_tool.then(|| view! {
                <label>"Per-tool limits (one " <code>"tool = number"</code> " per line)"
                    <textarea name="per_tool" rows="3" placeholder="delete_account = 2">{per_tool}</textarea>
                </label>
            })}
            <button type="submit" class="primary">"Save"</button>
        </ActionForm>
    }
}
