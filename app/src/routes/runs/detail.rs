//! One run (`/runs/{run_id}`): why it stopped, what it cost, what it changed in the world
//! (side effects, duplicates called out), and the waterfall of every span of every trace
//! on one time axis. Everything an agent sent is rendered as text.

use crate::canonical::{
    RunDetail, RunFailure, RunView, SideEffect, SpanPanel, TerminalReason, ToolCallView, WaterfallSpan,
};
use crate::components::badges::{ReasonBadge, Tag};
use crate::components::status::ErrorBox;
use crate::components::time::{duration_ms, format_utc};
use crate::functions::runs::{load_run, load_span};
use crate::url::{encode, run_href};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;
use std::collections::HashMap;

#[component]
pub fn RunDetailPage() -> impl IntoView {
    let query = use_query_map();
    // From the path, decoded once (see `url::path_id`).
    let run_id = crate::url::path_id("/runs/");
    // Page 1 is the same with or without `?page=1`: selecting a span (whose link names the
    // page) must not reload the run, which empties the page for a moment and scrolls it
    // to the top.
    let page = Memo::new(move |_| query.with(|q| q.get("page").and_then(|p| p.parse::<i64>().ok()).filter(|p| *p > 1)));
    let selected = Memo::new(move |_| query.with(|q| q.get("span")));
    let run = Resource::new(move || (run_id.get(), page.get()), |(id, page)| load_run(id, page));
    let span = Resource::new(
        move || (run_id.get(), selected.get()),
        |(id, selected)| async move {
            match selected.as_deref().and_then(|s| s.split_once(':')) {
                Some((trace, span)) => Some(load_span(id, trace.to_string(), span.to_string()).await),
                None => None,
            }
        },
    );
    // Created here, beside the run's own resource, so the server's async render knows
    // every resource of the page before it starts.
    let escalations = Resource::new(move || run_id.get(), crate::functions::escalations::load_run_escalations);
    let approvals = Resource::new(move || run_id.get(), crate::functions::approvals::load_run_approvals);
    let calls = Resource::new(move || run_id.get(), crate::functions::ledger::load_run_calls);
    view! {
        <Title text=move || format!("Run {}", run_id.get())/>
        <p class="crumbs"><a href="/runs">"← Runs"</a></p>
        <super::escalation_link::RunEscalations data=escalations/>
        // The waterfall and the selected span are sibling boundaries, side by side in
        // one grid, each waiting on its own resource.
        <Suspense fallback=|| view! { <p class="loading">"Loading run…"</p> }>
            {move || Suspend::new(async move {
                match run.await {
                    Ok(view) => view! { <RunTop view/> }.into_any(),
                    Err(error) => view! { <ErrorBox error/> }.into_any(),
                }
            })}
        </Suspense>
        <div class="trace-layout">
            <Suspense fallback=|| ()>
                // The run's error is shown once, above; here it leaves the grid empty.
                {move || Suspend::new(async move {
                    match run.await {
                        Ok(view) => view! { <RunTrace view selected/> }.into_any(),
                        Err(_) => ().into_any(),
                    }
                })}
            </Suspense>
            <SelectedSpan span run_id=run_id/>
        </div>
        <super::calls_panel::RunCalls data=calls/>
        <super::approvals_panel::RunApprovals data=approvals/>
    }
}

/// The selected span's details, beside the waterfall (below it on a phone, as a sheet).
#[component]
fn SelectedSpan(
    span: Resource<Option<Result<SpanPanel, crate::errors::AppError>>>,
    run_id: Memo<String>,
) -> impl IntoView {
    view! {
        <Suspense fallback=|| view! { <aside class="span-panel placeholder"><p class="loading">"Loading span…"</p></aside> }>
            {move || {
                Suspend::new(async move {
                    let run_id = run_id.get_untracked();
                    match span.await {
                        Some(Ok(panel)) => view! { <SpanPanelView panel run_id/> }.into_any(),
                        Some(Err(error)) => view! { <aside class="span-panel"><ErrorBox error/></aside> }.into_any(),
                        None => view! {
                            <aside class="span-panel placeholder" data-testid="span-placeholder">
                                <p class="muted">"Select a span to see its attributes, events and bodies here."</p>
                            </aside>
                        }
                        .into_any(),
                    }
                })
            }}
        </Suspense>
    }
}

