//! Rewriting the journal and saving snapshots, end to end (real binary, `redis` crate):
//! BGREWRITEAOF while clients write loses nothing (a restart gives back exactly what was
//! there), a `kill -9` during a rewrite loses nothing acknowledged, the manifest switches
//! to the new base and incremental file and the old files go, automatic rewrites start on
//! growth, `redis-check-aof` accepts the directory, functions and documents come back, and
//! SAVE writes a `dump.rdb` that redis-server 7 and tidecache both load.

mod support;

use redis::Value;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use support::{check_aof, err_text, eventually, info_value, int, q, strs, TestServer};

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tidecache-rewrite-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

fn start(dir: &Path, extra: &[&str]) -> TestServer {
    let mut args = vec![
        "--dir",
        dir.to_str().expect("utf-8 path"),
        "--appendonly",
        "yes",
        "--auto-aof-rewrite-percentage",
        "0",
    ];
    args.extend_from_slice(extra);
    TestServer::start(&args)
}

/// Every key of databases 0 to 3 with its type, content (in a canonical order) and absolute
/// deadline, the documents of two collections, and the loaded function libraries.
fn state(c: &mut redis::Connection) -> Vec<String> {
    let mut out = Vec::new();
    for db in ["0", "1", "2", "3"] {
        let _: () = q(c, &["SELECT", db]).expect("select");
        let mut keys = strs(c, &["KEYS", "*"]);
        keys.sort();
        for k in keys {
            let t: String = q(c, &["TYPE", &k]).expect("type");
            let content: Vec<String> = match t.as_str() {
                "string" => {
                    let v: Vec<u8> = q(c, &["GET", &k]).expect("get");
                    vec![format!("{v:?}")]
                }
                "list" => strs(c, &["LRANGE", &k, "0", "-1"]),
                "set" => {
                    let mut m = strs(c, &["SMEMBERS", &k]);
                    m.sort();
                    m
                }
                "hash" => {
                    let m = strs(c, &["HGETALL", &k]);
                    let mut pairs: Vec<String> = m.chunks(2).map(|p| p.join("=")).collect();
                    pairs.sort();
                    pairs
                }
                "zset" => strs(c, &["ZRANGE", &k, "0", "-1", "WITHSCORES"]),
                "stream" => {
                    let v: Value = q(c, &["XRANGE", &k, "-", "+"]).expect("xrange");
                    let g: Value = q(c, &["XINFO", "GROUPS", &k]).expect("xinfo");
                    let mut out = vec![format!("{v:?}"), format!("{g:?}")];
                    // Each group's pending entries (the summary form: no idle times).
                    let groups: Vec<Vec<Value>> = q(c, &["XINFO", "GROUPS", &k]).expect("xinfo");
                    for g in groups {
                        let name = g
                            .chunks(2)
                            .find(|p| matches!(&p[0], Value::BulkString(b) if b == b"name"))
                            .map(|p| redis::from_redis_value::<String>(p[1].clone()))
                            .and_then(|r| r.ok())
                            .expect("group name");
                        let p: Value = q(c, &["XPENDING", &k, &name]).expect("xpending");
                        out.push(format!("{name}: {p:?}"));
                    }
                    let info: Vec<Value> = q(c, &["XINFO", "STREAM", &k]).expect("xinfo");
                    for f in info.chunks(2) {
                        let name = format!("{:?}", f[0]);
                        // The layout of nodes is each server's own; the rest must match.
                        if !name.contains("radix-tree") {
                            out.push(format!("{name}={:?}", f[1]));
                        }
                    }
                    out
                }
                other => vec![other.to_string()],
            };
            let at = int(c, &["PEXPIRETIME", &k]);
            out.push(format!("db{db} {k} {t} {content:?} at={at}"));
        }
    }
    for db in ["0", "1", "2", "3"] {
        let _: () = q(c, &["SELECT", db]).expect("select");
        // (redis-server has no collections: nothing is listed there.)
        let mut colls: Vec<String> = q(c, &["DOC.COLLECTIONS"]).unwrap_or_default();
        colls.sort();
        for coll in colls {
            let docs = strs(c, &["DOC.FIND", &coll, "{}", "SORT", r#"{"_id":1}"#]);
            out.push(format!("coll db{db} {coll}: {docs:?}"));
            let ix = strs(c, &["DOC.INDEXES", &coll]);
            out.push(format!("coll db{db} {coll} indexes: {ix:?}"));
        }
    }
    let _: () = q(c, &["SELECT", "0"]).expect("select");
    let f: Value = q(c, &["FUNCTION", "LIST", "WITHCODE"]).expect("function list");
    out.push(format!("functions: {f:?}"));
    out
}

/// Keys of every type (some with deadlines, in several databases), a stream with a group
/// and a pending entry, a function library, collections with a unique index, a TTL index,
/// a capped collection and a change stream.
fn fill(c: &mut redis::Connection, n: usize) {
    let mut p = redis::pipe();
    for i in 0..n {
        p.cmd("SET")
            .arg(format!("k{i}"))
            .arg(format!("v{i}"))
            .ignore();
        if i.is_multiple_of(3) {
            p.cmd("PEXPIRE")
                .arg(format!("k{i}"))
                .arg(3_600_000)
                .ignore();
        }
        if i.is_multiple_of(10) {
            p.cmd("HSET")
                .arg(format!("h{}", i % 50))
                .arg(format!("f{i}"))
                .arg(i)
                .ignore();
            p.cmd("RPUSH").arg(format!("l{}", i % 7)).arg(i).ignore();
            p.cmd("SADD").arg(format!("s{}", i % 5)).arg(i).ignore();
            p.cmd("ZADD")
                .arg(format!("z{}", i % 5))
                .arg(i)
                .arg(format!("m{i}"))
                .ignore();
        }
    }
    let _: () = p.query(c).expect("fill");
    let cmds: &[&[&str]] = &[
        &["XADD", "x", "1-1", "f", "1"],
        &["XADD", "x", "2-1", "f", "2"],
        &["XGROUP", "CREATE", "x", "g", "0"],
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "alice",
            "COUNT",
            "1",
            "STREAMS",
            "x",
            ">",
        ],
        // An empty stream whose last ID is 0-0 (XADD could not create it).
        &["XGROUP", "CREATE", "e0", "g", "$", "MKSTREAM"],
        &[
            "FUNCTION",
            "LOAD",
            "#!lua name=lib1\nredis.register_function('one', function() return 1 end)",
        ],
        &["SELECT", "2"],
        &["SET", "in2", "x", "PX", "7000000"],
        &["LPUSH", "l2", "x", "y"],
        &["SELECT", "0"],
        &["DOC.CREATE", "people"],
        &["DOC.CREATEINDEX", "people", r#"{"name":1}"#, "UNIQUE"],
        &["DOC.INSERT", "people", r#"{"_id":1,"name":"ann"}"#],
        &[
            "DOC.INSERT",
            "people",
            r#"{"_id":2,"name":"bob","age":30.5}"#,
        ],
        &["DOC.EXPIREINDEX", "people", "at", "3600"],
        &[
            "DOC.CREATE",
            "events",
            "CAPPED",
            "SIZE",
            "100000",
            "MAX",
            "50",
            "CHANGES",
            "feed",
        ],
        &["DOC.INSERT", "events", r#"{"_id":1,"e":"start"}"#],
    ];
    for cmd in cmds {
        let r: redis::RedisResult<Value> = q(c, cmd);
        assert!(r.is_ok(), "{cmd:?}: {r:?}");
    }
}

/// Asserts two states are equal, showing the first difference (shortened) and its place.
fn same(want: &[String], got: &[String], what: &str) {
    let short = |s: &str| s.chars().take(400).collect::<String>();
    for (i, (w, g)) in want.iter().zip(got).enumerate() {
        assert!(
            w == g,
            "{what}: line {i} differs:\n want {}\n got  {}",
            short(w),
            short(g)
        );
    }
    assert_eq!(want.len(), got.len(), "{what}: line counts differ");
}

fn rewrite_done(c: &mut redis::Connection) -> bool {
    eventually(60.0, || {
        info_value(c, "persistence", "aof_rewrite_in_progress").as_deref() == Some("0")
            && info_value(c, "persistence", "aof_rewrite_scheduled").as_deref() == Some("0")
    })
}

fn manifest(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("appendonlydir/appendonly.aof.manifest")).expect("manifest")
}

/// Writers of every kind run while the journal is rewritten three times (counters, list
/// pushes, a hash, deletions, SWAPDB, a MULTI block, documents); after they stop, a restart
/// on the rewritten directory gives back exactly the same state: nothing lost, nothing
/// applied twice (the counters would show it).
#[test]
fn a_rewrite_under_load_loses_nothing() {
    let dir = temp_dir("load");
    let s = start(&dir, &[]);
    let mut c = s.conn();
    fill(&mut c, 20_000);
    let stop = Arc::new(AtomicBool::new(false));
    let mut workers = Vec::new();
    for w in 0..4 {
        let client = s.client();
        let stop = stop.clone();
        workers.push(std::thread::spawn(move || {
            let mut c = client.get_connection().expect("connect");
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                let k = format!("k{}", (i * 7919 + w) % 20_000);
                let _: i64 = q(&mut c, &["INCR", &format!("ctr{w}")]).expect("incr");
                let _: i64 = q(&mut c, &["RPUSH", &format!("l{w}"), &i.to_string()]).expect("push");
                let _: i64 = q(&mut c, &["HINCRBY", "hw", &format!("f{w}"), "1"]).expect("hincr");
                let _: Value = q(&mut c, &["APPEND", &k, "+"]).expect("append");
                if i.is_multiple_of(5) {
                    let _: i64 =
                        q(&mut c, &["DEL", &format!("k{}", (i * 31 + w) % 20_000)]).expect("del");
                }
                if i.is_multiple_of(7) {
                    let r: Value = redis::pipe()
                        .atomic()
                        .cmd("INCR")
                        .arg("tx_a")
                        .cmd("INCRBY")
                        .arg("tx_b")
                        .arg(2)
                        .query(&mut c)
                        .expect("exec");
                    assert!(matches!(r, Value::Array(_)), "{r:?}");
                }
                if w == 0 && i.is_multiple_of(50) {
                    let _: () = q(&mut c, &["SELECT", "1"]).expect("select");
                    let _: i64 = q(&mut c, &["INCR", "in1"]).expect("incr");
                    // A collection that moves with its database.
                    let d = format!(r#"{{"_id":{i},"w":{w}}}"#);
                    let _: Value = q(&mut c, &["DOC.INSERT", "moving", &d]).expect("insert");
                    let _: () = q(&mut c, &["SWAPDB", "1", "3"]).expect("swapdb");
                    let _: () = q(&mut c, &["SELECT", "0"]).expect("select");
                }
                if w == 1 && i.is_multiple_of(10) {
                    let d = format!(r#"{{"_id":{},"name":"w{i}"}}"#, 100 + i % 300);
                    let _: Value = q(
                        &mut c,
                        &[
                            "DOC.UPDATE",
                            "people",
                            &format!(r#"{{"_id":{}}}"#, 100 + i % 300),
                            &format!(r#"{{"$inc":{{"n":1}},"$set":{{"name":"w{i}"}}}}"#),
                            "UPSERT",
                        ],
                    )
                    .unwrap_or_else(|e| panic!("{d}: {e}"));
                    let _: Value =
                        q(&mut c, &["DOC.INSERT", "events", r#"{"e":"tick"}"#]).expect("insert");
                }
            }
            i
        }));
    }
    for round in 0..3 {
        std::thread::sleep(Duration::from_millis(150));
        let r: String = q(&mut c, &["BGREWRITEAOF"]).expect("bgrewriteaof");
        assert_eq!(
            r, "Background append only file rewriting started",
            "round {round}"
        );
        assert!(
            rewrite_done(&mut c),
            "round {round}: rewrite did not finish"
        );
    }
    std::thread::sleep(Duration::from_millis(100));
    stop.store(true, Ordering::Relaxed);
    let ops: u64 = workers.into_iter().map(|w| w.join().expect("worker")).sum();
    assert!(ops > 20, "the writers hardly ran: {ops}");
    assert_eq!(
        info_value(&mut c, "persistence", "aof_rewrites").as_deref(),
        Some("3")
    );
    assert_eq!(
        info_value(&mut c, "persistence", "aof_last_bgrewrite_status").as_deref(),
        Some("ok")
    );
    let before = state(&mut c);
    drop(c);
    drop(s);
    assert_eq!(
        manifest(&dir),
        "file appendonly.aof.4.base.aof seq 4 type b\nfile appendonly.aof.4.incr.aof seq 4 type i\n"
    );
    let s = start(&dir, &[]);
    let mut c = s.conn();
    let after = state(&mut c);
    same(&before, &after, "after the restart");
    drop(c);
    drop(s);
    check_aof(&dir);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The manifest names the new base and incremental file after a rewrite, the old files
/// are gone, INFO reports the sizes, and BGREWRITEAOF answers as Redis 7.0.
#[test]
fn the_manifest_switches_and_old_files_go() {
    let dir = temp_dir("manifest");
    let s = start(&dir, &[]);
    let mut c = s.conn();
    fill(&mut c, 2000);
    let aof = dir.join("appendonlydir");
    assert!(aof.join("appendonly.aof.1.incr.aof").exists());
    let r: String = q(&mut c, &["BGREWRITEAOF"]).expect("bgrewriteaof");
    assert_eq!(r, "Background append only file rewriting started");
    assert!(rewrite_done(&mut c));
    assert_eq!(
        manifest(&dir),
        "file appendonly.aof.2.base.aof seq 2 type b\nfile appendonly.aof.2.incr.aof seq 2 type i\n"
    );
    assert!(!aof.join("appendonly.aof.1.incr.aof").exists());
    assert!(!aof.join("appendonly.aof.1.base.aof").exists());
    let base_len = std::fs::metadata(aof.join("appendonly.aof.2.base.aof"))
        .expect("base")
        .len();
    assert_eq!(
        info_value(&mut c, "persistence", "aof_base_size"),
        Some(base_len.to_string())
    );
    // Writes after the rewrite go to the new incremental file.
    let _: () = q(&mut c, &["SET", "after", "1"]).expect("set");
    assert!(eventually(5.0, || {
        std::fs::metadata(aof.join("appendonly.aof.2.incr.aof")).map_or(0, |m| m.len()) > 0
    }));
    let size: u64 = info_value(&mut c, "persistence", "aof_current_size")
        .and_then(|v| v.parse().ok())
        .expect("size");
    assert!(size > base_len, "{size} {base_len}");
    for field in [
        "aof_rewrite_in_progress:0",
        "aof_rewrite_scheduled:0",
        "aof_current_rewrite_time_sec:-1",
        "aof_last_bgrewrite_status:ok",
        "aof_rewrites:1",
    ] {
        let (k, v) = field.split_once(':').expect("field");
        assert_eq!(
            info_value(&mut c, "persistence", k).as_deref(),
            Some(v),
            "{k}"
        );
    }
    let last: i64 = info_value(&mut c, "persistence", "aof_last_rewrite_time_sec")
        .and_then(|v| v.parse().ok())
        .expect("last");
    assert!(last >= 0);
    // A second rewrite moves on to the next numbers.
    let _: String = q(&mut c, &["BGREWRITEAOF"]).expect("bgrewriteaof");
    assert!(rewrite_done(&mut c));
    assert_eq!(
        manifest(&dir),
        "file appendonly.aof.3.base.aof seq 3 type b\nfile appendonly.aof.3.incr.aof seq 3 type i\n"
    );
    // Inside EXEC it is scheduled, and runs once the transaction is over (as Redis).
    let r: Vec<String> = redis::pipe()
        .atomic()
        .cmd("BGREWRITEAOF")
        .query(&mut c)
        .expect("exec");
    assert_eq!(r, ["Background append only file rewriting scheduled"]);
    assert!(eventually(10.0, || {
        info_value(&mut c, "persistence", "aof_rewrites").as_deref() == Some("3")
    }));
    assert!(rewrite_done(&mut c));
    assert!(manifest(&dir).contains("appendonly.aof.4.base.aof"));
    let before = state(&mut c);
    drop(c);
    drop(s);
    check_aof(&dir);
    let s = start(&dir, &[]);
    let mut c = s.conn();
    same(&before, &state(&mut c), "after the restart");
    let one: i64 = q(&mut c, &["FCALL", "one", "0"]).expect("fcall");
    assert_eq!(one, 1);
    // The unique index, the TTL index, the capped bound and the change stream are back.
    let e = err_text(q::<Value>(
        &mut c,
        &["DOC.INSERT", "people", r#"{"name":"ann"}"#],
    ));
    assert!(e.contains("E11000"), "{e}");
    let stats: String = q(&mut c, &["DOC.STATS", "events"]).expect("stats");
    assert!(stats.contains(r#""capped":true"#), "{stats}");
    let feed_before = int(&mut c, &["XLEN", "feed"]);
    let _: Value = q(&mut c, &["DOC.INSERT", "events", r#"{"e":"more"}"#]).expect("insert");
    assert!(eventually(5.0, || int(&mut c, &["XLEN", "feed"]) == feed_before + 1));
    drop(c);
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Functions are journaled (they change no key) and come back without a rewrite too.
#[test]
fn functions_are_journaled() {
    let dir = temp_dir("functions");
    let s = start(&dir, &[]);
    let mut c = s.conn();
    let lib = |n: &str| {
        format!("#!lua name={n}\nredis.register_function('{n}_f', function() return '{n}' end)")
    };
    let _: String = q(&mut c, &["FUNCTION", "LOAD", &lib("a")]).expect("load");
    let _: String = q(&mut c, &["FUNCTION", "LOAD", &lib("b")]).expect("load");
    let _: String = q(&mut c, &["FUNCTION", "LOAD", &lib("c")]).expect("load");
    let _: () = q(&mut c, &["FUNCTION", "DELETE", "b"]).expect("delete");
    // A failed load is not journaled (it would fail again, harmlessly, but it is noise).
    assert!(
        err_text(q::<Value>(&mut c, &["FUNCTION", "LOAD", &lib("a")])).contains("already exists")
    );
    drop(c);
    drop(s);
    let s = start(&dir, &[]);
    let mut c = s.conn();
    let a: String = q(&mut c, &["FCALL", "a_f", "0"]).expect("fcall a");
    assert_eq!(a, "a");
    assert!(err_text(q::<Value>(&mut c, &["FCALL", "b_f", "0"])).contains("Function not found"));
    let _: () = q(&mut c, &["FUNCTION", "FLUSH"]).expect("flush");
    drop(c);
    drop(s);
    let s = start(&dir, &[]);
    let mut c = s.conn();
    assert!(err_text(q::<Value>(&mut c, &["FCALL", "a_f", "0"])).contains("Function not found"));
    drop(c);
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Clients increment counters while a rewrite of a larger data set runs and the server is
/// killed in the middle of it: the manifest then names the old files and the new
/// incremental one, and every acknowledged increment is there after the restart.
#[test]
fn kill_9_during_a_rewrite_loses_nothing_acknowledged() {
    for (round, policy) in ["everysec", "always"].iter().enumerate() {
        let dir = temp_dir(&format!("kill-{round}"));
        let s = start(&dir, &["--appendfsync", policy]);
        let mut c = s.conn();
        fill(&mut c, 30_000);
        let keys_before = int(&mut c, &["DBSIZE"]);
        let stop = Arc::new(AtomicBool::new(false));
        let mut workers = Vec::new();
        for w in 0..3 {
            let client = s.client();
            let stop = stop.clone();
            workers.push(std::thread::spawn(move || {
                let mut acked = 0i64;
                let Ok(mut c) = client.get_connection() else {
                    return acked;
                };
                while !stop.load(Ordering::Relaxed) {
                    match q::<i64>(&mut c, &["INCR", &format!("ctr{w}")]) {
                        Ok(v) => acked = v,
                        Err(_) => break,
                    }
                }
                acked
            }));
        }
        std::thread::sleep(Duration::from_millis(100));
        let _: String = q(&mut c, &["BGREWRITEAOF"]).expect("bgrewriteaof");
        assert!(eventually(30.0, || {
            manifest(&dir).contains("appendonly.aof.2.incr.aof")
        }));
        let in_progress = info_value(&mut c, "persistence", "aof_rewrite_in_progress");
        std::thread::sleep(Duration::from_millis(30));
        drop(s); // SIGKILL while the rewrite runs (or just after it)
        stop.store(true, Ordering::Relaxed);
        let acked: Vec<i64> = workers
            .into_iter()
            .map(|w| w.join().expect("worker"))
            .collect();
        assert!(acked.iter().any(|&a| a > 0));
        let s = start(&dir, &["--appendfsync", policy]);
        let mut c = s.conn();
        for (w, acked) in acked.iter().enumerate() {
            let got: Option<i64> = q(&mut c, &["GET", &format!("ctr{w}")]).expect("get");
            let got = got.unwrap_or(0);
            assert!(
                got == *acked || got == *acked + 1,
                "{policy}: worker {w} acked {acked}, found {got} (rewrite in progress at the kill: {in_progress:?})"
            );
        }
        // The counters, and nothing else new or gone.
        let keys = int(&mut c, &["DBSIZE"]);
        let counters = acked.iter().filter(|&&a| a > 0).count() as i64;
        assert!(
            (keys_before + counters..=keys_before + 3).contains(&keys),
            "{keys_before} keys before, {keys} after"
        );
        drop(c);
        drop(s);
        check_aof(&dir);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// `auto-aof-rewrite-min-size` and `auto-aof-rewrite-percentage` start a rewrite on growth.
#[test]
fn automatic_rewrites_start_on_growth() {
    let dir = temp_dir("auto");
    let s = start(&dir, &[]);
    let mut c = s.conn();
    let _: () = q(
        &mut c,
        &["CONFIG", "SET", "auto-aof-rewrite-min-size", "65536"],
    )
    .expect("config");
    let _: () = q(
        &mut c,
        &["CONFIG", "SET", "auto-aof-rewrite-percentage", "100"],
    )
    .expect("config");
    assert_eq!(
        info_value(&mut c, "persistence", "aof_rewrites").as_deref(),
        Some("0")
    );
    // Overwriting the same keys: the journal grows, the data does not.
    for round in 0..40 {
        let mut p = redis::pipe();
        for i in 0..200 {
            p.cmd("SET")
                .arg(format!("k{i}"))
                .arg(format!("{round:050}"))
                .ignore();
        }
        let _: () = p.query(&mut c).expect("set");
    }
    assert!(
        eventually(10.0, || {
            info_value(&mut c, "persistence", "aof_rewrites")
                .and_then(|v| v.parse::<u64>().ok())
                .is_some_and(|n| n >= 1)
        }),
        "no automatic rewrite"
    );
    assert!(rewrite_done(&mut c));
    // About 700 kB were written; the base holds the 200 keys once (about 17 kB), and what
    // was written since the last rewrite started follows it.
    let num = |c: &mut redis::Connection, f: &str| -> u64 {
        info_value(c, "persistence", f)
            .and_then(|v| v.parse().ok())
            .expect("number")
    };
    // The base holds the 200 keys once; what was written while the rewrite ran follows it
    // in the new incremental file (how much depends on how long the rewrite took, so on the
    // machine's load), and INFO counts exactly those two files.
    let base = num(&mut c, "aof_base_size");
    assert!((15_000..40_000).contains(&base), "the base is {base} bytes");
    let size = num(&mut c, "aof_current_size");
    let m = manifest(&dir);
    let files: Vec<&str> = m
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1))
        .collect();
    assert_eq!(files.len(), 2, "{m}");
    let on_disk: u64 = files
        .iter()
        .map(|f| std::fs::metadata(dir.join("appendonlydir").join(f)).map_or(0, |m| m.len()))
        .sum();
    assert_eq!(size, on_disk, "{m}");
    let before = state(&mut c);
    drop(c);
    drop(s);
    let s = start(&dir, &[]);
    let mut c = s.conn();
    same(&before, &state(&mut c), "after the restart");
    drop(c);
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Starts `redis-server` on `dir`/`file` and returns it with its port; `None` (after a
/// notice) when it is not installed.
fn redis_on(dir: &Path, file: &str) -> Option<(std::process::Child, u16)> {
    for _ in 0..5 {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("free port");
        let child = std::process::Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .args(["--dir", dir.to_str().expect("utf-8"), "--dbfilename", file])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn();
        let mut child = match child {
            Ok(c) => c,
            Err(e) => {
                assert!(
                    std::env::var_os("CI").is_none(),
                    "redis-server is needed under CI: {e}"
                );
                eprintln!(
                    "NOTICE: redis-server not found ({e}); the RDB check with Redis is skipped"
                );
                return None;
            }
        };
        let ok = eventually(10.0, || {
            redis::Client::open(format!("redis://127.0.0.1:{port}/"))
                .and_then(|c| c.get_connection())
                .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c))
                .is_ok()
                || matches!(child.try_wait(), Ok(Some(_)))
        });
        if ok && matches!(child.try_wait(), Ok(None)) {
            return Some((child, port));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
    panic!("redis-server did not start");
}

/// The key space part of [`state`] (RDB has no documents).
fn keys_state(c: &mut redis::Connection) -> Vec<String> {
    state(c)
        .into_iter()
        .filter(|l| l.starts_with("db") || l.starts_with("functions"))
        .collect()
}

/// SAVE writes `dump.rdb` (RDB 10) that redis-server 7 loads with the same keys, values,
/// deadlines and functions, and that tidecache loads at start; LASTSAVE and the `rdb_*`
/// fields follow; BGSAVE answers as Redis.
#[test]
fn save_writes_an_rdb_that_redis_and_tidecache_load() {
    let dir = temp_dir("save");
    let s = TestServer::start(&["--dir", dir.to_str().expect("utf-8")]);
    let mut c = s.conn();
    fill(&mut c, 3000);
    // A stream of several nodes, with changing field sets, a deleted entry, two groups,
    // pending entries of two consumers.
    let mut p = redis::pipe();
    for i in 1..=450 {
        if i % 9 == 0 {
            p.cmd("XADD")
                .arg("big-stream")
                .arg(format!("{i}-{}", i % 4))
                .arg("other")
                .arg(i);
        } else {
            p.cmd("XADD")
                .arg("big-stream")
                .arg(format!("{i}-{}", i % 4))
                .arg("a")
                .arg(i)
                .arg("b")
                .arg("text");
        }
    }
    p.cmd("XDEL").arg("big-stream").arg("5-1");
    p.cmd("XGROUP")
        .arg("CREATE")
        .arg("big-stream")
        .arg("g1")
        .arg("0");
    p.cmd("XGROUP")
        .arg("CREATE")
        .arg("big-stream")
        .arg("g2")
        .arg("$");
    p.cmd("XREADGROUP")
        .arg("GROUP")
        .arg("g1")
        .arg("c1")
        .arg("COUNT")
        .arg(30)
        .arg("STREAMS")
        .arg("big-stream")
        .arg(">");
    p.cmd("XREADGROUP")
        .arg("GROUP")
        .arg("g1")
        .arg("c2")
        .arg("COUNT")
        .arg(5)
        .arg("STREAMS")
        .arg("big-stream")
        .arg(">");
    p.cmd("XACK").arg("big-stream").arg("g1").arg("3-3");
    let _: () = p.query(&mut c).expect("streams");
    let big = "x".repeat(5000);
    let _: () = q(&mut c, &["SET", "big", &big]).expect("set");
    let _: i64 = q(&mut c, &["SADD", "ints", "1", "2", "300000"]).expect("sadd");
    let _: () = q(&mut c, &["SELECT", "1"]).expect("select");
    let _: () = q(&mut c, &["SET", "n", "-12345678901"]).expect("set");
    let _: () = q(&mut c, &["SELECT", "0"]).expect("select");
    assert!(int(&mut c, &["LASTSAVE"]) > 0);
    let changes: u64 = info_value(&mut c, "persistence", "rdb_changes_since_last_save")
        .and_then(|v| v.parse().ok())
        .expect("changes");
    assert!(changes > 3000);
    let r: String = q(&mut c, &["SAVE"]).expect("save");
    assert_eq!(r, "OK");
    assert_eq!(
        info_value(&mut c, "persistence", "rdb_changes_since_last_save").as_deref(),
        Some("0")
    );
    assert_eq!(
        info_value(&mut c, "persistence", "rdb_saves").as_deref(),
        Some("1")
    );
    assert_eq!(
        info_value(&mut c, "persistence", "rdb_last_save_time"),
        Some(int(&mut c, &["LASTSAVE"]).to_string())
    );
    let r: String = q(&mut c, &["BGSAVE"]).expect("bgsave");
    assert_eq!(r, "Background saving started");
    assert!(eventually(20.0, || {
        info_value(&mut c, "persistence", "rdb_bgsave_in_progress").as_deref() == Some("0")
    }));
    assert_eq!(
        info_value(&mut c, "persistence", "rdb_last_bgsave_status").as_deref(),
        Some("ok")
    );
    assert!(err_text(q::<Value>(&mut c, &["BGSAVE", "NOW"])).contains("syntax"));
    let r: Vec<String> = redis::pipe()
        .atomic()
        .cmd("BGSAVE")
        .query(&mut c)
        .expect("exec");
    assert_eq!(r, ["Background saving scheduled"]);
    assert!(eventually(10.0, || {
        info_value(&mut c, "persistence", "rdb_saves").as_deref() == Some("3")
    }));
    let want = keys_state(&mut c);
    assert!(want.len() > 3000);
    drop(c);
    drop(s);
    // tidecache loads it at start (appendonly no).
    let s = TestServer::start(&["--dir", dir.to_str().expect("utf-8")]);
    let mut c = s.conn();
    same(&want, &keys_state(&mut c), "tidecache loading the RDB file");
    assert_eq!(
        info_value(&mut c, "persistence", "rdb_changes_since_last_save").as_deref(),
        Some("0"),
        "what was loaded is not a change"
    );
    drop(c);
    drop(s);
    if let Some((mut child, port)) = redis_on(&dir, "dump.rdb") {
        let mut c = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
            .and_then(|cl| cl.get_connection())
            .expect("connect to redis");
        let got = keys_state(&mut c);
        let _ = child.kill();
        let _ = child.wait();
        same(&want, &got, "redis-server loading the RDB file");
    }
    // SHUTDOWN SAVE writes the file before the process exits.
    let mut s = TestServer::start(&["--dir", dir.to_str().expect("utf-8")]);
    let mut c = s.conn();
    let _: () = q(&mut c, &["SET", "late", "1"]).expect("set");
    let _ = q::<Value>(&mut c, &["SHUTDOWN", "SAVE"]);
    assert_eq!(s.wait_exit(), Some(0));
    let s = TestServer::start(&["--dir", dir.to_str().expect("utf-8")]);
    let mut c = s.conn();
    assert_eq!(int(&mut c, &["EXISTS", "late"]), 1);
    drop(c);
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// While a long journal is replayed, clients connect and are answered `-LOADING` by
/// commands without the `loading` flag; INFO (flagged) shows the progress; once loaded,
/// everything is there.
#[test]
fn clients_are_answered_loading_during_a_long_replay() {
    let dir = temp_dir("loading");
    let aof = dir.join("appendonlydir");
    std::fs::create_dir_all(&aof).expect("dir");
    let mut base = Vec::new();
    for i in 0..400_000 {
        let k = format!("key:{i:08}");
        let v = format!("value-{i}");
        base.extend_from_slice(
            format!(
                "*3\r\n$3\r\nSET\r\n${}\r\n{k}\r\n${}\r\n{v}\r\n",
                k.len(),
                v.len()
            )
            .as_bytes(),
        );
    }
    std::fs::write(aof.join("appendonly.aof.1.base.aof"), &base).expect("base");
    std::fs::write(aof.join("appendonly.aof.1.incr.aof"), b"").expect("incr");
    std::fs::write(
        aof.join("appendonly.aof.manifest"),
        "file appendonly.aof.1.base.aof seq 1 type b\nfile appendonly.aof.1.incr.aof seq 1 type i\n",
    )
    .expect("manifest");
    // The port is printed once the data is loaded: take a free one and poll it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_tidecache-server"))
        .args([
            "--port",
            &port.to_string(),
            "--appendonly",
            "yes",
            "--save",
            "",
        ])
        .args(["--dir", dir.to_str().expect("utf-8")])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn");
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).expect("client");
    let mut conn = None;
    assert!(eventually(10.0, || {
        conn = client.get_connection().ok();
        conn.is_some()
    }));
    let mut c = conn.expect("connection");
    let e = err_text(q::<Value>(&mut c, &["GET", "key:00000001"]));
    assert!(e.contains("LOADING"), "{e}");
    assert!(e.contains("Redis is loading the dataset in memory"), "{e}");
    let e = err_text(q::<Value>(&mut c, &["SET", "x", "1"]));
    assert!(e.contains("LOADING"), "{e}");
    assert_eq!(
        info_value(&mut c, "persistence", "loading").as_deref(),
        Some("1")
    );
    let total: u64 = info_value(&mut c, "persistence", "loading_total_bytes")
        .and_then(|v| v.parse().ok())
        .expect("total");
    assert_eq!(total, base.len() as u64);
    for f in [
        "loading_start_time",
        "loading_loaded_bytes",
        "loading_loaded_perc",
        "loading_eta_seconds",
    ] {
        assert!(info_value(&mut c, "persistence", f).is_some(), "{f}");
    }
    assert!(eventually(60.0, || {
        info_value(&mut c, "persistence", "loading").as_deref() == Some("0")
    }));
    let v: String = q(&mut c, &["GET", "key:00000001"]).expect("get");
    assert_eq!(v, "value-1");
    assert_eq!(int(&mut c, &["DBSIZE"]), 400_000);
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
}

/// `save <seconds> <changes>`: a BGSAVE starts once a pair's seconds have passed since the
/// last save with at least its changes made; nothing is saved without changes; a failed
/// save is retried; `save ""` disables; CONFIG GET shows the schedule as Redis does; what
/// the schedule saved loads at the next start.
#[test]
fn the_save_schedule_saves() {
    let dir = temp_dir("schedule");
    let d = dir.to_str().expect("utf-8");
    let s = TestServer::start(&[
        "--dir",
        d,
        "--save",
        "3600 1  300 100",
        "--enable-protected-configs",
        "yes",
    ]);
    let mut c = s.conn();
    let get = |c: &mut redis::Connection| strs(c, &["CONFIG", "GET", "save"]);
    assert_eq!(get(&mut c), ["save", "3600 1 300 100"]);
    let persist = |c: &mut redis::Connection, f: &str| -> i64 {
        info_value(c, "persistence", f)
            .and_then(|v| v.parse().ok())
            .unwrap_or(-1)
    };
    let started = int(&mut c, &["LASTSAVE"]);
    let _: () = q(&mut c, &["SET", "a", "1"]).expect("set");
    assert_eq!(persist(&mut c, "rdb_changes_since_last_save"), 1);
    let _: () = q(&mut c, &["CONFIG", "SET", "save", "1 1"]).expect("config set");
    assert_eq!(get(&mut c), ["save", "1 1"]);
    assert!(eventually(10.0, || int(&mut c, &["LASTSAVE"]) > started));
    assert_eq!(persist(&mut c, "rdb_saves"), 1);
    assert_eq!(persist(&mut c, "rdb_changes_since_last_save"), 0);
    assert!(dir.join("dump.rdb").exists());
    // No change, no save.
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(persist(&mut c, "rdb_saves"), 1);
    // A save that fails (its directory is gone) is retried once it can succeed.
    let sub = dir.join("sub");
    std::fs::create_dir_all(&sub).expect("sub");
    let _: () = q(
        &mut c,
        &["CONFIG", "SET", "dir", sub.to_str().expect("utf-8")],
    )
    .expect("dir");
    std::fs::remove_dir_all(&sub).expect("rm sub");
    let _: () = q(&mut c, &["SET", "b", "2"]).expect("set");
    assert!(eventually(10.0, || {
        info_value(&mut c, "persistence", "rdb_last_bgsave_status").as_deref() == Some("err")
    }));
    std::fs::create_dir_all(&sub).expect("sub");
    assert!(eventually(15.0, || {
        info_value(&mut c, "persistence", "rdb_last_bgsave_status").as_deref() == Some("ok")
    }));
    assert!(sub.join("dump.rdb").exists());
    assert_eq!(persist(&mut c, "rdb_saves"), 2);
    // `save ""`: no schedule.
    let _: () = q(&mut c, &["CONFIG", "SET", "save", ""]).expect("config set");
    assert_eq!(get(&mut c), ["save", ""]);
    let _: () = q(&mut c, &["SET", "c", "3"]).expect("set");
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(persist(&mut c, "rdb_saves"), 2);
    assert_eq!(persist(&mut c, "rdb_changes_since_last_save"), 1);
    drop(c);
    drop(s);
    let s = TestServer::start(&["--dir", sub.to_str().expect("utf-8")]);
    let mut c = s.conn();
    let got: Vec<Option<String>> = q(&mut c, &["MGET", "a", "b", "c"]).expect("mget");
    assert_eq!(got, [Some("1".into()), Some("2".into()), None]);
    drop(c);
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Loading `dump.rdb` at start (no journal) is like the replay: the port answers at once,
/// commands without the `loading` flag get `-LOADING`, INFO shows the progress
/// (`key-load-delay`, as Redis's tests use it, makes the load long enough to watch).
#[test]
fn clients_are_answered_loading_while_dump_rdb_loads() {
    let dir = temp_dir("rdbloading");
    let d = dir.to_str().expect("utf-8");
    let s = TestServer::start(&["--dir", d]);
    let mut c = s.conn();
    let mut p = redis::pipe();
    for i in 0..20_000 {
        p.cmd("SET").arg(format!("key:{i}")).arg(i).ignore();
    }
    let _: () = p.query(&mut c).expect("fill");
    let _: () = q(&mut c, &["SAVE"]).expect("save");
    drop(c);
    drop(s);
    let total = std::fs::metadata(dir.join("dump.rdb")).expect("dump").len();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_tidecache-server"))
        .args(["--port", &port.to_string(), "--dir", d, "--save", ""])
        .args(["--key-load-delay", "200"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn");
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).expect("client");
    let mut conn = None;
    assert!(eventually(10.0, || {
        conn = client.get_connection().ok();
        conn.is_some()
    }));
    let mut c = conn.expect("connection");
    let e = err_text(q::<Value>(&mut c, &["GET", "key:1"]));
    assert!(
        e.contains("LOADING Redis is loading the dataset in memory"),
        "{e}"
    );
    assert!(err_text(q::<Value>(&mut c, &["SET", "x", "1"])).contains("LOADING"));
    assert_eq!(
        info_value(&mut c, "persistence", "loading").as_deref(),
        Some("1")
    );
    assert_eq!(
        info_value(&mut c, "persistence", "loading_total_bytes"),
        Some(total.to_string())
    );
    assert!(eventually(10.0, || {
        info_value(&mut c, "persistence", "loading_loaded_perc")
            .and_then(|v| v.parse::<f64>().ok())
            .is_some_and(|p| p > 0.0 && p < 100.0)
    }));
    assert!(info_value(&mut c, "persistence", "loading_eta_seconds").is_some());
    assert!(eventually(60.0, || {
        info_value(&mut c, "persistence", "loading").as_deref() == Some("0")
    }));
    assert_eq!(int(&mut c, &["DBSIZE"]), 20_000);
    let v: String = q(&mut c, &["GET", "key:1"]).expect("get");
    assert_eq!(v, "1");
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
}

/// BGREWRITEAOF with `appendonly no` writes a base and a manifest naming only it, as Redis 7
/// does (inside MULTI it is scheduled and starts after EXEC); INFO's `total_forks` counts
/// the snapshot it took; a start with `appendonly yes` on that directory loads it.
#[test]
fn bgrewriteaof_with_the_journal_off_writes_a_base_that_a_start_loads() {
    let dir = temp_dir("off");
    let d = dir.to_str().expect("utf-8 path");
    let s = TestServer::start(&["--dir", d]);
    let mut c = s.conn();
    let _: () = q(&mut c, &["SET", "k", "v"]).unwrap();
    let _: () = q(&mut c, &["RPUSH", "l", "a", "b"]).unwrap();
    let forks = |c: &mut redis::Connection| {
        info_value(c, "stats", "total_forks")
            .and_then(|v| v.parse::<u64>().ok())
            .expect("total_forks")
    };
    let before = forks(&mut c);
    let _: () = q(&mut c, &["MULTI"]).unwrap();
    let _: () = q(&mut c, &["SET", "foo", "bar"]).unwrap();
    let _: () = q(&mut c, &["BGREWRITEAOF"]).unwrap();
    let replies: Vec<String> = q(&mut c, &["EXEC"]).unwrap();
    assert_eq!(
        replies,
        ["OK", "Background append only file rewriting scheduled"]
    );
    assert!(
        eventually(10.0, || forks(&mut c) > before
            && info_value(&mut c, "persistence", "aof_rewrite_in_progress")
                .as_deref()
                == Some("0")
            && info_value(&mut c, "persistence", "aof_rewrite_scheduled")
                .as_deref()
                == Some("0")),
        "the scheduled rewrite did not run"
    );
    assert_eq!(
        info_value(&mut c, "persistence", "aof_last_bgrewrite_status").as_deref(),
        Some("ok")
    );
    let manifest = std::fs::read_to_string(dir.join("appendonlydir/appendonly.aof.manifest"))
        .expect("a manifest");
    assert!(manifest.contains("type b"), "{manifest}");
    assert!(!manifest.contains("type i"), "{manifest}");
    check_aof(&dir);
    drop(c);
    drop(s);
    let s = start(&dir, &[]);
    let mut c = s.conn();
    assert_eq!(strs(&mut c, &["MGET", "k", "foo"]), ["v", "bar"]);
    assert_eq!(strs(&mut c, &["LRANGE", "l", "0", "-1"]), ["a", "b"]);
    drop(c);
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// DEBUG LOADAOF empties the data set and loads it again from the journal's files, as
/// Redis's: what the journal holds comes back (keys, documents, functions), what it was not
/// sent (a script's write after `redis.set_repl(redis.REPL_NONE)`) does not.
#[test]
fn debug_loadaof_gives_back_what_the_journal_holds() {
    let dir = temp_dir("loadaof");
    let s = start(&dir, &["--enable-debug-command", "yes"]);
    let mut c = s.conn();
    let _: () = q(&mut c, &["SET", "a", "1"]).unwrap();
    let _: () = q(&mut c, &["RPUSH", "l", "x", "y"]).unwrap();
    let _: Vec<String> = q(&mut c, &["DOC.INSERT", "people", r#"{"_id":1,"n":"ann"}"#]).unwrap();
    let _: String = q(
        &mut c,
        &[
            "FUNCTION",
            "LOAD",
            "#!lua name=lib\nredis.register_function('hi', function() return 'hello' end)",
        ],
    )
    .unwrap();
    let _: () = q(
        &mut c,
        &[
            "EVAL",
            "redis.call('set','b','2') redis.set_repl(redis.REPL_NONE) redis.call('set','c','3')",
            "0",
        ],
    )
    .unwrap();
    assert_eq!(int(&mut c, &["DBSIZE"]), 4);
    let _: () = q(&mut c, &["DEBUG", "LOADAOF"]).unwrap();
    let got: Vec<Option<String>> = q(&mut c, &["MGET", "a", "b", "c"]).unwrap();
    assert_eq!(got, [Some("1".into()), Some("2".into()), None]);
    assert_eq!(strs(&mut c, &["LRANGE", "l", "0", "-1"]), ["x", "y"]);
    let ann: String = q(&mut c, &["DOC.FINDONE", "people", r#"{"_id":1}"#]).unwrap();
    assert!(ann.contains("ann"), "{ann}");
    let hi: String = q(&mut c, &["FCALL", "hi", "0"]).unwrap();
    assert_eq!(hi, "hello");
    // Writes go on into the same journal afterwards.
    let _: () = q(&mut c, &["SET", "after", "x"]).unwrap();
    drop(c);
    drop(s);
    let s = start(&dir, &[]);
    let mut c = s.conn();
    assert_eq!(strs(&mut c, &["MGET", "a", "after"]), ["1", "x"]);
    drop(c);
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}
