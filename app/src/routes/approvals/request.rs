//! One approval request (`/approvals/{id}`): first the exact payload the hash binds (tool
//! and every argument, verbatim and complete, as text, invisible characters marked), then
//! apart the agent's own description of it, held against the arguments (what it does not
//! show, what it shows differently), and, for someone holding the role the tool's policy
//! names, Approve and Deny. Both post the payload hash this page showed, so a decision can
//! only ever apply to what the approver read.

use crate::components::badges::Tag;
use crate::components::payload::{pretty_json, ExactInline, ExactText};
use crate::components::status::{ActionError, ErrorBox};
use crate::components::time::{ago, format_utc, Timestamp};
use crate::functions::approvals::{load_approval, ApprovalView, CancelApproval, DecideApproval};
use domain::approvals::{Approval, ApprovalStatus};
use domain::url::run_href;
use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn ApprovalPage() -> impl IntoView {
    // From the path, decoded once (see `path_id`).
    let id = crate::path_id::path_id("/approvals/");
    let decide = ServerAction::<DecideApproval>::new();
    let cancel = ServerAction::<CancelApproval>::new();
    crate::components::layout::refresh_nav_after(decide);
    crate::components::layout::refresh_nav_after(cancel);
    let request = Resource::new(
        move || (id.get(), decide.version().get(), cancel.version().get()),
        |(id, _, _)| load_approval(id),
    );
    view! {
        <Title text="Approval request"/>
        <Transition fallback=|| view! { <p class="loading">"Loading request…"</p> }>
            {move || Suspend::new(async move {
                match request.await {
                    Ok(view) => view! { <Request view decide cancel/> }.into_any(),
                    Err(error) => view! { <ErrorBox error/> }.into_any(),
                }
            })}
        </Transition>
    }
}

#[component]
fn Request(
    view: ApprovalView,
    decide: ServerAction<DecideApproval>,
    cancel: ServerAction<CancelApproval>,
) -> impl IntoView {
    let a = view.approval.clone();
    let status = a.status;
    let pending = status == ApprovalStatus::Pending;
    view! {
        <p class="breadcrumb"><a href="/approvals">"Approvals"</a> " / " <code>{a.id.clone()}</code></p>
        <h1>
            {if pending { "Run " } else { "Request to run " }}
            <code><ExactInline text=a.tool.clone()/></code>
            {if pending { "?" } else { "" }}
            " " <span data-testid="approval-status"><Tag kind="approval" value=status.as_str()/></span>
        </h1>
        <Facts a=a.clone() view=view.clone()/>
        <Outcome a=a.clone()/>
        <EditHistory a=a.clone()/>
        <Payload a=a.clone()/>
        <AgentDescription a=a.clone()/>
        {pending.then(|| view! { <Decide a=a.clone() view=view.clone() decide/> })}
        {(pending && view.can_cancel).then(|| view! { <CancelRequest id=a.id.clone() cancel/> })}
    }
}

/// What approvers changed before approving, each change with who made it, and what the
/// agent asked for: whoever approves after an edit must see that they approve a person's
/// change, not the agent's request.
#[component]
fn EditHistory(a: Approval) -> impl IntoView {
    let original = a.original_arguments.clone()?;
    let pending = a.status == ApprovalStatus::Pending;
    let edits = a.edits.clone();
    let legacy = a.changes.clone().filter(|_| edits.is_empty());
    Some(view! {
        <section class="card callout warn edit-history" data-testid="edit-history">
            <h2>{if pending {
                "Changed by an approver: what will run is not what the agent asked for"
            } else {
                "Changed by an approver before it was approved"
            }}</h2>
            <ol class="edits">
                {edits.into_iter().map(|e| view! {
                    <li data-testid="edit">
                        <strong data-testid="edit-by">{e.username.clone()}</strong> " changed it " <Timestamp at=e.at/> ":"
                        <ExactText text=e.changes.clone() testid="edit-changes"/>
                    </li>
                }).collect_view()}
                {legacy.map(|changes| view! { <li data-testid="edit"><ExactText text=changes testid="edit-changes"/></li> })}
            </ol>
            <details class="small">
                <summary>"What the agent asked for"</summary>
                <ExactText text=pretty_json(&original) testid="original-arguments"/>
                <p class="muted small">"Payload SHA-256 as asked: " <code>{a.original_payload_sha256.clone().unwrap_or_default()}</code></p>
            </details>
        </section>
    })
}

