//! `nodes.conf` (Redis's `clusterLoadConfig` / `clusterSaveConfig`) and the descriptions
//! built from the same lines: CLUSTER NODES, REPLICAS, SLOTS and SHARDS.

use super::{ClusterState, Endpoint, Node, SLOTS};
use crate::protocol::cluster_bus::{self as wire, node_flag as nf, NodeName};
use crate::protocol::Reply;
use bytes::Bytes;
use std::io::Write;
use std::path::Path;

/// Flag names in Redis's order (`redisNodeFlagsTable`).
const FLAG_NAMES: &[(u16, &str)] = &[
    (nf::MYSELF, "myself"),
    (nf::MASTER, "master"),
    (nf::SLAVE, "slave"),
    (nf::PFAIL, "fail?"),
    (nf::FAIL, "fail"),
    (nf::HANDSHAKE, "handshake"),
    (nf::NOADDR, "noaddr"),
    (nf::NOFAILOVER, "nofailover"),
];

pub fn flags_text(flags: u16) -> String {
    let names: Vec<&str> = FLAG_NAMES
        .iter()
        .filter(|(f, _)| flags & f != 0)
        .map(|(_, n)| *n)
        .collect();
    if names.is_empty() {
        "noflags".into()
    } else {
        names.join(",")
    }
}

/// The slot ranges of every node, from one pass over the slot table
/// (`clusterGenNodesSlotsInfo`).
fn slot_ranges(st: &ClusterState) -> std::collections::HashMap<NodeName, Vec<(u16, u16)>> {
    let mut out: std::collections::HashMap<NodeName, Vec<(u16, u16)>> = Default::default();
    for (a, b, owner) in st.slot_runs() {
        out.entry(owner).or_default().push((a, b));
    }
    out
}

/// One node's line (Redis's `clusterGenNodeDescription`).
fn node_line(st: &ClusterState, n: &Node, ranges: Option<&Vec<(u16, u16)>>, now: i64) -> String {
    let _ = now;
    let mut s = String::with_capacity(128);
    s.push_str(n.name_str());
    if n.hostname.is_empty() {
        s.push_str(&format!(" {}:{}@{} ", n.ip, n.port, n.cport));
    } else {
        s.push_str(&format!(" {}:{}@{},{} ", n.ip, n.port, n.cport, n.hostname));
    }
    s.push_str(&flags_text(n.flags));
    s.push(' ');
    match n.slaveof {
        Some(m) => s.push_str(wire::name_str(&m)),
        None => s.push('-'),
    }
    let epoch = match n.slaveof.and_then(|m| st.nodes.get(&m)) {
        Some(m) if n.is_replica() => m.config_epoch,
        _ => n.config_epoch,
    };
    let connected = n
        .link
        .is_some_and(|l| st.links.get(&l).is_some_and(|l| !l.connecting))
        || n.flags & nf::MYSELF != 0;
    s.push_str(&format!(
        " {} {} {} {}",
        n.ping_sent,
        n.pong_received,
        epoch,
        if connected {
            "connected"
        } else {
            "disconnected"
        }
    ));
    if let Some(r) = ranges {
        for (a, b) in r {
            if a == b {
                s.push_str(&format!(" {a}"));
            } else {
                s.push_str(&format!(" {a}-{b}"));
            }
        }
    }
    if n.flags & nf::MYSELF != 0 {
        for slot in 0..SLOTS as u16 {
            if let Some(to) = st.migrating_to.get(&slot) {
                s.push_str(&format!(" [{slot}->-{}]", wire::name_str(to)));
            } else if let Some(from) = st.importing_from.get(&slot) {
                s.push_str(&format!(" [{slot}-<-{}]", wire::name_str(from)));
            }
        }
    }
    s
}

/// Every node's line, skipping nodes with any of `filter`'s flags
/// (`clusterGenNodesDescription`).
pub fn describe(st: &ClusterState, filter: u16) -> String {
    let ranges = slot_ranges(st);
    let now = crate::util::clock::now_ms();
    let mut out = String::new();
    for n in st.nodes.values() {
        if n.flags & filter != 0 {
            continue;
        }
        out.push_str(&node_line(st, n, ranges.get(&n.name), now));
        out.push('\n');
    }
    out
}

/// One node's line alone (CLUSTER REPLICAS).
pub fn describe_node(st: &ClusterState, n: &Node) -> String {
    let ranges = slot_ranges(st);
    node_line(st, n, ranges.get(&n.name), crate::util::clock::now_ms())
}

