//! HyperLogLog commands through the `redis` crate, and the values' bytes held to
//! redis-server's: the same additions give byte-identical strings (sparse and dense), and a
//! value made by one server counts the same on the other.

mod support;

use std::time::Duration;
use support::{err_text, q, ReferenceRedis, TestServer};

fn get_bytes(c: &mut redis::Connection, key: &str) -> Vec<u8> {
    q::<Vec<u8>>(c, &["GET", key]).expect("GET")
}

fn pfadd(c: &mut redis::Connection, key: &str, elements: &[String]) -> i64 {
    let mut cmd = redis::cmd("PFADD");
    cmd.arg(key);
    for e in elements {
        cmd.arg(e);
    }
    cmd.query(c).expect("PFADD")
}

fn pfcount(c: &mut redis::Connection, keys: &[&str]) -> i64 {
    let mut cmd = redis::cmd("PFCOUNT");
    for k in keys {
        cmd.arg(*k);
    }
    cmd.query(c).expect("PFCOUNT")
}

fn elements(prefix: &str, range: std::ops::Range<usize>) -> Vec<String> {
    range.map(|i| format!("{prefix}-{i}")).collect()
}

/// Runs the same PFADD / PFCOUNT / PFMERGE sequence on both servers and compares every
/// reply and the stored bytes after each step.
#[test]
fn values_are_byte_identical_to_redis() {
    let Some(r) = ReferenceRedis::start() else {
        return;
    };
    let t = TestServer::start(&[]);
    let rc = &mut redis::Client::open(format!("redis://127.0.0.1:{}/", r.port))
        .unwrap()
        .get_connection()
        .unwrap();
    let tc = &mut t.conn();
    let both = |rc: &mut redis::Connection, tc: &mut redis::Connection, key: &str, what: &str| {
        let (a, b) = (get_bytes(rc, key), get_bytes(tc, key));
        assert_eq!(a.len(), b.len(), "{what}: length of {key}");
        assert!(a == b, "{what}: bytes of {key} differ");
    };
    // Growing in steps: sparse (small), then past hll-sparse-max-bytes (dense), with counts
    // in between so the cached cardinality and its invalid bit are compared too.
    let mut added = 0;
    for step in [1usize, 5, 20, 100, 300, 600, 1500, 4000] {
        let els = elements("e", added..added + step);
        added += step;
        assert_eq!(
            pfadd(rc, "h", &els),
            pfadd(tc, "h", &els),
            "PFADD step {step}"
        );
        both(rc, tc, "h", &format!("after {added} elements"));
        assert_eq!(pfcount(rc, &["h"]), pfcount(tc, &["h"]));
        both(rc, tc, "h", &format!("count after {added} elements"));
        // Re-adding known elements changes nothing.
        assert_eq!(pfadd(rc, "h", &els[..1]), pfadd(tc, "h", &els[..1]));
    }
    let enc: String = q(tc, &["PFDEBUG", "ENCODING", "h"]).unwrap();
    assert_eq!(enc, "dense");
    // Sparse sets of several sizes, merged into sparse and dense destinations.
    for (key, n) in [("s1", 10), ("s2", 200), ("s3", 900)] {
        let els = elements(key, 0..n);
        pfadd(rc, key, &els);
        pfadd(tc, key, &els);
        both(rc, tc, key, "sparse");
    }
    let s_enc: String = q(tc, &["PFDEBUG", "ENCODING", "s2"]).unwrap();
    assert_eq!(s_enc, "sparse");
    for args in [
        &["m1", "s1", "s2"][..],
        &["m2", "s1", "s2", "s3"],
        &["m3", "s1", "h"],
        &["s1", "s2"],
        &["m4", "nokey"],
    ] {
        let mut cmd = redis::cmd("PFMERGE");
        for a in args {
            cmd.arg(*a);
        }
        let a: String = cmd.query(rc).unwrap();
        let b: String = cmd.query(tc).unwrap();
        assert_eq!(a, b);
        both(rc, tc, args[0], "PFMERGE");
    }
    assert_eq!(
        pfcount(rc, &["s1", "s2", "s3", "h"]),
        pfcount(tc, &["s1", "s2", "s3", "h"])
    );
    // PFDEBUG's views agree too.
    for sub in ["DECODE", "ENCODING"] {
        let a: redis::Value = q(rc, &["PFDEBUG", sub, "s3"]).unwrap();
        let b: redis::Value = q(tc, &["PFDEBUG", sub, "s3"]).unwrap();
        assert_eq!(a, b, "PFDEBUG {sub}");
    }
    let a: Vec<i64> = q(rc, &["PFDEBUG", "GETREG", "s3"]).unwrap();
    let b: Vec<i64> = q(tc, &["PFDEBUG", "GETREG", "s3"]).unwrap();
    assert_eq!(a, b);
    both(rc, tc, "s3", "GETREG made it dense");
    // A smaller sparse limit promotes earlier, on both.
    for c in [&mut *rc, &mut *tc] {
        let _: () = q(c, &["CONFIG", "SET", "hll-sparse-max-bytes", "100"]).unwrap();
    }
    let els = elements("small", 0..60);
    for chunk in els.chunks(7) {
        assert_eq!(pfadd(rc, "small", chunk), pfadd(tc, "small", chunk));
        both(rc, tc, "small", "hll-sparse-max-bytes 100");
    }
}

