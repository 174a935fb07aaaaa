//! The query corpus: documents, a filter, and the `_id`s MongoDB returns, written from
//! MongoDB's documentation of each operator (with its array and missing-field edge cases),
//! plus sort-order cases across mixed types.

use crate::documents::{codec, order, query, sort::Sort};
use bson::{Bson, Document};

/// Mixed types, missing, null and arrays under one field.
const M: &str = r#"[{"_id":1,"a":1},{"_id":2,"a":null},{"_id":3},{"_id":4,"a":[1,2]},{"_id":5,"a":"1"},
{"_id":6,"a":{"b":1}},{"_id":7,"a":[[1,2]]},{"_id":8,"a":1.0},{"_id":9,"a":{"$numberLong":"1"}},
{"_id":10,"a":[]},{"_id":11,"a":[null]},{"_id":12,"a":true},{"_id":13,"a":{"$date":"2020-01-01T00:00:00Z"}}]"#;

/// MongoDB's "inventory" examples.
const A: &str = r#"[{"_id":1,"item":"journal","qty":25,"tags":["blank","red"],"size":{"h":14,"w":21,"uom":"cm"}},
{"_id":2,"item":"notebook","qty":50,"tags":["red","blank"],"size":{"h":8.5,"w":11,"uom":"in"}},
{"_id":3,"item":"paper","qty":100,"tags":["red","blank","plain"],"size":{"h":8.5,"w":11,"uom":"in"}},
{"_id":4,"item":"planner","qty":75,"tags":["blank","red"],"size":{"h":22.85,"w":30,"uom":"cm"}},
{"_id":5,"item":"postcard","qty":45,"tags":["blue"],"size":{"h":10,"w":15.25,"uom":"cm"}}]"#;

/// MongoDB's `$elemMatch` examples.
const G: &str = r#"[{"_id":1,"results":[82,85,88]},{"_id":2,"results":[75,88,89]},
{"_id":3,"results":[{"product":"abc","score":10},{"product":"xyz","score":5}]},
{"_id":4,"results":[{"product":"abc","score":8},{"product":"xyz","score":7}]},
{"_id":5,"results":[{"product":"abc","score":7},{"product":"xyz","score":8}]},
{"_id":6,"results":[{"product":"abc","score":7},{"product":"def","score":8}]}]"#;

/// Numbers across Int32, Int64, Double and Decimal128.
const N: &str = r#"[{"_id":1,"n":1},{"_id":2,"n":{"$numberLong":"2"}},{"_id":3,"n":2.5},
{"_id":4,"n":{"$numberDecimal":"3.0"}},{"_id":5,"n":-1},{"_id":6,"n":{"$numberDouble":"NaN"}},
{"_id":7,"n":{"$numberLong":"9007199254740993"}},{"_id":8,"n":9007199254740992.0},{"_id":9,"n":"5"}]"#;

/// Strings and regular expressions.
const S: &str = r#"[{"_id":1,"s":"abc"},{"_id":2,"s":"ABC"},{"_id":3,"s":"a\nbc"},{"_id":4,"s":"xyz abc"},
{"_id":5,"s":["abc","q"]},{"_id":6,"s":5},{"_id":7,"s":""}]"#;

/// Dates, ObjectIds, booleans, timestamps, MinKey/MaxKey, binary.
const D: &str = r#"[{"_id":1,"v":{"$date":"2020-01-01T00:00:00Z"}},{"_id":2,"v":{"$date":"2021-06-01T00:00:00Z"}},
{"_id":3,"v":{"$oid":"5f1e5b5e5b5e5b5e5b5e5b5e"}},{"_id":4,"v":true},{"_id":5,"v":false},
{"_id":6,"v":{"$timestamp":{"t":5,"i":1}}},{"_id":7,"v":{"$minKey":1}},{"_id":8,"v":{"$maxKey":1}},
{"_id":9,"v":{"$binary":{"base64":"AQI=","subType":"00"}}}]"#;

/// MongoDB's "query an array of embedded documents" examples.
const O: &str = r#"[{"_id":1,"item":"journal","instock":[{"warehouse":"A","qty":5},{"warehouse":"C","qty":15}]},
{"_id":2,"item":"notebook","instock":[{"warehouse":"C","qty":5}]},
{"_id":3,"item":"paper","instock":[{"warehouse":"A","qty":60},{"warehouse":"B","qty":15}]},
{"_id":4,"item":"planner","instock":[{"warehouse":"A","qty":40},{"warehouse":"B","qty":5}]},
{"_id":5,"item":"postcard","instock":[{"warehouse":"B","qty":15},{"warehouse":"C","qty":35}]}]"#;

/// Paths through nested arrays and subdocuments.
const Z: &str = r#"[{"_id":1,"a":[{"b":[1,2]},{"b":[3]}]},{"_id":2,"a":[{"b":4}]},{"_id":3,"a":{"b":[5,{"c":6}]}},
{"_id":4,"a":[[{"b":7}]]},{"_id":5,"a":[{"c":1}]},{"_id":6,"a":5}]"#;

