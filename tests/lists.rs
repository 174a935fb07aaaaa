//! Lists and blocking pops through the `redis` crate and raw connections: every command,
//! WRONGTYPE, emptied lists deleted, and the blocking rules (arrival order, MULTI, timeouts,
//! CLIENT UNBLOCK, keys in different shards, disconnects).

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};
use support::{err_text, int, q, resp, strs, TestServer};

fn info_blocked(c: &mut redis::Connection) -> i64 {
    support::info_value(c, "clients", "blocked_clients")
        .and_then(|v| v.parse().ok())
        .unwrap_or(-1)
}

fn wait_blocked(c: &mut redis::Connection, n: i64) {
    assert!(
        support::eventually(5.0, || info_blocked(c) == n),
        "expected {n} blocked clients, INFO says {}",
        info_blocked(c)
    );
}

#[test]
fn list_commands() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    assert_eq!(int(&mut c, &["RPUSH", "l", "a", "b", "c"]), 3);
    assert_eq!(int(&mut c, &["LPUSH", "l", "z"]), 4);
    assert_eq!(
        strs(&mut c, &["LRANGE", "l", "0", "-1"]),
        ["z", "a", "b", "c"]
    );
    assert_eq!(strs(&mut c, &["LRANGE", "l", "-2", "100"]), ["b", "c"]);
    assert!(strs(&mut c, &["LRANGE", "l", "3", "1"]).is_empty());
    assert_eq!(int(&mut c, &["LLEN", "l"]), 4);
    assert_eq!(q::<String>(&mut c, &["LINDEX", "l", "-1"]).unwrap(), "c");
    assert_eq!(
        q::<Option<String>>(&mut c, &["LINDEX", "l", "9"]).unwrap(),
        None
    );
    assert_eq!(q::<String>(&mut c, &["LSET", "l", "1", "A"]).unwrap(), "OK");
    assert_eq!(
        err_text(q::<String>(&mut c, &["LSET", "l", "10", "x"])),
        "ERR index out of range"
    );
    assert_eq!(
        err_text(q::<String>(&mut c, &["LSET", "nokey", "0", "x"])),
        "ERR no such key"
    );
    assert_eq!(int(&mut c, &["LINSERT", "l", "AFTER", "A", "m"]), 5);
    assert_eq!(int(&mut c, &["LINSERT", "l", "BEFORE", "nope", "m"]), -1);
    assert_eq!(int(&mut c, &["LINSERT", "nokey", "BEFORE", "a", "m"]), 0);
    assert_eq!(int(&mut c, &["RPUSH", "l", "m", "m"]), 7);
    assert_eq!(int(&mut c, &["LREM", "l", "-2", "m"]), 2);
    assert_eq!(
        strs(&mut c, &["LRANGE", "l", "0", "-1"]),
        ["z", "A", "m", "b", "c"]
    );
    assert_eq!(int(&mut c, &["LPOS", "l", "b"]), 3);
    assert_eq!(
        q::<Vec<i64>>(&mut c, &["LPOS", "l", "m", "COUNT", "0"]).unwrap(),
        [2]
    );
    assert_eq!(
        q::<String>(&mut c, &["LTRIM", "l", "1", "-2"]).unwrap(),
        "OK"
    );
    assert_eq!(strs(&mut c, &["LRANGE", "l", "0", "-1"]), ["A", "m", "b"]);
    assert_eq!(strs(&mut c, &["LPOP", "l", "2"]), ["A", "m"]);
    assert_eq!(q::<String>(&mut c, &["RPOP", "l"]).unwrap(), "b");
    // Emptied: gone.
    assert_eq!(int(&mut c, &["EXISTS", "l"]), 0);
    assert_eq!(int(&mut c, &["LPUSHX", "l", "x"]), 0);
    assert_eq!(int(&mut c, &["EXISTS", "l"]), 0);
    assert_eq!(
        q::<Option<Vec<String>>>(&mut c, &["LPOP", "l", "2"]).unwrap(),
        None
    );
    // Moves, including between keys of different shards.
    for i in 0..20 {
        let (a, b) = (format!("src{i}"), format!("dst{i}"));
        int(&mut c, &["RPUSH", &a, "1", "2"]);
        assert_eq!(
            q::<String>(&mut c, &["LMOVE", &a, &b, "LEFT", "RIGHT"]).unwrap(),
            "1"
        );
        assert_eq!(q::<String>(&mut c, &["RPOPLPUSH", &a, &b]).unwrap(), "2");
        assert_eq!(int(&mut c, &["EXISTS", &a]), 0);
        assert_eq!(strs(&mut c, &["LRANGE", &b, "0", "-1"]), ["2", "1"]);
    }
    // LMPOP takes from the first non-empty key.
    int(&mut c, &["RPUSH", "m2", "a", "b", "c"]);
    let v: (String, Vec<String>) =
        q(&mut c, &["LMPOP", "2", "m1", "m2", "RIGHT", "COUNT", "2"]).unwrap();
    assert_eq!(v, ("m2".into(), vec!["c".into(), "b".into()]));
    // Type errors and bad input change nothing.
    q::<String>(&mut c, &["SET", "str", "v"]).unwrap();
    for cmd in [
        &["LPUSH", "str", "x"][..],
        &["LRANGE", "str", "0", "1"],
        &["LPOP", "str"],
        &["LMOVE", "m2", "str", "LEFT", "LEFT"],
        &["BLPOP", "str", "0"],
    ] {
        assert!(
            err_text(q::<String>(&mut c, cmd)).starts_with("WRONGTYPE"),
            "{cmd:?}"
        );
    }
    assert_eq!(strs(&mut c, &["LRANGE", "m2", "0", "-1"]), ["a"]);
    assert_eq!(
        err_text(q::<String>(&mut c, &["LMPOP", "0", "m2", "LEFT"])),
        "ERR numkeys should be greater than 0"
    );
    assert_eq!(
        err_text(q::<String>(&mut c, &["LPOP", "m2", "1", "1"])),
        "ERR wrong number of arguments for 'lpop' command"
    );
    assert_eq!(
        err_text(q::<String>(&mut c, &["BLPOP", "m9", "-1"])),
        "ERR timeout is negative"
    );
    assert_eq!(
        err_text(q::<String>(&mut c, &["BLPOP", "m9", "abc"])),
        "ERR timeout is not a float or out of range"
    );
    assert_eq!(
        q::<String>(&mut c, &["OBJECT", "ENCODING", "m2"]).unwrap(),
        "quicklist"
    );
    assert_eq!(q::<String>(&mut c, &["TYPE", "m2"]).unwrap(), "list");
}

