//! The audit log: an append-only record of who did what, when, and from where. Failed
//! sign-ins recorded here also drive the sign-in rate limit.

use super::sql::Sql;
use super::{from_ms, now_ms, Db, StoreResult};
use domain::models::{AuditEntry, AuditPage};

/// Actions recorded in the audit log. Strings, so later features add their own.
pub mod action {
    pub const LOGIN: &str = "login";
    pub const LOGOUT: &str = "logout";
    pub const LOGIN_FAILED: &str = "login_failed";
    pub const USER_CREATED: &str = "user_created";
    pub const USER_PASSWORD_RESET: &str = "user_password_reset";
    pub const USER_ROLES_CHANGED: &str = "user_roles_changed";
    pub const USER_DISABLED: &str = "user_disabled";
    pub const USER_ENABLED: &str = "user_enabled";
    pub const TOKEN_CREATED: &str = "token_created";
    pub const TOKEN_REVOKED: &str = "token_revoked";
    pub const POLICY_SAVED: &str = "tool_policy_saved";
    pub const POLICY_DELETED: &str = "tool_policy_deleted";
    pub const PRICE_SAVED: &str = "price_saved";
    pub const PRICE_DELETED: &str = "price_deleted";
    pub const RUNS_RECOMPUTED: &str = "runs_recomputed";
    pub const APPROVAL_APPROVED: &str = "approval_approved";
    pub const APPROVAL_DENIED: &str = "approval_denied";
    pub const APPROVAL_DECISION_REFUSED: &str = "approval_decision_refused";
    pub const APPROVAL_CANCELLED: &str = "approval_cancelled";
    pub const APPROVAL_RULE_SAVED: &str = "approval_rule_saved";
    pub const APPROVAL_RULE_DELETED: &str = "approval_rule_deleted";
    pub const SLACK_USER_LINKED: &str = "slack_user_linked";
    pub const SLACK_USER_UNLINKED: &str = "slack_user_unlinked";
    pub const ESCALATION_CLAIMED: &str = "escalation_claimed";
    pub const ESCALATION_RELEASED: &str = "escalation_released";
    pub const ESCALATION_NOTE: &str = "escalation_note";
    pub const ESCALATION_ITEM: &str = "escalation_item";
    pub const ESCALATION_RESOLVED: &str = "escalation_resolved";
    pub const ESCALATION_RESOLVED_OVERRIDE: &str = "escalation_resolved_over_claim";
    pub const ALERT_ACKNOWLEDGED: &str = "alert_acknowledged";
    pub const CALL_SETTLED: &str = "call_settled";
    pub const ALERT_RULE_SAVED: &str = "alert_rule_saved";
    pub const ALERT_ROUTE_TESTED: &str = "alert_route_tested";
    pub const SILENCE_CREATED: &str = "silence_created";
    pub const SILENCE_ENDED: &str = "silence_ended";
}

/// One entry to append.
#[derive(Debug, Clone, Default)]
pub struct NewEntry<'a> {
    pub actor: Option<&'a str>,
    pub action: &'a str,
    pub target: Option<&'a str>,
    pub detail: Option<&'a str>,
    pub source: Option<&'a str>,
}

/// An entry that owns its text, for handing to an act that runs later (see
/// [`insert`]).
#[derive(Debug, Clone, Default)]
pub struct OwnedEntry {
    pub actor: Option<String>,
    pub action: String,
    pub target: Option<String>,
    pub detail: Option<String>,
    pub source: Option<String>,
}

impl OwnedEntry {
    pub fn borrow(&self) -> NewEntry<'_> {
        NewEntry {
            actor: self.actor.as_deref(),
            action: &self.action,
            target: self.target.as_deref(),
            detail: self.detail.as_deref(),
            source: self.source.as_deref(),
        }
    }
}

#[derive(Debug, sqlx::FromRow)]
struct AuditRow {
    id: i64,
    at: i64,
    actor: Option<String>,
    action: String,
    target: Option<String>,
    detail: Option<String>,
    source: Option<String>,
}

pub async fn record(db: &Db, entry: NewEntry<'_>) -> StoreResult<()> {
    db.execute(insert(&entry)).await?;
    Ok(())
}

/// The statement that appends `entry`, for an act that records itself in its own
/// transaction (a decision or a claim is never stored without its entry, nor the entry
/// without it).
pub fn insert(entry: &NewEntry<'_>) -> Sql {
    let sql = "INSERT INTO audit_log (at, actor, action, target, detail, source) VALUES ($1, $2, $3, $4, $5, $6)";
    Sql::with_args(
        sql,
        vec![
            now_ms().into(),
            entry.actor.into(),
            entry.action.into(),
            entry.target.into(),
            entry.detail.into(),
            entry.source.into(),
        ],
    )
}

/// Newest first; `before` is the id cursor from the previous page, `action` filters.
pub async fn list(db: &Db, before: Option<i64>, action: Option<&str>, limit: i64) -> StoreResult<AuditPage> {
    // Each filter is in the statement only when given, so the database reads a range of
    // the id or of `audit_log_action_id` from the cursor on, never the entries before it.
    let mut sql = Sql::new("SELECT id, at, actor, action, target, detail, source FROM audit_log WHERE 1 = 1");
    if let Some(before) = before {
        sql.push(" AND id < ").bind(before);
    }
    if let Some(action) = action {
        sql.push(" AND action = ").bind(action);
    }
    sql.push(" ORDER BY id DESC LIMIT ").bind(limit + 1);
    let rows: Vec<AuditRow> = db.fetch_all(sql).await?;
    let has_more = rows.len() as i64 > limit;
    let entries: Vec<AuditEntry> = rows
        .into_iter()
        .take(limit as usize)
        .map(|r| AuditEntry {
            id: r.id,
            at: from_ms(r.at),
            actor: r.actor,
            action: r.action,
            target: r.target,
            detail: r.detail,
            source: r.source,
        })
        .collect();
    let next_before = if has_more { entries.last().map(|e| e.id) } else { None };
    Ok(AuditPage { entries, next_before })
}

/// How often `action` was recorded since `since_ms` for the target (when given) from the
/// source (when given), and when last: the failed sign-ins the backoff reads.
pub async fn recent(
    db: &Db,
    action: &str,
    target: Option<&str>,
    source: Option<&str>,
    since_ms: i64,
) -> StoreResult<(i64, Option<i64>)> {
    let sql = "SELECT COUNT(*), MAX(at) FROM audit_log WHERE action = $1 AND ($2 IS NULL OR target = $2) \
               AND ($3 IS NULL OR source = $3) AND at >= $4";
    Ok(db.fetch_one(Sql::with_args(sql, vec![action.into(), target.into(), source.into(), since_ms.into()])).await?)
}
