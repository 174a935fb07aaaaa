//! A command allowed while a script is busy (HELLO, run without the exec gate) does not
//! serve the clients blocked on keys the running script filled: they are served after the
//! script, with all of its writes (Redis's unit/scripting "Timedout scripts and unblocked
//! command").

mod support;

use std::time::Duration;
use support::{resp, TestServer};

#[test]
fn a_busy_allowed_command_does_not_serve_blocked_clients_mid_script() {
    let s = TestServer::start(&["--enable-debug-command", "yes"]);
    let mut admin = s.raw();
    admin.roundtrip(
        &resp(&["DEBUG", "SET-DISABLE-DENY-SCRIPTS", "1"]),
        b"+OK\r\n",
    );
    admin.roundtrip(
        &resp(&["CONFIG", "SET", "busy-reply-threshold", "10"]),
        b"+OK\r\n",
    );
    let mut waiter = s.raw();
    waiter.send(&resp(&["BLPOP", "x", "0"]));
    std::thread::sleep(Duration::from_millis(100));
    let mut script = s.raw();
    let body = "redis.call('lpush', KEYS[1], 'y')\nwhile true do\n  local c = redis.call('client', 'list')\n  if string.find(c, 'abortscript') ~= nil then break end\nend\nredis.call('lpush', KEYS[1], 'z')\nreturn 1";
    script.send(&resp(&["EVAL", body, "1", "x"]));
    std::thread::sleep(Duration::from_millis(200));
    let mut third = s.raw();
    third.send(&resp(&["HELLO", "2", "SETNAME", "abortscript"]));
    // The waiter pops after the script: its last push.
    waiter.roundtrip(b"", b"*2\r\n$1\r\nx\r\n$1\r\nz\r\n");
    script.roundtrip(b"", b":1\r\n");
}
