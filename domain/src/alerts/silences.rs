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
//!
//! A **maintenance window** is a silence on a weekly schedule ([`Weekly`]): active only
//! inside its hours on its days (UTC), repeating until its end.

use super::{Alert, AlertRule};
use chrono::{DateTime, Datelike, Timelike, Utc, Weekday};
use serde::{Deserialize, Serialize};

/// The longest a silence may last: long enough for a migration weekend, short enough
/// that nobody forgets one.
pub const MAX_DAYS: i64 = 14;
/// The longest a maintenance window repeats.
pub const MAX_WEEKS: i64 = 52;

/// The hours of a maintenance window: on `days`, from `from_minute` to `to_minute` after
/// midnight UTC; a window whose end is before its start runs past midnight into the next
/// day (Saturday 22:00-02:00 ends on Sunday).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct Weekly {
    /// `mon` ... `sun`.
    pub days: Vec<String>,
    pub from_minute: i64,
    pub to_minute: i64,
}

const DAYS: [(&str, Weekday); 7] = [
    ("mon", Weekday::Mon),
    ("tue", Weekday::Tue),
    ("wed", Weekday::Wed),
    ("thu", Weekday::Thu),
    ("fri", Weekday::Fri),
    ("sat", Weekday::Sat),
    ("sun", Weekday::Sun),
];

impl Weekly {
    fn has(&self, day: Weekday) -> bool {
        self.days.iter().any(|d| DAYS.iter().any(|(name, w)| name == d && *w == day))
    }

    /// Whether `at` falls inside one of the window's occurrences.
    pub fn covers(&self, at: DateTime<Utc>) -> bool {
        let minute = i64::from(at.hour() * 60 + at.minute());
        let (from, to) = (self.from_minute, self.to_minute);
        if from < to {
            self.has(at.weekday()) && (from..to).contains(&minute)
        } else {
            (self.has(at.weekday()) && minute >= from) || (self.has(at.weekday().pred()) && minute < to)
        }
    }

    /// "sat, sun 22:00-02:00 UTC"
    pub fn describe(&self) -> String {
        let hm = |m: i64| format!("{:02}:{:02}", m / 60, m % 60);
        format!("{} {}-{} UTC", self.days.join(", "), hm(self.from_minute), hm(self.to_minute))
    }

    /// Reads `days` (names like `sat`, any case) and `HH:MM` times.
    pub fn parse(days: &[String], from: &str, to: &str) -> Result<Weekly, String> {
        let mut picked: Vec<String> = Vec::new();
        for day in days.iter().map(|d| d.trim().to_ascii_lowercase()).filter(|d| !d.is_empty()) {
            let Some((name, _)) = DAYS.iter().find(|(name, _)| day.starts_with(name)) else {
                return Err(format!("`{day}` is not a day (mon, tue, wed, thu, fri, sat, sun)"));
            };
            if !picked.iter().any(|p| p == name) {
                picked.push(name.to_string());
            }
        }
        if picked.is_empty() {
            return Err("a maintenance window needs at least one day".into());
        }
        picked.sort_by_key(|d| DAYS.iter().position(|(name, _)| name == d));
        let time = |t: &str| -> Result<i64, String> {
            let bad = || format!("`{t}` is not a time of day (HH:MM, UTC)");
            let (h, m) = t.trim().split_once(':').ok_or_else(bad)?;
            let (h, m): (i64, i64) = (h.parse().map_err(|_| bad())?, m.parse().map_err(|_| bad())?);
            if (0..24).contains(&h) && (0..60).contains(&m) {
                Ok(h * 60 + m)
            } else {
                Err(bad())
            }
        };
        let (from_minute, to_minute) = (time(from)?, time(to)?);
        if from_minute == to_minute {
            return Err("a maintenance window needs an end different from its start".into());
        }
        Ok(Weekly { days: picked, from_minute, to_minute })
    }
}
/// Longest reason kept.
pub const MAX_REASON_CHARS: usize = 500;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
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
    /// A maintenance window's hours; None for a plain silence (active until `ends_at`).
    #[serde(default)]
    pub schedule: Option<Weekly>,
}

