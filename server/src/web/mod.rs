//! The HTTP surface on the UI/API listener: pages and server functions (Leptos), the
//! browser bundle under `/pkg`, the agent REST API, health checks, `/metrics`, and the
//! layers in front of them.

pub mod assets;
mod client_address;
mod csrf;
mod current_user;
mod fn_status;
pub mod headers;
mod page_guard;
pub mod paths;

use crate::api;
use crate::config::Config;
use crate::health;
use crate::otlp::service::IngestCounters;
use crate::otlp::IngestService;
use app::app::{shell, App};
use app::state::AppState;
use axum::middleware::{from_fn, from_fn_with_state};
use axum::routing::get;
use axum::Router;
use leptos::prelude::provide_context;
use leptos_axum::{generate_route_list, AxumRouteListing, LeptosRoutes};
use std::sync::{Arc, OnceLock};
use store::sessions::SessionStoreAny;
use tower_http::trace::TraceLayer;
use tower_sessions::cookie::SameSite;
use tower_sessions::{Expiry, SessionManagerLayer};

pub use csrf::cross_site_verdict;

/// The whole application router; tests drive it directly with `oneshot`. Its `/metrics`
/// reports ingest counters of zero: use [`router_with_ingest`] where OTLP receivers run.
pub fn router(state: AppState, config: &Config) -> Router {
    router_with_ingest(state, config, Default::default())
}

/// The application router with `/metrics` reporting `ingest`, the counters of the OTLP
/// receivers running in this process.
pub fn router_with_ingest(state: AppState, config: &Config, ingest: Arc<IngestCounters>) -> Router {
    router_with_services(state, config, ingest, None)
}

/// The application router with the ingest service itself, which the MCP gateway's spans
/// go through (`/mcp/{server}` in process, `/api/v1/mcp/spans` from a proxy).
pub fn router_with_services(
    state: AppState,
    config: &Config,
    counters: Arc<IngestCounters>,
    ingest: Option<IngestService>,
) -> Router {
    let gateway = crate::mcp::http::Gateway::new(
        &config.mcp_servers,
        crate::mcp::http::GatewayLimits::default(),
        crate::mcp::http::LocalDeps {
            db: state.db.clone(),
            ctx: app::services::calls::CallsContext {
                hub: state.approvals.clone(),
                webhooks: Arc::new(state.notifications.targets.clone()),
                redactor: state.redactor.clone(),
            },
            rules: state.rules.clone(),
            ingest: ingest.clone(),
        },
    );
    let mut router = base_router(state, config, counters, gateway.router());
    if let Some(ingest) = ingest {
        router = router.layer(axum::Extension(ingest));
    }
    router
}

fn base_router(state: AppState, config: &Config, ingest: Arc<IngestCounters>, mcp: Router<AppState>) -> Router {
    let sessions = SessionManagerLayer::new(SessionStoreAny::new(state.db.clone()))
        .with_name("flightdeck_session")
        .with_http_only(true)
        .with_same_site(SameSite::Lax)
        .with_secure(config.secure_cookies)
        .with_expiry(Expiry::OnInactivity(tower_sessions::cookie::time::Duration::minutes(i64::from(
            config.session_idle_minutes,
        ))));

    let context = {
        let state = state.clone();
        move || provide_context(state.clone())
    };
    let pages = Router::new()
        .route("/runs/{run_id}/replay.json", get(replay_download))
        .leptos_routes_with_context(&state, page_routes(), context.clone(), {
            let options = state.leptos_options.clone();
            move || shell(options.clone())
        })
        .fallback(leptos_axum::file_and_error_handler_with_context::<AppState, _>(context, shell))
        // Layers run bottom-up: the session is loaded, then the user, then the page check;
        // a server function's error gets its status last.
        .layer(from_fn(fn_status::from_error))
        .layer(from_fn(page_guard::require_page_role))
        .layer(from_fn_with_state(state.db.clone(), current_user::load))
        .layer(sessions)
        // Pages and server functions' answers are text that gzip shrinks to a fifth or
        // less (a 5,000-span run's page and its hydration copy); files under /pkg are
        // precompressed and served apart.
        .layer(tower_http::compression::CompressionLayer::new().gzip(true));

    Router::new()
        .nest("/api/v1", api::router(&state))
        .merge(crate::slack::router(crate::slack::SlackSettings {
            signing_secret: config.slack_signing_secret.clone(),
            response_url_prefix: config.slack_response_url_prefix.clone(),
        }))
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .merge(crate::metrics::router(state.db.clone(), ingest))
        .merge(mcp)
        // Before the pages: no session is loaded for a file.
        .nest_service("/pkg", assets::router(&pkg_dir(&state.leptos_options)))
        .merge(pages)
        .layer(from_fn(csrf::refuse_cross_site))
        .layer(from_fn_with_state(Arc::new(config.trusted_proxies.clone()), client_address::resolve))
        .layer(from_fn(paths::refuse_malformed))
        .layer(from_fn_with_state(
            headers::SecurityHeaders { https: config.public_url.starts_with("https://") },
            headers::add,
        ))
        .layer(TraceLayer::new_for_http())
        .with_state(state)
}

/// Where the bundle is: `pkg` under the site root.
fn pkg_dir(options: &leptos::config::LeptosOptions) -> std::path::PathBuf {
    std::path::Path::new(&*options.site_root).join(&*options.site_pkg_dir)
}

/// The page routes, worked out once per process.
///
/// Leptos lists the routes by rendering the app with resource loading switched off
/// through a flag that is global to the process, and a resource that first runs while
/// the flag is up waits forever (leptos issue 4773). A page served on another thread
/// during a second listing therefore hung: tests build a router each, and in CI one
/// request in a few hundred never answered. Listing once, before the first router can
/// serve anything, keeps the listing and every page render apart.
fn page_routes() -> Vec<AxumRouteListing> {
    static ROUTES: OnceLock<Vec<AxumRouteListing>> = OnceLock::new();
    ROUTES.get_or_init(|| generate_route_list(App)).clone()
}

/// The path of every page the router serves (with `{parameters}`), for the access test.
pub fn page_paths() -> Vec<String> {
    page_routes().iter().map(|r| r.path().to_string()).collect()
}

/// `GET /runs/{run_id}/replay.json`: the replay fixture as a download, for signed-in
/// viewers (the page guard checks the role like for any page).
async fn replay_download(
    axum::extract::State(state): axum::extract::State<AppState>,
    axum::extract::Path(run_id): axum::extract::Path<String>,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    match api::runs::fixture(&state.db, &run_id).await {
        Ok(fixture) => {
            let name: String =
                run_id.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect();
            (
                [(http::header::CONTENT_DISPOSITION, format!("attachment; filename=\"{name}.replay.json\""))],
                axum::Json(fixture),
            )
                .into_response()
        }
        Err(e) => e.into_response(),
    }
}
