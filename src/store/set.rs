//! A set value in Redis 7.2's three encodings.
//!
//! - `intset`: a sorted `Vec<i64>`, while every member is a canonical 64-bit integer and
//!   there are at most `set-max-intset-entries` of them;
//! - `listpack`: the members packed in one [`Listpack`] (insertion order), while there are
//!   at most `set-max-listpack-entries` and none is longer than `set-max-listpack-value`;
//! - `hashtable`: beyond those.
//!
//! A set only converts upward (intset -> listpack -> hashtable, or intset -> hashtable when
//! an intset outgrows its limit), never back, as Redis does.
//!
//! The hashtable keeps its members in a `Vec` and indexes them with a hashbrown table of
//! positions, so a random member (SPOP, SRANDMEMBER) is one index away, a removal is a
//! `swap_remove`, and SSCAN's cursor is a position that stays valid under removals (see
//! [`SetValue::scan_table`]).

use crate::store::encoding::{limit, LIMITS};
use crate::util::listpack::Listpack;
use crate::util::mem::alloc_size;
use crate::util::num::parse_i64;
use bytes::Bytes;
use hashbrown::HashTable;
use std::borrow::Cow;
use std::hash::BuildHasher;
use std::sync::OnceLock;

/// Redis caps an intset's configured size at 2^30 entries.
const INTSET_CAP: usize = 1 << 30;

fn hasher() -> &'static hashbrown::DefaultHashBuilder {
    static H: OnceLock<hashbrown::DefaultHashBuilder> = OnceLock::new();
    H.get_or_init(hashbrown::DefaultHashBuilder::default)
}

fn hash_of(m: &[u8]) -> u64 {
    hasher().hash_one(m)
}

/// The `hashtable` encoding: members in a vector, indexed by a table of positions.
#[derive(Clone, Default)]
struct Table {
    members: Vec<Box<[u8]>>,
    index: HashTable<usize>,
    /// Sum of the members' allocations.
    bytes: usize,
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set()
            .entries(self.members.iter().map(|m| String::from_utf8_lossy(m)))
            .finish()
    }
}

impl Table {
    fn with_capacity(n: usize) -> Table {
        Table {
            members: Vec::with_capacity(n),
            index: HashTable::with_capacity(n),
            bytes: 0,
        }
    }

    fn find(&self, m: &[u8]) -> Option<usize> {
        let members = &self.members;
        self.index.find(hash_of(m), |&i| &*members[i] == m).copied()
    }

    fn insert(&mut self, m: &[u8]) -> bool {
        if self.find(m).is_some() {
            return false;
        }
        let i = self.members.len();
        self.members.push(m.into());
        self.bytes += alloc_size(m.len());
        let members = &self.members;
        self.index
            .insert_unique(hash_of(m), i, |&j| hash_of(&members[j]));
        true
    }

    /// Removes the member at position `i`; the last member takes its place.
    fn remove_at(&mut self, i: usize) -> Option<Box<[u8]>> {
        if i >= self.members.len() {
            return None;
        }
        let h = hash_of(&self.members[i]);
        if let Ok(e) = self.index.find_entry(h, |&j| j == i) {
            e.remove();
        }
        let last = self.members.len() - 1;
        if i != last {
            let hl = hash_of(&self.members[last]);
            if let Some(slot) = self.index.find_mut(hl, |&j| j == last) {
                *slot = i;
            }
        }
        let m = self.members.swap_remove(i);
        self.bytes -= alloc_size(m.len());
        self.maybe_shrink();
        Some(m)
    }

    fn remove(&mut self, m: &[u8]) -> bool {
        match self.find(m) {
            Some(i) => self.remove_at(i).is_some(),
            None => false,
        }
    }

    /// Gives memory back once the table is mostly empty (as Redis resizes its dicts).
    fn maybe_shrink(&mut self) {
        let (len, cap) = (self.members.len(), self.members.capacity());
        if cap > 64 && len < cap / 4 {
            self.members.shrink_to(len * 2);
            let members = &self.members;
            self.index.shrink_to(len * 2, |&j| hash_of(&members[j]));
        }
    }

    fn heap(&self) -> usize {
        alloc_size(self.members.capacity() * std::mem::size_of::<Box<[u8]>>())
            + alloc_size(self.index.allocation_size())
            + self.bytes
    }
}

