//! One shard's part of a collection: a slab of raw BSON documents, the `_id` map, and the
//! collection's metadata (replicated in every shard's part, changed only while holding all
//! shards, so there is no separate catalog lock).
//!
//! Every document mutation goes through [`CollectionShard::insert`],
//! [`CollectionShard::replace`] and [`CollectionShard::remove`]; every read through
//! [`CollectionShard::scan`].

use crate::documents::capped::{CappedSpec, InsertionOrder};
use crate::documents::codec::{Fixed, SetValue};
use crate::documents::index::{IndexSpec, OrderedIndex, ScanStats};
use crate::documents::memory::MemoryBooks;
use crate::documents::planner::{self, Plan};
use crate::documents::query::{Node, Pred};
use crate::documents::stored::StoredDoc;
use crate::documents::unique::{Claimed, UniqueKeys};
use crate::documents::{codec, keys, rawbson, ttl, ttl::TtlShard};
use crate::util::mem::alloc_size;
use bson::{Bson, Document, RawBsonRef, RawDocument, RawDocumentBuf};
use hashbrown::{DefaultHashBuilder, HashTable};
use std::hash::BuildHasher;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;

/// A per-shard index structure. Secondary indexes and TTL wheels are added here.
#[derive(Debug)]
pub enum IndexShard {
    /// A secondary index (ordered, unique or TTL-serving): see `documents::index`.
    Ordered(OrderedIndex),
}

impl IndexShard {
    /// A document was stored in `slot`; `owner` is its `_id` KeyString.
    fn on_insert(&mut self, slot: u32, doc: &RawDocument, owner: &[u8]) {
        match self {
            IndexShard::Ordered(ix) => {
                ix.insert_raw(slot, doc);
                // Claimed by the write before it stored the document: cannot conflict.
                let _ = ix.hold_unique(doc, owner);
            }
        }
    }
    fn on_remove(&mut self, slot: u32, doc: &RawDocument, owner: &[u8]) {
        match self {
            IndexShard::Ordered(ix) => {
                ix.remove_raw(slot, doc);
                ix.release_unique(doc, owner);
            }
        }
    }
    fn on_replace(&mut self, slot: u32, old: &RawDocument, new: &RawDocument, owner: &[u8]) {
        match self {
            IndexShard::Ordered(ix) => {
                ix.remove_raw(slot, old);
                ix.insert_raw(slot, new);
                ix.replace_unique(old, new, owner);
            }
        }
    }

    /// Whether the top-level fields the index reads hold the same bytes in both documents
    /// (then its entries for the one are its entries for the other).
    fn same_fields(&self, old: &RawDocument, new: &RawDocument) -> bool {
        match self {
            IndexShard::Ordered(ix) => ix.spec.fields.iter().all(|f| {
                let top = f.path[0].as_str();
                match (old.get(top), new.get(top)) {
                    (Ok(None), Ok(None)) => true,
                    // Bitwise for doubles: 0.0 and -0.0, or two NaNs, are not "the same bytes".
                    (Ok(Some(RawBsonRef::Double(a))), Ok(Some(RawBsonRef::Double(b)))) => {
                        a.to_bits() == b.to_bits()
                    }
                    (Ok(Some(a)), Ok(Some(b))) => a == b,
                    _ => false,
                }
            }),
        }
    }

    /// Estimated bytes of this part of the index.
    pub fn bytes(&self) -> usize {
        match self {
            IndexShard::Ordered(ix) => ix.bytes(),
        }
    }

    pub fn as_ordered(&self) -> Option<&OrderedIndex> {
        match self {
            IndexShard::Ordered(ix) => Some(ix),
        }
    }

    pub fn as_ordered_mut(&mut self) -> Option<&mut OrderedIndex> {
        match self {
            IndexShard::Ordered(ix) => Some(ix),
        }
    }
}

/// Collection metadata, identical in every shard's part.
#[derive(Debug, Default, Clone)]
pub struct CollectionMeta {
    /// Set for a capped collection (`DOC.CREATE ... CAPPED`; see `documents::capped`).
    pub capped: Option<CappedSpec>,
    /// The collection's change feed (one for its life, shared by every part; see
    /// `documents::changes`).
    pub changes: std::sync::Arc<super::changes::ChangeFeed>,
}

/// What this shard's TTL monitor did to the collection (`DOC.STATS`, `INFO documents`).
#[derive(Debug, Default, Clone, Copy)]
pub struct TtlStats {
    pub passes: u64,
    pub deleted_documents: u64,
}

impl TtlStats {
    /// The collection's figures from its shards' parts: every shard's monitor passes over
    /// its part, so a pass of the collection is one every shard has made (the least count);
    /// deletions add up.
    pub fn combine(parts: impl IntoIterator<Item = TtlStats>) -> TtlStats {
        let mut it = parts.into_iter();
        let Some(first) = it.next() else {
            return TtlStats::default();
        };
        it.fold(first, |a, p| TtlStats {
            passes: a.passes.min(p.passes),
            deleted_documents: a.deleted_documents + p.deleted_documents,
        })
    }
}

#[derive(Debug, Default)]
pub struct CollectionShard {
    /// The stored documents' BSON, each in an allocation of its own length behind a thin
    /// pointer (`StoredDoc`: 8 bytes a slot, where a `RawDocumentBuf`'s vector takes 24).
    slots: Vec<Option<StoredDoc>>,
    free: Vec<u32>,
    /// The `_id` map: KeyString of `_id` → slot, as a table of (slot, hash) pairs. The key
    /// is not held a second time: a probe whose 32-bit hash matches compares with the
    /// stored document's own `_id` (the document a lookup by `_id` reads anyway), so the map
    /// costs 8 bytes and a control byte per document whatever the `_id`.
    ids: HashTable<IdSlot>,
    /// Hashes `_id` KeyStrings for `ids` (seeded per part).
    hasher: DefaultHashBuilder,
    pub indexes: Vec<IndexShard>,
    /// This shard's wheel of each TTL index, by index name.
    pub ttl: Vec<(String, TtlShard)>,
    pub ttl_stats: TtlStats,
    pub meta: CollectionMeta,
    bytes: usize,
    /// Capped collections: this shard's documents in insertion order.
    pub order: InsertionOrder,
    /// Allocator-rounded bytes of the stored documents.
    doc_heap: usize,
    /// What this part counts into its shard's document byte counter.
    mem: MemoryBooks,
    /// Changes made to this part's documents by writes (inserts, updates, touches,
    /// deletes), expiries not counted: MIGRATE compares it before and after a transfer to
    /// learn that a collection still holds what it sent, apart from documents that expired
    /// (which are due on the target too).
    writes: u64,
}

/// Most fields one update in place writes.
const MAX_FIELDS: usize = 8;

/// What [`CollectionShard::set_in_place`] did.
#[derive(Debug, PartialEq, Eq)]
pub enum InPlace {
    Changed,
    /// Every field already held its value: nothing to write (not "modified").
    Unchanged,
    /// The general update must run (nothing was changed).
    NotApplicable,
}

