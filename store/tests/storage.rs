//! Storage tests, each run against SQLite and a real PostgreSQL server.

use domain::access::{Role, Scope};
use store::audit::{self, action, NewEntry};
use store::sql::Sql;
use store::testing::TestDb;
use store::{now_ms, tokens, users, StoreError};

#[tokio::test]
async fn migrations_leave_the_database_ready() {
    for t in TestDb::each_backend().await {
        assert_eq!(t.db.is_ready().await, Ok(()), "{}", t.backend());
        // running them again is a no-op, as a restart does
        t.db.migrate().await.expect("second migrate");
        t.cleanup().await;
    }
}

#[tokio::test]
async fn users_are_created_listed_and_unique() {
    for t in TestDb::each_backend().await {
        let db = &t.db;
        assert_eq!(users::count(db).await.unwrap(), 0);
        let id = users::create(db, "alice", "$argon2id$fake", &[Role::Admin, Role::Viewer]).await.unwrap();
        let alice = users::by_username(db, "alice").await.unwrap().expect("alice exists");
        assert_eq!(alice.id, id);
        assert_eq!(alice.roles(), vec![Role::Viewer, Role::Admin], "{}", t.backend());
        assert_eq!(alice.session_epoch, 0);

        let dup = users::create(db, "alice", "$argon2id$other", &[Role::Viewer]).await.unwrap_err();
        assert!(matches!(dup, StoreError::Conflict(ref m) if m.contains("already exists")), "{dup:?}");
        // A bad name is the caller's mistake (a 400), not a conflict with what is stored.
        let bad = users::create(db, "bad name", "x", &[Role::Viewer]).await.unwrap_err();
        assert!(matches!(bad, StoreError::Invalid(ref m) if m.contains("invalid username")), "{bad:?}");
        assert_eq!(users::count(db).await.unwrap(), 1, "a refused user changes nothing");

        users::create(db, "bob", "$argon2id$b", &[Role::Approver]).await.unwrap();
        let names: Vec<_> = users::list(db).await.unwrap().into_iter().map(|u| u.username).collect();
        assert_eq!(names, vec!["alice", "bob"]);
        assert_eq!(users::count_admins(db).await.unwrap(), 1);
        t.cleanup().await;
    }
}

#[tokio::test]
async fn password_reset_bumps_the_session_epoch_and_roles_change() {
    for t in TestDb::each_backend().await {
        let db = &t.db;
        users::create(db, "carol", "old", &[Role::Viewer]).await.unwrap();
        users::set_password(db, "carol", "new").await.unwrap();
        let carol = users::by_username(db, "carol").await.unwrap().unwrap();
        assert_eq!((carol.password_hash.as_str(), carol.session_epoch), ("new", 1));
        users::set_roles(db, "carol", &[Role::Operator]).await.unwrap();
        assert_eq!(users::by_id(db, carol.id).await.unwrap().unwrap().roles(), vec![Role::Operator]);
        assert!(matches!(users::set_password(db, "nobody", "x").await, Err(StoreError::NotFound(_))));
        assert!(matches!(users::set_roles(db, "nobody", &[Role::Viewer]).await, Err(StoreError::NotFound(_))));
        t.cleanup().await;
    }
}

#[tokio::test]
async fn tokens_are_found_by_hash_until_revoked() {
    for t in TestDb::each_backend().await {
        let db = &t.db;
        let id = tokens::create(
            db,
            tokens::NewToken {
                name: "billing-agent",
                prefix: "fdk_12345678",
                secret_sha256: "hash-1",
                scopes: &[Scope::Read, Scope::Ingest],
                created_by: Some("alice"),
            },
        )
        .await
        .unwrap();
        let found = tokens::active_by_hash(db, "hash-1").await.unwrap().expect("active token");
        assert_eq!(found.id, id);
        assert_eq!(found.scopes, vec![Scope::Ingest, Scope::Read]);
        assert_eq!(found.last_used_at, None);
        assert!(tokens::active_by_hash(db, "hash-2").await.unwrap().is_none());

        let at = now_ms();
        tokens::touch(db, id, at).await.unwrap();
        let listed = tokens::list(db).await.unwrap();
        assert_eq!(listed[0].last_used_at.map(|t| t.timestamp_millis()), Some(at));

        let revoked = tokens::revoke(db, id).await.unwrap();
        assert!(revoked.revoked_at.is_some());
        assert!(tokens::active_by_hash(db, "hash-1").await.unwrap().is_none(), "revoked tokens do not authenticate");
        let again = tokens::revoke(db, id).await.unwrap_err();
        assert!(matches!(again, StoreError::Conflict(ref m) if m.contains("already revoked")), "{again:?}");
        assert!(matches!(tokens::revoke(db, 9999).await, Err(StoreError::NotFound(_))));

        let no_scope = tokens::create(
            db,
            tokens::NewToken { name: "x", prefix: "p", secret_sha256: "hash-3", scopes: &[], created_by: None },
        )
        .await;
        assert!(matches!(no_scope, Err(StoreError::Conflict(_))));
        t.cleanup().await;
    }
}

