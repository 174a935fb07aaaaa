//! A sorted set value. (Placeholder representation; the packed and skiplist forms land with
//! the ZSET family.)

#[derive(Clone, Debug, Default)]
pub struct ZSetValue {
    scores: hashbrown::HashMap<Box<[u8]>, f64>,
}

impl ZSetValue {
    pub fn len(&self) -> usize {
        self.scores.len()
    }
    pub fn is_empty(&self) -> bool {
        self.scores.is_empty()
    }
    pub fn encoding(&self) -> &'static str {
        "skiplist"
    }
    pub fn heap(&self) -> usize {
        self.scores
            .keys()
            .map(|m| crate::util::mem::alloc_size(m.len()) + 32)
            .sum()
    }
}
