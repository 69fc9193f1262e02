//! Trends, the pure part: the selectable ranges and their time buckets, and the figures
//! the `/trends` charts draw, computed with no I/O from the window's rollup rows
//! ([`rollup`], kept at ingest) and per-bucket event counts ([`events`], kept as
//! escalations and approvals change). Storage reads the rows (`store::trends`); the page
//! draws the result (`routes::trends`).

pub mod events;
pub mod rollup;

use crate::canonical::TerminalReason;
use chrono::{TimeZone, Timelike, Utc};
use rollup::{counted_quantiles, usd, Measure, Rows, ValueSums, ALL_AGENTS};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

const HOUR_MS: i64 = 3_600_000;

/// The ranges the page offers, as they appear in the URL (`?range=24h|7d|30d`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
pub enum Range {
    #[default]
    #[serde(rename = "24h")]
    Day,
    #[serde(rename = "7d")]
    Week,
    #[serde(rename = "30d")]
    Month,
}

impl Range {
    pub const ALL: [Range; 3] = [Range::Day, Range::Week, Range::Month];

    /// The range named in the URL; anything else (or nothing) is the last 24 hours, so a
    /// mistyped link still shows a page.
    pub fn parse(text: Option<&str>) -> Range {
        match text.map(str::trim) {
            Some("7d") => Range::Week,
            Some("30d") => Range::Month,
            _ => Range::Day,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Range::Day => "24h",
            Range::Week => "7d",
            Range::Month => "30d",
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Range::Day => "Last 24 hours",
            Range::Week => "Last 7 days",
            Range::Month => "Last 30 days",
        }
    }

    /// Bucket size: about 24 to 30 bars whatever the range, so every chart stays readable
    /// at the same width.
    pub fn bucket_ms(self) -> i64 {
        match self {
            Range::Day => HOUR_MS,
            Range::Week => 6 * HOUR_MS,
            Range::Month => 24 * HOUR_MS,
        }
    }

    pub fn buckets(self) -> usize {
        match self {
            Range::Day => 24,
            Range::Week => 28,
            Range::Month => 30,
        }
    }
}

/// The charted time span: `buckets` buckets of `bucket_ms` from `start_ms`. Bucket edges
/// sit on whole UTC hours / days, so a bar means the same hours on every reload; the last
/// bucket holds "now" and is still filling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Window {
    pub range: Range,
    pub start_ms: i64,
    pub bucket_ms: i64,
    pub buckets: usize,
}

impl Window {
    pub fn ending_at(range: Range, now_ms: i64) -> Window {
        let bucket_ms = range.bucket_ms();
        let end = now_ms.div_euclid(bucket_ms) * bucket_ms + bucket_ms;
        let buckets = range.buckets();
        Window { range, start_ms: end - bucket_ms * buckets as i64, bucket_ms, buckets }
    }

    /// Exclusive end, in Unix milliseconds.
    pub fn end_ms(&self) -> i64 {
        self.start_ms + self.bucket_ms * self.buckets as i64
    }

    /// The bucket holding `at_ms`, if it is inside the window.
    pub fn index(&self, at_ms: i64) -> Option<usize> {
        if at_ms < self.start_ms || at_ms >= self.end_ms() {
            return None;
        }
        Some(((at_ms - self.start_ms) / self.bucket_ms) as usize)
    }

    pub fn bucket_start(&self, i: usize) -> i64 {
        self.start_ms + self.bucket_ms * i as i64
    }

    /// The x-axis caption.
    pub fn axis_caption(&self) -> &'static str {
        match self.range {
            Range::Day => "hour (UTC)",
            Range::Week => "6-hour bucket (UTC)",
            Range::Month => "day (UTC)",
        }
    }

    /// The tick label under bucket `i`, or `None` where a label would crowd its
    /// neighbours: every 3 hours, every day at midnight, every 5 days.
    pub fn tick_label(&self, i: usize) -> Option<String> {
        let at = Utc.timestamp_millis_opt(self.bucket_start(i)).single()?;
        match self.range {
            Range::Day => i.is_multiple_of(3).then(|| at.format("%H:%M").to_string()),
            Range::Week => (at.hour() == 0).then(|| at.format("%b %d").to_string()),
            Range::Month => i.is_multiple_of(5).then(|| at.format("%b %d").to_string()),
        }
    }

    /// What bucket `i` covers, for tooltips: "2025-06-12 14:00–15:00 UTC".
    pub fn bucket_title(&self, i: usize) -> String {
        let from = Utc.timestamp_millis_opt(self.bucket_start(i)).single().unwrap_or_default();
        let to = Utc.timestamp_millis_opt(self.bucket_start(i + 1)).single().unwrap_or_default();
        match self.range {
            Range::Month => format!("{}", from.format("%Y-%m-%d UTC")),
            _ if from.date_naive() == to.date_naive() => {
                format!("{}–{} UTC", from.format("%Y-%m-%d %H:%M"), to.format("%H:%M"))
            }
            _ => format!("{}–{} UTC", from.format("%Y-%m-%d %H:%M"), to.format("%Y-%m-%d %H:%M")),
        }
    }
}

