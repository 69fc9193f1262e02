//! Rollups: what each run adds to the trends' totals per bucket, so a chart reads a few
//! thousand bucket rows instead of every run of its range. Pure: the write path adds a
//! run's contribution when it stores the run and takes the old one away when the run
//! changes or goes (`store::trends`); the page turns a window's rows into figures
//! ([`super::compute`]).
//!
//! Totals are kept for every bucket size the page draws (an hour, six hours, a day), so a
//! range reads its own buckets and never adds up smaller ones. Every total is an integer
//! (costs in nano-USD), so adding and taking away runs in any order leaves exactly what a
//! rebuild from the runs gives. Costs and tool calls, whose quantiles the page states,
//! are kept as counts per value: tool calls per exact count, costs per bin
//! [`COST_BIN_RATIO`] wide with the sum of the costs in each, so a quantile is the mean
//! cost of the bin it falls in: exact when that bin's runs cost the same, within 2 %
//! otherwise.

use super::{Range, RunPoint};
use crate::canonical::TerminalReason;
use std::collections::{BTreeMap, HashMap};

/// The bucket sizes rollups are kept for: each range's own.
pub fn periods() -> [i64; 3] {
    Range::ALL.map(Range::bucket_ms)
}

/// Each cost bin's upper edge over its lower one: a bin's mean is within 2 % of any cost
/// in it.
pub const COST_BIN_RATIO: f64 = 1.02;

/// The bin of costs of zero (and of the non-numbers no priced run has).
pub const ZERO_COST_BIN: i64 = -1_000_000;

/// The scope of the value rows that count every agent's runs (an agent's own rows have
/// its name; agent names are never empty).
pub const ALL_AGENTS: &str = "";

/// The cost bin of `cost` (USD): bins grow by [`COST_BIN_RATIO`], so a hundredth of a cent
/// and a hundred dollars are both a bin of their own.
pub fn cost_bin(cost: f64) -> i64 {
    if cost.is_nan() || cost <= 0.0 {
        return ZERO_COST_BIN;
    }
    ((cost.ln() / COST_BIN_RATIO.ln()).floor() as i64).max(ZERO_COST_BIN + 1)
}

/// `cost` (USD) in whole nano-dollars, the unit every cost total is kept in (negative
/// costs, which derivation never gives, count as zero).
pub fn nano_usd(cost: f64) -> i64 {
    if cost.is_finite() && cost > 0.0 {
        (cost * 1e9).round() as i64
    } else {
        0
    }
}

/// USD from nano-dollars.
pub fn usd(nano: i64) -> f64 {
    nano as f64 / 1e9
}

/// A group of runs that started in one bucket: by agent, main model and reason (`""` for
/// no agent or no model).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GroupKey {
    pub period_ms: i64,
    pub start_ms: i64,
    pub agent: String,
    pub model: String,
    pub reason: String,
}

/// What a group of runs adds up to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GroupSums {
    pub runs: i64,
    /// Tool calls made (running runs' so far).
    pub tool_calls: i64,
    /// Completed runs without a read tool (only a completed group has any).
    pub no_read: i64,
    pub deduped_calls: i64,
    pub duplicate_side_effects: i64,
    /// What the runs cost (running ones so far), in nano-USD.
    pub cost_nano: i64,
}

impl GroupSums {
    fn add(&mut self, other: &GroupSums, sign: i64) {
        self.runs += sign * other.runs;
        self.tool_calls += sign * other.tool_calls;
        self.no_read += sign * other.no_read;
        self.deduped_calls += sign * other.deduped_calls;
        self.duplicate_side_effects += sign * other.duplicate_side_effects;
        self.cost_nano += sign * other.cost_nano;
    }

    fn is_zero(&self) -> bool {
        *self == GroupSums::default()
    }
}

/// What a value row counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Measure {
    /// Finished runs per cost bin ([`cost_bin`]), with their cost in nano-USD.
    Cost,
    /// Finished runs per number of tool calls, with their calls.
    ToolCalls,
}

impl Measure {
    pub fn as_str(self) -> &'static str {
        match self {
            Measure::Cost => "cost",
            Measure::ToolCalls => "tool_calls",
        }
    }

    pub fn parse(text: &str) -> Option<Measure> {
        match text {
            "cost" => Some(Measure::Cost),
            "tool_calls" => Some(Measure::ToolCalls),
            _ => None,
        }
    }
}

/// The finished runs of one scope (every agent, [`ALL_AGENTS`], or one agent) that
/// started in one bucket and had one value of a measure.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ValueKey {
    pub period_ms: i64,
    pub scope: String,
    pub measure: Measure,
    pub start_ms: i64,
    pub value: i64,
}

