//! Strings family: GET SET INCR APPEND GETRANGE ...
//! Table entries transcribed from Redis 7's COMMAND INFO / COMMAND DOCS; handlers below.
use crate::commands::args::{Args, CommandError, CommandResult, Token};
use crate::commands::keys::{parse_expire_option, ExpireOpt};
use crate::commands::spec::{acl, family, flag::*, Begin, CmdResult, CommandSpec, Find, KeySpec};
use crate::commands::Ctx;
use crate::protocol::Reply;
use crate::state::pubsub::class;
use crate::store::{Ttl, Value};
use crate::util::clock::{expiry_now_ms, now_ms};
use crate::util::num::{parse_f64, parse_i64};
use bytes::Bytes;

const STR: CommandSpec = family("string", acl::STRING);

/// SET reads the old value only with GET: its key is overwritten otherwise (Redis's
/// `setGetKeys`).
const SET_KEYS: &[KeySpec] = &[KeySpec::at(
    1,
    &["RW", "access", "update", "variable_flags"],
)];
const MSET_KEYS: &[KeySpec] = &[KeySpec {
    flags: &["OW", "update"],
    begin: Begin::Index(1),
    find: Find::Range {
        last: -1,
        step: 2,
        limit: 0,
    },
}];

fn set_key_flags(args: &[Bytes]) -> &'static [&'static str] {
    if args.iter().skip(3).any(|a| a.eq_ignore_ascii_case(b"GET")) {
        &["RW", "access", "update"]
    } else {
        &["OW", "update"]
    }
}

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    STR.cmd("get", 2, get).flags(READONLY | FAST).key()
        .doc("1.0.0", "Get the value of a key").args("key:key"),
    STR.cmd("set", -3, set).flags(WRITE | DENYOOM).key().key_specs(SET_KEYS).key_flags(set_key_flags)
        .doc("1.0.0", "Set the string value of a key")
        .args("key:key value [condition:(NX|XX)] [GET] [expiration:(EX=seconds:integer|PX=milliseconds:integer|EXAT=unix-time-seconds:unix-time|PXAT=unix-time-milliseconds:unix-time|KEEPTTL)]"),
    STR.cmd("setex", 4, setex).flags(WRITE | DENYOOM).key().key_spec_flags(&["OW", "update"])
        .doc("2.0.0", "Set the value and expiration of a key").args("key:key seconds:integer value"),
    STR.cmd("psetex", 4, psetex).flags(WRITE | DENYOOM).key().key_spec_flags(&["OW", "update"])
        .doc("2.6.0", "Set the value and expiration in milliseconds of a key")
        .args("key:key milliseconds:integer value"),
    STR.cmd("setnx", 3, setnx).flags(WRITE | DENYOOM | FAST).key().key_spec_flags(&["OW", "insert"])
        .doc("1.0.0", "Set the value of a key, only if the key does not exist")
        .args("key:key value"),
    STR.cmd("getex", -2, getex).flags(WRITE | FAST).key().key_spec_flags(&["RW", "access", "update"])
        .doc("6.2.0", "Get the value of a key and optionally set its expiration")
        .args("key:key [expiration:(EX=seconds:integer|PX=milliseconds:integer|EXAT=unix-time-seconds:unix-time|PXAT=unix-time-milliseconds:unix-time|PERSIST)]"),
    STR.cmd("getdel", 2, getdel).flags(WRITE | FAST).key().key_spec_flags(&["RW", "access", "delete"])
        .doc("6.2.0", "Get the value of a key and delete the key").args("key:key"),
    STR.cmd("getset", 3, getset).flags(WRITE | DENYOOM | FAST).key().key_spec_flags(&["RW", "access", "update"])
        .doc("1.0.0", "Set the string value of a key and return its old value (deprecated since 6.2.0; use SET with the !GET argument)")
        .args("key:key value"),
    STR.cmd("mget", -2, mget).flags(READONLY | FAST).keys(1, -1, 1)
        .doc("1.0.0", "Get the values of all the given keys")
        .complexity("O(N) where N is the number of keys to retrieve.").args("key:key..."),
    STR.cmd("mset", -3, mset).flags(WRITE | DENYOOM).keys(1, -1, 2).key_specs(MSET_KEYS)
        .doc("1.0.1", "Set multiple keys to multiple values")
        .complexity("O(N) where N is the number of keys to set.")
        .args("key_value:{key:key value}..."),
    STR.cmd("msetnx", -3, msetnx).flags(WRITE | DENYOOM).keys(1, -1, 2).key_spec_flags(&["OW", "insert"])
        .doc("1.0.1", "Set multiple keys to multiple values, only if none of the keys exist")
        .complexity("O(N) where N is the number of keys to set.")
        .args("key_value:{key:key value}..."),
    STR.cmd("incr", 2, incr).flags(WRITE | DENYOOM | FAST).key().key_spec_flags(&["RW", "access", "update"])
        .doc("1.0.0", "Increment the integer value of a key by one").args("key:key"),
    STR.cmd("incrby", 3, incrby).flags(WRITE | DENYOOM | FAST).key().key_spec_flags(&["RW", "access", "update"])
        .doc("1.0.0", "Increment the integer value of a key by the given amount")
        .args("key:key increment:integer"),
    STR.cmd("incrbyfloat", 3, incrbyfloat).flags(WRITE | DENYOOM | FAST).key().key_spec_flags(&["RW", "access", "update"])
        .doc("2.6.0", "Increment the float value of a key by the given amount")
        .args("key:key increment:double"),
    STR.cmd("decr", 2, decr).flags(WRITE | DENYOOM | FAST).key().key_spec_flags(&["RW", "access", "update"])
        .doc("1.0.0", "Decrement the integer value of a key by one").args("key:key"),
    STR.cmd("decrby", 3, decrby).flags(WRITE | DENYOOM | FAST).key().key_spec_flags(&["RW", "access", "update"])
        .doc("1.0.0", "Decrement the integer value of a key by the given number")
        .args("key:key decrement:integer"),
    STR.cmd("append", 3, append).flags(WRITE | DENYOOM | FAST).key().key_spec_flags(&["RW", "insert"])
        .doc("2.0.0", "Append a value to a key")
        .complexity("O(1). The amortized time complexity is O(1) assuming the appended value is small and the already present value is of any size, since the dynamic string library used by Redis will double the free space available on every reallocation.")
        .args("key:key value"),
    STR.cmd("strlen", 2, strlen).flags(READONLY | FAST).key().key_spec_flags(&["RO"])
        .doc("2.2.0", "Get the length of the value stored in a key").args("key:key"),
    STR.cmd("lcs", -3, lcs).flags(READONLY).keys(1, 2, 1)
        .doc("7.0.0", "Find longest common substring")
        .complexity("O(N*M) where N and M are the lengths of s1 and s2, respectively")
        .args("key1:key key2:key [LEN] [IDX] [MINMATCHLEN=min-match-len:integer] [WITHMATCHLEN]"),
    STR.cmd("substr", 4, getrange).flags(READONLY).key()
        .doc("1.0.0", "Get a substring of the string stored at a key (deprecated since 2.0.0; use GETRANGE)")
        .complexity("O(N) where N is the length of the returned string. The complexity is ultimately determined by the returned length, but because creating a substring from an existing string is very cheap, it can be considered O(1) for small strings.")
        .args("key:key start:integer end:integer"),
    STR.cmd("getrange", 4, getrange).flags(READONLY).key()
        .doc("2.4.0", "Get a substring of the string stored at a key")
        .complexity("O(N) where N is the length of the returned string. The complexity is ultimately determined by the returned length, but because creating a substring from an existing string is very cheap, it can be considered O(1) for small strings.")
        .args("key:key start:integer end:integer"),
    STR.cmd("setrange", 4, setrange).flags(WRITE | DENYOOM).key().key_spec_flags(&["RW", "update"])
        .doc("2.2.0", "Overwrite part of a string at key starting at the specified offset")
        .complexity("O(1), not counting the time taken to copy the new string in place. Usually, this string is very small so the amortized complexity is O(1). Otherwise, complexity is O(M) with M being the length of the value argument.")
        .args("key:key offset:integer value"),
];

