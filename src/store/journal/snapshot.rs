//! A point-in-time snapshot of the key space without `fork()`, for BGREWRITEAOF and
//! SAVE/BGSAVE: the key space is copied shard by shard in bounded chunks (a few key-space
//! segments per lock hold), and a key changed before its segment was copied gives its value
//! *as it was* to the snapshot first (copy-on-write, one key at a time).
//!
//! **The cut.** [`Snapshot::install`] is called by the caller holding the exec gate
//! exclusively and every shard's lock, so no command is half-way: every change before it is
//! in the data, every change after it goes through a write path that calls
//! `before_change` first (`Keyspace::set`, `update`, `set_deadline`, `remove`, through the
//! key space's `snapshot_hook`). That costs one atomic load while no snapshot runs.
//!
//! **What a client waits for.** A chunk holds its shard's lock while it *clones* the entries
//! of up to [`CHUNK_EFFORT`] units of work (a key, or one element per element of a value in
//! a table, one node of a list), tens of microseconds; all encoding is done after the lock
//! is released, and the copying thread rests between chunks (`journal::pacing`) so that the
//! scheduler seldom preempts it while it holds a lock. A write to a key whose segment is not copied yet clones that one value
//! before changing it (its first change only). A single value with millions of elements
//! is cloned whole, under its shard's lock, once.
//!
//! **Documents** are not part of the cut: their journal records are idempotent (the whole
//! document by `_id`, a delete by `_id`), so a copy taken at any moment after the cut,
//! followed by the journal from the cut on, ends in the same state; they are copied in
//! chunks of [`DOC_CHUNK`] under the catalog's shared lock and the shard's lock.

use crate::store::keyspace::{self, segment_of, SEGMENTS};
use crate::store::{Store, Value};
use hashbrown::HashMap;
use parking_lot::{Mutex, RwLock};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// Work units (see [`Value::free_effort`]) cloned per lock hold: a few tens of
/// microseconds of a client's wait at most, when the copying thread is not preempted
/// meanwhile (the copy rests between chunks so that it rarely is: `journal::pacing`).
pub const CHUNK_EFFORT: usize = 256;
/// Documents copied per lock hold.
pub const DOC_CHUNK: u32 = 1024;

static COW: RwLock<Option<Arc<Cow>>> = parking_lot::const_rwlock(None);
/// Bumped by every change of the collection catalog (under its exclusive lock), so a copy
/// of the documents learns that a collection was created, dropped or renamed meanwhile.
static CATALOG_GEN: AtomicU64 = AtomicU64::new(0);

/// A key's value as the snapshot saw it: the value and its deadline, or `None` for a key
/// that did not exist at the cut.
type Saved = Option<(Value, Option<i64>)>;
/// (segment, database at the cut) → key → its value at the cut.
type SavedMap = HashMap<(usize, usize), HashMap<Vec<u8>, Saved>>;

struct Cow {
    /// The snapshot's shards, by the address of their counters (what the key space's hook
    /// names them by): another store's changes (tests) are not its business.
    shards: Vec<usize>,
    /// Per shard: segments below this are copied.
    done: Vec<AtomicUsize>,
    /// Per shard: (segment, database at the cut) → keys changed since the cut before their
    /// segment was copied, with their value at the cut.
    saved: Vec<Mutex<SavedMap>>,
    /// Database number now → database number at the cut (SWAPDB during a snapshot).
    perm: Vec<AtomicUsize>,
    /// Estimated bytes cloned by writes (Redis's `*_last_cow_size`).
    cow_bytes: AtomicUsize,
    /// The longest a chunk held its shard's lock, in microseconds.
    max_hold_us: AtomicU64,
}

/// Called by the key space under the shard lock before it changes `key` (hash `hash`) of
/// database `db`; `cur` is its value and deadline now (`None`: absent).
#[cold]
fn before_change(
    counters: usize,
    db: usize,
    hash: u64,
    key: &[u8],
    cur: Option<(&Value, Option<i64>)>,
) {
    let g = COW.read();
    let Some(c) = g.as_ref() else { return };
    let Some(shard) = c.shards.iter().position(|&s| s == counters) else {
        return;
    };
    let seg = segment_of(hash);
    if seg < c.done[shard].load(Ordering::Acquire) {
        return;
    }
    let sdb = c.perm.get(db).map_or(db, |p| p.load(Ordering::Relaxed));
    let mut m = c.saved[shard].lock();
    let keys = m.entry((seg, sdb)).or_default();
    if keys.contains_key(key) {
        return;
    }
    let v = cur.map(|(v, d)| (v.clone(), d));
    if let Some((v, _)) = &v {
        c.cow_bytes
            .fetch_add(key.len() + 16 * v.free_effort(), Ordering::Relaxed);
    }
    keys.insert(key.to_vec(), v);
}

