//! Transactions family: MULTI EXEC DISCARD WATCH UNWATCH, with Redis 7's semantics.
//!
//! Inside MULTI, `dispatch` queues commands (`+QUEUED`); a refused command (unknown, wrong
//! arity, NOAUTH, NO_MULTI) marks the transaction so EXEC answers EXECABORT. EXEC runs the
//! queue under the server's exec gate held exclusively, so no other client's command runs in
//! between; a runtime error of one queued command is just its reply. WATCH registers the
//! client's dirty flag for each key in `Server::watches`; any write, delete, expiry or
//! eviction of a watched key raises it and EXEC then answers a null array.
use crate::commands::args::{Args, CommandError};
use crate::commands::spec::{acl, family, flag::*, CmdResult, CommandSpec};
use crate::commands::{execute, Ctx};
use crate::protocol::Reply;
use crate::state::client::MultiState;
use crate::state::Server;
use bytes::Bytes;
use std::sync::atomic::Ordering;

const TX: CommandSpec = family("transactions", acl::TRANSACTION);

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    TX.cmd("multi", 1, multi).flags(NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY | TX_CONTROL)
        .doc("1.2.0", "Mark the start of a transaction block"),
    TX.cmd("exec", 1, exec_handler).flags(NOSCRIPT | LOADING | STALE | SKIP_SLOWLOG | TX_CONTROL)
        .doc("1.2.0", "Execute all commands issued after MULTI")
        .complexity("Depends on commands in the transaction"),
    TX.cmd("discard", 1, discard).flags(NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY | TX_CONTROL)
        .doc("2.0.0", "Discard all commands issued after MULTI")
        .complexity("O(N), when N is the number of queued commands"),
    TX.cmd("watch", -2, watch).flags(NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY | TX_CONTROL).keys(1, -1, 1).key_spec_flags(&["RO"])
        .doc("2.2.0", "Watch the given keys to determine execution of the MULTI/EXEC block")
        .complexity("O(1) for every key.").args("key:key..."),
    TX.cmd("unwatch", 1, unwatch).flags(NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY)
        .doc("2.2.0", "Forget about all watched keys"),
];

/// Commands that run at once inside MULTI instead of being queued (Redis's list).
pub fn runs_inside_multi(spec: &CommandSpec) -> bool {
    spec.has(TX_CONTROL)
}

/// A command refused before it ran: inside MULTI the transaction is marked to abort.
pub fn refuse(ctx: &mut Ctx<'_>, error: Reply) -> Reply {
    if let Some(m) = ctx.client.multi.as_mut() {
        m.aborted = true;
    }
    error
}

/// Queues a command inside MULTI with `flags`, its flags as EXEC's checks count them (a
/// script's shebang flags: `scripting::command_flags`).
pub fn queue(ctx: &mut Ctx<'_>, args: &[Bytes], flags: u32) -> Reply {
    if let Some(m) = ctx.client.multi.as_mut() {
        m.queued.push((flags, args.to_vec()));
        // CLIENT LIST `multi-mem`, counted as Redis: argument bytes plus a pointer each.
        m.argv_len += args.iter().map(|a| a.len() + 8).sum::<usize>();
        let bufs = &ctx.client.handle.bufs;
        bufs.multi_mem.store(m.argv_len, Ordering::Relaxed);
        ctx.client
            .handle
            .multi_len
            .store(m.queued.len() as i32, Ordering::Relaxed);
    }
    Reply::Simple("QUEUED")
}

fn multi(ctx: &mut Ctx<'_>, _args: &mut Args<'_>) -> CmdResult {
    if ctx.client.multi.is_some() {
        return Err(CommandError::msg("ERR MULTI calls can not be nested"));
    }
    ctx.client.multi = Some(Box::new(MultiState::default()));
    ctx.client.handle.multi_len.store(0, Ordering::Relaxed);
    Ok(Reply::ok())
}

/// Only reached through `dispatch`, which sends EXEC to [`exec`] before taking the gate.
fn exec_handler(ctx: &mut Ctx<'_>, _args: &mut Args<'_>) -> CmdResult {
    Ok(exec(ctx))
}

pub fn exec(ctx: &mut Ctx<'_>) -> Reply {
    let Some(m) = ctx.client.multi.take() else {
        return Reply::error("ERR EXEC without MULTI");
    };
    ctx.client.handle.multi_len.store(-1, Ordering::Relaxed);
    if m.aborted {
        unwatch_all(ctx);
        return Reply::error("EXECABORT Transaction discarded because of previous errors.");
    }
    let server = ctx.server.clone();
    let Some(_exclusive) = server.exec_gate.exclusive_unless_busy() else {
        if crate::state::replication::applying() {
            // The master's EXEC: its link waits for the script and sends EXEC again
            // (`commands::busy`), the block kept.
            let queued = i32::try_from(m.queued.len()).unwrap_or(i32::MAX);
            ctx.client.handle.multi_len.store(queued, Ordering::Relaxed);
            ctx.client.multi = Some(m);
            return Reply::error(server.exec_gate.busy_error());
        }
        unwatch_all(ctx);
        let busy = server.exec_gate.busy_error();
        return Reply::error(format!(
            "EXECABORT Transaction discarded because of: {busy}"
        ));
    };
    let dirty = ctx.client.watch_dirty.load(Ordering::Acquire) || watched_key_expired(ctx);
    unwatch_all(ctx);
    if dirty {
        return Reply::NilArray;
    }
    let mut replies = Vec::with_capacity(m.queued.len());
    // As Redis's cached command time: no key expires between the transaction's commands.
    let _frozen = crate::util::clock::freeze();
    ctx.client.in_exec = true;
    for (_, args) in &m.queued {
        // Resolved when queued (a refusal aborts the transaction), and the table is static.
        replies.push(match crate::commands::resolve(args) {
            Ok(spec) => match crate::commands::acl::check_in_exec(ctx, spec, args) {
                Ok(()) => execute(ctx, spec, args),
                Err(e) => e,
            },
            Err(e) => e,
        });
    }
    ctx.client.in_exec = false;
    Reply::Array(replies)
}

