//! Redis 7.4's hash-field expiration end to end (real binary, `redis` crate): HEXPIRE and
//! its siblings with their per-field codes and errors, HTTL/HPTTL/HEXPIRETIME/HPEXPIRETIME,
//! HPERSIST, lazy and active expiry with their keyspace events, HSET clearing a deadline,
//! the `listpackex` encoding and its memory, RENAME/COPY, the journal (records and the
//! rewritten base) across restarts, HSCAN NOVALUES and XREAD's `+`.

mod support;

use redis::Value;
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use support::{err_text, eventually, int, q, strs, TestServer};

fn ints(c: &mut redis::Connection, args: &[&str]) -> Vec<i64> {
    q::<Vec<i64>>(c, args).expect("array of integers")
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_millis() as i64
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

#[test]
fn replies_and_errors() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    let _: i64 = q(&mut c, &["HSET", "h", "a", "1", "b", "2", "c", "3"]).expect("hset");
    assert_eq!(
        ints(
            &mut c,
            &["HEXPIRE", "h", "100", "FIELDS", "3", "a", "b", "nope"]
        ),
        vec![1, 1, -2]
    );
    let enc: String = q(&mut c, &["OBJECT", "ENCODING", "h"]).expect("encoding");
    assert_eq!(enc, "listpackex");
    assert_eq!(
        ints(&mut c, &["HTTL", "h", "FIELDS", "3", "a", "c", "x"]),
        vec![100, -1, -2]
    );
    let pttl = ints(&mut c, &["HPTTL", "h", "FIELDS", "1", "a"])[0];
    assert!((99_000..=100_000).contains(&pttl), "{pttl}");
    let at = ints(&mut c, &["HPEXPIRETIME", "h", "FIELDS", "1", "a"])[0];
    assert!((at - (now_ms() + 100_000)).abs() < 2000, "{at}");
    let at_s = ints(&mut c, &["HEXPIRETIME", "h", "FIELDS", "1", "a"])[0];
    assert_eq!(at_s, (at + 999) / 1000);
    // Conditions: NX only without a deadline, XX/GT only with one, LT also without.
    assert_eq!(
        ints(
            &mut c,
            &["HEXPIRE", "h", "200", "NX", "FIELDS", "2", "a", "c"]
        ),
        vec![0, 1]
    );
    assert_eq!(
        ints(&mut c, &["HPERSIST", "h", "FIELDS", "1", "c"]),
        vec![1]
    );
    assert_eq!(
        ints(
            &mut c,
            &["HEXPIRE", "h", "200", "XX", "FIELDS", "2", "a", "c"]
        ),
        vec![1, 0]
    );
    assert_eq!(
        ints(
            &mut c,
            &["HEXPIRE", "h", "100", "GT", "FIELDS", "2", "a", "c"]
        ),
        vec![0, 0]
    );
    assert_eq!(
        ints(&mut c, &["HEXPIRE", "h", "300", "gt", "FIELDS", "1", "a"]),
        vec![1]
    );
    assert_eq!(
        ints(
            &mut c,
            &["HEXPIRE", "h", "50", "LT", "FIELDS", "2", "a", "c"]
        ),
        vec![1, 1]
    );
    assert_eq!(
        ints(&mut c, &["HEXPIRE", "h", "60", "LT", "FIELDS", "1", "a"]),
        vec![0]
    );
    let at = (now_ms() / 1000 + 500).to_string();
    assert_eq!(
        ints(&mut c, &["HEXPIREAT", "h", &at, "FIELDS", "1", "b"]),
        vec![1]
    );
    let at_ms = (now_ms() + 500_000).to_string();
    assert_eq!(
        ints(&mut c, &["HPEXPIREAT", "h", &at_ms, "FIELDS", "1", "b"]),
        vec![1]
    );
    assert_eq!(
        ints(&mut c, &["HPEXPIRETIME", "h", "FIELDS", "1", "b"]),
        vec![at_ms.parse::<i64>().unwrap()]
    );
    // HPERSIST: -2 no field, -1 no deadline, 1 removed.
    let _: i64 = q(&mut c, &["HSET", "h", "d", "4"]).expect("hset");
    assert_eq!(
        ints(&mut c, &["HPERSIST", "h", "FIELDS", "3", "a", "d", "x"]),
        vec![1, -1, -2]
    );
    // A deadline not in the future deletes the field (2); the last one deletes the key.
    assert_eq!(
        ints(&mut c, &["HEXPIRE", "h", "0", "FIELDS", "2", "d", "x"]),
        vec![2, -2]
    );
    assert_eq!(
        ints(
            &mut c,
            &["HPEXPIREAT", "h", "1", "FIELDS", "3", "a", "b", "c"]
        ),
        vec![2, 2, 2]
    );
    assert_eq!(int(&mut c, &["EXISTS", "h"]), 0);
    // A missing key: -2 for every field.
    assert_eq!(
        ints(&mut c, &["HEXPIRE", "none", "10", "FIELDS", "2", "a", "b"]),
        vec![-2, -2]
    );
    assert_eq!(
        ints(&mut c, &["HTTL", "none", "FIELDS", "1", "a"]),
        vec![-2]
    );
    assert_eq!(
        ints(&mut c, &["HPERSIST", "none", "FIELDS", "1", "a"]),
        vec![-2]
    );
    // Errors, as Redis 7.4 words them.
    let _: i64 = q(&mut c, &["HSET", "h", "a", "1"]).expect("hset");
    let e = |c: &mut redis::Connection, a: &[&str]| err_text(q::<Value>(c, a));
    assert_eq!(
        e(&mut c, &["HEXPIRE", "h", "10", "FIELDS", "2", "a"]),
        "ERR The `numfields` parameter must match the number of arguments"
    );
    assert_eq!(
        e(&mut c, &["HEXPIRE", "h", "10", "FIELDS", "0", "a"]),
        "ERR Parameter `numFields` should be greater than 0"
    );
    assert_eq!(
        e(&mut c, &["HTTL", "h", "FIELDS", "0", "a"]),
        "ERR Number of fields must be a positive integer"
    );
    assert_eq!(
        e(&mut c, &["HEXPIRE", "h", "10", "NX", "FILEDS", "1", "a"]),
        "ERR Mandatory argument FIELDS is missing or not at the right position"
    );
    assert_eq!(
        e(&mut c, &["HPERSIST", "h", "1", "FIELDS", "a"]),
        "ERR Mandatory argument FIELDS is missing or not at the right position"
    );
    assert_eq!(
        e(&mut c, &["HEXPIRE", "h", "-1", "FIELDS", "1", "a"]),
        "ERR invalid expire time, must be >= 0"
    );
    assert_eq!(
        e(
            &mut c,
            &["HPEXPIRE", "h", "70368744177663", "FIELDS", "1", "a"]
        ),
        "ERR invalid expire time in 'hpexpire' command"
    );
    assert_eq!(
        e(
            &mut c,
            &["HEXPIREAT", "h", "70368744177664", "FIELDS", "1", "a"]
        ),
        "ERR invalid expire time in 'hexpireat' command"
    );
    assert!(e(&mut c, &["HEXPIRE", "h", "x", "FIELDS", "1", "a"]).contains("not an integer"));
    assert!(e(&mut c, &["HEXPIRE", "h", "1", "FIELDS", "1"]).contains("wrong number of arguments"));
    let _: () = q(&mut c, &["SET", "str", "x"]).expect("set");
    assert!(e(&mut c, &["HEXPIRE", "str", "1", "FIELDS", "1", "a"]).starts_with("WRONGTYPE"));
    assert!(e(&mut c, &["HTTL", "str", "FIELDS", "1", "a"]).starts_with("WRONGTYPE"));
    // COMMAND INFO as 7.4: arity, flags.
    let info: Value = q(&mut c, &["COMMAND", "INFO", "hexpire", "httl", "hpersist"]).expect("info");
    let text = format!("{info:?}");
    assert!(
        text.contains("hexpire") && text.contains("int(-6)"),
        "{text}"
    );
    assert!(text.contains("int(-5)"), "{text}");
}

