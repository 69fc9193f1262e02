//! Resolves each request's client address once (`app::auth::client_address`): the
//! connection's peer, or behind a trusted proxy the forwarded client, left in the request
//! for the sign-in backoff and the audit log.

use app::auth::client_address::{ClientAddress, TrustedProxies};
use axum::extract::{ConnectInfo, Request, State};
use axum::middleware::Next;
use axum::response::Response;
use std::net::SocketAddr;
use std::sync::Arc;

pub async fn resolve(State(trusted): State<Arc<TrustedProxies>>, mut req: Request, next: Next) -> Response {
    let peer = req.extensions().get::<ConnectInfo<SocketAddr>>().map(|ConnectInfo(addr)| addr.ip());
    if let Some(peer) = peer {
        let headers = req.headers();
        let values =
            |name: &str| -> Vec<&str> { headers.get_all(name).iter().filter_map(|v| v.to_str().ok()).collect() };
        let client = trusted.client(peer, values("forwarded"), values("x-forwarded-for"));
        req.extensions_mut().insert(ClientAddress(client));
    }
    next.run(req).await
}
