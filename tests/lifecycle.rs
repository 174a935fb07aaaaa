//! Collection lifecycle through the `redis` crate against the real binary: DOC.CREATE (capped
//! collections), DOC.DROP, DOC.RENAME (racing writers and readers), DOC.COLLECTIONS,
//! DOC.STATS, INFO documents, memory given back, and collections in databases (SELECT,
//! FLUSHDB, FLUSHALL, SWAPDB).

mod support;

use redis::Connection;
use serde_json::Value as Json;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::{err_text, int, q, strs, TestServer};

fn ok(c: &mut Connection, args: &[&str]) {
    assert_eq!(q::<String>(c, args).expect("OK"), "OK", "{args:?}");
}

fn stats(c: &mut Connection, coll: &str) -> Json {
    let s: String = q(c, &["DOC.STATS", coll]).expect("stats");
    serde_json::from_str(&s).expect("stats JSON")
}

fn info_field(c: &mut Connection, section: &str, field: &str) -> u64 {
    support::info_value(c, section, field)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("INFO {section} has no numeric {field}"))
}

/// The `_id`s of an unsorted find, as integers.
fn ids(c: &mut Connection, args: &[&str]) -> Vec<i64> {
    strs(c, args)
        .iter()
        .map(|d| {
            let v: Json = serde_json::from_str(d).expect("doc JSON");
            v["_id"].as_i64().expect("integer _id")
        })
        .collect()
}

