//! The seven rules, each a pure function from the settings and the data of its window to
//! the findings that breach: none when all is well, one per breaching subject otherwise.
//! Storage reads the windows (`storage::alerts`); nothing here touches a database or a
//! clock, so each rule is tested with synthetic data, edges included.
//!
//! Windows are half-open, `(now - window, now]`, and limits are strict: "more than 20"
//! means 21 fires and 20 does not.

use super::settings::RuleSettings;
use super::{window_text, AlertItem, ItemKind, Unit};
use crate::escalations::COUNT_LIMIT;
use std::collections::BTreeMap;

/// The most items an alert keeps and lists; the rules hand over all they found, storage
/// keeps the first ones and their total, and the value still counts them all.
pub const MAX_ITEMS: usize = 50;
/// The most items read from the database for a rule whose items come from a query of
/// their own (the runs of a deduplication spike, the costliest runs): their total is exact
/// up to this many.
pub const ITEMS_READ: usize = 1000;

/// One breach the rule found.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    /// Empty for the rule as a whole; `tool:NAME` for one tool's limit.
    pub subject: String,
    pub title: String,
    pub value: f64,
    pub threshold: f64,
    pub unit: Unit,
    pub items: Vec<AlertItem>,
}

fn in_window(at_ms: i64, now_ms: i64, window_seconds: i64) -> bool {
    at_ms > now_ms - window_seconds * 1000 && at_ms <= now_ms
}

fn item(kind: ItemKind, id: &str, note: String) -> AlertItem {
    AlertItem { kind, id: id.to_string(), note }
}

/// Runs with how often each appears, most first (ties by id, so output is stable).
fn runs_by_count<'a>(run_ids: impl Iterator<Item = &'a str>) -> Vec<(&'a str, usize)> {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for id in run_ids {
        *counts.entry(id).or_default() += 1;
    }
    let mut runs: Vec<_> = counts.into_iter().collect();
    runs.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    runs
}

/// An irreversible tool call that executed (outcome ok, error or timeout).
#[derive(Debug, Clone, PartialEq)]
pub struct Execution {
    pub tool: String,
    pub run_id: String,
    pub at_ms: i64,
}

/// Rule 1: more irreversible executions in the window than the limit, overall and per
/// configured tool.
pub fn irreversible_executions(s: &RuleSettings, now_ms: i64, executions: &[Execution]) -> Vec<Finding> {
    let recent: Vec<&Execution> = executions.iter().filter(|e| in_window(e.at_ms, now_ms, s.window_seconds)).collect();
    let finding = |subject: String, what: String, limit: f64, matching: Vec<&Execution>| {
        let mut per_run: BTreeMap<&str, BTreeMap<&str, usize>> = BTreeMap::new();
        for e in &matching {
            *per_run.entry(e.run_id.as_str()).or_default().entry(e.tool.as_str()).or_default() += 1;
        }
        let items = runs_by_count(matching.iter().map(|e| e.run_id.as_str()))
            .into_iter()
            .map(|(run, _)| {
                let tools = per_run[run].iter().map(|(tool, n)| format!("{n} × {tool}")).collect::<Vec<_>>();
                item(ItemKind::Run, run, tools.join(", "))
            })
            .collect();
        Finding {
            subject,
            title: format!(
                "{} irreversible executions of {what} in {} (limit {})",
                matching.len(),
                window_text(s.window_seconds),
                limit
            ),
            value: matching.len() as f64,
            threshold: limit,
            unit: Unit::Count,
            items,
        }
    };
    let mut findings = Vec::new();
    if recent.len() as f64 > s.threshold {
        findings.push(finding(String::new(), "any tool".into(), s.threshold, recent.clone()));
    }
    for limit in &s.per_tool {
        let matching: Vec<&Execution> = recent.iter().copied().filter(|e| e.tool == limit.tool).collect();
        if matching.len() as i64 > limit.limit {
            findings.push(finding(
                format!("tool:{}", limit.tool),
                format!("`{}`", limit.tool),
                limit.limit as f64,
                matching,
            ));
        }
    }
    findings
}

/// A tool call recorded as run without a valid approval.
#[derive(Debug, Clone, PartialEq)]
pub struct Violation {
    pub run_id: String,
    pub tool: String,
    /// `no_approval`, `reused`, `payload_mismatch`…
    pub kind: String,
    pub approval_id: Option<String>,
    pub at_ms: i64,
}

