//! DEBUG's subcommands as Redis 7.0 answers them (Redis's own test suite leans on them),
//! MEMORY STATS/DOCTOR, and the query buffer kept and trimmed as Redis trims it.

mod support;

use support::{err_text, q, resp, TestServer};

fn debug_server() -> TestServer {
    TestServer::start(&["--enable-debug-command", "yes"])
}

fn status(c: &mut redis::Connection, args: &[&str]) -> String {
    q::<String>(c, args).expect("status reply")
}

#[test]
fn debug_is_refused_unless_enabled() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    let e = err_text(q::<String>(&mut c, &["DEBUG", "PROTOCOL", "string"]));
    assert!(e.starts_with("ERR DEBUG command not allowed."), "{e}");
}

#[test]
fn debug_object_populate_and_errors_as_redis() {
    let s = debug_server();
    let mut c = s.conn();
    q::<i64>(&mut c, &["RPUSH", "l", "a", "b", "c"]).unwrap();
    q::<String>(&mut c, &["SET", "n", "12345"]).unwrap();
    let line = status(&mut c, &["DEBUG", "OBJECT", "l"]);
    let re = regex::Regex::new(
        r"^Value at:0x[0-9a-f]+ refcount:1 encoding:quicklist serializedlength:\d+ lru:\d+ lru_seconds_idle:\d+ ql_nodes:1 ql_avg_node:3\.00 ql_listpack_max:-2 ql_compressed:0 ql_uncompressed_size:\d+$",
    )
    .unwrap();
    assert!(re.is_match(&line), "{line}");
    let line = status(&mut c, &["DEBUG", "OBJECT", "n"]);
    assert!(line.contains(" encoding:int serializedlength:"), "{line}");
    assert_eq!(
        err_text(q::<String>(&mut c, &["DEBUG", "OBJECT", "nokey"])),
        "ERR no such key"
    );

    // Only packed values print their structure; others get Redis's errors.
    assert_eq!(
        status(&mut c, &["DEBUG", "QUICKLIST", "l"]),
        "Quicklist structure printed on stdout"
    );
    assert_eq!(
        err_text(q::<String>(&mut c, &["DEBUG", "LISTPACK", "l"])),
        "ERR Not a listpack encoded object."
    );
    assert_eq!(
        err_text(q::<String>(&mut c, &["DEBUG", "HTSTATS-KEY", "l"])),
        "ERR The value stored at the specified key is not represented using an hash table"
    );

    assert_eq!(
        status(&mut c, &["DEBUG", "POPULATE", "10", "p", "12"]),
        "OK"
    );
    assert_eq!(support::int(&mut c, &["DBSIZE"]), 12);
    assert_eq!(
        q::<Vec<u8>>(&mut c, &["GET", "p:3"]).unwrap(),
        b"value:3\0\0\0\0\0"
    );
    // Existing keys are left alone.
    q::<String>(&mut c, &["SET", "key:1", "mine"]).unwrap();
    assert_eq!(status(&mut c, &["DEBUG", "POPULATE", "3"]), "OK");
    assert_eq!(q::<String>(&mut c, &["GET", "key:1"]).unwrap(), "mine");
    assert_eq!(q::<String>(&mut c, &["GET", "key:2"]).unwrap(), "value:2");

    assert_eq!(
        status(&mut c, &["DEBUG", "QUICKLIST-PACKED-THRESHOLD", "1b"]),
        "OK"
    );
    assert_eq!(
        err_text(q::<String>(
            &mut c,
            &["DEBUG", "QUICKLIST-PACKED-THRESHOLD", "5gb"]
        )),
        "ERR argument must be a memory value bigger than 1 and smaller than 4gb"
    );
    assert_eq!(
        err_text(q::<String>(&mut c, &["DEBUG", "RELOAD", "BOGUS"])),
        "ERR DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE options."
    );
    // Names Redis 7.0 does not know answer its unknown-subcommand error.
    assert_eq!(
        err_text(q::<String>(&mut c, &["DEBUG", "JMAP"])),
        "ERR unknown subcommand or wrong number of arguments for 'JMAP'. Try DEBUG HELP."
    );
    assert_eq!(
        err_text(q::<String>(&mut c, &["DEBUG", "ERROR", "FOO bar\r\nbaz"])),
        "FOO bar  baz"
    );
    assert_eq!(
        status(&mut c, &["DEBUG", "STRINGMATCH-TEST"]),
        "Apparently Redis did not crash: test passed"
    );
    let before = q::<String>(&mut c, &["INFO", "replication"]).unwrap();
    assert_eq!(status(&mut c, &["DEBUG", "CHANGE-REPL-ID"]), "OK");
    let after = q::<String>(&mut c, &["INFO", "replication"]).unwrap();
    let replid = |t: &str| {
        t.lines()
            .find_map(|l| l.strip_prefix("master_replid:"))
            .map(str::to_string)
    };
    assert_ne!(replid(&before), replid(&after));
    assert_eq!(replid(&after).map(|r| r.len()), Some(40));
}

