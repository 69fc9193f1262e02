//! The ingest write path: normalized spans in, committed in one transaction together with
//! the trace→run assignment and the recomputed runs they touch. A caller acknowledges an
//! export only after this returns, so an acknowledged span is durable.

use super::{now_ms, on_pool, Db, StoreResult};
use crate::canonical::TerminalReason;
use crate::ingest::derive::{derive_run, SpanFacts};
use crate::ingest::normalize::NormalizedSpan;
use crate::ingest::pipeline::BodyPolicy;
use sqlx::QueryBuilder;
use std::collections::{BTreeMap, BTreeSet};

/// What a write did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct WriteOutcome {
    /// Spans newly stored; re-sent spans already stored are not counted again.
    pub stored: u64,
    /// Runs recomputed by this write.
    pub runs: Vec<String>,
}

/// The canonical columns derivation reads back; kept in one place with [`SpanFacts`].
pub const FACT_COLUMNS: &str = "trace_id, span_id, parent_span_id, start_ns, end_ns, status_code, agent, \
    run_trigger, terminal_reason, escalation_reason, cost, role, step_index, stop_reason, model_id, \
    input_tokens, output_tokens, cache_tokens, tool_name, side_effect, idempotency_key, attempt, outcome, \
    latency_ms, external_id, args_sha256, approval_id";

const SPAN_INSERT: &str = "INSERT INTO spans (trace_id, span_id, parent_span_id, run_id, name, kind, start_ns, \
    end_ns, status_code, status_message, agent, run_trigger, terminal_reason, escalation_reason, cost, \
    wall_clock_ms, role, step_index, stop_reason, model_id, input_tokens, output_tokens, cache_tokens, \
    tool_name, side_effect, idempotency_key, attempt, outcome, latency_ms, external_id, args_sha256, \
    approval_id, attributes, events, resource, received_at) ";

/// Rows per multi-row INSERT: 36 columns stays well under SQLite's variable limit.
const ROWS_PER_INSERT: usize = 400;

