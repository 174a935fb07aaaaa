//! Secondary indexes: the spec (one struct for ordered, unique and TTL indexes), key
//! generation with MongoDB's multikey rules, and the per-shard ordered structure.
//!
//! An entry is the KeyString of the key fields (a descending field's bytes inverted, which
//! reverses its order because every KeyString is prefix-free) followed by the document's
//! slot as 4 big-endian bytes, in a `BTreeSet`: memcmp order is the index order, equal keys
//! sit together ordered by slot, and a range of the set is a range of the index. Until a
//! scan needs that order, a part keeps its entries by key in a hash table instead
//! (`documents::hashed`, see `OrderedIndex::order`).
//!
//! Missing fields index as null (so `{a: null}` can use the index); an array indexes each of
//! its elements (multikey) and an empty array as `undefined` (which sorts with null); a
//! compound key may hold arrays in several fields only when they come from the same array
//! (`a.b` and `a.c`), otherwise the document is refused with "cannot index parallel arrays".

use crate::documents::hashed::HashedEntries;
use crate::documents::keyfilter::KeyFilter;
use crate::documents::keys;
use crate::documents::path::{self, Leaf};
use crate::documents::unique::UniqueKeys;
use crate::util::inline::InlineBytes;
use bson::{Bson, Document};
use std::collections::BTreeSet;
use std::ops::Bound;
use std::sync::Arc;

/// The most keys one document may generate in one index (MongoDB has no fixed cap, but a
/// product of two large arrays is what its parallel-array rule exists to prevent).
const MAX_KEYS_PER_DOC: usize = 100_000;

/// What an entry costs in the B-tree beyond its heap bytes: its 32 bytes in a node, over
/// the nodes' average fill (a node holds 11 entries and is between half and fully full),
/// for `DOC.STATS` and `used_memory`.
const ENTRY_OVERHEAD: usize = 32 * 4 / 3;

#[derive(Debug, Clone, PartialEq)]
pub struct KeyField {
    /// The dotted path as written (`host`, `a.b`).
    pub name: String,
    pub path: Vec<String>,
    pub descending: bool,
    /// The number as written in the spec (`1`, `-1`), for `DOC.INDEXES` and default names.
    pub written: Bson,
}

/// An index as the catalog knows it; identical in every shard. TTL indexes are ordered
/// indexes with `expire_after` set, so they serve queries on their field too.
#[derive(Debug, Clone, PartialEq)]
pub struct IndexSpec {
    pub name: String,
    pub fields: Vec<KeyField>,
    pub unique: bool,
    /// `expireAfterSeconds` of a TTL index.
    pub expire_after: Option<i64>,
}

impl IndexSpec {
    /// Parses a key document (`{"host": 1, "time": -1}`).
    pub fn parse_keys(keys: &Document) -> Result<Vec<KeyField>, String> {
        if keys.is_empty() {
            return Err("ERR Index keys cannot be empty.".into());
        }
        if keys.len() > 32 {
            return Err("ERR Index key pattern has too many fields (the maximum is 32)".into());
        }
        let mut fields = Vec::with_capacity(keys.len());
        for (k, v) in keys {
            if k.is_empty() || k.starts_with('$') || k.split('.').any(str::is_empty) {
                return Err(format!(
                    "ERR Index key contains an illegal field name: '{k}'"
                ));
            }
            let descending = match v {
                Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_) => {
                    match crate::documents::order::as_f64(v) {
                        Some(f) if f > 0.0 => false,
                        Some(f) if f < 0.0 => true,
                        _ => {
                            return Err(format!(
                                "ERR Values in the index key pattern can't be 0 or NaN: {k}"
                            ))
                        }
                    }
                }
                Bson::String(s) => {
                    return Err(format!("ERR Unknown index plugin '{s}' (only 1 and -1 key directions are supported)"))
                }
                _ => {
                    return Err(format!(
                        "ERR Values in v:2 index key pattern cannot be of type {}. Only numbers > 0, numbers < 0, and strings are allowed.",
                        crate::documents::aggregate::expr::type_name(Some(v))
                    ))
                }
            };
            fields.push(KeyField {
                name: k.clone(),
                path: path::split(k),
                descending,
                written: v.clone(),
            });
        }
        Ok(fields)
    }

    /// MongoDB's generated name: `host_1_time_-1`.
    pub fn default_name(fields: &[KeyField]) -> String {
        let mut parts = Vec::with_capacity(fields.len() * 2);
        for f in fields {
            parts.push(f.name.clone());
            parts.push(match &f.written {
                Bson::Int32(i) => i.to_string(),
                Bson::Int64(i) => i.to_string(),
                Bson::Double(d) if d.fract() == 0.0 && d.abs() < 1e15 => (*d as i64).to_string(),
                other => crate::documents::codec::value_json(other),
            });
        }
        parts.join("_")
    }

    /// The part of a stored document the index reads: its key fields' top-level fields,
    /// decoded from the raw BSON (the rest is never decoded).
    pub fn project(&self, raw: &bson::RawDocument) -> Document {
        let mut d = Document::new();
        for f in &self.fields {
            let top = &f.path[0];
            if d.contains_key(top) {
                continue;
            }
            if let Ok(Some(v)) = raw.get(top) {
                if let Ok(b) = Bson::try_from(v) {
                    d.insert(top.clone(), b);
                }
            }
        }
        d
    }

    /// The key document as written.
    pub fn key_doc(&self) -> Document {
        let mut d = Document::new();
        for f in &self.fields {
            d.insert(f.name.clone(), f.written.clone());
        }
        d
    }

    /// The spec as `DOC.INDEXES` shows it.
    pub fn to_doc(&self) -> Document {
        let mut d = Document::new();
        d.insert("name", self.name.clone());
        d.insert("key", self.key_doc());
        d.insert("unique", self.unique);
        if let Some(s) = self.expire_after {
            d.insert("expireAfterSeconds", s);
        }
        d
    }

    /// The same key pattern (names aside).
    pub fn same_key(&self, fields: &[KeyField]) -> bool {
        self.fields.len() == fields.len()
            && self
                .fields
                .iter()
                .zip(fields)
                .all(|(a, b)| a.name == b.name && a.descending == b.descending)
    }

    /// The keys of one document: the KeyStrings of every combination of the fields' values,
    /// sorted and without duplicates, plus each key's values for duplicate-key errors.
    pub fn keys_of(&self, doc: &Document) -> Result<Vec<Vec<u8>>, String> {
        self.keys_and_arrays(doc).map(|(k, _)| k)
    }

    /// [`IndexSpec::keys_of`], and whether some key field held an array.
    pub fn keys_and_arrays(&self, doc: &Document) -> Result<(Vec<Vec<u8>>, bool), String> {
        let (per_field, arrays) = self.field_values(doc)?;
        let mut out: Vec<Vec<u8>> = vec![Vec::new()];
        for (f, vals) in self.fields.iter().zip(&per_field) {
            let mut next = Vec::with_capacity(out.len() * vals.len());
            for prefix in &out {
                for v in vals {
                    let mut k = prefix.clone();
                    let start = k.len();
                    k.extend_from_slice(v);
                    orient(&mut k[start..], f.descending);
                    next.push(k);
                }
            }
            if next.len() > MAX_KEYS_PER_DOC {
                return Err(format!(
                    "ERR cannot index parallel arrays: too many index keys for one document in index {}",
                    self.name
                ));
            }
            out = next;
        }
        out.sort_unstable();
        out.dedup();
        Ok((out, arrays))
    }

    /// The distinct KeyStrings of each field's values in `doc` (not inverted).
    fn field_values(&self, doc: &Document) -> Result<(Vec<FieldKeys>, bool), String> {
        let mut per_field = Vec::with_capacity(self.fields.len());
        // Where the first array on each multikey field's path sits: arrays from two
        // different places are parallel arrays.
        let mut array_at: Option<(&str, Vec<String>)> = None;
        for f in &self.fields {
            let mut vals: Vec<Vec<u8>> = Vec::new();
            let mut multikey = false;
            path::any_in_doc(doc, &f.path, &mut |leaf| {
                match leaf {
                    Leaf::Missing => vals.push(keys::encode(&Bson::Null)),
                    Leaf::Value(Bson::Array(a)) => {
                        multikey = true;
                        if a.is_empty() {
                            vals.push(keys::encode(&Bson::Undefined));
                        }
                    }
                    Leaf::Value(v) => vals.push(keys::encode(v)),
                    Leaf::Element(e) => {
                        multikey = true;
                        vals.push(keys::encode(e));
                    }
                }
                false
            });
            vals.sort_unstable();
            vals.dedup();
            if vals.len() > 1 {
                multikey = true;
            }
            if multikey {
                let at = first_array(doc, &f.path);
                match &array_at {
                    Some((other, p)) if *p != at => {
                        return Err(format!(
                            "ERR cannot index parallel arrays [{}] [{}]",
                            other.rsplit('.').next().unwrap_or(other),
                            f.name.rsplit('.').next().unwrap_or(&f.name)
                        ))
                    }
                    Some(_) => {}
                    None => array_at = Some((&f.name, at)),
                }
            }
            per_field.push(vals);
        }
        Ok((per_field, array_at.is_some()))
    }

    /// The field values of `doc` for a duplicate-key error: `{ host: "a", time: ... }`.
    pub fn dup_key_text(&self, doc: &Document) -> String {
        let parts: Vec<String> = self
            .fields
            .iter()
            .map(|f| {
                let v = path::get(doc, &f.path).cloned().unwrap_or(Bson::Null);
                let shown = match &v {
                    Bson::String(s) => format!("\"{s}\""),
                    Bson::Int32(i) => i.to_string(),
                    Bson::Int64(i) => i.to_string(),
                    Bson::Double(d) => format!("{d}"),
                    Bson::Null => "null".to_string(),
                    other => crate::documents::codec::value_json(other),
                };
                format!("{}: {shown}", f.name)
            })
            .collect();
        format!("{{ {} }}", parts.join(", "))
    }
}

