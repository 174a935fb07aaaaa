//! Sorted set commands through the `redis` crate (and raw RESP3 bytes).

mod support;

use std::collections::HashSet;
use std::time::Instant;
use support::{err_text, int, q, resp, strs, TestServer};

fn ok(c: &mut redis::Connection, args: &[&str]) {
    let _: redis::Value = q(c, args).expect("command");
}

fn enc(c: &mut redis::Connection, key: &str) -> String {
    q(c, &["OBJECT", "ENCODING", key]).expect("encoding")
}

#[test]
fn add_score_rank_and_flags() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    assert_eq!(int(&mut c, &["ZADD", "z", "1", "a", "2", "b", "3", "c"]), 3);
    assert_eq!(int(&mut c, &["ZADD", "z", "NX", "10", "a", "4", "d"]), 1);
    assert_eq!(
        int(&mut c, &["ZADD", "z", "XX", "CH", "5", "a", "9", "zz"]),
        1
    );
    assert_eq!(
        int(&mut c, &["ZADD", "z", "GT", "CH", "1", "a", "7", "b"]),
        1
    );
    assert_eq!(
        int(&mut c, &["ZADD", "z", "LT", "CH", "6", "a", "1", "c"]),
        1
    );
    assert_eq!(int(&mut c, &["ZCARD", "z"]), 4);
    assert_eq!(
        strs(&mut c, &["ZRANGE", "z", "0", "-1", "WITHSCORES"]),
        ["c", "1", "d", "4", "a", "5", "b", "7"]
    );
    let v: Option<String> = q(&mut c, &["ZADD", "z", "INCR", "0.5", "a"]).unwrap();
    assert_eq!(v.as_deref(), Some("5.5"));
    let v: Option<String> = q(&mut c, &["ZADD", "z", "NX", "INCR", "1", "a"]).unwrap();
    assert_eq!(v, None);
    let v: String = q(&mut c, &["ZINCRBY", "z", "0.1", "a"]).unwrap();
    assert_eq!(v, "5.5999999999999996");
    assert_eq!(
        err_text(q::<i64>(&mut c, &["ZADD", "z", "NX", "XX", "1", "a"])),
        "ERR XX and NX options at the same time are not compatible"
    );
    assert_eq!(
        err_text(q::<i64>(&mut c, &["ZADD", "z", "GT", "LT", "1", "a"])),
        "ERR GT, LT, and/or NX options at the same time are not compatible"
    );
    assert_eq!(
        err_text(q::<i64>(&mut c, &["ZADD", "z", "INCR", "1", "a", "2", "b"])),
        "ERR INCR option supports a single increment-element pair"
    );
    assert_eq!(
        err_text(q::<i64>(&mut c, &["ZADD", "z", "x", "a"])),
        "ERR value is not a valid float"
    );
    ok(&mut c, &["ZADD", "inf", "+inf", "a"]);
    assert_eq!(
        err_text(q::<i64>(&mut c, &["ZINCRBY", "inf", "-inf", "a"])),
        "ERR resulting score is not a number (NaN)"
    );
    assert_eq!(int(&mut c, &["ZRANK", "z", "c"]), 0);
    assert_eq!(int(&mut c, &["ZREVRANK", "z", "c"]), 3);
    let r: Option<i64> = q(&mut c, &["ZRANK", "z", "nope"]).unwrap();
    assert_eq!(r, None);
    let v: Vec<Option<String>> = q(&mut c, &["ZMSCORE", "z", "c", "nope"]).unwrap();
    assert_eq!(v, [Some("1".to_string()), None]);
    assert_eq!(int(&mut c, &["ZREM", "z", "c", "d", "nope"]), 2);
    assert_eq!(int(&mut c, &["ZCOUNT", "z", "(5", "+inf"]), 2);
}

