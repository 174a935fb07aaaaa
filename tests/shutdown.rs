//! SHUTDOWN and the signals as Redis 7.0's prepareForShutdown: the final save is made before
//! the server stops serving; a save that fails keeps it running (unless FORCE, or `force` in
//! `shutdown-on-sigterm`), and a save that succeeds holds every write acknowledged before
//! the exit.

mod support;

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use support::{eventually, int, TestServer};

fn temp_dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("tc-shutdown-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("dir");
    d
}

#[test]
fn a_failed_final_save_keeps_the_server_running_unless_forced() {
    let dir = temp_dir("failed");
    let d = dir.to_str().expect("utf-8");
    let mut s = TestServer::start(&["--dir", d, "--save", "3600 1"]);
    let mut c = s.conn();
    let _: () = redis::cmd("SET").arg("k").arg("v").query(&mut c).unwrap();
    // The directory goes away: the final save cannot be written.
    std::fs::remove_dir_all(&dir).expect("rm dir");
    let e = support::err_text(redis::cmd("SHUTDOWN").query::<String>(&mut c));
    assert_eq!(e, "ERR Errors trying to SHUTDOWN. Check logs.");
    // Still serving, writes included (the pause of the attempt is lifted).
    let _: () = redis::cmd("SET").arg("k2").arg("v").query(&mut c).unwrap();
    assert_eq!(int(&mut c, &["DBSIZE"]), 2);

    // A signal under the default shutdown-on-sigterm: the same refusal, logged.
    s.signal("-TERM");
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        s.child.try_wait().expect("wait").is_none(),
        "exited on SIGTERM"
    );
    let _: () = redis::cmd("SET").arg("k3").arg("v").query(&mut c).unwrap();

    // FORCE exits anyway.
    let r = redis::cmd("SHUTDOWN").arg("FORCE").query::<String>(&mut c);
    assert!(r.is_err(), "no reply: the connection closes");
    assert_eq!(s.wait_exit(), Some(0));
}

#[test]
fn sigterm_with_force_exits_though_the_save_fails() {
    let dir = temp_dir("force");
    let d = dir.to_str().expect("utf-8");
    let mut s = TestServer::start(&[
        "--dir",
        d,
        "--save",
        "3600 1",
        "--shutdown-on-sigterm",
        "force",
    ]);
    let mut c = s.conn();
    let _: () = redis::cmd("SET").arg("k").arg("v").query(&mut c).unwrap();
    std::fs::remove_dir_all(&dir).expect("rm dir");
    s.signal("-TERM");
    assert_eq!(s.wait_exit(), Some(0));
}

