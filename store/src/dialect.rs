//! What differs between SQLite and PostgreSQL, one method per statement. Everything else
//! in storage is written once (see [`super::sql`]); a reader who wants to know where the
//! backends part ways reads this file.
//!
//! - Concurrency: SQLite has one writer at a time (the ingest transaction holds its write
//!   lock), PostgreSQL has several instances writing at once, which lock each trace and
//!   run they change.
//! - Numbering: SQLite gives the next number past the highest stored, PostgreSQL adds a
//!   sequence's next value to the base of the run's arrival day (ADR 0016).
//! - The search-term index: an FTS5 document per span chunk on SQLite, a `(term, run)`
//!   table on PostgreSQL (see [`super::terms`] for why). Which values are terms is decided
//!   once, by [`domain::record::terms_of`]; the backends only store them.

pub use super::sql::Backend;
use super::sql::{cacheable_chunks, Sql, Tx, IDS_PER_QUERY, ROWS_PER_INSERT};
use super::{corrupt, terms};
use domain::record;
use std::collections::BTreeSet;

impl Backend {
    /// `table` read through `index` where SQLite's planner, which keeps no statistics
    /// here, would pick another (an index on an equality over a partial index on a range);
    /// PostgreSQL plans by its statistics. SQLite refuses the statement if the index
    /// cannot serve it, so a plan that drifts is an error, not a slow page.
    pub fn indexed_by(self, table: &str, index: &str) -> String {
        match self {
            Backend::Postgres => table.to_string(),
            Backend::Sqlite => format!("{table} INDEXED BY {index}"),
        }
    }

    /// An aggregate joining the text `expr` of a group's rows with commas (in no order).
    pub fn joined(self, expr: &str) -> String {
        match self {
            Backend::Postgres => format!("string_agg({expr}, ',')"),
            Backend::Sqlite => format!("group_concat({expr}, ',')"),
        }
    }

    /// Joins `runs r` to each row of `rt` by its `run_no`, one lookup per row, with the
    /// columns the run list filters and sorts on. PostgreSQL costs a lookup in the
    /// day-partitioned `runs` as one in every partition (it prunes them only as it runs),
    /// so a plain join there reads every run a filter passes and hashes them; `LATERAL ...
    /// LIMIT 1` cannot be turned into such a join. SQLite looks each row up by the index
    /// anyway.
    pub fn join_run_of_each(self) -> &'static str {
        match self {
            Backend::Postgres => {
                " CROSS JOIN LATERAL (SELECT r.run_no, r.terminal_reason, r.agent, r.run_trigger, r.model, r.cost, \
                 r.wall_clock_ms, r.duplicate_side_effects, r.completed_without_read, r.approval_violations \
                 FROM runs r WHERE r.run_no = rt.run_no LIMIT 1) AS r"
            }
            Backend::Sqlite => " JOIN runs r ON r.run_no = rt.run_no",
        }
    }

    /// The runs whose spans carry the term bound at `placeholder`, as SQL selecting their
    /// `run_no`.
    pub fn runs_with_term(self, placeholder: &str) -> String {
        match self {
            Backend::Postgres => format!("SELECT run_no FROM run_terms WHERE term = {placeholder}"),
            // The phrase quotes make FTS5 read the token literally; hex has no quote in it.
            Backend::Sqlite => format!(
                "SELECT run_no FROM span_chunks WHERE id IN \
                 (SELECT rowid FROM run_terms_fts WHERE run_terms_fts MATCH '\"' || hex({placeholder}) || '\"')"
            ),
        }
    }
}

/// The search terms of one new span chunk.
#[derive(Debug)]
pub struct ChunkTerms<'a> {
    pub chunk_id: i64,
    pub run_id: &'a str,
    pub run_no: i64,
    pub terms: BTreeSet<&'a str>,
}

/// A run as stored before a write changes it (what [`Tx::runs_locked`] returns).
#[derive(Debug, Clone, PartialEq)]
pub struct LockedRun {
    pub run_id: String,
    pub run_no: i64,
    /// What the run counts for in the reason totals and the trends' rollups.
    pub point: domain::trends::RunPoint,
}

