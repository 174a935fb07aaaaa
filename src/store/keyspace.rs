//! One database's key space inside one shard: the keys, their deadlines (kept in agreement
//! with the shard's timing wheel), their access clocks for eviction, and a byte estimate.
//!
//! The table is split into [`SEGMENTS`] hashbrown tables chosen by fixed bits of the key's
//! hash. A key never changes segment, so a SCAN cursor that walks segments in order returns
//! every key present for the whole iteration however the tables grow, and a table resize
//! moves only 1/SEGMENTS of the shard's keys at once (no long pause at 1M keys).
//!
//! Every write goes through a few choke points ([`Keyspace::set`], [`Keyspace::update`],
//! [`Keyspace::set_deadline`], [`Keyspace::remove`]) and every removal through
//! `Books::removed` with its reason, which is where WATCH and keyspace notifications hook.
//! A key is added only by `set` (its insert, or the write over a key past its deadline),
//! which with `Books::removed` is where the cluster slot index (`store::slots`) hooks.

use crate::store::eviction;
use crate::store::hash::HashValue;
use crate::store::list::ListValue;
use crate::store::set::SetValue;
use crate::store::slots::{slot_of, SlotIndex};
use crate::store::stream::StreamValue;
use crate::store::zset::ZSetValue;
use crate::util::inline::InlineBytes;
use crate::util::mem::alloc_size;
use crate::util::packed::PackedBytes;
use crate::wheel::{EntryId, Wheel};
use bytes::Bytes;
use hashbrown::HashTable;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// Segments per key space (a power of two; taken from bits 20..30 of the key hash, which
/// neither the shard choice (bits 40..56) nor hashbrown (low bits for the bucket, top 7 for
/// the tag) depends on, so every segment of a shard is used evenly).
pub const SEGMENTS: usize = 1024;
/// Wheel resolution for key deadlines. The lazy check on read is exact to the millisecond;
/// the tick only decides how soon after its deadline the sweep reclaims a key.
pub const WHEEL_TICK_MS: u64 = 1;

/// Redis's `OBJ_ENCODING_EMBSTR_SIZE_LIMIT`.
const EMBSTR_LIMIT: usize = 44;

pub fn segment_of(hash: u64) -> usize {
    ((hash >> 20) as usize) & (SEGMENTS - 1)
}

pub fn hash_key(hasher: &hashbrown::DefaultHashBuilder, key: &[u8]) -> u64 {
    hasher.hash_one(key)
}

/// Current Unix time in milliseconds.
use crate::util::clock::{expiry_now_ms, now_ms};

/// A value in the key space.
#[derive(Debug, Clone)]
pub enum Value {
    /// A string (`embstr` up to 44 bytes, `raw` beyond, as Redis reports them). Packed
    /// (pointer and `u32` length, 12 bytes) so the whole `Value` is 16 bytes and an entry
    /// 48: see `util::packed`. (A thin pointer with the length in the allocation was tried:
    /// the 4-byte header cost a 32-byte value a 48-byte block.)
    Str(PackedBytes),
    /// A string that is a canonical 64-bit integer, stored as Redis's `int` encoding.
    Int(i64),
    /// A string changed in place by APPEND or SETRANGE, which Redis always reports as `raw`.
    Raw(PackedBytes),
    /// Held in place (12 bytes: see `HashValue`), not boxed like the other aggregates.
    Hash(HashValue),
    /// Held in place while one node (see `ListValue`), as a hash.
    List(ListValue),
    Set(Box<SetValue>),
    ZSet(Box<ZSetValue>),
    Stream(Box<StreamValue>),
}

// Strings, hashes and lists in place; every key's entry depends on this size.
const _: () = assert!(std::mem::size_of::<Value>() == 16);

impl Value {
    /// A string value in Redis's encoding: integers that round-trip are kept as integers.
    pub fn string(b: &[u8]) -> Value {
        if b.len() <= 20 {
            if let Some(i) = crate::util::num::parse_i64(b) {
                return Value::Int(i);
            }
        }
        Value::Str(PackedBytes::from(b))
    }

    /// A string built by APPEND or SETRANGE (Redis's `raw`).
    pub fn raw(v: Vec<u8>) -> Value {
        Value::Raw(PackedBytes::from(v))
    }

    /// A string kept as given, even if it reads as an integer (INCRBYFLOAT's result).
    pub fn text(b: &[u8]) -> Value {
        Value::Str(PackedBytes::from(b))
    }

    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Str(_) | Value::Raw(_) | Value::Int(_) => "string",
            Value::Hash(_) => "hash",
            Value::List(_) => "list",
            Value::Set(_) => "set",
            Value::ZSet(_) => "zset",
            Value::Stream(_) => "stream",
        }
    }

    pub fn encoding(&self) -> &'static str {
        match self {
            Value::Int(_) => "int",
            Value::Str(b) if b.len() <= EMBSTR_LIMIT => "embstr",
            Value::Str(_) | Value::Raw(_) => "raw",
            Value::Hash(h) => h.encoding(),
            Value::List(l) => l.encoding(),
            Value::Set(s) => s.encoding(),
            Value::ZSet(z) => z.encoding(),
            Value::Stream(_) => "stream",
        }
    }

    /// The bytes of a string value (`None` for other types).
    pub fn str_bytes(&self) -> Option<Bytes> {
        match self {
            Value::Str(b) | Value::Raw(b) => Some(Bytes::copy_from_slice(b)),
            Value::Int(i) => Some(Bytes::copy_from_slice(
                itoa::Buffer::new().format(*i).as_bytes(),
            )),
            _ => None,
        }
    }

    /// How much work freeing the value takes, as Redis's `lazyfreeGetFreeEffort` counts it
    /// (allocations to free: a list's nodes, a hashtable's elements, a stream's blocks and
    /// its groups' pending entries; 1 for a value in one buffer). UNLINK frees a value above
    /// [`LAZYFREE_THRESHOLD`] on a background thread.
    pub fn free_effort(&self) -> usize {
        match self {
            Value::Str(_) | Value::Raw(_) | Value::Int(_) => 1,
            Value::Hash(h) if h.encoding() == "hashtable" => h.len(),
            Value::Set(s) if s.encoding() == "hashtable" => s.len(),
            Value::ZSet(z) if z.encoding() == "skiplist" => z.len(),
            Value::List(l) => l.node_count(),
            Value::Stream(x) => x.free_effort(),
            _ => 1,
        }
    }

    /// Heap bytes owned by the value (estimate).
    fn heap(&self) -> usize {
        match self {
            Value::Str(b) | Value::Raw(b) => alloc_size(b.len()),
            Value::Int(_) => 0,
            Value::Hash(h) => h.heap(),
            Value::List(l) => l.heap(),
            Value::Set(s) => std::mem::size_of::<SetValue>() + s.heap(),
            Value::ZSet(z) => std::mem::size_of::<ZSetValue>() + z.heap(),
            Value::Stream(x) => std::mem::size_of::<StreamValue>() + x.heap(),
        }
    }
}

/// Redis's `LAZYFREE_THRESHOLD`: values whose [`Value::free_effort`] is above it are freed
/// in the background by UNLINK.
pub const LAZYFREE_THRESHOLD: usize = 64;

/// A key's value is of another type than the command expects (`WRONGTYPE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WrongType;

/// The aggregate types (hash, list, set, sorted set) as the generic read and write paths of
/// [`Keyspace::read_as`] and [`Keyspace::write_as`] see them.
pub trait Aggregate: Default {
    fn of(v: &Value) -> Option<&Self>;
    fn of_mut(v: &mut Value) -> Option<&mut Self>;
    fn wrap(self) -> Value;
    fn is_empty(&self) -> bool;
}

