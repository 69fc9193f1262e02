//! Deterministic synthetic agent runs as OTLP spans.
//!
//! A run is first planned as a convention-free story (`plan`: which steps, which tool
//! calls, which outcomes, when), then written down as spans in one attribute convention
//! (`emit`), and summarised as the canonical figures a correct ingest must arrive at
//! (`expected`). Keeping the story apart from the spelling is what lets one seed produce
//! the same kinds of runs in the article's attributes, in `gen_ai.*` and in OpenInference.
//!
//! Everything is drawn from one seeded [`StdRng`], so the same [`SynthOptions`] always
//! yield the same runs, byte for byte.

mod attr;
mod batch;
mod catalog;
mod draw;
mod emit;
mod expected;
mod plan;

#[cfg(test)]
mod tests;

use opentelemetry_proto::tonic::trace::v1::ResourceSpans;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use catalog::AgentProfile;

pub(crate) use batch::RequestStream;
pub use batch::{requests_for, requests_for_shuffled};
pub use expected::Expected;

/// Which attribute names a run is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Convention {
    /// The article's `run.*` / `step.*` / `tool.*` attributes: the full canonical detail.
    Article,
    /// What Pydantic AI and OpenLLMetry emit: `invoke_agent` / `chat` / `execute_tool`
    /// spans with `gen_ai.*` attributes only.
    GenAi,
    /// Arize OpenInference: `openinference.span.kind`, `llm.*`, `input.value`.
    OpenInference,
}

/// What to generate.
#[derive(Debug, Clone)]
pub struct SynthOptions {
    /// Seed of the only random source; equal options give equal runs.
    pub seed: u64,
    /// Agent names (`service.name`); each gets its own tool set and model. Empty means
    /// the default agents.
    pub agents: Vec<String>,
    /// Start of the first run; later runs start a little after each other.
    pub base_time_unix_nano: u64,
    /// The step limit of every run (at least 2): `step_limit` runs stop exactly here.
    pub max_steps: u32,
    /// Record tool results (`gen_ai.tool.call.result`, `output.value`); arguments are
    /// always recorded because approvals and argument hashes need them.
    pub bodies: bool,
}

/// 2026-01-01T00:00:00Z: a fixed default so that default options are reproducible.
const DEFAULT_BASE_TIME_UNIX_NANO: u64 = 1_767_225_600_000_000_000;

const DEFAULT_AGENTS: [&str; 4] = ["support-triage", "billing-assistant", "docs-writer", "repo-janitor"];

impl Default for SynthOptions {
    fn default() -> Self {
        Self {
            seed: 1,
            agents: DEFAULT_AGENTS.iter().map(|a| a.to_string()).collect(),
            base_time_unix_nano: DEFAULT_BASE_TIME_UNIX_NANO,
            max_steps: 12,
            bodies: true,
        }
    }
}

/// One generated run: its spans, one `ResourceSpans` per trace (two when the orchestrator
/// retried the run), and what ingesting them should produce.
#[derive(Debug, Clone)]
pub struct SynthRun {
    pub run_id: String,
    pub traces: Vec<ResourceSpans>,
    pub span_count: usize,
    pub expected: Expected,
}

/// The generator: call [`Synth::next_run`] as often as needed; runs are produced one at a
/// time so a load test never holds more than it is sending.
pub struct Synth {
    rng: StdRng,
    agents: Vec<AgentProfile>,
    max_steps: u32,
    bodies: bool,
    next_start: u64,
}

/// Gap between the starts of consecutive runs, in milliseconds.
const RUN_SPACING_MS: std::ops::Range<u64> = 100..2_000;

impl Synth {
    pub fn new(opts: SynthOptions) -> Self {
        let mut rng = StdRng::seed_from_u64(opts.seed);
        let names = if opts.agents.is_empty() { SynthOptions::default().agents } else { opts.agents };
        // Drawn once: a deployed agent keeps its tools and model from run to run.
        let agents = names.into_iter().map(|name| AgentProfile::random(name, &mut rng)).collect();
        Self {
            rng,
            agents,
            // One step cannot both call a tool and answer; the planner needs room for both.
            max_steps: opts.max_steps.max(2),
            bodies: opts.bodies,
            next_start: opts.base_time_unix_nano,
        }
    }

    pub fn next_run(&mut self) -> SynthRun {
        let start = self.next_start;
        self.next_start += self.rng.gen_range(RUN_SPACING_MS) * draw::NANOS_PER_MS;
        let agent = &self.agents[self.rng.gen_range(0..self.agents.len())];
        let plan = plan::plan_run(&mut self.rng, agent, self.max_steps, start);
        let traces = emit::emit(&plan, self.bodies);
        SynthRun {
            run_id: plan.run_id.clone(),
            span_count: traces.iter().flat_map(|t| &t.scope_spans).map(|s| s.spans.len()).sum(),
            expected: Expected::of(&plan),
            traces,
        }
    }
}
