//! `{f: v}` finds and counts, planned once per command and probed in every shard
//! (`planner::EqProbe`), against the per-shard planner: the same filter written as
//! `{$and: [{f: v}]}` takes the general path, and both must answer alike whatever the
//! stored types, arrays, TTL expiry, index direction, dormant TTL indexes or limits.

mod support;

use support::{int, strs, TestServer};

/// The general path's spelling of `{field: value}`.
fn general(filter: &str) -> String {
    format!(r#"{{"$and":[{filter}]}}"#)
}

/// A setup command (its reply is not the point).
fn run(c: &mut redis::Connection, args: &[&str]) {
    support::q::<redis::Value>(c, args).expect("setup command");
}

/// The JSON DOC.EXPLAIN replies.
fn explain(c: &mut redis::Connection, coll: &str, filter: &str) -> String {
    support::q(c, &["DOC.EXPLAIN", coll, filter]).expect("explain")
}

/// Counts and finds `filter` both ways; `want` is the count when the test knows it.
fn agree(c: &mut redis::Connection, coll: &str, filter: &str, want: Option<usize>) {
    let n = int(c, &["DOC.COUNT", coll, filter]);
    if let Some(w) = want {
        assert_eq!(n, w as i64, "count {filter}");
    }
    assert_eq!(
        int(c, &["DOC.COUNT", coll, &general(filter)]),
        n,
        "{filter}"
    );
    let fast = strs(c, &["DOC.FIND", coll, filter]);
    assert_eq!(fast.len() as i64, n, "find {filter}: {fast:?}");
    // Both scan the same index in the same shard order.
    assert_eq!(
        fast,
        strs(c, &["DOC.FIND", coll, &general(filter)]),
        "{filter}"
    );
}

#[test]
fn probe_agrees_with_the_planner() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    run(&mut c, &["DOC.CREATEINDEX", "s", r#"{"u":1}"#]);
    run(&mut c, &["DOC.CREATEINDEX", "s", r#"{"d":-1}"#]);
    let mut docs = Vec::new();
    for i in 0..40 {
        docs.push(format!(r#"{{"_id":{i},"u":"x{}","d":{}}}"#, i % 4, i % 5));
    }
    // Types the KeyString equates: an int and a double, a string and a symbol; an array
    // (the index becomes multikey, so hits are matched); a missing field.
    docs.push(r#"{"_id":"i","u":5,"d":"s"}"#.into());
    docs.push(r#"{"_id":"f","u":5.0}"#.into());
    docs.push(r#"{"_id":"sym","u":{"$symbol":"x1"}}"#.into());
    docs.push(r#"{"_id":"none"}"#.into());
    let mut args = vec!["DOC.INSERT", "s"];
    args.extend(docs.iter().map(String::as_str));
    run(&mut c, &args);
    agree(&mut c, "s", r#"{"u":"x0"}"#, Some(10));
    // Whether a symbol equals a string is the matcher's call; both paths make it.
    agree(&mut c, "s", r#"{"u":"x1"}"#, None);
    agree(&mut c, "s", r#"{"u":5}"#, Some(2));
    agree(&mut c, "s", r#"{"u":"nope"}"#, Some(0));
    // A descending index: the probe's key is inverted.
    agree(&mut c, "s", r#"{"d":3}"#, Some(8));
    agree(&mut c, "s", r#"{"d":"s"}"#, Some(1));
    // No index on the field: every shard scans its documents.
    agree(&mut c, "s", r#"{"_id":"none"}"#, Some(1));
    agree(&mut c, "s", r#"{"zz":1}"#, Some(0));
    run(
        &mut c,
        &["DOC.INSERT", "s", r#"{"_id":"arr","u":["x2","y"]}"#],
    );
    agree(&mut c, "s", r#"{"u":"y"}"#, Some(1));
    agree(&mut c, "s", r#"{"u":"x2"}"#, Some(11));
    agree(&mut c, "s", r#"{"u":"x1"}"#, None);
    // LIMIT stops across shards as the planner's path does; FINDONE is the first.
    let three = strs(&mut c, &["DOC.FIND", "s", r#"{"u":"x0"}"#, "LIMIT", "3"]);
    assert_eq!(three.len(), 3);
    assert_eq!(
        three,
        strs(
            &mut c,
            &["DOC.FIND", "s", &general(r#"{"u":"x0"}"#), "LIMIT", "3"]
        )
    );
    let one: Option<String> =
        support::q(&mut c, &["DOC.FINDONE", "s", r#"{"u":"x0"}"#]).expect("findone");
    assert_eq!(one.as_deref(), Some(three[0].as_str()));
    // The plan DOC.EXPLAIN reports is the one the probe runs.
    let e = explain(&mut c, "s", r#"{"u":"x0"}"#);
    assert!(
        e.contains(r#""plan":"IXSCAN""#) && e.contains(r#""index":"u_1""#),
        "{e}"
    );
    // Two indexes on the same field: each shard probes the one the first shard chose (by
    // its shared spec); after a drop, the one left serves every shard.
    run(&mut c, &["DOC.CREATEINDEX", "s", r#"{"u":-1}"#]);
    agree(&mut c, "s", r#"{"u":"x0"}"#, Some(10));
    agree(&mut c, "s", r#"{"u":"x2"}"#, Some(11));
    run(&mut c, &["DOC.DROPINDEX", "s", "u_1"]);
    agree(&mut c, "s", r#"{"u":"x0"}"#, Some(10));
    agree(&mut c, "s", r#"{"u":"y"}"#, Some(1));
    let e = explain(&mut c, "s", r#"{"u":"x0"}"#);
    assert!(e.contains(r#""index":"u_-1""#), "{e}");
}

#[test]
fn probe_hides_expired_documents_and_wakes_dormant_ttl_indexes() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    run(&mut c, &["DOC.EXPIREINDEX", "t", "at", "3600"]);
    run(&mut c, &["DOC.CREATEINDEX", "t", r#"{"u":1}"#]);
    let mut docs = Vec::new();
    for i in 0..20 {
        // Even ids are long past their hour: invisible to strict reads.
        let at = if i % 2 == 0 {
            "2000-01-01T00:00:00Z"
        } else {
            "2999-01-01T00:00:00Z"
        };
        docs.push(format!(
            r#"{{"_id":{i},"u":"k{}","at":{{"$date":"{at}"}}}}"#,
            i / 10
        ));
    }
    let mut args = vec!["DOC.INSERT", "t"];
    args.extend(docs.iter().map(String::as_str));
    run(&mut c, &args);
    agree(&mut c, "t", r#"{"u":"k0"}"#, Some(5));
    agree(&mut c, "t", r#"{"u":"k1"}"#, Some(5));
    // An equality on the TTL field itself: its ordered part is dormant until this query
    // (the probe leaves it to the planner, which builds it), then probed.
    let date = r#"{"at":{"$date":"2999-01-01T00:00:00Z"}}"#;
    agree(&mut c, "t", date, Some(10));
    agree(&mut c, "t", date, Some(10));
    let e = explain(&mut c, "t", date);
    assert!(e.contains(r#""index":"at_1""#), "{e}");
    agree(
        &mut c,
        "t",
        r#"{"at":{"$date":"2000-01-01T00:00:00Z"}}"#,
        Some(0),
    );
    // Without strict reads the expired documents stay visible until the monitor runs.
    run(&mut c, &["CONFIG", "SET", "ttl-strict-reads", "no"]);
    let n = int(&mut c, &["DOC.COUNT", "t", r#"{"u":"k0"}"#]);
    assert!(n >= 5, "{n}");
}

#[test]
fn probe_reads_dates_and_stored_types_in_one_walk_as_the_planner_does() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    // Two TTL indexes, the probed field before, between and after their dates.
    run(&mut c, &["DOC.EXPIREINDEX", "w", "a", "3600"]);
    run(&mut c, &["DOC.EXPIREINDEX", "w", "b", "3600"]);
    run(&mut c, &["DOC.CREATEINDEX", "w", r#"{"u":1}"#]);
    let (old, new) = (
        r#"{"$date":"2000-01-01T00:00:00Z"}"#,
        r#"{"$date":"2999-01-01T00:00:00Z"}"#,
    );
    let docs = [
        // Visible: both dates in the future, in any order around `u`.
        format!(r#"{{"_id":1,"u":"k","a":{new},"b":{new}}}"#),
        format!(r#"{{"_id":2,"a":{new},"u":"k","b":{new}}}"#),
        format!(r#"{{"_id":3,"b":{new},"a":{new},"u":"k"}}"#),
        // Due under one index or the other.
        format!(r#"{{"_id":4,"u":"k","a":{old},"b":{new}}}"#),
        format!(r#"{{"_id":5,"b":{old},"u":"k"}}"#),
        // Not a date: never due. An array of dates: due by its earliest.
        r#"{"_id":6,"u":"k","a":"soon","b":7}"#.to_string(),
        format!(r#"{{"_id":7,"u":"k","a":[{new},{old}]}}"#),
        format!(r#"{{"_id":8,"a":[{new}],"u":"k"}}"#),
        // A stored type the KeyString does not tell apart from the probe's string (a
        // symbol): matched by the general matcher.
        format!(r#"{{"_id":9,"u":{{"$symbol":"k"}},"a":{new}}}"#),
    ];
    let mut args = vec!["DOC.INSERT", "w"];
    args.extend(docs.iter().map(String::as_str));
    run(&mut c, &args);
    // Visible: 1, 2, 3, 6, 8, and 9 (a symbol equals the string, as in MongoDB).
    agree(&mut c, "w", r#"{"u":"k"}"#, Some(6));
    // A TTL index on a dotted path: the one walk leaves it to the general reads.
    run(&mut c, &["DOC.EXPIREINDEX", "d", "s.at", "3600"]);
    run(&mut c, &["DOC.CREATEINDEX", "d", r#"{"u":1}"#]);
    let docs = [
        format!(r#"{{"_id":1,"u":1,"s":{{"at":{old}}}}}"#),
        format!(r#"{{"_id":2,"u":1,"s":{{"at":{new}}}}}"#),
        r#"{"_id":3,"u":1}"#.to_string(),
    ];
    let mut args = vec!["DOC.INSERT", "d"];
    args.extend(docs.iter().map(String::as_str));
    run(&mut c, &args);
    agree(&mut c, "d", r#"{"u":1}"#, Some(2));
}

#[test]
fn capped_collections_keep_insertion_order() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    run(&mut c, &["DOC.CREATE", "cap", "CAPPED", "SIZE", "100000"]);
    run(&mut c, &["DOC.CREATEINDEX", "cap", r#"{"g":1}"#]);
    for i in (0..30).rev() {
        let d = format!(r#"{{"_id":{i},"g":1}}"#);
        run(&mut c, &["DOC.INSERT", "cap", &d]);
    }
    let want: Vec<String> = (0..30)
        .rev()
        .map(|i| format!(r#"{{"_id":{i},"g":1}}"#))
        .collect();
    assert_eq!(strs(&mut c, &["DOC.FIND", "cap", r#"{"g":1}"#]), want);
    assert_eq!(
        strs(&mut c, &["DOC.FIND", "cap", r#"{"g":1}"#, "LIMIT", "2"]),
        want[..2].to_vec()
    );
}
