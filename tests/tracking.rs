//! Client-side caching (CLIENT TRACKING) against the real binary, byte for byte on raw
//! connections: RESP3 `invalidate` pushes, a RESP2 redirect to a `__redis__:invalidate`
//! subscriber and its `tracking-redir-broken`, BCAST prefixes, OPTIN, NOLOOP, expiry, flush,
//! the table's limit, document collections, bad arguments; and redis-py's client-side cache
//! (tests/clients/client_cache.py).

mod support;

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::Duration;
use support::{info_value, resp, Raw, TestServer};

fn send(r: &mut Raw, args: &[&str]) {
    r.send(&resp(args));
}

fn expect(r: &mut Raw, args: &[&str], reply: &[u8]) {
    r.roundtrip(&resp(args), reply);
}

fn ok(r: &mut Raw, args: &[&str]) {
    expect(r, args, b"+OK\r\n");
}

/// A RESP3 connection.
fn resp3(s: &TestServer) -> Raw {
    let mut r = s.raw();
    send(&mut r, &["HELLO", "3"]);
    r.read_until(b"modules\r\n*0\r\n");
    r
}

fn client_id(r: &mut Raw) -> String {
    send(r, &["CLIENT", "ID"]);
    let line = r.read_until(b"\r\n");
    String::from_utf8_lossy(&line[1..line.len() - 2]).into_owned()
}

/// The bytes of an `invalidate` push for `keys` (None: the flush null).
fn inval(keys: Option<&[&str]>) -> Vec<u8> {
    let mut v = b">2\r\n$10\r\ninvalidate\r\n".to_vec();
    match keys {
        None => v.extend_from_slice(b"_\r\n"),
        Some(keys) => {
            v.extend_from_slice(format!("*{}\r\n", keys.len()).as_bytes());
            for k in keys {
                v.extend_from_slice(format!("${}\r\n{k}\r\n", k.len()).as_bytes());
            }
        }
    }
    v
}

/// Reads exactly `expected` (a push that must arrive without a request).
fn arrives(r: &mut Raw, expected: &[u8]) {
    let got = r.read_n(expected.len());
    assert_eq!(
        String::from_utf8_lossy(&got),
        String::from_utf8_lossy(expected)
    );
}

/// Nothing is waiting for `r`: a PING answers at once and nothing follows it.
fn quiet(r: &mut Raw) {
    expect(r, &["PING"], b"+PONG\r\n");
    r.0.set_read_timeout(Some(Duration::from_millis(150))).ok();
    let mut b = [0u8; 64];
    let extra = match r.0.read(&mut b) {
        Ok(n) => String::from_utf8_lossy(&b[..n]).into_owned(),
        Err(_) => String::new(),
    };
    r.0.set_read_timeout(Some(Duration::from_secs(5))).ok();
    assert_eq!(extra, "", "unexpected message");
}

