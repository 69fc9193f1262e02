//! Administration: users and roles, agent API tokens, tool policies, webhooks and the audit
//! log. Every function here requires the `admin` role and records what it changed in the
//! audit log.

use crate::errors::AppError;
use domain::models::{AuditPage, TokensPage, UsersPage, WebhooksPage};
use leptos::prelude::*;

/// Session slots for secrets shown once, one per page.
#[cfg(feature = "ssr")]
mod slots {
    pub const TOKENS: &str = "tokens";
    pub const USERS: &str = "users";
}

/// The roles whose checkboxes were ticked (a ticked box posts `Some("on")`).
#[cfg(feature = "ssr")]
fn ticked_roles(
    viewer: Option<String>,
    approver: Option<String>,
    operator: Option<String>,
    admin: Option<String>,
) -> Vec<domain::access::Role> {
    use domain::access::Role;
    [(viewer, Role::Viewer), (approver, Role::Approver), (operator, Role::Operator), (admin, Role::Admin)]
        .into_iter()
        .filter_map(|(ticked, role)| ticked.map(|_| role))
        .collect()
}

#[server(prefix = "/fn", endpoint = "load_tokens_page")]
pub async fn load_tokens_page() -> Result<TokensPage, AppError> {
    use super::ssr;
    use crate::auth::session;
    use store::tokens;
    ssr::require(domain::access::Role::Admin)?;
    let db = ssr::db()?;
    let new_secret = session::take_secret(&ssr::session()?, slots::TOKENS).await;
    Ok(TokensPage { tokens: tokens::list(&db).await?, new_secret })
}

/// Creates an agent API token with the ticked scopes; its secret is shown once on the
/// tokens page and only its hash is kept.
#[server(prefix = "/fn", endpoint = "create_token")]
pub async fn create_token(
    name: String,
    scope_ingest: Option<String>,
    scope_approvals: Option<String>,
    scope_escalations: Option<String>,
    scope_read: Option<String>,
    #[server(default)] scope_calls: Option<String>,
) -> Result<(), AppError> {
    use super::ssr;
    use crate::auth::secrets;
    use domain::access::{format_scopes, Role, Scope};
    use store::audit::action;
    use store::tokens;

    let admin = ssr::require(Role::Admin)?;
    let db = ssr::db()?;
    let scopes: Vec<Scope> = [
        (scope_ingest, Scope::Ingest),
        (scope_approvals, Scope::Approvals),
        (scope_escalations, Scope::Escalations),
        (scope_read, Scope::Read),
        (scope_calls, Scope::Calls),
    ]
    .into_iter()
    .filter_map(|(ticked, scope)| ticked.map(|_| scope))
    .collect();
    if let Err(message) = tokens::validate_name(&name) {
        return ssr::fail(AppError::Invalid(message));
    }
    if scopes.is_empty() {
        return ssr::fail(AppError::Invalid("tick at least one scope for the token".into()));
    }
    let (secret, prefix) = secrets::generate_token();
    let hash = secrets::sha256_hex(&secret);
    let new = tokens::NewToken {
        name: &name,
        prefix: &prefix,
        secret_sha256: &hash,
        scopes: &scopes,
        created_by: Some(&admin.username),
    };
    tokens::create(&db, new).await?;
    let detail = format!("scopes {}, prefix {prefix}", format_scopes(&scopes));
    ssr::audit(&db, &admin, action::TOKEN_CREATED, name.trim(), Some(&detail)).await?;
    ssr::show_once(slots::TOKENS, format!("API token {}", name.trim()), secret).await
}

#[server(prefix = "/fn", endpoint = "revoke_token")]
pub async fn revoke_token(id: i64) -> Result<(), AppError> {
    use super::ssr;
    use domain::access::Role;
    use store::audit::action;
    use store::tokens;

    let admin = ssr::require(Role::Admin)?;
    let db = ssr::db()?;
    let token = match tokens::revoke(&db, id).await {
        Ok(token) => token,
        Err(e) => return ssr::fail(e.into()),
    };
    let detail = format!("prefix {}", token.prefix);
    ssr::audit(&db, &admin, action::TOKEN_REVOKED, &token.name, Some(&detail)).await
}

#[server(prefix = "/fn", endpoint = "load_users_page")]
pub async fn load_users_page() -> Result<UsersPage, AppError> {
    use super::ssr;
    use crate::auth::session;
    use store::users;
    ssr::require(domain::access::Role::Admin)?;
    let db = ssr::db()?;
    let new_secret = session::take_secret(&ssr::session()?, slots::USERS).await;
    let slack_links = store::slack::list(&db).await?.into_iter().map(|l| (l.slack_user_id, l.username)).collect();
    Ok(UsersPage { users: users::list(&db).await?, new_secret, slack_links })
}

