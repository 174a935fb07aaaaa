//! Starts the real server binary on a free port for integration tests.
#![allow(dead_code)]

pub mod cluster;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct TestServer {
    pub child: Child,
    pub port: u16,
}

impl TestServer {
    pub fn start(extra: &[&str]) -> TestServer {
        Self::start_with(None, extra)
    }

    /// Starts `tidecache-server [conf] --port 0 [extra...]` and reads the port it chose from
    /// its startup banner, so parallel tests can never race for a port.
    pub fn start_with(conf: Option<&str>, extra: &[&str]) -> TestServer {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_tidecache-server"));
        if let Some(c) = conf {
            cmd.arg(c);
        }
        // No snapshot schedule (Redis's default has one): a test server runs in the
        // project's directory and must not leave a dump.rdb there for the next one to load.
        // A test's own `--save` in `extra` still sets one, as the first after `save ""`.
        cmd.args(["--port", "0", "--loglevel", "notice", "--save", ""])
            .args(extra);
        let mut child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn server");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, rx) = std::sync::mpsc::channel();
        // Keep draining the log so the server never blocks on a full pipe.
        std::thread::spawn(move || {
            let mut sent = false;
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if !sent {
                    if let Some(rest) = line.split("started: port ").nth(1) {
                        let port: u16 = rest
                            .split(',')
                            .next()
                            .and_then(|p| p.parse().ok())
                            .unwrap_or(0);
                        let _ = tx.send(port);
                        sent = true;
                    }
                }
            }
        });
        let port = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("server did not start");
        TestServer { child, port }
    }

    pub fn client(&self) -> redis::Client {
        redis::Client::open(format!("redis://127.0.0.1:{}/", self.port)).expect("client")
    }

    pub fn conn(&self) -> redis::Connection {
        self.client().get_connection().expect("connect")
    }

    pub fn raw(&self) -> Raw {
        let s = TcpStream::connect(("127.0.0.1", self.port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(5))).ok();
        Raw(s)
    }

    /// Sends the process a signal (`-TERM`, `-STOP`, ...) with kill(1).
    pub fn signal(&self, sig: &str) {
        let st = Command::new("kill")
            .args([sig, &self.child.id().to_string()])
            .status()
            .expect("kill");
        assert!(st.success());
    }

    /// Waits for the process to exit and returns its exit code.
    pub fn wait_exit(&mut self) -> Option<i32> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(Some(st)) = self.child.try_wait() {
                return st.code();
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A raw TCP connection for byte-exact checks.
pub struct Raw(pub TcpStream);

impl Raw {
    pub fn send(&mut self, bytes: &[u8]) {
        self.0.write_all(bytes).expect("write");
    }

    /// Reads until `n` bytes arrived (or the peer closed / timed out).
    pub fn read_n(&mut self, n: usize) -> Vec<u8> {
        let mut out = vec![0u8; n];
        let mut got = 0;
        while got < n {
            match self.0.read(&mut out[got..]) {
                Ok(0) | Err(_) => break,
                Ok(k) => got += k,
            }
        }
        out.truncate(got);
        out
    }

    /// Sends `req` and expects exactly `expected` back.
    pub fn roundtrip(&mut self, req: &[u8], expected: &[u8]) {
        self.send(req);
        let got = self.read_n(expected.len());
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(expected),
            "reply to {:?}",
            String::from_utf8_lossy(req)
        );
    }

    /// Reads until what arrived ends with `suffix`; panics if the connection ends first.
    pub fn read_until(&mut self, suffix: &[u8]) -> Vec<u8> {
        let mut got = Vec::new();
        while !got.ends_with(suffix) {
            let b = self.read_n(1);
            assert!(
                !b.is_empty(),
                "reply cut short: {}",
                String::from_utf8_lossy(&got)
            );
            got.extend(b);
        }
        got
    }

    /// True once the server has closed the connection.
    pub fn closed(&mut self) -> bool {
        let mut b = [0u8; 1];
        matches!(self.0.read(&mut b), Ok(0))
    }
}

/// Encodes a request as a RESP array of bulk strings.
pub fn resp(args: &[&str]) -> Vec<u8> {
    let mut v = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        v.extend_from_slice(format!("${}\r\n{}\r\n", a.len(), a).as_bytes());
    }
    v
}

