//! Redis 7.2 compatibility: SLOWLOG, CLIENT NO-TOUCH, CLIENT PAUSE/UNPAUSE, WAIT, ROLE,
//! LOLWUT, ZRANK WITHSCORE, CLIENT LIST's fd — against the real binary.

mod support;

use redis::Value;
use std::time::{Duration, Instant};
use support::{err_text, int, q, strs, TestServer};

fn text(v: &Value) -> String {
    match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        Value::VerbatimString { text, .. } => text.clone(),
        other => format!("{other:?}"),
    }
}

fn entries(c: &mut redis::Connection, args: &[&str]) -> Vec<Vec<Value>> {
    match q::<Value>(c, args).expect("slowlog get") {
        Value::Array(es) => es
            .into_iter()
            .map(|e| match e {
                Value::Array(f) => f,
                other => panic!("entry {other:?}"),
            })
            .collect(),
        other => panic!("reply {other:?}"),
    }
}

fn argv(e: &[Value]) -> Vec<String> {
    match &e[3] {
        Value::Array(a) => a.iter().map(text).collect(),
        other => panic!("argv {other:?}"),
    }
}

#[test]
fn slowlog_entries_as_redis() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    q::<()>(&mut c, &["CONFIG", "SET", "slowlog-log-slower-than", "0"]).unwrap();
    q::<()>(&mut c, &["CLIENT", "SETNAME", "sl-client"]).unwrap();
    q::<()>(&mut c, &["SLOWLOG", "RESET"]).unwrap();
    let mut many = vec!["SADD", "set"];
    let members: Vec<String> = (3..=33).map(|i| i.to_string()).collect();
    many.extend(members.iter().map(|m| m.as_str()));
    int(&mut c, &many);
    let long = "A".repeat(129);
    int(&mut c, &["SADD", "set", "foo", &long]);
    q::<()>(&mut c, &["AUTH", "secret"]).ok();
    let es = entries(&mut c, &["SLOWLOG", "GET", "-1"]);
    // Newest first: AUTH, the long SADD, the 33-argument SADD, SLOWLOG RESET.
    assert_eq!(es.len(), 4, "{es:?}");
    assert_eq!(es[0].len(), 6);
    assert_eq!(argv(&es[0]), ["AUTH", "(redacted)"]);
    let a = argv(&es[1]);
    assert_eq!(a[3], format!("{}... (1 more bytes)", "A".repeat(128)));
    let a = argv(&es[2]);
    assert_eq!(a.len(), 32);
    assert_eq!(a[31], "... (2 more arguments)");
    assert_eq!(a[30], "31");
    assert_eq!(argv(&es[3]), ["SLOWLOG", "RESET"]);
    assert_eq!(text(&es[0][5]), "sl-client");
    assert!(text(&es[0][4]).starts_with("127.0.0.1:"));
    let ids: Vec<i64> = es
        .iter()
        .map(|e| match e[0] {
            Value::Int(i) => i,
            _ => panic!(),
        })
        .collect();
    assert!(ids.windows(2).all(|w| w[0] == w[1] + 1), "{ids:?}");
    assert_eq!(entries(&mut c, &["SLOWLOG", "GET", "2"]).len(), 2);
    assert_eq!(entries(&mut c, &["SLOWLOG", "GET", "0"]).len(), 0);

    // EXEC is not logged, the commands it ran are.
    q::<()>(&mut c, &["SLOWLOG", "RESET"]).unwrap();
    let mut p = redis::pipe();
    p.atomic().cmd("SET").arg("k").arg("v").cmd("INCR").arg("n");
    let _: Value = p.query(&mut c).unwrap();
    let names: Vec<String> = entries(&mut c, &["SLOWLOG", "GET"])
        .iter()
        .map(|e| argv(e)[0].to_lowercase())
        .collect();
    assert_eq!(names, ["incr", "set", "multi", "slowlog"]);

    // A blocked command is logged when it is served, with its own arguments.
    let mut b = s.conn();
    let waiter = std::thread::spawn(move || q::<Value>(&mut b, &["BLPOP", "l", "0"]).unwrap());
    assert!(support::eventually(5.0, || {
        support::info_value(&mut c, "clients", "blocked_clients").as_deref() == Some("1")
    }));
    q::<()>(&mut c, &["SLOWLOG", "RESET"]).unwrap();
    int(&mut c, &["LPUSH", "l", "x"]);
    waiter.join().unwrap();
    let es = entries(&mut c, &["SLOWLOG", "GET"]);
    assert!(es.iter().any(|e| argv(e) == ["BLPOP", "l", "0"]), "{es:?}");

    // Max length, and off.
    q::<()>(&mut c, &["CONFIG", "SET", "slowlog-max-len", "3"]).unwrap();
    for _ in 0..10 {
        q::<()>(&mut c, &["PING"]).unwrap();
    }
    assert_eq!(int(&mut c, &["SLOWLOG", "LEN"]), 3);
    q::<()>(&mut c, &["CONFIG", "SET", "slowlog-log-slower-than", "-1"]).unwrap();
    q::<()>(&mut c, &["SLOWLOG", "RESET"]).unwrap();
    q::<()>(&mut c, &["PING"]).unwrap();
    assert_eq!(int(&mut c, &["SLOWLOG", "LEN"]), 0);
    assert_eq!(
        err_text(q::<Value>(&mut c, &["SLOWLOG", "GET", "-2"])),
        "ERR count should be greater than or equal to -1"
    );
}

