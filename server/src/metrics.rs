//! `GET /metrics`: the figures of the runs, approvals and escalations pages and the
//! ingest counters in Prometheus text exposition format 0.0.4, for teams that alert with
//! Prometheus and Alertmanager. A token with the `read` scope is required.
//!
//! The handler reads [`store::metrics::figures`] and the in-process
//! [`IngestCounters`]; [`render`] turns them into text and is pure, so the format is
//! tested without a database.

use crate::api::{ApiError, TokenAuth};
use crate::otlp::service::IngestCounters;
use axum::extract::State;
use axum::http::{header, HeaderMap};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use domain::access::Scope;
use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use store::metrics::Figures;
use store::{now_ms, Db};

/// The Content-Type of the text format Prometheus asks for by default.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The window cost per run is summarised over, and its label.
pub const COST_WINDOW_MS: i64 = 3_600_000;
const COST_WINDOW_LABEL: &str = "1h";

/// At most this many `tool` series for irreversible executions; the rest are added up
/// under [`OTHER_TOOLS`], so an agent inventing tool names cannot blow up Prometheus'
/// series count.
pub const MAX_TOOL_SERIES: usize = 100;
/// The `tool` label of the executions beyond [`MAX_TOOL_SERIES`]; not a valid tool name
/// anyone would choose.
pub const OTHER_TOOLS: &str = "(other tools)";
/// The `tool` label of irreversible spans that named no tool.
pub const UNNAMED_TOOL: &str = "(unnamed)";

#[derive(Clone)]
struct MetricsState {
    db: Db,
    auth: TokenAuth,
    ingest: Arc<IngestCounters>,
}

/// The `/metrics` route, for the main web listener. `ingest` are the counters of this
/// process' OTLP receivers.
pub fn router<S: Clone + Send + Sync + 'static>(db: Db, ingest: Arc<IngestCounters>) -> Router<S> {
    let state = MetricsState { auth: TokenAuth::new(db.clone()), db, ingest };
    Router::new().route("/metrics", get(scrape)).with_state(state)
}

/// What one scrape shows: the stored figures, the ingest counters, and the time they
/// were read (for ages).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Scrape {
    pub figures: Figures,
    pub spans_accepted: u64,
    pub spans_rejected: u64,
    pub requests_refused: u64,
    /// Where this process' memory is.
    pub memory: crate::memory::Usage,
    pub now_ms: i64,
}

async fn scrape(State(state): State<MetricsState>, headers: HeaderMap) -> Response {
    match read(&state, &headers).await {
        Ok(scrape) => ([(header::CONTENT_TYPE, CONTENT_TYPE)], render(&scrape)).into_response(),
        Err(e) => e.into_response(),
    }
}

async fn read(state: &MetricsState, headers: &HeaderMap) -> Result<Scrape, ApiError> {
    let authorization = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
    state.auth.authenticate(authorization).await?.require(Scope::Read)?;
    let now = now_ms();
    let figures = store::metrics::figures(&state.db, now - COST_WINDOW_MS).await?;
    Ok(Scrape {
        figures,
        spans_accepted: state.ingest.spans_accepted.load(Ordering::Relaxed),
        spans_rejected: state.ingest.spans_rejected.load(Ordering::Relaxed),
        requests_refused: state.ingest.requests_refused_busy.load(Ordering::Relaxed),
        memory: crate::memory::usage(),
        now_ms: now,
    })
}

/// At most this many (tool, state) series of the ledger: a runaway tool namespace must
/// not blow up the scrape.
const MAX_LEDGER_SERIES: usize = 700;