#[test]
fn ranges_and_removals() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    ok(
        &mut c,
        &[
            "ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e",
        ],
    );
    assert_eq!(strs(&mut c, &["ZRANGE", "z", "1", "2"]), ["b", "c"]);
    assert_eq!(strs(&mut c, &["ZRANGE", "z", "0", "1", "REV"]), ["e", "d"]);
    assert_eq!(
        strs(
            &mut c,
            &["ZRANGE", "z", "(1", "4", "BYSCORE", "LIMIT", "1", "2"]
        ),
        ["c", "d"]
    );
    assert_eq!(
        strs(
            &mut c,
            &["ZREVRANGEBYSCORE", "z", "+inf", "(3", "WITHSCORES"]
        ),
        ["e", "5", "d", "4"]
    );
    assert_eq!(strs(&mut c, &["ZRANGEBYLEX", "z", "[b", "(d"]), ["b", "c"]);
    assert_eq!(
        strs(&mut c, &["ZREVRANGEBYLEX", "z", "+", "(c"]),
        ["e", "d"]
    );
    assert_eq!(int(&mut c, &["ZLEXCOUNT", "z", "-", "+"]), 5);
    assert_eq!(
        err_text(q::<i64>(&mut c, &["ZCOUNT", "z", "x", "1"])),
        "ERR min or max is not a float"
    );
    assert_eq!(
        err_text(q::<i64>(&mut c, &["ZLEXCOUNT", "z", "a", "b"])),
        "ERR min or max not valid string range item"
    );
    assert_eq!(int(&mut c, &["ZRANGESTORE", "dst", "z", "0", "1"]), 2);
    assert_eq!(strs(&mut c, &["ZRANGE", "dst", "0", "-1"]), ["a", "b"]);
    assert_eq!(int(&mut c, &["ZREMRANGEBYRANK", "z", "0", "0"]), 1);
    assert_eq!(int(&mut c, &["ZREMRANGEBYSCORE", "z", "(2", "3"]), 1);
    assert_eq!(int(&mut c, &["ZREMRANGEBYLEX", "z", "[d", "+"]), 2);
    assert_eq!(strs(&mut c, &["ZRANGE", "z", "0", "-1"]), ["b"]);
    assert_eq!(int(&mut c, &["ZREMRANGEBYLEX", "z", "-", "+"]), 1);
    assert_eq!(int(&mut c, &["EXISTS", "z"]), 0);
}

#[test]
fn pops_random_and_scan() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    ok(
        &mut c,
        &["ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d"],
    );
    assert_eq!(strs(&mut c, &["ZPOPMIN", "z"]), ["a", "1"]);
    assert_eq!(strs(&mut c, &["ZPOPMAX", "z", "2"]), ["d", "4", "c", "3"]);
    let v: redis::Value = q(&mut c, &["ZMPOP", "2", "nokey", "z", "MIN", "COUNT", "5"]).unwrap();
    assert_eq!(
        v,
        redis::Value::Array(vec![
            redis::Value::BulkString(b"z".to_vec()),
            redis::Value::Array(vec![redis::Value::Array(vec![
                redis::Value::BulkString(b"b".to_vec()),
                redis::Value::BulkString(b"2".to_vec()),
            ])]),
        ])
    );
    assert_eq!(int(&mut c, &["EXISTS", "z"]), 0);
    let v: redis::Value = q(&mut c, &["ZMPOP", "1", "z", "MIN"]).unwrap();
    assert_eq!(v, redis::Value::Nil);

    let members: Vec<String> = (0..20).map(|i| format!("m{i}")).collect();
    for (i, m) in members.iter().enumerate() {
        ok(&mut c, &["ZADD", "r", &i.to_string(), m]);
    }
    let all: HashSet<String> = members.iter().cloned().collect();
    let got = strs(&mut c, &["ZRANDMEMBER", "r", "5"]);
    assert_eq!(got.len(), 5);
    assert_eq!(got.iter().collect::<HashSet<_>>().len(), 5);
    assert!(got.iter().all(|m| all.contains(m)));
    assert_eq!(strs(&mut c, &["ZRANDMEMBER", "r", "50"]).len(), 20);
    let rep = strs(&mut c, &["ZRANDMEMBER", "r", "-50", "WITHSCORES"]);
    assert_eq!(rep.len(), 100);
    for p in rep.chunks(2) {
        assert_eq!(p[0], format!("m{}", p[1]));
    }
    let one: String = q(&mut c, &["ZRANDMEMBER", "r"]).unwrap();
    assert!(all.contains(&one));
    let (cur, items): (String, Vec<String>) =
        q(&mut c, &["ZSCAN", "r", "0", "MATCH", "m1*"]).unwrap();
    assert_eq!(cur, "0");
    assert_eq!(items.len(), 22);
}

