//! The stream family: XADD XRANGE XREAD ... and consumer groups (XGROUP XREADGROUP XACK
//! XPENDING XCLAIM XAUTOCLAIM XINFO), with Redis 7.0's replies and error texts
//! (`t_stream.c`). XREAD and XREADGROUP with BLOCK wait through `state::blocking`.
//! Table rows first (transcribed from Redis 7's COMMAND INFO / DOCS), handlers below.
use crate::commands::args::{Args, CommandError, CommandResult};
use crate::commands::blocking::block_on;
use crate::commands::spec::{acl, family, flag::*, Begin, CmdResult, CommandSpec, Find, KeySpec};
use crate::commands::{is, Ctx};
use crate::protocol::Reply;
use crate::state::pubsub::class;
use crate::state::Server;
use crate::store::stream::{Entry, Group, StreamId, StreamValue, Trim, ENTRIES_READ_UNKNOWN};
use crate::util::clock::now_ms;
use crate::util::num::parse_i64;
use bytes::Bytes;
use bytes::{BufMut, BytesMut};
use std::time::{Duration, Instant};

const STREAM: CommandSpec = family("stream", acl::STREAM);

const fn key_at(at: i32, flags: &'static [&'static str]) -> [KeySpec; 1] {
    [KeySpec::at(at, flags)]
}
const KS_RO: &[KeySpec] = &key_at(1, &["RO"]);
const KS_RO_ACCESS: &[KeySpec] = &key_at(1, &["RO", "access"]);
const KS_RW_UPDATE: &[KeySpec] = &key_at(1, &["RW", "update"]);
const KS_RW_DELETE: &[KeySpec] = &key_at(1, &["RW", "delete"]);
const KS2_RW_INSERT: &[KeySpec] = &key_at(2, &["RW", "insert"]);
const KS2_RW_DELETE: &[KeySpec] = &key_at(2, &["RW", "delete"]);
const KS2_RW_UPDATE: &[KeySpec] = &key_at(2, &["RW", "update"]);
const KS2_RO_ACCESS: &[KeySpec] = &key_at(2, &["RO", "access"]);

const XREAD_KEYS: &[KeySpec] = &[KeySpec {
    flags: &["RO", "access"],
    begin: Begin::Keyword {
        keyword: "STREAMS",
        start_from: 1,
    },
    find: Find::Range {
        last: -1,
        step: 1,
        limit: 2,
    },
}];
const XREADGROUP_KEYS: &[KeySpec] = &[KeySpec {
    flags: &["RO", "access"],
    begin: Begin::Keyword {
        keyword: "STREAMS",
        start_from: 4,
    },
    find: Find::Range {
        last: -1,
        step: 1,
        limit: 2,
    },
}];

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    STREAM.cmd("xadd", -5, xadd).flags(WRITE | DENYOOM | FAST).key().key_specs(KS_RW_UPDATE)
        .doc("5.0.0", "Appends a new entry to a stream")
        .complexity("O(1) when adding a new entry, O(N) when trimming where N being the number of entries evicted.")
        .args("key:key [NOMKSTREAM] [trim:{strategy:(MAXLEN|MINID) [operator:(equal='='|approximately='~')] threshold [LIMIT=count:integer]}] id_or_auto:(auto_id='*'|id) field_value:{field value}..."),
    STREAM.cmd("xlen", 2, xlen).flags(READONLY | FAST).key().key_specs(KS_RO)
        .doc("5.0.0", "Return the number of entries in a stream").args("key:key"),
    STREAM.cmd("xrange", -4, xrange).flags(READONLY).key().key_specs(KS_RO_ACCESS)
        .doc("5.0.0", "Return a range of elements in a stream, with IDs matching the specified IDs interval")
        .complexity("O(N) with N being the number of elements being returned. If N is constant (e.g. always asking for the first 10 elements with COUNT), you can consider it O(1).")
        .args("key:key start end [COUNT=count:integer]"),
    STREAM.cmd("xrevrange", -4, xrevrange).flags(READONLY).key().key_specs(KS_RO_ACCESS)
        .doc("5.0.0", "Return a range of elements in a stream, with IDs matching the specified IDs interval, in reverse order (from greater to smaller IDs) compared to XRANGE")
        .complexity("O(N) with N being the number of elements returned. If N is constant (e.g. always asking for the first 10 elements with COUNT), you can consider it O(1).")
        .args("key:key end start [COUNT=count:integer]"),
    STREAM.cmd("xdel", -3, xdel).flags(WRITE | FAST).key().key_specs(KS_RW_DELETE)
        .doc("5.0.0", "Removes the specified entries from the stream. Returns the number of items actually deleted, that may be different from the number of IDs passed in case certain IDs do not exist.")
        .complexity("O(1) for each single item to delete in the stream, regardless of the stream size.")
        .args("key:key id..."),
    STREAM.cmd("xtrim", -4, xtrim).flags(WRITE).key().key_specs(KS_RW_DELETE)
        .doc("5.0.0", "Trims the stream to (approximately if '~' is passed) a certain size")
        .complexity("O(N), with N being the number of evicted entries. Constant times are very small however, since entries are organized in macro nodes containing multiple entries that can be released with a single deallocation.")
        .args("key:key trim:{strategy:(MAXLEN|MINID) [operator:(equal='='|approximately='~')] threshold [LIMIT=count:integer]}"),
    STREAM.cmd("xsetid", -3, xsetid).flags(WRITE | DENYOOM | FAST).key().key_specs(KS_RW_UPDATE)
        .doc("5.0.0", "An internal command for replicating stream values")
        .args("key:key last-id [ENTRIESADDED=entries_added:integer] [MAXDELETEDID=max_deleted_entry_id]"),
    STREAM.cmd("xread", -4, xread).flags(READONLY | BLOCKING | MOVABLEKEYS).key_specs(XREAD_KEYS)
        .doc("5.0.0", "Return never seen elements in multiple streams, with IDs greater than the ones reported by the caller for each stream. Can block.")
        .complexity("For each stream mentioned: O(N) with N being the number of elements being returned, it means that XREAD-ing with a fixed COUNT is O(1). Note that when the BLOCK option is used, XADD will pay O(M) time in order to serve the M clients blocked on the stream getting new data.")
        .args("[COUNT=count:integer] [BLOCK=milliseconds:integer] streams:{STREAMS key:key... id...}"),
    STREAM.cmd("xreadgroup", -7, xreadgroup).flags(WRITE | BLOCKING | MOVABLEKEYS).key_specs(XREADGROUP_KEYS)
        .doc("5.0.0", "Return new entries from a stream using a consumer group, or access the history of the pending entries for a given consumer. Can block.")
        .complexity("For each stream mentioned: O(M) with M being the number of elements returned. If M is constant (e.g. always asking for the first 10 elements with COUNT), you can consider it O(1). On the other side when XREADGROUP blocks, XADD will pay the O(N) time in order to serve the N clients blocked on the stream getting new data.")
        .args("GROUP=group_consumer:{group consumer} [COUNT=count:integer] [BLOCK=milliseconds:integer] [NOACK] streams:{STREAMS key:key... id...}"),
    STREAM.cmd("xack", -4, xack).flags(WRITE | FAST).key().key_specs(KS_RW_UPDATE)
        .doc("5.0.0", "Marks a pending message as correctly processed, effectively removing it from the pending entries list of the consumer group. Return value of the command is the number of messages successfully acknowledged, that is, the IDs we were actually able to resolve in the PEL.")
        .complexity("O(1) for each message ID processed.")
        .args("key:key group id..."),
    STREAM.cmd("xpending", -3, xpending).flags(READONLY).key().key_specs(KS_RO_ACCESS)
        .doc("5.0.0", "Return information and entries from a stream consumer group pending entries list, that are messages fetched but never acknowledged.")
        .complexity("O(N) with N being the number of elements returned, so asking for a small fixed number of entries per call is O(1). O(M), where M is the total number of entries scanned when used with the IDLE filter. When the command returns just the summary and the list of consumers is small, it runs in O(1) time; otherwise, an additional O(N) time for iterating every consumer.")
        .args("key:key group [filters:{[IDLE=min-idle-time:integer] start end count:integer [consumer]}]"),
    STREAM.cmd("xclaim", -6, xclaim).flags(WRITE | FAST).key().key_specs(KS_RW_UPDATE)
        .doc("5.0.0", "Changes (or acquires) ownership of a message in a consumer group, as if the message was delivered to the specified consumer.")
        .complexity("O(log N) with N being the number of messages in the PEL of the consumer group.")
        .args("key:key group consumer min-idle-time id... [IDLE=ms:integer] [TIME=unix-time-milliseconds:unix-time] [RETRYCOUNT=count:integer] [FORCE] [JUSTID] [LASTID=id]"),
    STREAM.cmd("xautoclaim", -6, xautoclaim).flags(WRITE | FAST).key().key_specs(KS_RW_DELETE)
        .doc("6.2.0", "Changes (or acquires) ownership of messages in a consumer group, as if the messages were delivered to the specified consumer.")
        .complexity("O(1) if COUNT is small.")
        .args("key:key group consumer min-idle-time start [COUNT=count:integer] [JUSTID]"),
    STREAM.cmd("xgroup", -2, container).only_acl(0)
        .doc("5.0.0", "A container for consumer groups commands")
        .complexity("Depends on subcommand.").subs(XGROUP_SUBCOMMANDS),
    STREAM.cmd("xinfo", -2, container).only_acl(0)
        .doc("5.0.0", "A container for stream introspection commands")
        .complexity("Depends on subcommand.").subs(XINFO_SUBCOMMANDS),
];

