//! The trends page's figures, kept in memory and refreshed in the background.
//!
//! Reading a range's runs and computing its figures took 0.75 to 0.93 s over 150,000 runs
//! (1.2 million spans) on SQLite: the cost quantiles need every run's cost, so no index
//! makes the read small. The page's buckets are hours (24 h) to days (30 d), so figures a
//! few seconds old look the same as fresh ones: `serve` recomputes every range someone
//! viewed in the last [`IDLE_AFTER_MS`] every [`REFRESH_EVERY`] (a range nobody looks at
//! costs nothing), and a page reads the kept figures, which it takes when younger than
//! [`MAX_AGE_MS`]; older or missing (just after a start, or the first view after a quiet
//! spell) it computes and keeps them itself. The page says when its figures were computed.
//!
//! Without a refresher (tests, one-off tools) nothing is kept and every view computes, so
//! what a view shows is always what the database holds at that moment.

use crate::storage::{Db, StoreResult};
use crate::trends::{compute, Range, Trends, Window};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How often `serve` recomputes every range.
pub const REFRESH_EVERY: Duration = Duration::from_secs(30);
/// A range not viewed for this long is no longer refreshed in the background.
pub const IDLE_AFTER_MS: i64 = 10 * 60_000;
/// The oldest kept figures a page shows (two refreshes, so a slow refresh never makes a
/// page compute).
pub const MAX_AGE_MS: i64 = 2 * 30_000 + 15_000;

#[derive(Clone, Default)]
pub struct TrendsCache {
    /// `None`: keep nothing, compute every time.
    kept: Option<Arc<Mutex<Kept>>>,
}

#[derive(Default)]
struct Kept {
    figures: HashMap<&'static str, Arc<Trends>>,
    /// When each range was last viewed (Unix ms).
    viewed: HashMap<&'static str, i64>,
}

impl std::fmt::Debug for TrendsCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.kept.is_some() { "TrendsCache(refreshed)" } else { "TrendsCache(off)" })
    }
}

fn key(range: Range) -> &'static str {
    match range {
        Range::Day => "24h",
        Range::Week => "7d",
        Range::Month => "30d",
    }
}

/// One range's figures as of `now_ms`, read and computed now.
pub async fn compute_now(db: &Db, range: Range, now_ms: i64) -> StoreResult<Trends> {
    let window = Window::ending_at(range, now_ms);
    let inputs = crate::storage::trends::inputs(db, &window).await?;
    // Bucketing 100,000 runs and sorting their costs is CPU work: keep it off the
    // threads that serve other requests.
    let mut trends = tokio::task::spawn_blocking(move || compute(window, &inputs))
        .await
        .map_err(|e| crate::storage::StoreError::Invalid(format!("computing trends failed: {e}")))?;
    trends.computed_at_ms = now_ms;
    Ok(trends)
}

impl TrendsCache {
    /// A cache that a background task keeps fresh with [`TrendsCache::refresh`].
    pub fn refreshed() -> TrendsCache {
        TrendsCache { kept: Some(Default::default()) }
    }

    /// The figures for `range`: the kept ones when young enough, else computed (and kept).
    pub async fn get(&self, db: &Db, range: Range, now_ms: i64) -> StoreResult<Trends> {
        let Some(kept) = &self.kept else { return compute_now(db, range, now_ms).await };
        let found = {
            let mut kept = kept.lock().expect("trends cache lock");
            kept.viewed.insert(key(range), now_ms);
            kept.figures.get(key(range)).cloned()
        };
        // Young enough, and for the same buckets (an hour or a day may have begun since).
        let window = Window::ending_at(range, now_ms);
        if let Some(t) = found.filter(|t| now_ms - t.computed_at_ms <= MAX_AGE_MS && t.window == window) {
            return Ok((*t).clone());
        }
        let fresh = compute_now(db, range, now_ms).await?;
        kept.lock().expect("trends cache lock").figures.insert(key(range), Arc::new(fresh.clone()));
        Ok(fresh)
    }

    /// Recomputes every range; returns how long it took.
    pub async fn refresh(&self, db: &Db, now_ms: i64) -> StoreResult<Duration> {
        self.recompute(db, now_ms, |_| true).await
    }

    /// Recomputes the ranges viewed in the last [`IDLE_AFTER_MS`] (what `serve` runs).
    pub async fn refresh_viewed(&self, db: &Db, now_ms: i64) -> StoreResult<Duration> {
        let viewed = match &self.kept {
            Some(kept) => kept.lock().expect("trends cache lock").viewed.clone(),
            None => HashMap::new(),
        };
        self.recompute(db, now_ms, |range| viewed.get(key(range)).is_some_and(|at| now_ms - at <= IDLE_AFTER_MS)).await
    }

    async fn recompute(&self, db: &Db, now_ms: i64, wanted: impl Fn(Range) -> bool) -> StoreResult<Duration> {
        let started = std::time::Instant::now();
        if let Some(kept) = &self.kept {
            for range in Range::ALL.into_iter().filter(|r| wanted(*r)) {
                let fresh = compute_now(db, range, now_ms).await?;
                kept.lock().expect("trends cache lock").figures.insert(key(range), Arc::new(fresh));
            }
        }
        Ok(started.elapsed())
    }
}

#[cfg(all(test, feature = "test-support"))]
mod tests {
    use super::*;
    use crate::storage::testing::TestDb;

    #[tokio::test]
    async fn kept_figures_are_served_until_they_are_too_old_and_off_means_always_fresh() {
        let t = TestDb::sqlite().await;
        let now = crate::storage::now_ms();
        let cache = TrendsCache::refreshed();
        cache.refresh(&t.db, now).await.unwrap();
        let kept = cache.get(&t.db, Range::Day, now + 1_000).await.unwrap();
        assert_eq!(kept.computed_at_ms, now, "young enough: the kept figures");
        let later = now + MAX_AGE_MS + 1;
        assert_eq!(cache.get(&t.db, Range::Day, later).await.unwrap().computed_at_ms, later, "too old: computed");
        // The background refresh leaves alone what nobody looked at lately.
        let idle = TrendsCache::refreshed();
        idle.get(&t.db, Range::Day, now).await.unwrap();
        idle.refresh_viewed(&t.db, now + 5_000).await.unwrap();
        assert_eq!(
            idle.get(&t.db, Range::Day, now + 6_000).await.unwrap().computed_at_ms,
            now + 5_000,
            "viewed: refreshed"
        );
        let quiet = now + IDLE_AFTER_MS + 10_000;
        idle.refresh_viewed(&t.db, quiet).await.unwrap();
        let kept = idle.kept.as_ref().unwrap().lock().unwrap().figures.get("24h").unwrap().computed_at_ms;
        assert_eq!(kept, now + 5_000, "idle for ten minutes: not recomputed");
        assert!(
            !idle.kept.as_ref().unwrap().lock().unwrap().figures.contains_key("7d"),
            "never viewed: never computed"
        );
        let off = TrendsCache::default();
        assert_eq!(off.get(&t.db, Range::Week, now + 5).await.unwrap().computed_at_ms, now + 5);
        t.cleanup().await;
    }
}
