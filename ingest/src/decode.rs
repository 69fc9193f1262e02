//! Bytes off the wire into an `ExportTraceServiceRequest`, within stated bounds.
//!
//! A protobuf or JSON body can describe far more memory than it occupies: an empty span is
//! two bytes of protobuf and a few hundred bytes as a Rust struct, so 20 MiB of empty spans
//! decoded naively took the server past 2 GB. [`measure`] therefore walks the body first,
//! allocating nothing, and counts what decoding would build: spans, attributes, events and
//! links per span, how deep attribute values nest, and an upper bound on the bytes the
//! decoded structs take. It refuses as soon as a limit is passed, so a hostile body costs a
//! read of its first few kilobytes. Only a body that fits is handed to [`decode`].
//!
//! Both walkers know the OTLP trace schema (field numbers for protobuf, camelCase names for
//! JSON as the OTLP/JSON mapping and `opentelemetry-proto`'s serde use); fields they do not
//! know are skipped, as the decoders skip them, so they allocate nothing. Pure: no I/O.

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, EntityRef, KeyValue};
use opentelemetry_proto::tonic::trace::v1::span::{Event, Link};
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
use std::mem::size_of;

/// The two encodings OTLP allows (gRPC always carries protobuf).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Protobuf,
    Json,
}

/// How deep attribute values may nest (arrays and key-value lists inside each other).
/// Real instrumentation nests two or three levels; prost itself stops at about 47.
pub const MAX_VALUE_DEPTH: usize = 32;

/// What one request may expand into. The defaults are documented in the README's
/// configuration table; `serve` sets them from the configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeLimits {
    /// Spans in one request. The OpenTelemetry SDKs send 512 at most by default and the
    /// Collector's batch processor 8,192.
    pub max_spans: usize,
    /// Attributes of one span, event, link, resource or instrumentation scope.
    pub max_attributes: usize,
    /// Events of one span.
    pub max_events: usize,
    /// Links of one span.
    pub max_links: usize,
    /// Bytes the decoded request may take, as estimated by [`measure`].
    pub max_decoded_bytes: usize,
}

impl Default for DecodeLimits {
    fn default() -> Self {
        DecodeLimits {
            max_spans: 16_384,
            max_attributes: 1_024,
            max_events: 1_024,
            max_links: 1_024,
            max_decoded_bytes: 64 * 1024 * 1024,
        }
    }
}

/// Why a body was refused. `TooLarge` maps to 413 / RESOURCE_EXHAUSTED, `Invalid` to
/// 400 / INVALID_ARGUMENT.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("{0}")]
    TooLarge(String),
    #[error("{0}")]
    Invalid(String),
}

/// What decoding a body would build.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Shape {
    pub spans: usize,
    /// An upper bound on the heap the decoded request occupies: every struct that a
    /// repeated field adds, twice (a `Vec` may hold up to double what it needs while
    /// growing), plus every string and byte field's length.
    pub decoded_bytes: usize,
}

/// Walks `bytes` without decoding them and returns the request's [`Shape`], or the first
/// limit it passes.
pub fn measure(encoding: Encoding, bytes: &[u8], limits: &DecodeLimits) -> Result<Shape, DecodeError> {
    let mut tally = Tally { limits, shape: Shape::default() };
    match encoding {
        Encoding::Protobuf => protobuf::walk(&mut tally, Msg::Request, bytes, 0)?,
        Encoding::Json => json::walk(&mut tally, bytes)?,
    }
    Ok(tally.shape)
}

/// Decodes a body that [`measure`] accepted.
pub fn decode(encoding: Encoding, bytes: &[u8]) -> Result<ExportTraceServiceRequest, DecodeError> {
    match encoding {
        Encoding::Protobuf => <ExportTraceServiceRequest as prost::Message>::decode(bytes).map_err(|e| {
            DecodeError::Invalid(format!("the body is not a valid OTLP protobuf ExportTraceServiceRequest: {e}"))
        }),
        Encoding::Json => serde_json::from_slice(bytes)
            .map_err(|e| DecodeError::Invalid(format!("the body is not valid OTLP JSON: {e}"))),
    }
}

