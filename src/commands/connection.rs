//! Connection family: PING ECHO HELLO AUTH SELECT QUIT RESET CLIENT.

use crate::commands::args::{Args, CommandError, CommandResult, Token};
use crate::commands::spec::{acl, family, flag::*, CmdResult, CommandSpec};
use crate::commands::{help_reply, text, tracking, Ctx};
use crate::protocol::Reply;
use crate::state::client::{ClientState, ReplyMode};
use crate::state::{REDIS_COMPAT_VERSION, VERSION};
use crate::util::num::parse_i64;
use bytes::Bytes;
use std::sync::atomic::Ordering;

const CONN: CommandSpec = family("connection", acl::CONNECTION);

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    CONN.cmd("ping", -1, ping).flags(FAST | SUBSCRIBED)
        .doc("1.0.0", "Returns the server's liveliness response.").args("[message]"),
    CONN.cmd("echo", 2, echo).flags(LOADING | STALE | FAST)
        .doc("1.0.0", "Returns the given string.").args("message"),
    CONN.cmd("hello", -1, hello).flags(NOSCRIPT | LOADING | STALE | FAST | NO_AUTH | ALLOW_BUSY | REDACTED)
        .doc("6.0.0", "Handshakes with the server.")
        .args("[arguments:{protover:integer [AUTH=username-password:{username password}] [SETNAME=clientname]}]"),
    CONN.cmd("auth", -2, auth).flags(NOSCRIPT | LOADING | STALE | FAST | NO_AUTH | ALLOW_BUSY | REDACTED)
        .doc("1.0.0", "Authenticates the connection.").args("[username] password"),
    CONN.cmd("select", 2, select).flags(LOADING | STALE | FAST)
        .doc("1.0.0", "Changes the selected database.").args("index:integer"),
    CONN.cmd("quit", -1, quit).flags(NOSCRIPT | LOADING | STALE | FAST | NO_AUTH | ALLOW_BUSY | TX_CONTROL | SUBSCRIBED)
        .doc("1.0.0", "Closes the connection."),
    CONN.cmd("reset", 1, reset).flags(NOSCRIPT | LOADING | STALE | FAST | NO_AUTH | ALLOW_BUSY | TX_CONTROL | SUBSCRIBED)
        .doc("6.2.0", "Resets the connection."),
    CONN.cmd("client", -2, client_container)
        .doc("2.4.0", "A container for client connection commands.")
        .complexity("Depends on subcommand.").subs(CLIENT_SUBCOMMANDS),
];