/// Rule 2: any violation in the window (more than `threshold`, 0 by default).
pub fn approval_violations(s: &RuleSettings, now_ms: i64, violations: &[Violation]) -> Vec<Finding> {
    let recent: Vec<&Violation> = violations.iter().filter(|v| in_window(v.at_ms, now_ms, s.window_seconds)).collect();
    if recent.len() as f64 <= s.threshold {
        return Vec::new();
    }
    let mut items: Vec<AlertItem> = Vec::new();
    for v in &recent {
        // An unknown approval has no page to link to: its id goes into the note instead.
        let unknown = v.kind == "unknown_approval";
        let note = match (&v.approval_id, unknown) {
            (Some(id), true) => format!("{} ran with unknown approval {id}", v.tool),
            _ => format!("{} ran with {}", v.tool, v.kind.replace('_', " ")),
        };
        if !items.iter().any(|i| i.kind == ItemKind::Run && i.id == v.run_id) {
            items.push(item(ItemKind::Run, &v.run_id, note.clone()));
        }
        if let Some(approval) = v.approval_id.as_ref().filter(|_| !unknown) {
            if !items.iter().any(|i| i.kind == ItemKind::Approval && &i.id == approval) {
                items.push(item(ItemKind::Approval, approval, note));
            }
        }
    }
    vec![Finding {
        subject: String::new(),
        title: format!(
            "{} tool call(s) ran without a valid approval in {}",
            recent.len(),
            window_text(s.window_seconds)
        ),
        value: recent.len() as f64,
        threshold: s.threshold,
        unit: Unit::Count,
        items,
    }]
}

/// Tool-call totals for rule 3, summed by storage over the window and over the baseline
/// before it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DedupedCounts {
    pub window_calls: i64,
    pub window_deduped: i64,
    pub baseline_calls: i64,
    pub baseline_deduped: i64,
    /// Runs in the window with deduplicated calls, most first.
    pub runs: Vec<(String, i64)>,
}

/// Rule 3: the window's deduplicated share above `factor` times the baseline's, and at
/// least `threshold` percent (so a quiet baseline of zero does not page on one retry).
pub fn deduped_spike(s: &RuleSettings, c: &DedupedCounts) -> Vec<Finding> {
    if c.window_calls < s.min_samples.max(1) {
        return Vec::new();
    }
    let share = 100.0 * c.window_deduped as f64 / c.window_calls as f64;
    let baseline = if c.baseline_calls > 0 { 100.0 * c.baseline_deduped as f64 / c.baseline_calls as f64 } else { 0.0 };
    let limit = (s.factor * baseline).max(s.threshold);
    if share <= limit {
        return Vec::new();
    }
    vec![Finding {
        subject: String::new(),
        title: format!(
            "{share:.1}% of tool calls deduplicated in {} (baseline {baseline:.1}%, limit {limit:.1}%)",
            window_text(s.window_seconds)
        ),
        value: share,
        threshold: limit,
        unit: Unit::Percent,
        items: c.runs.iter().map(|(run, n)| item(ItemKind::Run, run, format!("{n} deduplicated call(s)"))).collect(),
    }]
}

/// An open escalation.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenEscalation {
    pub id: String,
    pub run_id: String,
    /// When the run needed a person (its escalation event's time, or the API filing
    /// time), not when the escalation was stored.
    pub needed_at_ms: i64,
    pub claimed_by: Option<String>,
}

/// The things older than the rule's `threshold` (seconds), each with its age in seconds,
/// oldest first (ties by id, so a page lists them in a stable order). Rules 4 and 7 age
/// things the same way.
fn older_than<'a, T>(
    s: &RuleSettings,
    now_ms: i64,
    things: impl Iterator<Item = &'a T>,
    since_ms: impl Fn(&T) -> i64,
    id: impl Fn(&T) -> &str,
) -> Vec<(&'a T, f64)> {
    let mut late: Vec<(&T, f64)> =
        things.map(|t| (t, (now_ms - since_ms(t)) as f64 / 1000.0)).filter(|(_, age)| *age > s.threshold).collect();
    late.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| id(a.0).cmp(id(b.0))));
    late
}

/// The open escalations rule 4 finds late: how many (and how many of those nobody has
/// claimed), and the oldest of them (only unclaimed ones when the rule asks for those),
/// oldest first, at most [`ITEMS_READ`]. Storage counts them on an index up to one past
/// [`COUNT_LIMIT`] (as the queue does) and reads only the oldest, so a queue of hundreds
/// of thousands costs an evaluation the same as one of ten thousand.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Backlog {
    pub late: i64,
    pub late_unclaimed: i64,
    pub oldest: Vec<OpenEscalation>,
}

