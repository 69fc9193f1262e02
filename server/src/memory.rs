//! The process' memory: which allocator serves whom, how each is tuned, and where the
//! resident memory is ([`usage`], reported on `/metrics` and in a log line a minute).
//!
//! Rust's allocations go to jemalloc (the binary's `#[global_allocator]`, configured by
//! [`JEMALLOC_CONF`]). With glibc's malloc and one arena per core, the ingest's threads
//! (the writer, the runtime's, the blocking ones normalizing exports) queued on the arena
//! locks: a quarter of the writer's CPU profile was malloc, free and their lock waits,
//! and more arenas bought the speed back only with more memory. jemalloc's per-thread
//! caches avoid the locks (the ingest benchmark's figures are in docs/benchmarks.md).
//!
//! C libraries (SQLite, zstd) still allocate with glibc's malloc; [`limit_c_arenas`] keeps
//! that to one arena per core.

/// jemalloc's options, read before `main`: a background thread returns freed pages to the
/// system a second after they fall idle (the default waits ten), so a burst of large
/// exports does not stay resident.
pub const JEMALLOC_CONF: &[u8] = b"background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0\0";

/// Limits glibc malloc to one arena per core (at least two); call before any thread starts.
///
/// Why: glibc gives a thread that allocates while another holds an arena a new arena, up
/// to eight per core, and an arena keeps what was freed in it for reuse; SQLite's page
/// caches, allocated from many connection threads, would spread over them.
/// `MALLOC_ARENA_MAX` in the environment still wins.
pub fn limit_c_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        if std::env::var_os("MALLOC_ARENA_MAX").is_some() {
            return;
        }
        let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2).max(2);
        let arenas = libc::c_int::try_from(cores).unwrap_or(libc::c_int::MAX);
        // SAFETY: mallopt only sets an allocator parameter; called before other threads
        // exist, so no allocation races with the change.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, arenas);
        }
    }
}

/// Where the process' memory is, in bytes (0 where this platform cannot tell).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Resident set size of the whole process.
    pub resident: u64,
    /// Rust's heap: bytes in live allocations.
    pub rust_allocated: u64,
    /// Rust's heap: pages jemalloc holds resident (live allocations, its caches and
    /// metadata, freed pages not yet returned).
    pub rust_resident: u64,
    /// SQLite: bytes in its allocations (page caches above all, prepared statements).
    pub sqlite_allocated: u64,
    /// glibc's heap (SQLite, zstd): bytes in live allocations.
    pub c_allocated: u64,
    /// glibc's heap: bytes it holds from the system, live or free.
    pub c_held: u64,
}

/// Reads [`Usage`] now.
pub fn usage() -> Usage {
    let mut usage = Usage { resident: resident_bytes().unwrap_or(0), ..Usage::default() };
    // jemalloc's statistics are a snapshot taken when the epoch advances.
    if tikv_jemalloc_ctl::epoch::advance().is_ok() {
        usage.rust_allocated = tikv_jemalloc_ctl::stats::allocated::read().unwrap_or(0) as u64;
        usage.rust_resident = tikv_jemalloc_ctl::stats::resident::read().unwrap_or(0) as u64;
    }
    // SAFETY: sqlite3_memory_used reads a counter under SQLite's own mutex.
    usage.sqlite_allocated = u64::try_from(unsafe { libsqlite3_sys::sqlite3_memory_used() }).unwrap_or(0);
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallinfo2 only reads glibc's counters.
        let info = unsafe { libc::mallinfo2() };
        usage.c_allocated = (info.uordblks + info.hblkhd) as u64;
        usage.c_held = (info.arena + info.hblkhd) as u64;
    }
    usage
}

/// The process' resident set size, from `/proc/self/statm` (Linux).
fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf only reads a system constant.
    let page_size = u64::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).ok()?;
    Some(pages * page_size)
}

/// Logs [`usage`] once a minute at `info`, so a long run's log shows which part grows.
pub async fn report_usage() {
    let mut every = tokio::time::interval(std::time::Duration::from_secs(60));
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        let u = usage();
        let mib = |bytes: u64| bytes >> 20;
        tracing::info!(
            resident_mib = mib(u.resident),
            rust_allocated_mib = mib(u.rust_allocated),
            rust_resident_mib = mib(u.rust_resident),
            sqlite_allocated_mib = mib(u.sqlite_allocated),
            c_allocated_mib = mib(u.c_allocated),
            c_held_mib = mib(u.c_held),
            "memory"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_sees_the_process_and_each_heap() {
        let before = usage();
        assert!(before.resident > 0, "{before:?}");
        // A live Rust allocation shows in jemalloc's count only if jemalloc is this
        // binary's allocator; the test binary uses the system's, so glibc sees it.
        let block = vec![7u8; 32 << 20];
        let after = usage();
        assert!(after.c_allocated >= before.c_allocated + (32 << 20), "{before:?} -> {after:?}");
        assert!(after.c_held >= after.c_allocated, "{after:?}");
        drop(block);
    }

    #[test]
    fn the_jemalloc_options_are_one_c_string() {
        assert_eq!(JEMALLOC_CONF.iter().filter(|&&b| b == 0).count(), 1);
        assert_eq!(JEMALLOC_CONF.last(), Some(&0));
    }
}
