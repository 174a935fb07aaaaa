//! The list family: LPUSH RPUSH LPOP ... and the blocking pops and moves (BLPOP BRPOP BLMOVE
//! BRPOPLPUSH BLMPOP), which block through `state::blocking` when their keys are empty.
//! Table rows first (transcribed from Redis 7's COMMAND INFO / DOCS), handlers below.
use crate::commands::args::{mpop_args, Args, CommandError, CommandResult};
use crate::commands::blocking::{block_on, parse_timeout};
use crate::commands::spec::{acl, family, flag::*, CmdResult, CommandSpec, KeySpec};
use crate::commands::Ctx;
use crate::protocol::Reply;
use crate::state::pubsub::class;
use crate::state::Server;
use crate::store::{End, Keyspace, ListValue, WrongType};
use bytes::Bytes;

const LIST: CommandSpec = family("list", acl::LIST);
const LMPOP_KEYS: &[KeySpec] = &[KeySpec::keynum(1, &["RW", "access", "delete"])];
/// LMOVE and its relatives: the source loses an element, the destination gains one.
const MOVE_KEYS: &[KeySpec] = &[
    KeySpec::at(1, &["RW", "access", "delete"]),
    KeySpec::at(2, &["RW", "insert"]),
];
const BLMPOP_KEYS: &[KeySpec] = &[KeySpec::keynum(2, &["RW", "access", "delete"])];

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    LIST.cmd("lpush", -3, lpush).flags(WRITE | DENYOOM | FAST).key().key_spec_flags(&["RW", "insert"])
        .doc("1.0.0", "Prepend one or multiple elements to a list")
        .complexity("O(1) for each element added, so O(N) to add N elements when the command is called with multiple arguments.")
        .args("key:key element..."),
    LIST.cmd("rpush", -3, rpush).flags(WRITE | DENYOOM | FAST).key().key_spec_flags(&["RW", "insert"])
        .doc("1.0.0", "Append one or multiple elements to a list")
        .complexity("O(1) for each element added, so O(N) to add N elements when the command is called with multiple arguments.")
        .args("key:key element..."),
    LIST.cmd("lpushx", -3, lpushx).flags(WRITE | DENYOOM | FAST).key().key_spec_flags(&["RW", "insert"])
        .doc("2.2.0", "Prepend an element to a list, only if the list exists")
        .complexity("O(1) for each element added, so O(N) to add N elements when the command is called with multiple arguments.")
        .args("key:key element..."),
    LIST.cmd("rpushx", -3, rpushx).flags(WRITE | DENYOOM | FAST).key().key_spec_flags(&["RW", "insert"])
        .doc("2.2.0", "Append an element to a list, only if the list exists")
        .complexity("O(1) for each element added, so O(N) to add N elements when the command is called with multiple arguments.")
        .args("key:key element..."),
    LIST.cmd("lpop", -2, lpop).flags(WRITE | FAST).key().key_spec_flags(&["RW", "access", "delete"])
        .doc("1.0.0", "Remove and get the first elements in a list")
        .complexity("O(N) where N is the number of elements returned")
        .args("key:key [count:integer]"),
    LIST.cmd("rpop", -2, rpop).flags(WRITE | FAST).key().key_spec_flags(&["RW", "access", "delete"])
        .doc("1.0.0", "Remove and get the last elements in a list")
        .complexity("O(N) where N is the number of elements returned")
        .args("key:key [count:integer]"),
    LIST.cmd("llen", 2, llen).flags(READONLY | FAST).key().key_spec_flags(&["RO"])
        .doc("1.0.0", "Get the length of a list").args("key:key"),
    LIST.cmd("lrange", 4, lrange).flags(READONLY).key()
        .doc("1.0.0", "Get a range of elements from a list")
        .complexity("O(S+N) where S is the distance of start offset from HEAD for small lists, from nearest end (HEAD or TAIL) for large lists; and N is the number of elements in the specified range.")
        .args("key:key start:integer stop:integer"),
    LIST.cmd("lindex", 3, lindex).flags(READONLY).key()
        .doc("1.0.0", "Get an element from a list by its index")
        .complexity("O(N) where N is the number of elements to traverse to get to the element at index. This makes asking for the first or the last element of the list O(1).")
        .args("key:key index:integer"),
    LIST.cmd("lset", 4, lset).flags(WRITE | DENYOOM).key().key_spec_flags(&["RW", "update"])
        .doc("1.0.0", "Set the value of an element in a list by its index")
        .complexity("O(N) where N is the length of the list. Setting either the first or the last element of the list is O(1).")
        .args("key:key index:integer element"),
    LIST.cmd("linsert", 5, linsert).flags(WRITE | DENYOOM).key().key_spec_flags(&["RW", "insert"])
        .doc("2.2.0", "Insert an element before or after another element in a list")
        .complexity("O(N) where N is the number of elements to traverse before seeing the value pivot. This means that inserting somewhere on the left end on the list (head) can be considered O(1) and inserting somewhere on the right end (tail) is O(N).")
        .args("key:key where:(BEFORE|AFTER) pivot element"),
    LIST.cmd("lrem", 4, lrem).flags(WRITE).key().key_spec_flags(&["RW", "delete"])
        .doc("1.0.0", "Remove elements from a list")
        .complexity("O(N+M) where N is the length of the list and M is the number of elements removed.")
        .args("key:key count:integer element"),
    LIST.cmd("ltrim", 4, ltrim).flags(WRITE).key().key_spec_flags(&["RW", "delete"])
        .doc("1.0.0", "Trim a list to the specified range")
        .complexity("O(N) where N is the number of elements to be removed by the operation.")
        .args("key:key start:integer stop:integer"),
    LIST.cmd("lpos", -3, lpos).flags(READONLY).key()
        .doc("6.0.6", "Return the index of matching elements on a list")
        .complexity("O(N) where N is the number of elements in the list, for the average case. When searching for elements near the head or the tail of the list, or when the MAXLEN option is provided, the command may run in constant time.")
        .args("key:key element [RANK=rank:integer] [COUNT=num-matches:integer] [MAXLEN=len:integer]"),
    LIST.cmd("lmove", 5, lmove).flags(WRITE | DENYOOM).keys(1, 2, 1).key_specs(MOVE_KEYS)
        .doc("6.2.0", "Pop an element from a list, push it to another list and return it")
        .args("source:key destination:key wherefrom:(LEFT|RIGHT) whereto:(LEFT|RIGHT)"),
    LIST.cmd("rpoplpush", 3, rpoplpush).flags(WRITE | DENYOOM).keys(1, 2, 1).key_specs(MOVE_KEYS)
        .doc("1.2.0", "Remove the last element in a list, prepend it to another list and return it")
        .args("source:key destination:key"),
    LIST.cmd("lmpop", -4, lmpop).flags(WRITE | MOVABLEKEYS).key_specs(LMPOP_KEYS)
        .doc("7.0.0", "Pop elements from a list")
        .complexity("O(N+M) where N is the number of provided keys and M is the number of elements returned.")
        .args("numkeys:integer key:key... where:(LEFT|RIGHT) [COUNT=count:integer]"),
    LIST.cmd("blpop", -3, blpop).flags(WRITE | NOSCRIPT | BLOCKING).keys(1, -2, 1).key_spec_flags(&["RW", "access", "delete"])
        .doc("2.0.0", "Remove and get the first element in a list, or block until one is available")
        .complexity("O(N) where N is the number of provided keys.")
        .args("key:key... timeout:double"),
    LIST.cmd("brpop", -3, brpop).flags(WRITE | NOSCRIPT | BLOCKING).keys(1, -2, 1).key_spec_flags(&["RW", "access", "delete"])
        .doc("2.0.0", "Remove and get the last element in a list, or block until one is available")
        .complexity("O(N) where N is the number of provided keys.")
        .args("key:key... timeout:double"),
    LIST.cmd("blmove", 6, blmove).flags(WRITE | DENYOOM | NOSCRIPT | BLOCKING).keys(1, 2, 1).key_specs(MOVE_KEYS)
        .doc("6.2.0", "Pop an element from a list, push it to another list and return it; or block until one is available")
        .args("source:key destination:key wherefrom:(LEFT|RIGHT) whereto:(LEFT|RIGHT) timeout:double"),
    LIST.cmd("brpoplpush", 4, brpoplpush).flags(WRITE | DENYOOM | NOSCRIPT | BLOCKING).keys(1, 2, 1).key_specs(MOVE_KEYS)
        .doc("2.2.0", "Pop an element from a list, push it to another list and return it; or block until one is available")
        .args("source:key destination:key timeout:double"),
    LIST.cmd("blmpop", -5, blmpop).flags(WRITE | BLOCKING | MOVABLEKEYS).key_specs(BLMPOP_KEYS)
        .doc("7.0.0", "Pop elements from a list, or block until one is available")
        .complexity("O(N+M) where N is the number of provided keys and M is the number of elements returned.")
        .args("timeout:double numkeys:integer key:key... where:(LEFT|RIGHT) [COUNT=count:integer]"),
];

