//! Roles and the access rules every page, server function and API call is checked against.
//!
//! Pure and shared by both builds: the server enforces these rules, and the browser uses the
//! same table only to decide what to show.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// What a signed-in person may do. A user may hold several roles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Read everything.
    Viewer,
    /// Decide approval requests.
    Approver,
    /// Claim and resolve escalations, acknowledge alerts.
    Operator,
    /// Users, tokens, policies, alert rules, settings.
    Admin,
}

impl Role {
    pub const ALL: [Role; 4] = [Role::Viewer, Role::Approver, Role::Operator, Role::Admin];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Approver => "approver",
            Role::Operator => "operator",
            Role::Admin => "admin",
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Role::Viewer => "read everything",
            Role::Approver => "decide approval requests",
            Role::Operator => "claim and resolve escalations, acknowledge alerts",
            Role::Admin => "users, API tokens, policies, alert rules, settings",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Role {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Role::ALL
            .into_iter()
            .find(|r| r.as_str() == s.trim())
            .ok_or_else(|| format!("unknown role `{s}` (expected one of viewer, approver, operator, admin)"))
    }
}

/// Parses a comma-separated role list such as `"admin,approver"`, ignoring blanks and
/// duplicates; the result is sorted so storage and display are stable.
pub fn parse_roles(list: &str) -> Result<Vec<Role>, String> {
    let mut roles = Vec::new();
    for part in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let role: Role = part.parse()?;
        if !roles.contains(&role) {
            roles.push(role);
        }
    }
    roles.sort();
    Ok(roles)
}

/// The inverse of [`parse_roles`]: sorted and without duplicates, the one stored form.
pub fn format_roles(roles: &[Role]) -> String {
    let mut roles = roles.to_vec();
    roles.sort();
    roles.dedup();
    roles.iter().map(|r| r.as_str()).collect::<Vec<_>>().join(",")
}

/// Whether someone holding `held` may do what needs `needed`.
///
/// Every role includes `viewer`: anyone signed in may read. The other roles are
/// deliberately not implied by `admin`: deciding approvals and taking over runs are
/// separate duties, and an administrator who needs them is given them explicitly.
pub fn allows(held: &[Role], needed: Role) -> bool {
    match needed {
        Role::Viewer => !held.is_empty(),
        other => held.contains(&other),
    }
}

/// What a page path needs, as the server enforces on every page load and the browser
/// mirrors on client-side navigation. `None` means the page is public.
pub fn required_role_for_path(path: &str) -> Option<Role> {
    let path = path.split(['?', '#']).next().unwrap_or(path);
    if path == "/login" {
        None
    } else if path == "/admin" || path.starts_with("/admin/") {
        Some(Role::Admin)
    } else {
        Some(Role::Viewer)
    }
}

/// Scopes an agent API token can carry. A token only opens the endpoints of its scopes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// Send OTLP traces.
    Ingest,
    /// Request approvals and wait for decisions.
    Approvals,
    /// File and read escalations.
    Escalations,
    /// Read runs through the REST API.
    Read,
    /// Ask before a guarded call and report its outcome (the execution ledger).
    Calls,
    /// Silence alerts (and list silences) through the API.
    Alerts,
    /// Post results of regression tests run from replay fixtures.
    Replays,
    /// The MCP gateway: `flightdeck mcp proxy` asks, reports and records its spans with
    /// it, and `/mcp/{server}` admits an MCP client with it.
    Mcp,
}

