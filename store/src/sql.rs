//! Statements written once for both backends: SQL text with `$n` placeholders (which
//! SQLite and PostgreSQL both accept) and the values bound to them, run on a pool or in a
//! transaction of either backend.
//!
//! This is the storage interface the write path is built on. A statement is plain data
//! ([`Sql`]); running it is one `match` on the backend, here, instead of a copy of the
//! calling code per backend. What differs between the backends (locks, numbering, the
//! search-term index) is in [`super::dialect`], one method per statement.

use super::Db;
use sqlx::postgres::{PgArguments, PgRow};
use sqlx::sqlite::{SqliteArguments, SqliteRow};
use sqlx::{Arguments, FromRow, Postgres, Sqlite, Transaction};

/// One bound value. Each kind carries its own `None`, because PostgreSQL types a NULL
/// parameter by the kind it was bound as.
#[derive(Debug, Clone, PartialEq)]
pub enum Arg {
    Int(Option<i64>),
    Float(Option<f64>),
    Text(Option<String>),
    Bool(Option<bool>),
    /// BLOB on SQLite, BYTEA on PostgreSQL.
    Bytes(Option<Vec<u8>>),
}

macro_rules! arg_from {
    ($($t:ty => |$v:ident| $e:expr),* $(,)?) => {
        $(impl From<$t> for Arg {
            fn from($v: $t) -> Arg {
                $e
            }
        })*
    };
}

arg_from! {
    i64 => |v| Arg::Int(Some(v)),
    i32 => |v| Arg::Int(Some(i64::from(v))),
    Option<i64> => |v| Arg::Int(v),
    f64 => |v| Arg::Float(Some(v)),
    Option<f64> => |v| Arg::Float(v),
    bool => |v| Arg::Bool(Some(v)),
    Option<bool> => |v| Arg::Bool(v),
    String => |v| Arg::Text(Some(v)),
    Option<String> => |v| Arg::Text(v),
    &str => |v| Arg::Text(Some(v.to_string())),
    &String => |v| Arg::Text(Some(v.clone())),
    Option<&str> => |v| Arg::Text(v.map(str::to_string)),
    &Option<String> => |v| Arg::Text(v.clone()),
    Vec<u8> => |v| Arg::Bytes(Some(v)),
    Option<Vec<u8>> => |v| Arg::Bytes(v),
}

/// SQL text with `$n` placeholders and, in order, the values they stand for.
#[derive(Debug, Clone, PartialEq)]
pub struct Sql {
    text: String,
    args: Vec<Arg>,
    /// Every placeholder was appended by [`Sql::bind`], so they appear once each, in
    /// order: SQLite then gets anonymous `?`s (see [`Sql::sqlite_text`]).
    in_order: bool,
}

impl Sql {
    pub fn new(text: impl Into<String>) -> Sql {
        Sql { text: text.into(), args: Vec::new(), in_order: true }
    }

