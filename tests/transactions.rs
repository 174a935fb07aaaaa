//! MULTI / EXEC / DISCARD / WATCH / UNWATCH with Redis 7's replies, against the real server.

mod support;

use support::{resp, TestServer};

#[test]
fn queued_replies_and_exec_array_byte_for_byte() {
    let srv = TestServer::start(&[]);
    let mut c = srv.raw();
    c.roundtrip(&resp(&["MULTI"]), b"+OK\r\n");
    c.roundtrip(&resp(&["PING"]), b"+QUEUED\r\n");
    c.roundtrip(&resp(&["ECHO", "hi"]), b"+QUEUED\r\n");
    c.roundtrip(&resp(&["SELECT", "2"]), b"+QUEUED\r\n");
    c.roundtrip(&resp(&["EXEC"]), b"*3\r\n+PONG\r\n$2\r\nhi\r\n+OK\r\n");
    // SELECT inside the transaction took effect.
    c.send(&resp(&["CLIENT", "INFO"]));
    let info = String::from_utf8(c.read_until(b"\n\r\n")).unwrap();
    assert!(info.contains(" db=2 "), "{info}");
}

#[test]
fn errors_outside_and_inside_multi() {
    let srv = TestServer::start(&[]);
    let mut c = srv.raw();
    c.roundtrip(&resp(&["EXEC"]), b"-ERR EXEC without MULTI\r\n");
    c.roundtrip(&resp(&["DISCARD"]), b"-ERR DISCARD without MULTI\r\n");
    c.roundtrip(&resp(&["MULTI"]), b"+OK\r\n");
    // Nested MULTI and WATCH inside MULTI are refused but do not doom the transaction.
    c.roundtrip(&resp(&["MULTI"]), b"-ERR MULTI calls can not be nested\r\n");
    c.roundtrip(
        &resp(&["WATCH", "k"]),
        b"-ERR WATCH inside MULTI is not allowed\r\n",
    );
    c.roundtrip(&resp(&["PING"]), b"+QUEUED\r\n");
    c.roundtrip(&resp(&["EXEC"]), b"*1\r\n+PONG\r\n");

    // DISCARD drops the queue.
    c.roundtrip(&resp(&["MULTI"]), b"+OK\r\n");
    c.roundtrip(&resp(&["PING"]), b"+QUEUED\r\n");
    c.roundtrip(&resp(&["DISCARD"]), b"+OK\r\n");
    c.roundtrip(&resp(&["EXEC"]), b"-ERR EXEC without MULTI\r\n");
}

#[test]
fn queue_time_errors_abort_with_execabort() {
    let srv = TestServer::start(&[]);
    let mut c = srv.raw();
    // Unknown command.
    c.roundtrip(&resp(&["MULTI"]), b"+OK\r\n");
    c.roundtrip(&resp(&["PING"]), b"+QUEUED\r\n");
    c.roundtrip(
        &resp(&["NOSUCH", "a"]),
        b"-ERR unknown command 'NOSUCH', with args beginning with: 'a' \r\n",
    );
    c.roundtrip(
        &resp(&["EXEC"]),
        b"-EXECABORT Transaction discarded because of previous errors.\r\n",
    );
    // Wrong arity.
    c.roundtrip(&resp(&["MULTI"]), b"+OK\r\n");
    c.roundtrip(
        &resp(&["ECHO"]),
        b"-ERR wrong number of arguments for 'echo' command\r\n",
    );
    c.roundtrip(
        &resp(&["EXEC"]),
        b"-EXECABORT Transaction discarded because of previous errors.\r\n",
    );
    // A NO_MULTI command.
    c.roundtrip(&resp(&["MULTI"]), b"+OK\r\n");
    c.roundtrip(
        &resp(&["SHUTDOWN"]),
        b"-ERR Command not allowed inside a transaction\r\n",
    );
    c.roundtrip(&resp(&["PING"]), b"+QUEUED\r\n");
    c.roundtrip(
        &resp(&["EXEC"]),
        b"-EXECABORT Transaction discarded because of previous errors.\r\n",
    );
    // The connection is out of MULTI afterwards.
    c.roundtrip(&resp(&["PING"]), b"+PONG\r\n");
}

