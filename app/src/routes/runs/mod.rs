//! The run list (`/runs`): every run with its termination reason, cost and flags; filters
//! and search live in the URL, so a view can be shared and the back button works.

mod approvals_panel;
mod calls_panel;
mod cost;
pub mod detail;
mod escalation_link;

use crate::components::badges::{ReasonBadge, RunFlags};
use crate::components::empty_state::EmptyState;
use crate::components::numbers::thousands;
use crate::components::status::ErrorBox;
use crate::components::time::{ago, duration_ms, format_utc};
use crate::functions::runs::load_runs;
use domain::canonical::{
    FilteredWindow, QueryParams, RunListView, RunSummary, SearchedWindow, TerminalReason, Trigger, WindowLead,
};
use domain::url::{query, run_href};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

fn params_from(q: &leptos_router::params::ParamsMap) -> QueryParams {
    QueryParams {
        terminal_reason: q.get("terminal_reason"),
        agent: q.get("agent"),
        trigger: q.get("trigger"),
        since: q.get("since"),
        until: q.get("until"),
        range: q.get("range"),
        flag: q.get("flag"),
        model: q.get("model"),
        q: q.get("q"),
        sort: q.get("sort"),
        cursor: q.get("cursor"),
        limit: q.get("limit").and_then(|l| l.parse().ok()),
    }
}

/// The page's URL for `params`, with `change` applied and paging reset.
fn href_with(params: &QueryParams, change: impl FnOnce(&mut QueryParams)) -> String {
    let mut p = params.clone();
    p.cursor = None;
    change(&mut p);
    format!(
        "/runs{}",
        query(&[
            ("terminal_reason", p.terminal_reason),
            ("agent", p.agent),
            ("trigger", p.trigger),
            ("range", p.range),
            ("since", p.since),
            ("until", p.until),
            ("flag", p.flag),
            ("model", p.model),
            ("q", p.q),
            ("sort", p.sort),
            ("cursor", p.cursor),
        ])
    )
}

#[component]
pub fn RunsPage() -> impl IntoView {
    let query_map = use_query_map();
    let params = Memo::new(move |_| query_map.with(params_from));
    // With JavaScript on, the first page refreshes itself so new runs appear.
    let tick = RwSignal::new(0u32);
    #[cfg(feature = "hydrate")]
    {
        if let Ok(handle) = set_interval_with_handle(
            move || {
                if params.with_untracked(|p| p.cursor.is_none()) {
                    tick.update(|t| *t += 1);
                }
            },
            std::time::Duration::from_secs(10),
        ) {
            on_cleanup(move || handle.clear());
        }
    }
    let runs = Resource::new(move || (params.get(), tick.get()), |(p, _)| load_runs(p));
    view! {
        <Title text="Runs"/>
        <h1>"Runs"</h1>
        // Made again whenever the URL changes, so a link followed in the page (a sort, a
        // reason, "Search the runs before") leaves the form showing, and submitting, the
        // filters the list shows, hidden time limits included.
        {move || view! { <Filters p=params.get()/> }}
        <Transition fallback=|| view! { <p class="loading">"Loading runs…"</p> }>
            {move || Suspend::new(async move {
                let p = params.get_untracked();
                match runs.await {
                    Ok(view) => view! { <RunList view params=p/> }.into_any(),
                    Err(error) => view! { <ErrorBox error/> }.into_any(),
                }
            })}
        </Transition>
    }
}

