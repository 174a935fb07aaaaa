//! Started as Redis's test runner starts redis-server (`tests/support/server.tcl`): from
//! Redis 7.0.15's `tests/assets/default.conf` as it is (`save 900 1` included), plus the
//! lines the runner adds per server (`dir`, `port`, `unixsocket`) and per test (an override
//! `save ""` is written as a bare `save `). What the runner waits for on standard output:
//! ` PID: <pid>` and `Ready to accept connections`, or `Failed listening on port`.

mod support;

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_tidecache-server");

/// tests/assets/default.conf of Redis 7.0.15, byte for byte.
const DEFAULT_CONF: &str = "# Redis configuration for testing.

always-show-logo yes
notify-keyspace-events KEA
daemonize no
pidfile /var/run/redis.pid
port 6379
timeout 0
bind 127.0.0.1
loglevel verbose
logfile ''
databases 16
latency-monitor-threshold 1
repl-diskless-sync-delay 0

# Note the infrastructure in server.tcl uses a dict, we can't provide several save directives
save 900 1

rdbcompression yes
dbfilename dump.rdb
dir ./

slave-serve-stale-data yes
appendonly no
appendfsync everysec
no-appendfsync-on-rewrite no
activerehashing yes

enable-protected-configs yes
enable-debug-command yes
enable-module-command yes

propagation-error-behavior panic";

/// The settings of default.conf that mean nothing here, in the order the file has them (the
/// runner's `unixsocket` is served).
const IGNORED: &str =
    "always-show-logo, daemonize, pidfile, no-appendfsync-on-rewrite, activerehashing";

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tidecache-spawn-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// default.conf with the runner's own lines appended (later lines win, as in Redis).
fn conf(dir: &Path, port: u16, extra: &str) -> PathBuf {
    let text = format!(
        "{DEFAULT_CONF}\ndir {d}\nport {port}\nunixsocket {d}/socket\n{extra}",
        d = dir.display()
    );
    let path = dir.join("redis.conf");
    std::fs::write(&path, text).expect("write conf");
    path
}

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

/// Lines until one contains `needle`, that one included.
fn until(rx: &mpsc::Receiver<String>, needle: &str) -> Vec<String> {
    until_any(rx, &[needle])
}

/// Lines until one contains one of `needles`, that one included.
fn until_any(rx: &mpsc::Receiver<String>, needles: &[&str]) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut seen = Vec::new();
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        match rx.recv_timeout(left) {
            Ok(line) => {
                let done = needles.iter().any(|n| line.contains(n));
                seen.push(line);
                if done {
                    return seen;
                }
            }
            Err(_) => break,
        }
    }
    panic!("no line with {needles:?} in {seen:#?}");
}

