//! The ingest writer: takes queued batches, commits as many as are waiting in one
//! transaction (group commit: one fsync for many exports), then answers each. Nothing is
//! acknowledged before its commit, and a failed commit is reported to every exporter in
//! it, who retries; spans are idempotent by (trace id, span id), so retries are safe.
//!
//! SQLite has one writer (it has one write lock). PostgreSQL has several, taking turns at
//! the queue: while one commits, the next gathers what has arrived and writes beside it,
//! as two instances on one database do (the write path is safe for concurrent writers).

use domain::span::BodyPolicy;
use domain::span::NormalizedSpan;
use std::sync::Arc;
use std::time::{Duration, Instant};
use store::rules::RulesCache;
use store::{wal, write, Db};
use tokio::sync::{mpsc, oneshot, Mutex, OwnedSemaphorePermit};

/// One export's spans, waiting to be committed.
pub struct Job {
    pub spans: Vec<NormalizedSpan>,
    pub reply: oneshot::Sender<Result<(), String>>,
    /// Released when the job is done, returning its bytes to the memory budget.
    pub _permit: OwnedSemaphorePermit,
}

/// Most spans committed together; bigger batches amortize the commit further but make
/// every exporter in them wait longer.
const MAX_SPANS_PER_COMMIT: usize = 8_000;

/// Most spans committed together on SQLite while guarded calls, decisions or claims are
/// writing too (any in the last [`INTERACTIVE_RECENTLY`]): each of those waits for the
/// commit in progress, and an 8,000-span commit holds SQLite's write lock for a few
/// hundred milliseconds on a busy machine. One export's worth keeps the wait to
/// milliseconds; ingest then commits more often and, at its limit, answers 503 sooner.
const SHARED_SPANS_PER_COMMIT: usize = 512;
const INTERACTIVE_RECENTLY: Duration = Duration::from_secs(2);

/// How often, while commits keep coming, the writer restarts SQLite's log between two of
/// them (see `store::wal`): at ~40,000 spans/s the log grows ~170 MB/s, so this
/// keeps it at tens of MB, and each restart (10-15 ms, most of the copying already done
/// by the checkpoint loop) costs a few percent of the writer's time.
pub const RESTART_LOG_EVERY: Duration = Duration::from_millis(250);

/// Restarts the log on the writer's own connection when [`RESTART_LOG_EVERY`] has passed.
pub struct LogRestarter {
    last: Instant,
}

impl Default for LogRestarter {
    fn default() -> Self {
        Self { last: Instant::now() }
    }
}

impl LogRestarter {
    /// Call after each commit, on the handle the writer commits through.
    pub async fn after_commit(&mut self, db: &Db) {
        if self.last.elapsed() < RESTART_LOG_EVERY {
            return;
        }
        self.last = Instant::now();
        match wal::restart_log(db).await {
            Ok(c) => tracing::trace!(?c, elapsed_ms = self.last.elapsed().as_millis() as u64, "log restarted"),
            // Nothing is lost: the log just grows until the next try (or the automatic
            // checkpoint of another connection).
            Err(e) => tracing::warn!(error = %e, "could not restart the SQLite log"),
        }
    }
}

/// Resolves when a writer has ended, whether because every sender of its queue is gone
/// (shutdown) or because it panicked: either way it commits nothing more, and exports
/// still queued are answered "retry" (their reply channels close unanswered).
pub struct WriterGone(mpsc::UnboundedReceiver<()>);

/// Held by a writer for as long as it runs; dropping it (also while unwinding from a
/// panic) tells [`WriterGone`].
pub struct WriterAlive(mpsc::UnboundedSender<()>);

impl Drop for WriterAlive {
    fn drop(&mut self) {
        let _ = self.0.send(());
    }
}

impl WriterGone {
    /// A watch and the first of its writers' liveness tokens (clone more with
    /// [`WriterAlive::another`]).
    pub fn watch() -> (WriterAlive, WriterGone) {
        let (alive, gone) = mpsc::unbounded_channel();
        (WriterAlive(alive), WriterGone(gone))
    }

    /// Resolves when the first writer ends.
    pub async fn wait(&mut self) {
        let _ = self.0.recv().await;
    }
}

impl WriterAlive {
    pub fn another(&self) -> WriterAlive {
        WriterAlive(self.0.clone())
    }
}

