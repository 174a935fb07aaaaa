//! One shard's part of an index kept by key in a hash table, for as long as every scan it
//! has served was an equality on all of its key fields (`{userID: v}` on `{userID: 1}`).
//!
//! Why: an upsert that moves a document's entry from one key to another made two descents
//! of the ordered B-tree, which reads about four cache lines a level over five levels at 25k
//! entries a shard: 42 of the upsert's 55 L1 data misses and 3.2k of its 13.1k
//! instructions (callgrind, pipeline 16, 100k sessions). A lookup here reads the table's
//! control group and one bucket. Order is needed only by ranges and sorts: the first scan
//! that needs it (`CollectionShard::prepare`) turns the part into the ordered B-tree for
//! good (`OrderedIndex::order`).

use crate::util::inline::InlineBytes;
use hashbrown::hash_table::Entry;
use hashbrown::HashTable;
use std::collections::BTreeSet;
use std::hash::BuildHasher;

/// Key bytes held in the bucket itself (a 12-character string key is 14, an ObjectId 13,
/// a date 9); longer keys are boxed.
const INLINE: usize = 22;

/// The documents (slots) holding one key.
#[derive(Debug, Clone, Copy)]
enum Slots {
    One(u32),
    /// Two or more: an index into `HashedEntries::many`.
    Many(u32),
}

#[derive(Debug)]
struct Point {
    key: InlineBytes<INLINE>,
    slots: Slots,
}

const _: () = assert!(std::mem::size_of::<Point>() == 32);

/// Index entries (key, slot) grouped by key.
#[derive(Debug, Default)]
pub struct HashedEntries {
    table: HashTable<Point>,
    /// The slot sets of keys held by more than one document (in slot order, as the B-tree
    /// holds equal keys); `free` lists the ones given back.
    many: Vec<BTreeSet<u32>>,
    free: Vec<u32>,
    /// Entries held (a key held by n documents counts n).
    len: usize,
    /// Slots held in `many`'s sets, and the heap bytes of boxed keys, for the memory count.
    in_many: usize,
    key_heap: usize,
    hasher: hashbrown::DefaultHashBuilder,
}

impl HashedEntries {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Adds the entry (`key`, `slot`); returns whether it was new.
    pub fn insert(&mut self, key: &[u8], slot: u32) -> bool {
        let hasher = &self.hasher;
        let h = hasher.hash_one(key);
        let added = match self
            .table
            .entry(h, |p| *p.key == *key, |p| hasher.hash_one(&*p.key))
        {
            Entry::Vacant(v) => {
                let key = InlineBytes::new(key);
                self.key_heap += key.heap();
                v.insert(Point {
                    key,
                    slots: Slots::One(slot),
                });
                true
            }
            Entry::Occupied(mut o) => match o.get().slots {
                Slots::One(s) if s == slot => false,
                Slots::One(s) => {
                    let set = BTreeSet::from([s, slot]);
                    let i = match self.free.pop() {
                        Some(i) => {
                            self.many[i as usize] = set;
                            i
                        }
                        None => {
                            self.many.push(set);
                            (self.many.len() - 1) as u32
                        }
                    };
                    o.get_mut().slots = Slots::Many(i);
                    self.in_many += 2;
                    true
                }
                Slots::Many(i) => {
                    let added = self.many[i as usize].insert(slot);
                    self.in_many += usize::from(added);
                    added
                }
            },
        };
        self.len += usize::from(added);
        added
    }

    /// Removes the entry (`key`, `slot`); returns whether it was present.
    pub fn remove(&mut self, key: &[u8], slot: u32) -> bool {
        let h = self.hasher.hash_one(key);
        let Ok(mut o) = self.table.find_entry(h, |p| *p.key == *key) else {
            return false;
        };
        match o.get().slots {
            Slots::One(s) if s == slot => {
                let (p, _) = o.remove();
                self.key_heap -= p.key.heap();
            }
            Slots::One(_) => return false,
            Slots::Many(i) => {
                let set = &mut self.many[i as usize];
                if !set.remove(&slot) {
                    return false;
                }
                self.in_many -= 1;
                if let (1, Some(&last)) = (set.len(), set.first()) {
                    // Back to one slot: the set's node is given back.
                    *set = BTreeSet::new();
                    self.free.push(i);
                    self.in_many -= 1;
                    o.get_mut().slots = Slots::One(last);
                }
            }
        }
        self.len -= 1;
        true
    }

