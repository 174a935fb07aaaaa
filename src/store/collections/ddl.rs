//! Collections and their indexes: create, drop and rename collections (under the catalog
//! held exclusively and every shard's lock, so each is one step for every other command),
//! create and drop indexes, TTL indexes, and what `DOC.INDEXES`, `DOC.STATS`,
//! `DOC.COLLECTIONS` and `INFO documents` report.

use super::{with_code, Coll, DocResult};
use crate::documents::capped::{CappedSpec, TTL_ON_CAPPED};
use crate::documents::changes::{ChangeFeed, ChangesSpec, Op, Payload};
use crate::documents::collection::{BuildError, CollectionMeta, CollectionShard, IndexShard};
use crate::documents::index::{IndexSpec, OrderedIndex};
use crate::documents::stats::Totals;
use crate::store::Store;
use bson::Document;
use std::sync::Arc;

/// Slots indexed per lock hold while building an index, so other clients' commands on the
/// shard run between batches.
const BUILD_BATCH: u32 = 1024;

/// The most secondary indexes a collection takes (MongoDB's 64, `_id` included).
pub(super) const MAX_INDEXES: usize = 63;

/// What `DOC.STATS` reports of one collection.
pub type CollectionInfo = Document;

impl Store {
    /// `DOC.CREATE`: a new collection, capped when `capped` is given, with a change stream
    /// when `changes` is. Fails if it exists.
    pub fn create_collection(
        &self,
        db: usize,
        name: &str,
        capped: Option<CappedSpec>,
        changes: Option<ChangesSpec>,
    ) -> DocResult<()> {
        let _catalog = self.catalog_write();
        let mut guards = self.lock_many(&(0..self.shard_count()).collect::<Vec<_>>());
        if guards[0].1.dbs[db].collections.contains_key(name) {
            return Err(format!("ERR Collection {db}.{name} already exists."));
        }
        if let Some(spec) = &changes {
            self.check_stream_key(&mut guards, db, &spec.stream)?;
        }
        let meta = CollectionMeta {
            capped,
            changes: Arc::default(),
        };
        meta.changes.set_target(changes);
        for (_, g) in guards.iter_mut() {
            let part = g.new_collection(meta.clone());
            g.dbs[db].collections.insert(name.to_string(), part);
        }
        Ok(())
    }

    /// The key a change stream goes to must be free or a stream; `guards` hold every shard.
    pub(super) fn check_stream_key(
        &self,
        guards: &mut super::Guards<'_>,
        db: usize,
        key: &[u8],
    ) -> DocResult<()> {
        let h = self.hash(key);
        let shard = self.shard_of_hash(h);
        let Some((_, g)) = guards.iter_mut().find(|(i, _)| *i == shard) else {
            return Err("ERR internal: shard not locked".into());
        };
        match g.dbs[db].keys.peek(h, key) {
            Some(e) if !matches!(e.value, crate::store::Value::Stream(_)) => {
                Err("WRONGTYPE Operation against a key holding the wrong kind of value".into())
            }
            _ => Ok(()),
        }
    }

    /// `DOC.COLLMOD coll CHANGES …`: sets (or with `None` clears) where the collection's
    /// changes go, under every shard's lock, so each change is queued for the old target
    /// or the new one. Changes queued before are still appended to the old target.
    pub fn set_changes(
        &self,
        db: usize,
        name: &str,
        changes: Option<ChangesSpec>,
    ) -> DocResult<()> {
        let _catalog = self.catalog_write();
        let mut guards = self.lock_many(&(0..self.shard_count()).collect::<Vec<_>>());
        let Some(feed) = guards[0].1.dbs[db]
            .collections
            .get(name)
            .map(|cs| cs.meta.changes.clone())
        else {
            return Err(format!("ERR ns not found {db}.{name}"));
        };
        if let Some(spec) = &changes {
            self.check_stream_key(&mut guards, db, &spec.stream)?;
        }
        feed.set_target(changes);
        Ok(())
    }

    /// `DOC.DROP`: whether the collection existed. Its memory is freed after the locks are
    /// released; each part takes its bytes out of its shard's counter as it goes. A
    /// collection with a change stream appends one `drop` entry, after every change it
    /// queued.
    pub fn drop_collection(&self, db: usize, name: &str) -> bool {
        let (old, feed): (Vec<CollectionShard>, Option<Arc<ChangeFeed>>) = {
            let _catalog = self.catalog_write();
            let mut guards = self.lock_many(&(0..self.shard_count()).collect::<Vec<_>>());
            let old: Vec<CollectionShard> = guards
                .iter_mut()
                .filter_map(|(_, g)| g.dbs[db].collections.remove(name))
                .collect();
            if !old.is_empty() {
                self.doc_dropped(db, name);
            }
            let feed = old.first().map(|cs| cs.meta.changes.clone());
            let queued = feed
                .as_ref()
                .is_some_and(|f| f.push(db, name, Op::Drop, || Payload::None));
            (old, feed.filter(|_| queued))
        };
        if let Some(f) = feed {
            self.drain_changes(&f);
        }
        !old.is_empty()
    }

