//! Hashes family: HSET HGET HGETALL HINCRBY HSCAN ...
//! Table entries transcribed from Redis 7's COMMAND INFO / COMMAND DOCS; handlers below.
use crate::commands::args::{
    random_count_args, Args, CommandError, CommandResult, MAX_RANDOM_REPLY,
};
use crate::commands::keys::{scan_cursor, scan_opts};
use crate::commands::spec::{acl, family, flag::*, Begin, CmdResult, CommandSpec, Find, KeySpec};
use crate::commands::strings::human_float;
use crate::commands::Ctx;
use crate::protocol::Reply;
use crate::state::pubsub::class;
use crate::store::eviction::rand_u64;
use crate::store::set::distinct_positions;
use crate::store::HashValue;
use crate::util::glob::glob_match;
use crate::util::num::{parse_f64, parse_i64};
use bytes::Bytes;

const HASH: CommandSpec = family("hash", acl::HASH);

const HMSET_KEYS: &[KeySpec] = &[KeySpec {
    flags: &["RW", "update"],
    begin: Begin::Index(1),
    find: Find::Range {
        last: 0,
        step: 1,
        limit: 0,
    },
}];

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    HASH.cmd("hset", -4, hset).flags(WRITE | DENYOOM | FAST).key().key_spec_flags(&["RW", "update"])
        .doc("2.0.0", "Set the string value of a hash field")
        .complexity("O(1) for each field/value pair added, so O(N) to add N field/value pairs when the command is called with multiple field/value pairs.")
        .args("key:key field_value:{field value}..."),
    HASH.cmd("hmset", -4, hmset).flags(WRITE | DENYOOM | FAST).key().key_specs(HMSET_KEYS)
        .doc("2.0.0", "Set multiple hash fields to multiple values (deprecated since 4.0.0; use HSET with multiple field-value pairs)")
        .complexity("O(N) where N is the number of fields being set.")
        .args("key:key field_value:{field value}..."),
    HASH.cmd("hsetnx", 4, hsetnx).flags(WRITE | DENYOOM | FAST).key().key_spec_flags(&["RW", "insert"])
        .doc("2.0.0", "Set the value of a hash field, only if the field does not exist")
        .args("key:key field value"),
    HASH.cmd("hget", 3, hget).flags(READONLY | FAST).key()
        .doc("2.0.0", "Get the value of a hash field").args("key:key field"),
    HASH.cmd("hmget", -3, hmget).flags(READONLY | FAST).key()
        .doc("2.0.0", "Get the values of all the given hash fields")
        .complexity("O(N) where N is the number of fields being requested.")
        .args("key:key field..."),
    HASH.cmd("hgetall", 2, hgetall).flags(READONLY).key()
        .doc("2.0.0", "Get all the fields and values in a hash")
        .complexity("O(N) where N is the size of the hash.").args("key:key"),
    HASH.cmd("hdel", -3, hdel).flags(WRITE | FAST).key().key_spec_flags(&["RW", "delete"])
        .doc("2.0.0", "Delete one or more hash fields")
        .complexity("O(N) where N is the number of fields to be removed.").args("key:key field..."),
    HASH.cmd("hexists", 3, hexists).flags(READONLY | FAST).key().key_spec_flags(&["RO"])
        .doc("2.0.0", "Determine if a hash field exists").args("key:key field"),
    HASH.cmd("hlen", 2, hlen).flags(READONLY | FAST).key().key_spec_flags(&["RO"])
        .doc("2.0.0", "Get the number of fields in a hash").args("key:key"),
    HASH.cmd("hkeys", 2, hkeys).flags(READONLY).key()
        .doc("2.0.0", "Get all the fields in a hash")
        .complexity("O(N) where N is the size of the hash.").args("key:key"),
    HASH.cmd("hvals", 2, hvals).flags(READONLY).key()
        .doc("2.0.0", "Get all the values in a hash")
        .complexity("O(N) where N is the size of the hash.").args("key:key"),
    HASH.cmd("hincrby", 4, hincrby).flags(WRITE | DENYOOM | FAST).key().key_spec_flags(&["RW", "access", "update"])
        .doc("2.0.0", "Increment the integer value of a hash field by the given number")
        .args("key:key field increment:integer"),
    HASH.cmd("hincrbyfloat", 4, hincrbyfloat).flags(WRITE | DENYOOM | FAST).key().key_spec_flags(&["RW", "access", "update"])
        .doc("2.6.0", "Increment the float value of a hash field by the given amount")
        .args("key:key field increment:double"),
    HASH.cmd("hstrlen", 3, hstrlen).flags(READONLY | FAST).key().key_spec_flags(&["RO"])
        .doc("3.2.0", "Get the length of the value of a hash field").args("key:key field"),
    HASH.cmd("hscan", -3, hscan).flags(READONLY).key()
        .doc("2.8.0", "Incrementally iterate hash fields and associated values")
        .complexity("O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of elements inside the collection..")
        .args("key:key cursor:integer [MATCH=pattern:pattern] [COUNT=count:integer]"),
    HASH.cmd("hrandfield", -2, hrandfield).flags(READONLY).key()
        .doc("6.2.0", "Get one or multiple random fields from a hash")
        .complexity("O(N) where N is the number of fields returned")
        .args("key:key [options:{count:integer [WITHVALUES]}]"),
];

