//! Reading runs: the filtered, keyset-paginated list and one run in full.

use super::dialect::Backend;
use super::partitions::RUN_BY_ID;
use super::spans;
use super::sql::{Arg, Sql};
use super::{corrupt, from_ms, Db, StoreResult};
use domain::canonical::{
    CostSource, DuplicateView, RunCounts, RunDetail, RunFailure, RunSummary, SpanPanel, TerminalReason, Trigger,
    WaterfallSpan,
};
use domain::derive::{derive_run_with, Rules};
use domain::failure::{failure_of, SpanOutcome};
use domain::record as span_record;
pub use domain::run_query::{
    choose_lead, Cursor, FilterWindow, Lead, RunFlag, RunQuery, RunSort, SearchWindow, SortKey, SEARCH_WINDOW,
};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// One page of runs and the cursor for the next.
#[derive(Debug, Clone, PartialEq)]
pub struct RunPage {
    pub runs: Vec<RunSummary>,
    pub next: Option<Cursor>,
    /// When the search read only the newest runs that called the tool: where they start
    /// and how many they are. The runs it names by id are all read.
    pub searched: Option<SearchWindow>,
    /// When a list without a search term read only the newest runs of one of its
    /// conditions ([`FilterWindow`], `since_ns` given): which, where they start and how
    /// many they are.
    pub filtered: Option<FilterWindow>,
}

#[derive(Debug, sqlx::FromRow)]
struct RunRow {
    run_id: String,
    agent: Option<String>,
    run_trigger: String,
    terminal_reason: String,
    started_ns: i64,
    ended_ns: Option<i64>,
    wall_clock_ms: Option<i64>,
    cost: f64,
    cost_source: String,
    unpriced_models: Option<String>,
    possible_duplicates: i64,
    input_tokens: i64,
    output_tokens: i64,
    cache_tokens: i64,
    steps: i64,
    tool_calls: i64,
    trace_ids: String,
    duplicate_side_effects: i64,
    deduped_calls: i64,
    completed_without_read: bool,
    approval_violations: i64,
    escalation_reason: Option<String>,
    duplicates: String,
}

const RUN_COLUMNS: &str = "run_id, agent, run_trigger, terminal_reason, started_ns, ended_ns, wall_clock_ms, cost, \
    cost_source, unpriced_models, possible_duplicates, \
    input_tokens, output_tokens, cache_tokens, steps, tool_calls, trace_ids, duplicate_side_effects, deduped_calls, \
    completed_without_read, approval_violations, escalation_reason, duplicates";

impl RunRow {
    fn summary(&self) -> Result<RunSummary, sqlx::Error> {
        Ok(RunSummary {
            run_id: self.run_id.clone(),
            agent: self.agent.clone(),
            trigger: Trigger::parse(&self.run_trigger).unwrap_or(Trigger::Unknown),
            terminal_reason: TerminalReason::parse(&self.terminal_reason).unwrap_or(TerminalReason::Running),
            started_at: (self.started_ns > 0).then(|| from_ms(self.started_ns / 1_000_000)),
            ended_at: self.ended_ns.map(|ns| from_ms(ns / 1_000_000)),
            wall_clock_ms: self.wall_clock_ms,
            cost: self.cost,
            cost_source: CostSource::parse(&self.cost_source).unwrap_or(CostSource::Agent),
            unpriced_models: self.unpriced_models.as_deref().map(super::stored_json).transpose()?.unwrap_or_default(),
            input_tokens: self.input_tokens,
            output_tokens: self.output_tokens,
            cache_tokens: self.cache_tokens,
            steps: self.steps,
            tool_calls: self.tool_calls,
            trace_ids: super::stored_json(&self.trace_ids)?,
            duplicate_side_effects: self.duplicate_side_effects,
            possible_duplicates: self.possible_duplicates,
            deduped_calls: self.deduped_calls,
            completed_without_read: self.completed_without_read,
            approval_violations: self.approval_violations,
            escalation_reason: self.escalation_reason.clone(),
        })
    }
}

/// How a statement spells the filtered columns: `runs` alone, or `run_tools rt` (whose
/// started_ns and terminal_reason are copies of the run's) with `runs r` joined or not.
struct Cols {
    /// Prefix of the columns only `runs` has ("" or "r.").
    runs: &'static str,
    started: &'static str,
    reason: &'static str,
    run_id: &'static str,
}

const RUNS: Cols = Cols { runs: "", started: "started_ns", reason: "terminal_reason", run_id: "run_id" };
const TOOLS_JOINED: Cols =
    Cols { runs: "r.", started: "rt.started_ns", reason: "rt.terminal_reason", run_id: "rt.run_id" };
const TOOLS_ALONE: Cols =
    Cols { runs: "", started: "rt.started_ns", reason: "rt.terminal_reason", run_id: "rt.run_id" };

/// The sort value as `c` spells it.
fn key_sql(sort: RunSort, c: &Cols) -> String {
    match sort {
        RunSort::Started => c.started.to_string(),
        RunSort::Cost => format!("{}cost", c.runs),
        RunSort::Duration => format!("COALESCE({}wall_clock_ms, -1)", c.runs),
        RunSort::Duplicates => format!("{}duplicate_side_effects", c.runs),
    }
}

/// Appends ` AND <condition>` for every filter given except the search term; `reason`
/// and `after` are passed so the counts can leave them out.
fn push_filters(sql: &mut Sql, q: &RunQuery, reason: Option<TerminalReason>, after: Option<&Cursor>, c: &Cols) {
    if let Some(r) = reason {
        let p = sql.arg(r.as_str());
        sql.push(&format!(" AND {} = {p}", c.reason));
    }
    match (&q.agent_names, &q.agent) {
        // The names the filter matches, resolved beforehand: an indexed equality.
        (Some(names), _) if names.is_empty() => {
            sql.push(" AND 1 = 0");
        }
        (Some(names), _) => {
            sql.push(&format!(" AND {}agent IN ", c.runs));
            sql.list(names.iter().map(String::as_str));
        }
        // Part of the name, in any case: `billing` finds `Billing-Agent`.
        (None, Some(agent)) => {
            let p = sql.arg(format!("%{}%", like_escape(&agent.to_lowercase())));
            sql.push(&format!(" AND LOWER({}agent) LIKE {p} ESCAPE '\\'", c.runs));
        }
        (None, None) => {}
    }
    if let Some(t) = q.trigger {
        let p = sql.arg(t.as_str());
        sql.push(&format!(" AND {}run_trigger = {p}", c.runs));
    }
    if let Some(model) = &q.model {
        let p = sql.arg(model.clone());
        sql.push(&format!(" AND {}model = {p}", c.runs));
    }
    if let Some(since) = q.since_ns {
        let p = sql.arg(since);
        sql.push(&format!(" AND {} >= {p}", c.started));
    }
    if let Some(until) = q.until_ns {
        let p = sql.arg(until);
        sql.push(&format!(" AND {} < {p}", c.started));
    }
    match q.flag {
        None => {}
        Some(RunFlag::Duplicates) => {
            sql.push(&format!(" AND {}duplicate_side_effects > 0", c.runs));
        }
        Some(RunFlag::NoRead) => {
            sql.push(&format!(" AND {}completed_without_read = TRUE", c.runs));
        }
        Some(RunFlag::ApprovalViolation) => {
            sql.push(&format!(" AND {}approval_violations > 0", c.runs));
        }
    }
    if let Some(cursor) = after {
        let value = match (cursor.key, q.sort) {
            (SortKey::Float(v), _) => Arg::from(v),
            (SortKey::Int(v), RunSort::Cost) => Arg::from(v as f64),
            (SortKey::Int(v), _) => Arg::from(v),
        };
        let key = key_sql(q.sort, c);
        let below = sql.arg(value.clone());
        let equal = sql.arg(value);
        let id = sql.arg(cursor.run_id.clone());
        sql.push(&format!(" AND ({key} < {below} OR ({key} = {equal} AND {} < {id}))", c.run_id));
    }
}

