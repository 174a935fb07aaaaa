//! A hierarchical timing wheel: the one mechanism behind key expiry (a finer tick, swept `hz`
//! times a second) and TTL indexes (keyed by the date stored in the document, swept by the TTL
//! monitor).
//!
//! Times are signed milliseconds (BSON dates reach back before 1970 and forward to year 9999
//! and beyond). Ten levels of 64 slots each cover 2^60 ticks ahead of the wheel's position;
//! anything further goes to an overflow level (`far`), anything behind the position to a due
//! list (`past`). Both are ordered sets, touched only by such rare dates.
//!
//! Costs: insert, reschedule and remove are O(1) (a doubly linked list per slot, the entries in
//! one slab); a sweep costs O(expired + levels): empty slots are skipped through a 64-bit
//! occupancy map per level, and an entry cascades down at most once per level, plus once
//! per slot it was left in by moves to a later time (see [`Wheel::reschedule`]). Memory is
//! one slab slot per live entry however often entries move: a moved entry keeps its slot.
//!
//! Draining is bounded (`max` entries a call) so the caller can release its lock between
//! batches. An entry is only drained once every millisecond of its tick is `<= upto`, so a
//! sweep never returns an entry early; it may return one up to a tick late.

use std::collections::BTreeSet;

const LEVELS: usize = 10;
const SLOT_BITS: u32 = 6;
const SLOTS: usize = 1 << SLOT_BITS;
const NIL: u32 = u32::MAX;
/// Ticks at or beyond this distance in the top bits go to the overflow level.
const WHEEL_BITS: u32 = SLOT_BITS * LEVELS as u32;

/// A handle to one entry, valid until the entry is removed or drained.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EntryId(u32);

impl EntryId {
    /// The slab index, for callers that keep ids in a compact `Vec<u32>`.
    pub fn index(self) -> u32 {
        self.0
    }

    /// An id back from [`EntryId::index`]; it must name a live entry of the same wheel.
    pub fn from_index(index: u32) -> EntryId {
        EntryId(index)
    }
}

/// Where an entry is linked, packed in 16 bits (the entry is what every key with a deadline
/// costs, so it is kept at 32 bytes for a `u64` item): `FREE`, `PAST`, `FAR`, or
/// `SLOT_BASE + level * SLOTS + slot`.
type Place = u16;
const FREE: Place = 0;
const PAST: Place = 1;
const FAR: Place = 2;
const SLOT_BASE: Place = 3;

/// One slab slot. A free slot holds `T::default()` (no `Option`: its tag would cost 8 bytes
/// per entry); `place == FREE` is what marks it free.
struct Entry<T> {
    item: T,
    at: i64,
    prev: u32,
    /// Next in the slot's list, or next free slab slot when free.
    next: u32,
    place: Place,
}

const _: () = assert!(std::mem::size_of::<Entry<u64>>() == 32);

pub struct Wheel<T> {
    tick_ms: i64,
    /// Biased tick (see [`Wheel::tick`]): every tick below it has been drained.
    elapsed: u64,
    heads: [[u32; SLOTS]; LEVELS],
    occupied: [u64; LEVELS],
    entries: Vec<Entry<T>>,
    free: u32,
    len: usize,
    /// Entries whose tick was already behind the wheel when placed: (time, index).
    past: BTreeSet<(i64, u32)>,
    /// Entries too far ahead for the top level: (biased tick, index).
    far: BTreeSet<(u64, u32)>,
}