    /// A statement whose `$1`, `$2`... stand for `args`, in order.
    pub fn with_args(text: impl Into<String>, args: Vec<Arg>) -> Sql {
        Sql { text: text.into(), args, in_order: false }
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    /// The same statement asking PostgreSQL for its plan instead, one row per line.
    #[cfg(test)]
    pub fn explained(mut self) -> Sql {
        self.text.insert_str(0, "EXPLAIN ");
        self
    }

    /// The same statement asking SQLite for its plan instead (tests of which index a
    /// statement reads).
    #[cfg(test)]
    pub fn query_plan(mut self) -> Sql {
        self.text.insert_str(0, "EXPLAIN QUERY PLAN ");
        self
    }

    /// Appends SQL text (never a value: values go through [`Sql::bind`]).
    pub fn push(&mut self, text: &str) -> &mut Sql {
        self.text.push_str(text);
        self
    }

    /// Adds a value and returns its placeholder, for text that uses it more than once.
    pub fn arg(&mut self, value: impl Into<Arg>) -> String {
        self.in_order = false;
        self.args.push(value.into());
        format!("${}", self.args.len())
    }

    /// Appends a placeholder for `value`.
    pub fn bind(&mut self, value: impl Into<Arg>) -> &mut Sql {
        self.args.push(value.into());
        self.text.push('$');
        self.text.push_str(&self.args.len().to_string());
        self
    }

    /// The text as SQLite should get it. SQLite keeps the name of every numbered
    /// parameter (`$7`, `?7`) in a list that sqlx, binding each value, searches from the
    /// start: quadratic in the values, and a 5,000-value insert of the write path spent
    /// longer binding than writing, and ingest lost about a third of its rate. Anonymous
    /// `?`s have no names; when every placeholder was appended in order they mean the same.
    fn sqlite_text(&self) -> std::borrow::Cow<'_, str> {
        if !self.in_order || self.args.is_empty() {
            return std::borrow::Cow::Borrowed(&self.text);
        }
        let mut out = String::with_capacity(self.text.len());
        let mut chars = self.text.char_indices().peekable();
        while let Some((_, c)) = chars.next() {
            if c == '$' && chars.peek().is_some_and(|(_, d)| d.is_ascii_digit()) {
                while chars.peek().is_some_and(|(_, d)| d.is_ascii_digit()) {
                    chars.next();
                }
                out.push('?');
            } else {
                out.push(c);
            }
        }
        std::borrow::Cow::Owned(out)
    }

    /// Appends `(v1, v2, ...)`: a parenthesized list for `IN`.
    pub fn list<T: Into<Arg>>(&mut self, values: impl IntoIterator<Item = T>) -> &mut Sql {
        self.text.push('(');
        for (i, value) in values.into_iter().enumerate() {
            if i > 0 {
                self.text.push_str(", ");
            }
            self.bind(value);
        }
        self.text.push(')');
        self
    }

    /// Appends `VALUES (...), (...)`, one tuple per row, its values added by `each`.
    pub fn values<T>(
        &mut self,
        rows: impl IntoIterator<Item = T>,
        mut each: impl FnMut(&mut Tuple<'_>, T),
    ) -> &mut Sql {
        self.text.push_str("VALUES ");
        for (i, row) in rows.into_iter().enumerate() {
            if i > 0 {
                self.text.push_str(", ");
            }
            self.text.push('(');
            let mut tuple = Tuple { sql: self, empty: true };
            each(&mut tuple, row);
            self.text.push(')');
        }
        self
    }

    fn into_sqlite(self) -> Result<(String, SqliteArguments<'static>), sqlx::Error> {
        let text = self.sqlite_text().into_owned();
        Ok((text, arguments(self.args)?))
    }

    fn into_postgres(self) -> Result<(String, PgArguments), sqlx::Error> {
        Ok((self.text, arguments(self.args)?))
    }
}

/// The values of one row of [`Sql::values`].
pub struct Tuple<'a> {
    sql: &'a mut Sql,
    empty: bool,
}

impl Tuple<'_> {
    pub fn bind(&mut self, value: impl Into<Arg>) -> &mut Self {
        if !self.empty {
            self.sql.text.push_str(", ");
        }
        self.empty = false;
        self.sql.bind(value);
        self
    }
}

/// A row type both backends can decode (tuples of the usual types, `FromRow` structs).
pub trait FromBothRows: for<'r> FromRow<'r, SqliteRow> + for<'r> FromRow<'r, PgRow> + Send + Unpin {}
impl<T> FromBothRows for T where T: for<'r> FromRow<'r, SqliteRow> + for<'r> FromRow<'r, PgRow> + Send + Unpin {}

