//! What Redis 7.0's own test units need when their runner starts the server itself
//! (`redis-tcl --spawn`): the save's child process and `rdb-key-save-delay`, DEBUG LOADAOF
//! with the journal off, SHUTDOWN closing the listening sockets at once.

mod support;

use std::time::Duration;
use support::*;

fn temp_dir(name: &str) -> String {
    let d = std::env::temp_dir().join(format!("tidecache-spawn-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("temp dir");
    d.to_string_lossy().into_owned()
}

/// The children of process `pid`, from /proc (what `pgrep -P` reads).
fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(p) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
            continue;
        };
        // pid (comm) state ppid ...: comm may hold spaces, so read after the last ')'.
        let after = stat.rsplit_once(')').map(|(_, a)| a).unwrap_or("");
        let ppid = after.split_whitespace().nth(1).and_then(|x| x.parse().ok());
        if ppid == Some(pid) {
            out.push(p);
        }
    }
    out
}

/// A server journaling every write at once (`appendfsync always`), with DEBUG on.
fn journaled_server(dir: &str) -> TestServer {
    TestServer::start(&[
        "--dir",
        dir,
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
        "--enable-debug-command",
        "yes",
    ])
}

/// The incremental journal file's text (lower case) once `ready` holds for it (2 s at most).
fn incr_journal_when(dir: &str, ready: impl Fn(&str) -> bool) -> String {
    let incr = std::fs::read_dir(std::path::Path::new(dir).join("appendonlydir"))
        .expect("aof dir")
        .flatten()
        .find(|e| e.file_name().to_string_lossy().ends_with(".incr.aof"))
        .expect("incr file");
    let mut text = String::new();
    assert!(
        eventually(2.0, || {
            text = std::fs::read_to_string(incr.path())
                .unwrap_or_default()
                .to_ascii_lowercase();
            ready(&text)
        }),
        "{text:?}"
    );
    text
}

