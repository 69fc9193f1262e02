//! The trends page over real HTTP, on SQLite and on PostgreSQL: known runs, escalations
//! and approvals go into the database, and the server-rendered SVG charts must state
//! their figures (legend totals, per-bucket tooltips, the histogram's tail, p50/p95/p99)
//! for each range; an empty range shows the empty state; anonymous visitors are refused.

mod common;

use domain::access::{Role, Scope};
use domain::trends::{Range, Window};
use reqwest::StatusCode;
use store::sql::Sql;
use store::testing::TestDb;
use store::{now_ms, Db};

const MS: i64 = 1_000_000;

struct Run {
    id: &'static str,
    reason: &'static str,
    at_ms: i64,
    cost: f64,
    tool_calls: i64,
    deduped: i64,
    duplicates: i64,
    no_read: bool,
}

async fn insert_run(db: &Db, r: &Run) {
    let sql = "INSERT INTO runs (run_id, run_no, agent, run_trigger, terminal_reason, started_ns, cost, input_tokens, \
               output_tokens, cache_tokens, steps, tool_calls, trace_ids, duplicate_side_effects, deduped_calls, \
               completed_without_read, approval_violations, duplicates, updated_at) \
               VALUES ($1, (SELECT COALESCE(MAX(run_no), 0) + 1 FROM runs), 'billing-agent', 'user', $2, $3, $4, \
               0, 0, 0, 1, $5, '[]', $6, $7, $8, 0, '[]', 0)";
    db.execute(Sql::with_args(
        sql,
        vec![
            r.id.into(),
            r.reason.into(),
            (r.at_ms * MS).into(),
            r.cost.into(),
            r.tool_calls.into(),
            r.duplicates.into(),
            r.deduped.into(),
            r.no_read.into(),
        ],
    ))
    .await
    .unwrap();
    name_run(db, r.id).await;
}

/// Lists a run inserted by hand under its id, as the write path does: PostgreSQL keeps
/// the ids in `run_ids` (`runs` is partitioned by day); on SQLite that is a view.
async fn name_run(db: &Db, id: &str) {
    if db.backend() == store::dialect::Backend::Postgres {
        let sql = "INSERT INTO run_ids (run_id, run_no) SELECT run_id, run_no FROM runs WHERE run_id = $1";
        db.execute(Sql::with_args(sql, vec![id.into()])).await.unwrap();
    }
}

async fn insert_escalation(db: &Db, id: &str, opened_at: i64, resolved_at: Option<i64>) {
    let sql = "INSERT INTO escalations (id, run_id, reason, what_was_done, what_remains, from_api, from_trace, \
               status, opened_at, resolved_at) VALUES ($1, $2, 'other', '[]', '[]', $3, $4, $5, $6, $7)";
    let status = if resolved_at.is_some() { "resolved" } else { "open" };
    db.execute(Sql::with_args(
        sql,
        vec![
            id.into(),
            format!("run-{id}").into(),
            true.into(),
            false.into(),
            status.into(),
            opened_at.into(),
            resolved_at.into(),
        ],
    ))
    .await
    .unwrap();
}

async fn insert_approval(db: &Db, id: &str, status: &str, created_at: i64, decided_at: Option<i64>) {
    let sql = "INSERT INTO approvals (id, run_id, tool, arguments, display, payload_sha256, arguments_sha256, \
               side_effect, required_role, requested_by, status, created_at, expires_at, decided_at) \
               VALUES ($1, 'run-a1', 'send_email', '{}', '[]', 'x', 'y', 'irreversible', 'approver', 'agent-7', \
               $2, $3, $4, $5)";
    db.execute(Sql::with_args(
        sql,
        vec![id.into(), status.into(), created_at.into(), (created_at + 3_600_000).into(), decided_at.into()],
    ))
    .await
    .unwrap();
}

fn run(id: &'static str, reason: &'static str, at_ms: i64, cost: f64, tool_calls: i64) -> Run {
    Run { id, reason, at_ms, cost, tool_calls, deduped: 0, duplicates: 0, no_read: false }
}

