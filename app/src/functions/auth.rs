//! Signing in and out, and who is signed in.

use crate::errors::AppError;
use leptos::prelude::*;

/// Checks the password, starts a fresh session and goes to `next` (a local path), which
/// it also returns. Failures are audited; repeated ones from the same address are slowed
/// down (see `auth::login_limit`). A disabled account cannot sign in.
#[server(prefix = "/fn", endpoint = "login")]
pub async fn login(username: String, password: String, next: Option<String>) -> Result<String, AppError> {
    use super::ssr;
    use crate::auth::{login_limit, password as pw, session};
    use store::audit::{self, action, NewEntry};
    use store::{now_ms, users};

    let db = ssr::db()?;
    let browser_session = ssr::session()?;
    let source = ssr::source();
    let username = username.trim().to_string();

    let since = now_ms() - login_limit::WINDOW_MS;
    let failed = action::LOGIN_FAILED;
    let failures = |(count, last_at): (i64, Option<i64>)| login_limit::Failures { count, last_at };
    let user_at_source = failures(audit::recent(&db, failed, Some(&username), source.as_deref(), since).await?);
    let from_source = match &source {
        Some(s) => failures(audit::recent(&db, failed, None, Some(s), since).await?),
        None => login_limit::Failures::default(),
    };
    if let Err(message) = login_limit::check(user_at_source, from_source, now_ms()) {
        tracing::warn!(username = %username, source = ?source, "sign-in refused by the backoff");
        return ssr::fail(AppError::TooManyAttempts(message));
    }

    let user = users::by_username(&db, &username).await?;
    // Verify against a dummy hash for unknown users so timing does not reveal them, and
    // only a few at a time: each check is deliberately expensive, so parallel guesses
    // queue here instead of taking every core from the pages and ingest.
    let phc = user.as_ref().map(|u| u.password_hash.clone()).unwrap_or_else(|| pw::dummy_hash().to_string());
    let Ok(slot) = tokio::time::timeout(VERIFY_QUEUE_WAIT, verify_slots().acquire()).await else {
        return ssr::fail(AppError::TooManyAttempts("sign-in is busy; try again in a few seconds".into()));
    };
    let matches = tokio::task::spawn_blocking(move || {
        let _counted = VerifyCount::start();
        pw::verify(&password, &phc)
    })
    .await
    .unwrap_or(false);
    drop(slot);

    match user {
        Some(user) if matches && user.is_disabled() => {
            tracing::info!(username = %user.username, "sign-in refused: account disabled");
            ssr::fail(AppError::AccountDisabled)
        }
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

/// Password checks that may run at once, in the whole process.
#[cfg(feature = "ssr")]
const VERIFY_SLOTS: usize = 2;
/// How long a sign-in waits for a free slot before it is told to try again.
#[cfg(feature = "ssr")]
const VERIFY_QUEUE_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Password checks running now, and the most there ever were at once (for the test that
/// shows parallel guesses queue).
#[cfg(feature = "ssr")]
static VERIFYING: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
#[cfg(feature = "ssr")]
static VERIFYING_PEAK: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

#[cfg(feature = "ssr")]
struct VerifyCount;

#[cfg(feature = "ssr")]
impl VerifyCount {
    fn start() -> VerifyCount {
        use std::sync::atomic::Ordering;
        let now = VERIFYING.fetch_add(1, Ordering::SeqCst) + 1;
        VERIFYING_PEAK.fetch_max(now, Ordering::SeqCst);
        VerifyCount
    }
}

#[cfg(feature = "ssr")]
impl Drop for VerifyCount {
    fn drop(&mut self) {
        VERIFYING.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// The most password checks that have run at once in this process.
#[cfg(feature = "ssr")]
pub fn peak_concurrent_password_checks() -> usize {
    VERIFYING_PEAK.load(std::sync::atomic::Ordering::SeqCst)
}

/// How many password checks may run at once.
#[cfg(feature = "ssr")]
pub const MAX_CONCURRENT_PASSWORD_CHECKS: usize = VERIFY_SLOTS;

#[cfg(feature = "ssr")]
fn verify_slots() -> &'static tokio::sync::Semaphore {
    static SLOTS: std::sync::OnceLock<tokio::sync::Semaphore> = std::sync::OnceLock::new();
    SLOTS.get_or_init(|| tokio::sync::Semaphore::new(VERIFY_SLOTS))
}

/// Ends the session and returns to the sign-in page.
#[server(prefix = "/fn", endpoint = "logout")]
pub async fn logout() -> Result<String, AppError> {
    use super::ssr;
    use crate::auth::session;
    use store::audit::{self, action, NewEntry};

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

/// Where to go after signing in: a path on this site only, so a crafted link cannot send
/// a freshly signed-in user anywhere else, and nothing in it can break the redirect.
///
/// Accepted: `/` followed by printable ASCII, where neither the second character nor, after
/// percent-decoding, the start (`%2F%2F`, `%5C`) makes it a network-path reference (`//`,
/// `/\`). Refused (going to `/runs` instead): anything else, including control characters
/// (`/<TAB>/evil.example` is read by browsers as `//evil.example`), backslashes anywhere,
/// non-ASCII and paths over 2,048 bytes.
pub fn safe_next(next: Option<&str>) -> String {
    const FALLBACK: &str = "/runs";
    let Some(path) = next else { return FALLBACK.to_string() };
    let printable = path.bytes().all(|b| (0x21..0x7f).contains(&b) && b != b'\\');
    if !printable || !path.starts_with('/') || path.len() > 2048 {
        return FALLBACK.to_string();
    }
    // Decoded twice over, as the most lenient reader would, before checking the start.
    let once = percent_decode(path);
    let twice = percent_decode(&once);
    for candidate in [path, once.as_str(), twice.as_str()] {
        let rest = &candidate.as_bytes()[1.min(candidate.len())..];
        let network_path = matches!(rest.first(), Some(b'/' | b'\\')) || !candidate.starts_with('/');
        if network_path || candidate.bytes().any(|b| b < 0x20 || b == 0x7f) {
            return FALLBACK.to_string();
        }
    }
    path.to_string()
}

/// Percent-decoding for [`safe_next`]'s checks only (lossy: invalid UTF-8 stays visible as
/// replacement characters, which pass nothing they should not).
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::safe_next;

    #[test]
    fn next_is_kept_only_when_local() {
        assert_eq!(safe_next(Some("/admin/tokens?x=1")), "/admin/tokens?x=1");
        assert_eq!(safe_next(Some("/runs/a%20b?q=x%2Fy")), "/runs/a%20b?q=x%2Fy");
        assert_eq!(safe_next(Some("/")), "/");
        for hostile in [
            "//evil.example",
            "/\\evil.example",
            "https://evil.example",
            "/\t/evil.example",
            "/\n/evil.example",
            "/runs\r\nSet-Cookie: x=1",
            "/%2F%2Fevil.example",
            "/%2fevil.example",
            "/%5Cevil.example",
            "/%252F/evil.example",
            "/%09/evil.example",
            "/runs\\..\\x",
            "/ünïcode",
            "javascript:alert(1)",
            "",
            " /runs",
        ] {
            assert_eq!(safe_next(Some(hostile)), "/runs", "{hostile:?}");
        }
        assert_eq!(safe_next(Some(&format!("/{}", "a".repeat(3000)))), "/runs");
        assert_eq!(safe_next(None), "/runs");
    }
}
