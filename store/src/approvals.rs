//! Approval requests and violations. Every state change is one conditional `UPDATE ...
//! WHERE status = 'pending'`, so of two simultaneous decisions exactly one wins on either
//! backend, and the loser is told who decided first.

use super::sql::{cacheable_chunks, Sql, Tx, IDS_PER_QUERY};
use super::{from_ms, is_unique_violation, now_ms, Db, StoreError, StoreResult};
use domain::access::Role;
use domain::approvals::check::{self, ApprovalFacts};
use domain::approvals::notification::requested_event;
use domain::approvals::payload::{
    arguments_sha256, canonical_json, expiry_seconds, payload_sha256, ValidRequest, DEFAULT_USE_WITHIN_SECONDS,
};
use domain::approvals::rules::Filing;
use domain::approvals::{Approval, ApprovalEdit, ApprovalStatus, OnExpiry, Violation, ViolationKind};
use domain::canonical::{RunDetail, SideEffect};
use domain::derive::SpanFacts;
use domain::notify::WebhookTarget;
use domain::policy::ToolPolicy;
use domain::span::NormalizedSpan;
use domain::trends::events::{EventCounts, EventKind};
use std::collections::{BTreeMap, BTreeSet};

const COLUMNS: &str = "id, run_id, step_index, tool, arguments, display, idempotency_key, payload_sha256, \
    arguments_sha256, side_effect, required_role, agent, requested_by, status, created_at, expires_at, decided_by, \
    decided_at, reason, used_by_span, use_within_seconds, requested_by_token, use_by";

/// What a read returns: the filed columns and what decisions added since (approvals v2).
const SELECT_COLUMNS: &str = "id, run_id, step_index, tool, arguments, display, idempotency_key, payload_sha256, \
    arguments_sha256, side_effect, required_role, agent, requested_by, status, created_at, expires_at, decided_by, \
    decided_at, reason, used_by_span, use_within_seconds, requested_by_token, use_by, original_arguments, \
    original_payload_sha256, changes, respond, required_approvals, on_expiry, escalation_id, rule_name";

#[derive(sqlx::FromRow)]
struct ApprovalRow {
    id: String,
    run_id: String,
    step_index: Option<i64>,
    tool: String,
    arguments: String,
    display: String,
    idempotency_key: Option<String>,
    payload_sha256: String,
    #[allow(dead_code)]
    arguments_sha256: String,
    side_effect: String,
    required_role: String,
    agent: Option<String>,
    requested_by: String,
    status: String,
    created_at: i64,
    expires_at: i64,
    decided_by: Option<String>,
    decided_at: Option<i64>,
    reason: Option<String>,
    used_by_span: Option<String>,
    #[allow(dead_code)]
    use_within_seconds: Option<i64>,
    #[allow(dead_code)]
    requested_by_token: Option<i64>,
    use_by: Option<i64>,
    original_arguments: Option<String>,
    original_payload_sha256: Option<String>,
    changes: Option<String>,
    respond: Option<String>,
    required_approvals: i64,
    on_expiry: String,
    escalation_id: Option<String>,
    rule_name: Option<String>,
}

impl TryFrom<ApprovalRow> for Approval {
    type Error = sqlx::Error;
    fn try_from(r: ApprovalRow) -> Result<Self, sqlx::Error> {
        Ok(Approval {
            id: r.id,
            run_id: r.run_id,
            step_index: r.step_index,
            tool: r.tool,
            arguments: r.arguments,
            display: super::stored_json(&r.display)?,
            idempotency_key: r.idempotency_key,
            payload_sha256: r.payload_sha256,
            side_effect: SideEffect::parse(&r.side_effect).unwrap_or(SideEffect::Unknown),
            required_role: r.required_role.parse().unwrap_or(Role::Approver),
            agent: r.agent,
            requested_by: r.requested_by,
            status: ApprovalStatus::parse(&r.status).unwrap_or(ApprovalStatus::Pending),
            created_at: from_ms(r.created_at),
            expires_at: from_ms(r.expires_at),
            decided_by: r.decided_by,
            decided_at: r.decided_at.map(from_ms),
            reason: r.reason,
            used_by_span: r.used_by_span,
            use_by: r.use_by.map(from_ms),
            original_arguments: r.original_arguments,
            original_payload_sha256: r.original_payload_sha256,
            changes: r.changes,
            respond: r.respond,
            required_approvals: r.required_approvals,
            approved_by: Vec::new(),
            edits: Vec::new(),
            on_expiry: OnExpiry::parse(&r.on_expiry).unwrap_or_default(),
            escalation_id: r.escalation_id,
            rule_name: r.rule_name,
            requester_user: None,
        })
    }
}

