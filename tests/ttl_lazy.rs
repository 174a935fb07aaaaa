//! A TTL index's ordered part is built in a shard only when a query would be served by it:
//! until then it costs nothing per document, and once built it must agree, document for
//! document, with a collection scan — through inserts, touches (in place and general),
//! updates, deletes and expiry, before and after the build.

mod support;

use redis::Connection;
use support::{int, q, TestServer};

const HOUR: i64 = 3_600_000;

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

fn date(ms: i64) -> String {
    format!(r#"{{"$date":{{"$numberLong":"{ms}"}}}}"#)
}

fn explain(c: &mut Connection, filter: &str) -> String {
    q(c, &["DOC.EXPLAIN", "s", filter]).expect("explain")
}

fn index_size(c: &mut Connection) -> i64 {
    let stats: String = q(c, &["DOC.STATS", "s"]).expect("stats");
    let at = stats.find(r#""at_1":"#).expect("at_1 in stats") + 7;
    stats[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .expect("size")
}

/// The count through the index and through a collection scan (an `$or` with a branch no
/// index serves) of the same range.
fn counts(c: &mut Connection, range: &str) -> (i64, i64) {
    let by_index = format!(r#"{{"at":{range}}}"#);
    let by_scan = format!(r#"{{"$or":[{{"at":{range}}},{{"nope":"never"}}]}}"#);
    assert!(explain(c, &by_scan).contains("COLLSCAN"));
    (
        int(c, &["DOC.COUNT", "s", &by_index]),
        int(c, &["DOC.COUNT", "s", &by_scan]),
    )
}

fn writes(c: &mut Connection, base: i64, from: i64) {
    let docs: Vec<String> = (from..from + 60)
        .map(|i| match i % 6 {
            // No date: no wheel entry, indexed as its value (or null) once built.
            4 => format!(r#"{{"_id":{i},"at":"text {i}"}}"#),
            5 => format!(r#"{{"_id":{i}}}"#),
            _ => format!(r#"{{"_id":{i},"at":{}}}"#, date(base - (i % 7) * 60_000)),
        })
        .collect();
    let mut args = vec!["DOC.INSERT", "s"];
    args.extend(docs.iter().map(String::as_str));
    let _: Vec<String> = q(c, &args).expect("insert");
    // In-place touches, a general update of the date, a date removed, deletes.
    let evens = format!(
        r#"{{"_id":{{"$in":[{},{},{}]}}}}"#,
        from,
        from + 2,
        from + 6
    );
    assert_eq!(int(c, &["DOC.TOUCH", "s", &evens]), 3);
    let set = format!(
        r#"{{"$set":{{"at":{},"x":"grown by a general update"}}}}"#,
        date(base - 30 * 60_000)
    );
    let _: redis::Value = q(
        c,
        &[
            "DOC.UPDATE",
            "s",
            &format!(r#"{{"_id":{}}}"#, from + 1),
            &set,
        ],
    )
    .expect("update");
    let _: redis::Value = q(
        c,
        &[
            "DOC.UPDATE",
            "s",
            &format!(r#"{{"_id":{}}}"#, from + 3),
            r#"{"$unset":{"at":""}}"#,
        ],
    )
    .expect("unset");
    let gone = format!(r#"{{"_id":{{"$in":[{},{}]}}}}"#, from + 7, from + 8);
    let _: redis::Value = q(c, &["DOC.DELETE", "s", &gone]).expect("delete");
}

#[test]
fn the_ordered_part_is_built_on_first_use_and_agrees_with_a_scan() {
    let s = TestServer::start(&["--ttl-monitor-period", "1"]);
    let mut c = s.conn();
    let base = now_ms();
    let _: String = q(&mut c, &["DOC.EXPIREINDEX", "s", "at", "3600"]).expect("index");
    writes(&mut c, base, 0);
    // Nothing needed it yet: the ordered part holds nothing (the size is the wheel's).
    let dormant = index_size(&mut c);
    let ranges = [
        format!(r#"{{"$gt":{}}}"#, date(base - 3 * 60_000)),
        format!(r#"{{"$lte":{}}}"#, date(base - 3 * 60_000)),
        r#"{"$type":"string"}"#.to_string(),
        "null".to_string(),
    ];
    let first = format!(r#"{{"at":{}}}"#, ranges[0]);
    assert!(explain(&mut c, &first).contains("IXSCAN"));
    assert!(index_size(&mut c) > dormant);
    for r in &ranges {
        let (a, b) = counts(&mut c, r);
        assert_eq!(a, b, "{r}");
    }
    // Built: writes maintain it from now on.
    writes(&mut c, base, 1000);
    for r in &ranges {
        let (a, b) = counts(&mut c, r);
        assert_eq!(a, b, "{r}");
    }
    // Sorted by the indexed field, with a limit: the index gives the order.
    let sorted: Vec<String> = q(
        &mut c,
        &["DOC.FIND", "s", "{}", "SORT", r#"{"at":1}"#, "LIMIT", "3"],
    )
    .expect("find");
    assert_eq!(sorted.len(), 3);
    // Expiry (the wheel) removes documents from the built part too.
    let _: String = q(&mut c, &["DOC.EXPIREINDEX", "s", "at", "0"]).expect("collMod");
    let old = format!(r#"{{"_id":"old","at":{}}}"#, date(base - HOUR));
    let _: Vec<String> = q(&mut c, &["DOC.INSERT", "s", &old]).expect("insert");
    assert!(support::eventually(10.0, || {
        let _: () = q(&mut c, &["CONFIG", "SET", "ttl-strict-reads", "no"]).expect("config");
        let (a, b) = counts(&mut c, r#"{"$type":"date"}"#);
        let _: () = q(&mut c, &["CONFIG", "SET", "ttl-strict-reads", "yes"]).expect("config");
        a == 0 && b == 0
    }));
    let (a, b) = counts(&mut c, r#"{"$type":"string"}"#);
    // Ten per batch, less the two of the second batch its touches turned into dates.
    assert_eq!((a, b), (18, 18));
}