macro_rules! aggregate {
    ($t:ty, $variant:ident) => {
        aggregate!($t, $variant, Box::new);
    };
    ($t:ty, $variant:ident, $wrap:expr) => {
        impl Aggregate for $t {
            fn of(v: &Value) -> Option<&Self> {
                match v {
                    Value::$variant(x) => Some(x),
                    _ => None,
                }
            }
            fn of_mut(v: &mut Value) -> Option<&mut Self> {
                match v {
                    Value::$variant(x) => Some(x),
                    _ => None,
                }
            }
            fn wrap(self) -> Value {
                Value::$variant($wrap(self))
            }
            fn is_empty(&self) -> bool {
                <$t>::is_empty(self)
            }
        }
    };
}
aggregate!(HashValue, Hash, std::convert::identity);
aggregate!(ListValue, List, std::convert::identity);
aggregate!(SetValue, Set);
aggregate!(ZSetValue, ZSet);
aggregate!(StreamValue, Stream);

#[derive(Clone, Copy, Debug)]
struct Deadline {
    at: i64,
    id: EntryId,
}

/// A key's bytes: up to 22 bytes inside the entry (no allocation of its own, the common
/// case), longer ones boxed.
type KeyBytes = InlineBytes<22>;
const _: () = assert!(std::mem::size_of::<KeyBytes>() == 24);

/// One key, boxed: a table slot holds only the pointer (8 bytes), so the slack of a
/// hashbrown table (between 7/16 and 7/8 full) costs 8-18 bytes per key rather than a whole
/// entry's size. Lookups cost the same one pointer chase as a boxed key did (the key is
/// compared through the pointer either way), and a SET makes one allocation for the entry
/// and its key instead of one for the key alone.
///
/// 48 bytes, a mimalloc size class (64 is the next): the deadline itself lives only in the
/// wheel entry the key points to, so a lookup of a key with a deadline reads the wheel's slab
/// for the lazy expiry check (as Redis reads its `expires` dict), and a key without one
/// pays nothing.
#[derive(Debug)]
pub struct Entry {
    key: KeyBytes,
    pub value: Value,
    /// The index of the key's wheel entry, [`NO_DEADLINE`] for none.
    wheel: u32,
    /// LRU clock or LFU counter, per the eviction policy (see `eviction`).
    access: u32,
}

/// `Entry::wheel` of a key without a deadline (the wheel never hands out this index).
const NO_DEADLINE: u32 = u32::MAX;

impl Entry {
    pub fn key(&self) -> &[u8] {
        &self.key
    }
    pub fn has_deadline(&self) -> bool {
        self.wheel != NO_DEADLINE
    }
    fn wheel_id(&self) -> Option<EntryId> {
        self.has_deadline().then(|| EntryId::from_index(self.wheel))
    }
    fn put_deadline(&mut self, d: Option<Deadline>) {
        self.wheel = d.map_or(NO_DEADLINE, |d| d.id.index());
    }
    pub fn access(&self) -> u32 {
        self.access
    }
    /// Heap bytes the entry owns outside its table slot (key and value allocations). The
    /// tables and the wheel are accounted by their actual allocation sizes.
    fn heap_mem(&self) -> usize {
        std::mem::size_of::<Entry>() + self.key.heap() + self.value.heap()
    }

    /// Estimated bytes this key costs, its share of the table and wheel included
    /// (MEMORY USAGE).
    pub fn mem(&self) -> usize {
        ENTRY_SLOT + self.heap_mem() + if self.has_deadline() { WHEEL_ENTRY } else { 0 }
    }
}

const _: () = assert!(std::mem::size_of::<Entry>() == 48);

/// A table slot (the entry's pointer and its control byte) over hashbrown's average load
/// (between 7/16 and 7/8 full).
const ENTRY_SLOT: usize = (std::mem::size_of::<Box<Entry>>() + 1) * 3 / 2;
/// What a deadline costs in the wheel (one slab slot of 32 bytes over the Vec's growth).
const WHEEL_ENTRY: usize = 40;

/// Adds one to a counter that only the holder of its shard's lock writes: a plain load and
/// store, not a locked read-modify-write, which costs an atomic instruction (a full barrier
/// on x86) on every GET and every write.
#[inline]
fn bump(c: &AtomicU64) {
    c.store(c.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
}

/// Per-shard counters readable without the shard lock (INFO, the maxmemory check).
/// `expired`, `evicted`, `hits`, `misses` and `dirty` are written only under the shard's
/// lock (see `bump`; CONFIG RESETSTAT takes it too); `used` also without it.
#[derive(Default, Debug)]
pub struct ShardCounters {
    /// Estimated bytes of every key space of the shard.
    pub used: AtomicUsize,
    /// Estimated bytes of the shard's parts of every collection (documents, `_id` map,
    /// indexes), kept by each part itself (`CollectionShard::sync_memory`).
    pub documents: Arc<AtomicUsize>,
    pub expired: AtomicU64,
    pub evicted: AtomicU64,
    pub hits: AtomicU64,
    pub misses: AtomicU64,
    /// Changes to keys since start (INFO's `rdb_changes_since_last_save` sums them).
    pub dirty: AtomicU64,
    /// WATCH and keyspace notifications, installed once by the server.
    pub hooks: std::sync::OnceLock<Arc<dyn KeyHooks>>,
}

/// What the server wants to hear from the key space's choke points: WATCH's dirty flags and
/// the `expired` / `evicted` keyspace notifications. Called under the shard lock; the
/// implementation takes only its own leaf locks.
pub trait KeyHooks: Send + Sync {
    /// A key was written, deleted, expired or evicted.
    fn modified(&self, db: usize, key: &[u8]);
    /// A key left by expiry (lazy or sweep) or eviction.
    fn removed(&self, db: usize, key: &[u8], why: Removal);
    /// A key was added.
    fn created(&self, db: usize, key: &[u8]);
    /// A read found no key (where `keyspace_misses` counts).
    fn missed(&self, db: usize, key: &[u8]);
}

impl std::fmt::Debug for dyn KeyHooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KeyHooks")
    }
}

/// Why a key left the key space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Removal {
    /// DEL, UNLINK, GETDEL, RENAME's source, an overwrite by a command that replaces the key.
    Deleted,
    /// Its deadline passed (lazy check or the wheel sweep).
    Expired,
    /// Chosen by the maxmemory policy.
    Evicted,
}

/// How a write treats the key's deadline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ttl {
    /// No deadline (a plain SET).
    Clear,
    /// Keep the deadline the key had (SET KEEPTTL, INCR, APPEND, HSET ...).
    Keep,
    /// A new absolute deadline in Unix milliseconds.
    At(i64),
}

/// Everything but the tables, so a table entry can be borrowed while the books change.
struct Books {
    db: usize,
    len: usize,
    volatile: usize,
    /// Sum of the deadlines of volatile keys, for `avg_ttl`.
    deadline_sum: i128,
    wheel: Option<Box<Wheel<u64>>>,
    mem: usize,
    /// The wheel's allocation as last counted in `mem`.
    wheel_bytes: usize,
    /// The tables' allocations as counted in `mem`.
    table_bytes: usize,
    counters: Arc<ShardCounters>,
    /// The keys of each cluster hash slot: database 0 in cluster mode only, `None`
    /// elsewhere (standalone servers pay one predictable branch where a key is added or
    /// removed). Its bytes are counted in `mem`.
    slots: Option<Box<SlotIndex>>,
    /// On a replica, the hashes of keys its own clients gave a deadline (a writable
    /// replica): the only ones it expires itself (`expiry::sweep_replica_own`).
    own_volatile: Option<Box<hashbrown::HashSet<u64>>>,
}

