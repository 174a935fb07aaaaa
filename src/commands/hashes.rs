//! Hashes family: HSET HGET HGETALL HINCRBY HSCAN ...
//! Table entries transcribed from Redis 7's COMMAND INFO / COMMAND DOCS; handlers below.
use crate::commands::args::{
    random_count_args, Args, CommandError, CommandResult, MAX_RANDOM_REPLY,
};
use crate::commands::keys::scan_cursor;
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

const RW_UPDATE: &[KeySpec] = &[KeySpec::at(1, &["RW", "update"])];
const RO_ACCESS: &[KeySpec] = &[KeySpec::at(1, &["RO", "access"])];

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
        .args("key:key cursor:integer [MATCH=pattern:pattern] [COUNT=count:integer] [NOVALUES]"),
    HASH.cmd("hrandfield", -2, hrandfield).flags(READONLY).key()
        .doc("6.2.0", "Get one or multiple random fields from a hash")
        .complexity("O(N) where N is the number of fields returned")
        .args("key:key [options:{count:integer [WITHVALUES]}]"),
    HASH.cmd("hexpire", -6, hexpire).flags(WRITE | DENYOOM | FAST).key().key_specs(RW_UPDATE)
        .doc("7.4.0", "Set expiry for hash field using relative time to expire (seconds)")
        .complexity("O(N) where N is the number of specified fields")
        .args("key:key seconds:integer [condition:(NX|XX|GT|LT)] FIELDS=fields:{numfields:integer field...}"),
    HASH.cmd("hpexpire", -6, hpexpire).flags(WRITE | DENYOOM | FAST).key().key_specs(RW_UPDATE)
        .doc("7.4.0", "Set expiry for hash field using relative time to expire (milliseconds)")
        .complexity("O(N) where N is the number of specified fields")
        .args("key:key milliseconds:integer [condition:(NX|XX|GT|LT)] FIELDS=fields:{numfields:integer field...}"),
    HASH.cmd("hexpireat", -6, hexpireat).flags(WRITE | DENYOOM | FAST).key().key_specs(RW_UPDATE)
        .doc("7.4.0", "Set expiry for hash field using an absolute Unix timestamp (seconds)")
        .complexity("O(N) where N is the number of specified fields")
        .args("key:key unix-time-seconds:unix-time [condition:(NX|XX|GT|LT)] FIELDS=fields:{numfields:integer field...}"),
    HASH.cmd("hpexpireat", -6, hpexpireat).flags(WRITE | DENYOOM | FAST).key().key_specs(RW_UPDATE)
        .doc("7.4.0", "Set expiry for hash field using an absolute Unix timestamp (milliseconds)")
        .complexity("O(N) where N is the number of specified fields")
        .args("key:key unix-time-milliseconds:unix-time [condition:(NX|XX|GT|LT)] FIELDS=fields:{numfields:integer field...}"),
    HASH.cmd("httl", -5, httl).flags(READONLY | FAST).key().key_specs(RO_ACCESS)
        .doc("7.4.0", "Returns the TTL in seconds of a hash field.")
        .complexity("O(N) where N is the number of specified fields")
        .args("key:key FIELDS=fields:{numfields:integer field...}"),
    HASH.cmd("hpttl", -5, hpttl).flags(READONLY | FAST).key().key_specs(RO_ACCESS)
        .doc("7.4.0", "Returns the TTL in milliseconds of a hash field.")
        .complexity("O(N) where N is the number of specified fields")
        .args("key:key FIELDS=fields:{numfields:integer field...}"),
    HASH.cmd("hexpiretime", -5, hexpiretime).flags(READONLY | FAST).key().key_specs(RO_ACCESS)
        .doc("7.4.0", "Returns the expiration time of a hash field as a Unix timestamp, in seconds.")
        .complexity("O(N) where N is the number of specified fields")
        .args("key:key FIELDS=fields:{numfields:integer field...}"),
    HASH.cmd("hpexpiretime", -5, hpexpiretime).flags(READONLY | FAST).key().key_specs(RO_ACCESS)
        .doc("7.4.0", "Returns the expiration time of a hash field as a Unix timestamp, in msec.")
        .complexity("O(N) where N is the number of specified fields")
        .args("key:key FIELDS=fields:{numfields:integer field...}"),
    HASH.cmd("hpersist", -5, hpersist).flags(WRITE | FAST).key().key_specs(RW_UPDATE)
        .doc("7.4.0", "Removes the expiration time for each specified field")
        .complexity("O(N) where N is the number of specified fields")
        .args("key:key FIELDS=fields:{numfields:integer field...}"),
];

