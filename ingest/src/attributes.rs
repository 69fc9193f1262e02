//! OTLP attribute values as JSON: the one shape the mapping layer, redaction and storage
//! work with.

use opentelemetry_proto::tonic::common::v1::any_value::Value as Otlp;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue};
use serde_json::{Map, Value};

/// Converts an OTLP value; bytes become lowercase hex, like ids in OTLP JSON.
pub fn to_json(value: &AnyValue) -> Value {
    match &value.value {
        None => Value::Null,
        Some(Otlp::StringValue(s)) => Value::String(s.clone()),
        Some(Otlp::BoolValue(b)) => Value::Bool(*b),
        Some(Otlp::IntValue(i)) => Value::from(*i),
        Some(Otlp::DoubleValue(d)) => serde_json::Number::from_f64(*d).map(Value::Number).unwrap_or(Value::Null),
        Some(Otlp::ArrayValue(a)) => Value::Array(a.values.iter().map(to_json).collect()),
        Some(Otlp::KvlistValue(kv)) => Value::Object(to_map(&kv.values)),
        Some(Otlp::BytesValue(b)) => Value::String(hex::encode(b)),
        // Newer protocol versions may add kinds; keep the field without a value.
        #[allow(unreachable_patterns)]
        Some(_) => Value::Null,
    }
}

/// Key/value pairs as a JSON object; a repeated key keeps its first value.
pub fn to_map(pairs: &[KeyValue]) -> Map<String, Value> {
    let mut map = Map::new();
    for kv in pairs {
        if !map.contains_key(&kv.key) {
            map.insert(kv.key.clone(), kv.value.as_ref().map(to_json).unwrap_or(Value::Null));
        }
    }
    map
}

/// A value as text: strings as they are, other scalars printed, arrays by their first
/// element (OTel often sends one-element arrays such as `finish_reasons`).
pub fn as_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Array(a) => a.first().and_then(as_text),
        _ => None,
    }
}

/// A value as an integer: integers, integral doubles, or numeric strings.
pub fn as_i64(value: &Value) -> Option<i64> {
    match value {
        Value::Number(n) => n.as_i64().or_else(|| n.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64)),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// A value as a flag: booleans, or the strings `true` / `false` in any case.
pub fn as_bool(value: &Value) -> Option<bool> {
    match value {
        Value::Bool(b) => Some(*b),
        Value::String(s) if s.trim().eq_ignore_ascii_case("true") => Some(true),
        Value::String(s) if s.trim().eq_ignore_ascii_case("false") => Some(false),
        _ => None,
    }
}

pub fn as_f64(value: &Value) -> Option<f64> {
    match value {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry_proto::tonic::common::v1::ArrayValue;

    fn kv(key: &str, value: Otlp) -> KeyValue {
        KeyValue { key: key.into(), value: Some(AnyValue { value: Some(value) }), ..Default::default() }
    }

    #[test]
    fn every_kind_converts_and_first_key_wins() {
        let map = to_map(&[
            kv("s", Otlp::StringValue("x".into())),
            kv("i", Otlp::IntValue(-3)),
            kv("d", Otlp::DoubleValue(1.5)),
            kv("b", Otlp::BoolValue(true)),
            kv("bytes", Otlp::BytesValue(vec![0xab, 0x01])),
            kv(
                "a",
                Otlp::ArrayValue(ArrayValue {
                    values: vec![AnyValue { value: Some(Otlp::StringValue("stop".into())) }],
                }),
            ),
            kv("s", Otlp::StringValue("second".into())),
        ]);
        assert_eq!(
            Value::Object(map.clone()),
            serde_json::json!({"s":"x","i":-3,"d":1.5,"b":true,"bytes":"ab01","a":["stop"]})
        );
        assert_eq!(as_text(&map["a"]).as_deref(), Some("stop"));
        assert_eq!(as_i64(&serde_json::json!("42")), Some(42));
        assert_eq!(as_i64(&serde_json::json!(42.0)), Some(42));
        assert_eq!(as_i64(&serde_json::json!(42.5)), None);
        assert_eq!(as_f64(&serde_json::json!("0.25")), Some(0.25));
    }
}
