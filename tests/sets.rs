//! Set commands through the `redis` crate (and a raw connection for RESP3 shapes).

mod support;

use std::collections::HashSet;
use std::time::Duration;
use support::{err_text, int, q, resp, strs, TestServer};

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

fn sorted(c: &mut redis::Connection, args: &[&str]) -> Vec<String> {
    let mut v = strs(c, args);
    v.sort();
    v
}

fn encoding(c: &mut redis::Connection, key: &str) -> String {
    q(c, &["OBJECT", "ENCODING", key]).unwrap()
}

fn exists(c: &mut redis::Connection, key: &str) -> bool {
    int(c, &["EXISTS", key]) == 1
}

fn config_set(c: &mut redis::Connection, name: &str, value: &str) {
    let _: () = q(c, &["CONFIG", "SET", name, value]).unwrap();
}

#[test]
fn add_remove_and_membership() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    assert_eq!(int(&mut c, &["SADD", "s", "a", "b", "c", "a"]), 3);
    assert_eq!(int(&mut c, &["SADD", "s", "A", "a", "b", "c", "B"]), 2);
    assert_eq!(
        sorted(&mut c, &["SMEMBERS", "s"]),
        ["A", "B", "a", "b", "c"]
    );
    assert_eq!(int(&mut c, &["SCARD", "s"]), 5);
    assert_eq!(int(&mut c, &["SISMEMBER", "s", "a"]), 1);
    assert_eq!(int(&mut c, &["SISMEMBER", "s", "x"]), 0);
    assert_eq!(int(&mut c, &["SISMEMBER", "nokey", "x"]), 0);
    let v: Vec<i64> = q(&mut c, &["SMISMEMBER", "s", "a", "x", "B"]).unwrap();
    assert_eq!(v, [1, 0, 1]);
    let v: Vec<i64> = q(&mut c, &["SMISMEMBER", "nokey", "a", "b"]).unwrap();
    assert_eq!(v, [0, 0]);
    assert_eq!(int(&mut c, &["SCARD", "nokey"]), 0);
    assert!(strs(&mut c, &["SMEMBERS", "nokey"]).is_empty());
    assert_eq!(int(&mut c, &["SREM", "s", "x", "y"]), 0);
    assert_eq!(int(&mut c, &["SREM", "s", "A", "B", "x"]), 2);
    assert_eq!(int(&mut c, &["SREM", "nokey", "a"]), 0);
    // Removing the last members deletes the key.
    assert_eq!(int(&mut c, &["SREM", "s", "a", "b", "c", "d", "e"]), 3);
    assert!(!exists(&mut c, "s"));
    assert_eq!(
        err_text(q::<i64>(&mut c, &["SMISMEMBER", "s"])),
        "ERR wrong number of arguments for 'smismember' command"
    );
    assert_eq!(
        err_text(q::<i64>(&mut c, &["SADD", "s"])),
        "ERR wrong number of arguments for 'sadd' command"
    );
    // Integers, big integers and binary members.
    assert_eq!(
        int(
            &mut c,
            &["SADD", "n", "213244124402402314402033402", "-5", "0"]
        ),
        3
    );
    assert_eq!(
        int(&mut c, &["SISMEMBER", "n", "213244124402402314402033402"]),
        1
    );
    assert_eq!(int(&mut c, &["SISMEMBER", "n", "-05"]), 0);
    let bin: Vec<u8> = vec![0, 255, b'\r', b'\n'];
    let n: i64 = redis::cmd("SADD").arg("b").arg(&bin).query(&mut c).unwrap();
    assert_eq!(n, 1);
    let got: Vec<Vec<u8>> = redis::cmd("SMEMBERS").arg("b").query(&mut c).unwrap();
    assert_eq!(got, [bin]);
}

