//! MIGRATE to redis-server 7 and to a second tidecache: every type, TTLs, COPY, REPLACE,
//! BUSYKEY from the target, AUTH/AUTH2, NOKEY, the IOERR texts with bounded timeouts, other
//! clients served while a MIGRATE waits, and keys changed during the transfer sent again.

mod support;

use redis::Connection;
use std::net::TcpListener;
use std::time::{Duration, Instant};
use support::{err_text, int, q, resp, strs, ReferenceRedis, TestServer};

fn migrate(c: &mut Connection, port: u16, rest: &[&str]) -> redis::RedisResult<String> {
    let port = port.to_string();
    let mut args = vec!["MIGRATE", "127.0.0.1", &port];
    args.extend_from_slice(rest);
    q::<String>(c, &args)
}

fn fill(c: &mut Connection) {
    let _: () = q(c, &["SET", "str", "hello"]).unwrap();
    let _: () = q(c, &["SET", "int", "12345"]).unwrap();
    let _: () = q(c, &["RPUSH", "list", "a", "b", "c"]).unwrap();
    let _: () = q(c, &["SADD", "iset", "1", "2", "3"]).unwrap();
    let _: () = q(c, &["SADD", "set", "x", "y"]).unwrap();
    let _: () = q(c, &["ZADD", "zset", "1", "a", "2.5", "b"]).unwrap();
    let _: () = q(c, &["HSET", "hash", "f1", "v1", "f2", "v2"]).unwrap();
    // Large encodings too (quicklist, hashtable, skiplist).
    let big: Vec<String> = (0..300).map(|i| format!("member-{i}")).collect();
    let mut cmd = redis::cmd("RPUSH");
    cmd.arg("biglist").arg(&big);
    let _: () = cmd.query(c).unwrap();
    let mut cmd = redis::cmd("SADD");
    cmd.arg("bigset").arg(&big);
    let _: () = cmd.query(c).unwrap();
    let mut cmd = redis::cmd("ZADD");
    cmd.arg("bigzset");
    for (i, m) in big.iter().enumerate() {
        cmd.arg(i).arg(m);
    }
    let _: () = cmd.query(c).unwrap();
    let mut cmd = redis::cmd("HSET");
    cmd.arg("bighash");
    for m in &big {
        cmd.arg(m).arg(m);
    }
    let _: () = cmd.query(c).unwrap();
    let _: () = q(c, &["PEXPIRE", "str", "100000"]).unwrap();
}

const KEYS: &[&str] = &[
    "str", "int", "list", "iset", "set", "zset", "hash", "biglist", "bigset", "bigzset", "bighash",
];

/// What a key holds, in a form that compares across servers.
fn contents(c: &mut Connection, key: &str) -> Vec<String> {
    let t: String = q(c, &["TYPE", key]).unwrap();
    let mut v = match t.as_str() {
        "string" => vec![q::<String>(c, &["GET", key]).unwrap()],
        "list" => strs(c, &["LRANGE", key, "0", "-1"]),
        "set" => {
            let mut m = strs(c, &["SMEMBERS", key]);
            m.sort();
            m
        }
        "zset" => strs(c, &["ZRANGE", key, "0", "-1", "WITHSCORES"]),
        "hash" => {
            let mut m = strs(c, &["HGETALL", key]);
            m.sort();
            m
        }
        "stream" => {
            let v: redis::Value = q(c, &["XRANGE", key, "-", "+"]).unwrap();
            vec![format!("{v:?}")]
        }
        other => vec![format!("type {other}")],
    };
    v.insert(0, t);
    v
}

