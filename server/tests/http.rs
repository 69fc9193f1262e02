//! HTTP tests through the real router (sessions, pages, server functions, agent API,
//! CSRF), on SQLite and on PostgreSQL.

use app::auth::password;
use app::state::AppState;
use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use axum::Router;
use domain::access::Role;
use flightdeck::config::{Config, Overrides};
use store::testing::TestDb;
use store::{audit, tokens, users};
use tower::ServiceExt;

const ALICE_PASSWORD: &str = "alice-password-123";
const VICTOR_PASSWORD: &str = "victor-password-123";

/// A router on a fresh database with an admin (alice) and a viewer (victor).
async fn setup(t: &TestDb) -> Router {
    setup_with(t, Overrides::default()).await
}

/// [`setup`] with settings of the test's own.
async fn setup_with(t: &TestDb, settings: Overrides) -> Router {
    let config = Config::resolve(settings, None).unwrap();
    users::create(&t.db, "alice", &password::hash(ALICE_PASSWORD), &[Role::Admin, Role::Viewer]).await.unwrap();
    users::create(&t.db, "victor", &password::hash(VICTOR_PASSWORD), &[Role::Viewer]).await.unwrap();
    let state = AppState::unconfigured(t.db.clone(), flightdeck::commands::serve::leptos_options(&config));
    flightdeck::web::router(state, &config)
}

struct Reply {
    status: StatusCode,
    headers: axum::http::HeaderMap,
    body: String,
}

/// A browser stand-in: one session cookie, same-origin by default, from one address.
struct Browser {
    app: Router,
    cookie: Option<String>,
    address: Option<std::net::SocketAddr>,
}

impl Browser {
    fn new(app: &Router) -> Self {
        Browser { app: app.clone(), cookie: None, address: None }
    }

    /// A browser whose requests come from `ip`, as `serve` sees client addresses.
    fn at(app: &Router, ip: &str) -> Self {
        Browser { app: app.clone(), cookie: None, address: Some(format!("{ip}:40000").parse().unwrap()) }
    }

    async fn send(&mut self, mut req: Request<Body>) -> Reply {
        if let Some(c) = &self.cookie {
            req.headers_mut().insert(header::COOKIE, c.parse().unwrap());
        }
        if let Some(address) = self.address {
            req.extensions_mut().insert(axum::extract::ConnectInfo(address));
        }
        let res = self.app.clone().oneshot(req).await.unwrap();
        if let Some(set) = res.headers().get(header::SET_COOKIE) {
            let pair = set.to_str().unwrap().split(';').next().unwrap().to_string();
            self.cookie = Some(pair);
        }
        let status = res.status();
        let headers = res.headers().clone();
        let bytes = axum::body::to_bytes(res.into_body(), 10 << 20).await.unwrap();
        Reply { status, headers, body: String::from_utf8_lossy(&bytes).into_owned() }
    }

    async fn get(&mut self, path: &str) -> Reply {
        self.send(Request::get(path).header(header::ACCEPT, "text/html").body(Body::empty()).unwrap()).await
    }

    /// Calls a server function the way the hydrated page does.
    async fn call(&mut self, endpoint: &str, form: &str) -> Reply {
        self.call_from(endpoint, form, "same-origin").await
    }

    async fn call_from(&mut self, endpoint: &str, form: &str, fetch_site: &str) -> Reply {
        let req = Request::post(format!("/fn/{endpoint}"))
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header("sec-fetch-site", fetch_site)
            .body(Body::from(form.to_string()))
            .unwrap();
        self.send(req).await
    }

    async fn login(&mut self, user: &str, password: &str) -> Reply {
        self.call("login", &format!("username={user}&password={password}&next=%2Fruns")).await
    }
}

async fn api_get(app: &Router, path: &str, token: Option<&str>) -> Reply {
    let mut req = Request::get(path);
    if let Some(t) = token {
        req = req.header(header::AUTHORIZATION, format!("Bearer {t}"));
    }
    let res = app.clone().oneshot(req.body(Body::empty()).unwrap()).await.unwrap();
    let status = res.status();
    let headers = res.headers().clone();
    let bytes = axum::body::to_bytes(res.into_body(), 1 << 20).await.unwrap();
    Reply { status, headers, body: String::from_utf8_lossy(&bytes).into_owned() }
}

#[tokio::test]
async fn health_and_readiness() {
    for t in TestDb::each_backend().await {
        let app = setup(&t).await;
        let r = api_get(&app, "/healthz", None).await;
        assert_eq!(r.status, StatusCode::OK);
        let r = api_get(&app, "/readyz", None).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        assert!(r.body.contains(&format!("\"database\":\"{}\"", t.backend())), "{}", r.body);
        t.db.close().await;
        let r = api_get(&app, "/readyz", None).await;
        assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "a closed database is not ready");
        t.cleanup().await;
    }
}

#[tokio::test]
async fn anonymous_visitors_are_sent_to_sign_in() {
    for t in TestDb::each_backend().await {
        let app = setup(&t).await;
        let mut b = Browser::new(&app);
        let r = b.get("/admin/tokens?x=1").await;
        assert_eq!(r.status, StatusCode::SEE_OTHER);
        assert_eq!(r.headers[header::LOCATION], "/login?next=/admin/tokens%3Fx%3D1");
        let r = b.get("/login").await;
        assert_eq!(r.status, StatusCode::OK);
        assert!(r.body.contains("name=\"password\""), "the sign-in form renders");
        // server functions refuse anonymous callers on their own, too
        let r = b.call("load_tokens_page", "").await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{}", r.body);
        t.cleanup().await;
    }
}