/// Large lists span many packed nodes and stay consistent at both ends and in the middle.
#[test]
fn long_lists_across_nodes() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    q::<String>(&mut c, &["CONFIG", "SET", "list-max-listpack-size", "4"]).unwrap();
    let mut model = std::collections::VecDeque::new();
    for i in 0..300 {
        let v = format!("v{i}");
        if i % 3 == 0 {
            int(&mut c, &["LPUSH", "big", &v]);
            model.push_front(v);
        } else {
            int(&mut c, &["RPUSH", "big", &v]);
            model.push_back(v);
        }
    }
    int(&mut c, &["LINSERT", "big", "BEFORE", "v150", "mid"]);
    let at = model.iter().position(|v| v == "v150").unwrap();
    model.insert(at, "mid".into());
    let all = strs(&mut c, &["LRANGE", "big", "0", "-1"]);
    assert_eq!(all, Vec::from(model.clone()));
    assert_eq!(
        q::<String>(&mut c, &["LINDEX", "big", &at.to_string()]).unwrap(),
        "mid"
    );
    q::<String>(&mut c, &["LTRIM", "big", "10", "-10"]).unwrap();
    assert_eq!(int(&mut c, &["LLEN", "big"]), model.len() as i64 - 19);
    assert_eq!(
        strs(&mut c, &["LRANGE", "big", "0", "0"])[0],
        model[10].clone()
    );
}

/// Reads one RESP reply line-by-line from a raw connection with a deadline.
fn read_reply(s: &mut TcpStream) -> String {
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    // Replies here are small arrays of bulk strings: read until the expected shape arrives.
    loop {
        let n = s.read(&mut buf).expect("reply");
        assert!(n > 0, "connection closed");
        out.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&out).to_string();
        if complete(&text) {
            return text;
        }
    }
}

