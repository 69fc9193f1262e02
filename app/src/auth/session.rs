//! What a browser session holds and how it becomes the current user. The session keeps
//! only the user id and the session epoch; the user is read fresh on every request, and a
//! role change, password reset or disabling bumps the epoch, so it ends every session of
//! that user at once.

use domain::models::CurrentUser;
use domain::models::OneTimeSecret;
use store::{users, Db};
use tower_sessions::Session;

const USER_ID: &str = "user_id";
const EPOCH: &str = "epoch";

/// Loads the user this session belongs to, if any and if still valid.
pub async fn current_user(db: &Db, session: &Session) -> Option<CurrentUser> {
    let user_id: i64 = session.get(USER_ID).await.ok().flatten()?;
    let epoch: i64 = session.get(EPOCH).await.ok().flatten()?;
    let user = users::by_id(db, user_id).await.ok().flatten()?;
    if user.session_epoch != epoch || user.is_disabled() {
        return None;
    }
    let roles = user.roles();
    Some(CurrentUser { id: user.id, username: user.username, roles })
}

/// Binds the session to a user, under a new session id so a planted id is worthless.
pub async fn sign_in(session: &Session, user: &users::UserRecord) -> Result<(), tower_sessions::session::Error> {
    session.cycle_id().await?;
    session.insert(USER_ID, user.id).await?;
    session.insert(EPOCH, user.session_epoch).await?;
    Ok(())
}

pub async fn sign_out(session: &Session) -> Result<(), tower_sessions::session::Error> {
    session.flush().await
}

/// Keeps a secret for the next page render, which shows it once and forgets it. This is
/// how a new token or password reaches the admin with and without JavaScript alike.
/// `slot` names the page that will show it, so another page cannot swallow it.
pub async fn stash_secret(
    session: &Session,
    slot: &str,
    secret: OneTimeSecret,
) -> Result<(), tower_sessions::session::Error> {
    session.insert(&format!("one_time_secret:{slot}"), secret).await
}

pub async fn take_secret(session: &Session, slot: &str) -> Option<OneTimeSecret> {
    session.remove(&format!("one_time_secret:{slot}")).await.ok().flatten()
}