/// A new id: `apr_` and 16 random bytes in hex, unguessable so it can appear in URLs.
fn new_id() -> String {
    use rand::RngCore;
    let mut bytes = [0u8; 16];
    rand::thread_rng().fill_bytes(&mut bytes);
    format!("apr_{}", hex::encode(bytes))
}

/// Who filed a request: the API token's name, and its id when the request came through the
/// API (only that token, or an administrator, may cancel it).
#[derive(Debug, Clone, Copy)]
pub struct Requester<'a> {
    pub name: &'a str,
    pub token_id: Option<i64>,
}

/// Files a request, or returns the one already filed under the same idempotency key with
/// the same payload (`false` = not newly created). The same key with another payload is a
/// conflict that says so. `filing` carries what the tool's rules said: a request a rule
/// decided is stored decided (by `rule:<name>`) and announces nothing; shadow rules'
/// verdicts are kept beside it.
pub async fn create(
    db: &Db,
    request: &ValidRequest,
    policy: Option<&ToolPolicy>,
    requested_by: Requester<'_>,
    targets: &[WebhookTarget],
    filing: &Filing,
) -> StoreResult<(Approval, bool)> {
    let payload = payload_sha256(&request.tool, &request.arguments);
    if let Some(existing) = by_idempotency_key(db, request).await? {
        return same_payload(existing, &payload, request).map(|a| (a, false));
    }
    let now = now_ms();
    let expires_in = expiry_seconds(request.expires_in, policy.and_then(|p| p.expiry_seconds));
    let agent = match &request.agent {
        Some(agent) => Some(agent.clone()),
        None => super::runs::agent_of(db, &request.run_id).await?,
    };
    let id = new_id();
    let (status, decided_by, decided_at, reason) = match &filing.decided {
        Some((status, reason)) => {
            (*status, filing.rule_name.as_ref().map(|n| format!("rule:{n}")), Some(now), reason.clone())
        }
        None => (ApprovalStatus::Pending, None, None, None),
    };
    let use_within = policy.and_then(|p| p.use_within_seconds);
    let use_by =
        (status == ApprovalStatus::Approved).then(|| now + use_within.unwrap_or(DEFAULT_USE_WITHIN_SECONDS) * 1000);
    let sql = format!(
        "INSERT INTO approvals ({COLUMNS}, required_approvals, on_expiry, rule_name, rule_input) VALUES ($1, $2, $3, \
         $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, NULL, $20, $21, $22, $23, $24, \
         $25, $26)"
    );
    let display = serde_json::to_string(&request.display).unwrap_or_else(|_| "[]".into());
    let args = vec![
        id.as_str().into(),
        request.run_id.as_str().into(),
        request.step_index.into(),
        request.tool.as_str().into(),
        canonical_json(&request.stored_arguments).into(),
        display.into(),
        (&request.idempotency_key).into(),
        payload.as_str().into(),
        arguments_sha256(&request.arguments).into(),
        policy.map(|p| p.side_effect).unwrap_or(SideEffect::Unknown).as_str().into(),
        filing.required_role.as_str().into(),
        agent.as_deref().into(),
        requested_by.name.into(),
        status.as_str().into(),
        now.into(),
        (now + expires_in * 1000).into(),
        decided_by.into(),
        decided_at.into(),
        reason.into(),
        use_within.into(),
        requested_by.token_id.into(),
        use_by.into(),
        filing.required_approvals.into(),
        policy.map(|p| p.on_expiry).unwrap_or_default().as_str().into(),
        (&filing.rule_name).into(),
        serde_json::to_string(&filing.context).ok().into(),
    ];
    // The request and its notification in one transaction (the outbox): a request is
    // never filed without its webhook queued, nor a webhook queued for no request.
    let mut tx = Tx::begin_write(db).await?;
    match tx.execute(Sql::with_args(sql, args)).await {
        Ok(_) => {}
        // Two agents raced with the same key: the first insert won; answer as for a repeat.
        Err(e) if is_unique_violation(&e) => {
            drop(tx);
            let existing = by_idempotency_key(db, request).await?.ok_or(StoreError::Database(e))?;
            return same_payload(existing, &payload, request).map(|a| (a, false));
        }
        Err(e) => return Err(e.into()),
    }
    for (rule, would) in &filing.shadow {
        tx.execute(Sql::with_args(
            "INSERT INTO approval_rule_shadow (rule_name, approval_id, would, at) VALUES ($1, $2, $3, $4)",
            vec![rule.as_str().into(), id.as_str().into(), would.as_str().into(), now.into()],
        ))
        .await?;
    }
    let select = format!("SELECT {SELECT_COLUMNS} FROM approvals WHERE id = $1");
    let row: ApprovalRow = tx.fetch_one(Sql::with_args(select, vec![id.as_str().into()])).await?;
    let created = Approval::try_from(row)?;
    if status == ApprovalStatus::Pending {
        super::webhooks::enqueue_in(&mut tx, &requested_event(&created), targets).await?;
    } else if let Some(rule) = &filing.rule_name {
        // A rule's decision is an ordinary decision: in the audit log, by `rule:<name>`.
        let actor = format!("rule:{rule}");
        let detail = created.decision_detail(status, created.reason.as_deref());
        let action = if status.is_approved() {
            super::audit::action::APPROVAL_APPROVED
        } else {
            super::audit::action::APPROVAL_DENIED
        };
        let entry = super::audit::NewEntry {
            actor: Some(&actor),
            action,
            target: Some(&created.id),
            detail: Some(&detail),
            source: None,
        };
        tx.execute(super::audit::insert(&entry)).await?;
    }
    // Last, so the shared count rows are held only until the commit.
    let mut counts = EventCounts::one(EventKind::ApprovalRequested, agent.as_deref(), now);
    if let Some(kind) = EventKind::of_approval_status(status.as_str()) {
        counts.add(kind, agent.as_deref(), now, 1);
    }
    super::trends::count_events(&mut tx, &counts).await?;
    tx.commit().await?;
    Ok((created, true))
}

