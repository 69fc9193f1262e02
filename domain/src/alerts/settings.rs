//! Each rule's editable settings, their defaults, and what makes them valid. One struct
//! for every rule so they store and edit alike; [`fields`] says which parts a rule reads
//! and what they mean for it.

use super::{AlertRule, Severity};
use serde::{Deserialize, Serialize};

/// A limit for one tool (rule 1), beside the overall one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolLimit {
    pub tool: String,
    /// Fires when the tool executed irreversibly more than this many times in the window.
    pub limit: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RuleSettings {
    pub enabled: bool,
    pub severity: Severity,
    /// How far back the rule looks, in seconds.
    pub window_seconds: i64,
    /// The rule's limit: a count (rules 1, 2, 6; fires when exceeded), an age in seconds
    /// (rule 4; fires when exceeded), or the smallest share in percent that may fire
    /// (rule 3).
    pub threshold: f64,
    /// The trailing period before the window the window is compared with (rules 3, 5).
    pub baseline_seconds: i64,
    /// How many times the baseline the window must reach (rules 3, 5).
    pub factor: f64,
    /// Fewer samples than this in the window (or baseline) decide nothing (rules 3, 5):
    /// tool calls for rule 3, finished runs for rule 5.
    pub min_samples: i64,
    /// Rule 1: limits per tool.
    #[serde(default)]
    pub per_tool: Vec<ToolLimit>,
    /// Rule 4: count only escalations nobody has claimed.
    #[serde(default)]
    pub only_unclaimed: bool,
}

impl RuleSettings {
    /// The defaults: every rule on. Severities follow the article's split: its five
    /// "page immediately" rules page, and so does a guarded call of unknown outcome (an
    /// agent is stuck until a person settles it); runs that failed to recover are a
    /// ticket (the article: alert on them, not page on each failure).
    pub fn default_for(rule: AlertRule) -> RuleSettings {
        let base = RuleSettings {
            enabled: true,
            severity: Severity::Page,
            window_seconds: 600,
            threshold: 0.0,
            baseline_seconds: 0,
            factor: 0.0,
            min_samples: 0,
            per_tool: Vec::new(),
            only_unclaimed: false,
        };
        match rule {
            AlertRule::IrreversibleExecutions => RuleSettings { threshold: 20.0, ..base },
            AlertRule::ApprovalViolation => RuleSettings { window_seconds: 900, ..base },
            AlertRule::DedupedSpike => RuleSettings {
                window_seconds: 900,
                threshold: 5.0,
                baseline_seconds: 86_400,
                factor: 3.0,
                min_samples: 20,
                ..base
            },
            AlertRule::EscalationBacklog => RuleSettings { threshold: 900.0, ..base },
            AlertRule::CallOutcomeUnknown => RuleSettings { threshold: 600.0, ..base },
            AlertRule::CostPerRunJump => {
                RuleSettings { window_seconds: 3600, baseline_seconds: 86_400, factor: 2.0, min_samples: 20, ..base }
            }
            AlertRule::FailedToRecover => {
                RuleSettings { severity: Severity::Ticket, window_seconds: 900, threshold: 3.0, ..base }
            }
            AlertRule::ReplayPassRate => RuleSettings {
                severity: Severity::Ticket,
                window_seconds: 86_400,
                threshold: 90.0,
                min_samples: 10,
                ..base
            },
        }
    }

    /// Checks the settings `rule` reads; the message names the field and what is wrong.
    pub fn validate(&self, rule: AlertRule) -> Result<(), String> {
        let f = fields(rule);
        if f.window && !(10..=30 * 86_400).contains(&self.window_seconds) {
            return Err("window must be between 10 seconds and 30 days".into());
        }
        if !self.threshold.is_finite() || self.threshold < 0.0 {
            return Err("threshold must be a number of at least 0".into());
        }
        if rule == AlertRule::DedupedSpike && self.threshold > 100.0 {
            return Err("the smallest share is a percentage: at most 100".into());
        }
        if rule == AlertRule::ReplayPassRate && self.threshold > 100.0 {
            return Err("the pass rate is a percentage: at most 100".into());
        }
        if rule == AlertRule::EscalationBacklog && self.threshold < 1.0 {
            return Err("the backlog age must be at least 1 second".into());
        }
        if f.baseline {
            if self.baseline_seconds < self.window_seconds || self.baseline_seconds > 90 * 86_400 {
                return Err("baseline must be at least as long as the window and at most 90 days".into());
            }
            if !self.factor.is_finite() || self.factor <= 1.0 {
                return Err("factor must be more than 1 (the window must exceed its baseline)".into());
            }
        }
        if f.min_samples && self.min_samples < 1 {
            return Err("minimum samples must be at least 1".into());
        }
        for t in &self.per_tool {
            if t.tool.trim().is_empty() || t.tool.len() > 200 {
                return Err("a per-tool limit needs a tool name of 1 to 200 characters".into());
            }
            if t.limit < 0 {
                return Err(format!("the limit for `{}` must be at least 0", t.tool));
            }
        }
        Ok(())
    }
}

