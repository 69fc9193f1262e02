//! Alerts in storage: each rule's settings, the windows of data the rules read, the
//! alerts themselves (firing → acknowledged → resolved; the resolved rows are the
//! history), the last evaluation, and the leader lock that lets one instance of several
//! evaluate.

use super::sql::{Backend, Sql, Tx};
use super::{from_ms, now_ms, Db, StoreError, StoreResult};
use domain::alerts::alertmanager::RESEND_EVERY_MS;
use domain::alerts::lifecycle::{OpenAlert, Transition};
use domain::alerts::rules::MAX_ITEMS;
use domain::alerts::rules::{
    Backlog, CostTail, DedupedCounts, Execution, FailedRun, OpenEscalation, RunCost, Violation, ITEMS_READ,
};
use domain::alerts::settings::RuleSettings;
use domain::alerts::silences::Silence;
use domain::alerts::{Alert, AlertEvent, AlertItem, AlertRule, AlertState, ItemKind, Severity, Unit};
use domain::escalations::COUNT_LIMIT;
use domain::notify::{EventKind, Notifications};
use domain::trends::rollup::whole_hours;

/// Every rule with its settings: the admin's if saved, else the defaults.
pub async fn settings(db: &Db) -> StoreResult<Vec<(AlertRule, RuleSettings)>> {
    let sql = "SELECT rule, settings FROM alert_rules";
    let saved: Vec<(String, String)> = db.fetch_all(Sql::new(sql)).await?;
    Ok(AlertRule::ALL
        .iter()
        .map(|rule| {
            let custom = saved
                .iter()
                .find(|(name, _)| name == rule.as_str())
                .and_then(|(_, json)| serde_json::from_str::<RuleSettings>(json).ok());
            (*rule, custom.unwrap_or_else(|| RuleSettings::default_for(*rule)))
        })
        .collect())
}

/// Saves a rule's settings (already validated by the caller) as its next version, and
/// keeps the version (see migration 0025). Returns the version number.
pub async fn save_settings(db: &Db, rule: AlertRule, settings: &RuleSettings, by: &str) -> StoreResult<i64> {
    let json = serde_json::to_string(settings).map_err(|e| sqlx::Error::Encode(Box::new(e)))?;
    let now = now_ms();
    let mut tx = Tx::begin_write(db).await?;
    let current = format!("SELECT version FROM alert_rules WHERE rule = $1{}", tx.lock_rows());
    let found: Option<(i64,)> = tx.fetch_optional(Sql::with_args(current, vec![rule.as_str().into()])).await?;
    let version = found.map_or(1, |(v,)| v + 1);
    let upsert =
        "INSERT INTO alert_rules (rule, settings, updated_by, updated_at, version) VALUES ($1, $2, $3, $4, $5) \
                  ON CONFLICT (rule) DO UPDATE SET settings = excluded.settings, updated_by = excluded.updated_by, \
                  updated_at = excluded.updated_at, version = excluded.version";
    let args = |sql: &str| {
        Sql::with_args(sql, vec![rule.as_str().into(), json.as_str().into(), by.into(), now.into(), version.into()])
    };
    tx.execute(args(upsert)).await?;
    let keep = "INSERT INTO alert_rule_versions (rule, settings, updated_by, updated_at, version) \
                VALUES ($1, $2, $3, $4, $5)";
    tx.execute(args(keep)).await?;
    tx.commit().await?;
    Ok(version)
}

/// One version of a rule's settings: (settings, who saved it, when). Version 0 is the
/// defaults (never saved).
pub async fn settings_version(
    db: &Db,
    rule: AlertRule,
    version: i64,
) -> StoreResult<Option<(RuleSettings, Option<String>, Option<chrono::DateTime<chrono::Utc>>)>> {
    if version == 0 {
        return Ok(Some((RuleSettings::default_for(rule), None, None)));
    }
    let sql = Sql::with_args(
        "SELECT settings, updated_by, updated_at FROM alert_rule_versions WHERE rule = $1 AND version = $2",
        vec![rule.as_str().into(), version.into()],
    );
    let rows: Vec<(String, Option<String>, i64)> = db.fetch_all(sql).await?;
    match rows.into_iter().next() {
        Some((json, by, at)) => Ok(Some((super::stored_json(&json)?, by, Some(from_ms(at))))),
        None => Ok(None),
    }
}

/// The version of `rule`'s settings in force now (0: the defaults).
pub async fn current_version(db: &Db, rule: AlertRule) -> StoreResult<i64> {
    let sql = Sql::with_args("SELECT version FROM alert_rules WHERE rule = $1", vec![rule.as_str().into()]);
    let rows: Vec<(i64,)> = db.fetch_all(sql).await?;
    Ok(rows.into_iter().next().map_or(0, |(v,)| v))
}

// ---- the windows the rules read -------------------------------------------------------

/// Irreversible tool calls that executed (ok, error or timeout) and ended after
/// `since_ms`, from `irreversible_calls` through its end-time index.
pub async fn irreversible_executions(db: &Db, since_ms: i64) -> StoreResult<Vec<Execution>> {
    let sql = "SELECT COALESCE(tool_name, ''), run_id, end_ns FROM irreversible_calls \
               WHERE end_ns > $1 AND outcome IN ('ok', 'error', 'timeout')";
    let rows: Vec<(String, String, i64)> =
        db.fetch_all(Sql::with_args(sql, vec![since_ms.saturating_mul(1_000_000).into()])).await?;
    Ok(rows.into_iter().map(|(tool, run_id, end_ns)| Execution { tool, run_id, at_ms: end_ns / 1_000_000 }).collect())
}