fn same_payload(existing: Approval, payload: &str, request: &ValidRequest) -> StoreResult<Approval> {
    if existing.payload_sha256 == payload {
        Ok(existing)
    } else {
        Err(StoreError::Conflict(format!(
            "idempotency key `{}` was already used in run `{}` for a different payload (request {}, payload_sha256 {}); \
             a changed payload needs a new key",
            request.idempotency_key.as_deref().unwrap_or_default(),
            request.run_id,
            existing.id,
            existing.payload_sha256
        )))
    }
}

async fn by_idempotency_key(db: &Db, request: &ValidRequest) -> StoreResult<Option<Approval>> {
    let Some(key) = &request.idempotency_key else { return Ok(None) };
    let sql = format!("SELECT {SELECT_COLUMNS} FROM approvals WHERE run_id = $1 AND idempotency_key = $2");
    let row: Option<ApprovalRow> =
        db.fetch_optional(Sql::with_args(&sql, vec![(&request.run_id).into(), key.into()])).await?;
    Ok(row.map(Approval::try_from).transpose()?)
}

/// One request, with the people who approved its current payload so far.
pub async fn get(db: &Db, id: &str) -> StoreResult<Option<Approval>> {
    let sql = format!("SELECT {SELECT_COLUMNS} FROM approvals WHERE id = $1");
    let row: Option<ApprovalRow> = db.fetch_optional(Sql::with_args(&sql, vec![id.into()])).await?;
    let Some(mut approval) = row.map(Approval::try_from).transpose()? else { return Ok(None) };
    fill_votes(db, std::slice::from_mut(&mut approval)).await?;
    Ok(Some(approval))
}

