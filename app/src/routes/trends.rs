//! Trends (`/trends`): the distributions worth a weekly look, over the last 24 hours,
//! 7 days or 30 days (`?range=`), of every agent or one (`?agent=`): termination reasons,
//! tool calls per run, completed runs without a read tool, deduplicated calls and
//! duplicate side effects, cost per run, cost by agent and by model, and the escalation
//! and approval lifecycles. Every chart is SVG drawn on the server, so the page reads the
//! same with JavaScript off; the range is a plain link, the agent a GET form. Bars and
//! points that count runs link to the run list filtered to those runs (their bucket's
//! start times, and the reason, flag, agent or model they count).

use crate::components::chart::{BarChart, HistogramChart, LineChart, Unit, XAxis};
use crate::components::empty_state::EmptyState;
use crate::components::status::ErrorBox;
use crate::functions::trends::{load_trends, TrendsView};
use domain::trends::{Range, Series, Trends, Window};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

/// The page's address for `range` and `agent`.
fn trends_href(range: Range, agent: Option<&str>) -> String {
    format!(
        "/trends{}",
        domain::url::query(&[("range", Some(range.as_str().to_string())), ("agent", agent.map(str::to_string))])
    )
}

#[component]
pub fn TrendsPage() -> impl IntoView {
    let q = use_query_map();
    let range = Memo::new(move |_| q.with(|q| Range::parse(q.get("range").as_deref())));
    let agent = Memo::new(move |_| q.with(|q| q.get("agent").filter(|a| !a.trim().is_empty())));
    let trends = Resource::new(move || (range.get(), agent.get()), |(r, a)| load_trends(r.as_str().to_string(), a));
    view! {
        <Title text="Trends"/>
        <h1>"Trends"</h1>
        <nav class="tabs" aria-label="Range">
            {Range::ALL
                .into_iter()
                .map(|r| {
                    let current = move || (range.get() == r).then_some("page");
                    view! {
                        <a href=move || trends_href(r, agent.get().as_deref()) class:active=move || range.get() == r
                            aria-current=current data-range=r.as_str()>
                            {r.label()}
                        </a>
                    }
                })
                .collect_view()}
        </nav>
        <Transition fallback=|| view! { <p class="loading">"Loading trends…"</p> }>
            {move || Suspend::new(async move {
                match trends.await {
                    Ok(TrendsView { trends: t, agents }) => {
                        let filter = view! { <AgentFilter range=t.window.range agent=t.agent.clone() agents/> };
                        if t.is_empty() {
                            view! { {filter} <Empty range=t.window.range agent=t.agent.clone()/> }.into_any()
                        } else {
                            view! { {filter} <Charts t/> }.into_any()
                        }
                    }
                    Err(error) => view! { <ErrorBox error/> }.into_any(),
                }
            })}
        </Transition>
    }
}

/// Every agent or one, as a GET form (works without JavaScript; the address keeps it).
#[component]
fn AgentFilter(range: Range, agent: Option<String>, agents: Vec<String>) -> impl IntoView {
    let mut agents = agents;
    if let Some(a) = agent.clone().filter(|a| !agents.contains(a)) {
        agents.insert(0, a);
    }
    view! {
        <form method="get" action="/trends" class="filters trends-filter" data-testid="trends-filter">
            <input type="hidden" name="range" value=range.as_str()/>
            <label>
                "Agent"
                <select name="agent">
                    <option value="">"every agent"</option>
                    {agents.into_iter().map(|a| {
                        let on = agent.as_deref() == Some(a.as_str());
                        let value = a.clone();
                        view! { <option value=value selected=on>{a}</option> }
                    }).collect_view()}
                </select>
            </label>
            <button type="submit" class="primary">"Show"</button>
            {agent.is_some().then(|| view! { <a href=trends_href(range, None) class="small">"Every agent"</a> })}
        </form>
    }
}