#[test]
fn lazy_expiry_hides_and_deletes_fields() {
    let s = TestServer::start(&["--enable-debug-command", "yes"]);
    let mut c = s.conn();
    let _: Value = q(&mut c, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]).expect("debug");
    let _: i64 = q(&mut c, &["HSET", "h", "a", "1", "b", "2", "c", "3"]).expect("hset");
    assert_eq!(
        ints(&mut c, &["HPEXPIRE", "h", "50", "FIELDS", "2", "a", "b"]),
        vec![1, 1]
    );
    std::thread::sleep(Duration::from_millis(120));
    // HLEN counts fields past their deadline until they are purged (as 7.4's).
    assert_eq!(int(&mut c, &["HLEN", "h"]), 3);
    assert_eq!(
        q::<Option<String>>(&mut c, &["HGET", "h", "a"]).expect("hget"),
        None
    );
    // A lookup deletes the field it looks up; HGETALL skips the others without deleting.
    assert_eq!(int(&mut c, &["HLEN", "h"]), 2);
    assert_eq!(strs(&mut c, &["HGETALL", "h"]), vec!["c", "3"]);
    assert_eq!(int(&mut c, &["HLEN", "h"]), 2);
    assert_eq!(int(&mut c, &["HSTRLEN", "h", "b"]), 0);
    assert_eq!(int(&mut c, &["HEXISTS", "h", "b"]), 0);
    assert_eq!(int(&mut c, &["HLEN", "h"]), 1);
    // Each read command: an expired field is never returned.
    let _: i64 = q(&mut c, &["HSET", "h", "x", "1", "y", "2"]).expect("hset");
    let _: Vec<i64> = q(&mut c, &["HPEXPIRE", "h", "30", "FIELDS", "1", "x"]).expect("hpexpire");
    std::thread::sleep(Duration::from_millis(80));
    assert_eq!(sorted(strs(&mut c, &["HKEYS", "h"])), vec!["c", "y"]);
    let _: Vec<i64> = q(&mut c, &["HPEXPIRE", "h", "30", "FIELDS", "1", "y"]).expect("hpexpire");
    std::thread::sleep(Duration::from_millis(80));
    assert_eq!(strs(&mut c, &["HVALS", "h"]), vec!["3"]);
    assert_eq!(strs(&mut c, &["HRANDFIELD", "h", "-5"]), vec!["c"; 5]);
    // The last field's expiry deletes the key.
    let _: Vec<i64> = q(&mut c, &["HPEXPIRE", "h", "30", "FIELDS", "1", "c"]).expect("hpexpire");
    std::thread::sleep(Duration::from_millis(80));
    assert_eq!(
        q::<Vec<Value>>(&mut c, &["HMGET", "h", "c"]).expect("hmget"),
        vec![Value::Nil]
    );
    assert_eq!(int(&mut c, &["EXISTS", "h"]), 0);
    // A large (hashtable) hash behaves the same.
    let mut args: Vec<String> = vec!["HSET".into(), "big".into()];
    for i in 0..300 {
        args.push(format!("f{i}"));
        args.push("v".into());
    }
    let refs: Vec<&str> = args.iter().map(|a| a.as_str()).collect();
    let _: i64 = q(&mut c, &refs).expect("hset");
    let mut ex: Vec<String> = vec![
        "HPEXPIRE".into(),
        "big".into(),
        "40".into(),
        "FIELDS".into(),
        "150".into(),
    ];
    ex.extend((0..150).map(|i| format!("f{}", i * 2)));
    let refs: Vec<&str> = ex.iter().map(|a| a.as_str()).collect();
    assert_eq!(ints(&mut c, &refs), vec![1; 150]);
    let enc: String = q(&mut c, &["OBJECT", "ENCODING", "big"]).expect("encoding");
    assert_eq!(enc, "hashtable");
    std::thread::sleep(Duration::from_millis(100));
    let mut seen = Vec::new();
    let mut cursor = "0".to_string();
    loop {
        let (next, batch): (String, Vec<String>) = q(
            &mut c,
            &["HSCAN", "big", &cursor, "COUNT", "50", "NOVALUES"],
        )
        .expect("hscan");
        seen.extend(batch);
        if next == "0" {
            break;
        }
        cursor = next;
    }
    assert_eq!(seen.len(), 150);
    assert!(seen.iter().all(|f| f[1..].parse::<u32>().unwrap() % 2 == 1));
    assert_eq!(int(&mut c, &["HLEN", "big"]), 300);
    // HRANDFIELD deletes every expired field first (7.4).
    let _: Value = q(&mut c, &["HRANDFIELD", "big", "3"]).expect("hrandfield");
    assert_eq!(int(&mut c, &["HLEN", "big"]), 150);
}

