//! OTLP/gRPC: `TraceService/Export` over a tonic channel, gzip when asked, the bearer
//! token as `authorization` metadata. UNAVAILABLE and RESOURCE_EXHAUSTED are retryable;
//! the server's `google.rpc.RetryInfo` detail, when present, says how long to wait.

use std::time::Duration;

use anyhow::Context;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use tonic::codec::CompressionEncoding;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::transport::{Channel, Endpoint};
use tonic::Code;

use crate::rpc::retry_delay;

use super::transport::{Attempt, Transport};
use super::Target;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

pub(crate) struct Grpc {
    client: TraceServiceClient<Channel>,
    authorization: Option<MetadataValue<Ascii>>,
}

impl Grpc {
    /// Connects up front so that a wrong endpoint is one clear error, not a failure per
    /// request.
    pub(crate) async fn connect(target: &Target) -> anyhow::Result<Self> {
        let channel = Endpoint::from_shared(target.endpoint.clone())
            .with_context(|| format!("invalid gRPC endpoint {}", target.endpoint))?
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(REQUEST_TIMEOUT)
            .connect()
            .await
            .with_context(|| format!("connecting to {}", target.endpoint))?;
        let mut client = TraceServiceClient::new(channel);
        if target.gzip {
            client = client.send_compressed(CompressionEncoding::Gzip).accept_compressed(CompressionEncoding::Gzip);
        }
        let authorization = target
            .token
            .as_ref()
            .map(|t| format!("Bearer {t}").parse())
            .transpose()
            .context("the token is not valid in gRPC metadata")?;
        Ok(Self { client, authorization })
    }
}

impl Transport for Grpc {
    type Payload = ExportTraceServiceRequest;

    fn encode(&self, request: ExportTraceServiceRequest) -> anyhow::Result<Self::Payload> {
        // tonic encodes while sending; there is nothing to prepare.
        Ok(request)
    }

    async fn send(&self, payload: &ExportTraceServiceRequest) -> Attempt {
        // tonic takes the message by value; keeping the original is what lets a refused
        // request be sent again.
        let mut request = tonic::Request::new(payload.clone());
        if let Some(authorization) = &self.authorization {
            request.metadata_mut().insert("authorization", authorization.clone());
        }
        // Clients share the channel; cloning one is how tonic allows concurrent calls.
        match self.client.clone().export(request).await {
            Ok(response) => Attempt::Accepted {
                rejected: response
                    .into_inner()
                    .partial_success
                    .map_or(0, |p| u64::try_from(p.rejected_spans).unwrap_or(0)),
            },
            Err(status) => match status.code() {
                Code::Unavailable | Code::ResourceExhausted => {
                    Attempt::Retryable { retry_after: retry_delay(status.details()) }
                }
                code => Attempt::Failed(format!("gRPC {code:?}: {}", status.message())),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rpc::{ProtoAny, ProtoDuration, RetryInfo, RpcStatus, RETRY_INFO_TYPE};
    use prost::Message;

    #[test]
    fn retry_info_is_found_among_status_details() {
        let details = RpcStatus {
            code: 14,
            message: String::new(),
            details: vec![
                ProtoAny { type_url: "type.googleapis.com/google.rpc.DebugInfo".into(), value: vec![1, 2, 3] },
                ProtoAny {
                    type_url: RETRY_INFO_TYPE.into(),
                    value: RetryInfo { retry_delay: Some(ProtoDuration { seconds: 2, nanos: 500_000_000 }) }
                        .encode_to_vec(),
                },
            ],
        }
        .encode_to_vec();
        assert_eq!(retry_delay(&details), Some(Duration::from_millis(2_500)));
        assert_eq!(retry_delay(&[]), None);
        assert_eq!(retry_delay(&[0xff, 0xff]), None);
    }
}