#[tokio::test]
async fn audit_log_pages_newest_first_and_counts_failures() {
    for t in TestDb::each_backend().await {
        let db = &t.db;
        for i in 0..7 {
            let target = format!("user{}", i % 2);
            audit::record(
                db,
                NewEntry {
                    action: action::LOGIN_FAILED,
                    target: Some(&target),
                    source: Some("10.0.0.9"),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        }
        audit::record(db, NewEntry { actor: Some("alice"), action: action::LOGIN, ..Default::default() })
            .await
            .unwrap();

        let first = audit::list(db, None, None, 5).await.unwrap();
        assert_eq!(first.entries.len(), 5);
        assert_eq!(first.entries[0].action, "login", "newest first");
        let second = audit::list(db, first.next_before, None, 5).await.unwrap();
        assert_eq!(second.entries.len(), 3);
        assert_eq!(second.next_before, None);
        let only_logins = audit::list(db, None, Some("login"), 50).await.unwrap();
        assert_eq!(only_logins.entries.len(), 1);

        let since = now_ms() - 60_000;
        let failed = action::LOGIN_FAILED;
        assert_eq!(audit::recent(db, failed, Some("user0"), None, since).await.unwrap().0, 4);
        assert_eq!(audit::recent(db, failed, None, Some("10.0.0.9"), since).await.unwrap().0, 7);
        let (n, last) = audit::recent(db, failed, Some("user0"), Some("10.0.0.9"), since).await.unwrap();
        assert_eq!(n, 4);
        assert!(last.is_some_and(|at| at >= since), "the last failure's time comes back");
        let future = now_ms() + 60_000;
        assert_eq!(audit::recent(db, failed, Some("user0"), None, future).await.unwrap(), (0, None));
        t.cleanup().await;
    }
}

mod ingest_storage {
    use super::*;
    use domain::canonical::RunCounts;
    use domain::span::BodyPolicy;
    use ingest::pipeline::{prepare, IngestSettings};
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, KeyValue};
    use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span, Status};
    use store::{retention, runs, spans, write};

    fn kv(key: &str, v: &str) -> KeyValue {
        KeyValue {
            key: key.into(),
            value: Some(AnyValue { value: Some(any_value::Value::StringValue(v.into())) }),
            ..Default::default()
        }
    }

    /// `spans` as one export, normalized as ingest does before storing.
    fn normalized(spans: Vec<Span>) -> Vec<domain::span::NormalizedSpan> {
        let request = ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                scope_spans: vec![ScopeSpans { spans, ..Default::default() }],
                ..Default::default()
            }],
        };
        prepare(&request, &IngestSettings::default(), &[]).spans
    }

    /// A root and one tool call carrying arguments (a body); `failed` marks the root as an error.
    fn run_spans(trace: u8, run_id: &str, failed: bool, start_ns: u64) -> Vec<domain::span::NormalizedSpan> {
        tool_run(trace, run_id, failed, start_ns, "send")
    }

    fn tool_run(trace: u8, run_id: &str, failed: bool, start_ns: u64, tool: &str) -> Vec<domain::span::NormalizedSpan> {
        let root = Span {
            trace_id: vec![trace; 16],
            span_id: vec![1; 8],
            name: "agent.run".into(),
            start_time_unix_nano: start_ns,
            end_time_unix_nano: start_ns + 1_000,
            attributes: vec![kv("run.id", run_id)],
            status: failed.then(|| Status { code: 2, message: "boom".into() }),
            ..Default::default()
        };
        let call = Span {
            trace_id: vec![trace; 16],
            span_id: vec![2; 8],
            parent_span_id: vec![1; 8],
            name: format!("tool {tool}"),
            start_time_unix_nano: start_ns + 10,
            end_time_unix_nano: start_ns + 20,
            attributes: vec![kv("tool.name", tool), kv("gen_ai.tool.call.arguments", "{\"to\":\"x\"}")],
            ..Default::default()
        };
        normalized(vec![root, call])
    }

    /// Runs `first..first + n` in one export, each its own trace: a root span and one
    /// tool call (`tool-{i % 7}`); every even-numbered run fails after its tool failed.
    fn failing_runs(first: u32, n: u32, start_ns: u64) -> Vec<domain::span::NormalizedSpan> {
        let mut spans = Vec::new();
        for i in first..first + n {
            let failed = i % 2 == 0;
            let mut trace_id = vec![7u8; 16];
            trace_id[..4].copy_from_slice(&i.to_be_bytes());
            spans.push(Span {
                trace_id: trace_id.clone(),
                span_id: vec![1; 8],
                name: "agent.run".into(),
                start_time_unix_nano: start_ns,
                end_time_unix_nano: start_ns + 1_000,
                attributes: vec![kv("run.id", &format!("run-{i:04}"))],
                status: failed.then(|| Status { code: 2, message: "boom".into() }),
                ..Default::default()
            });
            spans.push(Span {
                trace_id,
                span_id: vec![2; 8],
                parent_span_id: vec![1; 8],
                name: "tool call".into(),
                start_time_unix_nano: start_ns + 10,
                end_time_unix_nano: start_ns + 20,
                attributes: vec![
                    kv("tool.name", &format!("tool-{}", i % 7)),
                    kv("tool.outcome", if failed { "error" } else { "ok" }),
                ],
                ..Default::default()
            });
        }
        normalized(spans)
    }

    #[tokio::test]
    async fn the_failed_to_recover_window_finds_every_failed_run_however_many() {
        use store::alerts;
        for t in TestDb::each_backend().await {
            let db = &t.db;
            let now_ns = (now_ms() as u64) * 1_000_000;
            // More failed runs than one read takes (500), so they are read in batches.
            for first in [0, 600] {
                write::commit(db, &failing_runs(first, 600, now_ns), BodyPolicy::None).await.unwrap();
            }
            // Each failed run and its failed tool, as the alert reads them.
            let found = || async {
                let mut found: Vec<(String, String)> = alerts::failed_runs(db, now_ms() - 60_000)
                    .await
                    .unwrap()
                    .into_iter()
                    .map(|f| (f.run_id, f.failed_tool))
                    .collect();
                found.sort();
                found
            };
            let expected: Vec<(String, String)> = (0..1_200u32)
                .filter(|i| i % 2 == 0)
                .map(|i| (format!("run-{i:04}"), format!("tool-{}", i % 7)))
                .collect();
            assert_eq!(found().await, expected, "{}", t.backend());
            // Read from `runs.failed_tool`, kept at ingest; a run written before that
            // column existed (NULL) has its spans read instead, with the same answer.
            let sql = "UPDATE runs SET failed_tool = NULL WHERE run_id < 'run-0600'";
            assert_eq!(db.execute(Sql::new(sql)).await.unwrap(), 600);
            assert_eq!(found().await, expected, "{}", t.backend());
            t.cleanup().await;
        }
    }

    /// One finished run per cost, ids `cost-{first + i}`, each its own trace, started at
    /// `start_ns`; the root carries the cost the agent reports.
    fn costed_runs(first: u32, costs: &[f64], start_ns: u64) -> Vec<domain::span::NormalizedSpan> {
        let spans = (first..).zip(costs).map(|(i, &cost)| {
            let mut trace_id = vec![9u8; 16];
            trace_id[..4].copy_from_slice(&i.to_be_bytes());
            let cost = KeyValue {
                key: "budget.cost_spent".into(),
                value: Some(AnyValue { value: Some(any_value::Value::DoubleValue(cost)) }),
                ..Default::default()
            };
            Span {
                trace_id,
                span_id: vec![1; 8],
                name: "agent.run".into(),
                start_time_unix_nano: start_ns,
                end_time_unix_nano: start_ns + 1_000,
                attributes: vec![kv("run.id", &format!("cost-{i:04}")), kv("run.terminal_reason", "completed"), cost],
                ..Default::default()
            }
        });
        normalized(spans.collect())
    }

    #[tokio::test]
    async fn the_cost_rule_reads_exact_quantiles_from_a_bounded_tail() {
        use domain::alerts::rules::{CostTail, COST_QUANTILES};
        use domain::stats::quantile_sorted;
        use store::alerts;
        for t in TestDb::each_backend().await {
            let db = &t.db;
            let now = now_ms();
            let ns = |ms: i64| (ms as u64) * 1_000_000;
            // Distinct costs in a scrambled order: 137 runs in the window, 61 before it.
            let window: Vec<f64> = (0..137u32).map(|i| f64::from((i * 37) % 137) / 100.0).collect();
            let baseline: Vec<f64> = (0..61u32).map(|i| f64::from((i * 17) % 61) / 1000.0).collect();
            write::commit(db, &costed_runs(0, &window, ns(now - 10 * 60_000)), BodyPolicy::None).await.unwrap();
            write::commit(db, &costed_runs(1_000, &baseline, ns(now - 2 * 3_600_000)), BodyPolicy::None).await.unwrap();
            let hour_ago = now - 3_600_000;

            for (from, to, costs) in [(hour_ago, now, &window), (now - 25 * 3_600_000, hour_ago, &baseline)] {
                let tail = alerts::cost_tail(db, from, to).await.unwrap();
                assert_eq!(tail.runs, costs.len(), "{}", t.backend());
                assert_eq!(tail.highest.len(), CostTail::needed(costs.len()), "only the tail is read");
                let mut sorted = costs.clone();
                sorted.sort_by(|a, b| a.total_cmp(b));
                for (name, q) in COST_QUANTILES {
                    assert_eq!(tail.quantile(q), quantile_sorted(&sorted, q), "{name} on {}", t.backend());
                }
            }

            // The alert's items: the window's runs above a limit, costliest first.
            let costliest = alerts::costliest_runs(db, hour_ago, now, 1.30, 50).await.unwrap();
            let listed: Vec<(String, f64)> = costliest.into_iter().map(|r| (r.run_id, r.cost)).collect();
            let mut expected: Vec<(String, f64)> =
                (0u32..).zip(&window).filter(|(_, &c)| c > 1.30).map(|(i, &c)| (format!("cost-{i:04}"), c)).collect();
            expected.sort_by(|a, b| b.1.total_cmp(&a.1));
            assert_eq!(listed, expected, "{}", t.backend());
            assert_eq!(listed.len(), 6, "1.31 to 1.36");
            t.cleanup().await;
        }
    }

    #[tokio::test]
    async fn bodies_follow_the_policy_and_retention_removes_old_runs() {
        for t in TestDb::each_backend().await {
            let db = &t.db;
            let now_ns = (now_ms() as u64) * 1_000_000;
            let ok = run_spans(1, "run-ok", false, now_ns);
            let failed = run_spans(2, "run-failed", true, now_ns);
            let old = run_spans(3, "run-old", true, now_ns - 40 * 86_400 * 1_000_000_000);
            for batch in [&ok, &failed, &old] {
                write::commit(db, batch, BodyPolicy::FailedRuns).await.unwrap();
            }
            assert!(runs::bodies(db, "run-ok").await.unwrap().is_empty(), "completed runs keep no bodies");
            let kept = runs::bodies(db, "run-failed").await.unwrap();
            assert_eq!(kept.len(), 1);
            assert_eq!(kept[0].1["gen_ai.tool.call.arguments"], "{\"to\":\"x\"}");
            let detail = runs::get(db, "run-ok").await.unwrap().unwrap();
            assert!(detail.tool_call_list[0].args_sha256.is_some(), "the hash stays without the body");

            // Kept while the run is open (its root has not arrived), dropped when it completes.
            let later = run_spans(5, "run-later", false, now_ns);
            write::commit(db, &later[1..], BodyPolicy::FailedRuns).await.unwrap();
            // Until the root names the run, the trace is its own run.
            let open = runs::bodies(db, &"05".repeat(16)).await.unwrap();
            assert_eq!(open.len(), 1, "an open run keeps its bodies");
            write::commit(db, &later[..1], BodyPolicy::FailedRuns).await.unwrap();
            assert!(runs::bodies(db, "run-later").await.unwrap().is_empty(), "and drops them when it completes");
            // A failed run's bodies follow its trace when the root names the run later.
            let late_failed = run_spans(6, "run-late-failed", true, now_ns);
            write::commit(db, &late_failed[1..], BodyPolicy::FailedRuns).await.unwrap();
            write::commit(db, &late_failed[..1], BodyPolicy::FailedRuns).await.unwrap();
            assert!(runs::bodies(db, &"06".repeat(16)).await.unwrap().is_empty(), "{}", t.backend());
            let moved = runs::bodies(db, "run-late-failed").await.unwrap();
            assert_eq!(moved.len(), 1, "{}", t.backend());
            assert_eq!(moved[0].1["gen_ai.tool.call.arguments"], "{\"to\":\"x\"}");

            let none = run_spans(4, "run-none", true, now_ns);
            write::commit(db, &none, BodyPolicy::None).await.unwrap();
            assert!(runs::bodies(db, "run-none").await.unwrap().is_empty());

            let deleted_runs = retention::apply(db, 30, 7).await.unwrap().runs;
            assert_eq!(deleted_runs, 1);
            assert!(runs::get(db, "run-old").await.unwrap().is_none());
            assert!(runs::get(db, "run-failed").await.unwrap().is_some());
            assert_eq!(spans::count(db).await.unwrap(), 10, "the old run's spans went with it");
            t.cleanup().await;
        }
    }

    /// The ingest writer's own connection (`Db::dedicated`) writes the database the shared
    /// pool reads, and the pool sees each commit at once.
    #[tokio::test]
    async fn a_dedicated_handle_writes_the_database_the_pool_reads() {
        for t in TestDb::each_backend().await {
            let writer = t.db.dedicated();
            let now_ns = (now_ms() as u64) * 1_000_000;
            for (trace, run) in [(9, "via-writer-1"), (10, "via-writer-2")] {
                write::commit(&writer, &run_spans(trace, run, false, now_ns), BodyPolicy::None).await.unwrap();
                assert!(runs::get(&t.db, run).await.unwrap().is_some(), "{run} on {}", t.backend());
            }
            assert_eq!(spans::count(&t.db).await.unwrap(), 4);
            if t.backend() == "sqlite" {
                // The writer's page cache is its own size (negative: KiB), the pool's SQLite's.
                let cache = |db: store::Db| async move {
                    db.fetch_all::<(i64,)>(Sql::new("PRAGMA cache_size")).await.unwrap()[0].0
                };
                let writer_kib = -i64::from(store::WRITER_CACHE_MIB) * 1024;
                assert_eq!(cache(writer.clone()).await, writer_kib);
                assert_eq!(cache(t.db.clone()).await, -2000);
            }
            drop(writer);
            t.cleanup().await;
        }
    }

    /// Each tool's name and run count ("send 4") as the admin's tools page reads them. On
    /// PostgreSQL it first checks that the counts kept per arrival day (what dropping a
    /// day's partitions subtracts) are the day's `run_tools` rows, counted.
    async fn tool_runs(db: &store::Db) -> Vec<String> {
        assert_day_counts_are_the_rows(db).await;
        assert_run_ids_are_the_runs(db).await;
        let mut seen: Vec<String> = store::tools::list(db, 100)
            .await
            .unwrap()
            .into_iter()
            .map(|t| format!("{} {}", t.tool_name, t.runs))
            .collect();
        seen.sort();
        seen
    }

    async fn assert_day_counts_are_the_rows(db: &store::Db) {
        if !matches!(db, store::Db::Postgres(_)) {
            return;
        }
        let kept: Vec<(i64, String, i64)> = db
            .fetch_all(Sql::new("SELECT day, tool_name, runs FROM tool_day_runs WHERE runs <> 0 ORDER BY 1, 2"))
            .await
            .unwrap();
        let counted: Vec<(i64, String, i64)> = db
            .fetch_all(Sql::new("SELECT run_no >> 40, tool_name, COUNT(*) FROM run_tools GROUP BY 1, 2 ORDER BY 1, 2"))
            .await
            .unwrap();
        assert_eq!(kept, counted, "each day's tool counts are its rows");
    }

    /// The counts kept of the runs (the trends' rollups, the per-reason totals) are what a
    /// count of the stored runs makes of them.
    async fn assert_kept_counts_are_the_runs(db: &store::Db) {
        let kept = store::trends::all_rows(db).await.unwrap();
        store::trends::rebuild_rollups(db).await.unwrap();
        assert_eq!(kept, store::trends::all_rows(db).await.unwrap(), "the rollups are a count of the runs");
        let totals = runs::count_by_reason(db, &runs::RunQuery::default()).await.unwrap().by_reason;
        let all = runs::RunQuery { since_ns: Some(i64::MIN), ..Default::default() };
        assert_eq!(totals, runs::count_by_reason(db, &all).await.unwrap().by_reason, "per-reason totals");
    }

    /// Each stored run's id is listed once in `run_ids`, with the run's number, and no id
    /// of a run that is gone is (on SQLite `run_ids` is a view of `runs`).
    async fn assert_run_ids_are_the_runs(db: &store::Db) {
        let listed: Vec<(String, i64)> =
            db.fetch_all(Sql::new("SELECT run_id, run_no FROM run_ids ORDER BY run_id")).await.unwrap();
        let stored: Vec<(String, i64)> =
            db.fetch_all(Sql::new("SELECT run_id, run_no FROM runs ORDER BY run_id")).await.unwrap();
        assert_eq!(listed, stored, "run_ids lists exactly the stored runs");
    }

    /// Every page of a query, following the cursors.
    async fn all_pages(db: &store::Db, mut q: runs::RunQuery) -> Vec<String> {
        let mut ids = Vec::new();
        loop {
            let page = runs::list(db, &q).await.unwrap();
            ids.extend(page.runs.into_iter().map(|r| r.run_id));
            match page.next {
                Some(cursor) => q.after = Some(cursor),
                None => return ids,
            }
        }
    }

    #[tokio::test]
    async fn chunks_are_stored_compressed_and_read_back_whole() {
        for t in TestDb::each_backend().await {
            let db = &t.db;
            let t0 = (now_ms() as u64) * 1_000_000;
            write::commit(db, &tool_run(1, "packed", false, t0, "send"), BodyPolicy::All).await.unwrap();
            let rows: Vec<(String, Option<Vec<u8>>)> = db
                .fetch_all(Sql::new("SELECT records, packed FROM span_chunks WHERE run_id = 'packed'"))
                .await
                .unwrap();
            assert_eq!(rows.len(), 1, "{}", t.backend());
            assert_eq!(rows[0].0, "", "the text column is left empty");
            let packed = rows[0].1.as_ref().expect("the chunk is packed");
            let text = store::packing::unpack(String::new(), Some(packed.clone())).unwrap();
            assert!(text.starts_with('[') && text.contains("tool send"), "{text}");
            let spans = store::spans::of_run(db, "packed").await.unwrap();
            assert_eq!(spans.len(), 2, "read back through the readers");
            let detail = runs::get(db, "packed").await.unwrap().unwrap();
            assert_eq!(detail.run.tool_calls, 1);
            t.cleanup().await;
        }
    }

    async fn packed_of(db: &store::Db, run_id: &str) -> Vec<u8> {
        let rows: Vec<(Option<Vec<u8>>,)> = db
            .fetch_all(Sql::with_args("SELECT packed FROM span_chunks WHERE run_id = $1", vec![run_id.into()]))
            .await
            .unwrap();
        assert_eq!(rows.len(), 1, "one chunk of {run_id}");
        rows[0].0.clone().expect("packed")
    }

    /// Once a deployment has enough span chunks, a dictionary is trained from them and
    /// stored; chunks written after are compressed with it (their frames name it) and read
    /// back the same, older ones as before; it is trained again only a week later; and a
    /// chunk packed with a dictionary another instance trained (stored, not yet in this
    /// process) is read back by loading it.
    #[tokio::test]
    async fn a_dictionary_is_trained_from_the_chunks_used_for_new_ones_and_loaded_where_needed() {
        use store::{dictionaries, packing};
        for t in TestDb::each_backend().await {
            let db = &t.db;
            let (now, t0) = (now_ms(), (now_ms() as u64) * 1_000_000);
            write::commit(db, &failing_runs(0, 500, t0), BodyPolicy::None).await.unwrap();
            assert_eq!(dictionaries::train_if_due(db, now).await.unwrap(), None, "500 chunks are too few");
            write::commit(db, &failing_runs(500, 700, t0), BodyPolicy::None).await.unwrap();
            let id = dictionaries::train_if_due(db, now).await.unwrap().expect("trained from 1,200 chunks");
            assert_eq!(dictionaries::train_if_due(db, now + 86_400_000).await.unwrap(), None, "a day later");

            assert_eq!(packing::dictionary_of(&packed_of(db, "run-0001").await), None, "written before");
            write::commit(db, &tool_run(9, "after-dictionary", true, t0, "send"), BodyPolicy::None).await.unwrap();
            let after = packed_of(db, "after-dictionary").await;
            assert_eq!(packing::dictionary_of(&after), Some(id), "{}", t.backend());
            let text = packing::unpack(String::new(), Some(after.clone())).unwrap();
            assert!(after.len() < packing::pack(&text, None).len(), "smaller with the dictionary");
            assert_eq!(spans::of_run(db, "after-dictionary").await.unwrap().len(), 2);
            assert_eq!(runs::get(db, "after-dictionary").await.unwrap().unwrap().run.tool_calls, 1);
            assert_eq!(spans::of_run(db, "run-0001").await.unwrap().len(), 2, "older chunks read as before");

            // Another instance's dictionary, and a chunk it wrote with it.
            let samples: Vec<String> = (0..1_500)
                .map(|n| format!(r#"[{{"trace_id":"{n:032x}","name":"step {} of another instance","db":"{}","attributes":{{"gen_ai.system":"openai","gen_ai.request.model":"gpt-4o"}}}}]"#, n % 13, t.backend()))
                .collect();
            let bytes = packing::train(&samples).expect("a dictionary");
            let other = packing::prepare(&bytes).unwrap();
            assert!(packing::known(other.id()).is_none(), "not in this process yet");
            let mut sql = Sql::new("INSERT INTO chunk_dictionaries (id, created_at, bytes) ");
            sql.values([()], |row, ()| {
                row.bind(i64::from(other.id())).bind(now - 1_000).bind(bytes.clone());
            });
            db.execute(sql).await.unwrap();
            let text = packing::unpack(String::new(), Some(packed_of(db, "run-0002").await)).unwrap();
            let mut sql = Sql::new("UPDATE span_chunks SET packed = $1 WHERE run_id = 'run-0002'");
            sql.arg(packing::pack(&text, Some(&other)));
            db.execute(sql).await.unwrap();
            assert_eq!(spans::of_run(db, "run-0002").await.unwrap().len(), 2, "read by loading its dictionary");
            assert!(packing::known(other.id()).is_some());

            let week = now + dictionaries::RETRAIN_AFTER_MS + 1;
            assert!(dictionaries::train_if_due(db, week).await.unwrap().is_some(), "trained again a week later");
            assert_eq!(dictionaries::train_if_due(db, week + 1).await.unwrap(), None);
            t.cleanup().await;
        }
    }

    #[tokio::test]
    async fn agent_trigger_and_flag_filters_list_and_count_on_both_backends() {
        use domain::canonical::{TerminalReason, Trigger};
        use runs::{RunFlag, RunQuery};
        for t in TestDb::each_backend().await {
            let db = &t.db;
            let t0 = (now_ms() as u64) * 1_000_000;
            for (trace, run, failed, agent) in
                [(1, "b1", false, "Billing-Assistant"), (2, "b2", true, "billing-bot"), (3, "d1", false, "docs")]
            {
                let mut spans = tool_run(trace, run, failed, t0 + trace as u64 * 1_000_000, "send");
                spans[0].agent = Some(agent.into());
                write::commit(db, &spans, BodyPolicy::None).await.unwrap();
            }
            let q = |f: &dyn Fn(&mut RunQuery)| {
                let mut q = RunQuery { limit: 10, ..Default::default() };
                f(&mut q);
                q
            };
            // part of the name, any case: both billing agents, none of docs
            let billing = q(&|q| q.agent = Some("BILLING".into()));
            assert_eq!(all_pages(db, billing.clone()).await, ["b2", "b1"], "{}", t.backend());
            assert_eq!(
                runs::count_by_reason(db, &billing).await.unwrap().by_reason,
                vec![(TerminalReason::Completed, 1), (TerminalReason::Error, 1)],
                "{}",
                t.backend()
            );
            let nobody = q(&|q| q.agent = Some("nobody".into()));
            assert!(all_pages(db, nobody.clone()).await.is_empty());
            assert!(runs::count_by_reason(db, &nobody).await.unwrap().by_reason.is_empty());
            assert_eq!(runs::agents(db).await.unwrap(), ["Billing-Assistant", "billing-bot", "docs"]);
            let unknown = q(&|q| q.trigger = Some(Trigger::Unknown));
            assert_eq!(runs::count_by_reason(db, &unknown).await.unwrap().total(), 3);
            // Counting stops at its limit: exact up to it, "at least" past it.
            let up_to = |limit| runs::count_by_reason_up_to(db, &unknown, limit);
            assert_eq!(
                up_to(3).await.unwrap(),
                RunCounts { at_least: None, ..runs::count_by_reason(db, &unknown).await.unwrap() }
            );
            assert_eq!(up_to(2).await.unwrap(), RunCounts { by_reason: vec![], at_least: Some(2) });
            assert_eq!(up_to(2).await.unwrap().total(), 2);
            let no_read = q(&|q| q.flag = Some(RunFlag::NoRead));
            let flagged = all_pages(db, no_read.clone()).await;
            let counted = runs::count_by_reason(db, &no_read).await.unwrap().total();
            assert_eq!(flagged.len() as i64, counted, "the list and its counts agree: {flagged:?}");
            let violations = q(&|q| q.flag = Some(RunFlag::ApprovalViolation));
            assert!(all_pages(db, violations.clone()).await.is_empty());
            assert!(runs::count_by_reason(db, &violations).await.unwrap().by_reason.is_empty());
            t.cleanup().await;
        }
    }

    /// Every page of a query read as the run list page reads it, with the search window
    /// given: the runs, the counts of the first page, and where the search stopped.
    async fn windowed(
        db: &store::Db,
        mut q: runs::RunQuery,
        window: i64,
    ) -> (Vec<String>, Vec<(domain::canonical::TerminalReason, i64)>, Option<i64>) {
        let (mut ids, mut counts, mut since) = (Vec::new(), None, None);
        loop {
            let (page, page_counts) = runs::list_and_counts_within(db, &q, window, 100).await.unwrap();
            counts.get_or_insert(page_counts.by_reason);
            let searched = page.searched.map(|w| w.since_ns);
            since = since.or(searched);
            assert_eq!(since, searched, "every page has the first page's window");
            ids.extend(page.runs.into_iter().map(|r| r.run_id));
            match page.next {
                Some(cursor) => q.after = Some(cursor),
                None => return (ids, counts.unwrap_or_default(), since),
            }
        }
    }

    /// A search with a filter that must test each of the tool's runs reads only the newest
    /// few (the window) and says where it stopped; a search before that point reads the
    /// next few, so every run is reachable. Runs named by id are found outside the window.
    #[tokio::test]
    async fn a_filtered_search_reads_a_window_of_the_tools_runs_and_says_where_it_stopped() {
        use domain::canonical::TerminalReason::Completed;
        use runs::{RunQuery, RunSort};
        for t in TestDb::each_backend().await {
            let db = &t.db;
            let t0 = (now_ms() as u64) * 1_000_000;
            let start = |trace: u8| t0 + trace as u64 * 1_000_000;
            // Oldest first: two docs runs (one whose id is the tool's name), then billing.
            let runs = [(1, "send", "docs"), (2, "d2", "docs"), (3, "b3", "billing"), (4, "b4", "billing")];
            for (trace, run, agent) in runs.into_iter().chain([(5, "b5", "billing"), (6, "b6", "billing")]) {
                let mut spans = tool_run(trace, run, false, start(trace), "send");
                spans[0].agent = Some(agent.into());
                write::commit(db, &spans, BodyPolicy::None).await.unwrap();
            }
            let search = RunQuery { search: Some("send".into()), limit: 1, ..Default::default() };
            let docs = RunQuery { agent: Some("docs".into()), ..search.clone() };

            // Three runs back: none of the tool's runs is the docs agent's, but the run
            // named by id is found and counted all the same.
            let (ids, counts, since) = windowed(db, docs.clone(), 3).await;
            assert_eq!(since, Some(start(4) as i64), "{}", t.backend());
            assert_eq!((ids, counts), (vec!["send".to_string()], vec![(Completed, 1)]), "{}", t.backend());
            // Before that point: the next three, where the docs runs are.
            let before = RunQuery { until_ns: since, ..docs.clone() };
            let (ids, counts, since) = windowed(db, before, 3).await;
            assert_eq!(since, Some(start(1) as i64), "{}", t.backend());
            assert_eq!((ids, counts), (vec!["d2".into(), "send".into()], vec![(Completed, 2)]));
            // Fewer runs than the window: no window.
            assert_eq!(
                windowed(db, docs.clone(), 7).await,
                (vec!["d2".into(), "send".into()], vec![(Completed, 2)], None)
            );
            // Another sort tests each run too: the window's runs by cost (all zero, so by id).
            let by_cost = RunQuery { sort: RunSort::Cost, ..search.clone() };
            let (ids, counts, since) = windowed(db, by_cost, 3).await;
            assert_eq!(
                (ids, since),
                (vec!["send".into(), "b6".into(), "b5".into(), "b4".into()], Some(start(4) as i64))
            );
            assert_eq!(counts, vec![(Completed, 4)], "the window's three and the run named by id");
            // Newest first without a filter pages by index through every run: no window.
            let (ids, _, since) = windowed(db, search.clone(), 3).await;
            assert_eq!((ids.len(), since), (6, None), "{}", t.backend());
            t.cleanup().await;
        }
    }

    /// Every page of a list without a search term, its first page's counts, and the lead
    /// and start of the window it read (the same on every page).
    async fn filter_windowed(
        db: &store::Db,
        mut q: runs::RunQuery,
        window: i64,
    ) -> (Vec<String>, Vec<(domain::canonical::TerminalReason, i64)>, Option<(runs::Lead, i64)>) {
        let (mut ids, mut counts, mut read) = (Vec::new(), None, None);
        loop {
            let (page, page_counts) = runs::list_and_counts_within(db, &q, window, 100).await.unwrap();
            counts.get_or_insert(page_counts.by_reason);
            assert_eq!(page.searched, None, "no search term, no search window");
            let filtered = page.filtered.map(|w| (w.lead, w.since_ns.expect("a window the page reports has a start")));
            read = read.or(filtered.clone());
            assert_eq!(read, filtered, "every page has the first page's window");
            ids.extend(page.runs.into_iter().map(|r| r.run_id));
            match page.next {
                Some(cursor) => q.after = Some(cursor),
                None => return (ids, counts.unwrap_or_default(), read),
            }
        }
    }

    /// A list whose filters no one index answers reads the newest few runs (the window) of
    /// the condition with the fewest, tests the others on those alone, and says where it
    /// stopped; a list before that point reads the next few, so every run is reachable.
    /// The counts cover the same runs as the list.
    #[tokio::test]
    async fn a_list_no_one_index_answers_reads_a_window_of_its_rarest_conditions_runs() {
        use domain::canonical::TerminalReason::Completed;
        use runs::{Lead, RunFlag, RunQuery, RunSort};
        for t in TestDb::each_backend().await {
            let db = &t.db;
            let b = t.backend();
            let t0 = (now_ms() as u64) * 1_000_000;
            let start = |trace: u8| (t0 + trace as u64 * 1_000_000) as i64;
            // Oldest first: agent, duplicate side effects, model, cost.
            let runs = [
                (1, "docs", 1, "m0", 0.0),
                (2, "billing", 0, "m1", 9.0),
                (3, "billing", 2, "m0", 1.0),
                (4, "docs", 1, "m1", 0.0),
                (5, "billing", 0, "m0", 3.0),
                (6, "billing", 0, "m0", 2.0),
            ];
            for (trace, agent, duplicates, model, cost) in runs {
                let run = format!("r{trace}");
                let mut spans = tool_run(trace, &run, false, start(trace) as u64, "send");
                spans[0].agent = Some(agent.into());
                write::commit(db, &spans, BodyPolicy::None).await.unwrap();
                let sql = Sql::new(&format!(
                    "UPDATE runs SET duplicate_side_effects = {duplicates}, model = '{model}', cost = {cost}                      WHERE run_id = '{run}'"
                ));
                db.execute(sql).await.unwrap();
            }
            let ids = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
            let all = RunQuery { limit: 1, ..Default::default() };

            // Billing's runs with duplicates: of the two conditions the flag has the fewer
            // runs, so its window of two reaches further back (to r3) than billing's (r5).
            let both = RunQuery { agent: Some("bill".into()), flag: Some(RunFlag::Duplicates), ..all.clone() };
            let (found, counts, read) = filter_windowed(db, both.clone(), 2).await;
            assert_eq!(read, Some((Lead::Flag(RunFlag::Duplicates), start(3))), "{b}");
            assert_eq!((found, counts), (ids(&["r3"]), vec![(Completed, 1)]), "{b}");
            // Before it: billing has one run left, fewer than the window: read whole, no
            // window to report.
            let before = RunQuery { until_ns: Some(start(3)), ..both.clone() };
            assert_eq!(filter_windowed(db, before, 2).await, (vec![], vec![], None), "{b}");

            // The model has no index: the newest runs of all, then the ones before.
            let model = RunQuery { model: Some("m1".into()), ..all.clone() };
            let (found, counts, read) = filter_windowed(db, model.clone(), 3).await;
            assert_eq!((found, counts, read), (ids(&["r4"]), vec![(Completed, 1)], Some((Lead::Newest, start(4)))));
            let before = RunQuery { until_ns: Some(start(4)), ..model };
            let (found, _, read) = filter_windowed(db, before, 3).await;
            assert_eq!((found, read), (ids(&["r2"]), Some((Lead::Newest, start(1)))), "{b}");

            // One condition sorted by cost: billing's newest three, most expensive first
            // (r2, the most expensive of all, is before the window).
            let by_cost = RunQuery { agent: Some("billing".into()), sort: RunSort::Cost, ..all.clone() };
            let (found, counts, read) = filter_windowed(db, by_cost, 3).await;
            assert_eq!(found, ids(&["r5", "r6", "r3"]), "{b}");
            assert_eq!((counts, read), (vec![(Completed, 3)], Some((Lead::Agent("billing".into()), start(3)))));

            // A reason the window's runs do not have: no run listed, and the counts (which
            // leave the reason out) cover the same three runs.
            let errors = RunQuery {
                agent: Some("billing".into()),
                terminal_reason: Some(domain::canonical::TerminalReason::Error),
                ..all.clone()
            };
            let (found, counts, read) = filter_windowed(db, errors, 3).await;
            assert_eq!((found, counts), (vec![], vec![(Completed, 3)]), "{b}");
            assert_eq!(read, Some((Lead::Agent("billing".into()), start(3))));

            // One condition with an index, newest first, pages by that index: no window.
            let billing = RunQuery { agent: Some("billing".into()), ..all.clone() };
            let (found, _, read) = filter_windowed(db, billing, 2).await;
            assert_eq!((found, read), (ids(&["r6", "r5", "r3", "r2"]), None), "{b}");
            t.cleanup().await;
        }
    }

    /// Sorted by duplicates the list reads two indexes (runs with duplicates, then the rest
    /// by id) and by duration an index on the expression it orders by (migration 0035):
    /// every run comes once, in order, whatever the page size, filters included.
    #[tokio::test]
    async fn value_sorts_page_through_every_run_in_order_on_both_backends() {
        use runs::{RunFlag, RunQuery, RunSort};
        for t in TestDb::each_backend().await {
            let db = &t.db;
            let t0 = (now_ms() as u64) * 1_000_000;
            for trace in 1..=5u8 {
                let spans = tool_run(trace, &format!("v{trace}"), false, t0 + trace as u64 * 1_000_000, "send");
                write::commit(db, &spans, BodyPolicy::None).await.unwrap();
            }
            // What derivation leaves for runs that repeated a side effect, and durations
            // with ties and one run still going (none).
            for (run, duplicates, duration) in
                [("v1", 0, "5"), ("v2", 2, "NULL"), ("v3", 0, "9"), ("v4", 1, "5"), ("v5", 2, "1")]
            {
                let sql = Sql::new(&format!(
                    "UPDATE runs SET duplicate_side_effects = {duplicates}, wall_clock_ms = {duration} \
                     WHERE run_id = '{run}'"
                ));
                db.execute(sql).await.unwrap();
            }
            let sorted = |sort, limit| RunQuery { sort, limit, ..Default::default() };
            for limit in [1, 2, 3, 10] {
                let by_duplicates = all_pages(db, sorted(RunSort::Duplicates, limit)).await;
                assert_eq!(by_duplicates, ["v5", "v2", "v4", "v3", "v1"], "{} pages of {limit}", t.backend());
                let by_duration = all_pages(db, sorted(RunSort::Duration, limit)).await;
                assert_eq!(by_duration, ["v3", "v4", "v1", "v5", "v2"], "{} pages of {limit}", t.backend());
            }
            let flagged = RunQuery { flag: Some(RunFlag::Duplicates), ..sorted(RunSort::Duplicates, 2) };
            assert_eq!(all_pages(db, flagged).await, ["v5", "v2", "v4"]);
            let since = RunQuery { since_ns: Some((t0 + 3_000_000) as i64), ..sorted(RunSort::Duplicates, 1) };
            assert_eq!(all_pages(db, since).await, ["v5", "v4", "v3"], "{}", t.backend());
            let errors = RunQuery {
                terminal_reason: Some(domain::canonical::TerminalReason::Error),
                ..sorted(RunSort::Duplicates, 2)
            };
            assert!(all_pages(db, errors).await.is_empty());
            t.cleanup().await;
        }
    }

    #[tokio::test]
    async fn search_by_tool_name_and_ids_pages_counts_and_follows_moves_and_retention() {
        use domain::canonical::{TerminalReason, Trigger};
        use runs::{RunQuery, RunSort};
        for t in TestDb::each_backend().await {
            let db = &t.db;
            let t0 = (now_ms() as u64) * 1_000_000;
            // "send" is both a run id and a tool name; "a4" calls another tool.
            for (trace, run, failed, tool) in [
                (1, "send", false, "send"),
                (2, "a2", true, "send"),
                (3, "a3", false, "send"),
                (4, "a4", true, "fetch"),
            ] {
                let start = t0 + trace as u64 * 1_000_000;
                write::commit(db, &tool_run(trace, run, failed, start, tool), BodyPolicy::None).await.unwrap();
            }
            let old = tool_run(5, "a-old", false, t0 - 40 * 86_400 * 1_000_000_000, "send");
            write::commit(db, &old, BodyPolicy::None).await.unwrap();
            let search = |term: &str| RunQuery { search: Some(term.into()), limit: 2, ..Default::default() };

            // newest first, the run named both ways once, in pages of two
            assert_eq!(all_pages(db, search("send")).await, ["a3", "a2", "send", "a-old"], "{}", t.backend());
            let counts = runs::count_by_reason(db, &search("send")).await.unwrap();
            assert_eq!(counts.by_reason, vec![(TerminalReason::Completed, 3), (TerminalReason::Error, 1)]);
            // both arms (by tool, by id) stop at the limit, and their sum says it stopped
            let send = search("send");
            assert_eq!(runs::count_by_reason_up_to(db, &send, 4).await.unwrap(), counts);
            assert_eq!(runs::count_by_reason_up_to(db, &send, 3).await.unwrap().at_least, Some(3));
            let errors = RunQuery { terminal_reason: Some(TerminalReason::Error), ..search("send") };
            assert_eq!(all_pages(db, errors.clone()).await, ["a2"]);
            assert_eq!(
                runs::count_by_reason(db, &errors).await.unwrap().by_reason,
                counts.by_reason,
                "counts ignore the reason"
            );
            // ties on cost (all zero) are broken by run id across both arms
            let by_cost = RunQuery { sort: RunSort::Cost, ..search("send") };
            assert_eq!(all_pages(db, by_cost).await, ["send", "a3", "a2", "a-old"]);
            let by_duration = RunQuery { sort: RunSort::Duration, limit: 1, ..search("send") };
            assert_eq!(all_pages(db, by_duration).await.len(), 4);
            // a filter only `runs` holds joins it, for the list and the counts
            let trigger = RunQuery { trigger: Some(Trigger::Unknown), ..search("send") };
            assert_eq!(all_pages(db, trigger.clone()).await, ["a3", "a2", "send", "a-old"]);
            assert_eq!(runs::count_by_reason(db, &trigger).await.unwrap().by_reason, counts.by_reason);
            let webhook = RunQuery { trigger: Some(Trigger::Webhook), ..search("send") };
            assert!(all_pages(db, webhook.clone()).await.is_empty());
            assert!(runs::count_by_reason(db, &webhook).await.unwrap().by_reason.is_empty());
            let since = RunQuery { since_ns: Some((t0 + 2_000_000) as i64), ..search("send") };
            assert_eq!(all_pages(db, since.clone()).await, ["a3", "a2"]);
            assert_eq!(
                runs::count_by_reason(db, &since).await.unwrap().by_reason,
                vec![(TerminalReason::Completed, 1), (TerminalReason::Error, 1)]
            );
            // by run id, trace id, and a tool only one run called
            assert_eq!(all_pages(db, search("a4")).await, ["a4"]);
            assert_eq!(
                runs::count_by_reason(db, &search("a4")).await.unwrap().by_reason,
                vec![(TerminalReason::Error, 1)]
            );
            assert_eq!(all_pages(db, search(&"02".repeat(16))).await, ["a2"]);
            assert_eq!(all_pages(db, search("fetch")).await, ["a4"]);
            assert!(all_pages(db, search("nope")).await.is_empty());
            // each tool's run count, kept by the write path (a re-sent run adds nothing)
            write::commit(db, &tool_run(2, "a2", true, t0 + 2_000_000, "send"), BodyPolicy::None).await.unwrap();
            assert_eq!(tool_runs(db).await, ["fetch 1", "send 4"], "{}", t.backend());
            assert!(runs::count_by_reason(db, &search("nope")).await.unwrap().by_reason.is_empty());

            // a trace that names its run later moves, tools and all
            // (with its search terms and irreversible calls)
            let with_key = |mut spans: Vec<domain::span::NormalizedSpan>| {
                let call = &mut spans[1];
                call.idempotency_key = Some("key-6".into());
                call.side_effect = Some(domain::canonical::SideEffect::Irreversible);
                call.outcome = Some(domain::canonical::Outcome::Ok);
                call.refresh_record();
                spans
            };
            let mut early = with_key(tool_run(6, "moved", false, t0 + 6_000_000, "move"));
            early.retain(|s| s.explicit_run_id.is_none());
            write::commit(db, &early, BodyPolicy::None).await.unwrap();
            assert_eq!(all_pages(db, search("move")).await, ["06".repeat(16)]);
            assert_eq!(all_pages(db, search("key-6")).await, ["06".repeat(16)]);
            assert_eq!(tool_runs(db).await, ["fetch 1", "move 1", "send 4"]);
            let all = with_key(tool_run(6, "moved", false, t0 + 6_000_000, "move"));
            assert_eq!(write::commit(db, &all, BodyPolicy::None).await.unwrap().stored, 1, "only the root is new");
            assert_eq!(all_pages(db, search("move")).await, ["moved"]);
            assert_eq!(all_pages(db, search("key-6")).await, ["moved"], "{}", t.backend());
            let moved = runs::get(db, "moved").await.unwrap().unwrap();
            assert_eq!((moved.run.steps, moved.tool_call_list.len()), (0, 1));
            assert_eq!(runs::waterfall(db, "moved", 0, 10).await.unwrap().1, 2, "both spans moved");
            let irreversible = store::alerts::irreversible_executions(db, 0).await.unwrap();
            assert_eq!(irreversible.iter().map(|e| e.run_id.as_str()).collect::<Vec<_>>(), ["moved"]);
            assert_eq!(
                runs::count_by_reason(db, &search("move")).await.unwrap().by_reason,
                vec![(TerminalReason::Completed, 1)]
            );
            assert_eq!(tool_runs(db).await, ["fetch 1", "move 1", "send 4"], "the moved-from run's count went");

            // a run's copy of its reason follows a recomputation; retention removes its tools
            let mut budget = tool_run(1, "send", false, t0 + 1_000_000, "send").remove(1);
            budget.span_id = "0303030303030303".into();
            budget.terminal_reason = Some(TerminalReason::Budget);
            budget.refresh_record();
            write::commit(db, &[budget], BodyPolicy::None).await.unwrap();
            assert_eq!(runs::get(db, "send").await.unwrap().unwrap().run.terminal_reason, TerminalReason::Budget);
            retention::apply(db, 30, 7).await.unwrap();
            assert_eq!(all_pages(db, search("send")).await, ["a3", "a2", "send"]);
            assert_eq!(tool_runs(db).await, ["fetch 1", "move 1", "send 3"], "{}", t.backend());
            assert_eq!(
                runs::count_by_reason(db, &search("send")).await.unwrap().by_reason,
                vec![(TerminalReason::Completed, 1), (TerminalReason::Budget, 1), (TerminalReason::Error, 1)]
                    .into_iter()
                    .collect::<std::collections::BTreeMap<_, _>>()
                    .into_iter()
                    .collect::<Vec<_>>()
            );
            t.cleanup().await;
        }
    }

    /// Idempotency keys and external ids find their run exactly, whatever characters they
    /// hold (SQLite's full-text index must not read them as query syntax, split them into
    /// words, fold their case or match a prefix), once per run however many writes brought
    /// them, and no longer once retention has removed the run.
    #[tokio::test]
    async fn search_terms_match_exactly_whatever_they_hold_and_leave_with_their_run() {
        use runs::RunQuery;
        let keys = ["idem \"quoted\" AND *", "Caf\u{e9}-42 OR x", "NEAR(a b)", "k:1/2?x=y#z"];
        for t in TestDb::each_backend().await {
            let db = &t.db;
            let t0 = (now_ms() as u64) * 1_000_000;
            let search = |term: &str| RunQuery { search: Some(term.into()), ..Default::default() };
            let found = |term: &'static str| async move {
                runs::list(db, &search(term)).await.unwrap().runs.into_iter().map(|r| r.run_id).collect::<Vec<_>>()
            };
            // Two writes of one run, each a call with a key and an external id; the second
            // repeats the first's key.
            for (i, (key, external)) in [(keys[0], keys[1]), (keys[0], keys[2])].into_iter().enumerate() {
                let mut spans = tool_run(7, "exact", false, t0, "send");
                let call = &mut spans[1];
                call.span_id = format!("{:016x}", 0x70 + i);
                call.idempotency_key = Some(key.into());
                call.external_id = Some(external.into());
                call.refresh_record();
                let new = if i == 0 { spans } else { vec![spans.remove(1)] };
                write::commit(db, &new, BodyPolicy::None).await.unwrap();
            }
            // An old run holding the fourth term, for retention.
            let mut old = tool_run(8, "old-exact", false, t0 - 40 * 86_400 * 1_000_000_000, "send");
            old[1].idempotency_key = Some(keys[3].into());
            old[1].refresh_record();
            write::commit(db, &old, BodyPolicy::None).await.unwrap();

            for key in &keys[..3] {
                assert_eq!(found(key).await, ["exact"], "{key:?} on {}", t.backend());
            }
            assert_eq!(found(keys[3]).await, ["old-exact"], "{}", t.backend());
            for near_miss in
                ["idem \"quoted\"", "idem", "caf\u{e9}-42 or x", "CAF\u{c9}-42 OR X", "NEAR", "k:1/2?x=y#", "*"]
            {
                assert!(found(near_miss).await.is_empty(), "{near_miss:?} matched on {}", t.backend());
            }

            retention::apply(db, 30, 7).await.unwrap();
            assert!(found(keys[3]).await.is_empty(), "{}", t.backend());
            assert_eq!(found(keys[0]).await, ["exact"]);
            if matches!(db, store::Db::Sqlite { .. }) {
                // The removed run's document went with it; the kept run's two stay.
                let documents: i64 = db.fetch_one_value(Sql::new("SELECT COUNT(*) FROM run_terms_fts")).await.unwrap();
                assert_eq!(documents, 2);
            }
            t.cleanup().await;
        }
    }

    /// PostgreSQL keeps a run's span-side rows in the partitions of the day it first
    /// arrived (ADR 0016, 0018). Retention drops a day whole, its runs with it, once none
    /// of them started inside the horizon, taking them out of every count kept; a day one
    /// of whose runs did (an agent's clock ahead of the server's) is kept, and its other
    /// runs go one by one.
    #[tokio::test]
    async fn retention_drops_a_day_whole_with_its_runs_once_none_started_inside_the_horizon() {
        use store::partitions::{self, partition_name, RUNS, TABLES, TREND_TABLES};
        let Some(t) = TestDb::postgres().await else { return };
        let db = &t.db;
        let now = now_ms();
        let today = partitions::day_of(now);
        let t0 = (now as u64) * 1_000_000;
        let long_ago = t0 - 40 * 86_400 * 1_000_000_000;
        let arrive_on = |day: i64| async move { partitions::arrive_on(db, day, now).await.unwrap() };
        let with_key = |mut spans: Vec<domain::span::NormalizedSpan>, key: &str| {
            spans[1].idempotency_key = Some(key.into());
            spans[1].refresh_record();
            spans
        };
        let write = |spans: Vec<domain::span::NormalizedSpan>| async move {
            write::commit(db, &spans, BodyPolicy::All).await.unwrap();
        };
        let partition_of = |table: &'static str, run: &'static str| async move {
            let sql = format!("SELECT DISTINCT tableoid::regclass::text FROM {table} WHERE run_id = $1");
            db.fetch_column::<String>(Sql::with_args(sql, vec![run.into()])).await.unwrap()
        };
        let found = |term: &'static str| async move {
            let q = runs::RunQuery { search: Some(term.into()), ..Default::default() };
            runs::list(db, &q).await.unwrap().runs.into_iter().map(|r| r.run_id).collect::<Vec<_>>()
        };
        let tool_runs = || async move {
            db.fetch_all::<(String, i64)>(Sql::new("SELECT tool_name, runs FROM tools ORDER BY tool_name"))
                .await
                .unwrap()
        };
        let exists = |name: String| async move {
            let sql = Sql::with_args("SELECT to_regclass($1)::text", vec![name.into()]);
            db.fetch_value::<Option<String>>(sql).await.unwrap().flatten().is_some()
        };

        arrive_on(today - 40).await;
        write(with_key(tool_run(1, "old-a", false, long_ago, "send"), "key-old-a")).await;
        write(tool_run(2, "old-b", false, long_ago, "search")).await;
        arrive_on(today - 39).await;
        write(tool_run(3, "old-c", false, long_ago, "send")).await;
        write(with_key(tool_run(4, "ahead", false, t0, "send"), "key-ahead")).await;
        partitions::ensure_days(db, now).await.unwrap();
        write(with_key(tool_run(5, "new", false, t0, "send"), "key-new")).await;

        for table in std::iter::once(RUNS).chain(TABLES) {
            assert_eq!(partition_of(table, "old-a").await, [partition_name(table, today - 40)], "{table}");
            assert_eq!(partition_of(table, "new").await, [partition_name(table, today)], "{table}");
        }
        // Each run counts in the trends' rollups of the day it arrived on (ADR 0023).
        let trend_partitions = |table: &'static str| async move {
            let sql = format!("SELECT DISTINCT tableoid::regclass::text FROM {table} WHERE runs <> 0 ORDER BY 1");
            db.fetch_column::<String>(Sql::new(sql)).await.unwrap()
        };
        for table in TREND_TABLES {
            let days = [today - 40, today - 39, today].map(|d| partition_name(table, d));
            assert_eq!(trend_partitions(table).await, days, "{table}");
        }
        assert_eq!(partition_of("span_chunks", "ahead").await, [partition_name("span_chunks", today - 39)]);
        assert_eq!(partition_of(RUNS, "ahead").await, [partition_name(RUNS, today - 39)]);
        assert_run_ids_are_the_runs(db).await;
        assert_eq!(found("key-old-a").await, ["old-a"]);
        assert_eq!(tool_runs().await, [("search".to_string(), 1), ("send".to_string(), 4)]);
        assert_day_counts_are_the_rows(db).await;

        assert_kept_counts_are_the_runs(db).await;
        let trace_runs = || async move {
            db.fetch_column::<String>(Sql::new("SELECT run_id FROM trace_runs ORDER BY run_id")).await.unwrap()
        };
        assert_eq!(trace_runs().await, ["ahead", "new", "old-a", "old-b", "old-c"]);

        let swept = retention::apply(db, 30, 7).await.unwrap();
        assert_eq!(swept.runs, 3, "old-a, old-b and old-c");
        assert_eq!(swept.days.iter().map(|d| d.day).collect::<Vec<_>>(), [today - 40]);
        assert_eq!(swept.days[0].runs, 2, "old-a and old-b went with their day, old-c in a batch");
        assert_kept_counts_are_the_runs(db).await;
        assert_eq!(trace_runs().await, ["ahead", "new"], "the traces of the runs gone went with them");
        for table in std::iter::once(RUNS).chain(TABLES).chain(TREND_TABLES) {
            assert!(!exists(partition_name(table, today - 40)).await, "{table}: the day went whole");
            assert!(exists(partition_name(table, today - 39)).await, "{table}: kept while `ahead` is stored");
        }
        assert_run_ids_are_the_runs(db).await;
        assert!(found("key-old-a").await.is_empty());
        assert_eq!(found("key-ahead").await, ["ahead"]);
        let ahead = runs::get(db, "ahead").await.unwrap().expect("a run started inside the horizon stays");
        assert_eq!(ahead.tool_call_list.len(), 1);
        assert_eq!(runs::bodies(db, "ahead").await.unwrap().len(), 1);
        // old-c's tool row stays in its day's partition until the day goes: "send" still
        // counts it, "search" (old-b's, dropped with its day) no longer counts.
        assert_eq!(tool_runs().await, [("search".to_string(), 0), ("send".to_string(), 3)]);
        assert_day_counts_are_the_rows(db).await;
        let dropped_day: i64 = db
            .fetch_one_value(Sql::with_args(
                "SELECT COUNT(*) FROM tool_day_runs WHERE day = $1",
                vec![(today - 40).into()],
            ))
            .await
            .unwrap();
        assert_eq!(dropped_day, 0, "a dropped day's counts go with it");
        let days: Vec<i64> = db.fetch_column(Sql::new("SELECT day FROM run_no_days ORDER BY day")).await.unwrap();
        assert_eq!(days, [today - 39, today, today + 1]);

        // A horizon past every run: the batches delete `new`'s rows from today's
        // partitions, and the day of `ahead` and `old-c` goes whole.
        let swept = retention::apply(db, -1, -1).await.unwrap();
        assert_eq!(swept.runs, 2);
        assert_eq!(swept.days.iter().map(|d| d.day).collect::<Vec<_>>(), [today - 39]);
        assert_eq!(swept.days[0].runs, 1, "ahead went with its day");
        assert_run_ids_are_the_runs(db).await;
        assert_kept_counts_are_the_runs(db).await;
        assert!(trace_runs().await.is_empty());
        for table in TABLES {
            assert!(!exists(partition_name(table, today - 39)).await, "{table}");
            assert!(exists(partition_name(table, today)).await, "{table}: today's is never dropped");
        }
        assert_eq!(tool_runs().await, [("search".to_string(), 0), ("send".to_string(), 0)]);
        assert_day_counts_are_the_rows(db).await;
        assert_eq!(spans::count(db).await.unwrap(), 0);
        t.cleanup().await;
    }

    /// Stores one run, "old", started 40 days before `now` and numbered into that day's
    /// partitions, then makes today's; returns today and the run's start.
    async fn one_old_run(db: &store::Db, now: i64) -> (i64, u64) {
        use store::partitions;
        let today = partitions::day_of(now);
        let long_ago = (now as u64) * 1_000_000 - 40 * 86_400 * 1_000_000_000;
        partitions::arrive_on(db, today - 40, now).await.unwrap();
        write::commit(db, &tool_run(1, "old", false, long_ago, "send"), BodyPolicy::All).await.unwrap();
        partitions::ensure_days(db, now).await.unwrap();
        (today, long_ago)
    }

    /// A day's drop waits for a writer that is using the span-side tables, instead of
    /// holding a `tools` row that writer comes to next: the two once deadlocked (the drop
    /// had updated the counts and waited for the parent table's lock, the writer held the
    /// table and waited for the counts' row), and PostgreSQL aborted one of them.
    #[tokio::test]
    async fn a_day_s_drop_waits_for_a_writer_instead_of_deadlocking_with_it() {
        use store::partitions::partition_name;
        let Some(t) = TestDb::postgres().await else { return };
        let db = &t.db;
        let store::Db::Postgres(pool) = db else { unreachable!() };
        let now = now_ms();
        let (today, _) = one_old_run(db, now).await;
        write::commit(db, &tool_run(2, "new", false, (now as u64) * 1_000_000, "send"), BodyPolicy::All).await.unwrap();

        // A writer mid-commit: it has read the span chunks, and updates a tool's row next.
        let mut writer = pool.begin().await.unwrap();
        sqlx::query("SELECT COUNT(*) FROM span_chunks").execute(&mut *writer).await.unwrap();
        let sweep = tokio::spawn({
            let db = db.clone();
            async move { retention::apply(&db, 30, 7).await }
        });
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        sqlx::query("UPDATE tools SET calls = calls + 1 WHERE tool_name = 'send'")
            .execute(&mut *writer)
            .await
            .expect("the writer's update is not caught in a deadlock");
        writer.commit().await.unwrap();

        let swept = sweep.await.unwrap().unwrap();
        assert_eq!(
            swept.days.iter().map(|d| d.day).collect::<Vec<_>>(),
            [today - 40],
            "dropped once the writer is done"
        );
        let sql =
            Sql::with_args("SELECT to_regclass($1)::text", vec![partition_name("span_chunks", today - 40).into()]);
        assert_eq!(db.fetch_value::<Option<String>>(sql).await.unwrap().flatten(), None);
        assert_eq!(tool_runs(db).await, ["send 1"]);
        t.cleanup().await;
    }

    /// A late span of a run whose day is being dropped whole (ADR 0019): the writer has
    /// locked the run and comes to update it while retention, holding the day's `runs`
    /// partition against writes, comes to delete the run's id. PostgreSQL aborts one of the
    /// two. Either the day goes and the writer, trying again, stores the span as a new
    /// run, or the writer's update stands and the day waits for the next pass; the counts
    /// kept are a count of the runs either way.
    #[tokio::test]
    async fn a_late_span_meeting_its_day_s_drop_leaves_one_of_the_two_to_try_again() {
        use store::partitions;
        let Some(t) = TestDb::postgres().await else { return };
        let db = &t.db;
        let store::Db::Postgres(pool) = db else { unreachable!() };
        let now = now_ms();
        let (today, long_ago) = one_old_run(db, now).await;

        // The writer locks the run as the write path does, then updates it.
        let mut writer = pool.begin().await.unwrap();
        sqlx::query(
            "SELECT r.run_no FROM run_ids i JOIN runs r ON r.run_no = i.run_no WHERE i.run_id = 'old' FOR UPDATE",
        )
        .execute(&mut *writer)
        .await
        .unwrap();
        let sweep = tokio::spawn({
            let db = db.clone();
            async move { retention::apply(&db, 30, 7).await }
        });
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        let update =
            sqlx::query("UPDATE runs SET ended_ns = ended_ns WHERE run_id = 'old'").execute(&mut *writer).await;
        let writer_won = match update {
            Ok(_) => {
                writer.commit().await.unwrap();
                true
            }
            Err(e) => {
                let e = store::StoreError::Database(e);
                assert!(e.is_write_conflict(), "the writer lost to a deadlock, nothing else: {e}");
                false
            }
        };
        let swept = sweep.await.unwrap().expect("retention never fails for a deadlock");
        let dropped = swept.days.iter().map(|d| d.day).collect::<Vec<_>>();
        if writer_won {
            assert!(dropped.is_empty(), "retention lost: the day waits for the next pass");
            assert!(runs::get(db, "old").await.unwrap().is_some());
        } else {
            assert_eq!(dropped, [today - 40], "the writer lost: the day went");
            // The writer's next attempt finds the run gone and stores it anew, today.
            write::commit(db, &tool_run(1, "old", false, long_ago, "send"), BodyPolicy::All).await.unwrap();
            let run_no: i64 =
                db.fetch_one_value(Sql::new("SELECT run_no FROM run_ids WHERE run_id = 'old'")).await.unwrap();
            assert_eq!(partitions::day_of_run_no(run_no), today);
        }
        assert_run_ids_are_the_runs(db).await;
        assert_kept_counts_are_the_runs(db).await;
        t.cleanup().await;
    }

    /// Migrations 0013 and 0014 moved spans and bodies from one row each into per-run
    /// chunks: those stored before read back the same through every reader, and spans are
    /// still not stored twice.
    #[tokio::test]
    async fn spans_and_bodies_stored_before_the_chunk_migrations_read_back_the_same() {
        use domain::canonical::SideEffect;
        for t in TestDb::each_backend_at(12).await {
            let db = &t.db;
            let now_ns = (now_ms() as u64) * 1_000_000;
            let mut spans_before = tool_run(7, "migrated", true, now_ns, "wire_money");
            let call = &mut spans_before[1];
            call.side_effect = Some(SideEffect::Irreversible);
            call.idempotency_key = Some("idem-7".into());
            call.external_id = Some("txn-7".into());
            call.outcome = Some(domain::canonical::Outcome::Ok);
            call.refresh_record();
            // Stored as the old schema stored them: a row per span and the trace's run.
            for s in &spans_before {
                let record: serde_json::Value = serde_json::from_str(&s.json.record).unwrap();
                let sql = "INSERT INTO spans (trace_id, span_id, parent_span_id, run_id, name, kind, start_ns, end_ns, \
                    status_code, status_message, tool_name, side_effect, idempotency_key, attempt, outcome, external_id, \
                    args_sha256, attributes, events, resource, role, latency_ms, received_at) \
                    VALUES ($1, $2, $3, 'migrated', $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, \
                    $19, $20, $21, 0)";
                db.execute(Sql::with_args(
                    sql,
                    vec![
                        (&s.trace_id).into(),
                        (&s.span_id).into(),
                        (&s.parent_span_id).into(),
                        (&s.name).into(),
                        s.kind.into(),
                        s.start_ns.into(),
                        s.end_ns.into(),
                        s.status_code.into(),
                        (&s.status_message).into(),
                        (&s.tool_name).into(),
                        s.side_effect.map(|v| v.as_str()).into(),
                        (&s.idempotency_key).into(),
                        s.attempt.into(),
                        s.outcome.map(|v| v.as_str()).into(),
                        (&s.external_id).into(),
                        (&s.args_sha256).into(),
                        record["attributes"].to_string().into(),
                        record["events"].to_string().into(),
                        record["resource"].to_string().into(),
                        s.role.map(|r| r.as_str()).into(),
                        s.latency_ms.into(),
                    ],
                ))
                .await
                .map(|_| ())
                .unwrap();
            }
            db.execute(Sql::with_args(
                "INSERT INTO trace_runs (trace_id, run_id, explicit) VALUES ($1, 'migrated', $2)",
                vec![(&spans_before[0].trace_id).into(), true.into()],
            ))
            .await
            .map(|_| ())
            .unwrap();
            // And the run's row, which the write path stored with its spans.
            insert_old_run_row(db, "migrated", now_ns as i64).await;
            // And the call's bodies, a row per span as before migration 0014.
            db.execute(Sql::with_args(
                "INSERT INTO span_bodies (trace_id, span_id, run_id, bodies) VALUES ($1, $2, 'migrated', $3)",
                vec![
                    (&spans_before[1].trace_id).into(),
                    (&spans_before[1].span_id).into(),
                    r#"{"gen_ai.tool.call.arguments":"{\"amount\":7}"}"#.into(),
                ],
            ))
            .await
            .map(|_| ())
            .unwrap();

            db.migrate().await.unwrap();
            let bodies = runs::bodies(db, "migrated").await.unwrap();
            assert_eq!(bodies.len(), 1, "{}", t.backend());
            assert_eq!(bodies[0].0, spans_before[1].span_id);
            assert_eq!(bodies[0].1["gen_ai.tool.call.arguments"], "{\"amount\":7}", "{}", t.backend());
            assert!(runs::has_bodies(db, "migrated").await.unwrap());
            assert_eq!(spans::count(db).await.unwrap(), 2, "{}", t.backend());
            // Re-sent after the migration: recognised as stored, and the run derived from both.
            let outcome = write::commit(db, &spans_before, BodyPolicy::None).await.unwrap();
            assert_eq!(outcome.stored, 0, "{}", t.backend());
            assert_eq!(spans::count(db).await.unwrap(), 2);
            let detail = runs::get(db, "migrated").await.unwrap().expect("the run");
            assert_eq!(detail.tool_call_list.len(), 1);
            let call = &detail.tool_call_list[0];
            assert_eq!((call.tool.as_str(), call.idempotency_key.as_deref()), ("wire_money", Some("idem-7")));

            let (page, total) = runs::waterfall(db, "migrated", 0, 10).await.unwrap();
            assert_eq!(total, 2);
            assert_eq!(page.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["agent.run", "tool wire_money"]);
            assert_eq!(page[0].status_message.as_deref(), Some("boom"));
            let panel = runs::span_panel(db, "migrated", &page[1].trace_id, &page[1].span_id).await.unwrap().unwrap();
            assert!(panel.attributes.contains("\"tool.name\": \"wire_money\""), "{}", panel.attributes);
            assert!(panel.bodies.as_deref().is_some_and(|b| b.contains("amount")), "{:?}", panel.bodies);
            assert_eq!(panel.kind, spans_before[1].kind);

            for term in ["idem-7", "txn-7"] {
                let q = runs::RunQuery { search: Some(term.into()), ..Default::default() };
                assert_eq!(runs::list(db, &q).await.unwrap().runs.len(), 1, "search {term} on {}", t.backend());
            }
            let executions = store::alerts::irreversible_executions(db, 0).await.unwrap();
            assert_eq!(executions.len(), 1);
            assert_eq!((executions[0].tool.as_str(), executions[0].run_id.as_str()), ("wire_money", "migrated"));
            t.cleanup().await;
        }
    }

    /// Several writers at once (instances sharing PostgreSQL; on SQLite they queue for the
    /// write lock), each with part of the same runs' spans, a run's root and tool call in
    /// different writers: every run gets one row and one number of its own, and every span
    /// is stored once and read back through it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_writers_number_each_run_once_and_lose_no_span() {
        for t in TestDb::each_backend().await {
            let db = &t.db;
            let now_ns = (now_ms() as u64) * 1_000_000;
            let spans = failing_runs(0, 40, now_ns);
            let mut parts: Vec<Vec<_>> = (0..8).map(|_| Vec::new()).collect();
            for (i, span) in spans.into_iter().enumerate() {
                parts[(i * 3) % 8].push(span);
            }
            let writers: Vec<_> = parts
                .into_iter()
                .map(|part| {
                    let db = db.clone();
                    tokio::spawn(async move { write::commit(&db, &part, BodyPolicy::None).await.unwrap().stored })
                })
                .collect();
            let mut stored = 0;
            for writer in writers {
                stored += writer.await.unwrap();
            }
            assert_eq!(stored, 80, "{}", t.backend());

            let sql = "SELECT run_id, run_no FROM runs";
            let numbered: Vec<(String, i64)> = db.fetch_all(Sql::new(sql)).await.unwrap();
            assert_eq!(numbered.len(), 40, "{}", t.backend());
            let distinct: std::collections::BTreeSet<i64> = numbered.iter().map(|(_, n)| *n).collect();
            assert_eq!(distinct.len(), 40, "one number per run on {}", t.backend());
            for (run, _) in &numbered {
                assert_eq!(spans::of_run(db, run).await.unwrap().len(), 2, "{run} on {}", t.backend());
                let detail = runs::get(db, run).await.unwrap().expect("the run");
                assert_eq!(detail.tool_call_list.len(), 1, "{run} on {}", t.backend());
            }
            assert_eq!(spans::count(db).await.unwrap(), 80);
            t.cleanup().await;
        }
    }

    /// When two PostgreSQL writers lock rows in opposite orders, PostgreSQL aborts one;
    /// that error is a write conflict, which the ingest writers try again
    /// (server/src/otlp/writer.rs); a broken rule is not.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_postgres_deadlock_is_a_write_conflict_and_a_broken_rule_is_not() {
        use store::StoreError;
        let Some(t) = TestDb::postgres().await else { return };
        let store::Db::Postgres(pool) = &t.db else { unreachable!("a PostgreSQL database") };
        sqlx::query("CREATE TABLE lock_order (id INT PRIMARY KEY)").execute(pool).await.unwrap();
        sqlx::query("INSERT INTO lock_order VALUES (1), (2)").execute(pool).await.unwrap();
        let lock = |id: i32| format!("UPDATE lock_order SET id = id WHERE id = {id}");
        // PostgreSQL aborts the one that began waiting first: each order once.
        for a_waits_first in [true, false] {
            let pause = std::time::Duration::from_millis(200);
            let (mut a, mut b) = (pool.begin().await.unwrap(), pool.begin().await.unwrap());
            sqlx::query(&lock(1)).execute(&mut *a).await.unwrap();
            sqlx::query(&lock(2)).execute(&mut *b).await.unwrap();
            // Each rolls back at the end, failed or not, so neither is left holding rows.
            let a_waits = tokio::spawn(async move {
                if !a_waits_first {
                    tokio::time::sleep(pause).await;
                }
                let result = sqlx::query(&lock(2)).execute(&mut *a).await.map(|_| ());
                a.rollback().await.unwrap();
                result
            });
            if a_waits_first {
                tokio::time::sleep(pause).await;
            }
            let b_result = sqlx::query(&lock(1)).execute(&mut *b).await.map(|_| ());
            b.rollback().await.unwrap();
            let a_result = a_waits.await.unwrap();
            assert_eq!((a_result.is_err(), b_result.is_err()), (a_waits_first, !a_waits_first), "the first to wait");
            let errors: Vec<StoreError> =
                [a_result, b_result].into_iter().filter_map(Result::err).map(StoreError::from).collect();
            assert_eq!(errors.len(), 1, "PostgreSQL aborts exactly one of the two: {errors:?}");
            assert!(errors[0].is_write_conflict(), "{:?}", errors[0]);
        }

        let duplicate = sqlx::query("INSERT INTO lock_order VALUES (1)").execute(pool).await.unwrap_err();
        assert!(!StoreError::from(duplicate).is_write_conflict());
        assert!(!StoreError::Invalid("bad".into()).is_write_conflict());
        t.cleanup().await;
    }

    /// A run's row as stored before migration 0016 (no number), with its reason counted,
    /// as the write path stored it beside the run's spans. Re-derived on the next write.
    async fn insert_old_run_row(db: &store::Db, run_id: &str, started_ns: i64) {
        db.execute(Sql::with_args("INSERT INTO runs (run_id, run_trigger, terminal_reason, started_ns, cost, input_tokens, output_tokens, cache_tokens, steps, tool_calls, trace_ids, duplicate_side_effects, deduped_calls, completed_without_read, approval_violations, duplicates, updated_at) VALUES ($1, 'unknown', 'running', $2, 0, 0, 0, 0, 0, 0, '[]', 0, 0, $3, 0, '[]', 0)", vec![run_id.into(), started_ns.into(), false.into()])).await.map(|_| ())
        .unwrap();
        db.execute(Sql::new("INSERT INTO run_reason_counts (terminal_reason, runs) VALUES ('running', 1) ON CONFLICT (terminal_reason) DO UPDATE SET runs = run_reason_counts.runs + 1")).await.map(|_| ())
        .unwrap();
    }

    /// Migration 0016 numbers runs and re-keys their rows by number: a run stored before
    /// it (spans, bodies, tools, trace, irreversible call, all keyed by run id) reads back
    /// the same through every reader, is found by tool, is not stored twice when re-sent,
    /// runs arriving afterwards are numbered after it, and retention still removes it whole.
    #[tokio::test]
    async fn runs_stored_before_run_numbers_read_back_the_same_and_leave_whole() {
        use domain::canonical::{Outcome, SideEffect};
        use domain::record as span_record;
        for t in TestDb::each_backend_at(15).await {
            let db = &t.db;
            let now_ns = (now_ms() as u64) * 1_000_000;
            let old_ns = now_ns - 40 * 86_400 * 1_000_000_000;
            let mut before = tool_run(8, "numbered-late", true, old_ns, "wire_money");
            let call = &mut before[1];
            call.side_effect = Some(SideEffect::Irreversible);
            call.outcome = Some(Outcome::Ok);
            call.refresh_record();
            let (trace, call_span) = (before[1].trace_id.clone(), before[1].span_id.clone());
            // Stored as the 0015 schema stored them, every row keyed by run id.
            insert_old_run_row(db, "numbered-late", old_ns as i64).await;
            let chunk = span_record::chunk(before.iter().map(|s| s.json.record.as_str()));
            let bodies =
                span_record::body_chunk([(trace.as_str(), call_span.as_str(), before[1].json.bodies.as_str())]);
            let statements: [(&str, Vec<String>); 5] = [
                (
                    "INSERT INTO trace_runs (trace_id, run_id, explicit) VALUES ($1, 'numbered-late', TRUE)",
                    vec![trace.clone()],
                ),
                (
                    "INSERT INTO span_chunks (run_id, spans, received_at, records) VALUES ('numbered-late', 2, 0, $1)",
                    vec![chunk],
                ),
                ("INSERT INTO body_chunks (run_id, spans, bodies) VALUES ('numbered-late', 1, $1)", vec![bodies]),
                (
                    "INSERT INTO run_tools (run_id, tool_name, started_ns, terminal_reason) \
                     VALUES ('numbered-late', 'wire_money', $1, 'running')",
                    vec![],
                ),
                (
                    "INSERT INTO irreversible_calls (trace_id, span_id, run_id, tool_name, outcome, end_ns) \
                     VALUES ($1, $2, 'numbered-late', 'wire_money', 'ok', $3)",
                    vec![trace.clone(), call_span.clone()],
                ),
            ];
            for (sql, texts) in statements {
                let mut args: Vec<store::sql::Arg> = texts.iter().map(|t| t.clone().into()).collect();
                if sql.contains("run_tools") || sql.contains("irreversible") {
                    args.push((old_ns as i64).into());
                }
                db.execute(Sql::with_args(sql, args)).await.unwrap();
            }

            db.migrate().await.unwrap();
            let (page, total) = runs::waterfall(db, "numbered-late", 0, 10).await.unwrap();
            assert_eq!(total, 2, "{}", t.backend());
            assert_eq!(page.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["agent.run", "tool wire_money"]);
            let bodies = runs::bodies(db, "numbered-late").await.unwrap();
            assert_eq!(bodies.len(), 1, "{}", t.backend());
            assert_eq!(bodies[0].1["gen_ai.tool.call.arguments"], "{\"to\":\"x\"}");
            let by_tool = runs::RunQuery { search: Some("wire_money".into()), ..Default::default() };
            assert_eq!(all_pages(db, by_tool.clone()).await, ["numbered-late"], "{}", t.backend());
            // Re-sent: recognised as stored, and the run derived from them.
            let outcome = write::commit(db, &before, BodyPolicy::FailedRuns).await.unwrap();
            assert_eq!(outcome.stored, 0, "{}", t.backend());
            let detail = runs::get(db, "numbered-late").await.unwrap().expect("the run");
            assert_eq!(detail.tool_call_list.len(), 1);
            assert_eq!(detail.run.terminal_reason.as_str(), "error", "{}", t.backend());

            // A run arriving afterwards is numbered after it, and found by the same tool.
            let after = tool_run(9, "numbered-next", false, now_ns, "wire_money");
            write::commit(db, &after, BodyPolicy::FailedRuns).await.unwrap();
            let number = |run: &'static str| async move {
                let sql = "SELECT run_no FROM runs WHERE run_id = $1";
                db.fetch_one_value::<i64>(Sql::with_args(sql, vec![run.into()])).await.unwrap()
            };
            assert!(number("numbered-next").await > number("numbered-late").await, "{}", t.backend());
            let mut found = all_pages(db, by_tool.clone()).await;
            found.sort();
            assert_eq!(found, ["numbered-late", "numbered-next"], "{}", t.backend());

            // Retention removes the migrated run with everything keyed by its number.
            let deleted = retention::apply(db, 30, 7).await.unwrap().runs;
            assert_eq!(deleted, 1, "{}", t.backend());
            assert!(runs::get(db, "numbered-late").await.unwrap().is_none());
            assert!(runs::bodies(db, "numbered-late").await.unwrap().is_empty());
            assert_eq!(spans::count(db).await.unwrap(), 2, "only the later run's spans stay, {}", t.backend());
            assert!(store::alerts::irreversible_executions(db, 0).await.unwrap().is_empty());
            assert_eq!(all_pages(db, by_tool).await, ["numbered-next"], "{}", t.backend());
            let left: i64 = db.fetch_one_value(Sql::new("SELECT (SELECT COUNT(*) FROM trace_runs) + (SELECT COUNT(*) FROM run_tools) + (SELECT COUNT(*) FROM body_chunks)")).await
            .unwrap();
            assert_eq!(left, 2, "the later run's trace and tool row stay, its bodies were never kept; {}", t.backend());
            t.cleanup().await;
        }
    }

    /// Retention goes through expired runs in batches of 500, each batch past the last
    /// one's numbers on PostgreSQL: every expired run goes, however the newer runs
    /// interleave with them, and none of the newer ones.
    #[tokio::test]
    async fn retention_takes_every_expired_run_across_batches_and_keeps_the_rest() {
        for t in TestDb::each_backend().await {
            let db = &t.db;
            let now_ns = (now_ms() as u64) * 1_000_000;
            let long_ago = now_ns - 40 * 86_400 * 1_000_000_000;
            for (first, n, start) in
                [(0, 700, long_ago), (5_000, 30, now_ns), (700, 600, long_ago), (6_000, 20, now_ns)]
            {
                write::commit(db, &failing_runs(first, n, start), BodyPolicy::None).await.unwrap();
            }
            let swept = retention::apply(db, 30, 7).await.unwrap();
            assert_eq!(swept.runs, 1_300, "{}", t.backend());
            let left: i64 = db.fetch_one_value(Sql::new("SELECT COUNT(*) FROM runs")).await.unwrap();
            assert_eq!(left, 50, "{}", t.backend());
            assert_eq!(spans::count(db).await.unwrap(), 100, "{}", t.backend());
            t.cleanup().await;
        }
    }

    #[tokio::test]
    async fn per_reason_totals_follow_new_runs_reason_changes_moves_and_retention() {
        use domain::canonical::TerminalReason;
        use runs::RunQuery;
        for t in TestDb::each_backend().await {
            let db = &t.db;
            // The unfiltered counts come from `run_reason_counts`; any filter (here one
            // that keeps every run) counts the runs themselves. They must always agree.
            let totals = || async { runs::count_by_reason(db, &RunQuery::default()).await.unwrap().by_reason };
            let scanned = || async {
                runs::count_by_reason(db, &RunQuery { since_ns: Some(i64::MIN), ..Default::default() })
                    .await
                    .unwrap()
                    .by_reason
            };
            let t0 = (now_ms() as u64) * 1_000_000;
            for (trace, run, failed) in [(1, "t1", false), (2, "t2", true), (3, "t3", false)] {
                write::commit(db, &tool_run(trace, run, failed, t0 + trace as u64 * 1_000, "send"), BodyPolicy::None)
                    .await
                    .unwrap();
            }
            // the same spans again change nothing
            write::commit(db, &tool_run(1, "t1", false, t0 + 1_000, "send"), BodyPolicy::None).await.unwrap();
            let expected = vec![(TerminalReason::Completed, 2), (TerminalReason::Error, 1)];
            assert_eq!(totals().await, expected, "{}", t.backend());
            assert_eq!(scanned().await, expected);

            // a run changes its reason as a later span arrives
            let mut budget = tool_run(1, "t1", false, t0 + 1_000, "send").remove(1);
            budget.span_id = "0303030303030303".into();
            budget.terminal_reason = Some(TerminalReason::Budget);
            budget.refresh_record();
            write::commit(db, &[budget], BodyPolicy::None).await.unwrap();
            let expected =
                vec![(TerminalReason::Completed, 1), (TerminalReason::Budget, 1), (TerminalReason::Error, 1)]
                    .into_iter()
                    .collect::<std::collections::BTreeMap<_, _>>()
                    .into_iter()
                    .collect::<Vec<_>>();
            assert_eq!(totals().await, expected, "{}", t.backend());
            assert_eq!(scanned().await, expected);

            // a trace first counted as its own run moves into the run it names later
            let mut early = tool_run(6, "t6", true, t0 + 6_000, "send");
            early.retain(|s| s.explicit_run_id.is_none());
            write::commit(db, &early, BodyPolicy::None).await.unwrap();
            assert_eq!(totals().await, scanned().await, "{}", t.backend());
            write::commit(db, &tool_run(6, "t6", true, t0 + 6_000, "send"), BodyPolicy::None).await.unwrap();
            assert_eq!(totals().await, scanned().await, "{}", t.backend());
            assert_eq!(totals().await.iter().map(|(_, n)| n).sum::<i64>(), 4);

            // retention deletes old runs, and several reasons at once
            for (trace, run, failed) in [(7, "old1", false), (8, "old2", true), (9, "old3", true)] {
                let start = t0 - 40 * 86_400 * 1_000_000_000 + trace as u64;
                write::commit(db, &tool_run(trace, run, failed, start, "send"), BodyPolicy::None).await.unwrap();
            }
            assert_eq!(totals().await, scanned().await, "{}", t.backend());
            assert_eq!(totals().await.iter().map(|(_, n)| n).sum::<i64>(), 7);
            assert_eq!(retention::apply(db, 30, 7).await.unwrap().runs, 3);
            assert_eq!(totals().await, scanned().await, "{}", t.backend());
            assert_eq!(totals().await.iter().map(|(_, n)| n).sum::<i64>(), 4);
            t.cleanup().await;
        }
    }
}