/// Everything above the waterfall: why the run stopped, what it cost, what it changed.
#[component]
fn RunTop(view: RunView) -> impl IntoView {
    let RunView { detail, failure, steps, has_bodies, .. } = view;
    let run_id = detail.run.run_id.clone();
    let replay = if has_bodies {
        view! {
            <a class="button" href=format!("{}/replay.json", run_href(&run_id)) download=format!("{run_id}.replay.json")
                data-testid="replay-download">"Download replay fixture"</a>
        }
        .into_any()
    } else {
        view! { <span class="muted small">"No replay fixture: bodies were not retained for this run."</span> }
            .into_any()
    };
    view! {
        <Header detail=detail.clone() failure/>
        <div class="actions">{replay}</div>
        <Duplicates detail=detail.clone()/>
        <SideEffects calls=detail.tool_call_list.clone()/>
        <super::cost::CostSection detail steps/>
    }
}

/// The waterfall, a page of spans at a time.
#[component]
fn RunTrace(view: RunView, selected: Memo<Option<String>>) -> impl IntoView {
    let RunView { detail, spans, span_page, span_pages, total_spans, .. } = view;
    let run_id = detail.run.run_id.clone();
    view! {
        <section class="panel trace-tree">
            <h2>{format!("Waterfall · {total_spans} spans")}</h2>
            <Waterfall spans run_id=run_id.clone() page=span_page selected/>
            {(span_pages > 1).then(|| {
                let link = |p: i64| format!("{}?page={p}", run_href(&run_id));
                view! {
                    <p class="pager">
                        {format!("Page {span_page} of {span_pages} (spans in start order). ")}
                        {(span_page > 1).then(|| view! { <a href=link(span_page - 1)>"← earlier spans"</a> " "})}
                        {(span_page < span_pages).then(|| view! { <a href=link(span_page + 1)>"later spans →"</a> })}
                    </p>
                }
            })}
        </section>
    }
}

