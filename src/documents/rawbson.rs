//! A walker over stored BSON bytes for the hot read paths (a field's value, a document
//! written as JSON).
//!
//! Why: the bson crate's `RawDocument` iterator checks each element as it goes (the UTF-8 of
//! every key, lengths) and builds a `Result` per element; finding one field of a three-field
//! session document cost several hundred instructions, paid on every read that checks a
//! TTL date or a stored type. This walker only finds where each element starts and ends.
//! Anything it does not recognise (an unknown type byte, a length that runs past the end)
//! ends the walk with `None`, and the caller then takes the bson crate's path: it can be
//! faster than that path, never different.

/// One element of a document: its type byte, key bytes (no terminator) and value bytes.
#[derive(Debug, Clone, Copy)]
pub struct Elem<'a> {
    pub ty: u8,
    pub key: &'a [u8],
    pub value: &'a [u8],
}

pub const DOUBLE: u8 = 0x01;
pub const STRING: u8 = 0x02;
pub const DOCUMENT: u8 = 0x03;
pub const ARRAY: u8 = 0x04;
pub const OBJECT_ID: u8 = 0x07;
pub const BOOLEAN: u8 = 0x08;
pub const DATE_TIME: u8 = 0x09;
pub const NULL: u8 = 0x0A;
pub const INT32: u8 = 0x10;
pub const INT64: u8 = 0x12;

fn i32_at(b: &[u8], at: usize) -> Option<i32> {
    let s = b.get(at..at + 4)?;
    Some(i32::from_le_bytes([s[0], s[1], s[2], s[3]]))
}

/// A little-endian i64 value (a date, an int64).
pub fn i64_of(v: &[u8]) -> Option<i64> {
    let s: [u8; 8] = v.get(..8)?.try_into().ok()?;
    Some(i64::from_le_bytes(s))
}

/// The bytes of a BSON string value (without its length and terminator).
pub fn str_of(v: &[u8]) -> Option<&[u8]> {
    let n = usize::try_from(i32_at(v, 0)?).ok()?;
    if n == 0 || v.len() != n + 4 || v[n + 3] != 0 {
        return None;
    }
    Some(&v[4..n + 3])
}

/// Length of a C string starting at `at`, terminator included.
fn cstr_len(b: &[u8], at: usize) -> Option<usize> {
    Some(b.get(at..)?.iter().position(|&c| c == 0)? + 1)
}

/// Length of the value of type `ty` at `at`.
fn value_len(ty: u8, b: &[u8], at: usize) -> Option<usize> {
    let sized = |extra: usize| -> Option<usize> {
        let n = usize::try_from(i32_at(b, at)?).ok()?;
        n.checked_add(extra)
    };
    Some(match ty {
        0x01 | 0x09 | 0x11 | 0x12 => 8,
        // String, JavaScript code, symbol: length, bytes, terminator.
        0x02 | 0x0D | 0x0E => sized(4)?,
        // Document, array, code with scope: the length counts itself.
        0x03 | 0x04 | 0x0F => sized(0)?,
        0x05 => sized(5)?,
        0x06 | 0x0A | 0x7F | 0xFF => 0,
        0x07 => 12,
        0x08 => 1,
        0x0B => {
            let p = cstr_len(b, at)?;
            p + cstr_len(b, at + p)?
        }
        0x0C => sized(16)?,
        0x10 => 4,
        0x13 => 16,
        _ => return None,
    })
}

/// The elements of a document or array (`doc`: its whole bytes, length and terminator
/// included). Yields `None` once, then stops, when the bytes are not as expected.
pub fn elements(doc: &[u8]) -> Elements<'_> {
    let ok =
        i32_at(doc, 0).is_some_and(|n| n as usize == doc.len() && n >= 5) && doc.last() == Some(&0);
    Elements {
        b: doc,
        at: if ok { 4 } else { usize::MAX },
    }
}

pub struct Elements<'a> {
    b: &'a [u8],
    /// Offset of the next element; `usize::MAX` once broken, `len` when done.
    at: usize,
}

impl<'a> Iterator for Elements<'a> {
    type Item = Option<Elem<'a>>;

    fn next(&mut self) -> Option<Option<Elem<'a>>> {
        let b = self.b;
        if self.at == usize::MAX {
            self.at = b.len();
            return Some(None);
        }
        let ty = *b.get(self.at)?;
        if ty == 0 {
            // The terminator must be the last byte.
            let end = self.at + 1 == b.len();
            self.at = b.len() + 1;
            return if end { None } else { Some(None) };
        }
        let elem = (|| {
            let k = self.at + 1;
            let klen = cstr_len(b, k)?;
            let v = k + klen;
            let vlen = value_len(ty, b, v)?;
            // The value must end before the document's terminator.
            let end = v.checked_add(vlen)?;
            if end >= b.len() {
                return None;
            }
            self.at = end;
            Some(Elem {
                ty,
                key: &b[k..k + klen - 1],
                value: &b[v..end],
            })
        })();
        if elem.is_none() {
            self.at = b.len() + 1;
        }
        Some(elem)
    }
}

/// The top-level field `key` of a document: `Some(None)` when it has none, `None` when the
/// bytes are not as expected.
pub fn field<'a>(doc: &'a [u8], key: &str) -> Option<Option<Elem<'a>>> {
    for e in elements(doc) {
        let e = e?;
        if e.key == key.as_bytes() {
            return Some(Some(e));
        }
    }
    Some(None)
}

