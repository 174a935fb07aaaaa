//! OBJECT and MEMORY USAGE: introspection of single keys (their table entries are in
//! `server.rs` with the other server commands).

use crate::commands::args::{Args, CommandError};
use crate::commands::spec::CmdResult;
use crate::commands::{help_reply, Ctx};
use crate::protocol::Reply;
use crate::store::eviction::{self, idle_ms, lfu_counter};
use crate::store::Entry;

/// Looks `key` up without touching its access clock (OBJECT must not change what it
/// reports).
fn with_entry(ctx: &mut Ctx<'_>, key: &[u8], f: impl FnOnce(&Entry) -> Reply) -> CmdResult {
    Ok(ctx
        .server
        .store
        .with_key(ctx.client.db, key, |ks, h| match ks.peek(h, key) {
            None => Reply::Nil,
            Some(e) => f(e),
        }))
}

pub fn object_encoding(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    with_entry(ctx, args.next_key()?, |e| {
        Reply::bulk_str(e.value.encoding())
    })
}

/// OBJECT REFCOUNT: values are never shared between keys here (Redis shares the integers
/// 0-9999 and reports them with a huge count), so every value's count is 1.
pub fn object_refcount(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    with_entry(ctx, args.next_key()?, |_| Reply::Int(1))
}

pub fn object_idletime(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let lfu = eviction::policy().is_lfu();
    with_entry(ctx, args.next_key()?, |e| {
        if lfu {
            return Reply::error("ERR An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.");
        }
        Reply::Int((idle_ms(e.access()) / 1000) as i64)
    })
}

pub fn object_freq(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let lfu = eviction::policy().is_lfu();
    with_entry(ctx, args.next_key()?, |e| {
        if !lfu {
            return Reply::error("ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.");
        }
        Reply::Int(lfu_counter(e.access()) as i64)
    })
}

pub fn object_help(_ctx: &mut Ctx<'_>, _args: &mut Args<'_>) -> CmdResult {
    Ok(help_reply(
        "object",
        &[
            "ENCODING <key>",
            "    Return the kind of internal representation used in order to store the value",
            "    associated with a <key>.",
            "FREQ <key>",
            "    Return the access frequency index of the <key>. The returned integer is",
            "    proportional to the logarithm of the recent access frequency of the key.",
            "IDLETIME <key>",
            "    Return the idle time of the <key>, that is the approximated number of",
            "    seconds elapsed since the last access to the key.",
            "REFCOUNT <key>",
            "    Return the number of references of the value associated with the specified",
            "    <key>.",
        ],
    ))
}

/// MEMORY USAGE key [SAMPLES n]: the same per-key estimate the maxmemory accounting uses
/// (exact for hashes: their byte count is kept up to date, so SAMPLES changes nothing).
pub fn memory_usage(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let key = args.next_key()?;
    match args.len() {
        0 => {}
        2 if args.eat("SAMPLES") => {
            if args.next_i64()? < 0 {
                return Err(CommandError::not_integer());
            }
        }
        _ => return Err(CommandError::syntax()),
    }
    with_entry(ctx, key, |e| Reply::Int(e.mem() as i64))
}

pub fn memory_help(_ctx: &mut Ctx<'_>, _args: &mut Args<'_>) -> CmdResult {
    Ok(help_reply(
        "memory",
        &[
            "DOCTOR",
            "    Return memory problems reports.",
            "MALLOC-STATS",
            "    Return internal statistics report from the memory allocator.",
            "STATS",
            "    Return information about the memory usage of the server.",
            "USAGE <key> [SAMPLES <count>]",
            "    Return memory in bytes used by <key> and its value. Nested values are",
            "    sampled up to <count> times (default: 5, 0 means sample all).",
        ],
    ))
}
