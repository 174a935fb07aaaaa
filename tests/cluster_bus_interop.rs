//! The cluster bus codec against a real `redis-server` in cluster mode: it joins the server's
//! cluster as a node of its own, over the bus only.
//!
//! The test MEETs the server, decodes its PONG, accepts the connection the server opens back
//! to the new node and decodes its PING, completes the handshake with a PONG, then PINGs
//! with a slot claim and a hostname extension (after two extensions 7.0 does not know) and
//! PUBLISHes on the bus. What the server makes of these (its `CLUSTER NODES` line for the
//! node, a subscriber's message) shows that it parsed every byte as meant.
//!
//! Without `redis-server` on PATH the test prints a NOTICE and passes, except under CI (`CI`
//! set), where it fails: a skipped interop test there would prove nothing.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tidecache::protocol::cluster_bus::*;

const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// The server under test, killed (and its directory removed) on drop, also when the test
/// fails; on failure its log is printed first.
struct Server {
    child: Child,
    dir: PathBuf,
    port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            if let Ok(log) = std::fs::read_to_string(self.dir.join("redis.log")) {
                eprintln!("--- redis-server log ---\n{log}");
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A port that is free, and whose cluster bus port (+10000) is free too.
fn free_port_pair() -> u16 {
    loop {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = l.local_addr().expect("addr").port();
        if port > 55535 {
            continue;
        }
        if TcpListener::bind(("127.0.0.1", port + 10000)).is_ok() {
            return port;
        }
    }
}

/// Starts `redis-server` in cluster mode, or returns `None` (after the NOTICE) when it is not
/// installed.
fn start_server() -> Option<Server> {
    let version = Command::new("redis-server").arg("--version").output();
    match version {
        Ok(out) => eprintln!("{}", String::from_utf8_lossy(&out.stdout).trim()),
        Err(e) => {
            assert!(
                std::env::var_os("CI").is_none(),
                "redis-server is needed for the cluster bus interop test under CI: {e}"
            );
            eprintln!("NOTICE: redis-server not on PATH ({e}); cluster bus interop test skipped");
            return None;
        }
    }
    // A port found free can be taken before the server binds it; the server that answers
    // must be ours, so a start that does not end in our child answering is retried.
    for attempt in 0..5 {
        let port = free_port_pair();
        let dir = std::env::temp_dir().join(format!(
            "tidecache-cluster-bus-{}-{port}-{attempt}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string()])
            .args(["--bind", "127.0.0.1"])
            .args(["--cluster-enabled", "yes"])
            .args(["--cluster-config-file", "nodes.conf"])
            .args(["--cluster-announce-hostname", "redis-under-test.example"])
            .args(["--dir", dir.to_str().expect("utf-8 temp dir")])
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .args(["--logfile", "redis.log", "--loglevel", "verbose"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn redis-server");
        let mut server = Server { child, dir, port };
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(info) = command(port, &["INFO", "server"]) {
                let pid = info
                    .lines()
                    .find_map(|l| l.strip_prefix("process_id:"))
                    .and_then(|p| p.trim().parse::<u32>().ok());
                if pid == Some(server.child.id()) {
                    return Some(server);
                }
                break;
            }
            if matches!(server.child.try_wait(), Ok(Some(_))) {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = server.child.kill();
    }
    panic!("redis-server did not start on a port of its own");
}

// --- A minimal RESP client (the commands' replies are all the test needs) ---------------

#[derive(Debug, PartialEq)]
enum Resp {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Vec<Resp>),
}

impl Resp {
    fn text(&self) -> String {
        match self {
            Resp::Simple(s) | Resp::Error(s) => s.clone(),
            Resp::Int(n) => n.to_string(),
            Resp::Bulk(Some(b)) => String::from_utf8_lossy(b).into_owned(),
            Resp::Bulk(None) => String::new(),
            Resp::Array(items) => items.iter().map(Resp::text).collect::<Vec<_>>().join(" "),
        }
    }
}

/// One complete value at the start of `buf`, with its length; `None` while incomplete.
fn parse_resp(buf: &[u8]) -> Option<(Resp, usize)> {
    let line_end = buf.windows(2).position(|w| w == b"\r\n")?;
    let line = std::str::from_utf8(buf.get(1..line_end)?).ok()?;
    let next = line_end + 2;
    match buf.first()? {
        b'+' => Some((Resp::Simple(line.to_string()), next)),
        b'-' => Some((Resp::Error(line.to_string()), next)),
        b':' => Some((Resp::Int(line.parse().ok()?), next)),
        b'$' => {
            let n: i64 = line.parse().ok()?;
            if n < 0 {
                return Some((Resp::Bulk(None), next));
            }
            let end = next + n as usize;
            let data = buf.get(next..end)?.to_vec();
            (buf.get(end..end + 2)? == b"\r\n").then_some((Resp::Bulk(Some(data)), end + 2))
        }
        b'*' => {
            let n: i64 = line.parse().ok()?;
            let mut items = Vec::new();
            let mut at = next;
            for _ in 0..n.max(0) {
                let (v, used) = parse_resp(buf.get(at..)?)?;
                items.push(v);
                at += used;
            }
            Some((Resp::Array(items), at))
        }
        _ => None,
    }
}

fn send_command(s: &mut TcpStream, args: &[&str]) -> std::io::Result<()> {
    let mut req = format!("*{}\r\n", args.len());
    for a in args {
        req.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    s.write_all(req.as_bytes())
}

fn read_resp(s: &mut TcpStream, buf: &mut Vec<u8>) -> std::io::Result<Resp> {
    loop {
        if let Some((v, used)) = parse_resp(buf) {
            buf.drain(..used);
            return Ok(v);
        }
        let mut chunk = [0u8; 16384];
        let n = s.read(&mut chunk)?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Runs one command on a fresh connection; the reply as text, or an I/O error.
fn command(port: u16, args: &[&str]) -> std::io::Result<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(IO_TIMEOUT))?;
    send_command(&mut s, args)?;
    let reply = read_resp(&mut s, &mut Vec::new())?;
    if let Resp::Error(e) = &reply {
        panic!("{args:?} failed: {e}");
    }
    Ok(reply.text())
}

// --- The bus side -------------------------------------------------------------------------

/// A fresh random node name (40 lowercase hex characters), as Redis makes them.
fn random_name() -> NodeName {
    let mut hex = Vec::with_capacity(NAME_LEN);
    while hex.len() < NAME_LEN {
        let mut h = RandomState::new().build_hasher();
        h.write_u128(Instant::now().elapsed().as_nanos());
        for nibble in h
            .finish()
            .to_be_bytes()
            .iter()
            .flat_map(|b| [b >> 4, b & 15])
        {
            hex.push(b"0123456789abcdef"[nibble as usize]);
        }
    }
    hex.truncate(NAME_LEN);
    parse_name(&hex).expect("valid name")
}

/// Reads one bus message, framing with `frame_len` as the server's own reader does.
fn read_message(s: &mut TcpStream, buf: &mut Vec<u8>) -> Message {
    loop {
        if let Some(len) = frame_len(buf).expect("framing") {
            if buf.len() >= len {
                let (msg, used) = decode(buf).expect("decode");
                assert_eq!(used, len);
                buf.drain(..used);
                return msg;
            }
        }
        let mut chunk = [0u8; 8192];
        let n = s.read(&mut chunk).expect("read from the cluster bus");
        assert!(n > 0, "the server closed the bus connection");
        buf.extend_from_slice(&chunk[..n]);
    }
}

fn send(s: &mut TcpStream, msg: &Message) {
    let mut out = Vec::new();
    encode(msg, &mut out);
    s.write_all(&out).expect("write to the cluster bus");
}

fn slots_of(bitmap: &SlotBitmap) -> Vec<u16> {
    (0..SLOTS as u16).filter(|&s| slot_bit(bitmap, s)).collect()
}

fn poll_until(what: &str, mut f: impl FnMut() -> Option<String>) -> String {
    let deadline = Instant::now() + IO_TIMEOUT;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn joins_a_redis_cluster_over_the_bus() {
    let Some(server) = start_server() else { return };
    let port = server.port;
    let bus_port = port + 10000;

    let redis_id = command(port, &["CLUSTER", "MYID"]).expect("cluster myid");
    assert_eq!(
        command(port, &["CLUSTER", "ADDSLOTS", "5", "6", "7"]).unwrap(),
        "OK"
    );
    let redis_name = parse_name(redis_id.as_bytes()).expect("the server's id is a node name");

    // Our node: the server connects back to its bus port, which is this listener.
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let our_cport = listener.local_addr().unwrap().port();
    let our_port = our_cport; // only announced; nothing connects to it
    let our_name = random_name();
    let our_header = |ty: u16, myslots: Box<SlotBitmap>, epoch: u64| Header {
        ty,
        port: our_port,
        count: 0,
        current_epoch: epoch,
        config_epoch: epoch,
        offset: 0,
        sender: our_name,
        myslots,
        slaveof: [0; NAME_LEN],
        myip: String::new(),
        pport: 0,
        cport: our_cport,
        flags: node_flag::MASTER,
        state: 0,
        mflags: [0; 3],
    };

    // 1. MEET on a connection to the server's bus port: it answers with a PONG.
    let mut inbound = TcpStream::connect(("127.0.0.1", bus_port)).expect("connect to bus");
    inbound.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    let mut inbound_buf = Vec::new();
    send(
        &mut inbound,
        &Message {
            header: our_header(msg_type::MEET, empty_bitmap(), 0),
            body: Body::Ping {
                gossip: vec![],
                exts: vec![],
            },
        },
    );
    let pong = read_message(&mut inbound, &mut inbound_buf);
    eprintln!("PONG to MEET: {:?}", summary(&pong));
    let h = &pong.header;
    assert_eq!(h.ty, msg_type::PONG);
    assert_eq!(h.sender, redis_name, "sender is CLUSTER MYID");
    assert_eq!(
        slots_of(&h.myslots),
        vec![5, 6, 7],
        "exactly the slots added"
    );
    assert!(name_is_null(&h.slaveof));
    assert_eq!(h.flags, node_flag::MASTER | node_flag::MYSELF);
    assert_eq!(h.port, port);
    assert_eq!(h.cport, bus_port);
    assert_eq!(h.pport, 0);
    assert_eq!(h.myip, "", "no cluster-announce-ip");
    assert_eq!(h.state, 1, "slots 5-7 alone: the cluster is down");
    assert_eq!((h.current_epoch, h.config_epoch), (0, 0));
    assert_eq!(h.mflags, [mflag0::EXT_DATA, 0, 0]);
    let Body::Ping { gossip, exts } = &pong.body else {
        panic!("PONG body")
    };
    assert!(gossip.is_empty(), "two nodes: nothing to gossip about");
    assert_eq!(
        exts,
        &vec![Ext::Hostname("redis-under-test.example".into())]
    );

    // 2. The server connects to our bus port and PINGs (the node is in handshake).
    listener.set_nonblocking(false).unwrap();
    let (mut outbound, _) = listener.accept().expect("the server connects back");
    outbound.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    let mut outbound_buf = Vec::new();
    let ping = read_message(&mut outbound, &mut outbound_buf);
    eprintln!("PING on the server's link: {:?}", summary(&ping));
    assert_eq!(ping.header.ty, msg_type::PING);
    assert_eq!(ping.header.sender, redis_name);
    assert_eq!(slots_of(&ping.header.myslots), vec![5, 6, 7]);

    // 3. A PONG on that link ends the handshake: the node takes our name.
    send(
        &mut outbound,
        &Message {
            header: our_header(msg_type::PONG, empty_bitmap(), 0),
            body: Body::Ping {
                gossip: vec![],
                exts: vec![],
            },
        },
    );
    let our_id = name_str(&our_name).to_string();
    poll_until("the handshake to complete", || {
        let nodes = command(port, &["CLUSTER", "NODES"]).ok()?;
        nodes
            .lines()
            .any(|l| l.starts_with(&our_id) && !l.contains("handshake"))
            .then_some(nodes)
    });

    // 4. A PING claiming slot 100 at config epoch 1, with a hostname extension after two
    //    extensions Redis 7.0 does not know (skipped, not fatal).
    let mut claim = empty_bitmap();
    set_slot_bit(&mut claim, 100, true);
    send(
        &mut inbound,
        &Message {
            header: our_header(msg_type::PING, claim, 1),
            body: Body::Ping {
                gossip: vec![],
                exts: vec![
                    Ext::ShardId(random_name()),
                    Ext::Unknown {
                        ty: 99,
                        data: vec![7; 24],
                    },
                    Ext::Hostname("tidecache-node.example".into()),
                ],
            },
        },
    );
    let pong = read_message(&mut inbound, &mut inbound_buf);
    assert_eq!(pong.header.ty, msg_type::PONG);
    assert_eq!(
        pong.header.current_epoch, 1,
        "the server took our current epoch"
    );
    let line = poll_until("the slot claim and the hostname", || {
        let nodes = command(port, &["CLUSTER", "NODES"]).ok()?;
        let line = nodes.lines().find(|l| l.starts_with(&our_id))?.to_string();
        (line.contains(",tidecache-node.example ") && line.ends_with(" 100")).then_some(line)
    });
    eprintln!("the server's view of our node: {line}");
    assert!(line.contains(&format!(
        "127.0.0.1:{our_port}@{our_cport},tidecache-node.example master - "
    )));
    assert!(
        line.contains(" 1 connected 100"),
        "config epoch 1, slot 100: {line}"
    );

    // 5. PUBLISH on the bus reaches the server's subscribers.
    let mut sub = TcpStream::connect(("127.0.0.1", port)).unwrap();
    sub.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    let mut sub_buf = Vec::new();
    send_command(&mut sub, &["SUBSCRIBE", "bus-news"]).unwrap();
    assert_eq!(
        read_resp(&mut sub, &mut sub_buf).unwrap().text(),
        "subscribe bus-news 1"
    );
    send(
        &mut inbound,
        &Message {
            header: our_header(msg_type::PUBLISH, empty_bitmap(), 1),
            body: Body::Publish {
                channel: b"bus-news".to_vec(),
                message: b"hello\r\nfrom the bus".to_vec(),
            },
        },
    );
    let got = read_resp(&mut sub, &mut sub_buf).unwrap();
    assert_eq!(
        got,
        Resp::Array(vec![
            Resp::Bulk(Some(b"message".to_vec())),
            Resp::Bulk(Some(b"bus-news".to_vec())),
            Resp::Bulk(Some(b"hello\r\nfrom the bus".to_vec())),
        ])
    );

    // The two extensions it does not know were logged and skipped.
    let log_path = server.dir.join("redis.log");
    let log = || std::fs::read_to_string(&log_path).unwrap_or_default();
    assert!(
        log().contains("Received unknown extension type 99"),
        "{}",
        log()
    );

    // 6. Packets Redis drops (keeping the link) are errors for `decode` too.
    let ping = Message {
        header: our_header(msg_type::PING, empty_bitmap(), 1),
        body: Body::Ping {
            gossip: vec![],
            exts: vec![Ext::Hostname("x".into())],
        },
    };
    let mut good = Vec::new();
    encode(&ping, &mut good);
    let mut bad_padding = good.clone();
    bad_padding[HEADER_LEN..HEADER_LEN + 4].copy_from_slice(&12u32.to_be_bytes());
    let mut bad_count = good.clone();
    bad_count[14..16].copy_from_slice(&1u16.to_be_bytes());
    let mut bad_version = good.clone();
    bad_version[8..10].copy_from_slice(&2u16.to_be_bytes());
    assert!(matches!(decode(&bad_padding), Err(BusError::Malformed(_))));
    assert!(matches!(decode(&bad_count), Err(BusError::Malformed(_))));
    assert_eq!(decode(&bad_version).unwrap_err(), BusError::BadVersion(2));
    for raw in [&bad_padding, &bad_count, &bad_version, &good] {
        inbound.write_all(raw).unwrap();
    }
    // One PONG, for the last (valid) PING only.
    assert_eq!(
        read_message(&mut inbound, &mut inbound_buf).header.ty,
        msg_type::PONG
    );
    inbound
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut chunk = [0u8; 64];
    assert!(
        inbound_buf.is_empty() && inbound.read(&mut chunk).is_err(),
        "a dropped packet was answered"
    );
    inbound.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    // (The wording of the second line depends on the build: upstream 7.0.15 reports the
    // length mismatch, security-patched builds the gossip count.)
    let log_now = log();
    assert!(
        log_now.contains("Received a ping packet without proper padding (12 bytes)"),
        "{log_now}"
    );
    assert_eq!(
        log_now.matches("Received invalid ping packet").count(),
        1,
        "{log_now}"
    );

    // 7. A FAILOVER_AUTH_REQUEST (header only): refused, since our node is a master.
    send(
        &mut inbound,
        &Message {
            header: our_header(msg_type::FAILOVER_AUTH_REQUEST, empty_bitmap(), 1),
            body: Body::Empty,
        },
    );
    let denied = format!("Failover auth denied to {our_id}: it is a master node");
    poll_until("the failover auth refusal", || {
        log().contains(&denied).then(String::new)
    });

    // 8. An UPDATE about our node: slots 100 and 101 at config epoch 2.
    let mut update = empty_bitmap();
    set_slot_bit(&mut update, 100, true);
    set_slot_bit(&mut update, 101, true);
    send(
        &mut inbound,
        &Message {
            header: our_header(msg_type::UPDATE, empty_bitmap(), 1),
            body: Body::Update {
                config_epoch: 2,
                nodename: our_name,
                slots: update,
            },
        },
    );
    poll_until("the UPDATE", || {
        let nodes = command(port, &["CLUSTER", "NODES"]).ok()?;
        let line = nodes.lines().find(|l| l.starts_with(&our_id))?.to_string();
        line.ends_with(" 2 connected 100-101").then_some(line)
    });

    // 9. A FAIL about our node (a node may report any node but the receiver itself).
    send(
        &mut inbound,
        &Message {
            header: our_header(msg_type::FAIL, empty_bitmap(), 1),
            body: Body::Fail { about: our_name },
        },
    );
    poll_until("the FAIL", || {
        let nodes = command(port, &["CLUSTER", "NODES"]).ok()?;
        let line = nodes.lines().find(|l| l.starts_with(&our_id))?.to_string();
        line.contains(" master,fail ").then_some(line)
    });
    assert!(log().contains(&format!(
        "FAIL message received from {our_id} about {our_id}"
    )));

    // 10. Whatever else the server sends for a second decodes.
    outbound
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let end = Instant::now() + Duration::from_secs(1);
    let mut more = 0;
    while Instant::now() < end {
        let mut chunk = [0u8; 8192];
        match outbound.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => outbound_buf.extend_from_slice(&chunk[..n]),
            Err(_) => continue,
        }
        while let Some(len) = frame_len(&outbound_buf).expect("framing") {
            if outbound_buf.len() < len {
                break;
            }
            let (msg, used) = decode(&outbound_buf).expect("decode");
            eprintln!("later: {:?}", summary(&msg));
            assert_eq!(msg.header.sender, redis_name);
            assert_eq!(slots_of(&msg.header.myslots), vec![5, 6, 7]);
            outbound_buf.drain(..used);
            more += 1;
        }
    }
    eprintln!("{more} more message(s) decoded");
    drop(server);
}

/// The header fields worth printing (the slot bitmap as a list).
fn summary(m: &Message) -> String {
    let h = &m.header;
    format!(
        "type {} sender {} port {} cport {} pport {} flags {} state {} epochs {}/{} \
         offset {} myip {:?} slaveof {:?} slots {:?} mflags {:?} count {} body {:?}",
        h.ty,
        name_str(&h.sender),
        h.port,
        h.cport,
        h.pport,
        h.flags,
        h.state,
        h.current_epoch,
        h.config_epoch,
        h.offset,
        h.myip,
        name_str(&h.slaveof),
        slots_of(&h.myslots),
        h.mflags,
        h.count,
        m.body
    )
}
