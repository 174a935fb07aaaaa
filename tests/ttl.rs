//! TTL indexes through the `redis` crate against the real binary: MongoDB's TTL jstests'
//! behaviours (hourly documents, non-date values, arrays, `expireAfterSeconds: 0`, collMod in
//! both directions), strict reads, the monitor's period changed live, and the seeds' use cases
//! (sessions, tokens, invites, per-message deadlines). Dates are crafted relative to now and
//! the monitor runs every second, so nothing waits long.

mod support;

use redis::Connection;
use support::{err_text, eventually, int, q, strs, TestServer};

const HOUR: i64 = 3_600_000;

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Extended JSON for a date `ms` milliseconds since the epoch.
fn date(ms: i64) -> String {
    format!(r#"{{"$date":{{"$numberLong":"{ms}"}}}}"#)
}

fn count(c: &mut Connection, coll: &str, filter: &str) -> i64 {
    int(c, &["DOC.COUNT", coll, filter])
}

fn insert(c: &mut Connection, coll: &str, docs: &[String]) {
    let mut args = vec!["DOC.INSERT", coll];
    args.extend(docs.iter().map(String::as_str));
    let ids = strs(c, &args);
    assert_eq!(ids.len(), docs.len());
}

/// Turns strict reads off so a count shows what is physically stored (the monitor's work).
fn stored(c: &mut Connection, coll: &str, filter: &str) -> i64 {
    let _: () = q(c, &["CONFIG", "SET", "ttl-strict-reads", "no"]).expect("config set");
    let n = count(c, coll, filter);
    let _: () = q(c, &["CONFIG", "SET", "ttl-strict-reads", "yes"]).expect("config set");
    n
}

#[test]
fn hourly_documents_with_one_then_two_ttl_indexes() {
    let s = TestServer::start(&["--ttl-monitor-period", "1"]);
    let mut c = s.conn();
    let now = now_ms();
    let mut docs: Vec<String> = (0..24)
        .map(|i| format!(r#"{{"_id":{i},"x":{}}}"#, date(now - i * HOUR)))
        .collect();
    // Values that never expire, and an array whose earliest date counts.
    docs.extend([
        r#"{"_id":"str","x":"2012-08-02T17:47:15Z"}"#.to_string(),
        r#"{"_id":"num","x":1344000000000}"#.to_string(),
        r#"{"_id":"null","x":null}"#.to_string(),
        r#"{"_id":"missing"}"#.to_string(),
        r#"{"_id":"ts","x":{"$timestamp":{"t":1,"i":1}}}"#.to_string(),
        format!(
            r#"{{"_id":"arr","x":[{},{}]}}"#,
            date(now + 30 * HOUR),
            date(now - 30 * HOUR)
        ),
        format!(
            r#"{{"_id":"arrfuture","x":[{},"x"]}}"#,
            date(now + 30 * HOUR)
        ),
    ]);
    insert(&mut c, "ttl", &docs);
    assert_eq!(count(&mut c, "ttl", "{}"), 31);

    let name: String = q(&mut c, &["DOC.EXPIREINDEX", "ttl", "x", "20000"]).expect("index");
    assert_eq!(name, "x_1");
    // Hours 6..23 and "arr" are due under 20000 s; strict reads hide them at once.
    assert_eq!(count(&mut c, "ttl", "{}"), 31 - 18 - 1);
    assert!(
        eventually(5.0, || stored(&mut c, "ttl", "{}") == 12),
        "the monitor removes what is due"
    );
    assert_eq!(
        strs(
            &mut c,
            &[
                "DOC.FIND",
                "ttl",
                r#"{"_id":{"$type":"string"}}"#,
                "PROJECTION",
                r#"{"_id":1}"#,
                "SORT",
                r#"{"_id":1}"#
            ]
        ),
        vec![
            r#"{"_id":"arrfuture"}"#,
            r#"{"_id":"missing"}"#,
            r#"{"_id":"null"}"#,
            r#"{"_id":"num"}"#,
            r#"{"_id":"str"}"#,
            r#"{"_id":"ts"}"#
        ]
    );

    // A second TTL index: a document goes when either says so.
    let docs: Vec<String> = (0..24)
        .map(|i| {
            format!(
                r#"{{"_id":{},"y":{},"x":{}}}"#,
                100 + i,
                date(now - i * HOUR),
                date(now)
            )
        })
        .collect();
    insert(&mut c, "ttl", &docs);
    let name: String = q(&mut c, &["DOC.EXPIREINDEX", "ttl", "y", "36000"]).expect("index");
    assert_eq!(name, "y_1");
    // y hours 10..23 are due: 14 of the 24 go.
    assert_eq!(count(&mut c, "ttl", r#"{"_id":{"$gte":100}}"#), 10);
    assert!(eventually(5.0, || stored(&mut c, "ttl", "{}") == 12 + 10));
}

#[test]
fn expire_after_zero_uses_each_documents_own_deadline() {
    // OpenStack Marconi's trick: the date stored is the deadline.
    let s = TestServer::start(&["--ttl-monitor-period", "1"]);
    let mut c = s.conn();
    let _: String = q(&mut c, &["DOC.EXPIREINDEX", "messages", "expires", "0"]).expect("index");
    let now = now_ms();
    insert(
        &mut c,
        "messages",
        &[
            format!(r#"{{"_id":"soon","expires":{}}}"#, date(now + 1200)),
            format!(r#"{{"_id":"later","expires":{}}}"#, date(now + 600_000)),
            format!(r#"{{"_id":"past","expires":{}}}"#, date(now - 1)),
            format!(r#"{{"_id":"1960","expires":{}}}"#, date(-315_619_200_000)),
            format!(
                r#"{{"_id":"9999","expires":{}}}"#,
                date(253_402_300_799_000)
            ),
        ],
    );
    assert_eq!(
        count(&mut c, "messages", "{}"),
        3,
        "past deadlines are gone at once"
    );
    assert!(eventually(5.0, || count(&mut c, "messages", "{}") == 2));
    assert!(eventually(5.0, || stored(&mut c, "messages", "{}") == 2));
    assert_eq!(
        strs(
            &mut c,
            &[
                "DOC.FIND",
                "messages",
                "{}",
                "PROJECTION",
                r#"{"_id":1}"#,
                "SORT",
                r#"{"_id":1}"#
            ]
        ),
        vec![r#"{"_id":"9999"}"#, r#"{"_id":"later"}"#]
    );
}

#[test]
fn changing_expire_after_seconds_takes_effect_at_once_both_ways() {
    let s = TestServer::start(&["--ttl-monitor-period", "3600"]);
    let mut c = s.conn();
    let now = now_ms();
    insert(
        &mut c,
        "s",
        &[
            format!(r#"{{"_id":1,"t":{}}}"#, date(now - 100_000)),
            format!(r#"{{"_id":2,"t":{}}}"#, date(now - 1_000_000)),
        ],
    );
    let _: String = q(&mut c, &["DOC.EXPIREINDEX", "s", "t", "5000"]).expect("index");
    assert_eq!(count(&mut c, "s", "{}"), 2);
    let _: String = q(&mut c, &["DOC.EXPIREINDEX", "s", "t", "500"]).expect("collMod");
    assert_eq!(
        count(&mut c, "s", "{}"),
        1,
        "lowering makes the old one due at once"
    );
    // Not swept yet (the monitor sleeps an hour): raising the value brings it back.
    let _: String = q(&mut c, &["DOC.EXPIREINDEX", "s", "t", "5000"]).expect("collMod");
    assert_eq!(count(&mut c, "s", "{}"), 2);
    // Once swept, a deleted document stays deleted whatever the value becomes.
    let _: String = q(&mut c, &["DOC.EXPIREINDEX", "s", "t", "500"]).expect("collMod");
    let _: () = q(&mut c, &["CONFIG", "SET", "ttl-monitor-period", "1"]).expect("period");
    assert!(eventually(5.0, || stored(&mut c, "s", "{}") == 1));
    let _: String = q(&mut c, &["DOC.EXPIREINDEX", "s", "t", "2147483647"]).expect("collMod");
    assert_eq!(count(&mut c, "s", "{}"), 1);
}

#[test]
fn strict_reads_hide_expired_documents_from_every_command() {
    let s = TestServer::start(&["--ttl-monitor-period", "3600"]);
    let mut c = s.conn();
    let _: String = q(&mut c, &["DOC.EXPIREINDEX", "authLog", "accessTime", "5"]).expect("index");
    let now = now_ms();
    insert(
        &mut c,
        "authLog",
        &[
            format!(
                r#"{{"_id":1,"userID":1,"accessTime":{}}}"#,
                date(now - 10_000)
            ),
            format!(r#"{{"_id":2,"userID":2,"accessTime":{}}}"#, date(now)),
        ],
    );
    let f = r#"{"userID":1}"#;
    assert!(strs(&mut c, &["DOC.FIND", "authLog", f]).is_empty());
    assert_eq!(
        q::<Option<String>>(&mut c, &["DOC.FINDONE", "authLog", f]).expect("findone"),
        None
    );
    assert_eq!(count(&mut c, "authLog", f), 0);
    assert_eq!(count(&mut c, "authLog", "{}"), 1);
    let upd: Vec<redis::Value> =
        q(&mut c, &["DOC.UPDATE", "authLog", f, r#"{"$set":{"a":1}}"#]).expect("update");
    assert_eq!(upd[0], redis::Value::Int(0));
    assert_eq!(int(&mut c, &["DOC.TOUCH", "authLog", f]), 0);
    assert_eq!(int(&mut c, &["DOC.DELETE", "authLog", f]), 0);
    // The _id of an expired document is free again.
    insert(
        &mut c,
        "authLog",
        &[format!(
            r#"{{"_id":1,"userID":1,"accessTime":{}}}"#,
            date(now)
        )],
    );
    assert_eq!(count(&mut c, "authLog", f), 1);

    // With strict reads off, MongoDB's behaviour: it lingers until the monitor's pass.
    insert(
        &mut c,
        "authLog",
        &[format!(
            r#"{{"_id":3,"userID":3,"accessTime":{}}}"#,
            date(now - 10_000)
        )],
    );
    assert_eq!(count(&mut c, "authLog", r#"{"userID":3}"#), 0);
    let _: () = q(&mut c, &["CONFIG", "SET", "ttl-strict-reads", "no"]).expect("config");
    assert_eq!(count(&mut c, "authLog", r#"{"userID":3}"#), 1);
}

#[test]
fn monitor_period_changes_live() {
    let s = TestServer::start(&["--ttl-monitor-period", "3600", "--ttl-strict-reads", "no"]);
    let mut c = s.conn();
    let _: String = q(&mut c, &["DOC.EXPIREINDEX", "e", "at", "0"]).expect("index");
    insert(
        &mut c,
        "e",
        &[format!(r#"{{"_id":1,"at":{}}}"#, date(now_ms() - 5_000))],
    );
    std::thread::sleep(std::time::Duration::from_millis(1200));
    assert_eq!(
        count(&mut c, "e", "{}"),
        1,
        "the hourly monitor has not run"
    );
    let _: () = q(&mut c, &["CONFIG", "SET", "ttl-monitor-period", "1"]).expect("config");
    assert!(eventually(4.0, || count(&mut c, "e", "{}") == 0));
}

#[test]
fn sessions_stay_while_touched_and_go_when_idle() {
    // authLog with a 300 s TTL: two sessions idle for 299 s, one of them touched.
    let s = TestServer::start(&["--ttl-monitor-period", "1"]);
    let mut c = s.conn();
    let _: String = q(&mut c, &["DOC.EXPIREINDEX", "authLog", "accessTime", "300"]).expect("index");
    let idle = now_ms() - 299_000;
    insert(
        &mut c,
        "authLog",
        &[
            format!(r#"{{"userID":101,"accessTime":{}}}"#, date(idle)),
            format!(r#"{{"userID":102,"accessTime":{}}}"#, date(idle)),
            format!(r#"{{"userID":103,"accessTime":{}}}"#, date(idle)),
        ],
    );
    // Each request touches its session: DOC.TOUCH, or FINDONE … TOUCH in one round trip.
    assert_eq!(
        int(&mut c, &["DOC.TOUCH", "authLog", r#"{"userID":101}"#]),
        1
    );
    let found: String = q(
        &mut c,
        &["DOC.FINDONE", "authLog", r#"{"userID":102}"#, "TOUCH"],
    )
    .expect("found");
    let touched: serde_json::Value = serde_json::from_str(&found).expect("json");
    let at = touched["accessTime"]["$date"]
        .as_str()
        .expect("relaxed date");
    assert!(!at.is_empty());
    assert!(
        eventually(5.0, || stored(&mut c, "authLog", "{}") == 2),
        "the idle session is removed"
    );
    assert_eq!(
        count(&mut c, "authLog", r#"{"userID":103}"#),
        0,
        "re-authenticate"
    );
    assert_eq!(
        count(&mut c, "authLog", r#"{"userID":{"$in":[101,102]}}"#),
        2
    );
}

#[test]
fn tokens_expire_after_thirty_minutes() {
    let s = TestServer::start(&["--ttl-monitor-period", "1"]);
    let mut c = s.conn();
    let _: String = q(
        &mut c,
        &["DOC.EXPIREINDEX", "tokenLog", "accessTime", "1800"],
    )
    .expect("index");
    let now = now_ms();
    insert(
        &mut c,
        "tokenLog",
        &[
            format!(r#"{{"token":"a","accessTime":{}}}"#, date(now - 1_799_000)),
            format!(r#"{{"token":"b","accessTime":{}}}"#, date(now - 1_801_000)),
            r#"{"token":"c","accessTime":"$$NOW"}"#.to_string(),
        ],
    );
    assert_eq!(count(&mut c, "tokenLog", r#"{"token":"b"}"#), 0);
    assert_eq!(count(&mut c, "tokenLog", r#"{"token":"a"}"#), 1);
    assert!(eventually(4.0, || count(
        &mut c,
        "tokenLog",
        r#"{"token":"a"}"#
    ) == 0));
    assert!(eventually(4.0, || stored(&mut c, "tokenLog", "{}") == 1));
}

#[test]
fn invites_expire_unless_activated() {
    let s = TestServer::start(&["--ttl-monitor-period", "1"]);
    let mut c = s.conn();
    let _: String = q(
        &mut c,
        &["DOC.EXPIREINDEX", "user_invites", "createdAt", "2"],
    )
    .expect("index");
    insert(
        &mut c,
        "user_invites",
        &[
            r#"{"_id":"alice@example.com","token":"t1","createdAt":"$$NOW"}"#.to_string(),
            r#"{"_id":"bob@example.com","token":"t2","createdAt":"$$NOW"}"#.to_string(),
        ],
    );
    // Alice clicks her link: the invite moves to users.
    let invite: String = q(
        &mut c,
        &["DOC.FINDONE", "user_invites", r#"{"token":"t1"}"#],
    )
    .expect("invite");
    let mut doc: serde_json::Value = serde_json::from_str(&invite).expect("json");
    doc.as_object_mut().expect("object").remove("createdAt");
    assert_eq!(
        int(&mut c, &["DOC.DELETE", "user_invites", r#"{"token":"t1"}"#]),
        1
    );
    insert(&mut c, "users", &[doc.to_string()]);
    assert!(
        eventually(6.0, || stored(&mut c, "user_invites", "{}") == 0),
        "bob's invite expires"
    );
    assert_eq!(count(&mut c, "users", r#"{"_id":"alice@example.com"}"#), 1);
}

#[test]
fn expireindex_validation() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    for bad in ["-1", "NaN", "abc", "1.5", "2147483648", "", "1e3"] {
        let e = err_text(q::<String>(&mut c, &["DOC.EXPIREINDEX", "v", "t", bad]));
        assert!(e.starts_with("ERR expireAfterSeconds"), "{bad}: {e}");
    }
    let e = err_text(q::<String>(&mut c, &["DOC.EXPIREINDEX", "v", "_id", "10"]));
    assert!(e.contains("_id"), "{e}");
    let e = err_text(q::<String>(&mut c, &["DOC.EXPIREINDEX", "v", "t"]));
    assert_eq!(
        e,
        "ERR wrong number of arguments for 'doc.expireindex' command"
    );
    let ok: String = q(&mut c, &["DOC.EXPIREINDEX", "v", "meta.t", "2147483647"]).expect("max");
    assert_eq!(ok, "meta.t_1");
    // Nothing was created by the refused calls but the collection itself.
    let e = err_text(q::<i64>(&mut c, &["DOC.TOUCH", "v", "{}", "FIELD"]));
    assert_eq!(e, "ERR syntax error");
}

#[test]
fn touch_sets_every_ttl_field_or_just_field() {
    let s = TestServer::start(&["--ttl-monitor-period", "3600"]);
    let mut c = s.conn();
    let _: String = q(&mut c, &["DOC.EXPIREINDEX", "p", "a", "60"]).expect("index");
    let _: String = q(&mut c, &["DOC.EXPIREINDEX", "p", "b", "60"]).expect("index");
    insert(
        &mut c,
        "p",
        &[
            r#"{"_id":1,"a":1,"b":2,"c":3}"#.to_string(),
            r#"{"_id":2}"#.to_string(),
        ],
    );
    assert_eq!(int(&mut c, &["DOC.TOUCH", "p", r#"{"_id":1}"#]), 1);
    let d: String = q(&mut c, &["DOC.FINDONE", "p", r#"{"_id":1}"#]).expect("doc");
    let v: serde_json::Value = serde_json::from_str(&d).expect("json");
    assert!(
        v["a"]["$date"].is_string() && v["b"]["$date"].is_string(),
        "{d}"
    );
    assert_eq!(v["c"], 3);
    assert_eq!(
        int(&mut c, &["DOC.TOUCH", "p", "{}", "FIELD", "seen.last"]),
        2
    );
    let d: String = q(&mut c, &["DOC.FINDONE", "p", r#"{"_id":2}"#]).expect("doc");
    let v: serde_json::Value = serde_json::from_str(&d).expect("json");
    assert!(v["seen"]["last"]["$date"].is_string(), "{d}");
    assert_eq!(int(&mut c, &["DOC.TOUCH", "nothing", "{}"]), 0);
}

#[test]
fn monitor_removals_are_announced_as_doc_expired() {
    let s = TestServer::start(&[
        "--ttl-monitor-period",
        "1",
        "--notify-keyspace-events",
        "KEx",
    ]);
    let mut c = s.conn();
    let mut sub = s.conn();
    let mut ps = sub.as_pubsub();
    ps.subscribe("__keyevent@0__:doc.expired")
        .expect("subscribe");
    ps.subscribe("__keyspace@0__:sessions").expect("subscribe");
    ps.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .expect("timeout");
    let _: String = q(&mut c, &["DOC.EXPIREINDEX", "sessions", "at", "0"]).expect("index");
    insert(
        &mut c,
        "sessions",
        &[
            format!(
                r#"{{"_id":{{"$oid":"507f1f77bcf86cd799439011"}},"at":{}}}"#,
                date(now_ms() - 1)
            ),
            format!(r#"{{"_id":"later","at":{}}}"#, date(now_ms() + 600_000)),
        ],
    );
    expect_doc_expired(
        &mut ps,
        "sessions",
        r#"{"$oid":"507f1f77bcf86cd799439011"}"#,
    );
}

/// The two `doc.expired` events of one expiry: the keyevent channel carries the collection,
/// the keyspace channel the document's `_id`.
fn expect_doc_expired(ps: &mut redis::PubSub<'_>, coll: &str, id: &str) {
    let mut got = Vec::new();
    for _ in 0..2 {
        let m = ps.get_message().expect("doc.expired in time");
        let payload: String = m.get_payload().expect("payload");
        got.push((m.get_channel_name().to_string(), payload));
    }
    got.sort();
    assert_eq!(
        got,
        vec![
            ("__keyevent@0__:doc.expired".to_string(), coll.to_string()),
            (format!("__keyspace@0__:{coll}"), id.to_string()),
        ]
    );
}

#[test]
fn createindex_expireafter_and_dropping_the_index_stops_expiry() {
    let s = TestServer::start(&["--ttl-monitor-period", "1"]);
    let mut c = s.conn();
    let name: String = q(
        &mut c,
        &[
            "DOC.CREATEINDEX",
            "ev",
            r#"{"at":1}"#,
            "EXPIREAFTER",
            "3600",
        ],
    )
    .expect("ttl index");
    assert_eq!(name, "at_1");
    let specs = strs(&mut c, &["DOC.INDEXES", "ev"]);
    assert!(
        specs
            .iter()
            .any(|s| s.contains(r#""expireAfterSeconds":3600"#)),
        "{specs:?}"
    );
    for (args, want) in [
        (vec![r#"{"a":1,"b":1}"#, "EXPIREAFTER", "10"], "compound"),
        (vec![r#"{"_id":1}"#, "EXPIREAFTER", "10"], "_id"),
        (
            vec![r#"{"a":1}"#, "EXPIREAFTER", "-5"],
            "expireAfterSeconds",
        ),
    ] {
        let mut all = vec!["DOC.CREATEINDEX", "ev"];
        all.extend(args);
        let e = err_text(q::<String>(&mut c, &all));
        assert!(e.contains(want), "{e}");
    }
    let now = now_ms();
    insert(
        &mut c,
        "ev",
        &[
            format!(r#"{{"_id":1,"at":{}}}"#, date(now - 2 * HOUR)),
            format!(r#"{{"_id":2,"at":{}}}"#, date(now)),
        ],
    );
    // The TTL index serves queries on its field too.
    let plan: String = q(
        &mut c,
        &[
            "DOC.EXPLAIN",
            "ev",
            &format!(r#"{{"at":{{"$lt":{}}}}}"#, date(now)),
        ],
    )
    .expect("explain");
    assert!(plan.contains("IXSCAN"), "{plan}");
    assert!(eventually(5.0, || stored(&mut c, "ev", "{}") == 1));
    // Dropped: expiry through it stops, strict reads stop hiding.
    let _: () = q(&mut c, &["DOC.DROPINDEX", "ev", "at_1"]).expect("drop");
    insert(
        &mut c,
        "ev",
        &[format!(r#"{{"_id":3,"at":{}}}"#, date(now - 2 * HOUR))],
    );
    std::thread::sleep(std::time::Duration::from_millis(2200));
    assert_eq!(count(&mut c, "ev", "{}"), 2);
}

#[test]
fn far_dates_round_trip_and_never_expire_early() {
    let s = TestServer::start(&["--ttl-monitor-period", "1"]);
    let mut c = s.conn();
    let _: String = q(&mut c, &["DOC.EXPIREINDEX", "far", "at", "0"]).expect("index");
    insert(
        &mut c,
        "far",
        &[
            r#"{"_id":1,"at":{"$date":"9999-12-31T23:59:59.999Z"}}"#.to_string(),
            r#"{"_id":2,"at":{"$date":{"$numberLong":"253402300800000"}}}"#.to_string(),
            r#"{"_id":3,"at":{"$date":{"$numberLong":"9223372036854775807"}}}"#.to_string(),
        ],
    );
    std::thread::sleep(std::time::Duration::from_millis(1500));
    assert_eq!(
        strs(&mut c, &["DOC.FIND", "far", "{}", "SORT", r#"{"_id":1}"#]),
        vec![
            r#"{"_id":1,"at":{"$date":"9999-12-31T23:59:59.999Z"}}"#,
            r#"{"_id":2,"at":{"$date":{"$numberLong":"253402300800000"}}}"#,
            r#"{"_id":3,"at":{"$date":{"$numberLong":"9223372036854775807"}}}"#,
        ]
    );
}

/// A touch rewrites a date in place when it can; every index on the field (the TTL index
/// itself, a descending one, a compound one that forces the general path) must then find
/// the document under its new date and no longer under its old one, and the wheel must
/// expire it by the new date.
#[test]
fn touched_dates_move_in_every_index_and_the_wheel() {
    let s = TestServer::start(&["--ttl-monitor-period", "1"]);
    let mut c = s.conn();
    let old = now_ms() - HOUR / 2;
    let _: String = q(&mut c, &["DOC.EXPIREINDEX", "s", "at", "3600"]).expect("index");
    let _: String = q(&mut c, &["DOC.CREATEINDEX", "s", r#"{"at":-1}"#]).expect("index");
    let _: String = q(&mut c, &["DOC.EXPIREINDEX", "t", "at", "3600"]).expect("index");
    let _: String = q(&mut c, &["DOC.CREATEINDEX", "t", r#"{"u":1,"at":1}"#]).expect("index");
    for coll in ["s", "t"] {
        let docs: Vec<String> = (0..20)
            .map(|i| {
                format!(
                    r#"{{"_id":{i},"u":{i},"at":{},"x":"{}"}}"#,
                    date(old),
                    "y".repeat(i)
                )
            })
            .collect();
        insert(&mut c, coll, &docs);
        let evens = r#"{"_id":{"$in":[0,2,4,6,8,10,12,14,16,18]}}"#;
        assert_eq!(int(&mut c, &["DOC.TOUCH", coll, evens]), 10, "{coll}");
        let recent = format!(r#"{{"at":{{"$gt":{}}}}}"#, date(now_ms() - 60_000));
        let stale = format!(r#"{{"at":{{"$lte":{}}}}}"#, date(old));
        assert_eq!(count(&mut c, coll, &recent), 10, "{coll}");
        assert_eq!(count(&mut c, coll, &stale), 10, "{coll}");
        let u4 = format!(r#"{{"u":4,"at":{{"$gt":{}}}}}"#, date(old));
        assert_eq!(count(&mut c, coll, &u4), 1, "{coll}");
        let u5 = format!(r#"{{"u":5,"at":{{"$gt":{}}}}}"#, date(old));
        assert_eq!(count(&mut c, coll, &u5), 0, "{coll}");
        // The documents kept their other fields and their order.
        let d: String = q(&mut c, &["DOC.FINDONE", coll, r#"{"_id":4}"#]).expect("doc");
        assert!(
            d.starts_with(r#"{"_id":4,"u":4,"at":{"$date":"#) && d.ends_with(r#""x":"yyyy"}"#),
            "{d}"
        );
        let e: String = q(&mut c, &["DOC.EXPLAIN", coll, &recent]).expect("explain");
        assert!(e.contains("IXSCAN"), "{e}");
        // Ten minutes of idleness allowed: the monitor removes the untouched half only.
        let _: String = q(&mut c, &["DOC.EXPIREINDEX", coll, "at", "600"]).expect("collMod");
        assert!(
            eventually(10.0, || stored(&mut c, coll, "{}") == 10),
            "{coll}"
        );
        assert_eq!(
            count(&mut c, coll, r#"{"_id":{"$mod":[2,0]}}"#),
            10,
            "{coll}"
        );
    }
}

/// A write that meets an expired `_id` removes it as an expiry, and the expiry is announced
/// with `doc.expired` whatever happens to the write afterwards: here an upsert and an insert
/// that then fail on a unique secondary index. (A capped collection cannot meet an expired
/// document: it takes no TTL index.)
#[test]
fn expiry_met_by_a_failing_write_is_announced() {
    let s = TestServer::start(&[
        "--ttl-monitor-period",
        "3600",
        "--notify-keyspace-events",
        "KEx",
    ]);
    let mut c = s.conn();
    let _: String = q(&mut c, &["DOC.EXPIREINDEX", "s", "at", "0"]).expect("ttl index");
    let _: String = q(
        &mut c,
        &["DOC.CREATEINDEX", "s", r#"{"email":1}"#, "UNIQUE"],
    )
    .expect("unique index");
    insert(
        &mut c,
        "s",
        &[
            format!(r#"{{"_id":1,"at":{},"email":"a"}}"#, date(now_ms() - 1000)),
            format!(
                r#"{{"_id":2,"at":{},"email":"taken"}}"#,
                date(now_ms() + HOUR)
            ),
            format!(r#"{{"_id":3,"at":{},"email":"b"}}"#, date(now_ms() - 1000)),
        ],
    );
    let mut sub = s.conn();
    let mut ps = sub.as_pubsub();
    ps.subscribe("__keyevent@0__:doc.expired")
        .expect("subscribe");
    ps.subscribe("__keyspace@0__:s").expect("subscribe");
    ps.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .expect("timeout");
    // The expired _id 1 matches nothing, so the upsert inserts: it removes the expired
    // document first, then fails on the unique email.
    let e = err_text(q::<redis::Value>(
        &mut c,
        &[
            "DOC.UPDATE",
            "s",
            r#"{"_id":1}"#,
            r#"{"$set":{"email":"taken"}}"#,
            "UPSERT",
        ],
    ));
    assert!(e.starts_with("DUPKEY") && e.contains("email_1"), "{e}");
    expect_doc_expired(&mut ps, "s", "1");
    let e = err_text(q::<redis::Value>(
        &mut c,
        &["DOC.INSERT", "s", r#"{"_id":3,"email":"taken"}"#],
    ));
    assert!(e.starts_with("DUPKEY") && e.contains("email_1"), "{e}");
    expect_doc_expired(&mut ps, "s", "3");
    // Both are gone from storage, the live document stays, and the failed writes stored
    // nothing; the expired documents' unique keys are free again.
    assert_eq!(stored(&mut c, "s", "{}"), 1);
    insert(&mut c, "s", &[r#"{"_id":4,"email":"a"}"#.to_string()]);
    insert(&mut c, "s", &[r#"{"_id":5,"email":"b"}"#.to_string()]);
}
