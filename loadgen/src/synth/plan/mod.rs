//! The story of one run, before it is written down in any attribute convention: which
//! traces (one, or two when the orchestrator retried), which steps, which tool calls with
//! which outcomes and attempts, and exactly when each began and ended.
//!
//! The failure modes the article is about are planned here on purpose:
//!
//! - an orchestrator retry replays the run from the start in a second trace with the same
//!   run id, so writes that succeeded the first time run again with the same idempotency
//!   key: a duplicate side effect, unless the run's tool layer keeps an execution ledger,
//!   in which case the repeat is answered from the ledger (`deduped`);
//! - irreversible tools use a run-wide key (the article's advice), so a model calling one
//!   again in a later step hits the same key;
//! - tool-layer retries after errors and timeouts (`tool.attempt` 2, 3);
//! - runs that stop at the step limit or the budget, fail, or escalate;
//! - runs that "complete" without ever calling a read tool.

mod tool_layer;

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::Rng;

use super::catalog::{self, AgentProfile, Model, SideEffect, Tool};
use super::draw::{self, NANOS_PER_MS};
use super::Convention;
use tool_layer::ToolLayer;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Terminal {
    Completed,
    StepLimit,
    Budget,
    Error,
    Escalated,
}

impl Terminal {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Completed => "completed",
            Self::StepLimit => "step_limit",
            Self::Budget => "budget",
            Self::Error => "error",
            Self::Escalated => "escalated",
        }
    }
}

/// Why the model stopped generating in one step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StopReason {
    ToolCall,
    End,
    TokenLimit,
    Refusal,
}

impl StopReason {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::ToolCall => "tool_call",
            Self::End => "end",
            Self::TokenLimit => "token_limit",
            Self::Refusal => "refusal",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Ok,
    Error,
    Deduped,
    Denied,
    Timeout,
}

impl Outcome {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Error => "error",
            Self::Deduped => "deduped",
            Self::Denied => "denied",
            Self::Timeout => "timeout",
        }
    }
}

pub(crate) struct RunPlan {
    pub run_id: String,
    pub agent: String,
    pub convention: Convention,
    /// The logical tool calls; executions refer to them by index. A retry or a replay
    /// executes the same call again.
    pub calls: Vec<Call>,
    /// In time order; the last one decides how the run ended.
    pub traces: Vec<TracePlan>,
}

pub(crate) struct Call {
    pub tool: &'static Tool,
    pub arguments: String,
    pub idempotency_key: String,
}

pub(crate) struct TracePlan {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
    pub trigger: &'static str,
    pub terminal: Terminal,
    /// The root span's error status message.
    pub error: Option<String>,
    pub escalation: Option<Escalation>,
    pub start: u64,
    pub end: u64,
    /// Accumulated over the run so far, including earlier traces.
    pub cost_usd: f64,
    pub wall_clock_ms: u64,
    /// Tool spans are children of their step (the step covers the model call and the
    /// tools it asked for) rather than of the root (the step covers the model call only).
    pub tools_under_steps: bool,
    pub steps: Vec<StepPlan>,
}

pub(crate) struct Escalation {
    pub reason: &'static str,
    /// Recorded as a span event rather than a root attribute.
    pub as_event: bool,
    pub at: u64,
}

pub(crate) struct StepPlan {
    pub span_id: [u8; 8],
    pub index: u32,
    pub model: &'static Model,
    /// None when the model call itself failed.
    pub stop_reason: Option<StopReason>,
    /// Uncached input, kept apart from cache reads as the article asks.
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_tokens: u64,
    pub start: u64,
    pub end: u64,
    pub error: Option<String>,
    pub tools: Vec<ToolExec>,
}

/// One execution (attempt) of a call: one tool span.
pub(crate) struct ToolExec {
    pub span_id: [u8; 8],
    pub call: usize,
    /// The model's id for the call (`gen_ai.tool.call.id`); tool-layer retries share it.
    pub call_id: String,
    pub attempt: u32,
    pub outcome: Outcome,
    pub latency_ms: u64,
    pub start: u64,
    pub end: u64,
    pub external_id: Option<String>,
    pub error: Option<String>,
}