pub async fn approval_violations(db: &Db, since_ms: i64) -> StoreResult<Vec<Violation>> {
    let sql = "SELECT run_id, tool, kind, approval_id, at FROM approval_violations WHERE at > $1 ORDER BY at";
    let rows: Vec<(String, String, String, Option<String>, i64)> =
        db.fetch_all(Sql::with_args(sql, vec![since_ms.into()])).await?;
    Ok(rows
        .into_iter()
        .map(|(run_id, tool, kind, approval_id, at_ms)| Violation { run_id, tool, kind, approval_id, at_ms })
        .collect())
}

/// Tool calls and deduplicated calls of the runs started in `(window_start, now]`, read
/// from the runs, and in the baseline `(baseline_start, window_start]`, read from the
/// trends' hourly rollups over its whole hours (`whole_hours`): a day's hourly rows
/// instead of every run of the day.
pub async fn deduped_counts(db: &Db, baseline_start_ms: i64, window_start_ms: i64) -> StoreResult<DedupedCounts> {
    let totals =
        "SELECT CAST(COALESCE(SUM(tool_calls), 0) AS BIGINT), CAST(COALESCE(SUM(deduped_calls), 0) AS BIGINT) \
                  FROM runs WHERE started_ns > $1 AND started_ns <= $2";
    let top = "SELECT run_id, deduped_calls FROM runs WHERE started_ns > $1 AND deduped_calls > 0 \
               ORDER BY deduped_calls DESC, run_id LIMIT 1000";
    let ns = |ms: i64| ms.saturating_mul(1_000_000);
    let window: (i64, i64) =
        db.fetch_one(Sql::with_args(totals, vec![ns(window_start_ms).into(), i64::MAX.into()])).await?;
    let baseline = super::trends::hourly_calls(db, whole_hours(baseline_start_ms, window_start_ms)).await?;
    let runs: Vec<(String, i64)> = db.fetch_all(Sql::with_args(top, vec![ns(window_start_ms).into()])).await?;
    Ok(DedupedCounts {
        window_calls: window.0,
        window_deduped: window.1,
        baseline_calls: baseline.0,
        baseline_deduped: baseline.1,
        runs,
    })
}

/// The open escalations needed before `late_before_ms` (rule 4's late ones): counted on
/// the indexes `escalations_status_needed` and `escalations_open_unclaimed`, each up to
/// one past [`COUNT_LIMIT`], and the oldest [`ITEMS_READ`] of them (unclaimed only, when
/// `only_unclaimed`) read in the first one's order.
pub async fn escalation_backlog(db: &Db, late_before_ms: i64, only_unclaimed: bool) -> StoreResult<Backlog> {
    escalation_backlog_up_to(db, late_before_ms, only_unclaimed, COUNT_LIMIT).await
}

/// [`escalation_backlog`] with the count limit given (tests count to a handful).
pub async fn escalation_backlog_up_to(
    db: &Db,
    late_before_ms: i64,
    only_unclaimed: bool,
    limit: i64,
) -> StoreResult<Backlog> {
    let [late, unclaimed, oldest] = backlog_sql(db.backend(), late_before_ms, only_unclaimed, limit);
    let rows: Vec<(String, String, i64, Option<String>)> = db.fetch_all(oldest).await?;
    Ok(Backlog {
        late: db.fetch_one_value(late).await?,
        late_unclaimed: db.fetch_one_value(unclaimed).await?,
        oldest: rows
            .into_iter()
            .map(|(id, run_id, needed_at_ms, claimed_by)| OpenEscalation { id, run_id, needed_at_ms, claimed_by })
            .collect(),
    })
}

/// The backlog's statements: the late ones counted (to one past `limit`), the unclaimed
/// late ones counted (the same), the oldest read.
fn backlog_sql(backend: Backend, late_before_ms: i64, only_unclaimed: bool, limit: i64) -> [Sql; 3] {
    let late =
        "SELECT COUNT(*) FROM (SELECT 1 FROM escalations WHERE status = 'open' AND needed_at < $1 LIMIT $2) AS t";
    let unclaimed_index = backend.indexed_by("escalations", "escalations_open_unclaimed");
    let unclaimed = format!(
        "SELECT COUNT(*) FROM (SELECT 1 FROM {unclaimed_index} \
         WHERE status = 'open' AND claimed_by IS NULL AND needed_at < $1 LIMIT $2) AS t"
    );
    let from = if only_unclaimed { unclaimed_index.as_str() } else { "escalations" };
    let mut oldest = format!("SELECT id, run_id, needed_at, claimed_by FROM {from} WHERE status = 'open'");
    if only_unclaimed {
        oldest.push_str(" AND claimed_by IS NULL");
    }
    oldest.push_str(" AND needed_at < $1 ORDER BY needed_at, id LIMIT $2");
    [
        Sql::with_args(late, vec![late_before_ms.into(), (limit + 1).into()]),
        Sql::with_args(unclaimed, vec![late_before_ms.into(), (limit + 1).into()]),
        Sql::with_args(oldest, vec![late_before_ms.into(), (ITEMS_READ as i64).into()]),
    ]
}

/// Guarded calls that started and never reported (rule 7), from the ledger's database.
pub async fn silent_calls(db: &Db) -> StoreResult<Vec<domain::alerts::rules::SilentCall>> {
    let db = &db.ledger();
    let sql = "SELECT id, run_id, tool, step_index, natural_key, started_at FROM call_ledger \
               WHERE state IN ('started', 'unknown') ORDER BY started_at LIMIT 1000";
    let rows: Vec<(String, String, String, i64, String, i64)> = db.fetch_all(Sql::new(sql)).await?;
    Ok(rows
        .into_iter()
        .map(|(id, run_id, tool, step_index, natural_key, started_at_ms)| domain::alerts::rules::SilentCall {
            id,
            run_id,
            tool,
            step_index,
            natural_key,
            started_at_ms,
        })
        .collect())
}