/// A filter that is not `{_id: v}` alone (see [`CollectionShard::lookup_id`]).
#[derive(Debug)]
pub struct NotById;

/// Why an index build stopped in one part.
#[derive(Debug)]
pub enum BuildError {
    /// A document cannot be keyed (parallel arrays, too many keys).
    Keys(String),
    /// This document's unique key is held by another document.
    Duplicate(RawDocumentBuf),
    /// The index (or its collection) was dropped meanwhile.
    Dropped,
}

/// Claims made for one document before a write, kept until the write is done so a failure
/// gives them back (see [`CollectionShard::claim_unique`]).
#[derive(Debug, Default)]
pub struct UniqueClaims {
    owner: Vec<u8>,
    claims: Vec<(Arc<UniqueKeys>, Claimed)>,
}

impl UniqueClaims {
    /// Did the write claim no key (no unique index)?
    pub fn is_empty(&self) -> bool {
        self.claims.is_empty()
    }

    /// Gives back every key this write claimed (the write failed after claiming).
    pub fn release(self) {
        for (u, keys) in &self.claims {
            u.release(keys, &self.owner);
        }
    }
}

/// One entry of the `_id` map: the document's slot and the low 32 bits of its `_id`
/// KeyString's hash (enough to rehash the table without reading the documents).
#[derive(Debug, Clone, Copy)]
struct IdSlot {
    slot: u32,
    hash: u32,
}

/// The table hash of a stored 32-bit hash: its bits fill both the bucket index (low bits)
/// and the control byte (top bits) the table reads.
fn table_hash(h: u32) -> u64 {
    let h = h as u64;
    h | (h << 32)
}

/// A document as stored: its buffer cut to its length. Why: documents arrive from an
/// encoder whose buffer grew by doubling (a 54-byte session document in a 64-byte
/// buffer), and the slack would be held for the document's whole life.
fn stored(doc: RawDocumentBuf) -> StoredDoc {
    StoredDoc::new(doc)
}

/// A stored document (its header and terminator were checked when it was stored).
fn doc_of(s: &StoredDoc) -> Option<&RawDocument> {
    s.doc()
}

/// A stored document handed back to a caller (removed or replaced), without a copy.
fn owned(s: StoredDoc) -> RawDocumentBuf {
    s.into_doc()
}

/// Whether the document in `cell` has the `_id` whose KeyString is `key`.
fn has_id(cell: Option<&Option<StoredDoc>>, key: &[u8]) -> bool {
    let Some(Some(doc)) = cell else {
        return false;
    };
    let Some(doc) = doc_of(doc) else {
        return false;
    };
    if let Some(m) = rawbson::id_matches_key(doc.as_bytes(), key) {
        return m;
    }
    let Ok(Some(v)) = doc.get("_id") else {
        return false;
    };
    keys::raw_matches(v, key)
}

/// The KeyString of a raw document's `_id` (every stored document has one).
fn id_key(doc: &RawDocument) -> Vec<u8> {
    match doc.get("_id") {
        Ok(Some(v)) => match Bson::try_from(v) {
            Ok(b) => keys::encode(&b),
            Err(_) => Vec::new(),
        },
        _ => Vec::new(),
    }
}

impl CollectionShard {
    pub fn new(meta: CollectionMeta) -> CollectionShard {
        CollectionShard {
            meta,
            ..CollectionShard::default()
        }
    }

    /// Counts this part's bytes into `counter` (its shard's document counter) from now on.
    pub fn counted_in(mut self, counter: Arc<AtomicUsize>) -> CollectionShard {
        self.mem = MemoryBooks::new(counter);
        self.sync_memory();
        self
    }

    pub fn is_capped(&self) -> bool {
        self.meta.capped.is_some()
    }

    /// Estimated bytes of the `_id` map (the `_id_` index): its table and its KeyStrings.
    pub fn id_index_bytes(&self) -> usize {
        let slot = std::mem::size_of::<IdSlot>() + 1;
        let buckets = match self.ids.capacity() {
            0 => 0,
            c => (c * 8 / 7).next_power_of_two(),
        };
        buckets * slot
    }

    /// Estimated bytes of this part: documents, slab, `_id` map, indexes, TTL wheels,
    /// insertion order.
    pub fn memory_bytes(&self) -> usize {
        let indexes: usize = self.id_index_bytes()
            + self.indexes.iter().map(IndexShard::bytes).sum::<usize>()
            + self
                .ttl
                .iter()
                .map(|(_, t)| t.memory_bytes())
                .sum::<usize>();
        std::mem::size_of::<CollectionShard>()
            + self.doc_heap
            + self.slots.capacity() * std::mem::size_of::<Option<StoredDoc>>()
            + self.free.capacity() * 4
            + indexes
            + self.order.memory_bytes()
    }

