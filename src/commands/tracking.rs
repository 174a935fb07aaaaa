//! Client-side caching at the command level: `CLIENT TRACKING`, `CACHING`, `GETREDIR`,
//! `TRACKINGINFO` (rows in `connection.rs`), and what the dispatcher does around each
//! command for tracking clients: remembering the keys a read returned, and writing the
//! invalidations made before a command ran ahead of its reply. The state is
//! `state::tracking`.

use crate::commands::args::{Args, CommandError, Token};
use crate::commands::spec::{acl, flag, CmdResult, CommandSpec};
use crate::commands::{keys_of, Ctx};
use crate::protocol::Reply;
use crate::state::client::{ClientState, ReplyMode};
use crate::state::tracking::{self, Options, ScopeGuard};
use crate::state::Server;
use crate::util::num::parse_i64;
use bytes::Bytes;

/// The commands that run a script: a read inside one remembers the script's declared keys,
/// and the command itself (EVAL_RO is read-only) remembers nothing of its own.
fn runs_script(spec: &CommandSpec) -> bool {
    matches!(
        spec.name,
        "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro"
    )
}

/// Whether a run of `spec` reads its keys for the client: read-only commands, and the
/// document reads flagged WRITE only because their TOUCH option writes (DOC.FIND,
/// DOC.FINDONE: `@read`). Shard channels are not keys to cache (Redis skips pub/sub).
fn reads(spec: &CommandSpec) -> bool {
    (spec.has(flag::READONLY) || spec.acl & acl::READ != 0)
        && spec.group != "pubsub"
        && !runs_script(spec)
}

/// A command's handler is about to run: the tracking scope of its client, and, for a
/// script, the keys its reads will remember. None (one atomic load) while nobody tracks.
#[inline]
pub fn executing<'s>(
    server: &'s Server,
    client: &ClientState,
    spec: &CommandSpec,
    args: &[Bytes],
) -> Option<ScopeGuard<'s>> {
    let scope = server.tracking.executing(client.id())?;
    if runs_script(spec) {
        let keys = keys_of(spec, args)
            .into_iter()
            .map(|k| Bytes::copy_from_slice(k))
            .collect();
        server.tracking.script_starts(client.id(), keys);
    }
    Some(scope)
}

/// The handler ran: what it read is remembered for its client. `nested`: it ran inside
/// another command (a script's call, or EXEC's queue).
pub fn executed(
    server: &Server,
    client: &ClientState,
    spec: &CommandSpec,
    args: &[Bytes],
    nested: bool,
) {
    if reads(spec) {
        let keys = keys_of(spec, args);
        server
            .tracking
            .remember(client.id(), keys.into_iter().map(|k| &k[..]), nested);
    } else if runs_script(spec) && client.blocked.is_none() {
        // It ran inline (inside EXEC), so it is over; a script sent to the script thread
        // ends its keys at its client's next command.
        server.tracking.script_ended(client.id());
    }
}

/// The end of a command from a connection (`scope` from `Tracking::command`): CLIENT
/// CACHING's flag is spent, the BCAST keys it changed go out, and invalidations made before
/// it ran (eviction, the table's limit) go before its reply, as in Redis.
pub fn finish(ctx: &mut Ctx<'_>, args: &[Bytes], reply: Reply, scope: ScopeGuard<'_>) -> Reply {
    let before = tracking::take_before();
    ctx.server.tracking.command_done(
        ctx.client.id(),
        crate::commands::is(&args[0], "client"),
        ctx.client.multi.is_some(),
    );
    drop(scope);
    if before.is_empty() {
        return reply;
    }
    if ctx.client.reply_mode != ReplyMode::On {
        // The reply is not written: the pushes still are, after it.
        for m in before {
            ctx.client.handle.outbox.push(m);
        }
        return reply;
    }
    let mut all: Vec<Reply> = Vec::with_capacity(before.len() + 1);
    for m in before {
        if let crate::state::outbox::Outgoing::ShardSlotLost(_) = m {
            // The connection handles it (it holds the client's shard channels).
            ctx.client.handle.outbox.push(m);
        } else {
            all.push(m.into_reply());
        }
    }
    all.push(reply);
    Reply::Multi(all)
}

/// `CLIENT TRACKING ON|OFF [REDIRECT id] [PREFIX p ...] [BCAST] [OPTIN] [OPTOUT] [NOLOOP]`.
/// Everything is checked before anything changes.
pub fn client_tracking(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let mode = args.next_arg()?.clone();
    let mut redirect = None;
    let mut opts = Options::default();
    let mut prefixes = Vec::new();
    while let Some(opt) = args.next_opt() {
        let more = !args.is_empty();
        match &*Token::of(opt) {
            b"REDIRECT" if more => {
                let v = args.next_arg()?;
                if redirect.is_some() {
                    return Err(CommandError::msg(
                        "ERR A client can only redirect to a single other client",
                    ));
                }
                let id = parse_i64(v).ok_or_else(CommandError::not_integer)?;
                let target = ctx
                    .server
                    .clients
                    .all()
                    .into_iter()
                    .find(|h| id > 0 && h.id == id as u64 && !h.is_killed());
                match target {
                    Some(h) => redirect = Some(h),
                    None => {
                        return Err(CommandError::msg(
                            "ERR The client ID you want redirect to does not exist",
                        ))
                    }
                }
            }
            b"BCAST" => opts.bcast = true,
            b"OPTIN" => opts.optin = true,
            b"OPTOUT" => opts.optout = true,
            b"NOLOOP" => opts.noloop = true,
            b"PREFIX" if more => prefixes.push(Bytes::copy_from_slice(args.next_arg()?)),
            _ => return Err(CommandError::syntax()),
        }
    }
    let tracking = &ctx.server.tracking;
    match &*Token::of(&mode) {
        b"ON" => tracking
            .enable(&ctx.client.handle, redirect, opts, prefixes)
            .map_err(CommandError::msg)?,
        b"OFF" => tracking.disable(ctx.client.id()),
        _ => return Err(CommandError::syntax()),
    }
    Ok(Reply::ok())
}

/// `CLIENT CACHING YES|NO`.
pub fn client_caching(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let id = ctx.client.id();
    let tracking = &ctx.server.tracking;
    if tracking.redirect_of(id) < 0 {
        return Err(CommandError::msg("ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled"));
    }
    let yes = match args.next_token().as_deref() {
        Some(b"YES") => true,
        Some(b"NO") => false,
        _ => return Err(CommandError::syntax()),
    };
    tracking.caching(id, yes).map_err(CommandError::msg)?;
    Ok(Reply::ok())
}

/// `CLIENT GETREDIR`.
pub fn client_getredir(ctx: &mut Ctx<'_>, _args: &mut Args<'_>) -> CmdResult {
    Ok(Reply::Int(ctx.server.tracking.redirect_of(ctx.client.id())))
}

/// `CLIENT TRACKINGINFO`: a map of flags (a set), redirect and prefixes.
pub fn client_trackinginfo(ctx: &mut Ctx<'_>, _args: &mut Args<'_>) -> CmdResult {
    let info = ctx.server.tracking.info_of(ctx.client.id());
    Ok(Reply::Map(vec![
        (
            Reply::bulk_str("flags"),
            Reply::Set(info.flags.iter().map(|f| Reply::bulk_str(f)).collect()),
        ),
        (Reply::bulk_str("redirect"), Reply::Int(info.redirect)),
        (
            Reply::bulk_str("prefixes"),
            Reply::Array(info.prefixes.into_iter().map(Reply::Bulk).collect()),
        ),
    ]))
}