/// Finished runs started in `(from_ms, to_ms]`: the range rule 5 reads on either side.
const COST_RANGE: &str = "started_ns > $1 AND started_ns <= $2 AND terminal_reason <> 'running'";

/// The upper tail of the costs of the finished runs started in `(from_ms, to_ms]`: their
/// number, then their highest costs, as many as [`CostTail::needed`] says (5 % and one).
/// The database keeps only those while it sorts (a top-N sort under `LIMIT`), so a day's
/// baseline of millions of runs costs the server a few kilobytes per thousand runs
/// instead of a row for each. Run in two statements: runs that arrive in between can
/// leave the tail one short, which reads as no quantile until the next evaluation.
pub async fn cost_tail(db: &Db, from_ms: i64, to_ms: i64) -> StoreResult<CostTail> {
    let (from_ns, to_ns) = (from_ms.saturating_mul(1_000_000), to_ms.saturating_mul(1_000_000));
    let count_sql = format!("SELECT COUNT(*) FROM runs WHERE {COST_RANGE}");
    let runs: i64 = db.fetch_one_value(Sql::with_args(&count_sql, vec![from_ns.into(), to_ns.into()])).await?;
    let runs = usize::try_from(runs).unwrap_or(0);
    let needed = CostTail::needed(runs);
    if needed == 0 {
        return Ok(CostTail { runs, highest: Vec::new() });
    }
    let tail_sql = format!("SELECT cost FROM runs WHERE {COST_RANGE} ORDER BY cost DESC LIMIT $3");
    let highest: Vec<f64> =
        db.fetch_column(Sql::with_args(&tail_sql, vec![from_ns.into(), to_ns.into(), (needed as i64).into()])).await?;
    Ok(CostTail { runs, highest })
}

/// The costs of the finished runs started in the baseline `(from_ms, to_ms]`, from the
/// trends' hourly rollups over its whole hours (`whole_hours`): per 2 % bin, so a
/// quantile is within 2 % of the runs' own, and a day of runs is a few thousand rows.
pub async fn baseline_cost_tail(db: &Db, from_ms: i64, to_ms: i64) -> StoreResult<CostTail> {
    let bins = super::trends::hourly_costs(db, whole_hours(from_ms, to_ms)).await?;
    Ok(CostTail::of_counts(bins.iter()))
}

/// The costliest finished runs started in `(from_ms, to_ms]` that cost more than `above`,
/// costliest first, at most `limit`: the items of a cost-per-run alert.
pub async fn costliest_runs(db: &Db, from_ms: i64, to_ms: i64, above: f64, limit: usize) -> StoreResult<Vec<RunCost>> {
    let sql = format!(
        "SELECT run_id, cost, started_ns FROM runs WHERE {COST_RANGE} AND cost > $3 \
         ORDER BY cost DESC, run_id LIMIT $4"
    );
    let rows: Vec<(String, f64, i64)> = db
        .fetch_all(Sql::with_args(
            &sql,
            vec![
                from_ms.saturating_mul(1_000_000).into(),
                to_ms.saturating_mul(1_000_000).into(),
                above.into(),
                (limit as i64).into(),
            ],
        ))
        .await?;
    Ok(rows
        .into_iter()
        .map(|(run_id, cost, started_ns)| RunCost { run_id, cost, started_ms: started_ns / 1_000_000 })
        .collect())
}

/// Regression-test results recorded since `since_ms` (rule 8).
pub async fn replay_outcomes(db: &Db, since_ms: i64) -> StoreResult<Vec<domain::alerts::rules::ReplayOutcome>> {
    let sql = Sql::with_args(
        "SELECT agent, fixture, run_id, passed, recorded_at FROM replay_results WHERE recorded_at >= $1",
        vec![since_ms.into()],
    );
    let rows: Vec<(String, String, Option<String>, bool, i64)> = db.fetch_all(sql).await?;
    Ok(rows
        .into_iter()
        .map(|(agent, fixture, run_id, passed, at_ms)| domain::alerts::rules::ReplayOutcome {
            agent,
            fixture,
            run_id,
            passed,
            at_ms,
        })
        .collect())
}

/// Runs that ended in `error` after `since_ms` and had a failed tool call (error or
/// timeout), with the first tool that failed.
pub async fn failed_runs(db: &Db, since_ms: i64) -> StoreResult<Vec<FailedRun>> {
    // The partial index `runs_failed_ended` walks only the window's failed runs; the write
    // path keeps each run's first failed tool in `failed_tool` ('' for none).
    let rows: Vec<(String, i64, Option<String>)> = db.fetch_all(failed_runs_sql(db.backend(), since_ms)).await?;
    let failed_run = |run_id: &str, ended_ns: i64, tool: &str| {
        (!tool.is_empty()).then(|| FailedRun {
            run_id: run_id.to_string(),
            failed_tool: tool.to_string(),
            ended_ms: ended_ns / 1_000_000,
        })
    };
    let mut failed: Vec<FailedRun> =
        rows.iter().filter_map(|(run, ended, tool)| failed_run(run, *ended, tool.as_deref()?)).collect();
    // Runs last written before migration 0033 have no `failed_tool` yet: their spans are
    // read, a few hundred runs at a time (all at once grew the server by ~90 MB under
    // sustained ingest). They leave the window within its length after an upgrade.
    let unknown: Vec<&(String, i64, Option<String>)> = rows.iter().filter(|(_, _, tool)| tool.is_none()).collect();
    for batch in unknown.chunks(FAILED_RUNS_PER_READ) {
        let ids: Vec<&str> = batch.iter().map(|(run, ..)| run.as_str()).collect();
        let facts = super::spans::facts_of_runs(db, &ids).await?;
        failed.extend(batch.iter().filter_map(|(run_id, ended_ns, _)| {
            failed_run(run_id, *ended_ns, domain::derive::first_failed_tool(facts.get(run_id)?)?)
        }));
    }
    Ok(failed)
}