    /// Brings the shard's byte counter up to date with this part (after every mutation;
    /// index builds and drops call it too).
    pub fn sync_memory(&mut self) {
        let now = self.memory_bytes();
        self.mem.set(now);
    }

    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// BSON bytes held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn contains_id(&self, key: &[u8]) -> bool {
        self.slot_of(key).is_some()
    }

    pub fn get(&self, slot: u32) -> Option<&RawDocument> {
        self.slots
            .get(slot as usize)
            .and_then(Option::as_ref)
            .and_then(doc_of)
    }

    /// Stores a new document whose `_id` KeyString is `key`; the caller has checked that
    /// `key` is not present.
    pub fn insert(&mut self, key: Vec<u8>, doc: RawDocumentBuf) -> u32 {
        self.writes += 1;
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                self.slots.push(None);
                (self.slots.len() - 1) as u32
            }
        };
        for ix in &mut self.indexes {
            ix.on_insert(slot, &doc, &key);
        }
        for (_, t) in &mut self.ttl {
            t.on_insert(slot, &doc);
        }
        self.bytes += doc.as_bytes().len();
        self.doc_heap += alloc_size(doc.as_bytes().len());
        let hash = self.hasher.hash_one(key.as_slice()) as u32;
        if let Some(c) = &self.meta.capped {
            self.order.push(slot, c.next_seq());
        }
        self.slots[slot as usize] = Some(stored(doc));
        self.ids
            .insert_unique(table_hash(hash), IdSlot { slot, hash }, |e| {
                table_hash(e.hash)
            });
        self.sync_memory();
        slot
    }

    /// Replaces a document in place (an update; `_id` is unchanged). Returns the old one.
    pub fn replace(&mut self, slot: u32, doc: RawDocumentBuf) -> Option<RawDocumentBuf> {
        let cell = self.slots.get_mut(slot as usize)?;
        let old = owned(cell.take()?);
        self.writes += 1;
        self.bytes -= old.as_bytes().len();
        self.bytes += doc.as_bytes().len();
        self.doc_heap = self
            .doc_heap
            .saturating_sub(alloc_size(old.as_bytes().len()));
        self.doc_heap += alloc_size(doc.as_bytes().len());
        *cell = Some(stored(doc));
        if let Some(new) = self
            .slots
            .get(slot as usize)
            .and_then(Option::as_ref)
            .and_then(doc_of)
        {
            let owner = id_key(new);
            for ix in &mut self.indexes {
                // An update that leaves an index's fields as they were (a touch, for every
                // index but the TTL one) leaves its entries as they were.
                if !ix.same_fields(&old, new) {
                    ix.on_replace(slot, &old, new, &owner);
                }
            }
            // A TTL wheel moves its entry in place (a touch is O(1)).
            for (_, t) in &mut self.ttl {
                t.on_insert(slot, new);
            }
        }
        self.sync_memory();
        Some(old)
    }

    /// An update's fast path: writes each value of `sets` over the top-level field of the
    /// same name in the document in `slot`, in its bytes, and moves its index entries and
    /// TTL wheel entries. Taken only when every field exists with a value of the same BSON
    /// type and every index reading one of them is a single-field, non-unique index on it
    /// (a scalar's key is the value's own, and no uniqueness claim is needed); otherwise
    /// returns [`InPlace::NotApplicable`] having changed nothing, and the caller applies the
    /// general update. Fixed-width values are written over the old bytes; a string of
    /// another length rebuilds the document's bytes around it (one copy, no decode), which
    /// must stay within `max_size` and, in a capped collection, keep the document's size —
    /// else the general path runs and reports the error. The result is the same document
    /// the general `$set` makes.
    pub fn set_in_place(
        &mut self,
        slot: u32,
        sets: &[(&str, SetValue<'_>)],
        max_size: usize,
    ) -> InPlace {
        let done = self.write_in_place(slot, sets, max_size);
        if done == InPlace::Changed {
            self.writes += 1;
            for (_, t) in &mut self.ttl {
                for (f, v) in sets {
                    if let (true, SetValue::Fixed(Fixed::Date(ms))) = (t.is_on(f), v) {
                        t.set_date(slot, Some(*ms));
                    }
                }
            }
        }
        done
    }

    /// `DOC.TOUCH` of the document in `slot` in place: every TTL index's field set to the
    /// date `ms`, as [`CollectionShard::set_in_place`] of those fields would (`NotApplicable`
    /// also when there is no TTL index or one is on a dotted path: the general `$set` then
    /// runs). Why: the list of field names a touch built for that call was two allocations
    /// of every touch.
    pub fn touch_in_place(&mut self, slot: u32, ms: i64) -> InPlace {
        let n = self.ttl.len();
        if n == 0 || n > MAX_FIELDS || self.ttl.iter().any(|(_, t)| t.top_field().is_none()) {
            return InPlace::NotApplicable;
        }
        // The names are borrowed from the wheels while this part's bytes and indexes change:
        // the wheels are set aside for that call (`write_in_place` does not read them).
        let ttl = std::mem::take(&mut self.ttl);
        let date = SetValue::Fixed(Fixed::Date(ms));
        let mut sets = [("", date); MAX_FIELDS];
        for (s, (_, t)) in sets.iter_mut().zip(&ttl) {
            s.0 = t.top_field().unwrap_or("");
        }
        let done = self.write_in_place(slot, &sets[..n], usize::MAX);
        self.ttl = ttl;
        if done == InPlace::Changed {
            self.writes += 1;
            for (_, t) in &mut self.ttl {
                t.set_date(slot, Some(ms));
            }
        }
        done
    }

    /// Called before the `_id` lookup of an in-place update of `sets`: reads where the new
    /// keys go in the single-field indexes the update moves ([`OrderedIndex::warm_key`]), so
    /// that their cache misses overlap the lookup's instead of following them.
    pub fn warm_index_keys(&self, sets: &[(&str, SetValue<'_>)]) {
        for o in self.indexes.iter().filter_map(IndexShard::as_ordered) {
            let [field] = o.spec.fields.as_slice() else {
                continue;
            };
            let [path] = field.path.as_slice() else {
                continue;
            };
            for (_, v) in sets.iter().filter(|(f, _)| f == path) {
                o.warm_key(|key| v.key_into(key));
            }
        }
    }

    /// [`CollectionShard::set_in_place`] but for the TTL wheels, which the caller moves.
    fn write_in_place(
        &mut self,
        slot: u32,
        sets: &[(&str, SetValue<'_>)],
        max_size: usize,
    ) -> InPlace {
        let Some(doc) = self.get(slot) else {
            return InPlace::NotApplicable;
        };
        if sets.is_empty() || sets.len() > MAX_FIELDS {
            return InPlace::NotApplicable;
        }
        let bytes = doc.as_bytes();
        // (offset of the old value, its width) per field.
        let mut found = [(0usize, 0usize); MAX_FIELDS];
        for ((f, v), at) in sets.iter().zip(found.iter_mut()) {
            let Some((kind, o)) = codec::top_level_value(bytes, f) else {
                return InPlace::NotApplicable;
            };
            if kind != v.element_type() || o < 4 {
                return InPlace::NotApplicable;
            }
            let Some(w) = v.old_width(bytes, o) else {
                return InPlace::NotApplicable;
            };
            *at = (o, w);
        }
        let found = &found[..sets.len()];
        // The same field twice (the parser refuses it; never splice one value twice).
        if found
            .iter()
            .enumerate()
            .any(|(i, (o, _))| found[..i].iter().any(|(p, _)| p == o))
        {
            return InPlace::NotApplicable;
        }
        let unchanged = sets
            .iter()
            .zip(found)
            .all(|((_, v), &(o, w))| v.same_bytes(&bytes[o..o + w]));
        if unchanged {
            return InPlace::Unchanged;
        }
        // An index reading one of the fields: only a single-field, non-unique index on it
        // is moved here (a dotted path below a scalar resolves to nothing before and after).
        let reads = |ix: &IndexShard| -> Option<usize> {
            let o = ix.as_ordered()?;
            sets.iter().position(|(f, _)| {
                o.spec
                    .fields
                    .iter()
                    .any(|k| k.path.first().is_some_and(|p| p == f))
            })
        };
        if self.indexes.iter().any(|ix| {
            reads(ix).is_some()
                && ix.as_ordered().is_some_and(|o| {
                    o.spec.fields.len() != 1
                        || o.spec.fields[0].path.len() != 1
                        || o.unique.is_some()
                })
        }) {
            return InPlace::NotApplicable;
        }
        let old_len = bytes.len();
        let new_len = sets
            .iter()
            .zip(found)
            .fold(old_len, |n, ((_, v), &(_, w))| n - w + v.width());
        if new_len != old_len && (self.is_capped() || new_len > max_size) {
            return InPlace::NotApplicable;
        }
        // The old values' KeyStrings of the fields an index reads, to move its entries (read
        // before the bytes change; an index that is not built yet has no entries to move):
        // all in one buffer, each move as (index, field, end of its old key there), on the stack
        // for the usual short keys. Why: a `Bson` and a key vector per value were four
        // allocations of an upsert.
        const MAX_MOVES: usize = 8;
        let mut keybuf = smallvec::SmallVec::<[u8; 64]>::new();
        let mut moves = [(0usize, 0usize, 0usize); MAX_MOVES];
        let mut nmoves = 0;
        for (n, ix) in self.indexes.iter().enumerate() {
            let (Some(i), Some(o)) = (reads(ix), ix.as_ordered()) else {
                continue;
            };
            if o.is_dormant() {
                continue;
            }
            if nmoves == MAX_MOVES {
                return InPlace::NotApplicable;
            }
            let (off, w) = found[i];
            match sets[i].1 {
                SetValue::Fixed(f) => {
                    let mut b = [0u8; 8];
                    b[..w].copy_from_slice(&bytes[off..off + w]);
                    keys::encode_into(&f.with_bytes(&b).to_bson(), &mut keybuf);
                }
                SetValue::Str(_) => {
                    let s = &bytes[off + 4..off + w - 1];
                    // (ASCII, the usual value, is checked a word at a time.)
                    if !s.is_ascii() && std::str::from_utf8(s).is_err() {
                        return InPlace::NotApplicable;
                    }
                    keys::encode_str_into(s, &mut keybuf);
                }
            }
            moves[nmoves] = (n, i, keybuf.len());
            nmoves += 1;
        }
        // Every value as wide as the one it replaces (not just the same total: one string
        // may grow by what another shrinks).
        let same_widths = sets
            .iter()
            .zip(found)
            .all(|((_, v), &(_, w))| v.width() == w);
        if same_widths {
            // Same length, header and terminator: still the stored document, rewritten in
            // place (values sit after the 4-byte header; a string of the same length keeps
            // its length prefix).
            let Some(stored) = self.slots.get_mut(slot as usize).and_then(Option::as_mut) else {
                return InPlace::NotApplicable;
            };
            let bytes = stored.value_bytes_mut();
            for ((_, v), &(at, w)) in sets.iter().zip(found) {
                v.write_over(&mut bytes[at - 4..at - 4 + w]);
            }
        } else {
            // The fields in document order, each old value replaced by the new one.
            let mut order: Vec<usize> = (0..sets.len()).collect();
            order.sort_unstable_by_key(|&i| found[i].0);
            let mut out = Vec::with_capacity(new_len);
            out.extend_from_slice(&(new_len as i32).to_le_bytes());
            let mut pos = 4;
            for i in order {
                let (o, w) = found[i];
                out.extend_from_slice(&bytes[pos..o]);
                sets[i].1.write(&mut out);
                pos = o + w;
            }
            out.extend_from_slice(&bytes[pos..]);
            let Ok(new) = RawDocumentBuf::from_bytes(out) else {
                return InPlace::NotApplicable;
            };
            let Some(cell) = self.slots.get_mut(slot as usize) else {
                return InPlace::NotApplicable;
            };
            let _old = cell.replace(stored(new));
            self.bytes = self.bytes - old_len + new_len;
            self.doc_heap = self.doc_heap.saturating_sub(alloc_size(old_len)) + alloc_size(new_len);
            self.sync_memory();
        }
        // Each new key goes after every old one, for its move only.
        let olds = keybuf.len();
        let mut start = 0;
        for &(n, i, end) in &moves[..nmoves] {
            sets[i].1.key_into(&mut keybuf);
            let (old, new) = keybuf.split_at(olds);
            // A field set to what it held (another field of the same update changed) keeps
            // its entry where it is: a B-tree remove and insert of the same key for nothing.
            if old[start..end] != *new {
                if let Some(o) = self.indexes[n].as_ordered_mut() {
                    o.move_key(slot, &old[start..end], new);
                }
            }
            keybuf.truncate(olds);
            start = end;
        }
        InPlace::Changed
    }

    /// Removes a document (a delete, or a trim of a capped collection) and returns it.
    pub fn remove(&mut self, slot: u32) -> Option<RawDocumentBuf> {
        let old = self.take_out(slot)?;
        self.writes += 1;
        Some(old)
    }

    /// Changes made to this part's documents by writes, expiries not counted.
    pub fn writes(&self) -> u64 {
        self.writes
    }

    /// Takes a document out of its slot, its indexes and wheels: the removal shared by a
    /// delete and an expiry.
    fn take_out(&mut self, slot: u32) -> Option<RawDocumentBuf> {
        let old = owned(self.slots.get_mut(slot as usize)?.take()?);
        self.bytes -= old.as_bytes().len();
        self.doc_heap = self
            .doc_heap
            .saturating_sub(alloc_size(old.as_bytes().len()));
        let key = id_key(&old);
        // The document is out of its cell: the entry is the one naming its slot.
        let hash = self.hasher.hash_one(key.as_slice()) as u32;
        if let Ok(e) = self
            .ids
            .find_entry(table_hash(hash), |e| e.hash == hash && e.slot == slot)
        {
            e.remove();
        }
        for ix in &mut self.indexes {
            ix.on_remove(slot, &old, &key);
        }
        for (_, t) in &mut self.ttl {
            t.on_remove(slot);
        }
        self.order.forget(slot);
        self.free.push(slot);
        self.sync_memory();
        Some(old)
    }

    /// Removes a document because a TTL index says it is due: the one delete path of expiry
    /// (the monitor, and writes that meet an expired `_id`), so the journal and `doc.expired`
    /// events see every expiry the same way. Returns the document's `_id`.
    pub fn expire(&mut self, slot: u32) -> Option<Bson> {
        let old = self.take_out(slot)?;
        self.ttl_stats.deleted_documents += 1;
        let id = old
            .get("_id")
            .ok()
            .flatten()
            .and_then(|v| Bson::try_from(v).ok());
        Some(id.unwrap_or(Bson::Null))
    }

    /// One bounded batch of the TTL monitor: removes up to `max` documents due at `now_ms`
    /// under any TTL index and appends their `_id`s to `expired`. Returns true while more
    /// are due (the caller releases the shard's lock before the next batch).
    pub fn expire_due(&mut self, now_ms: i64, max: usize, expired: &mut Vec<Bson>) -> bool {
        let mut slots = Vec::new();
        let mut more = false;
        for (_, t) in &mut self.ttl {
            if slots.len() >= max {
                more = true;
                break;
            }
            more |= t.drain_due(now_ms, max - slots.len(), &mut slots);
        }
        for slot in slots {
            // A document due under two TTL indexes comes out of both wheels; the second
            // `expire` finds the slot empty.
            if let Some(id) = self.expire(slot) {
                expired.push(id);
            }
        }
        more
    }

    /// Under strict reads, removes (as an expiry) the document with `_id` KeyString `key` if
    /// it is past its deadline, so an insert or upsert of the same `_id` finds it gone, as a
    /// read would. Returns its `_id` when it did.
    pub fn expire_if_due(&mut self, key: &[u8]) -> Option<Bson> {
        let slot = self.slot_of(key)?;
        if self.visible(slot, self.visibility_clock()) {
            return None;
        }
        self.expire(slot)
    }

    /// Every stored document with its slot (index builds).
    pub fn documents(&self) -> impl Iterator<Item = (u32, &RawDocument)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, c)| c.as_ref().and_then(doc_of).map(|d| (i as u32, d)))
    }

    /// Creates the TTL index `name` on `field` in this shard's part, indexing every document
    /// already stored, or changes its `expireAfterSeconds` (O(1): the wheel is keyed by the
    /// stored date, not by the deadline).
    pub fn set_ttl_index(&mut self, name: &str, field: &str, expire_after_secs: i64, now_ms: i64) {
        if let Some((_, t)) = self.ttl.iter_mut().find(|(n, _)| n == name) {
            t.expire_after_secs = expire_after_secs;
            return;
        }
        let mut t = TtlShard::new(field, expire_after_secs, now_ms);
        for (slot, doc) in self.documents() {
            t.on_insert(slot, doc);
        }
        self.ttl.push((name.to_string(), t));
    }

    /// The fields of this collection's TTL indexes (what `DOC.TOUCH` refreshes).
    pub fn ttl_fields(&self) -> Vec<String> {
        self.ttl.iter().map(|(_, t)| t.field()).collect()
    }

    /// Drops the TTL index `name`: expiry through it stops. Returns whether it existed.
    pub fn drop_ttl_index(&mut self, name: &str) -> bool {
        let before = self.ttl.len();
        self.ttl.retain(|(n, _)| n != name);
        self.ttl.len() != before
    }

    /// The slot of the document whose `_id` KeyString is `key`.
    pub fn slot_of(&self, key: &[u8]) -> Option<u32> {
        self.slot_of_seeing(key, |_| {})
    }

    /// [`CollectionShard::slot_of`], calling `seen` with each candidate slot (whose hash
    /// matches) before its document is read.
    fn slot_of_seeing(&self, key: &[u8], mut seen: impl FnMut(u32)) -> Option<u32> {
        let hash = self.hasher.hash_one(key) as u32;
        let slots = &self.slots;
        self.ids
            .find(table_hash(hash), |e| {
                if e.hash != hash {
                    return false;
                }
                seen(e.slot);
                has_id(slots.get(e.slot as usize), key)
            })
            .map(|e| e.slot)
    }

    /// Whether any TTL index says the document in `slot` is due at `now_ms` (a document goes
    /// when any of them says so).
    pub fn is_expired(&self, slot: u32, now_ms: i64) -> bool {
        self.ttl.iter().any(|(_, t)| t.is_expired(slot, now_ms))
    }

    /// [`CollectionShard::is_expired`] read from the document's stored dates instead of the
    /// TTL wheels' tables (the same dates, kept in step by every write).
    fn doc_is_expired(&self, raw: &RawDocument, now_ms: i64) -> bool {
        self.ttl.iter().any(|(_, t)| t.doc_is_expired(raw, now_ms))
    }

    /// The clock strict reads compare with, or `None` when expired documents stay visible
    /// until the monitor removes them (no TTL index, or `ttl-strict-reads no`).
    pub fn visibility_clock(&self) -> Option<i64> {
        (!self.ttl.is_empty() && ttl::strict_reads()).then(crate::util::clock::now_ms)
    }

    /// Whether the document in `slot` is visible to reads and writes at `clock`.
    pub fn visible(&self, slot: u32, clock: Option<i64>) -> bool {
        clock.is_none_or(|now| !self.is_expired(slot, now))
    }

    /// The one read path: calls `visit(slot, raw)` for each visible document matching
    /// `filter` until it returns false. The planner picks how: an `_id` equality reads the
    /// `_id` map, an indexable filter scans an index, anything else scans the slots in slot
    /// order. (Strict TTL reads plug in here.)
    ///
    /// Matching decodes only what the filter's paths reach in the raw BSON, so a scan costs
    /// in proportion to what the filter looks at, not to the document's size.
    pub fn scan(&self, filter: &Node, visit: &mut dyn FnMut(u32, &RawDocument) -> bool) {
        self.scan_planned(filter, &[], None, &mut ScanStats::default(), visit);
    }

    /// [`CollectionShard::scan`] with the requested sort (which an index may provide), the
    /// number of matches wanted (`keep`: honoured when there is no sort or the index provides
    /// it) and the counters `DOC.EXPLAIN` reports. Returns the plan's name, the index used,
    /// and whether documents came in sort order.
    pub fn scan_planned(
        &self,
        filter: &Node,
        sort: &[(Vec<String>, bool)],
        keep: Option<usize>,
        stats: &mut ScanStats,
        visit: &mut dyn FnMut(u32, &RawDocument) -> bool,
    ) -> (&'static str, Option<String>, bool) {
        let ready: Vec<&OrderedIndex> = self
            .indexes
            .iter()
            .filter_map(IndexShard::as_ordered)
            .filter(|ix| ix.ready && !ix.is_dormant())
            .collect();
        // Strict TTL reads: a document past its deadline is invisible to every read and
        // write at once, before the monitor removes it.
        let clock = self.visibility_clock();
        let (plan, sorted) = planner::plan(filter, &ready, sort);
        let name = plan.name();
        let keep = keep.filter(|_| sort.is_empty() || sorted);
        let mut kept = 0usize;
        // Decoded only when some document needs matching.
        let mut fields: Option<Vec<Vec<String>>> = None;
        // A filter that is only `{_id: v}`, for a `v` whose KeyString equality is exactly
        // query equality, is matched by the `_id` map hit itself; likewise `{f: v}` by a hit
        // in a single-field index on `f` that never held an array.
        let id_only = matches!(plan, Plan::IdHack(_)) && id_hit_is_match(filter);
        let exact_field = match &plan {
            Plan::IxScan { index, .. } => index_hit_is_match(filter, ready[*index]),
            _ => None,
        };
        let mut fetch = |slot: u32, stats: &mut ScanStats| -> bool {
            let Some(raw) = self.get(slot) else {
                return true;
            };
            if !self.visible(slot, clock) {
                return true;
            }
            stats.docs_examined += 1;
            let exact = if id_only {
                stored_exact(raw, "_id")
            } else {
                exact_field.is_some_and(|f| stored_exact(raw, f))
            };
            let matched = exact
                || matches(
                    filter,
                    fields.get_or_insert_with(|| filter.field_paths()),
                    raw,
                );
            if !matched {
                return true;
            }
            stats.n_returned += 1;
            kept += 1;
            visit(slot, raw) && keep.is_none_or(|k| kept < k)
        };
        match plan {
            Plan::IdHack(id) => {
                if let Some(slot) = self.slot_of(&keys::encode(id)) {
                    stats.keys_examined += 1;
                    fetch(slot, stats);
                }
                (name, None, false)
            }
            Plan::IxScan { index, bounds } => {
                let ix = ready[index];
                let mut st = ScanStats::default();
                ix.scan(&bounds, &mut st, &mut |slot| fetch(slot, stats));
                stats.keys_examined += st.keys_examined;
                (name, Some(ix.spec.name.clone()), sorted)
            }
            Plan::CollScan => {
                for slot in 0..self.slots.len() as u32 {
                    if self.slots[slot as usize].is_some() && !fetch(slot, stats) {
                        break;
                    }
                }
                (name, None, false)
            }
        }
    }

    /// [`CollectionShard::scan`] of a filter planned once for the command
    /// ([`planner::EqProbe`]: `{f: v}` alone, unsorted), as the planner would run it in this
    /// part: the first ready single-field index on `f`, probed with the probe's key. Returns
    /// false, having visited nothing, when the planner would plan otherwise here (no such
    /// index, or it is dormant and [`CollectionShard::prepare`] must build it first): the
    /// caller then prepares and scans.
    ///
    /// `now` caches the clock of strict TTL reads across the shards one command visits
    /// (read once, when a part first needs it).
    pub fn scan_eq(
        &self,
        p: &planner::EqProbe<'_>,
        now: &mut Option<i64>,
        visit: &mut dyn FnMut(u32, &RawDocument) -> bool,
    ) -> bool {
        let ordered = || {
            self.indexes
                .iter()
                .filter_map(IndexShard::as_ordered)
                .filter(|ix| ix.ready)
        };
        let Some(ix) = p
            .index
            .get()
            .and_then(|spec| ordered().find(|ix| Arc::ptr_eq(&ix.spec, spec)))
            .or_else(|| {
                ordered().find(|ix| matches!(ix.spec.fields.as_slice(), [f] if f.path == p.path))
            })
        else {
            return false;
        };
        p.index.get_or_init(|| ix.spec.clone());
        if ix.is_dormant() {
            return false;
        }
        let inverted: Vec<u8>;
        let key = if ix.spec.fields[0].descending {
            inverted = p.key.iter().map(|b| !b).collect();
            &inverted
        } else {
            &p.key
        };
        let clock = (!self.ttl.is_empty() && ttl::strict_reads())
            .then(|| *now.get_or_insert_with(crate::util::clock::now_ms));
        // As `index_hit_is_match`: a hit is the match when the stored type is exact, unless
        // the index ever held an array.
        let exact = p.exact.filter(|_| !ix.is_multikey());
        let mut fields: Option<Vec<Vec<String>>> = None;
        ix.scan_key(key, &mut ScanStats::default(), &mut |slot| {
            let Some(raw) = self.get(slot) else {
                return true;
            };
            // The dates are read from the document, which the match reads anyway (as
            // `lookup_id` does): one walk answers both where it can.
            let (due, exact_hit) = match self.walk_for_probe(raw, clock, exact) {
                Some(answers) => answers,
                None => (
                    clock.is_some_and(|now| self.doc_is_expired(raw, now)),
                    exact.is_some_and(|f| stored_exact(raw, f)),
                ),
            };
            if due {
                return true;
            }
            let matched = exact_hit
                || matches(
                    p.filter,
                    fields.get_or_insert_with(|| p.filter.field_paths()),
                    raw,
                );
            !matched || visit(slot, raw)
        });
        true
    }

    /// Readies, before a scan of `filter` with `sort`, the index the planner would serve it
    /// with: builds a TTL index's ordered part that is still dormant (see
    /// `OrderedIndex::wake`), and puts a hashed part in order when the scan is more than
    /// one key's entries (`OrderedIndex::order`). Every read and write that scans calls it
    /// first, so every shard it scans makes the same choice. Without it the scan is planned
    /// over the built indexes only (a collection scan where only the dormant part would
    /// have served), never wrong.
    pub fn prepare(&mut self, filter: &Node, sort: &[(Vec<String>, bool)]) {
        loop {
            let candidates: Vec<&OrderedIndex> = self
                .indexes
                .iter()
                .filter_map(IndexShard::as_ordered)
                .filter(|ix| ix.ready)
                .collect();
            if candidates
                .iter()
                .all(|ix| ix.is_ordered() && !ix.is_dormant())
            {
                return;
            }
            let (spec, wake) = match planner::plan(filter, &candidates, sort).0 {
                Plan::IxScan { index, .. } if candidates[index].is_dormant() => {
                    (candidates[index].spec.clone(), true)
                }
                Plan::IxScan { index, bounds }
                    if !candidates[index].is_ordered()
                        && !candidates[index].is_point_scan(&bounds) =>
                {
                    (candidates[index].spec.clone(), false)
                }
                _ => return,
            };
            let slots = &self.slots;
            if let Some(ix) = self
                .indexes
                .iter_mut()
                .filter_map(IndexShard::as_ordered_mut)
                .find(|ix| Arc::ptr_eq(&ix.spec, &spec))
            {
                if wake {
                    ix.wake(
                        slots.iter().enumerate().filter_map(|(i, c)| {
                            c.as_ref().and_then(doc_of).map(|d| (i as u32, d))
                        }),
                    );
                } else {
                    ix.order();
                }
            }
            self.sync_memory();
        }
    }

    /// Claims, in every unique index of the collection, the keys `doc` will hold for the
    /// document whose `_id` KeyString is `owner` — the one check of a write that reaches
    /// beyond its shard, made after every other check so a failure changes nothing. On a key
    /// held by another document, gives back what it claimed and returns the index's spec.
    pub fn claim_unique(
        &self,
        doc: &RawDocument,
        owner: &[u8],
    ) -> Result<UniqueClaims, Arc<IndexSpec>> {
        // The owner is copied only for a unique index: most writes claim nothing and then
        // allocate nothing here.
        let mut out = UniqueClaims::default();
        for o in self.indexes.iter().filter_map(IndexShard::as_ordered) {
            let Some(u) = &o.unique else { continue };
            if out.owner.is_empty() {
                out.owner = owner.to_vec();
            }
            match u.claim(&o.unique_keys(doc), owner) {
                Ok(c) => out.claims.push((u.clone(), c)),
                Err(_) => {
                    out.release();
                    return Err(o.spec.clone());
                }
            }
        }
        Ok(out)
    }

    /// One batch of an index build in this part: indexes the documents in slots
    /// `from..end` (a document a write stored meanwhile is already indexed and skipped),
    /// holding a unique index's keys in its shared table.
    pub fn build_index_batch(
        &mut self,
        spec: &Arc<IndexSpec>,
        from: u32,
        end: u32,
    ) -> Result<(), BuildError> {
        let mut docs: Vec<(u32, Document, Vec<u8>)> = Vec::new();
        for slot in from..end.min(self.slot_count()) {
            if let Some(raw) = self.get(slot) {
                docs.push((slot, spec.project(raw), id_key(raw)));
            }
        }
        let Some(i) = self
            .indexes
            .iter()
            .position(|ix| matches!(ix, IndexShard::Ordered(o) if Arc::ptr_eq(&o.spec, spec)))
        else {
            return Err(BuildError::Dropped);
        };
        for (slot, d, owner) in docs {
            spec.keys_of(&d).map_err(BuildError::Keys)?;
            let Some(raw) = self
                .slots
                .get(slot as usize)
                .and_then(Option::as_ref)
                .and_then(doc_of)
            else {
                continue;
            };
            let Some(ix) = self.indexes[i].as_ordered_mut() else {
                continue;
            };
            if ix.insert_doc(slot, &d) && ix.hold_unique(raw, &owner).is_err() {
                return Err(BuildError::Duplicate(raw.to_owned()));
            }
        }
        Ok(())
    }

    /// The secondary index specs, in creation order (every shard's part holds the same).
    pub fn index_specs(&self) -> Vec<Arc<IndexSpec>> {
        self.indexes
            .iter()
            .filter_map(IndexShard::as_ordered)
            .map(|ix| ix.spec.clone())
            .collect()
    }

    /// A find by `_id` alone: the visible document the filter `{_id: v}` matches, read with
    /// one lookup of the `_id` map, without the planner. `Err(NotById)` when the filter is
    /// not such a filter (the caller scans instead).
    pub fn lookup_id(&self, filter: &Node) -> Result<Option<(u32, &RawDocument)>, NotById> {
        let Some(id) = filter.id_equality() else {
            return Err(NotById);
        };
        self.lookup_id_key(filter, &keys::encode(id))
    }

    /// [`lookup_id`](Self::lookup_id) given `key`, the KeyString of the filter's `_id`
    /// equality, which a write by `_id` has already built to choose its shard.
    pub fn lookup_id_key(
        &self,
        filter: &Node,
        key: &[u8],
    ) -> Result<Option<(u32, &RawDocument)>, NotById> {
        self.lookup_by_id_key(filter, key, false)
    }

    /// [`lookup_id_key`](Self::lookup_id_key) for a write that refreshes or drops the
    /// document's TTL entries next (an update in place, a touch): whether it is due is read
    /// from those entries, whose cache lines the write loads anyway, instead of walking
    /// the document for its dates (the same dates: every write keeps them in step).
    pub fn lookup_id_key_for_write(
        &self,
        filter: &Node,
        key: &[u8],
    ) -> Result<Option<(u32, &RawDocument)>, NotById> {
        self.lookup_by_id_key(filter, key, true)
    }

    fn lookup_by_id_key(
        &self,
        filter: &Node,
        key: &[u8],
        dates_from_wheels: bool,
    ) -> Result<Option<(u32, &RawDocument)>, NotById> {
        if !id_hit_is_match(filter) {
            return Err(NotById);
        }
        let Some((slot, raw)) = self.live_by_id_key(key, dates_from_wheels) else {
            return Ok(None);
        };
        // A stored `_id` of another type with the same KeyString (a double for an integer)
        // is matched as the general path would.
        let matched = stored_exact(raw, "_id") || matches(filter, &filter.field_paths(), raw);
        Ok(matched.then_some((slot, raw)))
    }

    /// The document of `{_id: v}` for `v` a string or an integer given as its KeyString
    /// (`query::id_key_json`), as [`lookup_id_key`](Self::lookup_id_key) finds it; `filter`
    /// makes the filter's tree only when the stored `_id` is of another type with the same
    /// KeyString (a double for an integer), to match it as the general path would.
    pub fn lookup_id_scalar(
        &self,
        key: &[u8],
        filter: impl FnOnce() -> Option<Node>,
    ) -> Option<(u32, &RawDocument)> {
        self.lookup_id_scalar_in(key, filter, false)
    }

    /// [`lookup_id_scalar`](Self::lookup_id_scalar) for a write, with the dates read from
    /// the TTL wheels as [`lookup_id_key_for_write`](Self::lookup_id_key_for_write) reads them.
    pub fn lookup_id_scalar_for_write(
        &self,
        key: &[u8],
        filter: impl FnOnce() -> Option<Node>,
    ) -> Option<(u32, &RawDocument)> {
        self.lookup_id_scalar_in(key, filter, true)
    }

    fn lookup_id_scalar_in(
        &self,
        key: &[u8],
        filter: impl FnOnce() -> Option<Node>,
        dates_from_wheels: bool,
    ) -> Option<(u32, &RawDocument)> {
        let (slot, raw) = self.live_by_id_key(key, dates_from_wheels)?;
        let matched = stored_exact(raw, "_id")
            || filter().is_some_and(|f| matches(&f, &f.field_paths(), raw));
        matched.then_some((slot, raw))
    }

    /// The slot and document under KeyString `key` in the `_id` map, unless it is due.
    fn live_by_id_key(&self, key: &[u8], dates_from_wheels: bool) -> Option<(u32, &RawDocument)> {
        let clock = self.visibility_clock();
        if let (true, Some(now)) = (dates_from_wheels, clock) {
            // A write reads the dates from the TTL wheels, whose entries it moves next. They
            // are read as soon as the `_id` map names the slot, before the document: both
            // reads depend on the slot only, so their cache misses overlap.
            let mut due = false;
            let slot = self.slot_of_seeing(key, |slot| due = self.is_expired(slot, now))?;
            if due {
                return None;
            }
            return self.get(slot).map(|raw| (slot, raw));
        }
        let slot = self.slot_of(key)?;
        let raw = self.get(slot)?;
        // The dates are read from the document itself, already in cache for the reply,
        // rather than from the TTL wheels' tables (the same dates, kept in step by every
        // write).
        if clock.is_some_and(|now| self.doc_is_expired(raw, now)) {
            return None;
        }
        Some((slot, raw))
    }

    /// The ordered index named `name`, if any.
    pub fn ordered_index(&self, name: &str) -> Option<&OrderedIndex> {
        self.indexes
            .iter()
            .filter_map(IndexShard::as_ordered)
            .find(|ix| ix.spec.name == name)
    }

    /// Every live slot, for index builds.
    pub fn slot_count(&self) -> u32 {
        self.slots.len() as u32
    }
}

/// The path of `{f: v}` (alone) when `v` is an integer, string or ObjectId: the only types
/// for which "same KeyString" and "equal under the query's comparison" are the same thing
/// without a second look (doubles, documents, regexes and the rest are matched).
fn exact_equality(filter: &Node) -> Option<&[String]> {
    match filter {
        Node::Field {
            path,
            pred: Pred::Eq(Bson::Int32(_) | Bson::Int64(_) | Bson::String(_) | Bson::ObjectId(_)),
        } => Some(path),
        _ => None,
    }
}

/// True for `{_id: v}` with `v` as in [`exact_equality`]: the `_id` map hit is the match.
fn id_hit_is_match(filter: &Node) -> bool {
    matches!(exact_equality(filter), Some([p]) if p == "_id")
}

/// For `{f: v}` as in [`exact_equality`] with a top-level `f`, planned on a single-field
/// index on `f` that has never held an array, the field whose stored type then decides
/// whether a hit is a match ([`stored_exact`]).
fn index_hit_is_match<'a>(filter: &'a Node, ix: &OrderedIndex) -> Option<&'a str> {
    let [f] = exact_equality(filter)? else {
        return None;
    };
    let on_f =
        matches!(ix.spec.fields.as_slice(), [k] if matches!(k.path.as_slice(), [p] if p == f));
    (on_f && !ix.is_multikey()).then_some(f.as_str())
}

