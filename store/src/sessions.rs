//! Browser sessions, kept in the same database as everything else so any instance behind
//! a load balancer can serve any request. Delegates to tower-sessions' sqlx stores.

use super::Db;
use async_trait::async_trait;
use tower_sessions::session::{Id, Record};
use tower_sessions::session_store::{self, ExpiredDeletion, SessionStore};
use tower_sessions_sqlx_store::{PostgresStore, SqliteStore};

/// A session store for whichever backend the deployment uses.
#[derive(Debug, Clone)]
pub enum SessionStoreAny {
    Sqlite(SqliteStore),
    Postgres(PostgresStore),
}

impl SessionStoreAny {
    pub fn new(db: Db) -> Self {
        match db {
            Db::Sqlite { main: pool, .. } => SessionStoreAny::Sqlite(SqliteStore::new(pool)),
            Db::Postgres(pool) => SessionStoreAny::Postgres(PostgresStore::new(pool)),
        }
    }

    pub async fn migrate(&self) -> sqlx::Result<()> {
        match self {
            SessionStoreAny::Sqlite(s) => s.migrate().await,
            SessionStoreAny::Postgres(s) => s.migrate().await,
        }
    }
}

#[async_trait]
impl SessionStore for SessionStoreAny {
    async fn create(&self, record: &mut Record) -> session_store::Result<()> {
        match self {
            SessionStoreAny::Sqlite(s) => s.create(record).await,
            SessionStoreAny::Postgres(s) => s.create(record).await,
        }
    }

    async fn save(&self, record: &Record) -> session_store::Result<()> {
        match self {
            SessionStoreAny::Sqlite(s) => s.save(record).await,
            SessionStoreAny::Postgres(s) => s.save(record).await,
        }
    }

    async fn load(&self, id: &Id) -> session_store::Result<Option<Record>> {
        match self {
            SessionStoreAny::Sqlite(s) => s.load(id).await,
            SessionStoreAny::Postgres(s) => s.load(id).await,
        }
    }

    async fn delete(&self, id: &Id) -> session_store::Result<()> {
        match self {
            SessionStoreAny::Sqlite(s) => s.delete(id).await,
            SessionStoreAny::Postgres(s) => s.delete(id).await,
        }
    }
}

#[async_trait]
impl ExpiredDeletion for SessionStoreAny {
    async fn delete_expired(&self) -> session_store::Result<()> {
        match self {
            SessionStoreAny::Sqlite(s) => s.delete_expired().await,
            SessionStoreAny::Postgres(s) => s.delete_expired().await,
        }
    }
}