#[component]
fn Header(detail: RunDetail, failure: Option<RunFailure>) -> impl IntoView {
    let unclassified = detail.unclassified_tools.clone();
    let (step_limit, cost_limit) = (detail.step_limit, detail.cost_limit);
    let r = detail.run;
    let mut flags: Vec<(&str, String)> = Vec::new();
    // The article: credentials must not enter the model's context. A tool call's
    // arguments are what the model wrote, so a credential there was in its context.
    let mut leaked: Vec<String> =
        detail.tool_call_list.iter().filter(|c| c.credential_in_arguments).map(|c| c.tool.clone()).collect();
    if !leaked.is_empty() {
        let calls = leaked.len();
        leaked.sort();
        leaked.dedup();
        flags.push((
            "flag-credential",
            format!(
                "{calls} tool call(s) carried a credential in their arguments ({}), redacted before storage: \
                 credentials must not reach the model's context",
                leaked.join(", ")
            ),
        ));
    }
    if !unclassified.is_empty() {
        flags.push((
            "flag-unclassified",
            format!(
                "unclassified tool(s): {}. Nobody has said whether they read, write or cannot be undone, so \
                 their repeats are possible duplicates; classify them under Admin → Tools",
                unclassified.join(", ")
            ),
        ));
    }
    if r.possible_duplicates > 0 {
        flags.push((
            "flag-possible-dup",
            format!(
                "{} possible duplicate(s): an unclassified tool succeeded more than once with the same arguments",
                r.possible_duplicates
            ),
        ));
    }
    if r.duplicate_side_effects > 0 {
        flags.push((
            "flag-dup",
            format!(
                "{} duplicate side effect(s): a write or irreversible call succeeded more than once for the same key",
                r.duplicate_side_effects
            ),
        ));
    }
    if r.deduped_calls > 0 {
        flags.push(("flag-deduped", format!("{} call(s) deduplicated by the agent's own ledger", r.deduped_calls)));
    }
    if r.completed_without_read {
        flags.push((
            "flag-noread",
            "completed without calling any read tool: its claims may rest on no evidence".into(),
        ));
    }
    if r.approval_violations > 0 {
        flags.push(("flag-approval", format!("{} tool call(s) ran without a valid approval", r.approval_violations)));
    }
    if let Some(reason) = &r.escalation_reason {
        flags.push(("flag-escalated", format!("escalation: {reason}")));
    }
    let unfinished = matches!(r.terminal_reason, TerminalReason::StepLimit | TerminalReason::Budget);
    // Why it stopped, in words, beside the badge.
    let why = match r.terminal_reason {
        TerminalReason::StepLimit => Some(match step_limit {
            Some(limit) => format!("stopped after {} steps (limit {limit})", r.steps),
            None => format!("stopped after {} steps; the agent did not report its limit", r.steps),
        }),
        TerminalReason::Budget => Some(match cost_limit {
            Some(limit) => format!("spent {} (budget {})", money(r.cost), money(limit)),
            None => format!("spent {}; the agent did not report its budget", money(r.cost)),
        }),
        _ => None,
    };
    let failure_line = failure.map(|f| {
        let what = match (&f.exception_type, &f.message) {
            (Some(t), Some(m)) => format!("{t}: {m}"),
            (Some(t), None) => t.clone(),
            (None, Some(m)) => m.clone(),
            (None, None) => "no message".into(),
        };
        view! {
            <p class="failure" data-testid="run-failure">
                <strong>"Failed in "</strong><code>{f.span_name.clone()}</code>": "
                <span class="failure-message">{what}</span>
            </p>
        }
    });
    view! {
        <header class="run-header">
            <h1><code>{r.run_id.clone()}</code></h1>
            <div class="reason-line" data-testid="terminal-reason">
                <ReasonBadge reason=r.terminal_reason large=true/>
                {unfinished.then(|| view! { <span class="warn-text">"did not finish its task"</span> })}
                {why.map(|w| view! { <span class="limit" data-testid="run-limit">{w}</span> })}
            </div>
            {failure_line}
            <dl class="facts">
                <div><dt>"Agent"</dt><dd>{r.agent.clone().unwrap_or_else(|| "—".into())}</dd></div>
                <div><dt>"Trigger"</dt><dd>{r.trigger.as_str()}</dd></div>
                <div><dt>"Started"</dt><dd>{r.started_at.map(|t| format_utc(&t)).unwrap_or_else(|| "—".into())}</dd></div>
                <div><dt>"Wall clock"</dt><dd>{r.wall_clock_ms.map(duration_ms).unwrap_or_else(|| "running".into())}</dd></div>
                <div><dt>"Cost"</dt><dd data-testid="run-cost">{super::cost::cost_text(&r)}
                    <span class="muted small cost-source">{super::cost::source_text(&r)}</span></dd></div>
                <div><dt>"Tokens in / out"</dt><dd>{format!("{} / {}", thousands(r.input_tokens), thousands(r.output_tokens))}
                    {(r.cache_tokens > 0).then(|| view! { <span class="muted small">{format!(" + {} cache reads", thousands(r.cache_tokens))}</span> })}</dd></div>
                <div><dt>"Steps"</dt><dd>{r.steps}</dd></div>
                <div><dt>"Tool calls"</dt><dd>{r.tool_calls}</dd></div>
                <div><dt>"Traces"</dt><dd>
                    {r.trace_ids.iter().enumerate().map(|(i, t)| view! {
                        <div><span class="muted small">{format!("attempt {} ", i + 1)}</span><code>{t.clone()}</code></div>
                    }).collect_view()}
                </dd></div>
            </dl>
            {(!flags.is_empty()).then(|| view! {
                <ul class="flag-list" data-testid="run-flags">
                    {flags.into_iter().map(|(class, text)| view! { <li class=class>{text}</li> }).collect_view()}
                </ul>
            })}
        </header>
    }
}

/// Dollars as the run page shows them: cents for large amounts, more digits for small.
pub fn money(usd: f64) -> String {
    if usd >= 100.0 {
        format!("${usd:.2}")
    } else {
        format!("${usd:.4}")
    }
}

/// An integer with thin spaces between thousands, so token counts read at a glance.
pub fn thousands(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push('\u{202f}');
        }
        out.push(ch);
    }
    if n < 0 {
        format!("-{out}")
    } else {
        out
    }
}

fn times(n: i64) -> String {
    match n {
        2 => "twice".into(),
        3 => "three times".into(),
        n => format!("{n} times"),
    }
}

#[component]
fn Duplicates(detail: RunDetail) -> impl IntoView {
    let (possible, sure): (Vec<_>, Vec<_>) = detail.duplicates.into_iter().partition(|d| d.possible);
    let list = |items: Vec<crate::canonical::DuplicateView>| {
        items
            .into_iter()
            .map(|d| {
                let ids = match d.external_ids.len() {
                    0 => "no external ids were reported".to_string(),
                    _ => format!("external ids {}", d.external_ids.join(" and ")),
                };
                view! {
                    <li>
                        <code>{d.tool.clone()}</code>
                        {format!(" succeeded {} for key ", times(d.count))}
                        <code>{d.key.clone()}</code>
                        {format!(": {ids}")}
                    </li>
                }
            })
            .collect_view()
    };
    view! {
        {(!sure.is_empty()).then(|| view! {
            <section class="callout danger" data-testid="duplicates">
                <h2>"Duplicate side effects"</h2>
                <ul>{list(sure)}</ul>
            </section>
        })}
        {(!possible.is_empty()).then(|| view! {
            <section class="callout warn" data-testid="possible-duplicates">
                <h2>"Possible duplicates"</h2>
                <p class="small">"These tools are unclassified: if they write, each repeat below happened twice in the world."</p>
                <ul>{list(possible)}</ul>
            </section>
        })}
    }
}

