//! Heap-size estimates shared by the key space and the document store.

/// The bytes the allocator (mimalloc, the binary's global allocator) really hands out for
/// a request of `n` bytes: 8, then 16-byte steps up to 64 (mimalloc keeps 16-byte
/// alignment, so a 56-byte request takes 64), then four size classes per doubling (80, 96,
/// 112, 128, 160, ...) up to 512 KiB, 64 KiB slices beyond; 0 for empty. Counting the class
/// rather than a rougher rounding keeps `used_memory`, and so what `maxmemory` admits, to
/// what is really allocated (a 100-byte value is 112 bytes, not 128). A unit test holds
/// this to mimalloc's own `mi_usable_size`.
pub fn alloc_size(n: usize) -> usize {
    // Beyond mimalloc's large-object limit a block is its own run of 64 KiB slices.
    const HUGE: usize = 512 << 10;
    const SLICE: usize = 64 << 10;
    if n == 0 {
        return 0;
    }
    if n > HUGE {
        return n.div_ceil(SLICE) * SLICE;
    }
    let words = n.div_ceil(8);
    if words == 1 {
        return 8;
    }
    if words <= 8 {
        return words.div_ceil(2) * 16;
    }
    // mimalloc's `mi_bin`: the class of `words` is bounded by the next multiple of a
    // quarter of the power of two below `words - 1`.
    let b = usize::BITS - 1 - (words - 1).leading_zeros();
    let step = 1usize << (b - 2);
    words.div_ceil(step) * step * 8
}

/// Asks the CPU to bring the cache line of `r` into its caches, without waiting for it:
/// loads issued back to back this way overlap their cache misses, where loads made by the
/// code that needs them each wait for the last (see `Store::warm`). A hint only: it changes
/// no memory and cannot fault.
#[inline(always)]
pub fn prefetch<T>(r: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: PREFETCHT0 reads nothing architecturally and never faults, whatever the
    // address; `r` is a live reference anyway. SSE is part of the x86_64 baseline.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>((r as *const T).cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = r;
}

#[cfg(test)]
mod tests {
    use super::alloc_size;

    #[test]
    fn mimalloc_size_classes() {
        let cases = [
            (0, 0),
            (1, 8),
            (8, 8),
            (9, 16),
            (17, 32),
            (33, 48),
            (56, 64),
            (64, 64),
            (65, 80),
            (80, 80),
            (81, 96),
            (100, 112),
            (112, 112),
            (113, 128),
            (129, 160),
            (200, 224),
            (257, 320),
            (1000, 1024),
            (1025, 1280),
        ];
        for (n, want) in cases {
            assert_eq!(alloc_size(n), want, "{n}");
        }
        // Monotone, never below the request, at most a quarter over it past 64 bytes.
        let mut prev = 0;
        for n in 1..100_000 {
            let s = alloc_size(n);
            assert!(s >= n && s >= prev, "{n}");
            assert!(n <= 64 || s <= n + n / 4 + 8, "{n} -> {s}");
            prev = s;
        }
    }

    /// The model against the allocator itself: what mimalloc reports usable for a byte
    /// slice of each size (alignment 1, as a `Box<[u8]>` asks for), once its size class has
    /// a page in use (the first block of a fresh page may take a slower path that
    /// over-allocates; the steady state is what the estimate describes).
    #[test]
    fn matches_mimallocs_usable_size() {
        use std::alloc::{GlobalAlloc, Layout};
        let m = mimalloc::MiMalloc;
        for n in (1..=4096).chain([
            10_000, 65_536, 100_000, 300_000, 524_288, 589_840, 4_718_608,
        ]) {
            let layout = Layout::from_size_align(n, 1).expect("layout");
            // SAFETY: non-zero layouts; every block is freed once with its own layout.
            unsafe {
                let blocks: Vec<*mut u8> = (0..4).map(|_| m.alloc(layout)).collect();
                assert!(blocks.iter().all(|p| !p.is_null()));
                let usable = m.usable_size(blocks[3]);
                for p in blocks {
                    m.dealloc(p, layout);
                }
                if n <= 512 << 10 {
                    assert_eq!(alloc_size(n), usable, "request of {n} bytes");
                } else {
                    // Huge blocks also carry their page's header slices: within 5%.
                    let (a, u) = (alloc_size(n) as f64, usable as f64);
                    assert!((a - u).abs() <= 0.05 * u, "request of {n}: {a} vs {u}");
                }
            }
        }
    }
}
