//! `flightdeck token create|revoke|list`: agent API tokens from the command line, for
//! automation. `create` prints only the secret on standard output.

use app::auth::secrets;
use domain::access::{format_scopes, parse_scopes};
use store::audit::{self, action, NewEntry};
use store::{tokens, Db};

pub async fn create(db: &Db, name: &str, scopes: &[String]) -> anyhow::Result<()> {
    let scopes = parse_scopes(&scopes.join(",")).map_err(anyhow::Error::msg)?;
    let (secret, prefix) = secrets::generate_token();
    let id = tokens::create(
        db,
        tokens::NewToken {
            name,
            prefix: &prefix,
            secret_sha256: &secrets::sha256_hex(&secret),
            scopes: &scopes,
            created_by: Some("cli"),
        },
    )
    .await?;
    audit::record(
        db,
        NewEntry {
            actor: Some("cli"),
            action: action::TOKEN_CREATED,
            target: Some(name),
            detail: Some(&format!("scopes {}, prefix {prefix}", format_scopes(&scopes))),
            ..Default::default()
        },
    )
    .await?;
    eprintln!("created token {id} `{name}` with scopes {}; its secret (shown once):", format_scopes(&scopes));
    println!("{secret}");
    Ok(())
}

pub async fn revoke(db: &Db, id: i64) -> anyhow::Result<()> {
    let token = tokens::revoke(db, id).await?;
    audit::record(
        db,
        NewEntry {
            actor: Some("cli"),
            action: action::TOKEN_REVOKED,
            target: Some(&token.name),
            detail: Some(&format!("prefix {}", token.prefix)),
            ..Default::default()
        },
    )
    .await?;
    eprintln!("revoked token {id} `{}`", token.name);
    Ok(())
}

pub async fn list(db: &Db) -> anyhow::Result<()> {
    println!("{:<5} {:<24} {:<14} {:<32} {:<18} STATUS", "ID", "NAME", "PREFIX", "SCOPES", "LAST USED");
    for t in tokens::list(db).await? {
        let last = t.last_used_at.map(|at| at.format("%Y-%m-%d %H:%M").to_string()).unwrap_or_else(|| "never".into());
        let status = if t.is_active() { "active" } else { "revoked" };
        println!("{:<5} {:<24} {:<14} {:<32} {:<18} {status}", t.id, t.name, t.prefix, format_scopes(&t.scopes), last);
    }
    Ok(())
}