#[test]
fn runtime_errors_do_not_abort_the_rest() {
    let srv = TestServer::start(&[]);
    let mut c = srv.raw();
    c.roundtrip(&resp(&["MULTI"]), b"+OK\r\n");
    c.roundtrip(&resp(&["SELECT", "99"]), b"+QUEUED\r\n");
    c.roundtrip(&resp(&["ECHO", "after"]), b"+QUEUED\r\n");
    c.roundtrip(
        &resp(&["EXEC"]),
        b"*2\r\n-ERR DB index is out of range\r\n$5\r\nafter\r\n",
    );
}

#[test]
fn noauth_inside_multi_aborts() {
    let srv = TestServer::start(&["--requirepass", "pw"]);
    let mut c = srv.raw();
    c.roundtrip(&resp(&["MULTI"]), b"-NOAUTH Authentication required.\r\n");
    c.roundtrip(&resp(&["AUTH", "pw"]), b"+OK\r\n");
    c.roundtrip(&resp(&["MULTI"]), b"+OK\r\n");
    c.roundtrip(&resp(&["PING"]), b"+QUEUED\r\n");
    c.roundtrip(&resp(&["EXEC"]), b"*1\r\n+PONG\r\n");
}

#[test]
fn resp3_exec_and_aborted_watch_reply_shapes() {
    let srv = TestServer::start(&[]);
    let mut c = srv.raw();
    c.send(&resp(&["HELLO", "3"]));
    c.read_until(b"modules\r\n*0\r\n");
    c.roundtrip(&resp(&["MULTI"]), b"+OK\r\n");
    c.roundtrip(&resp(&["PING"]), b"+QUEUED\r\n");
    c.roundtrip(&resp(&["EXEC"]), b"*1\r\n+PONG\r\n");
    // A WATCHed key written by another client: the aborted EXEC is RESP3's null.
    c.roundtrip(&resp(&["WATCH", "w"]), b"+OK\r\n");
    let mut other = srv.raw();
    other.roundtrip(&resp(&["SET", "w", "1"]), b"+OK\r\n");
    c.roundtrip(&resp(&["MULTI"]), b"+OK\r\n");
    c.roundtrip(&resp(&["PING"]), b"+QUEUED\r\n");
    c.roundtrip(&resp(&["EXEC"]), b"_\r\n");
    // And in RESP2, the null array.
    other.roundtrip(&resp(&["WATCH", "w"]), b"+OK\r\n");
    c.roundtrip(&resp(&["SET", "w", "2"]), b"+OK\r\n");
    other.roundtrip(&resp(&["MULTI"]), b"+OK\r\n");
    other.roundtrip(&resp(&["EXEC"]), b"*-1\r\n");
}

#[test]
fn redis_crate_atomic_pipeline() {
    let srv = TestServer::start(&[]);
    let mut con = srv.conn();
    let (a, b): (String, String) = redis::pipe()
        .atomic()
        .cmd("ECHO")
        .arg("one")
        .cmd("PING")
        .query(&mut con)
        .unwrap();
    assert_eq!((a.as_str(), b.as_str()), ("one", "PONG"));
}

#[test]
fn unwatch_and_watch_arity() {
    let srv = TestServer::start(&[]);
    let mut c = srv.raw();
    c.roundtrip(
        &resp(&["WATCH"]),
        b"-ERR wrong number of arguments for 'watch' command\r\n",
    );
    c.roundtrip(&resp(&["WATCH", "a", "b"]), b"+OK\r\n");
    c.roundtrip(&resp(&["UNWATCH"]), b"+OK\r\n");
    c.roundtrip(&resp(&["MULTI"]), b"+OK\r\n");
    c.roundtrip(&resp(&["EXEC"]), b"*0\r\n");
}

