//! The process's allocations, counted: the binary's global allocator is mimalloc behind
//! [`Counting`], which adds the size class of every block it hands out ([`alloc_size`])
//! and takes it back when the block is freed, so [`allocated`] is what the process holds
//! on the heap — key space, documents, connection buffers, scripts, everything — as
//! Redis's `used_memory` counts every `zmalloc`. `maxmemory` bounds that figure.
//!
//! Why per-thread counters: a shared atomic would take a locked instruction on one cache
//! line that every thread writes, several times per request. Each thread owns one padded
//! slot that only it writes (a plain load and store, no locked instruction); [`allocated`]
//! sums the slots. A block freed by another thread than the one that allocated it moves
//! the count from one slot to the other, which the sum does not mind. Slots are handed out
//! once per thread and never reclaimed (a thread-exit hook could allocate inside the
//! allocator); the threads past [`SLOTS`] (short-lived background threads, in a long run)
//! share one atomic.
//!
//! The size class rather than the requested size: it is what the allocator really takes,
//! and both sides of a block's life compute it from the same layout, so the count never
//! drifts.

use crate::util::mem::alloc_size;
use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};

const SLOTS: usize = 64;

#[repr(align(128))]
struct Slot(AtomicI64);

#[allow(clippy::declare_interior_mutable_const)]
const ZERO: Slot = Slot(AtomicI64::new(0));
static COUNTS: [Slot; SLOTS] = [ZERO; SLOTS];
static SHARED: AtomicI64 = AtomicI64::new(0);
static NEXT_SLOT: AtomicUsize = AtomicUsize::new(0);
/// Set once the binary installs [`Counting`]: library users (unit tests) have no count.
static ACTIVE: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// This thread's slot, `usize::MAX` until its first allocation.
    static MY_SLOT: Cell<usize> = const { Cell::new(usize::MAX) };
}

#[inline]
fn count(delta: i64) {
    let slot = MY_SLOT.try_with(|s| {
        let mut i = s.get();
        if i == usize::MAX {
            i = NEXT_SLOT.fetch_add(1, Ordering::Relaxed);
            s.set(i);
        }
        i
    });
    match slot {
        Ok(i) if i < SLOTS => {
            // Only this thread writes its slot: no read-modify-write needed.
            let c = &COUNTS[i].0;
            c.store(c.load(Ordering::Relaxed) + delta, Ordering::Relaxed);
        }
        _ => {
            SHARED.fetch_add(delta, Ordering::Relaxed);
        }
    }
}

/// Bytes the process holds on the heap (size classes of the live blocks), or `None` when
/// the global allocator is not [`Counting`].
pub fn allocated() -> Option<u64> {
    if !ACTIVE.load(Ordering::Relaxed) {
        return None;
    }
    let sum: i64 = COUNTS
        .iter()
        .map(|s| s.0.load(Ordering::Relaxed))
        .sum::<i64>()
        + SHARED.load(Ordering::Relaxed);
    Some(sum.max(0) as u64)
}

/// The most [`allocated`] was when sampled ([`sample_peak`]), as Redis's `stat_peak_memory`.
static PEAK: AtomicU64 = AtomicU64::new(0);
/// What was allocated once the server was ready (Redis's `used_memory_startup`).
static STARTUP: AtomicU64 = AtomicU64::new(0);

/// Samples [`allocated`] into the peak, as Redis's cron does ten times a second (a peak
/// between two samples is not seen); returns the peak.
pub fn sample_peak() -> u64 {
    let now = allocated().unwrap_or(0);
    PEAK.fetch_max(now, Ordering::Relaxed).max(now)
}

/// Records what the process holds once it is ready to serve (the baseline MEMORY STATS
/// subtracts to tell the data set from the server's own memory).
pub fn mark_startup() {
    STARTUP.store(allocated().unwrap_or(0), Ordering::Relaxed);
    sample_peak();
}

/// What [`mark_startup`] recorded (0 before).
pub fn startup() -> u64 {
    STARTUP.load(Ordering::Relaxed)
}

