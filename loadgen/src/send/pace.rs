//! Keeps the offered load at a span rate: each request reserves the time its spans are
//! worth at that rate, and the next one waits until that time has passed.

use std::time::Duration;

use tokio::time::{sleep_until, Instant};

pub(crate) struct Pacer {
    spans_per_sec: f64,
    next: Option<Instant>,
}

impl Pacer {
    pub(crate) fn new(spans_per_sec: f64) -> Self {
        Self { spans_per_sec, next: None }
    }

    /// Waits for this request's turn (never past `deadline`), then reserves `spans`.
    pub(crate) async fn wait(&mut self, spans: usize, deadline: Option<Instant>) {
        let turn = self.reserve(spans, Instant::now());
        sleep_until(deadline.map_or(turn, |d| d.min(turn))).await;
    }

    /// When a request of `spans` asked for at `now` may go, reserving its share of time.
    fn reserve(&mut self, spans: usize, now: Instant) -> Instant {
        // Time lost while the sender was slow is not made up with a burst: the rate is a
        // ceiling, not an average to catch up on.
        let turn = self.next.map_or(now, |next| next.max(now));
        self.next = Some(turn + Duration::from_secs_f64(spans as f64 / self.spans_per_sec));
        turn
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_spaced_by_their_span_count() {
        let start = Instant::now();
        let at = |ms| start + Duration::from_millis(ms);
        let mut pacer = Pacer::new(100.0);
        assert_eq!(pacer.reserve(50, start), start);
        assert_eq!(pacer.reserve(10, start), at(500));
        assert_eq!(pacer.reserve(10, at(550)), at(600));
        // Late by a second: goes at once, and the second is not made up.
        assert_eq!(pacer.reserve(10, at(1_700)), at(1_700));
        assert_eq!(pacer.reserve(10, at(1_700)), at(1_800));
    }

    #[tokio::test]
    async fn waiting_stops_at_the_deadline() {
        let start = Instant::now();
        let mut pacer = Pacer::new(1.0);
        pacer.wait(3_600, None).await;
        pacer.wait(1, Some(start + Duration::from_millis(50))).await;
        let waited = start.elapsed();
        assert!(waited >= Duration::from_millis(50) && waited < Duration::from_secs(5), "{waited:?}");
    }
}
