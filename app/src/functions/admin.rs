//! Administration: users and roles, agent API tokens, and the audit log. Every function
//! here requires the `admin` role and records what it changed in the audit log.

use crate::errors::AppError;
use crate::models::{AuditPage, TokensPage, UsersPage};
use leptos::prelude::*;

/// Session slots for secrets shown once, one per page.
#[cfg(feature = "ssr")]
mod slots {
    pub const TOKENS: &str = "tokens";
    pub const USERS: &str = "users";
}

#[cfg(feature = "ssr")]
/// Collects ticked checkboxes (`Some("on")`) into the values they stand for.
fn ticked<T: Copy>(boxes: &[(Option<String>, T)]) -> Vec<T> {
    boxes.iter().filter(|(b, _)| b.is_some()).map(|(_, v)| *v).collect()
}

#[server(prefix = "/fn", endpoint = "load_tokens_page")]
pub async fn load_tokens_page() -> Result<TokensPage, AppError> {
    use super::ssr;
    use crate::auth::session;
    use crate::storage::tokens;
    ssr::require(crate::access::Role::Admin)?;
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
) -> Result<(), AppError> {
    use super::ssr;
    use crate::access::{format_scopes, Role, Scope};
    use crate::auth::{secrets, session};
    use crate::models::OneTimeSecret;
    use crate::storage::audit::{self, action, NewEntry};
    use crate::storage::tokens;

    let admin = ssr::require(Role::Admin)?;
    let db = ssr::db()?;
    let scopes = ticked(&[
        (scope_ingest, Scope::Ingest),
        (scope_approvals, Scope::Approvals),
        (scope_escalations, Scope::Escalations),
        (scope_read, Scope::Read),
    ]);
    if let Err(message) = tokens::validate_name(&name) {
        return ssr::fail(AppError::Invalid(message));
    }
    if scopes.is_empty() {
        return ssr::fail(AppError::Invalid("tick at least one scope for the token".into()));
    }
    let (secret, prefix) = secrets::generate_token();
    let hash = secrets::sha256_hex(&secret);
    tokens::create(
        &db,
        tokens::NewToken {
            name: &name,
            prefix: &prefix,
            secret_sha256: &hash,
            scopes: &scopes,
            created_by: Some(&admin.username),
        },
    )
    .await?;
    audit::record(
        &db,
        NewEntry {
            actor: Some(&admin.username),
            action: action::TOKEN_CREATED,
            target: Some(name.trim()),
            detail: Some(&format!("scopes {}, prefix {prefix}", format_scopes(&scopes))),
            source: ssr::source().as_deref(),
        },
    )
    .await?;
    let label = format!("API token {}", name.trim());
    session::stash_secret(&ssr::session()?, slots::TOKENS, OneTimeSecret { label, secret })
        .await
        .map_err(|_| AppError::Internal)?;
    Ok(())
}

#[server(prefix = "/fn", endpoint = "revoke_token")]
pub async fn revoke_token(id: i64) -> Result<(), AppError> {
    use super::ssr;
    use crate::access::Role;
    use crate::storage::audit::{self, action, NewEntry};
    use crate::storage::tokens;

    let admin = ssr::require(Role::Admin)?;
    let db = ssr::db()?;
    let token = match tokens::revoke(&db, id).await {
        Ok(token) => token,
        Err(e) => return ssr::fail(e.into()),
    };
    audit::record(
        &db,
        NewEntry {
            actor: Some(&admin.username),
            action: action::TOKEN_REVOKED,
            target: Some(&token.name),
            detail: Some(&format!("prefix {}", token.prefix)),
            source: ssr::source().as_deref(),
        },
    )
    .await?;
    Ok(())
}

#[server(prefix = "/fn", endpoint = "load_users_page")]
pub async fn load_users_page() -> Result<UsersPage, AppError> {
    use super::ssr;
    use crate::auth::session;
    use crate::storage::users;
    ssr::require(crate::access::Role::Admin)?;
    let db = ssr::db()?;
    let new_secret = session::take_secret(&ssr::session()?, slots::USERS).await;
    Ok(UsersPage { users: users::list(&db).await?, new_secret })
}