/// `text` with LIKE's wildcards taken literally (escaped with a backslash).
fn like_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for ch in text.chars() {
        if matches!(ch, '%' | '_' | '\\') {
            out.push('\\');
        }
        out.push(ch);
    }
    out
}

/// The numbers of the runs a search term names by id: as run id, trace id, idempotency
/// key or external resource id. Each arm is one indexed lookup. (Tool names are looked up
/// in `run_tools`.) The term is tried as typed and in lower case (hex trace ids are
/// stored in lower case).
fn push_runs_named_by(sql: &mut Sql, term: &str, backend: Backend) {
    let mut variants = vec![term.to_string()];
    if term.to_lowercase() != term {
        variants.push(term.to_lowercase());
    }
    for (i, variant) in variants.into_iter().enumerate() {
        if i > 0 {
            sql.push(" UNION ");
        }
        let t = sql.arg(variant);
        sql.push(&format!(
            "SELECT run_no FROM run_ids WHERE run_id = {t} \
             UNION SELECT run_no FROM trace_runs WHERE trace_id = {t} \
             UNION {}",
            backend.runs_with_term(&t)
        ));
    }
}

/// `runs` as the runs a search term names by id are read from it: by number, however
/// many runs the other filters pass. SQLite, which keeps no statistics here, would
/// otherwise walk every run of the filtered agent and test each against the few named
/// (200-400 ms at 10 million spans).
fn runs_named(backend: Backend) -> String {
    backend.indexed_by("runs", "runs_run_no")
}

/// Finds the stored spelling of a tool name the search term names in another case, so a
/// search for `Send_Email` finds the runs that called `send_email`; and the agent names
/// the agent filter matches (part of the name, any case), so the run list and its counts
/// read the agent index for those names instead of testing every run (200 ms at 150,000
/// runs on SQLite).
pub async fn resolve_search(db: &Db, q: &RunQuery) -> StoreResult<RunQuery> {
    resolve_search_within(db, q, SEARCH_WINDOW).await
}

/// [`resolve_search`] with a window of `window` runs, for the search
/// ([`RunQuery::tests_each_tool_run`]) and for filters no one index answers
/// ([`RunQuery::tests_each_run`]; `FILTER_WINDOW` is the search's size): finds where each
/// starts and, for the filters, their lead.
pub async fn resolve_search_within(db: &Db, q: &RunQuery, window: i64) -> StoreResult<RunQuery> {
    let mut q = q.clone();
    if let Some(agent) = &q.agent {
        let wanted = agent.to_lowercase();
        q.agent_names = Some(agents(db).await?.into_iter().filter(|a| a.to_lowercase().contains(&wanted)).collect());
    }
    if let Some(term) = q.term().map(str::to_string) {
        let sql = "SELECT tool_name FROM tools WHERE tool_name = $1 OR LOWER(tool_name) = LOWER($1) \
                   ORDER BY CASE WHEN tool_name = $1 THEN 0 ELSE 1 END LIMIT 1";
        let found: Option<String> = db.fetch_value(Sql::with_args(sql, vec![(&term).into()])).await?;
        q.search_tool = found.filter(|t| *t != term);
    }
    q.search_window = None;
    if q.tests_each_tool_run() {
        let since: Option<i64> = db.fetch_value(window_start_sql(&q, window)).await?;
        q.search_window = since.map(|since_ns| SearchWindow { since_ns, runs: window });
    }
    q.filter_window = None;
    if q.tests_each_run() {
        let mut probed = Vec::new();
        for lead in q.leads() {
            let sql = lead_window_start_sql(&q, &lead, window, db.backend());
            let since = db.fetch_all_planned_each_time::<(i64,)>(sql).await?.first().map(|(s,)| *s);
            let all_fit = since.is_none();
            probed.push((lead, since));
            if all_fit {
                // No lead can have fewer runs than this one's (fewer than the window).
                break;
            }
        }
        q.filter_window = choose_lead(probed).map(|(lead, since_ns)| FilterWindow { lead, since_ns, runs: window });
    }
    Ok(q)
}

/// `FROM runs` as a lead's runs are read, newest first, by its own index (named on
/// SQLite; planned for the lead's value on PostgreSQL, see
/// [`Db::fetch_all_planned_each_time`]), and the condition that picks them:
/// `(from, condition)`.
fn lead_sql(sql: &mut Sql, lead: &Lead, backend: Backend) -> (String, String) {
    let (index, condition) = match lead {
        Lead::Agent(name) => ("runs_agent_started", format!("agent = {}", sql.arg(name.clone()))),
        Lead::Trigger(t) => ("runs_trigger_started", format!("run_trigger = {}", sql.arg(t.as_str()))),
        Lead::Flag(RunFlag::Duplicates) => ("runs_flag_duplicates", "duplicate_side_effects > 0".to_string()),
        Lead::Flag(RunFlag::NoRead) => ("runs_flag_no_read", "completed_without_read = TRUE".to_string()),
        Lead::Flag(RunFlag::ApprovalViolation) => ("runs_flag_violations", "approval_violations > 0".to_string()),
        Lead::Newest => ("runs_started", "1 = 1".to_string()),
    };
    (backend.indexed_by("runs", index), condition)
}

