//! OTLP/gRPC: `TraceService/Export`, gzip accepted, the same ingest path as HTTP.
//!
//! The service is written out here rather than taken from `opentelemetry-proto`'s generated
//! server for two reasons, both about memory an unauthenticated or hostile client could
//! spend: the bearer token is checked from the request headers before tonic reads the body
//! (the generated server decodes first, so a 4 MB export with no token cost ~500 MB), and
//! the body reaches [`IngestService::receive`] as bytes, to be measured within the decoding
//! limits before anything is decoded, exactly as on OTLP/HTTP.

use super::{IngestError, IngestService};
use bytes::{Buf, Bytes};
use ingest::decode::Encoding;
use opentelemetry_proto::tonic::collector::trace::v1::{ExportTracePartialSuccess, ExportTraceServiceResponse};
use prost::Message;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use tonic::body::Body;
use tonic::codec::{Codec, CompressionEncoding, DecodeBuf, Decoder, EnabledCompressionEncodings, EncodeBuf, Encoder};
use tonic::server::NamedService;
use tonic::{Request, Response, Status};

/// Exports one HTTP/2 connection may have open at once. An exporter with more waits for
/// a stream to free up (HTTP/2's own backpressure; tonic and the OpenTelemetry SDKs queue
/// the request) instead of sending it to be refused: tonic reads a request's body before
/// the memory budget can count it, so 1,024 exports in flight on one connection used to
/// take the server past 300 MB while most were refused and retried. Four times the exports
/// in flight at which the writer is already saturated.
pub const MAX_STREAMS_PER_CONNECTION: u32 = 32;

/// HTTP/2 flow-control windows: how much of a request the client may send before the
/// server has read it. hyper's default of 1 MiB per connection is less than eight typical
/// exports (~330 KB each), so exporters sharing a connection took turns; these let the
/// exports in flight arrive together (+5 % over gRPC with 8 in flight, alternated). They
/// bound unread data, which tonic reads as it comes anyway, so memory is not at stake.
const STREAM_WINDOW_BYTES: u32 = 4 << 20;
const CONNECTION_WINDOW_BYTES: u32 = 16 << 20;

/// The method's path, as every OTLP exporter calls it.
pub const EXPORT_PATH: &str = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";

/// The gRPC transport as `serve` runs it: add [`server`] and serve.
pub fn transport() -> tonic::transport::Server {
    tonic::transport::Server::builder()
        .max_concurrent_streams(MAX_STREAMS_PER_CONNECTION)
        .initial_stream_window_size(STREAM_WINDOW_BYTES)
        .initial_connection_window_size(CONNECTION_WINDOW_BYTES)
}

/// The trace service, with the body limit and gzip configured.
pub fn server(service: IngestService) -> TraceServer {
    TraceServer { service }
}

#[derive(Clone)]
pub struct TraceServer {
    service: IngestService,
}

impl NamedService for TraceServer {
    const NAME: &'static str = "opentelemetry.proto.collector.trace.v1.TraceService";
}

/// The gRPC status for a refusal. UNAVAILABLE carries a `google.rpc.RetryInfo` detail
/// with the same delay as HTTP's `Retry-After`, as the OTLP specification asks of a
/// server that wants the client to slow down.
fn status(error: IngestError) -> Status {
    match error {
        IngestError::Unauthenticated(m) => Status::unauthenticated(m),
        IngestError::Forbidden(m) => Status::permission_denied(m),
        IngestError::Invalid(m) => Status::invalid_argument(m),
        IngestError::TooLarge(m) => Status::resource_exhausted(m),
        IngestError::Unavailable(m) => {
            let delay = std::time::Duration::from_secs(super::service::RETRY_AFTER_SECS);
            let details = loadgen::rpc::retry_details(tonic::Code::Unavailable as i32, &m, delay);
            Status::with_details(tonic::Code::Unavailable, m, Bytes::from(details))
        }
    }
}

impl<B> tower::Service<http::Request<B>> for TraceServer
where
    B: http_body::Body + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>> + Send,
{
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let service = self.service.clone();
        Box::pin(async move {
            if req.uri().path() != EXPORT_PATH {
                return Ok(Status::unimplemented("this receiver implements TraceService/Export only").into_http());
            }
            // The token first, from the headers alone: the body is still unread.
            let authorization = req.headers().get(http::header::AUTHORIZATION).and_then(|v| v.to_str().ok());
            let token = match service.authenticate(authorization).await {
                Ok(token) => token,
                Err(e) => {
                    tracing::info!(error = %e, "OTLP/gRPC export refused before its body was read");
                    return Ok(status(e).into_http());
                }
            };
            let mut accept = EnabledCompressionEncodings::default();
            accept.enable(CompressionEncoding::Gzip);
            let limit = service.max_body_bytes();
            let mut grpc = tonic::server::Grpc::new(ExportCodec)
                .apply_compression_config(accept, accept)
                .apply_max_message_size_config(Some(limit), None);
            Ok(grpc.unary(Export { service, token }, req).await)
        })
    }
}

/// The unary method: the body as bytes in, the OTLP response out.
struct Export {
    service: IngestService,
    token: Option<crate::api::AgentToken>,
}

impl tower::Service<Request<Bytes>> for Export {
    type Response = Response<ExportTraceServiceResponse>;
    type Error = Status;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Status>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Status>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Bytes>) -> Self::Future {
        let (service, token) = (self.service.clone(), self.token.clone());
        Box::pin(async move {
            let body = request.into_inner();
            let outcome = service.receive(Encoding::Protobuf, &body, None, token.as_ref()).await.map_err(|e| {
                tracing::info!(error = %e, "OTLP/gRPC export refused");
                status(e)
            })?;
            let partial_success = (outcome.rejected > 0).then(|| ExportTracePartialSuccess {
                rejected_spans: i64::try_from(outcome.rejected).unwrap_or(i64::MAX),
                error_message: outcome.message,
            });
            Ok(Response::new(ExportTraceServiceResponse { partial_success }))
        })
    }
}

/// Hands the request's message over as bytes (tonic has already checked its length against
/// the limit and decompressed it) and encodes the response with prost.
#[derive(Debug, Clone, Copy, Default)]
struct ExportCodec;

impl Codec for ExportCodec {
    type Encode = ExportTraceServiceResponse;
    type Decode = Bytes;
    type Encoder = ExportCodec;
    type Decoder = ExportCodec;

    fn encoder(&mut self) -> Self::Encoder {
        ExportCodec
    }

    fn decoder(&mut self) -> Self::Decoder {
        ExportCodec
    }
}

impl Encoder for ExportCodec {
    type Item = ExportTraceServiceResponse;
    type Error = Status;

    fn encode(&mut self, item: Self::Item, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        item.encode(dst).map_err(|e| Status::internal(format!("cannot encode the response: {e}")))
    }
}

impl Decoder for ExportCodec {
    type Item = Bytes;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Bytes>, Status> {
        Ok(Some(src.copy_to_bytes(src.remaining())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unavailable_carries_retry_info_with_the_http_delay() {
        let s = status(IngestError::Unavailable("busy".into()));
        assert_eq!(s.code(), tonic::Code::Unavailable);
        let delay = loadgen::rpc::retry_delay(s.details());
        assert_eq!(delay, Some(std::time::Duration::from_secs(super::super::service::RETRY_AFTER_SECS)));
        let s = status(IngestError::Invalid("bad".into()));
        assert!(s.details().is_empty(), "only a retryable refusal asks for a retry");
    }
}