impl Backlog {
    /// From every open escalation (tests): what storage reads for the same queue.
    pub fn of(s: &RuleSettings, now_ms: i64, open: &[OpenEscalation]) -> Backlog {
        let before = late_before_ms(s, now_ms);
        let mut late: Vec<&OpenEscalation> = open.iter().filter(|e| e.needed_at_ms < before).collect();
        late.sort_by(|a, b| a.needed_at_ms.cmp(&b.needed_at_ms).then_with(|| a.id.cmp(&b.id)));
        let up_to = |n: usize| (n as i64).min(COUNT_LIMIT + 1);
        Backlog {
            late: up_to(late.len()),
            late_unclaimed: up_to(late.iter().filter(|e| e.claimed_by.is_none()).count()),
            oldest: late
                .into_iter()
                .filter(|e| !s.only_unclaimed || e.claimed_by.is_none())
                .take(ITEMS_READ)
                .cloned()
                .collect(),
        }
    }
}

/// A backlog count as the alert says it: "10000+" once past [`COUNT_LIMIT`].
fn counted(n: i64) -> String {
    if n > COUNT_LIMIT {
        format!("{COUNT_LIMIT}+")
    } else {
        n.to_string()
    }
}

/// Rule 4's cut-off: an escalation needed before this instant has waited longer than
/// `threshold` seconds at `now_ms`.
pub fn late_before_ms(s: &RuleSettings, now_ms: i64) -> i64 {
    now_ms - (s.threshold * 1000.0).floor() as i64
}

/// Rule 4: an open escalation (or, with `only_unclaimed`, an unclaimed one) waiting
/// longer than `threshold` seconds since its run needed a person. The value is the
/// longest wait.
pub fn escalation_backlog(s: &RuleSettings, now_ms: i64, backlog: &Backlog) -> Vec<Finding> {
    let count = if s.only_unclaimed { backlog.late_unclaimed } else { backlog.late };
    let waiting = backlog.oldest.iter().filter(|e| !s.only_unclaimed || e.claimed_by.is_none());
    let late = older_than(s, now_ms, waiting, |e| e.needed_at_ms, |e| &e.id);
    if count == 0 || late.is_empty() {
        return Vec::new();
    }
    let oldest = late[0].1;
    vec![Finding {
        subject: String::new(),
        title: format!(
            "{} escalation(s) waiting longer than {} ({} unclaimed); the oldest for {}",
            counted(count),
            Unit::Seconds.format(s.threshold),
            counted(backlog.late_unclaimed),
            Unit::Seconds.format(oldest)
        ),
        value: oldest,
        threshold: s.threshold,
        unit: Unit::Seconds,
        items: late
            .iter()
            .map(|(e, age)| {
                let who = match &e.claimed_by {
                    Some(h) => format!("claimed by {h}"),
                    None => "unclaimed".to_string(),
                };
                item(
                    ItemKind::Escalation,
                    &e.id,
                    format!("run {} waiting {}, {who}", e.run_id, Unit::Seconds.format(*age)),
                )
            })
            .collect(),
    }]
}

/// A finished run's cost.
#[derive(Debug, Clone, PartialEq)]
pub struct RunCost {
    pub run_id: String,
    pub cost: f64,
    pub started_ms: i64,
}

/// The upper tail of the costs of the finished runs started in one span of time: how
/// many there are, and the highest of their costs (highest first), as many as reading
/// [`COST_QUANTILES`] by nearest rank needs. Storage reads it with a count and a
/// bounded sort (`storage::alerts::cost_tail`): a day's baseline under sustained ingest
/// holds millions of runs, far too many to read into the server every evaluation.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CostTail {
    pub runs: usize,
    pub highest: Vec<f64>,
}

/// The quantiles rule 5 compares, lowest first.
pub const COST_QUANTILES: [(&str, f64); 2] = [("p95", 0.95), ("p99", 0.99)];

impl CostTail {
    /// How many of the highest costs of `runs` runs the quantiles need: from the nearest
    /// rank of the lowest quantile to the top.
    pub fn needed(runs: usize) -> usize {
        match runs {
            0 => 0,
            n => n - nearest_rank(COST_QUANTILES[0].1, n) + 1,
        }
    }

