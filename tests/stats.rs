//! INFO commandstats / errorstats / latencystats, LATENCY, CONFIG RESETSTAT and the memory
//! fields of CLIENT LIST, against the real binary.

mod support;

use std::collections::HashMap;
use std::time::Duration;
use support::{err_text, info_value, q, resp, TestServer};

/// `cmdstat_<name>` of INFO commandstats as its fields, or None when it is not shown.
fn cmdstat(c: &mut redis::Connection, name: &str) -> Option<HashMap<String, String>> {
    let v = info_value(c, "commandstats", &format!("cmdstat_{name}"))?;
    Some(
        v.split(',')
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    )
}

/// (calls, rejected_calls, failed_calls) of a command; zeros when it is not shown.
fn counts(c: &mut redis::Connection, name: &str) -> (u64, u64, u64) {
    match cmdstat(c, name) {
        None => (0, 0, 0),
        Some(f) => {
            let n = |k: &str| f[k].parse::<u64>().expect(k);
            (n("calls"), n("rejected_calls"), n("failed_calls"))
        }
    }
}

fn errorstat(c: &mut redis::Connection, code: &str) -> Option<String> {
    info_value(c, "errorstats", &format!("errorstat_{code}"))
}

/// A number of INFO stats.
fn stats_number(c: &mut redis::Connection, field: &str) -> u64 {
    info_value(c, "stats", field)
        .expect(field)
        .parse()
        .expect("number")
}

fn total_errors(c: &mut redis::Connection) -> u64 {
    stats_number(c, "total_error_replies")
}

fn resetstat(c: &mut redis::Connection) {
    let _: () = q(c, &["CONFIG", "RESETSTAT"]).unwrap();
}

fn total_commands(c: &mut redis::Connection) -> u64 {
    stats_number(c, "total_commands_processed")
}

/// `total_commands_processed` as Redis 7.0 counts it (`stat_numcommands`, bumped after a
/// command ran): commands that ran, those a script or EXEC called included; refused ones
/// (unknown, wrong arity, queued in MULTI, an EXEC discarded) not. The figures are what
/// redis-server 7.0.15 answers to the same requests.
#[test]
fn total_commands_processed_counts_what_ran() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    resetstat(&mut c);
    // The RESETSTAT itself, counted once it ran.
    assert_eq!(total_commands(&mut c), 1);
    let _ = err_text(q::<()>(&mut c, &["NOSUCHCMD"]));
    let _ = err_text(q::<()>(&mut c, &["GET"]));
    // The INFO above.
    assert_eq!(total_commands(&mut c), 2);
    let _: i64 = q(
        &mut c,
        &[
            "EVAL",
            "redis.call('set','a','1') redis.call('get','a') return 1",
            "0",
        ],
    )
    .unwrap();
    // The INFO, the EVAL and its two commands.
    assert_eq!(total_commands(&mut c), 6);
    let _: () = q(&mut c, &["MULTI"]).unwrap();
    let _: String = q(&mut c, &["SET", "x", "1"]).unwrap();
    let _: String = q(&mut c, &["GET", "x"]).unwrap();
    let _: Vec<redis::Value> = q(&mut c, &["EXEC"]).unwrap();
    // The INFO, MULTI, EXEC and the two commands it ran.
    assert_eq!(total_commands(&mut c), 11);
    let _: () = q(&mut c, &["MULTI"]).unwrap();
    let _: String = q(&mut c, &["SET", "x", "1"]).unwrap();
    let _ = err_text(q::<()>(&mut c, &["NOSUCHCMD"]));
    let _ = err_text(q::<()>(&mut c, &["EXEC"]));
    // The INFO, MULTI and the EXEC that answered EXECABORT.
    assert_eq!(total_commands(&mut c), 14);
}

