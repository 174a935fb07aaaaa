//! Collection change streams (`DOC.CREATE … CHANGES`, `DOC.COLLMOD … CHANGES`) through the
//! `redis` crate against the real binary: a reader follows the stream with `XREAD BLOCK` on
//! its own connection while documents are inserted, updated, replaced, deleted, trimmed from
//! a capped collection and expired (by the monitor and by a write that meets them); replaying
//! what it read gives the collection's final state. Failed writes append nothing; MULTI/EXEC
//! and scripts append with their commands; MAXLEN trims; COLLMOD OFF stops.

mod support;

use redis::{Connection, Value};
use std::collections::HashMap;
use std::time::{Duration, Instant};
use support::{err_text, eventually, int, q, strs, TestServer};

/// One stream entry: (id, field → value).
type Entry = (String, HashMap<String, String>);

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

fn date(ms: i64) -> String {
    format!(r#"{{"$date":{{"$numberLong":"{ms}"}}}}"#)
}

fn text(v: &Value) -> String {
    redis::from_redis_value::<String>(v.clone()).expect("string")
}

/// Entries of an XRANGE-style array.
fn entries(v: &Value) -> Vec<Entry> {
    let Value::Array(items) = v else {
        panic!("not an array: {v:?}")
    };
    items
        .iter()
        .map(|e| {
            let Value::Array(pair) = e else {
                panic!("not an entry: {e:?}")
            };
            let Value::Array(fv) = &pair[1] else {
                panic!("no fields: {e:?}")
            };
            let fields = fv.chunks(2).map(|c| (text(&c[0]), text(&c[1]))).collect();
            (text(&pair[0]), fields)
        })
        .collect()
}

fn xrange(c: &mut Connection, key: &str) -> Vec<Entry> {
    entries(&q::<Value>(c, &["XRANGE", key, "-", "+"]).expect("xrange"))
}

/// `XREAD [BLOCK ms] STREAMS key id`: the entries, or `None` on timeout.
fn xread(c: &mut Connection, key: &str, after: &str, block_ms: u64) -> Option<Vec<Entry>> {
    let v: Value = q(
        c,
        &[
            "XREAD",
            "COUNT",
            "1000",
            "BLOCK",
            &block_ms.to_string(),
            "STREAMS",
            key,
            after,
        ],
    )
    .expect("xread");
    match v {
        Value::Nil => None,
        Value::Array(streams) => {
            let Value::Array(kv) = &streams[0] else {
                panic!("bad reply")
            };
            Some(entries(&kv[1]))
        }
        Value::Map(kv) => Some(entries(&kv[0].1)),
        other => panic!("bad reply {other:?}"),
    }
}

/// Applies entries to a replica keyed by `_id` text: the collection as the stream tells it.
fn replay(replica: &mut HashMap<String, serde_json::Value>, es: &[Entry]) {
    for (_, f) in es {
        let id = || f.get("_id").expect("_id").clone();
        match f.get("op").map(String::as_str) {
            Some("insert" | "update" | "replace") => {
                let doc = serde_json::from_str(f.get("doc").expect("doc")).expect("doc json");
                replica.insert(id(), doc);
            }
            Some("delete" | "expire") => {
                replica.remove(&id());
            }
            Some("drop") => replica.clear(),
            other => panic!("unexpected op {other:?}"),
        }
    }
}

/// The collection as `DOC.FIND coll {}` returns it, keyed by `_id` text.
fn state(c: &mut Connection, coll: &str) -> HashMap<String, serde_json::Value> {
    strs(c, &["DOC.FIND", coll, "{}"])
        .into_iter()
        .map(|d| {
            let v: serde_json::Value = serde_json::from_str(&d).expect("json");
            (v["_id"].to_string(), v)
        })
        .collect()
}

/// A reader on its own connection following `key` with `XREAD BLOCK` from the start until
/// an entry inserting `{"_id":"end"}` arrives; returns the entries and how many reads timed
/// out (none should: every change wakes it).
fn follow(s: &TestServer, key: &str) -> std::thread::JoinHandle<(Vec<Entry>, usize)> {
    let mut c = s.conn();
    let key = key.to_string();
    std::thread::spawn(move || {
        let mut all: Vec<Entry> = Vec::new();
        let mut last = "0-0".to_string();
        let mut timeouts = 0;
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(60) {
            match xread(&mut c, &key, &last, 10_000) {
                None => timeouts += 1,
                Some(es) => {
                    last = es.last().expect("non-empty").0.clone();
                    let done = es.iter().any(|(_, f)| {
                        f.get("op").map(String::as_str) == Some("insert")
                            && f.get("_id").map(String::as_str) == Some("\"end\"")
                    });
                    all.extend(es);
                    if done {
                        break;
                    }
                }
            }
        }
        (all, timeouts)
    })
}

fn ok(c: &mut Connection, args: &[&str]) {
    let _: () = q(c, args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
}

#[test]
fn replaying_the_stream_gives_the_final_state() {
    let s = TestServer::start(&["--ttl-monitor-period", "1"]);
    let mut c = s.conn();
    ok(&mut c, &["DOC.CREATE", "c", "CHANGES", "cs"]);
    let ix: String = q(&mut c, &["DOC.EXPIREINDEX", "c", "exp", "0"]).unwrap();
    assert_eq!(ix, "exp_1");
    let reader = follow(&s, "cs");
    // The reader is blocked before the first change.
    std::thread::sleep(Duration::from_millis(200));

    let far = date(now_ms() + 3_600_000);
    let soon = date(now_ms() + 300);
    // Multi-document insert, across shards.
    let docs: Vec<String> = (0..40)
        .map(|i| format!(r#"{{"_id":{i},"n":{i},"s":"v{i}","exp":{far}}}"#))
        .collect();
    let mut args = vec!["DOC.INSERT", "c"];
    args.extend(docs.iter().map(String::as_str));
    assert_eq!(strs(&mut c, &args).len(), 40);
    // Updates: in place (fixed width), general, multi, replacement, upserts, a touch.
    // (A touch of the TTL field would expire it: expireAfterSeconds is 0.)
    int(
        &mut c,
        &["DOC.TOUCH", "c", r#"{"_id":39}"#, "FIELD", "seen"],
    );
    q::<Value>(
        &mut c,
        &["DOC.UPDATE", "c", r#"{"_id":1}"#, r#"{"$inc":{"n":100}}"#],
    )
    .unwrap();
    q::<Value>(
        &mut c,
        &[
            "DOC.UPDATE",
            "c",
            r#"{"_id":2}"#,
            r#"{"$set":{"s":"longer string"}}"#,
        ],
    )
    .unwrap();
    q::<Value>(
        &mut c,
        &[
            "DOC.UPDATE",
            "c",
            r#"{"n":{"$lt":10}}"#,
            r#"{"$set":{"small":true}}"#,
            "MULTI",
        ],
    )
    .unwrap();
    q::<Value>(
        &mut c,
        &["DOC.UPDATE", "c", r#"{"_id":3}"#, r#"{"replaced":1}"#],
    )
    .unwrap();
    q::<Value>(
        &mut c,
        &[
            "DOC.UPDATE",
            "c",
            r#"{"_id":"up"}"#,
            r#"{"$set":{"u":1}}"#,
            "UPSERT",
        ],
    )
    .unwrap();
    q::<Value>(
        &mut c,
        &[
            "DOC.UPDATE",
            "c",
            r#"{"s":"nobody"}"#,
            r#"{"$set":{"u":2}}"#,
            "UPSERT",
        ],
    )
    .unwrap();
    // Deletes: one, many.
    assert_eq!(int(&mut c, &["DOC.DELETE", "c", r#"{"_id":4}"#]), 1);
    assert_eq!(
        int(
            &mut c,
            &["DOC.DELETE", "c", r#"{"n":{"$gte":30,"$lt":35}}"#]
        ),
        5
    );
    // Expiry: by the monitor, and by a write that meets the document first.
    let dated: Vec<String> = (0..10)
        .map(|i| format!(r#"{{"_id":"t{i}","exp":{soon}}}"#))
        .collect();
    let mut args = vec!["DOC.INSERT", "c"];
    args.extend(dated.iter().map(String::as_str));
    assert_eq!(strs(&mut c, &args).len(), 10);
    std::thread::sleep(Duration::from_millis(400));
    // Due now: the insert of the same _id expires the old one (or the monitor did).
    strs(&mut c, &["DOC.INSERT", "c", r#"{"_id":"t0","again":true}"#]);
    assert!(
        eventually(10.0, || {
            let es = xrange(&mut c, "cs");
            es.iter()
                .filter(|(_, f)| f.get("op").map(String::as_str) == Some("expire"))
                .count()
                == 10
        }),
        "ten expire entries"
    );
    strs(&mut c, &["DOC.INSERT", "c", r#"{"_id":"end"}"#]);

    let (seen, timeouts) = reader.join().expect("reader");
    assert_eq!(timeouts, 0, "every change wakes the blocked reader");
    // The reader saw exactly the stream.
    assert_eq!(seen, xrange(&mut c, "cs"));
    let mut replica = HashMap::new();
    replay(&mut replica, &seen);
    assert_eq!(replica, state(&mut c, "c"));
    // Each kind of change shows up.
    for op in ["insert", "update", "replace", "delete", "expire"] {
        assert!(seen.iter().any(|(_, f)| f["op"] == op), "no {op} entry");
    }
    // Entries carry the namespace; an update carries the document after it.
    let upd = seen
        .iter()
        .find(|(_, f)| f["op"] == "update" && f["_id"] == "1")
        .expect("update of 1");
    assert_eq!(upd.1["ns"], "0.c");
    let doc: serde_json::Value = serde_json::from_str(&upd.1["doc"]).unwrap();
    assert_eq!(doc["n"], 101);
}

#[test]
fn capped_evictions_are_deletes() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    ok(
        &mut c,
        &[
            "DOC.CREATE",
            "cap",
            "CAPPED",
            "SIZE",
            "100000",
            "MAX",
            "5",
            "CHANGES",
            "cs",
        ],
    );
    for i in 0..12 {
        strs(&mut c, &["DOC.INSERT", "cap", &format!(r#"{{"_id":{i}}}"#)]);
    }
    let es = xrange(&mut c, "cs");
    assert_eq!(es.len(), 12 + 7);
    let deleted: Vec<&str> = es
        .iter()
        .filter(|(_, f)| f["op"] == "delete")
        .map(|(_, f)| f["_id"].as_str())
        .collect();
    assert_eq!(deleted, ["0", "1", "2", "3", "4", "5", "6"]);
    let mut replica = HashMap::new();
    replay(&mut replica, &es);
    assert_eq!(replica, state(&mut c, "cap"));
}

#[test]
fn failed_writes_append_nothing() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    ok(&mut c, &["DOC.CREATE", "c", "CHANGES", "cs"]);
    let ix: String = q(
        &mut c,
        &["DOC.CREATEINDEX", "c", r#"{"email":1}"#, "UNIQUE"],
    )
    .unwrap();
    assert_eq!(ix, "email_1");
    strs(
        &mut c,
        &[
            "DOC.INSERT",
            "c",
            r#"{"_id":1,"email":"a","n":"text"}"#,
            r#"{"_id":2,"email":"b"}"#,
        ],
    );
    assert_eq!(int(&mut c, &["XLEN", "cs"]), 2);
    let fails: &[&[&str]] = &[
        // Duplicate _id, duplicate unique key, a batch with one duplicate inside.
        &["DOC.INSERT", "c", r#"{"_id":1}"#],
        &["DOC.INSERT", "c", r#"{"_id":3,"email":"a"}"#],
        &[
            "DOC.INSERT",
            "c",
            r#"{"_id":4}"#,
            r#"{"_id":5,"email":"b"}"#,
        ],
        // An update that cannot apply, one that would break the unique index.
        &["DOC.UPDATE", "c", r#"{"_id":1}"#, r#"{"$inc":{"n":1}}"#],
        &[
            "DOC.UPDATE",
            "c",
            r#"{"_id":2}"#,
            r#"{"$set":{"email":"a"}}"#,
        ],
        &[
            "DOC.UPDATE",
            "c",
            "{}",
            r#"{"$set":{"email":"same"}}"#,
            "MULTI",
        ],
    ];
    for cmd in fails {
        let e = err_text(q::<Value>(&mut c, cmd));
        assert!(!e.is_empty(), "{cmd:?} must fail");
    }
    // Writes that match nothing change nothing either.
    assert_eq!(int(&mut c, &["DOC.DELETE", "c", r#"{"_id":99}"#]), 0);
    q::<Value>(
        &mut c,
        &[
            "DOC.UPDATE",
            "c",
            r#"{"_id":1}"#,
            r#"{"$set":{"n":"text"}}"#,
        ],
    )
    .unwrap();
    assert_eq!(int(&mut c, &["XLEN", "cs"]), 2);
    assert_eq!(int(&mut c, &["DOC.COUNT", "c", "{}"]), 2);
}

#[test]
fn transactions_and_scripts_append_with_their_commands() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    ok(&mut c, &["DOC.CREATE", "c", "CHANGES", "cs"]);
    let r: Value = redis::pipe()
        .atomic()
        .cmd("DOC.INSERT")
        .arg("c")
        .arg(r#"{"_id":1}"#)
        .arg(r#"{"_id":2}"#)
        .cmd("DOC.UPDATE")
        .arg("c")
        .arg(r#"{"_id":1}"#)
        .arg(r#"{"$set":{"a":1}}"#)
        .cmd("DOC.DELETE")
        .arg("c")
        .arg(r#"{"_id":2}"#)
        .cmd("XLEN")
        .arg("cs")
        .query(&mut c)
        .expect("exec");
    let Value::Array(replies) = r else {
        panic!("{r:?}")
    };
    // Inside the transaction, each command's entries are there when the next one runs.
    assert_eq!(replies[3], Value::Int(4));
    let ops: Vec<String> = xrange(&mut c, "cs")
        .into_iter()
        .map(|(_, f)| format!("{} {}", f["op"], f["_id"]))
        .collect();
    assert_eq!(ops, ["insert 1", "insert 2", "update 1", "delete 2"]);

    let n: i64 = redis::cmd("EVAL")
        .arg(
            "redis.call('DOC.INSERT', KEYS[1], ARGV[1]) \
             return redis.call('XLEN', KEYS[2])",
        )
        .arg(2)
        .arg("c")
        .arg("cs")
        .arg(r#"{"_id":3}"#)
        .query(&mut c)
        .expect("eval");
    assert_eq!(n, 5);
}

#[test]
fn maxlen_off_retarget_and_options() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    ok(
        &mut c,
        &["DOC.CREATE", "c", "CHANGES", "cs", "MAXLEN", "=", "10"],
    );
    for i in 0..30 {
        strs(&mut c, &["DOC.INSERT", "c", &format!(r#"{{"_id":{i}}}"#)]);
    }
    assert_eq!(int(&mut c, &["XLEN", "cs"]), 10);
    let stats: String = q(&mut c, &["DOC.STATS", "c"]).unwrap();
    let stats: serde_json::Value = serde_json::from_str(&stats).unwrap();
    assert_eq!(stats["changes"]["stream"], "cs");
    assert_eq!(stats["changes"]["maxlen"], 10);
    assert_eq!(stats["changes"]["approx"], false);

    // Approximate trimming removes whole nodes only (100 entries each by default).
    ok(&mut c, &["CONFIG", "SET", "stream-node-max-entries", "10"]);
    ok(
        &mut c,
        &["DOC.COLLMOD", "c", "CHANGES", "approx", "MAXLEN", "~", "25"],
    );
    for i in 100..200 {
        strs(&mut c, &["DOC.INSERT", "c", &format!(r#"{{"_id":{i}}}"#)]);
    }
    let n = int(&mut c, &["XLEN", "approx"]);
    assert!((25..=35).contains(&n), "XLEN {n}");

    // OFF stops entries; the old streams keep theirs.
    ok(&mut c, &["DOC.COLLMOD", "c", "CHANGES", "OFF"]);
    strs(&mut c, &["DOC.INSERT", "c", r#"{"_id":"x"}"#]);
    int(&mut c, &["DOC.DELETE", "c", "{}"]);
    assert_eq!(int(&mut c, &["XLEN", "cs"]), 10);
    assert_eq!(int(&mut c, &["XLEN", "approx"]), n);
    let stats: String = q(&mut c, &["DOC.STATS", "c"]).unwrap();
    assert!(!stats.contains("\"changes\""), "{stats}");

    // Bad options change nothing.
    ok(&mut c, &["SET", "str", "v"]);
    assert_eq!(
        err_text(q::<()>(&mut c, &["DOC.COLLMOD", "c", "CHANGES", "str"])),
        "WRONGTYPE Operation against a key holding the wrong kind of value"
    );
    assert_eq!(
        err_text(q::<()>(&mut c, &["DOC.CREATE", "d", "CHANGES", "str"])),
        "WRONGTYPE Operation against a key holding the wrong kind of value"
    );
    assert_eq!(
        err_text(q::<()>(&mut c, &["DOC.COLLMOD", "nope", "CHANGES", "s"])),
        "ERR ns not found 0.nope"
    );
    assert!(err_text(q::<()>(
        &mut c,
        &["DOC.COLLMOD", "c", "CHANGES", "s", "MAXLEN", "-1"]
    ))
    .starts_with("ERR"));
    assert!(err_text(q::<()>(&mut c, &["DOC.COLLMOD", "c", "OTHER", "s"])).starts_with("ERR"));
    assert!(err_text(q::<()>(
        &mut c,
        &["DOC.CREATE", "e", "CHANGES", "s", "EXTRA"]
    ))
    .starts_with("ERR"));
    assert_eq!(strs(&mut c, &["DOC.COLLECTIONS"]), ["c"]);
    strs(&mut c, &["DOC.INSERT", "c", r#"{"_id":"y"}"#]);
    assert_eq!(int(&mut c, &["EXISTS", "s"]), 0);

    // A stream key taken over by another type later: entries are counted as lost.
    ok(&mut c, &["DOC.COLLMOD", "c", "CHANGES", "later"]);
    ok(&mut c, &["SET", "later", "v"]);
    strs(&mut c, &["DOC.INSERT", "c", r#"{"_id":"z"}"#]);
    let stats: String = q(&mut c, &["DOC.STATS", "c"]).unwrap();
    let stats: serde_json::Value = serde_json::from_str(&stats).unwrap();
    assert_eq!(stats["changes"]["lost"], 1);
}

#[test]
fn drop_and_rename_append_their_entries() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    ok(&mut c, &["DOC.CREATE", "a", "CHANGES", "cs"]);
    ok(&mut c, &["DOC.CREATE", "b", "CHANGES", "bs"]);
    strs(&mut c, &["DOC.INSERT", "a", r#"{"_id":1}"#]);
    strs(&mut c, &["DOC.INSERT", "b", r#"{"_id":2}"#]);
    ok(&mut c, &["DOC.RENAME", "a", "b", "DROPTARGET"]);
    strs(&mut c, &["DOC.INSERT", "b", r#"{"_id":3}"#]);
    assert_eq!(int(&mut c, &["DOC.DROP", "b"]), 1);
    let a: Vec<String> = xrange(&mut c, "cs")
        .into_iter()
        .map(|(_, f)| {
            format!(
                "{} {} {}",
                f["op"],
                f["ns"],
                f.get("to").or(f.get("_id")).cloned().unwrap_or_default()
            )
        })
        .collect();
    assert_eq!(
        a,
        [
            "insert 0.a 1",
            "rename 0.a 0.b",
            "insert 0.b 3",
            "drop 0.b "
        ]
    );
    let b: Vec<String> = xrange(&mut c, "bs")
        .into_iter()
        .map(|(_, f)| format!("{} {}", f["op"], f["ns"]))
        .collect();
    assert_eq!(b, ["insert 0.b", "drop 0.b"]);
}

#[test]
fn appends_fire_xadd_events() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    ok(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "Et"]);
    ok(&mut c, &["DOC.CREATE", "c", "CHANGES", "cs"]);
    let mut sub = s.conn();
    let mut ps = sub.as_pubsub();
    ps.subscribe("__keyevent@0__:xadd").unwrap();
    ps.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    strs(&mut c, &["DOC.INSERT", "c", r#"{"_id":1}"#]);
    let m = ps.get_message().expect("xadd event");
    assert_eq!(m.get_payload::<String>().unwrap(), "cs");
}

/// Writers on several connections change the same documents at once; the stream still
/// replays to the final state (per document, entries are in the order of the changes).
#[test]
fn concurrent_writers_replay_to_the_final_state() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    ok(&mut c, &["DOC.CREATE", "c", "CHANGES", "cs"]);
    let reader = follow(&s, "cs");
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let mut c = s.conn();
            std::thread::spawn(move || {
                let mut x: u64 = 0x9e37_79b9_7f4a_7c15 ^ (w as u64 + 1);
                for _ in 0..400 {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let id = x % 20;
                    let f = format!(r#"{{"_id":{id}}}"#);
                    let r: redis::RedisResult<Value> = match (x >> 8) % 5 {
                        0 => q(
                            &mut c,
                            &["DOC.INSERT", "c", &format!(r#"{{"_id":{id},"w":{w}}}"#)],
                        ),
                        1 => q(
                            &mut c,
                            &["DOC.UPDATE", "c", &f, r#"{"$inc":{"n":1}}"#, "UPSERT"],
                        ),
                        2 => q(&mut c, &["DOC.UPDATE", "c", &f, &format!(r#"{{"r":{w}}}"#)]),
                        3 => q(&mut c, &["DOC.DELETE", "c", &f]),
                        _ => q(
                            &mut c,
                            &[
                                "DOC.UPDATE",
                                "c",
                                r#"{"n":{"$gte":2}}"#,
                                r#"{"$set":{"m":true}}"#,
                                "MULTI",
                            ],
                        ),
                    };
                    // Duplicate inserts fail; that is part of the mix.
                    drop(r);
                }
            })
        })
        .collect();
    for w in writers {
        w.join().expect("writer");
    }
    strs(&mut c, &["DOC.INSERT", "c", r#"{"_id":"end"}"#]);
    let (seen, _) = reader.join().expect("reader");
    assert_eq!(seen, xrange(&mut c, "cs"));
    let mut replica = HashMap::new();
    replay(&mut replica, &seen);
    assert_eq!(replica, state(&mut c, "c"));
}

/// The TTL monitor's expiries wake a blocked reader by themselves (no other command runs
/// meanwhile to serve it).
#[test]
fn monitor_expiry_wakes_a_blocked_reader() {
    let s = TestServer::start(&["--ttl-monitor-period", "1"]);
    let mut c = s.conn();
    ok(&mut c, &["DOC.CREATE", "c", "CHANGES", "cs"]);
    let _: String = q(&mut c, &["DOC.EXPIREINDEX", "c", "exp", "0"]).unwrap();
    let soon = date(now_ms() + 200);
    let docs: Vec<String> = (0..3)
        .map(|i| format!(r#"{{"_id":{i},"exp":{soon}}}"#))
        .collect();
    let mut args = vec!["DOC.INSERT", "c"];
    args.extend(docs.iter().map(String::as_str));
    strs(&mut c, &args);
    let last = xrange(&mut c, "cs").last().expect("inserts").0.clone();
    let started = Instant::now();
    let mut got = Vec::new();
    while got.len() < 3 {
        let es = xread(
            &mut c,
            "cs",
            got.last().map_or(&last, |e: &Entry| &e.0),
            10_000,
        )
        .expect("woken before the timeout");
        got.extend(es);
    }
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(got.iter().all(|(_, f)| f["op"] == "expire"), "{got:?}");
}

/// A replica's change stream is its master's, entry for entry: the master's stream carries
/// the entries it appended (with their IDs), and the replica's own application of the
/// document records appends none of its own (which would also make the master's XADD fail
/// there).
#[test]
fn a_replica_holds_its_masters_change_stream_entry_for_entry() {
    let master = TestServer::start(&[]);
    let replica = TestServer::start(&[]);
    let mut m = master.conn();
    let mut r = replica.conn();
    support::replicate(&mut r, &master);
    let _: () = q(&mut m, &["DOC.CREATE", "c", "CHANGES", "cs"]).unwrap();
    for i in 0..20 {
        let _: Vec<Value> = q(
            &mut m,
            &["DOC.INSERT", "c", &format!(r#"{{"_id":{i},"a":1}}"#)],
        )
        .unwrap();
    }
    let _: i64 = q(&mut m, &["DOC.DELETE", "c", r#"{"_id":3}"#]).unwrap();
    let _: i64 = q(&mut m, &["WAIT", "1", "5000"]).unwrap();
    let ids = |c: &mut Connection| -> Vec<String> {
        let es: Vec<Value> = q(c, &["XRANGE", "cs", "-", "+"]).unwrap();
        es.iter()
            .map(|e| match e {
                Value::Array(v) => text(&v[0]),
                _ => String::new(),
            })
            .collect()
    };
    let on_master = ids(&mut m);
    assert_eq!(on_master.len(), 21);
    assert!(
        eventually(5.0, || ids(&mut r) == on_master),
        "{:?}",
        ids(&mut r)
    );
    assert_eq!(int(&mut r, &["DOC.COUNT", "c", "{}"]), 19);
}
