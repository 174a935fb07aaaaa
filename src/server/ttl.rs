//! Schedules each shard's TTL monitor (the sweeping itself is `store::ttl_monitor`) and keeps
//! its counters for `INFO documents`.

use crate::state::Server;
use crate::store::ttl_monitor;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn period(server: &Server) -> Duration {
    Duration::from_secs(server.config.read().get_u64("ttl-monitor-period").max(1))
}

/// Starts one monitor task per shard.
pub fn spawn_monitors(server: &Arc<Server>) {
    for shard in 0..server.store.shard_count() {
        let s = server.clone();
        tokio::spawn(async move {
            let mut shutdown = s.shutdown_signal();
            let mut last = Instant::now();
            while !s.is_shutting_down() {
                let due = last + period(&s);
                if Instant::now() < due {
                    tokio::select! {
                        _ = tokio::time::sleep_until(due.into()) => {}
                        // Re-read the period and sleep again from the last pass.
                        _ = s.ttl.wake.notified() => continue,
                        _ = shutdown.changed() => break,
                    }
                }
                last = Instant::now();
                // The sweep runs on a blocking-pool thread, not on the runtime's workers, so
                // connections are never queued behind it.
                let s2 = s.clone();
                let _ = tokio::task::spawn_blocking(move || pass(&s2, shard)).await;
            }
        });
    }
}

/// One pass of one shard's monitor over its TTL indexes, in bounded batches.
///
/// The monitor is background work and must not make clients wait (a mass expiry of a
/// million documents would otherwise stall every reader for seconds): one shard's pass runs
/// at a time, each batch holds the shard's lock for [`ttl_monitor::BATCH`] removals, and
/// after each batch the pass sleeps as long as the batch took, leaving at least half of a
/// core to clients. Strict reads hide due documents meanwhile, so a slower sweep only
/// delays reclaiming their memory.
pub fn pass(server: &Server, shard: usize) {
    // As MongoDB's secondaries, a replica's monitor deletes nothing: its master's deletions
    // reach it through the stream.
    if server.holds_masters_data() {
        return;
    }
    let _one_at_a_time = server.ttl.sweeping.lock();
    let now = crate::util::clock::now_ms();
    for (db, coll) in ttl_monitor::ttl_collections(&server.store, shard) {
        // A collection whose slot is moving is expired by one node at a time: the source
        // until it holds writes for the flip, the target once it owns the slot.
        let moving = || {
            server.cluster.get().is_some_and(|c| {
                let slot = crate::state::cluster::key_slot(coll.as_bytes());
                crate::state::pause::slot_paused(slot) || c.migrations.importing(slot)
            })
        };
        loop {
            let started = Instant::now();
            // Under the exec gate, shared, like a command: a transaction or script sees a
            // batch's expiries and their change-stream entries together, and the readers
            // blocked on a change stream the batch appended to are served right after it.
            let (removed, more) = {
                let _shared = server.exec_gate.shared(shard as u64);
                // Looked at before each batch, under the gate: a slot migration's hand-off
                // pauses the slot, then takes the gate exclusively to mark the end of what
                // it sends, so no batch of this collection lands after that mark.
                if moving() {
                    break;
                }
                let r = ttl_monitor::sweep_batch(&server.store, shard, db, &coll, now);
                server.blocking.serve_ready(server);
                r
            };
            server
                .ttl
                .deleted
                .fetch_add(removed as u64, Ordering::Relaxed);
            if !more || server.is_shutting_down() {
                break;
            }
            std::thread::sleep(started.elapsed());
        }
    }
    server.ttl.passes[shard].fetch_add(1, Ordering::Relaxed);
}
