//! Users and roles: add a user (the generated password is shown once), change roles,
//! reset a password, disable or enable an account. Each of the last three ends the user's
//! sessions at once.

use super::{AdminTabs, OneTimeSecretBox};
use crate::components::status::{ActionError, ErrorBox};
use crate::components::time::Timestamp;
use crate::functions::admin::{
    load_users_page, CreateUser, LinkSlackUser, ResetPassword, SetRoles, SetUserDisabled, UnlinkSlackUser,
};
use domain::access::Role;
use domain::models::UserSummary;
use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn UsersAdmin() -> impl IntoView {
    let create = ServerAction::<CreateUser>::new();
    let set_roles = ServerAction::<SetRoles>::new();
    let reset = ServerAction::<ResetPassword>::new();
    let disable = ServerAction::<SetUserDisabled>::new();
    let link = ServerAction::<LinkSlackUser>::new();
    let unlink = ServerAction::<UnlinkSlackUser>::new();
    let page = Resource::new(
        move || {
            (
                create.version().get(),
                set_roles.version().get(),
                reset.version().get(),
                disable.version().get(),
                link.version().get(),
                unlink.version().get(),
            )
        },
        |_| load_users_page(),
    );
    view! {
        <Title text="Users"/>
        <h1>"Users and roles"</h1>
        <AdminTabs/>
        <ActionForm action=create attr:class="card form inline-form" attr:data-testid="create-user">
            <h2>"New user"</h2>
            <label>"Username" <input type="text" name="username" required maxlength="64"/></label>
            <RoleBoxes checked=vec![Role::Viewer]/>
            <button type="submit" class="primary">"Add user"</button>
            <ActionError value=create.value()/>
        </ActionForm>
        <ActionError value=set_roles.value()/>
        <ActionError value=reset.value()/>
        <ActionError value=disable.value()/>
        <section class="card" data-testid="slack-link">
            <h2>"Slack"</h2>
            <p class="muted small">
                "Link a Slack member id (profile → ⋯ → Copy member ID) to a user: their clicks on Approve and Deny "
                "in Slack's approval messages count as that user's, with that user's roles (docs/approvals.md)."
            </p>
            <ActionForm action=link attr:class="form inline-form">
                <label>"Slack member id" <input type="text" name="slack_user_id" required maxlength="32" placeholder="U024BE7LH"/></label>
                <label>"Username" <input type="text" name="username" required maxlength="64"/></label>
                <button type="submit" class="primary">"Link"</button>
            </ActionForm>
            <div>
                <ActionError value=link.value()/>
            </div>
            <div>
                <ActionError value=unlink.value()/>
            </div>
        </section>
        <Suspense fallback=|| view! { <p class="loading">"Loading users…"</p> }>
            {move || Suspend::new(async move {
                match page.await {
                    Ok(page) => view! {
                        {page.new_secret.map(|secret| view! { <OneTimeSecretBox secret/> })}
                        <UserTable users=page.users set_roles reset disable/>
                        <SlackLinks links=page.slack_links unlink/>
                    }
                        .into_any(),
                    Err(error) => view! { <ErrorBox error/> }.into_any(),
                }
            })}
        </Suspense>
    }
}

#[component]
fn RoleBoxes(checked: Vec<Role>) -> impl IntoView {
    view! {
        <fieldset class="roles">
            <legend>"Roles"</legend>
            {Role::ALL
                .iter()
                .map(|r| {
                    let field = format!("role_{r}");
                    let on = checked.contains(r);
                    view! {
                        <label class="check" title=r.describe()>
                            <input type="checkbox" name=field checked=on/>
                            {r.to_string()}
                        </label>
                    }
                })
                .collect_view()}
        </fieldset>
    }
}

#[component]
fn UserTable(
    users: Vec<UserSummary>,
    set_roles: ServerAction<SetRoles>,
    reset: ServerAction<ResetPassword>,
    disable: ServerAction<SetUserDisabled>,
) -> impl IntoView {
    view! {
        <table class="grid stack" data-testid="user-table">
            <thead>
                <tr><th>"Username"</th><th>"Roles"</th><th>"Created"</th><th>"Account"</th></tr>
            </thead>
            <tbody>
                {users
                    .into_iter()
                    .map(|u| {
                        let for_roles = u.username.clone();
                        let for_reset = u.username.clone();
                        let for_disable = u.username.clone();
                        let roles = u.roles.clone();
                        let disabled = u.disabled;
                        view! {
                            <tr class:disabled=disabled data-testid=format!("user-{}", u.username)>
                                <td class="name">
                                    {u.username.clone()}
                                    {disabled.then(|| view! { " " <span class="tag tag-muted">"disabled"</span> })}
                                </td>
                                <td data-label="Roles">
                                    <ActionForm action=set_roles attr:class="inline">
                                        <input type="hidden" name="username" value=for_roles/>
                                        <RoleBoxes checked=roles/>
                                        <button type="submit" class="small">"Save roles"</button>
                                    </ActionForm>
                                </td>
                                <td data-label="Created"><Timestamp at=u.created_at/></td>
                                <td class="actions">
                                    <ActionForm action=reset attr:class="inline">
                                        <input type="hidden" name="username" value=for_reset/>
                                        <button type="submit" class="small">"Reset password"</button>
                                    </ActionForm>
                                    <ActionForm action=disable attr:class="inline">
                                        <input type="hidden" name="username" value=for_disable/>
                                        <input type="hidden" name="disabled" value=if disabled { "false" } else { "true" }/>
                                        <button type="submit" class=if disabled { "small" } else { "small danger" }>
                                            {if disabled { "Enable" } else { "Disable" }}
                                        </button>
                                    </ActionForm>
                                </td>
                            </tr>
                        }
                    })
                    .collect_view()}
            </tbody>
        </table>
    }
}

#[component]
fn SlackLinks(links: Vec<(String, String)>, unlink: ServerAction<UnlinkSlackUser>) -> impl IntoView {
    view! {
        <section class="card" data-testid="slack-links">
            <h2>"Linked Slack users"</h2>
            {if links.is_empty() {
                view! { <p class="muted small">"None yet."</p> }.into_any()
            } else {
                view! {
                    <table class="grid compact">
                        <thead><tr><th>"Slack member id"</th><th>"User"</th><th></th></tr></thead>
                        <tbody>
                            {links.into_iter().map(|(slack, user)| view! {
                                <tr>
                                    <td><code>{slack.clone()}</code></td>
                                    <td>{user}</td>
                                    <td>
                                        <ActionForm action=unlink attr:class="inline">
                                            <input type="hidden" name="slack_user_id" value=slack/>
                                            <button type="submit" class="danger small">"Unlink"</button>
                                        </ActionForm>
                                    </td>
                                </tr>
                            }).collect_view()}
                        </tbody>
                    </table>
                }.into_any()
            }}
        </section>
    }
}