/// Links a Slack user id (`U…`, from the person's Slack profile → Copy member ID) to a
/// Flightdeck user: their clicks on Slack's Approve and Deny count as that user's, with
/// that user's roles.
#[server(prefix = "/fn", endpoint = "link_slack_user")]
pub async fn link_slack_user(slack_user_id: String, username: String) -> Result<(), AppError> {
    use super::ssr;
    use store::audit::action;
    use store::{slack, users};
    let admin = ssr::require(domain::access::Role::Admin)?;
    let db = ssr::db()?;
    let slack_user_id = slack_user_id.trim().to_string();
    let valid = (2..=32).contains(&slack_user_id.len()) && slack_user_id.chars().all(|c| c.is_ascii_alphanumeric());
    if !valid {
        return ssr::fail(AppError::Invalid(format!(
            "`{slack_user_id}` is not a Slack member id (letters and digits, like U024BE7LH)"
        )));
    }
    if users::by_username(&db, username.trim()).await?.is_none() {
        return ssr::fail(AppError::NotFound(format!("user `{}`", username.trim())));
    }
    slack::link(&db, &slack_user_id, username.trim(), &admin.username).await?;
    let detail = format!("Slack {slack_user_id} is {}", username.trim());
    ssr::audit(&db, &admin, action::SLACK_USER_LINKED, username.trim(), Some(&detail)).await
}

#[server(prefix = "/fn", endpoint = "unlink_slack_user")]
pub async fn unlink_slack_user(slack_user_id: String) -> Result<(), AppError> {
    use super::ssr;
    use store::audit::action;
    let admin = ssr::require(domain::access::Role::Admin)?;
    let db = ssr::db()?;
    if !store::slack::unlink(&db, slack_user_id.trim()).await? {
        return ssr::fail(AppError::NotFound(format!("Slack link `{slack_user_id}`")));
    }
    ssr::audit(&db, &admin, action::SLACK_USER_UNLINKED, slack_user_id.trim(), None).await
}

/// Creates a user with the ticked roles (viewer when none) and a generated password,
/// shown once.
#[server(prefix = "/fn", endpoint = "create_user")]
pub async fn create_user(
    username: String,
    role_viewer: Option<String>,
    role_approver: Option<String>,
    role_operator: Option<String>,
    role_admin: Option<String>,
) -> Result<(), AppError> {
    use super::ssr;
    use domain::access::{format_roles, Role};
    use store::audit::action;
    use store::users;

    let admin = ssr::require(Role::Admin)?;
    let db = ssr::db()?;
    let username = username.trim().to_string();
    if let Err(message) = domain::access::validate_username(&username) {
        return ssr::fail(AppError::Invalid(message));
    }
    let mut roles = ticked_roles(role_viewer, role_approver, role_operator, role_admin);
    if roles.is_empty() {
        roles.push(Role::Viewer);
    }
    let (secret, hash) = ssr::generated_password().await?;
    if let Err(e) = users::create(&db, &username, &hash, &roles).await {
        return ssr::fail(e.into());
    }
    let detail = format!("roles {}", format_roles(&roles));
    ssr::audit(&db, &admin, action::USER_CREATED, &username, Some(&detail)).await?;
    ssr::show_once(slots::USERS, format!("password for {username}"), secret).await
}

/// Replaces a user's password with a generated one (shown once) and signs them out
/// everywhere.
#[server(prefix = "/fn", endpoint = "reset_password")]
pub async fn reset_password(username: String) -> Result<(), AppError> {
    use super::ssr;
    use domain::access::Role;
    use store::audit::action;
    use store::users;

    let admin = ssr::require(Role::Admin)?;
    let db = ssr::db()?;
    let (secret, hash) = ssr::generated_password().await?;
    if let Err(e) = users::set_password(&db, &username, &hash).await {
        return ssr::fail(e.into());
    }
    ssr::audit(&db, &admin, action::USER_PASSWORD_RESET, &username, None).await?;
    ssr::show_once(slots::USERS, format!("new password for {username}"), secret).await
}

