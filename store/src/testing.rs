//! Test harness: a fresh, migrated database on each backend. PostgreSQL tests create
//! their own database on the server named by `FLIGHTDECK_TEST_PG_URL` and drop it after.
//! Without that variable they are skipped loudly, except under `CI=true`, where a
//! missing PostgreSQL fails the test instead.

use super::Db;
use std::sync::atomic::{AtomicU32, Ordering};

/// One migrated database; call [`TestDb::cleanup`] at the end of the test.
pub struct TestDb {
    pub db: Db,
    /// The URL of this database, for starting a server process on it.
    pub url: String,
    admin_url: Option<String>,
    name: Option<String>,
    _dir: Option<tempfile::TempDir>,
}

impl TestDb {
    pub fn backend(&self) -> &'static str {
        self.db.backend_name()
    }

    pub async fn sqlite() -> TestDb {
        Self::sqlite_at(None).await
    }

    /// A SQLite database migrated up to `version` only (see [`Db::migrate_up_to`]).
    pub async fn sqlite_at_version(version: i64) -> TestDb {
        Self::sqlite_at(Some(version)).await
    }

    /// Migrated up to `version` only (see [`Db::migrate_up_to`]), or fully with `None`.
    async fn sqlite_at(version: Option<i64>) -> TestDb {
        let dir = tempfile::tempdir().expect("temp dir");
        let url = format!("sqlite://{}", dir.path().join("test.db").display());
        let db = Db::connect(&url).await.expect("open sqlite");
        match version {
            Some(v) => db.migrate_up_to(v).await.expect("migrate sqlite part way"),
            None => db.migrate().await.expect("migrate sqlite"),
        }
        TestDb { db, url, admin_url: None, name: None, _dir: Some(dir) }
    }

    /// A new PostgreSQL database, or `None` (after a loud message) when none is configured.
    pub async fn postgres() -> Option<TestDb> {
        Self::postgres_at(None).await
    }

    /// A new, empty PostgreSQL database (not even sqlx's table), for loading a dump.
    pub async fn postgres_empty() -> Option<TestDb> {
        Self::postgres_created(None, false).await
    }

    async fn postgres_at(version: Option<i64>) -> Option<TestDb> {
        Self::postgres_created(version, true).await
    }

    async fn postgres_created(version: Option<i64>, migrate: bool) -> Option<TestDb> {
        let Ok(admin_url) = std::env::var("FLIGHTDECK_TEST_PG_URL") else {
            if std::env::var("CI").is_ok_and(|v| v == "true" || v == "1") {
                panic!("CI=true but FLIGHTDECK_TEST_PG_URL is not set: PostgreSQL tests must run in CI");
            }
            eprintln!("!!! SKIPPING PostgreSQL: set FLIGHTDECK_TEST_PG_URL (cargo xtask test does) to run it");
            return None;
        };
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "fdtest_{}_{}_{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed),
            chrono::Utc::now().timestamp_micros() % 1_000_000
        );
        let admin = Db::connect(&admin_url).await.expect("connect to the PostgreSQL test server");
        if let Db::Postgres(pool) = &admin {
            sqlx::query(&format!("CREATE DATABASE {name}")).execute(pool).await.expect("create test database");
        }
        admin.close().await;
        let url = with_database(&admin_url, &name);
        let db = Db::connect(&url).await.expect("connect to the test database");
        match version {
            _ if !migrate => {}
            Some(v) => db.migrate_up_to(v).await.expect("migrate postgres part way"),
            None => db.migrate().await.expect("migrate postgres"),
        }
        Some(TestDb { db, url, admin_url: Some(admin_url), name: Some(name), _dir: None })
    }

    /// SQLite always, PostgreSQL when available.
    pub async fn each_backend() -> Vec<TestDb> {
        let mut all = vec![TestDb::sqlite().await];
        all.extend(TestDb::postgres().await);
        all
    }

    /// Each backend migrated only up to `version`; `db.migrate()` applies the rest.
    pub async fn each_backend_at(version: i64) -> Vec<TestDb> {
        let mut all = vec![TestDb::sqlite_at(Some(version)).await];
        all.extend(TestDb::postgres_at(Some(version)).await);
        all
    }

    /// Closes the pool and drops the PostgreSQL database.
    pub async fn cleanup(self) {
        self.db.close().await;
        if let (Some(admin_url), Some(name)) = (self.admin_url, self.name) {
            if let Ok(Db::Postgres(pool)) = Db::connect(&admin_url).await {
                let _ = sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).execute(&pool).await;
                pool.close().await;
            }
        }
    }
}

/// Replaces the database name in a PostgreSQL URL, keeping host, user and parameters.
fn with_database(url: &str, name: &str) -> String {
    let (base, query) = url.split_once('?').map(|(b, q)| (b, Some(q))).unwrap_or((url, None));
    let (scheme, rest) = base.split_once("://").expect("a postgres URL has a scheme");
    let authority = rest.split('/').next().unwrap_or("");
    let mut out = format!("{scheme}://{authority}/{name}");
    if let Some(q) = query {
        out.push('?');
        out.push_str(q);
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn database_name_is_swapped_in_place() {
        assert_eq!(
            super::with_database("postgres:///postgres?host=/var/run/postgresql", "t1"),
            "postgres:///t1?host=/var/run/postgresql"
        );
        assert_eq!(super::with_database("postgres://u:p@h:5432/db", "t2"), "postgres://u:p@h:5432/t2");
    }
}
