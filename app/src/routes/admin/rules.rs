//! Approval rules (`/admin/rules`): the ordered `when <CEL expression> -> action` rules of
//! each tool policy, "try on history" before a rule is saved (what it would have done with
//! the last N days of requests, beside what people decided, every disagreement listed with
//! its payload), and each shadow rule's running report.

use super::AdminTabs;
use crate::components::payload::ExactInline;
use crate::components::status::{ActionError, ErrorBox};
use crate::components::time::format_utc;
use crate::functions::approval_rules::{load_rules, DeleteRule, RuleView, SaveRule, TryRule};
use crate::routes::approvals::approval_href;
use domain::approvals::rules::{HistoryReport, RuleAction, RuleMode, VARIABLES};
use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn RulesAdmin() -> impl IntoView {
    let save = ServerAction::<SaveRule>::new();
    let delete = ServerAction::<DeleteRule>::new();
    let tried = ServerAction::<TryRule>::new();
    let page = Resource::new(move || (save.version().get(), delete.version().get()), |_| load_rules());
    // The form reads the policies once, so a refused save keeps what was typed.
    let form = Resource::new(|| (), |_| load_rules());
    view! {
        <Title text="Approval rules"/>
        <h1>"Approval rules"</h1>
        <AdminTabs/>
        <p class="muted small">
            "Each tool policy's rules are tried in order on every approval request; the first " <em>"enforced"</em>
            " rule whose expression is true decides: " <code>"auto_approve"</code> " (recorded as decided by "
            <code>"rule:<name>"</code> "), " <code>"require_approval"</code> " (N distinct approvers of a role) or "
            <code>"deny"</code> " (with a reason for the agent). A rule in " <em>"shadow"</em>
            " mode only records what it would have done. Expressions are "
            <a href="https://github.com/google/cel-spec/blob/master/doc/langdef.md">"CEL"</a> "; an expression that "
            "fails on a request (a missing field) does not match: guard optional fields with " <code>"has(args.x)"</code> "."
        </p>
        <dl class="facts small" data-testid="rule-variables">
            {VARIABLES.iter().map(|(name, what)| view! { <dt><code>{*name}</code></dt><dd>{*what}</dd> }).collect_view()}
        </dl>
        <Suspense fallback=|| view! { <p class="loading">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match form.await {
                    Ok(p) => view! { <RuleForm policies=p.policies save tried/> }.into_any(),
                    Err(error) => view! { <ErrorBox error/> }.into_any(),
                }
            })}
        </Suspense>
        <Transition fallback=|| view! { <p class="loading">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match page.await {
                    Ok(p) => view! { <RuleList rules=p.rules delete/> }.into_any(),
                    Err(error) => view! { <ErrorBox error/> }.into_any(),
                }
            })}
        </Transition>
    }
}

#[component]
fn RuleForm(policies: Vec<String>, save: ServerAction<SaveRule>, tried: ServerAction<TryRule>) -> impl IntoView {
    if policies.is_empty() {
        return view! {
            <p class="card notice" data-testid="no-policies">
                "Rules belong to a tool policy: add one under " <a href="/admin/policies">"Tool policies"</a> " first."
            </p>
        }
        .into_any();
    }
    let options = {
        let policies = policies.clone();
        move || policies.iter().map(|p| view! { <option value=p.clone()>{p.clone()}</option> }).collect_view()
    };
    let options2 =
        move || policies.iter().map(|p| view! { <option value=p.clone()>{p.clone()}</option> }).collect_view();
    let actions =
        || RuleAction::ALL.iter().map(|a| view! { <option value=a.as_str()>{a.as_str()}</option> }).collect_view();
    view! {
        <section class="card" data-testid="rule-form">
            <h2>"Try a rule on history, then save it"</h2>
            <ActionForm action=tried attr:class="form inline-form" attr:data-testid="try-rule">
                <label>"Tool policy" <select name="tool_pattern" required>{options}</select></label>
                <label class="wide">"When (CEL)"
                    <input type="text" name="expression" required maxlength="2000" placeholder="args.amount < 100 && agent == 'billing'"/>
                </label>
                <label>"Then" <select name="action">{actions()}</select></label>
                <label>"Last days" <input type="number" name="days" min="1" max="365" value="30"/></label>
                <button type="submit" class="primary">"Try on history"</button>
            </ActionForm>
            <div>
                <ActionError value=tried.value()/>
            </div>
            {move || tried.value().get().and_then(|r| r.ok()).map(|report| view! { <Report report title="On history"/> })}
            <h3>"Save"</h3>
            <ActionForm action=save attr:class="form inline-form" attr:data-testid="save-rule">
                <label>"Name" <input type="text" name="name" required maxlength="64" placeholder="small-refunds"/></label>
                <label>"Tool policy" <select name="tool_pattern" required>{options2}</select></label>
                <label>"Position" <input type="number" name="position" value="0"/></label>
                <label class="wide">"When (CEL)" <input type="text" name="expression" required maxlength="2000"/></label>
                <label>"Then" <select name="action">{actions()}</select></label>
                <label>"Approvers" <input type="number" name="approvers" min="1" max="5" value="1"/></label>
                <label>"Role"
                    <select name="role">
                        <option value="">"the policy's"</option>
                        <option value="approver">"approver"</option>
                        <option value="operator">"operator"</option>
                        <option value="admin">"admin"</option>
                    </select>
                </label>
                <label>"Reason (deny)" <input type="text" name="reason" maxlength="2000"/></label>
                <label>"Mode"
                    <select name="mode">
                        {RuleMode::ALL.iter().map(|m| view! { <option value=m.as_str() selected=*m == RuleMode::Shadow>{m.as_str()}</option> }).collect_view()}
                    </select>
                </label>
                <button type="submit" class="primary">"Save rule"</button>
            </ActionForm>
            <div>
                <ActionError value=save.value()/>
            </div>
        </section>
    }
    .into_any()
}