/// One run as the trends count it: only the columns the charts need. What a run adds to
/// the rollups ([`Rollup::add`]).
#[derive(Debug, Clone, PartialEq)]
pub struct RunPoint {
    pub started_ms: i64,
    pub reason: TerminalReason,
    pub cost: f64,
    pub tool_calls: i64,
    pub deduped_calls: i64,
    pub duplicate_side_effects: i64,
    pub completed_without_read: bool,
    pub agent: Option<String>,
    /// The model most of its steps used (`None`: none named, or stored before 0.3.0).
    pub model: Option<String>,
}

/// Everything read from storage for one window: the rollup rows of its buckets, and how
/// many escalations and approvals changed state in each bucket, as (bucket start, count).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Inputs {
    /// The agent the figures are limited to, if one is.
    pub agent: Option<String>,
    /// Rows of the window's bucket size; rows of other sizes, other agents or outside the
    /// window are ignored, so a test may pass the rows of `Rollup::of_runs` of any runs.
    pub rollup: Rows,
    pub escalations_opened: Vec<(i64, i64)>,
    pub escalations_resolved: Vec<(i64, i64)>,
    pub approvals_requested: Vec<(i64, i64)>,
    /// Approved or denied by a person (cancelled requests are not decisions).
    pub approvals_decided: Vec<(i64, i64)>,
    pub approvals_expired: Vec<(i64, i64)>,
    /// Guarded calls the ledger answered `already_done`: (hour start, count).
    pub ledger_deduped: Vec<(i64, i64)>,
    /// Regression-test results from replay fixtures: (recorded at, agent, passed).
    pub replays: Vec<(i64, String, bool)>,
}

/// One line or bar series: a stable key (CSS class, test hook), what the legend says, and
/// one value per bucket (`None`: nothing to measure in that bucket, drawn as a gap).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Series {
    pub key: String,
    pub label: String,
    pub values: Vec<Option<f64>>,
    /// The figure the legend shows beside the label: the range's total for counts, the
    /// quantile over the whole range for costs, the overall share for percentages.
    pub summary: Option<f64>,
}

impl Series {
    fn counts(key: &str, label: &str, counts: Vec<u64>) -> Series {
        let total = counts.iter().sum::<u64>() as f64;
        Series {
            key: key.into(),
            label: label.into(),
            values: counts.into_iter().map(|c| Some(c as f64)).collect(),
            summary: Some(total),
        }
    }

    pub fn is_all_zero(&self) -> bool {
        self.values.iter().all(|v| v.unwrap_or(0.0) == 0.0)
    }
}

/// One histogram bar: the inclusive range of tool calls it counts (`hi` = `None`: and up).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bin {
    pub lo: i64,
    pub hi: Option<i64>,
    pub runs: u64,
}

impl Bin {
    pub fn label(&self) -> String {
        match self.hi {
            Some(hi) if hi == self.lo => self.lo.to_string(),
            Some(hi) => format!("{}–{hi}", self.lo),
            None => format!("{}+", self.lo),
        }
    }
}

/// Tool calls per finished run: one bar per count up to 10, then widening bins so the
/// long tail is still on the chart, with the p50, p99 and maximum stated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Histogram {
    pub bins: Vec<Bin>,
    pub runs: u64,
    pub p50: Option<f64>,
    pub p99: Option<f64>,
    pub max: Option<i64>,
}

/// The lower edges of the histogram bins after the single counts 0..=10.
const TAIL_EDGES: [i64; 4] = [11, 21, 51, 101];