/// A HyperLogLog made by redis-server, copied with GET/SET, counts the same here (and one
/// made here counts the same there).
#[test]
fn values_copied_between_servers_count_the_same() {
    let Some(r) = ReferenceRedis::start() else {
        return;
    };
    let t = TestServer::start(&[]);
    let rc = &mut redis::Client::open(format!("redis://127.0.0.1:{}/", r.port))
        .unwrap()
        .get_connection()
        .unwrap();
    let tc = &mut t.conn();
    for (i, n) in [0usize, 3, 50, 700, 2500, 20000].into_iter().enumerate() {
        let key = format!("k{i}");
        let els = elements(&key, 0..n);
        for chunk in els.chunks(1000) {
            pfadd(rc, &key, chunk);
        }
        if n == 0 {
            pfadd(rc, &key, &[]);
        }
        let v = get_bytes(rc, &key);
        let _: () = redis::cmd("SET").arg(&key).arg(&v).query(tc).unwrap();
        let expected = pfcount(rc, &[&key]);
        assert_eq!(pfcount(tc, &[&key]), expected, "{n} elements");
        // And back: the count cached here is read by Redis.
        let back = get_bytes(tc, &key);
        let _: () = redis::cmd("SET").arg("back").arg(&back).query(rc).unwrap();
        assert_eq!(pfcount(rc, &["back"]), expected);
        // Adding more after the copy keeps both in step.
        let more = elements("more", 0..40);
        assert_eq!(pfadd(rc, &key, &more), pfadd(tc, &key, &more));
        assert_eq!(get_bytes(rc, &key), get_bytes(tc, &key));
    }
    assert_eq!(
        pfcount(rc, &["k1", "k2", "k3", "k4", "k5"]),
        pfcount(tc, &["k1", "k2", "k3", "k4", "k5"])
    );
}