/// Creates a user with the ticked roles and a generated password, shown once.
#[server(prefix = "/fn", endpoint = "create_user")]
pub async fn create_user(
    username: String,
    role_viewer: Option<String>,
    role_approver: Option<String>,
    role_operator: Option<String>,
    role_admin: Option<String>,
) -> Result<(), AppError> {
    use super::ssr;
    use crate::access::{format_roles, Role};
    use crate::auth::{password, session};
    use crate::models::OneTimeSecret;
    use crate::storage::audit::{self, action, NewEntry};
    use crate::storage::users;

    let admin = ssr::require(Role::Admin)?;
    let db = ssr::db()?;
    let username = username.trim().to_string();
    if let Err(message) = users::validate_username(&username) {
        return ssr::fail(AppError::Invalid(message));
    }
    let mut roles = ticked(&[
        (role_viewer, Role::Viewer),
        (role_approver, Role::Approver),
        (role_operator, Role::Operator),
        (role_admin, Role::Admin),
    ]);
    if roles.is_empty() {
        roles.push(Role::Viewer);
    }
    let secret = password::generate();
    let for_hash = secret.clone();
    let hash = tokio::task::spawn_blocking(move || password::hash(&for_hash)).await.map_err(|_| AppError::Internal)?;
    if let Err(e) = users::create(&db, &username, &hash, &roles).await {
        return ssr::fail(e.into());
    }
    audit::record(
        &db,
        NewEntry {
            actor: Some(&admin.username),
            action: action::USER_CREATED,
            target: Some(&username),
            detail: Some(&format!("roles {}", format_roles(&roles))),
            source: ssr::source().as_deref(),
        },
    )
    .await?;
    let label = format!("password for {username}");
    session::stash_secret(&ssr::session()?, slots::USERS, OneTimeSecret { label, secret })
        .await
        .map_err(|_| AppError::Internal)?;
    Ok(())
}

/// Replaces a user's password with a generated one (shown once) and signs them out
/// everywhere.
#[server(prefix = "/fn", endpoint = "reset_password")]
pub async fn reset_password(username: String) -> Result<(), AppError> {
    use super::ssr;
    use crate::access::Role;
    use crate::auth::{password, session};
    use crate::models::OneTimeSecret;
    use crate::storage::audit::{self, action, NewEntry};
    use crate::storage::users;

    let admin = ssr::require(Role::Admin)?;
    let db = ssr::db()?;
    let secret = password::generate();
    let for_hash = secret.clone();
    let hash = tokio::task::spawn_blocking(move || password::hash(&for_hash)).await.map_err(|_| AppError::Internal)?;
    if let Err(e) = users::set_password(&db, &username, &hash).await {
        return ssr::fail(e.into());
    }
    audit::record(
        &db,
        NewEntry {
            actor: Some(&admin.username),
            action: action::USER_PASSWORD_RESET,
            target: Some(&username),
            source: ssr::source().as_deref(),
            ..Default::default()
        },
    )
    .await?;
    let label = format!("new password for {username}");
    session::stash_secret(&ssr::session()?, slots::USERS, OneTimeSecret { label, secret })
        .await
        .map_err(|_| AppError::Internal)?;
    Ok(())
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
    use crate::access::{format_roles, Role};
    use crate::storage::audit::{self, action, NewEntry};
    use crate::storage::users;

    let admin = ssr::require(Role::Admin)?;
    let db = ssr::db()?;
    let roles = ticked(&[
        (role_viewer, Role::Viewer),
        (role_approver, Role::Approver),
        (role_operator, Role::Operator),
        (role_admin, Role::Admin),
    ]);
    if roles.is_empty() {
        return ssr::fail(AppError::Invalid("a user needs at least one role".into()));
    }
    let Some(target) = users::by_username(&db, &username).await? else {
        return ssr::fail(AppError::NotFound(format!("user `{username}`")));
    };
    if target.roles().contains(&Role::Admin) && !roles.contains(&Role::Admin) && users::count_admins(&db).await? <= 1 {
        return ssr::fail(AppError::Conflict(format!(
            "`{username}` is the last administrator; give another user the admin role first"
        )));
    }
    users::set_roles(&db, &username, &roles).await?;
    audit::record(
        &db,
        NewEntry {
            actor: Some(&admin.username),
            action: action::USER_ROLES_CHANGED,
            target: Some(&username),
            detail: Some(&format!("roles {}", format_roles(&roles))),
            source: ssr::source().as_deref(),
        },
    )
    .await?;
    Ok(())
}

