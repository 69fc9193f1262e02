//! SQLite's write-ahead log, checkpointed beside the ingest writer rather than inside it.
//!
//! By default the connection whose commit pushes the log past 1,000 pages copies it back
//! into the database file during that commit: on the single ingest writer that was about
//! a quarter of every commit. The server instead checkpoints from its own connection (on
//! its own thread) every fraction of a second, which a writer does not wait for; the
//! automatic checkpoint stays on with a higher threshold as the safety net for processes
//! that do not run the loop (the CLI, tests). PostgreSQL has nothing to do here.

use super::{Db, StoreResult};

/// Pages the log may grow to before a committing connection checkpoints it itself
/// (64 MiB at 4 KiB pages); the background loop normally keeps it far below.
pub const AUTOCHECKPOINT_PAGES: u32 = 16_384;

/// The size the log file is cut back to when it restarts, so a burst does not leave a
/// file of its peak size behind.
pub const LOG_FILE_LIMIT_BYTES: u64 = 64 << 20;

/// The log restarts from its beginning only when a writer finds it fully copied; a writer
/// that never pauses may not. Past this many pages uncopied, or twice as many in the
/// file, the checkpoint waits for the writer and restarts the log, bounding its size
/// (under sustained ingest the file stayed between 64 and 100 MiB). While a restart waits
/// for readers still using the log, writers wait too: at worst one page query's time.
const RESTART_ABOVE_PAGES: i64 = 8_192;

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

/// Copies what it can of the log into the database without blocking the writer; when
/// the log has grown past [`RESTART_ABOVE_PAGES`], waits for the writer and restarts it.
/// `None` on PostgreSQL.
pub async fn checkpoint(db: &Db) -> StoreResult<Option<Checkpoint>> {
    let Db::Sqlite(pool) = db else { return Ok(None) };
    let run = |mode: &'static str| async move {
        let (busy, log, done): (i64, i64, i64) =
            sqlx::query_as(&format!("PRAGMA wal_checkpoint({mode})")).fetch_one(pool).await?;
        Ok::<_, sqlx::Error>(Checkpoint { busy: busy != 0, log_pages: log, checkpointed_pages: done })
    };
    let passive = run("PASSIVE").await?;
    if passive.log_pages - passive.checkpointed_pages > RESTART_ABOVE_PAGES
        || passive.log_pages > 2 * RESTART_ABOVE_PAGES
    {
        return Ok(Some(run("RESTART").await?));
    }
    Ok(Some(passive))
}
