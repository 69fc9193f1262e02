//! The zstd dictionaries span chunks are compressed with (docs/adr/0010-chunk-dictionaries.md):
//! trained from the deployment's own newest chunks once it has enough of them, and again
//! a week later so it follows the agents as they change; stored in `chunk_dictionaries`
//! so every instance and every later process can read what any of them wrote. The newest
//! is the one writers use; none is ever deleted (a chunk needs its dictionary for as long
//! as it is kept, and each is at most 64 KiB).
//!
//! [`super::packing`] compresses and keeps the prepared dictionaries; this module moves
//! them between the database and that process-wide registry.

use super::packing::{self, Dictionary};
use super::sql::{Sql, Tx};
use super::{Db, StoreResult};
use std::collections::BTreeSet;
use std::sync::Arc;

/// How many of the newest span chunks a dictionary learns from.
pub const SAMPLE_CHUNKS: i64 = 5_000;
/// Fewer chunks than this and no dictionary is trained yet: zstd needs many samples to
/// find what they share (and a new deployment's first minutes are not its usual load).
pub const MIN_SAMPLE_CHUNKS: usize = 1_000;
/// A dictionary older than this is replaced by one trained on the chunks of now.
pub const RETRAIN_AFTER_MS: i64 = 7 * 86_400_000;

/// The dictionary new chunks are compressed with: the newest stored, loaded into this
/// process if it was not yet (another instance may have trained it).
pub async fn current(tx: &mut Tx) -> Result<Option<Arc<Dictionary>>, sqlx::Error> {
    let newest: Option<(i64,)> = tx
        .fetch_optional(Sql::new("SELECT id FROM chunk_dictionaries ORDER BY created_at DESC, id DESC LIMIT 1"))
        .await?;
    let Some((id,)) = newest else { return Ok(None) };
    if let Some(known) = packing::known(id as u32) {
        return Ok(Some(known));
    }
    load_in(tx, [id]).await?;
    Ok(packing::known(id as u32))
}

/// The ids of the dictionaries `packed` chunks need that this process does not have.
fn missing<'a>(packed: impl IntoIterator<Item = Option<&'a [u8]>>) -> BTreeSet<i64> {
    packed
        .into_iter()
        .flatten()
        .filter_map(packing::dictionary_of)
        .filter(|id| packing::known(*id).is_none())
        .map(i64::from)
        .collect()
}

fn select(ids: impl IntoIterator<Item = i64>) -> Sql {
    let mut sql = Sql::new("SELECT bytes FROM chunk_dictionaries WHERE id IN ");
    sql.list(ids);
    sql
}

/// Loads, inside a transaction, the dictionaries that `packed` chunks need and this
/// process does not have yet, so [`packing::unpack`] can read them.
pub async fn load_for_tx<'a>(
    tx: &mut Tx,
    packed: impl IntoIterator<Item = Option<&'a [u8]>>,
) -> Result<(), sqlx::Error> {
    let ids = missing(packed);
    if ids.is_empty() {
        return Ok(());
    }
    load_in(tx, ids).await
}

async fn load_in(tx: &mut Tx, ids: impl IntoIterator<Item = i64>) -> Result<(), sqlx::Error> {
    remember_all(tx.fetch_all(select(ids)).await?);
    Ok(())
}

fn remember_all(rows: Vec<(Vec<u8>,)>) {
    for (bytes,) in &rows {
        packing::remember(bytes);
    }
}

/// As [`load_for_tx`], outside a transaction.
pub async fn load_for<'a>(db: &Db, packed: impl IntoIterator<Item = Option<&'a [u8]>>) -> Result<(), sqlx::Error> {
    let ids = missing(packed);
    if ids.is_empty() {
        return Ok(());
    }
    remember_all(db.fetch_all(select(ids)).await?);
    Ok(())
}

/// Trains and stores a dictionary when none is stored yet or the newest is older than
/// [`RETRAIN_AFTER_MS`], and there are at least [`MIN_SAMPLE_CHUNKS`] span chunks to learn
/// from. Returns the new dictionary's id. Training takes about a second of one core; it
/// runs on a blocking thread, never on the ingest writer.
pub async fn train_if_due(db: &Db, now_ms: i64) -> StoreResult<Option<u32>> {
    let newest: Vec<(Option<i64>,)> = db.fetch_all(Sql::new("SELECT MAX(created_at) FROM chunk_dictionaries")).await?;
    if newest.first().and_then(|(c,)| *c).is_some_and(|created| now_ms - created < RETRAIN_AFTER_MS) {
        return Ok(None);
    }
    // The newest runs' chunks, read down the (run number, id) index: on PostgreSQL's day
    // partitions (ADR 0016) no index orders chunks by id alone.
    let mut sql = Sql::new("SELECT records, packed FROM span_chunks ORDER BY run_no DESC, id DESC LIMIT ");
    sql.bind(SAMPLE_CHUNKS);
    let rows: Vec<(String, Option<Vec<u8>>)> = db.fetch_all(sql).await?;
    if rows.len() < MIN_SAMPLE_CHUNKS {
        return Ok(None);
    }
    load_for(db, rows.iter().map(|(_, p)| p.as_deref())).await?;
    let samples: Vec<String> =
        rows.into_iter().map(|(text, packed)| packing::unpack(text, packed)).collect::<Result<_, _>>()?;
    let trained = tokio::task::spawn_blocking(move || packing::train(&samples)).await.ok().flatten();
    let Some(bytes) = trained else { return Ok(None) };
    let Some(dictionary) = packing::remember(&bytes) else { return Ok(None) };
    let mut sql = Sql::new("INSERT INTO chunk_dictionaries (id, created_at, bytes) ");
    sql.values([(i64::from(dictionary.id()), now_ms, bytes)], |row, (id, at, bytes)| {
        row.bind(id).bind(at).bind(bytes);
    });
    // The same dictionary again (the same newest chunks, or another instance trained
    // from them at the same moment): it is the newest as of now.
    sql.push(" ON CONFLICT (id) DO UPDATE SET created_at = EXCLUDED.created_at");
    db.execute(sql).await?;
    Ok(Some(dictionary.id()))
}
