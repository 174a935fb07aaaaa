//! The set family: SADD SREM SMEMBERS SPOP SINTER SUNIONSTORE SSCAN ...
//! Table entries transcribed from Redis 7's COMMAND INFO / COMMAND DOCS; handlers below.
use crate::commands::args::{Args, CommandError, CommandResult, MAX_RANDOM_REPLY};
use crate::commands::keys::{scan_cursor, scan_opts};
use crate::commands::spec::{acl, family, flag::*, Begin, CmdResult, CommandSpec, Find, KeySpec};
use crate::commands::Ctx;
use crate::protocol::Reply;
use crate::state::pubsub::class;
use crate::store::eviction::rand_u64;
use crate::store::set::distinct_positions;
use crate::store::{SetValue, Ttl, Value};
use crate::util::glob::glob_match;
use crate::util::num::parse_i64;
use bytes::Bytes;

const SET: CommandSpec = family("set", acl::SET);

const fn range(flags: &'static [&'static str], index: i32, last: i32) -> KeySpec {
    KeySpec {
        flags,
        begin: Begin::Index(index),
        find: Find::Range {
            last,
            step: 1,
            limit: 0,
        },
    }
}

const SMOVE_KEYS: &[KeySpec] = &[
    range(&["RW", "access", "delete"], 1, 0),
    range(&["RW", "insert"], 2, 0),
];
const SINTERSTORE_KEYS: &[KeySpec] = &[
    range(&["RW", "update"], 1, 0),
    range(&["RO", "access"], 2, -1),
];
const STORE_KEYS: &[KeySpec] = &[
    range(&["OW", "update"], 1, 0),
    range(&["RO", "access"], 2, -1),
];
const SINTERCARD_KEYS: &[KeySpec] = &[KeySpec {
    flags: &["RO", "access"],
    begin: Begin::Index(1),
    find: Find::Keynum {
        keynum_idx: 0,
        first: 1,
        step: 1,
    },
}];

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    SET.cmd("sadd", -3, sadd).flags(WRITE | DENYOOM | FAST).key()
        .key_specs(&[range(&["RW", "insert"], 1, 0)])
        .doc("1.0.0", "Add one or more members to a set")
        .complexity("O(1) for each element added, so O(N) to add N elements when the command is called with multiple arguments.")
        .args("key:key member..."),
    SET.cmd("srem", -3, srem).flags(WRITE | FAST).key()
        .key_specs(&[range(&["RW", "delete"], 1, 0)])
        .doc("1.0.0", "Remove one or more members from a set")
        .complexity("O(N) where N is the number of members to be removed.")
        .args("key:key member..."),
    SET.cmd("smembers", 2, smembers).flags(READONLY).key()
        .key_specs(&[range(&["RO", "access"], 1, 0)])
        .doc("1.0.0", "Get all the members in a set")
        .complexity("O(N) where N is the set cardinality.").args("key:key"),
    SET.cmd("sismember", 3, sismember).flags(READONLY | FAST).key().key_spec_flags(&["RO"])
        .doc("1.0.0", "Determine if a given value is a member of a set").args("key:key member"),
    SET.cmd("smismember", -3, smismember).flags(READONLY | FAST).key()
        .key_specs(&[range(&["RO", "access"], 1, 0)])
        .doc("6.2.0", "Returns the membership associated with the given elements for a set")
        .complexity("O(N) where N is the number of elements being checked for membership")
        .args("key:key member..."),
    SET.cmd("scard", 2, scard).flags(READONLY | FAST).key().key_spec_flags(&["RO"])
        .doc("1.0.0", "Get the number of members in a set").args("key:key"),
    SET.cmd("spop", -2, spop).flags(WRITE | FAST).key()
        .key_specs(&[range(&["RW", "access", "delete"], 1, 0)])
        .doc("1.0.0", "Remove and return one or multiple random members from a set")
        .complexity("Without the count argument O(1), otherwise O(N) where N is the value of the passed count.")
        .args("key:key [count:integer]"),
    SET.cmd("srandmember", -2, srandmember).flags(READONLY).key()
        .key_specs(&[range(&["RO", "access"], 1, 0)])
        .doc("1.0.0", "Get one or multiple random members from a set")
        .complexity("Without the count argument O(1), otherwise O(N) where N is the absolute value of the passed count.")
        .args("key:key [count:integer]"),
    SET.cmd("smove", 4, smove).flags(WRITE | FAST).keys(1, 2, 1).key_specs(SMOVE_KEYS)
        .doc("1.0.0", "Move a member from one set to another")
        .args("source:key destination:key member"),
    SET.cmd("sinter", -2, sinter).flags(READONLY).keys(1, -1, 1)
        .key_specs(&[range(&["RO", "access"], 1, -1)])
        .doc("1.0.0", "Intersect multiple sets")
        .complexity("O(N*M) worst case where N is the cardinality of the smallest set and M is the number of sets.")
        .args("key:key..."),
    SET.cmd("sintercard", -3, sintercard).flags(READONLY | MOVABLEKEYS).key_specs(SINTERCARD_KEYS)
        .doc("7.0.0", "Intersect multiple sets and return the cardinality of the result")
        .complexity("O(N*M) worst case where N is the cardinality of the smallest set and M is the number of sets.")
        .args("numkeys:integer key:key... [LIMIT=limit:integer]"),
    SET.cmd("sunion", -2, sunion).flags(READONLY).keys(1, -1, 1)
        .key_specs(&[range(&["RO", "access"], 1, -1)])
        .doc("1.0.0", "Add multiple sets")
        .complexity("O(N) where N is the total number of elements in all given sets.")
        .args("key:key..."),
    SET.cmd("sdiff", -2, sdiff).flags(READONLY).keys(1, -1, 1)
        .key_specs(&[range(&["RO", "access"], 1, -1)])
        .doc("1.0.0", "Subtract multiple sets")
        .complexity("O(N) where N is the total number of elements in all given sets.")
        .args("key:key..."),
    SET.cmd("sinterstore", -3, sinterstore).flags(WRITE | DENYOOM).keys(1, -1, 1)
        .key_specs(SINTERSTORE_KEYS)
        .doc("1.0.0", "Intersect multiple sets and store the resulting set in a key")
        .complexity("O(N*M) worst case where N is the cardinality of the smallest set and M is the number of sets.")
        .args("destination:key key:key..."),
    SET.cmd("sunionstore", -3, sunionstore).flags(WRITE | DENYOOM).keys(1, -1, 1)
        .key_specs(STORE_KEYS)
        .doc("1.0.0", "Add multiple sets and store the resulting set in a key")
        .complexity("O(N) where N is the total number of elements in all given sets.")
        .args("destination:key key:key..."),
    SET.cmd("sdiffstore", -3, sdiffstore).flags(WRITE | DENYOOM).keys(1, -1, 1)
        .key_specs(STORE_KEYS)
        .doc("1.0.0", "Subtract multiple sets and store the resulting set in a key")
        .complexity("O(N) where N is the total number of elements in all given sets.")
        .args("destination:key key:key..."),
    SET.cmd("sscan", -3, sscan).flags(READONLY).key()
        .key_specs(&[range(&["RO", "access"], 1, 0)])
        .doc("2.8.0", "Incrementally iterate Set elements")
        .complexity("O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of elements inside the collection..")
        .args("key:key cursor:integer [MATCH=pattern:pattern] [COUNT=count:integer]"),
];

