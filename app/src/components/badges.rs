//! Small labels with meaning: terminal reasons, side-effect classes, outcomes, flags.

use domain::canonical::{RunSummary, TerminalReason};
use leptos::prelude::*;

/// A coloured terminal-reason badge. Step-limit and budget stops read as not finished.
#[component]
pub fn ReasonBadge(reason: TerminalReason, #[prop(optional)] large: bool) -> impl IntoView {
    let title = match reason {
        TerminalReason::Completed => "the run reached its end",
        TerminalReason::StepLimit => "stopped by the step limit: not finished",
        TerminalReason::Budget => "stopped by its budget: not finished",
        TerminalReason::Error => "ended in an error",
        TerminalReason::Escalated => "handed to a human",
        TerminalReason::Running => "the root span has not ended yet",
    };
    let class = format!("badge reason reason-{}{}", reason.as_str(), if large { " large" } else { "" });
    view! { <span class=class title=title data-reason=reason.as_str()>{reason.as_str().replace('_', " ")}</span> }
}

/// Any label whose CSS class is derived from its value, e.g. `effect-write`, `outcome-ok`.
#[component]
pub fn Tag(#[prop(into)] kind: String, #[prop(into)] value: String) -> impl IntoView {
    let class = format!("badge {kind}-{}", value.replace(|c: char| !c.is_ascii_alphanumeric(), "_"));
    view! { <span class=class>{value}</span> }
}

/// The flags of a run as short text badges (icons rendered as empty boxes in some
/// fonts), each with its meaning as a tooltip.
#[component]
pub fn RunFlags(run: RunSummary) -> impl IntoView {
    let mut flags: Vec<(&'static str, String, String)> = Vec::new();
    if run.duplicate_side_effects > 0 {
        flags.push((
            "flag-dup",
            format!("{} dup", run.duplicate_side_effects),
            format!("{} duplicate side effect(s)", run.duplicate_side_effects),
        ));
    }
    if run.possible_duplicates > 0 {
        flags.push((
            "flag-possible-dup",
            format!("{} possible dup", run.possible_duplicates),
            format!("{} repeat(s) of an unclassified tool with the same arguments", run.possible_duplicates),
        ));
    }
    if run.completed_without_read {
        flags.push(("flag-noread", "no read".into(), "completed without calling a read tool".into()));
    }
    if run.approval_violations > 0 {
        flags.push((
            "flag-approval",
            format!("{} unapproved", run.approval_violations),
            format!("{} tool call(s) ran without a valid approval", run.approval_violations),
        ));
    }
    if run.terminal_reason == TerminalReason::Escalated {
        flags.push(("flag-escalated", "escalated".into(), "escalated to a human".into()));
    }
    flags
        .into_iter()
        .map(|(class, text, label)| {
            view! { <span class=format!("flag-badge {class}") title=label>{text}</span> }
        })
        .collect_view()
}
