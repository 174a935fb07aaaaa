//! DEBUG: what tests need to reach inside the server, refused unless `enable-debug-command`
//! allows it (Redis 7's rule and text). The subcommands of Redis 7.0 that Redis's own test
//! suite leans on answer as Redis answers them (`SLEEP`, `SET-ACTIVE-EXPIRE`, `OBJECT`,
//! `PROTOCOL`, `POPULATE`, `LISTPACK`, `QUICKLIST`, `HTSTATS`, `HTSTATS-KEY`, `CHANGE-REPL-ID`, `ERROR`,
//! `LOG`, `STRINGMATCH-TEST`, `CONFIG-REWRITE-FORCE-ALL`, `QUICKLIST-PACKED-THRESHOLD`, `AOF-FLUSH-SLEEP`,
//! `DIGEST`, `DIGEST-VALUE` with Redis's algorithm, so digests match Redis's own);
//! `RELOAD` round-trips every value through its RDB form (see `reload`); `LOADAOF` empties
//! the data and replays the journal's files (`commands::journal::debug_loadaof`); those whose
//! work tidecache cannot do (`RELOAD NOSAVE`) answer an error that says so instead of an OK
//! that did nothing; a name Redis
//! does not know answers Redis's unknown-subcommand error. tidecache's own
//! `ADVANCE-CLOCK <ms>` moves wall time forward (`util::clock`), so expiry tests make
//! deadlines pass instead of sleeping past them.

use crate::commands::args::{Args, CommandError, Token};
use crate::commands::spec::{family, flag::*, CmdResult, CommandSpec};
use crate::commands::{help_reply, text, Ctx};
use crate::protocol::Reply;
use crate::store::keyspace::{Ttl, Value};
use crate::store::Entry;
use crate::util::num::format_g17;
use bytes::Bytes;

const DEBUG: CommandSpec = family("server", 0);

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    DEBUG.cmd("debug", -2, debug).flags(ADMIN | NOSCRIPT | LOADING | STALE)
        .doc("1.0.0", "A container for debugging commands").complexity("Depends on subcommand."),
];

fn allowed(ctx: &Ctx<'_>) -> bool {
    crate::commands::server::allowed_by(ctx, "enable-debug-command")
}

const HELP: &[&str] = &[
    "ADVANCE-CLOCK <milliseconds>",
    "    Move the server's wall clock forward (deadlines, TTL dates, $$NOW, TIME).",
    "CHANGE-REPL-ID",
    "    Change the replication IDs of the instance.",
    "    Dangerous: should be used only for testing the replication subsystem.",
    "CONFIG-REWRITE-FORCE-ALL",
    "    Like CONFIG REWRITE but writes all configuration options, including",
    "    keywords not listed in original configuration file or default values.",
    "DIGEST",
    "    Output a hex signature representing the current DB content.",
    "DIGEST-VALUE <key> [<key> ...]",
    "    Output a hex signature of the values of all the specified keys.",
    "ERROR <string>",
    "    Return a Redis protocol error with <string> as message. Useful for clients",
    "    unit tests to simulate Redis errors.",
    "LOG <message>",
    "    Write <message> to the server log.",
    "HTSTATS <dbid> [full]",
    "    Return hash table statistics of the specified Redis database.",
    "HTSTATS-KEY <key>",
    "    Like HTSTATS but for the hash table stored at <key>'s value.",
    "OBJECT <key>",
    "    Show low level info about `key` and associated value.",
    "POPULATE <count> [<prefix>] [<size>]",
    "    Create <count> string keys named key:<num>. If <prefix> is specified then",
    "    it is used instead of the 'key' prefix.",
    "PROTOCOL <type>",
    "    Reply with a test value of the specified type. <type> can be: string,",
    "    integer, double, bignum, null, array, set, map, attrib, push, verbatim,",
    "    true, false.",
    "RELOAD [option ...]",
    "    Write every value in its RDB form and load it back (no file is written).",
    "    Valid <option> values: MERGE, NOFLUSH (with MERGE). NOSAVE is not available.",
    "REPLICATE <string> ... <string>",
    "    Send the command to the replicas without running it here.",
    "PAUSE-CRON <0|1>",
    "    Stop periodic cron job processing.",
    "SET-DISABLE-DENY-SCRIPTS <0|1>",
    "    Setting it to 1 allows the commands flagged noscript (no-script) to run",
    "    from scripts, for tests.",
    "SET-ACTIVE-EXPIRE <0|1>",
    "    Setting it to 0 disables expiring keys in background when they are not",
    "    accessed (otherwise the Redis behavior). Setting it to 1 reenables back the",
    "    default.",
    "AOF-FLUSH-SLEEP <microsec>",
    "    Server will sleep before flushing the AOF, this is used for testing.",
    "QUICKLIST-PACKED-THRESHOLD <size>",
    "    Accepted and checked as Redis checks it (up to 4GB less 1MB), and changes",
    "    nothing: lists here have no plain nodes (every element is in a listpack node,",
    "    one larger than the node size limit alone in its node).",
    "CLUSTERLINK KILL <to|from|all> <node-id>",
    "    Kills the link based on the direction to/from (both) with the provided node.",
    "DROP-CLUSTER-PACKET-FILTER <packet-type>",
    "    Drop all packets that match the filtered type. Set to -1 allow all packets.",
    "SLEEP <seconds>",
    "    Stop the server for <seconds>. Decimals allowed.",
    "STRINGMATCH-TEST",
    "    Run a fuzz tester against the stringmatchlen() function.",
    "LISTPACK <key>",
    "    Show low level info about the listpack encoding of <key>.",
    "QUICKLIST <key> [<0|1>]",
    "    Show low level info about the quicklist encoding of <key>.",
    "    The optional argument (0 by default) sets the level of detail",
];

