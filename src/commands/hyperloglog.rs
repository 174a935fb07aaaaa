//! The HyperLogLog family: PFADD PFCOUNT PFMERGE PFDEBUG PFSELFTEST, as Redis 7.0's
//! `hyperloglog.c`. Table rows first, handlers below.
//!
//! The value is a string in Redis's exact format, so one copied between Redis and tidecache
//! with GET/SET counts the same: a 16-byte header ("HYLL", the encoding, 3 unused bytes, the
//! cached cardinality little endian with its top bit as the "invalid" flag), then 16384
//! registers of 6 bits, either dense (12288 bytes) or sparse (ZERO / XZERO / VAL opcodes),
//! promoted to dense past `hll-sparse-max-bytes` or when a register exceeds 32. Every edit
//! follows Redis's algorithm step for step, so the same additions give the same bytes.
use crate::commands::args::{Args, CommandError, CommandResult};
use crate::commands::bitmaps::take_string;
use crate::commands::spec::{acl, family, flag::*, Begin, CmdResult, CommandSpec, Find, KeySpec};
use crate::commands::Ctx;
use crate::protocol::Reply;
use crate::state::pubsub::class;
use crate::store::encoding::{limit, LIMITS};
use crate::store::{Ttl, Value};
use bytes::Bytes;

const FAMILY: CommandSpec = family("hyperloglog", acl::HYPERLOGLOG);

const fn at(flags: &'static [&'static str], index: i32, last: i32) -> KeySpec {
    KeySpec {
        flags,
        begin: Begin::Index(index),
        find: Find::Range {
            last,
            step: 1,
            limit: 0,
        },
    }
}

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    FAMILY.cmd("pfadd", -2, pfadd).flags(WRITE | DENYOOM | FAST).key()
        .key_specs(&[at(&["RW", "insert"], 1, 0)])
        .doc("2.8.9", "Adds the specified elements to the specified HyperLogLog.")
        .complexity("O(1) to add every element.")
        .args("key:key [element...]"),
    FAMILY.cmd("pfcount", -2, pfcount).flags(READONLY).keys(1, -1, 1)
        .key_specs(&[at(&["RW", "access"], 1, -1)])
        .doc("2.8.9", "Return the approximated cardinality of the set(s) observed by the HyperLogLog at key(s).")
        .complexity("O(1) with a very small average constant time when called with a single key. O(N) with N being the number of keys, and much bigger constant times, when called with multiple keys.")
        .args("key:key..."),
    FAMILY.cmd("pfmerge", -2, pfmerge).flags(WRITE | DENYOOM).keys(1, -1, 1)
        .key_specs(&[at(&["RW", "access", "insert"], 1, 0), at(&["RO", "access"], 2, -1)])
        .doc("2.8.9", "Merge N different HyperLogLogs into a single one.")
        .complexity("O(N) to merge N HyperLogLogs, but with high constant times.")
        .args("destkey:key sourcekey:key..."),
    FAMILY.cmd("pfdebug", 3, pfdebug).flags(WRITE | DENYOOM | ADMIN).keys(2, 2, 1)
        .key_specs(&[at(&["RW", "access"], 2, 0)])
        .doc("2.8.9", "Internal commands for debugging HyperLogLog values").complexity("N/A")
        .args("subcommand key:key"),
    FAMILY.cmd("pfselftest", 1, pfselftest).flags(ADMIN)
        .doc("2.8.9", "An internal command for testing HyperLogLog values").complexity("N/A"),
];

const HDR: usize = 16;
const P: u32 = 14;
const Q: u32 = 64 - P;
const REGISTERS: usize = 1 << P;
const P_MASK: u64 = REGISTERS as u64 - 1;
const BITS: usize = 6;
const REGISTER_MAX: u8 = (1 << BITS) - 1;
const DENSE_SIZE: usize = HDR + (REGISTERS * BITS).div_ceil(8);
const DENSE: u8 = 0;
const SPARSE: u8 = 1;
const MAX_ENCODING: u8 = 1;
const SPARSE_VAL_MAX_VALUE: u8 = 32;
const SPARSE_VAL_MAX_LEN: usize = 4;
const SPARSE_ZERO_MAX_LEN: usize = 64;
const SPARSE_XZERO_MAX_LEN: usize = 16384;
const ALPHA_INF: f64 = 0.721_347_520_444_481_7;
const SEED: u64 = 0xadc8_3b19;

