//! TTL indexes: one timing wheel per shard per TTL index, keyed by the **date stored in the
//! document** (not by its deadline).
//!
//! A document with date `d` under `expireAfterSeconds = s` is due when `d + s <= now`, so a
//! sweep drains the wheel up to `now - s`. Changing `s` (MongoDB's `collMod`) therefore
//! re-keys nothing: lowering it makes more documents due at the next sweep (and at once for
//! strict reads); raising it moves the sweep point back, and the wheel returns nothing after
//! that point (see `Wheel::drain_due`).
//!
//! Only BSON Dates expire; for an array the earliest date counts; a missing field, null, a
//! string, a number or a Timestamp never expires (MongoDB's rules). A document without a date
//! has no wheel entry at all, so it costs nothing.

use crate::documents::rawbson;
use crate::wheel::{EntryId, Wheel};
use bson::{RawBsonRef, RawDocument};
use std::sync::atomic::{AtomicBool, Ordering};

/// `ttl-strict-reads`, cached for the read path (every scan asks).
static STRICT_READS: AtomicBool = AtomicBool::new(true);

thread_local! {
    /// The running command applies a master's stream (or a slot migration's source's):
    /// documents are as that node has them, live until its deletion record arrives
    /// (`store::expiry::set_from_master` sets it with the keys' flag).
    static FROM_MASTER: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

pub fn set_from_master(on: bool) {
    FROM_MASTER.with(|f| f.set(on));
}

/// Whether due documents are hidden now: `ttl-strict-reads`, except for what a master's
/// stream applies (a write meeting a document its master still has must not expire it).
pub fn strict_reads() -> bool {
    STRICT_READS.load(Ordering::Relaxed) && !FROM_MASTER.with(|f| f.get())
}

/// Follows `ttl-strict-reads` (at start and on `CONFIG SET`).
pub fn set_strict_reads(on: bool) {
    STRICT_READS.store(on, Ordering::Relaxed);
}

/// The `expireAfterSeconds` MongoDB accepts: an integer from 0 to 2^31-1.
pub fn parse_expire_after(arg: &[u8]) -> Result<i64, String> {
    let text = std::str::from_utf8(arg).unwrap_or("").trim();
    match text.parse::<i64>() {
        Ok(s) if (0..=i32::MAX as i64).contains(&s) => Ok(s),
        Ok(s) if s < 0 => Err(format!(
            "ERR expireAfterSeconds must be a non-negative number, got {s}"
        )),
        Ok(s) => Err(format!(
            "ERR expireAfterSeconds must be at most 2147483647, got {s}"
        )),
        Err(_) => Err(format!(
            "ERR expireAfterSeconds must be an integer from 0 to 2147483647, got '{}'",
            text.chars().take(64).collect::<String>()
        )),
    }
}

/// The wheel's resolution. The monitor sweeps once a minute by default; a one-second tick
/// keeps the wheel shallow, and strict reads hide a due document to the millisecond anyway.
const TICK_MS: u64 = 1000;
const NO_ENTRY: u32 = u32::MAX;

/// The part of one TTL index that one shard owns.
pub struct TtlShard {
    /// The indexed field, dotted path split into its components.
    path: Vec<String>,
    pub expire_after_secs: i64,
    /// The wheel holds document slots.
    wheel: Wheel<u32>,
    /// Slot → wheel entry index (`NO_ENTRY` when the document has no date).
    by_slot: Vec<u32>,
}

impl std::fmt::Debug for TtlShard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TtlShard")
            .field("path", &self.path)
            .field("expire_after_secs", &self.expire_after_secs)
            .field("entries", &self.wheel.len())
            .finish()
    }
}

impl TtlShard {
    pub fn new(field: &str, expire_after_secs: i64, now_ms: i64) -> TtlShard {
        TtlShard {
            path: field.split('.').map(str::to_string).collect(),
            expire_after_secs,
            wheel: Wheel::new(TICK_MS, now_ms.saturating_sub(expire_after_secs * 1000)),
            by_slot: Vec::new(),
        }
    }

    /// The indexed field (dotted).
    pub fn field(&self) -> String {
        self.path.join(".")
    }

    /// Documents with a date under this index.
    pub fn len(&self) -> usize {
        self.wheel.len()
    }

    pub fn is_empty(&self) -> bool {
        self.wheel.is_empty()
    }

    pub fn memory_bytes(&self) -> usize {
        self.wheel.memory_bytes() + self.by_slot.capacity() * 4
    }

    /// The date this index holds for a document, if any.
    pub fn date_of(&self, slot: u32) -> Option<i64> {
        let idx = *self.by_slot.get(slot as usize)?;
        if idx == NO_ENTRY {
            return None;
        }
        self.wheel.time_of(entry(idx))
    }

