//! The people and the agent token a scenario needs, created in the server's database,
//! and signing in as the browser does.

use app::access::{Role, Scope};
use app::auth::{password, secrets};
use app::storage::{tokens, users, Db};
use std::time::Duration;

pub const PASSWORD: &str = "a-long-test-password-1";

/// Creates `people` with [`PASSWORD`] and their roles.
pub async fn add(db: &Db, people: &[(&str, &[Role])]) {
    let hash = password::hash(PASSWORD);
    for (name, roles) in people {
        users::create(db, name, &hash, roles).await.unwrap();
    }
}

/// An agent token with the approvals and escalations scopes.
pub async fn agent_token(db: &Db) -> String {
    let (secret, prefix) = secrets::generate_token();
    let new = tokens::NewToken {
        name: "agent",
        prefix: &prefix,
        secret_sha256: &secrets::sha256_hex(&secret),
        scopes: &[Scope::Approvals, Scope::Escalations],
        created_by: None,
    };
    tokens::create(db, new).await.unwrap();
    secret
}

/// A signed-in browser session; None when the server is not answering.
pub async fn sign_in(base: &str, user: &str) -> Option<reqwest::Client> {
    let http = reqwest::Client::builder().cookie_store(true).timeout(Duration::from_secs(30)).build().unwrap();
    let form = [("username", user), ("password", PASSWORD), ("next", "/runs")];
    let r = http.post(format!("{base}/fn/login")).header("sec-fetch-site", "same-origin").form(&form).send().await;
    r.ok().filter(|r| r.status().is_success()).map(|_| http)
}
