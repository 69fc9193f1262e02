//! Testing an alert route: a test alert ([`notification::test_alert`]) queued firing and
//! then resolved to every target of the route, through the same outbox as real alerts,
//! so a test proves the whole path (format, signature, the receiver's answer). Used by
//! `flightdeck alerts test <route>` and the admin page's "Send test" button.

use domain::alerts::notification::{self, TEST_PREFIX};
use domain::alerts::{AlertRule, Severity};
use domain::models::WebhookDelivery;
use domain::notify::{EventKind, Notifications};
use store::{webhooks, Db, StoreResult};

/// What was queued.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestQueued {
    /// The test alert's id; every delivery's title carries it.
    pub alert_id: String,
    /// Deliveries queued (the targets of the route, twice: firing and resolved).
    pub deliveries: usize,
}

/// Queues the test; `Err` with the reason when the route does not exist or has no
/// target that takes alerts.
pub async fn queue(db: &Db, n: &Notifications, route: &str) -> StoreResult<Result<TestQueued, String>> {
    let Some(targets) = n.route_targets(route, EventKind::AlertFiring) else {
        return Ok(Err(format!("no alert route `{route}` (routes: {})", n.route_names().join(", "))));
    };
    if targets.is_empty() {
        return Ok(Err(format!("the route `{route}` has no target that takes alerts")));
    }
    let matched = n.routes.iter().find(|r| r.name == route);
    let first = |names: Option<&Vec<String>>| names.and_then(|l| l.first().cloned());
    let rule = first(matched.and_then(|r| r.rules.as_ref()))
        .and_then(|r| AlertRule::parse(&r))
        .unwrap_or(AlertRule::ApprovalViolation);
    let severity =
        first(matched.and_then(|r| r.severities.as_ref())).and_then(|s| Severity::parse(&s)).unwrap_or(Severity::Page);
    let id = format!("{:012x}", rand::random::<u64>() & 0xffff_ffff_ffff);
    let now = chrono::Utc::now();
    let mut alert = notification::test_alert(route, rule, severity, &id, now);
    let mut queued = webhooks::enqueue(db, &notification::event(&alert, EventKind::AlertFiring), &targets).await?;
    alert.state = domain::alerts::AlertState::Resolved;
    alert.resolved_at = Some(now);
    let resolved_targets = n.route_targets(route, EventKind::AlertResolved).unwrap_or_default();
    queued += webhooks::enqueue(db, &notification::event(&alert, EventKind::AlertResolved), &resolved_targets).await?;
    Ok(Ok(TestQueued { alert_id: alert.id, deliveries: queued }))
}

/// The test's deliveries as they stand (newest first).
pub async fn deliveries(db: &Db, alert_id: &str) -> StoreResult<Vec<WebhookDelivery>> {
    debug_assert!(alert_id.starts_with(TEST_PREFIX));
    let recent = webhooks::list(db, false, 500).await?;
    Ok(recent.into_iter().filter(|d| d.title.contains(alert_id)).collect())
}