/// Stores spans, assigns their traces to runs, and recomputes the touched runs.
pub async fn write(db: &Db, spans: &[NormalizedSpan], body_policy: BodyPolicy) -> StoreResult<WriteOutcome> {
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
            // SQLite: take the write lock up front, so two writers queue on the busy
            // timeout instead of failing when a reader upgrades.
            let mut tx = if postgres { pool.begin().await? } else { pool.begin_with("BEGIN IMMEDIATE").await? };
            if postgres {
                // Instances sharing PostgreSQL serialize on each trace, then each run,
                // always in sorted order, so they never deadlock or lose an update.
                for trace in named.keys() {
                    sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1, 1))")
                        .bind(format!("trace:{trace}"))
                        .execute(&mut *tx)
                        .await?;
                }
            }

            let mut run_of: BTreeMap<&str, String> = BTreeMap::new();
            let mut touched: BTreeSet<String> = BTreeSet::new();
            for (&trace, &explicit) in &named {
                let existing: Option<(String, bool)> =
                    sqlx::query_as("SELECT run_id, explicit FROM trace_runs WHERE trace_id = $1")
                        .bind(trace)
                        .fetch_optional(&mut *tx)
                        .await?;
                let run = match (existing, explicit) {
                    (None, named_run) => {
                        let run = named_run.unwrap_or(trace).to_string();
                        sqlx::query("INSERT INTO trace_runs (trace_id, run_id, explicit) VALUES ($1, $2, $3)")
                            .bind(trace)
                            .bind(&run)
                            .bind(named_run.is_some())
                            .execute(&mut *tx)
                            .await?;
                        run
                    }
                    // The trace's earlier spans named no run; now one does: move them.
                    (Some((old, false)), Some(new)) if old != new => {
                        sqlx::query("UPDATE trace_runs SET run_id = $1, explicit = $2 WHERE trace_id = $3")
                            .bind(new)
                            .bind(true)
                            .bind(trace)
                            .execute(&mut *tx)
                            .await?;
                        for table in ["spans", "span_bodies"] {
                            sqlx::query(&format!("UPDATE {table} SET run_id = $1 WHERE trace_id = $2"))
                                .bind(new)
                                .bind(trace)
                                .execute(&mut *tx)
                                .await?;
                        }
                        sqlx::query("DELETE FROM runs WHERE run_id = $1").bind(&old).execute(&mut *tx).await?;
                        new.to_string()
                    }
                    (Some((old, _)), _) => old,
                };
                touched.insert(run.clone());
                run_of.insert(trace, run);
            }

            let mut stored = 0u64;
            for chunk in spans.chunks(ROWS_PER_INSERT) {
                let mut q = QueryBuilder::new(SPAN_INSERT);
                q.push_values(chunk, |mut row, s| {
                    row.push_bind(&s.trace_id)
                        .push_bind(&s.span_id)
                        .push_bind(&s.parent_span_id)
                        .push_bind(&run_of[s.trace_id.as_str()])
                        .push_bind(&s.name)
                        .push_bind(s.kind)
                        .push_bind(s.start_ns)
                        .push_bind(s.end_ns)
                        .push_bind(s.status_code)
                        .push_bind(&s.status_message)
                        .push_bind(&s.agent)
                        .push_bind(s.trigger.map(|t| t.as_str()))
                        .push_bind(s.terminal_reason.map(|t| t.as_str()))
                        .push_bind(&s.escalation_reason)
                        .push_bind(s.cost)
                        .push_bind(s.wall_clock_ms)
                        .push_bind(s.role.map(|r| r.as_str()))
                        .push_bind(s.step_index)
                        .push_bind(&s.stop_reason)
                        .push_bind(&s.model_id)
                        .push_bind(s.input_tokens)
                        .push_bind(s.output_tokens)
                        .push_bind(s.cache_tokens)
                        .push_bind(&s.tool_name)
                        .push_bind(s.side_effect.map(|v| v.as_str()))
                        .push_bind(&s.idempotency_key)
                        .push_bind(s.attempt)
                        .push_bind(s.outcome.map(|v| v.as_str()))
                        .push_bind(s.latency_ms)
                        .push_bind(&s.external_id)
                        .push_bind(&s.args_sha256)
                        .push_bind(&s.approval_id)
                        .push_bind(serde_json::Value::Object(s.attributes.clone()).to_string())
                        .push_bind(serde_json::Value::Array(s.events.clone()).to_string())
                        .push_bind(serde_json::Value::Object(s.resource.clone()).to_string())
                        .push_bind(received_at);
                });
                q.push(" ON CONFLICT (trace_id, span_id) DO NOTHING");
                stored += q.build().execute(&mut *tx).await?.rows_affected();
            }

            if body_policy != BodyPolicy::None {
                let with_bodies: Vec<&NormalizedSpan> = spans.iter().filter(|s| !s.bodies.is_empty()).collect();
                for chunk in with_bodies.chunks(ROWS_PER_INSERT) {
                    let mut q = QueryBuilder::new("INSERT INTO span_bodies (trace_id, span_id, run_id, bodies) ");
                    q.push_values(chunk, |mut row, s| {
                        row.push_bind(&s.trace_id)
                            .push_bind(&s.span_id)
                            .push_bind(&run_of[s.trace_id.as_str()])
                            .push_bind(serde_json::Value::Object(s.bodies.clone()).to_string());
                    });
                    q.push(" ON CONFLICT (trace_id, span_id) DO NOTHING");
                    q.build().execute(&mut *tx).await?;
                }
            }

            for run in &touched {
                if postgres {
                    sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1, 1))")
                        .bind(format!("run:{run}"))
                        .execute(&mut *tx)
                        .await?;
                }
                let facts: Vec<SpanFacts> =
                    sqlx::query_as(&format!("SELECT {FACT_COLUMNS} FROM spans WHERE run_id = $1"))
                        .bind(run)
                        .fetch_all(&mut *tx)
                        .await?;
                let d = derive_run(run, &facts);
                let r = &d.run;
                sqlx::query(
                    "INSERT INTO runs (run_id, agent, run_trigger, terminal_reason, started_ns, ended_ns, \
                     wall_clock_ms, cost, input_tokens, output_tokens, cache_tokens, steps, tool_calls, trace_ids, \
                     duplicate_side_effects, deduped_calls, completed_without_read, approval_violations, \
                     escalation_reason, duplicates, updated_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21) \
                     ON CONFLICT (run_id) DO UPDATE SET agent = excluded.agent, run_trigger = excluded.run_trigger, \
                     terminal_reason = excluded.terminal_reason, started_ns = excluded.started_ns, \
                     ended_ns = excluded.ended_ns, wall_clock_ms = excluded.wall_clock_ms, cost = excluded.cost, \
                     input_tokens = excluded.input_tokens, output_tokens = excluded.output_tokens, \
                     cache_tokens = excluded.cache_tokens, steps = excluded.steps, tool_calls = excluded.tool_calls, \
                     trace_ids = excluded.trace_ids, duplicate_side_effects = excluded.duplicate_side_effects, \
                     deduped_calls = excluded.deduped_calls, completed_without_read = excluded.completed_without_read, \
                     approval_violations = excluded.approval_violations, escalation_reason = excluded.escalation_reason, \
                     duplicates = excluded.duplicates, updated_at = excluded.updated_at",
                )
                .bind(run)
                .bind(&r.agent)
                .bind(r.trigger.as_str())
                .bind(r.terminal_reason.as_str())
                .bind(r.started_at.map(|t| t.timestamp_nanos_opt().unwrap_or(0)).unwrap_or(0))
                .bind(r.ended_at.map(|t| t.timestamp_nanos_opt().unwrap_or(0)))
                .bind(r.wall_clock_ms)
                .bind(r.cost)
                .bind(r.input_tokens)
                .bind(r.output_tokens)
                .bind(r.cache_tokens)
                .bind(r.steps)
                .bind(r.tool_calls)
                .bind(serde_json::to_string(&r.trace_ids).unwrap_or_default())
                .bind(r.duplicate_side_effects)
                .bind(r.deduped_calls)
                .bind(r.completed_without_read)
                .bind(r.approval_violations)
                .bind(&r.escalation_reason)
                .bind(serde_json::to_string(&d.duplicates).unwrap_or_default())
                .bind(received_at)
                .execute(&mut *tx)
                .await?;
                // Under `failed_runs`, a run that completed keeps no bodies.
                if body_policy == BodyPolicy::FailedRuns && r.terminal_reason == TerminalReason::Completed {
                    sqlx::query("DELETE FROM span_bodies WHERE run_id = $1").bind(run).execute(&mut *tx).await?;
                }
            }
            tx.commit().await?;
            Ok(WriteOutcome { stored, runs: touched.into_iter().collect() })
        }
        .await
    });
    Ok(outcome?)
}

/// How many spans are stored (for checks and figures).
pub async fn count(db: &Db) -> StoreResult<i64> {
    let sql = "SELECT COUNT(*) FROM spans";
    Ok(on_pool!(db, pool => sqlx::query_scalar(sql).fetch_one(pool).await)?)
}
