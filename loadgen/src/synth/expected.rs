//! What a correct ingest should conclude about a run, using the default mapping table and
//! nothing but the spans (no tool policies): the answer key tests check a server against.
//!
//! Only what is on the wire counts. A `gen_ai.*` or OpenInference run that hit its step
//! limit shows up as an error (that is how those frameworks report limits), and those
//! conventions carry no side-effect class, idempotency key or outcome, so duplicates and
//! dedupes cannot be seen there and are expected as zero, and "completed without a read"
//! is only known when the run made no tool call at all.

use std::collections::HashMap;

use super::catalog::SideEffect;
use super::plan::{Outcome, RunPlan, Terminal};
use super::Convention;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expected {
    pub convention: Convention,
    /// completed | step_limit | budget | error | escalated; the run's last trace decides.
    pub terminal_reason: String,
    /// Step spans over all of the run's traces (a replayed step counts again).
    pub steps: usize,
    /// Tool spans over all traces: every attempt is one tool call.
    pub tool_calls: usize,
    /// Per idempotency key of a write or irreversible tool, the successful executions
    /// beyond the first, summed.
    pub duplicate_side_effects: usize,
    /// Tool spans with `tool.outcome = deduped`.
    pub deduped_calls: usize,
    /// Completed, every tool span carries a side-effect class, and none is `read` (so
    /// also: completed without any tool call).
    pub completed_without_read: bool,
}

impl Expected {
    pub(crate) fn of(plan: &RunPlan) -> Self {
        let execs = || plan.traces.iter().flat_map(|t| &t.steps).flat_map(|s| &s.tools);
        let terminal = match (plan.convention, plan.terminal()) {
            (Convention::Article, reason) => reason,
            (_, reason @ (Terminal::Completed | Terminal::Escalated)) => reason,
            (_, Terminal::StepLimit | Terminal::Budget | Terminal::Error) => Terminal::Error,
        };
        let tool_calls = execs().count();
        let mut expected = Self {
            convention: plan.convention,
            terminal_reason: terminal.as_str().to_string(),
            steps: plan.traces.iter().map(|t| t.steps.len()).sum(),
            tool_calls,
            duplicate_side_effects: 0,
            deduped_calls: 0,
            completed_without_read: terminal == Terminal::Completed && tool_calls == 0,
        };
        if plan.convention != Convention::Article {
            return expected;
        }

        let mut successes: HashMap<&str, usize> = HashMap::new();
        for exec in execs() {
            let call = &plan.calls[exec.call];
            if exec.outcome == Outcome::Ok && call.tool.side_effect.changes_state() {
                *successes.entry(&call.idempotency_key).or_default() += 1;
            }
        }
        expected.duplicate_side_effects = successes.values().map(|n| n - 1).sum();
        expected.deduped_calls = execs().filter(|e| e.outcome == Outcome::Deduped).count();
        expected.completed_without_read = terminal == Terminal::Completed
            && !execs().any(|e| plan.calls[e.call].tool.side_effect == SideEffect::Read);
        expected
    }
}