/// Redis's `proto-max-bulk-len` check for strings built by APPEND and SETRANGE.
fn check_len(ctx: &Ctx<'_>, len: u64) -> CommandResult<()> {
    if len > ctx.server.config.read().get_u64("proto-max-bulk-len") {
        return Err(CommandError::msg(
            "ERR string exceeds maximum allowed size (proto-max-bulk-len)",
        ));
    }
    Ok(())
}

/// A string value's bytes, or WRONGTYPE for another type.
fn string_of(e: &crate::store::Entry) -> CommandResult<Bytes> {
    e.value.str_bytes().ok_or_else(CommandError::wrongtype)
}

fn get(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let key = args.next_key()?;
    ctx.server
        .store
        .with_key(ctx.client.db, key, |ks, h| match ks.get(h, key) {
            None => Ok(Reply::Nil),
            Some(e) => Ok(Reply::Bulk(string_of(e)?)),
        })
}

/// The parsed options of SET (and, with `getex`, of GETEX).
#[derive(Default)]
struct SetOpts {
    nx: bool,
    xx: bool,
    get: bool,
    keepttl: bool,
    persist: bool,
    expire: Option<ExpireOpt>,
}

/// Reads SET's / GETEX's options as Redis's `parseExtendedStringArgumentsOrReply`, then the
/// deadline. `getex` selects GETEX's set of options.
fn parse_set_opts(
    args: &mut Args<'_>,
    getex: bool,
    cmd: &str,
) -> CommandResult<(SetOpts, Option<i64>)> {
    let mut o = SetOpts::default();
    while let Some(a) = args.next_opt() {
        let timed = o.expire.is_some();
        match &*Token::of(a) {
            b"NX" if !getex && !o.xx => o.nx = true,
            b"XX" if !getex && !o.nx => o.xx = true,
            b"GET" if !getex => o.get = true,
            b"KEEPTTL" if !getex && !o.persist && !timed => o.keepttl = true,
            b"PERSIST" if getex && !timed && !o.keepttl => o.persist = true,
            _ => {
                let Some(kind) = parse_expire_option(a) else {
                    return Err(CommandError::syntax());
                };
                let same_or_none = o.expire.as_ref().is_none_or(|e| e.kind == kind);
                if o.keepttl || o.persist || !same_or_none || args.is_empty() {
                    return Err(CommandError::syntax());
                }
                o.expire = Some(ExpireOpt {
                    kind,
                    arg: args.next_arg()?.clone(),
                });
            }
        }
    }
    let at = match &o.expire {
        None => None,
        Some(e) => Some(e.deadline(cmd, now_ms())?),
    };
    Ok((o, at))
}

