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
