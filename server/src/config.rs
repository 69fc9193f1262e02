//! Flightdeck's configuration: one struct, filled from defaults, then an optional TOML
//! file, then environment variables, then command-line flags (each beating the last).
//!
//! [`Overrides`] is the shape of every layer: clap reads flags and environment into it,
//! serde reads the file into it, and [`Config::resolve`] applies the defaults.

use anyhow::Context;
use app::auth::client_address::TrustedProxies;
use clap::Args;
use domain::notify::{AlertRoute, Notifications, RetryPolicy, WebhookTarget};
use domain::policy::ToolPolicy;
use domain::pricing::ModelPrice;
use domain::redact::Redactor;
use domain::span::BodyPolicy;
use ingest::decode::DecodeLimits;
use ingest::mapping::MappingTable;
use ingest::normalize::Limits;
use ingest::pipeline::IngestSettings;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// Every setting, each optional so that layers can be merged.
#[derive(Debug, Clone, Default, Args, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Overrides {
    /// Address for the web UI and the REST API; port 0 picks a free port, named in the
    /// "serving" log line [default: 127.0.0.1:3000]
    #[arg(long, env = "FLIGHTDECK_LISTEN", global = true, value_name = "ADDR")]
    pub listen: Option<SocketAddr>,

    /// Directory for the SQLite database and other local state [default: ./data]
    #[arg(long, env = "FLIGHTDECK_DATA_DIR", global = true, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,

    /// Database to use: postgres://... for PostgreSQL, or sqlite://PATH
    /// [default: sqlite://DATA_DIR/flightdeck.db]
    #[arg(long, env = "DATABASE_URL", global = true, value_name = "URL")]
    pub database_url: Option<String>,

    /// Directory with the browser bundle (pkg/flightdeck.js, .wasm, .css) [default: target/site]
    #[arg(long, env = "FLIGHTDECK_SITE_ROOT", global = true, value_name = "DIR")]
    pub site_root: Option<PathBuf>,

    /// Mark session cookies Secure (sent over HTTPS only) [default: true when public_url
    /// starts with https://, else false]
    #[arg(long, env = "FLIGHTDECK_SECURE_COOKIES", global = true, value_name = "BOOL",
          num_args = 0..=1, default_missing_value = "true")]
    pub secure_cookies: Option<bool>,

    /// Sign a browser session out after this many minutes without a request [default: 720]
    #[arg(long, env = "FLIGHTDECK_SESSION_IDLE_MINUTES", global = true, value_name = "MINUTES")]
    pub session_idle_minutes: Option<u32>,

    /// Address of the OTLP/HTTP receiver (POST /v1/traces) [default: 127.0.0.1:4318]
    #[arg(long, env = "FLIGHTDECK_OTLP_HTTP_LISTEN", global = true, value_name = "ADDR")]
    pub otlp_http_listen: Option<SocketAddr>,

    /// Address of the OTLP/gRPC receiver [default: 127.0.0.1:4317]
    #[arg(long, env = "FLIGHTDECK_OTLP_GRPC_LISTEN", global = true, value_name = "ADDR")]
    pub otlp_grpc_listen: Option<SocketAddr>,

    /// `token`: OTLP exports need a token with the ingest scope; `none`: anyone who can
    /// reach the receivers may send (local development only) [default: token]
    #[arg(long, env = "FLIGHTDECK_INGEST_AUTH", global = true, value_name = "token|none")]
    pub ingest_auth: Option<IngestAuth>,

    /// Largest OTLP request accepted, in bytes after decompression [default: 20971520]
    #[arg(long, env = "FLIGHTDECK_MAX_BODY_BYTES", global = true, value_name = "BYTES")]
    pub max_body_bytes: Option<usize>,

    /// Memory for OTLP requests waiting to be stored, in bytes (each counts 8 times its
    /// uncompressed size); beyond it exporters are told to retry later (503 with
    /// Retry-After) [default: 67108864]
    #[arg(long, env = "FLIGHTDECK_INGEST_QUEUE_BYTES", global = true, value_name = "BYTES")]
    pub ingest_queue_bytes: Option<usize>,

    /// Ingest writers committing side by side on PostgreSQL, 1-16 (SQLite always has one:
    /// it has one write lock) [default: 4]
    #[arg(long, env = "FLIGHTDECK_POSTGRES_WRITERS", global = true, value_name = "N")]
    pub postgres_writers: Option<usize>,

    /// Most spans one OTLP request may carry; a larger request is refused with 413 /
    /// RESOURCE_EXHAUSTED before it is decoded [default: 16384]
    #[arg(long, env = "FLIGHTDECK_MAX_SPANS_PER_REQUEST", global = true, value_name = "N")]
    pub max_spans_per_request: Option<usize>,

    /// Most attributes one span (or event, link, resource, scope) may carry; a request
    /// with more is refused before it is decoded [default: 1024]
    #[arg(long, env = "FLIGHTDECK_MAX_ATTRIBUTES_PER_SPAN", global = true, value_name = "N")]
    pub max_attributes_per_span: Option<usize>,

    /// Most events one span may carry [default: 1024]
    #[arg(long, env = "FLIGHTDECK_MAX_EVENTS_PER_SPAN", global = true, value_name = "N")]
    pub max_events_per_span: Option<usize>,

    /// Most links one span may carry [default: 1024]
    #[arg(long, env = "FLIGHTDECK_MAX_LINKS_PER_SPAN", global = true, value_name = "N")]
    pub max_links_per_span: Option<usize>,

    /// Largest single attribute value accepted; a span with a larger one is rejected
    /// [default: 262144]
    #[arg(long, env = "FLIGHTDECK_MAX_ATTRIBUTE_BYTES", global = true, value_name = "BYTES")]
    pub max_attribute_bytes: Option<usize>,

    /// Which bodies (prompts, tool arguments and results) to keep: none, failed_runs, all
    /// [default: failed_runs]
    #[arg(long, env = "FLIGHTDECK_BODY_POLICY", global = true, value_name = "POLICY")]
    pub body_policy: Option<BodyPolicy>,

    /// Days to keep the bodies of runs that did not complete [default: 7]
    #[arg(long, env = "FLIGHTDECK_BODY_RETENTION_DAYS", global = true, value_name = "DAYS")]
    pub body_retention_days: Option<u32>,

    /// Days to keep runs and their spans [default: 30]
    #[arg(long, env = "FLIGHTDECK_RETENTION_DAYS", global = true, value_name = "DAYS")]
    pub retention_days: Option<u32>,

    /// Extra secret patterns (regular expressions) to redact, beyond the built-in ones
    /// (config file only: `redact_patterns = ["..."]`)
    #[arg(skip)]
    #[serde(default)]
    pub redact_patterns: Option<Vec<String>>,

    /// Overrides of the attribute mapping table (config file only: a `[mapping]` table)
    #[arg(skip)]
    #[serde(default)]
    pub mapping: Option<MappingTable>,

    /// Tool policies loaded at start (config file only: `[[tool_policies]]` entries with
    /// `pattern` and `side_effect`)
    #[arg(skip)]
    #[serde(default)]
    pub tool_policies: Option<Vec<ToolPolicy>>,

    /// Model prices that extend or override the shipped table (config file only:
    /// `[[prices]]` entries with `pattern`, `valid_from`, `input`, `output` and optional
    /// `cache_read`, `cache_write`, `reasoning`, in dollars per million tokens)
    #[arg(skip)]
    #[serde(default)]
    pub prices: Option<Vec<ModelPrice>>,

    /// The address people reach Flightdeck at, for links in notifications
    /// [default: http://LISTEN]
    #[arg(long, env = "FLIGHTDECK_PUBLIC_URL", global = true, value_name = "URL")]
    pub public_url: Option<String>,

    /// Tries per webhook delivery before it is marked failed (backoff 1 s, 2 s, 4 s… up
    /// to 10 min between tries) [default: 15]
    #[arg(long, env = "FLIGHTDECK_WEBHOOK_MAX_ATTEMPTS", global = true, value_name = "N")]
    pub webhook_max_attempts: Option<u32>,

    /// Seconds between alert evaluations [default: 15]
    #[arg(long, env = "FLIGHTDECK_ALERT_INTERVAL_SECONDS", global = true, value_name = "SECONDS")]
    pub alert_interval_seconds: Option<u64>,

    /// Seconds an alert stays open after its rule stops breaching, so a value hovering at
    /// the limit does not fire and resolve over and over [default: 120]
    #[arg(long, env = "FLIGHTDECK_ALERT_HOLD_SECONDS", global = true, value_name = "SECONDS")]
    pub alert_hold_seconds: Option<u64>,

    /// Seconds between the safety-net re-reads of an approval long poll that no wake-up
    /// reached (wake-ups themselves are immediate) [default: 5]
    #[arg(long, env = "FLIGHTDECK_APPROVAL_RECHECK_SECONDS", global = true, value_name = "SECONDS")]
    pub approval_recheck_seconds: Option<u64>,

    /// The Slack app's signing secret: enables Approve / Deny buttons on approval messages
    /// (`POST /slack/interactivity` verifies every click with it)
    #[arg(long, env = "FLIGHTDECK_SLACK_SIGNING_SECRET", global = true, value_name = "SECRET", hide_env_values = true)]
    pub slack_signing_secret: Option<String>,

    /// Where Slack's `response_url` must point for Flightdeck to update a message
    /// [default: https://hooks.slack.com/]
    #[arg(long, env = "FLIGHTDECK_SLACK_RESPONSE_URL_PREFIX", global = true, value_name = "URL")]
    pub slack_response_url_prefix: Option<String>,

    /// Outgoing webhooks (config file only: `[[webhooks]]` entries with `name`, `url`,
    /// `format` = "json", "slack", "pagerduty", "alertmanager" or "alertmanager_api", and optionally `events`,
    /// `secret` (Standard Webhooks signing) and, for PagerDuty, `routing_key`)
    #[arg(skip)]
    #[serde(default)]
    pub webhooks: Option<Vec<WebhookTarget>>,

    /// Addresses or networks of the reverse proxies in front of Flightdeck, whose
    /// `X-Forwarded-For` / `Forwarded: for=` headers name the client for the sign-in
    /// backoff and the audit log (comma-separated; e.g. 10.0.0.0/8,192.0.2.7) [default:
    /// none: the headers are ignored and the connection's address counts]
    #[arg(long, env = "FLIGHTDECK_TRUSTED_PROXIES", global = true, value_name = "ADDRS", value_delimiter = ',')]
    pub trusted_proxies: Option<Vec<String>>,

    /// Where alerts go (config file only: `[[alert_routes]]` entries with `name`,
    /// `targets`, and optionally `rules` and `severities`; the first match decides)
    #[arg(skip)]
    #[serde(default)]
    pub alert_routes: Option<Vec<AlertRoute>>,

    /// MCP servers the gateway serves at `/mcp/{name}` (config file only:
    /// `[[mcp_servers]]` entries with `name` and either `url` (and optional `headers`)
    /// or `command` with `args` (and optional `env`))
    #[arg(skip)]
    #[serde(default)]
    pub mcp_servers: Option<Vec<McpServerConfig>>,
}

