//! One escalation (`/escalations/{id}`): the blocking fact and reason first; what was done
//! (each item with its external id and idempotency key) checked against the side effects
//! observed in the run, with what was observed but never claimed highlighted; what
//! remains as a checklist; the operator's actions; and the timeline.

use super::{backlog_age, reason_text};
use crate::components::badges::Tag;
use crate::components::payload::ExactText;
use crate::components::status::{ActionError, ErrorBox};
use crate::components::time::format_utc;
use crate::functions::escalations::{
    load_escalation, ClaimEscalation, EscalationView, NoteEscalation, ReleaseEscalation, ResolveEscalation,
    TickEscalationItem,
};
use crate::functions::ledger::SettleCall;
use domain::canonical::ToolCallView;
use domain::escalations::{DoneItem, Resolution};
use domain::ledger::{EntryState, LedgerEntry};
use domain::url::run_href;
use leptos::prelude::*;
use leptos_meta::Title;

/// Every action of the page; any of them completing reloads the escalation.
#[derive(Clone, Copy)]
struct Actions {
    claim: ServerAction<ClaimEscalation>,
    release: ServerAction<ReleaseEscalation>,
    note: ServerAction<NoteEscalation>,
    tick: ServerAction<TickEscalationItem>,
    resolve: ServerAction<ResolveEscalation>,
    settle: ServerAction<SettleCall>,
}

#[component]
pub fn EscalationPage() -> impl IntoView {
    // From the path, decoded once (see `path_id`).
    let id = crate::path_id::path_id("/escalations/");
    let actions = Actions {
        claim: ServerAction::new(),
        release: ServerAction::new(),
        note: ServerAction::new(),
        tick: ServerAction::new(),
        resolve: ServerAction::new(),
        settle: ServerAction::new(),
    };
    crate::components::layout::refresh_nav_after(actions.claim);
    crate::components::layout::refresh_nav_after(actions.resolve);
    let versions = move || {
        (
            actions.claim.version().get(),
            actions.release.version().get(),
            actions.note.version().get(),
            actions.tick.version().get(),
            actions.resolve.version().get(),
            actions.settle.version().get(),
        )
    };
    let data = Resource::new(move || (id.get(), versions()), |(id, _)| load_escalation(id));
    view! {
        <Title text="Escalation"/>
        <Transition fallback=|| view! { <p class="loading">"Loading escalation…"</p> }>
            {move || Suspend::new(async move {
                match data.await {
                    Ok(view) => view! { <Body view actions/> }.into_any(),
                    Err(error) => view! { <ErrorBox error/> }.into_any(),
                }
            })}
        </Transition>
    }
}

#[component]
fn Body(view: EscalationView, actions: Actions) -> impl IntoView {
    let e = view.escalation.clone();
    let mine = e.claimed_by.as_deref() == Some(view.me.as_str());
    let status = if e.open { "open" } else { "resolved" };
    let unknown: Vec<LedgerEntry> = view.calls.iter().filter(|c| c.state == EntryState::Unknown).cloned().collect();
    view! {
        <p class="breadcrumb"><a href="/escalations">"Escalations"</a> " / " <code>{e.id.clone()}</code></p>
        <h1>"Run " <code>{e.run_id.clone()}</code> " needs a person " <Tag kind="escalation" value=status/></h1>
        <section class="callout danger blocking" data-testid="blocking">
            {(!unknown.is_empty()).then(|| view! {
                <p class="big" data-testid="unknown-headline">{unknown_headline(&unknown)}</p>
            })}
            <p class:big=unknown.is_empty()>{e.blocking_fact.clone().unwrap_or_else(|| "The agent gave no blocking fact.".into())}</p>
            <p>"Reason: " <strong>{reason_text(&e)}</strong></p>
            <p class="muted small">
                {format!("Needed a person at {} ({} ago) · agent {} · reported by {}",
                    format_utc(&e.needed_at), backlog_age(&e.needed_at, &view.now),
                    e.agent.clone().unwrap_or_else(|| "unknown".into()),
                    match (e.from_api, e.from_trace) { (true, true) => "the API and the traces", (true, false) => "the API", _ => "the traces" })}
                " · "
                {if view.run_known {
                    view! { <a href=run_href(&e.run_id) data-testid="run-link">"Open the run's waterfall"</a> }.into_any()
                } else {
                    view! { <span>"No spans of this run have arrived."</span> }.into_any()
                }}
            </p>
        </section>
        <Claim view=view.clone() actions/>
        <LedgerCalls view=view.clone() actions/>
        <Evidence view=view.clone()/>
        <Remaining view=view.clone() actions mine/>
        {(view.can_act && e.open).then(|| view! { <Resolve view=view.clone() actions mine/> })}
        <Outcome view=view.clone()/>
        <Timeline view=view.clone() actions/>
    }
}

