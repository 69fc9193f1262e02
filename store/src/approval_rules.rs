//! Approval rules (`approval_rules`): the ordered rules of each tool policy, validated by
//! `ApprovalRule::validate` before they are stored; and the past requests "try on history"
//! and shadow mode hold a rule against (`approval_rule_shadow` keeps what a shadow rule
//! would have done with each request filed while it ran).

use super::sql::Sql;
use super::{from_ms, now_ms, Db, StoreError, StoreResult};
use domain::access::Role;
use domain::approvals::rules::{ApprovalRule, HistoryItem, RuleAction, RuleContext, RuleMode, Would};

const COLUMNS: &str = "name, tool_pattern, position, expression, action, approvers, role, reason, mode";

#[derive(sqlx::FromRow)]
struct RuleRow {
    name: String,
    tool_pattern: String,
    position: i64,
    expression: String,
    action: String,
    approvers: i64,
    role: Option<String>,
    reason: Option<String>,
    mode: String,
}

impl From<RuleRow> for ApprovalRule {
    fn from(r: RuleRow) -> Self {
        ApprovalRule {
            name: r.name,
            tool_pattern: r.tool_pattern,
            position: r.position,
            expression: r.expression,
            // Written by `upsert` from a validated rule; an unknown word (from a newer
            // version) keeps the rule from acting rather than guessing.
            action: RuleAction::parse(&r.action).unwrap_or(RuleAction::RequireApproval),
            approvers: r.approvers,
            role: r.role.and_then(|r| r.parse::<Role>().ok()),
            reason: r.reason,
            mode: RuleMode::parse(&r.mode).unwrap_or(RuleMode::Off),
        }
    }
}

/// Every rule, by policy then position.
pub async fn list(db: &Db) -> StoreResult<Vec<ApprovalRule>> {
    let sql = format!("SELECT {COLUMNS} FROM approval_rules ORDER BY tool_pattern, position, name");
    let rows: Vec<RuleRow> = db.fetch_all(Sql::new(&sql)).await?;
    Ok(rows.into_iter().map(ApprovalRule::from).collect())
}

/// The rules of the policy with `pattern`, in order.
pub async fn of_policy(db: &Db, pattern: &str) -> StoreResult<Vec<ApprovalRule>> {
    let sql = format!("SELECT {COLUMNS} FROM approval_rules WHERE tool_pattern = $1 ORDER BY position, name");
    let rows: Vec<RuleRow> = db.fetch_all(Sql::with_args(&sql, vec![pattern.into()])).await?;
    Ok(rows.into_iter().map(ApprovalRule::from).collect())
}

pub async fn get(db: &Db, name: &str) -> StoreResult<Option<ApprovalRule>> {
    let sql = format!("SELECT {COLUMNS} FROM approval_rules WHERE name = $1");
    let row: Option<RuleRow> = db.fetch_optional(Sql::with_args(&sql, vec![name.into()])).await?;
    Ok(row.map(ApprovalRule::from))
}

/// Creates or replaces the rule called `rule.name`.
pub async fn upsert(db: &Db, rule: &ApprovalRule, by: &str) -> StoreResult<()> {
    rule.validate().map_err(|why| StoreError::Invalid(format!("rule `{}`: {why}", rule.name)))?;
    let sql = format!(
        "INSERT INTO approval_rules ({COLUMNS}, updated_by, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, \
         $10, $11) ON CONFLICT (name) DO UPDATE SET tool_pattern = excluded.tool_pattern, position = excluded.position, \
         expression = excluded.expression, action = excluded.action, approvers = excluded.approvers, \
         role = excluded.role, reason = excluded.reason, mode = excluded.mode, updated_by = excluded.updated_by, \
         updated_at = excluded.updated_at"
    );
    db.execute(Sql::with_args(
        &sql,
        vec![
            (&rule.name).into(),
            (&rule.tool_pattern).into(),
            rule.position.into(),
            (&rule.expression).into(),
            rule.action.as_str().into(),
            rule.approvers.into(),
            rule.role.map(|r| r.as_str()).into(),
            (&rule.reason).into(),
            rule.mode.as_str().into(),
            by.into(),
            now_ms().into(),
        ],
    ))
    .await
    .map(|_| ())?;
    Ok(())
}