#[tokio::test]
async fn sign_in_sets_a_hardened_cookie_and_shows_the_shell() {
    for t in TestDb::each_backend().await {
        let app = setup(&t).await;
        let mut b = Browser::new(&app);
        b.cookie = Some("flightdeck_session=planted-by-an-attacker".into());
        let r = b.login("alice", ALICE_PASSWORD).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        let set_cookie = r.headers[header::SET_COOKIE].to_str().unwrap().to_string();
        assert!(set_cookie.starts_with("flightdeck_session="), "{set_cookie}");
        assert!(!set_cookie.contains("planted-by-an-attacker"), "a new session id is issued");
        assert!(set_cookie.contains("HttpOnly") && set_cookie.contains("SameSite=Lax"), "{set_cookie}");
        assert!(!set_cookie.contains("Secure"), "Secure is off unless configured");

        let r = b.get("/runs").await;
        assert_eq!(r.status, StatusCode::OK);
        assert!(r.body.contains("alice") && r.body.contains("Runs"), "{}", r.body);
        let r = b.get("/login").await;
        assert_eq!(r.status, StatusCode::SEE_OTHER, "signed-in users skip the sign-in page");

        let r = b.call("logout", "").await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        let r = b.get("/runs").await;
        assert_eq!(r.status, StatusCode::SEE_OTHER, "signed out");

        let entries = audit::list(&t.db, None, None, 10).await.unwrap().entries;
        let actions: Vec<_> = entries.iter().map(|e| e.action.as_str()).collect();
        assert_eq!(actions, vec!["logout", "login"]);
        t.cleanup().await;
    }
}

#[tokio::test]
async fn wrong_passwords_slow_the_guesser_not_the_owner() {
    for t in TestDb::each_backend().await {
        let app = setup(&t).await;
        let mut attacker = Browser::at(&app, "203.0.113.9");
        let r = attacker.login("alice", "wrong-password").await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{}", r.body);
        assert!(r.body.contains("BadCredentials"), "{}", r.body);
        let r = attacker.login("nobody", "wrong-password").await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED, "unknown users look the same");
        for _ in 0..2 {
            assert_eq!(attacker.login("alice", "wrong-password").await.status, StatusCode::UNAUTHORIZED);
        }
        // Three misses for alice from this address: the next attempt must wait a second,
        // even with the right password.
        let r = attacker.login("alice", ALICE_PASSWORD).await;
        assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS, "{}", r.body);
        assert!(r.body.contains("wait 1 second"), "{}", r.body);
        // The owner, from their own address, is not held up at all.
        let mut owner = Browser::at(&app, "198.51.100.20");
        assert_eq!(owner.login("alice", ALICE_PASSWORD).await.status, StatusCode::OK);
        // After the wait the guesser may try once more, then waits twice as long.
        tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
        assert_eq!(attacker.login("alice", "wrong-password").await.status, StatusCode::UNAUTHORIZED);
        let r = attacker.login("alice", "wrong-password").await;
        assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS);
        assert!(r.body.contains("wait 2 seconds"), "{}", r.body);
        // Another username from the same address has its own allowance.
        assert_eq!(attacker.login("victor", "wrong-password").await.status, StatusCode::UNAUTHORIZED);

        let failed = audit::list(&t.db, None, Some("login_failed"), 50).await.unwrap().entries;
        assert_eq!(failed.len(), 6, "refused attempts are not failures: they never checked a password");
        assert!(failed.iter().all(|e| e.source.as_deref() == Some("203.0.113.9")));
        t.cleanup().await;
    }
}

/// A browser behind a proxy at `proxy` that says the client is `client`.
fn forwarded(req: &mut Request<Body>, header_name: &str, value: &str) {
    req.headers_mut()
        .insert(axum::http::HeaderName::from_bytes(header_name.as_bytes()).unwrap(), value.parse().unwrap());
}

impl Browser {
    async fn login_via(&mut self, header_name: &str, client: &str, user: &str, password: &str) -> Reply {
        let mut req = Request::post("/fn/login")
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header("sec-fetch-site", "same-origin")
            .body(Body::from(format!("username={user}&password={password}&next=%2Fruns")))
            .unwrap();
        forwarded(&mut req, header_name, client);
        self.send(req).await
    }
}

#[tokio::test]
async fn forwarding_headers_count_only_from_trusted_proxies() {
    for t in TestDb::each_backend().await {
        // Off (the default): a client that sends X-Forwarded-For is still its own address,
        // so it can neither dodge the backoff nor write another address into the log.
        let app = setup(&t).await;
        let mut direct = Browser::at(&app, "203.0.113.9");
        for fake in ["198.51.100.1", "198.51.100.2", "198.51.100.3"] {
            let r = direct.login_via("x-forwarded-for", fake, "alice", "wrong-password").await;
            assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{}", r.body);
        }
        let r = direct.login_via("x-forwarded-for", "198.51.100.4", "alice", ALICE_PASSWORD).await;
        assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS, "a new forwarded address does not reset the backoff");
        let failed = audit::list(&t.db, None, Some("login_failed"), 50).await.unwrap().entries;
        assert!(failed.iter().all(|e| e.source.as_deref() == Some("203.0.113.9")), "{failed:?}");
        t.cleanup().await;
    }
    for t in TestDb::each_backend().await {
        // On: requests through the proxy at 10.0.0.5 are keyed on the client it names.
        let settings = Overrides { trusted_proxies: Some(vec!["10.0.0.0/8".into()]), ..Default::default() };
        let app = setup_with(&t, settings).await;
        let mut proxy = Browser::at(&app, "10.0.0.5");
        for _ in 0..3 {
            let r = proxy.login_via("x-forwarded-for", "6.6.6.6, 203.0.113.9", "alice", "wrong-password").await;
            assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{}", r.body);
        }
        let r = proxy.login_via("x-forwarded-for", "203.0.113.9", "alice", ALICE_PASSWORD).await;
        assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS, "the guesser behind the proxy waits");
        // The owner behind the same proxy is not held up by the guesser's misses.
        let mut owner = Browser::at(&app, "10.0.0.5");
        let r = owner.login_via("forwarded", "for=198.51.100.20;proto=https", "alice", ALICE_PASSWORD).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        // A client that talks to Flightdeck directly is not believed.
        let mut direct = Browser::at(&app, "192.0.2.50");
        let r = direct.login_via("x-forwarded-for", "10.0.0.9", "victor", "wrong-password").await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED);
        let entries = audit::list(&t.db, None, None, 50).await.unwrap().entries;
        let sources = |action: &str| -> Vec<String> {
            entries.iter().filter(|e| e.action == action).filter_map(|e| e.source.clone()).collect()
        };
        assert_eq!(sources("login"), ["198.51.100.20"]);
        let mut failed = sources("login_failed");
        failed.sort();
        assert_eq!(failed, ["192.0.2.50", "203.0.113.9", "203.0.113.9", "203.0.113.9"]);
        t.cleanup().await;
    }
}

