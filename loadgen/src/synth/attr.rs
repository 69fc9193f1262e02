//! Short constructors for OTLP attributes, so the convention modules read as a list of
//! names and values rather than nested protobuf structs.

use opentelemetry_proto::tonic::common::v1::{any_value::Value, AnyValue, ArrayValue, KeyValue};

fn kv(key: &str, value: Value) -> KeyValue {
    KeyValue { key: key.to_string(), value: Some(AnyValue { value: Some(value) }), ..Default::default() }
}

pub(crate) fn string(key: &str, value: impl Into<String>) -> KeyValue {
    kv(key, Value::StringValue(value.into()))
}

pub(crate) fn int(key: &str, value: impl Into<i64>) -> KeyValue {
    kv(key, Value::IntValue(value.into()))
}

/// Token counts and latencies are `u64` in the plan; OTLP integers are signed. Values in
/// a synthetic run are far below `i64::MAX`, saturating keeps this total anyway.
pub(crate) fn uint(key: &str, value: u64) -> KeyValue {
    int(key, i64::try_from(value).unwrap_or(i64::MAX))
}

pub(crate) fn double(key: &str, value: f64) -> KeyValue {
    kv(key, Value::DoubleValue(value))
}

pub(crate) fn strings(key: &str, values: &[&str]) -> KeyValue {
    let values = values.iter().map(|v| AnyValue { value: Some(Value::StringValue(v.to_string())) }).collect();
    kv(key, Value::ArrayValue(ArrayValue { values }))
}