/// Which settings a rule reads, and what its threshold means, for the admin form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fields {
    pub window: bool,
    pub baseline: bool,
    /// The label of the threshold, or `None` when the rule has none.
    pub threshold: Option<&'static str>,
    pub per_tool: bool,
    pub only_unclaimed: bool,
    /// Reads `min_samples` (the baseline rules and the replay pass rate).
    pub min_samples: bool,
}

pub fn fields(rule: AlertRule) -> Fields {
    let none = Fields {
        window: true,
        baseline: false,
        threshold: None,
        per_tool: false,
        only_unclaimed: false,
        min_samples: false,
    };
    match rule {
        AlertRule::IrreversibleExecutions => {
            Fields { threshold: Some("Fires above this many executions"), per_tool: true, ..none }
        }
        AlertRule::ApprovalViolation => none,
        AlertRule::DedupedSpike => {
            Fields { baseline: true, min_samples: true, threshold: Some("Smallest share that fires (%)"), ..none }
        }
        AlertRule::EscalationBacklog => {
            Fields { window: false, threshold: Some("Fires when older than (seconds)"), only_unclaimed: true, ..none }
        }
        AlertRule::CostPerRunJump => Fields { baseline: true, min_samples: true, ..none },
        AlertRule::FailedToRecover => Fields { threshold: Some("Fires above this many runs"), ..none },
        AlertRule::CallOutcomeUnknown => {
            Fields { window: false, threshold: Some("Fires when unreported for longer than (seconds)"), ..none }
        }
        AlertRule::ReplayPassRate => {
            Fields { threshold: Some("Fires below this pass rate (%)"), min_samples: true, ..none }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_articles_page_now_rules_page_by_default_and_failures_to_recover_are_tickets() {
        let paging: Vec<AlertRule> = AlertRule::ALL
            .iter()
            .copied()
            .filter(|r| RuleSettings::default_for(*r).severity == Severity::Page)
            .collect();
        assert_eq!(
            paging,
            [
                AlertRule::IrreversibleExecutions,
                AlertRule::ApprovalViolation,
                AlertRule::DedupedSpike,
                AlertRule::EscalationBacklog,
                AlertRule::CostPerRunJump,
                AlertRule::CallOutcomeUnknown,
            ]
        );
        assert_eq!(RuleSettings::default_for(AlertRule::FailedToRecover).severity, Severity::Ticket);
    }

    #[test]
    fn every_default_is_valid_and_on() {
        for rule in AlertRule::ALL {
            let s = RuleSettings::default_for(*rule);
            assert!(s.enabled, "{rule} is on by default");
            assert_eq!(s.validate(*rule), Ok(()), "{rule}");
        }
        let irreversible = RuleSettings::default_for(AlertRule::IrreversibleExecutions);
        assert_eq!((irreversible.threshold, irreversible.window_seconds), (20.0, 600), "more than 20 in 10 minutes");
        assert_eq!(RuleSettings::default_for(AlertRule::EscalationBacklog).threshold, 900.0, "15 minutes");
    }

    #[test]
    fn invalid_settings_say_what_is_wrong() {
        let mut s = RuleSettings::default_for(AlertRule::DedupedSpike);
        s.factor = 1.0;
        assert!(s.validate(AlertRule::DedupedSpike).unwrap_err().contains("factor"));
        let mut s = RuleSettings::default_for(AlertRule::CostPerRunJump);
        s.baseline_seconds = 60;
        assert!(s.validate(AlertRule::CostPerRunJump).unwrap_err().contains("baseline"));
        let mut s = RuleSettings::default_for(AlertRule::IrreversibleExecutions);
        s.window_seconds = 5;
        assert!(s.validate(AlertRule::IrreversibleExecutions).unwrap_err().contains("window"));
        s.window_seconds = 600;
        s.per_tool.push(ToolLimit { tool: "send_email".into(), limit: -1 });
        assert!(s.validate(AlertRule::IrreversibleExecutions).unwrap_err().contains("send_email"));
        let mut s = RuleSettings::default_for(AlertRule::FailedToRecover);
        s.threshold = f64::NAN;
        assert!(s.validate(AlertRule::FailedToRecover).unwrap_err().contains("threshold"));
    }
}