/// The ledger file's connections are all opened when the database is (by the thread that
/// opens it, whose priority SQLite's threads for them take) and kept.
#[tokio::test]
async fn the_ledger_file_connections_are_opened_with_the_database_and_kept() {
    use store::{Db, LEDGER_CONNECTIONS};
    for t in TestDb::each_backend().await {
        if let Db::Sqlite { ledger, .. } = &t.db {
            assert_eq!(ledger.size(), LEDGER_CONNECTIONS, "all open");
            assert_eq!(ledger.options().get_idle_timeout(), None, "none closed for idling");
            assert_eq!(ledger.options().get_max_lifetime(), None, "none closed for age");
        }
        t.cleanup().await;
    }
}

/// PostgreSQL connections are kept (their first plans are the slowest statements) and
/// compile no query: JIT's compiling cost 600 ms of a 50 ms page.
#[tokio::test]
async fn postgresql_connections_are_kept_and_compile_no_query() {
    use store::{sql::Sql, Db};
    let Some(t) = TestDb::postgres().await else { return };
    let Db::Postgres(pool) = &t.db else { unreachable!("a PostgreSQL test database") };
    assert_eq!((pool.options().get_idle_timeout(), pool.options().get_max_lifetime()), (None, None));
    let jit: String = t.db.fetch_one_value(Sql::new("SELECT current_setting('jit')")).await.unwrap();
    assert_eq!(jit, "off");
    t.cleanup().await;
}

