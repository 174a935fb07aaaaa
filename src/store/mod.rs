//! The data: N in-process shards, each owning its slice of every database's key space (and,
//! as they land, its slice of every collection and its timing wheels).
//!
//! A shard is a plain struct behind its own mutex. A command locks only the shards it touches,
//! never across an `.await`, and multi-shard commands take their locks in ascending shard order
//! so they cannot deadlock.

pub mod collections;
pub mod encoding;
pub mod eviction;
pub mod expiry;
pub mod hash;
pub mod journal;
pub mod keyspace;
pub mod list;
pub mod multi;
pub mod rdb;
pub mod rdb_file;
pub mod set;
pub mod slots;
pub mod stream;
pub mod ttl_monitor;
pub mod zset;

pub use hash::HashValue;
pub use keyspace::{
    Aggregate, Entry, KeyHooks, Keyspace, Removal, ShardCounters, Ttl, Value, WrongType,
};
pub use list::{End, ListValue};
pub use set::SetValue;
pub use stream::StreamValue;
pub use zset::ZSetValue;

use crate::documents::collection::{CollectionMeta, CollectionShard};
use hashbrown::HashMap;
use parking_lot::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::sync::Arc;

/// One database's slice of the data inside one shard.
#[derive(Debug)]
pub struct Db {
    pub keys: Keyspace,
    /// This shard's part of each collection, by name.
    pub collections: HashMap<String, CollectionShard>,
}

/// Everything one shard owns.
#[derive(Debug)]
pub struct ShardData {
    pub dbs: Vec<Db>,
    /// Byte estimate and key-space stats, readable without this shard's lock.
    pub counters: Arc<ShardCounters>,
    hasher: hashbrown::DefaultHashBuilder,
    /// Cluster mode: database 0 keeps the keys of each hash slot (`slots`).
    index_slots: bool,
}

impl ShardData {
    fn new(
        databases: usize,
        hasher: hashbrown::DefaultHashBuilder,
        index_slots: bool,
    ) -> ShardData {
        let counters = Arc::new(ShardCounters::default());
        let mut s = ShardData {
            dbs: Vec::with_capacity(databases),
            counters,
            hasher,
            index_slots,
        };
        s.dbs = (0..databases).map(|d| s.fresh_db(d)).collect();
        s
    }

    /// A new, empty part of a collection that counts its bytes into this shard's counters.
    pub fn new_collection(&self, meta: CollectionMeta) -> CollectionShard {
        CollectionShard::new(meta).counted_in(self.counters.documents.clone())
    }

    /// An empty database numbered `db` (FLUSHDB/FLUSHALL put these in place of the old ones):
    /// in cluster mode database 0 keeps its keys by hash slot.
    pub fn fresh_db(&self, db: usize) -> Db {
        let mut keys = Keyspace::new(db, self.counters.clone(), self.hasher);
        keys.index_slots(self.index_slots && db == 0);
        Db {
            keys,
            collections: HashMap::new(),
        }
    }
}

/// Locked shards, ascending, as (shard, guard); one shard's guard is held inline.
pub type ShardGuards<'a> = smallvec::SmallVec<[(usize, MutexGuard<'a, ShardData>); 1]>;

pub struct Store {
    shards: Vec<Mutex<ShardData>>,
    counters: Vec<Arc<ShardCounters>>,
    databases: usize,
    hasher: hashbrown::DefaultHashBuilder,
    /// Which collections exist under which names (see [`Store::catalog_read`]).
    catalog: RwLock<()>,
    /// Where every document change is reported (see `collections::DocHooks`).
    doc_hooks: std::sync::OnceLock<Arc<dyn collections::DocHooks>>,
}

/// The most keys [`Store::warm`] is given at once (a pipeline of 16, and some).
pub const WARM_MAX: usize = 32;

impl Store {
    /// A standalone server's store.
    pub fn new(shards: usize, databases: usize) -> Store {
        Store::with_slot_index(shards, databases, false)
    }

