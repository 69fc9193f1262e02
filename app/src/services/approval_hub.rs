//! Wakes agents that long-poll for a decision or a guarded call. In one process a
//! broadcast channel carries the id of everything that changed; with several instances,
//! each change is also sent to the others (`storage::notices`), whose listeners feed it
//! into their own channel, so a decision taken anywhere wakes a waiter anywhere.

use std::time::Duration;
use store::{notices, Db};
use tokio::sync::{broadcast, watch};

/// The PostgreSQL channel decisions are announced on.
pub const CHANNEL: &str = "flightdeck_approvals";

#[derive(Debug, Clone)]
pub struct ApprovalHub {
    changed: broadcast::Sender<String>,
    closing: watch::Sender<bool>,
    recheck: Duration,
}

impl Default for ApprovalHub {
    fn default() -> Self {
        ApprovalHub::new()
    }
}

impl ApprovalHub {
    pub fn new() -> Self {
        // Waiters re-read the database when they lag, so the capacity only bounds memory.
        let (changed, _) = broadcast::channel(1024);
        let (closing, _) = watch::channel(false);
        ApprovalHub { changed, closing, recheck: RECHECK }
    }

    /// The same hub with another safety-net re-read interval (see [`RECHECK`]).
    pub fn with_recheck(mut self, every: Duration) -> Self {
        self.recheck = every;
        self
    }

    /// How often a waiter re-reads its request without being woken.
    pub fn recheck(&self) -> Duration {
        self.recheck
    }

    /// Receives the ids of requests that changed from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<String> {
        self.changed.subscribe()
    }

    /// Becomes true when the server shuts down, so long polls answer at once.
    pub fn closing(&self) -> watch::Receiver<bool> {
        self.closing.subscribe()
    }

    pub fn close(&self) {
        self.closing.send_replace(true);
    }

    /// Wakes local waiters on request `id` only (what the PostgreSQL listener calls).
    pub fn wake_local(&self, id: &str) {
        let _ = self.changed.send(id.to_string());
    }

    /// Announces that `id` (a request, a guarded call) changed: to this process, and to
    /// every other instance (`storage::notices`).
    pub async fn announce(&self, db: &Db, id: &str) {
        self.wake_local(id);
        notices::send(db, CHANNEL, id).await;
    }

    /// Hands other instances' announcements to this process's waiters until the hub
    /// closes (nothing to do on SQLite). A change missed while the listener reconnects is
    /// still seen by waiters, which re-read the database at least every [`RECHECK`].
    pub async fn listen(self, db: Db) {
        let closing = self.closing();
        notices::listen(db, CHANNEL, closing, |id| self.wake_local(id)).await
    }
}

/// How often a waiter re-reads its request even without a wake-up, by default: the safety
/// net for a missed notification.
pub const RECHECK: Duration = Duration::from_secs(5);