fn debug(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    if !allowed(ctx) {
        return Err(CommandError::msg(
            "ERR DEBUG command not allowed. If the enable-debug-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.",
        ));
    }
    let sub = args.next_arg()?;
    let n = args.len();
    // Not `Token`: some names are longer than its 24 bytes.
    let name = sub.to_ascii_uppercase();
    match (name.as_slice(), n) {
        (b"HELP", 0) => Ok(help_reply("debug", HELP)),
        // Redis reads these numbers with atof/atoi: text that is not a number means 0.
        (b"SLEEP", 1) => {
            let secs = text(args.next_arg()?).trim().parse::<f64>().unwrap_or(0.0);
            if secs.is_finite() && secs > 0.0 {
                // Redis's whole process stops: the background work here that its one thread
                // would not do meanwhile waits too (`Server::thawed`).
                let pause = std::time::Duration::from_secs_f64(secs.min(3600.0));
                let until = crate::util::clock::now_ms().max(0) as u64 + pause.as_millis() as u64;
                let frozen = &ctx.server.frozen_until;
                frozen.fetch_max(until, std::sync::atomic::Ordering::AcqRel);
                std::thread::sleep(pause);
                let _ = frozen.compare_exchange(
                    until,
                    0,
                    std::sync::atomic::Ordering::AcqRel,
                    std::sync::atomic::Ordering::Acquire,
                );
            }
            Ok(Reply::ok())
        }
        // The command goes to the replicas only, not run here (Redis's alsoPropagate with
        // PROPAGATE_REPL): tests of what a replica does with a command it cannot run.
        (b"REPLICATE", n) if n >= 1 => {
            let argv: Vec<&[u8]> = args.rest().iter().map(|a| &a[..]).collect();
            crate::store::journal::replicate_only(None, &argv);
            Ok(Reply::ok())
        }
        (b"PAUSE-CRON", 1) => {
            let on = text(args.next_arg()?).trim().parse::<i64>().unwrap_or(0) != 0;
            crate::state::CRON_PAUSED.store(on, std::sync::atomic::Ordering::Relaxed);
            Ok(Reply::ok())
        }
        (b"SET-DISABLE-DENY-SCRIPTS", 1) => {
            let on = text(args.next_arg()?).trim().parse::<i64>().unwrap_or(0) != 0;
            crate::commands::scripting::DENY_SCRIPTS_DISABLED
                .store(on, std::sync::atomic::Ordering::Relaxed);
            Ok(Reply::ok())
        }
        (b"SET-ACTIVE-EXPIRE", 1) => {
            let on = text(args.next_arg()?).trim().parse::<i64>().unwrap_or(0) != 0;
            crate::store::expiry::set_active(on);
            Ok(Reply::ok())
        }
        (b"AOF-FLUSH-SLEEP", 1) => {
            // Redis reads it with atoi; a negative value sleeps not at all here.
            let us = text(args.next_arg()?).trim().parse::<i64>().unwrap_or(0);
            crate::store::journal::writer::set_flush_sleep(us.max(0) as u64);
            Ok(Reply::ok())
        }
        (b"ADVANCE-CLOCK", 1) => {
            let ms = args.next_i64()?;
            if ms < 0 {
                return Err(CommandError::msg("ERR the clock only moves forward"));
            }
            crate::util::clock::advance(ms);
            Ok(Reply::ok())
        }
        (b"OBJECT", 1) => object(ctx, args.next_arg()?),
        (b"LISTPACK", 1) => structure(ctx, args.next_arg()?, "listpack"),
        (b"QUICKLIST", 1 | 2) => structure(ctx, args.next_arg()?, "quicklist"),
        (b"HTSTATS-KEY", 1) => htstats_key(ctx, args.next_arg()?),
        (b"HTSTATS", 1 | 2) => htstats(ctx, args),
        (b"PROTOCOL", 1) => protocol(ctx.client.resp3, args.next_arg()?),
        (b"POPULATE", 1..=3) => populate(ctx, args),
        (b"QUICKLIST-PACKED-THRESHOLD", 1) => {
            // Redis stores an element above the threshold as a plain node (the bytes alone,
            // no listpack). Lists here have no such node: every element is in a listpack
            // node, and one larger than the node size limit is alone in its node, which is
            // what a plain node amounts to at Redis's default threshold of 1GB. There is no
            // threshold to move, so the command is accepted for Redis's tests (whose
            // assertions are about the lists' contents, which do not depend on it), checked
            // with Redis's bounds and error, and changes nothing; docs/differences-redis.md
            // says so.
            const MAX: u64 = (1 << 32) - (1 << 20);
            match crate::util::num::parse_memory(&text(args.next_arg()?)) {
                Some(sz) if sz <= MAX => Ok(Reply::ok()),
                _ => Err(CommandError::msg(
                    "ERR argument must be a memory value bigger than 1 and smaller than 4gb",
                )),
            }
        }
        (b"DROP-CLUSTER-PACKET-FILTER", 1) => {
            // Cluster bus messages of this type are dropped on arrival (-1: none), for tests.
            let t = args.next_i64()?;
            if let Some(c) = ctx.server.cluster.get() {
                c.with(|st| st.drop_filter = t);
            }
            Ok(Reply::ok())
        }
        (b"CLUSTERLINK", 3) if args.peek().is_some_and(|a| a.eq_ignore_ascii_case(b"KILL")) => {
            // Redis's DEBUG CLUSTERLINK KILL to|from|all <node-id>: the links close, and the
            // cron connects again (a message sent meanwhile is lost, as on Redis).
            args.next_arg()?;
            let dir = args.next_arg()?.to_ascii_lowercase();
            let id = args.next_arg()?;
            let Some(c) = ctx.server.cluster.get() else {
                return Err(CommandError::msg(
                    "ERR Debug option only available for cluster mode enabled setup!",
                ));
            };
            c.with(|st| {
                let Some(n) = st.lookup(id) else {
                    return Err(CommandError::msg(format!("ERR Unknown node {}", text(id))));
                };
                let (to, from) = (n.link, n.inbound_link);
                let links = match dir.as_slice() {
                    b"from" => vec![from],
                    b"to" => vec![to],
                    b"all" => vec![to, from],
                    _ => {
                        return Err(CommandError::msg(format!(
                            "ERR Unknown direction {}",
                            text(&dir)
                        )))
                    }
                };
                for l in links.into_iter().flatten() {
                    st.free_link(l);
                }
                Ok(Reply::ok())
            })
        }
        (b"CHANGE-REPL-ID", 0) => {
            tracing::warn!("Changing replication IDs after receiving DEBUG change-repl-id");
            // Redis's changeReplicationId + clearReplicationId2.
            let r = crate::state::replication::repl();
            *r.replid.lock() = crate::state::replication::random_id();
            *r.replid2.lock() = "0".repeat(40);
            Ok(Reply::ok())
        }
        (b"ERROR", 1) => {
            // No newlines in errors, as Redis.
            let msg: String = text(args.next_arg()?)
                .chars()
                .map(|c| if c == '\r' || c == '\n' { ' ' } else { c })
                .collect();
            Ok(Reply::Error(msg))
        }
        (b"LOG", 1) => {
            tracing::warn!("DEBUG LOG: {}", text(args.next_arg()?));
            Ok(Reply::ok())
        }
        (b"STRINGMATCH-TEST", 0) => {
            stringmatch_fuzz();
            Ok(Reply::Status(
                "Apparently Redis did not crash: test passed".into(),
            ))
        }
        (b"CONFIG-REWRITE-FORCE-ALL", 0) => {
            let cfg = ctx.server.config.read().clone();
            cfg.rewrite_all().map_err(|e| {
                CommandError::msg(format!("ERR CONFIG-REWRITE-FORCE-ALL failed: {e}"))
            })?;
            Ok(Reply::ok())
        }
        (b"DIGEST", 0) => Ok(Reply::Status(hex(&dataset_digest(ctx)))),
        (b"DIGEST-VALUE", _) => {
            let db = ctx.client.db;
            let keys: Vec<Bytes> = args.rest().to_vec();
            let out = keys
                .into_iter()
                .map(|key| {
                    let key = &key[..];
                    let d = ctx.server.store.with_key(db, key, |ks, h| {
                        ks.peek(h, key).map_or([0u8; 20], |e| {
                            let mut d = [0u8; 20];
                            value_digest(&mut d, e);
                            d
                        })
                    });
                    Reply::Status(hex(&d))
                })
                .collect();
            Ok(Reply::Array(out))
        }
        (b"RELOAD", _) => {
            let (mut merge, mut noflush, mut nosave) = (false, false, false);
            for opt in args.rest() {
                match &*Token::of(opt) {
                    b"MERGE" => merge = true,
                    b"NOFLUSH" => noflush = true,
                    b"NOSAVE" => nosave = true,
                    _ => {
                        return Err(CommandError::msg(
                            "ERR DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE options.",
                        ))
                    }
                }
            }
            if nosave {
                return Err(CommandError::msg(
                    "ERR DEBUG RELOAD NOSAVE is not available in tidecache: a snapshot file is loaded only at start",
                ));
            }
            if noflush && !merge {
                // Redis's load fails at the first key loaded over itself and answers "Error
                // trying to load the RDB dump": here every key would be, so nothing starts.
                return Err(CommandError::msg(
                    "ERR Error trying to load the RDB dump: DEBUG RELOAD NOFLUSH without MERGE would load every key over itself",
                ));
            }
            reload(ctx)
        }
        (b"LOADAOF", _) => crate::commands::journal::debug_loadaof(ctx),
        _ => Err(CommandError::msg(format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try DEBUG HELP.",
            text(sub)
        ))),
    }
}

