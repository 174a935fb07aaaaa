//! Read coalescing for a busy I/O thread (`io-coalesce-us`): before the thread parks in
//! `epoll_wait`, it may nap a few microseconds on a timer, so that the requests its clients
//! are about to send are read in one wake-up instead of each waking the idle thread.
//!
//! Why: a request that finds the server's thread asleep in `epoll_wait` pays for waking it
//! in the sender's system call (on a virtual machine an inter-processor interrupt, about
//! 10 µs of the client's CPU); with the clients on the same machine and bound by their own
//! CPU, as redis-benchmark at pipeline 1, that wake-up sets the pace. A thread asleep on its
//! own timer is woken by the timer, and the client's send only queues the bytes. Network
//! cards' interrupt coalescing makes the same trade. Measured in docs/BENCHMARKS.md.
//!
//! When: only where a client would have waited anyway. The nap is taken when the thread was
//! busy at least half the time lately ([`MIN_BUSY`], so a reply held back by the nap would
//! mostly have waited for the thread), when at least [`MIN_ACTIVE`] connections sent
//! requests in the coarse clock's current or last tick (0.1-0.2 s), and when the busy spell
//! that just ended read fewer than half of them: the others were waiting on their clients,
//! not on the server. A few clients that all wait on the server (each read in every spell)
//! are served without a nap.

use std::cell::Cell;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Fewer active connections never nap: a handful of clients in lockstep with the server
/// would wait out every nap.
const MIN_ACTIVE: u32 = 8;

/// The thread's busy share (a moving average over its park cycles) below which it does
/// not nap: a lightly loaded server answers at once.
const MIN_BUSY: f64 = 0.5;

/// One I/O thread's counts. A thread-local: with one I/O thread there is one, and the
/// counting costs no atomic operation per read.
#[derive(Clone, Copy)]
struct Thread {
    /// Reads that returned input since the thread last woke.
    reads: u32,
    /// The coarse-clock tick `active` counts for, and the counts of it and of the tick
    /// before: connections that read at least once in that tick.
    tick: u32,
    active: u32,
    active_before: u32,
    /// When the thread last woke and last went to park, and its busy share.
    woke: Option<Instant>,
    parked: Option<Instant>,
    busy: f64,
    /// The thread's timer slack was set to the minimum (before its first nap).
    precise: bool,
}

thread_local! {
    static THREAD: Cell<Thread> = const {
        Cell::new(Thread {
            reads: 0,
            tick: 0,
            active: 0,
            active_before: 0,
            woke: None,
            parked: None,
            busy: 0.0,
            precise: false,
        })
    };
}

/// A connection read input in the coarse clock's tick `tick`; `first_in_tick`: its first
/// read of that tick.
#[inline]
pub fn note_read(tick: u32, first_in_tick: bool) {
    THREAD.with(|t| {
        let mut s = t.get();
        s.reads += 1;
        if first_in_tick {
            if s.tick != tick {
                s.active_before = if tick == s.tick.wrapping_add(1) {
                    s.active
                } else {
                    0
                };
                s.active = 0;
                s.tick = tick;
            }
            s.active += 1;
        }
        t.set(s);
    });
}

/// The runtime's `on_thread_park` hook: naps when the module's conditions hold.
pub fn before_park() {
    let nap = crate::state::IO_COALESCE_US.load(Ordering::Relaxed);
    let now = Instant::now();
    let (take, set_slack) = THREAD.with(|t| {
        let mut s = t.get();
        let take = decide(&mut s, now, nap);
        let set_slack = take && !s.precise;
        s.precise |= take;
        t.set(s);
        (take, set_slack)
    });
    if set_slack {
        // A sleeping thread's timer fires up to its slack late, 50 µs by default: as long
        // as the nap itself. The slack is this thread's alone.
        // SAFETY: PR_SET_TIMERSLACK takes an integer and changes only the calling thread.
        unsafe {
            libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
        }
    }
    if take {
        std::thread::sleep(Duration::from_micros(nap));
    }
}

/// At a park at `now`: folds the spell that ended into the busy share, says whether to nap
/// `nap` µs, and starts the next spell's count.
fn decide(s: &mut Thread, now: Instant, nap: u64) -> bool {
    if let (Some(woke), Some(parked)) = (s.woke, s.parked) {
        let busy = now.saturating_duration_since(woke).as_secs_f64();
        let idle = woke.saturating_duration_since(parked).as_secs_f64();
        if busy + idle > 0.0 {
            s.busy += (busy / (busy + idle) - s.busy) / 16.0;
        }
    }
    let active = s.active.max(s.active_before);
    let take = nap > 0 && s.busy >= MIN_BUSY && active >= MIN_ACTIVE && s.reads < active / 2;
    s.reads = 0;
    s.parked = Some(now);
    take
}

/// The runtime's `on_thread_unpark` hook.
pub fn after_unpark() {
    THREAD.with(|t| {
        let mut s = t.get();
        s.woke = Some(Instant::now());
        t.set(s);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts() -> (u32, u32, u32) {
        THREAD.with(|t| {
            let s = t.get();
            (s.reads, s.active, s.active_before)
        })
    }

    #[test]
    fn active_connections_are_counted_per_tick_and_reads_per_spell() {
        note_read(5, true);
        note_read(5, true);
        note_read(5, false);
        assert_eq!(counts(), (3, 2, 0));
        // The next tick: the last one's count moves to `active_before`.
        note_read(6, true);
        assert_eq!(counts(), (4, 1, 2));
        // A tick skipped: nothing was read in the tick before.
        note_read(8, true);
        assert_eq!(counts(), (5, 1, 0));
    }

    /// A thread busy `busy` of the time, `active` connections active, `reads` of them read
    /// in the spell that ends now.
    fn thread(busy: f64, active: u32, reads: u32) -> (Thread, Instant) {
        let now = Instant::now();
        let woke = now - Duration::from_micros(90);
        let parked = woke - Duration::from_micros(10);
        let s = Thread {
            reads,
            tick: 1,
            active,
            active_before: 0,
            woke: Some(woke),
            parked: Some(parked),
            busy,
            precise: false,
        };
        (s, now)
    }

    #[test]
    fn only_a_busy_thread_with_many_connections_waiting_on_their_clients_naps() {
        let (mut s, now) = thread(0.9, 50, 6);
        assert!(decide(&mut s, now, 40));
        assert_eq!((s.reads, s.parked), (0, Some(now)));
        // The spell just ended was 90% busy: the share moves towards it.
        assert!((s.busy - 0.9).abs() < 1e-9);
        // Off.
        let (mut s, now) = thread(0.9, 50, 6);
        assert!(!decide(&mut s, now, 0));
        // Lightly loaded.
        let (mut s, now) = thread(0.3, 50, 6);
        assert!(!decide(&mut s, now, 40));
        // A few clients, all waiting on the server.
        let (mut s, now) = thread(0.9, MIN_ACTIVE - 1, 1);
        assert!(!decide(&mut s, now, 40));
        // Most active connections were read in the spell: they wait on the server.
        let (mut s, now) = thread(0.9, 50, 25);
        assert!(!decide(&mut s, now, 40));
        let (mut s, now) = thread(0.9, 50, 24);
        assert!(decide(&mut s, now, 40));
    }
}