/// The distinct KeyStrings of one key field's values in a document.
type FieldKeys = Vec<Vec<u8>>;

/// The path prefix down to the first array met along `path` in `doc` (following
/// subdocuments only), or the whole path.
fn first_array(doc: &Document, path: &[String]) -> Vec<String> {
    let mut cur = doc;
    for (i, p) in path.iter().enumerate() {
        match cur.get(p) {
            Some(Bson::Document(d)) => cur = d,
            Some(Bson::Array(_)) => return path[..=i].to_vec(),
            _ => break,
        }
    }
    path.to_vec()
}

/// The end of the range of byte strings that start with `p` (exclusive), or `None` when
/// every string from `p` on starts with it (all `0xFF`).
pub fn prefix_end(p: &[u8]) -> Option<Vec<u8>> {
    let mut e = p.to_vec();
    while let Some(last) = e.pop() {
        if last != 0xFF {
            e.push(last + 1);
            return Some(e);
        }
    }
    None
}

/// The length of the KeyString value at the start of `b` (`inv`: its bytes are inverted),
/// following the layout of [`keys::encode_into`].
pub fn value_len(b: &[u8], inv: bool) -> Option<usize> {
    let m = if inv { 0xFF } else { 0 };
    let at = |i: usize| b.get(i).map(|x| x ^ m);
    let string_end = |from: usize| -> Option<usize> {
        let mut i = from;
        loop {
            match at(i)? {
                0 => match at(i + 1)? {
                    0 => return Some(i + 2),
                    _ => i += 2,
                },
                _ => i += 1,
            }
        }
    };
    let ty = at(0)?.checked_sub(1)?;
    let body = 1;
    Some(match ty {
        0 | 5 | 55 | 127 => body,
        10 => match at(body)? {
            0 => body + 1,
            1 | 3 => body + 9,
            _ => body + 17,
        },
        15 | 60 | 65 => string_end(body)?,
        20 => {
            let mut i = body;
            while at(i)? != 0 {
                i = string_end(i + 1)?;
                i += value_len(b.get(i..)?, inv)?;
            }
            i + 1
        }
        25 => {
            let mut i = body;
            while at(i)? != 0 {
                i += 1;
                i += value_len(b.get(i..)?, inv)?;
            }
            i + 1
        }
        30 => {
            let mut n = [0u8; 4];
            for (j, x) in n.iter_mut().enumerate() {
                *x = at(body + j)?;
            }
            body + 5 + u32::from_be_bytes(n) as usize
        }
        35 => body + 12,
        40 => body + 1,
        45 | 47 => body + 8,
        50 => string_end(string_end(body)?)?,
        _ => return None,
    })
}

/// One interval of one field's values, as KeyStrings (not inverted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interval {
    pub lo: Vec<u8>,
    pub lo_incl: bool,
    pub hi: Vec<u8>,
    pub hi_incl: bool,
}

impl Interval {
    pub fn point(v: &Bson) -> Interval {
        let k = keys::encode(v);
        Interval {
            lo: k.clone(),
            lo_incl: true,
            hi: k,
            hi_incl: true,
        }
    }

    /// Every value: MinKey to MaxKey.
    pub fn all() -> Interval {
        Interval {
            lo: keys::encode(&Bson::MinKey),
            lo_incl: true,
            hi: keys::encode(&Bson::MaxKey),
            hi_incl: true,
        }
    }

    pub fn is_point(&self) -> bool {
        self.lo_incl && self.hi_incl && self.lo == self.hi
    }

    pub fn is_empty(&self) -> bool {
        match self.lo.cmp(&self.hi) {
            std::cmp::Ordering::Greater => true,
            std::cmp::Ordering::Equal => !(self.lo_incl && self.hi_incl),
            std::cmp::Ordering::Less => false,
        }
    }

    fn contains(&self, k: &[u8]) -> bool {
        let above = if self.lo_incl {
            k >= self.lo.as_slice()
        } else {
            k > self.lo.as_slice()
        };
        let below = if self.hi_incl {
            k <= self.hi.as_slice()
        } else {
            k < self.hi.as_slice()
        };
        above && below
    }