#[component]
fn Filters(p: QueryParams) -> impl IntoView {
    let selected = |current: &Option<String>, value: &str| current.as_deref() == Some(value);
    view! {
        <form method="get" action="/runs" class="filters" data-testid="run-filters">
            <label>
                "Search"
                <input type="search" name="q" value=p.q.clone().unwrap_or_default()
                    placeholder="run id, trace id, idempotency key, external id, tool"/>
            </label>
            <label>
                "Reason"
                <select name="terminal_reason">
                    <option value="">"any"</option>
                    {TerminalReason::ALL.iter().map(|r| view! {
                        <option value=r.as_str() selected=selected(&p.terminal_reason, r.as_str())>{r.as_str()}</option>
                    }).collect_view()}
                </select>
            </label>
            <label>"Agent" <input type="text" name="agent" value=p.agent.clone().unwrap_or_default()
                placeholder="part of a name"/></label>
            <label>"Model" <input type="text" name="model" value=p.model.clone().unwrap_or_default()
                placeholder="exact name"/></label>
            <label>
                "Trigger"
                <select name="trigger">
                    <option value="">"any"</option>
                    {Trigger::ALL.iter().map(|t| view! {
                        <option value=t.as_str() selected=selected(&p.trigger, t.as_str())>{t.as_str()}</option>
                    }).collect_view()}
                </select>
            </label>
            <label>
                "Flag"
                <select name="flag">
                    <option value="">"any"</option>
                    <option value="duplicates" selected=selected(&p.flag, "duplicates")>"duplicate side effects"</option>
                    <option value="no_read" selected=selected(&p.flag, "no_read")>"completed without a read"</option>
                    <option value="approval_violation" selected=selected(&p.flag, "approval_violation")>"approval violations"</option>
                </select>
            </label>
            <label>
                "Started"
                <select name="range">
                    <option value="">"any time"</option>
                    <option value="1h" selected=selected(&p.range, "1h")>"last hour"</option>
                    <option value="24h" selected=selected(&p.range, "24h")>"last 24 hours"</option>
                    <option value="7d" selected=selected(&p.range, "7d")>"last 7 days"</option>
                    <option value="30d" selected=selected(&p.range, "30d")>"last 30 days"</option>
                </select>
            </label>
            <label>
                "Sort"
                <select name="sort">
                    <option value="started">"newest"</option>
                    <option value="cost" selected=selected(&p.sort, "cost")>"most expensive"</option>
                    <option value="duration" selected=selected(&p.sort, "duration")>"longest"</option>
                    <option value="duplicates" selected=selected(&p.sort, "duplicates")>"most duplicates"</option>
                </select>
            </label>
            {p.since.clone().map(|v| view! { <input type="hidden" name="since" value=v/> })}
            {p.until.clone().map(|v| view! { <input type="hidden" name="until" value=v/> })}
            <button type="submit" class="primary">"Apply"</button>
            <a href="/runs" class="small">"Clear"</a>
            {(p.since.is_some() || p.until.is_some()).then(|| {
                let any_time = href_with(&p, |q| {
                    q.since = None;
                    q.until = None;
                });
                let text = format!(
                    "Started {}{}",
                    p.since.as_deref().map(|t| format!("from {t} ")).unwrap_or_default(),
                    p.until.as_deref().map(|t| format!("until {t}")).unwrap_or_default()
                );
                view! {
                    <p class="small muted filter-note" data-testid="time-filter">
                        {text} " · " <a href=any_time>"any time"</a>
                    </p>
                }
            })}
        </form>
    }
}

#[component]
fn RunList(view: RunListView, params: QueryParams) -> impl IntoView {
    let total = view.counts.total();
    let stopped = view.counts.at_least.is_some();
    let counts = TerminalReason::ALL
        .iter()
        .map(|r| {
            // Past the counting limit the reasons carry no figure: a reason picked shows
            // its runs, and the list pages by index either way.
            let n = (!stopped).then(|| view.counts.of(*r));
            let href = href_with(&params, |p| p.terminal_reason = Some(r.as_str().to_string()));
            let active = params.terminal_reason.as_deref() == Some(r.as_str());
            let unfinished = matches!(r, TerminalReason::StepLimit | TerminalReason::Budget);
            view! {
                <a href=href class="count" class:active=active data-testid=format!("count-{}", r.as_str())>
                    <ReasonBadge reason=*r/>
                    {n.map(|n| view! { <strong>{thousands(n)}</strong> })}
                    {unfinished.then(|| view! { <span class="muted small">"not finished"</span> })}
                </a>
            }
        })
        .collect_view();
    // Keyset paging goes one way; the way back is the first page (newest runs), which is
    // also where new runs appear.
    let paged = params.cursor.is_some();
    let next = view.next_cursor.clone().map(|c| {
        let mut href = href_with(&params, |_| {});
        href.push_str(if href.contains('?') { "&cursor=" } else { "?cursor=" });
        href.push_str(&c);
        view! { <a class="pager" href=href data-testid="older-runs">"Older runs →"</a> }
    });
    let newest_href = href_with(&params, |_| {});
    let newest = move || {
        paged.then(|| view! { <a class="pager" href=newest_href.clone() data-testid="newest-runs">"← Newest runs"</a> })
    };
    if view.runs.is_empty() && total == 0 && params == QueryParams::default() {
        return view! {
            <EmptyState title="No runs yet">
                <p>
                    "Every run your agents make will be listed here with its termination reason, cost, "
                    "tokens, steps and tool calls, and flags for duplicate side effects and runs that "
                    "completed without reading anything."
                </p>
                <p>
                    "Point an OpenTelemetry exporter at Flightdeck's OTLP endpoint (port 4318 for HTTP, 4317 "
                    "for gRPC) with a token that has the " <code>"ingest"</code> " scope, or run "
                    <code>"flightdeck demo"</code> " to load example runs. The README's “Sending traces” "
                    "section has the exporter settings."
                </p>
            </EmptyState>
        }
        .into_any();
    }
    let now = view.now;
    let window = view.searched.map(|searched| view! { <SearchWindowNote searched params=params.clone()/> });
    let filter_window =
        view.filtered.clone().map(|filtered| view! { <FilterWindowNote filtered params=params.clone()/> });
    let sort_href = |by: &str| href_with(&params, |p| p.sort = Some(by.to_string()));
    view! {
        {paged.then(|| view! {
            <p class="paging-note small muted">"Showing older runs; this page does not refresh. "
                {newest()}</p>
        })}
        <div class="counts" data-testid="reason-counts">
            <span class="muted small" data-testid="run-total" title=stopped.then_some("Counting stops here; the list shows every match, page by page")>
                {if stopped { format!("{}+ runs:", thousands(total)) } else { format!("{} runs:", thousands(total)) }}
            </span>
            {counts}
        </div>
        {window}
        {filter_window}
        {if view.runs.is_empty() {
            view! { <p class="muted">"No runs match these filters."</p> }.into_any()
        } else {
            view! {
                <table class="grid runs" data-testid="run-table">
                    <thead>
                        <tr>
                            <th>"Run"</th><th>"Agent"</th><th>"Trigger"</th><th>"Started"</th><th>"Duration"</th>
                            <th>"Reason"</th><th class="num">"Steps"</th><th class="num">"Tool calls"</th>
                            <th class="num"><a href=sort_href("cost") title="most expensive first">"Cost"</a></th>
                            <th class="num">"Tokens in / out"</th>
                            <th class="num"><a href=sort_href("duplicates") title="most duplicates first">"Dup."</a></th>
                            <th>"Flags"</th>
                        </tr>
                    </thead>
                    <tbody>
                        {view.runs.into_iter().map(|run| view! { <RunRow run now/> }).collect_view()}
                    </tbody>
                </table>
            }.into_any()
        }}
        <nav class="pagers">{newest()}" "{next}</nav>
    }
    .into_any()
}