#[test]
fn set_operations() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    ok(&mut c, &["ZADD", "a", "1", "x", "2", "y", "3", "z"]);
    ok(&mut c, &["ZADD", "b", "10", "y", "20", "z", "30", "w"]);
    assert_eq!(
        strs(&mut c, &["ZUNION", "2", "a", "b", "WITHSCORES"]),
        ["x", "1", "y", "12", "z", "23", "w", "30"]
    );
    assert_eq!(
        strs(
            &mut c,
            &["ZINTER", "2", "a", "b", "AGGREGATE", "MIN", "WITHSCORES"]
        ),
        ["y", "2", "z", "3"]
    );
    assert_eq!(strs(&mut c, &["ZDIFF", "2", "a", "b"]), ["x"]);
    assert_eq!(
        int(
            &mut c,
            &["ZUNIONSTORE", "d", "2", "a", "b", "WEIGHTS", "2", "1"]
        ),
        4
    );
    assert_eq!(
        strs(&mut c, &["ZRANGE", "d", "0", "-1", "WITHSCORES"]),
        ["x", "2", "y", "14", "z", "26", "w", "30"]
    );
    assert_eq!(int(&mut c, &["ZINTERSTORE", "d", "2", "a", "b"]), 2);
    assert_eq!(int(&mut c, &["ZDIFFSTORE", "d", "2", "a", "a"]), 0);
    assert_eq!(int(&mut c, &["EXISTS", "d"]), 0);
    assert_eq!(int(&mut c, &["ZINTERCARD", "2", "a", "b"]), 2);
    assert_eq!(int(&mut c, &["ZINTERCARD", "2", "a", "b", "LIMIT", "1"]), 1);
    assert_eq!(
        err_text(q::<i64>(&mut c, &["ZUNION", "0", "a"])),
        "ERR at least 1 input key is needed for 'zunion' command"
    );
    assert_eq!(
        err_text(q::<i64>(
            &mut c,
            &["ZUNION", "2", "a", "b", "WEIGHTS", "1", "x"]
        )),
        "ERR weight value is not a float"
    );
}

#[test]
fn wrongtype_everywhere() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    ok(&mut c, &["SET", "s", "x"]);
    ok(&mut c, &["ZADD", "z", "1", "a"]);
    let wt = "WRONGTYPE Operation against a key holding the wrong kind of value";
    for cmd in [
        &["ZADD", "s", "1", "a"][..],
        &["ZINCRBY", "s", "1", "a"],
        &["ZREM", "s", "a"],
        &["ZCARD", "s"],
        &["ZCOUNT", "s", "0", "1"],
        &["ZLEXCOUNT", "s", "-", "+"],
        &["ZSCORE", "s", "a"],
        &["ZMSCORE", "s", "a"],
        &["ZRANK", "s", "a"],
        &["ZREVRANK", "s", "a"],
        &["ZRANGE", "s", "0", "-1"],
        &["ZRANGESTORE", "d", "s", "0", "-1"],
        &["ZRANGEBYSCORE", "s", "0", "1"],
        &["ZREVRANGEBYSCORE", "s", "1", "0"],
        &["ZRANGEBYLEX", "s", "-", "+"],
        &["ZREVRANGEBYLEX", "s", "+", "-"],
        &["ZREVRANGE", "s", "0", "-1"],
        &["ZREMRANGEBYRANK", "s", "0", "1"],
        &["ZREMRANGEBYSCORE", "s", "0", "1"],
        &["ZREMRANGEBYLEX", "s", "-", "+"],
        &["ZPOPMIN", "s"],
        &["ZPOPMAX", "s"],
        &["ZMPOP", "1", "s", "MIN"],
        &["ZRANDMEMBER", "s"],
        &["ZUNION", "2", "z", "s"],
        &["ZINTER", "2", "z", "s"],
        &["ZDIFF", "2", "z", "s"],
        &["ZUNIONSTORE", "d", "2", "z", "s"],
        &["ZINTERSTORE", "d", "2", "z", "s"],
        &["ZDIFFSTORE", "d", "2", "z", "s"],
        &["ZINTERCARD", "2", "z", "s"],
        &["ZSCAN", "s", "0"],
    ] {
        assert_eq!(err_text(q::<redis::Value>(&mut c, cmd)), wt, "{cmd:?}");
    }
    assert_eq!(int(&mut c, &["EXISTS", "d"]), 0);
}

