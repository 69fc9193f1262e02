//! Escalations end to end over real HTTP, on SQLite and on PostgreSQL: the agent API and
//! its validation, the merge of API and trace reports into one escalation, claims against
//! the side effects observed in the run, and claim conflicts between operators.

mod common;

use common::spans::{ingest, kv, span_at};
use common::{token, Live};
use domain::access::{Role, Scope};
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::trace::v1::{span::Event, Span};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use store::testing::TestDb;

/// Operators olga and oscar, a viewer victor, and an agent token with `escalations`.
async fn live(t: &TestDb) -> Live {
    let operator: &[Role] = &[Role::Operator, Role::Viewer];
    let admin: &[Role] = &[Role::Operator, Role::Admin, Role::Viewer];
    common::live(
        t,
        &[("olga", operator), ("oscar", operator), ("victor", &[Role::Viewer]), ("ada", admin)],
        &[Scope::Escalations],
    )
    .await
}

/// A span starting `id` ms after a fixed instant.
fn span(trace: u8, id: u8, parent: Option<u8>, name: &str, attributes: Vec<KeyValue>) -> Span {
    span_at(trace, id, parent, name, 1_800_000_000_000_000_000 + u64::from(id) * 1_000_000, attributes)
}

fn email(trace: u8, id: u8, key: &str, external: &str) -> Span {
    let attrs = vec![
        kv("tool.name", "send_email"),
        kv("tool.side_effect", "irreversible"),
        kv("tool.outcome", "ok"),
        kv("tool.idempotency_key", key),
        kv("tool.external_id", external),
    ];
    span(trace, id, Some(1), "tool send_email", attrs)
}

