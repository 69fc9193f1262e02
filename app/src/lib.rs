//! Flightdeck's product crate: the pages, components and server functions, the data
//! types they share, and (behind the `ssr` feature) the domain rules and storage the
//! server functions call. Built twice: natively with `ssr` for the server, and to wasm
//! with `hydrate` for the browser.

#![recursion_limit = "256"]

pub mod access;
pub mod alerts;
pub mod app;
pub mod approvals;
pub mod canonical;
pub mod clock;
pub mod components;
pub mod errors;
pub mod escalations;
pub mod functions;
pub mod ledger;
pub mod models;
pub mod pattern;
pub mod pricing;
pub mod routes;
pub mod stats;
pub mod trends;
pub mod url;
pub mod vocabulary;

#[cfg(feature = "ssr")]
pub mod auth;
#[cfg(feature = "ssr")]
pub mod ingest;
#[cfg(feature = "ssr")]
pub mod mcp;
#[cfg(feature = "ssr")]
pub mod notify;
#[cfg(feature = "ssr")]
pub mod replay;
#[cfg(feature = "ssr")]
pub mod replay_results;
#[cfg(feature = "ssr")]
pub mod run_query;
#[cfg(feature = "ssr")]
pub mod services;
#[cfg(feature = "ssr")]
pub mod state;
#[cfg(feature = "ssr")]
pub mod storage;
#[cfg(feature = "ssr")]
pub mod trace_view;
#[cfg(feature = "ssr")]
pub mod webhook_body;

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
