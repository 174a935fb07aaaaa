//! Bitmap commands through the `redis` crate: a randomized sequence held reply for reply to
//! redis-server's, the limits of bit offsets, deadlines, keyspace events, and HMSET.

mod support;

use std::time::Duration;
use support::{err_text, q, ReferenceRedis, TestServer};

/// A small deterministic generator (xorshift), so a failing sequence can be replayed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn signed(&mut self, n: i64) -> i64 {
        self.below(2 * n as u64 + 1) as i64 - n
    }
}

fn random_command(r: &mut Rng) -> Vec<String> {
    let keys = ["a", "b", "c", "n"];
    let key = keys[r.below(keys.len() as u64) as usize].to_string();
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let unit = |r: &mut Rng| ["", "BIT", "BYTE", "bit"][r.below(4) as usize].to_string();
    let mut cmd = match r.below(9) {
        0 | 1 => vec![
            "SETBIT".into(),
            key,
            r.below(400).to_string(),
            r.below(2).to_string(),
        ],
        2 => vec!["GETBIT".into(), key, r.below(420).to_string()],
        3 => {
            let mut c = vec!["BITCOUNT".into(), key];
            if r.below(4) > 0 {
                c.push(r.signed(60).to_string());
                c.push(r.signed(60).to_string());
                c.push(unit(r));
            }
            c
        }
        4 => {
            let mut c = vec!["BITPOS".into(), key, r.below(2).to_string()];
            let n = r.below(4);
            if n >= 1 {
                c.push(r.signed(60).to_string());
            }
            if n >= 2 {
                c.push(r.signed(60).to_string());
            }
            if n >= 3 {
                c.push(unit(r));
            }
            c
        }
        5 => {
            let op = ["AND", "OR", "XOR", "NOT"][r.below(4) as usize];
            let mut c = s(&["BITOP", op, &key]);
            let n = if op == "NOT" { 1 } else { 1 + r.below(3) };
            for _ in 0..n {
                c.push(keys[r.below(keys.len() as u64) as usize].into());
            }
            c
        }
        6 | 7 => {
            let mut c = vec![
                if r.below(5) == 0 {
                    "BITFIELD_RO"
                } else {
                    "BITFIELD"
                }
                .to_string(),
                key,
            ];
            for _ in 0..1 + r.below(4) {
                let ty = if r.below(2) == 0 {
                    format!("i{}", 1 + r.below(64))
                } else {
                    format!("u{}", 1 + r.below(63))
                };
                let off = if r.below(4) == 0 {
                    format!("#{}", r.below(8))
                } else {
                    r.below(300).to_string()
                };
                let big = 1i64 << r.below(63);
                let val = (r.signed(big / 2 + 3)).to_string();
                match r.below(4) {
                    0 => c.extend(["GET".into(), ty, off]),
                    1 => c.extend(["SET".into(), ty, off, val]),
                    2 => c.extend(["INCRBY".into(), ty, off, val]),
                    _ => c.extend([
                        "OVERFLOW".into(),
                        ["WRAP", "SAT", "FAIL"][r.below(3) as usize].into(),
                    ]),
                }
            }
            c
        }
        _ => vec!["GET".into(), key],
    };
    cmd.retain(|a| !a.is_empty());
    cmd
}

#[test]
fn random_sequences_reply_as_redis() {
    let Some(reference) = ReferenceRedis::start() else {
        return;
    };
    let t = TestServer::start(&[]);
    let rc = &mut reference.conn();
    let tc = &mut t.conn();
    for seed in [0x9e37_79b9_7f4a_7c15u64, 42, 0xdead_beef] {
        let mut rng = Rng(seed);
        for c in [&mut *rc, &mut *tc] {
            let _: () = q(c, &["FLUSHALL"]).unwrap();
            let _: () = q(c, &["SET", "n", "12345"]).unwrap();
        }
        for i in 0..3000 {
            let cmd = random_command(&mut rng);
            let args: Vec<&str> = cmd.iter().map(|s| s.as_str()).collect();
            let a = q::<redis::Value>(rc, &args).map_err(|e| e.to_string());
            let b = q::<redis::Value>(tc, &args).map_err(|e| e.to_string());
            assert_eq!(a, b, "seed {seed}, command {i}: {cmd:?}");
        }
        for k in ["a", "b", "c", "n"] {
            let a: Option<Vec<u8>> = q(rc, &["GET", k]).unwrap();
            let b: Option<Vec<u8>> = q(tc, &["GET", k]).unwrap();
            assert_eq!(a, b, "seed {seed}, {k}");
        }
    }
}

