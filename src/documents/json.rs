//! Relaxed Extended JSON v2 text written straight from BSON (stored raw bytes or a decoded
//! `Document`), with no intermediate `serde_json::Value`: every document a read returns
//! goes through here. The output is byte for byte what `Bson::into_relaxed_extjson()`
//! stringified gives (the unit tests hold it to that over every BSON type).

use crate::documents::inplace::{Fixed, SetValue, NOW};
use crate::documents::rawbson;
use bson::spec::BinarySubtype;
use bson::{Bson, DateTime, Document, RawBsonRef, RawDocument, Timestamp};

/// Relaxed Extended JSON of a stored document, or `None` when its bytes do not decode.
pub fn raw_doc_json(doc: &RawDocument) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(doc.as_bytes().len() + doc.as_bytes().len() / 2 + 16);
    if write_stored(doc.as_bytes(), false, 0, &mut out).is_none() {
        out.clear();
        write_raw_doc(doc, &mut out)?;
    }
    // Not shrunk to its length for `Bytes` (which otherwise allocates a shared header for
    // it): measured, the reallocation cost more (about 280 instructions) than the header's
    // allocation and free it saves.
    Some(out)
}

/// Writes a stored document (or array) from its bytes, for the types documents commonly
/// hold; `None` (with `out` partly written) for any other type or unexpected bytes, and the
/// caller writes the document with the bson crate's iterator instead. Why: that iterator
/// checks and converts each element as it goes, and writing a three-field session document
/// through it cost about 2,300 instructions, the largest part of a find by `_id` after the
/// request decoder. The walk is one pass: each element's key is found, checked and copied
/// in the same loop, and each value's length comes from its type as it is written (a
/// separate element iterator, then a second scan of each key, cost about 400 instructions
/// an element).
fn write_stored(bytes: &[u8], array: bool, depth: usize, out: &mut Vec<u8>) -> Option<()> {
    // Stored documents are at most 100 levels deep; this bound is only a guard.
    if depth > 200 {
        return None;
    }
    // The length counts itself and the terminator, which must be the last byte.
    let len = usize::try_from(i32_at(bytes, 0)?).ok()?;
    if len != bytes.len() || len < 5 || bytes[len - 1] != 0 {
        return None;
    }
    let end = len - 1;
    out.push(if array { b'[' } else { b'{' });
    let mut at = 4;
    let mut first = true;
    while at < end {
        let ty = bytes[at];
        at += 1;
        // The key: a C string. Printable ASCII without a quote or backslash is copied whole.
        let kstart = at;
        let mut plain = true;
        loop {
            let c = *bytes.get(at)?;
            if c == 0 {
                break;
            }
            plain &= (0x20..0x7f).contains(&c) && c != b'"' && c != b'\\';
            at += 1;
        }
        let key = &bytes[kstart..at];
        at += 1;
        if !first {
            out.push(b',');
        }
        first = false;
        if !array {
            if plain {
                out.push(b'"');
                out.extend_from_slice(key);
                out.extend_from_slice(b"\":");
            } else {
                write_stored_str(key, out)?;
                out.push(b':');
            }
        }
        at += match ty {
            rawbson::DOUBLE => {
                write_f64(f64::from_bits(u64_at(bytes, at)?), out);
                8
            }
            rawbson::STRING => {
                // Length (terminator included), bytes, terminator.
                let n = usize::try_from(i32_at(bytes, at)?).ok()?;
                let s = bytes.get(at + 4..(at + 4).checked_add(n)?)?;
                match s.split_last() {
                    Some((0, text)) => write_stored_str(text, out)?,
                    _ => return None,
                }
                n + 4
            }
            rawbson::DOCUMENT | rawbson::ARRAY => {
                let n = usize::try_from(i32_at(bytes, at)?).ok()?;
                let sub = bytes.get(at..at.checked_add(n)?)?;
                write_stored(sub, ty == rawbson::ARRAY, depth + 1, out)?;
                n
            }
            rawbson::BOOLEAN => {
                match bytes.get(at)? {
                    0 => out.extend_from_slice(b"false"),
                    1 => out.extend_from_slice(b"true"),
                    _ => return None,
                }
                1
            }
            rawbson::NULL => {
                out.extend_from_slice(b"null");
                0
            }
            rawbson::INT32 => {
                write_int(i32_at(bytes, at)? as i64, out);
                4
            }
            rawbson::INT64 => {
                write_int(u64_at(bytes, at)? as i64, out);
                8
            }
            rawbson::DATE_TIME => {
                write_date(DateTime::from_millis(u64_at(bytes, at)? as i64), out);
                8
            }
            rawbson::OBJECT_ID => {
                write_oid(bytes.get(at..at + 12)?, out);
                12
            }
            // The terminator before the last byte, or a type written by the fallback.
            _ => return None,
        };
    }
    // The last value must end exactly at the terminator.
    if at != end {
        return None;
    }
    out.push(if array { b']' } else { b'}' });
    Some(())
}

/// The little-endian i32 at `at`.
fn i32_at(b: &[u8], at: usize) -> Option<i32> {
    let s: [u8; 4] = b.get(at..at.checked_add(4)?)?.try_into().ok()?;
    Some(i32::from_le_bytes(s))
}

/// The little-endian 8 bytes at `at` (a double's bits, an int64, a date).
fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    let s: [u8; 8] = b.get(at..at.checked_add(8)?)?.try_into().ok()?;
    Some(u64::from_le_bytes(s))
}

/// Relaxed Extended JSON of a value.
pub fn bson_json(v: &Bson) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    write_bson(v, &mut out);
    out
}

/// Appends the relaxed Extended JSON of a decoded document to `out`.
pub fn write_doc(d: &Document, out: &mut Vec<u8>) {
    write_fields(d, out);
}

fn write_fields(d: &Document, out: &mut Vec<u8>) {
    out.push(b'{');
    for (i, (k, v)) in d.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_str(k, out);
        out.push(b':');
        write_bson(v, out);
    }
    out.push(b'}');
}

fn write_raw_doc(doc: &RawDocument, out: &mut Vec<u8>) -> Option<()> {
    out.push(b'{');
    for (i, e) in doc.iter().enumerate() {
        let (k, v) = e.ok()?;
        if i > 0 {
            out.push(b',');
        }
        write_str(k.as_str(), out);
        out.push(b':');
        write_raw(v, out)?;
    }
    out.push(b'}');
    Some(())
}

