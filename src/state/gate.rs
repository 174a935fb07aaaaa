//! The exec gate: ordinary commands hold it shared while they run, EXEC holds it exclusively,
//! so a transaction is atomic with respect to every other client.
//!
//! It is a "big reader" lock: one `RwLock` per stripe, each on its own cache line. A command
//! takes only its connection's stripe (chosen by client id), so the two worker threads of a
//! 2-core machine do not bounce one lock word between their caches on every command; EXEC
//! takes every stripe, in index order (two EXECs cannot deadlock, and a command never holds
//! more than one stripe). Two stripes a core (at least 4, at most 32): enough that clients on
//! different cores rarely share one, and few enough that an exclusive taker (EXEC, every
//! script) moves a handful of cache lines, not 32 (on 2 cores a script's gate went from 32
//! lock/unlock pairs, most lines last written by the other core, to 4). With one I/O thread
//! there is one stripe ([`ExecGate::for_io_threads`]). parking_lot's RwLock makes new readers
//! wait behind a waiting writer, so EXEC cannot starve.
//!
//! **Busy scripts.** A script holds the gate exclusively for its whole run (on its caller's
//! thread, or on the script thread with one I/O thread: `commands::scripting`), and records
//! when it started here. A command that finds the
//! gate taken waits for it in slices, and between slices looks whether the script has run past
//! `busy-reply-threshold`: then it gives up and the dispatcher answers `-BUSY` (or runs it
//! without the gate, for the few commands Redis allows then). A command that arrives while
//! the script is already past the threshold is refused before it waits at all: that check is
//! one atomic load when no script runs.

use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::time::{Duration, Instant};

const MAX_STRIPES: usize = 32;

#[repr(align(128))]
#[derive(Default)]
struct Stripe(RwLock<()>);

pub struct ExecGate {
    stripes: Vec<Stripe>,
    /// `stripes.len() - 1` (a power of two): a client's stripe is `id & mask`.
    mask: usize,
    /// Milliseconds since `epoch` (plus one) at which the running script started; 0: none.
    script_since: AtomicU64,
    /// What runs: [`SCRIPT_EVAL`] or [`SCRIPT_FUNCTION`] (the BUSY text names its KILL).
    script_kind: AtomicU8,
    epoch: Instant,
}

pub const SCRIPT_EVAL: u8 = 1;
pub const SCRIPT_FUNCTION: u8 = 2;

/// The BUSY error naming the KILL command for `kind` ([`SCRIPT_EVAL`] or [`SCRIPT_FUNCTION`]).
pub fn busy_text(kind: u8) -> &'static str {
    if kind == SCRIPT_FUNCTION {
        "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE."
    } else {
        "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."
    }
}

/// How long a command waits on the gate before it looks again whether a script went busy.
const SLICE: Duration = Duration::from_millis(5);

impl Default for ExecGate {
    fn default() -> Self {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        ExecGate::with_stripes((2 * cores).next_power_of_two().clamp(4, MAX_STRIPES))
    }
}

impl ExecGate {
    /// The gate for a server running `io_threads` worker threads. With one, commands never
    /// take the gate from two cores at once, so striping buys nothing and one stripe makes
    /// an exclusive taker (EXEC, every script) lock one word instead of four.
    pub fn for_io_threads(io_threads: usize) -> ExecGate {
        if io_threads <= 1 {
            ExecGate::with_stripes(1)
        } else {
            ExecGate::default()
        }
    }

    /// `n` stripes (a power of two).
    fn with_stripes(n: usize) -> ExecGate {
        debug_assert!(n.is_power_of_two());
        ExecGate {
            stripes: (0..n).map(|_| Stripe::default()).collect(),
            mask: n - 1,
            script_since: AtomicU64::new(0),
            script_kind: AtomicU8::new(0),
            epoch: Instant::now(),
        }
    }
}

