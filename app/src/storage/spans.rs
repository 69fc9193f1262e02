//! The ingest write path: normalized spans in, committed in one transaction together with
//! the trace→run assignment and the recomputed runs they touch. A caller acknowledges an
//! export only after this returns, so an acknowledged span is durable.
//!
//! Spans are stored per run: each write adds one `span_chunks` row for each run it brings
//! new spans to (see `span_record` for why), plus the span-level lookups (`irreversible_calls`,
//! the search-term index of [`terms`]) and bodies. Every table holding a run's rows is
//! indexed by the run's arrival number (`runs.run_no`, given here when a run first
//! arrives), not by its id: agents' run ids are random, and an index keyed by them took
//! each new run's entry on a random page (migration 0016 says more). A re-sent span is
//! recognised against the run's stored spans, which derivation reads back anyway, so it is
//! stored once. Readers of a run's spans ([`of_run`], [`facts_of_runs`]) decode its chunks.

use super::span_record::{self, corrupt};
use super::{now_ms, on_pool, terms, Db, StoreResult};
use crate::canonical::{RunDetail, SideEffect, TerminalReason};
use crate::ingest::derive::{derive_run_with, Rules, SpanFacts};
use crate::ingest::normalize::NormalizedSpan;
use crate::ingest::pipeline::BodyPolicy;
use serde_json::value::RawValue;
use sqlx::QueryBuilder;
use std::collections::{BTreeMap, BTreeSet, HashSet};

/// What a write did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct WriteOutcome {
    /// Spans newly stored; re-sent spans already stored are not counted again.
    pub stored: u64,
    /// Runs recomputed by this write.
    pub runs: Vec<String>,
}

/// Rows per multi-row INSERT: well under SQLite's variable limit for every table here.
const ROWS_PER_INSERT: usize = 400;
/// Ids per `IN (...)` list.
const IDS_PER_QUERY: usize = 500;

/// `items` in slices of `max`, then of descending powers of two: a statement's text
/// depends on its row count, and with these few counts every statement the writer sends
/// is prepared once per connection and then found in its cache, instead of a slice of
/// whatever was left over being parsed anew (and evicting the others) on every commit.
pub(crate) fn cacheable_chunks<T>(items: &[T], max: usize) -> impl Iterator<Item = &[T]> {
    let mut rest = items;
    chunk_sizes(items.len(), max).map(move |n| {
        let (chunk, tail) = rest.split_at(n);
        rest = tail;
        chunk
    })
}

/// [`cacheable_chunks`] by value, for rows holding large texts: a bound `String` moves
/// into the statement, where a bound `&str` would be copied once more to reach SQLite's
/// thread.
fn cacheable_parts<T>(items: Vec<T>, max: usize) -> impl Iterator<Item = Vec<T>> {
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

/// Takes PostgreSQL transaction-scoped advisory locks on `keys` in sorted order, a few
/// hundred per round trip: every writer locks in the same order, so two never deadlock.
/// (A macro because the transaction's type differs per backend; only PostgreSQL runs it.)
macro_rules! lock_in_order {
    ($tx:ident, $keys:expr) => {{
        let mut keys: Vec<String> = $keys.collect();
        keys.sort();
        keys.dedup();
        for chunk in cacheable_chunks(&keys, IDS_PER_QUERY) {
            // Ordered by position in the list, so the locks are taken in that order.
            let mut q = QueryBuilder::new("SELECT pg_advisory_xact_lock(hashtextextended(k, 1)) FROM (");
            q.push_values(chunk.iter().enumerate(), |mut row, (i, key)| {
                row.push_bind(key.as_str()).push_bind(i as i64);
            });
            q.push(") AS t(k, i) ORDER BY i");
            q.build().execute(&mut *$tx).await?;
        }
    }};
}

/// Gives each run in `$runs` that has no number in `$run_nos` yet the next arrival
/// numbers, inside the ingest transaction. SQLite: one past the highest stored or already
/// given in this transaction (which holds the write lock, so no other writer gives one
/// meanwhile). PostgreSQL: from the sequence, as several instances may write at once.
macro_rules! number_new_runs {
    ($tx:ident, $postgres:expr, $run_nos:ident, $runs:expr) => {{
        let missing: Vec<String> = $runs.filter(|r| !$run_nos.contains_key(r.as_str())).cloned().collect();
        if !missing.is_empty() {
            let numbers: Vec<i64> = if $postgres {
                sqlx::query_scalar("SELECT nextval('runs_run_no_seq') FROM generate_series(1, $1::BIGINT)")
                    .bind(missing.len() as i64)
                    .fetch_all(&mut *$tx)
                    .await?
            } else {
                let stored: i64 =
                    sqlx::query_scalar("SELECT COALESCE(MAX(run_no), 0) FROM runs").fetch_one(&mut *$tx).await?;
                let first = $run_nos.values().copied().max().unwrap_or(0).max(stored) + 1;
                (first..first + missing.len() as i64).collect()
            };
            $run_nos.extend(missing.into_iter().zip(numbers));
        }
    }};
}

/// The trace a stored record belongs to, read without the rest of it.
#[derive(serde::Deserialize)]
struct TraceOf<'a> {
    #[serde(borrow)]
    trace_id: std::borrow::Cow<'a, str>,
}