fn event(end: End, push: bool) -> &'static str {
    match (end, push) {
        (End::Left, true) => "lpush",
        (End::Right, true) => "rpush",
        (End::Left, false) => "lpop",
        (End::Right, false) => "rpop",
    }
}

/// LEFT or RIGHT, else Redis's syntax error.
fn parse_end(args: &mut Args<'_>) -> CommandResult<End> {
    match args.next_token().as_deref() {
        Some(b"LEFT") => Ok(End::Left),
        Some(b"RIGHT") => Ok(End::Right),
        _ => Err(CommandError::syntax()),
    }
}

/// Redis's `getPositiveLongFromObjectOrReply` for a pop count.
fn pop_count(b: &[u8]) -> CommandResult<usize> {
    match crate::util::num::parse_i64(b) {
        Some(n) if n >= 0 => Ok(n as usize),
        Some(_) => Err(CommandError::msg(
            "ERR value is out of range, must be positive",
        )),
        None => Err(CommandError::not_integer()),
    }
}

/// A range of a list of `len` elements as Redis clamps LRANGE/LTRIM indexes (`None`: empty).
fn clamp_range(start: i64, stop: i64, len: usize) -> Option<(usize, usize)> {
    let len = len as i64;
    let start = if start < 0 {
        (len + start).max(0)
    } else {
        start
    };
    let stop = if stop < 0 { len + stop } else { stop };
    if start > stop || start >= len {
        return None;
    }
    Some((start as usize, stop.min(len - 1) as usize))
}

