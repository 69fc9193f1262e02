//! `flightdeck serve`: open the database, make sure someone can sign in, and serve the
//! UI and API until Ctrl-C or SIGTERM. Background jobs: session cleanup, retention,
//! approval expiry, escalation announcements, the webhook worker, the alert evaluator and
//! the span chunks' dictionary.

use crate::config::{Config, IngestAuth};
use crate::otlp::IngestService;
use crate::web;
use anyhow::Context;
use app::state::AppState;
use leptos::config::{Env, LeptosOptions};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use store::rules::RulesCache;
use store::sessions::SessionStoreAny;
use store::{policies, retention, wal, webhooks, Db};
use tower_sessions::ExpiredDeletion;

pub async fn run(config: Config) -> anyhow::Result<()> {
    eprintln!("Flightdeck {} starting with these settings:\n{config}", env!("CARGO_PKG_VERSION"));
    let db = super::open_database(&config).await?;
    let open = db.open_every_connection().await.with_context(|| {
        format!(
            "cannot open {} connections to PostgreSQL: each Flightdeck server needs that many \
             within PostgreSQL's max_connections (docs/operations.md)",
            store::POSTGRES_CONNECTIONS
        )
    })?;
    if open > 0 {
        tracing::info!(connections = open, "PostgreSQL connections open and readied");
    }
    advise_on_postgres_settings(&db).await;
    super::users::create_first_admin(&db).await?;
    let ingest_settings = config.ingest_settings()?;
    // Hashed now rather than at the first sign-in of an unknown username, which would
    // otherwise take twice as long as any other and tell the username apart.
    tokio::task::spawn_blocking(|| app::auth::password::dummy_hash().len()).await?;
    for policy in &config.tool_policies {
        policies::upsert(&db, policy).await?;
    }

    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("cannot listen on {}: is another process using it?", config.listen))?;
    let otlp_http = tokio::net::TcpListener::bind(config.otlp_http_listen)
        .await
        .with_context(|| format!("cannot listen for OTLP/HTTP on {}", config.otlp_http_listen))?;
    let otlp_grpc = tokio::net::TcpListener::bind(config.otlp_grpc_listen)
        .await
        .with_context(|| format!("cannot listen for OTLP/gRPC on {}", config.otlp_grpc_listen))?;
    // Port 0 asks the system for a free port; from here on the settings (the log line
    // below, the default public URL) name the ports actually bound.
    let config = config.bound_to(listener.local_addr()?, otlp_http.local_addr()?, otlp_grpc.local_addr()?);

    let options = leptos_options(&config);
    let bundle = config.site_root.join(&*options.site_pkg_dir).join(format!("{}_bg.wasm", options.output_name));
    if !bundle.exists() {
        tracing::warn!(
            missing = %bundle.display(),
            "browser bundle not found: pages work without JavaScript, but build it with `cargo xtask build`"
        );
    }

    // Prices and policies for derivation, shared by the pages and the ingest writer.
    let rules = RulesCache::new(config.prices.clone());
    rules.refresh(&db).await?;

    let approval_hub = app::services::approval_hub::ApprovalHub::new()
        .with_recheck(Duration::from_secs(config.approval_recheck_seconds));
    let state = AppState {
        db: db.clone(),
        leptos_options: options,
        approvals: approval_hub.clone(),
        notifications: Arc::new(config.notifications()),
        redactor: Arc::new(ingest_settings.redactor.clone()),
        rules: rules.clone(),
    };
    // Started before the router so `/metrics` can report the receivers' counters.
    let (ingest, writer_gone) = IngestService::start_with_rules(
        db.clone(),
        ingest_settings,
        config.ingest_auth,
        config.max_body_bytes,
        config.ingest_queue_bytes,
        rules,
        config.postgres_writers,
    )
    .context("cannot start the ingest writer")?;
    ingest.refresh_policies().await;
    if config.ingest_auth == IngestAuth::None {
        tracing::warn!("OTLP ingest accepts exports without a token (--ingest-auth none): local development only");
    }
    let app = web::router_with_services(state, &config, ingest.shared_counters(), Some(ingest.clone()));

    let background = [
        tokio::spawn(delete_expired_sessions(SessionStoreAny::new(db.clone()))),
        tokio::spawn(apply_retention(db.clone(), config.retention_days, config.body_retention_days)),
        tokio::spawn(expire_approvals(db.clone(), approval_hub.clone())),
        tokio::spawn(announce_escalations(db.clone(), Arc::new(config.webhooks.clone()))),
        tokio::spawn(approval_hub.clone().listen(db.clone())),
        tokio::spawn(checkpoint_wal(db.clone())),
        tokio::spawn(checkpoint_ledger_wal(db.clone())),
        tokio::spawn(train_chunk_dictionary(db.clone())),
        tokio::spawn(crate::memory::report_usage()),
    ];
    // One signal stops all three listeners and the webhook worker; each finishes what it
    // has in flight.
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let stopped_flag = stopped.clone();
    // Runs even with no webhooks configured: deliveries queued before a target was removed
    // from the config, or by another instance, are still owed.
    let worker = crate::webhooks::Worker::new(
        db.clone(),
        crate::webhooks::WorkerSettings::new(&config.public_url, config.webhook_retry(), &config.webhooks),
    )?;
    let webhook_worker = tokio::spawn(worker.run(stopped.clone()));
    let evaluator = crate::alerts::Evaluator::new(
        db.clone(),
        Arc::new(config.notifications()),
        crate::alerts::EvaluatorSettings {
            interval: Duration::from_secs(config.alert_interval_seconds),
            hold: Duration::from_secs(config.alert_hold_seconds),
        },
        crate::alerts::instance_name(),
    );
    let alert_evaluator = tokio::spawn(evaluator.run(stopped.clone()));
    let until_stopped = move || {
        let mut stopped = stopped.clone();
        async move {
            let _ = stopped.wait_for(|s| *s).await;
        }
    };
    // The web server (pages and the agent API) runs on a runtime of its own at the main
    // thread's priority, the receivers and background jobs on the shared one, lowered on
    // SQLite (see `priority`).
    let web_runtime = crate::priority::own_runtime("web")?;
    let listener = listener.into_std()?;
    let ui = web_runtime.handle().spawn({
        let stopped = until_stopped();
        async move {
            let listener = tokio::net::TcpListener::from_std(listener)?;
            axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>())
                .with_graceful_shutdown(stopped)
                .await
        }
    });
    let http_receiver =
        axum::serve(otlp_http, crate::otlp::http::router(ingest.clone())).with_graceful_shutdown(until_stopped());
    let grpc_receiver = crate::otlp::grpc::transport()
        .add_service(crate::otlp::grpc::server(ingest.clone()))
        .serve_with_incoming_shutdown(tokio_stream::wrappers::TcpListenerStream::new(otlp_grpc), until_stopped());
    let stop = Arc::new(stop);
    let stop_all = {
        let hub = approval_hub.clone();
        move || {
            stop.send_replace(true);
            // Long polls answer with the current status instead of holding shutdown up.
            hub.close();
        }
    };
    tokio::spawn({
        let stop_all = stop_all.clone();
        async move {
            crate::shutdown::signal().await;
            stop_all();
        }
    });
    let writer_watch = tokio::spawn(stop_if_the_writer_ends(writer_gone, stopped_flag, stop_all));
    tracing::info!(
        ui = %format!("http://{}", config.listen),
        otlp_http = %format!("http://{}/v1/traces", config.otlp_http_listen),
        otlp_grpc = %config.otlp_grpc_listen,
        "flightdeck is serving"
    );
    let (ui, http_receiver, grpc_receiver) = tokio::join!(ui, http_receiver, grpc_receiver);
    ui.context("web server stopped unexpectedly")?.context("web server error")?;
    http_receiver.context("OTLP/HTTP receiver error")?;
    grpc_receiver.context("OTLP/gRPC receiver error")?;
    for task in background {
        task.abort();
    }
    let _ = webhook_worker.await;
    let _ = alert_evaluator.await;
    // On a normal stop the writer is still running (`ingest` holds its queue), so the
    // watch is still waiting; when the writer died, the watch finished in the same step
    // that asked everything to stop.
    let writer_failed = writer_watch.is_finished() && writer_watch.await.unwrap_or(false);
    db.close().await;
    if writer_failed {
        anyhow::bail!(
            "stopped because the ingest writer ended unexpectedly (its error is logged above); \
             every acknowledged span is stored, and exporters retry the rest once Flightdeck \
             is restarted"
        );
    }
    tracing::info!("flightdeck stopped");
    Ok(())
}

