//! What the trends page reads, and the rollups that make it cheap: per-bucket totals of
//! the runs (`trend_runs`, `trend_values`; their meaning is `domain::trends::rollup`),
//! which every write that adds, changes or deletes runs keeps with [`apply`] in its own
//! transaction, so a chart reads its buckets' rows whatever the number of runs. They are
//! kept per arrival day of the runs they count ([`DayRollups`]), so on PostgreSQL a day's
//! counts are partitions that go with the day's runs (ADR 0023); the page adds up the
//! days of a bucket. And the escalations' and approvals' changes of state per bucket
//! (`trend_events`, meaning in `domain::trends::events`), which the stores that make
//! those changes keep with [`count_events`] in theirs.

use super::sql::Backend;
use super::sql::{cacheable_chunks, Sql, Tx};
use super::{partitions, Db, StoreError, StoreResult};
use domain::canonical::TerminalReason;
use domain::trends::events::{EventCounts, EventKey, EventKind};
use domain::trends::rollup::{periods, GroupKey, GroupSums, Measure, Rollup, Rows, ValueKey, ValueSums, ALL_AGENTS};
use domain::trends::{Inputs, Range, RunPoint, Window};
use std::collections::BTreeMap;

const NS_PER_MS: i64 = 1_000_000;
const HOUR_MS: i64 = 3_600_000;

/// The columns of `runs` a [`RunPoint`] is made of, in [`point`]'s order.
pub const POINT_COLUMNS: &str = "started_ns, terminal_reason, cost, tool_calls, deduped_calls, \
                                 duplicate_side_effects, completed_without_read, agent, model";

/// A row of [`POINT_COLUMNS`].
pub type PointRow = (i64, String, f64, i64, i64, i64, bool, Option<String>, Option<String>);

/// The run a row of [`POINT_COLUMNS`] describes.
pub fn point((started_ns, reason, cost, tool_calls, deduped, duplicates, no_read, agent, model): PointRow) -> RunPoint {
    RunPoint {
        started_ms: started_ns.div_euclid(NS_PER_MS),
        reason: TerminalReason::parse(&reason).unwrap_or(TerminalReason::Running),
        cost,
        tool_calls,
        deduped_calls: deduped,
        duplicate_side_effects: duplicates,
        completed_without_read: no_read,
        agent,
        model,
    }
}

/// Rollup rows per arrival day of the runs they count (the day of their numbers,
/// `partitions::day_of_run_no`; always 0 on SQLite, which numbers runs from 1): on
/// PostgreSQL each day's rows are a partition of their own, which retention drops with the
/// day's runs (ADR 0023).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DayRollups(pub BTreeMap<i64, Rollup>);

impl DayRollups {
    /// Adds the runs, each given with its number (`sign` 1), or takes them away (`sign`
    /// -1), in the rows of each one's arrival day.
    pub fn add_all<'a>(&mut self, runs: impl IntoIterator<Item = (i64, &'a RunPoint)>, sign: i64) {
        let mut by_day: BTreeMap<i64, Vec<&RunPoint>> = BTreeMap::new();
        for (run_no, point) in runs {
            by_day.entry(partitions::day_of_run_no(run_no)).or_default().push(point);
        }
        for (day, points) in by_day {
            self.0.entry(day).or_default().add_all(points, sign);
        }
    }

    /// Without the rows that add nothing, and the days left with none.
    pub fn without_zeros(self) -> DayRollups {
        let days = self.0.into_iter().map(|(day, rollup)| (day, rollup.without_zeros()));
        DayRollups(days.filter(|(_, rollup)| !rollup.is_empty()).collect())
    }

    /// Every day's rows added up: what the page sees.
    pub fn summed(&self) -> Rollup {
        let mut all = Rollup::default();
        for rollup in self.0.values() {
            all.merge(rollup);
        }
        all
    }
}

