//! A hash value in Redis's two encodings.
//!
//! - `listpack`: field, value, field, value... packed in one [`Listpack`] (insertion order,
//!   linear lookups) while there are at most `hash-max-listpack-entries` fields and no field
//!   or value is longer than `hash-max-listpack-value` bytes;
//! - `hashtable`: beyond those. A hash converts once and never goes back, as Redis's do.
//! - `listpackex`: a small hash once one of its fields was given a deadline (Redis 7.4's
//!   hash-field expiration): the listpack plus one deadline per pair, boxed so that the
//!   common hash stays in place. A hashtable keeps its deadlines in a vector parallel to its
//!   pairs, allocated only once a field has one. Deadlines are Unix milliseconds, 0 = none.
//!   A field past its deadline is still stored until [`HashValue::purge`] removes it: the
//!   command layer purges before every access (lazy expiry) and the background sweep purges
//!   the hashes it knows have deadlines.
//!
//! The hashtable keeps each field and its value together in one allocation
//! (`[varint field length][field][value]`, see [`Pair`]) in a `Vec`, indexed by a hashbrown
//! table of positions: a field costs one 16-byte slot, one 8-byte index slot and one
//! allocation, against two `Bytes` (32 bytes each plus a shared header each) before. The
//! vector gives HRANDFIELD a field by position in O(1) and HSCAN a cursor that survives
//! removals (see [`HashValue::scan_table`]), as the set's hashtable does.
//!
//! The key space holds a `HashValue` in its 16-byte value without a box: a `listpack` hash
//! is its buffer's pointer, length and pair count ([`Thin`]), so a small hash is the key's
//! entry and one buffer (a 2-field hash: 48 + 48 bytes); the other encodings are one box.

use crate::store::encoding::{limit, LIMITS};
use crate::util::listpack::{Listpack, ListpackRef};
use crate::util::mem::alloc_size;
use crate::util::packed::{Thin, ThinRef};
use hashbrown::HashTable;
use std::hash::BuildHasher;
use std::sync::OnceLock;

fn hasher() -> &'static hashbrown::DefaultHashBuilder {
    static H: OnceLock<hashbrown::DefaultHashBuilder> = OnceLock::new();
    H.get_or_init(hashbrown::DefaultHashBuilder::default)
}

fn hash_of(f: &[u8]) -> u64 {
    hasher().hash_one(f)
}

/// A field and its value in one allocation: the field's length as a varint (7 bits a byte,
/// low first), the field, then the value up to the end.
type Pair = Box<[u8]>;

