//! Runs for the browser: the filtered list, one run with a page of its waterfall, and one
//! span's panel. Every function needs the `viewer` role.

use crate::errors::AppError;
use domain::canonical::{QueryParams, RunListView, RunView, SpanPanel};
use leptos::prelude::*;

/// Spans per waterfall page: enough for most runs on one page, small enough that a
/// 5,000-span run stays a light page.
pub const SPANS_PER_PAGE: i64 = 500;

// JSON input: the filters are one nested struct, which form encoding cannot express when
// every field is empty.
#[server(prefix = "/fn", endpoint = "load_runs", input = leptos::server_fn::codec::Json)]
pub async fn load_runs(params: QueryParams) -> Result<RunListView, AppError> {
    use super::ssr;
    use store::runs;
    ssr::require(domain::access::Role::Viewer)?;
    let db = ssr::db()?;
    let now = chrono::Utc::now();
    let query = match params.into_query(now) {
        Ok(q) => q,
        Err(message) => return ssr::fail(AppError::Invalid(message)),
    };
    let (page, counts) = runs::list_and_counts(&db, &query).await?;
    Ok(RunListView {
        runs: page.runs,
        counts,
        next_cursor: page.next.map(|c| c.encode()),
        searched: page.searched.map(|w| domain::canonical::SearchedWindow {
            since: chrono::DateTime::from_timestamp_nanos(w.since_ns),
            runs: w.runs,
        }),
        filtered: page.filtered.and_then(filtered_window),
        now,
    })
}

/// The window a list without a search term read, as the page shows it (none when all the
/// lead's runs were read).
#[cfg(feature = "ssr")]
fn filtered_window(window: store::runs::FilterWindow) -> Option<domain::canonical::FilteredWindow> {
    use domain::canonical::WindowLead;
    use store::runs::Lead;
    let lead = match window.lead {
        Lead::Agent(name) => WindowLead::Agent(name),
        Lead::Trigger(t) => WindowLead::Trigger(t),
        Lead::Flag(f) => WindowLead::Flag(f.as_str().to_string()),
        Lead::Newest => WindowLead::Newest,
    };
    Some(domain::canonical::FilteredWindow {
        since: chrono::DateTime::from_timestamp_nanos(window.since_ns?),
        runs: window.runs,
        lead,
    })
}

/// One run's page: its detail and one page of its waterfall. `focus` (`trace:span`) opens
/// the page that span is on; `zoom` shows only that span's subtree; `q` searches span
/// names and attribute values and lists where the hits are.
#[server(prefix = "/fn", endpoint = "load_run")]
pub async fn load_run(
    run_id: String,
    page: Option<i64>,
    #[server(default)] focus: Option<String>,
    #[server(default)] zoom: Option<String>,
    #[server(default)] q: Option<String>,
) -> Result<RunView, AppError> {
    use super::ssr;
    use domain::trace_view::{view, ViewRequest};
    use store::runs;
    ssr::require(domain::access::Role::Viewer)?;
    let db = ssr::db()?;
    let rules = ssr::rules()?;
    let Some(mut detail) = runs::get_with(&db, &run_id, &rules).await? else {
        return ssr::fail(AppError::NotFound(format!("run `{run_id}`")));
    };
    // The waterfall labels spans with the run's own step numbers (a GenAI step span
    // carries no index; derivation numbers it).
    let step_of_span: std::collections::HashMap<String, i64> = detail
        .step_list
        .iter()
        .map(|s| (s.span_id.clone(), s.index))
        .chain(detail.tool_call_list.iter().filter_map(|c| c.step_index.map(|i| (c.span_id.clone(), i))))
        .collect();
    let steps: Vec<domain::canonical::StepView> = std::mem::take(&mut detail.step_list);
    // The page is rendered on the server and this value is sent again for hydration, so
    // it carries only what the page shows: the side-effect table's calls (not every read
    // call or step, but any call that carried a credential, which the header flags) and the
    // waterfall's columns (tool name, keys and ids are in the panel).
    detail.tool_call_list.retain(|c| {
        c.side_effect.changes_the_world()
            || c.side_effect == domain::canonical::SideEffect::Unknown
            || c.credential_in_arguments
    });
    let failed = detail.run.terminal_reason == domain::canonical::TerminalReason::Error;
    let latest = detail.run.trace_ids.last().filter(|_| failed).cloned();
    let (all, failure) = runs::waterfall_and_failure(&db, &run_id, latest.as_deref()).await?;
    let text = |v: Option<String>| v.map(|t| t.trim().to_string()).filter(|t| !t.is_empty());
    let (focus, zoom, query) = (text(focus), text(zoom), text(q).map(|q| q.chars().take(200).collect::<String>()));
    let request =
        ViewRequest { page: page.unwrap_or(1).max(1), per_page: SPANS_PER_PAGE, focus, zoom, query: query.clone() };
    let mut shown = view(all, &request);
    for s in &mut shown.spans {
        if let Some(index) = step_of_span.get(&s.span_id) {
            s.step_index = Some(*index);
        }
        s.tool_name = None;
        s.idempotency_key = None;
        s.external_id = None;
    }
    let has_bodies = runs::has_bodies(&db, &run_id).await?;
    Ok(RunView {
        detail,
        failure,
        steps,
        spans: shown.spans,
        span_page: shown.page,
        span_pages: shown.pages,
        total_spans: shown.total,
        has_bodies,
        marks: shown.marks,
        query,
        matches: shown.matches,
        match_count: shown.match_count,
        zoomed: shown.zoomed,
    })
}

#[server(prefix = "/fn", endpoint = "load_span")]
pub async fn load_span(run_id: String, trace_id: String, span_id: String) -> Result<SpanPanel, AppError> {
    use super::ssr;
    use store::runs;
    ssr::require(domain::access::Role::Viewer)?;
    let db = ssr::db()?;
    match runs::span_panel(&db, &run_id, &trace_id, &span_id).await? {
        Some(panel) => Ok(panel),
        None => ssr::fail(AppError::NotFound(format!("span {span_id} in run `{run_id}`"))),
    }
}