/// Which backend a statement is for. The statements that differ are methods of [`Tx`]
/// and [`Backend`] in `dialect`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// An open transaction on either backend. A SQLite write transaction also holds its
/// database's in-process write gate (see [`write_gate`]) until it ends.
pub enum Tx {
    Sqlite(Transaction<'static, Sqlite>, Option<tokio::sync::OwnedMutexGuard<()>>),
    Postgres(Transaction<'static, Postgres>),
}

/// How long a writer waits for the gate before giving up, as SQLite's busy timeout would.
const GATE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The in-process write gate of one SQLite database file, shared by every pool on it
/// (the ingest writer's own and the shared one).
///
/// Why: SQLite has one writer at a time, and a connection that finds the write lock taken
/// waits in SQLite's busy handler, which sleeps 1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50,
/// then 100 ms between tries and does not queue. Under ingest load, 500 guarded calls a
/// second (two small write transactions each) mostly slept: ask + complete took 15 s at
/// the median (`server/benches/ledger.rs`). Writers in this process now queue on a fair
/// async mutex and start the moment the previous one commits.
///
/// Interactive writers (a guarded call, a decision, a claim: someone is waiting on each)
/// go before bulk ones (an ingest batch, a retention sweep), which [`WriteGate::bulk`]
/// holds back while any interactive writer waits: an agent's ask then waits for at most
/// the one transaction in progress instead of every ingest batch queued before it.
#[derive(Default)]
struct WriteGate {
    lock: std::sync::Arc<tokio::sync::Mutex<()>>,
    /// Interactive writers waiting for `lock`.
    waiting: std::sync::atomic::AtomicUsize,
    /// Woken when `waiting` drops to zero.
    clear: tokio::sync::Notify,
    /// When an interactive writer last asked for the gate (ms since the Unix epoch).
    last_interactive_ms: std::sync::atomic::AtomicI64,
}

/// How long a bulk writer stands aside for interactive ones before queueing anyway, so a
/// steady stream of guarded calls slows ingest down (it answers 503 when its queue is
/// full) but never stops it.
const BULK_STANDS_ASIDE: std::time::Duration = std::time::Duration::from_millis(50);

impl WriteGate {
    async fn interactive(&self) -> tokio::sync::OwnedMutexGuard<()> {
        use std::sync::atomic::Ordering;
        struct Waiting<'a>(&'a WriteGate);
        impl Drop for Waiting<'_> {
            // Also on cancellation (a timed-out or dropped request), so bulk writers
            // never wait for a writer that has gone.
            fn drop(&mut self) {
                if self.0.waiting.fetch_sub(1, Ordering::AcqRel) == 1 {
                    self.0.clear.notify_waiters();
                }
            }
        }
        self.last_interactive_ms.store(super::now_ms(), Ordering::Relaxed);
        self.waiting.fetch_add(1, Ordering::AcqRel);
        let _waiting = Waiting(self);
        self.lock.clone().lock_owned().await
    }

    async fn bulk(&self) -> tokio::sync::OwnedMutexGuard<()> {
        use std::sync::atomic::Ordering;
        for _ in 0..2 {
            let _ = tokio::time::timeout(BULK_STANDS_ASIDE, async {
                loop {
                    let cleared = self.clear.notified();
                    tokio::pin!(cleared);
                    cleared.as_mut().enable();
                    if self.waiting.load(Ordering::Acquire) == 0 {
                        return;
                    }
                    cleared.await;
                }
            })
            .await;
            let guard = self.lock.clone().lock_owned().await;
            if self.waiting.load(Ordering::Acquire) == 0 {
                return guard;
            }
            // An interactive writer queued behind this one while it waited: the mutex is
            // fair, so releasing hands it the lock.
            drop(guard);
        }
        self.lock.clone().lock_owned().await
    }
}

/// Waits for the write gate as a bulk writer and holds it until the guard drops: for
/// work that takes SQLite's write lock outside a [`Tx`] (the ingest writer's log restart),
/// so it queues with the transactions instead of polling SQLite's busy handler, which a
/// writer releasing and retaking the lock back to back (a retention sweep) would starve.
/// `None` on PostgreSQL.
pub async fn hold_write_gate(db: &Db) -> Result<Option<tokio::sync::OwnedMutexGuard<()>>, sqlx::Error> {
    match db {
        Db::Sqlite { main: pool, .. } => Ok(Some(take_write_gate(pool, true).await?)),
        Db::Postgres(_) => Ok(None),
    }
}

