//! One shard's part of a collection: a slab of raw BSON documents, the `_id` map, and the
//! collection's metadata (replicated in every shard's part, changed only while holding all
//! shards, so there is no separate catalog lock).
//!
//! Every document mutation goes through [`CollectionShard::insert`],
//! [`CollectionShard::replace`] and [`CollectionShard::remove`]; every read through
//! [`CollectionShard::scan`].

use crate::documents::index::{OrderedIndex, ScanStats};
use crate::documents::planner::{self, Plan};
use crate::documents::{keys, query::Node};
use bson::{Bson, Document, RawDocumentBuf};
use hashbrown::HashMap;

/// A per-shard index structure. Secondary indexes and TTL wheels are added here.
#[derive(Debug)]
pub enum IndexShard {
    /// A secondary index (ordered, unique or TTL-serving): see `documents::index`.
    Ordered(OrderedIndex),
}

impl IndexShard {
    fn on_insert(&mut self, slot: u32, doc: &RawDocumentBuf) {
        match self {
            IndexShard::Ordered(ix) => {
                let d = ix.spec.project(doc);
                ix.insert_doc(slot, &d);
            }
        }
    }
    fn on_remove(&mut self, slot: u32, doc: &RawDocumentBuf) {
        match self {
            IndexShard::Ordered(ix) => {
                let d = ix.spec.project(doc);
                ix.remove_doc(slot, &d);
            }
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
pub struct CollectionMeta {}

#[derive(Debug, Default)]
pub struct CollectionShard {
    slots: Vec<Option<RawDocumentBuf>>,
    free: Vec<u32>,
    /// KeyString of `_id` → slot.
    ids: HashMap<Vec<u8>, u32>,
    pub indexes: Vec<IndexShard>,
    pub meta: CollectionMeta,
    bytes: usize,
}

/// The KeyString of a raw document's `_id` (every stored document has one).
fn id_key(doc: &RawDocumentBuf) -> Vec<u8> {
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
        self.ids.contains_key(key)
    }

    pub fn get(&self, slot: u32) -> Option<&RawDocumentBuf> {
        self.slots.get(slot as usize).and_then(Option::as_ref)
    }

    /// Stores a new document whose `_id` KeyString is `key`; the caller has checked that
    /// `key` is not present.
    pub fn insert(&mut self, key: Vec<u8>, doc: RawDocumentBuf) -> u32 {
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                self.slots.push(None);
                (self.slots.len() - 1) as u32
            }
        };
        self.index_insert(slot, &doc);
        self.bytes += doc.as_bytes().len();
        self.slots[slot as usize] = Some(doc);
        self.ids.insert(key, slot);
        slot
    }

    /// Replaces a document in place (an update; `_id` is unchanged). Returns the old one.
    pub fn replace(&mut self, slot: u32, doc: RawDocumentBuf) -> Option<RawDocumentBuf> {
        let cell = self.slots.get_mut(slot as usize)?;
        let old = cell.take()?;
        self.bytes -= old.as_bytes().len();
        self.bytes += doc.as_bytes().len();
        *cell = Some(doc);
        for ix in &mut self.indexes {
            ix.on_remove(slot, &old);
        }
        if let Some(Some(new)) = self.slots.get(slot as usize) {
            for ix in &mut self.indexes {
                ix.on_insert(slot, new);
            }
        }
        Some(old)
    }

    /// Removes a document and returns it.
    pub fn remove(&mut self, slot: u32) -> Option<RawDocumentBuf> {
        let old = self.slots.get_mut(slot as usize)?.take()?;
        self.bytes -= old.as_bytes().len();
        self.ids.remove(&id_key(&old));
        for ix in &mut self.indexes {
            ix.on_remove(slot, &old);
        }
        self.free.push(slot);
        Some(old)
    }

    // Secondary indexes and TTL wheels are kept exact here: every insert, replace and
    // remove passes through these hooks in the same critical section as the data change.
    fn index_insert(&mut self, slot: u32, doc: &RawDocumentBuf) {
        for ix in &mut self.indexes {
            ix.on_insert(slot, doc);
        }
    }

    /// The one read path: calls `visit(slot, raw)` for each visible document matching
    /// `filter` until it returns false. The planner picks how: an `_id` equality reads the
    /// `_id` map, an indexable filter scans an index, anything else scans the slots in slot
    /// order. (Strict TTL reads plug in here.)
    ///
    /// Matching decodes only the top-level fields the filter reads from the raw BSON, so a
    /// scan costs in proportion to what the filter looks at, not to the document's size.
    pub fn scan(&self, filter: &Node, visit: &mut dyn FnMut(u32, &RawDocumentBuf) -> bool) {
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
        visit: &mut dyn FnMut(u32, &RawDocumentBuf) -> bool,
    ) -> (&'static str, Option<String>, bool) {
        let ready: Vec<&OrderedIndex> = self
            .indexes
            .iter()
            .filter_map(IndexShard::as_ordered)
            .filter(|ix| ix.ready)
            .collect();
        let (plan, sorted) = planner::plan(filter, &ready, sort);
        let name = plan.name();
        let keep = keep.filter(|_| sort.is_empty() || sorted);
        let mut kept = 0usize;
        let fields = match plan {
            Plan::IdHack(_) => vec!["_id".to_string()],
            _ => filter.top_fields(),
        };
        let mut fetch = |slot: u32, stats: &mut ScanStats| -> bool {
            let Some(raw) = self.get(slot) else {
                return true;
            };
            stats.docs_examined += 1;
            if !matches(filter, &fields, raw) {
                return true;
            }
            stats.n_returned += 1;
            kept += 1;
            visit(slot, raw) && keep.is_none_or(|k| kept < k)
        };
        match plan {
            Plan::IdHack(id) => {
                if let Some(&slot) = self.ids.get(&keys::encode(id)) {
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

/// Matches a stored document, decoding only `fields` (the filter's top-level fields).
pub fn matches(filter: &Node, fields: &[String], raw: &RawDocumentBuf) -> bool {
    let mut partial = Document::new();
    for f in fields {
        if let Ok(Some(v)) = raw.get(f) {
            if let Ok(b) = Bson::try_from(v) {
                partial.insert(f.clone(), b);
            }
        }
    }
    filter.matches(&partial)
}