#[component]
fn Claim(view: EscalationView, actions: Actions) -> impl IntoView {
    let e = &view.escalation;
    if !e.open {
        return None;
    }
    let holder = e.claimed_by.clone();
    let id = e.id.clone();
    let control = match (&holder, view.can_act) {
        (_, false) => view! {
            <span class="muted" data-testid="cannot-act">"Claiming and resolving need the operator role."</span>
        }
        .into_any(),
        (None, true) => view! {
            <ActionForm action=actions.claim attr:class="inline">
                <input type="hidden" name="id" value=id/>
                <button type="submit" class="primary">"Claim"</button>
            </ActionForm>
        }
        .into_any(),
        (Some(h), true) if *h == view.me => view! {
            <ActionForm action=actions.release attr:class="inline">
                <input type="hidden" name="id" value=id/>
                <button type="submit">"Release"</button>
            </ActionForm>
        }
        .into_any(),
        (Some(_), true) => ().into_any(),
    };
    Some(view! {
        <section class="card claim" data-testid="claim">
            <strong data-testid="claimed-by">{match &holder {
                Some(h) => format!("Claimed by {h}"),
                None => "Unclaimed".to_string(),
            }}</strong>
            " "
            {control}
            <ActionError value=actions.claim.value()/>
            <ActionError value=actions.release.value()/>
        </section>
    })
}

/// The run's guarded calls: unknown outcomes first, in red, each with its arguments and
/// its own settle form (keyed by the call, so nothing typed for one call can end up in
/// another's form when the list changes); then what the ledger shows was done, with
/// external ids, as evidence beside what the agent claims below.
#[component]
fn LedgerCalls(view: EscalationView, actions: Actions) -> impl IntoView {
    if view.calls.is_empty() {
        return None;
    }
    let (unknown, done): (Vec<_>, Vec<_>) = view.calls.into_iter().partition(|c| c.state == EntryState::Unknown);
    let can_act = view.can_act;
    let irreversible = view.irreversible_calls;
    let count = unknown.len();
    Some(view! {
        <section class="panel" data-testid="ledger-calls">
            <h2>"From the execution ledger"</h2>
            {(!unknown.is_empty()).then(|| view! {
                <div class="callout danger" data-testid="unknown-outcomes">
                    <h3>{format!("{count} call{} of unknown outcome: did {} happen?", if count == 1 { "" } else { "s" }, if count == 1 { "it" } else { "they" })}</h3>
                    <p class="small">"Each started and never reported. Look for its natural key in the system it calls, then settle it: the agent is told already_done if it happened, and may run it again if it did not."</p>
                    <ul class="unknown-calls">
                        <For each=move || unknown.clone() key=|c| c.id.clone() let:c>
                            <UnknownCall irreversible=irreversible.contains(&c.id) c can_act settle=actions.settle/>
                        </For>
                    </ul>
                    <ActionError value=actions.settle.value()/>
                </div>
            })}
            {(!done.is_empty()).then(|| view! {
                <h3>"Done, by the ledger (evidence)"</h3>
                <div class="table-scroll">
                <table class="grid" data-testid="ledger-done">
                    <thead><tr><th>"Step"</th><th>"Tool"</th><th>"External id"</th><th>"Idempotency key"</th><th>"Completed"</th></tr></thead>
                    <tbody>
                        {done.into_iter().map(|c| view! {
                            <tr>
                                <td>{c.step_index}</td>
                                <td><code>{c.tool.clone()}</code></td>
                                <td><code>{c.external_id.clone().unwrap_or_default()}</code></td>
                                <td><code>{c.idempotency_key.clone()}</code></td>
                                <td>{c.completed_at.map(|t| format_utc(&t)).unwrap_or_default()}
                                    {c.settled_by.clone().map(|by| format!(" (settled by {by})"))}</td>
                            </tr>
                        }).collect_view()}
                    </tbody>
                </table>
                </div>
            })}
        </section>
    })
}

