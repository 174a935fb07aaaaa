//! DEBUG's switches for Redis's test suite: PAUSE-CRON stops the periodic work (active
//! expiry) until it is turned back on; SET-DISABLE-DENY-SCRIPTS lets scripts call commands
//! flagged noscript; AOF-FLUSH-SLEEP holds back each write of the journal, and replies
//! wait for it.
mod support;

use std::time::{Duration, Instant};
use support::{err_text, int, q, TestServer};

fn expired_keys(c: &mut redis::Connection) -> i64 {
    let info: String = redis::cmd("INFO").arg("stats").query(c).expect("info");
    info.lines()
        .find_map(|l| l.strip_prefix("expired_keys:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("expired_keys")
}

#[test]
fn pause_cron_holds_active_expiry() {
    let s = TestServer::start(&["--enable-debug-command", "yes", "--hz", "100"]);
    let mut c = s.conn();
    let _: () = q(&mut c, &["DEBUG", "PAUSE-CRON", "1"]).expect("pause");
    let _: () = q(&mut c, &["SET", "k", "v", "PX", "20"]).expect("set");
    std::thread::sleep(Duration::from_millis(300));
    // Nobody read the key and the cron is paused: it is still in the table.
    assert_eq!(expired_keys(&mut c), 0);
    let _: () = q(&mut c, &["DEBUG", "PAUSE-CRON", "0"]).expect("resume");
    let until = Instant::now() + Duration::from_secs(5);
    while expired_keys(&mut c) == 0 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(expired_keys(&mut c), 1);
}

#[test]
fn disable_deny_scripts_lets_scripts_call_noscript_commands() {
    let s = TestServer::start(&["--enable-debug-command", "yes"]);
    let mut c = s.conn();
    let script = ["EVAL", "return redis.call('client', 'id')", "0"];
    let e = err_text(q::<i64>(&mut c, &script));
    assert!(
        e.contains("This Redis command is not allowed from script"),
        "{e}"
    );
    let _: () = q(&mut c, &["DEBUG", "SET-DISABLE-DENY-SCRIPTS", "1"]).expect("debug");
    let id = int(&mut c, &["CLIENT", "ID"]);
    assert_eq!(int(&mut c, &script), id);
    let _: () = q(&mut c, &["DEBUG", "SET-DISABLE-DENY-SCRIPTS", "0"]).expect("debug");
    assert!(q::<i64>(&mut c, &script).is_err());
}

/// `DEBUG AOF-FLUSH-SLEEP` (Redis's integration/aof "AOF fsync always barrier issue"): each
/// write of the journal's buffer waits that long, a write's reply leaves only once its
/// record is in the file, and 0 turns it off.
#[test]
fn aof_flush_sleep_delays_the_journal_and_the_replies_wait() {
    let dir = std::env::temp_dir().join(format!("tidecache-flush-sleep-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let s = TestServer::start(&[
        "--enable-debug-command",
        "yes",
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
        "--dir",
        dir.to_str().expect("utf-8 path"),
    ]);
    let mut c = s.conn();
    let incr = dir.join("appendonlydir/appendonly.aof.1.incr.aof");
    let size = || std::fs::metadata(&incr).map(|m| m.len()).unwrap_or(0);
    let _: () = q(&mut c, &["DEBUG", "AOF-FLUSH-SLEEP", "300000"]).expect("sleep");
    let before = size();
    let t = Instant::now();
    assert_eq!(int(&mut c, &["INCR", "n"]), 1);
    assert!(
        t.elapsed() >= Duration::from_millis(290),
        "{:?}",
        t.elapsed()
    );
    assert!(size() > before);
    let _: () = q(&mut c, &["DEBUG", "AOF-FLUSH-SLEEP", "0"]).expect("off");
    let t = Instant::now();
    assert_eq!(int(&mut c, &["INCR", "n"]), 2);
    assert!(
        t.elapsed() < Duration::from_millis(250),
        "{:?}",
        t.elapsed()
    );
    drop(c);
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}