fn exit_code(child: &mut Child, within: Duration) -> Option<i32> {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if let Ok(Some(st)) = child.try_wait() {
            return st.code();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    panic!("the server did not exit within {within:?}");
}

fn spawn(conf: &Path) -> (Child, mpsc::Receiver<String>, mpsc::Receiver<String>) {
    let mut child = Command::new(BIN)
        .arg(conf)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let out = lines_of(child.stdout.take().expect("stdout"));
    let err = lines_of(child.stderr.take().expect("stderr"));
    (child, out, err)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

#[test]
fn starts_from_redis_default_conf_warns_once_and_stops_on_sigterm() {
    let dir = temp_dir("default");
    // The port is found free, then bound by the server: the runner's own race, retried.
    let (mut child, out, err, port) = (0..5)
        .find_map(|_| {
            let port = free_port();
            let (mut child, out, err) = spawn(&conf(&dir, port, "save \n"));
            let lines = until_any(&out, &["Ready to accept connections", "Failed listening"]);
            if lines.iter().any(|l| l.contains("Failed listening")) {
                let _ = child.wait();
                return None;
            }
            // The banner with the PID comes before the ready line, as in Redis.
            let pid = format!(" PID: {}", child.id());
            let at = lines.iter().position(|l| l.contains(&pid));
            assert!(at.is_some_and(|i| i + 1 < lines.len()), "{lines:#?}");
            Some((child, out, err, port))
        })
        .expect("the server started");
    // Exactly one warning names every setting of the file that has no effect here.
    let mut warnings = Vec::new();
    while let Ok(line) = err.recv_timeout(Duration::from_millis(300)) {
        if line.contains("WARN") {
            warnings.push(line);
        }
    }
    let named: Vec<&String> = warnings
        .iter()
        .filter(|l| l.contains("have no effect"))
        .collect();
    assert_eq!(named.len(), 1, "{warnings:#?}");
    // (The file's `save 900 1` is a schedule, kept, until the runner's `save ""` clears it.)
    assert!(named[0].ends_with(IGNORED), "{}", named[0]);

    let mut c = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
        .and_then(|c| c.get_connection())
        .expect("connect");
    let save: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("save")
        .query(&mut c)
        .expect("config get");
    assert_eq!(save, ["save", ""]);
    let dbg: String = redis::cmd("DEBUG")
        .arg("PROTOCOL")
        .arg("string")
        .query(&mut c)
        .expect("enable-debug-command yes is in force");
    assert_eq!(dbg, "Hello World");
    drop(c);

    // SIGTERM: a clean exit, code 0, promptly.
    let st = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(st.success());
    assert_eq!(exit_code(&mut child, Duration::from_secs(5)), Some(0));
    drop(out);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Connects to the server whose log is `out` once it is ready, on the port its banner names.
fn connect_when_ready(out: &mpsc::Receiver<String>) -> redis::Connection {
    let lines = until(out, "Ready to accept connections");
    let port: u16 = lines
        .iter()
        .find_map(|l| l.split(", port ").nth(1))
        .and_then(|r| r.split(',').next())
        .and_then(|p| p.parse().ok())
        .expect("port in the banner");
    redis::Client::open(format!("redis://127.0.0.1:{port}/"))
        .and_then(|c| c.get_connection())
        .expect("connect")
}

fn config_get(c: &mut redis::Connection, name: &str) -> Vec<String> {
    redis::cmd("CONFIG")
        .arg("GET")
        .arg(name)
        .query(c)
        .expect("config get")
}

/// unit/introspection's "CONFIG save params special case": with no `save` line Redis's
/// schedule applies; the first line replaces it, later ones (the command line's too) add.
#[test]
fn the_default_schedule_is_redis_and_the_first_save_line_replaces_it() {
    let dir = temp_dir("default-schedule");
    let d = dir.display().to_string();
    let minimal = dir.join("minimal.conf");
    let cases: [(&str, &[&str], &str); 4] = [
        ("", &[], "3600 1 300 100 60 10000"),
        ("save 100 100\n", &[], "100 100"),
        ("save 900 1\n", &["--save", "100 100"], "900 1 100 100"),
        ("save 900 1\n", &["--save", ""], ""),
    ];
    for (extra, args, want) in cases {
        std::fs::write(&minimal, format!("dir {d}\nport 0\n{extra}")).expect("write conf");
        let mut child = Command::new(BIN)
            .arg(&minimal)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn");
        let out = lines_of(child.stdout.take().expect("stdout"));
        let mut c = connect_when_ready(&out);
        assert_eq!(
            config_get(&mut c, "save"),
            ["save", want],
            "{extra:?} {args:?}"
        );
        // Killed, not stopped: a stop would save under the schedule.
        let _ = child.kill();
        let _ = child.wait();
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_file_schedule_is_kept_and_a_bad_one_stops_the_start() {
    let dir = temp_dir("schedules");
    // Without the runner's override the file's `save 900 1` is in force, as in Redis.
    let (mut child, out, _err) = spawn(&conf(&dir, 0, ""));
    let mut c = connect_when_ready(&out);
    assert_eq!(config_get(&mut c, "save"), ["save", "900 1"]);
    // unit/introspection's CONFIG SET of a schedule, as Redis shows it back.
    let ok: String = redis::cmd("CONFIG")
        .arg("SET")
        .arg("save")
        .arg("3600 1  300 10")
        .query(&mut c)
        .unwrap();
    assert_eq!(ok, "OK");
    assert_eq!(config_get(&mut c, "save"), ["save", "3600 1 300 10"]);
    let _ = child.kill();
    let _ = child.wait();

    for (line, why) in [
        ("save 900", "Invalid save parameters"),
        ("save 0 10", "Invalid save parameters"),
        ("daemonize yes", "'daemonize yes' is not available"),
    ] {
        let out = Command::new(BIN)
            .arg(conf(&dir, 0, line))
            .output()
            .expect("run");
        assert_eq!(out.status.code(), Some(1), "{line}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("FATAL CONFIG FILE ERROR") && err.contains(why),
            "{line}: {err}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_busy_port_logs_what_the_runner_retries_on() {
    let dir = temp_dir("busy");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = taken.local_addr().unwrap().port();
    let (mut child, out, _err) = spawn(&conf(&dir, port, "save \n"));
    let lines = until(&out, "Failed listening on port");
    assert!(
        lines.last().is_some_and(
            |l| l.ends_with(&format!("Failed listening on port {port} (TCP), aborting."))
        ),
        "{lines:#?}"
    );
    assert_eq!(exit_code(&mut child, Duration::from_secs(5)), Some(1));
    let _ = std::fs::remove_dir_all(&dir);
}
