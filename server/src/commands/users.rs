//! `flightdeck user add|reset|list`, and the first administrator made on first start.

use super::password_from_stdin;
use app::auth::{password, secrets};
use domain::access::{format_roles, parse_roles, Role, Scope};
use store::audit::{self, action, NewEntry};
use store::{tokens, users, Db, StoreError};

/// A password from stdin (checked for strength) or a generated one; `true` when generated.
fn choose_password() -> anyhow::Result<(String, bool)> {
    match password_from_stdin()? {
        Some(given) => {
            password::check_strength(&given).map_err(anyhow::Error::msg)?;
            Ok((given, false))
        }
        None => Ok((password::generate(), true)),
    }
}

async fn hash(password: String) -> anyhow::Result<String> {
    Ok(tokio::task::spawn_blocking(move || password::hash(&password)).await?)
}

pub async fn add(db: &Db, username: &str, roles: &[String]) -> anyhow::Result<()> {
    let roles = parse_roles(&roles.join(",")).map_err(anyhow::Error::msg)?;
    let roles = if roles.is_empty() { vec![Role::Viewer] } else { roles };
    let (password, generated) = choose_password()?;
    users::create(db, username, &hash(password.clone()).await?, &roles).await?;
    audit::record(
        db,
        NewEntry {
            actor: Some("cli"),
            action: action::USER_CREATED,
            target: Some(username),
            detail: Some(&format!("roles {}", format_roles(&roles))),
            ..Default::default()
        },
    )
    .await?;
    eprintln!("created user {username} with roles {}", format_roles(&roles));
    if generated {
        eprintln!("generated password (shown once):");
        println!("{password}");
    }
    Ok(())
}

pub async fn reset(db: &Db, username: &str) -> anyhow::Result<()> {
    let (password, generated) = choose_password()?;
    users::set_password(db, username, &hash(password.clone()).await?).await?;
    audit::record(
        db,
        NewEntry {
            actor: Some("cli"),
            action: action::USER_PASSWORD_RESET,
            target: Some(username),
            ..Default::default()
        },
    )
    .await?;
    eprintln!("password of {username} replaced; their sessions are signed out");
    if generated {
        eprintln!("generated password (shown once):");
        println!("{password}");
    }
    Ok(())
}

/// Disables or enables a user. Disabling ends their sessions at once; the last enabled
/// administrator cannot be disabled (recover with `user add --role admin` first).
pub async fn set_disabled(db: &Db, username: &str, disabled: bool) -> anyhow::Result<()> {
    let Some(user) = users::by_username(db, username).await? else {
        anyhow::bail!("no user named `{username}`");
    };
    let enabled_admin = user.roles().contains(&Role::Admin) && !user.is_disabled();
    if disabled && enabled_admin && users::count_admins(db).await? <= 1 {
        anyhow::bail!("`{username}` is the last enabled administrator; add another administrator first");
    }
    users::set_disabled(db, username, disabled).await?;
    let what = if disabled { action::USER_DISABLED } else { action::USER_ENABLED };
    audit::record(db, NewEntry { actor: Some("cli"), action: what, target: Some(username), ..Default::default() })
        .await?;
    if disabled {
        eprintln!("disabled {username}; their sessions are signed out");
    } else {
        eprintln!("enabled {username}");
    }
    Ok(())
}

pub async fn list(db: &Db) -> anyhow::Result<()> {
    println!("{:<24} {:<36} {:<9} CREATED", "USERNAME", "ROLES", "STATUS");
    for user in users::list(db).await? {
        println!(
            "{:<24} {:<36} {:<9} {}",
            user.username,
            format_roles(&user.roles),
            if user.disabled { "disabled" } else { "active" },
            user.created_at.format("%Y-%m-%d %H:%M UTC")
        );
    }
    Ok(())
}

/// On a database without users, creates `admin` with every role and prints its generated
/// password once, so a fresh install can be signed into at once.
pub async fn create_first_admin(db: &Db) -> anyhow::Result<()> {
    if users::count(db).await? > 0 {
        return Ok(());
    }
    let password = password::generate();
    let roles = Role::ALL.to_vec();
    match users::create(db, "admin", &hash(password.clone()).await?, &roles).await {
        Ok(_) => {}
        // Another instance starting at the same moment made it first.
        Err(StoreError::Conflict(_)) => return Ok(()),
        Err(e) => return Err(e.into()),
    }
    audit::record(
        db,
        NewEntry {
            actor: Some("first start"),
            action: action::USER_CREATED,
            target: Some("admin"),
            detail: Some(&format!("roles {}", format_roles(&roles))),
            ..Default::default()
        },
    )
    .await?;
    let (secret, prefix) = secrets::generate_token();
    tokens::create(
        db,
        tokens::NewToken {
            name: "first-start ingest",
            prefix: &prefix,
            secret_sha256: &secrets::sha256_hex(&secret),
            scopes: &[Scope::Ingest],
            created_by: Some("first start"),
        },
    )
    .await?;
    let rule = "─".repeat(78);
    eprintln!();
    eprintln!("  ── First start {}", "─".repeat(62));
    eprintln!("  Created the administrator account and an ingest token (shown once):");
    eprintln!("    username      admin");
    eprintln!("    password      {password}");
    eprintln!("    ingest token  {secret}");
    eprintln!("  Replace the password with `flightdeck user reset admin`. Send traces with");
    eprintln!("  OTEL_EXPORTER_OTLP_HEADERS=\"Authorization=Bearer <ingest token>\".");
    eprintln!("  {rule}");
    eprintln!();
    Ok(())
}
