//! The key space: expiry (lazy and active), SCAN, eviction, databases, INFO.

mod support;

use redis::Commands;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::{err_text, TestServer};

fn info_field(c: &mut redis::Connection, section: &str, field: &str) -> String {
    support::info_value(c, section, field).unwrap_or_default()
}

#[test]
fn expiry_is_exact_to_the_millisecond() {
    // The server's clock is moved, so the windows do not depend on how fast a loaded
    // machine runs the commands.
    let s = TestServer::start(&["--enable-debug-command", "yes"]);
    let mut c = s.conn();
    let advance = |c: &mut redis::Connection, ms: i64| {
        let _: () = redis::cmd("DEBUG")
            .arg("ADVANCE-CLOCK")
            .arg(ms)
            .query(c)
            .unwrap();
    };
    let _: () = redis::cmd("SET")
        .arg("k")
        .arg("v")
        .arg("PX")
        .arg(100_000)
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("SET").arg("h").arg("x").query(&mut c).unwrap();
    let _: bool = c.pexpire("h", 100_000).unwrap();
    advance(&mut c, 99_000);
    let v: Option<String> = c.get("k").unwrap();
    assert_eq!(v.as_deref(), Some("v"), "alive 1 s before its deadline");
    let ttl: i64 = c.pttl("k").unwrap();
    assert!((0..=1000).contains(&ttl), "{ttl}");
    // Exactly at the deadline (and however long the commands took): gone.
    advance(&mut c, 1000);
    let v: Option<String> = c.get("k").unwrap();
    assert_eq!(v, None, "gone at its deadline");
    let n: i64 = c.exists("h").unwrap();
    assert_eq!(n, 0);
    let ttl: i64 = c.pttl("k").unwrap();
    assert_eq!(ttl, -2);
}

/// DEBUG is refused unless `enable-debug-command` allows it, with Redis 7's text.
#[test]
fn debug_needs_enable_debug_command() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    let e = err_text(
        redis::cmd("DEBUG")
            .arg("ADVANCE-CLOCK")
            .arg(1)
            .query::<()>(&mut c),
    );
    assert!(e.contains("DEBUG command not allowed"), "{e}");
    let local = TestServer::start(&["--enable-debug-command", "local"]);
    let mut c = local.conn();
    let _: () = redis::cmd("DEBUG")
        .arg("SLEEP")
        .arg("0")
        .query(&mut c)
        .unwrap();
    let e = err_text(redis::cmd("DEBUG").arg("NOSUCH").query::<()>(&mut c));
    assert!(e.contains("Try DEBUG HELP"), "{e}");
}

#[test]
fn expired_keys_are_invisible_on_every_path() {
    let s = TestServer::start(&["--hz", "1"]);
    let mut c = s.conn();
    let _: () = redis::cmd("SET")
        .arg("k")
        .arg("5")
        .arg("PX")
        .arg(30)
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("HSET")
        .arg("h")
        .arg("f")
        .arg("v")
        .query(&mut c)
        .unwrap();
    let _: bool = c.pexpire("h", 30).unwrap();
    std::thread::sleep(Duration::from_millis(60));
    // The sweep runs once a second here: these must all see the keys as gone anyway.
    let keys: Vec<String> = c.keys("*").unwrap();
    assert!(keys.is_empty(), "{keys:?}");
    let (cur, found): (String, Vec<String>) = redis::cmd("SCAN").arg(0).query(&mut c).unwrap();
    assert_eq!((cur.as_str(), found.len()), ("0", 0));
    let t: String = redis::cmd("TYPE").arg("h").query(&mut c).unwrap();
    assert_eq!(t, "none");
    let n: i64 = c.incr("k", 1).unwrap();
    assert_eq!(n, 1, "INCR of an expired key starts from 0");
    let ttl: i64 = c.ttl("k").unwrap();
    assert_eq!(ttl, -1, "and has no deadline");
    let hl: i64 = c.hlen("h").unwrap();
    assert_eq!(hl, 0);
    assert_eq!(info_field(&mut c, "stats", "expired_keys"), "2");
}

