//! The stream value (XADD, XRANGE, consumer groups), laid out as Redis's: entries live in
//! packed blocks kept in an ordered map keyed by each block's master ID (Redis's radix tree
//! of listpacks). A block holds up to `stream-node-max-entries` entries and
//! `stream-node-max-bytes` bytes in one [`Listpack`]: each entry is a header (flags and its
//! ID as a delta from the master ID) followed by its values alone when its fields are the
//! block's shared field list (the fields of the block's first entry), or by its field/value
//! pairs otherwise. A range read from any ID seeks the block at or before it (O(log n)) and
//! walks on; trimming drops whole blocks from the front.
//!
//! Deleted entries are taken out of their block at once (Redis only flags them), but the block
//! remembers how many it lost, so when a new block starts, and so what an approximate trim
//! can drop, follow Redis's numbers.

use crate::store::encoding::{limit, LIMITS};
use crate::util::listpack::Listpack;
use crate::util::mem::alloc_size;
use bytes::Bytes;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// A stream entry ID: milliseconds and a sequence number.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamId {
    pub ms: u64,
    pub seq: u64,
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.ms, self.seq)
    }
}

impl StreamId {
    pub const MIN: StreamId = StreamId { ms: 0, seq: 0 };
    pub const MAX: StreamId = StreamId {
        ms: u64::MAX,
        seq: u64::MAX,
    };

    pub fn new(ms: u64, seq: u64) -> StreamId {
        StreamId { ms, seq }
    }

    pub fn is_zero(&self) -> bool {
        *self == StreamId::MIN
    }

    /// The next ID (`None` past the maximum).
    pub fn incr(self) -> Option<StreamId> {
        if self.seq < u64::MAX {
            Some(StreamId::new(self.ms, self.seq + 1))
        } else if self.ms < u64::MAX {
            Some(StreamId::new(self.ms + 1, 0))
        } else {
            None
        }
    }

    /// The previous ID (`None` before 0-0).
    pub fn decr(self) -> Option<StreamId> {
        if self.seq > 0 {
            Some(StreamId::new(self.ms, self.seq - 1))
        } else if self.ms > 0 {
            Some(StreamId::new(self.ms - 1, u64::MAX))
        } else {
            None
        }
    }

    pub fn to_bytes(self) -> Bytes {
        // Formatted on the stack: `to_string` grows a String a few times for one ID.
        let mut ms = itoa::Buffer::new();
        let mut seq = itoa::Buffer::new();
        let (ms, seq) = (
            ms.format(self.ms).as_bytes(),
            seq.format(self.seq).as_bytes(),
        );
        let mut b = bytes::BytesMut::with_capacity(ms.len() + 1 + seq.len());
        b.extend_from_slice(ms);
        b.extend_from_slice(b"-");
        b.extend_from_slice(seq);
        b.freeze()
    }

    /// Parses `ms` or `ms-seq` as Redis's `streamParseID` (strict unsigned decimals);
    /// `seq_missing` is the sequence a bare `ms` gets. Returns the ID and whether the
    /// sequence was given.
    pub fn parse(b: &[u8], seq_missing: u64) -> Option<(StreamId, bool)> {
        if b.len() > 127 {
            return None;
        }
        match b.iter().position(|&c| c == b'-') {
            None => Some((StreamId::new(parse_u64(b)?, seq_missing), false)),
            Some(i) => {
                let ms = parse_u64(&b[..i])?;
                let seq = parse_u64(&b[i + 1..])?;
                Some((StreamId::new(ms, seq), true))
            }
        }
    }
}

/// Redis's `string2ull`: an unsigned decimal without sign or spaces.
fn parse_u64(b: &[u8]) -> Option<u64> {
    if b.is_empty() || b.len() > 20 || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(b).ok()?.parse().ok()
}

/// Header flag: the entry's fields are the block's shared field list.
const SAMEFIELDS: u8 = 1;

/// Writes `v` as a little-endian base-128 varint into a slice with room for it (10 bytes
/// hold any u64); returns the length.
fn varint_into(out: &mut [u8], mut v: u64) -> usize {
    let mut i = 0;
    while v >= 0x80 {
        out[i] = (v as u8) | 0x80;
        v >>= 7;
        i += 1;
    }
    out[i] = v as u8;
    i + 1
}