/// A run that sent two emails and opened a ticket, then escalated: the root carries
/// `escalation.reason`, and with `event` an `escalation` span event with the details.
fn escalated_run(trace: u8, run_id: &str, event: bool) -> Vec<Span> {
    let mut root = span(
        trace,
        1,
        None,
        "agent.run",
        vec![kv("run.id", run_id), kv("escalation.reason", "insufficient_permission")],
    );
    if event {
        root.events.push(Event {
            name: "escalation".into(),
            attributes: vec![
                kv("blocking_fact", "refunds over 500 EUR need a manager"),
                kv("what_remains", r#"["refund order 77", {"description": "tell the customer"}]"#),
            ],
            ..Default::default()
        });
    }
    let ticket = span(
        trace,
        4,
        Some(1),
        "tool create_ticket",
        vec![
            kv("tool.name", "create_ticket"),
            kv("tool.side_effect", "write"),
            kv("tool.outcome", "ok"),
            kv("tool.external_id", "T-9"),
        ],
    );
    vec![root, email(trace, 2, "k1", "msg_1"), email(trace, 3, "k2", "msg_2"), ticket]
}

impl Live {
    async fn escalate(&self, body: Value) -> (StatusCode, Value) {
        self.api(Method::POST, "/api/v1/escalations", Some(body), &self.agent).await
    }
}

fn report(run: &str) -> Value {
    json!({
        "run_id": run, "reason": "insufficient_permission", "idempotency_key": "esc-1",
        "blocking_fact": "refunds over 500 EUR need a manager",
        "what_was_done": [
            {"tool": "send_email", "idempotency_key": "k1", "description": "told the customer we are on it"},
            {"tool": "charge_card", "external_id": "ch_404"}
        ],
        "what_remains": ["refund order 77", {"description": "tell the customer"}]
    })
}

#[tokio::test]
async fn the_api_validates_and_repeats_idempotently() {
    for t in TestDb::each_backend().await {
        let s = live(&t).await;
        for (body, needle) in [
            (json!({"reason": "low_confidence"}), "`run_id` is required"),
            (json!({"run_id": "r"}), "`reason` is required"),
            (json!({"run_id": "r", "reason": "tired"}), "unknown `reason` `tired`"),
            (json!({"run_id": "r", "reason": "other"}), "reason_text"),
            (json!({"run_id": "r", "reason": "low_confidence", "what_was_done": [{"at": "now"}]}), "needs a `tool`"),
            (
                json!({"run_id": "r", "reason": "low_confidence", "what_remains": (0..201).map(|i| i.to_string()).collect::<Vec<_>>()}),
                "at most 200 items",
            ),
            (json!({"run_id": "r", "reason": "low_confidence", "extra": 1}), "unknown field"),
        ] {
            let (status, body) = s.escalate(body).await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{needle}: {body}");
            assert!(body["error"]["message"].as_str().unwrap().contains(needle), "{needle}: {body}");
        }
        let (status, created) = s.escalate(report("run-api")).await;
        assert_eq!(status, StatusCode::CREATED, "{created}");
        assert_eq!((created["open"].as_bool(), created["from_api"].as_bool()), (Some(true), Some(true)));
        let (status, again) = s.escalate(report("run-api")).await;
        assert_eq!((status, &again["id"]), (StatusCode::OK, &created["id"]), "same key, same body");
        let mut changed = report("run-api");
        changed["blocking_fact"] = json!("something else");
        let (status, conflict) = s.escalate(changed).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
        assert!(conflict["error"]["message"].as_str().unwrap().contains("different escalation"), "{conflict}");
        let reader = token(&t.db, "reader", &[Scope::Read]).await;
        let (status, _) = s.api(Method::POST, "/api/v1/escalations", Some(report("x")), &reader).await;
        assert_eq!(status, StatusCode::FORBIDDEN);
        let id = created["id"].as_str().unwrap();
        let (status, read) = s.api(Method::GET, &format!("/api/v1/escalations/{id}"), None, &s.agent).await;
        assert_eq!(
            (status, read["what_remains"][1]["description"].as_str()),
            (StatusCode::OK, Some("tell the customer"))
        );
        t.cleanup().await;
    }
}

#[tokio::test]
async fn api_and_trace_reports_of_one_run_merge_into_one_escalation() {
    for t in TestDb::each_backend().await {
        let s = live(&t).await;
        // Traces first (with the details in a span event), then the API.
        ingest(&t.db, escalated_run(1, "run-trace-first", true)).await;
        let from_trace = store::escalations::for_run(&t.db, "run-trace-first").await.unwrap();
        assert_eq!(from_trace.len(), 1, "the escalated run opened one escalation");
        assert_eq!(from_trace[0].blocking_fact.as_deref(), Some("refunds over 500 EUR need a manager"));
        assert_eq!(from_trace[0].what_remains.len(), 2, "details from the span event");
        let (status, merged) = s.escalate(report("run-trace-first")).await;
        assert_eq!(status, StatusCode::OK, "merged, not created: {merged}");
        assert_eq!(merged["id"].as_str(), Some(from_trace[0].id.as_str()));
        assert_eq!((merged["from_api"].as_bool(), merged["from_trace"].as_bool()), (Some(true), Some(true)));
        assert_eq!(merged["what_was_done"].as_array().unwrap().len(), 2, "the agent's claims arrived");

        // The API first, then the traces (sent twice, as a retrying exporter would).
        let (status, filed) = s.escalate(report("run-api-first")).await;
        assert_eq!(status, StatusCode::CREATED);
        ingest(&t.db, escalated_run(2, "run-api-first", false)).await;
        ingest(&t.db, escalated_run(2, "run-api-first", false)).await;
        let all = store::escalations::for_run(&t.db, "run-api-first").await.unwrap();
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].id, filed["id"].as_str().unwrap());
        assert!(all[0].from_trace && all[0].from_api);
        let timeline = store::escalations::timeline(&t.db, &all[0].id).await.unwrap();
        assert_eq!(timeline.iter().filter(|e| e.kind == "merged").count(), 1, "{timeline:?}");
        t.cleanup().await;
    }
}

