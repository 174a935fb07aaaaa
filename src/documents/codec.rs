//! Extended JSON v2 ↔ BSON, `"$$NOW"`, and the checks every stored document passes.

pub use crate::documents::inplace::{Fixed, SetValue, NOW};
use crate::documents::json;
use bson::spec::ElementType;
use bson::{Bson, DateTime, Document, RawDocumentBuf};

/// Deepest nesting a stored document may have (MongoDB's limit).
pub const MAX_DEPTH: usize = 100;

/// `max-document-size`, mirrored here (at start and on `CONFIG SET`): every insert and
/// update checks it, and reading it from the configuration map was about 400 instructions
/// of a 10k-instruction write.
static MAX_SIZE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(16 << 20);

/// The largest stored document, in bytes (`max-document-size`).
pub fn max_size() -> usize {
    MAX_SIZE.load(std::sync::atomic::Ordering::Relaxed)
}

/// Follows `max-document-size`.
pub fn set_max_size(n: usize) {
    MAX_SIZE.store(n, std::sync::atomic::Ordering::Relaxed);
}

/// Parses Extended JSON text (relaxed or canonical) into a document. Errors name the byte
/// where parsing stopped: `invalid JSON at byte 17: expected value`.
pub fn parse_json(text: &[u8]) -> Result<Document, String> {
    if let Some(d) = json::parse_plain(text) {
        return Ok(d);
    }
    parse_json_value(text)
}

/// The general path (and the reference for `json::parse_plain`): serde_json's `Value`,
/// then the bson crate's Extended JSON conversion.
pub fn parse_json_value(text: &[u8]) -> Result<Document, String> {
    let value: serde_json::Value = match serde_json::from_slice(text) {
        Ok(v) => v,
        Err(e) => return Err(json_error(text, &e)),
    };
    if !value.is_object() {
        return Err("invalid JSON at byte 0: expected an object".into());
    }
    match Bson::try_from(value) {
        Ok(Bson::Document(d)) => Ok(d),
        Ok(_) => Err("invalid Extended JSON: expected a document, not a typed value".into()),
        Err(e) => Err(format!(
            "invalid Extended JSON: {}",
            one_line(&e.to_string())
        )),
    }
}

/// Reads a raw BSON document (the `BSON` flag).
pub fn parse_bson(bytes: &[u8]) -> Result<Document, String> {
    let raw = RawDocumentBuf::from_bytes(bytes.to_vec())
        .map_err(|e| format!("invalid BSON: {}", one_line(&e.to_string())))?;
    // Decoding recurses once per level: refuse deep nesting before it can exhaust the stack.
    if !raw_depth_ok(&raw, 1) {
        return Err(format!(
            "ERR document exceeds the maximum nesting depth of {MAX_DEPTH}"
        ));
    }
    Document::try_from(&raw).map_err(|e| format!("invalid BSON: {}", one_line(&e.to_string())))
}

fn raw_depth_ok(doc: &bson::RawDocument, depth: usize) -> bool {
    if depth > MAX_DEPTH {
        return false;
    }
    doc.iter().all(|e| match e {
        Ok((_, v)) => raw_value_depth_ok(v, depth),
        Err(_) => true,
    })
}

fn raw_value_depth_ok(v: bson::RawBsonRef<'_>, depth: usize) -> bool {
    match v {
        bson::RawBsonRef::Document(d) => raw_depth_ok(d, depth + 1),
        bson::RawBsonRef::Array(a) => {
            depth < MAX_DEPTH
                && a.into_iter().all(|e| match e {
                    Ok(v) => raw_value_depth_ok(v, depth + 1),
                    Err(_) => true,
                })
        }
        _ => true,
    }
}

/// Parses a command argument as JSON or, with the `BSON` flag, as raw BSON.
pub fn parse(arg: &[u8], bson: bool) -> Result<Document, String> {
    if bson {
        parse_bson(arg)
    } else {
        parse_json(arg)
    }
}

fn one_line(s: &str) -> String {
    s.replace(['\r', '\n'], " ")
}