#[rustfmt::skip]
static XGROUP_SUBCOMMANDS: &[CommandSpec] = &[
    STREAM.cmd("xgroup|delconsumer", 5, xgroup_delconsumer).flags(WRITE).keys(2, 2, 1).key_specs(KS2_RW_DELETE)
        .doc("5.0.0", "Delete a consumer from a consumer group.").args("key:key groupname consumername"),
    STREAM.cmd("xgroup|setid", -5, xgroup_setid).flags(WRITE).keys(2, 2, 1).key_specs(KS2_RW_UPDATE)
        .doc("5.0.0", "Set a consumer group to an arbitrary last delivered ID value.")
        .args("key:key groupname id:(id|new_id='$') [ENTRIESREAD=entries_read:integer]"),
    STREAM.cmd("xgroup|create", -5, xgroup_create).flags(WRITE | DENYOOM).keys(2, 2, 1).key_specs(KS2_RW_INSERT)
        .doc("5.0.0", "Create a consumer group.")
        .args("key:key groupname id:(id|new_id='$') [MKSTREAM] [ENTRIESREAD=entries_read:integer]"),
    STREAM.cmd("xgroup|destroy", 4, xgroup_destroy).flags(WRITE).keys(2, 2, 1).key_specs(KS2_RW_DELETE)
        .doc("5.0.0", "Destroy a consumer group.")
        .complexity("O(N) where N is the number of entries in the group's pending entries list (PEL).")
        .args("key:key groupname"),
    STREAM.cmd("xgroup|createconsumer", 5, xgroup_createconsumer).flags(WRITE | DENYOOM).keys(2, 2, 1).key_specs(KS2_RW_INSERT)
        .doc("6.2.0", "Create a consumer in a consumer group.").args("key:key groupname consumername"),
    STREAM.cmd("xgroup|help", 2, xgroup_help).flags(LOADING | STALE)
        .doc("5.0.0", "Show helpful text about the different subcommands"),
];

#[rustfmt::skip]
static XINFO_SUBCOMMANDS: &[CommandSpec] = &[
    STREAM.cmd("xinfo|help", 2, xinfo_help).flags(LOADING | STALE)
        .doc("5.0.0", "Show helpful text about the different subcommands"),
    STREAM.cmd("xinfo|consumers", 4, xinfo_consumers).flags(READONLY).keys(2, 2, 1).key_specs(KS2_RO_ACCESS)
        .doc("5.0.0", "List the consumers in a consumer group").args("key:key groupname"),
    STREAM.cmd("xinfo|stream", -3, xinfo_stream).flags(READONLY).keys(2, 2, 1).key_specs(KS2_RO_ACCESS)
        .doc("5.0.0", "Get information about a stream")
        .args("key:key [full:{FULL [COUNT=count:integer]}]"),
    STREAM.cmd("xinfo|groups", 3, xinfo_groups).flags(READONLY).keys(2, 2, 1).key_specs(KS2_RO_ACCESS)
        .doc("5.0.0", "List the consumer groups of a stream").args("key:key"),
];

/// Only reached with no subcommand, which the arity check already refuses.
fn container(_ctx: &mut Ctx<'_>, _args: &mut Args<'_>) -> CmdResult {
    Err(CommandError::WrongArity)
}

const INVALID_ID: &str = "ERR Invalid stream ID specified as stream command argument";

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Redis's `streamGenericParseIDOrReply`: `-` and `+` unless `strict`, `ms` (sequence
/// `missing_seq`) or `ms-seq`.
fn parse_id(b: &[u8], missing_seq: u64, strict: bool) -> CommandResult<StreamId> {
    match b {
        b"-" if !strict => Ok(StreamId::MIN),
        b"+" if !strict => Ok(StreamId::MAX),
        _ => StreamId::parse(b, missing_seq)
            .map(|(id, _)| id)
            .ok_or_else(|| CommandError::msg(INVALID_ID)),
    }
}

fn strict_id(b: &[u8]) -> CommandResult<StreamId> {
    parse_id(b, 0, true)
}

/// An interval bound (XRANGE, XPENDING, XAUTOCLAIM): `(` makes it exclusive.
fn interval_id(b: &[u8], missing_seq: u64, start: bool) -> CommandResult<StreamId> {
    if b.len() > 1 && b[0] == b'(' {
        let id = parse_id(&b[1..], missing_seq, true)?;
        let moved = if start { id.incr() } else { id.decr() };
        return moved.ok_or_else(|| {
            CommandError::msg(if start {
                "ERR invalid start ID for the interval"
            } else {
                "ERR invalid end ID for the interval"
            })
        });
    }
    parse_id(b, missing_seq, false)
}

fn id_reply(id: StreamId) -> Reply {
    Reply::Bulk(id.to_bytes())
}

fn entry_reply(e: Entry) -> Reply {
    Reply::Array(vec![
        id_reply(e.0),
        Reply::Array(e.1.into_iter().map(Reply::Bulk).collect()),
    ])
}

fn entries_reply(v: Vec<Entry>) -> Reply {
    Reply::Array(v.into_iter().map(entry_reply).collect())
}

/// The entries of `start..=end` (at most `count`, 0: all) encoded straight from the stream's
/// blocks into the reply, without copying them into entries first (XRANGE, XREAD): the same
/// bytes in RESP2 and RESP3 (an entry is an array of its ID and its field-value array).
fn encoded_range(s: &StreamValue, start: StreamId, end: StreamId, count: usize) -> Reply {
    let mut body = BytesMut::new();
    let n = s.visit_range(start, end, count, |id, fv| {
        body.put_slice(b"*2\r\n");
        let id = id.to_string();
        push_bulk(&mut body, id.as_bytes());
        body.put_u8(b'*');
        body.put_slice(itoa::Buffer::new().format(fv.len()).as_bytes());
        body.put_slice(b"\r\n");
        for x in fv {
            push_bulk(&mut body, x);
        }
    });
    let mut out = BytesMut::with_capacity(body.len() + 16);
    out.put_u8(b'*');
    out.put_slice(itoa::Buffer::new().format(n).as_bytes());
    out.put_slice(b"\r\n");
    out.put_slice(&body);
    Reply::Encoded(out.freeze())
}

fn push_bulk(out: &mut BytesMut, b: &[u8]) {
    out.put_u8(b'$');
    out.put_slice(itoa::Buffer::new().format(b.len()).as_bytes());
    out.put_slice(b"\r\n");
    out.put_slice(b);
    out.put_slice(b"\r\n");
}

fn long_arg(b: &[u8]) -> CommandResult<i64> {
    parse_i64(b).ok_or_else(CommandError::not_integer)
}

fn long_arg_msg(b: &[u8], msg: &'static str) -> CommandResult<i64> {
    parse_i64(b).ok_or_else(|| CommandError::msg(msg))
}

fn no_key_group(key: &[u8], group: &[u8]) -> CommandError {
    CommandError::msg(format!(
        "NOGROUP No such key '{}' or consumer group '{}'",
        text(key),
        text(group)
    ))
}

fn no_group_for_key(key: &[u8], group: &[u8]) -> CommandError {
    CommandError::msg(format!(
        "NOGROUP No such consumer group '{}' for key name '{}'",
        text(group),
        text(key)
    ))
}

fn subcommand_syntax(ctx_args: &Args<'_>, container: &str) -> CommandError {
    let sub = ctx_args.all().get(1).map(|b| text(b)).unwrap_or_default();
    CommandError::msg(format!(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try {} HELP.",
        sub.chars().take(128).collect::<String>(),
        container
    ))
}

