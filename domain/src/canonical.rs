//! The canonical run model every page, API and alert reads: runs, steps, tool calls and
//! their vocabularies. Attribute names never appear here; the mapping layer
//! (`ingest::mapping`) turns whatever an agent sent into these types.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// What stands in, everywhere it is stored and shown, for a secret Flightdeck redacted.
pub const REDACTED: &str = "[REDACTED]";

use crate::vocabulary::vocabulary;

vocabulary! {
    /// Why a run stopped. `Running` until the root span ends.
    TerminalReason {
        Completed = "completed",
        StepLimit = "step_limit",
        Budget = "budget",
        Error = "error",
        Escalated = "escalated",
        Running = "running",
    }
}

impl TerminalReason {
    /// Step-limit and budget stops did not finish the task: never count them as success.
    pub fn is_finished_successfully(self) -> bool {
        self == TerminalReason::Completed
    }
}

vocabulary! {
    /// What started a run.
    Trigger {
        User = "user",
        Schedule = "schedule",
        Webhook = "webhook",
        Retry = "retry",
        Unknown = "unknown",
    }
}

vocabulary! {
    /// What a tool does to the world; every policy hangs off this class.
    SideEffect {
        None = "none",
        Read = "read",
        Write = "write",
        Irreversible = "irreversible",
        Unknown = "unknown",
    }
}

impl SideEffect {
    /// Whether a second successful execution is a duplicate side effect.
    pub fn changes_the_world(self) -> bool {
        matches!(self, SideEffect::Write | SideEffect::Irreversible)
    }
}

vocabulary! {
    /// How one tool call ended.
    Outcome {
        Ok = "ok",
        Error = "error",
        Deduped = "deduped",
        Denied = "denied",
        Timeout = "timeout",
        Unknown = "unknown",
    }
}

vocabulary! {
    /// How a run's cost was arrived at.
    CostSource {
        /// The agent reported it (`budget.cost_spent`).
        Agent = "agent",
        /// Derived from every step's tokens and the price table.
        Prices = "prices",
        /// Derived from the steps whose model has a price; others had none, so the
        /// figure is a lower bound.
        Partial = "partial",
        /// The run used tokens, but no model it used has a price.
        Unpriced = "unpriced",
        /// Neither a cost nor any tokens were reported.
        None = "none",
    }
}

/// One run as lists and the API show it.
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    pub run_id: String,
    pub agent: Option<String>,
    pub trigger: Trigger,
    pub terminal_reason: TerminalReason,
    pub started_at: Option<DateTime<Utc>>,
    pub ended_at: Option<DateTime<Utc>>,
    /// From the run's own budget accounting when it reported one, else the span range.
    pub wall_clock_ms: Option<i64>,
    pub cost: f64,
    /// Where `cost` came from; rows stored before prices existed say `agent`.
    #[serde(default = "agent_cost")]
    pub cost_source: CostSource,
    /// Models the run used that have no price (their steps are not in `cost`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unpriced_models: Vec<String>,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cache_tokens: i64,
    pub steps: i64,
    pub tool_calls: i64,
    pub trace_ids: Vec<String>,
    pub duplicate_side_effects: i64,
    /// Repeats of an unclassified tool with the same arguments: duplicates if the tool
    /// changes the world, which nobody has said.
    #[serde(default)]
    pub possible_duplicates: i64,
    pub deduped_calls: i64,
    pub completed_without_read: bool,
    pub approval_violations: i64,
    pub escalation_reason: Option<String>,
}

fn agent_cost() -> CostSource {
    CostSource::Agent
}

/// One turn of the agent loop.
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepView {
    pub index: i64,
    pub span_id: String,
    pub stop_reason: Option<String>,
    pub model_id: Option<String>,
    /// Uncached input (the article's meaning; GenAI and OpenInference totals are
    /// converted at ingest).
    pub input_tokens: i64,
    pub output_tokens: i64,
    /// Cache reads.
    pub cache_tokens: i64,
    #[serde(default)]
    pub cache_write_tokens: i64,
    /// Reasoning tokens, part of `output_tokens`.
    #[serde(default)]
    pub reasoning_tokens: i64,
    /// What the step cost at its model's price; none without tokens or a price.
    #[serde(default)]
    pub cost: Option<f64>,
}

/// One price the run's derived cost used, with what it priced.
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PriceUse {
    pub model: String,
    pub price: crate::pricing::ModelPrice,
    pub steps: i64,
    pub cost: f64,
}