/// An error reply put back together as the server sent it ("CODE detail").
pub fn err_text<T: std::fmt::Debug>(r: redis::RedisResult<T>) -> String {
    let e = r.expect_err("expected an error");
    match (e.code(), e.detail()) {
        (Some(code), Some(detail)) => format!("{code} {detail}"),
        _ => e.to_string(),
    }
}

/// Sends one command given as words.
pub fn q<T: redis::FromRedisValue>(
    c: &mut redis::Connection,
    args: &[&str],
) -> redis::RedisResult<T> {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(c)
}

/// A command's reply as text, for comparing two servers' answers: the value's debug form,
/// or an error as the server sent it ("CODE detail").
pub fn reply_text(c: &mut redis::Connection, args: &[&str]) -> String {
    match q::<redis::Value>(c, args) {
        Ok(v) => format!("{v:?}"),
        Err(e) => err_text::<()>(Err(e)),
    }
}

/// A command whose reply is an array of strings.
pub fn strs(c: &mut redis::Connection, args: &[&str]) -> Vec<String> {
    q::<Vec<String>>(c, args).expect("array of strings")
}

/// A command whose reply is an integer.
pub fn int(c: &mut redis::Connection, args: &[&str]) -> i64 {
    q::<i64>(c, args).expect("integer")
}

/// Polls `f` every 50 ms until it returns true or `secs` pass; returns whether it did.
pub fn eventually(secs: f64, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    loop {
        if f() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A real `redis-server` 7 on a free port, the reference the comparison tests hold
/// tidecache's replies to. Killed on drop.
pub struct ReferenceRedis {
    child: Child,
    pub port: u16,
}

impl ReferenceRedis {
    /// Starts one, or says why not and returns `None` when `redis-server` is not installed.
    /// Under CI (`CI` set) a missing reference fails the test instead: CI installs it, and a
    /// comparison that silently skips there would prove nothing.
    pub fn start() -> Option<ReferenceRedis> {
        Self::start_with(&[])
    }

    /// [`ReferenceRedis::start`] with more arguments for redis-server.
    pub fn start_with(extra: &[&str]) -> Option<ReferenceRedis> {
        // A port found free can be taken by another test's reference before ours binds it:
        // ours then exits, and the readiness check would reach the other one (which goes
        // away when its test ends). So the server that answers must be our child.
        for _ in 0..5 {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .map(|a| a.port())
                .expect("free port");
            // Its own directory: a replica's RDB (or a save) never lands in the project's,
            // where every later test server would load it.
            let dir = std::env::temp_dir().join(format!("tidecache-ref-{port}"));
            let _ = std::fs::create_dir_all(&dir);
            let child = Command::new("redis-server")
                .args([
                    "--port",
                    &port.to_string(),
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    "--dir",
                    &dir.to_string_lossy(),
                ])
                .args(extra)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn();
            let child = match child {
                Ok(c) => c,
                Err(e) => {
                    assert!(
                        std::env::var_os("CI").is_none(),
                        "redis-server is needed for the comparison under CI: {e}"
                    );
                    eprintln!(
                        "NOTICE: redis-server not on PATH ({e}); comparison with Redis skipped"
                    );
                    return None;
                }
            };
            let mut r = ReferenceRedis { child, port };
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if let Some(pid) = server_pid(port) {
                    if pid == r.child.id() {
                        return Some(r);
                    }
                    break;
                }
                if matches!(r.child.try_wait(), Ok(Some(_))) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = r.child.kill();
        }
        panic!("redis-server did not start on a port of its own");
    }

    /// A connection to it.
    pub fn conn(&self) -> redis::Connection {
        redis::Client::open(format!("redis://127.0.0.1:{}/", self.port))
            .and_then(|c| c.get_connection())
            .expect("connect to the reference redis-server")
    }
}

/// The `process_id` of the Redis-protocol server answering on `port`, if one answers.
fn server_pid(port: u16) -> Option<u32> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    s.write_all(b"*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n").ok()?;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&got).contains("process_id:") || !got.ends_with(b"\r\n") {
        let n = s.read(&mut buf).ok()?;
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&got);
    let line = text.lines().find(|l| l.starts_with("process_id:"))?;
    line["process_id:".len()..].trim().parse().ok()
}

impl Drop for ReferenceRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The value of `field` in `INFO section`, if the section has it.
pub fn info_value(c: &mut redis::Connection, section: &str, field: &str) -> Option<String> {
    let info: String = redis::cmd("INFO").arg(section).query(c).expect("info");
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .map(|v| v.trim().to_string())
}

