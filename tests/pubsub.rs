//! Pub/sub, keyspace notification settings, MONITOR, CLIENT KILL filters and CLIENT REPLY,
//! against the real server with the redis crate (sync and async) and raw TCP.

mod support;

use std::time::{Duration, Instant};
use support::{resp, TestServer};

fn cmd_str(con: &mut redis::Connection, args: &[&str]) -> redis::RedisResult<redis::Value> {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    c.query(con)
}

#[test]
fn subscribe_publish_and_patterns_with_the_sync_client() {
    let srv = TestServer::start(&[]);
    let mut sub_con = srv.conn();
    let mut publ = srv.conn();
    let mut ps = sub_con.as_pubsub();
    ps.subscribe("news").unwrap();
    ps.psubscribe("sport.*").unwrap();
    ps.set_read_timeout(Some(Duration::from_secs(5))).unwrap();

    let n: i64 = redis::cmd("PUBLISH")
        .arg("news")
        .arg("hello")
        .query(&mut publ)
        .unwrap();
    assert_eq!(n, 1);
    let n: i64 = redis::cmd("PUBLISH")
        .arg("sport.tennis")
        .arg("set point")
        .query(&mut publ)
        .unwrap();
    assert_eq!(n, 1);
    let n: i64 = redis::cmd("PUBLISH")
        .arg("nobody")
        .arg("x")
        .query(&mut publ)
        .unwrap();
    assert_eq!(n, 0);

    let m = ps.get_message().unwrap();
    assert_eq!(m.get_channel_name(), "news");
    assert_eq!(m.get_payload::<String>().unwrap(), "hello");
    let m = ps.get_message().unwrap();
    assert_eq!(m.get_channel_name(), "sport.tennis");
    assert_eq!(m.get_pattern::<String>().unwrap(), "sport.*");
    assert_eq!(m.get_payload::<String>().unwrap(), "set point");

    let chans: Vec<String> = redis::cmd("PUBSUB")
        .arg("CHANNELS")
        .query(&mut publ)
        .unwrap();
    assert_eq!(chans, vec!["news".to_string()]);
    let chans: Vec<String> = redis::cmd("PUBSUB")
        .arg("CHANNELS")
        .arg("x*")
        .query(&mut publ)
        .unwrap();
    assert!(chans.is_empty());
    let numsub: Vec<redis::Value> = redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg("news")
        .arg("other")
        .query(&mut publ)
        .unwrap();
    assert_eq!(
        numsub,
        vec![
            redis::Value::BulkString(b"news".to_vec()),
            redis::Value::Int(1),
            redis::Value::BulkString(b"other".to_vec()),
            redis::Value::Int(0),
        ]
    );
    let numpat: i64 = redis::cmd("PUBSUB").arg("NUMPAT").query(&mut publ).unwrap();
    assert_eq!(numpat, 1);

    ps.unsubscribe("news").unwrap();
    ps.punsubscribe("sport.*").unwrap();
    drop(ps);
    let numpat: i64 = redis::cmd("PUBSUB").arg("NUMPAT").query(&mut publ).unwrap();
    assert_eq!(numpat, 0);
    let n: i64 = redis::cmd("PUBLISH")
        .arg("news")
        .arg("late")
        .query(&mut publ)
        .unwrap();
    assert_eq!(n, 0);
}

