//! The storage layer: one interface over SQLite (the embedded default) and PostgreSQL.
//!
//! Each resource has its own module of plain async functions taking a [`Db`]. A statement
//! is written once with `$n` placeholders, which both backends accept, as an [`sql::Sql`]
//! run on a `Db` or a transaction ([`sql::Tx`]); what differs between SQLite and
//! PostgreSQL is in [`dialect`], one method per statement.

pub mod alerts;
pub mod approval_rules;
pub mod approvals;
pub mod audit;
pub mod backup;
pub mod dialect;
pub mod dictionaries;
pub mod escalations;
pub mod ledger;
pub mod metrics;
pub mod migrations;
pub mod notices;
pub mod packing;
pub mod partitions;
pub mod policies;
pub mod postgres_settings;
pub mod prices;
pub mod reason_counts;
pub mod recompute;
pub mod replay_results;
pub mod retention;
pub mod rules;
pub mod runs;
pub mod sessions;
pub mod silences;
pub mod slack;
pub mod spans;
pub mod sql;
pub mod terms;
#[cfg(feature = "test-support")]
pub mod testing;
pub mod tokens;
pub mod tools;
pub mod trends;
pub mod users;
pub mod wal;
pub mod warm_up;
pub mod webhooks;
pub mod write;

pub use domain::clock::{from_ms, now_ms};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{PgPool, SqlitePool};
use std::str::FromStr;
use std::time::Duration;

/// A connection pool to whichever backend the deployment configured.
#[derive(Debug, Clone)]
pub enum Db {
    Sqlite {
        /// The database file.
        main: SqlitePool,
        /// The execution ledger's file beside it, with a write lock of its own (see
        /// [`Db::ledger`], ADR 0011).
        ledger: SqlitePool,
    },
    Postgres(PgPool),
}

/// What a storage call can fail with, beyond a broken database.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// What was asked to be stored breaks a rule (a 400: the message says which).
    #[error("{0}")]
    Invalid(String),
    /// It conflicts with what is stored (a duplicate, a state that changed).
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    NotFound(String),
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

pub type StoreResult<T> = Result<T, StoreError>;

impl StoreError {
    /// PostgreSQL aborted the transaction to break a deadlock (40P01) or a serialization
    /// conflict (40001) with another writer: the same work, tried again, can succeed.
    pub fn is_write_conflict(&self) -> bool {
        match self {
            StoreError::Database(sqlx::Error::Database(e)) => matches!(e.code().as_deref(), Some("40P01" | "40001")),
            _ => false,
        }
    }

    /// PostgreSQL gave up waiting for a lock past the transaction's `lock_timeout` (55P03).
    pub fn is_lock_timeout(&self) -> bool {
        match self {
            StoreError::Database(sqlx::Error::Database(e)) => e.code().as_deref() == Some("55P03"),
            _ => false,
        }
    }
}

/// SQLite pools drop a connection that comes back still inside a transaction. When a
/// statement fails with SQLITE_FULL (disk full) or SQLITE_IOERR, SQLite may roll the
/// transaction back by itself; the ROLLBACK sqlx then sends fails ("no transaction is
/// active") and sqlx keeps counting the transaction as open, so every later BEGIN on that
/// connection failed with "non-zero transaction depth": after a full disk was freed, the
/// ingest writer never stored anything again (found by the disk-full chaos scenario).
/// A new connection starts clean. A committed or rolled-back connection is not affected.
fn sqlite_pool_options() -> SqlitePoolOptions {
    SqlitePoolOptions::new().after_release(|conn, _| {
        Box::pin(async move {
            use sqlx::Connection;
            Ok(!conn.is_in_transaction())
        })
    })
}

/// Connections to the ledger's SQLite file, all opened at start and kept (see
/// `Db::connect`): its writers take turns anyway, and readers (the run page, `/metrics`)
/// are few.
pub const LEDGER_CONNECTIONS: u32 = 4;

/// The ingest writer's SQLite page cache, MiB (the other connections keep SQLite's 2 MiB).
/// Each run adds entries to indexes whose keys are random (run id, trace id, cost,
/// duration), so once a database holds a few GB nearly every entry lands on a page of its
/// own; with 2 MiB those pages were read back and spilled to the log more than once per
/// commit (`cargo xtask bench --grow-to`: 125 MB/s written for 13,000 spans/s at 5 GB).
/// Filled only as the database grows; counted in the memory figures of docs/operations.md.
pub const WRITER_CACHE_MIB: u32 = 128;

/// The most connections a PostgreSQL pool holds: the web server's pages, the ingest
/// writers (`postgres_writers`, 4 by default) and the background jobs share them.
pub const POSTGRES_CONNECTIONS: u32 = 16;

