//! Settings of a stock redis.conf that act here as in Redis: tcp-backlog (the listening
//! socket's backlog), tcp-keepalive (keepalive timers on clients' sockets),
//! stop-writes-on-bgsave-error (MISCONF after a failed background save) and unixsocket /
//! unixsocketperm (a Unix-domain socket beside the TCP port).
mod support;

use std::process::Command;
use std::time::{Duration, Instant};
use support::{err_text, q, TestServer};

fn ss(args: &[&str]) -> String {
    let out = Command::new("ss")
        .args(args)
        .output()
        .expect("ss (iproute2)");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn tcp_backlog_and_keepalive_reach_the_sockets() {
    let s = TestServer::start(&["--tcp-backlog", "77", "--tcp-keepalive", "120"]);
    let mut c = s.conn();
    let _: () = q(&mut c, &["SET", "k", "v"]).expect("set");
    let port = s.port.to_string();
    // A listening socket's Send-Q is its backlog.
    let listening = ss(&["-ltnH", "sport", "=", &format!(":{port}")]);
    assert!(
        listening.split_whitespace().nth(2) == Some("77"),
        "backlog not 77: {listening}"
    );
    // The server's side of the connection carries a keepalive timer (ss shows the one
    // running: once the reply is acknowledged, the keepalive one).
    let established = |port: u16| {
        ss(&[
            "-tnoH",
            "state",
            "established",
            "sport",
            "=",
            &format!(":{port}"),
        ])
    };
    let until = Instant::now() + Duration::from_secs(3);
    let mut conns = established(s.port);
    while !conns.contains("keepalive") && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
        conns = established(s.port);
    }
    assert!(conns.contains("keepalive"), "no keepalive timer: {conns}");
    let off = TestServer::start(&["--tcp-keepalive", "0"]);
    let mut c = off.conn();
    let _: () = q(&mut c, &["SET", "k", "v"]).expect("set");
    std::thread::sleep(Duration::from_millis(500));
    let conns = established(off.port);
    assert!(
        conns.contains(&format!(":{}", off.port)),
        "no connection: {conns}"
    );
    assert!(!conns.contains("keepalive"), "keepalive with 0: {conns}");
}

