//! [`AuditLog`]: the writer thread, its queue and group commit.

use crate::governance::{self, ChainKey, GovernanceRecord};
use crate::store::{self, Chain, Item, Job, Store};
use crate::{AuditBackend, AuditConfig, AuditError, AuditExplanation, AuditRecord, OnFull, now_ms};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tokio::sync::{Notify, mpsc, oneshot};

/// Rows per retention transaction in the writer thread (between two group commits).
const WRITER_PRUNE_CHUNK: usize = 1000;

/// Counters of an [`AuditLog`] since it was opened.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct AuditStats {
    /// Records waiting in the queue now.
    pub queued: u64,
    /// Records in the transaction being written now.
    pub writing: u64,
    /// Records committed.
    pub committed: u64,
    /// Appends refused because the queue was full ([`AuditError::Full`]).
    pub refused: u64,
    /// Records whose transaction failed ([`AuditError::Write`]).
    pub failed: u64,
    /// Transactions committed (group commits).
    pub batches: u64,
    /// Records deleted by the retention (at open and by the writer).
    pub pruned: u64,
    /// The last write or retention error, if any.
    pub last_error: Option<String>,
}

#[derive(Debug)]
struct Shared {
    capacity: usize,
    writing: AtomicU64,
    committed: AtomicU64,
    refused: AtomicU64,
    failed: AtomicU64,
    batches: AtomicU64,
    pruned: AtomicU64,
    last_error: Mutex<Option<String>>,
    shutdown: Notify,
}

impl Shared {
    fn set_error(&self, e: String) {
        match self.last_error.lock() {
            Ok(mut g) => *g = Some(e),
            Err(p) => *p.into_inner() = Some(e),
        }
    }

    fn stats(&self, tx: &mpsc::Sender<Job>) -> AuditStats {
        let last_error = match self.last_error.lock() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        };
        let queued = if tx.is_closed() {
            0
        } else {
            self.capacity.saturating_sub(tx.capacity()) as u64
        };
        AuditStats {
            queued,
            writing: self.writing.load(Relaxed),
            committed: self.committed.load(Relaxed),
            refused: self.refused.load(Relaxed),
            failed: self.failed.load(Relaxed),
            batches: self.batches.load(Relaxed),
            pruned: self.pruned.load(Relaxed),
            last_error,
        }
    }
}

/// An open audit log: one database connection (SQLite in WAL mode, or PostgreSQL) owned by
/// one writer thread, fed by a bounded queue. Appends go through [`AuditWriter`]s; the writer thread commits whatever is
/// queued (up to `max_batch` records) in one transaction and then acknowledges each record.
///
/// Dropping the log shuts it down like [`AuditLog::shutdown`] (blocking until the queue is
/// written).
#[derive(Debug)]
pub struct AuditLog {
    path: PathBuf,
    writer: AuditWriter,
    thread: Option<JoinHandle<()>>,
}

/// A cheap, cloneable handle to append records to an [`AuditLog`].
#[derive(Debug, Clone)]
pub struct AuditWriter {
    tx: mpsc::Sender<Job>,
    on_full: OnFull,
    shared: Arc<Shared>,
    hasher: governance::GovernanceHasher,
}

impl AuditLog {
    /// Opens the log: with the SQLite backend (creating the file and its directory if
    /// needed) at `cfg.path` in WAL mode, with the PostgreSQL backend on the database of
    /// `[audit.postgres]`; the schema created or migrated (refused if newer than this build
    /// knows, or not a Rampart audit log), records past `retention_days` deleted, writer
    /// thread started. The connection is made, and the schema checked, on the writer thread
    /// before this returns.
    ///
    /// The governance chain's key comes from the variable `cfg.chain_key_env`
    /// ([`ChainKey::from_env`]); a log whose chain was written under another key is refused
    /// ([`AuditError::ChainKey`]).
    pub fn open(cfg: AuditConfig) -> Result<AuditLog, AuditError> {
        let key = ChainKey::from_env(&cfg.chain_key_env);
        Self::open_with_chain_key(cfg, key)
    }