/// Every write, irreversible or unclassified call (an unclassified tool may well write),
/// retries grouped under the key they share.
#[component]
fn SideEffects(calls: Vec<ToolCallView>) -> impl IntoView {
    let mut effects: Vec<ToolCallView> = calls
        .into_iter()
        .filter(|c| c.side_effect.changes_the_world() || c.side_effect == SideEffect::Unknown)
        .collect();
    let unclassified = effects.iter().filter(|c| c.side_effect == SideEffect::Unknown).count();
    effects.sort_by(|a, b| {
        (a.idempotency_key.as_deref(), a.attempt, a.started_at).cmp(&(
            b.idempotency_key.as_deref(),
            b.attempt,
            b.started_at,
        ))
    });
    view! {
        <section class="panel" data-testid="side-effects">
            <h2>"Side effects"</h2>
            {(unclassified > 0).then(|| view! {
                <p class="small warn-text" data-testid="unclassified-note">
                    {format!("{unclassified} call(s) of unclassified tools are listed too: they may have changed the world.")}
                </p>
            })}
            {if effects.is_empty() {
                view! { <p class="muted">"No write, irreversible or unclassified tool calls."</p> }.into_any()
            } else {
                view! {
                    <table class="grid">
                        <thead><tr><th>"Step"</th><th>"Tool"</th><th>"Class"</th><th>"Outcome"</th><th>"Attempt"</th><th>"Idempotency key"</th><th>"External id"</th></tr></thead>
                        <tbody>
                            {effects.into_iter().map(|c| view! {
                                <tr class:retry={c.attempt > 1}>
                                    <td>{c.step_index.map(|s| s.to_string()).unwrap_or_default()}</td>
                                    <td><code>{c.tool.clone()}</code></td>
                                    <td>{effect_tag(c.side_effect)}</td>
                                    <td><Tag kind="outcome" value=c.outcome.as_str()/></td>
                                    <td>{if c.attempt > 1 { format!("↳ retry {}", c.attempt) } else { "1".into() }}</td>
                                    <td><code>{c.idempotency_key.clone().unwrap_or_default()}</code></td>
                                    <td><code>{c.external_id.clone().unwrap_or_default()}</code></td>
                                </tr>
                            }).collect_view()}
                        </tbody>
                    </table>
                }.into_any()
            }}
        </section>
    }
}

/// A class as the pages name it: `unknown` is shown as "unclassified", never as harmless.
pub fn effect_tag(class: SideEffect) -> impl IntoView {
    let label = if class == SideEffect::Unknown { "unclassified" } else { class.as_str() };
    view! { <span class=format!("badge effect-{}", class.as_str())>{label}</span> }
}

/// The spans of one page as a tree: children under their parent, collapsible, bars to
/// scale on the run's time axis.
#[component]
fn Waterfall(spans: Vec<WaterfallSpan>, run_id: String, page: i64, selected: Memo<Option<String>>) -> impl IntoView {
    if spans.is_empty() {
        return view! { <p class="muted">"No spans."</p> }.into_any();
    }
    let start = spans.iter().map(|s| s.start_ns).min().unwrap_or(0);
    let end = spans.iter().map(|s| s.end_ns.max(s.start_ns)).max().unwrap_or(start).max(start + 1);
    let present: std::collections::HashSet<(String, String)> =
        spans.iter().map(|s| (s.trace_id.clone(), s.span_id.clone())).collect();
    let mut children: HashMap<(String, String), Vec<WaterfallSpan>> = HashMap::new();
    let mut roots = Vec::new();
    for s in spans {
        match &s.parent_span_id {
            Some(p) if present.contains(&(s.trace_id.clone(), p.clone())) => {
                children.entry((s.trace_id.clone(), p.clone())).or_default().push(s)
            }
            _ => roots.push(s),
        }
    }
    let cx = WaterfallCx { start, end, run_href: run_href(&run_id), page, selected };
    view! {
        <div class="waterfall" data-testid="waterfall">
            {roots.into_iter().map(|root| node(root, &mut children, &cx, 0)).collect_view()}
        </div>
    }
    .into_any()
}