#[test]
fn encodings_convert_past_the_limits() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    ok(&mut c, &["ZADD", "z", "1", "a"]);
    assert_eq!(enc(&mut c, "z"), "listpack");
    for i in 0..128 {
        ok(&mut c, &["ZADD", "z", &i.to_string(), &format!("m{i}")]);
    }
    assert_eq!(enc(&mut c, "z"), "skiplist");
    assert_eq!(int(&mut c, &["ZCARD", "z"]), 129);
    let long = "x".repeat(65);
    ok(&mut c, &["ZADD", "y", "1", "a"]);
    ok(&mut c, &["ZADD", "y", "1", &long]);
    assert_eq!(enc(&mut c, "y"), "skiplist");
    ok(&mut c, &["CONFIG", "SET", "zset-max-listpack-entries", "4"]);
    ok(
        &mut c,
        &["ZADD", "w", "1", "a", "2", "b", "3", "c", "4", "d"],
    );
    assert_eq!(enc(&mut c, "w"), "listpack");
    ok(&mut c, &["ZADD", "w", "5", "e"]);
    assert_eq!(enc(&mut c, "w"), "skiplist");
    assert_eq!(
        strs(&mut c, &["ZRANGE", "w", "0", "-1"]),
        ["a", "b", "c", "d", "e"]
    );
    // A stored result small enough is packed again.
    assert_eq!(int(&mut c, &["ZUNIONSTORE", "u", "1", "w"]), 5);
    assert_eq!(enc(&mut c, "u"), "skiplist");
    assert_eq!(int(&mut c, &["ZRANGESTORE", "u", "w", "0", "1"]), 2);
    assert_eq!(enc(&mut c, "u"), "listpack");
}

#[test]
fn rank_is_logarithmic_on_large_sets() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    let n = 100_000;
    let mut pipe = redis::pipe();
    for chunk in (0..n).collect::<Vec<_>>().chunks(1000) {
        let mut cmd = redis::cmd("ZADD");
        cmd.arg("big");
        for i in chunk {
            cmd.arg(*i).arg(format!("m{i}"));
        }
        pipe.add_command(cmd).ignore();
    }
    let _: () = pipe.query(&mut c).unwrap();
    assert_eq!(int(&mut c, &["ZCARD", "big"]), n);
    let t = Instant::now();
    let mut pipe = redis::pipe();
    for i in (0..n).step_by(50) {
        pipe.cmd("ZRANK").arg("big").arg(format!("m{i}"));
    }
    let ranks: Vec<i64> = pipe.query(&mut c).unwrap();
    assert_eq!(ranks, (0..n).step_by(50).collect::<Vec<_>>());
    let v = strs(&mut c, &["ZRANGE", "big", "50000", "50001"]);
    assert_eq!(v, ["m50000", "m50001"]);
    assert_eq!(int(&mut c, &["ZCOUNT", "big", "(99", "1000"]), 901);
    // 2000 rank lookups on 100k members: far below a second even unoptimized when each is
    // O(log n); a linear scan each would take many seconds.
    assert!(t.elapsed().as_secs_f64() < 5.0, "{:?}", t.elapsed());
    assert_eq!(
        int(&mut c, &["ZREMRANGEBYRANK", "big", "10", "99989"]),
        99980
    );
    assert_eq!(int(&mut c, &["ZCARD", "big"]), 20);
}

#[test]
fn keyspace_events() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    ok(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "KEA"]);
    let mut sub = s.raw();
    sub.send(&resp(&["PSUBSCRIBE", "__keyevent@0__:*"]));
    sub.read_until(b":1\r\n");
    ok(&mut c, &["ZADD", "z", "1", "a", "2", "b"]);
    ok(&mut c, &["ZINCRBY", "z", "1", "a"]);
    ok(&mut c, &["ZREM", "z", "a"]);
    ok(&mut c, &["ZPOPMIN", "z"]);
    ok(&mut c, &["ZADD", "z", "1", "a"]);
    ok(&mut c, &["ZUNIONSTORE", "d", "1", "z"]);
    ok(&mut c, &["ZREMRANGEBYSCORE", "z", "-inf", "+inf"]);
    for ev in [
        "zadd",
        "zincr",
        "zrem",
        "zpopmin",
        "del",
        "zadd",
        "zunionstore",
        "zremrangebyscore",
        "del",
    ] {
        let got = sub.read_until(b"\r\n$1\r\n");
        let text = String::from_utf8_lossy(&got).to_string();
        assert!(
            text.contains(&format!(":{ev}\r\n")),
            "expected {ev} in {text}"
        );
        sub.read_until(b"\r\n");
    }
}