#[test]
fn active_expiry_reclaims_without_reads() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    const N: usize = 100_000;
    let start = Instant::now();
    for chunk in (0..N).collect::<Vec<_>>().chunks(10_000) {
        let mut p = redis::pipe();
        for i in chunk {
            p.cmd("SET")
                .arg(format!("key:{i}"))
                .arg("value")
                .arg("EX")
                .arg(1)
                .ignore();
        }
        let _: () = p.query(&mut c).unwrap();
    }
    let loaded = Instant::now();
    let line = info_field(&mut c, "keyspace", "db0");
    let keys = line
        .strip_prefix("keys=")
        .and_then(|rest| rest.split(',').next())
        .unwrap_or_else(|| panic!("no keys= in INFO keyspace's db0: {line:?}"));
    assert!(line.contains(&format!(",expires={keys},")), "{line}");
    loop {
        let n: usize = redis::cmd("DBSIZE").query(&mut c).unwrap();
        if n == 0 {
            break;
        }
        assert!(
            loaded.elapsed() < Duration::from_secs(3),
            "{n} keys still there 3 s after loading (loading took {:?})",
            loaded - start
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(info_field(&mut c, "stats", "expired_keys"), N.to_string());
    assert_eq!(info_field(&mut c, "keyspace", "db0"), "");
    let used: u64 = info_field(&mut c, "memory", "used_memory_dataset")
        .parse()
        .unwrap();
    assert_eq!(used, 0, "the byte estimate goes back to zero");
}

#[test]
fn scan_sees_every_key_while_inserts_grow_the_tables() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    const BASE: usize = 20_000;
    let mut p = redis::pipe();
    for i in 0..BASE {
        p.cmd("SET").arg(format!("base:{i}")).arg(i).ignore();
    }
    let _: () = p.query(&mut c).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let stop = stop.clone();
        let mut w = s.conn();
        std::thread::spawn(move || {
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                let mut p = redis::pipe();
                for j in 0..500 {
                    p.cmd("SET").arg(format!("new:{}", i + j)).arg(1).ignore();
                }
                let _: () = p.query(&mut w).unwrap();
                i += 500;
            }
            i
        })
    };
    let mut seen = HashSet::new();
    let mut cursor = "0".to_string();
    loop {
        let (next, keys): (String, Vec<String>) = redis::cmd("SCAN")
            .arg(&cursor)
            .arg("MATCH")
            .arg("base:*")
            .arg("COUNT")
            .arg(100)
            .query(&mut c)
            .unwrap();
        seen.extend(keys);
        if next == "0" {
            break;
        }
        cursor = next;
        std::thread::sleep(Duration::from_micros(200));
    }
    stop.store(true, Ordering::Relaxed);
    let inserted = writer.join().unwrap();
    assert!(inserted > 0);
    for i in 0..BASE {
        assert!(seen.contains(&format!("base:{i}")), "base:{i} missed");
    }
    assert_eq!(seen.len(), BASE);
    // TYPE filter.
    let _: () = redis::cmd("HSET")
        .arg("ahash")
        .arg("f")
        .arg("v")
        .query(&mut c)
        .unwrap();
    let (_, keys): (String, Vec<String>) = redis::cmd("SCAN")
        .arg(0)
        .arg("TYPE")
        .arg("hash")
        .arg("COUNT")
        .arg(1_000_000)
        .query(&mut c)
        .unwrap();
    assert_eq!(keys, vec!["ahash".to_string()]);
}