/// Sets `approved_by` on the requests that need more than one approver (the others are
/// decided by their one vote, which `decided_by` already names).
async fn fill_votes(db: &Db, list: &mut [Approval]) -> StoreResult<()> {
    if list.is_empty() {
        return Ok(());
    }
    let ids: Vec<&str> = list.iter().map(|a| a.id.as_str()).collect();
    let mut votes: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    let mut edits: BTreeMap<String, Vec<ApprovalEdit>> = BTreeMap::new();
    for chunk in cacheable_chunks(&ids, IDS_PER_QUERY) {
        let mut sql =
            Sql::new("SELECT approval_id, payload_sha256, username FROM approval_votes WHERE approval_id IN ");
        sql.list(chunk.iter().copied()).push(" ORDER BY at, username");
        let rows: Vec<(String, String, String)> = db.fetch_all(sql).await?;
        for (id, hash, user) in rows {
            votes.entry((id, hash)).or_default().push(user);
        }
        let mut sql = Sql::new(
            "SELECT approval_id, username, at, changes, arguments, payload_sha256 FROM approval_edits \
             WHERE approval_id IN ",
        );
        sql.list(chunk.iter().copied()).push(" ORDER BY approval_id, seq");
        let rows: Vec<(String, String, i64, String, String, String)> = db.fetch_all(sql).await?;
        for (id, username, at, changes, arguments, payload_sha256) in rows {
            edits.entry(id).or_default().push(ApprovalEdit {
                username,
                at: from_ms(at),
                changes,
                arguments,
                payload_sha256,
            });
        }
    }
    for a in list.iter_mut() {
        a.approved_by = votes.remove(&(a.id.clone(), a.payload_sha256.clone())).unwrap_or_default();
        a.edits = edits.remove(&a.id).unwrap_or_default();
    }
    Ok(())
}

/// An approval's facts as `record_violations` selects them.
type FactsRow =
    (String, String, String, String, Option<String>, String, Option<i64>, Option<i64>, Option<i64>, Option<i64>);

fn approval_facts(r: FactsRow) -> ApprovalFacts {
    ApprovalFacts {
        id: r.0,
        tool: r.1,
        arguments_sha256: r.2,
        status: r.3,
        used_by_span: r.4,
        run_id: r.5,
        step_index: r.6,
        decided_at: r.7,
        use_by: r.8,
        requested_by_token: r.9,
    }
}

/// Filters for the inbox and the decided history; empty strings mean "any".
#[derive(Debug, Clone, Default)]
pub struct ApprovalFilter {
    pub agent: Option<String>,
    pub tool: Option<String>,
    pub decided_by: Option<String>,
    pub status: Option<ApprovalStatus>,
}

/// Pending requests, oldest first.
pub async fn pending(db: &Db, filter: &ApprovalFilter, limit: i64) -> StoreResult<Vec<Approval>> {
    let sql = format!(
        "SELECT {SELECT_COLUMNS} FROM approvals WHERE status = 'pending' AND ($1 IS NULL OR agent = $1) \
         AND ($2 IS NULL OR tool = $2) ORDER BY created_at, id LIMIT $3"
    );
    let rows: Vec<ApprovalRow> =
        db.fetch_all(Sql::with_args(&sql, vec![(&filter.agent).into(), (&filter.tool).into(), limit.into()])).await?;
    let mut list: Vec<Approval> = rows.into_iter().map(Approval::try_from).collect::<Result<_, _>>()?;
    fill_votes(db, &mut list).await?;
    Ok(list)
}

/// Decided, expired and cancelled requests, newest decision first.
pub async fn decided(db: &Db, filter: &ApprovalFilter, limit: i64) -> StoreResult<Vec<Approval>> {
    let sql = format!(
        "SELECT {SELECT_COLUMNS} FROM approvals WHERE status <> 'pending' AND ($1 IS NULL OR decided_by = $1) \
         AND ($2 IS NULL OR status = $2) AND ($3 IS NULL OR tool = $3) ORDER BY decided_at DESC, id LIMIT $4"
    );
    let rows: Vec<ApprovalRow> = db
        .fetch_all(Sql::with_args(
            &sql,
            vec![
                (&filter.decided_by).into(),
                filter.status.map(|s| s.as_str()).into(),
                (&filter.tool).into(),
                limit.into(),
            ],
        ))
        .await?;
    Ok(rows.into_iter().map(Approval::try_from).collect::<Result<_, _>>()?)
}