/// Looks `key` up as Redis's DEBUG does (`dictFind`, no access-time update), or answers
/// Redis's `no such key`.
fn with_entry<R>(
    ctx: &mut Ctx<'_>,
    key: &[u8],
    f: impl FnOnce(&Entry) -> R,
) -> Result<R, CommandError> {
    ctx.server
        .store
        .with_key(ctx.client.db, key, |ks, h| ks.peek(h, key).map(|e| f(e)))
        .ok_or_else(|| CommandError::msg("ERR no such key"))
}

/// `DEBUG OBJECT`: Redis's status line. There is no object header here: `Value at` is the
/// entry's address, `refcount` is 1 (values are never shared), `serializedlength` is the
/// length of the value's RDB serialization (what DUMP writes, without its type byte and
/// footer), `lru` the access clock in seconds (24 bits, as Redis's LRU clock).
fn object(ctx: &mut Ctx<'_>, key: &[u8]) -> CmdResult {
    let fill = ctx.server.config.read().get_i64("list-max-listpack-size");
    // Redis looks the key up with `dictFind`: a key past its deadline that nothing removed
    // yet is still shown (tests use this to see that lazy expiry has not happened).
    let found = ctx.server.store.with_key(ctx.client.db, key, |ks, h| {
        ks.find_raw(h, key).map(|e| object_line(e, fill))
    });
    found
        .map(Reply::Status)
        .ok_or_else(|| CommandError::msg("ERR no such key"))
}

