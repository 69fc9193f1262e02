//! How the gate reaches Flightdeck: one small trait, [`Link`], with two implementations.
//! [`Local`] is the HTTP gateway inside the server, calling `app::services::calls` and the
//! ingest service directly; [`Remote`] is `flightdeck mcp proxy`, calling the REST API
//! with its token (scope `mcp`). Both run the same service, so every path into the gate
//! gives the same guarantees.

use crate::api::AgentToken;
use crate::otlp::IngestService;
use app::services::calls::{self, CallError, Caller, CallsContext};
use domain::ledger::request::{CallRequest, Completion, Outcome};
use domain::ledger::{Answer, LedgerEntry};
use domain::mcp::{self as rules, Decision, ToolHints};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use store::rules::RulesCache;
use store::{Db, StoreError};

/// One ask before a call.
#[derive(Debug, Clone, PartialEq)]
pub struct Ask {
    pub run_id: String,
    pub step: i64,
    /// `{server}/{tool}`.
    pub tool: String,
    pub arguments: Value,
    pub idempotency_key: Option<String>,
    /// The MCP client's name, for the approver.
    pub agent: Option<String>,
}

/// What the ledger answered, with what the gate needs of the entry.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Answered {
    pub answer: Answer,
    pub call: LedgerEntry,
    #[serde(default)]
    pub approved_arguments: Option<Value>,
    #[serde(default)]
    pub message: Option<String>,
}

/// The report after a forwarded call.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    pub outcome: Outcome,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Why Flightdeck did not answer.
#[derive(Debug, Clone, thiserror::Error, PartialEq)]
pub enum LinkError {
    /// It could not be reached (down, a network error, its database unavailable): calls
    /// that need the gate fail closed.
    #[error("Flightdeck cannot be reached: {0}")]
    Unreachable(String),
    /// It refused the request (what it said is in the message).
    #[error("Flightdeck refused: {0}")]
    Refused(String),
}

#[async_trait::async_trait]
pub trait Link: Send + Sync {
    /// What the gate does with each of these tools of `server` (name, annotations).
    async fn decide(&self, server: &str, tools: &[(String, ToolHints)]) -> Result<Vec<Decision>, LinkError>;
    /// Asks the ledger, held up to `wait` while the answer is one to wait on.
    async fn ask(&self, ask: &Ask, wait: Duration) -> Result<Answered, LinkError>;
    /// Reports how a call that was told `proceed` ended.
    async fn complete(&self, call_id: &str, report: &Report) -> Result<(), LinkError>;
    /// Stores spans through the ingest path (redaction, normalization, the writer).
    async fn record(&self, spans: ExportTraceServiceRequest) -> Result<(), LinkError>;
}

/// The decisions for `tools` under the policies in force.
pub fn decide_all(rules: &RulesCache, server: &str, tools: &[(String, ToolHints)]) -> Vec<Decision> {
    domain::mcp::decide_all(&rules.current().policies, server, tools)
}

/// The ask as the API checks it, so both links refuse the same things.
pub fn call_request(ask: &Ask, wait: Duration) -> CallRequest {
    CallRequest {
        run_id: Some(ask.run_id.clone()),
        step_index: Some(ask.step),
        tool: Some(ask.tool.clone()),
        arguments: Some(ask.arguments.clone()),
        idempotency_key: ask.idempotency_key.clone(),
        wait: Some(wait.as_secs()),
        display: None,
        agent: ask.agent.clone(),
    }
}

/// The gateway inside the server: the calls service and the ingest service, in process,
/// as the token that opened the MCP session.
#[derive(Clone)]
pub struct Local {
    pub db: Db,
    pub ctx: CallsContext,
    pub rules: RulesCache,
    pub ingest: Option<IngestService>,
    pub token: AgentToken,
}

fn from_call_error(e: CallError) -> LinkError {
    match e {
        CallError::NotYours(why) => LinkError::Refused(why),
        CallError::Store(StoreError::Database(e)) => LinkError::Unreachable(format!("its database: {e}")),
        CallError::Store(other) => LinkError::Refused(other.to_string()),
    }
}

#[async_trait::async_trait]
impl Link for Local {
    async fn decide(&self, server: &str, tools: &[(String, ToolHints)]) -> Result<Vec<Decision>, LinkError> {
        // The policies in memory, refreshed every few seconds: a database that went away
        // still leaves the last policies in force (which is what lets a read tool fail open).
        Ok(decide_all(&self.rules, server, tools))
    }

    async fn ask(&self, ask: &Ask, wait: Duration) -> Result<Answered, LinkError> {
        let valid = call_request(ask, wait).validate().map_err(LinkError::Refused)?;
        let caller = Caller { token_id: self.token.id, token_name: &self.token.name };
        let answer = calls::ask_waiting(&self.db, &self.ctx, caller, &valid, wait).await.map_err(from_call_error)?;
        Ok(Answered {
            answer: answer.answer,
            call: answer.call,
            approved_arguments: answer.approved_arguments,
            message: answer.message,
        })
    }

