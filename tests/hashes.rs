//! Hash commands through the `redis` crate.

mod support;

use redis::Commands;
use std::collections::{HashMap, HashSet};
use support::{err_text, TestServer};

#[test]
fn hash_commands() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    let n: i64 = redis::cmd("HSET")
        .arg("h")
        .arg("a")
        .arg(1)
        .arg("b")
        .arg(2)
        .query(&mut c)
        .unwrap();
    assert_eq!(n, 2);
    let n: i64 = redis::cmd("HSET")
        .arg("h")
        .arg("a")
        .arg(3)
        .arg("c")
        .arg(4)
        .query(&mut c)
        .unwrap();
    assert_eq!(n, 1);
    let all: HashMap<String, String> = c.hgetall("h").unwrap();
    assert_eq!(all.len(), 3);
    assert_eq!(all["a"], "3");
    let v: Vec<Option<String>> = redis::cmd("HMGET")
        .arg("h")
        .arg("a")
        .arg("x")
        .query(&mut c)
        .unwrap();
    assert_eq!(v, vec![Some("3".into()), None]);
    let mut keys: Vec<String> = c.hkeys("h").unwrap();
    keys.sort();
    assert_eq!(keys, ["a", "b", "c"]);
    let mut vals: Vec<String> = c.hvals("h").unwrap();
    vals.sort();
    assert_eq!(vals, ["2", "3", "4"]);
    let e: bool = c.hexists("h", "b").unwrap();
    assert!(e);
    let n: i64 = redis::cmd("HSTRLEN")
        .arg("h")
        .arg("a")
        .query(&mut c)
        .unwrap();
    assert_eq!(n, 1);
    let n: i64 = redis::cmd("HSETNX")
        .arg("h")
        .arg("a")
        .arg("x")
        .query(&mut c)
        .unwrap();
    assert_eq!(n, 0);
    let f: f64 = c.hincr("h", "fl", 1.25).unwrap();
    assert_eq!(f, 1.25);
    assert_eq!(
        err_text(c.hincr::<_, _, _, i64>("h", "fl", 1)),
        "ERR hash value is not an integer"
    );
    let n: i64 = c.hdel("h", &["a", "b", "c", "fl", "nope"]).unwrap();
    assert_eq!(n, 4);
    let e: bool = c.exists("h").unwrap();
    assert!(!e, "an emptied hash is deleted");
    let _: () = c.set("s", "x").unwrap();
    assert_eq!(
        err_text(c.hget::<_, _, String>("s", "f")),
        "WRONGTYPE Operation against a key holding the wrong kind of value"
    );
}

#[test]
fn hscan_hrandfield_encoding() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    let mut p = redis::pipe();
    for i in 0..200 {
        p.cmd("HSET")
            .arg("big")
            .arg(format!("f{i}"))
            .arg(i)
            .ignore();
    }
    let _: () = p.query(&mut c).unwrap();
    // A hashtable is scanned in batches under a real cursor.
    let mut cursor = "0".to_string();
    let mut items = Vec::new();
    let mut calls = 0;
    loop {
        let (cur, batch): (String, Vec<String>) = redis::cmd("HSCAN")
            .arg("big")
            .arg(&cursor)
            .arg("MATCH")
            .arg("f1*")
            .query(&mut c)
            .unwrap();
        items.extend(batch);
        calls += 1;
        if cur == "0" {
            break;
        }
        cursor = cur;
    }
    assert!(calls > 1, "batches");
    assert_eq!(items.len(), 2 * 111); // f1, f10-f19, f100-f199
    let enc: String = redis::cmd("OBJECT")
        .arg("ENCODING")
        .arg("big")
        .query(&mut c)
        .unwrap();
    assert_eq!(enc, "hashtable");
    let _: () = c.hset("small", "a", "1").unwrap();
    let enc: String = redis::cmd("OBJECT")
        .arg("ENCODING")
        .arg("small")
        .query(&mut c)
        .unwrap();
    assert_eq!(enc, "listpack");
    let fields: Vec<String> = redis::cmd("HRANDFIELD")
        .arg("big")
        .arg(50)
        .query(&mut c)
        .unwrap();
    assert_eq!(fields.iter().collect::<HashSet<_>>().len(), 50, "distinct");
    let fields: Vec<String> = redis::cmd("HRANDFIELD")
        .arg("small")
        .arg(-5)
        .query(&mut c)
        .unwrap();
    assert_eq!(fields, vec!["a"; 5]);
    let pairs: Vec<String> = redis::cmd("HRANDFIELD")
        .arg("small")
        .arg(2)
        .arg("WITHVALUES")
        .query(&mut c)
        .unwrap();
    assert_eq!(pairs, ["a", "1"]);
    let one: String = redis::cmd("HRANDFIELD").arg("small").query(&mut c).unwrap();
    assert_eq!(one, "a");
}

