//! The `flightdeck` binary: parse the command line and configuration, set up logs and
//! telemetry, and run the chosen command.

use clap::Parser;
use flightdeck::cli::{Cli, Command, TokenCommand, UserCommand};
use flightdeck::commands::{self, serve, tokens, users};
use flightdeck::config::Config;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("flightdeck: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        let _telemetry = flightdeck::telemetry::init();
        let config = Config::resolve(cli.settings, cli.config.as_deref())?;
        match cli.command.unwrap_or(Command::Serve) {
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
            Command::Demo { runs, seed } => {
                let db = commands::open_database(&config).await?;
                commands::demo::run(&db, &config.ingest_settings()?, runs, seed).await
            }
            Command::User(cmd) => {
                let db = commands::open_database(&config).await?;
                match cmd {
                    UserCommand::Add { username, roles } => users::add(&db, &username, &roles).await,
                    UserCommand::Reset { username } => users::reset(&db, &username).await,
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
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("flightdeck: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