impl Silence {
    /// Not ended, not over, and (for a maintenance window) inside its hours now.
    pub fn is_active(&self, now: DateTime<Utc>) -> bool {
        self.is_current(now) && self.schedule.as_ref().is_none_or(|w| w.covers(now))
    }

    /// Not ended and not over (a maintenance window between its hours is current but not
    /// active).
    pub fn is_current(&self, now: DateTime<Utc>) -> bool {
        self.ended_by.is_none() && now < self.ends_at
    }

    /// "rule “Tool ran without a valid approval”, agent billing-bot" for lists and notes.
    pub fn scope(&self) -> String {
        let mut parts = Vec::new();
        if let Some(rule) = self.rule {
            parts.push(format!("rule “{}”", rule.title()));
        }
        if let Some(agent) = &self.agent {
            parts.push(format!("agent {agent}"));
        }
        if let Some(tool) = &self.tool {
            parts.push(format!("tool {tool}"));
        }
        let mut text = parts.join(", ");
        if let Some(w) = &self.schedule {
            text.push_str(&format!(" (maintenance window {})", w.describe()));
        }
        text
    }
}

/// A silence as asked for (from the alert page or the API), before it is checked.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct SilenceRequest {
    /// A rule name (`approval_violation`...).
    #[serde(default)]
    pub rule: Option<String>,
    #[serde(default)]
    pub agent: Option<String>,
    #[serde(default)]
    pub tool: Option<String>,
    /// How long, in minutes (at most 14 days). For a maintenance window: how long it
    /// keeps repeating (at most 52 weeks).
    pub minutes: i64,
    pub reason: String,
    /// A maintenance window instead of a silence from now: its hours.
    #[serde(default)]
    pub schedule: Option<Weekly>,
}

/// A request that passed [`SilenceRequest::validate`].
#[derive(Debug, Clone, PartialEq)]
pub struct ValidSilence {
    pub rule: Option<AlertRule>,
    pub agent: Option<String>,
    pub tool: Option<String>,
    pub minutes: i64,
    pub reason: String,
    pub schedule: Option<Weekly>,
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
        let schedule = match self.schedule {
            Some(w) => Some(Weekly::parse(&w.days, &minute_text(w.from_minute), &minute_text(w.to_minute))?),
            None => None,
        };
        let longest = if schedule.is_some() { MAX_WEEKS * 7 * 24 * 60 } else { MAX_DAYS * 24 * 60 };
        if !(1..=longest).contains(&self.minutes) {
            return Err(match schedule {
                Some(_) => format!("a maintenance window repeats for 1 minute to {MAX_WEEKS} weeks"),
                None => format!("a silence lasts from 1 minute to {MAX_DAYS} days, not {} minutes", self.minutes),
            });
        }
        let reason = self.reason.trim().to_string();
        if reason.is_empty() {
            return Err("say why (the reason is shown on every alert it silences)".into());
        }
        if reason.chars().count() > MAX_REASON_CHARS {
            return Err(format!("the reason is at most {MAX_REASON_CHARS} characters"));
        }
        Ok(ValidSilence { rule, agent, tool, minutes: self.minutes, reason, schedule })
    }
}

fn minute_text(m: i64) -> String {
    if (0..24 * 60).contains(&m) {
        format!("{:02}:{:02}", m / 60, m % 60)
    } else {
        format!("minute {m}")
    }
}

/// What a silence is matched against: the alert, and the agents of the runs behind it.
pub fn matches(silence: &Silence, alert: &Alert, agents_of_runs: &[String]) -> bool {
    why_not(silence.rule, silence.agent.as_deref(), silence.tool.as_deref(), alert, agents_of_runs).is_none()
}