/// Bucket `a` (hour 5 of the day window): three completed runs, one without a read tool,
/// one with two deduplicated calls and a duplicate side effect. Bucket `b` (hour 12): an
/// error with 75 tool calls, a step-limit stop with 30, and a run still going. Two days
/// ago: one more completed run, only in the 7- and 30-day ranges.
async fn seed(db: &Db, a: i64, b: i64) {
    let runs = [
        Run { no_read: true, ..run("r1", "completed", a, 0.10, 2) },
        Run { deduped: 2, duplicates: 1, ..run("r2", "completed", a + 1, 0.20, 3) },
        run("r3", "completed", a + 2, 0.30, 4),
        run("r4", "error", b, 1.50, 75),
        run("r5", "step_limit", b + 1, 0.50, 30),
        run("r6", "running", b + 2, 9.00, 1),
        run("r7", "completed", now_ms() - 48 * 3_600_000, 0.40, 6),
    ];
    for r in &runs {
        insert_run(db, r).await;
    }
    insert_escalation(db, "e1", a, Some(b)).await;
    insert_escalation(db, "e2", b, None).await;
    insert_approval(db, "ap1", "approved", a, Some(b)).await;
    insert_approval(db, "ap2", "expired", a, Some(b)).await;
    insert_approval(db, "ap3", "pending", a, None).await;
    insert_approval(db, "ap4", "cancelled", a, Some(b)).await;
    // Rows written behind the stores' backs: the trends' rollups and event counts are
    // added up from them.
    store::trends::rebuild_rollups(db).await.unwrap();
}

const CHARTS: [&str; 9] = [
    "chart-reasons",
    "chart-tool-calls",
    "chart-no-read",
    "chart-duplicates",
    "chart-cost",
    "chart-cost-agent",
    "chart-cost-model",
    "chart-escalations",
    "chart-approvals",
];

fn assert_has(html: &str, needle: &str) {
    // `<!>` is a hydration marker (Leptos puts one after dynamic text), not content.
    assert!(html.replace("<!>", "").contains(needle), "the page lacks {needle:?}");
}

#[tokio::test]
async fn the_charts_state_the_figures_of_each_range() {
    for t in TestDb::each_backend().await {
        let live = common::live(&t, &[("victor", &[Role::Viewer])], &[Scope::Read]).await;
        let victor = live.person("victor").await;

        let html = victor.page("/trends").await;
        assert_has(&html, "No runs, escalations or approvals in the last 24 hours");
        assert!(!html.contains("<svg"), "no charts without data");

        let w = Window::ending_at(Range::Day, now_ms());
        let (a, b) = (w.bucket_start(5) + 60_000, w.bucket_start(12) + 60_000);
        seed(&t.db, a, b).await;
        let (ta, tb) = (w.bucket_title(5), w.bucket_title(12));

        let html = victor.page("/trends?range=24h").await;
        for chart in CHARTS {
            assert_has(&html, &format!("data-testid=\"{chart}\""));
        }
        assert_eq!(html.matches("role=\"img\"").count(), CHARTS.len());
        assert_has(&html, "6 runs started in the last 24 hours");
        assert_has(&html, "aria-current=\"page\" data-range=\"24h\"");

        // termination reasons: legend totals and a per-bucket tooltip
        assert_has(&html, "completed: 3 runs");
        assert_has(&html, "error: 1 run<");
        assert_has(&html, "step limit: 1 run<");
        assert_has(&html, "running: 1 run<");
        assert_has(&html, &format!("{ta}: completed 3 runs"));
        assert_has(&html, &format!("{tb}: error 1 run"));

        // tool calls per finished run (the running one is left out), tail bins included
        assert_has(&html, "finished runs: 5 runs");
        assert_has(&html, "p50: 4<");
        assert_has(&html, "p99: 75<");
        assert_has(&html, "max: 75<");
        assert_has(&html, "data-bin=\"21–50 tool calls\" data-value=\"1\"");
        assert_has(&html, "data-bin=\"51–100 tool calls\" data-value=\"1\"");
        assert!(!html.contains("data-bin=\"101+ tool calls\""), "an empty bin draws no bar");

        // one of three completed runs in bucket a without a read tool
        assert_has(&html, "completed without a read tool: 33.3 %");
        assert_has(&html, &format!("{ta}: completed without a read tool 33.3 %"));

        assert_has(&html, "deduplicated calls: 2 calls");
        assert_has(&html, "duplicate side effects: 1 call<");

        // cost per finished run: 0.10 0.20 0.30 0.50 1.50 → p50 0.30, p95 and p99 1.50
        assert_has(&html, "p50: 0.3000 USD");
        assert_has(&html, "p95: 1.50 USD");
        assert_has(&html, "p99: 1.50 USD");
        assert_has(&html, &format!("{tb}: p99 1.50 USD"));

        assert_has(&html, "opened: 2 escalations");
        assert_has(&html, "resolved: 1 escalation<");
        assert_has(&html, &format!("{tb}: resolved 1 escalation"));

        // cancelled requests are neither decided nor expired
        assert_has(&html, "requested: 4 approvals");
        assert_has(&html, "decided: 1 approval<");
        assert_has(&html, "expired: 1 approval<");

        // the axes carry their units
        for unit in ["runs", "%", "calls", "USD", "escalations", "approvals", "hour (UTC)", "tool calls per run"] {
            assert_has(&html, &format!(">{unit}</text>"));
        }

        let week = victor.page("/trends?range=7d").await;
        assert_has(&week, "7 runs started in the last 7 days");
        assert_has(&week, "completed: 4 runs");
        assert_has(&week, "aria-current=\"page\" data-range=\"7d\"");
        assert_has(&week, "6-hour bucket (UTC)");
        let month = victor.page("/trends?range=30d").await;
        assert_has(&month, "7 runs started in the last 30 days");
        assert_has(&month, "day (UTC)");

        t.cleanup().await;
    }
}