fn bulks(v: Vec<Bytes>) -> Vec<Reply> {
    v.into_iter().map(Reply::Bulk).collect()
}

/// Runs `f` on the set at `key` for a read (`None` when there is no such key).
fn read_set<R>(
    ctx: &mut Ctx<'_>,
    key: &Bytes,
    f: impl FnOnce(Option<&SetValue>) -> R,
) -> CommandResult<R> {
    Ok(ctx.server.store.with_key(ctx.client.db, key, |ks, h| {
        ks.read_as::<SetValue, _>(h, key, f)
    })?)
}

fn sadd(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let key = args.next_key()?;
    let members = args.rest();
    let db = ctx.client.db;
    ctx.server.store.with_key(db, key, |ks, h| {
        let n = ks
            .write_as::<SetValue, _>(h, key, true, |s| {
                // A new key starts in the encoding Redis 7.2 picks from the argument count;
                // an existing packed set too small for that many converts first.
                if let Some(first) = members.first().filter(|_| s.is_empty()) {
                    *s = SetValue::create_for(first, members.len());
                } else {
                    s.maybe_convert(members.len());
                }
                let n = members.iter().filter(|m| s.insert(m)).count();
                (n, n > 0)
            })?
            .unwrap_or(0);
        if n > 0 {
            ctx.server.notify(db, class::SET, "sadd", key);
        }
        Ok(Reply::Int(n as i64))
    })
}