impl CollectionShard {
    /// One walk of a stored document for an equality probe's hit: whether a TTL index makes
    /// it due at `clock` (as [`TtlShard::doc_is_expired`]) and whether the stored `exact`
    /// field is of a type the KeyString encodes exactly (as [`stored_exact`]). `None` when
    /// one walk of the top level cannot tell — a TTL index on a dotted path, a TTL field
    /// holding an array, bytes the walker refuses — and the caller asks each question
    /// apart. Why: the two questions walked the same leading fields twice, about 300
    /// instructions of an indexed DOC.FIND or DOC.COUNT.
    fn walk_for_probe(
        &self,
        raw: &RawDocument,
        clock: Option<i64>,
        exact: Option<&str>,
    ) -> Option<(bool, bool)> {
        /// TTL indexes one walk serves at once (each wants its field's first element).
        const MAX_TTL: usize = 4;
        let ttl: &[(String, TtlShard)] = if clock.is_some() { &self.ttl } else { &[] };
        if ttl.len() > MAX_TTL {
            return None;
        }
        let mut ttl_fields: [&[u8]; MAX_TTL] = [&[]; MAX_TTL];
        for (slot, (_, t)) in ttl_fields.iter_mut().zip(ttl) {
            *slot = t.top_field()?.as_bytes();
        }
        let mut ttl_seen = [false; MAX_TTL];
        let (mut due, mut exact_hit) = (false, false);
        let mut exact_left = exact.map(str::as_bytes);
        let mut ttl_left = ttl.len();
        for e in rawbson::elements(raw.as_bytes()) {
            if exact_left.is_none() && ttl_left == 0 {
                break;
            }
            let e = e?;
            if exact_left == Some(e.key) {
                exact_left = None;
                exact_hit = exact_type(e.ty);
            }
            for (i, (_, t)) in ttl.iter().enumerate() {
                if ttl_seen[i] || ttl_fields[i] != e.key {
                    continue;
                }
                ttl_seen[i] = true;
                ttl_left -= 1;
                match e.ty {
                    rawbson::DATE_TIME => {
                        due |= t.date_is_due(rawbson::i64_of(e.value)?, clock?);
                    }
                    // An array's earliest date is the general walk's.
                    rawbson::ARRAY => return None,
                    // No date: never due under this index.
                    _ => {}
                }
            }
        }
        Some((due, exact_hit))
    }
}

