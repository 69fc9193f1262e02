//! Escalations the traces report (pure): which recomputed runs escalated, which of them
//! need a new escalation or have an API-filed one to mark, and the details an
//! `escalation` span event or `escalation.*` span attributes carry. Storage runs it inside
//! the ingest transaction and writes what it decides.

use super::{DoneItem, EscalationReason, RemainingItem};
use crate::canonical::{RunDetail, RunSummary, TerminalReason};
use crate::span::{EscalationDetails, NormalizedSpan};
use std::collections::BTreeMap;

/// What an escalation opened from traces says beyond its reason.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Details {
    pub blocking_fact: Option<String>,
    pub done: Vec<DoneItem>,
    pub remains: Vec<RemainingItem>,
}

/// A run's latest stored escalation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Latest {
    pub opened_at: i64,
    pub id: String,
    /// Whether the traces reported it already.
    pub from_trace: bool,
}

/// An escalation to open for `run`.
#[derive(Debug, Clone, PartialEq)]
pub struct ToOpen<'a> {
    pub run: &'a RunSummary,
    pub reason: EscalationReason,
    /// The agent's words when they name no known reason.
    pub reason_text: Option<String>,
    pub details: Details,
    /// When the run needed a person, as its traces tell (Unix ms), if they do.
    pub needed_at_ms: Option<i64>,
}

/// What the traces of this write change.
#[derive(Debug, Default, PartialEq)]
pub struct Decision<'a> {
    /// API-filed escalations the traces now report too, with when their traces say the
    /// run needed a person (an agent may file after it stopped).
    pub merged: Vec<(&'a str, Option<i64>)>,
    pub opened: Vec<ToOpen<'a>>,
}

/// The runs that escalated: terminal reason `escalated`, or a span carrying
/// `escalation.reason`.
pub fn escalated(derived: &[RunDetail]) -> impl Iterator<Item = &RunSummary> {
    derived
        .iter()
        .map(|d| &d.run)
        .filter(|run| run.terminal_reason == TerminalReason::Escalated || run.escalation_reason.is_some())
}

/// For each escalated run: nothing when the traces reported its latest escalation
/// already, a mark when the API filed it, a new one otherwise, with the details of an
/// `escalation` span event, or else of `escalation.*` attributes, among `spans`.
pub fn decide<'a>(
    escalated: &[&'a RunSummary],
    latest: &'a BTreeMap<String, Latest>,
    spans: &[NormalizedSpan],
) -> Decision<'a> {
    let mut decision = Decision::default();
    for run in escalated {
        let of_run = || spans.iter().filter(|s| run.trace_ids.contains(&s.trace_id));
        match latest.get(&run.run_id) {
            Some(Latest { from_trace: true, .. }) => {}
            Some(Latest { id, .. }) => decision.merged.push((id.as_str(), needed_at(run, of_run()))),
            None => {
                let raw = run.escalation_reason.clone().unwrap_or_else(|| "unspecified".into());
                let (reason, reason_text) = match EscalationReason::from_words(&raw) {
                    Some(r) => (r, None),
                    None => (EscalationReason::Other, Some(raw)),
                };
                let details = of_run()
                    .find_map(|s| details_from_events(&s.events))
                    .or_else(|| of_run().find_map(|s| s.escalation_details.as_ref()).map(details_from_attributes))
                    .unwrap_or_default();
                let needed_at_ms = needed_at(run, of_run());
                decision.opened.push(ToOpen { run, reason, reason_text, details, needed_at_ms });
            }
        }
    }
    decision
}

/// When the run needed a person, by its traces: the earliest `escalation` span event's
/// time, else the end of the earliest span carrying `escalation.reason`, else the end of
/// the run (one that ended `escalated`). Among `spans`, the ones this write brought; a
/// run whose escalating span came in an earlier write falls back to its end.
pub fn needed_at<'a>(run: &RunSummary, spans: impl Iterator<Item = &'a NormalizedSpan>) -> Option<i64> {
    let mut event: Option<i64> = None;
    let mut span: Option<i64> = None;
    for s in spans {
        for e in s.events.iter().filter(|e| e["name"] == "escalation") {
            let at = e["time_unix_nano"].as_str().and_then(|t| t.parse::<i64>().ok()).filter(|t| *t > 0);
            if let Some(ms) = at.map(|ns| ns / 1_000_000) {
                event = Some(event.map_or(ms, |m| m.min(ms)));
            }
        }
        if s.escalation_reason.is_some() && s.end_ns > 0 {
            let ms = s.end_ns / 1_000_000;
            span = Some(span.map_or(ms, |m| m.min(ms)));
        }
    }
    event.or(span).or_else(|| run.ended_at.map(|t| t.timestamp_millis()))
}

/// The details sent as span attributes (`escalation.blocking_fact`, ...).
pub fn details_from_attributes(d: &EscalationDetails) -> Details {
    let done: Vec<DoneItem> = d.what_was_done.clone().and_then(done_items).unwrap_or_default();
    let remains = d.what_remains.clone().map(remaining_items).unwrap_or_default();
    Details { blocking_fact: d.blocking_fact.clone(), done, remains }
}

/// `what_was_done` as sent: an array of objects (the API's items) or of plain texts.
fn done_items(v: serde_json::Value) -> Option<Vec<DoneItem>> {
    let items = v.as_array()?;
    Some(
        items
            .iter()
            .filter_map(|item| match item {
                serde_json::Value::String(text) => Some(DoneItem {
                    tool: None,
                    description: Some(text.clone()),
                    external_id: None,
                    idempotency_key: None,
                    at: None,
                }),
                other => serde_json::from_value(other.clone()).ok(),
            })
            .collect(),
    )
}

/// `what_remains` as sent: an array of texts or of `{description}` objects.
fn remaining_items(v: serde_json::Value) -> Vec<RemainingItem> {
    v.as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter_map(|item| {
            let description =
                item.as_str().map(str::to_string).or_else(|| item["description"].as_str().map(str::to_string))?;
            Some(RemainingItem { description, done: false, done_by: None, call_id: None })
        })
        .collect()
}

/// The details an `escalation` span event carries (the same fields as the API), if any.
pub fn details_from_events(events: &[serde_json::Value]) -> Option<Details> {
    let attrs = events.iter().find(|e| e["name"] == "escalation")?.get("attributes")?;
    let field = |key: &str| attrs.get(key).or_else(|| attrs.get(&format!("escalation.{key}")));
    let text = |key: &str| field(key).and_then(|v| v.as_str()).map(str::to_string);
    let parse = |key: &str| -> Option<serde_json::Value> {
        match field(key)? {
            serde_json::Value::String(s) => serde_json::from_str(s).ok(),
            other => Some(other.clone()),
        }
    };
    let done: Vec<DoneItem> = parse("what_was_done").and_then(done_items).unwrap_or_default();
    let remains: Vec<RemainingItem> = parse("what_remains").map(remaining_items).unwrap_or_default();
    Some(Details { blocking_fact: text("blocking_fact"), done, remains })
}