    /// `slot_index`: cluster mode (`cluster-enabled yes`, read once at start), in which
    /// database 0 of every shard keeps its keys by hash slot for CLUSTER COUNTKEYSINSLOT and
    /// GETKEYSINSLOT ([`count_keys_in_slot`], [`slot_keys`]); without it nothing is kept.
    pub fn with_slot_index(shards: usize, databases: usize, slot_index: bool) -> Store {
        let shards = shards.max(1);
        let hasher = hashbrown::DefaultHashBuilder::default();
        let data: Vec<ShardData> = (0..shards)
            .map(|_| ShardData::new(databases, hasher, slot_index))
            .collect();
        Store {
            counters: data.iter().map(|s| s.counters.clone()).collect(),
            shards: data.into_iter().map(Mutex::new).collect(),
            databases,
            hasher,
            catalog: RwLock::new(()),
            doc_hooks: std::sync::OnceLock::new(),
        }
    }

    pub fn shard_count(&self) -> usize {
        self.shards.len()
    }

    pub fn databases(&self) -> usize {
        self.databases
    }

    /// The 64-bit hash of a key (or a document `_id`'s bytes). Its bits 40..56 choose the
    /// shard, bits 20..30 the key space segment, and hashbrown uses the low and top bits.
    pub fn hash(&self, key: &[u8]) -> u64 {
        keyspace::hash_key(&self.hasher, key)
    }

    pub fn shard_of_hash(&self, hash: u64) -> usize {
        (((hash >> 40) & 0xffff) % self.shards.len() as u64) as usize
    }

    /// The shard that owns `key` (KV keys) or a document `_id`'s hash.
    pub fn shard_of(&self, key: &[u8]) -> usize {
        self.shard_of_hash(self.hash(key))
    }

    /// Per-shard counters (bytes, expired/evicted keys, hits/misses), lock-free.
    pub fn counters(&self) -> &[Arc<ShardCounters>] {
        &self.counters
    }

    /// Estimated bytes held by all key spaces and collections.
    pub fn used_bytes(&self) -> usize {
        use std::sync::atomic::Ordering::Relaxed;
        self.counters
            .iter()
            .map(|c| c.used.load(Relaxed) + c.documents.load(Relaxed))
            .sum()
    }

    /// Estimated bytes held by collections alone.
    pub fn document_bytes(&self) -> usize {
        self.counters
            .iter()
            .map(|c| c.documents.load(std::sync::atomic::Ordering::Relaxed))
            .sum()
    }