#[test]
fn resp2_subscribed_mode_byte_for_byte() {
    let srv = TestServer::start(&[]);
    let mut c = srv.raw();
    c.roundtrip(
        &resp(&["SUBSCRIBE", "a", "b"]),
        b"*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n*3\r\n$9\r\nsubscribe\r\n$1\r\nb\r\n:2\r\n",
    );
    c.roundtrip(
        &resp(&["GET", "x"]),
        b"-ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n",
    );
    c.roundtrip(&resp(&["PING"]), b"*2\r\n$4\r\npong\r\n$0\r\n\r\n");
    c.roundtrip(&resp(&["PING", "hi"]), b"*2\r\n$4\r\npong\r\n$2\r\nhi\r\n");
    c.roundtrip(
        &resp(&["PSUBSCRIBE", "p*"]),
        b"*3\r\n$10\r\npsubscribe\r\n$2\r\np*\r\n:3\r\n",
    );
    c.roundtrip(
        &resp(&["UNSUBSCRIBE", "a", "zz"]),
        b"*3\r\n$11\r\nunsubscribe\r\n$1\r\na\r\n:2\r\n*3\r\n$11\r\nunsubscribe\r\n$2\r\nzz\r\n:2\r\n",
    );
    c.roundtrip(
        &resp(&["PUNSUBSCRIBE"]),
        b"*3\r\n$12\r\npunsubscribe\r\n$2\r\np*\r\n:1\r\n",
    );
    c.roundtrip(
        &resp(&["UNSUBSCRIBE"]),
        b"*3\r\n$11\r\nunsubscribe\r\n$1\r\nb\r\n:0\r\n",
    );
    // Out of subscribed mode: everything runs again, and an empty UNSUBSCRIBE says so.
    c.roundtrip(
        &resp(&["UNSUBSCRIBE"]),
        b"*3\r\n$11\r\nunsubscribe\r\n$-1\r\n:0\r\n",
    );
    c.roundtrip(&resp(&["PING"]), b"+PONG\r\n");
    // RESET leaves subscribed mode too.
    c.roundtrip(
        &resp(&["SUBSCRIBE", "a"]),
        b"*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n",
    );
    c.roundtrip(&resp(&["RESET"]), b"+RESET\r\n");
    c.roundtrip(&resp(&["ECHO", "x"]), b"$1\r\nx\r\n");
    let mut p = srv.conn();
    let n: i64 = redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg("a")
        .query::<Vec<redis::Value>>(&mut p)
        .map(|v| match v[1] {
            redis::Value::Int(n) => n,
            _ => -1,
        })
        .unwrap();
    assert_eq!(n, 0);
}

#[test]
fn resp3_push_frames_interleave_with_replies() {
    let srv = TestServer::start(&[]);
    let mut c = srv.raw();
    c.send(&resp(&["HELLO", "3"]));
    c.read_until(b"modules\r\n*0\r\n");
    c.roundtrip(
        &resp(&["SUBSCRIBE", "ch"]),
        b">3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n",
    );
    // Any command runs while subscribed in RESP3.
    c.roundtrip(&resp(&["ECHO", "still here"]), b"$10\r\nstill here\r\n");
    let mut p = srv.conn();
    let _: i64 = redis::cmd("PUBLISH")
        .arg("ch")
        .arg("m1")
        .query(&mut p)
        .unwrap();
    let got = c.read_n(b">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nm1\r\n".len());
    assert_eq!(got, b">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nm1\r\n");
    c.roundtrip(&resp(&["PING"]), b"+PONG\r\n");
}

#[tokio::test]
async fn async_resp3_client_receives_pushes_between_commands() {
    let srv = TestServer::start(&[]);
    let client =
        redis::Client::open(format!("redis://127.0.0.1:{}/?protocol=resp3", srv.port)).unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let config = redis::AsyncConnectionConfig::new().set_push_sender(tx);
    let mut con = client
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .unwrap();
    con.subscribe("jobs").await.unwrap();
    con.psubscribe("job*").await.unwrap();
    let mut publ = client.get_multiplexed_async_connection().await.unwrap();
    for i in 0..3 {
        let n: i64 = redis::cmd("PUBLISH")
            .arg("jobs")
            .arg(format!("job-{i}"))
            .query_async(&mut publ)
            .await
            .unwrap();
        assert_eq!(n, 2);
        // A normal command on the subscribed connection still gets its own reply.
        let echoed: String = redis::cmd("ECHO")
            .arg(i)
            .query_async(&mut con)
            .await
            .unwrap();
        assert_eq!(echoed, i.to_string());
    }
    let mut messages = Vec::new();
    let mut pmessages = 0;
    while messages.len() < 3 || pmessages < 3 {
        let push = tokio::time::timeout(Duration::from_secs(5), rx.recv())
            .await
            .expect("push in time")
            .expect("push channel open");
        match push.kind {
            redis::PushKind::Message => {
                let payload: String = redis::from_redis_value(push.data[1].clone()).unwrap();
                messages.push(payload);
            }
            redis::PushKind::PMessage => pmessages += 1,
            _ => {}
        }
    }
    assert_eq!(messages, vec!["job-0", "job-1", "job-2"]);
}

