//! Where alert notifications go (`[[alert_routes]]` in the config file): ordered routes,
//! each matching some rules and severities and naming the targets that get the alert.
//! The first route that matches decides, as in Alertmanager; a route with neither
//! `rules` nor `severities` matches everything and, if present, is the last (the default
//! route). With no routes configured, alerts of severity `page` and `ticket` go to every
//! target that takes alert events and `info` alerts notify nobody.
//!
//! Rules and severities are plain names here (`alerts::routes` checks them against the
//! rule and severity vocabularies), so notifications stay free of the alert domain.

use super::{EventKind, WebhookTarget};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlertRoute {
    /// For `flightdeck alerts test <name>` and the admin page.
    pub name: String,
    /// Rule names (`approval_violation`...); any rule when absent.
    #[serde(default)]
    pub rules: Option<Vec<String>>,
    /// `page`, `ticket`, `info`; any severity when absent.
    #[serde(default)]
    pub severities: Option<Vec<String>>,
    /// Names of `[[webhooks]]` targets.
    pub targets: Vec<String>,
}

impl AlertRoute {
    pub fn matches(&self, rule: &str, severity: &str) -> bool {
        self.rules.as_ref().is_none_or(|r| r.iter().any(|x| x == rule))
            && self.severities.as_ref().is_none_or(|s| s.iter().any(|x| x == severity))
    }

    pub fn is_catch_all(&self) -> bool {
        self.rules.is_none() && self.severities.is_none()
    }
}

/// The name `flightdeck alerts test` and the admin page use for "every alert target" when
/// no routes are configured.
pub const IMPLICIT_DEFAULT: &str = "default";

/// The configured targets and alert routes: who hears about what.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Notifications {
    pub targets: Vec<WebhookTarget>,
    pub routes: Vec<AlertRoute>,
}

impl Notifications {
    /// The targets of an event that is not about an alert (approval requested, escalation
    /// opened): every target whose `events` take it.
    pub fn for_event(&self, kind: EventKind) -> Vec<WebhookTarget> {
        self.targets.iter().filter(|t| t.wants(kind)).cloned().collect()
    }

    /// The route an alert of `rule` and `severity` takes, by name; `None` when it notifies
    /// nobody.
    pub fn route_of(&self, rule: &str, severity: &str) -> Option<&str> {
        if self.routes.is_empty() {
            return (severity != "info").then_some(IMPLICIT_DEFAULT);
        }
        self.routes.iter().find(|r| r.matches(rule, severity)).map(|r| r.name.as_str())
    }

    /// The targets an alert event goes to (see the module header).
    pub fn for_alert(&self, rule: &str, severity: &str, kind: EventKind) -> Vec<WebhookTarget> {
        match self.route_of(rule, severity) {
            Some(route) => self.route_targets(route, kind).unwrap_or_default(),
            None => Vec::new(),
        }
    }

    /// The targets of the route `name` that take `kind`; `None` for no such route.
    pub fn route_targets(&self, name: &str, kind: EventKind) -> Option<Vec<WebhookTarget>> {
        if self.routes.is_empty() && name == IMPLICIT_DEFAULT {
            return Some(self.for_event(kind));
        }
        let route = self.routes.iter().find(|r| r.name == name)?;
        Some(
            route
                .targets
                .iter()
                .filter_map(|n| self.targets.iter().find(|t| &t.name == n))
                .filter(|t| t.wants(kind))
                .cloned()
                .collect(),
        )
    }

    /// Route names, for the test command and page.
    pub fn route_names(&self) -> Vec<String> {
        match self.routes.is_empty() {
            true => vec![IMPLICIT_DEFAULT.to_string()],
            false => self.routes.iter().map(|r| r.name.clone()).collect(),
        }
    }