/// Failed runs that ended after `since_ms`, through `runs_failed_ended` (SQLite's planner
/// took `runs_reason_started`, every failed run there is, for the equality).
fn failed_runs_sql(backend: Backend, since_ms: i64) -> Sql {
    let runs = backend.indexed_by("runs", "runs_failed_ended");
    Sql::with_args(
        format!("SELECT run_id, ended_ns, failed_tool FROM {runs} WHERE terminal_reason = 'error' AND ended_ns > $1"),
        vec![since_ms.saturating_mul(1_000_000).into()],
    )
}

/// Failed runs whose spans [`failed_runs`] reads at once.
const FAILED_RUNS_PER_READ: usize = 500;

// ---- alerts -----------------------------------------------------------------------------

const COLUMNS: &str = "id, rule, subject, severity, state, title, value, threshold, unit, items, fired_at, \
                       last_breach_at, acknowledged_by, acknowledged_at, resolved_at, silenced_by, rule_version, \
                       notified_at, items_total";

#[derive(sqlx::FromRow)]
struct AlertRow {
    id: String,
    rule: String,
    subject: String,
    severity: String,
    state: String,
    title: String,
    value: f64,
    threshold: f64,
    unit: String,
    items: String,
    fired_at: i64,
    last_breach_at: i64,
    acknowledged_by: Option<String>,
    acknowledged_at: Option<i64>,
    resolved_at: Option<i64>,
    silenced_by: Option<String>,
    rule_version: Option<i64>,
    notified_at: Option<i64>,
    items_total: Option<i64>,
}

impl AlertRow {
    fn into_alert(self) -> Result<Alert, sqlx::Error> {
        Ok(Alert {
            id: self.id,
            rule: AlertRule::parse(&self.rule).unwrap_or(AlertRule::ApprovalViolation),
            subject: self.subject,
            severity: Severity::parse(&self.severity).unwrap_or(Severity::Page),
            state: AlertState::parse(&self.state).unwrap_or(AlertState::Firing),
            title: self.title,
            value: self.value,
            threshold: self.threshold,
            unit: serde_json::from_value(serde_json::Value::String(self.unit)).unwrap_or(Unit::Count),
            items: super::stored_json(&self.items)?,
            fired_at: from_ms(self.fired_at),
            last_breach_at: from_ms(self.last_breach_at),
            acknowledged_by: self.acknowledged_by,
            acknowledged_at: self.acknowledged_at.map(from_ms),
            resolved_at: self.resolved_at.map(from_ms),
            silenced_by: self.silenced_by,
            rule_version: self.rule_version,
            notified_at: self.notified_at.map(from_ms),
            items_total: self.items_total,
        })
    }
}

fn unit_text(unit: Unit) -> String {
    serde_json::to_value(unit).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
}

/// The items an alert keeps (the first [`MAX_ITEMS`]) as stored, and how many there were
/// when there were more.
fn kept_items(items: &[AlertItem]) -> (String, Option<i64>) {
    let kept = &items[..items.len().min(MAX_ITEMS)];
    let json = serde_json::to_string(kept).unwrap_or_else(|_| "[]".into());
    (json, (items.len() > MAX_ITEMS).then_some(items.len() as i64))
}

fn new_id() -> String {
    use rand::RngCore;
    let mut bytes = [0u8; 12];
    rand::thread_rng().fill_bytes(&mut bytes);
    format!("alr_{}", hex::encode(bytes))
}

/// The rule's alerts that are not resolved.
pub async fn open_alerts(db: &Db, rule: AlertRule) -> StoreResult<Vec<OpenAlert>> {
    let sql = "SELECT id, subject, last_breach_at FROM alerts WHERE rule = $1 AND state <> 'resolved'";
    let rows: Vec<(String, String, i64)> = db.fetch_all(Sql::with_args(sql, vec![rule.as_str().into()])).await?;
    Ok(rows.into_iter().map(|(id, subject, last_breach_ms)| OpenAlert { id, subject, last_breach_ms }).collect())
}

/// Appends an entry to an alert's timeline, inside the transaction that changed it.
async fn timeline_entry(
    tx: &mut Tx,
    alert_id: &str,
    at: i64,
    kind: &str,
    actor: Option<&str>,
    detail: Option<&str>,
) -> StoreResult<()> {
    let sql = "INSERT INTO alert_events (alert_id, at, kind, actor, detail) VALUES ($1, $2, $3, $4, $5)";
    tx.execute(Sql::with_args(sql, vec![alert_id.into(), at.into(), kind.into(), actor.into(), detail.into()])).await?;
    Ok(())
}

async fn alert_in(tx: &mut Tx, id: &str) -> StoreResult<Alert> {
    let row: AlertRow =
        tx.fetch_one(Sql::with_args(format!("SELECT {COLUMNS} FROM alerts WHERE id = $1"), vec![id.into()])).await?;
    Ok(row.into_alert()?)
}

