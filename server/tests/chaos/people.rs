//! The people and the agent token a scenario needs, created in the server's database,
//! and signing in as the browser does.

use app::auth::password;
use domain::access::{Role, Scope};
use std::time::Duration;
use store::{users, Db};

pub use super::common::PASSWORD;

/// Creates `people` with [`PASSWORD`] and their roles.
pub async fn add(db: &Db, people: &[(&str, &[Role])]) {
    let hash = password::hash(PASSWORD);
    for (name, roles) in people {
        users::create(db, name, &hash, roles).await.unwrap();
    }
}

/// An agent token with the approvals and escalations scopes.
pub async fn agent_token(db: &Db) -> String {
    super::common::token(db, "agent", &[Scope::Approvals, Scope::Escalations]).await
}

/// A signed-in browser session; None when the server is not answering.
pub async fn sign_in(base: &str, user: &str) -> Option<reqwest::Client> {
    let http = reqwest::Client::builder().cookie_store(true).timeout(Duration::from_secs(30)).build().unwrap();
    let form = [("username", user), ("password", PASSWORD), ("next", "/runs")];
    let r = http.post(format!("{base}/fn/login")).header("sec-fetch-site", "same-origin").form(&form).send().await;
    r.ok().filter(|r| r.status().is_success()).map(|_| http)
}
