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
    let (cur, items): (String, Vec<String>) = redis::cmd("HSCAN")
        .arg("big")
        .arg(0)
        .arg("MATCH")
        .arg("f1*")
        .query(&mut c)
        .unwrap();
    assert_eq!(cur, "0");
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