#[test]
fn allkeys_lru_keeps_the_newest_keys() {
    let s = TestServer::start(&["--maxmemory-policy", "allkeys-lru"]);
    let mut c = s.conn();
    let val = "x".repeat(100);
    const OLD: usize = 20_000;
    const NEW: usize = 10_000;
    let mut p = redis::pipe();
    for i in 0..OLD {
        p.cmd("SET").arg(format!("old:{i}")).arg(&val).ignore();
    }
    let _: () = p.query(&mut c).unwrap();
    let used: u64 = info_field(&mut c, "memory", "used_memory").parse().unwrap();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg(used)
        .query(&mut c)
        .unwrap();
    // The LRU clock has a 100 ms resolution: make the new keys clearly younger.
    std::thread::sleep(Duration::from_millis(300));
    for chunk in (0..NEW).collect::<Vec<_>>().chunks(1000) {
        let mut p = redis::pipe();
        for i in chunk {
            p.cmd("SET").arg(format!("new:{i}")).arg(&val).ignore();
        }
        let _: () = p.query(&mut c).unwrap();
    }
    let mut p = redis::pipe();
    for i in 0..NEW {
        p.cmd("EXISTS").arg(format!("new:{i}"));
    }
    let exists: Vec<i64> = p.query(&mut c).unwrap();
    let kept_new: i64 = exists.iter().sum();
    let total: usize = redis::cmd("DBSIZE").query(&mut c).unwrap();
    let evicted: usize = info_field(&mut c, "stats", "evicted_keys").parse().unwrap();
    assert!(evicted >= NEW - 10, "evicted {evicted}");
    assert!(total <= OLD + 10, "dbsize {total}");
    assert!(
        kept_new as usize >= NEW * 99 / 100,
        "only {kept_new} of the {NEW} newest keys kept"
    );
    let used_now: u64 = info_field(&mut c, "memory", "used_memory").parse().unwrap();
    // used_memory is the whole process: the reply buffer of the 10,000-command pipeline
    // is still held when INFO runs (a read evicts nothing), as Redis counts client buffers.
    assert!(used_now <= used + 128 * 1024, "{used_now} > {used}");
}

#[test]
fn volatile_ttl_and_noeviction() {
    let s = TestServer::start(&["--maxmemory-policy", "volatile-ttl"]);
    let mut c = s.conn();
    let used = |c: &mut redis::Connection| -> u64 {
        info_field(c, "memory", "used_memory").parse().unwrap()
    };
    for i in 0..100 {
        let _: () = c.set(format!("keep:{i}"), "v").unwrap();
    }
    let before = used(&mut c);
    for i in 0..100 {
        let _: () = c.set_ex(format!("soon:{i}"), "v", 100 + i as u64).unwrap();
    }
    let after = used(&mut c);
    let per_key = (after - before) / 100;
    // Room for about half of the 50 keys to come: the rest must be made by eviction.
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg(after + 25 * per_key)
        .query(&mut c)
        .unwrap();
    for i in 0..50 {
        let _: () = c.set_ex(format!("late:{i}"), "v", 10_000).unwrap();
    }
    for i in 0..100 {
        let e: bool = c.exists(format!("keep:{i}")).unwrap();
        assert!(e, "volatile-ttl never evicts keys without a deadline");
    }
    // The soonest deadlines go first. Eviction samples (as Redis's does), so which key goes
    // is not certain: count instead of naming one.
    let gone = |c: &mut redis::Connection, prefix: &str, n: usize| -> usize {
        (0..n)
            .filter(|i| !c.exists::<_, bool>(format!("{prefix}:{i}")).unwrap())
            .count()
    };
    let soon_gone = gone(&mut c, "soon", 100);
    let late_gone = gone(&mut c, "late", 50);
    assert!(soon_gone >= 10, "eviction made room: {soon_gone} evicted");
    // A deleted key gives back its allocations but not its table slot (tables keep their
    // size under churn), so eviction may run through every short deadline; the long ones go
    // only when short ones are (nearly) exhausted.
    assert!(
        soon_gone >= 95 || soon_gone > 4 * late_gone,
        "short deadlines go first: {soon_gone} soon vs {late_gone} late evicted"
    );

    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory-policy")
        .arg("noeviction")
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg(1)
        .query(&mut c)
        .unwrap();
    assert_eq!(
        err_text(c.set::<_, _, ()>("x", "y")),
        "OOM command not allowed when used memory > 'maxmemory'."
    );
    // Reads and deletions still work.
    let v: Option<String> = c.get("keep:1").unwrap();
    assert_eq!(v.as_deref(), Some("v"));
    let n: i64 = c.del("keep:1").unwrap();
    assert_eq!(n, 1);
}