/// The messages of the trace schema that allocate when decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Msg {
    Request,
    ResourceSpans,
    Resource,
    EntityRef,
    ScopeSpans,
    Scope,
    Span,
    Event,
    Link,
    Status,
    KeyValue,
    AnyValue,
    ArrayValue,
    KvList,
}

/// What a field of a message holds, as far as memory is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    /// One more element of a repeated message field: counted, its struct size added.
    Repeated(Msg, Counted),
    /// A singular message field: held inline by its parent, only its children allocate.
    Nested(Msg),
    /// A string or bytes field (or one element of a repeated string field, which also
    /// adds a `String`).
    Text { repeated: bool },
    /// Anything else (numbers, enums, unknown fields): no allocation.
    Other,
}

/// Which per-parent limit an element counts against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Counted {
    Spans,
    Attributes,
    Events,
    Links,
    Nothing,
}

impl Msg {
    /// The struct a repeated element of this message adds to its `Vec`.
    fn element_size(self) -> usize {
        match self {
            Msg::ResourceSpans => size_of::<ResourceSpans>(),
            Msg::EntityRef => size_of::<EntityRef>(),
            Msg::ScopeSpans => size_of::<ScopeSpans>(),
            Msg::Span => size_of::<Span>(),
            Msg::Event => size_of::<Event>(),
            Msg::Link => size_of::<Link>(),
            Msg::KeyValue => size_of::<KeyValue>(),
            Msg::AnyValue => size_of::<AnyValue>(),
            // Singular only, held inline by their parent: never an element.
            Msg::Request | Msg::Resource | Msg::Scope | Msg::Status | Msg::ArrayValue | Msg::KvList => 0,
        }
    }

    /// What field `number` (protobuf) of this message holds.
    fn field(self, number: u64) -> Field {
        use Counted::*;
        use Field::*;
        let text = Text { repeated: false };
        match (self, number) {
            (Msg::Request, 1) => Repeated(Msg::ResourceSpans, Nothing),
            (Msg::ResourceSpans, 1) => Nested(Msg::Resource),
            (Msg::ResourceSpans, 2) => Repeated(Msg::ScopeSpans, Nothing),
            (Msg::ResourceSpans, 3) => text,
            (Msg::Resource, 1) => Repeated(Msg::KeyValue, Attributes),
            (Msg::Resource, 3) => Repeated(Msg::EntityRef, Nothing),
            (Msg::EntityRef, 1 | 2) => text,
            (Msg::EntityRef, 3 | 4) => Text { repeated: true },
            (Msg::ScopeSpans, 1) => Nested(Msg::Scope),
            (Msg::ScopeSpans, 2) => Repeated(Msg::Span, Spans),
            (Msg::ScopeSpans, 3) => text,
            (Msg::Scope, 1 | 2) => text,
            (Msg::Scope, 3) => Repeated(Msg::KeyValue, Attributes),
            (Msg::Span, 1..=5) => text,
            (Msg::Span, 9) => Repeated(Msg::KeyValue, Attributes),
            (Msg::Span, 11) => Repeated(Msg::Event, Events),
            (Msg::Span, 13) => Repeated(Msg::Link, Links),
            (Msg::Span, 15) => Nested(Msg::Status),
            (Msg::Event, 2) => text,
            (Msg::Event, 3) => Repeated(Msg::KeyValue, Attributes),
            (Msg::Link, 1..=3) => text,
            (Msg::Link, 4) => Repeated(Msg::KeyValue, Attributes),
            (Msg::Status, 2) => text,
            (Msg::KeyValue, 1) => text,
            (Msg::KeyValue, 2) => Nested(Msg::AnyValue),
            (Msg::AnyValue, 1 | 7) => text,
            (Msg::AnyValue, 5) => Nested(Msg::ArrayValue),
            (Msg::AnyValue, 6) => Nested(Msg::KvList),
            (Msg::ArrayValue, 1) => Repeated(Msg::AnyValue, Nothing),
            (Msg::KvList, 1) => Repeated(Msg::KeyValue, Nothing),
            _ => Other,
        }
    }

