//! The keys of each cluster hash slot in one key space: Redis's `slots_to_keys`, kept by
//! database 0 of every shard in cluster mode (and by nothing else), so CLUSTER
//! COUNTKEYSINSLOT is O(1) per shard and GETKEYSINSLOT costs the keys it returns, not a pass
//! over the key space. The key space adds and removes at its two choke points (the insert
//! of `Keyspace::set` and `Books::removed`), so every way a key comes or goes is seen.
//!
//! What is kept, per slot: the 64-bit hashes of its keys (the hash the key space's tables
//! are built on), unordered. A hash leads back to its key through the key space's own table
//! (a lookup by hash, the key's slot and hash compared to tell it from another key with the
//! same table tag), so nothing here points into the table and no `unsafe` is needed.
//!
//! Why short arrays of hashes: 8 bytes per key and the allocator's rounding. Measured with
//! the counting allocator (`tests/slot_index_memory.rs`), 1M keys on 4 shards: 11.9 B/key
//! spread over all slots, 12.8 B/key all in one slot; Redis spends 16 (two pointers in
//! the dict entry's metadata). The alternatives:
//! - an intrusive doubly linked list through the boxed entries (Redis's way) grows `Entry`
//!   from 48 to 64 bytes for every key of every server, standalone ones too, and needs raw
//!   pointers;
//! - a hashbrown table of hashes per slot costs 9 bytes per bucket at a load between 7/16
//!   and 7/8, plus 16 control bytes and a 32-byte header per table: with 1M keys over 4
//!   shards a slot holds ~15 keys per shard, a 32-bucket table of 304 bytes, 20 B/key;
//! - one index for all shards would need a lock of its own on every write; this one lives
//!   under its shard's lock, goes with its key space (FLUSHALL ASYNC frees it with the
//!   keys) and needs no synchronization.
//!
//! A slot holds one or two hashes in place (no allocation: with few keys, or many shards,
//! that is most slots), then an array that grows by half again to a mimalloc size class (no
//! slack past its free elements, ~80% full on average) and shrinks once under half full. A
//! slot with many keys (hash tags put any number in one) is split into parts chosen by the
//! hash's low bits, 16 to 64 hashes each on average, so removing a key scans at most a few
//! dozen hashes: O(1) however the keys are spread.
//!
//! The fixed cost is the slot array, 16384 × 24 bytes = 384 KiB per shard that holds a key
//! (1.5 MiB for the 4 shards of 2 cores, 1.5 B/key at 1M keys), given back when the key
//! space empties. It grows with the shard count (twice the cores): 48 MiB on 64 cores.
//!
//! In cluster mode a new key costs ~355 more instructions (callgrind, SET at pipeline 16,
//! release build, before the slot's CRC was sliced 16 bytes a step): the key's slot ~180
//! (~106 since), the insert ~130; a removal about as much.

use crate::util::mem::alloc_size;

/// Redis Cluster's hash slots.
pub const SLOTS: usize = 16384;

/// The hash slot of a key: the CRC16 (XMODEM) of the key, or of its hash tag (the bytes
/// between the first `{` and the first `}` after it, when there are some), modulo 16384:
/// Redis's `keyHashSlot`, and `redis_protocol::redis_keyslot`'s answer (a test holds them
/// together) in about half the instructions: the `{` is looked for eight bytes at a time,
/// and the CRC taken 16 bytes a step. Every write of cluster mode computes it.
#[inline]
pub fn slot_of(key: &[u8]) -> u16 {
    let tagged = find_byte(key, b'{').and_then(|open| {
        let rest = &key[open + 1..];
        match find_byte(rest, b'}') {
            Some(0) | None => None,
            Some(close) => Some(&rest[..close]),
        }
    });
    crc16(tagged.unwrap_or(key)) & (SLOTS as u16 - 1)
}

