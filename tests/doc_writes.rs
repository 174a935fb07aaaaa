//! Single-document writes by `_id` that skip the decode/re-encode of the general update:
//! `$set` of strings (of another length too) and fixed-width values, `$currentDate`, written
//! into the stored bytes. Each case checks the document, the reply's counts and every index
//! that reads the field against what the general path gives.

mod support;

use redis::Value;
use support::{err_text, int, q, strs, TestServer};

fn update(c: &mut redis::Connection, coll: &str, filter: &str, upd: &str) -> Vec<Value> {
    q::<Vec<Value>>(c, &["DOC.UPDATE", coll, filter, upd, "UPSERT"]).expect("update")
}

fn counts(r: &[Value]) -> (i64, i64, bool) {
    let n = |v: &Value| match v {
        Value::Int(i) => *i,
        other => panic!("not an integer: {other:?}"),
    };
    (n(&r[0]), n(&r[1]), !matches!(r[2], Value::Nil))
}

fn find(c: &mut redis::Connection, coll: &str, filter: &str) -> Vec<String> {
    strs(c, &["DOC.FIND", coll, filter])
}

#[test]
fn string_sets_by_id_rewrite_the_document_and_its_indexes() {
    let s = TestServer::start(&["--shards", "4"]);
    let mut c = s.conn();
    let _: String = q(&mut c, &["DOC.EXPIREINDEX", "s", "at", "3600"]).expect("ttl");
    let _: String = q(&mut c, &["DOC.CREATEINDEX", "s", r#"{"user":1}"#]).expect("index");
    // Ten minutes old: well within the TTL, and older than any touch below.
    let then = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_millis()
        - 600_000;
    for i in 0..20 {
        let d = format!(r#"{{"_id":"{i:03}","user":"u{i}","at":{{"$date":{then}}},"n":1}}"#);
        let _: Value = q(&mut c, &["DOC.INSERT", "s", &d]).expect("insert");
    }
    // Longer, shorter, same length; with a fixed-width field and a date in the same update.
    for (id, user) in [("005", "a-much-longer-user"), ("006", "x"), ("007", "u8")] {
        let f = format!(r#"{{"_id":"{id}"}}"#);
        let u = format!(r#"{{"$set":{{"user":"{user}","n":2}},"$currentDate":{{"at":true}}}}"#);
        assert_eq!(counts(&update(&mut c, "s", &f, &u)), (1, 1, false), "{id}");
        let got = find(&mut c, "s", &f);
        assert_eq!(got.len(), 1);
        assert!(got[0].contains(&format!(r#""user":"{user}""#)), "{got:?}");
        assert!(got[0].contains(r#""n":2"#), "{got:?}");
        // Field order kept, as the general `$set` keeps it.
        let (pu, pa, pn) = (
            got[0].find("\"user\"").expect("user"),
            got[0].find("\"at\"").expect("at"),
            got[0].find("\"n\"").expect("n"),
        );
        assert!(
            got[0].starts_with(r#"{"_id""#) && pu < pa && pa < pn,
            "{got:?}"
        );
        // The index on `user` finds the new value and no longer the old one.
        let by_new = find(&mut c, "s", &format!(r#"{{"user":"{user}"}}"#));
        assert!(
            by_new
                .iter()
                .any(|d| d.contains(&format!(r#""_id":"{id}""#))),
            "{by_new:?}"
        );
    }
    // Two strings in one update, one growing by what the other shrinks: the document keeps
    // its length, its values move.
    let _: Value = q(
        &mut c,
        &["DOC.INSERT", "two", r#"{"_id":1,"a":"xx","b":"yyyy"}"#],
    )
    .expect("insert");
    let r = update(
        &mut c,
        "two",
        r#"{"_id":1}"#,
        r#"{"$set":{"a":"xxxx","b":"yy"}}"#,
    );
    assert_eq!(counts(&r), (1, 1, false));
    assert_eq!(
        find(&mut c, "two", r#"{"_id":1}"#),
        vec![r#"{"_id":1,"a":"xxxx","b":"yy"}"#.to_string()]
    );
    assert!(find(&mut c, "s", r#"{"user":"u5"}"#).is_empty());
    assert!(find(&mut c, "s", r#"{"user":"u6"}"#).is_empty());
    // "u8" now names two documents (007 and 008): a non-unique index holds both.
    assert_eq!(find(&mut c, "s", r#"{"user":"u8"}"#).len(), 2);
    // The TTL index's field moved too: the touched ones are the recent ones.
    assert_eq!(
        int(
            &mut c,
            &[
                "DOC.COUNT",
                "s",
                &format!(r#"{{"at":{{"$gt":{{"$date":{then}}}}}}}"#)
            ]
        ),
        3
    );
    // Setting what is there already matches and modifies nothing.
    let r = update(&mut c, "s", r#"{"_id":"006"}"#, r#"{"$set":{"user":"x"}}"#);
    assert_eq!(counts(&r), (1, 0, false));
    // A string over a field of another type takes the general path, same result.
    let r = update(&mut c, "s", r#"{"_id":"009"}"#, r#"{"$set":{"n":"one"}}"#);
    assert_eq!(counts(&r), (1, 1, false));
    assert!(find(&mut c, "s", r#"{"_id":"009"}"#)[0].contains(r#""n":"one""#));
    // A missing `_id` still upserts.
    let r = update(&mut c, "s", r#"{"_id":"new"}"#, r#"{"$set":{"user":"nu"}}"#);
    assert_eq!(counts(&r), (0, 0, true));
    assert_eq!(find(&mut c, "s", r#"{"user":"nu"}"#).len(), 1);
    assert_eq!(int(&mut c, &["DOC.COUNT", "s", "{}"]), 21);
    // DOC.STATS still adds up after documents changed size.
    let _: Value = q(&mut c, &["DOC.STATS", "s"]).expect("stats");
}

#[test]
fn string_sets_keep_size_limits_capped_sizes_and_unique_keys() {
    let s = TestServer::start(&["--shards", "2", "--max-document-size", "120"]);
    let mut c = s.conn();
    let _: Value = q(&mut c, &["DOC.INSERT", "m", r#"{"_id":1,"s":"short"}"#]).expect("insert");
    // Growing past max-document-size is refused and changes nothing.
    let big = format!(r#"{{"$set":{{"s":"{}"}}}}"#, "y".repeat(150));
    let e = err_text(q::<Value>(
        &mut c,
        &["DOC.UPDATE", "m", r#"{"_id":1}"#, &big],
    ));
    assert!(e.contains("too large"), "{e}");
    assert!(find(&mut c, "m", r#"{"_id":1}"#)[0].contains(r#""s":"short""#));
    // A capped collection's documents keep their size.
    let _: Value = q(&mut c, &["DOC.CREATE", "cap", "CAPPED", "SIZE", "100000"]).expect("capped");
    let _: Value = q(&mut c, &["DOC.INSERT", "cap", r#"{"_id":1,"s":"abc"}"#]).expect("insert");
    let e = err_text(q::<Value>(
        &mut c,
        &[
            "DOC.UPDATE",
            "cap",
            r#"{"_id":1}"#,
            r#"{"$set":{"s":"abcd"}}"#,
        ],
    ));
    assert!(
        e.contains("Cannot change the size of a document in a capped collection"),
        "{e}"
    );
    let r = q::<Vec<Value>>(
        &mut c,
        &[
            "DOC.UPDATE",
            "cap",
            r#"{"_id":1}"#,
            r#"{"$set":{"s":"xyz"}}"#,
        ],
    )
    .expect("same size");
    assert_eq!(counts(&r), (1, 1, false));
    // A unique index on the field: its keys are claimed (the general path), so a duplicate
    // is refused and the document keeps its value.
    let _: String =
        q(&mut c, &["DOC.CREATEINDEX", "m", r#"{"s":1}"#, "UNIQUE"]).expect("unique index");
    let _: Value = q(&mut c, &["DOC.INSERT", "m", r#"{"_id":2,"s":"other"}"#]).expect("insert");
    let e = err_text(q::<Value>(
        &mut c,
        &[
            "DOC.UPDATE",
            "m",
            r#"{"_id":2}"#,
            r#"{"$set":{"s":"short"}}"#,
        ],
    ));
    assert!(e.contains("duplicate key"), "{e}");
    let r = q::<Vec<Value>>(
        &mut c,
        &[
            "DOC.UPDATE",
            "m",
            r#"{"_id":2}"#,
            r#"{"$set":{"s":"renamed"}}"#,
        ],
    )
    .expect("unique update");
    assert_eq!(counts(&r), (1, 1, false));
    // The old key is free again, the new one taken.
    let _: Value = q(&mut c, &["DOC.INSERT", "m", r#"{"_id":3,"s":"other"}"#]).expect("freed");
    let e = err_text(q::<Value>(
        &mut c,
        &["DOC.INSERT", "m", r#"{"_id":4,"s":"renamed"}"#],
    ));
    assert!(e.contains("duplicate key"), "{e}");
}

/// The stored document with this `_id`, as raw BSON (the `BSON` flag: the filter is BSON
/// too).
fn stored_bson(c: &mut redis::Connection, coll: &str, id: &bson::Bson) -> Vec<u8> {
    let mut filter = bson::Document::new();
    filter.insert("_id", id.clone());
    let filter = bson::RawDocumentBuf::try_from(&filter)
        .expect("encodes")
        .into_bytes();
    redis::cmd("DOC.FINDONE")
        .arg(coll)
        .arg("BSON")
        .arg(filter)
        .query::<Vec<u8>>(c)
        .expect("stored document")
}

/// JSON inserts are encoded straight to their stored bytes: each is stored exactly as the
/// same document sent as BSON (which is decoded and encoded the general way), with a
/// generated `_id` first, `"$$NOW"` a date; text the one-pass encoder leaves to the general
/// path is stored or refused as before.
#[test]
fn json_inserts_store_what_the_general_path_stores() {
    let s = TestServer::start(&["--shards", "2", "--max-document-size", "300"]);
    let mut c = s.conn();
    let docs = [
        r#"{"_id":"s1","userID":"000000001234","a":1,"b":"x","c":2.5,"d":true}"#,
        r#"{"_id":7,"n":[1,-2,2147483648,-2147483649,1.5e3,0.1,[],{}],"e":null,"f":false}"#,
        r#" { "_id" : { "k" : [ "é" , "😀" ] } , "sub" : { "a" : { "b" : 999999999999999999 } } } "#,
        r#"{"x":1,"_id":2.5,"y":""}"#,
    ];
    for (i, text) in docs.iter().enumerate() {
        let _: Value = q(&mut c, &["DOC.INSERT", "fast", text]).expect("json insert");
        let general = serde_json::from_str::<serde_json::Value>(text)
            .ok()
            .and_then(|v| bson::Bson::try_from(v).ok())
            .and_then(|b| b.as_document().cloned())
            .expect("document");
        let bytes = bson::RawDocumentBuf::try_from(&general)
            .expect("encodes")
            .into_bytes();
        let _: Value = redis::cmd("DOC.INSERT")
            .arg("general")
            .arg("BSON")
            .arg(bytes)
            .query(&mut c)
            .expect("bson insert");
        let id = general.get("_id").expect("_id").clone();
        let fast = stored_bson(&mut c, "fast", &id);
        assert!(fast.len() > 5, "document {i}");
        assert_eq!(fast, stored_bson(&mut c, "general", &id), "document {i}");
    }
    // A generated `_id` goes first; `$$NOW` is the command's date, nested too.
    let ids = strs(
        &mut c,
        &["DOC.INSERT", "fast", r#"{"at":"$$NOW","l":["$$NOW"]}"#],
    );
    assert!(
        ids[0].starts_with(r#"{"$oid":""#) && ids[0].len() == 35,
        "{ids:?}"
    );
    let got = strs(
        &mut c,
        &["DOC.FIND", "fast", &format!(r#"{{"_id":{}}}"#, ids[0])],
    );
    assert!(
        got[0].starts_with(&format!(r#"{{"_id":{},"at":{{"$date":""#, ids[0])),
        "{got:?}"
    );
    assert!(got[0].contains(r#""l":[{"$date":""#), "{got:?}");
    // Left to the general path: stored as before, or refused with its words.
    let _: Value = q(
        &mut c,
        &[
            "DOC.INSERT",
            "fast",
            r#"{"_id":"w","t":{"$date":"2020-01-02T03:04:05Z"},"s":"a\nb"}"#,
        ],
    )
    .expect("wrappers and escapes");
    let got = strs(&mut c, &["DOC.FIND", "fast", r#"{"_id":"w"}"#]);
    assert_eq!(
        got,
        [r#"{"_id":"w","t":{"$date":"2020-01-02T03:04:05Z"},"s":"a\nb"}"#]
    );
    for (text, want) in [
        (r#"{"_id":[1]}"#, "cannot be of type array"),
        (r#"{"a.b":1}"#, "may not contain '.'"),
        (r#"{"a":{"$x":1}}"#, "may not start with '$'"),
        (r#"{"a":1,}"#, "invalid JSON at byte"),
    ] {
        let e = err_text(q::<Value>(&mut c, &["DOC.INSERT", "fast", text]));
        assert!(e.contains(want), "{text}: {e}");
    }
    // The size limit is the general path's, checked after every document is parsed.
    let big = format!(r#"{{"_id":"big","s":"{}"}}"#, "y".repeat(300));
    let e = err_text(q::<Value>(&mut c, &["DOC.INSERT", "fast", &big]));
    assert!(e.contains("document is too large"), "{e}");
    let e = err_text(q::<Value>(&mut c, &["DOC.INSERT", "fast", &big, "{"]));
    assert!(e.contains("invalid JSON"), "{e}");
    assert_eq!(int(&mut c, &["DOC.COUNT", "fast", r#"{"_id":"big"}"#]), 0);
}

/// `DOC.UPDATE` read straight from the text (`$set`/`$currentDate` of scalars by `_id`)
/// answers as the general update does when it does not apply: an upsert of a missing
/// document inserts it, errors are the general path's words.
#[test]
fn update_text_fast_path_falls_back_alike() {
    let s = TestServer::start(&["--shards", "2"]);
    let mut c = s.conn();
    let u = r#"{"$set":{"userID":"u1","n":2147483648},"$currentDate":{"at":true}}"#;
    // No collection yet, then no document: both inserted by the general upsert.
    let r = update(&mut c, "s", r#"{"_id":"a"}"#, u);
    assert_eq!(counts(&r), (0, 0, true));
    let r = update(&mut c, "s", r#"{"_id":"b"}"#, u);
    assert_eq!(counts(&r), (0, 0, true));
    let got = find(&mut c, "s", r#"{"_id":"a"}"#);
    assert!(
        got[0].starts_with(r#"{"_id":"a","userID":"u1","n":2147483648,"at":{"$date":""#),
        "{got:?}"
    );
    // Found: written in place; the same values again change nothing.
    let r = update(
        &mut c,
        "s",
        r#"{"_id":"a"}"#,
        r#"{"$set":{"userID":"u2","t":true}}"#,
    );
    assert_eq!(counts(&r), (1, 1, false));
    let r = update(
        &mut c,
        "s",
        r#"{"_id":"a"}"#,
        r#"{"$set":{"userID":"u2","t":true}}"#,
    );
    assert_eq!(counts(&r), (1, 0, false));
    let got = find(&mut c, "s", r#"{"_id":"a"}"#);
    assert!(
        got[0].contains(r#""userID":"u2""#) && got[0].ends_with(r#","t":true}"#),
        "{got:?}"
    );
    for (upd, want) in [
        (
            r#"{"$set":{"a":1},"$currentDate":{"a":true}}"#,
            "Updating the path 'a' would create a conflict at 'a'",
        ),
        (r#"{"$set":{"_id":"z"}}"#, "field '_id'"),
        (
            r#"{"$currentDate":{"at":1}}"#,
            "is not valid type for $currentDate",
        ),
        (r#"{"$set":{"a":1},"x":1}"#, "Unknown modifier: x"),
        (r#"{"$set":{"":1}}"#, "contains an empty field name"),
    ] {
        let e = err_text(q::<Value>(
            &mut c,
            &["DOC.UPDATE", "s", r#"{"_id":"a"}"#, upd, "UPSERT"],
        ));
        assert!(e.contains(want), "{upd}: {e}");
    }
    assert!(find(&mut c, "s", r#"{"_id":"a"}"#)[0].contains(r#""userID":"u2""#));
}