fn bulk(v: &[u8]) -> Reply {
    Reply::Bulk(Bytes::copy_from_slice(v))
}

fn push(ctx: &mut Ctx<'_>, args: &mut Args<'_>, end: End, create: bool) -> CmdResult {
    let key = args.next_key()?;
    let elems = args.rest();
    let db = ctx.client.db;
    ctx.server.store.with_key(db, key, |ks, h| {
        let len = ks.write_as::<ListValue, _>(h, key, create, |l| {
            for e in elems {
                l.push(end, e);
            }
            (l.len(), true)
        })?;
        match len {
            Some(n) => {
                ctx.server.notify(db, class::LIST, event(end, true), key);
                Ok(Reply::Int(n as i64))
            }
            None => Ok(Reply::Int(0)),
        }
    })
}

fn lpush(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    push(ctx, args, End::Left, true)
}
fn rpush(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    push(ctx, args, End::Right, true)
}
fn lpushx(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    push(ctx, args, End::Left, false)
}
fn rpushx(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    push(ctx, args, End::Right, false)
}

/// Pops up to `count` elements from one end of the list at `key` (in a locked key space),
/// publishing the pop event and `del` when the list is emptied. `Ok(None)` when there is no
/// such list.
pub fn pop_from(
    server: &Server,
    ks: &mut Keyspace,
    h: u64,
    key: &[u8],
    end: End,
    count: usize,
) -> Result<Option<Vec<Vec<u8>>>, WrongType> {
    let db = ks.db();
    let mut emptied = false;
    let got = ks.write_as::<ListValue, _>(h, key, false, |l| {
        let mut out = Vec::new();
        while out.len() < count {
            match l.pop(end) {
                Some(v) => out.push(v),
                None => break,
            }
        }
        emptied = l.is_empty();
        let changed = !out.is_empty();
        (out, changed)
    })?;
    if let Some(v) = &got {
        if !v.is_empty() {
            // Every pop is journaled as the plain pop of what it took (a blocking pop, one
            // served later, an LMPOP), as Redis 7 propagates them.
            let n = v.len().to_string();
            let name: &[u8] = if end == End::Left { b"LPOP" } else { b"RPOP" };
            crate::commands::journal::journal_as(&[name, key, n.as_bytes()]);
            server.notify(db, class::LIST, event(end, false), key);
            if emptied {
                server.notify(db, class::GENERIC, "del", key);
            }
        }
    }
    Ok(got)
}

