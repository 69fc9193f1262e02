//! The waterfall's view of a run's spans, for runs of thousands: in start order, narrowed
//! to one span's subtree when zoomed, a page at a time; the spans navigation jumps to
//! (errors and side effects, in order, each with its page); and a search over span names
//! and attribute values that says which page each hit is on. Pure: storage reads the
//! spans, the page shows the result.

use crate::canonical::{MarkKind, SpanMark, WaterfallSpan};
use std::collections::{HashMap, HashSet};

/// A span as the view needs it: its waterfall row and its attributes' JSON text.
pub struct ViewSpan {
    pub row: WaterfallSpan,
    pub attributes: String,
}

/// What to show.
#[derive(Debug, Clone, Default)]
pub struct ViewRequest {
    /// 1-based; ignored when `focus` names a span shown.
    pub page: i64,
    pub per_page: i64,
    /// `trace:span` to show the page of.
    pub focus: Option<String>,
    /// `trace:span` whose subtree alone is shown.
    pub zoom: Option<String>,
    /// Text to find in span names and attribute values (case-insensitive).
    pub query: Option<String>,
}

/// The page to show and what leads elsewhere.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct View {
    pub spans: Vec<WaterfallSpan>,
    pub page: i64,
    pub pages: i64,
    /// Spans shown in all pages (the subtree's, when zoomed).
    pub total: i64,
    /// Errors and side effects in start order.
    pub marks: Vec<SpanMark>,
    /// Search hits in start order (at most [`MAX_MATCHES`]) and how many there are.
    pub matches: Vec<SpanMark>,
    pub match_count: i64,
    /// The span zoomed into, when it is among the run's spans.
    pub zoomed: Option<SpanMark>,
}

/// Most search hits listed; the count says how many there are.
pub const MAX_MATCHES: usize = 200;
/// Most errors and side effects navigation carries.
pub const MAX_MARKS: usize = 5000;

pub fn key(s: &WaterfallSpan) -> String {
    format!("{}:{}", s.trace_id, s.span_id)
}

/// Builds the view of `spans` (any order) for `request`.
pub fn view(mut spans: Vec<ViewSpan>, request: &ViewRequest) -> View {
    spans.sort_by(|a, b| {
        (a.row.start_ns, &a.row.trace_id, &a.row.span_id).cmp(&(b.row.start_ns, &b.row.trace_id, &b.row.span_id))
    });
    let zoomed = request.zoom.as_deref().and_then(|z| spans.iter().find(|s| key(&s.row) == z)).map(|s| s.row.clone());
    if let Some(root) = &zoomed {
        let keep = subtree(&spans, root);
        spans.retain(|s| keep.contains(&key(&s.row)));
    }
    let per_page = request.per_page.max(1);
    let page_of = |index: usize| index as i64 / per_page + 1;
    let mark = |index: usize, s: &ViewSpan, kind: MarkKind| SpanMark {
        key: key(&s.row),
        name: s.row.name.clone(),
        page: page_of(index),
        kind,
    };
    let mut marks = Vec::new();
    for (i, s) in spans.iter().enumerate() {
        if s.row.status_code == 2 {
            marks.push(mark(i, s, MarkKind::Error));
        }
        let effect = s.row.side_effect.as_deref();
        if matches!(effect, Some("write" | "irreversible" | "unknown")) && s.row.role.as_deref() == Some("tool") {
            marks.push(mark(i, s, MarkKind::SideEffect));
        }
        if marks.len() >= MAX_MARKS {
            break;
        }
    }
    let needle = request.query.as_deref().map(str::trim).filter(|q| !q.is_empty()).map(str::to_lowercase);
    let (mut matches, mut match_count) = (Vec::new(), 0);
    if let Some(needle) = &needle {
        for (i, s) in spans.iter().enumerate() {
            if found(s, needle) {
                match_count += 1;
                if matches.len() < MAX_MATCHES {
                    matches.push(mark(i, s, MarkKind::Match));
                }
            }
        }
    }
    let total = spans.len() as i64;
    let pages = ((total + per_page - 1) / per_page).max(1);
    let focused = request.focus.as_deref().and_then(|f| spans.iter().position(|s| key(&s.row) == f)).map(page_of);
    let page = focused.unwrap_or(request.page).clamp(1, pages);
    let rows =
        spans.into_iter().skip(((page - 1) * per_page) as usize).take(per_page as usize).map(|s| s.row).collect();
    let zoomed = zoomed.map(|z| SpanMark { key: key(&z), name: z.name.clone(), page: 1, kind: MarkKind::Match });
    View { spans: rows, page, pages, total, marks, matches, match_count, zoomed }
}

/// `root` and every span below it, by parent links within its trace.
fn subtree(spans: &[ViewSpan], root: &WaterfallSpan) -> HashSet<String> {
    let mut children: HashMap<&str, Vec<&str>> = HashMap::new();
    for s in spans.iter().filter(|s| s.row.trace_id == root.trace_id) {
        if let Some(parent) = s.row.parent_span_id.as_deref() {
            children.entry(parent).or_default().push(&s.row.span_id);
        }
    }
    let mut keep: HashSet<String> = HashSet::new();
    let mut stack = vec![root.span_id.as_str()];
    while let Some(id) = stack.pop() {
        if keep.insert(format!("{}:{id}", root.trace_id)) {
            stack.extend(children.get(id).into_iter().flatten());
        }
    }
    keep
}