/// The filter window's statements are planned for their values on PostgreSQL (a trigger
/// no run has, an agent with most runs), the run list's others once for any values.
#[tokio::test]
async fn postgresql_plans_the_filter_windows_statements_for_their_values() {
    use store::{sql::Sql, Db};
    let Some(t) = TestDb::postgres().await else { return };
    assert!(matches!(t.db, Db::Postgres(_)));
    let mode = || Sql::new("SELECT current_setting('plan_cache_mode')");
    let each: Vec<(String,)> = t.db.fetch_all_planned_each_time(mode()).await.unwrap();
    let once: Vec<(String,)> = t.db.fetch_all_planned_once(mode()).await.unwrap();
    let default: Vec<(String,)> = t.db.fetch_all(mode()).await.unwrap();
    assert_eq!((each[0].0.as_str(), once[0].0.as_str()), ("force_custom_plan", "force_generic_plan"));
    assert_eq!(default[0].0, "auto", "the setting is the transaction's, not the connection's");
    t.cleanup().await;
}

/// PostgreSQL connections open ready: `Db::connect` opens `WARM_CONNECTIONS` before it
/// returns, `open_every_connection` the rest, and each new one plans a statement on every
/// partitioned table, each of which must plan against the schema the migrations made (one
/// that names a column no longer there would fail, and the first view after a start
/// would pay for the catalog again).
#[tokio::test]
async fn postgresql_connections_open_ready_for_the_partitioned_tables() {
    use store::{warm_up, Db};
    let Some(t) = TestDb::postgres().await else { return };
    let Db::Postgres(pool) = &t.db else { unreachable!("a PostgreSQL test database") };
    assert!(pool.size() >= warm_up::WARM_CONNECTIONS, "{} connections open", pool.size());
    let mut conn = pool.acquire().await.unwrap();
    assert_eq!(warm_up::ready(&mut conn).await, warm_up::STATEMENTS.len());
    drop(conn);
    // What the server does before it serves: every connection the pool may hold, open.
    assert_eq!(t.db.open_every_connection().await.unwrap(), store::POSTGRES_CONNECTIONS);
    assert_eq!(pool.size(), store::POSTGRES_CONNECTIONS);
    t.cleanup().await;
}

