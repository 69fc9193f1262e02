//! Small labels with meaning: terminal reasons, side-effect classes, outcomes, flags.

use crate::canonical::{RunSummary, TerminalReason};
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

/// The flag icons of a run, each with its meaning as a tooltip and for screen readers.
#[component]
pub fn RunFlags(run: RunSummary) -> impl IntoView {
    let mut flags: Vec<(&'static str, &'static str, String)> = Vec::new();
    if run.duplicate_side_effects > 0 {
        flags.push(("flag-dup", "⧉", format!("{} duplicate side effect(s)", run.duplicate_side_effects)));
    }
    if run.completed_without_read {
        flags.push(("flag-noread", "∅", "completed without calling a read tool".into()));
    }
    if run.approval_violations > 0 {
        flags.push((
            "flag-approval",
            "⚠",
            format!("{} tool call(s) ran without a valid approval", run.approval_violations),
        ));
    }
    if run.terminal_reason == TerminalReason::Escalated {
        flags.push(("flag-escalated", "⇪", "escalated to a human".into()));
    }
    flags
        .into_iter()
        .map(|(class, icon, label)| {
            view! { <span class=format!("flag {class}") title=label.clone() aria-label=label>{icon}</span> }
        })
        .collect_view()
}
