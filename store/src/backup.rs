//! Backups. SQLite: `VACUUM INTO` writes a consistent, compacted copy of a database file to
//! a new file while the server keeps running (a read transaction: writers go on, the copy
//! is the file as of its start). A SQLite deployment is two files, the main one and the
//! execution ledger's (`Db::ledger`), so a backup is two copies, paired by name the same
//! way (`ledger_path`). PostgreSQL has its own tools (`pg_dump`), described in
//! docs/operations.md.

use super::{ledger_path, Db, StoreError, StoreResult};
use std::path::{Path, PathBuf};

/// What a backup wrote: each file and its size in bytes.
#[derive(Debug)]
pub struct Copies {
    pub main: (PathBuf, u64),
    pub ledger: (PathBuf, u64),
}

/// Writes a copy of the SQLite database to `target` and of its ledger to the ledger's
/// name for `target` (`copy.db` → `copy.ledger.db`); neither may exist yet.
///
/// The ledger first: what it names in the main file (approvals, escalations, runs) is
/// filed before the ledger links it, so the later main copy holds all of it. The other
/// order could restore a ledger entry whose approval the main copy never saw.
pub async fn sqlite_copy(db: &Db, target: &Path) -> StoreResult<Copies> {
    let Db::Sqlite { main, ledger } = db else {
        return Err(StoreError::Invalid(
            "flightdeck backup copies SQLite databases; back up PostgreSQL with pg_dump (docs/operations.md)".into(),
        ));
    };
    let ledger_target = ledger_path(target);
    for file in [target, &ledger_target] {
        if file.exists() {
            return Err(StoreError::Invalid(format!("{} exists already; choose a new file", file.display())));
        }
    }
    let ledger_size = vacuum_into(ledger, &ledger_target).await?;
    let main_size = vacuum_into(main, target).await?;
    Ok(Copies { main: (target.to_path_buf(), main_size), ledger: (ledger_target, ledger_size) })
}

async fn vacuum_into(pool: &sqlx::SqlitePool, target: &Path) -> StoreResult<u64> {
    let Some(path) = target.to_str() else {
        return Err(StoreError::Invalid(format!("{} is not a UTF-8 path", target.display())));
    };
    sqlx::query("VACUUM INTO $1").bind(path).execute(pool).await?;
    Ok(std::fs::metadata(target).map(|m| m.len()).unwrap_or(0))
}
