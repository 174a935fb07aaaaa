//! DUMP and RESTORE against redis-server 7: payloads move both ways for every type and
//! encoding, hand-made payloads of the legacy encodings load the same on both, and bad
//! payloads answer errors without changing anything or harming the server.

mod support;

use redis::Connection;
use support::{err_text, int, q, ReferenceRedis, TestServer};
use tidecache::store::rdb::crc64;

fn dump(c: &mut Connection, key: &str) -> Option<Vec<u8>> {
    redis::cmd("DUMP").arg(key).query(c).expect("dump")
}

fn restore(c: &mut Connection, key: &str, ttl: i64, payload: &[u8], opts: &[&str]) -> String {
    let mut cmd = redis::cmd("RESTORE");
    cmd.arg(key).arg(ttl).arg(payload);
    for o in opts {
        cmd.arg(*o);
    }
    match cmd.query::<String>(c) {
        Ok(s) => s,
        Err(e) => match (e.code(), e.detail()) {
            (Some(code), Some(d)) => format!("{code} {d}"),
            _ => e.to_string(),
        },
    }
}

/// Everything a key holds, in a form that does not depend on the encoding's order.
fn contents(c: &mut Connection, key: &str) -> Vec<Vec<u8>> {
    let t: String = q(c, &["TYPE", key]).unwrap();
    let mut out: Vec<Vec<u8>> = vec![t.clone().into_bytes()];
    let bin = |c: &mut Connection, args: &[&str]| -> Vec<Vec<u8>> {
        let mut cmd = redis::cmd(args[0]);
        for a in &args[1..] {
            cmd.arg(*a);
        }
        cmd.query(c).unwrap()
    };
    match t.as_str() {
        "string" => {
            let v: Vec<u8> = redis::cmd("GET").arg(key).query(c).unwrap();
            out.push(v);
        }
        "list" => out.extend(bin(c, &["LRANGE", key, "0", "-1"])),
        "set" => {
            let mut v = bin(c, &["SMEMBERS", key]);
            v.sort();
            out.extend(v);
        }
        "hash" => {
            let flat = bin(c, &["HGETALL", key]);
            let mut pairs: Vec<Vec<u8>> = flat
                .chunks(2)
                .map(|p| [p[0].clone(), b"=".to_vec(), p[1].clone()].concat())
                .collect();
            pairs.sort();
            out.extend(pairs);
        }
        "zset" => out.extend(bin(c, &["ZRANGE", key, "0", "-1", "WITHSCORES"])),
        "none" => {}
        other => panic!("unexpected type {other}"),
    }
    out
}

fn encoding(c: &mut Connection, key: &str) -> String {
    q(c, &["OBJECT", "ENCODING", key]).unwrap()
}

fn cmd(c: &mut Connection, args: &[&str]) {
    let _: redis::Value = q(c, args).unwrap();
}

/// Printable bytes that do not compress.
fn noise(n: usize) -> String {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ((x % 94) as u8 + 33) as char
        })
        .collect()
}

