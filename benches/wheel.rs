//! The timing wheel as the key space uses it: per-entry cost of insert, reschedule (a TTL
//! moved), and expiry (drain of due entries), at 100 000 live entries.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use std::hint::black_box;
use tidecache::wheel::Wheel;

const N: usize = 100_000;
const START: i64 = 1_700_000_000_000;

/// Deadlines spread over the next hour, like keys set with EX 1..3600.
fn deadline(i: usize) -> i64 {
    START + 1 + ((i as i64).wrapping_mul(2_654_435_761) % 3_600_000).abs()
}

fn filled() -> (Wheel<u64>, Vec<tidecache::wheel::EntryId>) {
    let mut w = Wheel::new(1, START);
    let ids = (0..N).map(|i| w.insert(deadline(i), i as u64)).collect();
    (w, ids)
}

fn wheel(c: &mut Criterion) {
    let mut g = c.benchmark_group("wheel");
    g.throughput(Throughput::Elements(N as u64));
    g.bench_function("insert_100k", |b| {
        b.iter_batched(
            || Wheel::<u64>::new(1, START),
            |mut w| {
                for i in 0..N {
                    w.insert(deadline(i), i as u64);
                }
                w
            },
            BatchSize::LargeInput,
        )
    });
    g.bench_function("reschedule_100k", |b| {
        b.iter_batched(
            filled,
            |(mut w, ids)| {
                for (i, id) in ids.iter().enumerate() {
                    w.reschedule(*id, deadline(i + 17));
                }
                (w, ids)
            },
            BatchSize::LargeInput,
        )
    });
    g.bench_function("expire_100k", |b| {
        b.iter_batched(
            filled,
            |(mut w, _ids)| {
                let mut out = Vec::with_capacity(256);
                let mut n = 0;
                while {
                    out.clear();
                    let more = w.drain_due(START + 3_600_001, 256, &mut out);
                    n += out.len();
                    more
                } {}
                black_box(n)
            },
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

criterion_group!(benches, wheel);
criterion_main!(benches);