fn set(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let (key, val) = (args.next_key()?, args.next_arg()?);
    let (o, at) = parse_set_opts(args, false, "set")?;
    let absolute = o.expire.as_ref().is_some_and(|e| e.kind.ends_with("AT"));
    if let Some(at) = at {
        // Journaled with its absolute deadline (Redis 7 propagates SET … PXAT).
        let at = at.to_string();
        let mut argv: Vec<&[u8]> = vec![b"SET", key, val, b"PXAT", at.as_bytes()];
        if o.nx {
            argv.push(b"NX");
        }
        if o.xx {
            argv.push(b"XX");
        }
        crate::commands::journal::journal_as(&argv);
    }
    ctx.server.store.with_key(ctx.client.db, key, |ks, h| {
        // The plain SET (the hot path) needs no lookup before the write.
        let old = if o.nx || o.xx || o.get {
            ks.peek(h, key).map(|e| e.value.str_bytes())
        } else {
            None
        };
        let reply_get = if o.get {
            match &old {
                None => Some(Reply::Nil),
                Some(None) => return Err(CommandError::wrongtype()),
                Some(Some(b)) => Some(Reply::Bulk(b.clone())),
            }
        } else {
            None
        };
        let found = old.is_some();
        if (o.nx && found) || (o.xx && !found) {
            return Ok(reply_get.unwrap_or(Reply::Nil));
        }
        match at {
            // A deadline already past: the key is gone at once (Redis 7's checkAlreadyExpired).
            // (While the journal is replayed the deadline is kept: `journal::loading`.)
            // Only an absolute deadline (EXAT/PXAT) can be already past: a relative one is
            // at least a millisecond after the time it was computed from, and a second clock
            // read here would delete a PX 1 key whenever a millisecond passed since (Redis
            // compares with the command's cached time). The expiry clock is frozen in a
            // script or EXEC.
            Some(at) if absolute && at <= expiry_now_ms() && !crate::store::journal::loading() => {
                if ks.remove(h, key).is_some() {
                    ctx.server.notify(ctx.client.db, class::GENERIC, "del", key);
                }
            }
            _ => {
                let ttl = match (at, o.keepttl) {
                    (Some(at), _) => Ttl::At(at),
                    (None, true) => Ttl::Keep,
                    (None, false) => Ttl::Clear,
                };
                ks.set(h, key, Value::string(val), ttl);
                ctx.server.notify(ctx.client.db, class::STRING, "set", key);
                if at.is_some() {
                    ctx.server
                        .notify(ctx.client.db, class::GENERIC, "expire", key);
                }
            }
        }
        Ok(reply_get.unwrap_or(Reply::ok()))
    })
}