#[tokio::test]
async fn password_checks_queue_and_unknown_users_cost_the_same() {
    let t = TestDb::sqlite().await;
    let app = setup(&t).await;
    // Twelve guesses at once, each from its own address so no backoff applies.
    let guesses: Vec<_> = (0..12)
        .map(|i| {
            let mut b = Browser::at(&app, &format!("192.0.2.{}", i + 1));
            tokio::spawn(async move { b.login(if i % 2 == 0 { "alice" } else { "nobody" }, "guess").await.status })
        })
        .collect();
    for guess in guesses {
        assert_eq!(guess.await.unwrap(), StatusCode::UNAUTHORIZED, "queued, not refused");
    }
    let peak = app::functions::auth::peak_concurrent_password_checks();
    assert!(
        (1..=app::functions::auth::MAX_CONCURRENT_PASSWORD_CHECKS).contains(&peak),
        "{peak} password checks ran at once"
    );
    // An unknown username is checked against a hash as expensive as a real one.
    let timed = |user: &'static str, ip: String| {
        let app = app.clone();
        async move {
            let mut b = Browser::at(&app, &ip);
            let started = std::time::Instant::now();
            b.login(user, "guess").await;
            started.elapsed()
        }
    };
    let (mut known, mut unknown) = (std::time::Duration::ZERO, std::time::Duration::ZERO);
    for i in 0..6 {
        known += timed("alice", format!("192.0.2.{}", 100 + i)).await;
        unknown += timed("nobody-at-all", format!("192.0.2.{}", 150 + i)).await;
    }
    assert!(unknown * 2 > known, "unknown users took {unknown:?}, known ones {known:?}");
    t.cleanup().await;
}

#[tokio::test]
async fn disabled_users_cannot_sign_in_and_lose_their_sessions_at_once() {
    for t in TestDb::each_backend().await {
        let app = setup(&t).await;
        let mut victor = Browser::new(&app);
        assert_eq!(victor.login("victor", VICTOR_PASSWORD).await.status, StatusCode::OK);
        assert_eq!(victor.get("/runs").await.status, StatusCode::OK);
        let mut alice = Browser::new(&app);
        assert_eq!(alice.login("alice", ALICE_PASSWORD).await.status, StatusCode::OK);
        let r = alice.call("set_user_disabled", "username=victor&disabled=true").await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        assert_eq!(victor.get("/runs").await.status, StatusCode::SEE_OTHER, "the open session ended");
        let r = victor.login("victor", VICTOR_PASSWORD).await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.body);
        assert!(r.body.contains("AccountDisabled"), "{}", r.body);
        let r = alice.call("set_user_disabled", "username=alice&disabled=true").await;
        assert_eq!(r.status, StatusCode::CONFLICT, "nobody disables themselves: {}", r.body);
        let r = alice.call("set_user_disabled", "username=victor&disabled=false").await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        assert_eq!(victor.login("victor", VICTOR_PASSWORD).await.status, StatusCode::OK);
        // Changing roles ends the sessions too.
        let r = alice.call("set_roles", "username=victor&role_viewer=on&role_approver=on").await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        assert_eq!(victor.get("/runs").await.status, StatusCode::SEE_OTHER, "signed out by the role change");
        let actions: Vec<String> =
            audit::list(&t.db, None, None, 50).await.unwrap().entries.into_iter().map(|e| e.action).collect();
        assert!(actions.contains(&"user_disabled".to_string()) && actions.contains(&"user_enabled".to_string()));
        t.cleanup().await;
    }
}

#[tokio::test]
async fn viewers_get_403_for_admin_pages_and_functions() {
    for t in TestDb::each_backend().await {
        let app = setup(&t).await;
        let mut b = Browser::new(&app);
        assert_eq!(b.login("victor", VICTOR_PASSWORD).await.status, StatusCode::OK);
        let r = b.get("/admin/tokens").await;
        assert_eq!(r.status, StatusCode::FORBIDDEN);
        assert!(r.body.contains("needs the") && r.body.contains("admin"), "{}", r.body);
        assert!(r.body.contains("victor"), "the page says who is signed in");
        let r = b.call("create_token", "name=sneaky&scope_read=on").await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.body);
        assert!(tokens::list(&t.db).await.unwrap().is_empty(), "nothing was created");
        let r = b.get("/runs").await;
        assert_eq!(r.status, StatusCode::OK, "viewers read everything");
        t.cleanup().await;
    }
}