/// Writes the file: temp file, fsync, rename, then the directory's fsync, so a crash leaves
/// the old file or the new one, never half of one.
pub fn save(st: &mut ClusterState, _fsync: bool) -> std::io::Result<()> {
    let mut content = describe(st, nf::HANDSHAKE);
    content.push_str(&format!(
        "vars currentEpoch {} lastVoteEpoch {}\n",
        st.current_epoch, st.last_vote_epoch
    ));
    let path = st.conf_path.clone();
    if path.as_os_str().is_empty() {
        return Ok(());
    }
    let tmp = path.with_file_name(format!(
        "{}.tmp-{}",
        path.file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_else(|| "nodes.conf".into()),
        std::process::id()
    ));
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(content.as_bytes())?;
        f.sync_all()?;
    }
    if let Err(e) = std::fs::rename(&tmp, &path) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    if let Some(dir) = path.parent() {
        let dir = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        };
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
    }
    Ok(())
}

/// Reads the file if it exists and is not empty: Ok(true) loaded, Ok(false) none; a file
/// that does not parse is an error that stops the start, as Redis's "Unrecoverable error:
/// corrupted cluster config file".
pub fn load(st: &mut ClusterState, path: &Path) -> Result<bool, String> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => {
            return Err(format!(
                "Loading the cluster node config from {}: {e}",
                path.display()
            ))
        }
    };
    if text.is_empty() {
        return Ok(false);
    }
    const CORRUPT: &str = "Unrecoverable error: corrupted cluster config file.";
    let now = crate::util::clock::now_ms();
    let mut myself = None;
    for line in text.lines() {
        if line.trim().is_empty() {
            continue;
        }
        let argv: Vec<&str> = line.split_whitespace().collect();
        if argv[0].eq_ignore_ascii_case("vars") {
            if argv.len().is_multiple_of(2) {
                return Err(CORRUPT.into());
            }
            for kv in argv[1..].chunks(2) {
                let v = kv[1].parse::<u64>().unwrap_or(0);
                if kv[0].eq_ignore_ascii_case("currentEpoch") {
                    st.current_epoch = v;
                } else if kv[0].eq_ignore_ascii_case("lastVoteEpoch") {
                    st.last_vote_epoch = v;
                }
            }
            continue;
        }
        if argv.len() < 8 {
            return Err(CORRUPT.into());
        }
        let name = wire::parse_name(argv[0].as_bytes()).ok_or(CORRUPT)?;
        st.nodes
            .entry(name)
            .or_insert_with(|| Node::new(name, 0, now));
        let (addr, hostname) = match argv[1].split_once(',') {
            Some((a, h)) => (a, h.to_string()),
            None => (argv[1], String::new()),
        };
        let (ip, ports) = addr.rsplit_once(':').ok_or(CORRUPT)?;
        let (port, cport) = match ports.split_once('@') {
            Some((p, c)) => (p.parse::<u16>().unwrap_or(0), c.parse::<u16>().unwrap_or(0)),
            None => {
                let p = ports.parse::<u16>().unwrap_or(0);
                (p, p.wrapping_add(10000))
            }
        };
        let mut flags = 0u16;
        let mut fail_time = 0;
        for f in argv[2].split(',') {
            match f.to_ascii_lowercase().as_str() {
                "myself" => {
                    if myself.is_some() {
                        return Err(CORRUPT.into());
                    }
                    myself = Some(name);
                    flags |= nf::MYSELF;
                }
                "master" => flags |= nf::MASTER,
                "slave" => flags |= nf::SLAVE,
                "fail?" => flags |= nf::PFAIL,
                "fail" => {
                    flags |= nf::FAIL;
                    fail_time = now;
                }
                "handshake" => flags |= nf::HANDSHAKE,
                "noaddr" => flags |= nf::NOADDR,
                "nofailover" => flags |= nf::NOFAILOVER,
                "noflags" => {}
                _ => return Err("Unknown flag in redis cluster config file".into()),
            }
        }
        let master = if argv[3].starts_with('-') {
            None
        } else {
            let m = wire::parse_name(argv[3].as_bytes()).ok_or(CORRUPT)?;
            st.nodes.entry(m).or_insert_with(|| Node::new(m, 0, now));
            if let Some(mn) = st.nodes.get_mut(&m) {
                if !mn.replicas.contains(&name) {
                    mn.replicas.push(name);
                }
            }
            Some(m)
        };
        let epoch: u64 = argv[6].parse().unwrap_or(0);
        if let Some(n) = st.nodes.get_mut(&name) {
            n.hostname = hostname;
            n.ip = ip.to_string();
            n.port = port;
            n.cport = cport;
            n.flags |= flags;
            if fail_time != 0 {
                n.fail_time = fail_time;
            }
            n.slaveof = master;
            if argv[4] != "0" {
                n.ping_sent = now;
            }
            if argv[5] != "0" {
                n.pong_received = now;
            }
            n.config_epoch = if n.is_replica() && master.is_some() {
                0
            } else {
                epoch
            };
        }
        for arg in &argv[8..] {
            if let Some(inner) = arg.strip_prefix('[') {
                // [slot->-name] migrating, [slot-<-name] importing.
                let inner = inner.strip_suffix(']').ok_or(CORRUPT)?;
                let (slot, rest) = inner.split_once('-').ok_or(CORRUPT)?;
                let slot: u16 = slot.parse().map_err(|_| CORRUPT)?;
                if slot as usize >= SLOTS || rest.len() < 2 {
                    return Err(CORRUPT.into());
                }
                let (dir, other) = rest.split_at(2);
                let other = wire::parse_name(other.as_bytes()).ok_or(CORRUPT)?;
                st.nodes
                    .entry(other)
                    .or_insert_with(|| Node::new(other, 0, now));
                match dir {
                    ">-" => st.set_migrating(slot, Some(other)),
                    "<-" => st.set_importing(slot, Some(other)),
                    _ => return Err(CORRUPT.into()),
                }
                continue;
            }
            let (a, b) = match arg.split_once('-') {
                Some((a, b)) => (a, b),
                None => (*arg, *arg),
            };
            let (Ok(a), Ok(b)) = (a.parse::<usize>(), b.parse::<usize>()) else {
                return Err(CORRUPT.into());
            };
            if a >= SLOTS || b >= SLOTS {
                return Err(CORRUPT.into());
            }
            for s in a..=b {
                st.add_slot(name, s as u16);
            }
        }
    }
    let Some(me) = myself else {
        return Err(CORRUPT.into());
    };
    st.myself = me;
    let max = st.max_epoch();
    if max > st.current_epoch {
        st.current_epoch = max;
    }
    st.log(
        crate::state::redis_log::Level::Notice,
        format!("Node configuration loaded, I'm {}", wire::name_str(&me)),
    );
    Ok(true)
}

