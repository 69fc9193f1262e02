//! Flightdeck's configuration: one struct, filled from defaults, then an optional TOML
//! file, then environment variables, then command-line flags (each beating the last).
//!
//! [`Overrides`] is the shape of every layer: clap reads flags and environment into it,
//! serde reads the file into it, and [`Config::resolve`] applies the defaults.

use anyhow::Context;
use clap::Args;
use serde::Deserialize;
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// Every setting, each optional so that layers can be merged.
#[derive(Debug, Clone, Default, Args, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Overrides {
    /// Address for the web UI and the REST API [default: 127.0.0.1:3000]
    #[arg(long, env = "FLIGHTDECK_LISTEN", global = true, value_name = "ADDR")]
    pub listen: Option<SocketAddr>,

    /// Directory for the SQLite database and other local state [default: ./data]
    #[arg(long, env = "FLIGHTDECK_DATA_DIR", global = true, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,

    /// Database to use: postgres://... for PostgreSQL, or sqlite://PATH
    /// [default: sqlite://DATA_DIR/flightdeck.db]
    #[arg(long, env = "DATABASE_URL", global = true, value_name = "URL")]
    pub database_url: Option<String>,

    /// Directory with the browser bundle (pkg/flightdeck.js, .wasm, .css) [default: target/site]
    #[arg(long, env = "FLIGHTDECK_SITE_ROOT", global = true, value_name = "DIR")]
    pub site_root: Option<PathBuf>,

    /// Mark session cookies Secure; turn on when Flightdeck is served over HTTPS [default: false]
    #[arg(long, env = "FLIGHTDECK_SECURE_COOKIES", global = true, value_name = "BOOL",
          num_args = 0..=1, default_missing_value = "true")]
    pub secure_cookies: Option<bool>,

    /// Sign a browser session out after this many minutes without a request [default: 720]
    #[arg(
        long,
        env = "FLIGHTDECK_SESSION_IDLE_MINUTES",
        global = true,
        value_name = "MINUTES"
    )]
    pub session_idle_minutes: Option<u32>,
}

impl Overrides {
    /// Fills every setting `self` leaves unset from `lower`.
    pub fn or(self, lower: Overrides) -> Overrides {
        Overrides {
            listen: self.listen.or(lower.listen),
            data_dir: self.data_dir.or(lower.data_dir),
            database_url: self.database_url.or(lower.database_url),
            site_root: self.site_root.or(lower.site_root),
            secure_cookies: self.secure_cookies.or(lower.secure_cookies),
            session_idle_minutes: self.session_idle_minutes.or(lower.session_idle_minutes),
        }
    }

    /// Reads a TOML file whose keys are the long flag names with `_` for `-`.
    pub fn from_toml_file(path: &Path) -> anyhow::Result<Overrides> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read config file {}", path.display()))?;
        toml::from_str(&text).with_context(|| format!("invalid config file {}", path.display()))
    }
}

/// The settings in force, every one decided.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub listen: SocketAddr,
    pub data_dir: PathBuf,
    pub database_url: String,
    pub site_root: PathBuf,
    pub secure_cookies: bool,
    pub session_idle_minutes: u32,
}

impl Config {
    /// `flags_and_env` comes from clap (flags already beat the environment there);
    /// `file` is the optional config file.
    pub fn resolve(flags_and_env: Overrides, file: Option<&Path>) -> anyhow::Result<Config> {
        let from_file = match file {
            Some(path) => Overrides::from_toml_file(path)?,
            None => Overrides::default(),
        };
        let o = flags_and_env.or(from_file);
        let data_dir = o.data_dir.unwrap_or_else(|| PathBuf::from("data"));
        let database_url = o
            .database_url
            .filter(|u| !u.trim().is_empty())
            .unwrap_or_else(|| format!("sqlite://{}", data_dir.join("flightdeck.db").display()));
        Ok(Config {
            listen: o
                .listen
                .unwrap_or_else(|| "127.0.0.1:3000".parse().unwrap()),
            data_dir,
            database_url,
            site_root: o.site_root.unwrap_or_else(|| PathBuf::from("target/site")),
            secure_cookies: o.secure_cookies.unwrap_or(false),
            session_idle_minutes: o.session_idle_minutes.unwrap_or(720),
        })
    }