impl<T: Default> Wheel<T> {
    /// A wheel with `tick_ms` resolution whose position starts at `start_ms`: entries before
    /// it are due at once.
    pub fn new(tick_ms: u64, start_ms: i64) -> Wheel<T> {
        let tick_ms = tick_ms.clamp(1, i64::MAX as u64) as i64;
        let mut w = Wheel {
            tick_ms,
            elapsed: 0,
            heads: [[NIL; SLOTS]; LEVELS],
            occupied: [0; LEVELS],
            entries: Vec::new(),
            free: NIL,
            len: 0,
            past: BTreeSet::new(),
            far: BTreeSet::new(),
        };
        w.elapsed = w.tick(start_ms);
        w
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The tick of a time, biased so that unsigned order is time order (negative times work).
    fn tick(&self, at: i64) -> u64 {
        (at.div_euclid(self.tick_ms) as u64) ^ (1 << 63)
    }

    pub fn insert(&mut self, at_ms: i64, item: T) -> EntryId {
        let entry = Entry {
            item,
            at: at_ms,
            prev: NIL,
            next: NIL,
            place: FREE,
        };
        let idx = if self.free != NIL {
            let idx = self.free;
            self.free = self.entries[idx as usize].next;
            self.entries[idx as usize] = entry;
            idx
        } else {
            assert!(self.entries.len() < NIL as usize, "timing wheel full");
            self.entries.push(entry);
            (self.entries.len() - 1) as u32
        };
        self.len += 1;
        self.place(idx);
        EntryId(idx)
    }

    /// Moves an entry to a new time in O(1) (a touch).
    ///
    /// A later time for an entry in a wheel slot only changes the entry's time: it stays in
    /// its slot, and the sweep that reaches the slot files it again by its time (a cascade
    /// does so for every entry; level 0 for those not due). Why: a touch (the commonest
    /// move) otherwise rewrote both list neighbours, two cache lines nothing else reads.
    /// An entry is then never in a slot later than its time, only earlier, so a sweep still
    /// never returns it early.
    pub fn reschedule(&mut self, id: EntryId, at_ms: i64) {
        if !self.live(id) {
            return;
        }
        let e = &mut self.entries[id.0 as usize];
        if e.place >= SLOT_BASE && at_ms >= e.at {
            e.at = at_ms;
            return;
        }
        self.unlink(id.0);
        self.entries[id.0 as usize].at = at_ms;
        self.place(id.0);
    }

    pub fn remove(&mut self, id: EntryId) -> Option<T> {
        if !self.live(id) {
            return None;
        }
        self.unlink(id.0);
        Some(self.release(id.0))
    }

    pub fn get(&self, id: EntryId) -> Option<&T> {
        let e = self.entries.get(id.0 as usize)?;
        (e.place != FREE).then_some(&e.item)
    }

    pub fn get_mut(&mut self, id: EntryId) -> Option<&mut T> {
        let e = self.entries.get_mut(id.0 as usize)?;
        (e.place != FREE).then_some(&mut e.item)
    }

    /// Brings the entry's time into the cache ahead of a [`Wheel::time_of`] (see
    /// `util::mem::prefetch`).
    pub fn warm(&self, id: EntryId) {
        if let Some(e) = self.entries.get(id.0 as usize) {
            crate::util::mem::prefetch(&e.at);
        }
    }

    pub fn time_of(&self, id: EntryId) -> Option<i64> {
        let e = self.entries.get(id.0 as usize)?;
        (e.place != FREE).then_some(e.at)
    }

    /// Heap bytes held by the wheel (for memory accounting).
    pub fn memory_bytes(&self) -> usize {
        self.entries.capacity() * std::mem::size_of::<Entry<T>>()
            + (self.past.len() + self.far.len()) * 48
            + std::mem::size_of::<Self>()
    }

    /// Moves out up to `max` entries whose time is `<= upto_ms`, as `(item, time)`. Returns
    /// true while more due entries may remain, so the caller can release its lock and call
    /// again (entries filed again count against `max` too, so a call may return fewer).
    pub fn drain_due(&mut self, upto_ms: i64, max: usize, out: &mut Vec<(T, i64)>) -> bool {
        let mut n = 0;
        while n < max {
            match self.past.first() {
                Some(&(at, idx)) if at <= upto_ms => {
                    self.past.pop_first();
                    out.push((self.release(idx), at));
                    n += 1;
                }
                _ => break,
            }
        }
        // Ticks below `limit` lie entirely at or before `upto_ms` (the last tick of time has no
        // successor to test against; an entry at i64::MAX itself never comes due).
        let limit = match upto_ms.checked_add(1) {
            Some(next) => self.tick(next),
            None => self.tick(upto_ms).saturating_add(1),
        };
        while n < max {
            let Some((level, slot, deadline)) = self.next_expiration(limit) else {
                break;
            };
            if deadline >= limit {
                break;
            }
            self.elapsed = deadline;
            if level == 0 {
                while n < max {
                    let idx = self.heads[0][slot];
                    if idx == NIL {
                        break;
                    }
                    self.unlink(idx);
                    let at = self.entries[idx as usize].at;
                    if self.tick(at) >= limit {
                        // Rescheduled later while it sat here: filed again by its time
                        // (past this slot's tick, so never back into this slot). Counted
                        // against `max` like a drained entry, so a slot of many such
                        // entries is still filed a batch per call.
                        self.place(idx);
                        n += 1;
                        continue;
                    }
                    out.push((self.release(idx), at));
                    n += 1;
                }
            } else {
                // Cascade: re-place the slot's entries relative to the new position.
                let mut cur = self.heads[level][slot];
                self.heads[level][slot] = NIL;
                self.occupied[level] &= !(1u64 << slot);
                while cur != NIL {
                    let next = self.entries[cur as usize].next;
                    self.place(cur);
                    cur = next;
                }
            }
        }
        if n < max {
            // Nothing below `limit` is left in the wheel, so its position can move there.
            if limit > self.elapsed {
                self.elapsed = limit;
                self.pull_far();
            }
            return false;
        }
        self.past.first().is_some_and(|&(at, _)| at <= upto_ms)
            || self
                .next_expiration(limit)
                .is_some_and(|(_, _, d)| d < limit)
    }

    /// Checks that every slotted entry lies ahead of the position, in the block its level
    /// implies or later (a later reschedule leaves an entry where it was: see
    /// [`Wheel::reschedule`]) (tests only).
    #[cfg(test)]
    fn check(&self) {
        for level in 0..LEVELS {
            for slot in 0..SLOTS {
                let mut cur = self.heads[level][slot];
                while cur != NIL {
                    let e = &self.entries[cur as usize];
                    let t = self.tick(e.at);
                    assert!(t >= self.elapsed, "entry {cur} (level {level}) is behind");
                    let block = SLOT_BITS * (level as u32 + 1);
                    assert!(
                        t >> block >= self.elapsed >> block,
                        "entry {cur} before its block"
                    );
                    cur = e.next;
                }
            }
        }
    }

    fn live(&self, id: EntryId) -> bool {
        self.entries
            .get(id.0 as usize)
            .is_some_and(|e| e.place != FREE)
    }

    fn release(&mut self, idx: u32) -> T {
        let e = &mut self.entries[idx as usize];
        e.place = FREE;
        e.prev = NIL;
        e.next = self.free;
        self.free = idx;
        self.len -= 1;
        std::mem::take(&mut e.item)
    }

    /// Puts a linked-out entry where its time belongs relative to the wheel's position.
    fn place(&mut self, idx: u32) {
        let at = self.entries[idx as usize].at;
        let tick = self.tick(at);
        if tick < self.elapsed {
            self.past.insert((at, idx));
            self.entries[idx as usize].place = PAST;
            return;
        }
        let masked = (self.elapsed ^ tick) | (SLOTS as u64 - 1);
        let significant = 63 - masked.leading_zeros();
        let level = (significant / SLOT_BITS) as usize;
        if level >= LEVELS {
            self.far.insert((tick, idx));
            self.entries[idx as usize].place = FAR;
            return;
        }
        let slot = ((tick >> (SLOT_BITS * level as u32)) & (SLOTS as u64 - 1)) as usize;
        let head = self.heads[level][slot];
        {
            let e = &mut self.entries[idx as usize];
            e.prev = NIL;
            e.next = head;
            e.place = SLOT_BASE + (level * SLOTS + slot) as Place;
        }
        if head != NIL {
            self.entries[head as usize].prev = idx;
        }
        self.heads[level][slot] = idx;
        self.occupied[level] |= 1u64 << slot;
    }

    fn unlink(&mut self, idx: u32) {
        let (place, prev, next, at) = {
            let e = &self.entries[idx as usize];
            (e.place, e.prev, e.next, e.at)
        };
        match place {
            FREE => {}
            PAST => {
                self.past.remove(&(at, idx));
            }
            FAR => {
                let tick = self.tick(at);
                self.far.remove(&(tick, idx));
            }
            _ => {
                let packed = (place - SLOT_BASE) as usize;
                let (level, slot) = (packed / SLOTS, packed % SLOTS);
                if prev != NIL {
                    self.entries[prev as usize].next = next;
                } else {
                    self.heads[level][slot] = next;
                    if next == NIL {
                        self.occupied[level] &= !(1u64 << slot);
                    }
                }
                if next != NIL {
                    self.entries[next as usize].prev = prev;
                }
            }
        }
        let e = &mut self.entries[idx as usize];
        e.prev = NIL;
        e.next = NIL;
        e.place = FREE;
    }

    /// Brings overflow entries that now fall within the wheel's reach into it.
    fn pull_far(&mut self) {
        while let Some(&(tick, idx)) = self.far.first() {
            if (tick ^ self.elapsed) >> WHEEL_BITS != 0 && tick > self.elapsed {
                break;
            }
            self.far.pop_first();
            self.place(idx);
        }
    }

    /// The earliest occupied slot: (level, slot, first tick of the slot, or the position if
    /// that is later). Every level is looked at: after the position moves to a sweep's limit, a
    /// higher level's slot may contain the position while level 0 holds later ticks. When the
    /// wheel is empty and the overflow level holds a tick below `limit`, the wheel first moves
    /// to that tick's block (never further: a position far ahead would send every ordinary
    /// insert to the due list).
    fn next_expiration(&mut self, limit: u64) -> Option<(usize, usize, u64)> {
        let mut best: Option<(usize, usize, u64)> = None;
        for level in 0..LEVELS {
            let occupied = self.occupied[level];
            if occupied == 0 {
                continue;
            }
            let shift = SLOT_BITS * level as u32;
            let now_slot = ((self.elapsed >> shift) & (SLOTS as u64 - 1)) as u32;
            let slot =
                (occupied.rotate_right(now_slot).trailing_zeros() + now_slot) as usize % SLOTS;
            let level_start = self.elapsed & !((1u64 << (shift + SLOT_BITS)) - 1);
            let deadline = (level_start + ((slot as u64) << shift)).max(self.elapsed);
            if best.is_none_or(|(_, _, d)| deadline < d) {
                best = Some((level, slot, deadline));
            }
        }
        if best.is_some() {
            return best;
        }
        let &(tick, _) = self.far.first()?;
        if tick >= limit {
            return None;
        }
        self.elapsed = self.elapsed.max(tick & !((1u64 << WHEEL_BITS) - 1));
        self.pull_far();
        self.next_expiration(limit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    use crate::util::rng::XorShift as Rng;

    const YEAR_MS: i64 = 365 * 24 * 3600 * 1000;

    #[test]
    fn basic_insert_drain_in_order() {
        let mut w = Wheel::new(1, 0);
        for t in [50, 10, 3000, 70_000, 10] {
            w.insert(t, t);
        }
        let mut out = Vec::new();
        assert!(!w.drain_due(9, 100, &mut out));
        assert!(out.is_empty());
        w.drain_due(60, 100, &mut out);
        let mut got: Vec<i64> = out.iter().map(|x| x.1).collect();
        got.sort();
        assert_eq!(got, vec![10, 10, 50]);
        out.clear();
        w.drain_due(100_000, 100, &mut out);
        assert_eq!(out.len(), 2);
        assert!(w.is_empty());
    }

    #[test]
    fn past_and_far_dates() {
        let now = 1_700_000_000_000;
        let mut w = Wheel::new(1000, now);
        let year_9999 = 253_402_300_799_000;
        let far = w.insert(year_9999, "9999");
        w.insert(-5 * YEAR_MS, "1965");
        w.insert(0, "1970");
        w.insert(i64::MAX - 1, "end of time");
        w.insert(i64::MIN + 1, "start of time");
        let mut out = Vec::new();
        w.drain_due(now, 10, &mut out);
        assert_eq!(out.len(), 3);
        out.clear();
        w.drain_due(year_9999 - 1, 10, &mut out);
        assert!(out.is_empty());
        assert_eq!(w.time_of(far), Some(year_9999));
        // The entry's tick (a whole second) ends 999 ms later: never drained early.
        w.drain_due(year_9999, 10, &mut out);
        assert!(out.is_empty());
        w.drain_due(year_9999 + 999, 10, &mut out);
        assert_eq!(out.iter().map(|x| x.0).collect::<Vec<_>>(), vec!["9999"]);
        out.clear();
        w.drain_due(i64::MAX, 10, &mut out);
        assert_eq!(out.len(), 1);
    }

    #[test]
    fn bounded_drain_reports_more() {
        let mut w = Wheel::new(1, 0);
        for i in 0..1000 {
            w.insert(100 + i % 7, i);
        }
        let mut out = Vec::new();
        let mut rounds = 0;
        while w.drain_due(200, 64, &mut out) {
            rounds += 1;
        }
        assert_eq!(out.len(), 1000);
        assert_eq!(rounds, 1000 / 64);
    }

    #[test]
    fn touching_keeps_memory_constant() {
        let mut w = Wheel::new(1000, 0);
        let ids: Vec<_> = (0..1000).map(|i| w.insert(i * 1000, i)).collect();
        let cap = w.memory_bytes();
        for round in 0..200 {
            for (i, id) in ids.iter().enumerate() {
                w.reschedule(*id, (round * 7919 + i as i64 * 13) * 1000);
            }
        }
        assert_eq!(w.memory_bytes(), cap);
        assert_eq!(w.len(), 1000);
    }

    #[test]
    fn rewinding_the_sweep_point_returns_nothing_early() {
        // A TTL index whose expireAfterSeconds was raised sweeps up to an earlier point.
        let mut w = Wheel::new(1000, 0);
        w.insert(5_000, "a");
        let mut out = Vec::new();
        w.drain_due(10_000, 10, &mut out);
        assert_eq!(out.len(), 1);
        out.clear();
        w.insert(4_000, "b"); // behind the position: due list
        w.insert(20_000, "c");
        w.drain_due(3_000, 10, &mut out);
        assert!(out.is_empty());
        w.drain_due(4_000, 10, &mut out);
        assert_eq!(out.len(), 1);
    }

    /// The wheel against a model: random inserts, moves, removes and drains, with times from
    /// before 1970 to year 9999, checking every drained entry is due and every due one drained.
    #[test]
    fn randomized_against_model() {
        for (seed, tick) in [(1u64, 1u64), (7, 1000), (99, 100), (12345, 1)] {
            let mut rng = Rng(seed.wrapping_mul(0x9e3779b97f4a7c15) | 1);
            let mut now: i64 = 1_700_000_000_000;
            let mut w = Wheel::new(tick, now);
            let mut model: BTreeMap<u32, (i64, u64)> = BTreeMap::new();
            let mut ids: Vec<EntryId> = Vec::new();
            let mut serial = 0u64;
            let pick_time = |rng: &mut Rng, now: i64| -> i64 {
                match rng.next_u64() % 10 {
                    0 => now - (rng.next_u64() % (100 * YEAR_MS as u64)) as i64,
                    1 if rng.next_u64().is_multiple_of(4) => {
                        i64::MAX - (rng.next_u64() % 1000) as i64
                    }
                    1 => 253_402_300_799_000 - (rng.next_u64() % 1000) as i64,
                    2 => now.saturating_add((rng.next_u64() % (3 * YEAR_MS as u64)) as i64),
                    _ => now.saturating_add((rng.next_u64() % 200_000) as i64 - 1000),
                }
            };
            for _ in 0..6_000 {
                match rng.next_u64() % 10 {
                    0..=3 => {
                        let at = pick_time(&mut rng, now);
                        serial += 1;
                        let id = w.insert(at, serial);
                        model.insert(id.0, (at, serial));
                        ids.push(id);
                    }
                    4 | 5 if !ids.is_empty() => {
                        let id = ids[(rng.next_u64() % ids.len() as u64) as usize];
                        if let Some(m) = model.get_mut(&id.0) {
                            let at = pick_time(&mut rng, now);
                            w.reschedule(id, at);
                            m.0 = at;
                        }
                    }
                    6 if !ids.is_empty() => {
                        let i = (rng.next_u64() % ids.len() as u64) as usize;
                        let id = ids.swap_remove(i);
                        let got = w.remove(id);
                        assert_eq!(got, model.remove(&id.0).map(|m| m.1));
                    }
                    _ => {
                        now = now.saturating_add((rng.next_u64() % 50_000) as i64);
                        match rng.next_u64() % 400 {
                            0 => now = now.max(253_402_300_799_000 + 10),
                            1 => now = i64::MAX - 400,
                            _ => {}
                        }
                        let upto = now - (rng.next_u64() % 3) as i64 * 20_000;
                        let mut out = Vec::new();
                        while w.drain_due(upto, 100, &mut out) {}
                        let drained: std::collections::HashSet<u64> =
                            out.iter().map(|x| x.0).collect();
                        for (_, at) in &out {
                            assert!(*at <= upto, "drained early: {at} > {upto}");
                        }
                        let before = model.len();
                        model.retain(|_, m| !drained.contains(&m.1));
                        assert_eq!(before - model.len(), out.len(), "drained unknown entries");
                        ids.retain(|id| model.contains_key(&id.0));
                        // Everything still in the model due more than one tick ago was missed.
                        for m in model.values() {
                            assert!(
                                m.0 > upto.saturating_sub(tick as i64),
                                "missed entry at {} (upto {upto})",
                                m.0
                            );
                        }
                    }
                }
                assert_eq!(w.len(), model.len());
                w.check();
            }
        }
    }
}
