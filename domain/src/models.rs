//! Data types shared by the server and the browser: what server functions return and
//! the pages render. No behaviour beyond formatting lives here.

use crate::access::{Role, Scope};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// The signed-in user as every page and server function sees them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CurrentUser {
    pub id: i64,
    pub username: String,
    pub roles: Vec<Role>,
}

impl CurrentUser {
    pub fn can(&self, needed: Role) -> bool {
        crate::access::allows(&self.roles, needed)
    }
}

/// One account as listed on the admin page and by `flightdeck user list`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserSummary {
    pub id: i64,
    pub username: String,
    pub roles: Vec<Role>,
    pub created_at: DateTime<Utc>,
    /// Cannot sign in; every session ended when it was disabled.
    pub disabled: bool,
}

/// An agent API token without its secret, which is never stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenSummary {
    pub id: i64,
    pub name: String,
    /// The first characters of the secret, enough to recognise it in a config file.
    pub prefix: String,
    pub scopes: Vec<Scope>,
    pub created_at: DateTime<Utc>,
    pub created_by: Option<String>,
    pub last_used_at: Option<DateTime<Utc>>,
    pub revoked_at: Option<DateTime<Utc>>,
}

impl TokenSummary {
    pub fn is_active(&self) -> bool {
        self.revoked_at.is_none()
    }
}

/// One line of the audit log: who did what, when, from where.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditEntry {
    pub id: i64,
    pub at: DateTime<Utc>,
    /// The user (or `cli`, or a token name) that acted; `None` when nobody signed in did.
    pub actor: Option<String>,
    pub action: String,
    pub target: Option<String>,
    pub detail: Option<String>,
    pub source: Option<String>,
}

/// A secret shown exactly once after it was made (new token, generated password).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OneTimeSecret {
    /// What the secret is for, e.g. "API token ci-agent".
    pub label: String,
    pub secret: String,
}

/// The tokens page: the list and, right after creating one, its secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokensPage {
    pub tokens: Vec<TokenSummary>,
    pub new_secret: Option<OneTimeSecret>,
}

/// The users page: the list and, right after creating or resetting one, the password.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsersPage {
    pub users: Vec<UserSummary>,
    pub new_secret: Option<OneTimeSecret>,
    /// Slack user ids linked to usernames, for deciding from Slack's buttons.
    #[serde(default)]
    pub slack_links: Vec<(String, String)>,
}

/// A page of audit entries, newest first, with the cursor for the next page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditPage {
    pub entries: Vec<AuditEntry>,
    /// Pass as `before` to get the next (older) page.
    pub next_before: Option<i64>,
}

/// One tool policy as the admin page shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyRow {
    pub pattern: String,
    pub side_effect: String,
    pub requires_approval: bool,
    pub approver_role: String,
    pub expiry_seconds: Option<i64>,
    pub run_limit: Option<i64>,
    pub use_within_seconds: Option<i64>,
    /// Guarded calls: the volatile fields (comma-separated; empty = the default list),
    /// whether the key is run-wide, the already_done window and the call timeout.
    pub volatile_fields: String,
    pub run_wide_key: bool,
    pub ledger_window_seconds: Option<i64>,
    pub call_timeout_seconds: Option<i64>,
    /// The JSON Schema for edited arguments, pretty-printed.
    #[serde(default)]
    pub arguments_schema: Option<String>,
    /// `deny` or `escalate`.
    #[serde(default)]
    pub on_expiry: String,
    /// The MCP gateway forwards its calls when Flightdeck cannot be reached (read tools only).
    #[serde(default)]
    pub fail_open: bool,
}

/// One tool ingest has seen, as the admin's tools page shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolRow {
    pub name: String,
    pub calls: i64,
    pub runs: i64,
    pub first_seen: DateTime<Utc>,
    pub last_seen: DateTime<Utc>,
    /// The class the tool has now: a policy's, else what its spans declare; `None` for
    /// unclassified.
    pub class: Option<crate::canonical::SideEffect>,
    /// `policy <pattern>` or `declared by its spans`.
    pub class_from: Option<String>,
    /// A suggested class and why (from its name or MCP annotations), for unclassified tools.
    pub suggestion: Option<(crate::canonical::SideEffect, String)>,
}

/// The prices page: every price (shipped, config file, admin) and the latest recomputes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PricesPage {
    pub prices: Vec<crate::pricing::ModelPrice>,
    /// Models runs used in the last 30 days that no price matches.
    pub unpriced_models: Vec<String>,
    pub recomputes: Vec<AuditEntry>,
    /// The server's date (UTC), for the forms' defaults: the browser build has no clock
    /// that chrono can read.
    pub today: chrono::NaiveDate,
}

/// A configured webhook as admins see it: the URL without its secret part.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebhookTargetSummary {
    pub name: String,
    /// Scheme and host only (`https://hooks.slack.com/…`).
    pub url: String,
    /// `json` or `slack`.
    pub format: String,
    /// The event kinds it receives; empty means all.
    pub events: Vec<String>,
    /// Whether its deliveries carry a Standard Webhooks signature (a `secret` is set).
    pub signed: bool,
}

/// A configured alert route as admins see it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AlertRouteSummary {
    pub name: String,
    /// The rules it matches; empty means all.
    pub rules: Vec<String>,
    /// The severities it matches; empty means all.
    pub severities: Vec<String>,
    pub targets: Vec<String>,
}

/// One queued webhook delivery (one event to one target).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebhookDelivery {
    pub id: i64,
    pub created_at: DateTime<Utc>,
    /// e.g. `approval.requested`
    pub event_kind: String,
    pub title: String,
    pub target_name: String,
    /// `pending`, `delivered` or `failed`.
    pub status: String,
    pub attempts: i64,
    /// The HTTP status of the last try, if the receiver answered at all.
    pub last_status: Option<i64>,
    pub last_error: Option<String>,
    /// When a pending delivery is tried next.
    pub next_attempt_at: Option<DateTime<Utc>>,
    pub delivered_at: Option<DateTime<Utc>>,
}

impl WebhookDelivery {
    pub fn is_failed(&self) -> bool {
        self.status == "failed"
    }

    /// The receiver's last answer as people read it ("HTTP 503: down"), empty before the
    /// first try.
    pub fn last_answer(&self) -> String {
        match (self.last_status, &self.last_error) {
            (Some(code), Some(error)) => format!("HTTP {code}: {error}"),
            (Some(code), None) => format!("HTTP {code}"),
            (None, Some(error)) => error.clone(),
            (None, None) => String::new(),
        }
    }
}

/// The webhooks admin page: the configured targets and the newest deliveries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebhooksPage {
    pub targets: Vec<WebhookTargetSummary>,
    /// The alert routes in order; with none configured, one implicit `default` route
    /// (page and ticket alerts to every target that takes alerts).
    pub routes: Vec<AlertRouteSummary>,
    pub deliveries: Vec<WebhookDelivery>,
    pub pending: i64,
    pub failed: i64,
    /// Whether `deliveries` holds failures only.
    pub failed_only: bool,
}

/// The signed-in user, if any, as every component sees it (provided by the app shell).
#[derive(Debug, Clone)]
pub struct SessionUser(pub Option<CurrentUser>);
