//! The world the synthetic agents live in: tools and their side-effect classes, models and
//! their prices, each agent's tool set, and the values tool arguments are drawn from.

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::Rng;
use serde_json::{json, Value};

use super::draw;

/// The article's side-effect classes; every policy (approval, dedupe, alerting) hangs off
/// this, so each catalogue tool declares one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SideEffect {
    None,
    Read,
    Write,
    Irreversible,
}

impl SideEffect {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Read => "read",
            Self::Write => "write",
            Self::Irreversible => "irreversible",
        }
    }

    /// Whether running the call twice changes the world twice.
    pub(crate) fn changes_state(self) -> bool {
        matches!(self, Self::Write | Self::Irreversible)
    }
}

#[derive(Debug)]
pub(crate) struct Tool {
    pub name: &'static str,
    pub side_effect: SideEffect,
    /// Prefix of the id of the resource a successful call creates (`tool.external_id`).
    pub creates: Option<&'static str>,
    /// Typical latency of a call that returns, in milliseconds.
    pub latency_ms: (u64, u64),
    /// Messages of the ways this tool fails; the article's resource conflicts live here.
    pub errors: &'static [&'static str],
    arguments: fn(&mut StdRng) -> Value,
    /// What a successful call that creates nothing returns (JSON).
    returns: &'static str,
}

pub(crate) static TOOLS: [Tool; 10] = [
    Tool {
        name: "get_current_time",
        side_effect: SideEffect::None,
        creates: None,
        latency_ms: (1, 5),
        errors: &["ValueError: unknown time zone"],
        arguments: time_args,
        returns: r#"{"iso":"2026-01-01T09:30:00+01:00"}"#,
    },
    Tool {
        name: "calculate",
        side_effect: SideEffect::None,
        creates: None,
        latency_ms: (1, 8),
        errors: &["SyntaxError: invalid expression"],
        arguments: calculate_args,
        returns: r#"{"value":249.8}"#,
    },
    Tool {
        name: "search_docs",
        side_effect: SideEffect::Read,
        creates: None,
        latency_ms: (80, 900),
        errors: &["HTTP 500 from search backend", "HTTP 429 Too Many Requests"],
        arguments: search_args,
        returns: r#"{"results":[{"title":"Billing FAQ","url":"https://docs.example.com/billing/faq"},{"title":"Refunds","url":"https://docs.example.com/billing/refunds"}]}"#,
    },
    Tool {
        name: "get_ticket",
        side_effect: SideEffect::Read,
        creates: None,
        latency_ms: (40, 400),
        errors: &["HTTP 404: ticket not found", "HTTP 502 Bad Gateway"],
        arguments: ticket_args,
        returns: r#"{"status":"open","priority":"high","subject":"Charged twice this month","requester":"dana.kim@example.com"}"#,
    },
    Tool {
        name: "lookup_customer",
        side_effect: SideEffect::Read,
        creates: None,
        latency_ms: (30, 350),
        errors: &["HTTP 404: no customer with that email", "HTTP 503 Service Unavailable"],
        arguments: customer_args,
        returns: r#"{"customer_id":"cus_4f1a9b","plan":"business-annual","seats":25,"since":"2023-04-11"}"#,
    },
    Tool {
        name: "create_document",
        side_effect: SideEffect::Write,
        creates: Some("doc_"),
        latency_ms: (200, 2_500),
        errors: &["HTTP 409 Conflict: a document with this title already exists", "HTTP 500 Internal Server Error"],
        arguments: document_args,
        returns: r#"{"status":"created"}"#,
    },
    Tool {
        name: "update_ticket",
        side_effect: SideEffect::Write,
        creates: None,
        latency_ms: (120, 1_200),
        errors: &["HTTP 409 Conflict: ticket was modified concurrently", "HTTP 422: invalid status transition"],
        arguments: update_ticket_args,
        returns: r#"{"status":"updated"}"#,
    },
    Tool {
        name: "send_email",
        side_effect: SideEffect::Write,
        creates: Some("msg_"),
        latency_ms: (300, 2_000),
        errors: &["SMTP 451: temporary local problem", "HTTP 400: invalid recipient"],
        arguments: email_args,
        returns: r#"{"status":"queued"}"#,
    },
    Tool {
        name: "charge_card",
        side_effect: SideEffect::Irreversible,
        creates: Some("ch_"),
        latency_ms: (400, 3_000),
        errors: &["card_declined: insufficient_funds", "HTTP 500 from payment provider"],
        arguments: charge_args,
        returns: r#"{"status":"succeeded"}"#,
    },
    Tool {
        name: "delete_repository",
        side_effect: SideEffect::Irreversible,
        creates: None,
        latency_ms: (300, 1_800),
        errors: &["HTTP 403: must have admin rights", "HTTP 404: repository not found"],
        arguments: delete_repo_args,
        returns: r#"{"status":"deleted"}"#,
    },
];