#[tokio::test]
async fn server_function_errors_carry_the_status_they_mean() {
    let t = TestDb::sqlite().await;
    let app = setup(&t).await;
    let mut b = Browser::new(&app);
    assert_eq!(b.login("victor", VICTOR_PASSWORD).await.status, StatusCode::OK);
    // Arguments that do not decode are the caller's mistake, not the server's.
    let garbage = Request::post("/fn/load_runs")
        .header(header::CONTENT_TYPE, "application/json")
        .header("sec-fetch-site", "same-origin")
        .body(Body::from(r#"{"params":"#))
        .unwrap();
    let r = b.send(garbage).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert!(r.body.contains("Args") || r.body.contains("Deserialization"), "{}", r.body);
    let r = b.call("load_run", "").await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "a missing argument: {}", r.body);
    // An error a function returns keeps its own status (404 here), as before.
    let r = b.call("load_run", "run_id=no-such-run").await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);
    t.cleanup().await;
}

#[tokio::test]
async fn admins_create_tokens_that_agents_use_until_revoked() {
    for t in TestDb::each_backend().await {
        let app = setup(&t).await;
        let mut b = Browser::new(&app);
        b.login("alice", ALICE_PASSWORD).await;
        let r = b.call("create_token", "name=billing-agent&scope_read=on&scope_approvals=on").await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        let r = b.call("create_token", "name=no-scopes").await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
        assert!(r.body.contains("at least one scope"), "{}", r.body);

        // the secret is shown once, on the next page load
        let page = b.get("/admin/tokens").await;
        assert_eq!(page.status, StatusCode::OK);
        // the listing shows a 12-character prefix; the secret is the full 68 characters
        let secret = page
            .body
            .match_indices("fdk_")
            .map(|(i, _)| {
                page.body[i..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect::<String>()
            })
            .find(|s| s.len() == 68)
            .expect("secret shown");
        let again = b.get("/admin/tokens").await;
        assert!(!again.body.contains(&secret), "shown only once");
        assert!(again.body.contains("billing-agent"));

        let r = api_get(&app, "/api/v1/token", Some(&secret)).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        let v: serde_json::Value = serde_json::from_str(&r.body).unwrap();
        assert_eq!(v["name"], "billing-agent");
        assert_eq!(v["scopes"], serde_json::json!(["approvals", "read"]));
        assert!(tokens::list(&t.db).await.unwrap()[0].last_used_at.is_some(), "last use recorded");

        let id = tokens::list(&t.db).await.unwrap()[0].id;
        let r = b.call("revoke_token", &format!("id={id}")).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        let r = api_get(&app, "/api/v1/token", Some(&secret)).await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED, "revoked tokens stop working");
        let r = b.call("revoke_token", &format!("id={id}")).await;
        assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);

        let actions: Vec<_> =
            audit::list(&t.db, None, None, 10).await.unwrap().entries.into_iter().map(|e| e.action).collect();
        assert_eq!(actions, vec!["token_revoked", "token_created", "login"]);
        t.cleanup().await;
    }
}

#[tokio::test]
async fn the_api_refuses_missing_and_unknown_tokens_clearly() {
    for t in TestDb::each_backend().await {
        let app = setup(&t).await;
        let r = api_get(&app, "/api/v1/token", None).await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED);
        assert_eq!(r.headers[header::WWW_AUTHENTICATE], "Bearer realm=\"flightdeck\"");
        assert!(r.body.contains("missing bearer token"), "{}", r.body);
        let r = api_get(&app, "/api/v1/token", Some("fdk_not-a-real-token")).await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED);
        assert!(r.body.contains("unknown or revoked token"), "{}", r.body);
        let r = api_get(&app, "/api/v1/openapi.json", None).await;
        assert_eq!(r.status, StatusCode::OK, "the API description is public");
        assert!(r.body.contains("\"openapi\":\"3.1.0\""));
        assert!(r.body.contains("\"/approvals/{id}\""), "the approval API is described");
        assert!(r.body.contains("\"/escalations/{id}\""), "the escalation API is described");
        t.cleanup().await;
    }
}

#[tokio::test]
async fn cross_site_posts_are_refused_and_change_nothing() {
    for t in TestDb::each_backend().await {
        let app = setup(&t).await;
        let mut b = Browser::new(&app);
        b.login("alice", ALICE_PASSWORD).await;
        let r = b.call_from("create_token", "name=forged&scope_read=on", "cross-site").await;
        assert_eq!(r.status, StatusCode::FORBIDDEN);
        assert!(r.body.contains("cross-site request refused"), "{}", r.body);
        let forged = Request::post("/fn/logout")
            .header(header::ORIGIN, "http://evil.example")
            .header(header::HOST, "127.0.0.1:3000")
            .body(Body::empty())
            .unwrap();
        assert_eq!(b.send(forged).await.status, StatusCode::FORBIDDEN);
        assert!(tokens::list(&t.db).await.unwrap().is_empty());
        assert_eq!(b.get("/runs").await.status, StatusCode::OK, "still signed in");
        t.cleanup().await;
    }
}

#[tokio::test]
async fn password_reset_signs_the_user_out_everywhere() {
    for t in TestDb::each_backend().await {
        let app = setup(&t).await;
        let mut victor = Browser::new(&app);
        victor.login("victor", VICTOR_PASSWORD).await;
        assert_eq!(victor.get("/runs").await.status, StatusCode::OK);
        let mut alice = Browser::new(&app);
        alice.login("alice", ALICE_PASSWORD).await;
        let r = alice.call("reset_password", "username=victor").await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        assert_eq!(victor.get("/runs").await.status, StatusCode::SEE_OTHER, "old session ended");
        let page = alice.get("/admin/users").await;
        assert!(page.body.contains("new password for victor"), "the new password is shown once");

        // the last administrator cannot drop the admin role
        let r = alice.call("set_roles", "username=alice&role_viewer=on").await;
        assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
        assert!(r.body.contains("last administrator"), "{}", r.body);
        t.cleanup().await;
    }
}

