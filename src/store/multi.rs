//! Commands over several keys (MSET, DEL k1 k2, RENAME, COPY ...): every shard involved is
//! locked at once, in ascending order, so the command is atomic and cannot deadlock.

use crate::store::{Keyspace, ShardData, Store};
use parking_lot::MutexGuard;

pub struct Locked<'a> {
    guards: Vec<(usize, MutexGuard<'a, ShardData>)>,
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
    /// Locks the shards of all `keys` (ascending shard order).
    pub fn lock_keys<K: AsRef<[u8]>>(&self, keys: &[K]) -> Locked<'_> {
        let hashes: Vec<u64> = keys.iter().map(|k| self.hash(k.as_ref())).collect();
        let shards: Vec<usize> = hashes.iter().map(|&h| self.shard_of_hash(h)).collect();
        let guards = self.lock_many(&shards);
        let keys = hashes
            .iter()
            .zip(&shards)
            .map(|(&h, s)| {
                let g = guards.iter().position(|(id, _)| id == s).unwrap_or(0);
                (h, g)
            })
            .collect();
        Locked { guards, keys }
    }
}
