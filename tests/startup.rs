//! Starting as Redis starts: from the config file Redis's own test suite writes
//! (tests/assets/default.conf plus its overrides), with the log lines its runner waits for.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_tidecache-server");

/// Redis 7.0.15's tests/assets/default.conf, with the `save ""` the suite is run with (a
/// snapshot schedule is refused: tidecache writes no snapshots), and the lines the runner
/// adds for each server.
fn redis_test_conf(dir: &std::path::Path, extra: &str) -> PathBuf {
    let text = format!(
        "always-show-logo yes\nnotify-keyspace-events KEA\ndaemonize no\npidfile /var/run/redis.pid\n\
         port 0\ntimeout 0\nbind 127.0.0.1\nloglevel verbose\nlogfile ''\ndatabases 16\n\
         latency-monitor-threshold 1\nrepl-diskless-sync-delay 0\nsave \"\"\nrdbcompression yes\n\
         dbfilename dump.rdb\ndir {dir}\nslave-serve-stale-data yes\nappendonly no\n\
         appendfsync everysec\nno-appendfsync-on-rewrite no\nactiverehashing yes\n\
         enable-protected-configs yes\nenable-debug-command yes\nenable-module-command yes\n\
         propagation-error-behavior panic\nunixsocket {dir}/socket\n{extra}",
        dir = dir.display()
    );
    let path = dir.join("redis.conf");
    std::fs::write(&path, text).expect("write conf");
    path
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tidecache-startup-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// Sends every line of a pipe to a channel, so the child never blocks on a full pipe.
fn lines_of(pipe: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    rx
}

/// Collects lines until one contains `needle` (returned with those before it).
fn until(rx: &mpsc::Receiver<String>, needle: &str) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut seen = Vec::new();
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        match rx.recv_timeout(left) {
            Ok(line) => {
                let done = line.contains(needle);
                seen.push(line);
                if done {
                    return seen;
                }
            }
            Err(_) => break,
        }
    }
    panic!("no line with {needle:?} in {seen:#?}");
}