    /// Whether the document in `slot` is past its deadline at `now_ms`.
    pub fn is_expired(&self, slot: u32, now_ms: i64) -> bool {
        self.date_of(slot)
            .is_some_and(|d| self.date_is_due(d, now_ms))
    }

    /// Whether `doc`, as stored, is due at `now_ms` under this index (what
    /// [`TtlShard::is_expired`] says of its slot, read from the document instead).
    pub fn doc_is_expired(&self, doc: &RawDocument, now_ms: i64) -> bool {
        earliest_date(doc, &self.path).is_some_and(|d| self.date_is_due(d, now_ms))
    }

    /// Whether a document dated `date` is due at `now_ms` under this index.
    pub fn date_is_due(&self, date: i64, now_ms: i64) -> bool {
        date.saturating_add(self.expire_after_secs * 1000) <= now_ms
    }

    /// The field, when it is a top-level one.
    pub fn top_field(&self) -> Option<&str> {
        match self.path.as_slice() {
            [p] => Some(p),
            _ => None,
        }
    }

    /// Whether the index is on the top-level field `name`.
    pub fn is_on(&self, name: &str) -> bool {
        matches!(self.path.as_slice(), [p] if p == name)
    }

    /// Indexes a document stored in `slot` (a new document, or the new version of one).
    pub fn on_insert(&mut self, slot: u32, doc: &RawDocument) {
        self.set_date(slot, earliest_date(doc, &self.path));
    }

    /// Files the document in `slot` under `date` (`None`: it has none, so never expires).
    pub fn set_date(&mut self, slot: u32, date: Option<i64>) {
        let i = slot as usize;
        if self.by_slot.len() <= i {
            self.by_slot.resize(i + 1, NO_ENTRY);
        }
        let current = self.by_slot[i];
        match (date, current) {
            // A touch: move the entry, O(1), no allocation.
            (Some(d), idx) if idx != NO_ENTRY => self.wheel.reschedule(entry(idx), d),
            (Some(d), _) => self.by_slot[i] = self.wheel.insert(d, slot).index(),
            (None, idx) if idx != NO_ENTRY => {
                self.wheel.remove(entry(idx));
                self.by_slot[i] = NO_ENTRY;
            }
            (None, _) => {}
        }
    }

    /// Forgets the document in `slot`.
    pub fn on_remove(&mut self, slot: u32) {
        if let Some(idx) = self.by_slot.get_mut(slot as usize) {
            if *idx != NO_ENTRY {
                self.wheel.remove(entry(*idx));
                *idx = NO_ENTRY;
            }
        }
    }

    /// Takes out up to `max` slots due at `now_ms` (their wheel entries are gone; the caller
    /// removes the documents). Returns true while more are due.
    pub fn drain_due(&mut self, now_ms: i64, max: usize, out: &mut Vec<u32>) -> bool {
        let upto = now_ms.saturating_sub(self.expire_after_secs.saturating_mul(1000));
        let mut due = Vec::with_capacity(max.min(1024));
        let more = self.wheel.drain_due(upto, max, &mut due);
        for (slot, _) in due {
            if let Some(idx) = self.by_slot.get_mut(slot as usize) {
                *idx = NO_ENTRY;
            }
            out.push(slot);
        }
        more
    }
}

fn entry(idx: u32) -> EntryId {
    EntryId::from_index(idx)
}

/// The earliest BSON Date the dotted `path` reaches in `doc`, through subdocuments and arrays
/// (an array of dates counts by its earliest).
pub fn earliest_date(doc: &RawDocument, path: &[String]) -> Option<i64> {
    // A top-level date (the usual `accessTime`) read with the stored-bytes walker: every
    // strict read checks it, and the bson crate's lookup cost several times more.
    if let [field] = path {
        match rawbson::field(doc.as_bytes(), field) {
            Some(None) => return None,
            Some(Some(e)) if e.ty == rawbson::DATE_TIME => return rawbson::i64_of(e.value),
            // Anything else (an array of dates, another type) is walked below.
            _ => {}
        }
    }
    let mut best: Option<i64> = None;
    if let Some((first, rest)) = path.split_first() {
        if let Ok(Some(v)) = doc.get(first) {
            walk(v, rest, &mut best, 0);
        }
    }
    best
}

