//! KeyString: an order-preserving byte encoding of BSON values. `memcmp` order of two
//! encodings equals [`order::compare`] of the values, and equal values (`1`, `1.0`,
//! `NumberLong(1)`) encode to the same bytes, so the encoding can key hash maps (the `_id`
//! map, shard choice) and ordered maps (secondary indexes) alike.
//!
//! Layout: one type byte (the canonical rank + 1, so `0` is free as a terminator), then a
//! body whose bytes sort like the values. Strings are escaped (`00` → `00 FF`) and end in
//! `00 00`; objects and arrays list their elements and end in `00`, so a shorter prefix sorts
//! first and encodings concatenate safely into compound keys.
//!
//! Known limit: Decimal128 values are encoded through their f64 value, so two decimals that
//! differ beyond double precision encode equal.

use crate::documents::order;
use bson::Bson;

/// Where an encoding is written: a vector, or a short buffer on the stack (a key read only
/// for one lookup or one index move needs no heap allocation).
pub trait KeyOut {
    fn push(&mut self, b: u8);
    fn extend_from_slice(&mut self, s: &[u8]);
    fn reserve(&mut self, n: usize);
}

impl KeyOut for Vec<u8> {
    fn push(&mut self, b: u8) {
        Vec::push(self, b)
    }
    fn extend_from_slice(&mut self, s: &[u8]) {
        Vec::extend_from_slice(self, s)
    }
    fn reserve(&mut self, n: usize) {
        Vec::reserve(self, n)
    }
}

impl<const N: usize> KeyOut for smallvec::SmallVec<[u8; N]> {
    fn push(&mut self, b: u8) {
        smallvec::SmallVec::push(self, b)
    }
    fn extend_from_slice(&mut self, s: &[u8]) {
        smallvec::SmallVec::extend_from_slice(self, s)
    }
    fn reserve(&mut self, n: usize) {
        smallvec::SmallVec::reserve(self, n)
    }
}

/// A key built for one use, inline up to 32 bytes (an `_id` of up to 29 ASCII bytes).
pub type ShortKey = smallvec::SmallVec<[u8; 32]>;

/// Whether `key` is the encoding of the raw value `v`, without building either: the `_id`
/// map stores no key and checks each hash hit against the document's own `_id`, once per
/// lookup by `_id` (FIND, FINDONE, TOUCH, UPDATE and DELETE by `_id`). Strings and
/// ObjectIds (nearly every `_id`) compare in place; other types are encoded.
pub fn raw_matches(v: bson::RawBsonRef<'_>, key: &[u8]) -> bool {
    use bson::RawBsonRef;
    match v {
        RawBsonRef::String(s) => {
            let Some((&tag, mut rest)) = key.split_first() else {
                return false;
            };
            if tag != order::STRING_RANK + 1 {
                return false;
            }
            let s = s.as_bytes();
            // Without a zero byte a string's encoding is its bytes and `00 00`.
            if !has_zero_byte(s) {
                return rest.len() == s.len() + 2
                    && rest[..s.len()] == *s
                    && rest[s.len()..] == [0, 0];
            }
            for &b in s {
                let esc: &[u8] = if b == 0 {
                    &[0, 0xFF]
                } else {
                    std::slice::from_ref(&b)
                };
                match rest.strip_prefix(esc) {
                    Some(r) => rest = r,
                    None => return false,
                }
            }
            rest == [0, 0]
        }
        RawBsonRef::ObjectId(o) => {
            key.len() == 13
                && key[0] == order::rank(&Bson::ObjectId(o)) + 1
                && key[1..] == o.bytes()
        }
        other => match Bson::try_from(other) {
            Ok(b) => {
                let mut k = Vec::with_capacity(key.len());
                encode_into(&b, &mut k);
                k == key
            }
            Err(_) => false,
        },
    }
}

/// The encoding of one value.
pub fn encode(v: &Bson) -> Vec<u8> {
    let mut out = Vec::with_capacity(16);
    encode_into(v, &mut out);
    out
}

/// The encoding of a string given as its bytes (a stored document's value, read in place:
/// the same bytes as [`encode`] of the `Bson::String`).
pub fn encode_str(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len() + 3);
    encode_str_into(s, &mut out);
    out
}

/// Appends [`encode_str`]'s bytes to `out` (several keys built in one buffer).
pub fn encode_str_into(s: &[u8], out: &mut impl KeyOut) {
    out.push(order::STRING_RANK + 1);
    string(s, out);
}

