//! `DOC.INSERT FIND FINDONE COUNT UPDATE DELETE TOUCH`: parse, run through the collection
//! API (`store::collections`), format.

use super::parse::{
    doc_reply, fail, limit_value, max_doc_size, parse_doc, parse_filter, skip_value, stored_reply,
    target, with_code, Target, NO_JOURNAL,
};
use crate::commands::args::{Args, CommandError, CommandResult};
use crate::commands::spec::CmdResult;
use crate::commands::Ctx;
use crate::documents::capped;
use crate::documents::projection::Projection;
use crate::documents::sort::Sort;
use crate::documents::{codec, json, update};
use crate::protocol::Reply;
use crate::store::collections::{FindQuery, Found, UpdateOutcome};

/// `J`: the reply waits until the write's journal records are on disk (any `appendfsync`);
/// refused while the journal is off, since nothing would be on disk.
fn journaled() -> CommandResult<()> {
    if !crate::store::journal::enabled() {
        return Err(CommandError::msg(NO_JOURNAL));
    }
    crate::store::journal::want_journaled();
    Ok(())
}

fn id_reply(id: &bson::Bson) -> Reply {
    match id {
        // A generated `_id` (every insert without one): `{"$oid":"<24 hex digits>"}`, as
        // `value_json` writes it, filled in a fixed buffer on the stack and copied once.
        bson::Bson::ObjectId(o) => {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            let mut out = *br#"{"$oid":"000000000000000000000000"}"#;
            for (i, b) in o.bytes().iter().enumerate() {
                out[9 + 2 * i] = HEX[(b >> 4) as usize];
                out[10 + 2 * i] = HEX[(b & 15) as usize];
            }
            Reply::bulk(bytes::Bytes::copy_from_slice(&out))
        }
        _ => Reply::bulk(codec::value_json(id)),
    }
}

/// `DOC.INSERT coll [BSON] doc [doc ...] [J]`: the `_id`s in order, all or nothing.
pub fn doc_insert(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let t = target(args)?;
    let mut docs = args.rest();
    if docs.len() > 1 && crate::commands::is(&docs[docs.len() - 1], "J") {
        journaled()?;
        docs = &docs[..docs.len() - 1];
    }
    if docs.is_empty() {
        return Err(CommandError::WrongArity);
    }
    // Everything is parsed and validated before anything is stored. JSON goes straight
    // to its stored bytes when it can (the same bytes as the general path).
    let mut parsed = Vec::with_capacity(docs.len().min(1024));
    for d in docs {
        let fast = if t.bson {
            None
        } else {
            codec::encode_insert_json(d, t.now)
        };
        parsed.push(match fast {
            Some(doc) => doc,
            None => codec::NewDoc::Decoded(parse_doc(d, &t)?),
        });
    }
    let ids = ctx
        .server
        .store
        .collection(ctx.client.db, &t.coll)
        .insert(parsed, max_doc_size(ctx))
        .map_err(fail)?;
    Ok(Reply::Array(ids.iter().map(id_reply).collect()))
}

/// The parsed options of a find.
struct FindOpts {
    query: FindQuery,
    projection: Option<Projection>,
    touch: bool,
}

fn parse_find(f: &[u8], args: &mut Args<'_>, t: &Target, one: bool) -> CommandResult<FindOpts> {
    let filter = parse_filter(f, t)?;
    let mut o = FindOpts {
        query: FindQuery {
            filter,
            sort: None,
            skip: 0,
            limit: None,
            reverse: false,
            keep_raw: false,
            needs_doc: false,
        },
        projection: None,
        touch: false,
    };
    while let Some(kw) = args.next_token() {
        match &*kw {
            b"PROJECTION" if !args.is_empty() => {
                let d = parse_doc(args.next_arg()?, t)?;
                o.projection = Some(Projection::parse(&d).map_err(|e| fail(with_code(e)))?);
            }
            b"SORT" if !args.is_empty() => {
                let d = parse_doc(args.next_arg()?, t)?;
                match capped::natural_sort(&d).map_err(|e| fail(with_code(e)))? {
                    Some(reverse) => o.query.reverse = reverse,
                    None => o.query.sort = Some(Sort::parse(&d).map_err(|e| fail(with_code(e)))?),
                }
            }
            b"SKIP" if !one && !args.is_empty() => o.query.skip = skip_value(args)?,
            b"LIMIT" if !one && !args.is_empty() => o.query.limit = limit_value(args)?,
            b"TOUCH" => o.touch = true,
            _ => return Err(CommandError::syntax()),
        }
    }
    if one {
        o.query.limit = Some(1);
    }
    // Replied from the stored bytes unless a projection or a JSON touch needs the decoded
    // document.
    o.query.keep_raw = o.projection.is_none() && (t.bson || !o.touch);
    o.query.needs_doc = o.touch;
    Ok(o)
}