#[derive(Clone, Debug)]
enum Repr {
    /// Sorted, distinct.
    Ints(Vec<i64>),
    Pack(Listpack),
    Table(Table),
}

#[derive(Clone, Debug)]
pub struct SetValue {
    repr: Repr,
}

impl Default for SetValue {
    /// An empty set starts as an intset, as the sets Redis builds for SINTERSTORE and
    /// SUNIONSTORE do; the first member decides from there.
    fn default() -> SetValue {
        SetValue {
            repr: Repr::Ints(Vec::new()),
        }
    }
}

fn int_bytes(i: i64) -> Vec<u8> {
    itoa::Buffer::new().format(i).as_bytes().to_vec()
}

fn digits(i: i64) -> usize {
    itoa::Buffer::new().format(i).len()
}

/// One member as a borrowed or (for intset members) formatted byte string.
pub type Member<'a> = Cow<'a, [u8]>;

/// Iterates a set's members in its encoding's order (ascending for an intset, insertion
/// order for a listpack, the table's order for a hashtable).
pub enum Iter<'a> {
    Ints(std::slice::Iter<'a, i64>),
    Pack(crate::util::listpack::Iter<'a>),
    Table(std::slice::Iter<'a, Box<[u8]>>),
}

impl<'a> Iterator for Iter<'a> {
    type Item = Member<'a>;
    fn next(&mut self) -> Option<Member<'a>> {
        match self {
            Iter::Ints(it) => it.next().map(|&i| Cow::Owned(int_bytes(i))),
            Iter::Pack(it) => it.next().map(Cow::Borrowed),
            Iter::Table(it) => it.next().map(|m| Cow::Borrowed(&**m)),
        }
    }

    /// Skips without formatting the skipped intset members (O(1) but for a listpack).
    fn nth(&mut self, n: usize) -> Option<Member<'a>> {
        match self {
            Iter::Ints(it) => it.nth(n).map(|&i| Cow::Owned(int_bytes(i))),
            Iter::Pack(it) => it.nth(n).map(Cow::Borrowed),
            Iter::Table(it) => it.nth(n).map(|m| Cow::Borrowed(&**m)),
        }
    }
}

/// `k` distinct random positions below `n` (`k` <= `n`), in random order. The work and
/// memory are bounded by `n` (the set's size), never by a count a client claims.
pub fn distinct_positions(n: usize, k: usize, rnd: &mut impl FnMut() -> u64) -> Vec<usize> {
    let k = k.min(n);
    if k.saturating_mul(3) >= n {
        // Partial Fisher-Yates over all positions.
        let mut v: Vec<usize> = (0..n).collect();
        for i in 0..k {
            let j = i + (rnd() % (n - i) as u64) as usize;
            v.swap(i, j);
        }
        v.truncate(k);
        v
    } else {
        // Floyd's sampling: k draws, each distinct.
        let mut seen = hashbrown::HashSet::with_capacity(k);
        let mut out = Vec::with_capacity(k);
        for j in n - k..n {
            let t = (rnd() % (j as u64 + 1)) as usize;
            let pick = if seen.insert(t) { t } else { j };
            if pick == j {
                seen.insert(j);
            }
            out.push(pick);
        }
        // Floyd's order is biased toward ascending draws; shuffle it.
        for i in (1..out.len()).rev() {
            let j = (rnd() % (i as u64 + 1)) as usize;
            out.swap(i, j);
        }
        out
    }
}