/// SWAPDB under every shard's lock: the snapshot keeps naming databases as at the cut.
pub fn swapped(store: &Store, a: usize, b: usize) {
    let g = COW.read();
    if let Some(c) = g.as_ref().filter(|c| c.shards == shard_ids(store)) {
        if let (Some(pa), Some(pb)) = (c.perm.get(a), c.perm.get(b)) {
            let x = pa.load(Ordering::Relaxed);
            pa.store(pb.load(Ordering::Relaxed), Ordering::Relaxed);
            pb.store(x, Ordering::Relaxed);
        }
    }
}

/// A store's shards as the key space's hook names them.
fn shard_ids(store: &Store) -> Vec<usize> {
    store
        .counters()
        .iter()
        .map(|c| Arc::as_ptr(c) as usize)
        .collect()
}

/// The collection catalog changed (under its exclusive lock).
pub fn catalog_changed() {
    CATALOG_GEN.fetch_add(1, Ordering::AcqRel);
}

pub fn catalog_gen() -> u64 {
    CATALOG_GEN.load(Ordering::Acquire)
}

/// One key as it was at the cut.
pub struct Item {
    /// The database at the cut.
    pub db: usize,
    pub key: Vec<u8>,
    pub value: Value,
    /// Absolute Unix ms.
    pub deadline: Option<i64>,
}

/// A snapshot in progress; dropping it ends it.
pub struct Snapshot {
    cow: Arc<Cow>,
}

impl Snapshot {
    /// Starts a snapshot of `store`. The caller holds the exec gate exclusively and every
    /// shard's lock (this is the cut); `None` if one is already running.
    pub fn install(store: &Store) -> Option<Snapshot> {
        let mut g = COW.write();
        if g.is_some() {
            return None;
        }
        let shards = store.shard_count();
        let databases = store.databases();
        let cow = Arc::new(Cow {
            shards: shard_ids(store),
            done: (0..shards).map(|_| AtomicUsize::new(0)).collect(),
            saved: (0..shards).map(|_| Mutex::new(HashMap::new())).collect(),
            perm: (0..databases).map(AtomicUsize::new).collect(),
            cow_bytes: AtomicUsize::new(0),
            max_hold_us: AtomicU64::new(0),
        });
        *g = Some(cow.clone());
        keyspace::snapshot_hook(Some(before_change));
        Some(Snapshot { cow })
    }

    /// The number database `db` had at the cut (SWAPDB may have moved it since).
    pub fn db_at_cut(&self, db: usize) -> usize {
        self.cow
            .perm
            .get(db)
            .map_or(db, |p| p.load(Ordering::Relaxed))
    }

    /// Bytes cloned by writes so far.
    pub fn cow_bytes(&self) -> usize {
        self.cow.cow_bytes.load(Ordering::Relaxed)
    }

    /// The longest a chunk held its shard's lock so far, in microseconds.
    pub fn max_hold_us(&self) -> u64 {
        self.cow.max_hold_us.load(Ordering::Relaxed)
    }

    /// Copies the next chunk of shard `shard` into `out` (cleared first): whole segments,
    /// at least one, until [`CHUNK_EFFORT`] is reached. False once the shard is done.
    pub fn next_chunk(&self, store: &Store, shard: usize, out: &mut Vec<Item>) -> bool {
        self.next_chunk_where(store, shard, out, &|_, _| true)
    }