/// Waits for `pool`'s database file's write gate, as a bulk or an interactive writer (see
/// [`WriteGate`]), giving up after [`GATE_TIMEOUT`] as SQLite's busy timeout would.
async fn take_write_gate(pool: &sqlx::SqlitePool, bulk: bool) -> Result<tokio::sync::OwnedMutexGuard<()>, sqlx::Error> {
    let gate = write_gate(pool);
    match bulk {
        true => tokio::time::timeout(GATE_TIMEOUT, gate.bulk()).await,
        false => tokio::time::timeout(GATE_TIMEOUT, gate.interactive()).await,
    }
    .map_err(|_| sqlx::Error::PoolTimedOut)
}

fn write_gate(pool: &sqlx::SqlitePool) -> std::sync::Arc<WriteGate> {
    use std::collections::HashMap;
    use std::sync::{Arc, LazyLock, Mutex};
    static GATES: LazyLock<Mutex<HashMap<std::path::PathBuf, Arc<WriteGate>>>> = LazyLock::new(Default::default);
    let file = pool.connect_options().get_filename().to_path_buf();
    GATES.lock().unwrap_or_else(|e| e.into_inner()).entry(file).or_default().clone()
}

impl Tx {
    pub fn backend(&self) -> Backend {
        match self {
            Tx::Sqlite(..) => Backend::Sqlite,
            Tx::Postgres(_) => Backend::Postgres,
        }
    }

    /// Begins a transaction that will write. On SQLite it takes the write lock at once
    /// (`BEGIN IMMEDIATE`), so concurrent writers queue on the busy timeout instead of
    /// failing when a reader would upgrade; PostgreSQL locks rows as it goes.
    ///
    /// For a writer someone is waiting on; see [`Tx::begin_bulk_write`] for the others.
    pub async fn begin_write(db: &Db) -> Result<Tx, sqlx::Error> {
        Tx::begin_write_as(db, false).await
    }

    /// As [`Tx::begin_write`], for a large writer nobody is waiting on (an ingest batch,
    /// a retention sweep): on SQLite it lets interactive writers go first ([`WriteGate`]).
    pub async fn begin_bulk_write(db: &Db) -> Result<Tx, sqlx::Error> {
        Tx::begin_write_as(db, true).await
    }

    async fn begin_write_as(db: &Db, bulk: bool) -> Result<Tx, sqlx::Error> {
        Ok(match db {
            Db::Sqlite { main: pool, .. } => {
                let guard = take_write_gate(pool, bulk).await?;
                Tx::Sqlite(pool.begin_with("BEGIN IMMEDIATE").await?, Some(guard))
            }
            Db::Postgres(pool) => Tx::Postgres(pool.begin().await?),
        })
    }

    /// Runs a statement; returns the number of rows it changed.
    pub async fn execute(&mut self, sql: Sql) -> Result<u64, sqlx::Error> {
        Ok(match self {
            Tx::Sqlite(tx, _) => {
                let (text, args) = sql.into_sqlite()?;
                sqlx::query_with(&text, args).execute(&mut **tx).await?.rows_affected()
            }
            Tx::Postgres(tx) => {
                let (text, args) = sql.into_postgres()?;
                sqlx::query_with(&text, args).execute(&mut **tx).await?.rows_affected()
            }
        })
    }

    pub async fn fetch_all<T: FromBothRows>(&mut self, sql: Sql) -> Result<Vec<T>, sqlx::Error> {
        match self {
            Tx::Sqlite(tx, _) => {
                let (text, args) = sql.into_sqlite()?;
                sqlx::query_as_with(&text, args).fetch_all(&mut **tx).await
            }
            Tx::Postgres(tx) => {
                let (text, args) = sql.into_postgres()?;
                sqlx::query_as_with(&text, args).fetch_all(&mut **tx).await
            }
        }
    }

    pub async fn fetch_optional<T: FromBothRows>(&mut self, sql: Sql) -> Result<Option<T>, sqlx::Error> {
        match self {
            Tx::Sqlite(tx, _) => {
                let (text, args) = sql.into_sqlite()?;
                sqlx::query_as_with(&text, args).fetch_optional(&mut **tx).await
            }
            Tx::Postgres(tx) => {
                let (text, args) = sql.into_postgres()?;
                sqlx::query_as_with(&text, args).fetch_optional(&mut **tx).await
            }
        }
    }

