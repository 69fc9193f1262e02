//! Property-based fuzzing of everything an agent's bytes pass through before storage: the
//! protobuf and JSON decoders (measure, then decode), and the mapping layer (normalize and
//! derive). Each property runs a bounded number of cases so CI spends seconds here; set
//! `PROPTEST_CASES` for a longer run. The property is always the same: no input panics or
//! hangs, and every input is answered (accepted, or refused with a reason).
//!
//! The gRPC framing is fuzzed through the real receiver in `server/tests/ingest_limits.rs`.

use domain::derive::derive_run;
use domain::policy::ToolPolicy;
use ingest::decode::{decode, measure, DecodeLimits, Encoding};
use ingest::pipeline::{prepare, IngestSettings};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Otlp;
use opentelemetry_proto::tonic::common::v1::{AnyValue, ArrayValue, KeyValue, KeyValueList};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::span::Event;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span, Status};
use proptest::prelude::*;
use prost::Message;

fn config(cases: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(cases);
    ProptestConfig { cases, failure_persistence: None, ..ProptestConfig::default() }
}

/// Every step an ingested body takes before the writer, as the service runs them.
fn ingest(encoding: Encoding, bytes: &[u8]) -> Result<usize, String> {
    let limits = DecodeLimits { max_decoded_bytes: 16 << 20, ..DecodeLimits::default() };
    let shape = measure(encoding, bytes, &limits).map_err(|e| e.to_string())?;
    let request = decode(encoding, bytes).map_err(|e| e.to_string())?;
    let policies = [ToolPolicy::class("send_*", domain::canonical::SideEffect::Irreversible)];
    let prepared = prepare(&request, &IngestSettings::default(), &policies);
    assert_eq!(prepared.total(), ingest::pipeline::span_count(&request));
    assert!(
        prepared.total() <= shape.spans,
        "measure counted {} spans, decode found {}",
        shape.spans,
        prepared.total()
    );
    let mut by_run: std::collections::BTreeMap<String, Vec<_>> = Default::default();
    for span in &prepared.spans {
        let run = span.explicit_run_id.clone().unwrap_or_else(|| span.trace_id.clone());
        by_run.entry(run).or_default().push(span.facts());
    }
    for (run, facts) in by_run {
        derive_run(&run, &facts);
    }
    Ok(prepared.spans.len())
}

/// Keys the mapping layer reads, so generated spans exercise it rather than miss it.
const KEYS: &[&str] = &[
    "run.id",
    "gen_ai.conversation.id",
    "gen_ai.agent.name",
    "run.trigger",
    "run.terminal_reason",
    "step.index",
    "gen_ai.operation.name",
    "openinference.span.kind",
    "gen_ai.request.model",
    "gen_ai.usage.input_tokens",
    "llm.token_count.prompt",
    "tool.name",
    "gen_ai.tool.name",
    "gen_ai.tool.call.arguments",
    "input.value",
    "tool.side_effect",
    "tool.idempotency_key",
    "tool.attempt",
    "tool.outcome",
    "tool.latency_ms",
    "tool.external_id",
    "approval.id",
    "budget.cost_spent",
    "escalation.reason",
    "api_key",
    "db.password",
];

fn any_value() -> impl Strategy<Value = AnyValue> {
    let leaf = prop_oneof![
        any::<String>().prop_map(Otlp::StringValue),
        prop_oneof![
            Just("execute_tool"),
            Just("chat"),
            Just("TOOL"),
            Just("LLM"),
            Just("send_email"),
            Just("{\"a\":1}")
        ]
        .prop_map(|s| Otlp::StringValue(s.to_string())),
        any::<bool>().prop_map(Otlp::BoolValue),
        any::<i64>().prop_map(Otlp::IntValue),
        any::<f64>().prop_map(Otlp::DoubleValue),
        proptest::collection::vec(any::<u8>(), 0..8).prop_map(Otlp::BytesValue),
    ]
    .prop_map(|v| AnyValue { value: Some(v) });
    leaf.prop_recursive(4, 24, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4)
                .prop_map(|values| AnyValue { value: Some(Otlp::ArrayValue(ArrayValue { values })) }),
            proptest::collection::vec(("[a-z.]{0,6}", inner), 0..4).prop_map(|pairs| AnyValue {
                value: Some(Otlp::KvlistValue(KeyValueList {
                    values: pairs
                        .into_iter()
                        .map(|(key, value)| KeyValue { key, value: Some(value), ..Default::default() })
                        .collect(),
                })),
            }),
        ]
    })
}