#[test]
fn resp3_push_for_the_keys_read_once_each() {
    let s = TestServer::start(&[]);
    let mut w = s.raw();
    let mut c = resp3(&s);
    ok(&mut w, &["MSET", "a", "1", "b", "2"]);
    ok(&mut c, &["CLIENT", "TRACKING", "ON"]);
    expect(&mut c, &["GET", "a"], b"$1\r\n1\r\n");
    // b was not read, a was: only a is invalidated, once.
    ok(&mut w, &["SET", "b", "3"]);
    ok(&mut w, &["SET", "a", "3"]);
    arrives(&mut c, &inval(Some(&["a"])));
    ok(&mut w, &["SET", "a", "4"]);
    quiet(&mut c);
    // A write of its own comes after its reply; DEL, INCR, HSET... all invalidate.
    expect(&mut c, &["MGET", "a", "b"], b"*2\r\n$1\r\n4\r\n$1\r\n3\r\n");
    let mut want = b":1\r\n".to_vec();
    want.extend(inval(Some(&["b"])));
    expect(&mut c, &["DEL", "b"], &want);
    expect(&mut w, &["HSET", "h", "f", "v"], b":1\r\n");
    expect(&mut c, &["HGET", "h", "f"], b"$1\r\nv\r\n");
    expect(&mut w, &["HDEL", "h", "f"], b":1\r\n");
    arrives(&mut c, &inval(Some(&["h"])));
    // INFO's fields: one tracking client, a in the table.
    let mut i = s.conn();
    assert_eq!(
        info_value(&mut i, "clients", "tracking_clients").as_deref(),
        Some("1")
    );
    assert_eq!(
        info_value(&mut i, "stats", "tracking_total_keys").as_deref(),
        Some("1")
    );
    assert_eq!(
        info_value(&mut i, "stats", "tracking_total_items").as_deref(),
        Some("1")
    );
    // FLUSHALL: a null for everything, and the table is empty.
    ok(&mut w, &["FLUSHALL"]);
    arrives(&mut c, &inval(None));
    assert_eq!(
        info_value(&mut i, "stats", "tracking_total_keys").as_deref(),
        Some("0")
    );
    // OFF: nothing more.
    expect(&mut c, &["GET", "a"], b"_\r\n");
    ok(&mut c, &["CLIENT", "TRACKING", "OFF"]);
    ok(&mut w, &["SET", "a", "5"]);
    quiet(&mut c);
    assert_eq!(
        info_value(&mut i, "clients", "tracking_clients").as_deref(),
        Some("0")
    );
}

#[test]
fn resp2_redirect_to_a_subscriber_and_broken_redirect() {
    let s = TestServer::start(&[]);
    let mut w = s.raw();
    let mut sub = s.raw();
    let sub_id = client_id(&mut sub);
    expect(
        &mut sub,
        &["SUBSCRIBE", "__redis__:invalidate"],
        b"*3\r\n$9\r\nsubscribe\r\n$20\r\n__redis__:invalidate\r\n:1\r\n",
    );
    let mut c = s.raw();
    ok(&mut c, &["CLIENT", "TRACKING", "ON", "REDIRECT", &sub_id]);
    expect(
        &mut c,
        &["CLIENT", "GETREDIR"],
        format!(":{sub_id}\r\n").as_bytes(),
    );
    ok(&mut w, &["SET", "k", "v"]);
    expect(&mut c, &["GET", "k"], b"$1\r\nv\r\n");
    ok(&mut w, &["SET", "k", "w"]);
    arrives(
        &mut sub,
        b"*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n*1\r\n$1\r\nk\r\n",
    );
    // The tracking client is RESP2 and redirects: nothing comes to it.
    quiet(&mut c);

    // The target goes away: a RESP3 tracking client hears of it at the next invalidation.
    send(&mut c, &["HELLO", "3"]);
    c.read_until(b"modules\r\n*0\r\n");
    expect(&mut c, &["GET", "k"], b"$1\r\nw\r\n");
    expect(&mut sub, &["QUIT"], b"+OK\r\n");
    ok(&mut w, &["SET", "k", "x"]);
    arrives(
        &mut c,
        format!(">2\r\n$21\r\ntracking-redir-broken\r\n:{sub_id}\r\n").as_bytes(),
    );
    let mut info = format!(
        "%3\r\n$5\r\nflags\r\n~2\r\n$2\r\non\r\n$15\r\nbroken_redirect\r\n$8\r\nredirect\r\n:{sub_id}\r\n"
    )
    .into_bytes();
    info.extend_from_slice(b"$8\r\nprefixes\r\n*0\r\n");
    expect(&mut c, &["CLIENT", "TRACKINGINFO"], &info);
}