/// The start of `lead`'s `window`-th newest run within the query's time range, if it
/// has that many: a walk of its index that stops there.
fn lead_window_start_sql(q: &RunQuery, lead: &Lead, window: i64, backend: Backend) -> Sql {
    let mut sql = Sql::new("");
    let (from, condition) = lead_sql(&mut sql, lead, backend);
    sql.push(&format!("SELECT started_ns FROM {from} WHERE {condition}"));
    push_filters(&mut sql, &time_range(q), None, None, &RUNS);
    push_nth_newest(&mut sql, "started_ns", window);
    sql
}

/// Appends the ordering that leaves the `window`-th newest row by `started` alone.
fn push_nth_newest(sql: &mut Sql, started: &str, window: i64) {
    let skip = window.max(1) - 1;
    sql.push(&format!(" ORDER BY {started} DESC LIMIT 1 OFFSET {skip}"));
}

/// Appends `FROM <the window's runs>`: the lead's runs from the window's start on, within
/// the time range, newest first, read by the lead's index and cut at a limit written into
/// the text (twice the window, so runs that started in the same nanosecond as its oldest
/// are not cut off; the start bounds the rows). The other conditions, the sort and the
/// page follow, over these rows alone.
fn push_window_runs(sql: &mut Sql, q: &RunQuery, window: &FilterWindow, backend: Backend) {
    let (from, condition) = lead_sql(sql, &window.lead, backend);
    sql.push(&format!(" FROM (SELECT * FROM {from} WHERE {condition}"));
    if let Some(since) = window.since_ns {
        let p = sql.arg(since);
        sql.push(&format!(" AND started_ns >= {p}"));
    }
    push_filters(sql, &time_range(q), None, None, &RUNS);
    sql.push(&format!(" ORDER BY started_ns DESC LIMIT {}) AS windowed", 2 * window.runs));
}

/// The start of the `window`-th newest run that called the searched tool within the
/// query's time range, if it has that many: an index-only walk of `run_tools_search` that
/// stops there.
fn window_start_sql(q: &RunQuery, window: i64) -> Sql {
    let mut sql = Sql::new("SELECT rt.started_ns FROM run_tools rt WHERE rt.tool_name = ");
    sql.bind(searched_tool(q, q.term().unwrap_or_default()));
    push_filters(&mut sql, &time_range(q), None, None, &TOOLS_ALONE);
    push_nth_newest(&mut sql, "rt.started_ns", window);
    sql
}

/// The query's time range alone.
fn time_range(q: &RunQuery) -> RunQuery {
    RunQuery { since_ns: q.since_ns, until_ns: q.until_ns, ..Default::default() }
}

/// The tool name a search term names, as stored.
fn searched_tool(q: &RunQuery, term: &str) -> String {
    q.search_tool.clone().unwrap_or_else(|| term.to_string())
}

/// Appends ` AND rt.started_ns >= <the window's start>` if the query has a window.
fn push_window_start(sql: &mut Sql, q: &RunQuery) {
    if let Some(window) = q.search_window {
        let p = sql.arg(window.since_ns);
        sql.push(&format!(" AND rt.started_ns >= {p}"));
    }
}

/// Appends `FROM <the searched tool's runs> rt [JOIN runs r] WHERE ...`, for filters to
/// follow. With a window, `rt` is the window's rows, newest first, under a limit written
/// into the text: without it PostgreSQL's plan made for any window start expects a third
/// of the tool's runs and reads every run the filter passes instead (a merge join over
/// all of an agent's runs). The limit is twice the window so runs that started in the
/// same nanosecond as its oldest are not cut off; the start bounds the rows.
fn push_tool_runs(sql: &mut Sql, q: &RunQuery, tool: &str, c: &Cols, backend: Backend) {
    let t = sql.arg(tool.to_string());
    let condition = match q.search_window {
        None => {
            sql.push(" FROM run_tools rt");
            format!(" WHERE rt.tool_name = {t}")
        }
        Some(window) => {
            sql.push(&format!(
                " FROM (SELECT rt.run_no, rt.run_id, rt.started_ns, rt.terminal_reason FROM run_tools rt \
                 WHERE rt.tool_name = {t}"
            ));
            push_window_start(sql, q);
            push_filters(sql, &time_range(q), None, None, &TOOLS_ALONE);
            sql.push(&format!(" ORDER BY rt.started_ns DESC LIMIT {}) AS rt", 2 * window.runs));
            " WHERE 1 = 1".to_string()
        }
    };
    if c.runs == "r." {
        sql.push(backend.join_run_of_each());
    }
    sql.push(&condition);
}

/// Every agent name runs carry, by a loose index scan: one `runs_agent_started` seek per
/// distinct name (a few), not a pass over every run.
pub async fn agents(db: &Db) -> StoreResult<Vec<String>> {
    let sql = "WITH RECURSIVE a(agent) AS (SELECT MIN(agent) FROM runs \
               UNION ALL SELECT (SELECT MIN(agent) FROM runs WHERE agent > a.agent) FROM a WHERE a.agent IS NOT NULL) \
               SELECT agent FROM a WHERE agent IS NOT NULL";
    let rows: Vec<(String,)> = db.fetch_all_planned_once(Sql::new(sql)).await?;
    Ok(rows.into_iter().map(|(a,)| a).collect())
}

/// The list statement. Without a search term: `runs` filtered and walked in sort order.
/// With one: the first page of the runs it names by id and the first page of the runs
/// that called it as a tool (walking `run_tools` newest first), each filtered, then the
/// page of their union in sort order; both arms stop after one page.
///
/// Every statement here is planned once per connection ([`Db::fetch_all_planned_once`]),
/// so its limits are written into it, not bound: a plan made without knowing its limit
/// expects a tenth of the rows, and for the search that was a hash join over every run
/// instead of a page read by number (ADR 0020).
fn list_sql(q: &RunQuery, limit: i64, backend: Backend) -> Sql {
    let mut sql = Sql::new("");
    let order = |c: &Cols| format!(" ORDER BY {} DESC, {} DESC", key_sql(q.sort, c), c.run_id);
    let page = |sql: &mut Sql| {
        sql.push(&format!(" LIMIT {limit}"));
    };
    let Some(term) = q.term() else {
        sql.push(&format!("SELECT {RUN_COLUMNS}"));
        match &q.filter_window {
            Some(window) => push_window_runs(&mut sql, q, window, backend),
            None if q.sort == RunSort::Duplicates => return duplicates_first_sql(q, limit),
            None => {
                sql.push(" FROM runs");
            }
        }
        sql.push(" WHERE 1 = 1");
        push_filters(&mut sql, q, q.terminal_reason, q.after.as_ref(), &RUNS);
        sql.push(&order(&RUNS));
        page(&mut sql);
        return sql;
    };
    sql.push(&format!(
        "SELECT {RUN_COLUMNS} FROM runs WHERE run_no IN (SELECT run_no FROM (SELECT run_no FROM {} WHERE run_no IN (",
        runs_named(backend)
    ));
    push_runs_named_by(&mut sql, term, backend);
    sql.push(")");
    push_filters(&mut sql, q, q.terminal_reason, q.after.as_ref(), &RUNS);
    sql.push(&order(&RUNS));
    page(&mut sql);
    let tools = if q.filters_on_runs() || q.sort != RunSort::Started { &TOOLS_JOINED } else { &TOOLS_ALONE };
    sql.push(") AS by_id UNION SELECT run_no FROM (SELECT rt.run_no AS run_no");
    push_tool_runs(&mut sql, q, &searched_tool(q, term), tools, backend);
    push_filters(&mut sql, q, q.terminal_reason, q.after.as_ref(), tools);
    sql.push(&order(tools));
    page(&mut sql);
    sql.push(") AS by_tool)");
    sql.push(&order(&RUNS));
    page(&mut sql);
    sql
}