#[tokio::test]
async fn runs_escalating_in_one_export_each_open_one_and_are_announced_once() {
    use domain::notify::{Event, EventKind, WebhookFormat, WebhookTarget};
    use store::{escalations, webhooks};
    for t in TestDb::each_backend().await {
        // Three escalated runs and one that ended normally, in one export; the API filed
        // one of the three first, so that one merges instead of opening a second.
        let s = live(&t).await;
        let (status, filed) = s.escalate(report("run-b")).await;
        assert_eq!(status, StatusCode::CREATED);
        let mut spans = escalated_run(1, "run-a", true);
        spans.extend(escalated_run(2, "run-b", false));
        spans.extend(escalated_run(3, "run-c", false));
        spans.push(span(4, 1, None, "agent.run", vec![kv("run.id", "run-d")]));
        ingest(&t.db, spans).await;
        for run in ["run-a", "run-b", "run-c"] {
            let opened = escalations::for_run(&t.db, run).await.unwrap();
            assert_eq!(opened.len(), 1, "{run}: {opened:?}");
            assert!(opened[0].from_trace, "{run}");
            let timeline = escalations::timeline(&t.db, &opened[0].id).await.unwrap();
            let kinds: Vec<&str> = timeline.iter().map(|e| e.kind.as_str()).collect();
            let expected: &[&str] = if run == "run-b" { &["opened", "merged"] } else { &["opened"] };
            assert_eq!(kinds, expected, "{run}");
        }
        assert_eq!(escalations::for_run(&t.db, "run-b").await.unwrap()[0].id, filed["id"].as_str().unwrap());
        assert_eq!(escalations::for_run(&t.db, "run-a").await.unwrap()[0].what_remains.len(), 2, "event details");
        assert!(escalations::for_run(&t.db, "run-d").await.unwrap().is_empty());

        // Announcing: each escalation once, its webhook queued with the mark; a second
        // instance holding the same list announces nothing.
        let due = escalations::unannounced(&t.db).await.unwrap();
        assert_eq!(due.len(), 3);
        let target = WebhookTarget {
            name: "oncall".into(),
            url: "http://127.0.0.1:9/hook".into(),
            format: WebhookFormat::Json,
            ..WebhookTarget::default()
        };
        let event = |e: &domain::escalations::Escalation| Event {
            kind: EventKind::EscalationOpened,
            title: format!("Escalation: {}", e.run_id),
            summary: String::new(),
            link_path: format!("/escalations/{}", e.id),
            fields: Vec::new(),
            data: json!({ "id": e.id }),
        };
        let mut announced = escalations::announce(&t.db, &due, event, std::slice::from_ref(&target)).await.unwrap();
        announced.sort();
        let mut ids: Vec<String> = due.iter().map(|e| e.id.clone()).collect();
        ids.sort();
        assert_eq!(announced, ids);
        assert!(escalations::announce(&t.db, &due, event, &[target]).await.unwrap().is_empty());
        assert!(escalations::unannounced(&t.db).await.unwrap().is_empty());
        let queued = webhooks::list(&t.db, false, 100).await.unwrap();
        assert_eq!(queued.len(), 3, "{queued:?}");
        assert!(queued.iter().all(|d| d.event_kind == "escalation.opened" && d.target_name == "oncall"));
        t.cleanup().await;
    }
}

#[tokio::test]
async fn claims_are_checked_against_the_observed_side_effects() {
    for t in TestDb::each_backend().await {
        let s = live(&t).await;
        ingest(&t.db, escalated_run(3, "run-evidence", false)).await;
        let (_, e) = s.escalate(report("run-evidence")).await;
        let victor = s.person("victor").await;
        let page = victor.page(&format!("/escalations/{}", e["id"].as_str().unwrap())).await;
        let section = |testid: &str| -> String {
            let start =
                page.find(&format!("data-testid=\"{testid}\"")).unwrap_or_else(|| panic!("no {testid} in page"));
            page[start..].split("</table>").next().unwrap().to_string()
        };
        let unclaimed = section("observed-not-claimed");
        assert!(
            unclaimed.contains("msg_2") && unclaimed.contains("T-9"),
            "the unmentioned email and ticket: {unclaimed}"
        );
        assert!(!unclaimed.contains("msg_1"), "the claimed email is matched by its key");
        assert!(section("claimed-and-observed").contains("k1"));
        assert!(section("claimed-not-observed").contains("ch_404"), "the charge the traces never showed");
        assert!(page.contains("cannot-act"), "a viewer sees why they cannot act");
        t.cleanup().await;
    }
}