const NOT_HLL: &str = "WRONGTYPE Key is not a valid HyperLogLog string value.";
const INVALID_HLL: &str = "INVALIDOBJ Corrupted HLL object detected";

fn invalid() -> CommandError {
    CommandError::msg(INVALID_HLL)
}

/// MurmurHash2, 64-bit version (Austin Appleby's MurmurHash64A), as Redis computes it.
pub fn murmur64a(key: &[u8], seed: u64) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    let mut h = seed ^ (key.len() as u64).wrapping_mul(M);
    let mut chunks = key.chunks_exact(8);
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        let mut k = u64::from_le_bytes(w);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        for (i, &b) in tail.iter().enumerate() {
            h ^= (b as u64) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

/// The register an element goes to and the length of its run of zeroes plus one.
fn pat_len(ele: &[u8]) -> (usize, u8) {
    let hash = murmur64a(ele, SEED);
    let index = (hash & P_MASK) as usize;
    let rest = (hash >> P) | (1u64 << Q);
    (index, rest.trailing_zeros() as u8 + 1)
}

fn dense_get(r: &[u8], i: usize) -> u8 {
    let byte = i * BITS / 8;
    let fb = (i * BITS) & 7;
    let b0 = r[byte] as u32;
    let b1 = r.get(byte + 1).copied().unwrap_or(0) as u32;
    (((b0 >> fb) | (b1 << (8 - fb))) & REGISTER_MAX as u32) as u8
}

fn dense_set_register(r: &mut [u8], i: usize, val: u8) {
    let byte = i * BITS / 8;
    let fb = (i * BITS) & 7;
    let fb8 = 8 - fb;
    let v = val as u32;
    r[byte] &= !((REGISTER_MAX as u32) << fb) as u8;
    r[byte] |= (v << fb) as u8;
    if let Some(b) = r.get_mut(byte + 1) {
        *b &= !((REGISTER_MAX as u32) >> fb8) as u8;
        *b |= (v >> fb8) as u8;
    }
}

/// Sets a dense register to `count` if that is larger: 1 if it changed.
fn dense_set(r: &mut [u8], i: usize, count: u8) -> i32 {
    if count > dense_get(r, i) {
        dense_set_register(r, i, count);
        1
    } else {
        0
    }
}

fn is_zero(op: u8) -> bool {
    op & 0xc0 == 0
}
fn is_xzero(op: u8) -> bool {
    op & 0xc0 == 0x40
}
fn is_val(op: u8) -> bool {
    op & 0x80 != 0
}
fn zero_len(op: u8) -> usize {
    (op & 0x3f) as usize + 1
}
fn xzero_len(op: u8, next: u8) -> usize {
    ((((op & 0x3f) as usize) << 8) | next as usize) + 1
}
fn val_value(op: u8) -> u8 {
    ((op >> 2) & 0x1f) + 1
}
fn val_len(op: u8) -> usize {
    (op & 0x3) as usize + 1
}
fn val_op(val: u8, len: usize) -> u8 {
    (((val - 1) << 2) | (len as u8 - 1)) | 0x80
}
fn zero_op(len: usize) -> u8 {
    (len - 1) as u8
}
fn xzero_op(len: usize) -> [u8; 2] {
    let l = len - 1;
    [(l >> 8) as u8 | 0x40, (l & 0xff) as u8]
}

/// The byte after `p` (Redis reads the string's terminating zero past the end).
fn at_or_zero(s: &[u8], p: usize) -> u8 {
    s.get(p).copied().unwrap_or(0)
}

/// A new HyperLogLog: sparse, all registers zero (one XZERO opcode).
pub fn create() -> Vec<u8> {
    let mut v = Vec::with_capacity(HDR + 2);
    v.extend_from_slice(b"HYLL");
    v.push(SPARSE);
    v.extend_from_slice(&[0; 11]);
    let mut aux = REGISTERS;
    while aux > 0 {
        let xz = aux.min(SPARSE_XZERO_MAX_LEN);
        v.extend_from_slice(&xzero_op(xz));
        aux -= xz;
    }
    v
}

/// Redis's `isHLLObjectOrReply` on a string's bytes.
fn is_hll(s: &[u8]) -> bool {
    s.len() >= HDR
        && &s[..4] == b"HYLL"
        && s[4] <= MAX_ENCODING
        && (s[4] != DENSE || s.len() == DENSE_SIZE)
}

/// The HyperLogLog bytes of a value: WRONGTYPE for another type, the HLL error for a string
/// that is not one (an integer-encoded string never is).
fn hll_bytes(v: &Value) -> CommandResult<&[u8]> {
    match v {
        Value::Str(b) | Value::Raw(b) if is_hll(b) => Ok(b),
        Value::Str(_) | Value::Raw(_) | Value::Int(_) => Err(CommandError::msg(NOT_HLL)),
        _ => Err(CommandError::wrongtype()),
    }
}

fn invalidate_cache(v: &mut [u8]) {
    v[15] |= 0x80;
}

fn valid_cache(v: &[u8]) -> bool {
    v[15] & 0x80 == 0
}

/// Redis's `hllSparseToDense` (an already dense value is returned as is); `None` for a
/// corrupt sparse value.
fn sparse_to_dense(v: &[u8]) -> Option<Vec<u8>> {
    if v[4] == DENSE {
        return Some(v.to_vec());
    }
    let mut dense = vec![0u8; DENSE_SIZE];
    dense[..HDR].copy_from_slice(&v[..HDR]);
    dense[4] = DENSE;
    let regs = &mut dense[HDR..];
    let (mut idx, mut p) = (0usize, HDR);
    while p < v.len() {
        let op = v[p];
        if is_zero(op) {
            idx += zero_len(op);
            p += 1;
        } else if is_xzero(op) {
            idx += xzero_len(op, at_or_zero(v, p + 1));
            p += 2;
        } else {
            let (runlen, regval) = (val_len(op), val_value(op));
            if runlen + idx > REGISTERS {
                break;
            }
            for _ in 0..runlen {
                dense_set_register(regs, idx, regval);
                idx += 1;
            }
            p += 1;
        }
    }
    (idx == REGISTERS).then_some(dense)
}

/// Promotes `v` to dense and sets register `index` to `count` there.
fn promote(v: &mut Vec<u8>, index: usize, count: u8) -> i32 {
    match sparse_to_dense(v) {
        None => -1,
        Some(d) => {
            *v = d;
            dense_set(&mut v[HDR..], index, count);
            1
        }
    }
}

/// Redis's `hllSparseSet`: sets register `index` to `count` if larger, editing the opcodes in
/// place, or promoting to dense. 1 if changed, 0 if not, -1 for a corrupt value.
fn sparse_set(v: &mut Vec<u8>, index: usize, count: u8, max_bytes: usize) -> i32 {
    if count > SPARSE_VAL_MAX_VALUE {
        return promote(v, index, count);
    }
    // Step 1: the opcode covering the register.
    let end = v.len();
    let (mut p, mut first, mut span) = (HDR, 0usize, 0usize);
    let mut prev: Option<usize> = None;
    while p < end {
        let op = v[p];
        let mut oplen = 1;
        if is_zero(op) {
            span = zero_len(op);
        } else if is_val(op) {
            span = val_len(op);
        } else {
            span = xzero_len(op, at_or_zero(v, p + 1));
            oplen = 2;
        }
        if index < first + span {
            break;
        }
        prev = Some(p);
        p += oplen;
        first += span;
    }
    if span == 0 || p >= end {
        return -1;
    }
    let op = v[p];
    let (zero, xzero) = (is_zero(op), is_xzero(op));
    let runlen = if zero {
        zero_len(op)
    } else if xzero {
        xzero_len(op, at_or_zero(v, p + 1))
    } else {
        val_len(op)
    };
    // Step 2: the trivial cases, updated in place.
    let trivial = if !zero && !xzero {
        if val_value(op) >= count {
            return 0;
        }
        runlen == 1
    } else {
        zero && runlen == 1
    };
    if trivial {
        v[p] = val_op(count, 1);
    } else {
        // The general case: the opcode is split in up to three.
        let mut seq: Vec<u8> = Vec::with_capacity(5);
        let last = first + span - 1;
        if zero || xzero {
            let zeros = |seq: &mut Vec<u8>, len: usize| {
                if len > SPARSE_ZERO_MAX_LEN {
                    seq.extend_from_slice(&xzero_op(len));
                } else {
                    seq.push(zero_op(len));
                }
            };
            if index != first {
                zeros(&mut seq, index - first);
            }
            seq.push(val_op(count, 1));
            if index != last {
                zeros(&mut seq, last - index);
            }
        } else {
            let curval = val_value(op);
            if index != first {
                seq.push(val_op(curval, index - first));
            }
            seq.push(val_op(count, 1));
            if index != last {
                seq.push(val_op(curval, last - index));
            }
        }
        // Step 3: the new sequence replaces the old opcode.
        let oldlen = if xzero { 2 } else { 1 };
        if seq.len() > oldlen && v.len() + seq.len() - oldlen > max_bytes {
            return promote(v, index, count);
        }
        let stop = (p + oldlen).min(v.len());
        v.splice(p..stop, seq);
    }
    // Step 4: merge adjacent VAL opcodes of the same value, up to 5 opcodes from `prev`.
    let mut p = prev.unwrap_or(HDR);
    let mut scanlen = 5;
    while p < v.len() && scanlen > 0 {
        scanlen -= 1;
        let op = v[p];
        if is_xzero(op) {
            p += 2;
            continue;
        } else if is_zero(op) {
            p += 1;
            continue;
        }
        if p + 1 < v.len() && is_val(v[p + 1]) {
            let (v1, v2) = (val_value(op), val_value(v[p + 1]));
            if v1 == v2 {
                let len = val_len(op) + val_len(v[p + 1]);
                if len <= SPARSE_VAL_MAX_LEN {
                    v[p + 1] = val_op(v1, len);
                    v.remove(p);
                    continue;
                }
            }
        }
        p += 1;
    }
    invalidate_cache(v);
    1
}

/// Redis's `hllAdd`: 1 if a register changed, 0 if not, -1 for a corrupt value.
fn add(v: &mut Vec<u8>, ele: &[u8], max_bytes: usize) -> i32 {
    let (index, count) = pat_len(ele);
    match v[4] {
        DENSE => dense_set(&mut v[HDR..], index, count),
        SPARSE => sparse_set(v, index, count, max_bytes),
        _ => -1,
    }
}

/// Histogram of register values; `false` for a sparse value that does not cover exactly
/// 16384 registers.
fn histogram(v: &[u8], h: &mut [u32; 64]) -> bool {
    if v[4] == DENSE {
        let regs = &v[HDR..];
        for i in 0..REGISTERS {
            h[dense_get(regs, i) as usize] += 1;
        }
        return true;
    }
    let (mut idx, mut p) = (0usize, HDR);
    while p < v.len() {
        let op = v[p];
        if is_zero(op) {
            let n = zero_len(op);
            idx += n;
            h[0] += n as u32;
            p += 1;
        } else if is_xzero(op) {
            let n = xzero_len(op, at_or_zero(v, p + 1));
            idx += n;
            h[0] += n as u32;
            p += 2;
        } else {
            let n = val_len(op);
            idx += n;
            h[val_value(op) as usize] += n as u32;
            p += 1;
        }
    }
    idx == REGISTERS
}

fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let mut y = 1.0;
    let mut z = x;
    loop {
        x *= x;
        let zp = z;
        z += x * y;
        y += y;
        if zp == z {
            return z;
        }
    }
}

fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let mut y = 1.0;
    let mut z = 1.0 - x;
    loop {
        x = x.sqrt();
        let zp = z;
        y *= 0.5;
        let d = 1.0 - x;
        z -= d * d * y;
        if zp == z {
            return z / 3.0;
        }
    }
}

/// Ertl's improved estimator over a register histogram, as Redis's `hllCount`.
fn estimate(h: &[u32; 64]) -> u64 {
    let m = REGISTERS as f64;
    let mut z = m * tau((m - h[Q as usize + 1] as f64) / m);
    for j in (1..=Q as usize).rev() {
        z += h[j] as f64;
        z *= 0.5;
    }
    z += m * sigma(h[0] as f64 / m);
    (ALPHA_INF * m * m / z).round() as u64
}

/// The cardinality of one HyperLogLog value; `None` if corrupt.
fn count(v: &[u8]) -> Option<u64> {
    let mut h = [0u32; 64];
    histogram(v, &mut h).then(|| estimate(&h))
}

/// Redis's `hllMerge`: `max[i] = MAX(max[i], v[i])`; false for a corrupt sparse value.
fn merge(max: &mut [u8], v: &[u8]) -> bool {
    if v[4] == DENSE {
        let regs = &v[HDR..];
        for (i, m) in max.iter_mut().enumerate() {
            *m = (*m).max(dense_get(regs, i));
        }
        return true;
    }
    let (mut i, mut p) = (0usize, HDR);
    while p < v.len() {
        let op = v[p];
        if is_zero(op) {
            i += zero_len(op);
            p += 1;
        } else if is_xzero(op) {
            i += xzero_len(op, at_or_zero(v, p + 1));
            p += 2;
        } else {
            let (runlen, regval) = (val_len(op), val_value(op));
            if runlen + i > REGISTERS {
                break;
            }
            for m in &mut max[i..i + runlen] {
                *m = (*m).max(regval);
            }
            i += runlen;
            p += 1;
        }
    }
    i == REGISTERS
}