/// Digests are Redis's own: these values come from redis-server 7.0.15.
#[test]
fn digests_match_redis() {
    let s = debug_server();
    let mut c = s.conn();
    assert_eq!(
        status(&mut c, &["DEBUG", "DIGEST"]),
        "0000000000000000000000000000000000000000"
    );
    q::<String>(&mut c, &["SET", "s", "hello"]).unwrap();
    assert_eq!(
        status(&mut c, &["DEBUG", "DIGEST"]),
        "a500c6b54937da22f2ac1167da1da852479c7339"
    );
    let v: Vec<String> = q(&mut c, &["DEBUG", "DIGEST-VALUE", "s", "nokey"]).unwrap();
    assert_eq!(
        v,
        [
            "36b23a1456b2dce2c3ed252c456761301dba8060",
            "0000000000000000000000000000000000000000"
        ]
    );
    // A copy digests as its source, whatever the encoding.
    let members: Vec<String> = (0..300).map(|i| format!("m{i}")).collect();
    let mut sadd = vec!["SADD", "big"];
    sadd.extend(members.iter().map(String::as_str));
    q::<i64>(&mut c, &sadd).unwrap();
    q::<i64>(&mut c, &["COPY", "big", "big2"]).unwrap();
    let v: Vec<String> = q(&mut c, &["DEBUG", "DIGEST-VALUE", "big", "big2"]).unwrap();
    assert_eq!(v[0], v[1]);
    q::<i64>(&mut c, &["SREM", "big2", "m7"]).unwrap();
    let v: Vec<String> = q(&mut c, &["DEBUG", "DIGEST-VALUE", "big", "big2"]).unwrap();
    assert_ne!(v[0], v[1]);
}

/// DEBUG RELOAD writes each value in its RDB form and reads it back: the data (and so the
/// digest) is the same after, deadlines included; what it cannot do it refuses.
#[test]
fn debug_reload_round_trips_the_data() {
    let s = debug_server();
    let mut c = s.conn();
    let fields: Vec<String> = (0..200).map(|i| format!("f{i}")).collect();
    let mut hset = vec!["HSET", "h"];
    for f in &fields {
        hset.extend([f.as_str(), "v"]);
    }
    q::<i64>(&mut c, &hset).unwrap();
    q::<i64>(&mut c, &["RPUSH", "l", "a", "b", "1"]).unwrap();
    q::<i64>(&mut c, &["ZADD", "z", "1.5", "a", "2", "b"]).unwrap();
    q::<String>(&mut c, &["SET", "e", "v", "EX", "1000"]).unwrap();
    q::<String>(&mut c, &["SELECT", "2"]).unwrap();
    q::<String>(&mut c, &["SET", "other", "12"]).unwrap();
    let before = status(&mut c, &["DEBUG", "DIGEST"]);
    assert_eq!(status(&mut c, &["DEBUG", "RELOAD"]), "OK");
    assert_eq!(status(&mut c, &["DEBUG", "DIGEST"]), before);
    q::<String>(&mut c, &["SELECT", "0"]).unwrap();
    let ttl = support::int(&mut c, &["TTL", "e"]);
    assert!((990..=1000).contains(&ttl), "{ttl}");
    assert_eq!(support::int(&mut c, &["DBSIZE"]), 4);
    assert_eq!(
        status(&mut c, &["DEBUG", "RELOAD", "NOFLUSH", "MERGE"]),
        "OK"
    );
    assert_eq!(status(&mut c, &["DEBUG", "DIGEST"]), before);
    // Refused, with the reason, changing nothing.
    for (args, why) in [
        (
            &["DEBUG", "RELOAD", "NOSAVE"][..],
            "ERR DEBUG RELOAD NOSAVE is not available",
        ),
        (
            &["DEBUG", "RELOAD", "NOFLUSH"][..],
            "ERR Error trying to load the RDB dump: DEBUG RELOAD NOFLUSH without MERGE",
        ),
    ] {
        let e = err_text(q::<String>(&mut c, args));
        assert!(e.starts_with(why), "{e}");
    }
    q::<String>(&mut c, &["XADD", "st", "*", "a", "b"]).unwrap();
    let with_stream = status(&mut c, &["DEBUG", "DIGEST"]);
    let e = err_text(q::<String>(&mut c, &["DEBUG", "RELOAD"]));
    assert!(e.contains("while a stream exists"), "{e}");
    assert_eq!(status(&mut c, &["DEBUG", "DIGEST"]), with_stream);
}

