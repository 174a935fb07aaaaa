//! maxmemory: the access clocks every key carries (LRU clock or LFU counter, as Redis) and
//! eviction by sampling (`maxmemory-samples` keys per round, the best candidate goes).
//!
//! The settings live in process-wide atomics because every key access reads the policy
//! (to know whether to keep an LRU clock or an LFU counter) and a configuration lock there
//! would cost more than the access itself.

use crate::store::Store;
use crate::util::clock::now_ms;
use std::cell::Cell;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::OnceLock;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    NoEviction,
    AllkeysLru,
    VolatileLru,
    AllkeysLfu,
    VolatileLfu,
    AllkeysRandom,
    VolatileRandom,
    VolatileTtl,
}

impl Policy {
    /// From its `maxmemory-policy` name (`config::POLICIES` order).
    pub fn from_name(name: &str) -> Policy {
        match name {
            "allkeys-lru" => Policy::AllkeysLru,
            "volatile-lru" => Policy::VolatileLru,
            "allkeys-lfu" => Policy::AllkeysLfu,
            "volatile-lfu" => Policy::VolatileLfu,
            "allkeys-random" => Policy::AllkeysRandom,
            "volatile-random" => Policy::VolatileRandom,
            "volatile-ttl" => Policy::VolatileTtl,
            _ => Policy::NoEviction,
        }
    }
    fn from_u8(v: u8) -> Policy {
        [
            Policy::NoEviction,
            Policy::AllkeysLru,
            Policy::VolatileLru,
            Policy::AllkeysLfu,
            Policy::VolatileLfu,
            Policy::AllkeysRandom,
            Policy::VolatileRandom,
            Policy::VolatileTtl,
        ][v as usize & 7]
    }
    pub fn is_lfu(self) -> bool {
        matches!(self, Policy::AllkeysLfu | Policy::VolatileLfu)
    }
    fn volatile_only(self) -> bool {
        matches!(
            self,
            Policy::VolatileLru
                | Policy::VolatileLfu
                | Policy::VolatileRandom
                | Policy::VolatileTtl
        )
    }
}

static POLICY: AtomicU8 = AtomicU8::new(0);
static MAXMEMORY: AtomicU64 = AtomicU64::new(0);
static SAMPLES: AtomicU32 = AtomicU32::new(5);

/// Redis's LFU defaults: `lfu-log-factor 10`, `lfu-decay-time 1` (minute), `LFU_INIT_VAL 5`.
const LFU_LOG_FACTOR: f64 = 10.0;
const LFU_INIT: u32 = 5;

/// Applies `maxmemory`, `maxmemory-policy` and `maxmemory-samples`.
pub fn configure(maxmemory: u64, policy: &str, samples: u32) {
    MAXMEMORY.store(maxmemory, Ordering::Relaxed);
    POLICY.store(Policy::from_name(policy) as u8, Ordering::Relaxed);
    SAMPLES.store(samples.max(1), Ordering::Relaxed);
    // Scores from another policy mean nothing under this one.
    pool().lock().clear();
}

pub fn policy() -> Policy {
    Policy::from_u8(POLICY.load(Ordering::Relaxed))
}

pub fn maxmemory() -> u64 {
    MAXMEMORY.load(Ordering::Relaxed)
}

/// Keys are stamped with the coarse process clock (tenths of a second since start).
use crate::util::clock::{coarse as clock, tick};

fn minutes() -> u32 {
    clock() / 600
}

/// The access word of a newly written key.
pub fn fresh() -> u32 {
    if policy().is_lfu() {
        ((minutes() & 0xffff) << 8) | LFU_INIT
    } else {
        clock()
    }
}