/// One call of unknown outcome: what it was asked to do, and, for an operator, the two
/// answers. The external id belongs to "It happened" only; a call that cannot be undone
/// asks the operator to confirm they checked.
#[component]
fn UnknownCall(c: LedgerEntry, irreversible: bool, can_act: bool, settle: ServerAction<SettleCall>) -> impl IntoView {
    let arguments = serde_json::to_string_pretty(&c.arguments).unwrap_or_default();
    let (id, id2) = (c.id.clone(), c.id.clone());
    view! {
        <li data-testid="unknown-call" data-call=c.id.clone()>
            <p>
                <code>{c.tool.clone()}</code> " step " {c.step_index} " · natural key " <code>{c.natural_key.clone()}</code>
                " · started " {format_utc(&c.started_at)}
                {irreversible.then(|| view! { " " <Tag kind="effect" value="irreversible"/> })}
            </p>
            <details class="call-arguments" open>
                <summary>"Arguments"</summary>
                <ExactText text=arguments testid="unknown-call-arguments"/>
            </details>
            {can_act.then(|| view! {
                <div class="settle-forms">
                    <ActionForm action=settle attr:class="settle-form" attr:data-testid="settle-happened">
                        <input type="hidden" name="id" value=id/>
                        <input type="hidden" name="happened" value="yes"/>
                        <label>"External id, if known"
                            <input type="text" name="external_id" placeholder="e.g. msg_42" maxlength="200" autocomplete="off"/>
                        </label>
                        {irreversible.then(|| view! {
                            <label class="check"><input type="checkbox" name="confirm" value="yes" required/>
                                " I checked: it happened (the agent will not run it again)"</label>
                        })}
                        <button type="submit" class="primary">"It happened"</button>
                    </ActionForm>
                    <ActionForm action=settle attr:class="settle-form" attr:data-testid="settle-not-done">
                        <input type="hidden" name="id" value=id2/>
                        <input type="hidden" name="happened" value="no"/>
                        {irreversible.then(|| view! {
                            <label class="check"><input type="checkbox" name="confirm" value="yes" required/>
                                " I checked: it did not happen (the agent may run it again, and it cannot be undone)"</label>
                        })}
                        <button type="submit">"It did not"</button>
                    </ActionForm>
                </div>
            })}
        </li>
    }
}

/// Every call of unknown outcome, in one line: "2 calls of unknown outcome: send_email
/// (step 3), charge_card (step 4)".
fn unknown_headline(unknown: &[LedgerEntry]) -> String {
    let calls: Vec<String> = unknown.iter().map(|c| format!("{} (step {})", c.tool, c.step_index)).collect();
    let n = calls.len();
    format!("{n} call{} of unknown outcome to settle: {}", if n == 1 { "" } else { "s" }, calls.join(", "))
}

fn done_row(item: &DoneItem) -> impl IntoView {
    view! {
        <td><code>{item.tool.clone().unwrap_or_default()}</code></td>
        <td>{item.description.clone().unwrap_or_default()}</td>
        <td><code>{item.external_id.clone().unwrap_or_default()}</code></td>
        <td><code>{item.idempotency_key.clone().unwrap_or_default()}</code></td>
    }
}

fn observed_row(call: &ToolCallView) -> impl IntoView {
    view! {
        <td><code>{call.tool.clone()}</code> " " <Tag kind="effect" value=call.side_effect.as_str()/></td>
        <td><code>{call.external_id.clone().unwrap_or_default()}</code></td>
        <td><code>{call.idempotency_key.clone().unwrap_or_default()}</code></td>
        <td>{call.started_at.map(|t| format_utc(&t)).unwrap_or_default()}</td>
    }
}

