//! What every scenario checks once the server is down again: every span of every
//! acknowledged export is stored exactly once, and what was derived from the spans (each
//! run's steps, tool calls, duplicates and ending, and the per-reason totals) equals a
//! recount from the stored spans.

use super::load::Workload;
use domain::derive::{derive_run_with, Rules};
use std::collections::HashMap;
use store::{runs, spans, Db};

#[derive(Debug, Default)]
pub struct Verified {
    pub acknowledged_spans: usize,
    pub stored_spans: usize,
    pub missing: usize,
    pub duplicated: usize,
    pub runs_checked: usize,
}

async fn every_run_id(db: &Db) -> Vec<String> {
    let mut ids = Vec::new();
    let mut after = None;
    loop {
        let page = runs::list(db, &runs::RunQuery { limit: 500, after, ..Default::default() }).await.unwrap();
        ids.extend(page.runs.iter().map(|r| r.run_id.clone()));
        match page.next {
            Some(cursor) => after = Some(cursor),
            None => return ids,
        }
    }
}

/// Checks `db` against what was sent and acknowledged; `complete` when every export was
/// acknowledged in the end (then every span of the workload must be there).
pub async fn stored_exactly_once(db: &Db, work: &Workload, acked: &[usize], complete: bool, what: &str) -> Verified {
    let run_ids = every_run_id(db).await;
    let mut stored: HashMap<(String, String), usize> = HashMap::new();
    for run in &run_ids {
        for s in spans::of_run(db, run).await.unwrap() {
            *stored.entry((s.trace_id, s.span_id)).or_default() += 1;
        }
    }
    let mut v = Verified {
        stored_spans: stored.values().sum(),
        duplicated: stored.values().filter(|n| **n > 1).count(),
        ..Default::default()
    };
    for &i in acked {
        for span in work.requests[i].resource_spans.iter().flat_map(|r| &r.scope_spans).flat_map(|s| &s.spans) {
            v.acknowledged_spans += 1;
            if !stored.contains_key(&(hex::encode(&span.trace_id), hex::encode(&span.span_id))) {
                v.missing += 1;
            }
        }
    }
    assert_eq!(v.missing, 0, "acknowledged spans were lost ({what})");
    assert_eq!(v.duplicated, 0, "spans were stored twice ({what})");
    if complete {
        assert_eq!(v.stored_spans, work.spans, "every span of the workload is stored ({what})");
    }

    // Each run's stored figures equal a recount from its stored spans.
    let ids: Vec<&str> = run_ids.iter().map(String::as_str).collect();
    let facts = spans::facts_of_runs(db, &ids).await.unwrap();
    let mut by_reason: HashMap<String, i64> = HashMap::new();
    for run in &run_ids {
        let stored = runs::get(db, run).await.unwrap().unwrap().run;
        let recount = derive_run_with(run, facts.get(run).map(Vec::as_slice).unwrap_or(&[]), &Rules::default()).run;
        let which = format!("run {run} ({what})");
        assert_eq!(stored.terminal_reason, recount.terminal_reason, "{which}");
        assert_eq!(stored.steps, recount.steps, "{which}");
        assert_eq!(stored.tool_calls, recount.tool_calls, "{which}");
        assert_eq!(stored.duplicate_side_effects, recount.duplicate_side_effects, "{which}");
        assert_eq!(stored.deduped_calls, recount.deduped_calls, "{which}");
        *by_reason.entry(stored.terminal_reason.as_str().to_string()).or_default() += 1;
        v.runs_checked += 1;
    }
    let totals = runs::count_by_reason(db, &runs::RunQuery::default()).await.unwrap();
    let totals: HashMap<String, i64> = totals.by_reason.into_iter().map(|(r, n)| (r.as_str().to_string(), n)).collect();
    assert_eq!(totals, by_reason, "the per-reason totals equal a recount ({what})");
    v
}

/// The server's database as a test reads it: its own file on SQLite.
pub async fn server_db(data_dir: &std::path::Path, postgres: Option<&Db>) -> Db {
    match postgres {
        Some(db) => db.clone(),
        None => Db::connect(&format!("sqlite://{}", data_dir.join("flightdeck.db").display())).await.unwrap(),
    }
}