    pub async fn fetch_one<T: FromBothRows>(&mut self, sql: Sql) -> Result<T, sqlx::Error> {
        match self {
            Tx::Sqlite(tx, _) => {
                let (text, args) = sql.into_sqlite()?;
                sqlx::query_as_with(&text, args).fetch_one(&mut **tx).await
            }
            Tx::Postgres(tx) => {
                let (text, args) = sql.into_postgres()?;
                sqlx::query_as_with(&text, args).fetch_one(&mut **tx).await
            }
        }
    }

    pub async fn commit(self) -> Result<(), sqlx::Error> {
        match self {
            Tx::Sqlite(tx, _) => tx.commit().await,
            Tx::Postgres(tx) => tx.commit().await,
        }
    }
}

impl Db {
    /// Runs one writing statement as a transaction of its own and returns the rows of its
    /// `RETURNING` clause: for the one-statement writes someone is waiting on (a guarded
    /// call's ask for a new key, its report). On SQLite it queues at the write gate as an
    /// interactive writer, then costs one round trip to SQLite's thread where
    /// `BEGIN IMMEDIATE`, the statement and `COMMIT` took three, all of them while holding
    /// the write lock every other writer queues for. A writing statement outside a
    /// transaction takes that lock as it starts, as `BEGIN IMMEDIATE` would. Every row is
    /// read, so the statement runs to its end and commits before this returns.
    pub async fn write_returning<T: FromBothRows>(&self, sql: Sql) -> Result<Vec<T>, sqlx::Error> {
        match self {
            Db::Sqlite { main: pool, .. } => {
                let asked = std::time::Instant::now();
                let _turn = take_write_gate(pool, false).await?;
                let held = std::time::Instant::now();
                let (text, args) = sql.into_sqlite()?;
                let rows = sqlx::query_as_with(&text, args).fetch_all(pool).await;
                tracing::debug!(
                    gate_us = (held - asked).as_micros() as u64,
                    statement_us = held.elapsed().as_micros() as u64,
                    "one-statement write"
                );
                rows
            }
            Db::Postgres(pool) => {
                let (text, args) = sql.into_postgres()?;
                sqlx::query_as_with(&text, args).fetch_all(pool).await
            }
        }
    }

    /// Whether an interactive writer (see [`WriteGate`]) asked for this SQLite database's
    /// write lock within `window`, or its ledger's file's. The ingest writer then commits
    /// smaller batches, so that such a writer never waits long for the one in progress.
    /// The ledger's writers no longer wait for the main file's commits, but they still
    /// share the cores and the disk with them: counting only the main file, ask +
    /// complete p99 was 10.2 and 7.1 ms against 8.4 and 6.6 ms in alternating runs beside
    /// 20,000 spans/s. Always false on PostgreSQL, whose writers do not wait for one
    /// another's commits.
    pub fn interactive_writes_within(&self, window: std::time::Duration) -> bool {
        match self {
            Db::Sqlite { main: pool, ledger } => [pool, ledger].into_iter().any(|pool| {
                let last = write_gate(pool).last_interactive_ms.load(std::sync::atomic::Ordering::Relaxed);
                last > 0 && super::now_ms() - last <= window.as_millis() as i64
            }),
            Db::Postgres(_) => false,
        }
    }

    pub fn backend(&self) -> Backend {
        match self {
            Db::Sqlite { .. } => Backend::Sqlite,
            Db::Postgres(_) => Backend::Postgres,
        }
    }

    /// Runs a statement outside any transaction; returns the number of rows it changed.
    pub async fn execute(&self, sql: Sql) -> Result<u64, sqlx::Error> {
        Ok(match self {
            Db::Sqlite { main: pool, .. } => {
                let (text, args) = sql.into_sqlite()?;
                sqlx::query_with(&text, args).execute(pool).await?.rows_affected()
            }
            Db::Postgres(pool) => {
                let (text, args) = sql.into_postgres()?;
                sqlx::query_with(&text, args).execute(pool).await?.rows_affected()
            }
        })
    }