    /// [`AuditLog::open`] with the governance chain's key given.
    pub fn open_with_chain_key(cfg: AuditConfig, key: ChainKey) -> Result<AuditLog, AuditError> {
        cfg.validate()?;
        let path = match cfg.backend {
            AuditBackend::Sqlite => cfg.path.clone(),
            AuditBackend::Postgres => PathBuf::from(cfg.location()),
        };
        let hasher = key.hasher();
        let on_full = cfg.on_full;
        let shared = Arc::new(Shared {
            capacity: cfg.queue_capacity,
            writing: AtomicU64::new(0),
            committed: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            batches: AtomicU64::new(0),
            pruned: AtomicU64::new(0),
            last_error: Mutex::new(None),
            shutdown: Notify::new(),
        });
        let (tx, rx) = mpsc::channel(cfg.queue_capacity);
        let thread_shared = Arc::clone(&shared);
        // The thread opens the store (a PostgreSQL client must not be driven from inside an
        // async runtime, which the caller may be running), applies the retention, builds its
        // own (timer-only) runtime and reports whether all of it worked.
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("rampart-audit-writer".into())
            .spawn(move || {
                let started = (|| -> Result<_, AuditError> {
                    let mut store = open_store(&cfg, &key)?;
                    if let Some(r) = cfg.retention_ms() {
                        let n = store::prune_all(store.as_mut(), now_ms().saturating_sub(r))?;
                        thread_shared.pruned.fetch_add(n, Relaxed);
                    }
                    let rt = tokio::runtime::Builder::new_current_thread()
                        .enable_time()
                        .build()
                        .map_err(|e| {
                            AuditError::Thread(format!("could not build its runtime: {e}"))
                        })?;
                    Ok((store, rt))
                })();
                match started {
                    Ok((store, rt)) => {
                        let _ = ready_tx.send(Ok(()));
                        let state = WriterThread {
                            store,
                            rx,
                            shared: thread_shared,
                            max_batch: cfg.max_batch,
                            retention_ms: cfg.retention_ms(),
                            prune_interval: Duration::from_secs(cfg.prune_interval_s),
                            chain: Chain {
                                key,
                                keep_values: cfg.tool_argument_values,
                            },
                        };
                        state.run(&rt);
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                    }
                }
            })
            .map_err(|e| AuditError::Thread(format!("could not start it: {e}")))?;
        match ready_rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                let _ = thread.join();
                return Err(e);
            }
            Err(_) => {
                let _ = thread.join();
                return Err(AuditError::Thread("it stopped while starting".into()));
            }
        }
        Ok(AuditLog {
            path,
            writer: AuditWriter {
                tx,
                on_full,
                shared,
                hasher,
            },
            thread: Some(thread),
        })
    }

    /// A handle to append records.
    pub fn writer(&self) -> AuditWriter {
        self.writer.clone()
    }

    /// The database file (SQLite), or `postgres ($VAR)` (PostgreSQL).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The counters.
    pub fn stats(&self) -> AuditStats {
        self.writer.stats()
    }

    /// Stops accepting records (later appends get [`AuditError::Closed`]), writes everything
    /// already queued, and joins the writer thread; returns the final counters (records whose
    /// transaction failed are counted in `failed`, and their appends got
    /// [`AuditError::Write`]). Blocks the calling thread: from async code, use
    /// [`AuditLog::shutdown_async`].
    pub fn shutdown(mut self) -> Result<AuditStats, AuditError> {
        self.stop()?;
        Ok(self.stats())
    }

    /// [`AuditLog::shutdown`] on a blocking-task thread of the current Tokio runtime.
    pub async fn shutdown_async(self) -> Result<AuditStats, AuditError> {
        tokio::task::spawn_blocking(move || self.shutdown())
            .await
            .map_err(|e| AuditError::Thread(e.to_string()))?
    }

    fn stop(&mut self) -> Result<(), AuditError> {
        let Some(thread) = self.thread.take() else {
            return Ok(());
        };
        self.writer.shared.shutdown.notify_one();
        thread
            .join()
            .map_err(|_| AuditError::Thread("the writer thread panicked".into()))
    }
}

