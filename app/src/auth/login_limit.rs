//! The sign-in backoff: a pure rule over the recent failed sign-ins the audit log holds,
//! so it holds across every instance.
//!
//! It slows the attacker, not the owner. Failures count per (username, client address):
//! someone guessing `admin`'s password from one address waits longer after each miss,
//! while `admin` signing in from their own address is not held up at all (a fixed lockout
//! per username let anyone lock every administrator out with five requests). Failures
//! from one address across all usernames have a larger allowance of their own, so
//! spraying passwords over many accounts is slowed too.

/// How far back failures count.
pub const WINDOW_MS: i64 = 15 * 60 * 1000;
/// Failures for one (username, address) before each further attempt must wait.
pub const FREE_PER_USER_AND_SOURCE: i64 = 3;
/// Failures from one address, over all usernames, before each further attempt must wait.
pub const FREE_PER_SOURCE: i64 = 20;
/// The longest wait the backoff asks for.
pub const MAX_WAIT_MS: i64 = 5 * 60 * 1000;

/// Recent failures of one kind: how many, and when the last was.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Failures {
    pub count: i64,
    pub last_at: Option<i64>,
}

/// How long after the last of `count` failures the next attempt may come: nothing within
/// the allowance, then 1 s, doubling with each further failure, up to [`MAX_WAIT_MS`].
pub fn wait_after(count: i64, free: i64) -> i64 {
    let over = count - free;
    if over < 0 {
        return 0;
    }
    let exponent = u32::try_from(over.min(20)).unwrap_or(20);
    1000i64.saturating_mul(1i64 << exponent).min(MAX_WAIT_MS)
}

/// Refuses an attempt that comes before its wait is over; the error says how long to wait
/// (in whole seconds, at least one) without revealing whether the username exists.
pub fn check(user_at_source: Failures, from_source: Failures, now_ms: i64) -> Result<(), String> {
    let ready_at = |f: Failures, free: i64| f.last_at.map_or(0, |last| last + wait_after(f.count, free));
    let ready = ready_at(user_at_source, FREE_PER_USER_AND_SOURCE).max(ready_at(from_source, FREE_PER_SOURCE));
    if now_ms >= ready {
        return Ok(());
    }
    let seconds = (ready - now_ms + 999) / 1000;
    Err(format!(
        "too many failed sign-in attempts from this address; wait {seconds} second{} and try again",
        if seconds == 1 { "" } else { "s" }
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(count: i64, last_at: i64) -> Failures {
        Failures { count, last_at: Some(last_at) }
    }

    #[test]
    fn the_wait_doubles_past_the_allowance_and_is_capped() {
        assert_eq!(wait_after(0, 3), 0);
        assert_eq!(wait_after(2, 3), 0);
        assert_eq!(wait_after(3, 3), 1000);
        assert_eq!(wait_after(4, 3), 2000);
        assert_eq!(wait_after(6, 3), 8000);
        assert_eq!(wait_after(40, 3), MAX_WAIT_MS);
        assert_eq!(wait_after(i64::MAX, 3), MAX_WAIT_MS);
    }

    #[test]
    fn attempts_wait_after_failures_from_the_same_address() {
        let now = 1_000_000;
        assert!(check(Failures::default(), Failures::default(), now).is_ok());
        assert!(check(f(2, now), f(2, now), now).is_ok(), "within the allowance");
        let err = check(f(5, now - 1000), f(5, now - 1000), now).unwrap_err();
        assert!(err.contains("wait 3 seconds"), "{err}");
        assert!(check(f(5, now - 4000), f(5, now - 4000), now).is_ok(), "the wait is over");
        // Spraying many usernames from one address: each pair is fresh, the address is not.
        let err = check(f(1, now), f(25, now - 1000), now).unwrap_err();
        assert!(err.contains("wait 31 seconds"), "{err}");
    }
}