    /// From costs counted per bin (value → (runs, summed nano-USD), the trends' rollups):
    /// each bin's runs at the bin's mean cost, the costliest first, as many as needed.
    pub fn of_counts<'a>(
        counts: impl DoubleEndedIterator<Item = (&'a i64, &'a crate::trends::rollup::ValueSums)>,
    ) -> CostTail {
        let counts: Vec<_> = counts.filter(|(_, s)| s.runs > 0).collect();
        let runs = counts.iter().map(|(_, s)| s.runs as usize).sum();
        let needed = Self::needed(runs);
        let mut highest = Vec::with_capacity(needed);
        for (_, s) in counts.into_iter().rev() {
            let mean = s.sum as f64 / s.runs as f64 / 1e9;
            highest.extend(std::iter::repeat_n(mean, (s.runs as usize).min(needed - highest.len())));
            if highest.len() == needed {
                break;
            }
        }
        CostTail { runs, highest }
    }

    /// From every cost (tests, and small windows): the same tail storage reads.
    pub fn of(mut costs: Vec<f64>) -> CostTail {
        let runs = costs.len();
        costs.sort_by(|a, b| b.total_cmp(a));
        costs.truncate(Self::needed(runs));
        CostTail { runs, highest: costs }
    }

    /// The nearest-rank quantile `q` (as `stats::quantile_sorted`), or `None` without
    /// runs or when the tail is short (runs arrived between the count and the read).
    pub fn quantile(&self, q: f64) -> Option<f64> {
        if self.runs == 0 {
            return None;
        }
        self.highest.get(self.runs - nearest_rank(q, self.runs)).copied()
    }
}

/// The 1-based rank of quantile `q` among `n` sorted values, by nearest rank.
fn nearest_rank(q: f64, n: usize) -> usize {
    ((q.clamp(0.0, 1.0) * n as f64).ceil() as usize).clamp(1, n)
}

/// What rule 5 found: a percentile of the window's cost per run above `factor` times the
/// same percentile of the baseline.
#[derive(Debug, Clone, PartialEq)]
pub struct CostJump {
    pub percentile: &'static str,
    pub value: f64,
    pub limit: f64,
    pub baseline: f64,
}

/// Rule 5: p95 or p99 cost per run of the runs started in the window above `factor`
/// times the same percentile of the runs started in the baseline before it. Each side
/// needs `min_samples` runs, and a baseline percentile of zero compares with nothing.
/// The breaching percentile furthest above its limit speaks for the alert; the runs above
/// the limit, read next, are its items ([`cost_jump_finding`]).
pub fn cost_per_run_jump(s: &RuleSettings, window: &CostTail, baseline: &CostTail) -> Option<CostJump> {
    let min = s.min_samples.max(1) as usize;
    if window.runs < min || baseline.runs < min {
        return None;
    }
    let mut worst: Option<CostJump> = None;
    for (percentile, q) in COST_QUANTILES {
        let (Some(value), Some(before)) = (window.quantile(q), baseline.quantile(q)) else { continue };
        if before <= 0.0 {
            continue;
        }
        let limit = s.factor * before;
        if value > limit && worst.as_ref().is_none_or(|w| value / limit > w.value / w.limit) {
            worst = Some(CostJump { percentile, value, limit, baseline: before });
        }
    }
    worst
}

/// The finding for a cost jump; `costliest` are the window's runs above the limit,
/// costliest first.
pub fn cost_jump_finding(s: &RuleSettings, jump: &CostJump, costliest: &[RunCost]) -> Finding {
    Finding {
        subject: String::new(),
        title: format!(
            "{} cost per run {} in {} is {:.1}× the baseline {} (limit {:.1}×)",
            jump.percentile,
            Unit::Usd.format(jump.value),
            window_text(s.window_seconds),
            jump.value / jump.baseline,
            Unit::Usd.format(jump.baseline),
            s.factor
        ),
        value: jump.value,
        threshold: jump.limit,
        unit: Unit::Usd,
        items: costliest
            .iter()
            .filter(|r| r.cost > jump.limit)
            .map(|r| item(ItemKind::Run, &r.run_id, format!("cost {}", Unit::Usd.format(r.cost))))
            .collect(),
    }
}

/// A run that ended in `error` after one of its tool calls failed.
#[derive(Debug, Clone, PartialEq)]
pub struct FailedRun {
    pub run_id: String,
    pub failed_tool: String,
    pub ended_ms: i64,
}

/// Rule 6: more such runs ended in the window than `threshold`. One failed tool call
/// never pages by itself: only runs that then ended in error count.
pub fn failed_to_recover(s: &RuleSettings, now_ms: i64, runs: &[FailedRun]) -> Vec<Finding> {
    let recent: Vec<&FailedRun> = runs.iter().filter(|r| in_window(r.ended_ms, now_ms, s.window_seconds)).collect();
    if recent.len() as f64 <= s.threshold {
        return Vec::new();
    }
    vec![Finding {
        subject: String::new(),
        title: format!(
            "{} runs ended in error after a failed tool call in {} (limit {})",
            recent.len(),
            window_text(s.window_seconds),
            s.threshold
        ),
        value: recent.len() as f64,
        threshold: s.threshold,
        unit: Unit::Count,
        items: recent
            .iter()
            .map(|r| item(ItemKind::Run, &r.run_id, format!("ended in error after {} failed", r.failed_tool)))
            .collect(),
    }]
}

