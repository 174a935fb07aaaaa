//! Stream commands through the `redis` crate: entries, blocking reads, consumer groups,
//! the block-size settings.

mod support;

use redis::Value;
use std::time::{Duration, Instant};
use support::{err_text, int, q, resp, TestServer};

/// An XRANGE-style reply as (id, flattened fields).
fn entries(v: Value) -> Vec<(String, Vec<String>)> {
    let Value::Array(items) = v else {
        panic!("not an array: {v:?}")
    };
    items
        .into_iter()
        .map(|e| {
            let (id, fields): (String, Vec<String>) = redis::from_redis_value(e).unwrap();
            (id, fields)
        })
        .collect()
}

fn ids(v: Value) -> Vec<String> {
    entries(v).into_iter().map(|e| e.0).collect()
}

#[test]
fn add_range_delete_trim() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    for i in 1..=5 {
        let id: String = q(
            &mut c,
            &["XADD", "s", &format!("{i}-0"), "f", &i.to_string()],
        )
        .unwrap();
        assert_eq!(id, format!("{i}-0"));
    }
    // An automatic ID is past the last one.
    let auto: String = q(&mut c, &["XADD", "s", "*", "f", "x"]).unwrap();
    let ms: u64 = auto.split('-').next().unwrap().parse().unwrap();
    assert!(ms > 5);
    assert_eq!(int(&mut c, &["XLEN", "s"]), 6);
    let t: String = q(&mut c, &["TYPE", "s"]).unwrap();
    assert_eq!(t, "stream");
    let e: String = q(&mut c, &["OBJECT", "ENCODING", "s"]).unwrap();
    assert_eq!(e, "stream");
    let r = entries(q(&mut c, &["XRANGE", "s", "(2-0", "4"]).unwrap());
    assert_eq!(
        r,
        vec![
            ("3-0".to_string(), vec!["f".to_string(), "3".to_string()]),
            ("4-0".to_string(), vec!["f".to_string(), "4".to_string()]),
        ]
    );
    assert_eq!(
        ids(q(&mut c, &["XREVRANGE", "s", "+", "-", "COUNT", "2"]).unwrap())[1],
        "5-0"
    );
    assert_eq!(int(&mut c, &["XDEL", "s", "1-0", "2-0", "9-0"]), 2);
    assert_eq!(int(&mut c, &["XTRIM", "s", "MAXLEN", "2"]), 2);
    assert_eq!(int(&mut c, &["XLEN", "s"]), 2);
    assert_eq!(
        err_text(q::<String>(&mut c, &["XADD", "s", "1-0", "f", "v"])),
        "ERR The ID specified in XADD is equal or smaller than the target stream top item"
    );
    assert_eq!(
        err_text(q::<String>(&mut c, &["XADD", "z", "0-0", "f", "v"])),
        "ERR The ID specified in XADD must be greater than 0-0"
    );
    // An emptied stream stays, with its last ID.
    assert_eq!(int(&mut c, &["XTRIM", "s", "MAXLEN", "0"]), 2);
    assert_eq!(int(&mut c, &["EXISTS", "s"]), 1);
    let r: Option<String> = q(&mut c, &["XADD", "nos", "NOMKSTREAM", "*", "f", "v"]).unwrap();
    assert_eq!(r, None);
}