#[test]
fn wrong_type_everywhere() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    let _: () = q(&mut c, &["SET", "str", "x"]).unwrap();
    int(&mut c, &["SADD", "set", "a"]);
    for cmd in [
        &["SADD", "str", "a"][..],
        &["SREM", "str", "a"],
        &["SMEMBERS", "str"],
        &["SISMEMBER", "str", "a"],
        &["SMISMEMBER", "str", "a"],
        &["SCARD", "str"],
        &["SPOP", "str"],
        &["SPOP", "str", "2"],
        &["SRANDMEMBER", "str"],
        &["SRANDMEMBER", "str", "2"],
        &["SMOVE", "str", "set", "a"],
        &["SMOVE", "set", "str", "a"],
        &["SINTER", "set", "str"],
        &["SINTER", "nokey", "str"],
        &["SINTERCARD", "2", "set", "str"],
        &["SUNION", "str", "set"],
        &["SDIFF", "set", "str"],
        &["SDIFF", "nokey", "str"],
        &["SINTERSTORE", "d", "set", "str"],
        &["SUNIONSTORE", "d", "str"],
        &["SDIFFSTORE", "d", "set", "str"],
        &["SSCAN", "str", "0"],
    ] {
        assert_eq!(
            err_text(q::<redis::Value>(&mut c, cmd)),
            WRONGTYPE,
            "{cmd:?}"
        );
    }
    // Nothing changed: the string and the set are intact, no destination was made.
    assert_eq!(q::<String>(&mut c, &["GET", "str"]).unwrap(), "x");
    assert_eq!(strs(&mut c, &["SMEMBERS", "set"]), ["a"]);
    assert!(!exists(&mut c, "d"));
    // A failing STORE leaves an existing destination alone.
    int(&mut c, &["SADD", "d", "keep"]);
    assert_eq!(
        err_text(q::<i64>(&mut c, &["SUNIONSTORE", "d", "set", "str"])),
        WRONGTYPE
    );
    assert_eq!(strs(&mut c, &["SMEMBERS", "d"]), ["keep"]);
    // SMOVE from a missing key is 0 before any type check, as in Redis.
    assert_eq!(int(&mut c, &["SMOVE", "nokey", "str", "a"]), 0);
}