/// A refresh adds a timeline entry at most this often (an alert can change at every
/// evaluation for hours).
const REFRESH_ENTRY_EVERY_MS: i64 = 5 * 60_000;

/// Writes one rule's transitions: new alerts (returned as firing), refreshed ones (their
/// ids), resolved ones (returned as resolved), each with its timeline entry. A refresh
/// adds an entry only when something changed (`lifecycle::what_changed`), at most one every
/// [`REFRESH_ENTRY_EVERY_MS`].
async fn write_transitions(
    tx: &mut Tx,
    rule: AlertRule,
    severity: Severity,
    transitions: &[Transition],
    now: i64,
) -> StoreResult<(Vec<(EventKind, Alert)>, Vec<String>)> {
    // The settings' version in force is recorded with the alert (0: the defaults).
    let insert = "INSERT INTO alerts (id, rule, subject, severity, state, title, value, threshold, unit, items, \
                  items_total, fired_at, last_breach_at, updated_at, rule_version) VALUES ($1, $2, $3, $4, 'firing', \
                  $5, $6, $7, $8, $9, $10, $11, $11, $11, COALESCE((SELECT version FROM alert_rules WHERE rule = $2), 0))";
    let changed = "INSERT INTO alert_events (alert_id, at, kind, detail) SELECT $1, $2, 'refreshed', $3 \
                   WHERE NOT EXISTS (SELECT 1 FROM alert_events WHERE alert_id = $1 AND kind = 'refreshed' AND at > $4)";
    let refresh = "UPDATE alerts SET severity = $2, title = $3, value = $4, threshold = $5, unit = $6, items = $7, \
                   items_total = $8, last_breach_at = $9, updated_at = $9 WHERE id = $1 AND state <> 'resolved'";
    let resolve =
        "UPDATE alerts SET state = 'resolved', resolved_at = $2, updated_at = $2 WHERE id = $1 AND state <> 'resolved'";
    let mut announced = Vec::new();
    let mut refreshed = Vec::new();
    for t in transitions {
        match t {
            Transition::Fire(f) => {
                let id = new_id();
                let (items, total) = kept_items(&f.items);
                let args = vec![
                    id.as_str().into(),
                    rule.as_str().into(),
                    f.subject.as_str().into(),
                    severity.as_str().into(),
                    f.title.as_str().into(),
                    f.value.into(),
                    f.threshold.into(),
                    unit_text(f.unit).into(),
                    items.into(),
                    total.into(),
                    now.into(),
                ];
                tx.execute(Sql::with_args(insert, args)).await?;
                timeline_entry(tx, &id, now, "fired", None, Some(&f.title)).await?;
                announced.push((EventKind::AlertFiring, alert_in(tx, &id).await?));
            }
            Transition::Refresh { id, finding: f } => {
                let before = alert_in(tx, id).await?;
                if let Some(what) = domain::alerts::lifecycle::what_changed(&before, f) {
                    let args = vec![id.as_str().into(), now.into(), what.into(), (now - REFRESH_ENTRY_EVERY_MS).into()];
                    tx.execute(Sql::with_args(changed, args)).await?;
                }
                let (items, total) = kept_items(&f.items);
                let args = vec![
                    id.as_str().into(),
                    severity.as_str().into(),
                    f.title.as_str().into(),
                    f.value.into(),
                    f.threshold.into(),
                    unit_text(f.unit).into(),
                    items.into(),
                    total.into(),
                    now.into(),
                ];
                tx.execute(Sql::with_args(refresh, args)).await?;
                refreshed.push(id.clone());
            }
            Transition::Resolve { id } => {
                if tx.execute(Sql::with_args(resolve, vec![id.as_str().into(), now.into()])).await? == 1 {
                    timeline_entry(tx, id, now, "resolved", None, None).await?;
                    announced.push((EventKind::AlertResolved, alert_in(tx, id).await?));
                }
            }
        }
    }
    Ok((announced, refreshed))
}