/// SETEX / PSETEX.
fn setex_generic(
    ctx: &mut Ctx<'_>,
    args: &mut Args<'_>,
    kind: &'static str,
    cmd: &str,
) -> CmdResult {
    let key = args.next_key()?;
    let arg = args.next_arg()?.clone();
    let val = args.next_arg()?;
    let at = ExpireOpt { kind, arg }.deadline(cmd, now_ms())?;
    let at_text = at.to_string();
    crate::commands::journal::journal_as(&[b"SET", key, val, b"PXAT", at_text.as_bytes()]);
    ctx.server.store.with_key(ctx.client.db, key, |ks, h| {
        // A relative deadline is never already past (see `set`): only for EXAT/PXAT kinds.
        if kind.ends_with("AT") && at <= expiry_now_ms() && !crate::store::journal::loading() {
            if ks.remove(h, key).is_some() {
                ctx.server.notify(ctx.client.db, class::GENERIC, "del", key);
            }
        } else {
            ks.set(h, key, Value::string(val), Ttl::At(at));
            ctx.server.notify(ctx.client.db, class::STRING, "set", key);
            ctx.server
                .notify(ctx.client.db, class::GENERIC, "expire", key);
        }
    });
    Ok(Reply::ok())
}

fn setex(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    setex_generic(ctx, args, "EX", "setex")
}

fn psetex(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    setex_generic(ctx, args, "PX", "psetex")
}

fn setnx(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let (key, val) = (args.next_key()?, args.next_arg()?);
    Ok(ctx.server.store.with_key(ctx.client.db, key, |ks, h| {
        if ks.contains(h, key) {
            return Reply::Int(0);
        }
        ks.set(h, key, Value::string(val), Ttl::Clear);
        ctx.server.notify(ctx.client.db, class::STRING, "set", key);
        Reply::Int(1)
    }))
}

fn getex(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let key = args.next_key()?;
    let (o, at) = parse_set_opts(args, true, "getex")?;
    // A deadline not in the future (EXAT/PXAT) deletes the key: journaled as the DEL it is,
    // as Redis propagates it, and reported as `del`.
    let past = at.is_some_and(|at| at <= now_ms());
    match at {
        Some(_) if past => crate::commands::journal::journal_as(&[b"DEL", key]),
        Some(at) => {
            let at = at.to_string();
            crate::commands::journal::journal_as(&[b"PEXPIREAT", key, at.as_bytes()]);
        }
        None => crate::commands::journal::journal_as(&[b"PERSIST", key]),
    }
    ctx.server.store.with_key(ctx.client.db, key, |ks, h| {
        let (v, had_deadline) = match ks.get(h, key) {
            None => return Ok(Reply::Nil),
            Some(e) => (string_of(e)?, e.has_deadline()),
        };
        if let Some(at) = at {
            // set_deadline deletes the key when the deadline is already past.
            let event = if past { "del" } else { "expire" };
            ks.set_deadline(h, key, Some(at));
            ctx.server.notify(ctx.client.db, class::GENERIC, event, key);
        } else if o.persist && had_deadline && ks.set_deadline(h, key, None) {
            ctx.server
                .notify(ctx.client.db, class::GENERIC, "persist", key);
        }
        Ok(Reply::Bulk(v))
    })
}

fn getdel(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let key = args.next_key()?;
    ctx.server.store.with_key(ctx.client.db, key, |ks, h| {
        let v = match ks.get(h, key) {
            None => return Ok(Reply::Nil),
            Some(e) => string_of(e)?,
        };
        ks.remove(h, key);
        ctx.server.notify(ctx.client.db, class::GENERIC, "del", key);
        Ok(Reply::Bulk(v))
    })
}