/// Where a search that tests each of the tool's runs stopped, and the way to the runs
/// before: the same search with `until` at that point.
#[component]
fn SearchWindowNote(searched: SearchedWindow, params: QueryParams) -> impl IntoView {
    let since = searched.since;
    let until = since.to_rfc3339_opts(chrono::SecondsFormat::Nanos, true);
    let older = href_with(&params, |p| p.until = Some(until));
    let tool = params.q.clone().unwrap_or_default();
    view! {
        <p class="search-window small" data-testid="search-window">
            "Searched the newest " {thousands(searched.runs)} " runs that called "
            <code>{tool}</code> ", back to " <time datetime=since.to_rfc3339()>{format_utc(&since)}</time>
            ": the counts and the list cover those, and any run the search names by id. "
            <a href=older data-testid="search-older">"Search the runs before →"</a>
        </p>
    }
}

/// Where a list whose filters no one index answers stopped (the newest runs of one of
/// its conditions), and the way to the runs before.
#[component]
fn FilterWindowNote(filtered: FilteredWindow, params: QueryParams) -> impl IntoView {
    let since = filtered.since;
    let until = since.to_rfc3339_opts(chrono::SecondsFormat::Nanos, true);
    let older = href_with(&params, |p| p.until = Some(until));
    let lead = match filtered.lead {
        WindowLead::Agent(name) => view! { " runs of the agent " <code>{name}</code> }.into_any(),
        WindowLead::Trigger(t) => view! { " runs triggered by " <code>{t.as_str()}</code> }.into_any(),
        WindowLead::Flag(flag) => view! { " runs flagged " <code>{flag}</code> }.into_any(),
        WindowLead::Newest => view! { " runs" }.into_any(),
    };
    view! {
        <p class="search-window small" data-testid="filter-window">
            "These filters were tested on the newest " {thousands(filtered.runs)} {lead} ", back to "
            <time datetime=since.to_rfc3339()>{format_utc(&since)}</time>
            ": the counts and the list cover those. "
            <a href=older data-testid="filter-older">"Filter the runs before →"</a>
        </p>
    }
}

/// Duplicate side effects, with possible ones (unclassified tools) in brackets.
fn dup_text(run: &RunSummary) -> String {
    match (run.duplicate_side_effects, run.possible_duplicates) {
        (0, 0) => "0".into(),
        (n, 0) => n.to_string(),
        (n, p) => format!("{n} (+{p}?)"),
    }
}

#[component]
fn RunRow(run: RunSummary, now: chrono::DateTime<chrono::Utc>) -> impl IntoView {
    let started = run.started_at.map(|t| (ago(&t, &now), format_utc(&t)));
    let run_id = run.run_id.clone();
    view! {
        <tr data-run=run_id>
            <td class="run-id"><a href=run_href(&run.run_id)><code>{run.run_id.clone()}</code></a></td>
            <td>{run.agent.clone().unwrap_or_else(|| "—".into())}</td>
            <td>{run.trigger.as_str()}</td>
            <td>{started.map(|(rel, abs)| view! { <span title=abs.clone()>{rel}</span><br/><span class="muted small">{abs}</span> })}</td>
            <td>{run.wall_clock_ms.map(duration_ms).unwrap_or_else(|| "—".into())}</td>
            <td><ReasonBadge reason=run.terminal_reason/></td>
            <td class="num">{run.steps}</td>
            <td class="num">{run.tool_calls}</td>
            <td class="num" title=cost::source_text(&run)>{cost::cost_text(&run)}</td>
            <td class="num">{format!("{} / {}", crate::components::numbers::thousands(run.input_tokens), crate::components::numbers::thousands(run.output_tokens))}</td>
            <td class="num" data-testid="dup-count">{dup_text(&run)}</td>
            <td class="flags"><RunFlags run/></td>
        </tr>
    }
}