pub fn histogram(tool_calls: &[i64]) -> Histogram {
    let mut counts: BTreeMap<i64, ValueSums> = BTreeMap::new();
    for &n in tool_calls {
        let row = counts.entry(n).or_default();
        row.runs += 1;
        row.sum += n;
    }
    histogram_of(&counts)
}

/// The histogram of runs counted per number of tool calls (calls → (runs, calls)).
pub fn histogram_of(counts: &BTreeMap<i64, ValueSums>) -> Histogram {
    let mut bins: Vec<Bin> = (0..=10).map(|n| Bin { lo: n, hi: Some(n), runs: 0 }).collect();
    for (i, lo) in TAIL_EDGES.iter().enumerate() {
        let hi = TAIL_EDGES.get(i + 1).map(|next| next - 1);
        bins.push(Bin { lo: *lo, hi, runs: 0 });
    }
    let counted = counts.iter().filter(|(_, s)| s.runs > 0);
    for (&n, sums) in counted.clone() {
        // The bins are few and ordered: the last one starting at or below n holds it.
        let n = n.max(0);
        if let Some(bin) = bins.iter_mut().rev().find(|b| b.lo <= n) {
            bin.runs += sums.runs as u64;
        }
    }
    let q = counted_quantiles(counted.clone(), &[0.5, 0.99], 1.0);
    Histogram {
        bins,
        runs: counted.clone().map(|(_, s)| s.runs as u64).sum(),
        p50: q[0],
        p99: q[1],
        max: counted.map(|(n, _)| *n).max(),
    }
}

/// Counts of (instant, how many) points per bucket.
pub fn weighted_counts(window: &Window, points: &[(i64, i64)]) -> Vec<u64> {
    let mut counts = vec![0u64; window.buckets];
    for &(at, n) in points {
        if let Some(i) = window.index(at) {
            counts[i] += n.max(0) as u64;
        }
    }
    counts
}

/// All the figures of the page for one window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trends {
    pub window: Window,
    /// Runs that started in the window, running ones included.
    pub runs: u64,
    /// One series per terminal reason that occurs in the window, in vocabulary order.
    pub reasons: Vec<Series>,
    pub tool_calls: Histogram,
    /// Percent of completed runs without a read tool, per bucket and overall.
    pub no_read: Series,
    /// Completed runs per bucket (the denominator of `no_read`), for the tooltips.
    pub completed: Vec<u64>,
    /// `deduped_calls` and `duplicate_side_effects` (from the runs' spans), and
    /// `ledger_deduped` (asks the execution ledger answered `already_done`).
    pub duplicates: Vec<Series>,
    /// Cost per finished run: p50, p95, p99.
    pub cost: Vec<Series>,
    /// `opened` and `resolved`.
    pub escalations: Vec<Series>,
    /// Pass rate (percent) of replay regression tests, one series per agent (the agents
    /// with the most results first, at most [`REPLAY_AGENTS`]).
    pub replay_pass_rate: Vec<Series>,
    /// `requested`, `decided` and `expired`.
    pub approvals: Vec<Series>,
    /// Cost (USD) per bucket by agent: the [`COST_GROUPS`] agents that cost most over the
    /// range (keys `agent:NAME`), the rest (`agent-other`), runs without one (`agent-none`).
    #[serde(default)]
    pub cost_by_agent: Vec<Series>,
    /// Cost per bucket by each run's main model, likewise (`model:NAME`, `model-other`,
    /// `model-none`).
    #[serde(default)]
    pub cost_by_model: Vec<Series>,
    /// The agent the figures are limited to, if one is.
    #[serde(default)]
    pub agent: Option<String>,
    /// When these figures were read (Unix ms; 0 = not said): the page states it.
    #[serde(default)]
    pub computed_at_ms: i64,
}

impl Trends {
    /// Nothing at all happened in the window: the page shows its empty state.
    pub fn is_empty(&self) -> bool {
        self.runs == 0
            && self.escalations.iter().all(Series::is_all_zero)
            && self.approvals.iter().all(Series::is_all_zero)
            && self.replay_pass_rate.is_empty()
    }
}

/// The most agents charted for replay pass rates; the rest are left out of the chart.
pub const REPLAY_AGENTS: usize = 6;