/// mimalloc, counting what it hands out. Install with
/// `#[global_allocator] static GLOBAL: Counting = Counting;`.
pub struct Counting;

// SAFETY: every call is forwarded to mimalloc's own `GlobalAlloc` with the same arguments;
// the counting touches only atomics and a `const`-initialized thread-local (no allocation,
// no destructor), so it cannot re-enter the allocator.
unsafe impl GlobalAlloc for Counting {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as received.
        let p = unsafe { mimalloc::MiMalloc.alloc(layout) };
        if !p.is_null() {
            count(alloc_size(layout.size()) as i64);
        }
        p
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as received.
        let p = unsafe { mimalloc::MiMalloc.alloc_zeroed(layout) };
        if !p.is_null() {
            count(alloc_size(layout.size()) as i64);
        }
        p
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded as received.
        unsafe { mimalloc::MiMalloc.dealloc(ptr, layout) };
        count(-(alloc_size(layout.size()) as i64));
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded as received.
        let p = unsafe { mimalloc::MiMalloc.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            count(alloc_size(new_size) as i64 - alloc_size(layout.size()) as i64);
        }
        p
    }
}

/// Marks the counts as meaningful: called by the binary that installs [`Counting`], first
/// thing in `main` (what was allocated before is in the count too).
pub fn activate() {
    ACTIVE.store(true, Ordering::Relaxed);
    // How long mimalloc keeps a freed page's memory before giving it back to the OS. Its
    // default (1 s in mimalloc 3) is checked only when a thread next allocates, so memory
    // freed just before the server goes quiet stays resident: 10,000 clients that each ran
    // one command and then idled kept their released 16 KiB read buffers in RSS, about
    // 1.2 KB a connection more than the heap held (3.7 KB against 2.5 KB, measured with 10 ms
    // here). 10 ms is mimalloc 2's default.
    // SAFETY: setting an option is a plain store into mimalloc's option table.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, PURGE_DELAY_MS) };
    disable_thp();
}

/// Turns transparent huge pages off for the process, as Redis does at start (`disable-thp
/// yes`, its default). mimalloc asks for huge pages on its arenas (`madvise`), and a 2 MiB
/// page is resident as soon as one byte of it is touched and stays so until every 4 KiB of
/// it is free: an idle server held 8 MiB of arena for 200 KB of heap, and under eviction
/// churn (maxmemory, 1 KB values) the freed blocks scattered over huge pages kept RSS far
/// above `used_memory`. mimalloc's own switch (`MIMALLOC_ALLOW_THP=0`) is read only when it
/// initializes, before `main`; the flag set here applies to every page faulted from now on.
fn disable_thp() {
    #[cfg(target_os = "linux")]
    // SAFETY: PR_SET_THP_DISABLE takes no pointers; it sets a flag of the calling process.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
}

/// MEMORY PURGE: asks mimalloc to give free memory back to the OS now. `mi_collect(true)`
/// collects only the calling thread's heap (its free pages, its delayed frees) and the
/// arenas' abandoned and purgeable pages shared by all threads; other threads' heaps keep
/// their free pages until they collect themselves (mimalloc does so as they allocate).
pub fn collect() {
    // SAFETY: mi_collect takes no pointers and may be called from any thread at any time.
    unsafe { libmimalloc_sys::mi_collect(true) };
}

/// See [`activate`].
const PURGE_DELAY_MS: std::ffi::c_long = 10;
/// `mi_option_purge_delay` in mimalloc 3's `mi_option_e` (the sys crate names only some of
/// the options); a unit test holds it to that option's default.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

#[cfg(test)]
mod purge_delay_tests {
    /// The index really is the purge delay: mimalloc 3 gives it 1000 ms unless set (the
    /// unit tests run on the system allocator, so nothing here set it; an environment
    /// variable could, hence the check for it).
    #[test]
    fn the_option_index_is_the_purge_delay() {
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
            return;
        }
        // SAFETY: reading an option is a plain load from mimalloc's option table.
        let v = unsafe { libmimalloc_sys::mi_option_get(super::MI_OPTION_PURGE_DELAY) };
        assert_eq!(v, 1000);
    }
}