/// One regression-test result from a replay fixture.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayOutcome {
    pub agent: String,
    pub fixture: String,
    pub run_id: Option<String>,
    pub passed: bool,
    pub at_ms: i64,
}

/// Rule 8: per agent, the pass rate of the window's results below `threshold` percent,
/// with at least `min_samples` results. One alert per agent (subject `agent:NAME`); the
/// items are the failed fixtures' runs.
pub fn replay_pass_rate(s: &RuleSettings, now_ms: i64, results: &[ReplayOutcome]) -> Vec<Finding> {
    let mut agents: Vec<&str> = results.iter().map(|r| r.agent.as_str()).collect();
    agents.sort_unstable();
    agents.dedup();
    let mut findings = Vec::new();
    for agent in agents {
        let recent: Vec<&ReplayOutcome> =
            results.iter().filter(|r| r.agent == agent && in_window(r.at_ms, now_ms, s.window_seconds)).collect();
        let passed = recent.iter().filter(|r| r.passed).count();
        if (recent.len() as i64) < s.min_samples.max(1) {
            continue;
        }
        let rate = passed as f64 * 100.0 / recent.len() as f64;
        if rate >= s.threshold {
            continue;
        }
        findings.push(Finding {
            subject: format!("agent:{agent}"),
            title: format!(
                "{agent} passed {passed} of {} replay tests in {} ({:.1}%, limit {}%)",
                recent.len(),
                window_text(s.window_seconds),
                rate,
                s.threshold
            ),
            value: rate,
            threshold: s.threshold,
            unit: Unit::Percent,
            items: recent
                .iter()
                .filter(|r| !r.passed)
                .filter_map(|r| r.run_id.as_ref().map(|run| item(ItemKind::Run, run, format!("{} failed", r.fixture))))
                .collect(),
        });
    }
    findings
}

/// A guarded call that started and has not reported (state `started` or `unknown`).
#[derive(Debug, Clone, PartialEq)]
pub struct SilentCall {
    pub id: String,
    pub run_id: String,
    pub tool: String,
    pub step_index: i64,
    pub natural_key: String,
    pub started_at_ms: i64,
}

/// Rule 7: a guarded call unreported for longer than `threshold` seconds. The value is
/// the oldest one's age. The ledger only marks a call `unknown` when an agent asks again,
/// so a silent `started` call counts too: an agent that died mid-call never asks again.
pub fn call_outcome_unknown(s: &RuleSettings, now_ms: i64, calls: &[SilentCall]) -> Vec<Finding> {
    let late = older_than(s, now_ms, calls.iter(), |c| c.started_at_ms, |c| &c.id);
    if late.is_empty() {
        return Vec::new();
    }
    let oldest = late[0].1;
    vec![Finding {
        subject: String::new(),
        title: format!(
            "{} guarded call(s) of unknown outcome for longer than {}; the oldest for {}",
            late.len(),
            Unit::Seconds.format(s.threshold),
            Unit::Seconds.format(oldest)
        ),
        value: oldest,
        threshold: s.threshold,
        unit: Unit::Seconds,
        items: late
            .iter()
            .map(|(c, age)| {
                let note = format!(
                    "{} step {} (natural key {}) unreported for {}",
                    c.tool,
                    c.step_index,
                    c.natural_key,
                    Unit::Seconds.format(*age)
                );
                item(ItemKind::Run, &c.run_id, note)
            })
            .collect(),
    }]
}

#[cfg(test)]
mod tests {
    use super::super::settings::ToolLimit;
    use super::super::AlertRule;
    use super::*;
    use crate::stats::quantile_sorted;

    const NOW: i64 = 1_800_000_000_000;
    const MIN: i64 = 60_000;

    fn settings(rule: AlertRule) -> RuleSettings {
        RuleSettings::default_for(rule)
    }

    fn executions(n: usize, tool: &str, at_ms: i64) -> Vec<Execution> {
        (0..n).map(|i| Execution { tool: tool.into(), run_id: format!("run-{}", i % 3), at_ms }).collect()
    }

    #[test]
    fn irreversible_fires_above_the_count_not_at_it() {
        let s = settings(AlertRule::IrreversibleExecutions);
        assert!(irreversible_executions(&s, NOW, &executions(20, "wire", NOW - MIN)).is_empty(), "20 is the limit");
        let f = irreversible_executions(&s, NOW, &executions(21, "wire", NOW - MIN));
        assert_eq!(f.len(), 1);
        assert_eq!((f[0].value, f[0].threshold, f[0].subject.as_str()), (21.0, 20.0, ""));
        assert_eq!(f[0].items.len(), 3, "the three runs behind it");
        assert_eq!(f[0].items[0].note, "7 × wire");
    }