#[test]
fn a_subscriber_that_never_reads_is_disconnected_and_memory_stays_bounded() {
    let srv = TestServer::start(&["--client-output-buffer-limit", "pubsub 4mb 1mb 1"]);
    // Subscribe, then never read again.
    let mut stalled = srv.raw();
    stalled.roundtrip(
        &resp(&["SUBSCRIBE", "firehose"]),
        b"*3\r\n$9\r\nsubscribe\r\n$8\r\nfirehose\r\n:1\r\n",
    );
    let mut p = srv.conn();
    let before = support::rss_kib(srv.child.id());
    let payload = vec![b'x'; 100_000];
    let mut delivered_last = 1;
    // 300 MB in total: far more than kernel socket buffers and the 4 MB limit.
    for _ in 0..3000 {
        delivered_last = redis::cmd("PUBLISH")
            .arg("firehose")
            .arg(&payload[..])
            .query(&mut p)
            .unwrap();
        if delivered_last == 0 {
            break;
        }
    }
    assert_eq!(
        delivered_last, 0,
        "the stalled subscriber was never dropped"
    );
    // Keep publishing after the drop: nothing accumulates anywhere.
    for _ in 0..500 {
        let _: i64 = redis::cmd("PUBLISH")
            .arg("firehose")
            .arg(&payload[..])
            .query(&mut p)
            .unwrap();
    }
    let after = support::rss_kib(srv.child.id());
    assert!(
        after < before + 64 * 1024,
        "server memory grew from {before} KiB to {after} KiB"
    );
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .arg("TYPE")
        .arg("pubsub")
        .query(&mut p)
        .unwrap();
    assert_eq!(list, "");
    // The stalled client's socket was closed by the server.
    stalled
        .0
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut buf = vec![0u8; 1 << 20];
    loop {
        use std::io::Read;
        match stalled.0.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(_) => assert!(Instant::now() < deadline, "connection still open"),
        }
    }
}

#[test]
fn notify_keyspace_events_flags_parse_and_print_as_redis() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    for (set, shown) in [
        ("KEA", "AKE"),
        ("Ex", "xE"),
        ("g$lshzxetdKEmn", "AKEmn"),
        ("Kg$", "g$K"),
        ("", ""),
    ] {
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("notify-keyspace-events")
            .arg(set)
            .query(&mut c)
            .unwrap();
        let got: Vec<String> = redis::cmd("CONFIG")
            .arg("GET")
            .arg("notify-keyspace-events")
            .query(&mut c)
            .unwrap();
        assert_eq!(got[1], shown, "after setting {set:?}");
    }
    let err = cmd_str(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "KQ"]).unwrap_err();
    assert!(
        err.to_string()
            .contains("Invalid event class character. Use 'Ag$lshzxeKEtmdn'."),
        "{err}"
    );
}