#[test]
fn offsets_are_bounded_by_proto_max_bulk_len() {
    let t = TestServer::start(&[]);
    let c = &mut t.conn();
    let _: () = q(c, &["CONFIG", "SET", "proto-max-bulk-len", "1mb"]).unwrap();
    let off = 8 * 1024 * 1024;
    for args in [
        &["SETBIT", "k", &off.to_string(), "1"][..],
        &["GETBIT", "k", &off.to_string()],
        &["BITFIELD", "k", "SET", "u8", &off.to_string(), "1"],
        &["BITFIELD", "k", "GET", "u8", "#1048576"],
        &["SETBIT", "k", "-1", "1"],
        &["SETBIT", "k", "99999999999999999999", "1"],
    ] {
        assert_eq!(
            err_text(q::<redis::Value>(c, args)),
            "ERR bit offset is not an integer or out of range",
            "{args:?}"
        );
    }
    assert!(!q::<bool>(c, &["EXISTS", "k"]).unwrap());
    let n: i64 = q(c, &["SETBIT", "k", &(off - 1).to_string(), "1"]).unwrap();
    assert_eq!(n, 0);
    let len: i64 = q(c, &["STRLEN", "k"]).unwrap();
    assert_eq!(len, 1024 * 1024);
    let n: i64 = q(c, &["BITCOUNT", "k"]).unwrap();
    assert_eq!(n, 1);
    let n: i64 = q(c, &["BITPOS", "k", "1"]).unwrap();
    assert_eq!(n, off - 1);
    // BITFIELD grows the string only as far as it writes.
    let v: Vec<i64> = q(
        c,
        &["BITFIELD", "f", "SET", "u8", "#3", "7", "GET", "u8", "800"],
    )
    .unwrap();
    assert_eq!(v, [0, 0]);
    let len: i64 = q(c, &["STRLEN", "f"]).unwrap();
    assert_eq!(len, 4);
    let enc: String = q(c, &["OBJECT", "ENCODING", "f"]).unwrap();
    assert_eq!(enc, "raw");
}

#[test]
fn writes_keep_the_deadline_and_bitop_replaces_it() {
    let t = TestServer::start(&[]);
    let c = &mut t.conn();
    let _: () = q(c, &["SET", "k", "abc", "EX", "1000"]).unwrap();
    let _: i64 = q(c, &["SETBIT", "k", "100", "1"]).unwrap();
    let _: Vec<i64> = q(c, &["BITFIELD", "k", "INCRBY", "u8", "0", "1"]).unwrap();
    let ttl: i64 = q(c, &["TTL", "k"]).unwrap();
    assert!(ttl > 990, "{ttl}");
    let v: Vec<u8> = q(c, &["GET", "k"]).unwrap();
    assert_eq!(&v[..3], b"bbc");
    let _: () = q(c, &["SET", "d", "x", "EX", "1000"]).unwrap();
    let n: i64 = q(c, &["BITOP", "OR", "d", "k"]).unwrap();
    assert_eq!(n, 13);
    let ttl: i64 = q(c, &["TTL", "d"]).unwrap();
    assert_eq!(ttl, -1);
    // An empty result deletes the destination.
    let n: i64 = q(c, &["BITOP", "AND", "d", "nokey"]).unwrap();
    assert_eq!(n, 0);
    assert!(!q::<bool>(c, &["EXISTS", "d"]).unwrap());
}

#[test]
fn keyspace_events() {
    let t = TestServer::start(&[]);
    let c = &mut t.conn();
    let _: () = q(c, &["CONFIG", "SET", "notify-keyspace-events", "KEA"]).unwrap();
    let mut sub = t.conn();
    let mut ps = sub.as_pubsub();
    ps.psubscribe("__keyevent@0__:*").unwrap();
    ps.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let cmds: &[&[&str]] = &[
        &["SETBIT", "b", "3", "1"],
        &["SETBIT", "b", "3", "1"], // no change: no event
        &["BITFIELD", "b", "SET", "u8", "0", "1"],
        &["BITFIELD", "b", "GET", "u8", "0"],
        &[
            "BITFIELD", "b", "OVERFLOW", "FAIL", "INCRBY", "u8", "0", "300",
        ],
        &["BITOP", "NOT", "d", "b"],
        &["BITOP", "AND", "d", "nokey"],
        &["HMSET", "h", "f", "v", "g", "w"],
        &["SET", "end", "1"],
    ];
    for args in cmds {
        let _: redis::Value = q(c, args).unwrap();
    }
    let mut got = Vec::new();
    loop {
        let m = ps.get_message().expect("event");
        let key: String = m.get_payload().unwrap();
        got.push(format!("{}:{key}", m.get_channel_name()));
        if key == "end" {
            break;
        }
    }
    let e = |s: &str| format!("__keyevent@0__:{s}");
    assert_eq!(
        got,
        [
            e("setbit:b"),
            e("setbit:b"),
            e("set:d"),
            e("del:d"),
            e("hset:h"),
            e("set:end")
        ]
    );
}

#[test]
fn hmset_sets_fields_and_replies_ok() {
    let t = TestServer::start(&[]);
    let c = &mut t.conn();
    let ok: String = q(c, &["HMSET", "h", "a", "1", "b", "2"]).unwrap();
    assert_eq!(ok, "OK");
    let ok: String = q(c, &["HMSET", "h", "a", "3"]).unwrap();
    assert_eq!(ok, "OK");
    let v: Vec<Option<String>> = q(c, &["HMGET", "h", "a", "b"]).unwrap();
    assert_eq!(v, [Some("3".into()), Some("2".into())]);
    assert_eq!(
        err_text(q::<String>(c, &["HMSET", "h", "a"])),
        "ERR wrong number of arguments for 'hmset' command"
    );
    assert_eq!(
        err_text(q::<String>(c, &["HMSET", "h", "a", "1", "b"])),
        "ERR wrong number of arguments for 'hmset' command"
    );
    let _: () = q(c, &["SET", "s", "x"]).unwrap();
    assert!(err_text(q::<String>(c, &["HMSET", "s", "a", "1"])).starts_with("WRONGTYPE"));
}