#[test]
fn errors_and_corruption() {
    let t = TestServer::start(&[]);
    let c = &mut t.conn();
    let _: () = q(c, &["SET", "str", "hello"]).unwrap();
    let _: () = q(c, &["SET", "int", "123"]).unwrap();
    let _: i64 = q(c, &["HSET", "hash", "f", "v"]).unwrap();
    for args in [
        &["PFADD", "str", "a"][..],
        &["PFCOUNT", "str"],
        &["PFCOUNT", "str", "nokey"],
        &["PFMERGE", "dest", "str"],
        &["PFMERGE", "str", "nokey"],
        &["PFADD", "int", "a"],
        &["PFDEBUG", "ENCODING", "str"],
    ] {
        assert_eq!(
            err_text(q::<redis::Value>(c, args)),
            "WRONGTYPE Key is not a valid HyperLogLog string value.",
            "{args:?}"
        );
    }
    assert!(!q::<bool>(c, &["EXISTS", "dest"]).unwrap());
    for args in [
        &["PFADD", "hash", "a"][..],
        &["PFCOUNT", "hash"],
        &["PFCOUNT", "nokey", "hash"],
        &["PFMERGE", "hash", "nokey"],
    ] {
        assert!(err_text(q::<redis::Value>(c, args)).starts_with("WRONGTYPE Operation"));
    }
    // A sparse value whose opcodes cover too many registers.
    pfadd(c, "h", &elements("x", 0..10));
    let _: i64 = q(c, &["APPEND", "h", "\x7f"]).unwrap();
    assert_eq!(
        err_text(q::<i64>(c, &["PFCOUNT", "h"])),
        "INVALIDOBJ Corrupted HLL object detected"
    );
    assert_eq!(
        err_text(q::<i64>(c, &["PFCOUNT", "h", "nokey"])),
        "INVALIDOBJ Corrupted HLL object detected"
    );
    assert_eq!(
        err_text(q::<String>(c, &["PFDEBUG", "ENCODING", "nokey"])),
        "ERR The specified key does not exist"
    );
    pfadd(c, "ok", &elements("y", 0..3));
    assert_eq!(
        err_text(q::<String>(c, &["PFDEBUG", "foo", "ok"])),
        "ERR Unknown PFDEBUG subcommand 'foo'"
    );
    let n: i64 = q(c, &["PFDEBUG", "TODENSE", "ok"]).unwrap();
    assert_eq!(n, 1);
    assert_eq!(
        err_text(q::<String>(c, &["PFDEBUG", "DECODE", "ok"])),
        "ERR HLL encoding is not sparse"
    );
    assert_eq!(pfcount(c, &["ok"]), 3);
    // A dense value of the wrong length is not a HyperLogLog.
    let _: i64 = q(c, &["APPEND", "ok", "x"]).unwrap();
    assert!(err_text(q::<i64>(c, &["PFCOUNT", "ok"])).starts_with("WRONGTYPE Key is not"));
    assert_eq!(pfcount(c, &["nokey"]), 0);
    assert_eq!(pfcount(c, &["nokey", "nokey2"]), 0);
}

#[test]
fn counts_cache_ttl_and_events() {
    let t = TestServer::start(&[]);
    let c = &mut t.conn();
    // PFADD without elements creates the key; a second one changes nothing.
    assert_eq!(pfadd(c, "h", &[]), 1);
    assert_eq!(pfadd(c, "h", &[]), 0);
    assert_eq!(pfcount(c, &["h"]), 0);
    assert_eq!(pfadd(c, "h", &elements("a", 0..1000)), 1);
    let n = pfcount(c, &["h"]);
    assert!((950..=1050).contains(&n), "{n}");
    // The count is cached in the header (top bit of byte 15 clear), invalidated by a change.
    let v = get_bytes(c, "h");
    assert_eq!(&v[..4], b"HYLL");
    assert_eq!(v[15] & 0x80, 0);
    assert_eq!(u64::from_le_bytes(v[8..16].try_into().unwrap()), n as u64);
    pfadd(c, "h", &elements("b", 0..10));
    assert_ne!(get_bytes(c, "h")[15] & 0x80, 0);
    // Writes keep the key's deadline.
    let _: i64 = q(c, &["EXPIRE", "h", "1000"]).unwrap();
    pfadd(c, "h", &elements("c", 0..10));
    let _: String = q(c, &["PFMERGE", "h", "nokey"]).unwrap();
    let ttl: i64 = q(c, &["TTL", "h"]).unwrap();
    assert!(ttl > 990, "{ttl}");
    // Keyspace events: pfadd for PFADD and PFMERGE, none for PFCOUNT.
    let _: () = q(c, &["CONFIG", "SET", "notify-keyspace-events", "KEA"]).unwrap();
    let mut sub = t.conn();
    let mut ps = sub.as_pubsub();
    ps.psubscribe("__keyevent@0__:*").unwrap();
    ps.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    pfadd(c, "e", &elements("z", 0..3));
    pfadd(c, "e", &elements("z", 0..3));
    pfcount(c, &["e"]);
    let _: String = q(c, &["PFMERGE", "e2", "e"]).unwrap();
    let _: () = q(c, &["SET", "end", "1"]).unwrap();
    let mut got = Vec::new();
    loop {
        let m = ps.get_message().expect("event");
        let key: String = m.get_payload().unwrap();
        got.push(format!("{}:{key}", m.get_channel_name()));
        if key == "end" {
            break;
        }
    }
    assert_eq!(
        got,
        [
            "__keyevent@0__:pfadd:e",
            "__keyevent@0__:pfadd:e2",
            "__keyevent@0__:set:end"
        ]
    );
    let ok: String = q(c, &["PFSELFTEST"]).unwrap();
    assert_eq!(ok, "OK");
}
