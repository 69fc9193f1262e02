//! Resolves the browser session to the signed-in user once per request and leaves it in
//! the request extensions, where the page guard and every server function find it.

use app::auth::session;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use store::Db;
use tower_sessions::Session;

pub async fn load(State(db): State<Db>, browser_session: Session, mut req: Request, next: Next) -> Response {
    // Static files need no user; skipping them saves a database read per asset.
    if !req.uri().path().starts_with("/pkg/") {
        if let Some(user) = session::current_user(&db, &browser_session).await {
            req.extensions_mut().insert(user);
        }
    }
    next.run(req).await
}