#[test]
fn active_expiry_and_events() {
    let s = TestServer::start(&["--notify-keyspace-events", "KEA"]);
    let mut c = s.conn();
    let mut sub = s.client().get_connection().expect("connect");
    let mut ps = sub.as_pubsub();
    ps.psubscribe("__keyevent@0__:*").expect("psubscribe");
    ps.set_read_timeout(Some(Duration::from_secs(3)))
        .expect("timeout");
    let _: i64 = q(&mut c, &["HSET", "h", "a", "1", "b", "2"]).expect("hset");
    let _: Vec<i64> = q(&mut c, &["HPEXPIRE", "h", "100", "FIELDS", "1", "a"]).expect("hpexpire");
    let _: Vec<i64> = q(&mut c, &["HPERSIST", "h", "FIELDS", "1", "a"]).expect("hpersist");
    let _: Vec<i64> =
        q(&mut c, &["HPEXPIRE", "h", "100", "FIELDS", "2", "a", "b"]).expect("hpexpire");
    // Nothing reads `h`: the background sweep removes both fields and the key.
    assert!(eventually(3.0, || int(&mut c, &["EXISTS", "h"]) == 0));
    let mut events = Vec::new();
    while events.last().map(String::as_str) != Some("del") {
        let m = ps.get_message().expect("event");
        assert_eq!(m.get_payload::<String>().expect("payload"), "h");
        events.push(
            m.get_channel_name()
                .trim_start_matches("__keyevent@0__:")
                .to_string(),
        );
    }
    assert_eq!(
        events,
        vec!["hset", "hexpire", "hpersist", "hexpire", "hexpired", "del"]
    );
    // A past deadline deletes at once: `hdel`, then `del` for the last field.
    let _: i64 = q(&mut c, &["HSET", "g", "a", "1"]).expect("hset");
    let _: Vec<i64> = q(&mut c, &["HEXPIRE", "g", "0", "FIELDS", "1", "a"]).expect("hexpire");
    let mut events = Vec::new();
    for _ in 0..3 {
        let m = ps.get_message().expect("event");
        events.push(
            m.get_channel_name()
                .trim_start_matches("__keyevent@0__:")
                .to_string(),
        );
    }
    assert_eq!(events, vec!["hset", "hdel", "del"]);
    // A renamed or copied hash is found by the sweep's walk of the key space.
    let _: i64 = q(&mut c, &["HSET", "r", "a", "1"]).expect("hset");
    let _: Vec<i64> = q(&mut c, &["HPEXPIRE", "r", "200", "FIELDS", "1", "a"]).expect("hpexpire");
    let _: () = q(&mut c, &["RENAME", "r", "r2"]).expect("rename");
    let _: i64 = q(&mut c, &["COPY", "r2", "r3"]).expect("copy");
    assert!(eventually(3.0, || int(&mut c, &["EXISTS", "r2", "r3"]) == 0));
}

