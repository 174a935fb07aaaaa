//! Capped collections: a bound in BSON bytes (`SIZE`) and optionally in documents (`MAX`);
//! an insert past either removes the oldest documents, and an unsorted find returns
//! documents in insertion order.
//!
//! Insertion order is collection-wide: every document of a capped collection gets a
//! sequence number from a counter shared by every shard's copy of the metadata, taken in
//! [`CollectionShard::insert`]. Writes that add documents to a capped collection hold every
//! shard's lock (the bound and the order are collection-wide), so sequence order is commit
//! order. Each shard keeps its documents' sequences in a FIFO, so the globally oldest
//! document is the smallest of the shards' FIFO fronts: O(shards) per eviction.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The refusal every TTL-index command answers on a capped collection (MongoDB's rule).
pub const TTL_ON_CAPPED: &str = "ERR TTL indexes are not supported for capped collections";

/// The bounds of a capped collection (replicated with the metadata; the sequence counter
/// is shared by every copy).
#[derive(Debug, Clone)]
pub struct CappedSpec {
    /// Bytes, as MongoDB rounds them: at least 4096, else a multiple of 256.
    pub max_size: u64,
    /// Documents; `None` for no bound.
    pub max_docs: Option<u64>,
    next_seq: Arc<AtomicU64>,
}

impl CappedSpec {
    /// `size` as the client gave it (positive); `max` 0 or absent means no document bound.
    pub fn new(size: u64, max: Option<u64>) -> CappedSpec {
        let max_size = if size <= 4096 {
            4096
        } else {
            size.div_ceil(256).saturating_mul(256)
        };
        CappedSpec {
            max_size,
            max_docs: max.filter(|&m| m > 0),
            next_seq: Arc::new(AtomicU64::new(1)),
        }
    }

    /// The next insertion sequence number (they start at 1).
    pub fn next_seq(&self) -> u64 {
        self.next_seq.fetch_add(1, Ordering::Relaxed)
    }
}

/// One shard's documents of a capped collection in insertion order.
#[derive(Debug, Default)]
pub struct InsertionOrder {
    /// (sequence, slot), oldest first. An entry whose slot no longer holds that sequence
    /// (the document was deleted) is stale and skipped when it reaches the front.
    fifo: VecDeque<(u64, u32)>,
    /// Slot → sequence of the document in it (0: none).
    seq_of: Vec<u64>,
}

impl InsertionOrder {
    pub fn push(&mut self, slot: u32, seq: u64) {
        let i = slot as usize;
        if self.seq_of.len() <= i {
            self.seq_of.resize(i + 1, 0);
        }
        self.seq_of[i] = seq;
        self.fifo.push_back((seq, slot));
    }

    /// The document in `slot` left.
    pub fn forget(&mut self, slot: u32) {
        if let Some(s) = self.seq_of.get_mut(slot as usize) {
            *s = 0;
        }
    }

    /// The insertion sequence of the document in `slot` (0 when not capped).
    pub fn seq_of(&self, slot: u32) -> u64 {
        self.seq_of.get(slot as usize).copied().unwrap_or(0)
    }

    /// The oldest document still present: (sequence, slot). Drops stale entries.
    pub fn oldest(&mut self) -> Option<(u64, u32)> {
        while let Some(&(seq, slot)) = self.fifo.front() {
            if self.seq_of(slot) == seq {
                return Some((seq, slot));
            }
            self.fifo.pop_front();
        }
        None
    }

    pub fn memory_bytes(&self) -> usize {
        self.fifo.capacity() * std::mem::size_of::<(u64, u32)>() + self.seq_of.capacity() * 8
    }
}

/// MongoDB's `{$natural: 1}` / `{$natural: -1}` sort: `Some(reverse)` for one, `None` for
/// any other sort. `$natural` mixed with other keys, or with another direction, is refused.
pub fn natural_sort(spec: &bson::Document) -> Result<Option<bool>, String> {
    let Some(v) = spec.get("$natural") else {
        return Ok(None);
    };
    if spec.len() != 1 {
        return Err("ERR $natural sort cannot be combined with other sort keys".into());
    }
    match crate::documents::order::as_f64(v) {
        Some(1.0) => Ok(Some(false)),
        Some(-1.0) => Ok(Some(true)),
        _ => Err("ERR $natural sort must be 1 (insertion order) or -1 (newest first)".into()),
    }
}

/// Checks that one document fits a capped collection at all (a larger one could never be
/// stored, and evicting everything for it would lose data for nothing).
pub fn check_fits(spec: &CappedSpec, doc_bytes: usize) -> Result<(), String> {
    if doc_bytes as u64 > spec.max_size {
        return Err(format!(
            "ERR document is larger than the capped collection: {doc_bytes} > {}",
            spec.max_size
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_rounding_follows_mongodb() {
        assert_eq!(CappedSpec::new(1, None).max_size, 4096);
        assert_eq!(CappedSpec::new(4096, None).max_size, 4096);
        assert_eq!(CappedSpec::new(4097, None).max_size, 4352);
        assert_eq!(CappedSpec::new(i64::MAX as u64, None).max_size, 1 << 63);
        assert_eq!(CappedSpec::new(u64::MAX, None).max_size, u64::MAX);
        assert_eq!(CappedSpec::new(5000, Some(0)).max_docs, None);
    }

    #[test]
    fn fifo_skips_deleted_and_reused_slots() {
        let mut o = InsertionOrder::default();
        o.push(0, 1);
        o.push(1, 2);
        o.forget(0);
        o.push(0, 3);
        assert_eq!(o.oldest(), Some((2, 1)));
        o.forget(1);
        assert_eq!(o.oldest(), Some((3, 0)));
    }
}