    /// [`next_chunk`](Self::next_chunk) keeping only the keys `keep(db at the cut, key)`
    /// accepts; the others are not cloned (an atomic slot migration's few slots).
    pub fn next_chunk_where(
        &self,
        store: &Store,
        shard: usize,
        out: &mut Vec<Item>,
        keep: &dyn Fn(usize, &[u8]) -> bool,
    ) -> bool {
        out.clear();
        let c = &self.cow;
        let mut g = store.lock(shard);
        let held = std::time::Instant::now();
        let mut seg = c.done[shard].load(Ordering::Acquire);
        if seg >= SEGMENTS {
            return false;
        }
        // Keys already due are copied too, as Redis's saves and rewrites keep them: a master
        // that loads them drops them (and tells its replicas, `rdb_file::Loaded::expired_keys`),
        // a replica keeps them until its master's DEL arrives.
        let now = i64::MIN;
        let mut effort = 0;
        let mut skipped = 0;
        while seg < SEGMENTS && effort < CHUNK_EFFORT {
            let mut saved = c.saved[shard].lock();
            for (d, db) in g.dbs.iter_mut().enumerate() {
                let sdb = c.perm[d].load(Ordering::Relaxed);
                let mut mine = saved.remove(&(seg, sdb)).unwrap_or_default();
                let ks = &db.keys;
                ks.scan_segment(seg, now, |e| {
                    if !keep(sdb, e.key()) {
                        // A key passed over costs its test: a walk that keeps few keys
                        // still ends its lock hold in bounded time.
                        skipped += 1;
                        return;
                    }
                    let item = match mine.remove(e.key()) {
                        Some(None) => None,
                        Some(Some((value, deadline))) => Some((value, deadline)),
                        None => {
                            effort += e.value.free_effort();
                            Some((e.value.clone(), ks.deadline_of(e)))
                        }
                    };
                    if let Some((value, deadline)) = item {
                        effort += 1;
                        out.push(Item {
                            db: sdb,
                            key: e.key().to_vec(),
                            value,
                            deadline,
                        });
                    }
                });
                // Keys that existed at the cut and were deleted since.
                for (key, v) in mine {
                    if !keep(sdb, &key) {
                        continue;
                    }
                    if let Some((value, deadline)) = v {
                        out.push(Item {
                            db: sdb,
                            key,
                            value,
                            deadline,
                        });
                    }
                }
            }
            effort += skipped / 16;
            skipped = 0;
            seg += 1;
            // Visiting a segment costs a little even when it is empty, so an empty or
            // sparse shard is not walked whole under one hold either.
            effort += 1;
            c.done[shard].store(seg, Ordering::Release);
        }
        drop(g);
        c.max_hold_us
            .fetch_max(held.elapsed().as_micros() as u64, Ordering::Relaxed);
        true
    }
}

impl Drop for Snapshot {
    fn drop(&mut self) {
        let mut g = COW.write();
        keyspace::snapshot_hook(None);
        *g = None;
    }
}

/// A collection's definition, to re-create it.
pub struct CollDef {
    pub db: usize,
    pub name: String,
    /// (max bytes, max documents).
    pub capped: Option<(u64, Option<u64>)>,
    /// Where its changes go.
    pub changes: Option<crate::documents::changes::ChangesSpec>,
    /// Index specs as `DOC.INDEXES` shows them (without `_id_`).
    pub indexes: Vec<bson::Document>,
}

impl CollDef {
    /// The definition of the collection whose part (any shard's: they agree) is `cs`.
    pub fn of(
        db: usize,
        name: &str,
        cs: &crate::documents::collection::CollectionShard,
    ) -> CollDef {
        let indexes = cs
            .index_specs()
            .into_iter()
            .map(|s| {
                let mut doc = s.to_doc();
                if let Some((_, t)) = cs.ttl.iter().find(|(n, _)| *n == s.name) {
                    doc.insert("expireAfterSeconds", t.expire_after_secs);
                }
                doc
            })
            .collect();
        CollDef {
            db,
            name: name.to_string(),
            capped: cs.meta.capped.as_ref().map(|c| (c.max_size, c.max_docs)),
            changes: cs.meta.changes.target().map(|t| (*t).clone()),
            indexes,
        }
    }

    /// Appends the commands that re-create the collection without its documents: `DOC.CREATE`
    /// with its capped bounds and change stream, then a `DOC.CREATEINDEX` per index (with
    /// `EXPIREAFTER` for a TTL index). A rewrite's base, a full resynchronisation and a
    /// collection's MIGRATE payload all describe a collection with these records, followed by
    /// a `DOC.JOURNALPUT` per document.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let name = self.name.as_bytes();
        let mut argv: Vec<Vec<u8>> = vec![b"DOC.CREATE".to_vec(), name.to_vec()];
        if let Some((size, max)) = self.capped {
            argv.push(b"CAPPED".to_vec());
            argv.push(b"SIZE".to_vec());
            argv.push(size.to_string().into_bytes());
            if let Some(m) = max {
                argv.push(b"MAX".to_vec());
                argv.push(m.to_string().into_bytes());
            }
        }
        if let Some(ch) = &self.changes {
            argv.push(b"CHANGES".to_vec());
            argv.push(ch.stream.clone());
            if let Some((n, approx)) = &ch.maxlen {
                argv.push(b"MAXLEN".to_vec());
                argv.push(if *approx {
                    b"~".to_vec()
                } else {
                    b"=".to_vec()
                });
                argv.push(n.to_string().into_bytes());
            }
        }
        super::aof::encode_args(out, &argv);
        for ix in &self.indexes {
            let mut keys = Vec::new();
            if let Ok(k) = ix.get_document("key") {
                crate::documents::json::write_doc(k, &mut keys);
            }
            let mut argv: Vec<Vec<u8>> = vec![b"DOC.CREATEINDEX".to_vec(), name.to_vec(), keys];
            if ix.get_bool("unique").unwrap_or(false) {
                argv.push(b"UNIQUE".to_vec());
            }
            if let Ok(n) = ix.get_str("name") {
                argv.push(b"NAME".to_vec());
                argv.push(n.as_bytes().to_vec());
            }
            let secs = ix
                .get_i64("expireAfterSeconds")
                .ok()
                .or_else(|| ix.get_i32("expireAfterSeconds").ok().map(i64::from));
            if let Some(s) = secs {
                argv.push(b"EXPIREAFTER".to_vec());
                argv.push(s.to_string().into_bytes());
            }
            super::aof::encode_args(out, &argv);
        }
    }
}