    pub fn intersect(&self, o: &Interval) -> Interval {
        let (lo, lo_incl) = match self.lo.cmp(&o.lo) {
            std::cmp::Ordering::Greater => (self.lo.clone(), self.lo_incl),
            std::cmp::Ordering::Less => (o.lo.clone(), o.lo_incl),
            std::cmp::Ordering::Equal => (self.lo.clone(), self.lo_incl && o.lo_incl),
        };
        let (hi, hi_incl) = match self.hi.cmp(&o.hi) {
            std::cmp::Ordering::Less => (self.hi.clone(), self.hi_incl),
            std::cmp::Ordering::Greater => (o.hi.clone(), o.hi_incl),
            std::cmp::Ordering::Equal => (self.hi.clone(), self.hi_incl && o.hi_incl),
        };
        Interval {
            lo,
            lo_incl,
            hi,
            hi_incl,
        }
    }

    /// The interval in a descending field's inverted byte space.
    fn inverted(&self) -> Interval {
        let inv = |v: &[u8]| v.iter().map(|b| !b).collect::<Vec<u8>>();
        Interval {
            lo: inv(&self.hi),
            lo_incl: self.hi_incl,
            hi: inv(&self.lo),
            hi_incl: self.lo_incl,
        }
    }
}

/// Sorts and merges overlapping intervals; drops empty ones.
pub fn normalize(mut v: Vec<Interval>) -> Vec<Interval> {
    v.retain(|i| !i.is_empty());
    v.sort_by(|a, b| a.lo.cmp(&b.lo).then(b.lo_incl.cmp(&a.lo_incl)));
    let mut out: Vec<Interval> = Vec::with_capacity(v.len());
    for i in v {
        if let Some(last) = out.last_mut() {
            let touches = match last.hi.cmp(&i.lo) {
                std::cmp::Ordering::Greater => true,
                std::cmp::Ordering::Equal => last.hi_incl || i.lo_incl,
                std::cmp::Ordering::Less => false,
            };
            if touches {
                match last.hi.cmp(&i.hi) {
                    std::cmp::Ordering::Less => {
                        last.hi = i.hi;
                        last.hi_incl = i.hi_incl;
                    }
                    std::cmp::Ordering::Equal => last.hi_incl |= i.hi_incl,
                    std::cmp::Ordering::Greater => {}
                }
                continue;
            }
        }
        out.push(i);
    }
    out
}

/// Intersects two normalized interval lists.
pub fn intersect_lists(a: &[Interval], b: &[Interval]) -> Vec<Interval> {
    let mut out = Vec::new();
    for x in a {
        for y in b {
            let i = x.intersect(y);
            if !i.is_empty() {
                out.push(i);
            }
        }
    }
    normalize(out)
}

/// What one scan did, for `DOC.EXPLAIN`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScanStats {
    pub keys_examined: u64,
    pub docs_examined: u64,
    pub n_returned: u64,
}

impl ScanStats {
    pub fn add(&mut self, o: &ScanStats) {
        self.keys_examined += o.keys_examined;
        self.docs_examined += o.docs_examined;
        self.n_returned += o.n_returned;
    }
}

/// The most byte ranges one scan is split into; beyond, later point fields are checked on
/// the keys instead of narrowing the ranges.
const MAX_RANGES: usize = 4096;

/// An index part's entries: by key in a hash table while every scan of the part has been an
/// equality on all its key fields (`documents::hashed`), then ordered for good.
#[derive(Debug)]
enum Entries {
    Hashed(HashedEntries),
    Ordered(BTreeSet<IxKey>),
}

/// One shard's part of an ordered index.
#[derive(Debug)]
pub struct OrderedIndex {
    pub spec: Arc<IndexSpec>,
    entries: Entries,
    /// Which keys may be held, so an equality lookup skips a shard without the B-tree (kept
    /// only while ordered: a hashed part's lookup is as cheap as the filter's).
    filter: KeyFilter,
    bytes: usize,
    /// Whether some document ever held an array in a key field (bounds on one field from two
    /// predicates cannot then be intersected, nor does index order give sort order).
    multikey: bool,
    /// Whether the build has covered every document of the shard; only ready indexes serve
    /// queries (writes maintain an index from the moment it is attached).
    pub ready: bool,
    /// A (non-unique) TTL index's ordered part that no query has needed yet in this shard:
    /// it holds no entries, writes skip it and the planner does not see it, so a TTL index
    /// costs only its wheel entry per document until a query would be served by it
    /// (`CollectionShard::prepare` then builds it, and from then on it is maintained).
    /// Expiry never reads it: the wheel orders the dates.
    dormant: bool,
    /// A unique index's keys across every shard (the same table in every shard's part).
    pub unique: Option<Arc<UniqueKeys>>,
    /// What this part's documents' keys cost in that table.
    unique_bytes: usize,
}

/// One index entry (KeyString, then the slot as 4 big-endian bytes), held inside the
/// B-tree's node when short. Why: with boxed entries every comparison of a lookup chased a
/// pointer to a cold allocation, and at 100 000 documents an indexed find spent most of
/// its time in those cache misses on each of the shards; inline, a node's keys are read
/// from the node itself. Entries up to 30 bytes (a date, number, ObjectId or short string
/// key, or a short compound key, with its slot) stay in the node: 32 bytes an entry.
/// Ordered as its bytes, so ranges of `[u8]` select it.
#[derive(Clone)]
struct IxKey(InlineBytes<INLINE>);

const _: () = assert!(std::mem::size_of::<IxKey>() == 32);

impl IxKey {
    /// Heap bytes outside the node.
    fn heap(&self) -> usize {
        self.0.heap()
    }
}