/// What the hash binds: the tool and its arguments, first and complete. Each argument is a
/// field of its own (the ones the agent's description names first, in its order, then
/// short values, then long ones), its text verbatim with its line breaks; the exact JSON
/// the hash covers is one click away.
#[component]
fn Payload(a: Approval) -> impl IntoView {
    let pending = a.status == ApprovalStatus::Pending;
    let redacted = a.arguments.contains(domain::canonical::REDACTED);
    let hidden = crate::components::payload::has_hidden_characters(&a.arguments);
    let arguments: serde_json::Value = serde_json::from_str(&a.arguments).unwrap_or(serde_json::Value::Null);
    let fields = argument_fields(&arguments, &a.display);
    view! {
        <section class="card payload" data-testid="payload">
            <h2>{if pending { "Exactly what will run" } else { "The payload this decision is bound to" }}</h2>
            <p class="muted small">
                "Shown verbatim and complete. Markers stand for characters you could not otherwise see: "
                <span class="invisible-char">"⇥"</span> " tab, " <span class="invisible-char">"·"</span>
                " trailing space, " <span class="invisible-char">"⍽"</span> " no-break space, "
                <span class="invisible-char">"[U+…]"</span> " invisible, control or look-alike space character."
            </p>
            {hidden.then(|| view! {
                <p class="callout warn" data-testid="hidden-characters">
                    "These arguments contain characters you cannot see (marked in red below). "
                    "Read every marked value before deciding."
                </p>
            })}
            <dl class="arguments" data-testid="argument-fields">
                <dt>"Tool"</dt>
                <dd><code data-testid="tool"><ExactInline text=a.tool.clone()/></code></dd>
                {match fields {
                    Some(fields) => fields.into_iter().map(|(name, value)| view! {
                        <dt data-testid="argument-name"><ExactInline text=name/></dt>
                        <dd data-testid="argument-value"><ExactText text=value/></dd>
                    }).collect_view().into_any(),
                    // Not an object: the arguments as one value.
                    None => view! {
                        <dt>"Arguments"</dt>
                        <dd><ExactText text=pretty_json(&a.arguments)/></dd>
                    }.into_any(),
                }}
            </dl>
            {redacted.then(|| view! {
                <p class="muted small" data-testid="redacted-note">
                    "Values shown as [REDACTED] held a credential. Flightdeck does not store it; "
                    "the hash below binds the value the agent sent."
                </p>
            })}
            <details class="exact-json">
                <summary>"The exact JSON the hash covers"</summary>
                <ExactText text=pretty_json(&a.arguments) testid="arguments"/>
            </details>
            <p class="muted small">
                "Payload SHA-256 (tool and arguments): " <code data-testid="payload-sha">{a.payload_sha256.clone()}</code>
            </p>
        </section>
    }
}

/// The arguments of an object as (name, text) fields in reading order: those the agent's
/// description names, in its order; then short one-line values; then the long ones.
/// Strings are shown as they are (line breaks kept), anything else as pretty JSON. `None`
/// when the arguments are not an object.
fn argument_fields(
    arguments: &serde_json::Value,
    display: &[domain::approvals::DisplayField],
) -> Option<Vec<(String, String)>> {
    let map = arguments.as_object()?;
    let text = |v: &serde_json::Value| match v {
        serde_json::Value::String(s) => s.clone(),
        other => serde_json::to_string_pretty(other).unwrap_or_default(),
    };
    let named: Vec<&str> = display
        .iter()
        .filter_map(|f| f.argument.as_deref())
        .map(|p| p.trim_start_matches('/').split(['.', '/']).next().unwrap_or(p))
        .chain(display.iter().map(|f| f.label.as_str()))
        .collect();
    let rank = |key: &str, value: &str| -> (usize, usize) {
        let said = named.iter().position(|n| n.eq_ignore_ascii_case(key));
        match said {
            Some(at) => (0, at),
            None if value.chars().count() <= 80 && !value.contains('\n') => (1, 0),
            None => (2, 0),
        }
    };
    let mut fields: Vec<(String, String)> = map.iter().map(|(k, v)| (k.clone(), text(v))).collect();
    // A stable sort keeps the canonical (alphabetical) order within each group.
    fields.sort_by_key(|(k, v)| rank(k, v));
    Some(fields)
}

