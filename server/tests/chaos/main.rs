//! Chaos: a running `flightdeck serve` broken the ways production breaks it, each
//! scenario checking PRODUCT.md's promises afterwards (a 200 means durable, overload is
//! answered 429/503 with Retry-After in bounded memory, nothing is decided twice).
//!
//! - `crash`: SIGKILL at random moments under ingest load, both databases.
//! - `decisions`: SIGKILL while approvers decide and operators claim, both databases.
//! - `overload`: two and four times the sustainable load; memory, refusals, and how fast
//!   the approval long poll and the run list answer meanwhile.
//! - `outage`: PostgreSQL stopped and started under load (a private PostgreSQL server).
//! - `failover`: two instances on one PostgreSQL, one killed while agents wait on it.
//! - `disk_full`: SQLite on a small tmpfs that fills up.
//!
//! `cargo test --test chaos` is the short form CI runs; `cargo xtask chaos` runs the long
//! form (more kills, longer phases, a release build) and prints the report.

#[path = "../common/mod.rs"]
mod common;
mod crash;
mod decisions;
mod disk_full;
mod failover;
mod load;
mod outage;
mod overload;
mod people;
mod server;
mod verify;

/// Scenarios share the machine's two cores and (some) the PostgreSQL server: one at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Kills per database: `FLIGHTDECK_CHAOS_KILLS`, 3 in the short form.
fn kills() -> usize {
    std::env::var("FLIGHTDECK_CHAOS_KILLS").ok().and_then(|v| v.parse().ok()).unwrap_or(3)
}

/// Seconds per load phase: `FLIGHTDECK_CHAOS_SECONDS`, 3 in the short form.
fn phase_seconds() -> u64 {
    std::env::var("FLIGHTDECK_CHAOS_SECONDS").ok().and_then(|v| v.parse().ok()).unwrap_or(3)
}

/// A small deterministic random source (no dependency for one number per kill).
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

/// Nearest-rank percentile in milliseconds.
fn percentile_ms(samples: &mut [std::time::Duration], percent: f64) -> f64 {
    if samples.is_empty() {
        return 0.0;
    }
    samples.sort_unstable();
    let rank = (percent / 100.0 * samples.len() as f64).ceil() as usize;
    samples[rank.clamp(1, samples.len()) - 1].as_secs_f64() * 1e3
}