fn bulk(b: &[u8]) -> Reply {
    Reply::Bulk(Bytes::copy_from_slice(b))
}

/// Runs `f` on the hash at `key` for a read (`None` when there is no such key).
fn read_hash(
    ctx: &mut Ctx<'_>,
    key: &Bytes,
    f: impl FnOnce(Option<&HashValue>) -> Reply,
) -> CmdResult {
    ctx.server.store.with_key(ctx.client.db, key, |ks, h| {
        Ok(ks.read_as::<HashValue, _>(h, key, f)?)
    })
}

/// Runs `f` on the hash at `key` for a write through the key space's one aggregate write
/// path (created when missing, stored only if `f` left fields in it); `f` says whether it
/// changed anything. The packed form gives back its spare capacity after each write.
fn write_hash(
    ctx: &mut Ctx<'_>,
    key: &Bytes,
    event: &'static str,
    f: impl FnOnce(&mut HashValue) -> CommandResult<(Reply, bool)>,
) -> CmdResult {
    let db = ctx.client.db;
    ctx.server.store.with_key(db, key, |ks, h| {
        let r = ks.write_as::<HashValue, _>(h, key, true, |hv| {
            let r = f(hv);
            let changed = matches!(r, Ok((_, true)));
            (r, changed)
        })?;
        let (reply, changed) = r.unwrap_or(Ok((Reply::Nil, false)))?;
        if changed {
            ctx.server.notify(db, class::HASH, event, key);
        }
        Ok(reply)
    })
}

fn hset(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let key = args.next_key()?;
    let pairs = args.pairs()?;
    write_hash(ctx, key, "hset", |hv| {
        hv.try_conversion(pairs.clone().flatten().map(|a| &a[..]));
        let added = pairs.filter(|p| hv.insert(&p[0], &p[1])).count();
        Ok((Reply::Int(added as i64), true))
    })
}

/// HMSET: HSET replying +OK.
fn hmset(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let key = args.next_key()?;
    let pairs = args.pairs()?;
    write_hash(ctx, key, "hset", |hv| {
        hv.try_conversion(pairs.clone().flatten().map(|a| &a[..]));
        pairs.for_each(|p| {
            hv.insert(&p[0], &p[1]);
        });
        Ok((Reply::ok(), true))
    })
}

fn hsetnx(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let (key, field, value) = (args.next_key()?, args.next_arg()?, args.next_arg()?);
    write_hash(ctx, key, "hset", |hv| {
        if hv.get(field).is_some() {
            Ok((Reply::Int(0), false))
        } else {
            hv.insert(field, value);
            Ok((Reply::Int(1), true))
        }
    })
}