fn object_line(e: &Entry, fill: i64) -> String {
    let serialized = crate::store::rdb::dump(&e.value).len().saturating_sub(11);
    let access = e.access();
    let lru = if crate::store::eviction::policy().is_lfu() {
        access
    } else {
        (access / 10) & 0xFF_FFFF
    };
    let idle = crate::store::eviction::idle_ms(access) / 1000;
    let mut extra = String::new();
    if let Value::List(l) = &e.value {
        let nodes = l.node_count().max(1);
        // A node's bytes as Redis counts them: the listpack header (6) and end (1) plus
        // each entry's encoded size.
        let size: usize = l
            .iter()
            .map(|v| crate::util::listpack::entry_size(v.len()))
            .sum::<usize>()
            + 7 * l.node_count();
        extra = format!(
            " ql_nodes:{} ql_avg_node:{:.2} ql_listpack_max:{fill} ql_compressed:{} ql_uncompressed_size:{size}",
            l.node_count(),
            l.len() as f64 / nodes as f64,
            u8::from(crate::store::encoding::limit(&crate::store::encoding::LIMITS.list_compress_depth) != 0),
        );
    }
    format!(
        "Value at:{:p} refcount:1 encoding:{} serializedlength:{serialized} lru:{lru} lru_seconds_idle:{idle}{extra}",
        e as *const Entry,
        e.value.encoding(),
    )
}