/// RESP2 and RESP3 bytes of DEBUG PROTOCOL, as redis-server 7.0 writes them.
#[test]
fn debug_protocol_replies_in_both_protocols() {
    let s = debug_server();
    let mut r = s.raw();
    let p = |t: &str| resp(&["DEBUG", "PROTOCOL", t]);
    r.roundtrip(
        &p("bignum"),
        b"$37\r\n1234567999999999999999999999999999999\r\n",
    );
    r.roundtrip(&p("map"), b"*6\r\n:0\r\n:0\r\n:1\r\n:1\r\n:2\r\n:0\r\n");
    r.roundtrip(&p("double"), b"$5\r\n3.141\r\n");
    r.roundtrip(&p("null"), b"$-1\r\n");
    r.roundtrip(
        &p("push"),
        b"-ERR RESP2 is not supported by this command\r\n",
    );
    r.roundtrip(&p("nope"), b"-ERR Wrong protocol type name. Please use one of the following: string|integer|double|bignum|null|array|set|map|attrib|push|verbatim|true|false\r\n");
    r.send(&resp(&["HELLO", "3"]));
    r.read_until(b"modules\r\n*0\r\n");
    r.roundtrip(&p("bignum"), b"(1234567999999999999999999999999999999\r\n");
    r.roundtrip(&p("map"), b"%3\r\n:0\r\n#f\r\n:1\r\n#t\r\n:2\r\n#f\r\n");
    r.roundtrip(&p("set"), b"~3\r\n:0\r\n:1\r\n:2\r\n");
    r.roundtrip(&p("double"), b",3.141\r\n");
    r.roundtrip(&p("null"), b"_\r\n");
    r.roundtrip(
        &p("attrib"),
        b"|1\r\n$14\r\nkey-popularity\r\n*2\r\n$7\r\nkey:123\r\n:90\r\n$39\r\nSome real reply following the attribute\r\n",
    );
    r.roundtrip(
        &p("push"),
        b">2\r\n$16\r\nserver-cpu-usage\r\n:42\r\n$40\r\nSome real reply following the push reply\r\n",
    );
    r.roundtrip(&p("verbatim"), b"=29\r\ntxt:This is a verbatim\nstring\r\n");
    r.roundtrip(&p("true"), b"#t\r\n");
}

#[test]
fn memory_stats_and_doctor_speak_redis() {
    let s = debug_server();
    let mut c = s.conn();
    let doctor: String = q(&mut c, &["MEMORY", "DOCTOR"]).unwrap();
    assert!(
        doctor.starts_with("Hi Sam, this instance is empty or is using very little memory"),
        "{doctor}"
    );
    q::<String>(&mut c, &["DEBUG", "POPULATE", "1000"]).unwrap();
    q::<String>(&mut c, &["SET", "e", "1", "EX", "100"]).unwrap();
    let stats: Vec<redis::Value> = q(&mut c, &["MEMORY", "STATS"]).unwrap();
    let names: Vec<String> = stats
        .iter()
        .step_by(2)
        .map(|v| redis::from_redis_value::<String>(v.clone()).unwrap())
        .collect();
    let int = |k: &str| {
        let i = names.iter().position(|n| n == k).expect(k);
        redis::from_redis_value::<i64>(stats[2 * i + 1].clone()).expect(k)
    };
    assert_eq!(names.len(), 28, "{names:?}");
    assert_eq!(names[0], "peak.allocated");
    assert_eq!(names[10], "db.0");
    assert_eq!(names.last().unwrap(), "fragmentation.bytes");
    assert_eq!(int("keys.count"), 1001);
    let total = int("total.allocated");
    assert!(int("peak.allocated") >= total);
    assert!(int("startup.allocated") > 0 && int("startup.allocated") < total);
    assert_eq!(
        int("overhead.total") + int("dataset.bytes"),
        total,
        "the data set is what the overhead leaves"
    );
    let db0 = redis::from_redis_value::<Vec<redis::Value>>(stats[21].clone()).unwrap();
    let main = redis::from_redis_value::<i64>(db0[1].clone()).unwrap();
    let expires = redis::from_redis_value::<i64>(db0[3].clone()).unwrap();
    assert!(main >= 1001 * 48, "{main}");
    assert!(expires > 0 && expires < main, "{expires}");
    assert_eq!(
        q::<String>(&mut c, &["MEMORY", "MALLOC-STATS"]).unwrap(),
        "Stats not supported for the current allocator"
    );
}