#[tokio::test]
async fn admins_edit_tool_policies_with_validation_and_audit() {
    for t in TestDb::each_backend().await {
        let app = setup(&t).await;
        let mut alice = Browser::new(&app);
        alice.login("alice", ALICE_PASSWORD).await;
        let r = alice.call("save_policy", "pattern=send_*&side_effect=irreversible").await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        let r = alice.call("save_policy", "pattern=send_*&side_effect=dangerous").await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST);
        assert!(r.body.contains("unknown side effect"), "{}", r.body);
        let page = alice.get("/admin/policies").await;
        assert_eq!(page.status, StatusCode::OK);
        assert!(page.body.contains("send_*") && page.body.contains("irreversible"));
        let listed = store::policies::list(&t.db).await.unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].side_effect, domain::canonical::SideEffect::Irreversible);

        let mut victor = Browser::new(&app);
        victor.login("victor", VICTOR_PASSWORD).await;
        assert_eq!(victor.call("delete_policy", "pattern=send_*").await.status, StatusCode::FORBIDDEN);
        assert_eq!(alice.call("delete_policy", "pattern=send_*").await.status, StatusCode::OK);
        assert_eq!(alice.call("delete_policy", "pattern=send_*").await.status, StatusCode::NOT_FOUND);
        let actions: Vec<_> =
            audit::list(&t.db, None, None, 3).await.unwrap().entries.into_iter().map(|e| e.action).collect();
        assert_eq!(actions, vec!["tool_policy_deleted", "login", "tool_policy_saved"], "victor signed in between");
        t.cleanup().await;
    }
}

/// Stores a run whose tool call carries hostile text and a duplicated email.
async fn store_hostile_run(db: &store::Db) {
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::tonic::common::v1::{any_value::Value as V, AnyValue, KeyValue};
    use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span, Status};
    let kv = |k: &str, v: &str| KeyValue {
        key: k.into(),
        value: Some(AnyValue { value: Some(V::StringValue(v.into())) }),
        ..Default::default()
    };
    let span = |id: u8, parent: Option<u8>, name: &str, attrs: Vec<KeyValue>| Span {
        trace_id: vec![0xab; 16],
        span_id: vec![id; 8],
        parent_span_id: parent.map(|p| vec![p; 8]).unwrap_or_default(),
        name: name.into(),
        start_time_unix_nano: 1_800_000_000_000_000_000 + u64::from(id) * 1_000_000,
        end_time_unix_nano: 1_800_000_000_000_000_000 + u64::from(id) * 1_000_000 + 400_000,
        attributes: attrs,
        ..Default::default()
    };
    let email = |id: u8, ext: &str| {
        span(
            id,
            Some(1),
            "tool send_email <img src=x onerror=alert(2)>",
            vec![
                kv("tool.name", "send_email"),
                kv("tool.side_effect", "irreversible"),
                kv("tool.idempotency_key", "k-hostile"),
                kv("tool.external_id", ext),
                kv("gen_ai.tool.call.arguments", r#"{"body":"<script>alert(1)</script>"}"#),
            ],
        )
    };
    let mut root = span(1, None, "agent.run", vec![kv("run.id", "run-hostile"), kv("run.terminal_reason", "budget")]);
    root.status = Some(Status { code: 0, message: String::new() });
    let request = ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            scope_spans: vec![ScopeSpans {
                spans: vec![root, email(2, "msg_a"), email(3, "msg_b")],
                ..Default::default()
            }],
            ..Default::default()
        }],
    };
    let settings = ingest::pipeline::IngestSettings::default();
    let prepared = ingest::pipeline::prepare(&request, &settings, &[]);
    store::write::commit(db, &prepared.spans, settings.body_policy).await.unwrap();
}

