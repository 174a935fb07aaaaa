//! Atomic slot migration (Redis 8.4's CLUSTER MIGRATION) between tidecache masters made by
//! `redis-cli --cluster create`: keys with and without deadlines, a hash, a list, and a
//! collection with a secondary and a TTL index move with a client writing to the slots
//! throughout; the target answers for all of it, the source holds nothing and redirects;
//! STATUS, CLUSTER INFO and CLIENT LIST say what happened; a cancelled import leaves the
//! slots where they were and the target without a trace of them; bad requests change
//! nothing.
mod support;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use support::cluster::{check, create, tool_available, Node};
use support::{err_text, eventually, int, q, strs};
use tidecache::state::cluster::key_slot;

/// The node that owns `slot`, by CLUSTER SLOTS of `n`.
fn owner_port(n: &Node, slot: u16) -> u16 {
    let mut c = n.conn();
    let slots: Vec<(i64, i64, Vec<redis::Value>)> = redis::cmd("CLUSTER")
        .arg("SLOTS")
        .query::<Vec<redis::Value>>(&mut c)
        .expect("CLUSTER SLOTS")
        .into_iter()
        .filter_map(|v| match v {
            redis::Value::Array(items) if items.len() >= 3 => {
                let a = redis::from_redis_value::<i64>(items[0].clone()).ok()?;
                let b = redis::from_redis_value::<i64>(items[1].clone()).ok()?;
                let m = match &items[2] {
                    redis::Value::Array(m) => m.clone(),
                    _ => return None,
                };
                Some((a, b, m))
            }
            _ => None,
        })
        .collect();
    for (a, b, m) in slots {
        if (a..=b).contains(&(slot as i64)) {
            return redis::from_redis_value::<i64>(m[1].clone()).expect("port") as u16;
        }
    }
    panic!("no owner of slot {slot}")
}

/// `CLUSTER MIGRATION STATUS ID id` as field → text.
fn status(n: &Node, id: &str) -> std::collections::HashMap<String, String> {
    let mut c = n.conn();
    let rows: Vec<Vec<redis::Value>> = redis::cmd("CLUSTER")
        .arg(&["MIGRATION", "STATUS", "ID", id])
        .query(&mut c)
        .expect("STATUS");
    let mut out = std::collections::HashMap::new();
    if let Some(row) = rows.first() {
        for pair in row.chunks(2) {
            let k: String = redis::from_redis_value(pair[0].clone()).expect("field");
            let v = match &pair[1] {
                redis::Value::Int(i) => i.to_string(),
                v => redis::from_redis_value::<String>(v.clone()).unwrap_or_default(),
            };
            out.insert(k, v);
        }
    }
    out
}

fn wait_done(n: &Node, id: &str) -> std::collections::HashMap<String, String> {
    let mut last = Default::default();
    let done = eventually(120.0, || {
        last = status(n, id);
        matches!(
            last.get("state").map(String::as_str),
            Some("completed" | "failed" | "canceled")
        )
    });
    assert!(done, "the task did not end: {last:?}");
    last
}

fn names_in(n: &Node, slots: std::ops::RangeInclusive<u16>) -> i64 {
    let mut c = n.conn();
    slots
        .map(|s| int(&mut c, &["CLUSTER", "COUNTKEYSINSLOT", &s.to_string()]))
        .sum()
}

