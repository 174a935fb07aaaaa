//! SORT and SORT_RO over lists, sets and sorted sets, with BY, GET, LIMIT, ASC/DESC, ALPHA and
//! STORE, as Redis 7.0's sort.c.
//!
//! The key is read under its shard's lock and its elements copied out; the keys that BY and
//! GET patterns name may live in any shard and are then read one at a time, so a SORT with
//! patterns is not atomic against writes to those other keys (Redis Cluster refuses such
//! patterns altogether). STORE writes the result as a list, deleting the destination when
//! the result is empty.
use crate::commands::args::{Args, CommandError};
use crate::commands::spec::{acl, family, flag::*, CmdResult, CommandSpec, KeySpec};
use crate::commands::Ctx;
use crate::protocol::Reply;
use crate::state::pubsub::class;
use crate::store::{End, ListValue, Ttl, Value};
use bytes::Bytes;
use std::cmp::Ordering;

const SORT: CommandSpec = family(
    "generic",
    acl::SET | acl::SORTEDSET | acl::LIST | acl::DANGEROUS,
);
const SORT_KEYS: &[KeySpec] = &[
    KeySpec::at(1, &["RO", "access"]),
    KeySpec {
        flags: &["OW", "update"],
        begin: crate::commands::spec::Begin::Keyword {
            keyword: "STORE",
            // The last STORE wins, as in Redis's `sortGetKeys`.
            start_from: -1,
        },
        find: crate::commands::spec::Find::Range {
            last: 0,
            step: 1,
            limit: 0,
        },
    },
];

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    SORT.cmd("sort", -2, sort).flags(WRITE | DENYOOM | MOVABLEKEYS).keys(1, 1, 1).key_specs(SORT_KEYS)
        .doc("1.0.0", "Sort the elements in a list, set or sorted set")
        .complexity("O(N+M*log(M)) where N is the number of elements in the list or set to sort, and M the number of returned elements. When the elements are not sorted, complexity is O(N).")
        .args("key:key [BY=pattern:pattern] [LIMIT=limit:{offset:integer count:integer}] [GET=pattern:pattern+...] [order:(ASC|DESC)] [sorting=ALPHA] [STORE=destination:key]"),
    // Movable: Redis marks SORT_RO so, as SORT (its BY/GET patterns name keys too).
    SORT.cmd("sort_ro", -2, sort_ro).flags(READONLY | MOVABLEKEYS).key()
        .doc("7.0.0", "Sort the elements in a list, set or sorted set. Read-only variant of SORT.")
        .complexity("O(N+M*log(M)) where N is the number of elements in the list or set to sort, and M the number of returned elements. When the elements are not sorted, complexity is O(N).")
        .args("key:key [BY=pattern:pattern] [LIMIT=limit:{offset:integer count:integer}] [GET=pattern:pattern...] [order:(ASC|DESC)] [sorting=ALPHA]"),
];

fn sort(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    sort_generic(ctx, args, false)
}

fn sort_ro(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    sort_generic(ctx, args, true)
}

/// The value `pattern` names for `elem` (Redis's `lookupKeyByPattern`): `#` is the element
/// itself; the first `*` is replaced by the element; `key->field` reads a hash field.
fn lookup(ctx: &Ctx<'_>, pattern: &[u8], elem: &[u8]) -> Option<Bytes> {
    if pattern == b"#" {
        return Some(Bytes::copy_from_slice(elem));
    }
    let star = pattern.iter().position(|&b| b == b'*')?;
    let arrow = pattern
        .windows(2)
        .position(|w| w == b"->")
        .filter(|&p| p + 2 < pattern.len());
    let (key_pat, field) = match arrow {
        Some(p) if p > star => (&pattern[..p], Some(&pattern[p + 2..])),
        _ => (pattern, None),
    };
    let mut key = Vec::with_capacity(key_pat.len() + elem.len());
    key.extend_from_slice(&key_pat[..star]);
    key.extend_from_slice(elem);
    key.extend_from_slice(&key_pat[star + 1..]);
    ctx.server.store.with_key(ctx.client.db, &key, |ks, h| {
        let e = ks.get(h, &key)?;
        match (field, &e.value) {
            (None, v) => v.str_bytes(),
            (Some(f), Value::Hash(hv)) => hv.get(f).map(Bytes::copy_from_slice),
            _ => None,
        }
    })
}

/// Redis reads sort weights with `strtod`: leading spaces allowed, nothing after.
fn weight(b: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(b).ok()?.trim_start();
    let f: f64 = s.parse().ok()?;
    (!f.is_nan()).then_some(f)
}

struct Item {
    elem: Vec<u8>,
    score: f64,
    by: Option<Bytes>,
}