/// The list sorted by duplicates, without a search term: one page of the runs with
/// duplicate side effects (their own partial index, `runs_duplicates_some`), one page of
/// the rest by run id (the run id's index: their duplicate count is 0 for all), then the
/// page of the two in sort order. No index holds every run by its duplicate count: it
/// cost the ingest writer a page write at a random place per run (migration 0035).
fn duplicates_first_sql(q: &RunQuery, limit: i64) -> Sql {
    let mut sql = Sql::new("");
    let arms = [
        ("duplicate_side_effects > 0", " ORDER BY duplicate_side_effects DESC, run_id DESC"),
        ("duplicate_side_effects = 0", " ORDER BY run_id DESC"),
    ];
    for (n, (only, order)) in arms.into_iter().enumerate() {
        if n > 0 {
            sql.push(" UNION ALL ");
        }
        sql.push(&format!("SELECT * FROM (SELECT {RUN_COLUMNS} FROM runs WHERE {only}"));
        push_filters(&mut sql, q, q.terminal_reason, q.after.as_ref(), &RUNS);
        sql.push(&format!("{order} LIMIT {limit}) AS arm{n}"));
    }
    sql.push(&format!(" ORDER BY duplicate_side_effects DESC, run_id DESC LIMIT {limit}"));
    sql
}

/// The counts statement: rows of (terminal reason, count) to be summed per reason, over
/// at most `limit` matching runs per arm. Each arm reads its rows from an index in the
/// subquery and stops at the limit, so a filter most runs match costs the same as one a
/// few match; the caller knows the counts stopped when they add up to more than it asked.
/// With a search term, the runs that called it as a tool are read from `run_tools`
/// (joining `runs` only when a filter needs it) and the runs it names by id are added
/// unless they were read there already.
fn counts_sql(q: &RunQuery, backend: Backend, limit: i64) -> Sql {
    let mut sql = Sql::new("");
    let up_to = |sql: &mut Sql| {
        sql.push(&format!(" LIMIT {limit}) AS matched GROUP BY reason"));
    };
    let Some(term) = q.term() else {
        // The reason as an expression, not the column: SQLite would otherwise walk every
        // run in `runs_reason_started` order instead of reading the few the filter's
        // index names (a flagged run's partial index, a trigger's range).
        sql.push("SELECT reason, COUNT(*) FROM (SELECT terminal_reason || '' AS reason");
        match &q.filter_window {
            Some(window) => push_window_runs(&mut sql, q, window, backend),
            None => {
                sql.push(" FROM runs");
            }
        }
        sql.push(" WHERE 1 = 1");
        push_filters(&mut sql, q, None, None, &RUNS);
        up_to(&mut sql);
        return sql;
    };
    let tool = searched_tool(q, term);
    let tools = if q.filters_on_runs() { &TOOLS_JOINED } else { &TOOLS_ALONE };
    sql.push(&format!(
        "SELECT reason, COUNT(*) FROM (SELECT {}terminal_reason AS reason",
        if q.filters_on_runs() { "r." } else { "rt." }
    ));
    push_tool_runs(&mut sql, q, &tool, tools, backend);
    push_filters(&mut sql, q, None, None, tools);
    up_to(&mut sql);
    let t = sql.arg(tool);
    sql.push(&format!(
        " UNION ALL SELECT reason, COUNT(*) FROM (SELECT terminal_reason AS reason FROM {} WHERE run_no IN (",
        runs_named(backend)
    ));
    push_runs_named_by(&mut sql, term, backend);
    sql.push(&format!(
        ") AND NOT EXISTS (SELECT 1 FROM run_tools rt WHERE rt.run_no = runs.run_no AND rt.tool_name = {t}"
    ));
    push_window_start(&mut sql, q);
    sql.push(")");
    push_filters(&mut sql, q, None, None, &RUNS);
    up_to(&mut sql);
    sql
}

pub async fn list(db: &Db, q: &RunQuery) -> StoreResult<RunPage> {
    list_resolved(db, &resolve_search(db, q).await?).await
}

/// A page of runs and the counts per reason for one query, its search resolved once
/// (the run list page shows both). The two statements run at once, on two connections:
/// where a filter must test each run of a search window, each costs about the same.
pub async fn list_and_counts(db: &Db, q: &RunQuery) -> StoreResult<(RunPage, RunCounts)> {
    list_and_counts_within(db, q, SEARCH_WINDOW, COUNT_LIMIT).await
}

/// [`list_and_counts`] with the search window and the counting limit given (tests use a
/// handful of runs).
pub async fn list_and_counts_within(
    db: &Db,
    q: &RunQuery,
    window: i64,
    count_limit: i64,
) -> StoreResult<(RunPage, RunCounts)> {
    let q = resolve_search_within(db, q, window).await?;
    tokio::try_join!(list_resolved(db, &q), counts_resolved(db, &q, count_limit))
}

/// Runs one of the run list's statements for `q` on PostgreSQL as its plan should be made:
/// once per connection (ADR 0020), or, reading a filter window, for the lead's value
/// (ADR 0022).
async fn fetch_planned_for<T: super::sql::FromBothRows>(db: &Db, q: &RunQuery, sql: Sql) -> StoreResult<Vec<T>> {
    Ok(match q.filter_window {
        Some(_) => db.fetch_all_planned_each_time(sql).await?,
        None => db.fetch_all_planned_once(sql).await?,
    })
}

