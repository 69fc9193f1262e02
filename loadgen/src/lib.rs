//! Realistic synthetic agent traces for Flightdeck.
//!
//! Three jobs, one module each:
//!
//! - [`synth`] invents agent runs (steps, tool calls, retries, duplicate side effects,
//!   escalations) deterministically from a seed and writes them down as OTLP spans in one
//!   of three attribute conventions, together with what a correct ingest should conclude
//!   about each run ([`synth::Expected`]). Tests, demo data and benchmarks all start here.
//! - [`send`] delivers those spans to a Flightdeck OTLP receiver over HTTP (protobuf or
//!   JSON) or gRPC, at a given rate and concurrency, and measures what happened.
//! - [`rpc`] is `google.rpc.Status` with `RetryInfo`, which the server writes into
//!   retryable gRPC errors and [`send`] reads.
//! - [`rss`] watches another process's memory while the load runs, for the server-memory
//!   benchmark.

pub mod rpc;
pub mod rss;
pub mod send;
pub mod synth;