/// A page of the audit log, newest first.
#[server(prefix = "/fn", endpoint = "load_audit_page")]
pub async fn load_audit_page(before: Option<i64>, action: Option<String>) -> Result<AuditPage, AppError> {
    use super::ssr;
    use crate::storage::audit;
    ssr::require(crate::access::Role::Admin)?;
    let db = ssr::db()?;
    let action = action.filter(|a| !a.is_empty());
    Ok(audit::list(&db, before, action.as_deref(), 50).await?)
}

/// The tool policies, exact names first would be confusing here: listed by pattern.
#[server(prefix = "/fn", endpoint = "load_policies")]
pub async fn load_policies() -> Result<Vec<crate::models::PolicyRow>, AppError> {
    use super::ssr;
    use crate::storage::policies;
    ssr::require(crate::access::Role::Admin)?;
    let list = policies::list(&ssr::db()?).await?;
    Ok(list
        .into_iter()
        .map(|p| crate::models::PolicyRow { pattern: p.pattern, side_effect: p.side_effect.to_string() })
        .collect())
}

/// Creates or replaces the policy for a tool name pattern. Ingest picks it up within
/// seconds, for spans that do not declare their own side-effect class.
#[server(prefix = "/fn", endpoint = "save_policy")]
pub async fn save_policy(pattern: String, side_effect: String) -> Result<(), AppError> {
    use super::ssr;
    use crate::canonical::SideEffect;
    use crate::ingest::policy::ToolPolicy;
    use crate::storage::audit::{self, action, NewEntry};
    use crate::storage::policies;

    let admin = ssr::require(crate::access::Role::Admin)?;
    let db = ssr::db()?;
    let pattern = pattern.trim().to_string();
    if pattern.is_empty() || pattern.len() > 200 {
        return ssr::fail(AppError::Invalid(
            "a pattern needs 1 to 200 characters, e.g. send_* or delete_repository".into(),
        ));
    }
    let Some(side_effect) = SideEffect::parse(&side_effect).filter(|s| *s != SideEffect::Unknown) else {
        return ssr::fail(AppError::Invalid(format!(
            "unknown side effect `{side_effect}` (expected none, read, write or irreversible)"
        )));
    };
    policies::upsert(&db, &ToolPolicy { pattern: pattern.clone(), side_effect }).await?;
    audit::record(
        &db,
        NewEntry {
            actor: Some(&admin.username),
            action: action::POLICY_SAVED,
            target: Some(&pattern),
            detail: Some(&format!("side effect {side_effect}")),
            source: ssr::source().as_deref(),
        },
    )
    .await?;
    Ok(())
}

#[server(prefix = "/fn", endpoint = "delete_policy")]
pub async fn delete_policy(pattern: String) -> Result<(), AppError> {
    use super::ssr;
    use crate::storage::audit::{self, action, NewEntry};
    use crate::storage::policies;

    let admin = ssr::require(crate::access::Role::Admin)?;
    let db = ssr::db()?;
    if !policies::delete(&db, &pattern).await? {
        return ssr::fail(AppError::NotFound(format!("tool policy `{pattern}`")));
    }
    audit::record(
        &db,
        NewEntry {
            actor: Some(&admin.username),
            action: action::POLICY_DELETED,
            target: Some(&pattern),
            source: ssr::source().as_deref(),
            ..Default::default()
        },
    )
    .await?;
    Ok(())
}
