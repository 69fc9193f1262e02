//! The ingest service both receivers call, in this order: authenticate (before any of the
//! body is read), measure the body without decoding it, reserve the memory it will take,
//! decode, normalize, queue for the writer, wait for the commit.

use super::writer::{self, Job, WriterGone};
use crate::api::{AgentToken, ApiError, TokenAuth};
use crate::config::IngestAuth;
use domain::access::Scope;
use ingest::decode::{self, DecodeError, Encoding, Shape};
use ingest::pipeline::{prepare, span_count, IngestSettings};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use store::rules::RulesCache;
use store::Db;
use tokio::sync::{mpsc, oneshot, OwnedSemaphorePermit, Semaphore};

/// Why an export was not (wholly) accepted. Each maps to an HTTP status and a gRPC code.
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    /// 401 / UNAUTHENTICATED.
    #[error("{0}")]
    Unauthenticated(String),
    /// 403 / PERMISSION_DENIED.
    #[error("{0}")]
    Forbidden(String),
    /// 400 / INVALID_ARGUMENT: nothing in the request could be stored.
    #[error("{0}")]
    Invalid(String),
    /// 413 / RESOURCE_EXHAUSTED: the request is larger than the limit.
    #[error("{0}")]
    TooLarge(String),
    /// 503 / UNAVAILABLE with Retry-After: the queue is full or storage failed; nothing
    /// from this request was stored, so retrying is safe.
    #[error("{0}")]
    Unavailable(String),
}

fn from_decode(e: DecodeError) -> IngestError {
    match e {
        DecodeError::TooLarge(m) => IngestError::TooLarge(m),
        DecodeError::Invalid(m) => IngestError::Invalid(m),
    }
}

/// What an accepted export did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExportOutcome {
    pub accepted: usize,
    pub rejected: usize,
    /// Why spans were rejected; empty when none were.
    pub message: String,
}

/// Counters for `/metrics` and the benchmark.
#[derive(Debug, Default)]
pub struct IngestCounters {
    pub spans_accepted: AtomicU64,
    pub spans_rejected: AtomicU64,
    pub requests_refused_busy: AtomicU64,
}

#[derive(Clone)]
pub struct IngestService {
    inner: Arc<Inner>,
}

struct Inner {
    settings: IngestSettings,
    auth: IngestAuth,
    tokens: TokenAuth,
    db: Db,
    /// Tool policies and prices, shared with the writer (and the pages when they run in
    /// the same process).
    rules: RulesCache,
    queue: mpsc::Sender<Job>,
    /// Bytes of requests between arrival and commit; bounds memory under overload.
    budget: Arc<Semaphore>,
    budget_bytes: usize,
    pub max_body_bytes: usize,
    counters: Arc<IngestCounters>,
}

/// Memory a request takes between arrival and commit, per byte of its encoded body: the
/// body, the decoded request (every attribute its own string) and the normalized spans
/// with their JSON text: about 8 times the protobuf's size for the load generator's
/// 512-span exports. Reserving less lets many exporters at once push the server's
/// resident memory past its budget.
pub const MEMORY_PER_WIRE_BYTE: usize = 8;

/// What normalizing one span adds beyond its decoded form: the `NormalizedSpan`, its
/// attribute map and its stored JSON. A body of minimal spans is small on the wire and
/// large once normalized, so a request reserves at least this per span.
pub const MEMORY_PER_SPAN: usize = 2048;

/// The memory a measured request is reserved before it is decoded: the decoded structs
/// (counted twice: the request stays alive while its spans are normalized) plus each
/// span's normalized form, and never less than the wire-size estimate. The wire-size
/// estimate is capped at the whole budget, as it always was (a large export may take all
/// of it); the structural part is exact enough to refuse a request that can never fit.
pub fn memory_for(shape: &Shape, wire_bytes: usize, budget_bytes: usize) -> (usize, usize) {
    let decoded = shape.decoded_bytes.saturating_mul(2);
    let structural = decoded.saturating_add(shape.spans.saturating_mul(MEMORY_PER_SPAN));
    let by_size = wire_bytes.saturating_mul(MEMORY_PER_WIRE_BYTE).min(budget_bytes);
    (structural, structural.max(by_size))
}

/// Seconds an exporter is asked to wait when Flightdeck is busy.
pub const RETRY_AFTER_SECS: u64 = 1;

