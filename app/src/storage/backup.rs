//! Backups. SQLite: `VACUUM INTO` writes a consistent, compacted copy of the database to
//! a new file while the server keeps running (a read transaction: writers go on, the copy
//! is the database as of its start). PostgreSQL has its own tools (`pg_dump`), described
//! in docs/operations.md.

use super::{on_pool, Db, StoreError, StoreResult};
use std::path::Path;

/// Writes a copy of the SQLite database to `target`, which must not exist yet. Returns
/// its size in bytes.
pub async fn sqlite_copy(db: &Db, target: &Path) -> StoreResult<u64> {
    let Db::Sqlite(_) = db else {
        return Err(StoreError::Invalid(
            "flightdeck backup copies SQLite databases; back up PostgreSQL with pg_dump (docs/operations.md)".into(),
        ));
    };
    if target.exists() {
        return Err(StoreError::Invalid(format!("{} exists already; choose a new file", target.display())));
    }
    let Some(path) = target.to_str() else {
        return Err(StoreError::Invalid(format!("{} is not a UTF-8 path", target.display())));
    };
    on_pool!(db, pool => sqlx::query("VACUUM INTO $1").bind(path).execute(pool).await.map(|_| ()))?;
    Ok(std::fs::metadata(target).map(|m| m.len()).unwrap_or(0))
}