fn every_type_to(target_port: u16, target: &mut Connection) {
    let src = TestServer::start(&[]);
    let mut s = src.conn();
    fill(&mut s);
    let expected: Vec<Vec<String>> = KEYS.iter().map(|k| contents(&mut s, k)).collect();

    // One key, then the rest with KEYS (a missing one among them is skipped).
    assert_eq!(
        migrate(&mut s, target_port, &["str", "0", "5000"]).unwrap(),
        "OK"
    );
    let mut rest = vec!["", "0", "5000", "KEYS"];
    rest.extend_from_slice(&KEYS[1..]);
    rest.push("missing");
    assert_eq!(migrate(&mut s, target_port, &rest).unwrap(), "OK");

    for (k, want) in KEYS.iter().zip(&expected) {
        assert_eq!(&contents(target, k), want, "{k} on the target");
        assert_eq!(int(&mut s, &["EXISTS", k]), 0, "{k} left the source");
    }
    let pttl = int(target, &["PTTL", "str"]);
    assert!(pttl > 90_000 && pttl <= 100_000, "TTL kept: {pttl}");
    assert_eq!(int(target, &["PTTL", "list"]), -1);

    // Streams: only where this build can DUMP one.
    let _: String = q(&mut s, &["XADD", "stream", "1-1", "f", "v"]).unwrap();
    let _: String = q(&mut s, &["XADD", "stream", "2-1", "g", "w"]).unwrap();
    let want = contents(&mut s, "stream");
    let dumpable = q::<Vec<u8>>(&mut s, &["DUMP", "stream"]).is_ok();
    let r = migrate(&mut s, target_port, &["stream", "0", "5000"]);
    if dumpable {
        assert_eq!(r.unwrap(), "OK");
        assert_eq!(contents(target, "stream"), want);
        assert_eq!(int(&mut s, &["EXISTS", "stream"]), 0);
    } else {
        assert!(err_text(r).contains("stream"));
        assert_eq!(int(&mut s, &["EXISTS", "stream"]), 1);
        assert_eq!(int(target, &["EXISTS", "stream"]), 0);
    }

    // The connection is cached.
    let info: String = q(&mut s, &["INFO", "stats"]).unwrap();
    assert!(info.contains("migrate_cached_sockets:1"), "{info}");
}

#[test]
fn every_type_to_redis_server() {
    let Some(reference) = ReferenceRedis::start() else {
        return;
    };
    let mut r = reference.conn();
    every_type_to(reference.port, &mut r);
}

#[test]
fn every_type_to_tidecache() {
    let dst = TestServer::start(&[]);
    every_type_to(dst.port, &mut dst.conn());
}

#[test]
fn copy_replace_busykey_and_db() {
    let src = TestServer::start(&[]);
    let dst = TestServer::start(&[]);
    let (mut s, mut d) = (src.conn(), dst.conn());
    let _: () = q(&mut s, &["SET", "k", "v1"]).unwrap();
    assert_eq!(
        migrate(&mut s, dst.port, &["k", "0", "5000", "COPY"]).unwrap(),
        "OK"
    );
    assert_eq!(q::<String>(&mut s, &["GET", "k"]).unwrap(), "v1");
    assert_eq!(q::<String>(&mut d, &["GET", "k"]).unwrap(), "v1");

    let _: () = q(&mut s, &["SET", "k", "v2"]).unwrap();
    assert_eq!(
        err_text(migrate(&mut s, dst.port, &["k", "0", "5000"])),
        "ERR Target instance replied with error: BUSYKEY Target key name already exists."
    );
    assert_eq!(q::<String>(&mut s, &["GET", "k"]).unwrap(), "v2");
    assert_eq!(
        migrate(&mut s, dst.port, &["k", "0", "5000", "REPLACE"]).unwrap(),
        "OK"
    );
    assert_eq!(q::<String>(&mut d, &["GET", "k"]).unwrap(), "v2");
    assert_eq!(int(&mut s, &["EXISTS", "k"]), 0);

    // Only the acknowledged keys leave the source.
    let _: () = q(&mut s, &["MSET", "a", "1", "b", "2", "c", "3"]).unwrap();
    let _: () = q(&mut d, &["SET", "b", "busy"]).unwrap();
    let e = err_text(migrate(
        &mut s,
        dst.port,
        &["", "0", "5000", "KEYS", "a", "b", "c"],
    ));
    assert!(e.contains("BUSYKEY"), "{e}");
    assert_eq!(strs(&mut s, &["KEYS", "*"]), vec!["b"]);
    assert_eq!(q::<String>(&mut d, &["GET", "c"]).unwrap(), "3");

    // Another database on the target; a bad one is the target's error.
    let _: () = q(&mut s, &["SET", "x", "1"]).unwrap();
    assert_eq!(
        migrate(&mut s, dst.port, &["x", "5", "5000"]).unwrap(),
        "OK"
    );
    assert_eq!(int(&mut d, &["EXISTS", "x"]), 0);
    let _: () = q(&mut d, &["SELECT", "5"]).unwrap();
    assert_eq!(int(&mut d, &["EXISTS", "x"]), 1);
    let _: () = q(&mut s, &["SET", "x", "1"]).unwrap();
    assert_eq!(
        err_text(migrate(&mut s, dst.port, &["x", "99", "5000"])),
        "ERR Target instance replied with error: ERR DB index is out of range"
    );
    assert_eq!(int(&mut s, &["EXISTS", "x"]), 1);
    // The cached connection is still usable after the error (SELECT sent again).
    assert_eq!(
        migrate(&mut s, dst.port, &["x", "0", "5000"]).unwrap(),
        "OK"
    );
}