#[rustfmt::skip]
static CLIENT_SUBCOMMANDS: &[CommandSpec] = &[
    CONN.cmd("client|id", 2, client_id).flags(NOSCRIPT | LOADING | STALE)
        .doc("5.0.0", "Returns the unique client ID of the connection."),
    CONN.cmd("client|getname", 2, client_getname).flags(NOSCRIPT | LOADING | STALE)
        .doc("2.4.0", "Returns the name of the connection."),
    CONN.cmd("client|setname", 3, client_setname).flags(NOSCRIPT | LOADING | STALE)
        .doc("2.4.0", "Sets the connection name.").args("connection-name"),
    CONN.cmd("client|setinfo", 4, client_setinfo).flags(NOSCRIPT | LOADING | STALE)
        .doc("7.2.0", "Sets information specific to the client or connection.")
        .args("attr:(LIB-NAME=libname|LIB-VER=libver)"),
    CONN.cmd("client|list", -2, client_list).flags(ADMIN | NOSCRIPT | LOADING | STALE)
        .doc("2.4.0", "Lists open connections.")
        .complexity("O(N) where N is the number of client connections")
        .args("[TYPE=client-type:(NORMAL|MASTER|REPLICA|PUBSUB)] [ID=client-id:integer...]"),
    CONN.cmd("client|info", 2, client_info).flags(NOSCRIPT | LOADING | STALE)
        .doc("6.2.0", "Returns information about the connection."),
    CONN.cmd("client|kill", -3, client_kill).flags(ADMIN | NOSCRIPT | LOADING | STALE)
        .doc("2.4.0", "Terminates open connections.")
        .complexity("O(N) where N is the number of client connections")
        .args("filter:(old-format|new-format:{[ID=client-id:integer] [ADDR=addr] [LADDR=laddr] [TYPE=client-type:(NORMAL|MASTER|SLAVE|REPLICA|PUBSUB)] [USER=username] [SKIPME=skipme] [MAXAGE=maxage:integer]}...)"),
    CONN.cmd("client|reply", 3, client_reply).flags(NOSCRIPT | LOADING | STALE)
        .doc("3.2.0", "Instructs the server whether to reply to commands.")
        .args("action:(ON|OFF|SKIP)"),
    CONN.cmd("client|no-evict", 3, client_no_evict).flags(ADMIN | NOSCRIPT | LOADING | STALE)
        .doc("7.0.0", "Sets the client eviction mode of the connection.").args("enabled:(ON|OFF)"),
    CONN.cmd("client|no-touch", 3, client_no_touch).flags(NOSCRIPT | LOADING | STALE)
        .doc("7.2.0", "Controls whether commands sent by the client affect the LRU/LFU of accessed keys.")
        .complexity("O(1)").args("enabled:(ON|OFF)"),
    CONN.cmd("client|pause", -3, client_pause).flags(ADMIN | NOSCRIPT | LOADING | STALE)
        .doc("3.0.0", "Suspends commands processing.")
        .complexity("O(1)").args("timeout:integer [mode:(WRITE|ALL)]"),
    CONN.cmd("client|unpause", 2, client_unpause).flags(ADMIN | NOSCRIPT | LOADING | STALE)
        .doc("6.2.0", "Resumes processing commands from paused clients.").complexity("O(N) Where N is the number of paused clients"),
    CONN.cmd("client|unblock", -3, client_unblock).flags(ADMIN | NOSCRIPT | LOADING | STALE)
        .doc("5.0.0", "Unblock a client blocked in a blocking command from a different connection.")
        .complexity("O(log N) where N is the number of client connections")
        .args("client-id:integer [unblock-type:(TIMEOUT|ERROR)]"),
    CONN.cmd("client|tracking", -3, tracking::client_tracking).flags(NOSCRIPT | LOADING | STALE)
        .doc("6.0.0", "Controls server-assisted client-side caching for the connection.")
        .complexity("O(1). Some options may introduce additional complexity.")
        .args("status:(ON|OFF) [REDIRECT=client-id:integer] [PREFIX=prefix+...] [BCAST] [OPTIN] [OPTOUT] [NOLOOP]"),
    CONN.cmd("client|caching", 3, tracking::client_caching).flags(NOSCRIPT | LOADING | STALE)
        .doc("6.0.0", "Instructs the server whether to track the keys in the next request.")
        .args("mode:(YES|NO)"),
    CONN.cmd("client|getredir", 2, tracking::client_getredir).flags(NOSCRIPT | LOADING | STALE)
        .doc("6.0.0", "Returns the client ID to which the connection's tracking notifications are redirected."),
    CONN.cmd("client|trackinginfo", 2, tracking::client_trackinginfo).flags(NOSCRIPT | LOADING | STALE)
        .doc("6.2.0", "Returns information about server-assisted client-side caching for the connection."),
    CONN.cmd("client|help", 2, client_help).flags(LOADING | STALE)
        .doc("5.0.0", "Returns helpful text about the different subcommands."),
];

fn ping(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let message = args.next_opt().cloned();
    if !args.is_empty() {
        return Err(CommandError::WrongArity);
    }
    if !ctx.client.resp3 && ctx.client.subscriptions() > 0 {
        // A subscribed RESP2 client gets an array, so it can tell it from a message.
        return Ok(Reply::Array(vec![
            Reply::bulk_str("pong"),
            Reply::Bulk(message.unwrap_or_default()),
        ]));
    }
    Ok(message.map_or(Reply::Simple("PONG"), Reply::Bulk))
}

fn echo(_ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    Ok(Reply::Bulk(args.next_arg()?.clone()))
}

const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";