#[test]
fn writes_and_deadlines() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    let _: i64 = q(&mut c, &["HSET", "h", "a", "1", "n", "5", "f", "1.5"]).expect("hset");
    let _: Vec<i64> = q(
        &mut c,
        &["HEXPIRE", "h", "100", "FIELDS", "3", "a", "n", "f"],
    )
    .expect("hexpire");
    // HSET overwriting a field removes its deadline; HINCRBY/HINCRBYFLOAT keep it.
    let _: i64 = q(&mut c, &["HSET", "h", "a", "2"]).expect("hset");
    assert_eq!(int(&mut c, &["HINCRBY", "h", "n", "1"]), 6);
    let _: String = q(&mut c, &["HINCRBYFLOAT", "h", "f", "1"]).expect("hincrbyfloat");
    assert_eq!(
        ints(&mut c, &["HTTL", "h", "FIELDS", "3", "a", "n", "f"]),
        vec![-1, 100, 100]
    );
    // HSETNX on an existing field changes nothing; HDEL drops the deadline with the field.
    assert_eq!(int(&mut c, &["HSETNX", "h", "n", "x"]), 0);
    assert_eq!(ints(&mut c, &["HTTL", "h", "FIELDS", "1", "n"]), vec![100]);
    assert_eq!(int(&mut c, &["HDEL", "h", "n"]), 1);
    let _: i64 = q(&mut c, &["HSET", "h", "n", "1"]).expect("hset");
    assert_eq!(ints(&mut c, &["HTTL", "h", "FIELDS", "1", "n"]), vec![-1]);
    // RENAME and COPY carry the deadlines.
    let _: () = q(&mut c, &["RENAME", "h", "h2"]).expect("rename");
    assert_eq!(
        ints(&mut c, &["HTTL", "h2", "FIELDS", "2", "f", "a"]),
        vec![100, -1]
    );
    assert_eq!(int(&mut c, &["COPY", "h2", "h3"]), 1);
    assert_eq!(ints(&mut c, &["HTTL", "h3", "FIELDS", "1", "f"]), vec![100]);
    // DUMP/RESTORE carry them (Redis 7.4's RDB_TYPE_HASH_METADATA).
    let payload: Vec<u8> = q(&mut c, &["DUMP", "h3"]).expect("dump");
    let mut cmd = redis::cmd("RESTORE");
    cmd.arg("h4").arg(0).arg(payload);
    let _: () = cmd.query(&mut c).expect("restore");
    assert_eq!(
        ints(&mut c, &["HEXPIRETIME", "h4", "FIELDS", "2", "f", "a"]),
        ints(&mut c, &["HEXPIRETIME", "h3", "FIELDS", "2", "f", "a"])
    );
    assert_eq!(
        sorted(strs(&mut c, &["HGETALL", "h4"])),
        sorted(strs(&mut c, &["HGETALL", "h3"]))
    );
    // Growing past the listpack limits keeps the deadlines in the hashtable.
    let long = "x".repeat(100);
    let _: i64 = q(&mut c, &["HSET", "h3", "long", &long]).expect("hset");
    let enc: String = q(&mut c, &["OBJECT", "ENCODING", "h3"]).expect("encoding");
    assert_eq!(enc, "hashtable");
    assert_eq!(
        ints(&mut c, &["HTTL", "h3", "FIELDS", "2", "f", "long"]),
        vec![100, -1]
    );
}

