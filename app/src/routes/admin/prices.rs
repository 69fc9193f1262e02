//! Model prices: the shipped table, the config file's and the admin's, with where each
//! comes from; models runs used that have no price; and a recompute of stored runs of a
//! chosen period after a price changed.

use super::AdminTabs;
use crate::components::status::{ActionError, ErrorBox};
use crate::components::time::Timestamp;
use crate::functions::catalog::{load_prices, DeletePrice, RecomputeRuns, SavePrice};
use domain::pricing::PriceSource;
use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn PricesAdmin() -> impl IntoView {
    let save = ServerAction::<SavePrice>::new();
    let delete = ServerAction::<DeletePrice>::new();
    let recompute = ServerAction::<RecomputeRuns>::new();
    let page = Resource::new(
        move || (save.version().get(), delete.version().get(), recompute.version().get()),
        |_| load_prices(),
    );
    view! {
        <Title text="Prices"/>
        <h1>"Model prices"</h1>
        <AdminTabs/>
        <p class="muted small">
            "A run whose agent sends no cost (" <code>"budget.cost_spent"</code> ") is priced from its steps' "
            "tokens: uncached input, output, cache reads and writes, at the price of its model on the day of the "
            "step. The most specific matching pattern wins; an admin price beats the config file's, which beats "
            "the shipped table. Dollars per million tokens; an empty cache price means the input price."
        </p>
        <ActionError value=delete.value()/>
        <Suspense fallback=|| view! { <p class="loading">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match page.await {
                    Ok(page) => view! {
                        {forms(save, recompute, page.today)}
                        {(!page.unpriced_models.is_empty()).then(|| view! {
                            <section class="callout warn" data-testid="unpriced-models">
                                <h2>"Models without a price"</h2>
                                <p class="small">"Runs of the last 30 days used these; their cost shows as unknown until they have one."</p>
                                <p>{page.unpriced_models.iter().map(|m| view! { <code class="chip">{m.clone()}</code>" " }).collect_view()}</p>
                            </section>
                        })}
                        {(!page.recomputes.is_empty()).then(|| view! {
                            <section class="panel">
                                <h2>"Recent recomputes"</h2>
                                <ul class="plain">
                                    {page.recomputes.into_iter().map(|e| view! {
                                        <li><Timestamp at=e.at/>" · "{e.actor.unwrap_or_default()}" · "{e.detail.unwrap_or_default()}</li>
                                    }).collect_view()}
                                </ul>
                            </section>
                        })}
                        <div class="table-scroll">
                        <table class="grid" data-testid="price-table">
                            <thead><tr>
                                <th>"Pattern"</th><th>"From"</th><th class="num">"Input"</th><th class="num">"Output"</th>
                                <th class="num">"Cache read"</th><th class="num">"Cache write"</th><th class="num">"Reasoning"</th>
                                <th>"Source"</th><th></th>
                            </tr></thead>
                            <tbody>
                                {page.prices.into_iter().map(|p| {
                                    let money = |v: Option<f64>, fallback: &str| v.map(|v| format!("${v}")).unwrap_or_else(|| fallback.to_string());
                                    let admin = p.source == PriceSource::Admin;
                                    let (pattern, from) = (p.pattern.clone(), p.valid_from.to_string());
                                    view! {
                                        <tr>
                                            <td><code>{p.pattern.clone()}</code></td>
                                            <td class="nowrap">{p.valid_from.to_string()}</td>
                                            <td class="num">{format!("${}", p.input)}</td>
                                            <td class="num">{format!("${}", p.output)}</td>
                                            <td class="num">{money(p.cache_read, "= input")}</td>
                                            <td class="num">{money(p.cache_write, "= input")}</td>
                                            <td class="num">{money(p.reasoning, "= output")}</td>
                                            <td><span class=format!("badge source-{}", p.source.as_str())>{p.source.as_str()}</span></td>
                                            <td>{admin.then(|| view! {
                                                <ActionForm action=delete attr:class="inline">
                                                    <input type="hidden" name="pattern" value=pattern/>
                                                    <input type="hidden" name="valid_from" value=from/>
                                                    <button type="submit" class="danger small">"Delete"</button>
                                                </ActionForm>
                                            })}</td>
                                        </tr>
                                    }
                                }).collect_view()}
                            </tbody>
                        </table>
                        </div>
                    }.into_any(),
                    Err(error) => view! { <ErrorBox error/> }.into_any(),
                }
            })}
        </Suspense>
    }
}

/// The two forms, with dates defaulting to the server's today and a month before.
fn forms(
    save: ServerAction<SavePrice>,
    recompute: ServerAction<RecomputeRuns>,
    today: chrono::NaiveDate,
) -> impl IntoView {
    let month_ago = today - chrono::Duration::days(30);
    view! {
        <div class="admin-forms">
            <ActionForm action=save attr:class="card form" attr:data-testid="save-price">
                <h2>"Add or replace a price"</h2>
                <div class="form-grid">
                    <label>"Model or pattern" <input type="text" name="pattern" placeholder="gpt-4.1-mini*" required maxlength="200"/></label>
                    <label>"Valid from" <input type="date" name="valid_from" value=today.to_string() required/></label>
                    <label>"Input" <input type="text" inputmode="decimal" name="input" placeholder="0.40" required/></label>
                    <label>"Output" <input type="text" inputmode="decimal" name="output" placeholder="1.60" required/></label>
                    <label>"Cache read" <input type="text" inputmode="decimal" name="cache_read" placeholder="= input"/></label>
                    <label>"Cache write" <input type="text" inputmode="decimal" name="cache_write" placeholder="= input"/></label>
                    <label>"Reasoning" <input type="text" inputmode="decimal" name="reasoning" placeholder="= output"/></label>
                </div>
                <div><button type="submit" class="primary">"Save price"</button></div>
                <ActionError value=save.value()/>
            </ActionForm>
            <ActionForm action=recompute attr:class="card form" attr:data-testid="recompute">
                <h2>"Recompute stored runs"</h2>
                <p class="small muted">"New prices apply to runs received from now on. To reprice runs already stored, "
                    "recompute a period: in the background, 200 runs at a time, so ingest goes on."</p>
                <div class="form-grid">
                    <label>"From" <input type="date" name="since" value=month_ago.to_string() required/></label>
                    <label>"To" <input type="date" name="until" value=today.to_string() required/></label>
                </div>
                <div><button type="submit">"Recompute"</button></div>
                <ActionError value=recompute.value()/>
                {move || recompute.value().get().and_then(|r| r.ok()).map(|_| view! {
                    <p class="small" role="status">"Started; the list below shows when it finished."</p>
                })}
            </ActionForm>
        </div>
    }
}