/// The `href`s of the links around the marks of chart `testid` of series `series`, as the
/// browser reads them.
fn mark_links(html: &str, testid: &str, series: &str) -> Vec<String> {
    let start = html.find(&format!("data-testid=\"{testid}\"")).expect("the chart");
    let chart = &html[start..start + html[start..].find("</svg>").unwrap()];
    chart
        .split("<a href=\"")
        .skip(1)
        .filter(|part| part.split("</a>").next().unwrap_or("").contains(&format!("data-series=\"{series}\"")))
        .map(|part| part.split('"').next().unwrap().replace("&amp;", "&"))
        .collect()
}

async fn insert_agent_run(db: &Db, id: &str, agent: &str, model: Option<&str>, reason: &str, at_ms: i64, cost: f64) {
    let sql = "INSERT INTO runs (run_id, run_no, agent, model, run_trigger, terminal_reason, started_ns, cost, \
               input_tokens, output_tokens, cache_tokens, steps, tool_calls, trace_ids, duplicate_side_effects, \
               deduped_calls, completed_without_read, approval_violations, duplicates, updated_at) \
               VALUES ($1, (SELECT COALESCE(MAX(run_no), 0) + 1 FROM runs), $2, $3, 'user', $4, $5, $6, \
               0, 0, 0, 1, 1, '[]', 0, 0, FALSE, 0, '[]', 0)";
    db.execute(Sql::with_args(
        sql,
        vec![id.into(), agent.into(), model.into(), reason.into(), (at_ms * MS).into(), cost.into()],
    ))
    .await
    .unwrap();
    name_run(db, id).await;
}