/// Writers keep going while SHUTDOWN saves: every increment acknowledged before the exit is in
/// the file the next start loads.
#[test]
fn every_write_acknowledged_before_shutdown_is_in_the_final_save() {
    let dir = temp_dir("acked");
    let d = dir.to_str().expect("utf-8").to_string();
    let mut s = TestServer::start(&["--dir", &d, "--save", "3600 1"]);
    let acked: Vec<Arc<AtomicI64>> = (0..4).map(|_| Arc::new(AtomicI64::new(0))).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = acked
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let (a, stop, mut c) = (a.clone(), stop.clone(), s.conn());
            std::thread::spawn(move || {
                let key = format!("counter:{i}");
                while !stop.load(Ordering::Relaxed) {
                    match redis::cmd("INCR").arg(&key).query::<i64>(&mut c) {
                        Ok(v) => a.store(v, Ordering::Relaxed),
                        Err(_) => return,
                    }
                }
            })
        })
        .collect();
    assert!(eventually(5.0, || acked
        .iter()
        .all(|a| a.load(Ordering::Relaxed) > 100)));
    let mut c = s.conn();
    let _ = redis::cmd("SHUTDOWN").query::<String>(&mut c);
    assert_eq!(s.wait_exit(), Some(0));
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        let _ = w.join();
    }
    let s = TestServer::start(&["--dir", &d, "--save", ""]);
    let mut c = s.conn();
    for (i, a) in acked.iter().enumerate() {
        let saved = int(&mut c, &["GET", &format!("counter:{i}")]);
        assert!(
            saved >= a.load(Ordering::Relaxed),
            "counter:{i}: {saved} saved, {} acknowledged",
            a.load(Ordering::Relaxed)
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A master with a replica that stopped reading (SIGSTOP) and so lags behind its writes.
fn master_with_a_lagging_replica(timeout: &str) -> (TestServer, TestServer) {
    let master = TestServer::start(&["--shutdown-timeout", timeout]);
    let replica = TestServer::start(&[]);
    let mut r = replica.conn();
    support::replicate(&mut r, &master);
    replica.signal("-STOP");
    let mut m = master.conn();
    let _: () = redis::cmd("SET")
        .arg("k")
        .arg("v")
        .query(&mut m)
        .expect("set");
    (master, replica)
}

/// SHUTDOWN waits, writes paused, for a replica that has not acknowledged every write, up to
/// `shutdown-timeout` (Redis 7's `isReadyToShutdown`), then exits and logs the replica as
/// lagging; SHUTDOWN ABORT during the wait cancels it and writes resume; NOW skips it.
#[test]
fn shutdown_waits_for_a_lagging_replica_up_to_the_timeout() {
    // ABORT.
    let (master, replica) = master_with_a_lagging_replica("30");
    let mut a = master.raw();
    a.send(&support::resp(&["SHUTDOWN", "NOSAVE"]));
    let mut b = master.conn();
    // INFO tells the shutdown in progress, as Redis 7's `shutdown_in_milliseconds`.
    assert!(eventually(5.0, || {
        support::info_value(&mut b, "server", "shutdown_in_milliseconds")
            .and_then(|v| v.parse::<u64>().ok())
            .is_some_and(|ms| ms > 0 && ms <= 30_000)
    }));
    let mut last = String::new();
    assert!(
        eventually(5.0, || {
            last = support::q::<String>(&mut b, &["SHUTDOWN", "ABORT"])
                .unwrap_or_else(|e| e.to_string());
            last == "OK"
        }),
        "SHUTDOWN ABORT: {last}"
    );
    assert_eq!(
        a.read_until(b"\r\n"),
        b"-ERR Errors trying to SHUTDOWN. Check logs.\r\n"
    );
    assert_eq!(
        support::q::<String>(&mut b, &["SET", "after", "1"]).expect("set"),
        "OK"
    );
    assert_eq!(
        support::reply_text(&mut b, &["SHUTDOWN", "ABORT"]),
        "ERR No shutdown in progress."
    );
    assert_eq!(
        support::info_value(&mut b, "server", "shutdown_in_milliseconds").as_deref(),
        Some("0")
    );
    drop(master);
    drop(replica);

    // The timeout.
    let (mut master, replica) = master_with_a_lagging_replica("2");
    let mut a = master.raw();
    let t = std::time::Instant::now();
    a.send(&support::resp(&["SHUTDOWN", "NOSAVE"]));
    assert_eq!(master.wait_exit(), Some(0));
    let waited = t.elapsed();
    assert!(
        waited >= Duration::from_millis(1900) && waited < Duration::from_secs(8),
        "exited after {waited:?}"
    );
    drop(replica);

    // NOW.
    let (mut master, replica) = master_with_a_lagging_replica("30");
    let mut a = master.raw();
    let t = std::time::Instant::now();
    a.send(&support::resp(&["SHUTDOWN", "NOW", "NOSAVE"]));
    assert_eq!(master.wait_exit(), Some(0));
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "NOW waited {:?}",
        t.elapsed()
    );
    drop(replica);
}

/// A replica that keeps up: the shutdown waits only until it has acknowledged the last
/// write, so everything the master acknowledged is on the replica when the master is gone.
#[test]
fn shutdown_exits_once_the_replica_has_every_write() {
    let mut master = TestServer::start(&["--shutdown-timeout", "30"]);
    let replica = TestServer::start(&[]);
    let mut r = replica.conn();
    support::replicate(&mut r, &master);
    let mut m = master.conn();
    let mut pipe = redis::pipe();
    for i in 0..5000 {
        pipe.cmd("SET").arg(format!("k{i}")).arg(i).ignore();
    }
    let _: () = pipe.query(&mut m).expect("writes");
    let mut a = master.raw();
    let t = std::time::Instant::now();
    a.send(&support::resp(&["SHUTDOWN", "NOSAVE"]));
    assert_eq!(master.wait_exit(), Some(0));
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "took {:?}",
        t.elapsed()
    );
    assert_eq!(int(&mut r, &["DBSIZE"]), 5000);
}
