//! The `flightdeck` binary: parse the command line and configuration, set up logs and
//! telemetry, and run the chosen command.

use clap::Parser;
use flightdeck::cli::{AlertsCommand, Cli, Command, McpCommand, TokenCommand, UserCommand};
use flightdeck::commands::{self, serve, tokens, users};
use flightdeck::config::Config;
use flightdeck::priority;
use std::process::ExitCode;

/// Rust's allocator: see `flightdeck::memory` for why jemalloc.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options ([`flightdeck::memory::JEMALLOC_CONF`]), under the name its
/// prefixed build reads before `main`.
#[export_name = "_rjem_malloc_conf"]
#[allow(non_upper_case_globals)]
static malloc_conf: &u8 = &flightdeck::memory::JEMALLOC_CONF[0];

fn main() -> ExitCode {
    flightdeck::memory::limit_c_arenas();
    let cli = Cli::parse();
    let config = match Config::resolve(cli.settings, cli.config.as_deref()) {
        Ok(config) => config,
        Err(e) => return failed(e),
    };
    let command = cli.command.unwrap_or(Command::Serve);
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    runtime.enable_all();
    if matches!(command, Command::Serve) && config.is_sqlite() {
        // The SQLite ingest writer's thread comes first (see `priority`); this thread,
        // which starts it, keeps its priority.
        runtime.on_thread_start(priority::lower_this_thread);
    }
    let runtime = match runtime.build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("flightdeck: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        let _telemetry = flightdeck::telemetry::init();
        match command {
            Command::Serve => serve::run(config).await,
            Command::Config => {
                println!("{config}");
                Ok(())
            }
            Command::Migrate => {
                let db = commands::open_database(&config).await?;
                eprintln!("migrations applied ({})", db.backend_name());
                Ok(())
            }
            Command::Backup { file } => {
                // Not migrated first: a backup taken before an upgrade keeps the old schema.
                let db = store::Db::connect(&config.database_url).await?;
                let copies = store::backup::sqlite_copy(&db, &file).await?;
                for (file, bytes) in [copies.main, copies.ledger] {
                    eprintln!("backup written to {} ({:.1} MB)", file.display(), bytes as f64 / 1e6);
                }
                Ok(())
            }
            Command::Demo { runs, seed } => {
                let db = commands::open_database(&config).await?;
                commands::demo::run(&db, &config.ingest_settings()?, runs, seed).await
            }
            Command::User(cmd) => {
                let db = commands::open_database(&config).await?;
                match cmd {
                    UserCommand::Add { username, roles } => users::add(&db, &username, &roles).await,
                    UserCommand::Reset { username } => users::reset(&db, &username).await,
                    UserCommand::Disable { username } => users::set_disabled(&db, &username, true).await,
                    UserCommand::Enable { username } => users::set_disabled(&db, &username, false).await,
                    UserCommand::List => users::list(&db).await,
                }
            }
            Command::Token(cmd) => {
                let db = commands::open_database(&config).await?;
                match cmd {
                    TokenCommand::Create { name, scopes } => tokens::create(&db, &name, &scopes).await,
                    TokenCommand::Revoke { id } => tokens::revoke(&db, id).await,
                    TokenCommand::List => tokens::list(&db).await,
                }
            }
            Command::Alerts(AlertsCommand::Test { route }) => {
                let db = commands::open_database(&config).await?;
                commands::alerts::test(&db, &config, &route).await
            }
            Command::WebhookSecret => {
                println!("{}", domain::notify::SigningSecret::generate());
                Ok(())
            }
            Command::Mcp(McpCommand::Proxy { url, token, name, command }) => {
                flightdeck::mcp::stdio::run(flightdeck::mcp::stdio::ProxyArgs { url, token, name, command }).await
            }
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => failed(e),
    }
}

fn failed(e: anyhow::Error) -> ExitCode {
    eprintln!("flightdeck: error: {e:#}");
    ExitCode::FAILURE
}