fn sparse_max_bytes() -> usize {
    limit(&LIMITS.hll_sparse_bytes)
}

fn pfadd(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let key = args.next_key()?;
    let elements = args.rest();
    let max_bytes = sparse_max_bytes();
    let adds = |v: &mut Vec<u8>, mut updated: usize| -> CommandResult<usize> {
        for e in elements {
            match add(v, e, max_bytes) {
                1 => updated += 1,
                -1 => return Err(invalid()),
                _ => {}
            }
        }
        if updated > 0 {
            invalidate_cache(v);
        }
        Ok(updated)
    };
    let updated = ctx.server.store.with_key(ctx.client.db, key, |ks, h| {
        match ks.peek(h, key) {
            None => {
                let mut v = create();
                let updated = adds(&mut v, 1);
                ks.set(h, key, Value::raw(v), Ttl::Clear);
                return updated;
            }
            Some(e) => {
                hll_bytes(&e.value)?;
            }
        }
        ks.update(h, key, |val| {
            let Some(mut v) = take_string(val) else {
                return (Err(CommandError::wrongtype()), false);
            };
            let r = adds(&mut v, 0);
            *val = Value::raw(v);
            let changed = matches!(r, Ok(n) if n > 0);
            (r, changed)
        })
        .unwrap_or_else(|| Err(CommandError::wrongtype()))
    })?;
    if updated > 0 {
        ctx.server
            .notify(ctx.client.db, class::STRING, "pfadd", key);
    }
    Ok(Reply::Int((updated > 0) as i64))
}