#[tokio::test]
async fn run_pages_show_runs_search_duplicates_and_render_agent_text_as_text() {
    for t in TestDb::each_backend().await {
        let app = setup(&t).await;
        store_hostile_run(&t.db).await;
        let mut b = Browser::new(&app);
        b.login("victor", VICTOR_PASSWORD).await;
        let list = b.get("/runs?q=msg_b").await;
        assert_eq!(list.status, StatusCode::OK);
        assert!(list.body.contains("run-hostile"), "found by external id");
        assert!(list.body.contains("data-testid=\"count-budget\""), "counts per reason");
        let none = b.get("/runs?terminal_reason=completed").await;
        assert!(!none.body.contains("href=\"/runs/run-hostile\""), "filtered out");

        let page = b.get("/runs/run-hostile").await;
        assert_eq!(page.status, StatusCode::OK);
        assert!(page.body.contains("succeeded twice for key "), "{}", page.body);
        assert!(page.body.contains("msg_a and msg_b"));
        assert!(page.body.contains("did not finish its task"), "budget stops are not success");
        assert!(!page.body.contains("<img src=x"), "span names are escaped");
        assert!(page.body.contains("&lt;img src=x onerror=alert(2)&gt;"));

        let span = "abababababababababababababababab%3A0202020202020202";
        let panel = b.get(&format!("/runs/run-hostile?span={span}")).await;
        assert!(panel.body.contains("data-testid=\"span-panel\""));
        assert!(!panel.body.contains("<script>alert(1)</script>"), "bodies are escaped");
        assert!(panel.body.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));

        let download = b.get("/runs/run-hostile/replay.json").await;
        assert_eq!(download.status, StatusCode::OK);
        assert!(download.headers[header::CONTENT_DISPOSITION].to_str().unwrap().contains("run-hostile.replay.json"));
        let fixture: serde_json::Value = serde_json::from_str(&download.body).unwrap();
        assert_eq!(fixture["tool_calls"][0]["arguments"]["body"], "<script>alert(1)</script>");

        // the hydrated page calls the list function with every filter empty
        let refresh = Request::post("/fn/load_runs")
            .header(header::CONTENT_TYPE, "application/json")
            .header("sec-fetch-site", "same-origin")
            .body(Body::from(r#"{"params":{}}"#))
            .unwrap();
        let r = b.send(refresh).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        assert!(r.body.contains("run-hostile"));

        let missing = b.get("/runs/no-such-run").await;
        assert!(missing.body.contains("run `no-such-run` not found"), "{}", missing.body);
        let mut anonymous = Browser::new(&app);
        assert_eq!(anonymous.get("/runs/run-hostile/replay.json").await.status, StatusCode::SEE_OTHER);
        t.cleanup().await;
    }
}

#[path = "common/spans.rs"]
#[allow(dead_code)] // this file uses part of it
mod spans;

#[tokio::test]
async fn every_answer_carries_security_headers_and_pages_a_nonce_policy() {
    let t = TestDb::sqlite().await;
    let app = setup(&t).await;
    let mut b = Browser::new(&app);
    let login = b.get("/login").await;
    assert_eq!(login.status, StatusCode::OK);
    let csp = login.headers[header::CONTENT_SECURITY_POLICY].to_str().unwrap().to_string();
    assert!(csp.contains("frame-ancestors 'none'") && csp.contains("object-src 'none'"), "{csp}");
    assert!(csp.contains("'wasm-unsafe-eval'") && !csp.contains("'unsafe-eval' "), "{csp}");
    // Inline scripts run only with this render's nonce, and every one carries it.
    let nonce = csp.split("'nonce-").nth(1).and_then(|rest| rest.split('\'').next()).expect("a nonce").to_string();
    assert!(nonce.len() >= 16, "{nonce}");
    let scripts = login.body.matches("<script").count();
    let executable = scripts - login.body.matches("type=\"application/json\"").count();
    assert!(executable >= 1, "the hydration script");
    assert_eq!(login.body.matches(&format!("nonce=\"{nonce}\"")).count(), executable, "{}", login.body);
    let again = b.get("/login").await;
    assert!(!again.headers[header::CONTENT_SECURITY_POLICY].to_str().unwrap().contains(&nonce), "a fresh nonce");

    for (path, r) in [("/login", login), ("/api/v1/token", api_get(&app, "/api/v1/token", None).await)] {
        assert_eq!(r.headers["x-content-type-options"], "nosniff", "{path}");
        assert_eq!(r.headers["x-frame-options"], "DENY", "{path}");
        assert_eq!(r.headers[header::REFERRER_POLICY], "same-origin", "{path}");
        assert_eq!(r.headers[header::CACHE_CONTROL], "no-store", "{path}");
        assert!(r.headers[header::CONTENT_SECURITY_POLICY].to_str().unwrap().contains("frame-ancestors 'none'"));
    }
    let api = api_get(&app, "/api/v1/token", None).await;
    assert!(api.headers[header::CONTENT_SECURITY_POLICY].to_str().unwrap().starts_with("default-src 'none'"));
    b.login("alice", ALICE_PASSWORD).await;
    let page = b.get("/runs").await;
    assert_eq!(page.headers[header::CACHE_CONTROL], "no-store", "signed-in pages are never cached");
    t.cleanup().await;
}

#[tokio::test]
async fn head_is_guarded_like_get_and_malformed_paths_are_400() {
    let t = TestDb::sqlite().await;
    let app = setup(&t).await;
    let head = |path: &str, cookie: Option<String>| {
        let mut req = Request::head(path);
        if let Some(c) = cookie {
            req = req.header(header::COOKIE, c);
        }
        req.body(Body::empty()).unwrap()
    };
    let mut anonymous = Browser::new(&app);
    for path in ["/runs", "/approvals", "/admin/users"] {
        let r = anonymous.send(head(path, None)).await;
        assert_eq!(r.status, StatusCode::SEE_OTHER, "HEAD {path}");
    }
    let mut b = Browser::new(&app);
    b.login("victor", VICTOR_PASSWORD).await;
    let r = b.send(head("/admin/users", None)).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "HEAD needs the role GET needs");
    for path in ["/runs/%a%C3%A9", "/runs/%", "/runs/%C3", "/approvals/%zz"] {
        let r = b.get(path).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{path}: {}", r.body);
        assert!(r.body.contains("malformed URL path"), "{}", r.body);
    }
    // A run id with `%` and `/` in it is decoded exactly once.
    spans::ingest(
        &t.db,
        vec![spans::span_at(9, 1, None, "root", 1_800_000_000_000_000_000, vec![spans::kv("run.id", "a%41/b")])],
    )
    .await;
    // A tool call whose arguments carried a key is flagged on the run page.
    spans::ingest(
        &t.db,
        vec![
            spans::span_at(8, 1, None, "root", 1_800_000_000_000_000_000, vec![spans::kv("run.id", "run-leaky")]),
            spans::span_at(
                8,
                2,
                Some(1),
                "execute_tool call_api",
                1_800_000_000_000_000_000,
                vec![
                    spans::kv("gen_ai.operation.name", "execute_tool"),
                    spans::kv("gen_ai.tool.name", "call_api"),
                    spans::kv(
                        "gen_ai.tool.call.arguments",
                        r#"{"url":"https://x","key":"sk_live_4eC39HqLyjWDarjtT1zdp7dc"}"#,
                    ),
                ],
            ),
        ],
    )
    .await;
    let leaky = b.get("/runs/run-leaky").await;
    assert!(leaky.body.contains("flag-credential") && leaky.body.contains("carried a credential"), "{}", leaky.body);
    assert!(leaky.body.contains("(call_api)"));
    assert!(!leaky.body.contains("sk_live_4eC3"));
    let page = b.get("/runs/a%2541%2Fb").await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    // `<!>` is a hydration marker (Leptos puts one after dynamic text), not content.
    assert!(page.body.replace("<!>", "").contains("<code>a%41/b</code>"), "the run decoded once, not as aA/b");
    t.cleanup().await;
}

