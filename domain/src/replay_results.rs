//! Results of regression tests run from replay fixtures (`GET /api/v1/runs/{id}/replay`):
//! an agent team posts one per fixture run (`POST /api/v1/replays/results`), and /trends
//! charts the pass rate per agent, the last of the article's trends to watch. Pure: the
//! request checked here; storage keeps the results.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Longest fixture name, agent name or run id.
pub const MAX_NAME_CHARS: usize = 200;
/// Most JSON kept as a result's details.
pub const MAX_DETAILS_BYTES: usize = 16 * 1024;

/// One result, as posted.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ResultRequest {
    /// The fixture's name in your test suite (often the run id it was made from).
    pub fixture: String,
    /// The run the fixture was made from, if any; its agent is used when `agent` is absent.
    #[serde(default)]
    pub run_id: Option<String>,
    /// The agent under test; needed unless `run_id` names a stored run.
    #[serde(default)]
    pub agent: Option<String>,
    pub passed: bool,
    /// Anything that says why (a diff, the failing assertion): JSON, at most 16 KiB,
    /// redacted before storage.
    #[serde(default)]
    #[cfg_attr(feature = "server", schema(value_type = Object))]
    pub details: Option<Value>,
}

/// A request that passed [`ResultRequest::validate`]; `agent` may still be unknown.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidResult {
    pub fixture: String,
    pub run_id: Option<String>,
    pub agent: Option<String>,
    pub passed: bool,
    pub details: Option<Value>,
}

/// One stored result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct ReplayResult {
    pub id: String,
    pub agent: String,
    pub fixture: String,
    pub run_id: Option<String>,
    pub passed: bool,
    #[cfg_attr(feature = "server", schema(value_type = Object))]
    pub details: Option<Value>,
    pub recorded_at: chrono::DateTime<chrono::Utc>,
}

impl ResultRequest {
    pub fn validate(self) -> Result<ValidResult, String> {
        let name = |what: &str, v: String| -> Result<String, String> {
            let v = v.trim().to_string();
            if v.is_empty() {
                return Err(format!("`{what}` is empty"));
            }
            if v.chars().count() > MAX_NAME_CHARS {
                return Err(format!("`{what}` is longer than {MAX_NAME_CHARS} characters"));
            }
            Ok(v)
        };
        let fixture = name("fixture", self.fixture)?;
        let run_id = self.run_id.map(|r| name("run_id", r)).transpose()?;
        let agent = self.agent.map(|a| name("agent", a)).transpose()?;
        if agent.is_none() && run_id.is_none() {
            return Err("name the `agent` under test, or the `run_id` the fixture was made from".into());
        }
        if let Some(d) = &self.details {
            let size = serde_json::to_vec(d).map(|b| b.len()).unwrap_or(usize::MAX);
            if size > MAX_DETAILS_BYTES {
                return Err(format!("`details` is {size} bytes of JSON; at most {MAX_DETAILS_BYTES}"));
            }
        }
        Ok(ValidResult { fixture, run_id, agent, passed: self.passed, details: self.details })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_result_names_its_fixture_and_its_agent_or_run() {
        let ok = ResultRequest {
            fixture: " refund-1 ".into(),
            agent: Some("billing-bot".into()),
            passed: true,
            ..Default::default()
        };
        assert_eq!(ok.clone().validate().unwrap().fixture, "refund-1");
        let bad = |r: ResultRequest| r.validate().unwrap_err();
        assert!(bad(ResultRequest { agent: None, ..ok.clone() }).contains("name the `agent`"));
        assert!(bad(ResultRequest { fixture: " ".into(), ..ok.clone() }).contains("`fixture` is empty"));
        let huge = serde_json::json!({"diff": "x".repeat(MAX_DETAILS_BYTES)});
        assert!(bad(ResultRequest { details: Some(huge), ..ok.clone() }).contains("at most 16384"));
        let by_run = ResultRequest { agent: None, run_id: Some("run-1".into()), ..ok };
        assert_eq!(by_run.validate().unwrap().agent, None, "storage finds the run's agent");
    }
}