#[test]
fn encodings_follow_the_limits() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    int(&mut c, &["SADD", "i", "3", "1", "2"]);
    assert_eq!(encoding(&mut c, "i"), "intset");
    // Intsets reply in ascending order.
    assert_eq!(strs(&mut c, &["SMEMBERS", "i"]), ["1", "2", "3"]);
    int(&mut c, &["SADD", "i", "a"]);
    assert_eq!(encoding(&mut c, "i"), "listpack");
    // Never back down.
    int(&mut c, &["SREM", "i", "a"]);
    assert_eq!(encoding(&mut c, "i"), "listpack");
    int(&mut c, &["SADD", "s", "foo"]);
    assert_eq!(encoding(&mut c, "s"), "listpack");
    let long = "x".repeat(65);
    int(&mut c, &["SADD", "s", &long]);
    assert_eq!(encoding(&mut c, "s"), "hashtable");
    assert_eq!(int(&mut c, &["SISMEMBER", "s", &long]), 1);
    int(&mut c, &["SADD", "big", "213244124402402314402033402"]);
    assert_eq!(encoding(&mut c, "big"), "listpack");

    // set-max-intset-entries: past it, an intset becomes a hashtable.
    config_set(&mut c, "set-max-intset-entries", "4");
    int(&mut c, &["SADD", "n", "1", "2", "3", "4"]);
    assert_eq!(encoding(&mut c, "n"), "intset");
    int(&mut c, &["SADD", "n", "5"]);
    assert_eq!(encoding(&mut c, "n"), "hashtable");
    assert_eq!(
        sorted(&mut c, &["SMEMBERS", "n"]),
        ["1", "2", "3", "4", "5"]
    );
    // A new key takes the encoding Redis 7.2 picks from the argument count: more integers
    // than an intset holds, few enough for a listpack.
    int(&mut c, &["SADD", "n2", "1", "2", "3", "4", "5", "6"]);
    assert_eq!(encoding(&mut c, "n2"), "listpack");
    int(&mut c, &["SADD", "n2", "7"]);
    assert_eq!(encoding(&mut c, "n2"), "listpack");
    // SMOVE creates its destination for one member.
    config_set(&mut c, "set-max-intset-entries", "0");
    assert_eq!(int(&mut c, &["SMOVE", "n2", "n3", "7"]), 1);
    assert_eq!(encoding(&mut c, "n3"), "listpack");
    config_set(&mut c, "set-max-intset-entries", "512");
    // An existing packed set that could not hold as many members as SADD names converts
    // first, even if they turn out to be duplicates.
    int(&mut c, &["SADD", "dup", "a"]);
    let dups = vec!["a"; 129];
    let mut cmd = redis::cmd("SADD");
    cmd.arg("dup").arg(&dups);
    assert_eq!(cmd.query::<i64>(&mut c).unwrap(), 0);
    assert_eq!(encoding(&mut c, "dup"), "hashtable");
    let many: Vec<String> = (0..512).map(|i| i.to_string()).collect();
    let mut cmd = redis::cmd("SADD");
    cmd.arg("m").arg(&many);
    let _: i64 = cmd.query(&mut c).unwrap();
    assert_eq!(encoding(&mut c, "m"), "intset");
    int(&mut c, &["SADD", "m", "512"]);
    assert_eq!(encoding(&mut c, "m"), "hashtable");
    assert_eq!(int(&mut c, &["SCARD", "m"]), 513);

    // set-max-listpack-entries and -value.
    config_set(&mut c, "set-max-listpack-entries", "3");
    int(&mut c, &["SADD", "l", "a", "b", "c"]);
    assert_eq!(encoding(&mut c, "l"), "listpack");
    int(&mut c, &["SADD", "l", "d"]);
    assert_eq!(encoding(&mut c, "l"), "hashtable");
    // An intset meeting a string with too many members for a listpack: a hashtable.
    int(&mut c, &["SADD", "il", "1", "2", "3"]);
    int(&mut c, &["SADD", "il", "x"]);
    assert_eq!(encoding(&mut c, "il"), "hashtable");
    config_set(&mut c, "set-max-listpack-entries", "128");
    config_set(&mut c, "set-max-listpack-value", "4");
    int(&mut c, &["SADD", "v", "abcd"]);
    assert_eq!(encoding(&mut c, "v"), "listpack");
    int(&mut c, &["SADD", "v", "abcde"]);
    assert_eq!(encoding(&mut c, "v"), "hashtable");
    // An intset whose widest member is longer than the value limit: a hashtable.
    int(&mut c, &["SADD", "w", "123456"]);
    int(&mut c, &["SADD", "w", "a"]);
    assert_eq!(encoding(&mut c, "w"), "hashtable");
    config_set(&mut c, "set-max-listpack-value", "64");

    // STORE results are built as Redis builds them (starting from an intset).
    int(&mut c, &["SADD", "h1", "1", "2", "3", "x"]);
    int(&mut c, &["SADD", "h2", "1", "2", "y"]);
    assert_eq!(int(&mut c, &["SINTERSTORE", "r", "h1", "h2"]), 2);
    assert_eq!(encoding(&mut c, "r"), "intset");
    assert_eq!(int(&mut c, &["SUNIONSTORE", "r", "h1", "h2"]), 5);
    assert_eq!(encoding(&mut c, "r"), "listpack");
    assert_eq!(int(&mut c, &["SDIFFSTORE", "r", "h1", "h2"]), 2);
    assert_eq!(sorted(&mut c, &["SMEMBERS", "r"]), ["3", "x"]);
}