fn pack_pair(f: &[u8], v: &[u8]) -> Pair {
    let mut n = f.len();
    let mut out = Vec::with_capacity(varint_len(n) + f.len() + v.len());
    while n >= 0x80 {
        out.push((n as u8 & 0x7f) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
    out.extend_from_slice(f);
    out.extend_from_slice(v);
    out.into_boxed_slice()
}

fn varint_len(mut n: usize) -> usize {
    let mut l = 1;
    while n >= 0x80 {
        n >>= 7;
        l += 1;
    }
    l
}

/// (field, value) of a packed pair.
fn split(p: &[u8]) -> (&[u8], &[u8]) {
    let mut n = 0usize;
    let mut shift = 0;
    let mut i = 0;
    while let Some(&b) = p.get(i) {
        n |= ((b & 0x7f) as usize) << shift;
        i += 1;
        if b & 0x80 == 0 {
            break;
        }
        shift += 7;
    }
    let end = (i + n).min(p.len());
    (&p[i..end], &p[end..])
}

fn field_of(p: &[u8]) -> &[u8] {
    split(p).0
}

/// What one pair costs beyond the vector's and the index's slots: its allocation.
fn field_cost(f: &[u8], v: &[u8]) -> usize {
    alloc_size(varint_len(f.len()) + f.len() + v.len())
}

/// The `hashtable` encoding: pairs in a vector, indexed by a table of positions.
#[derive(Clone, Default)]
struct Table {
    pairs: Vec<Pair>,
    index: HashTable<usize>,
    /// Sum of the pairs' allocations.
    bytes: usize,
    /// Field deadlines parallel to `pairs` (0 = none), or empty when no field ever had one.
    ttl: Vec<i64>,
    /// A lower bound of the earliest deadline (0 = none): lets a lookup skip the scan.
    min: i64,
}

impl Table {
    fn with_capacity(n: usize) -> Table {
        Table {
            pairs: Vec::with_capacity(n),
            index: HashTable::with_capacity(n),
            bytes: 0,
            ttl: Vec::new(),
            min: 0,
        }
    }

    fn find(&self, f: &[u8]) -> Option<usize> {
        let pairs = &self.pairs;
        self.index
            .find(hash_of(f), |&i| field_of(&pairs[i]) == f)
            .copied()
    }

    /// Sets a field; true if it is new.
    fn insert(&mut self, f: &[u8], v: &[u8]) -> bool {
        let cost = field_cost(f, v);
        if let Some(i) = self.find(f) {
            let old = std::mem::replace(&mut self.pairs[i], pack_pair(f, v));
            self.bytes -= alloc_size(old.len());
            self.bytes += cost;
            return false;
        }
        let i = self.pairs.len();
        self.pairs.push(pack_pair(f, v));
        if !self.ttl.is_empty() {
            self.ttl.push(0);
        }
        self.bytes += cost;
        let pairs = &self.pairs;
        self.index
            .insert_unique(hash_of(f), i, |&j| hash_of(field_of(&pairs[j])));
        true
    }

    /// Removes the pair at position `i`; the last pair takes its place.
    fn remove_at(&mut self, i: usize) -> Option<Pair> {
        if i >= self.pairs.len() {
            return None;
        }
        let h = hash_of(field_of(&self.pairs[i]));
        if let Ok(e) = self.index.find_entry(h, |&j| j == i) {
            e.remove();
        }
        let last = self.pairs.len() - 1;
        if i != last {
            let hl = hash_of(field_of(&self.pairs[last]));
            if let Some(slot) = self.index.find_mut(hl, |&j| j == last) {
                *slot = i;
            }
        }
        let p = self.pairs.swap_remove(i);
        if i < self.ttl.len() {
            self.ttl.swap_remove(i);
        }
        self.bytes -= alloc_size(p.len());
        self.maybe_shrink();
        Some(p)
    }

    /// Gives memory back once the table is mostly empty (as Redis resizes its dicts).
    fn maybe_shrink(&mut self) {
        let (len, cap) = (self.pairs.len(), self.pairs.capacity());
        if cap > 64 && len < cap / 4 {
            self.pairs.shrink_to(len * 2);
            if !self.ttl.is_empty() {
                self.ttl.shrink_to(len * 2);
            }
            let pairs = &self.pairs;
            self.index
                .shrink_to(len * 2, |&j| hash_of(field_of(&pairs[j])));
        }
    }

    fn heap(&self) -> usize {
        alloc_size(self.pairs.capacity() * std::mem::size_of::<Pair>())
            + alloc_size(self.index.allocation_size())
            + alloc_size(self.ttl.capacity() * 8)
            + self.bytes
    }
}

/// Set once any field of any hash got a deadline (by a command, a RESTORE or a load): from
/// then on the background sweep walks the key space for hashes with deadlines.
pub static ANY_DEADLINE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The `listpackex` encoding: a listpack hash with one deadline per pair.
#[derive(Clone)]
struct PackEx {
    lp: Listpack,
    /// Deadline of pair `i` (0 = none); as long as the listpack has pairs.
    ttl: Vec<i64>,
    /// A lower bound of the earliest deadline (0 = none).
    min: i64,
}

/// The encodings that do not fit in place (a [`Thin`]'s box).
#[derive(Clone)]
enum Big {
    /// A listpack past what a [`Thin`] holds in place (more than 254 pairs or 16 MiB, only
    /// under raised `hash-max-listpack-*` limits).
    Pack(Listpack),
    /// A listpack with field deadlines (Redis's `listpackex`).
    PackEx(PackEx),
    Table(Table),
}

/// A borrowed view of the encoding.
enum V<'a> {
    Pack(ListpackRef<'a>),
    PackEx(&'a PackEx),
    Table(&'a Table),
}

enum VM<'a> {
    /// A listpack held in place is changed through [`HashValue::pack_mut`].
    Pack,
    PackEx(&'a mut PackEx),
    Table(&'a mut Table),
}

/// A hash value. Its `heap()` is what it allocates, as the allocator counts it.
///
/// 12 bytes with 4-byte alignment, held by the key space's `Value` without a box: a small
/// hash (the common case) is its listpack's pointer, byte length and pair count in place
/// ([`Thin`]), one allocation per hash; the other encodings are one box ([`Big`]).
#[derive(Clone)]
pub struct HashValue {
    repr: Thin<Big>,
}

const _: () = assert!(std::mem::size_of::<HashValue>() == 12);

impl Default for HashValue {
    fn default() -> HashValue {
        HashValue {
            repr: Thin::empty(),
        }
    }
}

/// A listpack hash held in place when it fits, boxed otherwise.
fn thin_pack(lp: Listpack) -> Thin<Big> {
    let (buf, len) = lp.into_raw();
    match Thin::bytes(buf, len / 2) {
        Ok(t) => t,
        Err(buf) => Thin::boxed(Box::new(Big::Pack(Listpack::from_raw(buf, len)))),
    }
}

impl std::fmt::Debug for HashValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map()
            .entries(
                self.iter()
                    .map(|(k, v)| (String::from_utf8_lossy(k), String::from_utf8_lossy(v))),
            )
            .finish()
    }
}

/// A field and its value, borrowed from the hash.
pub type FieldValue<'a> = (&'a [u8], &'a [u8]);

/// Iterates a hash's (field, value) pairs in its encoding's order (insertion order for a
/// listpack, the vector's order for a hashtable).
pub enum Iter<'a> {
    Pack(crate::util::listpack::Iter<'a>),
    Table(std::slice::Iter<'a, Pair>),
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a [u8], &'a [u8]);
    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Iter::Pack(it) => {
                let f = it.next()?;
                let v = it.next().unwrap_or_default();
                Some((f, v))
            }
            Iter::Table(it) => it.next().map(|p| split(p)),
        }
    }

    fn nth(&mut self, n: usize) -> Option<Self::Item> {
        match self {
            Iter::Pack(it) => {
                if n > 0 {
                    it.nth(n.checked_mul(2)? - 1)?;
                }
                self.next()
            }
            Iter::Table(it) => it.nth(n).map(|p| split(p)),
        }
    }
}

/// Position of `f` among the fields of a listpack hash (pair index, not entry index).
fn pack_find(lp: ListpackRef<'_>, f: &[u8]) -> Option<usize> {
    // A plain loop: `step_by(2).position` cost about 200 instructions per HSET.
    let mut it = lp.iter();
    let mut i = 0;
    while let Some(e) = it.next() {
        if e == f {
            return Some(i);
        }
        it.next();
        i += 1;
    }
    None
}

impl HashValue {
    fn view(&self) -> V<'_> {
        match self.repr.get() {
            ThinRef::Bytes(buf, pairs) => V::Pack(ListpackRef::new(buf, pairs * 2)),
            ThinRef::Boxed(Big::Pack(lp)) => V::Pack(lp.view()),
            ThinRef::Boxed(Big::PackEx(p)) => V::PackEx(p),
            ThinRef::Boxed(Big::Table(t)) => V::Table(t),
        }
    }

    fn view_mut(&mut self) -> VM<'_> {
        match self.repr.get_mut() {
            None | Some(Big::Pack(_)) => VM::Pack,
            Some(Big::PackEx(p)) => VM::PackEx(p),
            Some(Big::Table(t)) => VM::Table(t),
        }
    }

    /// Runs `f` on the listpack of a `listpack` hash (taken out of place and put back, boxed
    /// if it outgrew the place); `None` for the other encodings.
    fn pack_mut<R>(&mut self, f: impl FnOnce(&mut Listpack) -> R) -> Option<R> {
        if let Some((buf, pairs)) = self.repr.take_bytes() {
            let mut lp = Listpack::from_raw(buf, pairs * 2);
            let r = f(&mut lp);
            self.repr = thin_pack(lp);
            return Some(r);
        }
        match self.repr.get_mut() {
            Some(Big::Pack(lp)) => Some(f(lp)),
            _ => None,
        }
    }

    /// The packed buffer of a `listpack` or `listpackex` hash.
    fn packed(&self) -> Option<ListpackRef<'_>> {
        match self.view() {
            V::Pack(lp) => Some(lp),
            V::PackEx(p) => Some(p.lp.view()),
            V::Table(_) => None,
        }
    }

    /// Number of fields, those past their deadline but not purged yet included (as Redis
    /// 7.4's HLEN counts them).
    pub fn len(&self) -> usize {
        match self.view() {
            V::Table(t) => t.pairs.len(),
            _ => self.packed().map_or(0, |lp| lp.len() / 2),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Redis's name of the encoding (OBJECT ENCODING).
    pub fn encoding(&self) -> &'static str {
        match self.view() {
            V::Pack(_) => "listpack",
            V::PackEx(_) => "listpackex",
            V::Table(_) => "hashtable",
        }
    }

    /// Heap bytes owned (the value itself is held in place by the key space): the
    /// listpack's buffer, plus the box of the other encodings with the deadline vector of a
    /// `listpackex`, or the table with its vector, its index, its deadlines and every pair.
    pub fn heap(&self) -> usize {
        let boxed = match self.repr.get() {
            ThinRef::Bytes(..) => 0,
            ThinRef::Boxed(_) => alloc_size(std::mem::size_of::<Big>()),
        };
        boxed
            + match self.view() {
                V::Pack(lp) => lp.heap(),
                V::PackEx(p) => p.lp.heap() + alloc_size(p.ttl.capacity() * 8),
                V::Table(t) => t.heap(),
            }
    }

    /// Position of `f` (pair index) in the encoding.
    fn position(&self, f: &[u8]) -> Option<usize> {
        match self.view() {
            V::Table(t) => t.find(f),
            _ => self.packed().and_then(|lp| pack_find(lp, f)),
        }
    }

    pub fn get(&self, f: &[u8]) -> Option<&[u8]> {
        match self.view() {
            V::Table(t) => t.find(f).map(|i| split(&t.pairs[i]).1),
            _ => {
                let mut it = self.packed()?.iter();
                while let Some(e) = it.next() {
                    let v = it.next();
                    if e == f {
                        return v;
                    }
                }
                None
            }
        }
    }

    pub fn contains(&self, f: &[u8]) -> bool {
        self.get(f).is_some()
    }

    /// Converts a listpack (with or without deadlines) to a hashtable (sized for `extra`
    /// more fields), carrying the deadlines; no-op otherwise.
    fn convert(&mut self, extra: usize) {
        let (lp, ttl, min) = match self.view() {
            V::Pack(lp) => (lp, None, 0),
            V::PackEx(p) => (p.lp.view(), Some(&p.ttl), p.min),
            V::Table(_) => return,
        };
        let mut t = Table::with_capacity(lp.len() / 2 + extra);
        let mut it = lp.iter();
        while let Some(f) = it.next() {
            t.insert(f, it.next().unwrap_or_default());
        }
        if let Some(ttl) = ttl {
            t.ttl = ttl.clone();
            t.ttl.resize(t.pairs.len(), 0);
            t.min = min;
        }
        self.repr = Thin::boxed(Box::new(Big::Table(t)));
    }

    /// Redis's `hashTypeTryConversion`: before a write of these arguments, a listpack that
    /// one of them would not fit becomes a hashtable (even if the write then sets nothing).
    pub fn try_conversion<'a>(&mut self, args: impl IntoIterator<Item = &'a [u8]>) {
        if self.packed().is_some() {
            let max = limit(&LIMITS.hash_value);
            if args.into_iter().any(|a| a.len() > max) {
                self.convert(0);
            }
        }
    }

    /// Sets a field; true if it is new. An existing field loses its deadline (Redis 7.4's
    /// HSET). Converts as Redis's `hashTypeSet` does: a field or value over
    /// `hash-max-listpack-value` before the write, more fields than
    /// `hash-max-listpack-entries` after it.
    pub fn insert(&mut self, f: &[u8], v: &[u8]) -> bool {
        self.set(f, v, false)
    }

    /// Sets a field keeping the deadline it has (HINCRBY, HINCRBYFLOAT as Redis 7.4).
    pub fn insert_keep_ttl(&mut self, f: &[u8], v: &[u8]) -> bool {
        self.set(f, v, true)
    }

    fn set(&mut self, f: &[u8], v: &[u8], keep_ttl: bool) -> bool {
        let max_value = limit(&LIMITS.hash_value);
        if f.len() > max_value || v.len() > max_value {
            self.convert(1);
        }
        let new = match self.view_mut() {
            VM::Pack => self
                .pack_mut(|lp| pack_set(lp, None, f, v, keep_ttl))
                .unwrap_or(false),
            VM::PackEx(p) => pack_set(&mut p.lp, Some(&mut p.ttl), f, v, keep_ttl),
            VM::Table(t) => {
                if !keep_ttl && !t.ttl.is_empty() {
                    if let Some(i) = t.find(f) {
                        t.ttl[i] = 0;
                    }
                }
                return t.insert(f, v);
            }
        };
        if self.len() > limit(&LIMITS.hash_entries) {
            self.convert(0);
        }
        new
    }

    /// Removes a field; true if it was there.
    pub fn remove(&mut self, f: &[u8]) -> bool {
        match self.position(f) {
            Some(i) => self.remove_at(i),
            None => false,
        }
    }

    fn remove_at(&mut self, i: usize) -> bool {
        match self.view_mut() {
            VM::Pack => self
                .pack_mut(|lp| lp.remove_range(2 * i, 2 * i + 2))
                .is_some(),
            VM::PackEx(p) => {
                p.lp.remove_range(2 * i, 2 * i + 2);
                if i < p.ttl.len() {
                    p.ttl.remove(i);
                }
                true
            }
            VM::Table(t) => t.remove_at(i).is_some(),
        }
    }

    /// The deadlines parallel to the pairs, if this hash keeps any.
    fn ttls(&self) -> Option<&[i64]> {
        match self.view() {
            V::Pack(_) => None,
            V::PackEx(p) => Some(&p.ttl),
            V::Table(t) => (!t.ttl.is_empty()).then_some(&t.ttl[..]),
        }
    }

    /// Whether any field has a deadline (what the background sweep looks for).
    pub fn has_deadlines(&self) -> bool {
        self.ttls().is_some_and(|t| t.iter().any(|&d| d != 0))
    }

    /// `None` if there is no field `f`; else its deadline in Unix ms, 0 if none.
    pub fn deadline(&self, f: &[u8]) -> Option<i64> {
        let i = self.position(f)?;
        Some(self.ttls().and_then(|t| t.get(i).copied()).unwrap_or(0))
    }

    /// Sets (`at > 0`) or clears (`at == 0`) the deadline of an existing field; false if
    /// there is no such field. A listpack becomes a `listpackex` with its first deadline.
    pub fn set_deadline(&mut self, f: &[u8], at: i64) -> bool {
        let Some(i) = self.position(f) else {
            return false;
        };
        if at == 0 && self.ttls().is_none() {
            return true;
        }
        if let Some(lp) = self.pack_mut(std::mem::take) {
            let n = lp.len() / 2;
            self.repr = Thin::boxed(Box::new(Big::PackEx(PackEx {
                lp,
                ttl: vec![0; n],
                min: 0,
            })));
        }
        let (ttl, min) = match self.view_mut() {
            VM::PackEx(p) => (&mut p.ttl, &mut p.min),
            VM::Table(t) => {
                if t.ttl.is_empty() {
                    t.ttl = vec![0; t.pairs.len()];
                }
                (&mut t.ttl, &mut t.min)
            }
            VM::Pack => return false,
        };
        if let Some(slot) = ttl.get_mut(i) {
            *slot = at;
        }
        if at != 0 && (*min == 0 || at < *min) {
            *min = at;
        }
        if at != 0 {
            ANY_DEADLINE.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        true
    }

    /// Whether a field may be due at `now` (cheap: a lower bound of the earliest deadline).
    pub fn may_be_due(&self, now: i64) -> bool {
        let min = match self.view() {
            V::Pack(_) => 0,
            V::PackEx(p) => p.min,
            V::Table(t) => t.min,
        };
        min != 0 && min <= now
    }

    /// Removes up to `max` fields whose deadline is at or before `now`; returns them.
    /// The earliest deadline is recomputed when the walk saw every field.
    pub fn purge(&mut self, now: i64, max: usize) -> Vec<Vec<u8>> {
        let mut removed = Vec::new();
        if !self.may_be_due(now) {
            return removed;
        }
        let mut i = 0;
        let mut min = 0i64;
        let mut complete = true;
        while let Some(&d) = self.ttls().and_then(|t| t.get(i)) {
            if d != 0 && d <= now {
                if removed.len() == max {
                    complete = false;
                    break;
                }
                if let Some((f, _)) = self.nth(i) {
                    removed.push(f.to_vec());
                }
                // A table moves its last pair here: look at position `i` again.
                self.remove_at(i);
                continue;
            }
            if d != 0 && (min == 0 || d < min) {
                min = d;
            }
            i += 1;
        }
        if complete {
            match self.view_mut() {
                VM::PackEx(p) => p.min = min,
                VM::Table(t) => t.min = min,
                VM::Pack => {}
            }
        }
        removed
    }

    pub fn iter(&self) -> Iter<'_> {
        match self.view() {
            V::Pack(lp) => Iter::Pack(lp.iter()),
            V::PackEx(p) => Iter::Pack(p.lp.iter()),
            V::Table(t) => Iter::Table(t.pairs.iter()),
        }
    }

    /// The pairs not past their deadline at `now` (what HGETALL, HKEYS, HVALS return: Redis
    /// 7.4 skips expired fields there without deleting them).
    pub fn iter_live(&self, now: i64) -> impl Iterator<Item = FieldValue<'_>> {
        let ttl = self.ttls().unwrap_or(&[]);
        self.iter()
            .enumerate()
            .filter(move |(i, _)| ttl.get(*i).is_none_or(|&d| d == 0 || d > now))
            .map(|(_, p)| p)
    }

    /// Whether field `f` exists and is past its deadline at `now`.
    pub fn is_due(&self, f: &[u8], now: i64) -> bool {
        self.deadline(f).is_some_and(|d| d != 0 && d <= now)
    }

    /// The deadline of each pair by position (0 = none; empty if the hash keeps none).
    pub fn deadlines_by_position(&self) -> Vec<i64> {
        self.ttls().map(|t| t.to_vec()).unwrap_or_default()
    }

    /// Every field with a deadline and that deadline, in the encoding's order (the journal
    /// rewrite and DUMP write them after the fields).
    pub fn deadlines(&self) -> Vec<(&[u8], i64)> {
        let Some(ttl) = self.ttls() else {
            return Vec::new();
        };
        self.iter()
            .zip(ttl.iter())
            .filter(|(_, &d)| d != 0)
            .map(|((f, _), &d)| (f, d))
            .collect()
    }

    /// The pair at position `n` of the encoding's order (O(1) for a hashtable).
    pub fn nth(&self, n: usize) -> Option<(&[u8], &[u8])> {
        match self.view() {
            V::Table(t) => t.pairs.get(n).map(|p| split(p)),
            _ => self.iter().nth(n),
        }
    }

    /// The pairs at `positions` (each below `len`), in that order; one walk of a listpack.
    pub fn pairs_at(&self, positions: &[usize]) -> Vec<(&[u8], &[u8])> {
        match self.view() {
            V::Table(t) => positions
                .iter()
                .filter_map(|&i| t.pairs.get(i).map(|p| split(p)))
                .collect(),
            _ => {
                let all: Vec<(&[u8], &[u8])> = self.iter().collect();
                positions
                    .iter()
                    .filter_map(|&i| all.get(i).copied())
                    .collect()
            }
        }
    }

    /// HSCAN over a hashtable: `cursor` 0 starts; a cursor is the number of positions not
    /// visited yet, walked from the end of the pair vector down. A removal moves the last
    /// pair into the freed position, so a pair not returned yet only ever moves down, below
    /// the cursor, and an insertion appends: every field present for the whole scan is
    /// returned. `None` for a listpack (which Redis returns whole, with cursor 0).
    /// Fields past their deadline at `now` are skipped (not deleted), as Redis 7.4's.
    pub fn scan_table(
        &self,
        cursor: u64,
        count: usize,
        now: i64,
    ) -> Option<(u64, Vec<FieldValue<'_>>)> {
        let V::Table(t) = self.view() else {
            return None;
        };
        let len = t.pairs.len();
        let end = if cursor == 0 {
            len
        } else {
            usize::try_from(cursor).unwrap_or(usize::MAX).min(len)
        };
        let start = end.saturating_sub(count.max(1));
        let out = (start..end)
            .rev()
            .filter(|&i| t.ttl.get(i).is_none_or(|&d| d == 0 || d > now))
            .map(|i| split(&t.pairs[i]))
            .collect();
        Some((start as u64, out))
    }
}