/// Adds `change` to the rollups, inside the transaction that changed `runs`: one
/// statement per few hundred rows, in (day, key) order, so concurrent writers on
/// PostgreSQL lock shared rows in one order and never deadlock. Callers run it last, so
/// those rows are held only until the commit. Rows that fall to zero stay (a bucket's
/// running runs, once all finished); the reads skip them and retention deletes them.
pub async fn apply(tx: &mut Tx, change: &DayRollups) -> StoreResult<()> {
    let groups: Vec<(i64, &GroupKey, &GroupSums)> =
        change.0.iter().flat_map(|(day, r)| r.groups.iter().map(move |(k, s)| (*day, k, s))).collect();
    for chunk in cacheable_chunks(&groups, 100) {
        let mut sql = Sql::new(
            "INSERT INTO trend_runs (period_ms, start_ms, agent, model, terminal_reason, run_day, runs, tool_calls, \
             no_read, deduped_calls, duplicate_side_effects, cost_nano) ",
        );
        sql.values(chunk, |row, (day, k, s)| {
            row.bind(k.period_ms)
                .bind(k.start_ms)
                .bind(k.agent.as_str())
                .bind(k.model.as_str())
                .bind(k.reason.as_str())
                .bind(*day)
                .bind(s.runs)
                .bind(s.tool_calls)
                .bind(s.no_read)
                .bind(s.deduped_calls)
                .bind(s.duplicate_side_effects)
                .bind(s.cost_nano);
        });
        sql.push(
            " ON CONFLICT (period_ms, start_ms, agent, model, terminal_reason, run_day) DO UPDATE SET \
             runs = trend_runs.runs + excluded.runs, tool_calls = trend_runs.tool_calls + excluded.tool_calls, \
             no_read = trend_runs.no_read + excluded.no_read, \
             deduped_calls = trend_runs.deduped_calls + excluded.deduped_calls, \
             duplicate_side_effects = trend_runs.duplicate_side_effects + excluded.duplicate_side_effects, \
             cost_nano = trend_runs.cost_nano + excluded.cost_nano",
        );
        tx.execute(sql).await?;
    }
    let values: Vec<(i64, &ValueKey, &ValueSums)> =
        change.0.iter().flat_map(|(day, r)| r.values.iter().map(move |(k, s)| (*day, k, s))).collect();
    for chunk in cacheable_chunks(&values, 150) {
        let mut sql = Sql::new(
            "INSERT INTO trend_values (period_ms, scope, measure, start_ms, value, run_day, runs, value_sum) ",
        );
        sql.values(chunk, |row, (day, k, s)| {
            row.bind(k.period_ms)
                .bind(k.scope.as_str())
                .bind(k.measure.as_str())
                .bind(k.start_ms)
                .bind(k.value)
                .bind(*day)
                .bind(s.runs)
                .bind(s.sum);
        });
        sql.push(
            " ON CONFLICT (period_ms, scope, measure, start_ms, value, run_day) DO UPDATE SET \
             runs = trend_values.runs + excluded.runs, value_sum = trend_values.value_sum + excluded.value_sum",
        );
        tx.execute(sql).await?;
    }
    Ok(())
}

/// How many runs numbered on `day` there are per terminal reason, from the day's rollup
/// rows (each run counts once per bucket size; the day-long buckets are the fewest rows).
/// Retention takes them out of the per-reason totals when the day goes, without reading
/// its runs.
pub async fn runs_per_reason(tx: &mut Tx, day: i64) -> StoreResult<BTreeMap<String, i64>> {
    let sql = Sql::with_args(
        "SELECT terminal_reason, CAST(SUM(runs) AS BIGINT) FROM trend_runs WHERE run_day = $1 AND period_ms = $2 \
         GROUP BY terminal_reason",
        vec![day.into(), Range::Month.bucket_ms().into()],
    );
    let rows: Vec<(String, i64)> = tx.fetch_all(sql).await?;
    Ok(rows.into_iter().filter(|(_, n)| *n != 0).collect())
}

/// The columns of a `trend_runs` row, in [`group`]'s order.
const GROUP_COLUMNS: &str = "period_ms, start_ms, agent, model, terminal_reason, runs, tool_calls, no_read, \
                             deduped_calls, duplicate_side_effects, cost_nano";
type GroupRow = (i64, i64, String, String, String, i64, i64, i64, i64, i64, i64);

/// A `trend_runs` row of [`GROUP_COLUMNS`].
fn group(row: GroupRow) -> (GroupKey, GroupSums) {
    let (period_ms, start_ms, agent, model, reason, runs, tool_calls, no_read, deduped_calls, dups, cost_nano) = row;
    (
        GroupKey { period_ms, start_ms, agent, model, reason },
        GroupSums { runs, tool_calls, no_read, deduped_calls, duplicate_side_effects: dups, cost_nano },
    )
}