/// The exposition text of one scrape. Every family has its `# HELP` and `# TYPE`, and a
/// series even when its value is 0, so alert rules never see a metric vanish.
pub fn render(s: &Scrape) -> String {
    let f = &s.figures;
    let mut out = Exposition::default();

    out.family("flightdeck_runs", "gauge", "Retained runs by terminal reason (running: not ended yet).");
    for (reason, n) in &f.runs_by_reason {
        out.sample("flightdeck_runs", &[("terminal_reason", reason.as_str())], *n as f64);
    }

    out.family(
        "flightdeck_irreversible_executions",
        "gauge",
        "Executed irreversible tool calls (outcome ok, error or timeout) in retained runs.",
    );
    out.sample("flightdeck_irreversible_executions", &[], f.irreversible_total() as f64);
    out.family(
        "flightdeck_irreversible_executions_by_tool",
        "gauge",
        "Executed irreversible tool calls in retained runs, per tool; beyond 100 tools the rest are summed under tool=\"(other tools)\".",
    );
    for (tool, n) in tool_series(&f.irreversible_by_tool) {
        out.sample("flightdeck_irreversible_executions_by_tool", &[("tool", tool)], n as f64);
    }

    out.family(
        "flightdeck_deduped_calls",
        "gauge",
        "Tool calls answered from an idempotency cache (outcome deduped) in retained runs.",
    );
    out.sample("flightdeck_deduped_calls", &[], f.deduped_calls as f64);

    out.family(
        "flightdeck_ledger_calls",
        "gauge",
        "Guarded calls in the execution ledger per tool and state (started, succeeded, failed, unknown, ...).",
    );
    for (tool, state, n) in f.ledger_calls.iter().take(MAX_LEDGER_SERIES) {
        out.sample("flightdeck_ledger_calls", &[("tool", tool), ("state", state)], *n as f64);
    }
    out.family(
        "flightdeck_ledger_deduped",
        "gauge",
        "Asks the execution ledger answered already_done instead of running the call again, per tool.",
    );
    for (tool, n) in tool_series(&f.ledger_deduped) {
        out.sample("flightdeck_ledger_deduped", &[("tool", tool)], n as f64);
    }
    out.family(
        "flightdeck_duplicate_side_effects",
        "gauge",
        "Write or irreversible side effects that succeeded more than once for the same key in retained runs.",
    );
    out.sample("flightdeck_duplicate_side_effects", &[], f.duplicate_side_effects as f64);

    out.family(
        "flightdeck_approval_violations",
        "gauge",
        "Tool calls executed without a valid approval in retained runs, by kind.",
    );
    for (kind, n) in &f.approval_violations {
        out.sample("flightdeck_approval_violations", &[("kind", kind.as_str())], *n as f64);
    }

    out.family("flightdeck_approvals_pending", "gauge", "Approval requests waiting for a decision.");
    out.sample("flightdeck_approvals_pending", &[], f.approvals_pending as f64);
    out.family(
        "flightdeck_approval_oldest_pending_age_seconds",
        "gauge",
        "Age of the oldest pending approval request in seconds; 0 when none is pending.",
    );
    out.sample(
        "flightdeck_approval_oldest_pending_age_seconds",
        &[],
        age_seconds(s.now_ms, f.oldest_pending_approval_ms),
    );

    out.family("flightdeck_escalations_open", "gauge", "Open escalations.");
    out.sample("flightdeck_escalations_open", &[], f.escalations_open as f64);
    out.family("flightdeck_escalations_unclaimed", "gauge", "Open escalations nobody has claimed.");
    out.sample("flightdeck_escalations_unclaimed", &[], f.escalations_unclaimed as f64);
    out.family(
        "flightdeck_escalation_oldest_open_age_seconds",
        "gauge",
        "How long the longest-waiting open escalation has waited since its run needed a person, in seconds; 0 when none is open.",
    );
    out.sample(
        "flightdeck_escalation_oldest_open_age_seconds",
        &[],
        age_seconds(s.now_ms, f.oldest_open_escalation_ms),
    );

    // A gauge, not a summary: the quantiles cover a sliding window, so there is no
    // cumulative _sum and _count for rate() to work on.
    out.family(
        "flightdeck_cost_per_run",
        "gauge",
        "Cost per run (in the agents' budget.cost_spent unit), nearest-rank quantiles over the runs that ended in the past hour (window=\"1h\"); NaN when none did.",
    );
    for (q, value) in &f.cost_quantiles {
        let q = q.to_string();
        out.sample(
            "flightdeck_cost_per_run",
            &[("quantile", &q), ("window", COST_WINDOW_LABEL)],
            value.unwrap_or(f64::NAN),
        );
    }
    out.family(
        "flightdeck_cost_per_run_runs",
        "gauge",
        "Runs the cost quantiles are taken over: those that ended in the past hour (window=\"1h\").",
    );
    out.sample("flightdeck_cost_per_run_runs", &[("window", COST_WINDOW_LABEL)], f.cost_window_runs as f64);

    out.family(
        "flightdeck_alerts_open",
        "gauge",
        "Flightdeck's own alerts not yet resolved, by rule and state (firing: nobody has acknowledged it).",
    );
    for (rule, state, n) in &f.alerts_open {
        out.sample("flightdeck_alerts_open", &[("rule", rule.as_str()), ("state", state.as_str())], *n as f64);
    }

    out.family(
        "flightdeck_ingest_spans_accepted_total",
        "counter",
        "Spans this process stored from OTLP exports since it started; rate() gives spans per second.",
    );
    out.sample("flightdeck_ingest_spans_accepted_total", &[], s.spans_accepted as f64);
    out.family(
        "flightdeck_ingest_spans_rejected_total",
        "counter",
        "Invalid spans this process refused from OTLP exports since it started; rate() gives rejections per second.",
    );
    out.sample("flightdeck_ingest_spans_rejected_total", &[], s.spans_rejected as f64);
    out.family(
        "flightdeck_ingest_requests_refused_total",
        "counter",
        "OTLP export requests this process answered 503 (busy or storage unavailable; retry later) since it started.",
    );
    out.sample("flightdeck_ingest_requests_refused_total", &[], s.requests_refused as f64);

    let m = &s.memory;
    out.family(
        "flightdeck_memory_bytes",
        "gauge",
        "This process' memory by part: resident (all of it), rust_allocated / rust_resident (Rust's heap, jemalloc: in live allocations / held resident), sqlite_allocated (SQLite's page caches and statements), c_allocated / c_held (glibc's heap, where SQLite and zstd allocate: in live allocations / held from the system).",
    );
    for (part, bytes) in [
        ("resident", m.resident),
        ("rust_allocated", m.rust_allocated),
        ("rust_resident", m.rust_resident),
        ("sqlite_allocated", m.sqlite_allocated),
        ("c_allocated", m.c_allocated),
        ("c_held", m.c_held),
    ] {
        out.sample("flightdeck_memory_bytes", &[("part", part)], bytes as f64);
    }

    out.text
}

