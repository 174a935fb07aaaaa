//! Keys family (group generic): DEL EXISTS TYPE RENAME SCAN EXPIRE TTL ...
//! Table entries transcribed from Redis 7's COMMAND INFO / COMMAND DOCS; handlers below.
use crate::commands::args::{Args, CommandError, CommandResult};
use crate::commands::spec::{acl, family, flag::*, CmdResult, CommandSpec, KeySpec};
use crate::commands::{is, text, Ctx};
use crate::protocol::Reply;
use crate::state::pubsub::class;
use crate::store::eviction::rand_u64;
use crate::store::keyspace::{LAZYFREE_THRESHOLD, SEGMENTS};
use crate::store::{Entry, Ttl};
use crate::util::clock::now_ms;
use crate::util::glob::glob_match;
use crate::util::num::parse_i64;
use bytes::Bytes;

const KEYS: CommandSpec = family("generic", acl::KEYSPACE);

// Source and destination have their own key specs, as redis-server 7's COMMAND INFO: ACL
// `%R~`/`%W~` selectors and DRYRUN judge each key by its own access.
const RENAME_KEYS: &[KeySpec] = &[
    KeySpec::at(1, &["RW", "access", "delete"]),
    KeySpec::at(2, &["OW", "update"]),
];
const RENAMENX_KEYS: &[KeySpec] = &[
    KeySpec::at(1, &["RW", "access", "delete"]),
    KeySpec::at(2, &["OW", "insert"]),
];
const COPY_KEYS: &[KeySpec] = &[
    KeySpec::at(1, &["RO", "access"]),
    KeySpec::at(2, &["OW", "update"]),
];

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    KEYS.cmd("del", -2, del).flags(WRITE).keys(1, -1, 1).key_spec_flags(&["RM", "delete"]).doc("1.0.0", "Delete a key")
        .complexity("O(N) where N is the number of keys that will be removed. When a key to remove holds a value other than a string, the individual complexity for this key is O(M) where M is the number of elements in the list, set, sorted set or hash. Removing a single key that holds a string value is O(1).")
        .args("key:key..."),
    KEYS.cmd("unlink", -2, unlink).flags(WRITE | FAST).keys(1, -1, 1).key_spec_flags(&["RM", "delete"])
        .doc("4.0.0", "Delete a key asynchronously in another thread. Otherwise it is just as DEL, but non blocking.")
        .complexity("O(1) for each key removed regardless of its size. Then the command does O(N) work in a different thread in order to reclaim memory, where N is the number of allocations the deleted objects where composed of.")
        .args("key:key..."),
    KEYS.cmd("exists", -2, exists).flags(READONLY | FAST).keys(1, -1, 1).key_spec_flags(&["RO"])
        .doc("1.0.0", "Determine if a key exists")
        .complexity("O(N) where N is the number of keys to check.").args("key:key..."),
    KEYS.cmd("type", 2, type_cmd).flags(READONLY | FAST).key().key_spec_flags(&["RO"])
        .doc("1.0.0", "Determine the type stored at key").args("key:key"),
    KEYS.cmd("rename", 3, rename).flags(WRITE).keys(1, 2, 1).key_specs(RENAME_KEYS).doc("1.0.0", "Rename a key")
        .args("key:key newkey:key"),
    KEYS.cmd("renamenx", 3, renamenx).flags(WRITE | FAST).keys(1, 2, 1).key_specs(RENAMENX_KEYS)
        .doc("1.0.0", "Rename a key, only if the new key does not exist").args("key:key newkey:key"),
    KEYS.cmd("keys", 2, keys_cmd).flags(READONLY).acl(acl::DANGEROUS)
        .doc("1.0.0", "Find all keys matching the given pattern")
        .complexity("O(N) with N being the number of keys in the database, under the assumption that the key names in the database and the given pattern have limited length.")
        .args("pattern:pattern"),
    KEYS.cmd("scan", -2, scan).flags(READONLY)
        .doc("2.8.0", "Incrementally iterate the keys space")
        .complexity("O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of elements inside the collection.")
        .args("cursor:integer [MATCH=pattern:pattern] [COUNT=count:integer] [TYPE=type]"),
    KEYS.cmd("randomkey", 1, randomkey).flags(READONLY)
        .doc("1.0.0", "Return a random key from the keyspace"),
    KEYS.cmd("touch", -2, touch).flags(READONLY | FAST).keys(1, -1, 1).key_spec_flags(&["RO"])
        .doc("3.2.1", "Alters the last access time of a key(s). Returns the number of existing keys specified.")
        .complexity("O(N) where N is the number of keys that will be touched.").args("key:key..."),
    KEYS.cmd("copy", -3, copy_cmd).flags(WRITE | DENYOOM).keys(1, 2, 1).key_specs(COPY_KEYS)
        .doc("6.2.0", "Copy a key")
        .complexity("O(N) worst case for collections, where N is the number of nested items. O(1) for string values.")
        .args("source:key destination:key [DB=destination-db:integer] [REPLACE]"),
    KEYS.cmd("move", 3, move_cmd).flags(WRITE | FAST).key().key_spec_flags(&["RW", "access", "update"])
        .doc("1.0.0", "Move a key to another database").args("key:key db:integer"),
    KEYS.cmd("expire", -3, expire).flags(WRITE | FAST).key().key_spec_flags(&["RW", "update"])
        .doc("1.0.0", "Set a key's time to live in seconds")
        .args("key:key seconds:integer [condition:(NX|XX|GT|LT)]"),
    KEYS.cmd("pexpire", -3, pexpire).flags(WRITE | FAST).key().key_spec_flags(&["RW", "update"])
        .doc("2.6.0", "Set a key's time to live in milliseconds")
        .args("key:key milliseconds:integer [condition:(NX|XX|GT|LT)]"),
    KEYS.cmd("expireat", -3, expireat).flags(WRITE | FAST).key().key_spec_flags(&["RW", "update"])
        .doc("1.2.0", "Set the expiration for a key as a UNIX timestamp")
        .args("key:key unix-time-seconds:unix-time [condition:(NX|XX|GT|LT)]"),
    KEYS.cmd("pexpireat", -3, pexpireat).flags(WRITE | FAST).key().key_spec_flags(&["RW", "update"])
        .doc("2.6.0", "Set the expiration for a key as a UNIX timestamp specified in milliseconds")
        .args("key:key unix-time-milliseconds:unix-time [condition:(NX|XX|GT|LT)]"),
    KEYS.cmd("ttl", 2, ttl).flags(READONLY | FAST).key()
        .doc("1.0.0", "Get the time to live for a key in seconds").args("key:key"),
    KEYS.cmd("pttl", 2, pttl).flags(READONLY | FAST).key()
        .doc("2.6.0", "Get the time to live for a key in milliseconds").args("key:key"),
    KEYS.cmd("expiretime", 2, expiretime).flags(READONLY | FAST).key()
        .doc("7.0.0", "Get the expiration Unix timestamp for a key").args("key:key"),
    KEYS.cmd("pexpiretime", 2, pexpiretime).flags(READONLY | FAST).key()
        .doc("7.0.0", "Get the expiration Unix timestamp for a key in milliseconds").args("key:key"),
    KEYS.cmd("persist", 2, persist).flags(WRITE | FAST).key().key_spec_flags(&["RW", "update"])
        .doc("2.2.0", "Remove the expiration from a key").args("key:key"),
];

