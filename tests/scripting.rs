//! EVAL / EVALSHA / SCRIPT: conversions, errors, the sandbox, the lock pattern under
//! contention and atomicity across shards.

mod support;

use redis::Value;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use support::{err_text, int, q, TestServer};

fn eval<T: redis::FromRedisValue>(
    c: &mut redis::Connection,
    script: &str,
    keys: &[&str],
    args: &[&str],
) -> redis::RedisResult<T> {
    let mut cmd = redis::cmd("EVAL");
    cmd.arg(script).arg(keys.len());
    for k in keys {
        cmd.arg(*k);
    }
    for a in args {
        cmd.arg(*a);
    }
    cmd.query(c)
}

#[test]
fn conversions() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    assert_eq!(eval::<i64>(&mut c, "return 100.5", &[], &[]).unwrap(), 100);
    assert_eq!(eval::<i64>(&mut c, "return -3.99", &[], &[]).unwrap(), -3);
    assert_eq!(
        eval::<String>(&mut c, "return 'hello'", &[], &[]).unwrap(),
        "hello"
    );
    assert_eq!(eval::<i64>(&mut c, "return true", &[], &[]).unwrap(), 1);
    assert_eq!(
        eval::<Value>(&mut c, "return false", &[], &[]).unwrap(),
        Value::Nil
    );
    assert_eq!(
        eval::<Value>(&mut c, "return nil", &[], &[]).unwrap(),
        Value::Nil
    );
    assert_eq!(
        eval::<Value>(&mut c, "return {ok='fine'}", &[], &[]).unwrap(),
        Value::SimpleString("fine".into())
    );
    assert_eq!(
        err_text(eval::<Value>(&mut c, "return {err='MY error'}", &[], &[])),
        "MY error"
    );
    // Arrays stop at the first nil; nested tables nest.
    let v: Value = eval(&mut c, "return {1, 'two', {3, 'four'}, nil, 5}", &[], &[]).unwrap();
    assert_eq!(
        v,
        Value::Array(vec![
            Value::Int(1),
            Value::BulkString(b"two".to_vec()),
            Value::Array(vec![Value::Int(3), Value::BulkString(b"four".to_vec())]),
        ])
    );
    // KEYS and ARGV.
    let v: Vec<String> = eval(
        &mut c,
        "return {KEYS[1], KEYS[2], ARGV[1], ARGV[2]}",
        &["a", "b"],
        &["c", "d"],
    )
    .unwrap();
    assert_eq!(v, ["a", "b", "c", "d"]);
    // Redis -> Lua: integers are numbers, bulks strings, nil bulks false, status {ok=}.
    q::<()>(&mut c, &["SET", "x", "10"]).unwrap();
    assert_eq!(
        eval::<String>(&mut c, "return type(redis.call('incr', 'x'))", &[], &[]).unwrap(),
        "number"
    );
    assert_eq!(
        eval::<String>(&mut c, "return type(redis.call('get', 'x'))", &[], &[]).unwrap(),
        "string"
    );
    assert_eq!(
        eval::<String>(
            &mut c,
            "return tostring(redis.call('get', 'nokey'))",
            &[],
            &[]
        )
        .unwrap(),
        "false"
    );
    assert_eq!(
        eval::<String>(&mut c, "return redis.call('set', 'y', 1)['ok']", &[], &[]).unwrap(),
        "OK"
    );
    // Numbers passed to redis.call are written with 17 significant digits.
    assert_eq!(
        eval::<String>(
            &mut c,
            "redis.call('set', 'f', 0.1) return redis.call('get', 'f')",
            &[],
            &[]
        )
        .unwrap(),
        "0.10000000000000001"
    );
    // RESP3 under setresp(3): a map comes back as {map=...}.
    q::<()>(&mut c, &["HSET", "h", "f", "v"]).unwrap();
    assert_eq!(
        eval::<String>(
            &mut c,
            "redis.setresp(3) return redis.call('hgetall', 'h')['map']['f']",
            &[],
            &[]
        )
        .unwrap(),
        "v"
    );
    assert_eq!(
        eval::<String>(
            &mut c,
            "return redis.sha1hex('Pizza & Mandolino')",
            &[],
            &[]
        )
        .unwrap(),
        "74822d82031af7493c20eefa13bd07ec4fada82f"
    );
    assert_eq!(
        eval::<String>(&mut c, "return cjson.encode({1, 2, 'a/b'})", &[], &[]).unwrap(),
        "[1,2,\"a\\/b\"]"
    );
    assert_eq!(
        eval::<String>(
            &mut c,
            "return cjson.decode('{\"a\":[1,2,{\"b\":\"c\"}]}').a[3].b",
            &[],
            &[]
        )
        .unwrap(),
        "c"
    );
    assert_eq!(
        eval::<i64>(&mut c, "return bit.bor(1, 2, 4, 8)", &[], &[]).unwrap(),
        15
    );
}