#[tokio::test]
async fn cost_by_agent_and_model_and_an_agent_filter_with_bars_that_open_their_runs() {
    for t in TestDb::each_backend().await {
        let db = &t.db;
        let live = common::live(&t, &[("victor", &[Role::Viewer])], &[Scope::Read]).await;
        let victor = live.person("victor").await;
        let w = Window::ending_at(Range::Day, now_ms());
        let (a, b) = (w.bucket_start(5) + 60_000, w.bucket_start(12) + 60_000);
        insert_agent_run(db, "run-bill", "billing-agent", Some("gpt-4o"), "completed", a, 0.30).await;
        insert_agent_run(db, "run-help", "support-bot", Some("claude-3"), "completed", a + 1, 1.20).await;
        insert_agent_run(db, "run-old", "support-bot", None, "error", b, 0.50).await;
        store::trends::rebuild_rollups(db).await.unwrap();

        let html = victor.page("/trends?range=24h").await.replace("<!>", "");
        assert_has(&html, "support-bot: 1.70 USD");
        assert_has(&html, "billing-agent: 0.3000 USD");
        assert_has(&html, "claude-3: 1.20 USD");
        assert_has(&html, "gpt-4o: 0.3000 USD");
        assert_has(&html, "model not recorded: 0.5000 USD");
        assert_has(&html, &format!("{}: support-bot 1.20 USD (open the runs)", w.bucket_title(5)));

        // A bar opens exactly the runs it counts.
        let listed = |page: &str| -> Vec<&str> {
            ["run-bill", "run-help", "run-old"].into_iter().filter(|r| page.contains(&format!("/runs/{r}\""))).collect()
        };
        let agent_bar = mark_links(&html, "chart-cost-agent", "agent:support-bot");
        assert_eq!(agent_bar.len(), 2, "one per bucket with a cost: {agent_bar:?}");
        assert!(agent_bar[0].starts_with("/runs?agent=support-bot&sort=cost&since="), "{agent_bar:?}");
        assert_eq!(listed(&victor.page(&agent_bar[0]).await), ["run-help"]);
        let model_bar = mark_links(&html, "chart-cost-model", "model:claude-3");
        assert_eq!(listed(&victor.page(&model_bar[0]).await), ["run-help"]);
        assert!(mark_links(&html, "chart-cost-model", "model-none").is_empty(), "nothing to filter by");
        let error_bar = mark_links(&html, "chart-reasons", "error");
        let runs_page = victor.page(&error_bar[0]).await;
        assert_eq!(listed(&runs_page), ["run-old"]);
        assert!(runs_page.contains("data-testid=\"time-filter\""), "the run list says it is limited in time");
        let completed = mark_links(&html, "chart-reasons", "completed");
        assert_eq!(listed(&victor.page(&completed[0]).await), ["run-bill", "run-help"]);

        // One agent's figures: its runs only, and its links keep it.
        let one = victor.page("/trends?range=24h&agent=support-bot").await.replace("<!>", "");
        assert_has(&one, "2 runs of support-bot started in the last 24 hours");
        assert_has(&one, "completed: 1 run<");
        assert!(!one.contains("billing-agent: "), "no other agent's cost");
        assert_has(&one, "<option value=\"support-bot\" selected");
        assert_has(&one, "href=\"/trends?range=7d&amp;agent=support-bot\"");
        let completed = mark_links(&one, "chart-reasons", "completed");
        assert!(completed[0].contains("agent=support-bot"), "{completed:?}");
        assert_eq!(listed(&victor.page(&completed[0]).await), ["run-help"]);
        assert_has(&one, "Calls the ledger stopped are counted per hour for every agent together");
        let nobody = victor.page("/trends?range=24h&agent=nobody").await.replace("<!>", "");
        assert_has(&nobody, "No runs, escalations or approvals of nobody in the last 24 hours");
        t.cleanup().await;
    }
}

#[tokio::test]
async fn anonymous_visitors_cannot_see_trends() {
    for t in TestDb::each_backend().await {
        let live = common::live(&t, &[], &[Scope::Read]).await;
        let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
        let res = http.get(format!("{}/trends?range=7d", live.base)).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::SEE_OTHER);
        assert_eq!(res.headers()[reqwest::header::LOCATION], "/login?next=/trends%3Frange%3D7d");
        let res = http
            .post(format!("{}/fn/load_trends", live.base))
            .header("sec-fetch-site", "same-origin")
            .form(&[("range", "24h")])
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
        t.cleanup().await;
    }
}