#[test]
fn nokey_and_argument_errors() {
    let src = TestServer::start(&[]);
    let mut s = src.conn();
    // Nothing to move: no connection is even made.
    assert_eq!(migrate(&mut s, 1, &["nokey", "0", "100"]).unwrap(), "NOKEY");
    assert_eq!(
        migrate(&mut s, 1, &["", "0", "100", "KEYS", "a", "b"]).unwrap(),
        "NOKEY"
    );
    assert_eq!(
        err_text(migrate(&mut s, 1, &["k", "0", "100", "KEYS", "a"])),
        "ERR When using MIGRATE KEYS option, the key argument must be set to the empty string"
    );
    assert_eq!(
        err_text(migrate(&mut s, 1, &["k", "0", "100", "FOO"])),
        "ERR syntax error"
    );
    assert_eq!(
        err_text(migrate(&mut s, 1, &["k", "0", "100", "AUTH"])),
        "ERR syntax error"
    );
    assert_eq!(
        err_text(migrate(&mut s, 1, &["k", "0", "100", "AUTH2", "u"])),
        "ERR syntax error"
    );
    assert_eq!(
        err_text(migrate(&mut s, 1, &["k", "x", "100"])),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        err_text(migrate(&mut s, 1, &["k", "0", "1.5"])),
        "ERR value is not an integer or out of range"
    );
    let keys = strs(
        &mut s,
        &["COMMAND", "GETKEYS", "MIGRATE", "h", "1", "k", "0", "100"],
    );
    assert_eq!(keys, vec!["k"]);
    // With KEYS, the empty key argument is not a key (Redis's migrateGetKeys)...
    let keys = strs(
        &mut s,
        &[
            "COMMAND", "GETKEYS", "MIGRATE", "h", "1", "", "0", "100", "KEYS", "a", "b",
        ],
    );
    assert_eq!(keys, vec!["a", "b"]);
    // ...so a user allowed only some keys may move them.
    let _: () = q(&mut s, &["ACL", "SETUSER", "u", "on", ">p", "~a*", "+@all"]).unwrap();
    let _: () = q(&mut s, &["AUTH", "u", "p"]).unwrap();
    assert_eq!(
        migrate(&mut s, 1, &["", "0", "100", "KEYS", "a1"]).unwrap(),
        "NOKEY"
    );
    assert!(err_text(migrate(&mut s, 1, &["", "0", "100", "KEYS", "b1"])).starts_with("NOPERM"));
}