impl std::ops::Deref for IxKey {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl std::borrow::Borrow<[u8]> for IxKey {
    fn borrow(&self) -> &[u8] {
        self
    }
}

impl PartialEq for IxKey {
    fn eq(&self, o: &IxKey) -> bool {
        **self == **o
    }
}
impl Eq for IxKey {}
impl PartialOrd for IxKey {
    fn partial_cmp(&self, o: &IxKey) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for IxKey {
    #[inline]
    fn cmp(&self, o: &IxKey) -> std::cmp::Ordering {
        // Both held in the node (nearly every entry): their buffers are zero past their
        // lengths (`InlineBytes::concat` starts from zeros, and a descending key is inverted
        // only within its length), so whole words of the buffers compare as the zero-padded
        // tails of `cmp_bytes` do, with no slicing, no tail loop and no enum match per
        // side: a B-tree descent makes about 20 of these, and they were most of an index
        // entry's move.
        if let (InlineBytes::Inline { len: la, buf: a }, InlineBytes::Inline { len: lb, buf: b }) =
            (&self.0, &o.0)
        {
            // Every word, without checking the lengths first: past both lengths the words
            // are equal zeros, and keys that differ usually do so in the first two words.
            for k in 0..INLINE_WORDS {
                let (x, y) = (inline_word(a, k), inline_word(b, k));
                if x != y {
                    return x.cmp(&y);
                }
            }
            return la.cmp(lb);
        }
        cmp_bytes(self, o)
    }
}

/// Bytes an entry holds in the node, and the 8-byte words that cover them.
const INLINE: usize = 30;
const INLINE_WORDS: usize = INLINE.div_ceil(8);

/// Word `k` of an inline entry's buffer, big-endian (the last one zero-padded).
#[inline(always)]
fn inline_word(b: &[u8; INLINE], k: usize) -> u64 {
    let w = |i: usize| {
        u64::from_be_bytes([
            b[i],
            b[i + 1],
            b[i + 2],
            b[i + 3],
            b[i + 4],
            b[i + 5],
            b[i + 6],
            b[i + 7],
        ])
    };
    match k {
        0 => w(0),
        1 => w(8),
        2 => w(16),
        _ => u64::from_be_bytes([b[24], b[25], b[26], b[27], b[28], b[29], 0, 0]),
    }
}

/// Byte order, 8 bytes at a time: a lookup compares a short key with a dozen node keys per
/// level, and a call to `memcmp` for each cost more than the comparison itself.
#[inline]
fn cmp_bytes(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    let mut ca = a.chunks_exact(8);
    let mut cb = b.chunks_exact(8);
    for (x, y) in (&mut ca).zip(&mut cb) {
        let (x, y) = (
            u64::from_be_bytes([x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7]]),
            u64::from_be_bytes([y[0], y[1], y[2], y[3], y[4], y[5], y[6], y[7]]),
        );
        if x != y {
            return x.cmp(&y);
        }
    }
    let n = a.len().min(b.len()) & !7;
    // The tail as one more word each, zero-padded (a slice comparison would call `memcmp`
    // again, and a byte loop cost a compare and branch a byte: entries are 19 bytes for a
    // 12-character string key). The shorter side has fewer than 8 bytes left; where the
    // padded words differ, the first differing byte decides as in byte order (a zero pad
    // below a longer side's byte is a prefix sorting first); where they are equal, the
    // shorter is a prefix of the longer.
    let (x, y) = (tail_word(&a[n..]), tail_word(&b[n..]));
    if x != y {
        return x.cmp(&y);
    }
    a.len().cmp(&b.len())
}

/// Up to the first 8 bytes of `t` as a big-endian word, zero-padded.
#[inline]
fn tail_word(t: &[u8]) -> u64 {
    // Shifted in byte by byte: a copy of a variable length would call `memcpy`.
    let mut w = 0u64;
    for (i, &c) in t.iter().take(8).enumerate() {
        w |= (c as u64) << (56 - 8 * i);
    }
    w
}

impl std::fmt::Debug for IxKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&**self, f)
    }
}

/// A bound made of bytes alone (a key prefix), to search the set with [`IxKey`]'s order.
fn bound_key(bytes: &[u8]) -> IxKey {
    IxKey(InlineBytes::new(bytes))
}

/// A field's KeyString as the index stores it: inverted for a descending field (which
/// reverses its order, every KeyString being prefix-free).
fn orient(key: &mut [u8], descending: bool) {
    if descending {
        for b in key {
            *b = !*b;
        }
    }
}

/// The key of an entry (its bytes without the slot).
fn key_of(e: &[u8]) -> &[u8] {
    &e[..e.len() - 4]
}

/// The slot of an entry (its last 4 bytes, big-endian).
fn slot_of(e: &[u8]) -> u32 {
    let n = e.len() - 4;
    u32::from_be_bytes([e[n], e[n + 1], e[n + 2], e[n + 3]])
}

/// A unique spec's new key table (`None` for other indexes).
fn spec_unique(spec: &IndexSpec) -> Option<Arc<UniqueKeys>> {
    spec.unique.then(|| Arc::new(UniqueKeys::default()))
}

fn entry(key: &[u8], slot: u32) -> IxKey {
    IxKey(InlineBytes::concat(key, &slot.to_be_bytes()))
}

/// A hashed part's entries as the ordered B-tree.
fn ordered_entries(h: &HashedEntries) -> BTreeSet<IxKey> {
    // Sorted first: the set is then built from the sorted run in one pass.
    let mut v: Vec<IxKey> = h.iter().map(|(k, s)| entry(k, s)).collect();
    v.sort_unstable();
    v.into_iter().collect()
}

impl OrderedIndex {
    pub fn new(spec: Arc<IndexSpec>) -> OrderedIndex {
        OrderedIndex {
            dormant: spec.expire_after.is_some() && !spec.unique,
            unique: spec_unique(&spec),
            spec,
            entries: Entries::Hashed(HashedEntries::default()),
            filter: KeyFilter::default(),
            bytes: 0,
            multikey: false,
            ready: false,
            unique_bytes: 0,
        }
    }

    /// This shard's part of an index whose other parts already exist: a unique index's
    /// parts share one key table.
    pub fn part_of(spec: Arc<IndexSpec>, unique: Option<Arc<UniqueKeys>>) -> OrderedIndex {
        OrderedIndex {
            unique,
            ..OrderedIndex::new(spec)
        }
    }

    pub fn len(&self) -> usize {
        match &self.entries {
            Entries::Hashed(h) => h.len(),
            Entries::Ordered(o) => o.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the entries are held in index order (else by key, see `Entries`).
    pub fn is_ordered(&self) -> bool {
        matches!(self.entries, Entries::Ordered(_))
    }

    /// Puts a hashed part's entries in index order, for good: called before a scan that
    /// needs more than one key's entries or their order (`CollectionShard::prepare`).
    pub fn order(&mut self) {
        let Entries::Hashed(h) = &self.entries else {
            return;
        };
        let ordered = ordered_entries(h);
        self.bytes = ordered.iter().map(IxKey::heap).sum();
        self.filter
            .rebuild(ordered.len(), ordered.iter().map(|e| key_of(e)));
        self.entries = Entries::Ordered(ordered);
    }

    pub fn is_multikey(&self) -> bool {
        self.multikey
    }

    /// Whether this part is a TTL index's ordered part not built yet (see `dormant`).
    pub fn is_dormant(&self) -> bool {
        self.dormant
    }

    /// Builds a dormant part from the shard's stored documents; from then on writes
    /// maintain it like any ordered index.
    pub fn wake<'a>(&mut self, docs: impl Iterator<Item = (u32, &'a bson::RawDocument)>) {
        if !self.dormant {
            return;
        }
        self.dormant = false;
        for (slot, raw) in docs {
            self.insert_raw(slot, raw);
        }
    }

    /// Adds an entry (a no-op when present); an ordered part also counts its heap bytes and
    /// its key in the shard-skipping filter. Returns whether it was new.
    fn put(&mut self, e: IxKey) -> bool {
        let entries = match &mut self.entries {
            Entries::Hashed(h) => return h.insert(key_of(&e), slot_of(&e)),
            Entries::Ordered(o) => o,
        };
        let n = e.heap();
        let h = self.filter.hash(key_of(&e));
        if !entries.insert(e) {
            return false;
        }
        self.bytes += n;
        if self.filter.full() {
            let keys = entries.iter().map(|e| key_of(e));
            self.filter.rebuild(entries.len(), keys);
        } else {
            self.filter.add_hashed(h);
        }
        true
    }

    /// Removes an entry if present, uncounting its heap bytes and its key.
    fn take(&mut self, e: &IxKey) {
        match &mut self.entries {
            Entries::Hashed(h) => {
                h.remove(key_of(e), slot_of(e));
            }
            Entries::Ordered(o) => {
                if o.remove(e) {
                    self.bytes -= e.heap();
                    self.filter.remove(key_of(e));
                }
            }
        }
    }

