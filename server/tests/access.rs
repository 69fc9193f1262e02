//! Every route by every role, built from the router itself: the page list Leptos serves,
//! the server functions registered in this binary, and the agent API's route table (the
//! list `api::router` is built from). A route added without a guard, or without an entry
//! in the expectations below, fails this suite.

use app::auth::password;
use app::state::AppState;
use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use axum::Router;
use domain::access::{Role, Scope};
use flightdeck::config::{Config, Overrides};
use store::testing::TestDb;
use store::users;
use tower::ServiceExt;

mod common;

const PASSWORD: &str = "a-long-test-password-1";

/// The role each server function needs, and a form body that gets it past argument
/// decoding to its guard. `None`: public (signing in and out).
const SERVER_FUNCTIONS: &[(&str, Option<Role>, &str)] = &[
    ("login", None, ""),
    ("logout", None, ""),
    ("load_inbox", Some(Role::Viewer), ""),
    ("load_approval_history", Some(Role::Viewer), ""),
    ("load_approval", Some(Role::Viewer), "id=apr_x"),
    ("pending_approvals", Some(Role::Viewer), ""),
    ("load_run_approvals", Some(Role::Viewer), "run_id=r"),
    ("load_run_calls", Some(Role::Viewer), "run_id=r"),
    ("settle_call", Some(Role::Operator), "id=call_x&happened=yes"),
    // Deciding needs the role the tool's policy names; signing in is the first guard.
    ("decide_approval", Some(Role::Viewer), "id=apr_x&decision=approve&payload_sha256=x"),
    ("load_bulk", Some(Role::Viewer), "ids=apr_x"),
    ("decide_bulk", Some(Role::Viewer), "items=apr_x:y&decision=approve"),
    ("load_rules", Some(Role::Admin), ""),
    ("save_rule", Some(Role::Admin), "name=r&tool_pattern=t&expression=true&action=auto_approve"),
    ("delete_rule", Some(Role::Admin), "name=r"),
    ("try_rule", Some(Role::Admin), "tool_pattern=t&expression=true&action=auto_approve"),
    ("link_slack_user", Some(Role::Admin), "slack_user_id=U1&username=zed"),
    ("unlink_slack_user", Some(Role::Admin), "slack_user_id=U1"),
    ("cancel_approval", Some(Role::Admin), "id=apr_x"),
    ("load_alerts", Some(Role::Viewer), "resolved=false"),
    ("load_alert", Some(Role::Viewer), "id=1"),
    ("alert_counts", Some(Role::Viewer), ""),
    ("acknowledge_alert", Some(Role::Operator), "id=1"),
    ("load_alert_rules", Some(Role::Viewer), ""),
    ("save_alert_rule", Some(Role::Admin), "rule=irreversible_without_approval&severity=page"),
    ("load_runs", Some(Role::Viewer), r#"{"params":{}}"#),
    ("load_run", Some(Role::Viewer), "run_id=r"),
    ("load_span", Some(Role::Viewer), "run_id=r&trace_id=t&span_id=s"),
    ("load_escalations", Some(Role::Viewer), "resolved=false"),
    ("escalation_backlog", Some(Role::Viewer), ""),
    ("load_escalation", Some(Role::Viewer), "id=esc_x"),
    ("load_run_escalations", Some(Role::Viewer), "run_id=r"),
    ("claim_escalation", Some(Role::Operator), "id=esc_x"),
    ("release_escalation", Some(Role::Operator), "id=esc_x"),
    ("note_escalation", Some(Role::Operator), "id=esc_x&note=hi"),
    ("tick_escalation_item", Some(Role::Operator), "id=esc_x&index=0&done=true"),
    ("resolve_escalation", Some(Role::Operator), "id=esc_x&outcome=completed_by_human&note=done"),
    ("load_trends", Some(Role::Viewer), "range=24h"),
    ("load_tokens_page", Some(Role::Admin), ""),
    ("create_token", Some(Role::Admin), "name=t&scope_read=on"),
    ("revoke_token", Some(Role::Admin), "id=1"),
    ("load_users_page", Some(Role::Admin), ""),
    ("create_user", Some(Role::Admin), "username=zed"),
    ("reset_password", Some(Role::Admin), "username=zed"),
    ("set_roles", Some(Role::Admin), "username=zed&role_viewer=on"),
    ("set_user_disabled", Some(Role::Admin), "username=zed&disabled=true"),
    ("load_audit_page", Some(Role::Admin), ""),
    ("load_policies", Some(Role::Admin), ""),
    ("save_policy", Some(Role::Admin), "pattern=x&side_effect=read"),
    ("delete_policy", Some(Role::Admin), "pattern=x"),
    ("load_tools", Some(Role::Admin), ""),
    ("classify_tool", Some(Role::Admin), "tool=x&side_effect=read"),
    ("load_prices", Some(Role::Admin), ""),
    ("save_price", Some(Role::Admin), "pattern=x&valid_from=2026-01-01&input=1&output=1"),
    ("delete_price", Some(Role::Admin), "pattern=x&valid_from=2026-01-01"),
    ("recompute_runs", Some(Role::Admin), "since=2026-01-01&until=2026-01-02"),
    ("load_webhooks_page", Some(Role::Admin), "failed_only=false"),
    ("send_test_alert", Some(Role::Admin), "route=default"),
    ("create_silence", Some(Role::Operator), "rule=approval_violation&minutes=60&reason=x"),
    ("end_silence", Some(Role::Operator), "id=sil_x"),
    (
        "create_maintenance_window",
        Some(Role::Operator),
        "sat=on&from=22:00&to=02:00&weeks=1&reason=x&rule=deduped_spike",
    ),
];

async fn setup(t: &TestDb) -> Router {
    let config = Config::resolve(Overrides::default(), None).unwrap();
    let hash = password::hash(PASSWORD);
    // One user per role that lacks it (everyone is a viewer).
    for (name, roles) in [
        ("no-admin", vec![Role::Viewer, Role::Approver, Role::Operator]),
        ("no-operator", vec![Role::Viewer, Role::Approver, Role::Admin]),
        ("no-approver", vec![Role::Viewer, Role::Operator, Role::Admin]),
    ] {
        users::create(&t.db, name, &hash, &roles).await.unwrap();
    }
    let state = AppState::unconfigured(t.db.clone(), flightdeck::commands::serve::leptos_options(&config));
    flightdeck::web::router(state, &config)
}

async fn send(app: &Router, req: Request<Body>) -> (StatusCode, axum::http::HeaderMap, String) {
    let res = app.clone().oneshot(req).await.unwrap();
    let (status, headers) = (res.status(), res.headers().clone());
    let body = axum::body::to_bytes(res.into_body(), 4 << 20).await.unwrap();
    (status, headers, String::from_utf8_lossy(&body).into_owned())
}

/// A server-function call as the hydrated page makes it: a form, or JSON for the
/// functions that take JSON.
fn call(endpoint: &str, form: &str, cookie: Option<&str>) -> Request<Body> {
    let content_type = if form.starts_with('{') { "application/json" } else { "application/x-www-form-urlencoded" };
    let mut req = Request::post(format!("/fn/{endpoint}"))
        .header(header::CONTENT_TYPE, content_type)
        .header("sec-fetch-site", "same-origin");
    if let Some(c) = cookie {
        req = req.header(header::COOKIE, c);
    }
    req.body(Body::from(form.to_string())).unwrap()
}

/// Signs `user` in and returns the session cookie.
async fn sign_in(app: &Router, user: &str) -> String {
    let (status, headers, body) = send(app, call("login", &format!("username={user}&password={PASSWORD}"), None)).await;
    assert_eq!(status, StatusCode::OK, "{user}: {body}");
    headers[header::SET_COOKIE].to_str().unwrap().split(';').next().unwrap().to_string()
}

/// A page path with its parameters filled in.
fn concrete(path: &str) -> String {
    path.split('/')
        .map(|part| if part.starts_with(':') || part.starts_with('{') { "x1" } else { part })
        .collect::<Vec<_>>()
        .join("/")
}

#[tokio::test]
async fn every_page_is_guarded_for_get_and_head() {
    let t = TestDb::sqlite().await;
    let app = setup(&t).await;
    let pages = flightdeck::web::page_paths();
    assert!(pages.len() >= 15, "the router lists its pages: {pages:?}");
    let no_admin = sign_in(&app, "no-admin").await;
    for page in &pages {
        let path = concrete(page);
        for method in [Method::GET, Method::HEAD] {
            let req = Request::builder().method(method.clone()).uri(&path).body(Body::empty()).unwrap();
            let (status, headers, _) = send(&app, req).await;
            if path == "/login" {
                assert_eq!(status, StatusCode::OK, "{method} {path}");
                continue;
            }
            assert_eq!(status, StatusCode::SEE_OTHER, "anonymous {method} {path}");
            assert!(headers[header::LOCATION].to_str().unwrap().starts_with("/login?next="), "{method} {path}");
            if path.starts_with("/admin") {
                let req = Request::builder()
                    .method(method.clone())
                    .uri(&path)
                    .header(header::COOKIE, &no_admin)
                    .body(Body::empty())
                    .unwrap();
                assert_eq!(send(&app, req).await.0, StatusCode::FORBIDDEN, "non-admin {method} {path}");
            }
        }
    }
    t.cleanup().await;
}

#[tokio::test]
async fn every_server_function_checks_its_role() {
    let t = TestDb::sqlite().await;
    let app = setup(&t).await;
    // Registered in this binary: every one must be in the table above.
    let registered: Vec<String> =
        server_fn::axum::server_fn_paths().map(|(path, _)| path.trim_start_matches("/fn/").to_string()).collect();
    assert!(registered.len() >= 40, "{registered:?}");
    for name in &registered {
        assert!(
            SERVER_FUNCTIONS.iter().any(|(n, _, _)| n == name),
            "server function `{name}` has no expected role in tests/access.rs: add it, with its guard"
        );
    }
    let cookie_without = |role: Role| match role {
        Role::Admin => "no-admin",
        Role::Operator => "no-operator",
        Role::Approver => "no-approver",
        Role::Viewer => unreachable!("every signed-in user is a viewer"),
    };
    let mut cookies = std::collections::HashMap::new();
    for user in ["no-admin", "no-operator", "no-approver"] {
        cookies.insert(user, sign_in(&app, user).await);
    }
    for (name, role, form) in SERVER_FUNCTIONS {
        assert!(registered.contains(&name.to_string()), "`{name}` is listed but not registered");
        let Some(role) = role else { continue };
        let (status, _, body) = send(&app, call(name, form, None)).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "anonymous {name}: {body}");
        if *role != Role::Viewer {
            let cookie = &cookies[cookie_without(*role)];
            let (status, _, body) = send(&app, call(name, form, Some(cookie))).await;
            assert_eq!(status, StatusCode::FORBIDDEN, "{name} without {role}: {body}");
        }
    }
    t.cleanup().await;
}

#[tokio::test]
async fn every_api_route_needs_a_token_with_its_scope() {
    let t = TestDb::sqlite().await;
    let app = setup(&t).await;
    let routes = flightdeck::api::routes();
    assert!(routes.len() >= 9);
    for route in routes {
        let path = format!("/api/v1{}", concrete(route.path));
        let request = |token: Option<&str>| {
            let mut req = Request::builder().method(route.method.clone()).uri(&path);
            if let Some(t) = token {
                req = req.header(header::AUTHORIZATION, format!("Bearer {t}"));
            }
            req.header(header::CONTENT_TYPE, "application/json").body(Body::from("{}")).unwrap()
        };
        let (status, _, body) = send(&app, request(None)).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{} {path} without a token: {body}", route.method);
        if let Some(scope) = route.scope {
            let others: Vec<Scope> = Scope::ALL.iter().copied().filter(|s| *s != scope).collect();
            let token = common::token(&t.db, &format!("without-{scope}"), &others).await;
            let (status, _, body) = send(&app, request(Some(&token))).await;
            assert_eq!(status, StatusCode::FORBIDDEN, "{} {path} without `{scope}`: {body}", route.method);
        }
    }
    t.cleanup().await;
}
