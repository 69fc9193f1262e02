//! Shows an approval payload exactly: verbatim and complete, rendered as text, with
//! whitespace and characters a reader could not otherwise see made visible (tabs, trailing
//! spaces, carriage returns, non-breaking and zero-width spaces, bidirectional controls),
//! so what the approver reads is what will go out.

use leptos::prelude::*;

/// A run of plain text, or a marker standing for one invisible or confusable character.
#[derive(Debug, Clone, PartialEq)]
pub enum Segment {
    Text(String),
    /// The marker shown, and a tooltip naming the character.
    Mark {
        shown: String,
        title: String,
    },
}

/// What to show for `c`, if it needs a marker.
fn marker(c: char) -> Option<(String, String)> {
    let name = |n: &str| format!("{n} (U+{:04X})", c as u32);
    match c {
        '\t' => Some(("⇥".into(), name("tab"))),
        '\r' => Some(("␍".into(), name("carriage return"))),
        '\u{00A0}' => Some(("⍽".into(), name("no-break space"))),
        '\u{200B}'..='\u{200F}' | '\u{2060}' | '\u{FEFF}' => Some((format!("[U+{:04X}]", c as u32), name("invisible"))),
        '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' => {
            Some((format!("[U+{:04X}]", c as u32), name("bidirectional control")))
        }
        '\u{2028}' | '\u{2029}' => Some((format!("[U+{:04X}]", c as u32), name("line/paragraph separator"))),
        c if c.is_control() && c != '\n' => Some((format!("[U+{:04X}]", c as u32), name("control character"))),
        _ => None,
    }
}

/// Splits `text` into plain runs and markers. Spaces at the end of a line (or of the text)
/// become `·` markers; newlines stay newlines. Nothing is dropped: the plain runs plus the
/// marked characters are the whole text.
pub fn segments(text: &str) -> Vec<Segment> {
    let mut out = Vec::new();
    let mut plain = String::new();
    let flush = |plain: &mut String, out: &mut Vec<Segment>| {
        if !plain.is_empty() {
            out.push(Segment::Text(std::mem::take(plain)));
        }
    };
    for line in text.split_inclusive('\n') {
        let (body, newline) = match line.strip_suffix('\n') {
            Some(body) => (body, "\n"),
            None => (line, ""),
        };
        let trimmed = body.trim_end_matches(' ');
        for c in trimmed.chars() {
            match marker(c) {
                Some((shown, title)) => {
                    flush(&mut plain, &mut out);
                    out.push(Segment::Mark { shown, title });
                }
                None => plain.push(c),
            }
        }
        let trailing = body.len() - trimmed.len();
        if trailing > 0 {
            flush(&mut plain, &mut out);
            out.push(Segment::Mark { shown: "·".repeat(trailing), title: format!("{trailing} trailing space(s)") });
        }
        plain.push_str(newline);
    }
    flush(&mut plain, &mut out);
    out
}

/// Pretty-prints JSON text; anything else is returned as it came.
pub fn pretty_json(text: &str) -> String {
    serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .and_then(|v| serde_json::to_string_pretty(&v).ok())
        .unwrap_or_else(|| text.to_string())
}

/// A scrolling, complete, text-only view of `text` with invisible characters marked.
#[component]
pub fn ExactText(#[prop(into)] text: String, #[prop(optional, into)] testid: String) -> impl IntoView {
    let empty = text.is_empty();
    let parts = segments(&text)
        .into_iter()
        .map(|s| match s {
            Segment::Text(t) => view! { <span>{t}</span> }.into_any(),
            Segment::Mark { shown, title } => {
                view! { <span class="invisible-char" title=title>{shown}</span> }.into_any()
            }
        })
        .collect_view();
    view! {
        <pre class="exact" data-testid=testid>
            {parts}
            {empty.then(|| view! { <span class="muted">"(empty)"</span> })}
        </pre>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(text: &str) -> String {
        segments(text)
            .into_iter()
            .map(|s| match s {
                Segment::Text(t) => t,
                Segment::Mark { shown, .. } => shown,
            })
            .collect()
    }

    #[test]
    fn ordinary_text_passes_through_untouched() {
        assert_eq!(
            segments("Dear Ana,\nthe invoice <b>is</b> attached."),
            vec![Segment::Text("Dear Ana,\nthe invoice <b>is</b> attached.".into())]
        );
    }

    #[test]
    fn invisible_characters_and_trailing_spaces_are_marked() {
        assert_eq!(shown("a\tb  \nc\u{200B}d\u{00A0}e\r\n"), "a⇥b··\nc[U+200B]d⍽e␍\n");
        assert_eq!(shown("pay \u{202E}evil"), "pay [U+202E]evil");
        assert_eq!(shown("bell\u{7}"), "bell[U+0007]");
        assert_eq!(shown("end   "), "end···");
    }

    #[test]
    fn json_is_pretty_printed_and_other_text_kept() {
        assert_eq!(pretty_json(r#"{"a":1}"#), "{\n  \"a\": 1\n}");
        assert_eq!(pretty_json("not json"), "not json");
    }
}