#[component]
fn RuleList(rules: Vec<RuleView>, delete: ServerAction<DeleteRule>) -> impl IntoView {
    if rules.is_empty() {
        return view! { <p class="muted">"No rules yet: every request waits for one person holding the policy's role."</p> }
            .into_any();
    }
    view! {
        <div>
            <ActionError value=delete.value()/>
        </div>
        <table class="grid" data-testid="rule-table">
            <thead><tr><th>"Policy"</th><th>"#"</th><th>"Name"</th><th>"When"</th><th>"Then"</th><th>"Mode"</th><th></th></tr></thead>
            <tbody>
                {rules.into_iter().map(|v| {
                    let r = v.rule.clone();
                    let then = match r.action {
                        RuleAction::RequireApproval => format!(
                            "require_approval ({} approver{}{})",
                            r.approvers,
                            if r.approvers == 1 { "" } else { "s" },
                            r.role.map(|role| format!(", {role}")).unwrap_or_default()
                        ),
                        RuleAction::Deny => format!("deny ({})", r.reason.clone().unwrap_or_default()),
                        RuleAction::AutoApprove => "auto_approve".into(),
                    };
                    let name = r.name.clone();
                    view! {
                        <tr data-rule=r.name.clone()>
                            <td><code>{r.tool_pattern.clone()}</code></td>
                            <td>{r.position}</td>
                            <td><code>{r.name.clone()}</code></td>
                            <td><code><ExactInline text=r.expression.clone()/></code></td>
                            <td>{then}</td>
                            <td><span class=format!("badge mode-{}", r.mode.as_str())>{r.mode.as_str()}</span></td>
                            <td>
                                <ActionForm action=delete attr:class="inline">
                                    <input type="hidden" name="name" value=name/>
                                    <button type="submit" class="danger small">"Delete"</button>
                                </ActionForm>
                            </td>
                        </tr>
                        {v.shadow.map(|report| view! {
                            <tr class="shadow-report"><td colspan="7"><Report report title="In shadow so far"/></td></tr>
                        })}
                    }
                }).collect_view()}
            </tbody>
        </table>
    }
    .into_any()
}

/// What a rule would have done beside what people decided.
#[component]
fn Report(report: HistoryReport, title: &'static str) -> impl IntoView {
    view! {
        <div class="rule-report" data-testid="rule-report">
            <h3>{title}</h3>
            <table class="grid compact">
                <thead><tr><th>"Requests"</th><th>"Matched"</th><th>"People approved"</th><th>"People denied"</th><th>"Undecided"</th><th>"Failed on"</th></tr></thead>
                <tbody><tr>
                    <td data-testid="report-requests">{report.requests}</td>
                    <td data-testid="report-matched">{report.matched}</td>
                    <td>{report.matched_people_approved}</td>
                    <td data-testid="report-denied">{report.matched_people_denied}</td>
                    <td>{report.matched_undecided}</td>
                    <td>{report.errors}</td>
                </tr></tbody>
            </table>
            {report.first_error.clone().map(|e| view! { <p class="callout warn small">"The expression failed on some requests: " {e}</p> })}
            {if report.disagreements.is_empty() {
                view! { <p class="small muted" data-testid="no-disagreements">"It would have decided no request against what people decided."</p> }.into_any()
            } else {
                view! {
                    <p class="callout danger small">{format!("{} request(s) it would have decided against what people decided:", report.disagreements.len())}</p>
                    <table class="grid compact" data-testid="disagreements">
                        <thead><tr><th>"Filed"</th><th>"Agent"</th><th>"People"</th><th>"Arguments"</th><th></th></tr></thead>
                        <tbody>
                            {report.disagreements.into_iter().map(|d| view! {
                                <tr>
                                    <td>{format_utc(&d.created_at)}</td>
                                    <td>{d.agent.clone().unwrap_or_else(|| "—".into())}</td>
                                    <td>{format!("{} by {}", d.people, d.decided_by.clone().unwrap_or_default())}</td>
                                    <td><code class="wrap"><ExactInline text=d.arguments.clone()/></code></td>
                                    <td><a href=approval_href(&d.approval_id) class="small">"Open"</a></td>
                                </tr>
                            }).collect_view()}
                        </tbody>
                    </table>
                }.into_any()
            }}
        </div>
    }
}