#[component]
fn Evidence(view: EscalationView) -> impl IntoView {
    let ev = view.evidence;
    let observed_head =
        || view! { <tr><th>"Tool"</th><th>"External id"</th><th>"Idempotency key"</th><th>"When"</th></tr> };
    view! {
        <section class="panel" data-testid="what-was-done">
            <h2>"What was done"</h2>
            {ev.observed_only.then(|| view! {
                <p class="notice" data-testid="observed-only">
                    "The agent did not say what it did. These side effects were observed in the run's traces:"
                </p>
            })}
            {(!ev.observed_not_claimed.is_empty()).then(|| view! {
                <div class="callout danger" data-testid="observed-not-claimed">
                    <h3>{if ev.observed_only { "Observed side effects" } else { "Observed but not claimed: the agent did not mention these" }}</h3>
                    <table class="grid">
                        <thead>{observed_head()}</thead>
                        <tbody>{ev.observed_not_claimed.iter().map(|c| view! { <tr>{observed_row(c)}</tr> }).collect_view()}</tbody>
                    </table>
                </div>
            })}
            {(!ev.claimed_and_observed.is_empty()).then(|| view! {
                <h3>"Claimed and observed"</h3>
                <table class="grid" data-testid="claimed-and-observed">
                    <thead><tr><th>"Tool"</th><th>"Description"</th><th>"External id"</th><th>"Idempotency key"</th><th>"Observed call"</th></tr></thead>
                    <tbody>
                        {ev.claimed_and_observed.iter().map(|(item, call)| view! {
                            <tr>{done_row(item)}<td><code>{call.tool.clone()}</code> " " <code>{call.external_id.clone().unwrap_or_default()}</code></td></tr>
                        }).collect_view()}
                    </tbody>
                </table>
            })}
            {(!ev.claimed_not_observed.is_empty()).then(|| view! {
                <h3>"Claimed but not observed in the traces"</h3>
                <table class="grid warn" data-testid="claimed-not-observed">
                    <thead><tr><th>"Tool"</th><th>"Description"</th><th>"External id"</th><th>"Idempotency key"</th></tr></thead>
                    <tbody>{ev.claimed_not_observed.iter().map(|item| view! { <tr>{done_row(item)}</tr> }).collect_view()}</tbody>
                </table>
            })}
            {(ev.claimed_and_observed.is_empty() && ev.claimed_not_observed.is_empty() && ev.observed_not_claimed.is_empty())
                .then(|| view! { <p class="muted">"Nothing was reported or observed as done."</p> })}
        </section>
    }
}

#[component]
fn Remaining(view: EscalationView, actions: Actions, mine: bool) -> impl IntoView {
    let e = view.escalation;
    let can_tick = e.open && mine;
    let id = e.id.clone();
    let items = e.what_remains.clone();
    let nothing = items.is_empty();
    view! {
        <section class="panel" data-testid="what-remains">
            <h2>"What remains"</h2>
            {if nothing {
                view! { <p class="muted">"The agent listed nothing that remains."</p> }.into_any()
            } else {
                view! {
                    <ul class="checklist">
                        {items.into_iter().enumerate().map(|(i, item)| {
                            let done = item.done;
                            let id = id.clone();
                            let label = format!("Mark “{}” {}", item.description, if done { "not done" } else { "done" });
                            let control = if can_tick {
                                view! {
                                    <ActionForm action=actions.tick attr:class="inline">
                                        <input type="hidden" name="id" value=id/>
                                        <input type="hidden" name="index" value=i.to_string()/>
                                        <input type="hidden" name="done" value=if done { "false" } else { "true" }/>
                                        <button type="submit" class="tick" aria-pressed=if done { "true" } else { "false" }
                                            aria-label=label>
                                            {if done { "☑" } else { "☐" }}
                                        </button>
                                    </ActionForm>
                                }.into_any()
                            } else {
                                view! { <span class="tick">{if done { "☑" } else { "☐" }}</span> }.into_any()
                            };
                            view! {
                                <li class:done=done data-item=i.to_string()>
                                    {control}
                                    " " <span>{item.description.clone()}</span>
                                    {item.done_by.clone().map(|by| view! { <span class="muted small">{format!(" · done by {by}")}</span> })}
                                </li>
                            }
                        }).collect_view()}
                    </ul>
                }.into_any()
            }}
            {(e.open && !mine && view.can_act && !e.what_remains.is_empty())
                .then(|| view! { <p class="muted small">"Claim the escalation to tick items."</p> })}
            <ActionError value=actions.tick.value()/>
        </section>
    }
}