/// How OTLP exports authenticate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum IngestAuth {
    /// A bearer token with the `ingest` scope is required.
    Token,
    /// No authentication: for local development only.
    None,
}

impl Overrides {
    /// Fills every setting `self` leaves unset from `lower`.
    pub fn or(self, lower: Overrides) -> Overrides {
        Overrides {
            listen: self.listen.or(lower.listen),
            data_dir: self.data_dir.or(lower.data_dir),
            database_url: self.database_url.or(lower.database_url),
            site_root: self.site_root.or(lower.site_root),
            secure_cookies: self.secure_cookies.or(lower.secure_cookies),
            session_idle_minutes: self.session_idle_minutes.or(lower.session_idle_minutes),
            otlp_http_listen: self.otlp_http_listen.or(lower.otlp_http_listen),
            otlp_grpc_listen: self.otlp_grpc_listen.or(lower.otlp_grpc_listen),
            ingest_auth: self.ingest_auth.or(lower.ingest_auth),
            max_body_bytes: self.max_body_bytes.or(lower.max_body_bytes),
            ingest_queue_bytes: self.ingest_queue_bytes.or(lower.ingest_queue_bytes),
            postgres_writers: self.postgres_writers.or(lower.postgres_writers),
            max_attribute_bytes: self.max_attribute_bytes.or(lower.max_attribute_bytes),
            max_spans_per_request: self.max_spans_per_request.or(lower.max_spans_per_request),
            max_attributes_per_span: self.max_attributes_per_span.or(lower.max_attributes_per_span),
            max_events_per_span: self.max_events_per_span.or(lower.max_events_per_span),
            max_links_per_span: self.max_links_per_span.or(lower.max_links_per_span),
            body_policy: self.body_policy.or(lower.body_policy),
            body_retention_days: self.body_retention_days.or(lower.body_retention_days),
            retention_days: self.retention_days.or(lower.retention_days),
            redact_patterns: self.redact_patterns.or(lower.redact_patterns),
            mapping: self.mapping.or(lower.mapping),
            tool_policies: self.tool_policies.or(lower.tool_policies),
            prices: self.prices.or(lower.prices),
            public_url: self.public_url.or(lower.public_url),
            webhook_max_attempts: self.webhook_max_attempts.or(lower.webhook_max_attempts),
            webhooks: self.webhooks.or(lower.webhooks),
            alert_routes: self.alert_routes.or(lower.alert_routes),
            mcp_servers: self.mcp_servers.or(lower.mcp_servers),
            alert_interval_seconds: self.alert_interval_seconds.or(lower.alert_interval_seconds),
            alert_hold_seconds: self.alert_hold_seconds.or(lower.alert_hold_seconds),
            approval_recheck_seconds: self.approval_recheck_seconds.or(lower.approval_recheck_seconds),
            slack_signing_secret: self.slack_signing_secret.or(lower.slack_signing_secret),
            slack_response_url_prefix: self.slack_response_url_prefix.or(lower.slack_response_url_prefix),
            trusted_proxies: self.trusted_proxies.or(lower.trusted_proxies),
        }
    }

