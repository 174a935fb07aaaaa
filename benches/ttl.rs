//! TTL-index workloads on one shard's wheel: index a document, touch it (the LRU pattern),
//! and sweep expired documents. Figures are per document.

use bson::{rawdoc, DateTime};
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use std::hint::black_box;
use tidecache::documents::ttl::TtlShard;

const NOW: i64 = 1_700_000_000_000;
const N: u32 = 100_000;

/// A shard holding `N` sessions with access times spread over the last five minutes.
fn loaded() -> TtlShard {
    let mut ttl = TtlShard::new("accessTime", 300, NOW);
    for slot in 0..N {
        let at = NOW - (slot as i64 * 7919) % 300_000;
        ttl.on_insert(slot, &rawdoc! {"accessTime": DateTime::from_millis(at)});
    }
    ttl
}

fn ttl(c: &mut Criterion) {
    let mut g = c.benchmark_group("ttl");
    g.throughput(Throughput::Elements(N as u64));
    let docs: Vec<_> = (0..N)
        .map(|slot| rawdoc! {"accessTime": DateTime::from_millis(NOW - (slot as i64 % 300) * 1000)})
        .collect();
    g.bench_function("insert 100k", |b| {
        b.iter_batched(
            || TtlShard::new("accessTime", 300, NOW),
            |mut ttl| {
                for (slot, doc) in docs.iter().enumerate() {
                    ttl.on_insert(slot as u32, doc);
                }
                ttl
            },
            BatchSize::LargeInput,
        )
    });
    let touched: Vec<_> = (0..N)
        .map(|slot| rawdoc! {"accessTime": DateTime::from_millis(NOW + slot as i64)})
        .collect();
    g.bench_function("touch 100k", |b| {
        b.iter_batched(
            loaded,
            |mut ttl| {
                for (slot, doc) in touched.iter().enumerate() {
                    ttl.on_insert(slot as u32, doc);
                }
                ttl
            },
            BatchSize::LargeInput,
        )
    });
    g.bench_function("sweep 100k expired", |b| {
        b.iter_batched(
            loaded,
            |mut ttl| {
                let mut out = Vec::with_capacity(1024);
                let mut n = 0;
                while ttl.drain_due(NOW + 3_600_000, 1024, &mut out) {
                    n += out.len();
                    out.clear();
                }
                black_box(n + out.len())
            },
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

criterion_group!(benches, ttl);
criterion_main!(benches);