/// Fills `c` with one key per type and encoding; returns the keys.
fn populate(c: &mut Connection) -> Vec<String> {
    let mut keys = Vec::new();
    let mut add = |k: &str| keys.push(k.to_string());
    for (k, v) in [
        ("s:empty", String::new()),
        ("s:short", "bar".into()),
        ("s:int8", "-100".into()),
        ("s:int16", "30000".into()),
        ("s:int32", "-2000000000".into()),
        ("s:int64", "9223372036854775807".into()),
        ("s:lead0", "0123".into()),
        ("s:float", "3.14".into()),
        ("s:random", noise(200)),
        ("s:lzf", "abcabcabc".repeat(100)),
        ("s:big", "z".repeat(70000)),
    ] {
        redis::cmd("SET").arg(k).arg(v).query::<()>(c).unwrap();
        add(k);
    }
    cmd(c, &["SET", "s:bin", "\u{0}\u{1}\r\n"]);
    add("s:bin");
    cmd(c, &["APPEND", "s:raw", "12"]);
    add("s:raw");

    cmd(
        c,
        &[
            "RPUSH",
            "l:small",
            "a",
            "b",
            "1",
            "-5",
            "300",
            "70000",
            "-9000000000",
            "hello",
        ],
    );
    add("l:small");
    for i in 0..3000 {
        let v = format!("element-{i}-{}", "x".repeat(i % 50));
        cmd(c, &["RPUSH", "l:long", &v]);
    }
    add("l:long");
    cmd(
        c,
        &[
            "RPUSH",
            "l:bigvals",
            &"q".repeat(10000),
            &"w".repeat(5000),
            "s",
        ],
    );
    add("l:bigvals");
    let lzf = "abcd".repeat(50);
    cmd(c, &["RPUSH", "l:lzf", &lzf, &lzf, &lzf]);
    add("l:lzf");

    cmd(c, &["SADD", "set:int", "1", "2", "3", "-7", "100"]);
    add("set:int");
    cmd(c, &["SADD", "set:int32", "1", "70000", "-70000"]);
    add("set:int32");
    cmd(c, &["SADD", "set:int64", "1", "9000000000"]);
    add("set:int64");
    cmd(c, &["SADD", "set:str", "a", "b", "c", "10"]);
    add("set:str");
    for i in 0..600 {
        cmd(c, &["SADD", "set:bigint", &i.to_string()]);
        cmd(c, &["SADD", "set:big", &format!("member:{i}")]);
    }
    add("set:bigint");
    add("set:big");

    cmd(c, &["HSET", "h:small", "f1", "v1", "f2", "2", "n", "-300"]);
    add("h:small");
    cmd(c, &["HSET", "h:longval", "f", &"v".repeat(100), "g", "1"]);
    add("h:longval");
    for i in 0..300 {
        cmd(
            c,
            &[
                "HSET",
                "h:big",
                &format!("field:{i}"),
                &format!("value:{i}"),
            ],
        );
    }
    add("h:big");

    cmd(
        c,
        &[
            "ZADD", "z:small", "1", "a", "2.5", "b", "-3", "c", "1e300", "d", "inf", "e",
        ],
    );
    cmd(
        c,
        &["ZADD", "z:small", "-inf", "f", "0.1", "g", "123456789", "h"],
    );
    add("z:small");
    cmd(
        c,
        &["ZADD", "z:longmember", "1", &"m".repeat(100), "2", "q"],
    );
    add("z:longmember");
    cmd(c, &["ZADD", "z:tiny", "1", "a", "2", "b"]);
    add("z:tiny");
    for i in 0..300 {
        cmd(
            c,
            &[
                "ZADD",
                "z:big",
                &format!("{}.25", i * 3),
                &format!("member:{i}"),
            ],
        );
    }
    add("z:big");
    keys
}

#[test]
fn payloads_move_both_ways() {
    let Some(reference) = ReferenceRedis::start() else {
        return;
    };
    let ours = TestServer::start(&[]);
    let mut r = reference.conn();
    let mut t = ours.conn();
    let keys = populate(&mut r);
    let mut identical = Vec::new();
    for k in &keys {
        let want = contents(&mut r, k);
        let from_redis = dump(&mut r, k).expect("redis dump");
        assert_eq!(restore(&mut t, k, 0, &from_redis, &[]), "OK", "{k}");
        assert_eq!(contents(&mut t, k), want, "{k} on tidecache");
        assert_eq!(int(&mut t, &["PTTL", k]), -1);

        let from_us = dump(&mut t, k).expect("tidecache dump");
        let back = format!("{k}:back");
        assert_eq!(
            restore(&mut r, &back, 0, &from_us, &[]),
            "OK",
            "{k} on redis"
        );
        assert_eq!(contents(&mut r, &back), want, "{k} back on redis");
        // Redis's encoding of what we sent matches the original's.
        // (An APPENDed "12" is raw in Redis, but its DUMP is an integer.)
        if k != "s:raw" {
            assert_eq!(encoding(&mut r, &back), encoding(&mut r, k), "{k} encoding");
        }
        if from_us == from_redis {
            identical.push(k.clone());
        }
    }
    // Byte for byte Redis's DUMP (LZF compression included) wherever the order of the
    // elements is not a hash table's.
    let differ: Vec<&String> = keys
        .iter()
        .filter(|k| !(k.starts_with("h:") || *k == "set:str" || k.starts_with("set:big")))
        .filter(|k| !identical.contains(k))
        .collect();
    assert!(differ.is_empty(), "differ from Redis's DUMP: {differ:?}");
}

// ---------------------------------------------------------------------------------------
// Hand-made payloads of the encodings Redis 7.0 reads but no longer writes

fn with_footer(mut body: Vec<u8>, version: u16) -> Vec<u8> {
    body.extend_from_slice(&version.to_le_bytes());
    let crc = crc64(0, &body);
    body.extend_from_slice(&crc.to_le_bytes());
    body
}

fn rdb_len(out: &mut Vec<u8>, n: usize) {
    if n < 64 {
        out.push(n as u8);
    } else if n < 16384 {
        out.push(0x40 | (n >> 8) as u8);
        out.push(n as u8);
    } else {
        out.push(0x80);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    }
}

