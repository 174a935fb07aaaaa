//! The bitmap family: SETBIT GETBIT BITCOUNT BITPOS BITOP BITFIELD BITFIELD_RO, over string
//! values, as Redis 7.0's `bitops.c` (replies, error texts, order of checks, keyspace events).
//! Table rows first, handlers below.
//!
//! A write grows the string in place (its bytes are taken out of the value, extended and put
//! back, never copied) up to the farthest byte it really writes; bit offsets are bounded by
//! `proto-max-bulk-len`, so no client number can make it allocate more than that.
use crate::commands::args::{Args, CommandError, CommandResult, Token};
use crate::commands::spec::{acl, family, flag::*, Begin, CmdResult, CommandSpec, Find, KeySpec};
use crate::commands::Ctx;
use crate::protocol::Reply;
use crate::state::pubsub::class;
use crate::store::{Ttl, Value};
use crate::util::num::parse_i64;
use bytes::Bytes;
use std::sync::atomic::Ordering;

const FAMILY: CommandSpec = family("bitmap", acl::BITMAP);

/// A key spec at argument `index`, `last` more keys after it (negative: to the end).
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

const RO_ACCESS: &[KeySpec] = &[at(&["RO", "access"], 1, 0)];
const RW_ACCESS_UPDATE: &[KeySpec] = &[at(&["RW", "access", "update"], 1, 0)];
const BITFIELD_KEYS: &[KeySpec] = &[at(&["RW", "access", "update", "variable_flags"], 1, 0)];

/// BITFIELD's key flags for one call, as Redis's `bitfieldGetKeys`: only GETs (and
/// OVERFLOW) read the key; a SET, INCRBY or anything malformed may write it.
fn bitfield_key_flags(args: &[bytes::Bytes]) -> &'static [&'static str] {
    let mut i = 2;
    while i < args.len() {
        let rem = args.len() - i - 1;
        let a = &args[i];
        if a.eq_ignore_ascii_case(b"get") && rem >= 2 {
            i += 3;
        } else if a.eq_ignore_ascii_case(b"overflow") && rem >= 1 {
            i += 2;
        } else {
            return &["RW", "access", "update"];
        }
    }
    &["RO", "access"]
}
const BITOP_KEYS: &[KeySpec] = &[at(&["OW", "update"], 2, 0), at(&["RO", "access"], 3, -1)];

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    FAMILY.cmd("setbit", 4, setbit).flags(WRITE | DENYOOM).key().key_specs(RW_ACCESS_UPDATE)
        .doc("2.2.0", "Sets or clears the bit at offset in the string value stored at key")
        .args("key:key offset:integer value:integer"),
    FAMILY.cmd("getbit", 3, getbit).flags(READONLY | FAST).key().key_specs(RO_ACCESS)
        .doc("2.2.0", "Returns the bit value at offset in the string value stored at key")
        .args("key:key offset:integer"),
    FAMILY.cmd("bitcount", -2, bitcount).flags(READONLY).key().key_specs(RO_ACCESS)
        .doc("2.6.0", "Count set bits in a string").complexity("O(N)")
        .args("key:key [index:{start:integer end:integer [index_unit:(BYTE|BIT)]}]"),
    FAMILY.cmd("bitpos", -3, bitpos).flags(READONLY).key().key_specs(RO_ACCESS)
        .doc("2.8.7", "Find first bit set or clear in a string").complexity("O(N)")
        .args("key:key bit:integer [index:{start:integer [end_index:{end:integer [index_unit:(BYTE|BIT)]}]}]"),
    FAMILY.cmd("bitop", -4, bitop).flags(WRITE | DENYOOM).keys(2, -1, 1).key_specs(BITOP_KEYS)
        .doc("2.6.0", "Perform bitwise operations between strings").complexity("O(N)")
        .args("operation destkey:key key:key..."),
    FAMILY.cmd("bitfield", -2, bitfield).flags(WRITE | DENYOOM).key().key_specs(BITFIELD_KEYS).key_flags(bitfield_key_flags)
        .doc("3.2.0", "Perform arbitrary bitfield integer operations on strings")
        .complexity("O(1) for each subcommand specified")
        .args("key:key [operation:(GET=encoding_offset:{encoding offset:integer}|write:{[OVERFLOW=wrap_sat_fail:(WRAP|SAT|FAIL)] write_operation:(SET=encoding_offset_value:{encoding offset:integer value:integer}|INCRBY=encoding_offset_increment:{encoding offset:integer increment:integer})})...]"),
    FAMILY.cmd("bitfield_ro", -2, bitfield_ro).flags(READONLY | FAST).key().key_specs(RO_ACCESS)
        .doc("6.0.0", "Perform arbitrary bitfield integer operations on strings. Read-only variant of BITFIELD")
        .complexity("O(1) for each subcommand specified")
        .args("key:key [GET=encoding_offset:{encoding offset:integer}+...]"),
];

