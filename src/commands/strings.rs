//! Strings family: GET SET INCR APPEND GETRANGE ...
//! Table entries transcribed from Redis 7's COMMAND INFO / COMMAND DOCS; handlers below.
use crate::commands::keys::{parse_expire_option, ExpireOpt};
use crate::commands::spec::{acl, family, flag::*, CommandSpec};
use crate::commands::{is, syntax_error, wrong_arity, wrongtype, Ctx};
use crate::protocol::Reply;
use crate::server::pubsub::class;
use crate::store::keyspace::now_ms;
use crate::store::{Ttl, Value};
use crate::util::num::{parse_f64, parse_i64, NOT_AN_INTEGER};
use bytes::Bytes;

const STR: CommandSpec = family("string", acl::STRING);

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    STR.cmd("get", 2, legacy!(get)).flags(READONLY | FAST).key()
        .doc("1.0.0", "Get the value of a key").args("key:key"),
    STR.cmd("set", -3, legacy!(set)).flags(WRITE | DENYOOM).key()
        .doc("1.0.0", "Set the string value of a key")
        .args("key:key value [condition:(NX|XX)] [GET] [expiration:(EX=seconds:integer|PX=milliseconds:integer|EXAT=unix-time-seconds:unix-time|PXAT=unix-time-milliseconds:unix-time|KEEPTTL)]"),
    STR.cmd("setex", 4, legacy!(setex)).flags(WRITE | DENYOOM).key()
        .doc("2.0.0", "Set the value and expiration of a key").args("key:key seconds:integer value"),
    STR.cmd("psetex", 4, legacy!(psetex)).flags(WRITE | DENYOOM).key()
        .doc("2.6.0", "Set the value and expiration in milliseconds of a key")
        .args("key:key milliseconds:integer value"),
    STR.cmd("setnx", 3, legacy!(setnx)).flags(WRITE | DENYOOM | FAST).key()
        .doc("1.0.0", "Set the value of a key, only if the key does not exist")
        .args("key:key value"),
    STR.cmd("getex", -2, legacy!(getex)).flags(WRITE | FAST).key()
        .doc("6.2.0", "Get the value of a key and optionally set its expiration")
        .args("key:key [expiration:(EX=seconds:integer|PX=milliseconds:integer|EXAT=unix-time-seconds:unix-time|PXAT=unix-time-milliseconds:unix-time|PERSIST)]"),
    STR.cmd("getdel", 2, legacy!(getdel)).flags(WRITE | FAST).key()
        .doc("6.2.0", "Get the value of a key and delete the key").args("key:key"),
    STR.cmd("getset", 3, legacy!(getset)).flags(WRITE | DENYOOM | FAST).key()
        .doc("1.0.0", "Set the string value of a key and return its old value (deprecated since 6.2.0; use SET with the !GET argument)")
        .args("key:key value"),
    STR.cmd("mget", -2, legacy!(mget)).flags(READONLY | FAST).keys(1, -1, 1)
        .doc("1.0.0", "Get the values of all the given keys")
        .complexity("O(N) where N is the number of keys to retrieve.").args("key:key..."),
    STR.cmd("mset", -3, legacy!(mset)).flags(WRITE | DENYOOM).keys(1, -1, 2)
        .doc("1.0.1", "Set multiple keys to multiple values")
        .complexity("O(N) where N is the number of keys to set.")
        .args("key_value:{key:key value}..."),
    STR.cmd("msetnx", -3, legacy!(msetnx)).flags(WRITE | DENYOOM).keys(1, -1, 2)
        .doc("1.0.1", "Set multiple keys to multiple values, only if none of the keys exist")
        .complexity("O(N) where N is the number of keys to set.")
        .args("key_value:{key:key value}..."),
    STR.cmd("incr", 2, legacy!(incr)).flags(WRITE | DENYOOM | FAST).key()
        .doc("1.0.0", "Increment the integer value of a key by one").args("key:key"),
    STR.cmd("incrby", 3, legacy!(incrby)).flags(WRITE | DENYOOM | FAST).key()
        .doc("1.0.0", "Increment the integer value of a key by the given amount")
        .args("key:key increment:integer"),
    STR.cmd("incrbyfloat", 3, legacy!(incrbyfloat)).flags(WRITE | DENYOOM | FAST).key()
        .doc("2.6.0", "Increment the float value of a key by the given amount")
        .args("key:key increment:double"),
    STR.cmd("decr", 2, legacy!(decr)).flags(WRITE | DENYOOM | FAST).key()
        .doc("1.0.0", "Decrement the integer value of a key by one").args("key:key"),
    STR.cmd("decrby", 3, legacy!(decrby)).flags(WRITE | DENYOOM | FAST).key()
        .doc("1.0.0", "Decrement the integer value of a key by the given number")
        .args("key:key decrement:integer"),
    STR.cmd("append", 3, legacy!(append)).flags(WRITE | DENYOOM | FAST).key()
        .doc("2.0.0", "Append a value to a key")
        .complexity("O(1). The amortized time complexity is O(1) assuming the appended value is small and the already present value is of any size, since the dynamic string library used by Redis will double the free space available on every reallocation.")
        .args("key:key value"),
    STR.cmd("strlen", 2, legacy!(strlen)).flags(READONLY | FAST).key()
        .doc("2.2.0", "Get the length of the value stored in a key").args("key:key"),
    STR.cmd("getrange", 4, legacy!(getrange)).flags(READONLY).key()
        .doc("2.4.0", "Get a substring of the string stored at a key")
        .complexity("O(N) where N is the length of the returned string. The complexity is ultimately determined by the returned length, but because creating a substring from an existing string is very cheap, it can be considered O(1) for small strings.")
        .args("key:key start:integer end:integer"),
    STR.cmd("setrange", 4, legacy!(setrange)).flags(WRITE | DENYOOM).key()
        .doc("2.2.0", "Overwrite part of a string at key starting at the specified offset")
        .complexity("O(1), not counting the time taken to copy the new string in place. Usually, this string is very small so the amortized complexity is O(1). Otherwise, complexity is O(M) with M being the length of the value argument.")
        .args("key:key offset:integer value"),
];