/// serde_json reports line and column; the spec wants a byte offset.
pub fn json_error(text: &[u8], e: &serde_json::Error) -> String {
    let (line, col) = (e.line(), e.column());
    let mut offset = 0usize;
    let mut cur = 1usize;
    for (i, &b) in text.iter().enumerate() {
        if cur == line {
            offset = i;
            break;
        }
        if b == b'\n' {
            cur += 1;
            offset = i + 1;
        }
    }
    let byte = (offset + col.saturating_sub(1)).min(text.len());
    let msg = e.to_string();
    // serde_json appends " at line L column C"; the byte offset replaces it.
    let msg = match msg.rfind(" at line ") {
        Some(p) => msg[..p].to_string(),
        None => msg,
    };
    format!("invalid JSON at byte {byte}: {msg}")
}

/// Replaces every `"$$NOW"` string value with `now`.
pub fn replace_now(doc: &mut Document, now: DateTime) {
    for (_, v) in doc.iter_mut() {
        replace_now_value(v, now);
    }
}

pub fn replace_now_value(v: &mut Bson, now: DateTime) {
    match v {
        Bson::String(s) if s == NOW => *v = Bson::DateTime(now),
        Bson::Document(d) => replace_now(d, now),
        Bson::Array(a) => a.iter_mut().for_each(|e| replace_now_value(e, now)),
        _ => {}
    }
}

/// Checks a document about to be stored: field names (no leading `$`, no `.`, no NUL),
/// nesting depth, `_id` not an array (nor a regex or undefined, as MongoDB).
pub fn validate_stored(doc: &Document) -> Result<(), String> {
    if let Some(id) = doc.get("_id") {
        match id {
            Bson::Array(_) => return Err("ERR The '_id' value cannot be of type array".into()),
            Bson::RegularExpression(_) => {
                return Err("ERR The '_id' value cannot be of type regex".into())
            }
            Bson::Undefined => return Err("ERR The '_id' value cannot be of type undefined".into()),
            _ => {}
        }
    }
    check_fields(doc, 1)
}

fn check_fields(doc: &Document, depth: usize) -> Result<(), String> {
    if depth > MAX_DEPTH {
        return Err(format!(
            "ERR document exceeds the maximum nesting depth of {MAX_DEPTH}"
        ));
    }
    for (k, v) in doc {
        if k.starts_with('$') {
            return Err(format!(
                "ERR field names may not start with '$' in stored documents: '{k}'"
            ));
        }
        if k.contains('.') {
            return Err(format!(
                "ERR field names may not contain '.' in stored documents: '{k}'"
            ));
        }
        if k.contains('\0') {
            return Err("ERR field names may not contain a NUL byte".into());
        }
        check_value(v, depth)?;
    }
    Ok(())
}

fn check_value(v: &Bson, depth: usize) -> Result<(), String> {
    match v {
        Bson::Document(d) => check_fields(d, depth + 1),
        Bson::Array(a) => {
            if depth + 1 > MAX_DEPTH {
                return Err(format!(
                    "ERR document exceeds the maximum nesting depth of {MAX_DEPTH}"
                ));
            }
            a.iter().try_for_each(|e| check_value(e, depth + 1))
        }
        Bson::String(s) if s.contains('\0') => Ok(()),
        _ => Ok(()),
    }
}

/// Serializes a validated document to its stored form, enforcing `max_size`.
pub fn to_raw(doc: &Document, max_size: usize) -> Result<RawDocumentBuf, String> {
    let raw = RawDocumentBuf::try_from(doc)
        .map_err(|e| format!("ERR cannot encode document: {}", one_line(&e.to_string())))?;
    if raw.as_bytes().len() > max_size {
        return Err(format!(
            "ERR document is too large: {} bytes, max-document-size is {max_size}",
            raw.as_bytes().len()
        ));
    }
    // The encoder grows its buffer by doubling; a stored document keeps exactly its bytes
    // (otherwise up to twice its size stays allocated for as long as it is stored). A copy,
    // not `shrink_to_fit`: mimalloc keeps a block that shrinks by less than half in place.
    let mut bytes = raw.into_bytes();
    if bytes.capacity() > bytes.len() {
        bytes = bytes.as_slice().to_vec();
    }
    RawDocumentBuf::from_bytes(bytes)
        .map_err(|e| format!("ERR cannot encode document: {}", one_line(&e.to_string())))
}