/// The trim an approximate (`~`) one came to, as exact arguments (Redis's
/// `streamRewriteApproxSpecifier` and `streamRewriteTrimArgument`): how many entries a `~`
/// trim removes depends on the node size, which a replay may not share.
fn exact_trim(how: Trim, s: &StreamValue) -> [Vec<u8>; 3] {
    match how {
        Trim::MinId(_) if s.has_entries() => [
            b"MINID".to_vec(),
            b"=".to_vec(),
            s.first_id().to_bytes().to_vec(),
        ],
        _ => [
            b"MAXLEN".to_vec(),
            b"=".to_vec(),
            s.len().to_string().into_bytes(),
        ],
    }
}

/// XADD/XTRIM options (Redis's `streamAddTrimArgs`).
#[derive(Default)]
struct TrimArgs {
    how: Option<Trim>,
    approx: bool,
    limit: u64,
    nomkstream: bool,
    /// XADD's explicit ID: (id, sequence given).
    id: Option<(StreamId, bool)>,
    /// Index (in the slice parsed) of the ID, or of the first field for `*`.
    id_pos: usize,
}

/// Redis's `streamParseAddOrTrimArgsOrReply` over the arguments after the key.
fn parse_trim(a: &[Bytes], xadd: bool) -> CommandResult<TrimArgs> {
    let mut t = TrimArgs::default();
    let mut limit_given = false;
    let mut i = 0;
    while i < a.len() {
        let more = a.len() - 1 - i;
        let opt = &a[i][..];
        if xadd && opt == b"*" {
            break;
        } else if is(opt, "maxlen") && more > 0 {
            if t.how.is_some() {
                return Err(CommandError::msg("ERR syntax error, MAXLEN and MINID options at the same time are not compatible"));
            }
            t.approx = false;
            let next = &a[i + 1][..];
            if more >= 2 && next == b"~" {
                t.approx = true;
                i += 1;
            } else if more >= 2 && next == b"=" {
                i += 1;
            }
            let n = long_arg(&a[i + 1])?;
            if n < 0 {
                return Err(CommandError::msg("ERR The MAXLEN argument must be >= 0."));
            }
            i += 1;
            t.how = Some(Trim::MaxLen(n as u64));
        } else if is(opt, "minid") && more > 0 {
            if t.how.is_some() {
                return Err(CommandError::msg("ERR syntax error, MAXLEN and MINID options at the same time are not compatible"));
            }
            t.approx = false;
            let next = &a[i + 1][..];
            if more >= 2 && next == b"~" {
                t.approx = true;
                i += 1;
            } else if more >= 2 && next == b"=" {
                i += 1;
            }
            let id = strict_id(&a[i + 1])?;
            i += 1;
            t.how = Some(Trim::MinId(id));
        } else if is(opt, "limit") && more > 0 {
            let n = long_arg(&a[i + 1])?;
            if n < 0 {
                return Err(CommandError::msg("ERR The LIMIT argument must be >= 0."));
            }
            t.limit = n as u64;
            limit_given = true;
            i += 1;
        } else if xadd && is(opt, "nomkstream") {
            t.nomkstream = true;
        } else if xadd {
            let (id, seq_given) = parse_add_id(opt)?;
            t.id = Some((id, seq_given));
            break;
        } else {
            return Err(CommandError::syntax());
        }
        i += 1;
    }
    t.id_pos = i;
    if t.limit > 0 && t.how.is_none() {
        return Err(CommandError::msg(
            "ERR syntax error, LIMIT cannot be used without specifying a trimming strategy",
        ));
    }
    if !xadd && t.how.is_none() {
        return Err(CommandError::msg(
            "ERR syntax error, XTRIM must be called with a trimming strategy",
        ));
    }
    if limit_given {
        if !t.approx {
            return Err(CommandError::msg(
                "ERR syntax error, LIMIT cannot be used without the special ~ option",
            ));
        }
    } else if t.approx {
        let per = crate::store::encoding::LIMITS
            .stream_node_entries
            .load(std::sync::atomic::Ordering::Relaxed);
        let l = per.saturating_mul(100);
        t.limit = if l <= 0 {
            10_000
        } else {
            l.min(1_000_000) as u64
        };
    } else {
        t.limit = 0;
    }
    Ok(t)
}

/// XADD's explicit ID: `ms-seq`, `ms` (sequence 0) or `ms-*`.
fn parse_add_id(b: &[u8]) -> CommandResult<(StreamId, bool)> {
    if b == b"-" || b == b"+" {
        return Err(CommandError::msg(INVALID_ID));
    }
    if let Some(ms) = b.strip_suffix(b"-*") {
        if let Some((id, false)) = StreamId::parse(ms, 0) {
            return Ok((id, false));
        }
        return Err(CommandError::msg(INVALID_ID));
    }
    let (id, _) = StreamId::parse(b, 0).ok_or_else(|| CommandError::msg(INVALID_ID))?;
    Ok((id, true))
}

fn xadd(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let key = args.next_key()?;
    let rest = args.rest();
    let t = parse_trim(rest, true)?;
    let fields = &rest[(t.id_pos + 1).min(rest.len())..];
    if fields.len() < 2 || fields.len() % 2 == 1 {
        return Err(CommandError::WrongArity);
    }
    if let Some((id, true)) = t.id {
        if id.is_zero() {
            return Err(CommandError::msg(
                "ERR The ID specified in XADD must be greater than 0-0",
            ));
        }
    }
    let db = ctx.client.db;
    let server = ctx.server;
    let reply = server.store.with_key(db, key, |ks, h| {
        // NOMKSTREAM: a missing key is not created (`write_as` answers `None`).
        let r = ks.write_as::<StreamValue, _>(h, key, !t.nomkstream, |s| {
            if s.last_id == StreamId::MAX {
                return (
                    Err(CommandError::msg(
                        "ERR The stream has exhausted the last possible ID, unable to add more items",
                    )),
                    false,
                );
            }
            let id = match t.id {
                None => s.next_id(None),
                Some((id, false)) => s.next_id(Some(id.ms)),
                Some((id, true)) => (id > s.last_id).then_some(id),
            };
            let Some(id) = id else {
                return (
                    Err(CommandError::msg(
                        "ERR The ID specified in XADD is equal or smaller than the target stream top item",
                    )),
                    false,
                );
            };
            s.append(id, fields);
            let (trimmed, exact) = match t.how {
                Some(how) => {
                    let n = s.trim(how, t.approx, t.limit);
                    (n, t.approx.then(|| exact_trim(how, s)))
                }
                None => (0, None),
            };
            (Ok((id, trimmed, exact)), true)
        })?;
        match r {
            Some(Ok((id, trimmed, exact))) => {
                let generated = !matches!(t.id, Some((_, true)));
                if (generated || exact.is_some()) && crate::store::journal::recording() {
                    // Journaled with the ID it generated and the trim an approximate one
                    // came to (Redis 7 propagates both), so a replay with other node sizes
                    // keeps the same entries.
                    let mut argv: Vec<Vec<u8>> = vec![b"XADD".to_vec(), key.to_vec()];
                    match exact {
                        Some(trim) => {
                            if t.nomkstream {
                                argv.push(b"NOMKSTREAM".to_vec());
                            }
                            argv.extend(trim);
                            argv.push(id.to_bytes().to_vec());
                            argv.extend(fields.iter().map(|f| f.to_vec()));
                        }
                        None => {
                            for (i, a) in rest.iter().enumerate() {
                                argv.push(if i == t.id_pos {
                                    id.to_bytes().to_vec()
                                } else {
                                    a.to_vec()
                                });
                            }
                        }
                    }
                    crate::commands::journal::journal_as_many(vec![argv]);
                }
                server.notify(db, class::STREAM, "xadd", key);
                if trimmed > 0 {
                    server.notify(db, class::STREAM, "xtrim", key);
                }
                Ok(id_reply(id))
            }
            Some(Err(e)) => Err(e),
            None => Ok(Reply::Nil),
        }
    })?;
    if !matches!(reply, Reply::Nil) {
        server.blocking.signal(db, key);
    }
    Ok(reply)
}

fn xlen(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let key = args.next_key()?;
    ctx.server.store.with_key(ctx.client.db, key, |ks, h| {
        Ok(Reply::Int(
            ks.read_as::<StreamValue, _>(h, key, |s| s.map_or(0, |s| s.len()))? as i64,
        ))
    })
}