/// Every collection with its options and indexes, under the catalog's shared lock.
pub fn collections(store: &Store) -> Vec<CollDef> {
    let _cat = store.catalog_read();
    let g = store.lock(0);
    let mut out = Vec::new();
    for (db, d) in g.dbs.iter().enumerate() {
        let mut names: Vec<&String> = d.collections.keys().collect();
        names.sort();
        for name in names {
            out.push(CollDef::of(db, name, &d.collections[name]));
        }
    }
    out
}

/// Copies up to [`DOC_CHUNK`] documents of one shard's part of a collection, from slot
/// `from`, as raw BSON; the next slot to copy, `None` when done. `Err(())` when the catalog
/// changed since `gen` (the copy starts over).
#[allow(clippy::result_unit_err)]
pub fn copy_docs(
    store: &Store,
    gen: u64,
    db: usize,
    name: &str,
    shard: usize,
    from: u32,
    out: &mut Vec<Vec<u8>>,
) -> Result<Option<u32>, ()> {
    out.clear();
    let _cat = store.catalog_read();
    if catalog_gen() != gen {
        return Err(());
    }
    let g = store.lock(shard);
    let Some(cs) = g.dbs.get(db).and_then(|d| d.collections.get(name)) else {
        return Ok(None);
    };
    let end = cs.slot_count().min(from.saturating_add(DOC_CHUNK));
    for slot in from..end {
        if let Some(d) = cs.get(slot) {
            out.push(d.as_bytes().to_vec());
        }
    }
    Ok((end < cs.slot_count()).then_some(end))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::keyspace::Ttl;

    fn set(store: &Store, db: usize, key: &str, v: &str) {
        store.with_key(db, key.as_bytes(), |ks, h| {
            ks.set(h, key.as_bytes(), Value::string(v.as_bytes()), Ttl::Keep)
        });
    }

    fn copy(store: &Store, snap: &Snapshot, shards: std::ops::Range<usize>) -> Vec<String> {
        let mut out = Vec::new();
        let mut items = Vec::new();
        for shard in shards {
            while snap.next_chunk(store, shard, &mut items) {
                for it in &items {
                    let v = it.value.str_bytes().unwrap_or_default();
                    out.push(format!(
                        "{} {}={}",
                        it.db,
                        String::from_utf8_lossy(&it.key),
                        String::from_utf8_lossy(&v)
                    ));
                }
            }
        }
        out
    }

    /// What the copy gives is the data at the cut, whatever changed after it: overwritten,
    /// deleted, created keys and a SWAPDB, in shards copied before and after the changes.
    #[test]
    fn the_copy_is_the_data_at_the_cut() {
        let store = Store::new(2, 4);
        for i in 0..3000 {
            set(&store, 0, &format!("k{i}"), "old");
        }
        set(&store, 1, "in1", "one");
        set(&store, 2, "in2", "two");
        let snap = Snapshot::install(&store).expect("install");
        assert!(
            Snapshot::install(&store).is_none(),
            "one snapshot at a time"
        );
        // Shard 0 is copied first; the changes below reach both shards.
        let mut got = copy(&store, &snap, 0..1);
        for i in 0..3000 {
            let k = format!("k{i}");
            match i % 3 {
                0 => set(&store, 0, &k, "new"),
                1 => {
                    store.with_key(0, k.as_bytes(), |ks, h| ks.remove(h, k.as_bytes()));
                }
                _ => set(&store, 0, &format!("fresh{i}"), "x"),
            }
        }
        store.swap_dbs(1, 2);
        set(&store, 1, "in1", "changed");
        got.extend(copy(&store, &snap, 1..2));
        drop(snap);
        got.sort();
        let mut want: Vec<String> = (0..3000).map(|i| format!("0 k{i}=old")).collect();
        want.push("1 in1=one".into());
        want.push("2 in2=two".into());
        want.sort();
        assert_eq!(got, want);
        // The hook is off again: changes cost nothing and are not kept.
        set(&store, 0, "after", "x");
    }
}