/// Replaces a user's roles. The last administrator cannot drop `admin`, so the console
/// can never lock itself out.
#[server(prefix = "/fn", endpoint = "set_roles")]
pub async fn set_roles(
    username: String,
    role_viewer: Option<String>,
    role_approver: Option<String>,
    role_operator: Option<String>,
    role_admin: Option<String>,
) -> Result<(), AppError> {
    use super::ssr;
    use domain::access::{format_roles, Role};
    use store::audit::action;
    use store::users;

    let admin = ssr::require(Role::Admin)?;
    let db = ssr::db()?;
    let roles = ticked_roles(role_viewer, role_approver, role_operator, role_admin);
    if roles.is_empty() {
        return ssr::fail(AppError::Invalid("a user needs at least one role".into()));
    }
    let Some(target) = users::by_username(&db, &username).await? else {
        return ssr::fail(AppError::NotFound(format!("user `{username}`")));
    };
    let drops_admin = target.roles().contains(&Role::Admin) && !roles.contains(&Role::Admin);
    if drops_admin && users::count_admins(&db).await? <= 1 {
        return ssr::fail(AppError::Conflict(format!(
            "`{username}` is the last administrator; give another user the admin role first"
        )));
    }
    users::set_roles(&db, &username, &roles).await?;
    let detail = format!("roles {}", format_roles(&roles));
    ssr::audit(&db, &admin, action::USER_ROLES_CHANGED, &username, Some(&detail)).await
}

/// Disables a user (ending all their sessions at once) or enables them again. An
/// administrator cannot disable themselves or the last enabled administrator.
#[server(prefix = "/fn", endpoint = "set_user_disabled")]
pub async fn set_user_disabled(username: String, disabled: bool) -> Result<(), AppError> {
    use super::ssr;
    use domain::access::Role;
    use store::audit::action;
    use store::users;

    let admin = ssr::require(Role::Admin)?;
    let db = ssr::db()?;
    let Some(target) = users::by_username(&db, &username).await? else {
        return ssr::fail(AppError::NotFound(format!("user `{username}`")));
    };
    if disabled && target.id == admin.id {
        return ssr::fail(AppError::Conflict("you cannot disable your own account".into()));
    }
    let is_enabled_admin = target.roles().contains(&Role::Admin) && !target.is_disabled();
    if disabled && is_enabled_admin && users::count_admins(&db).await? <= 1 {
        return ssr::fail(AppError::Conflict(format!(
            "`{username}` is the last enabled administrator; give another user the admin role first"
        )));
    }
    users::set_disabled(&db, &username, disabled).await?;
    let what = if disabled { action::USER_DISABLED } else { action::USER_ENABLED };
    ssr::audit(&db, &admin, what, &username, None).await
}

/// A page of the audit log, newest first.
#[server(prefix = "/fn", endpoint = "load_audit_page")]
pub async fn load_audit_page(before: Option<i64>, action: Option<String>) -> Result<AuditPage, AppError> {
    use super::ssr;
    use store::audit;
    ssr::require(domain::access::Role::Admin)?;
    let db = ssr::db()?;
    let action = action.filter(|a| !a.is_empty());
    Ok(audit::list(&db, before, action.as_deref(), 50).await?)
}

/// The tool policies, exact names first would be confusing here: listed by pattern.
#[server(prefix = "/fn", endpoint = "load_policies")]
pub async fn load_policies() -> Result<Vec<domain::models::PolicyRow>, AppError> {
    use super::ssr;
    use store::policies;
    ssr::require(domain::access::Role::Admin)?;
    let list = policies::list(&ssr::db()?).await?;
    Ok(list
        .into_iter()
        .map(|p| domain::models::PolicyRow {
            pattern: p.pattern,
            side_effect: p.side_effect.to_string(),
            requires_approval: p.requires_approval,
            approver_role: p.approver_role.to_string(),
            expiry_seconds: p.expiry_seconds,
            run_limit: p.run_limit,
            use_within_seconds: p.use_within_seconds,
            volatile_fields: p.volatile_fields.map(|f| f.join(", ")).unwrap_or_default(),
            run_wide_key: p.run_wide_key,
            ledger_window_seconds: p.ledger_window_seconds,
            call_timeout_seconds: p.call_timeout_seconds,
            arguments_schema: p.arguments_schema.map(|s| serde_json::to_string_pretty(&s).unwrap_or_default()),
            on_expiry: p.on_expiry.as_str().to_string(),
            fail_open: p.fail_open,
        })
        .collect())
}