fn hello(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let mut proto = if ctx.client.resp3 { 3 } else { 2 };
    if let Some(v) = args.next_opt() {
        match parse_i64(v) {
            Some(v @ 2..=3) => proto = v,
            Some(_) => return Err(CommandError::msg("NOPROTO unsupported protocol version")),
            None => {
                return Err(CommandError::msg(
                    "ERR Protocol version is not an integer or out of range",
                ))
            }
        }
    }
    let mut setname = None;
    let mut auth_ok = false;
    while let Some(opt) = args.next_opt() {
        match &*Token::of(opt) {
            b"AUTH" if args.len() >= 2 => {
                let (user, pass) = (args.next_arg()?, args.next_arg()?);
                if !crate::commands::acl::authenticate(ctx, user, pass, args.name()) {
                    return Err(CommandError::msg(WRONGPASS));
                }
                auth_ok = true;
            }
            b"SETNAME" if !args.is_empty() => {
                let name = args.next_arg()?;
                valid_name(name, "Client names")?;
                setname = Some(text(name));
            }
            _ => {
                return Err(CommandError::msg(format!(
                    "ERR Syntax error in HELLO option '{}'",
                    text(opt)
                )))
            }
        }
    }
    let _ = auth_ok;
    if !ctx.client.authenticated && ctx.server.auth_required.load(Ordering::Relaxed) {
        return Err(CommandError::msg(
            "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time",
        ));
    }
    if let Some(name) = setname {
        ctx.client.with_meta(|m| m.name = name.into());
    }
    ctx.client.resp3 = proto == 3;
    ctx.client.with_meta(|m| m.resp = proto as u8);
    let _ = VERSION;
    Ok(Reply::Map(vec![
        (Reply::bulk_str("server"), Reply::bulk_str("redis")),
        (
            Reply::bulk_str("version"),
            Reply::bulk_str(REDIS_COMPAT_VERSION),
        ),
        (Reply::bulk_str("proto"), Reply::Int(proto)),
        (Reply::bulk_str("id"), Reply::Int(ctx.client.id() as i64)),
        (Reply::bulk_str("mode"), Reply::bulk_str("standalone")),
        (Reply::bulk_str("role"), Reply::bulk_str("master")),
        (Reply::bulk_str("modules"), Reply::Array(vec![])),
    ]))
}

fn auth(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let (first, second) = (args.next_arg()?, args.next_opt());
    args.finish()?;
    let (user, pass): (&[u8], &[u8]) = match second {
        Some(pass) => (first, pass),
        None => (b"default", first),
    };
    if second.is_none() && ctx.server.acl.default_user().nopass {
        return Err(CommandError::msg(
            "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?",
        ));
    }
    if !crate::commands::acl::authenticate(ctx, user, pass, args.name()) {
        return Err(CommandError::msg(WRONGPASS));
    }
    Ok(Reply::ok())
}

fn select(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let db = args.next_i64()?;
    if ctx.server.cluster.get().is_some() && db != 0 {
        return Err(CommandError::msg(
            "ERR SELECT is not allowed in cluster mode",
        ));
    }
    if db < 0 || db as usize >= ctx.server.store.databases() {
        return Err(CommandError::msg("ERR DB index is out of range"));
    }
    ctx.client.db = db as usize;
    ctx.client.with_meta(|m| m.db = db as usize);
    Ok(Reply::ok())
}

fn quit(ctx: &mut Ctx<'_>, _args: &mut Args<'_>) -> CmdResult {
    ctx.client.close_after_reply = true;
    // Gone for client-side caching now: a redirect to it breaks from the next invalidation.
    ctx.server.tracking.client_closed(ctx.client.id());
    Ok(Reply::ok())
}

fn reset(ctx: &mut Ctx<'_>, _args: &mut Args<'_>) -> CmdResult {
    crate::commands::transactions::reset_state(ctx);
    crate::commands::pubsub::leave_all(ctx);
    ctx.server.tracking.disable(ctx.client.id());
    let c = &mut *ctx.client;
    c.db = 0;
    c.resp3 = false;
    c.reply_mode = ReplyMode::On;
    c.with_meta(|m| {
        m.db = 0;
        m.resp = 2;
        m.no_evict = false;
        m.no_touch = false;
    });
    ctx.client.no_touch = false;
    // Back to the default user, authenticated only if it needs no password (Redis's
    // clearClientConnectionState).
    let default = ctx.server.acl.default_user();
    crate::commands::acl::set_user(ctx, default);
    ctx.client.authenticated = !ctx.server.auth_required.load(Ordering::Relaxed);
    Ok(Reply::Simple("RESET"))
}

