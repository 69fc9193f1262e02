//! The subcommands of the `flightdeck` binary, one module each.

pub mod alerts;
pub mod demo;
pub mod serve;
pub mod tokens;
pub mod users;

use crate::config::Config;
use anyhow::Context;
use store::Db;

/// Opens the configured database and applies pending migrations; a failure here stops
/// the process with the reason.
pub async fn open_database(config: &Config) -> anyhow::Result<Db> {
    if config.is_sqlite() {
        std::fs::create_dir_all(&config.data_dir)
            .with_context(|| format!("cannot create data directory {}", config.data_dir.display()))?;
    }
    let db = Db::connect(&config.database_url).await?;
    db.migrate()
        .await
        .with_context(|| format!("database migration failed on {}; nothing was started", db.backend_name()))?;
    Ok(db)
}

/// Reads one line from standard input when it is piped, for passwords given by scripts.
pub fn password_from_stdin() -> anyhow::Result<Option<String>> {
    use std::io::{BufRead, IsTerminal};
    let stdin = std::io::stdin();
    if stdin.is_terminal() {
        return Ok(None);
    }
    let mut line = String::new();
    stdin.lock().read_line(&mut line).context("cannot read the password from standard input")?;
    let password = line.trim_end_matches(['\r', '\n']).to_string();
    Ok((!password.is_empty()).then_some(password))
}