impl IngestService {
    /// Starts the writer and the policy refresher; the service is ready at once. The
    /// second value resolves if the writer ends; `serve` stops the process when that
    /// happens before shutdown, since no export could be stored any more.
    pub fn start(
        db: Db,
        settings: IngestSettings,
        auth: IngestAuth,
        max_body_bytes: usize,
        budget_bytes: usize,
    ) -> std::io::Result<(Self, WriterGone)> {
        let writers = crate::config::DEFAULT_POSTGRES_WRITERS;
        Self::start_with_rules(db, settings, auth, max_body_bytes, budget_bytes, RulesCache::default(), writers)
    }

    /// Like [`IngestService::start`], deriving runs under `rules` (shared with the pages,
    /// so a price or policy changed there applies to the next write at once), with
    /// `postgres_writers` ingest writers on PostgreSQL.
    pub fn start_with_rules(
        db: Db,
        settings: IngestSettings,
        auth: IngestAuth,
        max_body_bytes: usize,
        budget_bytes: usize,
        rules: RulesCache,
        postgres_writers: usize,
    ) -> std::io::Result<(Self, WriterGone)> {
        // A request whose decoded form could never fit the budget is refused while it is
        // measured, before anything is built (see `memory_for`).
        let mut settings = settings;
        settings.decode.max_decoded_bytes = budget_bytes / 2;
        let (queue, jobs) = mpsc::channel(256);
        let writer_gone = writer::start(db.clone(), settings.body_policy, rules.clone(), jobs, postgres_writers)?;
        let service = IngestService {
            inner: Arc::new(Inner {
                settings,
                auth,
                tokens: TokenAuth::new(db.clone()),
                db,
                rules,
                queue,
                budget: Arc::new(Semaphore::new(budget_bytes)),
                budget_bytes,
                max_body_bytes,
                counters: Arc::default(),
            }),
        };
        let refresher = service.clone();
        tokio::spawn(async move {
            let mut every = tokio::time::interval(Duration::from_secs(5));
            loop {
                every.tick().await;
                refresher.refresh_policies().await;
            }
        });
        Ok((service, writer_gone))
    }

    pub fn max_body_bytes(&self) -> usize {
        self.inner.max_body_bytes
    }

    pub fn counters(&self) -> &IngestCounters {
        &self.inner.counters
    }

    /// The counters, shared with `/metrics` on the web listener.
    pub fn shared_counters(&self) -> Arc<IngestCounters> {
        self.inner.counters.clone()
    }

    /// Reloads tool policies and prices (also done every few seconds, which is how a
    /// change made through another instance arrives).
    pub async fn refresh_policies(&self) {
        if let Err(e) = self.inner.rules.refresh(&self.inner.db).await {
            tracing::warn!(error = %e, "could not reload tool policies and prices");
        }
    }

    /// Checks the `Authorization` header value against the ingest setting.
    pub async fn authenticate(&self, authorization: Option<&str>) -> Result<Option<AgentToken>, IngestError> {
        if self.inner.auth == IngestAuth::None {
            return Ok(None);
        }
        let token = self.inner.tokens.authenticate(authorization).await.map_err(|e| match e {
            ApiError::Unauthorized(m) => IngestError::Unauthenticated(m),
            other => IngestError::Unavailable(other.to_string()),
        })?;
        token.require(Scope::Ingest).map_err(|e| IngestError::Forbidden(e.to_string()))?;
        Ok(Some(token))
    }

    /// Reserves the bytes of a body about to be read, from its declared length, so that
    /// under overload bodies are refused unread rather than buffered first. What decoding
    /// it will take is added once it has been measured (see [`IngestService::receive`]).
    pub fn reserve_for_body(&self, wire_bytes: usize) -> Result<OwnedSemaphorePermit, IngestError> {
        self.reserve(wire_bytes)
    }

    /// Reserves `bytes` of the memory budget (at most all of it), or refuses.
    pub fn reserve(&self, bytes: usize) -> Result<OwnedSemaphorePermit, IngestError> {
        // The budget is at most u32::MAX (the configuration checks), so this never saturates.
        let wanted = u32::try_from(bytes.clamp(1, self.inner.budget_bytes)).unwrap_or(u32::MAX);
        self.inner.budget.clone().try_acquire_many_owned(wanted).map_err(|_| {
            self.inner.counters.requests_refused_busy.fetch_add(1, Ordering::Relaxed);
            IngestError::Unavailable("flightdeck is busy storing earlier exports; retry after the delay".into())
        })
    }