/// `EX`/`PX`/`EXAT`/`PXAT` and its argument, as SET, SETEX and GETEX take them.
pub struct ExpireOpt {
    pub kind: &'static str,
    pub arg: Bytes,
}

pub fn parse_expire_option(a: &[u8]) -> Option<&'static str> {
    ["EX", "PX", "EXAT", "PXAT"].into_iter().find(|k| is(a, k))
}

pub fn expire_time_error(cmd: &str) -> CommandError {
    CommandError::msg(format!("ERR invalid expire time in '{cmd}' command"))
}

impl ExpireOpt {
    /// The absolute deadline in ms, as Redis's `getExpireMillisecondsOrReply`: the number must
    /// be positive and the result must not overflow.
    pub fn deadline(&self, cmd: &str, now: i64) -> CommandResult<i64> {
        let n = parse_i64(&self.arg).ok_or_else(CommandError::not_integer)?;
        let seconds = self.kind == "EX" || self.kind == "EXAT";
        if n <= 0 || (seconds && n > i64::MAX / 1000) {
            return Err(expire_time_error(cmd));
        }
        let ms = if seconds { n * 1000 } else { n };
        let at = if self.kind == "EX" || self.kind == "PX" {
            ms.checked_add(now)
        } else {
            Some(ms)
        };
        match at {
            Some(at) if at > 0 => Ok(at),
            _ => Err(expire_time_error(cmd)),
        }
    }
}