const BIT_OFFSET_ERR: &str = "ERR bit offset is not an integer or out of range";
const BIT_VALUE_ERR: &str = "ERR bit is not an integer or out of range";
const BITFIELD_TYPE_ERR: &str =
    "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.";

/// Runs `f` on the bytes of a string value (an integer as its decimal text); `None` for a
/// value of another type. Never copies the string.
pub(crate) fn with_string<R>(v: &Value, f: impl FnOnce(&[u8]) -> R) -> Option<R> {
    match v {
        Value::Str(b) | Value::Raw(b) => Some(f(b)),
        Value::Int(i) => Some(f(itoa::Buffer::new().format(*i).as_bytes())),
        _ => None,
    }
}

/// Takes a string value's bytes out of it (leaving a placeholder), without copying them.
pub(crate) fn take_string(v: &mut Value) -> Option<Vec<u8>> {
    match std::mem::replace(v, Value::Int(0)) {
        Value::Str(b) | Value::Raw(b) => Some(b.into_box().into_vec()),
        Value::Int(i) => Some(itoa::Buffer::new().format(i).as_bytes().to_vec()),
        other => {
            *v = other;
            None
        }
    }
}

fn is_string(v: &Value) -> bool {
    matches!(v, Value::Str(_) | Value::Raw(_) | Value::Int(_))
}

fn max_bulk_len(ctx: &Ctx<'_>) -> u64 {
    ctx.server
        .conn_settings
        .max_bulk_len
        .load(Ordering::Relaxed)
}

/// Redis's `getBitOffsetFromArgument`: a non-negative bit offset whose byte is below
/// `proto-max-bulk-len`; with `bits` > 0 (BITFIELD) `#n` means `n * bits`.
fn bit_offset(arg: &[u8], bits: u32, max_bulk: u64) -> CommandResult<u64> {
    let hash = bits > 0 && arg.first() == Some(&b'#');
    let digits = if hash { &arg[1..] } else { arg };
    let mut off = parse_i64(digits).ok_or_else(|| CommandError::msg(BIT_OFFSET_ERR))?;
    if hash {
        off = off.wrapping_mul(bits as i64);
    }
    if off < 0 || (off as u64 >> 3) >= max_bulk {
        return Err(CommandError::msg(BIT_OFFSET_ERR));
    }
    Ok(off as u64)
}

/// Redis's `lookupStringForBitCommand` and the write that follows: the string at `key` is
/// created or zero-padded so that bit `maxbit` exists, then `f` runs on its bytes with
/// `dirty` (created or grown). `f` returns its result and whether it changed anything. The
/// key keeps its deadline and becomes a `raw` string, as after Redis's `dbUnshareStringValue`.
fn write_bits<R>(
    ctx: &mut Ctx<'_>,
    key: &Bytes,
    maxbit: u64,
    f: impl FnOnce(&mut [u8], bool) -> (R, bool),
) -> CommandResult<R> {
    let need = (maxbit >> 3) as usize + 1;
    ctx.server.store.with_key(ctx.client.db, key, |ks, h| {
        match ks.peek(h, key) {
            None => {
                let mut v = vec![0u8; need];
                let (r, _) = f(&mut v, true);
                ks.set(h, key, Value::raw(v), Ttl::Clear);
                return Ok(r);
            }
            Some(e) if !is_string(&e.value) => return Err(CommandError::wrongtype()),
            Some(_) => {}
        }
        ks.update(h, key, |v| {
            let Some(mut buf) = take_string(v) else {
                return (Err(CommandError::wrongtype()), false);
            };
            let old_len = buf.len();
            if buf.len() < need {
                buf.reserve_exact(need - buf.len());
                buf.resize(need, 0);
            }
            let dirty = buf.len() != old_len;
            let (r, changed) = f(&mut buf, dirty);
            *v = Value::raw(buf);
            (Ok(r), changed)
        })
        .unwrap_or_else(|| Err(CommandError::wrongtype()))
    })
}