/// Stops the whole server if the ingest writer ends before shutdown was asked for (it
/// only can by panicking), and says whether it did. Without the writer every export
/// would be refused while health checks and pages still looked fine; stopping with an
/// error lets a supervisor (systemd, Kubernetes) restart Flightdeck, and exporters keep
/// what they could not deliver and retry.
async fn stop_if_the_writer_ends(
    mut writer_gone: crate::otlp::writer::WriterGone,
    stopped: tokio::sync::watch::Receiver<bool>,
    stop_all: impl FnOnce(),
) -> bool {
    writer_gone.wait().await;
    if *stopped.borrow() {
        return false;
    }
    tracing::error!("the ingest writer ended unexpectedly: no export can be stored, so Flightdeck is stopping");
    stop_all();
    true
}

/// Leptos' options from Flightdeck's own configuration (no cargo-leptos metadata needed):
/// the bundle is `/pkg/NAME.js`, `/pkg/NAME_bg.wasm` and `/pkg/NAME.css` under the site
/// root, NAME being the content-hashed name in `pkg/manifest.json` (`web::assets`).
pub fn leptos_options(config: &Config) -> LeptosOptions {
    LeptosOptions::builder()
        .output_name(web::assets::output_name(&config.site_root.join("pkg")))
        .site_root(config.site_root.to_string_lossy().to_string())
        .site_pkg_dir("pkg")
        .site_addr(config.listen)
        .env(Env::PROD)
        .build()
}