#[test]
fn zrank_withscore() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    int(&mut c, &["ZADD", "z", "1.5", "a", "2", "b"]);
    let v: Value = q(&mut c, &["ZRANK", "z", "b", "WITHSCORE"]).unwrap();
    assert_eq!(
        v,
        Value::Array(vec![Value::Int(1), Value::BulkString(b"2".to_vec())])
    );
    let v: Value = q(&mut c, &["ZREVRANK", "z", "a", "withscore"]).unwrap();
    assert_eq!(
        v,
        Value::Array(vec![Value::Int(1), Value::BulkString(b"1.5".to_vec())])
    );
    let v: Value = q(&mut c, &["ZRANK", "z", "nosuch", "WITHSCORE"]).unwrap();
    assert_eq!(v, Value::Nil);
    assert_eq!(
        err_text(q::<Value>(&mut c, &["ZRANK", "z", "a", "WITHSCORES"])),
        "ERR syntax error"
    );
    assert_eq!(
        err_text(q::<Value>(&mut c, &["ZRANK", "z", "a", "WITHSCORE", "x"])),
        "ERR wrong number of arguments for 'zrank' command"
    );
}

#[test]
fn client_no_touch_and_fd() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    q::<()>(&mut c, &["SET", "k", "v"]).unwrap();
    q::<()>(&mut c, &["SET", "t", "v"]).unwrap();
    std::thread::sleep(Duration::from_millis(1100));
    q::<()>(&mut c, &["CLIENT", "NO-TOUCH", "on"]).unwrap();
    let info: String = q(&mut c, &["CLIENT", "INFO"]).unwrap();
    assert!(info.contains(" flags=T "), "{info}");
    let fd: i64 = info
        .split(" fd=")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap();
    assert!(fd > 2, "{info}");
    q::<String>(&mut c, &["GET", "k"]).unwrap();
    assert!(int(&mut c, &["OBJECT", "IDLETIME", "k"]) >= 1);
    // TOUCH still touches.
    assert_eq!(int(&mut c, &["TOUCH", "t"]), 1);
    assert_eq!(int(&mut c, &["OBJECT", "IDLETIME", "t"]), 0);
    q::<()>(&mut c, &["CLIENT", "NO-TOUCH", "off"]).unwrap();
    q::<String>(&mut c, &["GET", "k"]).unwrap();
    assert_eq!(int(&mut c, &["OBJECT", "IDLETIME", "k"]), 0);
    assert_eq!(
        err_text(q::<()>(&mut c, &["CLIENT", "NO-TOUCH", "maybe"])),
        "ERR syntax error"
    );
}

#[test]
fn client_pause_write_and_all() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    let mut other = s.conn();
    q::<()>(&mut c, &["CLIENT", "PAUSE", "100000", "WRITE"]).unwrap();
    // Reads go on.
    let t = Instant::now();
    assert_eq!(
        q::<Option<String>>(&mut other, &["GET", "foo"]).unwrap(),
        None
    );
    assert!(t.elapsed() < Duration::from_secs(1));
    // A write waits until CLIENT UNPAUSE.
    let writer = std::thread::spawn(move || {
        let t = Instant::now();
        q::<()>(&mut other, &["SET", "foo", "bar"]).unwrap();
        t.elapsed()
    });
    assert!(support::eventually(5.0, || {
        support::info_value(&mut c, "clients", "blocked_clients").as_deref() == Some("1")
    }));
    assert_eq!(q::<Option<String>>(&mut c, &["GET", "foo"]).unwrap(), None);
    std::thread::sleep(Duration::from_millis(200));
    q::<()>(&mut c, &["CLIENT", "UNPAUSE"]).unwrap();
    assert!(writer.join().unwrap() >= Duration::from_millis(200));
    assert_eq!(q::<String>(&mut c, &["GET", "foo"]).unwrap(), "bar");
    // ALL: every command waits for the deadline.
    let mut third = s.conn();
    q::<()>(&mut c, &["CLIENT", "PAUSE", "300", "ALL"]).unwrap();
    let t = Instant::now();
    q::<String>(&mut third, &["PING"]).unwrap();
    assert!(
        t.elapsed() >= Duration::from_millis(250),
        "{:?}",
        t.elapsed()
    );
    assert_eq!(
        err_text(q::<()>(&mut c, &["CLIENT", "PAUSE", "10", "sometimes"])),
        "ERR CLIENT PAUSE mode must be WRITE or ALL"
    );
}

