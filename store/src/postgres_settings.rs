//! The PostgreSQL server settings that decide how ingest holds up as the database grows,
//! and the advice `serve` logs when they are left at their defaults.
//!
//! Every run adds entries to indexes keyed by values that arrive in no order (run and
//! trace ids, cost, duration). After each checkpoint the first change to an index page
//! writes the whole page to the write-ahead log, so the more pages those indexes have,
//! the more whole pages each checkpoint cycle writes. With PostgreSQL's defaults
//! (`max_wal_size` 1 GB, `checkpoint_timeout` 5 min, no WAL compression) a busy ingest
//! fills the log in seconds, each fill forces a checkpoint, and the log becomes mostly
//! page images: the bytes written per span grow with the database. With 128 MB of
//! `shared_buffers` those indexes' pages also go back and forth to the operating
//! system's cache on every commit. docs/operations.md has the figures.
//! Flightdeck cannot change these itself (they are the server's, and need a superuser),
//! so it says which to change.

use crate::sql::Sql;
use crate::Db;

/// Below this `max_wal_size`, checkpoints come every few seconds at full ingest.
pub const MIN_MAX_WAL_SIZE_MB: i64 = 8 * 1024;
/// Below this `checkpoint_timeout`, idle-ish periods still checkpoint often.
pub const MIN_CHECKPOINT_TIMEOUT_S: i64 = 15 * 60;
/// Below this `shared_buffers`, the indexes' pages a commit touches do not stay in
/// PostgreSQL's own cache (the usual advice is a quarter of the server's memory).
pub const MIN_SHARED_BUFFERS_MB: i64 = 1024;

/// The settings in force, as `pg_settings` reports them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteSettings {
    /// In megabytes (`pg_settings` reports MB).
    pub max_wal_size_mb: i64,
    /// In seconds.
    pub checkpoint_timeout_s: i64,
    /// `off`, `on` (pglz), `pglz`, `lz4` or `zstd`.
    pub wal_compression: String,
    /// In megabytes (`pg_settings` reports pages of 8 kB).
    pub shared_buffers_mb: i64,
}

/// One line per setting that slows ingest as the database grows, each naming the value
/// in force and the one to set. Empty when all four are as advised.
pub fn advice(settings: &WriteSettings) -> Vec<String> {
    let mut lines = Vec::new();
    if settings.max_wal_size_mb < MIN_MAX_WAL_SIZE_MB {
        lines.push(format!(
            "max_wal_size is {} MB: set it to 16GB (at least {} GB, with that much disk free for the log)",
            settings.max_wal_size_mb,
            MIN_MAX_WAL_SIZE_MB / 1024
        ));
    }
    if settings.checkpoint_timeout_s < MIN_CHECKPOINT_TIMEOUT_S {
        lines.push(format!("checkpoint_timeout is {} s: set it to 15min or more", settings.checkpoint_timeout_s));
    }
    if settings.wal_compression == "off" {
        lines.push("wal_compression is off: set it to lz4 (or on, where PostgreSQL lacks lz4)".to_string());
    }
    if settings.shared_buffers_mb < MIN_SHARED_BUFFERS_MB {
        lines.push(format!(
            "shared_buffers is {} MB: set it to a quarter of the database server's memory (takes a restart)",
            settings.shared_buffers_mb
        ));
    }
    lines
}

/// Reads the settings from the server; `None` on SQLite, which has none of them.
pub async fn read(db: &Db) -> Result<Option<WriteSettings>, sqlx::Error> {
    if !matches!(db, Db::Postgres(_)) {
        return Ok(None);
    }
    // Sizes in MB whatever unit the server reports them in (shared_buffers: 8 kB pages).
    let rows: Vec<(String, String)> = db
        .fetch_all(Sql::new(
            "SELECT name, CASE unit WHEN '8kB' THEN (setting::bigint * 8 / 1024)::text ELSE setting END \
             FROM pg_settings \
             WHERE name IN ('max_wal_size', 'checkpoint_timeout', 'wal_compression', 'shared_buffers')",
        ))
        .await?;
    let value = |name: &str| rows.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str());
    let number = |name: &str| value(name).and_then(|v| v.parse::<i64>().ok());
    let (Some(max_wal_size_mb), Some(checkpoint_timeout_s), Some(wal_compression), Some(shared_buffers_mb)) =
        (number("max_wal_size"), number("checkpoint_timeout"), value("wal_compression"), number("shared_buffers"))
    else {
        return Err(sqlx::Error::Protocol(format!("pg_settings lacks a write setting: {rows:?}")));
    };
    Ok(Some(WriteSettings {
        max_wal_size_mb,
        checkpoint_timeout_s,
        wal_compression: wal_compression.to_string(),
        shared_buffers_mb,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(max_wal_size_mb: i64, checkpoint_timeout_s: i64, wal_compression: &str) -> WriteSettings {
        WriteSettings {
            max_wal_size_mb,
            checkpoint_timeout_s,
            wal_compression: wal_compression.to_string(),
            shared_buffers_mb: 6 * 1024,
        }
    }

    #[test]
    fn postgres_defaults_get_a_line_for_each_setting() {
        let defaults = WriteSettings { shared_buffers_mb: 128, ..settings(1024, 300, "off") };
        let lines = advice(&defaults);
        assert_eq!(lines.len(), 4, "{lines:?}");
        assert!(lines[0].starts_with("max_wal_size is 1024 MB: set it to 16GB"), "{lines:?}");
        assert!(lines[1].starts_with("checkpoint_timeout is 300 s"), "{lines:?}");
        assert!(lines[2].starts_with("wal_compression is off"), "{lines:?}");
        assert!(lines[3].starts_with("shared_buffers is 128 MB: set it to a quarter"), "{lines:?}");
    }

    #[test]
    fn advised_settings_get_no_line() {
        assert!(advice(&settings(16 * 1024, 900, "lz4")).is_empty());
        assert!(advice(&settings(MIN_MAX_WAL_SIZE_MB, 3600, "on")).is_empty());
    }

    #[test]
    fn each_setting_is_judged_alone() {
        assert_eq!(advice(&settings(MIN_MAX_WAL_SIZE_MB - 1, 900, "zstd")).len(), 1);
        assert_eq!(advice(&settings(16 * 1024, MIN_CHECKPOINT_TIMEOUT_S - 1, "pglz")).len(), 1);
        assert_eq!(advice(&settings(16 * 1024, 900, "off")).len(), 1);
        let small_cache =
            WriteSettings { shared_buffers_mb: MIN_SHARED_BUFFERS_MB - 1, ..settings(16 * 1024, 900, "lz4") };
        assert_eq!(advice(&small_cache).len(), 1);
    }
}
