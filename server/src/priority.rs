//! Thread priorities: when `serve` runs on SQLite, the shared runtime's threads (the
//! OTLP receivers, which decode exports, and the background jobs) run at a lower
//! priority than the ingest writer's and the web server's.
//!
//! Ingest is a pipeline with one serial stage. Decoding and normalizing exports run on
//! as many threads as there are exports in flight, but every span then passes through
//! the single writer (`otlp::writer`), so whenever the machine's cores are all busy,
//! each moment the writer waits for a core is lost for good, while the parallel stages
//! only fall behind by the time they catch up. On 2 cores with the load generator beside
//! the server, the writer's SQLite thread spends a large share of its time runnable but
//! waiting for a core. Lowering the other threads' priority needs
//! no privilege (raising the writer's would); it only matters when the cores are
//! contended, and then a thread of lower priority still gets a share of them. On
//! PostgreSQL the database server does the serial work, so nothing is lowered.
//!
//! The web server (pages, the agent API and guarded calls) has a runtime of its own at
//! normal priority ([`own_runtime`]): people and agents wait on each of its answers,
//! while an export's decoding can fall behind and catch up.

/// Runs the future `make` returns on an OS thread of its own named `name`, with a
/// single-threaded runtime, at the priority of the calling thread (which for the SQLite
/// ingest writer must be one not lowered: `serve` runs on the main thread). The future
/// is made on that thread, so anything it opens there (a database pool, SQLite's thread
/// for a connection) belongs to that runtime and, for threads, starts at that priority.
pub fn spawn_on_own_thread<F, Fut>(name: &str, make: F) -> std::io::Result<()>
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()>,
{
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    std::thread::Builder::new().name(name.to_string()).spawn(move || runtime.block_on(async move { make().await }))?;
    Ok(())
}

/// A multi-threaded runtime of its own for work that answers people and agents waiting
/// on it (the web server: pages, the agent API, guarded calls), at the priority of the
/// calling thread, which in `serve` is the main thread's. On the shared runtime these
/// requests ran lowered beside the decoding of exports, so an ask queued for a core
/// behind decoding, and while it held the ledger's turn so did every ask after it.
/// Dropping the handle shuts the runtime down without waiting, so it can be dropped
/// inside another runtime.
pub fn own_runtime(name: &str) -> std::io::Result<OwnRuntime> {
    let runtime = tokio::runtime::Builder::new_multi_thread().thread_name(name).enable_all().build()?;
    Ok(OwnRuntime(Some(runtime)))
}

/// See [`own_runtime`].
pub struct OwnRuntime(Option<tokio::runtime::Runtime>);

impl OwnRuntime {
    pub fn handle(&self) -> &tokio::runtime::Handle {
        self.0.as_ref().expect("the runtime is only taken on drop").handle()
    }
}

impl Drop for OwnRuntime {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

/// How much lower: `nice` 10 against the writer's 0, a weight of 110 against 1024 when
/// both want the same core.
const NICE_INCREMENT: i32 = 10;

/// Lowers the calling thread's priority by [`NICE_INCREMENT`]. For the runtime's
/// `on_thread_start`: a thread started from a lowered thread inherits its priority, so
/// the ingest writer's thread must be started from one that is not (the main thread).
pub fn lower_this_thread() {
    #[cfg(target_os = "linux")]
    {
        // On Linux the nice value belongs to each thread, and `who` = 0 names the
        // calling one. `setpriority` sets a value rather than adding to it, so add to
        // the one inherited (a server started under `nice` stays below it). Failing is
        // harmless: the thread keeps its priority.
        // SAFETY: plain system calls, no memory is passed.
        unsafe {
            let inherited = libc::getpriority(libc::PRIO_PROCESS, 0);
            libc::setpriority(libc::PRIO_PROCESS, 0, (inherited + NICE_INCREMENT).min(19));
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::{lower_this_thread, NICE_INCREMENT};

    fn nice() -> i32 {
        // SAFETY: plain system call; -1 is a valid nice value, and errors cannot happen
        // for the calling thread.
        unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) }
    }

    #[test]
    fn an_own_runtime_keeps_the_starting_threads_priority_and_drops_inside_another() {
        let before = nice();
        let shared = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .on_thread_start(lower_this_thread)
            .enable_all()
            .build()
            .unwrap();
        // Made from this thread, as `serve` makes the web runtime from the main thread,
        // then used and dropped from a lowered runtime's task.
        let web = super::own_runtime("web-test").unwrap();
        let (on_web, on_shared) = shared.block_on(async move {
            let on_web = web.handle().spawn(async { nice() }).await.unwrap();
            let on_shared = tokio::spawn(async { nice() }).await.unwrap();
            drop(web);
            (on_web, on_shared)
        });
        assert_eq!(on_web, before);
        assert_eq!(on_shared, (before + NICE_INCREMENT).min(19));
    }

    #[test]
    fn lowers_only_the_calling_thread() {
        let before = nice();
        let lowered = std::thread::spawn(move || {
            lower_this_thread();
            let own = nice();
            // A thread it starts inherits the lowered priority.
            let child = std::thread::spawn(nice).join().unwrap();
            (own, child)
        })
        .join()
        .unwrap();
        let expected = (before + NICE_INCREMENT).min(19);
        assert_eq!(lowered, (expected, expected));
        assert_eq!(nice(), before, "the thread that started it keeps its priority");
    }
}
