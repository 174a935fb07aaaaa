//! A collection moved whole to another server (MIGRATE): on the source, what is read of it
//! (its definition, its documents, a stamp of its state) and its removal once the target
//! acknowledged it; on the target, the collection built aside from what was sent and put in
//! place under its name in one step. The bytes that travel are the commands layer's
//! (`commands::documents::transfer`).
//!
//! **Why aside, then one step.** The target builds every shard's part outside the store
//! (no lock held, nothing reachable by name, no document hook called, so nothing journaled,
//! tracked or appended to a change stream per document) and then, under the catalog held
//! exclusively and every shard's lock, checks the name (BUSYKEY unless REPLACE) and puts the
//! parts in place. A collection is therefore never half there: a transfer cut short leaves
//! nothing behind that a retry would meet, and a client of the target sees the collection
//! whole or not at all.
//!
//! **Why a stamp.** The source reads the collection under every shard's lock, then waits on
//! the network without any. Once the target acknowledged it, the source removes its
//! collection only if it is still the same collection (the same change feed, which one
//! collection keeps for its life), with the same definition and no write to any part since
//! (`CollectionShard::writes`): a collection written meanwhile is kept, as MIGRATE keeps a
//! key written during its transfer. Expiries do not count as writes: a document that expired
//! on the source meanwhile is due on the target too, whose TTL monitor removes it.

use super::{with_code, DocResult};
use crate::documents::capped::{CappedSpec, TTL_ON_CAPPED};
use crate::documents::changes::{ChangeFeed, ChangesSpec};
use crate::documents::collection::{BuildError, CollectionMeta, CollectionShard, IndexShard};
use crate::documents::index::{IndexSpec, OrderedIndex};
use crate::store::journal::snapshot::CollDef;
use crate::store::{ShardData, Store};
use bson::Document;
use std::sync::Arc;

/// The error a collection that exists answers a move without REPLACE (Redis's RESTORE
/// answers `BUSYKEY Target key name already exists.` for a key).
pub const BUSY: &str = "BUSYKEY Target collection name already exists.";

/// A collection as read for a move: all of it at one moment.
pub struct Image {
    pub def: CollDef,
    /// Each document's raw BSON; in insertion order for a capped collection (so the
    /// target's oldest documents are the source's, trimmed first), else shard by shard.
    pub docs: Vec<Vec<u8>>,
    pub stamp: Stamp,
}

/// What a collection was when it was read, to learn later that it still is.
pub struct Stamp {
    /// The collection's change feed: one collection keeps one for its life, so the same
    /// feed is the same collection (held here, its address cannot go to another).
    feed: Arc<ChangeFeed>,
    /// Each shard's part's write count, in shard order.
    writes: Vec<u64>,
    /// The definition's records (options, indexes, TTL settings).
    def: Vec<u8>,
}

/// A collection built aside, not yet reachable by name: one part per shard, in shard
/// order, already counted in its shard's memory (a part dropped unused gives it back).
pub struct Built {
    parts: Vec<CollectionShard>,
}

/// The definition of a collection to build: what its `DOC.CREATE` and `DOC.CREATEINDEX`
/// records say.
pub struct Definition {
    pub capped: Option<CappedSpec>,
    pub changes: Option<ChangesSpec>,
    pub indexes: Vec<IndexSpec>,
}

/// The part of collection `name` of database `db` in a locked shard.
fn part<'g>(g: &'g ShardData, db: usize, name: &str) -> Option<&'g CollectionShard> {
    g.dbs.get(db)?.collections.get(name)
}

impl Store {
    /// Whether database `db` has a collection `name`.
    pub fn has_collection(&self, db: usize, name: &str) -> bool {
        let _catalog = self.catalog_read();
        self.lock(0)
            .dbs
            .get(db)
            .is_some_and(|d| d.collections.contains_key(name))
    }

    /// The names of database `db`'s collections that `pred` accepts, sorted. O(collections):
    /// the names are read under shard 0's lock (every shard has every name).
    pub fn collection_names_where(
        &self,
        db: usize,
        mut pred: impl FnMut(&str) -> bool,
    ) -> Vec<String> {
        let _catalog = self.catalog_read();
        let mut names: Vec<String> = match self.lock(0).dbs.get(db) {
            Some(d) => d.collections.keys().filter(|n| pred(n)).cloned().collect(),
            None => Vec::new(),
        };
        names.sort_unstable();
        names
    }