/// Whether the stored document's `_id` has the KeyString `key`, for the common `_id` types
/// read here without a decode: a string (its KeyString is the type tag, the bytes, and
/// `00 00`; a NUL inside escapes to `00 FF`, left to the general path) or an ObjectId (the
/// tag and its 12 bytes), as `keys::raw_matches` compares them. `None` for any other type or bytes the walker refuses: the caller compares through the
/// bson crate. Why: the `_id` map's probe compares the hit's `_id` on every find, touch and
/// update by `_id`, and the crate's lookup checked the UTF-8 of the key and value first.
pub fn id_matches_key(doc: &[u8], key: &[u8]) -> Option<bool> {
    use crate::documents::order::rank;
    let e = field(doc, "_id")??;
    let (&tag, rest) = key.split_first()?;
    match e.ty {
        STRING => {
            let s = str_of(e.value)?;
            if crate::documents::keys::has_zero_byte(s) {
                return None;
            }
            Some(
                tag == crate::documents::order::STRING_RANK + 1
                    && rest.len() == s.len() + 2
                    && rest[..s.len()] == *s
                    && rest[s.len()..] == [0, 0],
            )
        }
        OBJECT_ID => Some(
            tag == rank(&bson::Bson::ObjectId(bson::oid::ObjectId::from_bytes(
                [0; 12],
            ))) + 1
                && rest == e.value,
        ),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, Bson, RawDocumentBuf};

    #[test]
    fn walks_every_type_as_the_bson_crate() {
        let d = doc! {
            "d": 1.5, "s": "héllo", "o": {"x": [1, "a"]}, "a": [true, Bson::Null],
            "b": bson::Binary { subtype: bson::spec::BinarySubtype::Generic, bytes: vec![1, 2] },
            "u": Bson::Undefined, "i": bson::oid::ObjectId::new(), "t": true,
            "dt": bson::DateTime::from_millis(42), "n": Bson::Null,
            "re": bson::Regex {
                pattern: "a.b".to_string().try_into().expect("no NUL"),
                options: "i".to_string().try_into().expect("no NUL"),
            },
            "js": Bson::JavaScriptCode("f()".into()), "sy": Bson::Symbol("sym".into()),
            "i32": 7, "ts": bson::Timestamp { time: 1, increment: 2 }, "i64": 1i64 << 40,
            "dec": Bson::Decimal128(bson::Decimal128::from_bytes([1; 16])),
            "min": Bson::MinKey, "max": Bson::MaxKey,
        };
        let raw = RawDocumentBuf::try_from(&d).expect("encode");
        let mine: Vec<(u8, Vec<u8>, usize)> = elements(raw.as_bytes())
            .map(|e| e.expect("walks"))
            .map(|e| (e.ty, e.key.to_vec(), e.value.len()))
            .collect();
        let keys: Vec<Vec<u8>> = d.keys().map(|k| k.as_bytes().to_vec()).collect();
        assert_eq!(mine.iter().map(|m| m.1.clone()).collect::<Vec<_>>(), keys);
        assert_eq!(mine[0], (DOUBLE, b"d".to_vec(), 8));
        let s = field(raw.as_bytes(), "s").expect("ok").expect("present");
        assert_eq!(str_of(s.value), Some("héllo".as_bytes()));
        let dt = field(raw.as_bytes(), "dt").expect("ok").expect("present");
        assert_eq!((dt.ty, i64_of(dt.value)), (DATE_TIME, Some(42)));
        assert!(field(raw.as_bytes(), "nope").expect("ok").is_none());
    }

    #[test]
    fn id_match_agrees_with_the_keystring_compare() {
        use crate::documents::keys;
        let oid = bson::oid::ObjectId::new();
        let ids = [
            Bson::String("abc".into()),
            Bson::String(String::new()),
            Bson::String("a\0b".into()),
            Bson::ObjectId(oid),
            Bson::Int32(7),
            Bson::Symbol("abc".into()),
        ];
        for stored in &ids {
            let raw =
                RawDocumentBuf::try_from(&doc! {"_id": stored.clone(), "x": 1}).expect("encode");
            let v = raw.get("_id").expect("ok").expect("present");
            for asked in &ids {
                let key = keys::encode(asked);
                let want = keys::raw_matches(v, &key);
                match id_matches_key(raw.as_bytes(), &key) {
                    Some(got) => assert_eq!(got, want, "{stored:?} vs {asked:?}"),
                    // Left to the general compare: a NUL in a string, other types.
                    None => assert!(
                        !matches!(stored, Bson::ObjectId(_))
                            && !matches!(stored, Bson::String(s) if !s.contains('\0')),
                        "{stored:?}"
                    ),
                }
            }
        }
    }

    #[test]
    fn broken_bytes_end_the_walk() {
        let raw = RawDocumentBuf::try_from(&doc! {"a": "xy", "b": 1}).expect("encode");
        let good = raw.as_bytes().to_vec();
        // A string length running past the end, a wrong total, an unknown type.
        let mut long = good.clone();
        long[7] = 0x7f;
        let mut total = good.clone();
        total[0] += 1;
        let mut ty = good.clone();
        ty[4] = 0x42;
        for b in [long, total, ty] {
            let b: &[u8] = &b;
            assert!(elements(b).any(|e| e.is_none()), "{b:?}");
            assert!(field(b, "b").is_none());
        }
        assert!(elements(&[]).any(|e| e.is_none()));
    }
}