fn pfcount(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let keys = args.rest();
    let db = ctx.client.db;
    if keys.len() > 1 {
        // The cardinality of the union, without changing any key.
        let mut max = vec![0u8; REGISTERS];
        let mut l = ctx.server.store.lock_keys(keys);
        for (i, k) in keys.iter().enumerate() {
            let h = l.hash(i);
            if let Some(e) = l.ks(i, db).get(h, k) {
                if !merge(&mut max, hll_bytes(&e.value)?) {
                    return Err(invalid());
                }
            }
        }
        let mut h = [0u32; 64];
        for &r in &max {
            h[r as usize] += 1;
        }
        return Ok(Reply::Int(estimate(&h) as i64));
    }
    let key = &keys[0];
    ctx.server.store.with_key(db, key, |ks, h| {
        let (card, fresh) = match ks.get(h, key) {
            None => return Ok(Reply::Int(0)),
            Some(e) => {
                let v = hll_bytes(&e.value)?;
                if valid_cache(v) {
                    let mut c = [0u8; 8];
                    c.copy_from_slice(&v[8..16]);
                    (u64::from_le_bytes(c), false)
                } else {
                    (count(v).ok_or_else(invalid)?, true)
                }
            }
        };
        // As Redis: the value is unshared (a `raw` string), and a count computed afresh is
        // cached in its header, which is a change of the key (WATCH sees it).
        ks.update(h, key, |val| {
            if let Some(mut v) = take_string(val) {
                if fresh {
                    v[8..16].copy_from_slice(&card.to_le_bytes());
                }
                *val = Value::raw(v);
            }
            ((), fresh)
        });
        Ok(Reply::Int(card as i64))
    })
}