impl ExecGate {
    /// Shared access for one command of client `client_id`.
    #[inline]
    pub fn shared(&self, client_id: u64) -> RwLockReadGuard<'_, ()> {
        self.stripes[(client_id as usize) & self.mask].0.read()
    }

    /// Shared access, unless a script holds the gate past `busy-reply-threshold`: `None`
    /// then (the caller answers BUSY). Waiting costs nothing more than [`Self::shared`] when
    /// the gate is free.
    #[inline]
    pub fn shared_unless_busy(&self, client_id: u64) -> Option<RwLockReadGuard<'_, ()>> {
        let lock = &self.stripes[(client_id as usize) & self.mask].0;
        loop {
            if let Some(g) = lock.try_read_for(SLICE) {
                return Some(g);
            }
            if self.busy() {
                return None;
            }
        }
    }

    /// A script has run past `busy-reply-threshold` and still runs.
    #[inline]
    pub fn busy(&self) -> bool {
        let since = self.script_since.load(Ordering::Relaxed);
        since != 0 && self.past_threshold(since)
    }

    #[cold]
    fn past_threshold(&self, since: u64) -> bool {
        let limit = super::BUSY_REPLY_THRESHOLD_MS.load(Ordering::Relaxed);
        limit > 0 && self.now_ms().saturating_sub(since) >= limit
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64 + 1
    }

    /// A script (`kind`: [`SCRIPT_EVAL`] or [`SCRIPT_FUNCTION`]) starts, holding the gate.
    pub fn script_started(&self, kind: u8) {
        self.script_kind.store(kind, Ordering::Relaxed);
        self.script_since.store(self.now_ms(), Ordering::Release);
    }

    pub fn script_ended(&self) {
        self.script_since.store(0, Ordering::Release);
    }

    /// The running script's kind and how long it has run, if one runs.
    pub fn script_running(&self) -> Option<(u8, u64)> {
        let since = self.script_since.load(Ordering::Acquire);
        (since != 0).then(|| {
            (
                self.script_kind.load(Ordering::Relaxed),
                self.now_ms().saturating_sub(since),
            )
        })
    }

    /// Redis's `slowevalerr` / `slowscripterr`: the BUSY error for the script running now.
    pub fn busy_error(&self) -> &'static str {
        busy_text(self.script_kind.load(Ordering::Relaxed))
    }

    /// Exclusive access for EXEC, unless a script holds the gate past
    /// `busy-reply-threshold` (`None`: EXEC answers BUSY instead of stalling its I/O thread
    /// behind a script that may never end).
    pub fn exclusive_unless_busy(&self) -> Option<Vec<RwLockWriteGuard<'_, ()>>> {
        let mut guards = Vec::with_capacity(self.stripes.len());
        for s in &self.stripes {
            loop {
                if let Some(g) = s.0.try_write_for(SLICE) {
                    guards.push(g);
                    break;
                }
                if self.busy() {
                    return None;
                }
            }
        }
        Some(guards)
    }

    /// Exclusive access for EXEC: no other command runs until the guards drop.
    pub fn exclusive(&self) -> Vec<RwLockWriteGuard<'_, ()>> {
        self.stripes.iter().map(|s| s.0.write()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    /// Cost of taking the gate shared from two threads at once, striped (each thread its own
    /// stripe) against one shared RwLock. Run with
    /// `cargo test --release --lib gate -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn measure_shared_acquire() {
        const N: u64 = 20_000_000;
        let gate = ExecGate::default();
        let single = RwLock::new(());
        for round in 0..3 {
            let t = Instant::now();
            std::thread::scope(|s| {
                for id in 0..2u64 {
                    let gate = &gate;
                    s.spawn(move || {
                        for _ in 0..N {
                            drop(std::hint::black_box(gate.shared(id)));
                        }
                    });
                }
            });
            let striped = t.elapsed().as_nanos() as f64 / N as f64;
            let t = Instant::now();
            std::thread::scope(|s| {
                for _ in 0..2 {
                    let single = &single;
                    s.spawn(move || {
                        for _ in 0..N {
                            drop(std::hint::black_box(single.read()));
                        }
                    });
                }
            });
            let one = t.elapsed().as_nanos() as f64 / N as f64;
            println!("round {round}: striped {striped:.1} ns/acquire, single lock {one:.1} ns/acquire (2 threads)");
        }
    }

    #[test]
    fn exclusive_excludes_every_stripe() {
        for (threads, stripes) in [(1, 1), (2, ExecGate::default().stripes.len())] {
            let gate = ExecGate::for_io_threads(threads);
            assert_eq!(gate.stripes.len(), stripes);
            let w = gate.exclusive_unless_busy().expect("no script runs");
            assert_eq!(w.len(), stripes);
            for id in 0..64 {
                assert!(gate.stripes[id as usize & gate.mask].0.try_read().is_none());
            }
            drop(w);
            assert!(gate.stripes[5 & gate.mask].0.try_read().is_some());
        }
    }
}
