//! One run (`/runs/{run_id}`): why it stopped, what it cost, what it changed in the world
//! (side effects, duplicates called out), and the waterfall of every span of every trace
//! on one time axis. Everything an agent sent is rendered as text.

use crate::components::badges::{ReasonBadge, Tag};
use crate::components::numbers::{money, thousands};
use crate::components::status::ErrorBox;
use crate::components::time::{duration_ms, format_utc};
use crate::functions::runs::{load_run, load_span};
use domain::canonical::{
    MarkKind, RunDetail, RunFailure, RunView, SideEffect, SpanMark, SpanPanel, TerminalReason, ToolCallView,
    WaterfallSpan,
};
use domain::url::{encode, run_href};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;
use std::collections::HashMap;

/// The waterfall's place in a run, as its URL says: the page, the subtree zoomed into, the
/// search, whether the tree starts collapsed. Links keep all of it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TraceParams {
    pub page: Option<i64>,
    pub zoom: Option<String>,
    pub q: Option<String>,
    pub collapsed: bool,
}

impl TraceParams {
    /// The run's URL with these params, on `page`, with `span` selected.
    pub fn href(&self, run: &str, page: Option<i64>, span: Option<&str>) -> String {
        let mut parts: Vec<String> = Vec::new();
        if let Some(p) = page.filter(|p| *p > 1) {
            parts.push(format!("page={p}"));
        }
        if let Some(z) = &self.zoom {
            parts.push(format!("zoom={}", encode(z)));
        }
        if let Some(q) = &self.q {
            parts.push(format!("q={}", encode(q)));
        }
        if self.collapsed {
            parts.push("tree=collapsed".into());
        }
        if let Some(span) = span {
            parts.push(format!("span={}", encode(span)));
        }
        let base = run_href(run);
        if parts.is_empty() {
            base
        } else {
            format!("{base}?{}", parts.join("&"))
        }
    }
}

#[component]
pub fn RunDetailPage() -> impl IntoView {
    let query = use_query_map();
    // From the path, decoded once (see `path_id`).
    let run_id = crate::path_id::path_id("/runs/");
    let text = move |name: &str| query.with(|q| q.get(name).map(|v| v.trim().to_string()).filter(|v| !v.is_empty()));
    // Page 1 is the same with or without `?page=1`: selecting a span (whose link names the
    // page) must not reload the run, which empties the page for a moment and scrolls it
    // to the top.
    let params = Memo::new(move |_| TraceParams {
        page: text("page").and_then(|p| p.parse::<i64>().ok()).filter(|p| *p > 1),
        zoom: text("zoom"),
        q: text("q"),
        collapsed: text("tree").as_deref() == Some("collapsed"),
    });
    let focus = Memo::new(move |_| text("focus"));
    let selected = Memo::new(move |_| query.with(|q| q.get("span")));
    let run = Resource::new(
        move || {
            let p = params.get();
            (run_id.get(), p.page, focus.get(), p.zoom, p.q)
        },
        |(id, page, focus, zoom, q)| load_run(id, page, focus, zoom, q),
    );
    let span = Resource::new(
        move || (run_id.get(), selected.get()),
        |(id, selected)| async move {
            match selected.as_deref().and_then(|s| s.split_once(':')) {
                Some((trace, span)) => Some(load_span(id, trace.to_string(), span.to_string()).await),
                None => None,
            }
        },
    );
    // Escape closes the selected span, as the panel's own link does.
    #[cfg(feature = "hydrate")]
    {
        let navigate = leptos_router::hooks::use_navigate();
        let handle = window_event_listener(leptos::ev::keydown, move |ev| {
            if ev.key() == "Escape" && selected.get_untracked().is_some() {
                let p = params.get_untracked();
                let href = p.href(&run_id.get_untracked(), p.page, None);
                navigate(&href, leptos_router::NavigateOptions { scroll: false, ..Default::default() });
            }
        });
        on_cleanup(move || handle.remove());
    }
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
                    Ok(view) => view! { <RunTop view params=params.get_untracked()/> }.into_any(),
                    Err(error) => view! { <ErrorBox error/> }.into_any(),
                }
            })}
        </Suspense>
        <div class="trace-layout">
            <Suspense fallback=|| ()>
                // The run's error is shown once, above; here it leaves the grid empty.
                {move || Suspend::new(async move {
                    match run.await {
                        Ok(view) => view! { <RunTrace view selected params/> }.into_any(),
                        Err(_) => ().into_any(),
                    }
                })}
            </Suspense>
            <SelectedSpan span run_id=run_id params/>
        </div>
        <Suspense fallback=|| ()>
            {move || Suspend::new(async move {
                match run.await {
                    Ok(view) => view! { <super::cost::CostSection detail=view.detail steps=view.steps/> }.into_any(),
                    Err(_) => ().into_any(),
                }
            })}
        </Suspense>
        <super::calls_panel::RunCalls data=calls/>
        <super::approvals_panel::RunApprovals data=approvals/>
    }
}

