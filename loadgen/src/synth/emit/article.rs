//! The article's convention: `run.*`, `step.*`, `tool.*`, `budget.*` and
//! `escalation.reason`, which carry every canonical field directly.

use opentelemetry_proto::tonic::trace::v1::span::SpanKind;

use super::super::attr;
use super::super::plan::{RunPlan, StepPlan, ToolExec, TracePlan};
use super::{Named, Vocabulary};

pub(super) struct Article;

impl Vocabulary for Article {
    fn scope(&self) -> (&'static str, &'static str) {
        ("agent-runtime", "0.9.0")
    }

    fn root(&self, run: &RunPlan, trace: &TracePlan) -> Named {
        let mut attributes = vec![
            attr::string("run.id", run.run_id.as_str()),
            attr::string("run.trigger", trace.trigger),
            attr::string("run.terminal_reason", trace.terminal.as_str()),
            attr::double("budget.cost_spent", trace.cost_usd),
            attr::uint("budget.wall_clock_ms", trace.wall_clock_ms),
            attr::string("gen_ai.agent.name", run.agent.as_str()),
        ];
        if let Some(escalation) = trace.escalation.as_ref().filter(|e| !e.as_event) {
            attributes.push(attr::string("escalation.reason", escalation.reason));
        }
        Named { name: format!("run {}", run.agent), kind: SpanKind::Internal, attributes }
    }

    fn step(&self, _run: &RunPlan, step: &StepPlan) -> Named {
        let mut attributes = vec![
            attr::int("step.index", step.index),
            attr::string("step.model_id", step.model.id),
            attr::uint("step.input_tokens", step.input_tokens),
            attr::uint("step.output_tokens", step.output_tokens),
            attr::uint("step.cache_read_tokens", step.cache_read_tokens),
        ];
        if let Some(stop_reason) = step.stop_reason {
            attributes.push(attr::string("step.stop_reason", stop_reason.as_str()));
        }
        Named { name: format!("step {}", step.index), kind: SpanKind::Internal, attributes }
    }

    fn tool(&self, run: &RunPlan, step: &StepPlan, exec: &ToolExec, result: Option<String>) -> Named {
        let call = &run.calls[exec.call];
        let mut attributes = vec![
            attr::string("tool.name", call.tool.name),
            attr::string("tool.side_effect", call.tool.side_effect.as_str()),
            attr::string("tool.idempotency_key", call.idempotency_key.as_str()),
            attr::int("tool.attempt", exec.attempt),
            attr::string("tool.outcome", exec.outcome.as_str()),
            attr::uint("tool.latency_ms", exec.latency_ms),
            attr::int("step.index", step.index),
            attr::string("gen_ai.tool.call.arguments", call.arguments.as_str()),
        ];
        if let Some(external_id) = &exec.external_id {
            attributes.push(attr::string("tool.external_id", external_id.as_str()));
        }
        if let Some(result) = result {
            attributes.push(attr::string("gen_ai.tool.call.result", result));
        }
        Named { name: format!("tool {}", call.tool.name), kind: SpanKind::Internal, attributes }
    }
}