fn setbit(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let key = args.next_key()?;
    let off = bit_offset(args.next_arg()?, 0, max_bulk_len(ctx))?;
    let on = match parse_i64(args.next_arg()?) {
        Some(v) if v & !1 == 0 => v == 1,
        _ => return Err(CommandError::msg(BIT_VALUE_ERR)),
    };
    let byte = (off >> 3) as usize;
    let mask = 1u8 << (7 - (off & 7));
    let (old, changed) = write_bits(ctx, key, off, |buf, dirty| {
        let old = buf[byte] & mask != 0;
        let changed = dirty || old != on;
        if changed {
            if on {
                buf[byte] |= mask;
            } else {
                buf[byte] &= !mask;
            }
        }
        ((old, changed), changed)
    })?;
    if changed {
        ctx.server
            .notify(ctx.client.db, class::STRING, "setbit", key);
    }
    Ok(Reply::Int(old as i64))
}

fn getbit(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let key = args.next_key()?;
    let off = bit_offset(args.next_arg()?, 0, max_bulk_len(ctx))?;
    let byte = (off >> 3) as usize;
    let mask = 1u8 << (7 - (off & 7));
    ctx.server
        .store
        .with_key(ctx.client.db, key, |ks, h| match ks.get(h, key) {
            None => Ok(Reply::Int(0)),
            Some(e) => with_string(&e.value, |s| {
                Reply::Int(s.get(byte).is_some_and(|b| b & mask != 0) as i64)
            })
            .ok_or_else(CommandError::wrongtype),
        })
}

/// Set bits in `s`.
fn popcount(s: &[u8]) -> i64 {
    let mut chunks = s.chunks_exact(8);
    let mut n: u64 = 0;
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        n += u64::from_ne_bytes(w).count_ones() as u64;
    }
    n += chunks
        .remainder()
        .iter()
        .map(|b| b.count_ones() as u64)
        .sum::<u64>();
    n as i64
}

/// Redis's `redisBitpos`: the position of the first bit equal to `bit` in `s`; for a set bit
/// -1 when there is none, for a clear bit `8 * len` when there is none (the string is taken
/// as zero-padded on the right).
fn first_bit(s: &[u8], bit: bool) -> i64 {
    let skip = if bit { 0u8 } else { 0xff };
    let skip_word = if bit { 0u64 } else { u64::MAX };
    let mut base = 0usize;
    let mut chunks = s.chunks_exact(8);
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        if u64::from_ne_bytes(w) != skip_word {
            break;
        }
        base += 8;
    }
    match s[base..].iter().position(|&b| b != skip) {
        None if bit => -1,
        None => s.len() as i64 * 8,
        Some(i) => {
            let b = s[base + i];
            let lz = if bit {
                b.leading_zeros()
            } else {
                (!b).leading_zeros()
            };
            ((base + i) * 8) as i64 + lz as i64
        }
    }
}

/// A BYTE|BIT unit argument.
fn index_unit(arg: &[u8]) -> CommandResult<bool> {
    match &*Token::of(arg) {
        b"BIT" => Ok(true),
        b"BYTE" => Ok(false),
        _ => Err(CommandError::syntax()),
    }
}

