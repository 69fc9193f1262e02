//! Tool policies: which tool names read, write, or do something irreversible. Ingest uses
//! them for tool calls whose spans do not declare a side-effect class.

use super::AdminTabs;
use crate::canonical::SideEffect;
use crate::components::status::{ActionError, ErrorBox};
use crate::functions::admin::{load_policies, DeletePolicy, SavePolicy};
use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn PoliciesAdmin() -> impl IntoView {
    let save = ServerAction::<SavePolicy>::new();
    let delete = ServerAction::<DeletePolicy>::new();
    let list = Resource::new(move || (save.version().get(), delete.version().get()), |_| load_policies());
    let classes = || {
        SideEffect::ALL
            .iter()
            .filter(|c| **c != SideEffect::Unknown)
            .map(|c| view! { <option value=c.as_str()>{c.as_str()}</option> })
            .collect_view()
    };
    view! {
        <Title text="Tool policies"/>
        <h1>"Tool policies"</h1>
        <AdminTabs/>
        <ActionForm action=save attr:class="card form inline-form" attr:data-testid="save-policy">
            <h2>"Add or replace"</h2>
            <label>"Tool name or pattern" <input type="text" name="pattern" placeholder="send_*" required maxlength="200"/></label>
            <label>"Side effect" <select name="side_effect">{classes()}</select></label>
            <button type="submit" class="primary">"Save policy"</button>
            <ActionError value=save.value()/>
        </ActionForm>
        <p class="muted small">
            "A span's own " <code>"tool.side_effect"</code> " wins; otherwise the exact tool name, then the first "
            "matching pattern (" <code>"*"</code> " matches anything). Changes apply to spans received from a few "
            "seconds later on."
        </p>
        <ActionError value=delete.value()/>
        <Suspense fallback=|| view! { <p class="loading">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match list.await {
                    Ok(rows) if rows.is_empty() => view! { <p class="muted">"No tool policies yet."</p> }.into_any(),
                    Ok(rows) => view! {
                        <table class="grid" data-testid="policy-table">
                            <thead><tr><th>"Pattern"</th><th>"Side effect"</th><th></th></tr></thead>
                            <tbody>
                                {rows.into_iter().map(|row| {
                                    let pattern = row.pattern.clone();
                                    view! {
                                        <tr>
                                            <td><code>{row.pattern}</code></td>
                                            <td><span class=format!("badge effect-{}", row.side_effect)>{row.side_effect.clone()}</span></td>
                                            <td>
                                                <ActionForm action=delete attr:class="inline">
                                                    <input type="hidden" name="pattern" value=pattern/>
                                                    <button type="submit" class="danger small">"Delete"</button>
                                                </ActionForm>
                                            </td>
                                        </tr>
                                    }
                                }).collect_view()}
                            </tbody>
                        </table>
                    }.into_any(),
                    Err(error) => view! { <ErrorBox error/> }.into_any(),
                }
            })}
        </Suspense>
    }
}