fn bulk(b: &[u8]) -> Reply {
    Reply::Bulk(Bytes::copy_from_slice(b))
}

/// Runs `f` on the hash at `key` for a read (`None` when there is no such key), after
/// deleting those of `fields` that are past their deadline (Redis 7.4's lazy expiry of
/// the fields a command looks up; other expired fields stay until the sweep or a lookup).
fn read_hash(
    ctx: &mut Ctx<'_>,
    key: &Bytes,
    fields: &[&[u8]],
    f: impl FnOnce(Option<&HashValue>) -> Reply,
) -> CmdResult {
    ctx.server.store.with_key(ctx.client.db, key, |ks, h| {
        purge_fields(ctx, ks, h, key, fields);
        Ok(ks.read_as::<HashValue, _>(h, key, f)?)
    })
}

/// A read that deletes nothing: the reader skips or counts fields past their deadline
/// itself (HLEN counts them, HGETALL skips them, as Redis 7.4's).
fn read_hash_raw(
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
    lazy: &[&[u8]],
    f: impl FnOnce(&mut HashValue) -> CommandResult<(Reply, bool)>,
) -> CmdResult {
    let db = ctx.client.db;
    ctx.server.store.with_key(db, key, |ks, h| {
        purge_fields(ctx, ks, h, key, lazy);
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
    write_hash(ctx, key, "hset", &[], |hv| {
        hv.try_conversion(pairs.clone().flatten().map(|a| &a[..]));
        let added = pairs.filter(|p| hv.insert(&p[0], &p[1])).count();
        Ok((Reply::Int(added as i64), true))
    })
}

/// HMSET: HSET replying +OK.
fn hmset(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let key = args.next_key()?;
    let pairs = args.pairs()?;
    write_hash(ctx, key, "hset", &[], |hv| {
        hv.try_conversion(pairs.clone().flatten().map(|a| &a[..]));
        pairs.for_each(|p| {
            hv.insert(&p[0], &p[1]);
        });
        Ok((Reply::ok(), true))
    })
}

fn hsetnx(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let (key, field, value) = (args.next_key()?, args.next_arg()?, args.next_arg()?);
    write_hash(ctx, key, "hset", &[field], |hv| {
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
    read_hash(ctx, key, &[field], |hv| {
        hv.and_then(|hv| hv.get(field)).map_or(Reply::Nil, bulk)
    })
}

fn hmget(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let key = args.next_key()?;
    let fields = args.rest();
    let lazy: Vec<&[u8]> = fields.iter().map(|f| &f[..]).collect();
    read_hash(ctx, key, &lazy, |hv| {
        Reply::Array(
            fields
                .iter()
                .map(|f| hv.and_then(|hv| hv.get(f)).map_or(Reply::Nil, bulk))
                .collect(),
        )
    })
}

fn hgetall(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let now = crate::util::clock::now_ms();
    read_hash_raw(ctx, args.next_key()?, |hv| {
        Reply::Map(hv.map_or_else(Vec::new, |hv| {
            hv.iter_live(now).map(|(f, v)| (bulk(f), bulk(v))).collect()
        }))
    })
}

fn hdel(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let key = args.next_key()?;
    let fields = args.rest();
    let db = ctx.client.db;
    ctx.server.store.with_key(db, key, |ks, h| {
        // Redis 7.4 deletes a field past its deadline like any other (HDEL replies 1).
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
    read_hash(ctx, key, &[field], |hv| {
        Reply::Int(hv.is_some_and(|hv| hv.get(field).is_some()) as i64)
    })
}

fn hlen(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    read_hash_raw(ctx, args.next_key()?, |hv| {
        Reply::Int(hv.map_or(0, |hv| hv.len()) as i64)
    })
}

fn hkeys(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let now = crate::util::clock::now_ms();
    read_hash_raw(ctx, args.next_key()?, |hv| {
        Reply::Array(hv.map_or_else(Vec::new, |hv| {
            hv.iter_live(now).map(|(f, _)| bulk(f)).collect()
        }))
    })
}

fn hvals(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let now = crate::util::clock::now_ms();
    read_hash_raw(ctx, args.next_key()?, |hv| {
        Reply::Array(hv.map_or_else(Vec::new, |hv| {
            hv.iter_live(now).map(|(_, v)| bulk(v)).collect()
        }))
    })
}

fn hincrby(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let (key, field) = (args.next_key()?, args.next_arg()?);
    let by = args.next_i64()?;
    write_hash(ctx, key, "hincrby", &[field], |hv| {
        let cur = match hv.get(field) {
            None => 0,
            Some(v) => {
                parse_i64(v).ok_or_else(|| CommandError::msg("ERR hash value is not an integer"))?
            }
        };
        let n = cur
            .checked_add(by)
            .ok_or_else(|| CommandError::msg("ERR increment or decrement would overflow"))?;
        hv.insert_keep_ttl(field, itoa::Buffer::new().format(n).as_bytes());
        Ok((Reply::Int(n), true))
    })
}

fn hincrbyfloat(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let (key, field) = (args.next_key()?, args.next_arg()?);
    let by = args.next_f64()?;
    if !by.is_finite() {
        return Err(CommandError::msg("ERR value is NaN or Infinity"));
    }
    write_hash(ctx, key, "hincrbyfloat", &[field], |hv| {
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
        hv.insert_keep_ttl(field, text.as_bytes());
        Ok((Reply::bulk(text), true))
    })
}

fn hstrlen(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let (key, field) = (args.next_key()?, args.next_arg()?);
    read_hash(ctx, key, &[field], |hv| {
        Reply::Int(hv.and_then(|hv| hv.get(field)).map_or(0, |v| v.len()) as i64)
    })
}

/// HSCAN: a listpack hash is returned whole with cursor 0 (as Redis does); a hashtable in
/// batches of about COUNT fields under a cursor that never misses a field present for the
/// whole iteration (see `HashValue::scan_table`).
fn hscan(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let key = args.next_key()?;
    let cursor = scan_cursor(args)?;
    // Redis's scan options, in any order, with NOVALUES (7.4) for hashes.
    let (mut pattern, mut count, mut novalues) = (None, 10usize, false);
    while let Some(kw) = args.next_token() {
        match &*kw {
            b"COUNT" if !args.is_empty() => {
                let n = args.next_i64()?;
                if n < 1 {
                    return Err(CommandError::syntax());
                }
                count = n as usize;
            }
            b"MATCH" if !args.is_empty() => {
                let p = args.next_arg()?.clone();
                pattern = if p.as_ref() == b"*" { None } else { Some(p) };
            }
            b"NOVALUES" => novalues = true,
            _ => return Err(CommandError::syntax()),
        }
    }
    let now = crate::util::clock::now_ms();
    read_hash_raw(ctx, key, |hv| {
        let mut out = Vec::new();
        let mut next = 0;
        let mut push = |f: &[u8], v: &[u8]| {
            if pattern.as_ref().is_none_or(|p| glob_match(p, f, false)) {
                out.push(bulk(f));
                if !novalues {
                    out.push(bulk(v));
                }
            }
        };
        if let Some(hv) = hv {
            match hv.scan_table(cursor, count, now) {
                Some((c, batch)) => {
                    next = c;
                    batch.into_iter().for_each(|(f, v)| push(f, v));
                }
                None => hv.iter_live(now).for_each(|(f, v)| push(f, v)),
            }
        }
        Reply::Array(vec![Reply::bulk(next.to_string()), Reply::Array(out)])
    })
}

fn hrandfield(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let resp3 = ctx.client.resp3;
    let key = args.next_key()?;
    let (count, withvalues) = random_count_args(args, "WITHVALUES")?;
    // Redis 7.4 deletes every expired field first, then picks among the rest.
    let now = crate::util::clock::now_ms();
    ctx.server.store.with_key(ctx.client.db, key, |ks, h| {
        purge_due(ctx, ks, h, key, now);
    });
    read_hash_raw(ctx, key, |hv| {
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

// ---- Hash-field expiration (Redis 7.4) ----

/// Redis 7.4's `HFE_MAX_ABS_TIME_MSEC`: the latest deadline a field may get.
const MAX_FIELD_DEADLINE: i64 = 0x0000_FFFF_FFFF_FFFF >> 2;

/// Fields purged per lock acquisition by the background sweep.
const SWEEP_BATCH: usize = 256;

/// Keys `(db, key)` whose hash has (or had) field deadlines, for the background sweep. An
/// entry may outlive its hash's deadlines (deleted, renamed, overwritten): the sweep drops
/// those it finds without any. A renamed, moved or restored hash is not in it under its
/// new name and has its fields expired lazily, on access.
fn registry() -> &'static parking_lot::Mutex<hashbrown::HashSet<(usize, Bytes)>> {
    static R: std::sync::OnceLock<parking_lot::Mutex<hashbrown::HashSet<(usize, Bytes)>>> =
        std::sync::OnceLock::new();
    R.get_or_init(Default::default)
}

/// Where that walk stands: `(db * shards + shard) * SEGMENTS + segment`.
static WALK: parking_lot::Mutex<u64> = parking_lot::Mutex::new(0);

/// Keys the walk looks at per sweep: a full pass over a million keys takes about 50 s at
/// `hz 10`, and a sweep never holds a shard lock for more than 256 segments.
const WALK_KEYS: usize = 2000;

fn register(db: usize, key: &Bytes) {
    registry().lock().insert((db, key.clone()));
}

/// One step of the walk: registers the hashes with deadlines it meets.
fn discover(server: &crate::state::Server, now: i64) {
    use crate::store::keyspace::SEGMENTS;
    let store = &server.store;
    let shards = store.shard_count() as u64;
    let segs = SEGMENTS as u64;
    let total = store.databases() as u64 * shards * segs;
    if total == 0 {
        return;
    }
    let mut pos = WALK.lock();
    let mut visited = 0usize;
    let mut steps = 0u64;
    let mut found: Vec<(usize, Bytes)> = Vec::new();
    while visited < WALK_KEYS && steps < total {
        if *pos >= total {
            *pos = 0;
        }
        let part = *pos / segs;
        let (db, shard) = ((part / shards) as usize, (part % shards) as usize);
        let g = store.lock(shard);
        let ks = &g.dbs[db].keys;
        if ks.is_empty() {
            let next = (part + 1) * segs;
            steps += next - *pos;
            *pos = next;
            continue;
        }
        let mut n = 0;
        while *pos / segs == part && n < 256 && visited < WALK_KEYS {
            ks.scan_segment((*pos % segs) as usize, now, |e| {
                visited += 1;
                if let crate::store::Value::Hash(h) = &e.value {
                    if h.has_deadlines() {
                        found.push((db, Bytes::copy_from_slice(e.key())));
                    }
                }
            });
            *pos += 1;
            n += 1;
            steps += 1;
        }
    }
    drop(pos);
    if !found.is_empty() {
        registry().lock().extend(found);
    }
}

/// Removes the fields of the hash at `key` due at `now` (up to `max`) under the caller's
/// shard lock: each leaves the journal as an HDEL (as Redis propagates it), with a
/// `hexpired` event, and `del` when the hash goes. Nothing is expired while the journal is
/// replayed (a later record may still touch the field, as Redis's loading does). Returns
/// how many fields went.
fn purge_locked(
    server: &crate::state::Server,
    db: usize,
    ks: &mut crate::store::keyspace::Keyspace,
    h: u64,
    key: &[u8],
    now: i64,
    max: usize,
) -> usize {
    if crate::store::journal::loading() {
        return 0;
    }
    let mut emptied = false;
    let removed = match ks.write_as::<HashValue, _>(h, key, false, |hv| {
        let r = hv.purge(now, max);
        emptied = hv.is_empty();
        let changed = !r.is_empty();
        (r, changed)
    }) {
        Ok(Some(r)) => r,
        _ => return 0,
    };
    if removed.is_empty() {
        return 0;
    }
    for f in &removed {
        crate::store::journal::change_record(db, &[b"HDEL", key, f]);
    }
    server.notify(db, class::HASH, "hexpired", key);
    if emptied {
        server.notify(db, class::GENERIC, "del", key);
    }
    removed.len()
}

/// Lazy expiry of the fields a command looks up: those past their deadline are deleted
/// first (journaled as HDEL, one `hexpired` event, `del` if the hash goes).
fn purge_fields(
    ctx: &Ctx<'_>,
    ks: &mut crate::store::keyspace::Keyspace,
    h: u64,
    key: &[u8],
    fields: &[&[u8]],
) {
    // No hash field ever had a deadline: nothing can be due (and no clock read, which is a
    // tenth of an HSET's own cost).
    if fields.is_empty()
        || !crate::store::hash::ANY_DEADLINE.load(std::sync::atomic::Ordering::Relaxed)
        || crate::store::journal::loading()
    {
        return;
    }
    let now = crate::util::clock::now_ms();
    // A peek, not a read: the command's own lookup counts the hit or miss (and its keymiss
    // event) and touches the access clock, once.
    let due = ks
        .peek(h, key)
        .and_then(|e| <HashValue as crate::store::keyspace::Aggregate>::of(&e.value))
        .is_some_and(|hv| hv.may_be_due(now) && fields.iter().any(|f| hv.is_due(f, now)));
    if !due {
        return;
    }
    let db = ctx.client.db;
    let mut emptied = false;
    let removed = ks
        .write_as::<HashValue, _>(h, key, false, |hv| {
            let mut removed: Vec<&[u8]> = Vec::new();
            for f in fields {
                if hv.is_due(f, now) && hv.remove(f) {
                    removed.push(f);
                }
            }
            emptied = hv.is_empty();
            let changed = !removed.is_empty();
            (removed, changed)
        })
        .ok()
        .flatten()
        .unwrap_or_default();
    if removed.is_empty() {
        return;
    }
    for f in &removed {
        crate::store::journal::change_record(db, &[b"HDEL", key, f]);
    }
    ctx.server.notify(db, class::HASH, "hexpired", key);
    if emptied {
        ctx.server.notify(db, class::GENERIC, "del", key);
    }
}

/// Lazy expiry before a command's access: purges the hash's due fields if it may have any
/// (one cheap check of a lower bound otherwise).
fn purge_due(
    ctx: &Ctx<'_>,
    ks: &mut crate::store::keyspace::Keyspace,
    h: u64,
    key: &[u8],
    now: i64,
) {
    let due = matches!(
        ks.read_as::<HashValue, _>(h, key, |o| o.is_some_and(|hv| hv.may_be_due(now))),
        Ok(true)
    );
    if due {
        purge_locked(ctx.server, ctx.client.db, ks, h, key, now, usize::MAX);
    }
}

/// The background part of field expiry, run with the key sweep `hz` times a second: the
/// registered hashes' due fields, at most [`SWEEP_BATCH`] fields per shard lock and
/// `budget` fields in all per call. Returns how many fields went.
pub fn sweep_fields(server: &crate::state::Server, now: i64, budget: usize) -> usize {
    if !crate::store::expiry::active() {
        return 0;
    }
    // Once any field had a deadline, the walk finds the hashes not registered under their
    // name (renamed, copied, moved, swapped, restored).
    if crate::store::hash::ANY_DEADLINE.load(std::sync::atomic::Ordering::Relaxed) {
        discover(server, now);
    }
    let keys: Vec<(usize, Bytes)> = registry().lock().iter().cloned().collect();
    let mut total = 0;
    let mut forget = Vec::new();
    for (db, key) in keys {
        if total >= budget {
            break;
        }
        // One batch per lock, as many batches as the budget allows.
        let keep = loop {
            let (n, keep) = server.store.with_key(db, &key, |ks, h| {
                let n = purge_locked(server, db, ks, h, &key, now, SWEEP_BATCH);
                let keep = matches!(
                    ks.read_as::<HashValue, _>(h, &key, |o| {
                        o.is_some_and(|hv| hv.has_deadlines())
                    }),
                    Ok(true)
                );
                (n, keep)
            });
            total += n;
            if n < SWEEP_BATCH || total >= budget {
                break keep;
            }
        };
        if !keep {
            forget.push((db, key));
        }
    }
    if !forget.is_empty() {
        let mut r = registry().lock();
        for k in forget {
            r.remove(&k);
        }
    }
    total
}

/// `[NX|XX|GT|LT]` of HEXPIRE and its siblings.
#[derive(Clone, Copy, PartialEq)]
enum Cond {
    None,
    Nx,
    Xx,
    Gt,
    Lt,
}

/// `FIELDS numfields field...` from the cursor, with Redis 7.4's errors.
fn fields_arg<'a>(args: &mut Args<'a>, range_msg: &'static str) -> CommandResult<&'a [Bytes]> {
    if !args
        .next_opt()
        .is_some_and(|a| a.eq_ignore_ascii_case(b"FIELDS"))
    {
        return Err(CommandError::msg(
            "ERR Mandatory argument FIELDS is missing or not at the right position",
        ));
    }
    let n = args
        .next_opt()
        .and_then(|a| parse_i64(a))
        .filter(|&n| n >= 1)
        .ok_or_else(|| CommandError::msg(range_msg))?;
    let rest = args.rest();
    if usize::try_from(n).ok() != Some(rest.len()) {
        return Err(CommandError::msg(
            "ERR The `numfields` parameter must match the number of arguments",
        ));
    }
    Ok(rest)
}

/// HEXPIRE / HPEXPIRE / HEXPIREAT / HPEXPIREAT: `relative` adds the time now, `secs` reads
/// seconds. Replies per field: -2 no such field, 0 condition not met, 1 set, 2 deleted (a
/// deadline not in the future). Journaled as HPEXPIREAT of the fields set, at their
/// absolute deadline, and HDEL of those deleted (as Redis 7.4 propagates).
fn hexpire_generic(
    ctx: &mut Ctx<'_>,
    args: &mut Args<'_>,
    relative: bool,
    secs: bool,
) -> CmdResult {
    let name = String::from_utf8_lossy(args.name()).to_lowercase();
    let key = args.next_key()?;
    let mut at = args.next_i64()?;
    let bad_time = || CommandError::msg(format!("ERR invalid expire time in '{name}' command"));
    if at < 0 {
        return Err(CommandError::msg("ERR invalid expire time, must be >= 0"));
    }
    if secs {
        if at > MAX_FIELD_DEADLINE / 1000 {
            return Err(bad_time());
        }
        at *= 1000;
    }
    let now = crate::util::clock::now_ms();
    let base = if relative { now } else { 0 };
    if at > MAX_FIELD_DEADLINE - base {
        return Err(bad_time());
    }
    at += base;
    let cond = match args.peek().map(|a| a.to_ascii_uppercase()) {
        Some(a) if a == b"NX" => Cond::Nx,
        Some(a) if a == b"XX" => Cond::Xx,
        Some(a) if a == b"GT" => Cond::Gt,
        Some(a) if a == b"LT" => Cond::Lt,
        _ => Cond::None,
    };
    if cond != Cond::None {
        args.next_arg()?;
    }
    let fields = fields_arg(args, "ERR Parameter `numFields` should be greater than 0")?;
    let db = ctx.client.db;
    let loading = crate::store::journal::loading();
    let server = ctx.server;
    server.store.with_key(db, key, |ks, h| {
        // A field past its deadline not deleted yet is still there for HEXPIRE (7.4).
        let mut set: Vec<&[u8]> = Vec::new();
        let mut deleted: Vec<&[u8]> = Vec::new();
        let mut emptied = false;
        let codes = ks
            .write_as::<HashValue, _>(h, key, false, |hv| {
                let codes: Vec<Reply> = fields
                    .iter()
                    .map(|f| {
                        let Some(prev) = hv.deadline(f) else {
                            return Reply::Int(-2);
                        };
                        let unmet = if prev == 0 {
                            matches!(cond, Cond::Xx | Cond::Gt)
                        } else {
                            match cond {
                                Cond::Nx => true,
                                Cond::Gt => prev >= at,
                                Cond::Lt => prev <= at,
                                _ => false,
                            }
                        };
                        if unmet {
                            return Reply::Int(0);
                        }
                        if at <= now && !loading {
                            hv.remove(f);
                            deleted.push(f);
                            return Reply::Int(2);
                        }
                        hv.set_deadline(f, at);
                        set.push(f);
                        Reply::Int(1)
                    })
                    .collect();
                emptied = hv.is_empty();
                let changed = !set.is_empty() || !deleted.is_empty();
                (codes, changed)
            })?
            .unwrap_or_else(|| fields.iter().map(|_| Reply::Int(-2)).collect());
        if !set.is_empty() || !deleted.is_empty() {
            let mut cmds: Vec<Vec<Vec<u8>>> = Vec::new();
            if !deleted.is_empty() {
                let mut del = vec![b"HDEL".to_vec(), key.to_vec()];
                del.extend(deleted.iter().map(|f| f.to_vec()));
                cmds.push(del);
            }
            if !set.is_empty() {
                let mut cmd = vec![
                    b"HPEXPIREAT".to_vec(),
                    key.to_vec(),
                    at.to_string().into_bytes(),
                ];
                // The condition stays (as Redis propagates it): it holds again on replay.
                match cond {
                    Cond::Nx => cmd.push(b"NX".to_vec()),
                    Cond::Xx => cmd.push(b"XX".to_vec()),
                    Cond::Gt => cmd.push(b"GT".to_vec()),
                    Cond::Lt => cmd.push(b"LT".to_vec()),
                    Cond::None => {}
                }
                cmd.push(b"FIELDS".to_vec());
                cmd.push(set.len().to_string().into_bytes());
                cmd.extend(set.iter().map(|f| f.to_vec()));
                cmds.push(cmd);
                register(db, key);
            }
            crate::commands::journal::journal_as_many(cmds);
            let event = if deleted.is_empty() {
                "hexpire"
            } else {
                "hdel"
            };
            server.notify(db, class::HASH, event, key);
            if emptied {
                server.notify(db, class::GENERIC, "del", key);
            }
        }
        Ok(Reply::Array(codes))
    })
}

fn hexpire(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    hexpire_generic(ctx, args, true, true)
}

fn hpexpire(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    hexpire_generic(ctx, args, true, false)
}

fn hexpireat(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    hexpire_generic(ctx, args, false, true)
}

fn hpexpireat(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    hexpire_generic(ctx, args, false, false)
}

/// HTTL / HPTTL / HEXPIRETIME / HPEXPIRETIME: per field -2 no such field (or past its
/// deadline), -1 no deadline, else the time left (`relative`) or the deadline, in seconds
/// rounded up (`secs`) or milliseconds.
fn httl_generic(ctx: &mut Ctx<'_>, args: &mut Args<'_>, relative: bool, secs: bool) -> CmdResult {
    let key = args.next_key()?;
    let fields = fields_arg(args, "ERR Number of fields must be a positive integer")?;
    let now = crate::util::clock::now_ms();
    let base = if relative { now } else { 0 };
    read_hash_raw(ctx, key, |hv| {
        Reply::Array(
            fields
                .iter()
                .map(|f| {
                    Reply::Int(match hv.and_then(|hv| hv.deadline(f)) {
                        None => -2,
                        Some(0) => -1,
                        Some(d) if d < now => -2,
                        Some(d) if secs => (d + 999 - base) / 1000,
                        Some(d) => d - base,
                    })
                })
                .collect(),
        )
    })
}

fn httl(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    httl_generic(ctx, args, true, true)
}

fn hpttl(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    httl_generic(ctx, args, true, false)
}

fn hexpiretime(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    httl_generic(ctx, args, false, true)
}

fn hpexpiretime(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    httl_generic(ctx, args, false, false)
}

/// HPERSIST: per field -2 no such field, -1 no deadline, 1 deadline removed.
fn hpersist(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let key = args.next_key()?;
    let fields = fields_arg(args, "ERR Number of fields must be a positive integer")?;
    let now = crate::util::clock::now_ms();
    let loading = crate::store::journal::loading();
    let db = ctx.client.db;
    let server = ctx.server;
    server.store.with_key(db, key, |ks, h| {
        let mut any = false;
        let codes = ks
            .write_as::<HashValue, _>(h, key, false, |hv| {
                let codes: Vec<Reply> = fields
                    .iter()
                    .map(|f| {
                        Reply::Int(match hv.deadline(f) {
                            None => -2,
                            Some(0) => -1,
                            Some(d) if d < now && !loading => -2,
                            Some(_) => {
                                hv.set_deadline(f, 0);
                                any = true;
                                1
                            }
                        })
                    })
                    .collect();
                (codes, any)
            })?
            .unwrap_or_else(|| fields.iter().map(|_| Reply::Int(-2)).collect());
        if any {
            server.notify(db, class::HASH, "hpersist", key);
        }
        Ok(Reply::Array(codes))
    })
}