#[test]
fn calls_rejections_and_failures_are_counted_as_redis_counts_them() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    resetstat(&mut c);
    assert_eq!(total_errors(&mut c), 0);

    // Run, run and fail, refused before running.
    let _: () = q(&mut c, &["SET", "k", "v"]).unwrap();
    let _: () = q(&mut c, &["SET", "k2", "v"]).unwrap();
    assert!(err_text(q::<()>(&mut c, &["SET", "k"])).starts_with("ERR wrong number"));
    assert_eq!(counts(&mut c, "set"), (2, 1, 0));
    let f = cmdstat(&mut c, "set").unwrap();
    let usec: f64 = f["usec"].parse().unwrap();
    let per_call: f64 = f["usec_per_call"].parse().unwrap();
    assert!((per_call - usec / 2.0).abs() < 0.01, "{f:?}");
    assert!(err_text(q::<()>(&mut c, &["LPUSH", "k", "x"])).starts_with("WRONGTYPE"));
    assert_eq!(counts(&mut c, "lpush"), (1, 0, 1));
    assert_eq!(errorstat(&mut c, "WRONGTYPE").as_deref(), Some("count=1"));
    // Unknown commands count as errors only; subcommands have their own rows.
    let _ = err_text(q::<()>(&mut c, &["NOSUCHCMD"]));
    let _: i64 = q(&mut c, &["CLIENT", "ID"]).unwrap();
    assert_eq!(counts(&mut c, "client|id"), (1, 0, 0));
    assert_eq!(errorstat(&mut c, "ERR").as_deref(), Some("count=2"));
    assert_eq!(total_errors(&mut c), 3);
    // Nothing is shown for a command never called.
    assert!(cmdstat(&mut c, "zadd").is_none());

    // MULTI: a refused queued command is rejected, EXEC fails with EXECABORT.
    resetstat(&mut c);
    let _: () = q(&mut c, &["MULTI"]).unwrap();
    let _ = err_text(q::<()>(&mut c, &["SET", "x"]));
    assert!(err_text(q::<()>(&mut c, &["EXEC"])).starts_with("EXECABORT"));
    assert_eq!(counts(&mut c, "set"), (0, 1, 0));
    assert_eq!(counts(&mut c, "multi"), (1, 0, 0));
    assert_eq!(counts(&mut c, "exec"), (1, 0, 1));
    assert_eq!(errorstat(&mut c, "EXECABORT").as_deref(), Some("count=1"));
    assert_eq!(total_errors(&mut c), 2);

    // Inside EXEC each command counts; EXEC itself does not fail for its commands' errors.
    resetstat(&mut c);
    // (Raw: the client library turns an EXEC reply holding an error into an error.)
    let mut raw = s.raw();
    for cmd in [
        &["MULTI"][..],
        &["SET", "a", "b"],
        &["LPUSH", "a", "x"],
        &["EXEC"],
    ] {
        raw.send(&resp(cmd));
    }
    let _ = raw.read_until(b"kind of value\r\n");
    assert_eq!(counts(&mut c, "set"), (1, 0, 0));
    assert_eq!(counts(&mut c, "lpush"), (1, 0, 1));
    assert_eq!(counts(&mut c, "exec"), (1, 0, 0));
    assert!(err_text(q::<()>(&mut c, &["EXEC"])).starts_with("ERR EXEC without MULTI"));
    assert_eq!(counts(&mut c, "exec"), (2, 0, 1));
    assert_eq!(total_errors(&mut c), 2);

    // OOM refusals are rejections.
    resetstat(&mut c);
    let _: () = q(&mut c, &["CONFIG", "SET", "maxmemory", "1"]).unwrap();
    assert!(err_text(q::<()>(&mut c, &["SET", "a", "b"])).starts_with("OOM"));
    let _: () = q(&mut c, &["CONFIG", "SET", "maxmemory", "0"]).unwrap();
    assert_eq!(counts(&mut c, "set"), (0, 1, 0));
    assert_eq!(errorstat(&mut c, "OOM").as_deref(), Some("count=1"));
}

