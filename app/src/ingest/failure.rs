//! Why a run failed, in one line for the top of its page: the exception an SDK recorded
//! on the failing span (type and message), else that span's status message. Pure.

pub use crate::canonical::RunFailure as Failure;
use serde::Deserialize;

/// What the failure line needs of one stored span.
pub struct SpanOutcome<'a> {
    pub trace_id: &'a str,
    pub span_id: &'a str,
    pub parent_span_id: Option<&'a str>,
    pub name: &'a str,
    pub start_ns: i64,
    pub status_code: i32,
    pub status_message: Option<&'a str>,
    /// The span's stored events (a JSON array of `{name, attributes}`).
    pub events: &'a str,
}

#[derive(Deserialize)]
struct Event {
    #[serde(default)]
    name: String,
    #[serde(default)]
    attributes: serde_json::Map<String, serde_json::Value>,
}

const STATUS_ERROR: i32 = 2;

/// The failure of the latest trace: of its spans with an error status, the one where the
/// failure began (an erroring span none of whose children erred, earliest first), with its
/// exception; the root when nothing else says more.
pub fn failure_of(spans: &[SpanOutcome<'_>], latest_trace: &str) -> Option<Failure> {
    let erred: Vec<&SpanOutcome> =
        spans.iter().filter(|s| s.trace_id == latest_trace && s.status_code == STATUS_ERROR).collect();
    let exception = |s: &SpanOutcome| -> Option<(Option<String>, Option<String>)> {
        let events: Vec<Event> = serde_json::from_str(s.events).ok()?;
        let e = events.into_iter().find(|e| e.name == "exception")?;
        let text = |k: &str| e.attributes.get(k).and_then(|v| v.as_str()).map(str::to_string);
        Some((text("exception.type"), text("exception.message")))
    };
    let has_erring_child = |s: &SpanOutcome| erred.iter().any(|c| c.parent_span_id == Some(s.span_id));
    let mut origins: Vec<&&SpanOutcome> = erred.iter().filter(|s| !has_erring_child(s)).collect();
    origins.sort_by_key(|s| s.start_ns);
    // An exception says most; then a span inside the run over the root, whose message
    // usually only repeats that something below failed.
    let with_exception = origins.iter().copied().copied().find(|s| exception(s).is_some());
    let inner = origins.iter().copied().copied().find(|s| s.parent_span_id.is_some() && s.status_message.is_some());
    let chosen = with_exception
        .or(inner)
        .or_else(|| erred.iter().copied().filter(|s| s.status_message.is_some()).min_by_key(|s| s.start_ns))
        .or_else(|| erred.iter().copied().min_by_key(|s| s.start_ns))?;
    let (exception_type, exception_message) = exception(chosen).unwrap_or_default();
    Some(Failure {
        span_id: chosen.span_id.to_string(),
        span_name: chosen.name.to_string(),
        exception_type,
        message: exception_message.or_else(|| chosen.status_message.map(str::to_string)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s<'a>(
        id: &'a str,
        parent: Option<&'a str>,
        start: i64,
        code: i32,
        msg: Option<&'a str>,
        events: &'a str,
    ) -> SpanOutcome<'a> {
        SpanOutcome {
            trace_id: "t",
            span_id: id,
            parent_span_id: parent,
            name: id,
            start_ns: start,
            status_code: code,
            status_message: msg,
            events,
        }
    }

    #[test]
    fn the_innermost_failure_with_its_exception_is_the_reason() {
        let exc = r#"[{"name":"exception","attributes":{"exception.type":"TimeoutError","exception.message":"db timed out"}}]"#;
        let spans = [
            s("root", None, 0, 2, Some("run failed"), "[]"),
            s("step", Some("root"), 1, 2, None, "[]"),
            s("tool", Some("step"), 2, 2, Some("error"), exc),
            s("ok", Some("root"), 3, 0, None, "[]"),
            // A failed span beside the chain, not under an erring parent: the exception wins.
            s("other", Some("ok"), 1, 2, Some("flaky"), "[]"),
        ];
        let f = failure_of(&spans, "t").unwrap();
        assert_eq!(f.span_name, "tool");
        assert_eq!(f.exception_type.as_deref(), Some("TimeoutError"));
        assert_eq!(f.message.as_deref(), Some("db timed out"));
    }

    #[test]
    fn the_root_message_when_nothing_inside_says_more() {
        let spans = [s("root", None, 0, 2, Some("max retries"), "[]"), s("step", Some("root"), 1, 2, None, "not json")];
        let f = failure_of(&spans, "t").unwrap();
        assert_eq!((f.span_name.as_str(), f.message.as_deref()), ("root", Some("max retries")));
        assert_eq!(failure_of(&spans, "other"), None, "only the latest trace counts");
        assert_eq!(failure_of(&[s("root", None, 0, 0, None, "[]")], "t"), None);
    }
}