#[tokio::test]
async fn ingest_keeps_each_runs_main_model_for_the_cost_by_model_and_the_run_list() {
    use common::spans::{ingest, kv, span_at};
    for t in TestDb::each_backend().await {
        let db = &t.db;
        let start = ((now_ms() - 60_000) as u64) * 1_000_000;
        let step = |id: u8, model: &str| {
            span_at(
                9,
                id,
                Some(1),
                "chat",
                start + u64::from(id) * 1_000_000,
                vec![kv("gen_ai.operation.name", "chat"), kv("gen_ai.request.model", model)],
            )
        };
        let root = span_at(
            9,
            1,
            None,
            "agent.run",
            start,
            vec![kv("run.id", "run-models"), kv("run.terminal_reason", "completed")],
        );
        ingest(db, vec![root, step(2, "gpt-4o-mini"), step(3, "claude-3-haiku"), step(4, "gpt-4o-mini")]).await;
        let q = domain::canonical::QueryParams { model: Some("gpt-4o-mini".into()), ..Default::default() };
        let q = store::runs::resolve_search(db, &q.into_query(chrono::Utc::now()).unwrap()).await.unwrap();
        let page = store::runs::list(db, &q).await.unwrap();
        assert_eq!(page.runs.iter().map(|r| r.run_id.as_str()).collect::<Vec<_>>(), ["run-models"], "{}", t.backend());
        let other = domain::canonical::QueryParams { model: Some("claude-3-haiku".into()), ..Default::default() };
        let other = store::runs::resolve_search(db, &other.into_query(chrono::Utc::now()).unwrap()).await.unwrap();
        assert!(store::runs::list(db, &other).await.unwrap().runs.is_empty(), "only the main model");
        let w = Window::ending_at(Range::Day, now_ms());
        let trends = domain::trends::compute(w, &store::trends::inputs(db, &w).await.unwrap());
        assert_eq!(trends.cost_by_model[0].key, "model:gpt-4o-mini");
        t.cleanup().await;
    }
}

/// The spans of a run of `agent` with one model call of `model` (1,000 input and 100
/// output tokens) and a tool call, started `ago_ms` ago; with its root span saying it
/// completed when `done`, else without one (still going).
fn agent_run(
    trace: u8,
    run: Option<&str>,
    agent: &str,
    model: &str,
    ago_ms: i64,
    done: bool,
) -> Vec<opentelemetry_proto::tonic::trace::v1::Span> {
    use common::spans::{kv, kv_i64, span_at};
    let start = ((now_ms() - ago_ms) as u64) * 1_000_000;
    let named = |mut attributes: Vec<opentelemetry_proto::tonic::common::v1::KeyValue>| {
        attributes.push(kv("gen_ai.agent.name", agent));
        attributes.extend(run.map(|r| kv("run.id", r)));
        attributes
    };
    let mut spans = vec![
        span_at(
            trace,
            2,
            Some(1),
            "chat",
            start + 1_000_000,
            named(vec![
                kv("gen_ai.operation.name", "chat"),
                kv("gen_ai.request.model", model),
                kv_i64("gen_ai.usage.input_tokens", 1_000),
                kv_i64("gen_ai.usage.output_tokens", 100),
            ]),
        ),
        span_at(trace, 3, Some(1), "tool lookup", start + 2_000_000, named(vec![kv("tool.name", "lookup")])),
    ];
    if done {
        spans.push(span_at(trace, 1, None, "agent.run", start, named(vec![kv("run.terminal_reason", "completed")])));
    }
    spans
}

/// The rollups the writes kept, and what a rebuild from the runs makes of the same runs:
/// they must be equal, day by day of the runs' arrival; returns them added up.
async fn assert_rollups_match_the_runs(db: &Db, step: &str) -> domain::trends::rollup::Rollup {
    let kept = store::trends::all_rows(db).await.unwrap();
    store::trends::rebuild_rollups(db).await.unwrap();
    let rebuilt = store::trends::all_rows(db).await.unwrap();
    assert_eq!(kept, rebuilt, "after {step}");
    kept.summed()
}

