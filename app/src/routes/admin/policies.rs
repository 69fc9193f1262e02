//! Tool policies: which tool names read, write, or do something irreversible (ingest uses
//! the class for tool calls whose spans declare none), which need a per-call approval and
//! from whom, how long a request waits, and an absolute per-run limit.

use super::AdminTabs;
use crate::components::status::{ActionError, ErrorBox};
use crate::functions::admin::{load_policies, DeletePolicy, SavePolicy};
use domain::canonical::SideEffect;
use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn PoliciesAdmin() -> impl IntoView {
    let save = ServerAction::<SavePolicy>::new();
    let delete = ServerAction::<DeletePolicy>::new();
    let list = Resource::new(move || (save.version().get(), delete.version().get()), |_| load_policies());
    let classes = || {
        SideEffect::ALL
            .iter()
            .filter(|c| **c != SideEffect::Unknown)
            .map(|c| view! { <option value=c.as_str()>{c.as_str()}</option> })
            .collect_view()
    };
    view! {
        <Title text="Tool policies"/>
        <h1>"Tool policies"</h1>
        <AdminTabs/>
        <ActionForm action=save attr:class="card form inline-form" attr:data-testid="save-policy">
            <h2>"Add or replace"</h2>
            <label>"Tool name or pattern" <input type="text" name="pattern" placeholder="send_*" required maxlength="200"/></label>
            // No default class: the admin chooses (a default would be a guess applied as fact).
            <label>"Side effect"
                <select name="side_effect" required>
                    <option value="" selected disabled>"choose…"</option>
                    {classes()}
                </select>
            </label>
            <label class="checkbox"><input type="checkbox" name="requires_approval" value="on"/>" Requires approval"</label>
            <label>"Approver role"
                <select name="approver_role">
                    <option value="approver">"approver"</option>
                    <option value="operator">"operator"</option>
                    <option value="admin">"admin"</option>
                </select>
            </label>
            <label>"Expiry (seconds)" <input type="number" name="expiry_seconds" min="1" placeholder="3600"/></label>
            <label>"Per-run limit" <input type="number" name="run_limit" min="1" placeholder="none"/></label>
            <label title="An approval must be used (its call must start) within this long after it was given">
                "Use within (seconds)" <input type="number" name="use_within_seconds" min="1" placeholder="900"/>
            </label>
            <label title="Argument fields left out of a guarded call's derived idempotency key (comma-separated)">
                "Volatile fields" <input type="text" name="volatile_fields" maxlength="2000" placeholder="request_id, timestamp, now, attempt, trace_id"/>
            </label>
            <label class="checkbox" title="Leave the step out of the key: the same call later in the run is found too (for tools that cannot be undone)">
                <input type="checkbox" name="run_wide_key" value="on"/>" Run-wide key"
            </label>
            <label class="checkbox" title="The MCP gateway forwards calls of this read tool even when Flightdeck cannot be reached (read and none tools only)">
                <input type="checkbox" name="fail_open" value="on"/>" Fail open (MCP gateway)"
            </label>
            <label title="How long a succeeded guarded call answers already_done">
                "Ledger window (seconds)" <input type="number" name="ledger_window_seconds" min="1" placeholder="86400"/>
            </label>
            <label title="How long a started guarded call may go unreported before its outcome is unknown">
                "Call timeout (seconds)" <input type="number" name="call_timeout_seconds" min="1" placeholder="300"/>
            </label>
            <label title="What happens to a request nobody decides before it expires">"On expiry"
                <select name="on_expiry">
                    <option value="deny">"deny (the agent is told)"</option>
                    <option value="escalate">"escalate (open an escalation)"</option>
                </select>
            </label>
            <label class="wide" title="Edited arguments must match it before an approver can approve them">
                "Arguments JSON Schema (optional)"
                <textarea name="arguments_schema" rows="3" maxlength="65536" placeholder=r#"{"type": "object", "properties": {"amount": {"type": "integer", "maximum": 100}}}"#></textarea>
            </label>
            <button type="submit" class="primary">"Save policy"</button>
            <ActionError value=save.value()/>
        </ActionForm>
        <p class="muted small">
            "A span's own " <code>"tool.side_effect"</code> " wins; otherwise the exact tool name, then the first "
            "matching pattern (" <code>"*"</code> " matches anything). Changes apply to spans received from a few "
            "seconds later on. A tool that requires approval must run under an approved request for exactly "
            "its arguments; the per-run limit counts successful executions in one run."
        </p>
        <ActionError value=delete.value()/>
        <Suspense fallback=|| view! { <p class="loading">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match list.await {
                    Ok(rows) if rows.is_empty() => view! { <p class="muted">"No tool policies yet."</p> }.into_any(),
                    Ok(rows) => view! {
                        <table class="grid" data-testid="policy-table">
                            <thead><tr>
                                <th>"Pattern"</th><th>"Side effect"</th><th>"Approval"</th><th>"Expiry"</th>
                                <th>"Per-run limit"</th><th>"Use within"</th><th>"Guarded calls"</th><th></th>
                            </tr></thead>
                            <tbody>
                                {rows.into_iter().map(|row| {
                                    let pattern = row.pattern.clone();
                                    let ledger = ledger_summary(&row);
                                    view! {
                                        <tr>
                                            <td><code>{row.pattern}</code></td>
                                            <td><span class=format!("badge effect-{}", row.side_effect)>{row.side_effect.clone()}</span></td>
                                            <td>
                                                {if row.requires_approval { format!("required, by {}", row.approver_role) } else { "not required".to_string() }}
                                                <span class="muted small">{format!("; on expiry {}", row.on_expiry)}{row.arguments_schema.is_some().then_some("; arguments schema")}</span>
                                            </td>
                                            <td>{row.expiry_seconds.map(|s| format!("{s} s")).unwrap_or_else(|| "default (3600 s)".into())}</td>
                                            <td>{row.run_limit.map(|n| n.to_string()).unwrap_or_else(|| "none".into())}</td>
                                            <td>{row.use_within_seconds.map(|s| format!("{s} s")).unwrap_or_else(|| "default (900 s)".into())}</td>
                                            <td class="small">{ledger}</td>
                                            <td>
                                                <ActionForm action=delete attr:class="inline">
                                                    <input type="hidden" name="pattern" value=pattern/>
                                                    <button type="submit" class="danger small">"Delete"</button>
                                                </ActionForm>
                                            </td>
                                        </tr>
                                    }
                                }).collect_view()}
                            </tbody>
                        </table>
                    }.into_any(),
                    Err(error) => view! { <ErrorBox error/> }.into_any(),
                }
            })}
        </Suspense>
    }
}

/// The guarded-call settings of a policy in one line.
fn ledger_summary(row: &domain::models::PolicyRow) -> String {
    let key = if row.run_wide_key { "run-wide key" } else { "key per step" };
    let volatile = if row.volatile_fields.is_empty() {
        "default volatile fields".to_string()
    } else {
        format!("volatile: {}", row.volatile_fields)
    };
    let window = row.ledger_window_seconds.map(|s| format!("{s} s")).unwrap_or_else(|| "24 h".into());
    let timeout = row.call_timeout_seconds.map(|s| format!("{s} s")).unwrap_or_else(|| "300 s".into());
    let open = if row.fail_open { "; fails open without Flightdeck" } else { "" };
    format!("{key}; {volatile}; window {window}; timeout {timeout}{open}")
}
