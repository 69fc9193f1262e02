//! Time as Flightdeck stores it: milliseconds since the Unix epoch, on both backends, so
//! comparisons and indexes behave the same. Here, not in storage, because domain rules
//! (approval windows, run times) compute with the same numbers.

use chrono::{DateTime, TimeZone, Utc};

/// Now, in milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    Utc::now().timestamp_millis()
}

/// A stored time; out-of-range values read as the epoch rather than failing a page.
pub fn from_ms(ms: i64) -> DateTime<Utc> {
    Utc.timestamp_millis_opt(ms).single().unwrap_or_default()
}