    /// What the JSON member `name` of this message holds (OTLP/JSON's camelCase names).
    fn member(self, name: &str) -> Field {
        let number = match (self, name) {
            (Msg::Request, "resourceSpans") => 1,
            (Msg::ResourceSpans, "resource") => 1,
            (Msg::ResourceSpans, "scopeSpans") => 2,
            (Msg::ResourceSpans, "schemaUrl") => 3,
            (Msg::Resource, "attributes") => 1,
            (Msg::Resource, "entityRefs") => 3,
            (Msg::EntityRef, "schemaUrl") => 1,
            (Msg::EntityRef, "type") => 2,
            (Msg::EntityRef, "idKeys") => 3,
            (Msg::EntityRef, "descriptionKeys") => 4,
            (Msg::ScopeSpans, "scope") => 1,
            (Msg::ScopeSpans, "spans") => 2,
            (Msg::ScopeSpans, "schemaUrl") => 3,
            (Msg::Scope, "name") => 1,
            (Msg::Scope, "version") => 2,
            (Msg::Scope, "attributes") => 3,
            (Msg::Span, "traceId") => 1,
            (Msg::Span, "spanId") => 2,
            (Msg::Span, "traceState") => 3,
            (Msg::Span, "parentSpanId") => 4,
            (Msg::Span, "name") => 5,
            (Msg::Span, "attributes") => 9,
            (Msg::Span, "events") => 11,
            (Msg::Span, "links") => 13,
            (Msg::Span, "status") => 15,
            (Msg::Event, "name") => 2,
            (Msg::Event, "attributes") => 3,
            (Msg::Link, "traceId") => 1,
            (Msg::Link, "spanId") => 2,
            (Msg::Link, "traceState") => 3,
            (Msg::Link, "attributes") => 4,
            (Msg::Status, "message") => 2,
            (Msg::KeyValue, "key") => 1,
            (Msg::KeyValue, "value") => 2,
            (Msg::AnyValue, "stringValue") => 1,
            (Msg::AnyValue, "bytesValue") => 7,
            (Msg::AnyValue, "arrayValue") => 5,
            (Msg::AnyValue, "kvlistValue") => 6,
            (Msg::ArrayValue | Msg::KvList, "values") => 1,
            _ => return Field::Other,
        };
        self.field(number)
    }

    /// Whether entering this message nests an attribute value one level deeper.
    fn deepens(self) -> bool {
        matches!(self, Msg::ArrayValue | Msg::KvList)
    }

    fn describe(self) -> &'static str {
        match self {
            Msg::Resource => "a resource",
            Msg::Scope => "an instrumentation scope",
            Msg::Span => "a span",
            Msg::Event => "a span event",
            Msg::Link => "a span link",
            _ => "a message",
        }
    }
}

/// Per-message counts of the elements limited per parent.
#[derive(Debug, Default)]
struct Counts {
    attributes: usize,
    events: usize,
    links: usize,
}

/// The running totals of one walk, checked against the limits as they grow.
struct Tally<'l> {
    limits: &'l DecodeLimits,
    shape: Shape,
}

