//! The MCP gateway (docs/mcp-gateway.md): Flightdeck between an MCP client and its MCP
//! servers, so that every `tools/call` goes through the same gate as the agent API
//! (policies, approvals, the ledger) and is recorded as a run, with nothing changed in
//! the agent. Two ways in: `flightdeck mcp proxy` over stdio ([`stdio`]) and
//! `/mcp/{server}` over Streamable HTTP ([`http`]).
//!
//! | module | job |
//! |---|---|
//! | `jsonrpc` | message framing over `serde_json::Value` (nothing unknown is dropped), the specification's errors, size limits |
//! | `rules` | pure: a tool's class and route, `_meta` keys, an upstream answer read as an outcome |
//! | `link` | the one trait the gate reaches Flightdeck through: in process, or the REST API |
//! | `gate` | one `tools/call`: decide, ask (held, with progress), forward, report |
//! | `relay` | one client session: everything relayed, calls to the gate |
//! | `upstream` | the MCP server behind: a child over stdio or a Streamable HTTP server |
//! | `spans` | calls and runs as OTLP spans for the ingest path |
//! | `stdio`, `http` | the two transports |

pub mod gate;
pub mod http;
pub mod jsonrpc;
pub mod link;
pub mod relay;
pub mod rules;
pub mod spans;
pub mod stdio;
pub mod upstream;

use serde::Deserialize;
use std::collections::BTreeMap;
use upstream::UpstreamSpec;

/// One `[[mcp_servers]]` entry: served at `/mcp/{name}`.
#[derive(Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct McpServerConfig {
    /// The server's name in Flightdeck: its path, and the first part of its tools' names
    /// (`{name}/{tool}`) in policies, approvals, the ledger and spans.
    pub name: String,
    /// A remote server's Streamable HTTP endpoint.
    #[serde(default)]
    pub url: Option<String>,
    /// Headers sent to the remote server (its own credentials). Never printed.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// A local server's command, started once per client session.
    #[serde(default)]
    pub command: Option<String>,
    #[serde(default)]
    pub args: Vec<String>,
    /// Environment for the command (its own credentials). Never printed.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
}

impl std::fmt::Debug for McpServerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServerConfig")
            .field("name", &self.name)
            .field("url", &self.url.as_deref().map(redact_url))
            .field("command", &self.command)
            .field("args", &self.args.len())
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("env", &self.env.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// A URL without its query (which may carry a key), for logs and the banner.
pub fn redact_url(url: &str) -> String {
    url.split('?').next().unwrap_or(url).to_string()
}

/// Whether `name` may name a server: letters, digits, `-`, `_`, `.`, at most 64; no `/`,
/// which separates it from the tool in `{server}/{tool}`.
pub fn valid_server_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= 64 && name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
}

impl McpServerConfig {
    pub fn validate(&self) -> Result<(), String> {
        if !valid_server_name(&self.name) {
            return Err(format!(
                "[[mcp_servers]] name `{}`: use 1 to 64 letters, digits, `-`, `_` or `.` (it is part of a URL and of tool names)",
                self.name
            ));
        }
        match (&self.url, &self.command) {
            (Some(url), None) if url.starts_with("http://") || url.starts_with("https://") => Ok(()),
            (Some(_), None) => Err(format!("[[mcp_servers]] `{}`: `url` must start with http:// or https://", self.name)),
            (None, Some(c)) if !c.trim().is_empty() => Ok(()),
            _ => Err(format!("[[mcp_servers]] `{}`: give either `url` (a remote server) or `command` (with `args`)", self.name)),
        }
    }

    pub fn upstream(&self) -> UpstreamSpec {
        match (&self.url, &self.command) {
            (Some(url), _) => UpstreamSpec::Url { url: url.clone(), headers: self.headers.clone() },
            (None, command) => UpstreamSpec::Command {
                command: command.clone().unwrap_or_default(),
                args: self.args.clone(),
                env: self.env.clone(),
            },
        }
    }
}

/// Checks a list: each entry, and unique names.
pub fn validate_servers(servers: &[McpServerConfig]) -> Result<(), String> {
    let mut seen = std::collections::BTreeSet::new();
    for s in servers {
        s.validate()?;
        if !seen.insert(s.name.as_str()) {
            return Err(format!("[[mcp_servers]] names must be unique: `{}` appears twice", s.name));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(name: &str, url: Option<&str>, command: Option<&str>) -> McpServerConfig {
        McpServerConfig {
            name: name.into(),
            url: url.map(str::to_string),
            headers: BTreeMap::new(),
            command: command.map(str::to_string),
            args: vec![],
            env: BTreeMap::from([("API_KEY".to_string(), "s3cret".to_string())]),
        }
    }

    #[test]
    fn a_server_has_a_plain_name_and_exactly_one_upstream() {
        assert!(validate_servers(&[server("files", None, Some("npx")), server("remote", Some("https://x/mcp"), None)]).is_ok());
        assert!(validate_servers(&[server("a/b", None, Some("x"))]).unwrap_err().contains("letters, digits"));
        assert!(validate_servers(&[server("a", Some("https://x"), Some("x"))]).unwrap_err().contains("either"));
        assert!(validate_servers(&[server("a", None, None)]).unwrap_err().contains("either"));
        assert!(validate_servers(&[server("a", Some("ftp://x"), None)]).unwrap_err().contains("http"));
        assert!(validate_servers(&[server("a", None, Some("x")), server("a", None, Some("y"))]).unwrap_err().contains("unique"));
        assert!(!format!("{:?}", server("a", Some("https://x/mcp?key=s3cret"), None)).contains("s3cret"));
    }
}