impl Tx {
    /// Locks `keys` until the commit, in sorted order, so two writers never deadlock.
    /// PostgreSQL: transaction-scoped advisory locks, a few hundred per round trip.
    /// SQLite: nothing to do, the transaction already holds the database's write lock.
    pub async fn lock_in_order(&mut self, keys: impl Iterator<Item = String>) -> Result<(), sqlx::Error> {
        if let Tx::Sqlite(..) = self {
            return Ok(());
        }
        let mut keys: Vec<String> = keys.collect();
        keys.sort();
        keys.dedup();
        for chunk in cacheable_chunks(&keys, IDS_PER_QUERY) {
            // Ordered by position in the list, so the locks are taken in that order.
            let mut sql = Sql::new("SELECT pg_advisory_xact_lock(hashtextextended(k, 1)) FROM (");
            sql.values(chunk.iter().enumerate(), |row, (i, key)| {
                row.bind(key.as_str()).bind(i as i64);
            });
            sql.push(") AS t(k, i) ORDER BY i");
            self.execute(sql).await?;
        }
        Ok(())
    }

    /// `n` new run arrival numbers. SQLite: past the highest stored and `given`, the
    /// highest given earlier in this transaction (which holds the write lock, so no other
    /// writer gives one meanwhile). PostgreSQL: from the sequence, as several instances
    /// may write at once, added to today's base ([`super::partitions`]).
    pub async fn next_run_numbers(&mut self, n: usize, given: i64) -> Result<Vec<i64>, sqlx::Error> {
        if n == 0 {
            return Ok(Vec::new());
        }
        match self {
            Tx::Postgres(_) => {
                // The base of the latest day with partitions that is not after today
                // (ADR 0016), so the number falls in a partition that exists.
                let today = super::partitions::day_of(super::now_ms());
                let mut sql = Sql::new("SELECT (SELECT COALESCE(MAX(day), 0) FROM run_no_days WHERE day <= ");
                sql.bind(today).push(") * ").bind(super::partitions::base(1));
                sql.push(" + nextval('runs_run_no_seq') FROM generate_series(1, ").bind(n as i64).push("::BIGINT)");
                let rows: Vec<(i64,)> = self.fetch_all(sql).await?;
                Ok(rows.into_iter().map(|(v,)| v).collect())
            }
            Tx::Sqlite(..) => {
                let (stored,): (i64,) = self.fetch_one(Sql::new("SELECT COALESCE(MAX(run_no), 0) FROM runs")).await?;
                let first = stored.max(given) + 1;
                Ok((first..first + n as i64).collect())
            }
        }
    }

    /// Ids for `n` new `span_chunks` rows, given before the insert so the search terms can
    /// be keyed by them (an insert returning its ids came back one row per wake-up of
    /// SQLite's worker). SQLite: past the highest stored (this transaction holds the write
    /// lock); PostgreSQL: from the table's sequence.
    pub async fn next_chunk_ids(&mut self, n: usize) -> Result<Vec<i64>, sqlx::Error> {
        if n == 0 {
            return Ok(Vec::new());
        }
        match self {
            Tx::Postgres(_) => {
                let mut sql = Sql::new("SELECT nextval('span_chunks_id_seq') FROM generate_series(1, ");
                sql.bind(n as i64).push("::BIGINT)");
                let rows: Vec<(i64,)> = self.fetch_all(sql).await?;
                Ok(rows.into_iter().map(|(v,)| v).collect())
            }
            Tx::Sqlite(..) => {
                let (first,): (i64,) =
                    self.fetch_one(Sql::new("SELECT COALESCE(MAX(id), 0) + 1 FROM span_chunks")).await?;
                Ok((first..first + n as i64).collect())
            }
        }
    }