// ---- CLUSTER SLOTS / SHARDS ----

fn node_reply(st: &ClusterState, n: &Node) -> Reply {
    let first = match st.settings.preferred_endpoint {
        Endpoint::Ip => Reply::bulk(Bytes::from(n.ip.clone())),
        Endpoint::Hostname if n.hostname.is_empty() => Reply::bulk_str("?"),
        Endpoint::Hostname => Reply::bulk(Bytes::from(n.hostname.clone())),
        Endpoint::Unknown => Reply::Nil,
    };
    let mut meta = Vec::new();
    if st.settings.preferred_endpoint != Endpoint::Ip {
        meta.push((
            Reply::bulk_str("ip"),
            Reply::bulk(Bytes::from(n.ip.clone())),
        ));
    }
    if st.settings.preferred_endpoint != Endpoint::Hostname && !n.hostname.is_empty() {
        meta.push((
            Reply::bulk_str("hostname"),
            Reply::bulk(Bytes::from(n.hostname.clone())),
        ));
    }
    Reply::Array(vec![
        first,
        Reply::Int(n.port as i64),
        Reply::bulk(Bytes::copy_from_slice(&n.name)),
        Reply::Map(meta),
    ])
}

fn replica_available(st: &ClusterState, n: &Node) -> bool {
    if n.failed() {
        return false;
    }
    let offset = if n.flags & nf::MYSELF != 0 {
        st.my_repl_offset
    } else {
        n.repl_offset
    };
    offset != 0
}

/// CLUSTER SLOTS (Redis's `clusterReplyMultiBulkSlots`).
pub fn slots_reply(st: &ClusterState) -> Reply {
    let mut out = Vec::new();
    for (start, end, owner) in st.slot_runs() {
        let Some(n) = st.nodes.get(&owner) else {
            continue;
        };
        let mut entry = vec![
            Reply::Int(start as i64),
            Reply::Int(end as i64),
            node_reply(st, n),
        ];
        for r in &n.replicas {
            if let Some(rn) = st.nodes.get(r) {
                if replica_available(st, rn) {
                    entry.push(node_reply(st, rn));
                }
            }
        }
        out.push(Reply::Array(entry));
    }
    Reply::Array(out)
}

