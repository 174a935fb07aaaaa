//! Settings CONFIG SET applies to the process and its sockets, as Redis 7.0 does: the
//! process title (proc-title-template), the OOM score (oom-score-adj, oom-score-adj-values),
//! the listening port (port), the all-or-nothing rollback of a CONFIG SET whose apply fails,
//! and maxmemory-clients (checked as Redis checks it; only 0 is accepted).
mod support;

use std::net::{TcpListener, TcpStream};
use std::process::Command;
use support::{err_text, q, strs, TestServer};

fn cmdline(pid: u32) -> Vec<String> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).expect("cmdline");
    String::from_utf8_lossy(&raw)
        .split(['\0', ' '])
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

fn oom_score_adj(pid: u32) -> i64 {
    std::fs::read_to_string(format!("/proc/{pid}/oom_score_adj"))
        .expect("oom_score_adj")
        .trim()
        .parse()
        .expect("a number")
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

#[test]
fn process_title_follows_the_template() {
    let s = TestServer::start(&[]);
    let pid = s.child.id();
    let mut c = s.conn();
    let bin = env!("CARGO_BIN_EXE_tidecache-server");
    let port = s.port.to_string();
    // The default template: {title} {listen-addr} {server-mode}.
    assert_eq!(cmdline(pid), [bin.to_string(), format!("*:{port}")]);
    assert_eq!(
        strs(&mut c, &["CONFIG", "GET", "proc-title-template"]),
        ["proc-title-template", "{title} {listen-addr} {server-mode}"]
    );
    let template = "TEST {title} {listen-addr} {port} {tls-port} {unixsocket} {config-file} {{x}";
    let _: () = q(&mut c, &["CONFIG", "SET", "proc-title-template", template]).unwrap();
    assert_eq!(
        cmdline(pid),
        ["TEST", bin, &format!("*:{port}"), &port, "0", "-", "{x}"]
    );
    let e = err_text(q::<()>(
        &mut c,
        &["CONFIG", "SET", "proc-title-template", "{invalid-var}"],
    ));
    assert!(
        e.contains("template format is invalid or contains unknown variables"),
        "{e}"
    );
    let _: () = q(&mut c, &["CONFIG", "SET", "proc-title-template", "short"]).unwrap();
    assert_eq!(cmdline(pid), ["short"]);
    // The environment was moved, not lost.
    let environ = std::fs::read(format!("/proc/{pid}/environ")).expect("environ");
    assert!(!environ.is_empty());
    // set-proc-title is read at start only.
    let e = err_text(q::<()>(&mut c, &["CONFIG", "SET", "set-proc-title", "no"]));
    assert!(e.contains("immutable"), "{e}");

    // set-proc-title no: the command line stays as it was started.
    let s = TestServer::start(&["--set-proc-title", "no"]);
    let mut c = s.conn();
    let _: () = q(
        &mut c,
        &["CONFIG", "SET", "proc-title-template", "TEST {title}"],
    )
    .unwrap();
    let line = cmdline(s.child.id());
    assert_eq!(line[0], bin);
    assert!(line.contains(&"--set-proc-title".to_string()), "{line:?}");
}

#[test]
fn oom_score_adj_follows_the_settings() {
    let s = TestServer::start(&[]);
    let pid = s.child.id();
    let mut c = s.conn();
    let base = oom_score_adj(pid);
    assert_eq!(
        strs(&mut c, &["CONFIG", "GET", "oom-score-adj*"]),
        ["oom-score-adj", "no", "oom-score-adj-values", "0 200 800"]
    );
    let set = |c: &mut redis::Connection, args: &[&str]| {
        let mut all = vec!["CONFIG", "SET"];
        all.extend_from_slice(args);
        q::<()>(c, &all)
    };
    set(
        &mut c,
        &[
            "oom-score-adj-values",
            "10 20 30",
            "oom-score-adj",
            "absolute",
        ],
    )
    .unwrap();
    assert_eq!(oom_score_adj(pid), 10);
    set(&mut c, &["oom-score-adj", "relative"]).unwrap();
    assert_eq!(oom_score_adj(pid), base + 10);
    assert_eq!(
        strs(&mut c, &["CONFIG", "GET", "oom-score-adj"]),
        ["oom-score-adj", "yes"]
    );
    set(&mut c, &["oom-score-adj-values", "15 20 30"]).unwrap();
    assert_eq!(oom_score_adj(pid), base + 15);
    // Turned off: back to what the process had before the server adjusted it.
    set(&mut c, &["oom-score-adj", "no"]).unwrap();
    assert_eq!(oom_score_adj(pid), base);
    for (args, why) in [
        (["oom-score-adj-values", "1 2"], "wrong number of arguments"),
        (
            ["oom-score-adj-values", "1 2 2001"],
            "elements must be between -2000 and 2000",
        ),
        (["oom-score-adj", "maybe"], "must be one of the following"),
    ] {
        let e = err_text(set(&mut c, &args));
        assert!(e.contains(why), "{args:?}: {e}");
    }
    assert_eq!(oom_score_adj(pid), base);
    // From the command line, applied at start.
    let s = TestServer::start(&[
        "--oom-score-adj",
        "absolute",
        "--oom-score-adj-values",
        "7 8 9",
    ]);
    assert_eq!(oom_score_adj(s.child.id()), 7);
}

#[test]
fn config_set_port_rebinds_and_rolls_back_on_failure() {
    let s = TestServer::start(&[]);
    let pid = s.child.id();
    let mut c = s.conn();
    let old = s.port;
    let new = free_port();
    let _: () = q(&mut c, &["CONFIG", "SET", "port", &new.to_string()]).unwrap();
    // New clients on the new port, the connected one stays, the old port closes.
    let mut c2 = redis::Client::open(format!("redis://127.0.0.1:{new}/"))
        .unwrap()
        .get_connection()
        .expect("connect to the new port");
    assert_eq!(q::<String>(&mut c2, &["PING"]).unwrap(), "PONG");
    assert_eq!(q::<String>(&mut c, &["PING"]).unwrap(), "PONG");
    assert!(
        support::eventually(5.0, || TcpStream::connect(("127.0.0.1", old)).is_err()),
        "the old port still accepts"
    );
    assert_eq!(
        strs(&mut c, &["CONFIG", "GET", "port"]),
        ["port", &new.to_string()]
    );
    assert_eq!(
        support::info_value(&mut c, "server", "tcp_port").as_deref(),
        Some(new.to_string().as_str())
    );
    // The process title shows the new port.
    assert!(
        cmdline(pid).contains(&format!("*:{new}")),
        "{:?}",
        cmdline(pid)
    );

    // A port in use: the error names it, and every setting of the command is rolled back,
    // the OOM score applied before the bind included.
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let busy = taken.local_addr().unwrap().port().to_string();
    let base = oom_score_adj(pid);
    let e = err_text(q::<()>(
        &mut c,
        &[
            "CONFIG",
            "SET",
            "oom-score-adj",
            "absolute",
            "oom-score-adj-values",
            "5 5 5",
            "maxmemory",
            "10000001",
            "port",
            &busy,
            "client-query-buffer-limit",
            "10m",
        ],
    ));
    assert!(
        e.contains("CONFIG SET failed (possibly related to argument 'port') - Unable to listen on this port"),
        "{e}"
    );
    assert_eq!(oom_score_adj(pid), base);
    assert_eq!(
        strs(
            &mut c,
            &[
                "CONFIG",
                "GET",
                "maxmemory",
                "port",
                "oom-score-adj*",
                "client-query-buffer-limit"
            ]
        ),
        [
            "port",
            &new.to_string(),
            "maxmemory",
            "0",
            "client-query-buffer-limit",
            "1073741824",
            "oom-score-adj",
            "no",
            "oom-score-adj-values",
            "0 200 800"
        ]
    );
    let mut c3 = redis::Client::open(format!("redis://127.0.0.1:{new}/"))
        .unwrap()
        .get_connection()
        .expect("still listening on the port in force");
    assert_eq!(q::<String>(&mut c3, &["PING"]).unwrap(), "PONG");
    // The port in force again: nothing to bind, accepted.
    let _: () = q(&mut c, &["CONFIG", "SET", "port", &new.to_string()]).unwrap();
    assert_eq!(q::<String>(&mut c3, &["PING"]).unwrap(), "PONG");
    drop(taken);
}

#[test]
fn maxmemory_clients_is_checked_and_only_zero_is_accepted() {
    let s = TestServer::start(&["--loading-process-events-interval-bytes", "1024"]);
    let mut c = s.conn();
    let names = strs(&mut c, &["CONFIG", "GET", "maxmemory*"]);
    assert!(
        names.contains(&"maxmemory-clients".to_string()),
        "{names:?}"
    );
    let _: () = q(&mut c, &["CONFIG", "SET", "maxmemory", "10000002"]).unwrap();
    let e = err_text(q::<()>(
        &mut c,
        &[
            "CONFIG",
            "SET",
            "maxmemory",
            "10000001",
            "maxmemory-clients",
            "200%",
            "client-query-buffer-limit",
            "invalid",
        ],
    ));
    assert!(
        e.contains("CONFIG SET failed (possibly related to argument 'maxmemory-clients') - percentage argument must be less or equal to 100"),
        "{e}"
    );
    assert_eq!(
        strs(&mut c, &["CONFIG", "GET", "maxmemory"]),
        ["maxmemory", "10000002"]
    );
    for v in ["10%", "1mb"] {
        let e = err_text(q::<()>(&mut c, &["CONFIG", "SET", "maxmemory-clients", v]));
        assert!(e.contains("client eviction is not available"), "{v}: {e}");
    }
    let _: () = q(&mut c, &["CONFIG", "SET", "maxmemory-clients", "0%"]).unwrap();
    assert_eq!(
        strs(&mut c, &["CONFIG", "GET", "maxmemory-clients"]),
        ["maxmemory-clients", "0"]
    );
    // A limit in a config file stops the start with the reason.
    let out = Command::new(env!("CARGO_BIN_EXE_tidecache-server"))
        .args(["--port", "0", "--maxmemory-clients", "10mb"])
        .output()
        .expect("run");
    assert!(!out.status.success());
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("client eviction is not available"), "{text}");
}