    /// The collection catalog, shared: every `DOC.*` command that reaches a collection by
    /// name holds it for its whole run, so it sees each collection under one name in every
    /// shard even though it locks the shards one at a time. Taken before any shard lock.
    pub fn catalog_read(&self) -> RwLockReadGuard<'_, ()> {
        self.catalog.read()
    }

    /// The collection catalog, exclusive: creating, dropping and renaming collections,
    /// FLUSHDB/FLUSHALL and SWAPDB. Taken before any shard lock.
    pub fn catalog_write(&self) -> RwLockWriteGuard<'_, ()> {
        let g = self.catalog.write();
        // Collection DDL is journaled in the order it took the catalog: no document
        // command runs meanwhile.
        journal::stamp();
        journal::snapshot::catalog_changed();
        g
    }

    /// Per database: (keys, keys with a deadline, average remaining TTL in ms), as INFO
    /// keyspace shows them.
    pub fn keyspace_info(&self) -> Vec<(usize, usize, i64)> {
        let now = crate::util::clock::now_ms();
        let mut acc = vec![(0usize, 0usize, 0i128); self.databases];
        self.for_each_shard(|s| {
            for (d, db) in s.dbs.iter().enumerate() {
                acc[d].0 += db.keys.len();
                acc[d].1 += db.keys.volatile();
                acc[d].2 += db.keys.ttl_sum(now);
            }
        });
        acc.into_iter()
            .map(|(k, v, sum)| {
                let avg = if v == 0 {
                    0
                } else {
                    (sum / v as i128).max(0) as i64
                };
                (k, v, avg)
            })
            .collect()
    }

    /// CONFIG RESETSTAT: zeroes expired/evicted keys and hits/misses.
    pub fn reset_stats(&self) {
        use std::sync::atomic::Ordering::Relaxed;
        // Under each shard's lock: these counters' writers hold it and add with a plain
        // load and store, which would put back a count reset in between.
        for (i, c) in self.counters.iter().enumerate() {
            let _shard = self.lock(i);
            c.expired.store(0, Relaxed);
            c.evicted.store(0, Relaxed);
            c.hits.store(0, Relaxed);
            c.misses.store(0, Relaxed);
        }
    }

    /// Whether database `db` holds `name` for a command of a half-moved cluster slot (a name
    /// it does not hold is asked of the target): among collections for a DOC.* command
    /// (`collection`), among keys for the others (separate namespaces: a name may be both).
    pub fn holds(&self, db: usize, collection: bool, name: &[u8]) -> bool {
        if collection {
            self.has_collection(db, &String::from_utf8_lossy(name))
        } else {
            self.exists(db, name)
        }
    }

    /// Whether `key` is in database `db` (an expired key is not).
    pub fn exists(&self, db: usize, key: &[u8]) -> bool {
        self.with_key(db, key, |ks, h| ks.contains(h, key))
    }

    /// Runs `f` on `key`'s key space in database `db`, under its shard's lock.
    pub fn with_key<R>(&self, db: usize, key: &[u8], f: impl FnOnce(&mut Keyspace, u64) -> R) -> R {
        let h = self.hash(key);
        let mut g = self.lock(self.shard_of_hash(h));
        f(&mut g.dbs[db].keys, h)
    }

    /// Brings into the cache what looking up `keys` in database `db` will read (table
    /// slots, entries, deadlines), ahead of the commands that will look them up: a batch's
    /// lookups back to back overlap their cache misses, where each command's own lookup waits
    /// for them one after the other. Each shard is locked once, with `try_lock` (a shard
    /// another thread holds is skipped, never waited for), and only after the keys' hashes
    /// are all computed: a lock is a full fence, which would wait for the previous key's
    /// misses. Changes nothing.
    pub fn warm(&self, db: usize, keys: &[&[u8]]) {
        let hashes: smallvec::SmallVec<[(usize, u64); WARM_MAX]> = keys
            .iter()
            .map(|k| {
                let h = self.hash(k);
                (self.shard_of_hash(h), h)
            })
            .collect();
        for (i, &(shard, _)) in hashes.iter().enumerate() {
            // Each shard once, at its first key.
            if hashes[..i].iter().any(|&(s, _)| s == shard) {
                continue;
            }
            let Some(g) = self.shards[shard].try_lock() else {
                continue;
            };
            let Some(keyspace) = g.dbs.get(db).map(|d| &d.keys) else {
                return;
            };
            for (&(s, h), key) in hashes[i..].iter().zip(&keys[i..]) {
                if s == shard {
                    keyspace.warm(h, key);
                }
            }
        }
    }

    pub fn lock(&self, shard: usize) -> MutexGuard<'_, ShardData> {
        self.shards[shard].lock()
    }

    /// Locks the given shards in ascending order (the one order every multi-shard command
    /// uses, so two of them cannot deadlock). Duplicates are locked once.
    pub fn lock_many(&self, shards: &[usize]) -> ShardGuards<'_> {
        // One shard (a document write by `_id`): no copy to sort, no allocation.
        if let [s] = *shards {
            return smallvec::smallvec![(s, self.shards[s].lock())];
        }
        self.lock_sorted(shards.to_vec())
    }

    /// [`Store::lock_many`] of shards the caller owns: sorted and deduplicated in place.
    pub fn lock_sorted(&self, mut ids: Vec<usize>) -> ShardGuards<'_> {
        ids.sort_unstable();
        ids.dedup();
        ids.into_iter()
            .map(|i| (i, self.shards[i].lock()))
            .collect()
    }

    /// Runs `f` on every shard in turn, one lock at a time.
    pub fn for_each_shard(&self, mut f: impl FnMut(&mut ShardData)) {
        for s in &self.shards {
            f(&mut s.lock());
        }
    }

    pub fn dbsize(&self, db: usize) -> usize {
        let mut n = 0;
        self.for_each_shard(|s| n += s.dbs[db].keys.len());
        n
    }

    /// Empties one database (or all) and returns what it held so the caller can free it
    /// outside the locks (FLUSHALL ASYNC frees in the background). Everything a `Db` holds
    /// goes with it.
    pub fn flush(&self, db: Option<usize>) -> Vec<Db> {
        // Collections disappear from every shard at once for DOC readers.
        let _catalog = self.catalog_write();
        let mut old = Vec::new();
        // Every shard at once: a flush is one step for every other command (and one point
        // in the journal's order).
        let all: Vec<usize> = (0..self.shards.len()).collect();
        let mut guards = self.lock_many(&all);
        journal::mark();
        for (_, s) in guards.iter_mut() {
            let range = match db {
                Some(d) => d..d + 1,
                None => 0..s.dbs.len(),
            };
            for d in range {
                let fresh = s.fresh_db(d);
                old.push(std::mem::replace(&mut s.dbs[d], fresh));
            }
        }
        old
    }

    /// SWAPDB: exchanges two databases in every shard at once (all shards locked, so no
    /// command sees one swapped and another not). Everything a `Db` holds moves with it.
    pub fn swap_dbs(&self, a: usize, b: usize) {
        let _catalog = self.catalog_write();
        let all: Vec<usize> = (0..self.shards.len()).collect();
        let mut guards = self.lock_many(&all);
        journal::mark();
        journal::snapshot::swapped(self, a, b);
        for (_, s) in guards.iter_mut() {
            s.dbs.swap(a, b);
            s.dbs[a].keys.set_db(a);
            s.dbs[b].keys.set_db(b);
            // The slot index is database 0's: built for the key space that became it (a
            // pass over its keys), dropped from the one that left.
            let index = s.index_slots;
            s.dbs[a].keys.index_slots(index && a == 0);
            s.dbs[b].keys.index_slots(index && b == 0);
        }
    }
}