#[test]
fn auth_and_auth2() {
    let Some(reference) = ReferenceRedis::start() else {
        return;
    };
    let mut r = reference.conn();
    let _: () = q(
        &mut r,
        &["ACL", "SETUSER", "mover", "on", ">pw2", "~*", "+@all"],
    )
    .unwrap();
    let _: () = q(&mut r, &["CONFIG", "SET", "requirepass", "foobar"]).unwrap();
    let src = TestServer::start(&[]);
    let mut s = src.conn();
    let _: () = q(&mut s, &["RPUSH", "list", "a", "b"]).unwrap();
    let e = err_text(migrate(&mut s, reference.port, &["list", "0", "5000"]));
    assert!(
        e.starts_with("ERR Target instance replied with error: NOAUTH"),
        "{e}"
    );
    let e = err_text(migrate(
        &mut s,
        reference.port,
        &["list", "0", "5000", "AUTH", "wrong"],
    ));
    assert!(e.contains("WRONGPASS"), "{e}");
    assert_eq!(int(&mut s, &["EXISTS", "list"]), 1);
    assert_eq!(
        migrate(
            &mut s,
            reference.port,
            &["list", "0", "5000", "AUTH", "foobar"]
        )
        .unwrap(),
        "OK"
    );
    let _: () = q(&mut r, &["AUTH", "foobar"]).unwrap();
    assert_eq!(strs(&mut r, &["LRANGE", "list", "0", "-1"]), vec!["a", "b"]);
    let _: () = q(&mut s, &["SET", "k", "v"]).unwrap();
    assert_eq!(
        migrate(
            &mut s,
            reference.port,
            &["k", "0", "5000", "AUTH2", "mover", "pw2"]
        )
        .unwrap(),
        "OK"
    );
    assert_eq!(q::<String>(&mut r, &["GET", "k"]).unwrap(), "v");

    // A password-protected tidecache too.
    let dst = TestServer::start(&["--requirepass", "secret"]);
    let _: () = q(&mut s, &["SET", "t", "1"]).unwrap();
    assert_eq!(
        migrate(&mut s, dst.port, &["t", "0", "5000", "AUTH", "secret"]).unwrap(),
        "OK"
    );
    assert_eq!(int(&mut s, &["EXISTS", "t"]), 0);
}

/// A target that accepts and never answers: the timeout bounds the wait, the key stays, and
/// other clients are served meanwhile.
#[test]
fn timeouts_are_bounded_and_others_are_served() {
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_port = silent.local_addr().unwrap().port();
    let src = TestServer::start(&[]);
    let mut s = src.conn();
    let _: () = q(&mut s, &["SET", "k", "v"]).unwrap();

    let started = Instant::now();
    assert_eq!(
        err_text(migrate(&mut s, silent_port, &["k", "0", "300"])),
        "IOERR error or timeout reading to target instance"
    );
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(250) && took < Duration::from_secs(3),
        "{took:?}"
    );
    assert_eq!(int(&mut s, &["EXISTS", "k"]), 1);

    // Nothing listens there.
    let closed = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    assert_eq!(
        err_text(migrate(&mut s, closed, &["k", "0", "300"])),
        "IOERR error or timeout connecting to the client"
    );

    // While one client waits for the silent target, another is served at once.
    let mut waiting = src.raw();
    let port = silent_port.to_string();
    waiting.send(&resp(&["MIGRATE", "127.0.0.1", &port, "k", "0", "1500"]));
    waiting.send(&resp(&["PING"]));
    std::thread::sleep(Duration::from_millis(100));
    let t = Instant::now();
    assert_eq!(q::<String>(&mut s, &["GET", "k"]).unwrap(), "v");
    let _: () = q(&mut s, &["SET", "other", "1"]).unwrap();
    assert!(t.elapsed() < Duration::from_millis(500));
    let blocked: String = q::<String>(&mut s, &["CLIENT", "LIST"]).unwrap();
    assert!(blocked.contains("cmd=migrate"), "{blocked}");
    // Its pipelined PING is answered after the MIGRATE, in order.
    let reply = waiting.read_until(b"+PONG\r\n");
    assert_eq!(
        String::from_utf8_lossy(&reply),
        "-IOERR error or timeout reading to target instance\r\n+PONG\r\n"
    );
    drop(silent);
}

