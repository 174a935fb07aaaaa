//! The data: N in-process shards, each owning its slice of every database's key space (and,
//! as they land, its slice of every collection and its timing wheels).
//!
//! A shard is a plain struct behind its own mutex. A command locks only the shards it touches,
//! never across an `.await`, and multi-shard commands take their locks in ascending shard order
//! so they cannot deadlock.

use crate::documents::collection::CollectionShard;
use bytes::Bytes;
use hashbrown::HashMap;
use parking_lot::{Mutex, MutexGuard};
use std::hash::BuildHasher;

/// A value in the key space. The string and hash families fill this in.
#[derive(Debug, Clone)]
pub enum Value {
    Str(Bytes),
    Hash(HashMap<Bytes, Bytes>),
}

/// One database's slice of the key space inside one shard.
#[derive(Default, Debug)]
pub struct Db {
    pub keys: HashMap<Bytes, Value>,
    /// This shard's part of each collection, by name.
    pub collections: HashMap<String, CollectionShard>,
}

/// Everything one shard owns.
#[derive(Debug)]
pub struct ShardData {
    pub dbs: Vec<Db>,
}

impl ShardData {
    fn new(databases: usize) -> ShardData {
        ShardData {
            dbs: (0..databases).map(|_| Db::default()).collect(),
        }
    }
}

pub struct Store {
    shards: Vec<Mutex<ShardData>>,
    databases: usize,
    hasher: hashbrown::DefaultHashBuilder,
}

impl Store {
    pub fn new(shards: usize, databases: usize) -> Store {
        let shards = shards.max(1);
        Store {
            shards: (0..shards)
                .map(|_| Mutex::new(ShardData::new(databases)))
                .collect(),
            databases,
            hasher: hashbrown::DefaultHashBuilder::default(),
        }
    }

    pub fn shard_count(&self) -> usize {
        self.shards.len()
    }

    pub fn databases(&self) -> usize {
        self.databases
    }

    /// The shard that owns `key` (KV keys) or a document `_id`'s hash.
    pub fn shard_of(&self, key: &[u8]) -> usize {
        (self.hasher.hash_one(key) % self.shards.len() as u64) as usize
    }

    pub fn lock(&self, shard: usize) -> MutexGuard<'_, ShardData> {
        self.shards[shard].lock()
    }

    /// Locks the given shards in ascending order (the one order every multi-shard command
    /// uses, so two of them cannot deadlock). Duplicates are locked once.
    pub fn lock_many(&self, shards: &[usize]) -> Vec<(usize, MutexGuard<'_, ShardData>)> {
        let mut ids: Vec<usize> = shards.to_vec();
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
    /// outside the locks (FLUSHALL ASYNC frees in the background).
    pub fn flush(&self, db: Option<usize>) -> Vec<Db> {
        let mut old = Vec::new();
        self.for_each_shard(|s| match db {
            Some(d) => old.push(std::mem::take(&mut s.dbs[d])),
            None => old.extend(s.dbs.iter_mut().map(std::mem::take)),
        });
        old
    }
}