/// `DEBUG LISTPACK` / `DEBUG QUICKLIST`: Redis prints the structure on its standard output;
/// so does this, one line per element.
fn structure(ctx: &mut Ctx<'_>, key: &[u8], want: &'static str) -> CmdResult {
    let dump = with_entry(ctx, key, |e| {
        if e.value.encoding() != want {
            return None;
        }
        let mut out = format!("{{{want} for key {}}}\n", text(e.key()));
        let mut line = |i: usize, v: &[u8]| out.push_str(&format!("  [{i}] {}\n", text(v)));
        match &e.value {
            Value::List(l) => l.iter().enumerate().for_each(|(i, v)| line(i, &v)),
            other => out.push_str(&format!("  {} elements\n", element_count(other))),
        }
        Some(out)
    })?;
    match dump {
        Some(text) => {
            use std::io::Write;
            let _ = std::io::stdout().lock().write_all(text.as_bytes());
            Ok(Reply::Status(if want == "listpack" {
                "Listpack structure printed on stdout".into()
            } else {
                "Quicklist structure printed on stdout".into()
            }))
        }
        None if want == "listpack" => Err(CommandError::msg("ERR Not a listpack encoded object.")),
        None => Err(CommandError::msg("ERR Not a quicklist encoded object.")),
    }
}

fn element_count(v: &Value) -> usize {
    match v {
        Value::Hash(h) => h.len(),
        Value::List(l) => l.len(),
        Value::Set(s) => s.len(),
        Value::ZSet(z) => z.len(),
        Value::Stream(s) => s.len() as usize,
        _ => 1,
    }
}

/// `DEBUG HTSTATS-KEY`: for values kept in a hash table (a hash or set `hashtable`, a sorted
/// set `skiplist`). Only what is true of tidecache's tables is printed: they are open
/// addressing tables, so Redis's chain statistics have no counterpart.
fn htstats_key(ctx: &mut Ctx<'_>, key: &[u8]) -> CmdResult {
    let stats = with_entry(ctx, key, |e| match e.value.encoding() {
        "hashtable" | "skiplist" => {
            let n = element_count(&e.value);
            Some(if n == 0 {
                "No stats available for empty dictionaries\n".to_string()
            } else {
                format!("Hash table 0 stats (main hash table):\n number of elements: {n}\n")
            })
        }
        _ => None,
    })?;
    match stats {
        Some(s) => Ok(Reply::Verbatim(Bytes::from(s))),
        None => Err(CommandError::msg(
            "ERR The value stored at the specified key is not represented using an hash table",
        )),
    }
}