#[test]
fn bcast_prefixes_and_noloop() {
    let s = TestServer::start(&[]);
    let mut w = s.raw();
    let mut c = resp3(&s);
    ok(
        &mut c,
        &[
            "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "a:", "PREFIX", "b:",
        ],
    );
    // One message per prefix, at the end of the command; c:1 is under neither.
    ok(
        &mut w,
        &["MSET", "a:1", "x", "b:1", "y", "c:1", "z", "a:2", "x"],
    );
    let mut both = inval(Some(&["a:1", "a:2"]));
    both.extend(inval(Some(&["b:1"])));
    arrives(&mut c, &both);
    // Overlapping prefixes are refused, with Redis's texts, and change nothing.
    expect(
        &mut c,
        &["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "a"],
        b"-ERR Prefix 'a' overlaps with an existing prefix 'a:'. Prefixes for a single client must not overlap.\r\n",
    );
    let mut fresh = resp3(&s);
    expect(
        &mut fresh,
        &["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "ab", "PREFIX", "a"],
        b"-ERR Prefix 'ab' overlaps with another provided prefix 'a'. Prefixes for a single client must not overlap.\r\n",
    );
    expect(
        &mut fresh,
        &["CLIENT", "TRACKINGINFO"],
        b"%3\r\n$5\r\nflags\r\n~1\r\n$3\r\noff\r\n$8\r\nredirect\r\n:-1\r\n$8\r\nprefixes\r\n*0\r\n",
    );
    let mut i = s.conn();
    assert_eq!(
        info_value(&mut i, "stats", "tracking_total_prefixes").as_deref(),
        Some("2")
    );

    // NOLOOP in BCAST: its own writes are left out, others' are not.
    ok(&mut c, &["CLIENT", "TRACKING", "OFF"]);
    ok(&mut c, &["CLIENT", "TRACKING", "ON", "BCAST", "NOLOOP"]);
    ok(&mut c, &["SET", "mine", "1"]);
    quiet(&mut c);
    ok(&mut w, &["SET", "theirs", "1"]);
    arrives(&mut c, &inval(Some(&["theirs"])));

    // NOLOOP in the default mode.
    let mut d = resp3(&s);
    ok(&mut d, &["CLIENT", "TRACKING", "ON", "NOLOOP"]);
    expect(&mut d, &["MGET", "x", "y"], b"*2\r\n_\r\n_\r\n");
    ok(&mut d, &["SET", "x", "1"]);
    quiet(&mut d);
    ok(&mut w, &["SET", "y", "1"]);
    arrives(&mut d, &inval(Some(&["y"])));
}

#[test]
fn optin_tracks_only_after_caching_yes() {
    let s = TestServer::start(&[]);
    let mut w = s.raw();
    let mut c = resp3(&s);
    expect(
        &mut c,
        &["CLIENT", "CACHING", "YES"],
        b"-ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled\r\n",
    );
    ok(&mut c, &["CLIENT", "TRACKING", "ON", "OPTIN"]);
    expect(
        &mut c,
        &["CLIENT", "CACHING", "NO"],
        b"-ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.\r\n",
    );
    expect(&mut c, &["GET", "k1"], b"_\r\n");
    ok(&mut c, &["CLIENT", "CACHING", "YES"]);
    expect(&mut c, &["GET", "k2"], b"_\r\n");
    // The yes was for one command only.
    expect(&mut c, &["GET", "k3"], b"_\r\n");
    ok(&mut w, &["MSET", "k1", "1", "k2", "2", "k3", "3"]);
    arrives(&mut c, &inval(Some(&["k2"])));
    quiet(&mut c);
    expect(
        &mut c,
        &["CLIENT", "TRACKING", "ON", "OPTOUT"],
        b"-ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.\r\n",
    );
}

#[test]
fn expiry_and_table_limit_invalidate() {
    let s = TestServer::start(&[]);
    let mut w = s.raw();
    let mut c = resp3(&s);
    ok(&mut c, &["CLIENT", "TRACKING", "ON"]);
    ok(&mut w, &["SET", "short", "v", "PX", "100"]);
    expect(&mut c, &["GET", "short"], b"$1\r\nv\r\n");
    // The active expiry removes it with nobody asking: the push comes on its own.
    arrives(&mut c, &inval(Some(&["short"])));

    // Past tracking-table-max-keys, keys leave the table with an invalidation each.
    expect(
        &mut c,
        &["MGET", "k1", "k2", "k3"],
        b"*3\r\n_\r\n_\r\n_\r\n",
    );
    ok(&mut w, &["CONFIG", "SET", "tracking-table-max-keys", "1"]);
    let mut got = Vec::new();
    for _ in 0..2 {
        let frame = c.read_until(b"\r\n*1\r\n");
        got.extend(frame);
        got.extend(c.read_until(b"\r\n"));
        got.extend(c.read_until(b"\r\n"));
    }
    let text = String::from_utf8_lossy(&got).into_owned();
    assert_eq!(text.matches("invalidate").count(), 2, "{text}");
    let mut i = s.conn();
    assert_eq!(
        info_value(&mut i, "stats", "tracking_total_keys").as_deref(),
        Some("1")
    );
}

/// A key evicted before a command runs is invalidated before that command's reply (Redis
/// writes it at once; the command's own invalidations come after its reply).
#[test]
fn eviction_invalidation_comes_before_the_reply() {
    let s = TestServer::start(&[]);
    let mut w = s.conn();
    let mut c = resp3(&s);
    ok(&mut c, &["CLIENT", "TRACKING", "ON"]);
    let used: u64 = info_value(&mut w, "memory", "used_memory")
        .and_then(|v| v.parse().ok())
        .expect("used_memory");
    let limit = (used + 1024 * 1024).to_string();
    let _: () = support::q(&mut w, &["CONFIG", "SET", "maxmemory", &limit]).expect("maxmemory");
    let _: () = support::q(
        &mut w,
        &["CONFIG", "SET", "maxmemory-policy", "volatile-random"],
    )
    .expect("policy");
    ok(&mut c, &["SETEX", "volatile-key", "10000", "x"]);
    expect(&mut c, &["GET", "volatile-key"], b"$1\r\nx\r\n");
    // 2 MB: the next write must evict, and only the volatile key can go. (The server's
    // own allocations since INFO may already put it over the limit, so SETBIT itself may be
    // the command that evicts: either way the push precedes that command's reply.)
    let push = inval(Some(&["volatile-key"]));
    send(&mut c, &["SETBIT", "big", "16000000", "0"]);
    let first = c.read_n(1);
    if first == b">" {
        arrives(&mut c, &push[1..]);
        // Then SETBIT's own reply: done, or refused if still over the limit.
        let reply = String::from_utf8_lossy(&c.read_until(b"\r\n")).into_owned();
        assert!(reply == ":0\r\n" || reply.starts_with("-OOM"), "{reply}");
    } else {
        arrives(&mut c, b"0\r\n");
        let mut want = push;
        want.extend_from_slice(b"-OOM command not allowed when used memory > 'maxmemory'.\r\n");
        expect(&mut c, &["SET", "x", "y"], &want);
    }
    let _: () = support::q(&mut w, &["CONFIG", "SET", "maxmemory", "0"]).expect("maxmemory");
}

#[test]
fn document_reads_are_invalidated_by_collection_changes() {
    let s = TestServer::start(&["--ttl-monitor-period", "1"]);
    let mut w = s.conn();
    let mut c = resp3(&s);
    let _: Vec<String> =
        support::q(&mut w, &["DOC.INSERT", "users", r#"{"_id":1,"n":"a"}"#]).expect("insert");
    ok(&mut c, &["CLIENT", "TRACKING", "ON"]);
    let reads: [&[&str]; 4] = [
        &["DOC.FINDONE", "users", "{}"],
        &["DOC.FIND", "users", "{}"],
        &["DOC.COUNT", "users", "{}"],
        &["DOC.AGGREGATE", "users", r#"[{"$match":{}}]"#],
    ];
    let writes: [&[&str]; 4] = [
        &["DOC.INSERT", "users", r#"{"_id":2}"#],
        &[
            "DOC.UPDATE",
            "users",
            r#"{"_id":2}"#,
            r#"{"$set":{"n":"b"}}"#,
        ],
        &["DOC.DELETE", "users", r#"{"_id":2}"#],
        &["DOC.DROP", "users"],
    ];
    for (read, write) in reads.iter().zip(writes) {
        send(&mut c, read);
        // The reply's length varies by read; PING marks its end.
        send(&mut c, &["PING"]);
        c.read_until(b"+PONG\r\n");
        let _: redis::Value = support::q(&mut w, write).expect("write");
        arrives(&mut c, &inval(Some(&["users"])));
    }
    // A document that expires through a TTL index invalidates its collection too.
    let _: String = support::q(&mut w, &["DOC.EXPIREINDEX", "sessions", "at", "0"]).expect("index");
    let soon = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
        + 300;
    let doc = format!(r#"{{"_id":1,"at":{{"$date":{{"$numberLong":"{soon}"}}}}}}"#);
    let _: Vec<String> = support::q(&mut w, &["DOC.INSERT", "sessions", &doc]).expect("insert");
    expect(&mut c, &["DOC.COUNT", "sessions", "{}"], b":1\r\n");
    c.0.set_read_timeout(Some(Duration::from_secs(10))).ok();
    arrives(&mut c, &inval(Some(&["sessions"])));
}

#[test]
fn bad_arguments_change_nothing() {
    let s = TestServer::start(&[]);
    let mut c = resp3(&s);
    for (args, err) in [
        (
            &["CLIENT", "TRACKING", "ON", "REDIRECT", "999999"][..],
            "-ERR The client ID you want redirect to does not exist\r\n",
        ),
        (
            &["CLIENT", "TRACKING", "ON", "PREFIX", "a"][..],
            "-ERR PREFIX option requires BCAST mode to be enabled\r\n",
        ),
        (
            &["CLIENT", "TRACKING", "ON", "BCAST", "OPTIN"][..],
            "-ERR OPTIN and OPTOUT are not compatible with BCAST\r\n",
        ),
        (
            &["CLIENT", "TRACKING", "ON", "OPTIN", "OPTOUT"][..],
            "-ERR You can't specify both OPTIN mode and OPTOUT mode\r\n",
        ),
        (
            &["CLIENT", "TRACKING", "ON", "BOGUS"][..],
            "-ERR syntax error\r\n",
        ),
        (
            &["CLIENT", "TRACKING", "MAYBE"][..],
            "-ERR syntax error\r\n",
        ),
        (
            &["CLIENT", "TRACKING", "ON", "REDIRECT", "x"][..],
            "-ERR value is not an integer or out of range\r\n",
        ),
    ] {
        expect(&mut c, args, err.as_bytes());
    }
    expect(&mut c, &["CLIENT", "GETREDIR"], b":-1\r\n");
    let mut i = s.conn();
    assert_eq!(
        info_value(&mut i, "clients", "tracking_clients").as_deref(),
        Some("0")
    );
    ok(&mut c, &["CLIENT", "TRACKING", "ON"]);
    expect(
        &mut c,
        &["CLIENT", "TRACKING", "ON", "BCAST"],
        b"-ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.\r\n",
    );
    expect(
        &mut c,
        &["CLIENT", "TRACKINGINFO"],
        b"%3\r\n$5\r\nflags\r\n~1\r\n$2\r\non\r\n$8\r\nredirect\r\n:0\r\n$8\r\nprefixes\r\n*0\r\n",
    );
}

/// redis-py's client-side cache (RESP3, `cache_config`): tests/clients/client_cache.py.
/// Skipped with a NOTICE when redis-py is missing, except under CI.
#[test]
fn redis_py_client_side_cache() {
    let have = Command::new("python3")
        .args(["-c", "import redis; from redis.cache import CacheConfig"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|st| st.success());
    if !have {
        assert!(
            std::env::var_os("CI").is_none(),
            "redis-py >= 5.1 is needed under CI (tests/clients/requirements.txt)"
        );
        eprintln!("NOTICE: client_cache.py skipped: redis-py with client-side caching missing");
        return;
    }
    let s = TestServer::start(&[]);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/clients/client_cache.py");
    let out = Command::new("python3")
        .arg(script)
        .arg(s.port.to_string())
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::null())
        .output()
        .expect("run client_cache.py");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("{text}");
    assert!(out.status.success(), "client_cache.py failed:\n{text}");
}