fn pop(ctx: &mut Ctx<'_>, args: &mut Args<'_>, end: End) -> CmdResult {
    let key = args.next_key()?;
    if args.len() > 1 {
        return Err(CommandError::WrongArity);
    }
    let count = args.next_opt().map(|c| pop_count(c)).transpose()?;
    let server = ctx.server.clone();
    ctx.server.store.with_key(ctx.client.db, key, |ks, h| {
        // Redis checks the type before the count: a count of 0 on a list is an empty array.
        if count == Some(0) {
            return Ok(ks.read_as::<ListValue, _>(h, key, |l| match l {
                None => Reply::NilArray,
                Some(_) => Reply::Array(Vec::new()),
            })?);
        }
        let got = pop_from(&server, ks, h, key, end, count.unwrap_or(1))?;
        Ok(match (got, count) {
            (None, None) => Reply::Nil,
            (None, Some(_)) => Reply::NilArray,
            (Some(mut v), None) => v.pop().map_or(Reply::Nil, |v| Reply::Bulk(v.into())),
            (Some(v), Some(_)) => {
                Reply::Array(v.into_iter().map(|v| Reply::Bulk(v.into())).collect())
            }
        })
    })
}

fn lpop(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    pop(ctx, args, End::Left)
}
fn rpop(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    pop(ctx, args, End::Right)
}

fn llen(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let key = args.next_key()?;
    ctx.server.store.with_key(ctx.client.db, key, |ks, h| {
        Ok(Reply::Int(
            ks.read_as::<ListValue, _>(h, key, |l| l.map_or(0, |l| l.len()))? as i64,
        ))
    })
}

fn lrange(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let (key, start, stop) = (args.next_key()?, args.next_i64()?, args.next_i64()?);
    ctx.server.store.with_key(ctx.client.db, key, |ks, h| {
        Ok(ks.read_as::<ListValue, _>(h, key, |l| {
            let Some(l) = l else {
                return Reply::Array(Vec::new());
            };
            match clamp_range(start, stop, l.len()) {
                None => Reply::Array(Vec::new()),
                Some((a, b)) => Reply::bulk_array(l.range(a, b)),
            }
        })?)
    })
}

/// A list index as Redis reads it (negative from the tail); `None` when out of range.
fn index_of(i: i64, len: usize) -> Option<usize> {
    let i = if i < 0 { len as i64 + i } else { i };
    (i >= 0 && (i as u64) < len as u64).then_some(i as usize)
}

fn lindex(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let (key, index) = (args.next_key()?, args.next_arg()?);
    // As Redis: the key first (a missing key is nil, another type WRONGTYPE), then the index.
    ctx.server.store.with_key(ctx.client.db, key, |ks, h| {
        ks.read_as::<ListValue, _>(h, key, |l| {
            let Some(l) = l else { return Ok(Reply::Nil) };
            let i = crate::util::num::parse_i64(index).ok_or_else(CommandError::not_integer)?;
            Ok(index_of(i, l.len())
                .and_then(|i| l.get(i))
                .map_or(Reply::Nil, |v| bulk(&v)))
        })?
    })
}

fn lset(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let (key, i, v) = (args.next_key()?, args.next_i64()?, args.next_arg()?);
    let db = ctx.client.db;
    ctx.server.store.with_key(db, key, |ks, h| {
        let done = ks.write_as::<ListValue, _>(h, key, false, |l| match index_of(i, l.len()) {
            Some(i) => (l.set(i, v), true),
            None => (false, false),
        })?;
        match done {
            None => Err(CommandError::msg("ERR no such key")),
            Some(false) => Err(CommandError::msg("ERR index out of range")),
            Some(true) => {
                ctx.server.notify(db, class::LIST, "lset", key);
                Ok(Reply::ok())
            }
        }
    })
}