/// Why a silence of `rule`, `agent` and `tool` (None: any) does not match `alert`, in
/// words on-call can act on; None when it matches.
pub fn why_not(
    rule: Option<AlertRule>,
    agent: Option<&str>,
    tool: Option<&str>,
    alert: &Alert,
    agents_of_runs: &[String],
) -> Option<String> {
    if let Some(rule) = rule.filter(|r| *r != alert.rule) {
        return Some(format!("it names the rule “{}”, and this alert is “{}”", rule.title(), alert.rule.title()));
    }
    if let Some(tool) = tool {
        let about_tool = alert.subject.strip_prefix("tool:") == Some(tool)
            || (!alert.items.is_empty()
                && alert.items.iter().all(|i| {
                    i.note.strip_prefix(tool).is_some_and(|rest| rest.starts_with(':') || rest.starts_with(' '))
                }));
        if !about_tool {
            return Some(format!("this alert is not about the tool `{tool}` alone; leave the tool blank"));
        }
    }
    if let Some(agent) = agent {
        let mut others: Vec<&str> = agents_of_runs.iter().map(String::as_str).filter(|a| *a != agent).collect();
        others.dedup();
        if agents_of_runs.is_empty() {
            return Some(format!(
                "no run behind this alert names an agent, so `{agent}` cannot match; leave the agent blank"
            ));
        }
        if !others.is_empty() {
            let named: Vec<String> =
                others.iter().map(|a| if a.is_empty() { "(unnamed)".to_string() } else { format!("`{a}`") }).collect();
            return Some(format!(
                "not every run behind this alert is `{agent}`'s (also {}); leave the agent blank",
                named.join(", ")
            ));
        }
    }
    None
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
            schedule: None,
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
    fn a_mismatch_says_why_in_words() {
        let a = alert(); // approval_violation, one run item noted "send_email: no approval"
        let billing = vec!["billing-bot".to_string()];
        assert_eq!(why_not(Some(AlertRule::ApprovalViolation), Some("billing-bot"), None, &a, &billing), None);
        let rule = why_not(Some(AlertRule::DedupedSpike), None, None, &a, &billing).unwrap();
        assert_eq!(
            rule,
            "it names the rule “Deduplicated-call spike”, and this alert is “Tool ran without a valid approval”"
        );
        assert!(why_not(None, None, Some("wire"), &a, &billing).unwrap().contains("not about the tool `wire` alone"));
        let both = vec!["billing-bot".to_string(), "ops-bot".to_string()];
        let agent = why_not(None, Some("billing-bot"), None, &a, &both).unwrap();
        assert!(agent.contains("also `ops-bot`"), "{agent}");
        assert!(why_not(None, Some("x"), None, &a, &[]).unwrap().contains("no run behind this alert names an agent"));
        assert_eq!(
            silence(Some(AlertRule::ApprovalViolation), Some("b"), None).scope(),
            "rule “Tool ran without a valid approval”, agent b"
        );
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
    fn a_maintenance_window_is_active_inside_its_hours_only_even_past_midnight() {
        use chrono::TimeZone;
        let at = |d: u32, h: u32, m: u32| Utc.with_ymd_and_hms(2026, 12, d, h, m, 0).unwrap(); // Dec 5 2026: Saturday
        let night = Weekly::parse(&["Sat".into()], "22:00", "02:00").unwrap();
        assert!(night.covers(at(5, 22, 0)) && night.covers(at(5, 23, 59)) && night.covers(at(6, 1, 59)));
        assert!(!night.covers(at(5, 21, 59)) && !night.covers(at(6, 2, 0)) && !night.covers(at(6, 22, 30)));
        let day = Weekly::parse(&["tue".into(), "mon".into(), "mon".into()], "09:30", "10:00").unwrap();
        assert_eq!(day.describe(), "mon, tue 09:30-10:00 UTC");
        assert!(day.covers(at(7, 9, 30)) && !day.covers(at(7, 10, 0)) && !day.covers(at(9, 9, 45)));
        let mut window = silence(Some(AlertRule::DedupedSpike), None, None);
        window.ends_at = at(31, 0, 0);
        window.schedule = Some(night);
        assert!(window.is_active(at(5, 23, 0)) && !window.is_active(at(5, 12, 0)) && window.is_current(at(5, 12, 0)));
        assert!(window.scope().ends_with("(maintenance window sat 22:00-02:00 UTC)"), "{}", window.scope());
        assert!(Weekly::parse(&["funday".into()], "1:00", "2:00").unwrap_err().contains("not a day"));
        assert!(Weekly::parse(&["mon".into()], "25:00", "2:00").unwrap_err().contains("not a time"));
        assert!(Weekly::parse(&[], "1:00", "2:00").unwrap_err().contains("at least one day"));
        assert!(Weekly::parse(&["mon".into()], "1:00", "01:00").unwrap_err().contains("different"));
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
