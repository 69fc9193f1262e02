//! What operators see is true for agents on standard instrumentation, over real HTTP on
//! SQLite and PostgreSQL: cost derived from tokens and prices (and "no price" said as
//! such), admin prices with a recompute of stored runs, unclassified tools named and
//! classified in a click, the run list's duplicate sort, partial agent match and
//! case-insensitive search, and an error run's reason at the top of its page.

mod common;

use common::spans::{ingest, kv, kv_bool, kv_i64, span_at};
use common::Live;
use domain::access::{Role, Scope};
use opentelemetry_proto::tonic::trace::v1::{span::Event, Span, Status};
use reqwest::{Method, StatusCode};
use serde_json::Value;
use std::time::Duration;
use store::testing::TestDb;

/// An admin ada (who is also an operator), a viewer victor, and an agent token that reads.
async fn live(t: &TestDb) -> Live {
    common::live(t, &[("ada", &[Role::Admin, Role::Viewer]), ("victor", &[Role::Viewer])], &[Scope::Read]).await
}

/// 2026-06-01, when every shipped price used here holds.
const T0: u64 = 1_780_272_000_000_000_000;

fn at(
    trace: u8,
    id: u8,
    parent: Option<u8>,
    name: &str,
    attrs: Vec<opentelemetry_proto::tonic::common::v1::KeyValue>,
) -> Span {
    span_at(trace, id, parent, name, T0 + u64::from(trace) * 60_000_000_000 + u64::from(id) * 1_000_000, attrs)
}

/// A GenAI-convention run: an agent span and a chat span per (model, input, cache read,
/// output), no cost anywhere.
fn genai_run(trace: u8, run: &str, agent: &str, steps: &[(&str, i64, i64, i64)]) -> Vec<Span> {
    let mut spans = vec![at(
        trace,
        1,
        None,
        "invoke_agent",
        vec![
            kv("gen_ai.operation.name", "invoke_agent"),
            kv("gen_ai.agent.name", agent),
            kv("gen_ai.conversation.id", run),
        ],
    )];
    for (i, (model, input, cached, output)) in steps.iter().enumerate() {
        spans.push(at(
            trace,
            10 + i as u8,
            Some(1),
            &format!("chat {model}"),
            vec![
                kv("gen_ai.operation.name", "chat"),
                kv("gen_ai.request.model", model),
                kv_i64("gen_ai.usage.input_tokens", input + cached),
                kv_i64("gen_ai.usage.cache_read.input_tokens", *cached),
                kv_i64("gen_ai.usage.output_tokens", *output),
            ],
        ));
    }
    spans
}

async fn run_json(s: &Live, run: &str) -> Value {
    let (status, body) = s.api(Method::GET, &format!("/api/v1/runs/{run}"), None, &s.agent).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body
}