    /// Reads a TOML file whose keys are the long flag names with `_` for `-`.
    pub fn from_toml_file(path: &Path) -> anyhow::Result<Overrides> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("cannot read config file {}", path.display()))?;
        toml::from_str(&text).with_context(|| format!("invalid config file {}", path.display()))
    }
}

/// The settings in force, every one decided.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub listen: SocketAddr,
    pub data_dir: PathBuf,
    pub database_url: String,
    pub site_root: PathBuf,
    pub secure_cookies: bool,
    pub session_idle_minutes: u32,
    pub otlp_http_listen: SocketAddr,
    pub otlp_grpc_listen: SocketAddr,
    pub ingest_auth: IngestAuth,
    pub max_body_bytes: usize,
    pub ingest_queue_bytes: usize,
    pub postgres_writers: usize,
    pub max_attribute_bytes: usize,
    /// Spans per request, and attributes, events and links per span (the memory bound
    /// itself comes from `ingest_queue_bytes` when the service starts).
    pub decode_limits: DecodeLimits,
    pub body_policy: BodyPolicy,
    pub body_retention_days: u32,
    pub retention_days: u32,
    pub redact_patterns: Vec<String>,
    pub mapping: MappingTable,
    pub tool_policies: Vec<ToolPolicy>,
    pub prices: Vec<ModelPrice>,
    /// Without a trailing slash.
    pub public_url: String,
    pub webhook_max_attempts: u32,
    pub webhooks: Vec<WebhookTarget>,
    pub alert_routes: Vec<AlertRoute>,
    pub alert_interval_seconds: u64,
    pub alert_hold_seconds: u64,
    pub approval_recheck_seconds: u64,
    /// Never printed: the banner says only whether it is set.
    pub slack_signing_secret: Option<String>,
    pub slack_response_url_prefix: String,
    /// Served by the MCP gateway at `/mcp/{name}`.
    pub mcp_servers: Vec<McpServerConfig>,
    /// Whose forwarding headers are believed (none by default).
    pub trusted_proxies: TrustedProxies,
}

/// Writer tasks on PostgreSQL unless configured otherwise. One writer waits on each of
/// its commit's round trips to the database while exports queue; on a two-core machine
/// four writers ingest up to 17 % more than one (50,600 against 43,300 spans/s with 32
/// exports in flight), and two or eight no more than one (docs/benchmarks.md).
pub const DEFAULT_POSTGRES_WRITERS: usize = 4;

impl Config {
    /// The webhook targets and alert routes, as the pages, the API and the alert
    /// evaluator use them.
    pub fn notifications(&self) -> Notifications {
        Notifications { targets: self.webhooks.clone(), routes: self.alert_routes.clone() }
    }

