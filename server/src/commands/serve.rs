//! `flightdeck serve`: open the database, make sure someone can sign in, and serve the
//! UI and API until Ctrl-C or SIGTERM.

use crate::config::Config;
use crate::web;
use anyhow::Context;
use app::state::AppState;
use app::storage::sessions::SessionStoreAny;
use leptos::config::{Env, LeptosOptions};
use std::net::SocketAddr;
use std::time::Duration;
use tower_sessions::ExpiredDeletion;

pub async fn run(config: Config) -> anyhow::Result<()> {
    eprintln!(
        "Flightdeck {} starting with these settings:\n{config}",
        env!("CARGO_PKG_VERSION")
    );
    let db = super::open_database(&config).await?;
    super::users::create_first_admin(&db).await?;

    let bundle = config.site_root.join("pkg").join("flightdeck_bg.wasm");
    if !bundle.exists() {
        tracing::warn!(
            missing = %bundle.display(),
            "browser bundle not found: pages work without JavaScript, but build it with `cargo xtask build`"
        );
    }

    let state = AppState {
        db: db.clone(),
        leptos_options: leptos_options(&config),
    };
    let app = web::router(state, &config);
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| {
            format!(
                "cannot listen on {}: is another process using it?",
                config.listen
            )
        })?;

    let cleanup = tokio::spawn(delete_expired_sessions(SessionStoreAny::new(db.clone())));
    tracing::info!(address = %format!("http://{}", config.listen), "flightdeck is serving");
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(crate::shutdown::signal())
    .await
    .context("server error")?;
    cleanup.abort();
    db.close().await;
    tracing::info!("flightdeck stopped");
    Ok(())
}

/// Leptos' options from Flightdeck's own configuration (no cargo-leptos metadata needed):
/// the bundle is `/pkg/flightdeck.js` and `/pkg/flightdeck_bg.wasm` under the site root.
pub fn leptos_options(config: &Config) -> LeptosOptions {
    LeptosOptions::builder()
        .output_name("flightdeck")
        .site_root(config.site_root.to_string_lossy().to_string())
        .site_pkg_dir("pkg")
        .site_addr(config.listen)
        .env(Env::PROD)
        .build()
}

async fn delete_expired_sessions(store: SessionStoreAny) {
    let mut every = tokio::time::interval(Duration::from_secs(600));
    loop {
        every.tick().await;
        if let Err(e) = store.delete_expired().await {
            tracing::warn!(error = %e, "could not delete expired sessions");
        }
    }
}