/// Tool series for the exposition: unnamed tools labelled, at most [`MAX_TOOL_SERIES`]
/// (the largest), the rest summed under [`OTHER_TOOLS`].
fn tool_series(by_tool: &[(String, i64)]) -> Vec<(&str, i64)> {
    let mut sorted: Vec<(&str, i64)> =
        by_tool.iter().map(|(t, n)| (if t.is_empty() { UNNAMED_TOOL } else { t.as_str() }, *n)).collect();
    sorted.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    if sorted.len() > MAX_TOOL_SERIES {
        let rest: i64 = sorted[MAX_TOOL_SERIES..].iter().map(|(_, n)| n).sum();
        sorted.truncate(MAX_TOOL_SERIES);
        sorted.push((OTHER_TOOLS, rest));
    }
    sorted
}

fn age_seconds(now_ms: i64, since_ms: Option<i64>) -> f64 {
    since_ms.map_or(0.0, |t| (now_ms - t).max(0) as f64 / 1000.0)
}

/// Text exposition format 0.0.4, written line by line.
#[derive(Default)]
struct Exposition {
    text: String,
}

impl Exposition {
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.text, "# HELP {name} {}", escape_help(help));
        let _ = writeln!(self.text, "# TYPE {name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.text.push_str(name);
        if !labels.is_empty() {
            self.text.push('{');
            for (i, (label, value)) in labels.iter().enumerate() {
                if i > 0 {
                    self.text.push(',');
                }
                let _ = write!(self.text, "{label}=\"{}\"", escape_label_value(value));
            }
            self.text.push('}');
        }
        let _ = writeln!(self.text, " {}", format_value(value));
    }
}