pub async fn delete(db: &Db, name: &str) -> StoreResult<bool> {
    let sql = "DELETE FROM approval_rules WHERE name = $1";
    let n = db.execute(Sql::with_args(sql, vec![name.into()])).await?;
    Ok(n > 0)
}

#[derive(sqlx::FromRow)]
struct HistoryRow {
    id: String,
    tool: String,
    agent: Option<String>,
    arguments: String,
    original_arguments: Option<String>,
    status: String,
    decided_by: Option<String>,
    reason: Option<String>,
    created_at: i64,
    rule_input: Option<String>,
}

impl HistoryRow {
    /// The request as a rule sees it: the arguments the agent asked with (the original
    /// when an approver edited them), and the context kept when it was filed; requests
    /// filed before contexts were kept get their agent and filing time, cost 0.
    fn into_item(self) -> (HistoryItem, RuleContext) {
        let created_at = from_ms(self.created_at);
        let context = self
            .rule_input
            .as_deref()
            .and_then(|t| serde_json::from_str::<RuleContext>(t).ok())
            .unwrap_or_else(|| RuleContext::at(created_at, self.agent.clone(), 0.0));
        let item = HistoryItem {
            approval_id: self.id,
            tool: self.tool,
            agent: self.agent,
            arguments: self.original_arguments.unwrap_or(self.arguments),
            people: self.status,
            decided_by: self.decided_by,
            reason: self.reason,
            created_at,
        };
        (item, context)
    }
}

const HISTORY_COLUMNS: &str =
    "id, tool, agent, arguments, original_arguments, status, decided_by, reason, created_at, rule_input";

/// The most past requests "try on history" reads.
pub const HISTORY_LIMIT: i64 = 20_000;

/// Requests filed since `since_ms` for tools in `tools`, newest first (at most
/// [`HISTORY_LIMIT`]).
pub async fn history(db: &Db, tools: &[String], since_ms: i64) -> StoreResult<Vec<(HistoryItem, RuleContext)>> {
    let mut out = Vec::new();
    for tool in tools {
        let sql = format!(
            "SELECT {HISTORY_COLUMNS} FROM approvals WHERE tool = $1 AND created_at >= $2 ORDER BY created_at DESC LIMIT $3"
        );
        let rows: Vec<HistoryRow> =
            db.fetch_all(Sql::with_args(&sql, vec![tool.into(), since_ms.into(), HISTORY_LIMIT.into()])).await?;
        out.extend(rows.into_iter().map(HistoryRow::into_item));
    }
    out.sort_by(|a, b| b.0.created_at.cmp(&a.0.created_at));
    out.truncate(HISTORY_LIMIT as usize);
    Ok(out)
}

/// The distinct tools requests were filed for since `since_ms`.
pub async fn tools_since(db: &Db, since_ms: i64) -> StoreResult<Vec<String>> {
    let sql = "SELECT DISTINCT tool FROM approvals WHERE created_at >= $1";
    Ok(db.fetch_column(Sql::with_args(sql, vec![since_ms.into()])).await?)
}

/// The requests filed while the shadow rule `name` ran, with what it would have done.
pub async fn shadow_history(db: &Db, name: &str) -> StoreResult<Vec<(HistoryItem, RuleContext, Would)>> {
    let sql = format!(
        "SELECT {}, s.would FROM approval_rule_shadow s JOIN approvals a ON a.id = s.approval_id \
         WHERE s.rule_name = $1 ORDER BY a.created_at DESC LIMIT $2",
        HISTORY_COLUMNS.split(", ").map(|c| format!("a.{c}")).collect::<Vec<_>>().join(", ")
    );
    #[derive(sqlx::FromRow)]
    struct Row {
        #[sqlx(flatten)]
        request: HistoryRow,
        would: String,
    }
    let rows: Vec<Row> = db.fetch_all(Sql::with_args(&sql, vec![name.into(), HISTORY_LIMIT.into()])).await?;
    Ok(rows
        .into_iter()
        .map(|r| {
            let would = Would::parse(&r.would).unwrap_or(Would::Error);
            let (item, context) = r.request.into_item();
            (item, context, would)
        })
        .collect())
}