/// Records one rule's transitions and queues their webhooks (`alert.firing` for a new
/// alert, `alert.resolved` for a resolved one) to the targets of the alert's route, in the
/// same transaction, so an alert and its notification are committed together. Returns
/// what fired and what resolved.
///
/// Silences hold notifications back (the alerts are recorded all the same): an alert a
/// silence holds when it fires is marked and not notified, and is notified once its
/// silence is over if it still breaches. An alert that was notified keeps its incident up
/// to date whatever silences come later (its resolution is sent), and one that never was
/// sends nothing more.
pub async fn apply(
    db: &Db,
    rule: AlertRule,
    severity: Severity,
    transitions: &[Transition],
    now: i64,
    notifications: &Notifications,
) -> StoreResult<Vec<(EventKind, Alert)>> {
    if transitions.is_empty() {
        return Ok(Vec::new());
    }
    let mut tx = Tx::begin_write(db).await?;
    let (mut announced, refreshed) = write_transitions(&mut tx, rule, severity, transitions, now).await?;
    let silences = super::silences::active_in(&mut tx, now).await?;
    let mut notify = Vec::new();
    for (kind, alert) in &mut announced {
        match kind {
            EventKind::AlertFiring => match silence_of(&mut tx, &silences, alert, now).await? {
                Some(silence) => mark_silenced(&mut tx, alert, silence, now).await?,
                None => {
                    mark_notified(&mut tx, alert, now).await?;
                    notify.push((*kind, alert.clone()));
                }
            },
            _ if alert.notified_at.is_some() => notify.push((*kind, alert.clone())),
            _ => {}
        }
    }
    for id in refreshed {
        let mut alert = alert_in(&mut tx, &id).await?;
        let holding = silence_of(&mut tx, &silences, &alert, now).await?;
        match (alert.silenced_by.clone(), holding) {
            // A silence that began after it fired (a new one, or a window's hours).
            (None, Some(silence)) => mark_silenced(&mut tx, &mut alert, silence, now).await?,
            (Some(old), Some(silence)) if old != silence.id => {
                let sql = "UPDATE alerts SET silenced_by = $2 WHERE id = $1";
                tx.execute(Sql::with_args(sql, vec![id.as_str().into(), silence.id.as_str().into()])).await?;
            }
            (Some(_), None) => {
                let sql = "UPDATE alerts SET silenced_by = NULL WHERE id = $1";
                tx.execute(Sql::with_args(sql, vec![id.as_str().into()])).await?;
                if alert.notified_at.is_none() {
                    mark_notified(&mut tx, &mut alert, now).await?;
                    timeline_entry(&mut tx, &id, now, "notified", None, None).await?;
                    notify.push((EventKind::AlertFiring, Alert { silenced_by: None, ..alert }));
                } else {
                    timeline_entry(&mut tx, &id, now, "unsilenced", None, None).await?;
                }
            }
            _ => {}
        }
    }
    for (kind, alert) in &notify {
        let targets = notifications.for_alert(alert.rule.as_str(), alert.severity.as_str(), *kind);
        super::webhooks::enqueue_in(&mut tx, &domain::alerts::notification::event(alert, *kind), &targets).await?;
    }
    tx.commit().await?;
    Ok(announced)
}

/// Marks `alert` held back by `silence`, with its timeline entry.
async fn mark_silenced(tx: &mut Tx, alert: &mut Alert, silence: &Silence, now: i64) -> StoreResult<()> {
    let sql = "UPDATE alerts SET silenced_by = $2 WHERE id = $1";
    tx.execute(Sql::with_args(sql, vec![alert.id.as_str().into(), silence.id.as_str().into()])).await?;
    let detail =
        format!("{} until {}: {}", silence.scope(), silence.ends_at.format("%Y-%m-%d %H:%M UTC"), silence.reason);
    timeline_entry(tx, &alert.id, now, "silenced", Some(&silence.created_by), Some(&detail)).await?;
    alert.silenced_by = Some(silence.id.clone());
    Ok(())
}

/// Notes that `alert`'s firing is being sent now.
async fn mark_notified(tx: &mut Tx, alert: &mut Alert, now: i64) -> StoreResult<()> {
    let sql = "UPDATE alerts SET notified_at = $2 WHERE id = $1";
    tx.execute(Sql::with_args(sql, vec![alert.id.as_str().into(), now.into()])).await?;
    alert.notified_at = Some(from_ms(now));
    Ok(())
}

/// The active silence that holds `alert` back, if any.
async fn silence_of<'a>(
    tx: &mut Tx,
    silences: &'a [Silence],
    alert: &Alert,
    now: i64,
) -> StoreResult<Option<&'a Silence>> {
    if silences.is_empty() {
        return Ok(None);
    }
    let agents = agents_behind(tx, alert).await?;
    Ok(domain::alerts::silences::silenced_by(silences, alert, &agents, from_ms(now)))
}

/// The agents of the runs behind `alert`.
async fn agents_behind(tx: &mut Tx, alert: &Alert) -> StoreResult<Vec<String>> {
    let runs: Vec<&str> = alert.items.iter().filter(|i| i.kind == ItemKind::Run).map(|i| i.id.as_str()).collect();
    super::silences::agents_of_runs(tx, &runs).await
}

/// Marks the open alerts a new silence matches as held back by it (when it is active
/// now): the alert it was made from shows as silenced at once, without waiting for the
/// next evaluation. Their notifications already sent stand. Returns the alerts marked.
pub async fn hold_under(db: &Db, silence: &Silence, now: i64) -> StoreResult<Vec<String>> {
    if !silence.is_active(from_ms(now)) {
        return Ok(Vec::new());
    }
    let mut tx = Tx::begin_write(db).await?;
    let sql = format!("SELECT {COLUMNS} FROM alerts WHERE state <> 'resolved' AND silenced_by IS NULL");
    let rows: Vec<AlertRow> = tx.fetch_all(Sql::new(&sql)).await?;
    let mut marked = Vec::new();
    for row in rows {
        let mut alert = row.into_alert()?;
        let agents = agents_behind(&mut tx, &alert).await?;
        if domain::alerts::silences::matches(silence, &alert, &agents) {
            mark_silenced(&mut tx, &mut alert, silence, now).await?;
            marked.push(alert.id);
        }
    }
    tx.commit().await?;
    Ok(marked)
}