    pub fn is_sqlite(&self) -> bool {
        self.database_url.starts_with("sqlite:")
    }
}

/// The database URL with any password replaced, for logs and the startup banner.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let Some((userinfo, host)) = rest.split_once('@') else {
        return url.to_string();
    };
    match userinfo.split_once(':') {
        Some((user, _password)) => format!("{scheme}://{user}:[REDACTED]@{host}"),
        None => url.to_string(),
    }
}

impl fmt::Display for Config {
    /// The startup banner: every setting, no secrets.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "  listen               {}", self.listen)?;
        writeln!(f, "  data_dir             {}", self.data_dir.display())?;
        writeln!(
            f,
            "  database_url         {}",
            redact_url(&self.database_url)
        )?;
        writeln!(f, "  site_root            {}", self.site_root.display())?;
        writeln!(f, "  secure_cookies       {}", self.secure_cookies)?;
        write!(f, "  session_idle_minutes {}", self.session_idle_minutes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn file(contents: &str) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(contents.as_bytes()).unwrap();
        f
    }

    #[test]
    fn defaults_apply_when_nothing_is_set() {
        let c = Config::resolve(Overrides::default(), None).unwrap();
        assert_eq!(c.listen, "127.0.0.1:3000".parse().unwrap());
        assert_eq!(c.data_dir, PathBuf::from("data"));
        assert_eq!(c.database_url, "sqlite://data/flightdeck.db");
        assert!(c.is_sqlite());
        assert!(!c.secure_cookies);
    }

    #[test]
    fn flags_beat_file_and_file_beats_defaults() {
        let f =
            file("listen = \"0.0.0.0:8080\"\ndata_dir = \"/var/lib/fd\"\nsecure_cookies = true\n");
        let flags = Overrides {
            listen: Some("127.0.0.1:9999".parse().unwrap()),
            ..Default::default()
        };
        let c = Config::resolve(flags, Some(f.path())).unwrap();
        assert_eq!(
            c.listen,
            "127.0.0.1:9999".parse().unwrap(),
            "flag wins over file"
        );
        assert_eq!(
            c.data_dir,
            PathBuf::from("/var/lib/fd"),
            "file wins over default"
        );
        assert_eq!(
            c.database_url, "sqlite:///var/lib/fd/flightdeck.db",
            "derived from the data dir"
        );
        assert!(c.secure_cookies);
    }

    #[test]
    fn unknown_or_mistyped_file_keys_are_clear_errors() {
        let f = file("lisen = \"0.0.0.0:8080\"\n");
        let err = format!(
            "{:#}",
            Config::resolve(Overrides::default(), Some(f.path())).unwrap_err()
        );
        assert!(err.contains("unknown field `lisen`"), "{err}");
        let f = file("listen = \"not an address\"\n");
        let err = format!(
            "{:#}",
            Config::resolve(Overrides::default(), Some(f.path())).unwrap_err()
        );
        assert!(
            err.contains("invalid config file") && err.contains("listen"),
            "{err}"
        );
    }

    #[test]
    fn postgres_url_passwords_never_reach_the_banner() {
        let c = Config::resolve(
            Overrides {
                database_url: Some("postgres://fd:s3cret@db:5432/fd".into()),
                ..Default::default()
            },
            None,
        )
        .unwrap();
        let banner = c.to_string();
        assert!(!banner.contains("s3cret"), "{banner}");
        assert!(banner.contains("postgres://fd:[REDACTED]@db:5432/fd"));
        assert!(!c.is_sqlite());
    }
}