/// [`to_raw`] of a document without `_id`, given the ObjectId `id` as its first field (where
/// MongoDB puts a generated `_id`): the encoded fields are copied behind it once, instead of
/// building a second document with `_id` in front and encoding that.
pub fn to_raw_with_id(
    doc: &Document,
    id: bson::oid::ObjectId,
    max_size: usize,
) -> Result<RawDocumentBuf, String> {
    let raw = RawDocumentBuf::try_from(doc)
        .map_err(|e| format!("ERR cannot encode document: {}", one_line(&e.to_string())))?;
    let fields = raw.as_bytes().get(4..).unwrap_or(&[0]);
    let len = 4 + 1 + 4 + 12 + fields.len();
    if len > max_size {
        return Err(format!(
            "ERR document is too large: {len} bytes, max-document-size is {max_size}"
        ));
    }
    let mut bytes = Vec::with_capacity(len);
    bytes.extend_from_slice(&(len as i32).to_le_bytes());
    bytes.push(ElementType::ObjectId as u8);
    bytes.extend_from_slice(b"_id\0");
    bytes.extend_from_slice(&id.bytes());
    bytes.extend_from_slice(fields);
    RawDocumentBuf::from_bytes(bytes)
        .map_err(|e| format!("ERR cannot encode document: {}", one_line(&e.to_string())))
}

/// A document to insert: decoded (the general path), or already in its stored form.
pub enum NewDoc {
    Decoded(Document),
    Encoded { id: Bson, raw: RawDocumentBuf },
}

/// An insert's JSON document straight to its stored form (`json::encode_stored`), with a
/// generated ObjectId as its first field when it has no `_id` (as `to_raw_with_id`):
/// `None` when the text needs the general path (`parse_json`, `replace_now`,
/// `validate_stored`, then `Store`'s encoding), which gives the same stored bytes for every
/// text this accepts. The size limit is checked where the general path checks it, when the
/// document is prepared for its shard ([`check_size`]).
pub fn encode_insert_json(text: &[u8], now: DateTime) -> Option<NewDoc> {
    /// The encoder's output and its key ranges, reused from one insert to the next.
    type Scratch = (Vec<u8>, Vec<(u32, u32)>);
    thread_local! {
        static SCRATCH: std::cell::RefCell<Scratch> =
            const { std::cell::RefCell::new((Vec::new(), Vec::new())) };
    }
    SCRATCH.with(|cell| {
        let mut scratch = cell.try_borrow_mut().ok()?;
        let (buf, keys) = &mut *scratch;
        let has_id = json::encode_stored(text, now.timestamp_millis(), buf, keys);
        let out = has_id.and_then(|has_id| {
            // The stored copy gets exactly its length (see `to_raw`); the scratch buffer
            // is kept for the next insert.
            let fields = buf.get(4 + json::ID_ROOM..)?;
            if has_id {
                let mut bytes = Vec::with_capacity(4 + fields.len());
                bytes.extend_from_slice(&((4 + fields.len()) as i32).to_le_bytes());
                bytes.extend_from_slice(fields);
                let raw = RawDocumentBuf::from_bytes(bytes).ok()?;
                let id = Bson::try_from(raw.get("_id").ok()??).ok()?;
                return Some(NewDoc::Encoded { id, raw });
            }
            let oid = bson::oid::ObjectId::new();
            let mut bytes = Vec::with_capacity(buf.len());
            bytes.extend_from_slice(&(buf.len() as i32).to_le_bytes());
            bytes.push(ElementType::ObjectId as u8);
            bytes.extend_from_slice(b"_id\0");
            bytes.extend_from_slice(&oid.bytes());
            bytes.extend_from_slice(fields);
            let raw = RawDocumentBuf::from_bytes(bytes).ok()?;
            Some(NewDoc::Encoded {
                id: Bson::ObjectId(oid),
                raw,
            })
        });
        // A very large document does not keep its scratch space allocated for good.
        if buf.capacity() > 1 << 16 {
            *buf = Vec::new();
        }
        out
    })
}

/// The size limit of a stored document, in the general path's words.
pub fn check_size(len: usize, max_size: usize) -> Result<(), String> {
    if len > max_size {
        return Err(format!(
            "ERR document is too large: {len} bytes, max-document-size is {max_size}"
        ));
    }
    Ok(())
}

/// Relaxed Extended JSON text of a value.
pub fn value_json(v: &Bson) -> String {
    utf8(json::bson_json(v))
}

/// Relaxed Extended JSON text of a document, fields in stored order.
pub fn doc_json(d: &Document) -> String {
    let mut out = Vec::new();
    json::write_doc(d, &mut out);
    utf8(out)
}

