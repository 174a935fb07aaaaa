//! The byte books each shard's part of a collection keeps in its shard's counter (INFO
//! `used_memory`, the maxmemory check).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// The bytes one part of a collection has counted into its shard's document counter. The
/// part re-counts after every mutation ([`CollectionShard::sync_memory`]); dropping it (DOC.DROP,
/// FLUSHDB, a rename's dropped target) takes its bytes back out when the memory is freed.
#[derive(Debug, Default)]
pub struct MemoryBooks {
    counter: Option<Arc<AtomicUsize>>,
    counted: usize,
}

impl MemoryBooks {
    pub fn new(counter: Arc<AtomicUsize>) -> MemoryBooks {
        MemoryBooks {
            counter: Some(counter),
            counted: 0,
        }
    }

    /// The part now holds `bytes`: moves the counter by the difference.
    pub fn set(&mut self, bytes: usize) {
        if let Some(c) = &self.counter {
            if bytes >= self.counted {
                c.fetch_add(bytes - self.counted, Ordering::Relaxed);
            } else {
                c.fetch_sub(self.counted - bytes, Ordering::Relaxed);
            }
        }
        self.counted = bytes;
    }
}

impl Drop for MemoryBooks {
    fn drop(&mut self) {
        self.set(0);
    }
}