fn key_value() -> impl Strategy<Value = KeyValue> {
    let key = prop_oneof![proptest::sample::select(KEYS).prop_map(str::to_string), any::<String>()];
    (key, proptest::option::of(any_value())).prop_map(|(key, value)| KeyValue { key, value, ..Default::default() })
}

fn id(len: usize) -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        8 => proptest::collection::vec(any::<u8>(), len),
        1 => proptest::collection::vec(any::<u8>(), 0..20),
        1 => Just(vec![0; len]),
    ]
}

fn span() -> impl Strategy<Value = Span> {
    (
        (id(16), id(8), prop_oneof![Just(Vec::new()), id(8)]),
        any::<String>(),
        (any::<u64>(), any::<u64>()),
        proptest::collection::vec(key_value(), 0..8),
        proptest::collection::vec(
            ("escalation|exception|[a-z]{0,5}", proptest::collection::vec(key_value(), 0..3)),
            0..3,
        ),
        proptest::option::of((0..3i32, any::<String>())),
    )
        .prop_map(|((trace_id, span_id, parent_span_id), name, (start, end), attributes, events, status)| Span {
            trace_id,
            span_id,
            parent_span_id,
            name,
            start_time_unix_nano: start,
            end_time_unix_nano: end,
            attributes,
            events: events
                .into_iter()
                .map(|(name, attributes)| Event { name, attributes, ..Default::default() })
                .collect(),
            status: status.map(|(code, message)| Status { code, message }),
            ..Default::default()
        })
}

fn request() -> impl Strategy<Value = ExportTraceServiceRequest> {
    (proptest::collection::vec(key_value(), 0..3), proptest::collection::vec(span(), 0..6)).prop_map(
        |(resource, spans)| ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                resource: Some(Resource { attributes: resource, ..Default::default() }),
                scope_spans: vec![ScopeSpans { spans, ..Default::default() }],
                ..Default::default()
            }],
        },
    )
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn arbitrary_bytes_are_answered_by_both_decoders(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
        let _ = ingest(Encoding::Protobuf, &bytes);
        let _ = ingest(Encoding::Json, &bytes);
    }

    #[test]
    fn generated_requests_survive_both_encodings_and_the_mapping_layer(request in request()) {
        let proto = request.encode_to_vec();
        let json = serde_json::to_vec(&request).unwrap();
        let from_proto = ingest(Encoding::Protobuf, &proto);
        prop_assert!(from_proto.is_ok(), "{from_proto:?}");
        // JSON cannot carry every f64 (NaN); otherwise the two encodings agree.
        if let Ok(from_json) = ingest(Encoding::Json, &json) {
            prop_assert_eq!(from_json, from_proto.unwrap());
        }
    }

    #[test]
    fn damaged_requests_are_answered(request in request(), cuts in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6)) {
        for encoding in [Encoding::Protobuf, Encoding::Json] {
            let mut bytes = match encoding {
                Encoding::Protobuf => request.encode_to_vec(),
                Encoding::Json => serde_json::to_vec(&request).unwrap(),
            };
            if bytes.is_empty() {
                continue;
            }
            for (at, byte) in &cuts {
                let i = at.index(bytes.len());
                if byte % 3 == 0 {
                    bytes.truncate(i);
                    if bytes.is_empty() { break; }
                } else {
                    bytes[i] = *byte;
                }
            }
            let _ = ingest(encoding, &bytes);
        }
    }

    #[test]
    fn arbitrary_json_shapes_are_answered(text in r#"[\[\]{}:,"a-zA-Z0-9 .\-]{0,300}"#) {
        let wrapped = format!(r#"{{"resourceSpans":[{{"scopeSpans":[{{"spans":[{text}]}}]}}]}}"#);
        let _ = ingest(Encoding::Json, wrapped.as_bytes());
        let _ = ingest(Encoding::Json, text.as_bytes());
    }
}
