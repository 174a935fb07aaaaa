//! String commands through the `redis` crate (byte-exact replies are compared with
//! redis-server in tests/compare_redis.rs).

mod support;

use redis::Commands;
use support::{err_text, TestServer};

#[test]
fn set_options() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    let r: Option<String> = redis::cmd("SET")
        .arg("k")
        .arg("v1")
        .arg("NX")
        .query(&mut c)
        .unwrap();
    assert_eq!(r.as_deref(), Some("OK"));
    let r: Option<String> = redis::cmd("SET")
        .arg("k")
        .arg("v2")
        .arg("NX")
        .query(&mut c)
        .unwrap();
    assert_eq!(r, None);
    let r: Option<String> = redis::cmd("SET")
        .arg("k")
        .arg("v3")
        .arg("XX")
        .arg("GET")
        .query(&mut c)
        .unwrap();
    assert_eq!(r.as_deref(), Some("v1"));
    let _: () = redis::cmd("SET")
        .arg("k")
        .arg("v")
        .arg("EX")
        .arg(100)
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg("k")
        .arg("w")
        .arg("KEEPTTL")
        .query(&mut c)
        .unwrap();
    let t: i64 = c.ttl("k").unwrap();
    assert!((99..=100).contains(&t));
    let at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
        + 50_000;
    let _: () = redis::cmd("SET")
        .arg("k")
        .arg("v")
        .arg("PXAT")
        .arg(at)
        .query(&mut c)
        .unwrap();
    let pat: i64 = redis::cmd("PEXPIRETIME").arg("k").query(&mut c).unwrap();
    assert_eq!(pat, at);
    let _: () = redis::cmd("SET")
        .arg("k")
        .arg("v")
        .arg("EXAT")
        .arg(at / 1000)
        .query(&mut c)
        .unwrap();
    let t: i64 = redis::cmd("EXPIRETIME").arg("k").query(&mut c).unwrap();
    assert_eq!(t, at / 1000);
    // A deadline in the past deletes the key.
    let _: () = redis::cmd("SET")
        .arg("k")
        .arg("v")
        .arg("PXAT")
        .arg(1)
        .query(&mut c)
        .unwrap();
    let e: bool = c.exists("k").unwrap();
    assert!(!e);
    assert_eq!(
        err_text(
            redis::cmd("SET")
                .arg("k")
                .arg("v")
                .arg("EX")
                .arg(0)
                .query::<()>(&mut c)
        ),
        "ERR invalid expire time in 'set' command"
    );
    assert_eq!(
        err_text(
            redis::cmd("SET")
                .arg("k")
                .arg("v")
                .arg("EX")
                .arg(1)
                .arg("PX")
                .arg(1)
                .query::<()>(&mut c)
        ),
        "ERR syntax error"
    );
    let _: () = c.hset("h", "f", "v").unwrap();
    assert_eq!(
        err_text(
            redis::cmd("SET")
                .arg("h")
                .arg("v")
                .arg("GET")
                .query::<()>(&mut c)
        ),
        "WRONGTYPE Operation against a key holding the wrong kind of value"
    );
    let _: () = c.set("h", "now a string").unwrap();
    let t: String = redis::cmd("TYPE").arg("h").query(&mut c).unwrap();
    assert_eq!(t, "string");
}

#[test]
fn getex_getdel_getset_setex() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    let _: () = c.set("k", "v").unwrap();
    let v: String = redis::cmd("GETEX")
        .arg("k")
        .arg("PX")
        .arg(5000)
        .query(&mut c)
        .unwrap();
    assert_eq!(v, "v");
    let t: i64 = c.pttl("k").unwrap();
    assert!(t > 4000 && t <= 5000);
    let _: String = redis::cmd("GETEX")
        .arg("k")
        .arg("PERSIST")
        .query(&mut c)
        .unwrap();
    let t: i64 = c.ttl("k").unwrap();
    assert_eq!(t, -1);
    let v: String = c.getset("k", "w").unwrap();
    assert_eq!(v, "v");
    let v: String = redis::cmd("GETDEL").arg("k").query(&mut c).unwrap();
    assert_eq!(v, "w");
    let v: Option<String> = redis::cmd("GETDEL").arg("k").query(&mut c).unwrap();
    assert_eq!(v, None);
    let _: () = redis::cmd("SETEX")
        .arg("k")
        .arg(10)
        .arg("v")
        .query(&mut c)
        .unwrap();
    let t: i64 = c.ttl("k").unwrap();
    assert_eq!(t, 10);
    let _: () = redis::cmd("PSETEX")
        .arg("k")
        .arg(10_000)
        .arg("v")
        .query(&mut c)
        .unwrap();
    let n: i64 = redis::cmd("SETNX").arg("k").arg("x").query(&mut c).unwrap();
    assert_eq!(n, 0);
    let n: i64 = redis::cmd("SETNX")
        .arg("k2")
        .arg("x")
        .query(&mut c)
        .unwrap();
    assert_eq!(n, 1);
}