/// Hourly: makes the next day's partitions on PostgreSQL, drops runs past the retention
/// horizon and bodies past theirs, and finished webhook deliveries as old as the runs
/// (pending ones are kept).
async fn apply_retention(db: store::Db, run_days: u32, body_days: u32) {
    let mut every = tokio::time::interval(Duration::from_secs(3600));
    loop {
        every.tick().await;
        match store::partitions::ensure_days(&db, store::now_ms()).await {
            Ok(made) => {
                for day in made {
                    tracing::info!(day = %store::partitions::date_label(day), "made a day's partitions");
                }
            }
            Err(e) => tracing::warn!(error = %e, "making tomorrow's partitions failed; will retry"),
        }
        let horizon = store::now_ms() - i64::from(run_days) * 86_400_000;
        match webhooks::prune(&db, horizon).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(deliveries = n, "retention: deleted old webhook deliveries"),
            Err(e) => tracing::warn!(error = %e, "webhook retention failed; will retry"),
        }
        match retention::apply(&db, i64::from(run_days), i64::from(body_days)).await {
            Ok(swept) => {
                for day in &swept.days {
                    let date = store::partitions::date_label(day.day);
                    tracing::info!(
                        day = %date,
                        runs = day.runs,
                        bytes = day.bytes,
                        took_ms = day.took_ms,
                        waited_ms = day.waited_ms,
                        locked_ms = day.locked_ms,
                        commit_ms = day.commit_ms,
                        "retention: dropped a day's partitions"
                    );
                }
                if swept.runs > 0 || swept.bodies > 0 {
                    tracing::info!(runs = swept.runs, bodies = swept.bodies, "retention: deleted old runs and bodies");
                }
            }
            Err(e) => tracing::warn!(error = %e, "retention job failed; will retry"),
        }
    }
}

/// Every ten minutes (the first at start): trains the span chunks' zstd dictionary once
/// the deployment has enough chunks, and again when it is a week old
/// (`storage::dictionaries`); chunks written after are compressed with it.
async fn train_chunk_dictionary(db: store::Db) {
    let mut every = tokio::time::interval(Duration::from_secs(600));
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        match store::dictionaries::train_if_due(&db, store::now_ms()).await {
            Ok(Some(id)) => tracing::info!(dictionary = id, "trained a new dictionary for span chunks"),
            Ok(None) => {}
            Err(e) => tracing::warn!(error = %e, "training a dictionary for span chunks failed; will retry"),
        }
    }
}

/// Every second: pending approval requests past their expiry become `expired` (opening
/// an escalation where the policy says so), and the agents waiting on them are woken.
async fn expire_approvals(db: store::Db, hub: app::services::approval_hub::ApprovalHub) {
    let mut every = tokio::time::interval(Duration::from_secs(1));
    loop {
        every.tick().await;
        match app::services::approvals::expire_due(&db, &hub).await {
            Ok(ids) => {
                for id in ids {
                    tracing::info!(approval = %id, "approval request expired");
                }
            }
            Err(e) => tracing::warn!(error = %e, "could not expire approval requests; will retry"),
        }
    }
}

/// Every two seconds: queues the `escalation.opened` webhook for escalations opened since,
/// whether by the API or from traces, in one transaction per pass (see `escalations::announce`).
async fn announce_escalations(db: store::Db, webhooks: Arc<Vec<domain::notify::WebhookTarget>>) {
    use store::escalations;
    let mut every = tokio::time::interval(Duration::from_secs(2));
    loop {
        every.tick().await;
        let due = match escalations::unannounced(&db).await {
            Ok(due) => due,
            Err(e) => {
                tracing::warn!(error = %e, "could not read new escalations; will retry");
                continue;
            }
        };
        if let Err(e) = escalations::announce(&db, &due, opened_event, &webhooks).await {
            tracing::warn!(error = %e, "could not queue escalation webhooks; will retry");
        }
    }
}

