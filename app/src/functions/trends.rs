//! Trends for the browser: the figures of one range, of every agent or one, for anyone
//! with `viewer`.

use crate::errors::AppError;
use domain::trends::Trends;
use leptos::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrendsView {
    pub trends: Trends,
    /// Every agent runs name, for the agent filter.
    pub agents: Vec<String>,
}

/// The charts' figures for `range` (`24h`, `7d` or `30d`; anything else is `24h`), of
/// `agent`'s runs only when one is named.
#[server(prefix = "/fn", endpoint = "load_trends")]
pub async fn load_trends(range: String, #[server(default)] agent: Option<String>) -> Result<TrendsView, AppError> {
    use super::ssr;
    use domain::trends::Range;
    ssr::require(domain::access::Role::Viewer)?;
    let state = ssr::state()?;
    let agent = agent.map(|a| a.trim().to_string()).filter(|a| !a.is_empty());
    // Kept figures when `serve` refreshes them in the background (a few seconds old at
    // most), else computed now: see `services::trends_cache`.
    let now = store::now_ms();
    let trends = state.trends.get(&state.db, Range::parse(Some(&range)), agent.as_deref(), now).await?;
    let agents = store::runs::agents(&state.db).await?;
    Ok(TrendsView { trends, agents })
}