fn get_str(con: &mut redis::Connection, key: &str) -> Option<String> {
    redis::cmd("GET").arg(key).query(con).unwrap()
}

fn exec_after(con: &mut redis::Connection, queued: &[&[&str]]) -> redis::Value {
    let _: () = redis::cmd("MULTI").query(con).unwrap();
    for args in queued {
        let mut c = redis::cmd(args[0]);
        for a in &args[1..] {
            c.arg(*a);
        }
        let q: String = c.query(con).unwrap();
        assert_eq!(q, "QUEUED");
    }
    redis::cmd("EXEC").query(con).unwrap()
}

#[test]
fn runtime_errors_on_keys_do_not_abort_the_rest() {
    let srv = TestServer::start(&[]);
    let mut c = srv.raw();
    c.roundtrip(&resp(&["MULTI"]), b"+OK\r\n");
    c.roundtrip(&resp(&["SET", "s", "text"]), b"+QUEUED\r\n");
    c.roundtrip(&resp(&["INCR", "s"]), b"+QUEUED\r\n");
    c.roundtrip(&resp(&["SET", "t", "1"]), b"+QUEUED\r\n");
    c.roundtrip(&resp(&["INCR", "t"]), b"+QUEUED\r\n");
    c.roundtrip(
        &resp(&["EXEC"]),
        b"*4\r\n+OK\r\n-ERR value is not an integer or out of range\r\n+OK\r\n:2\r\n",
    );
    // A queue-time error on a key command still aborts everything.
    c.roundtrip(&resp(&["MULTI"]), b"+OK\r\n");
    c.roundtrip(&resp(&["SET", "u", "1"]), b"+QUEUED\r\n");
    c.roundtrip(
        &resp(&["SET", "u"]),
        b"-ERR wrong number of arguments for 'set' command\r\n",
    );
    c.roundtrip(
        &resp(&["EXEC"]),
        b"-EXECABORT Transaction discarded because of previous errors.\r\n",
    );
    c.roundtrip(&resp(&["EXISTS", "u"]), b":0\r\n");
}