/// Up to `max` live keys of database 0 whose cluster hash slot is `slot` (CLUSTER
/// GETKEYSINSLOT, the keys a slot migration or a lost slot moves): from each shard's slot
/// index in cluster mode, at the cost of the keys returned (and one lock per shard); by a
/// pass over every key of database 0 in a store that keeps no index.
pub fn slot_keys(store: &Store, slot: u16, max: usize) -> Vec<bytes::Bytes> {
    let mut out = Vec::new();
    if max == 0 {
        return out;
    }
    let now = crate::util::clock::now_ms();
    store.for_each_shard(|s| {
        if out.len() >= max {
            return;
        }
        let keys = &s.dbs[0].keys;
        if keys.slot_keys(slot, now, max, &mut out) {
            return;
        }
        keys.for_each(now, |e| {
            if out.len() < max && slots::slot_of(e.key()) == slot {
                out.push(bytes::Bytes::copy_from_slice(e.key()));
            }
        })
    });
    out
}

/// The keys of database 0 in hash `slot` (CLUSTER COUNTKEYSINSLOT, the slot checks of the
/// cluster bus): O(1) per shard from the slot index in cluster mode, keys past their
/// deadline not yet reclaimed included, as Redis counts them; a pass over database 0
/// counting the live keys in a store that keeps no index.
pub fn count_keys_in_slot(store: &Store, slot: u16) -> usize {
    let now = crate::util::clock::now_ms();
    let mut n = 0;
    store.for_each_shard(|s| {
        let keys = &s.dbs[0].keys;
        n += keys.slot_count(slot).unwrap_or_else(|| {
            let mut live = 0;
            keys.for_each(now, |e| {
                live += usize::from(slots::slot_of(e.key()) == slot)
            });
            live
        });
    });
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn set(store: &Store, db: usize, key: &str) {
        store.with_key(db, key.as_bytes(), |ks, h| {
            ks.set(h, key.as_bytes(), Value::string(b"v"), Ttl::Clear)
        });
    }

    /// The keys of `slot` in database 0, recounted by a pass over every key.
    fn scanned(store: &Store, slot: u16) -> Vec<Bytes> {
        let mut out = Vec::new();
        store.for_each_shard(|s| {
            s.dbs[0].keys.for_each(i64::MIN, |e| {
                if slots::slot_of(e.key()) == slot {
                    out.push(Bytes::copy_from_slice(e.key()));
                }
            })
        });
        out.sort();
        out
    }

    fn check(store: &Store, slot: u16) {
        let want = scanned(store, slot);
        assert_eq!(count_keys_in_slot(store, slot), want.len(), "slot {slot}");
        let mut got = slot_keys(store, slot, usize::MAX);
        got.sort();
        assert_eq!(got, want, "slot {slot}");
        assert_eq!(slot_keys(store, slot, 3).len(), want.len().min(3));
        assert!(slot_keys(store, slot, 0).is_empty());
    }

    fn indexed(store: &Store) -> Vec<bool> {
        let mut v = Vec::new();
        store.for_each_shard(|s| v.extend(s.dbs.iter().map(|d| d.keys.indexes_slots())));
        v
    }

    /// In cluster mode only database 0 of every shard keeps the index, and it stays exact
    /// across shards through writes, a rename between shards, FLUSHDB of another database,
    /// FLUSHDB/FLUSHALL of database 0, and SWAPDB (the index goes with database 0).
    #[test]
    fn cluster_store_counts_slots_through_flush_and_swap() {
        let store = Store::with_slot_index(4, 3, true);
        assert_eq!(indexed(&store), [true, false, false].repeat(4));
        let tag = slots::slot_of(b"{a}");
        for i in 0..500 {
            set(&store, 0, &format!("{{a}}{i}"));
            set(&store, 0, &format!("k{i}"));
            set(&store, 1, &format!("{{a}}db1:{i}"));
        }
        check(&store, tag);
        check(&store, slots::slot_of(b"k7"));
        assert_eq!(count_keys_in_slot(&store, tag), 500);

        // RENAME {a}0 -> k-renamed: out of one shard, into (likely) another.
        let keys = [&b"{a}0"[..], b"k-renamed"];
        let mut l = store.lock_keys(&keys);
        let (h0, h1) = (l.hash(0), l.hash(1));
        let (v, at) = l.ks(0, 0).take_for_move(h0, keys[0]).expect("{a}0");
        l.ks(1, 0)
            .set(h1, keys[1], v, at.map_or(Ttl::Clear, Ttl::At));
        drop(l);
        check(&store, tag);
        check(&store, slots::slot_of(b"k-renamed"));
        assert_eq!(count_keys_in_slot(&store, tag), 499);

        // Flushing another database leaves database 0's index alone.
        drop(store.flush(Some(1)));
        check(&store, tag);
        assert_eq!(indexed(&store), [true, false, false].repeat(4));

        // SWAPDB 0 2 (2 holds keys): the index follows database 0.
        for i in 0..100 {
            set(&store, 2, &format!("{{a}}db2:{i}"));
        }
        store.swap_dbs(0, 2);
        assert_eq!(indexed(&store), [true, false, false].repeat(4));
        check(&store, tag);
        assert_eq!(count_keys_in_slot(&store, tag), 100);
        store.swap_dbs(2, 0);
        check(&store, tag);
        assert_eq!(count_keys_in_slot(&store, tag), 499);

        // FLUSHDB 0, freed later (FLUSHALL ASYNC hands the old data to a background thread).
        let old = store.flush(Some(0));
        assert_eq!(count_keys_in_slot(&store, tag), 0);
        assert!(slot_keys(&store, tag, 10).is_empty());
        set(&store, 0, "{a}new");
        drop(old);
        check(&store, tag);
        assert_eq!(count_keys_in_slot(&store, tag), 1);
        drop(store.flush(None));
        check(&store, tag);
        assert_eq!(indexed(&store), [true, false, false].repeat(4));
        assert_eq!(store.used_bytes(), 0);
    }

    /// A standalone store keeps no index anywhere, and still answers by a pass over the keys.
    #[test]
    fn standalone_store_keeps_no_index() {
        let store = Store::new(4, 2);
        for i in 0..300 {
            set(&store, 0, &format!("{{b}}{i}"));
        }
        assert!(indexed(&store).iter().all(|&on| !on));
        check(&store, slots::slot_of(b"{b}"));
        assert_eq!(count_keys_in_slot(&store, slots::slot_of(b"{b}")), 300);
    }
}