#[test]
fn errors_and_cache() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    let e = err_text(eval::<Value>(
        &mut c,
        "return redis.call('nosuch')",
        &[],
        &[],
    ));
    assert_eq!(e, "ERR Unknown Redis command called from script script: 206396248e12c6e742fd7296250433c8d7343b74, on @user_script:1.");
    let e = err_text(eval::<Value>(
        &mut c,
        "return redis.call('incr', 'a', 'b')",
        &[],
        &[],
    ));
    assert!(
        e.starts_with("ERR Wrong number of args calling Redis command from script"),
        "{e}"
    );
    q::<()>(&mut c, &["SET", "s", "x"]).unwrap();
    let e = err_text(eval::<Value>(
        &mut c,
        "return redis.call('lpush', KEYS[1], 'x')",
        &["s"],
        &[],
    ));
    assert!(
        e.starts_with("WRONGTYPE Operation against a key holding the wrong kind of value script: "),
        "{e}"
    );
    // pcall gives the error table back instead.
    assert_eq!(
        eval::<String>(
            &mut c,
            "return redis.pcall('lpush', KEYS[1], 'x')['err']",
            &["s"],
            &[]
        )
        .unwrap(),
        "WRONGTYPE Operation against a key holding the wrong kind of value"
    );
    let e = err_text(eval::<Value>(&mut c, "error('boom')", &[], &[]));
    assert!(e.starts_with("ERR user_script:1: boom script: "), "{e}");
    let e = err_text(eval::<Value>(
        &mut c,
        "return redis.call('eval', 'return 1', 0)",
        &[],
        &[],
    ));
    assert!(
        e.starts_with("ERR This Redis command is not allowed from script"),
        "{e}"
    );
    let e = err_text(eval::<Value>(&mut c, "return 'a", &[], &[]));
    assert_eq!(
        e,
        "ERR Error compiling script (new function): user_script:1: unfinished string near '<eof>'"
    );
    // The sandbox.
    let e = err_text(eval::<Value>(&mut c, "return undefined_thing", &[], &[]));
    assert!(
        e.contains("Script attempted to access nonexistent global variable 'undefined_thing'"),
        "{e}"
    );
    for script in [
        "x = 1",
        "redis.call = 1",
        "setmetatable(_G, {})",
        "cjson.encode = nil",
        "_G = {}",
    ] {
        let e = err_text(eval::<Value>(&mut c, script, &[], &[]));
        assert!(
            e.contains("Attempt to modify a readonly table"),
            "{script}: {e}"
        );
    }
    for name in ["os", "io", "loadfile", "dofile", "print", "require"] {
        let e = err_text(eval::<Value>(&mut c, &format!("return {name}"), &[], &[]));
        assert!(e.contains("nonexistent global variable"), "{name}: {e}");
    }
    // Read-only scripts.
    let mut ro = redis::cmd("EVAL_RO");
    ro.arg("return redis.call('set', 'k', 'v')").arg(0);
    let e = err_text(ro.query::<Value>(&mut c));
    assert!(
        e.starts_with("ERR Write commands are not allowed from read-only scripts."),
        "{e}"
    );
    let e = err_text(eval::<Value>(
        &mut c,
        "#!lua flags=no-writes\nreturn redis.call('del', 'k')",
        &[],
        &[],
    ));
    assert!(
        e.starts_with("ERR Write commands are not allowed from read-only scripts."),
        "{e}"
    );
    let e = err_text(eval::<Value>(
        &mut c,
        "#!lua flags=bogus\nreturn 1",
        &[],
        &[],
    ));
    assert_eq!(e, "ERR Unexpected flag in script shebang: bogus");
    // Key count checks.
    let e = err_text(q::<Value>(&mut c, &["EVAL", "return 1", "2", "a"]));
    assert_eq!(e, "ERR Number of keys can't be greater than number of args");
    assert_eq!(
        err_text(q::<Value>(&mut c, &["EVAL", "return 1", "-1"])),
        "ERR Number of keys can't be negative"
    );
    // The cache.
    let sha: String = q(&mut c, &["SCRIPT", "LOAD", "return 'loaded'"]).unwrap();
    assert_eq!(sha, "b534286061d4b9e4026607613b95c06c06015ae8");
    assert_eq!(
        q::<String>(&mut c, &["EVALSHA", &sha.to_uppercase(), "0"]).unwrap(),
        "loaded"
    );
    assert_eq!(
        q::<Vec<i64>>(
            &mut c,
            &[
                "SCRIPT",
                "EXISTS",
                &sha,
                "ffffffffffffffffffffffffffffffffffffffff"
            ]
        )
        .unwrap(),
        [1, 0]
    );
    assert_eq!(q::<String>(&mut c, &["SCRIPT", "FLUSH"]).unwrap(), "OK");
    assert_eq!(
        err_text(q::<Value>(&mut c, &["EVALSHA", &sha, "0"])),
        "NOSCRIPT No matching script. Please use EVAL."
    );
    assert_eq!(
        err_text(q::<Value>(&mut c, &["EVALSHA", "abc", "0"])),
        "NOSCRIPT No matching script. Please use EVAL."
    );
    assert_eq!(
        err_text(q::<Value>(&mut c, &["SCRIPT", "KILL"])),
        "NOTBUSY No scripts in execution right now."
    );
    // SELECT inside a script does not move the caller.
    q::<()>(&mut c, &["SET", "k0", "db0"]).unwrap();
    let _: Value = eval(
        &mut c,
        "redis.call('select', 1) redis.call('set', 'k1', 'db1')",
        &[],
        &[],
    )
    .unwrap();
    assert_eq!(q::<String>(&mut c, &["GET", "k0"]).unwrap(), "db0");
    // INFO inside a script reads the cache's counters without taking the engine's lock.
    let info: String = eval(&mut c, "return redis.call('info', 'memory')", &[], &[]).unwrap();
    assert!(info.contains("number_of_cached_scripts:"), "{info}");
    // Blocking commands are refused (NOSCRIPT in Redis 7.0).
    let e = err_text(eval::<Value>(
        &mut c,
        "return redis.call('blpop', 'nolist', 0)",
        &[],
        &[],
    ));
    assert!(e.contains("not allowed from script"), "{e}");
}