    /// Approximate memory held, for `DOC.STATS`: entries, the key filter and this part's
    /// share of a unique index's key table.
    pub fn bytes(&self) -> usize {
        let entries = match &self.entries {
            Entries::Hashed(h) => h.memory_bytes(),
            Entries::Ordered(o) => {
                self.bytes + o.len() * ENTRY_OVERHEAD + self.filter.memory_bytes()
            }
        };
        entries + self.unique_bytes
    }

    /// A unique index's keys of a stored document (none when it cannot be keyed, which the
    /// write path refused before storing it).
    pub fn unique_keys(&self, doc: &bson::RawDocument) -> Vec<Vec<u8>> {
        self.spec
            .keys_of(&self.spec.project(doc))
            .unwrap_or_default()
    }

    fn unique_cost(keys: &[Vec<u8>], owner: &[u8]) -> usize {
        keys.iter().map(|k| UniqueKeys::entry_cost(k, owner)).sum()
    }

    /// A newly indexed document's keys held in the unique table and counted. Its write
    /// claimed them already (claiming again is a no-op); an index build claims them here,
    /// and a key another document holds is returned as the build's failure.
    pub fn hold_unique(&mut self, doc: &bson::RawDocument, owner: &[u8]) -> Result<(), Vec<u8>> {
        let Some(u) = &self.unique else {
            return Ok(());
        };
        let keys = self.unique_keys(doc);
        u.claim(&keys, owner)?;
        self.unique_bytes += Self::unique_cost(&keys, owner);
        Ok(())
    }

    /// A removed document's keys given back.
    pub fn release_unique(&mut self, doc: &bson::RawDocument, owner: &[u8]) {
        let Some(u) = &self.unique else { return };
        let keys = self.unique_keys(doc);
        u.release(&keys, owner);
        self.unique_bytes = self
            .unique_bytes
            .saturating_sub(Self::unique_cost(&keys, owner));
    }

    /// A replaced document's keys: the new ones held (claimed by the write), then the old
    /// ones the new document lacks given back — never released and claimed again, which
    /// would let another write take them in between.
    pub fn replace_unique(
        &mut self,
        old: &bson::RawDocument,
        new: &bson::RawDocument,
        owner: &[u8],
    ) {
        let Some(u) = self.unique.clone() else { return };
        let (before, after) = (self.unique_keys(old), self.unique_keys(new));
        let _ = u.claim(&after, owner);
        let gone: Vec<Vec<u8>> = before
            .iter()
            .filter(|k| !after.contains(k))
            .cloned()
            .collect();
        u.release(&gone, owner);
        self.unique_bytes = self
            .unique_bytes
            .saturating_sub(Self::unique_cost(&before, owner))
            + Self::unique_cost(&after, owner);
    }

    /// The one key of a stored document for an index on one top-level field that holds no
    /// array there (the commonest index: `{accessTime: 1}`, `{user: 1}`), read straight from
    /// the raw BSON, appended to `k`; `None` when the general path
    /// ([`IndexSpec::keys_and_arrays`]) is needed.
    fn single_key(&self, raw: &bson::RawDocument, k: &mut Vec<u8>) -> Option<()> {
        let [f] = self.spec.fields.as_slice() else {
            return None;
        };
        let [top] = f.path.as_slice() else {
            return None;
        };
        // Found by byte comparison of the names (`RawDocument::get` checks each name it passes
        // as UTF-8), and a string keyed from its bytes without building a `Bson`.
        let bytes = raw.as_bytes();
        match crate::documents::codec::top_level_value(bytes, top) {
            None => match raw.get(top) {
                Ok(None) => keys::encode_into(&Bson::Null, k),
                _ => return None,
            },
            Some((0x04, _)) => return None,
            Some((0x02, at)) => {
                let n = bytes.get(at..at + 4)?;
                let n = usize::try_from(i32::from_le_bytes([n[0], n[1], n[2], n[3]])).ok()?;
                let s = bytes.get(at + 4..(at + 4 + n).checked_sub(1)?)?;
                std::str::from_utf8(s).ok()?;
                keys::encode_str_into(s, k);
            }
            Some(_) => match raw.get(top) {
                Ok(Some(v)) => keys::encode_into(&Bson::try_from(v).ok()?, k),
                _ => return None,
            },
        };
        orient(k, f.descending);
        Some(())
    }