/// The agent's own summary of the call, apart from what runs and held against it.
#[component]
fn AgentDescription(a: Approval) -> impl IntoView {
    if a.display.is_empty() {
        return None;
    }
    let arguments: serde_json::Value = serde_json::from_str(&a.arguments).unwrap_or(serde_json::Value::Null);
    let report = domain::approvals::display::compare(&arguments, &a.display);
    let clean = report.is_clean();
    Some(view! {
        <section class="card agent-description" data-testid="agent-description">
            <h2>"The agent's own description"</h2>
            <p class="muted small">
                "Written by the agent to summarise the call. It is not what runs: the arguments above are."
            </p>
            {(!clean).then(|| view! { <DisplayWarnings report=report.clone()/> })}
            <dl class="display-fields" data-testid="display-fields">
                {a.display.iter().map(|f| view! {
                    <dt><ExactInline text=f.label.clone()/></dt>
                    <dd><ExactText text=f.value.clone()/></dd>
                }).collect_view()}
            </dl>
        </section>
    })
}

/// What the agent's description leaves out or gets wrong. A value it contradicts (after
/// reading amounts as numbers) is a danger; a field that describes no argument is a
/// warning; arguments it does not show are listed plainly, since a summary rarely shows
/// every field and the arguments above are what runs.
#[component]
fn DisplayWarnings(report: domain::approvals::display::DisplayReport) -> impl IntoView {
    view! {
        <div class="display-report" data-testid="display-warnings">
        {(!report.differing.is_empty()).then(|| view! {
            <div class="callout danger" data-testid="contradictions">
                <h3>"The description contradicts the arguments"</h3>
                <ul data-testid="differing-values">
                    {report.differing.iter().map(|d| view! {
                        <li>
                            <strong><ExactInline text=d.label.clone()/></strong>
                            " shows " <code><ExactInline text=d.shown.clone()/></code>
                            ", but " <code><ExactInline text=d.path.clone()/></code>
                            " is " <code><ExactInline text=d.actual.clone()/></code>
                        </li>
                    }).collect_view()}
                </ul>
            </div>
        })}
        {(!report.unmatched.is_empty()).then(|| view! {
            <p class="callout warn" data-testid="unmatched-fields">"Fields of the description that match no argument: "
                {report.unmatched.iter().map(|l| view! { <code><ExactInline text=l.clone()/></code> " " }).collect_view()}
            </p>
        })}
        {(!report.unshown.is_empty()).then(|| view! {
            <div class="unshown" data-testid="unshown-arguments">
                <p class="muted small">"Also in the arguments, not in the description:"</p>
                <ul class="small">
                    {report.unshown.iter().map(|(path, value)| view! {
                        <li><code><ExactInline text=path.clone()/></code> ": " <ExactInline text=preview_text(value)/></li>
                    }).collect_view()}
                </ul>
            </div>
        })}
        </div>
    }
}

/// A value on one line, cut after 120 characters (the payload above shows all of it).
fn preview_text(value: &str) -> String {
    let line: String = value.chars().map(|c| if c == '\n' { ' ' } else { c }).collect();
    match line.char_indices().nth(120) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line,
    }
}

#[component]
fn CancelRequest(id: String, cancel: ServerAction<CancelApproval>) -> impl IntoView {
    view! {
        <section class="card" data-testid="cancel">
            <h2>"Cancel the request"</h2>
            <p class="muted small">"As an administrator you can withdraw this request; the waiting agent is told it was cancelled."</p>
            <ActionError value=cancel.value()/>
            <ActionForm action=cancel attr:class="form">
                <input type="hidden" name="id" value=id/>
                <label>"Note for the audit log (optional)" <input type="text" name="reason" maxlength="500"/></label>
                <button type="submit" class="danger">"Cancel request"</button>
            </ActionForm>
        </section>
    }
}

#[component]
fn Facts(a: Approval, view: ApprovalView) -> impl IntoView {
    let trace = if view.run_known {
        view! { <a href=run_href(&a.run_id) data-testid="run-link">"Open the run's trace so far"</a> }.into_any()
    } else {
        view! { <span class="muted">"No spans of this run have arrived yet."</span> }.into_any()
    };
    view! {
        <dl class="facts">
            <dt>"Requested"</dt>
            <dd><Timestamp at=a.created_at/> " (" {ago(&a.created_at, &view.now)} ")"</dd>
            <dt>"Expires"</dt>
            <dd><Timestamp at=a.expires_at/>
                {(a.status == domain::approvals::ApprovalStatus::Pending).then(|| format!(" ({})", time_left(&a.expires_at, &view.now)))}
            </dd>
            {a.use_by.map(|t| view! { <dt>"Must be used by"</dt><dd><Timestamp at=t/></dd> })}
            <dt>"Agent"</dt>
            <dd><ExactInline text=a.agent.clone().unwrap_or_else(|| "—".into())/> <span class="muted small">" via token " <ExactInline text=a.requested_by.clone()/></span></dd>
            <dt>"Run"</dt>
            <dd><code><ExactInline text=a.run_id.clone()/></code> {a.step_index.map(|s| format!(" · step {s}"))} " · " {trace}</dd>
            <dt>"Side effect"</dt>
            <dd><Tag kind="effect" value=a.side_effect.as_str()/></dd>
            <dt>"Who may decide"</dt>
            <dd>{format!("role {}", a.required_role)}</dd>
            {a.idempotency_key.clone().map(|k| view! { <dt>"Idempotency key"</dt><dd><code><ExactInline text=k/></code></dd> })}
        </dl>
    }
}

