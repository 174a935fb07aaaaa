//! What the TTL monitors share with the rest of the server: their counters for `INFO
//! documents` and the wake-up a changed `ttl-monitor-period` sends. The monitors themselves
//! are scheduled by `server::ttl`; the sweeping is `store::ttl_monitor`.

use std::sync::atomic::{AtomicU64, Ordering};
use tokio::sync::Notify;

/// The monitors' shared state.
pub struct TtlMonitors {
    /// Woken by `CONFIG SET ttl-monitor-period` so a new period applies at once.
    pub(crate) wake: Notify,
    /// Passes completed by each shard's monitor.
    pub(crate) passes: Box<[AtomicU64]>,
    pub(crate) deleted: AtomicU64,
    /// Held by the one pass that is sweeping (see `server::ttl::pass`).
    pub(crate) sweeping: parking_lot::Mutex<()>,
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
