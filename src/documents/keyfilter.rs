//! A counting Bloom filter over the keys of one shard's part of an index, so that an
//! equality lookup skips the shards that cannot hold the key.
//!
//! Why: documents are spread over the shards by `_id`, so `{user: "x"}` on an index on
//! `user` must look in every shard, and a B-tree descent is a handful of cache misses per
//! level. With the filter, a shard without the key costs one 64-byte block read (its
//! three counters share a block); the B-tree is searched only where the key may be.
//!
//! Counters are 4 bits, 128 to a block, three per key. Removal decrements them; a counter
//! that reached 15 stays there (it can then only cause false positives, never a missed
//! key). The filter doubles, rebuilt from the index's keys, when it holds more than 12
//! keys a block: 6 to 12 keys a block (5-11 bytes a key), a false-positive rate of 0.3-2%.

use std::hash::BuildHasher;

const WORDS_PER_BLOCK: usize = 8;
const COUNTERS_PER_BLOCK: u64 = 128;
const KEYS_PER_BLOCK: usize = 12;
const SATURATED: u64 = 15;

#[derive(Debug, Default)]
pub struct KeyFilter {
    /// 16 counters per word, `WORDS_PER_BLOCK` words per block, a power of two of blocks.
    words: Vec<u64>,
    keys: usize,
    hasher: hashbrown::DefaultHashBuilder,
}

impl KeyFilter {
    fn blocks(&self) -> usize {
        self.words.len() / WORDS_PER_BLOCK
    }

    pub fn hash(&self, key: &[u8]) -> u64 {
        self.hasher.hash_one(key)
    }

    /// The word index and shift of each of a key's three counters, from its hash.
    fn counters(&self, h: u64) -> [(usize, u32); 3] {
        let block = (h >> 40) as usize & (self.blocks() - 1);
        let mut out = [(0, 0); 3];
        for (i, c) in out.iter_mut().enumerate() {
            let n = (h >> (7 * i)) % COUNTERS_PER_BLOCK;
            *c = (
                block * WORDS_PER_BLOCK + (n / 16) as usize,
                (n % 16) as u32 * 4,
            );
        }
        out
    }

    /// Whether the key may be present (false: certainly absent).
    pub fn may_contain(&self, key: &[u8]) -> bool {
        if self.keys == 0 {
            return false;
        }
        self.counters(self.hash(key))
            .iter()
            .all(|&(w, s)| (self.words[w] >> s) & 0xf != 0)
    }

    /// Whether one more key needs a larger filter ([`KeyFilter::rebuild`]).
    pub fn full(&self) -> bool {
        self.keys + 1 > self.blocks() * KEYS_PER_BLOCK
    }

    /// Counts one more key, by its [`KeyFilter::hash`]; the filter must not be full.
    pub fn add_hashed(&mut self, h: u64) {
        if self.words.is_empty() {
            return;
        }
        for (w, s) in self.counters(h) {
            if (self.words[w] >> s) & 0xf < SATURATED {
                self.words[w] += 1 << s;
            }
        }
        self.keys += 1;
    }

    /// Starts over at the power of two of blocks that `n` keys (and one more) need,
    /// counting `keys` (every key held): the filter doubles as the index grows.
    pub fn rebuild<'a>(&mut self, n: usize, keys: impl Iterator<Item = &'a [u8]>) {
        let blocks = (n + 1).div_ceil(KEYS_PER_BLOCK).max(1).next_power_of_two();
        self.words = vec![0; blocks * WORDS_PER_BLOCK];
        self.keys = 0;
        for k in keys {
            let h = self.hash(k);
            self.add_hashed(h);
        }
    }

    /// Uncounts a key that was counted.
    pub fn remove(&mut self, key: &[u8]) {
        if self.keys == 0 {
            return;
        }
        for (w, s) in self.counters(self.hash(key)) {
            let c = (self.words[w] >> s) & 0xf;
            if c > 0 && c < SATURATED {
                self.words[w] -= 1 << s;
            }
        }
        self.keys -= 1;
    }

    pub fn memory_bytes(&self) -> usize {
        self.words.capacity() * 8
    }
}

#[cfg(test)]
mod tests {
    use super::KeyFilter;

    #[test]
    fn never_misses_a_present_key_and_rarely_admits_an_absent_one() {
        let mut f = KeyFilter::default();
        let mut present: Vec<Vec<u8>> = Vec::new();
        assert!(!f.may_contain(b"x"));
        for i in 0..20_000u32 {
            let k = format!("key{i}").into_bytes();
            present.push(k);
            let k = present.last().expect("pushed");
            if f.full() {
                f.rebuild(present.len(), present.iter().map(Vec::as_slice));
            } else {
                f.add_hashed(f.hash(k));
            }
        }
        assert!(present.iter().all(|k| f.may_contain(k)));
        // Remove every other key (twice-present keys are counted twice).
        for k in present.iter().step_by(2) {
            f.remove(k);
        }
        assert!(present.iter().skip(1).step_by(2).all(|k| f.may_contain(k)));
        let false_pos = (0..20_000u32)
            .filter(|i| f.may_contain(format!("absent{i}").as_bytes()))
            .count();
        assert!(false_pos < 400, "{false_pos} false positives of 20000");
    }
}