impl Books {
    /// Follows the wheel's allocation after it changed.
    fn sync_wheel_mem(&mut self) {
        let now = self.wheel.as_ref().map_or(0, |w| w.memory_bytes());
        if now >= self.wheel_bytes {
            self.add_mem(now - self.wheel_bytes);
        } else {
            self.sub_mem(self.wheel_bytes - now);
        }
        self.wheel_bytes = now;
    }

    // `used` stays a locked read-modify-write: a key space freed in the background
    // (FLUSHALL ASYNC) subtracts from it without the shard lock. A change of nothing skips
    // it (an overwrite of a value by one of the same size, the common SET and INCR).
    fn add_mem(&mut self, n: usize) {
        self.mem += n;
        if n > 0 {
            self.counters.used.fetch_add(n, Ordering::Relaxed);
        }
    }
    fn sub_mem(&mut self, n: usize) {
        let n = n.min(self.mem);
        self.mem -= n;
        if n > 0 {
            self.counters.used.fetch_sub(n, Ordering::Relaxed);
        }
    }
    /// A value's bytes went from `before` to `after`: one update of `used` at most.
    fn resize_mem(&mut self, before: usize, after: usize) {
        if after >= before {
            self.add_mem(after - before);
        } else {
            self.sub_mem(before - after);
        }
    }

    /// A key's deadline and wheel entry (`None` without one).
    fn deadline(&self, e: &Entry) -> Option<Deadline> {
        let id = e.wheel_id()?;
        let at = self.wheel.as_ref()?.time_of(id)?;
        Some(Deadline { at, id })
    }

    /// Is the key's deadline at or before `now`? The clock is read only for a key that has
    /// a deadline.
    fn due(&self, e: &Entry, now: impl FnOnce() -> i64) -> bool {
        // While the journal is replayed nothing expires lazily (see `journal::loading`), and
        // a replica's master sees its keys as it has them.
        self.deadline(e).is_some_and(|d| d.at <= now())
            && !crate::store::journal::loading()
            && !crate::store::expiry::from_master()
    }

    fn wheel(&mut self) -> &mut Wheel<u64> {
        self.wheel
            .get_or_insert_with(|| Box::new(Wheel::new(WHEEL_TICK_MS, now_ms())))
    }

    /// Sets, moves or clears a deadline in the wheel in the same critical section as the
    /// entry. Returns the entry's new deadline record.
    fn schedule(&mut self, hash: u64, old: Option<Deadline>, at: Option<i64>) -> Option<Deadline> {
        if at.is_some() && crate::store::expiry::replica() && !crate::store::expiry::from_master() {
            self.own_volatile
                .get_or_insert_with(Default::default)
                .insert(hash);
        }
        let d = self.schedule_inner(hash, old, at);
        if old.is_none() != at.is_none() {
            self.sync_wheel_mem();
        }
        d
    }

    fn schedule_inner(
        &mut self,
        hash: u64,
        old: Option<Deadline>,
        at: Option<i64>,
    ) -> Option<Deadline> {
        match (old, at) {
            (None, None) => None,
            (None, Some(at)) => {
                self.volatile += 1;
                self.deadline_sum += at as i128;
                let id = self.wheel().insert(at, hash);
                Some(Deadline { at, id })
            }
            (Some(d), Some(at)) => {
                self.deadline_sum += at as i128 - d.at as i128;
                self.wheel().reschedule(d.id, at);
                Some(Deadline { at, id: d.id })
            }
            (Some(d), None) => {
                self.unschedule(d);
                None
            }
        }
    }

    fn unschedule(&mut self, d: Deadline) {
        self.volatile -= 1;
        self.deadline_sum -= d.at as i128;
        if let Some(w) = self.wheel.as_mut() {
            w.remove(d.id);
        }
        self.sync_wheel_mem();
    }

    /// A key was written (created, overwritten, changed in place, its deadline set or
    /// cleared). WATCH and keyspace notifications hook here.
    /// A key was added to the key space (Redis's `new` keyspace event hooks here).
    fn created(&mut self, key: &[u8]) {
        if let Some(h) = self.counters.hooks.get() {
            h.created(self.db, key);
        }
    }

    fn modified(&mut self, key: &[u8]) {
        bump(&self.counters.dirty);
        if let Some(h) = self.counters.hooks.get() {
            h.modified(self.db, key);
        }
    }

    /// A key was added to the key space (its table insert): the slot index hears of it.
    #[inline]
    fn added(&mut self, hash: u64, key: &[u8]) {
        if self.slots.is_some() {
            self.slot_index(hash, key, true);
        }
    }

    /// Adds a key to the slot index or removes it, and counts the bytes that changed (out
    /// of line: the hot paths of a standalone server keep only the test in `added` and
    /// `removed`).
    #[inline(never)]
    fn slot_index(&mut self, hash: u64, key: &[u8], add: bool) {
        let Some(ix) = self.slots.as_deref_mut() else {
            return;
        };
        let before = ix.bytes();
        if add {
            ix.add(slot_of(key), hash);
        } else {
            let was = ix.remove(slot_of(key), hash);
            debug_assert!(was, "a key left that the slot index did not hold");
        }
        let after = ix.bytes();
        self.resize_mem(before, after);
    }

    /// A key left the key space; `hash` is its hash. `drained` is the deadline of a key
    /// whose wheel entry the sweep already took out. WATCH and keyspace notifications
    /// (`del`, `expired`, `evicted`) and the slot index hook here.
    fn removed(&mut self, hash: u64, entry: &Entry, why: Removal, drained: Option<i64>) {
        // First, so `hash` need not be kept across the calls below (a saved register more
        // in every removal's prologue otherwise).
        if self.slots.is_some() {
            self.slot_index(hash, &entry.key, false);
        }
        self.len -= 1;
        self.sub_mem(entry.heap_mem());
        if let Some(at) = drained {
            self.volatile -= 1;
            self.deadline_sum -= at as i128;
        } else if let Some(d) = self.deadline(entry) {
            self.unschedule(d);
        }
        match why {
            Removal::Deleted => {}
            Removal::Expired => {
                bump(&self.counters.expired);
            }
            Removal::Evicted => {
                bump(&self.counters.evicted);
            }
        }
        if why != Removal::Deleted {
            if let Some(h) = self.counters.hooks.get() {
                h.removed(self.db, &entry.key, why);
            }
        }
        self.modified(&entry.key);
    }
}

/// What a snapshot in progress is told before a key changes, under its shard's lock: the
/// shard (the address of its counters, which name it), the database, the key's hash and
/// bytes, and its value and deadline now (`None`: absent).
pub type BeforeChange = fn(usize, usize, u64, &[u8], Option<(&Value, Option<i64>)>);
static SNAPSHOT_HOOK: std::sync::OnceLock<BeforeChange> = std::sync::OnceLock::new();
static SNAPSHOT_ACTIVE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Starts (`Some`) or ends (`None`) calling `hook` before every key change
/// (`journal::snapshot`, which sits above the key space).
pub fn snapshot_hook(hook: Option<BeforeChange>) {
    if let Some(h) = hook {
        let _ = SNAPSHOT_HOOK.set(h);
    }
    SNAPSHOT_ACTIVE.store(hook.is_some(), Ordering::Release);
}