/// How many statements read a window's value rows, each a slice of its buckets, side by
/// side on connections of their own. A bucket's rows lie scattered over the table (every
/// period's and every agent's rows of the same hours were written together), so a first
/// view reads a page from the file for every few rows, and one statement waits for each
/// read in turn.
const VALUE_SLICES: usize = 2;

/// The statements reading the rollup rows of `window`'s buckets (of `agent`'s runs only,
/// when given): `trend_runs`, then `trend_values` in [`VALUE_SLICES`] slices of the
/// buckets, each a range of its table's primary key. The value rows come joined into one
/// text per bucket and measure (`value:runs:sum,...`): a window holds about ten thousand
/// of them, and decoding a row costs a few microseconds where splitting its text costs
/// nanoseconds.
fn rollup_sql(backend: Backend, window: &Window, agent: Option<&str>) -> (Sql, [Sql; VALUE_SLICES]) {
    let period = window.bucket_ms;
    let mut groups = Sql::new(format!("SELECT {GROUP_COLUMNS} FROM trend_runs WHERE period_ms = "));
    groups.bind(period).push(" AND start_ms >= ").bind(window.start_ms).push(" AND start_ms < ").bind(window.end_ms());
    if let Some(agent) = agent {
        groups.push(" AND agent = ").bind(agent);
    }
    groups.push(" AND runs <> 0");
    let joined = backend.joined("value || ':' || runs || ':' || value_sum");
    let values = bucket_slices(window).map(|(from_ms, to_ms)| {
        let mut values = Sql::new(format!("SELECT measure, start_ms, {joined} FROM trend_values WHERE period_ms = "));
        values
            .bind(period)
            .push(" AND scope = ")
            .bind(agent.unwrap_or(ALL_AGENTS))
            .push(" AND measure IN ('cost', 'tool_calls') AND start_ms >= ")
            .bind(from_ms)
            .push(" AND start_ms < ")
            .bind(to_ms)
            .push(" AND runs <> 0 GROUP BY measure, start_ms");
        values
    });
    (groups, values)
}

/// `window`'s buckets cut into [`VALUE_SLICES`] runs of whole buckets, as (start, end) in
/// Unix milliseconds: together they cover the window once (a slice is empty when the
/// window has fewer buckets than slices).
fn bucket_slices(window: &Window) -> [(i64, i64); VALUE_SLICES] {
    let edge = |i: usize| window.start_ms + window.bucket_ms * (window.buckets * i / VALUE_SLICES) as i64;
    std::array::from_fn(|i| (edge(i), edge(i + 1)))
}

/// The rollup rows of `window`'s buckets (of `agent`'s runs only, when given).
pub async fn rollup(db: &Db, window: &Window, agent: Option<&str>) -> StoreResult<Rows> {
    let period = window.bucket_ms;
    let (groups, [earlier, later]) = rollup_sql(db.backend(), window, agent);
    type ValueRow = (String, i64, String);
    // Planned once per connection: each reads a range of every day's partition (no day can
    // be skipped, ADR 0023) whatever the window, and planning against every partition
    // for each execution took longer than running it.
    let (groups, earlier, later): (Vec<GroupRow>, Vec<ValueRow>, Vec<ValueRow>) = tokio::try_join!(
        db.fetch_all_planned_once(groups),
        db.fetch_all_planned_once(earlier),
        db.fetch_all_planned_once(later)
    )?;
    let scope = agent.unwrap_or(ALL_AGENTS).to_string();
    let mut rows = Rows { groups: groups.into_iter().map(group).collect(), values: Vec::new() };
    for (measure, start_ms, joined) in earlier.into_iter().chain(later) {
        let Some(measure) = Measure::parse(&measure) else { continue };
        for row in joined.split(',') {
            let mut parts = row.split(':').map(str::parse::<i64>);
            let (Some(Ok(value)), Some(Ok(runs)), Some(Ok(sum))) = (parts.next(), parts.next(), parts.next()) else {
                return Err(StoreError::Invalid(format!("a trends value row reads {row:?}")));
            };
            let key = ValueKey { period_ms: period, scope: scope.clone(), measure, start_ms, value };
            rows.values.push((key, ValueSums { runs, sum }));
        }
    }
    Ok(rows)
}