/// Creates or replaces the policy for a tool name pattern. Ingest picks it up within
/// seconds: the side-effect class for spans that do not declare their own, and the
/// approval rules for every execution. Optional numbers arrive as text from the form
/// (empty = none); `requires_approval` is a checkbox (present = on).
#[server(prefix = "/fn", endpoint = "save_policy")]
pub async fn save_policy(
    pattern: String,
    side_effect: String,
    #[server(default)] requires_approval: Option<String>,
    #[server(default)] approver_role: Option<String>,
    #[server(default)] expiry_seconds: Option<String>,
    #[server(default)] run_limit: Option<String>,
    #[server(default)] use_within_seconds: Option<String>,
    #[server(default)] volatile_fields: Option<String>,
    #[server(default)] run_wide_key: Option<String>,
    #[server(default)] ledger_window_seconds: Option<String>,
    #[server(default)] call_timeout_seconds: Option<String>,
    #[server(default)] arguments_schema: Option<String>,
    #[server(default)] on_expiry: Option<String>,
    #[server(default)] fail_open: Option<String>,
) -> Result<(), AppError> {
    use super::ssr;
    use domain::canonical::SideEffect;
    use domain::policy::ToolPolicy;
    use store::audit::action;
    use store::policies;

    let admin = ssr::require(domain::access::Role::Admin)?;
    let db = ssr::db()?;
    let pattern = pattern.trim().to_string();
    let side_effect = match side_effect.trim() {
        "" => SideEffect::Unknown,
        text => match SideEffect::parse(text).filter(|s| *s != SideEffect::Unknown) {
            Some(class) => class,
            None => {
                return ssr::fail(AppError::Invalid(format!(
                    "unknown side effect `{text}` (expected none, read, write or irreversible)"
                )))
            }
        },
    };
    let approver_role = match approver_role.as_deref().map(str::trim).filter(|r| !r.is_empty()) {
        None => domain::access::Role::Approver,
        Some(role) => match role.parse() {
            Ok(role) => role,
            Err(e) => return ssr::fail(AppError::Invalid(e)),
        },
    };
    // The form sends text; the ranges are the policy's own rule (`ToolPolicy::validate`).
    let number = |field: &str, text: Option<String>| -> Result<Option<i64>, AppError> {
        match text.as_deref().map(str::trim).filter(|t| !t.is_empty()) {
            None => Ok(None),
            Some(t) => t
                .parse::<i64>()
                .map(Some)
                .map_err(|_| AppError::Invalid(format!("{field} must be a whole number, got `{t}`"))),
        }
    };
    let numbers = (|| {
        Ok::<_, AppError>((
            number("expiry (seconds)", expiry_seconds)?,
            number("per-run limit", run_limit)?,
            number("use within (seconds)", use_within_seconds)?,
            number("ledger window (seconds)", ledger_window_seconds)?,
            number("call timeout (seconds)", call_timeout_seconds)?,
        ))
    })();
    let (expiry_seconds, run_limit, use_within_seconds, ledger_window_seconds, call_timeout_seconds) = match numbers {
        Ok(n) => n,
        Err(e) => return ssr::fail(e),
    };
    let policy = ToolPolicy {
        pattern: pattern.clone(),
        side_effect,
        requires_approval: requires_approval.is_some_and(|v| !v.is_empty() && v != "false"),
        approver_role,
        expiry_seconds,
        run_limit,
        use_within_seconds,
        // Comma-separated argument names; empty keeps the default list.
        volatile_fields: volatile_fields
            .map(|text| text.split(',').map(|f| f.trim().to_string()).filter(|f| !f.is_empty()).collect::<Vec<_>>())
            .filter(|fields| !fields.is_empty()),
        run_wide_key: run_wide_key.is_some_and(|v| !v.is_empty() && v != "false"),
        ledger_window_seconds,
        call_timeout_seconds,
        arguments_schema: match arguments_schema.as_deref().map(str::trim).filter(|t| !t.is_empty()) {
            None => None,
            Some(text) => match serde_json::from_str(text) {
                Ok(schema) => Some(schema),
                Err(e) => return ssr::fail(AppError::Invalid(format!("arguments schema is not JSON: {e}"))),
            },
        },
        on_expiry: match on_expiry.as_deref().map(str::trim).filter(|t| !t.is_empty()) {
            None => domain::approvals::OnExpiry::Deny,
            Some(text) => match domain::approvals::OnExpiry::parse(text) {
                Some(on) => on,
                None => {
                    return ssr::fail(AppError::Invalid(format!("on expiry must be deny or escalate, got `{text}`")))
                }
            },
        },
        fail_open: fail_open.is_some_and(|v| !v.is_empty() && v != "false"),
    };
    if let Err(why) = policy.validate() {
        return ssr::fail(AppError::Invalid(why));
    }
    policies::upsert(&db, &policy).await?;
    let detail = format!(
        "side effect {side_effect}; requires approval {}; approver role {approver_role}; expiry {}; per-run limit {}",
        policy.requires_approval,
        expiry_seconds.map(|s| format!("{s}s")).unwrap_or_else(|| "default".into()),
        run_limit.map(|n| n.to_string()).unwrap_or_else(|| "none".into()),
    );
    ssr::audit(&db, &admin, action::POLICY_SAVED, &pattern, Some(&detail)).await?;
    recompute_tools_matching(&db, &admin.username, &pattern).await
}