/// Only reached with no subcommand, which the arity check already refuses.
fn client_container(_ctx: &mut Ctx<'_>, _args: &mut Args<'_>) -> CmdResult {
    Err(CommandError::WrongArity)
}

fn client_id(ctx: &mut Ctx<'_>, _args: &mut Args<'_>) -> CmdResult {
    Ok(Reply::Int(ctx.client.id() as i64))
}

fn client_getname(ctx: &mut Ctx<'_>, _args: &mut Args<'_>) -> CmdResult {
    let name = ctx.client.handle.meta.lock().name.to_string();
    Ok(if name.is_empty() {
        Reply::Nil
    } else {
        Reply::bulk(name)
    })
}

/// Names may not contain spaces, newlines or other special characters (Redis's rule).
fn valid_name(name: &[u8], what: &str) -> CommandResult<()> {
    if name.iter().any(|&c| !(b'!'..=b'~').contains(&c)) {
        return Err(CommandError::msg(format!(
            "ERR {what} cannot contain spaces, newlines or special characters."
        )));
    }
    Ok(())
}

fn client_setname(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let name = args.next_arg()?;
    valid_name(name, "Client names")?;
    let name = text(name);
    ctx.client.with_meta(|m| m.name = name.into());
    Ok(Reply::ok())
}

fn client_setinfo(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let (option, value) = (args.next_arg()?, args.next_arg()?);
    match &*Token::of(option) {
        b"LIB-NAME" => {
            valid_name(value, "lib-name")?;
            ctx.client.with_meta(|m| m.lib_name = text(value).into());
        }
        b"LIB-VER" => {
            valid_name(value, "lib-ver")?;
            ctx.client.with_meta(|m| m.lib_ver = text(value).into());
        }
        _ => {
            return Err(CommandError::msg(format!(
                "ERR Unrecognized option '{}'",
                text(option)
            )))
        }
    }
    Ok(Reply::ok())
}

/// One `CLIENT LIST` line, with Redis's field names.
fn client_line(
    h: &crate::state::client::ClientHandle,
    argv_mem: usize,
    server: &crate::state::Server,
) -> String {
    let (tracking, redir) = server.tracking.list_fields(h.id);
    let unix = server.config.read().get("unixsocket").to_string();
    // `b` (blocked on keys) comes right before the tracking letters in Redis's order.
    if server.blocking.is_blocked(h.id) {
        return h.info_line(argv_mem, (&format!("b{tracking}"), redir), &unix);
    }
    h.info_line(argv_mem, (tracking, redir), &unix)
}

/// A client type for CLIENT LIST / CLIENT KILL `TYPE`, as Redis's `getClientTypeByName`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ClientType {
    Normal,
    Replica,
    PubSub,
    Master,
}

fn parse_client_type(arg: &[u8]) -> CommandResult<ClientType> {
    match text(arg).to_ascii_lowercase().as_str() {
        "normal" => Ok(ClientType::Normal),
        "slave" | "replica" => Ok(ClientType::Replica),
        "pubsub" => Ok(ClientType::PubSub),
        "master" => Ok(ClientType::Master),
        _ => Err(CommandError::msg(format!(
            "ERR Unknown client type '{}'",
            text(arg)
        ))),
    }
}

/// The type of a connected client, as Redis's `getClientType`: a replica's stream, this
/// replica's link to its master, pubsub while subscribed, else normal (a MONITOR client
/// counts as normal, as in Redis).
fn client_type(h: &crate::state::client::ClientHandle) -> ClientType {
    let r = crate::state::replication::repl();
    if r.master_client.load(std::sync::atomic::Ordering::Relaxed) == h.id {
        ClientType::Master
    } else if r.replicas.lock().iter().any(|rep| rep.id == h.id) {
        ClientType::Replica
    } else if h.is_pubsub() {
        ClientType::PubSub
    } else {
        ClientType::Normal
    }
}

