//! Building OTLP spans for tests and storing them through the real ingest path (prepare,
//! then the span writer), without a network hop.

use ingest::pipeline::{prepare, IngestSettings};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value::Value as V, AnyValue, KeyValue};
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
use store::Db;

pub fn kv(key: &str, v: &str) -> KeyValue {
    KeyValue { key: key.into(), value: Some(AnyValue { value: Some(V::StringValue(v.into())) }), ..Default::default() }
}

pub fn kv_f64(key: &str, v: f64) -> KeyValue {
    KeyValue { key: key.into(), value: Some(AnyValue { value: Some(V::DoubleValue(v)) }), ..Default::default() }
}

pub fn kv_i64(key: &str, v: i64) -> KeyValue {
    KeyValue { key: key.into(), value: Some(AnyValue { value: Some(V::IntValue(v)) }), ..Default::default() }
}

pub fn kv_bool(key: &str, v: bool) -> KeyValue {
    KeyValue { key: key.into(), value: Some(AnyValue { value: Some(V::BoolValue(v)) }), ..Default::default() }
}

/// A span of trace `trace` (all 16 bytes equal), id `id`, from `start_ns` for 1 ms.
pub fn span_at(trace: u8, id: u8, parent: Option<u8>, name: &str, start_ns: u64, attributes: Vec<KeyValue>) -> Span {
    Span {
        trace_id: vec![trace; 16],
        span_id: vec![id; 8],
        parent_span_id: parent.map(|p| vec![p; 8]).unwrap_or_default(),
        name: name.into(),
        start_time_unix_nano: start_ns,
        end_time_unix_nano: start_ns + 1_000_000,
        attributes,
        ..Default::default()
    }
}

pub fn request(spans: Vec<Span>) -> ExportTraceServiceRequest {
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            scope_spans: vec![ScopeSpans { spans, ..Default::default() }],
            ..Default::default()
        }],
    }
}

/// Stores `spans` as one export would, asserting every span was accepted.
pub async fn ingest(db: &Db, spans: Vec<Span>) {
    ingest_request(db, request(spans)).await
}

/// [`ingest`] with attributes on the export's resource (`service.name`, `enduser.id`...).
pub async fn ingest_with_resource(db: &Db, spans: Vec<Span>, resource: Vec<KeyValue>) {
    let mut export = request(spans);
    export.resource_spans[0].resource =
        Some(opentelemetry_proto::tonic::resource::v1::Resource { attributes: resource, ..Default::default() });
    ingest_request(db, export).await
}

async fn ingest_request(db: &Db, export: ExportTraceServiceRequest) {
    let settings = IngestSettings::default();
    let prepared = prepare(&export, &settings, &[]);
    assert_eq!(prepared.rejected, 0, "{:?}", prepared.errors);
    store::write::commit(db, &prepared.spans, settings.body_policy).await.unwrap();
}
