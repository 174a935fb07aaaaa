//! Active expiry: a background task sweeps every shard's timing wheels `hz` times a second,
//! taking one shard's lock at a time for a bounded batch, so reclaiming a million keys never
//! makes a client wait behind more than one small batch.

use crate::store::Store;
use std::sync::atomic::{AtomicBool, Ordering};

/// Keys removed per lock acquisition.
pub const BATCH: usize = 256;

/// Off only through `DEBUG SET-ACTIVE-EXPIRE 0` (tests of lazy expiry, as in Redis).
static ACTIVE: AtomicBool = AtomicBool::new(true);

/// Turns the background sweep on or off; reads still expire keys lazily either way.
pub fn set_active(on: bool) {
    ACTIVE.store(on, Ordering::Relaxed);
}

/// Whether the background sweep is on (hash fields' sweep reads it too).
pub fn active() -> bool {
    ACTIVE.load(Ordering::Relaxed)
}

/// Whether this server is a replica (Redis's `!iAmMaster()`), as the key spaces see it: a
/// key past its deadline is hidden from reads but stays, until its master's DEL; only the
/// keys its own clients gave a deadline (a writable replica) expire here.
static REPLICA: AtomicBool = AtomicBool::new(false);

pub fn set_replica(on: bool) {
    REPLICA.store(on, Ordering::Relaxed);
}

#[inline]
pub fn replica() -> bool {
    REPLICA.load(Ordering::Relaxed)
}

thread_local! {
    /// The running command comes from this replica's master: keys are as the master has
    /// them, live until the master's DEL (Redis's expireIfNeeded for the master client).
    static FROM_MASTER: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

#[inline]
pub fn from_master() -> bool {
    FROM_MASTER.with(|f| f.get())
}

pub fn set_from_master(on: bool) {
    FROM_MASTER.with(|f| f.set(on));
    crate::documents::ttl::set_from_master(on);
}

/// A replica's sweep (Redis's expireSlaveKeys): only the keys its own clients gave a
/// deadline (a writable replica) are removed when due.
pub fn sweep_replica_own(store: &Store, now: i64) -> usize {
    if !ACTIVE.load(Ordering::Relaxed) {
        return 0;
    }
    let mut total = 0;
    for shard in 0..store.shard_count() {
        let mut s = store.lock(shard);
        for db in 0..store.databases() {
            total += s.dbs[db].keys.expire_own(now);
        }
    }
    total
}

/// One sweep over every shard and database: removes every key due at `now`, in batches.
/// Returns how many keys were removed.
pub fn sweep(store: &Store, now: i64) -> usize {
    if !ACTIVE.load(Ordering::Relaxed) {
        return 0;
    }
    let mut buf = Vec::with_capacity(BATCH);
    let mut total = 0;
    for shard in 0..store.shard_count() {
        let mut db = 0;
        while db < store.databases() {
            let more = {
                let mut s = store.lock(shard);
                // Not past the frozen time of a script or EXEC in progress (util/clock).
                let now = crate::util::clock::sweep_now(now);
                let (n, more) = s.dbs[db].keys.expire_due(now, BATCH, &mut buf);
                total += n;
                more
            };
            if !more {
                db += 1;
            }
        }
    }
    total
}
