//! The audit log: newest first, filterable by action, paged by id.

use super::AdminTabs;
use crate::components::status::ErrorBox;
use crate::components::time::Timestamp;
use crate::functions::admin::load_audit_page;
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

const ACTIONS: &[&str] = &[
    "login",
    "logout",
    "login_failed",
    "user_created",
    "user_password_reset",
    "user_roles_changed",
    "token_created",
    "token_revoked",
    "tool_policy_saved",
    "tool_policy_deleted",
];

#[component]
pub fn AuditAdmin() -> impl IntoView {
    let query = use_query_map();
    let params = move || {
        query.with(|q| {
            let before = q.get("before").and_then(|b| b.parse::<i64>().ok());
            let action = q.get("action").filter(|a| !a.is_empty());
            (before, action)
        })
    };
    let page = Resource::new(params, |(before, action)| load_audit_page(before, action));
    view! {
        <Title text="Audit log"/>
        <h1>"Audit log"</h1>
        <AdminTabs/>
        <form method="get" action="/admin/audit" class="filters">
            <label>
                "Action "
                <select name="action">
                    <option value="">"all"</option>
                    {move || {
                        let current = params().1.unwrap_or_default();
                        ACTIONS
                            .iter()
                            .map(|a| view! { <option value=*a selected=current == *a>{*a}</option> })
                            .collect_view()
                    }}
                </select>
            </label>
            <button type="submit">"Filter"</button>
        </form>
        <Suspense fallback=|| view! { <p class="loading">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match page.await {
                    Ok(page) if page.entries.is_empty() => {
                        view! { <p class="muted">"No entries match."</p> }.into_any()
                    }
                    Ok(page) => {
                        let action = params().1;
                        let older = page.next_before.map(|before| {
                            let mut href = format!("/admin/audit?before={before}");
                            if let Some(a) = &action {
                                href.push_str(&format!("&action={a}"));
                            }
                            view! { <a class="pager" href=href>"Older entries →"</a> }
                        });
                        view! {
                            <table class="grid" data-testid="audit-table">
                                <thead>
                                    <tr><th>"When"</th><th>"Who"</th><th>"Action"</th><th>"Target"</th><th>"Detail"</th><th>"From"</th></tr>
                                </thead>
                                <tbody>
                                    {page.entries.into_iter().map(|e| view! {
                                        <tr>
                                            <td><Timestamp at=e.at/></td>
                                            <td>{e.actor.unwrap_or_else(|| "—".into())}</td>
                                            <td><code>{e.action}</code></td>
                                            <td class="long">{e.target.unwrap_or_default()}</td>
                                            <td class="long">{e.detail.unwrap_or_default()}</td>
                                            <td>{e.source.unwrap_or_default()}</td>
                                        </tr>
                                    }).collect_view()}
                                </tbody>
                            </table>
                            {older}
                        }
                            .into_any()
                    }
                    Err(error) => view! { <ErrorBox error/> }.into_any(),
                }
            })}
        </Suspense>
    }
}
