//! Wakes agents that long-poll for a decision. In one process a broadcast channel carries
//! the id of every request that changed; with several instances on one PostgreSQL, each
//! change is also sent with `NOTIFY`, and every instance's listener feeds what it hears into
//! its own channel, so a decision taken anywhere wakes a waiter anywhere.

use crate::storage::Db;
use std::time::Duration;
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

    /// Announces that request `id` changed: to this process, and on PostgreSQL to all.
    pub async fn announce(&self, db: &Db, id: &str) {
        self.wake_local(id);
        if let Db::Postgres(pool) = db {
            if let Err(e) = sqlx::query("SELECT pg_notify($1, $2)").bind(CHANNEL).bind(id).execute(pool).await {
                tracing::warn!(error = %e, approval = id, "could not NOTIFY other instances of a decision");
            }
        }
    }

    /// On PostgreSQL: listens for other instances' announcements until the hub closes.
    /// `PgListener` reconnects by itself; a decision missed while reconnecting is still
    /// seen by waiters, which re-read the database at least every [`RECHECK`].
    pub async fn listen(self, db: Db) {
        let Db::Postgres(pool) = db else { return };
        let mut closing = self.closing();
        loop {
            let mut listener = match sqlx::postgres::PgListener::connect_with(&pool).await {
                Ok(l) => l,
                Err(e) => {
                    tracing::warn!(error = %e, "approval listener cannot connect; retrying");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            };
            if let Err(e) = listener.listen(CHANNEL).await {
                tracing::warn!(error = %e, "approval listener cannot LISTEN; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
            loop {
                tokio::select! {
                    _ = closing.changed() => return,
                    received = listener.recv() => match received {
                        Ok(n) => self.wake_local(n.payload()),
                        Err(e) => {
                            tracing::warn!(error = %e, "approval listener lost its connection");
                            break;
                        }
                    }
                }
            }
        }
    }
}

/// How often a waiter re-reads its request even without a wake-up, by default: the safety
/// net for a missed notification.
pub const RECHECK: Duration = Duration::from_secs(5);