fn sort_generic(ctx: &mut Ctx<'_>, args: &mut Args<'_>, readonly: bool) -> CmdResult {
    let key = args.next_key()?;
    let (mut desc, mut alpha) = (false, false);
    let (mut start, mut count) = (0i64, -1i64);
    let mut by: Option<&Bytes> = None;
    let mut gets: Vec<&Bytes> = Vec::new();
    let mut store: Option<&Bytes> = None;
    while let Some(opt) = args.next_token() {
        let left = args.len();
        match &*opt {
            b"ASC" => desc = false,
            b"DESC" => desc = true,
            b"ALPHA" => alpha = true,
            b"LIMIT" if left >= 2 => {
                start = args.next_i64()?;
                count = args.next_i64()?;
            }
            b"STORE" if !readonly && left >= 1 => store = Some(args.next_key()?),
            // BY and GET read keys named by a pattern: only for a user who may read any
            // key (ACL), as Redis.
            b"BY" if left >= 1 => {
                let pattern = args.next_arg()?;
                if pattern.contains(&b'*')
                    && !crate::commands::acl::may_read_any_key(ctx, args.all())
                {
                    return Err(CommandError::msg(
                        "ERR BY option of SORT denied due to insufficient ACL permissions.",
                    ));
                }
                by = Some(pattern);
            }
            b"GET" if left >= 1 => {
                if !crate::commands::acl::may_read_any_key(ctx, args.all()) {
                    return Err(CommandError::msg(
                        "ERR GET option of SORT denied due to insufficient ACL permissions.",
                    ));
                }
                gets.push(args.next_arg()?)
            }
            _ => return Err(CommandError::syntax()),
        }
    }
    let mut dontsort = by.is_some_and(|p| !p.contains(&b'*'));
    // The elements, in the value's own order.
    let (elems, is_set) = ctx.server.store.with_key(ctx.client.db, key, |ks, h| {
        let Some(e) = ks.get(h, key) else {
            return Ok((Vec::new(), false));
        };
        match &e.value {
            Value::List(l) => Ok((l.iter().map(|v| v.into_owned()).collect::<Vec<_>>(), false)),
            Value::Set(s) => Ok((s.to_bytes().into_iter().map(|b| b.to_vec()).collect(), true)),
            Value::ZSet(z) => Ok((z.iter().map(|(m, _)| m.to_vec()).collect(), false)),
            _ => Err(CommandError::wrongtype()),
        }
    })?;
    // A set has no order of its own: sorted by its bytes when the result is stored or goes
    // to a script (Redis 7.0's sort.c), so it is the same everywhere.
    if dontsort && is_set && (store.is_some() || crate::commands::scripting::in_script()) {
        dontsort = false;
        alpha = true;
        by = None;
    }
    let len = elems.len() as i64;
    let mut first = start.clamp(0, len);
    let count = count.clamp(-1, len);
    let mut last = if count < 0 {
        len - 1
    } else {
        first + count - 1
    };
    if first >= len {
        first = len - 1;
        last = len - 2;
    }
    last = last.min(len - 1);
    let mut items: Vec<Item> = elems
        .into_iter()
        .map(|elem| Item {
            elem,
            score: 0.0,
            by: None,
        })
        .collect();
    if dontsort {
        if desc {
            items.reverse();
        }
    } else {
        let mut bad = false;
        for it in items.iter_mut() {
            let val = match by {
                Some(p) => match lookup(ctx, p, &it.elem) {
                    Some(v) => v,
                    None => continue,
                },
                None => Bytes::copy_from_slice(&it.elem),
            };
            if alpha {
                if by.is_some() {
                    it.by = Some(val);
                }
            } else {
                match weight(&val) {
                    Some(f) => it.score = f,
                    None => bad = true,
                }
            }
        }
        if bad {
            return Err(CommandError::msg(
                "ERR One or more scores can't be converted into double",
            ));
        }
        let by_pattern = by.is_some();
        items.sort_by(|a, b| {
            let cmp = if !alpha {
                a.score
                    .partial_cmp(&b.score)
                    .unwrap_or(Ordering::Equal)
                    .then_with(|| a.elem.cmp(&b.elem))
            } else if by_pattern {
                match (&a.by, &b.by) {
                    (None, None) => Ordering::Equal,
                    (None, Some(_)) => Ordering::Less,
                    (Some(_), None) => Ordering::Greater,
                    (Some(x), Some(y)) => x.cmp(y),
                }
            } else {
                a.elem.cmp(&b.elem)
            };
            if desc {
                cmp.reverse()
            } else {
                cmp
            }
        });
    }
    let chosen: &[Item] = if last >= first && first >= 0 {
        &items[first as usize..=last as usize]
    } else {
        &[]
    };
    let mut out: Vec<Option<Bytes>> = Vec::new();
    for it in chosen {
        if gets.is_empty() {
            out.push(Some(Bytes::copy_from_slice(&it.elem)));
        }
        for g in &gets {
            out.push(lookup(ctx, g, &it.elem));
        }
    }
    let Some(dst) = store else {
        return Ok(Reply::Array(
            out.into_iter()
                .map(|v| v.map_or(Reply::Nil, Reply::Bulk))
                .collect(),
        ));
    };
    let n = out.len();
    let db = ctx.client.db;
    ctx.server.store.with_key(db, dst, |ks, h| {
        if n == 0 {
            if ks.remove(h, dst).is_some() {
                ctx.server.notify(db, class::GENERIC, "del", dst);
            }
            return;
        }
        let mut l = ListValue::default();
        for v in &out {
            l.push(End::Right, v.as_deref().unwrap_or(b""));
        }
        ks.set(h, dst, Value::List(l), Ttl::Clear);
        ctx.server.notify(db, class::LIST, "sortstore", dst);
    });
    Ok(Reply::Int(n as i64))
}