fn wait_exit(child: &mut Child) -> Option<i32> {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Ok(Some(st)) = child.try_wait() {
            return st.code();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    panic!("the server did not exit");
}

fn sigterm(child: &Child) {
    let st = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(st.success());
}

/// `<pid>:M 24 Nov 2026 12:55:57.123 * <text>`, as Redis's serverLog.
fn redis_line(pid: u32, mark: char) -> regex::Regex {
    regex::Regex::new(&format!(
        r"^{pid}:M \d\d [A-Z][a-z][a-z] \d{{4}} \d\d:\d\d:\d\d\.\d\d\d {} ",
        regex::escape(&mark.to_string())
    ))
    .unwrap()
}

#[test]
fn starts_from_redis_test_config_and_logs_as_redis() {
    let dir = temp_dir("conf");
    let conf = redis_test_conf(&dir, "");
    let mut child = Command::new(BIN)
        .arg(&conf)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let pid = child.id();
    let out = lines_of(child.stdout.take().unwrap());
    let err = lines_of(child.stderr.take().unwrap());
    let lines = until(&out, "Ready to accept connections");
    // The runner waits for " PID: <pid>" in standard output (logfile ''), then counts
    // "Ready to accept" lines.
    let banner = lines
        .iter()
        .find(|l| l.ends_with(&format!(" PID: {pid}")))
        .unwrap_or_else(|| panic!("no PID line in {lines:#?}"));
    assert!(redis_line(pid, '*').is_match(banner), "{banner}");
    assert!(redis_line(pid, '*').is_match(lines.last().unwrap()));
    let port: u16 = banner
        .split("port ")
        .nth(1)
        .and_then(|p| p.split(',').next())
        .and_then(|p| p.parse().ok())
        .expect("port in banner");
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"PING\r\nCONFIG GET enable-debug-command\r\n")
        .unwrap();
    let mut got = Vec::new();
    let want = b"+PONG\r\n*2\r\n$20\r\nenable-debug-command\r\n$3\r\nyes\r\n";
    while got.len() < want.len() {
        let mut buf = [0u8; 256];
        let n = s.read(&mut buf).expect("reply");
        assert!(n > 0, "closed");
        got.extend_from_slice(&buf[..n]);
    }
    assert_eq!(String::from_utf8_lossy(&got), String::from_utf8_lossy(want));
    // One warning naming every setting that has no effect here, and nothing about the others.
    sigterm(&child);
    assert_eq!(wait_exit(&mut child), Some(0));
    let log: Vec<String> = err.try_iter().collect();
    let warnings: Vec<&String> = log.iter().filter(|l| l.contains("no effect")).collect();
    assert_eq!(warnings.len(), 1, "{log:#?}");
    for name in ["always-show-logo", "daemonize", "pidfile"] {
        assert!(warnings[0].contains(name), "{name} not in {}", warnings[0]);
    }
    for name in [
        "unixsocket",
        "propagation-error-behavior",
        "notify-keyspace-events",
        "appendonly",
        "enable-debug-command",
        "enable-module-command",
        "latency-monitor-threshold",
    ] {
        assert!(!warnings[0].contains(name), "{name} in {}", warnings[0]);
    }
    assert!(log.iter().any(|l| l.contains("SIGTERM")), "{log:#?}");
    assert!(
        !log.iter().any(|l| l.contains('\x1b')),
        "colours in a file: {log:#?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn settings_claiming_what_is_not_there_still_stop_the_start() {
    let dir = temp_dir("claims");
    for (line, why) in [
        ("daemonize yes", "'daemonize yes' is not available"),
        // A schedule Redis itself would refuse; a valid one starts (tests/spawn_conf.rs).
        ("save 900", "Invalid save parameters"),
    ] {
        let conf = redis_test_conf(&dir, line);
        let out = Command::new(BIN).arg(&conf).output().expect("run");
        assert_eq!(out.status.code(), Some(1), "{line}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("FATAL CONFIG FILE ERROR") && err.contains(why),
            "{line}: {err}"
        );
        assert!(
            !String::from_utf8_lossy(&out.stdout).contains("PID:"),
            "{line}"
        );
    }
    // An ACL file that cannot be read stops the start, as in Redis.
    let conf = redis_test_conf(&dir, "aclfile users.acl");
    let out = Command::new(BIN).arg(&conf).output().expect("run");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("Error loading ACLs"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn busy_port_logs_failed_listening_as_redis() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = taken.local_addr().unwrap().port();
    let out = Command::new(BIN)
        .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    // Redis's runner reads "already in use" on the first line and "Failed listening on
    // port" to retry with another port.
    assert!(lines[0].contains("already in use"), "{stdout}");
    let failed = regex::Regex::new(&format!(
        r"^\d+:M \d\d [A-Z][a-z][a-z] \d{{4}} [0-9:.]+ # Failed listening on port {port} \(TCP\), aborting\.$"
    ))
    .unwrap();
    assert!(failed.is_match(lines[1]), "{stdout}");
    drop(taken);
}

#[test]
fn log_file_gets_the_start_lines() {
    let dir = temp_dir("logfile");
    let logfile = dir.join("server.log");
    // Its own directory: the SIGTERM below saves under the default schedule, and a
    // dump.rdb left in the project's directory would be loaded by every later test server.
    let mut child = Command::new(BIN)
        .args(["--port", "0", "--logfile", logfile.to_str().unwrap()])
        .args(["--dir", dir.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let pid = child.id();
    let deadline = Instant::now() + Duration::from_secs(10);
    let text = loop {
        let text = std::fs::read_to_string(&logfile).unwrap_or_default();
        if text.contains("Ready to accept connections") {
            break text;
        }
        assert!(Instant::now() < deadline, "log: {text}");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(text.contains(&format!(" PID: {pid}\n")), "{text}");
    sigterm(&child);
    assert_eq!(wait_exit(&mut child), Some(0));
    // Redis's default schedule is in force (no `save` line anywhere): SIGTERM saved.
    assert!(dir.join("dump.rdb").exists(), "no dump.rdb after SIGTERM");
    let mut stdout = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    assert_eq!(stdout, "", "the lines go to the log file only");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A server whose standard error is a pipe nobody reads any more (the terminal or the
/// supervisor that started it went away) still shuts down on SIGTERM: the log line it
/// cannot write is dropped. It used to kill the signal's task instead, and the server ran on.
#[test]
fn sigterm_shuts_down_with_standard_error_closed() {
    let dir = temp_dir("closed-stderr");
    let mut child = Command::new(BIN)
        .args(["--port", "0", "--save", "", "--loglevel", "notice"])
        .args(["--dir", dir.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    // Redis's start lines (standard output) are read up to "Ready"; then both pipes are
    // closed, so every later write to them fails with EPIPE.
    let pipe = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut reader = BufReader::new(pipe);
        let mut line = String::new();
        while reader.read_line(&mut line).unwrap_or(0) > 0 {
            if line.contains("Ready to accept connections") {
                let _ = tx.send(reader);
                return;
            }
            line.clear();
        }
    });
    let reader = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("no \"Ready to accept connections\" line");
    drop(reader);
    drop(child.stderr.take());
    sigterm(&child);
    assert_eq!(wait_exit(&mut child), Some(0));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The redis.conf Debian's redis-server package installs (Redis 7's defaults) starts once its
/// one setting tidecache cannot honour, `aof-use-rdb-preamble yes`, is turned off; the start
/// says why until then. Only the lines any second server needs change (port, foreground,
/// log to standard output, its own directory).
#[test]
fn debians_stock_redis_conf_starts_once_the_preamble_is_off() {
    let stock = std::fs::read_to_string("/etc/redis/redis.conf")
        .expect("/etc/redis/redis.conf (apt-get install redis-server)");
    let dir = temp_dir("stock");
    let mut lines: Vec<String> = stock
        .lines()
        .filter(|l| {
            let name = l.split_whitespace().next().unwrap_or("");
            !matches!(
                name,
                "port" | "daemonize" | "logfile" | "dir" | "pidfile" | "supervised"
            )
        })
        .map(str::to_string)
        .collect();
    lines.push("port 0".into());
    lines.push("logfile \"\"".into());
    lines.push(format!("dir {}", dir.display()));
    assert!(
        lines.iter().any(|l| l == "aof-use-rdb-preamble yes"),
        "the stock file has changed"
    );
    let conf = dir.join("stock.conf");
    std::fs::write(&conf, lines.join("\n")).expect("write");
    let out = Command::new(BIN).arg(&conf).output().expect("run");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("'aof-use-rdb-preamble yes' an RDB preamble is not available"),
        "{err}"
    );
    for l in lines.iter_mut() {
        if l == "aof-use-rdb-preamble yes" {
            *l = "aof-use-rdb-preamble no".into();
        }
    }
    std::fs::write(&conf, lines.join("\n")).expect("write");
    let mut child = Command::new(BIN)
        .arg(&conf)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let out = lines_of(child.stdout.take().unwrap());
    let err = lines_of(child.stderr.take().unwrap());
    let started = until(&out, "Ready to accept connections");
    assert!(
        started.iter().any(|l| l.contains("Ready to accept")),
        "{started:#?}"
    );
    sigterm(&child);
    assert_eq!(wait_exit(&mut child), Some(0));
    let log: Vec<String> = err.try_iter().collect();
    let warning = log
        .iter()
        .find(|l| l.contains("no effect"))
        .unwrap_or_else(|| panic!("no warning in {log:#?}"));
    for name in ["lazyfree-lazy-user-del", "jemalloc-bg-thread"] {
        assert!(warning.contains(name), "{name} not in {warning}");
    }
    // Settings that work here are not in it.
    for name in [
        "tcp-backlog",
        "tcp-keepalive",
        "dynamic-hz",
        "stop-writes-on-bgsave-error",
        "set-proc-title",
        "proc-title-template",
        "oom-score-adj",
    ] {
        assert!(!warning.contains(name), "{name} in {warning}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
