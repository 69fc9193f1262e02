//! Moving a trace to the run its spans now name (part of phase 1): a trace stored under
//! its own id, whose later spans name a run, takes its stored spans, search terms,
//! irreversible calls and bodies to that run. Rare, so it simply rewrites the old run's
//! chunks.

use super::super::sql::{Sql, Tx};
use super::super::tools::RunDeltas;
use super::super::{corrupt, dialect::ChunkTerms, dictionaries, partitions, StoreResult};
use super::Move;
use domain::derive::SpanFacts;
use domain::record::{self, StoredBodies};
use serde_json::value::RawValue;
use std::collections::BTreeMap;

/// The trace a stored record belongs to, read without the rest of it.
#[derive(serde::Deserialize)]
struct TraceOf<'a> {
    #[serde(borrow)]
    trace_id: std::borrow::Cow<'a, str>,
}

/// What went with the old run when its trace moved, for the kept totals.
#[derive(Debug, Default)]
pub struct Gone {
    /// The old run's number and trends figures (its terminal reason among them), if it
    /// had a row.
    pub point: Option<(i64, domain::trends::RunPoint)>,
    /// The tools it had called (each loses one run).
    pub tools: RunDeltas,
}

/// Points the trace at its new run and moves its stored rows there; deletes the old
/// run's row, which has no trace left, and returns what it had (for the totals).
/// `run_nos` holds both runs' numbers (the old one only if it has a row).
pub async fn move_trace(tx: &mut Tx, m: &Move<'_>, run_nos: &BTreeMap<String, i64>, now: i64) -> StoreResult<Gone> {
    let mut gone = Gone::default();
    let new_no = run_nos[m.to.as_str()];
    let mut sql = Sql::new("UPDATE trace_runs SET run_id = $1, explicit = $2, run_no = $3 WHERE trace_id = $4");
    sql.arg(m.to.as_str());
    sql.arg(true);
    sql.arg(new_no);
    sql.arg(m.trace);
    tx.execute(sql).await?;
    // A run without a row has no number, and no stored rows to move.
    if let Some(&old_no) = run_nos.get(m.from.as_str()) {
        // `runs` first, as every write touches it before the span-side tables (the order
        // retention's drop of a day locks them in).
        let mut sql =
            Sql::new(format!("DELETE FROM runs WHERE run_no = $1 RETURNING {}", crate::trends::POINT_COLUMNS));
        sql.arg(old_no);
        let row: Option<crate::trends::PointRow> = tx.fetch_optional(sql).await?;
        gone.point = row.map(|row| (old_no, crate::trends::point(row)));
        tx.forget_run_ids(&[m.from.as_str()]).await?;
        move_spans(tx, m, (old_no, new_no), now).await?;
        move_bodies(tx, m, (old_no, new_no)).await?;
        let mut sql = Sql::new("UPDATE irreversible_calls SET run_id = $1, run_no = $2 WHERE trace_id = $3");
        sql.arg(m.to.as_str());
        sql.arg(new_no);
        sql.arg(m.trace);
        tx.execute(sql).await?;
        let mut sql = Sql::new("DELETE FROM run_tools WHERE run_no = $1 RETURNING tool_name");
        sql.arg(old_no);
        for (tool,) in tx.fetch_all::<(String,)>(sql).await? {
            gone.tools.add(partitions::day_of_run_no(old_no), &tool, -1);
        }
    }
    Ok(gone)
}