fn rdb_str(out: &mut Vec<u8>, s: &[u8]) {
    rdb_len(out, s.len());
    out.extend_from_slice(s);
}

/// A ziplist of the given entries (integers in their integer encodings).
fn ziplist(items: &[&[u8]]) -> Vec<u8> {
    let mut body = Vec::new();
    let mut prev = 0usize;
    let mut tail = 10usize;
    for it in items {
        let start = body.len();
        tail = 10 + start;
        if prev < 254 {
            body.push(prev as u8);
        } else {
            body.push(254);
            body.extend_from_slice(&(prev as u32).to_le_bytes());
        }
        let s = std::str::from_utf8(it).ok();
        match s
            .and_then(|s| s.parse::<i64>().ok())
            .filter(|v| v.to_string() == s.unwrap())
        {
            Some(v) if (0..=12).contains(&v) => body.push(0xf1 + v as u8),
            Some(v) if i8::try_from(v).is_ok() => {
                body.push(0xfe);
                body.push(v as i8 as u8);
            }
            Some(v) if i16::try_from(v).is_ok() => {
                body.push(0xc0);
                body.extend_from_slice(&(v as i16).to_le_bytes());
            }
            Some(v) if (-8388608..8388608).contains(&v) => {
                body.push(0xf0);
                body.extend_from_slice(&(v as i32).to_le_bytes()[..3]);
            }
            Some(v) if i32::try_from(v).is_ok() => {
                body.push(0xd0);
                body.extend_from_slice(&(v as i32).to_le_bytes());
            }
            Some(v) => {
                body.push(0xe0);
                body.extend_from_slice(&v.to_le_bytes());
            }
            None if it.len() < 64 => {
                body.push(it.len() as u8);
                body.extend_from_slice(it);
            }
            None if it.len() < 16384 => {
                body.push(0x40 | (it.len() >> 8) as u8);
                body.push(it.len() as u8);
                body.extend_from_slice(it);
            }
            None => {
                body.push(0x80);
                body.extend_from_slice(&(it.len() as u32).to_be_bytes());
                body.extend_from_slice(it);
            }
        }
        prev = body.len() - start;
    }
    let total = 10 + body.len() + 1;
    let mut zl = Vec::new();
    zl.extend_from_slice(&(total as u32).to_le_bytes());
    zl.extend_from_slice(&(tail as u32).to_le_bytes());
    zl.extend_from_slice(&(items.len() as u16).to_le_bytes());
    zl.extend_from_slice(&body);
    zl.push(0xff);
    zl
}

fn blob_payload(t: u8, blob: &[u8]) -> Vec<u8> {
    let mut b = vec![t];
    rdb_str(&mut b, blob);
    with_footer(b, 10)
}