fn hget(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let (key, field) = (args.next_key()?, args.next_arg()?);
    read_hash(ctx, key, |hv| {
        hv.and_then(|hv| hv.get(field)).map_or(Reply::Nil, bulk)
    })
}

fn hmget(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let key = args.next_key()?;
    let fields = args.rest();
    read_hash(ctx, key, |hv| {
        Reply::Array(
            fields
                .iter()
                .map(|f| hv.and_then(|hv| hv.get(f)).map_or(Reply::Nil, bulk))
                .collect(),
        )
    })
}

fn hgetall(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    read_hash(ctx, args.next_key()?, |hv| {
        Reply::Map(hv.map_or_else(Vec::new, |hv| {
            hv.iter().map(|(f, v)| (bulk(f), bulk(v))).collect()
        }))
    })
}

fn hdel(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let key = args.next_key()?;
    let fields = args.rest();
    let db = ctx.client.db;
    ctx.server.store.with_key(db, key, |ks, h| {
        let mut emptied = false;
        let n = ks
            .write_as::<HashValue, _>(h, key, false, |hv| {
                let n = fields.iter().filter(|f| hv.remove(f)).count();
                emptied = hv.is_empty();
                (n, n > 0)
            })?
            .unwrap_or(0);
        if n > 0 {
            ctx.server.notify(db, class::HASH, "hdel", key);
            if emptied {
                ctx.server.notify(db, class::GENERIC, "del", key);
            }
        }
        Ok(Reply::Int(n as i64))
    })
}

fn hexists(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let (key, field) = (args.next_key()?, args.next_arg()?);
    read_hash(ctx, key, |hv| {
        Reply::Int(hv.is_some_and(|hv| hv.get(field).is_some()) as i64)
    })
}

fn hlen(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    read_hash(ctx, args.next_key()?, |hv| {
        Reply::Int(hv.map_or(0, |hv| hv.len()) as i64)
    })
}

fn hkeys(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    read_hash(ctx, args.next_key()?, |hv| {
        Reply::Array(hv.map_or_else(Vec::new, |hv| hv.iter().map(|(f, _)| bulk(f)).collect()))
    })
}

fn hvals(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    read_hash(ctx, args.next_key()?, |hv| {
        Reply::Array(hv.map_or_else(Vec::new, |hv| hv.iter().map(|(_, v)| bulk(v)).collect()))
    })
}

fn hincrby(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let (key, field) = (args.next_key()?, args.next_arg()?);
    let by = args.next_i64()?;
    write_hash(ctx, key, "hincrby", |hv| {
        let cur = match hv.get(field) {
            None => 0,
            Some(v) => {
                parse_i64(v).ok_or_else(|| CommandError::msg("ERR hash value is not an integer"))?
            }
        };
        let n = cur
            .checked_add(by)
            .ok_or_else(|| CommandError::msg("ERR increment or decrement would overflow"))?;
        hv.insert(field, itoa::Buffer::new().format(n).as_bytes());
        Ok((Reply::Int(n), true))
    })
}

fn hincrbyfloat(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let (key, field) = (args.next_key()?, args.next_arg()?);
    let by = args.next_f64()?;
    if !by.is_finite() {
        return Err(CommandError::msg("ERR value is NaN or Infinity"));
    }
    write_hash(ctx, key, "hincrbyfloat", |hv| {
        let cur = match hv.get(field) {
            None => 0.0,
            Some(v) => {
                parse_f64(v).ok_or_else(|| CommandError::msg("ERR hash value is not a float"))?
            }
        };
        let n = cur + by;
        if !n.is_finite() {
            return Err(CommandError::msg(
                "ERR increment would produce NaN or Infinity",
            ));
        }
        let text = human_float(n);
        // Journaled as its result (Redis 7 propagates HSET).
        crate::commands::journal::journal_as(&[b"HSET", key, field, text.as_bytes()]);
        hv.insert(field, text.as_bytes());
        Ok((Reply::bulk(text), true))
    })
}