/// A fake target that holds its first acknowledgement until told, then answers whatever
/// follows: a key written meanwhile on the source is sent again with REPLACE and its new
/// value, a key deleted meanwhile is deleted on the target (RESTORE of an expired value
/// with REPLACE), an unchanged one is not sent again; the source keeps none of them, as
/// Redis's MIGRATE, which no write can interleave with, leaves none.
#[test]
fn keys_written_or_deleted_during_the_transfer_are_sent_again() {
    use std::io::{Read, Write};
    let fake = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = fake.local_addr().unwrap().port();
    let (got_tx, got_rx) = std::sync::mpsc::channel::<()>();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let target = std::thread::spawn(move || {
        let (mut conn, _) = fake.accept().unwrap();
        conn.set_read_timeout(Some(Duration::from_secs(5))).ok();
        let mut buf = [0u8; 4096];
        let mut first = Vec::new();
        while first.windows(7).filter(|w| *w == b"RESTORE").count() < 3 {
            let n = conn.read(&mut buf).unwrap();
            assert!(n > 0);
            first.extend_from_slice(&buf[..n]);
        }
        got_tx.send(()).unwrap();
        go_rx.recv().unwrap();
        conn.write_all(b"+OK\r\n+OK\r\n+OK\r\n+OK\r\n").unwrap();
        // The second round: the two keys that changed.
        let mut second = Vec::new();
        while second.windows(7).filter(|w| *w == b"RESTORE").count() < 2 {
            let n = conn.read(&mut buf).unwrap();
            assert!(n > 0, "no second round");
            second.extend_from_slice(&buf[..n]);
        }
        conn.write_all(b"+OK\r\n+OK\r\n").unwrap();
        let _ = conn.read(&mut buf);
        String::from_utf8_lossy(&second).to_string()
    });
    let src = TestServer::start(&[]);
    let mut s = src.conn();
    let _: () = q(&mut s, &["MSET", "a", "1", "b", "2", "c", "3"]).unwrap();
    let mut waiting = src.raw();
    let p = port.to_string();
    waiting.send(&resp(&[
        "MIGRATE",
        "127.0.0.1",
        &p,
        "",
        "0",
        "5000",
        "KEYS",
        "a",
        "b",
        "c",
    ]));
    got_rx.recv_timeout(Duration::from_secs(5)).unwrap();
    let _: () = q(&mut s, &["SET", "b", "changed"]).unwrap();
    assert_eq!(int(&mut s, &["DEL", "c"]), 1);
    go_tx.send(()).unwrap();
    waiting.roundtrip(b"", b"+OK\r\n");
    let second = target.join().unwrap();
    assert!(
        !second.contains("\r\na\r\n"),
        "the unchanged key went once: {second:?}"
    );
    assert!(
        second.contains("\r\nb\r\n") && second.contains("changed") && second.contains("REPLACE"),
        "{second:?}"
    );
    assert!(
        second.contains("\r\nc\r\n") && second.contains("ABSTTL"),
        "{second:?}"
    );
    assert_eq!(int(&mut s, &["EXISTS", "a", "b", "c"]), 0);
}

/// MONITOR does not show the passwords given to AUTH or AUTH2.
#[test]
fn monitor_hides_passwords() {
    let src = TestServer::start(&[]);
    let mut s = src.conn();
    let mut mon = src.raw();
    mon.roundtrip(&resp(&["MONITOR"]), b"+OK\r\n");
    for auth in [&["AUTH", "sekret1"][..], &["AUTH2", "user", "sekret2"][..]] {
        let mut args = vec!["nokey", "0", "100"];
        args.extend_from_slice(auth);
        assert_eq!(migrate(&mut s, 1, &args).unwrap(), "NOKEY");
        let line = String::from_utf8_lossy(&mon.read_until(b"\r\n")).to_string();
        assert!(line.to_lowercase().contains("\"migrate\""), "{line}");
        assert!(line.contains("(redacted)"), "{line}");
        assert!(!line.contains("sekret"), "{line}");
    }
}
