//! The alert evaluator: every interval, the instance that leads (see
//! `store::alerts::Leadership`) evaluates every rule and records when it did.
//! Instances that do not lead try to take the lead each interval, so a crashed leader
//! is replaced within about one interval after its database session ends.

use app::services::alert_evaluation::evaluate_once;
use domain::notify::Notifications;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use store::alerts::{self as alert_store, Leadership};
use store::{now_ms, Db};

#[derive(Debug, Clone, Copy)]
pub struct EvaluatorSettings {
    pub interval: Duration,
    /// How long an alert stays open after its rule stops breaching.
    pub hold: Duration,
}

/// What one tick did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tick {
    Evaluated,
    /// Another instance leads.
    Follower,
    Failed,
}

pub struct Evaluator {
    db: Db,
    notifications: Arc<Notifications>,
    settings: EvaluatorSettings,
    /// Shown on /alerts as who evaluated last.
    instance: String,
    leadership: Leadership,
    evaluations: Arc<AtomicU64>,
}

impl Evaluator {
    pub fn new(db: Db, notifications: Arc<Notifications>, settings: EvaluatorSettings, instance: String) -> Evaluator {
        Evaluator {
            leadership: Leadership::new(db.clone()),
            db,
            notifications,
            settings,
            instance,
            evaluations: Arc::default(),
        }
    }

    /// How many evaluations this evaluator has run; shared, so a test can watch it.
    pub fn evaluations(&self) -> Arc<AtomicU64> {
        self.evaluations.clone()
    }

    /// One interval's work: lead or follow, and evaluate when leading.
    pub async fn tick(&mut self) -> Tick {
        if !self.leadership.lead().await {
            return Tick::Follower;
        }
        let started = Instant::now();
        let now = now_ms();
        let hold = self.settings.hold.as_millis() as i64;
        match evaluate_once(&self.db, &self.notifications, now, hold).await {
            Ok(report) => {
                for alert in &report.fired {
                    tracing::warn!(alert = %alert.id, rule = %alert.rule, title = %alert.title, "alert firing");
                }
                for alert in &report.resolved {
                    tracing::info!(alert = %alert.id, rule = %alert.rule, "alert resolved");
                }
                for (rule, error) in &report.failed_rules {
                    tracing::warn!(%rule, %error, "could not evaluate an alert rule; its alerts are left as they were");
                }
                self.evaluations.fetch_add(1, Ordering::SeqCst);
                let took = started.elapsed().as_millis() as i64;
                if let Err(e) = alert_store::record_evaluation(&self.db, &self.instance, now, took).await {
                    tracing::warn!(error = %e, "could not record the alert evaluation");
                }
                Tick::Evaluated
            }
            Err(e) => {
                tracing::warn!(error = %e, "alert evaluation failed; will retry");
                Tick::Failed
            }
        }
    }

    /// Ticks until `stopped` turns true, then gives up the lead.
    pub async fn run(mut self, mut stopped: tokio::sync::watch::Receiver<bool>) {
        let mut every = tokio::time::interval(self.settings.interval);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let stop = tokio::select! {
                _ = every.tick() => false,
                _ = stopped.wait_for(|s| *s) => true,
            };
            if stop {
                break;
            }
            self.tick().await;
        }
        self.leadership.step_down().await;
    }
}

/// This process, as /alerts names the evaluator: host and process id.
pub fn instance_name() -> String {
    let host = std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".into());
    format!("{host} pid {}", std::process::id())
}