/// Sets `f` in a listpack hash (with its deadlines if it has them); true if new.
fn pack_set(
    lp: &mut Listpack,
    ttl: Option<&mut Vec<i64>>,
    f: &[u8],
    v: &[u8],
    keep_ttl: bool,
) -> bool {
    match pack_find(lp.view(), f) {
        Some(i) => {
            lp.replace(2 * i + 1, v);
            if let (Some(ttl), false) = (ttl, keep_ttl) {
                if let Some(d) = ttl.get_mut(i) {
                    *d = 0;
                }
            }
            false
        }
        None => {
            // One reallocation for the pair.
            lp.push_back_all(&[f, v]);
            if let Some(ttl) = ttl {
                ttl.push(0);
            }
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    fn h(pairs: &[(&str, &str)]) -> HashValue {
        let mut v = HashValue::default();
        for (f, x) in pairs {
            v.insert(f.as_bytes(), x.as_bytes());
        }
        v
    }

    fn sorted(v: &HashValue) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = v
            .iter()
            .map(|(f, x)| {
                (
                    String::from_utf8_lossy(f).into_owned(),
                    String::from_utf8_lossy(x).into_owned(),
                )
            })
            .collect();
        out.sort();
        out
    }

    #[test]
    fn pairs_pack_and_split() {
        for flen in [0usize, 1, 127, 128, 300, 20000] {
            let f = vec![b'f'; flen];
            for v in [&b""[..], b"x", &[b'v'; 200]] {
                let p = pack_pair(&f, v);
                assert_eq!(split(&p), (&f[..], v));
                assert_eq!(p.len(), varint_len(flen) + flen + v.len());
            }
        }
    }

    #[test]
    fn listpack_then_hashtable() {
        // These tests read the default limits (128 / 64); none of them changes them.
        assert_eq!(LIMITS.hash_entries.load(Ordering::Relaxed), 128);
        let mut v = h(&[("a", "1"), ("b", "2")]);
        assert_eq!(v.encoding(), "listpack");
        assert_eq!(v.len(), 2);
        assert_eq!(v.get(b"a"), Some(&b"1"[..]));
        assert_eq!(v.get(b"1"), None, "a value is not a field");
        assert!(!v.insert(b"a", b"3"));
        assert_eq!(
            v.iter().collect::<Vec<_>>(),
            vec![(&b"a"[..], &b"3"[..]), (b"b", b"2")],
            "insertion order"
        );
        assert_eq!(v.nth(1), Some((&b"b"[..], &b"2"[..])));
        assert_eq!(v.nth(2), None);
        assert!(v.remove(b"a"));
        assert!(!v.remove(b"a"));
        assert_eq!(v.len(), 1);
        // A value at the limit stays packed, one byte over converts.
        v.insert(b"edge", &[b'x'; 64]);
        assert_eq!(v.encoding(), "listpack");
        v.insert(b"long", &[b'x'; 65]);
        assert_eq!(v.encoding(), "hashtable");
        assert_eq!(sorted(&v).len(), 3);
        // ...and never goes back.
        assert!(v.remove(b"long"));
        assert_eq!(v.encoding(), "hashtable");
        assert_eq!(v.get(b"b"), Some(&b"2"[..]));
        // A long field converts too.
        let mut w = h(&[("a", "1")]);
        w.insert(&[b'f'; 65], b"1");
        assert_eq!(w.encoding(), "hashtable");
        assert_eq!(w.get(&[b'f'; 65]), Some(&b"1"[..]));
        assert_eq!(w.get(b"a"), Some(&b"1"[..]));
        // Too many fields.
        let mut w = HashValue::default();
        for i in 0..128 {
            assert!(w.insert(format!("f{i}").as_bytes(), i.to_string().as_bytes()));
        }
        assert_eq!(w.encoding(), "listpack");
        assert!(!w.insert(b"f5", b"five"));
        assert_eq!(w.encoding(), "listpack");
        assert!(w.insert(b"f128", b"128"));
        assert_eq!(w.encoding(), "hashtable");
        assert_eq!(w.len(), 129);
        for i in 0..=128 {
            let want = if i == 5 {
                "five".to_string()
            } else {
                i.to_string()
            };
            assert_eq!(w.get(format!("f{i}").as_bytes()), Some(want.as_bytes()));
        }
        // try_conversion converts on a long argument even when nothing is set.
        let mut w = h(&[("a", "1")]);
        w.try_conversion([&b"a"[..], &b"b"[..]]);
        assert_eq!(w.encoding(), "listpack");
        w.try_conversion([&b"a"[..], &[b'v'; 65][..]]);
        assert_eq!(w.encoding(), "hashtable");
        assert_eq!(w.len(), 1);
    }

    #[test]
    fn table_removal_keeps_the_index() {
        let mut w = HashValue::default();
        for i in 0..1000 {
            w.insert(format!("k{i}").as_bytes(), format!("v{i}").as_bytes());
        }
        assert_eq!(w.encoding(), "hashtable");
        for i in (0..1000).step_by(3) {
            assert!(w.remove(format!("k{i}").as_bytes()));
        }
        for i in 0..1000 {
            let got = w.get(format!("k{i}").as_bytes());
            if i % 3 == 0 {
                assert_eq!(got, None);
            } else {
                assert_eq!(got, Some(format!("v{i}").as_bytes()));
            }
        }
        let full = w.heap();
        for i in 0..1000 {
            w.remove(format!("k{i}").as_bytes());
        }
        assert!(w.is_empty());
        assert!(w.heap() < full / 4);
    }

    #[test]
    fn scan_cursor_survives_removals() {
        let mut w = HashValue::default();
        for i in 0..300 {
            w.insert(format!("k{i}").as_bytes(), b"v");
        }
        let mut seen = hashbrown::HashSet::new();
        let mut cursor = 0;
        let mut removed = 0;
        loop {
            let (next, batch) = w.scan_table(cursor, 10, 0).unwrap();
            seen.extend(batch.iter().map(|(f, _)| f.to_vec()));
            // Remove fields not returned yet (odd ones), and some already returned.
            for i in (removed..removed + 3).map(|x| x * 2 + 1) {
                w.remove(format!("k{i}").as_bytes());
            }
            // Add some, which may or may not be returned.
            w.insert(format!("new{removed}").as_bytes(), b"v");
            removed += 3;
            if next == 0 {
                break;
            }
            cursor = next;
        }
        for i in (0..300).step_by(2) {
            assert!(seen.contains(format!("k{i}").as_bytes()), "k{i} missed");
        }
        assert!(h(&[("a", "1")]).scan_table(0, 10, 0).is_none());
    }

    #[test]
    fn deadlines_follow_their_fields() {
        let mut v = h(&[("a", "1"), ("b", "2"), ("c", "3")]);
        assert!(v.set_deadline(b"a", 100));
        assert!(!v.set_deadline(b"zz", 100));
        assert_eq!(v.encoding(), "listpackex");
        assert!(v.set_deadline(b"c", 300));
        assert_eq!(v.deadline(b"a"), Some(100));
        assert_eq!(v.deadline(b"b"), Some(0));
        assert_eq!(v.deadline(b"x"), None);
        // HSET clears, the keep-TTL write keeps.
        v.insert(b"a", b"9");
        assert_eq!(v.deadline(b"a"), Some(0));
        v.set_deadline(b"a", 100);
        v.insert_keep_ttl(b"a", b"10");
        assert_eq!(v.deadline(b"a"), Some(100));
        // Removal keeps the others' deadlines in place.
        assert!(v.remove(b"b"));
        assert_eq!(v.deadline(b"c"), Some(300));
        assert_eq!(
            v.iter_live(150).map(|(f, _)| f).collect::<Vec<_>>(),
            vec![&b"c"[..]]
        );
        assert!(!v.may_be_due(99));
        assert_eq!(v.purge(150, 10), vec![b"a".to_vec()]);
        assert!(!v.may_be_due(299));
        assert!(v.may_be_due(300));
        // Conversion to a hashtable carries them.
        for i in 0..200 {
            v.insert(format!("f{i}").as_bytes(), b"v");
        }
        assert_eq!(v.encoding(), "hashtable");
        assert_eq!(v.deadline(b"c"), Some(300));
        assert_eq!(v.deadline(b"f7"), Some(0));
        for i in 0..200 {
            v.set_deadline(format!("f{i}").as_bytes(), 200 + i);
        }
        assert_eq!(v.purge(250, 20).len(), 20);
        assert_eq!(v.purge(250, usize::MAX).len(), 31);
        assert_eq!(v.len(), 150);
        assert!(v.iter_live(1000).next().is_none());
        assert_eq!(v.deadlines().len(), 150);
    }

    #[test]
    fn heap_is_what_is_allocated() {
        // Two short fields: one exactly sized buffer once compacted.
        let v = h(&[("userID", "1234567"), ("accessTime", "1700000000000")]);
        let bytes = (2 + 6) + (2 + 7) + (2 + 10) + (2 + 13);
        assert_eq!(v.heap(), alloc_size(bytes));
        assert_eq!(v.get(b"accessTime"), Some(&b"1700000000000"[..]));
        // A hashtable counts its vector, index and pairs.
        let mut w = HashValue::default();
        for i in 0..200 {
            w.insert(format!("field-{i}").as_bytes(), b"value");
        }
        assert!(w.heap() > 200 * (16 + 16));
        let before = w.heap();
        w.insert(b"field-0", &[b'x'; 100]);
        assert_eq!(
            w.heap(),
            before - alloc_size(1 + 7 + 5) + alloc_size(1 + 7 + 100)
        );
    }
}
