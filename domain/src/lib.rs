//! Flightdeck's domain: the canonical model (runs, steps, tool calls, spans) and the rules
//! over it (approvals, guarded calls, escalations, alerts, prices, trends), as plain
//! types and pure functions: no database, no HTTP, no clock but the one passed in. The
//! pages' types build for the browser too; the rules that only the server runs (CEL,
//! JSON Schema, redaction, the stored span format, derivation) are behind `server`.

pub mod access;
pub mod alerts;
pub mod approvals;
pub mod canonical;
pub mod clock;
pub mod escalations;
pub mod ledger;
pub mod models;
pub mod pattern;
pub mod pricing;
pub mod stats;
pub mod trends;
pub mod url;
pub mod vocabulary;

#[cfg(feature = "server")]
pub mod derive;
#[cfg(feature = "server")]
pub mod failure;
#[cfg(feature = "server")]
pub mod mcp;
#[cfg(feature = "server")]
pub mod notify;
#[cfg(feature = "server")]
pub mod policy;
#[cfg(feature = "server")]
pub mod record;
#[cfg(feature = "server")]
pub mod redact;
#[cfg(feature = "server")]
pub mod replay;
#[cfg(feature = "server")]
pub mod replay_results;
#[cfg(feature = "server")]
pub mod run_query;
#[cfg(feature = "server")]
pub mod span;
#[cfg(feature = "server")]
pub mod trace_view;
#[cfg(feature = "server")]
pub mod webhook_body;