/// The live entry of `key`, or `None`; an expired one is removed (and reported) on the
/// way. A free function over the two fields it needs, so a caller can go on using `books`
/// while it holds the entry (one hash probe where a method borrowing all of the key space
/// would force a second).
fn live_entry<'a>(
    segs: &'a mut [HashTable<Box<Entry>>],
    books: &mut Books,
    hash: u64,
    key: &[u8],
) -> Option<&'a mut Entry> {
    let seg = segs.get_mut(segment_of(hash))?;
    match seg.find_entry(hash, |e| *e.key == *key) {
        Err(_) => None,
        Ok(occ) if books.due(occ.get(), expiry_now_ms) => {
            let (e, _) = occ.remove();
            books.removed(hash, &e, Removal::Expired, None);
            None
        }
        Ok(occ) => Some(&mut **occ.into_mut()),
    }
}

/// [`live_entry`] for a replica's read: an entry past its deadline is `None` and left in
/// place.
fn hidden_if_due<'a>(
    segs: &'a mut [HashTable<Box<Entry>>],
    books: &Books,
    hash: u64,
    key: &[u8],
) -> Option<&'a mut Entry> {
    let e = segs
        .get_mut(segment_of(hash))?
        .find_mut(hash, |e| *e.key == *key)?;
    if books.due(e, expiry_now_ms) {
        return None;
    }
    Some(&mut **e)
}

pub struct Keyspace {
    /// Empty until the first key arrives (16 databases × N shards of empty key spaces cost
    /// nothing).
    segs: Vec<HashTable<Box<Entry>>>,
    books: Books,
    hasher: hashbrown::DefaultHashBuilder,
}

impl std::fmt::Debug for Keyspace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keyspace")
            .field("db", &self.books.db)
            .field("len", &self.books.len)
            .finish()
    }
}

impl Drop for Keyspace {
    /// The shard's byte count drops when the memory is actually freed (after FLUSHALL ASYNC,
    /// in the background).
    fn drop(&mut self) {
        let m = self.books.mem;
        self.books.sub_mem(m);
    }
}

impl Keyspace {
    pub fn new(
        db: usize,
        counters: Arc<ShardCounters>,
        hasher: hashbrown::DefaultHashBuilder,
    ) -> Keyspace {
        Keyspace {
            segs: Vec::new(),
            books: Books {
                db,
                len: 0,
                volatile: 0,
                deadline_sum: 0,
                wheel: None,
                mem: 0,
                wheel_bytes: 0,
                table_bytes: 0,
                counters,
                slots: None,
                own_volatile: None,
            },
            hasher,
        }
    }

    pub fn db(&self) -> usize {
        self.books.db
    }
    /// SWAPDB moves key spaces between database numbers.
    pub fn set_db(&mut self, db: usize) {
        self.books.db = db;
    }
    pub fn len(&self) -> usize {
        self.books.len
    }
    pub fn is_empty(&self) -> bool {
        self.books.len == 0
    }
    /// Keys with a deadline.
    pub fn volatile(&self) -> usize {
        self.books.volatile
    }
    /// Estimated bytes held.
    pub fn mem(&self) -> usize {
        self.books.mem
    }
    /// Sum of (deadline - now) over volatile keys, in ms, for INFO's avg_ttl.
    pub fn ttl_sum(&self, now: i64) -> i128 {
        self.books.deadline_sum - self.books.volatile as i128 * now as i128
    }

    pub fn hash(&self, key: &[u8]) -> u64 {
        hash_key(&self.hasher, key)
    }

    /// A snapshot in progress (BGREWRITEAOF, BGSAVE) keeps the key's value as it was before
    /// its first change (`journal::snapshot`); one atomic load otherwise.
    #[inline]
    fn before_change(&self, hash: u64, key: &[u8]) {
        if SNAPSHOT_ACTIVE.load(Ordering::Acquire) {
            if let Some(hook) = SNAPSHOT_HOOK.get() {
                let cur = self
                    .segs
                    .get(segment_of(hash))
                    .and_then(|s| s.find(hash, |e| *e.key == *key))
                    .map(|e| (&e.value, self.books.deadline(e).map(|d| d.at)));
                let shard = Arc::as_ptr(&self.books.counters) as usize;
                hook(shard, self.books.db, hash, key, cur);
            }
        }
    }

    fn seg_mut(&mut self, hash: u64) -> &mut HashTable<Box<Entry>> {
        if self.segs.is_empty() {
            self.segs = (0..SEGMENTS).map(|_| HashTable::new()).collect();
            let n = SEGMENTS * std::mem::size_of::<HashTable<Box<Entry>>>();
            self.books.add_mem(n);
            self.books.table_bytes += n;
        }
        &mut self.segs[segment_of(hash)]
    }

    /// Looks a key up for a read: an expired key is deleted and reported missing; a hit
    /// refreshes the access clock (LRU/LFU) and counts in keyspace_hits/misses.
    pub fn get(&mut self, hash: u64, key: &[u8]) -> Option<&mut Entry> {
        self.lookup(hash, key, true)
    }

    /// Like [`get`](Self::get) without touching stats or access clocks (EXISTS, TTL, OBJECT,
    /// and writes that read first).
    pub fn peek(&mut self, hash: u64, key: &[u8]) -> Option<&mut Entry> {
        self.lookup(hash, key, false)
    }

    fn lookup(&mut self, hash: u64, key: &[u8], touch: bool) -> Option<&mut Entry> {
        let found = if crate::store::expiry::replica() {
            // A replica's read: a key past its deadline reads as missing and stays until its
            // master's DEL (Redis's expireIfNeeded on a replica).
            hidden_if_due(&mut self.segs, &self.books, hash, key)
        } else {
            live_entry(&mut self.segs, &mut self.books, hash, key)
        };
        if touch {
            let c = &self.books.counters;
            match &found {
                Some(_) => bump(&c.hits),
                None => {
                    if let Some(h) = c.hooks.get() {
                        h.missed(self.books.db, key);
                    }
                    bump(&c.misses)
                }
            };
        }
        let e = found?;
        if touch {
            e.access = eviction::touched(e.access);
        }
        Some(e)
    }

    /// The entry of `key` even if it is past its deadline, left in place, without stats or
    /// access clocks: DEBUG OBJECT (Redis's `dictFind` there, no lazy expiry).
    pub fn find_raw(&self, hash: u64, key: &[u8]) -> Option<&Entry> {
        let seg = self.segs.get(segment_of(hash))?;
        seg.find(hash, |e| *e.key == *key).map(|e| &**e)
    }

    /// TOUCH: refreshes the access clock of a live key.
    pub fn touch(&mut self, hash: u64, key: &[u8]) -> bool {
        match self.lookup(hash, key, false) {
            Some(e) => {
                e.access = eviction::touched(e.access);
                true
            }
            None => false,
        }
    }

    pub fn contains(&mut self, hash: u64, key: &[u8]) -> bool {
        self.lookup(hash, key, false).is_some()
    }

