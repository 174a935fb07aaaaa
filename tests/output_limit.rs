//! client-output-buffer-limit holds for replies as for pushed messages: a client that
//! pipelines requests and never reads its replies is closed at the hard limit, or once past
//! the soft limit for its seconds, as Redis closes it; one that reads is never harmed.

mod support;

use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;
use support::{eventually, info_value, resp, TestServer};

/// A client that sends `n` GETs of `key` and never reads, kept open for a few seconds.
fn never_reading(port: u16, key: &'static str, n: usize) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut st = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        let req: Vec<u8> = (0..n).flat_map(|_| resp(&["GET", key])).collect();
        let _ = st.write_all(&req);
        std::thread::sleep(Duration::from_secs(4));
    })
}

fn disconnections(c: &mut redis::Connection) -> Option<String> {
    info_value(c, "stats", "client_output_buffer_limit_disconnections")
}

fn start_with_big_value(limit: &str) -> (TestServer, redis::Connection) {
    let s = TestServer::start(&["--client-output-buffer-limit", limit]);
    let mut c = s.conn();
    let big = "x".repeat(100_000);
    let _: () = redis::cmd("SET")
        .arg("big")
        .arg(&big)
        .query(&mut c)
        .unwrap();
    (s, c)
}

#[test]
fn a_client_that_never_reads_is_closed_at_the_hard_limit() {
    let (s, mut c) = start_with_big_value("normal 1mb 1mb 0");
    let t = never_reading(s.port, "big", 400);
    assert!(
        eventually(10.0, || disconnections(&mut c).as_deref() == Some("1")),
        "not closed"
    );
    assert_eq!(
        info_value(&mut c, "clients", "connected_clients").as_deref(),
        Some("1"),
        "only this client is left"
    );
    let _ = t.join();
    // A client that reads is not harmed by the same limit: 30 replies of 100 KB, read.
    let mut r = s.conn();
    for _ in 0..30 {
        let v: String = redis::cmd("GET").arg("big").query(&mut r).unwrap();
        assert_eq!(v.len(), 100_000);
    }
    assert_eq!(disconnections(&mut c).as_deref(), Some("1"));
}

#[test]
fn a_client_past_the_soft_limit_for_its_seconds_is_closed() {
    let (s, mut c) = start_with_big_value("normal 0 200kb 1");
    let t = never_reading(s.port, "big", 400);
    assert!(eventually(10.0, || disconnections(&mut c).as_deref() == Some("1")));
    assert_eq!(
        info_value(&mut c, "clients", "connected_clients").as_deref(),
        Some("1")
    );
    let _ = t.join();
}
