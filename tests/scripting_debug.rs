//! SCRIPT DEBUG SYNC, the Lua debugger: a session over a raw connection, its replies byte
//! for byte as redis-server 7.0.15 sends them (the expected bytes were taken from it), Redis's
//! own Tcl cases (protocol parsing, the 100-argument `redis` command), a client leaving
//! mid-session, and other clients waiting while a session holds the server.

mod support;

use std::time::{Duration, Instant};
use support::{q, resp, Raw, TestServer};

/// The debugger's log: an array of status replies.
fn log(lines: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", lines.len()).into_bytes();
    for l in lines {
        out.push(b'+');
        out.extend_from_slice(l.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// A debugger command (a RESP array of its words).
fn cmd(words: &[&str]) -> Vec<u8> {
    resp(words)
}

const SCRIPT: &str = "local t = {1, 'two', x = 3}\nlocal n = tonumber(ARGV[1])\nredis.debug('n is', n)\nredis.call('set', KEYS[1], n)\nreturn redis.call('incr', KEYS[1])\n";

/// Starts a session on `SCRIPT`: SCRIPT DEBUG SYNC, then the EVAL stops before line 1.
fn start_session(s: &TestServer) -> Raw {
    let mut r = s.raw();
    r.roundtrip(&cmd(&["SCRIPT", "DEBUG", "SYNC"]), b"+OK\r\n");
    r.roundtrip(
        &cmd(&["EVAL", SCRIPT, "1", "k", "41"]),
        &log(&[
            "* Stopped at 1, stop reason = step over",
            "-> 1   local t = {1, 'two', x = 3}",
        ]),
    );
    r
}

#[test]
fn step_print_break_list_eval_redis_maxlen_continue() {
    let s = TestServer::start(&[]);
    let mut r = start_session(&s);
    r.roundtrip(
        &cmd(&["s"]),
        &log(&[
            "* Stopped at 2, stop reason = step over",
            "-> 2   local n = tonumber(ARGV[1])",
        ]),
    );
    r.roundtrip(
        &cmd(&["next"]),
        &log(&[
            "* Stopped at 3, stop reason = step over",
            "-> 3   redis.debug('n is', n)",
        ]),
    );
    r.roundtrip(
        &cmd(&["p"]),
        &log(&[
            "<value> t = {[1]=1; [2]=\"two\"; [\"x\"]=3}",
            "<value> n = 41",
        ]),
    );
    r.roundtrip(&cmd(&["p", "n"]), &log(&["<value> 41"]));
    r.roundtrip(&cmd(&["print", "KEYS"]), &log(&["<value> {\"k\"}"]));
    r.roundtrip(&cmd(&["p", "nope"]), &log(&["No such variable."]));
    // redis.debug() logs; a stepped redis.call logs the command and its reply.
    r.roundtrip(
        &cmd(&["s"]),
        &log(&[
            "<debug> line 3: \"n is\", 41",
            "* Stopped at 4, stop reason = step over",
            "-> 4   redis.call('set', KEYS[1], n)",
        ]),
    );
    r.roundtrip(
        &cmd(&["s"]),
        &log(&[
            "<redis> set k 41",
            "<reply> \"+OK\"",
            "* Stopped at 5, stop reason = step over",
            "-> 5   return redis.call('incr', KEYS[1])",
        ]),
    );
    r.roundtrip(
        &cmd(&["l", "1", "1"]),
        &log(&[
            "   1   local t = {1, 'two', x = 3}",
            "   2   local n = tonumber(ARGV[1])",
        ]),
    );
    r.roundtrip(
        &cmd(&["w"]),
        &log(&[
            "   1   local t = {1, 'two', x = 3}",
            "   2   local n = tonumber(ARGV[1])",
            "   3   redis.debug('n is', n)",
            "   4   redis.call('set', KEYS[1], n)",
            "-> 5   return redis.call('incr', KEYS[1])",
        ]),
    );
    r.roundtrip(
        &cmd(&["b", "2"]),
        &log(&[
            "   1   local t = {1, 'two', x = 3}",
            "  #2   local n = tonumber(ARGV[1])",
            "   3   redis.debug('n is', n)",
        ]),
    );
    r.roundtrip(&cmd(&["b", "2"]), &log(&["Wrong line number."]));
    r.roundtrip(
        &cmd(&["b"]),
        &log(&["1 breakpoints set:", "  #2   local n = tonumber(ARGV[1])"]),
    );
    r.roundtrip(&cmd(&["b", "-2"]), &log(&["Breakpoint removed."]));
    r.roundtrip(
        &cmd(&["b", "-2"]),
        &log(&["No breakpoint in the specified line."]),
    );
    r.roundtrip(&cmd(&["b", "9"]), &log(&["Wrong line number."]));
    r.roundtrip(&cmd(&["b", "x"]), &log(&["Invalid argument:'x'"]));
    r.roundtrip(&cmd(&["b", "0"]), &log(&["All breakpoints removed."]));
    r.roundtrip(
        &cmd(&["t"]),
        &log(&["In top level:", "-> 5   return redis.call('incr', KEYS[1])"]),
    );
    r.roundtrip(&cmd(&["e", "1+1"]), &log(&["<retval> 2"]));
    r.roundtrip(
        &cmd(&["eval", "x", "x"]),
        &log(&["<error> ldb_eval:1: '=' expected near 'x'"]),
    );
    r.roundtrip(
        &cmd(&["r", "get", "k"]),
        &log(&["<redis> get k", "<reply> \"41\""]),
    );
    r.roundtrip(
        &cmd(&["redis", "hgetall", "k"]),
        &log(&[
            "<redis> hgetall k",
            "<error> -WRONGTYPE Operation against a key holding the wrong kind of value",
            "<reply> \"-WRONGTYPE Operation against a key holding the wrong kind of value\"",
        ]),
    );
    r.roundtrip(
        &cmd(&["r", "nosuch"]),
        &log(&[
            "<redis> nosuch",
            "<error> Unknown Redis command called from script",
        ]),
    );
    // `redis` needs a command.
    r.roundtrip(
        &cmd(&["r"]),
        &log(&["<error> Unknown Redis Lua debugger command or wrong number of arguments."]),
    );
    r.roundtrip(
        &cmd(&["m"]),
        &log(&["<value> replies are truncated at 256 bytes."]),
    );
    r.roundtrip(&cmd(&["m", "0"]), &log(&["<value> replies are unlimited."]));
    // Below 60 is 60.
    r.roundtrip(
        &cmd(&["maxlen", "10"]),
        &log(&["<value> replies are truncated at 60 bytes."]),
    );
    // Trimmed to 60 bytes, the prefix included.
    let trimmed = format!("<retval> \"{} ...", "a".repeat(50));
    r.roundtrip(&cmd(&["e", "string.rep('a',100)"]), &log(&[&trimmed]));
    // The end: the last log, the EVAL's reply, and the connection is closed.
    r.roundtrip(&cmd(&["c"]), b"*1\r\n+<endsession>\r\n:42\r\n");
    assert!(r.closed(), "the session's connection is closed at its end");
    let mut c = s.conn();
    assert_eq!(q::<String>(&mut c, &["GET", "k"]).expect("reply"), "42");
}

#[test]
fn breakpoints_and_redis_breakpoint_stop_continue() {
    let s = TestServer::start(&[]);
    let mut r = s.raw();
    r.roundtrip(&cmd(&["SCRIPT", "DEBUG", "SYNC"]), b"+OK\r\n");
    let script = "local a = 1\nredis.breakpoint()\nlocal b = 2\nlocal c = 3\nreturn a + b + c";
    r.roundtrip(
        &cmd(&["EVAL", script, "0"]),
        &log(&[
            "* Stopped at 1, stop reason = step over",
            "-> 1   local a = 1",
        ]),
    );
    r.roundtrip(
        &cmd(&["c"]),
        &log(&[
            "* Stopped at 3, stop reason = redis.breakpoint() called",
            "-> 3   local b = 2",
        ]),
    );
    r.roundtrip(
        &cmd(&["b", "5"]),
        &log(&["   4   local c = 3", "  #5   return a + b + c"]),
    );
    r.roundtrip(
        &cmd(&["continue"]),
        &log(&[
            "* Stopped at 5, stop reason = break point",
            "->#5   return a + b + c",
        ]),
    );
    r.roundtrip(&cmd(&["c"]), b"*1\r\n+<endsession>\r\n:6\r\n");
    assert!(r.closed());
}

/// Redis's "Test scripting debug protocol parsing": arguments holding NUL bytes are unknown
/// debugger commands.
#[test]
fn nul_bytes_are_unknown_commands() {
    let s = TestServer::start(&[]);
    let mut r = s.raw();
    r.roundtrip(&cmd(&["SCRIPT", "DEBUG", "SYNC"]), b"+OK\r\n");
    r.roundtrip(
        &cmd(&["EVAL", "return 'hello'", "0"]),
        &log(&[
            "* Stopped at 1, stop reason = step over",
            "-> 1   return 'hello'",
        ]),
    );
    let unknown =
        log(&["<error> Unknown Redis Lua debugger command or wrong number of arguments."]);
    for word in [
        "'hello\0world'",
        "'hello\0'",
        "'\0hello'",
        "'\0hello\0'",
        "s\0",
        "help\0",
    ] {
        r.roundtrip(&cmd(&[word]), &unknown);
    }
    // Still in the session.
    r.roundtrip(&cmd(&["c"]), b"*1\r\n+<endsession>\r\n$5\r\nhello\r\n");
}

/// Redis's "Test scripting debug lua stack overflow": `redis` with 100 arguments answers the
/// script's error, and the server is fine after the client leaves.
#[test]
fn a_hundred_arguments_and_reconnect() {
    let s = TestServer::start(&[]);
    let mut r = s.raw();
    r.roundtrip(&cmd(&["SCRIPT", "DEBUG", "SYNC"]), b"+OK\r\n");
    r.roundtrip(
        &cmd(&["EVAL", "return 'hello'", "0"]),
        &log(&[
            "* Stopped at 1, stop reason = step over",
            "-> 1   return 'hello'",
        ]),
    );
    let mut req = b"*101\r\n$5\r\nredis\r\n".to_vec();
    for _ in 0..100 {
        req.extend_from_slice(b"$4\r\ntest\r\n");
    }
    r.roundtrip(
        &req,
        &log(&[
            "<redis> test test test test test test test test test test ... (89 more)",
            "<error> Unknown Redis command called from script",
        ]),
    );
    drop(r);
    let mut c = s.conn();
    assert_eq!(q::<String>(&mut c, &["PING"]).expect("reply"), "PONG");
}

#[test]
fn abort_keeps_the_writes_made_so_far() {
    let s = TestServer::start(&[]);
    let mut r = s.raw();
    r.roundtrip(&cmd(&["SCRIPT", "DEBUG", "SYNC"]), b"+OK\r\n");
    let script = "redis.call('set', 'a', '1')\nredis.call('set', 'b', '2')";
    r.roundtrip(
        &cmd(&["EVAL", script, "0"]),
        &log(&[
            "* Stopped at 1, stop reason = step over",
            "-> 1   redis.call('set', 'a', '1')",
        ]),
    );
    r.send(&cmd(&["s"]));
    r.read_until(b"-> 2   redis.call('set', 'b', '2')\r\n");
    r.send(&cmd(&["a"]));
    let got = r.read_until(b".\r\n");
    let got = String::from_utf8_lossy(&got);
    assert!(
        got.starts_with("*1\r\n+<endsession>\r\n-ERR script aborted for user request script: "),
        "{got}"
    );
    assert!(r.closed());
    let mut c = s.conn();
    assert_eq!(
        q::<Option<String>>(&mut c, &["GET", "a"]).expect("reply"),
        Some("1".into())
    );
    assert_eq!(
        q::<Option<String>>(&mut c, &["GET", "b"]).expect("reply"),
        None
    );
}

/// A malformed debugger command is a protocol error: the script ends with it.
#[test]
fn protocol_error_ends_the_script() {
    let s = TestServer::start(&[]);
    let mut r = s.raw();
    r.roundtrip(&cmd(&["SCRIPT", "DEBUG", "SYNC"]), b"+OK\r\n");
    r.send(&cmd(&["EVAL", "return 1", "0"]));
    r.read_until(b"-> 1   return 1\r\n");
    // An empty argument is refused by Redis's debugger parser.
    r.send(b"*1\r\n$0\r\n\r\n");
    let got = r.read_until(b".\r\n");
    let got = String::from_utf8_lossy(&got);
    assert!(
        got.starts_with("*1\r\n+<endsession>\r\n-ERR protocol error script: "),
        "{got}"
    );
}

/// A client that leaves mid-session: the script runs on to its end without stopping (as in
/// Redis), its writes all made, and the server serves others again.
#[test]
fn a_client_leaving_mid_session_lets_the_script_finish() {
    let s = TestServer::start(&[]);
    let mut r = s.raw();
    r.roundtrip(&cmd(&["SCRIPT", "DEBUG", "SYNC"]), b"+OK\r\n");
    let script = "redis.call('set', 'x', '1')\nredis.call('incr', 'x')\nredis.call('incr', 'x')";
    r.send(&cmd(&["EVAL", script, "0"]));
    r.read_until(b"-> 1   redis.call('set', 'x', '1')\r\n");
    r.roundtrip(
        &cmd(&["b", "3"]),
        &log(&[
            "   2   redis.call('incr', 'x')",
            "  #3   redis.call('incr', 'x')",
        ]),
    );
    drop(r);
    let mut c = s.conn();
    assert_eq!(q::<String>(&mut c, &["GET", "x"]).expect("reply"), "3");
    assert_eq!(q::<String>(&mut c, &["PING"]).expect("reply"), "PONG");
}

/// An endless loop whose client left: it stops for the timeout (busy-reply-threshold), finds
/// nobody, and is ended with Redis's error; the server serves others again.
#[test]
fn an_endless_loop_without_its_client_is_ended_at_the_timeout() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    q::<()>(&mut c, &["CONFIG", "SET", "busy-reply-threshold", "200"]).expect("config");
    let mut r = s.raw();
    r.roundtrip(&cmd(&["SCRIPT", "DEBUG", "SYNC"]), b"+OK\r\n");
    r.send(&cmd(&[
        "EVAL",
        "redis.call('set', 'y', '1')\nwhile true do end",
        "0",
    ]));
    r.read_until(b"-> 1   redis.call('set', 'y', '1')\r\n");
    r.send(&cmd(&["c"]));
    r.read_until(b"stop reason = timeout reached, infinite loop?\r\n");
    r.read_until(b"-> 2   while true do end\r\n");
    drop(r);
    // The session ended: others are served (not BUSY forever).
    let mut c = s.conn();
    let start = Instant::now();
    loop {
        match q::<String>(&mut c, &["GET", "y"]) {
            Ok(v) => {
                assert_eq!(v, "1");
                break;
            }
            Err(e) => {
                assert!(e.to_string().contains("BUSY"), "{e}");
                assert!(start.elapsed() < Duration::from_secs(5), "still busy");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

/// Other clients wait while a session holds the server (Redis's sync mode), and are served
/// once it ends.
#[test]
fn other_clients_wait_for_the_session() {
    let s = TestServer::start(&[]);
    let mut r = s.raw();
    r.roundtrip(&cmd(&["SCRIPT", "DEBUG", "SYNC"]), b"+OK\r\n");
    r.send(&cmd(&[
        "EVAL",
        "redis.call('set', 'z', 'session')\nreturn 1",
        "0",
    ]));
    r.read_until(b"-> 1   redis.call('set', 'z', 'session')\r\n");
    let mut other = s.raw();
    other.send(&cmd(&["GET", "z"]));
    other
        .0
        .set_read_timeout(Some(Duration::from_millis(300)))
        .ok();
    assert!(
        other.read_n(1).is_empty(),
        "another client was served mid-session"
    );
    r.roundtrip(&cmd(&["c"]), b"*1\r\n+<endsession>\r\n:1\r\n");
    other.0.set_read_timeout(Some(Duration::from_secs(5))).ok();
    assert_eq!(other.read_n(13), b"$7\r\nsession\r\n");
}

#[test]
fn script_debug_modes_and_refusals() {
    let s = TestServer::start(&[]);
    let mut r = s.raw();
    r.roundtrip(
        &cmd(&["SCRIPT", "DEBUG", "MAYBE"]),
        b"-ERR Use SCRIPT DEBUG YES/SYNC/NO\r\n",
    );
    r.send(&cmd(&["SCRIPT", "DEBUG", "YES"]));
    let got = r.read_until(b"\r\n");
    assert!(
        got.starts_with(b"-ERR SCRIPT DEBUG YES"),
        "{}",
        String::from_utf8_lossy(&got)
    );
    // Not in debug mode after a refused YES: scripts run as ever.
    r.roundtrip(
        &cmd(&["EVAL", "return redis.breakpoint()", "0"]),
        b"$-1\r\n",
    );
    r.roundtrip(&cmd(&["EVAL", "redis.debug('x') return 1", "0"]), b":1\r\n");
    r.roundtrip(&cmd(&["SCRIPT", "DEBUG", "SYNC"]), b"+OK\r\n");
    r.roundtrip(
        &cmd(&["EVALSHA", &"a".repeat(40), "0"]),
        b"-ERR Please use EVAL instead of EVALSHA for debugging\r\n",
    );
    // Refused before its run (arity): no session, the connection stays in debug mode.
    r.roundtrip(
        &cmd(&["EVAL", "return 1"]),
        b"-ERR wrong number of arguments for 'eval' command\r\n",
    );
    r.roundtrip(&cmd(&["SCRIPT", "DEBUG", "NO"]), b"+OK\r\n");
    r.roundtrip(&cmd(&["EVAL", "return 7", "0"]), b":7\r\n");
    r.roundtrip(&cmd(&["SCRIPT", "DEBUG", "SYNC"]), b"+OK\r\n");
    // An EVAL whose arguments are wrong is a session that ends at once.
    r.roundtrip(
        &cmd(&["EVAL", "return 1", "x"]),
        b"*1\r\n+<endsession>\r\n-ERR value is not an integer or out of range\r\n",
    );
    assert!(r.closed());
}

/// With more than one I/O thread scripts run on their caller's thread: a session works the
/// same.
#[test]
fn a_session_with_io_threads() {
    let s = TestServer::start(&["--io-threads", "2"]);
    let mut r = s.raw();
    r.roundtrip(&cmd(&["SCRIPT", "DEBUG", "SYNC"]), b"+OK\r\n");
    r.roundtrip(
        &cmd(&["EVAL", "local v = ARGV[1]\nreturn v", "0", "hi"]),
        &log(&[
            "* Stopped at 1, stop reason = step over",
            "-> 1   local v = ARGV[1]",
        ]),
    );
    r.roundtrip(
        &cmd(&["s"]),
        &log(&["* Stopped at 2, stop reason = step over", "-> 2   return v"]),
    );
    r.roundtrip(&cmd(&["p", "v"]), &log(&["<value> \"hi\""]));
    r.roundtrip(&cmd(&["c"]), b"*1\r\n+<endsession>\r\n$2\r\nhi\r\n");
    assert!(r.closed());
}

/// The first trimmed value brings a hint (once); replies after `redis.setresp(3)` are shown
/// in their RESP3 forms.
#[test]
fn maxlen_hint_and_resp3_replies() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    q::<()>(&mut c, &["HSET", "h", "f", "v"]).expect("hset");
    q::<()>(&mut c, &["SADD", "s", "m"]).expect("sadd");
    q::<()>(&mut c, &["ZADD", "z", "1.5", "m"]).expect("zadd");
    let mut r = s.raw();
    r.roundtrip(&cmd(&["SCRIPT", "DEBUG", "SYNC"]), b"+OK\r\n");
    r.roundtrip(
        &cmd(&["EVAL", "redis.setresp(3)\nreturn 1", "0"]),
        &log(&[
            "* Stopped at 1, stop reason = step over",
            "-> 1   redis.setresp(3)",
        ]),
    );
    let a = format!("<retval> \"{} ...", "a".repeat(246));
    r.roundtrip(
        &cmd(&["e", "string.rep('a',300)"]),
        &log(&[
            &a,
            "<hint> The above reply was trimmed. Use 'maxlen 0' to disable trimming.",
        ]),
    );
    let b = format!("<retval> \"{} ...", "b".repeat(246));
    r.roundtrip(&cmd(&["e", "string.rep('b',300)"]), &log(&[&b]));
    r.roundtrip(
        &cmd(&["s"]),
        &log(&["* Stopped at 2, stop reason = step over", "-> 2   return 1"]),
    );
    for (words, reply) in [
        (&["r", "hgetall", "h"][..], "<reply> {\"f\" => \"v\"}"),
        (&["r", "smembers", "s"][..], "<reply> ~(\"m\")"),
        (&["r", "zscore", "z", "m"][..], "<reply> (double) 1.5"),
        (&["r", "get", "nokey"][..], "<reply> (null)"),
        (
            &["r", "zrange", "z", "0", "-1", "withscores"][..],
            "<reply> [[\"m\",(double) 1.5]]",
        ),
    ] {
        let mut logged = String::from("<redis>");
        for w in &words[1..] {
            logged.push(' ');
            logged.push_str(w);
        }
        r.roundtrip(&cmd(words), &log(&[&logged, reply]));
    }
    r.roundtrip(&cmd(&["c"]), b"*1\r\n+<endsession>\r\n:1\r\n");
}
