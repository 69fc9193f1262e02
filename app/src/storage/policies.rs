//! Tool policies: tool-name patterns and the side-effect class they imply.

use super::{now_ms, on_pool, Db, StoreResult};
use crate::canonical::SideEffect;
use crate::ingest::policy::ToolPolicy;

#[derive(sqlx::FromRow)]
struct PolicyRow {
    pattern: String,
    side_effect: String,
}

pub async fn list(db: &Db) -> StoreResult<Vec<ToolPolicy>> {
    let sql = "SELECT pattern, side_effect FROM tool_policies ORDER BY pattern";
    let rows: Vec<PolicyRow> = on_pool!(db, pool => sqlx::query_as(sql).fetch_all(pool).await)?;
    Ok(rows
        .into_iter()
        .map(|r| ToolPolicy {
            pattern: r.pattern,
            side_effect: SideEffect::parse(&r.side_effect).unwrap_or(SideEffect::Unknown),
        })
        .collect())
}

/// Creates or replaces the policy for `pattern`.
pub async fn upsert(db: &Db, policy: &ToolPolicy) -> StoreResult<()> {
    let sql = "INSERT INTO tool_policies (pattern, side_effect, updated_at) VALUES ($1, $2, $3) \
               ON CONFLICT (pattern) DO UPDATE SET side_effect = excluded.side_effect, updated_at = excluded.updated_at";
    on_pool!(db, pool => sqlx::query(sql)
        .bind(&policy.pattern)
        .bind(policy.side_effect.as_str())
        .bind(now_ms())
        .execute(pool)
        .await
        .map(|_| ()))?;
    Ok(())
}

pub async fn delete(db: &Db, pattern: &str) -> StoreResult<bool> {
    let sql = "DELETE FROM tool_policies WHERE pattern = $1";
    let n = on_pool!(db, pool => sqlx::query(sql).bind(pattern).execute(pool).await.map(|r| r.rows_affected()))?;
    Ok(n > 0)
}
