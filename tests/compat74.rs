//! What Redis 7.4 (the version INFO reports) shows that 7.0 did not: WATCH in CLIENT LIST
//! (`watch=`) and INFO (`watching_clients`, `total_watched_keys`), and the query buffer's
//! disconnections in INFO stats.

mod support;

use std::io::Write;
use support::{eventually, info_value, q, TestServer};

fn client_field(c: &mut redis::Connection, field: &str) -> String {
    let line: String = q(c, &["CLIENT", "INFO"]).unwrap();
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(&format!("{field}=")))
        .unwrap_or_default()
        .to_string()
}

#[test]
fn watch_is_counted_in_client_list_and_info() {
    let s = TestServer::start(&[]);
    let mut a = s.conn();
    let mut b = s.conn();
    let mut c = s.conn();
    assert_eq!(client_field(&mut a, "watch"), "0");
    let _: () = q(&mut a, &["WATCH", "k1", "k2"]).unwrap();
    let _: () = q(&mut b, &["WATCH", "k2"]).unwrap();
    assert_eq!(client_field(&mut a, "watch"), "2");
    assert_eq!(client_field(&mut b, "watch"), "1");
    // CLIENT LIST puts it after multi=, as 7.4 does.
    let list: String = q(&mut c, &["CLIENT", "LIST"]).unwrap();
    assert!(list.contains(" multi=-1 watch=2 qbuf="), "{list}");
    assert_eq!(
        info_value(&mut c, "clients", "watching_clients").as_deref(),
        Some("2")
    );
    assert_eq!(
        info_value(&mut c, "clients", "total_watched_keys").as_deref(),
        Some("2")
    );
    let _: () = q(&mut a, &["UNWATCH"]).unwrap();
    let _: () = q(&mut b, &["MULTI"]).unwrap();
    let _: redis::Value = q(&mut b, &["EXEC"]).unwrap();
    assert_eq!(client_field(&mut a, "watch"), "0");
    assert_eq!(
        info_value(&mut c, "clients", "watching_clients").as_deref(),
        Some("0")
    );
    assert_eq!(
        info_value(&mut c, "clients", "total_watched_keys").as_deref(),
        Some("0")
    );
}

#[test]
fn a_query_buffer_past_its_limit_is_counted() {
    let s = TestServer::start(&["--client-query-buffer-limit", "1mb"]);
    let mut c = s.conn();
    assert_eq!(
        info_value(&mut c, "stats", "client_query_buffer_limit_disconnections").as_deref(),
        Some("0")
    );
    let mut raw = std::net::TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    // One unfinished bulk of 2 MB: the buffer only grows.
    let _ = raw.write_all(b"*2\r\n$3\r\nSET\r\n$4000000\r\n");
    let _ = raw.write_all(&vec![b'x'; 2_000_000]);
    assert!(eventually(5.0, || info_value(
        &mut c,
        "stats",
        "client_query_buffer_limit_disconnections"
    )
    .as_deref()
        == Some("1")));
}

/// BITCOUNT and BITPOS check their arguments before the key, as 7.4 does: a missing key no
/// longer hides a syntax error.
#[test]
fn bit_commands_check_arguments_before_the_key() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    let e = |c: &mut redis::Connection, args: &[&str]| support::err_text(q::<i64>(c, args));
    assert_eq!(e(&mut c, &["BITCOUNT", "nokey", "0"]), "ERR syntax error");
    assert_eq!(
        e(&mut c, &["BITCOUNT", "nokey", "0", "1", "BAD"]),
        "ERR syntax error"
    );
    assert_eq!(
        e(&mut c, &["BITCOUNT", "nokey", "x", "1"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        e(&mut c, &["BITPOS", "nokey", "1", "0", "1", "BAD"]),
        "ERR syntax error"
    );
    assert_eq!(
        e(&mut c, &["BITPOS", "nokey", "1", "0", "1", "BIT", "x"]),
        "ERR syntax error"
    );
    let _: () = q(&mut c, &["SET", "s", "foobar"]).unwrap();
    assert_eq!(
        e(&mut c, &["BITCOUNT", "s", "-1", "-2", "FOO"]),
        "ERR syntax error"
    );
    let n: i64 = q(&mut c, &["BITCOUNT", "nokey", "0", "1"]).unwrap();
    assert_eq!(n, 0);
    let n: i64 = q(&mut c, &["BITPOS", "nokey", "1", "0"]).unwrap();
    assert_eq!(n, -1);
}

/// In a script, XREAD BLOCK and WAITAOF answer at once as 7.4 does (7.0 refused BLOCK there,
/// and WAITAOF did not exist).
#[test]
fn blocking_reads_and_waitaof_answer_at_once_in_scripts() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    let v: redis::Value = q(
        &mut c,
        &[
            "EVAL",
            "return redis.call('xread','block','0','streams','s','0')",
            "0",
        ],
    )
    .unwrap();
    assert_eq!(v, redis::Value::Nil);
    let v: Vec<i64> = q(
        &mut c,
        &["EVAL", "return redis.call('waitaof','0','0','0')", "0"],
    )
    .unwrap();
    assert_eq!(v, vec![0, 0]);
}