fn info_field(c: &mut redis::Connection, section: &str, field: &str) -> String {
    let info: String = q(c, &["INFO", section]).expect("info");
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// `rdb-key-save-delay` is Redis's hidden test knob (named exactly it answers, `*` leaves it
/// out; negative values are valid); a BGSAVE has a child process while it runs, and killing
/// that child fails the save, as Redis's tests (`kill -9 [get_child_pid 0]`) expect.
#[test]
fn rdb_key_save_delay_and_the_save_child() {
    let dir = temp_dir("delay");
    let s = TestServer::start(&["--dir", &dir, "--save", ""]);
    let mut c = s.conn();
    let all: Vec<String> = q(&mut c, &["CONFIG", "GET", "*"]).expect("config get");
    assert!(!all.iter().any(|k| k == "rdb-key-save-delay"));
    assert_eq!(
        strs(&mut c, &["CONFIG", "GET", "rdb-key-save-delay"]),
        ["rdb-key-save-delay", "0"]
    );
    let _: () = q(&mut c, &["CONFIG", "SET", "rdb-key-save-delay", "-50"]).expect("negative");
    for i in 0..20 {
        let _: () = q(&mut c, &["SET", &format!("k{i}"), "v"]).expect("set");
    }
    // One second per key: the save is still running when we look.
    let _: () = q(&mut c, &["CONFIG", "SET", "rdb-key-save-delay", "1000000"]).expect("set");
    let started: String = q(&mut c, &["BGSAVE"]).expect("bgsave");
    assert_eq!(started, "Background saving started");
    assert_eq!(
        info_field(&mut c, "persistence", "rdb_bgsave_in_progress"),
        "1"
    );
    // The child exists when BGSAVE answers, as Redis's forked one (unit/other's "Don't
    // rehash if redis has child process" looks for it right after the save shows as running).
    let pid = s.child.id();
    let kids = children(pid);
    assert_eq!(kids.len(), 1, "one child while the save runs");
    // Killed, the save ends at once (not after 20 s of delays) and failed.
    unsafe_kill(kids[0]);
    assert!(eventually(2.0, || info_field(
        &mut c,
        "persistence",
        "rdb_bgsave_in_progress"
    ) == "0"));
    assert_eq!(
        info_field(&mut c, "persistence", "rdb_last_bgsave_status"),
        "err"
    );
    // Without the delay the next save succeeds and its child is gone when it ends.
    let _: () = q(&mut c, &["CONFIG", "SET", "rdb-key-save-delay", "0"]).expect("set");
    let _: String = q(&mut c, &["BGSAVE"]).expect("bgsave");
    assert!(eventually(5.0, || info_field(
        &mut c,
        "persistence",
        "rdb_bgsave_in_progress"
    ) == "0"));
    assert_eq!(
        info_field(&mut c, "persistence", "rdb_last_bgsave_status"),
        "ok"
    );
    assert!(eventually(2.0, || children(pid).is_empty()));
    let _ = std::fs::remove_dir_all(&dir);
}

fn unsafe_kill(pid: u32) {
    let st = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .expect("kill");
    assert!(st.success());
}

/// DEBUG LOADAOF with `appendonly no`, as Redis 7.0: the data is emptied and the files of
/// the manifest on disk (the base the last BGREWRITEAOF wrote) are loaded.
#[test]
fn debug_loadaof_with_the_journal_off() {
    let dir = temp_dir("loadaof");
    let s = TestServer::start(&["--dir", &dir, "--enable-debug-command", "yes"]);
    let mut c = s.conn();
    let e = err_text(q::<String>(&mut c, &["DEBUG", "LOADAOF"]));
    assert!(e.contains("no append only file"), "{e}");
    let _: () = q(&mut c, &["SET", "kept", "1"]).expect("set");
    let _: String = q(&mut c, &["BGREWRITEAOF"]).expect("bgrewriteaof");
    assert!(eventually(10.0, || info_field(
        &mut c,
        "persistence",
        "aof_rewrite_in_progress"
    ) == "0"));
    // Written after the rewrite, with no journal: gone after the load.
    let _: () = q(&mut c, &["SET", "after", "1"]).expect("set");
    let ok: String = q(&mut c, &["DEBUG", "LOADAOF"]).expect("loadaof");
    assert_eq!(ok, "OK");
    assert_eq!(int(&mut c, &["EXISTS", "kept"]), 1);
    assert_eq!(int(&mut c, &["EXISTS", "after"]), 0);
    let _ = std::fs::remove_dir_all(&dir);
}

/// SHUTDOWN closes the listening sockets before the connection that sent it is closed: a
/// client connecting right after is refused (Redis's scripting unit checks this).
#[test]
fn shutdown_refuses_the_next_connection_at_once() {
    for flags in [&["NOSAVE"][..], &[][..]] {
        let mut s = TestServer::start(&[]);
        let mut raw = s.raw();
        let mut words = vec!["SHUTDOWN"];
        words.extend_from_slice(flags);
        raw.send(&resp(&words));
        assert!(
            raw.closed(),
            "SHUTDOWN closes the connection without a reply"
        );
        let r = std::net::TcpStream::connect_timeout(
            &([127, 0, 0, 1], s.port).into(),
            Duration::from_secs(1),
        );
        assert!(r.is_err(), "connection accepted after SHUTDOWN {flags:?}");
        assert_eq!(s.wait_exit(), Some(0));
    }
}

/// The `id=` field's client's CLIENT LIST line.
fn client_line_of(c: &mut redis::Connection, id: i64) -> String {
    let list: String = q(c, &["CLIENT", "LIST", "ID", &id.to_string()]).expect("client list");
    list
}

/// A blocked client shows Redis's `b` flag; SWAPDB bringing an expired key in front of it
/// does not serve it (the key is deleted as expired), it stays blocked until unblocked.
#[test]
fn swapdb_does_not_serve_an_expired_key() {
    let s = TestServer::start(&["--enable-debug-command", "yes"]);
    let mut c = s.conn();
    let _: () = q(&mut c, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]).expect("debug");
    let _: () = q(&mut c, &["SELECT", "1"]).expect("select");
    let _: i64 = q(&mut c, &["RPUSH", "k", "hello"]).expect("rpush");
    let _: i64 = q(&mut c, &["PEXPIRE", "k", "100"]).expect("pexpire");
    let mut waiter = s.raw();
    waiter.roundtrip(&resp(&["SELECT", "9"]), b"+OK\r\n");
    waiter.send(&resp(&["CLIENT", "ID"]));
    let idline = String::from_utf8(waiter.read_until(b"\r\n")).expect("utf8");
    let id: i64 = idline.trim().trim_start_matches(':').parse().expect("id");
    waiter.send(&resp(&["BRPOP", "k", "0"]));
    assert!(eventually(5.0, || {
        let info: String = q(&mut c, &["INFO", "clients"]).expect("info");
        info.contains("blocked_clients:1")
    }));
    assert!(client_line_of(&mut c, id).contains(" flags=b "));
    std::thread::sleep(Duration::from_millis(150));
    let _: () = q(&mut c, &["SWAPDB", "1", "9"]).expect("swapdb");
    assert!(
        client_line_of(&mut c, id).contains(" flags=b "),
        "still blocked"
    );
    assert_eq!(int(&mut c, &["CLIENT", "UNBLOCK", &id.to_string()]), 1);
    waiter.roundtrip(b"", b"*-1\r\n");
    assert!(client_line_of(&mut c, id).contains(" flags=N "));
}

