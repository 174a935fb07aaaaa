//! The keys of one unique index across every shard.
//!
//! A collection's documents are spread over the shards by `_id`, so a unique secondary key
//! may collide with a document on any shard. Locking every shard for each write would
//! serialize the whole collection; instead each unique index has one table of its keys,
//! `index key → owner _id`, split into striped leaf locks. A write claims its new keys here
//! under its own shard's lock, after every other check, so a claim is only ever undone when
//! a later claim of the same write fails; a removal releases the keys its document owned.
//!
//! Lock order: shard locks first, then at most one stripe at a time, never a shard lock
//! while holding a stripe, so stripes cannot deadlock with shards or with each other.

use crate::util::mem::alloc_size;
use hashbrown::HashMap;
use parking_lot::Mutex;
use std::hash::BuildHasher;

const STRIPES: usize = 64;

/// One stripe: index key → owner `_id` KeyString.
type Stripe = Mutex<HashMap<Box<[u8]>, Box<[u8]>>>;

/// One unique index's keys, shared by every shard's part of the index.
pub struct UniqueKeys {
    stripes: Box<[Stripe]>,
    hasher: hashbrown::DefaultHashBuilder,
}

impl std::fmt::Debug for UniqueKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("UniqueKeys")
    }
}

impl Default for UniqueKeys {
    fn default() -> Self {
        UniqueKeys {
            stripes: (0..STRIPES).map(|_| Mutex::new(HashMap::new())).collect(),
            hasher: hashbrown::DefaultHashBuilder::default(),
        }
    }
}

/// What claiming keys did: nothing (every key already the owner's), or the keys it added,
/// which [`UniqueKeys::release`] gives back if the write fails later.
pub type Claimed = Vec<Vec<u8>>;

impl UniqueKeys {
    fn stripe(&self, key: &[u8]) -> &Stripe {
        &self.stripes[(self.hasher.hash_one(key) >> 58) as usize % STRIPES]
    }

    /// Claims `keys` for the document whose `_id` KeyString is `owner`. On a key held by
    /// another document, gives back what this call added and returns that key.
    pub fn claim(&self, keys: &[Vec<u8>], owner: &[u8]) -> Result<Claimed, Vec<u8>> {
        let mut added = Vec::new();
        for k in keys {
            let mut s = self.stripe(k).lock();
            match s.get(k.as_slice()) {
                Some(o) if **o == *owner => {}
                Some(_) => {
                    drop(s);
                    self.release(&added, owner);
                    return Err(k.clone());
                }
                None => {
                    s.insert(k.as_slice().into(), owner.into());
                    added.push(k.clone());
                }
            }
        }
        Ok(added)
    }

    /// Gives back those of `keys` that `owner` holds.
    pub fn release(&self, keys: &[Vec<u8>], owner: &[u8]) {
        for k in keys {
            let mut s = self.stripe(k).lock();
            if s.get(k.as_slice()).is_some_and(|o| **o == *owner) {
                s.remove(k.as_slice());
            }
        }
    }

    /// The bytes one claimed key costs (its table slot and both allocations), for the
    /// owning shard's memory books.
    pub fn entry_cost(key: &[u8], owner: &[u8]) -> usize {
        (2 * std::mem::size_of::<Box<[u8]>>()) * 8 / 7
            + 1
            + alloc_size(key.len())
            + alloc_size(owner.len())
    }

    /// Keys held, for tests and `DOC.STATS`.
    pub fn len(&self) -> usize {
        self.stripes.iter().map(|s| s.lock().len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_are_exclusive_and_undone_on_conflict() {
        let u = UniqueKeys::default();
        let (a, b, c) = (b"a".to_vec(), b"b".to_vec(), b"c".to_vec());
        assert_eq!(u.claim(&[a.clone(), b.clone()], b"x").unwrap().len(), 2);
        // Already the owner's: nothing added.
        assert!(u.claim(std::slice::from_ref(&a), b"x").unwrap().is_empty());
        // c is free but b is not: c is given back.
        assert_eq!(u.claim(&[c.clone(), b.clone()], b"y"), Err(b.clone()));
        assert_eq!(u.len(), 2);
        // Another owner's release changes nothing.
        u.release(std::slice::from_ref(&a), b"y");
        assert_eq!(u.len(), 2);
        u.release(&[a, b], b"x");
        assert!(u.is_empty());
        assert_eq!(u.claim(&[c], b"y").unwrap().len(), 1);
    }
}
