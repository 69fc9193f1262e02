//! Flightdeck's pages: the Leptos app, its components and server functions, and (behind
//! the `ssr` feature) the flows the server functions and the server run (`services`),
//! sign-in (`auth`) and what every request is given (`state`). Built twice: natively
//! with `ssr` for the server, and to wasm with `hydrate` for the browser, which compiles
//! only the pages and the `domain` types they show.

#![recursion_limit = "256"]

pub mod app;
pub mod components;
pub mod errors;
pub mod functions;
pub mod path_id;
pub mod routes;

#[cfg(feature = "ssr")]
pub mod auth;
#[cfg(feature = "ssr")]
pub mod services;
#[cfg(feature = "ssr")]
pub mod state;

/// The browser entry point: attaches the interactive app to the server-rendered page.
#[cfg(feature = "hydrate")]
#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    console_error_panic_hook::set_once();
    leptos::mount::hydrate_body(app::App);
    // A marker for the browser tests: the page is interactive from here on.
    if let Some(body) = leptos::prelude::document().body() {
        let _ = body.set_attribute("data-hydrated", "true");
    }
}