/// The status message the article's analysis counted 199 of; kept verbatim so a server
/// can be tested on recognising it.
pub(crate) const TIMEOUT_MESSAGE: &str = "Timed out while waiting for response...10.0 seconds";
pub(crate) const TIMEOUT_MS: u64 = 10_000;

pub(crate) const DENIALS: [&str; 3] = [
    "Denied by policy: approval required for this tool",
    "Denied by approver: wrong recipient",
    "Denied by approver: amount exceeds what the customer agreed to",
];

/// Why runs are handed to a human: the article's list.
pub(crate) const ESCALATION_REASONS: [&str; 5] = [
    "insufficient permission",
    "contradictory information",
    "budget exceeded",
    "low confidence",
    "approval required by policy",
];

#[derive(Debug)]
pub(crate) struct Model {
    pub id: &'static str,
    /// `gen_ai.provider.name`.
    pub provider: &'static str,
    /// The LangChain chat class OpenInference names its LLM spans after.
    pub class: &'static str,
    pub usd_per_mtok_input: f64,
    pub usd_per_mtok_output: f64,
    pub usd_per_mtok_cache_read: f64,
    /// Decoding speed, which sets how long a step's model call takes.
    pub ms_per_output_token: (u64, u64),
}

pub(crate) static MODELS: [Model; 4] = [
    Model {
        id: "claude-sonnet-4-5",
        provider: "anthropic",
        class: "ChatAnthropic",
        usd_per_mtok_input: 3.0,
        usd_per_mtok_output: 15.0,
        usd_per_mtok_cache_read: 0.3,
        ms_per_output_token: (12, 25),
    },
    Model {
        id: "claude-haiku-4-5",
        provider: "anthropic",
        class: "ChatAnthropic",
        usd_per_mtok_input: 1.0,
        usd_per_mtok_output: 5.0,
        usd_per_mtok_cache_read: 0.1,
        ms_per_output_token: (5, 10),
    },
    Model {
        id: "gpt-4.1",
        provider: "openai",
        class: "ChatOpenAI",
        usd_per_mtok_input: 2.0,
        usd_per_mtok_output: 8.0,
        usd_per_mtok_cache_read: 0.5,
        ms_per_output_token: (10, 20),
    },
    Model {
        id: "gpt-4.1-mini",
        provider: "openai",
        class: "ChatOpenAI",
        usd_per_mtok_input: 0.4,
        usd_per_mtok_output: 1.6,
        usd_per_mtok_cache_read: 0.1,
        ms_per_output_token: (4, 9),
    },
];

/// What one agent is: its name, the tools it was given and the model it usually runs on.
#[derive(Debug)]
pub(crate) struct AgentProfile {
    pub name: String,
    pub tools: Vec<&'static Tool>,
    pub model: &'static Model,
    /// The model a run switches to mid-way now and then (`step.model_id` exists to
    /// show exactly this).
    pub fallback: &'static Model,
}

impl AgentProfile {
    /// A tool set like a real deployment's: always something to read with and something
    /// to write with, sometimes a harmless utility, sometimes an irreversible tool.
    pub(crate) fn random(name: String, rng: &mut StdRng) -> Self {
        let class = |c: SideEffect| TOOLS.iter().filter(move |t| t.side_effect == c);
        let mut tools: Vec<&'static Tool> = Vec::new();
        for (side_effect, at_least, chance) in [
            (SideEffect::Read, 1, 0.6),
            (SideEffect::Write, 1, 0.5),
            (SideEffect::None, 0, 0.4),
            (SideEffect::Irreversible, 0, 0.3),
        ] {
            let mut candidates: Vec<&'static Tool> = class(side_effect).collect();
            candidates.shuffle(rng);
            for (i, tool) in candidates.into_iter().enumerate() {
                if i < at_least || rng.gen_bool(chance) {
                    tools.push(tool);
                }
            }
        }
        let model = &MODELS[rng.gen_range(0..MODELS.len())];
        let fallback =
            MODELS.iter().filter(|m| m.id != model.id).collect::<Vec<_>>().choose(rng).copied().unwrap_or(model);
        Self { name, tools, model, fallback }
    }

