//! DOC.AGGREGATE end to end: the "Storing Log Data" pipeline (hits per path per day for
//! October) over 20 000 synthetic Apache events loaded through the combined-log parser and
//! DOC.INSERT, checked against counts computed here; errors; sharded merge of groups.

mod support;

#[path = "../examples/support/apache.rs"]
mod apache;

use bson::{Bson, DateTime, Document};
use std::collections::BTreeMap;
use support::TestServer;

fn parse(s: &str) -> Document {
    let v: serde_json::Value = serde_json::from_str(s).expect("json");
    match Bson::try_from(v).expect("extjson") {
        Bson::Document(d) => d,
        other => panic!("not a document: {other:?}"),
    }
}

/// An integer field whatever its width (relaxed JSON turns small Int64s into Int32s).
fn int(d: &Document, k: &str) -> i64 {
    match d.get(k) {
        Some(Bson::Int32(i)) => *i as i64,
        Some(Bson::Int64(i)) => *i,
        other => panic!("{k}: {other:?}"),
    }
}

fn ms(s: &str) -> i64 {
    DateTime::parse_rfc3339_str(s)
        .expect("date")
        .timestamp_millis()
}

use tidecache::util::rng::XorShift as Rng;

const PATHS: [&str; 6] = [
    "/",
    "/index.html",
    "/apache_pb.gif",
    "/about",
    "/api/v1/items",
    "/login",
];

/// 20 000 events from mid-September to mid-November, as combined log lines.
fn synthetic_log(n: usize) -> Vec<String> {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let start = ms("2000-09-15T00:00:00Z");
    let span = ms("2000-11-15T00:00:00Z") - start;
    (0..n)
        .map(|_| {
            let t = start + (rng.below(span as u64 / 1000) * 1000) as i64;
            let host = format!("10.0.{}.{}", rng.below(4), rng.below(50));
            let path = PATHS[rng.below(PATHS.len() as u64) as usize];
            let status = [200, 200, 200, 304, 404, 500][rng.below(6) as usize];
            apache::format_line(&apache::Event {
                host: &host,
                millis: t,
                method: "GET",
                path,
                status,
                size: rng.below(100_000) as i64,
                referer: "-",
                agent: "Mozilla/5.0 (X11)",
            })
        })
        .collect()
}

fn load(con: &mut redis::Connection, coll: &str, lines: &[String]) -> Vec<Document> {
    let docs: Vec<Document> = lines
        .iter()
        .map(|l| apache::parse_line(l).expect("synthetic line parses"))
        .collect();
    for chunk in docs.chunks(1000) {
        let mut cmd = redis::cmd("DOC.INSERT");
        cmd.arg(coll);
        for d in chunk {
            cmd.arg(Bson::Document(d.clone()).into_relaxed_extjson().to_string());
        }
        let ids: Vec<String> = cmd.query(con).expect("insert");
        assert_eq!(ids.len(), chunk.len());
    }
    docs
}

fn aggregate(
    con: &mut redis::Connection,
    coll: &str,
    pipeline: &str,
) -> redis::RedisResult<Vec<Document>> {
    let out: Vec<String> = redis::cmd("DOC.AGGREGATE")
        .arg(coll)
        .arg(pipeline)
        .query(con)?;
    Ok(out.iter().map(|s| parse(s)).collect())
}

const SEED_PIPELINE: &str = r#"[
  {"$match": {"time": {"$gte": {"$date": "2000-10-01T00:00:00Z"}, "$lt": {"$date": "2000-11-01T00:00:00Z"}}}},
  {"$project": {"path": 1, "date": {"y": {"$year": "$time"}, "m": {"$month": "$time"}, "d": {"$dayOfMonth": "$time"}}}},
  {"$group": {"_id": {"p": "$path", "y": "$date.y", "m": "$date.m", "d": "$date.d"}, "hits": {"$sum": 1}}}
]"#;

