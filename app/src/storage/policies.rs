//! Tool policies: tool-name patterns, the side-effect class they imply, and the approval
//! rules for the tools they match.

use super::{now_ms, on_pool, Db, StoreError, StoreResult};
use crate::access::Role;
use crate::canonical::SideEffect;
use crate::ingest::policy::{policy_for, ToolPolicy};

const COLUMNS: &str =
    "pattern, side_effect, requires_approval, approver_role, expiry_seconds, run_limit, use_within_seconds";

#[derive(sqlx::FromRow)]
struct PolicyRow {
    pattern: String,
    side_effect: String,
    requires_approval: bool,
    approver_role: String,
    expiry_seconds: Option<i64>,
    run_limit: Option<i64>,
    use_within_seconds: Option<i64>,
}

impl From<PolicyRow> for ToolPolicy {
    fn from(r: PolicyRow) -> Self {
        ToolPolicy {
            pattern: r.pattern,
            side_effect: SideEffect::parse(&r.side_effect).unwrap_or(SideEffect::Unknown),
            requires_approval: r.requires_approval,
            approver_role: r.approver_role.parse().unwrap_or(Role::Approver),
            expiry_seconds: r.expiry_seconds,
            run_limit: r.run_limit,
            use_within_seconds: r.use_within_seconds,
        }
    }
}

pub async fn list(db: &Db) -> StoreResult<Vec<ToolPolicy>> {
    let sql = format!("SELECT {COLUMNS} FROM tool_policies ORDER BY pattern");
    let rows: Vec<PolicyRow> = on_pool!(db, pool => sqlx::query_as(&sql).fetch_all(pool).await)?;
    Ok(rows.into_iter().map(ToolPolicy::from).collect())
}

/// The policy governing `tool` right now (exact name first, then the first pattern).
pub async fn for_tool(db: &Db, tool: &str) -> StoreResult<Option<ToolPolicy>> {
    let all = list(db).await?;
    Ok(policy_for(tool, &all).cloned())
}

/// Creates or replaces the policy for `pattern`.
pub async fn upsert(db: &Db, policy: &ToolPolicy) -> StoreResult<()> {
    policy.validate().map_err(|why| StoreError::Invalid(format!("tool policy `{}`: {why}", policy.pattern)))?;
    let sql = format!(
        "INSERT INTO tool_policies ({COLUMNS}, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) \
         ON CONFLICT (pattern) DO UPDATE SET side_effect = excluded.side_effect, \
         requires_approval = excluded.requires_approval, approver_role = excluded.approver_role, \
         expiry_seconds = excluded.expiry_seconds, run_limit = excluded.run_limit, \
         use_within_seconds = excluded.use_within_seconds, updated_at = excluded.updated_at"
    );
    on_pool!(db, pool => sqlx::query(&sql)
        .bind(&policy.pattern)
        .bind(policy.side_effect.as_str())
        .bind(policy.requires_approval)
        .bind(policy.approver_role.as_str())
        .bind(policy.expiry_seconds)
        .bind(policy.run_limit)
        .bind(policy.use_within_seconds)
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
