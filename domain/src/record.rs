//! How a span is stored: one JSON object per span, the objects of one run in one write
//! kept together as one `span_chunks` row (a JSON array).
//!
//! Why not one table row per span: on SQLite each span row cost a table insert plus an
//! entry in each of several indexes keyed by random ids (trace id, run id, idempotency
//! key), and that bounded ingest near 21,000 spans/s with a core to itself. A chunk costs
//! one row and one index entry for all of a run's spans in a write, and the span-level
//! lookups that need an index get their own (`irreversible_calls`, the search-term index
//! of `terms`). Everything reading spans reads a whole run, which a chunk
//! serves well.
//!
//! The text of each object is made by normalization ([`encode`]), which runs on many
//! threads, so the single writer only joins the objects of a run into an array. Keys
//! are the former column names; optional fields that are absent are left out, and
//! readers treat a missing key and `null` alike (migration 0013 writes `null`s).

use crate::derive::SpanFacts;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// The stored object, borrowing from the normalized span (the write side).
#[derive(Serialize)]
pub struct Record<'a> {
    pub trace_id: &'a str,
    pub span_id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_span_id: Option<&'a str>,
    pub name: &'a str,
    pub kind: i32,
    pub start_ns: i64,
    pub end_ns: i64,
    pub status_code: i32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status_message: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trigger: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub terminal_reason: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub escalation_reason: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step_limit: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_limit: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wall_clock_ms: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step_index: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_tokens: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_write_tokens: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_name: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub side_effect: Option<&'a str>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub side_effect_declared: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempt: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub external_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub args_sha256: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval_id: Option<&'a str>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub credential_in_arguments: bool,
    // Last, so reading only the facts skips them in one stretch.
    pub attributes: &'a Map<String, Value>,
    pub events: &'a [Value],
    pub resource: &'a RawValue,
}

/// The text of one stored object (normalization fills [`Record`] from a span).
pub fn encode(record: &Record<'_>) -> String {
    serde_json::to_string(record).expect("stored spans always serialize")
}

/// The stored records of one run as one chunk: a JSON array of them.
pub fn chunk<'a>(records: impl IntoIterator<Item = &'a str, IntoIter: Clone>) -> String {
    let records = records.into_iter();
    // Sized up front: growing by doubling copied each chunk about twice more, on the writer.
    let mut text = String::with_capacity(2 + records.clone().map(|r| r.len() + 1).sum::<usize>());
    text.push('[');
    for (i, record) in records.enumerate() {
        if i > 0 {
            text.push(',');
        }
        text.push_str(record);
    }
    text.push(']');
    text
}

/// The bodies of one run's new spans in one write as one `body_chunks` row: a JSON array
/// of `{"trace_id", "span_id", "bodies"}`, where `bodies` is each span's body object as
/// normalization wrote it. Ids are hex, so they need no escaping.
pub fn body_chunk<'a>(spans: impl IntoIterator<Item = (&'a str, &'a str, &'a str), IntoIter: Clone>) -> String {
    let spans = spans.into_iter();
    let size: usize = spans.clone().map(|(trace, span, bodies)| trace.len() + span.len() + bodies.len() + 48).sum();
    let mut text = String::with_capacity(2 + size);
    text.push('[');
    for (i, (trace, span, bodies)) in spans.enumerate() {
        if i > 0 {
            text.push(',');
        }
        for part in [r#"{"trace_id":""#, trace, r#"","span_id":""#, span, r#"","bodies":"#, bodies, "}"] {
            text.push_str(part);
        }
    }
    text.push(']');
    text
}

/// One span's bodies read back from a body chunk.
#[derive(Debug, Deserialize)]
pub struct StoredBodies {
    pub trace_id: String,
    pub span_id: String,
    pub bodies: Box<RawValue>,
}

/// A body chunk's entries.
pub fn decode_bodies(chunk: &str) -> serde_json::Result<Vec<StoredBodies>> {
    serde_json::from_str(chunk)
}

/// A stored span read back whole (run page, span panel). Attributes, events and
/// resource stay JSON text until someone shows them.
#[derive(Debug, Deserialize)]
pub struct StoredSpan {
    pub trace_id: String,
    pub span_id: String,
    pub parent_span_id: Option<String>,
    pub name: String,
    pub kind: i32,
    pub start_ns: i64,
    pub end_ns: i64,
    pub status_code: i32,
    pub status_message: Option<String>,
    pub role: Option<String>,
    pub step_index: Option<i64>,
    pub tool_name: Option<String>,
    pub side_effect: Option<String>,
    pub idempotency_key: Option<String>,
    pub attempt: Option<i64>,
    pub outcome: Option<String>,
    pub external_id: Option<String>,
    pub attributes: Box<RawValue>,
    pub events: Box<RawValue>,
    pub resource: Box<RawValue>,
}