const ACQUIRE: &str = "return redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])";
const RELEASE: &str = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";
const EXTEND: &str = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end";

/// Eight clients contend for one lock (SET NX PX, compare-and-delete, compare-and-PEXPIRE):
/// never two holders at once.
#[test]
fn lock_pattern_never_two_holders() {
    let s = Arc::new(TestServer::start(&[]));
    let holders = Arc::new(AtomicI64::new(0));
    let acquired = Arc::new(AtomicI64::new(0));
    let bad = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = (0..8)
        .map(|i| {
            let s = s.clone();
            let holders = holders.clone();
            let acquired = acquired.clone();
            let bad = bad.clone();
            std::thread::spawn(move || {
                let mut c = s.conn();
                let token = format!("client-{i}");
                let mut mine = 0;
                while mine < 25 {
                    let got: Value = eval(&mut c, ACQUIRE, &["lock"], &[&token, "10000"]).unwrap();
                    if got != Value::Okay {
                        continue;
                    }
                    if holders.fetch_add(1, Ordering::SeqCst) != 0 {
                        bad.store(true, Ordering::SeqCst);
                    }
                    let ext: i64 = eval(&mut c, EXTEND, &["lock"], &[&token, "10000"]).unwrap();
                    assert_eq!(ext, 1);
                    // Another client's token never releases it.
                    let other: i64 = eval(&mut c, RELEASE, &["lock"], &["someone-else"]).unwrap();
                    assert_eq!(other, 0);
                    holders.fetch_sub(1, Ordering::SeqCst);
                    let rel: i64 = eval(&mut c, RELEASE, &["lock"], &[&token]).unwrap();
                    assert_eq!(rel, 1);
                    mine += 1;
                    acquired.fetch_add(1, Ordering::SeqCst);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert!(!bad.load(Ordering::SeqCst), "two holders at once");
    assert_eq!(acquired.load(Ordering::SeqCst), 200);
}

/// A script moving value between keys on different shards (not declared as keys) is never
/// seen half done by other clients, and other clients' writes never land in its middle.
#[test]
fn scripts_are_atomic_across_shards() {
    let s = Arc::new(TestServer::start(&[]));
    let mut c = s.conn();
    let keys: Vec<String> = (0..16).map(|i| format!("acct:{i}")).collect();
    for k in &keys {
        q::<()>(&mut c, &["SET", k, "100"]).unwrap();
    }
    // Moves one unit around the ring of 16 keys, reading the key names from ARGV.
    let transfer = "for i = 1, #ARGV do local from = ARGV[i] local to = ARGV[(i % #ARGV) + 1] \
                    redis.call('decrby', from, 1) redis.call('incrby', to, 1) end \
                    local sum = 0 for i = 1, #ARGV do sum = sum + tonumber(redis.call('get', ARGV[i])) end return sum";
    let stop = Arc::new(AtomicBool::new(false));
    let checkers: Vec<_> = (0..3)
        .map(|_| {
            let s = s.clone();
            let stop = stop.clone();
            let keys = keys.clone();
            std::thread::spawn(move || {
                let mut c = s.conn();
                let mut reads = 0;
                while !stop.load(Ordering::SeqCst) || reads < 50 {
                    let mut cmd = redis::cmd("MGET");
                    for k in &keys {
                        cmd.arg(k);
                    }
                    let vals: Vec<i64> = cmd.query(&mut c).unwrap();
                    assert_eq!(vals.iter().sum::<i64>(), 1600, "saw a script half done");
                    reads += 1;
                }
            })
        })
        .collect();
    let writers: Vec<_> = (0..3)
        .map(|_| {
            let s = s.clone();
            let keys = keys.clone();
            std::thread::spawn(move || {
                let mut c = s.conn();
                for _ in 0..100 {
                    let refs: Vec<&str> = keys.iter().map(|k| k.as_str()).collect();
                    let sum: i64 = eval(&mut c, transfer, &[], &refs).unwrap();
                    assert_eq!(sum, 1600);
                }
            })
        })
        .collect();
    // Another client writes a key the script reads; a script never sees it change midway.
    let mut w = s.conn();
    let probe =
        "local a = redis.call('get', 'probe') for i = 1, 200 do redis.call('incr', 'scratch') end \
                 return (a == redis.call('get', 'probe')) and 1 or 0";
    let pw = {
        let s = s.clone();
        std::thread::spawn(move || {
            let mut c = s.conn();
            for i in 0..500 {
                q::<()>(&mut c, &["SET", "probe", &i.to_string()]).unwrap();
            }
        })
    };
    for _ in 0..50 {
        assert_eq!(eval::<i64>(&mut w, probe, &[], &[]).unwrap(), 1);
    }
    for t in writers {
        t.join().unwrap();
    }
    stop.store(true, Ordering::SeqCst);
    for t in checkers {
        t.join().unwrap();
    }
    pw.join().unwrap();
    assert_eq!(int(&mut c, &["GET", "scratch"]), 50 * 200);
}

/// A client blocked on a list is served after a script that pushes to it, with what the
/// script left there.
#[test]
fn blocked_client_served_after_script() {
    let s = Arc::new(TestServer::start(&[]));
    let waiter = {
        let s = s.clone();
        std::thread::spawn(move || {
            let mut c = s.conn();
            q::<Vec<String>>(&mut c, &["BLPOP", "queue", "5"]).unwrap()
        })
    };
    let mut c = s.conn();
    assert!(support::eventually(3.0, || {
        support::info_value(&mut c, "clients", "blocked_clients").as_deref() == Some("1")
    }));
    let n: i64 = eval(
        &mut c,
        "redis.call('rpush', KEYS[1], 'first', 'second') return redis.call('llen', KEYS[1])",
        &["queue"],
        &[],
    )
    .unwrap();
    assert_eq!(n, 2);
    assert_eq!(waiter.join().unwrap(), ["queue", "first"]);
}

#[test]
fn scripts_inside_multi() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    q::<()>(&mut c, &["MULTI"]).unwrap();
    q::<()>(
        &mut c,
        &["EVAL", "return redis.call('incr', KEYS[1])", "1", "m"],
    )
    .unwrap();
    q::<()>(
        &mut c,
        &["EVAL", "return redis.call('incr', KEYS[1])", "1", "m"],
    )
    .unwrap();
    let v: Vec<i64> = q(&mut c, &["EXEC"]).unwrap();
    assert_eq!(v, [1, 2]);
}

/// A script that runs past `busy-reply-threshold` without writing is stopped with an error
/// (no other client could send SCRIPT KILL while it holds the server); one that wrote runs to
/// its end, so no half of its writes is left behind.
/// A script past busy-reply-threshold: others get BUSY (only the ALLOW_BUSY commands run),
/// SCRIPT KILL stops it unless it wrote (UNKILLABLE then), NOTBUSY when nothing runs, and
/// FUNCTION KILL does not kill an EVAL.
#[test]
fn busy_script_kill_and_unkillable() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    // The old name of the setting, as Redis 7 accepts it.
    let _: () = q(&mut c, &["CONFIG", "SET", "lua-time-limit", "50"]).unwrap();
    let got: Vec<String> = q(&mut c, &["CONFIG", "GET", "busy-reply-threshold"]).unwrap();
    assert_eq!(got, ["busy-reply-threshold", "50"]);
    let e = err_text(q::<String>(&mut c, &["SCRIPT", "KILL"]));
    assert_eq!(e, "NOTBUSY No scripts in execution right now.");

    let client = s.client();
    let runner = std::thread::spawn(move || {
        let mut r = client.get_connection().unwrap();
        err_text(q::<String>(
            &mut r,
            &["EVAL", "local a = 1 while true do a = a + 1 end", "0"],
        ))
    });
    assert!(support::eventually(5.0, || {
        q::<String>(&mut c, &["PING"]).is_err_and(|e| e.code() == Some("BUSY"))
    }));
    let e = err_text(q::<String>(&mut c, &["GET", "x"]));
    assert_eq!(
        e,
        "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."
    );
    // MULTI is allowed; a command queued meanwhile is refused and aborts the transaction.
    let _: () = q(&mut c, &["MULTI"]).unwrap();
    assert!(err_text(q::<String>(&mut c, &["INCR", "x"])).starts_with("BUSY"));
    // Inside MULTI a KILL would be queued: another connection sends it.
    let mut c2 = s.conn();
    let e = err_text(q::<String>(&mut c2, &["FUNCTION", "KILL"]));
    assert!(e.starts_with("BUSY"), "{e}");
    let _: () = q(&mut c2, &["SCRIPT", "KILL"]).unwrap();
    let e = runner.join().unwrap();
    assert!(
        e.contains("Script killed by user with SCRIPT KILL..."),
        "{e}"
    );
    let e = err_text(q::<String>(&mut c, &["EXEC"]));
    assert!(e.starts_with("EXECABORT"), "{e}");
    assert_eq!(q::<String>(&mut c, &["PING"]).unwrap(), "PONG");

    // A script that wrote cannot be killed; it ends by itself and its write stays.
    let client = s.client();
    let runner = std::thread::spawn(move || {
        let mut r = client.get_connection().unwrap();
        q::<i64>(
            &mut r,
            &[
                "EVAL",
                "redis.call('set','w','1') local t = 0 for i = 1, 30000000 do t = t + 1 end return t",
                "0",
            ],
        )
    });
    assert!(support::eventually(5.0, || {
        q::<String>(&mut c, &["PING"]).is_err_and(|e| e.code() == Some("BUSY"))
    }));
    let e = err_text(q::<String>(&mut c, &["SCRIPT", "KILL"]));
    assert!(
        e.starts_with("UNKILLABLE Sorry the script already executed write commands"),
        "{e}"
    );
    assert_eq!(runner.join().unwrap().unwrap(), 30_000_000);
    assert_eq!(q::<String>(&mut c, &["GET", "w"]).unwrap(), "1");

    // EXEC sent before the script goes busy waits for the gate, then answers BUSY instead of
    // holding its I/O thread until the script ends.
    let _: () = q(&mut c, &["CONFIG", "SET", "busy-reply-threshold", "300"]).unwrap();
    let _: () = q(&mut c, &["MULTI"]).unwrap();
    assert_eq!(q::<String>(&mut c, &["INCR", "x"]).unwrap(), "QUEUED");
    let client = s.client();
    let runner = std::thread::spawn(move || {
        let mut r = client.get_connection().unwrap();
        err_text(q::<String>(
            &mut r,
            &["EVAL", "local a = 1 while true do a = a + 1 end", "0"],
        ))
    });
    std::thread::sleep(std::time::Duration::from_millis(100));
    let e = err_text(q::<Value>(&mut c, &["EXEC"]));
    assert!(
        e.starts_with("EXECABORT Transaction discarded because of: BUSY"),
        "{e}"
    );
    let _: () = q(&mut c2, &["SCRIPT", "KILL"]).unwrap();
    assert!(runner.join().unwrap().contains("Script killed"));
    assert_eq!(q::<Option<String>>(&mut c, &["GET", "x"]).unwrap(), None);
    let _: () = q(&mut c, &["CONFIG", "SET", "busy-reply-threshold", "50"]).unwrap();

    // A killed script cannot catch its kill with pcall.
    let client = s.client();
    let runner = std::thread::spawn(move || {
        let mut r = client.get_connection().unwrap();
        err_text(q::<String>(
            &mut r,
            &[
                "EVAL",
                "while true do pcall(function() local a = 1 while true do a = a + 1 end end) end",
                "0",
            ],
        ))
    });
    assert!(support::eventually(5.0, || {
        q::<String>(&mut c, &["SCRIPT", "KILL"]).is_ok()
    }));
    assert!(runner.join().unwrap().contains("Script killed"));
}

/// The struct library: pack/unpack/size with lua_struct.c's sizes, alignment and errors.
#[test]
fn struct_library() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    let v: Vec<i64> = eval(
        &mut c,
        "return {struct.unpack('HB', struct.pack('HB', 300, 7))}",
        &[],
        &[],
    )
    .unwrap();
    assert_eq!(v, [300, 7, 4]);
    let b: Vec<u8> = eval(
        &mut c,
        "return struct.pack('>i2!4d<Ls', -5, 1.5, 123456789, 'abc')",
        &[],
        &[],
    )
    .unwrap();
    assert_eq!(
        b,
        [
            0xff, 0xfb, 0, 0, 0x3f, 0xf8, 0, 0, 0, 0, 0, 0, 0x15, 0xcd, 0x5b, 0x07, 0, 0, 0, 0,
            b'a', b'b', b'c', 0
        ]
    );
    assert_eq!(
        eval::<i64>(&mut c, "return struct.size('>i2!4d')", &[], &[]).unwrap(),
        12
    );
    let e = err_text(eval::<Value>(
        &mut c,
        "return struct.pack('z', 1)",
        &[],
        &[],
    ));
    assert!(
        e.starts_with("ERR user_script:1: bad argument #1 to 'pack' (invalid format option 'z')"),
        "{e}"
    );
    let e = err_text(eval::<Value>(
        &mut c,
        "return struct.unpack('i', 'ab')",
        &[],
        &[],
    ));
    assert!(
        e.contains("bad argument #2 to 'unpack' (data string too short)"),
        "{e}"
    );
    let e = err_text(eval::<Value>(&mut c, "struct.x = 1", &[], &[]));
    assert!(e.contains("Attempt to modify a readonly table"), "{e}");
}

/// Scripts that go busy and end by themselves, one after another, with other scripts sent
/// meanwhile: every client gets its answer (a script that went busy hands the gate back, and
/// its thread must not wait for the gate the next script holds).
#[test]
fn busy_scripts_back_to_back() {
    let s = TestServer::start(&["--busy-reply-threshold", "20"]);
    let mut c = s.conn();
    c.set_read_timeout(Some(std::time::Duration::from_secs(20)))
        .unwrap();
    for round in 0..3 {
        let client = s.client();
        let runner = std::thread::spawn(move || {
            let mut r = client.get_connection().unwrap();
            r.set_read_timeout(Some(std::time::Duration::from_secs(20)))
                .unwrap();
            q::<i64>(
                &mut r,
                &[
                    "EVAL",
                    "local t = 0 for i = 1, 20000000 do t = t + 1 end return t",
                    "0",
                ],
            )
        });
        let mut busy = 0;
        let mut ok = 0;
        while ok < 5 {
            match eval::<i64>(&mut c, "redis.call('incr', KEYS[1]) return 1", &["n"], &[]) {
                Ok(1) => ok += 1,
                Ok(v) => panic!("{v}"),
                Err(e) if e.code() == Some("BUSY") => busy += 1,
                Err(e) => panic!("round {round}: {e}"),
            }
        }
        assert_eq!(runner.join().unwrap().unwrap(), 20_000_000);
        let _ = busy;
    }
    assert_eq!(int(&mut c, &["GET", "n"]), 15);
}

fn conn_with_timeout(s: &TestServer) -> redis::Connection {
    let c = s.conn();
    c.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    c
}

/// With io-threads 2 a script runs on its caller's runtime thread and, once it has run a
/// few milliseconds, hands that thread's runtime worker to another thread. Many connections
/// (so some share the script's worker, others are on the other one): every one hears BUSY
/// past busy-reply-threshold, SCRIPT KILL from any of them stops the script, and then all
/// are served again.
#[test]
fn busy_script_heard_by_clients_on_every_worker() {
    let s = TestServer::start(&["--io-threads", "2", "--busy-reply-threshold", "50"]);
    let mut conns: Vec<redis::Connection> = (0..16).map(|_| conn_with_timeout(&s)).collect();
    for c in conns.iter_mut() {
        assert_eq!(q::<String>(c, &["PING"]).unwrap(), "PONG");
    }
    for round in 0..2 {
        let client = s.client();
        let runner = std::thread::spawn(move || {
            let mut r = client.get_connection().unwrap();
            err_text(q::<String>(
                &mut r,
                &["EVAL", "local a = 1 while true do a = a + 1 end", "0"],
            ))
        });
        assert!(support::eventually(5.0, || {
            q::<String>(&mut conns[0], &["PING"]).is_err_and(|e| e.code() == Some("BUSY"))
        }));
        for (i, c) in conns.iter_mut().enumerate() {
            let e = err_text(q::<String>(c, &["GET", "x"]));
            assert!(
                e.starts_with("BUSY Redis is busy running a script."),
                "{i}: {e}"
            );
        }
        // Round 0 kills from the last connection, round 1 from the first.
        let killer = if round == 0 { conns.len() - 1 } else { 0 };
        let _: () = q(&mut conns[killer], &["SCRIPT", "KILL"]).unwrap();
        let e = runner.join().unwrap();
        assert!(
            e.contains("Script killed by user with SCRIPT KILL..."),
            "{e}"
        );
        for c in conns.iter_mut() {
            assert_eq!(q::<String>(c, &["PING"]).unwrap(), "PONG");
        }
    }
}

/// With io-threads 2 (scripts inline): scripts queued in MULTI run under EXEC, a client
/// blocked on a list is served after the script that pushed to it (with what the script left
/// there), and a script's writes are atomic to the other clients.
#[test]
fn inline_scripts_multi_blocked_clients_and_atomicity() {
    let s = Arc::new(TestServer::start(&["--io-threads", "2"]));
    let mut c = conn_with_timeout(&s);
    q::<()>(&mut c, &["MULTI"]).unwrap();
    for _ in 0..2 {
        q::<()>(
            &mut c,
            &["EVAL", "return redis.call('incr', KEYS[1])", "1", "m"],
        )
        .unwrap();
    }
    let v: Vec<i64> = q(&mut c, &["EXEC"]).unwrap();
    assert_eq!(v, [1, 2]);

    let waiter = {
        let s = s.clone();
        std::thread::spawn(move || {
            let mut c = s.conn();
            q::<Vec<String>>(&mut c, &["BLPOP", "queue", "5"]).unwrap()
        })
    };
    assert!(support::eventually(3.0, || {
        support::info_value(&mut c, "clients", "blocked_clients").as_deref() == Some("1")
    }));
    let n: i64 = eval(
        &mut c,
        "redis.call('rpush', KEYS[1], 'first', 'second') return redis.call('llen', KEYS[1])",
        &["queue"],
        &[],
    )
    .unwrap();
    assert_eq!(n, 2);
    assert_eq!(waiter.join().unwrap(), ["queue", "first"]);

    // Two keys on (most likely) different shards move together: a reader never sees one
    // without the other, while scripts run from several connections at once.
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..3)
        .map(|_| {
            let s = s.clone();
            std::thread::spawn(move || {
                let mut c = s.conn();
                for _ in 0..300 {
                    let _: i64 = eval(
                        &mut c,
                        "redis.call('incr', KEYS[1]) redis.call('incr', KEYS[2]) return 1",
                        &["a{1}", "b{2}"],
                        &[],
                    )
                    .unwrap();
                }
            })
        })
        .collect();
    let reader = {
        let s = s.clone();
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut c = s.conn();
            let mut reads = 0;
            while !stop.load(Ordering::Relaxed) {
                let v: Vec<Option<i64>> = q(&mut c, &["MGET", "a{1}", "b{2}"]).unwrap();
                assert_eq!(v[0], v[1], "a script's writes seen half done");
                reads += 1;
            }
            reads
        })
    };
    for w in writers {
        w.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    assert!(reader.join().unwrap() > 0);
    assert_eq!(q::<i64>(&mut c, &["GET", "a{1}"]).unwrap(), 900);
}