fn range_cmd(ctx: &mut Ctx<'_>, args: &mut Args<'_>, rev: bool) -> CmdResult {
    let key = args.next_key()?;
    let (a, b) = (args.next_arg()?, args.next_arg()?);
    let (start_arg, end_arg) = if rev { (b, a) } else { (a, b) };
    let start = interval_id(start_arg, 0, true)?;
    let end = interval_id(end_arg, u64::MAX, false)?;
    let mut count: i64 = -1;
    while let Some(opt) = args.next_opt() {
        if is(opt, "COUNT") && !args.is_empty() {
            count = args.next_i64()?.max(0);
        } else {
            return Err(CommandError::syntax());
        }
    }
    ctx.server.store.with_key(ctx.client.db, key, |ks, h| {
        Ok(ks.read_as::<StreamValue, _>(h, key, |s| match s {
            None => Reply::Array(Vec::new()),
            Some(_) if count == 0 => Reply::NilArray,
            Some(s) if !rev => encoded_range(s, start, end, count.max(0) as usize),
            Some(s) => entries_reply(s.range(start, end, count.max(0) as usize, rev)),
        })?)
    })
}

fn xrange(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    range_cmd(ctx, args, false)
}
fn xrevrange(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    range_cmd(ctx, args, true)
}

fn xdel(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let key = args.next_key()?;
    let rest = args.rest();
    let db = ctx.client.db;
    ctx.server.store.with_key(db, key, |ks, h| {
        // As Redis: a missing key answers 0 and another type WRONGTYPE before the IDs are
        // read; then every ID is checked before any is deleted.
        let n = ks
            .write_as::<StreamValue, _>(h, key, false, |s| {
                let ids = match rest
                    .iter()
                    .map(|b| strict_id(b))
                    .collect::<CommandResult<Vec<_>>>()
                {
                    Ok(ids) => ids,
                    Err(e) => return (Err(e), false),
                };
                let n = ids.iter().filter(|id| s.delete(**id)).count();
                (Ok(n), n > 0)
            })?
            .transpose()?
            .unwrap_or(0);
        if n > 0 {
            ctx.server.notify(db, class::STREAM, "xdel", key);
        }
        Ok(Reply::Int(n as i64))
    })
}

fn xtrim(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let key = args.next_key()?;
    let t = parse_trim(args.rest(), false)?;
    let Some(how) = t.how else {
        return Err(CommandError::syntax());
    };
    let db = ctx.client.db;
    ctx.server.store.with_key(db, key, |ks, h| {
        let n = ks
            .write_as::<StreamValue, _>(h, key, false, |s| {
                let n = s.trim(how, t.approx, t.limit);
                if t.approx && n > 0 && crate::store::journal::recording() {
                    // The trim it came to, exactly (see `exact_trim`).
                    let mut argv = vec![b"XTRIM".to_vec(), key.to_vec()];
                    argv.extend(exact_trim(how, s));
                    crate::commands::journal::journal_as_many(vec![argv]);
                }
                (n, n > 0)
            })?
            .unwrap_or(0);
        if n > 0 {
            ctx.server.notify(db, class::STREAM, "xtrim", key);
        }
        Ok(Reply::Int(n as i64))
    })
}

fn xsetid(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let key = args.next_key()?;
    let id = strict_id(args.next_arg()?)?;
    let mut added: Option<u64> = None;
    let mut max_del = StreamId::MIN;
    while let Some(opt) = args.next_opt() {
        if is(opt, "ENTRIESADDED") && !args.is_empty() {
            let n = args.next_i64()?;
            if n < 0 {
                return Err(CommandError::msg("ERR entries_added must be positive"));
            }
            added = Some(n as u64);
        } else if is(opt, "MAXDELETEDID") && !args.is_empty() {
            max_del = strict_id(args.next_arg()?)?;
            if id < max_del {
                return Err(CommandError::msg("ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id"));
            }
        } else {
            return Err(CommandError::syntax());
        }
    }
    let db = ctx.client.db;
    ctx.server.store.with_key(db, key, |ks, h| {
        let r = ks.write_as::<StreamValue, _>(h, key, false, |s| {
            if s.has_entries() {
                let top = s.last_entry_id().unwrap_or_default();
                if id < top {
                    return (Err(CommandError::msg("ERR The ID specified in XSETID is smaller than the target stream top item")), false);
                }
                if added.is_some_and(|a| s.len() > a) {
                    return (Err(CommandError::msg("ERR The entries_added specified in XSETID is smaller than the target stream length")), false);
                }
            }
            let md = (!max_del.is_zero()).then_some(max_del);
            s.set_last(id, added, md);
            (Ok(()), true)
        })?;
        match r {
            None => Err(CommandError::msg("ERR no such key")),
            Some(Err(e)) => Err(e),
            Some(Ok(())) => {
                ctx.server.notify(db, class::STREAM, "xsetid", key);
                Ok(Reply::ok())
            }
        }
    })
}

// ---------------------------------------------------------------------------------------
// XREAD / XREADGROUP

/// What a read of one stream asks for.
#[derive(Clone)]
struct ReadReq {
    key: Bytes,
    /// Entries after this ID; `StreamId::MAX` is XREADGROUP's `>`.
    after: StreamId,
}

#[derive(Clone)]
struct GroupReq {
    group: Bytes,
    consumer: Bytes,
    noack: bool,
}

/// The timeout of XREAD's BLOCK in milliseconds (0: forever), as Redis's
/// `getTimeoutFromObjectOrReply` with `UNIT_MILLISECONDS`.
fn parse_block_ms(b: &[u8]) -> CommandResult<Option<Instant>> {
    let ms = parse_i64(b)
        .ok_or_else(|| CommandError::msg("ERR timeout is not an integer or out of range"))?;
    if ms < 0 {
        return Err(CommandError::msg("ERR timeout is negative"));
    }
    if ms == 0 {
        return Ok(None);
    }
    if ms > i64::MAX - now_ms() {
        return Err(CommandError::msg("ERR timeout is out of range"));
    }
    Ok(Some(Instant::now() + Duration::from_millis(ms as u64)))
}

/// Delivers new entries of the group from `start` (the `>` read): moves the group's last
/// ID, and records each in the PEL unless `noack`.
fn deliver_new(
    s: &mut StreamValue,
    gname: &[u8],
    consumer: &Bytes,
    start: StreamId,
    count: usize,
    noack: bool,
) -> Vec<Entry> {
    let entries = s.range(start, StreamId::MAX, count, false);
    let now = now_ms();
    let mut g = match s.groups.remove(gname) {
        Some(g) => g,
        None => return Vec::new(),
    };
    for e in &entries {
        s.advance_group(&mut g, e.0);
        if !noack {
            g.assign(e.0, consumer, now, Some(1));
        }
    }
    s.groups.insert(Bytes::copy_from_slice(gname), g);
    entries
}

/// A consumer's own history from `start` (XREADGROUP with an ID): entries still present,
/// `[id, nil]` for deleted ones; each delivery counted.
fn deliver_history(
    s: &mut StreamValue,
    gname: &[u8],
    consumer: &[u8],
    start: StreamId,
    count: usize,
) -> Reply {
    let ids: Vec<StreamId> = match s.groups.get(gname).and_then(|g| g.consumers.get(consumer)) {
        Some(c) => c
            .pel
            .range(start..)
            .take(if count == 0 { usize::MAX } else { count })
            .copied()
            .collect(),
        None => Vec::new(),
    };
    let now = now_ms();
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        match s.get(id) {
            Some(e) => {
                if let Some(n) = s.groups.get_mut(gname).and_then(|g| g.pel.get_mut(&id)) {
                    n.delivery_time = now;
                    n.delivery_count += 1;
                }
                out.push(entry_reply(e));
            }
            None => out.push(Reply::Array(vec![id_reply(id), Reply::NilArray])),
        }
    }
    Reply::Array(out)
}

fn wrap_streams(items: Vec<(Bytes, Reply)>, resp3: bool) -> Reply {
    if resp3 {
        Reply::Map(
            items
                .into_iter()
                .map(|(k, v)| (Reply::Bulk(k), v))
                .collect(),
        )
    } else {
        Reply::Array(
            items
                .into_iter()
                .map(|(k, v)| Reply::Array(vec![Reply::Bulk(k), v]))
                .collect(),
        )
    }
}

