use super::*;
use bson::{bson, doc};

fn pipeline(spec: Bson) -> Pipeline {
    let Bson::Array(stages) = spec else {
        panic!("pipeline literal must be an array")
    };
    Pipeline::parse(&stages, &compile_match, DateTime::from_millis(0)).expect("pipeline")
}

fn parse_err(spec: Bson) -> String {
    let Bson::Array(stages) = spec else {
        panic!("pipeline literal must be an array")
    };
    Pipeline::parse(&stages, &compile_match, DateTime::from_millis(0))
        .expect_err("should fail")
        .0
}

fn date(s: &str) -> DateTime {
    DateTime::parse_rfc3339_str(s).expect("date")
}

fn events() -> Vec<Document> {
    let paths = ["/a", "/b", "/c"];
    (0..300)
        .map(|i| {
            // Every 7 hours from 2000-09-25, so the set spans September to November.
            let t = date("2000-09-25T00:00:00Z").timestamp_millis() + i * 7 * 3_600_000;
            doc! {"_id": i, "host": format!("10.0.0.{}", i % 5), "path": paths[(i % 3) as usize],
            "time": DateTime::from_millis(t), "status": 200, "response_size": (i * 10) as i32}
        })
        .collect()
}

#[test]
fn seed_pipeline_hits_per_path_per_day() {
    let p = pipeline(bson!([
        {"$match": {"time": {"$gte": date("2000-10-01T00:00:00Z"), "$lt": date("2000-11-01T00:00:00Z")}}},
        {"$project": {"path": 1, "date": {"y": {"$year": "$time"}, "m": {"$month": "$time"}, "d": {"$dayOfMonth": "$time"}}}},
        {"$group": {"_id": {"p": "$path", "y": "$date.y", "m": "$date.m", "d": "$date.d"}, "hits": {"$sum": 1}}},
    ]));
    let out = p.run(events()).expect("run");
    let mut expected = std::collections::BTreeMap::new();
    for e in events() {
        let t = e.get_datetime("time").expect("time").timestamp_millis();
        let p = dates::parts(t, 0);
        if (p.year, p.month) == (2000, 10) {
            *expected
                .entry((e.get_str("path").expect("path").to_string(), p.day as i32))
                .or_insert(0) += 1;
        }
    }
    assert_eq!(out.len(), expected.len());
    let total: i32 = out.iter().map(|d| d.get_i32("hits").expect("hits")).sum();
    assert_eq!(total, expected.values().sum::<i32>());
    for d in &out {
        let id = d.get_document("_id").expect("_id");
        assert_eq!(id.get_i32("y").expect("y"), 2000);
        assert_eq!(id.get_i32("m").expect("m"), 10);
        let key = (
            id.get_str("p").expect("p").to_string(),
            id.get_i32("d").expect("d"),
        );
        assert_eq!(Some(&d.get_i32("hits").expect("hits")), expected.get(&key));
    }
}

#[test]
fn sharded_run_equals_single_run() {
    let specs = [
        bson!([{"$group": {"_id": "$host", "n": {"$sum": 1}, "avg": {"$avg": "$response_size"},
            "paths": {"$addToSet": "$path"}, "min": {"$min": "$time"}}}, {"$sort": {"n": -1, "_id": 1}}]),
        bson!([{"$match": {"path": "/a"}}, {"$count": "n"}]),
        bson!([{"$sort": {"response_size": -1}}, {"$limit": 5}, {"$project": {"_id": 1}}]),
        bson!([{"$project": {"tags": ["$path", "$host"]}}, {"$unwind": "$tags"}, {"$group": {"_id": "$tags", "n": {"$sum": 1}}}]),
        bson!([{"$limit": 1000}, {"$skip": 290}, {"$sort": {"_id": 1}}]),
    ];
    for spec in specs {
        let p = pipeline(spec.clone());
        let whole = p.run(events()).expect("run");
        let mut parts: Vec<Vec<Document>> = vec![Vec::new(); 4];
        for (i, e) in events().into_iter().enumerate() {
            parts[i * 13 % 4].push(e);
        }
        let partials: Vec<Partial> = parts
            .into_iter()
            .map(|docs| p.run_shard(docs).expect("shard"))
            .collect();
        let merged = p.merge(partials).expect("merge");
        if matches!(p.stages().first(), Some(Stage::Limit(_))) {
            // $limit without a sort picks arbitrary documents: compare sizes only.
            assert_eq!(merged.len(), whole.len(), "{spec}");
        } else {
            assert_eq!(merged, whole, "{spec}");
        }
    }
}

#[test]
fn take_leading_match_leaves_the_rest() {
    let mut p = pipeline(bson!([{"$match": {"a": 1}}, {"$match": {"b": 2}}, {"$count": "n"}]));
    let f = p.take_leading_match().expect("filter");
    assert_eq!(f, doc! {"$and": [{"a": 1}, {"b": 2}]});
    assert_eq!(p.stages().len(), 1);
    assert_eq!(
        p.run(vec![doc! {}, doc! {}]).expect("run"),
        vec![doc! {"n": 2}]
    );
    assert_eq!(p.run(Vec::new()).expect("run"), Vec::<Document>::new());
}

