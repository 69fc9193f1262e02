//! Silences: "we know, stop notifying" for a while. A silence names any of a rule, an
//! agent and a tool, an end time and a reason; while it is active, an alert it matches
//! still fires, shows on /alerts and is marked silenced there, but its notifications are
//! not sent. Pure: storage keeps the silences and checks them when it queues an alert's
//! notifications.
//!
//! What "matches" means for each part (all the parts given must match):
//! - `rule`: the alert's rule.
//! - `tool`: an alert about that one tool (a per-tool limit, subject `tool:NAME`), or one
//!   whose items all concern it (their notes start with `NAME:` or `NAME `).
//! - `agent`: every run behind the alert belongs to that agent (so silencing a noisy agent
//!   never hides another agent's trouble in the same alert).

use super::{Alert, AlertRule};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// The longest a silence may last: long enough for a migration weekend, short enough
/// that nobody forgets one.
pub const MAX_DAYS: i64 = 14;
/// Longest reason kept.
pub const MAX_REASON_CHARS: usize = 500;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct Silence {
    pub id: String,
    pub rule: Option<AlertRule>,
    pub agent: Option<String>,
    pub tool: Option<String>,
    pub reason: String,
    pub created_by: String,
    pub created_at: DateTime<Utc>,
    pub ends_at: DateTime<Utc>,
    /// Set when someone ended it early.
    pub ended_by: Option<String>,
}

impl Silence {
    pub fn is_active(&self, now: DateTime<Utc>) -> bool {
        self.ended_by.is_none() && now < self.ends_at
    }

    /// "rule approval_violation, agent billing-bot" for lists and notes.
    pub fn scope(&self) -> String {
        let mut parts = Vec::new();
        if let Some(rule) = self.rule {
            parts.push(format!("rule {}", rule.as_str()));
        }
        if let Some(agent) = &self.agent {
            parts.push(format!("agent {agent}"));
        }
        if let Some(tool) = &self.tool {
            parts.push(format!("tool {tool}"));
        }
        parts.join(", ")
    }
}

/// A silence as asked for (from the alert page or the API), before it is checked.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct SilenceRequest {
    /// A rule name (`approval_violation`...).
    #[serde(default)]
    pub rule: Option<String>,
    #[serde(default)]
    pub agent: Option<String>,
    #[serde(default)]
    pub tool: Option<String>,
    /// How long, in minutes (at most 14 days).
    pub minutes: i64,
    pub reason: String,
}

/// A request that passed [`SilenceRequest::validate`].
#[derive(Debug, Clone, PartialEq)]
pub struct ValidSilence {
    pub rule: Option<AlertRule>,
    pub agent: Option<String>,
    pub tool: Option<String>,
    pub minutes: i64,
    pub reason: String,
}

impl SilenceRequest {
    /// Blank parts are "any"; at least one part is needed (a silence of everything would
    /// switch on-call off), a reason, and a duration of 1 minute to 14 days.
    pub fn validate(self) -> Result<ValidSilence, String> {
        let part = |v: Option<String>| v.map(|s| s.trim().to_string()).filter(|s| !s.is_empty());
        let rule = match part(self.rule) {
            Some(name) => Some(AlertRule::parse(&name).ok_or_else(|| format!("no alert rule `{name}`"))?),
            None => None,
        };
        let (agent, tool) = (part(self.agent), part(self.tool));
        if rule.is_none() && agent.is_none() && tool.is_none() {
            return Err(
                "name a rule, an agent or a tool to silence: a silence of everything would switch on-call off".into()
            );
        }
        if agent.iter().chain(tool.iter()).any(|s| s.chars().count() > 200) {
            return Err("an agent or tool name is at most 200 characters".into());
        }
        if !(1..=MAX_DAYS * 24 * 60).contains(&self.minutes) {
            return Err(format!("a silence lasts from 1 minute to {MAX_DAYS} days, not {} minutes", self.minutes));
        }
        let reason = self.reason.trim().to_string();
        if reason.is_empty() {
            return Err("say why (the reason is shown on every alert it silences)".into());
        }
        if reason.chars().count() > MAX_REASON_CHARS {
            return Err(format!("the reason is at most {MAX_REASON_CHARS} characters"));
        }
        Ok(ValidSilence { rule, agent, tool, minutes: self.minutes, reason })
    }
}

