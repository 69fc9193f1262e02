//! How the process asks the C allocator to hold on to less memory.

/// Limits glibc malloc to one arena per core (at least two); call before any thread starts.
///
/// Why: glibc gives a thread that allocates while another holds an arena a new arena, up
/// to eight per core, and an arena keeps what was freed in it for reuse. Under overload
/// the ingest's blocking threads (tokio starts up to 512) normalize exports side by side,
/// each in an arena of its own, and the freed memory stays spread over them: the chaos
/// overload scenario (`server/tests/chaos/overload.rs`, four times the sustainable load)
/// peaked at 250 MiB resident with the default and 183 MiB with two arenas, for the same
/// 64 MiB `ingest_queue_bytes`. `MALLOC_ARENA_MAX` in the environment still wins.
pub fn limit_allocator_arenas() {
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