    /// `DOC.RENAME`: every shard's part moves in one critical section (indexes, TTL wheels,
    /// counters and capped state live in the part and move with it).
    pub fn rename_collection(
        &self,
        db: usize,
        from: &str,
        to: &str,
        drop_target: bool,
    ) -> DocResult<()> {
        let (dropped, feeds): (Vec<CollectionShard>, Vec<Arc<ChangeFeed>>) = {
            let _catalog = self.catalog_write();
            let mut guards = self.lock_many(&(0..self.shard_count()).collect::<Vec<_>>());
            let cols = &guards[0].1.dbs[db].collections;
            if !cols.contains_key(from) {
                return Err("ERR source namespace does not exist".into());
            }
            if from == to {
                return Err("ERR Can't rename a collection to itself".into());
            }
            if cols.contains_key(to) && !drop_target {
                return Err("ERR target namespace exists".into());
            }
            let mut dropped = Vec::new();
            let mut moved = None;
            for (_, g) in guards.iter_mut() {
                let cols = &mut g.dbs[db].collections;
                if let Some(part) = cols.remove(from) {
                    moved.get_or_insert_with(|| part.meta.changes.clone());
                    if let Some(old) = cols.insert(to.to_string(), part) {
                        dropped.push(old);
                    }
                }
            }
            self.doc_dropped(db, from);
            self.doc_dropped(db, to);
            // The change streams hear of it: a `drop` for a replaced target, a `rename` for
            // the source (whose later entries carry the new name).
            let mut feeds = Vec::new();
            if let Some(f) = dropped.first().map(|cs| cs.meta.changes.clone()) {
                if f.push(db, to, Op::Drop, || Payload::None) {
                    feeds.push(f);
                }
            }
            if let Some(f) = moved {
                if f.push(db, from, Op::Rename, || Payload::To(to.to_string())) {
                    feeds.push(f);
                }
            }
            (dropped, feeds)
        };
        for f in feeds {
            self.drain_changes(&f);
        }
        drop(dropped);
        Ok(())
    }

    /// `DOC.COLLECTIONS`: the names in database `db`, sorted.
    pub fn collection_names(&self, db: usize) -> Vec<String> {
        let _catalog = self.catalog_read();
        let mut names: Vec<String> = self.lock(0).dbs[db].collections.keys().cloned().collect();
        names.sort_unstable();
        names
    }

    /// `INFO documents`: totals over every collection of every database.
    pub fn document_totals(&self) -> Totals {
        let _catalog = self.catalog_read();
        let mut t = Totals::default();
        self.for_each_shard(|s| {
            for db in &s.dbs {
                for cs in db.collections.values() {
                    t.add(cs);
                }
            }
        });
        t.collections = self.lock(0).dbs.iter().map(|d| d.collections.len()).sum();
        t
    }

    /// Each collection's totals (as `DOC.STATS` sums them) as (db, name, totals), by
    /// database then name: the admin port's per-collection figures.
    pub fn collection_totals(&self) -> Vec<(usize, String, Totals)> {
        let _catalog = self.catalog_read();
        let mut out: std::collections::BTreeMap<(usize, String), Totals> = Default::default();
        self.for_each_shard(|s| {
            for (d, db) in s.dbs.iter().enumerate() {
                for (name, cs) in &db.collections {
                    out.entry((d, name.clone())).or_default().add(cs);
                }
            }
        });
        out.into_iter()
            .map(|((db, name), mut t)| {
                t.collections = 1;
                (db, name, t)
            })
            .collect()
    }
}