    /// Creates or replaces a key. Returns the value it replaced, if any.
    pub fn set(&mut self, hash: u64, key: &[u8], value: Value, ttl: Ttl) -> Option<Value> {
        self.before_change(hash, key);
        let hasher = self.hasher;
        // Split borrows: the table entry and the books.
        if self.segs.is_empty() {
            self.seg_mut(hash);
        }
        let seg = &mut self.segs[segment_of(hash)];
        let books = &mut self.books;
        match seg.find_mut(hash, |e| *e.key == *key) {
            Some(e) if books.due(e, expiry_now_ms) => {
                // The old key expired: it leaves through the expiry path (stats, hooks), and
                // the write creates a new key.
                books.removed(hash, e, Removal::Expired, None);
                e.put_deadline(None);
                e.value = value;
                e.access = eviction::fresh();
                let at = match ttl {
                    Ttl::At(at) => Some(at),
                    _ => None,
                };
                let d = books.schedule(hash, None, at);
                e.put_deadline(d);
                books.len += 1;
                books.add_mem(e.heap_mem());
                books.added(hash, key);
                books.created(key);
                books.modified(key);
                None
            }
            Some(e) => {
                let before = e.heap_mem();
                let old = std::mem::replace(&mut e.value, value);
                let old_deadline = books.deadline(e);
                let keep = match ttl {
                    Ttl::Keep => old_deadline.map(|d| d.at),
                    Ttl::Clear => None,
                    Ttl::At(at) => Some(at),
                };
                let d = books.schedule(hash, old_deadline, keep);
                e.put_deadline(d);
                e.access = eviction::fresh();
                let after = e.heap_mem();
                books.resize_mem(before, after);
                books.modified(key);
                Some(old)
            }
            None => {
                let at = match ttl {
                    Ttl::At(at) => Some(at),
                    _ => None,
                };
                let mut e = Box::new(Entry {
                    key: KeyBytes::new(key),
                    value,
                    wheel: NO_DEADLINE,
                    access: eviction::fresh(),
                });
                let d = books.schedule(hash, None, at);
                e.put_deadline(d);
                books.len += 1;
                books.add_mem(e.heap_mem());
                books.added(hash, key);
                books.created(key);
                books.modified(key);
                let table_before = alloc_size(seg.allocation_size());
                seg.insert_unique(hash, e, |x| hash_key(&hasher, &x.key));
                // A table that grew: count its new allocation (hashbrown never shrinks on
                // removal, so this is the only place tables change size). The old table is
                // freed, so, as Redis's `used_memory` counts what the allocator has handed
                // out, it no longer counts (RSS may keep it for a while).
                let grown = alloc_size(seg.allocation_size()).saturating_sub(table_before);
                books.add_mem(grown);
                books.table_bytes += grown;
                None
            }
        }
    }

    /// Changes an existing (live) key's value in place; `f` returns whether it changed
    /// anything. The byte estimate follows. `None` if the key does not exist.
    pub fn update<R>(
        &mut self,
        hash: u64,
        key: &[u8],
        f: impl FnOnce(&mut Value) -> (R, bool),
    ) -> Option<R> {
        // Before the lookup, so the key is found once: a snapshot being copied gets the
        // value at the cut (an expired or missing one included: harmless, it is what the cut
        // held) before anything here can change it.
        self.before_change(hash, key);
        let e = live_entry(&mut self.segs, &mut self.books, hash, key)?;
        let before = e.heap_mem();
        let (r, changed) = f(&mut e.value);
        let after = e.heap_mem();
        self.books.resize_mem(before, after);
        if changed {
            self.books.modified(key);
        }
        Some(r)
    }

    /// Runs `f` on the value of type `T` at `key` for a read (`None` when there is no such
    /// key); counts a hit or a miss and refreshes the access clock, as every read does.
    pub fn read_as<T: Aggregate, R>(
        &mut self,
        hash: u64,
        key: &[u8],
        f: impl FnOnce(Option<&T>) -> R,
    ) -> Result<R, WrongType> {
        match self.get(hash, key) {
            None => Ok(f(None)),
            Some(e) => T::of(&e.value).map(|v| f(Some(v))).ok_or(WrongType),
        }
    }

    /// The one write path of the aggregate types. Runs `f` on the value of type `T` at `key`;
    /// `f` returns its result and whether it changed anything. A missing key is `Ok(None)`
    /// unless `create`, in which case `f` runs on an empty value that is stored only if `f`
    /// left something in it (so a write that fails half-way creates nothing). A value `f`
    /// empties is deleted, as Redis never keeps empty aggregates. The key's deadline is kept.
    pub fn write_as<T: Aggregate, R>(
        &mut self,
        hash: u64,
        key: &[u8],
        create: bool,
        f: impl FnOnce(&mut T) -> (R, bool),
    ) -> Result<Option<R>, WrongType> {
        // One lookup (see `update` for why the snapshot hook runs first).
        self.before_change(hash, key);
        let Some(e) = live_entry(&mut self.segs, &mut self.books, hash, key) else {
            if !create {
                return Ok(None);
            }
            let mut fresh = T::default();
            let (r, _) = f(&mut fresh);
            if !fresh.is_empty() {
                self.set(hash, key, fresh.wrap(), Ttl::Clear);
            }
            return Ok(Some(r));
        };
        let before = e.heap_mem();
        let t = T::of_mut(&mut e.value).ok_or(WrongType)?;
        let (r, changed) = f(t);
        let emptied = t.is_empty();
        let after = e.heap_mem();
        self.books.resize_mem(before, after);
        if changed {
            self.books.modified(key);
        }
        if emptied {
            self.remove(hash, key);
        }
        Ok(Some(r))
    }

    /// Sets (`Some`) or clears (`None`) a live key's deadline. False if there is no such key.
    /// A deadline not in the future deletes the key (as Redis's EXPIRE with a past time).
    pub fn set_deadline(&mut self, hash: u64, key: &[u8], at: Option<i64>) -> bool {
        if self.lookup(hash, key, false).is_none() {
            return false;
        }
        self.before_change(hash, key);
        if let Some(at) = at {
            // While the journal is replayed a past deadline is kept, not acted on (as
            // Redis's checkAlreadyExpired): later records may still write to the key.
            if at <= now_ms() && !crate::store::journal::loading() {
                self.remove(hash, key);
                return true;
            }
        }
        let seg = &mut self.segs[segment_of(hash)];
        let books = &mut self.books;
        if let Some(e) = seg.find_mut(hash, |e| *e.key == *key) {
            let d = books.schedule(hash, books.deadline(e), at);
            e.put_deadline(d);
            books.modified(key);
        }
        true
    }

    /// DEL: removes a live key, returning its entry.
    pub fn remove(&mut self, hash: u64, key: &[u8]) -> Option<Entry> {
        self.lookup(hash, key, false)?;
        self.take(hash, key, Removal::Deleted)
    }

    fn take(&mut self, hash: u64, key: &[u8], why: Removal) -> Option<Entry> {
        self.before_change(hash, key);
        let seg = self.segs.get_mut(segment_of(hash))?;
        let (e, _) = seg.find_entry(hash, |e| *e.key == *key).ok()?.remove();
        self.books.removed(hash, &e, why, None);
        self.release_if_empty();
        Some(*e)
    }

    /// Gives the tables back once the key space is empty, and the wheel once no key has a
    /// deadline (hashbrown tables and the wheel's slab never shrink by themselves).
    fn release_if_empty(&mut self) {
        if self.books.len == 0 && !self.segs.is_empty() {
            self.release_tables();
        }
        if self.books.volatile == 0 && self.books.wheel.is_some() {
            self.books.wheel = None;
            self.books.sync_wheel_mem();
        }
    }

    /// The key space just emptied: its tables (and the slot index's array) go back. Out of
    /// line, so that `release_if_empty`, on every removal's path, stays two tests.
    #[cold]
    #[inline(never)]
    fn release_tables(&mut self) {
        self.segs = Vec::new();
        let n = self.books.table_bytes;
        self.books.sub_mem(n);
        self.books.table_bytes = 0;
        if let Some(ix) = self.books.slots.as_deref_mut() {
            let n = ix.bytes();
            ix.release();
            let left = ix.bytes();
            self.books.sub_mem(n - left);
        }
    }

    /// Evicts a key chosen by the maxmemory policy.
    pub fn evict(&mut self, key: &[u8]) -> bool {
        let hash = self.hash(key);
        self.take(hash, key, Removal::Evicted).is_some()
    }

