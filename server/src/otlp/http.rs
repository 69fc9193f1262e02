//! OTLP/HTTP: `POST /v1/traces` with a protobuf or JSON body, optionally gzip-compressed,
//! answered in the request's own content type as the OTLP specification says. The token
//! is checked before the body is read, the size before it is decompressed or decoded.

use super::service::RETRY_AFTER_SECS;
use super::{IngestError, IngestService};
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use ingest::decode::Encoding;
use opentelemetry_proto::tonic::collector::trace::v1::{ExportTracePartialSuccess, ExportTraceServiceResponse};
use prost::Message;
use std::io::Read;

pub fn router(service: IngestService) -> Router {
    Router::new()
        .route("/v1/traces", post(export))
        .fallback(|| async { (StatusCode::NOT_FOUND, "OTLP/HTTP traces are accepted at POST /v1/traces\n") })
        .with_state(service)
}

fn content_type(encoding: Encoding) -> &'static str {
    match encoding {
        Encoding::Protobuf => "application/x-protobuf",
        Encoding::Json => "application/json",
    }
}

/// `google.rpc.Status`, the body of every OTLP/HTTP error response.
#[derive(Clone, PartialEq, prost::Message, serde::Serialize)]
pub struct RpcStatus {
    #[prost(int32, tag = "1")]
    pub code: i32,
    #[prost(string, tag = "2")]
    pub message: String,
}

fn encode<T: Message + serde::Serialize>(encoding: Encoding, message: &T) -> Vec<u8> {
    match encoding {
        Encoding::Protobuf => message.encode_to_vec(),
        Encoding::Json => serde_json::to_vec(message).unwrap_or_default(),
    }
}

fn respond<T: Message + serde::Serialize>(status: StatusCode, encoding: Encoding, message: &T) -> Response {
    (status, [(header::CONTENT_TYPE, content_type(encoding))], encode(encoding, message)).into_response()
}

/// An error response with its `google.rpc.Status` body (gRPC codes as in the spec).
fn failure(encoding: Encoding, error: &IngestError) -> Response {
    let (status, code) = match error {
        IngestError::Unauthenticated(_) => (StatusCode::UNAUTHORIZED, 16),
        IngestError::Forbidden(_) => (StatusCode::FORBIDDEN, 7),
        IngestError::Invalid(_) => (StatusCode::BAD_REQUEST, 3),
        IngestError::TooLarge(_) => (StatusCode::PAYLOAD_TOO_LARGE, 8),
        IngestError::Unavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, 14),
    };
    let mut response = respond(status, encoding, &RpcStatus { code, message: error.to_string() });
    if matches!(error, IngestError::Unavailable(_)) {
        response.headers_mut().insert(header::RETRY_AFTER, RETRY_AFTER_SECS.into());
    }
    response
}

async fn export(State(service): State<IngestService>, headers: HeaderMap, body: Body) -> Response {
    let content_type = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    let mime = content_type.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    let encoding = match mime.as_str() {
        "application/x-protobuf" | "application/protobuf" => Encoding::Protobuf,
        "application/json" => Encoding::Json,
        _ => {
            let message =
                format!("unsupported content type `{content_type}`: send application/x-protobuf or application/json");
            return (StatusCode::UNSUPPORTED_MEDIA_TYPE, [(header::CONTENT_TYPE, "text/plain")], message)
                .into_response();
        }
    };
    match receive(&service, &headers, encoding, body).await {
        Ok(outcome) => {
            let partial_success = (outcome.rejected > 0).then(|| ExportTracePartialSuccess {
                rejected_spans: i64::try_from(outcome.rejected).unwrap_or(i64::MAX),
                error_message: outcome.message,
            });
            respond(StatusCode::OK, encoding, &ExportTraceServiceResponse { partial_success })
        }
        Err(error) => {
            tracing::info!(error = %error, "OTLP/HTTP export refused");
            failure(encoding, &error)
        }
    }
}

async fn receive(
    service: &IngestService,
    headers: &HeaderMap,
    encoding: Encoding,
    body: Body,
) -> Result<super::ExportOutcome, IngestError> {
    let (token, gzip, early) = match admit(service, headers).await {
        Ok(admitted) => admitted,
        Err(refusal) => {
            discard(body, service.max_body_bytes()).await;
            return Err(refusal);
        }
    };
    let limit = service.max_body_bytes();
    let too_large = || IngestError::TooLarge(format!("the request is larger than the {limit} byte limit"));
    let raw: Bytes = axum::body::to_bytes(body, limit).await.map_err(|_| too_large())?;
    if gzip {
        let bytes = gunzip(&raw, limit)?;
        drop(raw);
        service.receive(encoding, &bytes, early, token.as_ref()).await
    } else {
        service.receive(encoding, &raw, early, token.as_ref()).await
    }
}

