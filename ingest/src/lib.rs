//! Ingest: from OTLP spans to the canonical model. One path for every wire format:
//! [`decode`] measures each body within stated bounds and decodes it into an
//! `ExportTraceServiceRequest`, [`pipeline`] validates and [`normalize`]s it with the
//! [`mapping`] table and `domain::redact` into `domain::span::NormalizedSpan`s in the
//! stored record format (`domain::record`); `store` commits them and `domain::derive`
//! recomputes each touched run from its spans.

pub mod attributes;
pub mod decode;
pub mod mapping;
pub mod normalize;
pub mod pipeline;