#[test]
fn monitor_shows_commands_in_redis_line_format() {
    let srv = TestServer::start(&[]);
    let mut mon = srv.raw();
    mon.roundtrip(&resp(&["MONITOR"]), b"+OK\r\n");
    let mut c = srv.raw();
    c.roundtrip(&resp(&["SELECT", "3"]), b"+OK\r\n");
    c.roundtrip(&resp(&["ECHO", "a \"b\"\n"]), b"$6\r\na \"b\"\n\r\n");
    c.roundtrip(
        &resp(&["AUTH", "secret"]),
        b"-ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?\r\n",
    );
    c.send(&resp(&["MULTI"]));
    c.send(&resp(&["PING"]));
    c.send(&resp(&["EXEC"]));
    c.read_until(b"*1\r\n+PONG\r\n");
    let addr = c.0.local_addr().unwrap().to_string();
    let text = String::from_utf8(mon.read_until(b"\"EXEC\"\r\n")).unwrap();
    let lines: Vec<&str> = text.trim_end().split("\r\n").collect();
    let tails: Vec<String> = lines
        .iter()
        .map(|l| {
            // +<secs>.<micros> [db addr] args
            let (ts, rest) = l[1..].split_once(' ').unwrap();
            let (secs, micros) = ts.split_once('.').unwrap();
            assert!(secs.parse::<u64>().unwrap() > 1_600_000_000);
            assert_eq!(micros.len(), 6);
            assert!(l.starts_with('+'));
            rest.to_string()
        })
        .collect();
    assert_eq!(
        tails,
        vec![
            format!("[3 {addr}] \"SELECT\" \"3\""),
            format!("[3 {addr}] \"ECHO\" \"a \\\"b\\\"\\n\""),
            format!("[3 {addr}] \"AUTH\" \"(redacted)\""),
            format!("[3 {addr}] \"MULTI\""),
            format!("[3 {addr}] \"PING\""),
            format!("[3 {addr}] \"EXEC\""),
        ]
    );
    // RESET ends monitoring.
    mon.roundtrip(&resp(&["RESET"]), b"+RESET\r\n");
    c.roundtrip(&resp(&["PING"]), b"+PONG\r\n");
    mon.roundtrip(&resp(&["PING"]), b"+PONG\r\n");
}

fn client_id(con: &mut redis::Connection) -> i64 {
    redis::cmd("CLIENT").arg("ID").query(con).unwrap()
}

fn kill(con: &mut redis::Connection, args: &[&str]) -> redis::RedisResult<i64> {
    let mut c = redis::cmd("CLIENT");
    c.arg("KILL");
    for a in args {
        c.arg(*a);
    }
    c.query(con)
}

fn alive(con: &mut redis::Connection) -> bool {
    redis::cmd("PING").query::<String>(con).is_ok()
}

#[test]
fn client_kill_filters() {
    let srv = TestServer::start(&[]);
    let mut admin = srv.conn();
    let mut a = srv.conn();
    let mut b = srv.conn();
    let mut subscriber = srv.raw();
    subscriber.roundtrip(
        &resp(&["SUBSCRIBE", "c"]),
        b"*3\r\n$9\r\nsubscribe\r\n$1\r\nc\r\n:1\r\n",
    );

    // Errors first: nothing is killed by a bad request.
    assert!(kill(&mut admin, &["TYPE", "bogus"])
        .unwrap_err()
        .to_string()
        .contains("Unknown client type 'bogus'"));
    assert!(kill(&mut admin, &["USER", "nobody"])
        .unwrap_err()
        .to_string()
        .contains("No such user 'nobody'"));
    assert!(kill(&mut admin, &["ID", "0"])
        .unwrap_err()
        .to_string()
        .contains("client-id should be greater than 0"));
    assert!(kill(&mut admin, &["ID", "1", "SKIPME"])
        .unwrap_err()
        .to_string()
        .contains("syntax error"));
    assert!(kill(&mut admin, &["MAXAGE", "x"]).is_err());
    assert!(alive(&mut a) && alive(&mut b));

    // TYPE master/replica select nobody; TYPE pubsub selects only the subscriber.
    assert_eq!(kill(&mut admin, &["TYPE", "master"]).unwrap(), 0);
    assert_eq!(kill(&mut admin, &["TYPE", "replica"]).unwrap(), 0);
    let pubsub_list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .arg("TYPE")
        .arg("pubsub")
        .query(&mut admin)
        .unwrap();
    assert_eq!(pubsub_list.lines().count(), 1);
    assert!(pubsub_list.contains("flags=P") && pubsub_list.contains("sub=1"));
    assert_eq!(kill(&mut admin, &["TYPE", "pubsub"]).unwrap(), 1);
    assert!(subscriber.closed());

    // MAXAGE: nobody is an hour old.
    assert_eq!(kill(&mut admin, &["MAXAGE", "3600"]).unwrap(), 0);

    // ID, then ADDR and LADDR.
    let id_a = client_id(&mut a);
    assert_eq!(kill(&mut admin, &["ID", &id_a.to_string()]).unwrap(), 1);
    assert!(!alive(&mut a));
    let info: String = redis::cmd("CLIENT").arg("INFO").query(&mut b).unwrap();
    let field = |name: &str| {
        info.split_whitespace()
            .find_map(|f| f.strip_prefix(&format!("{name}=")))
            .unwrap()
            .to_string()
    };
    let (addr, laddr) = (field("addr"), field("laddr"));
    assert_eq!(
        kill(&mut admin, &["ADDR", &addr, "LADDR", "127.0.0.1:1"]).unwrap(),
        0
    );
    assert_eq!(
        kill(
            &mut admin,
            &["ADDR", &addr, "LADDR", &laddr, "USER", "default"]
        )
        .unwrap(),
        1
    );
    assert!(!alive(&mut b));

    // SKIPME: by default the caller survives a TYPE normal sweep; with SKIPME no it does not.
    let mut c = srv.conn();
    assert_eq!(kill(&mut admin, &["TYPE", "normal"]).unwrap(), 1);
    assert!(!alive(&mut c));
    assert!(alive(&mut admin));
    assert_eq!(
        kill(&mut admin, &["TYPE", "normal", "SKIPME", "no"]).unwrap(),
        1
    );
    assert!(!alive(&mut admin));
}

