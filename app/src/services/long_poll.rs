//! One way to hold a request until its answer changes, shared by the approval wait and the
//! guarded-call waits: check at once, then again whenever one of the ids the answer hangs
//! on is announced on the hub, at the moment the answer changes by itself (an expiry, a
//! call's timeout), at least every `hub.recheck()` for changes nobody announced here, and a
//! last time never: at the deadline or at shutdown the answer as it stands is returned.

use super::approval_hub::ApprovalHub;
use std::future::Future;
use tokio::sync::broadcast::error::RecvError;
use tokio::time::Instant;

/// What to wait on before checking again.
#[derive(Debug, Clone, Default)]
pub struct Watch {
    /// Announced ids (approval requests, guarded calls) that may change the answer.
    pub ids: Vec<String>,
    /// When the answer changes without anyone announcing it.
    pub wake_at: Option<Instant>,
}

/// One check's outcome: the answer to give now, or the answer so far and what to wait on.
pub enum Check<T> {
    Done(T),
    Wait(T, Watch),
}

/// Runs `check` until it is done or `deadline` passes, and returns its last answer.
/// Subscribes before the first check, so an announcement between a check and the wait
/// is not missed.
pub async fn hold<T, E, F, Fut>(hub: &ApprovalHub, deadline: Instant, mut check: F) -> Result<T, E>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Check<T>, E>>,
{
    let mut changes = hub.subscribe();
    let mut closing = hub.closing();
    loop {
        let (value, watch) = match check().await? {
            Check::Done(value) => return Ok(value),
            Check::Wait(value, watch) => (value, watch),
        };
        let now = Instant::now();
        if now >= deadline || *closing.borrow() {
            return Ok(value);
        }
        let mut wake = deadline.min(now + hub.recheck());
        if let Some(at) = watch.wake_at {
            wake = wake.min(at.max(now));
        }
        loop {
            tokio::select! {
                _ = tokio::time::sleep_until(wake) => break,
                _ = closing.changed() => break,
                received = changes.recv() => match received {
                    Ok(id) if watch.ids.contains(&id) => break,
                    Ok(_) => continue,
                    // Missed announcements may include ours.
                    Err(RecvError::Lagged(_)) => break,
                    Err(RecvError::Closed) => return Ok(value),
                },
            }
        }
    }
}

/// The instant `at_ms` (Unix milliseconds) falls on, on the monotonic clock.
pub fn instant_at(at_ms: i64) -> Instant {
    let from_now = at_ms - domain::clock::now_ms();
    Instant::now() + std::time::Duration::from_millis(from_now.max(0) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    #[tokio::test]
    async fn an_announcement_of_a_watched_id_checks_again_at_once() {
        let hub = ApprovalHub::new().with_recheck(Duration::from_secs(60));
        let checks = AtomicUsize::new(0);
        let announcer = {
            let hub = hub.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(50)).await;
                hub.wake_local("other");
                hub.wake_local("apr_1");
            })
        };
        let started = Instant::now();
        let answer: Result<usize, ()> = hold(&hub, Instant::now() + Duration::from_secs(30), || {
            let n = checks.fetch_add(1, Ordering::SeqCst);
            async move {
                Ok(if n == 0 {
                    Check::Wait(n, Watch { ids: vec!["apr_1".into()], wake_at: None })
                } else {
                    Check::Done(n)
                })
            }
        })
        .await;
        announcer.await.unwrap();
        assert_eq!(answer, Ok(1), "checked once at first and once when apr_1 was announced");
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[tokio::test]
    async fn the_answer_changing_by_itself_is_seen_at_its_moment_and_the_deadline_returns_the_last() {
        let hub = ApprovalHub::new().with_recheck(Duration::from_secs(60));
        let started = Instant::now();
        let soon = started + Duration::from_millis(100);
        let answer: Result<&str, ()> = hold(&hub, started + Duration::from_secs(30), || async move {
            Ok(if Instant::now() >= soon {
                Check::Done("changed")
            } else {
                Check::Wait("waiting", Watch { ids: vec![], wake_at: Some(soon) })
            })
        })
        .await;
        assert_eq!(answer, Ok("changed"));
        assert!(started.elapsed() < Duration::from_secs(5), "woke at the moment, not at the recheck or deadline");

        let short = Instant::now() + Duration::from_millis(50);
        let answer: Result<&str, ()> =
            hold(&hub, short, || async { Ok(Check::Wait("still waiting", Watch::default())) }).await;
        assert_eq!(answer, Ok("still waiting"));
    }
}