fn del(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let keys = args.rest();
    let db = ctx.client.db;
    let mut l = ctx.server.store.lock_keys(keys);
    let mut n = 0;
    for (i, k) in keys.iter().enumerate() {
        let h = l.hash(i);
        if l.ks(i, db).remove(h, k).is_some() {
            ctx.server.notify(db, class::GENERIC, "del", k);
            n += 1;
        }
    }
    Ok(Reply::Int(n))
}

/// UNLINK: removing from the table is O(1) per key here too; the values are freed after the
/// shard locks are released, those with a large free effort on the lazyfree thread (as
/// Redis's `dbAsyncDelete`).
fn unlink(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let keys = args.rest();
    let db = ctx.client.db;
    let mut freed = Vec::new();
    {
        let mut l = ctx.server.store.lock_keys(keys);
        for (i, k) in keys.iter().enumerate() {
            let h = l.hash(i);
            if let Some(e) = l.ks(i, db).remove(h, k) {
                ctx.server.notify(db, class::GENERIC, "del", k);
                freed.push(e);
            }
        }
    }
    let n = freed.len() as i64;
    for e in freed {
        if e.value.free_effort() > LAZYFREE_THRESHOLD {
            ctx.server.lazyfree.free(Box::new(e), 1);
        }
    }
    Ok(Reply::Int(n))
}

fn exists(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let keys = args.rest();
    let db = ctx.client.db;
    let mut l = ctx.server.store.lock_keys(keys);
    let mut n = 0;
    for (i, k) in keys.iter().enumerate() {
        let h = l.hash(i);
        if l.ks(i, db).contains(h, k) {
            n += 1;
        }
    }
    Ok(Reply::Int(n))
}

fn type_cmd(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let key = args.next_key()?;
    Ok(ctx.server.store.with_key(ctx.client.db, key, |ks, h| {
        Reply::Simple(ks.peek(h, key).map_or("none", |e| e.value.type_name()))
    }))
}

fn rename_generic(ctx: &mut Ctx<'_>, args: &mut Args<'_>, nx: bool) -> CmdResult {
    let (src, dst) = (args.next_key()?, args.next_key()?);
    let db = ctx.client.db;
    let mut l = ctx.server.store.lock_keys(&[src, dst]);
    let (hs, hd) = (l.hash(0), l.hash(1));
    let no_such_key = || CommandError::msg("ERR no such key");
    if !l.ks(0, db).contains(hs, src) {
        return Err(no_such_key());
    }
    if src == dst {
        return Ok(if nx { Reply::Int(0) } else { Reply::ok() });
    }
    if nx && l.ks(1, db).contains(hd, dst) {
        return Ok(Reply::Int(0));
    }
    let Some((value, at)) = l.ks(0, db).take_for_move(hs, src) else {
        return Err(no_such_key());
    };
    let dks = l.ks(1, db);
    // The destination is replaced as a whole: deleted first (its own notification), then set.
    dks.remove(hd, dst);
    dks.set(hd, dst, value, at.map_or(Ttl::Clear, Ttl::At));
    ctx.server.notify(db, class::GENERIC, "rename_from", src);
    ctx.server.notify(db, class::GENERIC, "rename_to", dst);
    Ok(if nx { Reply::Int(1) } else { Reply::ok() })
}

