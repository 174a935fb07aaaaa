//! Secondary indexes end to end: DOC.CREATEINDEX / DROPINDEX / INDEXES, the seed's
//! compound-index explain experiment, index maintenance under randomized insert, update and
//! delete (every indexed query equals the same query on an unindexed twin collection), index
//! builds racing writes, and unique indexes raced by 8 clients.

mod support;

use bson::{Bson, DateTime, Document};
use std::collections::BTreeSet;
use support::{q, TestServer};

fn parse(s: &str) -> Document {
    let v: serde_json::Value = serde_json::from_str(s).expect("json");
    match Bson::try_from(v).expect("extjson") {
        Bson::Document(d) => d,
        other => panic!("not a document: {other:?}"),
    }
}

fn json(d: &Document) -> String {
    Bson::Document(d.clone()).into_relaxed_extjson().to_string()
}

fn int(d: &Document, k: &str) -> i64 {
    match d.get(k) {
        Some(Bson::Int32(i)) => *i as i64,
        Some(Bson::Int64(i)) => *i,
        other => panic!("{k}: {other:?}"),
    }
}

use tidecache::util::rng::XorShift as Rng;

fn create(
    con: &mut redis::Connection,
    coll: &str,
    keys: &str,
    extra: &[&str],
) -> redis::RedisResult<String> {
    redis::cmd("DOC.CREATEINDEX")
        .arg(coll)
        .arg(keys)
        .arg(extra)
        .query(con)
}

fn explain(con: &mut redis::Connection, coll: &str, filter: &str, extra: &[&str]) -> Document {
    let s: String = redis::cmd("DOC.EXPLAIN")
        .arg(coll)
        .arg(filter)
        .arg(extra)
        .query(con)
        .expect("explain");
    parse(&s)
}

fn find_ids(con: &mut redis::Connection, coll: &str, filter: &str) -> BTreeSet<i64> {
    let out: Vec<String> = redis::cmd("DOC.FIND")
        .arg(coll)
        .arg(filter)
        .query(con)
        .unwrap_or_else(|e| panic!("find {filter}: {e}"));
    out.iter().map(|s| int(&parse(s), "_id")).collect()
}

fn insert(
    con: &mut redis::Connection,
    coll: &str,
    docs: &[Document],
) -> redis::RedisResult<Vec<String>> {
    let mut cmd = redis::cmd("DOC.INSERT");
    cmd.arg(coll);
    for d in docs {
        cmd.arg(json(d));
    }
    cmd.query(con)
}