fn client_list(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let mut ids: Option<Vec<u64>> = None;
    let mut ty = None;
    while let Some(kw) = args.next_token() {
        match &*kw {
            b"TYPE" if !args.is_empty() => ty = Some(parse_client_type(args.next_arg()?)?),
            b"ID" if !args.is_empty() => {
                let mut list = ids.take().unwrap_or_default();
                for id in args.rest() {
                    match parse_i64(id) {
                        Some(id) if id > 0 => list.push(id as u64),
                        _ => return Err(CommandError::msg("ERR Invalid client ID")),
                    }
                }
                ids = Some(list);
            }
            _ => return Err(CommandError::syntax()),
        }
    }
    let own_argv = args_mem(args);
    let mut out = String::new();
    for h in ctx.server.clients.all() {
        if ids.as_ref().is_none_or(|l| l.contains(&h.id)) && ty.is_none_or(|t| t == client_type(&h))
        {
            // Only the asking client is inside a command (the others' arguments are gone).
            let argv = if h.id == ctx.client.id() { own_argv } else { 0 };
            out.push_str(&client_line(&h, argv, ctx.server));
        }
    }
    Ok(Reply::Verbatim(Bytes::from(out)))
}

fn client_info(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    Ok(Reply::Verbatim(Bytes::from(client_line(
        &ctx.client.handle,
        args_mem(args),
        ctx.server,
    ))))
}

/// Redis's `argv-mem`: the bytes of the running command's arguments.
fn args_mem(args: &Args<'_>) -> usize {
    args.all().iter().map(|a| a.len()).sum()
}

fn client_kill(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    if args.len() == 1 {
        // Old form: CLIENT KILL addr:port
        let addr = args.next_text()?;
        let unix = ctx.server.config.read().get("unixsocket").to_string();
        for h in ctx.server.clients.all() {
            if h.addr_text(&unix) == addr {
                ctx.server.clients.kill(&h);
                return Ok(Reply::ok());
            }
        }
        return Err(CommandError::msg("ERR No such client"));
    }

    let mut id = None;
    let mut addr = None;
    let mut laddr = None;
    let mut ty = None;
    let mut maxage = None;
    let mut skipme = true;
    let mut user: Option<String> = None;
    // Options are read in order, as Redis reads them: a bad value is reported before a
    // missing one.
    while let Some(option) = args.next_opt() {
        let Some(v) = args.next_opt() else {
            return Err(CommandError::syntax());
        };
        match &*Token::of(option) {
            b"ID" => match parse_i64(v) {
                Some(n) if n > 0 => id = Some(n as u64),
                _ => return Err(CommandError::msg("ERR client-id should be greater than 0")),
            },
            b"ADDR" => addr = Some(text(v)),
            b"LADDR" => laddr = Some(text(v)),
            b"USER" => match ctx.server.acl.get(v) {
                Some(u) => user = Some(u.name_text()),
                None => return Err(CommandError::msg(format!("ERR No such user '{}'", text(v)))),
            },
            b"SKIPME" => match &*Token::of(v) {
                b"YES" => skipme = true,
                b"NO" => skipme = false,
                _ => return Err(CommandError::syntax()),
            },
            b"TYPE" => ty = Some(parse_client_type(v)?),
            b"MAXAGE" => maxage = Some(parse_i64(v).ok_or_else(CommandError::not_integer)?),
            _ => return Err(CommandError::syntax()),
        }
    }
    let mut killed = 0;
    let unix = ctx.server.config.read().get("unixsocket").to_string();
    for h in ctx.server.clients.all() {
        // A Unix-socket client's `addr` and `laddr` are both `<path>:0`.
        if id.is_some_and(|id| id != h.id)
            || addr.as_ref().is_some_and(|a| *a != h.addr_text(&unix))
            || laddr.as_ref().is_some_and(|a| *a != h.laddr_text(&unix))
            || ty.is_some_and(|t| t != client_type(&h))
            || user.as_ref().is_some_and(|u| {
                let m = h.meta.lock();
                *u != if m.user.is_empty() { "default" } else { m.user.as_str() }
            })
            // MAXAGE kills clients at least that many seconds old.
            || maxage.is_some_and(|m| (h.created.elapsed().as_secs() as i64) < m)
            || (skipme && h.id == ctx.client.id())
        {
            continue;
        }
        if h.id == ctx.client.id() {
            ctx.client.close_after_reply = true;
        } else {
            ctx.server.clients.kill(&h);
            // A replica is gone from INFO's connected_slaves at once, as Redis frees it in
            // the command (its stream's task ends a moment later).
            crate::state::replication::remove_replica(h.id);
        }
        killed += 1;
    }
    Ok(Reply::Int(killed))
}