    #[test]
    fn irreversible_counts_only_the_window() {
        let s = settings(AlertRule::IrreversibleExecutions);
        let mut old = executions(15, "wire", NOW - 10 * MIN); // exactly at the window's start: outside
        old.extend(executions(15, "wire", NOW - 9 * MIN));
        let f = irreversible_executions(&s, NOW, &old);
        assert!(f.is_empty(), "only 15 are inside (now - 10 min, now]");
        old.extend(executions(6, "wire", NOW));
        assert_eq!(irreversible_executions(&s, NOW, &old)[0].value, 21.0);
    }

    #[test]
    fn irreversible_per_tool_limit() {
        let mut s = settings(AlertRule::IrreversibleExecutions);
        s.per_tool = vec![ToolLimit { tool: "delete_account".into(), limit: 2 }];
        let mut data = executions(2, "delete_account", NOW - MIN);
        data.extend(executions(5, "send_email", NOW - MIN));
        assert!(irreversible_executions(&s, NOW, &data).is_empty(), "2 deletions is the tool's limit");
        data.extend(executions(1, "delete_account", NOW));
        let f = irreversible_executions(&s, NOW, &data);
        assert_eq!(f.len(), 1, "the overall limit (20) is not reached");
        assert_eq!(f[0].subject, "tool:delete_account");
        assert_eq!((f[0].value, f[0].threshold), (3.0, 2.0));
    }

