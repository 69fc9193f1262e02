//! `flightdeck alerts test <route>`: queues a test alert to the route's targets and sends
//! it from here, so it works with or without a server running (the outbox's leases keep
//! a running server's worker from sending the same delivery), then prints each target's
//! answer.

use crate::config::Config;
use crate::webhooks::{Worker, WorkerSettings};
use app::services::alert_test;
use std::time::{Duration, Instant};
use store::webhooks::status;
use store::Db;

/// How long to wait for the receivers before reporting what is still pending.
const WAIT: Duration = Duration::from_secs(30);

pub async fn test(db: &Db, config: &Config, route: &str) -> anyhow::Result<()> {
    let queued = alert_test::queue(db, &config.notifications(), route).await?.map_err(anyhow::Error::msg)?;
    eprintln!("queued a test alert ({}) to route `{route}`: {} deliveries", queued.alert_id, queued.deliveries);
    let worker =
        Worker::new(db.clone(), WorkerSettings::new(&config.public_url, config.webhook_retry(), &config.webhooks))?;
    let started = Instant::now();
    let deliveries = loop {
        worker.run_once().await?;
        let now = alert_test::deliveries(db, &queued.alert_id).await?;
        if settled(&now) || started.elapsed() > WAIT {
            break now;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let mut failed = false;
    for d in deliveries.iter().rev() {
        let answer = match d.last_answer() {
            none if none.is_empty() => "no answer yet".to_string(),
            answer => answer,
        };
        failed |= d.status != status::DELIVERED;
        println!("{:<24} {:<18} {:<10} {answer}", d.target_name, d.event_kind, d.status);
    }
    if failed {
        anyhow::bail!("not every target accepted the test; failed ones are retried and listed under Admin → Webhooks");
    }
    Ok(())
}

/// Whether every target has said what it will say for now: a target's deliveries go in
/// order, so once one of them was refused (and waits for its retry) the later ones wait
/// too; otherwise each has been answered.
fn settled(deliveries: &[domain::models::WebhookDelivery]) -> bool {
    let mut oldest_first: Vec<&domain::models::WebhookDelivery> = deliveries.iter().collect();
    oldest_first.sort_by_key(|d| d.id);
    let mut blocked: Vec<&str> = Vec::new();
    for d in oldest_first {
        if blocked.contains(&d.target_name.as_str()) {
            continue;
        }
        let answered = d.last_status.is_some() || d.last_error.is_some();
        match (d.status.as_str(), answered) {
            (status::DELIVERED, _) => {}
            (_, true) => blocked.push(&d.target_name),
            (_, false) => return false,
        }
    }
    true
}
