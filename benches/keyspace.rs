//! GET and SET through `dispatch` (the per-request work of the connection loop after parsing),
//! on a key space of 100 000 keys, with and without deadlines.

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::hint::black_box;
use tidecache::commands::{dispatch, Ctx};
use tidecache::config::Config;
use tidecache::protocol::Reply;
use tidecache::state::client::ClientState;
use tidecache::state::Server;

const KEYS: usize = 100_000;

fn args(parts: &[&[u8]]) -> Vec<Bytes> {
    parts.iter().map(|p| Bytes::copy_from_slice(p)).collect()
}

fn keyspace(c: &mut Criterion) {
    let server = Server::new(Config::default());
    let addr = "127.0.0.1:1".parse().expect("static address");
    let mut client = ClientState::new(server.clients.register(addr, addr), true);
    let value = [b'x'; 32];
    let keys: Vec<Vec<u8>> = (0..KEYS)
        .map(|i| format!("key:{i:08}").into_bytes())
        .collect();
    let get_cmds: Vec<Vec<Bytes>> = keys.iter().map(|k| args(&[b"GET", k])).collect();
    let set_cmds: Vec<Vec<Bytes>> = keys.iter().map(|k| args(&[b"SET", k, &value])).collect();
    let setex_cmds: Vec<Vec<Bytes>> = keys
        .iter()
        .map(|k| args(&[b"SET", k, &value, b"EX", b"3600"]))
        .collect();
    let mut run = |cmd: &[Bytes]| -> Reply {
        let mut ctx = Ctx {
            server: &server,
            client: &mut client,
        };
        dispatch(&mut ctx, cmd)
    };
    for cmd in &set_cmds {
        run(cmd);
    }

    let mut g = c.benchmark_group("keyspace");
    g.throughput(Throughput::Elements(1));
    let mut i = 0;
    g.bench_function("get_hit", |b| {
        b.iter(|| {
            i = (i + 7919) % KEYS;
            black_box(run(&get_cmds[i]))
        })
    });
    // The same over 1 000 keys that stay in cache: the cost of the code rather than of DRAM
    // latency on random keys.
    g.bench_function("get_hit_hot1000", |b| {
        b.iter(|| {
            i = (i + 7919) % 1000;
            black_box(run(&get_cmds[i]))
        })
    });
    g.bench_function("set_overwrite_hot1000", |b| {
        b.iter(|| {
            i = (i + 7919) % 1000;
            black_box(run(&set_cmds[i]))
        })
    });
    let miss = args(&[b"GET", b"no-such-key"]);
    g.bench_function("get_miss", |b| b.iter(|| black_box(run(&miss))));
    g.bench_function("set_overwrite", |b| {
        b.iter(|| {
            i = (i + 7919) % KEYS;
            black_box(run(&set_cmds[i]))
        })
    });
    g.bench_function("set_ex_overwrite", |b| {
        b.iter(|| {
            i = (i + 7919) % KEYS;
            black_box(run(&setex_cmds[i]))
        })
    });
    g.bench_function("get_hit_with_deadline", |b| {
        b.iter(|| {
            i = (i + 7919) % KEYS;
            black_box(run(&get_cmds[i]))
        })
    });
    let incr = args(&[b"INCR", b"counter"]);
    g.bench_function("incr", |b| b.iter(|| black_box(run(&incr))));
    g.finish();
}

criterion_group!(benches, keyspace);
criterion_main!(benches);