fn getset(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let (key, val) = (args.next_key()?, args.next_arg()?);
    ctx.server.store.with_key(ctx.client.db, key, |ks, h| {
        let old = match ks.get(h, key) {
            None => Reply::Nil,
            Some(e) => Reply::Bulk(string_of(e)?),
        };
        ks.set(h, key, Value::string(val), Ttl::Clear);
        ctx.server.notify(ctx.client.db, class::STRING, "set", key);
        // Propagated as the SET it amounts to, as Redis 7.0 does.
        crate::commands::journal::journal_as(&[b"SET", key, val]);
        Ok(old)
    })
}

fn mget(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let keys = args.rest();
    let db = ctx.client.db;
    let mut l = ctx.server.store.lock_keys(keys);
    Ok(Reply::Array(
        keys.iter()
            .enumerate()
            .map(|(i, k)| {
                let h = l.hash(i);
                match l.ks(i, db).get(h, k) {
                    Some(e) => e.value.str_bytes().map(Reply::Bulk).unwrap_or(Reply::Nil),
                    None => Reply::Nil,
                }
            })
            .collect(),
    ))
}

fn mset_generic(ctx: &mut Ctx<'_>, args: &mut Args<'_>, nx: bool) -> CmdResult {
    let pairs = args.pairs()?;
    let db = ctx.client.db;
    let keys: Vec<&Bytes> = pairs.clone().map(|p| &p[0]).collect();
    let mut l = ctx.server.store.lock_keys(&keys);
    if nx {
        for (i, k) in keys.iter().enumerate() {
            let h = l.hash(i);
            if l.ks(i, db).contains(h, k) {
                return Ok(Reply::Int(0));
            }
        }
    }
    for (i, p) in pairs.enumerate() {
        let h = l.hash(i);
        l.ks(i, db).set(h, &p[0], Value::string(&p[1]), Ttl::Clear);
        ctx.server.notify(db, class::STRING, "set", &p[0]);
    }
    Ok(if nx { Reply::Int(1) } else { Reply::ok() })
}

fn mset(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    mset_generic(ctx, args, false)
}

fn msetnx(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    mset_generic(ctx, args, true)
}

/// INCR family: adds `by` to the integer at `key` (0 when missing), keeping its deadline.
fn incr_generic(ctx: &mut Ctx<'_>, key: &Bytes, by: i64) -> CmdResult {
    ctx.server.store.with_key(ctx.client.db, key, |ks, h| {
        let cur = match ks.peek(h, key) {
            None => 0,
            Some(e) => match &e.value {
                Value::Int(i) => *i,
                Value::Str(b) | Value::Raw(b) => {
                    parse_i64(b).ok_or_else(CommandError::not_integer)?
                }
                _ => return Err(CommandError::wrongtype()),
            },
        };
        let n = cur
            .checked_add(by)
            .ok_or_else(|| CommandError::msg("ERR increment or decrement would overflow"))?;
        ks.set(h, key, Value::Int(n), Ttl::Keep);
        ctx.server
            .notify(ctx.client.db, class::STRING, "incrby", key);
        Ok(Reply::Int(n))
    })
}

fn incr(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    incr_generic(ctx, args.next_key()?, 1)
}

fn decr(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    incr_generic(ctx, args.next_key()?, -1)
}

fn incrby(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let key = args.next_key()?;
    let by = args.next_i64()?;
    incr_generic(ctx, key, by)
}

fn decrby(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let key = args.next_key()?;
    match args.next_i64()? {
        i64::MIN => Err(CommandError::msg("ERR decrement would overflow")),
        by => incr_generic(ctx, key, -by),
    }
}

/// Formats a float result as Redis's `LD_STR_HUMAN`: no exponent, shortest digits.
pub fn human_float(d: f64) -> String {
    let s = format!("{d}");
    if s == "-0" {
        "0".into()
    } else {
        s
    }
}