/// Relaxed Extended JSON text of a document the caller no longer needs.
pub fn doc_json_owned(d: Document) -> String {
    doc_json(&d)
}

/// The writer copies valid UTF-8 strings and writes ASCII around them.
fn utf8(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// The shell-like rendering MongoDB uses in duplicate key errors: `{ _id: 1 }`.
pub fn dup_key_text(id: &Bson) -> String {
    let v = match id {
        Bson::String(s) => format!("\"{s}\""),
        Bson::ObjectId(o) => format!("ObjectId('{o}')"),
        Bson::Int64(i) => i.to_string(),
        Bson::Int32(i) => i.to_string(),
        Bson::Double(d) => format!("{d}"),
        other => value_json(other),
    };
    format!("{{ _id: {v} }}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by fuzz/ (target `ejson`): without serde_json's `float_roundtrip` its float
    /// reader is not correctly rounded, so a double read back changed on the next write
    /// (`4.999999999999998e+49` came back as `4.999999999999997e+49`, and the integer
    /// literal 50000000000000000000000000000001176462235850914018 was read as
    /// `4.999999999999998e+49` instead of `5e+49`).
    #[test]
    fn doubles_read_correctly_rounded_and_round_trip() {
        for (text, want) in [
            (r#"{"n":4.999999999999998e+49}"#, 4.999999999999998e49),
            (
                r#"{"n":50000000000000000000000000000001176462235850914018}"#,
                5e49,
            ),
            (
                r#"{"n":2.2250738585072011e-308}"#,
                2.225_073_858_507_201e-308,
            ),
        ] {
            let d = parse_json(text.as_bytes()).expect("parses");
            assert_eq!(d.get_f64("n").ok(), Some(want), "{text}");
            let again = parse_json(doc_json(&d).as_bytes()).expect("parses again");
            assert_eq!(again.get_f64("n").ok(), Some(want), "{text}");
        }
    }

    #[test]
    fn stored_documents_hold_exactly_their_bytes() {
        let mut d = Document::new();
        d.insert("_id", 1);
        d.insert("pad", "p".repeat(1000));
        let raw = to_raw(&d, 1 << 24).unwrap();
        let bytes = raw.into_bytes();
        assert_eq!(bytes.capacity(), bytes.len());
    }

    #[test]
    fn byte_offsets_in_errors() {
        let e = parse_json(br#"{"a": 1, "b": tru}"#).unwrap_err();
        assert!(e.starts_with("invalid JSON at byte "), "{e}");
        let e = parse_json(b"{\n\"a\": }").unwrap_err();
        assert!(e.starts_with("invalid JSON at byte 7"), "{e}");
    }

    #[test]
    fn extended_json_types() {
        let d = parse_json(
            br#"{"d":{"$date":"2012-08-02T17:47:15.275Z"},"n":{"$date":{"$numberLong":"5"}},"m":{"$date":7},
                "l":{"$numberLong":"3"},"o":{"$oid":"5f1e5b5e5b5e5b5e5b5e5b5e"},"x":{"$numberDecimal":"1.5"},
                "t":{"$timestamp":{"t":1,"i":2}},"r":{"$regularExpression":{"pattern":"a","options":"i"}},
                "mi":{"$minKey":1},"ma":{"$maxKey":1},"f":{"$numberDouble":"2.0"},
                "b":{"$binary":{"base64":"AQI=","subType":"00"}}}"#,
        )
        .expect("valid extjson");
        assert!(matches!(d.get("d"), Some(Bson::DateTime(_))));
        assert_eq!(d.get("n"), Some(&Bson::DateTime(DateTime::from_millis(5))));
        assert_eq!(d.get("m"), Some(&Bson::DateTime(DateTime::from_millis(7))));
        assert_eq!(d.get("l"), Some(&Bson::Int64(3)));
        assert!(matches!(d.get("o"), Some(Bson::ObjectId(_))));
        assert!(matches!(d.get("x"), Some(Bson::Decimal128(_))));
        assert!(matches!(d.get("t"), Some(Bson::Timestamp(_))));
        assert!(matches!(d.get("r"), Some(Bson::RegularExpression(_))));
        assert_eq!(d.get("mi"), Some(&Bson::MinKey));
        assert_eq!(d.get("ma"), Some(&Bson::MaxKey));
        assert_eq!(d.get("f"), Some(&Bson::Double(2.0)));
        assert!(matches!(d.get("b"), Some(Bson::Binary(_))));
        let keys: Vec<&String> = d.keys().collect();
        assert_eq!(keys[0], "d");
        assert_eq!(keys[11], "b");
    }

    #[test]
    fn stored_field_names_and_depth() {
        assert!(validate_stored(&parse_json(br#"{"$a":1}"#).unwrap()).is_err());
        assert!(validate_stored(&parse_json(br#"{"a":{"b.c":1}}"#).unwrap()).is_err());
        assert!(validate_stored(&parse_json(br#"{"_id":[1]}"#).unwrap()).is_err());
        let mut deep = String::new();
        for _ in 0..101 {
            deep.push_str("{\"a\":");
        }
        deep.push('1');
        for _ in 0..101 {
            deep.push('}');
        }
        // serde_json's own recursion limit is 128, so 101 levels parse and the check refuses.
        let d = parse_json(deep.as_bytes()).unwrap();
        assert!(validate_stored(&d).is_err());
    }
}

/// Where a top-level field of a stored (valid) BSON document sits: its element type and the
/// offset of its value in `doc`. A walk over the element headers that decodes nothing,
/// for the paths that rewrite a fixed-size value in place (a touch). `None` when the field
/// is absent or the bytes do not walk cleanly.
pub fn top_level_value(doc: &[u8], name: &str) -> Option<(u8, usize)> {
    let len_at = |at: usize| -> Option<usize> {
        let b = doc.get(at..at + 4)?;
        usize::try_from(i32::from_le_bytes([b[0], b[1], b[2], b[3]])).ok()
    };
    let end = doc.len().checked_sub(1)?;
    let mut at = 4;
    while at < end {
        let kind = doc[at];
        let key_start = at + 1;
        let key_len = doc.get(key_start..end)?.iter().position(|&b| b == 0)?;
        let value = key_start + key_len + 1;
        if &doc[key_start..key_start + key_len] == name.as_bytes() {
            return Some((kind, value));
        }
        let size = match kind {
            0x01 | 0x09 | 0x11 | 0x12 => 8,
            0x02 | 0x0D | 0x0E => 4 + len_at(value)?,
            0x03 | 0x04 | 0x0F => len_at(value)?,
            0x05 => 5 + len_at(value)?,
            0x06 | 0x0A | 0x7F | 0xFF => 0,
            0x07 => 12,
            0x08 => 1,
            0x0B => {
                let p1 = doc.get(value..end)?.iter().position(|&b| b == 0)?;
                let p2 = doc.get(value + p1 + 1..end)?.iter().position(|&b| b == 0)?;
                p1 + p2 + 2
            }
            0x0C => 4 + len_at(value)? + 12,
            0x10 => 4,
            0x13 => 16,
            _ => return None,
        };
        at = value.checked_add(size)?;
    }
    None
}

#[cfg(test)]
mod walk_tests {
    use super::top_level_value;
    use bson::{doc, spec::ElementType, Binary, DateTime, Regex, Timestamp};

    #[test]
    fn finds_every_field_after_every_type() {
        let d = doc! {
            "d": 1.5, "s": "str", "o": {"x": 1}, "a": [1, 2], "b": Binary { subtype: bson::spec::BinarySubtype::Generic, bytes: vec![1, 2, 3] },
            "id": bson::oid::ObjectId::new(), "t": true, "n": null,
            "r": Regex { pattern: "a.b".to_string().try_into().expect("cstr"), options: "i".to_string().try_into().expect("cstr") },
            "i": 7i32, "ts": Timestamp { time: 1, increment: 2 }, "l": 9i64,
            "when": DateTime::from_millis(1234),
        };
        let raw = bson::RawDocumentBuf::try_from(&d).expect("raw");
        let bytes = raw.as_bytes();
        let (kind, at) = top_level_value(bytes, "when").expect("found");
        assert_eq!(kind, ElementType::DateTime as u8);
        assert_eq!(
            i64::from_le_bytes(bytes[at..at + 8].try_into().expect("8")),
            1234
        );
        for (k, _) in &d {
            assert!(top_level_value(bytes, k).is_some(), "{k}");
        }
        assert_eq!(top_level_value(bytes, "missing"), None);
        assert_eq!(top_level_value(&[5, 0, 0, 0, 0], "when"), None);
        assert_eq!(
            top_level_value(&[9, 0, 0, 0, 0x42, b'x', 0, 0, 0], "y"),
            None
        );
    }
}
