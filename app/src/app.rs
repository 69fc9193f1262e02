//! The HTML shell and the route table.

use crate::components::layout::Shell;
use crate::components::status::NotFound;
use crate::routes::{admin, alerts, approvals, escalations, login, runs, trends};
use domain::models::{CurrentUser, SessionUser};
use leptos::prelude::*;
use leptos_meta::{provide_meta_context, MetaTags, Title};
use leptos_router::components::{ParentRoute, Redirect, Route, Router, Routes};
use leptos_router::{path, SsrMode};

/// The document around the app, rendered on the server only. It carries the signed-in
/// user as JSON so the browser starts from exactly what the server rendered.
pub fn shell(options: LeptosOptions) -> impl IntoView {
    #[cfg(feature = "ssr")]
    set_page_policy();
    // The bundle's files share one content-hashed name (`cargo xtask build`); the script
    // and wasm names come from it inside `HydrationScripts`.
    let stylesheet = format!("/{}/{}.css", options.site_pkg_dir, options.output_name);
    let user_json = serde_json::to_string(&current_user())
        .unwrap_or_else(|_| "null".into())
        // never let a value close the script element
        .replace('<', "\\u003c");
    view! {
        <!DOCTYPE html>
        <html lang="en">
            <head>
                <meta charset="utf-8"/>
                <meta name="viewport" content="width=device-width, initial-scale=1"/>
                <link rel="stylesheet" href=stylesheet/>
                <link rel="icon" href="data:,"/>
                <script id="fd-user" type="application/json" inner_html=user_json></script>
                <HydrationScripts options/>
                <MetaTags/>
            </head>
            <body>
                <App/>
            </body>
        </html>
    }
}

/// The Content-Security-Policy of a page: scripts only from this origin or inline with
/// this render's nonce (Leptos puts it on the hydration script and on every script that
/// carries resolved data), wasm compiled from this origin, no framing at all, forms only
/// to this origin. Inline `style` attributes position the waterfall bars, so styles allow
/// them; scripts, which are what an injection would need, do not.
pub fn page_policy(nonce: &str) -> String {
    format!(
        "default-src 'self'; script-src 'self' 'nonce-{nonce}' 'wasm-unsafe-eval'; \
         style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; object-src 'none'; \
         base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    )
}

#[cfg(feature = "ssr")]
fn set_page_policy() {
    let (Some(nonce), Some(response)) = (leptos::nonce::use_nonce(), use_context::<leptos_axum::ResponseOptions>())
    else {
        return;
    };
    if let Ok(value) = http::HeaderValue::from_str(&page_policy(&nonce.to_string())) {
        response.insert_header(http::header::CONTENT_SECURITY_POLICY, value);
    }
}

/// Every route renders with `SsrMode::Async`: the server waits for the page's data and
/// sends complete HTML, so pages work without JavaScript and the status code (403, 404)
/// is decided before the first byte is sent.

/// On the server: the user the request's session belongs to. In the browser: the user the
/// server embedded in the page. Signing in or out reloads the page, so it stays true.
fn current_user() -> Option<CurrentUser> {
    #[cfg(feature = "ssr")]
    {
        crate::functions::ssr::current_user()
    }
    #[cfg(not(feature = "ssr"))]
    {
        document()
            .get_element_by_id("fd-user")
            .and_then(|e| e.text_content())
            .and_then(|json| serde_json::from_str(&json).ok())
            .flatten()
    }
}

#[component]
pub fn App() -> impl IntoView {
    provide_meta_context();
    provide_context(SessionUser(current_user()));
    view! {
        <Title formatter=|page: String| format!("{page} · Flightdeck")/>
        <Router>
            <Routes fallback=|| view! { <NotFound/> }>
                <Route path=path!("/login") view=login::LoginPage ssr=SsrMode::Async/>
                <ParentRoute path=path!("") view=Shell ssr=SsrMode::Async>
                    <Route path=path!("") view=|| view! { <Redirect path="/runs"/> } ssr=SsrMode::Async/>
                    <Route path=path!("/runs") view=runs::RunsPage ssr=SsrMode::Async/>
                    <Route path=path!("/runs/:run_id") view=runs::detail::RunDetailPage ssr=SsrMode::Async/>
                    <Route path=path!("/approvals") view=approvals::ApprovalsPage ssr=SsrMode::Async/>
                    <Route path=path!("/approvals/bulk") view=approvals::bulk::BulkPage ssr=SsrMode::Async/>
                    <Route path=path!("/approvals/:id") view=approvals::request::ApprovalPage ssr=SsrMode::Async/>
                    <Route path=path!("/escalations") view=escalations::EscalationsPage ssr=SsrMode::Async/>
                    <Route path=path!("/escalations/:id") view=escalations::page::EscalationPage ssr=SsrMode::Async/>
                    <Route path=path!("/alerts") view=alerts::AlertsPage ssr=SsrMode::Async/>
                    <Route path=path!("/alerts/:id") view=alerts::page::AlertPage ssr=SsrMode::Async/>
                    <Route path=path!("/trends") view=trends::TrendsPage ssr=SsrMode::Async/>
                    <Route path=path!("/admin") view=admin::AdminHome ssr=SsrMode::Async/>
                    <Route path=path!("/admin/users") view=admin::users::UsersAdmin ssr=SsrMode::Async/>
                    <Route path=path!("/admin/tokens") view=admin::tokens::TokensAdmin ssr=SsrMode::Async/>
                    <Route path=path!("/admin/policies") view=admin::policies::PoliciesAdmin ssr=SsrMode::Async/>
                    <Route path=path!("/admin/tools") view=admin::tools::ToolsAdmin ssr=SsrMode::Async/>
                    <Route path=path!("/admin/prices") view=admin::prices::PricesAdmin ssr=SsrMode::Async/>
                    <Route path=path!("/admin/webhooks") view=admin::webhooks::WebhooksAdmin ssr=SsrMode::Async/>
                    <Route path=path!("/admin/alerts") view=admin::alerts::AlertRulesAdmin ssr=SsrMode::Async/>
                    <Route path=path!("/admin/rules") view=admin::rules::RulesAdmin ssr=SsrMode::Async/>
                    <Route path=path!("/admin/audit") view=admin::audit::AuditAdmin ssr=SsrMode::Async/>
                </ParentRoute>
            </Routes>
        </Router>
    }
}
