//! Signing in and out, and who is signed in.

use crate::errors::AppError;
use leptos::prelude::*;

/// Checks the password, starts a fresh session and goes to `next` (a local path), which
/// it also returns.
/// Failures are audited and rate-limited per username and per address.
#[server(prefix = "/fn", endpoint = "login")]
pub async fn login(username: String, password: String, next: Option<String>) -> Result<String, AppError> {
    use super::ssr;
    use crate::auth::{login_limit, password as pw, session};
    use crate::storage::audit::{self, action, NewEntry};
    use crate::storage::{now_ms, users};

    let db = ssr::db()?;
    let browser_session = ssr::session()?;
    let source = ssr::source();
    let username = username.trim().to_string();

    let since = now_ms() - login_limit::WINDOW_MS;
    let by_user = audit::count_for_target_since(&db, action::LOGIN_FAILED, &username, since).await?;
    let by_source = match &source {
        Some(s) => audit::count_from_source_since(&db, action::LOGIN_FAILED, s, since).await?,
        None => 0,
    };
    if let Err(message) = login_limit::check(by_user, by_source) {
        tracing::warn!(username = %username, source = ?source, "sign-in refused by rate limit");
        return ssr::fail(AppError::TooManyAttempts(message));
    }

    let user = users::by_username(&db, &username).await?;
    // Verify against a dummy hash for unknown users so timing does not reveal them.
    let phc = user.as_ref().map(|u| u.password_hash.clone()).unwrap_or_else(|| pw::dummy_hash().to_string());
    let matches = tokio::task::spawn_blocking(move || pw::verify(&password, &phc)).await.unwrap_or(false);

    match user {
        Some(user) if matches => {
            session::sign_in(&browser_session, &user).await.map_err(|e| {
                tracing::error!(error = %e, "cannot start session");
                AppError::Internal
            })?;
            audit::record(
                &db,
                NewEntry {
                    actor: Some(&user.username),
                    action: action::LOGIN,
                    source: source.as_deref(),
                    ..Default::default()
                },
            )
            .await?;
            let target = safe_next(next.as_deref());
            ssr::redirect_form_post(&target);
            Ok(target)
        }
        _ => {
            audit::record(
                &db,
                NewEntry {
                    action: action::LOGIN_FAILED,
                    target: Some(&username),
                    source: source.as_deref(),
                    ..Default::default()
                },
            )
            .await?;
            ssr::fail(AppError::BadCredentials)
        }
    }
}

/// Ends the session and returns to the sign-in page.
#[server(prefix = "/fn", endpoint = "logout")]
pub async fn logout() -> Result<String, AppError> {
    use super::ssr;
    use crate::auth::session;
    use crate::storage::audit::{self, action, NewEntry};

    let db = ssr::db()?;
    let user = ssr::current_user();
    session::sign_out(&ssr::session()?).await.map_err(|e| {
        tracing::error!(error = %e, "cannot end session");
        AppError::Internal
    })?;
    if let Some(user) = user {
        audit::record(
            &db,
            NewEntry {
                actor: Some(&user.username),
                action: action::LOGOUT,
                source: ssr::source().as_deref(),
                ..Default::default()
            },
        )
        .await?;
    }
    ssr::redirect_form_post("/login");
    Ok("/login".to_string())
}

/// Where to go after signing in: a local path only, so a crafted link cannot send a
/// freshly signed-in user to another site.
pub fn safe_next(next: Option<&str>) -> String {
    match next {
        Some(path) if path.starts_with('/') && !path.starts_with("//") && !path.starts_with("/\\") => path.to_string(),
        _ => "/runs".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::safe_next;

    #[test]
    fn next_is_kept_only_when_local() {
        assert_eq!(safe_next(Some("/admin/tokens?x=1")), "/admin/tokens?x=1");
        assert_eq!(safe_next(Some("//evil.example")), "/runs");
        assert_eq!(safe_next(Some("/\\evil.example")), "/runs");
        assert_eq!(safe_next(Some("https://evil.example")), "/runs");
        assert_eq!(safe_next(None), "/runs");
    }
}
