//! OTLP/HTTP: `POST {endpoint}/v1/traces` with a protobuf or JSON body, optionally
//! gzip-compressed, and the response read the way the OTLP specification describes
//! (partial success in the body, 429/502/503/504 retryable with `Retry-After`).

use std::io::Write;
use std::time::Duration;

use anyhow::Context;
use flate2::write::GzEncoder;
use flate2::Compression;
use opentelemetry_proto::tonic::collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse};
use prost::Message;
use reqwest::header::{HeaderMap, AUTHORIZATION, CONTENT_ENCODING, CONTENT_TYPE, RETRY_AFTER};
use reqwest::StatusCode;

use super::transport::{Attempt, Transport};
use super::{Protocol, Target};

const PROTOBUF: &str = "application/x-protobuf";
const JSON: &str = "application/json";

/// Longest a single request may take before it counts as failed.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

pub(crate) struct Http {
    client: reqwest::Client,
    url: String,
    json: bool,
    gzip: bool,
    authorization: Option<String>,
}

impl Http {
    pub(crate) fn new(target: &Target) -> anyhow::Result<Self> {
        let client = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            // The receiver is local; a proxy from the environment must not sit in between
            // and distort the measurements.
            .no_proxy()
            .build()
            .context("building the HTTP client")?;
        Ok(Self {
            client,
            url: format!("{}/v1/traces", target.endpoint.trim_end_matches('/')),
            json: target.protocol == Protocol::HttpJson,
            gzip: target.gzip,
            authorization: target.token.as_ref().map(|t| format!("Bearer {t}")),
        })
    }
}

impl Transport for Http {
    type Payload = Vec<u8>;

    fn encode(&self, request: ExportTraceServiceRequest) -> anyhow::Result<Vec<u8>> {
        // The proto crate's serde mode writes OTLP JSON (hex ids, string int64s).
        let body = if self.json { serde_json::to_vec(&request)? } else { request.encode_to_vec() };
        if !self.gzip {
            return Ok(body);
        }
        let mut encoder = GzEncoder::new(Vec::new(), Compression::fast());
        encoder.write_all(&body)?;
        Ok(encoder.finish()?)
    }

    async fn send(&self, payload: &Vec<u8>) -> Attempt {
        let mut request = self
            .client
            .post(&self.url)
            .header(CONTENT_TYPE, if self.json { JSON } else { PROTOBUF })
            .body(payload.clone());
        if self.gzip {
            request = request.header(CONTENT_ENCODING, "gzip");
        }
        if let Some(authorization) = &self.authorization {
            request = request.header(AUTHORIZATION, authorization);
        }
        let response = match request.send().await {
            Ok(response) => response,
            Err(e) => return Attempt::Failed(format!("POST {}: {}", self.url, with_causes(&e))),
        };
        let status = response.status();
        let headers = response.headers().clone();
        let body = response.bytes().await.unwrap_or_default();
        classify(status, &headers, &body)
    }
}

/// reqwest's own message hides the reason ("error sending request"); the causes say
/// what actually went wrong (connection refused, timed out, ...).
fn with_causes(error: &dyn std::error::Error) -> String {
    let mut message = error.to_string();
    let mut cause = error.source();
    while let Some(inner) = cause {
        message.push_str(": ");
        message.push_str(&inner.to_string());
        cause = inner.source();
    }
    message
}

