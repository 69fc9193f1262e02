//! One module per page (or area of pages).

pub mod admin;
pub mod alerts;
pub mod approvals;
pub mod escalations;
pub mod login;
pub mod runs;
pub mod trends;

use crate::errors::AppError;
use leptos::prelude::*;

/// After signing in or out, load the returned path as a whole new page, so every part of
/// it starts from the new session. Runs only in the browser.
pub fn full_reload_on_success<S>(value: S)
where
    S: Get<Value = Option<Result<String, AppError>>> + Send + Sync + 'static,
{
    Effect::new(move |_| {
        if let Some(Ok(path)) = value.get() {
            let _ = window().location().set_href(&path);
        }
    });
}
