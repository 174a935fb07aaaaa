//! Real job-queue libraries, unmodified, against the real server: each test runs a Python
//! script of tests/clients/ (it starts the library's worker, sends jobs, reads results back,
//! and exits non-zero saying what failed) with the server's port.
//!
//! Without the Python packages (tests/clients/requirements.txt) a test prints a NOTICE and
//! passes, except under CI (`CI` set), which installs them: there it fails.
//!
//! A library that needs commands the server does not have yet is not run against it: the
//! test asks `COMMAND INFO` first, prints `SKIPPED` with the missing commands and what the
//! library needs them for, and runs the script against a reference `redis-server` instead
//! (when one is installed), so the script itself stays known to work. Once the commands
//! exist, the same test runs against the server with no change here.

mod support;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;
use support::{run_bounded, ReferenceRedis, TestServer};

/// The scripts bound themselves well under a minute; this only catches one that hangs.
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(120);

struct Client {
    /// Script under tests/clients/.
    script: &'static str,
    /// Extra arguments after the port.
    args: &'static [&'static str],
    /// Python modules the script imports (checked before running it).
    modules: &'static [&'static str],
    /// Commands the library sends, with what it needs each for; the test is skipped while
    /// the server lacks one of them.
    needs: &'static [(&'static str, &'static str)],
}

/// `Some(reason)` when the Python side can't run here (python3 or a package missing).
fn python_missing(modules: &[&str]) -> Option<String> {
    let imports = format!("import {}", modules.join(", "));
    match Command::new("python3")
        .args(["-c", &imports])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
    {
        Err(e) => Some(format!("python3 not runnable ({e})")),
        Ok(o) if !o.status.success() => Some(format!(
            "`{imports}` failed: {}",
            String::from_utf8_lossy(&o.stderr)
                .lines()
                .last()
                .unwrap_or("")
        )),
        Ok(_) => None,
    }
}

/// The commands of `names` that the server at `port` does not know (`COMMAND INFO` nil).
fn missing_commands(s: &TestServer, names: &[&str]) -> Vec<String> {
    let mut c = s.conn();
    names
        .iter()
        .filter(|name| {
            let info: Vec<redis::Value> = redis::cmd("COMMAND")
                .arg("INFO")
                .arg(**name)
                .query(&mut c)
                .expect("COMMAND INFO");
            matches!(info.first(), None | Some(redis::Value::Nil))
        })
        .map(|n| n.to_uppercase())
        .collect()
}

/// Runs the script with `port`; returns (success, combined output, seconds).
fn run_script(client: &Client, port: u16) -> (bool, String, f64) {
    let path: PathBuf = [
        env!("CARGO_MANIFEST_DIR"),
        "tests",
        "clients",
        client.script,
    ]
    .iter()
    .collect();
    let mut cmd = Command::new("python3");
    cmd.arg(&path)
        .arg(port.to_string())
        .args(client.args)
        // Keep the source tree free of __pycache__ (the workers import the scripts).
        .env("PYTHONDONTWRITEBYTECODE", "1");
    run_bounded(cmd, SCRIPT_TIMEOUT)
}

fn run_client(client: &Client) {
    if let Some(why) = python_missing(client.modules) {
        assert!(
            std::env::var_os("CI").is_none(),
            "{}: the Python packages are needed under CI \
             (python3 -m pip install -r tests/clients/requirements.txt): {why}",
            client.script
        );
        eprintln!(
            "NOTICE: {} skipped: {why} (python3 -m pip install -r tests/clients/requirements.txt)",
            client.script
        );
        return;
    }
    let server = TestServer::start(&[]);
    let names: Vec<&str> = client.needs.iter().map(|(n, _)| *n).collect();
    let missing = missing_commands(&server, &names);
    if missing.is_empty() {
        let (ok, output, secs) = run_script(client, server.port);
        eprintln!(
            "{} against tidecache ({secs:.1} s):\n{output}",
            client.script
        );
        assert!(ok, "{} failed against tidecache:\n{output}", client.script);
        return;
    }
    drop(server);
    let reasons: Vec<String> = client
        .needs
        .iter()
        .filter(|(n, _)| missing.iter().any(|m| m.eq_ignore_ascii_case(n)))
        .map(|(n, why)| format!("{} ({why})", n.to_uppercase()))
        .collect();
    eprintln!(
        "SKIPPED: {} against tidecache: the server lacks {}",
        client.script,
        reasons.join("; ")
    );
    // Keep the script honest while it can't run against tidecache.
    if let Some(reference) = ReferenceRedis::start() {
        let (ok, output, secs) = run_script(client, reference.port);
        eprintln!(
            "{} against redis-server instead ({secs:.1} s):\n{output}",
            client.script
        );
        assert!(
            ok,
            "{} failed against redis-server:\n{output}",
            client.script
        );
    }
}

