//! The webhook outbox: deliveries queued with the event they announce, claimed by a worker
//! under a lease, and finished as delivered, retried later, or failed.
//!
//! Why a table and not a channel: a notification accepted here survives a restart, and with
//! several instances on one PostgreSQL any of them may send it. The lease (`lease`,
//! `claimed_until`) makes sure only one worker holds a delivery at a time; a worker that
//! dies mid-send loses the lease when it expires and another tries again (so receivers may,
//! rarely, see a delivery twice: they can recognise it by its `X-Flightdeck-Delivery` id).

use super::sql::{Sql, Tx};
use super::{from_ms, now_ms, Db, StoreResult};
use domain::models::WebhookDelivery;
use domain::notify::{Event, RetryPolicy, WebhookFormat, WebhookTarget};
use std::time::Duration;

/// The states of a delivery.
pub mod status {
    pub const PENDING: &str = "pending";
    pub const DELIVERED: &str = "delivered";
    pub const FAILED: &str = "failed";
}

/// Longest `last_error` kept: a receiver's error page is not worth storing whole.
const MAX_ERROR_CHARS: usize = 500;

/// Queues `event` for every target that wants its kind; returns how many deliveries were
/// queued. All or none: one transaction.
pub async fn enqueue(db: &Db, event: &Event, targets: &[WebhookTarget]) -> StoreResult<usize> {
    let mut tx = Tx::begin_write(db).await?;
    let n = enqueue_in(&mut tx, event, targets).await?;
    tx.commit().await?;
    Ok(n)
}

/// [`enqueue`] inside the transaction that records what the event is about, so the thing
/// and its notification are committed together or not at all (the outbox pattern): an
/// approval request, an alert transition, an escalation announcement.
pub async fn enqueue_in(tx: &mut Tx, event: &Event, targets: &[WebhookTarget]) -> StoreResult<usize> {
    let sql = "INSERT INTO webhook_deliveries \
               (event_kind, event, target_name, target_url, format, status, attempts, next_attempt_at, created_at, \
               order_key) VALUES ($1, $2, $3, $4, $5, 'pending', 0, $6, $6, $7)";
    // An alert's events to one target are sent in order (migration 0023).
    let order_key = event.kind.is_alert().then(|| event.data.get("id").and_then(|id| id.as_str())).flatten();
    let json = serde_json::to_string(event).map_err(|e| sqlx::Error::Encode(Box::new(e)))?;
    let now = now_ms();
    let mut queued = 0;
    for target in targets.iter().filter(|t| t.wants(event.kind)) {
        let args = vec![
            event.kind.as_str().into(),
            json.as_str().into(),
            target.name.as_str().into(),
            target.url.as_str().into(),
            target.format.as_str().into(),
            now.into(),
            order_key.into(),
        ];
        tx.execute(Sql::with_args(sql, args)).await?;
        queued += 1;
    }
    Ok(queued)
}

/// A delivery this worker holds until `claimed_until`; finish it with [`mark_delivered`]
/// or [`record_failure`], passing it back so the lease is checked.
#[derive(Debug, Clone)]
pub struct Claimed {
    pub id: i64,
    pub lease: String,
    pub event: Event,
    pub target_name: String,
    pub target_url: String,
    pub format: WebhookFormat,
    /// Tries so far, this one included.
    pub attempts: u32,
}

#[derive(sqlx::FromRow)]
struct ClaimedRow {
    id: i64,
    event: String,
    target_name: String,
    target_url: String,
    format: String,
    attempts: i64,
}

