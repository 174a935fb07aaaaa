//! Replication between two real servers: a full sync, the stream of every kind of write,
//! the read-only replica, WAIT, reconnection with a partial resync, a restarted replica, and
//! a wrong masterauth keeping the link down.

mod support;
use support::*;

/// Waits until the replica applied everything the master has streamed.
fn caught_up(master: &mut redis::Connection, replica: &mut redis::Connection) -> bool {
    eventually(10.0, || {
        let m = info_value(master, "replication", "master_repl_offset");
        let r = info_value(replica, "replication", "slave_repl_offset");
        m.is_some() && m == r
    })
}

#[test]
fn writes_reach_the_replica_which_refuses_its_own() {
    let master = TestServer::start(&[]);
    let replica = TestServer::start(&[]);
    let mut m = master.conn();
    let mut r = replica.conn();
    // Before the sync: carried by the snapshot.
    let _: () = q(&mut m, &["SET", "before", "1"]).unwrap();
    let _: () = q(&mut m, &["SELECT", "3"]).unwrap();
    let _: () = q(&mut m, &["SET", "in3", "x"]).unwrap();
    let _: () = q(&mut m, &["SELECT", "0"]).unwrap();
    let _: Vec<String> = q(
        &mut m,
        &["DOC.INSERT", "people", r#"{"_id":1,"name":"ann"}"#],
    )
    .unwrap();
    replicate(&mut r, &master);
    assert_eq!(strs(&mut r, &["MGET", "before"]), ["1"]);
    let _: () = q(&mut r, &["SELECT", "3"]).unwrap();
    assert_eq!(strs(&mut r, &["MGET", "in3"]), ["x"]);
    let _: () = q(&mut r, &["SELECT", "0"]).unwrap();
    let ann: String = q(&mut r, &["DOC.FINDONE", "people", r#"{"_id":1}"#]).unwrap();
    assert!(ann.contains("ann"), "{ann}");

    // After: the stream.
    let _: () = q(&mut m, &["SET", "k", "v"]).unwrap();
    let _: i64 = q(&mut m, &["HSET", "h", "f", "1", "g", "2"]).unwrap();
    let _: () = q(&mut m, &["SET", "ttl", "v", "EX", "1000"]).unwrap();
    let _: i64 = q(&mut m, &["INCRBY", "n", "5"]).unwrap();
    let (a, b): (i64, i64) = redis::pipe()
        .atomic()
        .cmd("INCR")
        .arg("n")
        .cmd("LPUSH")
        .arg("l")
        .arg("x")
        .query(&mut m)
        .unwrap();
    assert_eq!((a, b), (6, 1));
    let _: () = redis::cmd("EVAL")
        .arg("redis.call('SET', KEYS[1], ARGV[1]); redis.call('SADD', 'set', 'm')")
        .arg(1)
        .arg("fromscript")
        .arg("42")
        .query(&mut m)
        .unwrap();
    let _: Vec<String> = q(
        &mut m,
        &["DOC.INSERT", "people", r#"{"_id":2,"name":"bob"}"#],
    )
    .unwrap();
    let _: () = q(&mut m, &["SELECT", "5"]).unwrap();
    let _: () = q(&mut m, &["SET", "in5", "y"]).unwrap();
    let _: () = q(&mut m, &["SELECT", "0"]).unwrap();
    let _: i64 = q(&mut m, &["DEL", "before"]).unwrap();
    assert!(caught_up(&mut m, &mut r));

    let got: Vec<Option<String>> = q(&mut r, &["MGET", "k", "n", "fromscript", "before"]).unwrap();
    let want = [Some("v"), Some("6"), Some("42"), None].map(|v| v.map(String::from));
    assert_eq!(got, want);
    assert_eq!(strs(&mut r, &["HMGET", "h", "f", "g"]), ["1", "2"]);
    assert_eq!(strs(&mut r, &["LRANGE", "l", "0", "-1"]), ["x"]);
    assert_eq!(strs(&mut r, &["SMEMBERS", "set"]), ["m"]);
    let ttl = int(&mut r, &["TTL", "ttl"]);
    assert!((990..=1000).contains(&ttl), "{ttl}");
    let bob: String = q(&mut r, &["DOC.FINDONE", "people", r#"{"_id":2}"#]).unwrap();
    assert!(bob.contains("bob"), "{bob}");
    let _: () = q(&mut r, &["SELECT", "5"]).unwrap();
    assert_eq!(strs(&mut r, &["MGET", "in5"]), ["y"]);
    let _: () = q(&mut r, &["SELECT", "0"]).unwrap();

    // The replica refuses its clients' writes, in and out of MULTI.
    assert_eq!(
        err_text(q::<()>(&mut r, &["SET", "x", "1"])),
        "READONLY You can't write against a read only replica."
    );
    let e = err_text(
        redis::pipe()
            .atomic()
            .cmd("SET")
            .arg("x")
            .arg("1")
            .query::<()>(&mut r),
    );
    assert!(e.contains("read only replica"), "{e}");
    // Unless replica-read-only is off.
    let _: () = q(&mut r, &["CONFIG", "SET", "replica-read-only", "no"]).unwrap();
    let _: () = q(&mut r, &["SET", "local", "1"]).unwrap();
    let _: () = q(&mut r, &["CONFIG", "SET", "replica-read-only", "yes"]).unwrap();

    // WAIT counts the replica once it acknowledged the write.
    let _: () = q(&mut m, &["SET", "w", "1"]).unwrap();
    assert_eq!(int(&mut m, &["WAIT", "1", "5000"]), 1);
    assert_eq!(int(&mut m, &["WAIT", "2", "100"]), 1);

    // ROLE on both sides.
    let role: Vec<redis::Value> = q(&mut m, &["ROLE"]).unwrap();
    assert_eq!(role.len(), 3);
    assert_eq!(
        info_value(&mut m, "replication", "connected_slaves").as_deref(),
        Some("1")
    );
    let line = info_value(&mut m, "replication", "slave0").unwrap();
    assert!(line.contains("state=online"), "{line}");
    assert!(line.contains(&format!("port={},", replica.port)), "{line}");
    let role: Vec<redis::Value> = q(&mut r, &["ROLE"]).unwrap();
    assert_eq!(role.len(), 5);

    // Promoted, it writes and keeps its data.
    let _: () = q(&mut r, &["REPLICAOF", "NO", "ONE"]).unwrap();
    assert_eq!(
        info_value(&mut r, "replication", "role").as_deref(),
        Some("master")
    );
    let _: () = q(&mut r, &["SET", "x", "1"]).unwrap();
    assert_eq!(strs(&mut r, &["MGET", "k"]), ["v"]);
}

#[test]
fn a_dropped_link_resumes_with_a_partial_resync() {
    let master = TestServer::start(&[]);
    let replica = TestServer::start(&[]);
    let mut m = master.conn();
    let mut r = replica.conn();
    let _: () = q(&mut m, &["SET", "a", "1"]).unwrap();
    replicate(&mut r, &master);
    assert!(caught_up(&mut m, &mut r));
    assert_eq!(
        info_value(&mut m, "stats", "sync_full").as_deref(),
        Some("1")
    );
    // The master drops the replica's connection; meanwhile more writes.
    let _: i64 = q(&mut m, &["CLIENT", "KILL", "TYPE", "replica"]).unwrap_or(0);
    let _: () = q(&mut m, &["SET", "b", "2"]).unwrap();
    assert!(eventually(10.0, || info_value(
        &mut m,
        "stats",
        "sync_partial_ok"
    )
    .as_deref()
        == Some("1")));
    assert!(caught_up(&mut m, &mut r));
    assert_eq!(strs(&mut r, &["MGET", "a", "b"]), ["1", "2"]);
    assert_eq!(
        info_value(&mut m, "stats", "sync_full").as_deref(),
        Some("1")
    );

    // A replica process started again (replicaof in its config) gets everything anew.
    let port = master.port.to_string();
    let again = TestServer::start(&["--replicaof", "127.0.0.1", &port]);
    let mut r2 = again.conn();
    assert!(eventually(10.0, || info_value(
        &mut r2,
        "replication",
        "master_link_status"
    )
    .as_deref()
        == Some("up")));
    assert!(caught_up(&mut m, &mut r2));
    assert_eq!(strs(&mut r2, &["MGET", "a", "b"]), ["1", "2"]);

    // min-replicas-to-write counts the replicas that acknowledge: two now, then one.
    let _: () = q(&mut m, &["CONFIG", "SET", "min-replicas-to-write", "2"]).unwrap();
    assert!(eventually(5.0, || q::<()>(&mut m, &["SET", "c", "3"]).is_ok()));
    let _: () = q(&mut r2, &["REPLICAOF", "NO", "ONE"]).unwrap();
    assert!(eventually(5.0, || {
        match q::<()>(&mut m, &["SET", "c", "4"]) {
            Ok(()) => false,
            Err(e) => e.to_string().contains("Not enough good replicas"),
        }
    }));
    let _: () = q(&mut m, &["CONFIG", "SET", "min-replicas-to-write", "1"]).unwrap();
    assert!(eventually(5.0, || q::<()>(&mut m, &["SET", "c", "5"]).is_ok()));
}

#[test]
fn a_wrong_masterauth_keeps_the_link_down() {
    let master = TestServer::start(&["--requirepass", "secret"]);
    let replica = TestServer::start(&["--masterauth", "wrong"]);
    let mut r = replica.conn();
    let _: () = q(
        &mut r,
        &["REPLICAOF", "127.0.0.1", &master.port.to_string()],
    )
    .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    assert_eq!(
        info_value(&mut r, "replication", "master_link_status").as_deref(),
        Some("down")
    );
    let _: () = q(&mut r, &["CONFIG", "SET", "masterauth", "secret"]).unwrap();
    assert!(eventually(10.0, || info_value(
        &mut r,
        "replication",
        "master_link_status"
    )
    .as_deref()
        == Some("up")));
}

/// `REPLICAOF NO ONE` then `REPLICAOF` the same master again: the new link comes up and
/// stays up when the old link's task ends late (it sees the master's next write and only
/// then notices it is no longer current) — it must not mark the new link down.
#[test]
fn a_link_replaced_by_a_new_replicaof_keeps_the_new_link_up() {
    let master = TestServer::start(&[]);
    let replica = TestServer::start(&[]);
    let mut m = master.conn();
    let mut r = replica.conn();
    replicate(&mut r, &master);
    let _: String = q(&mut r, &["REPLICAOF", "NO", "ONE"]).unwrap();
    let _: () = q(&mut m, &["SET", "while-apart", "1"]).unwrap();
    replicate(&mut r, &master);
    // The old link wakes up on this write's bytes, if it still listens, and ends.
    let _: () = q(&mut m, &["SET", "after", "2"]).unwrap();
    assert!(caught_up(&mut m, &mut r), "the replica did not catch up");
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(
        info_value(&mut r, "replication", "master_link_status").as_deref(),
        Some("up")
    );
    let role: Vec<redis::Value> = q(&mut r, &["ROLE"]).unwrap();
    assert_eq!(
        role.get(3),
        Some(&redis::Value::BulkString(b"connected".to_vec()))
    );
    assert_eq!(strs(&mut r, &["MGET", "while-apart", "after"]), ["1", "2"]);
}

/// `replica-serve-stale-data no`: while the link is down, commands not flagged `stale` get
/// Redis's `-MASTERDOWN` (EXEC its EXECABORT), `stale` ones (INFO, CONFIG, REPLICAOF) still run.
#[test]
fn a_replica_with_a_down_link_refuses_stale_reads_when_asked() {
    let replica = TestServer::start(&[]);
    let mut r = replica.conn();
    let _: () = q(&mut r, &["SET", "k", "v"]).unwrap();
    // Nothing listens on the port of a server that was started and stopped.
    let gone = TestServer::start(&[]);
    let port = gone.port.to_string();
    drop(gone);
    let _: String = q(&mut r, &["REPLICAOF", "127.0.0.1", &port]).unwrap();
    // Served stale by default, as Redis.
    assert_eq!(strs(&mut r, &["MGET", "k"]), ["v"]);
    // A transaction queued while stale reads were allowed, executed after they no longer are.
    let mut t = replica.conn();
    let _: () = q(&mut t, &["MULTI"]).unwrap();
    let _: String = q(&mut t, &["GET", "k"]).unwrap();
    let _: () = q(&mut r, &["CONFIG", "SET", "slave-serve-stale-data", "no"]).unwrap();
    let masterdown =
        "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.";
    assert_eq!(
        err_text(q::<Vec<String>>(&mut t, &["EXEC"])),
        format!("EXECABORT Transaction discarded because of: {masterdown}")
    );
    assert_eq!(err_text(q::<String>(&mut r, &["GET", "k"])), masterdown);
    // PING is not flagged stale in Redis either.
    assert_eq!(err_text(q::<String>(&mut r, &["PING"])), masterdown);
    assert!(info_value(&mut r, "replication", "master_link_status").as_deref() == Some("down"));
    // Inside MULTI the refused command flags the transaction.
    let _: () = q(&mut r, &["MULTI"]).unwrap();
    assert_eq!(err_text(q::<String>(&mut r, &["GET", "k"])), masterdown);
    assert_eq!(
        err_text(q::<Vec<String>>(&mut r, &["EXEC"])),
        "EXECABORT Transaction discarded because of previous errors."
    );
    let _: () = q(
        &mut r,
        &["CONFIG", "SET", "replica-serve-stale-data", "yes"],
    )
    .unwrap();
    assert_eq!(strs(&mut r, &["MGET", "k"]), ["v"]);
}

/// `redis.set_repl` in a script: writes after `REPL_NONE` go nowhere, after `REPL_AOF` only
/// to the journal, after `REPL_ALL` to both (Redis's selective replication); a restart
/// from the journal gives back what it was sent.
#[test]
fn set_repl_sends_a_scripts_writes_where_it_says() {
    let dir = std::env::temp_dir().join(format!("tidecache-setrepl-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let d = dir.to_str().unwrap();
    let master = TestServer::start(&["--dir", d, "--appendonly", "yes"]);
    let replica = TestServer::start(&[]);
    let mut m = master.conn();
    let mut r = replica.conn();
    replicate(&mut r, &master);
    let script = "redis.call('set','a','1') \
        redis.set_repl(redis.REPL_NONE) redis.call('set','b','2') \
        redis.set_repl(redis.REPL_AOF) redis.call('set','c','3') \
        redis.set_repl(redis.REPL_ALL) redis.call('set','d','4')";
    let _: () = q(&mut m, &["EVAL", script, "0"]).unwrap();
    // The next script starts with both destinations again.
    let _: () = q(&mut m, &["EVAL", "redis.call('set','e','5')", "0"]).unwrap();
    assert!(caught_up(&mut m, &mut r), "the replica did not catch up");
    let got: Vec<Option<String>> = q(&mut r, &["MGET", "a", "b", "c", "d", "e"]).unwrap();
    let want = |v: &[Option<&str>]| v.iter().map(|x| x.map(String::from)).collect::<Vec<_>>();
    assert_eq!(got, want(&[Some("1"), None, None, Some("4"), Some("5")]));
    let got: Vec<Option<String>> = q(&mut m, &["MGET", "a", "b", "c", "d", "e"]).unwrap();
    assert_eq!(
        got,
        want(&[Some("1"), Some("2"), Some("3"), Some("4"), Some("5")])
    );
    drop(m);
    drop(master);
    let master = TestServer::start(&["--dir", d, "--appendonly", "yes"]);
    let mut m = master.conn();
    let got: Vec<Option<String>> = q(&mut m, &["MGET", "a", "b", "c", "d", "e"]).unwrap();
    assert_eq!(
        got,
        want(&[Some("1"), None, Some("3"), Some("4"), Some("5")])
    );
    drop(m);
    drop(master);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A full sync carries the master's function libraries to a read-only replica: loading them
/// is the sync's own work, not a client's write (it used to fail with READONLY).
#[test]
fn a_full_sync_loads_the_masters_functions_on_a_read_only_replica() {
    let master = TestServer::start(&[]);
    let replica = TestServer::start(&[]);
    let mut m = master.conn();
    let mut r = replica.conn();
    replicate(&mut r, &master);
    let _: String = q(&mut r, &["REPLICAOF", "NO", "ONE"]).unwrap();
    let code = "#!lua name=lib\nredis.register_function{function_name='hi', callback=function() return 'hello' end, flags={'no-writes'}}";
    let _: String = q(&mut m, &["FUNCTION", "LOAD", code]).unwrap();
    replicate(&mut r, &master);
    assert!(caught_up(&mut m, &mut r), "the replica did not catch up");
    let hi: String = q(&mut r, &["FCALL", "hi", "0"]).unwrap();
    assert_eq!(hi, "hello");
    assert!(err_text(q::<String>(&mut r, &["FUNCTION", "DELETE", "lib"])).starts_with("READONLY"));
}

/// Scripts on a replica follow their flags as Redis's do: one that may write is refused on
/// a read-only replica (and a flagless EVAL's first write), and with
/// replica-serve-stale-data no and the link down only allow-stale scripts run, calling only
/// commands flagged stale.
#[test]
fn scripts_on_a_replica_follow_their_flags() {
    let master = TestServer::start(&[]);
    let replica = TestServer::start(&[]);
    let mut m = master.conn();
    let mut r = replica.conn();
    let lib = "#!lua name=lib
redis.register_function('w', function() return redis.call('set', 'x', '1') end)
redis.register_function{function_name='f1', callback=function() return 'hello' end, flags={'no-writes'}}
redis.register_function{function_name='f2', callback=function() return 'hello' end, flags={'allow-stale', 'no-writes'}}
redis.register_function{function_name='f3', callback=function() return redis.call('get', 'x') end, flags={'allow-stale', 'no-writes'}}
redis.register_function{function_name='f4', callback=function() return redis.call('info', 'server') end, flags={'allow-stale', 'no-writes'}}";
    let _: String = q(&mut m, &["FUNCTION", "LOAD", lib]).unwrap();
    replicate(&mut r, &master);
    assert!(caught_up(&mut m, &mut r), "the replica did not catch up");
    let readonly = "READONLY You can't write against a read only replica.";
    assert_eq!(
        err_text(q::<String>(&mut r, &["FCALL", "w", "0"])),
        readonly
    );
    let e = err_text(q::<String>(
        &mut r,
        &["EVAL", "return redis.call('set','y','1')", "0"],
    ));
    assert!(e.starts_with("READONLY You can't write"), "{e}");
    let hello: String = q(&mut r, &["FCALL", "f1", "0"]).unwrap();
    assert_eq!(hello, "hello");
    assert_eq!(int(&mut r, &["EXISTS", "x", "y"]), 0);
    // Stale.
    let _: () = q(&mut r, &["CONFIG", "SET", "replica-serve-stale-data", "no"]).unwrap();
    drop(m);
    drop(master);
    assert!(
        eventually(10.0, || info_value(
            &mut r,
            "replication",
            "master_link_status"
        )
        .as_deref()
            == Some("down")),
        "the link stayed up"
    );
    let e = err_text(q::<String>(&mut r, &["FCALL", "f1", "0"]));
    assert!(e.starts_with("MASTERDOWN"), "{e}");
    let hello: String = q(&mut r, &["FCALL", "f2", "0"]).unwrap();
    assert_eq!(hello, "hello");
    let e = err_text(q::<String>(&mut r, &["FCALL", "f3", "0"]));
    assert!(
        e.contains("Can not execute the command on a stale replica"),
        "{e}"
    );
    let info: String = q(&mut r, &["FCALL", "f4", "0"]).unwrap();
    assert!(info.contains("redis_version"), "{info}");
}

/// Redis 7.0's "MULTI propagation of PUBLISH" (unit/multi): PUBLISH reaches the replication
/// stream in its client's database like any propagated command, so a stream that has not
/// selected it yet (as after a full sync) sends SELECT first.
#[test]
fn publish_in_the_stream_comes_after_its_select() {
    let master = TestServer::start(&[]);
    let mut r = sync_stream(&master);
    let mut c = master.conn();
    let _: String = q(&mut c, &["SELECT", "9"]).unwrap();
    let _: String = q(&mut c, &["MULTI"]).unwrap();
    let _: String = q(&mut c, &["PUBLISH", "bla", "bla"]).unwrap();
    let _: Vec<i64> = q(&mut c, &["EXEC"]).unwrap();
    let stream = r.read_until(b"*3\r\n$7\r\nPUBLISH\r\n$3\r\nbla\r\n$3\r\nbla\r\n");
    assert!(
        stream.ends_with(
            b"*2\r\n$6\r\nSELECT\r\n$1\r\n9\r\n*3\r\n$7\r\nPUBLISH\r\n$3\r\nbla\r\n$3\r\nbla\r\n"
        ),
        "stream: {}",
        String::from_utf8_lossy(&stream)
    );
}

/// Redis 7.0's "GETEX propagate as to replica as PERSIST, DEL, or nothing" (unit/expire):
/// GETEX PERSIST goes as PERSIST, a plain GETEX as nothing, and GETEX EXAT in the past,
/// which deletes the key, as DEL.
#[test]
fn getex_reaches_the_stream_as_persist_del_or_nothing() {
    let master = TestServer::start(&[]);
    let mut r = sync_stream(&master);
    let mut c = master.conn();
    let _: String = q(&mut c, &["SET", "foo", "bar", "EX", "100"]).unwrap();
    let _: String = q(&mut c, &["GETEX", "foo", "PERSIST"]).unwrap();
    let _: String = q(&mut c, &["GETEX", "foo"]).unwrap();
    let past = (std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        - 100)
        .to_string();
    let _: String = q(&mut c, &["GETEX", "foo", "EXAT", &past]).unwrap();
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "foo"]).unwrap(), 0);
    let _: String = q(&mut c, &["SET", "end", "x"]).unwrap();
    let stream = r.read_until(b"$3\r\nend\r\n$1\r\nx\r\n");
    let text = String::from_utf8_lossy(&stream);
    let tail = text.split_once("PXAT").expect("SET … PXAT").1;
    assert!(
        tail.ends_with(
            "*2\r\n$7\r\nPERSIST\r\n$3\r\nfoo\r\n*2\r\n$3\r\nDEL\r\n$3\r\nfoo\r\n*3\r\n$3\r\nSET\r\n$3\r\nend\r\n$1\r\nx\r\n"
        ),
        "stream: {text}"
    );
}

/// A raw connection that sent SYNC and read the snapshot: what follows is the stream.
fn sync_stream(master: &TestServer) -> Raw {
    let mut r = master.raw();
    r.send(b"SYNC\r\n");
    // "\n" keep-alives may come first, then `$<len>` and the RDB.
    let mut line = Vec::new();
    while !line.ends_with(b"\r\n") {
        let b = r.read_n(1);
        assert!(!b.is_empty(), "no sync payload");
        if !(line.is_empty() && b[0] == b'\n') {
            line.extend(b);
        }
    }
    let len: usize = std::str::from_utf8(&line[1..line.len() - 2])
        .unwrap()
        .parse()
        .expect("$<len>");
    assert_eq!(r.read_n(len).len(), len);
    r
}

/// A replica's INFO reports the replica-priority it has (what Sentinel reads to choose or
/// never choose it).
#[test]
fn a_replica_reports_its_priority() {
    let master = TestServer::start(&[]);
    let replica = TestServer::start(&["--replica-priority", "7"]);
    let mut r = replica.conn();
    support::replicate(&mut r, &master);
    assert_eq!(
        support::info_value(&mut r, "replication", "slave_priority").as_deref(),
        Some("7")
    );
    let _: String = support::q(&mut r, &["CONFIG", "SET", "replica-priority", "0"]).unwrap();
    assert_eq!(
        support::info_value(&mut r, "replication", "slave_priority").as_deref(),
        Some("0")
    );
}

/// replica-announce-ip / -port: the master lists the replica by the address it announces
/// (INFO replication, ROLE), as Sentinel then finds it; replica-announced shows in INFO.
#[test]
fn a_replica_is_listed_by_its_announced_address() {
    let master = TestServer::start(&[]);
    let replica = TestServer::start(&[
        "--replica-announce-ip",
        "10.1.2.3",
        "--replica-announce-port",
        "4444",
        "--replica-announced",
        "no",
    ]);
    let mut r = replica.conn();
    support::replicate(&mut r, &master);
    let mut m = master.conn();
    assert!(
        eventually(5.0, || support::info_value(&mut m, "replication", "slave0")
            .is_some_and(|v| v.starts_with("ip=10.1.2.3,port=4444,"))),
        "{:?}",
        support::info_value(&mut m, "replication", "slave0")
    );
    assert_eq!(
        support::info_value(&mut r, "replication", "replica_announced").as_deref(),
        Some("0")
    );
    // The backlog the replica reads from is measured in MEMORY STATS.
    for i in 0..100 {
        let _: () = support::q(&mut m, &["SET", &format!("k{i}"), "v"]).unwrap();
    }
    let stats: Vec<redis::Value> = support::q(&mut m, &["MEMORY", "STATS"]).unwrap();
    let backlog = stats
        .chunks(2)
        .find(|kv| matches!(&kv[0], redis::Value::BulkString(k) if k == b"replication.backlog"))
        .and_then(|kv| match kv[1] {
            redis::Value::Int(n) => Some(n),
            _ => None,
        })
        .expect("replication.backlog");
    assert!(backlog > 0, "{backlog}");
}

/// INFO replication's field as an integer (0 when missing).
fn info_int(c: &mut redis::Connection, section: &str, field: &str) -> i64 {
    info_value(c, section, field)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// A chain master ← replica ← sub-replica: the sub-replica follows the master's history
/// (its replication ID and offsets), whether it joins by a full sync in the middle of the
/// stream (in database 9, which the proxied stream cannot name again: the snapshot's
/// `repl-stream-db` does) or continues after a dropped link.
#[test]
fn a_replica_serves_a_replica_of_its_own_with_the_masters_stream() {
    let master = TestServer::start(&[]);
    let middle = TestServer::start(&[]);
    let last = TestServer::start(&[]);
    let (mut m, mut b, mut c) = (master.conn(), middle.conn(), last.conn());
    // A replica without its link up refuses replicas of its own, as Redis's.
    let _: String = q(&mut b, &["REPLICAOF", "127.0.0.1", "1"]).unwrap();
    let mut raw = middle.raw();
    raw.roundtrip(
        b"PSYNC ? -1\r\n",
        b"-NOMASTERLINK Can't SYNC while not connected with my master\r\n",
    );
    replicate(&mut b, &master);
    let _: () = q(&mut m, &["SELECT", "9"]).unwrap();
    let _: () = q(&mut m, &["SET", "before", "1"]).unwrap();
    assert!(caught_up(&mut m, &mut b));
    replicate(&mut c, &middle);
    // After the sub-replica's snapshot, without another SELECT in the stream.
    let _: () = q(&mut m, &["SET", "after", "2"]).unwrap();
    let (n,): (i64,) = redis::pipe()
        .atomic()
        .cmd("INCR")
        .arg("counter")
        .query(&mut m)
        .unwrap();
    assert_eq!(n, 1);
    assert!(caught_up(&mut m, &mut c));
    let _: () = q(&mut c, &["SELECT", "9"]).unwrap();
    assert_eq!(
        strs(&mut c, &["MGET", "before", "after", "counter"]),
        ["1", "2", "1"]
    );
    assert_eq!(
        info_value(&mut c, "replication", "master_replid"),
        info_value(&mut m, "replication", "master_replid")
    );
    assert_eq!(
        info_int(&mut b, "replication", "connected_slaves"),
        1,
        "the middle replica lists its replica"
    );
    // The middle one drops its replica, which continues from its backlog.
    let _: i64 = q(&mut b, &["CLIENT", "KILL", "TYPE", "replica"]).unwrap();
    let _: () = q(&mut m, &["SET", "later", "3"]).unwrap();
    assert!(eventually(10.0, || info_int(
        &mut b,
        "stats",
        "sync_partial_ok"
    ) == 1));
    assert!(caught_up(&mut m, &mut c));
    assert_eq!(strs(&mut c, &["MGET", "later"]), ["3"]);
    assert_eq!(info_int(&mut b, "stats", "sync_full"), 1);
}

/// A promoted replica keeps the history it followed (master_replid2 up to
/// second_repl_offset): the old master and the other replica follow it with a partial
/// resynchronisation, and the writes made on it reach both.
#[test]
fn a_promoted_replica_lets_the_others_continue_with_a_partial_resync() {
    let master = TestServer::start(&[]);
    let one = TestServer::start(&[]);
    let two = TestServer::start(&[]);
    let (mut m, mut a, mut b) = (master.conn(), one.conn(), two.conn());
    let _: () = q(&mut m, &["SET", "k", "1"]).unwrap();
    replicate(&mut a, &master);
    replicate(&mut b, &master);
    for i in 0..200 {
        let _: () = q(&mut m, &["SET", &format!("key:{i}"), &i.to_string()]).unwrap();
    }
    assert!(caught_up(&mut m, &mut a));
    assert!(caught_up(&mut m, &mut b));
    let old_id = info_value(&mut m, "replication", "master_replid");
    let reached = info_int(&mut m, "replication", "master_repl_offset");

    let _: () = q(&mut a, &["REPLICAOF", "NO", "ONE"]).unwrap();
    assert_eq!(info_value(&mut a, "replication", "master_replid2"), old_id);
    assert_eq!(
        info_int(&mut a, "replication", "second_repl_offset"),
        reached + 1
    );
    let a_server = &one;
    replicate(&mut b, a_server);
    replicate(&mut m, a_server);
    let _: () = q(&mut a, &["SET", "new", "x"]).unwrap();
    assert!(caught_up(&mut a, &mut b));
    assert!(caught_up(&mut a, &mut m));
    for c in [&mut m, &mut b] {
        assert_eq!(strs(c, &["MGET", "k", "key:199", "new"]), ["1", "199", "x"]);
        assert_eq!(
            info_value(c, "replication", "master_replid"),
            info_value(&mut a, "replication", "master_replid")
        );
    }
    assert_eq!(info_int(&mut a, "stats", "sync_full"), 0, "no full resync");
    assert_eq!(info_int(&mut a, "stats", "sync_partial_ok"), 2);
}

/// The same with redis-server 7 on both sides: Redis master ← tidecache ← Redis replica.
/// The Redis replica's snapshot comes from tidecache in the middle of Redis's stream (in
/// database 9); once tidecache is promoted, both Redis servers follow it with a partial
/// resynchronisation.
#[test]
fn a_chain_with_redis_server_on_both_sides_continues_after_a_promotion() {
    let dir = std::env::temp_dir().join(format!("tidecache-chain-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let d = dir.to_string_lossy().to_string();
    let args = ["--dir", d.as_str(), "--repl-diskless-sync-delay", "0"];
    let Some(top) = ReferenceRedis::start_with(&args) else {
        return;
    };
    let Some(bottom) = ReferenceRedis::start_with(&args) else {
        return;
    };
    let middle = TestServer::start(&[]);
    let (mut r, mut t, mut s) = (top.conn(), middle.conn(), bottom.conn());
    let _: () = q(&mut r, &["SELECT", "9"]).unwrap();
    let _: () = q(&mut r, &["SET", "a", "1"]).unwrap();
    support::replicate_port(&mut t, top.port);
    assert!(caught_up(&mut r, &mut t));
    replicate(&mut s, &middle);
    let _: () = q(&mut r, &["SET", "b", "2"]).unwrap();
    let _: i64 = q(&mut r, &["INCR", "a"]).unwrap();
    assert!(caught_up(&mut r, &mut s));
    let _: () = q(&mut s, &["SELECT", "9"]).unwrap();
    assert_eq!(strs(&mut s, &["MGET", "a", "b"]), ["2", "2"]);

    let _: () = q(&mut t, &["REPLICAOF", "NO", "ONE"]).unwrap();
    let _: String = q(
        &mut r,
        &["REPLICAOF", "127.0.0.1", &middle.port.to_string()],
    )
    .unwrap();
    let _: () = q(&mut t, &["SELECT", "9"]).unwrap();
    let _: () = q(&mut t, &["SET", "c", "3"]).unwrap();
    assert!(caught_up(&mut t, &mut r));
    assert!(caught_up(&mut t, &mut s));
    let _: () = q(&mut r, &["SELECT", "9"]).unwrap();
    for c in [&mut r, &mut s] {
        assert_eq!(strs(c, &["MGET", "a", "b", "c"]), ["2", "2", "3"]);
    }
    assert_eq!(info_int(&mut t, "stats", "sync_full"), 1, "only the first");
    assert_eq!(info_int(&mut t, "stats", "sync_partial_ok"), 2);
    let _ = std::fs::remove_dir_all(&dir);
}

/// WAITAOF counts a replica once its journal has the stream on disk (`REPLCONF ACK … FACK`,
/// Redis 7.2): one with its journal on counts, one without never does, and a replica
/// refuses WAITAOF as Redis's does.
#[test]
fn waitaof_counts_replicas_whose_journal_has_the_write_on_disk() {
    let master = TestServer::start(&["--appendonly", "yes", "--dir", &temp_dir("waitaof-m")]);
    let durable = TestServer::start(&["--appendonly", "yes", "--dir", &temp_dir("waitaof-r")]);
    let plain = TestServer::start(&[]);
    let (mut m, mut d, mut p) = (master.conn(), durable.conn(), plain.conn());
    replicate(&mut d, &master);
    replicate(&mut p, &master);
    let _: () = q(&mut m, &["SET", "k", "v"]).unwrap();
    let got: Vec<i64> = q(&mut m, &["WAITAOF", "1", "1", "5000"]).unwrap();
    assert_eq!(got, [1, 1]);
    // Two replicas are asked for: only one journal has it, so the timeout answers.
    let _: () = q(&mut m, &["SET", "k", "w"]).unwrap();
    let got: Vec<i64> = q(&mut m, &["WAITAOF", "0", "1", "5000"]).unwrap();
    assert_eq!(got, [1, 1]);
    let started = std::time::Instant::now();
    let got: Vec<i64> = q(&mut m, &["WAITAOF", "0", "2", "300"]).unwrap();
    assert_eq!(got, [1, 1]);
    assert!(started.elapsed() >= std::time::Duration::from_millis(280));
    let err = q::<Vec<i64>>(&mut d, &["WAITAOF", "0", "0", "0"]).unwrap_err();
    assert!(
        err.to_string()
            .contains("WAITAOF cannot be used with replica instances"),
        "{err}"
    );
}

fn temp_dir(name: &str) -> String {
    let d = std::env::temp_dir().join(format!("tidecache-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d.to_string_lossy().to_string()
}

/// A replica expires nothing itself (Redis's active expiry runs on masters only): keys past
/// their deadline stay counted until its master's DELs arrive.
#[test]
fn a_replicas_keys_leave_by_the_masters_dels_only() {
    let master = TestServer::start(&["--enable-debug-command", "yes"]);
    let replica = TestServer::start(&[]);
    let (mut m, mut r) = (master.conn(), replica.conn());
    replicate(&mut r, &master);
    let _: () = q(&mut m, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]).unwrap();
    for i in 0..20 {
        let _: () = q(&mut m, &["SET", &format!("k{i}"), "v", "PX", "200"]).unwrap();
    }
    assert!(caught_up(&mut m, &mut r));
    std::thread::sleep(std::time::Duration::from_millis(600));
    assert_eq!(
        int(&mut r, &["DBSIZE"]),
        20,
        "the replica swept keys itself"
    );
    // Hidden from reads, still there (DEBUG OBJECT finds it, as in Redis).
    assert_eq!(int(&mut r, &["EXISTS", "k0"]), 0);
    assert_eq!(int(&mut r, &["DBSIZE"]), 20, "a read removed a key");
    // A writable replica's own keys with a deadline do expire there.
    let _: () = q(&mut r, &["CONFIG", "SET", "replica-read-only", "no"]).unwrap();
    let _: () = q(&mut r, &["SET", "mine", "v", "PX", "100"]).unwrap();
    assert!(eventually(5.0, || int(&mut r, &["DBSIZE"]) == 20));
    let _: () = q(&mut m, &["DEBUG", "SET-ACTIVE-EXPIRE", "1"]).unwrap();
    assert!(eventually(10.0, || int(&mut r, &["DBSIZE"]) == 0));
}

/// A restart from an RDB that says where its data stands (`repl-id`, `repl-offset`,
/// `repl-stream-db`, as Redis's rdbSaveInfo): a restarted replica and a restarted master
/// each continue with a partial resynchronisation, in the database the stream had selected.
#[test]
fn a_restart_from_the_rdb_continues_the_replication_history() {
    let (dm, dr) = (temp_dir("restart-m"), temp_dir("restart-r"));
    let master = TestServer::start(&["--dir", &dm, "--save", "900 1"]);
    let mut replica = TestServer::start(&["--dir", &dr, "--save", "900 1"]);
    let (mut m, mut r) = (master.conn(), replica.conn());
    replicate(&mut r, &master);
    let _: () = q(&mut m, &["SELECT", "5"]).unwrap();
    for _ in 0..10 {
        let _: i64 = q(&mut m, &["INCR", "c"]).unwrap();
    }
    assert!(caught_up(&mut m, &mut r));
    replica.signal("-TERM");
    assert_eq!(replica.wait_exit(), Some(0));
    let _: i64 = q(&mut m, &["INCR", "c"]).unwrap();
    let port = master.port.to_string();
    let replica = TestServer::start(&["--dir", &dr, "--replicaof", "127.0.0.1", &port]);
    let mut r = replica.conn();
    assert!(caught_up(&mut m, &mut r));
    let _: () = q(&mut r, &["SELECT", "5"]).unwrap();
    assert_eq!(strs(&mut r, &["MGET", "c"]), ["11"]);
    assert_eq!(info_int(&mut m, "stats", "sync_full"), 1);
    assert_eq!(info_int(&mut m, "stats", "sync_partial_ok"), 1);

    let old_id = info_value(&mut m, "replication", "master_replid");
    let mut master = master;
    master.signal("-TERM");
    assert_eq!(master.wait_exit(), Some(0));
    // Where the replica is: the master's last bytes (the shutdown's GETACK included).
    let reached = info_int(&mut r, "replication", "master_repl_offset");
    let master = TestServer::start(&["--dir", &dm]);
    let mut m = master.conn();
    // A restarted master keeps the file's history as its second one (Redis 7.0).
    assert_eq!(info_value(&mut m, "replication", "master_replid2"), old_id);
    assert_eq!(
        info_int(&mut m, "replication", "second_repl_offset"),
        reached + 1
    );
    assert_ne!(info_value(&mut m, "replication", "master_replid"), old_id);
    replicate(&mut r, &master);
    let _: () = q(&mut m, &["SELECT", "5"]).unwrap();
    let _: i64 = q(&mut m, &["INCR", "c"]).unwrap();
    assert!(caught_up(&mut m, &mut r));
    assert_eq!(strs(&mut r, &["MGET", "c"]), ["12"]);
    assert_eq!(info_int(&mut m, "stats", "sync_full"), 0, "no full resync");
    assert_eq!(info_int(&mut m, "stats", "sync_partial_ok"), 1);
}

/// A master restarting from its file drops the keys that expired while it was down and
/// sends their DELs to its replicas as the first bytes of its new history, so a replica
/// continues with a partial resync and ends with the master's data (Redis's
/// `RDBFLAGS_FEED_REPL`). The file keeps those keys (as Redis's saves do), and a shutdown
/// with its replicas in step sends them no GETACK, so the offset it records is theirs.
#[test]
fn a_restarted_master_sends_the_dels_of_keys_that_expired_while_it_was_down() {
    let dm = temp_dir("expired-m");
    let master = TestServer::start(&[
        "--dir",
        &dm,
        "--save",
        "900 1",
        "--enable-debug-command",
        "yes",
    ]);
    let replica = TestServer::start(&[]);
    let (mut m, mut r) = (master.conn(), replica.conn());
    replicate(&mut r, &master);
    let _: () = q(&mut m, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]).unwrap();
    let _: () = q(&mut m, &["SET", "stay", "1"]).unwrap();
    for j in 0..100 {
        let _: () = q(&mut m, &["SELECT", &(j % 4).to_string()]).unwrap();
        let _: () = q(&mut m, &["SET", &format!("k{j}"), "v", "PX", "10"]).unwrap();
    }
    std::thread::sleep(std::time::Duration::from_millis(50));
    assert!(caught_up(&mut m, &mut r));
    let offset = info_int(&mut m, "replication", "master_repl_offset");
    // The master has the replica's acknowledgement of all of it.
    assert!(eventually(5.0, || info_value(
        &mut m,
        "replication",
        "slave0"
    )
    .is_some_and(|l| l.contains(&format!("offset={offset},")))));
    let mut master = master;
    master.signal("-TERM");
    assert_eq!(master.wait_exit(), Some(0));
    let master = TestServer::start(&["--dir", &dm]);
    let mut m = master.conn();
    assert_eq!(
        info_int(&mut m, "persistence", "rdb_last_load_keys_expired"),
        100
    );
    let fed = info_int(&mut m, "replication", "repl_backlog_histlen");
    assert!(fed > 0);
    assert_eq!(
        info_int(&mut m, "replication", "master_repl_offset"),
        offset + fed
    );
    replicate(&mut r, &master);
    assert!(caught_up(&mut m, &mut r));
    assert_eq!(
        info_int(&mut m, "stats", "sync_partial_ok"),
        1,
        "a partial resync"
    );
    for db in 0..4 {
        let _: () = q(&mut r, &["SELECT", &db.to_string()]).unwrap();
        assert_eq!(int(&mut r, &["DBSIZE"]), i64::from(db == 0), "db {db}");
    }
}

/// CLIENT KILL of a replica's master client ends its link, as Redis frees its master
/// client: the replica reconnects and continues with a partial resync.
#[test]
fn killing_the_master_client_ends_the_link_and_it_resumes() {
    let master = TestServer::start(&[]);
    let replica = TestServer::start(&[]);
    let (mut m, mut r) = (master.conn(), replica.conn());
    replicate(&mut r, &master);
    let _: () = q(&mut m, &["SET", "a", "1"]).unwrap();
    assert!(caught_up(&mut m, &mut r));
    assert_eq!(int(&mut r, &["CLIENT", "KILL", "TYPE", "master"]), 1);
    assert!(
        eventually(10.0, || info_int(&mut m, "stats", "sync_partial_ok") == 1),
        "the replica did not reconnect with a partial resync"
    );
    let _: () = q(&mut m, &["SET", "a", "2"]).unwrap();
    assert!(caught_up(&mut m, &mut r));
    assert_eq!(strs(&mut r, &["MGET", "a"]), ["2"]);
    assert_eq!(info_int(&mut m, "stats", "sync_full"), 1);
}

/// `repl-backlog-ttl`: a master alone for that long frees its backlog and starts a new
/// history, so a replica coming back resyncs in full; the offset goes on.
#[test]
fn a_master_alone_past_the_backlog_ttl_frees_its_backlog() {
    let master = TestServer::start(&["--repl-backlog-ttl", "1"]);
    let replica = TestServer::start(&[]);
    let (mut m, mut r) = (master.conn(), replica.conn());
    replicate(&mut r, &master);
    let _: () = q(&mut m, &["SET", "k", "1"]).unwrap();
    assert!(caught_up(&mut m, &mut r));
    let id = info_value(&mut m, "replication", "master_replid");
    let offset = info_int(&mut m, "replication", "master_repl_offset");
    assert_eq!(info_int(&mut m, "replication", "repl_backlog_active"), 1);
    let _: () = q(&mut r, &["REPLICAOF", "NO", "ONE"]).unwrap();
    assert!(eventually(5.0, || info_int(
        &mut m,
        "replication",
        "repl_backlog_active"
    ) == 0));
    assert_ne!(info_value(&mut m, "replication", "master_replid"), id);
    assert_eq!(
        info_int(&mut m, "replication", "master_repl_offset"),
        offset
    );
    let _: () = q(&mut r, &["SET", "k", "2"]).unwrap();
    replicate(&mut r, &master);
    assert!(caught_up(&mut m, &mut r));
    assert_eq!(strs(&mut r, &["MGET", "k"]), ["1"]);
    assert_eq!(info_int(&mut m, "stats", "sync_full"), 2);
    let _: () = q(&mut m, &["SET", "k", "3"]).unwrap();
    assert!(caught_up(&mut m, &mut r));
    assert_eq!(strs(&mut r, &["MGET", "k"]), ["3"]);
}

/// A redis-server master with diskless sync (Redis 7's default) streams its snapshot with an
/// end mark (`$EOF:<mark>`) to a replica that says `capa eof`: tidecache reads it and then
/// the stream.
#[test]
fn a_replica_takes_a_diskless_masters_streamed_snapshot() {
    let dir = temp_dir("diskless-ref");
    let Some(redis) = ReferenceRedis::start_with(&[
        "--dir",
        &dir,
        "--repl-diskless-sync",
        "yes",
        "--repl-diskless-sync-delay",
        "0",
    ]) else {
        return;
    };
    let replica = TestServer::start(&[]);
    let (mut m, mut r) = (redis.conn(), replica.conn());
    for i in 0..500 {
        let _: () = q(&mut m, &["SET", &format!("key:{i}"), &"x".repeat(i)]).unwrap();
    }
    support::replicate_port(&mut r, redis.port);
    let _: () = q(&mut m, &["SET", "after", "1"]).unwrap();
    assert!(caught_up(&mut m, &mut r));
    assert_eq!(int(&mut r, &["DBSIZE"]), 501);
    assert_eq!(
        strs(&mut r, &["MGET", "key:499", "after"]),
        ["x".repeat(499), "1".into()]
    );
    assert!(
        std::fs::read_dir(&dir).unwrap().next().is_none(),
        "the master wrote a file: the transfer was not diskless"
    );
}

/// `repl-diskless-sync yes` (the default): a replica that says `capa eof` gets the snapshot
/// streamed with an end mark, no file between; one that does not, or with `no`, gets it with
/// its length. Either way it loads.
#[test]
fn a_diskless_master_streams_the_snapshot_to_a_replica_that_reads_it() {
    let master = TestServer::start(&[]);
    let mut m = master.conn();
    let _: () = q(&mut m, &["SET", "k", "v"]).unwrap();
    let head = |capa: bool| {
        let mut raw = master.raw();
        if capa {
            raw.roundtrip(b"REPLCONF capa eof capa psync2\r\n", b"+OK\r\n");
        }
        raw.send(b"PSYNC ? -1\r\n");
        // Bare newlines keep the link alive while a snapshot waits its turn.
        let first = String::from_utf8_lossy(&raw.read_until(b"\r\n")).to_string();
        let first = first.trim_start_matches('\n');
        assert!(first.starts_with("+FULLRESYNC "), "{first}");
        let mut second = raw.read_until(b"\r\n");
        while second.first() == Some(&b'\n') {
            second.remove(0);
        }
        String::from_utf8_lossy(&second).trim_end().to_string()
    };
    let streamed = head(true);
    assert!(
        streamed.starts_with("$EOF:") && streamed.len() == 45,
        "{streamed}"
    );
    assert!(head(false).starts_with('$') && !head(false).starts_with("$EOF:"));
    let _: () = q(&mut m, &["CONFIG", "SET", "repl-diskless-sync", "no"]).unwrap();
    assert!(!head(true).starts_with("$EOF:"));
    let _: () = q(&mut m, &["CONFIG", "SET", "repl-diskless-sync", "yes"]).unwrap();
    // A replica (tidecache, which says capa eof) loads the streamed snapshot, and so does
    // redis-server.
    let replica = TestServer::start(&[]);
    let mut r = replica.conn();
    replicate(&mut r, &master);
    assert!(caught_up(&mut m, &mut r));
    assert_eq!(strs(&mut r, &["MGET", "k"]), ["v"]);
    if let Some(redis) = ReferenceRedis::start() {
        let mut rr = redis.conn();
        replicate(&mut rr, &master);
        assert!(caught_up(&mut m, &mut rr));
        assert_eq!(strs(&mut rr, &["MGET", "k"]), ["v"]);
    }
}

/// MEMORY STATS field `name` (an integer).
fn memory_stat(c: &mut redis::Connection, name: &str) -> i64 {
    let stats: Vec<redis::Value> = q(c, &["MEMORY", "STATS"]).unwrap();
    stats
        .chunks(2)
        .find(|kv| matches!(&kv[0], redis::Value::BulkString(k) if k == name.as_bytes()))
        .and_then(|kv| match kv[1] {
            redis::Value::Int(n) => Some(n),
            _ => None,
        })
        .unwrap_or_else(|| panic!("{name}"))
}

/// MEMORY STATS `clients.slaves` is what the replicas' connections hold on the master (the
/// acknowledgements' input buffer and the chunk of the stream being sent), counted apart
/// from `clients.normal`: 0 without replicas, and at least a streamed value's size once a
/// write of that size went out.
#[test]
fn memory_stats_measures_the_replica_links() {
    let master = TestServer::start(&[]);
    let mut m = master.conn();
    assert_eq!(memory_stat(&mut m, "clients.slaves"), 0);
    let normal_alone = memory_stat(&mut m, "clients.normal");
    let replica = TestServer::start(&[]);
    let mut r = replica.conn();
    support::replicate(&mut r, &master);
    assert!(eventually(5.0, || memory_stat(&mut m, "clients.slaves") > 0));
    // Written on a connection of its own, closed after: its query buffer held the value.
    let mut w = master.conn();
    let value = "x".repeat(300_000);
    let _: () = q(&mut w, &["SET", "big", &value]).unwrap();
    drop(w);
    assert!(caught_up(&mut m, &mut r));
    let slaves = memory_stat(&mut m, "clients.slaves");
    assert!(slaves >= 300_000, "{slaves}");
    // The replica's link is not counted with the normal clients.
    assert!(
        eventually(5.0, || memory_stat(&mut m, "clients.normal")
            < normal_alone + 100_000),
        "{normal_alone} -> {}",
        memory_stat(&mut m, "clients.normal")
    );
    // Gone with the replica.
    let _: () = q(&mut r, &["REPLICAOF", "NO", "ONE"]).unwrap();
    assert!(eventually(5.0, || memory_stat(&mut m, "clients.slaves") == 0));
}

/// propagation-error-behavior: a command of the master's stream that fails on a read-only
/// replica is logged and passed over with `ignore`, and stops the replica with `panic`
/// (DEBUG REPLICATE sends a command to the replicas only).
#[test]
fn a_failing_command_of_the_stream_is_ignored_or_stops_the_replica_as_set() {
    let master = TestServer::start(&["--enable-debug-command", "yes"]);
    let lenient = TestServer::start(&[]);
    let mut strict = TestServer::start(&["--propagation-error-behavior", "panic"]);
    let (mut m, mut l, mut s) = (master.conn(), lenient.conn(), strict.conn());
    replicate(&mut l, &master);
    replicate(&mut s, &master);
    let _: () = q(&mut m, &["DEBUG", "REPLICATE", "fake-command-1"]).unwrap();
    let _: () = q(&mut m, &["SET", "after", "1"]).unwrap();
    assert!(caught_up(&mut m, &mut l));
    assert_eq!(strs(&mut l, &["MGET", "after"]), ["1"]);
    assert_eq!(
        strict.wait_exit(),
        None,
        "the strict replica did not stop on a signal"
    );
}

/// CONFIG REWRITE writes the master the server follows now (REPLICAOF at run time
/// included), so a restart from the file follows it again, as Redis's
/// rewriteConfigReplicaOfOption.
#[test]
fn config_rewrite_keeps_the_master_followed_now() {
    let master = TestServer::start(&[]);
    let dir = temp_dir("rewrite-replicaof");
    let conf = format!("{dir}/tidecache.conf");
    std::fs::write(&conf, "# a replica's file\n").unwrap();
    let replica = TestServer::start_with(Some(&conf), &[]);
    let mut r = replica.conn();
    replicate(&mut r, &master);
    let _: () = q(&mut r, &["CONFIG", "REWRITE"]).unwrap();
    let text = std::fs::read_to_string(&conf).unwrap();
    let line = text.lines().find(|l| l.starts_with("replicaof"));
    assert!(
        line.is_some_and(|l| l.contains(&master.port.to_string())),
        "{text}"
    );
    let _: () = q(&mut r, &["REPLICAOF", "NO", "ONE"]).unwrap();
    let _: () = q(&mut r, &["CONFIG", "REWRITE"]).unwrap();
    let text = std::fs::read_to_string(&conf).unwrap();
    assert!(
        !text
            .lines()
            .any(|l| l.starts_with("replicaof") && l.contains(&master.port.to_string())),
        "{text}"
    );
}

/// min-replicas-to-write is a master's rule: a replica with it set still applies its
/// master's writes (Redis's checkGoodReplicasStatus).
#[test]
fn min_replicas_to_write_is_ignored_by_a_replica() {
    let master = TestServer::start(&[]);
    let replica = TestServer::start(&[
        "--min-replicas-to-write",
        "1",
        "--min-replicas-max-lag",
        "10",
    ]);
    let (mut m, mut r) = (master.conn(), replica.conn());
    replicate(&mut r, &master);
    std::thread::sleep(std::time::Duration::from_millis(1200));
    let _: () = q(&mut m, &["SET", "foo", "bar"]).unwrap();
    assert!(caught_up(&mut m, &mut r));
    assert_eq!(strs(&mut r, &["MGET", "foo"]), ["bar"]);
}

/// repl-diskless-sync-delay holds a diskless transfer back, and
/// repl-diskless-sync-max-replicas ends the wait once that many replicas wait.
#[test]
fn a_diskless_transfer_waits_its_delay_unless_enough_replicas_wait() {
    let timed = |extra: &[&str]| {
        let master = TestServer::start(extra);
        let replica = TestServer::start(&[]);
        let mut r = replica.conn();
        let started = std::time::Instant::now();
        replicate(&mut r, &master);
        started.elapsed()
    };
    let waited = timed(&["--repl-diskless-sync-delay", "2"]);
    assert!(
        waited >= std::time::Duration::from_millis(1900),
        "{waited:?}"
    );
    let early = timed(&[
        "--repl-diskless-sync-delay",
        "2",
        "--repl-diskless-sync-max-replicas",
        "1",
    ]);
    assert!(early < std::time::Duration::from_millis(1500), "{early:?}");
}

/// ROLE shows where a replica's link is: `handshake` while its master holds the transfer
/// back (a long repl-diskless-sync-delay), then `connected`.
#[test]
fn role_shows_the_links_handshake() {
    let master = TestServer::start(&["--repl-diskless-sync-delay", "1000"]);
    let replica = TestServer::start(&[]);
    let mut r = replica.conn();
    let _: String = q(
        &mut r,
        &["REPLICAOF", "127.0.0.1", &master.port.to_string()],
    )
    .unwrap();
    let state = |r: &mut redis::Connection| {
        let role: Vec<redis::Value> = q(r, &["ROLE"]).unwrap();
        match &role[3] {
            redis::Value::BulkString(b) => String::from_utf8_lossy(b).to_string(),
            other => format!("{other:?}"),
        }
    };
    assert!(
        eventually(5.0, || state(&mut r) == "handshake"),
        "{}",
        state(&mut r)
    );
    let mut m = master.conn();
    let _: () = q(&mut m, &["CONFIG", "SET", "repl-diskless-sync-delay", "0"]).unwrap();
    let _: i64 = q(&mut m, &["CLIENT", "KILL", "TYPE", "replica"]).unwrap_or(0);
    assert!(
        eventually(10.0, || state(&mut r) == "connected"),
        "{}",
        state(&mut r)
    );
}

/// GETSET reaches the stream as SET, RPOPLPUSH and BRPOPLPUSH (served at once or after
/// blocking) as RPOPLPUSH, BLMOVE as LMOVE: what Redis 7.0 propagates, so a replica's
/// command statistics match.
#[test]
fn moves_and_getset_reach_the_stream_as_redis_propagates_them() {
    let master = TestServer::start(&[]);
    let mut r = sync_stream(&master);
    let mut c = master.conn();
    let _: Option<String> = q(&mut c, &["GETSET", "k", "v"]).unwrap();
    let _: i64 = q(&mut c, &["RPUSH", "src", "1", "2"]).unwrap();
    let _: String = q(&mut c, &["BRPOPLPUSH", "src", "dst", "1"]).unwrap();
    let _: String = q(&mut c, &["BLMOVE", "src", "dst", "LEFT", "RIGHT", "1"]).unwrap();
    let mut blocked = master.conn();
    let waiter = std::thread::spawn(move || {
        q::<String>(&mut blocked, &["BRPOPLPUSH", "empty", "dst", "5"]).unwrap()
    });
    assert!(eventually(5.0, || info_int(
        &mut c,
        "clients",
        "blocked_clients"
    ) == 1));
    let _: i64 = q(&mut c, &["LPUSH", "empty", "x"]).unwrap();
    assert_eq!(waiter.join().unwrap(), "x");
    let _: String = q(&mut c, &["SET", "end", "x"]).unwrap();
    let stream = r.read_until(b"$3\r\nend\r\n$1\r\nx\r\n");
    let text = String::from_utf8_lossy(&stream).to_string();
    let names: Vec<&str> = text
        .split("\r\n")
        .collect::<Vec<_>>()
        .windows(3)
        .filter(|w| w[0].starts_with('*') && w[1].starts_with('$'))
        .map(|w| w[2])
        .filter(|n| !n.eq_ignore_ascii_case("select"))
        .collect();
    assert_eq!(
        names,
        [
            "SET",
            "RPUSH",
            "RPOPLPUSH",
            "LMOVE",
            "LPUSH",
            "RPOPLPUSH",
            "SET"
        ],
        "{text}"
    );
}

/// A replica that restarts from its file keeps the keys already past their deadline (Redis's
/// rdbLoad when not a master): they leave when its master's DELs come, not before.
#[test]
fn a_restarted_replica_keeps_its_expired_keys_until_the_masters_dels() {
    let dr = temp_dir("restart-expired");
    let master = TestServer::start(&["--enable-debug-command", "yes"]);
    let port = master.port.to_string();
    let args = [
        "--dir",
        &dr,
        "--save",
        "900 1",
        "--replicaof",
        "127.0.0.1",
        &port,
    ];
    let mut replica = TestServer::start(&args);
    let (mut m, mut r) = (master.conn(), replica.conn());
    assert!(eventually(10.0, || info_value(
        &mut r,
        "replication",
        "master_link_status"
    )
    .as_deref()
        == Some("up")));
    for i in 0..10 {
        let _: () = q(&mut m, &["SET", &format!("k{i}"), "v", "PX", "1500"]).unwrap();
    }
    let _: () = q(&mut m, &["SET", "plain", "v"]).unwrap();
    assert!(caught_up(&mut m, &mut r));
    let _: () = q(&mut m, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]).unwrap();
    replica.signal("-TERM");
    assert_eq!(replica.wait_exit(), Some(0));
    std::thread::sleep(std::time::Duration::from_millis(1700));
    let replica = TestServer::start(&args);
    let mut r = replica.conn();
    assert_eq!(int(&mut r, &["DBSIZE"]), 11);
    std::thread::sleep(std::time::Duration::from_millis(800));
    assert_eq!(
        int(&mut r, &["DBSIZE"]),
        11,
        "the replica expired keys itself"
    );
    let _: () = q(&mut m, &["DEBUG", "SET-ACTIVE-EXPIRE", "1"]).unwrap();
    assert!(eventually(10.0, || int(&mut r, &["DBSIZE"]) == 1));
}

/// A replica's full resynchronisation flushes its old data only once clients are held back
/// for the load: a client reading throughout never finds a key that is there before and
/// after.
#[test]
fn a_full_resync_never_shows_an_empty_data_set() {
    let args = ["--enable-debug-command", "yes"];
    let (a, b) = (TestServer::start(&args), TestServer::start(&args));
    for s in [&a, &b] {
        let mut c = s.conn();
        let _: () = q(&mut c, &["DEBUG", "POPULATE", "30000"]).unwrap();
        let _: () = q(&mut c, &["SET", "k", "1"]).unwrap();
    }
    let replica = TestServer::start(&[]);
    let mut r = replica.conn();
    replicate(&mut r, &a);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut reader = replica.conn();
    let done = stop.clone();
    let misses = std::thread::spawn(move || {
        let mut misses = 0;
        while !done.load(std::sync::atomic::Ordering::Relaxed) {
            if let Ok(None) = q::<Option<String>>(&mut reader, &["GET", "k"]) {
                misses += 1;
            }
        }
        misses
    });
    for _ in 0..3 {
        replicate(&mut r, &b);
        replicate(&mut r, &a);
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert_eq!(
        misses.join().unwrap(),
        0,
        "a read found the data set flushed"
    );
}

/// CONFIG RESETSTAT zeroes the replication counters of INFO stats, as Redis's
/// resetServerStats does.
#[test]
fn config_resetstat_zeroes_the_sync_counters() {
    let master = TestServer::start(&[]);
    let replica = TestServer::start(&[]);
    let (mut m, mut r) = (master.conn(), replica.conn());
    replicate(&mut r, &master);
    assert_eq!(info_int(&mut m, "stats", "sync_full"), 1);
    let _: () = q(&mut m, &["CONFIG", "RESETSTAT"]).unwrap();
    for f in ["sync_full", "sync_partial_ok", "sync_partial_err"] {
        assert_eq!(info_int(&mut m, "stats", f), 0, "{f}");
    }
}

fn persistence(c: &mut redis::Connection, field: &str) -> i64 {
    info_int(c, "persistence", field)
}

fn loading_error(c: &mut redis::Connection, args: &[&str]) -> bool {
    match q::<redis::Value>(c, args) {
        Err(e) => e.code() == Some("LOADING"),
        Ok(_) => false,
    }
}

/// `repl-diskless-load swapdb` from another history (a new master): the snapshot comes into
/// memory with clients answered -LOADING (INFO `loading:1`, `async_loading:0`); a transfer
/// cut off leaves the old data whole; a whole one replaces it.
#[test]
fn swapdb_from_another_history_answers_loading_and_keeps_the_old_data_on_failure() {
    let debug = ["--enable-debug-command", "yes"];
    let master = TestServer::start(&debug);
    let replica = TestServer::start(&[
        "--enable-debug-command",
        "yes",
        "--repl-diskless-load",
        "swapdb",
    ]);
    let (mut m, mut r) = (master.conn(), replica.conn());
    let _: () = q(&mut m, &["DEBUG", "POPULATE", "400", "master", "100"]).unwrap();
    let _: () = q(&mut r, &["DEBUG", "POPULATE", "200", "slave", "10"]).unwrap();
    let _: () = q(&mut r, &["SET", "mykey", "myvalue"]).unwrap();
    // 10 ms a key: the transfer takes about 4 s.
    let _: () = q(&mut m, &["CONFIG", "SET", "rdb-key-save-delay", "10000"]).unwrap();
    let _: String = q(
        &mut r,
        &["REPLICAOF", "127.0.0.1", &master.port.to_string()],
    )
    .unwrap();
    assert!(
        eventually(10.0, || persistence(&mut r, "loading") == 1),
        "the replica did not start loading"
    );
    assert_eq!(persistence(&mut r, "async_loading"), 0);
    assert!(loading_error(&mut r, &["GET", "mykey"]));
    // The next sync waits, so the replica is seen between the two.
    let _: () = q(&mut m, &["CONFIG", "SET", "repl-diskless-sync-delay", "5"]).unwrap();
    assert_eq!(int(&mut m, &["CLIENT", "KILL", "TYPE", "replica"]), 1);
    assert!(
        eventually(10.0, || persistence(&mut r, "loading") == 0),
        "the load did not stop"
    );
    assert_eq!(strs(&mut r, &["MGET", "mykey"]), ["myvalue"]);
    assert_eq!(int(&mut r, &["DBSIZE"]), 201);
    let _: () = q(&mut m, &["CONFIG", "SET", "rdb-key-save-delay", "0"]).unwrap();
    let _: () = q(&mut m, &["CONFIG", "SET", "repl-diskless-sync-delay", "0"]).unwrap();
    assert!(eventually(20.0, || {
        info_value(&mut r, "replication", "master_link_status").as_deref() == Some("up")
    }));
    assert!(caught_up(&mut m, &mut r));
    assert_eq!(int(&mut r, &["EXISTS", "mykey"]), 0);
    assert_eq!(int(&mut r, &["DBSIZE"]), 400);
}

/// `repl-diskless-load swapdb` from the same history (a full resync with the master this
/// replica already followed): the old data is served while the snapshot arrives (INFO
/// `async_loading:1`, `loading:0`), only commands flagged no_async_loading are refused,
/// and the new data replaces it at the end.
#[test]
fn swapdb_from_the_same_history_serves_the_old_data_while_loading() {
    let debug = ["--enable-debug-command", "yes"];
    let master = TestServer::start(&debug);
    let replica = TestServer::start(&[
        "--enable-debug-command",
        "yes",
        "--repl-diskless-load",
        "swapdb",
        "--replica-read-only",
        "no",
    ]);
    let (mut m, mut r) = (master.conn(), replica.conn());
    // DEBUG POPULATE is not propagated (as in Redis): the full sync carries the keys.
    let _: () = q(&mut m, &["DEBUG", "POPULATE", "300", "master", "100"]).unwrap();
    replicate(&mut r, &master);
    assert!(caught_up(&mut m, &mut r));
    let _: () = q(&mut r, &["SET", "mykey", "myvalue"]).unwrap();
    let _: () = q(&mut m, &["CONFIG", "SET", "rdb-key-save-delay", "10000"]).unwrap();
    // The link drops and the backlog moves past the replica's offset in one step: the
    // replica must resync in full, with the same replication ID.
    let _: () = q(&mut m, &["CONFIG", "SET", "repl-backlog-size", "16384"]).unwrap();
    let mut tx = redis::pipe();
    tx.atomic()
        .cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("replica");
    for i in 0..10 {
        tx.cmd("SET").arg(format!("big:{i}")).arg("A".repeat(16384));
    }
    let _: redis::Value = tx.query(&mut m).unwrap();
    assert!(
        eventually(10.0, || persistence(&mut r, "async_loading") == 1),
        "the replica did not start an asynchronous load"
    );
    assert_eq!(persistence(&mut r, "loading"), 0);
    assert_eq!(strs(&mut r, &["MGET", "mykey"]), ["myvalue"]);
    assert_eq!(int(&mut r, &["DBSIZE"]), 301);
    assert!(loading_error(&mut r, &["REPLICAOF", "NO", "ONE"]));
    assert!(loading_error(
        &mut r,
        &["CONFIG", "SET", "appendonly", "no"]
    ));
    assert!(eventually(20.0, || {
        persistence(&mut r, "async_loading") == 0
            && info_value(&mut r, "replication", "master_link_status").as_deref() == Some("up")
    }));
    assert!(caught_up(&mut m, &mut r));
    assert_eq!(int(&mut r, &["EXISTS", "mykey"]), 0);
    assert_eq!(int(&mut r, &["DBSIZE"]), 310);
    assert_eq!(info_int(&mut m, "stats", "sync_full"), 2);
}

/// `repl-diskless-load on-empty-db`: an empty replica loads through memory, answering
/// -LOADING from the first byte; one holding data goes through a file and serves its data
/// while the snapshot arrives. Both end with the master's data.
#[test]
fn on_empty_db_loads_through_memory_only_when_nothing_would_be_lost() {
    let master = TestServer::start(&["--enable-debug-command", "yes"]);
    let mut m = master.conn();
    let _: () = q(&mut m, &["DEBUG", "POPULATE", "150"]).unwrap();
    // 10 ms a key: each transfer takes about 1.5 s.
    let _: () = q(&mut m, &["CONFIG", "SET", "rdb-key-save-delay", "10000"]).unwrap();
    for holds_data in [false, true] {
        let replica = TestServer::start(&["--repl-diskless-load", "on-empty-db"]);
        let mut r = replica.conn();
        if holds_data {
            let _: () = q(&mut r, &["SET", "own", "1"]).unwrap();
        }
        let _: String = q(
            &mut r,
            &["REPLICAOF", "127.0.0.1", &master.port.to_string()],
        )
        .unwrap();
        assert!(eventually(10.0, || {
            info_value(&mut r, "replication", "master_sync_in_progress").as_deref() == Some("1")
        }));
        std::thread::sleep(std::time::Duration::from_millis(300));
        if holds_data {
            assert_eq!(persistence(&mut r, "loading"), 0);
            assert_eq!(strs(&mut r, &["MGET", "own"]), ["1"]);
        } else {
            assert_eq!(persistence(&mut r, "loading"), 1);
            assert!(loading_error(&mut r, &["GET", "own"]));
        }
        assert!(eventually(20.0, || {
            info_value(&mut r, "replication", "master_link_status").as_deref() == Some("up")
        }));
        assert_eq!(int(&mut r, &["DBSIZE"]), 150);
    }
}

/// A client blocked on a master that becomes a replica is answered `-UNBLOCKED` (Redis's
/// disconnectAllBlockedClients): were it left waiting, the new master's stream would serve
/// it and the replica's data would part from its master's (Redis issue #2473).
#[test]
fn blocked_clients_are_unblocked_when_the_master_becomes_a_replica() {
    let a = TestServer::start(&[]);
    let b = TestServer::start(&[]);
    let mut blocked = b.conn();
    let waiter = std::thread::spawn(move || {
        q::<Option<Vec<String>>>(&mut blocked, &["BLPOP", "foo", "0"])
            .err()
            .map(|e| e.to_string())
    });
    let mut rb = b.conn();
    assert!(eventually(5.0, || info_int(
        &mut rb,
        "clients",
        "blocked_clients"
    ) == 1));
    replicate(&mut rb, &a);
    let err = waiter
        .join()
        .unwrap()
        .expect("the blocked client got no error");
    assert!(
        err.contains("UNBLOCKED") && err.contains("force unblock from blocking operation, instance state changed (master -> replica?)"),
        "{err}"
    );
    let mut ra = a.conn();
    let _: i64 = q(&mut ra, &["RPUSH", "foo", "a", "b", "c"]).unwrap();
    assert!(caught_up(&mut ra, &mut rb));
    assert_eq!(
        strs(&mut rb, &["LRANGE", "foo", "0", "-1"]),
        ["a", "b", "c"]
    );
}

/// A save cuts the data without touching the replication stream: the database the stream
/// has selected stays selected (Redis keeps `slaveseldb` across BGSAVE and the save after
/// FLUSHALL), so no SELECT appears that the master's clients did not cause.
#[test]
fn a_save_does_not_make_the_stream_select_again() {
    let dir = temp_dir("save-select");
    let master = TestServer::start(&["--dir", &dir, "--save", "900 1"]);
    let mut r = sync_stream(&master);
    let mut c = master.conn();
    let _: () = q(&mut c, &["SELECT", "9"]).unwrap();
    let _: () = q(&mut c, &["SET", "a", "1"]).unwrap();
    let _: String = q(&mut c, &["BGSAVE"]).unwrap();
    assert!(eventually(10.0, || info_int(
        &mut c,
        "persistence",
        "rdb_bgsave_in_progress"
    ) == 0));
    let _: () = q(&mut c, &["SET", "b", "2"]).unwrap();
    // FLUSHALL saves too, with a save schedule.
    let _: () = q(&mut c, &["FLUSHALL"]).unwrap();
    let _: () = q(&mut c, &["SET", "end", "x"]).unwrap();
    let stream = r.read_until(b"$3\r\nend\r\n$1\r\nx\r\n");
    let text = String::from_utf8_lossy(&stream);
    assert_eq!(text.matches("SELECT").count(), 1, "stream: {text}");
    assert!(
        text.starts_with("*2\r\n$6\r\nSELECT\r\n$1\r\n9\r\n"),
        "stream: {text}"
    );
}

/// DEBUG POPULATE adds keys without propagating them (Redis's debug.c: dbAdd, nothing
/// propagated): a replica does not get them from the stream, only from a full sync.
#[test]
fn debug_populate_is_not_propagated() {
    let master = TestServer::start(&["--enable-debug-command", "yes"]);
    let replica = TestServer::start(&[]);
    let (mut m, mut r) = (master.conn(), replica.conn());
    replicate(&mut r, &master);
    let _: () = q(&mut m, &["DEBUG", "POPULATE", "100"]).unwrap();
    let _: () = q(&mut m, &["SET", "after", "1"]).unwrap();
    assert!(caught_up(&mut m, &mut r));
    assert_eq!(int(&mut m, &["DBSIZE"]), 101);
    assert_eq!(int(&mut r, &["DBSIZE"]), 1);
}

/// While a script on the replica runs past busy-reply-threshold, the master's stream waits
/// for it (Redis leaves its master client's input unread meanwhile) instead of being refused
/// -BUSY: every write, a MULTI block's included, reaches the replica once the script ends.
/// `propagation-error-behavior panic` would stop the replica on a refusal.
#[test]
fn the_masters_stream_waits_for_a_busy_script_on_the_replica() {
    let master = TestServer::start(&[]);
    let replica = TestServer::start(&[
        "--busy-reply-threshold",
        "100",
        "--propagation-error-behavior",
        "panic",
    ]);
    let (mut m, mut r) = (master.conn(), replica.conn());
    replicate(&mut r, &master);
    let mut busy = replica.conn();
    let script = std::thread::spawn(move || {
        q::<()>(
            &mut busy,
            &["EVAL", "local t = tonumber(redis.call('TIME')[1]) + 2 while tonumber(redis.call('TIME')[1]) < t do end", "0"],
        )
    });
    assert!(eventually(5.0, || matches!(
        q::<String>(&mut r, &["PING"]),
        Err(e) if e.code() == Some("BUSY")
    )));
    for i in 0..200 {
        let _: () = q(&mut m, &["SET", &format!("k{i}"), &i.to_string()]).unwrap();
    }
    let (a, b): (i64, i64) = redis::pipe()
        .atomic()
        .cmd("INCR")
        .arg("n")
        .cmd("INCR")
        .arg("n")
        .query(&mut m)
        .unwrap();
    assert_eq!((a, b), (1, 2));
    script.join().unwrap().expect("the script ends");
    assert!(caught_up(&mut m, &mut r));
    assert_eq!(int(&mut r, &["DBSIZE"]), 201);
    assert_eq!(strs(&mut r, &["MGET", "k199", "n"]), ["199", "2"]);
}