    /// The collection `name` of database `db` as it is now, read under the catalog (shared)
    /// and every shard's lock at once: the documents' bytes are copied there, nothing is
    /// encoded. `None` when there is no such collection.
    pub fn collection_image(&self, db: usize, name: &str) -> Option<Image> {
        let _catalog = self.catalog_read();
        let all: Vec<usize> = (0..self.shard_count()).collect();
        let guards = self.lock_many(&all);
        let first = guards.first().and_then(|(_, g)| part(g, db, name))?;
        let def = CollDef::of(db, name, first);
        let mut def_bytes = Vec::new();
        def.encode(&mut def_bytes);
        let feed = first.meta.changes.clone();
        let capped = first.is_capped();
        let mut writes = Vec::with_capacity(guards.len());
        let mut docs: Vec<(u64, Vec<u8>)> = Vec::new();
        for (_, g) in guards.iter() {
            // Every shard has a part of every collection (created and dropped in all at once).
            let Some(cs) = part(g, db, name) else {
                continue;
            };
            writes.push(cs.writes());
            docs.reserve(cs.len());
            for (slot, d) in cs.documents() {
                let seq = if capped { cs.order.seq_of(slot) } else { 0 };
                docs.push((seq, d.as_bytes().to_vec()));
            }
        }
        drop(guards);
        if capped {
            docs.sort_by_key(|(seq, _)| *seq);
        }
        Some(Image {
            def,
            docs: docs.into_iter().map(|(_, d)| d).collect(),
            stamp: Stamp {
                feed,
                writes,
                def: def_bytes,
            },
        })
    }

    /// Removes the collection `name` of database `db` because it now lives elsewhere: when
    /// `stamp` is given, only if it is still the collection the stamp describes (see the
    /// module's doc); without one, whatever it holds (its slot was taken away). No change
    /// stream entry is appended: the collection moved, it was not dropped. `under_lock` runs
    /// in the critical section, after the removal (the journal's record of it is numbered
    /// there). Whether it was removed.
    pub fn remove_moved(
        &self,
        db: usize,
        name: &str,
        stamp: Option<&Stamp>,
        under_lock: impl FnOnce(),
    ) -> bool {
        let old: Vec<CollectionShard> = {
            let _catalog = self.catalog_write();
            let all: Vec<usize> = (0..self.shard_count()).collect();
            let mut guards = self.lock_many(&all);
            let same = {
                let Some(first) = guards.first().and_then(|(_, g)| part(g, db, name)) else {
                    return false;
                };
                match stamp {
                    None => true,
                    Some(st) => {
                        let writes: Vec<u64> = guards
                            .iter()
                            .filter_map(|(_, g)| part(g, db, name).map(CollectionShard::writes))
                            .collect();
                        let mut def = Vec::new();
                        CollDef::of(db, name, first).encode(&mut def);
                        Arc::ptr_eq(&first.meta.changes, &st.feed)
                            && writes == st.writes
                            && def == st.def
                    }
                }
            };
            if !same {
                return false;
            }
            let old: Vec<CollectionShard> = guards
                .iter_mut()
                .filter_map(|(_, g)| g.dbs.get_mut(db)?.collections.remove(name))
                .collect();
            self.doc_dropped(db, name);
            crate::store::journal::mark();
            under_lock();
            old
        };
        // Freed after the locks are released, as DOC.DROP frees.
        drop(old);
        true
    }