fn pfmerge(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let keys = args.rest();
    let db = ctx.client.db;
    let mut max = vec![0u8; REGISTERS];
    let mut use_dense = false;
    let mut l = ctx.server.store.lock_keys(keys);
    for (i, k) in keys.iter().enumerate() {
        let h = l.hash(i);
        if let Some(e) = l.ks(i, db).get(h, k) {
            let v = hll_bytes(&e.value)?;
            use_dense |= v[4] == DENSE;
            if !merge(&mut max, v) {
                return Err(invalid());
            }
        }
    }
    let max_bytes = sparse_max_bytes();
    let write = |v: &mut Vec<u8>| -> CommandResult<()> {
        if use_dense {
            *v = sparse_to_dense(v).ok_or_else(invalid)?;
        }
        for (j, &m) in max.iter().enumerate() {
            if m == 0 {
                continue;
            }
            match v[4] {
                DENSE => {
                    dense_set(&mut v[HDR..], j, m);
                }
                _ => {
                    sparse_set(v, j, m, max_bytes);
                }
            }
        }
        invalidate_cache(v);
        Ok(())
    };
    let (dest, h) = (&keys[0], l.hash(0));
    let ks = l.ks(0, db);
    if ks.peek(h, dest).is_none() {
        let mut v = create();
        write(&mut v)?;
        ks.set(h, dest, Value::raw(v), Ttl::Clear);
    } else {
        ks.update(h, dest, |val| {
            let Some(mut v) = take_string(val) else {
                return (Err(CommandError::wrongtype()), false);
            };
            let r = write(&mut v);
            *val = Value::raw(v);
            (r, true)
        })
        .unwrap_or_else(|| Err(CommandError::wrongtype()))?;
    }
    ctx.server.notify(db, class::STRING, "pfadd", dest);
    Ok(Reply::ok())
}

fn pfdebug(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let sub = args.next_arg()?;
    let key = args.next_key()?;
    ctx.server.store.with_key(ctx.client.db, key, |ks, h| {
        match ks.peek(h, key) {
            None => return Err(CommandError::msg("ERR The specified key does not exist")),
            Some(e) => {
                hll_bytes(&e.value)?;
            }
        }
        ks.update(h, key, |val| {
            let Some(mut v) = take_string(val) else {
                return (Err(CommandError::wrongtype()), false);
            };
            let mut changed = false;
            let r = pfdebug_on(sub, &mut v, &mut changed);
            *val = Value::raw(v);
            (r, changed)
        })
        .unwrap_or_else(|| Err(CommandError::wrongtype()))
    })
}