#[test]
fn a_failed_background_save_stops_writes_until_one_succeeds() {
    let dir = std::env::temp_dir().join(format!("tidecache-misconf-{}", std::process::id()));
    let sub = dir.join("gone");
    std::fs::create_dir_all(&sub).expect("dir");
    let d = sub.to_str().expect("utf-8");
    let s = TestServer::start(&[
        "--dir",
        d,
        "--save",
        "3600 1",
        "--enable-protected-configs",
        "yes",
    ]);
    let mut c = s.conn();
    let _: () = q(&mut c, &["SET", "k", "v"]).expect("set");
    std::fs::remove_dir_all(&sub).expect("rm");
    let _: String = q(&mut c, &["BGSAVE"]).expect("bgsave");
    let until = Instant::now() + Duration::from_secs(10);
    // The probe writes another key: until the save has failed it succeeds.
    let misconf = |c: &mut redis::Connection| {
        q::<()>(c, &["SET", "probe", "x"])
            .err()
            .is_some_and(|e| e.code() == Some("MISCONF"))
    };
    while !misconf(&mut c) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    let e = err_text(q::<()>(&mut c, &["SET", "k", "w"]));
    assert!(
        e.starts_with("MISCONF Redis is configured to save RDB snapshots"),
        "{e}"
    );
    assert!(err_text(q::<String>(&mut c, &["PING"])).starts_with("MISCONF"));
    // Reads go on, and the refused write changed nothing.
    let v: String = q(&mut c, &["GET", "k"]).expect("get");
    assert_eq!(v, "v");
    // Turning the option off lets writes through again.
    let _: () = q(
        &mut c,
        &["CONFIG", "SET", "stop-writes-on-bgsave-error", "no"],
    )
    .expect("cfg");
    let _: () = q(&mut c, &["SET", "k", "w"]).expect("set after no");
    let _: () = q(
        &mut c,
        &["CONFIG", "SET", "stop-writes-on-bgsave-error", "yes"],
    )
    .expect("cfg");
    assert!(misconf(&mut c));
    // A save that succeeds clears it.
    std::fs::create_dir_all(&sub).expect("dir again");
    let _: String = q(&mut c, &["BGSAVE"]).expect("bgsave");
    let until = Instant::now() + Duration::from_secs(10);
    while misconf(&mut c) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    let _: () = q(&mut c, &["SET", "k", "x"]).expect("set after a good save");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `unixsocket` / `unixsocketperm`: a stale file at the path is replaced, the socket gets
/// the permissions asked for, clients of it (the `redis` crate, redis-cli -s,
/// redis-benchmark -s) are served, show as `<path>:0` with flag `U` in CLIENT LIST, are
/// local to protected mode, can be killed by that address, and the file goes at shutdown.
#[test]
fn unixsocket_serves_clients_beside_the_tcp_port() {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    let dir = std::env::temp_dir().join(format!("tidecache-unix-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("s.sock");
    let path_s = path.to_string_lossy().to_string();
    std::fs::write(&path, b"stale").unwrap();
    let mut s = TestServer::start(&[
        "--unixsocket",
        &path_s,
        "--unixsocketperm",
        "700",
        // Only the loopback is bound, and protected mode is on: a Unix client is local.
        "--protected-mode",
        "yes",
    ]);
    let meta = std::fs::metadata(&path).unwrap();
    assert!(meta.file_type().is_socket());
    assert_eq!(meta.permissions().mode() & 0o777, 0o700);

    let client = redis::Client::open(format!("unix://{path_s}")).unwrap();
    let mut c = client.get_connection().unwrap();
    let _: () = q(&mut c, &["SET", "k", "v"]).unwrap();
    let info: String = q(&mut c, &["CLIENT", "INFO"]).unwrap();
    let addr = format!("addr={path_s}:0 laddr={path_s}:0 ");
    assert!(info.contains(&addr), "{info}");
    assert!(info.contains(" flags=U "), "{info}");

    let cli = Command::new("redis-cli")
        .args(["-s", &path_s, "GET", "k"])
        .output()
        .expect("redis-cli");
    assert_eq!(String::from_utf8_lossy(&cli.stdout).trim(), "v");
    let bench = Command::new("redis-benchmark")
        .args(["-s", &path_s, "-n", "2000", "-t", "set", "-q"])
        .output()
        .expect("redis-benchmark");
    assert!(
        String::from_utf8_lossy(&bench.stdout).contains("requests per second"),
        "{}",
        String::from_utf8_lossy(&bench.stdout)
    );

    let mut tcp = s.conn();
    let killed: i64 = q(
        &mut tcp,
        &["CLIENT", "KILL", "ADDR", &format!("{path_s}:0")],
    )
    .unwrap();
    assert_eq!(killed, 1);
    assert!(q::<String>(&mut c, &["PING"]).is_err());
    let _: Result<(), _> = q::<()>(&mut tcp, &["SHUTDOWN", "NOSAVE"]);
    assert_eq!(s.wait_exit(), Some(0));
    assert!(!path.exists(), "the socket file is left after shutdown");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A `unixsocket` path that cannot be bound stops the start with Redis's words, and not
/// with the TCP port's (which Redis's test runner takes as "try another port").
#[test]
fn an_unusable_unixsocket_stops_the_start() {
    let out = Command::new(env!("CARGO_BIN_EXE_tidecache-server"))
        .args([
            "--port",
            "0",
            "--unixsocket",
            "/nonexistent-dir/tidecache.sock",
        ])
        .output()
        .expect("run");
    assert!(!out.status.success());
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("Failed opening Unix socket"), "{text}");
    assert!(!text.contains("Failed listening on port"), "{text}");
}
