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

use domain::trends::{compute, Range, Trends, Window};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use store::{Db, StoreResult};

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
    figures: HashMap<Key, Arc<Trends>>,
    /// When each range (of each agent looked at) was last viewed (Unix ms).
    viewed: HashMap<Key, i64>,
}

/// A range, and the agent the figures are limited to (`None`: every agent).
type Key = (Range, Option<String>);

impl std::fmt::Debug for TrendsCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.kept.is_some() { "TrendsCache(refreshed)" } else { "TrendsCache(off)" })
    }
}

fn key(range: Range, agent: Option<&str>) -> Key {
    (range, agent.map(str::to_string))
}

/// One range's figures as of `now_ms` (of `agent` only, when given), read and computed now.
pub async fn compute_now(db: &Db, range: Range, agent: Option<&str>, now_ms: i64) -> StoreResult<Trends> {
    let window = Window::ending_at(range, now_ms);
    let inputs = store::trends::inputs_for(db, &window, agent).await?;
    // Bucketing 100,000 runs and sorting their costs is CPU work: keep it off the
    // threads that serve other requests.
    let mut trends = tokio::task::spawn_blocking(move || compute(window, &inputs))
        .await
        .map_err(|e| store::StoreError::Invalid(format!("computing trends failed: {e}")))?;
    trends.computed_at_ms = now_ms;
    trends.agent = agent.map(str::to_string);
    Ok(trends)
}

impl TrendsCache {
    /// A cache that a background task keeps fresh with [`TrendsCache::refresh`].
    pub fn refreshed() -> TrendsCache {
        TrendsCache { kept: Some(Default::default()) }
    }

    /// The figures for `range` (of `agent` only, when given): the kept ones when young
    /// enough, else computed (and kept).
    pub async fn get(&self, db: &Db, range: Range, agent: Option<&str>, now_ms: i64) -> StoreResult<Trends> {
        let Some(kept) = &self.kept else { return compute_now(db, range, agent, now_ms).await };
        let found = {
            let mut kept = kept.lock().expect("trends cache lock");
            kept.viewed.insert(key(range, agent), now_ms);
            kept.figures.get(&key(range, agent)).cloned()
        };
        // Young enough, and for the same buckets (an hour or a day may have begun since).
        let window = Window::ending_at(range, now_ms);
        if let Some(t) = found.filter(|t| now_ms - t.computed_at_ms <= MAX_AGE_MS && t.window == window) {
            return Ok((*t).clone());
        }
        let fresh = compute_now(db, range, agent, now_ms).await?;
        kept.lock().expect("trends cache lock").figures.insert(key(range, agent), Arc::new(fresh.clone()));
        Ok(fresh)
    }

    /// Recomputes every range (of every agent); returns how long it took.
    pub async fn refresh(&self, db: &Db, now_ms: i64) -> StoreResult<Duration> {
        let keys: Vec<Key> = Range::ALL.into_iter().map(|r| key(r, None)).collect();
        self.recompute(db, now_ms, keys).await
    }

    /// Recomputes the ranges (and agents) viewed in the last [`IDLE_AFTER_MS`] (what
    /// `serve` runs); the ones idle longer are forgotten.
    pub async fn refresh_viewed(&self, db: &Db, now_ms: i64) -> StoreResult<Duration> {
        let keys: Vec<Key> = match &self.kept {
            Some(kept) => {
                let mut kept = kept.lock().expect("trends cache lock");
                let idle: Vec<Key> = kept
                    .viewed
                    .iter()
                    .filter(|(_, at)| now_ms - **at > IDLE_AFTER_MS)
                    .map(|(k, _)| k.clone())
                    .collect();
                // An agent's figures nobody looks at any more are dropped; the ranges of
                // every agent are few and kept.
                for k in idle.iter().filter(|(_, agent)| agent.is_some()) {
                    kept.viewed.remove(k);
                    kept.figures.remove(k);
                }
                kept.viewed.iter().filter(|(_, at)| now_ms - **at <= IDLE_AFTER_MS).map(|(k, _)| k.clone()).collect()
            }
            None => Vec::new(),
        };
        self.recompute(db, now_ms, keys).await
    }

    async fn recompute(&self, db: &Db, now_ms: i64, keys: Vec<Key>) -> StoreResult<Duration> {
        let started = std::time::Instant::now();
        if let Some(kept) = &self.kept {
            for (range, agent) in keys {
                let fresh = compute_now(db, range, agent.as_deref(), now_ms).await?;
                kept.lock().expect("trends cache lock").figures.insert((range, agent), Arc::new(fresh));
            }
        }
        Ok(started.elapsed())
    }
}

#[cfg(all(test, feature = "test-support"))]
mod tests {
    use super::*;
    use store::testing::TestDb;

    #[tokio::test]
    async fn kept_figures_are_served_until_they_are_too_old_and_off_means_always_fresh() {
        let t = TestDb::sqlite().await;
        let now = store::now_ms();
        let cache = TrendsCache::refreshed();
        cache.refresh(&t.db, now).await.unwrap();
        let kept = cache.get(&t.db, Range::Day, None, now + 1_000).await.unwrap();
        assert_eq!(kept.computed_at_ms, now, "young enough: the kept figures");
        let later = now + MAX_AGE_MS + 1;
        assert_eq!(cache.get(&t.db, Range::Day, None, later).await.unwrap().computed_at_ms, later, "too old: computed");
        // The background refresh leaves alone what nobody looked at lately.
        let idle = TrendsCache::refreshed();
        idle.get(&t.db, Range::Day, None, now).await.unwrap();
        idle.get(&t.db, Range::Day, Some("billing-bot"), now).await.unwrap();
        idle.refresh_viewed(&t.db, now + 5_000).await.unwrap();
        assert_eq!(
            idle.get(&t.db, Range::Day, None, now + 6_000).await.unwrap().computed_at_ms,
            now + 5_000,
            "viewed: refreshed"
        );
        let quiet = now + IDLE_AFTER_MS + 10_000;
        idle.refresh_viewed(&t.db, quiet).await.unwrap();
        let kept =
            idle.kept.as_ref().unwrap().lock().unwrap().figures.get(&key(Range::Day, None)).unwrap().computed_at_ms;
        assert_eq!(kept, now + 5_000, "idle for ten minutes: not recomputed");
        assert!(
            !idle.kept.as_ref().unwrap().lock().unwrap().figures.contains_key(&key(Range::Week, None)),
            "never viewed: never computed"
        );
        assert!(
            !idle.kept.as_ref().unwrap().lock().unwrap().figures.contains_key(&key(Range::Day, Some("billing-bot"))),
            "an agent's figures nobody looks at are dropped"
        );
        let off = TrendsCache::default();
        assert_eq!(off.get(&t.db, Range::Week, None, now + 5).await.unwrap().computed_at_ms, now + 5);
        t.cleanup().await;
    }
}