#[test]
fn client_reply_modes_and_pushes() {
    let srv = TestServer::start(&[]);
    let mut c = srv.raw();
    // OFF: no replies at all, errors included, until ON.
    c.send(&resp(&["CLIENT", "REPLY", "OFF"]));
    c.send(&resp(&["PING"]));
    c.send(&resp(&["NOSUCHCOMMAND"]));
    c.roundtrip(&resp(&["CLIENT", "REPLY", "ON"]), b"+OK\r\n");
    // SKIP: only the next command's reply is dropped.
    c.send(&resp(&["CLIENT", "REPLY", "SKIP"]));
    c.send(&resp(&["ECHO", "dropped"]));
    c.roundtrip(&resp(&["ECHO", "kept"]), b"$4\r\nkept\r\n");
    // Pub/sub pushes are delivered even with replies off.
    c.send(&resp(&["CLIENT", "REPLY", "OFF"]));
    c.roundtrip(
        &resp(&["SUBSCRIBE", "x"]),
        b"*3\r\n$9\r\nsubscribe\r\n$1\r\nx\r\n:1\r\n",
    );
    let mut p = srv.conn();
    let _: i64 = redis::cmd("PUBLISH")
        .arg("x")
        .arg("y")
        .query(&mut p)
        .unwrap();
    let want = b"*3\r\n$7\r\nmessage\r\n$1\r\nx\r\n$1\r\ny\r\n";
    assert_eq!(c.read_n(want.len()), want);
}

/// Reads (channel, payload) pairs from a pattern subscription until `n` arrived.
fn events(ps: &mut redis::PubSub<'_>, n: usize) -> Vec<(String, String)> {
    (0..n)
        .map(|_| {
            let m = ps.get_message().expect("notification in time");
            (
                m.get_channel_name().to_string(),
                m.get_payload::<String>().unwrap(),
            )
        })
        .collect()
}

fn run(con: &mut redis::Connection, args: &[&str]) {
    let _: redis::Value = cmd_str(con, args).unwrap();
}

