//! Shared by the HTTP-level test files: a real server on a free port over a test database,
//! people signed in through the same server functions the browser calls, and agent tokens.
#![allow(dead_code)] // each test file uses its own part

pub mod receiver;
pub mod serving;
pub mod spans;

use app::auth::{password, secrets};
use app::state::AppState;
use domain::access::{Role, Scope};
use flightdeck::config::{Config, Overrides};
use reqwest::StatusCode;
use serde_json::Value;
use store::testing::TestDb;
use store::{tokens, users, Db};

pub const PASSWORD: &str = "a-long-test-password-1";

pub async fn token(db: &Db, name: &str, scopes: &[Scope]) -> String {
    let (secret, prefix) = secrets::generate_token();
    let new = tokens::NewToken {
        name,
        prefix: &prefix,
        secret_sha256: &secrets::sha256_hex(&secret),
        scopes,
        created_by: None,
    };
    tokens::create(db, new).await.unwrap();
    secret
}

/// A server on a free port. `people` are created with [`PASSWORD`] and their roles; the
/// agent token carries `scopes`.
pub struct Live {
    pub base: String,
    pub agent: String,
    pub http: reqwest::Client,
}

pub async fn live(t: &TestDb, people: &[(&str, &[Role])], scopes: &[Scope]) -> Live {
    live_with(t, people, scopes, Overrides::default()).await
}

/// [`live`] with settings of the test's own (as flags would give them).
pub async fn live_with(t: &TestDb, people: &[(&str, &[Role])], scopes: &[Scope], settings: Overrides) -> Live {
    let config = Config::resolve(settings, None).unwrap();
    let hash = password::hash(PASSWORD);
    for (name, roles) in people {
        users::create(&t.db, name, &hash, roles).await.unwrap();
    }
    let state = AppState::unconfigured(t.db.clone(), flightdeck::commands::serve::leptos_options(&config));
    let app = flightdeck::web::router(state, &config);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        axum::serve(listener, app.into_make_service_with_connect_info::<std::net::SocketAddr>()).await.unwrap()
    });
    Live { base, agent: token(&t.db, "agent-7", scopes).await, http: reqwest::Client::new() }
}

impl Live {
    pub async fn api(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
        token: &str,
    ) -> (StatusCode, Value) {
        let mut req = self.http.request(method, format!("{}{path}", self.base)).bearer_auth(token);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let res = req.send().await.unwrap();
        let status = res.status();
        (status, res.json().await.unwrap_or(Value::Null))
    }

    /// A signed-in browser session for `user`.
    pub async fn person(&self, user: &str) -> Person {
        let http = reqwest::Client::builder().cookie_store(true).build().unwrap();
        let p = Person { http, base: self.base.clone() };
        let (status, body) = p.call("login", &[("username", user), ("password", PASSWORD), ("next", "/runs")]).await;
        assert!(status.is_success(), "login {user}: {status} {body}");
        p
    }
}

pub struct Person {
    pub http: reqwest::Client,
    pub base: String,
}

impl Person {
    /// Calls a server function as the hydrated page does.
    pub async fn call(&self, endpoint: &str, form: &[(&str, &str)]) -> (StatusCode, String) {
        let res = self
            .http
            .post(format!("{}/fn/{endpoint}", self.base))
            .header("sec-fetch-site", "same-origin")
            .form(form)
            .send()
            .await
            .unwrap();
        (res.status(), res.text().await.unwrap())
    }

    pub async fn page(&self, path: &str) -> String {
        self.http.get(format!("{}{path}", self.base)).send().await.unwrap().text().await.unwrap()
    }
}
