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