#[test]
fn watch_aborts_exec_when_another_client_writes_deletes_or_flushes() {
    let srv = TestServer::start(&["--shards", "8"]);
    let mut a = srv.conn();
    let mut b = srv.conn();
    // Many keys, so several shards are involved.
    let keys: Vec<String> = (0..16).map(|i| format!("w{i}")).collect();
    for k in &keys {
        let _: () = redis::cmd("SET").arg(k).arg("0").query(&mut b).unwrap();
    }

    // Untouched: EXEC runs.
    let mut w = redis::cmd("WATCH");
    for k in &keys {
        w.arg(k);
    }
    let _: () = w.query(&mut a).unwrap();
    let r = exec_after(&mut a, &[&["SET", "w0", "mine"]]);
    assert_eq!(r, redis::Value::Array(vec![redis::Value::Okay]));

    // A write by someone else to any watched key, in any shard, aborts it (null reply).
    for victim in ["w3", "w11"] {
        let _: () = w.query(&mut a).unwrap();
        let _: () = redis::cmd("SET")
            .arg(victim)
            .arg("theirs")
            .query(&mut b)
            .unwrap();
        let r = exec_after(&mut a, &[&["SET", "w0", "lost"]]);
        assert_eq!(r, redis::Value::Nil, "after a write to {victim}");
        assert_eq!(get_str(&mut b, "w0").as_deref(), Some("mine"));
    }

    // DEL, EXPIRE and HSET on a watched key count as writes too.
    for write in [
        vec!["DEL", "w5"],
        vec!["EXPIRE", "w6", "100"],
        vec!["PERSIST", "w6"],
    ] {
        let _: () = redis::cmd("WATCH")
            .arg("w5")
            .arg("w6")
            .query(&mut a)
            .unwrap();
        let mut c = redis::cmd(write[0]);
        for x in &write[1..] {
            c.arg(*x);
        }
        let _: redis::Value = c.query(&mut b).unwrap();
        let r = exec_after(&mut a, &[&["PING"]]);
        assert_eq!(r, redis::Value::Nil, "after {write:?}");
    }
    // PERSIST of a key without a deadline changes nothing: EXEC runs.
    let _: () = redis::cmd("WATCH").arg("w6").query(&mut a).unwrap();
    let _: i64 = redis::cmd("PERSIST").arg("w6").query(&mut b).unwrap();
    assert_ne!(exec_after(&mut a, &[&["PING"]]), redis::Value::Nil);

    // FLUSHALL aborts when a watched key existed, not when it did not (Redis 7).
    let _: () = redis::cmd("WATCH").arg("w7").query(&mut a).unwrap();
    let _: () = redis::cmd("FLUSHALL").query(&mut b).unwrap();
    assert_eq!(exec_after(&mut a, &[&["PING"]]), redis::Value::Nil);
    let _: () = redis::cmd("WATCH").arg("never").query(&mut a).unwrap();
    let _: () = redis::cmd("FLUSHALL").query(&mut b).unwrap();
    assert_ne!(exec_after(&mut a, &[&["PING"]]), redis::Value::Nil);

    // UNWATCH forgets: a later write does not abort.
    let _: () = redis::cmd("SET").arg("w8").arg("1").query(&mut b).unwrap();
    let _: () = redis::cmd("WATCH").arg("w8").query(&mut a).unwrap();
    let _: () = redis::cmd("UNWATCH").query(&mut a).unwrap();
    let _: () = redis::cmd("SET").arg("w8").arg("2").query(&mut b).unwrap();
    assert_ne!(exec_after(&mut a, &[&["PING"]]), redis::Value::Nil);

    // The watching client's own write between WATCH and MULTI aborts too, as in Redis.
    let _: () = redis::cmd("WATCH").arg("w8").query(&mut a).unwrap();
    let _: () = redis::cmd("SET").arg("w8").arg("3").query(&mut a).unwrap();
    assert_eq!(exec_after(&mut a, &[&["PING"]]), redis::Value::Nil);

    // A watch in another database is a different key.
    let _: () = redis::cmd("WATCH").arg("w8").query(&mut a).unwrap();
    let _: () = redis::cmd("SELECT").arg(1).query(&mut b).unwrap();
    let _: () = redis::cmd("SET")
        .arg("w8")
        .arg("db1")
        .query(&mut b)
        .unwrap();
    assert_ne!(exec_after(&mut a, &[&["PING"]]), redis::Value::Nil);
}

#[test]
fn watch_aborts_exec_when_a_watched_key_expires() {
    // Deadlines are passed by moving the server's clock, not by sleeping: nothing here
    // depends on how fast a loaded machine runs the commands.
    let srv = TestServer::start(&["--enable-debug-command", "yes"]);
    let mut a = srv.conn();
    let advance = |c: &mut redis::Connection, ms: i64| {
        let _: () = redis::cmd("DEBUG")
            .arg("ADVANCE-CLOCK")
            .arg(ms)
            .query(c)
            .unwrap();
    };
    // Expires while nobody touches it: the EXEC-time check catches it.
    let _: () = redis::cmd("SET")
        .arg("t")
        .arg("v")
        .arg("PX")
        .arg(10_000)
        .query(&mut a)
        .unwrap();
    let _: () = redis::cmd("WATCH").arg("t").query(&mut a).unwrap();
    advance(&mut a, 10_000);
    assert_eq!(exec_after(&mut a, &[&["PING"]]), redis::Value::Nil);

    // Already expired when watched: like a missing key, EXEC runs.
    let _: () = redis::cmd("SET")
        .arg("t")
        .arg("v")
        .arg("PX")
        .arg(10_000)
        .query(&mut a)
        .unwrap();
    advance(&mut a, 10_000);
    let _: () = redis::cmd("WATCH").arg("t").query(&mut a).unwrap();
    assert_ne!(exec_after(&mut a, &[&["PING"]]), redis::Value::Nil);

    // Removed by the active sweep before EXEC (hz 10 sweeps every 100 ms).
    let _: () = redis::cmd("SET")
        .arg("t")
        .arg("v")
        .arg("PX")
        .arg(10_000)
        .query(&mut a)
        .unwrap();
    let _: () = redis::cmd("WATCH").arg("t").query(&mut a).unwrap();
    advance(&mut a, 10_000);
    let mut b = srv.conn();
    assert!(
        support::eventually(5.0, || {
            let n: i64 = redis::cmd("DBSIZE").query(&mut b).unwrap();
            n == 0
        }),
        "the sweep removed the key"
    );
    assert_eq!(exec_after(&mut a, &[&["PING"]]), redis::Value::Nil);
}