impl RunPlan {
    pub(crate) fn terminal(&self) -> Terminal {
        self.traces.last().map_or(Terminal::Completed, |t| t.terminal)
    }
}

/// Plans one run of `agent` that starts at `start` (Unix nanoseconds).
pub(crate) fn plan_run(rng: &mut StdRng, agent: &AgentProfile, max_steps: u32, start: u64) -> RunPlan {
    Planner::new(rng, agent, max_steps).run(start)
}

/// What a step of the script does at its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StepEnd {
    /// Asked for tools and goes on.
    Continue,
    Answer,
    TokenLimit,
    Refusal,
    /// Its last call fails on every attempt and the run errors.
    ToolFailure,
    /// The model call fails and the run errors.
    ModelFailure,
}

/// The model's side of a run, fixed before execution so that an orchestrator retry
/// replays the same decisions.
struct ScriptStep {
    calls: Vec<usize>,
    end: StepEnd,
}

/// Per-run decisions that shape every trace of the run.
struct RunShape {
    convention: Convention,
    terminal: Terminal,
    tools_under_steps: bool,
    /// Step index from which the run uses the agent's fallback model.
    fallback_from: Option<u32>,
    /// Tokens of system prompt and tool definitions, resent every step.
    prompt_tokens: u64,
    /// Budget runs burn context fast; that is how they hit the budget.
    growth: u64,
}

/// Token and cost bookkeeping over the steps of one trace.
struct Conversation {
    /// Tokens added to the conversation after the system prompt so far.
    context_tokens: u64,
    /// The previous model call's whole prompt, which the provider has cached.
    cached_prefix: u64,
    cost_usd: f64,
}

impl Conversation {
    /// Accounts one model call that answered with `output_tokens` and after which
    /// `added_context` tokens (its answer, tool results) join the conversation. Returns
    /// the call's uncached input and cache-read tokens, kept apart as the article asks.
    fn turn(&mut self, prompt_tokens: u64, model: &Model, output_tokens: u64, added_context: u64) -> (u64, u64) {
        let prompt = prompt_tokens + self.context_tokens;
        let cache_read = self.cached_prefix;
        let input = prompt - cache_read;
        self.cached_prefix = prompt;
        self.context_tokens += added_context;
        self.cost_usd += (input as f64 * model.usd_per_mtok_input
            + output_tokens as f64 * model.usd_per_mtok_output
            + cache_read as f64 * model.usd_per_mtok_cache_read)
            / 1e6;
        (input, cache_read)
    }
}

struct Planner<'a> {
    rng: &'a mut StdRng,
    agent: &'a AgentProfile,
    max_steps: u32,
    calls: Vec<Call>,
    tool_layer: ToolLayer,
}

impl<'a> Planner<'a> {
    fn new(rng: &'a mut StdRng, agent: &'a AgentProfile, max_steps: u32) -> Self {
        Self { rng, agent, max_steps, calls: Vec::new(), tool_layer: ToolLayer::default() }
    }