#[test]
fn object_and_memory_usage() {
    let s = TestServer::start(&["--maxmemory-policy", "allkeys-lfu"]);
    let mut c = s.conn();
    let _: () = c.set("k", "v").unwrap();
    for _ in 0..100 {
        let _: String = c.get("k").unwrap();
    }
    let f: i64 = redis::cmd("OBJECT")
        .arg("FREQ")
        .arg("k")
        .query(&mut c)
        .unwrap();
    assert!(f > 5, "freq {f}");
    assert!(err_text(
        redis::cmd("OBJECT")
            .arg("IDLETIME")
            .arg("k")
            .query::<i64>(&mut c)
    )
    .starts_with("ERR An LFU maxmemory policy is selected"));
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory-policy")
        .arg("allkeys-lru")
        .query(&mut c)
        .unwrap();
    // As in Redis, the access word switches meaning with the policy: the next access sets it.
    let _: String = c.get("k").unwrap();
    let idle: i64 = redis::cmd("OBJECT")
        .arg("IDLETIME")
        .arg("k")
        .query(&mut c)
        .unwrap();
    assert!((0..5).contains(&idle));
    let m: i64 = redis::cmd("MEMORY")
        .arg("USAGE")
        .arg("k")
        .query(&mut c)
        .unwrap();
    assert!(m > 0 && m < 500, "{m}");
    let _: () = c.set("big", "x".repeat(10_000)).unwrap();
    let m2: i64 = redis::cmd("MEMORY")
        .arg("USAGE")
        .arg("big")
        .arg("SAMPLES")
        .arg(0)
        .query(&mut c)
        .unwrap();
    assert!(m2 > 10_000, "{m2}");
    let enc: String = redis::cmd("OBJECT")
        .arg("ENCODING")
        .arg("big")
        .query(&mut c)
        .unwrap();
    assert_eq!(enc, "raw");
}

#[test]
fn databases_flush_swap_copy() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    let _: () = c.set("a", "0").unwrap();
    let _: () = redis::cmd("SELECT").arg(3).query(&mut c).unwrap();
    let _: () = c.set("b", "3").unwrap();
    let _: () = redis::cmd("SWAPDB").arg(0).arg(3).query(&mut c).unwrap();
    let v: Option<String> = c.get("a").unwrap();
    assert_eq!(v.as_deref(), Some("0"), "db 3 now holds what db 0 held");
    let n: i64 = redis::cmd("COPY")
        .arg("a")
        .arg("a")
        .arg("DB")
        .arg(5)
        .query(&mut c)
        .unwrap();
    assert_eq!(n, 1);
    let _: () = redis::cmd("SELECT").arg(5).query(&mut c).unwrap();
    let v: Option<String> = c.get("a").unwrap();
    assert_eq!(v.as_deref(), Some("0"));
    let r: Option<String> = redis::cmd("RANDOMKEY").query(&mut c).unwrap();
    assert_eq!(r.as_deref(), Some("a"));
    let mut p = redis::pipe();
    for i in 0..10_000 {
        p.cmd("SET")
            .arg(format!("k{i}"))
            .arg("x".repeat(50))
            .ignore();
    }
    let _: () = p.query(&mut c).unwrap();
    let before: u64 = info_field(&mut c, "memory", "used_memory_dataset")
        .parse()
        .unwrap();
    assert!(before > 10_000 * 50);
    let _: () = redis::cmd("FLUSHALL").arg("ASYNC").query(&mut c).unwrap();
    let n: usize = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(n, 0);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let used: u64 = info_field(&mut c, "memory", "used_memory_dataset")
            .parse()
            .unwrap();
        if used == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "memory not given back: {used}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn multi_key_commands_are_atomic() {
    let s = TestServer::start(&[]);
    // One client MSETs pairs with equal values while another MGETs them: it must never see
    // a half-applied MSET even though the keys live in different shards.
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let stop = stop.clone();
        let mut w = s.conn();
        std::thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let _: () = redis::cmd("MSET")
                    .arg("ka")
                    .arg(i)
                    .arg("kb")
                    .arg(i)
                    .arg("kc")
                    .arg(i)
                    .arg("kd")
                    .arg(i)
                    .query(&mut w)
                    .unwrap();
                i += 1;
            }
        })
    };
    let mut c = s.conn();
    for _ in 0..2000 {
        let v: Vec<Option<u64>> = redis::cmd("MGET")
            .arg("ka")
            .arg("kb")
            .arg("kc")
            .arg("kd")
            .query(&mut c)
            .unwrap();
        assert!(v.windows(2).all(|w| w[0] == w[1]), "torn MSET: {v:?}");
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    let n: i64 = redis::cmd("DEL")
        .arg("ka")
        .arg("kb")
        .arg("kc")
        .arg("kd")
        .arg("nokey")
        .query(&mut c)
        .unwrap();
    assert_eq!(n, 4);
}