/// Polls until `ok` holds for the run (a recompute runs in the background).
async fn eventually(s: &Live, run: &str, ok: impl Fn(&Value) -> bool) -> Value {
    for _ in 0..100 {
        let body = run_json(s, run).await;
        if ok(&body) {
            return body;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("run {run} never got there: {}", run_json(s, run).await);
}

#[tokio::test]
async fn standard_runs_get_a_cost_from_their_tokens_and_unpriced_models_are_named() {
    for t in TestDb::each_backend().await {
        let s = live(&t).await;
        ingest(&t.db, genai_run(1, "run-priced", "billing-agent", &[("claude-sonnet-4-5", 100_000, 20_000, 5_000)]))
            .await;
        ingest(&t.db, genai_run(2, "run-llama", "billing-agent", &[("my-llama-3", 1_000, 0, 10)])).await;
        ingest(
            &t.db,
            genai_run(3, "run-mixed", "billing-agent", &[("gpt-4.1-mini", 1_000_000, 0, 0), ("my-llama-3", 5, 0, 5)]),
        )
        .await;

        let priced = run_json(&s, "run-priced").await;
        let want = (100_000.0 * 3.0 + 20_000.0 * 0.3 + 5_000.0 * 15.0) / 1e6;
        assert!((priced["cost"].as_f64().unwrap() - want).abs() < 1e-9, "{priced}");
        assert_eq!(priced["cost_source"], "prices");
        assert_eq!(priced["input_tokens"], 100_000, "uncached input, as the article counts it");
        assert_eq!(priced["cache_tokens"], 20_000);
        assert_eq!(priced["prices_used"][0]["price"]["pattern"], "*claude-sonnet-4*");
        assert!((priced["step_list"][0]["cost"].as_f64().unwrap() - want).abs() < 1e-9);
        // What the server sends, the browser (and any Rust client) reads back.
        serde_json::from_value::<domain::canonical::RunDetail>(priced.clone()).expect("a run deserializes");

        let llama = run_json(&s, "run-llama").await;
        assert_eq!((llama["cost_source"].as_str(), llama["cost"].as_f64()), (Some("unpriced"), Some(0.0)));
        assert_eq!(llama["unpriced_models"], serde_json::json!(["my-llama-3"]));
        let mixed = run_json(&s, "run-mixed").await;
        assert_eq!(mixed["cost_source"], "partial");
        assert!((mixed["cost"].as_f64().unwrap() - 0.4).abs() < 1e-9, "{mixed}");

        let victor = s.person("victor").await;
        let page = victor.page("/runs/run-llama").await;
        assert!(page.contains("no price for model my-llama-3"), "the run page says why there is no cost");
        assert!(!page.contains("$0.0000"), "never a cost of zero for tokens nobody priced");
        let page = victor.page("/runs/run-priced").await;
        assert!(page.contains("derived from tokens") && page.contains("data-testid=\"prices-used\""));
        let list = victor.page("/runs").await;
        assert!(list.contains("at least $0.4000"), "a partial cost is a lower bound");
        t.cleanup().await;
    }
}

#[tokio::test]
async fn an_admin_price_and_a_recompute_reprice_stored_runs() {
    for t in TestDb::each_backend().await {
        let s = live(&t).await;
        ingest(&t.db, genai_run(1, "run-llama", "a", &[("my-llama-3", 1_000_000, 0, 1_000_000)])).await;
        let ada = s.person("ada").await;
        let (status, body) = ada
            .call(
                "save_price",
                &[("pattern", "my-llama*"), ("valid_from", "2026-01-01"), ("input", "x"), ("output", "1")],
            )
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        assert!(body.contains("dollars per million tokens"), "{body}");
        let (status, body) = ada
            .call(
                "save_price",
                &[("pattern", "my-llama*"), ("valid_from", "2026-01-01"), ("input", "0.5"), ("output", "1.5")],
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let page = ada.page("/admin/prices").await;
        assert!(page.contains("my-llama*") && page.contains("source-admin"), "listed with its source");
        assert_eq!(run_json(&s, "run-llama").await["cost_source"], "unpriced", "stored runs wait for a recompute");

        let (status, body) = ada.call("recompute_runs", &[("since", "2026-06-02"), ("until", "2026-06-01")]).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        let (status, body) = ada.call("recompute_runs", &[("since", "2026-05-01"), ("until", "2026-06-30")]).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let run = eventually(&s, "run-llama", |r| r["cost_source"] == "prices").await;
        assert!((run["cost"].as_f64().unwrap() - 2.0).abs() < 1e-9, "{run}");
        // The audit entry is written when the background recompute ends, just after the
        // last run it changed: wait for it as for the run.
        let mut audit = store::audit::list(&t.db, None, Some("runs_recomputed"), 5).await.unwrap();
        for _ in 0..100 {
            if !audit.entries.is_empty() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            audit = store::audit::list(&t.db, None, Some("runs_recomputed"), 5).await.unwrap();
        }
        assert_eq!(audit.entries.len(), 1);
        assert!(audit.entries[0].detail.as_deref().unwrap().contains("1 changed"), "{:?}", audit.entries[0]);
        let (status, _) = s
            .person("victor")
            .await
            .call("save_price", &[("pattern", "x"), ("valid_from", "2026-01-01"), ("input", "1"), ("output", "1")])
            .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "prices are for admins");
        t.cleanup().await;
    }
}

/// A run that sent the same email twice through a tool nobody classified.
fn unclassified_run(trace: u8, run: &str) -> Vec<Span> {
    let email = |id: u8| {
        at(
            trace,
            id,
            Some(1),
            "execute_tool send_email",
            vec![
                kv("gen_ai.operation.name", "execute_tool"),
                kv("gen_ai.tool.name", "send_email"),
                kv("gen_ai.tool.call.arguments", r#"{"to": "a@b.c", "body": "refund done"}"#),
                kv_bool("mcp.tool.annotations.destructiveHint", true),
            ],
        )
    };
    vec![
        at(
            trace,
            1,
            None,
            "invoke_agent",
            vec![kv("gen_ai.conversation.id", run), kv("gen_ai.agent.name", "Support-Bot")],
        ),
        email(2),
        email(3),
    ]
}

#[tokio::test]
async fn unclassified_tools_are_named_and_classified_in_one_click() {
    for t in TestDb::each_backend().await {
        let s = live(&t).await;
        ingest(&t.db, unclassified_run(1, "run-mail")).await;
        let run = run_json(&s, "run-mail").await;
        assert_eq!((run["duplicate_side_effects"].as_i64(), run["possible_duplicates"].as_i64()), (Some(0), Some(1)));
        assert_eq!(run["completed_without_read"], false, "an unclassified tool is never taken as harmless");
        assert_eq!(run["unclassified_tools"], serde_json::json!(["send_email"]));

        let victor = s.person("victor").await;
        let page = victor.page("/runs/run-mail").await;
        assert!(page.contains("unclassified tool(s): send_email"), "the run page names it");
        assert!(page.contains("data-testid=\"possible-duplicates\""));
        assert!(!page.contains("No write, irreversible or unclassified tool calls"));
        let list = victor.page("/runs").await;
        assert!(list.contains("1 possible dup"), "a text badge in the list");

        let ada = s.person("ada").await;
        let tools = ada.page("/admin/tools").await;
        assert!(tools.contains("data-tool=\"send_email\""), "every tool seen is listed");
        assert!(tools.contains("suggested: irreversible (its MCP annotations say destructiveHint)"), "{tools}");
        let (status, body) = ada.call("save_policy", &[("pattern", "send_*"), ("side_effect", "")]).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "a policy has no default class: {body}");
        let (status, body) =
            ada.call("classify_tool", &[("tool", "send_email"), ("side_effect", "irreversible")]).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let run = eventually(&s, "run-mail", |r| r["duplicate_side_effects"] == 1).await;
        assert_eq!(run["possible_duplicates"], 0);
        assert!(run["unclassified_tools"].as_array().unwrap().is_empty());
        let policy = store::policies::for_tool(&t.db, "send_email").await.unwrap().unwrap();
        assert_eq!(policy.side_effect, domain::canonical::SideEffect::Irreversible);
        let tools = ada.page("/admin/tools").await;
        assert!(tools.contains("policy send_email"), "the class and where it came from");
        let (status, _) = victor.call("classify_tool", &[("tool", "x"), ("side_effect", "read")]).await;
        assert_eq!(status, StatusCode::FORBIDDEN);
        t.cleanup().await;
    }
}

#[tokio::test]
async fn the_run_list_sorts_by_duplicates_matches_part_of_an_agent_and_ignores_case() {
    for t in TestDb::each_backend().await {
        let s = live(&t).await;
        ingest(&t.db, unclassified_run(1, "run-mail")).await;
        ingest(&t.db, genai_run(2, "run-plain", "billing-agent", &[("gpt-4.1", 10, 0, 1)])).await;
        store::policies::upsert(
            &t.db,
            &domain::policy::ToolPolicy::class("send_email", domain::canonical::SideEffect::Write),
        )
        .await
        .unwrap();
        let rules =
            domain::derive::Rules { policies: store::policies::list(&t.db).await.unwrap(), ..Default::default() };
        store::recompute::recompute(&t.db, &rules, &Default::default(), 1).await.unwrap();
        let ids = |body: &Value| -> Vec<String> {
            body["runs"].as_array().unwrap().iter().map(|r| r["run_id"].as_str().unwrap().to_string()).collect()
        };
        let s = &s;
        let list = |q: &str| {
            let path = format!("/api/v1/runs?{q}");
            async move { s.api(Method::GET, &path, None, &s.agent).await }
        };
        let (status, body) = list("sort=duplicates").await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(ids(&body), ["run-mail", "run-plain"]);
        assert_eq!(ids(&list("agent=BILLING").await.1), ["run-plain"], "part of the name, any case");
        assert_eq!(ids(&list("agent=bot").await.1), ["run-mail"]);
        assert!(ids(&list("agent=%25").await.1).is_empty(), "LIKE wildcards are taken literally");
        assert_eq!(ids(&list("q=SEND_EMAIL").await.1), ["run-mail"], "tool names in any case");
        let trace = "01".repeat(16).to_uppercase();
        assert_eq!(ids(&list(&format!("q={trace}")).await.1), ["run-mail"], "trace ids in upper case");
        let page = s.person("victor").await.page("/runs?sort=duplicates&limit=1").await;
        assert!(page.contains("data-testid=\"dup-count\""));
        let older = page.split("href=\"").find(|h| h.contains("cursor=")).unwrap().split('"').next().unwrap();
        let older_page = s.person("victor").await.page(&older.replace("&amp;", "&")).await;
        assert!(older_page.contains("data-testid=\"newest-runs\""), "a way back to the newest runs");
        t.cleanup().await;
    }
}

#[tokio::test]
async fn an_error_run_says_why_at_the_top_and_steps_are_numbered() {
    for t in TestDb::each_backend().await {
        let s = live(&t).await;
        let mut spans = genai_run(1, "run-fail", "a", &[("gpt-4.1", 10, 0, 1), ("gpt-4.1", 10, 0, 1)]);
        spans[0].status = Some(Status { code: 2, message: "agent crashed".into() });
        let mut tool = at(
            1,
            20,
            Some(11),
            "execute_tool query_db",
            vec![kv("gen_ai.operation.name", "execute_tool"), kv("gen_ai.tool.name", "query_db")],
        );
        tool.status = Some(Status { code: 2, message: "error".into() });
        tool.events.push(Event {
            name: "exception".into(),
            attributes: vec![kv("exception.type", "TimeoutError"), kv("exception.message", "db timed out after 30 s")],
            ..Default::default()
        });
        spans.push(tool);
        ingest(&t.db, spans).await;
        let mut limited = genai_run(2, "run-steps", "a", &[("gpt-4.1", 10, 0, 1)]);
        limited[0].attributes.push(kv("run.terminal_reason", "step_limit"));
        limited[0].attributes.push(kv_i64("budget.max_steps", 1));
        ingest(&t.db, limited).await;

        let victor = s.person("victor").await;
        let page = victor.page("/runs/run-fail").await;
        let failure =
            page.split("data-testid=\"run-failure\"").nth(1).expect("a failure line").split("</p>").next().unwrap();
        assert!(failure.contains("query_db") && failure.contains("TimeoutError: db timed out after 30 s"), "{failure}");
        assert!(page.contains(">step 1<") && page.contains(">step 2<"), "GenAI steps numbered as the run counts them");
        assert!(!page.contains(">step 0<"));
        let page = victor.page("/runs/run-steps").await;
        assert!(page.contains("stopped after 1 steps (limit 1)"), "the limit beside the value");
        t.cleanup().await;
    }
}
