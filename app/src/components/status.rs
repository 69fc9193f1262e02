//! Pages and boxes for errors: not found, forbidden, and a failed server call.

use crate::errors::AppError;
use leptos::prelude::*;
use leptos_meta::Title;

/// Sets the HTTP status of the page being rendered on the server; a no-op in the browser.
pub fn set_page_status(code: u16) {
    #[cfg(feature = "ssr")]
    if let Some(res) = use_context::<leptos_axum::ResponseOptions>() {
        if let Ok(status) = http::StatusCode::from_u16(code) {
            res.set_status(status);
        }
    }
    #[cfg(not(feature = "ssr"))]
    let _ = code;
}

#[component]
pub fn NotFound() -> impl IntoView {
    set_page_status(404);
    view! {
        <Title text="Not found"/>
        <main class="standalone">
            <h1>"Not found"</h1>
            <p>"There is no page at this address."</p>
            <p><a href="/runs">"Go to runs"</a></p>
        </main>
    }
}

/// Shown in place of a page the signed-in user may not see. The server also answers
/// such a request with status 403.
#[component]
pub fn Forbidden(#[prop(into)] needed: String, #[prop(into)] username: String, roles: String) -> impl IntoView {
    set_page_status(403);
    view! {
        <Title text="Forbidden"/>
        <section class="forbidden" data-testid="forbidden">
            <h1>"403 · You do not have access to this page"</h1>
            <p>
                "This page needs the " <strong>{needed}</strong> " role. You are signed in as "
                <strong>{username}</strong> " with the roles " <strong>{roles}</strong> "."
            </p>
            <p>"Ask an administrator to grant the role if you need it."</p>
        </section>
    }
}

/// A failed server call, in the words the server chose for it.
#[component]
pub fn ErrorBox(error: AppError) -> impl IntoView {
    view! { <p class="error-box" role="alert">{error.to_string()}</p> }
}

/// The result of a form's last submission: its error, if any.
#[component]
pub fn ActionError<T, S>(value: S) -> impl IntoView
where
    T: Send + Sync + 'static,
    S: Get<Value = Option<Result<T, AppError>>> + Send + Sync + 'static,
{
    move || match value.get() {
        Some(Err(error)) => Some(view! { <ErrorBox error/> }),
        _ => None,
    }
}
