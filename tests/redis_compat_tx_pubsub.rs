//! Byte-for-byte comparison with the reference: the same request sequences are sent to
//! tidecache and to `redis-server` (when installed, else the test says so and passes) and
//! the raw replies must be identical. Covers transactions, WATCH, subscribed mode, CLIENT
//! REPLY, PUBSUB introspection and keyspace notifications.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;
use support::{resp, ReferenceRedis, TestServer};

fn connect(port: u16) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    s
}

/// Reads until the connection has been quiet for a moment.
fn drain(s: &mut TcpStream) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = [0u8; 65536];
    loop {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return out,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
}

/// One step: which connection (0 or 1) sends which command; `None` = pause 120 ms.
type Step<'a> = Option<(usize, &'a str)>;

fn run(port: u16, steps: &[Step<'_>]) -> Vec<Vec<u8>> {
    let mut conns = [connect(port), connect(port)];
    let mut got = vec![Vec::new(), Vec::new()];
    for step in steps {
        match step {
            None => std::thread::sleep(Duration::from_millis(120)),
            Some((c, line)) => {
                let args: Vec<&str> = line.split(' ').collect();
                conns[*c].write_all(&resp(&args)).unwrap();
                // Replies are read after each command so that both connections' streams are
                // in a deterministic order. HELLO's reply names versions and ids: not compared.
                let reply = drain(&mut conns[*c]);
                if args[0] != "HELLO" {
                    got[*c].extend(reply);
                }
            }
        }
    }
    for (i, c) in conns.iter_mut().enumerate() {
        got[i].extend(drain(c));
    }
    got
}

fn compare(name: &str, steps: &[Step<'_>]) {
    let Some(reference) = ReferenceRedis::start() else {
        return;
    };
    let ours = TestServer::start(&[]);
    let (want, got) = std::thread::scope(|s| {
        let want = s.spawn(|| run(reference.port, steps));
        let got = run(ours.port, steps);
        (want.join().unwrap(), got)
    });
    for i in 0..2 {
        assert_eq!(
            String::from_utf8_lossy(&got[i]),
            String::from_utf8_lossy(&want[i]),
            "{name}: connection {i} differs from redis-server"
        );
    }
}

fn on0(lines: &[&'static str]) -> Vec<Step<'static>> {
    lines.iter().map(|l| Some((0, *l))).collect()
}

#[test]
fn transactions_match_redis() {
    compare(
        "multi errors",
        &on0(&[
            "MULTI", "MULTI", "PING", "EXEC", "EXEC", "DISCARD", "MULTI", "FOO a", "PING", "EXEC",
            "MULTI", "ECHO", "EXEC", "MULTI", "SHUTDOWN", "EXEC", "MULTI", "WATCH a", "PING",
            "EXEC", "MULTI", "PING", "DISCARD", "PING", "MULTI", "MONITOR", "EXEC", "PING",
        ]),
    );
    compare(
        "runtime errors and keys",
        &on0(&[
            "MULTI",
            "SET s text",
            "INCR s",
            "SET t 1",
            "INCR t",
            "HSET s f v",
            "GET t",
            "EXEC",
            "MULTI",
            "SELECT 99",
            "ECHO after",
            "EXEC",
        ]),
    );
    compare(
        "watch",
        &[
            Some((0, "SET w 1")),
            Some((0, "WATCH w other")),
            Some((1, "SET w 2")),
            Some((0, "MULTI")),
            Some((0, "GET w")),
            Some((0, "EXEC")),
            Some((0, "WATCH w")),
            Some((0, "MULTI")),
            Some((0, "INCR w")),
            Some((0, "EXEC")),
            Some((0, "WATCH w")),
            Some((1, "DEL w")),
            Some((0, "MULTI")),
            Some((0, "PING")),
            Some((0, "EXEC")),
            Some((0, "SET e v PX 50")),
            Some((0, "WATCH e")),
            None,
            Some((0, "MULTI")),
            Some((0, "PING")),
            Some((0, "EXEC")),
            Some((0, "WATCH nothing")),
            Some((1, "FLUSHALL")),
            Some((0, "MULTI")),
            Some((0, "PING")),
            Some((0, "EXEC")),
        ],
    );
}

#[test]
fn pubsub_matches_redis() {
    compare(
        "resp2 subscribed mode",
        &on0(&[
            "SUBSCRIBE a",
            "GET x",
            "MULTI",
            "PING",
            "PING m",
            "PSUBSCRIBE p*",
            "PUNSUBSCRIBE p*",
            "PUNSUBSCRIBE",
            "UNSUBSCRIBE a",
            "UNSUBSCRIBE",
            "PING",
        ]),
    );
    compare(
        "resp3 pushes",
        &[
            Some((0, "HELLO 3")),
            Some((0, "SUBSCRIBE a")),
            Some((0, "GET x")),
            Some((1, "PUBLISH a hello")),
            Some((0, "PING")),
            Some((1, "PUBSUB NUMSUB a b")),
            Some((1, "PUBSUB NUMPAT")),
            Some((1, "PUBSUB CHANNELS")),
            Some((1, "PUBSUB CHANNELS x*")),
            Some((0, "PSUBSCRIBE a*")),
            Some((1, "PUBLISH a again")),
            Some((0, "UNSUBSCRIBE a")),
            Some((0, "PUNSUBSCRIBE")),
        ],
    );
    compare(
        "client reply",
        &[
            Some((0, "CLIENT REPLY OFF")),
            Some((0, "PING")),
            Some((0, "FOO")),
            Some((0, "CLIENT REPLY ON")),
            Some((0, "CLIENT REPLY SKIP")),
            Some((0, "PING a")),
            Some((0, "PING b")),
            Some((0, "CLIENT REPLY OFF")),
            Some((0, "SUBSCRIBE x")),
            Some((1, "PUBLISH x y")),
            Some((0, "CLIENT REPLY ON")),
        ],
    );
}

#[test]
fn keyspace_notifications_match_redis() {
    compare(
        "notifications",
        &[
            Some((1, "CONFIG SET notify-keyspace-events KEA")),
            Some((1, "CONFIG GET notify-keyspace-events")),
            Some((1, "CONFIG SET notify-keyspace-events Q")),
            Some((1, "CONFIG SET notify-keyspace-events KEA")),
            Some((0, "PSUBSCRIBE __key*__:*")),
            Some((1, "SET k v")),
            Some((1, "SET k v EX 100")),
            Some((1, "EXPIRE k 50")),
            Some((1, "PERSIST k")),
            Some((1, "INCR n")),
            Some((1, "INCRBYFLOAT n 1.5")),
            Some((1, "APPEND k x")),
            Some((1, "SETRANGE k 1 yy")),
            Some((1, "HSET h a 1")),
            Some((1, "HINCRBY h a 1")),
            Some((1, "HDEL h a")),
            Some((1, "RENAME k k2")),
            Some((1, "COPY k2 k3")),
            Some((1, "DEL k2 k3 nokey")),
            Some((1, "MSET a 1 b 2")),
            Some((1, "GETDEL a")),
            Some((1, "EXPIRE b 0")),
            Some((1, "SET e v PX 30")),
            None,
            Some((1, "GET e")),
            Some((1, "CONFIG SET notify-keyspace-events KEn")),
            Some((1, "SET fresh 1")),
            Some((1, "SET fresh 2")),
            Some((1, "HSET freshh f v")),
            Some((1, "RENAME fresh fresh2")),
            Some((1, "CONFIG SET notify-keyspace-events KEm")),
            Some((1, "GET nothing")),
            Some((1, "HGET nothing f")),
            Some((1, "MGET nothing fresh2 nothing2")),
            Some((1, "SET nothing 1")),
            Some((1, "INCR nothing3")),
            Some((1, "CONFIG SET notify-keyspace-events Eh")),
            Some((1, "SET quiet 1")),
            Some((1, "HSET h2 f v")),
            Some((1, "CONFIG SET notify-keyspace-events")),
        ],
    );
}