/// Siblings in start order, except that each retry (`attempt` > 1) follows the earlier
/// attempts of the same call (same tool and idempotency key, or same tool without a key),
/// so a retried call reads as one group; `true` marks the retries placed that way.
fn group_retries(spans: Vec<WaterfallSpan>) -> Vec<(WaterfallSpan, bool)> {
    let call = |s: &WaterfallSpan| s.tool_name.clone().map(|tool| (tool, s.idempotency_key.clone()));
    let mut out: Vec<(WaterfallSpan, bool)> = Vec::with_capacity(spans.len());
    for s in spans {
        let is_retry = s.attempt.is_some_and(|a| a > 1);
        let group_end = if is_retry {
            call(&s).and_then(|c| out.iter().rposition(|(o, _)| call(o).as_ref() == Some(&c)))
        } else {
            None
        };
        match group_end {
            Some(at) => out.insert(at + 1, (s, true)),
            None => out.push((s, false)),
        }
    }
    out
}

struct WaterfallCx {
    start: i64,
    end: i64,
    run_href: String,
    page: i64,
    selected: Memo<Option<String>>,
}

fn node(
    span: WaterfallSpan,
    children: &mut HashMap<(String, String), Vec<WaterfallSpan>>,
    cx: &WaterfallCx,
    depth: usize,
) -> AnyView {
    let kids = children.remove(&(span.trace_id.clone(), span.span_id.clone())).unwrap_or_default();
    let row = row(&span, cx, depth);
    if kids.is_empty() {
        return view! { <div class="wf-leaf">{row}</div> }.into_any();
    }
    let rendered: Vec<AnyView> = group_retries(kids)
        .into_iter()
        .map(|(k, retry)| {
            let child = node(k, children, cx, depth + 1);
            if retry {
                view! { <div class="wf-retry">{child}</div> }.into_any()
            } else {
                child
            }
        })
        .collect();
    view! {
        <details open class="wf-node">
            <summary>{row}</summary>
            <div class="wf-children">{rendered}</div>
        </details>
    }
    .into_any()
}

fn row(s: &WaterfallSpan, cx: &WaterfallCx, depth: usize) -> impl IntoView {
    let total = (cx.end - cx.start) as f64;
    let left = (s.start_ns - cx.start) as f64 / total * 100.0;
    let width = ((s.end_ns.max(s.start_ns) - s.start_ns) as f64 / total * 100.0).max(0.4);
    let key = format!("{}:{}", s.trace_id, s.span_id);
    let href = format!("{}?page={}&span={}", cx.href_base(), cx.page, encode(&key));
    let selected = cx.selected;
    let is_selected = {
        let key = key.clone();
        move || selected.with(|s| s.as_deref() == Some(key.as_str()))
    };
    let role = s.role.clone().unwrap_or_default();
    let error = s.status_code == 2;
    let duration = duration_ms((s.end_ns.max(s.start_ns) - s.start_ns) / 1_000_000);
    let status = match s.status_code {
        2 => format!("error{}", s.status_message.as_deref().map(|m| format!(": {m}")).unwrap_or_default()),
        1 => "ok".into(),
        _ => "unset".into(),
    };
    let tooltip = format!("{} · {duration} · {status}", s.name);
    view! {
        <div class=format!("wf-row role-{role}") class:selected=is_selected class:error=error
            style=format!("--depth:{depth}") title=tooltip>
            // Opens the span beside the tree without moving the page (with JavaScript);
            // without it, the page reloads with the span open.
            <a class="wf-name" href=href data-noscroll="">
                {match role.as_str() {
                    "step" => Some(view! { <span class="badge role-step">{match s.step_index {
                        Some(i) => format!("step {i}"),
                        None => "step".to_string(),
                    }}</span> }.into_any()),
                    "tool" => Some(view! { <span class="badge role-tool">{match s.step_index {
                        Some(i) => format!("tool · step {i}"),
                        None => "tool".to_string(),
                    }}</span> }.into_any()),
                    _ => None,
                }}
                <span class="name">{s.name.clone()}</span>
            </a>
            <span class="wf-tags">
                {s.side_effect.as_deref().and_then(SideEffect::parse).map(effect_tag)}
                {s.outcome.clone().map(|v| view! { <Tag kind="outcome" value=v/> })}
                {s.attempt.filter(|a| *a > 1).map(|a| view! { <span class="badge retry">{format!("↳ retry, attempt {a}")}</span> })}
                {s.status_message.clone().map(|m| {
                    let title = m.clone();
                    view! { <span class="status-message" title=title>{m}</span> }
                })}
            </span>
            <span class="wf-track">
                <span class="wf-bar" style=format!("left:{left:.2}%;width:{width:.2}%")></span>
            </span>
            <span class="wf-duration">{duration}</span>
        </div>
    }
}