    pub async fn fetch_all<T: FromBothRows>(&self, sql: Sql) -> Result<Vec<T>, sqlx::Error> {
        match self {
            Db::Sqlite { main: pool, .. } => {
                let (text, args) = sql.into_sqlite()?;
                sqlx::query_as_with(&text, args).fetch_all(pool).await
            }
            Db::Postgres(pool) => {
                let (text, args) = sql.into_postgres()?;
                sqlx::query_as_with(&text, args).fetch_all(pool).await
            }
        }
    }

    /// As [`Db::fetch_all`], planned once per connection on PostgreSQL: a generic plan,
    /// which prunes partitions as it runs, instead of a plan made for each execution's
    /// values. For the run list's statements and its search: they read every day's
    /// partitions whatever their values, and planning one against 30 days' partitions took
    /// longer than running it. Not for a statement whose best plan depends on its values;
    /// a `LIMIT` is such a value (planned as a tenth of the rows when bound), so these
    /// statements write theirs into the text.
    pub async fn fetch_all_planned_once<T: FromBothRows>(&self, sql: Sql) -> Result<Vec<T>, sqlx::Error> {
        self.fetch_all_planned(sql, "force_generic_plan").await
    }

    /// As [`Db::fetch_all`], planned for each execution's values on PostgreSQL (its
    /// default would plan once for any values after five executions). For a statement
    /// whose best plan depends on how many rows a value matches: the filter window's,
    /// whose lead may be a trigger no run has or an agent with most of the runs. Planned
    /// once for any value, the trigger's equality was expected to match a quarter of the
    /// runs and PostgreSQL walked every run newest first instead of the trigger's index.
    pub async fn fetch_all_planned_each_time<T: FromBothRows>(&self, sql: Sql) -> Result<Vec<T>, sqlx::Error> {
        self.fetch_all_planned(sql, "force_custom_plan").await
    }

    /// As [`Db::fetch_all`], with PostgreSQL's `plan_cache_mode` set for this statement
    /// alone (in a transaction of its own).
    async fn fetch_all_planned<T: FromBothRows>(&self, sql: Sql, mode: &'static str) -> Result<Vec<T>, sqlx::Error> {
        match self {
            Db::Sqlite { .. } => self.fetch_all(sql).await,
            Db::Postgres(pool) => {
                let (text, args) = sql.into_postgres()?;
                let mut tx = pool.begin().await?;
                sqlx::query(&format!("SET LOCAL plan_cache_mode = {mode}")).execute(&mut *tx).await?;
                let rows = sqlx::query_as_with(&text, args).fetch_all(&mut *tx).await?;
                tx.commit().await?;
                Ok(rows)
            }
        }
    }

    /// The first row, if any.
    pub async fn fetch_optional<T: FromBothRows>(&self, sql: Sql) -> Result<Option<T>, sqlx::Error> {
        match self {
            Db::Sqlite { main: pool, .. } => {
                let (text, args) = sql.into_sqlite()?;
                sqlx::query_as_with(&text, args).fetch_optional(pool).await
            }
            Db::Postgres(pool) => {
                let (text, args) = sql.into_postgres()?;
                sqlx::query_as_with(&text, args).fetch_optional(pool).await
            }
        }
    }

    /// The first row; none is an error (`RowNotFound`).
    pub async fn fetch_one<T: FromBothRows>(&self, sql: Sql) -> Result<T, sqlx::Error> {
        self.fetch_optional(sql).await?.ok_or(sqlx::Error::RowNotFound)
    }

    /// The first column of every row.
    pub async fn fetch_column<T>(&self, sql: Sql) -> Result<Vec<T>, sqlx::Error>
    where
        (T,): FromBothRows,
    {
        Ok(self.fetch_all::<(T,)>(sql).await?.into_iter().map(|(v,)| v).collect())
    }