/// A chunk's records as derivation's facts (the raw JSON fields are skipped unread).
pub fn decode_facts(chunk: &str) -> serde_json::Result<Vec<SpanFacts>> {
    serde_json::from_str(chunk)
}

/// A chunk's records whole.
pub fn decode_spans(chunk: &str) -> serde_json::Result<Vec<StoredSpan>> {
    serde_json::from_str(chunk)
}

/// The terms a span can be searched by (idempotency key, external resource id): what the
/// search-term index (`terms`) holds for its run.
pub fn search_terms(facts: &SpanFacts) -> impl Iterator<Item = &str> {
    terms_of(facts.idempotency_key.as_deref(), facts.external_id.as_deref())
}

/// The one rule for which of a span's values are searchable: its idempotency key and
/// the external id of what it created, when not empty. Both the stored facts (read back
/// when spans move or expire) and a span being written go through it, so both backends'
/// indexes hold the same terms.
pub fn terms_of<'a>(idempotency_key: Option<&'a str>, external_id: Option<&'a str>) -> impl Iterator<Item = &'a str> {
    idempotency_key.into_iter().chain(external_id).filter(|t| !t.is_empty())
}

impl From<StoredSpan> for crate::canonical::WaterfallSpan {
    fn from(s: StoredSpan) -> Self {
        crate::canonical::WaterfallSpan {
            trace_id: s.trace_id,
            span_id: s.span_id,
            parent_span_id: s.parent_span_id,
            name: s.name,
            start_ns: s.start_ns,
            end_ns: s.end_ns,
            status_code: s.status_code,
            status_message: s.status_message,
            role: s.role,
            step_index: s.step_index,
            tool_name: s.tool_name,
            side_effect: s.side_effect,
            outcome: s.outcome,
            attempt: s.attempt,
            idempotency_key: s.idempotency_key,
            external_id: s.external_id,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_search_terms_are_the_non_empty_key_and_external_id() {
        assert_eq!(terms_of(Some("key-1"), Some("ext-9")).collect::<Vec<_>>(), ["key-1", "ext-9"]);
        assert_eq!(terms_of(Some(""), Some("ext-9")).collect::<Vec<_>>(), ["ext-9"]);
        assert_eq!(terms_of(None, Some("")).count(), 0);
    }

    #[test]
    fn absent_and_null_fields_read_alike() {
        let written = r#"[{"trace_id":"t","span_id":"s","name":"n","kind":1,"start_ns":5,"end_ns":9,"status_code":0,
            "tool_name":"send","attributes":{"a":1},"events":[],"resource":{}},
            {"trace_id":"t","span_id":"u","parent_span_id":null,"name":"m","kind":1,"start_ns":6,"end_ns":0,
            "status_code":2,"tool_name":null,"cost":0.5,"attributes":{},"events":[{"name":"e"}],"resource":{"r":"x"}}]"#;
        let facts = decode_facts(written).unwrap();
        assert_eq!(facts.len(), 2);
        assert_eq!(facts[0].tool_name.as_deref(), Some("send"));
        assert_eq!(facts[1].tool_name, None);
        assert_eq!(facts[1].cost, Some(0.5));
        let spans = decode_spans(written).unwrap();
        assert_eq!(spans[0].attributes.get(), r#"{"a":1}"#);
        assert_eq!(spans[1].events.get(), r#"[{"name":"e"}]"#);
        assert_eq!(spans[1].parent_span_id, None);
    }

    #[test]
    fn body_chunks_read_back_as_written() {
        let text = body_chunk([("t1", "s1", r#"{"gen_ai.prompt":"hi \"there\""}"#), ("t1", "s2", "{}")]);
        let entries = decode_bodies(&text).unwrap();
        assert_eq!(entries.len(), 2);
        assert_eq!((entries[0].trace_id.as_str(), entries[0].span_id.as_str()), ("t1", "s1"));
        assert_eq!(entries[0].bodies.get(), r#"{"gen_ai.prompt":"hi \"there\""}"#);
        assert_eq!(entries[1].bodies.get(), "{}");
        assert_eq!(decode_bodies(&body_chunk(std::iter::empty())).unwrap().len(), 0);
    }

    #[test]
    fn chunks_are_arrays_of_the_records() {
        assert_eq!(chunk(["{\"a\":1}", "{\"b\":2}"]), "[{\"a\":1},{\"b\":2}]");
        assert_eq!(chunk(std::iter::empty::<&str>()), "[]");
    }
}