#[test]
fn scripts_count_their_commands_and_errors_once() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    resetstat(&mut c);
    let _: redis::Value = q(
        &mut c,
        &[
            "EVAL",
            "redis.call('set', KEYS[1], 0) redis.call('set', KEYS[1], 1) redis.call('expire', KEYS[1], 100)",
            "1",
            "k",
        ],
    )
    .unwrap();
    assert_eq!(counts(&mut c, "eval"), (1, 0, 0));
    assert_eq!(counts(&mut c, "set"), (2, 0, 0));
    assert_eq!(counts(&mut c, "expire"), (1, 0, 0));

    // redis.call's error aborts the script: one error reply, both commands failed.
    resetstat(&mut c);
    let e = err_text(q::<()>(
        &mut c,
        &["EVAL", "return redis.call('select', 99)", "0"],
    ));
    assert!(e.starts_with("ERR DB index is out of range"), "{e}");
    assert_eq!(errorstat(&mut c, "ERR").as_deref(), Some("count=1"));
    assert_eq!(total_errors(&mut c), 1);
    assert_eq!(counts(&mut c, "select"), (1, 0, 1));
    assert_eq!(counts(&mut c, "eval"), (1, 0, 1));

    // redis.pcall catches it: the script does not fail, the error still counts once.
    resetstat(&mut c);
    let _: redis::Value = q(&mut c, &["EVAL", "redis.pcall('select', 99) return 1", "0"]).unwrap();
    assert_eq!(total_errors(&mut c), 1);
    assert_eq!(counts(&mut c, "select"), (1, 0, 1));
    assert_eq!(counts(&mut c, "eval"), (1, 0, 0));

    // An error the script makes itself counts under its own code.
    resetstat(&mut c);
    let e = err_text(q::<()>(
        &mut c,
        &["EVAL", "return redis.error_reply('MY_CODE custom')", "0"],
    ));
    assert_eq!(e, "MY_CODE custom");
    assert_eq!(errorstat(&mut c, "MY_CODE").as_deref(), Some("count=1"));
    assert_eq!(counts(&mut c, "eval"), (1, 0, 1));
}

#[test]
fn error_codes_are_capped() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    resetstat(&mut c);
    for i in 0..130 {
        let script = format!("return redis.error_reply('CODE{i} made up')");
        let _ = err_text(q::<()>(&mut c, &["EVAL", &script, "0"]));
    }
    let info: String = q(&mut c, &["INFO", "errorstats"]).unwrap();
    assert!(
        info.contains("errorstat_ERRORSTATS_DISABLED:count=1"),
        "{info}"
    );
    assert!(!info.contains("CODE1 "), "{info}");
    assert_eq!(total_errors(&mut c), 130);
    // RESETSTAT turns counting back on.
    resetstat(&mut c);
    let _ = err_text(q::<()>(
        &mut c,
        &["EVAL", "return redis.error_reply('NEW x')", "0"],
    ));
    assert_eq!(errorstat(&mut c, "NEW").as_deref(), Some("count=1"));
    assert!(errorstat(&mut c, "ERRORSTATS_DISABLED").is_none());
}

