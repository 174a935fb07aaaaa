//! Collections move whole with their slot: three tidecache masters made by `redis-cli
//! --cluster create`, a collection with a secondary index, a TTL index and 2,000 documents
//! beside keys of the same hash tag, moved by `redis-cli --cluster reshard` (GETKEYSINSLOT
//! lists the collections, MIGRATE sends them); a slot half moved by hand (ASK for a moved
//! collection, SETSLOT NODE refused while one stays); then MIGRATE of collections between two
//! standalone servers: COPY, BUSYKEY, REPLACE, capped bounds and insertion order, the change
//! stream setting, the journal on both sides across a restart, a collection written during
//! its transfer kept, and DOC.DUMP / DOC.RESTORE.
mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;
use support::cluster::{check, create, redis_cli, tool_available, Node};
use support::{err_text, eventually, held_target, int, q, replicate, resp, strs, TestServer};

/// A master of CLUSTER NODES: its id, client port and slot ranges.
struct Master {
    id: String,
    port: u16,
    ranges: Vec<(u16, u16)>,
}

fn masters(n: &Node) -> Vec<Master> {
    let mut out = Vec::new();
    for line in n.cmd(&["CLUSTER", "NODES"]).lines() {
        let f: Vec<&str> = line.split(' ').collect();
        if f.len() < 8 || !f[2].contains("master") {
            continue;
        }
        let addr = f[1].split('@').next().unwrap_or("");
        let port = addr
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .expect("a port in CLUSTER NODES");
        let ranges = f[8..]
            .iter()
            .filter(|s| !s.starts_with('['))
            .filter_map(|s| match s.split_once('-') {
                Some((a, b)) => Some((a.parse().ok()?, b.parse().ok()?)),
                None => s.parse().ok().map(|a| (a, a)),
            })
            .collect();
        out.push(Master {
            id: f[0].to_string(),
            port,
            ranges,
        });
    }
    out
}

fn stats(c: &mut redis::Connection, coll: &str) -> serde_json::Value {
    let s: String = q(c, &["DOC.STATS", coll]).expect("DOC.STATS");
    serde_json::from_str(&s).expect("DOC.STATS is JSON")
}

/// How many of `m`'s slots `redis-cli --cluster reshard` moves before it reaches `slot`:
/// it takes a source's lowest slots first.
fn slots_up_to(m: &Master, slot: u16) -> u32 {
    m.ranges
        .iter()
        .filter(|&&(a, _)| a <= slot)
        .map(|&(a, b)| u32::from(b.min(slot) - a) + 1)
        .sum()
}

