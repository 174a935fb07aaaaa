//! The durability promise of `appendfsync always`, J and WAITAOF, held against the fsync
//! itself: the server runs under `strace`, which makes every `fdatasync` fail (a disk that
//! refuses) or take 150 ms (a slow disk). A reply that promises durability leaves only after
//! an fsync that succeeded and covers its record, and concurrent writers share fsyncs (group
//! commit). Without `strace` (or where it may not trace) the tests say so and pass, except
//! under CI.

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use support::resp;

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "tidecache-journal-fsync-{name}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// Whether `strace` runs here and may trace (containers can forbid ptrace).
fn strace_works() -> bool {
    let ok = Command::new("strace")
        .args(["-qq", "-o", "/dev/null", "true"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        assert!(
            std::env::var_os("CI").is_none(),
            "strace is needed under CI (apt-get install strace)"
        );
        eprintln!("strace cannot run here: skipping");
    }
    ok
}

/// The server under `strace`, every `fdatasync` tampered with as `inject` says; its calls
/// are logged to `log`. Killed (SIGKILL, the server itself) on drop.
struct Traced {
    strace: Child,
    port: u16,
    pid: u32,
    log: PathBuf,
}

impl Traced {
    fn start(dir: &Path, policy: &str, inject: &str) -> Traced {
        Traced::start_with(dir, policy, inject, &[], &[])
    }

    /// [`Traced::start`] with more server arguments and environment.
    fn start_with(
        dir: &Path,
        policy: &str,
        inject: &str,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Traced {
        let log = dir.join("strace.log");
        let mut strace = Command::new("strace")
            .args(["-f", "-qq", "--seccomp-bpf", "-e", "signal=none"])
            .args(["-e", "trace=fdatasync", "-e"])
            .arg(format!("inject=fdatasync:{inject}"))
            .arg("-o")
            .arg(&log)
            .arg(env!("CARGO_BIN_EXE_tidecache-server"))
            .args(["--port", "0", "--loglevel", "notice", "--dir"])
            .arg(dir)
            .args(["--appendonly", "yes", "--appendfsync", policy])
            .args(args)
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn strace");
        let stderr = strace.stderr.take().expect("stderr");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut sent = false;
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if !sent {
                    if let Some(rest) = line.split("started: port ").nth(1) {
                        let port = rest.split(',').next().and_then(|p| p.parse().ok());
                        let _ = tx.send(port.unwrap_or(0u16));
                        sent = true;
                    }
                }
            }
        });
        let port = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("server did not start");
        let mut t = Traced {
            strace,
            port,
            pid: 0,
            log,
        };
        let mut c = t.conn();
        let info = c.ask(&["INFO", "server"], Duration::from_secs(5));
        t.pid = info
            .lines()
            .find_map(|l| l.strip_prefix("process_id:"))
            .and_then(|p| p.trim().parse().ok())
            .expect("process_id");
        t
    }

    fn conn(&self) -> Conn {
        let s = TcpStream::connect(("127.0.0.1", self.port)).expect("connect");
        Conn(s)
    }

    /// `fdatasync` calls the server made so far.
    fn fdatasyncs(&self) -> usize {
        std::fs::read_to_string(&self.log)
            .map(|s| s.lines().filter(|l| l.contains("fdatasync(")).count())
            .unwrap_or(0)
    }
}

impl Drop for Traced {
    fn drop(&mut self) {
        // The server, not strace: a tracer that dies detaches, and its tracee runs on.
        if self.pid != 0 {
            let _ = Command::new("kill")
                .args(["-9", &self.pid.to_string()])
                .status();
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.strace.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.strace.kill();
        let _ = self.strace.wait();
    }
}

struct Conn(TcpStream);

impl Conn {
    fn send(&mut self, args: &[&str]) {
        self.0.write_all(&resp(args)).expect("write");
    }

    /// What arrives within `wait` (a whole reply once it starts: replies here are small and
    /// sent in one write).
    fn reply_within(&mut self, wait: Duration) -> String {
        self.0.set_read_timeout(Some(wait)).ok();
        let mut buf = [0u8; 4096];
        match self.0.read(&mut buf) {
            Ok(n) => {
                // The rest of a reply cut between segments.
                self.0
                    .set_read_timeout(Some(Duration::from_millis(50)))
                    .ok();
                let mut got = buf[..n].to_vec();
                while let Ok(k) = self.0.read(&mut buf) {
                    if k == 0 {
                        break;
                    }
                    got.extend_from_slice(&buf[..k]);
                }
                String::from_utf8_lossy(&got).into_owned()
            }
            Err(_) => String::new(),
        }
    }