/// The requests of one run, oldest first.
pub async fn for_run(db: &Db, run_id: &str) -> StoreResult<Vec<Approval>> {
    let sql = format!("SELECT {SELECT_COLUMNS} FROM approvals WHERE run_id = $1 ORDER BY created_at, id");
    let rows: Vec<ApprovalRow> = db.fetch_all(Sql::with_args(&sql, vec![run_id.into()])).await?;
    Ok(rows.into_iter().map(Approval::try_from).collect::<Result<_, _>>()?)
}

pub async fn count_pending(db: &Db) -> StoreResult<i64> {
    let sql = "SELECT COUNT(*) FROM approvals WHERE status = 'pending'";
    Ok(db.fetch_one_value(Sql::new(sql)).await?)
}

/// The distinct agents and tools of pending requests, for the inbox filters.
pub async fn pending_facets(db: &Db) -> StoreResult<(Vec<String>, Vec<String>)> {
    let agents = "SELECT DISTINCT agent FROM approvals WHERE status = 'pending' AND agent IS NOT NULL ORDER BY agent";
    let tools = "SELECT DISTINCT tool FROM approvals WHERE status = 'pending' ORDER BY tool";
    let agents: Vec<String> = db.fetch_column(Sql::new(agents)).await?;
    let tools: Vec<String> = db.fetch_column(Sql::new(tools)).await?;
    Ok((agents, tools))
}

pub use domain::approvals::decision::Decision;

/// Who decides, and what they say.
#[derive(Debug, Clone, Copy)]
pub struct Decider<'a> {
    pub username: &'a str,
    pub reason: Option<&'a str>,
    /// A message back to the agent.
    pub respond: Option<&'a str>,
}

/// The row a decision reads, locked on PostgreSQL until the decision commits, so two
/// approvers of a two-person request count each other's votes.
#[derive(sqlx::FromRow)]
struct Deciding {
    status: String,
    agent: Option<String>,
    payload_sha256: String,
    expires_at: i64,
    required_approvals: i64,
    tool: String,
    original_payload_sha256: Option<String>,
}