#[tokio::test]
async fn every_write_keeps_the_rollups_equal_to_a_count_of_the_runs() {
    use common::spans::{ingest, kv, span_at};
    use domain::trends::rollup::ALL_AGENTS;
    for t in TestDb::each_backend().await {
        let db = &t.db;
        // A new run, still going.
        ingest(db, agent_run(1, Some("run-a"), "billing-agent", "gpt-4o", 60_000, false)).await;
        let kept = assert_rollups_match_the_runs(db, "a new run").await;
        let running: i64 = kept.groups.iter().filter(|(k, _)| k.reason == "running").map(|(_, s)| s.runs).sum();
        assert_eq!(running, 3, "once per bucket size ({}): {kept:?}", t.backend());
        assert!(kept.values.is_empty(), "a running run is in no distribution");

        // It completes: it leaves "running" and enters the distributions.
        let start = ((now_ms() - 60_000) as u64) * 1_000_000;
        let end = vec![
            kv("gen_ai.agent.name", "billing-agent"),
            kv("run.id", "run-a"),
            kv("run.terminal_reason", "completed"),
        ];
        ingest(db, vec![span_at(1, 1, None, "agent.run", start, end)]).await;
        let kept = assert_rollups_match_the_runs(db, "a run that completed").await;
        let running: i64 = kept.groups.iter().filter(|(k, _)| k.reason == "running").map(|(_, s)| s.runs).sum();
        assert_eq!(running, 0);
        assert!(kept.values.keys().any(|k| k.scope == "billing-agent"));
        assert!(kept.values.keys().any(|k| k.scope == ALL_AGENTS));

        // A trace stored under its own id names its run later: it moves, its old run goes.
        ingest(db, agent_run(2, None, "support-bot", "claude-3-haiku", 120_000, true)).await;
        assert_rollups_match_the_runs(db, "a trace of its own").await;
        let start = ((now_ms() - 120_000) as u64) * 1_000_000;
        ingest(db, vec![span_at(2, 9, Some(1), "late", start + 5_000_000, vec![kv("run.id", "run-b")])]).await;
        let kept = assert_rollups_match_the_runs(db, "a trace that moved").await;
        let runs: i64 = kept.groups.iter().filter(|(k, _)| k.period_ms == 3_600_000).map(|(_, s)| s.runs).sum();
        assert_eq!(runs, 2, "the moved trace's old run is no longer counted");

        // A price changes: the recompute moves the runs' costs.
        let before: i64 = kept.groups.values().map(|s| s.cost_nano).sum();
        let price = domain::pricing::ModelPrice {
            pattern: "gpt-4o*".into(),
            valid_from: chrono::NaiveDate::from_ymd_opt(2020, 1, 1).unwrap(),
            input: 1_000.0,
            output: 1_000.0,
            cache_read: None,
            cache_write: None,
            reasoning: None,
            source: domain::pricing::PriceSource::Admin,
        };
        let rules = domain::derive::Rules {
            prices: domain::pricing::PriceTable::with_overrides([price]),
            ..Default::default()
        };
        let done = store::recompute::recompute(db, &rules, &Default::default(), 1).await.unwrap();
        assert!(done.changed >= 1);
        let kept = assert_rollups_match_the_runs(db, "a recompute").await;
        assert!(kept.groups.values().map(|s| s.cost_nano).sum::<i64>() > before, "the new price counts");

        // Retention: a run forty days old goes, and so does everything it counted.
        ingest(db, agent_run(3, Some("run-old"), "billing-agent", "gpt-4o", 40 * 86_400_000, true)).await;
        assert_rollups_match_the_runs(db, "an old run").await;
        assert_eq!(store::retention::apply(db, 30, 7).await.unwrap().runs, 1);
        let kept = assert_rollups_match_the_runs(db, "retention").await;
        let runs: i64 = kept.groups.iter().filter(|(k, _)| k.period_ms == 86_400_000).map(|(_, s)| s.runs).sum();
        assert_eq!(runs, 2);
        let oldest = now_ms() - 31 * 86_400_000;
        for table in ["trend_runs", "trend_values"] {
            let sql = Sql::with_args(format!("SELECT COUNT(*) FROM {table} WHERE start_ms < $1"), vec![oldest.into()]);
            assert_eq!(db.fetch_one_value::<i64>(sql).await.unwrap(), 0, "no {table} row left of the deleted run");
        }
        t.cleanup().await;
    }
}