    /// `flags_and_env` comes from clap (flags already beat the environment there);
    /// `file` is the optional config file.
    pub fn resolve(flags_and_env: Overrides, file: Option<&Path>) -> anyhow::Result<Config> {
        let from_file = match file {
            Some(path) => Overrides::from_toml_file(path)?,
            None => Overrides::default(),
        };
        let o = flags_and_env.or(from_file);
        let data_dir = o.data_dir.unwrap_or_else(|| PathBuf::from("data"));
        let database_url = o
            .database_url
            .filter(|u| !u.trim().is_empty())
            .unwrap_or_else(|| format!("sqlite://{}", data_dir.join("flightdeck.db").display()));
        let listen = o.listen.unwrap_or_else(|| "127.0.0.1:3000".parse().unwrap());
        let public_url = o.public_url.filter(|u| !u.trim().is_empty()).unwrap_or_else(|| format!("http://{listen}"));
        if !(public_url.starts_with("http://") || public_url.starts_with("https://")) {
            anyhow::bail!("public_url must start with http:// or https://, not `{public_url}`");
        }
        let webhooks = o.webhooks.unwrap_or_default();
        domain::notify::validate_targets(&webhooks).map_err(anyhow::Error::msg)?;
        let alert_routes = o.alert_routes.unwrap_or_default();
        Notifications { targets: webhooks.clone(), routes: alert_routes.clone() }
            .validate()
            .map_err(anyhow::Error::msg)?;
        domain::alerts::notification::validate_route_names(&alert_routes).map_err(anyhow::Error::msg)?;
        let webhook_max_attempts = o.webhook_max_attempts.unwrap_or(RetryPolicy::default().max_attempts);
        if webhook_max_attempts == 0 {
            anyhow::bail!("webhook_max_attempts must be at least 1");
        }
        let ingest_queue_bytes = o.ingest_queue_bytes.unwrap_or(64 * 1024 * 1024);
        if ingest_queue_bytes < 1024 * 1024 || u32::try_from(ingest_queue_bytes).is_err() {
            anyhow::bail!("ingest_queue_bytes must be between 1 MiB and 4 GiB, not {ingest_queue_bytes}");
        }
        let postgres_writers = o.postgres_writers.unwrap_or(DEFAULT_POSTGRES_WRITERS);
        if !(1..=16).contains(&postgres_writers) {
            anyhow::bail!("postgres_writers must be between 1 and 16, not {postgres_writers}");
        }
        let defaults = DecodeLimits::default();
        let decode_limits = DecodeLimits {
            max_spans: o.max_spans_per_request.unwrap_or(defaults.max_spans),
            max_attributes: o.max_attributes_per_span.unwrap_or(defaults.max_attributes),
            max_events: o.max_events_per_span.unwrap_or(defaults.max_events),
            max_links: o.max_links_per_span.unwrap_or(defaults.max_links),
            max_decoded_bytes: ingest_queue_bytes / 2,
        };
        if decode_limits.max_spans == 0 {
            anyhow::bail!("max_spans_per_request must be at least 1");
        }
        let approval_recheck_seconds = o.approval_recheck_seconds.unwrap_or(5);
        if approval_recheck_seconds == 0 {
            anyhow::bail!("approval_recheck_seconds must be at least 1");
        }
        let mcp_servers = o.mcp_servers.unwrap_or_default();
        validate_servers(&mcp_servers).map_err(anyhow::Error::msg)?;
        let alert_interval_seconds = o.alert_interval_seconds.unwrap_or(15);
        if alert_interval_seconds == 0 {
            anyhow::bail!("alert_interval_seconds must be at least 1");
        }
        let trusted_proxies =
            TrustedProxies::parse(&o.trusted_proxies.unwrap_or_default()).map_err(anyhow::Error::msg)?;
        Ok(Config {
            trusted_proxies,
            listen,
            data_dir,
            database_url,
            site_root: o.site_root.unwrap_or_else(|| PathBuf::from("target/site")),
            // Served over HTTPS (as the public URL says), a session cookie must never
            // travel over plain HTTP.
            secure_cookies: o.secure_cookies.unwrap_or(public_url.starts_with("https://")),
            session_idle_minutes: o.session_idle_minutes.unwrap_or(720),
            otlp_http_listen: o.otlp_http_listen.unwrap_or_else(|| "127.0.0.1:4318".parse().unwrap()),
            otlp_grpc_listen: o.otlp_grpc_listen.unwrap_or_else(|| "127.0.0.1:4317".parse().unwrap()),
            ingest_auth: o.ingest_auth.unwrap_or(IngestAuth::Token),
            max_body_bytes: o.max_body_bytes.unwrap_or(20 * 1024 * 1024),
            ingest_queue_bytes,
            postgres_writers,
            max_attribute_bytes: o.max_attribute_bytes.unwrap_or(256 * 1024),
            decode_limits,
            body_policy: o.body_policy.unwrap_or_default(),
            body_retention_days: o.body_retention_days.unwrap_or(7),
            retention_days: o.retention_days.unwrap_or(30),
            redact_patterns: o.redact_patterns.unwrap_or_default(),
            mapping: o.mapping.unwrap_or_default(),
            tool_policies: {
                let policies = o.tool_policies.unwrap_or_default();
                for p in &policies {
                    p.validate().map_err(|e| anyhow::anyhow!("[[tool_policies]] `{}`: {e}", p.pattern))?;
                }
                policies
            },
            prices: {
                let prices = o.prices.unwrap_or_default();
                for p in &prices {
                    p.validate().map_err(|e| anyhow::anyhow!("[[prices]] `{}`: {e}", p.pattern))?;
                }
                prices
            },
            public_url: public_url.trim_end_matches('/').to_string(),
            webhook_max_attempts,
            webhooks,
            alert_routes,
            alert_interval_seconds,
            alert_hold_seconds: o.alert_hold_seconds.unwrap_or(120),
            approval_recheck_seconds,
            slack_signing_secret: o.slack_signing_secret.filter(|s| !s.trim().is_empty()),
            slack_response_url_prefix: o
                .slack_response_url_prefix
                .unwrap_or_else(|| "https://hooks.slack.com/".to_string()),
            mcp_servers,
        })
    }