fn encoding(c: &mut redis::Connection, key: &str) -> String {
    redis::cmd("OBJECT")
        .arg("ENCODING")
        .arg(key)
        .query(c)
        .unwrap()
}

#[test]
fn encoding_thresholds_follow_config() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    // Defaults: 128 entries, 64 bytes.
    let _: () = c.hset("h", "f", "x".repeat(64)).unwrap();
    assert_eq!(encoding(&mut c, "h"), "listpack");
    let _: () = c.hset("h", "x".repeat(64), "v").unwrap();
    assert_eq!(encoding(&mut c, "h"), "listpack");
    let _: () = c.hset("h", "g", "x".repeat(65)).unwrap();
    assert_eq!(encoding(&mut c, "h"), "hashtable");
    // Never back, even once the long value is gone.
    let _: () = c.hdel("h", "g").unwrap();
    assert_eq!(encoding(&mut c, "h"), "hashtable");
    let v: String = c.hget("h", "f").unwrap();
    assert_eq!(v, "x".repeat(64));
    // A long field converts too.
    let _: () = c.hset("lf", "x".repeat(65), "1").unwrap();
    assert_eq!(encoding(&mut c, "lf"), "hashtable");

    // CONFIG SET changes the limits live, under both names.
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("hash-max-listpack-entries")
        .arg(4)
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("HSET")
        .arg("e")
        .arg("a")
        .arg(1)
        .arg("b")
        .arg(2)
        .arg("c")
        .arg(3)
        .arg("d")
        .arg(4)
        .query(&mut c)
        .unwrap();
    assert_eq!(encoding(&mut c, "e"), "listpack");
    let _: () = c.hset("e", "e", "5").unwrap();
    assert_eq!(encoding(&mut c, "e"), "hashtable");
    let all: HashMap<String, String> = c.hgetall("e").unwrap();
    assert_eq!(all.len(), 5);
    assert_eq!(all["c"], "3");
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("hash-max-ziplist-value")
        .arg(3)
        .query(&mut c)
        .unwrap();
    let _: () = c.hset("z", "abc", "def").unwrap();
    assert_eq!(encoding(&mut c, "z"), "listpack");
    let _: () = c.hset("z", "abcd", "1").unwrap();
    assert_eq!(encoding(&mut c, "z"), "hashtable");
    // HINCRBYFLOAT writing a value past the limit converts.
    let _: () = c.hset("fl", "n", "1").unwrap();
    let _: f64 = c.hincr("fl", "n", 0.5).unwrap();
    assert_eq!(encoding(&mut c, "fl"), "listpack");
    let _: f64 = c.hincr("fl", "n", 0.25).unwrap();
    assert_eq!(encoding(&mut c, "fl"), "hashtable");
    let v: String = c.hget("fl", "n").unwrap();
    assert_eq!(v, "1.75");
    // HSETNX of a long value on an existing field sets nothing and keeps the encoding;
    // on a new field it converts.
    let _: () = c.hset("nx", "a", "1").unwrap();
    let n: i64 = redis::cmd("HSETNX")
        .arg("nx")
        .arg("a")
        .arg("long")
        .query(&mut c)
        .unwrap();
    assert_eq!(n, 0);
    assert_eq!(encoding(&mut c, "nx"), "listpack");
    let n: i64 = redis::cmd("HSETNX")
        .arg("nx")
        .arg("b")
        .arg("long")
        .query(&mut c)
        .unwrap();
    assert_eq!(n, 1);
    assert_eq!(encoding(&mut c, "nx"), "hashtable");
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("hash-max-listpack-value")
        .arg(0)
        .query(&mut c)
        .unwrap();
    let _: () = c.hset("zero", "a", "1").unwrap();
    assert_eq!(encoding(&mut c, "zero"), "hashtable");
}

