//! Heap-size estimates shared by the key space and the document store.

/// Rounds a heap allocation to the allocator's size classes (roughly), 0 for empty.
pub fn alloc_size(n: usize) -> usize {
    match n {
        0 => 0,
        1..=64 => n.div_ceil(8) * 8,
        65..=512 => n.div_ceil(32) * 32,
        _ => n.div_ceil(256) * 256,
    }
}