fn client_reply(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    match args.next_token().as_deref() {
        Some(b"ON") => {
            ctx.client.reply_mode = ReplyMode::On;
            Ok(Reply::ok())
        }
        Some(b"OFF") => {
            ctx.client.reply_mode = ReplyMode::Off;
            Ok(Reply::NoReply)
        }
        Some(b"SKIP") => {
            if ctx.client.reply_mode != ReplyMode::Off {
                ctx.client.reply_mode = ReplyMode::Skip;
            }
            Ok(Reply::NoReply)
        }
        _ => Err(CommandError::syntax()),
    }
}

fn client_no_evict(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let on = match args.next_token().as_deref() {
        Some(b"ON") => true,
        Some(b"OFF") => false,
        _ => return Err(CommandError::syntax()),
    };
    ctx.client.with_meta(|m| m.no_evict = on);
    Ok(Reply::ok())
}

/// CLIENT NO-TOUCH ON|OFF (Redis 7.2): whether this client's commands, TOUCH excepted,
/// update the LRU/LFU clocks of the keys they read.
fn client_no_touch(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let on = match args.next_token().as_deref() {
        Some(b"ON") => true,
        Some(b"OFF") => false,
        _ => return Err(CommandError::syntax()),
    };
    ctx.client.no_touch = on;
    ctx.client.with_meta(|m| m.no_touch = on);
    Ok(Reply::ok())
}

/// CLIENT PAUSE timeout [WRITE|ALL] (Redis 7.0's clientCommand; the waiting is
/// `state::pause`).
fn client_pause(_ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let ms = crate::util::num::parse_i64(args.next_arg()?)
        .ok_or_else(|| CommandError::msg("ERR timeout is not an integer or out of range"))?;
    if ms < 0 {
        return Err(CommandError::msg("ERR timeout is negative"));
    }
    let mode = match args.next_opt() {
        None => crate::state::pause::ALL,
        Some(m) if crate::commands::is(m, "WRITE") => crate::state::pause::WRITE,
        Some(m) if crate::commands::is(m, "ALL") => crate::state::pause::ALL,
        Some(_) if args.is_empty() => {
            return Err(CommandError::msg(
                "ERR CLIENT PAUSE mode must be WRITE or ALL",
            ))
        }
        Some(_) => return Err(pause_syntax(args)),
    };
    if !args.is_empty() {
        return Err(pause_syntax(args));
    }
    let end = std::time::Instant::now()
        .checked_add(std::time::Duration::from_millis(ms.unsigned_abs()))
        .ok_or_else(|| CommandError::msg("ERR timeout is out of range"))?;
    crate::state::pause::pause(crate::state::pause::Purpose::Client, mode, Some(end));
    Ok(Reply::ok())
}

/// Redis names the subcommand as it was typed.
fn pause_syntax(args: &Args<'_>) -> CommandError {
    let sub = text(args.all().get(1).map_or(&b"pause"[..], |b| &b[..]));
    CommandError::msg(format!(
        "ERR unknown subcommand or wrong number of arguments for '{sub}'. Try CLIENT HELP."
    ))
}

fn client_unpause(_ctx: &mut Ctx<'_>, _args: &mut Args<'_>) -> CmdResult {
    crate::state::pause::unpause(crate::state::pause::Purpose::Client);
    Ok(Reply::ok())
}

