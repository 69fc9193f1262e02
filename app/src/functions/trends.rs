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
    // The window's rollup rows, kept at ingest: a few thousand rows whatever the range.
    let now = store::now_ms();
    let window = domain::trends::Window::ending_at(Range::parse(Some(&range)), now);
    let inputs = store::trends::inputs_for(&state.db, &window, agent.as_deref()).await?;
    let mut trends = domain::trends::compute(window, &inputs);
    trends.computed_at_ms = now;
    let agents = store::runs::agents(&state.db).await?;
    Ok(TrendsView { trends, agents })
}