#[test]
fn spop_and_srandmember() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    for (key, members) in [
        ("ints", (1..=20).map(|i| i.to_string()).collect::<Vec<_>>()),
        ("strs", (1..=20).map(|i| format!("m{i}")).collect()),
        ("table", (1..=300).map(|i| format!("m{i}")).collect()),
    ] {
        let mut cmd = redis::cmd("SADD");
        cmd.arg(key).arg(&members);
        let _: i64 = cmd.query(&mut c).unwrap();
        let all: HashSet<String> = members.iter().cloned().collect();
        let n = all.len();
        // SRANDMEMBER: distinct with a positive count, repeats with a negative one.
        for k in [1, 2, n / 2, n - 1, n, n + 10] {
            let got = strs(&mut c, &["SRANDMEMBER", key, &k.to_string()]);
            assert_eq!(got.len(), k.min(n), "{key} {k}");
            let uniq: HashSet<String> = got.iter().cloned().collect();
            assert_eq!(uniq.len(), got.len(), "{key} {k}: repeated members");
            assert!(uniq.is_subset(&all));
        }
        let got = strs(&mut c, &["SRANDMEMBER", key, "-1000"]);
        assert_eq!(got.len(), 1000);
        let uniq: HashSet<String> = got.iter().cloned().collect();
        assert!(uniq.is_subset(&all));
        assert!(uniq.len() > n / 2, "{key}: too few distinct members");
        let one: String = q(&mut c, &["SRANDMEMBER", key]).unwrap();
        assert!(all.contains(&one));
        assert!(strs(&mut c, &["SRANDMEMBER", key, "0"]).is_empty());
        assert_eq!(int(&mut c, &["SCARD", key]), n as i64);
        // SPOP: a member at a time, then counts, until the set is gone.
        let mut popped: Vec<String> = vec![q(&mut c, &["SPOP", key]).unwrap()];
        popped.extend(strs(&mut c, &["SPOP", key, "1"]));
        popped.extend(strs(&mut c, &["SPOP", key, "0"]));
        popped.extend(strs(&mut c, &["SPOP", key, "5"]));
        assert_eq!(popped.len(), 7);
        assert_eq!(int(&mut c, &["SCARD", key]), n as i64 - 7);
        popped.extend(strs(&mut c, &["SPOP", key, &(n - 9).to_string()]));
        assert_eq!(int(&mut c, &["SCARD", key]), 2);
        popped.extend(strs(&mut c, &["SPOP", key, "100"]));
        assert!(!exists(&mut c, key));
        let uniq: HashSet<String> = popped.iter().cloned().collect();
        assert_eq!(uniq, all, "{key}");
        assert_eq!(popped.len(), n);
    }
    // Missing keys and bad counts.
    assert_eq!(
        q::<Option<String>>(&mut c, &["SPOP", "nokey"]).unwrap(),
        None
    );
    assert!(strs(&mut c, &["SPOP", "nokey", "3"]).is_empty());
    assert_eq!(
        q::<Option<String>>(&mut c, &["SRANDMEMBER", "nokey"]).unwrap(),
        None
    );
    assert!(strs(&mut c, &["SRANDMEMBER", "nokey", "3"]).is_empty());
    int(&mut c, &["SADD", "s", "a"]);
    assert_eq!(
        err_text(q::<redis::Value>(&mut c, &["SPOP", "s", "-1"])),
        "ERR value is out of range, must be positive"
    );
    assert_eq!(
        err_text(q::<redis::Value>(&mut c, &["SPOP", "s", "x"])),
        "ERR value is out of range, must be positive"
    );
    assert_eq!(
        err_text(q::<redis::Value>(&mut c, &["SPOP", "s", "1", "2"])),
        "ERR syntax error"
    );
    assert_eq!(
        err_text(q::<redis::Value>(&mut c, &["SRANDMEMBER", "s", "1", "2"])),
        "ERR syntax error"
    );
    assert_eq!(
        err_text(q::<redis::Value>(
            &mut c,
            &["SRANDMEMBER", "s", "-9223372036854775808"]
        )),
        "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807"
    );
    assert_eq!(strs(&mut c, &["SRANDMEMBER", "s", "-3"]), ["a", "a", "a"]);
}

#[test]
fn smove_cases() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    int(&mut c, &["SADD", "s1", "1", "a", "b"]);
    int(&mut c, &["SADD", "s2", "2", "3", "4"]);
    assert_eq!(int(&mut c, &["SMOVE", "s1", "s2", "1"]), 1);
    assert_eq!(encoding(&mut c, "s2"), "intset");
    assert_eq!(int(&mut c, &["SMOVE", "s1", "s2", "a"]), 1);
    assert_eq!(encoding(&mut c, "s2"), "listpack");
    assert_eq!(sorted(&mut c, &["SMEMBERS", "s1"]), ["b"]);
    assert_eq!(
        sorted(&mut c, &["SMEMBERS", "s2"]),
        ["1", "2", "3", "4", "a"]
    );
    assert_eq!(int(&mut c, &["SMOVE", "s1", "s2", "nope"]), 0);
    assert_eq!(int(&mut c, &["SMOVE", "nokey", "s2", "b"]), 0);
    // Same source and destination: membership only.
    assert_eq!(int(&mut c, &["SMOVE", "s2", "s2", "a"]), 1);
    assert_eq!(int(&mut c, &["SMOVE", "s2", "s2", "z"]), 0);
    assert_eq!(int(&mut c, &["SCARD", "s2"]), 5);
    // Already in the destination: still removed from the source, which is then deleted.
    int(&mut c, &["SADD", "s2", "b"]);
    assert_eq!(int(&mut c, &["SMOVE", "s1", "s2", "b"]), 1);
    assert!(!exists(&mut c, "s1"));
    // To a new key.
    assert_eq!(int(&mut c, &["SMOVE", "s2", "s3", "2"]), 1);
    assert_eq!(strs(&mut c, &["SMEMBERS", "s3"]), ["2"]);
    assert_eq!(encoding(&mut c, "s3"), "intset");
}