fn get_varint(b: &[u8], at: &mut usize) -> u64 {
    let mut v = 0u64;
    let mut shift = 0;
    while let Some(&c) = b.get(*at) {
        *at += 1;
        if shift < 64 {
            v |= u64::from(c & 0x7f) << shift;
        }
        if c & 0x80 == 0 {
            break;
        }
        shift += 7;
    }
    v
}

/// An entry as read out of a block: its ID and its field/value pairs, flattened.
pub type Entry = (StreamId, Vec<Bytes>);

/// One packed block of entries.
#[derive(Debug, Clone, Default)]
struct Block {
    /// The shared field list (the first entry's fields), packed: one exact-size buffer
    /// rather than a `Bytes` (32 bytes) and an allocation per field, which cost a 3-field
    /// stream about 1.2 bytes an entry.
    fields: Listpack,
    data: Listpack,
    /// Entries present.
    live: usize,
    /// Entries deleted from it since it was made (Redis keeps them flagged in the node).
    deleted: usize,
    /// The last ID ever appended to it.
    last: StreamId,
    /// The size Redis's listpack for the same entries would have (deleted entries stay in
    /// it), which `stream-node-max-bytes` bounds.
    redis_bytes: usize,
}

/// Bytes of a listpack entry holding this integer (encoding and back-length).
fn lp_int_size(v: i64) -> usize {
    match v {
        0..=127 => 2,
        -4096..=4095 => 3,
        -32768..=32767 => 4,
        -8_388_608..=8_388_607 => 5,
        -2_147_483_648..=2_147_483_647 => 6,
        _ => 10,
    }
}

/// Bytes of a listpack entry holding this string (stored as an integer when it reads as one).
fn lp_str_size(b: &[u8]) -> usize {
    if b.len() <= 20 {
        if let Some(v) = crate::util::num::parse_i64(b) {
            return lp_int_size(v);
        }
    }
    let l = b.len();
    let head = if l <= 63 {
        1 + l
    } else if l <= 4095 {
        2 + l
    } else {
        5 + l
    };
    head + match head {
        0..=127 => 1,
        128..=16382 => 2,
        16383..=2_097_150 => 3,
        2_097_151..=268_435_454 => 4,
        _ => 5,
    }
}

/// Where one entry sits in its block's listpack.
struct Slot {
    id: StreamId,
    /// Index of its header item.
    at: usize,
    /// Items it takes, header included.
    items: usize,
}

impl Block {
    fn cost(&self) -> usize {
        std::mem::size_of::<Block>()
            + 2 * std::mem::size_of::<StreamId>()
            + self.data.heap()
            + self.fields.heap()
    }

    /// The slots of the block in order.
    fn slots(&self, master: StreamId) -> Vec<Slot> {
        let mut out = Vec::with_capacity(self.live);
        let mut it = self.data.iter();
        let mut at = 0;
        while let Some(h) = it.next() {
            let (flags, id, n) = decode_header(h, master);
            let body = if flags & SAMEFIELDS != 0 { n } else { 2 * n };
            for _ in 0..body {
                it.next();
            }
            out.push(Slot {
                id,
                at,
                items: 1 + body,
            });
            at += 1 + body;
        }
        out
    }

    /// Every entry of the block, decoded.
    fn entries(&self, master: StreamId) -> Vec<Entry> {
        self.entries_in(master, StreamId::MIN, StreamId::MAX, 0)
    }

    /// Entries with `start <= id <= end` in order, at most `max` (0: all), copying only
    /// those: the ones before `start` are skipped over without decoding their values.
    fn entries_in(
        &self,
        master: StreamId,
        start: StreamId,
        end: StreamId,
        max: usize,
    ) -> Vec<Entry> {
        let mut out = Vec::new();
        self.visit_in(master, start, end, max, &mut Vec::new(), &mut |id, fv| {
            out.push((id, fv.iter().map(|x| Bytes::copy_from_slice(x)).collect()));
        });
        out
    }

