//! Agent API tokens: stored as a SHA-256 of the secret (the secret itself is shown once
//! and never kept), with scopes, last use, and revocation.

use super::sql::Sql;
use super::{from_ms, now_ms, Db, StoreError, StoreResult};
use domain::access::{format_scopes, Scope};
use domain::models::TokenSummary;

#[derive(Debug, Clone, sqlx::FromRow)]
struct TokenRow {
    id: i64,
    name: String,
    prefix: String,
    scopes: String,
    created_at: i64,
    created_by: Option<String>,
    last_used_at: Option<i64>,
    revoked_at: Option<i64>,
}

impl TokenRow {
    fn summary(self) -> TokenSummary {
        TokenSummary {
            id: self.id,
            name: self.name,
            prefix: self.prefix,
            scopes: self.scopes.split(',').filter_map(|s| s.parse().ok()).collect(),
            created_at: from_ms(self.created_at),
            created_by: self.created_by,
            last_used_at: self.last_used_at.map(from_ms),
            revoked_at: self.revoked_at.map(from_ms),
        }
    }
}

const COLUMNS: &str = "id, name, prefix, scopes, created_at, created_by, last_used_at, revoked_at";

/// What a new token needs besides its secret's hash.
pub struct NewToken<'a> {
    pub name: &'a str,
    pub prefix: &'a str,
    pub secret_sha256: &'a str,
    pub scopes: &'a [Scope],
    pub created_by: Option<&'a str>,
}

pub fn validate_name(name: &str) -> Result<(), String> {
    let name = name.trim();
    if name.is_empty() || name.chars().count() > 80 {
        return Err("a token needs a name of 1 to 80 characters, e.g. the agent that uses it".into());
    }
    Ok(())
}

pub async fn create(db: &Db, token: NewToken<'_>) -> StoreResult<i64> {
    validate_name(token.name).map_err(StoreError::Conflict)?;
    if token.scopes.is_empty() {
        return Err(StoreError::Conflict("a token needs at least one scope".into()));
    }
    let sql = "INSERT INTO api_tokens (name, prefix, secret_sha256, scopes, created_at, created_by) \
               VALUES ($1, $2, $3, $4, $5, $6) RETURNING id";
    let scopes = format_scopes(token.scopes);
    Ok(db
        .fetch_one_value(Sql::with_args(
            sql,
            vec![
                token.name.trim().into(),
                token.prefix.into(),
                token.secret_sha256.into(),
                (&scopes).into(),
                now_ms().into(),
                token.created_by.into(),
            ],
        ))
        .await?)
}

pub async fn list(db: &Db) -> StoreResult<Vec<TokenSummary>> {
    let sql = format!("SELECT {COLUMNS} FROM api_tokens ORDER BY revoked_at IS NOT NULL, created_at DESC, id DESC");
    let rows: Vec<TokenRow> = db.fetch_all(Sql::new(&sql)).await?;
    Ok(rows.into_iter().map(TokenRow::summary).collect())
}

pub async fn by_id(db: &Db, id: i64) -> StoreResult<Option<TokenSummary>> {
    let sql = format!("SELECT {COLUMNS} FROM api_tokens WHERE id = $1");
    let row: Option<TokenRow> = db.fetch_optional(Sql::with_args(&sql, vec![id.into()])).await?;
    Ok(row.map(TokenRow::summary))
}

/// The token with this secret hash, if it exists and is not revoked.
pub async fn active_by_hash(db: &Db, secret_sha256: &str) -> StoreResult<Option<TokenSummary>> {
    let sql = format!("SELECT {COLUMNS} FROM api_tokens WHERE secret_sha256 = $1 AND revoked_at IS NULL");
    let row: Option<TokenRow> = db.fetch_optional(Sql::with_args(&sql, vec![secret_sha256.into()])).await?;
    Ok(row.map(TokenRow::summary))
}

/// Revokes a token; revoking one that is already revoked is a conflict so the caller
/// can say so instead of pretending something changed.
pub async fn revoke(db: &Db, id: i64) -> StoreResult<TokenSummary> {
    let sql = "UPDATE api_tokens SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL";
    let done = db.execute(Sql::with_args(sql, vec![now_ms().into(), id.into()])).await?;
    let token = by_id(db, id).await?.ok_or_else(|| StoreError::NotFound(format!("token {id}")))?;
    if done == 0 {
        return Err(StoreError::Conflict(format!("token `{}` was already revoked", token.name)));
    }
    Ok(token)
}

/// Records a use. Callers throttle this so a busy agent does not write on every request.
pub async fn touch(db: &Db, id: i64, at_ms: i64) -> StoreResult<()> {
    let sql = "UPDATE api_tokens SET last_used_at = $1 WHERE id = $2";
    db.execute(Sql::with_args(sql, vec![at_ms.into(), id.into()])).await.map(|_| ())?;
    Ok(())
}
