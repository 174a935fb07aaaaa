//! Filters, updates, projections, sorts and aggregation pipelines from fuzz input, executed
//! against a small fixed collection, twice over:
//!
//! - with the document engine's own API (`documents::query`, `update`, `projection`, `sort`,
//!   `aggregate::Pipeline`) on the decoded documents, and
//! - through the DOC.* commands on a collection in an in-process server, with secondary
//!   indexes (single-field, dotted, multikey, compound), so the planner and the index scans
//!   run too.
//!
//! The two must agree on how many documents a filter matches: an index that loses or
//! invents a match is a wrong answer, not a crash, and the fuzzer only finds what fails.
//!
//! Input: up to five fields separated by 0xFF bytes: filter, update, projection, sort (each a
//! JSON object) and pipeline (a JSON array).
#![no_main]

#[path = "../common/mod.rs"]
mod common;

use bson::{Bson, DateTime, Document};
use libfuzzer_sys::fuzz_target;
use std::sync::Mutex;
use tidecache::documents::aggregate::{compile_match, Pipeline};
use tidecache::documents::codec::{parse_json, to_raw};
use tidecache::documents::projection::Projection;
use tidecache::documents::sort::Sort;
use tidecache::documents::{query, update};
use tidecache::protocol::Reply;

/// The collection every input runs against: each BSON type a filter compares, arrays (of
/// scalars and of documents), nested documents, missing fields and nulls.
const DOCS: &[&str] = &[
    r#"{"_id":1,"a":1,"b":{"c":"x"},"tags":["red","blue"],"n":1.5}"#,
    r#"{"_id":2,"a":2,"b":{"c":"y"},"tags":["blue"],"n":-3,"d":{"$date":"2024-01-02T03:04:05Z"}}"#,
    r#"{"_id":3,"a":"2","b":{"c":["x","z"]},"tags":[],"n":{"$numberLong":"9007199254740993"}}"#,
    r#"{"_id":"four","a":null,"b":[{"c":"x"},{"c":1}],"n":{"$numberDecimal":"1.50"}}"#,
    r#"{"_id":{"$oid":"5f0c5d9e8b3a4c2d1e0f1a2b"},"b":{},"tags":[["red"],"green"],"n":0}"#,
    r#"{"_id":6,"a":[1,2,3],"b":{"c":{"d":true}},"tags":"red","n":{"$numberDouble":"NaN"}}"#,
    r#"{"_id":7,"a":{"x":1},"b":null,"tags":[null,1,"1"],"d":{"$date":{"$numberLong":"-5"}}}"#,
    r#"{"_id":8.5,"a":-0.0,"b":{"c":"X"},"tags":["Red"],"n":{"$numberDouble":"Infinity"},"r":{"$regularExpression":{"pattern":"^a","options":"i"}}}"#,
];

const INDEXES: &[&str] = &[
    r#"{"a":1}"#,
    r#"{"b.c":-1}"#,
    r#"{"tags":1}"#,
    r#"{"a":1,"n":-1}"#,
    r#"{"d":1}"#,
];

struct State {
    harness: common::Harness,
    docs: Vec<Document>,
}

static STATE: Mutex<Option<State>> = Mutex::new(None);