#[tokio::test]
async fn next_after_sign_in_stays_on_this_site_and_cannot_break_the_redirect() {
    let t = TestDb::sqlite().await;
    let app = setup(&t).await;
    for (next, expected) in [
        ("%2Fapprovals%3Ftool%3Dx", "/approvals?tool=x"),
        ("%2F%09%2Fevil.example", "/runs"),
        ("%2F%0A%2Fevil.example", "/runs"),
        ("%2Fruns%0D%0ASet-Cookie%3A%20x%3D1", "/runs"),
        ("%2F%2Fevil.example", "/runs"),
        ("%2F%5Cevil.example", "/runs"),
        ("%2F%252F%252Fevil.example", "/runs"),
        ("https%3A%2F%2Fevil.example", "/runs"),
    ] {
        // As a plain form post (no JavaScript): the answer is a redirect.
        let mut b = Browser::at(&app, "192.0.2.77");
        let req = Request::post("/fn/login")
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header(header::ACCEPT, "text/html")
            .header("sec-fetch-site", "same-origin")
            .body(Body::from(format!("username=alice&password={ALICE_PASSWORD}&next={next}")))
            .unwrap();
        let r = b.send(req).await;
        assert!(r.status.is_redirection(), "{next}: {} {}", r.status, r.body);
        assert_eq!(r.headers[header::LOCATION], expected, "{next}");
    }
    t.cleanup().await;
}

#[tokio::test]
async fn cookies_are_secure_when_the_public_url_is_https() {
    let t = TestDb::sqlite().await;
    users::create(&t.db, "alice", &password::hash(ALICE_PASSWORD), &[Role::Viewer]).await.unwrap();
    let config =
        Config::resolve(Overrides { public_url: Some("https://fd.example".into()), ..Default::default() }, None)
            .unwrap();
    let state = AppState::unconfigured(t.db.clone(), flightdeck::commands::serve::leptos_options(&config));
    let app = flightdeck::web::router(state, &config);
    let mut b = Browser::new(&app);
    let r = b.login("alice", ALICE_PASSWORD).await;
    let set_cookie = r.headers[header::SET_COOKIE].to_str().unwrap();
    assert!(set_cookie.contains("Secure"), "{set_cookie}");
    assert!(r.headers[header::STRICT_TRANSPORT_SECURITY].to_str().unwrap().contains("max-age="));
    t.cleanup().await;
}

/// Stores `count` runs of `agent` that each called `send_email` once, a second apart,
/// the first starting at `first_ns`; run ids are `{prefix}-{n}`.
async fn store_email_runs(db: &store::Db, prefix: &str, agent: &str, count: u64, first_ns: u64) {
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::tonic::common::v1::{any_value::Value as V, AnyValue, KeyValue};
    use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
    let kv = |k: &str, v: &str| KeyValue {
        key: k.into(),
        value: Some(AnyValue { value: Some(V::StringValue(v.into())) }),
        ..Default::default()
    };
    let settings = ingest::pipeline::IngestSettings::default();
    for batch in (0..count).collect::<Vec<_>>().chunks(2_000) {
        let mut spans = Vec::new();
        for &n in batch {
            let mut trace_id = format!("{prefix}-{n}").into_bytes();
            trace_id.resize(16, 0);
            let start = first_ns + n * 1_000_000_000;
            let span = |id: u8, parent: Option<u8>, name: &str, attributes| Span {
                trace_id: trace_id.clone(),
                span_id: vec![id; 8],
                parent_span_id: parent.map(|p| vec![p; 8]).unwrap_or_default(),
                name: name.into(),
                start_time_unix_nano: start + u64::from(id),
                end_time_unix_nano: start + 1_000_000,
                attributes,
                ..Default::default()
            };
            let run_id = format!("{prefix}-{n}");
            spans.push(span(1, None, "agent.run", vec![kv("run.id", &run_id), kv("gen_ai.agent.name", agent)]));
            spans.push(span(2, Some(1), "tool send_email", vec![kv("tool.name", "send_email")]));
        }
        let request = ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                scope_spans: vec![ScopeSpans { spans, ..Default::default() }],
                ..Default::default()
            }],
        };
        let prepared = ingest::pipeline::prepare(&request, &settings, &[]);
        store::write::commit(db, &prepared.spans, settings.body_policy).await.unwrap();
    }
}

/// A token with the `read` scope, for `GET /api/v1/runs`.
async fn reader_token(db: &store::Db) -> String {
    let (secret, prefix) = app::auth::secrets::generate_token();
    let new = tokens::NewToken {
        name: "reader",
        prefix: &prefix,
        secret_sha256: &app::auth::secrets::sha256_hex(&secret),
        scopes: &[domain::access::Scope::Read],
        created_by: None,
    };
    tokens::create(db, new).await.unwrap();
    secret
}

/// The text of the run list's note with this test id (where a window stopped), without
/// the hydration markers.
fn window_note(body: &str, test_id: &str) -> Option<String> {
    let note = body.split(&format!("data-testid=\"{test_id}\"")).nth(1)?;
    Some(note.split("</p>").next().unwrap_or_default().replace("<!>", ""))
}