/// Adds `counts` to the event rows, inside the transaction that made the changes they
/// count: one statement per few hundred rows, in key order, like [`apply`]; callers run
/// it last, so the shared rows (every agent's, this hour's) are held only until commit.
pub async fn count_events(tx: &mut Tx, counts: &EventCounts) -> StoreResult<()> {
    let rows: Vec<(&EventKey, &i64)> = counts.0.iter().filter(|(_, n)| **n != 0).collect();
    for chunk in cacheable_chunks(&rows, 150) {
        let mut sql = Sql::new("INSERT INTO trend_events (period_ms, scope, kind, start_ms, events) ");
        sql.values(chunk, |row, (k, n)| {
            row.bind(k.period_ms).bind(k.scope.as_str()).bind(k.kind.as_str()).bind(k.start_ms).bind(**n);
        });
        sql.push(" ON CONFLICT (period_ms, scope, kind, start_ms) DO UPDATE SET events = trend_events.events + excluded.events");
        tx.execute(sql).await?;
    }
    Ok(())
}

/// The statement reading `window`'s event rows (of `agent`'s only, when given): for each
/// kind a range of the primary key, so the page reads a row per bucket and kind whatever
/// the number of escalations and approvals.
fn events_sql(window: &Window, agent: Option<&str>) -> Sql {
    let mut sql = Sql::new("SELECT kind, start_ms, events FROM trend_events WHERE period_ms = ");
    sql.bind(window.bucket_ms)
        .push(" AND scope = ")
        .bind(agent.unwrap_or(ALL_AGENTS))
        .push(" AND kind IN ")
        .list(EventKind::ALL.map(EventKind::as_str))
        .push(" AND start_ms >= ")
        .bind(window.start_ms)
        .push(" AND start_ms < ")
        .bind(window.end_ms())
        .push(" AND events <> 0");
    sql
}

/// `window`'s event counts per kind, as (bucket start, count).
async fn events(db: &Db, window: &Window, agent: Option<&str>) -> StoreResult<BTreeMap<EventKind, Vec<(i64, i64)>>> {
    let rows: Vec<(String, i64, i64)> = db.fetch_all(events_sql(window, agent)).await?;
    let mut by_kind: BTreeMap<EventKind, Vec<(i64, i64)>> = BTreeMap::new();
    for (kind, start_ms, n) in rows {
        if let Some(kind) = EventKind::parse(&kind) {
            by_kind.entry(kind).or_default().push((start_ms, n));
        }
    }
    Ok(by_kind)
}

/// Where each kind of event is stored: table, time column, statuses (none: any). A
/// rebuild counts these; `table`, `column` and `statuses` are constants, never input.
const EVENT_SOURCES: [(EventKind, &str, &str, &[&str]); 5] = [
    (EventKind::EscalationOpened, "escalations", "opened_at", &[]),
    (EventKind::EscalationResolved, "escalations", "resolved_at", &[]),
    (EventKind::ApprovalRequested, "approvals", "created_at", &[]),
    // An expired request gets `decided_at = expires_at` and no decider, and is counted
    // apart; a cancelled one is neither.
    (EventKind::ApprovalDecided, "approvals", "decided_at", &["approved", "approved_with_changes", "denied"]),
    (EventKind::ApprovalExpired, "approvals", "decided_at", &["expired"]),
];

/// The statement that counts every stored escalation and approval into `trend_events`
/// (empty), as the writes would have.
fn rebuild_events_sql() -> String {
    let happened: Vec<String> = EVENT_SOURCES
        .iter()
        .map(|(kind, table, column, statuses)| {
            let mut select = format!(
                "SELECT '{}' AS kind, agent, {column} AS at FROM {table} WHERE {column} IS NOT NULL",
                kind.as_str()
            );
            if !statuses.is_empty() {
                let listed: Vec<String> = statuses.iter().map(|s| format!("'{s}'")).collect();
                select.push_str(&format!(" AND status IN ({})", listed.join(", ")));
            }
            select
        })
        .collect();
    let periods: Vec<String> = periods().iter().map(|p| format!("SELECT CAST({p} AS BIGINT) AS period_ms")).collect();
    format!(
        "INSERT INTO trend_events (period_ms, scope, kind, start_ms, events) \
         SELECT p.period_ms, s.scope, s.kind, (s.at / p.period_ms) * p.period_ms, COUNT(*) FROM (\
           SELECT kind, '' AS scope, at FROM ({h}) h \
           UNION ALL SELECT kind, agent, at FROM ({h}) h WHERE agent IS NOT NULL AND agent <> ''\
         ) s CROSS JOIN ({p}) p GROUP BY p.period_ms, s.scope, s.kind, (s.at / p.period_ms) * p.period_ms",
        h = happened.join(" UNION ALL "),
        p = periods.join(" UNION ALL "),
    )
}