impl Tally<'_> {
    fn add_bytes(&mut self, bytes: usize) -> Result<(), DecodeError> {
        self.shape.decoded_bytes = self.shape.decoded_bytes.saturating_add(bytes);
        if self.shape.decoded_bytes > self.limits.max_decoded_bytes {
            return Err(DecodeError::TooLarge(format!(
                "the request would take more than {} MiB of memory once decoded (the limit is {} MiB); \
                 send fewer or smaller spans per request",
                self.shape.decoded_bytes / (1024 * 1024),
                self.limits.max_decoded_bytes / (1024 * 1024)
            )));
        }
        Ok(())
    }

    fn text(&mut self, len: usize, repeated: bool) -> Result<(), DecodeError> {
        let element = if repeated { 2 * size_of::<String>() } else { 0 };
        self.add_bytes(len.saturating_add(element))
    }

    /// One more element of a repeated message field of `parent`.
    fn element(&mut self, parent: Msg, msg: Msg, counted: Counted, counts: &mut Counts) -> Result<(), DecodeError> {
        let limits = self.limits;
        let over = |what: &str, n: usize, limit: usize, setting: &str| {
            DecodeError::TooLarge(format!(
                "{} has more than {limit} {what} (the `{setting}` limit); {n} seen so far",
                parent.describe()
            ))
        };
        match counted {
            Counted::Spans => {
                self.shape.spans += 1;
                if self.shape.spans > limits.max_spans {
                    return Err(DecodeError::TooLarge(format!(
                        "the request has more than {} spans (the `max_spans_per_request` limit); \
                         send smaller batches",
                        limits.max_spans
                    )));
                }
            }
            Counted::Attributes => {
                counts.attributes += 1;
                if counts.attributes > limits.max_attributes {
                    return Err(over(
                        "attributes",
                        counts.attributes,
                        limits.max_attributes,
                        "max_attributes_per_span",
                    ));
                }
            }
            Counted::Events => {
                counts.events += 1;
                if counts.events > limits.max_events {
                    return Err(over("events", counts.events, limits.max_events, "max_events_per_span"));
                }
            }
            Counted::Links => {
                counts.links += 1;
                if counts.links > limits.max_links {
                    return Err(over("links", counts.links, limits.max_links, "max_links_per_span"));
                }
            }
            Counted::Nothing => {}
        }
        self.add_bytes(2 * msg.element_size())
    }
}

fn too_deep() -> DecodeError {
    DecodeError::TooLarge(format!(
        "an attribute value nests arrays or key-value lists more than {MAX_VALUE_DEPTH} levels deep"
    ))
}

/// The protobuf walker: the wire format read field by field, sub-messages recursed into
/// only where the schema says they are messages.
mod protobuf {
    use super::{too_deep, Counts, DecodeError, Field, Msg, Tally, MAX_VALUE_DEPTH};

    fn invalid(what: &str) -> DecodeError {
        DecodeError::Invalid(format!("the body is not a valid OTLP protobuf ExportTraceServiceRequest: {what}"))
    }

    struct Reader<'a> {
        bytes: &'a [u8],
        at: usize,
    }

    enum Wire<'a> {
        Scalar,
        Delimited(&'a [u8]),
    }

    impl<'a> Reader<'a> {
        fn varint(&mut self) -> Result<u64, DecodeError> {
            let mut value: u64 = 0;
            for i in 0..10 {
                let Some(&byte) = self.bytes.get(self.at) else {
                    return Err(invalid("a number is cut off"));
                };
                self.at += 1;
                value |= u64::from(byte & 0x7f) << (7 * i);
                if byte < 0x80 {
                    return Ok(value);
                }
            }
            Err(invalid("a number is longer than 10 bytes"))
        }

        fn skip(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
            let end = self.at.checked_add(n).filter(|end| *end <= self.bytes.len());
            let Some(end) = end else {
                return Err(invalid("a field runs past the end of the body"));
            };
            let taken = &self.bytes[self.at..end];
            self.at = end;
            Ok(taken)
        }

        /// The next field's number and payload, or `None` at the end.
        fn field(&mut self) -> Result<Option<(u64, Wire<'a>)>, DecodeError> {
            if self.at >= self.bytes.len() {
                return Ok(None);
            }
            let key = self.varint()?;
            let number = key >> 3;
            if number == 0 {
                return Err(invalid("field number 0"));
            }
            let wire = match key & 7 {
                0 => {
                    self.varint()?;
                    Wire::Scalar
                }
                1 => {
                    self.skip(8)?;
                    Wire::Scalar
                }
                2 => {
                    let len = usize::try_from(self.varint()?).map_err(|_| invalid("a length does not fit"))?;
                    Wire::Delimited(self.skip(len)?)
                }
                5 => {
                    self.skip(4)?;
                    Wire::Scalar
                }
                // Groups (3, 4) are not part of OTLP; 6 and 7 do not exist.
                other => return Err(invalid(&format!("wire type {other}"))),
            };
            Ok(Some((number, wire)))
        }
    }

    /// Walks one message of type `msg`. Recursion is bounded: the schema is at most seven
    /// messages deep outside attribute values, and values at most `MAX_VALUE_DEPTH`.
    pub(super) fn walk(tally: &mut Tally<'_>, msg: Msg, bytes: &[u8], depth: usize) -> Result<(), DecodeError> {
        let mut reader = Reader { bytes, at: 0 };
        let mut counts = Counts::default();
        while let Some((number, wire)) = reader.field()? {
            let Wire::Delimited(payload) = wire else { continue };
            match msg.field(number) {
                Field::Other => {}
                Field::Text { repeated } => tally.text(payload.len(), repeated)?,
                Field::Nested(child) => {
                    let depth = if child.deepens() { depth + 1 } else { depth };
                    if depth > MAX_VALUE_DEPTH {
                        return Err(too_deep());
                    }
                    walk(tally, child, payload, depth)?;
                }
                Field::Repeated(child, counted) => {
                    tally.element(msg, child, counted, &mut counts)?;
                    walk(tally, child, payload, depth)?;
                }
            }
        }
        Ok(())
    }
}

