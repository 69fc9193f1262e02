//! SQLite's write-ahead log, kept short beside the ingest writer rather than inside it.
//!
//! By default the connection whose commit pushes the log past 1,000 pages copies it back
//! into the database file during that commit: on the single ingest writer that was about
//! a quarter of every commit. Instead, two parts:
//!
//! - [`checkpoint`], from the server's own loop on a pool connection every few tens of
//!   milliseconds: copies what is committed into the database file (PASSIVE), beside the
//!   writer, which never waits for it.
//! - [`restart_log`], from the ingest writer on its own connection between commits a few
//!   times a second: copies the little the loop has not yet copied and starts the log
//!   again from its beginning. Under sustained ingest the writer never pauses long enough
//!   for the log to restart by itself, so something must; when another connection did it
//!   (as the loop did before), the writer had to wait for that connection's whole
//!   checkpoint before its next transaction, and the restart then emptied its page cache,
//!   so the next commit read its indexes back from the file (the figures are in
//!   docs/benchmarks.md).
//!
//! The execution ledger's file (SQLite, [`Db::ledger`]) has no ingest writer: the server
//! looks after its log from a loop of its own, [`checkpoint_ledger`].
//!
//! The automatic checkpoint stays on for every other connection, with a higher threshold,
//! as the safety net for processes that do not run the loop (the CLI, tests); the writer's
//! connection turns it off, as it restarts the log itself. PostgreSQL has nothing to do
//! here.

use super::{Db, StoreResult};

/// Pages the log may grow to before a committing connection checkpoints it itself
/// (64 MiB at 4 KiB pages); the background loop and the writer keep it far below.
pub const AUTOCHECKPOINT_PAGES: u32 = 16_384;

/// The size the log file is cut back to when it restarts, so a burst does not leave a
/// file of its peak size behind.
pub const LOG_FILE_LIMIT_BYTES: u64 = 64 << 20;

/// What one checkpoint found and did (SQLite's `wal_checkpoint` result).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Checkpoint {
    /// Whether it could not finish because a reader or the writer held part of the log.
    pub busy: bool,
    /// Frames in the log.
    pub log_pages: i64,
    /// Frames now copied into the database file.
    pub checkpointed_pages: i64,
}

/// Copies what is committed in the log into the database file without blocking the
/// writer (PASSIVE). `None` on PostgreSQL.
pub async fn checkpoint(db: &Db) -> StoreResult<Option<Checkpoint>> {
    run(db, "PRAGMA wal_checkpoint(PASSIVE)").await
}

/// Copies the rest of the log into the database file and restarts it from its beginning
/// (RESTART): waits for readers still on the log, and blocks other writers meanwhile.
/// Meant for the ingest writer's own connection, between its commits (see the module
/// header). `None` on PostgreSQL.
pub async fn restart_log(db: &Db) -> StoreResult<Option<Checkpoint>> {
    // In turn with the transactions: RESTART waits for the write lock on SQLite's busy
    // handler, which polls; a retention sweep committing batch after batch left it no
    // gap, and ingest stood still for the whole sweep.
    let _turn = super::sql::hold_write_gate(db).await?;
    run(db, "PRAGMA wal_checkpoint(RESTART)").await
}

/// Pages after which the server's loop restarts the execution ledger's log (its own
/// file on SQLite, see [`Db::ledger`]): 32 MiB at 4 KiB pages. A restart holds the
/// ledger's turn for a sync of a few milliseconds, and the ask after it syncs the log's
/// new header; at 500 guarded calls/s the log grows about 2,500 pages a second, a
/// restart every 3 s or so. Restarting four times less often gave no better a p99.
pub const LEDGER_RESTART_AT_PAGES: i64 = 8_192;

/// The ledger file's automatic checkpoint, the safety net for processes that do not run
/// the server's loop: four times [`LEDGER_RESTART_AT_PAGES`], so no guarded call's commit
/// copies the log while the loop runs, even if it falls a few seconds behind.
pub const LEDGER_AUTOCHECKPOINT_PAGES: u32 = 32_768;

/// The size the ledger's log file is cut back to when it restarts: above what it reaches
/// between restarts, so the file is reused rather than cut and grown again.
pub const LEDGER_LOG_FILE_LIMIT_BYTES: u64 = 64 << 20;

/// Keeps the execution ledger's log short, from the server's loop: copies what is
/// committed into the ledger's file (PASSIVE, beside its writers), then, once the log
/// holds `restart_at_pages` ([`LEDGER_RESTART_AT_PAGES`] in the server), restarts it
/// (RESTART, in turn with the ledger's transactions: it waits for the one in progress and
/// holds the next for the little copying left and its sync). The main file's ingest
/// writer restarts its own log ([`restart_log`]); the ledger has no such writer, and its
/// asks, a few pages each, never leave a gap in which the log would restart by itself.
/// `None` on PostgreSQL.
pub async fn checkpoint_ledger(db: &Db, restart_at_pages: i64) -> StoreResult<Option<Checkpoint>> {
    let ledger = db.ledger();
    let Some(copied) = run(&ledger, "PRAGMA wal_checkpoint(PASSIVE)").await? else { return Ok(None) };
    if copied.log_pages < restart_at_pages {
        return Ok(Some(copied));
    }
    let asked = std::time::Instant::now();
    let _turn = super::sql::hold_write_gate(&ledger).await?;
    let held = std::time::Instant::now();
    let restarted = run(&ledger, "PRAGMA wal_checkpoint(RESTART)").await;
    tracing::debug!(
        pages = copied.log_pages,
        turn_wait_us = (held - asked).as_micros() as u64,
        turn_held_us = held.elapsed().as_micros() as u64,
        "ledger log restart"
    );
    restarted
}

async fn run(db: &Db, sql: &'static str) -> StoreResult<Option<Checkpoint>> {
    let Db::Sqlite { main: pool, .. } = db else { return Ok(None) };
    let (busy, log, done): (i64, i64, i64) = sqlx::query_as(sql).fetch_one(pool).await?;
    Ok(Some(Checkpoint { busy: busy != 0, log_pages: log, checkpointed_pages: done }))
}
