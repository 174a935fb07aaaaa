//! MEMORY STATS, MEMORY DOCTOR and MEMORY MALLOC-STATS (their rows are in `server.rs` with
//! MEMORY USAGE): Redis 7.0's fields and texts, from the counting allocator (`util::alloc`:
//! every live block's size class, what `used_memory` is) and the key space's counts.
//!
//! What tidecache cannot see is said so rather than made up: mimalloc's page-level figures
//! are not read, so `allocator.allocated` and `allocator.active` are both the counted
//! total (no allocator fragmentation is claimed) and `allocator.resident` is the process's
//! resident set; there is no replication, cluster bus or AOF rewrite buffer, so those are
//! 0. A database's `overhead.hashtable.main` is its keys' entries (one boxed entry each)
//! and table slots (a pointer each), `overhead.hashtable.expires` their timing-wheel
//! entries; both are also in `dataset.bytes`, the key space's and collections' own count
//! (INFO's `used_memory_dataset`); `overhead.total` is the rest of what the process holds.

use crate::commands::args::Args;
use crate::commands::spec::CmdResult;
use crate::commands::Ctx;
use crate::protocol::Reply;
use crate::state::Server;
use bytes::Bytes;

/// Bytes of one timing-wheel entry (item, time, links, place), what a deadline costs.
const WHEEL_ENTRY: usize = 32;

/// INFO memory's fields that MEMORY STATS shares with it, so both say the same.
pub fn info_fields(server: &Server) -> Vec<(&'static str, String)> {
    let m = Overhead::of(server);
    vec![
        ("used_memory_peak", m.peak.to_string()),
        ("used_memory_peak_perc", format!("{:.2}%", m.peak_perc)),
        ("used_memory_overhead", m.overhead_total.to_string()),
        ("used_memory_startup", m.startup.to_string()),
        (
            "used_memory_dataset_perc",
            format!("{:.2}%", m.dataset_perc),
        ),
    ]
}

/// Redis's `struct redisMemOverhead`, for this server.
struct Overhead {
    peak: u64,
    total: u64,
    startup: u64,
    clients_normal: u64,
    /// The connections of replicas served by this server: their input buffer (the
    /// acknowledgements) and the chunk of the stream or snapshot being sent.
    clients_slaves: u64,
    lua_caches: u64,
    functions_caches: u64,
    /// (db, main table overhead, expires overhead) of each non-empty database.
    dbs: Vec<(usize, u64, u64)>,
    overhead_total: u64,
    keys: u64,
    bytes_per_key: u64,
    dataset: u64,
    dataset_perc: f32,
    peak_perc: f32,
    rss: u64,
    clients: u64,
    scripts: u64,
}

impl Overhead {
    fn of(server: &Server) -> Overhead {
        let total = server.used_memory();
        let peak = crate::util::alloc::sample_peak().max(total);
        let startup = crate::util::alloc::startup();
        let handles = server.clients.all();
        let replicas: Vec<u64> = crate::state::replication::repl()
            .replicas
            .lock()
            .iter()
            .map(|r| r.id)
            .collect();
        let (mut clients_normal, mut clients_slaves) = (0u64, 0u64);
        for h in &handles {
            let mem = h.mem_fields(0).tot_mem as u64;
            if replicas.contains(&h.id) {
                clients_slaves += mem;
            } else {
                clients_normal += mem;
            }
        }
        let (scripts, lua_caches) = crate::commands::scripting::cache_stats();
        let (_, _, functions_caches, _) = crate::commands::scripting::function_stats();
        let entry = crate::util::mem::alloc_size(std::mem::size_of::<crate::store::Entry>()) + 8;
        let mut dbs = Vec::new();
        let mut keys = 0u64;
        for (db, (n, volatile, _)) in server.store.keyspace_info().into_iter().enumerate() {
            if n == 0 {
                continue;
            }
            keys += n as u64;
            dbs.push((db, (n * entry) as u64, (volatile * WHEEL_ENTRY) as u64));
        }
        // The data set is what the key space and the collections count as theirs (INFO's
        // `used_memory_dataset`, what maxmemory is held to), their tables included, so
        // the per-database figures above are part of it; everything else the process holds
        // is overhead. Redis derives it the other way round, from the parts it names, and
        // counts what it does not name as data.
        let dataset = (server.store.used_bytes() as u64).min(total);
        let overhead_total = total - dataset;
        let net = total.saturating_sub(startup).max(1);
        Overhead {
            peak,
            total,
            startup,
            clients_normal,
            clients_slaves,
            lua_caches,
            functions_caches,
            dbs,
            overhead_total,
            keys,
            bytes_per_key: net.checked_div(keys).unwrap_or(0),
            dataset,
            // Redis computes these in `float`: the same precision shows in the reply.
            dataset_perc: dataset as f32 * 100.0 / net as f32,
            peak_perc: total as f32 * 100.0 / peak.max(1) as f32,
            rss: crate::util::proc::rss_bytes(),
            clients: handles.len() as u64,
            scripts,
        }
    }