    /// Active expiry: removes up to `max` keys whose deadline is at or before `now`.
    /// Returns (removed, more are due).
    pub fn expire_due(&mut self, now: i64, max: usize, buf: &mut Vec<(u64, i64)>) -> (usize, bool) {
        // Keys expired lazily since the last sweep may have emptied this key space.
        self.release_if_empty();
        let Some(w) = self.books.wheel.as_mut() else {
            return (0, false);
        };
        buf.clear();
        let more = w.drain_due(now, max, buf);
        let mut n = 0;
        for &(hash, at) in buf.iter() {
            let Some(seg) = self.segs.get_mut(segment_of(hash)) else {
                continue;
            };
            // The drained wheel entry belongs to the key with this hash whose wheel entry is
            // now free: a key's wheel entry is only freed by this drain (every other removal
            // of a deadline clears the key's index first), and nothing is inserted into the
            // wheel until the batch is done.
            let hasher = &self.hasher;
            let w = self.books.wheel.as_deref();
            if let Ok(occ) = seg.find_entry(hash, |e| {
                e.wheel_id()
                    .is_some_and(|id| w.is_some_and(|w| w.time_of(id).is_none()))
                    && hash_key(hasher, &e.key) == hash
            }) {
                let (e, _) = occ.remove();
                self.books.removed(hash, &e, Removal::Expired, Some(at));
                n += 1;
            }
        }
        self.books.sync_wheel_mem();
        self.release_if_empty();
        (n, more)
    }

    /// A replica's sweep of the keys its own clients gave a deadline: those due are removed
    /// (as expired), those gone or without a deadline any more are forgotten.
    pub fn expire_own(&mut self, now: i64) -> usize {
        let Some(own) = self.books.own_volatile.as_mut() else {
            return 0;
        };
        let hashes: Vec<u64> = own.iter().copied().collect();
        let mut n = 0;
        for hash in hashes {
            let hasher = &self.hasher;
            let Some(seg) = self.segs.get_mut(segment_of(hash)) else {
                continue;
            };
            let books = &mut self.books;
            let keep = match seg.find_entry(hash, |e| hash_key(hasher, &e.key) == hash) {
                Err(_) => false,
                Ok(occ) => match books.deadline(occ.get()) {
                    None => false,
                    Some(d) if d.at <= now => {
                        let (e, _) = occ.remove();
                        books.removed(hash, &e, Removal::Expired, None);
                        n += 1;
                        false
                    }
                    Some(_) => true,
                },
            };
            if !keep {
                if let Some(own) = books.own_volatile.as_mut() {
                    own.remove(&hash);
                }
            }
        }
        if self
            .books
            .own_volatile
            .as_ref()
            .is_some_and(|o| o.is_empty())
        {
            self.books.own_volatile = None;
        }
        self.books.sync_wheel_mem();
        n
    }

    /// Appends the live keys of one segment to `out` (SCAN). Expired keys are skipped.
    pub fn scan_segment(&self, seg: usize, now: i64, mut f: impl FnMut(&Entry)) {
        if let Some(t) = self.segs.get(seg) {
            for e in t.iter() {
                if !self.books.due(e, || now) {
                    f(e);
                }
            }
        }
    }

    /// Every live entry (KEYS).
    pub fn for_each(&self, now: i64, mut f: impl FnMut(&Entry)) {
        for s in 0..self.segs.len() {
            self.scan_segment(s, now, &mut f);
        }
    }

    /// A random entry (RANDOMKEY, eviction sampling): a random non-empty segment, then a
    /// random slot in it. `volatile` restricts it to keys with a deadline.
    pub fn random(&self, rnd: u64, volatile: bool) -> Option<&Entry> {
        if self.books.len == 0 || (volatile && self.books.volatile == 0) {
            return None;
        }
        let start = (rnd as usize) & (SEGMENTS - 1);
        for i in 0..SEGMENTS {
            let t = &self.segs[(start + i) & (SEGMENTS - 1)];
            if t.is_empty() {
                continue;
            }
            let skip = ((rnd >> 20) as usize) % t.len();
            let found = if volatile {
                t.iter()
                    .skip(skip)
                    .chain(t.iter().take(skip))
                    .find(|e| e.has_deadline())
            } else {
                t.iter().nth(skip)
            };
            if found.is_some() {
                return found.map(|e| &**e);
            }
        }
        None
    }

    /// Moves a key's entry out with its deadline (RENAME, MOVE-like paths): (value, deadline).
    pub fn take_for_move(&mut self, hash: u64, key: &[u8]) -> Option<(Value, Option<i64>)> {
        let at = self.deadline(hash, key)?;
        let e = self.remove(hash, key)?;
        Some((e.value, at))
    }

    /// Brings `key`'s table slot and entry into the cache, and starts bringing its
    /// deadline (see [`crate::store::Store::warm`]). Changes nothing: a key past its
    /// deadline stays until a command or the expiry cycle removes it.
    pub fn warm(&self, hash: u64, key: &[u8]) {
        let Some(seg) = self.segs.get(segment_of(hash)) else {
            return;
        };
        if let (Some(id), Some(wheel)) = (
            seg.find(hash, |e| *e.key == *key)
                .and_then(|e| e.wheel_id()),
            self.books.wheel.as_ref(),
        ) {
            wheel.warm(id);
        }
    }

    /// A live key's deadline in Unix ms: `None` if there is no such key, `Some(None)` if it
    /// has no deadline (TTL, PTTL, EXPIRETIME).
    pub fn deadline(&mut self, hash: u64, key: &[u8]) -> Option<Option<i64>> {
        self.lookup(hash, key, false)?;
        let e = self
            .segs
            .get(segment_of(hash))?
            .find(hash, |e| *e.key == *key)?;
        Some(self.books.deadline(e).map(|d| d.at))
    }

    /// An entry's deadline (for an entry borrowed from [`random`](Self::random) or
    /// [`scan_segment`](Self::scan_segment)).
    pub fn deadline_of(&self, e: &Entry) -> Option<i64> {
        self.books.deadline(e).map(|d| d.at)
    }

    /// Starts (building it from the keys held, O(keys)) or stops keeping the cluster slot
    /// index. The store keeps it for database 0 in cluster mode: at creation, and where
    /// SWAPDB moves key spaces between database numbers.
    pub fn index_slots(&mut self, on: bool) {
        if on == self.books.slots.is_some() {
            return;
        }
        if !on {
            if let Some(ix) = self.books.slots.take() {
                self.books.sub_mem(ix.bytes());
            }
            return;
        }
        let mut ix = Box::<SlotIndex>::default();
        for seg in &self.segs {
            for e in seg.iter() {
                ix.add(slot_of(&e.key), hash_key(&self.hasher, &e.key));
            }
        }
        self.books.add_mem(ix.bytes());
        self.books.slots = Some(ix);
    }

    /// Whether this key space keeps the cluster slot index.
    pub fn indexes_slots(&self) -> bool {
        self.books.slots.is_some()
    }

    /// The keys held in hash `slot`, in O(1): keys past their deadline that neither a read
    /// nor the sweep has reclaimed yet count (as in Redis's `countkeysinslot`). `None` when
    /// the key space keeps no slot index.
    pub fn slot_count(&self, slot: u16) -> Option<usize> {
        self.books.slots.as_ref().map(|ix| ix.count(slot))
    }