/// The ledger's file (SQLite) has no ingest writer to restart its log: the server's loop
/// copies it and, once it is long, restarts it.
#[tokio::test]
async fn the_ledger_log_is_copied_and_restarted_once_long() {
    use store::{sql::Sql, wal};
    for t in TestDb::each_backend().await {
        let db = &t.db;
        let insert = |from: usize| {
            let rows: Vec<String> = (from..from + 40)
                .map(|i| {
                    format!(
                        "('call_{i}', 'k-{i}', 'fd-{i}', 'run-1', {i}, 'send_email', '{{}}', 'succeeded', 0, 1, 1, 1)"
                    )
                })
                .collect();
            Sql::new(format!(
                "INSERT INTO call_ledger (id, idempotency_key, natural_key, run_id, step_index, tool, arguments, \
                 state, deduped, created_at, started_at, updated_at) VALUES {}",
                rows.join(", ")
            ))
        };
        for batch in 0..5 {
            db.ledger().execute(insert(batch * 40)).await.unwrap();
        }
        let copied = wal::checkpoint_ledger(db, i64::MAX).await.unwrap();
        if t.backend() == "postgres" {
            assert_eq!(copied, None);
            t.cleanup().await;
            continue;
        }
        let copied = copied.expect("SQLite reports the checkpoint");
        assert!(copied.log_pages > 0, "the writes went to the ledger's log: {copied:?}");
        assert_eq!((copied.busy, copied.checkpointed_pages), (false, copied.log_pages), "{copied:?}");
        let restarted = wal::checkpoint_ledger(db, copied.log_pages).await.unwrap().unwrap();
        assert_eq!((restarted.busy, restarted.checkpointed_pages), (false, restarted.log_pages), "{restarted:?}");
        db.ledger().execute(insert(1_000)).await.unwrap();
        let after = wal::checkpoint_ledger(db, i64::MAX).await.unwrap().unwrap();
        assert!(after.log_pages < copied.log_pages, "the log started again: {after:?} after {copied:?}");
        let entries = store::ledger::for_run(db, "run-1").await.unwrap();
        assert_eq!(entries.len(), 240, "moving pages lost no entry");
        t.cleanup().await;
    }
}