fn incrbyfloat(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let key = args.next_key()?;
    let by = args.next_f64()?;
    ctx.server.store.with_key(ctx.client.db, key, |ks, h| {
        let cur = match ks.peek(h, key) {
            None => 0.0,
            Some(e) => match &e.value {
                Value::Int(i) => *i as f64,
                Value::Str(b) | Value::Raw(b) => {
                    parse_f64(b).ok_or_else(CommandError::not_float)?
                }
                _ => return Err(CommandError::wrongtype()),
            },
        };
        let n = cur + by;
        if !n.is_finite() {
            return Err(CommandError::msg(
                "ERR increment would produce NaN or Infinity",
            ));
        }
        let text = human_float(n);
        // Journaled as its result (Redis 7 propagates SET … KEEPTTL).
        crate::commands::journal::journal_as(&[b"SET", key, text.as_bytes(), b"KEEPTTL"]);
        ks.set(h, key, Value::text(text.as_bytes()), Ttl::Keep);
        ctx.server
            .notify(ctx.client.db, class::STRING, "incrbyfloat", key);
        Ok(Reply::bulk(text))
    })
}

fn append(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let (key, val) = (args.next_key()?, args.next_arg()?);
    let c = &*ctx;
    c.server.store.with_key(c.client.db, key, |ks, h| {
        let cur = match ks.peek(h, key) {
            None => None,
            Some(e) => Some(string_of(e)?),
        };
        let new = match cur {
            None => Value::string(val),
            Some(b) => {
                check_len(c, (b.len() + val.len()) as u64)?;
                let mut v = Vec::with_capacity(b.len() + val.len());
                v.extend_from_slice(&b);
                v.extend_from_slice(val);
                Value::raw(v)
            }
        };
        let len = match &new {
            Value::Raw(b) => b.len(),
            _ => val.len(),
        };
        ks.set(h, key, new, Ttl::Keep);
        c.server.notify(c.client.db, class::STRING, "append", key);
        Ok(Reply::Int(len as i64))
    })
}

fn strlen(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let key = args.next_key()?;
    ctx.server
        .store
        .with_key(ctx.client.db, key, |ks, h| match ks.get(h, key) {
            None => Ok(Reply::Int(0)),
            Some(e) => Ok(Reply::Int(string_of(e)?.len() as i64)),
        })
}

fn getrange(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let key = args.next_key()?;
    let (start, end) = (args.next_arg()?, args.next_arg()?);
    let (Some(mut start), Some(mut end)) = (parse_i64(start), parse_i64(end)) else {
        return Err(CommandError::not_integer());
    };
    ctx.server.store.with_key(ctx.client.db, key, |ks, h| {
        let b = match ks.get(h, key) {
            None => return Ok(Reply::bulk(Bytes::new())),
            Some(e) => string_of(e)?,
        };
        let len = b.len() as i64;
        if start < 0 && end < 0 && start > end {
            return Ok(Reply::bulk(Bytes::new()));
        }
        if start < 0 {
            start += len;
        }
        if end < 0 {
            end += len;
        }
        start = start.max(0);
        end = end.max(0);
        if end >= len {
            end = len - 1;
        }
        if start > end || len == 0 {
            return Ok(Reply::bulk(Bytes::new()));
        }
        Ok(Reply::Bulk(b.slice(start as usize..=end as usize)))
    })
}

fn setrange(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let key = args.next_key()?;
    let offset = args.next_i64()?;
    if offset < 0 {
        return Err(CommandError::msg("ERR offset is out of range"));
    }
    let val = args.next_arg()?;
    let c = &*ctx;
    c.server.store.with_key(c.client.db, key, |ks, h| {
        let cur = match ks.peek(h, key) {
            None => None,
            Some(e) => Some(string_of(e)?),
        };
        let cur_len = cur.as_ref().map_or(0, |b| b.len());
        if val.is_empty() {
            return Ok(Reply::Int(cur_len as i64));
        }
        let need = offset as u64 + val.len() as u64;
        check_len(c, need)?;
        let need = need as usize;
        let mut v = Vec::with_capacity(need.max(cur_len));
        if let Some(b) = &cur {
            v.extend_from_slice(b);
        }
        if v.len() < need {
            v.resize(need, 0);
        }
        v[offset as usize..need].copy_from_slice(val);
        let len = v.len();
        ks.set(h, key, Value::raw(v), Ttl::Keep);
        c.server.notify(c.client.db, class::STRING, "setrange", key);
        Ok(Reply::Int(len as i64))
    })
}