/// Inside the ingest transaction: moves the stored spans of `$trace` from run `$old` to
/// run `$new` (its earlier spans named no run and now one does), with their search terms,
/// irreversible calls and bodies. `$old_no` and `$new_no` are the runs' numbers. Rare, so
/// it simply rewrites the old run's chunks.
macro_rules! move_trace {
    ($tx:ident, $postgres:expr, $trace:expr, ($old:expr, $old_no:expr), ($new:expr, $new_no:expr), $now:expr) => {{
        let rows: Vec<(String,)> = sqlx::query_as("SELECT records FROM span_chunks WHERE run_no = $1")
            .bind($old_no)
            .fetch_all(&mut *$tx)
            .await?;
        let mut staying: Vec<Box<RawValue>> = Vec::new();
        let mut moving: Vec<Box<RawValue>> = Vec::new();
        for (records,) in &rows {
            for record in serde_json::from_str::<Vec<Box<RawValue>>>(records).map_err(corrupt)? {
                let of: TraceOf<'_> = serde_json::from_str(record.get()).map_err(corrupt)?;
                if of.trace_id == $trace {
                    moving.push(record)
                } else {
                    staying.push(record)
                }
            }
        }
        let terms_in = |records: &[Box<RawValue>]| -> Result<BTreeSet<String>, sqlx::Error> {
            let mut terms = BTreeSet::new();
            for record in records {
                let facts: SpanFacts = serde_json::from_str(record.get()).map_err(corrupt)?;
                terms.extend(span_record::search_terms(&facts).map(str::to_string));
            }
            Ok(terms)
        };
        let (staying_terms, moving_terms) = (terms_in(&staying)?, terms_in(&moving)?);
        if !$postgres {
            // The old chunks' term documents go with them.
            sqlx::query("DELETE FROM run_terms_fts WHERE rowid IN (SELECT id FROM span_chunks WHERE run_no = $1)")
                .bind($old_no)
                .execute(&mut *$tx)
                .await?;
        }
        sqlx::query("DELETE FROM span_chunks WHERE run_no = $1").bind($old_no).execute(&mut *$tx).await?;
        let sides = [($old, $old_no, &staying, &staying_terms), ($new, $new_no, &moving, &moving_terms)];
        for (run, run_no, records, run_terms) in sides {
            if records.is_empty() {
                continue;
            }
            let id: i64 = sqlx::query_scalar(
                "INSERT INTO span_chunks (run_id, run_no, spans, received_at, records) VALUES ($1, $2, $3, $4, $5) \
                 RETURNING id",
            )
            .bind(run)
            .bind(run_no)
            .bind(records.len() as i64)
            .bind($now)
            .bind(span_record::chunk(records.iter().map(|r| r.get())))
            .fetch_one(&mut *$tx)
            .await?;
            let document = terms::document(run_terms.iter().map(String::as_str));
            if !$postgres && !document.is_empty() {
                sqlx::query("INSERT INTO run_terms_fts (rowid, terms) VALUES ($1, $2)")
                    .bind(id)
                    .bind(document)
                    .execute(&mut *$tx)
                    .await?;
            }
        }
        // PostgreSQL's `run_terms` rows follow the moving terms.
        for term in moving_terms.iter().filter(|_| $postgres) {
            sqlx::query("INSERT INTO run_terms (term, run_id) VALUES ($1, $2) ON CONFLICT (term, run_id) DO NOTHING")
                .bind(term)
                .bind($new)
                .execute(&mut *$tx)
                .await?;
            if !staying_terms.contains(term) {
                sqlx::query("DELETE FROM run_terms WHERE term = $1 AND run_id = $2")
                    .bind(term)
                    .bind($old)
                    .execute(&mut *$tx)
                    .await?;
            }
        }
        sqlx::query("UPDATE irreversible_calls SET run_id = $1, run_no = $2 WHERE trace_id = $3")
            .bind($new)
            .bind($new_no)
            .bind($trace)
            .execute(&mut *$tx)
            .await?;
        // The trace's bodies leave the old run's body chunks the same way.
        let rows: Vec<(String,)> = sqlx::query_as("SELECT bodies FROM body_chunks WHERE run_no = $1")
            .bind($old_no)
            .fetch_all(&mut *$tx)
            .await?;
        let mut staying: Vec<span_record::StoredBodies> = Vec::new();
        let mut moving: Vec<span_record::StoredBodies> = Vec::new();
        for (bodies,) in &rows {
            for entry in span_record::decode_bodies(bodies).map_err(corrupt)? {
                if entry.trace_id == $trace {
                    moving.push(entry)
                } else {
                    staying.push(entry)
                }
            }
        }
        if !moving.is_empty() {
            sqlx::query("DELETE FROM body_chunks WHERE run_no = $1").bind($old_no).execute(&mut *$tx).await?;
            for (run, run_no, entries) in [($old, $old_no, &staying), ($new, $new_no, &moving)] {
                if entries.is_empty() {
                    continue;
                }
                let chunk = span_record::body_chunk(
                    entries.iter().map(|e| (e.trace_id.as_str(), e.span_id.as_str(), e.bodies.get())),
                );
                sqlx::query("INSERT INTO body_chunks (run_id, run_no, spans, bodies) VALUES ($1, $2, $3, $4)")
                    .bind(run)
                    .bind(run_no)
                    .bind(entries.len() as i64)
                    .bind(chunk)
                    .execute(&mut *$tx)
                    .await?;
            }
        }
    }};
}