/// `DEBUG HTSTATS <dbid> [full]`: Redis's two sections (the keys, the keys with a
/// deadline). The key space is many open addressing tables (segments of shards), not one
/// chained dictionary, so only the element counts are printed: no table size, no chains.
fn htstats(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let db = args.next_i64()?;
    // `full` only adds chain statistics in Redis, which have no counterpart here.
    let _full = args.next_arg().ok();
    if db < 0 || db as usize >= ctx.server.store.databases() {
        return Err(CommandError::msg("ERR Out of range database"));
    }
    let (mut keys, mut volatile) = (0, 0);
    ctx.server.store.for_each_shard(|s| {
        let ks = &s.dbs[db as usize].keys;
        keys += ks.len();
        volatile += ks.volatile();
    });
    let section = |n: usize| {
        if n == 0 {
            "No stats available for empty dictionaries\n".to_string()
        } else {
            format!("Hash table 0 stats (main hash table):\n number of elements: {n}\n")
        }
    };
    let text = format!(
        "[Dictionary HT]\n{}[Expires HT]\n{}",
        section(keys),
        section(volatile)
    );
    Ok(Reply::Verbatim(Bytes::from(text)))
}

/// `DEBUG PROTOCOL <type>`: Redis 7.0's test values, in RESP2 and RESP3 as Redis writes them.
fn protocol(resp3: bool, name: &[u8]) -> CmdResult {
    const BIGNUM: &str = "1234567999999999999999999999999999999";
    let ints = || (0..3).map(Reply::Int).collect::<Vec<_>>();
    Ok(match &*Token::of(name) {
        b"STRING" => Reply::bulk_str("Hello World"),
        b"INTEGER" => Reply::Int(12345),
        // Redis's test value, not an approximation of pi.
        #[allow(clippy::approx_constant)]
        b"DOUBLE" => Reply::Double(3.141),
        b"BIGNUM" if resp3 => Reply::Encoded(Bytes::from(format!("({BIGNUM}\r\n"))),
        b"BIGNUM" => Reply::bulk_str(BIGNUM),
        b"NULL" => Reply::Nil,
        b"ARRAY" => Reply::Array(ints()),
        b"SET" => Reply::Set(ints()),
        b"MAP" => Reply::Map((0..3).map(|j| (Reply::Int(j), Reply::Bool(j == 1))).collect()),
        b"ATTRIB" => {
            let real = Reply::bulk_str("Some real reply following the attribute");
            if resp3 {
                Reply::Multi(vec![
                    Reply::Encoded(Bytes::from_static(
                        b"|1\r\n$14\r\nkey-popularity\r\n*2\r\n$7\r\nkey:123\r\n:90\r\n",
                    )),
                    real,
                ])
            } else {
                real
            }
        }
        b"PUSH" if !resp3 => {
            return Err(CommandError::msg("ERR RESP2 is not supported by this command"))
        }
        b"PUSH" => Reply::Multi(vec![
            Reply::Push(vec![Reply::bulk_str("server-cpu-usage"), Reply::Int(42)]),
            Reply::bulk_str("Some real reply following the push reply"),
        ]),
        b"TRUE" => Reply::Bool(true),
        b"FALSE" => Reply::Bool(false),
        b"VERBATIM" => Reply::Verbatim(Bytes::from_static(b"This is a verbatim\nstring")),
        _ => return Err(CommandError::msg(
            "ERR Wrong protocol type name. Please use one of the following: string|integer|double|bignum|null|array|set|map|attrib|push|verbatim|true|false",
        )),
    })
}

