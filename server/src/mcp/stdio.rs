//! `flightdeck mcp proxy -- <server command>`: what an MCP host (Claude Desktop, Cursor)
//! launches instead of the server. It starts the server, relays stdin and stdout through
//! the gate, and reaches a Flightdeck server over HTTP with a token of scope `mcp`.

use super::jsonrpc;
use super::link::{Remote, SharedLink};
use super::relay::{self, SessionInfo, SessionLimits, ToRelay};
use super::upstream::{self, Line, UpstreamSpec};
use std::collections::BTreeMap;
use std::sync::Arc;
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

/// What the command line says.
#[derive(Debug, Clone)]
pub struct ProxyArgs {
    pub url: String,
    pub token: String,
    pub name: Option<String>,
    pub command: Vec<String>,
}

/// The server's name: `--name`, else the command's file name (`npx` is no name: the
/// package after it is).
pub fn server_name(args: &ProxyArgs) -> String {
    if let Some(name) = &args.name {
        return name.clone();
    }
    let file =
        |s: &str| std::path::Path::new(s).file_stem().map(|f| f.to_string_lossy().to_string()).unwrap_or_default();
    let first = args.command.first().map(|c| file(c)).unwrap_or_default();
    let named = if matches!(first.as_str(), "npx" | "uvx" | "node" | "python" | "python3" | "docker" | "bunx" | "deno")
    {
        args.command.iter().skip(1).find(|a| !a.starts_with('-')).map(|a| file(a.rsplit('/').next().unwrap_or(a)))
    } else {
        None
    };
    let name: String = named
        .unwrap_or(first)
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || "-_.".contains(c) { c } else { '-' })
        .take(64)
        .collect();
    if name.is_empty() {
        "mcp".into()
    } else {
        name
    }
}

/// Runs until the host closes stdin or the server exits; then exits the process (the
/// blocking stdin reader would otherwise hold the runtime open).
pub async fn run(args: ProxyArgs) -> anyhow::Result<()> {
    let name = server_name(&args);
    if !super::valid_server_name(&name) {
        anyhow::bail!("--name `{name}`: use 1 to 64 letters, digits, `-`, `_` or `.`");
    }
    let Some((command, rest)) = args.command.split_first() else {
        anyhow::bail!("give the MCP server's command after `--`, e.g. flightdeck mcp proxy -- npx -y @modelcontextprotocol/server-filesystem /tmp");
    };
    let limits = SessionLimits::default();
    let link: SharedLink = Arc::new(Remote::new(&args.url, &args.token)?);
    let spec = UpstreamSpec::Command { command: command.clone(), args: rest.to_vec(), env: BTreeMap::new() };
    let upstream = upstream::connect(&spec, limits.max_message_bytes).await?;
    let session_id = hex::encode(rand::random::<[u8; 16]>());
    tracing::info!(server = %name, session = %session_id, url = %args.url, "mcp proxy started");
    let info = SessionInfo { server: name, session_id, limits };
    let (to_relay, mut out) = relay::start(info, upstream, link);
    let (direct, mut refused) = mpsc::channel::<serde_json::Value>(16);
    let writer = tokio::spawn(async move {
        let mut stdout = tokio::io::stdout();
        loop {
            let message = tokio::select! {
                m = out.recv() => match m { Some(o) => o.message, None => break },
                Some(m) = refused.recv() => m,
            };
            let mut line = message.to_string().into_bytes();
            line.push(b'\n');
            if stdout.write_all(&line).await.is_err() || stdout.flush().await.is_err() {
                break;
            }
        }
    });
    tokio::spawn(async move {
        let mut stdin = BufReader::new(tokio::io::stdin());
        loop {
            match upstream::read_line(&mut stdin, limits.max_message_bytes).await {
                Ok(Line::Frame(bytes)) if bytes.iter().all(u8::is_ascii_whitespace) => continue,
                Ok(Line::Frame(bytes)) => match jsonrpc::parse(&bytes, limits.max_message_bytes) {
                    Ok(frame) => {
                        if to_relay.send(ToRelay::Frame(frame)).await.is_err() {
                            break;
                        }
                    }
                    Err(error) => drop(direct.send(error).await),
                },
                Ok(Line::TooLong(n)) => {
                    let why = format!(
                        "message of {n} bytes is larger than the gateway's limit of {} bytes",
                        limits.max_message_bytes
                    );
                    let _ = direct.send(jsonrpc::error(serde_json::Value::Null, jsonrpc::INVALID_REQUEST, &why)).await;
                }
                Ok(Line::Eof) | Err(_) => {
                    let _ = to_relay.send(ToRelay::Close).await;
                    break;
                }
            }
        }
    });
    let _ = writer.await;
    tracing::info!("mcp proxy stopped");
    std::process::exit(0);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(command: &[&str], name: Option<&str>) -> ProxyArgs {
        ProxyArgs {
            url: String::new(),
            token: String::new(),
            name: name.map(str::to_string),
            command: command.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn the_server_is_named_after_its_command_unless_named() {
        assert_eq!(server_name(&args(&["/usr/bin/github-mcp-server", "stdio"], None)), "github-mcp-server");
        assert_eq!(
            server_name(&args(&["npx", "-y", "@modelcontextprotocol/server-filesystem", "/tmp"], None)),
            "server-filesystem"
        );
        assert_eq!(server_name(&args(&["python3", "tests/mcp/upstream.py"], None)), "upstream");
        assert_eq!(server_name(&args(&["anything"], Some("files"))), "files");
    }
}