/// The JSON walker: serde's visitor over `serde_json`, which validates the syntax and
/// bounds nesting (128 levels) itself; each object is read knowing which message it is.
mod json {
    use super::{too_deep, Counts, DecodeError, Field, Msg, Tally, MAX_VALUE_DEPTH};
    use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
    use std::fmt;

    /// What a JSON value stands for where it was found.
    #[derive(Clone, Copy)]
    enum Place {
        Message(Msg),
        /// An array of `Msg` elements, each counted against the parent's limits.
        List(Msg, Msg, super::Counted),
        Text {
            repeated: bool,
        },
        /// An array of strings (`idKeys`).
        TextList,
    }

    /// Serde buffers an `AnyValue` object whole before reading it (the type flattens its
    /// oneof), so each JSON value below an attribute costs about this much again, briefly.
    const BUFFERED_VALUE_BYTES: usize = 64;

    struct Seed<'t, 'l> {
        tally: &'t mut Tally<'l>,
        place: Place,
        depth: usize,
        counts: Option<&'t mut Counts>,
    }

    /// Walks a whole body.
    pub(super) fn walk(tally: &mut Tally<'_>, bytes: &[u8]) -> Result<(), DecodeError> {
        let mut de = serde_json::Deserializer::from_slice(bytes);
        let seed = Seed { tally, place: Place::Message(Msg::Request), depth: 0, counts: None };
        let result = seed.deserialize(&mut de).and_then(|()| de.end());
        result.map_err(|e| {
            // A limit found inside the walk travels out as a serde error with this prefix.
            let text = e.to_string();
            match text.strip_prefix(LIMIT) {
                Some(rest) => DecodeError::TooLarge(rest.split(" at line ").next().unwrap_or(rest).to_string()),
                None => DecodeError::Invalid(format!("the body is not valid OTLP JSON: {text}")),
            }
        })
    }

    const LIMIT: &str = "limit: ";

    fn limit<E: serde::de::Error>(e: DecodeError) -> E {
        E::custom(format!("{LIMIT}{e}"))
    }