    /// The first column of the first row, if any.
    pub async fn fetch_value<T>(&self, sql: Sql) -> Result<Option<T>, sqlx::Error>
    where
        (T,): FromBothRows,
    {
        Ok(self.fetch_optional::<(T,)>(sql).await?.map(|(v,)| v))
    }

    /// The first column of the first row; no row is an error (`RowNotFound`).
    pub async fn fetch_one_value<T>(&self, sql: Sql) -> Result<T, sqlx::Error>
    where
        (T,): FromBothRows,
    {
        Ok(self.fetch_one::<(T,)>(sql).await?.0)
    }
}

/// Ids per `IN (...)` list.
pub const IDS_PER_QUERY: usize = 500;
/// Rows per multi-row INSERT: well under SQLite's variable limit for every table here.
pub const ROWS_PER_INSERT: usize = 400;

/// `items` in slices of `max`, then of descending powers of two: a statement's text
/// depends on its row count, and with these few counts every statement the writer sends
/// is prepared once per connection and then found in its cache, instead of a slice of
/// whatever was left over being parsed anew (and evicting the others) on every commit.
pub fn cacheable_chunks<T>(items: &[T], max: usize) -> impl Iterator<Item = &[T]> {
    let mut rest = items;
    chunk_sizes(items.len(), max).map(move |n| {
        let (chunk, tail) = rest.split_at(n);
        rest = tail;
        chunk
    })
}

/// [`cacheable_chunks`] by value, for rows holding large texts: a bound `String` moves
/// into the statement instead of being copied.
pub fn cacheable_parts<T>(items: Vec<T>, max: usize) -> impl Iterator<Item = Vec<T>> {
    let sizes = chunk_sizes(items.len(), max);
    let mut rest = items.into_iter();
    sizes.map(move |n| rest.by_ref().take(n).collect())
}

/// The sizes [`cacheable_chunks`] splits `len` items into.
fn chunk_sizes(len: usize, max: usize) -> impl Iterator<Item = usize> {
    let mut left = len;
    std::iter::from_fn(move || {
        if left == 0 {
            return None;
        }
        let n = if left >= max { max } else { 1 << left.ilog2() };
        left -= n;
        Some(n)
    })
}