fn linsert(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let key = args.next_key()?;
    let after = match args.next_token().as_deref() {
        Some(b"BEFORE") => false,
        Some(b"AFTER") => true,
        _ => return Err(CommandError::syntax()),
    };
    let (pivot, v) = (args.next_arg()?, args.next_arg()?);
    let db = ctx.client.db;
    ctx.server.store.with_key(db, key, |ks, h| {
        let r = ks.write_as::<ListValue, _>(h, key, false, |l| {
            let at = l.iter().position(|e| *e == pivot[..]);
            match at {
                None => (-1, false),
                Some(p) => {
                    l.insert(if after { p + 1 } else { p }, v);
                    (l.len() as i64, true)
                }
            }
        })?;
        match r {
            None => Ok(Reply::Int(0)),
            Some(n) => {
                if n > 0 {
                    ctx.server.notify(db, class::LIST, "linsert", key);
                }
                Ok(Reply::Int(n))
            }
        }
    })
}

fn lrem(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let (key, count, v) = (args.next_key()?, args.next_i64()?, args.next_arg()?);
    let db = ctx.client.db;
    ctx.server.store.with_key(db, key, |ks, h| {
        let mut emptied = false;
        let n = ks
            .write_as::<ListValue, _>(h, key, false, |l| {
                let n = l.remove_matching(v, count.unsigned_abs() as usize, count >= 0);
                emptied = l.is_empty();
                (n, n > 0)
            })?
            .unwrap_or(0);
        if n > 0 {
            ctx.server.notify(db, class::LIST, "lrem", key);
            if emptied {
                ctx.server.notify(db, class::GENERIC, "del", key);
            }
        }
        Ok(Reply::Int(n as i64))
    })
}

fn ltrim(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let (key, start, stop) = (args.next_key()?, args.next_i64()?, args.next_i64()?);
    let db = ctx.client.db;
    ctx.server.store.with_key(db, key, |ks, h| {
        let mut emptied = false;
        let done = ks.write_as::<ListValue, _>(h, key, false, |l| {
            match clamp_range(start, stop, l.len()) {
                None => l.trim(1, 0),
                Some((a, b)) => l.trim(a, b),
            }
            emptied = l.is_empty();
            ((), true)
        })?;
        if done.is_some() {
            ctx.server.notify(db, class::LIST, "ltrim", key);
            if emptied {
                ctx.server.notify(db, class::GENERIC, "del", key);
            }
        }
        Ok(Reply::ok())
    })
}

fn lpos(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let (key, v) = (args.next_key()?, args.next_arg()?);
    let (mut rank, mut count, mut maxlen) = (1i64, None::<usize>, 0usize);
    while let Some(opt) = args.next_token() {
        let positive = |args: &mut Args<'_>, what: &'static str| -> CommandResult<usize> {
            let n = args.next_i64()?;
            if n < 0 {
                return Err(CommandError::msg(what));
            }
            Ok(n as usize)
        };
        match &*opt {
            b"RANK" if !args.is_empty() => {
                rank = args.next_i64()?;
                if rank == 0 {
                    return Err(CommandError::msg("ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list"));
                }
                if rank == i64::MIN {
                    return Err(CommandError::msg("ERR value is out of range"));
                }
            }
            b"COUNT" if !args.is_empty() => {
                count = Some(positive(args, "ERR COUNT can't be negative")?);
            }
            b"MAXLEN" if !args.is_empty() => {
                maxlen = positive(args, "ERR MAXLEN can't be negative")?;
            }
            _ => return Err(CommandError::syntax()),
        }
    }
    ctx.server.store.with_key(ctx.client.db, key, |ks, h| {
        Ok(ks.read_as::<ListValue, _>(h, key, |l| {
            let Some(l) = l else {
                return if count.is_some() {
                    Reply::Array(Vec::new())
                } else {
                    Reply::Nil
                };
            };
            let len = l.len();
            let from_tail = rank < 0;
            let skip = rank.unsigned_abs() as usize - 1;
            let scan = if maxlen == 0 { len } else { maxlen.min(len) };
            let positions = |mut f: Box<dyn FnMut(usize) -> bool + '_>| {
                let mut matches = 0usize;
                if from_tail {
                    for (i, e) in l.iter().rev().take(scan).enumerate() {
                        if *e == v[..] {
                            matches += 1;
                            if matches > skip && !f(len - 1 - i) {
                                break;
                            }
                        }
                    }
                } else {
                    for (i, e) in l.iter().take(scan).enumerate() {
                        if *e == v[..] {
                            matches += 1;
                            if matches > skip && !f(i) {
                                break;
                            }
                        }
                    }
                }
            };
            match count {
                None => {
                    let mut found = None;
                    positions(Box::new(|i| {
                        found = Some(i);
                        false
                    }));
                    found.map_or(Reply::Nil, |i| Reply::Int(i as i64))
                }
                Some(c) => {
                    let mut out = Vec::new();
                    positions(Box::new(|i| {
                        out.push(Reply::Int(i as i64));
                        c == 0 || out.len() < c
                    }));
                    Reply::Array(out)
                }
            }
        })?)
    })
}