/// The selected span's details, beside the waterfall (below it on a phone, as a sheet).
#[component]
fn SelectedSpan(
    span: Resource<Option<Result<SpanPanel, crate::errors::AppError>>>,
    run_id: Memo<String>,
    params: Memo<TraceParams>,
) -> impl IntoView {
    view! {
        <Suspense fallback=|| view! { <aside class="span-panel placeholder"><p class="loading">"Loading span…"</p></aside> }>
            {move || {
                Suspend::new(async move {
                    let p = params.get_untracked();
                    let close = p.href(&run_id.get_untracked(), p.page, None);
                    match span.await {
                        Some(Ok(panel)) => view! { <SpanPanelView panel close/> }.into_any(),
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

/// Everything above the waterfall: why the run stopped, what it changed. (What it cost is
/// below the waterfall.)
#[component]
fn RunTop(view: RunView, params: TraceParams) -> impl IntoView {
    let RunView { detail, failure, has_bodies, marks, .. } = view;
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
    let links = SpanLinks { run_id: run_id.clone(), params, marks };
    view! {
        <Header detail=detail.clone() failure links=links.clone()/>
        <div class="actions">{replay}</div>
        <Duplicates detail=detail.clone()/>
        <SideEffects calls=detail.tool_call_list.clone() links/>
    }
}

/// Links to one span of the run: on the page the span is on, when it is a marked span
/// (an error or a side effect); else through `focus`, which finds the page.
#[derive(Clone)]
struct SpanLinks {
    run_id: String,
    params: TraceParams,
    marks: Vec<SpanMark>,
}

impl SpanLinks {
    fn to(&self, trace_id: &str, span_id: &str) -> String {
        let key = format!("{trace_id}:{span_id}");
        match self.marks.iter().find(|m| m.key == key) {
            Some(m) => self.params.href(&self.run_id, Some(m.page), Some(&key)),
            None => format!("{}&focus={}", self.params.href(&self.run_id, None, Some(&key)), encode(&key)),
        }
    }
}

/// The waterfall, a page of spans at a time, under its tools: find in the trace, the
/// previous and next error and side effect, expand or collapse all, and the way back out
/// of a zoomed subtree.
#[component]
fn RunTrace(view: RunView, selected: Memo<Option<String>>, params: Memo<TraceParams>) -> impl IntoView {
    let RunView { detail, spans, span_page, span_pages, total_spans, marks, matches, match_count, zoomed, .. } = view;
    let run_id = detail.run.run_id.clone();
    let p = params.get_untracked();
    let link = {
        let (p, run_id) = (p.clone(), run_id.clone());
        move |page: i64| p.href(&run_id, Some(page), None)
    };
    view! {
        <section class="panel trace-tree">
            <h2>{match &zoomed {
                Some(z) => format!("Waterfall · {total_spans} spans under {}", z.name),
                None => format!("Waterfall · {total_spans} spans"),
            }}</h2>
            <TraceTools run_id=run_id.clone() params=p.clone() marks matches match_count selected/>
            {zoomed.map(|z| {
                let whole = TraceParams { zoom: None, ..p.clone() }.href(&run_id, None, Some(&z.key));
                view! {
                    <p class="callout info zoomed" data-testid="zoomed">
                        "Showing only " <code>{z.name.clone()}</code> " and the spans under it, on their own time axis. "
                        <a href=whole>"Show the whole run"</a>
                    </p>
                }
            })}
            <Waterfall spans run_id=run_id.clone() page=span_page selected params=p.clone()
                collapsed=Signal::derive(move || params.get().collapsed)/>
            {(span_pages > 1).then(|| view! {
                <p class="pager">
                    {format!("Page {span_page} of {span_pages} (spans in start order). ")}
                    {(span_page > 1).then(|| view! { <a href=link(span_page - 1)>"← earlier spans"</a> " "})}
                    {(span_page < span_pages).then(|| view! { <a href=link(span_page + 1)>"later spans →"</a> })}
                </p>
            })}
        </section>
    }
}

/// Above the waterfall: a search form (a GET, so it works without JavaScript), the hits
/// as links to their pages, previous / next for errors and side effects, and expand or
/// collapse all.
#[component]
fn TraceTools(
    run_id: String,
    params: TraceParams,
    marks: Vec<SpanMark>,
    matches: Vec<SpanMark>,
    match_count: i64,
    selected: Memo<Option<String>>,
) -> impl IntoView {
    let at = |m: &SpanMark| params.href(&run_id, Some(m.page), Some(&m.key));
    let errors: Vec<SpanMark> = marks.iter().filter(|m| m.kind == MarkKind::Error).cloned().collect();
    let effects: Vec<SpanMark> = marks.iter().filter(|m| m.kind == MarkKind::SideEffect).cloned().collect();
    let stepper = |label: &'static str, testid: &'static str, list: Vec<SpanMark>| {
        let hrefs: Vec<String> = list.iter().map(at).collect();
        let keys: Vec<String> = list.iter().map(|m| m.key.clone()).collect();
        let count = list.len();
        let position = move || selected.with(|s| s.as_ref().and_then(|s| keys.iter().position(|k| k == s)));
        let (position_prev, position_next) = (position.clone(), position);
        let (prev_hrefs, next_hrefs) = (hrefs.clone(), hrefs);
        view! {
            <span class="stepper" data-testid=testid>
                {format!("{label}: {count}")}
                {(count > 0).then(move || view! {
                    " "
                    <a href=move || match position_prev() {
                        Some(i) if i > 0 => prev_hrefs[i - 1].clone(),
                        _ => prev_hrefs[count - 1].clone(),
                    } data-noscroll="" aria-label=format!("previous {label}")>"← previous"</a>
                    " "
                    <a href=move || match position_next() {
                        Some(i) if i + 1 < count => next_hrefs[i + 1].clone(),
                        Some(_) => next_hrefs[0].clone(),
                        None => next_hrefs[0].clone(),
                    } data-noscroll="" aria-label=format!("next {label}")>"next →"</a>
                })}
            </span>
        }
    };
    let expand = TraceParams { collapsed: false, ..params.clone() }.href(&run_id, params.page, None);
    let collapse = TraceParams { collapsed: true, ..params.clone() }.href(&run_id, params.page, None);
    let query = params.q.clone();
    view! {
        <div class="trace-tools">
            <form method="get" action=run_href(&run_id) class="trace-search" data-testid="trace-search" role="search">
                <input type="search" name="q" value=query.clone().unwrap_or_default()
                    placeholder="Find in this trace: span name or attribute value" aria-label="Find in this trace"/>
                {params.zoom.clone().map(|z| view! { <input type="hidden" name="zoom" value=z/> })}
                <button type="submit">"Find"</button>
            </form>
            <nav class="trace-nav" aria-label="Move through the trace">
                {stepper("Errors", "error-stepper", errors)}
                {stepper("Side effects", "effect-stepper", effects)}
                <span class="tree-toggles">
                    <a href=expand data-testid="expand-all">"Expand all"</a> " · "
                    <a href=collapse data-testid="collapse-all">"Collapse all"</a>
                </span>
            </nav>
            {query.map(|q| {
                let shown = matches.len();
                view! {
                    <div class="trace-matches" data-testid="trace-matches">
                        {if match_count == 0 {
                            view! { <p class="muted">{format!("No span's name or attributes contain “{q}”.")}</p> }.into_any()
                        } else {
                            view! {
                                <p>{format!("{match_count} span{} match “{q}”{}:", if match_count == 1 { "" } else { "s" },
                                    if (shown as i64) < match_count { format!(" (the first {shown} listed)") } else { String::new() })}</p>
                                <ol class="match-list">
                                    {matches.iter().map(|m| view! {
                                        <li><a href=at(m) data-noscroll="">{m.name.clone()}</a>
                                            <span class="muted small">{format!(" page {}", m.page)}</span></li>
                                    }).collect_view()}
                                </ol>
                            }.into_any()
                        }}
                    </div>
                }
            })}
        </div>
    }
}

#[component]
fn Header(detail: RunDetail, failure: Option<RunFailure>, links: SpanLinks) -> impl IntoView {
    let latest_trace = detail.run.trace_ids.last().cloned().unwrap_or_default();
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
        let href = links.to(&latest_trace, &f.span_id);
        view! {
            <p class="failure" data-testid="run-failure">
                <strong>"Failed in "</strong><a href=href data-testid="failure-span"><code>{f.span_name.clone()}</code></a>": "
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
    let list = |items: Vec<domain::canonical::DuplicateView>| {
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

/// Rows of the side-effect table shown before "show all".
const SIDE_EFFECT_ROWS: usize = 10;

/// Every write, irreversible or unclassified call (an unclassified tool may well write),
/// retries grouped under the key they share, each linked to its span; the first few
/// shown, the rest one click away, so a run of hundreds does not push the waterfall down.
#[component]
fn SideEffects(calls: Vec<ToolCallView>, links: SpanLinks) -> impl IntoView {
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
    let total = effects.len();
    let rest = if total > SIDE_EFFECT_ROWS { effects.split_off(SIDE_EFFECT_ROWS) } else { Vec::new() };
    let head = || view! { <thead><tr><th>"Step"</th><th>"Tool"</th><th>"Class"</th><th>"Outcome"</th><th>"Attempt"</th><th>"Idempotency key"</th><th>"External id"</th></tr></thead> };
    let rows = |list: Vec<ToolCallView>, links: &SpanLinks| {
        list.into_iter()
            .map(|c| {
                let href = links.to(&c.trace_id, &c.span_id);
                view! {
                    <tr class:retry={c.attempt > 1}>
                        <td>{c.step_index.map(|s| s.to_string()).unwrap_or_default()}</td>
                        <td><a href=href data-noscroll=""><code>{c.tool.clone()}</code></a></td>
                        <td>{effect_tag(c.side_effect)}</td>
                        <td><Tag kind="outcome" value=c.outcome.as_str()/></td>
                        <td>{if c.attempt > 1 { format!("↳ retry {}", c.attempt) } else { "1".into() }}</td>
                        <td><code>{c.idempotency_key.clone().unwrap_or_default()}</code></td>
                        <td><code>{c.external_id.clone().unwrap_or_default()}</code></td>
                    </tr>
                }
            })
            .collect_view()
    };
    view! {
        <section class="panel" data-testid="side-effects">
            <h2>{format!("Side effects · {total}")}</h2>
            {(unclassified > 0).then(|| view! {
                <p class="small warn-text" data-testid="unclassified-note">
                    {format!("{unclassified} call(s) of unclassified tools are listed too: they may have changed the world.")}
                </p>
            })}
            {if total == 0 {
                view! { <p class="muted">"No write, irreversible or unclassified tool calls."</p> }.into_any()
            } else {
                view! {
                    <table class="grid">{head()}<tbody>{rows(effects, &links)}</tbody></table>
                    {(!rest.is_empty()).then(|| view! {
                        <details class="more-rows" data-testid="side-effects-more">
                            <summary>{format!("Show all {total} side effects")}</summary>
                            <table class="grid">{head()}<tbody>{rows(rest, &links)}</tbody></table>
                        </details>
                    })}
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
fn Waterfall(
    spans: Vec<WaterfallSpan>,
    run_id: String,
    page: i64,
    selected: Memo<Option<String>>,
    params: TraceParams,
    collapsed: Signal<bool>,
) -> impl IntoView {
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
    let cx = WaterfallCx { start, end, run_id, page, selected, params, collapsed };
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
    run_id: String,
    page: i64,
    selected: Memo<Option<String>>,
    params: TraceParams,
    /// "Collapse all" closes every node; reactive, so it needs no reload of the run.
    collapsed: Signal<bool>,
}

fn node(
    span: WaterfallSpan,
    children: &mut HashMap<(String, String), Vec<WaterfallSpan>>,
    cx: &WaterfallCx,
    depth: usize,
) -> AnyView {
    let kids = children.remove(&(span.trace_id.clone(), span.span_id.clone())).unwrap_or_default();
    let row = row(&span, cx, depth, !kids.is_empty());
    if kids.is_empty() {
        return view! { <div class="wf-leaf">{row}</div> }.into_any();
    }
    let collapsed = cx.collapsed;
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
        <details open=move || !collapsed.get() class="wf-node">
            <summary>{row}</summary>
            <div class="wf-children">{rendered}</div>
        </details>
    }
    .into_any()
}

fn row(s: &WaterfallSpan, cx: &WaterfallCx, depth: usize, has_children: bool) -> impl IntoView {
    let total = (cx.end - cx.start) as f64;
    let left = (s.start_ns - cx.start) as f64 / total * 100.0;
    let width = ((s.end_ns.max(s.start_ns) - s.start_ns) as f64 / total * 100.0).max(0.4);
    let key = format!("{}:{}", s.trace_id, s.span_id);
    let href = cx.params.href(&cx.run_id, Some(cx.page), Some(&key));
    let zoom = (has_children && cx.params.zoom.as_deref() != Some(key.as_str())).then(|| {
        TraceParams { zoom: Some(key.clone()), page: None, ..cx.params.clone() }.href(&cx.run_id, None, Some(&key))
    });
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
            <span class="wf-duration">{duration}
                {zoom.map(|z| view! { " " <a class="wf-zoom" href=z title="Zoom into this span's time range" aria-label="zoom">"⤢"</a> })}
            </span>
        </div>
    }
}

/// The selected span: canonical fields first, then its events (each at its time, an
/// exception's stack trace with its line breaks), raw attributes, resource and bodies,
/// all as text.
#[component]
fn SpanPanelView(panel: SpanPanel, close: String) -> impl IntoView {
    let s = panel.span;
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
        ("started", Some(format_utc(&chrono::DateTime::from_timestamp_nanos(s.start_ns)))),
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
    let events = span_events(&panel.events, s.start_ns);
    view! {
        <aside class="span-panel" data-testid="span-panel">
            <header>
                <h2>{s.name.clone()}</h2>
                <a href=close class="small" data-noscroll="" title="Close (Esc)">"close"</a>
            </header>
            <dl class="facts">
                {canonical.into_iter().filter_map(|(k, v)| v.map(|v| view! { <div><dt>{k}</dt><dd><code>{v}</code></dd></div> })).collect_view()}
            </dl>
            <h3>{format!("Events · {}", events.len())}</h3>
            {if events.is_empty() {
                view! { <p class="muted small">"None."</p> }.into_any()
            } else {
                view! {
                    <ol class="span-events" data-testid="span-events">
                        {events.into_iter().map(|e| view! {
                            <li>
                                <p><strong>{e.name}</strong> " " <span class="muted small" title=e.at>{e.offset}</span></p>
                                {(!e.fields.is_empty()).then(|| view! {
                                    <dl class="event-fields">
                                        {e.fields.into_iter().map(|(k, v)| view! { <dt>{k}</dt><dd><code>{v}</code></dd> }).collect_view()}
                                    </dl>
                                })}
                                {e.stacktrace.map(|trace| view! { <pre class="stacktrace" data-testid="stacktrace">{trace}</pre> })}
                            </li>
                        }).collect_view()}
                    </ol>
                }.into_any()
            }}
            <h3>"Attributes"</h3>
            <pre class="json" data-testid="span-attributes">{panel.attributes}</pre>
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

/// One span event as the panel shows it.
struct EventView {
    name: String,
    /// "+12.5 ms" after the span started.
    offset: String,
    /// The absolute time, as a tooltip.
    at: String,
    fields: Vec<(String, String)>,
    /// `exception.stacktrace`, with its line breaks.
    stacktrace: Option<String>,
}

/// The panel's events from their stored JSON (`[{name, time_unix_nano, attributes}]`).
fn span_events(json: &str, span_start_ns: i64) -> Vec<EventView> {
    let events: Vec<serde_json::Value> = serde_json::from_str(json).unwrap_or_default();
    events
        .into_iter()
        .map(|e| {
            let time: Option<i64> = match &e["time_unix_nano"] {
                serde_json::Value::String(t) => t.parse().ok(),
                serde_json::Value::Number(n) => n.as_i64(),
                _ => None,
            };
            let (offset, at) = match time.filter(|t| *t > 0) {
                Some(t) => {
                    let ms = (t - span_start_ns) as f64 / 1e6;
                    (format!("+{ms:.1} ms"), format_utc(&chrono::DateTime::from_timestamp_nanos(t)))
                }
                None => (String::new(), String::new()),
            };
            let mut stacktrace = None;
            let mut fields = Vec::new();
            if let Some(attributes) = e["attributes"].as_object() {
                for (k, v) in attributes {
                    let text = v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string());
                    if k == "exception.stacktrace" {
                        stacktrace = Some(text);
                    } else {
                        fields.push((k.clone(), text));
                    }
                }
            }
            EventView { name: e["name"].as_str().unwrap_or("event").to_string(), offset, at, fields, stacktrace }
        })
        .collect()
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