#[test]
fn algebra_and_store() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    for i in 0..200 {
        int(&mut c, &["SADD", "set1", &i.to_string()]);
        int(&mut c, &["SADD", "set2", &(i + 195).to_string()]);
    }
    for i in [199, 195, 1000, 2000] {
        int(&mut c, &["SADD", "set3", &i.to_string()]);
    }
    for i in 5..200 {
        int(&mut c, &["SADD", "set4", &i.to_string()]);
    }
    int(&mut c, &["SADD", "set5", "0"]);
    assert_eq!(
        strs(&mut c, &["SINTER", "set1", "set2"]),
        ["195", "196", "197", "198", "199"]
    );
    assert_eq!(
        strs(&mut c, &["SINTER", "set1", "set2", "set3"]),
        ["195", "199"]
    );
    assert!(strs(&mut c, &["SINTER", "set1", "nokey"]).is_empty());
    assert_eq!(int(&mut c, &["SINTERCARD", "2", "set1", "set2"]), 5);
    assert_eq!(
        int(&mut c, &["SINTERCARD", "2", "set1", "set2", "LIMIT", "3"]),
        3
    );
    assert_eq!(
        int(&mut c, &["SINTERCARD", "2", "set1", "set2", "limit", "0"]),
        5
    );
    assert_eq!(int(&mut c, &["SINTERCARD", "1", "nokey"]), 0);
    // Larger than one chunk of the intersection's walk, with and without a limit.
    let big: Vec<String> = (0..5000).map(|i| format!("b{i}")).collect();
    let mut cmd = redis::cmd("SADD");
    cmd.arg("big1").arg(&big);
    let _: i64 = cmd.query(&mut c).unwrap();
    let mut cmd = redis::cmd("SADD");
    cmd.arg("big2").arg(&big[1000..]);
    let _: i64 = cmd.query(&mut c).unwrap();
    assert_eq!(int(&mut c, &["SINTERCARD", "2", "big1", "big2"]), 4000);
    assert_eq!(
        int(
            &mut c,
            &["SINTERCARD", "2", "big1", "big2", "LIMIT", "2500"]
        ),
        2500
    );
    assert_eq!(
        int(
            &mut c,
            &["SINTERCARD", "2", "big1", "big2", "LIMIT", "9999"]
        ),
        4000
    );
    assert_eq!(strs(&mut c, &["SINTER", "big2", "big1"]).len(), 4000);
    assert_eq!(int(&mut c, &["SINTERSTORE", "bigr", "big2", "big1"]), 4000);
    assert_eq!(
        strs(&mut c, &["SDIFF", "set1", "set4"]),
        ["0", "1", "2", "3", "4"]
    );
    assert_eq!(
        strs(&mut c, &["SDIFF", "set1", "set4", "set5"]),
        ["1", "2", "3", "4"]
    );
    assert!(strs(&mut c, &["SDIFF", "set1", "set1"]).is_empty());
    assert!(strs(&mut c, &["SDIFF", "nokey", "set1"]).is_empty());
    assert_eq!(strs(&mut c, &["SUNION", "set1", "set2"]).len(), 395);
    assert_eq!(strs(&mut c, &["SUNION", "nokey", "set5"]), ["0"]);
    assert_eq!(strs(&mut c, &["SINTER", "set1", "set1", "set1"]).len(), 200);

    // Mixed encodings.
    int(&mut c, &["SADD", "a", "x", "y", "z", "1"]);
    int(&mut c, &["SADD", "b", "y", "z", "w", "1"]);
    assert_eq!(sorted(&mut c, &["SINTER", "a", "b"]), ["1", "y", "z"]);
    assert_eq!(sorted(&mut c, &["SDIFF", "a", "b"]), ["x"]);
    assert_eq!(
        sorted(&mut c, &["SUNION", "a", "b"]),
        ["1", "w", "x", "y", "z"]
    );

    // STORE overwrites any type, clears the TTL, deletes on an empty result.
    let _: () = q(&mut c, &["SET", "dst", "str"]).unwrap();
    let _: i64 = q(&mut c, &["EXPIRE", "dst", "100"]).unwrap();
    assert_eq!(int(&mut c, &["SINTERSTORE", "dst", "a", "b"]), 3);
    assert_eq!(sorted(&mut c, &["SMEMBERS", "dst"]), ["1", "y", "z"]);
    assert_eq!(int(&mut c, &["TTL", "dst"]), -1);
    assert_eq!(int(&mut c, &["SUNIONSTORE", "dst", "a", "b"]), 5);
    assert_eq!(int(&mut c, &["SDIFFSTORE", "dst", "a", "b"]), 1);
    assert_eq!(strs(&mut c, &["SMEMBERS", "dst"]), ["x"]);
    assert_eq!(int(&mut c, &["SINTERSTORE", "dst", "a", "nokey"]), 0);
    assert!(!exists(&mut c, "dst"));
    let _: () = q(&mut c, &["SET", "dst", "str"]).unwrap();
    assert_eq!(int(&mut c, &["SUNIONSTORE", "dst", "nokey1", "nokey2"]), 0);
    assert!(!exists(&mut c, "dst"));
    int(&mut c, &["SADD", "dst", "q"]);
    assert_eq!(int(&mut c, &["SDIFFSTORE", "dst", "a", "a"]), 0);
    assert!(!exists(&mut c, "dst"));
    // The destination may be one of the sources.
    assert_eq!(int(&mut c, &["SUNIONSTORE", "a", "a", "b"]), 5);
    assert_eq!(
        sorted(&mut c, &["SMEMBERS", "a"]),
        ["1", "w", "x", "y", "z"]
    );
    assert_eq!(int(&mut c, &["SINTERSTORE", "a", "a", "b"]), 4);

    // SINTERCARD argument errors, in Redis's order.
    for (args, e) in [
        (
            &["SINTERCARD", "0", "a"][..],
            "ERR numkeys should be greater than 0",
        ),
        (
            &["SINTERCARD", "x", "a"],
            "ERR numkeys should be greater than 0",
        ),
        (
            &["SINTERCARD", "2", "a"],
            "ERR Number of keys can't be greater than number of args",
        ),
        (&["SINTERCARD", "1", "a", "b"], "ERR syntax error"),
        (&["SINTERCARD", "1", "a", "LIMIT"], "ERR syntax error"),
        (
            &["SINTERCARD", "1", "a", "LIMIT", "-1"],
            "ERR LIMIT can't be negative",
        ),
        (
            &["SINTERCARD", "1", "a", "LIMIT", "x"],
            "ERR LIMIT can't be negative",
        ),
        (
            &["SINTERCARD", "1"],
            "ERR wrong number of arguments for 'sintercard' command",
        ),
    ] {
        assert_eq!(err_text(q::<i64>(&mut c, args)), e, "{args:?}");
    }
    // COMMAND GETKEYS follows the key count.
    assert_eq!(
        strs(
            &mut c,
            &[
                "COMMAND",
                "GETKEYS",
                "SINTERCARD",
                "2",
                "a",
                "b",
                "LIMIT",
                "1"
            ]
        ),
        ["a", "b"]
    );
    assert_eq!(
        strs(&mut c, &["COMMAND", "GETKEYS", "SMOVE", "a", "b", "m"]),
        ["a", "b"]
    );
}

