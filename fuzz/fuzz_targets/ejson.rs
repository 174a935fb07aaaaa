//! Extended JSON text → BSON and back (src/documents/codec.rs, src/documents/json.rs), and
//! raw BSON (the BSON flag) → document.
//!
//! JSON input (first byte even): `codec::parse_json` must accept or refuse without a panic.
//! The fast reader (`json::parse_plain`) must agree with the general path it stands in for
//! (`codec::parse_json_value`) whenever it answers; a parsed document's relaxed JSON must be
//! the same written from the decoded document and from its stored bytes, must parse again,
//! and must be stable from then on; its stored bytes must read back to the same bytes.
//! BSON input (first byte odd): `codec::parse_bson` must accept or refuse without a panic, and
//! what it accepts must write as JSON.
#![no_main]

use bson::{Document, RawDocumentBuf};
use libfuzzer_sys::fuzz_target;
use tidecache::documents::codec::{doc_json, parse_bson, parse_json, parse_json_value, to_raw};
use tidecache::documents::json::{parse_plain, raw_doc_json};

fn raw(d: &Document) -> Option<RawDocumentBuf> {
    to_raw(d, 64 << 20).ok()
}

fn check_doc(doc: &Document) {
    let text = doc_json(doc);
    let Some(stored) = raw(doc) else { return };
    let from_raw = raw_doc_json(&stored).expect("stored bytes decode");
    assert_eq!(
        text.as_bytes(),
        &from_raw[..],
        "the writers of a decoded and a stored document differ"
    );
    let back = parse_bson(stored.as_bytes()).expect("stored bytes read back");
    assert_eq!(
        raw(&back).map(|r| r.into_bytes()),
        Some(stored.as_bytes().to_vec()),
        "stored bytes do not read back to themselves"
    );
    let again = parse_json(text.as_bytes())
        .unwrap_or_else(|e| panic!("written JSON does not parse again: {text}: {e}"));
    let text2 = doc_json(&again);
    let again2 = parse_json(text2.as_bytes()).expect("written JSON parses");
    assert_eq!(
        text2,
        doc_json(&again2),
        "relaxed JSON not stable after one round trip"
    );
}

fuzz_target!(|data: &[u8]| {
    let Some((&ctl, input)) = data.split_first() else {
        return;
    };
    if ctl & 1 == 0 {
        if let Some(fast) = parse_plain(input) {
            let general = parse_json_value(input).unwrap_or_else(|e| {
                panic!("the fast reader accepted what the general path refuses: {e}")
            });
            assert_eq!(
                raw(&fast).map(|r| r.into_bytes()),
                raw(&general).map(|r| r.into_bytes()),
                "the fast reader and the general path read different documents"
            );
        }
        if let Ok(doc) = parse_json(input) {
            check_doc(&doc);
        }
    } else if let Ok(doc) = parse_bson(input) {
        let _ = doc_json(&doc);
        if let Ok(r) = RawDocumentBuf::from_bytes(input.to_vec()) {
            let _ = raw_doc_json(&r);
        }
    }
});
