//! Document collections through the `redis` crate against the real binary: every DOC command
//! this family implements and its options, error replies, and concurrent inserts.

mod support;

use redis::Value;
use support::{err_text, int, q, strs, TestServer};

#[test]
fn insert_find_roundtrip_and_ids() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    let ids = strs(
        &mut c,
        &[
            "DOC.INSERT",
            "u",
            r#"{"_id":1,"name":"ann","tags":["a","b"],"at":{"$date":"2020-01-02T03:04:05.006Z"}}"#,
            r#"{"name":"bob","z":1,"a":2}"#,
            r#"{"_id":"k","n":{"$numberLong":"5000000000"}}"#,
        ],
    );
    assert_eq!(ids[0], "1");
    assert!(ids[1].starts_with(r#"{"$oid":""#), "{}", ids[1]);
    assert_eq!(ids[2], r#""k""#);
    let one = strs(&mut c, &["DOC.FIND", "u", r#"{"_id":1}"#]);
    assert_eq!(
        one,
        vec![
            r#"{"_id":1,"name":"ann","tags":["a","b"],"at":{"$date":"2020-01-02T03:04:05.006Z"}}"#
        ]
    );
    // An assigned _id comes first, the rest keeps its order.
    let bob: String = q(&mut c, &["DOC.FINDONE", "u", r#"{"name":"bob"}"#]).expect("bob");
    assert!(bob.starts_with(r#"{"_id":{"$oid":"#), "{bob}");
    assert!(bob.ends_with(r#""name":"bob","z":1,"a":2}"#), "{bob}");
    // Relaxed output: a large integer stays a plain number.
    let k: String = q(&mut c, &["DOC.FINDONE", "u", r#"{"_id":"k"}"#]).expect("k");
    assert_eq!(k, r#"{"_id":"k","n":5000000000}"#);
    // The ObjectId round-trips as a filter.
    let by_oid = strs(
        &mut c,
        &["DOC.FIND", "u", &format!(r#"{{"_id":{}}}"#, ids[1])],
    );
    assert_eq!(by_oid, vec![bob]);
    assert_eq!(int(&mut c, &["DOC.COUNT", "u", "{}"]), 3);
    // An _id equality plus other conditions reads one document and checks the rest on it.
    assert_eq!(
        int(&mut c, &["DOC.COUNT", "u", r#"{"_id":1,"name":"ann"}"#]),
        1
    );
    assert_eq!(
        int(&mut c, &["DOC.COUNT", "u", r#"{"name":"bob","_id":1}"#]),
        0
    );
    assert_eq!(
        int(
            &mut c,
            &["DOC.COUNT", "u", r#"{"_id":{"$eq":1.0},"tags":"b"}"#]
        ),
        1
    );
    assert_eq!(int(&mut c, &["DOC.COUNT", "nothing", "{}"]), 0);
    let none: Option<String> = q(&mut c, &["DOC.FINDONE", "u", r#"{"name":"zed"}"#]).expect("nil");
    assert_eq!(none, None);
    assert_eq!(
        strs(&mut c, &["DOC.FIND", "missing", "{}"]),
        Vec::<String>::new()
    );
}

#[test]
fn duplicate_ids_compare_as_bson() {
    let s = TestServer::start(&["--shards", "4"]);
    let mut c = s.conn();
    strs(&mut c, &["DOC.INSERT", "d", r#"{"_id":1}"#]);
    for dup in [
        r#"{"_id":1}"#,
        r#"{"_id":1.0}"#,
        r#"{"_id":{"$numberLong":"1"}}"#,
    ] {
        let e = err_text(q::<Value>(&mut c, &["DOC.INSERT", "d", dup]));
        assert_eq!(
            e, "DUPKEY E11000 duplicate key error collection: 0.d index: _id_ dup key: { _id: 1 }",
            "{dup}"
        );
    }
    let e = err_text(q::<Value>(
        &mut c,
        &["DOC.INSERT", "d", r#"{"_id":"x"}"#, r#"{"_id":"x"}"#],
    ));
    assert!(e.starts_with("DUPKEY E11000"), "{e}");
    assert!(e.ends_with(r#"dup key: { _id: "x" }"#), "{e}");
    assert_eq!(int(&mut c, &["DOC.COUNT", "d", "{}"]), 1);
}

#[test]
fn insert_is_all_or_nothing_and_validates() {
    let s = TestServer::start(&["--shards", "4", "--max-document-size", "200"]);
    let mut c = s.conn();
    let e = err_text(q::<Value>(
        &mut c,
        &[
            "DOC.INSERT",
            "v",
            r#"{"_id":1}"#,
            r#"{"_id":2}"#,
            r#"{"$bad":1}"#,
        ],
    ));
    assert!(
        e.starts_with("ERR field names may not start with '$'"),
        "{e}"
    );
    let e = err_text(q::<Value>(
        &mut c,
        &["DOC.INSERT", "v", r#"{"_id":3}"#, r#"{"a.b":1}"#],
    ));
    assert!(e.contains("may not contain '.'"), "{e}");
    let e = err_text(q::<Value>(&mut c, &["DOC.INSERT", "v", r#"{"_id":[1]}"#]));
    assert_eq!(e, "ERR The '_id' value cannot be of type array");
    let e = err_text(q::<Value>(
        &mut c,
        &["DOC.INSERT", "v", r#"{"a": 1, "b": tru}"#],
    ));
    assert_eq!(e, "ERR invalid JSON at byte 17: expected ident");
    let e = err_text(q::<Value>(&mut c, &["DOC.INSERT", "v", r#"[1]"#]));
    assert!(e.starts_with("ERR invalid JSON at byte 0"), "{e}");
    let big = format!(r#"{{"_id":9,"s":"{}"}}"#, "x".repeat(300));
    let e = err_text(q::<Value>(
        &mut c,
        &["DOC.INSERT", "v", r#"{"_id":8}"#, &big],
    ));
    assert!(e.starts_with("ERR document is too large"), "{e}");
    let mut deep = String::new();
    for _ in 0..101 {
        deep.push_str(r#"{"a":"#);
    }
    deep.push('1');
    deep.push_str(&"}".repeat(101));
    let e = err_text(q::<Value>(&mut c, &["DOC.INSERT", "v", &deep]));
    assert!(e.contains("nesting depth"), "{e}");
    assert_eq!(int(&mut c, &["DOC.COUNT", "v", "{}"]), 0);
}

#[test]
fn find_projection_sort_skip_limit_across_shards() {
    let s = TestServer::start(&["--shards", "8"]);
    let mut c = s.conn();
    let docs: Vec<String> = (0..100)
        .map(|i| {
            format!(
                r#"{{"_id":{i},"n":{},"g":{},"sub":{{"x":{i},"y":"w"}}}}"#,
                (i * 37) % 100,
                i % 3
            )
        })
        .collect();
    let mut args = vec!["DOC.INSERT", "p"];
    args.extend(docs.iter().map(String::as_str));
    assert_eq!(strs(&mut c, &args).len(), 100);
    let got = strs(
        &mut c,
        &[
            "DOC.FIND",
            "p",
            r#"{"g":{"$ne":1}}"#,
            "PROJECTION",
            r#"{"n":1,"_id":0}"#,
            "SORT",
            r#"{"n":-1}"#,
            "SKIP",
            "3",
            "LIMIT",
            "4",
        ],
    );
    // n runs over 0..100 once each; g != 1 keeps those with _id % 3 != 1.
    let mut want: Vec<i64> = (0..100)
        .filter(|i| i % 3 != 1)
        .map(|i| (i * 37) % 100)
        .collect();
    want.sort_unstable_by(|a, b| b.cmp(a));
    let want: Vec<String> = want[3..7]
        .iter()
        .map(|n| format!(r#"{{"n":{n}}}"#))
        .collect();
    assert_eq!(got, want);
    let got = strs(
        &mut c,
        &[
            "DOC.FIND",
            "p",
            r#"{"_id":{"$lt":6}}"#,
            "SORT",
            r#"{"g":1,"_id":-1}"#,
            "PROJECTION",
            r#"{"sub.x":1}"#,
        ],
    );
    let ids: Vec<String> = [3, 0, 4, 1, 5, 2]
        .iter()
        .map(|i| format!(r#"{{"_id":{i},"sub":{{"x":{i}}}}}"#))
        .collect();
    assert_eq!(got, ids);
    let got = strs(
        &mut c,
        &[
            "DOC.FIND",
            "p",
            r#"{"_id":5}"#,
            "PROJECTION",
            r#"{"sub":0,"g":0}"#,
        ],
    );
    assert_eq!(got, vec![r#"{"_id":5,"n":85}"#]);
    assert_eq!(
        strs(&mut c, &["DOC.FIND", "p", "{}", "LIMIT", "7"]).len(),
        7
    );
    assert_eq!(
        strs(&mut c, &["DOC.FIND", "p", "{}", "LIMIT", "-2", "TOUCH"]).len(),
        2
    );
    assert_eq!(
        strs(&mut c, &["DOC.FIND", "p", "{}", "SKIP", "98"]).len(),
        2
    );
    assert_eq!(
        strs(&mut c, &["DOC.FIND", "p", "{}", "SKIP", "5", "LIMIT", "0"]).len(),
        95
    );
    let first: String = q(
        &mut c,
        &[
            "DOC.FINDONE",
            "p",
            r#"{"g":2}"#,
            "SORT",
            r#"{"n":1}"#,
            "PROJECTION",
            r#"{"n":1}"#,
            "TOUCH",
        ],
    )
    .expect("one");
    assert_eq!(first, r#"{"_id":92,"n":4}"#);
    assert_eq!(
        int(
            &mut c,
            &["DOC.COUNT", "p", r#"{"sub.y":"w","n":{"$gte":50}}"#]
        ),
        50
    );
    let e = err_text(q::<Value>(
        &mut c,
        &["DOC.FIND", "p", "{}", "PROJECTION", r#"{"a":1,"b":0}"#],
    ));
    assert_eq!(
        e,
        "ERR Cannot do exclusion on field b in inclusion projection"
    );
    let e = err_text(q::<Value>(
        &mut c,
        &["DOC.FIND", "p", "{}", "SORT", r#"{"a":2}"#],
    ));
    assert!(e.starts_with("ERR $sort key ordering must be 1"), "{e}");
    let e = err_text(q::<Value>(&mut c, &["DOC.FIND", "p", "{}", "LIMIT", "x"]));
    assert_eq!(e, "ERR value is not an integer or out of range");
    let e = err_text(q::<Value>(&mut c, &["DOC.FIND", "p", "{}", "BOGUS"]));
    assert_eq!(e, "ERR syntax error");
}

#[test]
fn query_errors_and_no_server_side_code() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    strs(&mut c, &["DOC.INSERT", "e", r#"{"a":1}"#]);
    let e = err_text(q::<Value>(
        &mut c,
        &["DOC.FIND", "e", r#"{"a":{"$foo":1}}"#],
    ));
    assert_eq!(e, "ERR unknown operator: $foo");
    let e = err_text(q::<Value>(
        &mut c,
        &["DOC.COUNT", "e", r#"{"$where":"sleep(100)"}"#],
    ));
    assert!(e.starts_with("ERR $where is not allowed"), "{e}");
    let e = err_text(q::<Value>(
        &mut c,
        &["DOC.FIND", "e", r#"{"a":{"$regex":"(a)\\1"}}"#],
    ));
    assert!(e.starts_with("ERR invalid regular expression"), "{e}");
    let e = err_text(q::<Value>(&mut c, &["DOC.INSERT", "a$b", "{}"]));
    assert_eq!(e, "ERR Invalid collection name: 'a$b'");
    let e = err_text(q::<Value>(&mut c, &["DOC.COUNT", "", "{}"]));
    assert_eq!(e, "ERR Invalid collection name: ''");
    let e = err_text(q::<Value>(&mut c, &["DOC.DELETE", "e", r#"{"$expr":{}}"#]));
    assert_eq!(e, "ERR unknown top level operator: $expr");
    assert_eq!(int(&mut c, &["DOC.COUNT", "e", "{}"]), 1);
}

#[test]
fn now_in_documents_filters_and_updates() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    strs(&mut c, &["DOC.INSERT", "n", r#"{"_id":1,"at":"$$NOW"}"#]);
    let d: String = q(&mut c, &["DOC.FINDONE", "n", "{}"]).expect("doc");
    assert!(d.starts_with(r#"{"_id":1,"at":{"$date":"20"#), "{d}");
    assert_eq!(
        int(&mut c, &["DOC.COUNT", "n", r#"{"at":{"$lte":"$$NOW"}}"#]),
        1
    );
    assert_eq!(
        int(&mut c, &["DOC.COUNT", "n", r#"{"at":{"$type":"date"}}"#]),
        1
    );
    let r: Vec<Value> = q(
        &mut c,
        &[
            "DOC.UPDATE",
            "n",
            r#"{"_id":1}"#,
            r#"{"$set":{"seen":"$$NOW"}}"#,
        ],
    )
    .expect("update");
    assert_eq!(r[1], Value::Int(1));
    assert_eq!(
        int(
            &mut c,
            &[
                "DOC.COUNT",
                "n",
                r#"{"seen":{"$gte":{"$date":"2020-01-01T00:00:00Z"}}}"#
            ]
        ),
        1
    );
}

#[test]
fn update_operators_multi_upsert_and_replacement() {
    let s = TestServer::start(&["--shards", "4"]);
    let mut c = s.conn();
    strs(
        &mut c,
        &[
            "DOC.INSERT",
            "w",
            r#"{"_id":1,"n":1,"tags":["a"],"o":{"x":1},"old":5}"#,
            r#"{"_id":2,"n":10,"tags":[]}"#,
            r#"{"_id":3,"n":20}"#,
        ],
    );
    let r: Vec<Value> = q(
        &mut c,
        &[
            "DOC.UPDATE",
            "w",
            r#"{"_id":1}"#,
            r#"{"$inc":{"n":2},"$set":{"o.y.z":3},"$push":{"tags":{"$each":["b","c"]}},"$addToSet":{"set":"q"},"$rename":{"old":"new"},"$min":{"lo":4},"$max":{"o.x":9},"$mul":{"m":3},"$unset":{"nothing":""},"$currentDate":{"when":true}}"#,
        ],
    )
    .expect("update");
    assert_eq!(r, vec![Value::Int(1), Value::Int(1), Value::Nil]);
    let d: String = q(
        &mut c,
        &[
            "DOC.FINDONE",
            "w",
            r#"{"_id":1}"#,
            "PROJECTION",
            r#"{"when":0}"#,
        ],
    )
    .expect("doc");
    assert_eq!(
        d,
        r#"{"_id":1,"n":3,"tags":["a","b","c"],"o":{"x":9,"y":{"z":3}},"set":["q"],"new":5,"lo":4,"m":0}"#
    );
    assert_eq!(
        int(&mut c, &["DOC.COUNT", "w", r#"{"when":{"$type":"date"}}"#]),
        1
    );
    // Not modified when nothing changes.
    let r: Vec<Value> = q(
        &mut c,
        &["DOC.UPDATE", "w", r#"{"_id":1}"#, r#"{"$set":{"n":3}}"#],
    )
    .expect("noop");
    assert_eq!(r, vec![Value::Int(1), Value::Int(0), Value::Nil]);
    // Without MULTI one document; with MULTI all.
    let r: Vec<Value> = q(
        &mut c,
        &[
            "DOC.UPDATE",
            "w",
            r#"{"n":{"$gte":3}}"#,
            r#"{"$inc":{"k":1}}"#,
        ],
    )
    .expect("one");
    assert_eq!(r, vec![Value::Int(1), Value::Int(1), Value::Nil]);
    let r: Vec<Value> = q(
        &mut c,
        &[
            "DOC.UPDATE",
            "w",
            r#"{"n":{"$gte":3}}"#,
            r#"{"$inc":{"k":1}}"#,
            "MULTI",
        ],
    )
    .expect("multi");
    assert_eq!(r, vec![Value::Int(3), Value::Int(3), Value::Nil]);
    assert_eq!(
        int(&mut c, &["DOC.COUNT", "w", r#"{"k":{"$exists":true}}"#]),
        3
    );
    // $pull with a condition and with a value.
    strs(
        &mut c,
        &[
            "DOC.INSERT",
            "w",
            r#"{"_id":4,"v":[1,5,8,5],"d":[{"a":1},{"a":2}]}"#,
        ],
    );
    q::<Value>(
        &mut c,
        &[
            "DOC.UPDATE",
            "w",
            r#"{"_id":4}"#,
            r#"{"$pull":{"v":{"$gte":6},"d":{"a":1}}}"#,
        ],
    )
    .expect("pull");
    q::<Value>(
        &mut c,
        &["DOC.UPDATE", "w", r#"{"_id":4}"#, r#"{"$pull":{"v":5}}"#],
    )
    .expect("pull value");
    let d: String = q(&mut c, &["DOC.FINDONE", "w", r#"{"_id":4}"#]).expect("doc");
    assert_eq!(d, r#"{"_id":4,"v":[1],"d":[{"a":2}]}"#);
    // A replacement with the same fields in another order is a modification.
    strs(&mut c, &["DOC.INSERT", "w", r#"{"_id":5,"a":1,"b":2}"#]);
    let r: Vec<Value> = q(
        &mut c,
        &["DOC.UPDATE", "w", r#"{"_id":5}"#, r#"{"b":2,"a":1}"#],
    )
    .expect("reorder");
    assert_eq!(r, vec![Value::Int(1), Value::Int(1), Value::Nil]);
    let d: String = q(&mut c, &["DOC.FINDONE", "w", r#"{"_id":5}"#]).expect("doc");
    assert_eq!(d, r#"{"_id":5,"b":2,"a":1}"#);
    let r: Vec<Value> = q(
        &mut c,
        &["DOC.UPDATE", "w", r#"{"_id":5}"#, r#"{"b":2,"a":1}"#],
    )
    .expect("same");
    assert_eq!(r, vec![Value::Int(1), Value::Int(0), Value::Nil]);
    q::<i64>(&mut c, &["DOC.DELETE", "w", r#"{"_id":5}"#]).expect("delete");
    // Replacement keeps _id.
    let r: Vec<Value> = q(
        &mut c,
        &["DOC.UPDATE", "w", r#"{"_id":3}"#, r#"{"only":true}"#],
    )
    .expect("replace");
    assert_eq!(r[1], Value::Int(1));
    let d: String = q(&mut c, &["DOC.FINDONE", "w", r#"{"_id":3}"#]).expect("doc");
    assert_eq!(d, r#"{"_id":3,"only":true}"#);
    // _id cannot change.
    let e = err_text(q::<Value>(
        &mut c,
        &["DOC.UPDATE", "w", r#"{"_id":3}"#, r#"{"$set":{"_id":9}}"#],
    ));
    assert_eq!(
        e,
        "ERR Performing an update on the path '_id' would modify the immutable field '_id'"
    );
    let e = err_text(q::<Value>(
        &mut c,
        &["DOC.UPDATE", "w", r#"{"_id":3}"#, r#"{"_id":9,"a":1}"#],
    ));
    assert!(e.starts_with("ERR After applying the update, the (immutable) field '_id' was found to have been altered"), "{e}");
    // A failing MULTI update changes nothing.
    let e = err_text(q::<Value>(
        &mut c,
        &["DOC.UPDATE", "w", "{}", r#"{"$inc":{"only":1}}"#, "MULTI"],
    ));
    assert_eq!(e, "ERR Cannot apply $inc to a value of non-numeric type. {_id: 3} has the field 'only' of non-numeric type bool");
    assert_eq!(int(&mut c, &["DOC.COUNT", "w", r#"{"only":1}"#]), 0);
    let e = err_text(q::<Value>(
        &mut c,
        &[
            "DOC.UPDATE",
            "w",
            "{}",
            r#"{"$set":{"only":"x"},"$push":{"n":1}}"#,
            "MULTI",
        ],
    ));
    assert!(e.contains("must be an array"), "{e}");
    assert_eq!(int(&mut c, &["DOC.COUNT", "w", r#"{"only":"x"}"#]), 0);
    let e = err_text(q::<Value>(
        &mut c,
        &["DOC.UPDATE", "w", "{}", r#"{"$foo":{"a":1}}"#],
    ));
    assert!(e.starts_with("ERR Unknown modifier: $foo"), "{e}");
    let e = err_text(q::<Value>(
        &mut c,
        &["DOC.UPDATE", "w", "{}", r#"{"$set":{"a":1,"a.b":2}}"#],
    ));
    assert!(
        e.starts_with("ERR Updating the path 'a.b' would create a conflict at 'a'"),
        "{e}"
    );
    // Upserts.
    let r: Vec<Value> = q(
        &mut c,
        &[
            "DOC.UPDATE",
            "w",
            r#"{"_id":"new","x.y":2,"z":{"$gt":1}}"#,
            r#"{"$set":{"s":1},"$setOnInsert":{"c":"$$NOW"}}"#,
            "UPSERT",
        ],
    )
    .expect("upsert");
    assert_eq!(
        r,
        vec![
            Value::Int(0),
            Value::Int(0),
            Value::BulkString(br#""new""#.to_vec())
        ]
    );
    let d: String = q(
        &mut c,
        &[
            "DOC.FINDONE",
            "w",
            r#"{"_id":"new"}"#,
            "PROJECTION",
            r#"{"c":0}"#,
        ],
    )
    .expect("doc");
    assert_eq!(d, r#"{"_id":"new","x":{"y":2},"s":1}"#);
    let r: Vec<Value> = q(
        &mut c,
        &[
            "DOC.UPDATE",
            "w",
            r#"{"_id":"new"}"#,
            r#"{"$set":{"s":2},"$setOnInsert":{"c":1}}"#,
            "UPSERT",
        ],
    )
    .expect("upsert match");
    assert_eq!(r, vec![Value::Int(1), Value::Int(1), Value::Nil]);
    let r: Vec<Value> = q(
        &mut c,
        &[
            "DOC.UPDATE",
            "w",
            r#"{"name":"r"}"#,
            r#"{"name":"r","v":1}"#,
            "UPSERT",
        ],
    )
    .expect("replace upsert");
    let Value::BulkString(id) = &r[2] else {
        panic!("{r:?}")
    };
    assert!(String::from_utf8_lossy(id).starts_with(r#"{"$oid":"#));
    assert_eq!(int(&mut c, &["DOC.COUNT", "w", r#"{"name":"r","v":1}"#]), 1);
}

#[test]
fn delete_with_and_without_limit() {
    let s = TestServer::start(&["--shards", "4"]);
    let mut c = s.conn();
    let docs: Vec<String> = (0..20)
        .map(|i| format!(r#"{{"_id":{i},"odd":{}}}"#, i % 2 == 1))
        .collect();
    let mut args = vec!["DOC.INSERT", "x"];
    args.extend(docs.iter().map(String::as_str));
    strs(&mut c, &args);
    assert_eq!(
        int(
            &mut c,
            &["DOC.DELETE", "x", r#"{"odd":true}"#, "LIMIT", "1"]
        ),
        1
    );
    assert_eq!(int(&mut c, &["DOC.COUNT", "x", r#"{"odd":true}"#]), 9);
    assert_eq!(int(&mut c, &["DOC.DELETE", "x", r#"{"odd":true}"#]), 9);
    assert_eq!(int(&mut c, &["DOC.DELETE", "x", r#"{"_id":4}"#]), 1);
    assert_eq!(int(&mut c, &["DOC.DELETE", "x", r#"{"_id":4}"#]), 0);
    assert_eq!(int(&mut c, &["DOC.COUNT", "x", "{}"]), 9);
    let e = err_text(q::<Value>(&mut c, &["DOC.DELETE", "x", "{}", "LIMIT", "5"]));
    assert_eq!(e, "ERR LIMIT must be 0 (all) or 1");
    assert_eq!(int(&mut c, &["DOC.COUNT", "x", "{}"]), 9);
    assert_eq!(int(&mut c, &["DOC.DELETE", "x", "{}", "LIMIT", "0"]), 9);
    // A deleted _id can be inserted again.
    strs(&mut c, &["DOC.INSERT", "x", r#"{"_id":4}"#]);
    assert_eq!(int(&mut c, &["DOC.COUNT", "x", "{}"]), 1);
}

#[test]
fn bson_flag_in_and_out() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    let doc = bson::doc! {"_id": 7, "b": bson::Binary { subtype: bson::spec::BinarySubtype::Generic, bytes: vec![0, 1, 2] }};
    let raw = bson::RawDocumentBuf::try_from(&doc)
        .expect("raw")
        .into_bytes();
    let ids: Vec<Vec<u8>> = redis::cmd("DOC.INSERT")
        .arg("b")
        .arg("BSON")
        .arg(&raw)
        .query(&mut c)
        .expect("insert");
    assert_eq!(ids, vec![b"7".to_vec()]);
    let filter = bson::RawDocumentBuf::try_from(&bson::doc! {"_id": 7})
        .expect("raw")
        .into_bytes();
    let got: Vec<Vec<u8>> = redis::cmd("DOC.FIND")
        .arg("b")
        .arg("BSON")
        .arg(&filter)
        .query(&mut c)
        .expect("find");
    assert_eq!(got, vec![raw.clone()]);
    let one: Vec<u8> = redis::cmd("DOC.FINDONE")
        .arg("b")
        .arg("BSON")
        .arg(&filter)
        .query(&mut c)
        .expect("findone");
    assert_eq!(one, raw);
    let n: i64 = redis::cmd("DOC.COUNT")
        .arg("b")
        .arg("BSON")
        .arg(&filter)
        .query(&mut c)
        .expect("count");
    assert_eq!(n, 1);
    let upd = bson::RawDocumentBuf::try_from(&bson::doc! {"$set": {"x": 1}})
        .expect("raw")
        .into_bytes();
    let r: Vec<Value> = redis::cmd("DOC.UPDATE")
        .arg("b")
        .arg("BSON")
        .arg(&filter)
        .arg(&upd)
        .query(&mut c)
        .expect("update");
    assert_eq!(r, vec![Value::Int(1), Value::Int(1), Value::Nil]);
    let projected: Vec<Vec<u8>> = redis::cmd("DOC.FIND")
        .arg("b")
        .arg("BSON")
        .arg(&filter)
        .arg("PROJECTION")
        .arg(
            bson::RawDocumentBuf::try_from(&bson::doc! {"x": 1})
                .expect("raw")
                .into_bytes(),
        )
        .query(&mut c)
        .expect("projected");
    let want = bson::RawDocumentBuf::try_from(&bson::doc! {"_id": 7, "x": 1})
        .expect("raw")
        .into_bytes();
    assert_eq!(projected, vec![want]);
    let json: String = q(&mut c, &["DOC.FINDONE", "b", "{}"]).expect("json");
    assert_eq!(
        json,
        r#"{"_id":7,"b":{"$binary":{"base64":"AAEC","subType":"00"}},"x":1}"#
    );
    let n: i64 = redis::cmd("DOC.DELETE")
        .arg("b")
        .arg("BSON")
        .arg(&filter)
        .query(&mut c)
        .expect("delete");
    assert_eq!(n, 1);
    let e = err_text(
        redis::cmd("DOC.INSERT")
            .arg("b")
            .arg("BSON")
            .arg(&b"\x05\x00\x00"[..])
            .query::<Value>(&mut c),
    );
    assert!(e.starts_with("ERR invalid BSON"), "{e}");
    let mut deep = bson::doc! {"x": 1};
    for _ in 0..150 {
        deep = bson::doc! {"a": deep};
    }
    let deep = bson::RawDocumentBuf::try_from(&deep)
        .expect("raw")
        .into_bytes();
    let e = err_text(
        redis::cmd("DOC.INSERT")
            .arg("b")
            .arg("BSON")
            .arg(&deep)
            .query::<Value>(&mut c),
    );
    assert_eq!(e, "ERR document exceeds the maximum nesting depth of 100");
}

#[test]
fn collections_are_per_database() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    strs(&mut c, &["DOC.INSERT", "c", r#"{"_id":1}"#]);
    q::<()>(&mut c, &["SELECT", "1"]).expect("select");
    assert_eq!(int(&mut c, &["DOC.COUNT", "c", "{}"]), 0);
    strs(&mut c, &["DOC.INSERT", "c", r#"{"_id":1}"#]);
    let e = err_text(q::<Value>(&mut c, &["DOC.INSERT", "c", r#"{"_id":1}"#]));
    assert!(
        e.starts_with("DUPKEY E11000 duplicate key error collection: 1.c "),
        "{e}"
    );
}

#[test]
fn concurrent_inserts_of_one_id_have_one_winner() {
    let s = TestServer::start(&["--shards", "4"]);
    for round in 0..5 {
        let id = format!(r#"{{"_id":"same{round}","by":"#);
        let handles: Vec<_> = (0..8)
            .map(|i| {
                let mut c = s.conn();
                let doc = format!("{id}{i}}}");
                std::thread::spawn(move || {
                    q::<Vec<String>>(&mut c, &["DOC.INSERT", "race", &doc]).is_ok()
                })
            })
            .collect();
        let wins = handles
            .into_iter()
            .filter(|_| true)
            .map(|h| h.join().expect("thread"))
            .filter(|ok| *ok)
            .count();
        assert_eq!(wins, 1, "round {round}");
    }
    let mut c = s.conn();
    assert_eq!(int(&mut c, &["DOC.COUNT", "race", "{}"]), 5);
}

/// No durability is claimed while the journal is off: the `J` write concern and WAITAOF
/// numlocal are refused with a clear error, and a refused write changes nothing.
/// (tests/journal.rs covers them with `appendonly yes`.)
#[test]
fn durability_claims_are_refused_while_the_journal_is_off() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    strs(&mut c, &["DOC.INSERT", "j", r#"{"_id":1,"n":1}"#]);
    let writes: &[&[&str]] = &[
        &["DOC.INSERT", "j", r#"{"_id":2}"#, "J"],
        &[
            "DOC.UPDATE",
            "j",
            r#"{"_id":1}"#,
            r#"{"$inc":{"n":1}}"#,
            "J",
        ],
        &["DOC.DELETE", "j", r#"{"_id":1}"#, "J"],
        &["DOC.TOUCH", "j", r#"{"_id":1}"#, "J"],
    ];
    for w in writes {
        let e = err_text(q::<Value>(&mut c, w));
        assert!(e.contains("needs the journal"), "{w:?}: {e}");
    }
    assert_eq!(
        strs(&mut c, &["DOC.FIND", "j", "{}"]),
        vec![r#"{"_id":1,"n":1}"#]
    );
    let e = err_text(q::<Value>(&mut c, &["WAITAOF", "1", "0", "0"]));
    assert!(e.contains("appendonly is disabled"), "{e}");
    let info: String = q(&mut c, &["INFO", "persistence"]).expect("info");
    assert!(info.contains("aof_enabled:0"), "{info}");
}

/// A find by `{"_id": v}` alone (looked up by v's KeyString, the filter's tree made only for
/// a stored `_id` of another type) answers as the general query: a stored double matches
/// an integer filter, a string never matches a number, `$$NOW` and escapes take the
/// general path, and FINDONE agrees with FIND.
#[test]
fn find_by_id_alone_matches_as_the_query() {
    let s = TestServer::start(&["--shards", "4"]);
    let mut c = s.conn();
    strs(
        &mut c,
        &[
            "DOC.INSERT",
            "ids",
            r#"{"_id":5.0,"k":"double"}"#,
            r#"{"_id":"5","k":"string"}"#,
            r#"{"_id":7,"k":"int"}"#,
            r#"{"_id":{"$numberLong":"8"},"k":"long"}"#,
            r#"{"_id":"a\"b","k":"quoted"}"#,
        ],
    );
    let k = |c: &mut redis::Connection, filter: &str| -> Vec<String> {
        strs(c, &["DOC.FIND", "ids", filter])
            .iter()
            .map(|d| {
                let v: serde_json::Value = serde_json::from_str(d).expect("json");
                v["k"].as_str().unwrap_or_default().to_string()
            })
            .collect()
    };
    assert_eq!(k(&mut c, r#"{"_id":5}"#), ["double"]);
    assert_eq!(k(&mut c, r#"{ "_id" : "5" }"#), ["string"]);
    assert_eq!(k(&mut c, r#"{"_id":7}"#), ["int"]);
    assert_eq!(k(&mut c, r#"{"_id":8}"#), ["long"]);
    assert_eq!(k(&mut c, r#"{"_id":"a\"b"}"#), ["quoted"]);
    assert!(k(&mut c, r#"{"_id":6}"#).is_empty());
    assert!(k(&mut c, r#"{"_id":"7"}"#).is_empty());
    assert!(k(&mut c, r#"{"_id":"$$NOW"}"#).is_empty());
    let one: Option<String> = q(&mut c, &["DOC.FINDONE", "ids", r#"{"_id":5}"#]).expect("one");
    assert!(one.is_some_and(|d| d.contains("double")));
    let none: Option<String> = q(&mut c, &["DOC.FINDONE", "ids", r#"{"_id":9}"#]).expect("nil");
    assert_eq!(none, None);
    // A missing collection, and a name that is not one.
    assert!(k(&mut c, r#"{"_id":5}"#.replace("5", "1").as_str()).is_empty());
    assert!(strs(&mut c, &["DOC.FIND", "nope", r#"{"_id":1}"#]).is_empty());
    let e = err_text(q::<Value>(&mut c, &["DOC.FIND", "", r#"{"_id":1}"#]));
    assert!(e.starts_with("ERR"), "{e}");
}

/// DOC.UPDATE by `{_id: v}` alone with `$set`/`$currentDate` (looked up by the `_id`'s
/// KeyString, the filter's tree made only when needed) updates what the general update
/// would: a double `_id` by an integer filter, never a string for a number; a miss upserts
/// with the filter's `_id`, or changes nothing without UPSERT.
#[test]
fn update_by_id_alone_matches_as_the_query() {
    let s = TestServer::start(&["--shards", "4"]);
    let mut c = s.conn();
    strs(
        &mut c,
        &[
            "DOC.INSERT",
            "ids",
            r#"{"_id":5.0,"k":"double"}"#,
            r#"{"_id":"5","k":"string"}"#,
            r#"{"_id":{"$numberLong":"8"},"k":"long"}"#,
        ],
    );
    let set = |c: &mut redis::Connection, filter: &str, v: &str, upsert: bool| -> Value {
        let u = format!(r#"{{"$set":{{"v":"{v}"}},"$currentDate":{{"at":true}}}}"#);
        let mut args = vec!["DOC.UPDATE", "ids", filter, u.as_str()];
        if upsert {
            args.push("UPSERT");
        }
        q::<Value>(c, &args).expect("update")
    };
    let ints = |r: &Value| match r {
        Value::Array(a) => a
            .iter()
            .take(2)
            .map(|v| match v {
                Value::Int(i) => *i,
                _ => -1,
            })
            .collect::<Vec<i64>>(),
        _ => vec![],
    };
    let v_of = |c: &mut redis::Connection, k: &str| -> Option<String> {
        strs(c, &["DOC.FIND", "ids", &format!(r#"{{"k":"{k}"}}"#)])
            .first()
            .map(|d| {
                let v: serde_json::Value = serde_json::from_str(d).expect("json");
                v["v"].as_str().unwrap_or_default().to_string()
            })
    };
    assert_eq!(ints(&set(&mut c, r#"{"_id":5}"#, "a", false)), [1, 1]);
    assert_eq!(v_of(&mut c, "double").as_deref(), Some("a"));
    assert_eq!(v_of(&mut c, "string").as_deref(), Some(""));
    assert_eq!(ints(&set(&mut c, r#"{ "_id" : "5" }"#, "b", true)), [1, 1]);
    assert_eq!(v_of(&mut c, "string").as_deref(), Some("b"));
    assert_eq!(ints(&set(&mut c, r#"{"_id":8}"#, "c", false)), [1, 1]);
    assert_eq!(v_of(&mut c, "long").as_deref(), Some("c"));
    // A miss without UPSERT changes nothing; with it, inserts the filter's `_id`.
    assert_eq!(ints(&set(&mut c, r#"{"_id":9}"#, "d", false)), [0, 0]);
    assert!(strs(&mut c, &["DOC.FIND", "ids", r#"{"_id":9}"#]).is_empty());
    let r = set(&mut c, r#"{"_id":"9"}"#, "e", true);
    assert_eq!(ints(&r), [0, 0]);
    let found = strs(&mut c, &["DOC.FIND", "ids", r#"{"_id":"9"}"#]);
    assert_eq!(found.len(), 1);
    let doc: serde_json::Value = serde_json::from_str(&found[0]).expect("json");
    assert_eq!(doc["v"], "e");
    assert!(doc["at"]["$date"].is_string(), "{doc}");
    assert_eq!(
        q::<i64>(&mut c, &["DOC.COUNT", "ids", "{}"]).expect("count"),
        4
    );
}
