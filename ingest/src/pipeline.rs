//! The one ingest path: an `ExportTraceServiceRequest` (from OTLP/HTTP protobuf or JSON,
//! or OTLP/gRPC) is validated and normalized span by span, then committed in one
//! transaction. Invalid spans are counted and reported, never stored; valid ones in the
//! same request are kept.

use super::decode::DecodeLimits;
use super::mapping::MappingTable;
use super::normalize::{normalize, Context, Limits, SpanResource};
use domain::policy::ToolPolicy;
use domain::redact::Redactor;
use domain::span::BodyPolicy;
use domain::span::NormalizedSpan;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;

/// Everything ingest is configured with.
#[derive(Debug, Clone)]
pub struct IngestSettings {
    pub mapping: MappingTable,
    pub redactor: Redactor,
    pub limits: Limits,
    /// What one request may expand into when decoded.
    pub decode: DecodeLimits,
    pub body_policy: BodyPolicy,
}

impl Default for IngestSettings {
    fn default() -> Self {
        IngestSettings {
            mapping: MappingTable::default(),
            redactor: Redactor::default(),
            limits: Limits::default(),
            decode: DecodeLimits::default(),
            body_policy: BodyPolicy::default(),
        }
    }
}

/// The spans of a request that passed validation, and what was wrong with the rest.
#[derive(Debug, Default)]
pub struct Prepared {
    pub spans: Vec<NormalizedSpan>,
    pub rejected: usize,
    /// The first few reasons, for the partial-success message.
    pub errors: Vec<String>,
}

impl Prepared {
    pub fn total(&self) -> usize {
        self.spans.len() + self.rejected
    }

    /// The partial-success message: how many spans were rejected and why.
    pub fn error_message(&self) -> String {
        if self.rejected == 0 {
            return String::new();
        }
        let mut message = format!("{} of {} spans rejected: {}", self.rejected, self.total(), self.errors.join("; "));
        if self.errors.len() < self.rejected {
            message.push_str("; …");
        }
        message
    }
}

/// Validates and normalizes every span of a request.
pub fn prepare(request: &ExportTraceServiceRequest, settings: &IngestSettings, policies: &[ToolPolicy]) -> Prepared {
    let cx = Context { mapping: &settings.mapping, redactor: &settings.redactor, policies, limits: settings.limits };
    let mut out = Prepared::default();
    for resource_spans in &request.resource_spans {
        let resource = SpanResource::new(resource_spans.resource.as_ref(), &settings.redactor);
        for scope_spans in &resource_spans.scope_spans {
            for span in &scope_spans.spans {
                match normalize(span, &resource, &cx) {
                    Ok(n) => out.spans.push(n),
                    Err(reason) => {
                        out.rejected += 1;
                        if out.errors.len() < 5 {
                            let id = hex::encode(&span.span_id);
                            out.errors.push(format!("span {id:?}: {reason}"));
                        }
                    }
                }
            }
        }
    }
    out
}

/// Counts the spans in a request without decoding anything further.
pub fn span_count(request: &ExportTraceServiceRequest) -> usize {
    request.resource_spans.iter().flat_map(|r| &r.scope_spans).map(|s| s.spans.len()).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::normalize::tests::span;
    use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans};
    use serde_json::json;

    #[test]
    fn invalid_spans_are_counted_and_explained_while_the_rest_pass() {
        let mut bad = span("bad", None, json!({}));
        bad.trace_id = vec![1; 3];
        let request = ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                scope_spans: vec![ScopeSpans { spans: vec![span("ok", None, json!({})), bad], ..Default::default() }],
                ..Default::default()
            }],
        };
        assert_eq!(span_count(&request), 2);
        let prepared = prepare(&request, &IngestSettings::default(), &[]);
        assert_eq!((prepared.spans.len(), prepared.rejected), (1, 1));
        let message = prepared.error_message();
        assert!(message.starts_with("1 of 2 spans rejected: span"), "{message}");
        assert!(message.contains("trace_id must be 16 bytes"), "{message}");
    }

    #[test]
    fn body_policies_parse() {
        assert_eq!("failed_runs".parse::<BodyPolicy>(), Ok(BodyPolicy::FailedRuns));
        assert!("some".parse::<BodyPolicy>().unwrap_err().contains("unknown body policy"));
    }
}