/// min-replicas-to-write (no replicas here: writes are refused), CLUSTER (cluster support
/// disabled, CLUSTER RESET not allowed from a script) and SORT BY a constant from a script
/// (sorted, as Redis 7.0 does for scripts).
#[test]
fn min_replicas_cluster_and_sort_from_scripts() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    const NOREPLICAS: &str = "NOREPLICAS Not enough good replicas to write.";
    q::<()>(&mut c, &["SET", "x", "v"]).unwrap();
    q::<()>(&mut c, &["CONFIG", "SET", "min-replicas-to-write", "1"]).unwrap();
    assert_eq!(err_text(q::<()>(&mut c, &["SET", "x", "1"])), NOREPLICAS);
    let v: String = eval(
        &mut c,
        "#!lua flags=no-writes\nreturn redis.call('get','x')",
        &[],
        &[],
    )
    .unwrap();
    assert_eq!(v, "v");
    let e = err_text(eval::<String>(
        &mut c,
        "#!lua\nreturn redis.call('get','x')",
        &[],
        &[],
    ));
    assert_eq!(e, NOREPLICAS);
    let e = err_text(eval::<String>(
        &mut c,
        "return redis.call('set','x','1')",
        &[],
        &[],
    ));
    assert!(e.starts_with(NOREPLICAS), "{e}");
    q::<()>(&mut c, &["MULTI"]).unwrap();
    assert_eq!(err_text(q::<()>(&mut c, &["SET", "x", "2"])), NOREPLICAS);
    assert!(err_text(q::<()>(&mut c, &["EXEC"])).starts_with("EXECABORT"));
    // A lag of 0 turns the check off (the old name of the setting, as Redis accepts it).
    q::<()>(&mut c, &["CONFIG", "SET", "min-slaves-max-lag", "0"]).unwrap();
    q::<()>(&mut c, &["SET", "x", "3"]).unwrap();
    q::<()>(&mut c, &["CONFIG", "SET", "min-replicas-max-lag", "10"]).unwrap();
    q::<()>(&mut c, &["CONFIG", "SET", "min-replicas-to-write", "0"]).unwrap();
    q::<()>(&mut c, &["SET", "x", "4"]).unwrap();

    let e = err_text(q::<String>(&mut c, &["CLUSTER", "INFO"]));
    assert_eq!(e, "ERR This instance has cluster support disabled");
    let e = err_text(eval::<String>(
        &mut c,
        "return redis.call('cluster','reset','hard')",
        &[],
        &[],
    ));
    assert!(
        e.contains("This Redis command is not allowed from script"),
        "{e}"
    );

    q::<()>(&mut c, &["SADD", "myset", "c", "a", "b", "d"]).unwrap();
    let v: Vec<String> = eval(
        &mut c,
        "return redis.call('sort',KEYS[1],'by','_')",
        &["myset"],
        &[],
    )
    .unwrap();
    assert_eq!(v, ["a", "b", "c", "d"]);
}