impl WaterfallCx {
    fn href_base(&self) -> &str {
        &self.run_href
    }
}

/// The selected span: canonical fields first, then raw attributes, events, resource and
/// bodies, all as text.
#[component]
fn SpanPanelView(panel: SpanPanel, run_id: String) -> impl IntoView {
    let s = panel.span;
    let close = run_href(&run_id);
    let canonical: Vec<(&str, Option<String>)> = vec![
        ("span id", Some(s.span_id.clone())),
        ("trace id", Some(s.trace_id.clone())),
        ("parent", s.parent_span_id.clone()),
        ("role", s.role.clone()),
        ("step", s.step_index.map(|i| i.to_string())),
        ("tool", s.tool_name.clone()),
        (
            "side effect",
            s.side_effect.as_deref().map(|v| if v == "unknown" { "unclassified".to_string() } else { v.to_string() }),
        ),
        ("outcome", s.outcome.clone()),
        ("attempt", s.attempt.map(|a| a.to_string())),
        ("idempotency key", s.idempotency_key.clone()),
        ("external id", s.external_id.clone()),
        ("duration", Some(duration_ms((s.end_ns.max(s.start_ns) - s.start_ns) / 1_000_000))),
        (
            "status",
            Some(match s.status_code {
                1 => "ok".into(),
                2 => "error".into(),
                _ => "unset".into(),
            }),
        ),
        ("status message", s.status_message.clone()),
    ];
    view! {
        <aside class="span-panel" data-testid="span-panel">
            <header>
                <h2>{s.name.clone()}</h2>
                <a href=close class="small">"close"</a>
            </header>
            <dl class="facts">
                {canonical.into_iter().filter_map(|(k, v)| v.map(|v| view! { <div><dt>{k}</dt><dd><code>{v}</code></dd></div> })).collect_view()}
            </dl>
            <h3>"Attributes"</h3>
            <pre class="json" data-testid="span-attributes">{panel.attributes}</pre>
            <h3>"Events"</h3>
            <pre class="json">{panel.events}</pre>
            <h3>"Resource"</h3>
            <pre class="json">{panel.resource}</pre>
            <h3>"Bodies"</h3>
            {match panel.bodies {
                Some(b) => view! { <pre class="json" data-testid="span-bodies">{b}</pre> }.into_any(),
                None => view! { <p class="muted small">"Not retained (see the body policy)."</p> }.into_any(),
            }}
        </aside>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(id: &str, start: i64, tool: &str, key: Option<&str>, attempt: i64) -> WaterfallSpan {
        WaterfallSpan {
            trace_id: "t".into(),
            span_id: id.into(),
            parent_span_id: Some("root".into()),
            name: format!("tool {tool}"),
            start_ns: start,
            end_ns: start + 1,
            status_code: 0,
            status_message: None,
            role: Some("tool".into()),
            step_index: None,
            tool_name: Some(tool.into()),
            side_effect: None,
            outcome: None,
            attempt: Some(attempt),
            idempotency_key: key.map(Into::into),
            external_id: None,
        }
    }

    #[test]
    fn retries_follow_their_first_attempt() {
        let spans = vec![
            tool("a1", 1, "send_email", Some("k1"), 1),
            tool("b1", 2, "lookup", None, 1),
            tool("c1", 3, "charge", Some("k2"), 1),
            tool("a2", 4, "send_email", Some("k1"), 2),
            tool("a3", 5, "send_email", Some("k1"), 3),
            tool("x2", 6, "refund", Some("k9"), 2),
        ];
        let order: Vec<(String, bool)> = group_retries(spans).into_iter().map(|(s, r)| (s.span_id, r)).collect();
        let expected = [("a1", false), ("a2", true), ("a3", true), ("b1", false), ("c1", false), ("x2", false)];
        assert_eq!(
            order,
            expected.map(|(id, r)| (id.to_string(), r)).to_vec(),
            "a retry without a first attempt on the page stays in place"
        );
    }
}