/// Claims up to `limit` due deliveries for `lease_for`, counting the try now (so a delivery
/// that crashes its worker every time still runs out of attempts).
///
/// One statement on both backends: the outer `WHERE` re-checks that the row is still free,
/// so of two workers racing for a row exactly one updates it (SQLite runs writes one at a
/// time; PostgreSQL re-evaluates the condition on the locked row). PostgreSQL also skips
/// rows another worker is claiming right now instead of waiting for them.
pub async fn claim_due(db: &Db, limit: i64, lease_for: Duration) -> StoreResult<Vec<Claimed>> {
    // A delivery with an order key waits for the earlier ones of its target and key.
    const CLAIM_HEAD: &str = "UPDATE webhook_deliveries SET lease = $1, claimed_until = $2, attempts = attempts + 1 \
        WHERE id IN (SELECT id FROM webhook_deliveries d \
            WHERE status = 'pending' AND next_attempt_at <= $3 AND (claimed_until IS NULL OR claimed_until <= $3) \
            AND (order_key IS NULL OR NOT EXISTS (SELECT 1 FROM webhook_deliveries e \
                WHERE e.target_name = d.target_name AND e.order_key = d.order_key AND e.status = 'pending' \
                AND e.id < d.id)) \
            ORDER BY next_attempt_at, id LIMIT $4";
    const CLAIM_TAIL: &str = ") AND status = 'pending' AND (claimed_until IS NULL OR claimed_until <= $3) \
        RETURNING id, event, target_name, target_url, format, attempts";
    let lease = format!("{:016x}", rand::random::<u64>());
    let now = now_ms();
    let until = now + lease_for.as_millis() as i64;
    let rows: Vec<ClaimedRow> = match db {
        Db::Sqlite { main: pool, .. } => {
            let sql = format!("{CLAIM_HEAD}{CLAIM_TAIL}");
            sqlx::query_as(&sql).bind(&lease).bind(until).bind(now).bind(limit).fetch_all(pool).await?
        }
        Db::Postgres(pool) => {
            // PostgreSQL only: SKIP LOCKED
            let sql = format!("{CLAIM_HEAD} FOR UPDATE SKIP LOCKED{CLAIM_TAIL}");
            sqlx::query_as(&sql).bind(&lease).bind(until).bind(now).bind(limit).fetch_all(pool).await?
        }
    };
    let mut claimed = Vec::with_capacity(rows.len());
    for row in rows {
        let event = serde_json::from_str::<Event>(&row.event).map_err(|e| e.to_string());
        let format = WebhookFormat::parse(&row.format).ok_or_else(|| format!("unknown format `{}`", row.format));
        match (event, format) {
            (Ok(event), Ok(format)) => claimed.push(Claimed {
                id: row.id,
                lease: lease.clone(),
                event,
                target_name: row.target_name,
                target_url: row.target_url,
                format,
                attempts: row.attempts.clamp(0, i64::from(u32::MAX)) as u32,
            }),
            // Written by a newer or older Flightdeck that this one cannot read: retrying
            // will not help, so it fails where admins can see it.
            (Err(e), _) | (_, Err(e)) => {
                let sql = "UPDATE webhook_deliveries SET status = 'failed', last_error = $1, lease = NULL, \
                           claimed_until = NULL WHERE id = $2 AND lease = $3";
                let error = format!("cannot read the stored delivery: {e}");
                db.execute(Sql::with_args(sql, vec![(&error).into(), row.id.into(), (&lease).into()]))
                    .await
                    .map(|_| ())?;
            }
        }
    }
    Ok(claimed)
}

/// Records a successful send. `false` when the lease had expired and another worker
/// took the delivery over (it will record its own result).
pub async fn mark_delivered(db: &Db, claimed: &Claimed, http_status: u16) -> StoreResult<bool> {
    let sql = "UPDATE webhook_deliveries SET status = 'delivered', delivered_at = $1, last_status = $2, \
               last_error = NULL, lease = NULL, claimed_until = NULL WHERE id = $3 AND lease = $4";
    let n = db
        .execute(Sql::with_args(
            sql,
            vec![now_ms().into(), i64::from(http_status).into(), claimed.id.into(), (&claimed.lease).into()],
        ))
        .await?;
    Ok(n > 0)
}

/// What became of a failed try.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterFailure {
    /// Tried again after this long.
    RetryIn(Duration),
    /// Out of attempts: `failed`, shown to admins.
    GaveUp,
    /// The lease had expired; another worker holds the delivery now.
    LeaseLost,
}

