//! The client matrix: general-purpose Redis clients, installed from their package
//! registries and unmodified, against the real server. Each test starts the binary and runs
//! one client's script (tests/clients/matrix/, tests/clients/node-matrix/) with its port; a
//! script checks what the server answered and exits non-zero listing what failed. The
//! `redis` crate's checks are Rust, in this file.
//!
//! - redis-py 8, sync and asyncio (tests/clients/requirements.txt pins it);
//! - ioredis 6 and node-redis 5 (tests/clients/node-matrix, pinned by its lock file and
//!   installed with `npm ci` when its node_modules are missing);
//! - the `redis` crate: multiplexed connection and ConnectionManager;
//! - redis-cli scripted (`--pipe`, `-3`, `--scan`, `--bigkeys`, `--memkeys`, `--latency`).
//!
//! A client that can't run here (python3, node or redis-cli missing, a package not
//! installed) prints a NOTICE and passes, except under CI (`CI` set), where `.ci/run`
//! installs them all: there it fails.

mod support;

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::TestServer;

/// The scripts take a few seconds; this only catches one that hangs.
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(90);

fn clients_dir(sub: &str) -> PathBuf {
    [env!("CARGO_MANIFEST_DIR"), "tests", "clients", sub]
        .iter()
        .collect()
}

/// Fails under CI, prints a NOTICE elsewhere; `true` when the caller should go on.
fn available(what: &str, missing: Option<String>) -> bool {
    let Some(why) = missing else { return true };
    assert!(
        std::env::var_os("CI").is_none(),
        "{what} is needed under CI (.ci/run installs it): {why}"
    );
    eprintln!("NOTICE: {what} skipped: {why}");
    false
}

/// Runs `cmd` to its end (killed after [`SCRIPT_TIMEOUT`]); returns (success, combined
/// output, seconds).
fn run_bounded(mut cmd: Command) -> (bool, String, f64) {
    let started = Instant::now();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the client script");
    let readers: Vec<_> = [
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
    .map(|mut pipe| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = pipe.read_to_string(&mut text);
            text
        })
    })
    .collect();
    let status = loop {
        if let Ok(Some(st)) = child.try_wait() {
            break Some(st);
        }
        if started.elapsed() > SCRIPT_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let output: String = readers
        .into_iter()
        .map(|r| r.join().unwrap_or_default())
        .collect();
    let secs = started.elapsed().as_secs_f64();
    match status {
        Some(st) => (st.success(), output, secs),
        None => (
            false,
            format!("{output}\n(killed after {SCRIPT_TIMEOUT:?})"),
            secs,
        ),
    }
}

/// Starts a server, runs `cmd` with its port appended, and fails with the script's output
/// when the script does.
fn run_against_server(name: &str, mut cmd: Command) {
    let server = TestServer::start(&[]);
    cmd.arg(server.port.to_string());
    let (ok, output, secs) = run_bounded(cmd);
    eprintln!("{name} ({secs:.1} s):\n{output}");
    assert!(ok, "{name} failed against tidecache:\n{output}");
}

// ---------------------------------------------------------------------------------------
// redis-py

/// `Some(reason)` when python3 or redis-py 8 can't be imported.
fn redis_py_missing() -> Option<String> {
    let probe = "import redis, redis.asyncio; from redis.cache import CacheConfig; \
                 assert int(redis.__version__.split('.')[0]) >= 8, redis.__version__";
    match Command::new("python3")
        .args(["-c", probe])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
    {
        Err(e) => Some(format!("python3 not runnable ({e})")),
        Ok(o) if !o.status.success() => Some(format!(
            "redis-py 8 not importable: {} (python3 -m pip install -r tests/clients/requirements.txt)",
            String::from_utf8_lossy(&o.stderr).lines().last().unwrap_or("")
        )),
        Ok(_) => None,
    }
}

fn run_python(script: &str) {
    if !available(script, redis_py_missing()) {
        return;
    }
    let mut cmd = Command::new("python3");
    cmd.arg(clients_dir("matrix").join(script))
        // Keep the source tree free of __pycache__ (common.py is imported).
        .env("PYTHONDONTWRITEBYTECODE", "1");
    run_against_server(script, cmd);
}

/// redis-py 8 sync: RESP3 handshake and types, WATCH/MULTI with a retry after another
/// client's write, errors inside MULTI, pubsub over RESP2 and RESP3, the client-side cache
/// serving a repeated GET and DOC.FINDONE without a round trip until another client's
/// writes invalidate them, and DOC.* through `execute_command` (a TTL index included).
#[test]
fn redis_py_sync() {
    run_python("redis_py_sync.py");
}

/// redis-py 8 asyncio: RESP3, WATCH/MULTI retry and 50 concurrent WATCH increments, pubsub,
/// concurrent DOC.* commands.
#[test]
fn redis_py_asyncio() {
    run_python("redis_py_asyncio.py");
}
