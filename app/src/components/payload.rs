//! Shows an approval payload exactly: verbatim and complete, rendered as text, with
//! whitespace and characters a reader could not otherwise see made visible, so what the
//! approver reads is what will go out: tabs, trailing spaces, carriage returns, every
//! character of Unicode's format category Cf (zero-width characters, bidirectional
//! controls, the byte-order mark, tag characters), every other control character, and the
//! spaces that look like an ordinary one but are not.

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

/// Unicode's format characters (general category Cf, Unicode 15.1): invisible, and able
/// to reorder (bidirectional controls), join or hide (tag characters) what is shown.
const FORMAT_CHARACTERS: &[(char, char)] = &[
    ('\u{00AD}', '\u{00AD}'),
    ('\u{0600}', '\u{0605}'),
    ('\u{061C}', '\u{061C}'),
    ('\u{06DD}', '\u{06DD}'),
    ('\u{070F}', '\u{070F}'),
    ('\u{0890}', '\u{0891}'),
    ('\u{08E2}', '\u{08E2}'),
    ('\u{180E}', '\u{180E}'),
    ('\u{200B}', '\u{200F}'),
    ('\u{202A}', '\u{202E}'),
    ('\u{2060}', '\u{2064}'),
    ('\u{2066}', '\u{206F}'),
    ('\u{FEFF}', '\u{FEFF}'),
    ('\u{FFF9}', '\u{FFFB}'),
    ('\u{110BD}', '\u{110BD}'),
    ('\u{110CD}', '\u{110CD}'),
    ('\u{13430}', '\u{1343F}'),
    ('\u{1BCA0}', '\u{1BCA3}'),
    ('\u{1D173}', '\u{1D17A}'),
    ('\u{E0001}', '\u{E0001}'),
    ('\u{E0020}', '\u{E007F}'),
];

/// Whether `c` is in general category Cf.
pub fn is_format_character(c: char) -> bool {
    FORMAT_CHARACTERS.iter().any(|(from, to)| (*from..=*to).contains(&c))
}

/// Spaces a reader takes for an ordinary one (U+0020) but that are not.
fn is_confusable_space(c: char) -> bool {
    matches!(c, '\u{00A0}' | '\u{1680}' | '\u{2000}'..='\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}')
}

/// What to show for `c`, if it needs a marker.
fn marker(c: char) -> Option<(String, String)> {
    let code = u32::from(c);
    let name = |n: &str| format!("{n} (U+{code:04X})");
    let shown = || format!("[U+{code:04X}]");
    match c {
        '\t' => Some(("⇥".into(), name("tab"))),
        '\r' => Some(("␍".into(), name("carriage return"))),
        '\u{00A0}' => Some(("⍽".into(), name("no-break space"))),
        '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' => Some((shown(), name("bidirectional control"))),
        '\u{E0000}'..='\u{E007F}' => Some((shown(), name("tag character"))),
        '\u{2028}' | '\u{2029}' => Some((shown(), name("line/paragraph separator"))),
        c if is_format_character(c) => Some((shown(), name("invisible format character"))),
        c if is_confusable_space(c) => Some((shown(), name("space that is not U+0020"))),
        c if c.is_control() && c != '\n' => Some((shown(), name("control character"))),
        _ => None,
    }
}

/// Whether `text` holds anything [`segments`] would mark (beyond tabs and trailing spaces,
/// which are common and harmless): used to warn about a value before it is read.
pub fn has_hidden_characters(text: &str) -> bool {
    text.chars().any(|c| !matches!(c, '\t' | '\r' | '\n') && marker(c).is_some())
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

/// A short agent-supplied text (a tool name, a run id, a label) shown inline, with
/// invisible characters marked as in [`ExactText`].
#[component]
pub fn ExactInline(#[prop(into)] text: String) -> impl IntoView {
    segments(&text)
        .into_iter()
        .map(|s| match s {
            Segment::Text(t) => view! { <span>{t}</span> }.into_any(),
            Segment::Mark { shown, title } => {
                view! { <span class="invisible-char" title=title>{shown}</span> }.into_any()
            }
        })
        .collect_view()
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
    fn every_format_character_other_control_and_lookalike_space_is_marked() {
        for c in [
            '\u{00AD}',
            '\u{061C}',
            '\u{180E}',
            '\u{200B}',
            '\u{200C}',
            '\u{200D}',
            '\u{200E}',
            '\u{200F}',
            '\u{202A}',
            '\u{202E}',
            '\u{2060}',
            '\u{2066}',
            '\u{2069}',
            '\u{FEFF}',
            '\u{E0001}',
            '\u{E0041}',
            '\u{E007F}',
            '\u{0085}',
            '\u{0000}',
            '\u{001B}',
            '\u{007F}',
            '\u{009B}',
            '\u{1680}',
            '\u{2002}',
            '\u{2009}',
            '\u{202F}',
            '\u{205F}',
            '\u{3000}',
        ] {
            let text = format!("a{c}b");
            assert_eq!(shown(&text), format!("a[U+{:04X}]b", u32::from(c)), "U+{:04X}", u32::from(c));
            assert!(has_hidden_characters(&text));
        }
        for plain in ["ana@example.com", "Grüße, 東京 — ok", "emoji 🚀 and tabs\tonly"] {
            assert!(!has_hidden_characters(plain), "{plain}");
        }
        // Tag characters can spell hidden text after a visible one: each is marked.
        assert_eq!(shown("ok\u{E0069}\u{E0067}"), "ok[U+E0069][U+E0067]");
    }

    #[test]
    fn json_is_pretty_printed_and_other_text_kept() {
        assert_eq!(pretty_json(r#"{"a":1}"#), "{\n  \"a\": 1\n}");
        assert_eq!(pretty_json("not json"), "not json");
    }
}
