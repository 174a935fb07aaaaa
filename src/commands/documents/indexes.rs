//! `DOC.CREATEINDEX DROPINDEX INDEXES EXPIREINDEX`.

use super::parse::{fail, target, with_code};
use crate::commands::args::{Args, CommandError, CommandResult};
use crate::commands::spec::CmdResult;
use crate::commands::Ctx;
use crate::documents::codec;
use crate::documents::index::IndexSpec;
use crate::documents::ttl::parse_expire_after;
use crate::protocol::Reply;
use crate::store::collections::check_name;
use bytes::Bytes;

/// `DOC.CREATEINDEX coll keys [UNIQUE] [NAME n] [EXPIREAFTER s]`: the index's name.
pub fn doc_createindex(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let coll_arg = args.next_arg()?;
    let spec = parse_createindex(args)?;
    let coll = String::from_utf8_lossy(coll_arg).into_owned();
    check_name(&coll).map_err(fail)?;
    let name = ctx
        .server
        .store
        .collection(ctx.client.db, &coll)
        .create_index(spec)
        .map_err(fail)?;
    Ok(Reply::bulk(Bytes::from(name)))
}

/// `DOC.CREATEINDEX`'s arguments after the collection. Also how a collection's
/// `DOC.CREATEINDEX` records are read when they arrive with it (`DOC.RESTORE`).
pub(super) fn parse_createindex(args: &mut Args<'_>) -> CommandResult<IndexSpec> {
    let keys = codec::parse_json(args.next_arg()?).map_err(|e| fail(with_code(e)))?;
    let fields = IndexSpec::parse_keys(&keys).map_err(|e| fail(with_code(e)))?;
    let (mut unique, mut name, mut expire) = (false, None, None);
    while let Some(kw) = args.next_token() {
        match &*kw {
            b"UNIQUE" => unique = true,
            b"NAME" if !args.is_empty() => {
                let n = args.next_text()?;
                if n.is_empty() {
                    return Err(CommandError::msg("ERR index name cannot be empty"));
                }
                name = Some(n);
            }
            b"EXPIREAFTER" if !args.is_empty() => {
                expire = Some(parse_expire_after(args.next_arg()?).map_err(fail)?);
            }
            _ => return Err(CommandError::syntax()),
        }
    }
    if expire.is_some() {
        if fields.len() != 1 {
            return Err(CommandError::msg(
                "ERR TTL indexes are single-field indexes, compound indexes do not support TTL",
            ));
        }
        if fields[0].name == "_id" {
            return Err(CommandError::msg(
                "ERR The field 'expireAfterSeconds' is not valid for an _id index specification",
            ));
        }
    }
    Ok(IndexSpec {
        name: name.unwrap_or_else(|| IndexSpec::default_name(&fields)),
        fields,
        unique,
        expire_after: expire,
    })
}

/// `DOC.DROPINDEX coll name` (`*`: every secondary index).
pub fn doc_dropindex(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let coll = args.next_text()?;
    let name = args.next_text()?;
    ctx.server
        .store
        .collection(ctx.client.db, &coll)
        .drop_index(&name)
        .map_err(fail)?;
    Ok(Reply::ok())
}

/// `DOC.INDEXES coll`: the specs as JSON, `_id_` first; empty for no collection.
pub fn doc_indexes(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let coll = args.next_text()?;
    let docs = ctx
        .server
        .store
        .collection(ctx.client.db, &coll)
        .index_docs()
        .unwrap_or_default();
    Ok(Reply::Array(
        docs.iter()
            .map(|d| Reply::bulk(codec::doc_json(d)))
            .collect(),
    ))
}

/// MongoDB refuses TTL indexes on `_id` (and on compound keys, which one field cannot be).
fn ttl_field_ok(field: &str) -> CommandResult<()> {
    if field == "_id" {
        return Err(CommandError::msg(
            "ERR the _id field cannot carry a TTL index (expireAfterSeconds is not valid for an _id index)",
        ));
    }
    if field.is_empty() || field.starts_with('$') || field.split('.').any(str::is_empty) {
        return Err(CommandError::msg(format!(
            "ERR invalid TTL index field '{field}'"
        )));
    }
    Ok(())
}

/// `DOC.EXPIREINDEX coll field seconds`: creates the TTL index `field_1` or changes its
/// `expireAfterSeconds` (MongoDB's `collMod`).
pub fn doc_expireindex(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let t = target(args)?;
    let (Some(field), Some(seconds), None) = (args.next_opt(), args.next_opt(), args.next_opt())
    else {
        return Err(CommandError::WrongArity);
    };
    let field = String::from_utf8_lossy(field).into_owned();
    ttl_field_ok(&field)?;
    let secs = parse_expire_after(seconds).map_err(fail)?;
    let name = ctx
        .server
        .store
        .collection(ctx.client.db, &t.coll)
        .expire_index(&field, secs)
        .map_err(fail)?;
    Ok(Reply::bulk(name.into_bytes()))
}