#[test]
fn memory_is_accounted() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    let mut args = vec!["HSET".to_string(), "plain".to_string()];
    for i in 0..50 {
        args.push(format!("field{i}"));
        args.push(format!("value{i}"));
    }
    let refs: Vec<&str> = args.iter().map(|a| a.as_str()).collect();
    let _: i64 = q(&mut c, &refs).expect("hset");
    let _: i64 = q(&mut c, &["COPY", "plain", "ttl"]).expect("copy");
    let mut ex = vec![
        "HEXPIRE".to_string(),
        "ttl".into(),
        "1000".into(),
        "FIELDS".into(),
        "50".into(),
    ];
    ex.extend((0..50).map(|i| format!("field{i}")));
    let refs: Vec<&str> = ex.iter().map(|a| a.as_str()).collect();
    let _: Vec<i64> = q(&mut c, &refs).expect("hexpire");
    let plain = int(&mut c, &["MEMORY", "USAGE", "plain"]);
    let ttl = int(&mut c, &["MEMORY", "USAGE", "ttl"]);
    // One 8-byte deadline per field plus the box.
    assert!(ttl >= plain + 50 * 8, "plain {plain} ttl {ttl}");
    assert!(ttl < plain + 50 * 8 + 200, "plain {plain} ttl {ttl}");
    // used_memory follows a large hash with deadlines as it is purged away.
    let used = |c: &mut redis::Connection| -> i64 {
        support::info_value(c, "memory", "used_memory")
            .and_then(|v| v.parse().ok())
            .expect("used_memory")
    };
    let mut args = vec!["HSET".to_string(), "big".to_string()];
    for i in 0..3000 {
        args.push(format!("field{i}"));
        args.push(format!("value{i}"));
    }
    let refs: Vec<&str> = args.iter().map(|a| a.as_str()).collect();
    let _: i64 = q(&mut c, &refs).expect("hset");
    let mut ex = vec![
        "HPEXPIRE".to_string(),
        "big".into(),
        "300".into(),
        "FIELDS".into(),
        "3000".into(),
    ];
    ex.extend((0..3000).map(|i| format!("field{i}")));
    let refs: Vec<&str> = ex.iter().map(|a| a.as_str()).collect();
    let _: Vec<i64> = q(&mut c, &refs).expect("hpexpire");
    let big = int(&mut c, &["MEMORY", "USAGE", "big"]);
    assert!(big > 3000 * (16 + 8 + 8), "{big}");
    let before = used(&mut c);
    assert!(eventually(3.0, || int(&mut c, &["EXISTS", "big"]) == 0));
    let after = used(&mut c);
    assert!(
        before - after > big / 2,
        "before {before} after {after} big {big}"
    );
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tidecache-hfe-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

