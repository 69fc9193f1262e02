//! The single writer: takes queued batches, commits as many as are waiting in one
//! transaction (group commit: one fsync for many exports), then answers each. Nothing is
//! acknowledged before its commit, and a failed commit is reported to every exporter in
//! it, who retries; spans are idempotent by (trace id, span id), so retries are safe.

use app::ingest::normalize::NormalizedSpan;
use app::ingest::pipeline::BodyPolicy;
use app::storage::rules::RulesCache;
use app::storage::{wal, write, Db};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot, OwnedSemaphorePermit};

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
/// them (see `app::storage::wal`): at ~40,000 spans/s the log grows ~170 MB/s, so this
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

/// Resolves when the writer has ended, whether because every sender of its queue is
/// gone (shutdown) or because it panicked: either way nothing more will be committed, and
/// exports still queued are answered "retry" (their reply channels close unanswered).
pub struct WriterGone(oneshot::Receiver<()>);

impl WriterGone {
    /// For tests of what waits on it: resolves when `alive`'s sender is dropped.
    #[cfg(test)]
    pub fn from_receiver(alive: oneshot::Receiver<()>) -> Self {
        WriterGone(alive)
    }

    pub async fn wait(self) {
        // Nothing is ever sent: the sender is dropped when the writer's future is, which
        // unwinding after a panic does too.
        let _ = self.0.await;
    }
}

/// Starts the writer for `db`. On SQLite it gets an OS thread of its own, with a
/// single-threaded runtime and its own connection (whose SQLite thread it starts, so that
/// thread shares its priority): it is the one stage of ingest that cannot run in
/// parallel, and on a busy machine every statement's hand-off between the writer task
/// and SQLite's thread used to wait behind the threads decoding and normalizing exports.
/// With those at a lower priority (see `crate::priority`) the writer's two threads run
/// first. On PostgreSQL the database server does the writing; the writer stays a task on
/// the shared runtime, whose pool it shares.
pub fn start(
    db: Db,
    body_policy: BodyPolicy,
    rules: RulesCache,
    jobs: mpsc::Receiver<Job>,
) -> std::io::Result<WriterGone> {
    let (alive, gone) = oneshot::channel();
    match db {
        Db::Postgres(_) => {
            tokio::spawn(run(db.dedicated(), body_policy, rules, jobs, alive));
        }
        // Its connection is opened on that thread; it ends when every sender of `jobs`
        // is gone.
        Db::Sqlite(_) => crate::priority::spawn_on_own_thread("ingest-writer", move || {
            run(db.dedicated(), body_policy, rules, jobs, alive)
        })?,
    }
    Ok(WriterGone(gone))
}

/// `_alive` is dropped when this future is, which is what [`WriterGone`] waits for.
async fn run(
    db: Db,
    body_policy: BodyPolicy,
    rules: RulesCache,
    mut jobs: mpsc::Receiver<Job>,
    _alive: oneshot::Sender<()>,
) {
    let mut log = LogRestarter::default();
    while let Some(first) = jobs.recv().await {
        let mut batch = vec![first];
        let mut total = batch[0].spans.len();
        let cap = match db.interactive_writes_within(INTERACTIVE_RECENTLY) {
            true => SHARED_SPANS_PER_COMMIT,
            false => MAX_SPANS_PER_COMMIT,
        };
        while total < cap {
            match jobs.try_recv() {
                Ok(job) => {
                    total += job.spans.len();
                    batch.push(job);
                }
                Err(_) => break,
            }
        }
        let all: Vec<NormalizedSpan> = batch.iter_mut().flat_map(|j| std::mem::take(&mut j.spans)).collect();
        let started = Instant::now();
        // The prices and policies as they are now: runs are derived under them.
        let result = write::commit_with(&db, &all, body_policy, &rules.current()).await;
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
        for job in batch {
            let _ = job.reply.send(reply.clone());
        }
        // After the replies: the exporters are not kept waiting for it.
        log.after_commit(&db).await;
    }
}

#[cfg(test)]
mod tests {
    use super::WriterGone;
    use std::time::Duration;
    use tokio::sync::oneshot;

    #[tokio::test]
    async fn a_writer_that_panics_on_its_thread_is_seen_gone() {
        let (alive, gone) = oneshot::channel::<()>();
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
        tokio::time::timeout(Duration::from_secs(30), WriterGone(gone).wait()).await.expect("the panic is noticed");
    }
}