/// What a silence is matched against: the alert, and the agents of the runs behind it.
pub fn matches(silence: &Silence, alert: &Alert, agents_of_runs: &[String]) -> bool {
    if silence.rule.is_some_and(|r| r != alert.rule) {
        return false;
    }
    if let Some(tool) = &silence.tool {
        let about_tool = alert.subject.strip_prefix("tool:") == Some(tool.as_str())
            || (!alert.items.is_empty()
                && alert.items.iter().all(|i| {
                    i.note
                        .strip_prefix(tool.as_str())
                        .is_some_and(|rest| rest.starts_with(':') || rest.starts_with(' '))
                }));
        if !about_tool {
            return false;
        }
    }
    if let Some(agent) = &silence.agent {
        if agents_of_runs.is_empty() || agents_of_runs.iter().any(|a| a != agent) {
            return false;
        }
    }
    true
}

/// The first active silence that matches, if any.
pub fn silenced_by<'a>(
    silences: &'a [Silence],
    alert: &Alert,
    agents_of_runs: &[String],
    now: DateTime<Utc>,
) -> Option<&'a Silence> {
    silences.iter().find(|s| s.is_active(now) && matches(s, alert, agents_of_runs))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alerts::tests_support::alert;
    use crate::alerts::{AlertItem, ItemKind};

    fn silence(rule: Option<AlertRule>, agent: Option<&str>, tool: Option<&str>) -> Silence {
        let now = Utc::now();
        Silence {
            id: "sil_1".into(),
            rule,
            agent: agent.map(Into::into),
            tool: tool.map(Into::into),
            reason: "migrating the mail provider".into(),
            created_by: "olga".into(),
            created_at: now,
            ends_at: now + chrono::Duration::hours(1),
            ended_by: None,
        }
    }

    #[test]
    fn every_named_part_must_match() {
        let a = alert(); // approval_violation, one run item noted "send_email: no approval"
        let billing = vec!["billing-bot".to_string()];
        assert!(matches(&silence(Some(AlertRule::ApprovalViolation), None, None), &a, &billing));
        assert!(!matches(&silence(Some(AlertRule::DedupedSpike), None, None), &a, &billing));
        assert!(matches(&silence(None, Some("billing-bot"), Some("send_email")), &a, &billing));
        assert!(!matches(&silence(None, None, Some("send")), &a, &billing), "a tool name, not a prefix");
        assert!(!matches(&silence(None, Some("billing-bot"), None), &a, &["billing-bot".into(), "ops-bot".into()]));
        assert!(!matches(&silence(None, Some("billing-bot"), None), &a, &[]), "no runs: no agent to match");
        let mut per_tool = alert();
        per_tool.subject = "tool:delete_account".into();
        per_tool.items.push(AlertItem { kind: ItemKind::Run, id: "r2".into(), note: "other".into() });
        assert!(matches(&silence(None, None, Some("delete_account")), &per_tool, &[]));
    }

    #[test]
    fn only_active_silences_count() {
        let a = alert();
        let mut ended = silence(Some(AlertRule::ApprovalViolation), None, None);
        ended.ended_by = Some("olga".into());
        let mut over = silence(Some(AlertRule::ApprovalViolation), None, None);
        over.ends_at = Utc::now() - chrono::Duration::seconds(1);
        let live = silence(Some(AlertRule::ApprovalViolation), None, None);
        let now = Utc::now();
        assert!(silenced_by(&[ended.clone(), over.clone()], &a, &[], now).is_none());
        assert_eq!(silenced_by(&[ended, over, live.clone()], &a, &[], now), Some(&live));
    }

    #[test]
    fn requests_are_checked_with_the_reason() {
        let ok = SilenceRequest {
            rule: Some("approval_violation".into()),
            minutes: 60,
            reason: " deploy ".into(),
            ..Default::default()
        };
        let valid = ok.clone().validate().unwrap();
        assert_eq!((valid.rule, valid.reason.as_str()), (Some(AlertRule::ApprovalViolation), "deploy"));
        let bad = |r: SilenceRequest| r.validate().unwrap_err();
        assert!(bad(SilenceRequest { rule: Some(" ".into()), ..ok.clone() }).contains("switch on-call off"));
        assert!(bad(SilenceRequest { rule: Some("nope".into()), ..ok.clone() }).contains("no alert rule `nope`"));
        assert!(bad(SilenceRequest { minutes: 0, ..ok.clone() }).contains("1 minute to 14 days"));
        assert!(bad(SilenceRequest { minutes: 14 * 24 * 60 + 1, ..ok.clone() }).contains("14 days"));
        assert!(bad(SilenceRequest { reason: "  ".into(), ..ok.clone() }).contains("say why"));
    }
}