#[test]
fn resp3_replies_match_redis() {
    let s = TestServer::start(&[]);
    let mut r = s.raw();
    // Expected bytes captured from redis-server 7.0.15.
    let steps: &[(&[&str], &[u8])] = &[
        (&["ZADD", "fl", "1.1", "a", "2", "b"], b":2\r\n"),
        (&["ZADD", "a", "1", "x", "2", "y", "3", "z"], b":3\r\n"),
        (&["ZADD", "b", "10", "y"], b":1\r\n"),
    ];
    for (cmd, exp) in steps {
        r.roundtrip(&resp(cmd), exp);
    }
    r.send(&resp(&["HELLO", "3"]));
    r.read_until(b"modules\r\n*0\r\n");
    let steps: &[(&[&str], &[u8])] = &[
        (&["ZSCORE", "fl", "a"], b",1.1000000000000001\r\n"),
        (&["ZSCORE", "fl", "nope"], b"_\r\n"),
        (
            &["ZMSCORE", "fl", "a", "nope"],
            b"*2\r\n,1.1000000000000001\r\n_\r\n",
        ),
        (
            &["ZRANGE", "a", "0", "-1", "WITHSCORES"],
            b"*3\r\n*2\r\n$1\r\nx\r\n,1\r\n*2\r\n$1\r\ny\r\n,2\r\n*2\r\n$1\r\nz\r\n,3\r\n",
        ),
        (&["ZINCRBY", "a", "1", "x"], b",2\r\n"),
        (&["ZADD", "a", "INCR", "1", "x"], b",3\r\n"),
        (&["ZPOPMIN", "a"], b"*2\r\n$1\r\ny\r\n,2\r\n"),
        (
            &["ZPOPMAX", "a", "5"],
            b"*2\r\n*2\r\n$1\r\nz\r\n,3\r\n*2\r\n$1\r\nx\r\n,3\r\n",
        ),
        (&["ZADD", "a", "1", "x", "2", "y", "3", "z"], b":3\r\n"),
        (
            &["ZUNION", "2", "a", "b", "WITHSCORES"],
            b"*3\r\n*2\r\n$1\r\nx\r\n,1\r\n*2\r\n$1\r\nz\r\n,3\r\n*2\r\n$1\r\ny\r\n,12\r\n",
        ),
        (
            &["ZMPOP", "1", "a", "MIN", "COUNT", "2"],
            b"*2\r\n$1\r\na\r\n*2\r\n*2\r\n$1\r\nx\r\n,1\r\n*2\r\n$1\r\ny\r\n,2\r\n",
        ),
    ];
    for (cmd, exp) in steps {
        r.roundtrip(&resp(cmd), exp);
    }
}

#[test]
fn geo_commands() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    assert_eq!(
        int(
            &mut c,
            &[
                "GEOADD",
                "Sicily",
                "13.361389",
                "38.115556",
                "Palermo",
                "15.087269",
                "37.502669",
                "Catania"
            ]
        ),
        2
    );
    let d: String = q(&mut c, &["GEODIST", "Sicily", "Palermo", "Catania", "km"]).unwrap();
    assert_eq!(d, "166.2742");
    assert_eq!(
        strs(&mut c, &["GEOHASH", "Sicily", "Palermo"]),
        ["sqc8b49rny0"]
    );
    let pos: Vec<Vec<String>> = q(&mut c, &["GEOPOS", "Sicily", "Palermo"]).unwrap();
    assert_eq!(pos, [["13.36138933897018433", "38.11555639549629859"]]);
    assert_eq!(
        strs(
            &mut c,
            &[
                "GEOSEARCH",
                "Sicily",
                "FROMLONLAT",
                "15",
                "37",
                "BYRADIUS",
                "200",
                "km",
                "ASC"
            ]
        ),
        ["Catania", "Palermo"]
    );
    assert_eq!(
        strs(
            &mut c,
            &["GEORADIUSBYMEMBER", "Sicily", "Palermo", "100", "km"]
        ),
        ["Palermo"]
    );
    assert_eq!(
        int(
            &mut c,
            &[
                "GEOSEARCHSTORE",
                "d",
                "Sicily",
                "FROMMEMBER",
                "Palermo",
                "BYBOX",
                "400",
                "400",
                "km",
                "STOREDIST"
            ]
        ),
        2
    );
    assert_eq!(
        strs(&mut c, &["ZRANGE", "d", "0", "-1", "WITHSCORES"]),
        ["Palermo", "0", "Catania", "166.27415156960032"]
    );
}

