//! The network side and the background work: the listener (bind, admission, graceful
//! shutdown), each connection's loop, the admin port (metrics and status page), and the
//! scheduling of active expiry and of the TTL monitors. It drives the shared state (`state/`) through the command table.

pub mod admin;
pub mod cluster_bus;
pub mod coalesce;
pub mod connection;
pub mod listener;
pub mod replication;
pub mod slot_migration;
pub mod ttl;

use crate::state::Server;
use std::sync::Arc;

/// `hz`, doubled (up to 500) while there are more than 200 clients per tick when
/// `dynamic-hz` is on, as Redis's serverCron (`MAX_CLIENTS_PER_CLOCK_TICK`).
fn effective_hz(hz: u64, dynamic: bool, clients: usize) -> u64 {
    let mut hz = hz.clamp(1, 500);
    if dynamic {
        while (clients as u64) / hz > 200 {
            hz *= 2;
            if hz >= 500 {
                return 500;
            }
        }
    }
    hz
}

/// Starts the key space's background work: active expiry `hz` times a second (one shard
/// locked at a time, in bounded batches) and the LRU clock.
pub fn start_background(server: &Arc<Server>) {
    let s = server.clone();
    tokio::spawn(async move {
        while !s.is_shutting_down() {
            let hz = {
                let c = s.config.read();
                effective_hz(c.get_u64("hz"), c.get_bool("dynamic-hz"), s.clients.count())
            };
            crate::state::EFFECTIVE_HZ.store(hz, std::sync::atomic::Ordering::Relaxed);
            // Held still by DEBUG SLEEP, as Redis's cron.
            s.thawed().await;
            crate::util::clock::tick();
            crate::util::alloc::sample_peak();
            // Active expiry is a master's (Redis's activeExpireCycle): a replica's keys leave
            // by its master's DELs, but for those its own clients gave a deadline.
            // A replica from its start (its config file's replicaof, set before the load) or
            // by its cluster configuration; REPLICAOF NO ONE clears it.
            let replica = crate::store::expiry::replica() || s.holds_masters_data();
            crate::store::expiry::set_replica(replica);
            if replica && !crate::state::CRON_PAUSED.load(std::sync::atomic::Ordering::Relaxed) {
                let s2 = s.clone();
                let now = crate::util::clock::now_ms();
                let _ = tokio::task::spawn_blocking(move || {
                    crate::store::expiry::sweep_replica_own(&s2.store, now)
                })
                .await;
            }
            if crate::state::CRON_PAUSED.load(std::sync::atomic::Ordering::Relaxed) || replica {
                tokio::time::sleep(std::time::Duration::from_millis(1000 / hz)).await;
                continue;
            }
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

#[cfg(test)]
mod tests {
    use super::effective_hz;

    #[test]
    fn dynamic_hz_follows_the_clients() {
        assert_eq!(effective_hz(10, true, 100), 10);
        assert_eq!(effective_hz(10, true, 2000), 10);
        assert_eq!(effective_hz(10, true, 2010), 20);
        assert_eq!(effective_hz(10, true, 10_000), 80);
        assert_eq!(effective_hz(10, false, 10_000), 10);
        assert_eq!(effective_hz(10, true, 1_000_000), 500);
    }
}