/// What a request was admitted with: its token (none when ingest needs none), whether
/// its body is gzip, and the memory reserved for its body.
type Admitted = (Option<crate::api::AgentToken>, bool, Option<tokio::sync::OwnedSemaphorePermit>);

/// Everything decided from the headers alone, before a byte of the body is read: the
/// token, the encoding, and (for an uncompressed body of declared length) its size and
/// its share of the memory budget, so that under overload bodies are refused unread.
async fn admit(service: &IngestService, headers: &HeaderMap) -> Result<Admitted, IngestError> {
    let authorization = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
    let token = service.authenticate(authorization).await?;
    let limit = service.max_body_bytes();
    let gzip = match headers.get(header::CONTENT_ENCODING).and_then(|v| v.to_str().ok()) {
        None | Some("identity") => false,
        Some("gzip") => true,
        Some(other) => {
            return Err(IngestError::Invalid(format!("unsupported Content-Encoding `{other}`: use gzip or none")))
        }
    };
    let declared = headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
    match declared {
        Some(length) if length > limit => {
            Err(IngestError::TooLarge(format!("the request is larger than the {limit} byte limit")))
        }
        Some(length) if !gzip => Ok((token, gzip, Some(service.reserve_for_body(length)?))),
        _ => Ok((token, gzip, None)),
    }
}

/// How long a refused request's body is read and thrown away.
const DISCARD_FOR: std::time::Duration = std::time::Duration::from_secs(5);

/// Reads and discards (one frame at a time, so memory stays flat) up to `limit` bytes of a
/// request refused from its headers, for at most [`DISCARD_FOR`]. An HTTP/1.1 client
/// still sending a large body when the refusal arrives otherwise sees the connection
/// reset instead of the 401 or 503 that says what to do.
async fn discard(body: Body, limit: usize) {
    use http_body_util::BodyExt;
    let mut body = body;
    let mut seen = 0usize;
    let drained = async {
        while let Some(Ok(frame)) = body.frame().await {
            seen = seen.saturating_add(frame.data_ref().map_or(0, |d| d.len()));
            if seen > limit {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(DISCARD_FOR, drained).await;
}

/// Decompresses at most `limit` bytes, so a gzip bomb is refused, not inflated.
fn gunzip(compressed: &[u8], limit: usize) -> Result<Vec<u8>, IngestError> {
    let mut out = Vec::new();
    let cap = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
    let mut decoder = flate2::read::GzDecoder::new(compressed).take(cap);
    decoder.read_to_end(&mut out).map_err(|e| IngestError::Invalid(format!("the body is not valid gzip: {e}")))?;
    if out.len() > limit {
        return Err(IngestError::TooLarge(format!(
            "the request is larger than the {limit} byte limit once decompressed"
        )));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use std::io::Write;

    #[test]
    fn gzip_bombs_stop_at_the_limit() {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        encoder.write_all(&vec![0u8; 10 * 1024 * 1024]).unwrap();
        let bomb = encoder.finish().unwrap();
        assert!(bomb.len() < 64 * 1024, "a small body that inflates 10 MiB");
        match gunzip(&bomb, 1024 * 1024) {
            Err(IngestError::TooLarge(m)) => assert!(m.contains("once decompressed")),
            other => panic!("expected TooLarge, got {other:?}"),
        }
        assert!(matches!(gunzip(b"not gzip", 1024), Err(IngestError::Invalid(_))));
    }

    fn decode(encoding: Encoding, bytes: &[u8]) -> Result<ExportTraceServiceRequest, ingest::decode::DecodeError> {
        ingest::decode::decode(encoding, bytes)
    }

    #[test]
    fn otlp_json_with_hex_ids_string_ints_and_unknown_fields_decodes() {
        let json =
            br#"{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"a"}}]},
            "scopeSpans":[{"spans":[{"traceId":"5b8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b174",
            "name":"x","kind":2,"startTimeUnixNano":"1544712660000000000","endTimeUnixNano":1544712661000000000,
            "somethingNew":true}]}]}]}"#;
        let request = decode(Encoding::Json, json).unwrap();
        let span = &request.resource_spans[0].scope_spans[0].spans[0];
        assert_eq!(hex::encode(&span.trace_id), "5b8efff798038103d269b633813fc60c");
        assert_eq!(span.kind, 2);
        assert_eq!(span.end_time_unix_nano, 1544712661000000000);
        assert!(decode(Encoding::Json, b"{nope").is_err());
        assert!(decode(Encoding::Protobuf, b"\xff\xff\xff").is_err());
    }
}