    /// Builds the collection of database `db` named `name` (for error texts) aside: its
    /// documents stored by `_id`, then each index built over them (a unique index that two
    /// documents break, or a document an index cannot key, fails the whole build), then the
    /// TTL wheels. Checked as the commands that make a collection check it: documents as an
    /// insert checks them (`max_size` included), indexes as `DOC.CREATEINDEX`.
    pub fn build_collection(
        &self,
        db: usize,
        name: &str,
        def: Definition,
        docs: Vec<Document>,
        max_size: usize,
    ) -> DocResult<Built> {
        let mut indexes: Vec<Arc<IndexSpec>> = Vec::new();
        for spec in def.indexes {
            // The `_id` index always exists (as `DOC.CREATEINDEX` treats it).
            if spec.fields.len() == 1
                && spec.fields[0].name == "_id"
                && !spec.fields[0].descending
                && (spec.unique || spec.name == "_id_" || spec.name == "_id_1")
            {
                continue;
            }
            if spec.name == "_id_" {
                return Err("ERR The index name '_id_' is reserved for the _id index".into());
            }
            if let Some(e) = indexes
                .iter()
                .find(|e| e.name == spec.name || e.same_key(&spec.fields))
            {
                return Err(format!(
                    "ERR Index already exists with a different name or key: {}",
                    e.name
                ));
            }
            if def.capped.is_some() && spec.expire_after.is_some() {
                return Err(TTL_ON_CAPPED.into());
            }
            indexes.push(Arc::new(spec));
        }
        if indexes.len() > super::ddl::MAX_INDEXES {
            return Err("ERR add index fails, too many indexes (the limit is 64)".into());
        }
        let meta = CollectionMeta {
            capped: def.capped,
            changes: Arc::default(),
        };
        let mut parts: Vec<CollectionShard> = self
            .counters()
            .iter()
            .map(|c| CollectionShard::new(meta.clone()).counted_in(c.documents.clone()))
            .collect();
        for doc in docs {
            let p = self.prepare(doc, max_size)?;
            let Some(cs) = parts.get_mut(p.shard) else {
                return Err("ERR internal: no part for the document's shard".into());
            };
            if cs.contains_id(&p.key) {
                return Err(format!(
                    "DUPKEY E11000 duplicate key error collection: {db}.{name} index: _id_ dup key: {}",
                    crate::documents::codec::dup_key_text(&p.id)
                ));
            }
            cs.insert(p.key, p.raw);
        }
        let now = crate::util::clock::now_ms();
        for spec in &indexes {
            // A unique index's parts share one key table.
            let first = OrderedIndex::new(spec.clone());
            let unique = first.unique.clone();
            let mut first = Some(first);
            for cs in parts.iter_mut() {
                let part = first
                    .take()
                    .unwrap_or_else(|| OrderedIndex::part_of(spec.clone(), unique.clone()));
                cs.indexes.push(IndexShard::Ordered(part));
                match cs.build_index_batch(spec, 0, cs.slot_count()) {
                    Ok(()) => {}
                    Err(BuildError::Keys(e)) => return Err(with_code(e)),
                    Err(BuildError::Duplicate(doc)) => {
                        return Err(format!(
                            "DUPKEY E11000 duplicate key error collection: {db}.{name} index: {} dup key: {}",
                            spec.name,
                            spec.dup_key_text(&spec.project(&doc))
                        ))
                    }
                    Err(BuildError::Dropped) => {
                        return Err("ERR internal: the index being built went away".into())
                    }
                }
                if let Some(ix) = cs.indexes.last_mut().and_then(IndexShard::as_ordered_mut) {
                    ix.ready = true;
                }
                if let (Some(secs), Some(field)) = (spec.expire_after, spec.fields.first()) {
                    cs.set_ttl_index(&spec.name, &field.name, secs, now);
                }
            }
        }
        for cs in parts.iter_mut() {
            cs.sync_memory();
        }
        meta.changes.set_target(def.changes);
        Ok(Built { parts })
    }