/// How many runs a value row counts, and the sum of their values (nano-USD for costs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ValueSums {
    pub runs: i64,
    pub sum: i64,
}

/// The hours whose rollup rows stand for `(from_ms, to_ms]`: from the hour `from_ms` falls
/// in up to the hour `to_ms` falls in, as `[start, end)` in Unix ms. A day's baseline read
/// this way ends up to an hour before `to_ms` and is as long.
pub fn whole_hours(from_ms: i64, to_ms: i64) -> (i64, i64) {
    let hour = Range::Day.bucket_ms();
    (from_ms.div_euclid(hour) * hour, to_ms.div_euclid(hour) * hour)
}

/// Rollup rows: a change to apply (a write's runs added, their old selves taken away) or
/// what a window holds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rollup {
    pub groups: BTreeMap<GroupKey, GroupSums>,
    pub values: BTreeMap<ValueKey, ValueSums>,
}

impl Rollup {
    /// The rows `runs` add up to, for every period.
    pub fn of_runs<'a>(runs: impl IntoIterator<Item = &'a RunPoint>) -> Rollup {
        let mut rollup = Rollup::default();
        rollup.add_all(runs, 1);
        rollup
    }

    /// Adds `run` (`sign` 1) or takes it away (`sign` -1), in every period.
    pub fn add(&mut self, run: &RunPoint, sign: i64) {
        self.add_all(std::iter::once(run), sign);
    }

    /// Adds `runs` (`sign` 1) or takes them away (`sign` -1), in every period: first
    /// summed per hour and row, keyed by the runs' own text, then spread over the periods
    /// (each a whole number of hours). A day's runs leaving at once, hundreds of
    /// thousands, cost a map entry per run keyed by borrowed text, not fifteen keyed by
    /// new text.
    pub fn add_all<'a>(&mut self, runs: impl IntoIterator<Item = &'a RunPoint>, sign: i64) {
        let hour = Range::Day.bucket_ms();
        let mut groups: HashMap<(i64, &str, &str, TerminalReason), GroupSums> = HashMap::new();
        let mut values: HashMap<(i64, &str, Measure, i64), ValueSums> = HashMap::new();
        for run in runs {
            let start_ms = run.started_ms.div_euclid(hour) * hour;
            let agent = run.agent.as_deref().filter(|a| !a.is_empty());
            let model = run.model.as_deref().unwrap_or("");
            let completed = run.reason == TerminalReason::Completed;
            let sums = GroupSums {
                runs: 1,
                tool_calls: run.tool_calls.max(0),
                no_read: i64::from(completed && run.completed_without_read),
                deduped_calls: run.deduped_calls.max(0),
                duplicate_side_effects: run.duplicate_side_effects.max(0),
                cost_nano: nano_usd(run.cost),
            };
            groups.entry((start_ms, agent.unwrap_or(""), model, run.reason)).or_default().add(&sums, sign);
            // A running run's cost and tool calls are still growing: counting them would
            // pull the distributions down for the newest bucket only.
            if run.reason == TerminalReason::Running {
                continue;
            }
            let measures = [
                (Measure::Cost, cost_bin(run.cost), nano_usd(run.cost)),
                (Measure::ToolCalls, run.tool_calls, run.tool_calls),
            ];
            for scope in std::iter::once(ALL_AGENTS).chain(agent) {
                for (measure, value, sum) in measures {
                    let row = values.entry((start_ms, scope, measure, value)).or_default();
                    row.runs += sign;
                    row.sum += sign * sum;
                }
            }
        }
        for period_ms in periods() {
            debug_assert_eq!(period_ms % hour, 0, "a period is a whole number of hours");
            let bucket = |start_ms: i64| start_ms.div_euclid(period_ms) * period_ms;
            for (&(start_ms, agent, model, reason), sums) in &groups {
                let key = GroupKey {
                    period_ms,
                    start_ms: bucket(start_ms),
                    agent: agent.to_string(),
                    model: model.to_string(),
                    reason: reason.as_str().to_string(),
                };
                self.groups.entry(key).or_default().add(sums, 1);
            }
            for (&(start_ms, scope, measure, value), sums) in &values {
                let key = ValueKey { period_ms, scope: scope.to_string(), measure, start_ms: bucket(start_ms), value };
                let row = self.values.entry(key).or_default();
                row.runs += sums.runs;
                row.sum += sums.sum;
            }
        }
    }

    /// Adds `other`'s rows to these.
    pub fn merge(&mut self, other: &Rollup) {
        for (key, sums) in &other.groups {
            self.groups.entry(key.clone()).or_default().add(sums, 1);
        }
        for (key, sums) in &other.values {
            let row = self.values.entry(key.clone()).or_default();
            row.runs += sums.runs;
            row.sum += sums.sum;
        }
    }

    /// Without the rows that add nothing: a run whose figures did not change in a write
    /// leaves only zeros behind, and those need no statement.
    pub fn without_zeros(mut self) -> Rollup {
        self.groups.retain(|_, sums| !sums.is_zero());
        self.values.retain(|_, sums| *sums != ValueSums::default());
        self
    }

    pub fn is_empty(&self) -> bool {
        self.groups.is_empty() && self.values.is_empty()
    }
}

