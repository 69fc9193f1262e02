//! The figures `/metrics` exposes, read from the database on each scrape: runs per
//! terminal reason, irreversible executions, deduplicated calls and duplicate side
//! effects, approval violations, pending approvals, open escalations, and cost per run.
//!
//! A scrape every 15 s must stay cheap on 100,000 runs and a million spans, so every
//! figure is an aggregate that reads a maintained total (`run_reason_counts`) or an index
//! that holds only the rows it counts (see `0011_metrics.sql`). The one read over spans
//! names `side_effect = 'irreversible'` exactly: the predicate of the partial indexes on
//! irreversible spans, so it never scans the others.

use super::sql::Sql;
use super::{Db, StoreResult};
use domain::alerts::{AlertRule, AlertState};
use domain::approvals::ViolationKind;
use domain::canonical::TerminalReason;
use domain::stats;
use std::collections::BTreeMap;

/// The quantiles of cost per run `/metrics` reports.
pub const COST_QUANTILES: [f64; 3] = [0.5, 0.95, 0.99];

/// Everything `/metrics` reads from storage at one moment.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Figures {
    /// Runs per terminal reason, every reason present (0 when none).
    pub runs_by_reason: Vec<(TerminalReason, i64)>,
    /// Executed irreversible tool calls (outcome ok, error or timeout) per tool name, in
    /// no particular order. A tool span without a name is listed under `""`.
    pub irreversible_by_tool: Vec<(String, i64)>,
    /// Tool calls answered from an idempotency cache (`outcome = deduped`), over all runs.
    pub deduped_calls: i64,
    /// Duplicate side effects (the same write or irreversible effect succeeding twice),
    /// over all runs.
    pub duplicate_side_effects: i64,
    /// Approval violations of retained runs per kind, every kind present.
    pub approval_violations: Vec<(ViolationKind, i64)>,
    pub approvals_pending: i64,
    /// When the oldest pending approval request was made (Unix ms).
    pub oldest_pending_approval_ms: Option<i64>,
    pub escalations_open: i64,
    /// Open escalations nobody has claimed.
    pub escalations_unclaimed: i64,
    /// When the oldest open escalation was opened (Unix ms).
    pub oldest_open_escalation_ms: Option<i64>,
    /// How many runs ended in the cost window.
    pub cost_window_runs: i64,
    /// `COST_QUANTILES` of cost per run over the runs that ended in the window, in order;
    /// `None` when no run ended in it.
    pub cost_quantiles: Vec<(f64, Option<f64>)>,
    /// Alerts not resolved, per rule and state (firing, acknowledged), every pair present.
    pub alerts_open: Vec<(AlertRule, AlertState, i64)>,
    /// Execution-ledger entries per tool and state, and per tool the asks answered
    /// `already_done` (the deduped count the article asks for).
    pub ledger_calls: Vec<(String, String, i64)>,
    pub ledger_deduped: Vec<(String, i64)>,
}

impl Figures {
    /// Irreversible executions over all tools.
    pub fn irreversible_total(&self) -> i64 {
        self.irreversible_by_tool.iter().map(|(_, n)| n).sum()
    }
}