#[test]
fn hscan_of_a_hashtable_misses_nothing_under_writes() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    let mut p = redis::pipe();
    for i in 0..1000 {
        p.cmd("HSET")
            .arg("h")
            .arg(format!("k{i}"))
            .arg(format!("v{i}"))
            .ignore();
    }
    let _: () = p.query(&mut c).unwrap();
    assert_eq!(encoding(&mut c, "h"), "hashtable");
    let mut seen: HashMap<String, String> = HashMap::new();
    let mut cursor = "0".to_string();
    let mut round = 0;
    loop {
        let (cur, batch): (String, Vec<String>) = redis::cmd("HSCAN")
            .arg("h")
            .arg(&cursor)
            .arg("COUNT")
            .arg(25)
            .query(&mut c)
            .unwrap();
        assert!(batch.len() <= 2 * 25);
        for pair in batch.chunks(2) {
            seen.insert(pair[0].clone(), pair[1].clone());
        }
        // Delete odd fields (some not returned yet) and add new ones while scanning.
        for i in (round * 10..round * 10 + 10).filter(|i| i % 2 == 1) {
            let _: () = c.hdel("h", format!("k{i}")).unwrap();
        }
        let _: () = c.hset("h", format!("new{round}"), "x").unwrap();
        round += 1;
        if cur == "0" {
            break;
        }
        cursor = cur;
    }
    for i in (0..1000).step_by(2) {
        assert_eq!(seen.get(&format!("k{i}")), Some(&format!("v{i}")), "k{i}");
    }
    // A small hash comes whole, cursor 0, whatever the COUNT.
    let _: () = redis::cmd("HSET")
        .arg("small")
        .arg("a")
        .arg(1)
        .arg("b")
        .arg(2)
        .arg("c")
        .arg(3)
        .query(&mut c)
        .unwrap();
    let (cur, batch): (String, Vec<String>) = redis::cmd("HSCAN")
        .arg("small")
        .arg(0)
        .arg("COUNT")
        .arg(1)
        .query(&mut c)
        .unwrap();
    assert_eq!(cur, "0");
    assert_eq!(batch, ["a", "1", "b", "2", "c", "3"]);
}

#[test]
fn hrandfield_distinct_and_repeated() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    for (key, n) in [("lp", 20), ("ht", 300)] {
        let mut p = redis::pipe();
        for i in 0..n {
            p.cmd("HSET").arg(key).arg(format!("f{i}")).arg(i).ignore();
        }
        let _: () = p.query(&mut c).unwrap();
        for count in [1, 5, n / 2, n - 1, n, n + 10] {
            let pairs: Vec<String> = redis::cmd("HRANDFIELD")
                .arg(key)
                .arg(count)
                .arg("WITHVALUES")
                .query(&mut c)
                .unwrap();
            let want = count.min(n);
            assert_eq!(pairs.len(), 2 * want, "{key} {count}");
            let fields: HashSet<&String> = pairs.iter().step_by(2).collect();
            assert_eq!(fields.len(), want, "{key} {count}: distinct");
            for pair in pairs.chunks(2) {
                assert_eq!(format!("f{}", pair[1]), pair[0]);
            }
        }
        let fields: Vec<String> = redis::cmd("HRANDFIELD")
            .arg(key)
            .arg(-1000)
            .query(&mut c)
            .unwrap();
        assert_eq!(fields.len(), 1000);
        let distinct: HashSet<&String> = fields.iter().collect();
        assert!(distinct.len() > n / 2, "{key}: spread");
        // Each field is reachable by the single form.
        let mut once = HashSet::new();
        for _ in 0..(n * 20) {
            let f: String = redis::cmd("HRANDFIELD").arg(key).query(&mut c).unwrap();
            once.insert(f);
        }
        assert_eq!(once.len(), n, "{key}");
    }
}