/// Reads one complete RESP reply and returns its bytes.
fn read_reply(r: &mut std::io::BufReader<std::net::TcpStream>, out: &mut Vec<u8>) {
    use std::io::{BufRead, Read};
    let mut line = Vec::new();
    r.read_until(b'\n', &mut line).expect("read");
    out.extend_from_slice(&line);
    let body = String::from_utf8_lossy(&line[1..line.len().saturating_sub(2)]).to_string();
    let n: i64 = body.parse().unwrap_or(0);
    match line[0] {
        b'$' if n >= 0 => {
            let mut b = vec![0u8; n as usize + 2];
            r.read_exact(&mut b).expect("read bulk");
            out.extend_from_slice(&b);
        }
        b'*' => {
            for _ in 0..n.max(0) {
                read_reply(r, out);
            }
        }
        _ => {}
    }
}

struct Peer {
    w: std::net::TcpStream,
    r: std::io::BufReader<std::net::TcpStream>,
}

impl Peer {
    fn new(port: u16) -> Peer {
        let s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
        s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .ok();
        Peer {
            w: s.try_clone().expect("clone"),
            r: std::io::BufReader::new(s),
        }
    }
    fn cmd(&mut self, args: &[String]) -> Vec<u8> {
        use std::io::Write;
        let words: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
        self.w.write_all(&resp(&words)).expect("write");
        let mut out = Vec::new();
        read_reply(&mut self.r, &mut out);
        out
    }
}

