//! Commands over several keys (MSET, DEL k1 k2, RENAME, COPY ...): every shard involved is
//! locked at once, in ascending order, so the command is atomic and cannot deadlock.

use crate::store::{Keyspace, Store};

pub struct Locked<'a> {
    guards: super::ShardGuards<'a>,
    /// Per key: (hash, index into `guards`).
    keys: Vec<(u64, usize)>,
}

impl<'a> Locked<'a> {
    /// The hash of key `i` (in the order given to [`Store::lock_keys`]).
    pub fn hash(&self, i: usize) -> u64 {
        self.keys[i].0
    }

    /// The key space of database `db` that owns key `i`.
    pub fn ks(&mut self, i: usize, db: usize) -> &mut Keyspace {
        let g = self.keys[i].1;
        &mut self.guards[g].1.dbs[db].keys
    }
}

impl Store {
    /// Locks the shards of all `keys` (ascending shard order). Two allocations for one key
    /// (the key's hash with its guard, and the guard), three for more (their shards, sorted
    /// in place): one vector each of hashes, shards, sorted shards and guards cost about 100
    /// instructions apiece, a fifth of an `EXISTS` of one key.
    pub fn lock_keys<K: AsRef<[u8]>>(&self, keys: &[K]) -> Locked<'_> {
        // (hash, shard) first; the shard becomes the index of its guard below.
        let mut keyed: Vec<(u64, usize)> = keys
            .iter()
            .map(|k| {
                let h = self.hash(k.as_ref());
                (h, self.shard_of_hash(h))
            })
            .collect();
        let guards = match keyed.as_slice() {
            [(_, s)] => self.lock_many(&[*s]),
            _ => self.lock_sorted(keyed.iter().map(|&(_, s)| s).collect()),
        };
        for (_, g) in keyed.iter_mut() {
            // `guards` is sorted by shard and holds every key's shard.
            *g = guards.binary_search_by_key(&*g, |(id, _)| *id).unwrap_or(0);
        }
        Locked {
            guards,
            keys: keyed,
        }
    }
}
