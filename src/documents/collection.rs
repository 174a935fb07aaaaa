//! One shard's part of a collection: a slab of raw BSON documents, the `_id` map, and the
//! collection's metadata (replicated in every shard's part, changed only while holding all
//! shards, so there is no separate catalog lock).
//!
//! Every document mutation goes through [`CollectionShard::insert`],
//! [`CollectionShard::replace`] and [`CollectionShard::remove`]; every read through
//! [`CollectionShard::scan`].

use crate::documents::{keys, query::Node, ttl::TtlShard};
use bson::{Bson, Document, RawBsonRef, RawDocument, RawDocumentBuf};
use hashbrown::HashMap;

/// A per-shard index structure. Secondary indexes and TTL wheels are added here.
#[derive(Debug)]
pub enum IndexShard {
    /// Keeps the enum inhabited until the first real index kind lands.
    Placeholder,
}

impl IndexShard {
    fn on_insert(&mut self, _slot: u32, _doc: &RawDocumentBuf) {}
    fn on_remove(&mut self, _slot: u32, _doc: &RawDocumentBuf) {}
}

/// Collection metadata, identical in every shard's part.
#[derive(Debug, Default, Clone)]
pub struct CollectionMeta {}

/// What this shard's TTL monitor did to the collection (`DOC.STATS`, `INFO documents`).
#[derive(Debug, Default, Clone, Copy)]
pub struct TtlStats {
    pub passes: u64,
    pub deleted_documents: u64,
}

#[derive(Debug, Default)]
pub struct CollectionShard {
    slots: Vec<Option<RawDocumentBuf>>,
    free: Vec<u32>,
    /// KeyString of `_id` → slot.
    ids: HashMap<Vec<u8>, u32>,
    pub indexes: Vec<IndexShard>,
    /// This shard's wheel of each TTL index, by index name.
    pub ttl: Vec<(String, TtlShard)>,
    pub ttl_stats: TtlStats,
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
    /// `filter`, in slot order, until it returns false. An `_id` equality reads the `_id`
    /// map; everything else scans. (Strict TTL reads and index scans plug in here.)
    ///
    /// Matching decodes only what the filter's paths reach in the raw BSON, so a scan costs
    /// in proportion to what the filter looks at, not to the document's size.
    pub fn scan(&self, filter: &Node, visit: &mut dyn FnMut(u32, &RawDocumentBuf) -> bool) {
        if let Some(id) = filter.id_equality() {
            if let Some(&slot) = self.ids.get(&keys::encode(id)) {
                if let Some(raw) = self.get(slot) {
                    if matches(filter, &filter.field_paths(), raw) {
                        visit(slot, raw);
                    }
                }
            }
            return;
        }
        let fields = filter.field_paths();
        for (slot, cell) in self.slots.iter().enumerate() {
            let Some(raw) = cell else { continue };
            if matches(filter, &fields, raw) && !visit(slot as u32, raw) {
                return;
            }
        }
    }
}

/// Matches a stored document, decoding only what the filter's paths reach (`paths` from
/// [`Node::field_paths`]): fields off every path are skipped, fields at the end of a path are
/// decoded whole, so a scan costs in proportion to what the filter looks at.
pub fn matches(filter: &Node, paths: &[Vec<String>], raw: &RawDocumentBuf) -> bool {
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