/// The event counts the stores kept, and what a recount of the stored escalations and
/// approvals makes of them: they must be equal. Returns the counts of every agent in
/// hour buckets, by kind.
async fn assert_events_match_the_rows(db: &Db, step: &str) -> std::collections::BTreeMap<(String, String), i64> {
    let kept = store::trends::all_event_rows(db).await.unwrap();
    store::trends::rebuild_rollups(db).await.unwrap();
    let recounted = store::trends::all_event_rows(db).await.unwrap();
    assert_eq!(kept, recounted, "after {step}");
    let mut hourly = std::collections::BTreeMap::new();
    for (k, n) in &kept.0 {
        if k.period_ms == 3_600_000 {
            *hourly.entry((k.scope.clone(), k.kind.as_str().to_string())).or_default() += n;
        }
    }
    hourly
}

/// Every way an escalation or approval changes state, through the agent API, the
/// approvers' server functions, expiry and ingest, keeps the trends' event counts equal
/// to a count of the stored rows, per bucket size and agent.
#[tokio::test]
async fn every_change_of_an_escalation_or_an_approval_keeps_its_count() {
    use common::spans::{ingest, kv, span_at};
    use domain::approvals::rules::{ApprovalRule, RuleAction, RuleMode};
    use domain::canonical::SideEffect;
    use domain::escalations::Resolution;
    use domain::policy::ToolPolicy;
    use reqwest::Method;
    use serde_json::{json, Value};
    for t in TestDb::each_backend().await {
        let db = &t.db;
        let mut policy = ToolPolicy::class("refund", SideEffect::Irreversible);
        policy.requires_approval = true;
        policy.on_expiry = domain::approvals::OnExpiry::Escalate;
        store::policies::upsert(db, &policy).await.unwrap();
        let small = ApprovalRule {
            name: "small".into(),
            tool_pattern: "refund".into(),
            position: 0,
            expression: "args.amount < 100".into(),
            action: RuleAction::AutoApprove,
            approvers: 1,
            role: None,
            reason: None,
            mode: RuleMode::Enforce,
        };
        store::approval_rules::upsert(db, &small, "admin").await.unwrap();
        let approver: &[Role] = &[Role::Approver, Role::Viewer];
        let s = common::live(&t, &[("alice", approver)], &[Scope::Approvals, Scope::Escalations]).await;
        let alice = s.person("alice").await;
        let file = |key: &str, amount: i64, expires_in: Option<i64>| {
            let mut body = json!({"run_id": "run-ap", "step_index": 1, "tool": "refund", "idempotency_key": key,
                                  "agent": "billing-agent", "arguments": {"order": "o-1", "amount": amount}});
            if let Some(seconds) = expires_in {
                body["expires_in"] = json!(seconds);
            }
            s.api(Method::POST, "/api/v1/approvals", Some(body), &s.agent)
        };
        let decide = |created: &Value, decision: &'static str| {
            let (id, sha) =
                (created["id"].as_str().unwrap().to_string(), created["payload_sha256"].as_str().unwrap().to_string());
            let alice = &alice;
            let form =
                [("id", id), ("decision", decision.into()), ("payload_sha256", sha), ("reason", "wrong order".into())];
            async move {
                let form: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
                alice.call("decide_approval", &form).await
            }
        };
        let count = |counts: &std::collections::BTreeMap<(String, String), i64>, scope: &str, kind: &str| {
            counts.get(&(scope.to_string(), kind.to_string())).copied().unwrap_or(0)
        };

        // A rule decides one as it is filed; a person approves one and denies another.
        let (status, auto) = file("k-auto", 40, None).await;
        assert_eq!((status, auto["status"].as_str()), (StatusCode::CREATED, Some("approved")), "{auto}");
        let (_, approved) = file("k-approve", 500, None).await;
        assert_eq!(decide(&approved, "approve").await.0, StatusCode::OK);
        let (_, denied) = file("k-deny", 600, None).await;
        assert_eq!(decide(&denied, "deny").await.0, StatusCode::OK);
        // One is cancelled by its agent; one expires and opens an escalation.
        let (_, cancelled) = file("k-cancel", 700, None).await;
        let cancel = format!("/api/v1/approvals/{}/cancel", cancelled["id"].as_str().unwrap());
        assert_eq!(s.api(Method::POST, &cancel, None, &s.agent).await.0, StatusCode::OK);
        let (_, expiring) = file("k-expire", 800, Some(1)).await;
        tokio::time::sleep(std::time::Duration::from_millis(1300)).await;
        let poll = format!("/api/v1/approvals/{}", expiring["id"].as_str().unwrap());
        assert_eq!(s.api(Method::GET, &poll, None, &s.agent).await.1["status"], "expired");
        let counts = assert_events_match_the_rows(db, "approvals").await;
        for scope in ["", "billing-agent"] {
            assert_eq!(count(&counts, scope, "approval_requested"), 5, "{scope:?} {counts:?} ({})", t.backend());
            assert_eq!(count(&counts, scope, "approval_decided"), 3, "{scope:?} {counts:?}");
            assert_eq!(count(&counts, scope, "approval_expired"), 1, "{scope:?} {counts:?}");
        }
        for scope in ["", "billing-agent"] {
            assert_eq!(count(&counts, scope, "escalation_opened"), 1, "the expiry's escalation: {counts:?}");
        }

        // A run's traces open one; the agent's report naming another agent merges into it
        // and moves its count to that agent.
        let start = ((now_ms() - 60_000) as u64) * 1_000_000;
        let root = vec![
            kv("gen_ai.agent.name", "support-bot"),
            kv("run.id", "run-esc"),
            kv("run.terminal_reason", "escalated"),
        ];
        ingest(db, vec![span_at(7, 1, None, "agent.run", start, root)]).await;
        let counts = assert_events_match_the_rows(db, "an escalation from traces").await;
        assert_eq!(count(&counts, "support-bot", "escalation_opened"), 1, "{counts:?}");
        let report = json!({"run_id": "run-esc", "reason": "insufficient_permission", "agent": "support-bot-v2",
                            "what_was_done": [], "what_remains": ["refund order 77"]});
        let (status, merged) = s.api(Method::POST, "/api/v1/escalations", Some(report), &s.agent).await;
        assert_eq!(status, StatusCode::OK, "merged: {merged}");
        let counts = assert_events_match_the_rows(db, "a merge naming another agent").await;
        assert_eq!(count(&counts, "support-bot", "escalation_opened"), 0, "{counts:?}");
        assert_eq!(count(&counts, "support-bot-v2", "escalation_opened"), 1, "{counts:?}");
        assert_eq!(count(&counts, "", "escalation_opened"), 2, "{counts:?}");

        // Filed through the API, then claimed and resolved.
        let report = json!({"run_id": "run-api", "reason": "low_confidence", "agent": "billing-agent",
                            "what_was_done": [], "what_remains": ["check the refund"]});
        let (status, filed) = s.api(Method::POST, "/api/v1/escalations", Some(report), &s.agent).await;
        assert_eq!(status, StatusCode::CREATED, "{filed}");
        let id = filed["id"].as_str().unwrap();
        store::escalations::claim(db, id, "alice", None).await.unwrap();
        store::escalations::resolve(db, id, "alice", Resolution::CompletedByHuman, "refunded", None, false, None)
            .await
            .unwrap();
        let counts = assert_events_match_the_rows(db, "an escalation resolved").await;
        assert_eq!(count(&counts, "billing-agent", "escalation_opened"), 2, "the expiry's and this: {counts:?}");
        assert_eq!(count(&counts, "billing-agent", "escalation_resolved"), 1, "{counts:?}");
        assert_eq!(count(&counts, "", "escalation_opened"), 3, "{counts:?}");

        // The page states them, of every agent and of one.
        let page = alice.page("/trends?range=24h").await;
        assert_has(&page, "opened: 3 escalations");
        assert_has(&page, "resolved: 1 escalation<");
        assert_has(&page, "requested: 5 approvals");
        assert_has(&page, "decided: 3 approvals");
        assert_has(&page, "expired: 1 approval<");
        let page = alice.page("/trends?range=7d&agent=support-bot-v2").await;
        assert_has(&page, "opened: 1 escalation<");
        t.cleanup().await;
    }
}