impl Db {
    /// Opens a pool for `url`: `sqlite://PATH` (created if missing) or `postgres://...`.
    pub async fn connect(url: &str) -> anyhow::Result<Db> {
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            // JIT off: its compiling pays off in scans that run for seconds, and Flightdeck
            // reads pages that stop early. A generic plan's estimates are high enough to
            // pass `jit_above_cost`, and compiling one took 600 ms of a 50 ms search page.
            let options = PgConnectOptions::from_str(url)
                .map_err(|e| anyhow::anyhow!("DATABASE_URL is not a valid PostgreSQL URL: {e}"))?
                .options([("jit", "off")]);
            // Connections are kept, not replaced after 30 minutes or closed after 10 idle
            // (sqlx's defaults): a new connection plans its first statements against every
            // day's partitions with nothing of them cached yet (the search's first plan
            // took 50-70 ms at 10 million spans, later ones under 1 ms), and a console
            // opened after a quiet hour would meet only new ones. At most
            // `max_connections` stay open. Each is readied as it opens (see `warm_up`); the
            // first `WARM_CONNECTIONS` open now, the server opens the rest before it serves
            // (`open_every_connection`).
            let pool = PgPoolOptions::new()
                .max_connections(POSTGRES_CONNECTIONS)
                .min_connections(warm_up::WARM_CONNECTIONS)
                .idle_timeout(None)
                .max_lifetime(None)
                .acquire_timeout(Duration::from_secs(10))
                .after_connect(|conn, _| {
                    Box::pin(async move {
                        warm_up::ready(conn).await;
                        Ok(())
                    })
                })
                .connect_with(options)
                .await
                .map_err(|e| anyhow::anyhow!("cannot connect to PostgreSQL: {e}"))?;
            Ok(Db::Postgres(pool))
        } else if url.starts_with("sqlite:") {
            let options = SqliteConnectOptions::from_str(url)
                .map_err(|e| anyhow::anyhow!("not a valid SQLite URL `{url}`: {e}"))?
                .create_if_missing(true)
                // WAL lets readers run beside the single writer; NORMAL sync keeps every
                // committed transaction across a process crash, which is what an OTLP
                // acknowledgement promises.
                .journal_mode(SqliteJournalMode::Wal)
                .synchronous(SqliteSynchronous::Normal)
                .busy_timeout(Duration::from_secs(10))
                .foreign_keys(true)
                // Multi-row upserts keep a statement journal; in memory, not a temp file.
                .pragma("temp_store", "memory")
                // The server checkpoints the log from its own connection (see `wal`).
                .pragma("wal_autocheckpoint", wal::AUTOCHECKPOINT_PAGES.to_string())
                .pragma("journal_size_limit", wal::LOG_FILE_LIMIT_BYTES.to_string())
                // sqlx hands rows from SQLite's worker thread to the task through a
                // channel; at the default 50 each 500-row read of a run page waited ten times for
                // the task to be scheduled, which on a busy machine cost tens of ms.
                .row_buffer_size(1024);
            // The ledger's log is restarted by the server's loop at a length of its own (see
            // `wal::checkpoint_ledger`), so its limits are its own too.
            let ledger_options = options
                .clone()
                .filename(ledger_path(options.get_filename()))
                .pragma("wal_autocheckpoint", wal::LEDGER_AUTOCHECKPOINT_PAGES.to_string())
                .pragma("journal_size_limit", wal::LEDGER_LOG_FILE_LIMIT_BYTES.to_string());
            let pool = sqlite_pool_options()
                .max_connections(8)
                .connect_with(options)
                .await
                .map_err(|e| anyhow::anyhow!("cannot open SQLite database `{url}`: {e}"))?;
            let ledger = sqlite_pool_options()
                .max_connections(LEDGER_CONNECTIONS)
                .idle_timeout(None)
                .max_lifetime(None)
                .connect_with(ledger_options)
                .await
                .map_err(|e| anyhow::anyhow!("cannot open the ledger's SQLite database beside `{url}`: {e}"))?;
            // Every connection opened now, by the caller, and kept: each starts SQLite's
            // thread of its own from the caller's thread, at its priority. In `serve`
            // that is the main thread, which keeps its priority while the shared
            // runtime's threads, decoding exports, run lower (the server's `priority`);
            // opened later by whichever task first needed one (a background job on that
            // runtime, say), a ledger thread could queue behind that decoding like them.
            // The ledger bench shows the difference in the tail (docs/benchmarks.md).
            let mut held = Vec::with_capacity(LEDGER_CONNECTIONS as usize);
            for _ in 0..LEDGER_CONNECTIONS {
                held.push(ledger.acquire().await?);
            }
            drop(held);
            Ok(Db::Sqlite { main: pool, ledger })
        } else {
            anyhow::bail!("unsupported database URL `{url}`: use sqlite://PATH or postgres://USER@HOST/DB")
        }
    }

    /// A handle on the same database for one busy task, the ingest writer: on SQLite its
    /// own one-connection pool, so every transaction runs on the same connection and finds
    /// the pages it touched last time in that connection's cache. From the shared pool,
    /// which hands out idle connections in turn, consecutive commits landed on different
    /// connections with cold caches (end to end about 20 % slower, and a page cache per
    /// connection held more memory). Its automatic checkpoint is off: the writer restarts
    /// the log itself (see `wal`). On PostgreSQL the server keeps the cache, so this is
    /// the shared pool.
    pub fn dedicated(&self) -> Db {
        match self {
            Db::Sqlite { main: pool, ledger } => {
                // A page cache of WRITER_CACHE_MIB instead of SQLite's 2 MiB: see there.
                let options = (*pool.connect_options())
                    .clone()
                    .pragma("wal_autocheckpoint", "0")
                    .pragma("cache_size", format!("-{}", WRITER_CACHE_MIB * 1024));
                let writer = sqlite_pool_options().max_connections(1).min_connections(0).connect_lazy_with(options);
                Db::Sqlite { main: writer, ledger: ledger.clone() }
            }
            Db::Postgres(pool) => Db::Postgres(pool.clone()),
        }
    }

    /// The database holding the execution ledger (`storage::ledger`). On SQLite a file of
    /// its own beside the main one ([`ledger_path`]), with its own write lock: SQLite lets
    /// one writer at a time into a file, so in the main file an agent's ask waited for the
    /// ingest commit in progress (7-10 ms at 20,000 spans/s) and the p99 of an ask and its
    /// report was 16-25 ms.
    /// The ledger's transactions read and write nothing else, which is what makes the
    /// split free of cross-file transactions (docs/adr/0011-ledger-file.md). On PostgreSQL,
    /// whose writers lock rows, not the database, the same database.
    pub fn ledger(&self) -> Db {
        match self {
            Db::Sqlite { ledger, .. } => Db::Sqlite { main: ledger.clone(), ledger: ledger.clone() },
            Db::Postgres(pool) => Db::Postgres(pool.clone()),
        }
    }

    /// Whether the ledger is a database of its own ([`Db::ledger`]): a transaction on it
    /// cannot also write the main database.
    pub fn ledger_is_separate(&self) -> bool {
        matches!(self, Db::Sqlite { .. })
    }

    /// Applies every pending migration of this backend, prepares the session table, and
    /// fills the trends' rollups the first time (from the runs an older release stored).
    /// On SQLite the ledger's file first, then the entries an older release kept in the
    /// main file are copied into it, before the main file's migration 0036 drops them there.
    pub async fn migrate(&self) -> anyhow::Result<()> {
        let accepted = migrations::accept_released_texts(self).await?;
        if accepted > 0 {
            tracing::info!(
                migrations = accepted,
                "recorded today's text of migrations this database applied before they were edited"
            );
        }
        if let Db::Sqlite { main: pool, ledger } = self {
            migrations::ledger_migrator().run(ledger).await?;
            let moved = migrations::move_ledger_into_its_file(pool, ledger).await?;
            if moved > 0 {
                tracing::info!(entries = moved, "moved the execution ledger into its own file");
            }
        }
        self.run_migrations(&migrations::migrator(self.backend())).await?;
        sessions::SessionStoreAny::new(self.clone()).migrate().await?;
        // PostgreSQL: today's and tomorrow's partitions (ADR 0016), before any write. Not
        // fatal: new runs go into the latest day that has them, and the hourly job retries.
        if let Err(e) = partitions::ensure_days(self, now_ms()).await {
            tracing::warn!(error = %e, "making today's partitions failed; will retry within the hour");
        }
        let started = std::time::Instant::now();
        if let Some(runs) = trends::build_rollups_if_new(self).await? {
            tracing::info!(
                runs,
                took_ms = started.elapsed().as_millis() as u64,
                "built the trends' rollups from the stored runs"
            );
        }
        Ok(())
    }

    /// Applies this backend's migrations up to and including `version` only, so a test
    /// can fill a database in an older schema and check what a later migration makes of it.
    #[cfg(feature = "test-support")]
    pub async fn migrate_up_to(&self, version: i64) -> anyhow::Result<()> {
        let all = migrations::migrator(self.backend());
        let older = sqlx::migrate::Migrator {
            migrations: all.iter().filter(|m| m.version <= version).cloned().collect::<Vec<_>>().into(),
            ignore_missing: false,
            locking: true,
            no_tx: false,
        };
        self.run_migrations(&older).await?;
        Ok(())
    }

    /// Applies `migrator`'s migrations to the main database (or checks them, for those
    /// applied).
    pub async fn run_migrations(&self, migrator: &sqlx::migrate::Migrator) -> Result<(), sqlx::migrate::MigrateError> {
        match self {
            Db::Sqlite { main, .. } => migrator.run(main).await,
            Db::Postgres(pool) => migrator.run(pool).await,
        }
    }

    /// Whether the database answers and every migration this build knows is applied.
    pub async fn is_ready(&self) -> Result<(), String> {
        let expected = migrations::migrator(self.backend()).iter().count() as i64;
        let applied = || sql::Sql::new("SELECT COUNT(*) FROM _sqlx_migrations WHERE success");
        let applied_here: Result<i64, sqlx::Error> = self.fetch_one_value(applied()).await;
        match applied_here {
            Ok(n) if n >= expected => {}
            Ok(n) => return Err(format!("{n} of {expected} migrations applied")),
            Err(e) => return Err(format!("database unreachable: {e}")),
        }
        if self.ledger_is_separate() {
            let expected = migrations::ledger_migrator().iter().count() as i64;
            match self.ledger().fetch_one_value::<i64>(applied()).await {
                Ok(n) if n >= expected => {}
                Ok(n) => return Err(format!("{n} of {expected} migrations of the ledger's file applied")),
                Err(e) => return Err(format!("the ledger's database unreachable: {e}")),
            }
        }
        Ok(())
    }

    /// Opens, and readies, every connection the PostgreSQL pool may hold
    /// ([`POSTGRES_CONNECTIONS`]), so that no page waits for one to open: a page's server
    /// functions run their statements side by side (the run page's first view in the page
    /// bench needed seven at once), and a connection opened for one of them spent 30-75 ms
    /// being readied before it ran (see `warm_up`). The server does this once before it
    /// serves, and fails to start if PostgreSQL refuses them (better than at a busy
    /// moment); tests keep [`warm_up::WARM_CONNECTIONS`]. SQLite has nothing to open.
    pub async fn open_every_connection(&self) -> StoreResult<u32> {
        let Db::Postgres(pool) = self else { return Ok(0) };
        let mut opening = tokio::task::JoinSet::new();
        for _ in 0..POSTGRES_CONNECTIONS {
            let pool = pool.clone();
            opening.spawn(async move { pool.acquire().await });
        }
        // Each connection is held until all are open, so none is handed out twice.
        let mut held = Vec::new();
        while let Some(opened) = opening.join_next().await {
            held.push(opened.map_err(|e| sqlx::Error::Io(std::io::Error::other(e)))??);
        }
        Ok(pool.size())
    }

    pub fn backend_name(&self) -> &'static str {
        match self {
            Db::Sqlite { .. } => "sqlite",
            Db::Postgres(_) => "postgres",
        }
    }

    pub async fn close(&self) {
        if let Db::Sqlite { ledger, .. } = self {
            ledger.close().await;
        }
        match self {
            Db::Sqlite { main, .. } => main.close().await,
            Db::Postgres(pool) => pool.close().await,
        }
    }
}

/// The execution ledger's SQLite file for the database file `main`: beside it, `.ledger`
/// before the extension (`flightdeck.db` → `flightdeck.ledger.db`), so a copy of the pair
/// under a new name keeps them paired.
pub fn ledger_path(main: &std::path::Path) -> std::path::PathBuf {
    let stem = main.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let name = match main.extension() {
        Some(ext) => format!("{stem}.ledger.{}", ext.to_string_lossy()),
        None => format!("{stem}.ledger"),
    };
    main.with_file_name(name)
}

/// A JSON column this build wrote, read back. One that does not parse is corrupt data and
/// an error: a default would show a person an empty checklist, no display fields or no
/// duplicates as if that were true.
pub(crate) fn stored_json<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, sqlx::Error> {
    serde_json::from_str(text).map_err(corrupt)
}

/// A stored chunk (spans or bodies) that does not parse, as the database error it is.
pub fn corrupt(e: serde_json::Error) -> sqlx::Error {
    sqlx::Error::Decode(Box::new(e))
}

fn is_unique_violation(err: &sqlx::Error) -> bool {
    err.as_database_error().is_some_and(|e| e.is_unique_violation())
}