/// Resident set size of process `pid` in KiB, from /proc (0 where unavailable).
pub fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|n| n.parse().ok()))
        })
        .unwrap_or(0)
}

/// `redis-check-aof` (redis-tools) accepts the directory's manifest and files.
pub fn check_aof(dir: &std::path::Path) {
    let manifest = dir.join("appendonlydir/appendonly.aof.manifest");
    match std::process::Command::new("redis-check-aof")
        .arg(&manifest)
        .output()
    {
        Ok(out) => {
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(out.status.success(), "{text}");
            assert!(
                text.contains("All AOF files and manifest are valid"),
                "{text}"
            );
        }
        Err(e) => {
            assert!(
                std::env::var_os("CI").is_none(),
                "redis-check-aof is needed under CI: {e}"
            );
            eprintln!("redis-check-aof not found ({e}): skipping the check");
        }
    }
}

/// Runs a client script to its end (stopped after `timeout`: SIGTERM, so a script can stop
/// the workers it started, then SIGKILL 15 s later); returns (success, combined
/// output, seconds).
pub fn run_bounded(mut cmd: Command, timeout: Duration) -> (bool, String, f64) {
    let started = Instant::now();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the client script");
    let mut readers = Vec::new();
    for pipe in [
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    ]
    .into_iter()
    .flatten()
    {
        readers.push(std::thread::spawn(move || {
            let mut pipe = pipe;
            let mut text = String::new();
            let _ = pipe.read_to_string(&mut text);
            text
        }));
    }
    let status = loop {
        if let Ok(Some(st)) = child.try_wait() {
            break Some(st);
        }
        if started.elapsed() > timeout {
            // SIGTERM first: the script then stops the worker it started.
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
            let grace = Instant::now();
            while grace.elapsed() < Duration::from_secs(15) {
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let output: String = readers
        .into_iter()
        .map(|r| r.join().unwrap_or_default())
        .collect();
    let secs = started.elapsed().as_secs_f64();
    match status {
        Some(st) => (st.success(), output, secs),
        None => (false, format!("{output}\n(killed after {timeout:?})"), secs),
    }
}

/// Makes `replica` follow `master` (REPLICAOF) and waits for the link to come up.
pub fn replicate(replica: &mut redis::Connection, master: &TestServer) {
    replicate_port(replica, master.port);
}

/// [`replicate`] to whatever server listens on `port` (a tidecache or a redis-server).
pub fn replicate_port(replica: &mut redis::Connection, port: u16) {
    let _: String = q(replica, &["REPLICAOF", "127.0.0.1", &port.to_string()]).expect("replicaof");
    assert!(
        eventually(10.0, || info_value(
            replica,
            "replication",
            "master_link_status"
        )
        .as_deref()
            == Some("up")),
        "the link did not come up"
    );
}

/// A stand-in MIGRATE target that holds its answer: it reads until `marker` (RESTORE,
/// DOC.RESTORE) has arrived `count` times, says so on `got`, waits for `go`, then answers
/// `+OK` to SELECT and each restore and keeps the socket open until the source is done.
pub struct HeldTarget {
    pub port: u16,
    pub got: std::sync::mpsc::Receiver<()>,
    pub go: std::sync::mpsc::Sender<()>,
    pub thread: std::thread::JoinHandle<()>,
}

pub fn held_target(marker: &'static [u8], count: usize) -> HeldTarget {
    let fake = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = fake.local_addr().unwrap().port();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let (got_tx, got_rx) = std::sync::mpsc::channel::<()>();
    let thread = std::thread::spawn(move || {
        let (mut conn, _) = fake.accept().unwrap();
        conn.set_read_timeout(Some(Duration::from_secs(5))).ok();
        let mut buf = [0u8; 4096];
        let mut seen = Vec::new();
        while seen.windows(marker.len()).filter(|w| *w == marker).count() < count {
            let n = conn.read(&mut buf).unwrap();
            assert!(n > 0);
            seen.extend_from_slice(&buf[..n]);
        }
        got_tx.send(()).unwrap();
        go_rx.recv().unwrap();
        let mut answer = b"+OK\r\n".to_vec();
        for _ in 0..count {
            answer.extend_from_slice(b"+OK\r\n");
        }
        conn.write_all(&answer).unwrap();
        let _ = conn.read(&mut buf);
    });
    HeldTarget {
        port,
        got: got_rx,
        go: go_tx,
        thread,
    }
}