/// The edge masks of a bit range, and the range turned into bytes (Redis's
/// `first_byte_neg_mask` / `last_byte_neg_mask`).
fn bit_range_to_bytes(start: &mut i64, end: &mut i64) -> (u8, u8) {
    let first = !((1u32 << (8 - (*start & 7))) - 1) as u8;
    let last = ((1u32 << (7 - (*end & 7))) - 1) as u8;
    *start >>= 3;
    *end >>= 3;
    (first, last)
}

fn bitcount(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let key = args.next_key()?;
    let rest = args.rest();
    // The arguments are checked before the key is looked up, as Redis 7.4 does (7.0 answered
    // 0 for a missing key whatever followed it).
    match rest.len() {
        0 => {}
        2 | 3 => {
            parse_i64(&rest[0]).ok_or_else(CommandError::not_integer)?;
            parse_i64(&rest[1]).ok_or_else(CommandError::not_integer)?;
            if let Some(u) = rest.get(2) {
                index_unit(u)?;
            }
        }
        _ => return Err(CommandError::syntax()),
    }
    ctx.server.store.with_key(ctx.client.db, key, |ks, h| {
        let Some(e) = ks.get(h, key) else {
            return Ok(Reply::Int(0));
        };
        with_string(&e.value, |p| bitcount_of(p, rest)).ok_or_else(CommandError::wrongtype)?
    })
}

fn bitcount_of(p: &[u8], rest: &[Bytes]) -> CmdResult {
    let strlen = p.len() as i64;
    let (mut start, mut end);
    let (mut first_mask, mut last_mask) = (0u8, 0u8);
    match rest.len() {
        2 | 3 => {
            let mut totlen = strlen;
            start = parse_i64(&rest[0]).ok_or_else(CommandError::not_integer)?;
            end = parse_i64(&rest[1]).ok_or_else(CommandError::not_integer)?;
            if start < 0 && end < 0 && start > end {
                return Ok(Reply::Int(0));
            }
            let isbit = match rest.get(2) {
                Some(u) => index_unit(u)?,
                None => false,
            };
            if isbit {
                totlen <<= 3;
            }
            if start < 0 {
                start += totlen;
            }
            if end < 0 {
                end += totlen;
            }
            start = start.max(0);
            end = end.max(0);
            if end >= totlen {
                end = totlen - 1;
            }
            if isbit && start <= end {
                (first_mask, last_mask) = bit_range_to_bytes(&mut start, &mut end);
            }
        }
        0 => {
            start = 0;
            end = strlen - 1;
        }
        _ => return Err(CommandError::syntax()),
    }
    if start > end {
        return Ok(Reply::Int(0));
    }
    let (s, e) = (start as usize, end as usize);
    let mut count = popcount(&p[s..=e]);
    if first_mask != 0 {
        count -= (p[s] & first_mask).count_ones() as i64;
    }
    if last_mask != 0 {
        count -= (p[e] & last_mask).count_ones() as i64;
    }
    Ok(Reply::Int(count))
}

fn bitpos(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let key = args.next_key()?;
    let bit = args.next_i64()?;
    if bit != 0 && bit != 1 {
        return Err(CommandError::msg("ERR The bit argument must be 1 or 0."));
    }
    let bit = bit == 1;
    let rest = args.rest();
    // Checked before the lookup, in Redis 7.4's order (start, unit, end).
    match rest.len() {
        0 => {}
        1..=3 => {
            parse_i64(&rest[0]).ok_or_else(CommandError::not_integer)?;
            if let Some(u) = rest.get(2) {
                index_unit(u)?;
            }
            if let Some(e) = rest.get(1) {
                parse_i64(e).ok_or_else(CommandError::not_integer)?;
            }
        }
        _ => return Err(CommandError::syntax()),
    }
    ctx.server.store.with_key(ctx.client.db, key, |ks, h| {
        let Some(e) = ks.get(h, key) else {
            return Ok(Reply::Int(if bit { -1 } else { 0 }));
        };
        with_string(&e.value, |p| bitpos_of(p, bit, rest)).ok_or_else(CommandError::wrongtype)?
    })
}