#[test]
fn rename_command_renames_and_survives_a_rewrite() {
    let dir = std::env::temp_dir().join(format!("tidecache-rename-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let conf = dir.join("t.conf");
    std::fs::write(
        &conf,
        "rename-command flushdb badger\nrename-command FLUSHALL \"\"\n",
    )
    .unwrap();
    let s = TestServer::start_with(Some(conf.to_str().unwrap()), &[]);
    let mut c = s.conn();
    for gone in ["FLUSHDB", "flushdb", "FLUSHALL"] {
        let e = err_text(q::<()>(&mut c, &[gone]));
        assert!(e.contains("unknown command"), "{gone}: {e}");
    }
    let _: () = q(&mut c, &["SET", "k", "v"]).unwrap();
    let _: () = q(&mut c, &["Badger"]).unwrap();
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]).unwrap(), 0);
    let _: () = q(&mut c, &["CONFIG", "SET", "hz", "20"]).unwrap();
    let _: () = q(&mut c, &["CONFIG", "REWRITE"]).unwrap();
    let text = std::fs::read_to_string(&conf).unwrap();
    assert!(text.contains("rename-command flushdb badger"), "{text}");
    drop(s);
    // Renaming what does not exist, or onto a name taken, stops the start as in Redis.
    for (args, why) in [
        (["nosuch", "x"], "No such command in rename-command"),
        (["flushdb", "get"], "Target command name already exists"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_tidecache-server"))
            .args(["--port", "0", "--rename-command", args[0], args[1]])
            .output()
            .expect("run");
        assert!(!out.status.success());
        let text = String::from_utf8_lossy(&out.stderr);
        assert!(text.contains(why), "{args:?}: {text}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The replica's value applies while the server is a replica (REPLICAOF), the master's
/// again after REPLICAOF NO ONE.
#[test]
fn oom_score_follows_the_role() {
    let s = TestServer::start(&[
        "--oom-score-adj",
        "absolute",
        "--oom-score-adj-values",
        "3 6 9",
    ]);
    let pid = s.child.id();
    let mut c = s.conn();
    assert_eq!(oom_score_adj(pid), 3);
    // A master that is not there: the server is a replica all the same (its link retries).
    let port = free_port().to_string();
    let _: () = q(&mut c, &["REPLICAOF", "127.0.0.1", &port]).unwrap();
    assert_eq!(oom_score_adj(pid), 6);
    let _: () = q(&mut c, &["REPLICAOF", "NO", "ONE"]).unwrap();
    assert_eq!(oom_score_adj(pid), 3);
}

/// dbfilename changes at run time (a protected setting, as Redis): the next SAVE writes it.
#[test]
fn dbfilename_is_live_where_protected_configs_allow() {
    let dir = std::env::temp_dir().join(format!("tidecache-dbfile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let s = TestServer::start(&[
        "--dir",
        dir.to_str().unwrap(),
        "--enable-protected-configs",
        "local",
    ]);
    let mut c = s.conn();
    let _: () = q(&mut c, &["SET", "k", "v"]).unwrap();
    let _: () = q(&mut c, &["CONFIG", "SET", "dbfilename", "other.rdb"]).unwrap();
    let _: () = q(&mut c, &["SAVE"]).unwrap();
    assert!(dir.join("other.rdb").exists());
    assert!(!dir.join("dump.rdb").exists());
    let e = err_text(q::<()>(&mut c, &["CONFIG", "SET", "dbfilename", "a/b.rdb"]));
    assert!(e.contains("dbfilename can't be a path"), "{e}");
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}
