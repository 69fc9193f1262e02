//! One alert (`/alerts/{id}`), where webhook notifications link: the same card as the
//! list, with the rule's description.

use super::AlertCard;
use crate::components::status::{ActionError, ErrorBox};
use crate::functions::alerts::{load_alert, AcknowledgeAlert};
use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn AlertPage() -> impl IntoView {
    // From the path, decoded once (see `url::path_id`).
    let id = crate::url::path_id("/alerts/");
    let acknowledge = ServerAction::<AcknowledgeAlert>::new();
    crate::components::layout::refresh_nav_after(acknowledge);
    let data = Resource::new(move || (id.get(), acknowledge.version().get()), |(id, _)| load_alert(id));
    view! {
        <Title text="Alert"/>
        <p class="breadcrumb"><a href="/alerts">"Alerts"</a> " / " <code>{move || id.get()}</code></p>
        <ActionError value=acknowledge.value()/>
        <Transition fallback=|| view! { <p class="loading">"Loading alert…"</p> }>
            {move || Suspend::new(async move {
                match data.await {
                    Ok(v) => {
                        let description = v.alert.rule.description();
                        view! {
                            <h1>{v.alert.rule.title()}</h1>
                            <p class="muted">{description}</p>
                            <AlertCard alert=v.alert now=v.now can_acknowledge=v.can_acknowledge acknowledge linked=false/>
                        }.into_any()
                    }
                    Err(error) => view! { <ErrorBox error/> }.into_any(),
                }
            })}
        </Transition>
    }
}
