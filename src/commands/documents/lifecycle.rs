//! `DOC.CREATE COLLMOD DROP RENAME COLLECTIONS STATS`.

use super::parse::{coll_name, fail};
use crate::commands::args::{Args, CommandError, CommandResult};
use crate::commands::spec::CmdResult;
use crate::commands::Ctx;
use crate::documents::capped::CappedSpec;
use crate::documents::changes::ChangesSpec;
use crate::documents::codec;
use crate::protocol::Reply;

/// A positive integer argument, for capped bounds.
fn positive(args: &mut Args<'_>, what: &str) -> CommandResult<u64> {
    match args.next_i64()? {
        n if n > 0 => Ok(n as u64),
        _ => Err(CommandError::msg(format!(
            "ERR {what} must be a positive integer"
        ))),
    }
}

/// `CHANGES stream-key [MAXLEN [~|=] n]` after the `CHANGES` keyword: where a collection's
/// changes go. Always a new stream key (`OFF` is read by `DOC.COLLMOD` before this).
fn changes_spec(args: &mut Args<'_>) -> CommandResult<ChangesSpec> {
    let stream = args.next_key()?.to_vec();
    let maxlen = if args.eat("MAXLEN") {
        let approx = if args.eat("~") {
            true
        } else {
            args.eat("=");
            false
        };
        match args.next_i64()? {
            n if n >= 0 => Some((n as u64, approx)),
            _ => return Err(CommandError::msg("ERR The MAXLEN argument must be >= 0.")),
        }
    } else {
        None
    };
    Ok(ChangesSpec { stream, maxlen })
}

/// `DOC.CREATE coll [CAPPED SIZE bytes [MAX docs]] [CHANGES stream-key [MAXLEN [~|=] n]]`.
pub fn doc_create(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let coll = coll_name(args)?;
    let (capped, changes) = parse_create(args)?;
    ctx.server
        .store
        .create_collection(ctx.client.db, &coll, capped, changes)
        .map_err(fail)?;
    Ok(Reply::ok())
}

/// `DOC.CREATE`'s options after the collection, to the end: the capped bounds and the
/// change stream. Also how a collection's `DOC.CREATE` record is read when it arrives
/// with the collection (`DOC.RESTORE`).
pub(super) fn parse_create(
    args: &mut Args<'_>,
) -> CommandResult<(Option<CappedSpec>, Option<ChangesSpec>)> {
    let mut capped = None;
    if args.eat("CAPPED") {
        if !args.eat("SIZE") {
            return Err(CommandError::syntax());
        }
        let size = positive(args, "SIZE")?;
        let max = if args.eat("MAX") {
            // MongoDB: MAX 0 means no document bound.
            match args.next_i64()? {
                n if n >= 0 => Some(n as u64),
                _ => return Err(CommandError::msg("ERR MAX must not be negative")),
            }
        } else {
            None
        };
        capped = Some(CappedSpec::new(size, max));
    }
    let changes = if args.eat("CHANGES") {
        Some(changes_spec(args)?)
    } else {
        None
    };
    args.finish()?;
    Ok((capped, changes))
}

/// `DOC.COLLMOD coll CHANGES stream-key [MAXLEN [~|=] n] | CHANGES OFF` (MongoDB's
/// `collMod` for the change stream option): sets or clears where the collection's changes
/// go from now on.
pub fn doc_collmod(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let coll = coll_name(args)?;
    if !args.eat("CHANGES") {
        return Err(CommandError::syntax());
    }
    let changes = if args.len() == 1 && args.eat("OFF") {
        None
    } else {
        Some(changes_spec(args)?)
    };
    args.finish()?;
    ctx.server
        .store
        .set_changes(ctx.client.db, &coll, changes)
        .map_err(fail)?;
    Ok(Reply::ok())
}

/// `DOC.DROP coll`: 1 if it existed, else 0.
pub fn doc_drop(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let coll = coll_name(args)?;
    let existed = ctx.server.store.drop_collection(ctx.client.db, &coll);
    Ok(Reply::Int(existed as i64))
}

/// `DOC.RENAME from to [DROPTARGET]`.
pub fn doc_rename(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let from = coll_name(args)?;
    let to = coll_name(args)?;
    let drop_target = args.eat("DROPTARGET");
    args.finish()?;
    ctx.server
        .store
        .rename_collection(ctx.client.db, &from, &to, drop_target)
        .map_err(fail)?;
    Ok(Reply::ok())
}

/// `DOC.COLLECTIONS`: the names in the selected database, sorted.
pub fn doc_collections(ctx: &mut Ctx<'_>, _args: &mut Args<'_>) -> CmdResult {
    let names = ctx.server.store.collection_names(ctx.client.db);
    Ok(Reply::Array(names.into_iter().map(Reply::bulk).collect()))
}

/// `DOC.STATS coll`: count, size, indexes and TTL counters as JSON.
pub fn doc_stats(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let coll = coll_name(args)?;
    let db = ctx.client.db;
    let stats = ctx.server.store.collection(db, &coll).stats();
    match stats {
        Some(d) => Ok(Reply::bulk(codec::doc_json_owned(d))),
        None => Err(CommandError::msg(format!("ERR ns not found {db}.{coll}"))),
    }
}
