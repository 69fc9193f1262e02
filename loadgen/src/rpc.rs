//! `google.rpc.Status` with a `RetryInfo` detail: what an OTLP/gRPC server puts in a
//! retryable error's `grpc-status-details-bin` to say how long to wait, and how a client
//! reads it back. The server (`flightdeck`) writes it and the load generator reads it
//! with these same types. Declared here because the well-known types are not among the
//! dependencies.

use prost::Message;
use std::time::Duration;

/// `google.rpc.Status`.
#[derive(Clone, PartialEq, Message)]
pub struct RpcStatus {
    #[prost(int32, tag = "1")]
    pub code: i32,
    #[prost(string, tag = "2")]
    pub message: String,
    #[prost(message, repeated, tag = "3")]
    pub details: Vec<ProtoAny>,
}

/// `google.protobuf.Any`.
#[derive(Clone, PartialEq, Message)]
pub struct ProtoAny {
    #[prost(string, tag = "1")]
    pub type_url: String,
    #[prost(bytes = "vec", tag = "2")]
    pub value: Vec<u8>,
}

/// `google.rpc.RetryInfo`.
#[derive(Clone, PartialEq, Message)]
pub struct RetryInfo {
    #[prost(message, optional, tag = "1")]
    pub retry_delay: Option<ProtoDuration>,
}

/// `google.protobuf.Duration`.
#[derive(Clone, PartialEq, Message)]
pub struct ProtoDuration {
    #[prost(int64, tag = "1")]
    pub seconds: i64,
    #[prost(int32, tag = "2")]
    pub nanos: i32,
}

pub const RETRY_INFO_TYPE: &str = "type.googleapis.com/google.rpc.RetryInfo";

/// The encoded status details of a retryable error: `code`, `message` and a `RetryInfo`
/// asking the client to wait `delay`.
pub fn retry_details(code: i32, message: &str, delay: Duration) -> Vec<u8> {
    let info = RetryInfo {
        retry_delay: Some(ProtoDuration {
            seconds: i64::try_from(delay.as_secs()).unwrap_or(i64::MAX),
            nanos: i32::try_from(delay.subsec_nanos()).unwrap_or(0),
        }),
    };
    RpcStatus {
        code,
        message: message.to_string(),
        details: vec![ProtoAny { type_url: RETRY_INFO_TYPE.into(), value: info.encode_to_vec() }],
    }
    .encode_to_vec()
}

/// The delay in the status details' `RetryInfo`, if the server sent one.
pub fn retry_delay(details: &[u8]) -> Option<Duration> {
    let status = RpcStatus::decode(details).ok()?;
    let any = status.details.iter().find(|d| d.type_url == RETRY_INFO_TYPE)?;
    let delay = RetryInfo::decode(any.value.as_slice()).ok()?.retry_delay?;
    Some(Duration::new(u64::try_from(delay.seconds).ok()?, u32::try_from(delay.nanos).ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_details_round_trip() {
        let details = retry_details(14, "busy", Duration::from_millis(1_500));
        assert_eq!(retry_delay(&details), Some(Duration::from_millis(1_500)));
        assert_eq!(RpcStatus::decode(details.as_slice()).unwrap().code, 14);
    }
}