/// Re-sends every notified alert that still fires (acknowledged or not) to the
/// Alertmanager API targets of its route whose last delivery of it is
/// [`RESEND_EVERY_MS`] old or more: Alertmanager forgets an alert whose `endsAt` passes.
/// Nothing piles up while a target is down: a pair with a delivery still pending waits
/// for it. Returns how many re-sends were queued.
pub async fn resend_to_alertmanager(db: &Db, notifications: &Notifications, now: i64) -> StoreResult<usize> {
    use domain::notify::WebhookFormat;
    if !notifications.targets.iter().any(|t| t.format == WebhookFormat::AlertmanagerApi) {
        return Ok(0);
    }
    let sql = format!("SELECT {COLUMNS} FROM alerts WHERE state <> 'resolved' AND notified_at IS NOT NULL");
    let rows: Vec<AlertRow> = db.fetch_all(Sql::new(&sql)).await?;
    let mut queued = 0;
    for row in rows {
        let alert = row.into_alert()?;
        let kind = EventKind::AlertFiring;
        let targets = notifications.for_alert(alert.rule.as_str(), alert.severity.as_str(), kind);
        for target in targets.into_iter().filter(|t| t.format == WebhookFormat::AlertmanagerApi) {
            let last = Sql::with_args(
                "SELECT MAX(created_at), COUNT(CASE WHEN status = 'pending' THEN 1 END) FROM webhook_deliveries \
                 WHERE order_key = $1 AND target_name = $2",
                vec![alert.id.as_str().into(), target.name.as_str().into()],
            );
            let found: Vec<(Option<i64>, i64)> = db.fetch_all(last).await?;
            let (last_at, pending) = found.first().copied().unwrap_or((None, 0));
            if pending == 0 && last_at.is_none_or(|at| at <= now - RESEND_EVERY_MS) {
                let event = domain::alerts::notification::event(&alert, kind);
                queued += super::webhooks::enqueue(db, &event, std::slice::from_ref(&target)).await?;
            }
        }
    }
    Ok(queued)
}

/// An alert's timeline, oldest first: its first entry (when it fired) and the latest
/// `limit` others.
pub async fn timeline(db: &Db, id: &str, limit: i64) -> StoreResult<Vec<AlertEvent>> {
    let sql = Sql::with_args(
        "SELECT id, at, kind, actor, detail FROM alert_events WHERE alert_id = $1 \
         AND (kind = 'fired' OR id IN (SELECT id FROM alert_events WHERE alert_id = $1 ORDER BY id DESC LIMIT $2)) \
         ORDER BY id",
        vec![id.into(), limit.into()],
    );
    let rows: Vec<(i64, i64, String, Option<String>, Option<String>)> = db.fetch_all(sql).await?;
    Ok(rows
        .into_iter()
        .map(|(_, at, kind, actor, detail)| AlertEvent { at: from_ms(at), kind, actor, detail })
        .collect())
}

/// Open alerts (firing first, then acknowledged; pages, then tickets, then info; oldest first), or with
/// `resolved` the history, newest resolved first.
pub async fn list(db: &Db, resolved: bool, limit: i64) -> StoreResult<Vec<Alert>> {
    let sql = if resolved {
        format!("SELECT {COLUMNS} FROM alerts WHERE state = 'resolved' ORDER BY resolved_at DESC, id LIMIT $1")
    } else {
        format!(
            "SELECT {COLUMNS} FROM alerts WHERE state <> 'resolved' \
             ORDER BY CASE state WHEN 'firing' THEN 0 ELSE 1 END, CASE severity WHEN 'page' THEN 0 WHEN 'ticket' THEN 1 ELSE 2 END, \
             fired_at, id LIMIT $1"
        )
    };
    let rows: Vec<AlertRow> = db.fetch_all(Sql::with_args(&sql, vec![limit.into()])).await?;
    Ok(rows.into_iter().map(AlertRow::into_alert).collect::<Result<_, _>>()?)
}

pub async fn get(db: &Db, id: &str) -> StoreResult<Option<Alert>> {
    let sql = format!("SELECT {COLUMNS} FROM alerts WHERE id = $1");
    let row: Option<AlertRow> = db.fetch_optional(Sql::with_args(&sql, vec![id.into()])).await?;
    Ok(row.map(AlertRow::into_alert).transpose()?)
}

/// How many alerts are firing (nobody acknowledged) and how many are acknowledged.
pub async fn counts(db: &Db) -> StoreResult<(i64, i64)> {
    let sql = "SELECT CAST(COALESCE(SUM(CASE state WHEN 'firing' THEN 1 ELSE 0 END), 0) AS BIGINT), \
                      CAST(COALESCE(SUM(CASE state WHEN 'acknowledged' THEN 1 ELSE 0 END), 0) AS BIGINT) \
               FROM alerts WHERE state <> 'resolved'";
    Ok(db.fetch_one(Sql::new(sql)).await?)
}

/// Marks a firing alert acknowledged by `user` and queues `alert.acknowledged` to its
/// route's targets (PagerDuty acknowledges the incident), in one transaction. A
/// conditional update, so of two people acknowledging at once one wins and the other is
/// told who.
pub async fn acknowledge(db: &Db, id: &str, user: &str, notifications: &Notifications) -> StoreResult<Alert> {
    let sql = "UPDATE alerts SET state = 'acknowledged', acknowledged_by = $2, acknowledged_at = $3, updated_at = $3 \
               WHERE id = $1 AND state = 'firing'";
    let now = now_ms();
    let mut tx = Tx::begin_write(db).await?;
    let done = tx.execute(Sql::with_args(sql, vec![id.into(), user.into(), now.into()])).await?;
    let select = format!("SELECT {COLUMNS} FROM alerts WHERE id = $1");
    let row: Option<AlertRow> = tx.fetch_optional(Sql::with_args(select, vec![id.into()])).await?;
    let alert = row.ok_or_else(|| StoreError::NotFound(format!("alert `{id}`")))?.into_alert()?;
    if done == 1 {
        timeline_entry(&mut tx, id, now, "acknowledged", Some(user), None).await?;
    }
    // One held back by a silence from its start was never notified: nothing to update.
    if done == 1 && alert.notified_at.is_none() {
        tx.commit().await?;
        return Ok(alert);
    }
    if done == 1 {
        let kind = EventKind::AlertAcknowledged;
        let targets = notifications.for_alert(alert.rule.as_str(), alert.severity.as_str(), kind);
        super::webhooks::enqueue_in(&mut tx, &domain::alerts::notification::event(&alert, kind), &targets).await?;
        tx.commit().await?;
        return Ok(alert);
    }
    drop(tx);
    Err(StoreError::Conflict(match alert.state {
        AlertState::Acknowledged => format!(
            "already acknowledged by {} at {}",
            alert.acknowledged_by.as_deref().unwrap_or("someone"),
            alert.acknowledged_at.map(|t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string()).unwrap_or_default()
        ),
        _ => format!(
            "this alert resolved at {}; nothing to acknowledge",
            alert.resolved_at.map(|t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string()).unwrap_or_default()
        ),
    }))
}