/// `DEBUG POPULATE <count> [<prefix>] [<size>]`: string keys `<prefix>:<n>` holding
/// `value:<n>` (padded with zero bytes, or cut, to `<size>`), skipping keys that exist.
/// Nothing is journaled or replicated, as in Redis.
fn populate(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let positive = |v: i64| {
        if v < 0 {
            Err(CommandError::msg(
                "ERR value is out of range, must be positive",
            ))
        } else {
            Ok(v as u64)
        }
    };
    let count = positive(args.next_i64()?)?;
    let prefix = match args.len() {
        0 => b"key".to_vec(),
        _ => args.next_arg()?.to_vec(),
    };
    let size = match args.len() {
        0 => 0,
        _ => positive(args.next_i64()?)? as usize,
    };
    if size > crate::util::packed::MAX_LEN {
        return Err(CommandError::msg("ERR value is out of range"));
    }
    // As in Redis, the keys are neither journaled nor sent to replicas (debug.c adds them
    // with dbAdd and propagates nothing): a replica gets them only with a full sync.
    let db = ctx.client.db;
    for j in 0..count {
        let mut key = prefix.clone();
        key.push(b':');
        key.extend_from_slice(j.to_string().as_bytes());
        let mut value = format!("value:{j}").into_bytes();
        if size > 0 {
            value.resize(size, 0);
        }
        ctx.server.store.with_key(db, &key, |ks, h| {
            if !ks.contains(h, &key) {
                ks.set(h, &key, Value::string(&value), Ttl::Clear);
            }
        });
    }
    Ok(Reply::ok())
}

/// `DEBUG RELOAD`: every value is written in its RDB form (what DUMP writes, the records
/// of a dump.rdb) and read back in its place with its deadline, as Redis's save, flush and
/// load do; encodings are chosen again from the current thresholds and access times
/// restart, as after a load. Nothing is written to disk (SAVE is separate work). One shard
/// is done at a time under its lock, so each key goes from its old value to its reloaded
/// one in one step for other clients. Refused, changing nothing, while a stream exists
/// (its RDB form is not written yet) or under `appendonly yes` (the reload would have to
/// stay out of the journal).
fn reload(ctx: &mut Ctx<'_>) -> CmdResult {
    if ctx.server.config.read().get_bool("appendonly") {
        return Err(CommandError::msg(
            "ERR DEBUG RELOAD is not available in tidecache with appendonly yes",
        ));
    }
    let now = crate::util::clock::now_ms();
    let mut stream = false;
    ctx.server.store.for_each_shard(|shard| {
        for db in &shard.dbs {
            db.keys
                .for_each(now, |e| stream |= matches!(e.value, Value::Stream(_)));
        }
    });
    if stream {
        return Err(CommandError::msg(
            "ERR DEBUG RELOAD is not available in tidecache while a stream exists: its RDB form is not written yet",
        ));
    }
    let mut failed = 0usize;
    ctx.server.store.for_each_shard(|shard| {
        for db in shard.dbs.iter_mut() {
            let ks = &mut db.keys;
            let mut saved = Vec::new();
            ks.for_each(now, |e| {
                saved.push((
                    e.key().to_vec(),
                    crate::store::rdb::dump(&e.value),
                    ks.deadline_of(e),
                ));
            });
            for (key, payload, deadline) in saved {
                match crate::store::rdb::load(&payload) {
                    Ok(v) => {
                        let h = ks.hash(&key);
                        ks.set(h, &key, v, deadline.map_or(Ttl::Clear, Ttl::At));
                    }
                    // Left as it was: what was written must read back, so this is a bug.
                    Err(_) => failed += 1,
                }
            }
        }
    });
    if failed > 0 {
        return Err(CommandError::msg(format!(
            "ERR Error trying to load the RDB dump: {failed} values did not read back (left as they were)"
        )));
    }
    tracing::warn!("DB reloaded by DEBUG RELOAD");
    Ok(Reply::ok())
}

fn hex(d: &[u8; 20]) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// Redis's `xorDigest`: the SHA1 of `data` xored into `digest` (order-free).
fn xor_digest(digest: &mut [u8; 20], data: &[u8]) {
    use sha1::{Digest, Sha1};
    let h = Sha1::digest(data);
    for (d, x) in digest.iter_mut().zip(h.iter()) {
        *d ^= x;
    }
}

/// Redis's `mixDigest`: xor, then the SHA1 of the result (order matters).
fn mix_digest(digest: &mut [u8; 20], data: &[u8]) {
    use sha1::{Digest, Sha1};
    xor_digest(digest, data);
    let h = Sha1::digest(&digest[..]);
    digest.copy_from_slice(&h);
}