    /// Appends the live keys of hash `slot` to `out` until it holds `max`, each found from
    /// the index by its hash (O(keys appended)); false, and nothing appended, when the key
    /// space keeps no slot index.
    pub fn slot_keys(&self, slot: u16, now: i64, max: usize, out: &mut Vec<Bytes>) -> bool {
        self.slot_keys_by(slot, now, max, out, |key| hash_key(&self.hasher, key))
    }

    /// [`slot_keys`](Self::slot_keys) with the keys' hash function given (a test forges two
    /// keys with one hash through it).
    fn slot_keys_by(
        &self,
        slot: u16,
        now: i64,
        max: usize,
        out: &mut Vec<Bytes>,
        hash_of: impl Fn(&[u8]) -> u64,
    ) -> bool {
        let Some(ix) = self.books.slots.as_deref() else {
            return false;
        };
        // Hashes that more than one key of the slot share (64-bit hashes make it all but
        // impossible): the index holds such a hash once per key, and its keys are appended
        // at its first sight.
        let mut shared: Vec<u64> = Vec::new();
        for hash in ix.hashes(slot) {
            if out.len() >= max {
                break;
            }
            let Some(seg) = self.segs.get(segment_of(hash)) else {
                continue;
            };
            let mut keys = seg
                .iter_hash(hash)
                .filter(|e| slot_of(&e.key) == slot && hash_of(&e.key) == hash);
            let Some(first) = keys.next() else {
                debug_assert!(false, "the slot index holds a hash no key has");
                continue;
            };
            let mut push = |e: &Entry| {
                if out.len() < max && !self.books.due(e, || now) {
                    out.push(Bytes::copy_from_slice(&e.key));
                }
            };
            match keys.next() {
                None => push(first),
                Some(second) => {
                    if shared.contains(&hash) {
                        continue;
                    }
                    shared.push(hash);
                    push(first);
                    push(second);
                    keys.for_each(|e| push(e));
                }
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ks() -> Keyspace {
        Keyspace::new(
            0,
            Arc::new(ShardCounters::default()),
            hashbrown::DefaultHashBuilder::default(),
        )
    }

    /// Moves `key`'s deadline to `at` directly, bypassing the past check of the write path.
    fn make_due(k: &mut Keyspace, key: &[u8], at: i64) {
        let h = k.hash(key);
        let e = k.segs[segment_of(h)]
            .find_mut(h, |e| *e.key == *key)
            .unwrap();
        let d = k.books.schedule(h, k.books.deadline(e), Some(at));
        e.put_deadline(d);
    }

    /// What the slot index must say, recounted from the tables: per slot touched, the keys
    /// held (those past their deadline included) and the live ones, sorted.
    fn check_slots(k: &Keyspace, slots: &[u16]) {
        let now = now_ms();
        for &slot in slots {
            let mut held = 0;
            let mut live = Vec::new();
            for seg in &k.segs {
                for e in seg.iter() {
                    if slot_of(&e.key) == slot {
                        held += 1;
                        if !k.books.due(e, || now) {
                            live.push(Bytes::copy_from_slice(&e.key));
                        }
                    }
                }
            }
            assert_eq!(k.slot_count(slot), Some(held), "slot {slot}");
            let mut got = Vec::new();
            assert!(k.slot_keys(slot, now, usize::MAX, &mut got));
            got.sort();
            live.sort();
            assert_eq!(got, live, "slot {slot}");
            // `max` stops it short.
            let mut two = Vec::new();
            k.slot_keys(slot, now, 2, &mut two);
            assert_eq!(two.len(), live.len().min(2));
        }
        let ix = k.books.slots.as_deref().expect("indexed");
        assert_eq!(ix.len(), k.len());
    }

    fn indexed() -> Keyspace {
        let mut k = ks();
        k.index_slots(true);
        k
    }

    fn put(k: &mut Keyspace, key: &str, ttl: Ttl) {
        let h = k.hash(key.as_bytes());
        k.set(h, key.as_bytes(), Value::string(b"v"), ttl);
    }

    /// Every way a key enters or leaves a key space keeps the slot index exact: insert,
    /// overwrite, a write over a key past its deadline, DEL, EXPIRE in the past, lazy expiry
    /// on read, the sweep, eviction, a move out (RENAME's source), an aggregate created and
    /// emptied. Hash-tagged keys share a slot; the count never needs a scan.
    #[test]
    fn slot_index_follows_every_change() {
        let mut k = indexed();
        let tag = slot_of(b"{user1}");
        let slots = [tag, slot_of(b"plain"), slot_of(b"other"), slot_of(b"set")];
        let now = now_ms();
        for i in 0..300 {
            put(&mut k, &format!("{{user1}}:{i}"), Ttl::Clear);
        }
        put(&mut k, "plain", Ttl::Clear);
        put(&mut k, "other", Ttl::At(now + 60_000));
        check_slots(&k, &slots);
        assert_eq!(k.slot_count(tag), Some(300));

        // Overwrites change nothing; a new key arrives once.
        put(&mut k, "plain", Ttl::At(now + 60_000));
        put(&mut k, "{user1}:0", Ttl::Clear);
        check_slots(&k, &slots);

        // DEL, and EXPIRE with a past time.
        for i in 0..150 {
            let key = format!("{{user1}}:{i}");
            let h = k.hash(key.as_bytes());
            if i % 2 == 0 {
                assert!(k.remove(h, key.as_bytes()).is_some());
            } else {
                assert!(k.set_deadline(h, key.as_bytes(), Some(now - 1)));
            }
        }
        check_slots(&k, &slots);
        assert_eq!(k.slot_count(tag), Some(150));

        // Past its deadline: still held (and counted) until reclaimed, never returned.
        make_due(&mut k, b"{user1}:200", now - 1);
        make_due(&mut k, b"{user1}:201", now - 1);
        make_due(&mut k, b"other", now - 1);
        check_slots(&k, &slots);
        assert_eq!(k.slot_count(tag), Some(150));
        // Lazy expiry on a read, a write over the expired key, then the sweep.
        let h = k.hash(b"{user1}:200");
        assert!(k.get(h, b"{user1}:200").is_none());
        put(&mut k, "{user1}:201", Ttl::Clear);
        check_slots(&k, &slots);
        assert_eq!(k.slot_count(tag), Some(149));
        let mut buf = Vec::new();
        assert_eq!(k.expire_due(now_ms(), 100, &mut buf).0, 1);
        check_slots(&k, &slots);
        assert_eq!(k.slot_count(slot_of(b"other")), Some(0));

        // Eviction and a move out (RENAME's source) then in under another name.
        assert!(k.evict(b"{user1}:299"));
        let h = k.hash(b"plain");
        let (v, at) = k.take_for_move(h, b"plain").expect("plain");
        let h = k.hash(b"set");
        k.set(h, b"set", v, at.map_or(Ttl::Clear, Ttl::At));
        check_slots(&k, &slots);
        assert_eq!(k.slot_count(slot_of(b"plain")), Some(0));
        assert_eq!(k.slot_count(slot_of(b"set")), Some(1));

        // An aggregate made by a write and deleted when emptied.
        let h = k.hash(b"agg");
        let r = k.write_as::<SetValue, _>(h, b"agg", true, |s| (s.insert(b"m"), true));
        assert_eq!(r, Ok(Some(true)));
        assert_eq!(k.slot_count(slot_of(b"agg")), Some(1));
        let r = k.write_as::<SetValue, _>(h, b"agg", false, |s| (s.remove(b"m"), true));
        assert_eq!(r, Ok(Some(true)));
        assert_eq!(k.slot_count(slot_of(b"agg")), Some(0));

        // Everything gone: the index gives its memory back with the tables.
        let mut all = Vec::new();
        k.for_each(i64::MIN, |e| all.push(e.key().to_vec()));
        for key in all {
            let h = k.hash(&key);
            k.remove(h, &key);
        }
        check_slots(&k, &slots);
        assert_eq!((k.len(), k.mem()), (0, 0));
        assert_eq!(k.books.counters.used.load(Ordering::Relaxed), 0);
        assert!(k.indexes_slots());
        put(&mut k, "again", Ttl::Clear);
        assert_eq!(k.slot_count(slot_of(b"again")), Some(1));
    }

    /// A key space that is not told to keep the index (standalone, or a database other than
    /// 0) keeps nothing and counts no bytes for it; one told later builds it from the keys
    /// it holds, and gives its bytes back when told to stop.
    #[test]
    fn nothing_is_indexed_unless_asked() {
        // One hasher for both, so their tables are alike.
        let hasher = hashbrown::DefaultHashBuilder::default();
        let mut plain = Keyspace::new(0, Arc::new(ShardCounters::default()), hasher);
        let mut cluster = Keyspace::new(0, Arc::new(ShardCounters::default()), hasher);
        cluster.index_slots(true);
        for i in 0..2000 {
            put(&mut plain, &format!("k{i}"), Ttl::Clear);
            put(&mut cluster, &format!("k{i}"), Ttl::Clear);
        }
        assert!(!plain.indexes_slots());
        assert!(plain.books.slots.is_none());
        assert_eq!(plain.slot_count(slot_of(b"k1")), None);
        assert!(!plain.slot_keys(slot_of(b"k1"), now_ms(), 10, &mut Vec::new()));
        let index_bytes = cluster.books.slots.as_ref().map_or(0, |ix| ix.bytes());
        assert!(index_bytes > 2000 * 8);
        assert_eq!(cluster.mem(), plain.mem() + index_bytes);

        let before = plain.mem();
        plain.index_slots(true);
        assert_eq!(plain.mem(), before + index_bytes);
        let slots: Vec<u16> = (0..2000)
            .map(|i| slot_of(format!("k{i}").as_bytes()))
            .collect();
        check_slots(&plain, &slots);
        plain.index_slots(false);
        assert_eq!(plain.mem(), before);
        assert_eq!(plain.slot_count(0), None);
    }

    /// Keys of one slot with the same 64-bit hash (forged: inserted under one hash, and
    /// the lookup told that is their hash) are each returned once; a key of another slot
    /// under that hash is not returned.
    #[test]
    fn keys_sharing_a_hash_are_each_returned_once() {
        let mut k = indexed();
        let h = k.hash(b"{t}a");
        let slot = slot_of(b"{t}");
        // The segment filled first, so that no insert below regrows its table (a regrowth
        // puts every entry where its real hash says).
        let (mut filled, mut i) = (0, 0);
        while filled < 9 {
            let key = format!("fill{i}");
            i += 1;
            if segment_of(k.hash(key.as_bytes())) == segment_of(h)
                && slot_of(key.as_bytes()) != slot
            {
                put(&mut k, &key, Ttl::Clear);
                filled += 1;
            }
        }
        for key in ["{t}a", "{t}b", "{t}c", "elsewhere"] {
            k.set(h, key.as_bytes(), Value::string(b"1"), Ttl::Clear);
        }
        put(&mut k, "{t}d", Ttl::Clear);
        assert_ne!(slot, slot_of(b"elsewhere"));
        assert_eq!(k.slot_count(slot), Some(4));
        let forged = |key: &[u8]| {
            if key.starts_with(b"{t}") && key != b"{t}d" || key == b"elsewhere" {
                h
            } else {
                hash_key(&k.hasher, key)
            }
        };
        let mut got = Vec::new();
        assert!(k.slot_keys_by(slot, now_ms(), 10, &mut got, forged));
        got.sort();
        assert_eq!(
            got,
            ["{t}a", "{t}b", "{t}c", "{t}d"].map(|s| Bytes::from_static(s.as_bytes()))
        );
        let mut two = Vec::new();
        k.slot_keys_by(slot, now_ms(), 2, &mut two, forged);
        assert_eq!(two.len(), 2);
        assert!(k.remove(h, b"{t}b").is_some());
        assert_eq!(k.slot_count(slot), Some(3));
        assert_eq!(k.slot_count(slot_of(b"elsewhere")), Some(1));
    }

    /// Warming a key (present, absent, past its deadline, in an empty key space) changes
    /// nothing: a key already due is still there, counted, until a lookup or the sweep
    /// removes it.
    #[test]
    fn warm_changes_nothing() {
        let mut k = ks();
        let missing = k.hash(b"nothing yet");
        k.warm(missing, b"nothing yet");
        let now = now_ms();
        for (key, ttl) in [
            ("live", Ttl::At(now + 60_000)),
            ("due", Ttl::At(now + 60_000)),
            ("plain", Ttl::Clear),
        ] {
            let h = k.hash(key.as_bytes());
            k.set(h, key.as_bytes(), Value::string(b"v"), ttl);
        }
        make_due(&mut k, b"due", now - 1);
        let before = (k.len(), k.volatile(), k.mem());
        for key in ["live", "due", "plain", "absent"] {
            let h = k.hash(key.as_bytes());
            k.warm(h, key.as_bytes());
        }
        assert_eq!((k.len(), k.volatile(), k.mem()), before);
        assert_eq!(before.0, 3);
        let h = k.hash(b"due");
        assert!(k.get(h, b"due").is_none());
        assert_eq!((k.len(), k.volatile()), (2, 1));
    }

    /// Deadlines set, moved, cleared, deleted and swept: the books, the wheel and the byte
    /// count always agree, and end at zero.
    #[test]
    fn wheel_and_books_agree() {
        let mut k = ks();
        let now = now_ms();
        for i in 0..1000u32 {
            let key = format!("k{i}");
            let h = k.hash(key.as_bytes());
            let ttl = if i % 2 == 0 {
                Ttl::At(now + 60_000)
            } else {
                Ttl::Clear
            };
            k.set(h, key.as_bytes(), Value::string(b"v"), ttl);
        }
        assert_eq!((k.len(), k.volatile()), (1000, 500));
        for i in 0..1000u32 {
            let key = format!("k{i}");
            let h = k.hash(key.as_bytes());
            match i % 4 {
                // Due at once for the sweep below (set directly, bypassing the past check).
                0 => {
                    make_due(&mut k, key.as_bytes(), now - 1);
                }
                1 => assert!(k.set_deadline(h, key.as_bytes(), Some(now + 1000))),
                2 => assert!(k.set_deadline(h, key.as_bytes(), None)),
                _ => assert!(k.remove(h, key.as_bytes()).is_some()),
            }
        }
        assert_eq!((k.len(), k.volatile()), (750, 500));
        let mut buf = Vec::new();
        let (n, more) = k.expire_due(now_ms(), 10_000, &mut buf);
        assert_eq!((n, more), (250, false));
        assert_eq!((k.len(), k.volatile()), (500, 250));
        assert_eq!(k.books.wheel.as_ref().map_or(0, |w| w.len()), 250);
        let (n, _) = k.expire_due(now + 2000, 10_000, &mut buf);
        assert_eq!(n, 250);
        for i in 0..1000u32 {
            let key = format!("k{i}");
            let h = k.hash(key.as_bytes());
            k.remove(h, key.as_bytes());
        }
        assert_eq!((k.len(), k.volatile(), k.mem()), (0, 0, 0));
        assert_eq!(k.books.counters.used.load(Ordering::Relaxed), 0);
        assert_eq!(k.books.counters.expired.load(Ordering::Relaxed), 500);
    }
}