/// Is `text` one complete reply (arrays of bulk strings, nulls, integers, errors)?
fn complete(text: &str) -> bool {
    fn walk(lines: &mut std::str::Split<'_, &str>) -> Option<()> {
        let l = lines.next()?;
        match l.as_bytes().first()? {
            b'*' => {
                let n: i64 = l[1..].parse().ok()?;
                for _ in 0..n.max(0) {
                    walk(lines)?;
                }
                Some(())
            }
            b'$' => {
                let n: i64 = l[1..].parse().ok()?;
                if n >= 0 {
                    lines.next()?;
                }
                Some(())
            }
            _ => Some(()),
        }
    }
    if !text.ends_with("\r\n") {
        return false;
    }
    walk(&mut text.split("\r\n")).is_some()
}

#[test]
fn blocked_clients_are_served_in_arrival_order() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    let mut waiting = Vec::new();
    for i in 0..20 {
        let mut w = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
        w.write_all(&resp(&["BLPOP", "other", "queue", "0"]))
            .unwrap();
        waiting.push(w);
        wait_blocked(&mut c, i + 1);
    }
    // One push of 20 elements serves all of them, first come first served.
    let items: Vec<String> = (0..20).map(|i| format!("job{i}")).collect();
    let mut cmd = vec!["RPUSH", "queue"];
    cmd.extend(items.iter().map(String::as_str));
    assert_eq!(int(&mut c, &cmd), 20);
    for (i, w) in waiting.iter_mut().enumerate() {
        let r = read_reply(w);
        assert!(
            r.ends_with(&format!(
                "$5\r\nqueue\r\n${}\r\njob{i}\r\n",
                format!("job{i}").len()
            )),
            "{r}"
        );
    }
    assert_eq!(info_blocked(&mut c), 0);
    assert_eq!(int(&mut c, &["EXISTS", "queue"]), 0);
}

#[test]
fn blocking_rules() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();

    // A push inside MULTI serves the blocked client after EXEC, with the state EXEC left.
    let mut w = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    w.write_all(&resp(&["BLPOP", "k", "0"])).unwrap();
    wait_blocked(&mut c, 1);
    let _: () = redis::pipe()
        .atomic()
        .cmd("LPUSH")
        .arg("k")
        .arg("a")
        .cmd("LPUSH")
        .arg("k")
        .arg("b")
        .cmd("RPOP")
        .arg("k")
        .ignore()
        .query(&mut c)
        .unwrap();
    assert_eq!(read_reply(&mut w), "*2\r\n$1\r\nk\r\n$1\r\nb\r\n");

    // LPUSH + DEL in one transaction wakes nobody.
    w.write_all(&resp(&["BRPOP", "k2", "0"])).unwrap();
    wait_blocked(&mut c, 1);
    let _: () = redis::pipe()
        .atomic()
        .cmd("LPUSH")
        .arg("k2")
        .arg("x")
        .cmd("DEL")
        .arg("k2")
        .ignore()
        .query(&mut c)
        .unwrap();
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(info_blocked(&mut c), 1);
    int(&mut c, &["RPUSH", "k2", "y"]);
    assert_eq!(read_reply(&mut w), "*2\r\n$2\r\nk2\r\n$1\r\ny\r\n");

    // Inside MULTI a blocking pop does not block.
    let r: (Option<Vec<String>>,) = redis::pipe()
        .atomic()
        .cmd("BLPOP")
        .arg("empty")
        .arg("0")
        .query(&mut c)
        .unwrap();
    assert_eq!(r.0, None);

    // A fractional timeout ends the wait with a null array.
    let t = Instant::now();
    let r: Option<Vec<String>> = q(&mut c, &["BLPOP", "empty", "0.2"]).unwrap();
    assert_eq!(r, None);
    assert!(t.elapsed() >= Duration::from_millis(190));

    // CLIENT UNBLOCK, as a timeout and as an error.
    let mut other = s.conn();
    let id: i64 = q(&mut other, &["CLIENT", "ID"]).unwrap();
    let mut w2 = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    w2.write_all(&resp(&["CLIENT", "ID"])).unwrap();
    let line = read_reply(&mut w2);
    let id2: i64 = line.trim_start_matches(':').trim().parse().unwrap();
    w2.write_all(&resp(&["BLMOVE", "nothing", "dst", "LEFT", "LEFT", "0"]))
        .unwrap();
    wait_blocked(&mut c, 1);
    assert_eq!(int(&mut c, &["CLIENT", "UNBLOCK", &id.to_string()]), 0);
    assert_eq!(int(&mut c, &["CLIENT", "UNBLOCK", &id2.to_string()]), 1);
    assert_eq!(read_reply(&mut w2), "*-1\r\n");
    w2.write_all(&resp(&["BLPOP", "nothing", "0"])).unwrap();
    wait_blocked(&mut c, 1);
    assert_eq!(
        int(&mut c, &["CLIENT", "UNBLOCK", &id2.to_string(), "ERROR"]),
        1
    );
    assert_eq!(
        read_reply(&mut w2),
        "-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n"
    );

    // A client gone while blocked leaves no waiter behind.
    let mut gone = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    gone.write_all(&resp(&["BLPOP", "g", "0"])).unwrap();
    wait_blocked(&mut c, 1);
    drop(gone);
    wait_blocked(&mut c, 0);
    int(&mut c, &["RPUSH", "g", "kept"]);
    assert_eq!(strs(&mut c, &["LRANGE", "g", "0", "-1"]), ["kept"]);

    // BLMOVE served on behalf of the waiter moves the element; a waiter on the
    // destination is served in turn.
    let mut a = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    a.write_all(&resp(&["BLMOVE", "from", "to", "RIGHT", "LEFT", "0"]))
        .unwrap();
    wait_blocked(&mut c, 1);
    let mut b = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    b.write_all(&resp(&["BLPOP", "to", "0"])).unwrap();
    wait_blocked(&mut c, 2);
    int(&mut c, &["RPUSH", "from", "item"]);
    assert_eq!(read_reply(&mut a), "$4\r\nitem\r\n");
    assert_eq!(read_reply(&mut b), "*2\r\n$2\r\nto\r\n$4\r\nitem\r\n");
    assert_eq!(int(&mut c, &["EXISTS", "from", "to"]), 0);
}

