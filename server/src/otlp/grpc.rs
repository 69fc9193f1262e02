//! OTLP/gRPC: `TraceService/Export`, gzip accepted, the same ingest path as HTTP.

use super::{IngestError, IngestService};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{TraceService, TraceServiceServer};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTracePartialSuccess, ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use prost::Message;
use tonic::codec::CompressionEncoding;
use tonic::{Request, Response, Status};

pub struct Receiver {
    service: IngestService,
}

/// Exports one HTTP/2 connection may have open at once. An exporter with more waits for
/// a stream to free up (HTTP/2's own backpressure; tonic and the OpenTelemetry SDKs queue
/// the request) instead of sending it to be refused: tonic decodes a request before the
/// memory budget can count it, so 1,024 exports in flight on one connection used to take
/// the server past 300 MB while most were refused and retried. Four times the exports in
/// flight at which the writer is already saturated.
pub const MAX_STREAMS_PER_CONNECTION: u32 = 32;

/// HTTP/2 flow-control windows: how much of a request the client may send before the
/// server has read it. hyper's default of 1 MiB per connection is less than eight typical
/// exports (~330 KB each), so exporters sharing a connection took turns; these let the
/// exports in flight arrive together (+5 % over gRPC with 8 in flight, alternated). They
/// bound unread data, which tonic reads as it comes anyway, so memory is not at stake.
const STREAM_WINDOW_BYTES: u32 = 4 << 20;
const CONNECTION_WINDOW_BYTES: u32 = 16 << 20;

/// The gRPC transport as `serve` runs it: add [`server`] and serve.
pub fn transport() -> tonic::transport::Server {
    tonic::transport::Server::builder()
        .max_concurrent_streams(MAX_STREAMS_PER_CONNECTION)
        .initial_stream_window_size(STREAM_WINDOW_BYTES)
        .initial_connection_window_size(CONNECTION_WINDOW_BYTES)
}

/// The tonic service, with the body limit and gzip configured.
pub fn server(service: IngestService) -> TraceServiceServer<Receiver> {
    let limit = service.max_body_bytes();
    TraceServiceServer::new(Receiver { service })
        .accept_compressed(CompressionEncoding::Gzip)
        .send_compressed(CompressionEncoding::Gzip)
        .max_decoding_message_size(limit)
}

fn status(error: IngestError) -> Status {
    match error {
        IngestError::Unauthenticated(m) => Status::unauthenticated(m),
        IngestError::Forbidden(m) => Status::permission_denied(m),
        IngestError::Invalid(m) => Status::invalid_argument(m),
        IngestError::TooLarge(m) => Status::resource_exhausted(m),
        IngestError::Unavailable(m) => Status::unavailable(m),
    }
}

#[tonic::async_trait]
impl TraceService for Receiver {
    async fn export(
        &self,
        request: Request<ExportTraceServiceRequest>,
    ) -> Result<Response<ExportTraceServiceResponse>, Status> {
        let authorization = request.metadata().get("authorization").and_then(|v| v.to_str().ok());
        self.service.authenticate(authorization).await.map_err(status)?;
        let request = request.into_inner();
        let permit = self.service.reserve_for_request(request.encoded_len()).map_err(status)?;
        let outcome = self.service.export(request, permit).await.map_err(|e| {
            tracing::info!(error = %e, "OTLP/gRPC export refused");
            status(e)
        })?;
        let partial_success = (outcome.rejected > 0).then(|| ExportTracePartialSuccess {
            rejected_spans: outcome.rejected as i64,
            error_message: outcome.message,
        });
        Ok(Response::new(ExportTraceServiceResponse { partial_success }))
    }
}
