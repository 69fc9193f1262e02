//! The sign-in page. A plain form post, so it works before (or without) the wasm.

use crate::components::status::ActionError;
use crate::functions::auth::Login;
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

#[component]
pub fn LoginPage() -> impl IntoView {
    let login = ServerAction::<Login>::new();
    super::full_reload_on_success(login.value());
    let query = use_query_map();
    let next = move || query.with(|q| q.get("next")).unwrap_or_else(|| "/runs".to_string());
    view! {
        <Title text="Sign in"/>
        <main class="login">
            <h1 class="brand">"Flightdeck"</h1>
            <p class="muted">"The operator console for AI agents in production."</p>
            <ActionForm action=login attr:class="card form">
                <label>
                    "Username"
                    <input type="text" name="username" autocomplete="username" required autofocus/>
                </label>
                <label>
                    "Password"
                    <input type="password" name="password" autocomplete="current-password" required/>
                </label>
                <input type="hidden" name="next" value=next/>
                <button type="submit" class="primary">"Sign in"</button>
                <ActionError value=login.value()/>
            </ActionForm>
            <p class="muted small">
                "First start? The administrator password was printed once on the server's console. "
                "Forgot it? Run " <code>"flightdeck user reset admin"</code> "."
            </p>
        </main>
    }
}