/// One tool call with everything the canonical model knows about it.
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallView {
    pub trace_id: String,
    pub span_id: String,
    pub step_index: Option<i64>,
    pub tool: String,
    pub side_effect: SideEffect,
    pub idempotency_key: Option<String>,
    pub attempt: i64,
    pub outcome: Outcome,
    pub latency_ms: Option<i64>,
    pub external_id: Option<String>,
    pub args_sha256: Option<String>,
    pub approval_id: Option<String>,
    /// Its arguments carried a credential, redacted before storage.
    #[serde(default)]
    pub credential_in_arguments: bool,
    pub started_at: Option<DateTime<Utc>>,
}

/// A side effect that happened more than once: the bug the article counts.
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DuplicateView {
    pub tool: String,
    /// The idempotency key, or `args:<sha256>` when the calls carried none.
    pub key: String,
    pub count: i64,
    pub external_ids: Vec<String>,
    /// The tool is unclassified: a duplicate if it writes, harmless if it only reads.
    /// Left out when false, so a duplicate reads as it always did.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub possible: bool,
}

/// A run with its steps, tool calls and duplicates.
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunDetail {
    #[serde(flatten)]
    pub run: RunSummary,
    pub step_list: Vec<StepView>,
    pub tool_call_list: Vec<ToolCallView>,
    pub duplicates: Vec<DuplicateView>,
    /// The prices a derived cost used (empty when the agent sent its cost).
    #[serde(default)]
    pub prices_used: Vec<PriceUse>,
    /// Tools called in this run that neither their spans nor a policy classify.
    #[serde(default)]
    pub unclassified_tools: Vec<String>,
    /// The limits the agent reported, if it did.
    #[serde(default)]
    pub step_limit: Option<i64>,
    #[serde(default)]
    pub cost_limit: Option<f64>,
}

/// The run-list filters as query parameters, shared by the REST API and the runs page so
/// both accept (and refuse) exactly the same things.
#[cfg_attr(feature = "server", derive(utoipa::IntoParams))]
#[cfg_attr(feature = "server", into_params(parameter_in = Query))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueryParams {
    pub terminal_reason: Option<String>,
    pub agent: Option<String>,
    pub trigger: Option<String>,
    /// RFC 3339; runs that started at or after it.
    pub since: Option<String>,
    /// RFC 3339; runs that started before it.
    pub until: Option<String>,
    /// `1h`, `24h`, `7d` or `30d` back from now; the page's shorthand for `since`.
    pub range: Option<String>,
    pub flag: Option<String>,
    /// The model most of the run's steps used, exactly (what /trends charts cost by).
    #[serde(default)]
    pub model: Option<String>,
    /// A run id, trace id, idempotency key, external resource id or tool name.
    pub q: Option<String>,
    /// started (default), cost or duration; always descending.
    pub sort: Option<String>,
    pub cursor: Option<String>,
    /// 1 to 500, default 50.
    pub limit: Option<i64>,
}

/// How many runs match a run list's filters, per terminal reason (the reason filter
/// aside). Counting stops at a limit: past it `by_reason` is empty and `at_least` holds
/// the limit, for "10,000+ runs".
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunCounts {
    pub by_reason: Vec<(TerminalReason, i64)>,
    pub at_least: Option<i64>,
}

impl RunCounts {
    /// The runs of one reason (0 when counting stopped or none matched).
    pub fn of(&self, reason: TerminalReason) -> i64 {
        self.by_reason.iter().find(|(r, _)| *r == reason).map(|(_, n)| *n).unwrap_or(0)
    }

    /// Every run counted (the limit when counting stopped).
    pub fn total(&self) -> i64 {
        self.at_least.unwrap_or_else(|| self.by_reason.iter().map(|(_, n)| n).sum())
    }
}

/// The runs a filtered tool search read: the newest `runs` that called the tool, the
/// oldest of them started at `since`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SearchedWindow {
    pub since: DateTime<Utc>,
    pub runs: i64,
}

/// The runs a list without a search term read when no one index answered its filters:
/// the newest `runs` that pass one of its conditions (`lead`), the oldest of them started
/// at `since`. The other conditions were tested on those alone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FilteredWindow {
    pub since: DateTime<Utc>,
    pub runs: i64,
    pub lead: WindowLead,
}

/// The condition whose runs a windowed list read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WindowLead {
    /// One agent's runs (its name as stored).
    Agent(String),
    Trigger(Trigger),
    /// The runs with a flag (`duplicates`, `no_read`, `approval_violation`).
    Flag(String),
    /// Every run.
    Newest,
}

