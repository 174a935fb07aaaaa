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