fn write_raw(v: RawBsonRef<'_>, out: &mut Vec<u8>) -> Option<()> {
    match v {
        RawBsonRef::Double(d) => write_f64(d, out),
        RawBsonRef::String(s) => write_str(s, out),
        RawBsonRef::Array(a) => {
            out.push(b'[');
            for (i, e) in a.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_raw(e.ok()?, out)?;
            }
            out.push(b']');
        }
        RawBsonRef::Document(d) => write_raw_doc(d, out)?,
        RawBsonRef::Boolean(b) => out.extend_from_slice(if b { b"true" } else { b"false" }),
        RawBsonRef::Null => out.extend_from_slice(b"null"),
        RawBsonRef::RegularExpression(r) => {
            write_regex(r.pattern.as_str(), r.options.as_str(), out)
        }
        RawBsonRef::JavaScriptCode(c) => write_wrapped("$code", c, out),
        RawBsonRef::Int32(i) => write_int(i as i64, out),
        RawBsonRef::Int64(i) => write_int(i, out),
        RawBsonRef::Timestamp(t) => write_timestamp(t, out),
        RawBsonRef::Binary(b) => write_binary(b.subtype, b.bytes, out),
        RawBsonRef::ObjectId(o) => write_oid(&o.bytes(), out),
        RawBsonRef::DateTime(d) => write_date(d, out),
        RawBsonRef::Symbol(s) => write_wrapped("$symbol", s, out),
        RawBsonRef::Decimal128(d) => write_wrapped("$numberDecimal", &d.to_string(), out),
        RawBsonRef::Undefined => out.extend_from_slice(br#"{"$undefined":true}"#),
        RawBsonRef::MinKey => out.extend_from_slice(br#"{"$minKey":1}"#),
        RawBsonRef::MaxKey => out.extend_from_slice(br#"{"$maxKey":1}"#),
        // Deprecated types no stored document is expected to hold: the decoded path.
        other @ (RawBsonRef::JavaScriptCodeWithScope(_) | RawBsonRef::DbPointer(_)) => {
            write_bson(&Bson::try_from(other).ok()?, out)
        }
    }
    Some(())
}

fn write_bson(v: &Bson, out: &mut Vec<u8>) {
    match v {
        Bson::Double(d) => write_f64(*d, out),
        Bson::String(s) => write_str(s, out),
        Bson::Array(a) => {
            out.push(b'[');
            for (i, e) in a.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_bson(e, out);
            }
            out.push(b']');
        }
        Bson::Document(d) => write_fields(d, out),
        Bson::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Bson::Null => out.extend_from_slice(b"null"),
        Bson::RegularExpression(r) => write_regex(r.pattern.as_str(), r.options.as_str(), out),
        Bson::JavaScriptCode(c) => write_wrapped("$code", c, out),
        Bson::Int32(i) => write_int(*i as i64, out),
        Bson::Int64(i) => write_int(*i, out),
        Bson::Timestamp(t) => write_timestamp(*t, out),
        Bson::Binary(b) => write_binary(b.subtype, &b.bytes, out),
        Bson::ObjectId(o) => write_oid(&o.bytes(), out),
        Bson::DateTime(d) => write_date(*d, out),
        Bson::Symbol(s) => write_wrapped("$symbol", s, out),
        Bson::Decimal128(d) => write_wrapped("$numberDecimal", &d.to_string(), out),
        Bson::Undefined => out.extend_from_slice(br#"{"$undefined":true}"#),
        Bson::MinKey => out.extend_from_slice(br#"{"$minKey":1}"#),
        Bson::MaxKey => out.extend_from_slice(br#"{"$maxKey":1}"#),
        // Deprecated types: rare enough to go through the generic conversion.
        other @ (Bson::JavaScriptCodeWithScope(_) | Bson::DbPointer(_)) => {
            // Writing into a Vec cannot fail.
            let _ = serde_json::to_writer(&mut *out, &other.clone().into_relaxed_extjson());
        }
    }
}

/// `{"$oid":"<hex>"}`, written from the bytes (the bson crate's `to_hex` collects a
/// `String` a character at a time: about 1,000 instructions of every insert's reply).
fn write_oid(bytes: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(br#"{"$oid":""#);
    for b in bytes {
        out.push(HEX[(b >> 4) as usize]);
        out.push(HEX[(b & 15) as usize]);
    }
    out.extend_from_slice(b"\"}");
}

/// `{"<key>":"<s>"}`.
fn write_wrapped(key: &str, s: &str, out: &mut Vec<u8>) {
    out.extend_from_slice(b"{\"");
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(b"\":");
    write_str(s, out);
    out.push(b'}');
}

fn write_int(i: i64, out: &mut Vec<u8>) {
    let mut buf = itoa_buf();
    out.extend_from_slice(fmt_int(i, &mut buf));
}

fn itoa_buf() -> [u8; 20] {
    [0u8; 20]
}

fn fmt_int(i: i64, buf: &mut [u8; 20]) -> &[u8] {
    let mut n = i.unsigned_abs();
    let mut p = buf.len();
    loop {
        p -= 1;
        buf[p] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if i < 0 {
        p -= 1;
        buf[p] = b'-';
    }
    &buf[p..]
}

fn write_f64(d: f64, out: &mut Vec<u8>) {
    if d.is_nan() {
        let s: &[u8] = if d.is_sign_negative() {
            br#"{"$numberDouble":"-NaN"}"#
        } else {
            br#"{"$numberDouble":"NaN"}"#
        };
        out.extend_from_slice(s);
    } else if d.is_infinite() {
        let s: &[u8] = if d.is_sign_negative() {
            br#"{"$numberDouble":"-Infinity"}"#
        } else {
            br#"{"$numberDouble":"Infinity"}"#
        };
        out.extend_from_slice(s);
    } else {
        // serde_json's own float formatting (shortest round-trip, `.0` on integral values).
        let _ = serde_json::to_writer(&mut *out, &d);
    }
}

fn write_timestamp(t: Timestamp, out: &mut Vec<u8>) {
    out.extend_from_slice(br#"{"$timestamp":{"t":"#);
    write_int(t.time as i64, out);
    out.extend_from_slice(br#","i":"#);
    write_int(t.increment as i64, out);
    out.extend_from_slice(b"}}");
}

fn write_regex(pattern: &str, options: &str, out: &mut Vec<u8>) {
    out.extend_from_slice(br#"{"$regularExpression":{"pattern":"#);
    write_str(pattern, out);
    out.extend_from_slice(br#","options":"#);
    // Relaxed Extended JSON lists the options sorted.
    let mut chars: Vec<char> = options.chars().collect();
    chars.sort_unstable();
    let options: String = chars.into_iter().collect();
    write_str(&options, out);
    out.extend_from_slice(b"}}");
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const HEX: &[u8; 16] = b"0123456789abcdef";

fn write_binary(subtype: BinarySubtype, bytes: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(br#"{"$binary":{"base64":""#);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        out.push(B64[(n >> 18) as usize & 63]);
        out.push(B64[(n >> 12) as usize & 63]);
        out.push(if chunk.len() > 1 {
            B64[(n >> 6) as usize & 63]
        } else {
            b'='
        });
        out.push(if chunk.len() > 2 {
            B64[n as usize & 63]
        } else {
            b'='
        });
    }
    let t: u8 = subtype.into();
    out.extend_from_slice(br#"","subType":""#);
    out.push(HEX[(t >> 4) as usize]);
    out.push(HEX[(t & 15) as usize]);
    out.extend_from_slice(b"\"}}");
}

/// First millisecond of the year 10000: relaxed form writes ISO-8601 below it.
const YEAR_10000_MS: i64 = 253_402_300_800_000;

fn write_date(d: DateTime, out: &mut Vec<u8>) {
    let ms = d.timestamp_millis();
    // Relaxed Extended JSON writes ISO-8601 for years 1970 to 9999 and `$numberLong`
    // otherwise. (The bson crate's own conversion clamps dates from year 10000 on to one
    // instant in 9999, losing them; this writer keeps them.)
    if !(0..YEAR_10000_MS).contains(&ms) {
        out.extend_from_slice(br#"{"$date":{"$numberLong":""#);
        write_int(ms, out);
        out.extend_from_slice(b"\"}}");
        return;
    }
    let days = ms.div_euclid(86_400_000);
    let in_day = ms.rem_euclid(86_400_000);
    let (y, m, dd) = civil_from_days(days);
    let secs = in_day / 1000;
    let milli = in_day % 1000;
    out.extend_from_slice(br#"{"$date":""#);
    push_digits(out, y, 4);
    out.push(b'-');
    push_digits(out, m, 2);
    out.push(b'-');
    push_digits(out, dd, 2);
    out.push(b'T');
    push_digits(out, secs / 3600, 2);
    out.push(b':');
    push_digits(out, secs / 60 % 60, 2);
    out.push(b':');
    push_digits(out, secs % 60, 2);
    // RFC 3339 as the `time` crate writes it: the fraction without trailing zeros.
    if milli != 0 {
        out.push(b'.');
        let (v, n) = if milli % 100 == 0 {
            (milli / 100, 1)
        } else if milli % 10 == 0 {
            (milli / 10, 2)
        } else {
            (milli, 3)
        };
        push_digits(out, v, n);
    }
    out.extend_from_slice(b"Z\"}");
}

fn push_digits(out: &mut Vec<u8>, v: i64, width: u32) {
    // Filled from the last digit: one division per digit, no power of ten to compute.
    let mut buf = [b'0'; 4];
    let w = (width as usize).min(buf.len());
    let mut v = v;
    for d in buf[..w].iter_mut().rev() {
        *d = b'0' + (v % 10) as u8;
        v /= 10;
    }
    out.extend_from_slice(&buf[..w]);
}

/// Days since 1970-01-01 → (year, month, day), proleptic Gregorian (H. Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// A stored key or string as JSON: ASCII (the usual case) needs no UTF-8 validation, which
/// cost more than the escaping for short strings; anything else is validated first.
fn write_stored_str(b: &[u8], out: &mut Vec<u8>) -> Option<()> {
    // Printable ASCII without a quote or backslash (keys, ids, most values) is its own JSON
    // text: one check of the bytes and one copy, not the escaping loop's per-byte match.
    if b.iter()
        .all(|&c| (0x20..0x7f).contains(&c) && c != b'"' && c != b'\\')
    {
        out.reserve(b.len() + 2);
        out.push(b'"');
        out.extend_from_slice(b);
        out.push(b'"');
    } else if b.is_ascii() {
        write_str_bytes(b, out);
    } else {
        write_str(std::str::from_utf8(b).ok()?, out);
    }
    Some(())
}

/// A JSON string, escaped as serde_json escapes it.
fn write_str(s: &str, out: &mut Vec<u8>) {
    write_str_bytes(s.as_bytes(), out)
}

/// [`write_str`] of valid UTF-8 bytes (escaping looks only at ASCII bytes).
fn write_str_bytes(bytes: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let esc: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x08 => b"\\b",
            0x0c => b"\\f",
            0..=0x1f => {
                out.extend_from_slice(&bytes[start..i]);
                out.extend_from_slice(b"\\u00");
                out.push(HEX[(b >> 4) as usize]);
                out.push(HEX[(b & 15) as usize]);
                start = i + 1;
                continue;
            }
            _ => continue,
        };
        out.extend_from_slice(&bytes[start..i]);
        out.extend_from_slice(esc);
        start = i + 1;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

/// Parses JSON text that needs nothing of Extended JSON's type wrappers into a document,
/// in one pass with no intermediate `serde_json::Value`. Returns `None` for anything it does
/// not handle exactly as the general path (`codec::parse_json_value`) would: a key naming a
/// type wrapper (`$oid`, `$date`, …), an escape in a string, a number whose reading has an
/// edge (`-0`, 19+ digits), a repeated key, deep nesting, or any error — the general path
/// then parses the text (and words the error).
pub fn parse_plain(text: &[u8]) -> Option<Document> {
    let mut p = Plain { s: text, at: 0 };
    p.ws();
    if p.peek() != Some(b'{') {
        return None;
    }
    let d = p.object(0)?;
    p.ws();
    (p.at == text.len()).then_some(d)
}

/// Bytes an encoded insert leaves free after the document's header for an `_id` the server
/// generates: the element type, `_id` and its NUL, and an ObjectId's 12 bytes.
pub const ID_ROOM: usize = 1 + 4 + 12;

/// Encodes the JSON text of a document to store straight into BSON, in one pass with no
/// intermediate document: the stored form of exactly what `parse_plain` followed by
/// `codec::replace_now` (a `"$$NOW"` string becomes the date `now_ms`) and
/// `codec::validate_stored` would give, for the same texts as `parse_plain` plus the rules of
/// stored field names. `out` (cleared first) receives the 4-byte header (left zero),
/// [`ID_ROOM`] zero bytes, the top-level elements and the terminator. Returns whether the
/// document has a top-level `_id`; `None` for anything it does not handle (the general path
/// then parses the text, and words the error if there is one): whatever `parse_plain`
/// leaves to it, a field name starting with `$` or holding a `.`, an array `_id`.
///
/// `keys` is scratch space for the duplicate-key check (kept by the caller so that its
/// allocation is reused). Why: the decoded `Document` (an index map of owned keys and
/// values) and its encoding cost about 470 instructions a field, most of an insert.
pub fn encode_stored(
    text: &[u8],
    now_ms: i64,
    out: &mut Vec<u8>,
    keys: &mut Vec<(u32, u32)>,
) -> Option<bool> {
    out.clear();
    keys.clear();
    if text.len() > u32::MAX as usize {
        return None;
    }
    let mut e = Encoder {
        p: Plain { s: text, at: 0 },
        out,
        keys,
        now_ms,
    };
    e.p.ws();
    if e.p.peek() != Some(b'{') {
        return None;
    }
    e.out.extend_from_slice(&[0; 4 + ID_ROOM]);
    let has_id = e.fields(0, true)?;
    e.p.ws();
    (e.p.at == text.len()).then_some(has_id)
}

struct Encoder<'a, 'o> {
    p: Plain<'a>,
    out: &'o mut Vec<u8>,
    /// The text ranges of the keys of the objects being read, innermost last.
    keys: &'o mut Vec<(u32, u32)>,
    now_ms: i64,
}

impl<'a> Encoder<'a, '_> {
    /// Reads an object's members from `{` to `}` and appends them as BSON elements and the
    /// terminator (the caller writes the length). Returns whether a member is `_id`.
    fn fields(&mut self, depth: usize, top: bool) -> Option<bool> {
        if depth > 64 {
            return None;
        }
        self.p.eat(b'{')?;
        self.p.ws();
        let mut has_id = false;
        if self.p.peek() == Some(b'}') {
            self.p.at += 1;
            self.out.push(0);
            return Some(false);
        }
        let base = self.keys.len();
        loop {
            self.p.ws();
            let (ks, ke) = self.key()?;
            let k = &self.p.s[ks..ke];
            // A repeated key is left to the general path (as `parse_plain` does); objects
            // are small, and past 256 members the general path reads them.
            if self.keys.len() - base >= 256
                || self.keys[base..]
                    .iter()
                    .any(|&(s, e)| &self.p.s[s as usize..e as usize] == k)
            {
                return None;
            }
            self.keys.push((ks as u32, ke as u32));
            let is_id = top && k == b"_id";
            has_id |= is_id;
            self.p.eat(b':')?;
            self.p.ws();
            if is_id && self.p.peek() == Some(b'[') {
                return None;
            }
            let ty_at = self.out.len();
            self.out.push(0);
            self.out.extend_from_slice(&self.p.s[ks..ke]);
            self.out.push(0);
            self.out[ty_at] = self.value(depth)?;
            self.p.ws();
            match self.p.peek()? {
                b',' => self.p.at += 1,
                b'}' => {
                    self.p.at += 1;
                    self.keys.truncate(base);
                    self.out.push(0);
                    return Some(has_id);
                }
                _ => return None,
            }
        }
    }

    /// A member name as its text range: valid UTF-8 with no escape, not starting with `$`,
    /// without `.` (the general path refuses those in stored documents, and reads the
    /// Extended JSON wrappers).
    fn key(&mut self) -> Option<(usize, usize)> {
        if self.p.peek() != Some(b'"') {
            return None;
        }
        let start = self.p.at + 1;
        let len = string_stop::<true>(self.p.s.get(start..)?)?;
        let end = start + len;
        if self.p.s[end] != b'"' || self.p.s.get(start) == Some(&b'$') {
            return None;
        }
        let k = &self.p.s[start..end];
        if !k.is_ascii() {
            std::str::from_utf8(k).ok()?;
        }
        self.p.at = end + 1;
        Some((start, end))
    }

    /// A string value's bytes, as `Plain::string` reads it: ASCII (the usual case) needs
    /// no UTF-8 validation, which cost more than the rest of a short string's encoding.
    fn string(&mut self) -> Option<&'a [u8]> {
        let s: &'a [u8] = self.p.s;
        let start = self.p.at + 1;
        let len = string_stop::<false>(s.get(start..)?)?;
        let end = start + len;
        if s[end] != b'"' {
            return None;
        }
        let v = &s[start..end];
        if !v.is_ascii() {
            std::str::from_utf8(v).ok()?;
        }
        self.p.at = end + 1;
        Some(v)
    }

    /// Appends a value (the cursor on its first byte) and returns its BSON element type.
    fn value(&mut self, depth: usize) -> Option<u8> {
        Some(match self.p.peek()? {
            b'{' => {
                let at = self.begin_doc();
                self.fields(depth + 1, false)?;
                self.end_doc(at);
                rawbson::DOCUMENT
            }
            b'[' => {
                if depth > 64 {
                    return None;
                }
                self.p.at += 1;
                let at = self.begin_doc();
                self.p.ws();
                if self.p.peek() == Some(b']') {
                    self.p.at += 1;
                } else {
                    let mut i = 0usize;
                    loop {
                        self.p.ws();
                        let ty_at = self.out.len();
                        self.out.push(0);
                        let mut buf = itoa_buf();
                        self.out.extend_from_slice(fmt_int(i as i64, &mut buf));
                        self.out.push(0);
                        self.out[ty_at] = self.value(depth + 1)?;
                        i += 1;
                        self.p.ws();
                        match self.p.peek()? {
                            b',' => self.p.at += 1,
                            b']' => {
                                self.p.at += 1;
                                break;
                            }
                            _ => return None,
                        }
                    }
                }
                self.out.push(0);
                self.end_doc(at);
                rawbson::ARRAY
            }
            b'"' => {
                let s = self.string()?;
                if s == NOW.as_bytes() {
                    self.out.extend_from_slice(&self.now_ms.to_le_bytes());
                    return Some(rawbson::DATE_TIME);
                }
                let n = i32::try_from(s.len() + 1).ok()?;
                self.out.extend_from_slice(&n.to_le_bytes());
                self.out.extend_from_slice(s);
                self.out.push(0);
                rawbson::STRING
            }
            b't' => self.literal(b"true", &[1], rawbson::BOOLEAN)?,
            b'f' => self.literal(b"false", &[0], rawbson::BOOLEAN)?,
            b'n' => self.literal(b"null", &[], rawbson::NULL)?,
            b'-' | b'0'..=b'9' => match self.p.number()? {
                Bson::Int32(i) => {
                    self.out.extend_from_slice(&i.to_le_bytes());
                    rawbson::INT32
                }
                Bson::Int64(i) => {
                    self.out.extend_from_slice(&i.to_le_bytes());
                    rawbson::INT64
                }
                Bson::Double(d) => {
                    self.out.extend_from_slice(&d.to_le_bytes());
                    rawbson::DOUBLE
                }
                _ => return None,
            },
            _ => return None,
        })
    }

    fn literal(&mut self, word: &[u8], bytes: &[u8], ty: u8) -> Option<u8> {
        let end = self.p.at + word.len();
        if self.p.s.get(self.p.at..end)? != word {
            return None;
        }
        self.p.at = end;
        self.out.extend_from_slice(bytes);
        Some(ty)
    }

    /// Leaves room for an embedded document's length; returns where it goes.
    fn begin_doc(&mut self) -> usize {
        let at = self.out.len();
        self.out.extend_from_slice(&[0; 4]);
        at
    }

    /// Writes the length of the embedded document that starts at `at` (it ends here).
    fn end_doc(&mut self, at: usize) {
        let len = (self.out.len() - at) as i32;
        self.out[at..at + 4].copy_from_slice(&len.to_le_bytes());
    }
}

/// The fields [`parse_scalar_sets`] reads, the usual few held inline (a heap vector was one
/// allocation of every upsert).
pub type ScalarSets<'a> = smallvec::SmallVec<[(&'a str, SetValue<'a>); 4]>;

/// The update `{"$set": {...}, "$currentDate": {...}}` (either or both) read straight from
/// its JSON text into the top-level sets `update::Update::scalar_sets` gives for it once
/// parsed (`codec::parse_json`, `codec::replace_now`, `update::parse`): a `$set` of a string
/// (`"$$NOW"` the date `now_ms`), a number or a boolean, a `$currentDate` of `true` or
/// `false` (the date `now_ms`). Field names borrow the text. `None` for anything else — an
/// escape, another operator or value type, a dotted, `$` or `_id` field, a field named
/// twice (a conflict), no field at all — which the general path then reads (and refuses, if
/// it must). Why: decoding the update into a document and then into update operations cost
/// about 10k instructions of an upsert that writes 2 fields in place.
pub fn parse_scalar_sets(text: &[u8], now_ms: i64) -> Option<ScalarSets<'_>> {
    let mut p = Plain { s: text, at: 0 };
    let mut sets = ScalarSets::new();
    let (mut set_seen, mut date_seen) = (false, false);
    p.eat(b'{')?;
    loop {
        p.ws();
        let current_date = match p.string()? {
            "$set" if !set_seen => {
                set_seen = true;
                false
            }
            "$currentDate" if !date_seen => {
                date_seen = true;
                true
            }
            _ => return None,
        };
        p.eat(b':')?;
        p.eat(b'{')?;
        p.ws();
        // An operator with no field adds nothing (as in the general path).
        let mut done = p.peek() == Some(b'}');
        if done {
            p.at += 1;
        }
        while !done {
            p.ws();
            let field = p.string()?;
            if field.is_empty()
                || field.starts_with('$')
                || field.contains('.')
                || field == "_id"
                || sets.iter().any(|(f, _)| *f == field)
            {
                return None;
            }
            p.eat(b':')?;
            p.ws();
            let v = match p.peek()? {
                b't' | b'f' => {
                    let b = match p.literal(b"true", Bson::Boolean(true)) {
                        Some(_) => true,
                        None => {
                            p.literal(b"false", Bson::Boolean(false))?;
                            false
                        }
                    };
                    if current_date {
                        SetValue::Fixed(Fixed::Date(now_ms))
                    } else {
                        SetValue::Fixed(Fixed::Bool(b))
                    }
                }
                _ if current_date => return None,
                b'"' => match p.string()? {
                    NOW => SetValue::Fixed(Fixed::Date(now_ms)),
                    s => SetValue::Str(s),
                },
                b'-' | b'0'..=b'9' => match p.number()? {
                    Bson::Int32(i) => SetValue::Fixed(Fixed::Int32(i)),
                    Bson::Int64(i) => SetValue::Fixed(Fixed::Int64(i)),
                    Bson::Double(d) => SetValue::Fixed(Fixed::Double(d)),
                    _ => return None,
                },
                _ => return None,
            };
            sets.push((field, v));
            p.ws();
            match p.peek()? {
                b',' => p.at += 1,
                b'}' => {
                    p.at += 1;
                    done = true;
                }
                _ => return None,
            }
        }
        p.ws();
        match p.peek()? {
            b',' => p.at += 1,
            b'}' => {
                p.at += 1;
                break;
            }
            _ => return None,
        }
    }
    p.ws();
    (p.at == text.len() && !sets.is_empty()).then_some(sets)
}

/// Keys that make the bson crate read an object as a typed value.
const WRAPPERS: [&str; 16] = [
    "$oid",
    "$symbol",
    "$regularExpression",
    "$numberInt",
    "$numberLong",
    "$numberDouble",
    "$numberDecimal",
    "$binary",
    "$uuid",
    "$code",
    "$timestamp",
    "$date",
    "$minKey",
    "$maxKey",
    "$dbPointer",
    "$undefined",
];

/// The one field of the object `{"<name>": v}` (white space allowed around its parts), for
/// `v` a string without escapes other than `"$$NOW"`, or an integer that fits 64 bits (not
/// `-0`): what a filter on one field by equality most often is (a session by `_id`,
/// sessions by `userID`). `None` for any other text. Read with the same reader as
/// [`parse_scalar_sets`] (ASCII names and values skip UTF-8 validation).
pub fn single_scalar_field(text: &[u8]) -> Option<(&str, Bson)> {
    let (name, value) = single_scalar_field_ref(text)?;
    Some((
        name,
        match value {
            Scalar::Str(s) => Bson::String(s.to_string()),
            Scalar::Int(v) => v,
        },
    ))
}

/// A value [`single_scalar_field_ref`] reads: a string borrowed from the text, or an
/// integer (`Bson::Int32` or `Bson::Int64`).
pub enum Scalar<'a> {
    Str(&'a str),
    Int(Bson),
}

/// [`single_scalar_field`] with the string borrowed from the text.
pub fn single_scalar_field_ref(text: &[u8]) -> Option<(&str, Scalar<'_>)> {
    let mut p = Plain { s: text, at: 0 };
    p.eat(b'{')?;
    p.ws();
    let name = p.string()?;
    p.eat(b':')?;
    p.ws();
    let value = match p.peek()? {
        b'"' => match p.string()? {
            NOW => return None,
            s => Scalar::Str(s),
        },
        b'-' | b'0'..=b'9' => match p.number()? {
            v @ (Bson::Int32(_) | Bson::Int64(_)) => Scalar::Int(v),
            _ => return None,
        },
        _ => return None,
    };
    p.eat(b'}')?;
    p.ws();
    (p.at == text.len()).then_some((name, value))
}

/// The offset of the first byte of `s` that ends or interrupts a JSON string's plain run:
/// `"`, `\`, a control character, and with `DOT` also `.` (a member name the fast paths
/// refuse). Eight bytes at a time (the lowest flagged byte of each "has a byte equal to /
/// below" word test is exact, so their union's lowest bit is the first stop). Why: every
/// name and value of a filter, an update or an inserted document passes here, and a long
/// value (a path, a user agent) cost a loop turn per byte.
#[inline]
fn string_stop<const DOT: bool>(s: &[u8]) -> Option<usize> {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);
    let zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGH;
    let mut at = 0;
    while let Some(Ok(chunk)) = s.get(at..at + 8).map(<[u8; 8]>::try_from) {
        let w = u64::from_le_bytes(chunk);
        let mut hit = zero(w ^ (ONES * u64::from(b'"')))
            | zero(w ^ (ONES * u64::from(b'\\')))
            | (w.wrapping_sub(ONES * 0x20) & !w & HIGH);
        if DOT {
            hit |= zero(w ^ (ONES * u64::from(b'.')));
        }
        if hit != 0 {
            return Some(at + (hit.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    s[at..]
        .iter()
        .position(|&b| b == b'"' || b == b'\\' || b < 0x20 || (DOT && b == b'.'))
        .map(|i| at + i)
}

struct Plain<'a> {
    s: &'a [u8],
    at: usize,
}

impl<'a> Plain<'a> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.at).copied()
    }

    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.at += 1;
        }
    }

    fn eat(&mut self, b: u8) -> Option<()> {
        self.ws();
        (self.peek() == Some(b)).then(|| self.at += 1)
    }

    fn object(&mut self, depth: usize) -> Option<Document> {
        if depth > 64 {
            return None;
        }
        self.eat(b'{')?;
        let mut d = Document::new();
        self.ws();
        if self.peek() == Some(b'}') {
            self.at += 1;
            return Some(d);
        }
        loop {
            self.ws();
            let k = self.string()?;
            if k.starts_with('$') && WRAPPERS.contains(&k) {
                return None;
            }
            let k = k.to_owned();
            self.eat(b':')?;
            let v = self.value(depth)?;
            if d.insert(k, v).is_some() {
                return None;
            }
            self.ws();
            match self.peek()? {
                b',' => self.at += 1,
                b'}' => {
                    self.at += 1;
                    return Some(d);
                }
                _ => return None,
            }
        }
    }

    fn value(&mut self, depth: usize) -> Option<Bson> {
        self.ws();
        match self.peek()? {
            b'{' => Some(Bson::Document(self.object(depth + 1)?)),
            b'[' => {
                if depth > 64 {
                    return None;
                }
                self.at += 1;
                let mut a = Vec::new();
                self.ws();
                if self.peek() == Some(b']') {
                    self.at += 1;
                    return Some(Bson::Array(a));
                }
                loop {
                    a.push(self.value(depth + 1)?);
                    self.ws();
                    match self.peek()? {
                        b',' => self.at += 1,
                        b']' => {
                            self.at += 1;
                            return Some(Bson::Array(a));
                        }
                        _ => return None,
                    }
                }
            }
            b'"' => Some(Bson::String(self.string()?.to_owned())),
            b't' => self.literal(b"true", Bson::Boolean(true)),
            b'f' => self.literal(b"false", Bson::Boolean(false)),
            b'n' => self.literal(b"null", Bson::Null),
            b'-' | b'0'..=b'9' => self.number(),
            _ => None,
        }
    }

    fn literal(&mut self, word: &[u8], v: Bson) -> Option<Bson> {
        let end = self.at + word.len();
        (self.s.get(self.at..end)? == word).then(|| {
            self.at = end;
            v
        })
    }

    /// A string without escapes or control characters.
    fn string(&mut self) -> Option<&'a str> {
        if self.peek() != Some(b'"') {
            return None;
        }
        let start = self.at + 1;
        let len = string_stop::<false>(self.s.get(start..)?)?;
        let end = start + len;
        if self.s[end] != b'"' {
            return None;
        }
        self.at = end + 1;
        let v = &self.s[start..end];
        if v.is_ascii() {
            // SAFETY: ASCII is valid UTF-8. Why: `from_utf8`'s fixed cost on the short
            // names and values of an update was most of reading them.
            return Some(unsafe { std::str::from_utf8_unchecked(v) });
        }
        std::str::from_utf8(v).ok()
    }

    fn number(&mut self) -> Option<Bson> {
        let start = self.at;
        let neg = self.peek() == Some(b'-');
        if neg {
            self.at += 1;
        }
        let digits_from = self.at;
        while let Some(b'0'..=b'9') = self.peek() {
            self.at += 1;
        }
        let digits = &self.s[digits_from..self.at];
        if digits.is_empty() || (digits[0] == b'0' && digits.len() > 1) {
            return None;
        }
        if let Some(b'.' | b'e' | b'E') = self.peek() {
            while let Some(b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-') = self.peek() {
                self.at += 1;
            }
            // serde_json's own float reading, so the value is the general path's.
            let f: f64 = serde_json::from_slice(&self.s[start..self.at]).ok()?;
            return Some(Bson::Double(f));
        }
        // serde_json reads `-0` as the double -0.0; past i64 its reading is not an integer.
        if digits.len() > 19 || (neg && digits == b"0") {
            return None;
        }
        let mut n: i128 = 0;
        for &c in digits {
            n = n * 10 + i128::from(c - b'0');
        }
        let n = i64::try_from(if neg { -n } else { n }).ok()?;
        Some(match i32::try_from(n) {
            Ok(i) => Bson::Int32(i),
            Err(_) => Bson::Int64(n),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::oid::ObjectId;
    use bson::{Binary, Decimal128, JavaScriptCodeWithScope, RawDocumentBuf, Regex};

    #[test]
    fn string_stop_finds_the_first_stop_byte() {
        let naive = |s: &[u8], dot: bool| {
            s.iter()
                .position(|&b| b == b'"' || b == b'\\' || b < 0x20 || (dot && b == b'.'))
        };
        // Bytes near every stop and every borrow edge (0x00, 0x1f/0x20, 0x7f/0x80, 0xff).
        let alphabet = [
            0x00, 0x01, 0x1f, 0x20, 0x21, b'"', b'#', b'.', b'/', b'[', b'\\', b']', b'a', 0x7f,
            0x80, 0xa0, 0xdc, 0xe2, 0xff,
        ];
        let mut rng = crate::util::rng::XorShift::new(11);
        for _ in 0..50_000 {
            let len = rng.below(40) as usize;
            let plain = rng.below(4) != 0;
            let s: Vec<u8> = (0..len)
                .map(|_| {
                    if plain && rng.below(6) != 0 {
                        b'a' + rng.below(26) as u8
                    } else {
                        alphabet[rng.below(alphabet.len() as u64) as usize]
                    }
                })
                .collect();
            assert_eq!(string_stop::<false>(&s), naive(&s, false), "{s:?}");
            assert_eq!(string_stop::<true>(&s), naive(&s, true), "{s:?}");
        }
    }

    /// The bson crate's conversion, except for dates from year 10000 on, which it clamps
    /// into 9999: those are `$numberLong`, as the Extended JSON specification says.
    fn oracle(v: &Bson) -> String {
        if let Bson::DateTime(d) = v {
            if d.timestamp_millis() >= YEAR_10000_MS {
                return format!(
                    r#"{{"$date":{{"$numberLong":"{}"}}}}"#,
                    d.timestamp_millis()
                );
            }
        }
        v.clone().into_relaxed_extjson().to_string()
    }

    use crate::util::rng::XorShift as Rng;

    fn string(r: &mut Rng) -> String {
        let pool = [
            "a", "é", "\"", "\\", "\n", "\r", "\t", "\u{8}", "\u{c}", "\u{1}", "\u{1f}", "\u{7f}",
            "/", "😀", "$", " ", "x", "\u{2028}", "<", "0",
        ];
        (0..r.below(8))
            .map(|_| pool[r.below(pool.len() as u64) as usize])
            .collect()
    }

    fn double(r: &mut Rng) -> f64 {
        match r.below(12) {
            0 => f64::NAN,
            1 => -f64::NAN,
            2 => f64::INFINITY,
            3 => f64::NEG_INFINITY,
            4 => -0.0,
            5 => 0.0,
            6 => (r.below(2_000_000) as f64) - 1_000_000.0,
            7 => f64::from_bits(r.next_u64()),
            8 => 1e21 * (r.below(100) as f64),
            9 => (r.below(1000) as f64) / 1000.0,
            10 => f64::MAX,
            _ => f64::MIN_POSITIVE / (r.below(1000) + 1) as f64,
        }
    }

    /// Dates the bson crate's conversion renders faithfully (before year 10000: see
    /// `oracle`; the later ones are checked in `dates_at_every_boundary`).
    fn date(r: &mut Rng) -> DateTime {
        let ms = match r.below(8) {
            0 => 0,
            1 => -1,
            2 => YEAR_10000_MS - 1,
            3 => YEAR_10000_MS - 1000,
            4 => i64::MIN,
            5 => -YEAR_10000_MS,
            6 => {
                r.below(YEAR_10000_MS as u64) as i64 / 1000 * 1000
                    + [0, 100, 120, 7][r.below(4) as usize]
            }
            _ => r.next_u64() as i64 % YEAR_10000_MS,
        };
        DateTime::from_millis(ms)
    }

    fn value(r: &mut Rng, depth: u32) -> Bson {
        let kinds = if depth > 3 { 19 } else { 22 };
        match r.below(kinds) {
            0 => Bson::Double(double(r)),
            1 => Bson::String(string(r)),
            2 => Bson::Boolean(r.below(2) == 0),
            3 => Bson::Null,
            4 => Bson::RegularExpression(Regex {
                pattern: string(r).try_into().expect("no NUL"),
                // Unsorted on purpose: the writer sorts.
                options: ["", "i", "xsmi", "ms", "u"][r.below(5) as usize]
                    .to_string()
                    .try_into()
                    .expect("no NUL"),
            }),
            5 => Bson::JavaScriptCode(string(r)),
            6 => Bson::Int32(r.next_u64() as i32),
            7 => Bson::Int64(r.next_u64() as i64),
            8 => Bson::Timestamp(Timestamp {
                time: r.next_u64() as u32,
                increment: r.next_u64() as u32,
            }),
            9 => {
                let len = r.below(10) as usize;
                let bytes = (0..len).map(|_| r.next_u64() as u8).collect();
                let subtype = match r.below(4) {
                    0 => BinarySubtype::Generic,
                    1 => BinarySubtype::Uuid,
                    2 => BinarySubtype::UserDefined(0x80 + r.below(0x7f) as u8),
                    _ => BinarySubtype::Md5,
                };
                Bson::Binary(Binary { subtype, bytes })
            }
            10 => {
                let mut b = [0u8; 12];
                b.iter_mut().for_each(|x| *x = r.next_u64() as u8);
                Bson::ObjectId(ObjectId::from_bytes(b))
            }
            11 => Bson::DateTime(date(r)),
            12 => Bson::Symbol(string(r)),
            13 => {
                let s = [
                    "1.5",
                    "-0",
                    "NaN",
                    "Infinity",
                    "-1E+10",
                    "12345678901234567890",
                    "0.000001",
                ][r.below(7) as usize];
                Bson::Decimal128(s.parse::<Decimal128>().expect("decimal"))
            }
            14 => Bson::Undefined,
            15 => Bson::MinKey,
            16 => Bson::MaxKey,
            17 => Bson::Int32(r.below(100) as i32 - 50),
            18 => Bson::Double(r.below(100) as f64 / 4.0),
            19 => Bson::Array((0..r.below(4)).map(|_| value(r, depth + 1)).collect()),
            20 => Bson::Document(document(r, depth + 1)),
            _ => Bson::JavaScriptCodeWithScope(JavaScriptCodeWithScope {
                code: string(r),
                scope: document(r, depth + 1),
            }),
        }
    }

    fn document(r: &mut Rng, depth: u32) -> Document {
        let mut d = Document::new();
        for i in 0..r.below(5) {
            d.insert(
                format!("{}{i}", string(r).replace('\0', "")),
                value(r, depth),
            );
        }
        d
    }

    #[test]
    fn every_type_matches_the_serde_json_path() {
        let mut r = Rng(0x9e37_79b9_7f4a_7c15);
        for _ in 0..20_000 {
            let d = document(&mut r, 0);
            let want = oracle(&Bson::Document(d.clone()));
            assert_eq!(
                String::from_utf8(bson_json(&Bson::Document(d.clone()))).unwrap(),
                want
            );
            let raw = RawDocumentBuf::try_from(&d).expect("encodes");
            let got = raw_doc_json(&raw).expect("decodes");
            assert_eq!(String::from_utf8(got).unwrap(), want, "{d:?}");
            for (_, v) in &d {
                assert_eq!(String::from_utf8(bson_json(v)).unwrap(), oracle(v));
            }
        }
    }

    /// The common types are written from the stored bytes, not left to the fallback (which
    /// `every_type_matches_the_serde_json_path` checks the output of).
    #[test]
    fn common_types_take_the_stored_bytes_path() {
        let d = bson::doc! {
            "_id": ObjectId::new(), "userID": "000000000042", "n": 1, "l": 1i64 << 40,
            "x": 2.5, "t": true, "z": Bson::Null, "at": DateTime::from_millis(1_700_000_000_123),
            "sub": {"a": [1, "b", {"c": false}]},
        };
        let raw = RawDocumentBuf::try_from(&d).expect("encodes");
        let mut out = Vec::new();
        assert!(write_stored(raw.as_bytes(), false, 0, &mut out).is_some());
        assert_eq!(String::from_utf8(out).unwrap(), oracle(&Bson::Document(d)));
    }

    /// Keys and strings that need escaping or are not ASCII, nested arrays and documents:
    /// the one-pass walk writes what the reference conversion writes.
    #[test]
    fn stored_walk_escapes_and_nests_as_the_reference() {
        let d = bson::doc! {
            "q\"k": "a\\b", "é": "ü\n", "tab\tkey": [[1, 2.0], {"x": [], "y": {}}, "z\u{1}"],
            "": "", "neg": -7, "big": i64::MIN, "f": -0.0, "e": 1e300,
        };
        let raw = RawDocumentBuf::try_from(&d).expect("encodes");
        let mut out = Vec::new();
        assert!(write_stored(raw.as_bytes(), false, 0, &mut out).is_some());
        assert_eq!(String::from_utf8(out).unwrap(), oracle(&Bson::Document(d)));
    }

    /// Bytes that are not a well-formed document (a length running past the end, a
    /// terminator in the middle, a truncated value) are refused, never read out of bounds:
    /// the caller then takes the bson crate's path.
    #[test]
    fn stored_walk_refuses_malformed_bytes() {
        let d = bson::doc! {"_id": "abc", "n": 5, "sub": {"a": 1.5}};
        let good = RawDocumentBuf::try_from(&d).expect("encodes").into_bytes();
        let mut out = Vec::new();
        assert!(write_stored(&good, false, 0, &mut out).is_some());
        // Every single byte changed to a few telling values, and every truncation.
        for i in 0..good.len() {
            for v in [0u8, 1, 0x7f, 0xff] {
                let mut b = good.clone();
                b[i] = v;
                let _ = write_stored(&b, false, 0, &mut Vec::new());
            }
            let _ = write_stored(&good[..i], false, 0, &mut Vec::new());
        }
        // A string length past the end of the document.
        let at = good
            .windows(4)
            .position(|w| w == [4, 0, 0, 0])
            .expect("length of \"abc\"");
        let mut b = good.clone();
        b[at] = 0x40;
        assert!(write_stored(&b, false, 0, &mut Vec::new()).is_none());
        // The terminator before the last byte.
        let mut b = good.clone();
        b[4] = 0;
        assert!(write_stored(&b, false, 0, &mut Vec::new()).is_none());
    }

    fn bytes(d: &Document) -> Vec<u8> {
        RawDocumentBuf::try_from(d).expect("encodes").into_bytes()
    }

    /// Whatever the one-pass parser accepts, it reads exactly as the general path does.
    fn check_parse(text: &[u8]) -> bool {
        match parse_plain(text) {
            Some(d) => {
                let want = crate::documents::codec::parse_json_value(text)
                    .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(text)));
                assert_eq!(bytes(&d), bytes(&want), "{}", String::from_utf8_lossy(text));
                true
            }
            None => false,
        }
    }

    #[test]
    fn plain_parse_matches_the_general_path() {
        let fixed: &[&str] = &[
            r#"{"_id":7}"#,
            r#" { "a" : [ 1 , -2 , 3.5 , -0.0 , 1e3 , 2E-2 , 0 , 2147483648 , -2147483649 ] } "#,
            r#"{"a":999999999999999999,"b":-999999999999999999,"c":1.7976931348623157e308}"#,
            r#"{"a":{"$gt":5,"$lt":[true,false,null]},"b":"$$NOW","c":{}}"#,
            r#"{"a":[],"b":[[[]]],"é":"ü😀"}"#,
        ];
        for t in fixed {
            assert!(check_parse(t.as_bytes()), "{t}");
        }
        // Left to the general path (which may accept or refuse them).
        let general: &[&str] = &[
            r#"{"a":{"$oid":"5f1e5b5e5b5e5b5e5b5e5b5e"}}"#,
            r#"{"a":1,"a":2}"#,
            r#"{"a":"x\ny"}"#,
            r#"{"a":-0}"#,
            r#"{"a":01}"#,
            r#"{"a":12345678901234567890}"#,
            r#"{"a":1e400}"#,
            r#"{"a":1,}"#,
            r#"{"a":1} x"#,
            r#"[1]"#,
            r#"{"a":tru}"#,
            "{\"a\":\"\u{1}\"}",
        ];
        for t in general {
            assert!(parse_plain(t.as_bytes()).is_none(), "{t}");
        }
        // Random documents written out, then cut and altered byte by byte.
        let mut r = Rng(0x2545_f491_4f6c_dd1d);
        let mut accepted = 0;
        for _ in 0..5_000 {
            let d = document(&mut r, 0);
            let text = bson_json(&Bson::Document(d));
            if check_parse(&text) {
                accepted += 1;
            }
            let mut t = text.clone();
            for _ in 0..3 {
                if t.is_empty() {
                    break;
                }
                let i = r.below(t.len() as u64) as usize;
                let junk = b" {}[]:,\"-0123456789.eE+tfnul$\\";
                match r.below(3) {
                    0 => t[i] = junk[r.below(junk.len() as u64) as usize],
                    1 => {
                        t.remove(i);
                    }
                    _ => t.insert(i, junk[r.below(junk.len() as u64) as usize]),
                }
            }
            check_parse(&t);
            check_parse(&text[..r.below(text.len() as u64 + 1) as usize]);
        }
        assert!(accepted > 500, "{accepted}");
    }

    /// JSON text of a document made of the values and names plain text can hold (and some
    /// it cannot), for the encoders below.
    fn plain_text(r: &mut Rng, depth: u32, top: bool) -> String {
        const NAMES: [&str; 12] = [
            "a", "b", "userID", "_id", "é", "x y", "", "a.b", "$x", "$date", "n", "😀",
        ];
        const LEAVES: [&str; 22] = [
            "1",
            "-5",
            "0",
            "-0",
            "2147483647",
            "2147483648",
            "-2147483649",
            "999999999999999999",
            "12345678901234567890",
            "2.5",
            "-0.0",
            "1e3",
            "1.7976931348623157e308",
            "true",
            "false",
            "null",
            r#""s""#,
            r#""$$NOW""#,
            r#""x\ny""#,
            r#""ü😀""#,
            r#""""#,
            r#"{"$oid":"5f1e5b5e5b5e5b5e5b5e5b5e"}"#,
        ];
        let mut out = String::from("{");
        for i in 0..r.below(6) {
            if i > 0 {
                out.push_str(if r.below(4) == 0 { " , " } else { "," });
            }
            let name = NAMES[r.below(NAMES.len() as u64) as usize];
            out.push_str(&format!("\"{name}\":"));
            out.push_str(&plain_value(r, depth, top && name == "_id", &LEAVES));
        }
        out.push('}');
        out
    }

    fn plain_value(r: &mut Rng, depth: u32, id: bool, leaves: &[&str]) -> String {
        match r.below(if depth > 3 { 1 } else { 4 }) {
            0 => leaves[r.below(leaves.len() as u64) as usize].to_string(),
            1 => plain_text(r, depth + 1, false),
            _ if id && r.below(2) == 0 => "[1]".into(),
            _ => {
                let n = r.below(4);
                let items: Vec<String> = (0..n)
                    .map(|_| plain_value(r, depth + 1, false, leaves))
                    .collect();
                format!("[{}]", items.join(","))
            }
        }
    }

    /// What the general path stores for `text` (with `id` as the generated `_id`), or
    /// `None` where it refuses the text.
    fn general_stored(text: &[u8], now: DateTime, id: Option<ObjectId>) -> Option<Vec<u8>> {
        use crate::documents::codec;
        let mut d = codec::parse_json(text).ok()?;
        codec::replace_now(&mut d, now);
        codec::validate_stored(&d).ok()?;
        let raw = match (d.get("_id"), id) {
            (Some(_), None) => codec::to_raw(&d, usize::MAX).ok()?,
            (None, Some(oid)) => codec::to_raw_with_id(&d, oid, usize::MAX).ok()?,
            _ => panic!("_id disagrees: {}", String::from_utf8_lossy(text)),
        };
        Some(raw.into_bytes())
    }

    /// Every insert text the one-pass encoder takes is stored byte for byte as the general
    /// path stores it (same `_id`), and it takes most of the plain ones.
    #[test]
    fn encoded_inserts_match_the_general_path() {
        use crate::documents::codec::{encode_insert_json, NewDoc};
        let now = DateTime::from_millis(1_700_000_000_123);
        let check = |text: &[u8]| -> bool {
            match encode_insert_json(text, now) {
                Some(NewDoc::Encoded { id, raw }) => {
                    // A generated `_id` is the ObjectId the general path is given.
                    let generated = match &id {
                        Bson::ObjectId(o)
                            if crate::documents::codec::parse_json(text)
                                .is_ok_and(|d| !d.contains_key("_id")) =>
                        {
                            Some(*o)
                        }
                        _ => None,
                    };
                    let want = general_stored(text, now, generated).unwrap_or_else(|| {
                        panic!("general path refuses {}", String::from_utf8_lossy(text))
                    });
                    assert_eq!(
                        raw.as_bytes(),
                        &want[..],
                        "{}",
                        String::from_utf8_lossy(text)
                    );
                    assert_eq!(
                        Some(&id),
                        Document::try_from(raw.as_ref())
                            .ok()
                            .as_ref()
                            .and_then(|d| d.get("_id"))
                    );
                    true
                }
                Some(NewDoc::Decoded(_)) => unreachable!(),
                None => false,
            }
        };
        let fixed: &[&str] = &[
            r#"{"userID":"000000001234","accessTime":"$$NOW","a":1,"b":"x","c":2.5,"d":true}"#,
            r#"{"_id":"000000000001","userID":"u","at":"$$NOW"}"#,
            r#" { "a" : [ 1 , [ ] , { } , "$$NOW" , null ] , "_id" : { "k" : 1 } } "#,
            r#"{}"#,
            r#"{"_id":"$$NOW"}"#,
        ];
        for t in fixed {
            assert!(check(t.as_bytes()), "{t}");
        }
        // Left to the general path (which stores or refuses them).
        let general: &[&str] = &[
            r#"{"_id":[1]}"#,
            r#"{"a.b":1}"#,
            r#"{"a":{"$x":1}}"#,
            r#"{"a":{"$date":"2020-01-01T00:00:00Z"}}"#,
            r#"{"a":1,"a":2}"#,
            r#"{"a":{"b":1,"b":2}}"#,
            r#"{"a":"x\ny"}"#,
            r#"{"a":-0}"#,
            r#"[1]"#,
            r#"{"a":1} x"#,
        ];
        for t in general {
            assert!(encode_insert_json(t.as_bytes(), now).is_none(), "{t}");
        }
        let mut r = Rng(0x5851_f42d_4c95_7f2d);
        let (mut taken, mut plain) = (0, 0);
        for _ in 0..20_000 {
            let text = plain_text(&mut r, 0, true);
            let ok = check(text.as_bytes());
            taken += ok as u32;
            // Every text the plain reader takes and the stored rules accept, the encoder
            // takes too (but a key the reader does not know is a wrapper).
            if let Some(mut d) = parse_plain(text.as_bytes()) {
                crate::documents::codec::replace_now(&mut d, now);
                let plain_ok = crate::documents::codec::validate_stored(&d).is_ok();
                plain += plain_ok as u32;
                assert!(!plain_ok || ok, "{text}");
            }
        }
        assert!(taken > 3_000 && taken == plain, "{taken} {plain}");
    }

    /// Every update text `parse_scalar_sets` takes gives the sets the general path's
    /// `Update::scalar_sets` gives, and it takes the plain ones.
    #[test]
    fn scalar_sets_match_the_general_path() {
        use crate::documents::{codec, update};
        let now = DateTime::from_millis(1_700_000_000_123);
        const OPS: [&str; 5] = ["$set", "$currentDate", "$set", "$inc", "$setOnInsert"];
        const FIELDS: [&str; 9] = ["a", "b", "userID", "_id", "a.b", "$x", "", "é", "at"];
        const VALUES: [&str; 20] = [
            "1",
            "-5",
            "2147483648",
            "2.5",
            "-0",
            "1e400",
            "true",
            "false",
            "null",
            r#""s""#,
            r#""$$NOW""#,
            r#""x\ny""#,
            "{}",
            "[1]",
            r#"{"$type":"date"}"#,
            r#"{"$type":"timestamp"}"#,
            r#""""#,
            "99999999999999999999",
            r#""ü""#,
            "tru",
        ];
        let pick = |r: &mut Rng, a: &[&'static str]| a[r.below(a.len() as u64) as usize];
        let mut r = Rng(0x1234_5678_9abc_def1);
        let mut taken = 0;
        // Half the texts from names and values this reader takes, so that many are read.
        const CLEAN_OPS: [&str; 2] = ["$set", "$currentDate"];
        const CLEAN_FIELDS: [&str; 5] = ["a", "b", "userID", "é", "at"];
        const CLEAN_VALUES: [&str; 9] = [
            "1",
            "-5",
            "2147483648",
            "2.5",
            "true",
            "false",
            r#""s""#,
            r#""$$NOW""#,
            r#""ü""#,
        ];
        for n in 0..20_000 {
            let clean = n % 2 == 0;
            let (op_pool, field_pool, value_pool): (&[&str], &[&str], &[&str]) = if clean {
                (&CLEAN_OPS, &CLEAN_FIELDS, &CLEAN_VALUES)
            } else {
                (&OPS, &FIELDS, &VALUES)
            };
            let mut text = String::from("{");
            let (mut ops, mut fields) = (Vec::new(), Vec::new());
            for i in 0..r.below(3) + 1 {
                if i > 0 {
                    text.push(',');
                }
                let op = pick(&mut r, op_pool);
                ops.push(op);
                text.push_str(&format!("\"{op}\": {{"));
                for j in 0..r.below(3) {
                    if j > 0 {
                        text.push(',');
                    }
                    let field = pick(&mut r, field_pool);
                    fields.push(field);
                    text.push_str(&format!("\"{field}\" : {}", pick(&mut r, value_pool)));
                }
                text.push('}');
            }
            text.push_str(if r.below(20) == 0 { "} x" } else { "}" });
            let general = codec::parse_json(text.as_bytes()).ok().and_then(|mut d| {
                codec::replace_now(&mut d, now);
                update::parse(&d).ok()
            });
            let want = general
                .as_ref()
                .and_then(|u| u.scalar_sets(now))
                .filter(|s| !s.is_empty());
            match parse_scalar_sets(text.as_bytes(), now.timestamp_millis()) {
                Some(got) => {
                    taken += 1;
                    assert_eq!(Some(got.to_vec()), want, "{text}");
                }
                // Nothing the general path writes in place is missed but the forms left to
                // it on purpose: `$type`, escapes, numbers with an edge, an operator named
                // twice or another operator.
                None => {
                    // (An empty `$inc` or `$setOnInsert` adds no operation to the general
                    // path's update; this reader refuses any other operator. The general
                    // reader keeps the last of a repeated name.)
                    let twice = |v: &[&str]| (1..v.len()).any(|i| v[..i].contains(&v[i]));
                    let repeated = twice(&ops)
                        || twice(&fields)
                        || ops.iter().any(|o| !matches!(*o, "$set" | "$currentDate"));
                    assert!(
                        want.is_none()
                            || repeated
                            || ["$type", "\\", "-0", "99999999999999999999"]
                                .iter()
                                .any(|x| text.contains(x)),
                        "{text}"
                    )
                }
            };
        }
        assert!(taken > 1_000, "{taken}");
    }

    #[test]
    fn dates_at_every_boundary() {
        let edges = [
            0,
            1,
            10,
            100,
            999,
            86_399_999,
            86_400_000,
            951_782_400_000, // 2000-02-29
            4_107_542_399_999,
            YEAR_10000_MS - 1,
            YEAR_10000_MS,
            i64::MAX,
            -1,
            -86_400_000,
        ];
        for ms in edges {
            let v = Bson::DateTime(DateTime::from_millis(ms));
            assert_eq!(
                String::from_utf8(bson_json(&v)).unwrap(),
                oracle(&v),
                "{ms}"
            );
        }
        // Every day of four centuries (leap rules), at a varying time of day.
        let mut ms = 0i64;
        while ms < 4 * 36_524 * 86_400_000 + 86_400_000 {
            let v = Bson::DateTime(DateTime::from_millis(ms));
            assert_eq!(
                String::from_utf8(bson_json(&v)).unwrap(),
                oracle(&v),
                "{ms}"
            );
            ms += 86_400_000 + 3_601_001;
        }
    }

    #[test]
    fn every_control_character_escapes_alike() {
        for c in 0u32..=0x80 {
            let s = char::from_u32(c).unwrap().to_string();
            let v = Bson::String(s);
            assert_eq!(String::from_utf8(bson_json(&v)).unwrap(), oracle(&v), "{c}");
        }
    }
}
