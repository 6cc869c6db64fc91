//! `conversation.persist_path`: the conversation store and ledger in an SQLite file, loaded
//! before serving, flushed every `flush_seconds` on a thread of its own, and flushed and
//! checkpointed on shutdown. Keys, numbers, fingerprints and hashes only, never text (see
//! `rampart_conversation::ConversationDb`).

use crate::state::Conversations;
use rampart_conversation::{ConversationDb, FlushStats, LoadStats, PersistError};
use std::sync::Arc;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Duration;

/// The opened and loaded database, not yet flushing.
#[derive(Debug)]
pub(crate) struct Persistence {
    db: ConversationDb,
    conversations: Arc<Conversations>,
    every: Duration,
}

impl Persistence {
    /// Opens `conversation.persist_path` and loads it into the (fresh) store and ledger;
    /// `None` when the state is in memory only. Blocking: call it off the async runtime.
    pub(crate) fn open(conversations: &Arc<Conversations>) -> Result<Option<Self>, PersistError> {
        let Some((path, every)) = conversations.persist() else {
            return Ok(None);
        };
        let db = ConversationDb::open(path)?;
        let stats = db.load(Some(conversations.store()), Some(conversations.ledger()))?;
        log_load(&db, &stats);
        Ok(Some(Self {
            db,
            conversations: conversations.clone(),
            every: *every,
        }))
    }

    /// Starts the flushing thread.
    pub(crate) fn start(self) -> std::io::Result<Flusher> {
        let (stop, stopped) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("rampart-conv-flush".into())
            .spawn(move || self.run(&stopped))?;
        Ok(Flusher { stop, thread })
    }

    /// Flushes every `every` until told to stop (or the [`Flusher`] is dropped), then
    /// flushes one last time and checkpoints.
    fn run(mut self, stopped: &mpsc::Receiver<()>) {
        // A message or the sender dropped: stop.
        while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(self.every) {
            let _ = self.flush();
        }
        if self.flush().is_ok() {
            match self.db.checkpoint() {
                Ok(()) => tracing::info!(
                    path = %self.db.path().display(),
                    "conversation state written and checkpointed"
                ),
                Err(e) => tracing::warn!(error = %e, "conversation database checkpoint failed"),
            }
        }
    }

    /// One flush; a failure is logged, and the next flush (a full snapshot, by
    /// `ConversationDb::flush`'s contract) retries.
    fn flush(&mut self) -> Result<FlushStats, PersistError> {
        let c = &self.conversations;
        let result = self.db.flush(Some(c.store()), Some(c.ledger()));
        match &result {
            Ok(s) => {
                c.set_persist_failing(false);
                if s.store_full || s.ledger_full || s.nodes_written + s.nodes_deleted > 0 {
                    tracing::debug!(
                        store_full = s.store_full,
                        ledger_full = s.ledger_full,
                        nodes_written = s.nodes_written,
                        nodes_deleted = s.nodes_deleted,
                        hints_written = s.hints_written,
                        hints_deleted = s.hints_deleted,
                        ledger_written = s.ledger_written,
                        ledger_deleted = s.ledger_deleted,
                        "conversation state flushed"
                    );
                }
            }
            Err(e) => {
                c.set_persist_failing(true);
                tracing::error!(
                    error = %e,
                    "conversation state flush failed; the next flush writes a full snapshot"
                );
            }
        }
        result
    }
}

fn log_load(db: &ConversationDb, stats: &LoadStats) {
    let store = stats.store.unwrap_or_default();
    let ledger = stats.ledger.unwrap_or_default();
    tracing::info!(
        path = %db.path().display(),
        nodes = store.nodes.restored,
        nodes_expired = store.nodes.expired,
        nodes_over_capacity = store.nodes.over_capacity,
        nodes_skipped = store.nodes.skipped,
        hints = store.hints_restored,
        hints_skipped = store.hints_skipped,
        ledger_entries = ledger.restored,
        ledger_expired = ledger.expired,
        ledger_over_capacity = ledger.over_capacity,
        ledger_skipped = ledger.skipped,
        "conversation state loaded"
    );
}

/// The running flushing thread. [`Flusher::shutdown`] (or dropping it) makes the thread
/// flush one last time and checkpoint.
#[derive(Debug)]
pub(crate) struct Flusher {
    stop: mpsc::Sender<()>,
    thread: std::thread::JoinHandle<()>,
}

impl Flusher {
    /// Stops the thread and waits for its last flush and checkpoint. Blocking.
    pub(crate) fn shutdown(self) {
        let _ = self.stop.send(());
        if self.thread.join().is_err() {
            tracing::error!("the conversation flush thread panicked");
        }
    }
}
