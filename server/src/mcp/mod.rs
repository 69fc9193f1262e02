//! The MCP gateway (docs/mcp-gateway.md): Flightdeck between an MCP client and its MCP
//! servers, so that every `tools/call` goes through the same gate as the agent API
//! (policies, approvals, the ledger) and is recorded as a run, with nothing changed in
//! the agent. Two ways in: `flightdeck mcp proxy` over stdio ([`stdio`]) and
//! `/mcp/{server}` over Streamable HTTP ([`http`]).
//!
//! | module | job |
//! |---|---|
//! | `jsonrpc` | message framing over `serde_json::Value` (nothing unknown is dropped), the specification's errors, size limits |
//! | `domain::mcp` | the rules, pure: a tool's class and route, `_meta` keys, an upstream answer read as an outcome |
//! | `link` | the one trait the gate reaches Flightdeck through: in process, or the REST API |
//! | `gate` | one `tools/call`: decide, ask (held, with progress), forward, report |
//! | `messages` | what a session's loop and its gate tasks send each other |
//! | `relay` | one client session: everything relayed, calls to the gate |
//! | `upstream` | the MCP server behind: a child over stdio or a Streamable HTTP server |
//! | `spans` | calls and runs as OTLP spans for the ingest path |
//! | `stdio`, `http` | the two transports |

pub mod gate;
pub mod http;
pub mod jsonrpc;
pub mod link;
pub mod messages;
pub mod relay;
pub mod spans;
pub mod stdio;
pub mod upstream;

pub use crate::config::McpServerConfig;
pub use domain::mcp::valid_server_name;
use upstream::UpstreamSpec;

/// Where a configured server is.
pub fn upstream_of(server: &McpServerConfig) -> UpstreamSpec {
    match (&server.url, &server.command) {
        (Some(url), _) => UpstreamSpec::Url { url: url.clone(), headers: server.headers.clone() },
        (None, command) => UpstreamSpec::Command {
            command: command.clone().unwrap_or_default(),
            args: server.args.clone(),
            env: server.env.clone(),
        },
    }
}