    /// The entries of [`Block::entries_in`] without copies: each entry's ID and field-value
    /// slices go to `f`; returns how many, and whether the walk should stop (`max` reached,
    /// or an entry past `end`).
    fn visit_in<'a>(
        &'a self,
        master: StreamId,
        start: StreamId,
        end: StreamId,
        max: usize,
        fv: &mut Vec<&'a [u8]>,
        f: &mut dyn FnMut(StreamId, &[&[u8]]),
    ) -> (usize, bool) {
        let mut n = 0;
        let mut it = self.data.iter();
        while let Some(h) = it.next() {
            let (flags, id, k) = decode_header(h, master);
            let same = flags & SAMEFIELDS != 0;
            let body = if same { k } else { 2 * k };
            if id < start {
                for _ in 0..body {
                    it.next();
                }
                continue;
            }
            if id > end {
                return (n, true);
            }
            fv.clear();
            if same {
                for fld in self.fields.iter().take(k) {
                    fv.push(fld);
                    fv.push(it.next().unwrap_or_default());
                }
            } else {
                for _ in 0..body {
                    fv.push(it.next().unwrap_or_default());
                }
            }
            f(id, fv);
            n += 1;
            if max > 0 && n >= max {
                return (n, true);
            }
        }
        (n, false)
    }

    fn first_id(&self, master: StreamId) -> Option<StreamId> {
        self.data.first().map(|h| decode_header(h, master).1)
    }

    fn last_live_id(&self, master: StreamId) -> Option<StreamId> {
        self.slots(master).last().map(|s| s.id)
    }

    fn remove_slot(&mut self, s: &Slot) {
        self.data.remove_range(s.at, s.at + s.items);
        self.live -= 1;
        self.deleted += 1;
    }
}

fn decode_header(h: &[u8], master: StreamId) -> (u8, StreamId, usize) {
    let flags = h.first().copied().unwrap_or(0);
    let mut at = 1;
    let dms = get_varint(h, &mut at);
    let dseq = get_varint(h, &mut at);
    let n = get_varint(h, &mut at) as usize;
    let id = StreamId::new(master.ms.wrapping_add(dms), master.seq.wrapping_add(dseq));
    (flags, id, n)
}

/// A pending entry of a group: who has it, when it was last delivered, how many times.
#[derive(Debug, Clone)]
pub struct Nack {
    pub consumer: Bytes,
    pub delivery_time: i64,
    pub delivery_count: u64,
}

#[derive(Debug, Clone, Default)]
pub struct Consumer {
    /// Last time it was seen, in Unix ms: its last attempted interaction (XREADGROUP,
    /// XCLAIM, XAUTOCLAIM), successful or not (Redis 7.2's `seen-time`).
    pub seen_time: i64,
    /// Last successful interaction: entries delivered to it or claimed by it; -1 never
    /// (Redis 7.2's `active-time`).
    pub active_time: i64,
    pub pel: BTreeSet<StreamId>,
}

/// The "unknown" `entries_read` of a group.
pub const ENTRIES_READ_UNKNOWN: i64 = -1;

#[derive(Debug, Clone, Default)]
pub struct Group {
    pub last_id: StreamId,
    pub entries_read: i64,
    pub pel: BTreeMap<StreamId, Nack>,
    pub consumers: BTreeMap<Bytes, Consumer>,
}

const NACK_COST: usize = 96;
const CONSUMER_COST: usize = 96;

impl Group {
    pub fn new(last_id: StreamId, entries_read: i64) -> Group {
        Group {
            last_id,
            entries_read,
            ..Group::default()
        }
    }

    fn cost(&self) -> usize {
        std::mem::size_of::<Group>()
            + self.pel.len() * NACK_COST
            + self
                .consumers
                .iter()
                .map(|(n, c)| CONSUMER_COST + alloc_size(n.len()) + c.pel.len() * 24)
                .sum::<usize>()
    }