impl Coll<'_> {
    fn lock_all(&self) -> super::Guards<'_> {
        self.store.lock_many(&self.all_shards())
    }

    /// `DOC.STATS`: `None` when the collection does not exist.
    pub fn stats(&self) -> Option<CollectionInfo> {
        let mut totals = Totals::default();
        let n = self.store.shard_count();
        for s in 0..n {
            let g = self.store.lock(s);
            let cs = self.part(&g)?;
            totals.add(cs);
            if s + 1 == n {
                let mut d = totals.stats(&format!("{}.{}", self.db, self.name), cs);
                if let Some(t) = cs.meta.changes.target() {
                    let mut c = bson::doc! {
                        "stream": String::from_utf8_lossy(&t.stream).into_owned(),
                    };
                    if let Some((n, approx)) = t.maxlen {
                        c.insert("maxlen", n.min(i64::MAX as u64) as i64);
                        c.insert("approx", approx);
                    }
                    c.insert(
                        "lost",
                        cs.meta
                            .changes
                            .lost
                            .load(std::sync::atomic::Ordering::Relaxed)
                            as i64,
                    );
                    d.insert("changes", c);
                }
                return Some(d);
            }
        }
        None
    }

    /// `DOC.INDEXES`: the index specs as documents (`_id_` first), with
    /// `expireAfterSeconds` as in force now; `None` when the collection does not exist.
    pub fn index_docs(&self) -> Option<Vec<Document>> {
        let g = self.store.lock(0);
        let cs = self.part(&g)?;
        let mut out = vec![bson::doc! {"name": "_id_", "key": {"_id": 1}, "unique": true}];
        out.extend(cs.index_specs().into_iter().map(|s| {
            let mut d = s.to_doc();
            if let Some((_, t)) = cs.ttl.iter().find(|(n, _)| *n == s.name) {
                d.insert("expireAfterSeconds", t.expire_after_secs);
            }
            d
        }));
        Some(out)
    }

    /// Creates (and builds) an index from a validated spec and returns its name: the one
    /// way an ordered index comes to exist, for `DOC.CREATEINDEX` and TTL indexes (a TTL
    /// index is an ordered index whose spec has `expire_after`, so it also serves queries).
    pub fn create_index(&self, spec: IndexSpec) -> DocResult<String> {
        // The `_id` index always exists.
        if spec.fields.len() == 1
            && spec.fields[0].name == "_id"
            && !spec.fields[0].descending
            && (spec.unique || spec.name == "_id_" || spec.name == "_id_1")
        {
            return Ok("_id_".into());
        }
        if spec.name == "_id_" {
            return Err("ERR The index name '_id_' is reserved for the _id index".into());
        }
        self.ensure_exists();
        let spec = Arc::new(spec);
        // Attach the (not yet ready) index to every shard at once: from here on every write
        // maintains it, and the build below only has to cover the documents already there.
        {
            let mut guards = self.lock_all();
            let Some(first) = guards.first().and_then(|(_, g)| self.part(g)) else {
                return Err("ERR collection dropped during index creation".into());
            };
            for e in first.index_specs() {
                if e.name == spec.name {
                    if e.same_key(&spec.fields)
                        && e.unique == spec.unique
                        && e.expire_after == spec.expire_after
                    {
                        return Ok(spec.name.clone());
                    }
                    return Err(format!(
                        "ERR An existing index has the same name as the requested index but a different key or options: {}",
                        spec.name
                    ));
                }
                if e.same_key(&spec.fields) {
                    return Err(format!(
                        "ERR Index already exists with a different name: {}",
                        e.name
                    ));
                }
            }
            if first.index_specs().len() >= MAX_INDEXES {
                return Err("ERR add index fails, too many indexes (the limit is 64)".into());
            }
            if first.is_capped() && spec.expire_after.is_some() {
                return Err(TTL_ON_CAPPED.into());
            }
            let now = crate::util::clock::now_ms();
            // A unique index's parts share one key table.
            let first_part = OrderedIndex::new(spec.clone());
            let unique = first_part.unique.clone();
            let mut first_part = Some(first_part);
            for (_, g) in guards.iter_mut() {
                if let Some(cs) = self.part_mut(g) {
                    let part = first_part
                        .take()
                        .unwrap_or_else(|| OrderedIndex::part_of(spec.clone(), unique.clone()));
                    cs.indexes.push(IndexShard::Ordered(part));
                    // A TTL index: its wheel expires documents from now on, while the ordered
                    // part builds.
                    if let Some(secs) = spec.expire_after {
                        cs.set_ttl_index(&spec.name, &spec.fields[0].name, secs, now);
                    }
                }
            }
        }
        if let Err(e) = self.build(&spec) {
            self.drop_by_spec(&spec);
            return Err(e);
        }
        Ok(spec.name.clone())
    }

    /// Indexes the documents already stored, one shard at a time and `BUILD_BATCH` slots per
    /// lock hold, then marks the index ready under every shard's lock. A unique key held
    /// twice (found as the keys are claimed in the shared table) fails the build.
    fn build(&self, spec: &Arc<IndexSpec>) -> DocResult<()> {
        let aborted = || "ERR index build aborted: the index or its collection was dropped";
        for s in 0..self.store.shard_count() {
            let mut from = 0u32;
            loop {
                let mut g = self.store.lock(s);
                let Some(cs) = self.part_mut(&mut g) else {
                    return Err(aborted().into());
                };
                let end = cs.slot_count().min(from.saturating_add(BUILD_BATCH));
                match cs.build_index_batch(spec, from, end) {
                    Ok(()) => {}
                    Err(BuildError::Keys(e)) => return Err(with_code(e)),
                    Err(BuildError::Duplicate(doc)) => return Err(self.dup_key(spec, &doc)),
                    Err(BuildError::Dropped) => return Err(aborted().into()),
                }
                let total = cs.slot_count();
                drop(g);
                if end >= total {
                    break;
                }
                from = end;
            }
        }
        let mut guards = self.lock_all();
        for (_, g) in guards.iter_mut() {
            let Some(cs) = self.part_mut(g) else {
                return Err(aborted().into());
            };
            match cs
                .indexes
                .iter_mut()
                .filter_map(IndexShard::as_ordered_mut)
                .find(|ix| Arc::ptr_eq(&ix.spec, spec))
            {
                Some(ix) => ix.ready = true,
                None => return Err(aborted().into()),
            }
            // The built index counts in `used_memory` from now on.
            cs.sync_memory();
        }
        Ok(())
    }

    /// Removes the index of `spec` from every shard (a failed build), freed outside the
    /// locks.
    fn drop_by_spec(&self, spec: &Arc<IndexSpec>) {
        let mut dropped = Vec::new();
        {
            let mut guards = self.lock_all();
            for (_, g) in guards.iter_mut() {
                if let Some(cs) = self.part_mut(g) {
                    if let Some(p) = cs.indexes.iter().position(
                        |ix| matches!(ix, IndexShard::Ordered(o) if Arc::ptr_eq(&o.spec, spec)),
                    ) {
                        dropped.push(cs.indexes.remove(p));
                        if spec.expire_after.is_some() {
                            cs.drop_ttl_index(&spec.name);
                        }
                        cs.sync_memory();
                    }
                }
            }
        }
        drop(dropped);
    }

    /// `DOC.DROPINDEX`: drops the index `name` (`*`: every secondary index) from every shard;
    /// dropping a TTL index stops expiry through it.
    pub fn drop_index(&self, name: &str) -> DocResult<()> {
        if name == "_id_" {
            return Err("ERR cannot drop _id index".into());
        }
        let mut dropped = Vec::new();
        {
            let mut guards = self.lock_all();
            let Some(first) = guards.first().and_then(|(_, g)| self.part(g)) else {
                return Err(format!("ERR ns not found {}.{}", self.db, self.name));
            };
            if name != "*" && first.ordered_index(name).is_none() {
                return Err(format!("ERR index not found with name [{name}]"));
            }
            for (_, g) in guards.iter_mut() {
                let Some(cs) = self.part_mut(g) else { continue };
                let (gone, kept): (Vec<IndexShard>, Vec<IndexShard>) = std::mem::take(
                    &mut cs.indexes,
                )
                .into_iter()
                .partition(
                    |ix| matches!(ix, IndexShard::Ordered(o) if name == "*" || o.spec.name == name),
                );
                cs.indexes = kept;
                for ix in gone.iter().filter_map(IndexShard::as_ordered) {
                    cs.drop_ttl_index(&ix.spec.name);
                }
                cs.sync_memory();
                dropped.extend(gone);
            }
        }
        drop(dropped);
        Ok(())
    }

    /// `DOC.EXPIREINDEX`: creates the TTL index `<field>_1`, or changes its
    /// `expireAfterSeconds` (MongoDB's `collMod`) under every shard's lock so all parts
    /// agree. Returns the index name.
    pub fn expire_index(&self, field: &str, secs: i64) -> DocResult<String> {
        self.ensure_exists();
        let name = format!("{field}_1");
        // A new TTL index is an ordered index too (it serves queries on its field): created
        // through the one index path, which also sets up the wheels.
        let exists = {
            let g = self.store.lock(0);
            self.part(&g).is_some_and(|cs| {
                cs.ordered_index(&name).is_some() || cs.ttl.iter().any(|(n, _)| *n == name)
            })
        };
        if !exists {
            let fields = IndexSpec::parse_keys(&bson::doc! {field: 1}).map_err(with_code)?;
            return self.create_index(IndexSpec {
                name,
                fields,
                unique: false,
                expire_after: Some(secs),
            });
        }
        let now = crate::util::clock::now_ms();
        let mut guards = self.lock_all();
        if guards
            .first()
            .and_then(|(_, g)| self.part(g))
            .is_some_and(CollectionShard::is_capped)
        {
            return Err(TTL_ON_CAPPED.into());
        }
        for (_, g) in guards.iter_mut() {
            if let Some(cs) = self.part_mut(g) {
                cs.set_ttl_index(&name, field, secs, now);
                cs.sync_memory();
            }
        }
        Ok(name)
    }
}