/// Whether a pause in `mode` postpones this request (Redis 7.0's processCommand: under
/// WRITE, commands that write or may replicate — EVAL, EVALSHA, FCALL, PFCOUNT, PUBLISH,
/// SPUBLISH — and an EXEC whose queue holds one). Requests refused before that check
/// (unknown command, arity) are not postponed.
pub fn postponed_by_pause(client: &ClientState, args: &[Bytes], mode: u8) -> bool {
    let Ok(spec) = crate::commands::resolve(args) else {
        return false;
    };
    if mode == crate::state::pause::ALL {
        return true;
    }
    const MAY_REPLICATE: &[&str] = &["eval", "evalsha", "fcall", "pfcount", "publish", "spublish"];
    let writes = |flags: u32, name: &[u8]| {
        flags & WRITE != 0 || MAY_REPLICATE.iter().any(|n| crate::commands::is(name, n))
    };
    let write = if spec.name == "exec" {
        client.multi.as_ref().is_some_and(|m| {
            m.queued
                .iter()
                .any(|(f, a)| writes(*f, a.first().map_or(&b""[..], |x| &x[..])))
        })
    } else {
        // A script whose shebang declares `no-writes` neither writes nor replicates (Redis's
        // evalGetCommandFlags); scripts loaded by SHA and functions are taken as writing.
        !(spec.name == "eval" && args.get(1).is_some_and(|b| no_writes_shebang(b)))
            && writes(spec.flags, spec.name.as_bytes())
    };
    if !write {
        return false;
    }
    if mode == crate::state::pause::WRITE {
        return true;
    }
    // An atomic slot migration's flip holds writes to its slots only.
    let paused = |argv: &[Bytes]| {
        crate::commands::resolve(argv).is_ok_and(|s| {
            let (pos, _) = s.routing_positions(argv);
            pos.into_iter().any(|i| {
                crate::state::pause::slot_paused(crate::state::cluster::key_slot(&argv[i]))
            })
        })
    };
    if spec.name == "exec" {
        return client
            .multi
            .as_ref()
            .is_some_and(|m| m.queued.iter().any(|(_, a)| paused(a)));
    }
    paused(args)
}

/// Whether a script body starts with a `#!` line whose `flags=` list holds `no-writes`.
fn no_writes_shebang(body: &[u8]) -> bool {
    if !body.starts_with(b"#!") {
        return false;
    }
    let line = body.split(|&b| b == b'\n').next().unwrap_or_default();
    String::from_utf8_lossy(line)
        .split_whitespace()
        .filter_map(|w| w.strip_prefix("flags="))
        .any(|f| f.split(',').any(|x| x == "no-writes"))
}

/// CLIENT UNBLOCK: ends another client's blocking command as if it had timed out, or with
/// the `UNBLOCKED` error.
fn client_unblock(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let id = args.next_i64()?;
    let reply = match args.next_token().as_deref() {
        None | Some(b"TIMEOUT") => None,
        Some(b"ERROR") => Some(Reply::error(
            "UNBLOCKED client unblocked via CLIENT UNBLOCK",
        )),
        Some(_) => {
            return Err(CommandError::msg(
                "ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR",
            ))
        }
    };
    args.finish()?;
    let done = id >= 0 && ctx.server.blocking.unblock(id as u64, reply);
    Ok(Reply::Int(done as i64))
}

fn client_help(_ctx: &mut Ctx<'_>, _args: &mut Args<'_>) -> CmdResult {
    Ok(help_reply(
        "client",
        &[
            "GETNAME",
            "    Return the name of the current connection.",
            "ID",
            "    Return the ID of the current connection.",
            "INFO",
            "    Return information about the current client connection.",
            "KILL <ip:port>",
            "    Kill connection made from <ip:port>.",
            "KILL <option> <value> [<option> <value> [...]]",
            "    Kill connections. Options are: ID, ADDR, LADDR, USER, SKIPME (yes|no), TYPE.",
            "LIST [options ...]",
            "    Return information about client connections. Options: TYPE <type>, ID <id> [...].",
            "CACHING (YES|NO)",
            "    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
            "GETREDIR",
            "    Return the client ID we are redirecting to when tracking is enabled.",
            "TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
            "         [OPTIN] [OPTOUT] [NOLOOP]",
            "    Control server assisted client side caching.",
            "TRACKINGINFO",
            "    Report tracking status for the current connection.",
            "UNPAUSE",
            "    Stop the current client pause, resuming traffic.",
            "PAUSE <timeout> [WRITE|ALL]",
            "    Suspend all, or just write, clients for <timeout> milliseconds.",
            "REPLY (ON|OFF|SKIP)",
            "    Control the replies sent to the current connection.",
            "SETNAME <name>",
            "    Assign the name <name> to the current connection.",
            "SETINFO <LIB-NAME|LIB-VER> <value>",
            "    Set client meta attr.",
            "NO-EVICT (ON|OFF)",
            "    Protect current client connection from eviction.",
            "NO-TOUCH (ON|OFF)",
            "    Will not touch LRU/LFU stats when this mode is on.",
            "UNBLOCK <clientid> [TIMEOUT|ERROR]",
            "    Unblock the specified blocked client.",
        ],
    ))
}