#[tokio::test]
async fn two_operators_cannot_both_hold_the_claim() {
    for t in TestDb::each_backend().await {
        let s = live(&t).await;
        let (_, e) = s.escalate(report("run-claims")).await;
        let id = e["id"].as_str().unwrap();
        let (olga, oscar, victor) = (s.person("olga").await, s.person("oscar").await, s.person("victor").await);
        let form = [("id", id)];
        let (a, b) = tokio::join!(olga.call("claim_escalation", &form), oscar.call("claim_escalation", &form));
        assert_eq!([a.0, b.0].iter().filter(|s| **s == StatusCode::OK).count(), 1, "{a:?} {b:?}");
        let (holder, other) = if a.0 == StatusCode::OK { (&olga, &oscar) } else { (&oscar, &olga) };
        let loser = if a.0 == StatusCode::OK { &b.1 } else { &a.1 };
        assert!(loser.contains("has claimed this escalation"), "{loser}");
        let (status, _) = victor.call("claim_escalation", &[("id", id)]).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "viewers cannot claim");
        let (status, body) = other.call("tick_escalation_item", &[("id", id), ("index", "0"), ("done", "true")]).await;
        assert_eq!(status, StatusCode::CONFLICT, "{body}");
        let (status, _) = holder.call("tick_escalation_item", &[("id", id), ("index", "0"), ("done", "true")]).await;
        assert_eq!(status, StatusCode::OK);
        let resolve = |outcome: &'static str, instructions: &'static str| {
            [
                ("id", id),
                ("outcome", outcome),
                ("note", "manager approved the refund"),
                ("instructions", instructions),
                ("accept_open_items", "on"),
            ]
        };
        let (status, _) = other.call("resolve_escalation", &resolve("completed_by_human", "")).await;
        assert_eq!(status, StatusCode::CONFLICT, "only the holder may resolve");
        let (status, body) = other
            .call("resolve_escalation", &[&resolve("completed_by_human", "")[..], &[("override_claim", "on")]].concat())
            .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "an operator cannot override a claim: {body}");
        let (status, body) = holder.call("resolve_escalation", &resolve("handed_back", "")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(body.contains("instructions"), "{body}");
        let (status, body) = holder
            .call(
                "resolve_escalation",
                &[
                    ("id", id),
                    ("outcome", "handed_back"),
                    ("note", "n"),
                    ("instructions", "refund order 77, then close"),
                ],
            )
            .await;
        assert_eq!(status, StatusCode::CONFLICT, "an item is still open: {body}");
        assert!(body.contains("still open") && body.contains("tell the customer"), "{body}");
        let (status, _) =
            holder.call("resolve_escalation", &resolve("handed_back", "refund order 77, then close")).await;
        assert_eq!(status, StatusCode::OK);
        let (_, read) = s.api(Method::GET, &format!("/api/v1/escalations/{id}"), None, &s.agent).await;
        assert_eq!(read["outcome"], "handed_back");
        assert_eq!(read["instructions"], "refund order 77, then close");
        assert_eq!(read["what_remains"][0]["done"], true);
        let timeline = store::escalations::timeline(&t.db, id).await.unwrap();
        let kinds: Vec<&str> = timeline.iter().map(|e| e.kind.as_str()).collect();
        assert_eq!(kinds, vec!["opened", "claimed", "item_done", "resolved"]);
        let audit = store::audit::list(&t.db, None, Some("escalation_resolved"), 5).await.unwrap();
        assert_eq!(audit.entries.len(), 1);
        t.cleanup().await;
    }
}

#[tokio::test]
async fn resolving_needs_the_claim_unless_an_administrator_overrides_it() {
    for t in TestDb::each_backend().await {
        let s = live(&t).await;
        let (_, e) = s.escalate(report("run-override")).await;
        let id = e["id"].as_str().unwrap();
        let (olga, ada) = (s.person("olga").await, s.person("ada").await);
        let form = |extra: &[(&'static str, &'static str)]| {
            let mut f =
                vec![("id", id), ("outcome", "abandoned"), ("note", "customer withdrew"), ("accept_open_items", "on")];
            f.extend_from_slice(extra);
            f
        };
        let (status, body) = olga.call("resolve_escalation", &form(&[])).await;
        assert_eq!(status, StatusCode::CONFLICT, "{body}");
        assert!(body.contains("claim this escalation before resolving it"), "{body}");
        let (status, _) = olga.call("claim_escalation", &[("id", id)]).await;
        assert_eq!(status, StatusCode::OK);
        let (status, body) = ada.call("resolve_escalation", &form(&[])).await;
        assert_eq!(status, StatusCode::CONFLICT, "an administrator too, unless they say so: {body}");
        let (status, body) = ada.call("resolve_escalation", &form(&[("override_claim", "on")])).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let audit = store::audit::list(&t.db, None, Some("escalation_resolved_over_claim"), 5).await.unwrap();
        assert_eq!(audit.entries.len(), 1, "the override is audited as one");
        assert_eq!(audit.entries[0].actor.as_deref(), Some("ada"));
        let timeline = store::escalations::timeline(&t.db, id).await.unwrap();
        let resolved = timeline.iter().find(|e| e.kind == "resolved").unwrap();
        assert!(resolved.detail.as_deref().unwrap().contains("overriding olga's claim"), "{resolved:?}");
        let page = olga.page(&format!("/escalations/{id}")).await;
        assert!(page.contains("data-testid=\"outcome\""));
        t.cleanup().await;
    }
}