/// The values bound in order, as one backend's arguments. Every kind of [`Arg`] must be
/// a type the backend encodes, which the bounds say once for both.
fn arguments<'q, A>(args: Vec<Arg>) -> Result<A, sqlx::Error>
where
    A: Arguments<'q> + Default,
    Option<i64>: sqlx::Encode<'q, A::Database> + sqlx::Type<A::Database>,
    Option<f64>: sqlx::Encode<'q, A::Database> + sqlx::Type<A::Database>,
    Option<String>: sqlx::Encode<'q, A::Database> + sqlx::Type<A::Database>,
    Option<bool>: sqlx::Encode<'q, A::Database> + sqlx::Type<A::Database>,
    Option<Vec<u8>>: sqlx::Encode<'q, A::Database> + sqlx::Type<A::Database>,
{
    let mut out = A::default();
    for arg in args {
        match arg {
            Arg::Int(v) => out.add(v),
            Arg::Float(v) => out.add(v),
            Arg::Text(v) => out.add(v),
            Arg::Bool(v) => out.add(v),
            Arg::Bytes(v) => out.add(v),
        }
        .map_err(sqlx::Error::Encode)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Order in which writers got the gate, after `holder` releases it.
    async fn order_after_release(late_interactive: bool) -> Vec<&'static str> {
        let gate = std::sync::Arc::new(WriteGate::default());
        let order = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let holder = gate.interactive().await;
        let spawn = |name: &'static str, bulk: bool| {
            let (gate, order) = (gate.clone(), order.clone());
            tokio::spawn(async move {
                let _guard = if bulk { gate.bulk().await } else { gate.interactive().await };
                order.lock().unwrap().push(name);
            })
        };
        let ingest = spawn("bulk", true);
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        let ask = late_interactive.then(|| spawn("interactive", false));
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        drop(holder);
        ingest.await.unwrap();
        if let Some(ask) = ask {
            ask.await.unwrap();
        }
        let order = order.lock().unwrap().clone();
        order
    }

    #[tokio::test]
    async fn an_interactive_writer_goes_before_a_bulk_writer_that_queued_first() {
        assert_eq!(order_after_release(true).await, ["interactive", "bulk"]);
        assert_eq!(order_after_release(false).await, ["bulk"]);
    }

    #[tokio::test]
    async fn a_cancelled_interactive_writer_stops_holding_bulk_writers_back() {
        let gate = std::sync::Arc::new(WriteGate::default());
        let holder = gate.interactive().await;
        let queued = {
            let gate = gate.clone();
            tokio::spawn(async move { drop(gate.interactive().await) })
        };
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        assert_eq!(gate.waiting.load(std::sync::atomic::Ordering::Acquire), 1);
        queued.abort();
        let _ = queued.await;
        assert_eq!(gate.waiting.load(std::sync::atomic::Ordering::Acquire), 0);
        drop(holder);
        drop(gate.bulk().await);
    }

    #[test]
    fn placeholders_are_numbered_in_the_order_values_are_bound() {
        let mut sql = Sql::new("INSERT INTO t (a, b) ");
        sql.values([(1_i64, "x"), (2, "y")], |row, (a, b)| {
            row.bind(a).bind(b);
        });
        sql.push(" WHERE c IN ").list(["p", "q"]);
        assert_eq!(sql.text(), "INSERT INTO t (a, b) VALUES ($1, $2), ($3, $4) WHERE c IN ($5, $6)");
        assert_eq!(sql.args.len(), 6);
        assert_eq!(sql.args[1], Arg::Text(Some("x".into())));
        assert_eq!(sql.args[2], Arg::Int(Some(2)));
    }

    #[test]
    fn sqlite_gets_anonymous_placeholders_only_when_they_are_in_order() {
        let mut sql = Sql::new("INSERT INTO t (a, b) ");
        sql.values([(1_i64, 2_i64)], |row, (a, b)| {
            row.bind(a).bind(b);
        });
        assert_eq!(sql.sqlite_text(), "INSERT INTO t (a, b) VALUES (?, ?)");
        let mut reused = Sql::new("SELECT 1 WHERE a = ");
        let p = reused.arg("x");
        reused.push(&format!("{p} OR b = {p}"));
        assert_eq!(reused.sqlite_text(), "SELECT 1 WHERE a = $1 OR b = $1");
        let given = Sql::with_args("UPDATE t SET a = $2 WHERE id = $1", vec![Arg::from(1_i64), Arg::from(2_i64)]);
        assert_eq!(given.sqlite_text(), "UPDATE t SET a = $2 WHERE id = $1");
    }

    #[test]
    fn a_null_keeps_its_kind() {
        assert_eq!(Arg::from(None::<i64>), Arg::Int(None));
        assert_eq!(Arg::from(None::<&str>), Arg::Text(None));
    }

    #[test]
    fn chunks_come_in_few_sizes_and_cover_everything_once() {
        let items: Vec<u32> = (0..1_234).collect();
        let sizes: Vec<usize> = cacheable_chunks(&items, 400).map(<[u32]>::len).collect();
        assert_eq!(sizes, vec![400, 400, 400, 32, 2]);
        let joined: Vec<u32> = cacheable_chunks(&items, 400).flatten().copied().collect();
        assert_eq!(joined, items);
        assert_eq!(cacheable_chunks(&items[..0], 400).count(), 0);
        assert_eq!(cacheable_chunks(&items[..7], 400).map(<[u32]>::len).collect::<Vec<_>>(), vec![4, 2, 1]);
    }

    #[test]
    fn parts_by_value_are_the_same_chunks() {
        let items: Vec<String> = (0..1_234).map(|i| i.to_string()).collect();
        let parts: Vec<Vec<String>> = cacheable_parts(items.clone(), 400).collect();
        let chunks: Vec<Vec<String>> = cacheable_chunks(&items, 400).map(<[String]>::to_vec).collect();
        assert_eq!(parts, chunks);
        assert_eq!(cacheable_parts(Vec::<String>::new(), 400).count(), 0);
    }
}
