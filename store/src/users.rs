//! Accounts: usernames, Argon2id password hashes, roles, whether the account is disabled,
//! and the session epoch that signs out every session of a user whose password, roles or
//! status changed.

use super::sql::Sql;
use super::{from_ms, is_unique_violation, now_ms, Db, StoreError, StoreResult};
use domain::access::validate_username;
use domain::access::{format_roles, parse_roles, Role};
use domain::models::UserSummary;

/// A user row including what only the server may see.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct UserRecord {
    pub id: i64,
    pub username: String,
    pub password_hash: String,
    pub roles: String,
    pub session_epoch: i64,
    pub created_at: i64,
    pub disabled_at: Option<i64>,
}

impl UserRecord {
    pub fn roles(&self) -> Vec<Role> {
        // Roles were validated on the way in; an unknown one (from a newer version) is
        // dropped rather than granting anything.
        self.roles.split(',').filter_map(|r| r.parse().ok()).collect()
    }

    pub fn summary(&self) -> UserSummary {
        UserSummary {
            id: self.id,
            username: self.username.clone(),
            roles: self.roles(),
            created_at: from_ms(self.created_at),
            disabled: self.disabled_at.is_some(),
        }
    }
}

const COLUMNS: &str = "id, username, password_hash, roles, session_epoch, created_at, disabled_at";

impl UserRecord {
    pub fn is_disabled(&self) -> bool {
        self.disabled_at.is_some()
    }
}

pub async fn create(db: &Db, username: &str, password_hash: &str, roles: &[Role]) -> StoreResult<i64> {
    validate_username(username).map_err(StoreError::Invalid)?;
    let sql = "INSERT INTO users (username, password_hash, roles, session_epoch, created_at) \
               VALUES ($1, $2, $3, 0, $4) RETURNING id";
    let roles = format_roles(roles);
    let result: Result<i64, sqlx::Error> = db
        .fetch_one_value(Sql::with_args(
            sql,
            vec![username.into(), password_hash.into(), (&roles).into(), now_ms().into()],
        ))
        .await;
    result.map_err(|e| {
        if is_unique_violation(&e) {
            StoreError::Conflict(format!("a user named `{username}` already exists"))
        } else {
            e.into()
        }
    })
}

pub async fn count(db: &Db) -> StoreResult<i64> {
    let sql = "SELECT COUNT(*) FROM users";
    Ok(db.fetch_one_value(Sql::new(sql)).await?)
}

pub async fn by_username(db: &Db, username: &str) -> StoreResult<Option<UserRecord>> {
    let sql = format!("SELECT {COLUMNS} FROM users WHERE username = $1");
    Ok(db.fetch_optional(Sql::with_args(&sql, vec![username.into()])).await?)
}

pub async fn by_id(db: &Db, id: i64) -> StoreResult<Option<UserRecord>> {
    let sql = format!("SELECT {COLUMNS} FROM users WHERE id = $1");
    Ok(db.fetch_optional(Sql::with_args(&sql, vec![id.into()])).await?)
}

pub async fn list(db: &Db) -> StoreResult<Vec<UserSummary>> {
    let sql = format!("SELECT {COLUMNS} FROM users ORDER BY username");
    let rows: Vec<UserRecord> = db.fetch_all(Sql::new(&sql)).await?;
    Ok(rows.iter().map(UserRecord::summary).collect())
}

/// Replaces the password and bumps the session epoch, which signs the user out everywhere.
pub async fn set_password(db: &Db, username: &str, password_hash: &str) -> StoreResult<()> {
    let sql = "UPDATE users SET password_hash = $1, session_epoch = session_epoch + 1 \
               WHERE username = $2";
    let done = db.execute(Sql::with_args(sql, vec![password_hash.into(), username.into()])).await?;
    if done == 0 {
        return Err(StoreError::NotFound(format!("user `{username}`")));
    }
    Ok(())
}

/// Replaces the roles of a user and signs them out everywhere, so no page rendered under
/// the old roles stays open.
pub async fn set_roles(db: &Db, username: &str, roles: &[Role]) -> StoreResult<()> {
    let sql = "UPDATE users SET roles = $1, session_epoch = session_epoch + 1 WHERE username = $2";
    let roles = format_roles(roles);
    let done = db.execute(Sql::with_args(sql, vec![(&roles).into(), username.into()])).await?;
    if done == 0 {
        return Err(StoreError::NotFound(format!("user `{username}`")));
    }
    Ok(())
}

/// Disables a user (they cannot sign in, and every session of theirs ends at once) or
/// enables them again.
pub async fn set_disabled(db: &Db, username: &str, disabled: bool) -> StoreResult<()> {
    let sql = "UPDATE users SET disabled_at = $1, session_epoch = session_epoch + 1 WHERE username = $2";
    let at = disabled.then(now_ms);
    let done = db.execute(Sql::with_args(sql, vec![at.into(), username.into()])).await?;
    if done == 0 {
        return Err(StoreError::NotFound(format!("user `{username}`")));
    }
    Ok(())
}

/// How many enabled users hold `admin`; the last one may not lose it or be disabled.
pub async fn count_admins(db: &Db) -> StoreResult<usize> {
    let sql = "SELECT roles FROM users WHERE disabled_at IS NULL";
    let all: Vec<String> = db.fetch_column(Sql::new(sql)).await?;
    Ok(all.iter().filter(|r| parse_roles(r).map(|r| r.contains(&Role::Admin)).unwrap_or(false)).count())
}