fn srem(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let key = args.next_key()?;
    let members = args.rest();
    let db = ctx.client.db;
    ctx.server.store.with_key(db, key, |ks, h| {
        let n = ks
            .write_as::<SetValue, _>(h, key, false, |s| {
                let mut n = 0;
                for m in members {
                    if s.remove(m) {
                        n += 1;
                        if s.is_empty() {
                            break;
                        }
                    }
                }
                (n, n > 0)
            })?
            .unwrap_or(0);
        if n > 0 {
            ctx.server.notify(db, class::SET, "srem", key);
            if !ks.contains(h, key) {
                ctx.server.notify(db, class::GENERIC, "del", key);
            }
        }
        Ok(Reply::Int(n))
    })
}

fn smembers(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let key = args.next_key()?;
    read_set(ctx, key, |s| {
        Reply::Set(s.map_or_else(Vec::new, |s| bulks(s.to_bytes())))
    })
}

fn sismember(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let (key, member) = (args.next_key()?, args.next_arg()?);
    read_set(ctx, key, |s| {
        Reply::Int(s.is_some_and(|s| s.contains(member)) as i64)
    })
}

fn smismember(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let key = args.next_key()?;
    let members = args.rest();
    read_set(ctx, key, |s| {
        Reply::Array(
            members
                .iter()
                .map(|m| Reply::Int(s.is_some_and(|s| s.contains(m)) as i64))
                .collect(),
        )
    })
}

fn scard(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let key = args.next_key()?;
    read_set(ctx, key, |s| Reply::Int(s.map_or(0, |s| s.len()) as i64))
}

fn spop(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let key = args.next_key()?;
    let count = match args.next_opt() {
        None => None,
        Some(c) => {
            if !args.is_empty() {
                return Err(CommandError::syntax());
            }
            // Redis's getPositiveLongFromObjectOrReply: one message for both failures.
            match parse_i64(c) {
                Some(n) if n >= 0 => Some(n as u64),
                _ => {
                    return Err(CommandError::msg(
                        "ERR value is out of range, must be positive",
                    ))
                }
            }
        }
    };
    let db = ctx.client.db;
    ctx.server.store.with_key(db, key, |ks, h| {
        let size = match ks.peek(h, key) {
            None => {
                return Ok(if count.is_some() {
                    Reply::Set(vec![])
                } else {
                    Reply::Nil
                })
            }
            Some(e) => match &e.value {
                Value::Set(s) => s.len(),
                _ => return Err(CommandError::wrongtype()),
            },
        };
        let reply = match count {
            Some(0) => return Ok(Reply::Set(vec![])),
            None => {
                let m = ks
                    .write_as::<SetValue, _>(h, key, false, |s| (s.pop_random(rand_u64()), true))?
                    .flatten();
                // Journaled as the removal of what it popped (Redis 7: SREM).
                if let Some(m) = &m {
                    crate::commands::journal::journal_as(&[b"SREM", key, m]);
                }
                m.map_or(Reply::Nil, Reply::Bulk)
            }
            Some(n) if n >= size as u64 => {
                // The whole set: returned, then the key is deleted.
                let all = match ks.remove(h, key).map(|e| e.value) {
                    Some(Value::Set(s)) => s.to_bytes(),
                    _ => Vec::new(),
                };
                crate::commands::journal::journal_as(&[b"DEL", key]);
                Reply::Set(bulks(all))
            }
            Some(n) => {
                let popped = ks
                    .write_as::<SetValue, _>(h, key, false, |s| {
                        (s.pop_many(n as usize, &mut rand_u64), true)
                    })?
                    .unwrap_or_default();
                if crate::store::journal::recording() {
                    let mut argv: Vec<Vec<u8>> = vec![b"SREM".to_vec(), key.to_vec()];
                    argv.extend(popped.iter().map(|m| m.to_vec()));
                    crate::commands::journal::journal_as_many(vec![argv]);
                }
                Reply::Set(bulks(popped))
            }
        };
        ctx.server.notify(db, class::SET, "spop", key);
        if !ks.contains(h, key) {
            ctx.server.notify(db, class::GENERIC, "del", key);
        }
        Ok(reply)
    })
}