/// Redis's `unit/querybuf`: a client's read buffer is kept between requests, trimmed to
/// the recent peak after a burst while the client stays active, and freed once it idles.
#[test]
fn query_buffer_shrinks_after_a_burst_and_goes_when_idle() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    let mut r = s.raw();
    r.roundtrip(&resp(&["CLIENT", "SETNAME", "qb"]), b"+OK\r\n");
    let qbuf = |c: &mut redis::Connection| -> usize {
        let list: String = q(c, &["CLIENT", "LIST"]).unwrap();
        let line = list
            .lines()
            .find(|l| l.contains(" name=qb "))
            .expect("qb listed");
        let field = |k: &str| -> usize {
            line.split(' ')
                .find_map(|f| f.strip_prefix(k))
                .and_then(|v| v.parse().ok())
                .expect(k)
        };
        field("qbuf=") + field("qbuf-free=")
    };
    let first = qbuf(&mut c);
    assert!((16384..32768).contains(&first), "{first}");

    let big = "A".repeat(1 << 20);
    r.roundtrip(&resp(&["SET", "x", &big]), b"+OK\r\n");
    let burst = qbuf(&mut c);
    assert!(burst > 1 << 20, "{burst}");
    // Small requests: the buffer is cut to what they need, not freed.
    let trimmed = support::eventually(3.0, || {
        r.roundtrip(&resp(&["SET", "x", "small"]), b"+OK\r\n");
        qbuf(&mut c) < burst
    });
    assert!(trimmed, "the buffer stayed at {}", qbuf(&mut c));
    let after = qbuf(&mut c);
    assert!(after > 0 && after < 64 * 1024, "{after}");
    // Idle for more than 2 seconds: nothing is held.
    assert!(
        support::eventually(8.0, || qbuf(&mut c) == 0),
        "still {} after idling",
        qbuf(&mut c)
    );
    // And the client still works, with a fresh buffer.
    r.roundtrip(&resp(&["GET", "x"]), b"$5\r\nsmall\r\n");
}

#[test]
fn client_query_buffer_limit_closes_the_client() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    q::<String>(
        &mut c,
        &["CONFIG", "SET", "client-query-buffer-limit", "1mb"],
    )
    .unwrap();
    let mut r = s.raw();
    // A bulk announced longer than the limit, sent in part: closed once the unparsed input
    // passes the limit, as Redis closes it.
    r.send(b"*3\r\n$3\r\nSET\r\n$1\r\nx\r\n$3000000\r\n");
    let chunk = vec![b'a'; 64 * 1024];
    let mut sent = 0;
    while sent < 2_000_000 {
        use std::io::Write;
        if r.0.write_all(&chunk).is_err() {
            break;
        }
        sent += chunk.len();
    }
    assert!(r.closed(), "the client over the limit was not closed");
    assert_eq!(q::<String>(&mut c, &["PING"]).unwrap(), "PONG");
}

/// DEBUG QUICKLIST-PACKED-THRESHOLD is checked with Redis 7.0's bounds (up to 4GB less 1MB,
/// 0 restoring the default) and changes nothing: lists here have no plain nodes, so a list
/// built under a 1-byte threshold is laid out, sized and read exactly as one built under the
/// default (see docs/differences-redis.md).
#[test]
fn quicklist_packed_threshold_is_checked_and_changes_nothing() {
    let s = debug_server();
    let mut c = s.conn();
    let set = |c: &mut redis::Connection, v: &str| {
        q::<String>(c, &["DEBUG", "QUICKLIST-PACKED-THRESHOLD", v])
    };
    for ok in ["0", "1b", "4095mb", "4293918720"] {
        assert_eq!(set(&mut c, ok).unwrap(), "OK", "{ok}");
    }
    for bad in ["4293918721", "4gb", "x", "-1"] {
        assert_eq!(
            err_text(set(&mut c, bad)),
            "ERR argument must be a memory value bigger than 1 and smaller than 4gb",
            "{bad}"
        );
    }
    let big = "b".repeat(10_000);
    let fill = |c: &mut redis::Connection, key: &str| {
        for i in 0..300 {
            let v = if i % 50 == 7 {
                big.clone()
            } else {
                format!("e{i}")
            };
            q::<i64>(c, &["RPUSH", key, &v]).unwrap();
        }
        q::<i64>(c, &["LINSERT", key, "BEFORE", "e3", "x"]).unwrap();
        q::<String>(c, &["LSET", key, "5", &big]).unwrap();
    };
    set(&mut c, "0").unwrap();
    fill(&mut c, "default");
    set(&mut c, "1b").unwrap();
    fill(&mut c, "tiny");
    let usage = |c: &mut redis::Connection, key: &str| {
        q::<i64>(c, &["MEMORY", "USAGE", key, "SAMPLES", "0"]).unwrap()
    };
    assert_eq!(usage(&mut c, "default"), usage(&mut c, "tiny"));
    let all = |c: &mut redis::Connection, key: &str| {
        q::<Vec<String>>(c, &["LRANGE", key, "0", "-1"]).unwrap()
    };
    assert_eq!(all(&mut c, "default"), all(&mut c, "tiny"));
    assert_eq!(
        q::<String>(&mut c, &["OBJECT", "ENCODING", "tiny"]).unwrap(),
        "quicklist"
    );
}