/// Moves one element from `src` to `dst` (LMOVE, RPOPLPUSH, a served BLMOVE). `Ok(None)`
/// when `src` is empty; WRONGTYPE when either key holds another type, checked before
/// anything changes. It reaches the journal and replicas as RPOPLPUSH for RPOPLPUSH and
/// BRPOPLPUSH (`rpoplpush`), else as LMOVE, as Redis 7.0 propagates them.
pub fn move_element(
    server: &Server,
    db: usize,
    src: &Bytes,
    dst: &Bytes,
    (from, to): (End, End),
    rpoplpush: bool,
) -> Result<Option<Vec<u8>>, WrongType> {
    let mut locked = server.store.lock_keys(&[src, dst]);
    let (hs, hd) = (locked.hash(0), locked.hash(1));
    let src_len = locked
        .ks(0, db)
        .read_as::<ListValue, _>(hs, src, |l| l.map_or(0, |l| l.len()))?;
    if src_len == 0 {
        return Ok(None);
    }
    locked.ks(1, db).read_as::<ListValue, _>(hd, dst, |_| ())?;
    let Some(mut got) = pop_from(server, locked.ks(0, db), hs, src, from, 1)? else {
        return Ok(None);
    };
    let Some(v) = got.pop() else {
        return Ok(None);
    };
    locked
        .ks(1, db)
        .write_as::<ListValue, _>(hd, dst, true, |l| {
            l.push(to, &v);
            ((), true)
        })?;
    server.notify(db, class::LIST, event(to, true), dst);
    let side = |e: End| -> &'static [u8] {
        if e == End::Left {
            b"LEFT"
        } else {
            b"RIGHT"
        }
    };
    if rpoplpush {
        crate::commands::journal::journal_as(&[b"RPOPLPUSH", src, dst]);
    } else {
        crate::commands::journal::journal_as(&[b"LMOVE", src, dst, side(from), side(to)]);
    }
    Ok(Some(v))
}

fn lmove_generic(
    ctx: &mut Ctx<'_>,
    src: &Bytes,
    dst: &Bytes,
    ends: (End, End),
    rpoplpush: bool,
) -> CmdResult {
    let got = move_element(ctx.server, ctx.client.db, src, dst, ends, rpoplpush)?;
    Ok(got.map_or(Reply::Nil, |v| Reply::Bulk(v.into())))
}

fn lmove(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let (src, dst) = (args.next_key()?, args.next_key()?);
    let (from, to) = (parse_end(args)?, parse_end(args)?);
    lmove_generic(ctx, src, dst, (from, to), false)
}

fn rpoplpush(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let (src, dst) = (args.next_key()?, args.next_key()?);
    lmove_generic(ctx, src, dst, (End::Right, End::Left), true)
}

/// The reply of LMPOP/BLMPOP: `[key, [elements]]`.
fn mpop_reply(key: &[u8], got: Vec<Vec<u8>>) -> Reply {
    Reply::Array(vec![
        bulk(key),
        Reply::Array(got.into_iter().map(|v| Reply::Bulk(v.into())).collect()),
    ])
}

/// Tries each key in order; the first non-empty list gives up to `count` elements.
fn mpop_now(
    server: &Server,
    db: usize,
    keys: &[Bytes],
    end: End,
    count: usize,
) -> CommandResult<Option<Reply>> {
    for key in keys {
        let got = server
            .store
            .with_key(db, key, |ks, h| pop_from(server, ks, h, key, end, count))?;
        if let Some(v) = got.filter(|v| !v.is_empty()) {
            return Ok(Some(mpop_reply(key, v)));
        }
    }
    Ok(None)
}