#[test]
fn slots_move_atomically_with_keys_collections_and_a_writer_throughout() {
    if !tool_available("redis-cli") {
        return;
    }
    let extra = ["--ttl-monitor-period", "1"];
    let nodes = [
        Node::start(false, &extra),
        Node::start(false, &extra),
        Node::start(false, &extra),
    ];
    create(&[&nodes[0], &nodes[1], &nodes[2]], 0);
    let node = |port: u16| nodes.iter().find(|n| n.port == port).expect("a node");
    let src = node(owner_port(&nodes[0], 0));
    let dst = nodes.iter().find(|n| n.port != src.port).expect("another");
    let moving = 0u16..=999;
    let src_end: u16 = {
        // The source's first range ends where the next owner starts.
        let mut s = 0;
        while s < 16383 && owner_port(&nodes[0], s + 1) == src.port {
            s += 1;
        }
        s
    };
    assert!(src_end > 1500, "the source owns 0..={src_end}");

    // Keys on the source: those of the moving slots and others that stay.
    let mut s = src.conn();
    let (mut moved, mut stayed) = (Vec::new(), Vec::new());
    let mut i = 0;
    while moved.len() < 3000 || stayed.len() < 500 {
        let k = format!("k{i}");
        i += 1;
        let slot = key_slot(k.as_bytes());
        if moving.contains(&slot) && moved.len() < 3000 {
            moved.push(k);
        } else if slot > *moving.end() && slot <= src_end && stayed.len() < 500 {
            stayed.push(k);
        }
    }
    for (j, k) in moved.iter().chain(stayed.iter()).enumerate() {
        if j % 3 == 0 {
            let _: () = q(&mut s, &["SET", k, &format!("v{j}"), "EX", "3600"]).unwrap();
        } else {
            let _: () = q(&mut s, &["SET", k, &format!("v{j}")]).unwrap();
        }
    }
    let tag = (0..)
        .map(|t| format!("t{t}"))
        .find(|t| moving.contains(&key_slot(t.as_bytes())))
        .expect("a tag");
    let coll = format!("{{{tag}}}sessions");
    let hash = format!("{{{tag}}}h");
    let list = format!("{{{tag}}}l");
    let _: i64 = q(&mut s, &["HSET", &hash, "a", "1", "b", "2"]).unwrap();
    let _: i64 = q(&mut s, &["RPUSH", &list, "x", "y", "z"]).unwrap();
    assert_eq!(
        q::<String>(&mut s, &["DOC.CREATEINDEX", &coll, r#"{"user":1}"#]).unwrap(),
        "user_1"
    );
    assert_eq!(
        q::<String>(&mut s, &["DOC.EXPIREINDEX", &coll, "accessTime", "3600"]).unwrap(),
        "accessTime_1"
    );
    for batch in 0..10 {
        let docs: Vec<String> = (batch * 100..batch * 100 + 100)
            .map(|i| format!(r#"{{"_id":{i},"user":"u{}","accessTime":"$$NOW"}}"#, i % 50))
            .collect();
        let mut cmd = redis::cmd("DOC.INSERT");
        cmd.arg(&coll).arg(&docs);
        let _: Vec<redis::Value> = cmd.query(&mut s).expect("DOC.INSERT");
    }
    // One document already due: it expires before or after the flip, once.
    let _: Vec<redis::Value> = q(
        &mut s,
        &[
            "DOC.INSERT",
            &coll,
            r#"{"_id":"old","accessTime":{"$date":"2001-01-01T00:00:00Z"}}"#,
        ],
    )
    .unwrap();
    let indexes = strs(&mut s, &["DOC.INDEXES", &coll]);

    // A writer through a cluster client, on keys of the moving slots, throughout.
    let stop = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(AtomicU64::new(0));
    let writer = {
        let (stop, acked) = (stop.clone(), acked.clone());
        let addr = format!("redis://{}/", src.addr());
        let keys: Vec<String> = moved.iter().take(200).cloned().collect();
        std::thread::spawn(move || {
            let client = redis::cluster::ClusterClient::new(vec![addr]).expect("client");
            let mut cc = client.get_connection().expect("cluster connection");
            let mut n = 0u64;
            let mut errors = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let k = &keys[(n as usize) % keys.len()];
                let r: redis::RedisResult<i64> =
                    redis::cmd("INCR").arg(format!("{{{k}}}:n")).query(&mut cc);
                match r {
                    Ok(_) => {
                        n += 1;
                        acked.store(n, Ordering::Relaxed);
                    }
                    Err(e) => errors.push(e.to_string()),
                }
            }
            (n, errors, keys)
        })
    };
    std::thread::sleep(Duration::from_millis(300));

    let mut d = dst.conn();
    let id: String = q(&mut d, &["CLUSTER", "MIGRATION", "IMPORT", "0", "999"]).unwrap();
    assert_eq!(id.len(), 40, "{id}");
    let st = wait_done(dst, &id);
    assert_eq!(st["state"], "completed", "{st:?}");
    assert_eq!(st["operation"], "import");
    assert_eq!(st["slots"], "0-999");
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    let (writes, errors, wkeys) = writer.join().expect("writer");
    assert!(writes > 0);
    assert!(errors.is_empty(), "the writer saw errors: {errors:?}");
    let on_src = wait_done(src, &id);
    assert_eq!(on_src["state"], "completed", "{on_src:?}");
    assert_eq!(on_src["operation"], "migrate");
    let pause: i64 = on_src["write_pause_ms"].parse().expect("pause");
    assert!(pause < 10_000, "{on_src:?}");

    for n in &nodes {
        assert!(
            eventually(20.0, || n.info_field("cluster_state") == "ok"),
            "{}",
            n.cmd(&["CLUSTER", "NODES"])
        );
    }
    check(src);

    // Every acknowledged write is on the target.
    let total: i64 = wkeys
        .iter()
        .map(|k| {
            q::<Option<i64>>(&mut d, &["GET", &format!("{{{k}}}:n")])
                .unwrap()
                .unwrap_or(0)
        })
        .sum();
    assert_eq!(total as u64, writes, "acknowledged increments lost");
    for (j, k) in moved.iter().enumerate() {
        let v: Option<String> = q(&mut d, &["GET", k]).unwrap();
        assert_eq!(v.as_deref(), Some(format!("v{j}").as_str()), "{k}");
        let ttl = int(&mut d, &["TTL", k]);
        if j % 3 == 0 {
            assert!(ttl > 3000, "{k} keeps its deadline: {ttl}");
        } else {
            assert_eq!(ttl, -1, "{k}");
        }
    }
    assert_eq!(
        q::<Vec<String>>(&mut d, &["LRANGE", &list, "0", "-1"]).unwrap(),
        ["x", "y", "z"]
    );
    assert_eq!(q::<String>(&mut d, &["HGET", &hash, "b"]).unwrap(), "2");
    assert!(eventually(10.0, || int(
        &mut d,
        &["DOC.COUNT", &coll, "{}"]
    ) == 1000));
    assert_eq!(strs(&mut d, &["DOC.INDEXES", &coll]), indexes);
    assert_eq!(int(&mut d, &["DOC.COUNT", &coll, r#"{"user":"u7"}"#]), 20);

    // The source holds nothing of the slots, keeps the others, and redirects.
    assert_eq!(names_in(src, moving.clone()), 0);
    let mut s = src.conn();
    for (j, k) in stayed.iter().enumerate() {
        let v: Option<String> = q(&mut s, &["GET", k]).unwrap_or_else(|e| {
            panic!(
                "{k} (slot {}, source range to {src_end}): {e}\n{}",
                key_slot(k.as_bytes()),
                src.cmd(&["CLUSTER", "NODES"])
            )
        });
        assert_eq!(v.as_deref(), Some(format!("v{}", j + moved.len()).as_str()));
    }
    let e = err_text(q::<Option<String>>(&mut s, &["GET", &moved[0]]));
    assert!(e.starts_with("MOVED") && e.ends_with(&dst.addr()), "{e}");
    let e = err_text(q::<i64>(&mut s, &["DOC.COUNT", &coll, "{}"]));
    assert!(e.starts_with("MOVED"), "{e}");
    assert!(strs(&mut s, &["DOC.COLLECTIONS"]).is_empty());

    // CLUSTER INFO counts the trim and no active task.
    let info = dst.cmd(&["CLUSTER", "INFO"]);
    assert!(
        info.contains("cluster_slot_migration_active_tasks:0"),
        "{info}"
    );
    let info = src.cmd(&["CLUSTER", "INFO"]);
    assert!(
        info.contains("cluster_slot_migration_stats_active_trim_completed:1"),
        "{info}"
    );
    // The buffers are empty once the task is over, and the target's input held something.
    let mem = dst.cmd(&["INFO", "memory"]);
    assert!(
        mem.contains("mem_cluster_slot_migration_input_buffer:0"),
        "{mem}"
    );
    let peak = mem
        .lines()
        .find_map(|l| l.strip_prefix("mem_cluster_slot_migration_input_buffer_peak:"))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(0);
    assert!(peak > 0, "{mem}");
    let mem = src.cmd(&["INFO", "memory"]);
    assert!(
        mem.contains("mem_cluster_slot_migration_output_buffer:0"),
        "{mem}"
    );
}

#[test]
fn a_cancelled_or_refused_import_leaves_the_slots_where_they_were() {
    if !tool_available("redis-cli") {
        return;
    }
    let nodes = [
        Node::start(false, &[]),
        Node::start(false, &[]),
        Node::start(false, &[]),
    ];
    create(&[&nodes[0], &nodes[1], &nodes[2]], 0);
    let node = |port: u16| nodes.iter().find(|n| n.port == port).expect("a node");
    let src = node(owner_port(&nodes[0], 0));
    let dst = nodes.iter().find(|n| n.port != src.port).expect("another");
    let mut d = dst.conn();

    // Bad requests: a clear error, nothing started.
    let e = err_text(q::<String>(
        &mut d,
        &["CLUSTER", "MIGRATION", "IMPORT", "10", "5"],
    ));
    assert!(e.contains("greater than"), "{e}");
    let e = err_text(q::<String>(
        &mut d,
        &["CLUSTER", "MIGRATION", "IMPORT", "0", "16384"],
    ));
    assert!(e.contains("out of range"), "{e}");
    let e = err_text(q::<String>(
        &mut d,
        &["CLUSTER", "MIGRATION", "IMPORT", "0"],
    ));
    assert!(e.contains("wrong number"), "{e}");
    let mine = owner_port(&nodes[0], 16383) == dst.port;
    let own_slot = if mine { "16383" } else { "8000" };
    if owner_port(&nodes[0], own_slot.parse().unwrap()) == dst.port {
        let e = err_text(q::<String>(
            &mut d,
            &["CLUSTER", "MIGRATION", "IMPORT", own_slot, own_slot],
        ));
        assert!(e.contains("already the owner"), "{e}");
    }
    let e = err_text(q::<String>(
        &mut d,
        &["CLUSTER", "MIGRATION", "IMPORT", "0", "16383"],
    ));
    assert!(
        e.contains("already the owner") || e.contains("same node"),
        "{e}"
    );
    let e = err_text(q::<Vec<String>>(
        &mut d,
        &["CLUSTER", "MIGRATION", "STATUS", "BOGUS"],
    ));
    assert!(e.contains("unknown argument"), "{e}");
    assert_eq!(
        q::<Vec<redis::Value>>(&mut d, &["CLUSTER", "MIGRATION", "STATUS", "ALL"])
            .unwrap()
            .len(),
        0
    );
    assert_eq!(int(&mut d, &["CLUSTER", "MIGRATION", "CANCEL", "ALL"]), 0);

    // A large slot range, cancelled while the snapshot is sent: the slots stay on the
    // source with every key, the target keeps none of them.
    let mut s = src.conn();
    let mut pipe = redis::pipe();
    let mut n = 0;
    for i in 0..200_000 {
        let k = format!("c{i}");
        if key_slot(k.as_bytes()) <= 2000 {
            pipe.cmd("SET").arg(&k).arg(vec![b'x'; 200]).ignore();
            n += 1;
        }
    }
    let _: () = pipe.query(&mut s).expect("load");
    let before = names_in(src, 0..=2000);
    assert_eq!(before, n);
    let id: String = q(&mut d, &["CLUSTER", "MIGRATION", "IMPORT", "0", "2000"]).unwrap();
    let e = err_text(q::<String>(
        &mut d,
        &["CLUSTER", "MIGRATION", "IMPORT", "3000", "3001"],
    ));
    assert!(e.contains("already in progress"), "{e}");
    assert_eq!(
        int(&mut d, &["CLUSTER", "MIGRATION", "CANCEL", "ID", &id]),
        1
    );
    let st = wait_done(dst, &id);
    assert_eq!(st["state"], "canceled", "{st:?}");
    assert!(eventually(10.0, || names_in(dst, 0..=2000) == 0));
    assert!(eventually(10.0, || src
        .info_field("cluster_slot_migration_active_tasks")
        == "0"));
    assert_eq!(names_in(src, 0..=2000), before);
    assert_eq!(owner_port(dst, 0), src.port);
    assert_eq!(owner_port(src, 2000), src.port);
    check(src);
}

/// Loads `n` keys of slots `0..=last` on `node` (200-byte values); their names.
fn load(node: &Node, prefix: &str, last: u16, n: usize) -> Vec<String> {
    let mut c = node.conn();
    let mut names = Vec::new();
    let mut pipe = redis::pipe();
    let mut i = 0;
    while names.len() < n {
        let k = format!("{prefix}{i}");
        i += 1;
        if key_slot(k.as_bytes()) <= last {
            pipe.cmd("SET").arg(&k).arg(vec![b'x'; 200]).ignore();
            names.push(k);
        }
    }
    let _: () = pipe.query(&mut c).expect("load");
    names
}

/// A writer of INCRs on `keys` through a cluster client until `stop`: the count each key
/// was acknowledged.
fn spawn_writer(
    addrs: Vec<String>,
    keys: Vec<String>,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<Vec<u64>> {
    std::thread::spawn(move || {
        let mut acked = vec![0u64; keys.len()];
        let client = redis::cluster::ClusterClient::builder(addrs)
            .connection_timeout(Duration::from_millis(500))
            .response_timeout(Duration::from_secs(2))
            .retries(2)
            .build()
            .expect("client");
        let mut conn = None;
        let mut i = 0;
        while !stop.load(Ordering::Relaxed) {
            if conn.is_none() {
                conn = client.get_connection().ok();
                if conn.is_none() {
                    std::thread::sleep(Duration::from_millis(100));
                    continue;
                }
            }
            let Some(cc) = conn.as_mut() else { continue };
            let j = i % keys.len();
            let r: redis::RedisResult<i64> = redis::cmd("INCR").arg(&keys[j]).query(cc);
            match r {
                Ok(_) => acked[j] += 1,
                Err(_) => {
                    conn = None;
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
            i += 1;
        }
        acked
    })
}

/// `kill -9` of the target, then of the source, in the middle of a migration (the snapshot
/// slowed by rdb-key-save-delay), every node journaling with `appendfsync always`: each
/// time the slots end up on exactly one side with every acknowledged write, the restarted
/// target holds nothing of slots it does not own, and the next import completes.
#[test]
fn a_migration_killed_on_either_side_leaves_each_slot_on_one_side_with_every_write() {
    if !tool_available("redis-cli") {
        return;
    }
    let extra = ["--appendonly", "yes", "--appendfsync", "always"];
    let mut nodes = vec![
        Node::start(false, &extra),
        Node::start(false, &extra),
        Node::start(false, &extra),
    ];
    {
        let refs: Vec<&Node> = nodes.iter().collect();
        create(&refs, 0);
    }
    let si = nodes
        .iter()
        .position(|n| n.port == owner_port(&nodes[0], 0))
        .expect("source");
    let di = (si + 1) % 3;
    let names = load(&nodes[si], "m", 1999, 20_000);
    let counters: Vec<String> = (0..50).map(|i| format!("{{{}}}:n", names[i * 7])).collect();
    let addrs: Vec<String> = nodes
        .iter()
        .map(|n| format!("redis://{}/", n.addr()))
        .collect();

    for victim in ["target", "source"] {
        let _: () = q(
            &mut nodes[si].conn(),
            &["CONFIG", "SET", "rdb-key-save-delay", "200"],
        )
        .unwrap();
        let before: Vec<i64> = {
            let mut s = nodes[si].conn();
            counters
                .iter()
                .map(|k| q::<Option<i64>>(&mut s, &["GET", k]).unwrap().unwrap_or(0))
                .collect()
        };
        let stop = Arc::new(AtomicBool::new(false));
        let writer = spawn_writer(addrs.clone(), counters.clone(), stop.clone());
        std::thread::sleep(Duration::from_millis(300));
        let id: String = q(
            &mut nodes[di].conn(),
            &["CLUSTER", "MIGRATION", "IMPORT", "0", "1999"],
        )
        .unwrap();
        // Mid-way: the target has applied part of the snapshot.
        assert!(
            eventually(30.0, || names_in(&nodes[di], 0..=1999) > 1000),
            "the import did not start: {:?}",
            status(&nodes[di], &id)
        );
        let k = if victim == "target" { di } else { si };
        nodes[k].kill();
        std::thread::sleep(Duration::from_millis(500));
        let (port, dir) = (nodes[k].port, nodes[k].dir.clone());
        nodes[k] = Node::start_in(false, port, dir, &extra);
        for n in &nodes {
            assert!(
                eventually(30.0, || n.info_field("cluster_state") == "ok"),
                "{}",
                n.cmd(&["CLUSTER", "NODES"])
            );
        }
        stop.store(true, Ordering::Relaxed);
        let acked = writer.join().expect("writer");
        // The source still owns every slot, with every key; the target holds none of them.
        assert_eq!(owner_port(&nodes[di], 0), nodes[si].port, "{victim}");
        assert_eq!(owner_port(&nodes[si], 1999), nodes[si].port, "{victim}");
        assert!(
            eventually(30.0, || names_in(&nodes[di], 0..=1999) == 0),
            "the target kept imported keys after the {victim} was killed"
        );
        assert!(eventually(30.0, || nodes[di]
            .info_field("cluster_slot_migration_active_tasks")
            == "0"));
        let mut s = nodes[si].conn();
        for (j, k) in counters.iter().enumerate() {
            let v = q::<Option<i64>>(&mut s, &["GET", k]).unwrap().unwrap_or(0);
            assert!(
                v >= before[j] + acked[j] as i64,
                "{k}: {v} after {} acknowledged increments on {} ({victim} killed)",
                acked[j],
                before[j]
            );
        }
        assert_eq!(
            q::<Option<String>>(&mut s, &["GET", &names[0]])
                .unwrap()
                .map(|v| v.len()),
            Some(200)
        );
        check(&nodes[si]);
    }

    // After both failures, the migration goes through.
    let _: () = q(
        &mut nodes[si].conn(),
        &["CONFIG", "SET", "rdb-key-save-delay", "0"],
    )
    .unwrap();
    let id: String = q(
        &mut nodes[di].conn(),
        &["CLUSTER", "MIGRATION", "IMPORT", "0", "1999"],
    )
    .unwrap();
    let st = wait_done(&nodes[di], &id);
    assert_eq!(st["state"], "completed", "{st:?}");
    assert_eq!(
        names_in(&nodes[di], 0..=1999) as usize,
        names.len() + counters.len()
    );
    assert!(eventually(10.0, || names_in(&nodes[si], 0..=1999) == 0));
}

/// (id, master id or "-") of each node in CLUSTER NODES of `n`, by port.
fn roles(n: &Node) -> Vec<(u16, String, String)> {
    n.cmd(&["CLUSTER", "NODES"])
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            let port = f
                .get(1)?
                .split('@')
                .next()?
                .rsplit(':')
                .next()?
                .parse()
                .ok()?;
            Some((port, f[0].to_string(), f.get(3)?.to_string()))
        })
        .collect()
}

/// With a replica on each side: the target's replica receives what was imported, the
/// source's drops it after the flip; documents that fall due while the slots move expire
/// once, announced (`doc.expired`) by the node that owned the slot at that moment.
#[test]
fn replicas_follow_the_move_and_documents_due_meanwhile_expire_once() {
    if !tool_available("redis-cli") {
        return;
    }
    let extra = [
        "--ttl-monitor-period",
        "1",
        "--notify-keyspace-events",
        "KEx",
    ];
    let nodes: Vec<Node> = (0..6).map(|_| Node::start(false, &extra)).collect();
    {
        let refs: Vec<&Node> = nodes.iter().collect();
        create(&refs, 1);
    }
    let by_port = |p: u16| nodes.iter().find(|n| n.port == p).expect("node");
    let src = by_port(owner_port(&nodes[0], 0));
    assert!(eventually(20.0, || roles(src)
        .iter()
        .filter(|r| r.2 != "-")
        .count()
        == 3));
    let all = roles(src);
    let id_of = |p: u16| {
        all.iter()
            .find(|r| r.0 == p)
            .map(|r| r.1.clone())
            .expect("id")
    };
    let replica_of = |p: u16| {
        let id = id_of(p);
        by_port(all.iter().find(|r| r.2 == id).expect("a replica").0)
    };
    let dst = by_port(owner_port(&nodes[0], 16383));
    assert_ne!(src.port, dst.port);
    let (src_r, dst_r) = (replica_of(src.port), replica_of(dst.port));

    let names = load(src, "r", 999, 5000);
    let tag = (0..)
        .map(|t| format!("t{t}"))
        .find(|t| key_slot(t.as_bytes()) <= 999)
        .expect("tag");
    let coll = format!("{{{tag}}}s");
    let changes = format!("{{{tag}}}changes");
    let mut s = src.conn();
    let _: () = q(&mut s, &["DOC.CREATE", &coll, "CHANGES", &changes]).unwrap();
    let _: String = q(&mut s, &["DOC.EXPIREINDEX", &coll, "at", "1"]).unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_millis() as i64;
    let date = |ms: i64| format!(r#"{{"$date":{{"$numberLong":"{ms}"}}}}"#);
    let mut docs: Vec<String> = (0..30)
        .map(|i| format!(r#"{{"_id":"due{i}","at":{}}}"#, date(now + i * 120)))
        .collect();
    docs.extend(
        (0..100).map(|i| format!(r#"{{"_id":"later{i}","at":{}}}"#, date(now + 3_600_000))),
    );
    let mut cmd = redis::cmd("DOC.INSERT");
    cmd.arg(&coll).arg(&docs);
    let _: Vec<redis::Value> = cmd.query(&mut s).expect("insert");

    // Both masters' announcements of the collection's expiries.
    let listen = |n: &Node| {
        let mut c = n.conn();
        let channel = format!("__keyspace@0__:{coll}");
        std::thread::spawn(move || {
            let mut ps = c.as_pubsub();
            ps.subscribe(&channel).expect("subscribe");
            ps.set_read_timeout(Some(Duration::from_millis(500)))
                .expect("timeout");
            let mut got = Vec::new();
            let until = std::time::Instant::now() + Duration::from_secs(12);
            while std::time::Instant::now() < until {
                if let Ok(m) = ps.get_message() {
                    got.push(m.get_payload::<String>().unwrap_or_default());
                }
            }
            got
        })
    };
    let (on_src, on_dst) = (listen(src), listen(dst));
    std::thread::sleep(Duration::from_millis(200));
    let _: () = q(&mut s, &["CONFIG", "SET", "rdb-key-save-delay", "400"]).unwrap();
    let id: String = q(
        &mut dst.conn(),
        &["CLUSTER", "MIGRATION", "IMPORT", "0", "999"],
    )
    .unwrap();
    let st = wait_done(dst, &id);
    assert_eq!(st["state"], "completed", "{st:?}");
    let mut events = on_src.join().expect("listener");
    let from_src = events.len();
    events.extend(on_dst.join().expect("listener"));
    events.sort();
    let want: Vec<String> = {
        let mut w: Vec<String> = (0..30).map(|i| format!("\"due{i}\"")).collect();
        w.sort();
        w
    };
    assert_eq!(
        events, want,
        "each due document announced once ({from_src} by the source)"
    );
    let mut d = dst.conn();
    assert_eq!(int(&mut d, &["DOC.COUNT", &coll, "{}"]), 100);
    // The change stream moved with the collection (same tag) and holds each change once:
    // 130 inserts and 30 expiries, whichever node made them.
    let entries: Vec<Vec<redis::Value>> = q(&mut d, &["XRANGE", &changes, "-", "+"]).unwrap();
    let mut ops: std::collections::HashMap<String, usize> = Default::default();
    for e in &entries {
        let fields: Vec<String> = redis::from_redis_value(e[1].clone()).expect("fields");
        let op = fields
            .chunks(2)
            .find(|f| f[0] == "op")
            .map(|f| f[1].clone())
            .unwrap_or_default();
        *ops.entry(op).or_default() += 1;
    }
    assert_eq!(ops.get("insert"), Some(&130), "{ops:?}");
    assert_eq!(ops.get("expire"), Some(&30), "{ops:?}");
    assert_eq!(entries.len(), 160, "{ops:?}");

    // The target's replica has the slots' keys, the collection and its change stream; the
    // source's has none.
    assert!(
        eventually(20.0, || names_in(dst_r, 0..=999) as usize
            == names.len() + 2),
        "{} names on the target's replica",
        names_in(dst_r, 0..=999)
    );
    assert!(
        eventually(20.0, || names_in(src_r, 0..=999) == 0),
        "{} names left on the source's replica",
        names_in(src_r, 0..=999)
    );
    let mut r = dst_r.conn();
    let _: () = q(&mut r, &["READONLY"]).unwrap();
    assert_eq!(int(&mut r, &["DOC.COUNT", &coll, "{}"]), 100);
}
