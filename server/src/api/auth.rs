//! Bearer-token authentication for agents: `Authorization: Bearer fdk_...`, looked up by
//! its SHA-256, refused when unknown or revoked. The OTLP receivers reuse it.

use super::ApiError;
use app::auth::secrets;
use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use domain::access::Scope;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use store::{now_ms, tokens, Db};

/// How often at most a token's last-used time is written, so a busy agent does not turn
/// every request into a database write.
const TOUCH_INTERVAL_MS: i64 = 60_000;

/// The authenticated caller, left in the request extensions for handlers.
#[derive(Debug, Clone)]
pub struct AgentToken {
    pub id: i64,
    pub name: String,
    pub scopes: Vec<Scope>,
}

impl AgentToken {
    /// Succeeds when the token carries `scope`; otherwise the 403 to return.
    pub fn require(&self, scope: Scope) -> Result<(), ApiError> {
        if self.scopes.contains(&scope) {
            Ok(())
        } else {
            Err(ApiError::Forbidden(format!(
                "token `{}` lacks the `{scope}` scope this endpoint needs; create a token with it under Admin → API tokens",
                self.name
            )))
        }
    }
}

#[derive(Debug, Clone)]
pub struct TokenAuth {
    db: Db,
    last_touched: Arc<Mutex<HashMap<i64, i64>>>,
}

impl TokenAuth {
    pub fn new(db: Db) -> Self {
        TokenAuth { db, last_touched: Arc::default() }
    }

    /// Resolves an `Authorization` header value to a token.
    pub async fn authenticate(&self, authorization: Option<&str>) -> Result<AgentToken, ApiError> {
        let Some(value) = authorization else {
            return Err(ApiError::Unauthorized("missing bearer token: send `Authorization: Bearer <token>`".into()));
        };
        let Some(secret) = value.strip_prefix("Bearer ").map(str::trim).filter(|s| !s.is_empty()) else {
            return Err(ApiError::Unauthorized("the Authorization header must be `Bearer <token>`".into()));
        };
        let found = tokens::active_by_hash(&self.db, &secrets::sha256_hex(secret)).await?;
        let Some(token) = found else {
            return Err(ApiError::Unauthorized("unknown or revoked token".into()));
        };
        self.touch(token.id).await;
        Ok(AgentToken { id: token.id, name: token.name, scopes: token.scopes })
    }

    async fn touch(&self, id: i64) {
        let now = now_ms();
        let due = {
            let mut seen = self.last_touched.lock().expect("token touch map poisoned");
            let due = seen.get(&id).is_none_or(|last| now - last >= TOUCH_INTERVAL_MS);
            if due {
                seen.insert(id, now);
            }
            due
        };
        if due {
            if let Err(e) = tokens::touch(&self.db, id, now).await {
                tracing::warn!(error = %e, token = id, "could not record token use");
            }
        }
    }
}

/// Middleware: authenticates the request or answers 401.
pub async fn require_token(State(auth): State<TokenAuth>, mut req: Request, next: Next) -> Response {
    let header_value = req.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
    match auth.authenticate(header_value).await {
        Ok(token) => {
            req.extensions_mut().insert(token);
            next.run(req).await
        }
        Err(e) => e.into_response(),
    }
}
