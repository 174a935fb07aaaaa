//! Documents: matching a parsed filter against one document (decoded from its stored raw
//! BSON, as a collection scan does), and DOC.INSERT / DOC.FIND by `_id` through the command
//! layer without the socket.

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use tidecache::commands::{dispatch, Ctx};
use tidecache::config::Config;
use tidecache::documents::{codec, collection, query};
use tidecache::state::client::ClientState;
use tidecache::state::Server;

const DOC: &str = r#"{"_id":12345,"name":"journal","qty":25,"tags":["blank","red"],"size":{"h":14,"w":21,"uom":"cm"},"instock":[{"warehouse":"A","qty":5},{"warehouse":"C","qty":15}]}"#;

fn matching(c: &mut Criterion) {
    let doc = codec::parse_json(DOC.as_bytes()).expect("static document");
    let raw = codec::to_raw(&doc, 16 << 20).expect("encodes");
    let mut g = c.benchmark_group("match");
    for (name, filter) in [
        ("eq_top_level", r#"{"qty":25}"#),
        ("dotted_range", r#"{"size.h":{"$lt":15},"size.uom":"cm"}"#),
        (
            "array_elem_match",
            r#"{"instock":{"$elemMatch":{"qty":{"$gt":10},"warehouse":"C"}}}"#,
        ),
        (
            "regex_in_or",
            r#"{"$or":[{"name":{"$regex":"^jo"}},{"tags":{"$in":["x","y"]}}]}"#,
        ),
    ] {
        let node = query::parse(&codec::parse_json(filter.as_bytes()).expect("filter"))
            .expect("valid filter");
        g.bench_function(format!("{name}_decoded"), |b| {
            b.iter(|| black_box(node.matches(black_box(&doc))))
        });
        // What a collection scan does: decode only what the filter's paths reach.
        let fields = node.field_paths();
        g.bench_function(format!("{name}_scan_from_raw"), |b| {
            b.iter(|| black_box(collection::matches(&node, &fields, black_box(&raw))))
        });
        g.bench_function(format!("{name}_full_decode"), |b| {
            b.iter(|| {
                let d = bson::Document::try_from(black_box(&raw)).expect("stored document");
                black_box(node.matches(&d))
            })
        });
    }
    g.finish();
}

fn commands(c: &mut Criterion) {
    let server = Server::new(Config::default());
    let addr = "127.0.0.1:1".parse().expect("static address");
    let mut client = ClientState::new(server.clients.register(addr, addr), true);
    let mut g = c.benchmark_group("doc_commands");
    let mut i: u64 = 0;
    g.bench_function("insert", |b| {
        b.iter(|| {
            i += 1;
            let args = [
                Bytes::from_static(b"DOC.INSERT"),
                Bytes::from_static(b"bench"),
                Bytes::from(format!(r#"{{"_id":{i},"a":1,"b":"x","c":2.5,"d":true}}"#)),
            ];
            let mut ctx = Ctx {
                server: &server,
                client: &mut client,
            };
            black_box(dispatch(&mut ctx, &args))
        })
    });
    let n = i.max(1);
    let mut j: u64 = 0;
    g.bench_function("find_by_id", |b| {
        b.iter(|| {
            j = j % n + 1;
            let args = [
                Bytes::from_static(b"DOC.FIND"),
                Bytes::from_static(b"bench"),
                Bytes::from(format!(r#"{{"_id":{j}}}"#)),
            ];
            let mut ctx = Ctx {
                server: &server,
                client: &mut client,
            };
            black_box(dispatch(&mut ctx, &args))
        })
    });
    g.finish();
}

criterion_group!(benches, matching, commands);
criterion_main!(benches);