/// The hash tag is chosen among `t0`, `t1`, … as the one redis-cli reaches in the fewest
/// slots. Why: every CLUSTER SETSLOT saves nodes.conf with an fsync, a few of them per moved
/// slot, and `{t}` hashes to slot 15891, 4,969 slots into its owner's range: minutes of
/// resharding empty slots before the one this test is about.
#[test]
fn a_collection_moves_whole_with_its_slot_through_redis_cli_reshard() {
    if !tool_available("redis-cli") {
        return;
    }
    // The TTL monitor every second, so an expiry on the target is seen soon.
    let extra = ["--ttl-monitor-period", "1"];
    let nodes = [
        Node::start(false, &extra),
        Node::start(false, &extra),
        Node::start(false, &extra),
    ];
    create(&[&nodes[0], &nodes[1], &nodes[2]], 0);
    let all = masters(&nodes[0]);
    let owner_of = |slot: u16| {
        all.iter()
            .find(|m| m.ranges.iter().any(|&(a, b)| (a..=b).contains(&slot)))
            .expect("an owner of every slot")
    };
    let (tag, slot, n) = (0..2000)
        .map(|i| {
            let tag = format!("t{i}");
            let slot = tidecache::state::cluster::key_slot(tag.as_bytes());
            let n = slots_up_to(owner_of(slot), slot);
            (tag, slot, n)
        })
        .min_by_key(|&(_, _, n)| n)
        .expect("a tag");
    let coll = format!("{{{tag}}}sessions");
    let coll = coll.as_str();
    let audit = format!("{{{tag}}}audit");
    let audit = audit.as_str();
    assert_eq!(
        nodes[0].cmd(&["CLUSTER", "KEYSLOT", coll]),
        slot.to_string(),
        "the test's hash is the cluster's"
    );
    let owner = owner_of(slot);
    let target = all
        .iter()
        .find(|m| m.id != owner.id)
        .expect("another master");
    let node = |port: u16| {
        nodes
            .iter()
            .find(|n| n.port == port)
            .expect("a started node")
    };
    let (src, dst) = (node(owner.port), node(target.port));

    // On the owner: an index, a TTL index, 2,000 documents, keys of the same tag (one of
    // them named as the collection), and a second collection that is no key.
    let mut s = src.conn();
    assert_eq!(
        q::<String>(&mut s, &["DOC.CREATEINDEX", coll, r#"{"user":1}"#]).unwrap(),
        "user_1"
    );
    assert_eq!(
        q::<String>(&mut s, &["DOC.EXPIREINDEX", coll, "accessTime", "3600"]).unwrap(),
        "accessTime_1"
    );
    for batch in 0..20 {
        let docs: Vec<String> = (batch * 100..batch * 100 + 100)
            .map(|i| format!(r#"{{"_id":{i},"user":"u{}","accessTime":"$$NOW"}}"#, i % 50))
            .collect();
        let mut cmd = redis::cmd("DOC.INSERT");
        cmd.arg(coll).arg(&docs);
        let ids: Vec<redis::Value> = cmd.query(&mut s).expect("DOC.INSERT");
        assert_eq!(ids.len(), 100);
    }
    for i in 0..10 {
        let _: () = q(
            &mut s,
            &["SET", &format!("{{{tag}}}k{i}"), &format!("v{i}")],
        )
        .unwrap();
    }
    let _: () = q(&mut s, &["SET", coll, "also a key"]).unwrap();
    let _: Vec<redis::Value> = q(
        &mut s,
        &["DOC.INSERT", audit, r#"{"_id":1}"#, r#"{"_id":2}"#],
    )
    .unwrap();
    assert_eq!(int(&mut s, &["DOC.COUNT", coll, "{}"]), 2000);
    let indexes = strs(&mut s, &["DOC.INDEXES", coll]);
    assert_eq!(indexes.len(), 3, "{indexes:?}");

    // 11 keys, and one collection that is not also a key: 12 names, each listed once.
    let slot_s = slot.to_string();
    assert_eq!(int(&mut s, &["CLUSTER", "COUNTKEYSINSLOT", &slot_s]), 12);
    let mut listed = strs(&mut s, &["CLUSTER", "GETKEYSINSLOT", &slot_s, "100"]);
    listed.sort();
    let mut want: Vec<String> = (0..10).map(|i| format!("{{{tag}}}k{i}")).collect();
    want.push(coll.to_string());
    want.push(audit.to_string());
    want.sort();
    assert_eq!(listed, want);

    let (ok, out) = redis_cli(
        &[
            "--cluster",
            "reshard",
            &src.addr(),
            "--cluster-from",
            &owner.id,
            "--cluster-to",
            &target.id,
            "--cluster-slots",
            &n.to_string(),
            "--cluster-yes",
        ],
        Duration::from_secs(900),
    );
    assert!(ok && !out.contains("[ERR]"), "reshard failed:\n{out}");
    for nd in &nodes {
        assert!(
            eventually(20.0, || nd.info_field("cluster_state") == "ok"),
            "{}",
            nd.cmd(&["CLUSTER", "NODES"])
        );
    }
    check(src);

    // The target holds all of it.
    let mut d = dst.conn();
    assert_eq!(int(&mut d, &["DOC.COUNT", coll, "{}"]), 2000);
    assert_eq!(strs(&mut d, &["DOC.INDEXES", coll]), indexes);
    assert_eq!(
        int(&mut d, &["DOC.COUNT", coll, r#"{"user":"u7"}"#]),
        40,
        "the secondary index answers on the target"
    );
    assert_eq!(q::<String>(&mut d, &["GET", coll]).unwrap(), "also a key");
    assert_eq!(
        q::<String>(&mut d, &["GET", &format!("{{{tag}}}k3")]).unwrap(),
        "v3"
    );
    assert_eq!(int(&mut d, &["DOC.COUNT", audit, "{}"]), 2);
    assert_eq!(int(&mut d, &["CLUSTER", "COUNTKEYSINSLOT", &slot_s]), 12);

    // The TTL index goes on expiring there: a document with an old date goes (the monitor
    // removes it), the others, dated now and due in an hour, stay.
    let _: Vec<redis::Value> = q(
        &mut d,
        &[
            "DOC.INSERT",
            coll,
            r#"{"_id":"old","accessTime":{"$date":"2001-01-01T00:00:00Z"}}"#,
        ],
    )
    .unwrap();
    assert!(
        eventually(20.0, || stats(&mut d, coll)["ttl"]["deletedDocuments"]
            .as_i64()
            .is_some_and(|n| n >= 1)),
        "the target's TTL monitor did not expire the old document: {}",
        stats(&mut d, coll)
    );
    assert_eq!(int(&mut d, &["DOC.COUNT", coll, r#"{"_id":"old"}"#]), 0);
    assert_eq!(int(&mut d, &["DOC.COUNT", coll, "{}"]), 2000);

    // The source holds nothing of the slot and sends its clients to the target.
    let collections = strs(&mut s, &["DOC.COLLECTIONS"]);
    assert!(collections.is_empty(), "{collections:?}");
    assert_eq!(int(&mut s, &["CLUSTER", "COUNTKEYSINSLOT", &slot_s]), 0);
    let e = err_text(q::<i64>(&mut s, &["DOC.COUNT", coll, "{}"]));
    assert_eq!(e, format!("MOVED {slot} {}", dst.addr()), "{e}");
    let e = err_text(q::<String>(&mut s, &["DOC.INDEXES", coll]));
    assert!(e.starts_with("MOVED"), "{e}");
}

/// A half-moved slot: a DOC command for a collection still on the source runs there, one
/// for a collection already moved is sent to the target with ASK (which runs it after
/// ASKING), and a key of the same name is checked among keys, not collections.
#[test]
fn a_half_moved_slot_sends_a_moved_collection_to_the_target_with_ask() {
    if !tool_available("redis-cli") {
        return;
    }
    let nodes = [
        Node::start(false, &[]),
        Node::start(false, &[]),
        Node::start(false, &[]),
    ];
    create(&[&nodes[0], &nodes[1], &nodes[2]], 0);
    let slot: u16 = nodes[0]
        .cmd(&["CLUSTER", "KEYSLOT", "{x}a"])
        .parse()
        .expect("slot");
    let all = masters(&nodes[0]);
    let owner = all
        .iter()
        .find(|m| m.ranges.iter().any(|&(a, b)| (a..=b).contains(&slot)))
        .expect("owner");
    let target = all.iter().find(|m| m.id != owner.id).expect("target");
    let src = nodes.iter().find(|n| n.port == owner.port).expect("src");
    let dst = nodes.iter().find(|n| n.port == target.port).expect("dst");
    let mut s = src.conn();
    let mut d = dst.conn();
    for c in ["{x}a", "{x}b"] {
        let _: Vec<redis::Value> = q(&mut s, &["DOC.INSERT", c, r#"{"_id":1}"#]).unwrap();
    }
    let _: () = q(&mut s, &["SET", "{x}b", "key"]).unwrap();
    let slot_s = slot.to_string();
    let _: () = q(
        &mut d,
        &["CLUSTER", "SETSLOT", &slot_s, "IMPORTING", &owner.id],
    )
    .unwrap();
    let _: () = q(
        &mut s,
        &["CLUSTER", "SETSLOT", &slot_s, "MIGRATING", &target.id],
    )
    .unwrap();
    let port = dst.port.to_string();
    let moved: String = q(
        &mut s,
        &[
            "MIGRATE",
            "127.0.0.1",
            &port,
            "",
            "0",
            "5000",
            "KEYS",
            "{x}a",
        ],
    )
    .unwrap();
    assert_eq!(moved, "OK");
    let e = err_text(q::<i64>(&mut s, &["DOC.COUNT", "{x}a", "{}"]));
    assert_eq!(e, format!("ASK {slot} {}", dst.addr()));
    assert_eq!(int(&mut s, &["DOC.COUNT", "{x}b", "{}"]), 1);
    assert_eq!(q::<String>(&mut s, &["GET", "{x}b"]).unwrap(), "key");
    // A key named as the moved collection was never a key: GET is sent on too.
    let e = err_text(q::<Option<String>>(&mut s, &["GET", "{x}a"]));
    assert!(e.starts_with("ASK"), "{e}");
    // The target runs it after ASKING, and refuses it without.
    let e = err_text(q::<i64>(&mut d, &["DOC.COUNT", "{x}a", "{}"]));
    assert!(e.starts_with("MOVED"), "{e}");
    let mut pipe = redis::pipe();
    pipe.cmd("ASKING")
        .ignore()
        .cmd("DOC.COUNT")
        .arg("{x}a")
        .arg("{}");
    let (n,): (i64,) = pipe.query(&mut d).expect("ASKING then DOC.COUNT");
    assert_eq!(n, 1);
    // The slot cannot be given away while the source holds a collection of it.
    let e = err_text(q::<String>(
        &mut s,
        &["CLUSTER", "SETSLOT", &slot_s, "NODE", &target.id],
    ));
    assert!(e.contains("still hold keys"), "{e}");
}

fn temp_dir(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("tidecache-collmove-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

fn journaled(dir: &Path) -> TestServer {
    TestServer::start(&[
        "--dir",
        dir.to_str().expect("utf-8 path"),
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
    ])
}

/// Whether the journal in `dir` holds `what`.
fn journal_holds(dir: &Path, what: &[u8]) -> bool {
    std::fs::read_dir(dir.join("appendonlydir"))
        .map(|entries| {
            entries.flatten().any(|e| {
                std::fs::read(e.path()).is_ok_and(|b| b.windows(what.len()).any(|w| w == what))
            })
        })
        .unwrap_or(false)
}

fn migrate(c: &mut redis::Connection, port: u16, rest: &[&str]) -> redis::RedisResult<String> {
    let port = port.to_string();
    let mut args = vec!["MIGRATE", "127.0.0.1", &port, "", "0", "5000"];
    args.extend_from_slice(rest);
    q::<String>(c, &args)
}

/// What a test compares of a collection on two servers: its documents (sorted: outside a
/// capped collection their order is each server's shard placement) and its indexes.
fn contents(c: &mut redis::Connection, coll: &str) -> (Vec<String>, Vec<String>) {
    let mut docs = strs(c, &["DOC.FIND", coll, "{}"]);
    docs.sort();
    (docs, strs(c, &["DOC.INDEXES", coll]))
}

#[test]
fn migrate_copy_keeps_the_source_collection_and_replace_moves_it_for_good() {
    let (sdir, ddir) = (temp_dir("src"), temp_dir("dst"));
    let src = journaled(&sdir);
    let dst = journaled(&ddir);
    let (mut s, mut d) = (src.conn(), dst.conn());
    // A capped collection (bounded to 5 documents) with a unique index and a change stream,
    // and one with a TTL index.
    let _: () = q(
        &mut s,
        &[
            "DOC.CREATE",
            "capped",
            "CAPPED",
            "SIZE",
            "100000",
            "MAX",
            "5",
            "CHANGES",
            "capped.changes",
        ],
    )
    .unwrap();
    let _: String = q(
        &mut s,
        &["DOC.CREATEINDEX", "capped", r#"{"n":1}"#, "UNIQUE"],
    )
    .unwrap();
    for i in 0..7 {
        let doc = format!(r#"{{"_id":{i},"n":{i}}}"#);
        let _: Vec<redis::Value> = q(&mut s, &["DOC.INSERT", "capped", &doc]).unwrap();
    }
    let _: String = q(&mut s, &["DOC.EXPIREINDEX", "sessions", "at", "3600"]).unwrap();
    for i in 0..50 {
        let doc = format!(r#"{{"_id":"s{i}","at":"$$NOW"}}"#);
        let _: Vec<redis::Value> = q(&mut s, &["DOC.INSERT", "sessions", &doc]).unwrap();
    }
    let capped = contents(&mut s, "capped");
    let sessions = contents(&mut s, "sessions");
    assert_eq!(capped.0.len(), 5, "{capped:?}");

    // COPY: the target gets both, the source keeps both.
    let ok = migrate(&mut s, dst.port, &["COPY", "KEYS", "capped", "sessions"]).unwrap();
    assert_eq!(ok, "OK");
    assert_eq!(contents(&mut s, "capped"), capped);
    assert_eq!(contents(&mut s, "sessions"), sessions);
    assert_eq!(contents(&mut d, "capped"), capped);
    assert_eq!(
        strs(&mut d, &["DOC.FIND", "capped", "{}"]),
        strs(&mut s, &["DOC.FIND", "capped", "{}"]),
        "a capped collection keeps its insertion order"
    );
    assert_eq!(contents(&mut d, "sessions"), sessions);
    let st = stats(&mut d, "capped");
    assert_eq!(st["capped"], true, "{st}");
    assert_eq!(st["max"], 5, "{st}");
    assert_eq!(st["changes"]["stream"], "capped.changes", "{st}");
    // The move appended nothing to the target's change stream; its next insert does, and
    // trims the oldest document, as on the source.
    assert_eq!(int(&mut d, &["EXISTS", "capped.changes"]), 0);
    let _: Vec<redis::Value> = q(&mut d, &["DOC.INSERT", "capped", r#"{"_id":7,"n":7}"#]).unwrap();
    assert_eq!(int(&mut d, &["DOC.COUNT", "capped", r#"{"_id":2}"#]), 0);
    assert_eq!(int(&mut d, &["DOC.COUNT", "capped", "{}"]), 5);
    assert!(int(&mut d, &["XLEN", "capped.changes"]) >= 1);
    let e = err_text(q::<Vec<redis::Value>>(
        &mut d,
        &["DOC.INSERT", "capped", r#"{"_id":70,"n":7}"#],
    ));
    assert!(e.contains("E11000"), "the unique index moved: {e}");

    // Without REPLACE, a collection already there is BUSYKEY, and the source keeps its own.
    let e = err_text(migrate(&mut s, dst.port, &["KEYS", "capped"]));
    assert_eq!(
        e,
        "ERR Target instance replied with error: BUSYKEY Target collection name already exists."
    );
    assert_eq!(contents(&mut s, "capped"), capped);

    // REPLACE, without COPY: the target's are replaced, the source's gone.
    let ok = migrate(&mut s, dst.port, &["REPLACE", "KEYS", "capped", "sessions"]).unwrap();
    assert_eq!(ok, "OK");
    assert!(strs(&mut s, &["DOC.COLLECTIONS"]).is_empty());
    assert_eq!(contents(&mut d, "capped"), capped);
    assert_eq!(contents(&mut d, "sessions"), sessions);
    assert_eq!(
        migrate(&mut s, dst.port, &["KEYS", "capped"]).unwrap(),
        "NOKEY"
    );

    // Both journals hold it: after a restart the source has nothing, the target both.
    assert!(
        eventually(10.0, || journal_holds(&sdir, b"DOC.JOURNALDROP")),
        "the source's removal is not in its journal"
    );
    drop((s, d));
    drop((src, dst));
    let (src, dst) = (journaled(&sdir), journaled(&ddir));
    let (mut s, mut d) = (src.conn(), dst.conn());
    assert!(strs(&mut s, &["DOC.COLLECTIONS"]).is_empty());
    assert_eq!(contents(&mut d, "capped"), capped);
    assert_eq!(contents(&mut d, "sessions"), sessions);
    drop((s, d));
    drop((src, dst));
    let _ = std::fs::remove_dir_all(&sdir);
    let _ = std::fs::remove_dir_all(&ddir);
}

/// A collection written while the target had it but had not answered yet stays on the
/// source; the one nobody wrote to goes.
#[test]
fn a_collection_written_during_its_transfer_is_kept() {
    let held = held_target(b"DOC.RESTORE", 2);
    let src = TestServer::start(&[]);
    let mut s = src.conn();
    for c in ["calm", "busy"] {
        let _: Vec<redis::Value> = q(&mut s, &["DOC.INSERT", c, r#"{"_id":1}"#]).unwrap();
    }
    let mut waiting = src.raw();
    let port = held.port.to_string();
    waiting.send(&resp(&[
        "MIGRATE",
        "127.0.0.1",
        &port,
        "",
        "0",
        "5000",
        "KEYS",
        "calm",
        "busy",
    ]));
    held.got.recv_timeout(Duration::from_secs(5)).unwrap();
    let _: Vec<redis::Value> = q(&mut s, &["DOC.INSERT", "busy", r#"{"_id":2}"#]).unwrap();
    held.go.send(()).unwrap();
    waiting.roundtrip(b"", b"+OK\r\n");
    assert_eq!(strs(&mut s, &["DOC.COLLECTIONS"]), vec!["busy"]);
    assert_eq!(int(&mut s, &["DOC.COUNT", "busy", "{}"]), 2);
    drop(src);
    let _ = held.thread.join();
}

/// DOC.DUMP and DOC.RESTORE on their own: under another name, BUSYKEY, REPLACE, and a
/// damaged payload refused with RESTORE's texts.
#[test]
fn doc_dump_and_doc_restore() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    let _: String = q(
        &mut c,
        &["DOC.CREATEINDEX", "a", r#"{"k":-1}"#, "NAME", "byk"],
    )
    .unwrap();
    let _: Vec<redis::Value> = q(
        &mut c,
        &[
            "DOC.INSERT",
            "a",
            r#"{"_id":1,"k":"x"}"#,
            r#"{"_id":2,"k":"y"}"#,
        ],
    )
    .unwrap();
    let payload: Vec<u8> = q(&mut c, &["DOC.DUMP", "a"]).unwrap();
    assert!(q::<Option<Vec<u8>>>(&mut c, &["DOC.DUMP", "nosuch"])
        .unwrap()
        .is_none());
    let restore = |c: &mut redis::Connection, name: &str, p: &[u8], replace: bool| {
        let mut cmd = redis::cmd("DOC.RESTORE");
        cmd.arg(name).arg(p);
        if replace {
            cmd.arg("REPLACE");
        }
        cmd.query::<String>(c)
    };
    assert_eq!(restore(&mut c, "b", &payload, false).unwrap(), "OK");
    assert_eq!(contents(&mut c, "b"), contents(&mut c, "a"));
    assert_eq!(
        err_text(restore(&mut c, "b", &payload, false)),
        "BUSYKEY Target collection name already exists."
    );
    let _: Vec<redis::Value> = q(&mut c, &["DOC.INSERT", "b", r#"{"_id":3}"#]).unwrap();
    assert_eq!(restore(&mut c, "b", &payload, true).unwrap(), "OK");
    assert_eq!(int(&mut c, &["DOC.COUNT", "b", "{}"]), 2);
    let mut bad = payload.clone();
    bad[5] ^= 0x20;
    assert_eq!(
        err_text(restore(&mut c, "c", &bad, false)),
        "ERR DUMP payload version or checksum are wrong"
    );
    assert_eq!(
        err_text(restore(&mut c, "c$", &payload, false)),
        "ERR Invalid collection name: 'c$'"
    );
    assert!(!strs(&mut c, &["DOC.COLLECTIONS"]).contains(&"c".to_string()));
}

/// The replicas of both sides follow a move: the target's gets the collection whole (the
/// DOC.RESTORE its master ran), the source's drops it (DOC.JOURNALDROP).
#[test]
fn replicas_follow_a_collection_that_moved() {
    let (src, dst) = (TestServer::start(&[]), TestServer::start(&[]));
    let (src_r, dst_r) = (TestServer::start(&[]), TestServer::start(&[]));
    let (mut s, mut sr, mut dr) = (src.conn(), src_r.conn(), dst_r.conn());
    replicate(&mut sr, &src);
    replicate(&mut dr, &dst);
    let _: String = q(&mut s, &["DOC.CREATEINDEX", "c", r#"{"k":1}"#, "UNIQUE"]).unwrap();
    for i in 0..100 {
        let doc = format!(r#"{{"_id":{i},"k":{i}}}"#);
        let _: Vec<redis::Value> = q(&mut s, &["DOC.INSERT", "c", &doc]).unwrap();
    }
    let want = contents(&mut s, "c");
    assert!(eventually(10.0, || contents(&mut sr, "c") == want));
    assert_eq!(migrate(&mut s, dst.port, &["KEYS", "c"]).unwrap(), "OK");
    assert!(
        eventually(10.0, || contents(&mut dr, "c") == want),
        "the target's replica: {:?}",
        contents(&mut dr, "c")
    );
    assert!(
        eventually(10.0, || strs(&mut sr, &["DOC.COLLECTIONS"]).is_empty()),
        "the source's replica kept {:?}",
        strs(&mut sr, &["DOC.COLLECTIONS"])
    );
}
