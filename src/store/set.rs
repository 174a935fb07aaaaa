//! A set value. (Placeholder representation; the packed forms land with the SET family.)

#[derive(Clone, Debug, Default)]
pub struct SetValue {
    members: hashbrown::HashSet<Box<[u8]>>,
}

impl SetValue {
    pub fn len(&self) -> usize {
        self.members.len()
    }
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }
    pub fn encoding(&self) -> &'static str {
        "hashtable"
    }
    pub fn heap(&self) -> usize {
        self.members
            .iter()
            .map(|m| crate::util::mem::alloc_size(m.len()) + 24)
            .sum()
    }
}