    /// Redis's `total_frag` (RSS over used memory) and its bytes.
    fn frag(&self) -> (f32, i64) {
        (
            self.rss as f32 / self.total.max(1) as f32,
            self.rss as i64 - self.total as i64,
        )
    }
}

fn int(v: u64) -> Reply {
    Reply::Int(v as i64)
}

/// A `float` figure as Redis replies it (`addReplyDouble` of a float).
fn float(v: f32) -> Reply {
    Reply::Double(f64::from(v))
}

pub fn memory_stats(ctx: &mut Ctx<'_>, _args: &mut Args<'_>) -> CmdResult {
    let m = Overhead::of(ctx.server);
    let (frag, frag_bytes) = m.frag();
    let field = |k: &str, v: Reply| (Reply::bulk_str(k), v);
    let mut out = vec![
        field("peak.allocated", int(m.peak)),
        field("total.allocated", int(m.total)),
        field("startup.allocated", int(m.startup)),
        field(
            "replication.backlog",
            int(crate::store::journal::feed().map_or(0, |f| f.allocated() as u64)),
        ),
        field("clients.slaves", int(m.clients_slaves)),
        field("clients.normal", int(m.clients_normal)),
        field("cluster.links", int(0)),
        field(
            "aof.buffer",
            int(crate::store::journal::journal()
                .filter(|_| crate::store::journal::enabled())
                .map_or(0, |j| j.buffered().1 as u64)),
        ),
        field("lua.caches", int(m.lua_caches)),
        field("functions.caches", int(m.functions_caches)),
    ];
    for (db, main, expires) in &m.dbs {
        out.push((
            Reply::bulk(Bytes::from(format!("db.{db}"))),
            Reply::Map(vec![
                field("overhead.hashtable.main", int(*main)),
                field("overhead.hashtable.expires", int(*expires)),
                field("overhead.hashtable.slot-to-keys", int(0)),
            ]),
        ));
    }
    // Allocator figures: see the module's header.
    let (allocated, active, resident) = (m.total, m.total, m.rss);
    let rss_ratio = resident as f32 / active.max(1) as f32;
    out.extend([
        field("overhead.total", int(m.overhead_total)),
        field("keys.count", int(m.keys)),
        field("keys.bytes-per-key", int(m.bytes_per_key)),
        field("dataset.bytes", int(m.dataset)),
        field("dataset.percentage", float(m.dataset_perc)),
        field("peak.percentage", float(m.peak_perc)),
        field("allocator.allocated", int(allocated)),
        field("allocator.active", int(active)),
        field("allocator.resident", int(resident)),
        field("allocator-fragmentation.ratio", float(1.0)),
        field("allocator-fragmentation.bytes", int(0)),
        field("allocator-rss.ratio", float(rss_ratio)),
        field(
            "allocator-rss.bytes",
            Reply::Int(resident as i64 - active as i64),
        ),
        field("rss-overhead.ratio", float(1.0)),
        field("rss-overhead.bytes", int(0)),
        field("fragmentation", float(frag)),
        field("fragmentation.bytes", Reply::Int(frag_bytes)),
    ]);
    Ok(Reply::Map(out))
}

/// Redis's `getMemoryDoctorReport`, its checks and its texts (src/object.c of 7.0.15).
pub fn memory_doctor(ctx: &mut Ctx<'_>, _args: &mut Args<'_>) -> CmdResult {
    Ok(Reply::Verbatim(Bytes::from(doctor_report(&Overhead::of(
        ctx.server,
    )))))
}

