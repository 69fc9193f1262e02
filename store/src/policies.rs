//! Tool policies: tool-name patterns, the side-effect class they imply, and the approval
//! rules for the tools they match.

use super::sql::{Arg, Sql};
use super::{now_ms, Db, StoreError, StoreResult};
use domain::access::Role;
use domain::canonical::SideEffect;
use domain::policy::{policy_for, ToolPolicy};

const COLUMNS: &str = "pattern, side_effect, requires_approval, approver_role, expiry_seconds, run_limit, \
    use_within_seconds, volatile_fields, run_wide_key, ledger_window_seconds, call_timeout_seconds, arguments_schema, on_expiry, fail_open";

#[derive(sqlx::FromRow)]
struct PolicyRow {
    pattern: String,
    side_effect: String,
    requires_approval: bool,
    approver_role: String,
    expiry_seconds: Option<i64>,
    run_limit: Option<i64>,
    use_within_seconds: Option<i64>,
    volatile_fields: Option<String>,
    run_wide_key: bool,
    ledger_window_seconds: Option<i64>,
    call_timeout_seconds: Option<i64>,
    arguments_schema: Option<String>,
    on_expiry: String,
    fail_open: bool,
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
            // Written by `upsert` from a validated list; unreadable text means no list.
            volatile_fields: r.volatile_fields.as_deref().and_then(|t| serde_json::from_str(t).ok()),
            run_wide_key: r.run_wide_key,
            ledger_window_seconds: r.ledger_window_seconds,
            call_timeout_seconds: r.call_timeout_seconds,
            // Written by `upsert` from a checked schema.
            arguments_schema: r.arguments_schema.as_deref().and_then(|t| serde_json::from_str(t).ok()),
            on_expiry: domain::approvals::OnExpiry::parse(&r.on_expiry).unwrap_or_default(),
            fail_open: r.fail_open,
        }
    }
}

pub async fn list(db: &Db) -> StoreResult<Vec<ToolPolicy>> {
    let sql = format!("SELECT {COLUMNS} FROM tool_policies ORDER BY pattern");
    let rows: Vec<PolicyRow> = db.fetch_all(Sql::new(&sql)).await?;
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
        "INSERT INTO tool_policies ({COLUMNS}, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15) \
         ON CONFLICT (pattern) DO UPDATE SET side_effect = excluded.side_effect, \
         requires_approval = excluded.requires_approval, approver_role = excluded.approver_role, \
         expiry_seconds = excluded.expiry_seconds, run_limit = excluded.run_limit, \
         use_within_seconds = excluded.use_within_seconds, volatile_fields = excluded.volatile_fields, \
         run_wide_key = excluded.run_wide_key, ledger_window_seconds = excluded.ledger_window_seconds, \
         call_timeout_seconds = excluded.call_timeout_seconds, arguments_schema = excluded.arguments_schema, \
         on_expiry = excluded.on_expiry, fail_open = excluded.fail_open, updated_at = excluded.updated_at"
    );
    let volatile = policy.volatile_fields.as_ref().map(|f| serde_json::to_string(f).unwrap_or_default());
    let args: Vec<Arg> = vec![
        policy.pattern.as_str().into(),
        policy.side_effect.as_str().into(),
        policy.requires_approval.into(),
        policy.approver_role.as_str().into(),
        policy.expiry_seconds.into(),
        policy.run_limit.into(),
        policy.use_within_seconds.into(),
        volatile.into(),
        policy.run_wide_key.into(),
        policy.ledger_window_seconds.into(),
        policy.call_timeout_seconds.into(),
        policy.arguments_schema.as_ref().map(|s| s.to_string()).into(),
        policy.on_expiry.as_str().into(),
        policy.fail_open.into(),
        now_ms().into(),
    ];
    db.execute(Sql::with_args(sql, args)).await?;
    Ok(())
}

/// Deletes the policy and its approval rules.
pub async fn delete(db: &Db, pattern: &str) -> StoreResult<bool> {
    let mut tx = super::sql::Tx::begin_write(db).await?;
    tx.execute(Sql::with_args("DELETE FROM approval_rules WHERE tool_pattern = $1", vec![pattern.into()])).await?;
    let n = tx.execute(Sql::with_args("DELETE FROM tool_policies WHERE pattern = $1", vec![pattern.into()])).await?;
    tx.commit().await?;
    Ok(n > 0)
}