#[test]
fn create_collections_and_errors() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    ok(&mut c, &["DOC.CREATE", "plain"]);
    assert_eq!(
        err_text(q::<String>(&mut c, &["DOC.CREATE", "plain"])),
        "ERR Collection 0.plain already exists."
    );
    // An existing collection made by a first insert is refused too.
    strs(&mut c, &["DOC.INSERT", "auto", r#"{"_id":1}"#]);
    assert!(err_text(q::<String>(
        &mut c,
        &["DOC.CREATE", "auto", "CAPPED", "SIZE", "10"]
    ))
    .contains("already exists"));
    // Bad arguments change nothing.
    for bad in [
        &["DOC.CREATE", "x", "CAPPED"][..],
        &["DOC.CREATE", "x", "CAPPED", "MAX", "3"],
        &["DOC.CREATE", "x", "CAPPED", "SIZE", "10", "MAX"],
        &[
            "DOC.CREATE",
            "x",
            "CAPPED",
            "SIZE",
            "10",
            "MAX",
            "3",
            "MAX",
            "4",
        ],
        &["DOC.CREATE", "x", "SIZE", "10"],
    ] {
        assert_eq!(
            err_text(q::<String>(&mut c, bad)),
            "ERR syntax error",
            "{bad:?}"
        );
    }
    assert_eq!(
        err_text(q::<String>(
            &mut c,
            &["DOC.CREATE", "x", "CAPPED", "SIZE", "0"]
        )),
        "ERR SIZE must be a positive integer"
    );
    assert_eq!(
        err_text(q::<String>(
            &mut c,
            &["DOC.CREATE", "x", "CAPPED", "SIZE", "ten"]
        )),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        err_text(q::<String>(
            &mut c,
            &["DOC.CREATE", "x", "CAPPED", "SIZE", "10", "MAX", "-1"]
        )),
        "ERR MAX must not be negative"
    );
    assert_eq!(
        err_text(q::<String>(&mut c, &["DOC.CREATE", "a$b"])),
        "ERR Invalid collection name: 'a$b'"
    );
    assert_eq!(
        strs(&mut c, &["DOC.COLLECTIONS"]),
        vec!["auto".to_string(), "plain".to_string()]
    );
    // An explicitly created collection is empty, listed and has stats.
    assert!(strs(&mut c, &["DOC.FIND", "plain", "{}"]).is_empty());
    let st = stats(&mut c, "plain");
    assert_eq!(st["count"], 0);
    assert_eq!(st["capped"], false);
    assert_eq!(st["nindexes"], 1);
    assert!(st["indexes"]["_id_"].as_i64().is_some());
    assert_eq!(
        err_text(q::<String>(&mut c, &["DOC.STATS", "nope"])),
        "ERR ns not found 0.nope"
    );
    // Capped sizes follow MongoDB: at least 4096, else rounded up to a multiple of 256.
    ok(&mut c, &["DOC.CREATE", "small", "CAPPED", "SIZE", "100"]);
    ok(
        &mut c,
        &["DOC.CREATE", "big", "CAPPED", "SIZE", "5000", "MAX", "0"],
    );
    assert_eq!(stats(&mut c, "small")["maxSize"], 4096);
    let big = stats(&mut c, "big");
    assert_eq!(big["maxSize"], 5120);
    assert!(big.get("max").is_none(), "MAX 0 is no bound: {big}");
    assert_eq!(big["capped"], true);
}

#[test]
fn capped_order_after_10000_inserts_across_shards() {
    let s = TestServer::start(&["--shards", "8"]);
    let mut c = s.conn();
    ok(
        &mut c,
        &[
            "DOC.CREATE",
            "log",
            "CAPPED",
            "SIZE",
            "100000000",
            "MAX",
            "1000",
        ],
    );
    // Singles and batches; _ids hash to all 8 shards, so slot order is not insertion order.
    let mut next = 0;
    while next < 10_000 {
        if next % 1000 < 500 {
            strs(
                &mut c,
                &["DOC.INSERT", "log", &format!(r#"{{"_id":{next},"p":"x"}}"#)],
            );
            next += 1;
        } else {
            let docs: Vec<String> = (next..next + 50)
                .map(|i| format!(r#"{{"_id":{i},"p":"x"}}"#))
                .collect();
            let mut cmd = redis::cmd("DOC.INSERT");
            cmd.arg("log");
            for d in &docs {
                cmd.arg(d);
            }
            let _: Vec<String> = cmd.query(&mut c).expect("batch");
            next += 50;
        }
        // Deletes are allowed and do not disturb the order.
        if next == 9_500 {
            assert_eq!(int(&mut c, &["DOC.DELETE", "log", r#"{"_id":9100}"#]), 1);
        }
    }
    let all = ids(&mut c, &["DOC.FIND", "log", "{}"]);
    // The deleted document made room for one older document to stay.
    let want: Vec<i64> = (8999..10_000).filter(|&i| i != 9100).collect();
    assert_eq!(all, want);
    assert_eq!(
        ids(&mut c, &["DOC.FIND", "log", "{}", "LIMIT", "3"]),
        vec![8999, 9000, 9001]
    );
    assert_eq!(
        ids(
            &mut c,
            &["DOC.FIND", "log", "{}", "SKIP", "2", "LIMIT", "2"]
        ),
        vec![9001, 9002]
    );
    assert_eq!(
        ids(
            &mut c,
            &["DOC.FIND", "log", r#"{"_id":{"$gte":9099}}"#, "LIMIT", "3"]
        ),
        vec![9099, 9101, 9102]
    );
    let first: String = q(&mut c, &["DOC.FINDONE", "log", "{}"]).expect("findone");
    assert_eq!(first, r#"{"_id":8999,"p":"x"}"#);
    // MongoDB's $natural sort: insertion order, or newest first.
    assert_eq!(
        ids(
            &mut c,
            &[
                "DOC.FIND",
                "log",
                "{}",
                "SORT",
                r#"{"$natural":-1}"#,
                "LIMIT",
                "3"
            ]
        ),
        vec![9999, 9998, 9997]
    );
    assert_eq!(
        ids(
            &mut c,
            &[
                "DOC.FIND",
                "log",
                "{}",
                "SORT",
                r#"{"$natural":1}"#,
                "LIMIT",
                "2"
            ]
        ),
        vec![8999, 9000]
    );
    let newest: String = q(
        &mut c,
        &["DOC.FINDONE", "log", "{}", "SORT", r#"{"$natural":-1}"#],
    )
    .expect("newest");
    assert_eq!(newest, r#"{"_id":9999,"p":"x"}"#);
    assert_eq!(
        err_text(q::<Vec<String>>(
            &mut c,
            &[
                "DOC.FIND",
                "log",
                "{}",
                "SORT",
                r#"{"$natural":-1,"_id":1}"#
            ]
        )),
        "ERR $natural sort cannot be combined with other sort keys"
    );
    assert_eq!(
        err_text(q::<Vec<String>>(
            &mut c,
            &["DOC.FIND", "log", "{}", "SORT", r#"{"$natural":2}"#]
        )),
        "ERR $natural sort must be 1 (insertion order) or -1 (newest first)"
    );
    // An uncapped collection's natural order is storage order; -1 reverses it.
    for i in 0..50 {
        strs(
            &mut c,
            &["DOC.INSERT", "plain", &format!(r#"{{"_id":{i}}}"#)],
        );
    }
    let fwd = ids(&mut c, &["DOC.FIND", "plain", "{}"]);
    let mut rev = ids(
        &mut c,
        &["DOC.FIND", "plain", "{}", "SORT", r#"{"$natural":-1}"#],
    );
    rev.reverse();
    assert_eq!(fwd, rev);
    assert_eq!(
        ids(
            &mut c,
            &[
                "DOC.FIND",
                "plain",
                "{}",
                "SORT",
                r#"{"$natural":-1}"#,
                "LIMIT",
                "2"
            ]
        ),
        vec![fwd[49], fwd[48]]
    );
    assert_eq!(int(&mut c, &["DOC.COUNT", "log", "{}"]), 1000);
    // A sort still sorts.
    assert_eq!(
        ids(
            &mut c,
            &[
                "DOC.FIND",
                "log",
                "{}",
                "SORT",
                r#"{"_id":-1}"#,
                "LIMIT",
                "2"
            ]
        ),
        vec![9999, 9998]
    );
}

#[test]
fn capped_size_bound_updates_and_rename() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    ok(&mut c, &["DOC.CREATE", "c", "CAPPED", "SIZE", "4096"]);
    let pad = "y".repeat(80);
    for i in 0..200 {
        strs(
            &mut c,
            &[
                "DOC.INSERT",
                "c",
                &format!(r#"{{"_id":{i},"pad":"{pad}"}}"#),
            ],
        );
        let st = stats(&mut c, "c");
        assert!(st["size"].as_i64().unwrap() <= 4096, "{st}");
    }
    let kept = ids(&mut c, &["DOC.FIND", "c", "{}"]);
    let n = kept.len() as i64;
    assert!(n > 10 && n < 200, "{n}");
    // The newest documents, oldest first.
    assert_eq!(kept, (200 - n..200).collect::<Vec<_>>());
    // A document larger than the whole collection is refused and changes nothing.
    let huge = "z".repeat(5000);
    assert_eq!(
        err_text(q::<Vec<String>>(
            &mut c,
            &[
                "DOC.INSERT",
                "c",
                &format!(r#"{{"_id":"h","pad":"{huge}"}}"#)
            ]
        )),
        format!(
            "ERR document is larger than the capped collection: {} > 4096",
            5026
        )
    );
    assert_eq!(ids(&mut c, &["DOC.FIND", "c", "{}"]), kept);
    // Same-size updates pass; size changes are refused.
    let last = 199.to_string();
    let same = format!(r#"{{"$set":{{"pad":"{}"}}}}"#, "w".repeat(80));
    assert_eq!(
        q::<Vec<redis::Value>>(
            &mut c,
            &["DOC.UPDATE", "c", &format!(r#"{{"_id":{last}}}"#), &same]
        )
        .expect("update")
        .len(),
        3
    );
    assert_eq!(
        err_text(q::<Vec<redis::Value>>(
            &mut c,
            &[
                "DOC.UPDATE",
                "c",
                r#"{"_id":199}"#,
                r#"{"$set":{"more":1}}"#
            ]
        )),
        format!(
            "ERR Cannot change the size of a document in a capped collection: {} != {}",
            104, 114
        )
    );
    // An upsert is an insert: it evicts the oldest.
    let r: Vec<redis::Value> = q(
        &mut c,
        &[
            "DOC.UPDATE",
            "c",
            r#"{"_id":1000}"#,
            &format!(r#"{{"$set":{{"pad":"{pad}"}}}}"#),
            "UPSERT",
        ],
    )
    .expect("upsert");
    assert_eq!(r.len(), 3);
    let after = ids(&mut c, &["DOC.FIND", "c", "{}"]);
    assert_eq!(after.last(), Some(&1000));
    assert_eq!(after[0], kept[1]);
    // Still capped after a rename: the bound holds and order continues.
    ok(&mut c, &["DOC.RENAME", "c", "d"]);
    let st = stats(&mut c, "d");
    assert_eq!(st["capped"], true);
    assert_eq!(st["maxSize"], 4096);
    strs(
        &mut c,
        &[
            "DOC.INSERT",
            "d",
            &format!(r#"{{"_id":2000,"pad":"{pad}"}}"#),
        ],
    );
    let renamed = ids(&mut c, &["DOC.FIND", "d", "{}"]);
    assert_eq!(renamed.last(), Some(&2000));
    assert_eq!(renamed[0], after[1]);
    assert!(stats(&mut c, "d")["size"].as_i64().unwrap() <= 4096);
}

#[test]
fn rename_and_drop_semantics() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    strs(&mut c, &["DOC.INSERT", "a", r#"{"_id":1}"#, r#"{"_id":2}"#]);
    strs(&mut c, &["DOC.INSERT", "b", r#"{"_id":3}"#]);
    assert_eq!(
        err_text(q::<String>(&mut c, &["DOC.RENAME", "a", "b"])),
        "ERR target namespace exists"
    );
    assert_eq!(
        err_text(q::<String>(&mut c, &["DOC.RENAME", "nope", "z"])),
        "ERR source namespace does not exist"
    );
    assert_eq!(
        err_text(q::<String>(&mut c, &["DOC.RENAME", "a", "a"])),
        "ERR Can't rename a collection to itself"
    );
    assert_eq!(
        err_text(q::<String>(&mut c, &["DOC.RENAME", "a", "z", "NOW"])),
        "ERR syntax error"
    );
    // Nothing changed.
    assert_eq!(int(&mut c, &["DOC.COUNT", "a", "{}"]), 2);
    ok(&mut c, &["DOC.RENAME", "a", "b", "DROPTARGET"]);
    assert_eq!(strs(&mut c, &["DOC.COLLECTIONS"]), vec!["b".to_string()]);
    assert_eq!(
        ids(&mut c, &["DOC.FIND", "b", "{}", "SORT", r#"{"_id":1}"#]),
        vec![1, 2]
    );
    assert!(strs(&mut c, &["DOC.FIND", "a", "{}"]).is_empty());
    // DROPTARGET with no target is a plain rename; the _id index still works after it.
    ok(&mut c, &["DOC.RENAME", "b", "c", "DROPTARGET"]);
    assert_eq!(ids(&mut c, &["DOC.FIND", "c", r#"{"_id":2}"#]), vec![2]);
    assert!(err_text(q::<Vec<String>>(
        &mut c,
        &["DOC.INSERT", "c", r#"{"_id":2}"#]
    ))
    .starts_with("DUPKEY"));
    assert_eq!(int(&mut c, &["DOC.DROP", "c"]), 1);
    assert_eq!(int(&mut c, &["DOC.DROP", "c"]), 0);
    assert!(strs(&mut c, &["DOC.COLLECTIONS"]).is_empty());
    assert!(strs(&mut c, &["DOC.FIND", "c", "{}"]).is_empty());
}

/// 8 writers update documents by `_id` under whichever name the collection has, 8 readers
/// count and list it under both names, while the collection is renamed back and forth. A
/// read that saw some shards before a rename and others after would count a part of the
/// collection; every count must be all or nothing, and no acknowledged update may be lost.
#[test]
fn rename_is_atomic_under_8_writers_and_readers() {
    const N: i64 = 3000;
    let s = TestServer::start(&["--shards", "8"]);
    let mut c = s.conn();
    for chunk in (0..N).collect::<Vec<_>>().chunks(500) {
        let mut cmd = redis::cmd("DOC.INSERT");
        cmd.arg("a");
        for i in chunk {
            cmd.arg(format!(r#"{{"_id":{i},"n":0}}"#));
        }
        let _: Vec<String> = cmd.query(&mut c).expect("load");
    }
    let stop = Arc::new(AtomicBool::new(false));
    let applied = Arc::new(AtomicU64::new(0));
    let reads = Arc::new(AtomicU64::new(0));
    let mut handles = Vec::new();
    for w in 0..8i64 {
        let (mut conn, stop, applied) = (s.conn(), stop.clone(), applied.clone());
        handles.push(std::thread::spawn(move || {
            let mut i = w;
            while !stop.load(Ordering::Relaxed) {
                let filter = format!(r#"{{"_id":{}}}"#, (i * 7919) % N);
                i += 1;
                for name in ["a", "b"] {
                    let r: Vec<redis::Value> = q(
                        &mut conn,
                        &["DOC.UPDATE", name, &filter, r#"{"$inc":{"n":1}}"#],
                    )
                    .expect("update");
                    if r[0] == redis::Value::Int(1) {
                        applied.fetch_add(1, Ordering::Relaxed);
                        break;
                    }
                }
            }
        }));
    }
    for r in 0..8 {
        let (mut conn, stop, reads) = (s.conn(), stop.clone(), reads.clone());
        handles.push(std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                for name in ["a", "b"] {
                    let n = if r % 2 == 0 {
                        int(&mut conn, &["DOC.COUNT", name, r#"{"n":{"$gte":0}}"#])
                    } else {
                        strs(
                            &mut conn,
                            &["DOC.FIND", name, "{}", "PROJECTION", r#"{"_id":1}"#],
                        )
                        .len() as i64
                    };
                    assert!(
                        n == 0 || n == N,
                        "a read saw {n} of {N} documents of {name}"
                    );
                    reads.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    let started = Instant::now();
    let mut renames = 0;
    while started.elapsed() < Duration::from_millis(2500) || renames < 50 {
        let (from, to) = if renames % 2 == 0 {
            ("a", "b")
        } else {
            ("b", "a")
        };
        ok(&mut c, &["DOC.RENAME", from, to]);
        renames += 1;
        std::thread::sleep(Duration::from_millis(5));
    }
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        h.join().expect("a client thread failed");
    }
    assert!(reads.load(Ordering::Relaxed) > 100, "too few reads raced");
    let name = if renames % 2 == 0 { "a" } else { "b" };
    assert_eq!(strs(&mut c, &["DOC.COLLECTIONS"]), vec![name.to_string()]);
    let sum: i64 = strs(&mut c, &["DOC.FIND", name, "{}"])
        .iter()
        .map(|d| {
            serde_json::from_str::<Json>(d).unwrap()["n"]
                .as_i64()
                .unwrap()
        })
        .sum();
    assert_eq!(sum as u64, applied.load(Ordering::Relaxed));
    assert!(applied.load(Ordering::Relaxed) > 0);
}

#[test]
fn drop_gives_memory_back() {
    // No slow log: it would keep trimmed copies (up to 32 × 128 bytes each) of the arguments
    // of the slow 500-document inserts below, memory the drop rightly does not give back.
    let s = TestServer::start(&["--slowlog-log-slower-than", "-1"]);
    let mut c = s.conn();
    let before = info_field(&mut c, "memory", "used_memory");
    // 50 MB of documents: 50 000 documents of about 1 KB.
    let pad = "p".repeat(1000);
    for b in 0..100 {
        let mut cmd = redis::cmd("DOC.INSERT");
        cmd.arg("big");
        for i in 0..500 {
            cmd.arg(format!(r#"{{"_id":{},"pad":"{pad}"}}"#, b * 500 + i));
        }
        let _: Vec<String> = cmd.query(&mut c).expect("load");
    }
    let loaded = info_field(&mut c, "memory", "used_memory");
    let docs = info_field(&mut c, "documents", "document_bytes");
    assert!(docs >= 50_000_000, "{docs}");
    assert!(
        loaded >= before + 50_000_000,
        "used_memory {before} -> {loaded} after 50 MB of documents"
    );
    assert_eq!(int(&mut c, &["DOC.DROP", "big"]), 1);
    // The connection's read buffer, grown to the 500 kB inserts, is trimmed to what the
    // small requests after them need within a few tenths of a second (as Redis trims its
    // query buffer): wait for that before comparing.
    let mut after = 0;
    support::eventually(3.0, || {
        after = info_field(&mut c, "memory", "used_memory");
        after.saturating_sub(before) * 100 <= loaded - before
    });
    eprintln!("used_memory: before {before}, loaded {loaded}, after DOC.DROP {after}");
    // used_memory is the whole process (statistics rows, buffers): what stays after the
    // drop is under 1% of what the documents took.
    assert!(
        after.saturating_sub(before) * 100 <= loaded - before,
        "used_memory {before} -> {loaded} -> {after}"
    );
    assert_eq!(info_field(&mut c, "documents", "documents"), 0);
    assert_eq!(info_field(&mut c, "memory", "used_memory_dataset"), 0);
}

#[test]
fn info_documents_totals() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    let info: String = redis::cmd("INFO").query(&mut c).expect("info");
    assert!(info.contains("# Documents\r\n"), "INFO includes documents");
    let all: String = redis::cmd("INFO")
        .arg("everything")
        .query(&mut c)
        .expect("info");
    assert!(all.contains("ttl_deleted_documents:0"));
    strs(
        &mut c,
        &["DOC.INSERT", "x", r#"{"_id":1,"a":"b"}"#, r#"{"_id":2}"#],
    );
    ok(&mut c, &["DOC.CREATE", "y"]);
    ok(&mut c, &["SELECT", "3"]);
    strs(&mut c, &["DOC.INSERT", "x", r#"{"_id":1}"#]);
    assert_eq!(info_field(&mut c, "documents", "collections"), 3);
    assert_eq!(info_field(&mut c, "documents", "documents"), 3);
    let st = stats(&mut c, "x");
    assert_eq!(st["count"], 1);
    ok(&mut c, &["SELECT", "0"]);
    let st = stats(&mut c, "x");
    assert_eq!(st["count"], 2);
    let bytes = st["size"].as_u64().unwrap();
    assert_eq!(st["avgObjSize"].as_u64().unwrap(), bytes / 2);
    assert_eq!(
        info_field(&mut c, "documents", "document_bytes"),
        bytes + 14
    );
    assert!(info_field(&mut c, "documents", "index_bytes") > 0);
    assert_eq!(info_field(&mut c, "documents", "ttl_passes"), 0);
    assert_eq!(st["ttl"]["passes"], 0);
    assert_eq!(st["ttl"]["deletedDocuments"], 0);
    assert_eq!(
        st["totalIndexSize"].as_u64().unwrap(),
        st["indexes"]["_id_"].as_u64().unwrap()
    );
}

#[test]
fn databases_select_flush_and_swap() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    let pad = "q".repeat(1000);
    let load = |c: &mut Connection, coll: &str| {
        let mut cmd = redis::cmd("DOC.INSERT");
        cmd.arg(coll);
        for i in 0..2000 {
            cmd.arg(format!(r#"{{"_id":{i},"pad":"{pad}"}}"#));
        }
        let _: Vec<String> = cmd.query(c).expect("load");
    };
    let base = info_field(&mut c, "memory", "used_memory");
    load(&mut c, "events");
    ok(&mut c, &["SELECT", "1"]);
    assert!(strs(&mut c, &["DOC.COLLECTIONS"]).is_empty());
    load(&mut c, "archive");
    assert_eq!(
        strs(&mut c, &["DOC.COLLECTIONS"]),
        vec!["archive".to_string()]
    );
    // SWAPDB swaps collections with the keys: db 1 now has "events".
    ok(&mut c, &["SET", "k1", "v"]);
    ok(&mut c, &["SWAPDB", "0", "1"]);
    assert_eq!(
        strs(&mut c, &["DOC.COLLECTIONS"]),
        vec!["events".to_string()]
    );
    assert_eq!(int(&mut c, &["DOC.COUNT", "events", "{}"]), 2000);
    assert_eq!(int(&mut c, &["EXISTS", "k1"]), 0);
    ok(&mut c, &["SELECT", "0"]);
    assert_eq!(
        strs(&mut c, &["DOC.COLLECTIONS"]),
        vec!["archive".to_string()]
    );
    assert_eq!(int(&mut c, &["EXISTS", "k1"]), 1);
    // FLUSHDB drops this database's collections only, and their memory.
    let two = info_field(&mut c, "memory", "used_memory");
    assert!(two >= base + 4_000_000, "{base} -> {two}");
    ok(&mut c, &["FLUSHDB"]);
    assert!(strs(&mut c, &["DOC.COLLECTIONS"]).is_empty());
    let one = info_field(&mut c, "memory", "used_memory");
    assert!(two - one >= 2_000_000, "FLUSHDB freed {}", two - one);
    ok(&mut c, &["SELECT", "1"]);
    assert_eq!(int(&mut c, &["DOC.COUNT", "events", "{}"]), 2000);
    ok(&mut c, &["FLUSHALL"]);
    assert!(strs(&mut c, &["DOC.COLLECTIONS"]).is_empty());
    assert_eq!(info_field(&mut c, "documents", "collections"), 0);
    assert_eq!(info_field(&mut c, "memory", "used_memory_dataset"), 0);
    // A collection can be made again in a flushed database.
    ok(&mut c, &["DOC.CREATE", "events", "CAPPED", "SIZE", "4096"]);
    assert_eq!(stats(&mut c, "events")["capped"], true);
    // FLUSHALL ASYNC frees in the background; the bytes leave the count when freed.
    load(&mut c, "again");
    assert!(info_field(&mut c, "memory", "used_memory_dataset") >= 2_000_000);
    ok(&mut c, &["FLUSHALL", "ASYNC"]);
    assert!(strs(&mut c, &["DOC.COLLECTIONS"]).is_empty());
    let deadline = Instant::now() + Duration::from_secs(5);
    while info_field(&mut c, "memory", "used_memory_dataset") != 0 {
        assert!(
            Instant::now() < deadline,
            "FLUSHALL ASYNC never gave the bytes back"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// TTL indexes live in the collection's parts: a rename keeps expiring through them, and a
/// capped collection refuses them.
#[test]
fn ttl_indexes_move_with_rename_and_capped_refuses_them() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    ok(&mut c, &["DOC.CREATE", "cap", "CAPPED", "SIZE", "4096"]);
    assert_eq!(
        err_text(q::<String>(&mut c, &["DOC.EXPIREINDEX", "cap", "at", "60"])),
        "ERR TTL indexes are not supported for capped collections"
    );
    assert_eq!(
        err_text(q::<String>(
            &mut c,
            &["DOC.CREATEINDEX", "cap", r#"{"at":1}"#, "EXPIREAFTER", "60"]
        )),
        "ERR TTL indexes are not supported for capped collections"
    );
    assert_eq!(stats(&mut c, "cap")["nindexes"], 1);
    // Ordinary secondary indexes are fine on a capped collection, and counted.
    let used = info_field(&mut c, "memory", "used_memory_dataset");
    for i in 0..20 {
        strs(
            &mut c,
            &["DOC.INSERT", "cap", &format!(r#"{{"_id":{i},"a":{i}}}"#)],
        );
    }
    let name: String = q(&mut c, &["DOC.CREATEINDEX", "cap", r#"{"a":1}"#]).expect("index");
    let st = stats(&mut c, "cap");
    assert_eq!(st["nindexes"], 2, "{st}");
    assert!(st["indexes"][name.as_str()].as_i64().unwrap() > 0, "{st}");
    assert_eq!(
        st["totalIndexSize"].as_i64().unwrap(),
        st["indexes"]["_id_"].as_i64().unwrap() + st["indexes"][name.as_str()].as_i64().unwrap()
    );
    assert!(info_field(&mut c, "memory", "used_memory_dataset") > used);
    strs(
        &mut c,
        &[
            "DOC.INSERT",
            "sess",
            r#"{"_id":1,"at":{"$date":"2000-01-01T00:00:00Z"}}"#,
            r#"{"_id":2,"at":"$$NOW"}"#,
        ],
    );
    let name: String = q(&mut c, &["DOC.EXPIREINDEX", "sess", "at", "3600"]).expect("ttl");
    assert_eq!(name, "at_1");
    ok(&mut c, &["DOC.RENAME", "sess", "sess2"]);
    // The old session is past its deadline under the new name too (strict reads), the
    // fresh one is there.
    assert_eq!(ids(&mut c, &["DOC.FIND", "sess2", "{}"]), vec![2]);
    let st = stats(&mut c, "sess2");
    assert_eq!(st["nindexes"], 2, "{st}");
    assert!(st["indexes"]["at_1"].as_i64().is_some(), "{st}");
    // The ordered part of the TTL index moved too: it serves queries under the new name.
    let plan: String = q(
        &mut c,
        &[
            "DOC.EXPLAIN",
            "sess2",
            r#"{"at":{"$gte":{"$date":"1999-01-01T00:00:00Z"}}}"#,
        ],
    )
    .expect("explain");
    let plan: Json = serde_json::from_str(&plan).expect("explain JSON");
    assert_eq!(plan["plan"], "IXSCAN", "{plan}");
    assert_eq!(plan["index"], "at_1", "{plan}");
    // A capped collection stays capped when a rename drops a TTL-indexed target.
    ok(&mut c, &["DOC.RENAME", "cap", "sess2", "DROPTARGET"]);
    assert_eq!(stats(&mut c, "sess2")["capped"], true);
    assert!(err_text(q::<String>(
        &mut c,
        &["DOC.EXPIREINDEX", "sess2", "at", "1"]
    ))
    .contains("capped"));
}