/// `DOC.FIND` and `DOC.FINDONE`: the rendered documents (at most one for FINDONE), touched
/// first when asked.
fn find_replies(ctx: &Ctx<'_>, args: &mut Args<'_>, one: bool) -> CommandResult<Vec<Reply>> {
    let t = target(args)?;
    let f = args.next_arg()?;
    let render = |raw: &bson::RawDocument| {
        stored_reply(raw, t.bson).unwrap_or_else(|| {
            let doc = bson::Document::try_from(raw).unwrap_or_default();
            doc_reply(doc, None, t.bson)
        })
    };
    // `{"_id": v}` alone, v a string or an integer (a session, a user): looked up by v's
    // KeyString and written from the stored bytes, without the filter's tree (its path,
    // name and value were three allocations of the eight a find made).
    if !t.bson && args.is_empty() {
        if let Some(key) = crate::documents::query::id_key_json(f) {
            let coll = ctx.server.store.collection(ctx.client.db, &t.coll);
            let filter = || parse_filter(f, &t).ok();
            return Ok(coll
                .find_by_id_key(&key, filter, render)
                .into_iter()
                .collect());
        }
    }
    let o = parse_find(f, args, &t, one)?;
    let coll = ctx.server.store.collection(ctx.client.db, &t.coll);
    // By `_id` alone, as stored: the reply is written from the stored bytes in place.
    if o.projection.is_none() && !o.touch && o.query.skip == 0 {
        let found = coll.find_by_id(&o.query.filter, render);
        if let Some(doc) = found {
            return Ok(doc.into_iter().collect());
        }
    }
    // Unsorted, as stored: every match is written as its reply in place, under its shard's
    // lock (the filter planned once for every shard).
    let q = &o.query;
    if o.projection.is_none() && !o.touch && q.skip == 0 && q.sort.is_none() && !q.reverse {
        if let Some(replies) = coll.find_rendered(&q.filter, q.limit, render) {
            return Ok(replies);
        }
    }
    let mut found = coll.find(&o.query);
    if o.touch {
        found = coll.touch_found(found, t.now, &|| max_doc_size(ctx));
    }
    Ok(found
        .into_iter()
        .map(|Found { doc, raw }| match &o.projection {
            Some(p) => doc_reply(p.apply(&doc), None, t.bson),
            None => doc_reply(doc, raw, t.bson),
        })
        .collect())
}

pub fn doc_find(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    Ok(Reply::Array(find_replies(ctx, args, false)?))
}

pub fn doc_findone(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    Ok(find_replies(ctx, args, true)?
        .into_iter()
        .next()
        .unwrap_or(Reply::Nil))
}

/// `DOC.COUNT coll [BSON] filter`.
pub fn doc_count(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let t = target(args)?;
    let f = args.next_arg()?;
    args.finish()?;
    let filter = parse_filter(f, &t)?;
    let n = ctx
        .server
        .store
        .collection(ctx.client.db, &t.coll)
        .count(&filter);
    Ok(Reply::Int(n as i64))
}