fn bitpos_of(p: &[u8], bit: bool, rest: &[Bytes]) -> CmdResult {
    let strlen = p.len() as i64;
    let (mut start, mut end);
    let mut end_given = false;
    let (mut first_mask, mut last_mask) = (0u8, 0u8);
    match rest.len() {
        1..=3 => {
            let mut totlen = strlen;
            start = parse_i64(&rest[0]).ok_or_else(CommandError::not_integer)?;
            let isbit = match rest.get(2) {
                Some(u) => index_unit(u)?,
                None => false,
            };
            if let Some(e) = rest.get(1) {
                end = parse_i64(e).ok_or_else(CommandError::not_integer)?;
                end_given = true;
            } else if isbit {
                end = (totlen << 3) + 7;
            } else {
                end = totlen - 1;
            }
            if isbit {
                totlen <<= 3;
            }
            if start < 0 {
                start += totlen;
            }
            if end < 0 {
                end += totlen;
            }
            start = start.max(0);
            end = end.max(0);
            if end >= totlen {
                end = totlen - 1;
            }
            if isbit && start <= end {
                (first_mask, last_mask) = bit_range_to_bytes(&mut start, &mut end);
            }
        }
        0 => {
            start = 0;
            end = strlen - 1;
        }
        _ => return Err(CommandError::syntax()),
    }
    if start > end {
        return Ok(Reply::Int(-1));
    }
    let mut bytes = end - start + 1;
    let pos = 'result: {
        if first_mask != 0 {
            let mut tmp = if bit {
                p[start as usize] & !first_mask
            } else {
                p[start as usize] | first_mask
            };
            if last_mask != 0 && bytes == 1 {
                tmp = if bit {
                    tmp & !last_mask
                } else {
                    tmp | last_mask
                };
            }
            let pos = first_bit(&[tmp], bit);
            if bytes == 1 || (pos != -1 && pos != 8) {
                break 'result pos;
            }
            start += 1;
            bytes -= 1;
        }
        let curbytes = bytes - (last_mask != 0) as i64;
        if curbytes > 0 {
            let s = start as usize;
            let pos = first_bit(&p[s..s + curbytes as usize], bit);
            if bytes == curbytes || (pos != -1 && pos != curbytes << 3) {
                break 'result pos;
            }
            start += curbytes;
            bytes -= curbytes;
        }
        let tmp = if bit {
            p[end as usize] & !last_mask
        } else {
            p[end as usize] | last_mask
        };
        first_bit(&[tmp], bit)
    };
    // An explicit range has no zero padding on its right.
    if end_given && !bit && pos == bytes << 3 {
        return Ok(Reply::Int(-1));
    }
    Ok(Reply::Int(if pos != -1 { pos + (start << 3) } else { pos }))
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum BitOp {
    And,
    Or,
    Xor,
    Not,
}

/// Folds `src` into `res` (which holds the previous sources' result): shorter strings are
/// zero-padded to the longer.
fn fold(res: &mut Vec<u8>, src: &[u8], op: BitOp) {
    if src.len() > res.len() {
        res.resize(src.len(), 0);
    }
    match op {
        BitOp::And => {
            for (i, r) in res.iter_mut().enumerate() {
                *r &= src.get(i).copied().unwrap_or(0);
            }
        }
        BitOp::Or => res.iter_mut().zip(src).for_each(|(r, s)| *r |= s),
        BitOp::Xor => res.iter_mut().zip(src).for_each(|(r, s)| *r ^= s),
        BitOp::Not => {}
    }
}