/// Celery 5 with the Redis broker and the Redis result backend: a group of 20 additions,
/// a failing task reported with its exception, a countdown=2 task, a chord.
#[test]
fn celery_worker_broker_and_result_backend() {
    run_client(&Client {
        script: "celery_e2e.py",
        args: &[],
        modules: &["celery", "kombu", "redis"],
        needs: &[
            (
                "evalsha",
                "kombu's unacked-restore mutex is a redis-py Lock, released by a script, when \
                 the worker starts; kombu's binding refresh/sweep of expiring queues; the \
                 result backend's chord counting",
            ),
            (
                "script",
                "SCRIPT LOAD and SCRIPT EXISTS, which redis-py sends before EVALSHA",
            ),
        ],
    });
}

/// The same Celery checks (but the chord) with the few Lua scripts a worker needs to start
/// and run plain tasks (redis-py's lock release, kombu's binding refresh and sweep) run client
/// side by the script instead of by EVALSHA: not Celery unmodified, but all the rest of its
/// broker and result-backend traffic (BRPOP, MULTI/EXEC, the unacked hash and sorted set,
/// PUBLISH/PSUBSCRIBE, per-task SUBSCRIBE, SETEX/MGET, SELECT) against the server today.
#[test]
fn celery_with_its_scripts_run_client_side() {
    run_client(&Client {
        script: "celery_e2e.py",
        args: &["--emulate-scripts"],
        modules: &["celery", "kombu", "redis"],
        needs: &[],
    });
}

/// rq: a burst worker runs successful, failing and dependent jobs; results, the failed
/// registry and the dependency are read back.
#[test]
fn rq_burst_worker_results_and_failed_registry() {
    run_client(&Client {
        script: "rq_e2e.py",
        args: &[],
        modules: &["rq", "redis"],
        needs: &[
            (
                "xadd",
                "rq stores every job's result in a stream rq:results:<id>",
            ),
            ("xrevrange", "reading a job's latest result back"),
        ],
    });
}

/// rq's scheduler: a job enqueued with enqueue_in(2 s) runs no sooner than 2 s later.
#[test]
fn rq_scheduler_enqueue_in() {
    run_client(&Client {
        script: "rq_e2e.py",
        args: &["--scheduled"],
        modules: &["rq", "redis"],
        needs: &[
            (
                "xadd",
                "rq stores every job's result in a stream rq:results:<id>",
            ),
            ("xrevrange", "reading a job's latest result back"),
            (
                "evalsha",
                "the scheduler's lock is taken, refreshed and released by scripts",
            ),
            ("script", "SCRIPT LOAD, which redis-py sends before EVALSHA"),
        ],
    });
}

/// The Node project of tests/clients/bullmq: installed with `npm ci` (its lock file) when
/// its node_modules are missing. `Some(reason)` when Node or the install is not available.
fn bullmq_missing() -> Option<String> {
    let dir: PathBuf = [env!("CARGO_MANIFEST_DIR"), "tests", "clients", "bullmq"]
        .iter()
        .collect();
    if let Err(e) = Command::new("node").arg("--version").output() {
        return Some(format!("node not runnable ({e})"));
    }
    if dir.join("node_modules/bullmq/package.json").exists() {
        return None;
    }
    let mut npm = Command::new("npm");
    npm.args(["ci", "--no-audit", "--no-fund"])
        .current_dir(&dir);
    let (ok, output, _) = run_bounded(npm, SCRIPT_TIMEOUT);
    (!ok).then(|| format!("npm ci in tests/clients/bullmq failed: {output}"))
}

/// BullMQ (Node, unmodified, pinned in tests/clients/bullmq/package.json): a Queue, a Worker
/// with concurrency 4, 20 jobs, a delayed job, a job that fails once and succeeds on its
/// retry, and QueueEvents seeing every completion. BullMQ is Lua scripts end to end (EVALSHA
/// of about forty scripts using cmsgpack, KEYS built inside the scripts), with BZPOPMIN on
/// its marker key and XREAD BLOCK on its events stream.
#[test]
fn bullmq_queue_worker_delayed_retry_events() {
    if let Some(why) = bullmq_missing() {
        assert!(
            std::env::var_os("CI").is_none(),
            "bullmq: Node and npm are needed under CI: {why}"
        );
        eprintln!("NOTICE: bullmq_e2e.js skipped: {why}");
        return;
    }
    let server = TestServer::start(&[]);
    let mut node = Command::new("node");
    node.current_dir(
        [env!("CARGO_MANIFEST_DIR"), "tests", "clients", "bullmq"]
            .iter()
            .collect::<PathBuf>(),
    )
    .arg("bullmq_e2e.js")
    .arg(server.port.to_string());
    let (ok, output, secs) = run_bounded(node, SCRIPT_TIMEOUT);
    eprintln!("bullmq_e2e.js against tidecache ({secs:.1} s):\n{output}");
    assert!(ok, "bullmq_e2e.js failed against tidecache:\n{output}");
}