#[test]
fn exec_is_atomic_with_respect_to_other_clients() {
    let srv = TestServer::start(&["--shards", "8"]);
    let port = srv.port;
    let writer = std::thread::spawn(move || {
        let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
        let mut con = client.get_connection().unwrap();
        for _ in 0..1500 {
            let _: (i64, i64, i64) = redis::pipe()
                .atomic()
                .cmd("INCR")
                .arg("left")
                .cmd("INCR")
                .arg("middle")
                .cmd("INCR")
                .arg("right")
                .query(&mut con)
                .unwrap();
        }
    });
    let mut reader = srv.conn();
    let mut checks = 0;
    while !writer.is_finished() {
        let v: Vec<Option<i64>> = redis::cmd("MGET")
            .arg("left")
            .arg("middle")
            .arg("right")
            .query(&mut reader)
            .unwrap();
        let v: Vec<i64> = v.into_iter().map(|x| x.unwrap_or(0)).collect();
        assert!(
            v[0] == v[1] && v[1] == v[2],
            "saw a half-applied EXEC: {v:?}"
        );
        checks += 1;
    }
    writer.join().unwrap();
    assert!(checks > 10);
    let v: Vec<i64> = redis::cmd("MGET")
        .arg("left")
        .arg("middle")
        .arg("right")
        .query(&mut reader)
        .unwrap();
    assert_eq!(v, vec![1500, 1500, 1500]);
}

#[test]
fn write_concern_w0_is_client_reply_off_and_documents_work_in_transactions() {
    let srv = TestServer::start(&[]);
    let mut c = srv.raw();
    // w:0: the writes happen, nothing is answered, errors included.
    c.send(&resp(&["CLIENT", "REPLY", "OFF"]));
    c.send(&resp(&["DOC.INSERT", "events", r#"{"_id":1,"path":"/a"}"#]));
    c.send(&resp(&["DOC.INSERT", "events", r#"{"_id":1}"#]));
    c.send(&resp(&["DOC.INSERT", "events", r#"{"_id":2,"path":"/b"}"#]));
    c.roundtrip(&resp(&["CLIENT", "REPLY", "ON"]), b"+OK\r\n");
    c.roundtrip(&resp(&["DOC.COUNT", "events", "{}"]), b":2\r\n");
    // DOC.* commands queue and run inside MULTI like any other.
    c.roundtrip(&resp(&["MULTI"]), b"+OK\r\n");
    c.roundtrip(
        &resp(&["DOC.INSERT", "events", r#"{"_id":3}"#]),
        b"+QUEUED\r\n",
    );
    c.roundtrip(&resp(&["DOC.COUNT", "events", "{}"]), b"+QUEUED\r\n");
    c.send(&resp(&["EXEC"]));
    let got = String::from_utf8(c.read_until(b":3\r\n")).unwrap();
    assert!(got.starts_with("*2\r\n"), "{got}");
}