#[test]
fn latency_percentiles_and_histograms() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    resetstat(&mut c);
    for _ in 0..10 {
        let _: () = q(&mut c, &["SET", "a", "b"]).unwrap();
    }
    let line = info_value(&mut c, "latencystats", "latency_percentiles_usec_set").unwrap();
    let parts: Vec<(&str, f64)> = line
        .split(',')
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap();
            (k, v.parse::<f64>().unwrap())
        })
        .collect();
    assert_eq!(
        parts.iter().map(|p| p.0).collect::<Vec<_>>(),
        ["p50", "p99", "p99.9"]
    );
    assert!(parts[0].1 > 0.0 && parts[0].1 <= parts[1].1 && parts[1].1 <= parts[2].1);

    // The percentiles shown follow the setting, printed as Redis prints them.
    let _: () = q(
        &mut c,
        &[
            "CONFIG",
            "SET",
            "latency-tracking-info-percentiles",
            "0.0 50.0 100.0",
        ],
    )
    .unwrap();
    let got: Vec<String> = q(
        &mut c,
        &["CONFIG", "GET", "latency-tracking-info-percentiles"],
    )
    .unwrap();
    assert_eq!(got[1], "0 50 100");
    let line = info_value(&mut c, "latencystats", "latency_percentiles_usec_set").unwrap();
    assert!(line.starts_with("p0=") && line.contains(",p50=") && line.contains(",p100="));
    let bad = err_text(q::<()>(
        &mut c,
        &[
            "CONFIG",
            "SET",
            "latency-tracking-info-percentiles",
            "10 101",
        ],
    ));
    assert!(bad.starts_with("ERR CONFIG SET failed"), "{bad}");

    // LATENCY HISTOGRAM: calls and cumulative buckets; a container stands for its
    // subcommands; unknown names are skipped.
    let _: i64 = q(&mut c, &["CLIENT", "ID"]).unwrap();
    let h: HashMap<String, redis::Value> =
        q(&mut c, &["LATENCY", "HISTOGRAM", "set", "nosuch"]).unwrap();
    assert_eq!(h.len(), 1);
    let set: HashMap<String, redis::Value> = redis::from_redis_value(h["set"].clone()).unwrap();
    assert_eq!(set["calls"], redis::Value::Int(10));
    let buckets: HashMap<i64, i64> =
        redis::from_redis_value(set["histogram_usec"].clone()).unwrap();
    assert_eq!(buckets.values().max(), Some(&10));
    let h: HashMap<String, redis::Value> = q(&mut c, &["LATENCY", "HISTOGRAM", "client"]).unwrap();
    assert!(h.contains_key("client|id"), "{h:?}");

    // Tracking off: nothing is shown; RESETSTAT empties the histograms.
    let _: () = q(&mut c, &["CONFIG", "SET", "latency-tracking", "no"]).unwrap();
    let info: String = q(&mut c, &["INFO", "latencystats"]).unwrap();
    assert!(!info.contains("latency_percentiles_usec_"), "{info}");
    let _: () = q(&mut c, &["CONFIG", "SET", "latency-tracking", "yes"]).unwrap();
    resetstat(&mut c);
    let h: HashMap<String, redis::Value> = q(&mut c, &["LATENCY", "HISTOGRAM"]).unwrap();
    assert_eq!(h.keys().collect::<Vec<_>>(), ["config|resetstat"]);
    assert!(info_value(&mut c, "latencystats", "latency_percentiles_usec_set").is_none());
}

#[test]
fn blocked_commands_are_counted_when_answered() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    resetstat(&mut c);
    let mut blocked = s.raw();
    blocked.send(&resp(&["CLIENT", "ID"]));
    let id = String::from_utf8(blocked.read_until(b"\r\n")).unwrap();
    let id = id.trim().trim_start_matches(':').to_string();
    blocked.send(&resp(&["BLPOP", "list", "0"]));
    assert!(support::eventually(5.0, || {
        info_value(&mut c, "clients", "blocked_clients").as_deref() == Some("1")
    }));
    let _: i64 = q(&mut c, &["CLIENT", "UNBLOCK", &id, "ERROR"]).unwrap();
    let reply = String::from_utf8(blocked.read_until(b"\r\n")).unwrap();
    assert!(reply.starts_with("-UNBLOCKED"), "{reply}");
    assert_eq!(counts(&mut c, "blpop"), (1, 0, 1));
    assert_eq!(errorstat(&mut c, "UNBLOCKED").as_deref(), Some("count=1"));
    assert!(info_value(&mut c, "latencystats", "latency_percentiles_usec_blpop").is_some());
}

