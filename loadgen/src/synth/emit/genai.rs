//! The OpenTelemetry GenAI convention as Pydantic AI and OpenLLMetry emit it:
//! `invoke_agent` / `chat` / `execute_tool` spans with `gen_ai.*` attributes and not a
//! single `run.*`, `step.*` or `tool.*` key, so the mapping layer must derive the rest.

use opentelemetry_proto::tonic::trace::v1::span::SpanKind;

use super::super::attr;
use super::super::plan::{RunPlan, StepPlan, StopReason, ToolExec, TracePlan};
use super::{Named, Vocabulary};

pub(super) struct GenAi;

impl Vocabulary for GenAi {
    fn scope(&self) -> (&'static str, &'static str) {
        ("pydantic-ai", "1.0.10")
    }

    fn root(&self, run: &RunPlan, _trace: &TracePlan) -> Named {
        Named {
            name: format!("invoke_agent {}", run.agent),
            kind: SpanKind::Internal,
            attributes: vec![
                attr::string("gen_ai.operation.name", "invoke_agent"),
                attr::string("gen_ai.agent.name", run.agent.as_str()),
                attr::string("gen_ai.conversation.id", run.run_id.as_str()),
            ],
        }
    }

    fn step(&self, _run: &RunPlan, step: &StepPlan) -> Named {
        let mut attributes = vec![
            attr::string("gen_ai.operation.name", "chat"),
            attr::string("gen_ai.provider.name", step.model.provider),
            attr::string("gen_ai.request.model", step.model.id),
            // The convention counts cached input as input.
            attr::uint("gen_ai.usage.input_tokens", step.input_tokens + step.cache_read_tokens),
            attr::uint("gen_ai.usage.cache_read.input_tokens", step.cache_read_tokens),
            attr::uint("gen_ai.usage.output_tokens", step.output_tokens),
        ];
        if let Some(stop_reason) = step.stop_reason {
            attributes.push(attr::string("gen_ai.response.model", step.model.id));
            let finish_reason = match stop_reason {
                StopReason::ToolCall => "tool_call",
                StopReason::End => "stop",
                StopReason::TokenLimit => "length",
                StopReason::Refusal => "content_filter",
            };
            attributes.push(attr::strings("gen_ai.response.finish_reasons", &[finish_reason]));
        }
        Named { name: format!("chat {}", step.model.id), kind: SpanKind::Client, attributes }
    }

    fn tool(&self, run: &RunPlan, _step: &StepPlan, exec: &ToolExec, result: Option<String>) -> Named {
        let call = &run.calls[exec.call];
        let mut attributes = vec![
            attr::string("gen_ai.operation.name", "execute_tool"),
            attr::string("gen_ai.tool.name", call.tool.name),
            attr::string("gen_ai.tool.type", "function"),
            attr::string("gen_ai.tool.call.id", exec.call_id.as_str()),
            attr::string("gen_ai.tool.call.arguments", call.arguments.as_str()),
        ];
        if let Some(result) = result {
            attributes.push(attr::string("gen_ai.tool.call.result", result));
        }
        Named { name: format!("execute_tool {}", call.tool.name), kind: SpanKind::Internal, attributes }
    }
}