/// LCS: the longest common subsequence of two strings by Redis 7.0's dynamic programming
/// (t_string.c's `lcsCommand`, step for step, so IDX reports the same ranges). The table is
/// (|a|+1)×(|b|+1) 32-bit cells, refused past `proto-max-bulk-len` bytes as Redis does.
fn lcs(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let (ka, kb) = (args.next_key()?, args.next_key()?);
    let (mut getlen, mut getidx, mut withmatchlen, mut minmatchlen) = (false, false, false, 0i64);
    // Redis reads the keys first: a type error comes before an option error.
    let db = ctx.client.db;
    let values = {
        let mut locked = ctx.server.store.lock_keys(&[ka, kb]);
        let mut read = |i: usize, key: &Bytes| -> CommandResult<Bytes> {
            let h = locked.hash(i);
            match locked.ks(i, db).get(h, key) {
                None => Ok(Bytes::new()),
                Some(e) => e.value.str_bytes().ok_or_else(|| {
                    CommandError::msg("ERR The specified keys must contain string values")
                }),
            }
        };
        (read(0, ka), read(1, kb))
    };
    let (a, b) = (values.0?, values.1?);
    while let Some(opt) = args.next_token() {
        match &*opt {
            b"IDX" => getidx = true,
            b"LEN" => getlen = true,
            b"WITHMATCHLEN" => withmatchlen = true,
            b"MINMATCHLEN" if !args.is_empty() => minmatchlen = args.next_i64()?.max(0),
            _ => return Err(CommandError::syntax()),
        }
    }
    if getlen && getidx {
        return Err(CommandError::msg(
            "ERR If you want both the length and indexes, please just use IDX.",
        ));
    }
    if a.len() >= u32::MAX as usize - 1 || b.len() >= u32::MAX as usize - 1 {
        return Err(CommandError::msg("ERR String too long for LCS"));
    }
    let (alen, blen) = (a.len(), b.len());
    let cells = (alen as u64 + 1) * (blen as u64 + 1);
    if cells * 4 > ctx.server.config.read().get_u64("proto-max-bulk-len") {
        return Err(CommandError::msg(
            "ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len",
        ));
    }
    let w = blen + 1;
    let mut t = vec![0u32; cells as usize];
    for i in 1..=alen {
        for j in 1..=blen {
            t[i * w + j] = if a[i - 1] == b[j - 1] {
                t[(i - 1) * w + j - 1] + 1
            } else {
                t[(i - 1) * w + j].max(t[i * w + j - 1])
            };
        }
    }
    let total = t[alen * w + blen];
    let computelcs = getidx || !getlen;
    let mut result = vec![0u8; if computelcs { total as usize } else { 0 }];
    let mut idx = total as usize;
    let mut matches = Vec::new();
    let (mut a_start, mut a_end, mut b_start, mut b_end) = (alen, 0usize, 0usize, 0usize);
    let (mut i, mut j) = (alen, blen);
    while computelcs && i > 0 && j > 0 {
        let mut emit = false;
        if a[i - 1] == b[j - 1] {
            result[idx - 1] = a[i - 1];
            if a_start == alen {
                (a_start, a_end, b_start, b_end) = (i - 1, i - 1, j - 1, j - 1);
            } else if a_start == i && b_start == j {
                a_start -= 1;
                b_start -= 1;
            } else {
                emit = true;
            }
            if a_start == 0 || b_start == 0 {
                emit = true;
            }
            idx -= 1;
            i -= 1;
            j -= 1;
        } else {
            if t[(i - 1) * w + j] > t[i * w + j - 1] {
                i -= 1;
            } else {
                j -= 1;
            }
            if a_start != alen {
                emit = true;
            }
        }
        let match_len = a_end.wrapping_sub(a_start).wrapping_add(1);
        if emit {
            if getidx && (minmatchlen == 0 || match_len as i64 >= minmatchlen) {
                let mut m = vec![
                    Reply::Array(vec![Reply::Int(a_start as i64), Reply::Int(a_end as i64)]),
                    Reply::Array(vec![Reply::Int(b_start as i64), Reply::Int(b_end as i64)]),
                ];
                if withmatchlen {
                    m.push(Reply::Int(match_len as i64));
                }
                matches.push(Reply::Array(m));
            }
            a_start = alen;
        }
    }
    Ok(if getidx {
        Reply::Map(vec![
            (Reply::bulk_str("matches"), Reply::Array(matches)),
            (Reply::bulk_str("len"), Reply::Int(total as i64)),
        ])
    } else if getlen {
        Reply::Int(total as i64)
    } else {
        Reply::Bulk(result.into())
    })
}