/// Appends the encoding of `v` to `out` (compound keys are concatenations).
pub fn encode_into(v: &Bson, out: &mut impl KeyOut) {
    out.push(order::rank(v) + 1);
    match v {
        Bson::MinKey | Bson::MaxKey | Bson::Null | Bson::Undefined => {}
        Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_) => number(v, out),
        Bson::String(s) | Bson::Symbol(s) => string(s.as_bytes(), out),
        Bson::Document(d) => {
            for (k, e) in d {
                out.push(order::rank(e) + 1);
                string(k.as_bytes(), out);
                encode_into(e, out);
            }
            out.push(0);
        }
        Bson::Array(a) => {
            for e in a {
                out.push(order::rank(e) + 1);
                encode_into(e, out);
            }
            out.push(0);
        }
        Bson::Binary(b) => {
            out.extend_from_slice(&(b.bytes.len() as u32).to_be_bytes());
            out.push(u8::from(b.subtype));
            out.extend_from_slice(&b.bytes);
        }
        Bson::ObjectId(o) => out.extend_from_slice(&o.bytes()),
        Bson::Boolean(b) => out.push(*b as u8),
        Bson::DateTime(d) => out.extend_from_slice(&flip_i64(d.timestamp_millis())),
        Bson::Timestamp(t) => {
            out.extend_from_slice(&t.time.to_be_bytes());
            out.extend_from_slice(&t.increment.to_be_bytes());
        }
        Bson::RegularExpression(r) => {
            string(r.pattern.as_str().as_bytes(), out);
            string(r.options.as_str().as_bytes(), out);
        }
        Bson::JavaScriptCode(c) => string(c.as_bytes(), out),
        Bson::JavaScriptCodeWithScope(c) => string(c.code.as_bytes(), out),
        Bson::DbPointer(_) => {}
    }
}

fn string(s: &[u8], out: &mut impl KeyOut) {
    // Nearly every string has no zero byte: one copy instead of a push per byte, which was
    // half the cost of a short key.
    if !has_zero_byte(s) {
        out.reserve(s.len() + 2);
        out.extend_from_slice(s);
    } else {
        for &b in s {
            out.push(b);
            if b == 0 {
                out.push(0xFF);
            }
        }
    }
    out.extend_from_slice(&[0, 0]);
}

/// Whether `s` holds a zero byte, tested a word at a time. Why not `contains(&0)` or the
/// memchr crate: both walk a slice shorter than 16 bytes byte by byte, and the `_id`s and
/// index keys tested here mostly are that short (134 instructions for a 12-byte `_id`, once
/// to encode it and once more per `_id` map hit).
#[inline]
pub fn has_zero_byte(s: &[u8]) -> bool {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);
    // Nonzero exactly when some byte of `w` is zero.
    let zero_in = |w: [u8; 8]| {
        let w = u64::from_ne_bytes(w);
        w.wrapping_sub(ONES) & !w & HIGH != 0
    };
    let word = |b: &[u8]| {
        let mut w = [0u8; 8];
        w.copy_from_slice(b);
        w
    };
    if s.len() < 8 {
        let mut w = [0xFF; 8];
        w[..s.len()].copy_from_slice(s);
        return zero_in(w);
    }
    let mut words = s.chunks_exact(8);
    if words.by_ref().any(|c| zero_in(word(c))) {
        return true;
    }
    // The tail, read as the last eight bytes (overlapping bytes already tested).
    !words.remainder().is_empty() && zero_in(word(&s[s.len() - 8..]))
}

fn flip_i64(i: i64) -> [u8; 8] {
    ((i as u64) ^ (1 << 63)).to_be_bytes()
}

/// A double's bits rearranged so unsigned comparison follows numeric order.
fn ordered_f64(d: f64) -> [u8; 8] {
    let bits = d.to_bits();
    let o = if bits >> 63 == 1 {
        !bits
    } else {
        bits | (1 << 63)
    };
    o.to_be_bytes()
}

const TWO_63: f64 = 9.223_372_036_854_776e18;