/// INFO persistence's current_save_keys_total / _processed follow a BGSAVE while it runs
/// (they were always 0) and go back to 0 after it.
#[test]
fn a_running_save_reports_its_progress() {
    let dir = std::env::temp_dir().join(format!("tc-save-progress-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let s = TestServer::start(&["--dir", dir.to_str().unwrap()]);
    let mut c = s.conn();
    let mut p = redis::pipe();
    for i in 0..1000 {
        p.cmd("SET").arg(format!("k{i}")).arg("v").ignore();
    }
    let _: () = p.query(&mut c).unwrap();
    // 2 ms per key: the save takes about 2 s.
    let _: String = q(&mut c, &["CONFIG", "SET", "rdb-key-save-delay", "2000"]).unwrap();
    let _: String = q(&mut c, &["BGSAVE"]).unwrap();
    let mut seen_progress = false;
    assert!(eventually(10.0, || {
        let total = info_value(&mut c, "persistence", "current_save_keys_total");
        let done = info_value(&mut c, "persistence", "current_save_keys_processed")
            .and_then(|v| v.parse::<i64>().ok())
            .unwrap_or(0);
        if total.as_deref() == Some("1000") && done > 0 && done < 1000 {
            seen_progress = true;
        }
        seen_progress
    }));
    let _: String = q(&mut c, &["CONFIG", "SET", "rdb-key-save-delay", "0"]).unwrap();
    assert!(eventually(20.0, || info_value(
        &mut c,
        "persistence",
        "rdb_bgsave_in_progress"
    )
    .as_deref()
        == Some("0")));
    assert_eq!(
        info_value(&mut c, "persistence", "current_save_keys_total").as_deref(),
        Some("0")
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// CONFIG SET loglevel changes the level of every log line, not only the Redis-format ones:
/// a protocol error is logged at debug level once `debug` is set, and no longer after
/// `warning`.
#[test]
fn config_set_loglevel_reaches_the_whole_log() {
    let dir = std::env::temp_dir().join(format!("tc-loglevel-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // With a log file the banner TestServer reads goes there: started on a port found free.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_tidecache-server"))
        .args(["--port", &port.to_string(), "--save", ""])
        .args(["--dir", dir.to_str().unwrap(), "--logfile", "tc.log"])
        .spawn()
        .expect("spawn");
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
    assert!(eventually(10.0, || client.get_connection().is_ok()));
    let mut c = client.get_connection().unwrap();
    let bad = || {
        let mut raw = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        let _ = raw.write_all(b"*a\r\n");
        let mut buf = [0u8; 64];
        let _ = std::io::Read::read(&mut raw, &mut buf);
    };
    let logged = || {
        std::fs::read_to_string(dir.join("tc.log"))
            .unwrap_or_default()
            .matches("protocol error")
            .count()
    };
    bad();
    assert_eq!(logged(), 0);
    let _: String = q(&mut c, &["CONFIG", "SET", "loglevel", "debug"]).unwrap();
    bad();
    assert!(eventually(5.0, || logged() == 1));
    let _: String = q(&mut c, &["CONFIG", "SET", "loglevel", "warning"]).unwrap();
    bad();
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert_eq!(logged(), 1);
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
}