/// Label values may hold anything an agent sent: backslash, double quote and line feed
/// are the three characters the format requires escaped.
pub fn escape_label_value(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// HELP text escapes backslash and line feed (quotes stay as they are).
fn escape_help(help: &str) -> String {
    help.replace('\\', "\\\\").replace('\n', "\\n")
}

/// Go's float spelling, which Prometheus parses: `NaN`, `+Inf`, `-Inf`, else the
/// shortest decimal that reads back the same (Rust's `Display`, integers without `.0`).
fn format_value(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        v.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use domain::alerts::{AlertRule, AlertState};
    use domain::approvals::ViolationKind;
    use domain::canonical::TerminalReason;

    fn sample_scrape() -> Scrape {
        Scrape {
            figures: Figures {
                runs_by_reason: TerminalReason::ALL.iter().map(|r| (*r, 2)).collect(),
                irreversible_by_tool: vec![("send_email".into(), 3), ("wire \"money\"\n\\now".into(), 1)],
                deduped_calls: 4,
                duplicate_side_effects: 1,
                approval_violations: ViolationKind::ALL.iter().map(|k| (*k, 0)).collect(),
                approvals_pending: 2,
                oldest_pending_approval_ms: Some(9_000),
                escalations_open: 1,
                escalations_unclaimed: 1,
                oldest_open_escalation_ms: Some(4_500),
                cost_window_runs: 3,
                cost_quantiles: vec![(0.5, Some(0.25)), (0.95, Some(1.5)), (0.99, None)],
                alerts_open: vec![(AlertRule::EscalationBacklog, AlertState::Firing, 1)],
                ledger_calls: vec![
                    ("send_email".into(), "succeeded".into(), 5),
                    ("send_email".into(), "unknown".into(), 1),
                ],
                ledger_deduped: vec![("send_email".into(), 2)],
            },
            spans_accepted: 1200,
            spans_rejected: 3,
            requests_refused: 0,
            memory: crate::memory::Usage {
                resident: 150 << 20,
                rust_allocated: 40 << 20,
                rust_resident: 60 << 20,
                sqlite_allocated: 70 << 20,
                c_allocated: 75 << 20,
                c_held: 80 << 20,
            },
            now_ms: 10_000,
        }
    }

    #[test]
    fn label_values_escape_backslash_quote_and_newline() {
        assert_eq!(escape_label_value(r#"a\b"c"#), r#"a\\b\"c"#);
        assert_eq!(escape_label_value("line\nbreak"), "line\\nbreak");
        assert_eq!(escape_label_value("tab\tand ünïcode"), "tab\tand ünïcode");
    }

    #[test]
    fn untrusted_tool_names_stay_on_one_line() {
        let text = render(&sample_scrape());
        assert!(text.contains("flightdeck_irreversible_executions_by_tool{tool=\"wire \\\"money\\\"\\n\\\\now\"} 1\n"));
        assert!(text.contains("flightdeck_irreversible_executions_by_tool{tool=\"send_email\"} 3\n"));
        assert!(text.contains("\nflightdeck_irreversible_executions 4\n"));
    }

    #[test]
    fn open_alerts_are_labelled_by_rule_and_state() {
        let text = render(&sample_scrape());
        assert!(text.contains("\nflightdeck_alerts_open{rule=\"escalation_backlog\",state=\"firing\"} 1\n"), "{text}");
    }

    #[test]
    fn every_family_has_help_and_type_and_values_are_spelled_for_prometheus() {
        let text = render(&sample_scrape());
        assert!(text.contains("# HELP flightdeck_runs Retained runs"));
        assert!(text.contains("# TYPE flightdeck_runs gauge\nflightdeck_runs{terminal_reason=\"completed\"} 2\n"));
        assert!(text.contains("flightdeck_cost_per_run{quantile=\"0.5\",window=\"1h\"} 0.25\n"));
        assert!(text.contains("flightdeck_cost_per_run{quantile=\"0.99\",window=\"1h\"} NaN\n"));
        assert!(text.contains("flightdeck_escalation_oldest_open_age_seconds 5.5\n"));
        assert!(text.contains("flightdeck_approval_oldest_pending_age_seconds 1\n"));
        assert!(text.contains("flightdeck_memory_bytes{part=\"resident\"} 157286400\n"), "{text}");
        assert!(text.contains("flightdeck_memory_bytes{part=\"sqlite_allocated\"} 73400320\n"), "{text}");
        assert!(text.contains(
            "# TYPE flightdeck_ingest_spans_accepted_total counter\nflightdeck_ingest_spans_accepted_total 1200\n"
        ));
        assert!(text.contains("flightdeck_approval_violations{kind=\"payload_mismatch\"} 0\n"));
        // Only counters end in _total.
        for line in text.lines().filter(|l| l.starts_with("# TYPE")) {
            let parts: Vec<&str> = line.split(' ').collect();
            assert_eq!(parts[2].ends_with("_total"), parts[3] == "counter", "{line}");
        }
        // Each family is described once, before its samples.
        let mut described = std::collections::HashSet::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                assert!(described.insert(rest.split(' ').next().unwrap().to_string()), "{line}");
            } else if !line.starts_with('#') {
                let name = line.split(['{', ' ']).next().unwrap();
                assert!(described.contains(name), "{line} has no TYPE before it");
            }
        }
    }

    #[test]
    fn empty_figures_still_give_every_series() {
        let text = render(&Scrape::default());
        assert!(text.contains("flightdeck_escalation_oldest_open_age_seconds 0\n"));
        assert!(text.contains("flightdeck_irreversible_executions 0\n"));
        assert!(!text.contains("flightdeck_irreversible_executions_by_tool{"));
    }

    #[test]
    fn tool_series_are_capped_and_the_rest_summed() {
        let many: Vec<(String, i64)> = (0..150).map(|i| (format!("tool_{i:03}"), 1000 - i)).collect();
        let series = tool_series(&many);
        assert_eq!(series.len(), MAX_TOOL_SERIES + 1);
        assert_eq!(series[0], ("tool_000", 1000));
        let rest: i64 = (100..150).map(|i| 1000 - i).sum();
        assert_eq!(series.last(), Some(&(OTHER_TOOLS, rest)));
        assert_eq!(tool_series(&[(String::new(), 2)]), vec![(UNNAMED_TOOL, 2)]);
    }

    #[test]
    fn values_use_prometheus_spelling() {
        assert_eq!(format_value(3.0), "3");
        assert_eq!(format_value(0.125), "0.125");
        assert_eq!(format_value(f64::NAN), "NaN");
        assert_eq!(format_value(f64::INFINITY), "+Inf");
        assert_eq!(format_value(1e21), "1000000000000000000000");
    }
}