fn lmpop(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let (keys, end, count) = mpop_args(args, [(b"LEFT", End::Left), (b"RIGHT", End::Right)])?;
    Ok(mpop_now(ctx.server, ctx.client.db, keys, end, count)?.unwrap_or(Reply::NilArray))
}

/// BLPOP/BRPOP: `[key, element]` from the first non-empty key, else block.
fn bpop(ctx: &mut Ctx<'_>, args: &mut Args<'_>, end: End) -> CmdResult {
    let all = args.rest();
    let (keys, timeout) = all.split_at(all.len() - 1);
    let deadline = parse_timeout(&timeout[0])?;
    let db = ctx.client.db;
    // Type errors first, as Redis checks each key before blocking.
    for key in keys {
        let server = ctx.server.clone();
        let got = ctx
            .server
            .store
            .with_key(db, key, |ks, h| pop_from(&server, ks, h, key, end, 1))?;
        if let Some(mut v) = got {
            if let Some(e) = v.pop() {
                return Ok(Reply::Array(vec![bulk(key), Reply::Bulk(e.into())]));
            }
        }
    }
    let attempt = move |server: &Server, key: &Bytes| {
        let got = server
            .store
            .with_key(db, key, |ks, h| pop_from(server, ks, h, key, end, 1))
            .ok()??;
        got.into_iter()
            .next()
            .map(|e| Reply::Array(vec![bulk(key), Reply::Bulk(e.into())]))
    };
    block_on(
        ctx,
        keys.to_vec(),
        Box::new(attempt),
        Reply::NilArray,
        deadline,
    )
}

fn blpop(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    bpop(ctx, args, End::Left)
}
fn brpop(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    bpop(ctx, args, End::Right)
}

fn blmove_generic(
    ctx: &mut Ctx<'_>,
    src: &Bytes,
    dst: &Bytes,
    ends: (End, End),
    rpoplpush: bool,
    timeout: &[u8],
) -> CmdResult {
    let deadline = parse_timeout(timeout)?;
    let db = ctx.client.db;
    if let Some(v) = move_element(ctx.server, db, src, dst, ends, rpoplpush)? {
        return Ok(Reply::Bulk(v.into()));
    }
    let dst = dst.clone();
    let attempt = move |server: &Server, key: &Bytes| match move_element(
        server, db, key, &dst, ends, rpoplpush,
    ) {
        Ok(got) => got.map(|v| Reply::Bulk(v.into())),
        // The destination holds another type: the element stays, the client gets the error.
        Err(WrongType) => {
            let src_is_list = server.store.with_key(db, key, |ks, h| {
                ks.read_as::<ListValue, _>(h, key, |l| l.is_some_and(|l| !l.is_empty()))
            });
            match src_is_list {
                Ok(true) => Some(CommandError::wrongtype().into_reply("blmove")),
                _ => None,
            }
        }
    };
    // Inside MULTI the reply is a null bulk; a timeout answers a null array (Redis 7.0 times
    // out every list block with one).
    if ctx.client.in_exec {
        return Ok(Reply::Nil);
    }
    block_on(
        ctx,
        vec![src.clone()],
        Box::new(attempt),
        Reply::NilArray,
        deadline,
    )
}

fn blmove(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let (src, dst) = (args.next_key()?, args.next_key()?);
    let (from, to) = (parse_end(args)?, parse_end(args)?);
    let timeout = args.next_arg()?;
    blmove_generic(ctx, src, dst, (from, to), false, timeout)
}

fn brpoplpush(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let (src, dst, timeout) = (args.next_key()?, args.next_key()?, args.next_arg()?);
    blmove_generic(ctx, src, dst, (End::Right, End::Left), true, timeout)
}

fn blmpop(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let timeout = args.next_arg()?;
    let (keys, end, count) = mpop_args(args, [(b"LEFT", End::Left), (b"RIGHT", End::Right)])?;
    let deadline = parse_timeout(timeout)?;
    let db = ctx.client.db;
    if let Some(r) = mpop_now(ctx.server, db, keys, end, count)? {
        return Ok(r);
    }
    let attempt = move |server: &Server, key: &Bytes| {
        mpop_now(server, db, std::slice::from_ref(key), end, count)
            .ok()
            .flatten()
    };
    block_on(
        ctx,
        keys.to_vec(),
        Box::new(attempt),
        Reply::NilArray,
        deadline,
    )
}