/// Pass rate per agent per bucket, in percent; `None` where an agent has no result.
fn replay_pass_rates(window: &Window, results: &[(i64, String, bool)]) -> Vec<Series> {
    let mut by_agent: Vec<(String, Vec<u64>, Vec<u64>)> = Vec::new();
    for (at, agent, passed) in results {
        let Some(i) = window.index(*at) else { continue };
        let row = match by_agent.iter().position(|(a, _, _)| a == agent) {
            Some(p) => p,
            None => {
                by_agent.push((agent.clone(), vec![0; window.buckets], vec![0; window.buckets]));
                by_agent.len() - 1
            }
        };
        by_agent[row].1[i] += 1;
        by_agent[row].2[i] += u64::from(*passed);
    }
    by_agent.sort_by(|a, b| b.1.iter().sum::<u64>().cmp(&a.1.iter().sum::<u64>()).then(a.0.cmp(&b.0)));
    by_agent
        .into_iter()
        .take(REPLAY_AGENTS)
        .map(|(agent, runs, passed)| Series {
            key: format!("replay-{agent}"),
            summary: percent(passed.iter().sum(), runs.iter().sum()),
            values: runs.iter().zip(&passed).map(|(&n, &p)| percent(p, n)).collect(),
            label: agent,
        })
        .collect()
}

/// How many agents (and models) the cost charts show one by one; the rest are summed.
pub const COST_GROUPS: usize = 6;

/// Cost per bucket grouped by name (an agent or a model), from (bucket start, name, cost
/// in nano-USD) items: the groups that cost most over the range first, each a series
/// `{prefix}:{name}`; the rest as `{prefix}-other`; runs without one as `{prefix}-none`
/// (labelled `none`).
pub fn cost_by<'a>(
    window: &Window,
    costs: impl Iterator<Item = (i64, Option<&'a str>, i64)>,
    prefix: &str,
    none: &str,
) -> Vec<Series> {
    let n = window.buckets;
    let mut groups: BTreeMap<Option<&str>, Vec<i64>> = BTreeMap::new();
    for (start_ms, name, nano) in costs {
        let Some(i) = window.index(start_ms) else { continue };
        groups.entry(name).or_insert_with(|| vec![0; n])[i] += nano.max(0);
    }
    let total = |v: &[i64]| v.iter().sum::<i64>();
    let unnamed = groups.remove(&None);
    let mut named: Vec<(&str, Vec<i64>)> = groups.into_iter().filter_map(|(g, v)| Some((g?, v))).collect();
    named.sort_by(|a, b| total(&b.1).cmp(&total(&a.1)).then_with(|| a.0.cmp(b.0)));
    let rest = if named.len() > COST_GROUPS { named.split_off(COST_GROUPS) } else { Vec::new() };
    let series = |key: String, label: String, values: Vec<i64>| Series {
        key,
        label,
        summary: Some(usd(total(&values))),
        values: values.into_iter().map(|v| Some(usd(v))).collect(),
    };
    let mut out: Vec<Series> =
        named.into_iter().map(|(name, v)| series(format!("{prefix}:{name}"), name.to_string(), v)).collect();
    if !rest.is_empty() {
        let mut sum = vec![0; n];
        for (_, v) in &rest {
            for (s, x) in sum.iter_mut().zip(v) {
                *s += x;
            }
        }
        out.push(series(format!("{prefix}-other"), format!("{} others", rest.len()), sum));
    }
    if let Some(v) = unnamed {
        out.push(series(format!("{prefix}-none"), none.to_string(), v));
    }
    out
}

/// The cost quantiles charted, with their keys.
pub const COST_QUANTILES: [(&str, f64); 3] = [("p50", 0.5), ("p95", 0.95), ("p99", 0.99)];