    /// Ingest settings from this configuration; fails on an invalid redaction pattern.
    pub fn ingest_settings(&self) -> anyhow::Result<IngestSettings> {
        Ok(IngestSettings {
            mapping: self.mapping.clone(),
            redactor: Redactor::new(&self.redact_patterns).map_err(anyhow::Error::msg)?,
            limits: Limits { max_attribute_bytes: self.max_attribute_bytes },
            decode: self.decode_limits,
            body_policy: self.body_policy,
        })
    }

    /// How webhook deliveries are retried.
    pub fn webhook_retry(&self) -> RetryPolicy {
        RetryPolicy { max_attempts: self.webhook_max_attempts, ..RetryPolicy::default() }
    }

    pub fn is_sqlite(&self) -> bool {
        self.database_url.starts_with("sqlite:")
    }

    /// The settings once the listeners are bound: a port 0 becomes the port the system
    /// picked, and a public URL that defaulted to the listen address follows it.
    pub fn bound_to(mut self, listen: SocketAddr, otlp_http: SocketAddr, otlp_grpc: SocketAddr) -> Config {
        if self.public_url == format!("http://{}", self.listen) {
            self.public_url = format!("http://{listen}");
        }
        self.listen = listen;
        self.otlp_http_listen = otlp_http;
        self.otlp_grpc_listen = otlp_grpc;
        self
    }
}

/// The database URL with any password replaced, for logs and the startup banner.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let Some((userinfo, host)) = rest.split_once('@') else {
        return url.to_string();
    };
    match userinfo.split_once(':') {
        Some((user, _password)) => format!("{scheme}://{user}:[REDACTED]@{host}"),
        None => url.to_string(),
    }
}

