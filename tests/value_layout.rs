//! Hashes and lists held compactly in the key space: a small hash without a box of its own,
//! one past what fits in place (raised listpack limits), a list of one node; every encoding
//! still answers as before and MEMORY USAGE follows what is allocated.

mod support;

use support::{int, q, strs, TestServer};

fn get(c: &mut redis::Connection, args: &[&str]) -> Option<String> {
    q(c, args).unwrap()
}

fn ok(c: &mut redis::Connection, args: &[&str]) {
    let r: String = q(c, args).unwrap();
    assert_eq!(r, "OK");
}

fn usage(c: &mut redis::Connection, key: &str) -> i64 {
    int(c, &["MEMORY", "USAGE", key])
}

#[test]
fn small_hash_lives_in_the_key_entry() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    int(
        &mut c,
        &[
            "HSET",
            "h",
            "userID",
            "123456",
            "accessTime",
            "1700000000123",
        ],
    );
    assert_eq!(strs(&mut c, &["OBJECT", "ENCODING", "h"]), vec!["listpack"]);
    // Entry, table slot and one 48-byte listpack buffer: no box between them.
    let small = usage(&mut c, "h");
    assert!(small <= 112, "MEMORY USAGE of a 2-field hash: {small}");
    // Grows and shrinks in place.
    for i in 0..50 {
        int(&mut c, &["HSET", "h", &format!("f{i}"), &format!("v{i}")]);
    }
    assert_eq!(int(&mut c, &["HLEN", "h"]), 52);
    assert_eq!(int(&mut c, &["HDEL", "h", "f0", "f1", "nope"]), 2);
    assert_eq!(int(&mut c, &["HLEN", "h"]), 50);
    assert_eq!(get(&mut c, &["HGET", "h", "f49"]), Some("v49".into()));
    assert_eq!(get(&mut c, &["HGET", "h", "f0"]), None);
    // A field deadline turns it into listpackex, more fields into a hashtable.
    let set: Vec<i64> = q(&mut c, &["HEXPIRE", "h", "1000", "FIELDS", "1", "f2"]).unwrap();
    assert_eq!(set, vec![1]);
    assert_eq!(
        strs(&mut c, &["OBJECT", "ENCODING", "h"]),
        vec!["listpackex"]
    );
    assert_eq!(get(&mut c, &["HGET", "h", "f2"]), Some("v2".into()));
    for i in 0..200 {
        int(&mut c, &["HSET", "h", &format!("g{i}"), "x"]);
    }
    assert_eq!(
        strs(&mut c, &["OBJECT", "ENCODING", "h"]),
        vec!["hashtable"]
    );
    assert_eq!(int(&mut c, &["HLEN", "h"]), 250);
    assert!(usage(&mut c, "h") > 250 * 16);
}

#[test]
fn listpack_hash_past_the_in_place_limits() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    ok(
        &mut c,
        &["CONFIG", "SET", "hash-max-listpack-entries", "1000"],
    );
    // 254 pairs fit in place; the 255th moves the listpack into a box, still `listpack`.
    for i in 0..600 {
        int(
            &mut c,
            &["HSET", "big", &format!("field:{i}"), &format!("{i}")],
        );
        if i == 253 || i == 254 {
            assert_eq!(
                strs(&mut c, &["OBJECT", "ENCODING", "big"]),
                vec!["listpack"]
            );
            assert_eq!(int(&mut c, &["HLEN", "big"]), i + 1);
        }
    }
    assert_eq!(
        strs(&mut c, &["OBJECT", "ENCODING", "big"]),
        vec!["listpack"]
    );
    assert_eq!(int(&mut c, &["HLEN", "big"]), 600);
    assert_eq!(
        get(&mut c, &["HGET", "big", "field:599"]),
        Some("599".into())
    );
    assert_eq!(int(&mut c, &["HDEL", "big", "field:0", "field:599"]), 2);
    assert_eq!(int(&mut c, &["HLEN", "big"]), 598);
    // A copy (DUMP/RESTORE) and a rename keep it whole.
    let dump: Vec<u8> = redis::cmd("DUMP").arg("big").query(&mut c).unwrap();
    let restored: String = redis::cmd("RESTORE")
        .arg("big2")
        .arg(0)
        .arg(dump)
        .query(&mut c)
        .unwrap();
    assert_eq!(restored, "OK");
    assert_eq!(int(&mut c, &["HLEN", "big2"]), 598);
    assert_eq!(
        get(&mut c, &["HGET", "big2", "field:300"]),
        Some("300".into())
    );
    ok(
        &mut c,
        &["CONFIG", "SET", "hash-max-listpack-entries", "128"],
    );
    int(&mut c, &["HSET", "big", "one", "more"]);
    assert_eq!(
        strs(&mut c, &["OBJECT", "ENCODING", "big"]),
        vec!["hashtable"]
    );
    assert_eq!(int(&mut c, &["HLEN", "big"]), 599);
}

#[test]
fn one_node_list_reserves_one_slot() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    let items: Vec<String> = (0..100).map(|i| format!("element:{i}")).collect();
    let mut push = vec!["RPUSH", "l"];
    push.extend(items.iter().map(String::as_str));
    int(&mut c, &push);
    let one = usage(&mut c, "l");
    // 100 entries of 12 bytes in one node, plus the entry and the list: well under what a
    // four-slot node deque would add.
    assert!(
        one < 1280 + 48 + 64 + 64,
        "MEMORY USAGE of a one-node list: {one}"
    );
    assert_eq!(
        strs(&mut c, &["LRANGE", "l", "0", "2"]),
        vec!["element:0", "element:1", "element:2"]
    );
    // Past one node, the deque grows as before.
    let long: Vec<String> = (0..5000).map(|i| format!("x{i:0>100}")).collect();
    let mut push = vec!["RPUSH", "l"];
    push.extend(long.iter().map(String::as_str));
    int(&mut c, &push);
    assert_eq!(int(&mut c, &["LLEN", "l"]), 5100);
    assert_eq!(
        get(&mut c, &["LINDEX", "l", "-1"]),
        Some(long[4999].clone())
    );
}