    /// What ends a SELECT that reads a row to change it in this transaction: PostgreSQL
    /// locks the row (another instance's transaction waits); SQLite's transaction already
    /// holds the database's write lock.
    pub fn lock_rows(&self) -> &'static str {
        match self {
            Tx::Postgres(_) => " FOR UPDATE",
            Tx::Sqlite(..) => "",
        }
    }

    /// The stored number and trends figures (reason included) of each run in `run_ids`
    /// that has a row. On PostgreSQL each run's `run_ids` and `runs` rows stay locked
    /// until the commit, taken in run id order as retention takes them, so retention
    /// deleting one meanwhile is either seen here or waits for this transaction.
    pub async fn runs_locked(&mut self, run_ids: &[&str]) -> Result<Vec<LockedRun>, sqlx::Error> {
        let lock = self.lock_rows();
        let mut rows = Vec::new();
        for chunk in cacheable_chunks(run_ids, IDS_PER_QUERY) {
            let columns = crate::trends::POINT_COLUMNS;
            let mut sql = Sql::new(format!(
                "SELECT i.run_id, i.run_no, {columns} FROM run_ids i JOIN runs r ON r.run_no = i.run_no WHERE i.run_id IN "
            ));
            sql.list(chunk.iter().copied()).push(" ORDER BY i.run_id").push(lock);
            type Row = (String, i64, i64, String, f64, i64, i64, i64, bool, Option<String>, Option<String>);
            let found: Vec<Row> = self.fetch_all(sql).await?;
            rows.extend(found.into_iter().map(
                |(run_id, run_no, started_ns, reason, cost, calls, deduped, dups, no_read, agent, model)| LockedRun {
                    run_id,
                    run_no,
                    point: crate::trends::point((
                        started_ns, reason, cost, calls, deduped, dups, no_read, agent, model,
                    )),
                },
            ));
        }
        Ok(rows)
    }

    /// Keeps the numbers of new runs under their ids. PostgreSQL: in `run_ids`, which
    /// holds a run id once across all days (`runs` is partitioned by day). SQLite: `runs`
    /// is keyed by id and `run_ids` is a view of it, so there is nothing to do.
    pub async fn name_runs(&mut self, numbered: &[(&str, i64)]) -> Result<(), sqlx::Error> {
        if matches!(self, Tx::Sqlite(..)) {
            return Ok(());
        }
        for chunk in cacheable_chunks(numbered, ROWS_PER_INSERT) {
            let mut sql = Sql::new("INSERT INTO run_ids (run_id, run_no) ");
            sql.values(chunk, |row, (id, no)| {
                row.bind(*id).bind(*no);
            });
            self.execute(sql).await?;
        }
        Ok(())
    }

    /// Forgets the ids of runs deleted in this transaction (see [`Tx::name_runs`]).
    pub async fn forget_run_ids(&mut self, run_ids: &[&str]) -> Result<(), sqlx::Error> {
        if matches!(self, Tx::Sqlite(..)) {
            return Ok(());
        }
        for chunk in cacheable_chunks(run_ids, IDS_PER_QUERY) {
            let mut sql = Sql::new("DELETE FROM run_ids WHERE run_id IN ");
            sql.list(chunk.iter().copied());
            self.execute(sql).await?;
        }
        Ok(())
    }

    /// Up to `limit` runs that started before `started_before_ns`, as (id, number),
    /// locked like [`Tx::runs_locked`] (retention deletes them in this transaction).
    /// PostgreSQL: the lowest numbers in `(after_run_no, before_run_no)` (after the highest
    /// of the previous batch, before a day that goes whole), read down the number index,
    /// then locked in run id order as the write path locks them, and checked again once
    /// locked (a write may have moved a run's start). Picking them in id order instead
    /// walked the id index past every newer run each batch, and slowed as the sweep went
    /// on. SQLite: any, as each batch's rows are gone from its indexes at once (it has no
    /// days).
    pub async fn expired_runs_locked(
        &mut self,
        started_before_ns: i64,
        (after_run_no, before_run_no): (i64, i64),
        limit: i64,
    ) -> Result<Vec<(String, i64)>, sqlx::Error> {
        match self {
            Tx::Postgres(_) => {
                let mut sql = Sql::new(
                    "SELECT i.run_id, i.run_no FROM run_ids i JOIN runs r ON r.run_no = i.run_no \
                     WHERE r.started_ns < ",
                );
                sql.bind(started_before_ns);
                sql.push(" AND r.run_no IN (SELECT run_no FROM runs WHERE run_no > ").bind(after_run_no);
                sql.push(" AND run_no < ").bind(before_run_no);
                sql.push(" AND started_ns < ").bind(started_before_ns);
                sql.push(" ORDER BY run_no LIMIT ").bind(limit).push(") ORDER BY i.run_id FOR UPDATE");
                self.fetch_all(sql).await
            }
            Tx::Sqlite(..) => {
                let mut sql = Sql::new("SELECT run_id, run_no FROM runs WHERE started_ns < ");
                sql.bind(started_before_ns).push(" LIMIT ").bind(limit);
                self.fetch_all(sql).await
            }
        }
    }

    /// Stores the search terms of new span chunks. SQLite: one FTS5 document per chunk,
    /// keyed by its id. PostgreSQL: one `(term, run)` row per distinct pair.
    pub async fn store_terms(&mut self, chunks: &[ChunkTerms<'_>]) -> Result<(), sqlx::Error> {
        match self {
            Tx::Sqlite(..) => {
                let documents: Vec<(i64, String)> = chunks
                    .iter()
                    .filter(|c| !c.terms.is_empty())
                    .map(|c| (c.chunk_id, terms::document(c.terms.iter().copied())))
                    .collect();
                for part in super::sql::cacheable_parts(documents, ROWS_PER_INSERT) {
                    let mut sql = Sql::new("INSERT INTO run_terms_fts (rowid, terms) ");
                    sql.values(part, |row, (id, document)| {
                        row.bind(id).bind(document);
                    });
                    self.execute(sql).await?;
                }
            }
            Tx::Postgres(_) => {
                let rows: BTreeSet<(&str, &str, i64)> =
                    chunks.iter().flat_map(|c| c.terms.iter().map(move |t| (*t, c.run_id, c.run_no))).collect();
                let rows: Vec<(&str, &str, i64)> = rows.into_iter().collect();
                for part in cacheable_chunks(&rows, ROWS_PER_INSERT) {
                    let mut sql = Sql::new("INSERT INTO run_terms (term, run_id, run_no) ");
                    sql.values(part, |row, (term, run, run_no)| {
                        row.bind(*term).bind(*run).bind(*run_no);
                    });
                    sql.push(" ON CONFLICT (term, run_id, run_no) DO NOTHING");
                    self.execute(sql).await?;
                }
            }
        }
        Ok(())
    }

    /// Forgets the search terms of every stored span chunk of `runs` (number, id), before
    /// those chunks are deleted or rewritten. SQLite: their documents. PostgreSQL: the
    /// `(term, run)` rows of the terms their spans carry, found by reading them, so the
    /// table needs no index by run.
    pub async fn forget_terms(&mut self, runs: &[(i64, &str)]) -> Result<(), sqlx::Error> {
        if runs.is_empty() {
            return Ok(());
        }
        match self {
            Tx::Sqlite(..) => {
                for chunk in cacheable_chunks(runs, IDS_PER_QUERY) {
                    let mut sql = Sql::new(
                        "DELETE FROM run_terms_fts WHERE rowid IN (SELECT id FROM span_chunks WHERE run_no IN ",
                    );
                    sql.list(chunk.iter().map(|(run_no, _)| *run_no)).push(")");
                    self.execute(sql).await?;
                }
            }
            Tx::Postgres(_) => {
                let mut keys: BTreeSet<(String, String, i64)> = BTreeSet::new();
                for chunk in cacheable_chunks(runs, IDS_PER_QUERY) {
                    let mut sql = Sql::new("SELECT run_id, run_no, records, packed FROM span_chunks WHERE run_no IN ");
                    sql.list(chunk.iter().map(|(run_no, _)| *run_no));
                    let rows: Vec<(String, i64, String, Option<Vec<u8>>)> = self.fetch_all(sql).await?;
                    super::dictionaries::load_for_tx(self, rows.iter().map(|(.., packed)| packed.as_deref())).await?;
                    for (run, run_no, records, packed) in rows {
                        let records = super::packing::unpack(records, packed)?;
                        for facts in record::decode_facts(&records).map_err(corrupt)? {
                            keys.extend(record::search_terms(&facts).map(|t| (t.to_string(), run.clone(), run_no)));
                        }
                    }
                }
                let keys: Vec<(String, String, i64)> = keys.into_iter().collect();
                for part in cacheable_chunks(&keys, ROWS_PER_INSERT) {
                    let mut sql = Sql::new("DELETE FROM run_terms WHERE (term, run_id, run_no) IN (");
                    sql.values(part, |row, (term, run, run_no)| {
                        row.bind(term).bind(run).bind(*run_no);
                    });
                    sql.push(")");
                    self.execute(sql).await?;
                }
            }
        }
        Ok(())
    }
}
