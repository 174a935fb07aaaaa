//! A collection across the shards: the one API through which every document read and write
//! happens (`commands/documents` only parses and formats).
//!
//! Each shard holds its part of every collection (`documents::collection::CollectionShard`,
//! documents placed by hash of `_id`). This module owns what spans the parts: which shards a
//! command locks and in which order, creating a collection on first write, the checks made
//! before anything changes (document validity, index keys, `_id` and unique-key duplicates,
//! capped bounds), the purge of expired documents a write meets, capped trimming, and the
//! report of every change to the [`DocHooks`] the server installs (`doc.expired` events
//! today; the journal and client tracking hook there too), together with its queueing on the
//! collection's change feed, appended to its stream when the command is done with the
//! collection (`changes.rs`).
//!
//! **Locks.** A command holds the catalog shared (`Store::catalog_read`) for its whole run,
//! so a rename or drop is one step for it, then locks only the shards it touches, in
//! ascending order: one shard for a single document by `_id` (insert, upsert, update,
//! delete, touch, find) — also with TTL, secondary and unique indexes, whose uniqueness is
//! checked in a table shared by the shards' parts (`documents::unique`) — and every shard for
//! a filter without `_id` equality that must be atomic (update, upsert) or for a write to a
//! capped collection (its bound and insertion order are collection-wide). Metadata (indexes,
//! capped bounds) is read from the locked parts themselves, never from another shard.

mod changes;
mod ddl;
mod moved;
mod read;
mod write;

pub use ddl::CollectionInfo;
pub use moved::{Built, Definition, Image, Stamp, BUSY};
pub use read::{FindQuery, Found};
pub use write::UpdateOutcome;

use crate::documents::changes::ChangeFeed;
use crate::documents::collection::{CollectionMeta, CollectionShard};
use crate::documents::index::IndexSpec;
use crate::documents::query::Node;
use crate::documents::{codec, keys};
use crate::store::{ShardData, Store};
use bson::{Bson, Document, RawDocument};
use parking_lot::RwLockReadGuard;

/// A document command's failure: the whole error text, code included (`ERR ...`,
/// `DUPKEY ...`).
pub type DocResult<T> = Result<T, String>;

