//! The time a script or a transaction sees for key expiry (Redis 7.0 freezes it for the
//! run), DEBUG OBJECT's raw lookup of a key past its deadline, and EXEC of a queued script
//! that may write on a read-only replica.

mod support;

use support::{err_text, eventually, info_value, int, q, TestServer};

fn expired_keys(c: &mut redis::Connection) -> i64 {
    info_value(c, "stats", "expired_keys")
        .and_then(|v| v.parse().ok())
        .unwrap_or(-1)
}

/// A key that reaches its deadline while a script runs stays alive for the rest of the run,
/// even with the active-expiry sweep running hundreds of times a second meanwhile; after the
/// run it is gone. Both for EVAL and for FCALL.
#[test]
fn a_key_does_not_expire_in_the_middle_of_a_script() {
    let s = TestServer::start(&["--enable-debug-command", "yes"]);
    let mut c = s.conn();
    let _: () = q(&mut c, &["CONFIG", "SET", "hz", "500"]).unwrap();
    // DEBUG is refused in scripts unless this is set (as in Redis's own test).
    let _: () = q(&mut c, &["DEBUG", "SET-DISABLE-DENY-SCRIPTS", "1"]).unwrap();
    let body = "redis.call('SET', KEYS[1], 'value', 'PX', 1)
        redis.call('DEBUG', 'SLEEP', 0.05)
        return redis.call('EXISTS', KEYS[1])";
    let lib =
        format!("#!lua name=t\nredis.register_function('f', function(KEYS, ARGV)\n{body}\nend)");
    let _: String = q(&mut c, &["FUNCTION", "LOAD", &lib]).unwrap();
    for round in 0..3 {
        assert_eq!(int(&mut c, &["EVAL", body, "1", "k"]), 1, "eval {round}");
        assert_eq!(int(&mut c, &["EXISTS", "k"]), 0);
        assert_eq!(int(&mut c, &["FCALL", "f", "1", "k"]), 1, "fcall {round}");
        assert_eq!(int(&mut c, &["EXISTS", "k"]), 0);
    }
    // A key that was already past its deadline when the run started is gone for it.
    let _: () = q(&mut c, &["SET", "old", "v", "PX", "1"]).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(5));
    let gone = "return redis.call('EXISTS', KEYS[1])";
    assert_eq!(int(&mut c, &["EVAL", gone, "1", "old"]), 0);
}

/// MULTI/EXEC too: the commands of a transaction see the time it started (Redis's cached
/// command time).
#[test]
fn a_key_does_not_expire_in_the_middle_of_a_transaction() {
    let s = TestServer::start(&["--enable-debug-command", "yes"]);
    let mut c = s.conn();
    let _: () = q(&mut c, &["CONFIG", "SET", "hz", "500"]).unwrap();
    let reply: Vec<redis::Value> = redis::pipe()
        .atomic()
        .cmd("SET")
        .arg("k")
        .arg("v")
        .arg("PX")
        .arg(1)
        .cmd("DEBUG")
        .arg("SLEEP")
        .arg(0.05)
        .cmd("EXISTS")
        .arg("k")
        .query(&mut c)
        .unwrap();
    assert_eq!(reply[2], redis::Value::Int(1), "{reply:?}");
    assert_eq!(int(&mut c, &["EXISTS", "k"]), 0);
}

/// DEBUG OBJECT finds a key past its deadline that nothing removed yet (Redis's dictFind)
/// and leaves it there; the script that touches it next removes it, as an expiry.
#[test]
fn debug_object_sees_an_expired_key_that_a_script_then_deletes() {
    let s = TestServer::start(&["--enable-debug-command", "yes"]);
    let mut c = s.conn();
    let _: () = q(&mut c, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]).unwrap();
    let _: () = q(&mut c, &["SET", "key", "value", "PX", "1"]).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(5));
    let before = expired_keys(&mut c);
    let line: String = q(&mut c, &["DEBUG", "OBJECT", "key"]).unwrap();
    assert!(line.contains("encoding:embstr"), "{line}");
    // Still there: DEBUG OBJECT did not expire it.
    assert_eq!(expired_keys(&mut c), before);
    assert_eq!(int(&mut c, &["DBSIZE"]), 1);
    let script = "return redis.call('EXISTS', 'key')";
    assert_eq!(int(&mut c, &["EVAL", script, "0"]), 0);
    assert_eq!(expired_keys(&mut c), before + 1);
    assert_eq!(int(&mut c, &["DBSIZE"]), 0);
    assert!(err_text(q::<String>(&mut c, &["DEBUG", "OBJECT", "key"])).contains("no such key"));
}