/// One stream served for a client that was blocked (Redis's `serveClientsBlockedOnStreamKey`):
/// `None` keeps it waiting.
fn serve_blocked(
    server: &Server,
    db: usize,
    req: &ReadReq,
    group: Option<&GroupReq>,
    count: usize,
    resp3: bool,
) -> Option<Reply> {
    let key = &req.key;
    let got: Result<Option<Reply>, Reply> = server.store.with_key(db, key, |ks, h| match group {
        None => {
            let r = ks.read_as::<StreamValue, _>(h, key, |s| {
                let s = s?;
                // The last entry present, not the last ID: the attempt also runs when the
                // client blocks, and a stream whose newer entries were deleted has nothing
                // to give yet.
                if s.last_entry_id()? > req.after {
                    let start = req.after.incr()?;
                    Some(encoded_range(s, start, StreamId::MAX, count))
                } else {
                    None
                }
            });
            Ok(r.ok().flatten())
        }
        Some(gr) => {
            let gone = || {
                Reply::error(
                    "NOGROUP the consumer group this client was blocked on no longer exists",
                )
            };
            let exists = ks.peek(h, key).map(|e| match &e.value {
                crate::store::Value::Stream(s) => s.groups.contains_key(&gr.group),
                _ => false,
            });
            if exists != Some(true) {
                return Err(gone());
            }
            // Served later, it is journaled as the same read of this one stream, which
            // replays to the same deliveries.
            let c = count.to_string();
            let mut argv: Vec<&[u8]> = vec![
                b"XREADGROUP",
                b"GROUP",
                &gr.group,
                &gr.consumer,
                b"COUNT",
                c.as_bytes(),
            ];
            if gr.noack {
                argv.push(b"NOACK");
            }
            argv.extend([&b"STREAMS"[..], key, b">"]);
            crate::commands::journal::journal_as(&argv);
            let mut created = false;
            let r = ks.write_as::<StreamValue, _>(h, key, false, |s| {
                let top = s.last_entry_id();
                let Some(g) = s.groups.get_mut(&gr.group) else {
                    return (None, false);
                };
                let last = g.last_id;
                if top.is_none_or(|t| t <= last) {
                    return (None, false);
                }
                let now = now_ms();
                let (c, new) = g.consumer(&gr.consumer, now);
                c.seen_time = now;
                created = new;
                let Some(start) = last.incr() else {
                    return (None, true);
                };
                let e = deliver_new(s, &gr.group, &gr.consumer, start, count, gr.noack);
                (Some(entries_reply(e)), true)
            });
            if created {
                server.notify(db, class::STREAM, "xgroup-createconsumer", key);
            }
            Ok(r.ok().flatten().flatten())
        }
    });
    match got {
        Ok(Some(r)) => Some(wrap_streams(vec![(key.clone(), r)], resp3)),
        Ok(None) => None,
        Err(e) => Some(e),
    }
}

fn xread(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    xread_generic(ctx, args, false)
}
fn xreadgroup(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    xread_generic(ctx, args, true)
}

fn xread_generic(ctx: &mut Ctx<'_>, args: &mut Args<'_>, xreadgroup: bool) -> CmdResult {
    let all = args.rest();
    let mut timeout: Option<Option<Instant>> = None;
    let mut count: usize = 0;
    let mut streams_at = None;
    let mut group: Option<GroupReq> = None;
    let mut noack = false;
    let mut i = 0;
    while i < all.len() {
        let more = all.len() - 1 - i;
        let o = &all[i][..];
        if is(o, "BLOCK") && more > 0 {
            i += 1;
            timeout = Some(parse_block_ms(&all[i])?);
        } else if is(o, "COUNT") && more > 0 {
            i += 1;
            count = long_arg(&all[i])?.max(0) as usize;
        } else if is(o, "STREAMS") && more > 0 {
            let n = all.len() - i - 1;
            if !n.is_multiple_of(2) {
                return Err(CommandError::msg("ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified."));
            }
            streams_at = Some(i + 1);
            break;
        } else if is(o, "GROUP") && more >= 2 {
            if !xreadgroup {
                return Err(CommandError::msg(
                    "ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead.",
                ));
            }
            group = Some(GroupReq {
                group: all[i + 1].clone(),
                consumer: all[i + 2].clone(),
                noack: false,
            });
            i += 2;
        } else if is(o, "NOACK") {
            if !xreadgroup {
                return Err(CommandError::msg(
                    "ERR The NOACK option is only supported by XREADGROUP. You called XREAD instead.",
                ));
            }
            noack = true;
        } else {
            return Err(CommandError::syntax());
        }
        i += 1;
    }
    let Some(at) = streams_at else {
        return Err(CommandError::syntax());
    };
    if xreadgroup && group.is_none() {
        return Err(CommandError::msg("ERR Missing GROUP option for XREADGROUP"));
    }
    if let Some(g) = group.as_mut() {
        g.noack = noack;
    }
    let n = (all.len() - at) / 2;
    let keys = &all[at..at + n];
    let idargs = &all[at + n..];
    let db = ctx.client.db;
    let server = ctx.server.clone();
    // Resolve IDs (and check the groups) first, as Redis does before serving anything.
    let mut reqs = Vec::with_capacity(n);
    for (key, idarg) in keys.iter().zip(idargs) {
        let last = server.store.with_key(db, key, |ks, h| {
            ks.read_as::<StreamValue, _>(h, key, |s| {
                s.map(|s| {
                    let has_group = group
                        .as_ref()
                        .is_some_and(|g| s.groups.contains_key(&g.group));
                    (s.last_id, has_group)
                })
            })
        })?;
        if let Some(g) = &group {
            if !last.is_some_and(|(_, has)| has) {
                return Err(CommandError::msg(format!(
                    "NOGROUP No such key '{}' or consumer group '{}' in XREADGROUP with GROUP option",
                    text(key),
                    text(&g.group)
                )));
            }
        }
        let after = if &idarg[..] == b"$" {
            if xreadgroup {
                return Err(CommandError::msg("ERR The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would just return an empty result set."));
            }
            last.map_or(StreamId::MIN, |(l, _)| l)
        } else if &idarg[..] == b"+" {
            // Redis 7.4: the last entry, read as "after the ID before the last one".
            if xreadgroup {
                return Err(CommandError::msg("ERR The + ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The + ID would just return an empty result set."));
            }
            match last {
                None => StreamId::MIN,
                Some((l, _)) => l
                    .decr()
                    .ok_or_else(|| CommandError::msg("ERR the stream last element ID is 0-0"))?,
            }
        } else if &idarg[..] == b">" {
            if !xreadgroup {
                return Err(CommandError::msg("ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option."));
            }
            StreamId::MAX
        } else {
            strict_id(idarg)?
        };
        reqs.push(ReadReq {
            key: key.clone(),
            after,
        });
    }
    // Serve synchronously what can be served.
    let mut out: Vec<(Bytes, Reply)> = Vec::new();
    for req in &reqs {
        let key = &req.key;
        let r = server
            .store
            .with_key(db, key, |ks, h| -> CommandResult<Option<Reply>> {
                match &group {
                    None => Ok(ks.read_as::<StreamValue, _>(h, key, |s| {
                        let s = s?;
                        let top = s.last_entry_id()?;
                        if top > req.after {
                            let start = req.after.incr()?;
                            Some(encoded_range(s, start, StreamId::MAX, count))
                        } else {
                            None
                        }
                    })?),
                    Some(gr) => {
                        let mut created = false;
                        let r = ks.write_as::<StreamValue, _>(h, key, false, |s| {
                            let Some(g) = s.groups.get(&gr.group) else {
                                return (None, false);
                            };
                            let history = req.after != StreamId::MAX;
                            let glast = g.last_id;
                            let top = s.last_entry_id();
                            if !history && top.is_none_or(|t| t <= glast) {
                                return (None, false);
                            }
                            let now = now_ms();
                            if let Some(g) = s.groups.get_mut(&gr.group) {
                                let (c, new) = g.consumer(&gr.consumer, now);
                                c.seen_time = now;
                                created = new;
                            }
                            if history {
                                let start = req.after.incr().unwrap_or(StreamId::MAX);
                                (
                                    Some(deliver_history(s, &gr.group, &gr.consumer, start, count)),
                                    true,
                                )
                            } else {
                                let start = glast.incr().unwrap_or(StreamId::MAX);
                                let e =
                                    deliver_new(s, &gr.group, &gr.consumer, start, count, gr.noack);
                                (Some(entries_reply(e)), true)
                            }
                        })?;
                        if created {
                            server.notify(db, class::STREAM, "xgroup-createconsumer", key);
                        }
                        Ok(r.flatten())
                    }
                }
            })?;
        if let Some(r) = r {
            out.push((key.clone(), r));
        }
    }
    let resp3 = ctx.client.resp3;
    if !out.is_empty() {
        return Ok(wrap_streams(out, resp3));
    }
    let Some(deadline) = timeout else {
        return Ok(Reply::NilArray);
    };
    let count = if count == 0 { 1000 } else { count };
    let block_keys: Vec<Bytes> = reqs.iter().map(|r| r.key.clone()).collect();
    let waiter = group
        .is_some()
        .then(crate::state::blocking::WriteWatch::new);
    let attempt = Box::new(move |server: &Server, key: &Bytes| {
        let _counted = &waiter;
        let req = reqs.iter().find(|r| r.key == key)?;
        serve_blocked(server, db, req, group.as_ref(), count, resp3)
    });
    block_on(ctx, block_keys, attempt, Reply::NilArray, deadline)
}

