//! Slack: which Slack user is which Flightdeck user (linked by an administrator), and the
//! signatures of interactivity requests already handled, so a replayed one is refused.

use super::sql::Sql;
use super::{now_ms, Db, StoreResult};

/// A Slack user linked to a Flightdeck user.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow, serde::Serialize, serde::Deserialize)]
pub struct SlackLink {
    pub slack_user_id: String,
    pub username: String,
    pub linked_by: String,
    pub linked_at: i64,
}

/// Links (or re-links) a Slack user id to a Flightdeck username.
pub async fn link(db: &Db, slack_user_id: &str, username: &str, by: &str) -> StoreResult<()> {
    let sql = "INSERT INTO slack_users (slack_user_id, username, linked_by, linked_at) VALUES ($1, $2, $3, $4) \
               ON CONFLICT (slack_user_id) DO UPDATE SET username = excluded.username, linked_by = excluded.linked_by, \
               linked_at = excluded.linked_at";
    db.execute(Sql::with_args(sql, vec![slack_user_id.into(), username.into(), by.into(), now_ms().into()]))
        .await
        .map(|_| ())?;
    Ok(())
}

pub async fn unlink(db: &Db, slack_user_id: &str) -> StoreResult<bool> {
    let sql = "DELETE FROM slack_users WHERE slack_user_id = $1";
    let n = db.execute(Sql::with_args(sql, vec![slack_user_id.into()])).await?;
    Ok(n > 0)
}

pub async fn list(db: &Db) -> StoreResult<Vec<SlackLink>> {
    let sql = "SELECT slack_user_id, username, linked_by, linked_at FROM slack_users ORDER BY username, slack_user_id";
    Ok(db.fetch_all(Sql::new(sql)).await?)
}

/// The Flightdeck username linked to a Slack user id.
pub async fn user_for(db: &Db, slack_user_id: &str) -> StoreResult<Option<String>> {
    let sql = "SELECT username FROM slack_users WHERE slack_user_id = $1";
    Ok(db.fetch_value(Sql::with_args(sql, vec![slack_user_id.into()])).await?)
}

/// Records a request's signature; `false` when it was seen before (a replay). Entries
/// older than `keep_ms` are dropped on the way: a request that old fails the timestamp
/// check anyway.
pub async fn first_sight(db: &Db, signature: &str, keep_ms: i64) -> StoreResult<bool> {
    let now = now_ms();
    let prune = "DELETE FROM slack_seen WHERE at < $1";
    db.execute(Sql::with_args(prune, vec![(now - keep_ms).into()])).await.map(|_| ())?;
    let insert = "INSERT INTO slack_seen (signature, at) VALUES ($1, $2) ON CONFLICT (signature) DO NOTHING";
    let n = db.execute(Sql::with_args(insert, vec![signature.into(), now.into()])).await?;
    Ok(n == 1)
}
