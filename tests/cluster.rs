//! Cluster mode with real nodes on free ports: a cluster made by `redis-cli --cluster
//! create`, redirections, failure detection over the bus, nodes.conf across a restart, and
//! a mixed cluster with redis-server 7.
mod support;

use std::process::Command;
use std::time::Duration;
use support::cluster::{check, create, redis_cli, redis_server_available, Node};
use support::eventually;

#[test]
fn standalone_reports_cluster_disabled() {
    let s = support::TestServer::start(&[]);
    let mut c = s.conn();
    assert_eq!(
        support::info_value(&mut c, "cluster", "cluster_enabled").as_deref(),
        Some("0")
    );
    let e = support::err_text(redis::cmd("CLUSTER").arg("INFO").query::<String>(&mut c));
    assert!(
        e.contains("This instance has cluster support disabled"),
        "{e}"
    );
    let e = support::err_text(redis::cmd("READONLY").query::<String>(&mut c));
    assert!(e.contains("cluster support disabled"), "{e}");
}

/// A client port above 55535 leaves no room for the bus port (+10000): the start stops, as
/// Redis's does, unless cluster-port names the bus port.
#[test]
fn a_client_port_without_room_for_the_bus_stops_the_start() {
    let dir = std::env::temp_dir().join(format!("tc-cluster-highport-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    // A free port above 55535.
    let port = (55536..65000)
        .find(|p| std::net::TcpListener::bind(("127.0.0.1", *p)).is_ok())
        .expect("a free high port");
    let out = Command::new(env!("CARGO_BIN_EXE_tidecache-server"))
        .args([
            "--port",
            &port.to_string(),
            "--cluster-enabled",
            "yes",
            "--save",
            "",
        ])
        .args(["--dir", dir.to_str().expect("utf-8")])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(1));
    let text =
        String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("Your Redis port number must be 55535 or less."),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn three_masters_made_by_redis_cli_redirect_and_survive_a_restart() {
    if !redis_server_available() {
        return;
    }
    let a = Node::start(false, &[]);
    let b = Node::start(false, &[]);
    let mut c = Node::start(false, &[]);
    assert_eq!(
        a.cmd(&["INFO", "cluster"]).lines().nth(1),
        Some("cluster_enabled:1")
    );
    assert_eq!(a.info_field("cluster_state"), "fail");
    create(&[&a, &b, &c], 0);
    check(&a);

    // Keys land on their slots' owners: redis-cli -c follows MOVED.
    for i in 0..200 {
        let k = format!("key:{i}");
        let v = format!("v{i}");
        assert_eq!(
            Command::new("redis-cli")
                .args(["-c", "-p", &a.port.to_string(), "SET", &k, &v])
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
                .unwrap_or_default(),
            "OK"
        );
    }
    let total: i64 = [&a, &b, &c]
        .iter()
        .map(|n| n.cmd(&["DBSIZE"]).parse::<i64>().unwrap_or(0))
        .sum();
    assert_eq!(total, 200);
    for n in [&a, &b, &c] {
        let keys: i64 = n.cmd(&["DBSIZE"]).parse().unwrap_or(0);
        assert!(keys > 30, "keys spread over the three masters: {keys}");
    }

    // A key another node serves: MOVED with that node's address, as Redis words it.
    let slot: u16 = a.cmd(&["CLUSTER", "KEYSLOT", "foo"]).parse().expect("slot");
    assert_eq!(slot, 12182);
    let owner = [&a, &b, &c]
        .into_iter()
        .find(|n| {
            let mut conn = n.conn();
            redis::cmd("GET")
                .arg("foo")
                .query::<Option<String>>(&mut conn)
                .is_ok()
        })
        .expect("one node serves foo");
    for n in [&a, &b, &c] {
        if n.port == owner.port {
            continue;
        }
        let mut conn = n.conn();
        let e = support::err_text(
            redis::cmd("GET")
                .arg("foo")
                .query::<Option<String>>(&mut conn),
        );
        assert!(
            e.contains(&format!("{slot} 127.0.0.1:{}", owner.port)),
            "expected MOVED to the owner: {e}"
        );
    }
    // Keys of different slots in one command: CROSSSLOT; a hash tag keeps them together.
    let mut conn = owner.conn();
    let e = support::err_text(
        redis::cmd("MSET")
            .arg("foo")
            .arg("1")
            .arg("bar")
            .arg("2")
            .query::<String>(&mut conn),
    );
    assert!(e.contains("CROSSSLOT") || e.contains("MOVED"), "{e}");
    let mut tagged = [&a, &b, &c]
        .into_iter()
        .find(|n| {
            let mut conn = n.conn();
            redis::cmd("MSET")
                .arg("{user1}:a")
                .arg("1")
                .arg("{user1}:b")
                .arg("2")
                .query::<String>(&mut conn)
                .is_ok()
        })
        .expect("one node serves {user1}")
        .conn();
    let got: Vec<String> = redis::cmd("MGET")
        .arg("{user1}:a")
        .arg("{user1}:b")
        .query(&mut tagged)
        .expect("mget");
    assert_eq!(got, vec!["1", "2"]);
    // Only database 0 in cluster mode.
    let e = support::err_text(redis::cmd("SELECT").arg(1).query::<String>(&mut conn));
    assert!(e.contains("SELECT is not allowed in cluster mode"), "{e}");

    // COUNTKEYSINSLOT / GETKEYSINSLOT on the owner of key:0.
    let s0: String = a.cmd(&["CLUSTER", "KEYSLOT", "key:0"]);
    let owner0 = [&a, &b, &c]
        .into_iter()
        .find(|n| n.cmd(&["CLUSTER", "COUNTKEYSINSLOT", &s0]) != "0")
        .expect("an owner of key:0's slot");
    assert!(owner0
        .cmd(&["CLUSTER", "GETKEYSINSLOT", &s0, "10"])
        .lines()
        .any(|l| l == "key:0"));

    // CLUSTER SLOTS: three ranges per node at most, covering every slot.
    let slots = a.cmd(&["CLUSTER", "SLOTS"]);
    assert!(slots.contains("127.0.0.1"), "{slots}");

    // A PUBLISH on one node reaches a subscriber on another over the bus.
    let mut sub = redis::Client::open(format!("redis://127.0.0.1:{}/", b.port))
        .expect("client")
        .get_connection()
        .expect("connect");
    let mut ps = sub.as_pubsub();
    ps.subscribe("news").expect("subscribe");
    ps.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    assert_eq!(c.cmd(&["PUBLISH", "news", "hello"]), "0");
    let msg = ps.get_message().expect("message over the bus");
    assert_eq!(msg.get_payload::<String>().expect("payload"), "hello");
    drop(ps);

    // A restart reads nodes.conf: same id, same slots, and the cluster is whole again.
    let id = c.myid();
    let slots_before = c
        .cmd(&["CLUSTER", "NODES"])
        .lines()
        .find(|l| l.contains("myself"))
        .map(|l| l.split(' ').skip(8).collect::<Vec<_>>().join(" "))
        .unwrap_or_default();
    let (port, dir) = (c.port, c.dir.clone());
    c.kill();
    // The others see it fail: PFAIL by timeout, then FAIL by the masters' reports.
    assert!(
        eventually(20.0, || a
            .cmd(&["CLUSTER", "NODES"])
            .lines()
            .any(|l| l.starts_with(&id) && l.contains(" master,fail "))),
        "the killed node was not marked failing: {}",
        a.cmd(&["CLUSTER", "NODES"])
    );
    assert_eq!(a.info_field("cluster_state"), "fail");
    std::mem::forget(c);
    let c = Node::start_in(false, port, dir, &[]);
    assert_eq!(c.myid(), id);
    let slots_after = c
        .cmd(&["CLUSTER", "NODES"])
        .lines()
        .find(|l| l.contains("myself"))
        .map(|l| l.split(' ').skip(8).collect::<Vec<_>>().join(" "))
        .unwrap_or_default();
    assert_eq!(slots_after, slots_before);
    for n in [&a, &b, &c] {
        assert!(
            eventually(30.0, || n.info_field("cluster_state") == "ok"),
            "node {} did not come back: {}",
            n.port,
            n.cmd(&["CLUSTER", "NODES"])
        );
    }
    check(&a);
}

#[test]
fn a_mixed_cluster_with_redis_server_is_made_checked_and_resharded_both_ways() {
    if !redis_server_available() {
        return;
    }
    let t1 = Node::start(false, &[]);
    let r1 = Node::start(true, &[]);
    let t2 = Node::start(false, &[]);
    create(&[&t1, &r1, &t2], 0);
    assert!(r1.redis && !t1.redis);
    check(&r1);
    // Keys through a cluster client, across all three.
    let client = redis::cluster::ClusterClient::new(vec![format!("redis://{}/", t1.addr())])
        .expect("cluster client");
    let mut cc = client.get_connection().expect("cluster connection");
    for i in 0..300 {
        let _: () = redis::cmd("SET")
            .arg(format!("k{i}"))
            .arg(i)
            .query(&mut cc)
            .expect("set through the cluster client");
    }
    // Reshard 200 slots from tidecache to redis-server, then 200 back, with the keys.
    for (from, to) in [(&t1, &r1), (&r1, &t2)] {
        let (ok, out) = redis_cli(
            &[
                "--cluster",
                "reshard",
                &t1.addr(),
                "--cluster-from",
                &from.myid(),
                "--cluster-to",
                &to.myid(),
                "--cluster-slots",
                "200",
                "--cluster-yes",
            ],
            Duration::from_secs(120),
        );
        assert!(ok, "reshard failed:\n{out}");
        for n in [&t1, &r1, &t2] {
            assert!(
                eventually(10.0, || n.info_field("cluster_state") == "ok"),
                "{}",
                n.cmd(&["CLUSTER", "NODES"])
            );
        }
        check(&t2);
    }
    for i in 0..300 {
        let v: i64 = redis::cmd("GET")
            .arg(format!("k{i}"))
            .query(&mut cc)
            .expect("get through the cluster client");
        assert_eq!(v, i);
    }
    let total: i64 = [&t1, &r1, &t2]
        .iter()
        .map(|n| n.cmd(&["DBSIZE"]).parse::<i64>().unwrap_or(0))
        .sum();
    assert_eq!(total, 300, "every key once, on its slot's owner");
}

/// The role a node reports for itself in CLUSTER NODES ("master" or "slave").
fn role(n: &Node) -> String {
    n.cmd(&["CLUSTER", "NODES"])
        .lines()
        .find(|l| l.contains("myself"))
        .map(|l| {
            if l.contains("slave") {
                "slave".to_string()
            } else {
                "master".to_string()
            }
        })
        .unwrap_or_default()
}

#[test]
fn a_replica_takes_over_a_killed_master_and_a_manual_failover_swaps_roles() {
    if !redis_server_available() {
        return;
    }
    let nodes: Vec<Node> = (0..6).map(|_| Node::start(false, &[])).collect();
    let refs: Vec<&Node> = nodes.iter().collect();
    create(&refs, 1);
    // Which node replicates which: read from the first master's view.
    let id_of: Vec<String> = nodes.iter().map(Node::myid).collect();
    let replica_of = |nodes: &[Node], i: usize| -> Option<usize> {
        let line = nodes[i]
            .cmd(&["CLUSTER", "NODES"])
            .lines()
            .find(|l| l.contains("myself"))
            .map(str::to_string)?;
        let master = line.split(' ').nth(3)?.to_string();
        id_of.iter().position(|id| *id == master)
    };
    assert!(
        eventually(20.0, || (0..6)
            .filter(|i| replica_of(&nodes, *i).is_some())
            .count()
            == 3),
        "three replicas"
    );
    // Writes through a cluster client, replicated before the failure (WAIT 1).
    let client = redis::cluster::ClusterClient::new(vec![format!("redis://{}/", nodes[0].addr())])
        .expect("cluster client");
    let mut cc = client.get_connection().expect("cluster connection");
    for i in 0..200 {
        let _: () = redis::cmd("SET")
            .arg(format!("f{i}"))
            .arg(i)
            .query(&mut cc)
            .expect("set");
    }
    for n in &nodes {
        if replica_of(
            &nodes,
            nodes.iter().position(|m| m.port == n.port).unwrap_or(0),
        )
        .is_none()
        {
            let mut c = n.conn();
            let acked: i64 = redis::cmd("WAIT")
                .arg(1)
                .arg(5000)
                .query(&mut c)
                .expect("wait");
            assert_eq!(acked, 1, "the master's replica acknowledged");
        }
    }

    // kill -9 of a master: its replica wins the election and serves its slots.
    let victim = (0..6)
        .find(|i| replica_of(&nodes, *i).is_none())
        .expect("a master");
    let heir = (0..6)
        .find(|i| replica_of(&nodes, *i) == Some(victim))
        .expect("its replica");
    let mut nodes = nodes;
    nodes[victim].kill();
    let others: Vec<usize> = (0..6).filter(|i| *i != victim).collect();
    assert!(
        eventually(30.0, || role(&nodes[heir]) == "master"),
        "the replica did not take over: {}",
        nodes[heir].cmd(&["CLUSTER", "NODES"])
    );
    for i in &others {
        assert!(
            eventually(30.0, || nodes[*i].info_field("cluster_state") == "ok"),
            "node {} did not see the cluster whole again: {}",
            nodes[*i].port,
            nodes[*i].cmd(&["CLUSTER", "NODES"])
        );
    }
    let client =
        redis::cluster::ClusterClient::new(vec![format!("redis://{}/", nodes[heir].addr())])
            .expect("cluster client");
    let mut cc = client.get_connection().expect("cluster connection");
    for i in 0..200 {
        let v: i64 = redis::cmd("GET")
            .arg(format!("f{i}"))
            .query(&mut cc)
            .expect("every acknowledged write is still there");
        assert_eq!(v, i);
    }

    // The old master comes back as a replica of the node that took its slots.
    let (port, dir) = (nodes[victim].port, nodes[victim].dir.clone());
    nodes[victim] = Node::start_in(false, port, dir, &[]);
    assert!(
        eventually(30.0, || replica_of(&nodes, victim) == Some(heir)),
        "the old master did not rejoin as a replica: {}",
        nodes[victim].cmd(&["CLUSTER", "NODES"])
    );

    // CLUSTER FAILOVER on that replica: the roles swap back without losing a write.
    assert!(
        eventually(30.0, || nodes[victim]
            .cmd(&["INFO", "replication"])
            .contains("master_link_status:up")),
        "the rejoined replica did not sync"
    );
    // A manual failover gives up after 5 s if the replica has not caught up (Redis's
    // CLUSTER_MF_TIMEOUT); on a loaded machine it is asked again, as an operator would.
    let swapped_now =
        || role(&nodes[victim]) == "master" && replica_of(&nodes, heir) == Some(victim);
    let mut swapped = false;
    for _ in 0..3 {
        if swapped_now() {
            swapped = true;
            break;
        }
        let reply = nodes[victim].cmd(&["CLUSTER", "FAILOVER"]);
        assert!(
            reply == "OK" || reply.contains("to a replica"),
            "CLUSTER FAILOVER: {reply}"
        );
        if eventually(12.0, swapped_now) {
            swapped = true;
            break;
        }
    }
    assert!(
        swapped,
        "manual failover did not swap the roles: {}",
        nodes[victim].cmd(&["CLUSTER", "NODES"])
    );

    for i in 0..200 {
        let v: i64 = redis::cmd("GET")
            .arg(format!("f{i}"))
            .query(&mut cc)
            .expect("get after the manual failover");
        assert_eq!(v, i);
    }
    let e = nodes[victim]
        .try_cmd(&["CLUSTER", "FAILOVER"])
        .unwrap_or_default();
    assert!(
        e.contains("You should send CLUSTER FAILOVER to a replica"),
        "{e}"
    );
}

/// INFO's `blocked_clients` of a node.
fn blocked_clients(n: &Node) -> i64 {
    n.cmd(&["INFO", "clients"])
        .lines()
        .find_map(|l| l.strip_prefix("blocked_clients:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(-1)
}

/// A client blocked on a key is not left waiting on a slot that moved away or a cluster that
/// failed: it is answered MOVED, then CLUSTERDOWN (Redis's
/// `clusterRedirectBlockedClientIfNeeded`).
#[test]
fn a_blocked_client_learns_its_slot_moved_and_the_cluster_failed() {
    if !redis_server_available() {
        return;
    }
    let mut nodes: Vec<Node> = (0..3)
        .map(|_| Node::start(false, &["--enable-debug-command", "yes"]))
        .collect();
    create(&nodes.iter().collect::<Vec<_>>(), 0);
    let key = "queue:jobs";
    let slot = nodes[0].cmd(&["CLUSTER", "KEYSLOT", key]);
    let owner = nodes
        .iter()
        .position(|n| {
            let mut conn = n.conn();
            redis::cmd("LLEN").arg(key).query::<i64>(&mut conn).is_ok()
        })
        .expect("one node serves the key");
    let others: Vec<usize> = (0..3).filter(|i| *i != owner).collect();
    let (target, bystander) = (others[0], others[1]);

    let blocked_brpop = |n: &Node| {
        let mut conn = n.conn();
        let t = std::thread::spawn(move || {
            support::err_text(
                redis::cmd("BRPOP")
                    .arg(key)
                    .arg(0)
                    .query::<Option<Vec<String>>>(&mut conn),
            )
        });
        assert!(eventually(5.0, || blocked_clients(n) == 1));
        t
    };
    let waiter = blocked_brpop(&nodes[owner]);
    // A shard channel of the same slot, subscribed on the owner.
    let mut sub = std::net::TcpStream::connect(("127.0.0.1", nodes[owner].port)).expect("connect");
    sub.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let read_exact = |sub: &mut std::net::TcpStream, want: &[u8]| {
        let mut got = vec![0u8; want.len()];
        std::io::Read::read_exact(sub, &mut got).expect("read");
        assert_eq!(String::from_utf8_lossy(&got), String::from_utf8_lossy(want));
    };
    std::io::Write::write_all(
        &mut sub,
        b"*2\r\n$10\r\nSSUBSCRIBE\r\n$10\r\nqueue:jobs\r\n",
    )
    .expect("write");
    read_exact(
        &mut sub,
        b"*3\r\n$10\r\nssubscribe\r\n$10\r\nqueue:jobs\r\n:1\r\n",
    );
    // The slot (empty) moves to another master.
    let target_id = nodes[target].myid();
    for i in [target, owner] {
        assert_eq!(
            nodes[i].cmd(&["CLUSTER", "SETSLOT", &slot, "NODE", &target_id]),
            "OK"
        );
    }
    let e = waiter.join().expect("the waiter's thread");
    assert_eq!(
        e,
        format!("MOVED {slot} 127.0.0.1:{}", nodes[target].port),
        "the blocked client is told where the slot went"
    );
    assert_eq!(blocked_clients(&nodes[owner]), 0);
    // The shard channel's subscriber is unsubscribed, as Redis's removeChannelsInSlot does.
    read_exact(
        &mut sub,
        b"*3\r\n$12\r\nsunsubscribe\r\n$10\r\nqueue:jobs\r\n:0\r\n",
    );

    // DEBUG CLUSTERLINK KILL closes the links with a node; the cron connects again.
    let links = |n: &Node| {
        n.cmd(&["CLUSTER", "LINKS"])
            .lines()
            .filter(|l| *l == "direction")
            .count()
    };
    assert!(eventually(10.0, || links(&nodes[owner]) == 4));
    let peer = nodes[bystander].myid();
    assert_eq!(
        nodes[owner].cmd(&["DEBUG", "CLUSTERLINK", "KILL", "all", &peer]),
        "OK"
    );
    assert!(
        links(&nodes[owner]) < 4,
        "{}",
        nodes[owner].cmd(&["CLUSTER", "LINKS"])
    );
    assert!(eventually(10.0, || links(&nodes[owner]) == 4));
    assert_eq!(
        nodes[owner].cmd(&["DEBUG", "CLUSTERLINK", "KILL", "all", "0000"]),
        "ERR Unknown node 0000"
    );

    // Blocked on the new owner when another master fails: CLUSTERDOWN once the cluster is
    // down (after the node timeout and the failure reports).
    let waiter = blocked_brpop(&nodes[target]);
    nodes[bystander].kill();
    let e = waiter.join().expect("the waiter's thread");
    assert_eq!(e, "CLUSTERDOWN The cluster is down");
    assert_eq!(blocked_clients(&nodes[target]), 0);
}

/// Scripts on a cluster node, as Redis 7.0's cluster-scripting unit holds them: one with a
/// shebang (or a function) keeps to one slot unless flagged allow-cross-slot-keys; one
/// without keeps Redis 6's freedom over the node's own slots.
#[test]
fn scripts_keep_to_one_slot_unless_old_style_or_flagged() {
    let n = Node::start(false, &[]);
    assert_eq!(n.cmd(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]), "OK");
    assert!(eventually(10.0, || n.info_field("cluster_state") == "ok"));
    let mut c = n.conn();
    let eval = |c: &mut redis::Connection, body: &str, keys: &[&str]| -> Result<String, String> {
        let mut cmd = redis::cmd("EVAL");
        cmd.arg(body).arg(keys.len());
        for k in keys {
            cmd.arg(*k);
        }
        cmd.query::<redis::Value>(c)
            .map(|v| format!("{v:?}"))
            .map_err(|e| e.to_string())
    };
    let two = "redis.call('set', 'foo', 'bar'); redis.call('set', 'bar', 'foo'); return 'OK'";
    let e = eval(&mut c, &format!("#!lua\n{two}"), &[]).expect_err("refused");
    assert!(
        e.contains("Script attempted to access keys that do not hash to the same slot"),
        "{e}"
    );
    eval(&mut c, two, &[]).expect("a script without a shebang may cross slots");
    eval(
        &mut c,
        &format!("#!lua flags=allow-cross-slot-keys\n{two}"),
        &[],
    )
    .expect("allow-cross-slot-keys");
    let e = eval(
        &mut c,
        "#!lua\nredis.call('set', 'foo', 'bar') return 'OK'",
        &["bar"],
    )
    .expect_err("refused");
    assert!(e.contains("do not hash to the same slot"), "{e}");
    let lib = "#!lua name=crossslot\nredis.register_function('f', function() redis.call('set', 'foo', 'bar') redis.call('set', 'bar', 'foo') return 'OK' end)";
    let _: String = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg(lib)
        .query(&mut c)
        .expect("function load");
    let e = support::err_text(redis::cmd("FCALL").arg("f").arg(0).query::<String>(&mut c));
    assert!(e.contains("do not hash to the same slot"), "{e}");
}