/// Stores spans, assigns their traces to runs, and recomputes the touched runs with the
/// shipped prices and no tool policies (tests; the server uses [`write_with`]).
pub async fn write(db: &Db, spans: &[NormalizedSpan], body_policy: BodyPolicy) -> StoreResult<WriteOutcome> {
    write_with(db, spans, body_policy, &Rules::default()).await
}

/// Stores spans, assigns their traces to runs, and recomputes the touched runs under
/// `rules` (prices and tool policies).
pub async fn write_with(
    db: &Db,
    spans: &[NormalizedSpan],
    body_policy: BodyPolicy,
    rules: &Rules,
) -> StoreResult<WriteOutcome> {
    if spans.is_empty() {
        return Ok(WriteOutcome::default());
    }
    let postgres = matches!(db, Db::Postgres(_));
    let received_at = now_ms();

    // The run each trace names, if any span of it in this batch names one.
    let mut named: BTreeMap<&str, Option<&str>> = BTreeMap::new();
    for s in spans {
        let entry = named.entry(s.trace_id.as_str()).or_insert(None);
        if entry.is_none() {
            *entry = s.explicit_run_id.as_deref();
        }
    }

    let outcome: Result<WriteOutcome, sqlx::Error> = on_pool!(db, pool => {
        async {
            let t_begin = std::time::Instant::now();
            // SQLite: take the write lock up front, so two writers queue on the busy
            // timeout instead of failing when a reader upgrades.
            let mut tx = if postgres { pool.begin().await? } else { pool.begin_with("BEGIN IMMEDIATE").await? };
            let t_began = std::time::Instant::now();
            if postgres {
                // Instances sharing PostgreSQL serialize on each trace, then each run,
                // always in sorted order, so they never deadlock or lose an update.
                lock_in_order!(tx, named.keys().map(|t| format!("trace:{t}")));
            }

            // Which run each trace already belongs to: one query per chunk of traces.
            let trace_ids: Vec<&str> = named.keys().copied().collect();
            let mut existing: BTreeMap<String, (String, bool)> = BTreeMap::new();
            for chunk in cacheable_chunks(&trace_ids, IDS_PER_QUERY) {
                let mut q = QueryBuilder::new("SELECT trace_id, run_id, explicit FROM trace_runs WHERE trace_id IN (");
                let mut list = q.separated(", ");
                for t in chunk {
                    list.push_bind(*t);
                }
                q.push(")");
                let rows: Vec<(String, String, bool)> = q.build_query_as().fetch_all(&mut *tx).await?;
                existing.extend(rows.into_iter().map(|(t, r, e)| (t, (r, e))));
            }

            // How the number of runs per terminal reason changes (`run_reason_counts`).
            let mut reason_deltas: BTreeMap<String, i64> = BTreeMap::new();
            let mut run_of: BTreeMap<&str, String> = BTreeMap::new();
            let mut touched: BTreeSet<String> = BTreeSet::new();
            let mut new_traces: Vec<(&str, String, bool)> = Vec::new();
            // Traces whose earlier spans named no run and whose spans now name one:
            // (trace, old run, new run).
            let mut moves: Vec<(&str, String, String)> = Vec::new();
            // Runs that may hold spans stored by earlier writes (their facts are read back).
            let mut had_spans: BTreeSet<String> = BTreeSet::new();
            for (&trace, &explicit) in &named {
                let run = match (existing.remove(trace), explicit) {
                    (None, named_run) => {
                        let run = named_run.unwrap_or(trace).to_string();
                        new_traces.push((trace, run.clone(), named_run.is_some()));
                        run
                    }
                    (Some((old, false)), Some(new)) if old != new => {
                        moves.push((trace, old, new.to_string()));
                        had_spans.insert(new.to_string());
                        new.to_string()
                    }
                    (Some((old, _)), _) => {
                        had_spans.insert(old.clone());
                        old
                    }
                };
                touched.insert(run.clone());
                run_of.insert(trace, run);
            }
            if postgres {
                // Before any run's spans are read: the runs this write changes, including
                // those traces move away from.
                let moved_from = moves.iter().map(|(_, old, _)| old);
                lock_in_order!(tx, touched.iter().chain(moved_from).map(|r| format!("run:{r}")));
            }
            // Each touched run's arrival number: read with its row, or given now to a run
            // new in this write. A move's two runs are numbered first (moves are rare).
            let mut run_nos: BTreeMap<String, i64> = BTreeMap::new();
            if !moves.is_empty() {
                let ids: Vec<&String> = moves.iter().flat_map(|(_, old, new)| [old, new]).collect();
                for chunk in cacheable_chunks(&ids, IDS_PER_QUERY) {
                    let mut q = QueryBuilder::new("SELECT run_id, run_no FROM runs WHERE run_id IN (");
                    let mut list = q.separated(", ");
                    for run in chunk {
                        list.push_bind(run.as_str());
                    }
                    q.push(")");
                    let rows: Vec<(String, i64)> = q.build_query_as().fetch_all(&mut *tx).await?;
                    run_nos.extend(rows);
                }
                number_new_runs!(tx, postgres, run_nos, moves.iter().map(|(_, _, new)| new));
            }
            for (trace, old, new) in &moves {
                let new_no = run_nos[new.as_str()];
                sqlx::query("UPDATE trace_runs SET run_id = $1, explicit = $2, run_no = $3 WHERE trace_id = $4")
                    .bind(new)
                    .bind(true)
                    .bind(new_no)
                    .bind(*trace)
                    .execute(&mut *tx)
                    .await?;
                // A run without a row has no number, and no stored rows to move.
                if let Some(&old_no) = run_nos.get(old.as_str()) {
                    move_trace!(tx, postgres, *trace, (old, old_no), (new, new_no), received_at);
                    sqlx::query("DELETE FROM run_tools WHERE run_no = $1").bind(old_no).execute(&mut *tx).await?;
                }
                let gone: Option<String> =
                    sqlx::query_scalar("DELETE FROM runs WHERE run_id = $1 RETURNING terminal_reason")
                        .bind(old)
                        .fetch_optional(&mut *tx)
                        .await?;
                if let Some(reason) = gone {
                    *reason_deltas.entry(reason).or_default() -= 1;
                }
            }

            let touched_ids: Vec<&String> = touched.iter().collect();
            // The reasons the touched runs have now: each leaves its old reason's total
            // and joins its new one's. On PostgreSQL the rows are locked, so retention
            // deleting one meanwhile is either seen here or waits for this transaction.
            for chunk in cacheable_chunks(&touched_ids, IDS_PER_QUERY) {
                let mut q = QueryBuilder::new("SELECT run_id, terminal_reason, run_no FROM runs WHERE run_id IN (");
                let mut list = q.separated(", ");
                for run in chunk {
                    list.push_bind(run.as_str());
                }
                q.push(if postgres { ") FOR UPDATE" } else { ")" });
                let old: Vec<(String, String, i64)> = q.build_query_as().fetch_all(&mut *tx).await?;
                for (run, reason, run_no) in old {
                    *reason_deltas.entry(reason).or_default() -= 1;
                    run_nos.insert(run.clone(), run_no);
                    had_spans.insert(run);
                }
            }
            number_new_runs!(tx, postgres, run_nos, touched.iter());
            for chunk in cacheable_chunks(&new_traces, ROWS_PER_INSERT) {
                let mut q = QueryBuilder::new("INSERT INTO trace_runs (trace_id, run_id, explicit, run_no) ");
                q.push_values(chunk, |mut row, (trace, run, explicit)| {
                    row.push_bind(*trace).push_bind(run).push_bind(*explicit).push_bind(run_nos[run.as_str()]);
                });
                q.build().execute(&mut *tx).await?;
            }
            let t_traces = std::time::Instant::now();

            // A run with a row, or a trace stored before, has its stored spans read back:
            // derivation needs all of them, and the ones already stored are not stored
            // again. Any other run is new in this write and its spans are exactly this
            // batch's.
            let read_back: Vec<i64> = touched.iter().filter(|r| had_spans.contains(*r)).map(|r| run_nos[r]).collect();
            let mut facts_by_run: BTreeMap<String, Vec<SpanFacts>> = BTreeMap::new();
            for chunk in cacheable_chunks(&read_back, IDS_PER_QUERY) {
                let mut q = QueryBuilder::new("SELECT run_id, records FROM span_chunks WHERE run_no IN (");
                let mut list = q.separated(", ");
                for run_no in chunk {
                    list.push_bind(*run_no);
                }
                q.push(")");
                let rows: Vec<(String, String)> = q.build_query_as().fetch_all(&mut *tx).await?;
                for (run, records) in rows {
                    let facts = span_record::decode_facts(&records).map_err(corrupt)?;
                    facts_by_run.entry(run).or_default().extend(facts);
                }
            }
            // This write's spans not stored yet, by run; a span re-sent within the batch
            // counts once (its first copy).
            let mut new_by_run: BTreeMap<&str, Vec<&NormalizedSpan>> = BTreeMap::new();
            {
                let stored_before: HashSet<(&str, &str)> =
                    facts_by_run.values().flatten().map(|f| (f.trace_id.as_str(), f.span_id.as_str())).collect();
                let mut seen: HashSet<(&str, &str)> = HashSet::new();
                for s in spans {
                    let key = (s.trace_id.as_str(), s.span_id.as_str());
                    if stored_before.contains(&key) || !seen.insert(key) {
                        continue;
                    }
                    new_by_run.entry(run_of[s.trace_id.as_str()].as_str()).or_default().push(s);
                }
            }
            for (run, new) in &new_by_run {
                facts_by_run.entry(run.to_string()).or_default().extend(new.iter().map(|s| s.facts()));
            }
            let stored: u64 = new_by_run.values().map(|v| v.len() as u64).sum();

            // One chunk per run with new spans. On SQLite each chunk's id, which its term
            // document is keyed by, is given here (this transaction holds the write lock)
            // rather than returned by the insert, whose rows came back one wake-up of the
            // writer each.
            let next_id: i64 = if postgres {
                0
            } else {
                sqlx::query_scalar("SELECT COALESCE(MAX(id), 0) + 1 FROM span_chunks").fetch_one(&mut *tx).await?
            };
            let chunks: Vec<(i64, &str, i64, i64, String)> = new_by_run
                .iter()
                .enumerate()
                .map(|(i, (run, new))| {
                    let records = span_record::chunk(new.iter().map(|s| s.json.record.as_str()));
                    (next_id + i as i64, *run, run_nos[*run], new.len() as i64, records)
                })
                .collect();
            let chunk_ids: Vec<(i64, &str)> =
                if postgres { Vec::new() } else { chunks.iter().map(|(id, run, _, _, _)| (*id, *run)).collect() };
            for part in cacheable_parts(chunks, ROWS_PER_INSERT) {
                let mut q = QueryBuilder::new(if postgres {
                    "INSERT INTO span_chunks (run_id, run_no, spans, received_at, records) "
                } else {
                    "INSERT INTO span_chunks (id, run_id, run_no, spans, received_at, records) "
                });
                q.push_values(part, |mut row, (id, run, run_no, n, records)| {
                    if !postgres {
                        row.push_bind(id);
                    }
                    row.push_bind(run).push_bind(run_no).push_bind(n).push_bind(received_at).push_bind(records);
                });
                q.build().execute(&mut *tx).await?;
            }
            // The lookups that need an index of their own.
            let new_spans = || new_by_run.iter().flat_map(|(run, new)| new.iter().map(move |s| (*run, *s)));
            fn terms_of<'a>(s: &&'a NormalizedSpan) -> impl Iterator<Item = &'a str> {
                s.idempotency_key.iter().chain(&s.external_id).map(String::as_str)
            }
            if postgres {
                let terms: BTreeSet<(&str, &str)> =
                    new_spans().flat_map(|(run, s)| terms_of(&s).map(move |t| (t, run))).collect();
                let terms: Vec<(&str, &str)> = terms.into_iter().collect();
                for part in cacheable_chunks(&terms, ROWS_PER_INSERT) {
                    let mut q = QueryBuilder::new("INSERT INTO run_terms (term, run_id) ");
                    q.push_values(part, |mut row, (term, run)| {
                        row.push_bind(*term).push_bind(*run);
                    });
                    q.push(" ON CONFLICT (term, run_id) DO NOTHING");
                    q.build().execute(&mut *tx).await?;
                }
            } else {
                let documents: Vec<(i64, String)> = chunk_ids
                    .iter()
                    .map(|(id, run)| (*id, terms::document(new_by_run[run].iter().flat_map(terms_of))))
                    .filter(|(_, doc)| !doc.is_empty())
                    .collect();
                for part in cacheable_parts(documents, ROWS_PER_INSERT) {
                    let mut q = QueryBuilder::new("INSERT INTO run_terms_fts (rowid, terms) ");
                    q.push_values(part, |mut row, (id, doc)| {
                        row.push_bind(id).push_bind(doc);
                    });
                    q.build().execute(&mut *tx).await?;
                }
            }
            let irreversible: Vec<(&str, &NormalizedSpan)> =
                new_spans().filter(|(_, s)| s.side_effect == Some(SideEffect::Irreversible)).collect();
            for part in cacheable_chunks(&irreversible, ROWS_PER_INSERT) {
                let mut q =
                    QueryBuilder::new("INSERT INTO irreversible_calls (trace_id, span_id, run_id, run_no, tool_name, outcome, end_ns) ");
                q.push_values(part, |mut row, (run, s)| {
                    row.push_bind(&s.trace_id)
                        .push_bind(&s.span_id)
                        .push_bind(*run)
                        .push_bind(run_nos[*run])
                        .push_bind(&s.tool_name)
                        .push_bind(s.outcome.map(|o| o.as_str()))
                        .push_bind(s.end_ns);
                });
                q.push(" ON CONFLICT (trace_id, span_id) DO NOTHING");
                q.build().execute(&mut *tx).await?;
            }

            super::approvals::record_violations!(tx, spans, run_of, facts_by_run, received_at);

            let t_spans = std::time::Instant::now();
            let mut derived: Vec<RunDetail> =
                touched.iter().map(|run| derive_run_with(run, facts_by_run.get(run).map(Vec::as_slice).unwrap_or(&[]), rules)).collect();
            let t_derived = std::time::Instant::now();
            super::approvals::count_violations!(tx, derived);
            super::escalations::open_from_traces!(tx, derived, spans, received_at);
            for d in &derived {
                *reason_deltas.entry(d.run.terminal_reason.as_str().to_string()).or_default() += 1;
            }
            for chunk in cacheable_chunks(&derived, ROWS_PER_INSERT / 2) {
                let mut q = QueryBuilder::new(
                    "INSERT INTO runs (run_id, run_no, agent, run_trigger, terminal_reason, started_ns, ended_ns, \
                     wall_clock_ms, cost, cost_source, unpriced_models, input_tokens, output_tokens, cache_tokens, \
                     steps, tool_calls, trace_ids, duplicate_side_effects, possible_duplicates, deduped_calls, \
                     completed_without_read, approval_violations, escalation_reason, duplicates, updated_at) ",
                );
                q.push_values(chunk, |mut row, d| {
                    let r = &d.run;
                    row.push_bind(r.run_id.clone())
                        .push_bind(run_nos[r.run_id.as_str()])
                        .push_bind(r.agent.clone())
                        .push_bind(r.trigger.as_str())
                        .push_bind(r.terminal_reason.as_str())
                        .push_bind(r.started_at.and_then(|t| t.timestamp_nanos_opt()).unwrap_or(0))
                        .push_bind(r.ended_at.and_then(|t| t.timestamp_nanos_opt()))
                        .push_bind(r.wall_clock_ms)
                        .push_bind(r.cost)
                        .push_bind(r.cost_source.as_str())
                        .push_bind(unpriced_json(&r.unpriced_models))
                        .push_bind(r.input_tokens)
                        .push_bind(r.output_tokens)
                        .push_bind(r.cache_tokens)
                        .push_bind(r.steps)
                        .push_bind(r.tool_calls)
                        .push_bind(serde_json::to_string(&r.trace_ids).unwrap_or_default())
                        .push_bind(r.duplicate_side_effects)
                        .push_bind(r.possible_duplicates)
                        .push_bind(r.deduped_calls)
                        .push_bind(r.completed_without_read)
                        .push_bind(r.approval_violations)
                        .push_bind(r.escalation_reason.clone())
                        .push_bind(serde_json::to_string(&d.duplicates).unwrap_or_default())
                        .push_bind(received_at);
                });
                q.push(
                    " ON CONFLICT (run_id) DO UPDATE SET agent = excluded.agent, run_trigger = excluded.run_trigger, \
                     terminal_reason = excluded.terminal_reason, started_ns = excluded.started_ns, \
                     ended_ns = excluded.ended_ns, wall_clock_ms = excluded.wall_clock_ms, cost = excluded.cost, \
                     cost_source = excluded.cost_source, unpriced_models = excluded.unpriced_models, \
                     possible_duplicates = excluded.possible_duplicates, \
                     input_tokens = excluded.input_tokens, output_tokens = excluded.output_tokens, \
                     cache_tokens = excluded.cache_tokens, steps = excluded.steps, tool_calls = excluded.tool_calls, \
                     trace_ids = excluded.trace_ids, duplicate_side_effects = excluded.duplicate_side_effects, \
                     deduped_calls = excluded.deduped_calls, completed_without_read = excluded.completed_without_read, \
                     approval_violations = excluded.approval_violations, escalation_reason = excluded.escalation_reason, \
                     duplicates = excluded.duplicates, updated_at = excluded.updated_at",
                );
                q.build().execute(&mut *tx).await?;
            }
            // The tools each touched run called, with its start and reason as just derived
            // (the search index of `run_tools`). A run's tools only grow, except when a
            // trace moves away, and that deletes the old run's rows above.
            let mut run_tools: Vec<(&str, i64, &str, i64, &str)> = Vec::new();
            for d in &derived {
                let r = &d.run;
                let started_ns = r.started_at.and_then(|t| t.timestamp_nanos_opt()).unwrap_or(0);
                let tools: BTreeSet<&str> = facts_by_run
                    .get(&r.run_id)
                    .into_iter()
                    .flatten()
                    .filter_map(|f| f.tool_name.as_deref())
                    .collect();
                let run_no = run_nos[r.run_id.as_str()];
                run_tools.extend(
                    tools.into_iter().map(|t| (r.run_id.as_str(), run_no, t, started_ns, r.terminal_reason.as_str())),
                );
            }
            for chunk in cacheable_chunks(&run_tools, ROWS_PER_INSERT) {
                let mut q =
                    QueryBuilder::new("INSERT INTO run_tools (run_id, run_no, tool_name, started_ns, terminal_reason) ");
                q.push_values(chunk, |mut row, (run, run_no, tool, started_ns, reason)| {
                    row.push_bind(*run).push_bind(*run_no).push_bind(*tool).push_bind(*started_ns).push_bind(*reason);
                });
                q.push(
                    " ON CONFLICT (run_no, tool_name) DO UPDATE SET started_ns = excluded.started_ns, \
                     terminal_reason = excluded.terminal_reason \
                     WHERE run_tools.started_ns <> excluded.started_ns OR run_tools.terminal_reason <> excluded.terminal_reason",
                );
                q.build().execute(&mut *tx).await?;
            }
            // Every tool seen: its calls stored by this write, when, and what its spans
            // declare about it (the admin's tools page).
            let mut seen: BTreeMap<&str, ToolSeen> = BTreeMap::new();
            for (_, s) in new_spans() {
                let Some(name) = s.tool_name.as_deref() else { continue };
                let t = seen.entry(name).or_insert(ToolSeen { calls: 0, first_ns: s.start_ns, last_ns: s.start_ns, ..Default::default() });
                t.calls += 1;
                t.first_ns = t.first_ns.min(s.start_ns);
                t.last_ns = t.last_ns.max(s.start_ns);
                if s.side_effect_declared {
                    t.declared = s.side_effect.map(|c| c.as_str());
                }
                t.read_only = s.tool_hints.0.or(t.read_only);
                t.destructive = s.tool_hints.1.or(t.destructive);
            }
            let seen: Vec<(&str, ToolSeen)> = seen.into_iter().collect();
            for chunk in cacheable_chunks(&seen, ROWS_PER_INSERT / 4) {
                let mut q = QueryBuilder::new(
                    "INSERT INTO tools (tool_name, calls, first_seen_ns, last_seen_ns, declared_class, read_only_hint, destructive_hint) ",
                );
                q.push_values(chunk, |mut row, (name, t)| {
                    row.push_bind(*name)
                        .push_bind(t.calls)
                        .push_bind(t.first_ns)
                        .push_bind(t.last_ns)
                        .push_bind(t.declared)
                        .push_bind(t.read_only)
                        .push_bind(t.destructive);
                });
                q.push(
                    " ON CONFLICT (tool_name) DO UPDATE SET calls = tools.calls + excluded.calls, \
                     first_seen_ns = CASE WHEN excluded.first_seen_ns < tools.first_seen_ns THEN excluded.first_seen_ns ELSE tools.first_seen_ns END, \
                     last_seen_ns = CASE WHEN excluded.last_seen_ns > tools.last_seen_ns THEN excluded.last_seen_ns ELSE tools.last_seen_ns END, \
                     declared_class = COALESCE(excluded.declared_class, tools.declared_class), \
                     read_only_hint = COALESCE(excluded.read_only_hint, tools.read_only_hint), \
                     destructive_hint = COALESCE(excluded.destructive_hint, tools.destructive_hint)",
                );
                q.build().execute(&mut *tx).await?;
            }
            // Bodies, after derivation: under `failed_runs` a run that completed keeps
            // none, so a run completing in this write never has its bodies stored, and
            // one stored by earlier writes has them deleted now.
            let completed: BTreeSet<&str> = derived
                .iter()
                .filter(|d| body_policy == BodyPolicy::FailedRuns && d.run.terminal_reason == TerminalReason::Completed)
                .map(|d| d.run.run_id.as_str())
                .collect();
            if body_policy != BodyPolicy::None {
                // Only spans stored by this write (a re-sent span's bodies are stored
                // already), one chunk per run, like the spans.
                let body_chunks: Vec<(&str, i64, i64, String)> = new_by_run
                    .iter()
                    .filter(|(run, _)| !completed.contains(**run))
                    .filter_map(|(run, new)| {
                        let with_bodies = new.iter().filter(|s| !s.json.bodies.is_empty());
                        let n = with_bodies.clone().count() as i64;
                        let entries = with_bodies.map(|s| (s.trace_id.as_str(), s.span_id.as_str(), s.json.bodies.as_str()));
                        (n > 0).then(|| (*run, run_nos[*run], n, span_record::body_chunk(entries)))
                    })
                    .collect();
                for part in cacheable_parts(body_chunks, ROWS_PER_INSERT) {
                    let mut q = QueryBuilder::new("INSERT INTO body_chunks (run_id, run_no, spans, bodies) ");
                    q.push_values(part, |mut row, (run, run_no, n, bodies)| {
                        row.push_bind(run).push_bind(run_no).push_bind(n).push_bind(bodies);
                    });
                    q.build().execute(&mut *tx).await?;
                }
            }
            let stale: Vec<i64> =
                completed.iter().filter(|run| had_spans.contains(**run)).map(|run| run_nos[*run]).collect();
            for chunk in cacheable_chunks(&stale, IDS_PER_QUERY) {
                let mut q = QueryBuilder::new("DELETE FROM body_chunks WHERE run_no IN (");
                let mut list = q.separated(", ");
                for run_no in chunk {
                    list.push_bind(*run_no);
                }
                q.push(")");
                q.build().execute(&mut *tx).await?;
            }
            // Last, so the total rows every writer updates are held only until the commit.
            super::runs::apply_reason_deltas!(tx, reason_deltas);
            let t_runs = std::time::Instant::now();
            tx.commit().await?;
            tracing::debug!(
                begin_ms = (t_began - t_begin).as_millis() as u64,
                traces_ms = (t_traces - t_began).as_millis() as u64,
                spans_ms = (t_spans - t_traces).as_millis() as u64,
                derive_ms = (t_derived - t_spans).as_millis() as u64,
                runs_ms = (t_runs - t_derived).as_millis() as u64,
                commit_ms = t_runs.elapsed().as_millis() as u64,
                runs = touched.len(),
                read_back = had_spans.len(),
                "write phases"
            );
            Ok(WriteOutcome { stored, runs: touched.into_iter().collect() })
        }
        .await
    });
    Ok(outcome?)
}