/// Rewrites the old run's span chunks: the trace's records go to a new chunk of the new
/// run, the rest to a new chunk of the old run, each with its search terms.
async fn move_spans(tx: &mut Tx, m: &Move<'_>, (old_no, new_no): (i64, i64), now: i64) -> StoreResult<()> {
    let mut sql = Sql::new("SELECT records, packed FROM span_chunks WHERE run_no = $1");
    sql.arg(old_no);
    let rows: Vec<(String, Option<Vec<u8>>)> = tx.fetch_all(sql).await?;
    dictionaries::load_for_tx(tx, rows.iter().map(|(_, packed)| packed.as_deref())).await?;
    let mut staying: Vec<Box<RawValue>> = Vec::new();
    let mut moving: Vec<Box<RawValue>> = Vec::new();
    for (records, packed) in rows {
        let records = crate::packing::unpack(records, packed)?;
        for stored in serde_json::from_str::<Vec<Box<RawValue>>>(&records).map_err(corrupt)? {
            let of: TraceOf<'_> = serde_json::from_str(stored.get()).map_err(corrupt)?;
            if of.trace_id == m.trace {
                moving.push(stored)
            } else {
                staying.push(stored)
            }
        }
    }
    let facts = |records: &[Box<RawValue>]| -> Result<Vec<SpanFacts>, sqlx::Error> {
        records.iter().map(|r| serde_json::from_str(r.get()).map_err(corrupt)).collect()
    };
    let (staying_facts, moving_facts) = (facts(&staying)?, facts(&moving)?);
    // The old chunks' terms go with them.
    tx.forget_terms(&[(old_no, m.from.as_str())]).await?;
    let mut sql = Sql::new("DELETE FROM span_chunks WHERE run_no = $1");
    sql.arg(old_no);
    tx.execute(sql).await?;

    let sides = [(m.from.as_str(), old_no, &staying, &staying_facts), (m.to.as_str(), new_no, &moving, &moving_facts)];
    let sides: Vec<_> = sides.into_iter().filter(|(_, _, records, _)| !records.is_empty()).collect();
    let ids = tx.next_chunk_ids(sides.len()).await?;
    let dictionary = dictionaries::current(tx).await?;
    let mut terms = Vec::new();
    for ((run, run_no, records, facts), id) in sides.into_iter().zip(ids) {
        let mut sql = Sql::new("INSERT INTO span_chunks (id, run_id, run_no, spans, received_at, records, packed) ");
        let packed = crate::packing::pack(&record::chunk(records.iter().map(|r| r.get())), dictionary.as_deref());
        sql.values([()], |row, ()| {
            row.bind(id).bind(run).bind(run_no).bind(records.len() as i64).bind(now).bind("").bind(packed.clone());
        });
        tx.execute(sql).await?;
        terms.push(ChunkTerms {
            chunk_id: id,
            run_id: run,
            run_no,
            terms: facts.iter().flat_map(record::search_terms).collect(),
        });
    }
    tx.store_terms(&terms).await?;
    Ok(())
}

/// The trace's bodies leave the old run's body chunks the same way.
async fn move_bodies(tx: &mut Tx, m: &Move<'_>, (old_no, new_no): (i64, i64)) -> StoreResult<()> {
    let mut sql = Sql::new("SELECT bodies, packed FROM body_chunks WHERE run_no = $1");
    sql.arg(old_no);
    let rows: Vec<(String, Option<Vec<u8>>)> = tx.fetch_all(sql).await?;
    let mut staying: Vec<StoredBodies> = Vec::new();
    let mut moving: Vec<StoredBodies> = Vec::new();
    for (bodies, packed) in rows {
        let bodies = crate::packing::unpack(bodies, packed)?;
        for entry in record::decode_bodies(&bodies).map_err(corrupt)? {
            if entry.trace_id == m.trace {
                moving.push(entry)
            } else {
                staying.push(entry)
            }
        }
    }
    if moving.is_empty() {
        return Ok(());
    }
    let mut sql = Sql::new("DELETE FROM body_chunks WHERE run_no = $1");
    sql.arg(old_no);
    tx.execute(sql).await?;
    for (run, run_no, entries) in [(m.from.as_str(), old_no, &staying), (m.to.as_str(), new_no, &moving)] {
        if entries.is_empty() {
            continue;
        }
        let chunk =
            record::body_chunk(entries.iter().map(|e| (e.trace_id.as_str(), e.span_id.as_str(), e.bodies.get())));
        let mut sql = Sql::new("INSERT INTO body_chunks (run_id, run_no, spans, bodies, packed) ");
        // Bodies are not compressed with the dictionary: it is learned from span chunks.
        let packed = crate::packing::pack(&chunk, None);
        sql.values([()], |row, ()| {
            row.bind(run).bind(run_no).bind(entries.len() as i64).bind("").bind(packed.clone());
        });
        tx.execute(sql).await?;
    }
    Ok(())
}
