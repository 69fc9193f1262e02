//! The OTLP receivers and the ingest queue behind them. OTLP/HTTP ([`http`]) and
//! OTLP/gRPC ([`grpc`]) decode into the same `ExportTraceServiceRequest` and call
//! [`IngestService::export`]; one writer task ([`writer`]) commits the queued batches
//! and only then answers, so an acknowledged export is durable.

pub mod grpc;
pub mod http;
pub mod service;
pub mod writer;

pub use service::{ExportOutcome, IngestError, IngestService};
