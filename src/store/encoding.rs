//! The thresholds past which an aggregate leaves its packed form (Redis's
//! `*-max-listpack-*` and `set-max-intset-entries` settings), read on every write that may
//! convert. They live in atomics, set from the configuration at start and on `CONFIG SET`,
//! so the write path reads them without a lock.

use std::sync::atomic::{AtomicI64, Ordering};

pub struct EncodingLimits {
    pub hash_entries: AtomicI64,
    pub hash_value: AtomicI64,
    pub list_size: AtomicI64,
    pub list_compress_depth: AtomicI64,
    pub set_intset_entries: AtomicI64,
    pub set_entries: AtomicI64,
    pub set_value: AtomicI64,
    pub zset_entries: AtomicI64,
    pub zset_value: AtomicI64,
    pub hll_sparse_bytes: AtomicI64,
    pub stream_node_bytes: AtomicI64,
    pub stream_node_entries: AtomicI64,
}

pub static LIMITS: EncodingLimits = EncodingLimits {
    hash_entries: AtomicI64::new(128),
    hash_value: AtomicI64::new(64),
    list_size: AtomicI64::new(-2),
    list_compress_depth: AtomicI64::new(0),
    set_intset_entries: AtomicI64::new(512),
    set_entries: AtomicI64::new(128),
    set_value: AtomicI64::new(64),
    zset_entries: AtomicI64::new(128),
    zset_value: AtomicI64::new(64),
    hll_sparse_bytes: AtomicI64::new(3000),
    stream_node_bytes: AtomicI64::new(4096),
    stream_node_entries: AtomicI64::new(100),
};

/// Reads one limit as a `usize` (negative settings read as 0).
pub fn limit(l: &AtomicI64) -> usize {
    l.load(Ordering::Relaxed).max(0) as usize
}

impl EncodingLimits {
    /// Sets the limit a setting names; false for a setting that is not one of these.
    pub fn apply(&self, name: &str, value: i64) -> bool {
        let slot = match name {
            "hash-max-listpack-entries" => &self.hash_entries,
            "hash-max-listpack-value" => &self.hash_value,
            "list-max-listpack-size" => &self.list_size,
            "list-compress-depth" => &self.list_compress_depth,
            "set-max-intset-entries" => &self.set_intset_entries,
            "set-max-listpack-entries" => &self.set_entries,
            "set-max-listpack-value" => &self.set_value,
            "zset-max-listpack-entries" => &self.zset_entries,
            "zset-max-listpack-value" => &self.zset_value,
            "hll-sparse-max-bytes" => &self.hll_sparse_bytes,
            "stream-node-max-bytes" => &self.stream_node_bytes,
            "stream-node-max-entries" => &self.stream_node_entries,
            _ => return false,
        };
        slot.store(value, Ordering::Relaxed);
        true
    }

    /// The settings these limits come from.
    pub const NAMES: &'static [&'static str] = &[
        "hash-max-listpack-entries",
        "hash-max-listpack-value",
        "list-max-listpack-size",
        "list-compress-depth",
        "set-max-intset-entries",
        "set-max-listpack-entries",
        "set-max-listpack-value",
        "zset-max-listpack-entries",
        "zset-max-listpack-value",
        "hll-sparse-max-bytes",
        "stream-node-max-bytes",
        "stream-node-max-entries",
    ];
}