/// Starts the writer for `db`. On SQLite it gets an OS thread of its own, with a
/// single-threaded runtime and its own connection (whose SQLite thread it starts, so that
/// thread shares its priority): it is the one stage of ingest that cannot run in
/// parallel, and on a busy machine every statement's hand-off between the writer task
/// and SQLite's thread used to wait behind the threads decoding and normalizing exports.
/// With those at a lower priority (see `crate::priority`) the writer's two threads run
/// first. On PostgreSQL the database server does the writing; `postgres_writers` tasks
/// (at least one) on the shared runtime share its pool and take turns at the queue.
pub fn start(
    db: Db,
    body_policy: BodyPolicy,
    rules: RulesCache,
    jobs: mpsc::Receiver<Job>,
    postgres_writers: usize,
) -> std::io::Result<WriterGone> {
    let (alive, gone) = WriterGone::watch();
    let jobs = Arc::new(Mutex::new(jobs));
    match db {
        Db::Postgres(_) => {
            for _ in 1..postgres_writers {
                tokio::spawn(run(db.dedicated(), body_policy, rules.clone(), jobs.clone(), alive.another()));
            }
            tokio::spawn(run(db.dedicated(), body_policy, rules, jobs, alive));
        }
        // Its connection is opened on that thread; it ends when every sender of `jobs`
        // is gone.
        Db::Sqlite { .. } => crate::priority::spawn_on_own_thread("ingest-writer", move || {
            run(db.dedicated(), body_policy, rules, jobs, alive)
        })?,
    }
    Ok(gone)
}

/// `_alive` is dropped when this future is, which is what [`WriterGone`] waits for.
async fn run(
    db: Db,
    body_policy: BodyPolicy,
    rules: RulesCache,
    jobs: Arc<Mutex<mpsc::Receiver<Job>>>,
    _alive: WriterAlive,
) {
    let mut log = LogRestarter::default();
    loop {
        let cap = match db.interactive_writes_within(INTERACTIVE_RECENTLY) {
            true => SHARED_SPANS_PER_COMMIT,
            false => MAX_SPANS_PER_COMMIT,
        };
        // The queue is held only while this writer gathers its batch: then the next
        // writer (PostgreSQL) waits for what arrives during this one's commit.
        let mut batch = {
            let mut queue = jobs.lock().await;
            let Some(first) = queue.recv().await else { break };
            let mut total = first.spans.len();
            let mut batch = vec![first];
            while total < cap {
                match queue.try_recv() {
                    Ok(job) => {
                        total += job.spans.len();
                        batch.push(job);
                    }
                    Err(_) => break,
                }
            }
            batch
        };
        let all: Vec<NormalizedSpan> = batch.iter_mut().flat_map(|j| std::mem::take(&mut j.spans)).collect();
        let started = Instant::now();
        let result = commit(&db, &all, body_policy, &rules).await;
        tracing::debug!(
            spans = all.len(),
            exports = batch.len(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "ingest commit"
        );
        let reply = match &result {
            Ok(_) => Ok(()),
            Err(e) => {
                tracing::error!(error = %e, spans = all.len(), "ingest commit failed; exporters will retry");
                Err("storing the spans failed; nothing was stored, retry".to_string())
            }
        };
        for Job { reply: answer, _permit, .. } in batch {
            // The memory first: an exporter answered here may send its next export at
            // once, and that export must find this one's bytes back in the budget.
            drop(_permit);
            let _ = answer.send(reply.clone());
        }
        // After the replies: the exporters are not kept waiting for it.
        log.after_commit(&db).await;
    }
}

/// Times a commit is tried when PostgreSQL aborted it to break a deadlock or a
/// serialization conflict with another writer: the same batch, unchanged, succeeds once
/// the other has committed.
const ATTEMPTS_ON_CONFLICT: u32 = 3;

/// Commits `spans` under the prices and policies as they are now (runs are derived under
/// them), again when PostgreSQL aborted the transaction for a conflict with another writer.
async fn commit(
    db: &Db,
    spans: &[NormalizedSpan],
    body_policy: BodyPolicy,
    rules: &RulesCache,
) -> store::StoreResult<write::WriteOutcome> {
    let mut attempt = 1;
    loop {
        match write::commit_with(db, spans, body_policy, &rules.current()).await {
            Err(e) if attempt < ATTEMPTS_ON_CONFLICT && e.is_write_conflict() => {
                tracing::info!(error = %e, attempt, "ingest commit met another writer; trying again");
                attempt += 1;
            }
            result => return result,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::WriterGone;
    use std::time::Duration;
    use tokio::sync::oneshot;

    #[tokio::test]
    async fn a_writer_that_panics_on_its_thread_is_seen_gone() {
        let (alive, mut gone) = WriterGone::watch();
        let (started, running) = oneshot::channel::<()>();
        crate::priority::spawn_on_own_thread("panicking-writer", move || async move {
            let _alive = alive;
            let _ = started.send(());
            tokio::time::sleep(Duration::from_millis(50)).await;
            panic!("a bug in the writer");
        })
        .unwrap();
        running.await.unwrap();
        // A hang guard only: it resolves within milliseconds.
        tokio::time::timeout(Duration::from_secs(30), gone.wait()).await.expect("the panic is noticed");
    }

    /// Several PostgreSQL writers share one watch: the first to end is enough.
    #[tokio::test]
    async fn the_first_of_several_writers_to_end_is_seen_gone() {
        let (first, mut gone) = WriterGone::watch();
        let second = first.another();
        let still_running = tokio::time::timeout(Duration::from_millis(50), gone.wait()).await;
        assert!(still_running.is_err(), "both writers are alive");
        drop(second);
        tokio::time::timeout(Duration::from_secs(30), gone.wait()).await.expect("one ended");
        drop(first);
    }
}
