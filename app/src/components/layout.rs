//! The signed-in shell: navigation, the user and their roles, sign-out, and the role
//! check that decides whether the page below may be shown.

use crate::components::status::Forbidden;
use crate::functions::auth::Logout;
use domain::access::{allows, format_roles, required_role_for_path};
use domain::models::CurrentUser;
use domain::models::SessionUser;
use leptos::prelude::*;
use leptos_router::components::{Outlet, A};
use leptos_router::hooks::use_location;

/// The layout of every signed-in page. Rendered synchronously from the user the page
/// already knows, so the page below is built once and its data fetched once.
#[component]
pub fn Shell() -> impl IntoView {
    let location = use_location();
    let Some(me) = use_context::<SessionUser>().and_then(|u| u.0) else {
        return view! {
            <main class="standalone">
                <p>"You are signed out. " <a href="/login">"Sign in"</a></p>
            </main>
        }
        .into_any();
    };
    let for_page = me.clone();
    let page = move || {
        let path = location.pathname.get();
        match required_role_for_path(&path) {
            Some(needed) if !allows(&for_page.roles, needed) => view! {
                <Forbidden
                    needed=needed.to_string()
                    username=for_page.username.clone()
                    roles=format_roles(&for_page.roles)
                />
            }
            .into_any(),
            _ => view! { <Outlet/> }.into_any(),
        }
    };
    provide_context(NavRefresh(RwSignal::new(0)));
    view! {
        <div class="app">
            <NavBar me/>
            <main class="content">{page}</main>
        </div>
    }
    .into_any()
}

/// Bumped by pages after an action that changes a navigation count (a decision, a claim,
/// an acknowledgement), so the counts update at once rather than at the next poll.
#[derive(Clone, Copy)]
pub struct NavRefresh(pub RwSignal<u32>);

/// Refreshes the navigation counts whenever `action` completes.
pub fn refresh_nav_after<A, O, E>(action: ServerAction<A>)
where
    A: leptos::server_fn::ServerFn<Output = O, Error = E> + Clone + Send + Sync + 'static,
    O: Send + Sync + 'static,
    E: Send + Sync + 'static,
{
    if let Some(NavRefresh(signal)) = use_context::<NavRefresh>() {
        Effect::new(move |_| {
            if action.version().get() > 0 {
                signal.update(|n| *n += 1);
            }
        });
    }
}

#[component]
fn NavBar(me: CurrentUser) -> impl IntoView {
    let logout = ServerAction::<Logout>::new();
    crate::routes::full_reload_on_success(logout.value());
    let is_admin = me.can(domain::access::Role::Admin);
    // The pending-approval count, the escalation backlog and the open alerts, fetched by the browser after
    // hydration (and every 15 s and on every navigation) rather than during the server
    // render, so a page never waits on them; without JavaScript they are simply absent.
    let pending = RwSignal::new(None::<i64>);
    let backlog = RwSignal::new(None::<(i64, Option<chrono::DateTime<chrono::Utc>>, chrono::DateTime<chrono::Utc>)>);
    let alerts = RwSignal::new(None::<(i64, i64)>);
    let toggle = NodeRef::<leptos::html::Input>::new();
    #[cfg(feature = "hydrate")]
    {
        // The folded menu closes again once a link in it was followed.
        let at = leptos_router::hooks::use_location();
        Effect::new(move |_| {
            let _ = at.pathname.get();
            if let Some(input) = toggle.get_untracked() {
                input.set_checked(false);
            }
        });
        let location = leptos_router::hooks::use_location();
        let tick = RwSignal::new(0u32);
        if let Ok(handle) =
            set_interval_with_handle(move || tick.update(|t| *t += 1), std::time::Duration::from_secs(15))
        {
            on_cleanup(move || handle.clear());
        }
        let refresh = use_context::<NavRefresh>().map(|r| r.0);
        Effect::new(move |_| {
            let _ = (location.pathname.get(), tick.get(), refresh.map(|r| r.get()));
            leptos::task::spawn_local(async move {
                if let Ok(n) = crate::functions::approvals::pending_approvals().await {
                    pending.set(Some(n));
                }
                if let Ok(b) = crate::functions::escalations::escalation_backlog().await {
                    backlog.set(Some(b));
                }
                if let Ok(a) = crate::functions::alerts::alert_counts().await {
                    alerts.set(Some(a));
                }
            });
        });
    }
    view! {
        <header class="topbar">
            <a class="brand" href="/runs">"Flightdeck"</a>
            // On a phone the navigation folds behind this toggle (a checkbox, so it works
            // without JavaScript too).
            <input type="checkbox" id="nav-toggle" class="nav-toggle" aria-label="Show navigation" node_ref=toggle/>
            <label for="nav-toggle" class="nav-button" aria-hidden="true">"Menu"</label>
            <nav class="mainnav" aria-label="Main">
                <A href="/runs">"Runs"</A>
                <A href="/approvals">
                    "Approvals"
                    {move || pending.get().filter(|n| *n > 0).map(|n| view! {
                        <span class="nav-count" data-testid="nav-approvals" title=format!("{n} pending approval requests")>{n}</span>
                    })}
                </A>
                <A href="/escalations">
                    "Escalations"
                    {move || match backlog.get() {
                        Some((n, Some(oldest), now)) if n > 0 => {
                            let age = crate::components::time::backlog_age(&oldest, &now);
                            let n = crate::components::numbers::counted(n, domain::escalations::COUNT_LIMIT);
                            Some(view! {
                                <span class="nav-count" data-testid="nav-escalations"
                                    title=format!("{n} open escalations; the oldest has waited {age}")>
                                    {format!("{n} · {age}")}
                                </span>
                            })
                        }
                        _ => None,
                    }}
                </A>
                <A href="/alerts">
                    "Alerts"
                    {move || alerts.get().filter(|(firing, acked)| firing + acked > 0).map(|(firing, acked)| view! {
                        <span class={if firing > 0 { "nav-count firing" } else { "nav-count" }} data-testid="nav-alerts"
                            title=format!("{firing} firing, {acked} acknowledged")>{firing + acked}</span>
                    })}
                </A>
                <A href="/trends">"Trends"</A>
                {is_admin.then(|| view! { <A href="/admin">"Admin"</A> })}
            </nav>
            <div class="whoami">
                <span class="username" data-testid="username">{me.username.clone()}</span>
                <span class="roles">
                    {me
                        .roles
                        .iter()
                        .map(|r| view! { <span class="role-chip">{r.to_string()}</span> })
                        .collect_view()}
                </span>
                <ActionForm action=logout attr:class="inline">
                    <button type="submit" class="link-button">"Sign out"</button>
                </ActionForm>
            </div>
        </header>
    }
}