/// Checks that a window's `note` names where it stopped (the start of run `bill-0`) and
/// returns that point and the note's link to the runs before it, whose `until` is that
/// point.
async fn window_start_and_link(db: &store::Db, note: &str) -> (chrono::DateTime<chrono::Utc>, String) {
    let sql = store::sql::Sql::new("SELECT started_ns FROM runs WHERE run_id = 'bill-0'");
    let oldest = chrono::DateTime::from_timestamp_nanos(db.fetch_one_value::<i64>(sql).await.unwrap());
    assert!(note.contains(&oldest.format("%Y-%m-%d %H:%M:%S UTC").to_string()), "{note}");
    let href = note.split("href=\"").nth(1).and_then(|h| h.split('"').next()).unwrap().replace("&amp;", "&");
    let until = oldest.to_rfc3339_opts(chrono::SecondsFormat::Nanos, true).replace(':', "%3A");
    assert!(href.contains(&format!("until={until}")), "{href}");
    (oldest, href)
}

/// A search for a tool most runs call, with a filter none of its newest runs pass, reads
/// the newest 2,500 of them, says so, and links to the runs before, where the match is;
/// the API gives the same point to pass as `until`.
#[tokio::test]
async fn a_filtered_search_says_where_it_stopped_and_links_to_the_runs_before() {
    let t = TestDb::sqlite().await;
    let app = setup(&t).await;
    let now_ns = store::now_ms() as u64 * 1_000_000;
    let window = domain::run_query::SEARCH_WINDOW as u64;
    store_email_runs(&t.db, "docs", "docs-bot", 1, now_ns - (window + 100) * 1_000_000_000).await;
    store_email_runs(&t.db, "bill", "billing-bot", window, now_ns - window * 1_000_000_000).await;
    let mut b = Browser::new(&app);
    b.login("victor", VICTOR_PASSWORD).await;

    let page = b.get("/runs?q=send_email&agent=docs").await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains("No runs match these filters."), "{}", page.body);
    assert!(!page.body.contains("href=\"/runs/docs-0\""));
    let note = window_note(&page.body, "search-window").expect("the page says where it stopped");
    let said = "Searched the newest 2\u{202f}500 runs that called <code>send_email</code>";
    assert!(note.contains(said), "{note}");
    // The oldest of the newest 2,500: the first billing run.
    let (oldest, href) = window_start_and_link(&t.db, &note).await;
    assert!(href.contains("agent=docs"), "{href}");

    let before = b.get(&href).await;
    assert!(before.body.contains("href=\"/runs/docs-0\""), "the docs run is before that point");
    assert!(!before.body.contains("data-testid=\"search-window\""), "one run before it: no window");

    let secret = reader_token(&t.db).await;
    let api = api_get(&app, "/api/v1/runs?q=send_email&agent=docs", Some(&secret)).await;
    let body: serde_json::Value = serde_json::from_str(&api.body).unwrap();
    assert_eq!(body["runs"], serde_json::json!([]), "{body}");
    let since = body["searched_since"].as_str().expect("the API says where the search stopped");
    assert_eq!(chrono::DateTime::parse_from_rfc3339(since).unwrap(), oldest);
    t.cleanup().await;
}

/// A list whose filters no one index answers (here two agents sorted by cost) reads the
/// newest 2,500 runs, says so, and links to the runs before; the API gives the same
/// point as `filtered_since`.
#[tokio::test]
async fn a_list_no_one_index_answers_says_where_it_stopped_and_links_to_the_runs_before() {
    let t = TestDb::sqlite().await;
    let app = setup(&t).await;
    let now_ns = store::now_ms() as u64 * 1_000_000;
    let window = domain::run_query::FILTER_WINDOW as u64;
    store_email_runs(&t.db, "docs", "docs-bot", 1, now_ns - (window + 100) * 1_000_000_000).await;
    store_email_runs(&t.db, "bill", "billing-bot", window, now_ns - window * 1_000_000_000).await;
    let mut b = Browser::new(&app);
    b.login("victor", VICTOR_PASSWORD).await;

    let page = b.get("/runs?agent=bot&sort=cost").await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains("href=\"/runs/bill-"), "{}", page.body);
    assert!(!page.body.contains("href=\"/runs/docs-0\""), "the docs run is before the window");
    assert!(!page.body.contains("data-testid=\"search-window\""), "no search term");
    let note = window_note(&page.body, "filter-window").expect("the page says where it stopped");
    assert!(note.contains("These filters were tested on the newest 2\u{202f}500 runs, back to"), "{note}");
    let (oldest, href) = window_start_and_link(&t.db, &note).await;
    assert!(href.contains("sort=cost"), "{href}");

    let before = b.get(&href).await;
    assert!(before.body.contains("href=\"/runs/docs-0\""), "the docs run is before that point");
    assert!(!before.body.contains("data-testid=\"filter-window\""), "one run before it: no window");

    // One agent's runs, more than the window: the note names the agent.
    let billing = b.get("/runs?agent=billing&sort=cost").await;
    let note = window_note(&billing.body, "filter-window").expect("a window of billing's runs");
    assert!(note.contains("runs of the agent <code>billing-bot</code>"), "{note}");

    let secret = reader_token(&t.db).await;
    let api = api_get(&app, "/api/v1/runs?agent=bot&sort=cost&limit=500", Some(&secret)).await;
    let body: serde_json::Value = serde_json::from_str(&api.body).unwrap();
    let since = body["filtered_since"].as_str().expect("the API says where the list stopped");
    assert_eq!(chrono::DateTime::parse_from_rfc3339(since).unwrap(), oldest);
    assert!(body.get("searched_since").is_none(), "{body}");
    t.cleanup().await;
}