// ---------------------------------------------------------------------------------------
// Consumer groups

fn xgroup_create(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let key = args.next_key()?;
    let gname = args.next_arg()?;
    let idarg = args.next_arg()?;
    let mut mkstream = false;
    let mut entries_read = ENTRIES_READ_UNKNOWN;
    while let Some(o) = args.next_opt() {
        if is(o, "MKSTREAM") {
            mkstream = true;
        } else if is(o, "ENTRIESREAD") && !args.is_empty() {
            entries_read = args.next_i64()?;
            if entries_read < 0 && entries_read != ENTRIES_READ_UNKNOWN {
                return Err(CommandError::msg(
                    "ERR value for ENTRIESREAD must be positive or -1",
                ));
            }
        } else {
            return Err(subcommand_syntax(args, "XGROUP"));
        }
    }
    if args.all().len() > 8 {
        return Err(subcommand_syntax(args, "XGROUP"));
    }
    let db = ctx.client.db;
    ctx.server.store.with_key(db, key, |ks, h| {
        let exists = match ks.peek(h, key) {
            Some(e) if !matches!(e.value, crate::store::Value::Stream(_)) => {
                return Err(CommandError::wrongtype())
            }
            Some(_) => true,
            None => false,
        };
        if !exists && !mkstream {
            return Err(CommandError::msg("ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically."));
        }
        let id = if &idarg[..] == b"$" {
            None
        } else {
            Some(strict_id(idarg)?)
        };
        let r = ks.write_as::<StreamValue, _>(h, key, true, |s| {
            if s.groups.contains_key(&gname[..]) {
                return (false, false);
            }
            let id = id.unwrap_or(s.last_id);
            s.groups
                .insert(gname.clone(), Group::new(id, entries_read));
            (true, true)
        })?;
        if r == Some(true) {
            ctx.server.notify(db, class::STREAM, "xgroup-create", key);
            Ok(Reply::ok())
        } else {
            Err(CommandError::msg("BUSYGROUP Consumer Group name already exists"))
        }
    })
}

/// The common start of SETID / CREATECONSUMER / DELCONSUMER / DESTROY: the key must exist
/// as a stream (and, for all but DESTROY, hold the group).
fn with_group<R>(
    ctx: &mut Ctx<'_>,
    key: &Bytes,
    gname: &Bytes,
    need_group: bool,
    f: impl FnOnce(&mut StreamValue) -> (R, bool),
) -> CommandResult<R> {
    let db = ctx.client.db;
    ctx.server.store.with_key(db, key, |ks, h| {
        let has = match ks.peek(h, key) {
            None => {
                return Err(CommandError::msg("ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically."))
            }
            Some(e) => match &e.value {
                crate::store::Value::Stream(s) => s.groups.contains_key(&gname[..]),
                _ => return Err(CommandError::wrongtype()),
            },
        };
        if need_group && !has {
            return Err(no_group_for_key(key, gname));
        }
        ks.write_as::<StreamValue, _>(h, key, false, f)?
            .ok_or_else(|| CommandError::msg("ERR no such key"))
    })
}

fn xgroup_setid(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let key = args.next_key()?;
    let gname = args.next_arg()?;
    let idarg = args.next_arg()?;
    let mut entries_read = ENTRIES_READ_UNKNOWN;
    while let Some(o) = args.next_opt() {
        if is(o, "ENTRIESREAD") && !args.is_empty() {
            entries_read = args.next_i64()?;
            if entries_read < 0 && entries_read != ENTRIES_READ_UNKNOWN {
                return Err(CommandError::msg(
                    "ERR value for ENTRIESREAD must be positive or -1",
                ));
            }
        } else {
            return Err(subcommand_syntax(args, "XGROUP"));
        }
    }
    let n = args.all().len();
    if n != 5 && n != 7 {
        return Err(subcommand_syntax(args, "XGROUP"));
    }
    let id = if &idarg[..] == b"$" {
        None
    } else {
        Some(parse_id(idarg, 0, false)?)
    };
    let r = with_group(ctx, key, gname, true, |s| {
        let id = id.unwrap_or(s.last_id);
        if let Some(g) = s.groups.get_mut(&gname[..]) {
            g.last_id = id;
            g.entries_read = entries_read;
        }
        ((), true)
    });
    r?;
    ctx.server
        .notify(ctx.client.db, class::STREAM, "xgroup-setid", key);
    Ok(Reply::ok())
}

fn xgroup_destroy(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let key = args.next_key()?;
    let gname = args.next_arg()?;
    let gone = with_group(ctx, key, gname, false, |s| {
        let gone = s.groups.remove(&gname[..]).is_some();
        (gone, gone)
    })?;
    if gone {
        let db = ctx.client.db;
        ctx.server.notify(db, class::STREAM, "xgroup-destroy", key);
        ctx.server.blocking.signal(db, key);
    }
    Ok(Reply::Int(gone as i64))
}

fn xgroup_createconsumer(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let key = args.next_key()?;
    let gname = args.next_arg()?;
    let cname = args.next_arg()?;
    let created = with_group(ctx, key, gname, true, |s| {
        let Some(g) = s.groups.get_mut(&gname[..]) else {
            return (false, false);
        };
        let (_, created) = g.consumer(cname, now_ms());
        (created, created)
    })?;
    if created {
        ctx.server
            .notify(ctx.client.db, class::STREAM, "xgroup-createconsumer", key);
    }
    Ok(Reply::Int(created as i64))
}

fn xgroup_delconsumer(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let key = args.next_key()?;
    let gname = args.next_arg()?;
    let cname = args.next_arg()?;
    let pending = with_group(ctx, key, gname, true, |s| {
        match s
            .groups
            .get_mut(&gname[..])
            .and_then(|g| g.delete_consumer(cname))
        {
            Some(n) => (Some(n), true),
            None => (None, false),
        }
    })?;
    if pending.is_some() {
        ctx.server
            .notify(ctx.client.db, class::STREAM, "xgroup-delconsumer", key);
    }
    Ok(Reply::Int(pending.unwrap_or(0) as i64))
}

fn xgroup_help(_ctx: &mut Ctx<'_>, _args: &mut Args<'_>) -> CmdResult {
    Ok(crate::commands::help_reply(
        "xgroup",
        &[
            "CREATE <key> <groupname> <id|$> [option]",
            "    Create a new consumer group. Options are:",
            "    * MKSTREAM",
            "      Create the empty stream if it does not exist.",
            "    * ENTRIESREAD entries_read",
            "      Set the group's entries_read counter (internal use).",
            "CREATECONSUMER <key> <groupname> <consumer>",
            "    Create a new consumer in the specified group.",
            "DELCONSUMER <key> <groupname> <consumer>",
            "    Remove the specified consumer.",
            "DESTROY <key> <groupname>",
            "    Remove the specified group.",
            "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
            "    Set the current group ID and entries_read counter.",
        ],
    ))
}

fn xack(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let key = args.next_key()?;
    let gname = args.next_arg()?;
    let idargs = args.rest();
    ctx.server.store.with_key(ctx.client.db, key, |ks, h| {
        let has = match ks.peek(h, key) {
            None => false,
            Some(e) => match &e.value {
                crate::store::Value::Stream(s) => s.groups.contains_key(&gname[..]),
                _ => return Err(CommandError::wrongtype()),
            },
        };
        if !has {
            return Ok(Reply::Int(0));
        }
        let ids = idargs
            .iter()
            .map(|b| strict_id(b))
            .collect::<CommandResult<Vec<_>>>()?;
        let n = ks
            .write_as::<StreamValue, _>(h, key, false, |s| {
                let Some(g) = s.groups.get_mut(&gname[..]) else {
                    return (0, false);
                };
                let n = ids.iter().filter(|id| g.ack(**id)).count();
                (n, n > 0)
            })?
            .unwrap_or(0);
        Ok(Reply::Int(n as i64))
    })
}