    /// The consumer named `name`, created if missing (`true` when created).
    pub fn consumer(&mut self, name: &[u8], now: i64) -> (&mut Consumer, bool) {
        let created = !self.consumers.contains_key(name);
        let c = self
            .consumers
            .entry(Bytes::copy_from_slice(name))
            .or_insert_with(|| Consumer {
                seen_time: now,
                active_time: -1,
                pel: BTreeSet::new(),
            });
        (c, created)
    }

    /// Deletes a consumer and its pending entries; returns how many it had.
    pub fn delete_consumer(&mut self, name: &[u8]) -> Option<usize> {
        let c = self.consumers.remove(name)?;
        for id in &c.pel {
            self.pel.remove(id);
        }
        Some(c.pel.len())
    }

    /// Acknowledges one ID; true if it was pending.
    pub fn ack(&mut self, id: StreamId) -> bool {
        match self.pel.remove(&id) {
            Some(n) => {
                if let Some(c) = self.consumers.get_mut(&n.consumer) {
                    c.pel.remove(&id);
                }
                true
            }
            None => false,
        }
    }

    /// Gives pending `id` to `consumer` (creating the NACK if missing).
    pub fn assign(&mut self, id: StreamId, consumer: &Bytes, time: i64, count: Option<u64>) {
        let prev = self.pel.get(&id).map(|n| n.consumer.clone());
        if let Some(prev) = prev {
            if let Some(c) = self.consumers.get_mut(&prev) {
                c.pel.remove(&id);
            }
        }
        let n = self.pel.entry(id).or_insert(Nack {
            consumer: consumer.clone(),
            delivery_time: time,
            delivery_count: 1,
        });
        n.consumer = consumer.clone();
        n.delivery_time = time;
        if let Some(c) = count {
            n.delivery_count = c;
        }
        if let Some(c) = self.consumers.get_mut(consumer) {
            c.pel.insert(id);
            // Delivered to it or claimed by it: a successful interaction.
            c.active_time = time;
        }
    }
}

/// How a trim chooses what goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trim {
    MaxLen(u64),
    MinId(StreamId),
}

#[derive(Debug, Clone, Default)]
pub struct StreamValue {
    blocks: BTreeMap<StreamId, Block>,
    len: u64,
    pub last_id: StreamId,
    first_id: StreamId,
    pub max_deleted_id: StreamId,
    pub entries_added: u64,
    pub groups: BTreeMap<Bytes, Group>,
    /// Estimated bytes of the blocks.
    block_bytes: usize,
}

