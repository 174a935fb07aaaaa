//! The TTL monitor: one task per shard sweeps that shard's TTL wheels every
//! `ttl-monitor-period` seconds (MongoDB's `ttlMonitorSleepSecs`, default 60).
//!
//! A pass removes due documents in bounded batches, releasing the shard's lock and yielding
//! to the runtime between batches, so a client never waits behind more than one batch even
//! while a million documents expire. A `CONFIG SET ttl-monitor-period` wakes every monitor at
//! once: the next pass is due `period` seconds after the previous one, under the new period.

use crate::store::collections::Change;
use crate::store::Store;

/// Documents removed per lock acquisition: about a tenth of a millisecond of work, so a
/// client that needs the shard waits no longer than that behind the monitor.
pub const BATCH: usize = 32;

/// The collections of `shard` that have a TTL index, as (db, name).
pub fn ttl_collections(store: &Store, shard: usize) -> Vec<(usize, String)> {
    let s = store.lock(shard);
    let mut out = Vec::new();
    for (db, d) in s.dbs.iter().enumerate() {
        for (name, c) in &d.collections {
            if !c.ttl.is_empty() {
                out.push((db, name.clone()));
            }
        }
    }
    out
}

/// One batch of one collection's part in `shard`: removes up to [`BATCH`] due documents,
/// reporting each expiry to the document hooks and queueing it on the collection's change
/// feed under the shard's lock, then, with the lock released, appending the feed to its
/// stream. Returns how many it removed and whether more are due; the batch that ends the
/// collection's pass counts it.
pub fn sweep_batch(
    store: &Store,
    shard: usize,
    db: usize,
    collection: &str,
    now_ms: i64,
) -> (usize, bool) {
    // The catalog, shared, until the batch's changes are in their streams: a SWAPDB or
    // FLUSHDB cannot come between an expiry and its entry (which names its database).
    let _catalog = store.catalog_read();
    let mut ids = Vec::new();
    let mut s = store.lock(shard);
    let mut feed = None;
    let more = match s
        .dbs
        .get_mut(db)
        .and_then(|d| d.collections.get_mut(collection))
    {
        Some(c) => {
            let more = c.expire_due(now_ms, BATCH, &mut ids);
            if !more {
                c.ttl_stats.passes += 1;
            }
            feed = Some(c.meta.changes.clone());
            more
        }
        None => false,
    };
    let mut queued = false;
    for id in &ids {
        store.doc_changed(db, collection, Change::Expire(id));
        if let Some(f) = &feed {
            queued |= store.queue_change(f, db, collection, Change::Expire(id));
        }
    }
    drop(s);
    if let (true, Some(f)) = (queued, feed) {
        store.drain_changes(&f);
    }
    (ids.len(), more)
}