/// `DOC.DELETE coll [BSON] filter [LIMIT 0|1] [J]`.
pub fn doc_delete(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let t = target(args)?;
    let Some(f) = args.next_opt() else {
        return Err(CommandError::WrongArity);
    };
    let mut one = false;
    while let Some(kw) = args.next_token() {
        match &*kw {
            b"LIMIT" if !args.is_empty() => match args.next_i64()? {
                1 => one = true,
                0 => one = false,
                _ => return Err(CommandError::msg("ERR LIMIT must be 0 (all) or 1")),
            },
            b"J" => journaled()?,
            _ => return Err(CommandError::syntax()),
        }
    }
    let filter = parse_filter(f, &t)?;
    let n = ctx
        .server
        .store
        .collection(ctx.client.db, &t.coll)
        .delete(&filter, one);
    Ok(Reply::Int(n as i64))
}

/// `DOC.UPDATE coll [BSON] filter update [MULTI] [UPSERT] [J]`: `[matched, modified,
/// upserted _id or null]`.
pub fn doc_update(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let t = target(args)?;
    if args.len() < 2 {
        return Err(CommandError::WrongArity);
    }
    let (f, u) = (args.next_arg()?, args.next_arg()?);
    let (mut multi, mut upsert) = (false, false);
    while let Some(kw) = args.next_token() {
        match &*kw {
            b"MULTI" => multi = true,
            b"UPSERT" => upsert = true,
            b"J" => journaled()?,
            _ => return Err(CommandError::syntax()),
        }
    }
    let coll = ctx.server.store.collection(ctx.client.db, &t.coll);
    let max_size = max_doc_size(ctx);
    // Top-level `$set`/`$currentDate` of scalars by `_id` (a session refreshed): read from
    // the text and written in place; anything else, or a document not found, takes the
    // general update.
    let fast = if t.bson {
        None
    } else {
        json::parse_scalar_sets(u, t.now.timestamp_millis())
    };
    // By `{_id: v}` alone (a string or an integer), the `_id`'s KeyString is read from the
    // text and the filter's tree is not built unless the general path runs.
    let by_key = fast
        .as_ref()
        .and_then(|_| crate::documents::query::id_key_json(f));
    if let (Some(sets), Some(key)) = (&fast, &by_key) {
        let filter = || parse_filter(f, &t).ok();
        if let Some(out) = coll.update_sets_by_id_key(key, filter, sets, upsert, max_size) {
            return Ok(update_reply(out));
        }
    }
    let filter = parse_filter(f, &t)?;
    if by_key.is_none() {
        if let Some(out) =
            fast.and_then(|sets| coll.update_sets_by_id(&filter, &sets, upsert, max_size))
        {
            return Ok(update_reply(out));
        }
    }
    let upd = update::parse(&parse_doc(u, &t)?).map_err(|e| fail(with_code(e)))?;
    let out = coll
        .update(&filter, &upd, multi, upsert, t.now, max_size)
        .map_err(fail)?;
    Ok(update_reply(out))
}

fn update_reply(out: UpdateOutcome) -> Reply {
    Reply::Array(vec![
        Reply::Int(out.matched as i64),
        Reply::Int(out.modified as i64),
        out.upserted.as_ref().map_or(Reply::Nil, id_reply),
    ])
}

/// `DOC.TOUCH coll [BSON] filter [FIELD name] [J]`: MongoDB's
/// `update(filter, {$set: {accessTime: new Date()}}, {multi: true})` for every TTL field.
pub fn doc_touch(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let t = target(args)?;
    let Some(f) = args.next_opt() else {
        return Err(CommandError::WrongArity);
    };
    let mut field = None;
    while let Some(kw) = args.next_token() {
        match &*kw {
            b"FIELD" if !args.is_empty() => {
                let name = args.next_text()?;
                if name.is_empty() || name.starts_with('$') || name == "_id" {
                    return Err(CommandError::msg(format!("ERR invalid FIELD '{name}'")));
                }
                field = Some(name);
            }
            b"J" => journaled()?,
            _ => return Err(CommandError::syntax()),
        }
    }
    let filter = parse_filter(f, &t)?;
    let n = ctx
        .server
        .store
        .collection(ctx.client.db, &t.coll)
        .touch(&filter, field, t.now, &|| max_doc_size(ctx))
        .map_err(fail)?;
    Ok(Reply::Int(n as i64))
}