#[test]
fn sscan_walks_everything() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    // Packed: one reply, cursor 0, COUNT ignored.
    int(&mut c, &["SADD", "small", "1", "2", "3", "10"]);
    let (cur, got): (String, Vec<String>) =
        q(&mut c, &["SSCAN", "small", "0", "COUNT", "1"]).unwrap();
    assert_eq!((cur.as_str(), got.len()), ("0", 4));
    let (_, got): (String, Vec<String>) =
        q(&mut c, &["SSCAN", "small", "0", "MATCH", "1*"]).unwrap();
    assert_eq!(got, ["1", "10"]);
    let (cur, got): (String, Vec<String>) = q(&mut c, &["SSCAN", "nokey", "0"]).unwrap();
    assert_eq!((cur.as_str(), got.len()), ("0", 0));
    for (args, e) in [
        (&["SSCAN", "small", "x"][..], "ERR invalid cursor"),
        (&["SSCAN", "small", "0", "COUNT", "0"], "ERR syntax error"),
        (&["SSCAN", "small", "0", "FOO"], "ERR syntax error"),
        (
            &["SSCAN", "small", "0", "COUNT", "x"],
            "ERR value is not an integer or out of range",
        ),
    ] {
        assert_eq!(err_text(q::<redis::Value>(&mut c, args)), e, "{args:?}");
    }
    // A hashtable, walked in steps while members are removed: every member present for
    // the whole walk is returned.
    let members: Vec<String> = (0..1000).map(|i| format!("m{i}")).collect();
    let mut cmd = redis::cmd("SADD");
    cmd.arg("big").arg(&members);
    let _: i64 = cmd.query(&mut c).unwrap();
    assert_eq!(encoding(&mut c, "big"), "hashtable");
    let mut seen = HashSet::new();
    let mut cursor = "0".to_string();
    let mut calls = 0;
    let mut removed = 0;
    loop {
        let (next, got): (String, Vec<String>) =
            q(&mut c, &["SSCAN", "big", &cursor, "COUNT", "20"]).unwrap();
        calls += 1;
        seen.extend(got);
        // Remove odd members as we go.
        for i in removed..removed + 5 {
            int(&mut c, &["SREM", "big", &format!("m{}", i * 2 + 1)]);
        }
        removed += 5;
        if next == "0" {
            break;
        }
        cursor = next;
    }
    assert!(calls > 10, "a hashtable is walked in steps ({calls} calls)");
    for i in (0..1000).step_by(2) {
        assert!(seen.contains(&format!("m{i}")), "m{i} missed");
    }
    let (_, got): (String, Vec<String>) = q(
        &mut c,
        &["SSCAN", "big", "0", "MATCH", "m99*", "COUNT", "100000"],
    )
    .unwrap();
    let mut got = got;
    got.sort();
    let expected: Vec<String> = sorted(&mut c, &["SMEMBERS", "big"])
        .into_iter()
        .filter(|m| m.starts_with("m99"))
        .collect();
    assert!(expected.len() >= 5);
    assert_eq!(got, expected);
}