#[test]
fn unwind_semantics() {
    let docs = vec![
        doc! {"_id": 1, "a": [1, 2]},
        doc! {"_id": 2, "a": []},
        doc! {"_id": 3},
        doc! {"_id": 4, "a": null},
        doc! {"_id": 5, "a": 9},
    ];
    let out = pipeline(bson!([{"$unwind": "$a"}]))
        .run(docs.clone())
        .expect("run");
    assert_eq!(
        out,
        vec![
            doc! {"_id": 1, "a": 1},
            doc! {"_id": 1, "a": 2},
            doc! {"_id": 5, "a": 9}
        ]
    );
    let out = pipeline(bson!([{"$unwind": {"path": "$a", "includeArrayIndex": "i", "preserveNullAndEmptyArrays": true}}]))
        .run(docs)
        .expect("run");
    assert_eq!(
        out,
        vec![
            doc! {"_id": 1, "a": 1, "i": 0i64},
            doc! {"_id": 1, "a": 2, "i": 1i64},
            doc! {"_id": 2, "i": null},
            doc! {"_id": 3, "i": null},
            doc! {"_id": 4, "a": null, "i": null},
            doc! {"_id": 5, "a": 9, "i": null},
        ]
    );
    let out = pipeline(bson!([{"$unwind": "$x.y"}]))
        .run(vec![doc! {"x": {"y": [1, 2], "z": 0}}])
        .expect("run");
    assert_eq!(
        out,
        vec![doc! {"x": {"y": 1, "z": 0}}, doc! {"x": {"y": 2, "z": 0}}]
    );
}

#[test]
fn sort_skip_limit_and_arrays() {
    let docs = vec![
        doc! {"_id": 1, "v": [5, 1]},
        doc! {"_id": 2, "v": 3},
        doc! {"_id": 3},
        doc! {"_id": 4, "v": "s"},
    ];
    let ids = |out: Vec<Document>| -> Vec<i32> {
        out.iter().map(|d| d.get_i32("_id").expect("_id")).collect()
    };
    assert_eq!(
        ids(pipeline(bson!([{"$sort": {"v": 1}}]))
            .run(docs.clone())
            .expect("run")),
        vec![3, 1, 2, 4]
    );
    assert_eq!(
        ids(pipeline(bson!([{"$sort": {"v": -1}}]))
            .run(docs.clone())
            .expect("run")),
        vec![4, 1, 2, 3]
    );
    assert_eq!(
        ids(
            pipeline(bson!([{"$sort": {"_id": -1}}, {"$skip": 1}, {"$limit": 2}]))
                .run(docs)
                .expect("run")
        ),
        vec![3, 2]
    );
}

#[test]
fn stage_errors_use_mongodb_wording() {
    assert_eq!(
        parse_err(bson!([{"$frob": {}}])),
        "Unrecognized pipeline stage name: '$frob'"
    );
    assert_eq!(
        parse_err(bson!([{"$match": {}, "$limit": 1}])),
        "A pipeline stage specification object must contain exactly one field."
    );
    assert_eq!(
        parse_err(bson!([{"$limit": 0}])),
        "the limit must be positive"
    );
    assert!(parse_err(bson!([{"$skip": -1}])).starts_with("invalid argument to $skip stage"));
    assert_eq!(
        parse_err(bson!([{"$count": "a.b"}])),
        "the count field cannot contain '.'"
    );
    assert_eq!(
        parse_err(bson!([{"$count": "$a"}])),
        "the count field cannot be a $-prefixed path"
    );
    assert_eq!(
        parse_err(bson!([{"$unwind": "a"}])),
        "path option to $unwind stage should be prefixed with a '$': a"
    );
    assert_eq!(
        parse_err(bson!([{"$sort": {"a": 2}}])),
        "$sort key ordering must be 1 (for ascending) or -1 (for descending)"
    );
    assert_eq!(
        parse_err(bson!([{"$project": {"a": {"$nope": 1}}}])),
        "Unrecognized expression '$nope'"
    );
    assert_eq!(
        parse_err(bson!([1])),
        "Each element of the 'pipeline' array must be an object, found int"
    );
}

#[test]
fn runtime_errors_surface() {
    let p = pipeline(bson!([{"$project": {"x": {"$divide": ["$a", 0]}}}]));
    assert_eq!(
        p.run(vec![doc! {"a": 1}]).expect_err("error").0,
        "can't $divide by zero"
    );
}

#[test]
fn needed_fields_stop_at_a_reshaping_stage() {
    let p = pipeline(bson!([
        {"$match": {"$or": [{"a.b": 1}, {"c": 2}]}},
        {"$unwind": "$u"},
        {"$project": {"path": 1, "date": {"y": {"$year": "$time"}}}},
        {"$group": {"_id": "$whatever", "n": {"$sum": 1}}},
    ]));
    assert_eq!(
        p.needed_fields(),
        Some(vec![
            "_id".into(),
            "a".into(),
            "c".into(),
            "date".into(),
            "path".into(),
            "time".into(),
            "u".into()
        ])
    );
    let p = pipeline(bson!([{"$group": {"_id": {"p": "$path"}, "n": {"$sum": "$size"}}}]));
    assert_eq!(p.needed_fields(), Some(vec!["path".into(), "size".into()]));
    assert_eq!(
        pipeline(bson!([{"$count": "n"}])).needed_fields(),
        Some(vec![])
    );
    assert_eq!(pipeline(bson!([{"$sort": {"a": 1}}])).needed_fields(), None);
    assert_eq!(
        pipeline(bson!([{"$addFields": {"x": 1}}, {"$limit": 1}])).needed_fields(),
        None
    );
    assert_eq!(
        pipeline(bson!([{"$group": {"_id": "$$ROOT"}}])).needed_fields(),
        None
    );
}