/// The figures of `window` from `inputs`' rows of its bucket size (and agent, when the
/// inputs name one).
pub fn compute(window: Window, inputs: &Inputs) -> Trends {
    let n = window.buckets;
    let agent = inputs.agent.as_deref();
    let mut by_reason: Vec<Vec<u64>> = vec![vec![0; n]; TerminalReason::ALL.len()];
    let mut completed = vec![0u64; n];
    let mut no_read = vec![0u64; n];
    let mut deduped = vec![0u64; n];
    let mut dup_effects = vec![0u64; n];
    let mut runs = 0u64;
    let mut agent_costs: Vec<(i64, Option<&str>, i64)> = Vec::new();
    let mut model_costs: Vec<(i64, Option<&str>, i64)> = Vec::new();
    let groups = inputs
        .rollup
        .groups
        .iter()
        .filter(|(k, s)| k.period_ms == window.bucket_ms && s.runs > 0 && agent.is_none_or(|a| k.agent == a));
    for (key, sums) in groups {
        let Some(i) = window.index(key.start_ms) else { continue };
        let count = sums.runs as u64;
        runs += count;
        let reason = TerminalReason::parse(&key.reason).unwrap_or(TerminalReason::Running);
        let r = TerminalReason::ALL.iter().position(|x| *x == reason).unwrap_or(0);
        by_reason[r][i] += count;
        deduped[i] += sums.deduped_calls.max(0) as u64;
        dup_effects[i] += sums.duplicate_side_effects.max(0) as u64;
        if reason == TerminalReason::Completed {
            completed[i] += count;
            no_read[i] += sums.no_read.max(0) as u64;
        }
        agent_costs.push((key.start_ms, named(key.agent.as_str()), sums.cost_nano));
        model_costs.push((key.start_ms, named(key.model.as_str()), sums.cost_nano));
    }

    // Costs and tool calls of finished runs, counted per value, per bucket and overall.
    let scope = agent.unwrap_or(ALL_AGENTS);
    let mut cost_rows: Vec<BTreeMap<i64, ValueSums>> = vec![BTreeMap::new(); n];
    let mut all_costs: BTreeMap<i64, ValueSums> = BTreeMap::new();
    let mut tool_calls: BTreeMap<i64, ValueSums> = BTreeMap::new();
    let values = inputs.rollup.values.iter().filter(|(k, _)| k.period_ms == window.bucket_ms && k.scope == scope);
    for (key, sums) in values {
        let Some(i) = window.index(key.start_ms) else { continue };
        let into = match key.measure {
            Measure::Cost => {
                add_sums(cost_rows[i].entry(key.value).or_default(), sums);
                &mut all_costs
            }
            Measure::ToolCalls => &mut tool_calls,
        };
        add_sums(into.entry(key.value).or_default(), sums);
    }

    let reasons = TerminalReason::ALL
        .iter()
        .zip(by_reason)
        .filter(|(_, counts)| counts.iter().any(|&c| c > 0))
        .map(|(r, counts)| Series::counts(r.as_str(), &r.as_str().replace('_', " "), counts))
        .collect();

    let all_completed: u64 = completed.iter().sum();
    let all_no_read: u64 = no_read.iter().sum();
    let no_read_series = Series {
        key: "no_read".into(),
        label: "completed without a read tool".into(),
        values: no_read.iter().zip(&completed).map(|(&k, &c)| percent(k, c)).collect(),
        summary: percent(all_no_read, all_completed),
    };

    let qs: Vec<f64> = COST_QUANTILES.iter().map(|(_, q)| *q).collect();
    let per_bucket: Vec<Vec<Option<f64>>> = cost_rows.iter().map(|rows| counted_quantiles(rows, &qs, 1e9)).collect();
    let overall = counted_quantiles(&all_costs, &qs, 1e9);
    let cost = COST_QUANTILES
        .iter()
        .enumerate()
        .map(|(k, (key, _))| Series {
            key: (*key).into(),
            label: (*key).into(),
            values: per_bucket.iter().map(|q| q[k]).collect(),
            summary: overall[k],
        })
        .collect();

    Trends {
        window,
        runs,
        reasons,
        tool_calls: histogram_of(&tool_calls),
        no_read: no_read_series,
        completed,
        duplicates: vec![
            Series::counts("deduped_calls", "deduplicated calls", deduped),
            Series::counts("duplicate_side_effects", "duplicate side effects", dup_effects),
            Series::counts("ledger_deduped", "stopped by the ledger", weighted_counts(&window, &inputs.ledger_deduped)),
        ],
        cost,
        replay_pass_rate: replay_pass_rates(&window, &inputs.replays),
        escalations: vec![
            Series::counts("opened", "opened", weighted_counts(&window, &inputs.escalations_opened)),
            Series::counts("resolved", "resolved", weighted_counts(&window, &inputs.escalations_resolved)),
        ],
        approvals: vec![
            Series::counts("requested", "requested", weighted_counts(&window, &inputs.approvals_requested)),
            Series::counts("decided", "decided", weighted_counts(&window, &inputs.approvals_decided)),
            Series::counts("expired", "expired", weighted_counts(&window, &inputs.approvals_expired)),
        ],
        cost_by_agent: cost_by(&window, agent_costs.into_iter(), "agent", "no agent named"),
        cost_by_model: cost_by(&window, model_costs.into_iter(), "model", "model not recorded"),
        agent: inputs.agent.clone(),
        computed_at_ms: 0,
    }
}