impl SetValue {
    pub fn len(&self) -> usize {
        match &self.repr {
            Repr::Ints(v) => v.len(),
            Repr::Pack(lp) => lp.len(),
            Repr::Table(t) => t.members.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn encoding(&self) -> &'static str {
        match &self.repr {
            Repr::Ints(_) => "intset",
            Repr::Pack(_) => "listpack",
            Repr::Table(_) => "hashtable",
        }
    }

    /// Heap bytes owned (the buffers and, for a hashtable, each member's allocation).
    pub fn heap(&self) -> usize {
        match &self.repr {
            Repr::Ints(v) => alloc_size(v.capacity() * 8),
            Repr::Pack(lp) => lp.heap(),
            Repr::Table(t) => t.heap(),
        }
    }

    pub fn contains(&self, m: &[u8]) -> bool {
        match &self.repr {
            Repr::Ints(v) => parse_i64(m).is_some_and(|i| v.binary_search(&i).is_ok()),
            Repr::Pack(lp) => lp.iter().any(|e| e == m),
            Repr::Table(t) => t.find(m).is_some(),
        }
    }

    /// Converts to a hashtable sized for `extra` more members.
    fn convert_to_table(&mut self, extra: usize) {
        let mut t = Table::with_capacity(self.len() + extra);
        match &self.repr {
            Repr::Ints(v) => {
                for &i in v {
                    t.insert(&int_bytes(i));
                }
            }
            Repr::Pack(lp) => {
                for m in lp.iter() {
                    t.insert(m);
                }
            }
            Repr::Table(_) => return,
        }
        self.repr = Repr::Table(t);
    }

    /// Adds a member; true if it is new. Converts as Redis 7.2's `setTypeAddAux` does.
    pub fn insert(&mut self, m: &[u8]) -> bool {
        let max_entries = limit(&LIMITS.set_entries);
        let max_value = limit(&LIMITS.set_value);
        match &mut self.repr {
            Repr::Ints(v) => {
                if let Some(i) = parse_i64(m) {
                    let Err(pos) = v.binary_search(&i) else {
                        return false;
                    };
                    v.insert(pos, i);
                    if v.len() > limit(&LIMITS.set_intset_entries).min(INTSET_CAP) {
                        self.convert_to_table(0);
                    }
                    return true;
                }
                // A string: a listpack if everything fits one, else a hashtable.
                let widest = match (v.first(), v.last()) {
                    (Some(&a), Some(&b)) => digits(a).max(digits(b)),
                    _ => 0,
                };
                if v.len() < max_entries && m.len() <= max_value && widest <= max_value {
                    let mut lp = Listpack::new();
                    for &i in v.iter() {
                        lp.push_back(itoa::Buffer::new().format(i).as_bytes());
                    }
                    lp.push_back(m);
                    self.repr = Repr::Pack(lp);
                } else {
                    self.convert_to_table(1);
                    if let Repr::Table(t) = &mut self.repr {
                        t.insert(m);
                    }
                }
                true
            }
            Repr::Pack(lp) => {
                if lp.iter().any(|e| e == m) {
                    return false;
                }
                if lp.len() < max_entries && m.len() <= max_value {
                    lp.push_back(m);
                } else {
                    self.convert_to_table(1);
                    if let Repr::Table(t) = &mut self.repr {
                        t.insert(m);
                    }
                }
                true
            }
            Repr::Table(t) => t.insert(m),
        }
    }

    /// Removes a member; true if it was there.
    pub fn remove(&mut self, m: &[u8]) -> bool {
        match &mut self.repr {
            Repr::Ints(v) => match parse_i64(m).map(|i| v.binary_search(&i)) {
                Some(Ok(pos)) => {
                    v.remove(pos);
                    if v.capacity() > 16 && v.len() < v.capacity() / 4 {
                        v.shrink_to(v.len() * 2);
                    }
                    true
                }
                _ => false,
            },
            Repr::Pack(lp) => match lp.position(m) {
                Some(i) => {
                    lp.remove(i);
                    true
                }
                None => false,
            },
            Repr::Table(t) => t.remove(m),
        }
    }

    /// Keeps the members for which `keep` is true.
    pub fn retain(&mut self, mut keep: impl FnMut(&[u8]) -> bool) {
        match &mut self.repr {
            Repr::Ints(v) => v.retain(|&i| keep(itoa::Buffer::new().format(i).as_bytes())),
            Repr::Pack(lp) => {
                lp.retain(keep);
            }
            Repr::Table(t) => {
                let mut i = 0;
                while i < t.members.len() {
                    if keep(&t.members[i]) {
                        i += 1;
                    } else {
                        t.remove_at(i);
                    }
                }
            }
        }
    }

    pub fn iter(&self) -> Iter<'_> {
        match &self.repr {
            Repr::Ints(v) => Iter::Ints(v.iter()),
            Repr::Pack(lp) => Iter::Pack(lp.iter()),
            Repr::Table(t) => Iter::Table(t.members.iter()),
        }
    }

    /// Every member as `Bytes` (replies).
    pub fn to_bytes(&self) -> Vec<Bytes> {
        self.iter().map(|m| Bytes::from(m.into_owned())).collect()
    }