#[component]
fn Empty(range: Range, agent: Option<String>) -> impl IntoView {
    let whose = agent.map(|a| format!(" of {a}")).unwrap_or_default();
    view! {
        <EmptyState title=format!("No runs, escalations or approvals{whose} in the {}", range.label().to_lowercase())>
            <p>
                "Once runs arrive, this page charts the termination reasons over time, tool calls per "
                "run, the share of runs that completed without a read tool, deduplicated calls and "
                "duplicate side effects, cost per run at p50, p95 and p99, and escalations and "
                "approvals as they open and close."
            </p>
            {(range != Range::Month).then(|| view! {
                <p><a href="/trends?range=30d">"Look at the last 30 days"</a></p>
            })}
        </EmptyState>
    }
}

/// "per hour" and the like, for chart titles.
fn per_bucket(w: &Window) -> &'static str {
    match w.range {
        Range::Day => "per hour",
        Range::Week => "per 6 hours",
        Range::Month => "per day",
    }
}

/// The run list's address for the runs that started in bucket `i` of `w`, with the
/// filters `extra` (and the page's agent, when one is chosen).
fn runs_in(w: &Window, i: usize, agent: Option<&str>, extra: &[(&str, &str)]) -> String {
    let at = |ms: i64| domain::clock::from_ms(ms).to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let mut pairs: Vec<(&str, Option<String>)> = extra.iter().map(|(k, v)| (*k, Some(v.to_string()))).collect();
    if !extra.iter().any(|(k, _)| *k == "agent") {
        pairs.push(("agent", agent.map(str::to_string)));
    }
    pairs.push(("since", Some(at(w.bucket_start(i)))));
    pairs.push(("until", Some(at(w.bucket_start(i + 1)))));
    format!("/runs{}", domain::url::query(&pairs))
}

/// Links per series and bucket: `filter` gives the run-list filters of a series (`None`:
/// it cannot be listed), and buckets without a value link nowhere.
fn links_for(
    w: &Window,
    agent: Option<&str>,
    series: &[Series],
    filter: impl Fn(&Series) -> Option<Vec<(&'static str, String)>>,
) -> Vec<Vec<Option<String>>> {
    series
        .iter()
        .map(|s| {
            let extra = filter(s);
            s.values
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    let extra = extra.as_ref()?;
                    v.filter(|v| *v > 0.0)?;
                    let pairs: Vec<(&str, &str)> = extra.iter().map(|(k, v)| (*k, v.as_str())).collect();
                    Some(runs_in(w, i, agent, &pairs))
                })
                .collect()
        })
        .collect()
}

fn time_axis(w: &Window) -> XAxis {
    XAxis {
        labels: (0..w.buckets).map(|i| w.tick_label(i)).collect(),
        titles: (0..w.buckets).map(|i| w.bucket_title(i)).collect(),
        caption: w.axis_caption().into(),
    }
}