impl Drop for AuditLog {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

impl AuditWriter {
    /// Queues `rec` and resolves with its row ID once the transaction holding it has
    /// committed (group commit), so an `Ok` record is in the log even if the process is
    /// killed right after. Never blocks a thread.
    ///
    /// When the queue is full: with [`OnFull::FailClosed`] returns [`AuditError::Full`] at
    /// once; with [`OnFull::Backpressure`] waits up to `wait_ms` for room (this needs a Tokio
    /// runtime with the time driver enabled), then [`AuditError::Full`]. A failed
    /// transaction gives [`AuditError::Write`], a shut-down log [`AuditError::Closed`].
    ///
    /// Cancel-safe in the sense that dropping the future after the record was queued still
    /// writes it; only the acknowledgement is lost.
    pub async fn append(&self, rec: AuditRecord) -> Result<i64, AuditError> {
        self.send(Item::Decision(rec)).await
    }

    /// Appends a governance row (tool decision, approval, break-glass event) to the hash
    /// chain, through the same queue and group commit as [`AuditWriter::append`] (same
    /// overload and durability behaviour), and resolves with its `seq` once committed. The
    /// writer assigns `seq` and the chain hash inside the inserting transaction.
    pub async fn append_governance(&self, rec: GovernanceRecord) -> Result<i64, AuditError> {
        self.send(Item::Governance(rec)).await
    }

    async fn send(&self, item: Item) -> Result<i64, AuditError> {
        let (ack, done) = oneshot::channel();
        match self.tx.try_send(Job { item, ack }) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Closed(_)) => return Err(AuditError::Closed),
            Err(mpsc::error::TrySendError::Full(job)) => match self.on_full {
                OnFull::FailClosed => {
                    self.shared.refused.fetch_add(1, Relaxed);
                    return Err(AuditError::Full);
                }
                OnFull::Backpressure { wait_ms } => {
                    let wait = Duration::from_millis(wait_ms);
                    match tokio::time::timeout(wait, self.tx.send(job)).await {
                        Ok(Ok(())) => {}
                        Ok(Err(_)) => return Err(AuditError::Closed),
                        Err(_) => {
                            self.shared.refused.fetch_add(1, Relaxed);
                            return Err(AuditError::Full);
                        }
                    }
                }
            },
        }
        done.await.unwrap_or(Err(AuditError::Closed))
    }

    /// Records a deferred judge explanation in its decision's row (the row `e.decision_id`,
    /// if its request ID is `e.request_id`), through the same queue and group commit as
    /// [`AuditWriter::append`]; resolves once committed with whether a row was updated.
    pub async fn record_explanation(&self, e: AuditExplanation) -> Result<bool, AuditError> {
        self.send(Item::Explanation(e)).await.map(|id| id > 0)
    }

    /// The log's counters.
    pub fn stats(&self) -> AuditStats {
        self.shared.stats(&self.tx)
    }

    /// The hasher of argument values and conversation ids under the log's chain key
    /// (for [`ToolDecisionEvent::new`](crate::ToolDecisionEvent::new) and the conversation
    /// of approval and break-glass rows).
    pub fn hasher(&self) -> &governance::GovernanceHasher {
        &self.hasher
    }

    /// Whether the log has shut down (appends return [`AuditError::Closed`]).
    pub fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }
}

/// The store of `cfg.backend`, opened, its schema current and its chain's key checked.
fn open_store(cfg: &AuditConfig, key: &ChainKey) -> Result<Box<dyn Store>, AuditError> {
    Ok(match cfg.backend {
        AuditBackend::Sqlite => Box::new(crate::sqlite::SqliteStore::open(cfg, key)?),
        AuditBackend::Postgres => Box::new(crate::pg::PgStore::open(
            &cfg.postgres.clone().unwrap_or_default(),
            key,
        )?),
    })
}