#[test]
fn unlink_frees_large_values_in_the_background() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    let members: Vec<String> = (0..10_000).map(|i| format!("m{i}")).collect();
    let _: i64 = c.sadd("big", &members).unwrap();
    let _: i64 = c.sadd("small", "one").unwrap();
    let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query(&mut c).unwrap();
    // A value of one allocation is freed in place, as Redis's LAZYFREE_THRESHOLD decides.
    let n: i64 = redis::cmd("UNLINK").arg("small").query(&mut c).unwrap();
    assert_eq!(n, 1);
    assert_eq!(info_field(&mut c, "stats", "lazyfreed_objects"), "0");
    // 10k hashtable members: handed to the lazyfree thread, counted once freed.
    let n: i64 = redis::cmd("UNLINK").arg("big").query(&mut c).unwrap();
    assert_eq!(n, 1);
    assert!(support::eventually(5.0, || info_field(
        &mut c,
        "stats",
        "lazyfreed_objects"
    ) == "1"));
    assert_eq!(
        info_field(&mut c, "memory", "lazyfree_pending_objects"),
        "0"
    );
    let exists: i64 = c.exists("big").unwrap();
    assert_eq!(exists, 0);
}

#[test]
fn maxmemory_bounds_the_whole_process() {
    // 20 MB of 1 KB values into an 8 MB server: used_memory (every heap block of the
    // process, connection buffers included) never ends a batch above maxmemory.
    let limit: u64 = 8 << 20;
    let s = TestServer::start(&[
        "--maxmemory",
        &limit.to_string(),
        "--maxmemory-policy",
        "allkeys-lru",
    ]);
    let mut c = s.conn();
    let value = "x".repeat(1024);
    let mut worst = 0u64;
    for batch in 0..200 {
        let mut p = redis::pipe();
        for i in 0..100 {
            p.cmd("SET")
                .arg(format!("k:{batch}:{i}"))
                .arg(&value)
                .ignore();
        }
        let _: () = p.query(&mut c).unwrap();
        let used: u64 = info_field(&mut c, "memory", "used_memory").parse().unwrap();
        worst = worst.max(used);
    }
    // The connection keeps its read buffer between requests (as Redis keeps its query
    // buffer), so the room it leaves is gone by the time INFO runs: INFO's own reply, built
    // after the last write's eviction, may take used_memory a few KB past the limit.
    assert!(
        worst <= limit + 16 * 1024,
        "used_memory reached {worst} with maxmemory {limit}"
    );
    let evicted: u64 = info_field(&mut c, "stats", "evicted_keys").parse().unwrap();
    assert!(evicted > 5_000, "evicted {evicted}");
    let keys: i64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert!(keys > 3_000, "only {keys} keys left");
}