/// Redis's `proto-max-bulk-len` check for strings built by APPEND and SETRANGE.
fn check_len(ctx: &Ctx<'_>, len: u64) -> Result<(), Reply> {
    if len > ctx.server.config.read().get_u64("proto-max-bulk-len") {
        return Err(Reply::error(
            "ERR string exceeds maximum allowed size (proto-max-bulk-len)",
        ));
    }
    Ok(())
}

fn get(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let key = &args[1];
    ctx.server
        .store
        .with_key(ctx.client.db, key, |ks, h| match ks.get(h, key) {
            None => Reply::Nil,
            Some(e) => match e.value.str_bytes() {
                Some(b) => Reply::Bulk(b),
                None => wrongtype(),
            },
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

/// Parses SET's / GETEX's options as Redis's `parseExtendedStringArgumentsOrReply`, then the
/// deadline. `getex` selects GETEX's set of options.
fn parse_set_opts(
    args: &[Bytes],
    from: usize,
    getex: bool,
    cmd: &str,
) -> Result<(SetOpts, Option<i64>), Reply> {
    let mut o = SetOpts::default();
    let mut j = from;
    while j < args.len() {
        let a = &args[j];
        let has_next = j + 1 < args.len();
        let timed = o.expire.is_some();
        if !getex && is(a, "NX") && !o.xx {
            o.nx = true;
        } else if !getex && is(a, "XX") && !o.nx {
            o.xx = true;
        } else if !getex && is(a, "GET") {
            o.get = true;
        } else if !getex && is(a, "KEEPTTL") && !o.persist && !timed {
            o.keepttl = true;
        } else if getex && is(a, "PERSIST") && !timed && !o.keepttl {
            o.persist = true;
        } else if let Some(kind) = parse_expire_option(a) {
            let same_or_none = o.expire.as_ref().is_none_or(|e| e.kind == kind);
            if o.keepttl || o.persist || !same_or_none || !has_next {
                return Err(syntax_error());
            }
            o.expire = Some(ExpireOpt {
                kind,
                arg: args[j + 1].clone(),
            });
            j += 1;
        } else {
            return Err(syntax_error());
        }
        j += 1;
    }
    let at = match &o.expire {
        None => None,
        Some(e) => Some(e.deadline(cmd, now_ms(), true)?),
    };
    Ok((o, at))
}

fn set(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let (o, at) = match parse_set_opts(args, 3, false, "set") {
        Ok(x) => x,
        Err(e) => return e,
    };
    let (key, val) = (&args[1], &args[2]);
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
                Some(None) => return wrongtype(),
                Some(Some(b)) => Some(Reply::Bulk(b.clone())),
            }
        } else {
            None
        };
        let found = old.is_some();
        if (o.nx && found) || (o.xx && !found) {
            return reply_get.unwrap_or(Reply::Nil);
        }
        match at {
            // A deadline already past: the key is gone at once (Redis 7's checkAlreadyExpired).
            Some(at) if at <= now_ms() => {
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
        reply_get.unwrap_or(Reply::ok())
    })
}

/// SETEX / PSETEX.
fn setex_generic(ctx: &mut Ctx<'_>, args: &[Bytes], kind: &'static str, cmd: &str) -> Reply {
    let at = match (ExpireOpt {
        kind,
        arg: args[2].clone(),
    })
    .deadline(cmd, now_ms(), false)
    {
        Ok(at) => at,
        Err(e) => return e,
    };
    let (key, val) = (&args[1], &args[3]);
    ctx.server.store.with_key(ctx.client.db, key, |ks, h| {
        if at <= now_ms() {
            if ks.remove(h, key).is_some() {
                ctx.server.notify(ctx.client.db, class::GENERIC, "del", key);
            }
        } else {
            ks.set(h, key, Value::string(val), Ttl::At(at));
            ctx.server.notify(ctx.client.db, class::STRING, "set", key);
            ctx.server
                .notify(ctx.client.db, class::GENERIC, "expire", key);
        }
        Reply::ok()
    })
}

fn setex(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    setex_generic(ctx, args, "EX", "setex")
}

fn psetex(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    setex_generic(ctx, args, "PX", "psetex")
}

fn setnx(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let (key, val) = (&args[1], &args[2]);
    ctx.server.store.with_key(ctx.client.db, key, |ks, h| {
        if ks.contains(h, key) {
            return Reply::Int(0);
        }
        ks.set(h, key, Value::string(val), Ttl::Clear);
        ctx.server.notify(ctx.client.db, class::STRING, "set", key);
        Reply::Int(1)
    })
}

fn getex(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let (o, at) = match parse_set_opts(args, 2, true, "getex") {
        Ok(x) => x,
        Err(e) => return e,
    };
    let key = &args[1];
    ctx.server.store.with_key(ctx.client.db, key, |ks, h| {
        let (v, had_deadline) = match ks.get(h, key) {
            None => return Reply::Nil,
            Some(e) => match e.value.str_bytes() {
                None => return wrongtype(),
                Some(b) => (b, e.has_deadline()),
            },
        };
        if let Some(at) = at {
            // set_deadline deletes the key when the deadline is already past.
            let event = if at <= now_ms() { "del" } else { "expire" };
            ks.set_deadline(h, key, Some(at));
            ctx.server.notify(ctx.client.db, class::GENERIC, event, key);
        } else if o.persist && had_deadline && ks.set_deadline(h, key, None) {
            ctx.server
                .notify(ctx.client.db, class::GENERIC, "persist", key);
        }
        Reply::Bulk(v)
    })
}

fn getdel(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let key = &args[1];
    ctx.server.store.with_key(ctx.client.db, key, |ks, h| {
        let v = match ks.get(h, key) {
            None => return Reply::Nil,
            Some(e) => match e.value.str_bytes() {
                None => return wrongtype(),
                Some(b) => b,
            },
        };
        ks.remove(h, key);
        ctx.server.notify(ctx.client.db, class::GENERIC, "del", key);
        Reply::Bulk(v)
    })
}

fn getset(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let (key, val) = (&args[1], &args[2]);
    ctx.server.store.with_key(ctx.client.db, key, |ks, h| {
        let old = match ks.get(h, key) {
            None => Reply::Nil,
            Some(e) => match e.value.str_bytes() {
                None => return wrongtype(),
                Some(b) => Reply::Bulk(b),
            },
        };
        ks.set(h, key, Value::string(val), Ttl::Clear);
        ctx.server.notify(ctx.client.db, class::STRING, "set", key);
        old
    })
}

fn mget(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let keys = &args[1..];
    let db = ctx.client.db;
    let mut l = ctx.server.store.lock_keys(keys);
    Reply::Array(
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
    )
}

fn mset_generic(ctx: &mut Ctx<'_>, args: &[Bytes], nx: bool) -> Reply {
    if args.len().is_multiple_of(2) {
        return wrong_arity(if nx { "msetnx" } else { "mset" });
    }
    let db = ctx.client.db;
    let keys: Vec<&Bytes> = args[1..].iter().step_by(2).collect();
    let mut l = ctx.server.store.lock_keys(&keys);
    if nx {
        for (i, k) in keys.iter().enumerate() {
            let h = l.hash(i);
            if l.ks(i, db).contains(h, k) {
                return Reply::Int(0);
            }
        }
    }
    for (i, k) in keys.iter().enumerate() {
        let h = l.hash(i);
        l.ks(i, db)
            .set(h, k, Value::string(&args[2 + 2 * i]), Ttl::Clear);
        ctx.server.notify(db, class::STRING, "set", k);
    }
    if nx {
        Reply::Int(1)
    } else {
        Reply::ok()
    }
}

fn mset(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    mset_generic(ctx, args, false)
}

fn msetnx(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    mset_generic(ctx, args, true)
}

/// INCR family: adds `by` to the integer at `key` (0 when missing), keeping its deadline.
fn incr_generic(ctx: &mut Ctx<'_>, key: &Bytes, by: i64) -> Reply {
    ctx.server.store.with_key(ctx.client.db, key, |ks, h| {
        let cur = match ks.peek(h, key) {
            None => 0,
            Some(e) => match &e.value {
                Value::Int(i) => *i,
                Value::Str(b) | Value::Raw(b) => match parse_i64(b) {
                    Some(i) => i,
                    None => return Reply::error(NOT_AN_INTEGER),
                },
                Value::Hash(_) => return wrongtype(),
            },
        };
        let Some(n) = cur.checked_add(by) else {
            return Reply::error("ERR increment or decrement would overflow");
        };
        ks.set(h, key, Value::Int(n), Ttl::Keep);
        ctx.server
            .notify(ctx.client.db, class::STRING, "incrby", key);
        Reply::Int(n)
    })
}

fn int_arg(b: &[u8]) -> Result<i64, Reply> {
    parse_i64(b).ok_or_else(|| Reply::error(NOT_AN_INTEGER))
}

fn incr(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    incr_generic(ctx, &args[1], 1)
}

fn decr(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    incr_generic(ctx, &args[1], -1)
}

fn incrby(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    match int_arg(&args[2]) {
        Ok(by) => incr_generic(ctx, &args[1], by),
        Err(e) => e,
    }
}

fn decrby(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    match int_arg(&args[2]) {
        Ok(i64::MIN) => Reply::error("ERR decrement would overflow"),
        Ok(by) => incr_generic(ctx, &args[1], -by),
        Err(e) => e,
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

fn incrbyfloat(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let Some(by) = parse_f64(&args[2]) else {
        return Reply::error("ERR value is not a valid float");
    };
    let key = &args[1];
    ctx.server.store.with_key(ctx.client.db, key, |ks, h| {
        let cur = match ks.peek(h, key) {
            None => 0.0,
            Some(e) => match &e.value {
                Value::Int(i) => *i as f64,
                Value::Str(b) | Value::Raw(b) => match parse_f64(b) {
                    Some(f) => f,
                    None => return Reply::error("ERR value is not a valid float"),
                },
                Value::Hash(_) => return wrongtype(),
            },
        };
        let n = cur + by;
        if !n.is_finite() {
            return Reply::error("ERR increment would produce NaN or Infinity");
        }
        let text = human_float(n);
        ks.set(h, key, Value::text(text.as_bytes()), Ttl::Keep);
        ctx.server
            .notify(ctx.client.db, class::STRING, "incrbyfloat", key);
        Reply::bulk(text)
    })
}

fn append(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let (key, val) = (&args[1], &args[2]);
    let limit_ctx = &*ctx;
    limit_ctx
        .server
        .store
        .with_key(limit_ctx.client.db, key, |ks, h| {
            let cur = match ks.peek(h, key) {
                None => None,
                Some(e) => match e.value.str_bytes() {
                    None => return wrongtype(),
                    Some(b) => Some(b),
                },
            };
            let new = match cur {
                None => Value::string(val),
                Some(b) => {
                    if let Err(e) = check_len(limit_ctx, (b.len() + val.len()) as u64) {
                        return e;
                    }
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
            limit_ctx
                .server
                .notify(limit_ctx.client.db, class::STRING, "append", key);
            Reply::Int(len as i64)
        })
}

fn strlen(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let key = &args[1];
    ctx.server
        .store
        .with_key(ctx.client.db, key, |ks, h| match ks.get(h, key) {
            None => Reply::Int(0),
            Some(e) => match e.value.str_bytes() {
                None => wrongtype(),
                Some(b) => Reply::Int(b.len() as i64),
            },
        })
}

fn getrange(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let (Some(mut start), Some(mut end)) = (parse_i64(&args[2]), parse_i64(&args[3])) else {
        return Reply::error(NOT_AN_INTEGER);
    };
    let key = &args[1];
    ctx.server.store.with_key(ctx.client.db, key, |ks, h| {
        let b = match ks.get(h, key) {
            None => return Reply::bulk(Bytes::new()),
            Some(e) => match e.value.str_bytes() {
                None => return wrongtype(),
                Some(b) => b,
            },
        };
        let len = b.len() as i64;
        // Redis 7's getrangeCommand, step by step.
        if start < 0 && end < 0 && start > end {
            return Reply::bulk(Bytes::new());
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
            return Reply::bulk(Bytes::new());
        }
        Reply::Bulk(b.slice(start as usize..=end as usize))
    })
}

fn setrange(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let Some(offset) = parse_i64(&args[2]) else {
        return Reply::error(NOT_AN_INTEGER);
    };
    if offset < 0 {
        return Reply::error("ERR offset is out of range");
    }
    let (key, val) = (&args[1], &args[3]);
    let c = &*ctx;
    c.server.store.with_key(c.client.db, key, |ks, h| {
        let cur = match ks.peek(h, key) {
            None => None,
            Some(e) => match e.value.str_bytes() {
                None => return wrongtype(),
                Some(b) => Some(b),
            },
        };
        let cur_len = cur.as_ref().map_or(0, |b| b.len());
        if val.is_empty() {
            return Reply::Int(cur_len as i64);
        }
        let need = offset as u64 + val.len() as u64;
        if let Err(e) = check_len(c, need) {
            return e;
        }
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
        ctx.server
            .notify(ctx.client.db, class::STRING, "setrange", key);
        Reply::Int(len as i64)
    })
}