    pub(crate) fn tools_of(&self, side_effect: SideEffect) -> Vec<&'static Tool> {
        self.tools.iter().copied().filter(|t| t.side_effect == side_effect).collect()
    }
}

const PEOPLE: [&str; 6] = [
    "dana.kim@example.com",
    "li.wei@example.org",
    "sam.okafor@example.net",
    "maria.rossi@example.com",
    "jon.berg@example.org",
    "ana.silva@example.net",
];

const TOPICS: [&str; 6] = [
    "refund policy for annual plans",
    "SSO login loop after password reset",
    "invoice shows the wrong VAT rate",
    "webhook deliveries delayed",
    "export to CSV drops unicode",
    "seat count after downgrade",
];

const REPOS: [&str; 4] = ["legacy-billing-sandbox", "tmp-migration-2024", "demo-fork-old", "scratch-ml-experiments"];

fn ticket_id(rng: &mut StdRng) -> String {
    format!("TCK-{}", rng.gen_range(10_000..99_999))
}

/// The call's arguments as the JSON string a model would produce. Retries and replays of
/// the same call reuse this string, which is what makes their idempotency key equal.
pub(crate) fn arguments(tool: &Tool, rng: &mut StdRng) -> String {
    (tool.arguments)(rng).to_string()
}

fn time_args(rng: &mut StdRng) -> Value {
    json!({ "timezone": draw::pick(rng, &["UTC", "Europe/Berlin", "America/New_York", "Asia/Seoul"]) })
}

fn calculate_args(rng: &mut StdRng) -> Value {
    json!({ "expression": format!("{} * 0.{}", rng.gen_range(10..5_000), rng.gen_range(5..25)) })
}

fn search_args(rng: &mut StdRng) -> Value {
    json!({ "query": draw::pick(rng, &TOPICS), "limit": rng.gen_range(3..10) })
}

fn ticket_args(rng: &mut StdRng) -> Value {
    json!({ "ticket_id": ticket_id(rng) })
}

fn customer_args(rng: &mut StdRng) -> Value {
    json!({ "email": draw::pick(rng, &PEOPLE) })
}

fn document_args(rng: &mut StdRng) -> Value {
    let topic = draw::pick(rng, &TOPICS);
    json!({
        "parent_id": format!("fld_{}", hex::encode(rng.gen::<[u8; 4]>())),
        "title": format!("Summary: {topic}"),
        "content": format!("Findings about {topic}, with the steps the customer already tried."),
    })
}

fn update_ticket_args(rng: &mut StdRng) -> Value {
    json!({
        "ticket_id": ticket_id(rng),
        "status": draw::pick(rng, &["pending", "solved", "on_hold"]),
        "comment": format!("Looked into {}; see linked docs.", draw::pick(rng, &TOPICS)),
    })
}

fn email_args(rng: &mut StdRng) -> Value {
    let topic = draw::pick(rng, &TOPICS);
    json!({
        "to": draw::pick(rng, &PEOPLE),
        "subject": format!("Re: {topic}"),
        "body": format!("Hello,\n\nthanks for your patience. About {topic}: here is what we found and what happens next.\n\nBest regards"),
    })
}

fn charge_args(rng: &mut StdRng) -> Value {
    json!({
        "customer_id": format!("cus_{}", hex::encode(rng.gen::<[u8; 6]>())),
        "amount_cents": rng.gen_range(5..500) * 100 - 1,
        "currency": draw::pick(rng, &["USD", "EUR"]),
    })
}

fn delete_repo_args(rng: &mut StdRng) -> Value {
    json!({ "org": "acme", "repo": draw::pick(rng, &REPOS) })
}

/// What the tool returned, as the JSON string recorded when bodies are on: the error, the
/// created resource, or the tool's usual answer. Derived from the outcome alone, so the
/// plan need not carry it.
pub(crate) fn result_body(tool: &Tool, external_id: Option<&str>, error: Option<&str>) -> String {
    match (error, external_id) {
        (Some(message), _) => json!({ "error": message }).to_string(),
        (None, Some(id)) => json!({ "id": id, "status": "created" }).to_string(),
        (None, None) => tool.returns.to_string(),
    }
}
