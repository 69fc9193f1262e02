//! Trends for the browser: the figures of one range, for anyone with `viewer`.

use crate::errors::AppError;
use crate::trends::Trends;
use leptos::prelude::*;

/// The charts' figures for `range` (`24h`, `7d` or `30d`; anything else is `24h`).
#[server(prefix = "/fn", endpoint = "load_trends")]
pub async fn load_trends(range: String) -> Result<Trends, AppError> {
    use super::ssr;
    use crate::trends::{compute, Range, Window};
    ssr::require(crate::access::Role::Viewer)?;
    let window = Window::ending_at(Range::parse(Some(&range)), crate::storage::now_ms());
    let inputs = crate::storage::trends::inputs(&ssr::db()?, &window).await?;
    // Bucketing 100,000 runs and sorting their costs is CPU work: keep it off the
    // threads that serve other requests.
    tokio::task::spawn_blocking(move || compute(window, &inputs)).await.map_err(|e| {
        tracing::error!(error = %e, "computing trends failed");
        AppError::Internal
    })
}