impl Scope {
    pub const ALL: [Scope; 8] = [
        Scope::Ingest,
        Scope::Approvals,
        Scope::Escalations,
        Scope::Read,
        Scope::Calls,
        Scope::Alerts,
        Scope::Replays,
        Scope::Mcp,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Ingest => "ingest",
            Scope::Approvals => "approvals",
            Scope::Escalations => "escalations",
            Scope::Read => "read",
            Scope::Calls => "calls",
            Scope::Alerts => "alerts",
            Scope::Replays => "replays",
            Scope::Mcp => "mcp",
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Scope {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Scope::ALL
            .into_iter()
            .find(|r| r.as_str() == s.trim())
            .ok_or_else(|| format!("unknown scope `{s}` (expected one of ingest, approvals, escalations, read, calls, alerts, replays, mcp)"))
    }
}

/// Parses a comma-separated scope list; sorted and without duplicates.
pub fn parse_scopes(list: &str) -> Result<Vec<Scope>, String> {
    let mut scopes = Vec::new();
    for part in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let scope: Scope = part.parse()?;
        if !scopes.contains(&scope) {
            scopes.push(scope);
        }
    }
    scopes.sort();
    Ok(scopes)
}

/// The inverse of [`parse_scopes`]: sorted and without duplicates, the one stored form.
pub fn format_scopes(scopes: &[Scope]) -> String {
    let mut scopes = scopes.to_vec();
    scopes.sort();
    scopes.dedup();
    scopes.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(",")
}

/// Checks a username before it is stored: short, printable, no spaces.
pub fn validate_username(username: &str) -> Result<(), String> {
    let ok_chars = username.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '@'));
    if username.is_empty() || username.len() > 64 || !ok_chars {
        return Err(format!("invalid username `{username}`: use 1 to 64 letters, digits, or . - _ @"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_role_can_read_but_only_holders_act() {
        assert!(allows(&[Role::Approver], Role::Viewer));
        assert!(allows(&[Role::Viewer], Role::Viewer));
        assert!(!allows(&[], Role::Viewer));
        assert!(!allows(&[Role::Viewer], Role::Approver));
        assert!(allows(&[Role::Viewer, Role::Approver], Role::Approver));
    }

    #[test]
    fn admin_does_not_imply_approver_or_operator() {
        assert!(allows(&[Role::Admin], Role::Admin));
        assert!(!allows(&[Role::Admin], Role::Approver));
        assert!(!allows(&[Role::Admin], Role::Operator));
        assert!(!allows(&[Role::Operator], Role::Admin));
    }

    #[test]
    fn role_lists_round_trip_sorted_and_deduplicated() {
        let roles = parse_roles(" admin, viewer,admin ,,approver").unwrap();
        assert_eq!(roles, vec![Role::Viewer, Role::Approver, Role::Admin]);
        assert_eq!(format_roles(&roles), "viewer,approver,admin");
        assert_eq!(format_roles(&[Role::Admin, Role::Viewer, Role::Admin]), "viewer,admin");
        assert!(parse_roles("root").unwrap_err().contains("unknown role `root`"));
    }

    #[test]
    fn pages_need_the_role_of_their_area() {
        assert_eq!(required_role_for_path("/login"), None);
        assert_eq!(required_role_for_path("/login?next=/runs"), None);
        assert_eq!(required_role_for_path("/runs"), Some(Role::Viewer));
        assert_eq!(required_role_for_path("/"), Some(Role::Viewer));
        assert_eq!(required_role_for_path("/admin"), Some(Role::Admin));
        assert_eq!(required_role_for_path("/admin/tokens"), Some(Role::Admin));
        assert_eq!(required_role_for_path("/admin/webhooks?failed=1"), Some(Role::Admin));
        // a look-alike prefix is not the admin area
        assert_eq!(required_role_for_path("/administrivia"), Some(Role::Viewer));
    }

    #[test]
    fn scopes_parse_and_reject_unknown_names() {
        assert_eq!(parse_scopes("read,ingest").unwrap(), vec![Scope::Ingest, Scope::Read]);
        assert!(parse_scopes("write").unwrap_err().contains("unknown scope `write`"));
    }

    #[test]
    fn usernames_are_short_and_printable() {
        assert!(validate_username("ana.lopez@example").is_ok());
        for bad in ["", "two words", "tab\there", &"x".repeat(65), "emoji😀"] {
            let message = validate_username(bad).unwrap_err();
            assert!(message.contains("1 to 64 letters"), "{bad:?}: {message}");
        }
    }
}