thread_local! {
    /// Set while a command of a CLIENT NO-TOUCH client runs on this thread (handlers never
    /// await, so the thread is the command's): its reads leave the access clocks.
    static NO_TOUCH: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Marks the start (`true`) and end (`false`) of a command that must not touch keys.
pub fn set_no_touch(on: bool) {
    NO_TOUCH.with(|c| c.set(on));
}

/// The access word after a read: LRU stamps the clock; LFU decays the counter by the minutes
/// elapsed and increments it logarithmically (Redis's `updateLFU`); unchanged while a
/// NO-TOUCH client's command runs.
pub fn touched(old: u32) -> u32 {
    if NO_TOUCH.with(|c| c.get()) {
        return old;
    }
    if policy().is_lfu() {
        let mut c = lfu_counter(old);
        if c < 255 {
            let base = c.saturating_sub(LFU_INIT) as f64;
            let p = 1.0 / (base * LFU_LOG_FACTOR + 1.0);
            if (rand_u64() as f64 / u64::MAX as f64) < p {
                c += 1;
            }
        }
        ((minutes() & 0xffff) << 8) | c
    } else {
        clock()
    }
}

/// The LFU counter after decay (OBJECT FREQ).
pub fn lfu_counter(access: u32) -> u32 {
    let last = access >> 8;
    let now = minutes() & 0xffff;
    let elapsed = if now >= last {
        now - last
    } else {
        65536 - last + now
    };
    (access & 0xff).saturating_sub(elapsed)
}

/// Milliseconds since the last access (OBJECT IDLETIME; LRU policies).
pub fn idle_ms(access: u32) -> u64 {
    clock().saturating_sub(access) as u64 * 100
}

/// A fast thread-local pseudo-random number (xorshift64*), for sampling.
pub fn rand_u64() -> u64 {
    thread_local! {
        static STATE: Cell<u64> = Cell::new({
            let t = now_ms() as u64;
            let a = &t as *const u64 as u64;
            (t ^ a.rotate_left(29)) | 1
        });
    }
    STATE.with(|s| {
        let mut x = s.get();
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        s.set(x);
        x.wrapping_mul(0x2545F4914F6CDD1D)
    })
}

/// What `maxmemory` bounds: the whole process's heap (`util::alloc`), as Redis bounds
/// `used_memory`; the key space's estimate where the allocator does not count.
fn used(store: &Store) -> u64 {
    crate::util::alloc::allocated().unwrap_or(store.used_bytes() as u64)
}

/// Before a command that may grow memory: evicts until `used` is under `maxmemory`.
/// False when it cannot get there (noeviction, or nothing left to evict under the policy).
pub fn make_room(store: &Store) -> bool {
    let max = maxmemory();
    if max == 0 {
        return true;
    }
    tick();
    let policy = policy();
    // Bounded work per command, so one client never stalls on a huge overshoot (Redis
    // bounds its eviction loop by time the same way); the next write continues.
    for _ in 0..10_000 {
        if used(store) <= max {
            return true;
        }
        if policy == Policy::NoEviction || !evict_one(store, policy) {
            return false;
        }
    }
    used(store) <= max
}

/// Redis's eviction pool: the best candidates seen by recent samplings (score, shard, db,
/// key), best last. Sampling 5 keys per eviction alone often finds no old key once few are
/// left; keeping the best of the last rounds brings the choice close to true LRU/LFU/TTL.
const POOL_SIZE: usize = 16;

type Candidate = (u64, usize, usize, bytes::Bytes);

fn pool() -> &'static parking_lot::Mutex<Vec<Candidate>> {
    static POOL: OnceLock<parking_lot::Mutex<Vec<Candidate>>> = OnceLock::new();
    POOL.get_or_init(|| parking_lot::Mutex::new(Vec::with_capacity(POOL_SIZE + 64)))
}

/// Samples keys in one shard (a random one first, others if it has no candidate), merges
/// them into the pool, and evicts the best pooled key that still exists.
fn evict_one(store: &Store, policy: Policy) -> bool {
    let n = store.shard_count();
    let first = rand_u64() as usize % n;
    let samples = SAMPLES.load(Ordering::Relaxed) as usize;
    let volatile = policy.volatile_only();
    let random = matches!(policy, Policy::AllkeysRandom | Policy::VolatileRandom);
    let now = now_ms();
    let mut fresh: Vec<Candidate> = Vec::with_capacity(samples);
    for i in 0..n {
        let shard_id = (first + i) % n;
        let mut shard = store.lock(shard_id);
        for (db, d) in shard.dbs.iter().enumerate() {
            let ks = &d.keys;
            let have = if volatile { ks.volatile() } else { ks.len() };
            if have == 0 {
                continue;
            }
            for _ in 0..samples {
                let Some(e) = ks.random(rand_u64(), volatile) else {
                    break;
                };
                let score = match policy {
                    Policy::AllkeysLru | Policy::VolatileLru => idle_ms(e.access()),
                    Policy::AllkeysLfu | Policy::VolatileLfu => {
                        255 - lfu_counter(e.access()) as u64
                    }
                    Policy::VolatileTtl => {
                        u64::MAX - (ks.deadline_of(e).unwrap_or(i64::MAX).max(now) - now) as u64
                    }
                    _ => 0,
                };
                fresh.push((score, shard_id, db, bytes::Bytes::copy_from_slice(e.key())));
                if random {
                    break;
                }
            }
        }
        if random {
            // No ranking: evict the sample at once.
            if let Some((_, _, db, key)) = fresh.pop() {
                return shard.dbs[db].keys.evict(&key);
            }
            continue;
        }
        if !fresh.is_empty() {
            break;
        }
    }
    if random {
        return false;
    }
    let mut pool = pool().lock();
    for c in fresh {
        if !pool.iter().any(|p| p.1 == c.1 && p.2 == c.2 && p.3 == c.3) {
            pool.push(c);
        }
    }
    pool.sort_unstable_by_key(|c| c.0);
    let excess = pool.len().saturating_sub(POOL_SIZE);
    pool.drain(..excess);
    // The best candidate that still exists goes; stale entries (deleted since) are dropped.
    while let Some((_, shard_id, db, key)) = pool.pop() {
        let exists = shard_id < store.shard_count() && db < store.databases();
        if exists && store.lock(shard_id).dbs[db].keys.evict(&key) {
            return true;
        }
    }
    false
}
