//! Ingest: from OTLP spans to the canonical model. One path for every wire format:
//! [`decode`] measures each body within stated bounds and decodes it into an
//! `ExportTraceServiceRequest`, [`pipeline`] validates and
//! normalizes it with the [`mapping`] table and the [`redact`] rules into the stored
//! [`record`] format, storage commits it,
//! and [`derive`] recomputes each touched run from its spans.

pub mod attributes;
pub mod decode;
pub mod derive;
pub mod failure;
pub mod mapping;
pub mod normalize;
pub mod pipeline;
pub mod policy;
pub mod record;
pub mod redact;