#[tokio::test]
async fn reasons_and_details_sent_in_the_articles_words_on_spans_are_understood() {
    for t in TestDb::each_backend().await {
        let s = live(&t).await;
        let root = span(
            7,
            1,
            None,
            "agent.run",
            vec![
                kv("run.id", "run-words"),
                kv("escalation.reason", "Budget Exceeded"),
                kv("escalation.blocking_fact", "the refund needs 40 EUR more budget"),
                kv("escalation.what_was_done", r#"[{"tool": "send_email", "idempotency_key": "k1"}]"#),
                kv("escalation.what_remains", r#"["issue the refund"]"#),
            ],
        );
        ingest(&t.db, vec![root]).await;
        let opened = store::escalations::for_run(&t.db, "run-words").await.unwrap();
        let e = serde_json::to_value(opened.first().expect("opened from the trace")).unwrap();
        assert_eq!(e["reason"], "budget_exceeded", "{e}");
        assert!(e["reason_text"].is_null());
        assert_eq!(e["blocking_fact"], "the refund needs 40 EUR more budget");
        assert_eq!(e["what_was_done"][0]["tool"], "send_email");
        assert_eq!(e["what_remains"][0]["description"], "issue the refund");
        // The API takes the same words and shows the same label.
        let mut body = report("run-words-api");
        body["reason"] = json!("low confidence");
        body["idempotency_key"] = json!("esc-words");
        let (status, filed) = s.escalate(body).await;
        assert_eq!(status, StatusCode::CREATED, "{filed}");
        assert_eq!(filed["reason"], "low_confidence");
        t.cleanup().await;
    }
}

/// A run of `agent` that escalated `minutes_ago`: with `event`, through an `escalation`
/// span event at that time (its span started an hour before and is still going); else
/// through `escalation.reason` on a span that ended then.
fn escalated_at(trace: u8, run_id: &str, agent: &str, reason: &str, minutes_ago: i64, event: bool) -> Vec<Span> {
    let at_ns = (store::now_ms() - minutes_ago * 60_000) as u64 * 1_000_000;
    let mut attrs = vec![kv("run.id", run_id), kv("gen_ai.agent.name", agent)];
    if !event {
        attrs.push(kv("escalation.reason", reason));
    }
    let mut root = span_at(trace, 1, None, "agent.run", at_ns - 3_600_000_000_000, attrs);
    root.end_time_unix_nano = at_ns;
    if event {
        root.events.push(Event {
            name: "escalation".into(),
            time_unix_nano: at_ns,
            attributes: vec![kv("escalation.reason", reason), kv("blocking_fact", "the order is locked")],
            ..Default::default()
        });
        root.end_time_unix_nano = at_ns + 60_000_000_000;
    }
    vec![root]
}

#[tokio::test]
async fn the_queue_waits_from_when_the_run_needed_a_person_and_filters_by_reason_agent_claim_and_age() {
    use domain::alerts::AlertRule;
    for t in TestDb::each_backend().await {
        let s = live(&t).await;
        let db = &t.db;
        // Traces that arrive now about runs that needed a person two hours and 30 minutes ago,
        // and an agent that files through the API now.
        ingest(db, escalated_at(31, "run-old", "billing-bot", "budget exceeded", 120, true)).await;
        ingest(db, escalated_at(32, "run-mid", "support-bot", "low_confidence", 30, false)).await;
        let body = json!({"run_id": "run-new", "reason": "insufficient_permission", "agent": "billing-bot"});
        assert_eq!(s.escalate(body).await.0, StatusCode::CREATED);
        let now = chrono::Utc::now();
        let open = store::escalations::list(db, true, 10).await.unwrap();
        let runs: Vec<&str> = open.iter().map(|e| e.run_id.as_str()).collect();
        assert_eq!(runs, ["run-old", "run-mid", "run-new"], "longest waiting first, {}", t.backend());
        let waited = |i: usize| (now - open[i].needed_at).num_minutes();
        assert_eq!((waited(0), waited(1), waited(2)), (120, 30, 0), "{open:#?}");
        assert!(open.iter().all(|e| (now - e.opened_at).num_minutes() < 1), "all stored just now");

        let olga = s.person("olga").await;
        let page = olga.page("/escalations").await;
        assert!(page.contains("3 of 3 open, longest waiting first"), "{page}");
        assert!(page.contains(">2 h<") && page.contains(">30 min<"), "waiting since the run needed a person: {page}");
        let table = &page[page.find("<tbody").unwrap()..page.find("</tbody>").unwrap()];
        for words in ["budget exceeded", "low confidence", "insufficient permission"] {
            assert!(table.contains(&format!(">{words}<")), "{words}: {table}");
        }
        assert!(!table.contains(">budget_exceeded<") && !table.contains(">low_confidence<"), "reasons in words");

        let listed = |page: &str| -> Vec<String> {
            ["run-old", "run-mid", "run-new"]
                .iter()
                .filter(|r| page.contains(&format!("data-run=\"{r}\"")))
                .map(|r| r.to_string())
                .collect()
        };
        let filtered = olga.page("/escalations?reason=budget_exceeded").await;
        assert_eq!(listed(&filtered), ["run-old"]);
        assert!(filtered.contains("1 of 1 open matching the filters (3 open in all)"), "{filtered}");
        assert!(filtered.contains("<option value=\"budget_exceeded\" selected"), "the form shows the filter");
        assert_eq!(listed(&olga.page("/escalations?agent=billing-bot").await), ["run-old", "run-new"]);
        assert_eq!(listed(&olga.page("/escalations?age=1h").await), ["run-old"]);
        assert_eq!(listed(&olga.page("/escalations?age=15m&agent=billing-bot").await), ["run-old"]);
        let id = open[2].id.clone();
        assert_eq!(olga.call("claim_escalation", &[("id", &id)]).await.0, StatusCode::OK);
        assert_eq!(listed(&olga.page("/escalations?claim=mine").await), ["run-new"]);
        assert_eq!(listed(&olga.page("/escalations?claim=unclaimed").await), ["run-old", "run-mid"]);
        let oscar = s.person("oscar").await;
        assert!(listed(&oscar.page("/escalations?claim=mine").await).is_empty(), "mine is olga's");
        assert_eq!(listed(&oscar.page("/escalations?claim=claimed").await), ["run-new"]);
        let none = olga.page("/escalations?reason=other").await;
        assert!(none.contains("None of the 3 open escalations match these filters."), "{none}");
        let (status, body) = olga.call("load_escalations", &[("resolved", "false"), ("reason", "bored")]).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        assert!(body.contains("unknown reason `bored`"), "{body}");

        // The backlog alert and the navigation count from the same instant.
        let fired = app::services::alert_evaluation::evaluate_once(db, &Default::default(), store::now_ms(), 0)
            .await
            .unwrap()
            .fired;
        let backlog = fired.iter().find(|a| a.rule == AlertRule::EscalationBacklog).expect("fires at once");
        assert!(backlog.value >= 119.0 * 60.0, "the longest wait: {}", backlog.value);
        let (count, oldest) = store::escalations::backlog(db).await.unwrap();
        assert_eq!((count, oldest), (3, Some(open[0].needed_at.timestamp_millis())));
        // Past its limit a count stops one over it (the pages then say "10,000+"),
        // filtered or not; the oldest is still the oldest.
        use store::escalations::{backlog_up_to, count_up_to};
        assert_eq!(backlog_up_to(db, 1).await.unwrap(), (2, Some(open[0].needed_at.timestamp_millis())));
        assert_eq!(backlog_up_to(db, 3).await.unwrap().0, 3);
        use domain::escalations::QueueFilter;
        let billing = QueueFilter { agent: Some("billing-bot".into()), ..Default::default() };
        assert_eq!(count_up_to(db, true, &billing, 1).await.unwrap(), 2);
        assert_eq!(count_up_to(db, true, &billing, 2).await.unwrap(), 2);
        assert_eq!(count_up_to(db, true, &QueueFilter::default(), 2).await.unwrap(), 3);
        // So do the backlog alert's counts (all three late, two of them unclaimed), and the
        // oldest it reads are still every late one.
        use store::alerts::escalation_backlog_up_to;
        let late = escalation_backlog_up_to(db, store::now_ms(), false, 1).await.unwrap();
        assert_eq!((late.late, late.late_unclaimed, late.oldest.len()), (2, 2, 3));
        let late = escalation_backlog_up_to(db, store::now_ms(), false, 5).await.unwrap();
        assert_eq!((late.late, late.late_unclaimed, late.oldest.len()), (3, 2, 3));
        t.cleanup().await;
    }
}