    /// Runs `f` with the entry of a stored document's one key ([`OrderedIndex::single_key`])
    /// in `slot`, built in a buffer kept per thread (no key vector per write); `false` when
    /// the general path is needed.
    fn with_single_entry(
        &mut self,
        raw: &bson::RawDocument,
        slot: u32,
        f: impl FnOnce(&mut Self, IxKey),
    ) -> bool {
        thread_local! {
            static KEY: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        let e = KEY.with(|cell| {
            let mut fresh = Vec::new();
            let mut held = cell.try_borrow_mut().ok();
            let k = held.as_deref_mut().unwrap_or(&mut fresh);
            k.clear();
            let e = self.single_key(raw, k).map(|()| entry(k, slot));
            // A very long key does not keep its space for good.
            if k.capacity() > 1 << 12 {
                *k = Vec::new();
            }
            e
        });
        match e {
            Some(e) => {
                f(self, e);
                true
            }
            None => false,
        }
    }

    /// [`HashedEntries::warm`] for the key a coming [`OrderedIndex::move_key`] puts, which
    /// `encode` writes (only called for a hashed, ascending part: one kept in key order, or
    /// descending, reads nothing).
    pub fn warm_key(&self, encode: impl FnOnce(&mut smallvec::SmallVec<[u8; 64]>)) {
        let Entries::Hashed(h) = &self.entries else {
            return;
        };
        if self.dormant || self.spec.fields.first().is_some_and(|f| f.descending) {
            return;
        }
        let mut key = smallvec::SmallVec::new();
        encode(&mut key);
        h.warm(&key);
    }

    /// Moves a document's entry from the key `old` to the key `new` (KeyStrings of two
    /// non-array values, as `keys::encode` makes them), for an index on one top-level field
    /// whose value changed (an update in place). Each entry is built in place (no key
    /// vector of its own): inverted there for a descending index.
    pub fn move_key(&mut self, slot: u32, old: &[u8], new: &[u8]) {
        if self.dormant {
            return;
        }
        let descending = self.spec.fields.first().is_some_and(|f| f.descending);
        for (k, add) in [(old, false), (new, true)] {
            let mut e = entry(k, slot);
            if descending {
                let n = k.len();
                match &mut e.0 {
                    InlineBytes::Inline { buf, .. } => orient(&mut buf[..n], true),
                    InlineBytes::Heap(b) => orient(&mut b[..n], true),
                }
            }
            if add {
                self.put(e);
            } else {
                self.take(&e);
            }
        }
    }

    /// Adds a stored document's keys ([`OrderedIndex::insert_doc`] on the fields it reads).
    pub fn insert_raw(&mut self, slot: u32, raw: &bson::RawDocument) {
        if self.dormant {
            return;
        }
        if !self.with_single_entry(raw, slot, |ix, e| {
            ix.put(e);
        }) {
            let d = self.spec.project(raw);
            self.insert_doc(slot, &d);
        }
    }

    /// Removes a stored document's keys ([`OrderedIndex::remove_doc`] on the fields it reads).
    pub fn remove_raw(&mut self, slot: u32, raw: &bson::RawDocument) {
        if self.dormant {
            return;
        }
        if !self.with_single_entry(raw, slot, |ix, e| ix.take(&e)) {
            let d = self.spec.project(raw);
            self.remove_doc(slot, &d);
        }
    }

    /// Adds a document's keys; returns whether any was new. Inserting an entry already
    /// present is a no-op, which is what lets a build run in batches while writes keep the
    /// index current.
    pub fn insert_doc(&mut self, slot: u32, doc: &Document) -> bool {
        if self.dormant {
            return false;
        }
        // A document the write path accepted always has keys; one that errs (parallel
        // arrays, checked before the write) is skipped rather than half-indexed.
        let Ok((keys, arrays)) = self.spec.keys_and_arrays(doc) else {
            return false;
        };
        if arrays {
            self.multikey = true;
        }
        let mut added = false;
        for k in keys {
            added |= self.put(entry(&k, slot));
        }
        added
    }

    pub fn remove_doc(&mut self, slot: u32, doc: &Document) {
        if self.dormant {
            return;
        }
        let Ok(keys) = self.spec.keys_of(doc) else {
            return;
        };
        for k in keys {
            self.take(&entry(&k, slot));
        }
    }

    /// Scans the index within `bounds` (one normalized interval list per key field, in value
    /// space) and calls `visit(slot)` for each distinct document whose key lies within every
    /// field's bounds, in index order, until it returns false. Keys in the scanned ranges
    /// that fail a later field's bounds are counted as examined but not visited.
    pub fn scan(
        &self,
        bounds: &[Vec<Interval>],
        stats: &mut ScanStats,
        visit: &mut dyn FnMut(u32) -> bool,
    ) {
        if self.scan_point(bounds, stats, visit) {
            return;
        }
        // Oriented bounds: a descending field's intervals inverted and reversed.
        let oriented: Vec<Vec<Interval>> = self
            .spec
            .fields
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let b = bounds
                    .get(i)
                    .cloned()
                    .unwrap_or_else(|| vec![Interval::all()]);
                if f.descending {
                    b.iter().rev().map(Interval::inverted).collect()
                } else {
                    b
                }
            })
            .collect();
        if oriented.iter().any(Vec::is_empty) {
            return;
        }
        // Leading point fields become key prefixes; the next field's intervals bound them.
        let mut prefixes: Vec<Vec<u8>> = vec![Vec::new()];
        let mut depth = 0;
        while depth < oriented.len()
            && oriented[depth].iter().all(Interval::is_point)
            && prefixes.len() * oriented[depth].len() <= MAX_RANGES
        {
            prefixes = prefixes
                .iter()
                .flat_map(|p| {
                    oriented[depth].iter().map(move |i| {
                        let mut k = p.clone();
                        k.extend_from_slice(&i.lo);
                        k
                    })
                })
                .collect();
            depth += 1;
        }
        type Range = (Bound<Vec<u8>>, Bound<Vec<u8>>);
        let mut ranges: Vec<Range> = Vec::new();
        let range_field = (depth < oriented.len()
            && prefixes.len() * oriented[depth].len() <= MAX_RANGES)
            .then_some(depth);
        for p in &prefixes {
            match range_field {
                Some(d) => {
                    for i in &oriented[d] {
                        let mut lo = p.clone();
                        lo.extend_from_slice(&i.lo);
                        let lo = if i.lo_incl {
                            Bound::Included(lo)
                        } else {
                            match prefix_end(&lo) {
                                Some(e) => Bound::Included(e),
                                None => continue,
                            }
                        };
                        let mut hi = p.clone();
                        hi.extend_from_slice(&i.hi);
                        let hi = if i.hi_incl {
                            match prefix_end(&hi) {
                                Some(e) => Bound::Excluded(e),
                                None => Bound::Unbounded,
                            }
                        } else {
                            Bound::Excluded(hi)
                        };
                        ranges.push((lo, hi));
                    }
                }
                None => {
                    let hi = match prefix_end(p) {
                        Some(e) => Bound::Excluded(e),
                        None => Bound::Unbounded,
                    };
                    ranges.push((Bound::Included(p.clone()), hi));
                }
            }
        }
        let checked_from = range_field.map_or(depth, |d| d + 1);
        // A hashed part is put in order by `CollectionShard::prepare` before any scan that
        // needs it; were one scanned without, its entries are ordered for this scan alone.
        let ordered_here;
        let entries = match &self.entries {
            Entries::Ordered(o) => o,
            Entries::Hashed(h) => {
                ordered_here = ordered_entries(h);
                &ordered_here
            }
        };
        let mut seen = hashbrown::HashSet::new();
        for (lo, hi) in ranges {
            let lo_ref = match &lo {
                Bound::Included(v) => Bound::Included(v.as_slice()),
                Bound::Excluded(v) => Bound::Excluded(v.as_slice()),
                Bound::Unbounded => Bound::Unbounded,
            };
            let hi_ref = match &hi {
                Bound::Included(v) => Bound::Included(v.as_slice()),
                Bound::Excluded(v) => Bound::Excluded(v.as_slice()),
                Bound::Unbounded => Bound::Unbounded,
            };
            if let (
                Bound::Included(a) | Bound::Excluded(a),
                Bound::Included(b) | Bound::Excluded(b),
            ) = (&lo_ref, &hi_ref)
            {
                if a > b {
                    continue;
                }
            }
            for e in entries.range::<[u8], _>((lo_ref, hi_ref)) {
                stats.keys_examined += 1;
                if checked_from < oriented.len()
                    && !self.key_within(key_of(e), &oriented, checked_from)
                {
                    continue;
                }
                let slot = slot_of(e);
                if self.multikey && !seen.insert(slot) {
                    continue;
                }
                if !visit(slot) {
                    return;
                }
            }
        }
    }

    /// [`OrderedIndex::scan`] for the commonest lookup, an equality on every key field: the
    /// matching entries are one contiguous run of the set (the key, then every slot), so
    /// there is no range list to build and no key to check. Returns false (having done
    /// nothing) when `bounds` are not one point per field.
    fn scan_point(
        &self,
        bounds: &[Vec<Interval>],
        stats: &mut ScanStats,
        visit: &mut dyn FnMut(u32) -> bool,
    ) -> bool {
        if !self.is_point_scan(bounds) {
            return false;
        }
        let fields = &self.spec.fields;
        let mut lo = Vec::with_capacity(bounds.iter().map(|b| b[0].lo.len()).sum::<usize>());
        for (f, b) in fields.iter().zip(bounds) {
            let start = lo.len();
            lo.extend_from_slice(&b[0].lo);
            // A point inverted is the point's bytes inverted.
            orient(&mut lo[start..], f.descending);
        }
        self.scan_key(&lo, stats, visit);
        true
    }

    /// Whether a scan within `bounds` is an equality on every key field: one key's entries,
    /// which a hashed part serves (any other scan needs [`OrderedIndex::order`] first).
    pub fn is_point_scan(&self, bounds: &[Vec<Interval>]) -> bool {
        bounds.len() == self.spec.fields.len()
            && bounds.iter().all(|b| b.len() == 1 && b[0].is_point())
    }

    /// Visits the slots of the entries whose key is exactly `key` (every field's KeyString,
    /// oriented as stored), in index order, until `visit` returns false: the probe of
    /// [`OrderedIndex::scan_point`], also called with a key made once for every shard.
    pub fn scan_key(&self, key: &[u8], stats: &mut ScanStats, visit: &mut dyn FnMut(u32) -> bool) {
        let entries = match &self.entries {
            Entries::Hashed(h) => {
                h.visit(key, &mut |slot| {
                    stats.keys_examined += 1;
                    visit(slot)
                });
                return;
            }
            Entries::Ordered(o) => o,
        };
        if !self.filter.may_contain(key) {
            return;
        }
        // One descent (to the first entry at or after the key), then forward while entries
        // start with it: half the comparisons of a two-ended range.
        let from = bound_key(key);
        for e in entries.range::<IxKey, _>((Bound::Included(&from), Bound::Unbounded)) {
            if e.len() != key.len() + 4 || !e.starts_with(key) {
                break;
            }
            stats.keys_examined += 1;
            if !visit(slot_of(e)) {
                break;
            }
        }
    }

    /// Whether the key's fields from `from` on lie within their oriented bounds.
    fn key_within(&self, key: &[u8], oriented: &[Vec<Interval>], from: usize) -> bool {
        let mut at = 0;
        for (i, f) in self.spec.fields.iter().enumerate() {
            let Some(len) = key.get(at..).and_then(|rest| value_len(rest, f.descending)) else {
                return true;
            };
            let seg = &key[at..at + len];
            if i >= from && !oriented[i].iter().any(|iv| iv.contains(seg)) {
                return false;
            }
            at += len;
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, oid::ObjectId, DateTime};

    #[test]
    fn entry_order_is_byte_order() {
        let mut rng = crate::util::rng::XorShift::new(7);
        for _ in 0..20_000 {
            let la = rng.below(40) as usize;
            let lb = rng.below(40) as usize;
            // Few distinct byte values, so long common prefixes are frequent.
            let a: Vec<u8> = (0..la).map(|_| rng.below(3) as u8).collect();
            let b: Vec<u8> = (0..lb).map(|_| rng.below(3) as u8).collect();
            assert_eq!(cmp_bytes(&a, &b), a.cmp(&b), "{a:?} {b:?}");
            assert_eq!(bound_key(&a).cmp(&bound_key(&b)), a.cmp(&b));
            // Inverted (descending) keys with a slot: high bytes, inline and boxed alike.
            let inv = |v: &[u8]| -> Vec<u8> { v.iter().map(|x| !*x).collect() };
            let (ea, eb) = (entry(&inv(&a), 5), entry(&inv(&b), 9));
            assert_eq!(ea.cmp(&eb), (*ea).cmp(&*eb), "{a:?} {b:?}");
        }
    }

    fn spec(keys: Document) -> Arc<IndexSpec> {
        let fields = IndexSpec::parse_keys(&keys).expect("keys");
        Arc::new(IndexSpec {
            name: IndexSpec::default_name(&fields),
            fields,
            unique: false,
            expire_after: None,
        })
    }

    fn all_slots(ix: &OrderedIndex, bounds: &[Vec<Interval>]) -> (Vec<u32>, ScanStats) {
        let mut out = Vec::new();
        let mut st = ScanStats::default();
        ix.scan(bounds, &mut st, &mut |s| {
            out.push(s);
            true
        });
        (out, st)
    }

    #[test]
    fn value_len_matches_the_encoding() {
        let vals = [
            Bson::MinKey,
            Bson::MaxKey,
            Bson::Null,
            Bson::Int32(5),
            Bson::Double(f64::NAN),
            Bson::Double(1e300),
            Bson::Double(-2.5),
            Bson::String("a\0b".into()),
            Bson::String(String::new()),
            Bson::Document(doc! {"a": 1, "b": {"c": [1, "x", null]}}),
            Bson::Array(vec![
                Bson::Int32(1),
                Bson::Document(doc! {}),
                Bson::Array(vec![]),
            ]),
            Bson::Binary(bson::Binary {
                subtype: bson::spec::BinarySubtype::Generic,
                bytes: vec![0, 255, 7],
            }),
            Bson::ObjectId(ObjectId::new()),
            Bson::Boolean(true),
            Bson::DateTime(DateTime::from_millis(-5)),
            Bson::Timestamp(bson::Timestamp {
                time: 1,
                increment: 2,
            }),
            Bson::RegularExpression(bson::Regex {
                pattern: "a.*".to_string().try_into().expect("cstr"),
                options: "i".to_string().try_into().expect("cstr"),
            }),
        ];
        for v in &vals {
            let mut e = keys::encode(v);
            let n = e.len();
            e.extend_from_slice(&[9, 9, 9]);
            assert_eq!(value_len(&e, false), Some(n), "{v:?}");
            let inv: Vec<u8> = e.iter().map(|b| !b).collect();
            assert_eq!(value_len(&inv, true), Some(n), "{v:?} inverted");
        }
    }

    #[test]
    fn names_and_specs() {
        let f = IndexSpec::parse_keys(&doc! {"host": 1, "time": -1}).expect("keys");
        assert_eq!(IndexSpec::default_name(&f), "host_1_time_-1");
        assert!(IndexSpec::parse_keys(&doc! {}).is_err());
        assert!(IndexSpec::parse_keys(&doc! {"a": 0}).is_err());
        assert!(IndexSpec::parse_keys(&doc! {"a": "text"}).is_err());
        assert!(IndexSpec::parse_keys(&doc! {"$a": 1}).is_err());
        assert!(IndexSpec::parse_keys(&doc! {"a..b": 1}).is_err());
    }

    #[test]
    fn multikey_and_parallel_arrays() {
        let s = spec(doc! {"a": 1, "b": 1});
        assert_eq!(
            s.keys_of(&doc! {"a": [1, 2, 2], "b": 3})
                .expect("keys")
                .len(),
            2
        );
        assert!(s
            .keys_of(&doc! {"a": [1, 2], "b": [3, 4]})
            .expect_err("parallel")
            .contains("cannot index parallel arrays [a] [b]"));
        let s = spec(doc! {"x.b": 1, "x.c": 1});
        assert_eq!(
            s.keys_of(&doc! {"x": [{"b": 1, "c": 2}, {"b": 3, "c": 4}]})
                .expect("keys")
                .len(),
            4
        );
        // Missing is null, an empty array is undefined (which sorts with null).
        let s = spec(doc! {"a": 1});
        assert_eq!(
            s.keys_of(&doc! {}).expect("keys"),
            vec![keys::encode(&Bson::Null)]
        );
        assert_eq!(
            s.keys_of(&doc! {"a": []}).expect("keys"),
            vec![keys::encode(&Bson::Null)]
        );
    }

    /// A part kept hashed and one put in order answer every scan alike (point scans from the
    /// table, ranges from entries ordered for the scan), through inserts, removes, moves,
    /// arrays and keys long enough to be boxed.
    #[test]
    fn hashed_and_ordered_parts_scan_alike() {
        for keys in [doc! {"v": 1}, doc! {"v": -1}, doc! {"v": 1, "w": 1}] {
            let mut hashed = OrderedIndex::new(spec(keys.clone()));
            let mut ordered = OrderedIndex::new(spec(keys));
            ordered.order();
            assert!(!hashed.is_ordered() && ordered.is_ordered());
            let mut rng = crate::util::rng::XorShift::new(3);
            let value = |n: u64| -> Bson {
                match n % 3 {
                    0 => Bson::Int32(n as i32),
                    1 => Bson::String(format!("user-{n}-{}", "x".repeat((n % 5) as usize * 9))),
                    _ => Bson::Array(vec![Bson::Int32(n as i32), Bson::Int32(n as i32 + 1)]),
                }
            };
            let mut docs: Vec<Option<Document>> = vec![None; 300];
            for round in 0..6_000 {
                let slot = rng.below(300) as u32;
                let v = rng.below(40);
                if let Some(old) = docs[slot as usize].take() {
                    hashed.remove_doc(slot, &old);
                    ordered.remove_doc(slot, &old);
                }
                if rng.below(4) != 0 {
                    let d = doc! {"v": value(v), "w": (v % 2) as i32};
                    hashed.insert_doc(slot, &d);
                    ordered.insert_doc(slot, &d);
                    docs[slot as usize] = Some(d);
                }
                if round % 50 == 0 {
                    assert_eq!(hashed.len(), ordered.len());
                    let q = rng.below(40);
                    let point = vec![Interval::point(&Bson::Int32(q as i32))];
                    let w = vec![Interval::point(&Bson::Int32((q % 2) as i32))];
                    let s = vec![Interval::point(&value(q))];
                    let range = vec![Interval {
                        lo: keys::encode(&Bson::Int32(q as i32)),
                        lo_incl: true,
                        hi: keys::encode(&Bson::Int32(q as i32 + 7)),
                        hi_incl: false,
                    }];
                    for bounds in [
                        vec![point.clone()],
                        vec![s.clone()],
                        vec![range.clone()],
                        vec![point, w.clone()],
                        vec![s, w.clone()],
                        vec![range, w],
                        vec![vec![Interval::all()]],
                    ] {
                        let bounds = &bounds[..bounds.len().min(hashed.spec.fields.len())];
                        assert_eq!(all_slots(&hashed, bounds), all_slots(&ordered, bounds));
                    }
                }
            }
            hashed.order();
            assert_eq!(hashed.len(), ordered.len());
            let all = [vec![Interval::all()]];
            assert_eq!(all_slots(&hashed, &all), all_slots(&ordered, &all));
        }
    }

    #[test]
    fn compound_scan_examines_only_the_bounded_keys() {
        let mut by_host_time = OrderedIndex::new(spec(doc! {"host": 1, "time": 1}));
        let mut by_time_host = OrderedIndex::new(spec(doc! {"time": 1, "host": 1}));
        let hosts = ["a", "b", "c", "d"];
        for i in 0..400u32 {
            let d = doc! {"host": hosts[(i % 4) as usize], "time": DateTime::from_millis(i as i64 * 1000)};
            by_host_time.insert_doc(i, &d);
            by_time_host.insert_doc(i, &d);
        }
        let host = vec![Interval::point(&Bson::String("b".into()))];
        let time = vec![Interval {
            lo: keys::encode(&Bson::DateTime(DateTime::from_millis(100_000))),
            lo_incl: true,
            hi: keys::encode(&Bson::DateTime(DateTime::from_millis(200_000))),
            hi_incl: false,
        }];
        let (a, sa) = all_slots(&by_host_time, &[host.clone(), time.clone()]);
        let (b, sb) = all_slots(&by_time_host, &[time, host]);
        let expected: Vec<u32> = (100..200).filter(|i| i % 4 == 1).collect();
        assert_eq!(a, expected);
        let mut b_sorted = b.clone();
        b_sorted.sort_unstable();
        assert_eq!(b_sorted, expected);
        assert_eq!(sa.keys_examined, 25);
        assert_eq!(sb.keys_examined, 100);
    }

    #[test]
    fn descending_fields_and_exclusive_bounds() {
        let mut ix = OrderedIndex::new(spec(doc! {"v": -1}));
        for i in 0..10u32 {
            ix.insert_doc(i, &doc! {"v": i as i32});
        }
        ix.insert_doc(10, &doc! {"v": "str"});
        ix.insert_doc(11, &doc! {});
        let gt3_lte7 = vec![Interval {
            lo: keys::encode(&Bson::Int32(3)),
            lo_incl: false,
            hi: keys::encode(&Bson::Int32(7)),
            hi_incl: true,
        }];
        let (slots, st) = all_slots(&ix, &[gt3_lte7]);
        assert_eq!(slots, vec![7, 6, 5, 4]);
        assert_eq!(st.keys_examined, 4);
        let (slots, _) = all_slots(&ix, &[vec![Interval::point(&Bson::Null)]]);
        assert_eq!(slots, vec![11]);
        let (slots, _) = all_slots(&ix, &[vec![Interval::all()]]);
        assert_eq!(slots.len(), 12);
        ix.remove_doc(5, &doc! {"v": 5});
        let (slots, _) = all_slots(&ix, &[vec![Interval::point(&Bson::Int32(5))]]);
        assert!(slots.is_empty());
    }

    #[test]
    fn multikey_scans_visit_each_document_once() {
        let mut ix = OrderedIndex::new(spec(doc! {"tags": 1}));
        ix.insert_doc(1, &doc! {"tags": [1, 2, 3]});
        ix.insert_doc(2, &doc! {"tags": [2]});
        let (slots, st) = all_slots(&ix, &[vec![Interval::all()]]);
        assert_eq!(slots, vec![1, 2]);
        assert_eq!(st.keys_examined, 4);
        // Each element is a key of its own: 2 is held by both documents, 3 by one.
        let (slots, _) = all_slots(&ix, &[vec![Interval::point(&Bson::Int32(2))]]);
        assert_eq!(slots, vec![1, 2]);
        let (slots, _) = all_slots(&ix, &[vec![Interval::point(&Bson::Int32(3))]]);
        assert_eq!(slots, vec![1]);
    }

    #[test]
    fn interval_lists_normalize_and_intersect() {
        let p = |i: i32| Interval::point(&Bson::Int32(i));
        let l = normalize(vec![p(3), p(1), p(3), p(2)]);
        assert_eq!(l, vec![p(1), p(2), p(3)]);
        let r = Interval {
            lo: keys::encode(&Bson::Int32(2)),
            lo_incl: true,
            hi: keys::encode(&Bson::Int32(10)),
            hi_incl: false,
        };
        assert_eq!(intersect_lists(&l, &[r]), vec![p(2), p(3)]);
    }
}
