//! Why a run failed, in one line for the top of its page: the exception an SDK recorded
//! on the failing span (type and message), else that span's status message. Pure.

pub use crate::canonical::RunFailure as Failure;
use serde::Deserialize;
use std::collections::HashMap;

/// What the failure line needs of one stored span.
pub struct SpanOutcome<'a> {
    pub trace_id: &'a str,
    pub span_id: &'a str,
    pub parent_span_id: Option<&'a str>,
    pub name: &'a str,
    pub start_ns: i64,
    pub end_ns: i64,
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

/// The failure that ended the latest trace. Failures nest (a tool's error fails its step,
/// which fails the run, though a framework may leave the step between them unmarked), and
/// a run may have failed and recovered earlier: so the chain is followed from the erring
/// span that ended last among those with no erring ancestor (the root, when it erred),
/// down through the erring descendant that ended last at each level (the nearest erring
/// spans below, whatever lies between). Of that chain the deepest span with an exception
/// says what failed, else the deepest with a status message, else the deepest span.
pub fn failure_of(spans: &[SpanOutcome<'_>], latest_trace: &str) -> Option<Failure> {
    let in_trace: HashMap<&str, &SpanOutcome> =
        spans.iter().filter(|s| s.trace_id == latest_trace).map(|s| (s.span_id, s)).collect();
    let erred: Vec<&SpanOutcome> = in_trace.values().copied().filter(|s| s.status_code == STATUS_ERROR).collect();
    // Each erring span's nearest erring ancestor; a walk longer than the trace is a cycle
    // in agent-supplied parent ids, and ends.
    let ancestor: HashMap<&str, Option<&str>> = erred
        .iter()
        .map(|s| {
            let mut at = s.parent_span_id;
            let mut found = None;
            for _ in 0..in_trace.len() {
                let Some(parent) = at.and_then(|id| in_trace.get(id)) else { break };
                if parent.status_code == STATUS_ERROR {
                    found = Some(parent.span_id);
                    break;
                }
                at = parent.parent_span_id;
            }
            (s.span_id, found)
        })
        .collect();
    let below = |id: Option<&str>| -> Option<&SpanOutcome> {
        last_ended(erred.iter().copied().filter(|s| ancestor.get(s.span_id).copied().flatten() == id))
    };
    let mut at = below(None)?;
    let mut chain = vec![at];
    while let Some(next) = below(Some(at.span_id)) {
        if chain.iter().any(|c| c.span_id == next.span_id) {
            break;
        }
        at = next;
        chain.push(at);
    }
    let exception = |s: &SpanOutcome| -> Option<(Option<String>, Option<String>)> {
        let events: Vec<Event> = serde_json::from_str(s.events).ok()?;
        let e = events.into_iter().find(|e| e.name == "exception")?;
        let text = |k: &str| e.attributes.get(k).and_then(|v| v.as_str()).map(str::to_string);
        Some((text("exception.type"), text("exception.message")))
    };
    let deepest = chain.iter().rev();
    let chosen = deepest
        .clone()
        .find(|s| exception(s).is_some())
        .or_else(|| deepest.clone().find(|s| s.status_message.is_some()))
        .copied()
        .unwrap_or(at);
    let (exception_type, exception_message) = exception(chosen).unwrap_or_default();
    Some(Failure {
        span_id: chosen.span_id.to_string(),
        span_name: chosen.name.to_string(),
        exception_type,
        message: exception_message.or_else(|| chosen.status_message.map(str::to_string)),
    })
}

fn last_ended<'s, 'a: 's>(candidates: impl Iterator<Item = &'s SpanOutcome<'a>>) -> Option<&'s SpanOutcome<'a>> {
    candidates.max_by_key(|s| (s.end_ns, s.start_ns))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[allow(clippy::too_many_arguments)]
    fn s<'a>(
        id: &'a str,
        parent: Option<&'a str>,
        start: i64,
        end: i64,
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
            end_ns: end,
            status_code: code,
            status_message: msg,
            events,
        }
    }

    fn exception(kind: &str, message: &str) -> String {
        format!(
            r#"[{{"name":"exception","attributes":{{"exception.type":"{kind}","exception.message":"{message}"}}}}]"#
        )
    }

    #[test]
    fn the_innermost_failure_with_its_exception_is_the_reason() {
        let exc = exception("TimeoutError", "db timed out");
        let spans = [
            s("root", None, 0, 100, 2, Some("run failed"), "[]"),
            s("step", Some("root"), 1, 90, 2, None, "[]"),
            s("tool", Some("step"), 2, 80, 2, Some("error"), &exc),
            s("ok", Some("root"), 3, 50, 0, None, "[]"),
            // A failure the run recovered from, under a span that did not fail.
            s("other", Some("ok"), 4, 10, 2, Some("flaky"), "[]"),
        ];
        let f = failure_of(&spans, "t").unwrap();
        assert_eq!(f.span_name, "tool");
        assert_eq!(f.exception_type.as_deref(), Some("TimeoutError"));
        assert_eq!(f.message.as_deref(), Some("db timed out"));
    }

    #[test]
    fn the_failure_that_ended_the_run_is_the_reason_not_an_earlier_one() {
        // Step 1's get_ticket timed out (with an exception) and step 1 failed; the agent went
        // on, and step 2's get_current_time failed last, ending the run.
        let early = exception("TimeoutError", "get_ticket timed out");
        let late = exception("ValueError", "unknown timezone Mars/Olympus");
        let spans = [
            s("run", None, 0, 100, 2, Some("agent failed"), "[]"),
            s("step1", Some("run"), 1, 40, 2, None, "[]"),
            s("get_ticket", Some("step1"), 2, 30, 2, Some("timeout"), &early),
            s("step2", Some("run"), 50, 95, 2, None, "[]"),
            s("get_current_time", Some("step2"), 60, 90, 2, None, &late),
        ];
        let f = failure_of(&spans, "t").unwrap();
        assert_eq!(f.span_name, "get_current_time");
        assert_eq!(f.message.as_deref(), Some("unknown timezone Mars/Olympus"));
        // With the root not failing, the failure that ended last still wins.
        let spans = [
            s("run", None, 0, 100, 0, None, "[]"),
            s("get_ticket", Some("run"), 2, 30, 2, Some("timeout"), &early),
            s("get_current_time", Some("run"), 60, 90, 2, Some("bad zone"), "[]"),
        ];
        assert_eq!(failure_of(&spans, "t").unwrap().span_name, "get_current_time");
        // Steps the framework left unmarked between the run and its tools: the tool that
        // failed last still says what ended the run, not the root's summary.
        let http = exception("HTTPError", "500 Internal Server Error");
        let spans = [
            s("run", None, 0, 100, 2, Some("create_document failed after 2 attempts"), "[]"),
            s("step1", Some("run"), 1, 95, 0, None, "[]"),
            s("create_document", Some("step1"), 10, 40, 2, Some("HTTP 500"), "[]"),
            s("create_document#2", Some("step1"), 50, 90, 2, None, &http),
        ];
        let f = failure_of(&spans, "t").unwrap();
        assert_eq!(
            (f.span_name.as_str(), f.message.as_deref()),
            ("create_document#2", Some("500 Internal Server Error"))
        );
    }

    #[test]
    fn the_root_message_when_nothing_inside_says_more() {
        let spans =
            [s("root", None, 0, 10, 2, Some("max retries"), "[]"), s("step", Some("root"), 1, 5, 2, None, "not json")];
        let f = failure_of(&spans, "t").unwrap();
        assert_eq!((f.span_name.as_str(), f.message.as_deref()), ("root", Some("max retries")));
        assert_eq!(failure_of(&spans, "other"), None, "only the latest trace counts");
        assert_eq!(failure_of(&[s("root", None, 0, 1, 0, None, "[]")], "t"), None);
    }

    #[test]
    fn parent_ids_that_loop_end_the_walk() {
        let spans = [s("a", Some("b"), 0, 10, 2, Some("a failed"), "[]"), s("b", Some("a"), 1, 9, 2, None, "[]")];
        // Every span has an erring parent: no chain starts, and nothing is invented.
        assert_eq!(failure_of(&spans, "t"), None);
        let spans = [
            s("root", None, 0, 10, 2, None, "[]"),
            s("a", Some("root"), 1, 9, 2, Some("a failed"), "[]"),
            s("b", Some("a"), 2, 8, 2, None, "[]"),
        ];
        assert_eq!(failure_of(&spans, "t").unwrap().span_name, "a");
    }
}