/// Random sorted-set commands (deterministic replies only) sent to redis-server and to us:
/// every reply must be the same bytes. Lex ranges go to a key whose scores are all 0 (Redis
/// leaves lex ranges over mixed scores unspecified).
#[test]
fn random_commands_match_redis() {
    let Some(redis) = support::ReferenceRedis::start() else {
        return;
    };
    let ours = TestServer::start(&[]);
    let (mut a, mut b) = (Peer::new(redis.port), Peer::new(ours.port));
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    let mut rnd = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let pick =
        |r: &mut dyn FnMut(u64) -> u64, xs: &[&str]| xs[r(xs.len() as u64) as usize].to_string();
    const SCORES: &[&str] = &[
        "0", "1", "2", "-1", "-3", "5", "0.1", "0.5", "1.5", "2.25", "-0.75", "1e20", "1e-7",
        "3.3333", "inf", "-inf", "+inf", "-0",
    ];
    const BOUNDS: &[&str] = &[
        "-inf", "+inf", "(1", "(0.5", "2", "-1", "(-inf", "(+inf", "0", "(2.25", "5", "1e20",
    ];
    const LEX: &[&str] = &["-", "+", "[a", "(a", "[b", "(m", "[mm", "(z", "[", "("];
    const MEMBERS: &[&str] = &[
        "a", "b", "c", "d", "e", "m", "mm", "x", "y", "z", "10", "-1",
    ];
    const KEYS: &[&str] = &["k1", "k2", "k3"];
    for limit in ["0", "4", "128"] {
        for p in [&mut a, &mut b] {
            p.cmd(&["FLUSHALL".into()]);
            p.cmd(&[
                "CONFIG".into(),
                "SET".into(),
                "zset-max-listpack-entries".into(),
                limit.into(),
            ]);
        }
        for _ in 0..1500 {
            let r = &mut rnd;
            let k = pick(r, KEYS);
            let s =
                |r: &mut dyn FnMut(u64) -> u64| SCORES[r(SCORES.len() as u64) as usize].to_string();
            let c: Vec<String> = match r(16) {
                0..=3 => {
                    let mut c = vec!["ZADD".to_string(), k];
                    for f in ["NX", "XX", "GT", "LT", "CH"] {
                        if r(8) == 0 {
                            c.push(f.into());
                        }
                    }
                    for _ in 0..=r(3) {
                        c.push(s(r));
                        c.push(pick(r, MEMBERS));
                    }
                    c
                }
                4 => vec!["ZINCRBY".into(), k, s(r), pick(r, MEMBERS)],
                5 => vec!["ZREM".into(), k, pick(r, MEMBERS), pick(r, MEMBERS)],
                6 => {
                    let mut c = vec![
                        "ZRANGE".into(),
                        k,
                        (r(13) as i64 - 6).to_string(),
                        (r(13) as i64 - 6).to_string(),
                    ];
                    if r(2) == 0 {
                        c.push("REV".into());
                    }
                    c.push("WITHSCORES".into());
                    c
                }
                7 => {
                    let mut c = vec![
                        "ZRANGE".into(),
                        k,
                        pick(r, BOUNDS),
                        pick(r, BOUNDS),
                        "BYSCORE".into(),
                    ];
                    if r(2) == 0 {
                        c.push("REV".into());
                    }
                    if r(2) == 0 {
                        c.extend([
                            "LIMIT".into(),
                            (r(6) as i64 - 1).to_string(),
                            (r(6) as i64 - 1).to_string(),
                        ]);
                    }
                    c.push("WITHSCORES".into());
                    c
                }
                8 => {
                    if r(2) == 0 {
                        vec!["ZADD".into(), "lx".into(), "0".into(), pick(r, MEMBERS)]
                    } else {
                        let mut c = vec![
                            "ZRANGE".into(),
                            "lx".into(),
                            pick(r, LEX),
                            pick(r, LEX),
                            "BYLEX".into(),
                        ];
                        if r(2) == 0 {
                            c.push("REV".into());
                        }
                        if r(2) == 0 {
                            c.extend([
                                "LIMIT".into(),
                                (r(6) as i64 - 1).to_string(),
                                (r(6) as i64 - 1).to_string(),
                            ]);
                        }
                        c
                    }
                }
                9 => vec!["ZCOUNT".into(), k, pick(r, BOUNDS), pick(r, BOUNDS)],
                10 => vec![
                    pick(r, &["ZLEXCOUNT", "ZREMRANGEBYLEX"]),
                    "lx".into(),
                    pick(r, LEX),
                    pick(r, LEX),
                ],
                11 => vec![
                    pick(r, &["ZRANK", "ZREVRANK", "ZSCORE"]),
                    k,
                    pick(r, MEMBERS),
                ],
                12 => {
                    if r(2) == 0 {
                        vec![
                            "ZREMRANGEBYSCORE".into(),
                            k,
                            pick(r, BOUNDS),
                            pick(r, BOUNDS),
                        ]
                    } else {
                        let dst = pick(r, KEYS);
                        vec![
                            "ZRANGESTORE".into(),
                            dst,
                            k,
                            pick(r, BOUNDS),
                            pick(r, BOUNDS),
                            "BYSCORE".into(),
                        ]
                    }
                }
                13 => vec![pick(r, &["ZPOPMIN", "ZPOPMAX"]), k, r(4).to_string()],
                14 => {
                    let n = 1 + r(3);
                    let mut c = vec![
                        pick(r, &["ZUNIONSTORE", "ZINTERSTORE", "ZDIFFSTORE"]),
                        pick(r, KEYS),
                        n.to_string(),
                    ];
                    for _ in 0..n {
                        c.push(pick(r, KEYS));
                    }
                    if c[0] != "ZDIFFSTORE" && r(2) == 0 {
                        c.push("WEIGHTS".into());
                        for _ in 0..n {
                            c.push(pick(r, &["1", "2", "-1", "0", "0.5", "inf"]));
                        }
                    }
                    if c[0] != "ZDIFFSTORE" && r(2) == 0 {
                        c.extend(["AGGREGATE".into(), pick(r, &["SUM", "MIN", "MAX"])]);
                    }
                    c
                }
                _ => vec![
                    "ZREMRANGEBYRANK".into(),
                    k,
                    (r(9) as i64 - 4).to_string(),
                    (r(9) as i64 - 4).to_string(),
                ],
            };
            let (x, y) = (a.cmd(&c), b.cmd(&c));
            assert_eq!(
                String::from_utf8_lossy(&x),
                String::from_utf8_lossy(&y),
                "limit {limit}: {}",
                c.join(" ")
            );
        }
        for k in KEYS.iter().chain(["lx"].iter()) {
            let c = vec![
                "ZRANGE".to_string(),
                k.to_string(),
                "0".into(),
                "-1".into(),
                "WITHSCORES".into(),
            ];
            assert_eq!(a.cmd(&c), b.cmd(&c), "{k}");
        }
    }
}
