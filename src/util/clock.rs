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
//! - **Frozen time for expiry** ([`expiry_now_ms`], [`freeze`]): while a script or a
//!   MULTI/EXEC runs, the keys it sees do not expire mid-run (Redis 7.0's
//!   `scriptTimeSnapshot` / `server.mstime` in `keyIsExpired`): the runner freezes the time
//!   its own thread's lookups compare deadlines with, and the active-expiry sweep (its own
//!   thread) clamps its "now" to the frozen time ([`sweep_now`]) so it cannot delete a key the
//!   run still sees alive. Deadlines that commands set are still computed from [`now_ms`].
//!
//! Durations (latency, timeouts, the TTL monitor's schedule) are measured with
//! `std::time::Instant` and tokio's timers, which the offset does not move: no test needs
//! them to jump.

use std::cell::Cell;
use std::sync::atomic::{AtomicI64, AtomicU32, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

static OFFSET_MS: AtomicI64 = AtomicI64::new(0);
static COARSE: AtomicU32 = AtomicU32::new(0);

thread_local! {
    /// The time this thread's expiry checks use while a run is frozen; 0: not frozen.
    static FROZEN: Cell<i64> = const { Cell::new(0) };
}
/// The frozen time of the run in progress, for the sweep on other threads; 0: none. Runs that
/// freeze (scripts, EXEC) hold the exec gate exclusively, so there is at most one at a time.
static FROZEN_ANY: AtomicI64 = AtomicI64::new(0);

/// The time key deadlines are compared with on this thread: [`now_ms`], or the time the
/// script or transaction running on this thread started. One thread-local load more than
/// [`now_ms`], and only read for a key that has a deadline.
#[inline]
pub fn expiry_now_ms() -> i64 {
    match FROZEN.with(Cell::get) {
        0 => now_ms(),
        t => t,
    }
}

/// The "now" the active-expiry sweep may expire keys at, given the one it took: no later
/// than the frozen time of a run in progress, so the sweep never removes a key the run still
/// sees alive. Read under the shard's lock, after which a run that starts later freezes a time
/// at least as late as `now`.
pub fn sweep_now(now: i64) -> i64 {
    match FROZEN_ANY.load(Ordering::Acquire) {
        0 => now,
        t => now.min(t),
    }
}

/// Freezes [`expiry_now_ms`] on this thread (and [`sweep_now`]) at the current time until
/// the guard drops. Nested freezes (a script inside EXEC) keep the outer time, as a key the
/// transaction saw alive must stay so.
#[must_use]
pub fn freeze() -> Frozen {
    let prev = FROZEN.with(Cell::get);
    if prev == 0 {
        // 0 means "not frozen": a clock at the epoch's first millisecond freezes at 1.
        let t = now_ms().max(1);
        FROZEN.with(|c| c.set(t));
        FROZEN_ANY.store(t, Ordering::Release);
    }
    Frozen { prev }
}

/// Unfreezes (or restores the outer freeze) when dropped; see [`freeze`].
pub struct Frozen {
    prev: i64,
}

impl Drop for Frozen {
    fn drop(&mut self) {
        if self.prev == 0 {
            FROZEN.with(|c| c.set(0));
            FROZEN_ANY.store(0, Ordering::Release);
        }
    }
}

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

/// `ticks` to nanoseconds as a 32.32 fixed-point factor; 0 until [`calibrate`] found a
/// time-stamp counter the kernel itself keeps time with.
static TSC_NS_FIXED: AtomicU64 = AtomicU64::new(0);

/// A cheap monotonic stamp for timing each command (`INFO commandstats`, latency
/// histograms): the CPU's time-stamp counter when [`calibrate`] found it usable (about 10 ns
/// a read against 25 for `Instant::now` here), else nanoseconds of `Instant`. Only
/// differences of two stamps mean anything: see [`stamp_elapsed_ns`].
#[inline]
pub fn stamp() -> u64 {
    #[cfg(target_arch = "x86_64")]
    if TSC_NS_FIXED.load(Ordering::Relaxed) != 0 {
        // SAFETY: RDTSC reads a counter; it touches no memory and every x86_64 CPU has it.
        return unsafe { core::arch::x86_64::_rdtsc() };
    }
    start().elapsed().as_nanos() as u64
}

/// Nanoseconds since `from`, a [`stamp`]. A counter read on another core may be a little
/// behind: that counts as 0.
#[inline]
pub fn stamp_elapsed_ns(from: u64) -> u64 {
    let d = stamp().saturating_sub(from);
    match TSC_NS_FIXED.load(Ordering::Relaxed) {
        0 => d,
        f => ((d as u128 * f as u128) >> 32) as u64,
    }
}

/// Switches [`stamp`] to the time-stamp counter when the kernel's own clock source is `tsc`
/// (it checked the counter is invariant and in step across cores), measuring its rate
/// against `Instant` over 20 ms. Called once at start, before any command is timed.
pub fn calibrate() {
    #[cfg(target_arch = "x86_64")]
    {
        let source = std::fs::read_to_string(
            "/sys/devices/system/clocksource/clocksource0/current_clocksource",
        )
        .unwrap_or_default();
        if source.trim() != "tsc" {
            return;
        }
        // SAFETY: as in `stamp`.
        let read = || unsafe { core::arch::x86_64::_rdtsc() };
        let (t0, c0) = (Instant::now(), read());
        std::thread::sleep(std::time::Duration::from_millis(20));
        let (ns, ticks) = (t0.elapsed().as_nanos() as u64, read().saturating_sub(c0));
        if ticks > 0 && ns > 0 {
            TSC_NS_FIXED.store(
                ((ns as u128) << 32).div_ceil(ticks as u128) as u64,
                Ordering::Relaxed,
            );
        }
    }
}

/// The current time as Redis's log shows it, in UTC: `24 Nov 2026 12:55:57.123`.
pub fn redis_time() -> String {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = now.as_secs();
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    // Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{day:02} {} {year} {:02}:{:02}:{:02}.{:03}",
        MONTHS[(month - 1) as usize],
        rem / 3600,
        rem / 60 % 60,
        rem % 60,
        now.subsec_millis()
    )
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

    #[test]
    fn frozen_time_holds_until_the_outer_guard_drops() {
        let outer = freeze();
        let t = expiry_now_ms();
        assert_eq!(sweep_now(i64::MAX), t);
        std::thread::sleep(std::time::Duration::from_millis(3));
        {
            let _inner = freeze();
            assert_eq!(expiry_now_ms(), t);
        }
        assert_eq!(expiry_now_ms(), t);
        // Other threads' lookups are not frozen.
        let other = std::thread::spawn(expiry_now_ms).join().unwrap_or(0);
        assert!(other > t, "{other} {t}");
        drop(outer);
        assert!(expiry_now_ms() > t);
        assert_eq!(sweep_now(5), 5);
    }

    #[test]
    fn stamps_measure_nanoseconds() {
        calibrate();
        let s = stamp();
        std::thread::sleep(std::time::Duration::from_millis(30));
        let ns = stamp_elapsed_ns(s);
        assert!((25_000_000..200_000_000).contains(&ns), "{ns}");
    }
}