    #[test]
    fn one_violation_is_enough_and_names_run_and_approval() {
        let s = settings(AlertRule::ApprovalViolation);
        assert!(approval_violations(&s, NOW, &[]).is_empty());
        let v = Violation {
            run_id: "r1".into(),
            tool: "wire".into(),
            kind: "payload_mismatch".into(),
            approval_id: Some("apr_1".into()),
            at_ms: NOW - MIN,
        };
        let f = approval_violations(&s, NOW, std::slice::from_ref(&v));
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].items.len(), 2);
        assert_eq!((f[0].items[0].kind, f[0].items[1].kind), (ItemKind::Run, ItemKind::Approval));
        assert_eq!(f[0].items[0].note, "wire ran with payload mismatch");
        let old = Violation { at_ms: NOW - 15 * MIN, ..v.clone() };
        assert!(approval_violations(&s, NOW, &[old]).is_empty(), "outside the 15-minute window");
        // An approval that does not exist is named, not linked.
        let forged = Violation { kind: "unknown_approval".into(), approval_id: Some("apr_x".into()), ..v };
        let f = approval_violations(&s, NOW, &[forged]);
        assert_eq!(f[0].items.len(), 1);
        assert_eq!(f[0].items[0].note, "wire ran with unknown approval apr_x");
    }

    #[test]
    fn deduped_spike_against_baseline_and_floor() {
        let s = settings(AlertRule::DedupedSpike); // factor 3, floor 5%, at least 20 calls
        let mut c = DedupedCounts {
            window_calls: 100,
            window_deduped: 12,
            baseline_calls: 1000,
            baseline_deduped: 40, // 4%: limit 12%
            runs: vec![("r1".into(), 7), ("r2".into(), 5)],
        };
        assert!(deduped_spike(&s, &c).is_empty(), "12% is exactly the limit");
        c.window_deduped = 13;
        let f = deduped_spike(&s, &c);
        assert_eq!(f.len(), 1);
        assert_eq!((f[0].value, f[0].threshold), (13.0, 12.0));
        assert_eq!(f[0].items[0].id, "r1");
        // A quiet baseline: the floor decides.
        let quiet = DedupedCounts { window_calls: 100, window_deduped: 5, ..Default::default() };
        assert!(deduped_spike(&s, &quiet).is_empty(), "5% is the floor");
        assert_eq!(deduped_spike(&s, &DedupedCounts { window_deduped: 6, ..quiet.clone() }).len(), 1);
        // Too few calls decide nothing.
        assert!(deduped_spike(&s, &DedupedCounts { window_calls: 19, window_deduped: 19, ..quiet }).is_empty());
    }

    fn escalation(id: &str, age_s: i64, claimed: Option<&str>) -> OpenEscalation {
        OpenEscalation {
            id: id.into(),
            run_id: format!("run-{id}"),
            needed_at_ms: NOW - age_s * 1000,
            claimed_by: claimed.map(Into::into),
        }
    }

    #[test]
    fn escalation_backlog_by_age_and_claim() {
        let mut s = settings(AlertRule::EscalationBacklog); // 15 min
        let backlog = |s: &RuleSettings, open: &[OpenEscalation]| Backlog::of(s, NOW, open);
        let one = [escalation("a", 900, None)];
        assert!(escalation_backlog(&s, NOW, &backlog(&s, &one)).is_empty(), "15 min is the limit");
        let open = [escalation("a", 901, Some("bob")), escalation("b", 1200, None), escalation("c", 60, None)];
        let f = escalation_backlog(&s, NOW, &backlog(&s, &open));
        assert_eq!(f[0].value, 1200.0, "the oldest's age");
        assert_eq!(f[0].items.iter().map(|i| i.id.as_str()).collect::<Vec<_>>(), ["b", "a"]);
        assert!(f[0].title.starts_with("2 escalation(s)") && f[0].title.contains("1 unclaimed"), "{}", f[0].title);
        // The count is the queue's, whatever the number of the oldest read.
        let many: Vec<OpenEscalation> = (0..1500).map(|i| escalation(&format!("e{i:04}"), 1000 + i, None)).collect();
        let read = backlog(&s, &many);
        assert_eq!((read.late, read.oldest.len(), read.oldest[0].id.as_str()), (1500, ITEMS_READ, "e1499"));
        assert!(escalation_backlog(&s, NOW, &read)[0].title.starts_with("1500 escalation(s)"));
        // Past the queue's count limit the counts stop one past it and the title says so.
        let past: Vec<OpenEscalation> =
            (0..COUNT_LIMIT + 5).map(|i| escalation(&format!("p{i:05}"), 1000 + i, None)).collect();
        let read = backlog(&s, &past);
        assert_eq!((read.late, read.late_unclaimed), (COUNT_LIMIT + 1, COUNT_LIMIT + 1));
        let title = &escalation_backlog(&s, NOW, &read)[0].title;
        assert!(title.starts_with("10000+ escalation(s)") && title.contains("(10000+ unclaimed)"), "{title}");
        s.only_unclaimed = true;
        let claimed = [escalation("a", 5000, Some("bob"))];
        let f = escalation_backlog(&s, NOW, &backlog(&s, &claimed));
        assert!(f.is_empty(), "a claimed escalation is being worked on");
    }

    #[test]
    fn a_call_unreported_past_the_threshold_fires_with_its_natural_key() {
        let s = settings(AlertRule::CallOutcomeUnknown); // 10 min
        let call = |id: &str, age_s: i64| SilentCall {
            id: id.into(),
            run_id: format!("run-{id}"),
            tool: "charge_card".into(),
            step_index: 3,
            natural_key: format!("fd-{id}"),
            started_at_ms: NOW - age_s * 1000,
        };
        assert!(call_outcome_unknown(&s, NOW, &[call("a", 600)]).is_empty(), "10 min is the limit");
        let f = call_outcome_unknown(&s, NOW, &[call("a", 601), call("b", 3600), call("c", 5)]);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].value, 3600.0, "the oldest's age");
        assert_eq!(f[0].items.iter().map(|i| i.id.as_str()).collect::<Vec<_>>(), ["run-b", "run-a"]);
        assert!(f[0].items[0].note.contains("fd-b"), "{}", f[0].items[0].note);
    }

    fn tail(groups: &[(usize, f64)]) -> CostTail {
        CostTail::of(groups.iter().flat_map(|&(n, cost)| std::iter::repeat_n(cost, n)).collect())
    }

    #[test]
    fn cost_jump_uses_upper_percentiles_not_the_mean() {
        let s = settings(AlertRule::CostPerRunJump); // 1 h window, 24 h baseline, 2×, 20 runs
        let baseline = tail(&[(200, 0.10)]); // p95 = p99 = 0.10
        assert_eq!(cost_per_run_jump(&s, &tail(&[(100, 0.10)]), &baseline), None, "no change");
        // Two runaway runs among 102 leave the mean almost unchanged but move p99.
        let jump = cost_per_run_jump(&s, &tail(&[(100, 0.10), (2, 5.00)]), &baseline).expect("fires");
        assert_eq!((jump.percentile, jump.value, jump.limit), ("p99", 5.0, 0.2));
        let runaway = |id: &str, cost| RunCost { run_id: id.into(), cost, started_ms: NOW - MIN };
        let f = cost_jump_finding(&s, &jump, &[runaway("r1", 5.0), runaway("r2", 5.0), runaway("cheap", 0.1)]);
        assert!(f.title.starts_with("p99"), "{}", f.title);
        assert_eq!((f.value, f.threshold), (5.0, 0.2));
        assert_eq!(f.items.iter().map(|i| i.id.as_str()).collect::<Vec<_>>(), ["r1", "r2"], "the runaway runs");
    }

    #[test]
    fn cost_jump_at_the_edge_and_with_too_few_runs() {
        let s = settings(AlertRule::CostPerRunJump);
        let baseline = tail(&[(100, 0.10)]);
        assert_eq!(cost_per_run_jump(&s, &tail(&[(100, 0.20)]), &baseline), None, "exactly 2× does not fire");
        assert_eq!(cost_per_run_jump(&s, &tail(&[(19, 9.0)]), &baseline), None, "19 runs decide nothing");
        assert_eq!(cost_per_run_jump(&s, &tail(&[(100, 1.0)]), &tail(&[(100, 0.0)])), None, "no multiple of zero");
    }

    #[test]
    fn the_tail_reads_the_same_quantiles_as_every_value() {
        for n in [1usize, 2, 19, 20, 21, 99, 100, 101, 1_000, 1_237] {
            // Distinct costs in a scrambled order.
            let costs: Vec<f64> = (0..n).map(|i| ((i * 7_919) % n) as f64 / 10.0).collect();
            let mut sorted = costs.clone();
            sorted.sort_by(|a, b| a.total_cmp(b));
            let t = CostTail::of(costs);
            assert_eq!(t.highest.len(), CostTail::needed(n));
            for (_, q) in COST_QUANTILES {
                assert_eq!(t.quantile(q), quantile_sorted(&sorted, q), "n = {n}, q = {q}");
            }
        }
        assert_eq!(CostTail::default().quantile(0.95), None);
        let short = CostTail { runs: 100, highest: vec![9.0] };
        assert_eq!(short.quantile(0.95), None, "a tail cut short reads nothing");
        assert_eq!(short.quantile(0.99), None);
        assert_eq!(short.quantile(1.0), Some(9.0), "the top is there");
    }

    #[test]
    fn a_tail_of_counted_costs_reads_the_quantiles_of_the_costs_they_count() {
        use crate::trends::rollup::{cost_bin, nano_usd, ValueSums};
        use std::collections::BTreeMap;
        for groups in [vec![(90, 0.1), (8, 0.5), (2, 2.0)], vec![(1, 3.0)], vec![(500, 0.02), (30, 0.07), (3, 1.25)]] {
            let costs: Vec<f64> = groups.iter().flat_map(|&(n, cost)| std::iter::repeat_n(cost, n)).collect();
            let mut bins: BTreeMap<i64, ValueSums> = BTreeMap::new();
            for c in &costs {
                let row = bins.entry(cost_bin(*c)).or_default();
                row.runs += 1;
                row.sum += nano_usd(*c);
            }
            let (counted, every) = (CostTail::of_counts(bins.iter()), CostTail::of(costs));
            assert_eq!(counted, every, "{groups:?}");
        }
        assert_eq!(CostTail::of_counts(BTreeMap::new().iter()), CostTail::default());
    }

    #[test]
    fn failed_to_recover_counts_runs_in_the_window() {
        let s = settings(AlertRule::FailedToRecover); // more than 3 in 15 min
        let run = |i: usize, ended_ms| FailedRun { run_id: format!("f{i}"), failed_tool: "fetch".into(), ended_ms };
        let mut runs: Vec<FailedRun> = (0..3).map(|i| run(i, NOW - MIN)).collect();
        runs.push(run(9, NOW - 16 * MIN));
        assert!(failed_to_recover(&s, NOW, &runs).is_empty());
        runs.push(run(3, NOW));
        let f = failed_to_recover(&s, NOW, &runs);
        assert_eq!((f[0].value, f[0].items.len()), (4.0, 4));
        assert_eq!(f[0].items[0].note, "ended in error after fetch failed");
    }

    #[test]
    fn replay_pass_rate_fires_per_agent_below_the_limit_with_enough_results() {
        let s = settings(AlertRule::ReplayPassRate); // below 90% of at least 10 in 1 d
        let result = |agent: &str, passed: bool, ago_s: i64| ReplayOutcome {
            agent: agent.into(),
            fixture: format!("f-{ago_s}"),
            run_id: Some(format!("run-{ago_s}")),
            passed,
            at_ms: NOW - ago_s * 1000,
        };
        let mut results: Vec<ReplayOutcome> = (0..9).map(|i| result("a", i > 1, i)).collect();
        assert!(replay_pass_rate(&s, NOW, &results).is_empty(), "9 results decide nothing");
        results.push(result("a", true, 9));
        results.push(result("a", false, 90_000)); // before the window
        results.extend((0..10).map(|i| result("b", true, i)));
        let f = replay_pass_rate(&s, NOW, &results);
        assert_eq!(f.len(), 1);
        assert_eq!((f[0].subject.as_str(), f[0].value), ("agent:a", 80.0));
        assert_eq!(f[0].items.len(), 2, "the two failed fixtures");
    }
}
