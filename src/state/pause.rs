//! CLIENT PAUSE / CLIENT UNPAUSE (Redis 7's `pauseClients` for the client command): while a
//! pause is in force, the commands it covers wait before they run — every command under
//! `ALL`, under `WRITE` those that write or may replicate (Redis's `is_may_replicate_command`)
//! — and run in order once it ends (its deadline, or CLIENT UNPAUSE).
//!
//! A waiting connection sleeps on [`Pause::changed`] and the deadline: it costs no CPU.
//! Outside a pause the connection's whole check is one relaxed load ([`active`]).

use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::Instant;
use tokio::sync::Notify;

pub const OFF: u8 = 0;
pub const WRITE: u8 = 1;
pub const ALL: u8 = 2;

/// Why writes (or all commands) are paused: Redis's pause purposes. Each keeps its own mode
/// and deadline, so ending one (CLIENT UNPAUSE, a manual failover's end) leaves the others.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Purpose {
    /// CLIENT PAUSE.
    Client = 0,
    /// SHUTDOWN's final save.
    Shutdown = 1,
    /// A cluster manual failover (the master waiting for its replica) or FAILOVER.
    Failover = 2,
}

const PURPOSES: usize = 3;

/// The strongest mode in force over every purpose (OFF, WRITE, ALL), possibly past its
/// deadline (see [`current`]).
static MODE: AtomicU8 = AtomicU8::new(OFF);
/// Each purpose's mode and deadline (`None`: until it is ended).
static BY_PURPOSE: Mutex<[(u8, Option<Instant>); PURPOSES]> = Mutex::new([(OFF, None); PURPOSES]);
/// Connections waiting for the pause to end (counted in INFO's `blocked_clients`, as Redis
/// counts its postponed clients).
static POSTPONED: AtomicUsize = AtomicUsize::new(0);

fn changed() -> &'static Notify {
    static N: OnceLock<Notify> = OnceLock::new();
    N.get_or_init(Notify::new)
}

/// Whether a pause may be in force (it may also have just expired): CLIENT PAUSE and the
/// like, or writes to the slots an atomic slot migration is handing over.
#[inline]
pub fn active() -> bool {
    MODE.load(Ordering::Relaxed) != OFF || SLOTS_ON.load(Ordering::Relaxed)
}

/// Writes to these slots wait (an atomic slot migration's flip), until the deadline or
/// [`unpause_slots`]: one bit a slot.
static SLOTS: Mutex<Option<(Box<[u64; 256]>, Instant)>> = Mutex::new(None);
static SLOTS_ON: AtomicBool = AtomicBool::new(false);

/// Holds writes to `slots` until `end` or [`unpause_slots`].
pub fn pause_slots(slots: impl Iterator<Item = u16>, end: Instant) {
    let mut bits = Box::new([0u64; 256]);
    for s in slots {
        bits[(s as usize) / 64] |= 1 << (s % 64);
    }
    *SLOTS.lock() = Some((bits, end));
    SLOTS_ON.store(true, Ordering::Relaxed);
    changed().notify_waiters();
}

pub fn unpause_slots() {
    *SLOTS.lock() = None;
    SLOTS_ON.store(false, Ordering::Relaxed);
    changed().notify_waiters();
}

/// The end of the slot pause in force, if one is.
fn slots_end() -> Option<Instant> {
    if !SLOTS_ON.load(Ordering::Relaxed) {
        return None;
    }
    let mut g = SLOTS.lock();
    match g.as_ref() {
        Some((_, end)) if *end > Instant::now() => Some(*end),
        _ => {
            *g = None;
            SLOTS_ON.store(false, Ordering::Relaxed);
            None
        }
    }
}

/// Whether writes to `slot` are held now.
pub fn slot_paused(slot: u16) -> bool {
    slots_end().is_some()
        && SLOTS
            .lock()
            .as_ref()
            .is_some_and(|(bits, _)| bits[(slot as usize) / 64] & (1 << (slot % 64)) != 0)
}

/// The strongest mode in force and the deadline that ends it (`None`: none of the
/// purposes in force has one); purposes past their deadline end here.
pub fn current() -> (u8, Option<Instant>) {
    let mut by = BY_PURPOSE.lock();
    let now = Instant::now();
    let mut expired = false;
    for p in by.iter_mut() {
        if p.0 != OFF && p.1.is_some_and(|e| e <= now) {
            *p = (OFF, None);
            expired = true;
        }
    }
    let (mode, end) = combined(&by);
    MODE.store(mode, Ordering::Relaxed);
    drop(by);
    if expired {
        changed().notify_waiters();
    }
    (mode, end)
}

/// The strongest mode, and when the purposes holding it end: the latest of their deadlines,
/// `None` when one of them has none.
fn combined(by: &[(u8, Option<Instant>); PURPOSES]) -> (u8, Option<Instant>) {
    let mode = by.iter().map(|p| p.0).max().unwrap_or(OFF);
    if mode == OFF {
        return (OFF, None);
    }
    let mut end: Option<Instant> = None;
    for p in by.iter().filter(|p| p.0 == mode) {
        match p.1 {
            None => return (mode, None),
            Some(e) => end = Some(end.map_or(e, |x: Instant| x.max(e))),
        }
    }
    (mode, end)
}

/// A pause for `purpose` (`end` None: until [`unpause`]). A pause already in force for the
/// same purpose keeps the stronger mode and the later deadline, as Redis merges a purpose's
/// pause events.
pub fn pause(purpose: Purpose, mode: u8, end: Option<Instant>) {
    current();
    let mut by = BY_PURPOSE.lock();
    let p = &mut by[purpose as usize];
    let merged_end = if p.0 == OFF {
        end
    } else {
        match (p.1, end) {
            (Some(a), Some(b)) => Some(a.max(b)),
            _ => None,
        }
    };
    *p = (p.0.max(mode), merged_end);
    MODE.store(combined(&by).0, Ordering::Relaxed);
    drop(by);
    changed().notify_waiters();
}

/// Ends `purpose`'s pause (CLIENT UNPAUSE ends the client's only).
pub fn unpause(purpose: Purpose) {
    let mut by = BY_PURPOSE.lock();
    by[purpose as usize] = (OFF, None);
    MODE.store(combined(&by).0, Ordering::Relaxed);
    drop(by);
    changed().notify_waiters();
}

pub fn postponed() -> usize {
    POSTPONED.load(Ordering::Relaxed)
}

/// Waits while a pause in force covers the request (`covered(mode)`, `mode` OFF when only a
/// slot pause is in force). Returns at once when none does.
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
        // `covered` also says whether the request writes to a slot held by a migration's
        // flip, whose end counts too.
        if !covered(mode) {
            break;
        }
        let end = if mode == OFF { slots_end() } else { end };
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