#[test]
fn deadlines_survive_restarts_and_rewrites() {
    let dir = temp_dir("journal");
    let start = || {
        TestServer::start(&[
            "--dir",
            dir.to_str().expect("utf-8"),
            "--appendonly",
            "yes",
            "--appendfsync",
            "always",
        ])
    };
    let s = start();
    let mut c = s.conn();
    let _: i64 = q(&mut c, &["HSET", "h", "a", "1", "b", "2", "c", "3"]).expect("hset");
    let _: Vec<i64> = q(&mut c, &["HEXPIRE", "h", "1000", "FIELDS", "1", "a"]).expect("hexpire");
    let _: Vec<i64> = q(&mut c, &["HPEXPIRE", "h", "300", "FIELDS", "1", "b"]).expect("hpexpire");
    let at_a = ints(&mut c, &["HPEXPIRETIME", "h", "FIELDS", "1", "a"])[0];
    drop(c);
    drop(s);
    std::thread::sleep(Duration::from_millis(400));
    // The record is absolute: after a restart `a` keeps its date and `b` is gone.
    let s = start();
    let mut c = s.conn();
    assert_eq!(
        ints(&mut c, &["HPEXPIRETIME", "h", "FIELDS", "2", "a", "c"]),
        vec![at_a, -1]
    );
    assert_eq!(sorted(strs(&mut c, &["HKEYS", "h"])), vec!["a", "c"]);
    // The rewritten base writes the deadlines after the hash.
    let _: Value = q(&mut c, &["BGREWRITEAOF"]).expect("bgrewriteaof");
    assert!(eventually(10.0, || {
        support::info_value(&mut c, "persistence", "aof_rewrite_in_progress").as_deref()
            == Some("0")
            && support::info_value(&mut c, "persistence", "aof_rewrite_scheduled").as_deref()
                != Some("1")
    }));
    std::thread::sleep(Duration::from_millis(200));
    drop(c);
    drop(s);
    let s = start();
    let mut c = s.conn();
    assert_eq!(
        ints(&mut c, &["HPEXPIRETIME", "h", "FIELDS", "2", "a", "c"]),
        vec![at_a, -1]
    );
    drop(c);
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn hscan_novalues_and_xread_plus() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    let _: i64 = q(&mut c, &["HSET", "h", "a", "1", "b", "2"]).expect("hset");
    let (cur, items): (String, Vec<String>) =
        q(&mut c, &["HSCAN", "h", "0", "NOVALUES"]).expect("hscan");
    assert_eq!(
        (cur.as_str(), items),
        ("0", vec!["a".to_string(), "b".to_string()])
    );
    let (_, items): (String, Vec<String>) = q(
        &mut c,
        &["HSCAN", "h", "0", "novalues", "MATCH", "b*", "COUNT", "5"],
    )
    .expect("hscan");
    assert_eq!(items, vec!["b"]);
    // MATCH takes the next word even when it reads NOVALUES.
    let (_, items): (String, Vec<String>) =
        q(&mut c, &["HSCAN", "h", "0", "MATCH", "NOVALUES"]).expect("hscan");
    assert!(items.is_empty());
    assert!(err_text(q::<Value>(&mut c, &["HSCAN", "h", "0", "VALUES"])).contains("syntax"));
    // XREAD +: the last entry of each stream.
    let _: String = q(&mut c, &["XADD", "s1", "1-1", "f", "1"]).expect("xadd");
    let _: String = q(&mut c, &["XADD", "s1", "2-1", "f", "2"]).expect("xadd");
    let _: String = q(&mut c, &["XADD", "s2", "5-0", "g", "3"]).expect("xadd");
    let r: Value = q(
        &mut c,
        &["XREAD", "STREAMS", "s1", "s2", "missing", "+", "+", "+"],
    )
    .expect("xread");
    let text = format!("{r:?}");
    assert!(text.contains("2-1") && text.contains("5-0"), "{text}");
    assert!(!text.contains("1-1") && !text.contains("missing"), "{text}");
    let r: Value = q(&mut c, &["XREAD", "COUNT", "10", "STREAMS", "s1", "+"]).expect("xread");
    assert!(!format!("{r:?}").contains("1-1"));
    let _: String = q(&mut c, &["XGROUP", "CREATE", "s1", "g", "0"]).expect("xgroup");
    let e = err_text(q::<Value>(
        &mut c,
        &["XREADGROUP", "GROUP", "g", "c", "STREAMS", "s1", "+"],
    ));
    assert!(
        e.starts_with("ERR The + ID is meaningless in the context of XREADGROUP"),
        "{e}"
    );
}
