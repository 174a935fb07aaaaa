//! OBJECT and MEMORY USAGE: introspection of single keys (their table entries are in
//! `server.rs` with the other server commands).

use crate::commands::{help_reply, is, syntax_error, Ctx};
use crate::protocol::Reply;
use crate::store::eviction::{self, idle_ms, lfu_counter};
use crate::store::Entry;
use crate::util::num::{parse_i64, NOT_AN_INTEGER};
use bytes::Bytes;

/// Looks up `key` without touching its access clock (OBJECT must not change what it reports).
fn with_entry(ctx: &mut Ctx<'_>, key: &Bytes, f: impl FnOnce(&Entry) -> Reply) -> Reply {
    ctx.server
        .store
        .with_key(ctx.client.db, key, |ks, h| match ks.peek(h, key) {
            None => Reply::Nil,
            Some(e) => f(e),
        })
}

pub fn object_encoding(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    with_entry(ctx, &args[2], |e| Reply::bulk_str(e.value.encoding()))
}

pub fn object_idletime(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let lfu = eviction::policy().is_lfu();
    with_entry(ctx, &args[2], |e| {
        if lfu {
            return Reply::error("ERR An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.");
        }
        Reply::Int((idle_ms(e.access()) / 1000) as i64)
    })
}

pub fn object_freq(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let lfu = eviction::policy().is_lfu();
    with_entry(ctx, &args[2], |e| {
        if !lfu {
            return Reply::error("ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.");
        }
        Reply::Int(lfu_counter(e.access()) as i64)
    })
}

pub fn object_help(_ctx: &mut Ctx<'_>, _args: &[Bytes]) -> Reply {
    help_reply(
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
        ],
    )
}

/// MEMORY USAGE key [SAMPLES n]: the same per-key estimate the maxmemory accounting uses
/// (exact for hashes: their byte count is kept up to date, so SAMPLES changes nothing).
pub fn memory_usage(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    match args.len() {
        3 => {}
        5 if is(&args[3], "SAMPLES") => {
            if parse_i64(&args[4]).is_none_or(|n| n < 0) {
                return Reply::error(NOT_AN_INTEGER);
            }
        }
        _ => return syntax_error(),
    }
    with_entry(ctx, &args[2], |e| Reply::Int(e.mem() as i64))
}

pub fn memory_help(_ctx: &mut Ctx<'_>, _args: &[Bytes]) -> Reply {
    help_reply(
        "memory",
        &[
            "USAGE <key> [SAMPLES <count>]",
            "    Return memory in bytes used by <key> and its value. Nested values are",
            "    sampled up to <count> times (default: 5, 0 means sample all).",
        ],
    )
}