/// Everything the page charts for `window`.
pub async fn inputs(db: &Db, window: &Window) -> StoreResult<Inputs> {
    inputs_for(db, window, None).await
}

/// Everything the page charts for `window`, of one agent's runs, escalations, approvals
/// and replay results when `agent` is given. The calls the ledger stopped are counted
/// per hour, not per agent: with an agent they are left out (the page says so).
pub async fn inputs_for(db: &Db, window: &Window, agent: Option<&str>) -> StoreResult<Inputs> {
    // The reads are independent: side by side, each on a connection of its own, the page
    // waits for the longest instead of their sum.
    let (mut replays, rollup, ledger_deduped, mut events) = tokio::try_join!(
        super::replay_results::in_window(db, window.start_ms, window.end_ms()),
        rollup(db, window, agent),
        async {
            match agent {
                Some(_) => Ok(Vec::new()),
                None => super::ledger::deduped_hours(db, window.start_ms, window.end_ms()).await,
            }
        },
        events(db, window, agent),
    )?;
    if let Some(agent) = agent {
        replays.retain(|(_, a, _)| a == agent);
    }
    let mut kind = |k: EventKind| events.remove(&k).unwrap_or_default();
    Ok(Inputs {
        agent: agent.map(str::to_string),
        rollup,
        escalations_opened: kind(EventKind::EscalationOpened),
        escalations_resolved: kind(EventKind::EscalationResolved),
        approvals_requested: kind(EventKind::ApprovalRequested),
        approvals_decided: kind(EventKind::ApprovalDecided),
        approvals_expired: kind(EventKind::ApprovalExpired),
        ledger_deduped,
        replays,
    })
}

/// Runs read per statement while the rollups are rebuilt.
const REBUILD_PAGE: i64 = 20_000;

/// Builds the rollups from the stored runs when this database has never had them (the
/// first start after migration 0041); returns how many runs it read, if it built them.
pub async fn build_rollups_if_new(db: &Db) -> StoreResult<Option<u64>> {
    let built: i64 = db.fetch_one_value(Sql::new("SELECT COUNT(*) FROM trend_rollups_built")).await?;
    if built > 0 {
        return Ok(None);
    }
    Ok(Some(rebuild_rollups(db).await?))
}

/// Up to `limit` runs numbered in `(after, before)`, lowest first, as (number,
/// [`PointRow`]): a page of the runs read in number order to add them up.
pub async fn points_page(tx: &mut Tx, (after, before): (i64, i64), limit: i64) -> StoreResult<Vec<(i64, PointRow)>> {
    let mut sql = Sql::new(format!("SELECT run_no, {POINT_COLUMNS} FROM runs WHERE run_no > "));
    sql.bind(after).push(" AND run_no < ").bind(before).push(" ORDER BY run_no LIMIT ").bind(limit);
    let rows: Vec<NumberedRow> = tx.fetch_all(sql).await?;
    Ok(rows.into_iter().map(numbered).collect())
}

/// A row of `run_no, ` and [`POINT_COLUMNS`].
pub type NumberedRow = (i64, i64, String, f64, i64, i64, i64, bool, Option<String>, Option<String>);

/// The number and [`PointRow`] of a [`NumberedRow`].
pub fn numbered(row: NumberedRow) -> (i64, PointRow) {
    let (no, started_ns, reason, cost, calls, deduped, dups, no_read, agent, model) = row;
    (no, (started_ns, reason, cost, calls, deduped, dups, no_read, agent, model))
}

