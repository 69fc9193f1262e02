//! `flightdeck-loadgen`: sends synthetic agent runs to a Flightdeck OTLP receiver and
//! prints what happened. Meant for a receiver on this machine (demo data, benchmarks).

use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{ensure, Context};
use clap::{Parser, ValueEnum};
use loadgen::send::{run_load, LoadOptions, Protocol, Target};
use loadgen::synth::SynthOptions;

/// Runs sent when neither --runs nor --duration is given, so the tool always stops.
const DEFAULT_RUNS: usize = 100;

#[derive(Debug, Clone, Copy, ValueEnum)]
enum ProtocolArg {
    /// OTLP/HTTP, protobuf body
    Http,
    /// OTLP/HTTP, JSON body
    HttpJson,
    /// OTLP/gRPC
    Grpc,
}

/// Send realistic synthetic agent traces to a Flightdeck OTLP receiver.
///
/// Exits with status 1 when any request failed for good, so scripts notice.
#[derive(Debug, Parser)]
#[command(name = "flightdeck-loadgen", version)]
struct Cli {
    /// Receiver base URL [default: http://127.0.0.1:4318, or :4317 with --protocol grpc]
    #[arg(long)]
    endpoint: Option<String>,
    #[arg(long, value_enum, default_value_t = ProtocolArg::Http)]
    protocol: ProtocolArg,
    /// Agent API token, sent as a bearer token
    #[arg(long, env = "FLIGHTDECK_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Gzip request bodies
    #[arg(long)]
    gzip: bool,
    /// Stop after this many runs [default: 100 when --duration is not given either]
    #[arg(long, value_name = "N")]
    runs: Option<usize>,
    /// Stop after this many seconds
    #[arg(long, value_name = "SECS")]
    duration: Option<f64>,
    /// Offered load ceiling [default: as fast as the receiver answers]
    #[arg(long, value_name = "SPANS_PER_SEC")]
    rate: Option<f64>,
    /// Requests in flight at once
    #[arg(long, default_value_t = 4)]
    concurrency: usize,
    /// Spans per export request (512 is the OpenTelemetry SDKs' default batch size)
    #[arg(long, default_value_t = 512)]
    spans_per_request: usize,
    /// Seed of the generated runs; the same seed sends the same runs
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Comma-separated agent names (service.name) [default: four built-in agents]
    #[arg(long, value_delimiter = ',')]
    agents: Vec<String>,
    /// Step limit of the generated runs
    #[arg(long, default_value_t = 12)]
    max_steps: u32,
    /// Leave tool results out of the spans
    #[arg(long)]
    no_bodies: bool,
    /// Start the runs this many days in the past (fills a database that retention will
    /// sweep) [default: now]
    #[arg(long, value_name = "DAYS", default_value_t = 0.0)]
    days_ago: f64,
    /// Sample this process's memory (the receiver's PID) and report its peak
    #[arg(long, value_name = "PID")]
    rss_pid: Option<u32>,
}

impl Cli {
    fn into_options(self) -> anyhow::Result<LoadOptions> {
        let (protocol, default_endpoint) = match self.protocol {
            ProtocolArg::Http => (Protocol::HttpProtobuf, "http://127.0.0.1:4318"),
            ProtocolArg::HttpJson => (Protocol::HttpJson, "http://127.0.0.1:4318"),
            ProtocolArg::Grpc => (Protocol::Grpc, "http://127.0.0.1:4317"),
        };
        let duration = self
            .duration
            .map(|secs| {
                ensure!(secs.is_finite() && secs > 0.0, "--duration must be a positive number of seconds");
                Ok(Duration::from_secs_f64(secs))
            })
            .transpose()?;
        let runs = match (self.runs, duration) {
            (None, None) => Some(DEFAULT_RUNS),
            (runs, _) => runs,
        };
        // Timestamps near now, so the runs show up as recent in the console.
        ensure!(
            self.days_ago.is_finite() && (0.0..=3650.0).contains(&self.days_ago),
            "--days-ago must be between 0 and 3650"
        );
        let now = SystemTime::now().duration_since(UNIX_EPOCH).context("the system clock is before 1970")?;
        let now = now.saturating_sub(Duration::from_secs_f64(self.days_ago * 86_400.0));
        Ok(LoadOptions {
            target: Target {
                endpoint: self.endpoint.unwrap_or_else(|| default_endpoint.to_string()),
                protocol,
                token: self.token,
                gzip: self.gzip,
            },
            runs,
            duration,
            rate_spans_per_sec: self.rate,
            concurrency: self.concurrency,
            spans_per_request: self.spans_per_request,
            synth: SynthOptions {
                seed: self.seed,
                agents: self.agents,
                base_time_unix_nano: u64::try_from(now.as_nanos())?,
                max_steps: self.max_steps,
                bodies: !self.no_bodies,
            },
            rss_pid: self.rss_pid,
        })
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<ExitCode> {
    let options = Cli::parse().into_options()?;
    eprintln!(
        "sending to {} ({:?}{})",
        options.target.endpoint,
        options.target.protocol,
        if options.target.gzip { ", gzip" } else { "" }
    );
    let report = run_load(options).await?;
    println!("{report}");
    Ok(if report.failures > 0 { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}