#[test]
fn latency_monitor_records_slow_events() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    let _: () = q(&mut c, &["CONFIG", "SET", "latency-monitor-threshold", "1"]).unwrap();
    let _: redis::Value = q(
        &mut c,
        &[
            "EVAL",
            "local i = 0 while i < 3000000 do i = i + 1 end",
            "0",
        ],
    )
    .unwrap();
    let latest: Vec<redis::Value> = q(&mut c, &["LATENCY", "LATEST"]).unwrap();
    let names: Vec<String> = latest
        .iter()
        .map(|e| {
            let e: Vec<redis::Value> = redis::from_redis_value(e.clone()).unwrap();
            redis::from_redis_value(e[0].clone()).unwrap()
        })
        .collect();
    assert!(names.contains(&"command".to_string()), "{names:?}");
    let history: Vec<Vec<i64>> = q(&mut c, &["LATENCY", "HISTORY", "command"]).unwrap();
    assert!(!history.is_empty() && history[0][1] >= 1);
    let doctor: String = q(&mut c, &["LATENCY", "DOCTOR"]).unwrap();
    assert!(doctor.contains("command"));
    assert!(
        err_text(q::<()>(&mut c, &["LATENCY", "GRAPH", "nosuch"])).starts_with("ERR No samples")
    );
    assert!(int_reply(&mut c, &["LATENCY", "RESET"]) >= 1);
    let latest: Vec<redis::Value> = q(&mut c, &["LATENCY", "LATEST"]).unwrap();
    assert!(latest.is_empty());
}

fn int_reply(c: &mut redis::Connection, args: &[&str]) -> i64 {
    q(c, args).unwrap()
}

/// The fields of this connection's CLIENT INFO line.
fn client_fields(line: &str) -> HashMap<String, String> {
    line.split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn client_list_reports_buffers() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    // Our own request is in the query buffer while it runs, as in Redis.
    let mut raw = s.raw();
    raw.send(&resp(&["CLIENT", "INFO"]));
    let out = String::from_utf8(raw.read_until(b"\n\r\n")).unwrap();
    let f = client_fields(&out);
    assert_eq!(f["qbuf"], "26");
    assert!(f["qbuf-free"].parse::<u64>().unwrap() > 0);
    assert_eq!(f["argv-mem"], "10");
    assert_eq!(f["multi-mem"], "0");
    assert_eq!(f["obl"], "0");
    assert_eq!(f["oll"], "0");
    assert_eq!(f["omem"], "0");
    let tot: u64 = f["tot-mem"].parse().unwrap();
    assert!(tot > 26);

    // Queued commands count as multi-mem; a partial request as another client's qbuf.
    raw.send(&resp(&["MULTI"]));
    raw.send(&resp(&["SET", "a", "bbbb"]));
    let _ = raw.read_until(b"+QUEUED\r\n");
    let mut partial = s.raw();
    partial.send(b"*3\r\n$3\r\nSET\r\n$1\r\na\r\n$100\r\nxx");
    std::thread::sleep(Duration::from_millis(200));
    let list: String = q(&mut c, &["CLIENT", "LIST"]).unwrap();
    let lines: Vec<HashMap<String, String>> = list.lines().map(client_fields).collect();
    let multi = lines
        .iter()
        .find(|l| l["multi"] == "1")
        .expect("client in MULTI");
    assert_eq!(multi["multi-mem"], (3 + 1 + 4 + 3 * 8).to_string());
    let waiting = lines
        .iter()
        .find(|l| l["qbuf"] == "28")
        .unwrap_or_else(|| panic!("client with a partial request: {list}"));
    assert_eq!(waiting["argv-mem"], "0");
}

#[test]
fn info_sections_default_and_all() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    let _: () = q(&mut c, &["SET", "a", "b"]).unwrap();
    let default: String = q(&mut c, &["INFO"]).unwrap();
    assert!(default.contains("# Errorstats") && !default.contains("rejected_calls"));
    let all: String = q(&mut c, &["INFO", "all"]).unwrap();
    for s in [
        "# Commandstats",
        "# Errorstats",
        "# Latencystats",
        "master_repl_offset:",
    ] {
        assert!(all.contains(s), "{s}");
    }
    let one: String = q(&mut c, &["INFO", "commandSTATS"]).unwrap();
    assert!(one.contains("cmdstat_set:calls=1,") && !one.contains("used_memory"));
}