/// Records a failed try (`http_status` when the receiver answered) and schedules the next
/// one by `retry`, or gives up.
pub async fn record_failure(
    db: &Db,
    claimed: &Claimed,
    http_status: Option<u16>,
    error: &str,
    retry: &RetryPolicy,
) -> StoreResult<AfterFailure> {
    let now = now_ms();
    let delay = retry.delay_after(claimed.attempts);
    let (new_status, next_attempt_at) = match delay {
        Some(d) => (status::PENDING, now + d.as_millis() as i64),
        None => (status::FAILED, now),
    };
    let error: String = error.chars().take(MAX_ERROR_CHARS).collect();
    let sql = "UPDATE webhook_deliveries SET status = $1, next_attempt_at = $2, last_status = $3, last_error = $4, \
               lease = NULL, claimed_until = NULL WHERE id = $5 AND lease = $6";
    let n = db
        .execute(Sql::with_args(
            sql,
            vec![
                new_status.into(),
                next_attempt_at.into(),
                http_status.map(i64::from).into(),
                (&error).into(),
                claimed.id.into(),
                (&claimed.lease).into(),
            ],
        ))
        .await?;
    Ok(match (n, delay) {
        (0, _) => AfterFailure::LeaseLost,
        (_, Some(d)) => AfterFailure::RetryIn(d),
        (_, None) => AfterFailure::GaveUp,
    })
}

#[derive(sqlx::FromRow)]
struct DeliveryRow {
    id: i64,
    created_at: i64,
    event_kind: String,
    event: String,
    target_name: String,
    status: String,
    attempts: i64,
    last_status: Option<i64>,
    last_error: Option<String>,
    next_attempt_at: i64,
    delivered_at: Option<i64>,
}

/// The newest deliveries, failures only when `failed_only`.
pub async fn list(db: &Db, failed_only: bool, limit: i64) -> StoreResult<Vec<WebhookDelivery>> {
    // The status only when filtered, so the failures are a range of
    // `webhook_deliveries_status` rather than a walk through every delivery.
    let mut sql = Sql::new(
        "SELECT id, created_at, event_kind, event, target_name, status, attempts, last_status, last_error, \
         next_attempt_at, delivered_at FROM webhook_deliveries",
    );
    if failed_only {
        sql.push(" WHERE status = ").bind(status::FAILED);
    }
    sql.push(" ORDER BY id DESC LIMIT ").bind(limit);
    let rows: Vec<DeliveryRow> = db.fetch_all(sql).await?;
    Ok(rows.into_iter().map(DeliveryRow::into_delivery).collect())
}

impl DeliveryRow {
    fn into_delivery(self) -> WebhookDelivery {
        let r = self;
        let title = serde_json::from_str::<serde_json::Value>(&r.event)
            .ok()
            .and_then(|v| v.get("title").and_then(|t| t.as_str()).map(str::to_string))
            .unwrap_or_default();
        WebhookDelivery {
            id: r.id,
            created_at: from_ms(r.created_at),
            event_kind: r.event_kind,
            title,
            target_name: r.target_name,
            next_attempt_at: (r.status == status::PENDING).then(|| from_ms(r.next_attempt_at)),
            status: r.status,
            attempts: r.attempts,
            last_status: r.last_status,
            last_error: r.last_error,
            delivered_at: r.delivered_at.map(from_ms),
        }
    }
}

/// The deliveries of one alert's events (its firing, acknowledgement, resolution and
/// re-sends, to every target), the latest `limit`, oldest first: what its page shows of
/// who was told.
pub async fn for_alert(db: &Db, alert_id: &str, limit: i64) -> StoreResult<Vec<WebhookDelivery>> {
    let sql = "SELECT id, created_at, event_kind, event, target_name, status, attempts, last_status, last_error, \
               next_attempt_at, delivered_at FROM webhook_deliveries WHERE order_key = $1 ORDER BY id DESC LIMIT $2";
    let rows: Vec<DeliveryRow> = db.fetch_all(Sql::with_args(sql, vec![alert_id.into(), limit.into()])).await?;
    Ok(rows.into_iter().rev().map(DeliveryRow::into_delivery).collect())
}