/// One change to one document, reported in the critical section that makes it.
#[derive(Debug, Clone, Copy)]
pub enum Change<'a> {
    Insert(&'a RawDocument),
    /// Changed by an update or a touch; the document as it is now.
    Update(&'a RawDocument),
    /// Replaced whole by a replacement-style update; the document as it is now.
    Replace(&'a RawDocument),
    /// Deleted by a command, or trimmed from a capped collection.
    Delete(&'a RawDocument),
    /// Removed because a TTL index says it is due (the monitor, or a write that met it).
    Expire(&'a Bson),
}

/// What the server wants to hear of document changes. Called under the shard lock of the
/// change; the implementation takes only its own leaf locks.
pub trait DocHooks: Send + Sync {
    fn changed(&self, db: usize, collection: &str, change: Change<'_>);

    /// A whole collection went away (DOC.DROP; both names of DOC.RENAME), under the catalog's
    /// write lock.
    fn dropped(&self, _db: usize, _collection: &str) {}

    /// A collection's change feed appended entries to the stream `key` (and trimmed it when
    /// `trimmed`), under the stream's shard lock, as an `XADD` would have.
    fn appended(&self, _db: usize, _key: &[u8], _trimmed: bool) {}
}

/// Locked shards, ascending, as (shard, guard).
pub(crate) type Guards<'a> = crate::store::ShardGuards<'a>;

/// Codec and document-layer errors come without a code; everything else has one.
pub fn with_code(e: String) -> String {
    if e.starts_with("ERR ") || e.starts_with("DUPKEY ") {
        e
    } else {
        format!("ERR {e}")
    }
}

/// MongoDB's collection name rules: not empty, no `$`, no NUL.
pub fn check_name(name: &str) -> DocResult<()> {
    // A byte scan: `str::contains` with a set of chars decodes every character.
    if name.is_empty() || name.bytes().any(|b| b == b'$' || b == 0) {
        return Err(format!("ERR Invalid collection name: '{name}'"));
    }
    Ok(())
}

/// One collection of one database, for the length of a command.
pub struct Coll<'a> {
    store: &'a Store,
    pub db: usize,
    pub name: &'a str,
    /// The change feed this command queued changes on, appended to the stream when the
    /// command is done with the collection (see `changes.rs`).
    fed: std::cell::RefCell<Option<std::sync::Arc<ChangeFeed>>>,
    _catalog: RwLockReadGuard<'a, ()>,
}

impl Drop for Coll<'_> {
    /// Every write has released its shard locks by now (they live inside the write's
    /// method), and the command has not replied yet: its changes reach the stream first.
    fn drop(&mut self) {
        if let Some(feed) = self.fed.get_mut().take() {
            self.store.drain_changes(&feed);
        }
    }
}

impl Store {
    /// The collection `name` of database `db`, holding the catalog shared until dropped.
    pub fn collection<'a>(&'a self, db: usize, name: &'a str) -> Coll<'a> {
        Coll {
            store: self,
            db,
            name,
            fed: std::cell::RefCell::new(None),
            _catalog: self.catalog_read(),
        }
    }

    /// Installs the receiver of every document change (once, at start).
    pub fn set_doc_hooks(&self, hooks: std::sync::Arc<dyn DocHooks>) {
        let _ = self.doc_hooks.set(hooks);
    }

    pub(crate) fn doc_changed(&self, db: usize, collection: &str, change: Change<'_>) {
        if let Some(h) = self.doc_hooks.get() {
            h.changed(db, collection, change);
        }
    }

    pub(crate) fn doc_dropped(&self, db: usize, collection: &str) {
        if let Some(h) = self.doc_hooks.get() {
            h.dropped(db, collection);
        }
    }
}

impl<'a> Coll<'a> {
    /// The shards a filter can match in: the `_id`'s one for an `_id` equality, else all.
    pub fn shards_for(&self, filter: &Node) -> Vec<usize> {
        match filter.id_equality() {
            Some(id) => vec![self.store.shard_of(&keys::encode(id))],
            None => self.all_shards(),
        }
    }

    fn all_shards(&self) -> Vec<usize> {
        (0..self.store.shard_count()).collect()
    }

    /// This collection's part in a locked shard.
    fn part<'g>(&self, g: &'g ShardData) -> Option<&'g CollectionShard> {
        g.dbs[self.db].collections.get(self.name)
    }

    fn part_mut<'g>(&self, g: &'g mut ShardData) -> Option<&'g mut CollectionShard> {
        g.dbs[self.db].collections.get_mut(self.name)
    }

    /// Locks `shards` for a write. With `create`, a missing collection is created first (in
    /// every shard at once). When `wide` says so of the collection (a capped one, for a
    /// write that adds documents), every shard is locked instead. `None` when the
    /// collection does not exist and may not be created.
    fn lock_for_write(
        &self,
        shards: &[usize],
        create: bool,
        wide: impl Fn(&CollectionShard) -> bool,
    ) -> Option<Guards<'a>> {
        let mut all = false;
        loop {
            let guards = if all {
                self.store.lock_many(&self.all_shards())
            } else {
                self.store.lock_many(shards)
            };
            match guards.first().and_then(|(_, g)| self.part(g)) {
                None if create => {
                    drop(guards);
                    self.ensure_exists();
                }
                None => return None,
                Some(cs) if !all && guards.len() < self.store.shard_count() && wide(cs) => {
                    drop(guards);
                    all = true;
                }
                Some(_) => return Some(guards),
            }
        }
    }

    /// Creates the collection (empty metadata) in every shard if it does not exist: under
    /// every shard's lock, so all parts agree.
    fn ensure_exists(&self) {
        let mut guards = self.store.lock_many(&self.all_shards());
        if guards.first().and_then(|(_, g)| self.part(g)).is_some() {
            return;
        }
        let meta = CollectionMeta::default();
        for (_, g) in guards.iter_mut() {
            let part = g.new_collection(meta.clone());
            g.dbs[self.db]
                .collections
                .entry(self.name.to_string())
                .or_insert(part);
        }
    }

    /// Removes the document whose `_id` KeyString is `key` from `cs` if a TTL index says it
    /// is due (under strict reads it is already gone for every read and write), reporting
    /// the expiry. Every expiry a write meets goes through here.
    fn purge_if_due(&self, cs: &mut CollectionShard, key: &[u8]) {
        if let Some(id) = cs.expire_if_due(key) {
            self.report(&cs.meta.changes, Change::Expire(&id));
        }
    }

    /// Reports a change this command made to the hooks and queues it on the collection's
    /// change feed (`feed`, read from the locked part), under the lock of the change.
    fn report(&self, feed: &std::sync::Arc<ChangeFeed>, change: Change<'_>) {
        self.store.doc_changed(self.db, self.name, change);
        if self.store.queue_change(feed, self.db, self.name, change) {
            let mut fed = self.fed.borrow_mut();
            if fed.is_none() {
                *fed = Some(feed.clone());
            }
        }
    }

    /// The `_id` duplicate-key error, as MongoDB words it.
    fn dup_id(&self, id: &Bson) -> String {
        format!(
            "DUPKEY E11000 duplicate key error collection: {}.{} index: _id_ dup key: {}",
            self.db,
            self.name,
            codec::dup_key_text(id)
        )
    }

    /// A secondary unique index's duplicate-key error for `doc`.
    fn dup_key(&self, spec: &IndexSpec, doc: &RawDocument) -> String {
        format!(
            "DUPKEY E11000 duplicate key error collection: {}.{} index: {} dup key: {}",
            self.db,
            self.name,
            spec.name,
            spec.dup_key_text(&spec.project(doc))
        )
    }
}