/// Many distinct scripts and library functions stay cached without exhausting the Lua
/// state: each cached one once held a handle in mlua's bounded auxiliary stack, and the
/// ~7,500th distinct EVAL panicked (and so did every script after it). Found by fuzzing.
#[test]
fn ten_thousand_distinct_scripts_and_functions() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    let mut p = redis::pipe();
    for i in 0..10_000 {
        p.cmd("EVAL").arg(format!("return {i}")).arg(0);
    }
    let got: Vec<i64> = p.query(&mut c).unwrap();
    assert_eq!(got.len(), 10_000);
    assert_eq!(got[9_999], 9_999);
    let n: i64 = eval(&mut c, "return 42", &[], &[]).unwrap();
    assert_eq!(n, 42);
    // Libraries: 100 of 100 functions each.
    for lib in 0..100 {
        let mut body = format!("#!lua name=lib{lib}\n");
        for f in 0..100 {
            body.push_str(&format!(
                "redis.register_function('f{lib}_{f}', function() return {f} end)\n"
            ));
        }
        let _: String = q(&mut c, &["FUNCTION", "LOAD", &body]).unwrap();
    }
    let v: i64 = q(&mut c, &["FCALL", "f99_99", "0"]).unwrap();
    assert_eq!(v, 99);
}

