//! Every tool ingest has seen: how often, by how many runs, and its side-effect class. A
//! tool nobody classified is shown as unclassified (never as harmless) with a suggestion
//! from its name or MCP annotations; one click classifies it, which creates the tool's
//! policy and recomputes the flags of the stored runs that called it.

use super::AdminTabs;
use crate::components::status::{ActionError, ErrorBox};
use crate::components::time::Timestamp;
use crate::functions::catalog::{load_tools, ClassifyTool};
use crate::routes::runs::detail::effect_tag;
use domain::canonical::SideEffect;
use domain::models::ToolRow;
use leptos::prelude::*;
use leptos_meta::Title;

const CLASSES: [SideEffect; 4] = [SideEffect::Read, SideEffect::Write, SideEffect::Irreversible, SideEffect::None];

#[component]
pub fn ToolsAdmin() -> impl IntoView {
    let classify = ServerAction::<ClassifyTool>::new();
    let list = Resource::new(move || classify.version().get(), |_| load_tools());
    view! {
        <Title text="Tools"/>
        <h1>"Tools"</h1>
        <AdminTabs/>
        <p class="muted small">
            "Every tool name Flightdeck has seen in spans. A tool's class comes from its spans' "
            <code>"tool.side_effect"</code> " or a tool policy; without either it is "
            <strong>"unclassified"</strong> ": its calls are listed among side effects and its repeats with "
            "the same arguments are possible duplicates. Classifying a tool creates a policy for its exact name "
            "and recomputes the runs that called it. Suggestions come from the tool's name or its MCP "
            "annotations and are never applied by themselves."
        </p>
        <ActionError value=classify.value()/>
        <Suspense fallback=|| view! { <p class="loading">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match list.await {
                    Ok(rows) if rows.is_empty() => view! {
                        <p class="muted">"No tool calls received yet."</p>
                    }.into_any(),
                    Ok(rows) => {
                        let unclassified = rows.iter().filter(|r| r.class.is_none()).count();
                        let count_class = if unclassified > 0 { "warn-text" } else { "" };
                        view! {
                            <p data-testid="unclassified-count" class=count_class>
                                {format!("{} tools, {unclassified} unclassified.", rows.len())}
                            </p>
                            <div class="table-scroll">
                            <table class="grid stack" data-testid="tools-table">
                                <thead><tr>
                                    <th>"Tool"</th><th>"Class"</th><th class="num">"Calls"</th><th class="num">"Runs"</th>
                                    <th>"Last seen"</th><th>"Classify"</th>
                                </tr></thead>
                                <tbody>
                                    {rows.into_iter().map(|row| view! { <ToolLine row classify/> }).collect_view()}
                                </tbody>
                            </table>
                            </div>
                        }.into_any()
                    }
                    Err(error) => view! { <ErrorBox error/> }.into_any(),
                }
            })}
        </Suspense>
    }
}

#[component]
fn ToolLine(row: ToolRow, classify: ServerAction<ClassifyTool>) -> impl IntoView {
    let name = row.name.clone();
    let suggested = row.suggestion.as_ref().map(|(c, _)| *c);
    view! {
        <tr class:unclassified=row.class.is_none() data-tool=row.name.clone()>
            <td class="name"><code>{row.name.clone()}</code></td>
            <td data-label="Class">
                <div>
                    {effect_tag(row.class.unwrap_or(SideEffect::Unknown))}
                    {row.class_from.clone().map(|f| view! { <div class="muted small">{f}</div> })}
                    {row.suggestion.clone().map(|(c, why)| view! {
                        <div class="small suggestion">{format!("suggested: {c} ({why})")}</div>
                    })}
                </div>
            </td>
            <td class="num" data-label="Calls">{row.calls}</td>
            <td class="num" data-label="Runs">{row.runs}</td>
            <td class="nowrap" data-label="Last seen"><Timestamp at=row.last_seen/></td>
            <td class="actions" data-label="Classify">
                <div class="class-buttons">
                    {CLASSES.into_iter().map(|class| {
                        let name = name.clone();
                        let current = row.class == Some(class);
                        let primary = suggested == Some(class);
                        view! {
                            <ActionForm action=classify attr:class="inline">
                                <input type="hidden" name="tool" value=name/>
                                <input type="hidden" name="side_effect" value=class.as_str()/>
                                <button type="submit" class="small" class:primary=primary disabled=current
                                    title=if current { "its class now".to_string() } else { format!("classify as {class}") }>
                                    {class.as_str()}
                                </button>
                            </ActionForm>
                        }
                    }).collect_view()}
                </div>
            </td>
        </tr>
    }
}