/// How many deliveries are in `status`.
pub async fn count(db: &Db, status: &str) -> StoreResult<i64> {
    let sql = "SELECT COUNT(*) FROM webhook_deliveries WHERE status = $1";
    Ok(db.fetch_one_value(Sql::with_args(sql, vec![status.into()])).await?)
}

/// Deletes finished (delivered or failed) deliveries created before `before_ms`. Pending
/// ones are never deleted: they are notifications still owed.
pub async fn prune(db: &Db, before_ms: i64) -> StoreResult<u64> {
    let sql = "DELETE FROM webhook_deliveries WHERE status <> 'pending' AND created_at < $1";
    Ok(db.execute(Sql::with_args(sql, vec![before_ms.into()])).await?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::TestDb;
    use domain::notify::EventKind;

    fn event(kind: EventKind) -> Event {
        Event {
            kind,
            title: "Alert firing: duplicate emails".into(),
            summary: "2 runs sent the same email twice".into(),
            link_path: "/alerts/7".into(),
            fields: vec![("Rule".into(), "duplicates".into())],
            data: serde_json::json!({ "alert_id": 7 }),
        }
    }

    fn target(name: &str, events: Option<Vec<EventKind>>) -> WebhookTarget {
        WebhookTarget {
            name: name.into(),
            url: format!("http://127.0.0.1:9/{name}"),
            format: WebhookFormat::Json,
            events,
            ..WebhookTarget::default()
        }
    }

    fn fast() -> RetryPolicy {
        RetryPolicy { base: Duration::from_millis(1), max_delay: Duration::from_millis(4), max_attempts: 3 }
    }

    #[tokio::test]
    async fn one_delivery_per_interested_target_each_claimed_once() {
        for t in TestDb::each_backend().await {
            let targets = [
                target("all", None),
                target("alerts", Some(vec![EventKind::AlertFiring])),
                target("esc", Some(vec![EventKind::EscalationOpened])),
            ];
            let n = enqueue(&t.db, &event(EventKind::AlertFiring), &targets).await.unwrap();
            assert_eq!(n, 2, "{}", t.backend());
            let first = claim_due(&t.db, 10, Duration::from_secs(60)).await.unwrap();
            assert_eq!(first.len(), 2);
            assert!(first.iter().all(|c| c.attempts == 1 && c.event == event(EventKind::AlertFiring)));
            assert!(claim_due(&t.db, 10, Duration::from_secs(60)).await.unwrap().is_empty(), "leased");
            assert!(mark_delivered(&t.db, &first[0], 200).await.unwrap());
            assert!(!mark_delivered(&t.db, &first[0], 200).await.unwrap(), "the lease is gone");
            assert_eq!(count(&t.db, status::DELIVERED).await.unwrap(), 1);
            assert_eq!(count(&t.db, status::PENDING).await.unwrap(), 1);
            t.cleanup().await;
        }
    }

    #[tokio::test]
    async fn an_alerts_events_to_one_target_go_in_order_even_through_a_failure() {
        for t in TestDb::each_backend().await {
            let of = |kind, id: &str| Event { data: serde_json::json!({ "id": id }), ..event(kind) };
            let one = [target("pager", None)];
            enqueue(&t.db, &of(EventKind::AlertFiring, "alr_a"), &one).await.unwrap();
            enqueue(&t.db, &of(EventKind::AlertFiring, "alr_b"), &one).await.unwrap();
            enqueue(&t.db, &of(EventKind::AlertResolved, "alr_a"), &one).await.unwrap();
            enqueue(&t.db, &event(EventKind::ApprovalRequested), &one).await.unwrap();
            let kinds = |claimed: &[Claimed]| -> Vec<(EventKind, String)> {
                claimed.iter().map(|c| (c.event.kind, c.event.data["id"].as_str().unwrap_or("").to_string())).collect()
            };
            // The resolve of alr_a waits for its firing; another alert and an approval do not.
            let first = claim_due(&t.db, 10, Duration::from_secs(60)).await.unwrap();
            assert_eq!(
                kinds(&first),
                [
                    (EventKind::AlertFiring, "alr_a".into()),
                    (EventKind::AlertFiring, "alr_b".into()),
                    (EventKind::ApprovalRequested, String::new())
                ],
                "{}",
                t.backend()
            );
            // The firing fails and will be retried: the resolve still waits.
            record_failure(&t.db, &first[0], Some(503), "down", &fast()).await.unwrap();
            tokio::time::sleep(Duration::from_millis(5)).await;
            let retry = claim_due(&t.db, 10, Duration::from_secs(60)).await.unwrap();
            assert_eq!(kinds(&retry), [(EventKind::AlertFiring, "alr_a".into())]);
            assert!(mark_delivered(&t.db, &retry[0], 202).await.unwrap());
            let last = claim_due(&t.db, 10, Duration::from_secs(60)).await.unwrap();
            assert_eq!(kinds(&last), [(EventKind::AlertResolved, "alr_a".into())]);
            t.cleanup().await;
        }
    }

    #[tokio::test]
    async fn failures_back_off_then_give_up_and_are_listed() {
        for t in TestDb::each_backend().await {
            enqueue(&t.db, &event(EventKind::AlertResolved), &[target("a", None)]).await.unwrap();
            let mut outcomes = Vec::new();
            while outcomes.len() < 3 {
                for c in claim_due(&t.db, 10, Duration::from_secs(60)).await.unwrap() {
                    outcomes.push(record_failure(&t.db, &c, Some(500), "HTTP 500", &fast()).await.unwrap());
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            assert_eq!(
                outcomes,
                vec![
                    AfterFailure::RetryIn(Duration::from_millis(1)),
                    AfterFailure::RetryIn(Duration::from_millis(2)),
                    AfterFailure::GaveUp
                ],
                "{}",
                t.backend()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
            assert!(claim_due(&t.db, 10, Duration::from_secs(60)).await.unwrap().is_empty(), "failed stays failed");
            let failed = list(&t.db, true, 10).await.unwrap();
            assert_eq!(failed.len(), 1);
            assert_eq!((failed[0].attempts, failed[0].last_status), (3, Some(500)));
            assert_eq!(failed[0].title, "Alert firing: duplicate emails");
            assert_eq!(failed[0].next_attempt_at, None);
            assert_eq!(prune(&t.db, now_ms() + 1).await.unwrap(), 1);
            t.cleanup().await;
        }
    }

    #[tokio::test]
    async fn an_expired_lease_is_taken_over_and_the_old_holder_cannot_finish() {
        for t in TestDb::each_backend().await {
            enqueue(&t.db, &event(EventKind::ApprovalRequested), &[target("a", None)]).await.unwrap();
            let stale = claim_due(&t.db, 10, Duration::from_millis(0)).await.unwrap().remove(0);
            tokio::time::sleep(Duration::from_millis(5)).await;
            let fresh = claim_due(&t.db, 10, Duration::from_secs(60)).await.unwrap().remove(0);
            assert_eq!((fresh.id, fresh.attempts), (stale.id, 2));
            assert_eq!(record_failure(&t.db, &stale, None, "timeout", &fast()).await.unwrap(), AfterFailure::LeaseLost);
            assert!(mark_delivered(&t.db, &fresh, 204).await.unwrap());
            let all = list(&t.db, false, 10).await.unwrap();
            assert_eq!((all[0].status.as_str(), all[0].last_status), ("delivered", Some(204)));
            t.cleanup().await;
        }
    }

    #[tokio::test]
    async fn enqueue_in_commits_with_the_callers_transaction() {
        for t in TestDb::each_backend().await {
            let targets = [target("a", None)];
            // Dropped without a commit: rolled back, nothing queued.
            let mut tx = Tx::begin_write(&t.db).await.unwrap();
            enqueue_in(&mut tx, &event(EventKind::EscalationOpened), &targets).await.unwrap();
            drop(tx);
            let mut tx = Tx::begin_write(&t.db).await.unwrap();
            enqueue_in(&mut tx, &event(EventKind::EscalationOpened), &targets).await.unwrap();
            tx.commit().await.unwrap();
            assert_eq!(count(&t.db, status::PENDING).await.unwrap(), 1, "{}", t.backend());
            t.cleanup().await;
        }
    }
}