#[test]
fn keyspace_notifications_for_writes_expiry_and_eviction() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    let mut sub_con = srv.conn();
    let mut ps = sub_con.as_pubsub();
    ps.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    ps.psubscribe("__key*@0__:*").unwrap();

    // Off by default: nothing is published.
    run(&mut c, &["SET", "quiet", "1"]);
    run(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "KEA"]);
    run(&mut c, &["SET", "k", "v"]);
    run(&mut c, &["EXPIRE", "k", "100"]);
    run(&mut c, &["HSET", "h", "f", "1"]);
    run(&mut c, &["DEL", "k", "missing"]);
    let got = events(&mut ps, 8);
    let want: Vec<(String, String)> = [
        ("__keyspace@0__:k", "set"),
        ("__keyevent@0__:set", "k"),
        ("__keyspace@0__:k", "expire"),
        ("__keyevent@0__:expire", "k"),
        ("__keyspace@0__:h", "hset"),
        ("__keyevent@0__:hset", "h"),
        ("__keyspace@0__:k", "del"),
        ("__keyevent@0__:del", "k"),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    assert_eq!(got, want);

    // Only keyevent, only the expired class: `expired` from the lazy path (a read after
    // the deadline) ...
    run(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "Ex"]);
    run(&mut c, &["SET", "lazy", "v", "PX", "30"]);
    std::thread::sleep(Duration::from_millis(60));
    let _: Option<String> = redis::cmd("GET").arg("lazy").query(&mut c).unwrap();
    assert_eq!(
        events(&mut ps, 1),
        vec![("__keyevent@0__:expired".to_string(), "lazy".to_string())]
    );
    // ... and from the active sweep, with nobody touching the key.
    run(&mut c, &["SET", "swept", "v", "PX", "30"]);
    assert_eq!(
        events(&mut ps, 1),
        vec![("__keyevent@0__:expired".to_string(), "swept".to_string())]
    );

    // Eviction: a tiny maxmemory with allkeys-random evicts and says so.
    run(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "Ee"]);
    run(
        &mut c,
        &["CONFIG", "SET", "maxmemory-policy", "allkeys-random"],
    );
    let used: String = redis::cmd("INFO").arg("memory").query(&mut c).unwrap();
    let used: u64 = used
        .lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap();
    // maxmemory bounds the whole process's used_memory (buffers, statistics rows too).
    run(
        &mut c,
        &["CONFIG", "SET", "maxmemory", &(used + 400_000).to_string()],
    );
    let big = "x".repeat(10_000);
    for i in 0..100 {
        run(&mut c, &["SET", &format!("fill{i}"), &big]);
    }
    let first = events(&mut ps, 1);
    assert_eq!(first[0].0, "__keyevent@0__:evicted");
    assert!(first[0].1.starts_with("fill") || first[0].1 == "h" || first[0].1 == "quiet");
    run(&mut c, &["CONFIG", "SET", "maxmemory", "0"]);
}

/// Redis 7.0's "Keyspace notifications: evicted events" (unit/pubsub): `CONFIG SET maxmemory`
/// under the memory in use evicts then and there, so the subscriber hears of it while no
/// client sends another command (eviction before each command would wait for one).
#[test]
fn lowering_maxmemory_evicts_at_once() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    run(&mut c, &["SELECT", "9"]);
    run(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "Ee"]);
    run(
        &mut c,
        &["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"],
    );
    let mut sub_con = srv.conn();
    let mut ps = sub_con.as_pubsub();
    ps.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    ps.psubscribe("*").unwrap();
    run(&mut c, &["SET", "foo", "bar"]);
    run(&mut c, &["CONFIG", "SET", "maxmemory", "1"]);
    assert_eq!(
        events(&mut ps, 1),
        vec![("__keyevent@9__:evicted".to_string(), "foo".to_string())]
    );
    run(&mut c, &["CONFIG", "SET", "maxmemory", "0"]);
    let n: i64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(n, 0);
}

#[test]
fn idle_timeout_spares_subscribers_and_monitors() {
    let srv = TestServer::start(&["--timeout", "1"]);
    let mut idle = srv.raw();
    idle.roundtrip(&resp(&["PING"]), b"+PONG\r\n");
    let mut sub = srv.raw();
    sub.roundtrip(
        &resp(&["SUBSCRIBE", "quiet"]),
        b"*3\r\n$9\r\nsubscribe\r\n$5\r\nquiet\r\n:1\r\n",
    );
    let mut mon = srv.raw();
    mon.roundtrip(&resp(&["MONITOR"]), b"+OK\r\n");
    std::thread::sleep(Duration::from_millis(2500));
    assert!(idle.closed(), "an idle normal client is closed");
    sub.roundtrip(&resp(&["PING"]), b"*2\r\n$4\r\npong\r\n$0\r\n\r\n");
    // (The monitor first receives the subscriber's PING line.)
    mon.send(&resp(&["PING"]));
    mon.read_until(b"+PONG\r\n");
}