#[test]
fn wait_role_lolwut() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    assert_eq!(int(&mut c, &["WAIT", "0", "0"]), 0);
    let t = Instant::now();
    assert_eq!(int(&mut c, &["WAIT", "1", "200"]), 0);
    assert!(t.elapsed() >= Duration::from_millis(190));
    // Inside MULTI it does not block.
    let mut p = redis::pipe();
    p.atomic().cmd("WAIT").arg(1).arg(0);
    let r: Vec<i64> = p.query(&mut c).unwrap();
    assert_eq!(r, [0]);
    let role: Value = q(&mut c, &["ROLE"]).unwrap();
    assert_eq!(
        role,
        Value::Array(vec![
            Value::BulkString(b"master".to_vec()),
            Value::Int(0),
            Value::Array(vec![])
        ])
    );
    let art: Value = q(&mut c, &["LOLWUT"]).unwrap();
    assert_eq!(text(&art), "Redis ver. 7.4.0\n");
    let art: Value = q(&mut c, &["LOLWUT", "VERSION", "7"]).unwrap();
    assert_eq!(text(&art), "Redis ver. 7.4.0\n");
    // Client eviction is not built: the setting exists and takes only 0.
    assert_eq!(
        strs(&mut c, &["CONFIG", "GET", "maxmemory-clients"]),
        ["maxmemory-clients", "0"]
    );
    let e = err_text(q::<()>(
        &mut c,
        &["CONFIG", "SET", "maxmemory-clients", "10mb"],
    ));
    assert!(e.contains("client eviction is not available"), "{e}");
    q::<()>(&mut c, &["MEMORY", "PURGE"]).unwrap();
}

#[test]
fn acl_log_and_xinfo_72_fields() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    q::<()>(&mut c, &["ACL", "SETUSER", "u72", "on", "nopass", "+ping"]).unwrap();
    q::<()>(&mut c, &["AUTH", "u72", "x"]).unwrap();
    assert!(q::<()>(&mut c, &["GET", "k"]).is_err());
    assert!(q::<()>(&mut c, &["GET", "k"]).is_err());
    q::<()>(&mut c, &["AUTH", "default", "x"]).unwrap();
    let log: Vec<std::collections::HashMap<String, Value>> = q(&mut c, &["ACL", "LOG"]).unwrap();
    assert_eq!(log.len(), 1);
    let e = &log[0];
    assert_eq!(e["count"], Value::Int(2));
    assert_eq!(e["entry-id"], Value::Int(0));
    let (Value::Int(created), Value::Int(updated)) =
        (&e["timestamp-created"], &e["timestamp-last-updated"])
    else {
        panic!("{e:?}")
    };
    assert!(*created > 1_600_000_000_000 && updated >= created);

    // XINFO: seen-time is the last attempt, active-time the last delivery (Redis 7.2).
    q::<String>(&mut c, &["XADD", "s", "1-1", "f", "v"]).unwrap();
    q::<()>(&mut c, &["XGROUP", "CREATE", "s", "g", "0"]).unwrap();
    q::<()>(&mut c, &["XGROUP", "CREATECONSUMER", "s", "g", "idle"]).unwrap();
    q::<Value>(
        &mut c,
        &["XREADGROUP", "GROUP", "g", "reader", "STREAMS", "s", ">"],
    )
    .unwrap();
    let cs: Vec<std::collections::HashMap<String, Value>> =
        q(&mut c, &["XINFO", "CONSUMERS", "s", "g"]).unwrap();
    let by = |n: &str| {
        cs.iter()
            .find(|m| m["name"] == Value::BulkString(n.into()))
            .unwrap()
    };
    assert_eq!(by("idle")["inactive"], Value::Int(-1));
    let Value::Int(inactive) = &by("reader")["inactive"] else {
        panic!("{cs:?}")
    };
    assert!((0..5000).contains(inactive), "{cs:?}");
    let full: Value = q(&mut c, &["XINFO", "STREAM", "s", "FULL"]).unwrap();
    let dump = format!("{full:?}");
    assert!(dump.contains("active-time"), "{dump}");
}