/// A command and the (event, key) notifications it should publish.
type Step = (
    &'static [&'static str],
    &'static [(&'static str, &'static str)],
);

#[test]
fn keyspace_events() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    config_set(&mut c, "notify-keyspace-events", "KEA");
    let mut sub = s.conn();
    sub.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut ps = sub.as_pubsub();
    ps.psubscribe("__keyevent@0__:*").unwrap();
    let steps: &[Step] = &[
        (&["SADD", "s", "a", "b", "c"], &[("sadd", "s")]),
        (&["SADD", "s", "a"], &[]),
        (&["SREM", "s", "a"], &[("srem", "s")]),
        (&["SREM", "s", "zz"], &[]),
        (&["SMOVE", "s", "t", "b"], &[("srem", "s"), ("sadd", "t")]),
        (&["SADD", "t", "c"], &[("sadd", "t")]),
        (&["SMOVE", "s", "t", "c"], &[("srem", "s"), ("del", "s")]),
        (&["SPOP", "t"], &[("spop", "t")]),
        (&["SPOP", "t", "5"], &[("spop", "t"), ("del", "t")]),
        (&["SADD", "x", "1", "2"], &[("sadd", "x")]),
        (&["SINTERSTORE", "d", "x", "x"], &[("sinterstore", "d")]),
        (&["SUNIONSTORE", "d", "x"], &[("sunionstore", "d")]),
        (&["SDIFFSTORE", "d", "x", "x"], &[("del", "d")]),
        (&["SDIFFSTORE", "d", "x", "x"], &[]),
        (&["SREM", "x", "1", "2"], &[("srem", "x"), ("del", "x")]),
        // A marker, so the test knows nothing else came before it.
        (&["SET", "end", "1"], &[("set", "end")]),
    ];
    let mut expected = Vec::new();
    for (cmd, events) in steps {
        let _: redis::Value = q(&mut c, cmd).unwrap();
        expected.extend(events.iter().map(|(e, k)| (e.to_string(), k.to_string())));
    }
    let mut got = Vec::new();
    while got.last().map(|(e, _): &(String, String)| e.as_str()) != Some("set") {
        let m = ps.get_message().expect("event");
        let event = m
            .get_channel_name()
            .trim_start_matches("__keyevent@0__:")
            .to_string();
        let key: String = m.get_payload().unwrap();
        got.push((event, key));
    }
    assert_eq!(got, expected);
}

