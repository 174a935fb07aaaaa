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