fn xpending(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let key = args.next_key()?;
    let gname = args.next_arg()?;
    let rest = args.rest();
    let argc = rest.len() + 3;
    if argc != 3 && !(6..=9).contains(&argc) {
        return Err(CommandError::syntax());
    }
    let justinfo = argc == 3;
    let mut minidle = 0i64;
    let (mut start, mut end, mut count, mut consumer) = (StreamId::MIN, StreamId::MAX, 0i64, None);
    if !justinfo {
        let mut at = 0;
        if is(&rest[0], "IDLE") {
            minidle = long_arg(&rest[1])?;
            if argc < 8 {
                return Err(CommandError::syntax());
            }
            at = 2;
        }
        count = long_arg(&rest[at + 2])?.max(0);
        start = interval_id(&rest[at], 0, true)?;
        end = interval_id(&rest[at + 1], u64::MAX, false)?;
        if let Some(c) = rest.get(at + 3) {
            consumer = Some(c.clone());
        }
        if rest.len() > at + 4 {
            return Err(CommandError::syntax());
        }
    }
    ctx.server.store.with_key(ctx.client.db, key, |ks, h| {
        let r = ks.read_as::<StreamValue, _>(h, key, |s| {
            let g = s?.groups.get(&gname[..])?;
            let now = now_ms();
            if justinfo {
                if g.pel.is_empty() {
                    return Some(Reply::Array(vec![
                        Reply::Int(0),
                        Reply::Nil,
                        Reply::Nil,
                        Reply::NilArray,
                    ]));
                }
                let first = g.pel.keys().next().copied().unwrap_or_default();
                let last = g.pel.keys().next_back().copied().unwrap_or_default();
                let per: Vec<Reply> = g
                    .consumers
                    .iter()
                    .filter(|(_, c)| !c.pel.is_empty())
                    .map(|(n, c)| {
                        Reply::Array(vec![
                            Reply::Bulk(n.clone()),
                            Reply::Bulk(Bytes::from(c.pel.len().to_string())),
                        ])
                    })
                    .collect();
                return Some(Reply::Array(vec![
                    Reply::Int(g.pel.len() as i64),
                    id_reply(first),
                    id_reply(last),
                    Reply::Array(per),
                ]));
            }
            let mut out = Vec::new();
            if start > end || count == 0 {
                return Some(Reply::Array(out));
            }
            let ids: Box<dyn Iterator<Item = StreamId>> = match &consumer {
                Some(c) => match g.consumers.get(c) {
                    None => return Some(Reply::Array(out)),
                    Some(c) => Box::new(c.pel.range(start..=end).copied()),
                },
                None => Box::new(g.pel.range(start..=end).map(|(k, _)| *k)),
            };
            for id in ids {
                let Some(n) = g.pel.get(&id) else { continue };
                if minidle != 0 && now - n.delivery_time < minidle {
                    continue;
                }
                out.push(Reply::Array(vec![
                    id_reply(id),
                    Reply::Bulk(n.consumer.clone()),
                    Reply::Int((now - n.delivery_time).max(0)),
                    Reply::Int(n.delivery_count as i64),
                ]));
                if out.len() as i64 >= count {
                    break;
                }
            }
            Some(Reply::Array(out))
        })?;
        r.ok_or_else(|| no_key_group(key, gname))
    })
}

fn xclaim(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let key = args.next_key()?;
    let gname = args.next_arg()?;
    let cname = args.next_arg()?.clone();
    let minidle_arg = args.next_arg()?;
    let rest = args.rest();
    let db = ctx.client.db;
    let server = ctx.server;
    server.store.with_key(db, key, |ks, h| {
        let has = match ks.peek(h, key) {
            None => false,
            Some(e) => match &e.value {
                crate::store::Value::Stream(s) => s.groups.contains_key(&gname[..]),
                _ => return Err(CommandError::wrongtype()),
            },
        };
        if !has {
            return Err(no_key_group(key, gname));
        }
        let minidle =
            long_arg_msg(minidle_arg, "ERR Invalid min-idle-time argument for XCLAIM")?.max(0);
        let mut ids = Vec::new();
        let mut j = 0;
        while j < rest.len() {
            match StreamId::parse(&rest[j], 0) {
                Some((id, _)) if &rest[j][..] != b"-" && &rest[j][..] != b"+" => ids.push(id),
                _ => break,
            }
            j += 1;
        }
        let now = now_ms();
        let (mut force, mut justid) = (false, false);
        let mut delivery: i64 = -1;
        let mut retry: i64 = -1;
        let mut last_id = StreamId::MIN;
        while j < rest.len() {
            let more = rest.len() - 1 - j;
            let o = &rest[j][..];
            if is(o, "FORCE") {
                force = true;
            } else if is(o, "JUSTID") {
                justid = true;
            } else if is(o, "IDLE") && more > 0 {
                j += 1;
                let v = long_arg_msg(&rest[j], "ERR Invalid IDLE option argument for XCLAIM")?;
                delivery = now - v;
            } else if is(o, "TIME") && more > 0 {
                j += 1;
                delivery = long_arg_msg(&rest[j], "ERR Invalid TIME option argument for XCLAIM")?;
            } else if is(o, "RETRYCOUNT") && more > 0 {
                j += 1;
                retry = long_arg_msg(
                    &rest[j],
                    "ERR Invalid RETRYCOUNT option argument for XCLAIM",
                )?;
            } else if is(o, "LASTID") && more > 0 {
                j += 1;
                last_id = strict_id(&rest[j])?;
            } else {
                return Err(CommandError::msg(format!(
                    "ERR Unrecognized XCLAIM option '{}'",
                    text(o)
                )));
            }
            j += 1;
        }
        if delivery != -1 {
            if delivery < 0 || delivery > now {
                delivery = now;
            }
        } else {
            delivery = now;
        }
        let mut created = false;
        let r = ks.write_as::<StreamValue, _>(h, key, false, |s| {
            let mut out = Vec::new();
            let mut changed = false;
            let Some(mut g) = s.groups.remove(&gname[..]) else {
                return (out, false);
            };
            if last_id > g.last_id {
                g.last_id = last_id;
                changed = true;
            }
            let mut have_consumer = false;
            for id in ids {
                let entry = s.get(id);
                if entry.is_none() {
                    if g.ack(id) {
                        changed = true;
                    }
                    continue;
                }
                let pending = g.pel.get(&id).map(|n| n.delivery_time);
                let pending = match pending {
                    Some(t) => Some(Some(t)),
                    None if force => Some(None),
                    None => None,
                };
                let Some(t) = pending else { continue };
                if let Some(t) = t {
                    if minidle > 0 && now - t < minidle {
                        continue;
                    }
                }
                if !have_consumer {
                    let (c, new) = g.consumer(&cname, now);
                    c.seen_time = now;
                    created |= new;
                    have_consumer = true;
                }
                let old = g.pel.get(&id).map(|n| n.delivery_count).unwrap_or(0);
                let count = if retry >= 0 {
                    retry as u64
                } else if !justid {
                    old + 1
                } else {
                    old
                };
                g.assign(id, &cname, delivery, Some(count));
                changed = true;
                out.push(if justid {
                    id_reply(id)
                } else {
                    entry.map_or(Reply::Nil, entry_reply)
                });
            }
            s.groups.insert(gname.clone(), g);
            (out, changed)
        })?;
        if created {
            server.notify(db, class::STREAM, "xgroup-createconsumer", key);
        }
        Ok(Reply::Array(r.unwrap_or_default()))
    })
}

fn xautoclaim(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let key = args.next_key()?;
    let gname = args.next_arg()?;
    let cname = args.next_arg()?.clone();
    let minidle = long_arg_msg(
        args.next_arg()?,
        "ERR Invalid min-idle-time argument for XAUTOCLAIM",
    )?
    .max(0);
    let start = interval_id(args.next_arg()?, 0, true)?;
    let mut count: i64 = 100;
    let mut justid = false;
    while let Some(o) = args.next_opt() {
        if is(o, "COUNT") && !args.is_empty() {
            let max = i64::MAX / 16;
            count = match parse_i64(args.next_arg()?) {
                Some(n) if (1..=max).contains(&n) => n,
                _ => return Err(CommandError::msg("ERR COUNT must be > 0")),
            };
        } else if is(o, "JUSTID") {
            justid = true;
        } else {
            return Err(CommandError::syntax());
        }
    }
    let db = ctx.client.db;
    let server = ctx.server;
    server.store.with_key(db, key, |ks, h| {
        let has = match ks.peek(h, key) {
            None => false,
            Some(e) => match &e.value {
                crate::store::Value::Stream(s) => s.groups.contains_key(&gname[..]),
                _ => return Err(CommandError::wrongtype()),
            },
        };
        if !has {
            return Err(no_key_group(key, gname));
        }
        let mut created = false;
        let r = ks.write_as::<StreamValue, _>(h, key, false, |s| {
            let Some(mut g) = s.groups.remove(&gname[..]) else {
                return (Reply::Nil, false);
            };
            let now = now_ms();
            let mut attempts = count.saturating_mul(10);
            let mut left = count;
            let mut out = Vec::new();
            let mut deleted = Vec::new();
            let mut cursor = start;
            let next: Option<StreamId>;
            let mut have_consumer = false;
            let mut changed = false;
            loop {
                let item = g
                    .pel
                    .range(cursor..)
                    .next()
                    .map(|(id, n)| (*id, n.delivery_time, n.delivery_count));
                let Some((id, t, dc)) = item else {
                    next = None;
                    break;
                };
                if attempts == 0 || left == 0 {
                    next = Some(id);
                    break;
                }
                attempts -= 1;
                cursor = match id.incr() {
                    Some(c) => c,
                    None => StreamId::MAX,
                };
                let last_possible = id == StreamId::MAX;
                let entry = s.get(id);
                if entry.is_none() {
                    g.ack(id);
                    deleted.push(id);
                    left -= 1;
                    changed = true;
                } else if minidle == 0 || now - t >= minidle {
                    if !have_consumer {
                        let (c, new) = g.consumer(&cname, now);
                        c.seen_time = now;
                        created |= new;
                        have_consumer = true;
                    }
                    let dc = if justid { dc } else { dc + 1 };
                    g.assign(id, &cname, now, Some(dc));
                    changed = true;
                    out.push(if justid {
                        id_reply(id)
                    } else {
                        entry.map_or(Reply::Nil, entry_reply)
                    });
                    left -= 1;
                }
                if last_possible {
                    next = None;
                    break;
                }
            }
            s.groups.insert(gname.clone(), g);
            let reply = Reply::Array(vec![
                id_reply(next.unwrap_or(StreamId::MIN)),
                Reply::Array(out),
                Reply::Array(deleted.into_iter().map(id_reply).collect()),
            ]);
            (reply, changed)
        })?;
        if created {
            server.notify(db, class::STREAM, "xgroup-createconsumer", key);
        }
        Ok(r.unwrap_or(Reply::Nil))
    })
}

