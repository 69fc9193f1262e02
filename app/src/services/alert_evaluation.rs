//! One evaluation: for every rule, read its window from storage, run the pure rule and the
//! lifecycle, and record the transitions with their webhooks. The server calls this on an
//! interval from the instance that leads (`storage::alerts::Leadership`); tests call it
//! directly with a chosen clock.

use domain::alerts::lifecycle::reconcile;
use domain::alerts::rules::{self, Finding};
use domain::alerts::settings::RuleSettings;
use domain::alerts::{Alert, AlertRule};
use domain::notify::{EventKind, Notifications};
use store::{alerts as alert_store, Db, StoreResult};

/// What one evaluation changed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Report {
    pub fired: Vec<Alert>,
    pub resolved: Vec<Alert>,
    /// Rules whose window could not be read this time (the rest were still evaluated).
    pub failed_rules: Vec<(AlertRule, String)>,
    /// Firing alerts re-sent to Alertmanager's API.
    pub resent: usize,
}

/// Evaluates every rule as of `now_ms`. A rule switched off resolves its alerts at once;
/// `hold_ms` is how long a quiet rule's alert stays open before it resolves.
pub async fn evaluate_once(db: &Db, notifications: &Notifications, now_ms: i64, hold_ms: i64) -> StoreResult<Report> {
    let mut report = Report::default();
    for (rule, settings) in alert_store::settings(db).await? {
        let findings = if settings.enabled {
            match findings(db, rule, &settings, now_ms).await {
                Ok(f) => f,
                Err(e) => {
                    // Keep the rule's open alerts as they are rather than resolving them
                    // on missing data.
                    report.failed_rules.push((rule, e.to_string()));
                    continue;
                }
            }
        } else {
            Vec::new()
        };
        let open = alert_store::open_alerts(db, rule).await?;
        let hold = if settings.enabled { hold_ms } else { 0 };
        let transitions = reconcile(&open, findings, now_ms, hold);
        for (kind, alert) in
            alert_store::apply(db, rule, settings.severity, &transitions, now_ms, notifications).await?
        {
            match kind {
                EventKind::AlertResolved => report.resolved.push(alert),
                _ => report.fired.push(alert),
            }
        }
    }
    report.resent = alert_store::resend_to_alertmanager(db, notifications, now_ms).await?;
    Ok(report)
}

/// Reads the rule's window and runs the rule.
async fn findings(db: &Db, rule: AlertRule, s: &RuleSettings, now_ms: i64) -> StoreResult<Vec<Finding>> {
    let window_start = now_ms - s.window_seconds * 1000;
    Ok(match rule {
        AlertRule::IrreversibleExecutions => {
            rules::irreversible_executions(s, now_ms, &alert_store::irreversible_executions(db, window_start).await?)
        }
        AlertRule::ApprovalViolation => {
            rules::approval_violations(s, now_ms, &alert_store::approval_violations(db, window_start).await?)
        }
        AlertRule::DedupedSpike => {
            let baseline_start = window_start - s.baseline_seconds * 1000;
            rules::deduped_spike(s, &alert_store::deduped_counts(db, baseline_start, window_start).await?)
        }
        AlertRule::EscalationBacklog => {
            let before = rules::late_before_ms(s, now_ms);
            rules::escalation_backlog(s, now_ms, &alert_store::escalation_backlog(db, before, s.only_unclaimed).await?)
        }
        AlertRule::CostPerRunJump => {
            let baseline_start = window_start - s.baseline_seconds * 1000;
            let window = alert_store::cost_tail(db, window_start, now_ms).await?;
            let baseline = alert_store::baseline_cost_tail(db, baseline_start, window_start).await?;
            match rules::cost_per_run_jump(s, &window, &baseline) {
                None => Vec::new(),
                Some(jump) => {
                    let costliest =
                        alert_store::costliest_runs(db, window_start, now_ms, jump.limit, rules::ITEMS_READ).await?;
                    vec![rules::cost_jump_finding(s, &jump, &costliest)]
                }
            }
        }
        AlertRule::FailedToRecover => {
            rules::failed_to_recover(s, now_ms, &alert_store::failed_runs(db, window_start).await?)
        }
        AlertRule::CallOutcomeUnknown => rules::call_outcome_unknown(s, now_ms, &alert_store::silent_calls(db).await?),
        AlertRule::ReplayPassRate => {
            rules::replay_pass_rate(s, now_ms, &alert_store::replay_outcomes(db, window_start).await?)
        }
    })
}