/// MONITOR shows the commands a script runs as Redis does: from `lua`, after the script's
/// own line.
#[test]
fn monitor_shows_script_commands_from_lua() {
    let s = TestServer::start(&[]);
    let mut m = s.raw();
    m.send(&support::resp(&["MONITOR"]));
    m.read_until(b"+OK\r\n");
    let mut c = s.conn();
    let _: () = eval(
        &mut c,
        "redis.call('set',KEYS[1],ARGV[1])",
        &["foo"],
        &["bar"],
    )
    .unwrap();
    let got =
        String::from_utf8_lossy(&m.read_until(b"[0 lua] \"set\" \"foo\" \"bar\"\r\n")).into_owned();
    assert!(got.contains("\"EVAL\""), "{got}");
}

/// KEYS and ARGV of any count and any bytes, and redis.call's arguments: strings as they
/// are, numbers as C's `%.17g` (Redis 7.0's luaArgsToRedisArgv), each value kept by the
/// command intact while later calls reuse the buffer the arguments are read into.
#[test]
fn keys_argv_and_call_arguments() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    let many: Vec<String> = (1..=12).map(|i| format!("v{i}")).collect();
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    let got: Vec<String> = eval(
        &mut c,
        "return {#KEYS, #ARGV, KEYS[1], KEYS[5], ARGV[1], ARGV[7]}",
        &many[..5],
        &many[5..],
    )
    .unwrap();
    assert_eq!(got, ["5", "7", "v1", "v5", "v6", "v12"].map(String::from));
    // A key that is not UTF-8 reaches the script and the command byte for byte.
    let raw: Vec<u8> = vec![0xff, 0x00, 0xfe];
    let n: i64 = redis::cmd("EVAL")
        .arg("redis.call('set', KEYS[1], ARGV[1]) return #KEYS[1]")
        .arg(1)
        .arg(&raw[..])
        .arg(&raw[..])
        .query(&mut c)
        .unwrap();
    assert_eq!(n, 3);
    let back: Vec<u8> = redis::cmd("GET").arg(&raw[..]).query(&mut c).unwrap();
    assert_eq!(back, raw);
    for (expr, text) in [
        ("1e16", "10000000000000000"),
        ("1e17", "1e+17"),
        ("-0.5", "-0.5"),
        ("0.1", "0.10000000000000001"),
        ("123", "123"),
    ] {
        let script = format!("redis.call('set', 'num', {expr}) return redis.call('get', 'num')");
        let got: String = eval(&mut c, &script, &[], &[]).unwrap();
        assert_eq!(got, text, "{expr}");
    }
    // One script writes many values, then reads them all back.
    let got: i64 = eval(
        &mut c,
        "for i = 1, 200 do redis.call('set', 'k' .. i, string.rep('x', i)) end \
         local ok = 0 \
         for i = 1, 200 do if redis.call('get', 'k' .. i) == string.rep('x', i) then ok = ok + 1 end end \
         return ok",
        &[],
        &[],
    )
    .unwrap();
    assert_eq!(got, 200);
    for i in [1usize, 77, 200] {
        let v: String = q(&mut c, &["GET", &format!("k{i}")]).unwrap();
        assert_eq!(v, "x".repeat(i));
    }
    let e = err_text(eval::<Value>(
        &mut c,
        "return redis.call('set', 'k', {})",
        &[],
        &[],
    ));
    assert!(
        e.starts_with("ERR Lua redis lib command arguments must be strings or integers"),
        "{e}"
    );
}