/// Every stored span of a run, whole, in no particular order (readers sort as they need).
pub async fn of_run(db: &Db, run_id: &str) -> StoreResult<Vec<span_record::StoredSpan>> {
    let sql = "SELECT records FROM span_chunks WHERE run_no = (SELECT run_no FROM runs WHERE run_id = $1)";
    let rows: Vec<(String,)> = on_pool!(db, pool => sqlx::query_as(sql).bind(run_id).fetch_all(pool).await)?;
    let mut spans = Vec::new();
    for (records,) in rows {
        spans.extend(span_record::decode_spans(&records).map_err(corrupt)?);
    }
    Ok(spans)
}

/// The facts of every stored span of each run in `run_ids` (runs without spans are absent).
pub async fn facts_of_runs(db: &Db, run_ids: &[&str]) -> StoreResult<BTreeMap<String, Vec<SpanFacts>>> {
    let mut facts: BTreeMap<String, Vec<SpanFacts>> = BTreeMap::new();
    for chunk in cacheable_chunks(run_ids, IDS_PER_QUERY) {
        let rows: Vec<(String, String)> = on_pool!(db, pool => {
            let mut q = QueryBuilder::new(
                "SELECT run_id, records FROM span_chunks WHERE run_no IN (SELECT run_no FROM runs WHERE run_id IN (",
            );
            let mut list = q.separated(", ");
            for run in chunk {
                list.push_bind(*run);
            }
            q.push("))");
            q.build_query_as().fetch_all(pool).await
        })?;
        for (run, records) in rows {
            facts.entry(run).or_default().extend(span_record::decode_facts(&records).map_err(corrupt)?);
        }
    }
    Ok(facts)
}

/// How many spans are stored (for checks and figures).
pub async fn count(db: &Db) -> StoreResult<i64> {
    let sql = "SELECT CAST(COALESCE(SUM(spans), 0) AS BIGINT) FROM span_chunks";
    Ok(on_pool!(db, pool => sqlx::query_scalar(sql).fetch_one(pool).await)?)
}

#[cfg(test)]
mod tests {
    use super::{cacheable_chunks, cacheable_parts};

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

/// What one write saw of one tool.
#[derive(Default, Clone, Copy)]
struct ToolSeen {
    calls: i64,
    first_ns: i64,
    last_ns: i64,
    declared: Option<&'static str>,
    read_only: Option<bool>,
    destructive: Option<bool>,
}

/// The stored form of a run's unpriced models: a JSON array, or NULL when there are none.
pub fn unpriced_json(models: &[String]) -> Option<String> {
    (!models.is_empty()).then(|| serde_json::to_string(models).unwrap_or_default())
}