fn shard_node_reply(st: &ClusterState, n: &Node) -> Reply {
    let mut m = vec![(
        Reply::bulk_str("id"),
        Reply::bulk(Bytes::copy_from_slice(&n.name)),
    )];
    if n.port != 0 {
        m.push((Reply::bulk_str("port"), Reply::Int(n.port as i64)));
    }
    m.push((
        Reply::bulk_str("ip"),
        Reply::bulk(Bytes::from(n.ip.clone())),
    ));
    m.push((
        Reply::bulk_str("endpoint"),
        Reply::bulk(Bytes::from(st.preferred_endpoint(n).to_string())),
    ));
    if !n.hostname.is_empty() {
        m.push((
            Reply::bulk_str("hostname"),
            Reply::bulk(Bytes::from(n.hostname.clone())),
        ));
    }
    let offset = if n.flags & nf::MYSELF != 0 {
        st.my_repl_offset
    } else {
        n.repl_offset
    };
    m.push((
        Reply::bulk_str("role"),
        Reply::bulk_str(if n.is_replica() { "replica" } else { "master" }),
    ));
    m.push((
        Reply::bulk_str("replication-offset"),
        Reply::Int(offset as i64),
    ));
    let health = if n.failed() {
        "fail"
    } else if n.is_replica() && offset == 0 {
        "loading"
    } else {
        "online"
    };
    m.push((Reply::bulk_str("health"), Reply::bulk_str(health)));
    Reply::Map(m)
}

/// CLUSTER SHARDS (Redis 7.0's `clusterReplyShards`): one entry per master.
pub fn shards_reply(st: &ClusterState) -> Reply {
    let ranges = slot_ranges(st);
    let mut out = Vec::new();
    for n in st.nodes.values().filter(|n| n.is_master()) {
        let slots: Vec<Reply> = ranges
            .get(&n.name)
            .map(|r| {
                r.iter()
                    .flat_map(|(a, b)| [Reply::Int(*a as i64), Reply::Int(*b as i64)])
                    .collect()
            })
            .unwrap_or_default();
        // The master first, then its replicas (Redis's clusterGetNodesServingMySlots).
        let mut nodes = vec![shard_node_reply(st, n)];
        for r in &n.replicas {
            if let Some(rn) = st.nodes.get(r) {
                nodes.push(shard_node_reply(st, rn));
            }
        }
        out.push(Reply::Map(vec![
            (Reply::bulk_str("slots"), Reply::Array(slots)),
            (Reply::bulk_str("nodes"), Reply::Array(nodes)),
        ]));
    }
    Reply::Array(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::cluster::Settings;

    fn state() -> ClusterState {
        let cfg = crate::config::Config::default();
        ClusterState::new([b'a'; 40], Settings::from_config(&cfg))
    }

    #[test]
    fn nodes_conf_round_trips() {
        let mut st = state();
        let me = [b'a'; 40];
        let other = [b'b'; 40];
        let mut n = Node::new(me, nf::MYSELF | nf::MASTER, 1);
        n.ip = "127.0.0.1".into();
        n.port = 7000;
        n.cport = 17000;
        n.config_epoch = 3;
        st.add_node(n);
        let mut o = Node::new(other, nf::SLAVE, 1);
        o.ip = "127.0.0.1".into();
        o.port = 7001;
        o.cport = 17001;
        o.slaveof = Some(me);
        st.add_node(o);
        for s in 0..100 {
            st.add_slot(me, s);
        }
        st.add_slot(me, 200);
        st.set_migrating(5, Some(other));
        st.current_epoch = 7;
        let dir = std::env::temp_dir().join(format!("tc-nodes-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        st.conf_path = dir.join("nodes.conf");
        save(&mut st, true).unwrap();
        let text = std::fs::read_to_string(&st.conf_path).unwrap();
        assert!(text.contains(
            "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa 127.0.0.1:7000@17000 myself,master - 0 0 3 connected 0-99 200 [5->-bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb]"
        ), "{text}");
        assert!(text.ends_with("vars currentEpoch 7 lastVoteEpoch 0\n"));
        let mut back = state();
        assert!(load(&mut back, &st.conf_path).unwrap());
        assert_eq!(back.myself, me);
        assert_eq!(back.nodes.len(), 2);
        assert_eq!(back.nodes[&me].numslots, 101);
        assert_eq!(back.nodes[&other].slaveof, Some(me));
        assert_eq!(back.migrating_to.get(&5), Some(&other));
        assert_eq!(back.current_epoch, 7);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_corrupt_file_is_refused() {
        let dir = std::env::temp_dir().join(format!("tc-nodes-bad-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("nodes.conf");
        std::fs::write(&p, "garbage line\n").unwrap();
        assert!(load(&mut state(), &p).is_err());
        std::fs::write(&p, "").unwrap();
        assert_eq!(load(&mut state(), &p), Ok(false));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