/// A stored type byte whose KeyString is exact ([`stored_exact`]).
fn exact_type(ty: u8) -> bool {
    matches!(
        ty,
        rawbson::INT32 | rawbson::INT64 | rawbson::DOUBLE | rawbson::STRING | rawbson::OBJECT_ID
    )
}

/// The stored `field` is of a type the KeyString encodes exactly (Decimal128 goes through
/// its f64 value, so a hit on a decimal is matched; an array is matched element-wise).
fn stored_exact(raw: &RawDocument, field: &str) -> bool {
    // The type byte read with the stored-bytes walker (the bson crate's lookup converts
    // every element it passes); the crate's lookup only for bytes the walker refuses.
    if let Some(e) = rawbson::field(raw.as_bytes(), field) {
        return e.is_some_and(|e| exact_type(e.ty));
    }
    matches!(
        raw.get(field),
        Ok(Some(
            RawBsonRef::Int32(_)
                | RawBsonRef::Int64(_)
                | RawBsonRef::Double(_)
                | RawBsonRef::String(_)
                | RawBsonRef::ObjectId(_)
        ))
    )
}

/// Matches a stored document, decoding only what the filter's paths reach (`paths` from
/// [`Node::field_paths`]): fields off every path are skipped, fields at the end of a path are
/// decoded whole, so a scan costs in proportion to what the filter looks at.
pub fn matches(filter: &Node, paths: &[Vec<String>], raw: &RawDocument) -> bool {
    let tails: Vec<&[String]> = paths.iter().map(Vec::as_slice).collect();
    filter.matches(&prune_doc(raw, &tails))
}