/// null, missing and empty arrays.
const U: &str = r#"[{"_id":1,"x":null},{"_id":2},{"_id":3,"x":[]},{"_id":4,"x":[null,1]},{"_id":5,"x":{"y":null}},
{"_id":6,"x":{"y":1}},{"_id":7,"x":[{"y":null}]},{"_id":8,"x":[{"z":1}]}]"#;

pub const CASES: &[(&str, &str, &[i32])] = &[
    // Implicit equality, null and missing.
    (M, r#"{"a":1}"#, &[1, 4, 8, 9]),
    (M, r#"{"a":null}"#, &[2, 3, 11]),
    (
        M,
        r#"{"a":{"$ne":null}}"#,
        &[1, 4, 5, 6, 7, 8, 9, 10, 12, 13],
    ),
    (
        M,
        r#"{"a":{"$exists":true}}"#,
        &[1, 2, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13],
    ),
    (M, r#"{"a":{"$exists":false}}"#, &[3]),
    (M, r#"{"a":{"$exists":0}}"#, &[3]),
    (M, r#"{"a":{"$gt":0}}"#, &[1, 4, 8, 9]),
    (M, r#"{"a":{"$gte":null}}"#, &[2, 3, 11]),
    (M, r#"{"a":{"$lte":null}}"#, &[2, 3, 11]),
    (M, r#"{"a":{"$gt":null}}"#, &[]),
    (M, r#"{"a":{"$lt":"2"}}"#, &[5]),
    (M, r#"{"a":{"$type":"string"}}"#, &[5]),
    (M, r#"{"a":{"$type":"array"}}"#, &[4, 7, 10, 11]),
    (M, r#"{"a":{"$type":"number"}}"#, &[1, 4, 8, 9]),
    (M, r#"{"a":{"$type":"int"}}"#, &[1, 4]),
    (M, r#"{"a":{"$type":"double"}}"#, &[8]),
    (M, r#"{"a":{"$type":"long"}}"#, &[9]),
    (M, r#"{"a":{"$type":"null"}}"#, &[2, 11]),
    (M, r#"{"a":{"$type":"object"}}"#, &[6]),
    (M, r#"{"a":{"$type":"bool"}}"#, &[12]),
    (M, r#"{"a":{"$type":"date"}}"#, &[13]),
    (M, r#"{"a":{"$type":16}}"#, &[1, 4]),
    (M, r#"{"a":{"$type":["string","bool"]}}"#, &[5, 12]),
    (M, r#"{"a":[1,2]}"#, &[4, 7]),
    (M, r#"{"a":[2,1]}"#, &[]),
    (M, r#"{"a":[]}"#, &[10]),
    (M, r#"{"a":{"$size":0}}"#, &[10]),
    (M, r#"{"a":{"$size":2}}"#, &[4]),
    (M, r#"{"a":{"$size":1}}"#, &[7, 11]),
    (M, r#"{"a":{"$in":[1,"1"]}}"#, &[1, 4, 5, 8, 9]),
    (M, r#"{"a":{"$in":[null]}}"#, &[2, 3, 11]),
    (M, r#"{"a":{"$in":[]}}"#, &[]),
    (M, r#"{"a":{"$nin":[1]}}"#, &[2, 3, 5, 6, 7, 10, 11, 12, 13]),
    (M, r#"{"a":{"$ne":1}}"#, &[2, 3, 5, 6, 7, 10, 11, 12, 13]),
    (M, r#"{"a":{"b":1}}"#, &[6]),
    (M, r#"{"a.b":1}"#, &[6]),
    (M, r#"{"a.b":{"$exists":true}}"#, &[6]),
    (M, r#"{"a.0":1}"#, &[4, 7]),
    (M, r#"{"a.0":[1,2]}"#, &[7]),
    (M, r#"{"a.1":2}"#, &[4]),
    (M, r#"{"a":{"$all":[1,2]}}"#, &[4]),
    (M, r#"{"a":{"$all":[[1,2]]}}"#, &[4, 7]),
    (M, r#"{"a":{"$all":[]}}"#, &[]),
    (M, r#"{"a":{"$elemMatch":{"$gte":2}}}"#, &[4]),
    (M, r#"{"a":{"$elemMatch":{"b":1}}}"#, &[]),
    (
        M,
        r#"{"a":{"$not":{"$gt":1}}}"#,
        &[1, 2, 3, 5, 6, 7, 8, 9, 10, 11, 12, 13],
    ),
    (M, r#"{"a":{"$mod":[2,1]}}"#, &[1, 4, 8, 9]),
    (M, r#"{"a":{"$mod":[2,0]}}"#, &[4]),
    (M, r#"{"a":{"$regex":"^1"}}"#, &[5]),
    (M, r#"{"a":{"$eq":1}}"#, &[1, 4, 8, 9]),
    (M, r#"{"a":{"$eq":[1,2]}}"#, &[4, 7]),
    (M, r#"{"$or":[{"a":"1"},{"a":true}]}"#, &[5, 12]),
    (
        M,
        r#"{"$nor":[{"a":1},{"a":null}]}"#,
        &[5, 6, 7, 10, 12, 13],
    ),
    (
        M,
        r#"{"$and":[{"a":{"$exists":true}},{"a":{"$type":"array"}}]}"#,
        &[4, 7, 10, 11],
    ),
    (M, r#"{"a":{"$date":"2020-01-01T00:00:00Z"}}"#, &[13]),
    (
        M,
        r#"{"a":{"$gt":{"$date":"2019-01-01T00:00:00Z"}}}"#,
        &[13],
    ),
    (M, r#"{"a":{"$lt":{"$date":"2019-01-01T00:00:00Z"}}}"#, &[]),
    (M, r#"{"a":{"$lt":"$$NOW"}}"#, &[13]),
    (M, r#"{"a":{"$gt":1,"$lt":3}}"#, &[4]),
    (M, r#"{"a":true}"#, &[12]),
    (
        M,
        r#"{"_id":{"$in":[1,2.0,{"$numberLong":"3"}]}}"#,
        &[1, 2, 3],
    ),
    (M, r#"{"_id":{"$gt":11}}"#, &[12, 13]),
    // Inventory.
    (A, r#"{}"#, &[1, 2, 3, 4, 5]),
    (A, r#"{"item":"journal"}"#, &[1]),
    (A, r#"{"tags":"red"}"#, &[1, 2, 3, 4]),
    (A, r#"{"tags":["red","blank"]}"#, &[2]),
    (A, r#"{"tags":{"$all":["red","blank"]}}"#, &[1, 2, 3, 4]),
    (A, r#"{"size":{"h":14,"w":21,"uom":"cm"}}"#, &[1]),
    (A, r#"{"size":{"w":21,"h":14,"uom":"cm"}}"#, &[]),
    (A, r#"{"size.uom":"in"}"#, &[2, 3]),
    (A, r#"{"size.h":{"$lt":15}}"#, &[1, 2, 3, 5]),
    (
        A,
        r#"{"size.h":{"$lt":15},"size.uom":"in","qty":{"$lt":60}}"#,
        &[2],
    ),
    (A, r#"{"qty":{"$in":[25,100]}}"#, &[1, 3]),
    (
        A,
        r#"{"$or":[{"qty":{"$lt":30}},{"item":{"$regex":"^p"}}]}"#,
        &[1, 3, 4, 5],
    ),
    (A, r#"{"item":{"$regex":"^P","$options":"i"}}"#, &[3, 4, 5]),
    (A, r#"{"item":{"$regex":"^P"}}"#, &[]),
    (
        A,
        r#"{"item":{"$regex":{"$regularExpression":{"pattern":"^P","options":"i"}}}}"#,
        &[3, 4, 5],
    ),
    (
        A,
        r#"{"item":{"$regularExpression":{"pattern":"^p","options":""}}}"#,
        &[3, 4, 5],
    ),
    (
        A,
        r#"{"item":{"$in":[{"$regularExpression":{"pattern":"^j","options":""}},"paper"]}}"#,
        &[1, 3],
    ),
    (
        A,
        r#"{"item":{"$nin":[{"$regularExpression":{"pattern":"^p","options":""}}]}}"#,
        &[1, 2],
    ),
    (
        A,
        r#"{"item":{"$not":{"$regularExpression":{"pattern":"^p","options":""}}}}"#,
        &[1, 2],
    ),
    (A, r#"{"tags":{"$size":3}}"#, &[3]),
    (A, r#"{"tags.0":"red"}"#, &[2, 3]),
    (A, r#"{"tags":{"$nin":["blue","plain"]}}"#, &[1, 2, 4]),
    (A, r#"{"qty":{"$gte":50,"$lte":75}}"#, &[2, 4]),
    (A, r#"{"qty":{"$not":{"$gte":50}}}"#, &[1, 5]),
    (A, r#"{"size.w":{"$mod":[5,1]}}"#, &[1, 2, 3]),
    (
        A,
        r#"{"item":{"$type":"string"},"qty":{"$exists":true}}"#,
        &[1, 2, 3, 4, 5],
    ),
    (A, r#"{"nope":{"$exists":false}}"#, &[1, 2, 3, 4, 5]),
    (A, r#"{"nope":null}"#, &[1, 2, 3, 4, 5]),
    (A, r#"{"nope":{"$ne":5}}"#, &[1, 2, 3, 4, 5]),
    (A, r#"{"nope":{"$nin":[1,2]}}"#, &[1, 2, 3, 4, 5]),
    (A, r#"{"nope":{"$in":[1,2]}}"#, &[]),
    (A, r#"{"nope":{"$gt":null}}"#, &[]),
    (A, r#"{"nope":{"$lte":null}}"#, &[1, 2, 3, 4, 5]),
    (A, r#"{"nope.deeper":{"$exists":true}}"#, &[]),
    (
        A,
        r#"{"$or":[{"qty":25},{"qty":{"$gt":70}}],"size.uom":"cm"}"#,
        &[1, 4],
    ),
    (
        A,
        r#"{"$and":[{"qty":{"$gt":20}},{"qty":{"$lt":50}}]}"#,
        &[1, 5],
    ),
    (
        A,
        r#"{"$and":[{"$or":[{"qty":25},{"qty":50}]},{"$or":[{"tags":"blank"},{"tags":"blue"}]}]}"#,
        &[1, 2],
    ),
    (A, r#"{"$nor":[{"qty":{"$gt":40}}]}"#, &[1]),
    (A, r#"{"$nor":[{"tags":"red"},{"tags":"blue"}]}"#, &[]),
    (
        A,
        r#"{"item":{"$in":["paper","planner"]},"qty":{"$ne":100}}"#,
        &[4],
    ),
    (A, r#"{"qty":{"$exists":true,"$nin":[25,50]}}"#, &[3, 4, 5]),
    (A, r#"{"size.h":{"$in":[8.5]}}"#, &[2, 3]),
    (A, r#"{"size":{"$type":"object"}}"#, &[1, 2, 3, 4, 5]),
    (A, r#"{"size.uom":{"$ne":"cm"}}"#, &[2, 3]),
    (A, r#"{"tags":{"$elemMatch":{"$eq":"blue"}}}"#, &[5]),
    (A, r#"{"tags":{"$all":["blank"]}}"#, &[1, 2, 3, 4]),
    (A, r#"{"tags.1":"blank"}"#, &[2, 3]),
    (A, r#"{"tags":{"$not":{"$size":2}}}"#, &[3, 5]),
    (A, r#"{"$comment":"why","qty":25}"#, &[1]),
    (A, r#"{"qty":{"$gt":{"$numberLong":"74"}}}"#, &[3, 4]),
    (A, r#"{"qty":{"$lt":{"$numberDecimal":"45.5"}}}"#, &[1, 5]),
    (
        A,
        r#"{"size.h":8.5,"size.w":{"$numberLong":"11"}}"#,
        &[2, 3],
    ),
    (A, r#"{"item":{"$gt":"p","$lt":"pb"}}"#, &[3]),
    (A, r#"{"$or":[{"item":"nothing"}]}"#, &[]),
    (A, r#"{"tags":{"$in":["plain","blue"]}}"#, &[3, 5]),
    // $elemMatch.
    (
        G,
        r#"{"results":{"$elemMatch":{"$gte":80,"$lt":85}}}"#,
        &[1],
    ),
    (G, r#"{"results":{"$gte":80,"$lt":85}}"#, &[1, 2]),
    (
        G,
        r#"{"results":{"$elemMatch":{"product":"xyz","score":{"$gte":8}}}}"#,
        &[5],
    ),
    (
        G,
        r#"{"results.product":"xyz","results.score":{"$gte":8}}"#,
        &[3, 4, 5],
    ),
    (
        G,
        r#"{"results":{"$elemMatch":{"product":{"$ne":"xyz"}}}}"#,
        &[3, 4, 5, 6],
    ),
    (G, r#"{"results.product":{"$ne":"xyz"}}"#, &[1, 2, 6]),
    (G, r#"{"results.score":{"$gt":9}}"#, &[3]),
    (G, r#"{"results.0.score":7}"#, &[5, 6]),
    (G, r#"{"results.1.product":"def"}"#, &[6]),
    (G, r#"{"results":{"$size":3}}"#, &[1, 2]),
    (
        G,
        r#"{"results":{"$all":[{"$elemMatch":{"product":"abc","score":{"$gt":7}}},{"$elemMatch":{"product":"xyz"}}]}}"#,
        &[3, 4],
    ),
    (G, r#"{"results":82}"#, &[1]),
    (G, r#"{"results":{"$in":[75,82]}}"#, &[1, 2]),
    (G, r#"{"results":{"$elemMatch":{"product":"def"}}}"#, &[6]),
    (
        G,
        r#"{"results":{"$elemMatch":{"$not":{"$gte":80}}}}"#,
        &[2, 3, 4, 5, 6],
    ),
    (G, r#"{"results.score":{"$all":[7,8]}}"#, &[4, 5, 6]),
    (G, r#"{"results":{"product":"abc","score":10}}"#, &[3]),
    (
        G,
        r#"{"results":{"$elemMatch":{"score":{"$in":[5,10]}}}}"#,
        &[3],
    ),
    (G, r#"{"results":{"$elemMatch":{"$in":[89,1]}}}"#, &[2]),
    (
        G,
        r#"{"results":{"$not":{"$elemMatch":{"$gt":86}}}}"#,
        &[3, 4, 5, 6],
    ),
    // Numbers.
    (N, r#"{"n":2}"#, &[2]),
    (N, r#"{"n":2.0}"#, &[2]),
    (N, r#"{"n":{"$numberDecimal":"2"}}"#, &[2]),
    (N, r#"{"n":3}"#, &[4]),
    (N, r#"{"n":{"$gt":2}}"#, &[3, 4, 7, 8]),
    (N, r#"{"n":{"$gte":2,"$lt":3}}"#, &[2, 3]),
    (N, r#"{"n":{"$lt":0}}"#, &[5]),
    (N, r#"{"n":{"$numberDouble":"NaN"}}"#, &[6]),
    (N, r#"{"n":{"$gte":{"$numberDouble":"NaN"}}}"#, &[6]),
    (N, r#"{"n":{"$numberLong":"9007199254740993"}}"#, &[7]),
    (N, r#"{"n":9007199254740992}"#, &[8]),
    (N, r#"{"n":{"$gt":9007199254740992}}"#, &[7]),
    (N, r#"{"n":{"$type":"decimal"}}"#, &[4]),
    (N, r#"{"n":{"$type":"long"}}"#, &[2, 7]),
    (N, r#"{"n":{"$in":[1,"5"]}}"#, &[1, 9]),
    (N, r#"{"n":{"$gt":"4"}}"#, &[9]),
    (N, r#"{"n":{"$mod":[2,0]}}"#, &[2, 3, 8]),
    (N, r#"{"n":{"$mod":[2,-1]}}"#, &[5]),
    (N, r#"{"n":{"$ne":2}}"#, &[1, 3, 4, 5, 6, 7, 8, 9]),
    (
        N,
        r#"{"n":{"$lte":{"$numberDecimal":"2.5"}}}"#,
        &[1, 2, 3, 5],
    ),
    (N, r#"{"n":5}"#, &[]),
    // Strings and regular expressions.
    (S, r#"{"s":{"$regex":"^abc"}}"#, &[1, 5]),
    (S, r#"{"s":{"$regex":"^abc","$options":"i"}}"#, &[1, 2, 5]),
    (S, r#"{"s":{"$regex":"^bc","$options":"m"}}"#, &[3]),
    (S, r#"{"s":{"$regex":"^bc"}}"#, &[]),
    (S, r#"{"s":{"$regex":"a.bc","$options":"s"}}"#, &[3]),
    (S, r#"{"s":{"$regex":"a.bc"}}"#, &[]),
    (S, r#"{"s":{"$regex":"a b c","$options":"x"}}"#, &[1, 4, 5]),
    (S, r#"{"s":{"$regex":"c$"}}"#, &[1, 3, 4, 5]),
    (S, r#"{"s":{"$gt":"a"}}"#, &[1, 3, 4, 5]),
    (S, r#"{"s":{"$lt":"B"}}"#, &[2, 7]),
    (S, r#"{"s":""}"#, &[7]),
    (
        S,
        r#"{"s":{"$in":[{"$regularExpression":{"pattern":"^x","options":""}},5]}}"#,
        &[4, 6],
    ),
    (S, r#"{"s":{"$not":{"$regex":"b"}}}"#, &[2, 6, 7]),
    (S, r#"{"s":{"$type":2}}"#, &[1, 2, 3, 4, 5, 7]),
    (S, r#"{"s":{"$size":2}}"#, &[5]),
    (S, r#"{"s":"q"}"#, &[5]),
    (S, r#"{"s":{"$regex":""}}"#, &[1, 2, 3, 4, 5, 7]),
    (S, r#"{"s":{"$gte":"abc","$lte":"abc"}}"#, &[1, 5]),
    // Dates, ObjectIds, booleans and other types.
    (D, r#"{"v":true}"#, &[4]),
    (D, r#"{"v":{"$ne":true}}"#, &[1, 2, 3, 5, 6, 7, 8, 9]),
    (D, r#"{"v":{"$gt":false}}"#, &[4]),
    (D, r#"{"v":{"$lt":{"$date":"2021-01-01T00:00:00Z"}}}"#, &[1]),
    (
        D,
        r#"{"v":{"$gte":{"$date":{"$numberLong":"0"}}}}"#,
        &[1, 2],
    ),
    (D, r#"{"v":{"$type":"objectId"}}"#, &[3]),
    (D, r#"{"v":{"$oid":"5f1e5b5e5b5e5b5e5b5e5b5e"}}"#, &[3]),
    (
        D,
        r#"{"v":{"$gt":{"$oid":"000000000000000000000000"}}}"#,
        &[3],
    ),
    (D, r#"{"v":{"$type":"timestamp"}}"#, &[6]),
    (D, r#"{"v":{"$type":"minKey"}}"#, &[7]),
    (D, r#"{"v":{"$type":"maxKey"}}"#, &[8]),
    (D, r#"{"v":{"$type":"binData"}}"#, &[9]),
    (D, r#"{"v":{"$minKey":1}}"#, &[7]),
    (D, r#"{"v":{"$timestamp":{"t":5,"i":1}}}"#, &[6]),
    (D, r#"{"v":{"$gt":{"$timestamp":{"t":4,"i":0}}}}"#, &[6]),
    (D, r#"{"v":{"$exists":true}}"#, &[1, 2, 3, 4, 5, 6, 7, 8, 9]),
    (
        D,
        r#"{"v":{"$binary":{"base64":"AQI=","subType":"00"}}}"#,
        &[9],
    ),
    (D, r#"{"v":{"$in":[false,{"$maxKey":1}]}}"#, &[5, 8]),
    (
        D,
        r#"{"v":{"$date":{"$numberLong":"1577836800000"}}}"#,
        &[1],
    ),
    // Arrays of embedded documents.
    (O, r#"{"instock":{"warehouse":"A","qty":5}}"#, &[1]),
    (O, r#"{"instock":{"qty":5,"warehouse":"A"}}"#, &[]),
    (O, r#"{"instock.0.qty":{"$lte":20}}"#, &[1, 2, 5]),
    (O, r#"{"instock.qty":{"$lte":20}}"#, &[1, 2, 3, 4, 5]),
    (
        O,
        r#"{"instock":{"$elemMatch":{"qty":5,"warehouse":"A"}}}"#,
        &[1],
    ),
    (
        O,
        r#"{"instock":{"$elemMatch":{"qty":{"$gt":10,"$lte":20}}}}"#,
        &[1, 3, 5],
    ),
    (O, r#"{"instock.qty":{"$gt":10,"$lte":20}}"#, &[1, 3, 4, 5]),
    (O, r#"{"instock.qty":5,"instock.warehouse":"A"}"#, &[1, 4]),
    (O, r#"{"instock.warehouse":{"$all":["A","B"]}}"#, &[3, 4]),
    (O, r#"{"instock.warehouse":{"$nin":["A"]}}"#, &[2, 5]),
    (O, r#"{"instock":{"$size":1}}"#, &[2]),
    (O, r#"{"instock.1":{"$exists":true}}"#, &[1, 3, 4, 5]),
    (O, r#"{"instock.1":{"$exists":false}}"#, &[2]),
    (O, r#"{"instock.qty":{"$size":2}}"#, &[]),
    (
        O,
        r#"{"instock":{"$elemMatch":{"$or":[{"qty":60},{"warehouse":"C","qty":5}]}}}"#,
        &[2, 3],
    ),
    (
        O,
        r#"{"instock":{"$not":{"$elemMatch":{"warehouse":"A"}}}}"#,
        &[2, 5],
    ),
    (O, r#"{"instock.warehouse":{"$ne":"C"}}"#, &[3, 4]),
    (
        O,
        r#"{"$and":[{"instock.warehouse":"A"},{"instock.warehouse":"C"}]}"#,
        &[1],
    ),
    (
        O,
        r#"{"$or":[{"item":"paper"},{"instock.qty":35}]}"#,
        &[3, 5],
    ),
    (
        O,
        r#"{"$nor":[{"instock.warehouse":"A"},{"item":"postcard"}]}"#,
        &[2],
    ),
    (O, r#"{"instock.qty":{"$in":[60,35]}}"#, &[3, 5]),
    (O, r#"{"instock.qty":{"$type":"int"}}"#, &[1, 2, 3, 4, 5]),
    (O, r#"{"item":{"$gte":"p"}}"#, &[3, 4, 5]),
    (
        O,
        r#"{"instock.warehouse":{"$regex":"^[AB]$"}}"#,
        &[1, 3, 4, 5],
    ),
    // Nested arrays and subdocuments.
    (Z, r#"{"a.b":2}"#, &[1]),
    (Z, r#"{"a.b":3}"#, &[1]),
    (Z, r#"{"a.b":[1,2]}"#, &[1]),
    (Z, r#"{"a.b":4}"#, &[2]),
    (Z, r#"{"a.b":7}"#, &[]),
    (Z, r#"{"a.b.c":6}"#, &[3]),
    (Z, r#"{"a.b":{"$size":2}}"#, &[1, 3]),
    (Z, r#"{"a.b":{"$exists":false}}"#, &[4, 5, 6]),
    (Z, r#"{"a.0.b":[1,2]}"#, &[1]),
    (Z, r#"{"a.0.b":1}"#, &[1]),
    (Z, r#"{"a.1.b":3}"#, &[1]),
    (Z, r#"{"a.0.0.b":7}"#, &[4]),
    (Z, r#"{"a.b":{"$elemMatch":{"c":6}}}"#, &[3]),
    (Z, r#"{"a.b":{"$gt":4}}"#, &[3]),
    (Z, r#"{"a":{"$elemMatch":{"b":{"$gte":3}}}}"#, &[1, 2]),
    (Z, r#"{"a.c":1}"#, &[5]),
    (Z, r#"{"a":5}"#, &[6]),
    (Z, r#"{"a":{"$type":"object"}}"#, &[1, 2, 3, 5]),
    // null, missing, empty arrays.
    (U, r#"{"x":null}"#, &[1, 2, 4]),
    (U, r#"{"x":{"$eq":null}}"#, &[1, 2, 4]),
    (U, r#"{"x":{"$ne":null}}"#, &[3, 5, 6, 7, 8]),
    (U, r#"{"x":{"$in":[null,[]]}}"#, &[1, 2, 3, 4]),
    (U, r#"{"x":{"$exists":true}}"#, &[1, 3, 4, 5, 6, 7, 8]),
    (U, r#"{"x":{"$type":"null"}}"#, &[1, 4]),
    (U, r#"{"x.y":{"$exists":true}}"#, &[5, 6, 7]),
    (U, r#"{"x.y":1}"#, &[6]),
    (U, r#"{"x.y":{"$type":"null"}}"#, &[5, 7]),
    (U, r#"{"x.z":{"$exists":true}}"#, &[8]),
    (U, r#"{"x":{"$size":0}}"#, &[3]),
    (U, r#"{"x":{"$all":[null]}}"#, &[1, 2, 4]),
    (U, r#"{"x":{"$elemMatch":{"$eq":null}}}"#, &[4]),
    (U, r#"{"x":{"$elemMatch":{"y":null}}}"#, &[7, 8]),
    (U, r#"{"x":{"$not":{"$type":"array"}}}"#, &[1, 2, 5, 6]),
    (U, r#"{"x":{"$gte":null}}"#, &[1, 2, 4]),
    (U, r#"{"x":{"$lt":null}}"#, &[]),
    (U, r#"{"x":{"$nin":[null]}}"#, &[3, 5, 6, 7, 8]),
    (U, r#"{"x":{"y":null}}"#, &[5, 7]),
];

/// Filters that must be refused, with the start of the error.
const ERRORS: &[(&str, &str)] = &[
    (r#"{"a":{"$foo":1}}"#, "ERR unknown operator: $foo"),
    (r#"{"$foo":1}"#, "ERR unknown top level operator: $foo"),
    (r#"{"$where":"this.a == 1"}"#, "ERR $where is not allowed"),
    (r#"{"a":{"$where":"1"}}"#, "ERR $where is not allowed"),
    (r#"{"$function":{}}"#, "ERR $function is not allowed"),
    (r#"{"a":{"$in":1}}"#, "ERR $in needs an array"),
    (r#"{"a":{"$nin":"x"}}"#, "ERR $nin needs an array"),
    (r#"{"a":{"$size":-1}}"#, "ERR $size may not be negative"),
    (r#"{"a":{"$size":1.5}}"#, "ERR $size must be a whole number"),
    (r#"{"a":{"$mod":[0,1]}}"#, "ERR divisor cannot be 0"),
    (
        r#"{"a":{"$mod":[1]}}"#,
        "ERR malformed mod, not enough elements",
    ),
    (
        r#"{"$and":[]}"#,
        "ERR $and/$or/$nor must be a nonempty array",
    ),
    (
        r#"{"$or":[1]}"#,
        "ERR $or/$and/$nor entries need to be full objects",
    ),
    (
        r#"{"a":{"$regex":"(a)\\1"}}"#,
        "ERR invalid regular expression",
    ),
    (
        r#"{"a":{"$regex":"a","$options":"q"}}"#,
        "ERR invalid flag in regex options: q",
    ),
    (r#"{"a":{"$options":"i"}}"#, "ERR $options needs a $regex"),
    (
        r#"{"a":{"$type":"nope"}}"#,
        "ERR unknown type name alias: nope",
    ),
    (
        r#"{"a":{"$elemMatch":1}}"#,
        "ERR $elemMatch needs an Object",
    ),
    (
        r#"{"a":{"$not":1}}"#,
        "ERR $not needs a regex or a document",
    ),
    (r#"{"a":{"$gt":1,"b":1}}"#, "ERR unknown operator: b"),
];

fn load(docs: &str) -> Vec<Document> {
    let wrapped = format!("{{\"d\":{docs}}}");
    let d = codec::parse_json(wrapped.as_bytes()).expect("corpus documents parse");
    match d.get("d") {
        Some(Bson::Array(a)) => a
            .iter()
            .filter_map(|v| match v {
                Bson::Document(d) => Some(d.clone()),
                _ => None,
            })
            .collect(),
        _ => panic!("corpus documents are an array"),
    }
}

fn id_of(d: &Document) -> i32 {
    d.get("_id")
        .and_then(order::as_f64)
        .expect("corpus ids are numbers") as i32
}

#[test]
fn corpus_has_enough_cases() {
    assert!(CASES.len() >= 200, "{} cases", CASES.len());
}

#[test]
fn query_corpus() {
    let mut failures = Vec::new();
    for (docs, filter, want) in CASES {
        let mut f = codec::parse_json(filter.as_bytes()).expect("corpus filter parses");
        codec::replace_now(&mut f, bson::DateTime::now());
        let node = match query::parse(&f) {
            Ok(n) => n,
            Err(e) => {
                failures.push(format!("{filter}: {e}"));
                continue;
            }
        };
        let loaded = load(docs);
        let got: Vec<i32> = loaded
            .iter()
            .filter(|d| node.matches(d))
            .map(id_of)
            .collect();
        if got != *want {
            failures.push(format!("{filter}: got {got:?}, want {want:?}"));
        }
        // The scan path matches stored raw BSON, decoding only what the paths reach: it must
        // agree with matching the whole document.
        let paths = node.field_paths();
        let from_raw: Vec<i32> = loaded
            .iter()
            .filter(|d| {
                let raw = bson::RawDocumentBuf::try_from(*d).expect("encodes");
                crate::documents::collection::matches(&node, &paths, &raw)
            })
            .map(id_of)
            .collect();
        if from_raw != *want {
            failures.push(format!(
                "{filter} (from raw): got {from_raw:?}, want {want:?}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn bad_filters_are_refused() {
    for (filter, want) in ERRORS {
        let f = codec::parse_json(filter.as_bytes()).expect("error filter parses as JSON");
        match query::parse(&f) {
            Ok(_) => panic!("{filter} was accepted"),
            Err(e) => assert!(e.starts_with(want), "{filter}: {e}"),
        }
    }
}

const SORT_DOCS: &str = r#"[{"_id":1,"v":2},{"_id":2,"v":"a"},{"_id":3},{"_id":4,"v":null},{"_id":5,"v":[3,0]},
{"_id":6,"v":{"x":1}},{"_id":7,"v":true},{"_id":8,"v":1.5},{"_id":9,"v":{"$date":"2020-01-01T00:00:00Z"}},
{"_id":10,"v":{"$oid":"5f1e5b5e5b5e5b5e5b5e5b5e"}},{"_id":11,"v":{"$minKey":1}},{"_id":12,"v":{"$maxKey":1}},
{"_id":13,"v":{"$numberLong":"-7"}},{"_id":14,"v":[]},{"_id":15,"v":{"$timestamp":{"t":1,"i":1}}}]"#;

const SORTS: &[(&str, &str, &[i32])] = &[
    (
        SORT_DOCS,
        r#"{"v":1}"#,
        &[11, 14, 3, 4, 13, 5, 8, 1, 2, 6, 10, 7, 9, 15, 12],
    ),
    (
        SORT_DOCS,
        r#"{"v":-1}"#,
        &[12, 15, 9, 7, 10, 6, 2, 5, 1, 8, 13, 3, 4, 14, 11],
    ),
    (
        r#"[{"_id":1,"a":1,"b":2},{"_id":2,"a":1,"b":1},{"_id":3,"a":0,"b":5},{"_id":4,"a":1}]"#,
        r#"{"a":1,"b":-1}"#,
        &[3, 1, 2, 4],
    ),
    (
        r#"[{"_id":1,"a":1,"b":2},{"_id":2,"a":1,"b":1},{"_id":3,"a":0,"b":5},{"_id":4,"a":1}]"#,
        r#"{"a":-1,"b":1}"#,
        &[4, 2, 1, 3],
    ),
    (
        r#"[{"_id":1,"x":{"y":3}},{"_id":2,"x":{"y":1}},{"_id":3,"x":[{"y":2},{"y":0}]}]"#,
        r#"{"x.y":1}"#,
        &[3, 2, 1],
    ),
    (
        r#"[{"_id":1,"x":{"y":3}},{"_id":2,"x":{"y":1}},{"_id":3,"x":[{"y":2},{"y":0}]}]"#,
        r#"{"x.y":-1}"#,
        &[1, 3, 2],
    ),
    (
        r#"[{"_id":1,"n":2.5},{"_id":2,"n":{"$numberLong":"2"}},{"_id":3,"n":{"$numberDecimal":"2.25"}},{"_id":4,"n":2}]"#,
        r#"{"n":1}"#,
        &[2, 4, 3, 1],
    ),
    (
        r#"[{"_id":1,"s":"b"},{"_id":2,"s":"B"},{"_id":3,"s":"a"},{"_id":4,"s":"ab"}]"#,
        r#"{"s":1}"#,
        &[2, 3, 4, 1],
    ),
];

#[test]
fn sort_corpus() {
    for (docs, spec, want) in SORTS {
        let s = Sort::parse(&codec::parse_json(spec.as_bytes()).expect("sort parses"))
            .expect("valid sort");
        let mut keyed: Vec<(Vec<Bson>, i32)> =
            load(docs).iter().map(|d| (s.key(d), id_of(d))).collect();
        keyed.sort_by(|a, b| s.compare(&a.0, &b.0));
        let got: Vec<i32> = keyed.iter().map(|k| k.1).collect();
        assert_eq!(got, *want, "sort {spec}");
    }
}