/// A page of the run list as the runs page shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunListView {
    pub runs: Vec<RunSummary>,
    /// Runs per terminal reason for the current filters (the reason filter aside).
    pub counts: RunCounts,
    pub next_cursor: Option<String>,
    /// Where the search stopped, when it read only the newest of the runs that called the
    /// tool. The list and the counts cover the runs from then on (and every run the term
    /// names by id).
    pub searched: Option<SearchedWindow>,
    /// Where a list without a search term stopped, when it read only the newest runs of
    /// one of its conditions. The list and the counts cover those.
    pub filtered: Option<FilteredWindow>,
    /// The server's clock when the page was made, for "5 min ago" that hydrates cleanly.
    pub now: DateTime<Utc>,
}

/// One span as the waterfall draws it: times, nesting, and what it is in the loop. Absent
/// values are left out of the JSON (a run page sends 500 of these for hydration).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WaterfallSpan {
    pub trace_id: String,
    pub span_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_span_id: Option<String>,
    pub name: String,
    pub start_ns: i64,
    pub end_ns: i64,
    pub status_code: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_index: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub side_effect: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_id: Option<String>,
}

/// Why a run failed, in one line: the failing span, its exception or status message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunFailure {
    pub span_id: String,
    pub span_name: String,
    /// `exception.type`, when an exception was recorded.
    pub exception_type: Option<String>,
    /// `exception.message`, else the status message.
    pub message: Option<String>,
}

/// A run page: the run, one page of its spans for the waterfall, and whether bodies
/// were retained (so a replay fixture can be made).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunView {
    pub detail: RunDetail,
    /// For an error run: why, from its spans.
    #[serde(default)]
    pub failure: Option<RunFailure>,
    /// Steps with their tokens and cost (the detail's own list is cleared to keep the
    /// page light; this has only the figures the page shows).
    #[serde(default)]
    pub steps: Vec<StepView>,
    pub spans: Vec<WaterfallSpan>,
    pub span_page: i64,
    pub span_pages: i64,
    pub total_spans: i64,
    pub has_bodies: bool,
    /// Errors and side effects in start order, each with its page, for the waterfall's
    /// previous / next.
    #[serde(default)]
    pub marks: Vec<SpanMark>,
    /// The search in the trace: what was asked, the first hits and how many there are.
    #[serde(default)]
    pub query: Option<String>,
    #[serde(default)]
    pub matches: Vec<SpanMark>,
    #[serde(default)]
    pub match_count: i64,
    /// The span whose subtree alone is shown, when zoomed.
    #[serde(default)]
    pub zoomed: Option<SpanMark>,
}

/// A span the waterfall can jump to: `trace:span`, its name and the page it is on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpanMark {
    pub key: String,
    pub name: String,
    pub page: i64,
    pub kind: MarkKind,
}

/// Why a span is marked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MarkKind {
    Error,
    SideEffect,
    Match,
}

/// Everything about one span, for its panel; JSON is pretty-printed text, shown as text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpanPanel {
    pub span: WaterfallSpan,
    pub kind: i32,
    pub attributes: String,
    pub events: String,
    pub resource: String,
    /// Bodies (prompts, arguments, results) when retained.
    pub bodies: Option<String>,
}

/// A failed (or any) run as a deterministic regression fixture: the run's metadata and,
/// in execution order, every tool call with its arguments and recorded response. Format
/// `flightdeck.replay_fixture`, version 1; fields are only ever added.
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplayFixture {
    pub format: String,
    pub version: u32,
    pub run: RunSummary,
    pub tool_calls: Vec<ReplayCall>,
}

/// One tool call of a replay fixture. `arguments` and `response` are JSON when the agent
/// sent JSON text, otherwise the text itself; `null` when that body was not retained.
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplayCall {
    pub sequence: usize,
    pub trace_id: String,
    pub span_id: String,
    pub step_index: Option<i64>,
    pub tool: String,
    pub side_effect: SideEffect,
    pub attempt: i64,
    pub outcome: Outcome,
    pub idempotency_key: Option<String>,
    pub external_id: Option<String>,
    pub args_sha256: Option<String>,
    pub arguments: serde_json::Value,
    pub response: serde_json::Value,
    pub started_at: Option<DateTime<Utc>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vocabularies_parse_loosely_and_print_canonically() {
        assert_eq!(TerminalReason::parse(" Step_Limit "), Some(TerminalReason::StepLimit));
        assert_eq!(TerminalReason::parse("finished"), None);
        assert_eq!(SideEffect::Irreversible.to_string(), "irreversible");
        assert!(SideEffect::Write.changes_the_world());
        assert!(!SideEffect::Read.changes_the_world());
        assert!(!TerminalReason::StepLimit.is_finished_successfully());
        assert_eq!(serde_json::to_string(&Outcome::Deduped).unwrap(), "\"deduped\"");
    }
}