#[test]
fn counters_from_eight_concurrent_clients() {
    let s = TestServer::start(&[]);
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let mut c = s.conn();
            std::thread::spawn(move || {
                for _ in 0..500 {
                    let _: i64 = c.incr("counter", 1).unwrap();
                    let _: i64 = c.incr("by3", 3).unwrap();
                    let _: i64 = c.hincr("h", "f", 2).unwrap();
                    let _: f64 = redis::cmd("INCRBYFLOAT")
                        .arg("fl")
                        .arg("0.5")
                        .query(&mut c)
                        .unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let mut c = s.conn();
    let n: i64 = c.get("counter").unwrap();
    assert_eq!(n, 4000);
    let n: i64 = c.get("by3").unwrap();
    assert_eq!(n, 12000);
    let n: i64 = c.hget("h", "f").unwrap();
    assert_eq!(n, 8000);
    let f: String = c.get("fl").unwrap();
    assert_eq!(f, "2000");
}

#[test]
fn integer_and_float_errors() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    let _: () = c.set("max", i64::MAX).unwrap();
    assert_eq!(
        err_text(c.incr::<_, _, i64>("max", 1)),
        "ERR increment or decrement would overflow"
    );
    let _: () = c.set("s", "abc").unwrap();
    assert_eq!(
        err_text(c.incr::<_, _, i64>("s", 1)),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        err_text(
            redis::cmd("INCRBYFLOAT")
                .arg("s")
                .arg(1)
                .query::<f64>(&mut c)
        ),
        "ERR value is not a valid float"
    );
    let _: () = c.set("f", "1e308").unwrap();
    assert_eq!(
        err_text(
            redis::cmd("INCRBYFLOAT")
                .arg("f")
                .arg("1e308")
                .query::<f64>(&mut c)
        ),
        "ERR increment would produce NaN or Infinity"
    );
    let enc: String = redis::cmd("OBJECT")
        .arg("ENCODING")
        .arg("max")
        .query(&mut c)
        .unwrap();
    assert_eq!(enc, "int");
}

#[test]
fn ranges_append_mset() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    let n: i64 = c.append("s", "Hello").unwrap();
    assert_eq!(n, 5);
    let n: i64 = c.append("s", " World").unwrap();
    assert_eq!(n, 11);
    let r: String = c.getrange("s", -5, -1).unwrap();
    assert_eq!(r, "World");
    let n: i64 = c.setrange("s", 6, "Redis").unwrap();
    assert_eq!(n, 11);
    let v: String = c.get("s").unwrap();
    assert_eq!(v, "Hello Redis");
    let n: i64 = c.setrange("p", 2, "x").unwrap();
    assert_eq!(n, 3);
    let v: Vec<u8> = c.get("p").unwrap();
    assert_eq!(v, b"\0\0x");
    let n: i64 = c.strlen("p").unwrap();
    assert_eq!(n, 3);
    assert_eq!(
        err_text(c.setrange::<_, _, i64>("p", 536_870_912, "x")),
        "ERR string exceeds maximum allowed size (proto-max-bulk-len)"
    );
    let _: () = redis::cmd("MSET")
        .arg("a")
        .arg(1)
        .arg("b")
        .arg(2)
        .query(&mut c)
        .unwrap();
    let v: Vec<Option<String>> = redis::cmd("MGET")
        .arg("a")
        .arg("nokey")
        .arg("b")
        .query(&mut c)
        .unwrap();
    assert_eq!(v, vec![Some("1".into()), None, Some("2".into())]);
    let n: i64 = redis::cmd("MSETNX")
        .arg("a")
        .arg(9)
        .arg("z")
        .arg(9)
        .query(&mut c)
        .unwrap();
    assert_eq!(n, 0);
    let e: bool = c.exists("z").unwrap();
    assert!(!e, "MSETNX sets nothing when one key exists");
    assert_eq!(
        err_text(
            redis::cmd("MSET")
                .arg("a")
                .arg(1)
                .arg("b")
                .query::<()>(&mut c)
        ),
        "ERR wrong number of arguments for 'mset' command"
    );
}
