//! Stored spans, read back whole, per run, by everything that shows or checks them. They
//! are written by the ingest write path, [`super::write`].
//!
//! Every table holding a run's rows is indexed by the run's arrival number
//! (`runs.run_no`), not by its id: agents' run ids are random, and an index keyed by them
//! took each new run's entry on a random page (migration 0016 says more). Readers of a
//! run's spans ([`of_run`], [`facts_of_runs`]) decode its chunks.

use super::sql::{cacheable_chunks, Sql, IDS_PER_QUERY};
use super::{corrupt, Db, StoreResult};
use domain::derive::SpanFacts;
use domain::record::{self, StoredSpan};
use std::collections::BTreeMap;

/// Every stored span of a run, whole, in no particular order (readers sort as they need).
pub async fn of_run(db: &Db, run_id: &str) -> StoreResult<Vec<StoredSpan>> {
    let sql = format!("SELECT records, packed FROM span_chunks WHERE {}", super::partitions::RUN_BY_ID);
    let rows: Vec<(String, Option<Vec<u8>>)> = db.fetch_all(Sql::with_args(sql, vec![run_id.into()])).await?;
    super::dictionaries::load_for(db, rows.iter().map(|(_, packed)| packed.as_deref())).await?;
    let mut spans = Vec::new();
    for (records, packed) in rows {
        let records = super::packing::unpack(records, packed)?;
        spans.extend(record::decode_spans(&records).map_err(corrupt)?);
    }
    Ok(spans)
}

/// The facts of every stored span of each run in `run_ids` (runs without spans are absent).
pub async fn facts_of_runs(db: &Db, run_ids: &[&str]) -> StoreResult<BTreeMap<String, Vec<SpanFacts>>> {
    let mut facts: BTreeMap<String, Vec<SpanFacts>> = BTreeMap::new();
    for chunk in cacheable_chunks(run_ids, IDS_PER_QUERY) {
        let mut sql = Sql::new(
            "SELECT run_id, records, packed FROM span_chunks WHERE run_no IN (SELECT run_no FROM run_ids WHERE run_id IN ",
        );
        sql.list(chunk.iter().copied()).push(")");
        let rows: Vec<(String, String, Option<Vec<u8>>)> = db.fetch_all(sql).await?;
        super::dictionaries::load_for(db, rows.iter().map(|(_, _, packed)| packed.as_deref())).await?;
        for (run, records, packed) in rows {
            let records = super::packing::unpack(records, packed)?;
            facts.entry(run).or_default().extend(record::decode_facts(&records).map_err(corrupt)?);
        }
    }
    Ok(facts)
}

/// How many spans are stored (for checks and figures).
pub async fn count(db: &Db) -> StoreResult<i64> {
    let sql = "SELECT CAST(COALESCE(SUM(spans), 0) AS BIGINT) FROM span_chunks";
    Ok(db.fetch_one_value(Sql::new(sql)).await?)
}