async fn list_resolved(db: &Db, q: &RunQuery) -> StoreResult<RunPage> {
    let limit = q.limit.clamp(1, 500);
    let sql = list_sql(q, limit + 1, db.backend());
    let rows: Vec<RunRow> = fetch_planned_for(db, q, sql).await?;
    let more = rows.len() as i64 > limit;
    let runs: Vec<RunSummary> = rows.iter().take(limit as usize).map(RunRow::summary).collect::<Result<_, _>>()?;
    let next = if more {
        rows.get(limit as usize - 1).map(|r| Cursor {
            key: match q.sort {
                RunSort::Started => SortKey::Int(r.started_ns),
                RunSort::Cost => SortKey::Float(r.cost),
                RunSort::Duration => SortKey::Int(r.wall_clock_ms.unwrap_or(-1)),
                RunSort::Duplicates => SortKey::Int(r.duplicate_side_effects),
            },
            run_id: r.run_id.clone(),
        })
    } else {
        None
    };
    let filtered = q.filter_window.clone().filter(|w| w.since_ns.is_some());
    Ok(RunPage { runs, next, searched: q.search_window, filtered })
}

/// Where the run list stops counting: beyond it the page says "10,000+", as counting
/// every match of a filter most runs pass would take time in proportion to the data.
pub const COUNT_LIMIT: i64 = 10_000;

/// How many runs match the query's filters, per terminal reason (the reason filter and
/// the paging are ignored, so the counts show what each reason would give): exact up to
/// [`COUNT_LIMIT`] runs; beyond, [`RunCounts::at_least`] says the counts stopped.
///
/// Without filters (a reason aside) and without a search term they are the totals in
/// `run_reason_counts`, which every change to `runs` keeps in its own transaction: exact
/// at any size.
pub async fn count_by_reason(db: &Db, q: &RunQuery) -> StoreResult<RunCounts> {
    count_by_reason_up_to(db, q, COUNT_LIMIT).await
}

/// [`count_by_reason`] with its limit given (tests count to a handful).
pub async fn count_by_reason_up_to(db: &Db, q: &RunQuery, limit: i64) -> StoreResult<RunCounts> {
    counts_resolved(db, &resolve_search(db, q).await?, limit).await
}

async fn counts_resolved(db: &Db, q: &RunQuery, limit: i64) -> StoreResult<RunCounts> {
    let unfiltered = q.term().is_none() && !q.filters_on_runs() && q.since_ns.is_none() && q.until_ns.is_none();
    let rows: Vec<(String, i64)> = if unfiltered {
        db.fetch_all(Sql::new("SELECT terminal_reason, runs FROM run_reason_counts")).await?
    } else {
        fetch_planned_for(db, q, counts_sql(q, db.backend(), limit + 1)).await?
    };
    let mut counts: BTreeMap<TerminalReason, i64> = BTreeMap::new();
    for (reason, n) in rows {
        if let Some(reason) = TerminalReason::parse(&reason) {
            *counts.entry(reason).or_default() += n;
        }
    }
    let by_reason: Vec<(TerminalReason, i64)> = counts.into_iter().filter(|(_, n)| *n > 0).collect();
    let at_least = !unfiltered && by_reason.iter().map(|(_, n)| n).sum::<i64>() > limit;
    if at_least {
        return Ok(RunCounts { by_reason: Vec::new(), at_least: Some(limit) });
    }
    Ok(RunCounts { by_reason, at_least: None })
}

/// One run with its steps, tool calls and duplicates, derived from its spans under the
/// shipped prices and no policies (see [`get_with`]).
pub async fn get(db: &Db, run_id: &str) -> StoreResult<Option<RunDetail>> {
    get_with(db, run_id, &Rules::default()).await
}

/// One run: its stored figures, and its steps and tool calls derived again under `rules`
/// (each step's cost, each call's class as the policies say now).
pub async fn get_with(db: &Db, run_id: &str, rules: &Rules) -> StoreResult<Option<RunDetail>> {
    let sql = format!("SELECT {RUN_COLUMNS} FROM runs WHERE {RUN_BY_ID}");
    let row: Option<RunRow> = db.fetch_optional(Sql::with_args(&sql, vec![run_id.into()])).await?;
    let Some(row) = row else { return Ok(None) };
    let facts = spans::facts_of_runs(db, &[run_id]).await?.remove(run_id).unwrap_or_default();
    let derived = derive_run_with(run_id, &facts, rules);
    let duplicates: Vec<DuplicateView> = super::stored_json(&row.duplicates)?;
    Ok(Some(RunDetail {
        run: row.summary()?,
        step_list: derived.step_list,
        tool_call_list: derived.tool_call_list,
        duplicates,
        prices_used: derived.prices_used,
        unclassified_tools: derived.unclassified_tools,
        step_limit: derived.step_limit,
        cost_limit: derived.cost_limit,
    }))
}

/// Bodies stored for a run, keyed by span id (for replay fixtures and the span panel).
pub async fn bodies(db: &Db, run_id: &str) -> StoreResult<Vec<(String, serde_json::Value)>> {
    let mut out = Vec::new();
    for entry in stored_bodies(db, run_id).await? {
        out.push((entry.span_id, serde_json::from_str(entry.bodies.get()).map_err(corrupt)?));
    }
    Ok(out)
}

/// Every span's bodies stored for a run, in the order they were stored.
async fn stored_bodies(db: &Db, run_id: &str) -> StoreResult<Vec<span_record::StoredBodies>> {
    let sql = format!("SELECT bodies, packed FROM body_chunks WHERE {RUN_BY_ID} ORDER BY id");
    let chunks: Vec<(String, Option<Vec<u8>>)> = db.fetch_all(Sql::with_args(sql, vec![run_id.into()])).await?;
    let mut out = Vec::new();
    for (bodies, packed) in chunks {
        let chunk = super::packing::unpack(bodies, packed)?;
        out.extend(span_record::decode_bodies(&chunk).map_err(corrupt)?);
    }
    Ok(out)
}

/// One page of a run's spans in start order, and how many it has in all. Large runs are
/// paged so a 5,000-span run never becomes a multi-megabyte page. (The run's spans are
/// read whole either way: they are stored together, see `span_record`.)
pub async fn waterfall(db: &Db, run_id: &str, offset: i64, limit: i64) -> StoreResult<(Vec<WaterfallSpan>, i64)> {
    let (mut spans, _) = waterfall_and_failure(db, run_id, None).await?;
    spans.sort_by(|a, b| {
        (a.row.start_ns, &a.row.trace_id, &a.row.span_id).cmp(&(b.row.start_ns, &b.row.trace_id, &b.row.span_id))
    });
    let total = spans.len() as i64;
    let page = spans.into_iter().skip(offset.max(0) as usize).take(limit.max(0) as usize).map(|s| s.row).collect();
    Ok((page, total))
}