    /// Checks the routes against the targets: names present and unique, each target known
    /// and taking alerts, lists not empty, a catch-all only last. Rule and severity names
    /// are checked by `alerts::routes::validate`.
    pub fn validate(&self) -> Result<(), String> {
        for (i, r) in self.routes.iter().enumerate() {
            if r.name.trim().is_empty() {
                return Err(format!("alert route #{} needs a name", i + 1));
            }
            if self.routes[..i].iter().any(|o| o.name == r.name) {
                return Err(format!("two alert routes are named `{}`; names must be unique", r.name));
            }
            if r.targets.is_empty() {
                return Err(format!("alert route `{}` names no targets", r.name));
            }
            for name in &r.targets {
                let Some(t) = self.targets.iter().find(|t| &t.name == name) else {
                    return Err(format!("alert route `{}` names `{name}`, which is not a [[webhooks]] target", r.name));
                };
                if !t.wants(EventKind::AlertFiring) {
                    return Err(format!(
                        "alert route `{}` names `{name}`, whose `events` leave out alert.firing",
                        r.name
                    ));
                }
            }
            if r.rules.as_ref().is_some_and(Vec::is_empty) || r.severities.as_ref().is_some_and(Vec::is_empty) {
                return Err(format!(
                    "alert route `{}`: an empty list matches nothing; leave it out to match all",
                    r.name
                ));
            }
            if r.is_catch_all() && i + 1 != self.routes.len() {
                return Err(format!(
                    "alert route `{}` matches every alert, so the routes after it would never be used: put it last",
                    r.name
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::notify::WebhookFormat;

    fn target(name: &str, format: WebhookFormat, events: Option<Vec<EventKind>>) -> WebhookTarget {
        WebhookTarget {
            name: name.into(),
            url: "https://x.example/h".into(),
            format,
            events,
            ..WebhookTarget::default()
        }
    }

    fn route(name: &str, rules: Option<&[&str]>, severities: Option<&[&str]>, targets: &[&str]) -> AlertRoute {
        let list = |l: &[&str]| l.iter().map(|s| s.to_string()).collect();
        AlertRoute {
            name: name.into(),
            rules: rules.map(list),
            severities: severities.map(list),
            targets: targets.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn setup() -> Notifications {
        Notifications {
            targets: vec![
                target("pd", WebhookFormat::Pagerduty, None),
                target("slack", WebhookFormat::Slack, None),
                target("approvals", WebhookFormat::Json, Some(vec![EventKind::ApprovalRequested])),
            ],
            routes: vec![
                route("money", Some(&["cost_per_run_jump"]), None, &["slack"]),
                route("page-now", None, Some(&["page"]), &["pd", "slack"]),
                route("rest", None, None, &["slack"]),
            ],
        }
    }

    fn names(targets: Vec<WebhookTarget>) -> Vec<String> {
        targets.into_iter().map(|t| t.name).collect()
    }

    #[test]
    fn the_first_matching_route_decides() {
        let n = setup();
        assert!(n.validate().is_ok(), "{:?}", n.validate());
        assert_eq!(n.route_of("cost_per_run_jump", "page"), Some("money"), "rule before severity, by order");
        assert_eq!(names(n.for_alert("approval_violation", "page", EventKind::AlertFiring)), ["pd", "slack"]);
        assert_eq!(names(n.for_alert("failed_to_recover", "ticket", EventKind::AlertFiring)), ["slack"]);
        // An acknowledgement goes where the alert went (a target takes every event unless told otherwise).
        assert_eq!(names(n.for_alert("approval_violation", "page", EventKind::AlertAcknowledged)), ["pd", "slack"]);
        assert_eq!(
            names(n.for_event(EventKind::ApprovalRequested)),
            ["slack", "approvals"],
            "PagerDuty takes alerts only"
        );
    }

    #[test]
    fn without_routes_every_alert_target_hears_pages_and_tickets_but_not_info() {
        let n = Notifications { routes: Vec::new(), ..setup() };
        assert_eq!(names(n.for_alert("deduped_spike", "ticket", EventKind::AlertFiring)), ["pd", "slack"]);
        assert!(n.for_alert("deduped_spike", "info", EventKind::AlertFiring).is_empty());
        assert_eq!(n.route_names(), [IMPLICIT_DEFAULT]);
        assert_eq!(names(n.route_targets(IMPLICIT_DEFAULT, EventKind::AlertFiring).unwrap()), ["pd", "slack"]);
    }

    #[test]
    fn bad_routes_are_refused_with_the_reason() {
        let mut n = setup();
        n.routes.push(route("after-default", Some(&["approval_violation"]), None, &["slack"]));
        assert!(n.validate().unwrap_err().contains("put it last"));
        let mut n = setup();
        n.routes[0].targets = vec!["nope".into()];
        assert!(n.validate().unwrap_err().contains("not a [[webhooks]] target"));
        let mut n = setup();
        n.routes[0].targets = vec!["approvals".into()];
        assert!(n.validate().unwrap_err().contains("leave out alert.firing"));
        let mut n = setup();
        n.routes[0].severities = Some(vec![]);
        assert!(n.validate().unwrap_err().contains("empty list"));
        let mut n = setup();
        n.routes[1].name = "money".into();
        assert!(n.validate().unwrap_err().contains("unique"));
    }
}