// ---------------------------------------------------------------------------------------
// XINFO

fn read_stream<R>(
    ctx: &mut Ctx<'_>,
    key: &Bytes,
    f: impl FnOnce(&StreamValue) -> CommandResult<R>,
) -> CommandResult<R> {
    ctx.server.store.with_key(ctx.client.db, key, |ks, h| {
        ks.read_as::<StreamValue, _>(h, key, |s| match s {
            None => Err(CommandError::msg("ERR no such key")),
            Some(s) => f(s),
        })?
    })
}

fn bulk(s: &str) -> Reply {
    Reply::bulk_str(s)
}

fn lag_reply(s: &StreamValue, g: &Group) -> Reply {
    match s.lag(g) {
        Some(l) => Reply::Int(l),
        None => Reply::Nil,
    }
}

fn entries_read_reply(g: &Group) -> Reply {
    if g.entries_read == ENTRIES_READ_UNKNOWN {
        Reply::Nil
    } else {
        Reply::Int(g.entries_read)
    }
}

fn xinfo_stream(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let key = args.next_key()?.clone();
    let opts = args.rest();
    let mut full = false;
    let mut count: i64 = 10;
    if !opts.is_empty() {
        if (opts.len() != 1 && opts.len() != 3) || !is(&opts[0], "FULL") {
            return Err(subcommand_syntax(args, "XINFO"));
        }
        full = true;
        if opts.len() == 3 {
            if !is(&opts[1], "COUNT") {
                return Err(subcommand_syntax(args, "XINFO"));
            }
            count = long_arg(&opts[2])?;
            if count < 0 {
                count = 10;
            }
        }
    }
    let cap = if count == 0 {
        usize::MAX
    } else {
        count as usize
    };
    read_stream(ctx, &key, |s| {
        let mut m = vec![
            (bulk("length"), Reply::Int(s.len() as i64)),
            (bulk("radix-tree-keys"), Reply::Int(s.nodes() as i64)),
            (
                bulk("radix-tree-nodes"),
                Reply::Int((s.nodes() * 2).max(1) as i64),
            ),
            (bulk("last-generated-id"), id_reply(s.last_id)),
            (bulk("max-deleted-entry-id"), id_reply(s.max_deleted_id)),
            (bulk("entries-added"), Reply::Int(s.entries_added as i64)),
            (bulk("recorded-first-entry-id"), id_reply(s.first_id())),
        ];
        if !full {
            m.push((bulk("groups"), Reply::Int(s.groups.len() as i64)));
            m.push((
                bulk("first-entry"),
                s.first_entry().map_or(Reply::Nil, entry_reply),
            ));
            m.push((
                bulk("last-entry"),
                s.last_entry().map_or(Reply::Nil, entry_reply),
            ));
            return Ok(Reply::Map(m));
        }
        let n = if count == 0 { 0 } else { count as usize };
        m.push((
            bulk("entries"),
            entries_reply(s.range(StreamId::MIN, StreamId::MAX, n, false)),
        ));
        let groups: Vec<Reply> = s
            .groups
            .iter()
            .map(|(name, g)| {
                let pending: Vec<Reply> = g
                    .pel
                    .iter()
                    .take(cap)
                    .map(|(id, n)| {
                        Reply::Array(vec![
                            id_reply(*id),
                            Reply::Bulk(n.consumer.clone()),
                            Reply::Int(n.delivery_time),
                            Reply::Int(n.delivery_count as i64),
                        ])
                    })
                    .collect();
                let consumers: Vec<Reply> = g
                    .consumers
                    .iter()
                    .map(|(cn, c)| {
                        let cp: Vec<Reply> = c
                            .pel
                            .iter()
                            .take(cap)
                            .filter_map(|id| {
                                let n = g.pel.get(id)?;
                                Some(Reply::Array(vec![
                                    id_reply(*id),
                                    Reply::Int(n.delivery_time),
                                    Reply::Int(n.delivery_count as i64),
                                ]))
                            })
                            .collect();
                        Reply::Map(vec![
                            (bulk("name"), Reply::Bulk(cn.clone())),
                            (bulk("seen-time"), Reply::Int(c.seen_time)),
                            (bulk("active-time"), Reply::Int(c.active_time)),
                            (bulk("pel-count"), Reply::Int(c.pel.len() as i64)),
                            (bulk("pending"), Reply::Array(cp)),
                        ])
                    })
                    .collect();
                Reply::Map(vec![
                    (bulk("name"), Reply::Bulk(name.clone())),
                    (bulk("last-delivered-id"), id_reply(g.last_id)),
                    (bulk("entries-read"), entries_read_reply(g)),
                    (bulk("lag"), lag_reply(s, g)),
                    (bulk("pel-count"), Reply::Int(g.pel.len() as i64)),
                    (bulk("pending"), Reply::Array(pending)),
                    (bulk("consumers"), Reply::Array(consumers)),
                ])
            })
            .collect();
        m.push((bulk("groups"), Reply::Array(groups)));
        Ok(Reply::Map(m))
    })
}

fn xinfo_groups(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let key = args.next_key()?.clone();
    read_stream(ctx, &key, |s| {
        Ok(Reply::Array(
            s.groups
                .iter()
                .map(|(name, g)| {
                    Reply::Map(vec![
                        (bulk("name"), Reply::Bulk(name.clone())),
                        (bulk("consumers"), Reply::Int(g.consumers.len() as i64)),
                        (bulk("pending"), Reply::Int(g.pel.len() as i64)),
                        (bulk("last-delivered-id"), id_reply(g.last_id)),
                        (bulk("entries-read"), entries_read_reply(g)),
                        (bulk("lag"), lag_reply(s, g)),
                    ])
                })
                .collect(),
        ))
    })
}

fn xinfo_consumers(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let key = args.next_key()?.clone();
    let gname = args.next_arg()?.clone();
    read_stream(ctx, &key, |s| {
        let g = s
            .groups
            .get(&gname[..])
            .ok_or_else(|| no_group_for_key(&key, &gname))?;
        let now = now_ms();
        Ok(Reply::Array(
            g.consumers
                .iter()
                .map(|(n, c)| {
                    Reply::Map(vec![
                        (bulk("name"), Reply::Bulk(n.clone())),
                        (bulk("pending"), Reply::Int(c.pel.len() as i64)),
                        (bulk("idle"), Reply::Int((now - c.seen_time).max(0))),
                        // Redis 7.2: since the last successful interaction, -1 if none.
                        (
                            bulk("inactive"),
                            Reply::Int(if c.active_time == -1 {
                                -1
                            } else {
                                now - c.active_time
                            }),
                        ),
                    ])
                })
                .collect(),
        ))
    })
}

fn xinfo_help(_ctx: &mut Ctx<'_>, _args: &mut Args<'_>) -> CmdResult {
    Ok(crate::commands::help_reply(
        "xinfo",
        &[
            "CONSUMERS <key> <groupname>",
            "    Show consumers of <groupname>.",
            "GROUPS <key>",
            "    Show the stream consumer groups.",
            "STREAM <key> [FULL [COUNT <count>]",
            "    Show information about the stream.",
        ],
    ))
}