/// The first `b` in `hay`, eight bytes at a time (a word's bytes equal to `b` become zero
/// bytes, found with the borrow trick; the lowest flagged byte is always a true one).
#[inline]
fn find_byte(hay: &[u8], b: u8) -> Option<usize> {
    const LOW: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);
    let pattern = u64::from_ne_bytes([b; 8]);
    let mut chunks = hay.chunks_exact(8);
    let mut at = 0;
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let x = u64::from_le_bytes(word) ^ pattern;
        let found = x.wrapping_sub(LOW) & !x & HIGH;
        if found != 0 {
            return Some(at + (found.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    chunks
        .remainder()
        .iter()
        .position(|&c| c == b)
        .map(|i| at + i)
}

/// CRC16-XMODEM (polynomial 0x1021, initial 0), 16 bytes a step (16 tables of 256 entries,
/// 8 KiB): ~11 ns for a 16-byte key where a lookup a byte took ~28.
#[inline]
fn crc16(bytes: &[u8]) -> u16 {
    CRC16.checksum(bytes)
}

static CRC16: crc::Crc<u16, crc::Table<16>> =
    crc::Crc::<u16, crc::Table<16>>::new(&crc::CRC_16_XMODEM);

/// The most hashes a slot keeps in one array (a removal scans them).
const FLAT_MAX: usize = 64;
/// A split slot doubles its parts past this many hashes per part on average...
const PART_MAX: usize = 64;
/// ...and halves them under this many (or goes back to one array).
const PART_MIN: usize = 16;
/// The average part a split slot is (re)built with.
const PART_TARGET: usize = 32;

/// One slot's hashes.
#[derive(Debug)]
enum SlotKeys {
    /// One hash, in place: with many shards, or few keys, most slots of a shard hold one or
    /// two keys, and an array for them would be an allocation (and a reallocation at each
    /// of the first few keys) for a few bytes.
    One(u64),
    /// Two hashes, in place.
    Two([u64; 2]),
    /// None (an empty `Vec`, no allocation), or from 2 up to [`FLAT_MAX`] hashes.
    Flat(Vec<u64>),
    /// More, split by the hash's low bits.
    Split(Box<Split>),
}

// 24 bytes a slot, whichever variant (the Vec's capacity leaves a niche for the tag, and
// the in-place hashes fit beside it): 384 KiB per key space.
const _: () = assert!(std::mem::size_of::<SlotKeys>() == 24);

#[derive(Debug)]
struct Split {
    len: usize,
    /// A power of two of them, at least 2.
    parts: Vec<Vec<u64>>,
}

fn part_of(hash: u64, parts: usize) -> usize {
    (hash as usize) & (parts - 1)
}

/// The parts a split slot of `len` hashes is built with.
fn parts_for(len: usize) -> usize {
    (len / PART_TARGET).next_power_of_two().max(2)
}

/// The capacity of the size class that holds at least `n` hashes.
fn class_at_least(n: usize) -> usize {
    alloc_size(n * 8) / 8
}

fn vec_bytes<T>(v: &Vec<T>) -> usize {
    alloc_size(v.capacity() * std::mem::size_of::<T>())
}

/// The allocated bytes `f` added to (or took from) `v`.
fn delta<T>(v: &mut Vec<T>, f: impl FnOnce(&mut Vec<T>)) -> isize {
    let before = vec_bytes(v);
    f(v);
    vec_bytes(v) as isize - before as isize
}

/// Pushes, growing a full array by half again to a size class; the bytes it took.
fn push(v: &mut Vec<u64>, hash: u64) -> isize {
    if v.len() < v.capacity() {
        v.push(hash);
        return 0;
    }
    delta(v, |v| {
        let len = v.len();
        v.reserve_exact(class_at_least(len + len / 2 + 1) - len);
        v.push(hash);
    })
}

/// Removes `hash` once; the bytes given back, `None` if it is not there. An array under
/// half full shrinks to the size class of what it holds (an empty one is freed).
fn remove(v: &mut Vec<u64>, hash: u64) -> Option<isize> {
    let i = v.iter().position(|&h| h == hash)?;
    v.swap_remove(i);
    if v.len() * 2 >= v.capacity() {
        return Some(0);
    }
    Some(delta(v, |v| v.shrink_to(class_at_least(v.len()))))
}

impl Split {
    fn build(hashes: &[u64]) -> Box<Split> {
        let n = parts_for(hashes.len());
        let mut counts = vec![0usize; n];
        for &h in hashes {
            counts[part_of(h, n)] += 1;
        }
        let mut parts: Vec<Vec<u64>> = counts
            .into_iter()
            .map(|c| Vec::with_capacity(class_at_least(c)))
            .collect();
        for &h in hashes {
            parts[part_of(h, n)].push(h);
        }
        Box::new(Split {
            len: hashes.len(),
            parts,
        })
    }
}

impl SlotKeys {
    const EMPTY: SlotKeys = SlotKeys::Flat(Vec::new());

    fn len(&self) -> usize {
        match self {
            SlotKeys::One(_) => 1,
            SlotKeys::Two(_) => 2,
            SlotKeys::Flat(v) => v.len(),
            SlotKeys::Split(s) => s.len,
        }
    }

    fn iter(&self) -> SlotIter<'_> {
        let (held, parts): (&[u64], &[Vec<u64>]) = match self {
            SlotKeys::One(h) => (std::slice::from_ref(h), &[]),
            SlotKeys::Two(h) => (h, &[]),
            SlotKeys::Flat(v) => (v, &[]),
            SlotKeys::Split(s) => (&[], &s.parts),
        };
        held.iter().chain(parts.iter().flatten())
    }

    /// Allocated bytes (O(parts): only when the slot is rebuilt).
    fn heap(&self) -> usize {
        match self {
            SlotKeys::One(_) | SlotKeys::Two(_) => 0,
            SlotKeys::Flat(v) => vec_bytes(v),
            SlotKeys::Split(s) => {
                alloc_size(std::mem::size_of::<Split>())
                    + vec_bytes(&s.parts)
                    + s.parts.iter().map(vec_bytes).sum::<usize>()
            }
        }
    }

    /// Rebuilds the slot for the hashes it holds (one array, or the parts for its size).
    fn rebuild(&mut self, extra: Option<u64>) -> isize {
        let before = self.heap();
        let mut all: Vec<u64> = Vec::with_capacity(self.len() + 1);
        all.extend(self.iter());
        all.extend(extra);
        *self = if all.len() <= FLAT_MAX / 2 {
            let mut v = Vec::with_capacity(class_at_least(all.len()));
            v.extend_from_slice(&all);
            SlotKeys::Flat(v)
        } else {
            SlotKeys::Split(Split::build(&all))
        };
        self.heap() as isize - before as isize
    }

    fn add(&mut self, hash: u64) -> isize {
        match self {
            SlotKeys::One(a) => {
                *self = SlotKeys::Two([*a, hash]);
                0
            }
            SlotKeys::Two([a, b]) => {
                let mut v = Vec::with_capacity(class_at_least(3));
                v.extend_from_slice(&[*a, *b, hash]);
                let d = vec_bytes(&v) as isize;
                *self = SlotKeys::Flat(v);
                d
            }
            SlotKeys::Flat(v) if v.is_empty() => {
                let d = -(vec_bytes(v) as isize);
                *self = SlotKeys::One(hash);
                d
            }
            SlotKeys::Flat(v) if v.len() < FLAT_MAX => push(v, hash),
            SlotKeys::Split(s) if s.len < s.parts.len() * PART_MAX => {
                s.len += 1;
                let p = part_of(hash, s.parts.len());
                push(&mut s.parts[p], hash)
            }
            _ => self.rebuild(Some(hash)),
        }
    }

    fn remove(&mut self, hash: u64) -> Option<isize> {
        match self {
            SlotKeys::One(a) if *a == hash => {
                *self = SlotKeys::EMPTY;
                Some(0)
            }
            SlotKeys::One(_) => None,
            SlotKeys::Two([a, b]) => {
                let other = if *a == hash {
                    *b
                } else if *b == hash {
                    *a
                } else {
                    return None;
                };
                *self = SlotKeys::One(other);
                Some(0)
            }
            SlotKeys::Flat(v) => {
                let d = remove(v, hash)?;
                // Down to one: back in place (an array keeps two, so a slot going between
                // two keys and three does not allocate and free each time).
                if let [one] = v[..] {
                    let d = d - vec_bytes(v) as isize;
                    *self = SlotKeys::One(one);
                    return Some(d);
                }
                Some(d)
            }
            SlotKeys::Split(s) => {
                let p = part_of(hash, s.parts.len());
                let d = remove(&mut s.parts[p], hash)?;
                s.len -= 1;
                if s.len >= s.parts.len() * PART_MIN {
                    return Some(d);
                }
                Some(d + self.rebuild(None))
            }
        }
    }
}

type SlotIter<'a> =
    std::iter::Chain<std::slice::Iter<'a, u64>, std::iter::Flatten<std::slice::Iter<'a, Vec<u64>>>>;

/// The hashes of one key space's keys by hash slot (see the module's notes).
#[derive(Debug, Default)]
pub struct SlotIndex {
    /// [`SLOTS`] of them once a key arrives, none while the key space is empty.
    slots: Vec<SlotKeys>,
    len: usize,
    /// Allocated bytes: the slot array and every slot's arrays (size classes).
    bytes: usize,
}

impl SlotIndex {
    /// Keys indexed.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes allocated for the index (what the key space counts in its memory).
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    fn apply(&mut self, d: isize) {
        self.bytes = self.bytes.wrapping_add_signed(d);
    }

    /// A key of `slot` whose hash is `hash` arrived.
    pub fn add(&mut self, slot: u16, hash: u64) {
        if self.slots.is_empty() {
            self.slots = (0..SLOTS).map(|_| SlotKeys::EMPTY).collect();
            self.bytes += vec_bytes(&self.slots);
        }
        let d = self.slots[usize::from(slot) & (SLOTS - 1)].add(hash);
        self.len += 1;
        self.apply(d);
    }

    /// A key of `slot` whose hash is `hash` left; false if it was not indexed.
    pub fn remove(&mut self, slot: u16, hash: u64) -> bool {
        let Some(s) = self.slots.get_mut(usize::from(slot) & (SLOTS - 1)) else {
            return false;
        };
        let Some(d) = s.remove(hash) else {
            return false;
        };
        self.len -= 1;
        self.apply(d);
        true
    }

    /// Keys in `slot`: O(1).
    pub fn count(&self, slot: u16) -> usize {
        self.slots
            .get(usize::from(slot) & (SLOTS - 1))
            .map_or(0, SlotKeys::len)
    }

    /// The hashes of `slot`'s keys, in no particular order (a hash appears once per key:
    /// two keys of a slot with one hash, which 64 bits make all but impossible, twice).
    pub fn hashes(&self, slot: u16) -> impl Iterator<Item = u64> + '_ {
        match self.slots.get(usize::from(slot) & (SLOTS - 1)) {
            Some(s) => s.iter(),
            None => [].iter().chain([].iter().flatten()),
        }
        .copied()
    }

    /// Gives the slot array back once no key is indexed (the key space emptied).
    pub fn release(&mut self) {
        if self.len == 0 && !self.slots.is_empty() {
            self.slots = Vec::new();
            self.bytes = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The slot is Redis's: known slots, every hash-tag shape, and many random keys of
    /// every length over an alphabet rich in braces, against `redis_protocol`'s.
    #[test]
    fn slot_of_is_redis_keyslot() {
        assert_eq!(slot_of(b"123456789"), 0x31c3 & 0x3fff);
        assert_eq!(slot_of(b"foo"), 12182);
        assert_eq!(slot_of(b"{user1000}.following"), slot_of(b"user1000"));
        for key in [
            &b""[..],
            b"{",
            b"}",
            b"{}",
            b"{}a",
            b"a{}",
            b"a{",
            b"{a",
            b"{a}",
            b"a{b}c{d}",
            b"{{a}}",
            b"}{a}",
            b"{}{a}",
            b"12345678{a}",
            b"1234567{{",
            b"abcdefghijklmnop{tag}qrstuvwxyz",
        ] {
            assert_eq!(slot_of(key), redis_protocol::redis_keyslot(key), "{key:?}");
        }
        let alphabet = b"{}ab{}\x00\xff7";
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        for len in 0..70 {
            for _ in 0..300 {
                let key: Vec<u8> = (0..len)
                    .map(|_| {
                        rng ^= rng << 13;
                        rng ^= rng >> 7;
                        rng ^= rng << 17;
                        alphabet[(rng % alphabet.len() as u64) as usize]
                    })
                    .collect();
                assert_eq!(
                    slot_of(&key),
                    redis_protocol::redis_keyslot(&key),
                    "{key:?}"
                );
            }
        }
    }

    /// Every slot's bytes, recounted from the arrays themselves.
    fn recount(ix: &SlotIndex) -> usize {
        vec_bytes(&ix.slots) + ix.slots.iter().map(SlotKeys::heap).sum::<usize>()
    }

    fn sorted(ix: &SlotIndex, slot: u16) -> Vec<u64> {
        let mut v: Vec<u64> = ix.hashes(slot).collect();
        v.sort_unstable();
        v
    }

    /// A slot grown past one array into parts, and back, through many sizes: it always
    /// holds exactly the hashes added and not removed, its count is theirs, and its byte
    /// count is what its arrays allocated.
    #[test]
    fn grows_splits_and_shrinks_exactly() {
        let mut ix = SlotIndex::default();
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let mut held: Vec<u64> = Vec::new();
        for n in [1usize, 5, 40, 64, 65, 200, 3000, 20_000] {
            while held.len() < n {
                let h = next();
                ix.add(7, h);
                held.push(h);
            }
            // Another slot's keys change nothing here.
            ix.add(8, 1);
            assert!(ix.remove(8, 1));
            assert_eq!(ix.count(7), n);
            let mut want = held.clone();
            want.sort_unstable();
            assert_eq!(sorted(&ix, 7), want);
            assert_eq!(ix.bytes(), recount(&ix));
        }
        // Twice the same hash (two keys with one hash): counted twice, removed one by one.
        ix.add(7, held[0]);
        assert_eq!(ix.count(7), held.len() + 1);
        assert!(ix.remove(7, held[0]));
        while let Some(h) = held.pop() {
            assert!(ix.remove(7, h));
            if held.len().is_multiple_of(997) {
                assert_eq!(ix.count(7), held.len());
                assert_eq!(ix.bytes(), recount(&ix));
            }
        }
        assert!(!ix.remove(7, 1));
        assert_eq!((ix.len(), ix.count(7)), (0, 0));
        assert_eq!(ix.bytes(), vec_bytes(&ix.slots));
        ix.release();
        assert_eq!(ix.bytes(), 0);
        assert_eq!(ix.hashes(7).count(), 0);
    }

    /// One or two keys are held in place (no allocation past the slot array); a third
    /// makes an array, which stays until one key is left.
    #[test]
    fn few_keys_are_held_in_place() {
        let mut ix = SlotIndex::default();
        ix.add(5, 10);
        let array = ix.bytes();
        assert_eq!(array, vec_bytes(&ix.slots));
        ix.add(5, 11);
        assert_eq!(ix.bytes(), array);
        assert_eq!(sorted(&ix, 5), [10, 11]);
        assert!(!ix.remove(5, 12));
        ix.add(5, 12);
        assert_eq!(ix.bytes(), array + 32);
        assert!(ix.remove(5, 10));
        assert_eq!((ix.bytes(), sorted(&ix, 5)), (array + 32, vec![11, 12]));
        assert!(ix.remove(5, 12));
        assert_eq!((ix.bytes(), sorted(&ix, 5)), (array, vec![11]));
        assert!(!ix.remove(5, 12));
        assert!(ix.remove(5, 11));
        assert!(!ix.remove(5, 11));
        assert_eq!((ix.len(), ix.count(5), ix.bytes()), (0, 0, array));
        assert_eq!(ix.hashes(5).count(), 0);
    }

    /// A big slot's parts stay between their bounds, so a removal scans a few dozen hashes.
    #[test]
    fn parts_stay_short() {
        let mut ix = SlotIndex::default();
        for h in 0..100_000u64 {
            ix.add(3, h.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        }
        let SlotKeys::Split(s) = &ix.slots[3] else {
            panic!("one array of 100,000");
        };
        let longest = s.parts.iter().map(Vec::len).max().unwrap_or(0);
        assert!(
            s.len <= s.parts.len() * PART_MAX,
            "{} in {}",
            s.len,
            s.parts.len()
        );
        assert!(longest < 3 * PART_MAX, "{longest}");
        // 8 bytes a hash and the size classes' rounding: under 11 bytes a key.
        assert!(
            ix.bytes() - vec_bytes(&ix.slots) < 100_000 * 11,
            "{}",
            ix.bytes()
        );
    }
}