/// Every span of a run as the waterfall's view needs it, and why the run failed when
/// `latest_trace` (its latest attempt) is given. The run's spans are stored together
/// (see `span_record`), so they are read whole whatever page is shown.
pub async fn waterfall_and_failure(
    db: &Db,
    run_id: &str,
    latest_trace: Option<&str>,
) -> StoreResult<(Vec<domain::trace_view::ViewSpan>, Option<RunFailure>)> {
    let spans = spans::of_run(db, run_id).await?;
    let failure = latest_trace.and_then(|trace| {
        let outcomes: Vec<SpanOutcome> = spans
            .iter()
            .map(|s| SpanOutcome {
                trace_id: &s.trace_id,
                span_id: &s.span_id,
                parent_span_id: s.parent_span_id.as_deref(),
                name: &s.name,
                start_ns: s.start_ns,
                end_ns: s.end_ns,
                status_code: s.status_code,
                status_message: s.status_message.as_deref(),
                events: s.events.get(),
            })
            .collect();
        failure_of(&outcomes, trace)
    });
    let view = spans
        .into_iter()
        .map(|s| {
            let attributes = s.attributes.get().to_string();
            domain::trace_view::ViewSpan { row: s.into(), attributes }
        })
        .collect();
    Ok((view, failure))
}

fn pretty(json: &str) -> String {
    serde_json::from_str::<serde_json::Value>(json)
        .ok()
        .and_then(|v| serde_json::to_string_pretty(&v).ok())
        .unwrap_or_else(|| json.to_string())
}

/// Bodies pretty-printed, with values that are JSON text (tool arguments, results)
/// expanded so they read as JSON rather than as one escaped string.
fn pretty_bodies(json: &str) -> String {
    match serde_json::from_str::<serde_json::Value>(json) {
        Ok(serde_json::Value::Object(mut map)) => {
            for value in map.values_mut() {
                if let serde_json::Value::String(text) = value {
                    if let Ok(parsed @ (serde_json::Value::Object(_) | serde_json::Value::Array(_))) =
                        serde_json::from_str::<serde_json::Value>(text)
                    {
                        *value = parsed;
                    }
                }
            }
            serde_json::to_string_pretty(&map).unwrap_or_else(|_| json.to_string())
        }
        _ => pretty(json),
    }
}

/// One span of a run with its raw metadata and retained bodies, pretty-printed.
pub async fn span_panel(db: &Db, run_id: &str, trace_id: &str, span_id: &str) -> StoreResult<Option<SpanPanel>> {
    let found = spans::of_run(db, run_id).await?.into_iter().find(|s| s.trace_id == trace_id && s.span_id == span_id);
    let Some(span) = found else { return Ok(None) };
    let bodies = stored_bodies(db, run_id)
        .await?
        .into_iter()
        .find(|b| b.trace_id == trace_id && b.span_id == span_id)
        .map(|b| b.bodies.get().to_string());
    Ok(Some(SpanPanel {
        kind: span.kind,
        attributes: pretty(span.attributes.get()),
        events: pretty(span.events.get()),
        resource: pretty(span.resource.get()),
        span: span.into(),
        bodies: bodies.map(|b| pretty_bodies(&b)),
    }))
}

/// Whether any bodies of the run are still stored.
pub async fn has_bodies(db: &Db, run_id: &str) -> StoreResult<bool> {
    let n: i64 = db
        .fetch_one_value(Sql::with_args(
            format!("SELECT COUNT(*) FROM body_chunks WHERE {RUN_BY_ID}"),
            vec![run_id.into()],
        ))
        .await?;
    Ok(n > 0)
}

