//! One value in Redis's RDB serialization, as DUMP writes it and RESTORE reads it: the type
//! byte, the object, the 2-byte RDB version (little endian) and the CRC64 (Jones polynomial,
//! reflected, little endian) of everything before it.
//!
//! The writer produces what Redis 7.0 writes (RDB version 10): strings with Redis's integer
//! encodings, lists as `QUICKLIST_2` of listpack nodes, sets as `SET_INTSET` or `SET`, hashes
//! and sorted sets as listpacks when small, else `HASH` / `ZSET_2`; every string and blob of
//! more than 20 bytes LZF-compressed as Redis's default `rdbcompression yes` does, with
//! Redis's own compressor, so payloads are byte for byte Redis's where the order of the
//! elements is the same.
//!
//! The reader takes every encoding Redis 7.0 loads (and 7.2's `SET_LISTPACK`): the legacy
//! `LIST`, `ZSET` (text doubles), `HASH_ZIPMAP`, ziplists, intsets, listpacks, quicklists of
//! either, streams (`STREAM_LISTPACKS` 1 to 3: entries, groups, consumers, pending
//! entries), and LZF-compressed strings anywhere a string may be. Nothing in a payload is
//! trusted: every length is checked against the bytes that are there before anything is
//! read or allocated, and every inner structure (listpack, ziplist, intset, zipmap) is fully
//! validated, so a bad payload is an error, never a panic or a huge allocation.

use crate::store::encoding::{limit, LIMITS};
use crate::store::stream::{Consumer, Group, Nack, StreamId, ENTRIES_READ_UNKNOWN};
use crate::store::{End, HashValue, ListValue, SetValue, StreamValue, Value, ZSetValue};
use crate::util::num::parse_i64;
use bytes::Bytes;
use std::borrow::Cow;
use std::sync::atomic::Ordering;

/// The RDB version this writer stamps (Redis 7.0's).
pub const RDB_VERSION: u16 = 10;
/// The newest version the reader accepts (Redis 7.2's, which adds `SET_LISTPACK`).
pub const RDB_VERSION_MAX: u16 = 11;

pub const TYPE_STRING: u8 = 0;
pub const TYPE_LIST: u8 = 1;
pub const TYPE_SET: u8 = 2;
pub const TYPE_ZSET: u8 = 3;
pub const TYPE_HASH: u8 = 4;
pub const TYPE_ZSET_2: u8 = 5;
pub const TYPE_HASH_ZIPMAP: u8 = 9;
pub const TYPE_LIST_ZIPLIST: u8 = 10;
pub const TYPE_SET_INTSET: u8 = 11;
pub const TYPE_ZSET_ZIPLIST: u8 = 12;
pub const TYPE_HASH_ZIPLIST: u8 = 13;
pub const TYPE_LIST_QUICKLIST: u8 = 14;
pub const TYPE_HASH_LISTPACK: u8 = 16;
pub const TYPE_ZSET_LISTPACK: u8 = 17;
pub const TYPE_LIST_QUICKLIST_2: u8 = 18;
pub const TYPE_SET_LISTPACK: u8 = 20;
/// Redis 7.4's hash with field deadlines: the earliest deadline (ms, 8 bytes), the count,
/// then per field its deadline as a length (0 none, else `deadline - min + 1`), field, value.
pub const TYPE_HASH_METADATA: u8 = 24;
pub const TYPE_STREAM_LISTPACKS: u8 = 15;
pub const TYPE_STREAM_LISTPACKS_2: u8 = 19;
pub const TYPE_STREAM_LISTPACKS_3: u8 = 21;

const ENC_INT8: u64 = 0;
const ENC_INT16: u64 = 1;
const ENC_INT32: u64 = 2;
const ENC_LZF: u64 = 3;

const QUICKLIST_PLAIN: u64 = 1;
const QUICKLIST_PACKED: u64 = 2;

// ---------------------------------------------------------------------------------------
// CRC64 (Redis's src/crc64.c: Jones polynomial, reflected in and out, init 0, no xor out)

const CRC64_POLY_REFLECTED: u64 = 0x95ac_9329_ac4b_c9b5;