/// Whether the span's name or one of its attribute values holds `needle` (lowercase).
fn found(s: &ViewSpan, needle: &str) -> bool {
    if s.row.name.to_lowercase().contains(needle) {
        return true;
    }
    let Ok(serde_json::Value::Object(attributes)) = serde_json::from_str::<serde_json::Value>(&s.attributes) else {
        return false;
    };
    attributes.values().any(|v| match v {
        serde_json::Value::String(text) => text.to_lowercase().contains(needle),
        other => other.to_string().to_lowercase().contains(needle),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(id: &str, parent: Option<&str>, start: i64, status: i32, effect: Option<&str>, attrs: &str) -> ViewSpan {
        ViewSpan {
            row: WaterfallSpan {
                trace_id: "t".into(),
                span_id: id.into(),
                parent_span_id: parent.map(Into::into),
                name: format!("span {id}"),
                start_ns: start,
                end_ns: start + 10,
                status_code: status,
                status_message: None,
                role: effect.map(|_| "tool".into()),
                step_index: None,
                tool_name: None,
                side_effect: effect.map(Into::into),
                outcome: None,
                attempt: None,
                idempotency_key: None,
                external_id: None,
            },
            attributes: attrs.into(),
        }
    }

    fn run() -> Vec<ViewSpan> {
        let mut spans = vec![span("root", None, 0, 0, None, "{}")];
        for i in 1..=25 {
            let id = format!("s{i:02}");
            let effect = (i % 10 == 0).then_some("write");
            let status = if i == 23 { 2 } else { 0 };
            let attrs = if i == 17 { r#"{"gen_ai.tool.name":"get_ticket","ticket":"T-981"}"# } else { "{}" };
            spans.push(span(&id, Some("root"), i, status, effect, attrs));
        }
        spans.push(span("deep", Some("s05"), 6, 0, None, r#"{"query":"Ticket T-981 status"}"#));
        spans
    }

    fn request(page: i64) -> ViewRequest {
        ViewRequest { page, per_page: 10, ..Default::default() }
    }

    #[test]
    fn pages_hold_spans_in_start_order_and_navigation_knows_each_marks_page() {
        let v = view(run(), &request(2));
        assert_eq!((v.page, v.pages, v.total), (2, 3, 27));
        assert_eq!(v.spans.first().map(|s| s.span_id.as_str()), Some("s09"), "deep (start 6) sorts before s06");
        let error = v.marks.iter().find(|m| m.kind == MarkKind::Error).unwrap();
        assert_eq!((error.key.as_str(), error.page), ("t:s23", 3));
        let effects: Vec<(&str, i64)> =
            v.marks.iter().filter(|m| m.kind == MarkKind::SideEffect).map(|m| (m.key.as_str(), m.page)).collect();
        assert_eq!(effects, vec![("t:s10", 2), ("t:s20", 3)]);
    }

    #[test]
    fn a_focused_span_opens_its_page() {
        let v = view(run(), &ViewRequest { focus: Some("t:s23".into()), ..request(1) });
        assert_eq!(v.page, 3);
        assert!(v.spans.iter().any(|s| s.span_id == "s23"));
        let v = view(run(), &ViewRequest { focus: Some("t:nope".into()), ..request(9) });
        assert_eq!(v.page, 3, "an unknown focus leaves the page asked for, within range");
    }

    #[test]
    fn search_finds_names_and_attribute_values_and_says_where() {
        let v = view(run(), &ViewRequest { query: Some(" t-981 ".into()), ..request(1) });
        assert_eq!(v.match_count, 2);
        let hits: Vec<(&str, i64)> = v.matches.iter().map(|m| (m.key.as_str(), m.page)).collect();
        assert_eq!(hits, vec![("t:deep", 1), ("t:s17", 2)]);
        let by_name = view(run(), &ViewRequest { query: Some("SPAN S2".into()), ..request(1) });
        assert_eq!(by_name.match_count, 6, "s20..s25");
        let none = view(run(), &ViewRequest { query: Some("   ".into()), ..request(1) });
        assert_eq!((none.match_count, none.matches.len()), (0, 0));
    }

    #[test]
    fn a_zoom_shows_one_subtree_on_its_own_time_axis() {
        let v = view(run(), &ViewRequest { zoom: Some("t:s05".into()), ..request(1) });
        let ids: Vec<&str> = v.spans.iter().map(|s| s.span_id.as_str()).collect();
        assert_eq!(ids, vec!["s05", "deep"]);
        assert_eq!((v.total, v.pages), (2, 1));
        assert_eq!(v.zoomed.map(|z| z.key), Some("t:s05".into()));
        let unknown = view(run(), &ViewRequest { zoom: Some("t:gone".into()), ..request(1) });
        assert_eq!((unknown.total, unknown.zoomed), (27, None), "an unknown zoom shows the whole run");
    }
}