fn rename(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    rename_generic(ctx, args, false)
}

fn renamenx(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    rename_generic(ctx, args, true)
}

fn keys_cmd(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let pat = args.next_arg()?;
    let all = pat.as_ref() == b"*";
    let db = ctx.client.db;
    let now = now_ms();
    let mut out = Vec::new();
    ctx.server.store.for_each_shard(|s| {
        s.dbs[db].keys.for_each(now, |e| {
            if all || glob_match(pat, e.key(), false) {
                out.push(Reply::Bulk(Bytes::copy_from_slice(e.key())));
            }
        })
    });
    Ok(Reply::Array(out))
}

/// SCAN/HSCAN options: MATCH, COUNT and (SCAN only) TYPE.
pub struct ScanOpts {
    pub pattern: Option<Bytes>,
    pub count: usize,
    pub type_name: Option<String>,
}

/// Reads a cursor (SCAN, SSCAN, HSCAN, ZSCAN) as Redis's `parseScanCursorOrReply`.
pub fn scan_cursor(args: &mut Args<'_>) -> CommandResult<u64> {
    parse_cursor(args.next_arg()?).ok_or_else(|| CommandError::msg("ERR invalid cursor"))
}

/// A cursor as Redis 7.0's `parseScanCursorOrReply` reads it, with C's `strtoul`: an
/// optional sign (a negative value wraps around), decimal digits, nothing after them, no
/// leading space, no overflow; an empty argument reads as 0.
fn parse_cursor(b: &[u8]) -> Option<u64> {
    let (neg, digits) = match b.first() {
        Some(b'-') => (true, &b[1..]),
        Some(b'+') => (false, &b[1..]),
        _ => (false, b),
    };
    if b.is_empty() {
        return Some(0);
    }
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut v: u64 = 0;
    for &d in digits {
        v = v.checked_mul(10)?.checked_add((d - b'0') as u64)?;
    }
    Some(if neg { v.wrapping_neg() } else { v })
}

/// Reads the SCAN family's options: `MATCH pattern`, `COUNT n` and (SCAN) `TYPE name`.
pub fn scan_opts(args: &mut Args<'_>, allow_type: bool) -> CommandResult<ScanOpts> {
    let mut o = ScanOpts {
        pattern: None,
        count: 10,
        type_name: None,
    };
    while let Some(kw) = args.next_token() {
        match &*kw {
            b"COUNT" if !args.is_empty() => {
                let n = args.next_i64()?;
                if n < 1 {
                    return Err(CommandError::syntax());
                }
                o.count = n as usize;
            }
            b"MATCH" if !args.is_empty() => {
                let p = args.next_arg()?.clone();
                o.pattern = if p.as_ref() == b"*" { None } else { Some(p) };
            }
            b"TYPE" if allow_type && !args.is_empty() => {
                o.type_name = Some(args.next_text()?.to_lowercase());
            }
            _ => return Err(CommandError::syntax()),
        }
    }
    Ok(o)
}