/// Empties the rollups and adds up every stored run again, and counts every escalation
/// and approval into the event rows again, in one write transaction (on PostgreSQL with
/// the three tables locked against writers, so no write lands in between); returns how
/// many runs it read. Memory stays bounded: each page of runs is added to the tables
/// before the next is read.
pub async fn rebuild_rollups(db: &Db) -> StoreResult<u64> {
    let mut tx = Tx::begin_bulk_write(db).await?;
    if tx.backend() == super::sql::Backend::Postgres {
        tx.execute(Sql::new("LOCK TABLE runs, escalations, approvals IN SHARE ROW EXCLUSIVE MODE")).await?;
    }
    tx.execute(Sql::new("DELETE FROM trend_runs")).await?;
    tx.execute(Sql::new("DELETE FROM trend_values")).await?;
    tx.execute(Sql::new("DELETE FROM trend_events")).await?;
    tx.execute(Sql::new(rebuild_events_sql())).await?;
    let mut after = i64::MIN;
    let mut read = 0u64;
    loop {
        let points = points_page(&mut tx, (after, i64::MAX), REBUILD_PAGE).await?;
        let Some((last, _)) = points.last() else { break };
        after = *last;
        read += points.len() as u64;
        let runs: Vec<(i64, RunPoint)> = points.into_iter().map(|(no, row)| (no, point(row))).collect();
        let mut page = DayRollups::default();
        page.add_all(runs.iter().map(|(no, p)| (*no, p)), 1);
        apply(&mut tx, &page).await?;
    }
    tx.execute(Sql::new("DELETE FROM trend_rollups_built")).await?;
    tx.execute(Sql::with_args("INSERT INTO trend_rollups_built (built_at) VALUES ($1)", vec![super::now_ms().into()]))
        .await?;
    tx.commit().await?;
    Ok(read)
}

/// Every rollup row, per arrival day, for tests that compare what the writes kept with a
/// rebuild.
pub async fn all_rows(db: &Db) -> StoreResult<DayRollups> {
    let groups: Vec<(i64, GroupRow)> = db
        .fetch_all::<(i64, i64, i64, String, String, String, i64, i64, i64, i64, i64, i64)>(Sql::new(format!(
            "SELECT run_day, {GROUP_COLUMNS} FROM trend_runs"
        )))
        .await?
        .into_iter()
        .map(|(day, p, s, a, m, r, n, c, nr, d, ds, cost)| (day, (p, s, a, m, r, n, c, nr, d, ds, cost)))
        .collect();
    let values: Vec<(i64, i64, String, String, i64, i64, i64, i64)> = db
        .fetch_all(Sql::new(
            "SELECT run_day, period_ms, scope, measure, start_ms, value, runs, value_sum FROM trend_values",
        ))
        .await?;
    let mut all = DayRollups::default();
    for (day, row) in groups {
        let (key, sums) = group(row);
        all.0.entry(day).or_default().groups.insert(key, sums);
    }
    for (day, period_ms, scope, measure, start_ms, value, runs, sum) in values {
        let Some(measure) = Measure::parse(&measure) else { continue };
        let key = ValueKey { period_ms, scope, measure, start_ms, value };
        all.0.entry(day).or_default().values.insert(key, ValueSums { runs, sum });
    }
    Ok(all.without_zeros())
}

/// Every event row that counts something, for tests that compare what the writes kept
/// with a rebuild.
pub async fn all_event_rows(db: &Db) -> StoreResult<EventCounts> {
    let sql = Sql::new("SELECT period_ms, scope, kind, start_ms, events FROM trend_events WHERE events <> 0");
    let rows: Vec<(i64, String, String, i64, i64)> = db.fetch_all(sql).await?;
    let mut counts = EventCounts::default();
    for (period_ms, scope, kind, start_ms, n) in rows {
        let kind = EventKind::parse(&kind).ok_or_else(|| StoreError::Invalid(format!("event kind {kind:?}")))?;
        counts.0.insert(EventKey { period_ms, scope, kind, start_ms }, n);
    }
    Ok(counts)
}

/// The tool calls and deduplicated calls of the runs that started in the whole hours
/// `[from_ms, to_ms)` (see `domain::trends::rollup::whole_hours`), from the hourly rows.
pub async fn hourly_calls(db: &Db, (from_ms, to_ms): (i64, i64)) -> StoreResult<(i64, i64)> {
    let sql = Sql::with_args(
        "SELECT CAST(COALESCE(SUM(tool_calls), 0) AS BIGINT), CAST(COALESCE(SUM(deduped_calls), 0) AS BIGINT) \
         FROM trend_runs WHERE period_ms = $1 AND start_ms >= $2 AND start_ms < $3",
        vec![HOUR_MS.into(), from_ms.into(), to_ms.into()],
    );
    Ok(db.fetch_one(sql).await?)
}

