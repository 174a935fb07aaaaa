//! Scripts in pipelines: replies in request order, each command seeing the writes of the
//! scripts before it, the caller's database reaching `redis.call`, and a script's state not
//! leaking into the next run (the callbacks are made once per engine, the run's client moved
//! in and out around each run).

mod support;

use support::{resp, TestServer};

const INCR: &str = "return redis.call('INCR', KEYS[1])";

#[test]
fn pipelined_scripts_answer_in_order_and_see_each_other() {
    let s = TestServer::start(&[]);
    let mut r = s.raw();
    let mut req = Vec::new();
    let mut expected = Vec::new();
    for i in 1..=20 {
        req.extend(resp(&["EVAL", INCR, "1", "n"]));
        expected.extend(format!(":{i}\r\n").into_bytes());
        if i % 5 == 0 {
            // A plain command between scripts sees every script before it.
            req.extend(resp(&["GET", "n"]));
            let v = i.to_string();
            expected.extend(format!("${}\r\n{v}\r\n", v.len()).into_bytes());
        }
    }
    // A write before a script is seen by it.
    req.extend(resp(&["SET", "n", "100"]));
    expected.extend(b"+OK\r\n");
    req.extend(resp(&["EVAL", INCR, "1", "n"]));
    expected.extend(b":101\r\n");
    r.roundtrip(&req, &expected);
}

#[test]
fn scripts_run_in_the_callers_database_and_select_does_not_leak() {
    let s = TestServer::start(&[]);
    let mut r = s.raw();
    let mut req = Vec::new();
    req.extend(resp(&["SELECT", "3"]));
    req.extend(resp(&["SET", "k", "three"]));
    // The script's SELECT lasts for its run only.
    req.extend(resp(&[
        "EVAL",
        "local a = redis.call('GET', 'k') redis.call('SELECT', 0) return {a, redis.call('GET', 'k')}",
        "0",
    ]));
    req.extend(resp(&["EVAL", "return redis.call('GET', 'k')", "0"]));
    req.extend(resp(&["GET", "k"]));
    r.roundtrip(
        &req,
        // (A missing key is Lua false, returned as a nil bulk: Redis's conversion.)
        b"+OK\r\n+OK\r\n*2\r\n$5\r\nthree\r\n$-1\r\n$5\r\nthree\r\n$5\r\nthree\r\n",
    );
}

#[test]
fn errors_and_read_only_flags_do_not_carry_over_between_runs() {
    let s = TestServer::start(&[]);
    let mut r = s.raw();
    let mut req = Vec::new();
    // A read-only run refuses a write; the next run, not read-only, may write.
    req.extend(resp(&["EVAL_RO", "return redis.call('SET', 'x', 1)", "0"]));
    req.extend(resp(&["EVAL", "return redis.call('SET', 'x', 1)", "0"]));
    // An error raised by redis.call ends that run only.
    req.extend(resp(&["EVAL", "return redis.call('NOSUCH')", "0"]));
    req.extend(resp(&["EVAL", "return redis.pcall('GET', 'x')", "0"]));
    r.send(&req);
    let got = r.read_until(b"$1\r\n1\r\n");
    let text = String::from_utf8_lossy(&got);
    let lines: Vec<&str> = text.split("\r\n").filter(|l| !l.is_empty()).collect();
    assert!(
        lines[0].starts_with("-ERR Write commands are not allowed from read-only scripts"),
        "{text}"
    );
    assert_eq!(lines[1], "+OK", "{text}");
    assert!(
        lines[2].starts_with("-ERR Unknown Redis command called from script"),
        "{text}"
    );
    assert_eq!(&lines[3..], ["$1", "1"], "{text}");
}