    async fn complete(&self, call_id: &str, report: &Report) -> Result<(), LinkError> {
        let completion = Completion {
            outcome: Some(report.outcome),
            external_id: None,
            response: report.response.clone(),
            error: report.error.clone(),
            verified_by: None,
        };
        let valid = completion.validate().map_err(LinkError::Refused)?;
        let caller = Caller { token_id: self.token.id, token_name: &self.token.name };
        calls::complete(&self.db, &self.ctx, caller, call_id, &valid).await.map_err(from_call_error)?;
        Ok(())
    }

    async fn record(&self, spans: ExportTraceServiceRequest) -> Result<(), LinkError> {
        let Some(ingest) = &self.ingest else {
            return Err(LinkError::Unreachable("no ingest service runs in this process".into()));
        };
        let bytes = serde_json::to_vec(&spans).map_err(|e| LinkError::Refused(e.to_string()))?;
        ingest
            .receive(ingest::decode::Encoding::Json, &bytes, None, Some(&self.token))
            .await
            .map(|_| ())
            .map_err(|e| LinkError::Unreachable(e.to_string()))
    }
}

/// `flightdeck mcp proxy`'s way to Flightdeck: the REST API with a token of scope `mcp`.
/// Decisions are kept, so that a read tool whose policy fails open keeps working while
/// Flightdeck is down.
pub struct Remote {
    base: String,
    token: String,
    http: reqwest::Client,
    known: Mutex<HashMap<String, Decision>>,
}

/// How long a request other than a held ask may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);

impl Remote {
    pub fn new(base: &str, token: &str) -> anyhow::Result<Remote> {
        let http = reqwest::Client::builder().connect_timeout(Duration::from_secs(3)).build()?;
        Ok(Remote {
            base: base.trim_end_matches('/').to_string(),
            token: token.to_string(),
            http,
            known: Mutex::default(),
        })
    }

    async fn post(&self, path: &str, body: Vec<u8>, timeout: Duration) -> Result<Value, LinkError> {
        let url = format!("{}/api/v1{path}", self.base);
        let sent = self
            .http
            .post(&url)
            .bearer_auth(&self.token)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body)
            .timeout(timeout)
            .send()
            .await
            .map_err(|e| LinkError::Unreachable(format!("{url}: {e}")))?;
        let status = sent.status();
        let body: Value = sent.json().await.unwrap_or(Value::Null);
        if status.is_success() {
            return Ok(body);
        }
        let message = body["error"]["message"].as_str().unwrap_or("no message").to_string();
        if status.is_server_error() || status == reqwest::StatusCode::TOO_MANY_REQUESTS {
            Err(LinkError::Unreachable(format!("{url} answered {status}: {message}")))
        } else {
            Err(LinkError::Refused(format!("{url} answered {status}: {message}")))
        }
    }

    async fn post_json(&self, path: &str, body: &Value, timeout: Duration) -> Result<Value, LinkError> {
        self.post(path, body.to_string().into_bytes(), timeout).await
    }
}

#[async_trait::async_trait]
impl Link for Remote {
    async fn decide(&self, server: &str, tools: &[(String, ToolHints)]) -> Result<Vec<Decision>, LinkError> {
        let listed: Vec<Value> =
            tools.iter().map(|(name, hints)| json!({"name": name, "annotations": hints})).collect();
        let asked = self.post_json("/mcp/tools", &json!({"server": server, "tools": listed}), REQUEST_TIMEOUT).await;
        let mut known = self.known.lock().expect("decisions lock");
        match asked {
            Ok(body) => {
                let decisions: Vec<Decision> = serde_json::from_value(body["decisions"].clone())
                    .map_err(|e| LinkError::Refused(format!("unreadable decisions: {e}")))?;
                for d in &decisions {
                    known.insert(d.tool.clone(), d.clone());
                }
                Ok(decisions)
            }
            Err(LinkError::Unreachable(why)) => tools
                .iter()
                .map(|(name, _)| known.get(&rules::qualified(server, name)).cloned())
                .collect::<Option<Vec<_>>>()
                .ok_or(LinkError::Unreachable(why)),
            Err(other) => Err(other),
        }
    }

    async fn ask(&self, ask: &Ask, wait: Duration) -> Result<Answered, LinkError> {
        let request = call_request(ask, wait);
        let body = json!({
            "run_id": request.run_id, "step_index": request.step_index, "tool": request.tool,
            "arguments": request.arguments, "idempotency_key": request.idempotency_key,
            "wait": request.wait, "agent": request.agent,
        });
        let answer = self.post_json("/mcp/calls", &body, wait + REQUEST_TIMEOUT).await?;
        serde_json::from_value(answer).map_err(|e| LinkError::Refused(format!("unreadable answer: {e}")))
    }

    async fn complete(&self, call_id: &str, report: &Report) -> Result<(), LinkError> {
        let body = serde_json::to_value(report).map_err(|e| LinkError::Refused(e.to_string()))?;
        let path = format!("/mcp/calls/{}/complete", domain::url::encode(call_id));
        self.post_json(&path, &body, REQUEST_TIMEOUT).await.map(|_| ())
    }

    async fn record(&self, spans: ExportTraceServiceRequest) -> Result<(), LinkError> {
        let body = serde_json::to_vec(&spans).map_err(|e| LinkError::Refused(e.to_string()))?;
        self.post("/mcp/spans", body, REQUEST_TIMEOUT).await.map(|_| ())
    }
}

/// A link shared by the tasks of one session.
pub type SharedLink = Arc<dyn Link>;
