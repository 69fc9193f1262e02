//! Logs and Flightdeck's own traces: structured logs to stderr with `tracing`, and, when
//! `OTEL_EXPORTER_OTLP_ENDPOINT` (or the traces-specific variable) is set, spans exported
//! over OTLP so Flightdeck can be observed like any other service.

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::trace::SdkTracerProvider;
use opentelemetry_sdk::Resource;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::EnvFilter;

/// Keeps the exporter alive; dropping it flushes the spans still buffered.
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        if let Some(provider) = self.provider.take() {
            if let Err(e) = provider.shutdown() {
                eprintln!("flightdeck: could not flush traces on exit: {e}");
            }
        }
    }
}

/// Which OTLP transport the standard environment variables ask for.
fn protocol_from_env() -> Protocol {
    let value = std::env::var("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        .or_else(|_| std::env::var("OTEL_EXPORTER_OTLP_PROTOCOL"))
        .unwrap_or_default();
    match value.trim() {
        "grpc" => Protocol::Grpc,
        "http/json" => Protocol::HttpJson,
        _ => Protocol::HttpBinary,
    }
}

fn otlp_configured() -> bool {
    ["OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]
        .iter()
        .any(|v| std::env::var(v).is_ok_and(|s| !s.trim().is_empty()))
}

fn otlp_provider() -> anyhow::Result<SdkTracerProvider> {
    let exporter = match protocol_from_env() {
        Protocol::Grpc => opentelemetry_otlp::SpanExporter::builder().with_tonic().build()?,
        protocol => opentelemetry_otlp::SpanExporter::builder().with_http().with_protocol(protocol).build()?,
    };
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(Resource::builder().with_service_name("flightdeck").build())
        .build())
}

/// Installs the global subscriber. Must run inside the Tokio runtime (the gRPC exporter
/// needs it). `RUST_LOG` sets the filter (default `info`).
pub fn init() -> Telemetry {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false);
    let provider = if otlp_configured() {
        match otlp_provider() {
            Ok(p) => Some(p),
            Err(e) => {
                eprintln!("flightdeck: OTLP export is configured but cannot start: {e}");
                None
            }
        }
    } else {
        None
    };
    let otel = provider.as_ref().map(|p| tracing_opentelemetry::layer().with_tracer(p.tracer("flightdeck")));
    tracing_subscriber::registry().with(filter).with(fmt).with(otel).init();
    if provider.is_some() {
        tracing::info!(protocol = ?protocol_from_env(), "exporting flightdeck's own spans over OTLP");
    }
    Telemetry { provider }
}