#[test]
fn seed_pipeline_counts_hits_per_path_per_day() {
    let srv = TestServer::start(&["--shards", "4"]);
    let mut con = srv.conn();
    let lines = synthetic_log(20_000);
    let docs = load(&mut con, "events", &lines);

    // The expected counts, computed here from the parsed events.
    let oct = (ms("2000-10-01T00:00:00Z"), ms("2000-11-01T00:00:00Z"));
    let mut expected: BTreeMap<(String, i32), i32> = BTreeMap::new();
    for d in &docs {
        let t = d.get_datetime("time").expect("time").timestamp_millis();
        if t >= oct.0 && t < oct.1 {
            let day = ((t - oct.0) / 86_400_000) as i32 + 1;
            *expected
                .entry((d.get_str("path").expect("path").to_string(), day))
                .or_default() += 1;
        }
    }
    assert!(expected.len() > 150, "the synthetic log spans October");

    let check = |out: &[Document]| {
        let mut got: BTreeMap<(String, i32), i32> = BTreeMap::new();
        for d in out {
            let id = d.get_document("_id").expect("_id");
            assert_eq!(id.get_i32("y").expect("y"), 2000);
            assert_eq!(id.get_i32("m").expect("m"), 10);
            let key = (
                id.get_str("p").expect("p").to_string(),
                id.get_i32("d").expect("d"),
            );
            assert!(
                got.insert(key, d.get_i32("hits").expect("hits")).is_none(),
                "one group per key"
            );
        }
        assert_eq!(got, expected);
    };
    // Without an index (the leading $match scans), then with the seed's index on time.
    check(&aggregate(&mut con, "events", SEED_PIPELINE).expect("aggregate"));
    let _: String = redis::cmd("DOC.CREATEINDEX")
        .arg("events")
        .arg(r#"{"time":1}"#)
        .query(&mut con)
        .expect("index");
    check(&aggregate(&mut con, "events", SEED_PIPELINE).expect("aggregate"));

    // The leading $match goes through the planner: explain the same filter.
    let explain: String = redis::cmd("DOC.EXPLAIN")
        .arg("events")
        .arg(r#"{"time": {"$gte": {"$date": "2000-10-01T00:00:00Z"}, "$lt": {"$date": "2000-11-01T00:00:00Z"}}}"#)
        .query(&mut con)
        .expect("explain");
    let e = parse(&explain);
    let in_october: i32 = expected.values().sum();
    assert_eq!(e.get_str("plan").expect("plan"), "IXSCAN");
    assert_eq!(int(&e, "keysExamined"), in_october as i64);
    assert_eq!(int(&e, "docsExamined"), in_october as i64);

    // Top paths over the whole log, sorted: checks $group + $sort + $limit after the merge.
    let out = aggregate(
        &mut con,
        "events",
        r#"[{"$group": {"_id": "$path", "hits": {"$sum": 1}, "bytes": {"$sum": "$response_size"},
             "avg": {"$avg": "$response_size"}, "hosts": {"$addToSet": "$host"}}},
            {"$sort": {"hits": -1, "_id": 1}}, {"$limit": 3}]"#,
    )
    .expect("aggregate");
    let mut per_path: BTreeMap<&str, (i64, i64)> = BTreeMap::new();
    for d in &docs {
        let e = per_path
            .entry(d.get_str("path").expect("path"))
            .or_default();
        e.0 += 1;
        e.1 += d.get_i32("response_size").expect("size") as i64;
    }
    let mut ranked: Vec<(&str, (i64, i64))> = per_path.into_iter().collect();
    ranked.sort_by(|a, b| b.1 .0.cmp(&a.1 .0).then(a.0.cmp(b.0)));
    assert_eq!(out.len(), 3);
    for (d, (path, (hits, bytes))) in out.iter().zip(&ranked) {
        assert_eq!(d.get_str("_id").expect("_id"), *path);
        assert_eq!(d.get_i32("hits").expect("hits") as i64, *hits);
        let got_bytes = match d.get("bytes") {
            Some(Bson::Int32(b)) => *b as i64,
            Some(Bson::Int64(b)) => *b,
            other => panic!("bytes: {other:?}"),
        };
        assert_eq!(got_bytes, *bytes);
        let avg = d.get_f64("avg").expect("avg");
        assert!((avg - *bytes as f64 / *hits as f64).abs() < 1e-6);
    }

    // $count and a date format.
    let out = aggregate(
        &mut con,
        "events",
        r#"[{"$match": {"status": 404}}, {"$count": "n"}]"#,
    )
    .expect("aggregate");
    let n404 = docs
        .iter()
        .filter(|d| d.get_i32("status").ok() == Some(404))
        .count() as i32;
    assert_eq!(out, vec![bson::doc! {"n": n404}]);
    let out = aggregate(
        &mut con,
        "events",
        r#"[{"$sort": {"time": 1}}, {"$limit": 1}, {"$project": {"_id": 0, "day": {"$dateToString": {"format": "%Y-%m-%d", "date": "$time"}}}}]"#,
    )
    .expect("aggregate");
    assert_eq!(out.len(), 1);
    assert!(out[0].get_str("day").expect("day").starts_with("2000-09-1"));
}