fuzz_target!(|data: &[u8]| {
    let mut guard = STATE.lock().unwrap_or_else(|e| e.into_inner());
    let st = guard.get_or_insert_with(|| State {
        harness: common::Harness::new(),
        docs: DOCS
            .iter()
            .map(|d| parse_json(d.as_bytes()).expect("fixed documents parse"))
            .collect(),
    });
    let f = common::fields(data);
    let part = |i: usize| f.get(i).copied().unwrap_or(b"{}");
    let now = DateTime::from_millis(1_700_000_000_000);

    // The engine on the decoded documents.
    let filter = parse_json(part(0)).ok();
    let node = filter.as_ref().and_then(|f| query::parse(f).ok());
    let mut matched = None;
    // The commands put the server's date in place of "$$NOW"; the engine here compares the
    // string, so such filters are left out of the count checks.
    let node = node.filter(|_| !part(0).windows(5).any(|w| w == b"$$NOW"));
    if let Some(node) = &node {
        matched = Some(st.docs.iter().filter(|d| node.matches(d)).count());
        let _ = node.field_paths();
        let _ = node.id_equality();
        let mut eq = Vec::new();
        node.equalities(&mut eq);
    }
    let upd = parse_json(part(1)).ok();
    if let Some(u) = upd.as_ref().and_then(|u| update::parse(u).ok()) {
        for d in &st.docs {
            let mut d = d.clone();
            if u.apply(&mut d, now, false).is_ok() {
                let _ = to_raw(&d, 16 << 20);
            }
            let _ = u.scalar_sets(now);
        }
        if let Some(base) = node.as_ref().and_then(|n| update::upsert_base(n).ok()) {
            let mut d = base;
            let _ = u.apply(&mut d, now, true);
        }
    }
    let proj = parse_json(part(2)).ok();
    if let Some(p) = proj.as_ref().and_then(|p| Projection::parse(p).ok()) {
        for d in &st.docs {
            let _ = p.apply(d);
        }
    }
    let sort = parse_json(part(3)).ok();
    if let Some(s) = sort.as_ref().and_then(|s| Sort::parse(s).ok()) {
        let mut keyed: Vec<(Vec<Bson>, usize)> = st
            .docs
            .iter()
            .enumerate()
            .map(|(i, d)| (s.key(d), i))
            .collect();
        // `sort_by` panics when the comparison is not a total order: that is a finding.
        keyed.sort_by(|a, b| s.compare(&a.0, &b.0));
    }
    let pipeline_text = part(4);
    let stages: Option<Vec<Bson>> = {
        let mut wrapped = b"{\"p\":".to_vec();
        wrapped.extend_from_slice(pipeline_text);
        wrapped.push(b'}');
        match parse_json(&wrapped) {
            Ok(mut d) => match d.remove("p") {
                Some(Bson::Array(a)) => Some(a),
                _ => None,
            },
            Err(_) => None,
        }
    };
    if let Some(stages) = &stages {
        if let Ok(p) = Pipeline::parse(stages, &compile_match, now) {
            let _ = p.run(st.docs.iter().cloned());
            // As the shards run it: two partial results, merged.
            let (x, y) = st.docs.split_at(st.docs.len() / 2);
            if let (Ok(px), Ok(py)) = (
                p.run_shard(x.iter().cloned()),
                p.run_shard(y.iter().cloned()),
            ) {
                let _ = p.merge(vec![px, py]);
            }
        }
    }

    // The same through the commands, on an indexed collection.
    let h = &mut st.harness;
    h.reset();
    for i in INDEXES {
        h.run_strs(&["DOC.CREATEINDEX", "c", i]);
    }
    let mut insert = vec!["DOC.INSERT", "c"];
    insert.extend_from_slice(DOCS);
    h.run_strs(&insert);
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let ftext = text(part(0));
    if let Some(want) = matched {
        match h.run_strs(&["DOC.COUNT", "c", &ftext]) {
            Reply::Int(n) => assert_eq!(
                n as usize, want,
                "DOC.COUNT (planner, indexes) and the matcher disagree on {ftext}"
            ),
            other => panic!("DOC.COUNT failed on a filter the matcher accepts: {ftext}: {other:?}"),
        }
    }
    let ptext = text(part(2));
    let stext = text(part(3));
    h.run_strs(&[
        "DOC.FIND",
        "c",
        &ftext,
        "PROJECTION",
        &ptext,
        "SORT",
        &stext,
        "LIMIT",
        "5",
    ]);
    h.run_strs(&["DOC.EXPLAIN", "c", &ftext, "SORT", &stext]);
    h.run_strs(&["DOC.AGGREGATE", "c", &text(pipeline_text)]);
    h.run_strs(&["DOC.UPDATE", "c", &ftext, &text(part(1)), "MULTI", "UPSERT"]);
    // After the update, the indexes must still agree with the documents (read back as
    // relaxed Extended JSON, which turns a small Int64 into an Int32: `$type` filters can
    // tell them apart, so they are left out of this check).
    if let Some(node) = node.as_ref().filter(|_| !ftext.contains("$type")) {
        let all = h.run_strs(&["DOC.FIND", "c", "{}"]);
        if let Reply::Array(items) = all {
            let docs: Vec<Document> = items
                .iter()
                .filter_map(|r| match r {
                    Reply::Bulk(b) => parse_json(b).ok(),
                    _ => None,
                })
                .collect();
            let want = docs.iter().filter(|d| node.matches(d)).count();
            if docs.len() == items.len() {
                if let Reply::Int(n) = h.run_strs(&["DOC.COUNT", "c", &ftext]) {
                    assert_eq!(
                        n as usize, want,
                        "after the update, DOC.COUNT disagrees on {ftext}"
                    );
                }
            }
        }
    }
    h.run_strs(&["DOC.DELETE", "c", &ftext]);
});
