//! Placeholder with the timing wheel's API (ordered map + slab), replaced by the real
//! hierarchical wheel when it lands on main.
use std::collections::BTreeMap;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EntryId(u32);

pub struct Wheel<T> {
    slots: Vec<Option<(i64, T)>>,
    free: Vec<u32>,
    order: BTreeMap<(i64, u32), ()>,
}

impl<T> Wheel<T> {
    pub fn new(_tick_ms: u64, _start_ms: i64) -> Wheel<T> {
        Wheel {
            slots: Vec::new(),
            free: Vec::new(),
            order: BTreeMap::new(),
        }
    }
    pub fn len(&self) -> usize {
        self.order.len()
    }
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }
    pub fn insert(&mut self, at_ms: i64, item: T) -> EntryId {
        let i = match self.free.pop() {
            Some(i) => {
                self.slots[i as usize] = Some((at_ms, item));
                i
            }
            None => {
                self.slots.push(Some((at_ms, item)));
                (self.slots.len() - 1) as u32
            }
        };
        self.order.insert((at_ms, i), ());
        EntryId(i)
    }
    pub fn reschedule(&mut self, id: EntryId, at_ms: i64) {
        if let Some(Some((t, _))) = self.slots.get_mut(id.0 as usize) {
            self.order.remove(&(*t, id.0));
            *t = at_ms;
            self.order.insert((at_ms, id.0), ());
        }
    }
    pub fn remove(&mut self, id: EntryId) -> Option<T> {
        let (t, item) = self.slots.get_mut(id.0 as usize)?.take()?;
        self.order.remove(&(t, id.0));
        self.free.push(id.0);
        Some(item)
    }
    pub fn get(&self, id: EntryId) -> Option<&T> {
        self.slots.get(id.0 as usize)?.as_ref().map(|(_, t)| t)
    }
    pub fn get_mut(&mut self, id: EntryId) -> Option<&mut T> {
        self.slots.get_mut(id.0 as usize)?.as_mut().map(|(_, t)| t)
    }
    pub fn time_of(&self, id: EntryId) -> Option<i64> {
        self.slots.get(id.0 as usize)?.as_ref().map(|(t, _)| *t)
    }
    pub fn drain_due(&mut self, upto_ms: i64, max: usize, out: &mut Vec<(T, i64)>) -> bool {
        let mut n = 0;
        while let Some((&(t, i), _)) = self.order.first_key_value() {
            if t > upto_ms {
                return false;
            }
            if n == max {
                return true;
            }
            if let Some(item) = self.remove(EntryId(i)) {
                out.push((item, t));
            }
            n += 1;
        }
        false
    }
    pub fn memory_bytes(&self) -> usize {
        self.slots.capacity() * (std::mem::size_of::<Option<(i64, T)>>()) + self.order.len() * 32
    }
}