    /// Reads the lines of the table where `key` lives, and nothing else. Why: a write about
    /// to insert `key` calls this before its `_id` lookup, so that the cache misses of the
    /// two lookups overlap instead of following one another.
    pub fn warm(&self, key: &[u8]) {
        let h = self.hasher.hash_one(key);
        std::hint::black_box(self.table.find(h, |p| *p.key == *key).is_some());
    }

    /// Calls `visit` with the slot of every entry of `key`, in slot order, until it returns
    /// false.
    pub fn visit(&self, key: &[u8], visit: &mut dyn FnMut(u32) -> bool) {
        let h = self.hasher.hash_one(key);
        let Some(p) = self.table.find(h, |p| *p.key == *key) else {
            return;
        };
        match p.slots {
            Slots::One(s) => {
                visit(s);
            }
            Slots::Many(i) => {
                for &s in &self.many[i as usize] {
                    if !visit(s) {
                        break;
                    }
                }
            }
        }
    }

    /// Every entry as (key, slot), in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], u32)> + '_ {
        self.table.iter().flat_map(move |p| {
            let (one, many) = match p.slots {
                Slots::One(s) => (Some(s), None),
                Slots::Many(i) => (None, Some(self.many[i as usize].iter().copied())),
            };
            one.into_iter()
                .chain(many.into_iter().flatten())
                .map(move |s| (&*p.key, s))
        })
    }

    /// Approximate memory held: the table's buckets and control bytes, boxed keys, and the
    /// slot sets (a B-tree node of up to 11 slots each, about 8 bytes a slot).
    pub fn memory_bytes(&self) -> usize {
        let live_sets = self.many.len() - self.free.len();
        self.table.capacity() * (std::mem::size_of::<Point>() + 1)
            + self.key_heap
            + self.many.capacity() * std::mem::size_of::<BTreeSet<u32>>()
            + self.free.capacity() * 4
            + live_sets * 64
            + self.in_many * 8
    }
}

#[cfg(test)]
mod tests {
    use super::HashedEntries;
    use std::collections::BTreeSet;

    /// Random inserts and removes of keys short and long, few and many slots per key,
    /// against a set of (key, slot) pairs.
    #[test]
    fn agrees_with_a_set_of_pairs() {
        let mut rng = crate::util::rng::XorShift::new(11);
        let mut h = HashedEntries::default();
        let mut model: BTreeSet<(Vec<u8>, u32)> = BTreeSet::new();
        let key = |n: u64| -> Vec<u8> {
            // Every fourth key longer than the inline bytes.
            let len = if n.is_multiple_of(4) { 30 } else { 9 };
            (0..len).map(|i| (n as u8).wrapping_add(i)).collect()
        };
        for round in 0..60_000 {
            let k = key(rng.below(if round < 30_000 { 50 } else { 2_000 }));
            let s = rng.below(64) as u32;
            if rng.below(3) == 0 {
                assert_eq!(h.remove(&k, s), model.remove(&(k.clone(), s)));
            } else {
                assert_eq!(h.insert(&k, s), model.insert((k.clone(), s)));
            }
            assert_eq!(h.len(), model.len());
            if round % 997 == 0 {
                let mut got = Vec::new();
                h.visit(&k, &mut |s| {
                    got.push(s);
                    true
                });
                let want: Vec<u32> = model
                    .iter()
                    .filter(|(mk, _)| *mk == k)
                    .map(|&(_, s)| s)
                    .collect();
                assert_eq!(got, want);
                let mut all: Vec<(Vec<u8>, u32)> = h.iter().map(|(k, s)| (k.to_vec(), s)).collect();
                all.sort();
                assert_eq!(all, model.iter().cloned().collect::<Vec<_>>());
            }
        }
        // A visit stops when told to.
        let k = key(1);
        for s in 0..5 {
            h.insert(&k, s);
        }
        let mut n = 0;
        h.visit(&k, &mut |_| {
            n += 1;
            n < 2
        });
        assert_eq!(n, 2);
        assert!(h.memory_bytes() > 0);
    }
}