/// Records a decision if the approver saw the payload the request is bound to, and
/// appends `audit` (when given) in the same transaction: a decision is never stored
/// without its audit entry, nor the entry without the decision. A denial by anyone is
/// final; an approval is a vote for the current payload's hash, final once
/// `required_approvals` distinct people gave one; an edit replaces the payload (keeping the
/// original once), votes for the new hash, and earlier votes for the old hash stop
/// counting. Refusals say why: unknown request, another payload, already decided (by
/// whom, when), expired, already approved by this person. The caller has checked the
/// role and who may not approve.
pub async fn decide(
    db: &Db,
    id: &str,
    decision: &Decision,
    shown_sha256: &str,
    by: Decider<'_>,
    audit: Option<&super::audit::NewEntry<'_>>,
) -> StoreResult<Approval> {
    let now = now_ms();
    let mut tx = Tx::begin_write(db).await?;
    let select = format!(
        "SELECT status, agent, payload_sha256, expires_at, required_approvals, tool, original_payload_sha256 \
         FROM approvals \
         WHERE id = $1{}",
        tx.lock_rows()
    );
    let row: Option<Deciding> = tx.fetch_optional(Sql::with_args(select, vec![id.into()])).await?;
    let Some(row) = row else {
        return Err(StoreError::NotFound(format!("approval request {id}")));
    };
    if row.status != "pending" || row.payload_sha256 != shown_sha256 || row.expires_at <= now {
        drop(tx);
        let current = get(db, id).await?.ok_or_else(|| StoreError::NotFound(format!("approval request {id}")))?;
        return Err(StoreError::Conflict(current.refusal(shown_sha256, now)));
    }
    // A denial, or the vote that makes an approval final, is a decision the trends count.
    let mut decided = false;
    let hash = match decision {
        Decision::Deny => {
            decided = true;
            tx.execute(Sql::with_args(
                "UPDATE approvals SET status = 'denied', decided_by = $1, decided_at = $2, reason = $3, respond = $4 \
                 WHERE id = $5 AND status = 'pending'",
                vec![by.username.into(), now.into(), by.reason.into(), by.respond.into(), id.into()],
            ))
            .await?;
            None
        }
        Decision::Approve => Some(row.payload_sha256.clone()),
        Decision::ApproveWithChanges(edit) => {
            let hash = payload_sha256(&row.tool, &edit.arguments);
            tx.execute(Sql::with_args(
                "UPDATE approvals SET original_arguments = COALESCE(original_arguments, arguments), \
                 original_payload_sha256 = COALESCE(original_payload_sha256, payload_sha256), arguments = $1, \
                 payload_sha256 = $2, arguments_sha256 = $3, changes = $4, respond = COALESCE($5, respond) \
                 WHERE id = $6 AND status = 'pending'",
                vec![
                    canonical_json(&edit.arguments).into(),
                    hash.as_str().into(),
                    arguments_sha256(&edit.arguments).into(),
                    edit.changes.as_str().into(),
                    by.respond.into(),
                    id.into(),
                ],
            ))
            .await?;
            tx.execute(Sql::with_args(
                "INSERT INTO approval_edits (approval_id, seq, username, at, arguments, payload_sha256, changes) \
                 SELECT $1, COALESCE(MAX(seq), 0) + 1, $2, $3, $4, $5, $6 FROM approval_edits WHERE approval_id = $1",
                vec![
                    id.into(),
                    by.username.into(),
                    now.into(),
                    canonical_json(&edit.arguments).into(),
                    hash.as_str().into(),
                    edit.changes.as_str().into(),
                ],
            ))
            .await?;
            Some(hash)
        }
    };
    if let Some(hash) = hash {
        let mut vote = Sql::new("INSERT INTO approval_votes (approval_id, username, payload_sha256, at) ");
        vote.values([()], |r, ()| {
            r.bind(id).bind(by.username).bind(hash.as_str()).bind(now);
        });
        vote.push(" ON CONFLICT (approval_id, username, payload_sha256) DO NOTHING");
        if tx.execute(vote).await? == 0 {
            return Err(StoreError::Conflict(domain::approvals::decision::already_voted(row.required_approvals)));
        }
        let count = Sql::with_args(
            "SELECT COUNT(*) FROM approval_votes WHERE approval_id = $1 AND payload_sha256 = $2",
            vec![id.into(), hash.as_str().into()],
        );
        let (votes,): (i64,) = tx.fetch_one(count).await?;
        let edited = matches!(decision, Decision::ApproveWithChanges(_)) || row.original_payload_sha256.is_some();
        if let Some(status) = domain::approvals::decision::after_vote(votes, row.required_approvals, edited) {
            decided = true;
            // An approval is good for a short window after it is given (the policy's,
            // copied in when the request was filed).
            tx.execute(Sql::with_args(
                "UPDATE approvals SET status = $1, decided_by = $2, decided_at = $3, reason = $4, \
                 use_by = $3 + COALESCE(use_within_seconds, $5) * 1000 WHERE id = $6 AND status = 'pending'",
                vec![
                    status.as_str().into(),
                    by.username.into(),
                    now.into(),
                    by.reason.into(),
                    DEFAULT_USE_WITHIN_SECONDS.into(),
                    id.into(),
                ],
            ))
            .await?;
        }
    }
    if let Some(entry) = audit {
        tx.execute(super::audit::insert(entry)).await?;
    }
    if decided {
        let counts = EventCounts::one(EventKind::ApprovalDecided, row.agent.as_deref(), now);
        super::trends::count_events(&mut tx, &counts).await?;
    }
    tx.commit().await?;
    get(db, id).await?.ok_or_else(|| StoreError::NotFound(format!("approval request {id}")))
}

/// Whether the request was filed by this API token: by its id, or, for requests filed
/// before ids were kept, by its name.
pub async fn filed_by(db: &Db, id: &str, token_id: i64, token_name: &str) -> StoreResult<bool> {
    let sql = "SELECT requested_by_token, requested_by FROM approvals WHERE id = $1";
    let row: Option<(Option<i64>, String)> = db.fetch_optional(Sql::with_args(sql, vec![id.into()])).await?;
    Ok(match row {
        Some((Some(filer), _)) => filer == token_id,
        Some((None, name)) => name == token_name,
        None => false,
    })
}