/// Payloads of every legacy encoding: (key, payload).
fn legacy_payloads() -> Vec<(&'static str, Vec<u8>)> {
    let long = vec![b'L'; 300];
    let list_items: Vec<&[u8]> = vec![
        b"a",
        b"0",
        b"12",
        b"13",
        b"-1",
        b"200",
        b"-30000",
        b"5000000",
        b"-2000000000",
        b"9000000000",
        b"hello",
        &long,
    ];
    let mut v = Vec::new();
    v.push(("list:ziplist", blob_payload(10, &ziplist(&list_items))));
    // QUICKLIST (v1): nodes are ziplists.
    let mut b = vec![14u8];
    rdb_len(&mut b, 2);
    rdb_str(&mut b, &ziplist(&list_items));
    rdb_str(&mut b, &ziplist(&[b"x", b"y"]));
    v.push(("list:quicklist", with_footer(b, 10)));
    // QUICKLIST_2 with a plain node between two packed ones (a listpack made by hand).
    let lp: Vec<u8> = {
        let mut e = vec![0x81, b'p', 2, 0x05, 1];
        let mut lp = Vec::new();
        lp.extend_from_slice(&((6 + e.len() + 1) as u32).to_le_bytes());
        lp.extend_from_slice(&2u16.to_le_bytes());
        lp.append(&mut e);
        lp.push(0xff);
        lp
    };
    let mut b = vec![18u8];
    rdb_len(&mut b, 3);
    rdb_len(&mut b, 2);
    rdb_str(&mut b, &lp);
    rdb_len(&mut b, 1);
    rdb_str(&mut b, b"a plain node");
    rdb_len(&mut b, 2);
    rdb_str(&mut b, &lp);
    v.push(("list:quicklist2-plain", with_footer(b, 10)));
    // LIST: plain strings, some integer-encoded.
    let mut b = vec![1u8];
    rdb_len(&mut b, 3);
    rdb_str(&mut b, b"one");
    b.extend_from_slice(&[0xc0, 0xfe]); // int8 -2
    b.extend_from_slice(&[0xc1, 0x30, 0x75]); // int16 30000
    v.push(("list:plain", with_footer(b, 10)));
    // ZSET with text doubles, including the inf markers.
    let mut b = vec![3u8];
    rdb_len(&mut b, 4);
    for (m, s) in [(&b"a"[..], &b"1.5"[..]), (b"b", b"-2"), (b"c", b"1e10")] {
        rdb_str(&mut b, m);
        b.push(s.len() as u8);
        b.extend_from_slice(s);
    }
    rdb_str(&mut b, b"d");
    b.push(254);
    v.push(("zset:text", with_footer(b, 10)));
    v.push((
        "zset:ziplist",
        blob_payload(12, &ziplist(&[b"c", b"-7", b"a", b"1", b"b", b"2.5"])),
    ));
    v.push((
        "hash:ziplist",
        blob_payload(13, &ziplist(&[b"f1", b"v1", b"f2", b"22", b"n", b"-5"])),
    ));
    // HASH_ZIPMAP: zmlen, then len key len free value, 0xff.
    let mut zm = vec![2u8];
    for (k, val) in [(&b"name"[..], &b"redis"[..]), (b"age", b"10")] {
        zm.push(k.len() as u8);
        zm.extend_from_slice(k);
        zm.push(val.len() as u8);
        zm.push(1);
        zm.extend_from_slice(val);
        zm.push(0);
    }
    zm.push(0xff);
    v.push(("hash:zipmap", blob_payload(9, &zm)));
    // A SET_INTSET of 16-bit members, and a SET with an LZF-compressed member.
    let mut is = Vec::new();
    is.extend_from_slice(&2u32.to_le_bytes());
    is.extend_from_slice(&3u32.to_le_bytes());
    for i in [-5i16, 7, 300] {
        is.extend_from_slice(&i.to_le_bytes());
    }
    v.push(("set:intset16", blob_payload(11, &is)));
    let mut b = vec![2u8];
    rdb_len(&mut b, 2);
    rdb_str(&mut b, b"plain");
    // LZF of "aaaaaaaaaa": literal 'a', back-reference of 9 at distance 1.
    b.extend_from_slice(&[0xc3, 5, 10, 0, b'a', 0xe0, 0, 0]);
    v.push(("set:lzf", with_footer(b, 10)));
    v
}

#[test]
fn legacy_encodings_load_as_on_redis() {
    let Some(reference) = ReferenceRedis::start() else {
        return;
    };
    let ours = TestServer::start(&[]);
    let mut r = reference.conn();
    let mut t = ours.conn();
    for (k, p) in legacy_payloads() {
        assert_eq!(restore(&mut r, k, 0, &p, &[]), "OK", "{k} on redis");
        assert_eq!(restore(&mut t, k, 0, &p, &[]), "OK", "{k} on tidecache");
        assert_eq!(contents(&mut t, k), contents(&mut r, k), "{k}");
        // And what we dump of it goes back to Redis.
        let again = dump(&mut t, k).unwrap();
        let back = format!("{k}:back");
        assert_eq!(restore(&mut r, &back, 0, &again, &[]), "OK", "{k} back");
        assert_eq!(contents(&mut r, &back), contents(&mut r, k), "{k} back");
    }
}

#[test]
fn set_listpack_of_redis_7_2() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    // A listpack of "a", "b", 5.
    let lp = {
        let e = [0x81, b'a', 2, 0x81, b'b', 2, 0x05, 1];
        let mut lp = Vec::new();
        lp.extend_from_slice(&((6 + e.len() + 1) as u32).to_le_bytes());
        lp.extend_from_slice(&3u16.to_le_bytes());
        lp.extend_from_slice(&e);
        lp.push(0xff);
        lp
    };
    let mut b = vec![20u8];
    rdb_str(&mut b, &lp);
    let p = with_footer(b, 11);
    assert_eq!(restore(&mut c, "s", 0, &p, &[]), "OK");
    assert_eq!(
        contents(&mut c, "s"),
        vec![b"set".to_vec(), b"5".to_vec(), b"a".to_vec(), b"b".to_vec()]
    );
    // A later version than 7.2's is refused.
    let mut b = vec![0u8, 1, b'x'];
    b.truncate(3);
    let p = with_footer(b, 12);
    assert_eq!(
        restore(&mut c, "v", 0, &p, &[]),
        "ERR DUMP payload version or checksum are wrong"
    );
}

// ---------------------------------------------------------------------------------------
// Options, TTLs and errors