// A `Job` is moved once into the batch; boxing it would cost an allocation per record.
#[allow(clippy::large_enum_variant)]
enum Event {
    Job(Job),
    Tick,
    Shutdown,
}

struct WriterThread {
    store: Box<dyn Store>,
    rx: mpsc::Receiver<Job>,
    shared: Arc<Shared>,
    max_batch: usize,
    retention_ms: Option<i64>,
    prune_interval: Duration,
    chain: Chain,
}

impl WriterThread {
    fn run(mut self, rt: &tokio::runtime::Runtime) {
        let mut batch: Vec<Job> = Vec::with_capacity(self.max_batch);
        let mut next_prune = Instant::now() + self.prune_interval;
        let mut pruning = false;
        loop {
            let wait = if self.retention_ms.is_none() {
                Duration::from_secs(3600)
            } else if pruning {
                Duration::ZERO
            } else {
                next_prune.saturating_duration_since(Instant::now())
            };
            let (shared, rx) = (&self.shared, &mut self.rx);
            let event = rt.block_on(async {
                tokio::select! {
                    biased;
                    () = shared.shutdown.notified() => Event::Shutdown,
                    job = rx.recv() => job.map_or(Event::Shutdown, Event::Job),
                    () = tokio::time::sleep(wait) => Event::Tick,
                }
            });
            match event {
                Event::Shutdown => break,
                Event::Job(job) => {
                    batch.push(job);
                    while batch.len() < self.max_batch {
                        match self.rx.try_recv() {
                            Ok(job) => batch.push(job),
                            Err(_) => break,
                        }
                    }
                    self.commit(&mut batch);
                }
                Event::Tick => {}
            }
            if let Some(retention) = self.retention_ms
                && (pruning || Instant::now() >= next_prune)
            {
                let cutoff = now_ms().saturating_sub(retention);
                match self.store.prune_chunk(cutoff, WRITER_PRUNE_CHUNK) {
                    Ok(n) => {
                        self.shared.pruned.fetch_add(n as u64, Relaxed);
                        pruning = n == WRITER_PRUNE_CHUNK;
                    }
                    Err(e) => {
                        self.shared.set_error(format!("retention: {e}"));
                        pruning = false;
                    }
                }
                if !pruning {
                    next_prune = Instant::now() + self.prune_interval;
                }
            }
        }
        // Shutdown: refuse new records, write what is queued.
        self.rx.close();
        loop {
            while batch.len() < self.max_batch {
                match self.rx.try_recv() {
                    Ok(job) => batch.push(job),
                    Err(_) => break,
                }
            }
            if batch.is_empty() {
                break;
            }
            self.commit(&mut batch);
        }
        self.store.close();
    }

    fn commit(&mut self, batch: &mut Vec<Job>) {
        let n = batch.len() as u64;
        self.shared.writing.store(n, Relaxed);
        match self.store.write_batch(batch, &self.chain) {
            Ok(ids) => {
                self.shared.committed.fetch_add(n, Relaxed);
                self.shared.batches.fetch_add(1, Relaxed);
                self.shared.writing.store(0, Relaxed);
                for (job, id) in batch.drain(..).zip(ids) {
                    let _ = job.ack.send(Ok(id));
                }
            }
            Err(e) => {
                let message = match e {
                    AuditError::Write { message } => message,
                    e => error_chain(&e),
                };
                self.shared.failed.fetch_add(n, Relaxed);
                self.shared.writing.store(0, Relaxed);
                self.shared.set_error(message.clone());
                for job in batch.drain(..) {
                    let _ = job.ack.send(Err(AuditError::Write {
                        message: message.clone(),
                    }));
                }
            }
        }
    }
}

/// An error and its sources, `: `-separated.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(c) = src {
        s.push_str(": ");
        s.push_str(&c.to_string());
        src = c.source();
    }
    s
}