impl StreamValue {
    /// Allocations freeing the stream walks: its blocks, and each group with its pending
    /// entries (Redis's `lazyfreeGetFreeEffort` for streams).
    pub fn free_effort(&self) -> usize {
        self.blocks.len() + self.groups.values().map(|g| 1 + g.pel.len()).sum::<usize>()
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    /// A stream key stays when its entries are gone (Redis keeps empty streams, with their
    /// last ID and groups), so the key space never sees a stream as empty.
    pub fn is_empty(&self) -> bool {
        false
    }

    pub fn has_entries(&self) -> bool {
        self.len > 0
    }

    pub fn first_id(&self) -> StreamId {
        self.first_id
    }

    pub fn nodes(&self) -> usize {
        self.blocks.len()
    }

    pub fn heap(&self) -> usize {
        self.block_bytes
            + self.blocks.len() * (std::mem::size_of::<StreamId>() + 16)
            + self
                .groups
                .iter()
                .map(|(n, g)| alloc_size(n.len()) + g.cost())
                .sum::<usize>()
    }

    /// The ID XADD `*` (or `ms-*` with `ms`) would give, `None` when none is left.
    pub fn next_id(&self, ms: Option<u64>) -> Option<StreamId> {
        let last = self.last_id;
        match ms {
            Some(ms) if ms > last.ms => Some(StreamId::new(ms, 0)),
            Some(ms) if ms == last.ms => last.seq.checked_add(1).map(|s| StreamId::new(ms, s)),
            Some(_) => None,
            None => {
                let now = crate::util::clock::now_ms().max(0) as u64;
                if now > last.ms {
                    Some(StreamId::new(now, 0))
                } else {
                    last.incr()
                }
            }
        }
    }

    /// Appends an entry with an ID greater than `last_id` (the caller checked it).
    pub fn append(&mut self, id: StreamId, fv: &[Bytes]) {
        let n = fv.len() / 2;
        let max_entries = limit(&LIMITS.stream_node_entries);
        let max_bytes = match limit(&LIMITS.stream_node_bytes) {
            0 => usize::MAX >> 1,
            b => b.min(1 << 30),
        };
        // Redis compares the node's listpack size plus the new fields' and values' lengths.
        let raw: usize = fv.iter().map(|b| b.len()).sum();
        let need_new = match self.blocks.iter().next_back() {
            None => true,
            Some((_, b)) => {
                b.redis_bytes + raw >= max_bytes
                    || (max_entries > 0 && b.live + b.deleted >= max_entries)
            }
        };
        if need_new {
            // Copied: the arguments are slices of the connection's read buffer.
            let mut fields = Listpack::new();
            for f in fv.iter().step_by(2) {
                fields.push_back(f);
            }
            // Listpack header and end, master entry: count, deleted, field count, the
            // fields, and its terminator.
            let redis_bytes = 7
                + 3 * lp_int_size(0)
                + fields.iter().map(lp_str_size).sum::<usize>()
                + lp_int_size(0);
            let b = Block {
                fields,
                redis_bytes,
                ..Block::default()
            };
            self.block_bytes += b.cost();
            self.blocks.insert(id, b);
        }
        let Some((&master, b)) = self.blocks.iter_mut().next_back() else {
            return;
        };
        let before = b.cost();
        let same = b.fields.len() == n
            && b.fields
                .iter()
                .zip(fv.iter().step_by(2))
                .all(|(a, f)| a == f.as_ref());
        // The entry's header (flags and three varints: at most 31 bytes) and the list of
        // its items live on the stack for the usual few fields: XADD runs this per entry.
        let mut h = [0u8; 31];
        h[0] = if same { SAMEFIELDS } else { 0 };
        let mut hl = 1;
        for v in [
            id.ms.wrapping_sub(master.ms),
            id.seq.wrapping_sub(master.seq),
            n as u64,
        ] {
            hl += varint_into(&mut h[hl..], v);
        }
        // With the block's field list, only the values; else fields and values.
        let (skip, step) = if same { (1, 2) } else { (0, 1) };
        let values = fv.iter().skip(skip).step_by(step);
        let mut on_stack: [&[u8]; 17] = [&[]; 17];
        let heap: Vec<&[u8]>;
        // One reallocation of the block for the whole entry.
        let items: &[&[u8]] = if fv.len() < on_stack.len() {
            on_stack[0] = &h[..hl];
            let mut k = 1;
            for v in values {
                on_stack[k] = v;
                k += 1;
            }
            &on_stack[..k]
        } else {
            heap = std::iter::once(&h[..hl])
                .chain(values.map(|v| &v[..]))
                .collect();
            &heap
        };
        b.data.push_back_all(items);
        let dms = id.ms.wrapping_sub(master.ms) as i64;
        let dseq = id.seq.wrapping_sub(master.seq) as i64;
        // Flags, the ID deltas, (the field count and fields), the values, the item count.
        b.redis_bytes += lp_int_size(0)
            + lp_int_size(dms)
            + lp_int_size(dseq)
            + if same {
                fv.iter()
                    .skip(1)
                    .step_by(2)
                    .map(|v| lp_str_size(v))
                    .sum::<usize>()
            } else {
                lp_int_size(n as i64) + fv.iter().map(|v| lp_str_size(v)).sum::<usize>()
            }
            + lp_int_size(0);
        b.live += 1;
        b.last = id;
        self.block_bytes = self.block_bytes + b.cost() - before;
        if self.len == 0 {
            self.first_id = id;
        }
        self.len += 1;
        self.last_id = id;
        self.entries_added += 1;
    }

    /// The key of the block that would hold `id` (the last with a master ID at or below it).
    fn block_of(&self, id: StreamId) -> Option<StreamId> {
        self.blocks.range(..=id).next_back().map(|(k, _)| *k)
    }

    /// Entries with `start <= id <= end` in order, at most `count` (0: all), given to `f` as
    /// slices of the stored blocks (no copy: XRANGE and XREAD encode them straight into the
    /// reply); returns how many.
    pub fn visit_range(
        &self,
        start: StreamId,
        end: StreamId,
        count: usize,
        mut f: impl FnMut(StreamId, &[&[u8]]),
    ) -> usize {
        if start > end {
            return 0;
        }
        let mut n = 0;
        let mut fv = Vec::new();
        let from = self.block_of(start).unwrap_or(start);
        for (&m, b) in self.blocks.range(from..=end) {
            let want = if count > 0 { count - n } else { 0 };
            // `stop`: the count is reached, or an entry past `end` ended the walk.
            let (got, stop) = b.visit_in(m, start, end, want, &mut fv, &mut f);
            n += got;
            if stop {
                return n;
            }
        }
        n
    }

    /// Entries with `start <= id <= end`, in order (reversed with `rev`), at most `count`
    /// (0: all).
    pub fn range(&self, start: StreamId, end: StreamId, count: usize, rev: bool) -> Vec<Entry> {
        let mut out = Vec::new();
        if start > end {
            return out;
        }
        if !rev {
            let from = self.block_of(start).unwrap_or(start);
            for (&m, b) in self.blocks.range(from..=end) {
                let want = if count > 0 { count - out.len() } else { 0 };
                out.extend(b.entries_in(m, start, end, want));
                if count > 0 && out.len() >= count {
                    return out;
                }
            }
        } else {
            for (&m, b) in self.blocks.range(..=end).rev() {
                for e in b.entries(m).into_iter().rev() {
                    if e.0 > end {
                        continue;
                    }
                    if e.0 < start {
                        return out;
                    }
                    out.push(e);
                    if count > 0 && out.len() >= count {
                        return out;
                    }
                }
            }
        }
        out
    }

    /// The entry with this ID.
    pub fn get(&self, id: StreamId) -> Option<Entry> {
        let m = self.block_of(id)?;
        self.blocks.get(&m)?.entries_in(m, id, id, 1).pop()
    }

    pub fn contains(&self, id: StreamId) -> bool {
        self.get(id).is_some()
    }

    /// The first (or last) entry's ID, `None` when empty. A block an exact MINID trim
    /// emptied stays (as Redis's node with every entry flagged deleted), so it is skipped.
    fn edge(&self, last: bool) -> Option<StreamId> {
        if last {
            self.blocks
                .iter()
                .rev()
                .find_map(|(&m, b)| b.last_live_id(m))
        } else {
            self.blocks.iter().find_map(|(&m, b)| b.first_id(m))
        }
    }

    /// The ID of the last entry present (not `last_id`, which may have been deleted).
    pub fn last_entry_id(&self) -> Option<StreamId> {
        self.edge(true)
    }

    pub fn last_entry(&self) -> Option<Entry> {
        let id = self.edge(true)?;
        self.get(id)
    }

    pub fn first_entry(&self) -> Option<Entry> {
        let id = self.edge(false)?;
        self.get(id)
    }

    /// XDEL of one ID: true if it was there.
    pub fn delete(&mut self, id: StreamId) -> bool {
        let Some(m) = self.block_of(id) else {
            return false;
        };
        let Some(b) = self.blocks.get_mut(&m) else {
            return false;
        };
        let Some(s) = b.slots(m).into_iter().find(|s| s.id == id) else {
            return false;
        };
        let before = b.cost();
        b.remove_slot(&s);
        if b.live == 0 {
            self.blocks.remove(&m);
            self.block_bytes -= before;
        } else {
            self.block_bytes = self.block_bytes + b.cost() - before;
        }
        self.len -= 1;
        if id > self.max_deleted_id {
            self.max_deleted_id = id;
        }
        if self.len == 0 {
            self.first_id = StreamId::MIN;
        } else if id == self.first_id {
            self.first_id = self.edge(false).unwrap_or_default();
        }
        true
    }

    /// Redis's `streamTrim`: removes entries from the front by `how`; with `approx` only whole
    /// blocks; `limit` caps the entries removed (0: none). Returns the count removed.
    pub fn trim(&mut self, how: Trim, approx: bool, limit: u64) -> u64 {
        let mut deleted = 0u64;
        loop {
            if let Trim::MaxLen(max) = how {
                if self.len <= max {
                    break;
                }
            }
            let Some((&m, b)) = self.blocks.iter().next() else {
                break;
            };
            let entries = b.live as u64;
            if limit > 0 && deleted + entries > limit {
                break;
            }
            let whole = match how {
                Trim::MaxLen(max) => self.len - entries >= max,
                Trim::MinId(min) => b.last < min,
            };
            if whole {
                let cost = b.cost();
                self.blocks.remove(&m);
                self.block_bytes -= cost;
                self.len -= entries;
                deleted += entries;
                continue;
            }
            if approx {
                break;
            }
            let Some(b) = self.blocks.get_mut(&m) else {
                break;
            };
            let before = b.cost();
            let mut cut = 0;
            let mut removed = 0u64;
            for s in b.slots(m) {
                let stop = match how {
                    Trim::MaxLen(max) => self.len - removed <= max,
                    Trim::MinId(min) => s.id >= min,
                };
                if stop {
                    break;
                }
                cut += s.items;
                removed += 1;
            }
            b.data.remove_range(0, cut);
            b.live -= removed as usize;
            b.deleted += removed as usize;
            self.block_bytes = self.block_bytes + b.cost() - before;
            self.len -= removed;
            deleted += removed;
            break;
        }
        if self.len == 0 {
            self.first_id = StreamId::MIN;
        } else if deleted > 0 {
            self.first_id = self.edge(false).unwrap_or_default();
        }
        deleted
    }

    /// Redis's `streamRangeHasTombstones` (from `start`, to the end).
    pub fn has_tombstones_from(&self, start: StreamId) -> bool {
        if self.len == 0 || self.max_deleted_id.is_zero() {
            return false;
        }
        if self.first_id > self.max_deleted_id {
            return false;
        }
        start <= self.max_deleted_id
    }

    /// Redis's `streamEstimateDistanceFromFirstEverEntry`: `None` when unknown.
    pub fn estimate_entries_read(&self, id: StreamId) -> Option<u64> {
        if self.entries_added == 0 {
            return Some(0);
        }
        if self.len == 0 && id <= self.last_id {
            return Some(self.entries_added);
        }
        match id.cmp(&self.last_id) {
            std::cmp::Ordering::Equal => return Some(self.entries_added),
            std::cmp::Ordering::Greater => return None,
            _ => {}
        }
        if self.max_deleted_id.is_zero() || self.max_deleted_id < self.first_id {
            match id.cmp(&self.first_id) {
                std::cmp::Ordering::Less => return Some(self.entries_added - self.len),
                std::cmp::Ordering::Equal => return Some(self.entries_added - self.len + 1),
                _ => {}
            }
        }
        None
    }

    /// A group's lag as XINFO reports it (`None`: unknown). Negative when ENTRIESREAD or
    /// XSETID claimed more than was added, as Redis reports it.
    pub fn lag(&self, g: &Group) -> Option<i64> {
        if self.entries_added == 0 {
            return Some(0);
        }
        let added = self.entries_added as i64;
        if g.entries_read != ENTRIES_READ_UNKNOWN && !self.has_tombstones_from(g.last_id) {
            return Some(added.wrapping_sub(g.entries_read));
        }
        self.estimate_entries_read(g.last_id)
            .map(|r| added.wrapping_sub(r as i64))
    }

    /// Moves a group's last delivered ID forward to `id` after delivering it, as Redis's
    /// `streamReplyWithRange` does for `>` reads.
    pub fn advance_group(&self, g: &mut Group, id: StreamId) {
        if id > g.last_id {
            if g.entries_read != ENTRIES_READ_UNKNOWN && !self.has_tombstones_from(id) {
                g.entries_read += 1;
            } else if self.entries_added > 0 {
                g.entries_read = self
                    .estimate_entries_read(id)
                    .map_or(ENTRIES_READ_UNKNOWN, |v| v as i64);
            }
            g.last_id = id;
        }
    }

    /// Sets the stream's top (XSETID).
    pub fn set_last(&mut self, id: StreamId, added: Option<u64>, max_deleted: Option<StreamId>) {
        self.last_id = id;
        if let Some(a) = added {
            self.entries_added = a;
        }
        if let Some(m) = max_deleted {
            self.max_deleted_id = m;
        }
    }

    /// Entries each block has held (present and deleted), in order.
    pub fn block_sizes(&self) -> Vec<usize> {
        self.blocks.values().map(|b| b.live + b.deleted).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fv(pairs: &[(&str, &str)]) -> Vec<Bytes> {
        pairs
            .iter()
            .flat_map(|(f, v)| [Bytes::from(f.to_string()), Bytes::from(v.to_string())])
            .collect()
    }

    #[test]
    fn append_range_delete_trim() {
        let mut s = StreamValue::default();
        for i in 1..=250u64 {
            let f = if i % 7 == 0 {
                fv(&[("x", "1")])
            } else {
                fv(&[("a", "1"), ("b", &i.to_string())])
            };
            s.append(StreamId::new(i, 0), &f);
        }
        assert_eq!(s.len(), 250);
        assert_eq!(s.block_sizes(), vec![100, 100, 50]);
        let r = s.range(StreamId::new(99, 0), StreamId::new(102, 0), 0, false);
        assert_eq!(
            r.iter().map(|e| e.0.ms).collect::<Vec<_>>(),
            vec![99, 100, 101, 102]
        );
        assert_eq!(r[3].1, fv(&[("a", "1"), ("b", "102")]));
        assert_eq!(r[2].1, fv(&[("a", "1"), ("b", "101")]));
        let r = s.range(StreamId::MIN, StreamId::MAX, 3, true);
        assert_eq!(
            r.iter().map(|e| e.0.ms).collect::<Vec<_>>(),
            vec![250, 249, 248]
        );
        assert_eq!(s.get(StreamId::new(7, 0)).unwrap().1, fv(&[("x", "1")]));
        assert!(s.delete(StreamId::new(1, 0)));
        assert!(!s.delete(StreamId::new(1, 0)));
        assert_eq!(s.first_id(), StreamId::new(2, 0));
        assert_eq!(s.trim(Trim::MaxLen(150), true, 0), 99);
        assert_eq!(s.len(), 150);
        assert_eq!(s.trim(Trim::MaxLen(10), false, 0), 140);
        assert_eq!(s.first_id(), StreamId::new(241, 0));
        assert_eq!(s.trim(Trim::MinId(StreamId::new(245, 0)), false, 0), 4);
        assert_eq!(s.len(), 6);
        let heap = s.heap();
        assert!(heap > 0);
        for i in 245..=250 {
            s.delete(StreamId::new(i, 0));
        }
        assert_eq!(s.len(), 0);
        assert_eq!(s.nodes(), 0);
        assert_eq!(s.block_bytes, 0);
    }

    /// An exact MINID trim that empties a block whose last appended entry was deleted keeps
    /// the block; the stream's edges skip it.
    #[test]
    fn minid_trim_emptying_a_block() {
        let mut s = StreamValue::default();
        for i in 1..=100u64 {
            s.append(StreamId::new(i, 0), &fv(&[("a", "1")]));
        }
        assert!(s.delete(StreamId::new(100, 0)));
        s.append(StreamId::new(101, 0), &fv(&[("a", "1")]));
        assert_eq!(s.nodes(), 2);
        assert_eq!(s.trim(Trim::MinId(StreamId::new(100, 0)), false, 0), 99);
        assert_eq!(s.len(), 1);
        assert_eq!(s.nodes(), 2);
        assert_eq!(s.first_id(), StreamId::new(101, 0));
        assert_eq!(s.first_entry().map(|e| e.0), Some(StreamId::new(101, 0)));
        assert_eq!(s.last_entry_id(), Some(StreamId::new(101, 0)));
        assert_eq!(s.range(StreamId::MIN, StreamId::MAX, 0, true).len(), 1);
    }
}