#[test]
fn ttl_replace_and_options() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    cmd(&mut c, &["SET", "foo", "bar"]);
    let p = dump(&mut c, "foo").unwrap();
    assert_eq!(dump(&mut c, "missing"), None);

    assert_eq!(
        restore(&mut c, "foo", 0, &p, &[]),
        "BUSYKEY Target key name already exists."
    );
    // BUSYKEY comes before the TTL and payload checks, as in Redis.
    assert_eq!(
        restore(&mut c, "foo", -1, b"junk", &[]),
        "BUSYKEY Target key name already exists."
    );
    assert_eq!(
        restore(&mut c, "n", -1, &p, &[]),
        "ERR Invalid TTL value, must be >= 0"
    );
    assert_eq!(
        err_text(q::<String>(&mut c, &["RESTORE", "n", "x", "p"])),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(restore(&mut c, "n", 0, &p, &["bogus"]), "ERR syntax error");
    assert_eq!(
        restore(&mut c, "n", 0, &p, &["IDLETIME", "-1"]),
        "ERR Invalid IDLETIME value, must be >= 0"
    );
    assert_eq!(
        restore(&mut c, "n", 0, &p, &["FREQ", "256"]),
        "ERR Invalid FREQ value, must be >= 0 and <= 255"
    );
    assert_eq!(
        restore(&mut c, "n", 0, &p, &["FREQ", "1", "IDLETIME", "1"]),
        "ERR syntax error"
    );
    assert_eq!(
        restore(&mut c, "n", 0, &p, &["IDLETIME"]),
        "ERR syntax error"
    );
    assert_eq!(
        restore(&mut c, "n", 0, &p, &["IDLETIME", "x"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(int(&mut c, &["EXISTS", "n"]), 0);

    assert_eq!(restore(&mut c, "n", 0, &p, &["IDLETIME", "1000"]), "OK");
    assert_eq!(
        restore(&mut c, "n2", 0, &p, &["FREQ", "100", "REPLACE"]),
        "OK"
    );

    assert_eq!(restore(&mut c, "t", 5000, &p, &[]), "OK");
    let pttl = int(&mut c, &["PTTL", "t"]);
    assert!((3000..=5000).contains(&pttl), "{pttl}");
    assert_eq!(restore(&mut c, "t32", 2569591501, &p, &[]), "OK");
    assert!(int(&mut c, &["PTTL", "t32"]) > 2569591501 - 3000);

    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    assert_eq!(restore(&mut c, "abs", now + 3000, &p, &["ABSTTL"]), "OK");
    let pttl = int(&mut c, &["PTTL", "abs"]);
    assert!((2000..=3100).contains(&pttl), "{pttl}");
    // A deadline in the past: OK, and no key (a replaced key is deleted).
    assert_eq!(restore(&mut c, "past", now - 3000, &p, &["ABSTTL"]), "OK");
    assert_eq!(int(&mut c, &["EXISTS", "past"]), 0);
    cmd(&mut c, &["SET", "old", "x"]);
    assert_eq!(
        restore(&mut c, "old", now - 3000, &p, &["ABSTTL", "REPLACE"]),
        "OK"
    );
    assert_eq!(int(&mut c, &["EXISTS", "old"]), 0);

    cmd(&mut c, &["SET", "foo", "bar2"]);
    cmd(&mut c, &["EXPIRE", "foo", "100"]);
    let p2 = dump(&mut c, "foo").unwrap();
    cmd(&mut c, &["SET", "foo", "bar1"]);
    assert_eq!(restore(&mut c, "foo", 0, &p2, &["replace"]), "OK");
    let v: String = q(&mut c, &["GET", "foo"]).unwrap();
    assert_eq!(v, "bar2");
    // RESTORE with ttl 0 leaves no deadline, whatever the key had.
    assert_eq!(int(&mut c, &["TTL", "foo"]), -1);
    // Over a key of another type.
    cmd(&mut c, &["RPUSH", "lst", "a"]);
    assert_eq!(restore(&mut c, "lst", 0, &p2, &["REPLACE"]), "OK");
    let ty: String = q(&mut c, &["TYPE", "lst"]).unwrap();
    assert_eq!(ty, "string");
}

#[test]
fn restore_notifies() {
    let s = TestServer::start(&["--notify-keyspace-events", "KEA"]);
    let mut c = s.conn();
    cmd(&mut c, &["SET", "k", "v"]);
    let p = dump(&mut c, "k").unwrap();
    let mut sub = s.conn();
    let mut ps = sub.as_pubsub();
    ps.psubscribe("__keyevent@0__:*").unwrap();
    assert_eq!(restore(&mut c, "k2", 0, &p, &[]), "OK");
    let m = ps.get_message().unwrap();
    assert_eq!(m.get_channel_name(), "__keyevent@0__:restore");
    let key: String = m.get_payload().unwrap();
    assert_eq!(key, "k2");
}

/// A few valid payloads of every type (from our own DUMP).
fn sample_payloads(c: &mut Connection) -> Vec<Vec<u8>> {
    cmd(c, &["SET", "a", "hello world"]);
    cmd(c, &["SET", "b", "12345"]);
    cmd(
        c,
        &["RPUSH", "c", "x", "1", "y", "-70000", &"long".repeat(40)],
    );
    cmd(c, &["SADD", "d", "1", "2", "3"]);
    cmd(c, &["SADD", "e", "p", "q"]);
    cmd(c, &["HSET", "f", "a", "1", "b", "2"]);
    cmd(c, &["HSET", "g", "a", &"v".repeat(100)]);
    cmd(c, &["ZADD", "h", "1", "a", "2", "b"]);
    cmd(c, &["ZADD", "i", "1", &"m".repeat(100)]);
    let mut out: Vec<Vec<u8>> = ["a", "b", "c", "d", "e", "f", "g", "h", "i"]
        .iter()
        .map(|k| dump(c, k).unwrap())
        .collect();
    out.extend(legacy_payloads().into_iter().map(|(_, p)| p));
    out
}

#[test]
fn corrupt_payloads_answer_errors_and_change_nothing() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    let samples = sample_payloads(&mut c);
    cmd(&mut c, &["SET", "keep", "original"]);
    let sum = "ERR DUMP payload version or checksum are wrong";
    let bad = "ERR Bad data format";
    for p in &samples {
        // Any flipped byte breaks the checksum.
        for i in 0..p.len() {
            let mut q2 = p.clone();
            q2[i] ^= 0x5a;
            let got = restore(&mut c, "keep", 0, &q2, &["REPLACE"]);
            assert_eq!(got, sum, "flip at {i}");
        }
        // Truncated, with a valid footer: the body runs out.
        let body = &p[..p.len() - 10];
        for cut in 0..body.len() {
            let q2 = with_footer(body[..cut].to_vec(), 10);
            let got = restore(&mut c, "keep", 0, &q2, &["REPLACE"]);
            assert!(got == bad || got == "OK", "cut at {cut}: {got}");
            if got == "OK" {
                // A cut that still reads as a value (a shorter string): put it back.
                cmd(&mut c, &["SET", "keep", "original"]);
            }
        }
        assert_eq!(restore(&mut c, "keep", 0, &p[..9], &["REPLACE"]), sum);
    }
    // Huge claimed lengths.
    let mut huge = Vec::new();
    for body in [
        vec![0u8, 0x81, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff], // string 2^64-1 bytes
        vec![0u8, 0x80, 0xff, 0xff, 0xff, 0xff, b'a'],                   // string 4 GB
        vec![
            1u8, 0x81, 0x0f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, b'a',
        ], // list
        vec![2u8, 0x80, 0xff, 0xff, 0xff, 0xff, 0x01, b'a'],             // set
        vec![4u8, 0x80, 0xff, 0xff, 0xff, 0xff, 0x01, b'a', 0x01, b'b'], // hash
        vec![5u8, 0x80, 0xff, 0xff, 0xff, 0xff, 0x01, b'a'],             // zset
        vec![18u8, 0x80, 0xff, 0xff, 0xff, 0xff, 0x02, 0x01, b'a'],      // quicklist
        vec![
            0u8, 0xc3, 0x05, 0x80, 0xff, 0xff, 0xff, 0xff, 0, b'a', 0xe0, 0, 0,
        ], // lzf 4 GB
        vec![
            11u8, 0x10, 2, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 1, 0, 2, 0, 3, 0, 4, 0,
        ], // intset
        vec![17u8, 0x07, 0xff, 0xff, 0xff, 0x7f, 0x02, 0x00, 0xff],      // listpack header
        vec![13u8, 0x0b, 0xff, 0xff, 0xff, 0x7f, 10, 0, 0, 0, 0, 0, 0xff], // ziplist header
        vec![99u8, 0],                                                   // unknown type
        vec![6u8, 0],                                                    // module
        vec![15u8, 0],                                                   // stream
        vec![1u8, 0],                                                    // empty list
        vec![2u8, 0],                                                    // empty set
        vec![2u8, 2, 1, b'a', 1, b'a'],                                  // duplicate member
        vec![4u8, 2, 1, b'a', 1, b'1', 1, b'a', 1, b'2'],                // duplicate field
        vec![5u8, 1, 1, b'a', 0, 0, 0, 0, 0, 0, 0xf8, 0x7f],             // NaN score
    ] {
        huge.push(with_footer(body, 10));
    }
    for p in &huge {
        assert_eq!(restore(&mut c, "keep", 0, p, &["REPLACE"]), bad, "{p:?}");
        assert_eq!(restore(&mut c, "new", 0, p, &[]), bad, "{p:?}");
    }
    let v: String = q(&mut c, &["GET", "keep"]).unwrap();
    assert_eq!(v, "original");
    assert_eq!(int(&mut c, &["EXISTS", "new"]), 0);
}

#[test]
fn random_mutations_never_kill_the_server() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    let samples = sample_payloads(&mut c);
    let mut seed = std::env::var("DUMP_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x9e37_79b9_7f4a_7c15u64);
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut ok = 0;
    // DUMP_FUZZ_ROUNDS runs a longer campaign.
    let rounds: usize = std::env::var("DUMP_FUZZ_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4000);
    for round in 0..rounds {
        let p = &samples[(next() as usize) % samples.len()];
        let mut body = p[..p.len() - 10].to_vec();
        for _ in 0..1 + next() % 4 {
            if body.is_empty() {
                break;
            }
            let i = (next() as usize) % body.len();
            match next() % 5 {
                0 => body[i] = next() as u8,
                1 => body[i] ^= 1 << (next() % 8),
                2 => body.truncate(i),
                3 => body.insert(i, next() as u8),
                _ => {
                    body.remove(i);
                }
            }
        }
        // Mostly with a correct footer, so the decoder itself is exercised.
        let payload = if round % 8 == 0 {
            let mut q2 = p.clone();
            let n = q2.len();
            q2[n - 1] ^= 1;
            q2
        } else {
            with_footer(body, 10)
        };
        let got = restore(&mut c, "fuzz", 0, &payload, &["REPLACE"]);
        if got == "OK" {
            ok += 1;
            // Whatever loaded reads back and dumps again.
            let _ = contents(&mut c, "fuzz");
            let again = dump(&mut c, "fuzz").unwrap();
            assert_eq!(restore(&mut c, "fuzz2", 0, &again, &["REPLACE"]), "OK");
        } else {
            assert!(got.starts_with("ERR "), "{got}");
        }
    }
    let pong: String = q(&mut c, &["PING"]).unwrap();
    assert_eq!(pong, "PONG");
    assert!(ok > 0);
}

/// Mutated payloads (with a correct footer) go to redis-server (with
/// `sanitize-dump-payload yes`, so it validates everything) and to tidecache: both accept or
/// both refuse, and what both accept reads the same. 7.2's set listpack (type 20) is the one
/// payload tidecache takes that Redis 7.0 refuses.
#[test]
fn mutated_payloads_load_as_on_redis() {
    let Some(reference) = ReferenceRedis::start() else {
        return;
    };
    let ours = TestServer::start(&[]);
    let mut r = reference.conn();
    cmd(&mut r, &["CONFIG", "SET", "sanitize-dump-payload", "yes"]);
    let mut t = ours.conn();
    let samples = sample_payloads(&mut r);
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let (mut both_ok, mut both_err) = (0, 0);
    for _ in 0..3000 {
        let p = &samples[(next() as usize) % samples.len()];
        let mut body = p[..p.len() - 10].to_vec();
        for _ in 0..1 + next() % 3 {
            if body.is_empty() {
                break;
            }
            let i = (next() as usize) % body.len();
            match next() % 4 {
                0 => body[i] = next() as u8,
                1 => body[i] ^= 1 << (next() % 8),
                2 => {
                    body.remove(i);
                }
                _ => body.insert(i, next() as u8),
            }
        }
        if body.first() == Some(&20) {
            continue;
        }
        let payload = with_footer(body, 10);
        let a = restore(&mut r, "k", 0, &payload, &["REPLACE"]);
        let b = restore(&mut t, "k", 0, &payload, &["REPLACE"]);
        assert_eq!(
            a == "OK",
            b == "OK",
            "{payload:?}: redis {a}, tidecache {b}"
        );
        if a == "OK" {
            // (Pairs compared as a set: a corrupt listpack may hold scores out of order,
            // which Redis keeps as they are and tidecache sorts.)
            let norm = |mut v: Vec<Vec<u8>>| {
                if v[0] == b"zset" {
                    let mut pairs: Vec<Vec<u8>> = v[1..].chunks(2).map(|p| p.concat()).collect();
                    pairs.sort();
                    v.truncate(1);
                    v.extend(pairs);
                }
                v
            };
            let (x, y) = (norm(contents(&mut t, "k")), norm(contents(&mut r, "k")));
            assert_eq!(x, y, "{payload:?}");
            both_ok += 1;
        } else {
            both_err += 1;
        }
    }
    assert!(both_ok > 100 && both_err > 100, "{both_ok} {both_err}");
}

/// INFO's `dump_payload_sanitizations` counts what `sanitize-dump-payload` asks to check, as
/// redis-server counts it: nothing under `no`, each encoded blob under `yes` and `clients`,
/// nothing for a `skip-sanitize-payload` user under `clients`.
#[test]
fn sanitization_counter_follows_the_setting_as_on_redis() {
    let Some(reference) = ReferenceRedis::start() else {
        return;
    };
    let ours = TestServer::start(&[]);
    let mut r = reference.conn();
    let mut t = ours.conn();
    let keys = populate(&mut r);
    let payloads: Vec<Vec<u8>> = keys
        .iter()
        .map(|k| dump(&mut r, k).expect("redis dump"))
        .collect();
    let counter = |c: &mut Connection| -> i64 {
        let info: String = q(c, &["INFO", "stats"]).unwrap();
        info.lines()
            .find_map(|l| l.strip_prefix("dump_payload_sanitizations:"))
            .and_then(|v| v.trim().parse().ok())
            .expect("dump_payload_sanitizations in INFO stats")
    };
    for setting in ["no", "yes", "clients"] {
        let mut counts = Vec::new();
        for c in [&mut r, &mut t] {
            cmd(c, &["CONFIG", "SET", "sanitize-dump-payload", setting]);
            cmd(c, &["CONFIG", "RESETSTAT"]);
            for (i, p) in payloads.iter().enumerate() {
                assert_eq!(restore(c, &format!("copy:{i}"), 0, p, &["REPLACE"]), "OK");
            }
            counts.push(counter(c));
        }
        assert_eq!(counts[1], counts[0], "sanitize-dump-payload {setting}");
        if setting == "no" {
            assert_eq!(counts[1], 0);
        } else {
            assert!(counts[1] > 10, "{setting}: {counts:?}");
        }
    }
    // Under `clients`, a user with skip-sanitize-payload is not counted.
    for c in [&mut r, &mut t] {
        cmd(
            c,
            &[
                "ACL",
                "SETUSER",
                "mover",
                "on",
                "nopass",
                "+@all",
                "~*",
                "skip-sanitize-payload",
            ],
        );
        cmd(c, &["CONFIG", "RESETSTAT"]);
        cmd(c, &["AUTH", "mover", "x"]);
        assert_eq!(restore(c, "copy:0", 0, &payloads[1], &["REPLACE"]), "OK");
        assert_eq!(counter(c), 0);
    }
    assert_eq!(
        err_text(
            redis::cmd("CONFIG")
                .arg("SET")
                .arg("sanitize-dump-payload")
                .arg("maybe")
                .query::<String>(&mut t)
        ),
        err_text(
            redis::cmd("CONFIG")
                .arg("SET")
                .arg("sanitize-dump-payload")
                .arg("maybe")
                .query::<String>(&mut r)
        ),
    );
}

/// `rdbcompression no`: DUMP writes a long string as it is (Redis's rdbSaveRawString skips
/// LZF), byte for byte as redis-server does with the same setting; `yes` compresses it. Both
/// payloads restore.
#[test]
fn rdbcompression_decides_whether_dump_compresses() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    let long = "a".repeat(200);
    let _: () = q(&mut c, &["SET", "k", &long]).unwrap();
    let packed = dump(&mut c, "k").unwrap();
    let _: () = q(&mut c, &["CONFIG", "SET", "rdbcompression", "no"]).unwrap();
    let plain = dump(&mut c, "k").unwrap();
    assert!(packed.len() < 100, "{}", packed.len());
    assert!(plain.len() > 200, "{}", plain.len());
    assert!(plain.windows(200).any(|w| w == long.as_bytes()));
    for (key, p) in [("a", &packed), ("b", &plain)] {
        assert_eq!(restore(&mut c, key, 0, p, &[]), "OK");
        assert_eq!(q::<String>(&mut c, &["GET", key]).unwrap(), long);
    }
    let Some(r) = ReferenceRedis::start_with(&["--rdbcompression", "no"]) else {
        return;
    };
    let mut rc = r.conn();
    let _: () = q(&mut rc, &["SET", "k", &long]).unwrap();
    let theirs = dump(&mut rc, "k").unwrap();
    // The body (type, length, bytes) is the same; the RDB version and checksum that close
    // it differ with the version each server writes.
    assert_eq!(plain[..plain.len() - 10], theirs[..theirs.len() - 10]);
}