impl fmt::Display for Config {
    /// The startup banner: every setting, no secrets.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "  listen               {}", self.listen)?;
        writeln!(f, "  data_dir             {}", self.data_dir.display())?;
        writeln!(f, "  database_url         {}", redact_url(&self.database_url))?;
        writeln!(f, "  site_root            {}", self.site_root.display())?;
        writeln!(f, "  secure_cookies       {}", self.secure_cookies)?;
        writeln!(f, "  trusted_proxies      {}", self.trusted_proxies.describe())?;
        writeln!(f, "  session_idle_minutes {}", self.session_idle_minutes)?;
        writeln!(f, "  otlp_http_listen     {}", self.otlp_http_listen)?;
        writeln!(f, "  otlp_grpc_listen     {}", self.otlp_grpc_listen)?;
        writeln!(f, "  ingest_auth          {}", if self.ingest_auth == IngestAuth::Token { "token" } else { "none" })?;
        writeln!(f, "  max_body_bytes       {}", self.max_body_bytes)?;
        writeln!(f, "  ingest_queue_bytes   {}", self.ingest_queue_bytes)?;
        writeln!(f, "  postgres_writers     {}", self.postgres_writers)?;
        writeln!(f, "  max_attribute_bytes  {}", self.max_attribute_bytes)?;
        let d = &self.decode_limits;
        writeln!(f, "  max_spans_per_request {}", d.max_spans)?;
        writeln!(
            f,
            "  max_per_span         {} attributes, {} events, {} links",
            d.max_attributes, d.max_events, d.max_links
        )?;
        writeln!(f, "  body_policy          {}", self.body_policy.as_str())?;
        writeln!(f, "  body_retention_days  {}", self.body_retention_days)?;
        writeln!(f, "  retention_days       {}", self.retention_days)?;
        writeln!(f, "  redact_patterns      {}", self.redact_patterns.len())?;
        writeln!(
            f,
            "  mapping              {}",
            if self.mapping == MappingTable::default() { "default" } else { "customized" }
        )?;
        writeln!(f, "  tool_policies        {}", self.tool_policies.len())?;
        writeln!(f, "  prices               {} (besides the shipped table)", self.prices.len())?;
        writeln!(f, "  public_url           {}", self.public_url)?;
        writeln!(f, "  webhook_max_attempts {}", self.webhook_max_attempts)?;
        writeln!(f, "  alert_interval       {} s", self.alert_interval_seconds)?;
        writeln!(f, "  alert_hold           {} s", self.alert_hold_seconds)?;
        writeln!(f, "  approval_recheck     {} s", self.approval_recheck_seconds)?;
        let slack = if self.slack_signing_secret.is_some() { "on (signing secret set)" } else { "off" };
        writeln!(f, "  slack_buttons        {slack}")?;
        // Names only: webhook URLs often carry their secret in the path.
        let names: Vec<String> = self
            .webhooks
            .iter()
            .map(|w| match w.secret {
                Some(_) => w.name.clone(),
                None => format!("{} unsigned", w.name),
            })
            .collect();
        if names.is_empty() {
            writeln!(f, "  webhooks             0")?;
        } else {
            writeln!(f, "  webhooks             {} ({})", names.len(), names.join(", "))?;
        }
        // Names and where only: their headers and environment hold credentials.
        let servers: Vec<String> = self
            .mcp_servers
            .iter()
            .map(|s| match (&s.url, &s.command) {
                (Some(url), _) => format!("{} -> {}", s.name, redact_query(url)),
                (None, command) => format!("{} -> {}", s.name, command.as_deref().unwrap_or("")),
            })
            .collect();
        writeln!(
            f,
            "  mcp_servers          {}{}",
            servers.len(),
            if servers.is_empty() { String::new() } else { format!(" ({})", servers.join("; ")) }
        )?;
        let routes: Vec<String> =
            self.alert_routes.iter().map(|r| format!("{} -> {}", r.name, r.targets.join(" + "))).collect();
        if routes.is_empty() {
            write!(f, "  alert_routes         0 (page and ticket alerts go to every alert target)")
        } else {
            write!(f, "  alert_routes         {} ({})", routes.len(), routes.join("; "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn file(contents: &str) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(contents.as_bytes()).unwrap();
        f
    }

    #[test]
    fn defaults_apply_when_nothing_is_set() {
        let c = Config::resolve(Overrides::default(), None).unwrap();
        assert_eq!(c.listen, "127.0.0.1:3000".parse().unwrap());
        assert_eq!(c.data_dir, PathBuf::from("data"));
        assert_eq!(c.database_url, "sqlite://data/flightdeck.db");
        assert!(c.is_sqlite());
        assert!(!c.secure_cookies);
        let https = Overrides { public_url: Some("https://fd.example".into()), ..Default::default() };
        assert!(Config::resolve(https.clone(), None).unwrap().secure_cookies, "https public URL: Secure cookies");
        let forced = Overrides { secure_cookies: Some(false), ..https };
        assert!(!Config::resolve(forced, None).unwrap().secure_cookies, "an explicit setting wins");
    }

    #[test]
    fn flags_beat_file_and_file_beats_defaults() {
        let f = file("listen = \"0.0.0.0:8080\"\ndata_dir = \"/var/lib/fd\"\nsecure_cookies = true\n");
        let flags = Overrides { listen: Some("127.0.0.1:9999".parse().unwrap()), ..Default::default() };
        let c = Config::resolve(flags, Some(f.path())).unwrap();
        assert_eq!(c.listen, "127.0.0.1:9999".parse().unwrap(), "flag wins over file");
        assert_eq!(c.data_dir, PathBuf::from("/var/lib/fd"), "file wins over default");
        assert_eq!(c.database_url, "sqlite:///var/lib/fd/flightdeck.db", "derived from the data dir");
        assert!(c.secure_cookies);
    }

    #[test]
    fn unknown_or_mistyped_file_keys_are_clear_errors() {
        let f = file("lisen = \"0.0.0.0:8080\"\n");
        let err = format!("{:#}", Config::resolve(Overrides::default(), Some(f.path())).unwrap_err());
        assert!(err.contains("unknown field `lisen`"), "{err}");
        let f = file("listen = \"not an address\"\n");
        let err = format!("{:#}", Config::resolve(Overrides::default(), Some(f.path())).unwrap_err());
        assert!(err.contains("invalid config file") && err.contains("listen"), "{err}");
    }

    #[test]
    fn every_setting_is_in_the_banner_and_the_recheck_interval_is_one_of_them() {
        let c = Config::resolve(Overrides::default(), None).unwrap();
        assert_eq!(c.approval_recheck_seconds, 5);
        let banner = c.to_string();
        for name in ["listen", "database_url", "retention_days", "alert_hold", "approval_recheck     5 s", "webhooks"] {
            assert!(banner.contains(name), "{name} missing from {banner}");
        }
        let f = file("approval_recheck_seconds = 30\n");
        assert_eq!(Config::resolve(Overrides::default(), Some(f.path())).unwrap().approval_recheck_seconds, 30);
        let f = file("approval_recheck_seconds = 0\n");
        let err = format!("{:#}", Config::resolve(Overrides::default(), Some(f.path())).unwrap_err());
        assert!(err.contains("approval_recheck_seconds must be at least 1"), "{err}");
    }

    #[test]
    fn trusted_proxies_are_off_by_default_and_checked() {
        let c = Config::resolve(Overrides::default(), None).unwrap();
        assert!(c.trusted_proxies.is_empty());
        assert!(c.to_string().contains("trusted_proxies      off (forwarding headers ignored)"), "{c}");
        let f = file("trusted_proxies = [\"10.0.0.0/8\", \"192.0.2.7\"]\n");
        let c = Config::resolve(Overrides::default(), Some(f.path())).unwrap();
        assert!(c.trusted_proxies.trusts("10.1.2.3".parse().unwrap()));
        assert!(c.to_string().contains("trusted_proxies      10.0.0.0/8, 192.0.2.7"), "{c}");
        let flags = Overrides { trusted_proxies: Some(vec!["fd00::/8".into()]), ..Default::default() };
        let c = Config::resolve(flags, Some(f.path())).unwrap();
        assert!(!c.trusted_proxies.trusts("10.1.2.3".parse().unwrap()), "the flag replaces the file's list");
        let f = file("trusted_proxies = [\"proxy.internal\"]\n");
        let err = format!("{:#}", Config::resolve(Overrides::default(), Some(f.path())).unwrap_err());
        assert!(err.contains("trusted_proxies: `proxy.internal` is not an IP address"), "{err}");
    }

    #[test]
    fn postgres_writers_default_to_four_and_are_bounded() {
        let c = Config::resolve(Overrides::default(), None).unwrap();
        assert_eq!(c.postgres_writers, 4);
        assert!(c.to_string().contains("postgres_writers     4"), "{c}");
        let f = file("postgres_writers = 1\n");
        assert_eq!(Config::resolve(Overrides::default(), Some(f.path())).unwrap().postgres_writers, 1);
        for bad in [0, 17] {
            let f = file(&format!("postgres_writers = {bad}\n"));
            let err = format!("{:#}", Config::resolve(Overrides::default(), Some(f.path())).unwrap_err());
            assert!(err.contains("postgres_writers must be between 1 and 16"), "{err}");
        }
    }

    #[test]
    fn file_only_sections_configure_ingest() {
        let f = file(
            "body_policy = \"all\"\nredact_patterns = [\"ACME-[0-9]+\"]\n\
             [mapping]\nrun_id = [\"job.id\"]\n\
             [[tool_policies]]\npattern = \"send_*\"\nside_effect = \"irreversible\"\n",
        );
        let c = Config::resolve(Overrides::default(), Some(f.path())).unwrap();
        assert_eq!(c.body_policy, BodyPolicy::All);
        assert_eq!(c.mapping.run_id, vec!["job.id"]);
        assert_eq!(c.mapping.agent, MappingTable::default().agent);
        assert_eq!(c.tool_policies[0].pattern, "send_*");
        assert!(c.ingest_settings().is_ok());
        let f = file("redact_patterns = [\"(\"]\n");
        let c = Config::resolve(Overrides::default(), Some(f.path())).unwrap();
        assert!(c.ingest_settings().unwrap_err().to_string().contains("invalid redaction pattern"));
        // A policy from the file is checked like one saved on the admin page.
        let f = file("[[tool_policies]]\npattern = \"send_*\"\nside_effect = \"write\"\nrun_limit = 0\n");
        let err = format!("{:#}", Config::resolve(Overrides::default(), Some(f.path())).unwrap_err());
        assert!(err.contains("[[tool_policies]] `send_*`: per-run limit must be a whole number from 1"), "{err}");
        let f = file("[[tool_policies]]\npattern = \"x\"\nside_effect = \"unknown\"\n");
        let err = format!("{:#}", Config::resolve(Overrides::default(), Some(f.path())).unwrap_err());
        assert!(err.contains("choose the side effect"), "{err}");
    }

    #[test]
    fn webhooks_come_from_the_file_and_their_urls_never_reach_the_banner() {
        let f = file(
            "public_url = \"https://fd.example/\"\n\
             [[webhooks]]\nname = \"ops-slack\"\nurl = \"https://hooks.slack.com/services/T1/B2/s3cret\"\n\
             format = \"slack\"\nevents = [\"approval.requested\", \"alert.firing\"]\n\
             [[webhooks]]\nname = \"audit-sink\"\nurl = \"http://10.0.0.5:9000/hook\"\nformat = \"json\"\n\
             secret = \"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\"\n\
             [[webhooks]]\nname = \"pd\"\nurl = \"https://events.pagerduty.com/v2/enqueue\"\nformat = \"pagerduty\"\n\
             routing_key = \"R0UT1NGs3cret\"\nsecret = \"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\"\n\
             [[alert_routes]]\nname = \"page-now\"\nseverities = [\"page\"]\ntargets = [\"pd\", \"ops-slack\"]\n\
             [[alert_routes]]\nname = \"rest\"\ntargets = [\"ops-slack\"]\n",
        );
        let c = Config::resolve(Overrides::default(), Some(f.path())).unwrap();
        assert_eq!(c.public_url, "https://fd.example");
        assert_eq!(c.webhooks.len(), 3);
        assert!(c.webhooks[1].secret.is_some() && c.webhooks[0].secret.is_none());
        assert_eq!(c.notifications().route_of("deduped_spike", "page"), Some("page-now"));
        assert_eq!(c.webhooks[0].format, domain::notify::WebhookFormat::Slack);
        assert!(c.webhooks[0].wants(domain::notify::EventKind::AlertFiring));
        assert!(!c.webhooks[0].wants(domain::notify::EventKind::EscalationOpened));
        assert!(c.webhooks[1].events.is_none());
        assert_eq!(c.webhook_retry().max_attempts, 15);
        let banner = c.to_string();
        assert!(banner.contains("webhooks             3 (ops-slack unsigned, audit-sink, pd)"), "{banner}");
        assert!(banner.contains("alert_routes         2 (page-now -> pd + ops-slack; rest -> ops-slack)"), "{banner}");
        assert!(!banner.contains("s3cret") && !banner.contains("10.0.0.5") && !banner.contains("whsec"), "{banner}");
        let debug = format!("{:?}", c.webhooks);
        assert!(!debug.contains("s3cret") && !debug.contains("whsec"), "{debug}");

        let c = Config::resolve(Overrides::default(), None).unwrap();
        assert_eq!(c.public_url, "http://127.0.0.1:3000", "defaults to the listen address");
        assert!(c.to_string().contains("webhooks             0"));
    }

    #[test]
    fn port_zero_becomes_the_bound_port_and_a_defaulted_public_url_follows_it() {
        let picked: SocketAddr = "127.0.0.1:41234".parse().unwrap();
        let (http, grpc): (SocketAddr, SocketAddr) =
            ("127.0.0.1:41235".parse().unwrap(), "[::1]:41236".parse().unwrap());
        let any_port = Overrides { listen: Some("127.0.0.1:0".parse().unwrap()), ..Default::default() };
        let c = Config::resolve(any_port.clone(), None).unwrap().bound_to(picked, http, grpc);
        assert_eq!((c.listen, c.otlp_http_listen, c.otlp_grpc_listen), (picked, http, grpc));
        assert_eq!(c.public_url, "http://127.0.0.1:41234");

        let behind_a_proxy = Overrides { public_url: Some("https://fd.example".into()), ..any_port };
        let c = Config::resolve(behind_a_proxy, None).unwrap().bound_to(picked, http, grpc);
        assert_eq!(c.public_url, "https://fd.example", "a URL someone set is theirs");
    }

    #[test]
    fn webhook_mistakes_are_clear_errors() {
        let cases = [
            ("[[webhooks]]\nname = \"a\"\nurl = \"https://x.example\"\nformat = \"teams\"\n", "unknown variant `teams`"),
            ("[[webhooks]]\nname = \"a\"\nurl = \"https://x.example\"\nformat = \"json\"\nsecret = \"x\"\n", "starts with `whsec_`"),
            ("[[webhooks]]\nname = \"a\"\nurl = \"https://x.example\"\nformat = \"json\"\ntoken = \"x\"\n", "unknown field `token`"),
            ("[[webhooks]]\nname = \"a\"\nurl = \"https://x.example\"\nformat = \"pagerduty\"\n", "needs `routing_key`"),
            ("[[webhooks]]\nname = \"a\"\nurl = \"https://x.example\"\nformat = \"pagerduty\"\nrouting_key = \"k\"\nevents = [\"approval.requested\"]\n", "cannot take approval.requested"),
            ("[[webhooks]]\nname = \"a\"\nurl = \"https://x\"\nformat = \"json\"\n[[alert_routes]]\nname = \"r\"\ntargets = [\"b\"]\n", "not a [[webhooks]] target"),
            ("[[webhooks]]\nname = \"a\"\nurl = \"https://x\"\nformat = \"json\"\n[[alert_routes]]\nname = \"r\"\nseverities = [\"critical\"]\ntargets = [\"a\"]\n", "no severity `critical`"),
            ("[[webhooks]]\nname = \"a\"\nurl = \"https://x\"\nformat = \"json\"\n[[alert_routes]]\nname = \"r\"\nrules = [\"cost\"]\ntargets = [\"a\"]\n", "no rule `cost`"),
            ("[[webhooks]]\nname = \"a\"\nurl = \"https://x.example\"\nformat = \"json\"\nevents = [\"run.done\"]\n", "unknown variant `run.done`"),
            ("[[webhooks]]\nname = \"a\"\nurl = \"hooks.example\"\nformat = \"json\"\n", "https://"),
            ("[[webhooks]]\nname = \"a\"\nurl = \"https://x\"\nformat = \"json\"\n[[webhooks]]\nname = \"a\"\nurl = \"https://y\"\nformat = \"json\"\n", "unique"),
            ("public_url = \"fd.example\"\n", "public_url"),
        ];
        for (text, expected) in cases {
            let f = file(text);
            let err = format!("{:#}", Config::resolve(Overrides::default(), Some(f.path())).unwrap_err());
            assert!(err.contains(expected), "{text}: {err}");
        }
    }

    #[test]
    fn mcp_servers_come_from_the_file_without_their_secrets_in_the_banner() {
        let f = file(
            "[[mcp_servers]]\nname = \"files\"\ncommand = \"npx\"\nargs = [\"-y\", \"server-filesystem\"]\nenv = { TOKEN = \"s3cret\" }\n\
             [[mcp_servers]]\nname = \"remote\"\nurl = \"https://mcp.example/mcp?key=s3cret\"\nheaders = { Authorization = \"Bearer s3cret\" }\n",
        );
        let c = Config::resolve(Overrides::default(), Some(f.path())).unwrap();
        assert_eq!(c.mcp_servers.len(), 2);
        let banner = c.to_string();
        assert!(
            banner.contains("mcp_servers          2 (files -> npx; remote -> https://mcp.example/mcp)"),
            "{banner}"
        );
        assert!(!banner.contains("s3cret"), "{banner}");
        let f = file("[[mcp_servers]]\nname = \"a/b\"\ncommand = \"x\"\n");
        let err = format!("{:#}", Config::resolve(Overrides::default(), Some(f.path())).unwrap_err());
        assert!(err.contains("[[mcp_servers]] name `a/b`"), "{err}");
    }

    #[test]
    fn postgres_url_passwords_never_reach_the_banner() {
        let c = Config::resolve(
            Overrides { database_url: Some("postgres://fd:s3cret@db:5432/fd".into()), ..Default::default() },
            None,
        )
        .unwrap();
        let banner = c.to_string();
        assert!(!banner.contains("s3cret"), "{banner}");
        assert!(banner.contains("postgres://fd:[REDACTED]@db:5432/fd"));
        assert!(!c.is_sqlite());
    }
}

/// One `[[mcp_servers]]` entry: served by the MCP gateway at `/mcp/{name}`.
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
            .field("url", &self.url.as_deref().map(redact_query))
            .field("command", &self.command)
            .field("args", &self.args.len())
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("env", &self.env.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// A URL without its query (which may carry a key), for logs and the banner.
pub fn redact_query(url: &str) -> String {
    url.split('?').next().unwrap_or(url).to_string()
}

impl McpServerConfig {
    pub fn validate(&self) -> Result<(), String> {
        if !domain::mcp::valid_server_name(&self.name) {
            return Err(format!(
                "[[mcp_servers]] name `{}`: use 1 to 64 letters, digits, `-`, `_` or `.` (it is part of a URL and of tool names)",
                self.name
            ));
        }
        match (&self.url, &self.command) {
            (Some(url), None) if url.starts_with("http://") || url.starts_with("https://") => Ok(()),
            (Some(_), None) => {
                Err(format!("[[mcp_servers]] `{}`: `url` must start with http:// or https://", self.name))
            }
            (None, Some(c)) if !c.trim().is_empty() => Ok(()),
            _ => Err(format!(
                "[[mcp_servers]] `{}`: give either `url` (a remote server) or `command` (with `args`)",
                self.name
            )),
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
mod mcp_server_tests {
    use super::*;
    use std::collections::BTreeMap;

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
        assert!(validate_servers(&[server("files", None, Some("npx")), server("remote", Some("https://x/mcp"), None)])
            .is_ok());
        assert!(validate_servers(&[server("a/b", None, Some("x"))]).unwrap_err().contains("letters, digits"));
        assert!(validate_servers(&[server("a", Some("https://x"), Some("x"))]).unwrap_err().contains("either"));
        assert!(validate_servers(&[server("a", None, None)]).unwrap_err().contains("either"));
        assert!(validate_servers(&[server("a", Some("ftp://x"), None)]).unwrap_err().contains("http"));
        assert!(validate_servers(&[server("a", None, Some("x")), server("a", None, Some("y"))])
            .unwrap_err()
            .contains("unique"));
        assert!(!format!("{:?}", server("a", Some("https://x/mcp?key=s3cret"), None)).contains("s3cret"));
    }
}