/// Every index of a collection must be able to key a document before it is stored (no
/// parallel arrays, not too many keys).
fn check_keyable(specs: &[std::sync::Arc<IndexSpec>], doc: &RawDocument) -> DocResult<()> {
    check_keyable_by(specs.iter().map(|s| &**s), doc)
}

/// [`check_keyable`] against the indexes of a locked part, read in place (no list of its
/// specs built per insert).
fn check_keyable_in(cs: &CollectionShard, doc: &RawDocument) -> DocResult<()> {
    check_keyable_by(
        cs.indexes
            .iter()
            .filter_map(|ix| ix.as_ordered())
            .map(|ix| &*ix.spec),
        doc,
    )
}

fn check_keyable_by<'s>(
    specs: impl Iterator<Item = &'s IndexSpec>,
    doc: &RawDocument,
) -> DocResult<()> {
    for spec in specs {
        if !scalar_keys(spec, doc) {
            spec.keys_of(&spec.project(doc)).map_err(with_code)?;
        }
    }
    Ok(())
}

/// Whether every key field of `spec` reads a scalar (or nothing) in `doc`: then the document
/// has exactly one key, which cannot fail (only arrays make parallel arrays or too many
/// keys), and the general keying — a decode of the fields and every key built — is not
/// needed to know it. A dotted path counts when its top-level value is not an array or a
/// document (it resolves to nothing).
fn scalar_keys(spec: &IndexSpec, doc: &RawDocument) -> bool {
    spec.fields.iter().all(|f| {
        let Some(top) = f.path.first() else {
            return false;
        };
        // Read by byte comparison of the names: `RawDocument::get` checks every name it
        // passes as UTF-8 (the document was checked when it was encoded).
        match codec::top_level_value(doc.as_bytes(), top) {
            None => true,
            Some((0x04, _)) => false,
            Some((0x03, _)) => f.path.len() == 1,
            Some(_) => true,
        }
    })
}

/// A document ready to store: validated, encoded, with its `_id`, KeyString and shard.
pub(crate) struct Prepared {
    id: Bson,
    key: Vec<u8>,
    shard: usize,
    raw: bson::RawDocumentBuf,
}

impl Store {
    /// Gives `doc` its `_id` (a new ObjectId, first) when it has none, validates and encodes
    /// it.
    fn prepare(&self, doc: Document, max_size: usize) -> DocResult<Prepared> {
        codec::validate_stored(&doc).map_err(with_code)?;
        let (id, raw) = match doc.get("_id") {
            Some(id) => (
                id.clone(),
                codec::to_raw(&doc, max_size).map_err(with_code)?,
            ),
            None => {
                let oid = bson::oid::ObjectId::new();
                let raw = codec::to_raw_with_id(&doc, oid, max_size).map_err(with_code)?;
                (Bson::ObjectId(oid), raw)
            }
        };
        Ok(self.prepared(id, raw))
    }

    /// A document to insert in either form, ready for its shard.
    fn prepare_new(&self, doc: codec::NewDoc, max_size: usize) -> DocResult<Prepared> {
        match doc {
            codec::NewDoc::Decoded(doc) => self.prepare(doc, max_size),
            codec::NewDoc::Encoded { id, raw } => {
                codec::check_size(raw.as_bytes().len(), max_size).map_err(with_code)?;
                Ok(self.prepared(id, raw))
            }
        }
    }

    fn prepared(&self, id: Bson, raw: bson::RawDocumentBuf) -> Prepared {
        let key = keys::encode(&id);
        Prepared {
            shard: self.shard_of(&key),
            id,
            key,
            raw,
        }
    }
}