/// SCAN deletes the expired keys it meets, each as its own DEL in the journal (not wrapped
/// in MULTI/EXEC), as Redis propagates a lazy expiry.
#[test]
fn scan_journals_the_expired_keys_it_meets() {
    let dir = temp_dir("scan");
    let s = journaled_server(&dir);
    let mut c = s.conn();
    let _: () = q(&mut c, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]).expect("debug");
    let _: () = q(&mut c, &["SET", "foo1", "bar", "PX", "1"]).expect("set");
    let _: () = q(&mut c, &["SET", "foo2", "bar", "PX", "1"]).expect("set");
    let _: () = q(&mut c, &["SET", "kept", "bar"]).expect("set");
    std::thread::sleep(Duration::from_millis(5));
    let (_, keys): (String, Vec<String>) =
        q(&mut c, &["SCAN", "0", "COUNT", "1000"]).expect("scan");
    assert_eq!(keys, ["kept"]);
    assert_eq!(int(&mut c, &["DBSIZE"]), 1, "the expired keys are gone");
    let text = incr_journal_when(&dir, |text| {
        text.contains("foo2\r\n") && text.matches("$3\r\ndel\r\n").count() == 2
    });
    for k in ["foo1", "foo2"] {
        assert!(
            text.contains(&format!("*2\r\n$3\r\ndel\r\n$4\r\n{k}\r\n")),
            "{text:?}"
        );
    }
    assert!(!text.contains("multi"), "{text:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A transaction that fills a key a client waits on and lets it expire: the client stays
/// blocked, and the DEL of the expired key the serving met is journaled after the EXEC
/// block, not inside it (Redis serves blocked clients after EXEC as a whole).
#[test]
fn exec_over_an_expired_key_journals_its_del_after_the_block() {
    let dir = temp_dir("exec");
    let s = journaled_server(&dir);
    let mut c = s.conn();
    let _: () = q(&mut c, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]).expect("debug");
    let mut waiter = s.raw();
    waiter.send(&resp(&["CLIENT", "ID"]));
    let idline = String::from_utf8(waiter.read_until(b"\r\n")).expect("utf8");
    let id: i64 = idline.trim().trim_start_matches(':').parse().expect("id");
    waiter.send(&resp(&["BRPOP", "k", "0"]));
    assert!(eventually(5.0, || client_line_of(&mut c, id).contains(" flags=b ")));
    let mut raw = s.raw();
    raw.send(&resp(&["MULTI"]));
    raw.send(&resp(&["RPUSH", "k", "hello"]));
    raw.send(&resp(&["PEXPIRE", "k", "100"]));
    raw.send(&resp(&["DEBUG", "SLEEP", "0.2"]));
    raw.send(&resp(&["EXEC"]));
    raw.read_until(b"*3\r\n:1\r\n:1\r\n+OK\r\n");
    assert!(
        client_line_of(&mut c, id).contains(" flags=b "),
        "still blocked"
    );
    assert_eq!(int(&mut c, &["CLIENT", "UNBLOCK", &id.to_string()]), 1);
    waiter.roundtrip(b"", b"*-1\r\n");
    let text = incr_journal_when(&dir, |text| text.contains("$3\r\ndel\r\n"));
    let exec = text.find("$4\r\nexec\r\n").expect("exec");
    let del = text.find("$3\r\ndel\r\n$1\r\nk\r\n").expect("del");
    assert!(exec < del, "{text:?}");
    assert!(!text.contains("brpop"), "{text:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// DEBUG HTSTATS <dbid>: Redis's two sections with the counts of keys and of keys with a
/// deadline; a database out of range is Redis's error.
#[test]
fn debug_htstats_counts_keys_and_deadlines() {
    let s = TestServer::start(&["--enable-debug-command", "yes"]);
    let mut c = s.conn();
    let empty: String = q(&mut c, &["DEBUG", "HTSTATS", "9"]).expect("htstats");
    assert_eq!(
        empty,
        "[Dictionary HT]\nNo stats available for empty dictionaries\n[Expires HT]\nNo stats available for empty dictionaries\n"
    );
    let _: () = q(&mut c, &["SELECT", "9"]).expect("select");
    for i in 0..5 {
        let _: () = q(&mut c, &["SET", &format!("k{i}"), "v"]).expect("set");
    }
    let _: i64 = q(&mut c, &["EXPIRE", "k0", "100"]).expect("expire");
    let full: String = q(&mut c, &["DEBUG", "HTSTATS", "9", "full"]).expect("htstats");
    assert_eq!(
        full,
        "[Dictionary HT]\nHash table 0 stats (main hash table):\n number of elements: 5\n[Expires HT]\nHash table 0 stats (main hash table):\n number of elements: 1\n"
    );
    let e = err_text(q::<String>(&mut c, &["DEBUG", "HTSTATS", "16"]));
    assert_eq!(e, "ERR Out of range database");
}

/// A blocking pop whose key had expired blocks; the journal has the DEL of the expired key
/// and not the BRPOP itself (replayed, it would pop what a later push brought).
#[test]
fn a_blocked_pop_is_not_journaled_as_itself() {
    let dir = temp_dir("blocked");
    let s = journaled_server(&dir);
    let mut c = s.conn();
    let _: () = q(&mut c, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]).expect("debug");
    let _: i64 = q(&mut c, &["RPUSH", "k", "hello"]).expect("rpush");
    let _: i64 = q(&mut c, &["PEXPIRE", "k", "50"]).expect("pexpire");
    std::thread::sleep(Duration::from_millis(100));
    let mut waiter = s.raw();
    waiter.send(&resp(&["BRPOP", "k", "0"]));
    assert!(eventually(5.0, || {
        let info: String = q(&mut c, &["INFO", "clients"]).expect("info");
        info.contains("blocked_clients:1")
    }));
    let _: () = q(&mut c, &["SET", "after", "1"]).expect("set");
    let text = incr_journal_when(&dir, |text| text.contains("$5\r\nafter\r\n"));
    assert!(text.contains("$3\r\ndel\r\n$1\r\nk\r\n"), "{text:?}");
    assert!(!text.contains("brpop"), "{text:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A command allowed while a script is BUSY does not serve blocked clients in the middle of
/// the script: the client blocked on `x` gets what the script left at its end.
#[test]
fn a_busy_script_is_not_interrupted_by_serving_blocked_clients() {
    let s = TestServer::start(&["--enable-debug-command", "yes"]);
    let mut c = s.conn();
    let mut waiter = s.raw();
    waiter.send(&resp(&["BLPOP", "x", "0"]));
    assert!(eventually(5.0, || {
        let info: String = q(&mut c, &["INFO", "clients"]).expect("info");
        info.contains("blocked_clients:1")
    }));
    let _: () = q(&mut c, &["DEBUG", "SET-DISABLE-DENY-SCRIPTS", "1"]).expect("debug");
    let _: () = q(&mut c, &["CONFIG", "SET", "busy-reply-threshold", "10"]).expect("config");
    let mut script = s.raw();
    script.send(&resp(&[
        "EVAL",
        "redis.call('lpush',KEYS[1],'y') \
         while true do \
           if string.find(redis.call('client','list'), 'abortscript') ~= nil then break end \
         end \
         redis.call('lpush',KEYS[1],'z') return 1",
        "1",
        "x",
    ]));
    std::thread::sleep(Duration::from_millis(200));
    let busy = err_text(q::<String>(&mut c, &["PING"]));
    assert!(busy.starts_with("BUSY"), "{busy}");
    // Allowed while BUSY; it lets the script end.
    let mut other = s.raw();
    other.send(&resp(&["HELLO", "2", "SETNAME", "abortscript"]));
    script.read_until(b":1\r\n");
    waiter.roundtrip(b"", b"*2\r\n$1\r\nx\r\n$1\r\nz\r\n");
}

/// FLUSHALL under a `save` schedule saves the emptied data set before it answers, as Redis
/// does, so the dirty counter is back to 0 (unit/other); inside MULTI/EXEC, where a command
/// cannot wait, it flushes without saving.
#[test]
fn flushall_with_a_save_schedule_saves_in_the_foreground() {
    let dir = temp_dir("flushall");
    let s = TestServer::start(&["--dir", &dir]);
    let mut c = s.conn();
    let dump = std::path::Path::new(&dir).join("dump.rdb");
    // No schedule: nothing written, the change is still counted.
    let _: () = redis::cmd("SET").arg("k").arg("v").query(&mut c).unwrap();
    let _: () = redis::cmd("FLUSHALL").query(&mut c).unwrap();
    assert!(!dump.exists());
    assert_ne!(
        info_field(&mut c, "persistence", "rdb_changes_since_last_save"),
        "0"
    );
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("save")
        .arg("3600 1 300 100 60 10000")
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("SET").arg("k").arg("v").query(&mut c).unwrap();
    let ok: String = redis::cmd("FLUSHALL").query(&mut c).unwrap();
    assert_eq!(ok, "OK");
    assert_eq!(
        info_field(&mut c, "persistence", "rdb_changes_since_last_save"),
        "0"
    );
    assert!(dump.exists(), "FLUSHALL wrote no dump.rdb");
    // In a transaction: flushed, answered, not saved.
    let _: () = redis::cmd("SET").arg("k").arg("v").query(&mut c).unwrap();
    let (n,): (i64,) = redis::pipe()
        .atomic()
        .cmd("FLUSHALL")
        .ignore()
        .cmd("DBSIZE")
        .query(&mut c)
        .unwrap();
    assert_eq!(n, 0);
    assert_ne!(
        info_field(&mut c, "persistence", "rdb_changes_since_last_save"),
        "0"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `CONFIG SET appendonly yes` during a BGSAVE is scheduled, as Redis schedules the rewrite
/// that turns its AOF on while another child runs (unit/expire turns it on in a replica that
/// is saving after a FLUSHALL): answered OK, `aof_enabled:1` and `aof_rewrite_scheduled:1`
/// meanwhile, the journal started once the save is done; `no` before then cancels it.
#[test]
fn appendonly_yes_during_a_bgsave_starts_the_journal_after_it() {
    let dir = temp_dir("aof-after-bgsave");
    let s = TestServer::start(&["--dir", &dir, "--save", ""]);
    let mut c = s.conn();
    for i in 0..10 {
        let _: () = q(&mut c, &["SET", &format!("k{i}"), "v"]).expect("set");
    }
    // 0.2 s a key: the save runs for 2 s; the value is read when it starts.
    let _: () = q(&mut c, &["CONFIG", "SET", "rdb-key-save-delay", "200000"]).expect("set");
    let _: String = q(&mut c, &["BGSAVE"]).expect("bgsave");
    let _: () = q(&mut c, &["CONFIG", "SET", "rdb-key-save-delay", "0"]).expect("set");
    let aof = |c: &mut redis::Connection| {
        [
            "rdb_bgsave_in_progress",
            "aof_enabled",
            "aof_rewrite_scheduled",
        ]
        .map(|f| info_field(c, "persistence", f))
    };
    let _: () = q(&mut c, &["CONFIG", "SET", "appendonly", "yes"]).expect("scheduled");
    assert_eq!(aof(&mut c), ["1", "1", "1"]);
    let _: () = q(&mut c, &["CONFIG", "SET", "appendonly", "no"]).expect("cancelled");
    assert_eq!(aof(&mut c), ["1", "0", "0"]);
    let _: () = q(&mut c, &["CONFIG", "SET", "appendonly", "yes"]).expect("scheduled");
    assert_eq!(aof(&mut c), ["1", "1", "1"]);
    assert!(
        eventually(10.0, || aof(&mut c) == ["0", "1", "0"]
            && info_field(&mut c, "persistence", "aof_rewrite_in_progress")
                == "0"),
        "{:?}",
        aof(&mut c)
    );
    assert_eq!(
        info_field(&mut c, "persistence", "aof_last_bgrewrite_status"),
        "ok"
    );
    let _: () = q(&mut c, &["SET", "after", "start"]).expect("set");
    incr_journal_when(&dir, |t| t.contains("after"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `CONFIG SET appendonly no` while the journal starts is answered OK, as Redis kills its
/// AOF child then (unit/expire turns it off right after turning it on): the journal is
/// stopped once its start ends; a `yes` before that takes the `no` back.
#[test]
fn appendonly_no_during_the_start_stops_the_journal_after_it() {
    let dir = temp_dir("aof-no-during-start");
    let s = TestServer::start(&["--dir", &dir, "--save", ""]);
    let mut c = s.conn();
    for i in 0..10 {
        let _: () = q(&mut c, &["SET", &format!("k{i}"), "v"]).expect("set");
    }
    let state = |c: &mut redis::Connection| {
        ["aof_rewrite_in_progress", "aof_enabled"].map(|f| info_field(c, "persistence", f))
    };
    let done = |c: &mut redis::Connection| {
        eventually(10.0, || {
            info_field(c, "persistence", "aof_rewrite_in_progress") == "0"
        })
    };
    // 0.2 s a key: each start's base takes 2 s.
    let _: () = q(&mut c, &["CONFIG", "SET", "rdb-key-save-delay", "200000"]).expect("set");
    let _: () = q(&mut c, &["CONFIG", "SET", "appendonly", "yes"]).expect("start");
    assert_eq!(state(&mut c), ["1", "1"]);
    let _: () = q(&mut c, &["CONFIG", "SET", "appendonly", "no"]).expect("no while starting");
    assert_eq!(state(&mut c), ["1", "0"]);
    assert!(done(&mut c));
    assert_eq!(state(&mut c), ["0", "0"]);
    let _: () = q(&mut c, &["SET", "while", "off"]).expect("set");
    // yes, no, yes: the journal is on at the end.
    let _: () = q(&mut c, &["CONFIG", "SET", "appendonly", "yes"]).expect("start");
    let _: () = q(&mut c, &["CONFIG", "SET", "appendonly", "no"]).expect("no");
    let _: () = q(&mut c, &["CONFIG", "SET", "appendonly", "yes"]).expect("yes again");
    assert_eq!(state(&mut c), ["1", "1"]);
    assert!(done(&mut c));
    assert_eq!(state(&mut c), ["0", "1"]);
    assert_eq!(
        strs(&mut c, &["CONFIG", "GET", "appendonly"]),
        ["appendonly", "yes"]
    );
    let _: () = q(&mut c, &["SET", "after", "start"]).expect("set");
    let text = incr_journal_when(&dir, |t| t.contains("after"));
    assert!(!text.contains("while"), "{text:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