    /// Puts a collection built aside in place as `name` of database `db`, in one critical
    /// section: `BUSYKEY` if the name is taken, unless `replace` (the collection there is
    /// then dropped, without a change stream entry: it is replaced, as RESTORE REPLACE
    /// replaces a key). A change stream key must be free or a stream, as for `DOC.CREATE`.
    pub fn install_collection(
        &self,
        db: usize,
        name: &str,
        built: Built,
        replace: bool,
    ) -> DocResult<()> {
        let old: Vec<CollectionShard> = {
            let _catalog = self.catalog_write();
            let all: Vec<usize> = (0..self.shard_count()).collect();
            let mut guards = self.lock_many(&all);
            if built.parts.len() != guards.len() {
                return Err("ERR internal: the collection was built for another store".into());
            }
            let exists = guards
                .first()
                .and_then(|(_, g)| g.dbs.get(db))
                .is_some_and(|d| d.collections.contains_key(name));
            if exists && !replace {
                return Err(BUSY.into());
            }
            let target = built.parts.first().and_then(|p| p.meta.changes.target());
            if let Some(spec) = target {
                self.check_stream_key(&mut guards, db, &spec.stream)?;
            }
            let mut old = Vec::new();
            for ((_, g), part) in guards.iter_mut().zip(built.parts) {
                let Some(d) = g.dbs.get_mut(db) else { continue };
                if let Some(o) = d.collections.insert(name.to_string(), part) {
                    old.push(o);
                }
            }
            self.doc_dropped(db, name);
            crate::store::journal::mark();
            old
        };
        drop(old);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(id: i32, v: &str) -> Document {
        bson::doc! {"_id": id, "v": v, "at": bson::DateTime::from_millis(1_000)}
    }

    fn def(indexes: Vec<IndexSpec>) -> Definition {
        Definition {
            capped: None,
            changes: None,
            indexes,
        }
    }

    fn spec(field: &str, unique: bool, expire_after: Option<i64>) -> IndexSpec {
        let fields = IndexSpec::parse_keys(&bson::doc! {field: 1}).expect("keys");
        IndexSpec {
            name: IndexSpec::default_name(&fields),
            fields,
            unique,
            expire_after,
        }
    }

    fn count(store: &Store, name: &str) -> usize {
        let mut n = 0;
        store.for_each_shard(|s| n += s.dbs[0].collections.get(name).map_or(0, |c| c.len()));
        n
    }

    /// A collection read, built aside on another store and installed there holds the same
    /// documents and indexes; a second install is BUSYKEY unless REPLACE; the source's is
    /// removed only while its stamp still holds.
    #[test]
    fn image_build_install_and_remove() {
        let src = Store::new(4, 1);
        let docs: Vec<Document> = (0..500).map(|i| doc(i, &format!("v{i}"))).collect();
        let built = src
            .build_collection(
                0,
                "c",
                def(vec![spec("v", true, None), spec("at", false, Some(60))]),
                docs,
                1 << 20,
            )
            .expect("build");
        src.install_collection(0, "c", built, false)
            .expect("install");
        assert_eq!(count(&src, "c"), 500);

        let image = src.collection_image(0, "c").expect("image");
        assert_eq!(image.docs.len(), 500);
        assert_eq!(image.def.indexes.len(), 2);

        let dst = Store::new(3, 1);
        let docs: Vec<Document> = image
            .docs
            .iter()
            .map(|d| Document::from_reader(&d[..]).expect("bson"))
            .collect();
        let again = docs.clone();
        let d2 = Definition {
            capped: None,
            changes: None,
            indexes: vec![spec("v", true, None), spec("at", false, Some(60))],
        };
        let built = dst
            .build_collection(0, "c", d2, docs, 1 << 20)
            .expect("build");
        dst.install_collection(0, "c", built, false)
            .expect("install");
        assert_eq!(count(&dst, "c"), 500);
        let built = dst
            .build_collection(0, "c", def(vec![]), again, 1 << 20)
            .expect("build");
        assert_eq!(
            dst.install_collection(0, "c", built, false),
            Err(BUSY.to_string())
        );
        assert_eq!(
            count(&dst, "c"),
            500,
            "a refused install leaves what was there"
        );

        // A write since the image: the source keeps its collection.
        {
            let mut g = src.lock(0);
            let cs = g.dbs[0].collections.get_mut("c").expect("part");
            let slot = cs.documents().next().map(|(s, _)| s).expect("a document");
            cs.remove(slot);
        }
        assert!(!src.remove_moved(0, "c", Some(&image.stamp), || {}));
        assert!(src.has_collection(0, "c"));
        let fresh = src.collection_image(0, "c").expect("image");
        let mut ran = false;
        assert!(src.remove_moved(0, "c", Some(&fresh.stamp), || ran = true));
        assert!(ran && !src.has_collection(0, "c"));
    }

    /// A unique index two documents break fails the build, and nothing is installed.
    #[test]
    fn a_duplicate_unique_key_fails_the_build() {
        let store = Store::new(2, 1);
        let docs = vec![doc(1, "same"), doc(2, "same")];
        let e =
            match store.build_collection(0, "c", def(vec![spec("v", true, None)]), docs, 1 << 20) {
                Ok(_) => panic!("built"),
                Err(e) => e,
            };
        assert!(e.starts_with("DUPKEY"), "{e}");
        assert!(!store.has_collection(0, "c"));
        assert_eq!(
            store.document_bytes(),
            0,
            "the parts gave their memory back"
        );
    }

    /// An expiry is not a write: the stamp still holds after one.
    #[test]
    fn an_expiry_keeps_the_stamp() {
        let store = Store::new(1, 1);
        let built = store
            .build_collection(
                0,
                "c",
                def(vec![spec("at", false, Some(1))]),
                vec![doc(1, "a"), doc(2, "b")],
                1 << 20,
            )
            .expect("build");
        store
            .install_collection(0, "c", built, false)
            .expect("install");
        let image = store.collection_image(0, "c").expect("image");
        {
            let mut g = store.lock(0);
            let cs = g.dbs[0].collections.get_mut("c").expect("part");
            let mut ids = Vec::new();
            cs.expire_due(crate::util::clock::now_ms() + 1_000, 10, &mut ids);
            assert_eq!(ids.len(), 2);
        }
        assert!(store.remove_moved(0, "c", Some(&image.stamp), || {}));
    }
}
