//! Cluster-aware clients, unmodified, against a cluster of 3 tidecache masters with a replica
//! each while `redis-cli --cluster reshard` moves 1,000 slots under them: redis-py's
//! `RedisCluster` (keys and documents) and ioredis's `Cluster` (keys) write throughout, then
//! read every acknowledged write back; no error may reach the application beyond what the
//! client retries itself (MOVED, ASK).
mod support;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use support::cluster::{check, create, redis_cli, redis_server_available, Node};
use support::eventually;

fn clients_dir(sub: &str) -> PathBuf {
    [env!("CARGO_MANIFEST_DIR"), "tests", "clients", sub]
        .iter()
        .collect()
}

/// Whether python3 with redis-py 8 and node with ioredis are there (CI installs them: a
/// missing one fails there, and is a notice elsewhere).
fn clients_available() -> bool {
    let py = Command::new("python3")
        .args(["-c", "import redis.cluster"])
        .output()
        .is_ok_and(|o| o.status.success());
    let node = clients_dir("node-matrix")
        .join("node_modules/ioredis/package.json")
        .exists()
        && Command::new("node").arg("--version").output().is_ok();
    let ok = py && node;
    assert!(
        ok || std::env::var_os("CI").is_none(),
        "redis-py and ioredis are needed under CI (.ci/run installs them): python {py}, node {node}"
    );
    if !ok {
        eprintln!("NOTICE: cluster client test skipped (redis-py: {py}, ioredis: {node})");
    }
    ok
}

fn spawn(mut cmd: Command) -> Child {
    cmd.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn client")
}

fn finish(name: &str, child: Child) -> String {
    let out = child.wait_with_output().expect("client output");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("{name}: {text}");
    assert!(
        out.status.success(),
        "{name} saw errors or lost writes:\n{text}"
    );
    text
}

/// How many slots `n` serves, from its own CLUSTER NODES line.
fn slots_of(n: &Node) -> usize {
    n.cmd(&["CLUSTER", "NODES"])
        .lines()
        .find(|l| l.contains("myself"))
        .map(|l| {
            l.split(' ')
                .skip(8)
                .filter(|r| !r.starts_with('['))
                .map(|r| match r.split_once('-') {
                    Some((a, b)) => {
                        b.parse::<usize>().unwrap_or(0) + 1 - a.parse::<usize>().unwrap_or(0)
                    }
                    None => 1,
                })
                .sum()
        })
        .unwrap_or(0)
}

#[test]
fn cluster_clients_write_through_a_reshard_of_1000_slots_and_lose_nothing() {
    if !redis_server_available() || !clients_available() {
        return;
    }
    let nodes: Vec<Node> = (0..6).map(|_| Node::start(false, &[])).collect();
    let refs: Vec<&Node> = nodes.iter().collect();
    create(&refs, 1);
    // The masters, in the order of their first slot: redis-cli gives 0-5460 to the first.
    let masters: Vec<&Node> = nodes
        .iter()
        .filter(|n| {
            n.cmd(&["CLUSTER", "NODES"])
                .lines()
                .any(|l| l.contains("myself,master"))
        })
        .collect();
    assert_eq!(masters.len(), 3);
    let owner_of = |slot: u16| -> usize {
        masters
            .iter()
            .position(|m| {
                m.cmd(&["CLUSTER", "NODES"])
                    .lines()
                    .find(|l| l.contains("myself"))
                    .is_some_and(|l| {
                        l.split(' ').skip(8).any(|r| match r.split_once('-') {
                            Some((a, b)) => {
                                a.parse::<u16>().is_ok_and(|a| a <= slot)
                                    && b.parse::<u16>().is_ok_and(|b| slot <= b)
                            }
                            None => r.parse::<u16>() == Ok(slot),
                        })
                    })
            })
            .expect("an owner")
    };
    let (from, to) = (0usize, 1usize);
    // Documents go to a collection whose slot stays where it is (the reshard moves keys).
    let tag = (0..1000)
        .map(|i| format!("py{i}"))
        .find(|t| {
            let slot: u16 = masters[0]
                .cmd(&["CLUSTER", "KEYSLOT", &format!("{{{t}}}docs")])
                .parse()
                .unwrap_or(0);
            owner_of(slot) == 2
        })
        .expect("a tag on the third master");

    let stop = std::env::temp_dir().join(format!("tc-cluster-clients-{}", std::process::id()));
    let _ = std::fs::remove_file(&stop);
    let port = masters[2].port.to_string();
    let mut py = Command::new("python3");
    py.arg(clients_dir("matrix").join("cluster_writer.py"))
        .args([&port, &tag, stop.to_str().expect("utf-8")]);
    let py = spawn(py);
    let mut node = Command::new("node");
    node.current_dir(clients_dir("node-matrix"))
        .arg("ioredis_cluster.js")
        .args([&port, "io", stop.to_str().expect("utf-8")]);
    let node = spawn(node);

    let before = slots_of(masters[to]);
    std::thread::sleep(Duration::from_secs(1));
    let from_id = masters[from].myid();
    let to_id = masters[to].myid();
    let (ok, out) = redis_cli(
        &[
            "--cluster",
            "reshard",
            &masters[from].addr(),
            "--cluster-from",
            &from_id,
            "--cluster-to",
            &to_id,
            "--cluster-slots",
            "1000",
            "--cluster-yes",
        ],
        Duration::from_secs(300),
    );
    assert!(ok, "reshard failed:\n{out}");
    std::thread::sleep(Duration::from_secs(1));
    std::fs::write(&stop, b"stop").expect("stop file");
    let py_out = finish("redis-py RedisCluster", py);
    let node_out = finish("ioredis Cluster", node);
    let _ = std::fs::remove_file(&stop);
    for out in [&py_out, &node_out] {
        let acked: u64 = out
            .split("acknowledged ")
            .nth(1)
            .and_then(|r| r.split(',').next())
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0);
        assert!(acked > 100, "the client wrote throughout: {out}");
    }
    for n in &masters {
        assert!(eventually(10.0, || n.info_field("cluster_state") == "ok"));
    }
    check(masters[0]);
    let after = slots_of(masters[to]);
    assert_eq!(
        after,
        before + 1000,
        "the target holds its slots and the 1,000 moved"
    );
}