fn hstrlen(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let (key, field) = (args.next_key()?, args.next_arg()?);
    read_hash(ctx, key, |hv| {
        Reply::Int(hv.and_then(|hv| hv.get(field)).map_or(0, |v| v.len()) as i64)
    })
}

/// HSCAN: a listpack hash is returned whole with cursor 0 (as Redis does); a hashtable in
/// batches of about COUNT fields under a cursor that never misses a field present for the
/// whole iteration (see `HashValue::scan_table`).
fn hscan(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let key = args.next_key()?;
    let cursor = scan_cursor(args)?;
    let o = scan_opts(args, false)?;
    read_hash(ctx, key, |hv| {
        let mut out = Vec::new();
        let mut next = 0;
        let mut push = |f: &[u8], v: &[u8]| {
            if o.pattern.as_ref().is_none_or(|p| glob_match(p, f, false)) {
                out.push(bulk(f));
                out.push(bulk(v));
            }
        };
        if let Some(hv) = hv {
            match hv.scan_table(cursor, o.count) {
                Some((c, batch)) => {
                    next = c;
                    batch.into_iter().for_each(|(f, v)| push(f, v));
                }
                None => hv.iter().for_each(|(f, v)| push(f, v)),
            }
        }
        Reply::Array(vec![Reply::bulk(next.to_string()), Reply::Array(out)])
    })
}

fn hrandfield(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let resp3 = ctx.client.resp3;
    let key = args.next_key()?;
    let (count, withvalues) = random_count_args(args, "WITHVALUES")?;
    read_hash(ctx, key, |hv| {
        let Some(count) = count else {
            return match hv {
                None => Reply::Nil,
                Some(hv) => hv
                    .nth(rand_u64() as usize % hv.len().max(1))
                    .map_or(Reply::Nil, |(f, _)| bulk(f)),
            };
        };
        let Some(hv) = hv.filter(|hv| !hv.is_empty()) else {
            return Reply::Array(vec![]);
        };
        let picks: Vec<(&[u8], &[u8])> = if count >= 0 {
            let n = (count as usize).min(hv.len());
            if n == hv.len() {
                hv.iter().collect()
            } else {
                // Distinct fields, each subset equally likely (the work bounded by the size).
                hv.pairs_at(&distinct_positions(hv.len(), n, &mut || rand_u64()))
            }
        } else {
            // Repetitions allowed: the reply is as long as asked, up to a bound that keeps
            // one request from exhausting memory (Redis would build it whatever its size).
            let n = (count.unsigned_abs() as usize).min(MAX_RANDOM_REPLY);
            let mut v = Vec::with_capacity(n.min(1 << 16));
            if hv.encoding() == "hashtable" {
                // A position is one index away in a hashtable.
                for _ in 0..n {
                    v.extend(hv.nth(rand_u64() as usize % hv.len()));
                }
            } else {
                let all: Vec<(&[u8], &[u8])> = hv.iter().collect();
                for _ in 0..n {
                    v.push(all[rand_u64() as usize % all.len()]);
                }
            }
            v
        };
        let out = picks
            .into_iter()
            .map(|(f, v)| {
                if !withvalues {
                    bulk(f)
                } else if resp3 {
                    Reply::Array(vec![bulk(f), bulk(v)])
                } else {
                    Reply::Multi(vec![bulk(f), bulk(v)])
                }
            })
            .collect::<Vec<_>>();
        if withvalues && !resp3 {
            // RESP2: a flat array of field, value, field, value.
            let mut flat = Vec::with_capacity(out.len() * 2);
            for r in out {
                if let Reply::Multi(p) = r {
                    flat.extend(p);
                }
            }
            return Reply::Array(flat);
        }
        Reply::Array(out)
    })
}
