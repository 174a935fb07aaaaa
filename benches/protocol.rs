//! Frame parse + dispatch + reply encoding for a pipelined batch, the per-request work of the
//! connection loop without the socket.

use bytes::BytesMut;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::hint::black_box;
use tidecache::commands::{dispatch, Ctx};
use tidecache::config::Config;
use tidecache::protocol::{parse_request, ParseLimits, ParseState};
use tidecache::state::client::ClientState;
use tidecache::state::Server;

fn batch(n: usize) -> Vec<u8> {
    let mut v = Vec::new();
    for i in 0..n {
        match i % 3 {
            0 => v.extend_from_slice(b"*1\r\n$4\r\nPING\r\n"),
            1 => v.extend_from_slice(b"*2\r\n$4\r\nECHO\r\n$16\r\n0123456789abcdef\r\n"),
            _ => v.extend_from_slice(b"*3\r\n$3\r\nSET\r\n$8\r\nkey:1234\r\n$3\r\nxyz\r\n"),
        }
    }
    v
}

fn pipeline(c: &mut Criterion) {
    let server = Server::new(Config::default());
    let addr = "127.0.0.1:1".parse().expect("static address");
    let mut client = ClientState::new(server.clients.register(addr, addr), true);
    let limits = ParseLimits {
        max_bulk_len: 512 << 20,
        unauthenticated: false,
    };
    const N: usize = 300;
    let input = batch(N);

    let mut g = c.benchmark_group("pipeline");
    g.throughput(Throughput::Elements(N as u64));
    g.bench_function("parse_only_300", |b| {
        b.iter(|| {
            let mut buf = BytesMut::from(&input[..]);
            let mut st = ParseState::default();
            let mut n = 0;
            while let Ok(Some(args)) = parse_request(&mut buf, &mut st, limits) {
                n += args.len();
            }
            black_box(n)
        })
    });
    g.bench_function("parse_dispatch_encode_300", |b| {
        let mut out = BytesMut::with_capacity(64 * 1024);
        b.iter(|| {
            let mut buf = BytesMut::from(&input[..]);
            let mut st = ParseState::default();
            out.clear();
            while let Ok(Some(args)) = parse_request(&mut buf, &mut st, limits) {
                let mut ctx = Ctx {
                    server: &server,
                    client: &mut client,
                };
                dispatch(&mut ctx, &args).encode(&mut out, false);
            }
            black_box(out.len())
        })
    });
    g.finish();
}

criterion_group!(benches, pipeline);
criterion_main!(benches);