#[test]
fn aggregate_errors_and_edge_cases() {
    let srv = TestServer::start(&["--shards", "3"]);
    let mut con = srv.conn();
    let err = |con: &mut redis::Connection, p: &str| -> String {
        aggregate(con, "c", p).expect_err("should fail").to_string()
    };
    assert!(
        err(&mut con, r#"[{"$frob": 1}]"#).contains("Unrecognized pipeline stage name: '$frob'")
    );
    assert!(err(&mut con, r#"[{"$project": {"a": {"$frob": 1}}}]"#)
        .contains("Unrecognized expression '$frob'"));
    assert!(err(&mut con, r#"[{"$group": {"n": {"$sum": 1}}}]"#)
        .contains("a group specification must include an _id"));
    assert!(
        err(&mut con, r#"[{"$match": {"a": {"$frob": 1}}}]"#).contains("unknown operator: $frob")
    );
    assert!(err(&mut con, r#"{"$match": {}}"#).contains("must be an array"));
    assert!(err(&mut con, r#"[{"$match": "#).contains("invalid JSON at byte"));
    // An empty or missing collection aggregates to nothing.
    assert_eq!(
        aggregate(&mut con, "c", r#"[{"$count": "n"}]"#).expect("agg"),
        Vec::<Document>::new()
    );

    let _: Vec<String> = redis::cmd("DOC.INSERT")
        .arg("c")
        .arg(r#"{"_id": 1, "tags": ["a", "b"], "n": 2}"#)
        .arg(r#"{"_id": 2, "tags": [], "n": 0}"#)
        .arg(r#"{"_id": 3, "n": 5, "when": "$$NOW"}"#)
        .query(&mut con)
        .expect("insert");
    let out = aggregate(&mut con, "c", r#"[{"$unwind": "$tags"}, {"$group": {"_id": "$tags", "n": {"$sum": 1}}}, {"$sort": {"_id": 1}}]"#)
        .expect("agg");
    assert_eq!(
        out,
        vec![
            bson::doc! {"_id": "a", "n": 1},
            bson::doc! {"_id": "b", "n": 1}
        ]
    );
    // A runtime error reaches the client.
    assert!(
        err(&mut con, r#"[{"$project": {"x": {"$divide": [1, "$n"]}}}]"#)
            .contains("can't $divide by zero")
    );
    // $$NOW and date arithmetic: `when` is within a minute of now.
    let out = aggregate(
        &mut con,
        "c",
        r#"[{"$match": {"_id": 3}}, {"$project": {"age": {"$subtract": ["$$NOW", "$when"]}}}]"#,
    )
    .expect("agg");
    let age = int(&out[0], "age");
    assert!((0..60_000).contains(&age), "{age}");
}