    /// The member at position `i` of the encoding's order.
    pub fn get(&self, i: usize) -> Option<Member<'_>> {
        match &self.repr {
            Repr::Ints(v) => v.get(i).map(|&x| Cow::Owned(int_bytes(x))),
            Repr::Pack(lp) => lp.get(i).map(Cow::Borrowed),
            Repr::Table(t) => t.members.get(i).map(|m| Cow::Borrowed(&**m)),
        }
    }

    /// The members at `positions` (each below `len`), in that order.
    pub fn members_at(&self, positions: &[usize]) -> Vec<Bytes> {
        match &self.repr {
            Repr::Pack(lp) => {
                // One walk of the listpack rather than one per position.
                let all: Vec<&[u8]> = lp.iter().collect();
                positions
                    .iter()
                    .filter_map(|&i| all.get(i).map(|m| Bytes::copy_from_slice(m)))
                    .collect()
            }
            _ => positions
                .iter()
                .filter_map(|&i| self.get(i).map(|m| Bytes::from(m.into_owned())))
                .collect(),
        }
    }

    /// A random member.
    pub fn random(&self, rnd: u64) -> Option<Member<'_>> {
        if self.is_empty() {
            return None;
        }
        self.get((rnd % self.len() as u64) as usize)
    }

    /// Removes and returns a random member.
    pub fn pop_random(&mut self, rnd: u64) -> Option<Bytes> {
        let n = self.len();
        if n == 0 {
            return None;
        }
        let i = (rnd % n as u64) as usize;
        match &mut self.repr {
            Repr::Ints(v) => Some(Bytes::from(int_bytes(v.remove(i)))),
            Repr::Pack(lp) => lp.remove(i).map(Bytes::from),
            Repr::Table(t) => t.remove_at(i).map(|m| Bytes::from(m.into_vec())),
        }
    }

    /// Removes and returns `k` distinct random members (`k` < `len`), in random order.
    pub fn pop_many(&mut self, k: usize, rnd: &mut impl FnMut() -> u64) -> Vec<Bytes> {
        let n = self.len();
        if let Repr::Table(t) = &mut self.repr {
            let mut out = Vec::with_capacity(k.min(n));
            for _ in 0..k.min(n) {
                let i = (rnd() % t.members.len() as u64) as usize;
                if let Some(m) = t.remove_at(i) {
                    out.push(Bytes::from(m.into_vec()));
                }
            }
            return out;
        }
        // Packed forms: choose the positions, then rebuild once (O(n), not O(n) per pop).
        let pos = distinct_positions(n, k, rnd);
        let out = self.members_at(&pos);
        let mut gone = vec![false; n];
        for &i in &pos {
            gone[i] = true;
        }
        let mut at = 0;
        match &mut self.repr {
            Repr::Ints(v) => v.retain(|_| {
                at += 1;
                !gone[at - 1]
            }),
            Repr::Pack(lp) => {
                lp.retain(|_| {
                    at += 1;
                    !gone[at - 1]
                });
            }
            Repr::Table(_) => {}
        }
        out
    }

    /// SSCAN over a hashtable: `cursor` 0 starts; a cursor is the number of positions not
    /// visited yet, walked from the end of the member vector down. A removal moves the last
    /// member into the freed position, so a member not returned yet only ever moves down,
    /// below the cursor: every member present for the whole scan is returned. `None` for a
    /// packed set (which Redis returns whole, with cursor 0).
    pub fn scan_table(&self, cursor: u64, count: usize) -> Option<(u64, Vec<Bytes>)> {
        let Repr::Table(t) = &self.repr else {
            return None;
        };
        let len = t.members.len();
        let end = if cursor == 0 {
            len
        } else {
            usize::try_from(cursor).unwrap_or(usize::MAX).min(len)
        };
        let start = end.saturating_sub(count.max(1));
        let out = t.members[start..end]
            .iter()
            .rev()
            .map(|m| Bytes::copy_from_slice(m))
            .collect();
        Some((start as u64, out))
    }

    /// An empty set in the encoding Redis 7.2's `setTypeCreate` picks for a new key about to
    /// receive `first` and about `size_hint` members in all (SADD's argument count, 1 for
    /// SMOVE): an intset for an integer if the hint fits one, else a listpack if the hint
    /// fits one, else a hashtable sized for the hint (bounded by the request's own length).
    pub fn create_for(first: &[u8], size_hint: usize) -> SetValue {
        let repr = if parse_i64(first).is_some() && size_hint <= limit(&LIMITS.set_intset_entries) {
            Repr::Ints(Vec::new())
        } else if size_hint <= limit(&LIMITS.set_entries) {
            Repr::Pack(Listpack::new())
        } else {
            Repr::Table(Table::with_capacity(size_hint))
        };
        SetValue { repr }
    }

    /// Redis 7.2's `setTypeMaybeConvert`: before adding about `size_hint` members, a packed
    /// set that could not hold that many becomes a hashtable.
    pub fn maybe_convert(&mut self, size_hint: usize) {
        let over = match &self.repr {
            Repr::Ints(_) => size_hint > limit(&LIMITS.set_intset_entries),
            Repr::Pack(_) => size_hint > limit(&LIMITS.set_entries),
            Repr::Table(_) => false,
        };
        if over {
            self.convert_to_table(size_hint);
        }
    }

    /// A set of the given members (SINTERSTORE, SUNIONSTORE, SDIFFSTORE results and tests).
    pub fn from_members<'a>(members: impl IntoIterator<Item = &'a [u8]>) -> SetValue {
        let mut s = SetValue::default();
        for m in members {
            s.insert(m);
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    fn s(members: &[&str]) -> SetValue {
        SetValue::from_members(members.iter().map(|m| m.as_bytes()))
    }

    fn sorted(v: &SetValue) -> Vec<String> {
        let mut out: Vec<String> = v
            .iter()
            .map(|m| String::from_utf8_lossy(&m).into_owned())
            .collect();
        out.sort();
        out
    }

    #[test]
    fn encodings_convert_upward() {
        // These tests read the default limits (512 / 128 / 64); none of them changes them.
        assert_eq!(LIMITS.set_intset_entries.load(Ordering::Relaxed), 512);
        let mut v = s(&["3", "1", "2"]);
        assert_eq!(v.encoding(), "intset");
        assert_eq!(v.iter().collect::<Vec<_>>(), vec![&b"1"[..], b"2", b"3"]);
        assert!(!v.insert(b"2"));
        // Not canonical integers: strings.
        for m in ["01", "+1", " 1", "-0", "9223372036854775808"] {
            let mut w = s(&["1"]);
            assert!(w.insert(m.as_bytes()));
            assert_eq!(w.encoding(), "listpack", "{m}");
            assert!(w.contains(m.as_bytes()));
            assert!(w.contains(b"1"));
        }
        // A string turns an intset into a listpack...
        assert!(v.insert(b"a"));
        assert_eq!(v.encoding(), "listpack");
        assert_eq!(sorted(&v), ["1", "2", "3", "a"]);
        // ...which never goes back, even when only integers are left.
        assert!(v.remove(b"a"));
        assert_eq!(v.encoding(), "listpack");
        assert!(v.contains(b"2") && !v.contains(b"a"));
        // A long member makes a hashtable.
        assert!(v.insert(&[b'x'; 65]));
        assert_eq!(v.encoding(), "hashtable");
        assert_eq!(v.len(), 4);
        // Too many strings for a listpack.
        let mut w = SetValue::default();
        for i in 0..128 {
            w.insert(format!("m{i}").as_bytes());
        }
        assert_eq!(w.encoding(), "listpack");
        w.insert(b"m128");
        assert_eq!(w.encoding(), "hashtable");
        assert_eq!(w.len(), 129);
        // Too many integers for an intset go straight to a hashtable.
        let mut w = SetValue::default();
        for i in 0..512 {
            w.insert(i.to_string().as_bytes());
        }
        assert_eq!(w.encoding(), "intset");
        w.insert(b"512");
        assert_eq!(w.encoding(), "hashtable");
        assert!((0..=512).all(|i| w.contains(i.to_string().as_bytes())));
        // A big intset meeting a string: more than a listpack holds, so a hashtable.
        let mut w = SetValue::default();
        for i in 0..200 {
            w.insert(i.to_string().as_bytes());
        }
        w.insert(b"foo");
        assert_eq!(w.encoding(), "hashtable");
        assert_eq!(w.len(), 201);
    }

    #[test]
    fn creation_follows_the_size_hint() {
        assert_eq!(SetValue::create_for(b"1", 1).encoding(), "intset");
        assert_eq!(SetValue::create_for(b"a", 1).encoding(), "listpack");
        // Too many for an intset, few enough for a listpack.
        assert_eq!(SetValue::create_for(b"1", 513).encoding(), "hashtable");
        assert_eq!(SetValue::create_for(b"1", 200).encoding(), "intset");
        assert_eq!(SetValue::create_for(b"a", 129).encoding(), "hashtable");
        let mut v = s(&["a"]);
        v.maybe_convert(128);
        assert_eq!(v.encoding(), "listpack");
        v.maybe_convert(129);
        assert_eq!(v.encoding(), "hashtable");
        assert!(v.contains(b"a"));
        let mut v = s(&["1"]);
        v.maybe_convert(513);
        assert_eq!(v.encoding(), "hashtable");
        assert!(v.contains(b"1"));
    }

    #[test]
    fn table_removal_keeps_the_index() {
        let mut w = SetValue::default();
        for i in 0..1000 {
            w.insert(format!("k{i}").as_bytes());
        }
        assert_eq!(w.encoding(), "hashtable");
        for i in (0..1000).step_by(3) {
            assert!(w.remove(format!("k{i}").as_bytes()));
        }
        for i in 0..1000 {
            assert_eq!(w.contains(format!("k{i}").as_bytes()), i % 3 != 0, "k{i}");
        }
        let mut seed = 1u64;
        let mut rnd = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            seed >> 11
        };
        let before = w.len();
        let popped = w.pop_many(100, &mut rnd);
        assert_eq!(popped.len(), 100);
        assert_eq!(w.len(), before - 100);
        assert!(popped.iter().all(|m| !w.contains(m)));
        let heap_full = w.heap();
        w.retain(|_| false);
        assert!(w.is_empty());
        assert!(w.heap() < heap_full);
    }

    #[test]
    fn packed_pops_and_samples() {
        let mut seed = 7u64;
        let mut rnd = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for members in [
            (0..50).map(|i| i.to_string()).collect::<Vec<_>>(),
            (0..50).map(|i| format!("s{i}")).collect(),
        ] {
            let mut v = SetValue::from_members(members.iter().map(|m| m.as_bytes()));
            let popped = v.pop_many(20, &mut rnd);
            assert_eq!(popped.len(), 20);
            assert_eq!(v.len(), 30);
            let mut all: Vec<Vec<u8>> = popped.iter().map(|b| b.to_vec()).collect();
            all.extend(v.iter().map(|m| m.into_owned()));
            all.sort();
            all.dedup();
            assert_eq!(all.len(), 50);
            let pos = distinct_positions(30, 29, &mut rnd);
            let mut p = pos.clone();
            p.sort();
            p.dedup();
            assert_eq!(p.len(), 29);
            let pos = distinct_positions(30, 3, &mut rnd);
            assert_eq!(v.members_at(&pos).len(), 3);
        }
    }

    #[test]
    fn scan_cursor_survives_removals() {
        let mut w = SetValue::default();
        for i in 0..300 {
            w.insert(format!("k{i}").as_bytes());
        }
        let mut seen = hashbrown::HashSet::new();
        let mut cursor = 0;
        let mut removed = 0;
        loop {
            let (next, batch) = w.scan_table(cursor, 10).unwrap();
            seen.extend(batch.iter().map(|b| b.to_vec()));
            // Remove members not returned yet (odd ones), and some already returned.
            for i in (removed..removed + 3).map(|x| x * 2 + 1) {
                w.remove(format!("k{i}").as_bytes());
            }
            removed += 3;
            if next == 0 {
                break;
            }
            cursor = next;
        }
        for i in (0..300).step_by(2) {
            assert!(seen.contains(format!("k{i}").as_bytes()), "k{i} missed");
        }
        assert!(s(&["1"]).scan_table(0, 10).is_none());
    }

    #[test]
    fn heap_follows_contents() {
        let empty = SetValue::default().heap();
        let small = s(&["1", "2"]).heap();
        assert!(small > empty);
        let mut w = SetValue::default();
        for i in 0..200 {
            w.insert(format!("member-{i}").as_bytes());
        }
        assert!(w.heap() > 200 * 16);
    }
}