/// Reads the figures. `cost_window_from_ms`: runs whose last span ended at or after it
/// (by the agent's clock) make up the cost quantiles.
pub async fn figures(db: &Db, cost_window_from_ms: i64) -> StoreResult<Figures> {
    let reasons: Vec<(String, i64)> =
        db.fetch_all(Sql::new("SELECT terminal_reason, runs FROM run_reason_counts")).await?;
    let reasons: BTreeMap<String, i64> = reasons.into_iter().collect();
    let runs_by_reason =
        TerminalReason::ALL.iter().map(|r| (*r, reasons.get(r.as_str()).copied().unwrap_or(0).max(0))).collect();

    // Through the (tool_name, outcome) index of `irreversible_calls`. Executions are the
    // outcomes where the effect may have happened; deduped and denied calls did nothing.
    let irreversible_sql = "SELECT COALESCE(tool_name, ''), COUNT(*) FROM irreversible_calls \
        WHERE outcome IN ('ok', 'error', 'timeout') GROUP BY tool_name";
    let irreversible_by_tool: Vec<(String, i64)> = db.fetch_all(Sql::new(irreversible_sql)).await?;

    // Each sum reads a partial index holding only the runs where the figure is non-zero.
    let deduped_calls: i64 = db
        .fetch_one_value(Sql::new(
            "SELECT CAST(COALESCE(SUM(deduped_calls), 0) AS BIGINT) FROM runs WHERE deduped_calls > 0",
        ))
        .await?;
    let duplicate_side_effects: i64 = db.fetch_one_value(Sql::new("SELECT CAST(COALESCE(SUM(duplicate_side_effects), 0) AS BIGINT) FROM runs WHERE duplicate_side_effects > 0")).await?;

    // Retention deletes runs but keeps their violation rows; count only those of retained
    // runs so the figure agrees with the run list's flag. Violations are rare, so the
    // per-row lookup of the run is cheap.
    let violations_sql = "SELECT v.kind, COUNT(*) FROM approval_violations v \
        WHERE EXISTS (SELECT 1 FROM run_ids i WHERE i.run_id = v.run_id) GROUP BY v.kind";
    let violations: Vec<(String, i64)> = db.fetch_all(Sql::new(violations_sql)).await?;
    let violations: BTreeMap<String, i64> = violations.into_iter().collect();
    let approval_violations =
        ViolationKind::ALL.iter().map(|k| (*k, violations.get(k.as_str()).copied().unwrap_or(0))).collect();

    let (approvals_pending, oldest_pending_approval_ms): (i64, Option<i64>) =
        db.fetch_one(Sql::new("SELECT COUNT(*), MIN(created_at) FROM approvals WHERE status = 'pending'")).await?;

    let (escalations_open, escalations_unclaimed, oldest_open_escalation_ms): (i64, i64, Option<i64>) = db.fetch_one(Sql::new("SELECT COUNT(*), CAST(COALESCE(SUM(CASE WHEN claimed_by IS NULL THEN 1 ELSE 0 END), 0) AS BIGINT), MIN(needed_at) FROM escalations WHERE status = 'open'")).await?;

    // Running runs have no `ended_ns`, so the range alone selects ended runs; the index
    // on (ended_ns, cost) answers it without visiting the rows.
    let cost_sql = "SELECT cost FROM runs WHERE ended_ns >= $1";
    let costs: Vec<f64> =
        db.fetch_column(Sql::with_args(cost_sql, vec![cost_window_from_ms.saturating_mul(1_000_000).into()])).await?;
    let cost_window_runs = costs.len() as i64;
    let cost_quantiles = COST_QUANTILES.iter().copied().zip(stats::quantiles(costs, &COST_QUANTILES)).collect();

    // Few rows: at most one unresolved alert per rule and subject.
    let alerts: Vec<(String, String, i64)> = db
        .fetch_all(Sql::new("SELECT rule, state, COUNT(*) FROM alerts WHERE state <> 'resolved' GROUP BY rule, state"))
        .await?;
    let alerts_open = AlertRule::ALL
        .iter()
        .flat_map(|rule| [AlertState::Firing, AlertState::Acknowledged].map(|state| (*rule, state)))
        .map(|(rule, state)| {
            let n = alerts.iter().find(|(r, s, _)| r == rule.as_str() && s == state.as_str()).map_or(0, |a| a.2);
            (rule, state, n)
        })
        .collect();

    let counts = super::ledger::counts(db).await?;
    let ledger_calls = counts.iter().map(|(tool, state, n, _)| (tool.clone(), state.clone(), *n)).collect();
    let mut ledger_deduped: BTreeMap<String, i64> = BTreeMap::new();
    for (tool, _, _, deduped) in &counts {
        *ledger_deduped.entry(tool.clone()).or_default() += deduped;
    }
    let ledger_deduped = ledger_deduped.into_iter().collect();
    Ok(Figures {
        runs_by_reason,
        irreversible_by_tool,
        deduped_calls,
        duplicate_side_effects,
        approval_violations,
        approvals_pending,
        oldest_pending_approval_ms,
        escalations_open,
        escalations_unclaimed,
        oldest_open_escalation_ms,
        cost_window_runs,
        cost_quantiles,
        alerts_open,
        ledger_calls,
        ledger_deduped,
    })
}