fn bitop(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let op = match &*Token::of(args.next_arg()?) {
        b"AND" => BitOp::And,
        b"OR" => BitOp::Or,
        b"XOR" => BitOp::Xor,
        b"NOT" => BitOp::Not,
        _ => return Err(CommandError::syntax()),
    };
    let keys = args.rest();
    if op == BitOp::Not && keys.len() != 2 {
        return Err(CommandError::msg(
            "ERR BITOP NOT must be called with a single source key.",
        ));
    }
    let db = ctx.client.db;
    let mut l = ctx.server.store.lock_keys(keys);
    let mut res: Vec<u8> = Vec::new();
    for (i, k) in keys.iter().enumerate().skip(1) {
        let h = l.hash(i);
        match l.ks(i, db).get(h, k) {
            None if i == 1 => {}
            None => fold(&mut res, &[], op),
            Some(e) => with_string(&e.value, |s| {
                if i == 1 {
                    res.extend_from_slice(s);
                    if op == BitOp::Not {
                        res.iter_mut().for_each(|b| *b = !*b);
                    }
                } else {
                    fold(&mut res, s, op);
                }
            })
            .ok_or_else(CommandError::wrongtype)?,
        }
    }
    let len = res.len();
    let (dest, h) = (&keys[0], l.hash(0));
    if len > 0 {
        l.ks(0, db).set(h, dest, Value::raw(res), Ttl::Clear);
        ctx.server.notify(db, class::STRING, "set", dest);
    } else if l.ks(0, db).remove(h, dest).is_some() {
        ctx.server.notify(db, class::GENERIC, "del", dest);
    }
    Ok(Reply::Int(len as i64))
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Overflow {
    Wrap,
    Sat,
    Fail,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum FieldOp {
    Get,
    Set,
    IncrBy,
}

#[derive(Clone, Copy)]
struct Field {
    op: FieldOp,
    offset: u64,
    value: i64,
    overflow: Overflow,
    bits: u32,
    signed: bool,
}

/// Redis's `getBitfieldTypeFromArgument`: `i1`..`i64` or `u1`..`u63`.
fn bitfield_type(arg: &[u8]) -> CommandResult<(bool, u32)> {
    let err = || CommandError::msg(BITFIELD_TYPE_ERR);
    let signed = match arg.first() {
        Some(b'i') => true,
        Some(b'u') => false,
        _ => return Err(err()),
    };
    match parse_i64(&arg[1..]) {
        Some(n) if n >= 1 && n <= if signed { 64 } else { 63 } => Ok((signed, n as u32)),
        _ => Err(err()),
    }
}

fn get_unsigned(p: &[u8], mut offset: u64, bits: u32) -> u64 {
    let mut value = 0u64;
    for _ in 0..bits {
        let byte = p.get((offset >> 3) as usize).copied().unwrap_or(0);
        let bit = 7 - (offset & 7);
        value = (value << 1) | ((byte >> bit) & 1) as u64;
        offset += 1;
    }
    value
}

fn get_signed(p: &[u8], offset: u64, bits: u32) -> i64 {
    let mut value = get_unsigned(p, offset, bits) as i64;
    if bits < 64 && value & (1i64 << (bits - 1)) != 0 {
        value |= -1i64 << bits;
    }
    value
}

fn set_unsigned(p: &mut [u8], mut offset: u64, bits: u32, value: u64) {
    for j in 0..bits {
        let bitval = (value >> (bits - 1 - j)) & 1 != 0;
        let bit = 7 - (offset & 7);
        if let Some(b) = p.get_mut((offset >> 3) as usize) {
            if bitval {
                *b |= 1 << bit;
            } else {
                *b &= !(1 << bit);
            }
        }
        offset += 1;
    }
}

/// Redis's `checkUnsignedBitfieldOverflow`: whether `value + incr` leaves `bits` bits, and
/// the value WRAP or SAT would store.
fn unsigned_overflow(value: u64, incr: i64, bits: u32, ow: Overflow) -> (bool, u64) {
    let max = if bits == 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    };
    let maxincr = max.wrapping_sub(value) as i64;
    let minincr = value.wrapping_neg() as i64;
    let wrap = || value.wrapping_add(incr as u64) & max;
    if value > max || (incr > 0 && incr > maxincr) {
        (true, if ow == Overflow::Sat { max } else { wrap() })
    } else if incr < 0 && incr < minincr {
        (true, if ow == Overflow::Sat { 0 } else { wrap() })
    } else {
        (false, 0)
    }
}

/// Redis's `checkSignedBitfieldOverflow`.
fn signed_overflow(value: i64, incr: i64, bits: u32, ow: Overflow) -> (bool, i64) {
    let max = if bits == 64 {
        i64::MAX
    } else {
        (1i64 << (bits - 1)) - 1
    };
    let min = -max - 1;
    let maxincr = (max as u64).wrapping_sub(value as u64) as i64;
    let minincr = min.wrapping_sub(value);
    let wrap = || {
        let mut c = (value as u64).wrapping_add(incr as u64);
        if bits < 64 {
            let mask = u64::MAX << bits;
            if c & (1u64 << (bits - 1)) != 0 {
                c |= mask;
            } else {
                c &= !mask;
            }
        }
        c as i64
    };
    let b64 = bits == 64;
    if value > max || (!b64 && incr > maxincr) || (value >= 0 && incr > 0 && incr > maxincr) {
        (true, if ow == Overflow::Sat { max } else { wrap() })
    } else if value < min || (!b64 && incr < minincr) || (value < 0 && incr < 0 && incr < minincr) {
        (true, if ow == Overflow::Sat { min } else { wrap() })
    } else {
        (false, 0)
    }
}

/// Reads BITFIELD's subcommands as Redis does: all of them are parsed (and every error
/// answered) before anything is read or written.
fn parse_fields(args: &[Bytes], max_bulk: u64) -> CommandResult<(Vec<Field>, Option<u64>)> {
    let mut ops = Vec::new();
    let mut overflow = Overflow::Wrap;
    let mut highest_write: Option<u64> = None;
    let mut j = 0;
    while j < args.len() {
        let remargs = args.len() - j - 1;
        let op = match &*Token::of(&args[j]) {
            b"GET" if remargs >= 2 => FieldOp::Get,
            b"SET" if remargs >= 3 => FieldOp::Set,
            b"INCRBY" if remargs >= 3 => FieldOp::IncrBy,
            b"OVERFLOW" if remargs >= 1 => {
                overflow = match &*Token::of(&args[j + 1]) {
                    b"WRAP" => Overflow::Wrap,
                    b"SAT" => Overflow::Sat,
                    b"FAIL" => Overflow::Fail,
                    _ => return Err(CommandError::msg("ERR Invalid OVERFLOW type specified")),
                };
                j += 2;
                continue;
            }
            _ => return Err(CommandError::syntax()),
        };
        let (signed, bits) = bitfield_type(&args[j + 1])?;
        let offset = bit_offset(&args[j + 2], bits, max_bulk)?;
        let mut value = 0;
        if op != FieldOp::Get {
            let last = offset + bits as u64 - 1;
            highest_write = Some(highest_write.map_or(last, |h| h.max(last)));
            value = parse_i64(&args[j + 3]).ok_or_else(CommandError::not_integer)?;
        }
        ops.push(Field {
            op,
            offset,
            value,
            overflow,
            bits,
            signed,
        });
        j += if op == FieldOp::Get { 3 } else { 4 };
    }
    Ok((ops, highest_write))
}

fn field_get(p: &[u8], f: &Field) -> Reply {
    if f.signed {
        Reply::Int(get_signed(p, f.offset, f.bits))
    } else {
        Reply::Int(get_unsigned(p, f.offset, f.bits) as i64)
    }
}

/// One SET or INCRBY on `p`: its reply and whether it changed the stored bits.
fn field_write(p: &mut [u8], f: &Field) -> (Reply, bool) {
    let incr = f.op == FieldOp::IncrBy;
    if f.signed {
        let old = get_signed(p, f.offset, f.bits);
        let (overflow, new, ret) = if incr {
            let (o, w) = signed_overflow(old, f.value, f.bits, f.overflow);
            let new = if o { w } else { old.wrapping_add(f.value) };
            (o, new, new)
        } else {
            let (o, w) = signed_overflow(f.value, 0, f.bits, f.overflow);
            (o, if o { w } else { f.value }, old)
        };
        if overflow && f.overflow == Overflow::Fail {
            return (Reply::Nil, false);
        }
        set_unsigned(p, f.offset, f.bits, new as u64);
        (Reply::Int(ret), old != new)
    } else {
        let old = get_unsigned(p, f.offset, f.bits);
        let (overflow, new, ret) = if incr {
            let (o, w) = unsigned_overflow(old, f.value, f.bits, f.overflow);
            let new = if o {
                w
            } else {
                old.wrapping_add(f.value as u64)
            };
            (o, new, new)
        } else {
            let v = f.value as u64;
            let (o, w) = unsigned_overflow(v, 0, f.bits, f.overflow);
            (o, if o { w } else { v }, old)
        };
        if overflow && f.overflow == Overflow::Fail {
            return (Reply::Nil, false);
        }
        set_unsigned(p, f.offset, f.bits, new);
        (Reply::Int(ret as i64), old != new)
    }
}

fn bitfield_generic(ctx: &mut Ctx<'_>, args: &mut Args<'_>, readonly_cmd: bool) -> CmdResult {
    let key = args.next_key()?;
    let (ops, highest_write) = parse_fields(args.rest(), max_bulk_len(ctx))?;
    let Some(highest) = highest_write else {
        // Only GETs: a read, a missing key reads as zeros.
        return ctx.server.store.with_key(ctx.client.db, key, |ks, h| {
            let out = |p: &[u8]| Reply::Array(ops.iter().map(|f| field_get(p, f)).collect());
            match ks.get(h, key) {
                None => Ok(out(&[])),
                Some(e) => with_string(&e.value, out).ok_or_else(CommandError::wrongtype),
            }
        });
    };
    if readonly_cmd {
        return Err(CommandError::msg(
            "ERR BITFIELD_RO only supports the GET subcommand",
        ));
    }
    let (replies, changes) = write_bits(ctx, key, highest, |buf, dirty| {
        let mut changes = 0;
        let replies: Vec<Reply> = ops
            .iter()
            .map(|f| {
                if f.op == FieldOp::Get {
                    return field_get(buf, f);
                }
                let (r, changed) = field_write(buf, f);
                if !matches!(r, Reply::Nil) && (dirty || changed) {
                    changes += 1;
                }
                r
            })
            .collect();
        ((replies, changes), changes > 0)
    })?;
    if changes > 0 {
        ctx.server
            .notify(ctx.client.db, class::STRING, "setbit", key);
    }
    Ok(Reply::Array(replies))
}

fn bitfield(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    bitfield_generic(ctx, args, false)
}

fn bitfield_ro(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    bitfield_generic(ctx, args, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_bit_matches_redis_bitpos() {
        assert_eq!(first_bit(&[], true), -1);
        assert_eq!(first_bit(&[], false), 0);
        assert_eq!(first_bit(&[0xff; 20], false), 160);
        assert_eq!(first_bit(&[0; 20], true), -1);
        let mut v = vec![0u8; 19];
        v[17] = 0x10;
        assert_eq!(first_bit(&v, true), 17 * 8 + 3);
        assert_eq!(first_bit(&[0xff, 0xfe], false), 15);
    }

    #[test]
    fn bitfield_overflow_rules() {
        assert_eq!(unsigned_overflow(255, 1, 8, Overflow::Wrap), (true, 0));
        assert_eq!(unsigned_overflow(255, 1, 8, Overflow::Sat), (true, 255));
        assert_eq!(unsigned_overflow(0, -1, 8, Overflow::Sat), (true, 0));
        assert_eq!(unsigned_overflow(0, -1, 8, Overflow::Wrap), (true, 255));
        assert_eq!(signed_overflow(127, 1, 8, Overflow::Wrap), (true, -128));
        assert_eq!(signed_overflow(-128, -1, 8, Overflow::Sat), (true, -128));
        assert_eq!(
            signed_overflow(i64::MAX, 1, 64, Overflow::Wrap),
            (true, i64::MIN)
        );
        assert!(!signed_overflow(5, 1, 64, Overflow::Wrap).0);
        let mut p = [0u8; 2];
        set_unsigned(&mut p, 4, 8, 0xab);
        assert_eq!(p, [0x0a, 0xb0]);
        assert_eq!(get_unsigned(&p, 4, 8), 0xab);
        assert_eq!(get_signed(&p, 4, 8), 0xab - 256);
        assert_eq!(get_unsigned(&p, 12, 8), 0);
    }
}
