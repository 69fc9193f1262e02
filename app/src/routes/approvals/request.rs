//! One approval request (`/approvals/{id}`): the exact payload (every display field and
//! every argument, verbatim and complete, as text) and, for someone holding the role the
//! tool's policy names, Approve and Deny. Both post the payload hash this page showed, so
//! a decision can only ever apply to what the approver read.

use crate::approvals::{Approval, ApprovalStatus};
use crate::components::badges::Tag;
use crate::components::payload::{pretty_json, ExactText};
use crate::components::status::{ActionError, ErrorBox};
use crate::components::time::{ago, format_utc, Timestamp};
use crate::components::url::run_href;
use crate::functions::approvals::{load_approval, ApprovalView, DecideApproval};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_params_map;

#[component]
pub fn ApprovalPage() -> impl IntoView {
    let params = use_params_map();
    let id = Memo::new(move |_| params.with(|p| p.get("id").unwrap_or_default()));
    let decide = ServerAction::<DecideApproval>::new();
    let request = Resource::new(move || (id.get(), decide.version().get()), |(id, _)| load_approval(id));
    view! {
        <Title text="Approval request"/>
        <Transition fallback=|| view! { <p class="loading">"Loading request…"</p> }>
            {move || Suspend::new(async move {
                match request.await {
                    Ok(view) => view! { <Request view decide/> }.into_any(),
                    Err(error) => view! { <ErrorBox error/> }.into_any(),
                }
            })}
        </Transition>
    }
}

#[component]
fn Request(view: ApprovalView, decide: ServerAction<DecideApproval>) -> impl IntoView {
    let a = view.approval.clone();
    let status = a.status;
    view! {
        <p class="breadcrumb"><a href="/approvals">"Approvals"</a> " / " <code>{a.id.clone()}</code></p>
        <h1>
            "Run " <code>{a.tool.clone()}</code> "?"
            " " <span data-testid="approval-status"><Tag kind="approval" value=status.as_str()/></span>
        </h1>
        <Facts a=a.clone() view=view.clone()/>
        <Outcome a=a.clone()/>
        <section class="card payload" data-testid="payload">
            <h2>"Exactly what will run"</h2>
            <p class="muted small">
                "Shown verbatim and complete. Markers stand for characters you could not otherwise see: "
                <span class="invisible-char">"⇥"</span> " tab, " <span class="invisible-char">"·"</span>
                " trailing space, " <span class="invisible-char">"⍽"</span> " no-break space, "
                <span class="invisible-char">"[U+…]"</span> " invisible or control character."
            </p>
            {(!a.display.is_empty()).then(|| view! {
                <dl class="display-fields" data-testid="display-fields">
                    {a.display.iter().map(|f| view! {
                        <dt>{f.label.clone()}</dt>
                        <dd><ExactText text=f.value.clone()/></dd>
                    }).collect_view()}
                </dl>
            })}
            <h3>"Arguments"</h3>
            <ExactText text=pretty_json(&a.arguments) testid="arguments"/>
            <p class="muted small">
                "Payload SHA-256 (tool and arguments): " <code data-testid="payload-sha">{a.payload_sha256.clone()}</code>
            </p>
        </section>
        {(status == ApprovalStatus::Pending).then(|| view! { <Decide a=a.clone() can_decide=view.can_decide decide/> })}
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
            <dd><Timestamp at=a.expires_at/></dd>
            <dt>"Agent"</dt>
            <dd>{a.agent.clone().unwrap_or_else(|| "—".into())} <span class="muted small">{format!(" via token {}", a.requested_by)}</span></dd>
            <dt>"Run"</dt>
            <dd><code>{a.run_id.clone()}</code> {a.step_index.map(|s| format!(" · step {s}"))} " · " {trace}</dd>
            <dt>"Side effect"</dt>
            <dd><Tag kind="effect" value=a.side_effect.as_str()/></dd>
            <dt>"Who may decide"</dt>
            <dd>{format!("role {}", a.required_role)}</dd>
            {a.idempotency_key.clone().map(|k| view! { <dt>"Idempotency key"</dt><dd><code>{k}</code></dd> })}
        </dl>
    }
}

/// The decision, once there is one.
#[component]
fn Outcome(a: Approval) -> impl IntoView {
    let when = a.decided_at.map(|t| format_utc(&t)).unwrap_or_default();
    let who = a.decided_by.clone().unwrap_or_default();
    let text = match a.status {
        ApprovalStatus::Pending => return None,
        ApprovalStatus::Approved => format!("Approved by {who} at {when}."),
        ApprovalStatus::Denied => format!("Denied by {who} at {when}."),
        ApprovalStatus::Expired => format!("Expired at {when} without a decision."),
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
            {used.map(|span| view! { <p class="muted small">"Executed by span " <code>{span}</code></p> })}
        </section>
    })
}

#[component]
fn Decide(a: Approval, can_decide: bool, decide: ServerAction<DecideApproval>) -> impl IntoView {
    if !can_decide {
        return view! {
            <p class="card notice" data-testid="cannot-decide">
                {format!("Deciding this request needs the {} role, which your account does not have.", a.required_role)}
            </p>
        }
        .into_any();
    }
    let (id, sha) = (a.id.clone(), a.payload_sha256.clone());
    let (id2, sha2) = (a.id.clone(), a.payload_sha256.clone());
    view! {
        <section class="card decide" data-testid="decide">
            <h2>"Decision"</h2>
            <ActionError value=decide.value()/>
            <div class="decide-forms">
                <ActionForm action=decide attr:class="inline" attr:data-testid="approve-form">
                    <input type="hidden" name="id" value=id/>
                    <input type="hidden" name="payload_sha256" value=sha/>
                    <input type="hidden" name="decision" value="approve"/>
                    <button type="submit" class="primary">"Approve this exact payload"</button>
                </ActionForm>
                <ActionForm action=decide attr:class="form" attr:data-testid="deny-form">
                    <input type="hidden" name="id" value=id2/>
                    <input type="hidden" name="payload_sha256" value=sha2/>
                    <input type="hidden" name="decision" value="deny"/>
                    <label>"Reason (required to deny; the agent reads it)"
                        <textarea name="reason" required maxlength="2000" rows="2"></textarea>
                    </label>
                    <button type="submit" class="danger">"Deny"</button>
                </ActionForm>
            </div>
        </section>
    }
    .into_any()
}