/// The fields of `doc` that `paths` (all non-empty) go through, pruned below.
fn prune_doc(doc: &RawDocument, paths: &[&[String]]) -> Document {
    let mut out = Document::new();
    for elem in doc.iter() {
        let Ok((k, v)) = elem else { continue };
        let k = k.as_str();
        // Most fields are off every path: skip them without allocating.
        if !paths
            .iter()
            .any(|p| p.first().map(String::as_str) == Some(k))
        {
            continue;
        }
        let tails: Vec<&[String]> = paths
            .iter()
            .filter(|p| p.first().map(String::as_str) == Some(k))
            .map(|p| &p[1..])
            .collect();
        if tails.is_empty() {
            continue;
        }
        let value = if tails.iter().any(|t| t.is_empty()) {
            Bson::try_from(v).ok()
        } else {
            prune_value(v, &tails)
        };
        if let Some(b) = value {
            out.insert(k, b);
        }
    }
    out
}

/// A value some paths (all non-empty) continue through: subdocuments are pruned, arrays keep
/// every element (positions matter) with their subdocuments pruned by the same paths (paths
/// run through arrays of subdocuments) plus the paths that index that element.
fn prune_value(v: RawBsonRef<'_>, paths: &[&[String]]) -> Option<Bson> {
    match v {
        RawBsonRef::Document(d) => Some(Bson::Document(prune_doc(d, paths))),
        RawBsonRef::Array(a) => {
            let mut out = Vec::new();
            for (i, e) in a.into_iter().enumerate() {
                let e = e.ok()?;
                let idx = i.to_string();
                let by_index: Vec<&[String]> = paths
                    .iter()
                    .filter(|p| p.first() == Some(&idx))
                    .map(|p| &p[1..])
                    .collect();
                match e {
                    RawBsonRef::Document(d) if !by_index.iter().any(|t| t.is_empty()) => {
                        let mut ps: Vec<&[String]> = paths.to_vec();
                        ps.extend(by_index);
                        out.push(Bson::Document(prune_doc(d, &ps)));
                    }
                    // Everything else (scalars, nested arrays, an indexed element at the end
                    // of a path) is decoded whole.
                    _ => out.push(Bson::try_from(e).ok()?),
                }
            }
            Some(Bson::Array(out))
        }
        other => Bson::try_from(other).ok(),
    }
}
