//! The one clock.
//!
//! - **Wall time** in Unix milliseconds ([`now_ms`]): key deadlines, TTL index dates,
//!   `$$NOW`, `$currentDate`, `TIME`. Tests move it forward with [`advance`] (exposed as
//!   `DEBUG ADVANCE-CLOCK` when `enable-debug-command` allows it), so an expiry test makes a
//!   deadline pass instead of sleeping past it. The offset costs one relaxed load.
//! - **A coarse monotonic clock** in tenths of a second since start ([`coarse`]): the LRU
//!   stamp of every key and each client's last activity, read per request as a load rather
//!   than a clock call; [`tick`] refreshes it (the expiry task, every `hz`, and eviction).
//!
//! Durations (latency, timeouts, the TTL monitor's schedule) are measured with
//! `std::time::Instant` and tokio's timers, which the offset does not move: no test needs
//! them to jump.

use std::sync::atomic::{AtomicI64, AtomicU32, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

static OFFSET_MS: AtomicI64 = AtomicI64::new(0);
static COARSE: AtomicU32 = AtomicU32::new(0);

/// Wall-clock milliseconds since the Unix epoch, plus whatever [`advance`] added.
pub fn now_ms() -> i64 {
    now_us() / 1000
}

/// Wall-clock microseconds since the Unix epoch (`TIME`, MONITOR lines), on the same
/// clock as [`now_ms`].
pub fn now_us() -> i64 {
    let real = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0);
    real.saturating_add(OFFSET_MS.load(Ordering::Relaxed).saturating_mul(1000))
}

/// Moves wall time forward by `ms` (never back: deadlines already passed stay passed).
pub fn advance(ms: i64) {
    OFFSET_MS.fetch_add(ms.max(0), Ordering::Relaxed);
}

fn start() -> Instant {
    static START: OnceLock<Instant> = OnceLock::new();
    *START.get_or_init(Instant::now)
}

/// Refreshes the coarse clock.
pub fn tick() {
    let t = (start().elapsed().as_millis() / 100) as u32;
    // Several threads tick; the clock must never step back, or a key stamped with the newer
    // value would look idle for 13 years.
    COARSE.fetch_max(t, Ordering::Relaxed);
}

/// Tenths of a second since the process started, as of the last [`tick`].
pub fn coarse() -> u32 {
    COARSE.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coarse_clock_never_steps_back() {
        tick();
        let a = coarse();
        COARSE.fetch_max(a + 1000, Ordering::Relaxed);
        tick();
        assert!(coarse() >= a + 1000);
    }
}