fn doctor_report(m: &Overhead) -> String {
    let (frag, frag_bytes) = m.frag();
    let mut issues: Vec<&str> = Vec::new();
    let empty = m.total < 5 * 1024 * 1024;
    if !empty {
        if m.peak as f32 / m.total as f32 > 1.5 {
            issues.push(" * Peak memory: In the past this instance used more than 150% the memory that is currently using. The allocator is normally not able to release memory after a peak, so you can expect to see a big fragmentation ratio, however this is actually harmless and is only due to the memory peak, and if the Redis instance Resident Set Size (RSS) is currently bigger than expected, the memory will be used as soon as you fill the Redis instance with more data. If the memory peak was only occasional and you want to try to reclaim memory, please try the MEMORY PURGE command, otherwise the only other option is to shutdown and restart the instance.\n\n");
        }
        if frag > 1.4 && frag_bytes > 10 << 20 {
            issues.push(" * High total RSS: This instance has a memory fragmentation and RSS overhead greater than 1.4 (this means that the Resident Set Size of the Redis process is much larger than the sum of the logical allocations Redis performed). This problem is usually due either to a large peak memory (check if there is a peak memory entry above in the report) or may result from a workload that causes the allocator to fragment memory a lot. If the problem is a large peak memory, then there is no issue. Otherwise, make sure you are using the Jemalloc allocator and not the default libc malloc. Note: The currently used allocator is \"mimalloc\".\n\n");
        }
        // The allocator's own fragmentation and RSS overheads are not measured here (see
        // the module's header), so their two checks never fire.
        if m.clients_normal / m.clients.max(1) > 1024 * 200 {
            issues.push(" * Big client buffers: The clients output buffers in this instance are greater than 200K per client (on average). This may result from different causes, like Pub/Sub clients subscribed to channels bot not receiving data fast enough, so that data piles on the Redis instance output buffer, or clients sending commands with large replies or very large sequences of commands in the same pipeline. Please use the CLIENT LIST command in order to investigate the issue if it causes problems in your instance, or to understand better why certain clients are using a big amount of memory.\n\n");
        }
        if m.scripts > 1000 {
            issues.push(" * Many scripts: There seem to be many cached scripts in this instance (more than 1000). This may be because scripts are generated and `EVAL`ed, instead of being parameterized (with KEYS and ARGV), `SCRIPT LOAD`ed and `EVALSHA`ed. Unless `SCRIPT FLUSH` is called periodically, the scripts' caches may end up consuming most of your memory.\n\n");
        }
    }
    if empty {
        "Hi Sam, this instance is empty or is using very little memory, my issues detector can't be used in these conditions. Please, leave for your mission on Earth and fill it with some data. The new Sam and I will be back to our programming as soon as I finished rebooting.\n".into()
    } else if issues.is_empty() {
        "Hi Sam, I can't find any memory issue in your instance. I can only account for what occurs on this base.\n".into()
    } else {
        let mut s = String::from(
            "Sam, I detected a few issues in this Redis instance memory implants:\n\n",
        );
        for i in issues {
            s.push_str(i);
        }
        s.push_str("I'm here to keep you safe, Sam. I want to help you.\n");
        s
    }
}

/// Redis built without jemalloc answers this; mimalloc's statistics are not exposed.
pub fn memory_malloc_stats(_ctx: &mut Ctx<'_>, _args: &mut Args<'_>) -> CmdResult {
    Ok(Reply::bulk_str(
        "Stats not supported for the current allocator",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(total: u64, peak: u64, rss: u64) -> Overhead {
        Overhead {
            peak,
            total,
            startup: 1 << 20,
            clients_normal: 20_000,
            clients_slaves: 0,
            lua_caches: 0,
            functions_caches: 0,
            dbs: Vec::new(),
            overhead_total: 0,
            keys: 0,
            bytes_per_key: 0,
            dataset: 0,
            dataset_perc: 0.0,
            peak_perc: 0.0,
            rss,
            clients: 1,
            scripts: 0,
        }
    }

    #[test]
    fn doctor_speaks_as_redis() {
        assert!(doctor_report(&sample(1 << 20, 1 << 20, 8 << 20))
            .starts_with("Hi Sam, this instance is empty"));
        assert!(doctor_report(&sample(100 << 20, 100 << 20, 110 << 20))
            .starts_with("Hi Sam, I can't find any memory issue"));
        let r = doctor_report(&sample(100 << 20, 200 << 20, 300 << 20));
        assert!(r.starts_with("Sam, I detected a few issues"), "{r}");
        assert!(
            r.contains(" * Peak memory:") && r.contains(" * High total RSS:"),
            "{r}"
        );
        assert!(r.ends_with("I'm here to keep you safe, Sam. I want to help you.\n"));
    }
}
