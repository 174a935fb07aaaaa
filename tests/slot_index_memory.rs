//! What the cluster slot index costs per key, measured with the binary's own counting
//! allocator (`util::alloc::Counting`, the `used_memory` figure): 1M keys written into a
//! store in cluster mode and into a standalone one, the difference per key. Redis 7.0
//! spends 16 bytes a key on it (two pointers in each dict entry's metadata); the issue's
//! bound is the same.

use tidecache::store::{Store, Ttl, Value};
use tidecache::util::alloc;

#[global_allocator]
static GLOBAL: alloc::Counting = alloc::Counting;

const KEYS: usize = 1_000_000;
/// The shards of a 2-core machine (the server's default is twice the cores).
const SHARDS: usize = 4;

/// Bytes held after writing `KEYS` keys named by `name` into database 0 of a fresh store.
fn bytes_for(cluster: bool, name: impl Fn(usize) -> String) -> u64 {
    let base = alloc::allocated().expect("the counting allocator is installed");
    let store = Store::with_slot_index(SHARDS, 16, cluster);
    for i in 0..KEYS {
        let key = name(i);
        store.with_key(0, key.as_bytes(), |ks, h| {
            ks.set(h, key.as_bytes(), Value::string(b"value"), Ttl::Clear)
        });
    }
    assert_eq!(store.dbsize(0), KEYS);
    let used = alloc::allocated().expect("counted") - base;
    // What the store counts in its own books (INFO's used_memory without the allocator)
    // follows the index too.
    let books = store.used_bytes() as u64;
    drop(store);
    println!(
        "  {} store: {used} bytes allocated, {books} in its books",
        if cluster { "cluster" } else { "standalone" }
    );
    used
}

fn per_key(label: &str, name: impl Fn(usize) -> String + Copy) -> f64 {
    // The tables' sizes vary a little with each store's random hasher (a few hundredths of
    // a byte per key).
    let plain = bytes_for(false, name);
    let cluster = bytes_for(true, name);
    let per_key = (cluster as f64 - plain as f64) / KEYS as f64;
    println!("{label}: slot index {per_key:.2} bytes per key ({KEYS} keys, {SHARDS} shards)");
    per_key
}

#[test]
fn slot_index_costs_at_most_16_bytes_a_key() {
    alloc::activate();
    // Keys spread over every slot, as redis-benchmark's `key:000000123456`.
    let spread = per_key("1M keys over all slots", |i| format!("key:{i:012}"));
    assert!(spread <= 16.0, "{spread:.2} bytes per key");
    // Every key in one slot (one hash tag): the slot is split into short parts.
    let tagged = per_key("1M keys in one slot", |i| format!("{{user}}:{i}"));
    assert!(tagged <= 16.0, "{tagged:.2} bytes per key");
}