/// Notes that `instance` finished an evaluation.
pub async fn record_evaluation(db: &Db, instance: &str, at_ms: i64, took_ms: i64) -> StoreResult<()> {
    let sql = "INSERT INTO alert_evaluator (id, instance, evaluated_at, took_ms) VALUES (1, $1, $2, $3) \
               ON CONFLICT (id) DO UPDATE SET instance = excluded.instance, evaluated_at = excluded.evaluated_at, \
               took_ms = excluded.took_ms";
    db.execute(Sql::with_args(sql, vec![instance.into(), at_ms.into(), took_ms.into()])).await.map(|_| ())?;
    Ok(())
}

/// The last evaluation: which instance, when, and how long it took.
pub async fn last_evaluation(db: &Db) -> StoreResult<Option<(String, i64, i64)>> {
    let sql = "SELECT instance, evaluated_at, took_ms FROM alert_evaluator WHERE id = 1";
    Ok(db.fetch_optional(Sql::new(sql)).await?)
}

// ---- leadership -------------------------------------------------------------------------

/// Which of several instances evaluates. On PostgreSQL: whoever holds a session-level
/// advisory lock, on a connection of its own kept for as long as it leads. When the
/// leader dies its connection closes, PostgreSQL releases the lock, and the next instance
/// to try takes it. SQLite serves one instance, which always leads.
pub struct Leadership {
    db: Db,
    key: i64,
    held: Option<sqlx::PgConnection>,
}

/// The advisory lock key: "flightdeck alerts" in a 64-bit number, so it stays clear of
/// other applications' keys in a shared database.
pub const EVALUATOR_LOCK_KEY: i64 = 0x0F11_6874_A1E7;

impl Leadership {
    pub fn new(db: Db) -> Leadership {
        Leadership { db, key: EVALUATOR_LOCK_KEY, held: None }
    }

    /// Whether this instance leads now, taking the lead if nobody holds it.
    pub async fn lead(&mut self) -> bool {
        let pool = match &self.db {
            Db::Sqlite { .. } => return true,
            Db::Postgres(pool) => pool.clone(),
        };
        if let Some(conn) = self.held.as_mut() {
            // The lock lives as long as the session: a live connection still holds it.
            if sqlx::query("SELECT 1").execute(&mut *conn).await.is_ok() {
                return true;
            }
            tracing::warn!("lost the alert evaluator's database connection; leadership is open again");
            self.held = None;
        }
        let Ok(mut conn) = pool.acquire().await else { return false };
        let took: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock($1)")
            .bind(self.key)
            .fetch_one(&mut *conn)
            .await
            .unwrap_or(false);
        if took {
            // Out of the pool: the lock must not be lent to other queries or closed by the
            // pool's idle reaper.
            self.held = Some(conn.detach());
        }
        took
    }

    /// Gives the lead up (on shutdown), so another instance takes over at once.
    pub async fn step_down(&mut self) {
        if let Some(mut conn) = self.held.take() {
            let _ = sqlx::query("SELECT pg_advisory_unlock($1)").bind(self.key).execute(&mut conn).await;
            let _ = sqlx::Connection::close(conn).await;
        }
    }
}

#[cfg(all(test, feature = "test-support"))]
mod tests {
    use super::*;

    /// The escalation backlog is counted on an index and its oldest read in index order,
    /// never by reading the whole queue.
    #[tokio::test]
    async fn the_backlog_is_counted_on_an_index_and_only_its_oldest_read() {
        let t = crate::testing::TestDb::sqlite().await;
        let plan = |sql: Sql| {
            let db = t.db.clone();
            async move {
                let plan: Vec<(i64, i64, i64, String)> = db.fetch_all(sql.query_plan()).await.unwrap();
                plan.into_iter().map(|row| row.3).collect::<Vec<String>>()
            }
        };
        for only_unclaimed in [false, true] {
            let [late, unclaimed, oldest] = backlog_sql(Backend::Sqlite, now_ms(), only_unclaimed, COUNT_LIMIT);
            for (sql, index) in [
                (late, "escalations_status_needed"),
                (unclaimed, "escalations_open_unclaimed"),
                (oldest, if only_unclaimed { "escalations_open_unclaimed" } else { "escalations_status_needed" }),
            ] {
                let steps = plan(sql).await;
                assert!(steps.iter().all(|s| !s.contains("TEMP B-TREE")), "{steps:?}");
                assert!(
                    steps.iter().any(|s| s.contains(index) && s.contains("needed_at<?")),
                    "not a range of {index}: {steps:?}"
                );
            }
        }
        // The window's failed runs only, not every failed run there is.
        let steps = plan(failed_runs_sql(Backend::Sqlite, now_ms())).await;
        assert!(steps[0].contains("runs_failed_ended (ended_ns>?)"), "{steps:?}");
        t.cleanup().await;
    }
}
