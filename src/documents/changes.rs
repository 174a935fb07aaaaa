//! A collection's change feed (`DOC.CREATE … CHANGES`, `DOC.COLLMOD … CHANGES`): the Redis
//! stream its changes go to, and the changes made but not yet appended there.
//!
//! One feed per collection for its whole life, shared by every shard's part (an `Arc` in
//! the collection's `CollectionMeta`), so all its changes queue in one
//! FIFO whatever shard they happen in. A change is pushed under the lock of the shard that
//! makes it, so the FIFO's order agrees with every shard's order (per document, the order
//! of its changes). The store appends the FIFO to the stream after the write releases its
//! shard locks (`store::collections::changes`), under [`ChangeFeed::drain`]'s append lock,
//! so two drainers never interleave. This module is plain data: it knows neither shards nor
//! streams.

use bson::{Bson, RawDocumentBuf};
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// Where a collection's changes go: a stream key of the collection's database, trimmed
/// like `XADD key MAXLEN [~] n` after each append.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangesSpec {
    pub stream: Vec<u8>,
    /// (n, approximate `~`).
    pub maxlen: Option<(u64, bool)>,
}

/// What happened, the stream entry's `op` field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Insert,
    Update,
    Replace,
    Delete,
    Expire,
    /// The collection was dropped (`DOC.DROP`, or `DOC.RENAME … DROPTARGET` of the target).
    Drop,
    /// The collection was renamed; later entries carry the new namespace.
    Rename,
}

impl Op {
    pub fn name(self) -> &'static str {
        match self {
            Op::Insert => "insert",
            Op::Update => "update",
            Op::Replace => "replace",
            Op::Delete => "delete",
            Op::Expire => "expire",
            Op::Drop => "drop",
            Op::Rename => "rename",
        }
    }
}

/// What an entry carries besides its `op` and `ns`.
#[derive(Debug, Clone)]
pub enum Payload {
    /// The document as it is after the change (insert, update, replace).
    Doc(RawDocumentBuf),
    /// The `_id` of a removed document (delete, expire).
    Id(Bson),
    /// The new collection name (rename).
    To(String),
    None,
}

/// One change made and not yet appended.
#[derive(Debug, Clone)]
pub struct Pending {
    pub db: usize,
    /// The collection's name when the change was made.
    pub collection: String,
    /// The stream it goes to: the feed's target when the change was made.
    pub target: Arc<ChangesSpec>,
    pub op: Op,
    pub payload: Payload,
}

#[derive(Debug, Default)]
pub struct ChangeFeed {
    /// Whether `target` is set: a write to a collection without a feed pays one load.
    on: AtomicBool,
    target: Mutex<Option<Arc<ChangesSpec>>>,
    pending: Mutex<VecDeque<Pending>>,
    /// Held while appending, so the FIFO reaches the stream in order.
    append: Mutex<()>,
    /// Entries that could not be appended (the key holds another type, or the stream has no
    /// ID left), shown by `DOC.STATS`.
    pub lost: AtomicU64,
}

impl ChangeFeed {
    /// Sets or clears where changes go. The caller holds every shard's lock, so each
    /// change is queued either before (old target) or after (new target).
    pub fn set_target(&self, spec: Option<ChangesSpec>) {
        let mut t = self.target.lock();
        self.on.store(spec.is_some(), Ordering::Release);
        *t = spec.map(Arc::new);
    }

    pub fn target(&self) -> Option<Arc<ChangesSpec>> {
        if !self.on.load(Ordering::Acquire) {
            return None;
        }
        self.target.lock().clone()
    }

    /// Queues a change if the feed is on; `payload` is built only then. Whether it queued.
    pub fn push(
        &self,
        db: usize,
        collection: &str,
        op: Op,
        payload: impl FnOnce() -> Payload,
    ) -> bool {
        let Some(target) = self.target() else {
            return false;
        };
        let p = Pending {
            db,
            collection: collection.to_string(),
            target,
            op,
            payload: payload(),
        };
        self.pending.lock().push_back(p);
        true
    }

    /// Takes every queued change, in order, and hands them to `append` under the append
    /// lock: a drainer that finds the queue empty waits for one in progress, so when it
    /// returns every change queued before the call is in the stream.
    pub fn drain(&self, append: impl FnOnce(Vec<Pending>)) {
        let _one = self.append.lock();
        let batch: Vec<Pending> = self.pending.lock().drain(..).collect();
        if !batch.is_empty() {
            append(batch);
        }
    }
}
