//! The command line: `flightdeck [serve|migrate|config|user|token] ...`, every setting
//! also readable from the environment and the config file.

use crate::config::Overrides;
use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(
    name = "flightdeck",
    version,
    about = "Flightdeck: the operator console for AI agents in production",
    long_about = "Flightdeck: the operator console for AI agents in production.\n\n\
        Settings come from flags, then environment variables, then the config file \
        (--config), then defaults. With no command, `serve` runs."
)]
pub struct Cli {
    /// TOML file with settings; keys are the long flag names with `_` for `-`
    #[arg(long, env = "FLIGHTDECK_CONFIG", global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,

    #[command(flatten)]
    pub settings: Overrides,

    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the web UI and API (the default)
    Serve,
    /// Apply database migrations and exit
    Migrate,
    /// Print the settings in force (secrets redacted) and exit
    Config,
    /// Fill the database with realistic demo runs (through the normal ingest path)
    Demo {
        /// How many runs to generate
        #[arg(long, default_value_t = 200)]
        runs: usize,
        /// Seed of the generator; the same seed gives the same runs
        #[arg(long, default_value_t = 7)]
        seed: u64,
    },
    /// Copy the SQLite database and its execution ledger to two new files while the server
    /// may keep running (for PostgreSQL use pg_dump); restore by putting both copies in
    /// place of flightdeck.db and flightdeck.ledger.db with the server stopped
    Backup {
        /// The file to write (the ledger's copy goes beside it: copy.db → copy.ledger.db);
        /// neither may exist yet
        file: std::path::PathBuf,
    },
    /// Manage user accounts
    #[command(subcommand)]
    User(UserCommand),
    /// Manage agent API tokens
    #[command(subcommand)]
    Token(TokenCommand),
    /// On-call notifications
    #[command(subcommand)]
    Alerts(AlertsCommand),
    /// Print a new signing secret for a `[[webhooks]]` target's `secret` (Standard Webhooks)
    WebhookSecret,
    /// The MCP gateway (docs/mcp-gateway.md)
    #[command(subcommand)]
    Mcp(McpCommand),
}

#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// Launched by an MCP host instead of an MCP server: starts the server (the command
    /// after `--`) and relays its stdio, putting every tools/call through Flightdeck's
    /// policies, approvals and ledger and recording the session as a run
    Proxy {
        /// Flightdeck's address
        #[arg(long, env = "FLIGHTDECK_URL", default_value = "http://127.0.0.1:3000", value_name = "URL")]
        url: String,
        /// An API token with the `mcp` scope
        #[arg(long, env = "FLIGHTDECK_TOKEN", hide_env_values = true, value_name = "TOKEN")]
        token: String,
        /// The server's name in Flightdeck: tools are recorded and matched by policies as
        /// NAME/TOOL [default: the command's file name]
        #[arg(long, value_name = "NAME")]
        name: Option<String>,
        /// The MCP server's own command and arguments
        #[arg(last = true, required = true, value_name = "COMMAND")]
        command: Vec<String>,
    },
}

#[derive(Debug, Subcommand)]
pub enum AlertsCommand {
    /// Send a test alert, firing and then resolved, to every target of an alert route
    /// ("default" when no routes are configured) and print what each target answered
    Test {
        /// The route's name (`[[alert_routes]]`)
        route: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum UserCommand {
    /// Create a user. The password is read from standard input when it is not a terminal
    /// (one line), otherwise generated and printed once.
    Add {
        username: String,
        /// Roles to grant: viewer, approver, operator, admin (repeat or comma-separate)
        #[arg(long = "role", value_delimiter = ',', default_value = "viewer")]
        roles: Vec<String>,
    },
    /// Set a new password (from standard input, or generated and printed once) and sign
    /// the user out everywhere
    Reset { username: String },
    /// Disable a user: they cannot sign in, and every session of theirs ends at once
    Disable { username: String },
    /// Enable a disabled user again
    Enable { username: String },
    /// List users, their roles and whether they are disabled
    List,
}

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Create an agent API token and print its secret once (only a hash is kept)
    Create {
        /// A name saying which agent or script uses it
        name: String,
        /// Scopes: ingest, approvals, escalations, read (repeat or comma-separate)
        #[arg(long = "scope", value_delimiter = ',', required = true)]
        scopes: Vec<String>,
    },
    /// Revoke a token by id (see `token list`)
    Revoke { id: i64 },
    /// List tokens (never their secrets)
    List,
}