/// "12 min left", or "expired", for a pending request.
fn time_left(expires_at: &chrono::DateTime<chrono::Utc>, now: &chrono::DateTime<chrono::Utc>) -> String {
    let secs = (*expires_at - *now).num_seconds();
    match secs {
        s if s <= 0 => "expired".into(),
        s if s < 60 => format!("{s} s left"),
        s if s < 3600 => format!("{} min left", s / 60),
        s if s < 86_400 => format!("{} h {} min left", s / 3600, (s % 3600) / 60),
        s => format!("{} d left", s / 86_400),
    }
}

/// Everyone who approved the payload that runs, in order ("alice and bob"), or the one
/// decider recorded when no votes were kept.
fn approvers(a: &Approval, decided_by: &str) -> String {
    match a.approved_by.as_slice() {
        [] => decided_by.to_string(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// The decision, once there is one.
#[component]
fn Outcome(a: Approval) -> impl IntoView {
    let when = a.decided_at.map(|t| format_utc(&t)).unwrap_or_default();
    let who = a.decided_by.clone().unwrap_or_default();
    let text = match a.status {
        ApprovalStatus::Pending => return None,
        ApprovalStatus::Approved => format!("Approved by {} at {when}.", approvers(&a, &who)),
        ApprovalStatus::ApprovedWithChanges => format!("Approved with changes by {} at {when}.", approvers(&a, &who)),
        ApprovalStatus::Denied => format!("Denied by {who} at {when}."),
        ApprovalStatus::Expired => format!("Expired at {when} without a decision."),
        ApprovalStatus::Cancelled if who.starts_with("user:") => {
            format!("Cancelled by {} at {when}.", who.trim_start_matches("user:"))
        }
        ApprovalStatus::Cancelled => format!("Cancelled by the agent at {when}."),
    };
    let used = a.used_by_span.clone();
    Some(view! {
        <section class=format!("card outcome outcome-{}", a.status.as_str()) data-testid="outcome">
            <p><strong>{text}</strong></p>
            {a.reason.clone().map(|r| view! {
                <p>"Reason:"</p>
                <ExactText text=r testid="decision-reason"/>
            })}
            {a.respond.clone().map(|r| view! { <p>"Message to the agent:"</p><ExactText text=r testid="respond"/> })}
            {a.rule_name.clone().filter(|_| a.decided_by.as_deref().is_some_and(|d| d.starts_with("rule:"))).map(|r| view! {
                <p class="muted small">"Decided by the approval rule " <a href="/admin/rules"><code>{r}</code></a> "."</p>
            })}
            {a.escalation_id.clone().map(|e| view! {
                <p>"An escalation was opened for a person to take over: " <a href=format!("/escalations/{}", domain::url::encode(&e))><code>{e.clone()}</code></a></p>
            })}
            {used.map(|span| view! { <p class="muted small">"Executed by span " <code>{span}</code></p> })}
        </section>
    })
}

/// The decision: Approve and Deny in a bar that stays on the screen while the approver
/// reads. Approve submits the approve form, with the arguments as they stand in its editor
/// (unchanged: the payload as asked), and says which it approves; Deny needs a reason
/// and goes to the deny form. Someone who may not approve is told why, in the bar.
#[component]
fn Decide(a: Approval, view: ApprovalView, decide: ServerAction<DecideApproval>) -> impl IntoView {
    if !view.can_decide {
        let why =
            format!("Deciding this request needs the {} role, which your account does not have.", a.required_role);
        return view! {
            <p class="card notice" data-testid="cannot-decide">{why.clone()}</p>
            <div class="decision-bar" data-testid="decision-bar"><span class="why">{why}</span></div>
        }
        .into_any();
    }
    let (id, sha) = (a.id.clone(), a.payload_sha256.clone());
    let (id2, sha2) = (a.id.clone(), a.payload_sha256.clone());
    let editable = !a.arguments.contains(domain::canonical::REDACTED);
    let pretty = pretty_json(&a.arguments);
    let original = pretty.clone();
    let edited = RwSignal::new(false);
    // After a refused approval the page refetches and this view is rebuilt in place: the
    // editor keeps what the approver typed meanwhile, while `edited` starts again. Read
    // the editor back once mounted, so the button never says "this exact payload" over
    // an edited one.
    let editor = NodeRef::<leptos::html::Textarea>::new();
    let original_for_editor = original.clone();
    Effect::new(move |_| {
        if let Some(el) = editor.get() {
            edited.set(el.value().trim() != original_for_editor.trim());
        }
    });
    let blocked = if view.own_run {
        Some("This run acts for you (its enduser.id): another person must approve it. You may deny it.")
    } else if view.already_approved {
        Some("You approved this payload; it needs another person's approval.")
    } else {
        None
    };
    let changed_by = a.edits.last().map(|e| e.username.clone());
    let approve_label = move || match (edited.get(), &changed_by) {
        (true, _) => "Approve the edited payload".to_string(),
        (false, Some(by)) => format!("Approve the payload as {by} changed it"),
        (false, None) => "Approve this exact payload".to_string(),
    };
    view! {
        <section class="card decide" data-testid="decide" id="decide">
            <h2>"Decision"</h2>
            {(a.required_approvals > 1).then(|| view! {
                <p data-testid="approvals-needed">
                    <strong>{format!("{} of {} approvals", a.approved_by.len(), a.required_approvals)}</strong>
                    {(!a.approved_by.is_empty()).then(|| format!(" (approved by {})", a.approved_by.join(", ")))}
                    ": each approver must be a different person, approving this same payload."
                </p>
            })}
            {blocked.map(|text| view! { <p class="callout warn" data-testid="approve-blocked">{text}</p> })}
            <div>
                <ActionError value=decide.value()/>
            </div>
            <div class="decide-forms">
                {blocked.is_none().then(|| view! {
                    <ActionForm action=decide attr:class="form" attr:data-testid="approve-form" attr:id="approve-form">
                        <input type="hidden" name="id" value=id/>
                        <input type="hidden" name="payload_sha256" value=sha/>
                        <input type="hidden" name="decision" value="approve"/>
                        {if editable {
                            view! {
                                <details class="edit-arguments" data-testid="edit-arguments">
                                    <summary>"Edit the arguments before approving"</summary>
                                    <p class="muted small">
                                        "Change the JSON below and approve: the agent gets the edited arguments and must run "
                                        "exactly those (their own hash). Left unchanged, this approves the payload as asked."
                                    </p>
                                    <textarea name="arguments" rows="8" spellcheck="false" class="mono" data-testid="arguments-input" node_ref=editor
                                        on:input=move |ev| edited.set(event_target_value(&ev).trim() != original.trim())>{pretty}</textarea>
                                    {view.arguments_schema.clone().map(|schema| view! {
                                        <details class="small"><summary>"The schema edits must match"</summary><pre class="exact">{schema}</pre></details>
                                    })}
                                    <label>"Message to the agent (optional)"
                                        <textarea name="respond" maxlength="2000" rows="2" data-testid="respond-approve"></textarea>
                                    </label>
                                </details>
                            }.into_any()
                        } else {
                            view! { <p class="muted small">"These arguments hold a credential Flightdeck does not store, so they cannot be edited here."</p> }.into_any()
                        }}
                    </ActionForm>
                })}
                <ActionForm action=decide attr:class="form" attr:data-testid="deny-form" attr:id="deny-form">
                    <input type="hidden" name="id" value=id2/>
                    <input type="hidden" name="payload_sha256" value=sha2/>
                    <input type="hidden" name="decision" value="deny"/>
                    <label>"Reason (required to deny; the agent reads it)"
                        <textarea name="reason" required maxlength="2000" rows="2" id="deny-reason"></textarea>
                    </label>
                    <label>"What the agent should do instead (optional)"
                        <textarea name="respond" maxlength="2000" rows="2"></textarea>
                    </label>
                    <button type="submit" class="danger">"Deny"</button>
                </ActionForm>
            </div>
        </section>
        <div class="decision-bar" data-testid="decision-bar">
            {match blocked {
                None => view! {
                    <button type="submit" form="approve-form" class="primary" data-testid="approve-button">{approve_label}</button>
                }.into_any(),
                Some(why) => view! { <span class="why">{why}</span> }.into_any(),
            }}
            <a href="#deny-reason" class="button" data-testid="deny-link">"Deny…"</a>
        </div>
    }
    .into_any()
}
