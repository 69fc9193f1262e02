//! Trends for the browser: the figures of one range, for anyone with `viewer`.

use crate::errors::AppError;
use crate::trends::Trends;
use leptos::prelude::*;

/// The charts' figures for `range` (`24h`, `7d` or `30d`; anything else is `24h`).
#[server(prefix = "/fn", endpoint = "load_trends")]
pub async fn load_trends(range: String) -> Result<Trends, AppError> {
    use super::ssr;
    use crate::trends::Range;
    ssr::require(crate::access::Role::Viewer)?;
    let state = ssr::state()?;
    // Kept figures when `serve` refreshes them in the background (a few seconds old at
    // most), else computed now: see `services::trends_cache`.
    Ok(state.trends.get(&state.db, Range::parse(Some(&range)), crate::storage::now_ms()).await?)
}
