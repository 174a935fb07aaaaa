//! WATCH: which clients watch which keys, and the dirty flags a write raises.
//!
//! Each watching client owns one `Arc<AtomicBool>` (its "CAS dirty" flag). The registry maps
//! `(db, key)` to the flags of the clients watching it, split into stripes by key hash so
//! writers to different keys rarely meet on a lock. Every key-space write calls
//! [`Watches::touch`]; when nobody watches anything that is one atomic load.
//!
//! Ordering: writes run under the shared exec gate and touch before their command ends; EXEC
//! checks its flag under the exclusive gate, so it sees every touch of every command that ran
//! before it.

use bytes::Bytes;
use hashbrown::HashMap;
use parking_lot::Mutex;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

const STRIPES: usize = 16;

type Watchers = Vec<(u64, Arc<AtomicBool>)>;

pub struct Watches {
    /// Number of (db, key, client) registrations; 0 lets `touch` return at once.
    active: AtomicUsize,
    stripes: Vec<Mutex<HashMap<(usize, Bytes), Watchers>>>,
    hasher: hashbrown::DefaultHashBuilder,
}

impl Default for Watches {
    fn default() -> Self {
        Watches {
            active: AtomicUsize::new(0),
            stripes: (0..STRIPES).map(|_| Mutex::default()).collect(),
            hasher: hashbrown::DefaultHashBuilder::default(),
        }
    }
}

impl Watches {
    fn stripe(&self, key: &[u8]) -> &Mutex<HashMap<(usize, Bytes), Watchers>> {
        &self.stripes[(self.hasher.hash_one(key) % STRIPES as u64) as usize]
    }

    /// Keys watched by at least one client (INFO `total_watched_keys`).
    pub fn watched_keys(&self) -> usize {
        if self.active.load(Ordering::Acquire) == 0 {
            return 0;
        }
        self.stripes.iter().map(|s| s.lock().len()).sum()
    }

    /// Registers `client` as watching `key` in `db`; false if it already was.
    pub fn watch(&self, db: usize, key: &Bytes, client: u64, flag: &Arc<AtomicBool>) -> bool {
        let mut m = self.stripe(key).lock();
        let list = m.entry((db, key.clone())).or_default();
        if list.iter().any(|(id, _)| *id == client) {
            return false;
        }
        list.push((client, flag.clone()));
        self.active.fetch_add(1, Ordering::AcqRel);
        true
    }

    /// Drops `client`'s watch of `key` in `db`.
    pub fn unwatch(&self, db: usize, key: &Bytes, client: u64) {
        let mut m = self.stripe(key).lock();
        let k = (db, key.clone());
        if let Some(list) = m.get_mut(&k) {
            let before = list.len();
            list.retain(|(id, _)| *id != client);
            self.active.fetch_sub(before - list.len(), Ordering::AcqRel);
            if list.is_empty() {
                m.remove(&k);
            }
        }
    }

    /// A key was written, deleted, expired or evicted: every client watching it will see its
    /// EXEC fail. The hook every key-space write calls (Redis's `touchWatchedKey`).
    #[inline]
    pub fn touch(&self, db: usize, key: &[u8]) {
        if self.active.load(Ordering::Acquire) == 0 {
            return;
        }
        self.touch_slow(db, key);
    }

    #[cold]
    fn touch_slow(&self, db: usize, key: &[u8]) {
        let m = self.stripe(key).lock();
        if let Some(list) = m.get(&(db, Bytes::copy_from_slice(key))) {
            for (_, f) in list {
                f.store(true, Ordering::Release);
            }
        }
    }

    /// Touches every watched key of `db` (or of every db) for which `existed(db, key)` holds:
    /// FLUSHDB, FLUSHALL and SWAPDB, as Redis's `touchAllWatchedKeysInDb`.
    pub fn touch_db(&self, db: Option<usize>, mut existed: impl FnMut(usize, &[u8]) -> bool) {
        if self.active.load(Ordering::Acquire) == 0 {
            return;
        }
        // Collect first: `existed` may lock shards, and writers lock a shard before a stripe.
        let mut candidates = Vec::new();
        for s in &self.stripes {
            for ((d, k), list) in s.lock().iter() {
                if db.is_none_or(|x| x == *d) {
                    candidates.push((*d, k.clone(), list.clone()));
                }
            }
        }
        for (d, k, list) in candidates {
            if existed(d, &k) {
                for (_, f) in list {
                    f.store(true, Ordering::Release);
                }
            }
        }
    }
}