    fn run(mut self, start: u64) -> RunPlan {
        let run_id = format!("run_{}", draw::hex::<12>(self.rng));
        // Mostly the article's attributes (they carry every canonical field), enough of the
        // framework conventions to keep the mapping layer honest.
        let convention = [Convention::Article, Convention::GenAi, Convention::OpenInference]
            [draw::weighted(self.rng, &[70, 20, 10])];
        let terminal =
            [Terminal::Completed, Terminal::StepLimit, Terminal::Budget, Terminal::Error, Terminal::Escalated]
                [draw::weighted(self.rng, &[70, 8, 6, 8, 8])];
        self.tool_layer.keeps_ledger = self.rng.gen_bool(0.5);
        let skip_reads = terminal == Terminal::Completed && self.rng.gen_bool(0.12);
        let shape = RunShape {
            convention,
            terminal,
            // The framework conventions put tool spans next to the model call.
            tools_under_steps: convention == Convention::Article && self.rng.gen_bool(0.5),
            fallback_from: self.rng.gen_bool(0.06).then(|| self.rng.gen_range(1..self.max_steps)),
            prompt_tokens: self.rng.gen_range(1_200..4_000),
            growth: if terminal == Terminal::Budget { 4 } else { 1 },
        };
        let script = self.script(terminal, skip_reads);

        // Orchestrator retries are only told apart by `run.trigger = retry`, which only the
        // article's convention has.
        let crash_at = (convention == Convention::Article && self.rng.gen_bool(0.12))
            .then(|| script.len().checked_sub(1))
            .flatten()
            .filter(|&continuing| continuing > 0)
            .map(|continuing| self.rng.gen_range(0..continuing));

        let mut traces = Vec::new();
        match crash_at {
            Some(step) => {
                let trigger = self.first_trigger();
                let first = self.trace(&shape, &script[..=step], true, trigger, start, None);
                let restart = first.end + self.rng.gen_range(2_000..20_000) * NANOS_PER_MS;
                let second = self.trace(&shape, &script, false, "retry", restart, Some(&first));
                traces.extend([first, second]);
            }
            None => {
                let trigger = self.first_trigger();
                traces.push(self.trace(&shape, &script, false, trigger, start, None));
            }
        }

        RunPlan { run_id, agent: self.agent.name.clone(), convention, calls: self.calls, traces }
    }