/// As Redis's processCommand: eviction runs before every command once maxmemory is set, a
/// read included, so the limit holds after it is lowered even if no write follows.
#[test]
fn a_read_evicts_once_over_maxmemory() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    let big = "v".repeat(10_000);
    for i in 0..500 {
        let _: () = c.set(format!("k{i}"), &big).expect("set");
    }
    let used: u64 = support::info_value(&mut c, "memory", "used_memory")
        .and_then(|v| v.parse().ok())
        .expect("used_memory");
    let _: () = redis::cmd("CONFIG")
        .arg(&["SET", "maxmemory-policy", "allkeys-lru"])
        .query(&mut c)
        .expect("policy");
    let _: () = redis::cmd("CONFIG")
        .arg(&["SET", "maxmemory", &(used - 2_000_000).to_string()])
        .query(&mut c)
        .expect("maxmemory");
    let n: i64 = redis::cmd("DBSIZE").query(&mut c).expect("dbsize");
    let _: () = redis::cmd("CONFIG")
        .arg(&["SET", "maxmemory", "0"])
        .query(&mut c)
        .expect("maxmemory");
    assert!(n < 500, "DBSIZE {n}: nothing was evicted before the read");
}

/// A pipeline's keys are looked up ahead of its commands (`Store::warm`) without changing
/// what the commands see: keys past their deadline expire when a command reaches them, each
/// `expired` event in its place among the pipeline's other events, and a SELECT inside the
/// pipeline moves the commands after it to the other database. Longer than one warm-up's
/// 32 requests.
#[test]
fn pipelined_lookups_see_what_one_by_one_lookups_see() {
    let s = TestServer::start(&["--enable-debug-command", "yes"]);
    let mut c = s.conn();
    let run = |c: &mut redis::Connection, args: &[&str]| {
        let _: redis::Value = redis::cmd(args[0]).arg(&args[1..]).query(c).unwrap();
    };
    run(&mut c, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
    run(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "Exg"]);
    for i in 0..40 {
        let ttl = if i % 2 == 0 { "1000" } else { "600000" };
        run(
            &mut c,
            &["SET", &format!("k{i}"), &i.to_string(), "PX", ttl],
        );
    }
    run(&mut c, &["SELECT", "1"]);
    run(&mut c, &["SET", "k0", "db1"]);
    run(&mut c, &["SELECT", "0"]);
    let mut sub = s.conn();
    let mut ps = sub.as_pubsub();
    ps.psubscribe("__keyevent@0__:*").unwrap();
    ps.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    run(&mut c, &["DEBUG", "ADVANCE-CLOCK", "2000"]);
    let dbsize: i64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(dbsize, 40, "nothing expired before a command reached it");

    // GET k0..k19, DEL k39, GET k20..k39, then k0 of database 1.
    let mut p = redis::pipe();
    for i in 0..20 {
        p.cmd("GET").arg(format!("k{i}"));
    }
    p.cmd("DEL").arg("k39").ignore();
    for i in 20..40 {
        p.cmd("GET").arg(format!("k{i}"));
    }
    p.cmd("SELECT").arg(1).ignore();
    p.cmd("GET").arg("k0");
    p.cmd("SELECT").arg(0).ignore();
    let got: Vec<Option<String>> = p.query(&mut c).unwrap();
    let want: Vec<Option<String>> = (0..40)
        .map(|i| (i % 2 == 1 && i != 39).then(|| i.to_string()))
        .chain([Some("db1".to_string())])
        .collect();
    assert_eq!(got, want);
    let dbsize: i64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(dbsize, 19);
    let events: Vec<String> = (0..21)
        .map(|_| {
            let m = ps.get_message().expect("event");
            let key: String = m.get_payload().unwrap();
            let event = m
                .get_channel_name()
                .rsplit(':')
                .next()
                .unwrap_or("")
                .to_string();
            format!("{event} {key}")
        })
        .collect();
    let want: Vec<String> = (0..20)
        .step_by(2)
        .map(|i| format!("expired k{i}"))
        .chain(["del k39".to_string()])
        .chain((20..40).step_by(2).map(|i| format!("expired k{i}")))
        .collect();
    assert_eq!(events, want);
}
