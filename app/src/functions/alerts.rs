//! Alerts for the browser: the open alerts and the history, one alert, acknowledging
//! (role `operator`, audited), silences (created and ended by `operator`, audited), the
//! navigation count, and the rules' settings (read by anyone signed in, changed by
//! `admin`, audited with the old and new settings).

use crate::errors::AppError;
use chrono::{DateTime, Utc};
use domain::alerts::settings::RuleSettings;
use domain::alerts::silences::Silence;
use domain::alerts::{Alert, AlertRule};
use leptos::prelude::*;
use serde::{Deserialize, Serialize};

/// The evaluator's last run, so on-call can tell a quiet page from a stopped evaluator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LastEvaluation {
    pub instance: String,
    pub at: DateTime<Utc>,
    pub took_ms: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AlertsView {
    pub alerts: Vec<Alert>,
    pub last_evaluation: Option<LastEvaluation>,
    /// The signed-in user may acknowledge (holds `operator`).
    pub can_acknowledge: bool,
    pub now: DateTime<Utc>,
    /// Active silences, then recent ended ones.
    pub silences: Vec<Silence>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AlertView {
    pub alert: Alert,
    pub can_acknowledge: bool,
    pub now: DateTime<Utc>,
    /// The silence that held its notifications back, if one did.
    pub silence: Option<Silence>,
    /// The agent of every run behind it, when they are all one agent (to prefill a silence).
    pub agent: Option<String>,
    /// The rule's settings when it fired, if known.
    pub thresholds: Option<ThresholdsInForce>,
    /// What happened to it: fired, refreshed, acknowledged, silenced, resolved.
    #[serde(default)]
    pub timeline: Vec<domain::alerts::AlertEvent>,
    /// Every delivery of its events to a target, with how it went.
    #[serde(default)]
    pub deliveries: Vec<domain::models::WebhookDelivery>,
}

/// The version of a rule's settings an alert fired under.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThresholdsInForce {
    /// 0: the defaults.
    pub version: i64,
    pub settings: RuleSettings,
    pub saved_by: Option<String>,
    pub saved_at: Option<DateTime<Utc>>,
    /// The version in force now.
    pub current_version: i64,
}

#[server(prefix = "/fn", endpoint = "load_alerts")]
pub async fn load_alerts(resolved: bool) -> Result<AlertsView, AppError> {
    use super::ssr;
    let me = ssr::require(domain::access::Role::Viewer)?;
    let db = ssr::db()?;
    let alerts = store::alerts::list(&db, resolved, 200).await?;
    let last_evaluation = store::alerts::last_evaluation(&db).await?.map(|(instance, at, took_ms)| LastEvaluation {
        instance,
        at: store::from_ms(at),
        took_ms,
    });
    let silences = store::silences::list(&db, 50).await?;
    let can_acknowledge = me.can(domain::access::Role::Operator);
    Ok(AlertsView { alerts, last_evaluation, can_acknowledge, now: Utc::now(), silences })
}

#[server(prefix = "/fn", endpoint = "load_alert")]
pub async fn load_alert(id: String) -> Result<AlertView, AppError> {
    use super::ssr;
    let me = ssr::require(domain::access::Role::Viewer)?;
    let db = ssr::db()?;
    let Some(alert) = store::alerts::get(&db, &id).await? else {
        return ssr::fail(AppError::NotFound(format!("alert `{id}`")));
    };
    let silence = match &alert.silenced_by {
        Some(s) => store::silences::get(&db, s).await?,
        None => None,
    };
    let runs: Vec<&str> =
        alert.items.iter().filter(|i| i.kind == domain::alerts::ItemKind::Run).map(|i| i.id.as_str()).collect();
    let agents = store::silences::agents_of(&db, &runs).await?;
    let agent = match agents.as_slice() {
        [one] if !one.is_empty() => Some(one.clone()),
        _ => None,
    };
    let fired_under = match alert.rule_version {
        Some(version) => store::alerts::settings_version(&db, alert.rule, version).await?.map(|s| (version, s)),
        None => None,
    };
    let thresholds = match fired_under {
        Some((version, (settings, saved_by, saved_at))) => Some(ThresholdsInForce {
            version,
            settings,
            saved_by,
            saved_at,
            current_version: store::alerts::current_version(&db, alert.rule).await?,
        }),
        None => None,
    };
    let can_acknowledge = me.can(domain::access::Role::Operator);
    let timeline = store::alerts::timeline(&db, &alert.id, 200).await?;
    let deliveries = store::webhooks::for_alert(&db, &alert.id, 200).await?;
    Ok(AlertView { alert, can_acknowledge, now: Utc::now(), silence, agent, thresholds, timeline, deliveries })
}

/// Alerts firing (nobody acknowledged them) and acknowledged, for the navigation.
#[server(prefix = "/fn", endpoint = "alert_counts")]
pub async fn alert_counts() -> Result<(i64, i64), AppError> {
    use super::ssr;
    ssr::require(domain::access::Role::Viewer)?;
    Ok(store::alerts::counts(&ssr::db()?).await?)
}

