//! How times are shown: absolute UTC, the same on the server and in the browser so the
//! page hydrates without a mismatch.

use chrono::{DateTime, Utc};
use leptos::prelude::*;

pub fn format_utc(at: &DateTime<Utc>) -> String {
    at.format("%Y-%m-%d %H:%M:%S UTC").to_string()
}

/// A `<time>` element with the machine-readable instant and the readable form.
#[component]
pub fn Timestamp(at: DateTime<Utc>) -> impl IntoView {
    let iso = at.to_rfc3339();
    view! { <time datetime=iso.clone() title=iso>{format_utc(&at)}</time> }
}

/// An optional time, with a dash when absent.
#[component]
pub fn MaybeTimestamp(at: Option<DateTime<Utc>>, #[prop(into)] none: String) -> impl IntoView {
    match at {
        Some(at) => view! { <Timestamp at/> }.into_any(),
        None => view! { <span class="muted">{none}</span> }.into_any(),
    }
}

/// "3 min ago" relative to `now` (the server's clock, carried in the page data).
pub fn ago(at: &DateTime<Utc>, now: &DateTime<Utc>) -> String {
    let secs = (*now - *at).num_seconds();
    match secs {
        s if s < 0 => "in the future".into(),
        s if s < 60 => format!("{s} s ago"),
        s if s < 3600 => format!("{} min ago", s / 60),
        s if s < 86_400 => format!("{} h ago", s / 3600),
        s => format!("{} d ago", s / 86_400),
    }
}

/// A duration in milliseconds, readably.
pub fn duration_ms(ms: i64) -> String {
    match ms {
        ms if ms < 1_000 => format!("{ms} ms"),
        ms if ms < 60_000 => format!("{:.1} s", ms as f64 / 1000.0),
        ms if ms < 3_600_000 => format!("{}m {}s", ms / 60_000, (ms % 60_000) / 1000),
        ms => format!("{}h {}m", ms / 3_600_000, (ms % 3_600_000) / 60_000),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_times_and_durations_read_well() {
        let now = Utc::now();
        assert_eq!(ago(&(now - chrono::Duration::seconds(5)), &now), "5 s ago");
        assert_eq!(ago(&(now - chrono::Duration::minutes(3)), &now), "3 min ago");
        assert_eq!(ago(&(now - chrono::Duration::hours(5)), &now), "5 h ago");
        assert_eq!(duration_ms(250), "250 ms");
        assert_eq!(duration_ms(12_340), "12.3 s");
        assert_eq!(duration_ms(125_000), "2m 5s");
    }
}

/// "backlog 17 min" style age without the "ago".
pub fn backlog_age(since: &chrono::DateTime<chrono::Utc>, now: &chrono::DateTime<chrono::Utc>) -> String {
    ago(since, now).trim_end_matches(" ago").to_string()
}