/// Redis's `xorObjectDigest` of one key's value (and whether it has a deadline), so a
/// key and its copy, or the same data in any encoding, digest the same, as in Redis.
fn value_digest(digest: &mut [u8; 20], e: &Entry) {
    let kind: u32 = match &e.value {
        Value::Str(_) | Value::Int(_) | Value::Raw(_) => 0,
        Value::List(_) => 1,
        Value::Set(_) => 2,
        Value::ZSet(_) => 3,
        Value::Hash(_) => 4,
        Value::Stream(_) => 6,
    };
    mix_digest(digest, &kind.to_be_bytes());
    let pair = |a: &[u8], b: &[u8]| {
        let mut d = [0u8; 20];
        mix_digest(&mut d, a);
        mix_digest(&mut d, b);
        d
    };
    match &e.value {
        Value::Str(_) | Value::Int(_) | Value::Raw(_) => {
            if let Some(b) = e.value.str_bytes() {
                mix_digest(digest, &b);
            }
        }
        Value::List(l) => l.iter().for_each(|v| mix_digest(digest, &v)),
        Value::Set(s) => s.iter().for_each(|m| xor_digest(digest, &m)),
        Value::ZSet(z) => z
            .iter()
            .for_each(|(m, score)| xor_digest(digest, &pair(m, format_g17(score).as_bytes()))),
        Value::Hash(h) => h.iter().for_each(|(f, v)| xor_digest(digest, &pair(f, v))),
        Value::Stream(st) => {
            use crate::store::stream::StreamId;
            let (first, last) = (
                StreamId { ms: 0, seq: 0 },
                StreamId {
                    ms: u64::MAX,
                    seq: u64::MAX,
                },
            );
            st.visit_range(first, last, 0, |id, fields| {
                mix_digest(digest, format!("{}.{}", id.ms, id.seq).as_bytes());
                for f in fields {
                    mix_digest(digest, f);
                }
            });
        }
    }
    if e.has_deadline() {
        xor_digest(digest, b"!!expire!!");
    }
}

/// Redis's `computeDatasetDigest`: each non-empty database's number mixed in, then every
/// key's digest (its name mixed with its value's) xored in through `xor_digest`. Shards are read one at a time,
/// so writes running meanwhile may or may not be seen, as with any read of several shards.
fn dataset_digest(ctx: &mut Ctx<'_>) -> [u8; 20] {
    let mut fin = [0u8; 20];
    let now = crate::util::clock::now_ms();
    for db in 0..ctx.server.store.databases() {
        if ctx.server.store.dbsize(db) == 0 {
            continue;
        }
        mix_digest(&mut fin, &(db as u32).to_be_bytes());
        ctx.server.store.for_each_shard(|shard| {
            shard.dbs[db].keys.for_each(now, |e| {
                let mut d = [0u8; 20];
                mix_digest(&mut d, e.key());
                value_digest(&mut d, e);
                xor_digest(&mut fin, &d);
            });
        });
    }
    fin
}

/// Redis's `stringmatchlen_fuzz_test`: random patterns against random strings, 100,000
/// times; the point is that none of them crashes or hangs.
fn stringmatch_fuzz() {
    let mut rng = crate::util::rng::XorShift::new(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64),
    );
    let random = |rng: &mut crate::util::rng::XorShift| {
        let len = rng.below(32) as usize;
        (0..len)
            .map(|_| b"*?[]^-\\abc"[rng.below(10) as usize])
            .collect::<Vec<u8>>()
    };
    for _ in 0..100_000 {
        let pattern = random(&mut rng);
        let string = random(&mut rng);
        let nocase = rng.below(2) == 1;
        std::hint::black_box(crate::util::glob::glob_match(&pattern, &string, nocase));
    }
}

#[cfg(test)]
mod tests {
    use crate::util::num::format_g17;

    #[test]
    fn scores_print_as_c_prints_them() {
        for (x, s) in [
            (1.0, "1"),
            (1.5, "1.5"),
            (0.1, "0.10000000000000001"),
            (2.25, "2.25"),
            (1e17, "1e+17"),
            (123456789012345678.0, "1.2345678901234568e+17"),
            (1e16, "10000000000000000"),
            (0.0001, "0.0001"),
            (0.00001, "1.0000000000000001e-05"),
            (-2.5, "-2.5"),
            (f64::INFINITY, "inf"),
        ] {
            assert_eq!(format_g17(x), s, "{x}");
        }
    }
}