/// Numbers: a class byte (NaN < below i64 < in i64 range < above i64), then for the i64
/// range the floor as an ordered i64 and the fraction as an ordered double, which is exact
/// for every Int32, Int64 and Double and equal across types for equal values.
fn number(v: &Bson, out: &mut impl KeyOut) {
    let (floor, frac) = match v {
        Bson::Int32(i) => (*i as i64, 0.0),
        Bson::Int64(i) => (*i, 0.0),
        _ => {
            let d = order::as_f64(v).unwrap_or(f64::NAN);
            if d.is_nan() {
                out.push(0);
                return;
            }
            if d < -TWO_63 {
                out.push(1);
                out.extend_from_slice(&ordered_f64(d));
                return;
            }
            if d >= TWO_63 {
                out.push(3);
                out.extend_from_slice(&ordered_f64(d));
                return;
            }
            let f = d.floor();
            (f as i64, d - f)
        }
    };
    out.push(2);
    out.extend_from_slice(&flip_i64(floor));
    out.extend_from_slice(&ordered_f64(frac));
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, oid::ObjectId, DateTime};
    use std::cmp::Ordering;

    /// The word-wise test says what `contains(&0)` says: every length up to 40, a zero at
    /// each place or none, among bytes that trip naive word tests (0x01, 0x80, 0xFF).
    #[test]
    fn has_zero_byte_is_contains_zero() {
        for len in 0..40 {
            for fill in [b'a', 0x01, 0x80, 0xFF] {
                let mut s: Vec<u8> = (0..len)
                    .map(|i| if i % 3 == 0 { fill } else { b'x' })
                    .collect();
                assert!(!has_zero_byte(&s), "{s:?}");
                for at in 0..len {
                    let was = s[at];
                    s[at] = 0;
                    assert!(has_zero_byte(&s), "{s:?}");
                    s[at] = was;
                }
            }
        }
    }

    /// A string's key matches its stored bytes through the short path, and one with a zero
    /// byte through the escaping loop.
    #[test]
    fn raw_matches_strings_with_and_without_zero_bytes() {
        for text in ["", "session-1", "a\0b", "\0", "ends\0"] {
            let d = doc! {"v": text};
            let raw = bson::RawDocumentBuf::try_from(&d).expect("raw");
            let v = raw.get("v").expect("read").expect("v");
            assert!(
                raw_matches(v, &encode(&Bson::String(text.to_string()))),
                "{text:?}"
            );
            assert!(
                !raw_matches(v, &encode(&Bson::String(format!("{text}x")))),
                "{text:?}"
            );
            assert!(!raw_matches(v, &encode(&Bson::Int32(1))), "{text:?}");
        }
    }

    #[test]
    fn equal_numbers_encode_equal() {
        assert_eq!(encode(&Bson::Int32(1)), encode(&Bson::Double(1.0)));
        assert_eq!(encode(&Bson::Int64(1)), encode(&Bson::Int32(1)));
        assert_eq!(encode(&Bson::Double(-0.0)), encode(&Bson::Int32(0)));
        let dec = Bson::Decimal128("1.0".parse().expect("static decimal"));
        assert_eq!(encode(&dec), encode(&Bson::Int32(1)));
    }

    #[test]
    fn memcmp_order_is_bson_order() {
        let vals = [
            Bson::MinKey,
            Bson::Null,
            Bson::Double(f64::NAN),
            Bson::Double(f64::NEG_INFINITY),
            Bson::Double(-1e300),
            Bson::Int64(i64::MIN),
            Bson::Double(-2.5),
            Bson::Int32(-2),
            Bson::Double(-0.5),
            Bson::Int32(0),
            Bson::Double(0.25),
            Bson::Int32(1),
            Bson::Double(1.5),
            Bson::Int64(9_007_199_254_740_993),
            Bson::Int64(i64::MAX),
            Bson::Double(1e300),
            Bson::Double(f64::INFINITY),
            Bson::String("".into()),
            Bson::String("a".into()),
            Bson::String("a\0".into()),
            Bson::String("ab".into()),
            Bson::String("b".into()),
            Bson::Document(doc! {}),
            Bson::Document(doc! {"a": 1}),
            Bson::Document(doc! {"a": 1, "b": 1}),
            Bson::Document(doc! {"a": 2}),
            Bson::Document(doc! {"a": "x"}),
            Bson::Document(doc! {"b": 1}),
            Bson::Array(vec![]),
            Bson::Array(vec![Bson::Int32(1)]),
            Bson::Array(vec![Bson::Int32(1), Bson::Int32(2)]),
            Bson::Array(vec![Bson::Int32(2)]),
            Bson::ObjectId(ObjectId::from_bytes([0; 12])),
            Bson::ObjectId(ObjectId::from_bytes([1; 12])),
            Bson::Boolean(false),
            Bson::Boolean(true),
            Bson::DateTime(DateTime::from_millis(-5)),
            Bson::DateTime(DateTime::from_millis(5)),
            Bson::MaxKey,
        ];
        for a in &vals {
            for b in &vals {
                let by_order = order::compare(a, b);
                let by_bytes = encode(a).cmp(&encode(b));
                assert_eq!(by_bytes, by_order, "{a:?} vs {b:?}");
            }
        }
        assert_eq!(
            encode(&Bson::Double(2.0)).cmp(&encode(&Bson::Int32(2))),
            Ordering::Equal
        );
    }
}

#[cfg(test)]
mod raw_matches_tests {
    use super::*;
    use bson::{doc, oid::ObjectId, RawDocumentBuf};

    /// The in-place comparison agrees with encoding, for the fast types and the others.
    #[test]
    fn agrees_with_encode() {
        let oid = ObjectId::new();
        let values = [
            Bson::String("abc".into()),
            Bson::String("a\0b".into()),
            Bson::String(String::new()),
            Bson::String("abd".into()),
            Bson::ObjectId(oid),
            Bson::Int32(7),
            Bson::Double(7.0),
            Bson::Int64(8),
            Bson::Document(doc! {"a": 1}),
        ];
        for a in &values {
            let raw = RawDocumentBuf::try_from(&doc! {"_id": a.clone()}).unwrap();
            let v = raw.get("_id").unwrap().unwrap();
            for b in &values {
                assert_eq!(
                    raw_matches(v, &encode(b)),
                    encode(a) == encode(b),
                    "{a:?} vs {b:?}"
                );
            }
        }
    }
}