/// On a read-only replica, a script whose shebang does not say `no-writes` is a write: queued
/// in MULTI while the server was a master, EXEC after it became a replica is discarded with
/// EXECABORT naming READONLY. A script without a shebang is not known to write: EXEC runs it
/// and its write fails inside. A `no-writes` script runs in a transaction on the replica.
#[test]
fn exec_of_a_queued_script_that_may_write_on_a_replica() {
    let master = TestServer::start(&[]);
    let replica = TestServer::start(&[]);
    let mut m = master.conn();
    let mut r = replica.conn();
    let _: () = q(&mut m, &["SET", "x", "some value"]).unwrap();
    let port = master.port.to_string();
    let replicaof = ["REPLICAOF", "127.0.0.1", port.as_str()];
    let link_up = |r: &mut redis::Connection| {
        eventually(10.0, || {
            info_value(r, "replication", "master_link_status").as_deref() == Some("up")
        })
    };
    let _: () = q(&mut r, &replicaof).unwrap();
    assert!(link_up(&mut r), "the link did not come up");

    let no_writes = "#!lua flags=no-writes\nredis.call('get','x')\nreturn 1";
    let reply: Vec<i64> = redis::pipe()
        .atomic()
        .cmd("EVAL")
        .arg(no_writes)
        .arg(1)
        .arg("x")
        .query(&mut r)
        .unwrap();
    assert_eq!(reply, [1]);

    let _: () = q(&mut r, &["REPLICAOF", "NO", "ONE"]).unwrap();
    // EVALSHA of a cached script and FCALL of a function without flags count as writes too.
    let sha: String = q(&mut r, &["SCRIPT", "LOAD", "#!lua\nreturn 1"]).unwrap();
    let lib = "#!lua name=w\nredis.register_function('w', function() return 1 end)";
    let _: String = q(&mut r, &["FUNCTION", "LOAD", lib]).unwrap();
    let mut by_sha = replica.conn();
    let mut by_fcall = replica.conn();
    let _: () = q(&mut by_sha, &["MULTI"]).unwrap();
    let _: String = q(&mut by_sha, &["EVALSHA", &sha, "0"]).unwrap();
    let _: () = q(&mut by_fcall, &["MULTI"]).unwrap();
    let _: String = q(&mut by_fcall, &["FCALL", "w", "0"]).unwrap();
    let mut rr = replica.conn();
    let mut rr2 = replica.conn();
    let _: () = q(&mut rr, &["MULTI"]).unwrap();
    let _: () = q(&mut rr2, &["MULTI"]).unwrap();
    let queued: String = q(&mut rr, &["EVAL", "#!lua\nreturn 1", "0"]).unwrap();
    assert_eq!(queued, "QUEUED");
    let plain = "redis.call('set','x',1)\nreturn 1";
    let queued: String = q(&mut rr2, &["EVAL", plain, "1", "x"]).unwrap();
    assert_eq!(queued, "QUEUED");
    let _: () = q(&mut r, &replicaof).unwrap();
    let e = err_text(q::<redis::Value>(&mut rr, &["EXEC"]));
    assert!(e.contains("EXECABORT") && e.contains("READONLY"), "{e}");
    for c in [&mut by_sha, &mut by_fcall] {
        let e = err_text(q::<redis::Value>(c, &["EXEC"]));
        assert!(e.contains("EXECABORT") && e.contains("READONLY"), "{e}");
    }
    // The transaction is over: a second EXEC has no MULTI.
    assert!(err_text(q::<redis::Value>(&mut rr, &["EXEC"])).contains("EXEC without MULTI"));
    let e = err_text(q::<redis::Value>(&mut rr2, &["EXEC"]));
    assert!(
        e.contains("READONLY You can't write against a read only replica. script:"),
        "{e}"
    );
    assert!(link_up(&mut r));
    let v: String = q(&mut r, &["GET", "x"]).unwrap();
    assert_eq!(v, "some value");
}