/// Resolving is for the holder of the claim; an administrator may resolve over it, as an
/// explicit and audited choice. Open checklist items are named and must be confirmed.
#[component]
fn Resolve(view: EscalationView, actions: Actions, mine: bool) -> impl IntoView {
    let e = view.escalation;
    let overriding = !mine && view.can_override;
    if !mine && !overriding {
        return Some(
            view! {
                <section class="card" data-testid="resolve">
                    <h2>"Resolve"</h2>
                    <p class="muted" data-testid="resolve-needs-claim">{match &e.claimed_by {
                        None => "Claim the escalation to resolve it.".to_string(),
                        Some(h) => format!("{h} holds the claim; only they (or an administrator) can resolve it."),
                    }}</p>
                </section>
            }
            .into_any(),
        );
    }
    let open: Vec<String> = e.what_remains.iter().filter(|i| !i.done).map(|i| i.description.clone()).collect();
    let form = NodeRef::<leptos::html::Form>::new();
    Some(view! {
        <section class="card" data-testid="resolve">
            <h2>"Resolve"</h2>
            <ActionForm action=actions.resolve attr:class="form" node_ref=form>
                <input type="hidden" name="id" value=e.id.clone()/>
                {overriding.then(|| view! {
                    <div class="callout warn" data-testid="override">
                        <label class="check">
                            <input type="checkbox" name="override_claim" value="on" required/>
                            {match &e.claimed_by {
                                Some(h) => format!(" Resolve over {h}'s claim, as administrator (recorded in the audit log)"),
                                None => " Resolve without claiming it, as administrator (recorded in the audit log)".to_string(),
                            }}
                        </label>
                    </div>
                })}
                {(!open.is_empty()).then(|| view! {
                    <div class="callout warn" data-testid="open-items">
                        <p>{format!("{} checklist item(s) are still open:", open.len())}</p>
                        <ul>{open.iter().map(|d| view! { <li>{d.clone()}</li> }).collect_view()}</ul>
                        <label class="check">
                            <input type="checkbox" name="accept_open_items" value="on" required/>
                            " Resolve with these items open"
                        </label>
                    </div>
                })}
                <label>"Outcome"
                    <select name="outcome">
                        {Resolution::ALL.iter().map(|o| view! { <option value=o.as_str()>{o.as_str().replace('_', " ")}</option> }).collect_view()}
                    </select>
                </label>
                <label>"Note (required)" <textarea name="note" required maxlength="5000" rows="2"></textarea></label>
                <label>"Instructions for the agent (required when handing back)"
                    <textarea name="instructions" maxlength="5000" rows="2"></textarea>
                </label>
                <button type="submit" class="primary">"Resolve"</button>
                <ActionError value=actions.resolve.value()/>
            </ActionForm>
        </section>
    }.into_any())
}

#[component]
fn Outcome(view: EscalationView) -> impl IntoView {
    let e = view.escalation;
    let outcome = e.outcome?;
    Some(view! {
        <section class="card outcome" data-testid="outcome">
            <p><strong>{format!("Resolved as {} by {} at {}", outcome.as_str().replace('_', " "),
                e.resolved_by.clone().unwrap_or_default(), e.resolved_at.map(|t| format_utc(&t)).unwrap_or_default())}</strong></p>
            <p>{e.resolution_note.clone().unwrap_or_default()}</p>
            {e.instructions.clone().map(|i| view! { <p>"Instructions for the agent: " {i}</p> })}
        </section>
    })
}

#[component]
fn Timeline(view: EscalationView, actions: Actions) -> impl IntoView {
    let id = view.escalation.id.clone();
    // A posted note leaves the box empty for the next one.
    let note_form = NodeRef::<leptos::html::Form>::new();
    Effect::new(move |_| {
        if matches!(actions.note.value().get(), Some(Ok(()))) {
            if let Some(form) = note_form.get() {
                form.reset();
            }
        }
    });
    view! {
        <section class="panel" data-testid="timeline">
            <h2>"Timeline"</h2>
            <ol class="timeline">
                {view.timeline.into_iter().map(|t| view! {
                    <li>
                        <span class="muted small">{format_utc(&t.at)}</span> " "
                        <strong>{t.actor.clone().unwrap_or_else(|| "flightdeck".into())}</strong> " "
                        {t.kind.replace('_', " ")}
                        {t.detail.clone().map(|d| view! { ": " <span>{d}</span> })}
                    </li>
                }).collect_view()}
            </ol>
            {view.can_act.then(|| view! {
                <ActionForm action=actions.note attr:class="inline-form" node_ref=note_form>
                    <input type="hidden" name="id" value=id.clone()/>
                    <label>"Add a note" <input type="text" name="note" required maxlength="5000"/></label>
                    <button type="submit">"Add note"</button>
                    <ActionError value=actions.note.value()/>
                </ActionForm>
            })}
        </section>
    }
}