/// 1,000 clients blocked on 1,000 keys (in every shard) plus 100 on one key cost no CPU
/// while they wait, and each is served in arrival order.
#[test]
fn many_blocked_clients_cost_no_cpu() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    let mut per_key = Vec::new();
    for i in 0..1000 {
        let mut w = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
        w.write_all(&resp(&["BRPOP", &format!("key:{i}"), "0"]))
            .unwrap();
        per_key.push(w);
    }
    wait_blocked(&mut c, 1000);
    let mut shared = Vec::new();
    for _ in 0..100 {
        let mut w = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
        w.write_all(&resp(&["BLPOP", "hot", "0"])).unwrap();
        shared.push(w);
        // Arrival order is the order of registration: wait for each before the next.
        wait_blocked(&mut c, 1000 + shared.len() as i64);
    }
    let pid = s.child.id();
    let cpu = || {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let after = stat.rsplit(')').next().unwrap().to_string();
        let f: Vec<&str> = after.split_whitespace().collect();
        f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
    };
    let before = cpu();
    std::thread::sleep(Duration::from_millis(1000));
    let spent = cpu() - before;
    // Clock ticks (1/100 s): an idle server with 1,100 waiters spends well under 5% of a core.
    assert!(spent <= 5, "{spent} ticks spent while clients waited");
    for i in 0..1000 {
        int(&mut c, &["LPUSH", &format!("key:{i}"), &format!("v{i}")]);
    }
    for (i, w) in per_key.iter_mut().enumerate() {
        let r = read_reply(w);
        assert!(r.ends_with(&format!("\r\nv{i}\r\n")), "{r}");
    }
    let items: Vec<String> = (0..100).map(|i| format!("{i:03}")).collect();
    let mut cmd = vec!["RPUSH", "hot"];
    cmd.extend(items.iter().map(String::as_str));
    int(&mut c, &cmd);
    for (i, w) in shared.iter_mut().enumerate() {
        let r = read_reply(w);
        assert!(r.ends_with(&format!("$3\r\n{i:03}\r\n")), "{i}: {r}");
    }
    assert_eq!(info_blocked(&mut c), 0);
}

