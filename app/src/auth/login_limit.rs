//! The sign-in rate limit: a pure rule over how many recent failures the audit log holds
//! for the username and for the address, so it holds across every instance.

/// How far back failures count.
pub const WINDOW_MS: i64 = 15 * 60 * 1000;
/// Failures for one username within the window before further attempts are refused.
pub const MAX_PER_USER: i64 = 5;
/// Failures from one address within the window (across usernames) before refusing.
pub const MAX_PER_SOURCE: i64 = 20;

/// Refuses an attempt when either count has reached its limit; the message says why and
/// how long to wait, without revealing whether the username exists.
pub fn check(failures_for_user: i64, failures_from_source: i64) -> Result<(), String> {
    if failures_for_user >= MAX_PER_USER || failures_from_source >= MAX_PER_SOURCE {
        return Err(format!(
            "too many failed sign-in attempts; wait {} minutes and try again, or ask an \
             administrator to reset the password",
            WINDOW_MS / 60_000
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allows_up_to_the_limit_and_refuses_at_it() {
        assert!(check(0, 0).is_ok());
        assert!(check(MAX_PER_USER - 1, MAX_PER_SOURCE - 1).is_ok());
        assert!(check(MAX_PER_USER, 0).is_err());
        assert!(check(0, MAX_PER_SOURCE).unwrap_err().contains("wait 15 minutes"));
    }
}