/// `name`, or `None` for the empty name rollups keep for "none".
fn named(name: &str) -> Option<&str> {
    (!name.is_empty()).then_some(name)
}

fn add_sums(row: &mut ValueSums, other: &ValueSums) {
    row.runs += other.runs;
    row.sum += other.sum;
}

fn percent(part: u64, whole: u64) -> Option<f64> {
    (whole > 0).then(|| part as f64 * 100.0 / whole as f64)
}

#[cfg(test)]
mod tests {
    use super::rollup::Rollup;
    use super::*;

    // 2025-06-12 14:25:00 UTC
    const NOW: i64 = 1_749_738_300_000;

    fn run(started_ms: i64, reason: TerminalReason, cost: f64, tool_calls: i64) -> RunPoint {
        RunPoint {
            started_ms,
            reason,
            cost,
            tool_calls,
            deduped_calls: 0,
            duplicate_side_effects: 0,
            completed_without_read: false,
            agent: None,
            model: None,
        }
    }

    #[test]
    fn cost_by_agent_names_the_costliest_and_sums_the_rest() {
        let w = Window::ending_at(Range::Day, NOW);
        let t0 = w.start_ms;
        let mut runs = Vec::new();
        for (i, cost) in [5.0, 1.0, 2.0, 3.0, 4.0, 6.0, 0.5, 0.25].iter().enumerate() {
            let mut r = run(t0 + i as i64, TerminalReason::Completed, *cost, 1);
            r.agent = Some(format!("agent-{i}"));
            runs.push(r);
        }
        let mut nameless = run(NOW, TerminalReason::Running, 0.75, 1);
        nameless.model = Some("gpt-4o".into());
        runs.push(nameless);
        let t = compute(w, &Inputs { rollup: Rollup::of_runs(&runs).into(), ..Inputs::default() });
        let s = &t.cost_by_agent;
        let keys: Vec<&str> = s.iter().map(|s| s.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "agent:agent-5",
                "agent:agent-0",
                "agent:agent-4",
                "agent:agent-3",
                "agent:agent-2",
                "agent:agent-1",
                "agent-other",
                "agent-none"
            ]
        );
        assert_eq!(s[6].label, "2 others");
        assert_eq!(s[6].summary, Some(0.75));
        assert_eq!((s[7].values[23], s[7].summary), (Some(0.75), Some(0.75)), "a running run's cost so far counts");
        assert_eq!(s[0].values[0], Some(6.0));
        let by_model = &t.cost_by_model;
        assert_eq!(by_model[0].key, "model:gpt-4o");
        assert_eq!(by_model[1].summary, Some(21.75));
    }

    #[test]
    fn ranges_parse_from_the_url_and_default_to_a_day() {
        assert_eq!(Range::parse(Some("7d")), Range::Week);
        assert_eq!(Range::parse(Some("30d")), Range::Month);
        assert_eq!(Range::parse(Some("24h")), Range::Day);
        assert_eq!(Range::parse(Some("1y")), Range::Day);
        assert_eq!(Range::parse(None), Range::Day);
        for r in Range::ALL {
            assert_eq!(Range::parse(Some(r.as_str())), r);
        }
    }

    #[test]
    fn bucket_size_follows_the_range() {
        assert_eq!(Range::Day.bucket_ms(), HOUR_MS);
        assert_eq!(Range::Week.bucket_ms(), 6 * HOUR_MS);
        assert_eq!(Range::Month.bucket_ms(), 24 * HOUR_MS);
        for r in Range::ALL {
            let w = Window::ending_at(r, NOW);
            // each window covers at least the range and ends in the bucket holding now
            assert!(w.end_ms() - w.start_ms >= r.bucket_ms() * r.buckets() as i64);
            assert_eq!(w.index(NOW), Some(w.buckets - 1));
            assert_eq!(w.start_ms % w.bucket_ms, 0, "{r:?} buckets start on whole UTC hours/days");
        }
    }

    #[test]
    fn window_indexes_and_labels() {
        let w = Window::ending_at(Range::Day, NOW);
        assert_eq!(w.end_ms(), 1_749_740_400_000); // 15:00
        assert_eq!(w.start_ms, 1_749_654_000_000); // yesterday 15:00
        assert_eq!(w.index(w.start_ms), Some(0));
        assert_eq!(w.index(w.start_ms - 1), None);
        assert_eq!(w.index(w.end_ms()), None);
        assert_eq!(w.tick_label(0).as_deref(), Some("15:00"));
        assert_eq!(w.tick_label(1), None);
        assert_eq!(w.bucket_title(23), "2025-06-12 14:00–15:00 UTC");
        assert_eq!(w.bucket_title(9), "2025-06-12 00:00–01:00 UTC");

        let week = Window::ending_at(Range::Week, NOW);
        let labelled: Vec<String> = (0..week.buckets).filter_map(|i| week.tick_label(i)).collect();
        assert_eq!(labelled.len(), 7, "one label a day: {labelled:?}");
        assert_eq!(labelled.last().map(String::as_str), Some("Jun 12"));

        let month = Window::ending_at(Range::Month, NOW);
        assert_eq!(month.bucket_title(29), "2025-06-12 UTC");
    }

    #[test]
    fn histogram_keeps_the_tail_and_states_p99_and_max() {
        let mut calls: Vec<i64> = vec![0, 1, 1, 2, 3, 10, 11, 20, 21, 50, 51, 100, 101];
        calls.extend(std::iter::repeat_n(4, 87));
        calls.push(5000);
        let h = histogram(&calls);
        let labels: Vec<String> = h.bins.iter().map(Bin::label).collect();
        assert_eq!(labels[..3], ["0", "1", "2"]);
        assert_eq!(labels[11..], ["11–20", "21–50", "51–100", "101+"]);
        let count = |label: &str| h.bins.iter().find(|b| b.label() == label).unwrap().runs;
        assert_eq!(count("1"), 2);
        assert_eq!(count("4"), 87);
        assert_eq!(count("11–20"), 2);
        assert_eq!(count("21–50"), 2);
        assert_eq!(count("51–100"), 2);
        assert_eq!(count("101+"), 2, "101 and the 5000 outlier both stay visible");
        assert_eq!(h.runs, 101);
        assert_eq!(h.bins.iter().map(|b| b.runs).sum::<u64>(), 101);
        assert_eq!(h.max, Some(5000));
        assert_eq!(h.p50, Some(4.0));
        assert_eq!(h.p99, Some(101.0));
        assert_eq!(histogram(&[]).max, None);
    }

    #[test]
    fn cost_quantiles_from_bins_stay_within_two_percent_and_an_agent_sees_its_own_runs() {
        let w = Window::ending_at(Range::Week, NOW);
        let runs: Vec<RunPoint> = (0..500)
            .map(|i| {
                let mut r = run(
                    w.start_ms + i64::from(i) * 600_000,
                    TerminalReason::Completed,
                    0.001 * 1.013f64.powi(i),
                    i64::from(i % 7),
                );
                r.agent = Some(if i % 2 == 0 { "a" } else { "b" }.into());
                r
            })
            .collect();
        let qs: Vec<f64> = COST_QUANTILES.iter().map(|(_, q)| *q).collect();
        let exact = crate::stats::quantiles(runs.iter().map(|r| r.cost).collect(), &qs);
        let rollup: Rows = Rollup::of_runs(&runs).into();
        let t = compute(w, &Inputs { rollup: rollup.clone(), ..Inputs::default() });
        for (series, exact) in t.cost.iter().zip(exact) {
            let (got, exact) = (series.summary.unwrap(), exact.unwrap());
            assert!((got - exact).abs() / exact <= 0.02, "{}: {got} for {exact}", series.key);
        }
        let of_a = compute(w, &Inputs { agent: Some("a".into()), rollup, ..Inputs::default() });
        assert_eq!((of_a.runs, of_a.agent.as_deref()), (250, Some("a")));
        let a_calls: Vec<i64> = runs.iter().filter(|r| r.agent.as_deref() == Some("a")).map(|r| r.tool_calls).collect();
        assert_eq!(of_a.tool_calls, histogram(&a_calls));
        assert_eq!(of_a.cost_by_agent.len(), 1);
    }

    #[test]
    fn counts_land_in_their_buckets() {
        let w = Window::ending_at(Range::Day, NOW);
        let points = [(w.start_ms, 1), (w.start_ms + 1, 2), (NOW, 1), (w.start_ms - 1, 5), (w.end_ms(), 5)];
        let counts = weighted_counts(&w, &points);
        assert_eq!(counts[0], 3);
        assert_eq!(counts[23], 1);
        assert_eq!(counts.iter().sum::<u64>(), 4);
    }

    #[test]
    fn compute_charts_reasons_share_costs_and_lifecycles() {
        let w = Window::ending_at(Range::Day, NOW);
        let t0 = w.start_ms;
        let mut noread = run(t0, TerminalReason::Completed, 0.10, 3);
        noread.completed_without_read = true;
        let mut dup = run(t0 + 10, TerminalReason::Completed, 0.30, 5);
        dup.deduped_calls = 2;
        dup.duplicate_side_effects = 1;
        let runs = [
            noread,
            dup,
            run(t0 + 20, TerminalReason::StepLimit, 0.20, 40),
            run(NOW, TerminalReason::Running, 9.0, 1),
            run(t0 - 1, TerminalReason::Error, 1.0, 1), // before the window
        ];
        let inputs = Inputs {
            agent: None,
            rollup: Rollup::of_runs(&runs).into(),
            escalations_opened: vec![(t0, 1), (NOW, 1)],
            escalations_resolved: vec![(NOW, 1)],
            approvals_requested: vec![(t0, 2), (NOW, 1)],
            approvals_decided: vec![(NOW, 1)],
            approvals_expired: vec![],
            ledger_deduped: vec![(t0, 3), (NOW - NOW % 3_600_000, 4), (t0 - 3_600_000, 9)],
            replays: vec![
                (t0, "billing".into(), true),
                (t0 + 1, "billing".into(), false),
                (NOW, "billing".into(), true),
                (NOW, "support".into(), true),
                (t0 - 1, "support".into(), false),
            ],
        };
        let t = compute(w, &inputs);
        assert_eq!(t.runs, 4);
        let keys: Vec<&str> = t.reasons.iter().map(|s| s.key.as_str()).collect();
        assert_eq!(keys, ["completed", "step_limit", "running"], "only reasons that occur");
        assert_eq!(t.reasons[0].values[0], Some(2.0));
        assert_eq!(t.reasons[0].summary, Some(2.0));
        assert_eq!(t.reasons[1].label, "step limit");
        assert_eq!(t.no_read.values[0], Some(50.0));
        assert_eq!(t.no_read.values[1], None, "no completed runs: a gap, not 0 %");
        assert_eq!(t.no_read.summary, Some(50.0));
        assert_eq!(t.duplicates[0].summary, Some(2.0));
        assert_eq!(t.duplicates[1].values[0], Some(1.0));
        assert_eq!(t.duplicates[2].key, "ledger_deduped");
        assert_eq!((t.duplicates[2].values[0], t.duplicates[2].values[23]), (Some(3.0), Some(4.0)));
        assert_eq!(t.duplicates[2].summary, Some(7.0), "the hour before the window is left out");
        let billing = &t.replay_pass_rate[0];
        assert_eq!((billing.label.as_str(), billing.values[0], billing.values[1]), ("billing", Some(50.0), None));
        assert_eq!(billing.summary.map(|s| s.round()), Some(67.0));
        assert_eq!(t.replay_pass_rate[1].summary, Some(100.0), "support's failure was before the window");
        // the running run is left out of costs and tool calls
        assert_eq!(t.tool_calls.runs, 3);
        assert_eq!(t.tool_calls.max, Some(40));
        assert_eq!(t.cost[0].key, "p50");
        assert_eq!(t.cost[0].values[0], Some(0.20));
        assert_eq!(t.cost[2].values[0], Some(0.30));
        assert_eq!(t.cost[2].values[23], None);
        assert_eq!(t.cost[1].summary, Some(0.30));
        assert_eq!(t.escalations[0].summary, Some(2.0));
        assert_eq!(t.escalations[1].values[23], Some(1.0));
        assert_eq!(t.approvals[0].values[0], Some(2.0));
        assert!(t.approvals[2].is_all_zero());
        assert!(!t.is_empty());
        assert!(compute(w, &Inputs::default()).is_empty());
    }
}
