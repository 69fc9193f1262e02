//! The mapping layer as data: for each canonical field, the attribute keys to read, first
//! found wins. The default table understands the article's names, the OTel GenAI
//! conventions and OpenInference; a deployment overrides any field in its config file
//! (`[mapping]`), and dashboards and alerts never see raw attribute names.
//!
//! A key starting with `resource:` is read from the resource attributes.

use serde::{Deserialize, Serialize};

/// Ordered source keys for every canonical field.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MappingTable {
    pub run_id: Vec<String>,
    pub agent: Vec<String>,
    pub trigger: Vec<String>,
    pub terminal_reason: Vec<String>,
    pub step_index: Vec<String>,
    pub step_stop_reason: Vec<String>,
    pub step_model_id: Vec<String>,
    pub input_tokens: Vec<String>,
    pub output_tokens: Vec<String>,
    pub cache_tokens: Vec<String>,
    pub cache_write_tokens: Vec<String>,
    pub reasoning_tokens: Vec<String>,
    /// Keys among `input_tokens` whose count includes the cache reads and writes (the
    /// GenAI and OpenInference conventions); they are subtracted, so a step's input
    /// tokens always mean uncached input, as the article's `step.input_tokens` does.
    pub input_tokens_include_cache: Vec<String>,
    pub tool_name: Vec<String>,
    pub tool_arguments: Vec<String>,
    pub tool_side_effect: Vec<String>,
    pub tool_idempotency_key: Vec<String>,
    pub tool_attempt: Vec<String>,
    pub tool_outcome: Vec<String>,
    pub tool_latency_ms: Vec<String>,
    pub tool_external_id: Vec<String>,
    pub tool_approval_id: Vec<String>,
    pub cost: Vec<String>,
    /// The run's limits, when the agent reports them: shown beside the value on a
    /// step-limit or budget run.
    pub step_limit: Vec<String>,
    pub cost_limit: Vec<String>,
    pub wall_clock_ms: Vec<String>,
    pub escalation_reason: Vec<String>,
    /// What blocks the agent, what it did and what remains, when sent as span
    /// attributes (an `escalation` span event may carry them too, unprefixed).
    pub escalation_blocking_fact: Vec<String>,
    pub escalation_what_was_done: Vec<String>,
    pub escalation_what_remains: Vec<String>,
    /// MCP tool annotations (`readOnlyHint`, `destructiveHint`) when spans carry them:
    /// suggestions for an admin classifying the tool, never applied by themselves.
    pub tool_read_only_hint: Vec<String>,
    pub tool_destructive_hint: Vec<String>,
    /// `key=value` pairs (or a bare key, meaning "present") that make a span a tool call.
    pub tool_span: Vec<String>,
    /// Likewise for a step (one turn of the loop, usually a model call).
    pub step_span: Vec<String>,
    /// Attribute keys (or prefixes ending in `*`) that hold bodies: prompts, messages,
    /// tool arguments and results. They are stored apart, under the retention policy.
    pub bodies: Vec<String>,
}

