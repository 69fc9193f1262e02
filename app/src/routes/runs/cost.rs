//! A run's cost, said truthfully: sent by the agent, derived from its tokens and which
//! prices, or not known because a model has no price ("no price for model X", never $0).
//! And each step's tokens and cost.

use crate::components::numbers::{money, thousands};
use domain::canonical::{CostSource, RunDetail, RunSummary, StepView};
use leptos::prelude::*;

/// The cost figure of a run.
pub fn cost_text(r: &RunSummary) -> String {
    match r.cost_source {
        CostSource::Agent | CostSource::Prices => money(r.cost),
        CostSource::Partial => format!("at least {}", money(r.cost)),
        CostSource::Unpriced => "unknown".into(),
        CostSource::None => "—".into(),
    }
}

/// Where the figure came from, in a few words.
pub fn source_text(r: &RunSummary) -> String {
    let models = r.unpriced_models.join(", ");
    match r.cost_source {
        CostSource::Agent => " sent by the agent".into(),
        CostSource::Prices => " derived from tokens".into(),
        CostSource::Partial => format!(" derived; no price for model {models}"),
        CostSource::Unpriced => format!(" no price for model {models}"),
        CostSource::None => " no cost or tokens reported".into(),
    }
}

/// How the cost was computed (the prices used, or why there is none) and the steps with
/// their tokens and cost.
#[component]
pub fn CostSection(detail: RunDetail, steps: Vec<StepView>) -> impl IntoView {
    let r = detail.run;
    let how = match r.cost_source {
        CostSource::Agent => view! {
            <p class="small">"The agent reported this cost itself (" <code>"budget.cost_spent"</code>
                "); Flightdeck's prices are not used for it."</p>
        }
        .into_any(),
        CostSource::None => {
            view! { <p class="small muted">"The run reported neither a cost nor any tokens."</p> }.into_any()
        }
        _ => {
            let missing = (!r.unpriced_models.is_empty()).then(|| {
                view! {
                    <p class="small warn-text" data-testid="unpriced">
                        {format!(
                            "No price for model {}: its steps are not in the figure. Add a price under Admin → Prices.",
                            r.unpriced_models.join(", ")
                        )}
                    </p>
                }
            });
            view! {
                {missing}
                {(!detail.prices_used.is_empty()).then(|| view! {
                    <table class="grid compact" data-testid="prices-used">
                        <thead><tr>
                            <th>"Model"</th><th>"Price"</th><th>"From"</th><th class="num">"Input"</th>
                            <th class="num">"Output"</th><th class="num">"Cache read"</th><th class="num">"Cache write"</th>
                            <th class="num">"Steps"</th><th class="num">"Cost"</th>
                        </tr></thead>
                        <tbody>
                            {detail.prices_used.iter().map(|u| {
                                let p = &u.price;
                                let per = |v: f64| format!("${v}");
                                view! {
                                    <tr>
                                        <td><code>{u.model.clone()}</code></td>
                                        <td><code>{p.pattern.clone()}</code>" "<span class="muted small">{p.source.as_str()}</span></td>
                                        <td class="nowrap">{p.valid_from.to_string()}</td>
                                        <td class="num">{per(p.input)}</td>
                                        <td class="num">{per(p.output)}</td>
                                        <td class="num">{per(p.cache_read.unwrap_or(p.input))}</td>
                                        <td class="num">{per(p.cache_write.unwrap_or(p.input))}</td>
                                        <td class="num">{u.steps}</td>
                                        <td class="num">{money(u.cost)}</td>
                                    </tr>
                                }
                            }).collect_view()}
                        </tbody>
                    </table>
                    <p class="small muted">"Prices in dollars per million tokens."</p>
                })}
            }
            .into_any()
        }
    };
    let open = steps.len() <= 20;
    view! {
        <section class="panel" data-testid="cost">
            <h2>"Cost and tokens"</h2>
            {how}
            {(!steps.is_empty()).then(|| view! {
                <details open=open class="steps">
                    <summary>{format!("{} steps", steps.len())}</summary>
                    <div class="table-scroll">
                    <table class="grid compact" data-testid="steps">
                        <thead><tr>
                            <th class="num">"Step"</th><th>"Model"</th><th>"Stop reason"</th><th class="num">"Input"</th>
                            <th class="num">"Output"</th><th class="num">"Cache read"</th><th class="num">"Cache write"</th>
                            <th class="num">"Cost"</th>
                        </tr></thead>
                        <tbody>
                            {steps.into_iter().map(|s| view! {
                                <tr>
                                    <td class="num">{s.index}</td>
                                    <td><code>{s.model_id.clone().unwrap_or_else(|| "—".into())}</code></td>
                                    <td>{s.stop_reason.clone().unwrap_or_default()}</td>
                                    <td class="num">{thousands(s.input_tokens)}</td>
                                    <td class="num">{thousands(s.output_tokens)}</td>
                                    <td class="num">{thousands(s.cache_tokens)}</td>
                                    <td class="num">{thousands(s.cache_write_tokens)}</td>
                                    <td class="num">{s.cost.map(money).unwrap_or_else(|| "—".into())}</td>
                                </tr>
                            }).collect_view()}
                        </tbody>
                    </table>
                    </div>
                </details>
            })}
        </section>
    }
}
