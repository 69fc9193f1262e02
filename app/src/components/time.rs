//! How times are shown: absolute UTC, the same on the server and in the browser so the
//! page hydrates without a mismatch.

use chrono::{DateTime, Utc};
use leptos::prelude::*;

pub fn format_utc(at: &DateTime<Utc>) -> String {
    at.format("%Y-%m-%d %H:%M:%S UTC").to_string()
}

/// A `<time>` element with the machine-readable instant and the readable form.
#[component]
pub fn Timestamp(at: DateTime<Utc>) -> impl IntoView {
    let iso = at.to_rfc3339();
    view! { <time datetime=iso.clone() title=iso>{format_utc(&at)}</time> }
}

/// An optional time, with a dash when absent.
#[component]
pub fn MaybeTimestamp(at: Option<DateTime<Utc>>, #[prop(into)] none: String) -> impl IntoView {
    match at {
        Some(at) => view! { <Timestamp at/> }.into_any(),
        None => view! { <span class="muted">{none}</span> }.into_any(),
    }
}