/// Redis 7 fails EXEC when a watched key that was live at WATCH time has reached its
/// deadline since, even if nothing has deleted it yet. Looking each key up removes it if it
/// is due, and that removal raises the dirty flag like any other; WATCH did the same lookup
/// before registering, so a key already expired then does not count.
fn watched_key_expired(ctx: &Ctx<'_>) -> bool {
    for (db, key) in &ctx.client.watched {
        lazy_expire(ctx.server, *db, key);
    }
    ctx.client.watch_dirty.load(Ordering::Acquire)
}

fn lazy_expire(server: &Server, db: usize, key: &[u8]) {
    server.store.with_key(db, key, |ks, h| {
        ks.peek(h, key);
    });
}

/// Empties database `db` (`None`: every one), for FLUSHDB/FLUSHALL and DEBUG LOADAOF, and
/// returns the old data for the caller to free.
pub fn empty_data(server: &Server, db: Option<usize>) -> Vec<crate::store::Db> {
    // WATCHers of keys that exist now see their EXEC fail (Redis's touchAllWatchedKeysInDb).
    touch_watched_in(server, db, None);
    let old = server.store.flush(db);
    // Tracking clients drop everything they cached (a null, as Redis: the table is global).
    server.tracking.flushed();
    // A client blocked in XREADGROUP learns that its group went away.
    match db {
        Some(d) => server.blocking.signal_db(d),
        None => (0..server.store.databases()).for_each(|d| server.blocking.signal_db(d)),
    }
    old
}

/// FLUSHDB / FLUSHALL (`db` None = all) and SWAPDB: marks the WATCHers of every watched key
/// of `db` that exists in `db` or in `other`.
pub fn touch_watched_in(server: &Server, db: Option<usize>, other: Option<usize>) {
    server.watches.touch_db(db, |d, key| {
        let exists = |d: usize| server.store.with_key(d, key, |ks, h| ks.contains(h, key));
        exists(d) || other.is_some_and(exists)
    });
}

fn discard(ctx: &mut Ctx<'_>, _args: &mut Args<'_>) -> CmdResult {
    if ctx.client.multi.take().is_none() {
        return Err(CommandError::msg("ERR DISCARD without MULTI"));
    }
    ctx.client.handle.multi_len.store(-1, Ordering::Relaxed);
    unwatch_all(ctx);
    Ok(Reply::ok())
}

fn watch(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    if ctx.client.multi.is_some() {
        return Err(CommandError::msg("ERR WATCH inside MULTI is not allowed"));
    }
    let db = ctx.client.db;
    for key in args.rest() {
        // A key already past its deadline goes now, so its removal does not count later.
        lazy_expire(ctx.server, db, key);
        let id = ctx.client.id();
        if ctx
            .server
            .watches
            .watch(db, key, id, ctx.client.watch_dirty.flag())
        {
            ctx.client.watched.push((db, key.clone()));
        }
    }
    let n = ctx.client.watched.len() as u32;
    ctx.client.with_meta(|m| m.watch = n);
    Ok(Reply::ok())
}

fn unwatch(ctx: &mut Ctx<'_>, _args: &mut Args<'_>) -> CmdResult {
    unwatch_all(ctx);
    Ok(Reply::ok())
}

/// Forgets every watched key and clears the dirty flag (EXEC, DISCARD, UNWATCH, RESET,
/// disconnect).
pub fn unwatch_all(ctx: &mut Ctx<'_>) {
    if ctx.client.watched.is_empty() {
        ctx.client.watch_dirty.store(false, Ordering::Release);
        return;
    }
    for (db, key) in ctx.client.watched.drain(..) {
        ctx.server.watches.unwatch(db, &key, ctx.client.handle.id);
    }
    ctx.client.with_meta(|m| m.watch = 0);
    ctx.client.watch_dirty.store(false, Ordering::Release);
}

/// Leaves MULTI and WATCH state entirely (RESET, disconnect).
pub fn reset_state(ctx: &mut Ctx<'_>) {
    ctx.client.multi = None;
    ctx.client.handle.multi_len.store(-1, Ordering::Relaxed);
    unwatch_all(ctx);
}