/// The `escalation.opened` webhook event.
fn opened_event(e: &domain::escalations::Escalation) -> domain::notify::Event {
    let reason = match &e.reason_text {
        Some(text) => format!("{}: {text}", e.reason),
        None => e.reason.to_string(),
    };
    let mut fields = vec![
        ("Reason".to_string(), reason),
        ("Run".to_string(), e.run_id.clone()),
        ("Agent".to_string(), e.agent.clone().unwrap_or_else(|| "unknown".into())),
    ];
    if let Some(fact) = &e.blocking_fact {
        fields.push(("Blocking fact".to_string(), fact.clone()));
    }
    domain::notify::Event {
        kind: domain::notify::EventKind::EscalationOpened,
        title: format!("Escalation: run {} needs a person", e.run_id),
        summary: format!(
            "{} item(s) done, {} remaining. Claim it in Flightdeck.",
            e.what_was_done.len(),
            e.what_remains.len()
        ),
        link_path: format!("/escalations/{}", domain::url::encode(&e.id)),
        fields,
        data: serde_json::to_value(e).unwrap_or_default(),
    }
}

/// Copies SQLite's write-ahead log into the database file from a connection of its own,
/// so the ingest writer's commits do not pay for it (see `storage::wal`). Often, so the
/// writer's restarts of the log find little left to copy. Runs until dropped; returns at
/// once on PostgreSQL.
pub async fn checkpoint_wal(db: Db) {
    if !matches!(db, Db::Sqlite { .. }) {
        return;
    }
    let mut every = tokio::time::interval(Duration::from_millis(50));
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        match wal::checkpoint(&db).await {
            Ok(Some(c)) if c.log_pages > 0 => tracing::trace!(?c, "checkpoint"),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "could not checkpoint the SQLite log"),
        }
    }
}

/// How often the execution ledger's log is copied into its file (and restarted once
/// long, see `storage::wal::checkpoint_ledger`). Seldom, unlike the main file's: each
/// copy syncs on the disk ingest is writing to, and a copy that catches up with every
/// commit lets the next commit start the log again and sync its new header. Every 50 ms,
/// one run in three at 500 guarded calls/s beside 20,000 spans/s had a p99 of 60 ms
/// (docs/benchmarks.md).
const LEDGER_CHECKPOINT_EVERY: Duration = Duration::from_secs(1);

/// Keeps the execution ledger's SQLite log short (`storage::wal::checkpoint_ledger`).
/// Runs until dropped; returns at once on PostgreSQL.
pub async fn checkpoint_ledger_wal(db: Db) {
    if !matches!(db, Db::Sqlite { .. }) {
        return;
    }
    let mut every = tokio::time::interval(LEDGER_CHECKPOINT_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        match wal::checkpoint_ledger(&db, wal::LEDGER_RESTART_AT_PAGES).await {
            Ok(Some(c)) if c.log_pages > 0 => tracing::trace!(?c, "ledger checkpoint"),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "could not checkpoint the ledger's SQLite log"),
        }
    }
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

/// Logs a warning for each PostgreSQL setting that makes every span cost the disk more as
/// the database grows (see `store::postgres_settings`); nothing on SQLite or when all are
/// as advised.
async fn advise_on_postgres_settings(db: &Db) {
    match store::postgres_settings::read(db).await {
        Ok(Some(settings)) => {
            for line in store::postgres_settings::advice(&settings) {
                tracing::warn!(
                    "PostgreSQL: {line}; at the defaults each span writes more to the log as the database grows (docs/operations.md, \"PostgreSQL's settings\")"
                );
            }
        }
        Ok(None) => {}
        Err(e) => tracing::warn!(error = %e, "cannot read PostgreSQL's write settings"),
    }
}

#[cfg(test)]
mod tests {
    use super::stop_if_the_writer_ends;
    use crate::otlp::writer::{WriterAlive, WriterGone};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use tokio::sync::watch;
    use tokio::task::JoinHandle;

    /// A writer's liveness, a watch on it, and whether the watch asked everything to stop.
    fn watched(stopped: watch::Receiver<bool>) -> (WriterAlive, JoinHandle<bool>, Arc<AtomicBool>) {
        let (alive, gone) = WriterGone::watch();
        let asked = Arc::new(AtomicBool::new(false));
        let watch = tokio::spawn(stop_if_the_writer_ends(gone, stopped, {
            let asked = asked.clone();
            move || asked.store(true, Ordering::SeqCst)
        }));
        (alive, watch, asked)
    }

    #[tokio::test]
    async fn a_writer_ending_before_shutdown_stops_everything_as_a_failure() {
        let (_stop, stopped) = watch::channel(false);
        let (alive, watch, asked) = watched(stopped);
        drop(alive);
        assert!(watch.await.unwrap(), "reported as a failure");
        assert!(asked.load(Ordering::SeqCst), "everything was asked to stop");
    }

    #[tokio::test]
    async fn a_writer_ending_after_shutdown_is_not_a_failure() {
        let (stop, stopped) = watch::channel(false);
        let (alive, watch, asked) = watched(stopped);
        stop.send_replace(true);
        drop(alive);
        assert!(!watch.await.unwrap());
        assert!(!asked.load(Ordering::SeqCst), "shutdown was already under way");
    }
}