fn srandmember(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let key = args.next_key()?;
    let count = match args.next_opt() {
        None => None,
        Some(c) => {
            if !args.is_empty() {
                return Err(CommandError::syntax());
            }
            match parse_i64(c) {
                Some(i64::MIN) => {
                    return Err(CommandError::msg(
                        "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807",
                    ))
                }
                Some(n) => Some(n),
                None => return Err(CommandError::not_integer()),
            }
        }
    };
    read_set(ctx, key, |s| {
        let Some(count) = count else {
            return s
                .and_then(|s| s.random(rand_u64()))
                .map_or(Reply::Nil, |m| Reply::Bulk(Bytes::from(m.into_owned())));
        };
        let Some(s) = s.filter(|s| !s.is_empty() && count != 0) else {
            return Reply::Array(vec![]);
        };
        let n = s.len();
        if count < 0 || count == 1 {
            // Repetitions allowed.
            let k = (count.unsigned_abs() as usize).min(MAX_RANDOM_REPLY);
            if k >= n {
                // Each member copied once; the picks share it.
                let all = s.to_bytes();
                let mut out = Vec::with_capacity(k.min(1 << 16));
                for _ in 0..k {
                    out.push(Reply::Bulk(all[(rand_u64() % n as u64) as usize].clone()));
                }
                return Reply::Array(out);
            }
            let picks: Vec<usize> = (0..k).map(|_| (rand_u64() % n as u64) as usize).collect();
            return Reply::Array(bulks(s.members_at(&picks)));
        }
        if count as u64 >= n as u64 {
            return Reply::Array(bulks(s.to_bytes()));
        }
        let pos = distinct_positions(n, count as usize, &mut rand_u64);
        Reply::Array(bulks(s.members_at(&pos)))
    })
}

fn smove(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let (src, dst, member) = (args.next_key()?, args.next_key()?, args.next_arg()?);
    let db = ctx.client.db;
    let mut l = ctx.server.store.lock_keys(&[src, dst]);
    let (hs, hd) = (l.hash(0), l.hash(1));
    match l.ks(0, db).peek(hs, src) {
        None => return Ok(Reply::Int(0)),
        Some(e) if !matches!(e.value, Value::Set(_)) => return Err(CommandError::wrongtype()),
        Some(_) => {}
    }
    if matches!(l.ks(1, db).peek(hd, dst), Some(e) if !matches!(e.value, Value::Set(_))) {
        return Err(CommandError::wrongtype());
    }
    if src == dst {
        let is = matches!(l.ks(0, db).peek(hs, src),
            Some(e) if matches!(&e.value, Value::Set(s) if s.contains(member)));
        return Ok(Reply::Int(is as i64));
    }
    let removed = l
        .ks(0, db)
        .write_as::<SetValue, _>(hs, src, false, |s| {
            let r = s.remove(member);
            (r, r)
        })?
        .unwrap_or(false);
    if !removed {
        return Ok(Reply::Int(0));
    }
    ctx.server.notify(db, class::SET, "srem", src);
    if !l.ks(0, db).contains(hs, src) {
        ctx.server.notify(db, class::GENERIC, "del", src);
    }
    let added = l
        .ks(1, db)
        .write_as::<SetValue, _>(hd, dst, true, |s| {
            if s.is_empty() {
                *s = SetValue::create_for(member, 1);
            }
            let a = s.insert(member);
            (a, a)
        })?
        .unwrap_or(false);
    if added {
        ctx.server.notify(db, class::SET, "sadd", dst);
    }
    Ok(Reply::Int(1))
}

/// The sets at `keys` (positions `first..` of the locked keys), read once each: their sizes
/// (`None` for a missing key), or WRONGTYPE if any is not a set. Counts hits and misses as
/// Redis's `lookupKeyRead` does.
fn sizes(
    l: &mut crate::store::multi::Locked<'_>,
    db: usize,
    keys: &[Bytes],
    first: usize,
) -> CommandResult<Vec<Option<usize>>> {
    let mut out = Vec::with_capacity(keys.len());
    for (i, k) in keys.iter().enumerate().skip(first) {
        let h = l.hash(i);
        out.push(
            l.ks(i, db)
                .read_as::<SetValue, _>(h, k, |s| s.map(|s| s.len()))?,
        );
    }
    Ok(out)
}

