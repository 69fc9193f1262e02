//! Notices between instances: a change announced on one instance reaches the others'
//! waiters. On PostgreSQL with `NOTIFY` and `LISTEN` on one channel; on SQLite there is
//! one instance, so there is nobody to tell.

use super::Db;
use std::time::Duration;
use tokio::sync::watch;

/// Tells the other instances that `id` changed (nothing on SQLite). A notice that does
/// not go out is logged: waiters re-read on their own schedule, so it only costs latency.
pub async fn send(db: &Db, channel: &str, id: &str) {
    if let Db::Postgres(pool) = db {
        if let Err(e) = sqlx::query("SELECT pg_notify($1, $2)").bind(channel).bind(id).execute(pool).await {
            tracing::warn!(error = %e, id, "could not notify other instances of a change");
        }
    }
}

/// Hands every notice other instances send on `channel` to `deliver`, until `closing`
/// turns true; returns at once on SQLite. The listener reconnects by itself; a notice
/// missed while it does is made up for by the waiters' own re-reads.
pub async fn listen(db: Db, channel: &str, mut closing: watch::Receiver<bool>, deliver: impl Fn(&str)) {
    let Db::Postgres(pool) = db else { return };
    loop {
        let mut listener = match sqlx::postgres::PgListener::connect_with(&pool).await {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(error = %e, "notice listener cannot connect; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        if let Err(e) = listener.listen(channel).await {
            tracing::warn!(error = %e, "notice listener cannot LISTEN; retrying");
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        }
        loop {
            tokio::select! {
                _ = closing.changed() => return,
                received = listener.recv() => match received {
                    Ok(n) => deliver(n.payload()),
                    Err(e) => {
                        tracing::warn!(error = %e, "notice listener lost its connection");
                        break;
                    }
                }
            }
        }
    }
}
