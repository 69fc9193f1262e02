//! Agent API tokens: create with scopes (the secret is shown once), list, revoke.

use super::{AdminTabs, OneTimeSecretBox};
use crate::components::status::{ActionError, ErrorBox};
use crate::components::time::{MaybeTimestamp, Timestamp};
use crate::functions::admin::{load_tokens_page, CreateToken, RevokeToken};
use domain::access::Scope;
use domain::models::TokenSummary;
use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn TokensAdmin() -> impl IntoView {
    let create = ServerAction::<CreateToken>::new();
    let revoke = ServerAction::<RevokeToken>::new();
    let page = Resource::new(move || (create.version().get(), revoke.version().get()), |_| load_tokens_page());
    view! {
        <Title text="API tokens"/>
        <h1>"API tokens"</h1>
        <AdminTabs/>
        <ActionForm action=create attr:class="card form inline-form" attr:data-testid="create-token">
            <h2>"New token"</h2>
            <label>"Name" <input type="text" name="name" placeholder="billing-agent" required maxlength="80"/></label>
            <fieldset>
                <legend>"Scopes"</legend>
                {Scope::ALL
                    .iter()
                    .map(|s| {
                        let field = format!("scope_{s}");
                        view! {
                            <label class="check">
                                <input type="checkbox" name=field/>
                                {s.to_string()}
                            </label>
                        }
                    })
                    .collect_view()}
            </fieldset>
            <button type="submit" class="primary">"Create token"</button>
            <ActionError value=create.value()/>
        </ActionForm>
        <ActionError value=revoke.value()/>
        <Suspense fallback=|| view! { <p class="loading">"Loading tokens…"</p> }>
            {move || Suspend::new(async move {
                match page.await {
                    Ok(page) => {
                        view! {
                            {page.new_secret.map(|secret| view! { <OneTimeSecretBox secret/> })}
                            <TokenTable tokens=page.tokens revoke/>
                        }
                            .into_any()
                    }
                    Err(error) => view! { <ErrorBox error/> }.into_any(),
                }
            })}
        </Suspense>
    }
}

#[component]
fn TokenTable(tokens: Vec<TokenSummary>, revoke: ServerAction<RevokeToken>) -> impl IntoView {
    if tokens.is_empty() {
        return view! { <p class="muted">"No tokens yet. Agents need one to send traces or use the API."</p> }
            .into_any();
    }
    view! {
        <table class="grid stack" data-testid="token-table">
            <thead>
                <tr>
                    <th>"Name"</th><th>"Prefix"</th><th>"Scopes"</th><th>"Created"</th>
                    <th>"Last used"</th><th>"Status"</th><th></th>
                </tr>
            </thead>
            <tbody>
                {tokens
                    .into_iter()
                    .map(|t| {
                        let active = t.is_active();
                        let scopes = t.scopes.iter().map(|s| s.to_string()).collect::<Vec<_>>().join(", ");
                        let created_by = t.created_by.clone().map(|u| format!(" by {u}")).unwrap_or_default();
                        view! {
                            <tr class:revoked=!active>
                                <td class="name">{t.name.clone()}</td>
                                <td data-label="Prefix"><code>{t.prefix.clone()} "…"</code></td>
                                <td data-label="Scopes">{scopes}</td>
                                <td data-label="Created"><span><Timestamp at=t.created_at/>{created_by}</span></td>
                                <td data-label="Last used"><MaybeTimestamp at=t.last_used_at none="never"/></td>
                                <td data-label="Status">
                                    {match t.revoked_at {
                                        Some(at) => view! { <span class="badge badge-muted">"revoked "</span><Timestamp at/> }.into_any(),
                                        None => view! { <span class="badge badge-ok">"active"</span> }.into_any(),
                                    }}
                                </td>
                                <td class="actions">
                                    {active.then(|| view! {
                                        <ActionForm action=revoke attr:class="inline">
                                            <input type="hidden" name="id" value=t.id/>
                                            <button type="submit" class="danger small">"Revoke"</button>
                                        </ActionForm>
                                    })}
                                </td>
                            </tr>
                        }
                    })
                    .collect_view()}
            </tbody>
        </table>
    }
    .into_any()
}
