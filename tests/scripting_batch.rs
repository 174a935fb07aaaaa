//! Consecutive script requests of one read go to the script thread as one batch (one I/O
//! thread on the current-thread runtime): each still runs on its own, replies and errors in order, the
//! commands around the batch keep their place, and a batch cut short by a protocol error
//! answers what came before it. Also KEYS/ARGV as `eval_run` builds them (pushed onto the
//! stack) against the tables built in Rust (more than six, or not UTF-8).

mod support;

use support::{resp, TestServer};

/// The batch hand-off is the current-thread runtime's (`io-threads 1` in a build without
/// tokio_unstable); the default one-worker runtime runs scripts inline, so these tests ask
/// for the current-thread runtime (the server inherits the variable).
fn start() -> TestServer {
    std::env::set_var("TIDECACHE_CURRENT_THREAD", "1");
    TestServer::start(&[])
}

const INCR: &str = "return redis.call('INCR', KEYS[1])";

fn resp_bytes(args: &[&[u8]]) -> Vec<u8> {
    let mut v = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        v.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        v.extend_from_slice(a);
        v.extend_from_slice(b"\r\n");
    }
    v
}

#[test]
fn a_batch_of_scripts_answers_each_in_order_with_its_own_errors() {
    let s = start();
    let mut c = s.conn();
    let sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(INCR)
        .query(&mut c)
        .expect("load");
    let mut r = s.raw();
    let mut req = Vec::new();
    let mut expected = Vec::new();
    req.extend(resp(&["SET", "n", "10"]));
    expected.extend(b"+OK\r\n");
    for i in 11..=15 {
        req.extend(resp(&["EVALSHA", &sha, "1", "n"]));
        expected.extend(format!(":{i}\r\n").into_bytes());
    }
    // Errors inside the batch answer in their place and do not stop it.
    req.extend(resp(&["EVAL", "return 1/", "0"]));
    expected.extend(b"-ERR Error compiling script (new function): user_script:1: unexpected symbol near '<eof>'\r\n");
    req.extend(resp(&[
        "EVALSHA",
        "0000000000000000000000000000000000000000",
        "0",
    ]));
    expected.extend(b"-NOSCRIPT No matching script. Please use EVAL.\r\n");
    req.extend(resp(&["evalsha", &sha.to_uppercase(), "1", "n"]));
    expected.extend(b":16\r\n");
    req.extend(resp(&["EVAL", INCR, "-1"]));
    expected.extend(b"-ERR Number of keys can't be negative\r\n");
    req.extend(resp(&["FCALL", "nosuch", "0"]));
    expected.extend(b"-ERR Function not found\r\n");
    req.extend(resp(&[
        "EVAL",
        "return redis.call('incr', KEYS[1])",
        "1",
        "n",
    ]));
    expected.extend(b":17\r\n");
    // A plain command after the batch sees all of it; a script after it starts another.
    req.extend(resp(&["GET", "n"]));
    expected.extend(b"$2\r\n17\r\n");
    req.extend(resp(&[
        "EVAL_RO",
        "return redis.call('get', KEYS[1])",
        "1",
        "n",
    ]));
    expected.extend(b"$2\r\n17\r\n");
    r.roundtrip(&req, &expected);
}

#[test]
fn a_protocol_error_after_scripts_answers_them_first_then_closes() {
    let s = start();
    let mut r = s.raw();
    let mut req = Vec::new();
    req.extend(resp(&["EVAL", INCR, "1", "p"]));
    req.extend(resp(&["EVAL", INCR, "1", "p"]));
    // A script request whose next bulk length is not a number.
    req.extend(b"*3\r\n$4\r\nEVAL\r\n$x\r\n");
    r.send(&req);
    let got = r.read_until(b"\r\n-ERR Protocol error: invalid bulk length\r\n");
    assert_eq!(
        String::from_utf8_lossy(&got),
        ":1\r\n:2\r\n-ERR Protocol error: invalid bulk length\r\n"
    );
    assert!(r.closed());
}

#[test]
fn keys_and_argv_are_the_same_pushed_or_built() {
    let s = start();
    let mut r = s.raw();
    let body = "return {#KEYS, #ARGV, KEYS[1] or 'none', ARGV[#ARGV] or 'none'}";
    let cases: &[(&[&[u8]], &[u8])] = &[
        (&[b"0"], b"*4\r\n:0\r\n:0\r\n$4\r\nnone\r\n$4\r\nnone\r\n"),
        (
            &[b"0", b"x"],
            b"*4\r\n:0\r\n:1\r\n$4\r\nnone\r\n$1\r\nx\r\n",
        ),
        (
            &[b"2", b"a", b"b", b"c"],
            b"*4\r\n:2\r\n:1\r\n$1\r\na\r\n$1\r\nc\r\n",
        ),
        // Six: the most pushed; seven and more: tables built in Rust.
        (
            &[b"3", b"a", b"b", b"c", b"d", b"e", b"f"],
            b"*4\r\n:3\r\n:3\r\n$1\r\na\r\n$1\r\nf\r\n",
        ),
        (
            &[b"3", b"a", b"b", b"c", b"d", b"e", b"f", b"g"],
            b"*4\r\n:3\r\n:4\r\n$1\r\na\r\n$1\r\ng\r\n",
        ),
        // Not UTF-8: built in Rust, the same bytes.
        (
            &[b"1", b"\xff\xfe", b"z"],
            b"*4\r\n:1\r\n:1\r\n$2\r\n\xff\xfe\r\n$1\r\nz\r\n",
        ),
    ];
    for (args, expected) in cases {
        let mut argv: Vec<&[u8]> = vec![b"EVAL", body.as_bytes()];
        argv.extend_from_slice(args);
        let req = resp_bytes(&argv);
        r.send(&req);
        let got = r.read_n(expected.len());
        assert_eq!(&got[..], *expected, "EVAL with {args:?}");
    }
    // A run's KEYS and ARGV are its own: a script that changed them leaves nothing behind.
    let mut req = resp(&[
        "EVAL",
        "KEYS[1] = 'changed' KEYS[9] = 'x' ARGV[2] = 'y' return 1",
        "1",
        "k",
        "a",
    ]);
    req.extend(resp(&[
        "EVAL",
        "return {#KEYS, #ARGV, KEYS[1]}",
        "1",
        "k2",
        "b",
    ]));
    r.roundtrip(&req, b":1\r\n*3\r\n:1\r\n:1\r\n$2\r\nk2\r\n");
}

#[test]
fn numbers_passed_to_redis_call_are_formatted_as_redis_does() {
    let s = start();
    let mut r = s.raw();
    let body = "redis.call('set', 'a', 0.1) redis.call('set', 'b', 60000) \
                redis.call('set', 'c', -0.0) redis.call('set', 'd', 1e20) \
                redis.call('set', 'e', 3.0) redis.call('set', 'f', -123456789012345) \
                return redis.call('mget', 'a', 'b', 'c', 'd', 'e', 'f')";
    r.roundtrip(
        &resp(&["EVAL", body, "0"]),
        b"*6\r\n$19\r\n0.10000000000000001\r\n$5\r\n60000\r\n$2\r\n-0\r\n$5\r\n1e+20\r\n$1\r\n3\r\n$16\r\n-123456789012345\r\n",
    );
}