/// SCAN: the cursor is a position in (shard, segment) order. A key stays in its segment for
/// its whole life, so a key present for the whole iteration is returned (at least once)
/// however much the tables grow or shrink in between. Each call returns whole segments until
/// at least COUNT keys were visited.
fn scan(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let cursor = scan_cursor(args)?;
    let o = scan_opts(args, true)?;
    let store = &ctx.server.store;
    let db = ctx.client.db;
    let total = (store.shard_count() * SEGMENTS) as u64;
    let now = now_ms();
    let mut pos = cursor;
    let mut keys = Vec::new();
    let mut visited = 0usize;
    let mut expired: Vec<Bytes> = Vec::new();
    while pos < total && visited < o.count {
        let shard = (pos / SEGMENTS as u64) as usize;
        let mut s = store.lock(shard);
        let ks = &mut s.dbs[db].keys;
        // Several segments per lock, bounded so the lock stays brief.
        let mut n = 0;
        while pos < total
            && (pos / SEGMENTS as u64) as usize == shard
            && visited < o.count
            && n < 256
        {
            // Expired keys met are deleted as any read deletes them (a DEL in the journal
            // and the replication stream, each its own, as Redis's SCAN does), so the walk
            // sees them all (`i64::MIN`: nothing is due) and tells them apart itself.
            expired.clear();
            ks.scan_segment((pos % SEGMENTS as u64) as usize, i64::MIN, |e: &Entry| {
                if ks.deadline_of(e).is_some_and(|at| at <= now) {
                    expired.push(Bytes::copy_from_slice(e.key()));
                    return;
                }
                visited += 1;
                let ok_pat = o
                    .pattern
                    .as_ref()
                    .is_none_or(|p| glob_match(p, e.key(), false));
                let ok_type = o
                    .type_name
                    .as_ref()
                    .is_none_or(|t| t == e.value.type_name());
                if ok_pat && ok_type {
                    keys.push(Reply::Bulk(Bytes::copy_from_slice(e.key())));
                }
            });
            for key in &expired {
                let h = ks.hash(key);
                ks.contains(h, key);
            }
            pos += 1;
            n += 1;
        }
    }
    let next = if pos >= total { 0 } else { pos };
    Ok(Reply::Array(vec![
        Reply::bulk(next.to_string()),
        Reply::Array(keys),
    ]))
}

fn randomkey(ctx: &mut Ctx<'_>, _args: &mut Args<'_>) -> CmdResult {
    Ok(random_key(ctx))
}

fn random_key(ctx: &mut Ctx<'_>) -> Reply {
    let store = &ctx.server.store;
    let db = ctx.client.db;
    // Weighted by shard size so every key has a fair chance; expired picks are retried.
    for _ in 0..100 {
        let mut sizes = Vec::with_capacity(store.shard_count());
        store.for_each_shard(|s| sizes.push(s.dbs[db].keys.len()));
        let total: usize = sizes.iter().sum();
        if total == 0 {
            return Reply::Nil;
        }
        let mut r = rand_u64() as usize % total;
        let mut shard = 0;
        while r >= sizes[shard] {
            r -= sizes[shard];
            shard += 1;
        }
        let mut s = store.lock(shard);
        let ks = &mut s.dbs[db].keys;
        let Some(key) = ks
            .random(rand_u64(), false)
            .map(|e| Bytes::copy_from_slice(e.key()))
        else {
            continue;
        };
        let h = ks.hash(&key);
        if ks.contains(h, &key) {
            return Reply::Bulk(key);
        }
    }
    Reply::Nil
}

fn touch(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let keys = args.rest();
    let db = ctx.client.db;
    let mut l = ctx.server.store.lock_keys(keys);
    let mut n = 0;
    for (i, k) in keys.iter().enumerate() {
        let h = l.hash(i);
        let ks = l.ks(i, db);
        if ks.peek(h, k).is_some() {
            ks.touch(h, k);
            n += 1;
        }
    }
    Ok(Reply::Int(n))
}