/// BZPOPMIN/BZPOPMAX/BZMPOP block and are served like the list pops.
#[test]
fn sorted_set_blocking_pops() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    int(&mut c, &["ZADD", "z", "1", "a", "2", "b", "3", "c"]);
    let r: (String, String, String) = q(&mut c, &["BZPOPMAX", "none", "z", "0"]).unwrap();
    assert_eq!(r, ("z".into(), "c".into(), "3".into()));
    let mut w = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    w.write_all(&resp(&["BZPOPMIN", "zz", "0"])).unwrap();
    wait_blocked(&mut c, 1);
    let mut w2 = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    w2.write_all(&resp(&["BZMPOP", "0", "1", "zz", "MAX", "COUNT", "5"]))
        .unwrap();
    wait_blocked(&mut c, 2);
    int(&mut c, &["ZADD", "zz", "5", "x", "6", "y", "7", "w"]);
    assert_eq!(
        read_reply(&mut w),
        "*3\r\n$2\r\nzz\r\n$1\r\nx\r\n$1\r\n5\r\n"
    );
    assert_eq!(
        read_reply(&mut w2),
        "*2\r\n$2\r\nzz\r\n*2\r\n*2\r\n$1\r\nw\r\n$1\r\n7\r\n*2\r\n$1\r\ny\r\n$1\r\n6\r\n"
    );
    assert_eq!(int(&mut c, &["EXISTS", "zz"]), 0);
    let r: Option<Vec<String>> = q(&mut c, &["BZPOPMIN", "zz", "0.1"]).unwrap();
    assert_eq!(r, None);
    q::<String>(&mut c, &["SET", "str", "v"]).unwrap();
    assert!(err_text(q::<String>(&mut c, &["BZPOPMIN", "str", "0"])).starts_with("WRONGTYPE"));
}

/// Under `list-compress-depth`, inner nodes are stored compressed: every read and write still
/// sees the same list, and a list of repetitive elements takes less memory.
#[test]
fn compressed_inner_nodes() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    let fill = |c: &mut redis::Connection, key: &str| {
        for i in 0..400 {
            let v = format!("element-{:04}-{}", i, "abcdefgh".repeat(8));
            int(c, &["RPUSH", key, &v]);
        }
    };
    fill(&mut c, "plain");
    q::<String>(&mut c, &["CONFIG", "SET", "list-compress-depth", "1"]).unwrap();
    fill(&mut c, "packed");
    let plain: i64 = q(&mut c, &["MEMORY", "USAGE", "plain"]).unwrap();
    let packed: i64 = q(&mut c, &["MEMORY", "USAGE", "packed"]).unwrap();
    assert!(
        packed * 3 < plain * 2,
        "compressed {packed} B vs plain {plain} B"
    );
    // Reads and writes in the middle of compressed nodes.
    let all = strs(&mut c, &["LRANGE", "packed", "0", "-1"]);
    assert_eq!(all, strs(&mut c, &["LRANGE", "plain", "0", "-1"]));
    assert_eq!(
        q::<String>(&mut c, &["LINDEX", "packed", "200"]).unwrap(),
        all[200]
    );
    q::<String>(&mut c, &["LSET", "packed", "150", "changed"]).unwrap();
    int(
        &mut c,
        &["LINSERT", "packed", "BEFORE", &all[300], "inserted"],
    );
    assert_eq!(int(&mut c, &["LREM", "packed", "0", &all[250]]), 1);
    let now = strs(&mut c, &["LRANGE", "packed", "0", "-1"]);
    let mut want = all.clone();
    want[150] = "changed".into();
    want.insert(300, "inserted".into());
    want.remove(250);
    assert_eq!(now, want);
    assert_eq!(
        q::<Vec<i64>>(&mut c, &["LPOS", "packed", "inserted", "COUNT", "0"]).unwrap(),
        [299]
    );
    // Back to no compression: the list reads the same.
    q::<String>(&mut c, &["CONFIG", "SET", "list-compress-depth", "0"]).unwrap();
    int(&mut c, &["RPUSH", "packed", "last"]);
    want.push("last".into());
    assert_eq!(strs(&mut c, &["LRANGE", "packed", "0", "-1"]), want);
}
