//! Schema migrations, one folder per backend (`migrations/sqlite`, `migrations/postgres`),
//! applied in order at start. A migration that was released is never edited: new
//! behaviour goes in a new one (`app/tests/migrations.rs` holds the checksum of every
//! migration and fails when one changes).
//!
//! Before that rule was kept, five were edited after release. sqlx records the SHA-384 of
//! the text it applied and refuses to start on a database whose recorded text differs, so
//! a database created before an edit would not start. [`accept_released_texts`] records
//! today's text for exactly those versions when the database holds their released text,
//! and migration 0019 repairs the one schema difference the edits made.

use super::dialect::Backend;
use super::sql::Sql;
use super::Db;
use sqlx::migrate::Migrator;
use sqlx::SqlitePool;

static SQLITE: Migrator = sqlx::migrate!("../migrations/sqlite");
static POSTGRES: Migrator = sqlx::migrate!("../migrations/postgres");
static SQLITE_LEDGER: Migrator = sqlx::migrate!("../migrations/sqlite-ledger");

/// This build's migrations for `backend`.
pub fn migrator(backend: Backend) -> &'static Migrator {
    match backend {
        Backend::Sqlite => &SQLITE,
        Backend::Postgres => &POSTGRES,
    }
}

/// The migrations of the execution ledger's own SQLite file (see `Db::ledger`); it keeps
/// its own `_sqlx_migrations`. On PostgreSQL the ledger's tables are in the main
/// migrations.
pub fn ledger_migrator() -> &'static Migrator {
    &SQLITE_LEDGER
}

/// The columns of `call_ledger`, as both files define them.
const LEDGER_COLUMNS: &str = "id, idempotency_key, natural_key, run_id, step_index, tool, arguments, state, \
    attempts, deduped, external_id, response, error, verified_by, approval_id, escalation_id, settled_by, \
    requested_by_token, created_at, started_at, completed_at, updated_at";

/// Copies the ledger's entries and hourly dedupe counts from the main SQLite file, where
/// releases before 0.3 kept them, into the ledger's own file; the main file's migration
/// 0036 then drops them there. Returns the entries copied; 0 once 0036 has run.
///
/// Copies on a connection of its own, the ledger's file attached only to it: a pooled
/// connection with that file attached would take both files' write locks at every
/// `BEGIN IMMEDIATE`. Idempotent (`INSERT OR IGNORE`), so a start interrupted between this
/// copy and 0036 copies nothing twice.
pub async fn move_ledger_into_its_file(main: &SqlitePool, ledger: &SqlitePool) -> Result<u64, sqlx::Error> {
    use sqlx::{Connection, Executor};
    let exists = "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'call_ledger'";
    if sqlx::query_scalar::<_, i64>(exists).fetch_one(main).await? == 0 {
        return Ok(0);
    }
    let mut conn = sqlx::SqliteConnection::connect_with(main.connect_options().as_ref()).await?;
    let file = ledger.connect_options().get_filename().to_string_lossy().into_owned();
    sqlx::query("ATTACH DATABASE $1 AS ledger_file").bind(file).execute(&mut conn).await?;
    let mut tx = conn.begin_with("BEGIN IMMEDIATE").await?;
    let moved = tx
        .execute(
            format!(
                "INSERT OR IGNORE INTO ledger_file.call_ledger ({LEDGER_COLUMNS}) \
                 SELECT {LEDGER_COLUMNS} FROM main.call_ledger"
            )
            .as_str(),
        )
        .await?
        .rows_affected();
    tx.execute(
        "INSERT OR IGNORE INTO ledger_file.call_ledger_hours (hour_ms, tool, deduped) \
         SELECT hour_ms, tool, deduped FROM main.call_ledger_hours",
    )
    .await?;
    tx.commit().await?;
    conn.execute("DETACH DATABASE ledger_file").await?;
    conn.close().await?;
    Ok(moved)
}

/// Migrations edited after release: (backend, version, SHA-384 of the released text).
/// 0010 lost a covering index (repaired by 0019), 0011 gained an index on a table 0013
/// dropped, and SQLite's 0016 changed a comment.
pub const EDITED_AFTER_RELEASE: &[(Backend, i64, &str)] = &[
    (
        Backend::Sqlite,
        10,
        "dad6550991b916c19519ed3c8b68e06f26820e8de21ff2b3c5f38cfb63fc67e96c82a131f329ea666f40aeb75ff969ef",
    ),
    (
        Backend::Postgres,
        10,
        "0616ab5509ace743625a226aaca8a2977cabea81174c2de81d80438e54ee95e78be166343fb4085f6688da3e7e54956c",
    ),
    (
        Backend::Sqlite,
        11,
        "94f461fe224eeebd066919b4fb338133fdf8e3919772a6b95566d83a756aa7cd5f7fd849267e86c7985cabbdd2d152f9",
    ),
    (
        Backend::Postgres,
        11,
        "94f461fe224eeebd066919b4fb338133fdf8e3919772a6b95566d83a756aa7cd5f7fd849267e86c7985cabbdd2d152f9",
    ),
    (
        Backend::Sqlite,
        16,
        "b498557d55b7d1610957a04fb484609831ff907f17e306059b10138c18764cd0e2ab14cc39ca4d9100be1a867c01bddf",
    ),
];

/// For each version in [`EDITED_AFTER_RELEASE`] that this database applied in its
/// released text, records today's text instead, so sqlx accepts the database; any other
/// recorded text is left alone (sqlx then refuses it, as it should). Returns how many
/// were recorded anew. Nothing to do on a database that has no migrations yet.
pub async fn accept_released_texts(db: &Db) -> Result<u64, sqlx::Error> {
    let exists_sql = match db.backend() {
        Backend::Sqlite => "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = '_sqlx_migrations'",
        Backend::Postgres => {
            "SELECT COUNT(*) FROM pg_tables WHERE tablename = '_sqlx_migrations' AND schemaname = current_schema()"
        }
    };
    let exists: i64 = db.fetch_one_value(Sql::new(exists_sql)).await?;
    if exists == 0 {
        return Ok(0);
    }
    let mut accepted = 0;
    for (backend, version, released) in EDITED_AFTER_RELEASE.iter().filter(|(b, _, _)| *b == db.backend()) {
        let Some(today) = migrator(*backend).iter().find(|m| m.version == *version) else { continue };
        let released = hex::decode(released).expect("the recorded checksums are hex");
        let sql = "UPDATE _sqlx_migrations SET checksum = $1 WHERE version = $2 AND checksum = $3";
        let today: &[u8] = today.checksum.as_ref();
        let args = vec![today.to_vec().into(), (*version).into(), released.into()];
        let changed = db.execute(Sql::with_args(sql, args)).await?;
        accepted += changed;
    }
    Ok(accepted)
}