#[test]
fn blocked_xread_is_woken_by_xadd_from_another_connection() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    let _: String = q(&mut c, &["XADD", "s", "1-0", "f", "old"]).unwrap();
    let mut waiter = s.raw();
    waiter.send(&resp(&["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]));
    std::thread::sleep(Duration::from_millis(200));
    let _: String = q(&mut c, &["XADD", "s", "2-0", "f", "new"]).unwrap();
    let got = waiter.read_until(b"new\r\n");
    assert_eq!(
        got,
        b"*1\r\n*2\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n2-0\r\n*2\r\n$1\r\nf\r\n$3\r\nnew\r\n"
    );
    // A key created while blocked wakes the reader too.
    waiter.send(&resp(&["XREAD", "BLOCK", "0", "STREAMS", "fresh", "0"]));
    std::thread::sleep(Duration::from_millis(100));
    let _: String = q(&mut c, &["XADD", "fresh", "5-0", "k", "v"]).unwrap();
    let got = waiter.read_until(b"v\r\n");
    assert!(got.ends_with(b"$3\r\n5-0\r\n*2\r\n$1\r\nk\r\n$1\r\nv\r\n"));
    // A timeout answers a null array.
    let t = Instant::now();
    let r: Value = q(&mut c, &["XREAD", "BLOCK", "100", "STREAMS", "s", "$"]).unwrap();
    assert_eq!(r, Value::Nil);
    assert!(t.elapsed() >= Duration::from_millis(90));
}

#[test]
fn consumer_group_with_two_consumers_and_autoclaim() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    let ok: String = q(
        &mut c,
        &["XGROUP", "CREATE", "jobs", "workers", "$", "MKSTREAM"],
    )
    .unwrap();
    assert_eq!(ok, "OK");
    for i in 1..=4 {
        let _: String = q(
            &mut c,
            &["XADD", "jobs", &format!("{i}-0"), "job", &i.to_string()],
        )
        .unwrap();
    }
    let read = |c: &mut redis::Connection, who: &str, n: &str| -> Vec<String> {
        let v: Value = q(
            c,
            &[
                "XREADGROUP",
                "GROUP",
                "workers",
                who,
                "COUNT",
                n,
                "STREAMS",
                "jobs",
                ">",
            ],
        )
        .unwrap();
        let streams: Vec<(String, Value)> = redis::from_redis_value(v).unwrap();
        ids(streams.into_iter().next().unwrap().1)
    };
    assert_eq!(read(&mut c, "alice", "2"), ["1-0", "2-0"]);
    assert_eq!(read(&mut c, "bob", "2"), ["3-0", "4-0"]);
    // Nothing new: a null array.
    let none: Value = q(
        &mut c,
        &[
            "XREADGROUP",
            "GROUP",
            "workers",
            "bob",
            "STREAMS",
            "jobs",
            ">",
        ],
    )
    .unwrap();
    assert_eq!(none, Value::Nil);
    assert_eq!(int(&mut c, &["XACK", "workers_x", "workers", "1-0"]), 0);
    assert_eq!(int(&mut c, &["XACK", "jobs", "workers", "1-0"]), 1);
    let summary: (i64, String, String, Vec<(String, String)>) =
        q(&mut c, &["XPENDING", "jobs", "workers"]).unwrap();
    assert_eq!(summary.0, 3);
    assert_eq!(summary.1, "2-0");
    assert_eq!(summary.2, "4-0");
    assert_eq!(
        summary.3,
        vec![("alice".into(), "1".into()), ("bob".into(), "2".into())]
    );
    // Alice's history.
    let v: Value = q(
        &mut c,
        &[
            "XREADGROUP",
            "GROUP",
            "workers",
            "alice",
            "STREAMS",
            "jobs",
            "0",
        ],
    )
    .unwrap();
    let streams: Vec<(String, Value)> = redis::from_redis_value(v).unwrap();
    assert_eq!(ids(streams.into_iter().next().unwrap().1), ["2-0"]);
    // Bob went away: carol takes over whatever has been idle 50 ms.
    std::thread::sleep(Duration::from_millis(80));
    let (next, claimed, deleted): (String, Value, Vec<String>) = q(
        &mut c,
        &[
            "XAUTOCLAIM",
            "jobs",
            "workers",
            "carol",
            "50",
            "3-0",
            "COUNT",
            "1",
        ],
    )
    .unwrap();
    assert_eq!(next, "4-0");
    assert_eq!(ids(claimed), ["3-0"]);
    assert!(deleted.is_empty());
    let _: i64 = q(&mut c, &["XDEL", "jobs", "4-0"]).unwrap();
    let (next, claimed, deleted): (String, Value, Vec<String>) = q(
        &mut c,
        &["XAUTOCLAIM", "jobs", "workers", "carol", "50", "4-0"],
    )
    .unwrap();
    assert_eq!(next, "0-0");
    assert!(ids(claimed).is_empty());
    assert_eq!(deleted, ["4-0"]);
    let rows: Vec<(String, String, i64, i64)> =
        q(&mut c, &["XPENDING", "jobs", "workers", "-", "+", "10"]).unwrap();
    let owners: Vec<(String, String, i64)> = rows.into_iter().map(|r| (r.0, r.1, r.3)).collect();
    assert_eq!(
        owners,
        vec![
            ("2-0".into(), "alice".into(), 2),
            ("3-0".into(), "carol".into(), 2)
        ]
    );
    let groups: Vec<std::collections::HashMap<String, Value>> =
        q(&mut c, &["XINFO", "GROUPS", "jobs"]).unwrap();
    assert_eq!(groups[0]["consumers"], Value::Int(3));
    assert_eq!(groups[0]["pending"], Value::Int(2));
    assert_eq!(groups[0]["entries-read"], Value::Int(4));
    assert_eq!(
        err_text(q::<Value>(
            &mut c,
            &["XREADGROUP", "GROUP", "nope", "x", "STREAMS", "jobs", ">"]
        )),
        "NOGROUP No such key 'jobs' or consumer group 'nope' in XREADGROUP with GROUP option"
    );
}

#[test]
fn blocked_xreadgroup_is_served_new_entries() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    let _: String = q(&mut c, &["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]).unwrap();
    let mut waiter = s.raw();
    waiter.send(&resp(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "c1",
        "BLOCK",
        "0",
        "STREAMS",
        "s",
        ">",
    ]));
    std::thread::sleep(Duration::from_millis(200));
    let _: String = q(&mut c, &["XADD", "s", "7-0", "a", "b"]).unwrap();
    let got = waiter.read_until(b"b\r\n");
    assert!(got.ends_with(b"$3\r\n7-0\r\n*2\r\n$1\r\na\r\n$1\r\nb\r\n"));
    let summary: (i64, String, String, Vec<(String, String)>) =
        q(&mut c, &["XPENDING", "s", "g"]).unwrap();
    assert_eq!(summary.0, 1);
    // The group destroyed under a blocked reader: NOGROUP.
    waiter.send(&resp(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "c1",
        "BLOCK",
        "0",
        "STREAMS",
        "s",
        ">",
    ]));
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(int(&mut c, &["XGROUP", "DESTROY", "s", "g"]), 1);
    let got = waiter.read_until(b"\r\n");
    assert!(
        got.starts_with(b"-NOGROUP"),
        "{}",
        String::from_utf8_lossy(&got)
    );
    // The stream replaced by another type under a blocked reader: NOGROUP too.
    let _: String = q(&mut c, &["XGROUP", "CREATE", "s", "g", "$"]).unwrap();
    waiter.send(&resp(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "c1",
        "BLOCK",
        "0",
        "STREAMS",
        "s",
        ">",
    ]));
    std::thread::sleep(Duration::from_millis(200));
    let _: String = q(&mut c, &["SET", "s", "x"]).unwrap();
    let got = waiter.read_until(b"\r\n");
    assert!(
        got.starts_with(b"-NOGROUP the consumer group this client was blocked on no longer exists")
    );
    // A plain XREAD stays blocked when its key is deleted, and takes the entry added later.
    let _: i64 = q(&mut c, &["DEL", "s"]).unwrap();
    waiter.send(&resp(&["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]));
    std::thread::sleep(Duration::from_millis(100));
    let _: String = q(&mut c, &["XADD", "s", "1-0", "f", "v"]).unwrap();
    let got = waiter.read_until(b"$1\r\nv\r\n");
    assert!(got.ends_with(b"$3\r\n1-0\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n"));
}

#[test]
fn node_settings_size_the_blocks() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    let _: String = q(&mut c, &["CONFIG", "SET", "stream-node-max-entries", "10"]).unwrap();
    for i in 1..=35 {
        let _: String = q(&mut c, &["XADD", "s", &format!("{i}-0"), "f", "v"]).unwrap();
    }
    let info: std::collections::HashMap<String, Value> =
        q(&mut c, &["XINFO", "STREAM", "s"]).unwrap();
    assert_eq!(info["radix-tree-keys"], Value::Int(4));
    // An approximate trim frees whole blocks only.
    assert_eq!(int(&mut c, &["XTRIM", "s", "MAXLEN", "~", "12"]), 20);
    let _: String = q(&mut c, &["CONFIG", "SET", "stream-node-max-entries", "0"]).unwrap();
    let _: String = q(&mut c, &["CONFIG", "SET", "stream-node-max-bytes", "100"]).unwrap();
    for i in 1..=10 {
        let _: String = q(
            &mut c,
            &[
                "XADD",
                "b",
                &format!("{i}-0"),
                "field",
                "0123456789012345678901234567890123456789",
            ],
        )
        .unwrap();
    }
    let info: std::collections::HashMap<String, Value> =
        q(&mut c, &["XINFO", "STREAM", "b"]).unwrap();
    let Value::Int(n) = info["radix-tree-keys"] else {
        panic!()
    };
    assert!(n >= 5, "{n}");
    let got: Vec<String> = q(&mut c, &["CONFIG", "GET", "stream-node-max-bytes"]).unwrap();
    assert_eq!(got, ["stream-node-max-bytes", "100"]);
}

#[test]
fn keyspace_events_and_resp3_shapes() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    let _: String = q(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "Et"]).unwrap();
    let mut sub = s.raw();
    sub.send(&resp(&[
        "SUBSCRIBE",
        "__keyevent@0__:xadd",
        "__keyevent@0__:xgroup-createconsumer",
        "__keyevent@0__:xtrim",
    ]));
    sub.read_until(b"xtrim\r\n:3\r\n");
    let _: String = q(&mut c, &["XADD", "s", "MAXLEN", "0", "1-0", "a", "1"]).unwrap();
    let _: String = q(&mut c, &["XGROUP", "CREATE", "s", "g", "0"]).unwrap();
    let _: i64 = q(&mut c, &["XGROUP", "CREATECONSUMER", "s", "g", "c"]).unwrap();
    let got = sub.read_until(b"xgroup-createconsumer\r\n$1\r\ns\r\n");
    let text = String::from_utf8_lossy(&got);
    let order: Vec<&str> = ["xadd", "xtrim", "xgroup-createconsumer"]
        .into_iter()
        .filter(|e| text.contains(&format!("__keyevent@0__:{e}\r\n$1\r\ns")))
        .collect();
    assert_eq!(order, ["xadd", "xtrim", "xgroup-createconsumer"]);
    // RESP3: XREAD answers a map of key to entries, a timeout is a null.
    let mut r = s.raw();
    r.send(&resp(&["HELLO", "3"]));
    r.read_until(b"modules\r\n*0\r\n");
    let _: String = q(&mut c, &["XADD", "t", "5-0", "f", "v"]).unwrap();
    r.send(&resp(&["XREAD", "STREAMS", "t", "0"]));
    assert_eq!(
        r.read_until(b"$1\r\nv\r\n"),
        b"%1\r\n$1\r\nt\r\n*1\r\n*2\r\n$3\r\n5-0\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n"
    );
    r.send(&resp(&["XREAD", "BLOCK", "10", "STREAMS", "t", "$"]));
    assert_eq!(r.read_until(b"\r\n"), b"_\r\n");
}