fn copy_cmd(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let (src, dst) = (args.next_key()?, args.next_key()?);
    let src_db = ctx.client.db;
    let mut dst_db = src_db;
    let mut replace = false;
    while let Some(kw) = args.next_token() {
        match &*kw {
            b"REPLACE" => replace = true,
            b"DB" if !args.is_empty() => {
                let n = args.next_i64()?;
                if i32::try_from(n).is_err() {
                    return Err(CommandError::not_integer());
                }
                if n < 0 || n as usize >= ctx.server.store.databases() {
                    return Err(CommandError::msg("ERR DB index is out of range"));
                }
                dst_db = n as usize;
            }
            _ => return Err(CommandError::syntax()),
        }
    }
    if src == dst && src_db == dst_db {
        return Err(CommandError::msg(
            "ERR source and destination objects are the same",
        ));
    }
    let mut l = ctx.server.store.lock_keys(&[src, dst]);
    let (hs, hd) = (l.hash(0), l.hash(1));
    let sks = l.ks(0, src_db);
    let (value, at) = match sks.peek(hs, src) {
        None => return Ok(Reply::Int(0)),
        Some(e) => (e.value.clone(), sks.deadline(hs, src).flatten()),
    };
    let dks = l.ks(1, dst_db);
    if dks.contains(hd, dst) {
        if !replace {
            return Ok(Reply::Int(0));
        }
        dks.remove(hd, dst);
    }
    dks.set(hd, dst, value, at.map_or(Ttl::Clear, Ttl::At));
    ctx.server.notify(dst_db, class::GENERIC, "copy_to", dst);
    Ok(Reply::Int(1))
}

/// MOVE key db: the key, with its deadline, to another database, unless it exists there.
fn move_cmd(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let key = args.next_key()?;
    let n = args.next_i64()?;
    if i32::try_from(n).is_err() {
        return Err(CommandError::not_integer());
    }
    if n < 0 || n as usize >= ctx.server.store.databases() {
        return Err(CommandError::msg("ERR DB index is out of range"));
    }
    let (src_db, dst_db) = (ctx.client.db, n as usize);
    if src_db == dst_db {
        return Err(CommandError::msg(
            "ERR source and destination objects are the same",
        ));
    }
    // Both databases' parts of the key live in the same shard.
    let h = ctx.server.store.hash(key);
    let mut g = ctx.server.store.lock(ctx.server.store.shard_of_hash(h));
    if !g.dbs[src_db].keys.contains(h, key) || g.dbs[dst_db].keys.contains(h, key) {
        return Ok(Reply::Int(0));
    }
    let Some((value, at)) = g.dbs[src_db].keys.take_for_move(h, key) else {
        return Ok(Reply::Int(0));
    };
    g.dbs[dst_db]
        .keys
        .set(h, key, value, at.map_or(Ttl::Clear, Ttl::At));
    ctx.server.notify(src_db, class::GENERIC, "move_from", key);
    ctx.server.notify(dst_db, class::GENERIC, "move_to", key);
    Ok(Reply::Int(1))
}

/// EXPIRE family. `seconds`: the argument is in seconds; `absolute`: a Unix time.
fn expire_generic(
    ctx: &mut Ctx<'_>,
    args: &mut Args<'_>,
    seconds: bool,
    absolute: bool,
) -> CmdResult {
    let cmd = text(args.name()).to_lowercase();
    let (key, time) = (args.next_key()?, args.next_arg()?);
    let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
    for a in args.rest() {
        match &*crate::commands::args::Token::of(a) {
            b"NX" => nx = true,
            b"XX" => xx = true,
            b"GT" => gt = true,
            b"LT" => lt = true,
            _ => {
                return Err(CommandError::msg(format!(
                    "ERR Unsupported option {}",
                    text(a)
                )))
            }
        }
    }
    if nx && (xx || gt || lt) {
        return Err(CommandError::msg(
            "ERR NX and XX, GT or LT options at the same time are not compatible",
        ));
    }
    if gt && lt {
        return Err(CommandError::msg(
            "ERR GT and LT options at the same time are not compatible",
        ));
    }
    let n = parse_i64(time).ok_or_else(CommandError::not_integer)?;
    let ms = if seconds {
        n.checked_mul(1000).ok_or_else(|| expire_time_error(&cmd))?
    } else {
        n
    };
    let at = if absolute {
        ms
    } else {
        ms.checked_add(now_ms())
            .ok_or_else(|| expire_time_error(&cmd))?
    };
    // A deadline not in the future deletes the key: journaled as the DEL it is, as Redis.
    let past = at <= now_ms();
    if past {
        crate::commands::journal::journal_as(&[b"DEL", key]);
    } else if !absolute || seconds {
        // Journaled with its absolute deadline in milliseconds (Redis 7: PEXPIREAT).
        let at = at.to_string();
        let mut argv: Vec<&[u8]> = vec![b"PEXPIREAT", key, at.as_bytes()];
        for (on, word) in [(nx, "NX"), (xx, "XX"), (gt, "GT"), (lt, "LT")] {
            if on {
                argv.push(word.as_bytes());
            }
        }
        crate::commands::journal::journal_as(&argv);
    }
    Ok(ctx.server.store.with_key(ctx.client.db, key, |ks, h| {
        let cur = match ks.deadline(h, key) {
            None => return Reply::Int(0),
            Some(at) => at,
        };
        let refused = (nx && cur.is_some())
            || (xx && cur.is_none())
            || (gt && cur.is_none_or(|c| at <= c))
            || (lt && cur.is_some_and(|c| at >= c));
        if refused {
            return Reply::Int(0);
        }
        // Redis reports a deadline not in the future as `del`.
        let event = if past { "del" } else { "expire" };
        ks.set_deadline(h, key, Some(at));
        ctx.server.notify(ctx.client.db, class::GENERIC, event, key);
        Reply::Int(1)
    }))
}

