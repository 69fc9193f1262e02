//! Server functions: the only way the pages read or change data. Each one checks the
//! role it needs on the server before touching storage.

pub mod admin;
pub mod alerts;
pub mod approval_rules;
pub mod approvals;
pub mod auth;
pub mod catalog;
pub mod escalations;
pub mod ledger;
pub mod runs;
pub mod trends;

#[cfg(feature = "ssr")]
pub mod ssr {
    //! Helpers for server functions: the database, the session, the signed-in user, and
    //! the role check, each as a server-function error when missing.

    use crate::errors::AppError;
    use crate::state::AppState;
    use axum::extract::ConnectInfo;
    use domain::access::Role;
    use domain::models::CurrentUser;
    use http::request::Parts;
    use leptos::prelude::*;
    use std::net::SocketAddr;
    use store::Db;
    use tower_sessions::Session;

    pub fn db() -> Result<Db, AppError> {
        use_context::<AppState>().map(|s| s.db).ok_or_else(|| {
            tracing::error!("AppState missing from the server function context");
            AppError::Internal
        })
    }

    /// The prices and tool policies derivation uses now.
    pub fn rules() -> Result<std::sync::Arc<domain::derive::Rules>, AppError> {
        Ok(state()?.rules.current())
    }

    /// The whole application state (database, rules, hubs).
    pub fn state() -> Result<AppState, AppError> {
        use_context::<AppState>().ok_or_else(|| {
            tracing::error!("AppState missing from the server function context");
            AppError::Internal
        })
    }

    fn parts() -> Result<Parts, AppError> {
        use_context::<Parts>().ok_or(AppError::Internal)
    }

    pub fn session() -> Result<Session, AppError> {
        parts()?.extensions.get::<Session>().cloned().ok_or_else(|| {
            tracing::error!("session layer missing in front of a server function");
            AppError::Internal
        })
    }

    /// The user the request's session belongs to, as loaded by the server's middleware.
    pub fn current_user() -> Option<CurrentUser> {
        parts().ok()?.extensions.get::<CurrentUser>().cloned()
    }

    /// The client address, for the audit log and the sign-in rate limit: as the server's
    /// `client_address` layer resolved it (behind trusted proxies, the forwarded client),
    /// else the connection's peer.
    pub fn source() -> Option<String> {
        let parts = parts().ok()?;
        if let Some(crate::auth::client_address::ClientAddress(ip)) = parts.extensions.get() {
            return Some(ip.to_string());
        }
        parts.extensions.get::<ConnectInfo<SocketAddr>>().map(|ConnectInfo(addr)| addr.ip().to_string())
    }

    fn set_status(code: u16) {
        if let Some(res) = use_context::<leptos_axum::ResponseOptions>() {
            res.set_status(http::StatusCode::from_u16(code).unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR));
        }
    }

    /// The signed-in user if they hold `role`; otherwise the 401 or 403 error, with the
    /// response status set to match.
    pub fn require(role: Role) -> Result<CurrentUser, AppError> {
        let result = match current_user() {
            None => Err(AppError::Unauthorized),
            Some(user) if user.can(role) => Ok(user),
            Some(_) => Err(AppError::Forbidden(role.to_string())),
        };
        if let Err(e) = &result {
            set_status(e.status());
        }
        result
    }

    /// Sends a plain (no-JavaScript) form post on to `path` with a 303. A call from the
    /// hydrated page gets no redirect: it returns the path, and the page reloads itself
    /// there (see `routes::full_reload_on_success`), because the router's client-side
    /// navigation would keep the old signed-in state.
    pub fn redirect_form_post(path: &str) {
        let from_form = parts().ok().is_some_and(|p| {
            p.headers.get(http::header::ACCEPT).and_then(|v| v.to_str().ok()).is_some_and(|v| v.contains("text/html"))
        });
        if from_form {
            leptos_axum::redirect(path);
        }
    }

    /// Refuses a plain (no-JavaScript) form post by sending it back to `page` with what
    /// was entered (`fields`) in the address, so the form can show it again, and the
    /// error where the page's action shows errors (Leptos' `__path` / `__err`). A call
    /// from the hydrated page gets the error as usual.
    pub fn form_back_with<T>(
        page: &str,
        fields: &[(&str, String)],
        fn_path: &str,
        err: AppError,
    ) -> Result<T, AppError> {
        let from_form = parts().ok().is_some_and(|p| {
            p.headers.get(http::header::ACCEPT).and_then(|v| v.to_str().ok()).is_some_and(|v| v.contains("text/html"))
        });
        if !from_form {
            return fail(err);
        }
        let mut query = form_urlencoded::Serializer::new(String::new());
        for (k, v) in fields.iter().filter(|(_, v)| !v.is_empty()) {
            query.append_pair(k, v);
        }
        let encoded = leptos::server_fn::error::ServerFnUrlError::new(fn_path, err.clone());
        if let Ok(url) = encoded.to_url(&format!("http://flightdeck{page}?{}", query.finish())) {
            let back = match url.query() {
                Some(q) => format!("{}?{q}", url.path()),
                None => url.path().to_string(),
            };
            leptos_axum::redirect(&back);
        }
        Err(err)
    }

    /// Records in the audit log what `actor` did, from the request's address.
    pub async fn audit(
        db: &Db,
        actor: &CurrentUser,
        action: &str,
        target: &str,
        detail: Option<&str>,
    ) -> Result<(), AppError> {
        let from = source();
        let entry = store::audit::NewEntry {
            actor: Some(&actor.username),
            action,
            target: Some(target),
            detail,
            source: from.as_deref(),
        };
        store::audit::record(db, entry).await?;
        Ok(())
    }

    /// A generated password and its Argon2id hash, hashed off the async threads.
    pub async fn generated_password() -> Result<(String, String), AppError> {
        let secret = crate::auth::password::generate();
        let for_hash = secret.clone();
        let hash = tokio::task::spawn_blocking(move || crate::auth::password::hash(&for_hash))
            .await
            .map_err(|_| AppError::Internal)?;
        Ok((secret, hash))
    }

    /// Keeps `secret` for exactly one render of the page that owns `slot`.
    pub async fn show_once(slot: &str, label: String, secret: String) -> Result<(), AppError> {
        let one_time = domain::models::OneTimeSecret { label, secret };
        crate::auth::session::stash_secret(&session()?, slot, one_time).await.map_err(|e| {
            tracing::error!(error = %e, "cannot keep a one-time secret in the session");
            AppError::Internal
        })
    }

    /// Maps an error to its status on the response and passes it on.
    pub fn fail<T>(err: AppError) -> Result<T, AppError> {
        set_status(err.status());
        Err(err)
    }
}