/// Rollup rows as a window's read returns them: listed, not keyed (a window's ten
/// thousand value rows went into a map at several microseconds each, a large part of a page's
/// time), for [`super::compute`], which keys only what it adds up.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rows {
    pub groups: Vec<(GroupKey, GroupSums)>,
    pub values: Vec<(ValueKey, ValueSums)>,
}

impl From<Rollup> for Rows {
    fn from(rollup: Rollup) -> Rows {
        Rows { groups: rollup.groups.into_iter().collect(), values: rollup.values.into_iter().collect() }
    }
}

/// The nearest-rank quantiles `qs` of the values counted in `counts` (value → (runs,
/// sum)), in ascending value order, each given as its row's mean (`sum / runs`, divided
/// by `unit`): the same rank [`crate::stats::quantile_sorted`] picks.
pub fn counted_quantiles<'a>(
    counts: impl IntoIterator<Item = (&'a i64, &'a ValueSums)>,
    qs: &[f64],
    unit: f64,
) -> Vec<Option<f64>> {
    let rows: Vec<(i64, ValueSums)> = counts.into_iter().filter(|(_, s)| s.runs > 0).map(|(v, s)| (*v, *s)).collect();
    let total: i64 = rows.iter().map(|(_, s)| s.runs).sum();
    qs.iter()
        .map(|&q| {
            if total == 0 {
                return None;
            }
            let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as i64).clamp(1, total);
            let mut seen = 0;
            rows.iter().find_map(|(_, s)| {
                seen += s.runs;
                (seen >= rank).then(|| s.sum as f64 / s.runs as f64 / unit)
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(started_ms: i64, reason: TerminalReason, cost: f64, tool_calls: i64, agent: Option<&str>) -> RunPoint {
        RunPoint {
            started_ms,
            reason,
            cost,
            tool_calls,
            deduped_calls: 1,
            duplicate_side_effects: 0,
            completed_without_read: true,
            agent: agent.map(str::to_string),
            model: Some("gpt-4.1".into()),
        }
    }

    /// Runs summed together give the rows each gives alone, added up; and a day's rows
    /// count exactly the day's finished runs, per scope, spread over its hours.
    #[test]
    fn runs_added_together_give_the_rows_of_each_added_alone() {
        let hour = Range::Day.bucket_ms();
        let day = 20_000 * 24 * hour;
        let mut runs = Vec::new();
        for i in 0..200i64 {
            let reason = [TerminalReason::Completed, TerminalReason::Error, TerminalReason::Running][(i % 3) as usize];
            let agent = [Some("billing"), Some("triage"), None, Some("")][(i % 4) as usize];
            let mut r = run(day + (i % 30) * hour + i, reason, 0.01 * (i % 7) as f64, i % 5, agent);
            if i % 6 == 0 {
                r.model = None;
            }
            runs.push(r);
        }
        let mut together = Rollup::default();
        together.add_all(&runs, 1);
        let mut alone = Rollup::default();
        for r in &runs {
            alone.add(r, 1);
        }
        assert_eq!(together, alone);
        let finished = |scope: Option<&str>| {
            runs.iter()
                .filter(|r| r.started_ms < day + 24 * hour && r.reason != TerminalReason::Running)
                .filter(|r| scope.is_none_or(|s| r.agent.as_deref() == Some(s)))
                .count() as i64
        };
        let day_runs = |scope: &str| -> i64 {
            together
                .values
                .iter()
                .filter(|(k, _)| k.period_ms == 24 * hour && k.start_ms == day && k.measure == Measure::Cost)
                .filter(|(k, _)| k.scope == scope)
                .map(|(_, v)| v.runs)
                .sum()
        };
        assert_eq!(day_runs(ALL_AGENTS), finished(None));
        assert_eq!(day_runs("billing"), finished(Some("billing")));
        let hours: std::collections::BTreeSet<i64> =
            together.groups.keys().filter(|k| k.period_ms == hour).map(|k| k.start_ms).collect();
        assert_eq!(hours.len(), 30, "one hour bucket per hour the runs started in");
        let mut gone = together.clone();
        gone.add_all(runs.iter().rev(), -1);
        assert!(gone.without_zeros().is_empty(), "taking the runs away leaves nothing");
    }

    #[test]
    fn a_cost_bin_is_two_percent_wide() {
        assert_eq!(cost_bin(0.0), ZERO_COST_BIN);
        assert_eq!(cost_bin(-1.0), ZERO_COST_BIN);
        assert_eq!(cost_bin(f64::NAN), ZERO_COST_BIN);
        let mut cost = 1e-6;
        while cost < 1e4 {
            let bin = cost_bin(cost);
            let (lo, hi) = (COST_BIN_RATIO.powi(bin as i32), COST_BIN_RATIO.powi(bin as i32 + 1));
            assert!(lo <= cost * (1.0 + 1e-12) && cost < hi * (1.0 + 1e-12), "{cost} in [{lo}, {hi})");
            // Any mean of costs in one bin is within 2 % of each of them.
            assert!((hi - lo) / lo < 0.0201);
            cost *= 1.37;
        }
        assert!(cost_bin(0.0103) > cost_bin(0.01), "costs 3 % apart are never in one bin");
        assert_eq!(nano_usd(0.2), 200_000_000);
        assert_eq!(nano_usd(-3.0), 0);
        assert_eq!(usd(nano_usd(12.345678901)), 12.345678901);
    }

    #[test]
    fn a_run_is_counted_in_every_period_and_taking_it_away_leaves_nothing() {
        let hour = 3_600_000;
        let done = run(30 * hour + 5, TerminalReason::Completed, 0.25, 3, Some("billing"));
        let rollup = Rollup::of_runs([&done]);
        let starts: Vec<(i64, i64)> = rollup.groups.keys().map(|k| (k.period_ms, k.start_ms)).collect();
        assert_eq!(starts, [(hour, 30 * hour), (6 * hour, 30 * hour), (24 * hour, 24 * hour)]);
        let sums = rollup.groups.values().next().unwrap();
        assert_eq!(
            (sums.runs, sums.tool_calls, sums.no_read, sums.deduped_calls, sums.cost_nano),
            (1, 3, 1, 1, 250_000_000)
        );
        // Values for every agent and for the run's own, per period and measure.
        assert_eq!(rollup.values.len(), 3 * 2 * 2);
        assert!(rollup.values.keys().any(|k| k.scope == "billing" && k.measure == Measure::ToolCalls && k.value == 3));

        let mut change = rollup.clone();
        change.add(&done, -1);
        assert!(change.without_zeros().is_empty(), "a run unchanged by a write writes nothing");

        // A running run counts by reason, but not in the distributions; nor does an
        // agent-less run get an agent's rows.
        let running = Rollup::of_runs([&run(0, TerminalReason::Running, 1.0, 9, None)]);
        assert!(running.values.is_empty());
        assert_eq!(running.groups.keys().next().unwrap().agent, "");
        let nameless = Rollup::of_runs([&run(0, TerminalReason::Error, 1.0, 9, Some(""))]);
        assert!(nameless.values.keys().all(|k| k.scope == ALL_AGENTS), "an empty name is no agent");
        // Only a completed run can be completed without a read.
        assert_eq!(nameless.groups.values().next().unwrap().no_read, 0);
    }

    #[test]
    fn a_baseline_reads_the_whole_hours_from_its_start_to_the_windows() {
        let hour = 3_600_000;
        assert_eq!(whole_hours(10 * hour + 5, 34 * hour + 59), (10 * hour, 34 * hour));
        assert_eq!(whole_hours(10 * hour, 34 * hour), (10 * hour, 34 * hour));
    }

    #[test]
    fn counted_quantiles_pick_the_same_rank_as_over_the_values() {
        let values: Vec<f64> = (1..=100).map(f64::from).chain([7.0, 7.0, 250.0]).collect();
        let mut counts: BTreeMap<i64, ValueSums> = BTreeMap::new();
        for v in &values {
            let row = counts.entry(*v as i64).or_default();
            row.runs += 1;
            row.sum += *v as i64;
        }
        let qs = [0.0, 0.5, 0.95, 0.99, 1.0];
        assert_eq!(counted_quantiles(&counts, &qs, 1.0), crate::stats::quantiles(values, &qs));
        assert_eq!(counted_quantiles(&BTreeMap::new(), &qs, 1.0), vec![None; 5]);
    }
}
