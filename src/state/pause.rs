//! CLIENT PAUSE / CLIENT UNPAUSE (Redis 7's `pauseClients` for the client command): while a
//! pause is in force, the commands it covers wait before they run — every command under
//! `ALL`, under `WRITE` those that write or may replicate (Redis's `is_may_replicate_command`)
//! — and run in order once it ends (its deadline, or CLIENT UNPAUSE).
//!
//! A waiting connection sleeps on [`Pause::changed`] and the deadline: it costs no CPU.
//! Outside a pause the connection's whole check is one relaxed load ([`active`]).

use parking_lot::Mutex;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::Instant;
use tokio::sync::Notify;

pub const OFF: u8 = 0;
pub const WRITE: u8 = 1;
pub const ALL: u8 = 2;

/// The mode in force (OFF, WRITE, ALL), possibly past its deadline (see [`current`]).
static MODE: AtomicU8 = AtomicU8::new(OFF);
static END: Mutex<Option<Instant>> = Mutex::new(None);
/// Connections waiting for the pause to end (counted in INFO's `blocked_clients`, as Redis
/// counts its postponed clients).
static POSTPONED: AtomicUsize = AtomicUsize::new(0);

fn changed() -> &'static Notify {
    static N: OnceLock<Notify> = OnceLock::new();
    N.get_or_init(Notify::new)
}

/// Whether a pause may be in force (it may also have just expired).
#[inline]
pub fn active() -> bool {
    MODE.load(Ordering::Relaxed) != OFF
}

/// The mode in force and its deadline; a pause past its deadline is ended here.
pub fn current() -> (u8, Option<Instant>) {
    let mut end = END.lock();
    let mode = MODE.load(Ordering::Relaxed);
    match *end {
        Some(e) if mode != OFF && e <= Instant::now() => {
            *end = None;
            MODE.store(OFF, Ordering::Relaxed);
            changed().notify_waiters();
            (OFF, None)
        }
        e => (mode, e),
    }
}

/// CLIENT PAUSE: a pause already in force keeps the stronger mode and the later deadline,
/// as Redis merges a purpose's pause events.
pub fn pause(mode: u8, end: Instant) {
    let (old, old_end) = current();
    let mut e = END.lock();
    *e = Some(old_end.map_or(end, |o| o.max(end)));
    MODE.store(old.max(mode), Ordering::Relaxed);
    drop(e);
    changed().notify_waiters();
}

/// CLIENT UNPAUSE.
pub fn unpause() {
    let mut e = END.lock();
    *e = None;
    MODE.store(OFF, Ordering::Relaxed);
    drop(e);
    changed().notify_waiters();
}

pub fn postponed() -> usize {
    POSTPONED.load(Ordering::Relaxed)
}

/// Waits while a pause in force covers the request (`covered(mode)`). Returns at once when
/// none does.
pub async fn wait_while(covered: impl Fn(u8) -> bool) {
    /// Uncounts the connection however the wait ends (also when it is dropped: a kill).
    struct Counted;
    impl Drop for Counted {
        fn drop(&mut self) {
            POSTPONED.fetch_sub(1, Ordering::Relaxed);
        }
    }
    let mut counted = None;
    loop {
        let notified = changed().notified();
        tokio::pin!(notified);
        // Registered before reading the state, so a change between the two is not missed.
        notified.as_mut().enable();
        let (mode, end) = current();
        if mode == OFF || !covered(mode) {
            break;
        }
        if counted.is_none() {
            POSTPONED.fetch_add(1, Ordering::Relaxed);
            counted = Some(Counted);
        }
        match end {
            Some(end) => {
                tokio::select! {
                    _ = notified => {}
                    _ = tokio::time::sleep_until(end.into()) => {}
                }
            }
            None => notified.await,
        }
    }
    drop(counted);
}