/// The costs of the finished runs that started in the whole hours `[from_ms, to_ms)`,
/// counted per bin (bin → (runs, nano-USD)), from the hourly rows of every agent.
pub async fn hourly_costs(db: &Db, (from_ms, to_ms): (i64, i64)) -> StoreResult<BTreeMap<i64, ValueSums>> {
    let sql = Sql::with_args(
        "SELECT value, CAST(SUM(runs) AS BIGINT), CAST(SUM(value_sum) AS BIGINT) FROM trend_values \
         WHERE period_ms = $1 AND scope = $2 AND measure = 'cost' AND start_ms >= $3 AND start_ms < $4 GROUP BY value",
        vec![HOUR_MS.into(), ALL_AGENTS.into(), from_ms.into(), to_ms.into()],
    );
    let rows: Vec<(i64, i64, i64)> = db.fetch_all(sql).await?;
    Ok(rows.into_iter().map(|(bin, runs, sum)| (bin, ValueSums { runs, sum })).collect())
}

/// Deletes the rollup rows that count nothing any more and started before `before_ms`
/// (retention's last step: the runs they counted are gone).
pub async fn forget_empty_before(db: &Db, before_ms: i64) -> StoreResult<()> {
    for table in ["trend_runs", "trend_values"] {
        db.execute(Sql::with_args(
            format!("DELETE FROM {table} WHERE runs = 0 AND start_ms < $1"),
            vec![before_ms.into()],
        ))
        .await?;
    }
    Ok(())
}

#[cfg(all(test, feature = "test-support"))]
mod tests {
    use super::*;

    /// The value rows' slices cover each range's window once, in whole buckets.
    #[test]
    fn the_value_slices_cover_the_window_in_whole_buckets() {
        for range in Range::ALL {
            let window = Window::ending_at(range, 1_796_000_123_456);
            let slices = bucket_slices(&window);
            assert_eq!(slices[0].0, window.start_ms, "{range:?}");
            assert_eq!(slices[VALUE_SLICES - 1].1, window.end_ms(), "{range:?}");
            for pair in slices.windows(2) {
                assert_eq!(pair[0].1, pair[1].0, "{range:?}: {slices:?}");
            }
            for (from, to) in slices {
                assert!(to > from, "{range:?}: an empty slice {slices:?}");
                assert_eq!((from - window.start_ms) % window.bucket_ms, 0, "{range:?}: {slices:?}");
            }
        }
    }

    /// Every read of the trends page, for every range, of every agent or one, on a small
    /// database: each reads a range of its table's primary key, none scans a table.
    #[tokio::test]
    async fn every_read_of_the_page_is_a_range_of_an_index() {
        let t = crate::testing::TestDb::sqlite().await;
        for range in Range::ALL {
            let window = Window::ending_at(range, super::super::now_ms());
            for agent in [None, Some("billing-bot")] {
                let (groups, values) = rollup_sql(Backend::Sqlite, &window, agent);
                let events = events_sql(&window, agent);
                let mut reads = vec![("trend_runs", groups), ("trend_events", events)];
                reads.extend(values.into_iter().map(|sql| ("trend_values", sql)));
                for (table, sql) in reads {
                    let plan: Vec<(i64, i64, i64, String)> = t.db.fetch_all(sql.query_plan()).await.unwrap();
                    let steps: Vec<&str> = plan.iter().map(|row| row.3.as_str()).collect();
                    let read = steps.iter().find(|s| s.contains(table)).unwrap_or_else(|| panic!("{steps:?}"));
                    assert!(read.starts_with("SEARCH"), "{range:?} {agent:?} scans {table}: {steps:?}");
                    let by_key = read.contains("PRIMARY KEY") || read.contains("INDEX");
                    assert!(by_key && read.contains(">"), "{range:?} {agent:?} {table} not by a range: {steps:?}");
                }
            }
        }
        t.cleanup().await;
    }
}