#[test]
fn create_list_and_drop_indexes() {
    let srv = TestServer::start(&["--shards", "3"]);
    let mut con = srv.conn();
    let empty: Vec<String> = redis::cmd("DOC.INDEXES")
        .arg("logs")
        .query(&mut con)
        .expect("indexes");
    assert!(empty.is_empty());
    assert_eq!(
        create(&mut con, "logs", r#"{"host":1,"time":-1}"#, &[]).expect("create"),
        "host_1_time_-1"
    );
    assert_eq!(
        create(
            &mut con,
            "logs",
            r#"{"path":1}"#,
            &["UNIQUE", "NAME", "by_path"]
        )
        .expect("create"),
        "by_path"
    );
    assert_eq!(
        create(&mut con, "logs", r#"{"at":1}"#, &["EXPIREAFTER", "3600"]).expect("create"),
        "at_1"
    );
    // Same spec again: a no-op that answers the name.
    assert_eq!(
        create(&mut con, "logs", r#"{"host":1,"time":-1}"#, &[]).expect("create"),
        "host_1_time_-1"
    );
    let specs: Vec<String> = redis::cmd("DOC.INDEXES")
        .arg("logs")
        .query(&mut con)
        .expect("indexes");
    let specs: Vec<Document> = specs.iter().map(|s| parse(s)).collect();
    assert_eq!(specs.len(), 4);
    assert_eq!(specs[0].get_str("name").expect("name"), "_id_");
    assert_eq!(
        specs[1],
        bson::doc! {"name": "host_1_time_-1", "key": {"host": 1, "time": -1}, "unique": false}
    );
    assert_eq!(
        specs[2],
        bson::doc! {"name": "by_path", "key": {"path": 1}, "unique": true}
    );
    assert_eq!(int(&specs[3], "expireAfterSeconds"), 3600);

    // Conflicts and bad input change nothing.
    let e = create(&mut con, "logs", r#"{"path":1}"#, &[]).expect_err("same key");
    assert!(e.to_string().contains("different name: by_path"), "{e}");
    let e =
        create(&mut con, "logs", r#"{"other":1}"#, &["NAME", "by_path"]).expect_err("same name");
    assert!(e.to_string().contains("same name"), "{e}");
    for (keys, extra) in [
        (r#"{}"#, vec![]),
        (r#"{"a":0}"#, vec![]),
        (r#"{"a":"text"}"#, vec![]),
        (r#"{"a":1,"b":1}"#, vec!["EXPIREAFTER", "10"]),
        (r#"{"a":1}"#, vec!["EXPIREAFTER", "-1"]),
        (r#"{"a":1}"#, vec!["EXPIREAFTER", "x"]),
        (r#"{"a":1}"#, vec!["BOGUS"]),
        (r#"{"a":1"#, vec![]),
    ] {
        assert!(
            create(&mut con, "logs", keys, &extra).is_err(),
            "{keys} {extra:?}"
        );
    }
    let n: Vec<String> = redis::cmd("DOC.INDEXES")
        .arg("logs")
        .query(&mut con)
        .expect("indexes");
    assert_eq!(n.len(), 4);

    let ok: String = redis::cmd("DOC.DROPINDEX")
        .arg("logs")
        .arg("by_path")
        .query(&mut con)
        .expect("drop");
    assert_eq!(ok, "OK");
    let e = redis::cmd("DOC.DROPINDEX")
        .arg("logs")
        .arg("by_path")
        .query::<String>(&mut con)
        .expect_err("gone");
    assert!(
        e.to_string()
            .contains("index not found with name [by_path]"),
        "{e}"
    );
    let e = redis::cmd("DOC.DROPINDEX")
        .arg("logs")
        .arg("_id_")
        .query::<String>(&mut con)
        .expect_err("_id_");
    assert!(e.to_string().contains("cannot drop _id index"), "{e}");
    let n: Vec<String> = redis::cmd("DOC.INDEXES")
        .arg("logs")
        .query(&mut con)
        .expect("indexes");
    assert_eq!(n.len(), 3);
    // Dropping an index makes its queries scan the collection.
    let _: String = redis::cmd("DOC.DROPINDEX")
        .arg("logs")
        .arg("*")
        .query(&mut con)
        .expect("drop all");
    assert_eq!(
        explain(&mut con, "logs", r#"{"host":"a"}"#, &[])
            .get_str("plan")
            .expect("plan"),
        "COLLSCAN"
    );
}

/// The seed's experiment: for {host, time range}, `{time:1, host:1}` examines every key of
/// the day, `{host:1, time:1}` only the keys it returns.
#[test]
fn compound_index_order_shows_in_explain() {
    let srv = TestServer::start(&["--shards", "4"]);
    let mut con = srv.conn();
    let day = DateTime::parse_rfc3339_str("2000-10-10T00:00:00Z")
        .expect("date")
        .timestamp_millis();
    let mut docs = Vec::new();
    let mut rng = Rng(42);
    for i in 0..3000i64 {
        // Three days, 40 hosts; 127.0.0.1 is rare.
        let t = day - 86_400_000 + (rng.below(3 * 86_400) as i64) * 1000;
        let host = if i % 97 == 0 {
            "127.0.0.1".to_string()
        } else {
            format!("10.0.0.{}", rng.below(40))
        };
        docs.push(bson::doc! {"_id": i, "host": host, "time": DateTime::from_millis(t), "path": "/apache_pb.gif"});
    }
    for chunk in docs.chunks(500) {
        insert(&mut con, "events", chunk).expect("insert");
    }
    let in_day = |d: &Document| {
        let t = d.get_datetime("time").expect("time").timestamp_millis();
        t >= day && t < day + 86_400_000
    };
    let day_total = docs.iter().filter(|d| in_day(d)).count() as i64;
    let expected: BTreeSet<i64> = docs
        .iter()
        .filter(|d| in_day(d) && d.get_str("host").ok() == Some("127.0.0.1"))
        .map(|d| int(d, "_id"))
        .collect();
    assert!(!expected.is_empty());
    let filter = r#"{"host": "127.0.0.1", "time": {"$gte": {"$date": "2000-10-10T00:00:00Z"}, "$lt": {"$date": "2000-10-11T00:00:00Z"}}}"#;

    let e = explain(&mut con, "events", filter, &[]);
    assert_eq!(e.get_str("plan").expect("plan"), "COLLSCAN");
    assert_eq!(int(&e, "docsExamined"), docs.len() as i64);
    assert_eq!(int(&e, "nReturned"), expected.len() as i64);
    assert_eq!(int(&e, "shards"), 4);

    create(&mut con, "events", r#"{"time":1,"host":1}"#, &[]).expect("index");
    let e = explain(&mut con, "events", filter, &[]);
    assert_eq!(e.get_str("plan").expect("plan"), "IXSCAN");
    assert_eq!(e.get_str("index").expect("index"), "time_1_host_1");
    assert_eq!(
        int(&e, "keysExamined"),
        day_total,
        "time first: every key of the day"
    );
    assert_eq!(
        int(&e, "docsExamined"),
        expected.len() as i64,
        "host is checked on the key"
    );
    assert_eq!(int(&e, "nReturned"), expected.len() as i64);
    assert_eq!(find_ids(&mut con, "events", filter), expected);

    let _: String = redis::cmd("DOC.DROPINDEX")
        .arg("events")
        .arg("time_1_host_1")
        .query(&mut con)
        .expect("drop");
    create(&mut con, "events", r#"{"host":1,"time":1}"#, &[]).expect("index");
    let e = explain(&mut con, "events", filter, &[]);
    assert_eq!(e.get_str("index").expect("index"), "host_1_time_1");
    assert_eq!(
        int(&e, "keysExamined"),
        expected.len() as i64,
        "host first: only the keys returned"
    );
    assert_eq!(int(&e, "nReturned"), expected.len() as i64);
    assert_eq!(find_ids(&mut con, "events", filter), expected);

    // With both, the planner picks the one with the equality first.
    create(&mut con, "events", r#"{"time":1,"host":1}"#, &[]).expect("index");
    assert_eq!(
        explain(&mut con, "events", filter, &[])
            .get_str("index")
            .expect("index"),
        "host_1_time_1"
    );
    // A time-only range uses the time-first index (the seed's note).
    let e = explain(
        &mut con,
        "events",
        r#"{"time": {"$gte": {"$date": "2000-10-10T00:00:00Z"}, "$lt": {"$date": "2000-10-11T00:00:00Z"}}}"#,
        &[],
    );
    assert_eq!(e.get_str("index").expect("index"), "time_1_host_1");
    assert_eq!(int(&e, "keysExamined"), day_total);
    // _id equality: one shard.
    let e = explain(&mut con, "events", r#"{"_id": 7}"#, &[]);
    assert_eq!(e.get_str("plan").expect("plan"), "IDHACK");
    assert_eq!(int(&e, "shards"), 1);
    assert_eq!(int(&e, "nReturned"), 1);
    // An index that provides the sort lets each shard stop at the limit.
    let e = explain(
        &mut con,
        "events",
        r#"{"host": "127.0.0.1"}"#,
        &["SORT", r#"{"time":1}"#, "LIMIT", "2"],
    );
    assert_eq!(e.get_str("index").expect("index"), "host_1_time_1");
    assert!(int(&e, "docsExamined") <= 8, "{e}");
    assert_eq!(int(&e, "nReturned"), 2);
}

/// The filters the maintenance test compares: each is answered through an index on the
/// indexed collection and by a collection scan on its twin. Without `ranges`, only
/// equalities on every field of an index: the parts of those indexes then stay hashed (a
/// range or a sort puts a part in order for good).
fn filters(rng: &mut Rng, ranges: bool) -> Vec<String> {
    let k = rng.below(20);
    let g = rng.below(5);
    let v = rng.below(100) as i64 - 50;
    let t = rng.below(8);
    if !ranges {
        return vec![
            format!(r#"{{"k": {k}}}"#),
            format!(r#"{{"k": "s{k}"}}"#),
            r#"{"k": null}"#.to_string(),
            format!(r#"{{"tags": "t{t}"}}"#),
            format!(r#"{{"sub.x": {v}}}"#),
        ];
    }
    vec![
        format!(r#"{{"k": {k}}}"#),
        format!(r#"{{"k": {{"$gte": {k}, "$lt": {}}}}}"#, k + 5),
        format!(r#"{{"k": {{"$in": [{k}, {}, "s{k}"]}}}}"#, k + 1),
        format!(r#"{{"k": {{"$gt": "s"}}}}"#),
        r#"{"k": null}"#.to_string(),
        format!(r#"{{"g": {g}, "v": {{"$lte": {v}}}}}"#),
        format!(r#"{{"g": {{"$in": [{g}, 9]}}, "v": {{"$gt": {v}}}}}"#),
        format!(r#"{{"tags": "t{t}"}}"#),
        format!(r#"{{"tags": {{"$gte": "t{t}", "$lt": "t{}"}}}}"#, t + 2),
        format!(r#"{{"sub.x": {{"$lt": {v}}}}}"#),
        format!(r#"{{"k": {{"$lt": {k}}}, "g": {g}}}"#),
    ]
}

fn random_doc(rng: &mut Rng, id: i64) -> Document {
    let mut d = bson::doc! {"_id": id};
    match rng.below(10) {
        0 => {}
        1 => {
            d.insert("k", format!("s{}", rng.below(20)));
        }
        2 => {
            d.insert("k", Bson::Null);
        }
        3 => {
            d.insert("k", rng.below(20) as f64 + 0.5);
        }
        _ => {
            d.insert("k", rng.below(20) as i32);
        }
    }
    d.insert("g", rng.below(5) as i32);
    d.insert("v", rng.below(100) as i64 - 50);
    let tags: Vec<Bson> = (0..rng.below(4))
        .map(|_| Bson::String(format!("t{}", rng.below(8))))
        .collect();
    d.insert("tags", tags);
    if rng.below(2) == 0 {
        d.insert("sub", bson::doc! {"x": rng.below(100) as i32 - 50});
    } else if rng.below(2) == 0 {
        d.insert(
            "sub",
            vec![
                Bson::Document(bson::doc! {"x": rng.below(100) as i32 - 50}),
                Bson::Document(bson::doc! {"x": 3}),
            ],
        );
    }
    d
}

#[test]
fn indexes_stay_exact_under_random_writes() {
    let srv = TestServer::start(&["--shards", "4"]);
    let mut con = srv.conn();
    for (keys, opts) in [
        (r#"{"k":1}"#, vec![]),
        (r#"{"g":1,"v":-1}"#, vec![]),
        (r#"{"tags":1}"#, vec![]),
        (r#"{"sub.x":-1}"#, vec![]),
    ] {
        create(&mut con, "ix", keys, &opts).expect("index");
    }
    let mut rng = Rng(7);
    let mut next_id = 0i64;
    for round in 0..20 {
        // Writes, applied alike to both collections.
        for _ in 0..40 {
            match rng.below(6) {
                0 | 1 => {
                    let docs: Vec<Document> = (0..1 + rng.below(5))
                        .map(|_| {
                            next_id += 1;
                            random_doc(&mut rng, next_id)
                        })
                        .collect();
                    insert(&mut con, "ix", &docs).expect("insert ix");
                    insert(&mut con, "twin", &docs).expect("insert twin");
                }
                2 => {
                    let f = format!(r#"{{"g": {}}}"#, rng.below(5));
                    let u = format!(
                        r#"{{"$inc": {{"v": {}}}, "$set": {{"k": {}}}}}"#,
                        rng.below(7) as i64 - 3,
                        rng.below(25)
                    );
                    let a: Vec<redis::Value> = redis::cmd("DOC.UPDATE")
                        .arg("ix")
                        .arg(&f)
                        .arg(&u)
                        .arg("MULTI")
                        .query(&mut con)
                        .expect("update");
                    let b: Vec<redis::Value> = redis::cmd("DOC.UPDATE")
                        .arg("twin")
                        .arg(&f)
                        .arg(&u)
                        .arg("MULTI")
                        .query(&mut con)
                        .expect("update");
                    assert_eq!(a, b);
                }
                3 => {
                    let f = format!(r#"{{"_id": {}}}"#, 1 + rng.below(next_id.max(1) as u64));
                    let u = format!(
                        r#"{{"$push": {{"tags": "t{}"}}, "$set": {{"sub.x": {}}}}}"#,
                        rng.below(8),
                        rng.below(100) as i64 - 50
                    );
                    let a = redis::cmd("DOC.UPDATE")
                        .arg("ix")
                        .arg(&f)
                        .arg(&u)
                        .query::<Vec<redis::Value>>(&mut con)
                        .map_err(|e| e.to_string());
                    let b = redis::cmd("DOC.UPDATE")
                        .arg("twin")
                        .arg(&f)
                        .arg(&u)
                        .query::<Vec<redis::Value>>(&mut con)
                        .map_err(|e| e.to_string());
                    assert_eq!(a, b);
                }
                4 => {
                    let id = 1 + rng.below(next_id.max(1) as u64) as i64;
                    let repl = json(&random_doc(&mut rng, id));
                    let f = format!(r#"{{"_id": {id}}}"#);
                    let a: Vec<redis::Value> = redis::cmd("DOC.UPDATE")
                        .arg("ix")
                        .arg(&f)
                        .arg(&repl)
                        .query(&mut con)
                        .expect("replace");
                    let b: Vec<redis::Value> = redis::cmd("DOC.UPDATE")
                        .arg("twin")
                        .arg(&f)
                        .arg(&repl)
                        .query(&mut con)
                        .expect("replace");
                    assert_eq!(a, b);
                }
                _ => {
                    let f = if rng.below(2) == 0 {
                        format!(r#"{{"v": {{"$gt": {}}}}}"#, 40 - rng.below(10) as i64)
                    } else {
                        format!(r#"{{"tags": "t{}", "g": {}}}"#, rng.below(8), rng.below(5))
                    };
                    let a: i64 = redis::cmd("DOC.DELETE")
                        .arg("ix")
                        .arg(&f)
                        .query(&mut con)
                        .expect("delete");
                    let b: i64 = redis::cmd("DOC.DELETE")
                        .arg("twin")
                        .arg(&f)
                        .query(&mut con)
                        .expect("delete");
                    assert_eq!(a, b);
                }
            }
        }
        // Reads: the indexed answer equals the scan's; the first rounds only by equality, so
        // the writes meet the indexes' hashed parts before they are ordered.
        let ranges = round >= 8;
        for f in filters(&mut rng, ranges) {
            let e = explain(&mut con, "ix", &f, &[]);
            assert_eq!(e.get_str("plan").expect("plan"), "IXSCAN", "{f}");
            assert_eq!(
                find_ids(&mut con, "ix", &f),
                find_ids(&mut con, "twin", &f),
                "round {round}: {f}"
            );
        }
        if !ranges {
            continue;
        }
        // A sort the index provides, with a limit: each shard stops early; the values (ties
        // aside) equal the scan's.
        let f = format!(r#"{{"g": {}}}"#, rng.below(5));
        let sorted_v = |con: &mut redis::Connection, coll: &str| -> Vec<i64> {
            let out: Vec<String> = redis::cmd("DOC.FIND")
                .arg(coll)
                .arg(&f)
                .arg("SORT")
                .arg(r#"{"v": -1}"#)
                .arg("LIMIT")
                .arg(5)
                .query(con)
                .expect("find");
            out.iter().map(|s| int(&parse(s), "v")).collect()
        };
        assert_eq!(sorted_v(&mut con, "ix"), sorted_v(&mut con, "twin"), "{f}");
    }
    let a: i64 = redis::cmd("DOC.COUNT")
        .arg("ix")
        .arg("{}")
        .query(&mut con)
        .expect("count");
    let b: i64 = redis::cmd("DOC.COUNT")
        .arg("twin")
        .arg("{}")
        .query(&mut con)
        .expect("count");
    assert_eq!(a, b);
    assert!(a > 100, "the random workload keeps documents around ({a})");
    // Parallel arrays are refused by a compound index, and change nothing.
    create(&mut con, "ix", r#"{"tags":1,"sub.x":1}"#, &[])
        .expect_err("existing docs have parallel arrays");
    create(&mut con, "pa", r#"{"a":1,"b":1}"#, &[]).expect("index");
    let e = insert(
        &mut con,
        "pa",
        &[
            bson::doc! {"_id": 1, "a": 1},
            bson::doc! {"_id": 2, "a": [1, 2], "b": [3, 4]},
        ],
    )
    .expect_err("parallel arrays");
    assert!(
        e.to_string()
            .contains("cannot index parallel arrays [a] [b]"),
        "{e}"
    );
    let n: i64 = redis::cmd("DOC.COUNT")
        .arg("pa")
        .arg("{}")
        .query(&mut con)
        .expect("count");
    assert_eq!(n, 0, "all or nothing");
}

#[test]
fn index_build_races_writes() {
    let srv = TestServer::start(&["--shards", "4"]);
    let mut con = srv.conn();
    let docs: Vec<Document> = (0..30_000i64)
        .map(|i| bson::doc! {"_id": i, "n": i % 1000})
        .collect();
    for chunk in docs.chunks(2000) {
        insert(&mut con, "big", chunk).expect("insert");
    }
    let client = srv.client();
    let writer = std::thread::spawn(move || {
        let mut con = client.get_connection().expect("connect");
        for i in 0..300i64 {
            let id = 100_000 + i;
            let _: Vec<String> = redis::cmd("DOC.INSERT")
                .arg("big")
                .arg(format!(r#"{{"_id": {id}, "n": 7}}"#))
                .query(&mut con)
                .expect("insert");
            let _: i64 = redis::cmd("DOC.DELETE")
                .arg("big")
                .arg(format!(r#"{{"_id": {}}}"#, i * 3))
                .query(&mut con)
                .expect("delete");
            let _: Vec<redis::Value> = redis::cmd("DOC.UPDATE")
                .arg("big")
                .arg(format!(r#"{{"_id": {}}}"#, i * 3 + 1))
                .arg(r#"{"$set": {"n": 7}}"#)
                .query(&mut con)
                .expect("update");
        }
    });
    create(&mut con, "big", r#"{"n":1}"#, &[]).expect("index");
    writer.join().expect("writer");
    let by_index = find_ids(&mut con, "big", r#"{"n": 7}"#);
    let by_scan = find_ids(&mut con, "big", r#"{"n": {"$not": {"$ne": 7}}}"#);
    assert_eq!(
        explain(&mut con, "big", r#"{"n": 7}"#, &[])
            .get_str("plan")
            .expect("plan"),
        "IXSCAN"
    );
    assert_eq!(
        explain(&mut con, "big", r#"{"n": {"$not": {"$ne": 7}}}"#, &[])
            .get_str("plan")
            .expect("plan"),
        "COLLSCAN"
    );
    assert_eq!(by_index, by_scan);
    assert!(by_index.len() > 300);
}

#[test]
fn unique_index_races_from_8_clients() {
    let srv = TestServer::start(&["--shards", "4"]);
    let mut con = srv.conn();
    create(&mut con, "users", r#"{"email":1}"#, &["UNIQUE"]).expect("index");
    let pool = 200u64;
    let handles: Vec<_> = (0..8u64)
        .map(|c| {
            let client = srv.client();
            std::thread::spawn(move || {
                let mut con = client.get_connection().expect("connect");
                let mut rng = Rng(0xABCD + c * 7919);
                let (mut ok, mut dup) = (0u64, 0u64);
                for i in 0..150u64 {
                    let email = format!("u{}@example.com", rng.below(pool));
                    let r: redis::RedisResult<Vec<String>> = if i % 3 == 0 {
                        // An upsert by another field may also claim the email.
                        redis::cmd("DOC.UPDATE")
                            .arg("users")
                            .arg(format!(r#"{{"_id": "c{c}-{i}"}}"#))
                            .arg(format!(r#"{{"$set": {{"email": "{email}"}}}}"#))
                            .arg("UPSERT")
                            .query::<Vec<redis::Value>>(&mut con)
                            .map(|_| vec![])
                    } else {
                        redis::cmd("DOC.INSERT")
                            .arg("users")
                            .arg(format!(r#"{{"email": "{email}", "c": {c}}}"#))
                            .query(&mut con)
                    };
                    match r {
                        Ok(_) => ok += 1,
                        Err(e) => {
                            assert!(e.to_string().contains("E11000 duplicate key error"), "{e}");
                            assert!(e.to_string().contains("index: email_1"), "{e}");
                            dup += 1;
                        }
                    }
                }
                (ok, dup)
            })
        })
        .collect();
    let mut ok = 0;
    for h in handles {
        let (o, _) = h.join().expect("client");
        ok += o;
    }
    let all: Vec<String> = redis::cmd("DOC.FIND")
        .arg("users")
        .arg("{}")
        .query(&mut con)
        .expect("find");
    let emails: Vec<String> = all
        .iter()
        .map(|s| parse(s).get_str("email").expect("email").to_string())
        .collect();
    let distinct: BTreeSet<&String> = emails.iter().collect();
    assert_eq!(distinct.len(), emails.len(), "no email twice");
    assert_eq!(emails.len() as u64, ok, "every acknowledged write is there");
    assert!(ok <= pool && ok > pool / 2, "{ok}");
    // A unique index cannot be built over duplicates, and the failed build leaves nothing.
    insert(
        &mut con,
        "dups",
        &[
            bson::doc! {"e": 1},
            bson::doc! {"e": 2},
            bson::doc! {"e": 1},
        ],
    )
    .expect("insert");
    let e = create(&mut con, "dups", r#"{"e":1}"#, &["UNIQUE"]).expect_err("duplicates");
    assert!(
        e.to_string()
            .contains("E11000 duplicate key error collection: 0.dups index: e_1 dup key: { e: 1 }"),
        "{e}"
    );
    let n: Vec<String> = redis::cmd("DOC.INDEXES")
        .arg("dups")
        .query(&mut con)
        .expect("indexes");
    assert_eq!(n.len(), 1);
}

/// TTL indexes are ordered indexes too: they serve queries on their field, and expiry keeps
/// every index of the collection exact (the monitor removes through the same path).
#[test]
fn ttl_indexes_serve_queries_and_expiry_keeps_indexes_exact() {
    let srv = TestServer::start(&["--shards", "3", "--ttl-monitor-period", "1"]);
    let mut con = srv.conn();
    assert_eq!(
        create(&mut con, "s", r#"{"at":1}"#, &["EXPIREAFTER", "1"]).expect("ttl"),
        "at_1"
    );
    create(&mut con, "s", r#"{"k":1}"#, &[]).expect("index");
    let mut docs = Vec::new();
    for i in 0..60i64 {
        // Even ids are long past due; odd ones live until the year 9999.
        let at = if i % 2 == 0 {
            946_684_800_000i64
        } else {
            253_370_764_800_000
        };
        docs.push(bson::doc! {"_id": i, "k": i % 3, "at": DateTime::from_millis(at)});
    }
    insert(&mut con, "s", &docs).expect("insert");
    let e = explain(
        &mut con,
        "s",
        r#"{"at": {"$gt": {"$date": "2020-01-01T00:00:00Z"}}}"#,
        &[],
    );
    assert_eq!(e.get_str("index").expect("index"), "at_1");
    assert_eq!(int(&e, "nReturned"), 30);
    // The monitor removes the past-due half; the k index loses their keys with them.
    let survivors: BTreeSet<i64> = (0..60).filter(|i| i % 2 == 1 && i % 3 == 1).collect();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    loop {
        let e = explain(&mut con, "s", r#"{"k": 1}"#, &[]);
        if int(&e, "keysExamined") == survivors.len() as i64 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "expiry did not reach the index: {e}"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    assert_eq!(find_ids(&mut con, "s", r#"{"k": 1}"#), survivors);
    let e = explain(
        &mut con,
        "s",
        r#"{"at": {"$lt": {"$date": "2020-01-01T00:00:00Z"}}}"#,
        &[],
    );
    assert_eq!(
        int(&e, "keysExamined"),
        0,
        "expired documents left the TTL index too"
    );

    // DOC.EXPIREINDEX on a new field creates an ordered index too; on an existing one it
    // changes expireAfterSeconds (collMod), which DOC.INDEXES shows.
    let name: String = redis::cmd("DOC.EXPIREINDEX")
        .arg("s")
        .arg("seen")
        .arg(3600)
        .query(&mut con)
        .expect("expireindex");
    assert_eq!(name, "seen_1");
    assert_eq!(
        explain(&mut con, "s", r#"{"seen": null}"#, &[])
            .get_str("index")
            .expect("index"),
        "seen_1"
    );
    let _: String = redis::cmd("DOC.EXPIREINDEX")
        .arg("s")
        .arg("at")
        .arg(7200)
        .query(&mut con)
        .expect("collmod");
    let specs: Vec<String> = redis::cmd("DOC.INDEXES")
        .arg("s")
        .query(&mut con)
        .expect("indexes");
    let specs: Vec<Document> = specs.iter().map(|s| parse(s)).collect();
    let at = specs
        .iter()
        .find(|d| d.get_str("name").ok() == Some("at_1"))
        .expect("at_1");
    assert_eq!(int(at, "expireAfterSeconds"), 7200);
    let seen = specs
        .iter()
        .find(|d| d.get_str("name").ok() == Some("seen_1"))
        .expect("seen_1");
    assert_eq!(int(seen, "expireAfterSeconds"), 3600);

    // Dropping the TTL index stops expiry through it.
    let _: String = redis::cmd("DOC.DROPINDEX")
        .arg("s")
        .arg("at_1")
        .query(&mut con)
        .expect("drop");
    let _: String = redis::cmd("DOC.DROPINDEX")
        .arg("s")
        .arg("seen_1")
        .query(&mut con)
        .expect("drop");
    insert(
        &mut con,
        "s",
        &[bson::doc! {"_id": 1000, "k": 9, "at": DateTime::from_millis(0)}],
    )
    .expect("insert");
    std::thread::sleep(std::time::Duration::from_millis(2500));
    assert_eq!(
        find_ids(&mut con, "s", r#"{"k": 9}"#),
        BTreeSet::from([1000])
    );
}

/// 50 clients upsert at once into a collection with a TTL index and a unique secondary
/// index. Distinct keys never collide (no duplicate-key error is invented, although each
/// single-document write locks only its own shard), and of the clients racing for one key
/// exactly one wins each round (none is missed), across shards.
#[test]
fn concurrent_upserts_neither_miss_nor_invent_unique_violations() {
    let s = TestServer::start(&["--shards", "8"]);
    let mut c = s.conn();
    let _: String = q(&mut c, &["DOC.EXPIREINDEX", "u", "seen", "3600"]).expect("ttl index");
    let _: String = q(
        &mut c,
        &["DOC.CREATEINDEX", "u", r#"{"email":1}"#, "UNIQUE"],
    )
    .expect("unique index");
    const CLIENTS: usize = 50;
    const ROUNDS: usize = 40;
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(CLIENTS));
    let threads: Vec<_> = (0..CLIENTS)
        .map(|t| {
            let mut conn = s.conn();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                let mut invented = Vec::new();
                let mut wins = vec![0u32; ROUNDS];
                for (r, won) in wins.iter_mut().enumerate() {
                    // A key of this client's own: must always be accepted.
                    let own = format!(
                        r#"{{"$set":{{"email":"c{t}-r{r}"}},"$currentDate":{{"seen":true}}}}"#
                    );
                    let id = format!(r#"{{"_id":"c{t}-r{r}"}}"#);
                    if let Err(e) =
                        q::<redis::Value>(&mut conn, &["DOC.UPDATE", "u", &id, &own, "UPSERT"])
                    {
                        invented.push(format!("{e}"));
                    }
                    // One key every client races for in this round.
                    barrier.wait();
                    let shared = format!(
                        r#"{{"$set":{{"email":"shared-{r}"}},"$currentDate":{{"seen":true}}}}"#
                    );
                    let id = format!(r#"{{"_id":"s{t}-r{r}"}}"#);
                    match q::<redis::Value>(&mut conn, &["DOC.UPDATE", "u", &id, &shared, "UPSERT"])
                    {
                        Ok(_) => *won += 1,
                        Err(e) => assert!(format!("{e}").contains("duplicate key"), "{e}"),
                    }
                }
                (invented, wins)
            })
        })
        .collect();
    let mut wins = vec![0u32; ROUNDS];
    for t in threads {
        let (invented, w) = t.join().expect("client thread");
        assert!(invented.is_empty(), "invented violations: {invented:?}");
        for (a, b) in wins.iter_mut().zip(w) {
            *a += b;
        }
    }
    assert_eq!(
        wins,
        vec![1; ROUNDS],
        "exactly one winner per contested key"
    );
    for r in 0..ROUNDS {
        let f = format!(r#"{{"email":"shared-{r}"}}"#);
        assert_eq!(support::int(&mut c, &["DOC.COUNT", "u", &f]), 1, "{f}");
    }
    assert_eq!(
        support::int(&mut c, &["DOC.COUNT", "u", "{}"]),
        (CLIENTS * ROUNDS + ROUNDS) as i64
    );
}