/// Cancels a pending request on the agent's behalf; a final request is returned unchanged.
pub async fn cancel(db: &Db, id: &str, by: &str) -> StoreResult<Option<Approval>> {
    let sql = "UPDATE approvals SET status = 'cancelled', decided_by = $1, decided_at = $2 \
               WHERE id = $3 AND status = 'pending'";
    db.execute(Sql::with_args(sql, vec![by.into(), now_ms().into(), id.into()])).await.map(|_| ())?;
    get(db, id).await
}

/// Pending requests past their expiry, each with what its policy says to do then.
pub async fn due(db: &Db, now: i64) -> StoreResult<Vec<(String, OnExpiry)>> {
    let sql = Sql::with_args(
        "SELECT id, on_expiry FROM approvals WHERE status = 'pending' AND expires_at <= $1 ORDER BY expires_at",
        vec![now.into()],
    );
    let rows: Vec<(String, String)> = db.fetch_all(sql).await?;
    Ok(rows.into_iter().map(|(id, on)| (id, OnExpiry::parse(&on).unwrap_or_default())).collect())
}

/// Marks a pending request past its expiry as `expired`, with the escalation its expiry
/// opened in the same statement, so nobody ever reads it expired without that
/// escalation. Returns whether it was still pending.
pub async fn expire(db: &Db, id: &str, now: i64, escalation_id: Option<&str>) -> StoreResult<bool> {
    let sql = Sql::with_args(
        "UPDATE approvals SET status = 'expired', decided_at = expires_at, escalation_id = COALESCE($1, escalation_id) \
         WHERE id = $2 AND status = 'pending' AND expires_at <= $3 RETURNING agent, decided_at",
        vec![escalation_id.into(), id.into(), now.into()],
    );
    // The expiry and its count in the trends in one transaction.
    let mut tx = Tx::begin_write(db).await?;
    let expired: Option<(Option<String>, i64)> = tx.fetch_optional(sql).await?;
    if let Some((agent, at)) = &expired {
        super::trends::count_events(&mut tx, &EventCounts::one(EventKind::ApprovalExpired, agent.as_deref(), *at))
            .await?;
    }
    tx.commit().await?;
    Ok(expired.is_some())
}

/// Pending requests picked for a bulk decision, in the order given (unknown ids left out).
pub async fn several(db: &Db, ids: &[String]) -> StoreResult<Vec<Approval>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut sql = Sql::new(&format!("SELECT {SELECT_COLUMNS} FROM approvals WHERE id IN "));
    sql.list(ids.iter().map(String::as_str));
    let rows: Vec<ApprovalRow> = db.fetch_all(sql).await?;
    let mut list: Vec<Approval> = rows.into_iter().map(Approval::try_from).collect::<Result<_, _>>()?;
    list.sort_by_key(|a| ids.iter().position(|id| *id == a.id));
    fill_votes(db, &mut list).await?;
    Ok(list)
}

#[derive(sqlx::FromRow)]
struct ViolationRow {
    trace_id: String,
    span_id: String,
    kind: String,
    run_id: String,
    tool: String,
    approval_id: Option<String>,
    detail: String,
    at: i64,
}

impl From<ViolationRow> for Violation {
    fn from(r: ViolationRow) -> Self {
        Violation {
            trace_id: r.trace_id,
            span_id: r.span_id,
            kind: ViolationKind::parse(&r.kind).unwrap_or(ViolationKind::NoApproval),
            run_id: r.run_id,
            tool: r.tool,
            approval_id: r.approval_id,
            detail: r.detail,
            at: from_ms(r.at),
        }
    }
}

const VIOLATION_COLUMNS: &str = "trace_id, span_id, kind, run_id, tool, approval_id, detail, at";

/// The violations of one run, in the order they were recorded.
pub async fn violations_for_run(db: &Db, run_id: &str) -> StoreResult<Vec<Violation>> {
    let sql = format!("SELECT {VIOLATION_COLUMNS} FROM approval_violations WHERE run_id = $1 ORDER BY at, span_id");
    let rows: Vec<ViolationRow> = db.fetch_all(Sql::with_args(&sql, vec![run_id.into()])).await?;
    Ok(rows.into_iter().map(Violation::from).collect())
}

/// The most recent violations across runs.
pub async fn recent_violations(db: &Db, limit: i64) -> StoreResult<Vec<Violation>> {
    let sql = format!("SELECT {VIOLATION_COLUMNS} FROM approval_violations ORDER BY at DESC, span_id LIMIT $1");
    let rows: Vec<ViolationRow> = db.fetch_all(Sql::with_args(&sql, vec![limit.into()])).await?;
    Ok(rows.into_iter().map(Violation::from).collect())
}