    /// Measures an uncompressed body, reserves the memory it will take (on top of `early`,
    /// what was reserved from its declared length), decodes and stores it. A body that
    /// passes a decoding limit, or whose decoded form could never fit the memory budget,
    /// is refused (413) before it is decoded.
    pub async fn receive(
        &self,
        encoding: Encoding,
        bytes: &[u8],
        early: Option<OwnedSemaphorePermit>,
        sent_by: Option<&AgentToken>,
    ) -> Result<ExportOutcome, IngestError> {
        let shape = decode::measure(encoding, bytes, &self.inner.settings.decode).map_err(from_decode)?;
        let (structural, needed) = memory_for(&shape, bytes.len(), self.inner.budget_bytes);
        if structural > self.inner.budget_bytes {
            return Err(IngestError::TooLarge(format!(
                "the request would take {} MiB of memory to store, more than the whole ingest_queue_bytes \
                 budget ({} MiB); send fewer spans per request",
                structural / (1024 * 1024),
                self.inner.budget_bytes / (1024 * 1024)
            )));
        }
        let permit = match early {
            Some(mut held) => {
                let held_bytes = held.num_permits();
                if needed > held_bytes {
                    held.merge(self.reserve(needed - held_bytes)?);
                }
                held
            }
            None => self.reserve(needed)?,
        };
        let request = decode::decode(encoding, bytes).map_err(from_decode)?;
        self.export(request, permit, sent_by.map(|t| t.id)).await
    }

    /// Validates, normalizes and stores a request sent with the token `sent_by` (none
    /// when ingest needs no token); returns after the commit.
    pub async fn export(
        &self,
        request: ExportTraceServiceRequest,
        permit: OwnedSemaphorePermit,
        sent_by: Option<i64>,
    ) -> Result<ExportOutcome, IngestError> {
        if span_count(&request) == 0 {
            return Ok(ExportOutcome::default());
        }
        let rules = self.inner.rules.current();
        let service = self.clone();
        // Normalization is CPU work (mapping, redaction, hashing): keep it off the I/O threads.
        let mut prepared =
            tokio::task::spawn_blocking(move || prepare(&request, &service.inner.settings, &rules.policies))
                .await
                .map_err(|_| IngestError::Unavailable("ingest worker failed; retry".into()))?;
        for span in &mut prepared.spans {
            span.sent_by_token = sent_by;
        }
        let counters = &self.inner.counters;
        counters.spans_rejected.fetch_add(prepared.rejected as u64, Ordering::Relaxed);
        if prepared.spans.is_empty() {
            return Err(IngestError::Invalid(prepared.error_message()));
        }
        let (reply, done) = oneshot::channel();
        let outcome = ExportOutcome {
            accepted: prepared.spans.len(),
            rejected: prepared.rejected,
            message: prepared.error_message(),
        };
        let job = Job { spans: prepared.spans, reply, _permit: permit };
        self.inner.queue.try_send(job).map_err(|e| match e {
            mpsc::error::TrySendError::Full(_) => {
                counters.requests_refused_busy.fetch_add(1, Ordering::Relaxed);
                IngestError::Unavailable("the ingest queue is full; retry after the delay".into())
            }
            mpsc::error::TrySendError::Closed(_) => IngestError::Unavailable("the ingest writer stopped; retry".into()),
        })?;
        match done.await {
            Ok(Ok(())) => {
                counters.spans_accepted.fetch_add(outcome.accepted as u64, Ordering::Relaxed);
                Ok(outcome)
            }
            // Storage failed (database down, disk full): answered 503 like a full queue, and
            // counted with it, so one metric shows every export refused for a retry.
            Ok(Err(message)) => {
                counters.requests_refused_busy.fetch_add(1, Ordering::Relaxed);
                Err(IngestError::Unavailable(message))
            }
            Err(_) => {
                counters.requests_refused_busy.fetch_add(1, Ordering::Relaxed);
                Err(IngestError::Unavailable("the ingest writer stopped; retry".into()))
            }
        }
    }
}