#[test]
fn resp3_shapes() {
    let s = TestServer::start(&[]);
    let mut raw = s.raw();
    raw.roundtrip(&resp(&["SADD", "s", "2", "1"]), b":2\r\n");
    raw.roundtrip(&resp(&["SMEMBERS", "s"]), b"*2\r\n$1\r\n1\r\n$1\r\n2\r\n");
    raw.send(&resp(&["HELLO", "3"]));
    raw.read_until(b"modules\r\n*0\r\n");
    raw.roundtrip(&resp(&["SMEMBERS", "s"]), b"~2\r\n$1\r\n1\r\n$1\r\n2\r\n");
    raw.roundtrip(&resp(&["SMEMBERS", "nokey"]), b"~0\r\n");
    raw.roundtrip(
        &resp(&["SINTER", "s", "s"]),
        b"~2\r\n$1\r\n1\r\n$1\r\n2\r\n",
    );
    raw.roundtrip(&resp(&["SUNION", "s"]), b"~2\r\n$1\r\n1\r\n$1\r\n2\r\n");
    raw.roundtrip(
        &resp(&["SDIFF", "s", "nokey"]),
        b"~2\r\n$1\r\n1\r\n$1\r\n2\r\n",
    );
    raw.roundtrip(
        &resp(&["SRANDMEMBER", "s", "5"]),
        b"*2\r\n$1\r\n1\r\n$1\r\n2\r\n",
    );
    raw.roundtrip(&resp(&["SRANDMEMBER", "nokey", "5"]), b"*0\r\n");
    raw.roundtrip(&resp(&["SRANDMEMBER", "nokey"]), b"_\r\n");
    raw.roundtrip(&resp(&["SPOP", "nokey"]), b"_\r\n");
    raw.roundtrip(&resp(&["SPOP", "nokey", "2"]), b"~0\r\n");
    raw.roundtrip(&resp(&["SPOP", "s", "0"]), b"~0\r\n");
    raw.roundtrip(&resp(&["SMISMEMBER", "s", "1", "3"]), b"*2\r\n:1\r\n:0\r\n");
    raw.roundtrip(&resp(&["SPOP", "s", "5"]), b"~2\r\n$1\r\n1\r\n$1\r\n2\r\n");
}

#[test]
fn memory_follows_sets() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    let used = |c: &mut redis::Connection| -> i64 {
        support::info_value(c, "memory", "used_memory_dataset")
            .unwrap()
            .parse()
            .unwrap()
    };
    let before = used(&mut c);
    let members: Vec<String> = (0..5000)
        .map(|i| format!("member-{i:06}-padding"))
        .collect();
    let mut cmd = redis::cmd("SADD");
    cmd.arg("big").arg(&members);
    let _: i64 = cmd.query(&mut c).unwrap();
    let grown = used(&mut c) - before;
    assert!(grown > 5000 * 24, "grew by {grown}");
    let _: i64 = q(&mut c, &["DEL", "big"]).unwrap();
    let after = used(&mut c) - before;
    assert!(
        after < grown / 10,
        "{after} left after DEL (grew by {grown})"
    );
}

/// Redis's scan regression test for issue #4906: most of a hashtable removed in the middle of
/// a scan (the table shrinks) must not hide the members that stay.
#[test]
fn sscan_survives_a_mass_removal() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    for round in 0..20usize {
        let _: i64 = q(&mut c, &["DEL", "set"]).unwrap();
        int(&mut c, &["SADD", "set", "x"]);
        let numele = 101 + (round * 97) % 1000;
        let all: Vec<String> = (0..numele).map(|j| j.to_string()).collect();
        let mut cmd = redis::cmd("SADD");
        cmd.arg("set").arg(&all);
        let _: i64 = cmd.query(&mut c).unwrap();
        let toremove: Vec<String> = (100..numele).map(|j| j.to_string()).collect();
        let mut found = HashSet::new();
        let mut cursor = "0".to_string();
        let mut iteration = 0;
        loop {
            let (next, items): (String, Vec<String>) =
                q(&mut c, &["SSCAN", "set", &cursor]).unwrap();
            found.extend(items);
            iteration += 1;
            if iteration == 1 + round % 5 && !toremove.is_empty() {
                let mut cmd = redis::cmd("SREM");
                cmd.arg("set").arg(&toremove);
                let _: i64 = cmd.query(&mut c).unwrap();
            }
            if next == "0" {
                break;
            }
            cursor = next;
        }
        for j in 0..100 {
            assert!(found.contains(&j.to_string()), "round {round}: {j} missing");
        }
    }
}
