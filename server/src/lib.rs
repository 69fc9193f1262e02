//! The Flightdeck server process as a library, so integration tests can build the same
//! router the binary serves. `main.rs` only parses the command line and dispatches.

pub mod alerts;
pub mod api;
pub mod cli;
pub mod commands;
pub mod config;
pub mod health;
pub mod mcp;
pub mod memory;
pub mod metrics;
pub mod otlp;
pub mod priority;
pub mod shutdown;
pub mod slack;
pub mod telemetry;
pub mod web;
pub mod webhooks;