    fn ask(&mut self, args: &[&str], wait: Duration) -> String {
        self.send(args);
        self.reply_within(wait)
    }
}

/// A disk whose fsync fails: the replies that promise durability (`always`, J, WAITAOF's
/// local count) never claim it, while everything else goes on being served; once the policy
/// no longer asks for the disk, new writes are answered when they are in the file.
#[test]
fn no_durable_reply_without_a_successful_fsync() {
    if !strace_works() {
        return;
    }
    let dir = temp_dir("eio");
    let s = Traced::start(&dir, "always", "error=EIO");
    let mut a = s.conn();
    a.send(&["SET", "a", "1"]);
    assert_eq!(a.reply_within(Duration::from_millis(1500)), "");
    // Another client is served meanwhile (the failed fsync holds no one else)...
    let mut b = s.conn();
    assert_eq!(b.ask(&["PING"], Duration::from_secs(5)), "+PONG\r\n");
    assert_eq!(b.ask(&["GET", "a"], Duration::from_secs(5)), "$1\r\n1\r\n");
    // ... but its writes under `always` wait too.
    b.send(&["SET", "b", "1"]);
    assert_eq!(b.reply_within(Duration::from_millis(500)), "");
    let mut c = s.conn();
    assert_eq!(
        c.ask(
            &["CONFIG", "SET", "appendfsync", "everysec"],
            Duration::from_secs(5)
        ),
        "+OK\r\n"
    );
    // Under everysec a write is answered once in the file...
    assert_eq!(c.ask(&["SET", "c", "1"], Duration::from_secs(5)), "+OK\r\n");
    // ... J still needs the disk, and WAITAOF counts no local fsync.
    c.send(&["DOC.INSERT", "docs", r#"{"_id":1}"#, "J"]);
    assert_eq!(c.reply_within(Duration::from_millis(1000)), "");
    let mut d = s.conn();
    assert_eq!(
        d.ask(&["WAITAOF", "0", "0", "300"], Duration::from_secs(5)),
        "*2\r\n:1\r\n:0\r\n",
        "nothing written by this client: nothing to wait for"
    );
    assert_eq!(d.ask(&["SET", "d", "1"], Duration::from_secs(5)), "+OK\r\n");
    let t = Instant::now();
    d.send(&["WAITAOF", "1", "0", "300"]);
    let got = d.reply_within(Duration::from_secs(5));
    assert_eq!(got, "*2\r\n:0\r\n:0\r\n", "WAITAOF 1 0 300");
    assert!(t.elapsed() >= Duration::from_millis(250));
    // The held replies never came, and the fsyncs were tried again meanwhile.
    assert_eq!(a.reply_within(Duration::from_millis(100)), "");
    assert_eq!(b.reply_within(Duration::from_millis(100)), "");
    assert!(s.fdatasyncs() >= 2, "fdatasync tried {}", s.fdatasyncs());
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A slow disk (each fsync 150 ms): every reply under `always` and every J reply comes after
/// an fsync, and writers that arrive together share one (40 clients do not take 40 fsyncs).
#[test]
fn concurrent_writers_share_fsyncs_and_each_waits_for_one() {
    if !strace_works() {
        return;
    }
    let dir = temp_dir("slow");
    let s = Traced::start(&dir, "always", "delay_enter=150000");
    let conns: Vec<Conn> = (0..40)
        .map(|_| {
            let mut c = s.conn();
            assert_eq!(c.ask(&["PING"], Duration::from_secs(5)), "+PONG\r\n");
            c
        })
        .collect();
    let before = s.fdatasyncs();
    let t = Instant::now();
    let start = std::sync::Arc::new(std::sync::Barrier::new(conns.len()));
    let clients: Vec<_> = conns
        .into_iter()
        .enumerate()
        .map(|(i, mut c)| {
            let start = start.clone();
            std::thread::spawn(move || {
                start.wait();
                let sent = Instant::now();
                if i % 4 == 0 {
                    c.send(&["DOC.INSERT", "docs", &format!(r#"{{"_id":{i}}}"#), "J"]);
                } else {
                    c.send(&["SET", &format!("k{i}"), "v"]);
                }
                let got = c.reply_within(Duration::from_secs(20));
                (got, sent.elapsed())
            })
        })
        .collect();
    for (i, h) in clients.into_iter().enumerate() {
        let (got, waited) = h.join().expect("client thread");
        assert!(!got.is_empty(), "no reply to client {i}");
        assert!(!got.starts_with('-'), "client {i}: {got}");
        // Answered after a whole fsync that began once its record was in the file.
        assert!(
            waited >= Duration::from_millis(140),
            "client {i} answered after {waited:?}"
        );
    }
    let took = t.elapsed();
    let fsyncs = s.fdatasyncs() - before;
    // One by one they would take 40 fsyncs (6 s); shared, a few.
    assert!(fsyncs <= 10, "{fsyncs} fdatasyncs for 40 writers");
    assert!(took < Duration::from_secs(4), "40 writers took {took:?}");
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A pop served for a blocked client by another client's push is a record of its own, made
/// after the push took its number. The popped client's reply waits for that record, and
/// WAITAOF then counts it: on a disk whose fsync fails, WAITAOF 1 after the pop must say
/// the pop is not on disk (it counted nothing before: the served path never told it of the
/// pop). Two I/O threads, so the push and the pop's reply run on different threads.
#[test]
fn a_served_pop_waits_for_its_own_record() {
    if !strace_works() {
        return;
    }
    let dir = temp_dir("served-pop");
    let s = Traced::start_with(&dir, "everysec", "error=EIO", &["--io-threads", "2"], &[]);
    let mut a = s.conn();
    let mut b = s.conn();
    a.send(&["BLPOP", "q", "0"]);
    // The BLPOP is blocked before the push arrives.
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        b.ask(&["LPUSH", "q", "job"], Duration::from_secs(5)),
        ":1\r\n"
    );
    assert_eq!(
        a.reply_within(Duration::from_secs(5)),
        "*2\r\n$1\r\nq\r\n$3\r\njob\r\n"
    );
    let t = Instant::now();
    assert_eq!(
        a.ask(&["WAITAOF", "1", "0", "300"], Duration::from_secs(5)),
        "*2\r\n:0\r\n:0\r\n",
        "the pop is not on disk"
    );
    assert!(t.elapsed() >= Duration::from_millis(250));
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Under `always` on a slow disk (each fsync 150 ms), the popped client's reply leaves only
/// after an fsync that began once the pop's record was in the file.
#[test]
fn a_served_pop_under_always_waits_for_its_fsync() {
    if !strace_works() {
        return;
    }
    let dir = temp_dir("served-pop-always");
    let s = Traced::start_with(
        &dir,
        "always",
        "delay_enter=150000",
        &["--io-threads", "2"],
        &[],
    );
    let mut a = s.conn();
    let mut b = s.conn();
    for round in 0..5 {
        a.send(&["BLPOP", "q", "0"]);
        std::thread::sleep(Duration::from_millis(100));
        let sent = Instant::now();
        b.send(&["LPUSH", "q", &format!("job{round}")]);
        let got = a.reply_within(Duration::from_secs(5));
        let waited = sent.elapsed();
        assert!(
            got.contains(&format!("job{round}")),
            "round {round}: {got:?}"
        );
        assert!(
            waited >= Duration::from_millis(140),
            "round {round}: the pop answered after {waited:?}, before an fsync"
        );
        assert_eq!(b.reply_within(Duration::from_secs(5)), ":1\r\n");
    }
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A script run on the script thread (the current-thread runtime of
/// TIDECACHE_CURRENT_THREAD) writes its record there: its caller's reply waits for it and
/// WAITAOF counts it.
#[test]
fn a_script_on_the_script_thread_is_counted_by_waitaof() {
    if !strace_works() {
        return;
    }
    let dir = temp_dir("script-thread");
    let s = Traced::start_with(
        &dir,
        "everysec",
        "error=EIO",
        &[],
        &[("TIDECACHE_CURRENT_THREAD", "1")],
    );
    let mut a = s.conn();
    assert_eq!(
        a.ask(
            &["EVAL", "return redis.call('SET', KEYS[1], 'v')", "1", "k"],
            Duration::from_secs(5)
        ),
        "+OK\r\n"
    );
    assert_eq!(
        a.ask(&["WAITAOF", "1", "0", "300"], Duration::from_secs(5)),
        "*2\r\n:0\r\n:0\r\n",
        "the script's write is not on disk"
    );
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}