/// The replay fixture of a run, or `None` when the run does not exist or none of its
/// bodies were retained (assembled by [`domain::replay::fixture`]).
pub async fn replay_fixture(db: &Db, run_id: &str) -> StoreResult<Option<domain::canonical::ReplayFixture>> {
    let Some(detail) = get(db, run_id).await? else { return Ok(None) };
    let bodies: HashMap<String, serde_json::Value> = bodies(db, run_id).await?.into_iter().collect();
    Ok(domain::replay::fixture(detail, &bodies))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SQLite's plan for `sql`, a step a line.
    async fn sqlite_plan(db: &Db, sql: Sql) -> Vec<String> {
        let plan: Vec<(i64, i64, i64, String)> = db.fetch_all(sql.query_plan()).await.unwrap();
        plan.into_iter().map(|row| row.3).collect()
    }

    /// Each value sort reads its index in order on SQLite, first page and next alike;
    /// a sort that falls back to sorting every run (as by duration did before migration
    /// 0035, its expression unlike the index's) would pass every result test and fail here.
    #[tokio::test]
    async fn value_sorts_read_their_index_in_order_without_sorting_every_run() {
        let t = crate::testing::TestDb::sqlite().await;
        let cases = [
            (RunSort::Cost, SortKey::Float(1.5), &["runs_cost"][..]),
            (RunSort::Duration, SortKey::Int(90), &["runs_duration"][..]),
            (RunSort::Duplicates, SortKey::Int(0), &["runs_duplicates_some", "sqlite_autoindex_runs_1"][..]),
        ];
        for (sort, key, indexes) in cases {
            for after in [None, Some(Cursor { key, run_id: "run-1".into() })] {
                let q = RunQuery { sort, after, ..Default::default() };
                let plan = sqlite_plan(&t.db, list_sql(&q, 51, Backend::Sqlite)).await;
                for index in indexes {
                    assert!(plan.iter().any(|step| step.contains(index)), "{sort:?} reads {index}: {plan:?}");
                }
                assert!(
                    !plan.iter().any(|step| step.starts_with("SCAN runs") && !step.contains("INDEX")),
                    "{sort:?} reads every run: {plan:?}"
                );
                if sort != RunSort::Duplicates {
                    assert!(!plan.iter().any(|step| step.contains("TEMP B-TREE")), "{sort:?} sorts: {plan:?}");
                }
            }
        }
    }

    /// Every count the run list shows for a filter reads an index and stops at its limit:
    /// a flag's partial index, the trigger's or agent's range, `run_tools` for a search
    /// term; never every run. (On a small database a scan is as fast, so only the plan
    /// tells the two apart.)
    #[tokio::test]
    async fn filtered_counts_read_an_index_and_stop_at_their_limit() {
        let t = crate::testing::TestDb::sqlite().await;
        let window = Some(SearchWindow { since_ns: 1, runs: 100 });
        let filters: [(&str, RunQuery); 8] = [
            ("duplicates", RunQuery { flag: Some(RunFlag::Duplicates), ..Default::default() }),
            ("no read", RunQuery { flag: Some(RunFlag::NoRead), ..Default::default() }),
            ("violations", RunQuery { flag: Some(RunFlag::ApprovalViolation), ..Default::default() }),
            ("trigger", RunQuery { trigger: Some(Trigger::User), ..Default::default() }),
            ("agent", RunQuery { agent_names: Some(vec!["billing".into()]), ..Default::default() }),
            ("search", RunQuery { search: Some("send_email".into()), ..Default::default() }),
            (
                "search in a window, agent",
                RunQuery {
                    search: Some("send_email".into()),
                    agent: Some("billing".into()),
                    agent_names: Some(vec!["billing".into()]),
                    search_window: window,
                    ..Default::default()
                },
            ),
            (
                "search in a window, reason",
                RunQuery {
                    search: Some("send_email".into()),
                    terminal_reason: Some(TerminalReason::Error),
                    search_window: window,
                    ..Default::default()
                },
            ),
        ];
        for (name, q) in filters {
            let sql = counts_sql(&q, Backend::Sqlite, COUNT_LIMIT + 1);
            assert!(sql.text().contains("LIMIT"), "{name} stops at the limit: {}", sql.text());
            let plan = sqlite_plan(&t.db, sql).await;
            // A window's runs are a subquery (`CO-ROUTINE rt`): scanning what it gave is
            // not scanning the table.
            let subquery = plan.iter().any(|step| step == "CO-ROUTINE rt");
            assert!(
                !plan.iter().any(|step| (step.starts_with("SCAN runs") || (step.starts_with("SCAN rt") && !subquery))
                    && !step.contains("INDEX")),
                "{name} reads every run: {plan:?}"
            );
            if q.search_window.is_some() {
                assert!(
                    plan.iter()
                        .any(|step| step == "SEARCH rt USING INDEX run_tools_search (tool_name=? AND started_ns>?)"),
                    "{name} reads the window's runs by their index: {plan:?}"
                );
            }
            // Without a search term the counted rows come from the index alone: up to
            // 10,001 visits to run rows cost more than the page's whole budget.
            if q.search.is_none() {
                let reads: Vec<&String> = plan.iter().filter(|step| step.contains(" runs ")).collect();
                assert!(
                    !reads.is_empty() && reads.iter().all(|step| step.contains("COVERING INDEX")),
                    "{name} visits run rows: {plan:?}"
                );
            }
        }
    }

    /// A search with a filter on runs reads the runs its term names by id by number, not
    /// by walking the filter's index and testing each run against the few named: at 10
    /// million spans SQLite walked every run of the agent (200-400 ms a statement).
    #[tokio::test]
    async fn a_filtered_search_reads_the_runs_it_names_by_number() {
        let t = crate::testing::TestDb::sqlite().await;
        let q = RunQuery {
            search: Some("send_email".into()),
            agent: Some("billing".into()),
            agent_names: Some(vec!["billing".into()]),
            search_window: Some(SearchWindow { since_ns: 1, runs: 100 }),
            ..Default::default()
        };
        for sql in [list_sql(&q, 51, Backend::Sqlite), counts_sql(&q, Backend::Sqlite, COUNT_LIMIT + 1)] {
            let plan = sqlite_plan(&t.db, sql).await;
            assert!(!plan.iter().any(|step| step.contains("runs_agent_started")), "walks the agent's runs: {plan:?}");
        }
    }

    /// A list whose filters no one index answers reads its window by the lead's index,
    /// newest first and cut at its limit, and finds where the window starts by the same
    /// index: never every run, however the other filters and the sort are set.
    #[tokio::test]
    async fn a_windowed_list_reads_its_leads_index() {
        let t = crate::testing::TestDb::sqlite().await;
        let others = RunQuery {
            model: Some("m".into()),
            agent: Some("bill".into()),
            agent_names: Some(vec!["billing".into(), "billing-2".into()]),
            terminal_reason: Some(TerminalReason::Error),
            since_ns: Some(1),
            ..Default::default()
        };
        let leads = [
            (Lead::Agent("billing".into()), "runs_agent_started"),
            (Lead::Trigger(Trigger::User), "runs_trigger_started"),
            (Lead::Flag(RunFlag::Duplicates), "runs_flag_duplicates"),
            (Lead::Flag(RunFlag::NoRead), "runs_flag_no_read"),
            (Lead::Flag(RunFlag::ApprovalViolation), "runs_flag_violations"),
            (Lead::Newest, "runs_started"),
        ];
        for (lead, index) in leads {
            let probe = sqlite_plan(&t.db, lead_window_start_sql(&others, &lead, 100, Backend::Sqlite)).await;
            assert!(probe.iter().any(|s| s.contains(index)), "{lead:?} probes by {index}: {probe:?}");
            assert!(!probe.iter().any(|s| s.contains("TEMP B-TREE")), "{lead:?} sorts to probe: {probe:?}");
            for (sort, since_ns) in [(RunSort::Started, None), (RunSort::Cost, Some(1)), (RunSort::Duplicates, Some(1))]
            {
                let window = FilterWindow { lead: lead.clone(), since_ns, runs: 100 };
                let q = RunQuery { sort, filter_window: Some(window), ..others.clone() };
                for sql in [list_sql(&q, 51, Backend::Sqlite), counts_sql(&q, Backend::Sqlite, COUNT_LIMIT + 1)] {
                    assert!(sql.text().contains("LIMIT 200) AS windowed"), "{}", sql.text());
                    let plan = sqlite_plan(&t.db, sql).await;
                    assert!(plan.iter().any(|s| s.contains(index)), "{lead:?} reads {index}: {plan:?}");
                    assert!(
                        !plan.iter().any(|s| s.starts_with("SCAN runs") && !s.contains("INDEX")),
                        "{lead:?} reads every run: {plan:?}"
                    );
                }
            }
        }
    }

    /// On PostgreSQL a flag's window is counted from the flag's index alone: it holds every
    /// column the other filters test, so no run row is read for the 2,500 runs (migration
    /// 0049; without it each was a heap page, 37-68 ms at 10 million spans when not cached).
    /// Scans the planner could pick over an index on a nearly empty table are turned off:
    /// what is asked is whether this index covers the statement.
    #[tokio::test]
    async fn on_postgresql_a_flags_window_is_counted_from_its_index_alone() {
        let Some(t) = crate::testing::TestDb::postgres().await else { return };
        for (flag, index) in [
            (RunFlag::Duplicates, "flag_duplicates"),
            (RunFlag::NoRead, "flag_no_read"),
            (RunFlag::ApprovalViolation, "flag_violations"),
        ] {
            let q = RunQuery {
                agent: Some("bill".into()),
                agent_names: Some(vec!["billing".into()]),
                trigger: Some(Trigger::User),
                model: Some("m".into()),
                flag: Some(flag),
                since_ns: Some(1),
                filter_window: Some(FilterWindow { lead: Lead::Flag(flag), since_ns: Some(1), runs: 100 }),
                ..Default::default()
            };
            let mut tx = crate::sql::Tx::begin_write(&t.db).await.unwrap();
            tx.execute(Sql::new("SET LOCAL enable_seqscan = off")).await.unwrap();
            tx.execute(Sql::new("SET LOCAL enable_bitmapscan = off")).await.unwrap();
            let plan: Vec<(String,)> =
                tx.fetch_all(counts_sql(&q, Backend::Postgres, COUNT_LIMIT + 1).explained()).await.unwrap();
            drop(tx);
            let scans: Vec<&str> = plan
                .iter()
                .map(|(line,)| line.as_str())
                .filter(|l| l.contains("Scan") && !l.contains("Subquery Scan"))
                .collect();
            // Each day's partition has its own copy of the index, named by PostgreSQL.
            let copies: Vec<(String,)> =
                t.db.fetch_all(Sql::with_args(
                    "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid \
                     JOIN pg_class p ON p.oid = i.inhparent WHERE p.relname = $1",
                    vec![format!("runs_{index}").into()],
                ))
                .await
                .unwrap();
            let by_its_index = |l: &&str| copies.iter().any(|(c,)| l.contains(&format!(" {c} ")));
            assert!(!scans.is_empty() && scans.iter().all(by_its_index), "{flag:?} reads {index}: {scans:#?}");
            assert!(scans.iter().all(|l| l.contains("Index Only Scan")), "{flag:?} reads run rows: {scans:#?}");
        }
        t.cleanup().await;
    }

    /// The run list's statements are planned once per connection on PostgreSQL, so the
    /// planner must see their limits: a bound one is planned as a tenth of the rows, and
    /// the search's plan then hashed every run (390 ms at 10 million spans instead of 2).
    #[test]
    fn run_list_statements_carry_their_limits_in_their_text() {
        let search = || RunQuery { search: Some("send_email".into()), ..Default::default() };
        let queries = [
            RunQuery::default(),
            RunQuery { sort: RunSort::Duplicates, ..Default::default() },
            RunQuery {
                sort: RunSort::Cost,
                agent: Some("billing".into()),
                agent_names: Some(vec!["billing-bot".into()]),
                ..search()
            },
            search(),
            RunQuery {
                agent: Some("billing".into()),
                agent_names: Some(vec!["billing-bot".into()]),
                search_window: Some(SearchWindow { since_ns: 1, runs: 10_000 }),
                ..search()
            },
            RunQuery {
                model: Some("m".into()),
                sort: RunSort::Duplicates,
                filter_window: Some(FilterWindow { lead: Lead::Newest, since_ns: Some(1), runs: 10_000 }),
                ..Default::default()
            },
        ];
        for q in queries {
            let statements = [list_sql(&q, 51, Backend::Postgres), counts_sql(&q, Backend::Postgres, COUNT_LIMIT + 1)];
            for sql in statements {
                let limits: Vec<&str> = sql.text().split("LIMIT ").skip(1).collect();
                assert!(!limits.is_empty(), "{}", sql.text());
                for rest in limits {
                    // A page, the counting limit, twice the window, one run per lookup.
                    let known = ["51", "10001", "20000", "1) AS r"];
                    assert!(known.iter().any(|l| rest.starts_with(l)), "a bound limit: {}", sql.text());
                }
            }
        }
    }

    #[test]
    fn json_bodies_are_expanded_and_other_text_kept() {
        let out = pretty_bodies(r#"{"gen_ai.tool.call.arguments":"{\"to\":\"a\"}","note":"plain <b>text</b>"}"#);
        assert!(out.contains("\"to\": \"a\""), "{out}");
        assert!(out.contains("plain <b>text</b>"), "{out}");
    }
}

/// The agent a run's spans named, if the run exists and one did (approval requests and
/// escalations take it when the agent does not say).
pub async fn agent_of(db: &Db, run_id: &str) -> StoreResult<Option<String>> {
    let sql = format!("SELECT agent FROM runs WHERE {RUN_BY_ID}");
    let agent: Option<Option<String>> = db.fetch_value(Sql::with_args(sql, vec![run_id.into()])).await?;
    Ok(agent.flatten())
}

/// A run's agent and cost so far, if any of its spans arrived (what approval rules read).
pub async fn agent_and_cost(db: &Db, run_id: &str) -> StoreResult<Option<(Option<String>, f64)>> {
    let sql = format!("SELECT agent, cost FROM runs WHERE {RUN_BY_ID}");
    let row: Option<(Option<String>, Option<f64>)> =
        db.fetch_optional(Sql::with_args(sql, vec![run_id.into()])).await?;
    Ok(row.map(|(agent, cost)| (agent, cost.unwrap_or(0.0))))
}

/// The `enduser.id` a run's spans carry (the person the agent acts for), if any: that
/// person may not approve the run's requests. OpenTelemetry allows it on a span or on the
/// resource; a span's own attribute wins.
pub async fn enduser_of(db: &Db, run_id: &str) -> StoreResult<Option<String>> {
    let spans = super::spans::of_run(db, run_id).await?;
    let enduser = |json: &str| -> Option<String> {
        let value: serde_json::Value = serde_json::from_str(json).ok()?;
        value.get("enduser.id").and_then(|v| v.as_str()).map(str::to_string)
    };
    Ok(spans
        .iter()
        .find_map(|s| enduser(s.attributes.get()))
        .or_else(|| spans.iter().find_map(|s| enduser(s.resource.get()))))
}

/// The models without a price that runs started since `since_ns` used (at most 100).
pub async fn unpriced_models_since(db: &Db, since_ns: i64) -> StoreResult<Vec<String>> {
    let sql =
        "SELECT DISTINCT unpriced_models FROM runs WHERE unpriced_models IS NOT NULL AND started_ns >= $1 LIMIT 1000";
    let rows: Vec<String> = db.fetch_column(Sql::with_args(sql, vec![since_ns.into()])).await?;
    let models: BTreeSet<String> = rows
        .iter()
        .map(|r| super::stored_json::<Vec<String>>(r))
        .collect::<Result<Vec<_>, _>>()?
        .into_iter()
        .flatten()
        .collect();
    Ok(models.into_iter().take(100).collect())
}