const fn crc64_table() -> [u64; 256] {
    let mut t = [0u64; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u64;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 == 1 {
                (c >> 1) ^ CRC64_POLY_REFLECTED
            } else {
                c >> 1
            };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
}

static CRC64_TABLE: [u64; 256] = crc64_table();

/// Redis's `crc64(crc, data)`.
pub fn crc64(mut crc: u64, data: &[u8]) -> u64 {
    for &b in data {
        crc = CRC64_TABLE[((crc ^ b as u64) & 0xff) as usize] ^ (crc >> 8);
    }
    crc
}

// ---------------------------------------------------------------------------------------
// The envelope

/// The DUMP payload of a value, strings LZF-compressed (Redis's default
/// `rdbcompression yes`).
pub fn dump(v: &Value) -> Vec<u8> {
    dump_as(v, true)
}

/// [`dump`], compressing strings only when `lzf` (`rdbcompression`).
pub fn dump_as(v: &Value, lzf: bool) -> Vec<u8> {
    let mut out = Vec::new();
    write_object(&mut out, lzf, v);
    out.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = crc64(0, &out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// A value's RDB type byte and body, as a `dump.rdb` holds them (SAVE, BGSAVE); `lzf`:
/// `rdbcompression`.
pub fn write_value(out: &mut Vec<u8>, v: &Value, lzf: bool) {
    write_object(out, lzf, v);
}

/// A string as RDB writes it (integer encodings, LZF above 20 bytes when `lzf`).
pub fn write_string(out: &mut Vec<u8>, s: &[u8], lzf: bool) {
    put_string(out, lzf, s);
}

/// An RDB length.
pub fn write_len(out: &mut Vec<u8>, len: u64) {
    put_len(out, len);
}

/// Redis's `verifyDumpPayload`: a footer of a known version and a matching checksum.
pub fn verify(payload: &[u8]) -> bool {
    if payload.len() < 10 {
        return false;
    }
    let footer = &payload[payload.len() - 10..];
    let ver = u16::from_le_bytes([footer[0], footer[1]]);
    if ver > RDB_VERSION_MAX {
        return false;
    }
    let crc = crc64(0, &payload[..payload.len() - 8]);
    crc.to_le_bytes() == footer[2..10]
}

/// Why a payload did not load (RESTORE answers `ERR Bad data format` for all of them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadData;

type R<T> = Result<T, BadData>;

/// The value a verified payload holds. Empty aggregates, duplicate members and anything
/// malformed are errors.
pub fn load(payload: &[u8]) -> R<Value> {
    load_counted(payload).map(|(v, _)| v)
}

/// [`load`], with the number of encoded blobs it decoded (see `Reader::blobs`).
pub fn load_counted(payload: &[u8]) -> R<(Value, u64)> {
    if payload.len() < 10 {
        return Err(BadData);
    }
    // As Redis's RESTORE, the reader runs over the whole payload, footer included: a value
    // that reads into the footer loads as it does there, and trailing bytes are ignored.
    let mut rd = Reader::new(payload);
    let t = rd.byte()?;
    let v = read_object(&mut rd, t)?;
    Ok((v, rd.blobs))
}

// ---------------------------------------------------------------------------------------
// Writing

fn put_len(out: &mut Vec<u8>, len: u64) {
    if len < 1 << 6 {
        out.push(len as u8);
    } else if len < 1 << 14 {
        out.push(((len >> 8) as u8) | 0x40);
        out.push(len as u8);
    } else if len <= u32::MAX as u64 {
        out.push(0x80);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&len.to_be_bytes());
    }
}

/// Redis's `rdbEncodeInteger`: the 8/16/32-bit string encodings, false if `v` fits none.
fn put_int_enc(out: &mut Vec<u8>, v: i64) -> bool {
    if (-128..=127).contains(&v) {
        out.push(0xc0 | ENC_INT8 as u8);
        out.push(v as i8 as u8);
    } else if (-32768..=32767).contains(&v) {
        out.push(0xc0 | ENC_INT16 as u8);
        out.extend_from_slice(&(v as i16).to_le_bytes());
    } else if (i32::MIN as i64..=i32::MAX as i64).contains(&v) {
        out.push(0xc0 | ENC_INT32 as u8);
        out.extend_from_slice(&(v as i32).to_le_bytes());
    } else {
        return false;
    }
    true
}

/// Redis's `rdbSaveRawString`: a small integer in an integer encoding, more than 20 bytes
/// LZF-compressed when that saves 4 bytes or more and `lzf` (`rdbcompression yes`, its
/// default), anything else verbatim.
fn put_string(out: &mut Vec<u8>, lzf: bool, s: &[u8]) {
    if s.len() <= 11 {
        if let Some(v) = parse_i64(s) {
            if put_int_enc(out, v) {
                return;
            }
        }
    }
    if lzf && s.len() > 20 {
        if let Some(c) = lzf_compress(s, s.len() - 4) {
            out.push(0xc0 | ENC_LZF as u8);
            put_len(out, c.len() as u64);
            put_len(out, s.len() as u64);
            out.extend_from_slice(&c);
            return;
        }
    }
    put_len(out, s.len() as u64);
    out.extend_from_slice(s);
}

const LZF_HLOG: u32 = 16;
const LZF_MAX_LIT: usize = 1 << 5;
const LZF_MAX_OFF: usize = 1 << 13;
const LZF_MAX_REF: usize = (1 << 8) + (1 << 3);

fn lzf_idx(h: u32) -> usize {
    ((h >> (3 * 8 - LZF_HLOG)).wrapping_sub(h.wrapping_mul(5)) & ((1 << LZF_HLOG) - 1)) as usize
}

thread_local! {
    /// LZF's hash table, reused: each slot holds (call number << 32) | position, so a slot
    /// written by an earlier call reads as empty without clearing 64K slots per string.
    static LZF_TABLE: std::cell::RefCell<(u32, Vec<u64>)> =
        const { std::cell::RefCell::new((0, Vec::new())) };
}

/// Redis's `lzf_compress` (lzf_c.c with its settings: HLOG 16, VERY_FAST), step for step so
/// the output is the same bytes; `None` when the result would not fit in `out_len` bytes.
/// (Redis leaves the hash table uninitialized; this one starts empty.)
pub fn lzf_compress(input: &[u8], out_len: usize) -> Option<Vec<u8>> {
    let n = input.len();
    if n < 2 || out_len == 0 {
        return None;
    }
    LZF_TABLE.with(|t| {
        let mut t = t.borrow_mut();
        let (gen, table) = &mut *t;
        if table.is_empty() {
            table.resize(1 << LZF_HLOG, 0);
        }
        *gen = gen.wrapping_add(1);
        if *gen == 0 {
            table.iter_mut().for_each(|s| *s = 0);
            *gen = 1;
        }
        let g = (*gen as u64) << 32;
        let get = |table: &Vec<u64>, i: usize| -> Option<usize> {
            let v = table[i];
            (v >> 32 == g >> 32).then_some((v & 0xffff_ffff) as usize)
        };
        let mut out = vec![0u8; out_len + 4];
        let mut op = 1usize;
        let mut lit = 0usize;
        let mut ip = 0usize;
        let mut hval: u32 = ((input[0] as u32) << 8) | input[1] as u32;
        while ip + 2 < n {
            hval = (hval << 8) | input[ip + 2] as u32;
            let slot = lzf_idx(hval);
            let r = get(table, slot);
            table[slot] = g | ip as u64;
            let found = r.filter(|&r| {
                r < ip
                    && ip - r - 1 < LZF_MAX_OFF
                    && r > 0
                    && input[r + 2] == input[ip + 2]
                    && input[r] == input[ip]
                    && input[r + 1] == input[ip + 1]
            });
            if let Some(r) = found {
                let off = ip - r - 1;
                let mut len = 2usize;
                let maxlen = (n - ip - len).min(LZF_MAX_REF);
                if op + 3 + 1 >= out_len && op - (lit == 0) as usize + 3 + 1 >= out_len {
                    return None;
                }
                out[op - lit - 1] = (lit as u8).wrapping_sub(1);
                op -= (lit == 0) as usize;
                'm: {
                    if maxlen > 16 {
                        for _ in 0..16 {
                            len += 1;
                            if input[r + len] != input[ip + len] {
                                break 'm;
                            }
                        }
                    }
                    loop {
                        len += 1;
                        if !(len < maxlen && input[r + len] == input[ip + len]) {
                            break;
                        }
                    }
                }
                len -= 2;
                ip += 1;
                if len < 7 {
                    out[op] = ((off >> 8) + (len << 5)) as u8;
                    op += 1;
                } else {
                    out[op] = ((off >> 8) + (7 << 5)) as u8;
                    out[op + 1] = (len - 7) as u8;
                    op += 2;
                }
                out[op] = off as u8;
                op += 1;
                lit = 0;
                op += 1;
                ip += len + 1;
                if ip + 2 >= n {
                    break;
                }
                ip -= 2;
                hval = ((input[ip] as u32) << 8) | input[ip + 1] as u32;
                hval = (hval << 8) | input[ip + 2] as u32;
                table[lzf_idx(hval)] = g | ip as u64;
                ip += 1;
                hval = (hval << 8) | input[ip + 2] as u32;
                table[lzf_idx(hval)] = g | ip as u64;
                ip += 1;
            } else {
                if op >= out_len {
                    return None;
                }
                lit += 1;
                out[op] = input[ip];
                op += 1;
                ip += 1;
                if lit == LZF_MAX_LIT {
                    out[op - lit - 1] = (lit - 1) as u8;
                    lit = 0;
                    op += 1;
                }
            }
        }
        if op + 3 > out_len {
            return None;
        }
        while ip < n {
            lit += 1;
            out[op] = input[ip];
            op += 1;
            ip += 1;
            if lit == LZF_MAX_LIT {
                out[op - lit - 1] = (lit - 1) as u8;
                lit = 0;
                op += 1;
            }
        }
        out[op - lit - 1] = (lit as u8).wrapping_sub(1);
        op -= (lit == 0) as usize;
        out.truncate(op);
        Some(out)
    })
}

/// Redis's `rdbSaveLongLongAsStringObject`.
fn put_int_string(out: &mut Vec<u8>, v: i64) {
    if !put_int_enc(out, v) {
        let mut b = itoa::Buffer::new();
        let s = b.format(v);
        put_len(out, s.len() as u64);
        out.extend_from_slice(s.as_bytes());
    }
}

/// A Redis listpack being built (header, entries, terminator).
struct LpWriter {
    buf: Vec<u8>,
    count: usize,
}

fn lp_backlen(out: &mut Vec<u8>, l: u64) {
    if l <= 127 {
        out.push(l as u8);
    } else if l < 16383 {
        out.extend_from_slice(&[(l >> 7) as u8, (l & 127) as u8 | 128]);
    } else if l < 2097151 {
        out.extend_from_slice(&[
            (l >> 14) as u8,
            ((l >> 7) & 127) as u8 | 128,
            (l & 127) as u8 | 128,
        ]);
    } else if l < 268435455 {
        out.extend_from_slice(&[
            (l >> 21) as u8,
            ((l >> 14) & 127) as u8 | 128,
            ((l >> 7) & 127) as u8 | 128,
            (l & 127) as u8 | 128,
        ]);
    } else {
        out.extend_from_slice(&[
            (l >> 28) as u8,
            ((l >> 21) & 127) as u8 | 128,
            ((l >> 14) & 127) as u8 | 128,
            ((l >> 7) & 127) as u8 | 128,
            (l & 127) as u8 | 128,
        ]);
    }
}

impl LpWriter {
    fn new() -> LpWriter {
        LpWriter {
            buf: vec![0; 6],
            count: 0,
        }
    }

    fn push(&mut self, s: &[u8]) {
        let start = self.buf.len();
        let b = &mut self.buf;
        match parse_i64(s) {
            Some(v) if (0..=127).contains(&v) => b.push(v as u8),
            Some(v) if (-4096..=4095).contains(&v) => {
                let u = if v < 0 { (1i64 << 13) + v } else { v } as u64;
                b.extend_from_slice(&[(u >> 8) as u8 | 0xc0, u as u8]);
            }
            Some(v) if (-32768..=32767).contains(&v) => {
                b.push(0xf1);
                b.extend_from_slice(&(v as i16).to_le_bytes());
            }
            Some(v) if (-8388608..=8388607).contains(&v) => {
                b.push(0xf2);
                b.extend_from_slice(&(v as i32).to_le_bytes()[..3]);
            }
            Some(v) if (i32::MIN as i64..=i32::MAX as i64).contains(&v) => {
                b.push(0xf3);
                b.extend_from_slice(&(v as i32).to_le_bytes());
            }
            Some(v) => {
                b.push(0xf4);
                b.extend_from_slice(&v.to_le_bytes());
            }
            None if s.len() < 64 => {
                b.push(s.len() as u8 | 0x80);
                b.extend_from_slice(s);
            }
            None if s.len() < 4096 => {
                b.extend_from_slice(&[(s.len() >> 8) as u8 | 0xe0, s.len() as u8]);
                b.extend_from_slice(s);
            }
            None => {
                b.push(0xf0);
                b.extend_from_slice(&(s.len() as u32).to_le_bytes());
                b.extend_from_slice(s);
            }
        }
        let l = (self.buf.len() - start) as u64;
        lp_backlen(&mut self.buf, l);
        self.count += 1;
    }

    fn push_int(&mut self, v: i64) {
        self.push(itoa::Buffer::new().format(v).as_bytes());
    }

    fn finish(mut self) -> Vec<u8> {
        self.buf.push(0xff);
        let total = self.buf.len() as u32;
        self.buf[0..4].copy_from_slice(&total.to_le_bytes());
        let n = self.count.min(u16::MAX as usize) as u16;
        self.buf[4..6].copy_from_slice(&n.to_le_bytes());
        self.buf
    }
}

/// Redis's `d2string` (how a sorted-set listpack stores a score): integers in full, other
/// values as `%.17g`.
fn score_text(d: f64) -> String {
    if d.is_finite() && d != 0.0 && d.fract() == 0.0 && d.abs() <= (1u64 << 62) as f64 {
        return itoa::Buffer::new().format(d as i64).to_string();
    }
    crate::util::num::format_g17(d)
}

/// Redis 7.0's `_quicklistNodeAllowInsert`: may a node of `bytes` listpack bytes and `count`
/// entries take one more element of `len` bytes under `list-max-listpack-size`?
fn node_fits(bytes: usize, count: usize, len: usize) -> bool {
    if count == 0 {
        return true;
    }
    let fill = LIMITS.list_size.load(Ordering::Relaxed).clamp(-5, 1 << 15);
    let new_sz = bytes + len + 8;
    if fill < 0 {
        new_sz <= 4096usize << (fill.unsigned_abs() - 1)
    } else {
        new_sz <= 8192 && (count as i64) < fill
    }
}

fn write_object(out: &mut Vec<u8>, lzf: bool, v: &Value) {
    match v {
        Value::Stream(st) => write_stream(out, lzf, st),
        Value::Str(b) | Value::Raw(b) => {
            out.push(TYPE_STRING);
            put_string(out, lzf, b);
        }
        Value::Int(i) => {
            out.push(TYPE_STRING);
            put_int_string(out, *i);
        }
        Value::List(l) => {
            out.push(TYPE_LIST_QUICKLIST_2);
            let mut nodes: Vec<Vec<u8>> = Vec::new();
            let mut cur = LpWriter::new();
            for e in l.iter() {
                if !node_fits(cur.buf.len() + 1, cur.count, e.len()) {
                    nodes.push(std::mem::replace(&mut cur, LpWriter::new()).finish());
                }
                cur.push(&e);
            }
            if cur.count > 0 {
                nodes.push(cur.finish());
            }
            put_len(out, nodes.len() as u64);
            for n in &nodes {
                put_len(out, QUICKLIST_PACKED);
                put_string(out, lzf, n);
            }
        }
        Value::Set(s) if s.encoding() == "intset" => {
            out.push(TYPE_SET_INTSET);
            let ints: Vec<i64> = s.iter().filter_map(|m| parse_i64(&m)).collect();
            let width: usize = if ints.iter().all(|&i| i16::try_from(i).is_ok()) {
                2
            } else if ints.iter().all(|&i| i32::try_from(i).is_ok()) {
                4
            } else {
                8
            };
            let mut blob = Vec::with_capacity(8 + ints.len() * width);
            blob.extend_from_slice(&(width as u32).to_le_bytes());
            blob.extend_from_slice(&(ints.len() as u32).to_le_bytes());
            for i in &ints {
                blob.extend_from_slice(&i.to_le_bytes()[..width]);
            }
            put_string(out, lzf, &blob);
        }
        Value::Set(s) => {
            out.push(TYPE_SET);
            put_len(out, s.len() as u64);
            for m in s.iter() {
                put_string(out, lzf, &m);
            }
        }
        Value::Hash(h) if h.has_deadlines() => {
            // Redis 7.4 writes this layout for any hash with a deadline (its listpackex
            // layout, type 25, is not written here; both load in 7.4).
            let ds = h.deadlines();
            let min = ds.iter().map(|&(_, d)| d).min().unwrap_or(0);
            let ttl = h.deadlines_by_position();
            out.push(TYPE_HASH_METADATA);
            out.extend_from_slice(&(min as u64).to_le_bytes());
            put_len(out, h.len() as u64);
            for (i, (f, val)) in h.iter().enumerate() {
                let d = ttl.get(i).copied().unwrap_or(0);
                put_len(out, if d == 0 { 0 } else { (d - min + 1) as u64 });
                put_string(out, lzf, f);
                put_string(out, lzf, val);
            }
        }
        Value::Hash(h) => {
            if v.encoding() == "listpack" {
                out.push(TYPE_HASH_LISTPACK);
                let mut lp = LpWriter::new();
                for (f, val) in h.iter() {
                    lp.push(f);
                    lp.push(val);
                }
                let lp = lp.finish();
                put_string(out, lzf, &lp);
            } else {
                out.push(TYPE_HASH);
                put_len(out, h.len() as u64);
                for (f, val) in h.iter() {
                    put_string(out, lzf, f);
                    put_string(out, lzf, val);
                }
            }
        }
        Value::ZSet(z) => {
            if z.encoding() == "listpack" {
                out.push(TYPE_ZSET_LISTPACK);
                let mut lp = LpWriter::new();
                for (m, s) in z.iter() {
                    lp.push(m);
                    lp.push(score_text(s).as_bytes());
                }
                let lp = lp.finish();
                put_string(out, lzf, &lp);
            } else {
                out.push(TYPE_ZSET_2);
                put_len(out, z.len() as u64);
                let all: Vec<(&[u8], f64)> = z.iter().collect();
                for (m, s) in all.into_iter().rev() {
                    put_string(out, lzf, m);
                    out.extend_from_slice(&s.to_le_bytes());
                }
            }
        }
    }
}

/// Redis 7.0's `RDB_TYPE_STREAM_LISTPACKS_2` (rdb.c `rdbSaveObject`): the nodes, each its
/// master ID (16 bytes, big endian) and a listpack in `t_stream.c`'s layout, then length,
/// last ID, first ID, max deleted ID, entries added, and each group with its last ID,
/// entries read, pending entries (ID, delivery time, count) and consumers (name, seen time,
/// the IDs they own). The nodes are rebuilt from the entries (this server's blocks are not
/// Redis's listpacks) under `stream-node-max-bytes`/`-entries` as `streamAppendItem` cuts
/// them; deleted entries, which Redis keeps as flagged tombstones, are simply absent, so
/// every node's deleted count is 0.
fn write_stream(out: &mut Vec<u8>, lzf: bool, s: &StreamValue) {
    const FLAG_SAMEFIELDS: i64 = 2;
    let max_entries = limit(&LIMITS.stream_node_entries);
    let max_bytes = match limit(&LIMITS.stream_node_bytes) {
        0 => usize::MAX >> 1,
        b => b.min(1 << 30),
    };
    struct Node {
        master: StreamId,
        fields: Vec<Vec<u8>>,
        lp: LpWriter,
        count: usize,
    }
    /// The master entry (live count, deleted count, master fields, a 0 terminator) and
    /// then the entries, which were written after the 6 header bytes of `n.lp`.
    fn close(nodes: &mut Vec<(StreamId, Vec<u8>)>, n: Node) {
        let mut lp = LpWriter::new();
        lp.push_int(n.count as i64);
        lp.push_int(0);
        lp.push_int(n.fields.len() as i64);
        for f in &n.fields {
            lp.push(f);
        }
        lp.push_int(0);
        lp.buf.extend_from_slice(&n.lp.buf[6..]);
        lp.count += n.lp.count;
        nodes.push((n.master, lp.finish()));
    }
    let mut nodes: Vec<(StreamId, Vec<u8>)> = Vec::new();
    let mut cur: Option<Node> = None;
    s.visit_range(StreamId::MIN, StreamId::MAX, 0, |id, fv| {
        let raw: usize = fv.iter().map(|x| x.len()).sum();
        let full = cur.as_ref().is_some_and(|n| {
            n.lp.buf.len() + raw >= max_bytes || (max_entries > 0 && n.count >= max_entries)
        });
        if full {
            if let Some(n) = cur.take() {
                close(&mut nodes, n);
            }
        }
        let n = cur.get_or_insert_with(|| Node {
            master: id,
            fields: fv.iter().step_by(2).map(|f| f.to_vec()).collect(),
            lp: LpWriter::new(),
            count: 0,
        });
        let nf = fv.len() / 2;
        let same = nf == n.fields.len()
            && fv
                .iter()
                .step_by(2)
                .zip(&n.fields)
                .all(|(a, b)| *a == &b[..]);
        n.lp.push_int(if same { FLAG_SAMEFIELDS } else { 0 });
        n.lp.push_int(id.ms.wrapping_sub(n.master.ms) as i64);
        n.lp.push_int(id.seq.wrapping_sub(n.master.seq) as i64);
        if same {
            for v in fv.iter().skip(1).step_by(2) {
                n.lp.push(v);
            }
            n.lp.push_int(3 + nf as i64);
        } else {
            n.lp.push_int(nf as i64);
            for x in fv {
                n.lp.push(x);
            }
            n.lp.push_int(4 + 2 * nf as i64);
        }
        n.count += 1;
    });
    if let Some(n) = cur.take() {
        close(&mut nodes, n);
    }
    out.push(TYPE_STREAM_LISTPACKS_2);
    put_len(out, nodes.len() as u64);
    for (master, lp) in &nodes {
        let mut key = [0u8; 16];
        key[..8].copy_from_slice(&master.ms.to_be_bytes());
        key[8..].copy_from_slice(&master.seq.to_be_bytes());
        put_string(out, lzf, &key);
        put_string(out, lzf, lp);
    }
    put_len(out, s.len());
    let first = if s.has_entries() {
        s.first_id()
    } else {
        StreamId::MIN
    };
    for id in [s.last_id, first, s.max_deleted_id] {
        put_len(out, id.ms);
        put_len(out, id.seq);
    }
    put_len(out, s.entries_added);
    put_len(out, s.groups.len() as u64);
    let raw_id = |out: &mut Vec<u8>, id: &StreamId| {
        out.extend_from_slice(&id.ms.to_be_bytes());
        out.extend_from_slice(&id.seq.to_be_bytes());
    };
    for (name, g) in &s.groups {
        put_string(out, lzf, name);
        put_len(out, g.last_id.ms);
        put_len(out, g.last_id.seq);
        // Redis writes its -1 ("unknown") as the 64-bit length 2^64 - 1.
        put_len(out, g.entries_read as u64);
        put_len(out, g.pel.len() as u64);
        for (id, nack) in &g.pel {
            raw_id(out, id);
            out.extend_from_slice(&nack.delivery_time.to_le_bytes());
            put_len(out, nack.delivery_count);
        }
        put_len(out, g.consumers.len() as u64);
        for (cname, c) in &g.consumers {
            put_string(out, lzf, cname);
            out.extend_from_slice(&c.seen_time.to_le_bytes());
            put_len(out, c.pel.len() as u64);
            for id in &c.pel {
                raw_id(out, id);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Reading

/// A cursor over RDB bytes (one DUMP payload, or a whole file for `rdb_file`).
pub(crate) struct Reader<'a> {
    b: &'a [u8],
    /// The offset of the next byte to read.
    pub(crate) at: usize,
    /// Set when a read wanted more bytes than there are: a truncated input rather than a
    /// malformed one.
    pub(crate) short: bool,
    /// Set when the value just read, complete, turned out to be an empty aggregate (Redis
    /// skips such keys when loading a file, and RESTORE refuses them).
    pub(crate) empty: bool,
    /// Listpacks and intsets decoded so far. Every blob is checked entry by entry; these are
    /// the ones Redis 7.0 counts in INFO's `dump_payload_sanitizations` when it checks them
    /// deeply (its legacy ziplists and zipmaps are not counted there).
    pub(crate) blobs: u64,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(b: &'a [u8]) -> Reader<'a> {
        Reader {
            b,
            at: 0,
            short: false,
            empty: false,
            blobs: 0,
        }
    }

    /// The error for an empty aggregate, read to its end.
    fn empty_value<T>(&mut self) -> R<T> {
        self.empty = true;
        Err(BadData)
    }

    pub(crate) fn remaining(&self) -> usize {
        self.b.len() - self.at
    }

    pub(crate) fn byte(&mut self) -> R<u8> {
        let Some(&v) = self.b.get(self.at) else {
            self.short = true;
            return Err(BadData);
        };
        self.at += 1;
        Ok(v)
    }

    pub(crate) fn take(&mut self, n: u64) -> R<&'a [u8]> {
        if n > self.remaining() as u64 {
            self.short = true;
            return Err(BadData);
        }
        let s = &self.b[self.at..self.at + n as usize];
        self.at += n as usize;
        Ok(s)
    }

    /// Redis's `rdbLoadLenByRef`: (value, is a special string encoding).
    fn len_enc(&mut self) -> R<(u64, bool)> {
        let b = self.byte()?;
        Ok(match b >> 6 {
            3 => ((b & 0x3f) as u64, true),
            0 => ((b & 0x3f) as u64, false),
            1 => ((((b & 0x3f) as u64) << 8) | self.byte()? as u64, false),
            _ if b == 0x80 => {
                let s = self.take(4)?;
                (u32::from_be_bytes([s[0], s[1], s[2], s[3]]) as u64, false)
            }
            _ if b == 0x81 => {
                let s = self.take(8)?;
                let mut a = [0u8; 8];
                a.copy_from_slice(s);
                (u64::from_be_bytes(a), false)
            }
            _ => return Err(BadData),
        })
    }

    /// A length (Redis's `rdbLoadLen(rdb, NULL)`).
    pub(crate) fn len(&mut self) -> R<u64> {
        Ok(self.len_enc()?.0)
    }

    /// A string in any of its encodings.
    pub(crate) fn string(&mut self) -> R<Cow<'a, [u8]>> {
        let (n, enc) = self.len_enc()?;
        if !enc {
            return Ok(Cow::Borrowed(self.take(n)?));
        }
        let v: i64 = match n {
            ENC_INT8 => self.byte()? as i8 as i64,
            ENC_INT16 => {
                let s = self.take(2)?;
                i16::from_le_bytes([s[0], s[1]]) as i64
            }
            ENC_INT32 => {
                let s = self.take(4)?;
                i32::from_le_bytes([s[0], s[1], s[2], s[3]]) as i64
            }
            ENC_LZF => {
                let clen = self.len()?;
                let len = self.len()?;
                let c = self.take(clen)?;
                return lzf_decompress(c, len).map(Cow::Owned);
            }
            _ => return Err(BadData),
        };
        Ok(Cow::Owned(
            itoa::Buffer::new().format(v).as_bytes().to_vec(),
        ))
    }

    /// 8 bytes, little endian (Redis's `rdbLoadMillisecondTime` for RDB 9 and later, and
    /// what x86 Redis wrote before).
    pub(crate) fn u64_le(&mut self) -> R<u64> {
        let s = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(s);
        Ok(u64::from_le_bytes(a))
    }

    /// A stream ID as Redis writes it raw: ms and seq, 8 bytes each, big endian.
    fn raw_stream_id(&mut self) -> R<StreamId> {
        let s = self.take(16)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(&s[..8]);
        let ms = u64::from_be_bytes(a);
        a.copy_from_slice(&s[8..]);
        Ok(StreamId::new(ms, u64::from_be_bytes(a)))
    }

    fn binary_double(&mut self) -> R<f64> {
        let s = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(s);
        Ok(f64::from_le_bytes(a))
    }

    /// Redis's `rdbLoadDoubleValue` (the text doubles of the old `ZSET` type).
    fn text_double(&mut self) -> R<f64> {
        match self.byte()? {
            255 => Ok(f64::NEG_INFINITY),
            254 => Ok(f64::INFINITY),
            253 => Ok(f64::NAN),
            n => {
                let s = self.take(n as u64)?;
                parse_score(s)
            }
        }
    }
}

/// A text double of the old `ZSET` type, as Redis's `sscanf("%lg")` reads it: the longest
/// prefix that is a number, an error when there is none.
fn parse_score(s: &[u8]) -> R<f64> {
    float_prefix(s).ok_or(BadData)
}

fn float_prefix(s: &[u8]) -> Option<f64> {
    let start = s
        .iter()
        .position(|c| !c.is_ascii_whitespace())
        .unwrap_or(s.len());
    let s = &s[start..];
    (1..=s.len()).rev().find_map(|end| {
        std::str::from_utf8(&s[..end])
            .ok()
            .and_then(|t| t.parse::<f64>().ok())
    })
}

/// Redis's `zzlStrtod`: C's strtod on (up to 127 bytes of) a listpack score, so the longest
/// prefix that reads as a number counts and text that does not is 0.
fn strtod_prefix(s: &[u8]) -> f64 {
    float_prefix(&s[..s.len().min(127)]).unwrap_or(0.0)
}

/// LZF decompression (Redis's lzf_d.c) into exactly `len` bytes.
pub fn lzf_decompress(input: &[u8], len: u64) -> R<Vec<u8>> {
    // A 3-byte back-reference yields at most 264 bytes, so no input expands more than 88
    // times: a claimed length beyond that is corrupt. The output grows with what the input
    // actually produces rather than being allocated up front from the claim.
    if len == 0 {
        // Redis's lzf_decompress answers 0 for any failure, which a claimed length of 0
        // takes for success: an empty string.
        return Ok(Vec::new());
    }
    if len > (input.len() as u64).saturating_mul(88) {
        return Err(BadData);
    }
    let len = len as usize;
    let mut out: Vec<u8> = Vec::with_capacity(len.min(input.len().saturating_mul(4)));
    let mut i = 0;
    while i < input.len() {
        let ctrl = input[i] as usize;
        i += 1;
        if ctrl < 32 {
            let n = ctrl + 1;
            if i + n > input.len() || out.len() + n > len {
                return Err(BadData);
            }
            out.extend_from_slice(&input[i..i + n]);
            i += n;
        } else {
            let mut n = ctrl >> 5;
            if n == 7 {
                n += *input.get(i).ok_or(BadData)? as usize;
                i += 1;
            }
            let back = ((ctrl & 0x1f) << 8) + *input.get(i).ok_or(BadData)? as usize + 1;
            i += 1;
            n += 2;
            if back > out.len() || out.len() + n > len {
                return Err(BadData);
            }
            let from = out.len() - back;
            for k in 0..n {
                let c = out[from + k];
                out.push(c);
            }
        }
    }
    if out.len() != len {
        return Err(BadData);
    }
    Ok(out)
}

/// The entries of a Redis listpack, fully validated (Redis's `lpValidateIntegrity` with
/// deep checks).
fn listpack_entries(lp: &[u8]) -> R<Vec<Vec<u8>>> {
    if lp.len() < 7 {
        return Err(BadData);
    }
    let total = u32::from_le_bytes([lp[0], lp[1], lp[2], lp[3]]) as usize;
    if total != lp.len() || lp[lp.len() - 1] != 0xff {
        return Err(BadData);
    }
    let numele = u16::from_le_bytes([lp[4], lp[5]]);
    let end = lp.len() - 1;
    let mut out = Vec::new();
    let mut p = 6;
    while p < end {
        let b = lp[p];
        let need = |n: usize| -> R<&[u8]> {
            if p + n > end {
                Err(BadData)
            } else {
                Ok(&lp[p..p + n])
            }
        };
        let (entry, head): (Vec<u8>, usize) = if b & 0x80 == 0 {
            (itoa_bytes((b & 0x7f) as i64), 1)
        } else if b & 0xc0 == 0x80 {
            let n = (b & 0x3f) as usize;
            let s = need(1 + n)?;
            (s[1..].to_vec(), 1 + n)
        } else if b & 0xe0 == 0xc0 {
            let s = need(2)?;
            let u = (((s[0] & 0x1f) as i64) << 8) | s[1] as i64;
            let v = if u >= 1 << 12 { u - (1 << 13) } else { u };
            (itoa_bytes(v), 2)
        } else if b & 0xf0 == 0xe0 {
            let s = need(2)?;
            let n = (((s[0] & 0x0f) as usize) << 8) | s[1] as usize;
            let s = need(2 + n)?;
            (s[2..].to_vec(), 2 + n)
        } else {
            match b {
                0xf0 => {
                    let s = need(5)?;
                    let n = u32::from_le_bytes([s[1], s[2], s[3], s[4]]) as usize;
                    if n > end - p {
                        return Err(BadData);
                    }
                    let s = need(5 + n)?;
                    (s[5..].to_vec(), 5 + n)
                }
                0xf1 => {
                    let s = need(3)?;
                    (itoa_bytes(i16::from_le_bytes([s[1], s[2]]) as i64), 3)
                }
                0xf2 => {
                    let s = need(4)?;
                    let v = i32::from_le_bytes([0, s[1], s[2], s[3]]) >> 8;
                    (itoa_bytes(v as i64), 4)
                }
                0xf3 => {
                    let s = need(5)?;
                    let v = i32::from_le_bytes([s[1], s[2], s[3], s[4]]);
                    (itoa_bytes(v as i64), 5)
                }
                0xf4 => {
                    let s = need(9)?;
                    let mut a = [0u8; 8];
                    a.copy_from_slice(&s[1..9]);
                    (itoa_bytes(i64::from_le_bytes(a)), 9)
                }
                _ => return Err(BadData),
            }
        };
        // The back-length must follow and agree.
        let mut bl = Vec::with_capacity(5);
        lp_backlen(&mut bl, head as u64);
        let at = p + head;
        if at + bl.len() > end || lp[at..at + bl.len()] != bl[..] {
            return Err(BadData);
        }
        p = at + bl.len();
        out.push(entry);
    }
    if p != end {
        return Err(BadData);
    }
    if numele != u16::MAX && numele as usize != out.len() {
        return Err(BadData);
    }
    Ok(out)
}

fn itoa_bytes(v: i64) -> Vec<u8> {
    itoa::Buffer::new().format(v).as_bytes().to_vec()
}

/// The entries of a Redis ziplist, fully validated (Redis's `ziplistValidateIntegrity`).
fn ziplist_entries(zl: &[u8]) -> R<Vec<Vec<u8>>> {
    if zl.len() < 11 {
        return Err(BadData);
    }
    let total = u32::from_le_bytes([zl[0], zl[1], zl[2], zl[3]]) as usize;
    let tail = u32::from_le_bytes([zl[4], zl[5], zl[6], zl[7]]) as usize;
    let count = u16::from_le_bytes([zl[8], zl[9]]);
    if total != zl.len() || zl[zl.len() - 1] != 0xff {
        return Err(BadData);
    }
    let end = zl.len() - 1;
    let mut out = Vec::new();
    let mut p = 10;
    let mut prev_size = 0usize;
    let mut last_start = 10;
    while p < end {
        let start = p;
        // prevlen
        let (prevlen, pl) = if zl[p] < 254 {
            (zl[p] as usize, 1)
        } else {
            if p + 5 > end {
                return Err(BadData);
            }
            (
                u32::from_le_bytes([zl[p + 1], zl[p + 2], zl[p + 3], zl[p + 4]]) as usize,
                5,
            )
        };
        if prevlen != prev_size {
            return Err(BadData);
        }
        p += pl;
        if p >= end {
            return Err(BadData);
        }
        let enc = zl[p];
        let need = |q: usize, n: usize| -> R<&[u8]> {
            if q + n > end {
                Err(BadData)
            } else {
                Ok(&zl[q..q + n])
            }
        };
        let (entry, used): (Vec<u8>, usize) = match enc >> 6 {
            0 => {
                let n = (enc & 0x3f) as usize;
                (need(p + 1, n)?.to_vec(), 1 + n)
            }
            1 => {
                let s = need(p, 2)?;
                let n = (((s[0] & 0x3f) as usize) << 8) | s[1] as usize;
                (need(p + 2, n)?.to_vec(), 2 + n)
            }
            2 => {
                if enc != 0x80 {
                    return Err(BadData);
                }
                let s = need(p + 1, 4)?;
                let n = u32::from_be_bytes([s[0], s[1], s[2], s[3]]) as usize;
                if n > end {
                    return Err(BadData);
                }
                (need(p + 5, n)?.to_vec(), 5 + n)
            }
            _ => match enc {
                0xc0 => {
                    let s = need(p + 1, 2)?;
                    (itoa_bytes(i16::from_le_bytes([s[0], s[1]]) as i64), 3)
                }
                0xd0 => {
                    let s = need(p + 1, 4)?;
                    (
                        itoa_bytes(i32::from_le_bytes([s[0], s[1], s[2], s[3]]) as i64),
                        5,
                    )
                }
                0xe0 => {
                    let s = need(p + 1, 8)?;
                    let mut a = [0u8; 8];
                    a.copy_from_slice(s);
                    (itoa_bytes(i64::from_le_bytes(a)), 9)
                }
                0xf0 => {
                    let s = need(p + 1, 3)?;
                    let v = i32::from_le_bytes([0, s[0], s[1], s[2]]) >> 8;
                    (itoa_bytes(v as i64), 4)
                }
                0xfe => {
                    let s = need(p + 1, 1)?;
                    (itoa_bytes(s[0] as i8 as i64), 2)
                }
                0xf1..=0xfd => (itoa_bytes((enc & 0x0f) as i64 - 1), 1),
                _ => return Err(BadData),
            },
        };
        p += used;
        if p > end {
            return Err(BadData);
        }
        prev_size = p - start;
        last_start = start;
        out.push(entry);
    }
    if p != end {
        return Err(BadData);
    }
    if !out.is_empty() && tail != last_start {
        return Err(BadData);
    }
    if count != u16::MAX && count as usize != out.len() {
        return Err(BadData);
    }
    Ok(out)
}

/// The members of a Redis intset (Redis's `intsetValidateIntegrity` with deep checks).
fn intset_members(b: &[u8]) -> R<Vec<i64>> {
    if b.len() < 8 {
        return Err(BadData);
    }
    let width = u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize;
    let count = u32::from_le_bytes([b[4], b[5], b[6], b[7]]) as u64;
    if !matches!(width, 2 | 4 | 8) || count == 0 {
        return Err(BadData);
    }
    if 8 + count * width as u64 != b.len() as u64 {
        return Err(BadData);
    }
    let mut out: Vec<i64> = Vec::with_capacity(count as usize);
    for c in b[8..].chunks_exact(width) {
        let v = match width {
            2 => i16::from_le_bytes([c[0], c[1]]) as i64,
            4 => i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as i64,
            _ => {
                let mut a = [0u8; 8];
                a.copy_from_slice(c);
                i64::from_le_bytes(a)
            }
        };
        if out.last().is_some_and(|&l| l >= v) {
            return Err(BadData);
        }
        out.push(v);
    }
    Ok(out)
}

/// The pairs of a Redis 2.x zipmap.
fn zipmap_pairs(b: &[u8]) -> R<Vec<(Vec<u8>, Vec<u8>)>> {
    if b.len() < 2 || b[b.len() - 1] != 0xff {
        return Err(BadData);
    }
    let end = b.len() - 1;
    let mut p = 1;
    let read_len = |p: &mut usize| -> R<usize> {
        if *p >= end {
            return Err(BadData);
        }
        let l = b[*p];
        if l < 254 {
            *p += 1;
            Ok(l as usize)
        } else if l == 254 {
            if *p + 5 > end {
                return Err(BadData);
            }
            let v = u32::from_le_bytes([b[*p + 1], b[*p + 2], b[*p + 3], b[*p + 4]]);
            *p += 5;
            Ok(v as usize)
        } else {
            Err(BadData)
        }
    };
    let mut out = Vec::new();
    while p < end {
        let kl = read_len(&mut p)?;
        if kl > end - p {
            return Err(BadData);
        }
        let k = b[p..p + kl].to_vec();
        p += kl;
        let vl = read_len(&mut p)?;
        if p >= end {
            return Err(BadData);
        }
        let free = b[p] as usize;
        p += 1;
        if vl > end - p || free > end - p - vl {
            return Err(BadData);
        }
        let v = b[p..p + vl].to_vec();
        p += vl + free;
        out.push((k, v));
    }
    if p != end {
        return Err(BadData);
    }
    Ok(out)
}

fn hash_from(pairs: impl IntoIterator<Item = (Vec<u8>, Vec<u8>)>) -> R<Value> {
    let mut h = HashValue::default();
    let mut any = false;
    for (f, v) in pairs {
        if !h.insert(&f, &v) {
            return Err(BadData);
        }
        any = true;
    }
    if !any {
        return Err(BadData);
    }
    Ok(Value::Hash(h))
}

fn zset_from(pairs: Vec<(Vec<u8>, f64)>) -> R<Value> {
    // A long set starts in the tree form, as Redis's loader creates it, rather than filling
    // a listpack (a scan per insert) only to convert it.
    let mut z = ZSetValue::with_size_hint(pairs.len());
    for (m, s) in pairs {
        if s.is_nan() || z.insert(&m, s).is_some() {
            return Err(BadData);
        }
    }
    if z.is_empty() {
        return Err(BadData);
    }
    Ok(Value::ZSet(Box::new(z)))
}

fn set_from<'a>(members: impl IntoIterator<Item = &'a [u8]>) -> R<Value> {
    let mut s = SetValue::default();
    for m in members {
        if !s.insert(m) {
            return Err(BadData);
        }
    }
    if s.is_empty() {
        return Err(BadData);
    }
    Ok(Value::Set(Box::new(s)))
}

fn pairs<T>(entries: Vec<Vec<u8>>, mut f: impl FnMut(Vec<u8>, Vec<u8>) -> R<T>) -> R<Vec<T>> {
    if !entries.len().is_multiple_of(2) {
        return Err(BadData);
    }
    let mut out = Vec::with_capacity(entries.len() / 2);
    let mut it = entries.into_iter();
    while let (Some(a), Some(b)) = (it.next(), it.next()) {
        out.push(f(a, b)?);
    }
    Ok(out)
}

/// One value of RDB type `t` (the byte before the key in a file), read from `rd`.
pub(crate) fn read_value(rd: &mut Reader<'_>, t: u8) -> R<Value> {
    read_object(rd, t)
}

fn read_object(rd: &mut Reader<'_>, t: u8) -> R<Value> {
    match t {
        TYPE_STREAM_LISTPACKS | TYPE_STREAM_LISTPACKS_2 | TYPE_STREAM_LISTPACKS_3 => {
            read_stream(rd, t)
        }
        TYPE_STRING => Ok(Value::string(&rd.string()?)),
        TYPE_LIST => {
            let n = rd.len()?;
            let mut l = ListValue::default();
            for _ in 0..n {
                l.push(End::Right, &rd.string()?);
            }
            if l.is_empty() {
                return rd.empty_value();
            }
            Ok(Value::List(l))
        }
        TYPE_SET => {
            let n = rd.len()?;
            let mut s = SetValue::default();
            if n > limit(&LIMITS.set_intset_entries) as u64 {
                // Redis creates a hashtable right away for a long set.
                s.maybe_convert(n.min(rd.remaining() as u64) as usize);
            }
            for _ in 0..n {
                if !s.insert(&rd.string()?) {
                    return Err(BadData);
                }
            }
            if s.is_empty() {
                return rd.empty_value();
            }
            Ok(Value::Set(Box::new(s)))
        }
        TYPE_ZSET | TYPE_ZSET_2 => {
            let n = rd.len()?;
            let mut v = Vec::new();
            for _ in 0..n {
                let m = rd.string()?.into_owned();
                let s = if t == TYPE_ZSET_2 {
                    rd.binary_double()?
                } else {
                    rd.text_double()?
                };
                v.push((m, s));
            }
            if v.is_empty() {
                return rd.empty_value();
            }
            zset_from(v)
        }
        TYPE_HASH_METADATA => {
            let min = rd.u64_le()? as i64;
            let n = rd.len()?;
            let mut h = HashValue::default();
            let mut deadlines = Vec::new();
            for _ in 0..n {
                let ttl = rd.len()?;
                let f = rd.string()?.into_owned();
                let val = rd.string()?.into_owned();
                if !h.insert(&f, &val) {
                    return Err(BadData);
                }
                if ttl != 0 {
                    let at = i64::try_from(ttl)
                        .ok()
                        .and_then(|t| t.checked_add(min - 1))
                        .filter(|&at| at > 0 && at <= 0x0000_FFFF_FFFF_FFFF)
                        .ok_or(BadData)?;
                    deadlines.push((f, at));
                }
            }
            if h.is_empty() {
                return rd.empty_value();
            }
            for (f, at) in deadlines {
                h.set_deadline(&f, at);
            }
            Ok(Value::Hash(h))
        }
        TYPE_HASH => {
            let n = rd.len()?;
            let mut v = Vec::new();
            for _ in 0..n {
                let f = rd.string()?.into_owned();
                let val = rd.string()?.into_owned();
                v.push((f, val));
            }
            if v.is_empty() {
                return rd.empty_value();
            }
            hash_from(v)
        }
        TYPE_LIST_QUICKLIST | TYPE_LIST_QUICKLIST_2 => {
            let n = rd.len()?;
            let mut l = ListValue::default();
            for _ in 0..n {
                let container = if t == TYPE_LIST_QUICKLIST_2 {
                    rd.len()?
                } else {
                    QUICKLIST_PACKED
                };
                if container != QUICKLIST_PACKED && container != QUICKLIST_PLAIN {
                    return Err(BadData);
                }
                let data = rd.string()?;
                if data.is_empty() {
                    return Err(BadData);
                }
                if container == QUICKLIST_PLAIN {
                    l.push(End::Right, &data);
                    continue;
                }
                let entries = if t == TYPE_LIST_QUICKLIST_2 {
                    {
                        rd.blobs += 1;
                        listpack_entries(&data)?
                    }
                } else {
                    ziplist_entries(&data)?
                };
                for e in entries {
                    l.push(End::Right, &e);
                }
            }
            if l.is_empty() {
                return rd.empty_value();
            }
            Ok(Value::List(l))
        }
        TYPE_HASH_ZIPMAP => {
            let p = zipmap_pairs(&rd.string()?)?;
            if p.is_empty() {
                return rd.empty_value();
            }
            hash_from(p)
        }
        TYPE_LIST_ZIPLIST => {
            let mut l = ListValue::default();
            for e in ziplist_entries(&rd.string()?)? {
                l.push(End::Right, &e);
            }
            if l.is_empty() {
                return rd.empty_value();
            }
            Ok(Value::List(l))
        }
        TYPE_SET_INTSET => {
            let blob = rd.string()?;
            if blob.len() == 8 && blob[4..] == [0, 0, 0, 0] {
                // A header for no members.
                return rd.empty_value();
            }
            let ints = {
                rd.blobs += 1;
                intset_members(&blob)?
            };
            let mut s = SetValue::default();
            if ints.len() > limit(&LIMITS.set_intset_entries) {
                s.maybe_convert(ints.len());
            }
            for i in ints {
                s.insert(&itoa_bytes(i));
            }
            Ok(Value::Set(Box::new(s)))
        }
        TYPE_SET_LISTPACK => {
            let entries = {
                rd.blobs += 1;
                listpack_entries(&rd.string()?)?
            };
            if entries.is_empty() {
                return rd.empty_value();
            }
            set_from(entries.iter().map(|e| &e[..]))
        }
        TYPE_ZSET_ZIPLIST | TYPE_ZSET_LISTPACK => {
            let blob = rd.string()?;
            let entries = if t == TYPE_ZSET_ZIPLIST {
                ziplist_entries(&blob)?
            } else {
                {
                    rd.blobs += 1;
                    listpack_entries(&blob)?
                }
            };
            if entries.is_empty() {
                return rd.empty_value();
            }
            zset_from(pairs(entries, |m, s| Ok((m, strtod_prefix(&s))))?)
        }
        TYPE_HASH_ZIPLIST | TYPE_HASH_LISTPACK => {
            let blob = rd.string()?;
            let entries = if t == TYPE_HASH_ZIPLIST {
                ziplist_entries(&blob)?
            } else {
                {
                    rd.blobs += 1;
                    listpack_entries(&blob)?
                }
            };
            if entries.is_empty() {
                return rd.empty_value();
            }
            hash_from(pairs(entries, |f, v| Ok((f, v)))?)
        }
        _ => Err(BadData),
    }
}

/// One integer entry of a stream listpack (Redis's `lpGetInteger` on an entry the stream
/// code wrote as an integer).
fn lp_int(entries: &[Vec<u8>], i: usize) -> R<i64> {
    entries.get(i).and_then(|e| parse_i64(e)).ok_or(BadData)
}

/// Redis's stream types (`RDB_TYPE_STREAM_LISTPACKS`, `_2` of 7.0, `_3` of 7.2): the nodes
/// (master ID, listpack of delta-encoded entries), the stream's metadata, then each consumer
/// group with its pending entries and consumers. Entries are appended in order, so the
/// blocks are this server's own (deleted entries, which Redis keeps as flagged tombstones
/// in the nodes, are dropped); everything the commands show (length, IDs, counters, groups,
/// PELs) is as it was.
fn read_stream(rd: &mut Reader<'_>, t: u8) -> R<Value> {
    const FLAG_DELETED: i64 = 1;
    const FLAG_SAMEFIELDS: i64 = 2;
    let mut s = StreamValue::default();
    let mut prev: Option<StreamId> = None;
    let mut fv: Vec<Bytes> = Vec::new();
    let nodes = rd.len()?;
    for _ in 0..nodes {
        let key = rd.string()?;
        if key.len() != 16 {
            return Err(BadData);
        }
        let mut r = Reader::new(&key);
        let master = r.raw_stream_id()?;
        let e = {
            rd.blobs += 1;
            listpack_entries(&rd.string()?)?
        };
        // The master entry: live count, deleted count, the master fields, a 0 terminator.
        let live = lp_int(&e, 0)?;
        let deleted = lp_int(&e, 1)?;
        let nfields = usize::try_from(lp_int(&e, 2)?).map_err(|_| BadData)?;
        if live < 0 || deleted < 0 || live + deleted == 0 || nfields > e.len() {
            return Err(BadData);
        }
        let fields = &e[3..3 + nfields.min(e.len() - 3)];
        if fields.len() != nfields || lp_int(&e, 3 + nfields)? != 0 {
            return Err(BadData);
        }
        let mut i = 4 + nfields;
        let (mut seen_live, mut seen_deleted) = (0i64, 0i64);
        while i < e.len() {
            let start = i;
            let flags = lp_int(&e, i)?;
            let ms = lp_int(&e, i + 1)? as u64;
            let seq = lp_int(&e, i + 2)? as u64;
            i += 3;
            let id = StreamId::new(master.ms.wrapping_add(ms), master.seq.wrapping_add(seq));
            fv.clear();
            if flags & FLAG_SAMEFIELDS != 0 {
                if i + nfields > e.len() {
                    return Err(BadData);
                }
                for (f, v) in fields.iter().zip(&e[i..i + nfields]) {
                    fv.push(Bytes::copy_from_slice(f));
                    fv.push(Bytes::copy_from_slice(v));
                }
                i += nfields;
            } else {
                let n = usize::try_from(lp_int(&e, i)?).map_err(|_| BadData)?;
                i += 1;
                if n > e.len() || i + 2 * n > e.len() {
                    return Err(BadData);
                }
                fv.extend(e[i..i + 2 * n].iter().map(|x| Bytes::copy_from_slice(x)));
                i += 2 * n;
            }
            // The entry's own element count, for walking the listpack backwards.
            if lp_int(&e, i)? != (i - start) as i64 {
                return Err(BadData);
            }
            i += 1;
            if flags & FLAG_DELETED != 0 {
                seen_deleted += 1;
                continue;
            }
            seen_live += 1;
            if fv.is_empty() || prev.is_some_and(|p| id <= p) || id < master {
                return Err(BadData);
            }
            prev = Some(id);
            s.append(id, &fv);
        }
        if seen_live != live || seen_deleted != deleted {
            return Err(BadData);
        }
    }
    let length = rd.len()?;
    let last = StreamId::new(rd.len()?, rd.len()?);
    if length != s.len() || prev.is_some_and(|p| p > last) {
        return Err(BadData);
    }
    let (added, max_deleted) = if t == TYPE_STREAM_LISTPACKS {
        (length, StreamId::MIN)
    } else {
        // The first ID is implied by the entries.
        let _first = StreamId::new(rd.len()?, rd.len()?);
        let max_deleted = StreamId::new(rd.len()?, rd.len()?);
        (rd.len()?, max_deleted)
    };
    s.set_last(last, Some(added), Some(max_deleted));
    let groups = rd.len()?;
    for _ in 0..groups {
        let name = Bytes::copy_from_slice(&rd.string()?);
        let gid = StreamId::new(rd.len()?, rd.len()?);
        let entries_read = if t == TYPE_STREAM_LISTPACKS {
            s.estimate_entries_read(gid)
                .map_or(ENTRIES_READ_UNKNOWN, |v| v as i64)
        } else {
            // Redis writes its -1 ("unknown") as the 64-bit length 2^64 - 1.
            rd.len()? as i64
        };
        let mut g = Group::new(gid, entries_read);
        let pending = rd.len()?;
        for _ in 0..pending {
            let id = rd.raw_stream_id()?;
            let delivery_time = rd.u64_le()? as i64;
            let delivery_count = rd.len()?;
            let nack = Nack {
                consumer: Bytes::new(),
                delivery_time,
                delivery_count,
            };
            if g.pel.insert(id, nack).is_some() {
                return Err(BadData);
            }
        }
        let consumers = rd.len()?;
        for _ in 0..consumers {
            let cname = Bytes::copy_from_slice(&rd.string()?);
            let seen_time = rd.u64_le()? as i64;
            // 7.2's active time; older files have none, and Redis 7.2 then takes the seen
            // time as its best estimate.
            let active_time = if t == TYPE_STREAM_LISTPACKS_3 {
                rd.u64_le()? as i64
            } else {
                seen_time
            };
            let mut c = Consumer {
                seen_time,
                active_time,
                pel: Default::default(),
            };
            let owned = rd.len()?;
            for _ in 0..owned {
                let id = rd.raw_stream_id()?;
                let nack = g.pel.get_mut(&id).ok_or(BadData)?;
                if !nack.consumer.is_empty() || !c.pel.insert(id) {
                    return Err(BadData);
                }
                nack.consumer = cname.clone();
            }
            if cname.is_empty() || g.consumers.insert(cname, c).is_some() {
                return Err(BadData);
            }
        }
        // Every pending entry belongs to a consumer (Redis checks it in deep sanitization).
        if g.pel.values().any(|n| n.consumer.is_empty()) || s.groups.insert(name, g).is_some() {
            return Err(BadData);
        }
    }
    Ok(Value::Stream(Box::new(s)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc64_check_value() {
        assert_eq!(crc64(0, b"123456789"), 0xe9c6d914c4b8d9ca);
    }

    fn round(v: Value) -> Value {
        let p = dump(&v);
        assert!(verify(&p));
        load(&p).expect("loads")
    }

    #[test]
    fn strings_round_trip() {
        for s in [
            &b""[..],
            b"a",
            b"12",
            b"-129",
            b"40000",
            b"-2147483648",
            b"9223372036854775807",
            b"012",
            &[0u8, 255, 1][..],
        ] {
            let v = round(Value::string(s));
            assert_eq!(v.str_bytes().unwrap(), s);
        }
        let long = vec![b'x'; 70000];
        assert_eq!(round(Value::string(&long)).str_bytes().unwrap(), &long[..]);
    }

    #[test]
    fn simple_string_matches_redis() {
        // redis-cli DUMP of SET foo bar on Redis 7.0.
        let p = dump(&Value::string(b"bar"));
        assert_eq!(&p[..7], b"\x00\x03bar\x0a\x00");
    }

    #[test]
    fn listpack_round_trip() {
        let items: Vec<Vec<u8>> = vec![
            b"0".to_vec(),
            b"127".to_vec(),
            b"128".to_vec(),
            b"-4096".to_vec(),
            b"4095".to_vec(),
            b"-32768".to_vec(),
            b"8388607".to_vec(),
            b"-8388608".to_vec(),
            b"2147483647".to_vec(),
            b"-9223372036854775808".to_vec(),
            b"hello".to_vec(),
            vec![b'a'; 63],
            vec![b'b'; 64],
            vec![b'c'; 4095],
            vec![b'd'; 4096],
            vec![b'e'; 20000],
        ];
        let mut w = LpWriter::new();
        for i in &items {
            w.push(i);
        }
        let lp = w.finish();
        assert_eq!(listpack_entries(&lp).unwrap(), items);
    }

    #[test]
    fn lzf_literal_and_backref() {
        // "aaaaaaaaaa": literal 'a', then a back-reference of 9 bytes at distance 1.
        let c = [0u8, b'a', (7 << 5), 0, 0];
        // len 7+0+2 = 9 copies.
        assert_eq!(lzf_decompress(&c, 10).unwrap(), vec![b'a'; 10]);
        assert!(lzf_decompress(&c, 11).is_err());
        assert!(lzf_decompress(&c, u64::MAX).is_err());
    }

    #[test]
    fn lzf_compress_round_trips() {
        let mut x = 7u64;
        let mut inputs: Vec<Vec<u8>> = vec![
            b"abcabcabcabcabcabcabcabcabc".to_vec(),
            vec![b'a'; 1000],
            vec![0; 70000],
        ];
        for n in [21usize, 100, 5000, 20000] {
            let v: Vec<u8> = (0..n)
                .map(|i| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    if i % 3 == 0 {
                        (x % 4) as u8
                    } else {
                        b"hello"[i % 5]
                    }
                })
                .collect();
            inputs.push(v);
        }
        let mut compressed = 0;
        for v in inputs {
            if let Some(c) = lzf_compress(&v, v.len() - 4) {
                assert_eq!(lzf_decompress(&c, v.len() as u64).unwrap(), v);
                compressed += 1;
            }
        }
        assert!(compressed >= 5);
        let noise: Vec<u8> = (0..200u32)
            .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
            .collect();
        assert!(lzf_compress(&noise, noise.len() - 4).is_none());
    }

    /// A stream written in 7.0's form reads back with its entries (several nodes, mixed
    /// field sets, a deleted entry), counters, groups, pending entries and consumers.
    #[test]
    fn stream_round_trips() {
        let mut s = StreamValue::default();
        for i in 1..=250u64 {
            let fv: Vec<Bytes> = if i % 7 == 0 {
                vec![Bytes::from("x"), Bytes::from(format!("{i}"))]
            } else {
                vec![
                    Bytes::from("a"),
                    Bytes::from("1"),
                    Bytes::from("b"),
                    Bytes::from(format!("v{i}")),
                ]
            };
            s.append(StreamId::new(i, i % 3), &fv);
        }
        s.set_last(StreamId::new(250, 2), Some(250), None);
        assert!(s.delete(StreamId::new(5, 2)));
        let mut g = Group::new(StreamId::new(10, 1), 10);
        let alice = Bytes::from("alice");
        g.consumer(b"alice", 1234);
        g.assign(StreamId::new(3, 0), &alice, 5000, Some(2));
        g.assign(StreamId::new(4, 1), &alice, 6000, Some(1));
        s.groups.insert(Bytes::from("g"), g);
        s.groups.insert(
            Bytes::from("empty"),
            Group::new(StreamId::MIN, ENTRIES_READ_UNKNOWN),
        );
        let p = dump(&Value::Stream(Box::new(s.clone())));
        assert_eq!(p[0], TYPE_STREAM_LISTPACKS_2);
        let Ok(Value::Stream(t)) = load(&p) else {
            panic!("no stream")
        };
        let all = |s: &StreamValue| s.range(StreamId::MIN, StreamId::MAX, 0, false);
        assert_eq!(all(&s), all(&t));
        assert_eq!(t.len(), 249);
        assert_eq!(
            (t.last_id, t.entries_added, t.max_deleted_id, t.first_id()),
            (s.last_id, 250, StreamId::new(5, 2), StreamId::new(1, 1))
        );
        let (a, b) = (&s.groups[&b"g"[..]], &t.groups[&b"g"[..]]);
        assert_eq!((a.last_id, a.entries_read), (b.last_id, b.entries_read));
        assert_eq!(b.pel.len(), 2);
        for (id, n) in &a.pel {
            let m = &b.pel[id];
            assert_eq!(
                (&n.consumer, n.delivery_time, n.delivery_count),
                (&m.consumer, m.delivery_time, m.delivery_count)
            );
        }
        assert_eq!(
            a.consumers[&b"alice"[..]].seen_time,
            b.consumers[&b"alice"[..]].seen_time
        );
        assert_eq!(t.groups[&b"empty"[..]].entries_read, ENTRIES_READ_UNKNOWN);
        // An empty stream (its last ID and groups only) too.
        let mut e = StreamValue::default();
        e.set_last(StreamId::new(7, 7), Some(3), Some(StreamId::new(7, 7)));
        let Ok(Value::Stream(f)) = load(&dump(&Value::Stream(Box::new(e)))) else {
            panic!("no stream")
        };
        assert_eq!(
            (f.len(), f.last_id, f.entries_added),
            (0, StreamId::new(7, 7), 3)
        );
    }

    /// Redis 6's stream type (`STREAM_LISTPACKS`, no first ID, tombstone ID, entries-added
    /// or group counters): the missing counters are derived as Redis 7.0 derives them.
    #[test]
    fn stream_of_redis_6_loads() {
        let mut lp = LpWriter::new();
        // Master entry: 2 live, 1 deleted, one field "f", terminator.
        for e in ["2", "1", "1", "f", "0"] {
            lp.push(e.as_bytes());
        }
        // 1-0 (same fields), 1-1 deleted, 2-0 with its own fields.
        for e in ["2", "0", "0", "v1", "4"] {
            lp.push(e.as_bytes());
        }
        for e in ["3", "0", "1", "v2", "4"] {
            lp.push(e.as_bytes());
        }
        for e in ["0", "1", "0", "2", "a", "x", "b", "y", "8"] {
            lp.push(e.as_bytes());
        }
        let lp = lp.finish();
        let id = |ms: u64, seq: u64| [ms.to_be_bytes(), seq.to_be_bytes()].concat();
        let mut p = vec![TYPE_STREAM_LISTPACKS];
        put_len(&mut p, 1);
        put_len(&mut p, 16);
        p.extend_from_slice(&id(1, 0));
        put_len(&mut p, lp.len() as u64);
        p.extend_from_slice(&lp);
        for n in [2, 2, 0] {
            put_len(&mut p, n); // length, last ID
        }
        put_len(&mut p, 1); // one group "g" at 1-0
        put_string(&mut p, true, b"g");
        put_len(&mut p, 1);
        put_len(&mut p, 0);
        put_len(&mut p, 1); // its PEL: 1-0, delivered at 1000, 3 times
        p.extend_from_slice(&id(1, 0));
        p.extend_from_slice(&1000u64.to_le_bytes());
        put_len(&mut p, 3);
        put_len(&mut p, 1); // consumer "c", seen at 2000, owning 1-0
        put_string(&mut p, true, b"c");
        p.extend_from_slice(&2000u64.to_le_bytes());
        put_len(&mut p, 1);
        p.extend_from_slice(&id(1, 0));
        p.extend_from_slice(&[10, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        let Ok(Value::Stream(s)) = load(&p) else {
            panic!("no stream")
        };
        assert_eq!(s.len(), 2);
        let ids: Vec<String> = s
            .range(StreamId::MIN, StreamId::MAX, 0, false)
            .iter()
            .map(|(id, fv)| format!("{id} {}", fv.len()))
            .collect();
        assert_eq!(ids, ["1-0 2", "2-0 4"]);
        assert_eq!((s.last_id, s.entries_added), (StreamId::new(2, 0), 2));
        let g = &s.groups[&b"g"[..]];
        // Redis's estimate for a group at the first entry: entries_added - length + 1.
        assert_eq!(g.entries_read, 1);
        let n = &g.pel[&StreamId::new(1, 0)];
        assert_eq!(
            (&n.consumer[..], n.delivery_time, n.delivery_count),
            (&b"c"[..], 1000, 3)
        );
        assert_eq!(g.consumers[&b"c"[..]].seen_time, 2000);
        // A pending entry no consumer owns is corrupt.
        let cut = p.len() - 10 - 16 - 1 - 8 - 2 - 1;
        assert_eq!(&p[cut..cut + 3], &[1, 1, b'c'], "the consumer count");
        let mut orphan = p[..cut].to_vec();
        put_len(&mut orphan, 0);
        orphan.extend_from_slice(&[10, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert!(load(&orphan).is_err());
    }

    #[test]
    fn garbage_never_panics() {
        let base = dump(&Value::string(b"hello world"));
        let mut seed = 0x1234_5678_9abc_def0u64;
        for _ in 0..20000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let mut p = base.clone();
            let i = (seed as usize) % p.len();
            p[i] = (seed >> 32) as u8;
            p.truncate(((seed >> 40) as usize) % (p.len() + 1));
            let _ = load(&p);
            for t in 0..=21u8 {
                let mut q = vec![t];
                q.extend_from_slice(&p);
                let _ = load(&q);
            }
        }
    }
}