#[server(prefix = "/fn", endpoint = "acknowledge_alert")]
pub async fn acknowledge_alert(id: String) -> Result<(), AppError> {
    use super::ssr;
    use store::StoreError;
    let me = ssr::require(domain::access::Role::Operator)?;
    let state = ssr::state()?;
    let db = state.db.clone();
    match store::alerts::acknowledge(&db, &id, &me.username, &state.notifications).await {
        Ok(_) => ssr::audit(&db, &me, store::audit::action::ALERT_ACKNOWLEDGED, &id, None).await,
        Err(StoreError::Conflict(why)) => ssr::fail(AppError::Conflict(why)),
        Err(StoreError::NotFound(what)) => ssr::fail(AppError::NotFound(what)),
        Err(e) => Err(e.into()),
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RulesView {
    pub rules: Vec<(AlertRule, RuleSettings)>,
    pub can_edit: bool,
}

#[server(prefix = "/fn", endpoint = "load_alert_rules")]
pub async fn load_alert_rules() -> Result<RulesView, AppError> {
    use super::ssr;
    let me = ssr::require(domain::access::Role::Viewer)?;
    let rules = store::alerts::settings(&ssr::db()?).await?;
    Ok(RulesView { rules, can_edit: me.can(domain::access::Role::Admin) })
}

/// Saves one rule's settings from the admin form. `per_tool` is one `tool = limit` per
/// line; checkboxes arrive only when ticked.
#[allow(clippy::too_many_arguments)]
#[server(prefix = "/fn", endpoint = "save_alert_rule")]
pub async fn save_alert_rule(
    rule: String,
    enabled: Option<String>,
    severity: String,
    window_seconds: Option<i64>,
    threshold: Option<f64>,
    baseline_seconds: Option<i64>,
    factor: Option<f64>,
    min_samples: Option<i64>,
    per_tool: Option<String>,
    only_unclaimed: Option<String>,
) -> Result<(), AppError> {
    use super::ssr;
    use domain::alerts::settings::ToolLimit;
    use domain::alerts::Severity;
    let me = ssr::require(domain::access::Role::Admin)?;
    let db = ssr::db()?;
    let Some(rule) = AlertRule::parse(&rule) else {
        return ssr::fail(AppError::Invalid(format!("unknown alert rule `{rule}`")));
    };
    let Some(severity) = Severity::parse(&severity) else {
        return ssr::fail(AppError::Invalid(format!("severity must be page, ticket or info, not `{severity}`")));
    };
    let mut limits = Vec::new();
    for line in per_tool.unwrap_or_default().lines().map(str::trim).filter(|l| !l.is_empty()) {
        let parsed = line
            .rsplit_once('=')
            .and_then(|(tool, limit)| Some((tool.trim().to_string(), limit.trim().parse::<i64>().ok()?)));
        match parsed {
            Some((tool, limit)) => limits.push(ToolLimit { tool, limit }),
            None => {
                return ssr::fail(AppError::Invalid(format!(
                    "per-tool limits are one `tool = number` per line; `{line}` is not"
                )))
            }
        }
    }
    let all = store::alerts::settings(&db).await?;
    let old = all.iter().find(|(r, _)| *r == rule).map(|(_, s)| s.clone()).unwrap_or(RuleSettings::default_for(rule));
    // A field the rule does not read keeps its value (the form leaves it out).
    let new = RuleSettings {
        enabled: enabled.is_some(),
        severity,
        window_seconds: window_seconds.unwrap_or(old.window_seconds),
        threshold: threshold.unwrap_or(old.threshold),
        baseline_seconds: baseline_seconds.unwrap_or(old.baseline_seconds),
        factor: factor.unwrap_or(old.factor),
        min_samples: min_samples.unwrap_or(old.min_samples),
        per_tool: limits,
        only_unclaimed: only_unclaimed.is_some(),
    };
    if let Err(why) = new.validate(rule) {
        return ssr::fail(AppError::Invalid(format!("{}: {why}", rule.title())));
    }
    store::alerts::save_settings(&db, rule, &new, &me.username).await?;
    let detail = serde_json::json!({ "before": old, "after": new }).to_string();
    ssr::audit(&db, &me, store::audit::action::ALERT_RULE_SAVED, rule.as_str(), Some(&detail)).await
}

/// Silences alerts from now for `minutes` (from the alert page's form: blank parts are
/// "any"). Made from alert `alert`, it must match that alert: one that would not is
/// refused, saying why. Open alerts it matches show as silenced at once. Role `operator`,
/// audited.
///
/// Without JavaScript a refused form comes back to the alert's page with what was chosen
/// in the address, so the form shows it again beside the error.
#[server(prefix = "/fn", endpoint = "create_silence")]
pub async fn create_silence(
    rule: Option<String>,
    agent: Option<String>,
    tool: Option<String>,
    minutes: i64,
    reason: String,
    #[server(default)] alert: Option<String>,
) -> Result<Silence, AppError> {
    use super::ssr;
    use domain::alerts::silences::SilenceRequest;
    let me = ssr::require(domain::access::Role::Operator)?;
    let db = ssr::db()?;
    let chosen = [("rule", &rule), ("agent", &agent), ("tool", &tool)].map(|(k, v)| (k, v.clone().unwrap_or_default()));
    let back = |err: AppError| -> Result<Silence, AppError> {
        match &alert {
            Some(id) => ssr::form_back_with(
                &format!("/alerts/{}", domain::url::encode(id)),
                &[
                    chosen[0].clone(),
                    chosen[1].clone(),
                    chosen[2].clone(),
                    ("minutes", minutes.to_string()),
                    ("reason", reason.clone()),
                ],
                <CreateSilence as leptos::server_fn::ServerFn>::PATH,
                err,
            ),
            None => ssr::fail(err),
        }
    };
    let request = SilenceRequest {
        rule: rule.clone(),
        agent: agent.clone(),
        tool: tool.clone(),
        minutes,
        reason: reason.clone(),
        schedule: None,
    };
    let valid = match request.validate() {
        Ok(v) => v,
        Err(why) => return back(AppError::Invalid(why)),
    };
    if let Some(id) = &alert {
        let Some(from) = store::alerts::get(&db, id).await? else {
            return back(AppError::NotFound(format!("alert `{id}`")));
        };
        let runs: Vec<&str> =
            from.items.iter().filter(|i| i.kind == domain::alerts::ItemKind::Run).map(|i| i.id.as_str()).collect();
        let agents = store::silences::agents_of(&db, &runs).await?;
        let why = domain::alerts::silences::why_not(
            valid.rule,
            valid.agent.as_deref(),
            valid.tool.as_deref(),
            &from,
            &agents,
        );
        if let Some(why) = why {
            return back(AppError::Invalid(format!("this silence would not match the alert it is made from: {why}")));
        }
    }
    let silence = store::silences::create(&db, &valid, &me.username).await?;
    let detail = format!("{}: {}", silence.scope(), silence.reason);
    ssr::audit(&db, &me, store::audit::action::SILENCE_CREATED, &silence.id, Some(&detail)).await?;
    store::alerts::hold_under(&db, &silence, store::now_ms()).await?;
    Ok(silence)
}

/// Ends an active silence now. Role `operator`, audited.
#[server(prefix = "/fn", endpoint = "end_silence")]
pub async fn end_silence(id: String) -> Result<(), AppError> {
    use super::ssr;
    use store::StoreError;
    let me = ssr::require(domain::access::Role::Operator)?;
    let db = ssr::db()?;
    match store::silences::end(&db, &id, &me.username).await {
        Ok(_) => ssr::audit(&db, &me, store::audit::action::SILENCE_ENDED, &id, None).await,
        Err(StoreError::Conflict(why)) => ssr::fail(AppError::Conflict(why)),
        Err(StoreError::NotFound(what)) => ssr::fail(AppError::NotFound(what)),
        Err(e) => Err(e.into()),
    }
}

/// A maintenance window: a silence active only from `from` to `to` (UTC, `HH:MM`) on the
/// ticked days, repeating for `weeks`. The days arrive as one checkbox each. Role
/// `operator`, audited.
#[allow(clippy::too_many_arguments)]
#[server(prefix = "/fn", endpoint = "create_maintenance_window")]
pub async fn create_maintenance_window(
    rule: Option<String>,
    agent: Option<String>,
    tool: Option<String>,
    mon: Option<String>,
    tue: Option<String>,
    wed: Option<String>,
    thu: Option<String>,
    fri: Option<String>,
    sat: Option<String>,
    sun: Option<String>,
    from: String,
    to: String,
    weeks: i64,
    reason: String,
) -> Result<Silence, AppError> {
    use super::ssr;
    use domain::alerts::silences::{SilenceRequest, Weekly, MAX_WEEKS};
    let me = ssr::require(domain::access::Role::Operator)?;
    let db = ssr::db()?;
    let ticked = [("mon", mon), ("tue", tue), ("wed", wed), ("thu", thu), ("fri", fri), ("sat", sat), ("sun", sun)];
    let days: Vec<String> = ticked.into_iter().filter(|(_, on)| on.is_some()).map(|(d, _)| d.to_string()).collect();
    let schedule = match Weekly::parse(&days, &from, &to) {
        Ok(w) => w,
        Err(why) => return ssr::fail(AppError::Invalid(why)),
    };
    if !(1..=MAX_WEEKS).contains(&weeks) {
        return ssr::fail(AppError::Invalid(format!("a maintenance window repeats for 1 to {MAX_WEEKS} weeks")));
    }
    let request = SilenceRequest { rule, agent, tool, minutes: weeks * 7 * 24 * 60, reason, schedule: Some(schedule) };
    let valid = match request.validate() {
        Ok(v) => v,
        Err(why) => return ssr::fail(AppError::Invalid(why)),
    };
    let silence = store::silences::create(&db, &valid, &me.username).await?;
    let detail = format!("{}: {}", silence.scope(), silence.reason);
    ssr::audit(&db, &me, store::audit::action::SILENCE_CREATED, &silence.id, Some(&detail)).await?;
    store::alerts::hold_under(&db, &silence, store::now_ms()).await?;
    Ok(silence)
}