/// Reads one response. A success body that cannot be parsed still means the request was
/// accepted: the status code is the contract, the body only adds partial-success detail.
fn classify(status: StatusCode, headers: &HeaderMap, body: &[u8]) -> Attempt {
    if status.is_success() {
        let json = headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|v| v.starts_with(JSON));
        let rejected = if json {
            rejected_in_json(body)
        } else {
            ExportTraceServiceResponse::decode(body)
                .ok()
                .and_then(|r| r.partial_success)
                .map_or(0, |p| u64::try_from(p.rejected_spans).unwrap_or(0))
        };
        return Attempt::Accepted { rejected };
    }
    match status {
        StatusCode::TOO_MANY_REQUESTS
        | StatusCode::BAD_GATEWAY
        | StatusCode::SERVICE_UNAVAILABLE
        | StatusCode::GATEWAY_TIMEOUT => Attempt::Retryable {
            retry_after: headers
                .get(RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map(Duration::from_secs),
        },
        _ => {
            let text = String::from_utf8_lossy(body);
            let snippet: String = text.chars().take(200).collect();
            Attempt::Failed(format!("HTTP {status}: {snippet}"))
        }
    }
}

/// `partialSuccess.rejectedSpans`, which OTLP JSON writes as a string (int64) but some
/// servers write as a number.
fn rejected_in_json(body: &[u8]) -> u64 {
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(body) else {
        return 0;
    };
    match &value["partialSuccess"]["rejectedSpans"] {
        serde_json::Value::String(s) => s.parse().unwrap_or(0),
        serde_json::Value::Number(n) => n.as_u64().unwrap_or(0),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    fn headers(pairs: &[(reqwest::header::HeaderName, &str)]) -> HeaderMap {
        pairs.iter().map(|(k, v)| (k.clone(), HeaderValue::from_str(v).unwrap())).collect()
    }

    #[test]
    fn success_reads_partial_success_from_protobuf_and_json() {
        let response = ExportTraceServiceResponse {
            partial_success: Some(opentelemetry_proto::tonic::collector::trace::v1::ExportTracePartialSuccess {
                rejected_spans: 3,
                error_message: "ids of the wrong length".into(),
            }),
        };
        let protobuf = headers(&[(CONTENT_TYPE, PROTOBUF)]);
        assert_eq!(classify(StatusCode::OK, &protobuf, &response.encode_to_vec()), Attempt::Accepted { rejected: 3 });
        assert_eq!(classify(StatusCode::OK, &protobuf, b""), Attempt::Accepted { rejected: 0 });

        let json = headers(&[(CONTENT_TYPE, "application/json; charset=utf-8")]);
        let as_string = br#"{"partialSuccess":{"rejectedSpans":"4","errorMessage":"x"}}"#;
        let as_number = br#"{"partialSuccess":{"rejectedSpans":5}}"#;
        assert_eq!(classify(StatusCode::OK, &json, as_string), Attempt::Accepted { rejected: 4 });
        assert_eq!(classify(StatusCode::OK, &json, as_number), Attempt::Accepted { rejected: 5 });
        assert_eq!(classify(StatusCode::OK, &json, b"{}"), Attempt::Accepted { rejected: 0 });
    }

    #[test]
    fn throttling_is_retryable_and_honours_retry_after() {
        let with_hint = headers(&[(RETRY_AFTER, "7")]);
        assert_eq!(
            classify(StatusCode::TOO_MANY_REQUESTS, &with_hint, b""),
            Attempt::Retryable { retry_after: Some(Duration::from_secs(7)) }
        );
        assert_eq!(
            classify(StatusCode::SERVICE_UNAVAILABLE, &HeaderMap::new(), b""),
            Attempt::Retryable { retry_after: None }
        );
        // An HTTP date is legal but not understood here: fall back to backing off.
        let dated = headers(&[(RETRY_AFTER, "Wed, 21 Oct 2015 07:28:00 GMT")]);
        assert_eq!(classify(StatusCode::TOO_MANY_REQUESTS, &dated, b""), Attempt::Retryable { retry_after: None });
    }

    #[test]
    fn client_errors_fail_with_the_body() {
        let attempt = classify(StatusCode::BAD_REQUEST, &HeaderMap::new(), b"trace id must be 16 bytes");
        assert_eq!(attempt, Attempt::Failed("HTTP 400 Bad Request: trace id must be 16 bytes".into()));
    }
}