#[tokio::test]
async fn the_sqlite_log_is_checkpointed_and_restarted_on_request_and_postgres_has_none() {
    use store::{wal, Db};
    for t in TestDb::each_backend().await {
        let db = &t.db;
        for i in 0..50 {
            users::create(db, &format!("walter{i}"), "$argon2id$fake", &[Role::Viewer]).await.unwrap();
        }
        let checkpoint = wal::checkpoint(db).await.unwrap();
        let writer = db.dedicated();
        match db {
            Db::Sqlite { main: pool, .. } => {
                let c = checkpoint.expect("SQLite reports its checkpoint");
                assert!(c.log_pages > 0, "the writes went to the log first: {c:?}");
                assert_eq!((c.busy, c.checkpointed_pages), (false, c.log_pages), "nothing held it back: {c:?}");

                // The writer restarts the log itself: everything copied, and the next
                // write starts the log from its beginning instead of appending to it.
                let before = c.log_pages;
                let r = wal::restart_log(&writer).await.unwrap().expect("SQLite reports the restart");
                assert_eq!((r.busy, r.checkpointed_pages), (false, r.log_pages), "{r:?}");
                users::create(&writer, "wendy", "$argon2id$fake", &[Role::Viewer]).await.unwrap();
                let after = wal::checkpoint(db).await.unwrap().unwrap();
                assert!(after.log_pages > 0 && after.log_pages < before, "restarted: {after:?} after {before}");

                // Only the writer's connection leaves checkpoints to it; every other keeps
                // the automatic one as a safety net.
                let auto = "PRAGMA wal_autocheckpoint";
                let Db::Sqlite { main: writer_pool, .. } = &writer else { unreachable!() };
                let on_writer: i64 = sqlx::query_scalar(auto).fetch_one(writer_pool).await.unwrap();
                let on_pool: i64 = sqlx::query_scalar(auto).fetch_one(pool).await.unwrap();
                assert_eq!((on_writer, on_pool), (0, i64::from(wal::AUTOCHECKPOINT_PAGES)));

                // Moving pages lost no row.
                assert!(users::by_username(db, "walter0").await.unwrap().is_some());
                assert!(users::by_username(db, "wendy").await.unwrap().is_some());
            }
            Db::Postgres(_) => {
                assert_eq!(checkpoint, None);
                assert_eq!(wal::restart_log(&writer).await.unwrap(), None);
            }
        }
        drop(writer);
        t.cleanup().await;
    }
}

