//! The network side and the background work: the listener (bind, admission, graceful
//! shutdown), each connection's loop, the admin port (metrics and status page), and the
//! scheduling of active expiry and of the TTL monitors. It drives the shared state (`state/`) through the command table.

pub mod admin;
pub mod connection;
pub mod listener;
pub mod replication;
pub mod ttl;

use crate::state::Server;
use std::sync::Arc;

/// Starts the key space's background work: active expiry `hz` times a second (one shard
/// locked at a time, in bounded batches) and the LRU clock.
pub fn start_background(server: &Arc<Server>) {
    let s = server.clone();
    tokio::spawn(async move {
        while !s.is_shutting_down() {
            let hz = s.config.read().get_u64("hz").max(1);
            crate::util::clock::tick();
            crate::util::alloc::sample_peak();
            let s2 = s.clone();
            let now = crate::util::clock::now_ms();
            let _ = tokio::task::spawn_blocking(move || {
                let began = std::time::Instant::now();
                crate::store::expiry::sweep(&s2.store, now);
                // Hash fields past their deadline (Redis 7.4), bounded per cycle.
                crate::commands::hashes::sweep_fields(&s2, now, 20 * 256);
                // Redis's `expire-cycle` latency event (LATENCY LATEST/HISTORY).
                let nanos = began.elapsed().as_nanos() as u64;
                crate::state::cmdstats::latency_sample("expire-cycle", nanos);
            })
            .await;
            tokio::time::sleep(std::time::Duration::from_millis(1000 / hz)).await;
        }
    });
    ttl::spawn_monitors(server);
    replication::start(server);
}
