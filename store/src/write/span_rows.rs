//! Phases 2 and 3 of the write path: the spans of each touched run, and storing the new
//! ones.
//!
//! Spans are stored per run: each write adds one `span_chunks` row for each run it brings
//! new spans to (see [`domain::record`] for why), plus the span-level lookups that
//! need an index of their own: `irreversible_calls` and the search terms. A re-sent span
//! is recognised against the run's stored spans, which derivation reads back anyway, so
//! it is stored once.

use super::super::dialect::ChunkTerms;
use super::super::sql::{cacheable_chunks, cacheable_parts, Sql, Tx};
use super::super::{corrupt, dictionaries, StoreResult};
use super::assign::Assignment;
use super::{IDS_PER_QUERY, ROWS_PER_INSERT};
use domain::canonical::SideEffect;
use domain::derive::SpanFacts;
use domain::record;
use domain::span::NormalizedSpan;
use std::collections::{BTreeMap, HashSet};

/// The spans of the touched runs, as the later phases need them.
#[derive(Debug, Default)]
pub struct Gathered<'a> {
    /// Every span of each touched run: stored ones read back, then this write's new ones.
    pub facts_by_run: BTreeMap<String, Vec<SpanFacts>>,
    /// This write's spans not stored yet, by run; a span re-sent within the batch counts
    /// once (its first copy).
    pub new_by_run: BTreeMap<&'a str, Vec<&'a NormalizedSpan>>,
    /// How many spans this write stores.
    pub stored: u64,
}

impl<'a> Gathered<'a> {
    /// This write's new spans with their runs.
    pub fn new_spans(&self) -> impl Iterator<Item = (&'a str, &'a NormalizedSpan)> + '_ {
        self.new_by_run.iter().flat_map(|(run, new)| new.iter().map(move |s| (*run, *s)))
    }
}

/// Reads back the stored spans of every touched run that may have some (derivation needs
/// all of them, and the ones already stored are not stored again); any other run is new
/// in this write and its spans are exactly this batch's.
pub async fn gather<'a>(
    tx: &mut Tx,
    spans: &'a [NormalizedSpan],
    assignment: &'a Assignment<'a>,
) -> StoreResult<Gathered<'a>> {
    let read_back: Vec<i64> = assignment
        .touched
        .iter()
        .filter(|r| assignment.had_spans.contains(*r))
        .map(|r| assignment.run_nos[r])
        .collect();
    let mut facts_by_run: BTreeMap<String, Vec<SpanFacts>> = BTreeMap::new();
    for chunk in cacheable_chunks(&read_back, IDS_PER_QUERY) {
        let mut sql = Sql::new("SELECT run_id, records, packed FROM span_chunks WHERE run_no IN ");
        sql.list(chunk.iter().copied());
        let rows: Vec<(String, String, Option<Vec<u8>>)> = tx.fetch_all(sql).await?;
        dictionaries::load_for_tx(tx, rows.iter().map(|(_, _, packed)| packed.as_deref())).await?;
        for (run, records, packed) in rows {
            let records = crate::packing::unpack(records, packed)?;
            let facts = record::decode_facts(&records).map_err(corrupt)?;
            facts_by_run.entry(run).or_default().extend(facts);
        }
    }
    let new_by_run = new_spans_by_run(spans, &facts_by_run, &assignment.run_of);
    for (run, new) in &new_by_run {
        facts_by_run.entry(run.to_string()).or_default().extend(new.iter().map(|s| s.facts()));
    }
    let stored = new_by_run.values().map(|v| v.len() as u64).sum();
    Ok(Gathered { facts_by_run, new_by_run, stored })
}

/// The spans of `spans` not among the `stored` ones, by run, each once (pure).
pub fn new_spans_by_run<'a>(
    spans: &'a [NormalizedSpan],
    stored: &BTreeMap<String, Vec<SpanFacts>>,
    run_of: &'a BTreeMap<&'a str, String>,
) -> BTreeMap<&'a str, Vec<&'a NormalizedSpan>> {
    let stored_before: HashSet<(&str, &str)> =
        stored.values().flatten().map(|f| (f.trace_id.as_str(), f.span_id.as_str())).collect();
    let mut seen: HashSet<(&str, &str)> = HashSet::new();
    let mut new_by_run: BTreeMap<&'a str, Vec<&'a NormalizedSpan>> = BTreeMap::new();
    for s in spans {
        let key = (s.trace_id.as_str(), s.span_id.as_str());
        if stored_before.contains(&key) || !seen.insert(key) {
            continue;
        }
        new_by_run.entry(run_of[s.trace_id.as_str()].as_str()).or_default().push(s);
    }
    new_by_run
}

/// Stores the new spans: one `span_chunks` row per run, the chunks' search terms, and
/// the irreversible calls among them.
pub async fn store(tx: &mut Tx, batch: &Gathered<'_>, assignment: &Assignment<'_>, now: i64) -> StoreResult<()> {
    let ids = tx.next_chunk_ids(batch.new_by_run.len()).await?;
    // The deployment's newest dictionary, if it has one yet (`storage::dictionaries`).
    let dictionary = dictionaries::current(tx).await?;
    let mut terms: Vec<ChunkTerms<'_>> = Vec::with_capacity(ids.len());
    let mut chunks: Vec<(i64, &str, i64, i64, Vec<u8>)> = Vec::with_capacity(ids.len());
    for ((run, new), id) in batch.new_by_run.iter().zip(ids) {
        let records = record::chunk(new.iter().map(|s| s.json.record.as_str()));
        let packed = crate::packing::pack(&records, dictionary.as_deref());
        chunks.push((id, *run, assignment.run_nos[*run], new.len() as i64, packed));
        terms.push(ChunkTerms {
            chunk_id: id,
            run_id: run,
            run_no: assignment.run_nos[*run],
            terms: new.iter().flat_map(|s| s.search_terms()).collect(),
        });
    }
    for part in cacheable_parts(chunks, ROWS_PER_INSERT) {
        let mut sql = Sql::new("INSERT INTO span_chunks (id, run_id, run_no, spans, received_at, records, packed) ");
        sql.values(part, |row, (id, run, run_no, n, packed)| {
            row.bind(id).bind(run).bind(run_no).bind(n).bind(now).bind("").bind(packed);
        });
        tx.execute(sql).await?;
    }
    tx.store_terms(&terms).await?;

    let irreversible: Vec<(&str, &NormalizedSpan)> =
        batch.new_spans().filter(|(_, s)| s.side_effect == Some(SideEffect::Irreversible)).collect();
    for part in cacheable_chunks(&irreversible, ROWS_PER_INSERT) {
        let mut sql =
            Sql::new("INSERT INTO irreversible_calls (trace_id, span_id, run_id, run_no, tool_name, outcome, end_ns) ");
        sql.values(part, |row, (run, s)| {
            row.bind(&s.trace_id)
                .bind(&s.span_id)
                .bind(*run)
                .bind(assignment.run_nos[*run])
                .bind(&s.tool_name)
                .bind(s.outcome.map(|o| o.as_str()))
                .bind(s.end_ns);
        });
        sql.push(" ON CONFLICT (trace_id, span_id) DO NOTHING");
        tx.execute(sql).await?;
    }
    Ok(())
}