#[component]
fn Charts(t: Trends) -> impl IntoView {
    let w = t.window;
    let agent = t.agent.clone();
    let a = agent.as_deref();
    let reason_links = links_for(&w, a, &t.reasons, |s| Some(vec![("terminal_reason", s.key.clone())]));
    let no_read_links = links_for(&w, a, std::slice::from_ref(&t.no_read), |_| {
        Some(vec![("terminal_reason", "completed".into()), ("flag", "no_read".into())])
    });
    let duplicate_links = links_for(&w, a, &t.duplicates, |s| {
        (s.key == "duplicate_side_effects").then(|| vec![("flag", "duplicates".into())])
    });
    let cost_links = links_for(&w, a, &t.cost, |_| Some(vec![("sort", "cost".into())]));
    let agent_links = links_for(&w, a, &t.cost_by_agent, |s| {
        s.key.strip_prefix("agent:").map(|name| vec![("agent", name.to_string()), ("sort", "cost".into())])
    });
    let model_links = links_for(&w, a, &t.cost_by_model, |s| {
        s.key.strip_prefix("model:").map(|name| vec![("model", name.to_string()), ("sort", "cost".into())])
    });
    let whose = agent.as_ref().map(|a| format!(" of {a}")).unwrap_or_default();
    let ledger_note = agent.is_some().then(|| view! {
        <p class="muted small">"Calls the ledger stopped are counted per hour for every agent together, so they are left out here."</p>
    });
    let when = w.range.label().to_lowercase();
    let per = per_bucket(&w);
    let completed: u64 = t.completed.iter().sum();
    let finished = t.tool_calls.runs;
    let hist = &t.tool_calls;
    let hist_axis = XAxis {
        labels: hist.bins.iter().map(|b| Some(b.label())).collect(),
        titles: hist.bins.iter().map(|b| format!("{} tool calls", b.label())).collect(),
        caption: "tool calls per run".into(),
    };
    let calls = |v: Option<f64>| v.map(|v| format!("{v}")).unwrap_or_else(|| "—".into());
    let notes = vec![
        format!("p50: {}", calls(hist.p50)),
        format!("p99: {}", calls(hist.p99)),
        format!("max: {}", hist.max.map(|m| m.to_string()).unwrap_or_else(|| "—".into())),
    ];
    let hist_counts: Vec<u64> = hist.bins.iter().map(|b| b.runs).collect();
    let none_note = |series: &[domain::trends::Series], what: &'static str| {
        series.iter().all(|s| s.is_all_zero()).then(|| view! { <p class="muted small">{what}</p> })
    };
    let no_escalations = none_note(&t.escalations, "No escalations opened or resolved in this range.");
    let no_approvals = none_note(&t.approvals, "No approval requests or decisions in this range.");
    let replays = t.replay_pass_rate.clone();
    let no_duplicates = none_note(
        &t.duplicates,
        "No deduplicated calls, no calls stopped by the ledger and no duplicate side effects in this range.",
    );
    view! {
        <p class="muted trends-summary">
            {format!("{} runs{whose} started in the {when}; buckets of {} in UTC. Bars and points that count runs open them in the run list.", t.runs, match w.range {
                Range::Day => "one hour",
                Range::Week => "six hours",
                Range::Month => "one day",
            })}
            {(t.computed_at_ms > 0).then(|| format!(
                " Figures as of {}.",
                domain::clock::from_ms(t.computed_at_ms).format("%H:%M:%S UTC")
            ))}
        </p>
        <div class="trends">
            <section class="chart-panel" aria-labelledby="trend-reasons">
                <h2 id="trend-reasons">"Termination reasons"</h2>
                <p class="muted small">"Runs by why they stopped, by start time. Step-limit and budget stops did not finish."</p>
                <BarChart title=format!("Runs by termination reason {per}, {when}") testid="chart-reasons"
                    unit=Unit::Count("runs") x=time_axis(&w) series=t.reasons stacked=true links=reason_links/>
            </section>
            <section class="chart-panel" aria-labelledby="trend-tool-calls">
                <h2 id="trend-tool-calls">"Tool calls per run"</h2>
                <p class="muted small">
                    {format!("The distribution over {finished} finished runs; single counts up to 10, then wider bins so the tail stays on the chart.")}
                </p>
                <HistogramChart title=format!("Tool calls per run, {when}") testid="chart-tool-calls"
                    unit=Unit::Count("runs") x=hist_axis counts=hist_counts series_label="finished runs" notes/>
            </section>
            <section class="chart-panel" aria-labelledby="trend-no-read">
                <h2 id="trend-no-read">"Completed without a read tool"</h2>
                <p class="muted small">
                    {format!("Share of the {completed} completed runs that never called a read tool: suspicious answers. Gaps are buckets with no completed run.")}
                </p>
                <LineChart title=format!("Share of completed runs without a read tool {per}, {when}") testid="chart-no-read"
                    unit=Unit::Percent x=time_axis(&w) series=vec![t.no_read] links=no_read_links/>
            </section>
            <section class="chart-panel" aria-labelledby="trend-replays">
                <h2 id="trend-replays">"Replay regression tests"</h2>
                <p class="muted small">
                    "Pass rate of the regression tests your team runs from replay fixtures, per agent "
                    "(posted to " <code>"POST /api/v1/replays/results"</code> "). Gaps are buckets without results."
                </p>
                {if replays.is_empty() {
                    view! { <p class="muted small" data-testid="no-replays">"No results in this range."</p> }.into_any()
                } else {
                    view! {
                        <LineChart title=format!("Replay test pass rate per agent {per}, {when}") testid="chart-replays"
                            unit=Unit::Percent x=time_axis(&w) series=replays/>
                    }.into_any()
                }}
            </section>
            <section class="chart-panel" aria-labelledby="trend-duplicates">
                <h2 id="trend-duplicates">"Deduplicated calls and duplicate side effects"</h2>
                <p class="muted small">"Retries the tool deduplicated (fine) and repeats the execution ledger stopped before they ran (guarded calls answered already_done), beside side effects that happened twice (the bug)."</p>
                <BarChart title=format!("Deduplicated calls and duplicate side effects {per}, {when}") testid="chart-duplicates"
                    unit=Unit::Count("calls") x=time_axis(&w) series=t.duplicates links=duplicate_links/>
                {no_duplicates}
                {ledger_note}
            </section>
            <section class="chart-panel" aria-labelledby="trend-cost">
                <h2 id="trend-cost">"Cost per run"</h2>
                <p class="muted small">"p50, p95 and p99 of finished runs' cost by start time (nearest rank); the legend gives them over the whole range."</p>
                <LineChart title=format!("Cost per run p50, p95, p99 {per}, {when}") testid="chart-cost"
                    unit=Unit::Usd x=time_axis(&w) series=t.cost links=cost_links/>
            </section>
            <section class="chart-panel" aria-labelledby="trend-cost-agent">
                <h2 id="trend-cost-agent">"Cost by agent"</h2>
                <p class="muted small">"What the runs that started in each bucket cost, by agent (running runs so far); the legend gives each agent's total. A bar opens that agent's runs of that bucket, costliest first."</p>
                <BarChart title=format!("Cost by agent {per}, {when}") testid="chart-cost-agent"
                    unit=Unit::Usd x=time_axis(&w) series=t.cost_by_agent stacked=true links=agent_links/>
            </section>
            <section class="chart-panel" aria-labelledby="trend-cost-model">
                <h2 id="trend-cost-model">"Cost by model"</h2>
                <p class="muted small">"The same cost, by each run's main model (the one most of its steps used); runs stored before models were recorded show as not recorded. A bar opens those runs."</p>
                <BarChart title=format!("Cost by model {per}, {when}") testid="chart-cost-model"
                    unit=Unit::Usd x=time_axis(&w) series=t.cost_by_model stacked=true links=model_links/>
            </section>
            <section class="chart-panel" aria-labelledby="trend-escalations">
                <h2 id="trend-escalations">"Escalations"</h2>
                <p class="muted small">"Escalations opened and resolved in each bucket."</p>
                <BarChart title=format!("Escalations opened and resolved {per}, {when}") testid="chart-escalations"
                    unit=Unit::Count("escalations") x=time_axis(&w) series=t.escalations/>
                {no_escalations}
            </section>
            <section class="chart-panel" aria-labelledby="trend-approvals">
                <h2 id="trend-approvals">"Approvals"</h2>
                <p class="muted small">"Requests made, decided by a person (approved or denied), and expired undecided."</p>
                <BarChart title=format!("Approvals requested, decided and expired {per}, {when}") testid="chart-approvals"
                    unit=Unit::Count("approvals") x=time_axis(&w) series=t.approvals/>
                {no_approvals}
            </section>
        </div>
    }
}