    fn first_trigger(&mut self) -> &'static str {
        ["user", "schedule", "webhook"][draw::weighted(self.rng, &[60, 25, 15])]
    }

    /// Decides the model's steps and calls for the whole run.
    fn script(&mut self, terminal: Terminal, skip_reads: bool) -> Vec<ScriptStep> {
        let below_limit = self.max_steps - 1;
        let steps = match terminal {
            Terminal::StepLimit => self.max_steps,
            // A run that reads first needs one step to read and one to answer.
            Terminal::Completed if skip_reads => self.rng.gen_range(1..=below_limit.min(4)),
            Terminal::Completed => self.rng.gen_range(2..=below_limit.clamp(2, 7)),
            Terminal::Budget => self.rng.gen_range(2..=below_limit.max(2)),
            Terminal::Error | Terminal::Escalated => self.rng.gen_range(1..=below_limit.min(6)),
        };
        let mut script = Vec::new();
        for index in 0..steps {
            let last = index + 1 == steps;
            let (calls, end) = if !last {
                (1 + draw::weighted(self.rng, &[75, 18, 7]), StepEnd::Continue)
            } else {
                match terminal {
                    Terminal::Completed => (0, StepEnd::Answer),
                    Terminal::StepLimit => (self.rng.gen_range(1..=2), StepEnd::Continue),
                    Terminal::Budget => (0, StepEnd::TokenLimit),
                    Terminal::Error if self.rng.gen_bool(0.6) => (1, StepEnd::ToolFailure),
                    Terminal::Error => (0, StepEnd::ModelFailure),
                    Terminal::Escalated if self.rng.gen_bool(0.25) => (0, StepEnd::Refusal),
                    Terminal::Escalated => (0, StepEnd::Answer),
                }
            };
            let calls = (0..calls)
                .map(|c| {
                    // Agents that look before they act start with a read.
                    let tool = if index == 0 && c == 0 && !skip_reads {
                        self.tool_of_class(SideEffect::Read)
                    } else {
                        self.any_tool(skip_reads)
                    };
                    self.new_call(tool)
                })
                .collect();
            script.push(ScriptStep { calls, end });
        }
        self.repeat_irreversible_calls(&mut script);
        script
    }

    /// Now and then the model calls an irreversible tool again, with the same arguments,
    /// in a later step; the run-wide key makes that the same call.
    fn repeat_irreversible_calls(&mut self, script: &mut [ScriptStep]) {
        for i in 0..script.len() {
            for c in 0..script[i].calls.len() {
                let call = script[i].calls[c];
                if self.calls[call].tool.side_effect != SideEffect::Irreversible || !self.rng.gen_bool(0.35) {
                    continue;
                }
                let later: Vec<usize> = (i + 1..script.len()).filter(|&j| script[j].end == StepEnd::Continue).collect();
                if let Some(&j) = later.choose(self.rng) {
                    script[j].calls.push(call);
                }
            }
        }
    }

    fn new_call(&mut self, tool: &'static Tool) -> usize {
        let arguments = catalog::arguments(tool, self.rng);
        let idempotency_key = draw::hex::<32>(self.rng);
        self.calls.push(Call { tool, arguments, idempotency_key });
        self.calls.len() - 1
    }

    /// A tool of the given class if the agent has one, else any of its tools.
    fn tool_of_class(&mut self, class: SideEffect) -> &'static Tool {
        let of_class = self.agent.tools_of(class);
        let pool = if of_class.is_empty() { &self.agent.tools } else { &of_class };
        draw::pick(self.rng, pool)
    }

    fn any_tool(&mut self, skip_reads: bool) -> &'static Tool {
        let classes = [SideEffect::Read, SideEffect::Write, SideEffect::Irreversible, SideEffect::None];
        let weights: Vec<u32> = classes
            .iter()
            .zip([45, 30, 12, 13])
            .map(|(&class, weight)| {
                let allowed = !(skip_reads && class == SideEffect::Read);
                if allowed && !self.agent.tools_of(class).is_empty() {
                    weight
                } else {
                    0
                }
            })
            .collect();
        let class = classes[draw::weighted(self.rng, &weights)];
        self.tool_of_class(class)
    }

    /// Executes `script` as one trace. `crashes`: the orchestrator's first attempt, whose
    /// last call times out and takes the run down.
    fn trace(
        &mut self,
        shape: &RunShape,
        script: &[ScriptStep],
        crashes: bool,
        trigger: &'static str,
        start: u64,
        earlier: Option<&TracePlan>,
    ) -> TracePlan {
        let trace_id = draw::id::<16>(self.rng);
        let span_id = draw::id::<8>(self.rng);
        let mut conversation =
            Conversation { context_tokens: 0, cached_prefix: 0, cost_usd: earlier.map_or(0.0, |t| t.cost_usd) };
        let mut cursor = start + draw::ms(self.rng, 1..5);
        let mut steps = Vec::new();
        let mut failure = None;
        for (index, script_step) in (0u32..).zip(script) {
            let last = index as usize + 1 == script.len();
            // Only the last step of an attempt can end it with a failure.
            let fails = match (last, crashes, script_step.end) {
                (true, true, _) => Some(Outcome::Timeout),
                (true, false, StepEnd::ToolFailure) => Some(Outcome::Error),
                _ => None,
            };
            let (step, step_failure) = self.step(shape, script_step, index, fails, cursor, &mut conversation);
            cursor = step.end.max(step.tools.last().map_or(0, |t| t.end));
            failure = failure.or(step_failure);
            steps.push(step);
        }

        let end = cursor + draw::ms(self.rng, 2..30);
        let terminal = if crashes { Terminal::Error } else { shape.terminal };
        let error = match terminal {
            Terminal::Error => failure,
            // Frameworks without a terminal-reason attribute raise on their limits; an
            // ingest can only see an error.
            Terminal::StepLimit if shape.convention != Convention::Article => Some(format!(
                "UsageLimitExceeded: The next request would exceed the request_limit of {}",
                self.max_steps
            )),
            Terminal::Budget if shape.convention != Convention::Article => {
                Some(format!("UsageLimitExceeded: Exceeded the total_tokens_limit of {}", shape.prompt_tokens * 20))
            }
            _ => None,
        };
        let escalation = (terminal == Terminal::Escalated).then(|| Escalation {
            reason: draw::pick(self.rng, &catalog::ESCALATION_REASONS),
            // Only the article's root attribute is convention-specific; the event works
            // everywhere.
            as_event: shape.convention != Convention::Article || self.rng.gen_bool(0.35),
            at: end - NANOS_PER_MS,
        });
        let run_start = earlier.map_or(start, |t| t.start);
        TracePlan {
            trace_id,
            span_id,
            trigger,
            terminal,
            error,
            escalation,
            start,
            end,
            // Micro-dollars: what billing systems keep, and short enough to survive a JSON
            // round trip exactly.
            cost_usd: (conversation.cost_usd * 1e6).round() / 1e6,
            wall_clock_ms: (end - run_start) / NANOS_PER_MS,
            tools_under_steps: shape.tools_under_steps,
            steps,
        }
    }

    /// One turn of the loop starting after `cursor`: the model call, then the tools it
    /// asked for. `fails`: the outcome that the step's last call is forced to, ending the
    /// attempt. Returns the step and, when it ended the attempt, the run's error message.
    fn step(
        &mut self,
        shape: &RunShape,
        script_step: &ScriptStep,
        index: u32,
        fails: Option<Outcome>,
        cursor: u64,
        conversation: &mut Conversation,
    ) -> (StepPlan, Option<String>) {
        let model = match shape.fallback_from {
            Some(from) if index >= from => self.agent.fallback,
            _ => self.agent.model,
        };
        let start = cursor + draw::ms(self.rng, 2..40);
        let (stop_reason, output_tokens, error) = match script_step.end {
            StepEnd::Continue | StepEnd::ToolFailure => (Some(StopReason::ToolCall), self.rng.gen_range(40..400), None),
            StepEnd::Answer => (Some(StopReason::End), self.rng.gen_range(150..1_200), None),
            StepEnd::Refusal => (Some(StopReason::Refusal), self.rng.gen_range(20..120), None),
            StepEnd::TokenLimit => (Some(StopReason::TokenLimit), 4_096, None),
            StepEnd::ModelFailure => {
                let message =
                    format!("ModelHTTPError: status_code: 529, model_name: {}, body: overloaded_error", model.id);
                (None, 0, Some(message))
            }
        };
        let added_context = (output_tokens + self.rng.gen_range(200..1_500)) * shape.growth;
        let (input_tokens, cache_read_tokens) =
            conversation.turn(shape.prompt_tokens, model, output_tokens, added_context);

        let (fastest, slowest) = model.ms_per_output_token;
        let decode_ms = output_tokens * self.rng.gen_range(fastest..=slowest);
        let model_done = start + (self.rng.gen_range(250..900) + decode_ms) * NANOS_PER_MS;
        let mut clock = model_done;
        let mut tools = Vec::new();
        let mut failure = error.clone();
        for (c, &call) in script_step.calls.iter().enumerate() {
            let forced = fails.filter(|_| c + 1 == script_step.calls.len());
            let execs = self.tool_layer.execute(self.rng, &self.calls, call, forced, &mut clock);
            let tool = self.calls[call].tool.name;
            failure = match forced {
                Some(Outcome::Timeout) => Some(format!("ToolTimeout: {tool}: {}", catalog::TIMEOUT_MESSAGE)),
                Some(_) => Some(format!(
                    "ToolError: {tool} failed after {} attempts: {}",
                    execs.len(),
                    execs.last().and_then(|e| e.error.as_deref()).unwrap_or_default()
                )),
                None => failure,
            };
            tools.extend(execs);
        }
        let end = if shape.tools_under_steps { clock + draw::ms(self.rng, 1..10) } else { model_done };
        let step = StepPlan {
            span_id: draw::id::<8>(self.rng),
            index,
            model,
            stop_reason,
            input_tokens,
            output_tokens,
            cache_read_tokens,
            start,
            end,
            error,
            tools,
        };
        (step, failure)
    }
}