fn keys(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

impl Default for MappingTable {
    fn default() -> Self {
        MappingTable {
            run_id: keys(&["run.id", "gen_ai.conversation.id", "session.id"]),
            agent: keys(&["gen_ai.agent.name", "resource:gen_ai.agent.name", "resource:service.name"]),
            trigger: keys(&["run.trigger"]),
            terminal_reason: keys(&["run.terminal_reason"]),
            step_index: keys(&["step.index"]),
            step_stop_reason: keys(&["step.stop_reason", "gen_ai.response.finish_reasons"]),
            step_model_id: keys(&["step.model_id", "gen_ai.request.model", "gen_ai.response.model", "llm.model_name"]),
            input_tokens: keys(&["step.input_tokens", "gen_ai.usage.input_tokens", "llm.token_count.prompt"]),
            output_tokens: keys(&["step.output_tokens", "gen_ai.usage.output_tokens", "llm.token_count.completion"]),
            cache_tokens: keys(&[
                "step.cache_read_tokens",
                "step.cache_tokens",
                "gen_ai.usage.cache_read_input_tokens",
                "gen_ai.usage.cache_read.input_tokens",
                "llm.token_count.prompt_details.cache_read",
            ]),
            cache_write_tokens: keys(&[
                "step.cache_write_tokens",
                "gen_ai.usage.cache_creation.input_tokens",
                "gen_ai.usage.cache_creation_input_tokens",
                "llm.token_count.prompt_details.cache_write",
            ]),
            reasoning_tokens: keys(&[
                "step.reasoning_tokens",
                "gen_ai.usage.reasoning.output_tokens",
                "gen_ai.usage.reasoning_tokens",
                "llm.token_count.completion_details.reasoning",
            ]),
            input_tokens_include_cache: keys(&["gen_ai.usage.input_tokens", "llm.token_count.prompt"]),
            tool_name: keys(&["tool.name", "gen_ai.tool.name"]),
            tool_arguments: keys(&["gen_ai.tool.call.arguments", "tool.parameters", "tool.arguments", "input.value"]),
            tool_side_effect: keys(&["tool.side_effect"]),
            tool_idempotency_key: keys(&["tool.idempotency_key"]),
            tool_attempt: keys(&["tool.attempt"]),
            tool_outcome: keys(&["tool.outcome"]),
            tool_latency_ms: keys(&["tool.latency_ms"]),
            tool_external_id: keys(&["tool.external_id"]),
            tool_approval_id: keys(&["approval.id", "tool.approval_id"]),
            cost: keys(&["budget.cost_spent"]),
            step_limit: keys(&["budget.max_steps", "run.max_steps", "agent.max_steps", "gen_ai.agent.max_steps"]),
            cost_limit: keys(&["budget.cost_limit", "budget.max_cost", "run.cost_limit"]),
            wall_clock_ms: keys(&["budget.wall_clock_ms"]),
            escalation_reason: keys(&["escalation.reason"]),
            escalation_blocking_fact: keys(&["escalation.blocking_fact"]),
            escalation_what_was_done: keys(&["escalation.what_was_done"]),
            escalation_what_remains: keys(&["escalation.what_remains"]),
            tool_read_only_hint: keys(&[
                "mcp.tool.annotations.readOnlyHint",
                "mcp.tool.annotations.read_only_hint",
                "tool.annotations.readOnlyHint",
            ]),
            tool_destructive_hint: keys(&[
                "mcp.tool.annotations.destructiveHint",
                "mcp.tool.annotations.destructive_hint",
                "tool.annotations.destructiveHint",
            ]),
            tool_span: keys(&["gen_ai.operation.name=execute_tool", "openinference.span.kind=TOOL", "tool.name"]),
            step_span: keys(&[
                "step.index",
                "gen_ai.operation.name=chat",
                "gen_ai.operation.name=text_completion",
                "gen_ai.operation.name=generate_content",
                "openinference.span.kind=LLM",
            ]),
            bodies: keys(&[
                "gen_ai.prompt*",
                "gen_ai.completion*",
                "gen_ai.input.messages",
                "gen_ai.output.messages",
                "gen_ai.system_instructions",
                "gen_ai.tool.call.arguments",
                "gen_ai.tool.call.result",
                "gen_ai.tool.definitions",
                "tool.parameters",
                "tool.arguments",
                "tool.result",
                "input.value",
                "output.value",
                "llm.input_messages*",
                "llm.output_messages*",
                "llm.prompts*",
            ]),
        }
    }
}

impl MappingTable {
    /// Whether `key` holds a body under this table.
    pub fn is_body(&self, key: &str) -> bool {
        self.bodies.iter().any(|pattern| match pattern.strip_suffix('*') {
            Some(prefix) => key.starts_with(prefix),
            None => key == pattern,
        })
    }
}

/// Whether a `key=value` (or bare `key`) marker matches the attributes.
pub fn marker_matches(marker: &str, attributes: &serde_json::Map<String, serde_json::Value>) -> bool {
    match marker.split_once('=') {
        Some((key, wanted)) => {
            attributes.get(key).and_then(super::attributes::as_text).is_some_and(|v| v.eq_ignore_ascii_case(wanted))
        }
        None => attributes.get(marker).is_some_and(|v| !v.is_null()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_config_section_replaces_only_the_fields_it_names() {
        let table: MappingTable = toml::from_str("run_id = [\"my.run\"]\n").unwrap();
        assert_eq!(table.run_id, vec!["my.run"]);
        assert_eq!(table.agent, MappingTable::default().agent, "other fields keep their defaults");
        let err = toml::from_str::<MappingTable>("run_idd = []\n").unwrap_err().to_string();
        assert!(err.contains("unknown field `run_idd`"), "{err}");
    }

    #[test]
    fn body_keys_match_exactly_or_by_prefix() {
        let t = MappingTable::default();
        assert!(t.is_body("gen_ai.prompt.0.content"));
        assert!(t.is_body("input.value"));
        assert!(!t.is_body("input.mime_type"));
        assert!(!t.is_body("tool.name"));
    }

    #[test]
    fn markers_match_values_case_insensitively_or_presence() {
        let attrs = serde_json::json!({"openinference.span.kind": "tool", "tool.name": "x"});
        let attrs = attrs.as_object().unwrap();
        assert!(marker_matches("openinference.span.kind=TOOL", attrs));
        assert!(marker_matches("tool.name", attrs));
        assert!(!marker_matches("gen_ai.operation.name=execute_tool", attrs));
    }
}