fn walk(v: RawBsonRef<'_>, rest: &[String], best: &mut Option<i64>, depth: usize) {
    // Stored documents are at most 100 levels deep; this bound is only a guard.
    if depth > 200 {
        return;
    }
    let mut offer = |d: i64| *best = Some(best.map_or(d, |b| b.min(d)));
    match (v, rest.split_first()) {
        (RawBsonRef::DateTime(d), None) => offer(d.timestamp_millis()),
        (RawBsonRef::Array(a), None) => {
            for e in a.into_iter().flatten() {
                if let RawBsonRef::DateTime(d) = e {
                    offer(d.timestamp_millis());
                }
            }
        }
        (RawBsonRef::Document(d), Some((first, rest))) => {
            if let Ok(Some(v)) = d.get(first) {
                walk(v, rest, best, depth + 1);
            }
        }
        (RawBsonRef::Array(a), Some((first, tail))) => {
            // `a.0.b` indexes the array; `a.b` reaches `b` in each subdocument element.
            if let Ok(i) = first.parse::<usize>() {
                if let Ok(Some(v)) = a.get(i) {
                    walk(v, tail, best, depth + 1);
                }
            }
            for e in a.into_iter().flatten() {
                if let RawBsonRef::Document(_) = e {
                    walk(e, rest, best, depth + 1);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{rawdoc, DateTime, Timestamp};

    fn path(p: &str) -> Vec<String> {
        p.split('.').map(str::to_string).collect()
    }

    #[test]
    fn only_dates_expire_and_arrays_count_their_earliest() {
        let d = |ms| DateTime::from_millis(ms);
        let cases = [
            (rawdoc! {"t": d(5)}, Some(5)),
            (rawdoc! {"t": [d(9), d(3), "x", 1]}, Some(3)),
            (rawdoc! {"t": "2020-01-01"}, None),
            (rawdoc! {"t": 12345}, None),
            (rawdoc! {"t": bson::RawBson::Null}, None),
            (rawdoc! {"t": Timestamp { time: 1, increment: 1 }}, None),
            (rawdoc! {"u": d(1)}, None),
            (rawdoc! {"t": [[d(1)]]}, None),
        ];
        for (doc, want) in cases {
            assert_eq!(earliest_date(&doc, &path("t")), want, "{doc:?}");
        }
        let nested = rawdoc! {"s": [{"t": d(7)}, {"t": d(4)}], "o": {"t": d(-100)}};
        assert_eq!(earliest_date(&nested, &path("s.t")), Some(4));
        assert_eq!(earliest_date(&nested, &path("s.0.t")), Some(7));
        assert_eq!(earliest_date(&nested, &path("o.t")), Some(-100));
    }

    #[test]
    fn sweep_uses_the_indexed_date_and_follows_expire_after_changes() {
        let now = 1_700_000_000_000;
        let mut ttl = TtlShard::new("at", 3600, now);
        for h in 0..24i64 {
            let raw = rawdoc! {"at": DateTime::from_millis(now - h * 3_600_000)};
            ttl.on_insert(h as u32, &raw);
        }
        // Due: dates at or before now - 3600 s, i.e. hours 1..23.
        assert!(ttl.is_expired(1, now));
        assert!(!ttl.is_expired(0, now));
        ttl.expire_after_secs = 10 * 3600;
        assert!(!ttl.is_expired(9, now));
        assert!(ttl.is_expired(10, now));
        let mut out = Vec::new();
        while ttl.drain_due(now, 4, &mut out) {}
        out.sort();
        assert_eq!(out, (10..24).collect::<Vec<u32>>());
        // Lowering it makes more due at the next sweep. (A sweep returns a document once its
        // whole one-second tick has passed: the one due exactly at `now` goes a tick later.)
        ttl.expire_after_secs = 0;
        out.clear();
        while ttl.drain_due(now, 100, &mut out) {}
        assert_eq!(out.len(), 9);
        while ttl.drain_due(now + 999, 100, &mut out) {}
        out.sort();
        assert_eq!(out, (0..10).collect::<Vec<u32>>());
        assert!(ttl.is_empty());
    }

    #[test]
    fn touch_moves_and_unset_forgets() {
        let now = 1_700_000_000_000;
        let mut ttl = TtlShard::new("at", 300, now);
        let old = rawdoc! {"at": DateTime::from_millis(now - 299_000)};
        ttl.on_insert(0, &old);
        let mem = ttl.memory_bytes();
        for i in 0..1000 {
            let touched = rawdoc! {"at": DateTime::from_millis(now + i)};
            ttl.on_insert(0, &touched);
        }
        assert_eq!(ttl.memory_bytes(), mem);
        assert_eq!(ttl.date_of(0), Some(now + 999));
        ttl.on_insert(0, &rawdoc! {"other": 1});
        assert_eq!(ttl.date_of(0), None);
        assert!(ttl.is_empty());
        ttl.on_insert(0, &old);
        ttl.on_remove(0);
        assert!(ttl.is_empty());
    }
}