/// Runs `f` on the set at locked key `i` (already type-checked), without touching stats.
fn with_set<R>(
    l: &mut crate::store::multi::Locked<'_>,
    db: usize,
    i: usize,
    key: &[u8],
    f: impl FnOnce(&SetValue) -> R,
) -> Option<R> {
    let h = l.hash(i);
    match l.ks(i, db).peek(h, key) {
        Some(e) => match &e.value {
            Value::Set(s) => Some(f(s)),
            _ => None,
        },
        None => None,
    }
}

/// The intersection of the sets at `keys[first..]`, in the order of the smallest set (empty
/// when a key is missing), or WRONGTYPE if any key holds another type. With a `limit` (> 0,
/// SINTERCARD's LIMIT) it stops once that many members are found: the smallest set's members
/// go through the other sets in chunks.
fn intersect(
    l: &mut crate::store::multi::Locked<'_>,
    db: usize,
    keys: &[Bytes],
    first: usize,
    limit: usize,
) -> CommandResult<Vec<Bytes>> {
    const CHUNK: usize = 1024;
    let sizes = sizes(l, db, keys, first)?;
    if sizes.iter().any(Option::is_none) {
        return Ok(Vec::new());
    }
    let mut order: Vec<usize> = (first..keys.len()).collect();
    order.sort_by_key(|&i| sizes[i - first]);
    let Some((&smallest, rest)) = order.split_first() else {
        return Ok(Vec::new());
    };
    let size = sizes[smallest - first].unwrap_or(0);
    let mut out = Vec::new();
    let mut start = 0;
    while start < size {
        let mut part = with_set(l, db, smallest, &keys[smallest], |s| {
            s.iter()
                .skip(start)
                .take(CHUNK)
                .map(|m| Bytes::from(m.into_owned()))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
        start += CHUNK;
        for &i in rest {
            if part.is_empty() {
                break;
            }
            if keys[i] == keys[smallest] {
                continue;
            }
            with_set(l, db, i, &keys[i], |s| part.retain(|m| s.contains(m)));
        }
        out.extend(part);
        if limit > 0 && out.len() >= limit {
            out.truncate(limit);
            break;
        }
    }
    Ok(out)
}

/// The union (`diff` false) or difference of the sets at `keys[first..]`, built as Redis
/// builds it: a fresh set (an intset at first) the members are added to.
fn union_diff(
    l: &mut crate::store::multi::Locked<'_>,
    db: usize,
    keys: &[Bytes],
    first: usize,
    diff: bool,
) -> CommandResult<SetValue> {
    let sizes = sizes(l, db, keys, first)?;
    let mut out = SetValue::default();
    if !diff {
        for (i, k) in keys.iter().enumerate().skip(first) {
            with_set(l, db, i, k, |s| {
                for m in s.iter() {
                    out.insert(&m);
                }
            });
        }
        return Ok(out);
    }
    if sizes.first().copied().flatten().is_none() {
        return Ok(out);
    }
    if keys[first + 1..].contains(&keys[first]) {
        // The first set is subtracted from itself.
        return Ok(out);
    }
    with_set(l, db, first, &keys[first], |s| {
        for m in s.iter() {
            out.insert(&m);
        }
    });
    for (i, k) in keys.iter().enumerate().skip(first + 1) {
        if out.is_empty() {
            break;
        }
        with_set(l, db, i, k, |s| {
            if s.len() < out.len() {
                for m in s.iter() {
                    out.remove(&m);
                }
            } else {
                out.retain(|m| !s.contains(m));
            }
        });
    }
    Ok(out)
}

/// Stores `result` at the locked key 0 (`dst`), replacing whatever is there; an empty result
/// deletes it. Replies with the result's size.
fn store(
    ctx: &mut Ctx<'_>,
    l: &mut crate::store::multi::Locked<'_>,
    dst: &[u8],
    result: SetValue,
    event: &'static str,
) -> Reply {
    let db = ctx.client.db;
    let h = l.hash(0);
    let ks = l.ks(0, db);
    let n = result.len();
    if n > 0 {
        ks.set(h, dst, Value::Set(Box::new(result)), Ttl::Clear);
        ctx.server.notify(db, class::SET, event, dst);
    } else if ks.remove(h, dst).is_some() {
        ctx.server.notify(db, class::GENERIC, "del", dst);
    }
    Reply::Int(n as i64)
}

fn sinter(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let keys = args.rest();
    let mut l = ctx.server.store.lock_keys(keys);
    Ok(Reply::Set(bulks(intersect(
        &mut l,
        ctx.client.db,
        keys,
        0,
        0,
    )?)))
}

fn sintercard(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let numkeys_err = || CommandError::msg("ERR numkeys should be greater than 0");
    let numkeys = parse_i64(args.next_arg()?).ok_or_else(numkeys_err)?;
    if numkeys < 1 {
        return Err(numkeys_err());
    }
    if numkeys as u64 > args.len() as u64 {
        return Err(CommandError::msg(
            "ERR Number of keys can't be greater than number of args",
        ));
    }
    let rest = args.rest();
    let (keys, opts) = rest.split_at(numkeys as usize);
    let mut limit = 0u64;
    let mut i = 0;
    while i < opts.len() {
        if crate::commands::is(&opts[i], "LIMIT") && i + 1 < opts.len() {
            limit = match parse_i64(&opts[i + 1]) {
                Some(n) if n >= 0 => n as u64,
                _ => return Err(CommandError::msg("ERR LIMIT can't be negative")),
            };
            i += 2;
        } else {
            return Err(CommandError::syntax());
        }
    }
    let mut l = ctx.server.store.lock_keys(keys);
    let n = intersect(&mut l, ctx.client.db, keys, 0, limit as usize)?.len() as u64;
    Ok(Reply::Int(n as i64))
}

fn sunion(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let keys = args.rest();
    let mut l = ctx.server.store.lock_keys(keys);
    let s = union_diff(&mut l, ctx.client.db, keys, 0, false)?;
    Ok(Reply::Set(bulks(s.to_bytes())))
}

fn sdiff(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let keys = args.rest();
    let mut l = ctx.server.store.lock_keys(keys);
    let s = union_diff(&mut l, ctx.client.db, keys, 0, true)?;
    Ok(Reply::Set(bulks(s.to_bytes())))
}

fn sinterstore(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let keys = args.rest();
    let mut l = ctx.server.store.lock_keys(keys);
    let members = intersect(&mut l, ctx.client.db, keys, 1, 0)?;
    let result = SetValue::from_members(members.iter().map(|m| &m[..]));
    Ok(store(ctx, &mut l, &keys[0], result, "sinterstore"))
}

fn sunionstore(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let keys = args.rest();
    let mut l = ctx.server.store.lock_keys(keys);
    let result = union_diff(&mut l, ctx.client.db, keys, 1, false)?;
    Ok(store(ctx, &mut l, &keys[0], result, "sunionstore"))
}

fn sdiffstore(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let keys = args.rest();
    let mut l = ctx.server.store.lock_keys(keys);
    let result = union_diff(&mut l, ctx.client.db, keys, 1, true)?;
    Ok(store(ctx, &mut l, &keys[0], result, "sdiffstore"))
}

/// SSCAN: a packed set comes whole with cursor 0 (as Redis returns an intset or listpack);
/// a hashtable is walked with a cursor that survives removals (see `SetValue::scan_table`).
fn sscan(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let key = args.next_key()?;
    let cursor = scan_cursor(args)?;
    let opts = scan_opts(args, false);
    read_set(ctx, key, |s| {
        let Some(s) = s else {
            return Ok(Reply::Array(vec![
                Reply::bulk_str("0"),
                Reply::Array(vec![]),
            ]));
        };
        let o = opts?;
        let (next, members) = match s.scan_table(cursor, o.count) {
            Some(r) => r,
            None => (0, s.to_bytes()),
        };
        let out = members
            .into_iter()
            .filter(|m| o.pattern.as_ref().is_none_or(|p| glob_match(p, m, false)))
            .map(Reply::Bulk)
            .collect();
        Ok(Reply::Array(vec![
            Reply::bulk(Bytes::from(next.to_string())),
            Reply::Array(out),
        ]))
    })?
}
