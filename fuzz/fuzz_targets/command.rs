//! Requests decoded by the real decoder and run through the command table against an
//! in-process server (`commands::dispatch`, as a connection runs them): arity, key
//! extraction, each handler's argument parsing, the data types, the documents family,
//! RESTORE's payload reader, MULTI/EXEC, RESP2 and RESP3 replies. The server is emptied and
//! the connection reset before each input, so a crash reproduces from its input alone.
//!
//! Left out, because they act outside this process or on the whole server rather than on
//! data: SHUTDOWN, SAVE/BGSAVE/BGREWRITEAOF (files), CONFIG SET/REWRITE/RESETSTAT, ACL
//! changes, CLIENT KILL/PAUSE, DEBUG other than its read-only inspection subcommands, and
//! scripts (a fuzzed script can loop forever; Lua is the `lua_value` target's).
#![no_main]

#[path = "../common/mod.rs"]
mod common;

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use std::sync::Mutex;
use tidecache::protocol::{next_request, ParseLimits, ParseState};

static HARNESS: Mutex<Option<common::Harness>> = Mutex::new(None);

/// Most commands an input runs (a long pipeline only repeats what a short one covers).
const MAX_COMMANDS: usize = 64;

fn allowed(args: &[bytes::Bytes]) -> bool {
    let name = String::from_utf8_lossy(&args[0]).to_ascii_lowercase();
    let sub = args
        .get(1)
        .map(|a| String::from_utf8_lossy(a).to_ascii_lowercase())
        .unwrap_or_default();
    match name.as_str() {
        "shutdown" | "save" | "bgsave" | "bgrewriteaof" | "eval" | "evalsha" | "eval_ro"
        | "evalsha_ro" | "fcall" | "fcall_ro" | "function" | "script" | "waitaof" | "wait"
        | "replicaof" | "slaveof" | "sync" | "psync" | "migrate" | "failover" | "module" => false,
        "config" => matches!(sub.as_str(), "get" | "help"),
        "acl" => !matches!(sub.as_str(), "setuser" | "deluser" | "load" | "save"),
        "client" => !matches!(sub.as_str(), "kill" | "pause" | "unpause"),
        "debug" => matches!(
            sub.as_str(),
            "object"
                | "listpack"
                | "quicklist"
                | "htstats-key"
                | "protocol"
                | "digest"
                | "digest-value"
                | "help"
                | "stringmatch-len"
        ),
        // The random-member commands answer up to 2^24 picks for a negative count (the
        // project's bound, args::MAX_RANDOM_REPLY): a legitimate reply that takes the
        // instrumented build longer than libFuzzer's timeout, so counts are kept small here.
        "srandmember" | "zrandmember" | "hrandfield" => args
            .get(2)
            .and_then(|c| std::str::from_utf8(c).ok()?.parse::<i64>().ok())
            .is_none_or(|n| n.unsigned_abs() <= 100_000),
        _ => true,
    }
}

fuzz_target!(|data: &[u8]| {
    let mut guard = HARNESS.lock().unwrap_or_else(|e| e.into_inner());
    let h = guard.get_or_insert_with(common::Harness::new);
    h.reset();
    let limits = ParseLimits {
        max_bulk_len: 1 << 20,
        unauthenticated: false,
    };
    let mut buf = BytesMut::from(data);
    let mut state = ParseState::default();
    for _ in 0..MAX_COMMANDS {
        let args = match next_request(&mut buf, &mut state, limits) {
            Ok(Some(args)) => args.to_vec(),
            _ => break,
        };
        if allowed(&args) {
            h.run(&args);
        }
    }
});
