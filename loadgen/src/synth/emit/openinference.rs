//! Arize OpenInference, as its LangChain instrumentation emits it: span kinds in
//! `openinference.span.kind`, token counts in `llm.token_count.*`, tool arguments and
//! results in `input.value` / `output.value`.

use opentelemetry_proto::tonic::trace::v1::span::SpanKind;

use super::super::attr;
use super::super::plan::{RunPlan, StepPlan, ToolExec, TracePlan};
use super::{Named, Vocabulary};

pub(super) struct OpenInference;

const JSON: &str = "application/json";

impl Vocabulary for OpenInference {
    fn scope(&self) -> (&'static str, &'static str) {
        ("openinference.instrumentation.langchain", "0.1.50")
    }

    fn root(&self, run: &RunPlan, _trace: &TracePlan) -> Named {
        Named {
            name: run.agent.clone(),
            kind: SpanKind::Internal,
            attributes: vec![
                attr::string("openinference.span.kind", "AGENT"),
                attr::string("session.id", run.run_id.as_str()),
            ],
        }
    }

    fn step(&self, _run: &RunPlan, step: &StepPlan) -> Named {
        let prompt = step.input_tokens + step.cache_read_tokens;
        Named {
            name: step.model.class.to_string(),
            kind: SpanKind::Internal,
            attributes: vec![
                attr::string("openinference.span.kind", "LLM"),
                attr::string("llm.provider", step.model.provider),
                attr::string("llm.model_name", step.model.id),
                attr::uint("llm.token_count.prompt", prompt),
                attr::uint("llm.token_count.prompt_details.cache_read", step.cache_read_tokens),
                attr::uint("llm.token_count.completion", step.output_tokens),
                attr::uint("llm.token_count.total", prompt + step.output_tokens),
            ],
        }
    }

    fn tool(&self, run: &RunPlan, _step: &StepPlan, exec: &ToolExec, result: Option<String>) -> Named {
        let call = &run.calls[exec.call];
        let mut attributes = vec![
            attr::string("openinference.span.kind", "TOOL"),
            attr::string("tool.name", call.tool.name),
            attr::string("input.value", call.arguments.as_str()),
            attr::string("input.mime_type", JSON),
        ];
        if let Some(result) = result {
            attributes.push(attr::string("output.value", result));
            attributes.push(attr::string("output.mime_type", JSON));
        }
        Named { name: call.tool.name.to_string(), kind: SpanKind::Internal, attributes }
    }
}