/// `Db::write_returning` (a guarded call's ask for a new key, its report): one statement
/// that commits before it returns its rows; on SQLite it queues behind a write
/// transaction in progress instead of failing or running beside it.
#[tokio::test]
async fn a_one_statement_write_commits_before_it_returns_and_queues_behind_a_writer() {
    use store::sql::{Sql, Tx};
    for t in TestDb::each_backend().await {
        // The ledger's tables, where these writes go (its own file on SQLite).
        let ledger = t.db.ledger();
        let insert = |hour: i64| {
            Sql::with_args(
                "INSERT INTO call_ledger_hours (hour_ms, tool, deduped) VALUES ($1, 'send_email', 1) \
                 RETURNING hour_ms, deduped",
                vec![hour.into()],
            )
        };
        let returned: Vec<(i64, i64)> = ledger.write_returning(insert(1)).await.unwrap();
        assert_eq!(returned, [(1, 1)]);
        let seen: Vec<(i64,)> = ledger.fetch_all(Sql::new("SELECT hour_ms FROM call_ledger_hours")).await.unwrap();
        assert_eq!(seen, [(1,)], "committed, on {}", t.backend());
        if t.backend() == "sqlite" {
            let mut writer = Tx::begin_bulk_write(&ledger).await.unwrap();
            writer.execute(insert(2)).await.unwrap();
            let db = ledger.clone();
            let queued = tokio::spawn(async move { db.write_returning::<(i64, i64)>(insert(3)).await });
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            assert!(!queued.is_finished(), "it waits for the transaction in progress");
            writer.commit().await.unwrap();
            let after = tokio::time::timeout(std::time::Duration::from_secs(5), queued).await.unwrap().unwrap();
            assert_eq!(after.unwrap(), [(3, 1)]);
        }
        t.cleanup().await;
    }
}