fn expire(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    expire_generic(ctx, args, true, false)
}

fn pexpire(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    expire_generic(ctx, args, false, false)
}

fn expireat(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    expire_generic(ctx, args, true, true)
}

fn pexpireat(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    expire_generic(ctx, args, false, true)
}

/// TTL family: -2 no key, -1 no deadline, else the remaining time or the deadline.
fn ttl_generic(ctx: &mut Ctx<'_>, args: &mut Args<'_>, f: fn(i64, i64) -> i64) -> CmdResult {
    let key = args.next_key()?;
    Ok(ctx
        .server
        .store
        .with_key(ctx.client.db, key, |ks, h| match ks.deadline(h, key) {
            None => Reply::Int(-2),
            Some(at) => match at {
                None => Reply::Int(-1),
                Some(at) => Reply::Int(f(at, now_ms())),
            },
        }))
}

fn ttl(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    // Rounded to the nearest second, as Redis's ttlGenericCommand.
    ttl_generic(ctx, args, |at, now| ((at - now).max(0) + 500) / 1000)
}

fn pttl(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    ttl_generic(ctx, args, |at, now| (at - now).max(0))
}

fn expiretime(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    // Rounded like TTL (Redis's ttlGenericCommand rounds both).
    ttl_generic(ctx, args, |at, _| (at.max(0) + 500) / 1000)
}

fn pexpiretime(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    ttl_generic(ctx, args, |at, _| at)
}

fn persist(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let key = args.next_key()?;
    Ok(ctx
        .server
        .store
        .with_key(ctx.client.db, key, |ks, h| match ks.deadline(h, key) {
            Some(Some(_)) => {
                ks.set_deadline(h, key, None);
                ctx.server
                    .notify(ctx.client.db, class::GENERIC, "persist", key);
                Reply::Int(1)
            }
            _ => Reply::Int(0),
        }))
}

#[cfg(test)]
mod tests {
    use super::parse_cursor;

    #[test]
    fn cursors_read_as_strtoul() {
        assert_eq!(parse_cursor(b"0"), Some(0));
        assert_eq!(parse_cursor(b""), Some(0));
        assert_eq!(parse_cursor(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_cursor(b"18446744073709551616"), None);
        assert_eq!(parse_cursor(b"-1"), Some(u64::MAX));
        assert_eq!(parse_cursor(b"+7"), Some(7));
        assert_eq!(parse_cursor(b"-"), None);
        assert_eq!(parse_cursor(b" 1"), None);
        assert_eq!(parse_cursor(b"1x"), None);
    }
}