fn pfdebug_on(sub: &[u8], v: &mut Vec<u8>, changed: &mut bool) -> CmdResult {
    match &*crate::commands::args::Token::of(sub) {
        b"GETREG" => {
            if v[4] == SPARSE {
                *v = sparse_to_dense(v).ok_or_else(invalid)?;
                *changed = true;
            }
            let regs = &v[HDR..];
            Ok(Reply::Array(
                (0..REGISTERS)
                    .map(|i| Reply::Int(dense_get(regs, i) as i64))
                    .collect(),
            ))
        }
        b"DECODE" => {
            if v[4] != SPARSE {
                return Err(CommandError::msg("ERR HLL encoding is not sparse"));
            }
            let mut out = String::new();
            let mut p = HDR;
            while p < v.len() {
                let op = v[p];
                if is_zero(op) {
                    out.push_str(&format!("z:{} ", zero_len(op)));
                    p += 1;
                } else if is_xzero(op) {
                    out.push_str(&format!("Z:{} ", xzero_len(op, at_or_zero(v, p + 1))));
                    p += 2;
                } else {
                    out.push_str(&format!("v:{},{} ", val_value(op), val_len(op)));
                    p += 1;
                }
            }
            Ok(Reply::bulk(Bytes::from(out.trim_matches(' ').to_string())))
        }
        b"ENCODING" => Ok(Reply::Status(
            if v[4] == DENSE { "dense" } else { "sparse" }.into(),
        )),
        b"TODENSE" => {
            let conv = v[4] == SPARSE;
            if conv {
                *v = sparse_to_dense(v).ok_or_else(invalid)?;
                *changed = true;
            }
            Ok(Reply::Int(conv as i64))
        }
        _ => Err(CommandError::msg(format!(
            "ERR Unknown PFDEBUG subcommand '{}'",
            String::from_utf8_lossy(sub)
        ))),
    }
}

/// Redis's PFSELFTEST: register access, then the estimate's error of a dense and a sparse
/// HyperLogLog fed the same 10M elements (which must agree).
fn pfselftest(_ctx: &mut Ctx<'_>, _args: &mut Args<'_>) -> CmdResult {
    use crate::store::eviction::rand_u64;
    let mut dense = vec![0u8; DENSE_SIZE];
    dense[..4].copy_from_slice(b"HYLL");
    let mut bytecounters = vec![0u8; REGISTERS];
    for _ in 0..TEST_CYCLES {
        for (i, b) in bytecounters.iter_mut().enumerate() {
            let r = (rand_u64() as u8) & REGISTER_MAX;
            *b = r;
            dense_set_register(&mut dense[HDR..], i, r);
        }
        for (i, &b) in bytecounters.iter().enumerate() {
            let val = dense_get(&dense[HDR..], i);
            if val != b {
                return Err(CommandError::msg(format!(
                    "TESTFAILED Register {i} should be {b} but is {val}"
                )));
            }
        }
    }
    dense[HDR..].fill(0);
    let mut sparse = create();
    let max_bytes = sparse_max_bytes();
    let relerr = 1.04 / (REGISTERS as f64).sqrt();
    let mut checkpoint: u64 = 1;
    let seed = rand_u64();
    for j in 1..=10_000_000u64 {
        let ele = (j ^ seed).to_ne_bytes();
        let (index, count) = pat_len(&ele);
        dense_set(&mut dense[HDR..], index, count);
        add(&mut sparse, &ele, max_bytes);
        if j != checkpoint {
            continue;
        }
        if j < (max_bytes / 2) as u64 && sparse[4] != SPARSE {
            return Err(CommandError::msg("TESTFAILED sparse encoding not used"));
        }
        let card = count_of(&dense);
        if card != count_of(&sparse) {
            return Err(CommandError::msg("TESTFAILED dense/sparse disagree"));
        }
        let abserr = (checkpoint as i64 - card as i64).unsigned_abs();
        let mut maxerr = (relerr * 6.0 * checkpoint as f64).ceil() as u64;
        if j == 10 {
            maxerr = 1;
        }
        if abserr > maxerr {
            return Err(CommandError::msg(format!(
                "TESTFAILED Too big error. card:{checkpoint} abserr:{abserr}"
            )));
        }
        checkpoint *= 10;
    }
    Ok(Reply::ok())
}

const TEST_CYCLES: usize = 1000;

fn count_of(v: &[u8]) -> u64 {
    count(v).unwrap_or(0)
}