    impl<'de> DeserializeSeed<'de> for Seed<'_, '_> {
        type Value = ();
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_any(self)
        }
    }

    impl<'de> Visitor<'de> for Seed<'_, '_> {
        type Value = ();

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("an OTLP JSON value")
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            let Place::Message(msg) = self.place else {
                // An object where a list or text belongs: the decoder will refuse it.
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                return Ok(());
            };
            let tally = self.tally;
            if msg == Msg::AnyValue {
                tally.add_bytes(BUFFERED_VALUE_BYTES).map_err(limit)?;
            }
            let mut counts = Counts::default();
            while let Some(key) = map.next_key::<Key>()? {
                let place = match msg.member(&key.0) {
                    Field::Other => {
                        map.next_value::<IgnoredAny>()?;
                        continue;
                    }
                    Field::Text { repeated: false } => Place::Text { repeated: false },
                    Field::Text { repeated: true } => Place::TextList,
                    Field::Nested(child) => Place::Message(child),
                    Field::Repeated(child, counted) => Place::List(msg, child, counted),
                };
                let depth = match place {
                    Place::Message(child) if child.deepens() => self.depth + 1,
                    _ => self.depth,
                };
                if depth > MAX_VALUE_DEPTH {
                    return Err(limit(too_deep()));
                }
                map.next_value_seed(Seed { tally: &mut *tally, place, depth, counts: Some(&mut counts) })?;
            }
            Ok(())
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
            let tally = self.tally;
            match self.place {
                Place::List(parent, child, counted) => {
                    let mut own = Counts::default();
                    let counts = match self.counts {
                        Some(c) => c,
                        None => &mut own,
                    };
                    let mut element = Element { tally, parent, child, counted, counts, depth: self.depth };
                    while seq.next_element_seed(&mut element)?.is_some() {}
                    Ok(())
                }
                Place::TextList => {
                    let text = || Place::Text { repeated: true };
                    while seq
                        .next_element_seed(Seed { tally: &mut *tally, place: text(), depth: self.depth, counts: None })?
                        .is_some()
                    {}
                    Ok(())
                }
                _ => {
                    while seq.next_element::<IgnoredAny>()?.is_some() {}
                    Ok(())
                }
            }
        }

        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<(), E> {
            match self.place {
                Place::Text { repeated } => self.tally.text(v.len(), repeated).map_err(limit),
                _ => Ok(()),
            }
        }

        fn visit_bool<E>(self, _: bool) -> Result<(), E> {
            Ok(())
        }
        fn visit_i64<E>(self, _: i64) -> Result<(), E> {
            Ok(())
        }
        fn visit_u64<E>(self, _: u64) -> Result<(), E> {
            Ok(())
        }
        fn visit_f64<E>(self, _: f64) -> Result<(), E> {
            Ok(())
        }
        fn visit_unit<E>(self) -> Result<(), E> {
            Ok(())
        }
    }

    /// One element of a list of messages: counted against its parent's limits (before it
    /// is read, as the protobuf walker counts), then walked.
    struct Element<'s, 'l> {
        tally: &'s mut Tally<'l>,
        parent: Msg,
        child: Msg,
        counted: super::Counted,
        counts: &'s mut Counts,
        depth: usize,
    }

    impl<'de> DeserializeSeed<'de> for &mut Element<'_, '_> {
        type Value = ();
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            self.tally.element(self.parent, self.child, self.counted, self.counts).map_err(limit)?;
            let place = Place::Message(self.child);
            Seed { tally: &mut *self.tally, place, depth: self.depth, counts: None }.deserialize(d)
        }
    }

    /// An object key, borrowed when the text allows.
    struct Key(std::borrow::Cow<'static, str>);

    impl<'de> serde::Deserialize<'de> for Key {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct KeyVisitor;
            impl<'de> Visitor<'de> for KeyVisitor {
                type Value = Key;
                fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                    f.write_str("a member name")
                }
                fn visit_str<E>(self, v: &str) -> Result<Key, E> {
                    // Only the schema's names matter; anything longer is unknown anyway.
                    Ok(Key(if v.len() <= 20 { v.to_string().into() } else { "".into() }))
                }
            }
            d.deserialize_str(KeyVisitor)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry_proto::tonic::common::v1::any_value::Value as Otlp;
    use opentelemetry_proto::tonic::common::v1::{ArrayValue, KeyValueList};
    use prost::Message;

    fn span(attrs: usize) -> Span {
        Span {
            trace_id: vec![1; 16],
            span_id: vec![2; 8],
            name: "chat gpt-4o".into(),
            attributes: (0..attrs)
                .map(|i| KeyValue {
                    key: format!("k{i}"),
                    value: Some(AnyValue { value: Some(Otlp::StringValue("v".repeat(10))) }),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    fn request(spans: Vec<Span>) -> ExportTraceServiceRequest {
        ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                scope_spans: vec![ScopeSpans { spans, ..Default::default() }],
                ..Default::default()
            }],
        }
    }

    fn both(req: &ExportTraceServiceRequest) -> [(Encoding, Vec<u8>); 2] {
        [(Encoding::Protobuf, req.encode_to_vec()), (Encoding::Json, serde_json::to_vec(req).unwrap())]
    }

    #[test]
    fn a_normal_request_is_measured_and_decodes() {
        let req = request((0..50).map(|_| span(12)).collect());
        for (encoding, bytes) in both(&req) {
            let shape = measure(encoding, &bytes, &DecodeLimits::default()).unwrap();
            assert_eq!(shape.spans, 50, "{encoding:?}");
            let at_least = 50 * (size_of::<Span>() + 12 * size_of::<KeyValue>());
            assert!(shape.decoded_bytes >= at_least, "{encoding:?}: {} < {at_least}", shape.decoded_bytes);
            assert_eq!(decode(encoding, &bytes).unwrap(), req);
        }
    }

    #[test]
    fn too_many_spans_stop_the_walk_early() {
        // 2 bytes of protobuf per empty span: 1 MiB here, ~20 MiB in the live attack.
        let mut bytes = Vec::new();
        let empty_spans = vec![0x12u8, 0x00].repeat(500_000);
        // ResourceSpans { scope_spans (2): ScopeSpans { spans (2): [empty, …] } }
        let resource_spans = [vec![0x12], varint(empty_spans.len()), empty_spans].concat();
        bytes.extend([vec![0x0a], varint(resource_spans.len()), resource_spans].concat());
        let limits = DecodeLimits { max_spans: 1000, ..Default::default() };
        let err = measure(Encoding::Protobuf, &bytes, &limits).unwrap_err();
        assert!(matches!(&err, DecodeError::TooLarge(m) if m.contains("more than 1000 spans")), "{err}");

        let json = format!(r#"{{"resourceSpans":[{{"scopeSpans":[{{"spans":[{}{{}}]}}]}}]}}"#, "{},".repeat(5000));
        let err = measure(Encoding::Json, json.as_bytes(), &limits).unwrap_err();
        assert!(matches!(&err, DecodeError::TooLarge(m) if m.contains("more than 1000 spans")), "{err}");
    }

    fn varint(mut n: usize) -> Vec<u8> {
        let mut out = Vec::new();
        loop {
            let byte = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                out.push(byte);
                return out;
            }
            out.push(byte | 0x80);
        }
    }

    #[test]
    fn per_span_counts_are_limited() {
        let limits = DecodeLimits { max_attributes: 10, max_events: 2, max_links: 2, ..Default::default() };
        let too_many_attrs = request(vec![span(11)]);
        for (encoding, bytes) in both(&too_many_attrs) {
            let err = measure(encoding, &bytes, &limits).unwrap_err().to_string();
            assert!(err.contains("a span has more than 10 attributes"), "{encoding:?}: {err}");
        }
        let mut s = span(0);
        s.events = vec![Event::default(); 3];
        for (encoding, bytes) in both(&request(vec![s])) {
            let err = measure(encoding, &bytes, &limits).unwrap_err().to_string();
            assert!(err.contains("more than 2 events"), "{encoding:?}: {err}");
        }
        let mut s = span(0);
        s.links = vec![Link::default(); 3];
        for (encoding, bytes) in both(&request(vec![s])) {
            let err = measure(encoding, &bytes, &limits).unwrap_err().to_string();
            assert!(err.contains("more than 2 links"), "{encoding:?}: {err}");
        }
        let mut s = span(0);
        s.events = vec![Event { attributes: span(11).attributes, ..Default::default() }];
        for (encoding, bytes) in both(&request(vec![s])) {
            let err = measure(encoding, &bytes, &limits).unwrap_err().to_string();
            assert!(err.contains("a span event has more than 10 attributes"), "{encoding:?}: {err}");
        }
        // Exactly at the limits passes.
        let mut s = span(10);
        s.events = vec![Event::default(); 2];
        s.links = vec![Link::default(); 2];
        for (encoding, bytes) in both(&request(vec![s])) {
            assert!(measure(encoding, &bytes, &limits).is_ok(), "{encoding:?}");
        }
    }

    fn nested(levels: usize) -> AnyValue {
        let mut value = AnyValue { value: Some(Otlp::StringValue("leaf".into())) };
        for i in 0..levels {
            value = if i % 2 == 0 {
                AnyValue { value: Some(Otlp::ArrayValue(ArrayValue { values: vec![value] })) }
            } else {
                let kv = KeyValue { key: "k".into(), value: Some(value), ..Default::default() };
                AnyValue { value: Some(Otlp::KvlistValue(KeyValueList { values: vec![kv] })) }
            };
        }
        value
    }

    #[test]
    fn deeply_nested_values_are_refused_and_shallow_ones_pass() {
        for (levels, ok) in [(MAX_VALUE_DEPTH, true), (MAX_VALUE_DEPTH + 1, false)] {
            let mut s = span(0);
            s.attributes = vec![KeyValue { key: "deep".into(), value: Some(nested(levels)), ..Default::default() }];
            for (encoding, bytes) in both(&request(vec![s.clone()])) {
                let result = measure(encoding, &bytes, &DecodeLimits::default());
                assert_eq!(result.is_ok(), ok, "{levels} levels, {encoding:?}: {result:?}");
                if !ok {
                    assert!(result.unwrap_err().to_string().contains("levels deep"));
                }
            }
        }
    }

    #[test]
    fn wide_values_count_against_the_memory_bound() {
        // One attribute holding an array of 200,000 empty values: 400 KB of protobuf,
        // several MB decoded.
        let array =
            AnyValue { value: Some(Otlp::ArrayValue(ArrayValue { values: vec![AnyValue::default(); 200_000] })) };
        let mut s = span(0);
        s.attributes = vec![KeyValue { key: "wide".into(), value: Some(array), ..Default::default() }];
        let limits = DecodeLimits { max_decoded_bytes: 1024 * 1024, ..Default::default() };
        for (encoding, bytes) in both(&request(vec![s])) {
            let err = measure(encoding, &bytes, &limits).unwrap_err();
            assert!(matches!(&err, DecodeError::TooLarge(m) if m.contains("memory once decoded")), "{err}");
        }
    }

    #[test]
    fn malformed_bodies_are_invalid_not_panics() {
        for bytes in
            [&b"\xff\xff\xff"[..], b"\x0a\x05ab", b"\x0b", b"\x00", b"\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff"]
        {
            assert!(matches!(
                measure(Encoding::Protobuf, bytes, &DecodeLimits::default()),
                Err(DecodeError::Invalid(_))
            ));
        }
        for text in ["{nope", "[", r#"{"resourceSpans": 3}"#, "\"x\" 1"] {
            match measure(Encoding::Json, text.as_bytes(), &DecodeLimits::default()) {
                Err(DecodeError::Invalid(_)) => {}
                Ok(_) => assert!(decode(Encoding::Json, text.as_bytes()).is_err(), "{text}"),
                other => panic!("{text}: {other:?}"),
            }
        }
    }

    #[test]
    fn unknown_fields_are_skipped_like_the_decoders_skip_them() {
        let json = br#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"5b8efff798038103d269b633813fc60c",
            "spanId":"eee19b7ec3c1b174","name":"x","somethingNew":{"deep":[[[1]]]}}]}]}],"extra":[1,2]}"#;
        let shape = measure(Encoding::Json, json, &DecodeLimits::default()).unwrap();
        assert_eq!(shape.spans, 1);
        assert_eq!(decode(Encoding::Json, json).unwrap().resource_spans[0].scope_spans[0].spans[0].name, "x");
    }
}