/// Inside the ingest transaction: checks every executed tool call in `spans` against the
/// approval rules ([`check`]), claims each approval's one use, and records violations
/// idempotently. `facts_by_run` holds every span of each run the write touches (stored
/// and new), for the per-run limits.
pub async fn record_violations(
    tx: &mut Tx,
    spans: &[NormalizedSpan],
    run_of: &BTreeMap<&str, String>,
    facts_by_run: &BTreeMap<String, Vec<SpanFacts>>,
    now: i64,
) -> StoreResult<()> {
    let executions = check::executions(spans, run_of);
    let ids: BTreeSet<&str> = executions.iter().filter_map(|(e, _)| e.approval_id).collect();
    let mut facts: BTreeMap<String, ApprovalFacts> = BTreeMap::new();
    for id in ids {
        let mut sql = Sql::new(
            "SELECT id, tool, arguments_sha256, status, used_by_span, run_id, step_index, decided_at, \
             use_by, requested_by_token FROM approvals WHERE id = ",
        );
        sql.bind(id);
        let row: Option<FactsRow> = tx.fetch_optional(sql).await?;
        facts.extend(row.map(|r| (r.0.clone(), approval_facts(r))));
    }
    let mut found: Vec<(&NormalizedSpan, ViolationKind, String)> = Vec::new();
    for (e, s) in &executions {
        let approval = e.approval_id.and_then(|id| facts.get(id));
        let mut verdict = check::check(e, approval, None);
        if let (None, Some(a)) = (&verdict, approval) {
            // Valid so far: claim the approval's one use. The conditional UPDATE makes a
            // concurrent second use on another instance lose, not both win.
            let mut sql = Sql::new("UPDATE approvals SET used_by_span = ");
            sql.bind(&e.span_key).push(", used_at = ").bind(now).push(" WHERE id = ").bind(&a.id);
            sql.push(" AND used_by_span IS NULL");
            let holder: Option<String> = if tx.execute(sql).await? == 1 {
                Some(e.span_key.clone())
            } else {
                let mut sql = Sql::new("SELECT used_by_span FROM approvals WHERE id = ");
                sql.bind(&a.id);
                tx.fetch_one::<(Option<String>,)>(sql).await?.0
            };
            verdict = check::check(e, approval, holder.as_deref());
        }
        if let Some((kind, detail)) = verdict {
            found.push((s, kind, detail));
        }
    }
    found.extend(check::over_run_limit(spans, run_of, facts_by_run));
    for (s, kind, detail) in found {
        let mut sql = Sql::new(
            "INSERT INTO approval_violations (trace_id, span_id, kind, run_id, tool, approval_id, detail, at) ",
        );
        sql.values([()], |row, ()| {
            row.bind(&s.trace_id)
                .bind(&s.span_id)
                .bind(kind.as_str())
                .bind(&run_of[s.trace_id.as_str()])
                .bind(s.tool_name.as_deref().unwrap_or_default())
                .bind(&s.approval_id)
                .bind(detail.as_str())
                .bind(now);
        });
        sql.push(" ON CONFLICT (trace_id, span_id, kind) DO NOTHING");
        tx.execute(sql).await?;
    }
    Ok(())
}

/// Inside the ingest transaction: sets each derived run's violation count from the
/// recorded violations (derivation itself only sees spans).
pub async fn count_violations(tx: &mut Tx, derived: &mut [RunDetail]) -> StoreResult<()> {
    for chunk in derived.chunks_mut(500) {
        let mut sql = Sql::new("SELECT run_id, COUNT(*) FROM approval_violations WHERE run_id IN ");
        sql.list(chunk.iter().map(|d| d.run.run_id.as_str()));
        sql.push(" GROUP BY run_id");
        let counts: BTreeMap<String, i64> = tx.fetch_all::<(String, i64)>(sql).await?.into_iter().collect();
        for d in chunk.iter_mut() {
            d.run.approval_violations = counts.get(&d.run.run_id).copied().unwrap_or(0);
        }
    }
    Ok(())
}
