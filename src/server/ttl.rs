//! Schedules each shard's TTL monitor (the sweeping itself is `store::ttl_monitor`) and keeps
//! its counters for `INFO documents`.

use crate::server::Server;
use crate::store::ttl_monitor;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// The monitors' shared state.
pub struct TtlMonitors {
    /// Woken by `CONFIG SET ttl-monitor-period` so a new period applies at once.
    wake: Notify,
    /// Passes completed by each shard's monitor.
    passes: Box<[AtomicU64]>,
    deleted: AtomicU64,
    /// Held by the one pass that is sweeping (see [`pass`]).
    sweeping: parking_lot::Mutex<()>,
}

impl TtlMonitors {
    pub fn new(shards: usize) -> TtlMonitors {
        TtlMonitors {
            wake: Notify::new(),
            passes: (0..shards).map(|_| AtomicU64::new(0)).collect(),
            deleted: AtomicU64::new(0),
            sweeping: parking_lot::Mutex::new(()),
        }
    }

    /// Passes of the monitor: a pass is one every shard's monitor has made.
    pub fn passes(&self) -> u64 {
        self.passes
            .iter()
            .map(|p| p.load(Ordering::Relaxed))
            .min()
            .unwrap_or(0)
    }

    pub fn deleted_documents(&self) -> u64 {
        self.deleted.load(Ordering::Relaxed)
    }

    /// A changed period takes effect at once.
    pub fn period_changed(&self) {
        self.wake.notify_waiters();
    }
}

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
    let _one_at_a_time = server.ttl.sweeping.lock();
    let now = crate::util::clock::now_ms();
    for (db, coll) in ttl_monitor::ttl_collections(&server.store, shard) {
        loop {
            let started = Instant::now();
            let (removed, more) = ttl_monitor::sweep_batch(&server.store, shard, db, &coll, now);
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
