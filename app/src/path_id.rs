//! The id in the path of the page being shown, for the pages' resources.

use domain::url::path_param;

/// The id of the page under `prefix` (`"/runs/"`): read from the path this route matched
/// (raw, as the browser sent it) through [`path_param`], so it is decoded exactly once.
/// The matched path changes only while this route matches, so the page never fetches
/// its data for an id belonging to the page being navigated to or from.
pub fn path_id(prefix: &'static str) -> leptos::prelude::Memo<String> {
    use leptos::prelude::*;
    let matched = leptos_router::hooks::use_matched();
    Memo::new(move |previous: Option<&String>| {
        matched.with(|m| path_param(m, prefix)).or_else(|| previous.cloned()).unwrap_or_default()
    })
}