/// After a policy changed: recompute the stored runs that called a tool it matches, so
/// their duplicate and no-read flags follow the new class.
#[cfg(feature = "ssr")]
async fn recompute_tools_matching(db: &store::Db, actor: &str, pattern: &str) -> Result<(), AppError> {
    use domain::policy::glob_matches;
    use store::{recompute::Scope, tools};
    let matching: Vec<String> =
        tools::list(db, 100_000).await?.into_iter().map(|t| t.tool_name).filter(|t| glob_matches(pattern, t)).collect();
    if matching.is_empty() {
        super::ssr::state()?.rules.refresh(db).await?;
        return Ok(());
    }
    let scope = Scope { tools: Some(matching), ..Scope::default() };
    super::catalog::recompute_in_background(actor.to_string(), scope, format!("policy {pattern}")).await
}

#[server(prefix = "/fn", endpoint = "delete_policy")]
pub async fn delete_policy(pattern: String) -> Result<(), AppError> {
    use super::ssr;
    use store::audit::action;
    use store::policies;

    let admin = ssr::require(domain::access::Role::Admin)?;
    let db = ssr::db()?;
    if !policies::delete(&db, &pattern).await? {
        return ssr::fail(AppError::NotFound(format!("tool policy `{pattern}`")));
    }
    ssr::audit(&db, &admin, action::POLICY_DELETED, &pattern, None).await?;
    recompute_tools_matching(&db, &admin.username, &pattern).await
}

/// The configured webhooks (URLs without their secret part) and the newest 100 deliveries,
/// or only the failed ones.
#[server(prefix = "/fn", endpoint = "load_webhooks_page")]
pub async fn load_webhooks_page(failed_only: bool) -> Result<WebhooksPage, AppError> {
    use super::ssr;
    use domain::models::WebhookTargetSummary;
    use domain::notify::redact_webhook_url;
    use store::webhooks::{self, status};
    ssr::require(domain::access::Role::Admin)?;
    let db = ssr::db()?;
    let configured = ssr::state()?.notifications;
    let targets = configured
        .targets
        .iter()
        .map(|t| WebhookTargetSummary {
            name: t.name.clone(),
            url: redact_webhook_url(&t.url),
            format: t.format.as_str().to_string(),
            events: t.events.iter().flatten().map(|k| k.as_str().to_string()).collect(),
            signed: t.secret.is_some(),
        })
        .collect();
    let routes = match configured.routes.is_empty() {
        true => vec![domain::models::AlertRouteSummary {
            name: domain::notify::routes::IMPLICIT_DEFAULT.into(),
            rules: Vec::new(),
            severities: vec!["page".into(), "ticket".into()],
            targets: configured.for_event(domain::notify::EventKind::AlertFiring).into_iter().map(|t| t.name).collect(),
        }],
        false => configured
            .routes
            .iter()
            .map(|r| domain::models::AlertRouteSummary {
                name: r.name.clone(),
                rules: r.rules.clone().unwrap_or_default(),
                severities: r.severities.clone().unwrap_or_default(),
                targets: r.targets.clone(),
            })
            .collect(),
    };
    Ok(WebhooksPage {
        targets,
        routes,
        deliveries: webhooks::list(&db, failed_only, 100).await?,
        pending: webhooks::count(&db, status::PENDING).await?,
        failed: webhooks::count(&db, status::FAILED).await?,
        failed_only,
    })
}

/// Sends a test alert to every target of the alert route `route` (firing, then
/// resolved); the deliveries appear in the list below it. Audited.
#[server(prefix = "/fn", endpoint = "send_test_alert")]
pub async fn send_test_alert(route: String) -> Result<String, AppError> {
    use super::ssr;
    let admin = ssr::require(domain::access::Role::Admin)?;
    let state = ssr::state()?;
    match crate::services::alert_test::queue(&state.db, &state.notifications, &route).await? {
        Ok(queued) => {
            let action = store::audit::action::ALERT_ROUTE_TESTED;
            ssr::audit(&state.db, &admin, action, &route, Some(&queued.alert_id)).await?;
            Ok(format!(
                "Queued test {} to the route `{route}`: {} deliveries (firing, then resolved). Reload to see their answers.",
                queued.alert_id, queued.deliveries
            ))
        }
        Err(why) => ssr::fail(AppError::Invalid(why)),
    }
}