/// The queue's agent filter lists each agent of open (or resolved) escalations once, in
/// order, by seeking `escalations_status_agent` once per agent (a loose scan), never by
/// visiting every open escalation.
#[tokio::test]
async fn escalation_agents_are_listed_once_each_by_a_loose_index_scan() {
    use domain::escalations::request::{OpenedBy, ValidEscalation};
    use domain::escalations::EscalationReason;
    use store::escalations;
    for t in TestDb::each_backend().await {
        let db = &t.db;
        let agents = [Some("billing"), Some("support"), Some("billing"), None, Some("archive"), Some("zeta")];
        let mut ids = Vec::new();
        for (i, agent) in agents.iter().enumerate() {
            let v = ValidEscalation {
                run_id: format!("run-agents-{i}"),
                reason: EscalationReason::LowConfidence,
                reason_text: None,
                what_was_done: vec![],
                what_remains: vec![],
                blocking_fact: None,
                idempotency_key: None,
                agent: agent.map(str::to_string),
                body_sha256: format!("{i:064}"),
                opened_by: OpenedBy::Agent,
            };
            ids.push(escalations::file(db, &v, "agent-7").await.unwrap().0.id);
        }
        // `zeta`'s only escalation is resolved: it leaves the open list for the resolved one.
        db.execute(Sql::with_args(
            "UPDATE escalations SET status = 'resolved' WHERE id = $1",
            vec![ids[5].as_str().into()],
        ))
        .await
        .unwrap();
        assert_eq!(escalations::agents(db, true).await.unwrap(), ["archive", "billing", "support"], "{}", t.backend());
        assert_eq!(escalations::agents(db, false).await.unwrap(), ["zeta"], "{}", t.backend());
        if t.backend() == "sqlite" {
            let plan: Vec<(i64, i64, i64, String)> = db
                .fetch_all(Sql::with_args(
                    "EXPLAIN QUERY PLAN SELECT MIN(agent) FROM escalations WHERE status = $1 AND agent > $2",
                    vec!["open".into(), "a".into()],
                ))
                .await
                .unwrap();
            assert!(plan.iter().any(|r| r.3.contains("COVERING INDEX escalations_status_agent")), "{plan:?}");
        }
        t.cleanup().await;
    }
}

#[tokio::test]
async fn postgres_reports_the_write_settings_that_serve_gives_advice_on_and_sqlite_has_none() {
    for t in TestDb::each_backend().await {
        let settings = store::postgres_settings::read(&t.db).await.expect("read the settings");
        match t.backend() {
            "sqlite" => assert_eq!(settings, None),
            _ => {
                let settings = settings.expect("PostgreSQL has them");
                // The server's own values, whatever they are: a size in MB, a time in s.
                assert!(settings.max_wal_size_mb >= 2, "{settings:?}");
                assert!(settings.checkpoint_timeout_s >= 30, "{settings:?}");
                // Reported in 8 kB pages, read in megabytes: the same as SHOW's "128MB".
                let shown: i64 =
                    t.db.fetch_one_value(store::sql::Sql::new(
                        "SELECT pg_size_bytes(current_setting('shared_buffers')) / (1024 * 1024)",
                    ))
                    .await
                    .unwrap();
                assert_eq!(settings.shared_buffers_mb, shown, "{settings:?}");
                assert!(
                    ["off", "on", "pglz", "lz4", "zstd"].contains(&settings.wal_compression.as_str()),
                    "{settings:?}"
                );
            }
        }
        t.cleanup().await;
    }
}
