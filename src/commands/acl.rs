//! The ACL family (`ACL SETUSER/GETUSER/DELUSER/USERS/LIST/WHOAMI/CAT/GENPASS/LOG/DRYRUN/
//! SAVE/LOAD`), the permission check the dispatcher, EXEC and scripts call, and loading
//! users at start (`user` lines of the config file, `aclfile`). Users, rules and matching
//! live in `state::acl`; this file turns the command table into the [`Catalog`] the rules
//! name commands and categories from, and a request into the [`Call`] a check reads.

use crate::commands::args::{Args, CommandError};
use crate::commands::spec::{acl as cat, family, flag::*, CmdResult, CommandSpec};
use crate::commands::{help_reply, stat_index, table, text, Ctx};
use crate::protocol::Reply;
use crate::state::acl::{perm, Call, Catalog, CmdInfo, Context, Denied, LogEntry, Reason, User};
use crate::state::Server;
use bytes::Bytes;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};

const ACL: CommandSpec = family("server", 0);

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    ACL.cmd("acl", -2, container)
        .doc("6.0.0", "A container for Access List Control commands.")
        .complexity("Depends on subcommand.").subs(ACL_SUBCOMMANDS),
];

const ADM: u32 = ADMIN | NOSCRIPT | LOADING | STALE;

#[rustfmt::skip]
static ACL_SUBCOMMANDS: &[CommandSpec] = &[
    ACL.cmd("acl|cat", -2, acl_cat).flags(NOSCRIPT | LOADING | STALE)
        .doc("6.0.0", "Lists the ACL categories, or the commands inside a category.")
        .complexity("O(1) since the categories and commands are a fixed set.").args("[category]"),
    ACL.cmd("acl|deluser", -3, acl_deluser).flags(ADM)
        .doc("6.0.0", "Deletes ACL users, and terminates their connections.")
        .complexity("O(1) amortized time considering the typical user.").args("username..."),
    ACL.cmd("acl|dryrun", -4, acl_dryrun).flags(ADM)
        .doc("7.0.0", "Simulates the execution of a command by a user, without executing the command.")
        .args("username command [arg...]"),
    ACL.cmd("acl|genpass", -2, acl_genpass).flags(NOSCRIPT | LOADING | STALE)
        .doc("6.0.0", "Generates a pseudorandom, secure password that can be used to identify ACL users.")
        .args("[bits:integer]"),
    ACL.cmd("acl|getuser", 3, acl_getuser).flags(ADM)
        .doc("6.0.0", "Lists the ACL rules of a user.")
        .complexity("O(N). Where N is the number of password, command and pattern rules that the user has.")
        .args("username"),
    ACL.cmd("acl|list", 2, acl_list).flags(ADM)
        .doc("6.0.0", "Dumps the effective rules in ACL file format.")
        .complexity("O(N). Where N is the number of configured users."),
    ACL.cmd("acl|load", 2, acl_load).flags(ADM)
        .doc("6.0.0", "Reloads the rules from the configured ACL file.")
        .complexity("O(N). Where N is the number of configured users."),
    ACL.cmd("acl|log", -2, acl_log).flags(ADM)
        .doc("6.0.0", "Lists recent security events generated due to ACL rules.")
        .complexity("O(N) with N being the number of entries shown.")
        .args("[operation:(count:integer|RESET)]"),
    ACL.cmd("acl|save", 2, acl_save).flags(ADM)
        .doc("6.0.0", "Saves the effective ACL rules in the configured ACL file.")
        .complexity("O(N). Where N is the number of configured users."),
    ACL.cmd("acl|setuser", -3, acl_setuser).flags(ADM)
        .doc("6.0.0", "Creates and modifies an ACL user and its rules.")
        .complexity("O(N). Where N is the number of rules provided.").args("username [rule...]"),
    ACL.cmd("acl|users", 2, acl_users).flags(ADM)
        .doc("6.0.0", "Lists all ACL users.")
        .complexity("O(N). Where N is the number of configured users."),
    ACL.cmd("acl|whoami", 2, acl_whoami).flags(NOSCRIPT | LOADING | STALE)
        .doc("6.0.0", "Returns the authenticated username of the current connection."),
    ACL.cmd("acl|help", 2, acl_help).flags(LOADING | STALE)
        .doc("6.0.0", "Returns helpful text about the different subcommands."),
];

/// The table as ACL rules see it (ids are statistics rows), built once.
pub fn catalog() -> &'static Catalog {
    static CATALOG: OnceLock<Catalog> = OnceLock::new();
    CATALOG.get_or_init(|| {
        let rows = table().stat_rows();
        let mut cmds: Vec<CmdInfo> = rows
            .iter()
            .map(|s| CmdInfo {
                name: s.name,
                categories: s.categories(),
                no_auth: s.has(NO_AUTH),
                parent: None,
                subs: Vec::new(),
            })
            .collect();
        for (i, s) in rows.iter().enumerate() {
            for sub in s.subcommands {
                let j = stat_index(sub);
                if j < cmds.len() {
                    cmds[j].parent = Some(i);
                    cmds[i].subs.push(j);
                }
            }
        }
        Catalog::new(cmds, cat::NAMES)
    })
}

/// Only reached with no subcommand, which the arity check already refuses.
fn container(_ctx: &mut Ctx<'_>, _args: &mut Args<'_>) -> CmdResult {
    Err(CommandError::WrongArity)
}

// ---------------------------------------------------------------------------------------
// The check

/// Which arguments of a request are channels (Redis's `commands_with_channels`): PUBLISH
/// and SPUBLISH name one, the SUBSCRIBE family every argument (PSUBSCRIBE as patterns);
/// unsubscribing is never refused.
fn channels_of(spec: &CommandSpec, args: &[Bytes]) -> Vec<(usize, bool)> {
    match spec.name {
        "publish" | "spublish" if args.len() > 1 => vec![(1, false)],
        "subscribe" | "ssubscribe" => (1..args.len()).map(|i| (i, false)).collect(),
        "psubscribe" => (1..args.len()).map(|i| (i, true)).collect(),
        _ => Vec::new(),
    }
}

/// The access a key needs, from its key spec's flags (Redis: ACCESS reads; INSERT, DELETE
/// and UPDATE write; none of them: either suffices). A row without those detailed flags
/// says only RW/OW/RM: it is held to both, so a read-only pattern never lets it write.
fn access_of(flags: &[&str]) -> u8 {
    let has = |f: &str| flags.iter().any(|x| x.eq_ignore_ascii_case(f));
    let mut need = 0;
    if has("access") {
        need |= perm::READ;
    }
    if has("insert") || has("delete") || has("update") {
        need |= perm::WRITE;
    }
    if need == 0 && (has("RW") || has("OW") || has("RM")) {
        need = perm::ALL;
    }
    need
}

fn keys_of(spec: &CommandSpec, args: &[Bytes]) -> Vec<(usize, u8)> {
    let mut keys: Vec<(usize, u8)> = spec
        .key_positions_with_flags(args)
        .into_iter()
        .map(|(i, f)| (i, access_of(f)))
        .collect();
    // The change stream of DOC.CREATE / DOC.COLLMOD (`CHANGES stream`) is a key the
    // collection's writes append to, though the table's key spec names only the
    // collection (COMMAND GETKEYS gives the collection): a user confined to its own keys
    // must not point its collection's changes at another's stream.
    if matches!(spec.name, "doc.create" | "doc.collmod") {
        if let Some(at) = (2..args.len()).find(|&i| crate::commands::is(&args[i], "CHANGES")) {
            if at + 1 < args.len() && !crate::commands::is(&args[at + 1], "OFF") {
                keys.push((at + 1, perm::WRITE));
            }
        }
    }
    keys
}

/// Checks `user` against a request (`args` from the command name on).
pub fn check_user(user: &User, spec: &'static CommandSpec, args: &[Bytes]) -> Result<(), Denied> {
    let keys = if user.restricts_keys() {
        keys_of(spec, args)
    } else {
        Vec::new()
    };
    let channels = if user.restricts_channels() {
        channels_of(spec, args)
    } else {
        Vec::new()
    };
    user.check(
        catalog(),
        &Call {
            id: stat_index(spec),
            args,
            keys: &keys,
            channels: &channels,
        },
    )
}

/// Brings the connection's copy of its user up to date with the registry's epoch; false
/// if its user was deleted (the connection is being closed).
fn refresh(ctx: &mut Ctx<'_>) -> bool {
    let epoch = ctx.server.acl.epoch();
    if ctx.client.acl_seen == epoch {
        return true;
    }
    let current = match &ctx.client.user {
        // Internal clients (journal replay) have no user and may run anything.
        None => {
            ctx.client.acl_seen = epoch;
            ctx.client.acl_fast = epoch;
            return true;
        }
        Some(u) => ctx.server.acl.current(u),
    };
    let Some(user) = current else {
        ctx.client.close_after_reply = true;
        return false;
    };
    ctx.client.acl_fast = if user.unrestricted() { epoch } else { 0 };
    ctx.client.acl_seen = epoch;
    ctx.client.user = Some(user);
    true
}

/// The check of the dispatcher (and of MULTI's queueing), reached only when the
/// connection's cached permissions are not "everything" for the current epoch: `Err` is
/// the refusal, already logged.
#[cold]
pub fn check(ctx: &mut Ctx<'_>, spec: &'static CommandSpec, args: &[Bytes]) -> Result<(), Reply> {
    if !refresh(ctx) {
        return Err(Reply::error(format!(
            "NOPERM this user has no permissions to run the '{}' command",
            spec.name
        )));
    }
    if ctx.client.acl_fast == ctx.server.acl.epoch() {
        return Ok(());
    }
    let Some(user) = ctx.client.user.clone() else {
        return Ok(());
    };
    let context = if ctx.client.multi.is_some() {
        Context::Multi
    } else {
        Context::Toplevel
    };
    let denied = match check_user(&user, spec, args) {
        Ok(()) => return Ok(()),
        Err(d) => d,
    };
    // A refused command is still the client's last one (CLIENT LIST `cmd`, and the log's
    // client-info), as Redis records it before checking.
    if !std::ptr::eq(ctx.client.last_cmd, spec.name) {
        ctx.client.last_cmd = spec.name;
        ctx.client.with_meta(|m| m.last_cmd = spec.name);
    }
    log_denied(ctx, &user, spec, args, denied, context);
    Err(Reply::error(match denied {
        Denied::Command => format!(
            "NOPERM this user has no permissions to run the '{}' command",
            spec.name
        ),
        Denied::Key(_) => {
            "NOPERM this user has no permissions to access one of the keys used as arguments".into()
        }
        Denied::Channel(_) => {
            "NOPERM this user has no permissions to access one of the channels used as arguments"
                .into()
        }
    }))
}

/// What EXEC's and a script's checks share: nothing while the connection's user (brought up
/// to date first) may run everything, else the user's refusal of `args`, logged with
/// `context`.
fn denial(
    ctx: &mut Ctx<'_>,
    spec: &'static CommandSpec,
    args: &[Bytes],
    context: Context,
) -> Option<Denied> {
    if ctx.client.acl_fast == ctx.server.acl.epoch() {
        return None;
    }
    refresh(ctx);
    if ctx.client.acl_fast == ctx.server.acl.epoch() {
        return None;
    }
    let user = ctx.client.user.clone()?;
    let denied = check_user(&user, spec, args).err()?;
    log_denied(ctx, &user, spec, args, denied, context);
    Some(denied)
}

/// EXEC's check of each queued command (the rules may have changed since it was queued):
/// Redis's wording for that case.
pub fn check_in_exec(
    ctx: &mut Ctx<'_>,
    spec: &'static CommandSpec,
    args: &[Bytes],
) -> Result<(), Reply> {
    let Some(denied) = denial(ctx, spec, args, Context::Multi) else {
        return Ok(());
    };
    let reason = match denied {
        Denied::Command => "no permission to execute the command or subcommand",
        Denied::Key(_) => "no permission to touch the specified keys",
        Denied::Channel(_) => "no permission to access one of the channels used as arguments",
    };
    Err(Reply::error(format!("NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: {reason}")))
}

/// A script's `redis.call`: `Err` is the error text the script sees (Redis's
/// `scriptVerifyACL`), already logged with context `lua`.
pub fn check_in_script(
    ctx: &mut Ctx<'_>,
    spec: &'static CommandSpec,
    args: &[Bytes],
) -> Result<(), String> {
    let Some(denied) = denial(ctx, spec, args, Context::Lua) else {
        return Ok(());
    };
    Err(format!(
        "The user executing the script {}",
        match denied {
            Denied::Command => "can't run this command or subcommand",
            Denied::Key(_) =>
                "can't access at least one of the keys mentioned in the command arguments",
            Denied::Channel(_) => "can't publish to the channel mentioned in the command",
        }
    ))
}

/// `redis.acl_check_cmd`: whether the script's user may run `args` (`None`: no such
/// command).
pub fn script_may_run(ctx: &Ctx<'_>, args: &[Bytes]) -> Option<bool> {
    let spec = crate::commands::resolve(args).ok()?;
    Some(match &ctx.client.user {
        None => true,
        Some(u) => {
            let user = ctx.server.acl.current(u).unwrap_or_else(|| u.clone());
            check_user(&user, spec, args).is_ok()
        }
    })
}

/// SORT's BY and GET read keys no key spec names: Redis allows them only to a user with
/// read access to every key (`ACLUserCheckCmdWithUnrestrictedKeyAccess`).
pub fn may_read_any_key(ctx: &Ctx<'_>, args: &[Bytes]) -> bool {
    let Some(user) = &ctx.client.user else {
        return true;
    };
    if user.unrestricted() {
        return true;
    }
    let Ok(spec) = crate::commands::resolve(args) else {
        return true;
    };
    let keys = keys_of(spec, args);
    let channels = channels_of(spec, args);
    user.unrestricted_key_access(
        catalog(),
        &Call {
            id: stat_index(spec),
            args,
            keys: &keys,
            channels: &channels,
        },
        perm::READ,
    )
}

fn log_denied(
    ctx: &Ctx<'_>,
    user: &User,
    spec: &CommandSpec,
    args: &[Bytes],
    denied: Denied,
    context: Context,
) {
    let (reason, object) = match denied {
        Denied::Command => (Reason::Command, spec.name.as_bytes().to_vec()),
        Denied::Key(i) => (Reason::Key, args[i].to_vec()),
        Denied::Channel(i) => (Reason::Channel, args[i].to_vec()),
    };
    log(ctx, reason, context, object, user.name.clone());
}

fn log(ctx: &Ctx<'_>, reason: Reason, context: Context, object: Vec<u8>, username: Vec<u8>) {
    let info = ctx.client.handle.info_line(
        0,
        ctx.server.tracking.list_fields(ctx.client.handle.id),
        ctx.server.config.read().get("unixsocket"),
    );
    ctx.server.acl.log(LogEntry {
        count: 1,
        reason,
        context,
        object,
        username,
        ctime_ms: crate::state::unix_millis(),
        client_info: info.trim_end().to_string(),
        entry_id: 0,
        created_ms: 0,
    });
}

// ---------------------------------------------------------------------------------------
// Authentication (AUTH, HELLO)

/// Authenticates the connection as `user` with `pass`, as Redis's `ACLAuthenticateUser`:
/// on failure the attempt is logged (object: the command's name as sent).
pub fn authenticate(ctx: &mut Ctx<'_>, user: &[u8], pass: &[u8], command: &[u8]) -> bool {
    if let Some(u) = ctx.server.acl.get(user).filter(|u| u.password_ok(pass)) {
        set_user(ctx, u);
        return true;
    }
    let context = if ctx.client.multi.is_some() {
        Context::Multi
    } else {
        Context::Toplevel
    };
    log(ctx, Reason::Auth, context, command.to_vec(), user.to_vec());
    false
}

/// Makes `user` the connection's user.
pub fn set_user(ctx: &mut Ctx<'_>, user: Arc<User>) {
    let name = user.name_text();
    ctx.client.authenticated = true;
    ctx.client.acl_seen = 0;
    ctx.client.acl_fast = 0;
    ctx.client.user = Some(user);
    ctx.client.with_meta(|m| m.user = name.into());
}

/// After a change of the default user: whether new connections must authenticate.
fn sync_auth(server: &Server) {
    server
        .auth_required
        .store(server.acl.default_needs_auth(), Ordering::Relaxed);
}

/// Closes the connections authenticated as one of `names` (a deleted or reloaded user),
/// the asking one after its reply, as Redis's `ACLFreeUserAndKillClients`.
fn kill_users(ctx: &mut Ctx<'_>, names: &[Vec<u8>]) {
    if names.is_empty() {
        return;
    }
    for h in ctx.server.clients.all() {
        let user = h.meta.lock().user.to_string();
        let user = if user.is_empty() {
            "default".into()
        } else {
            user
        };
        if names.iter().any(|n| n.as_slice() == user.as_bytes()) {
            if h.id == ctx.client.id() {
                ctx.client.close_after_reply = true;
            } else {
                ctx.server.clients.kill(&h);
            }
        }
    }
}

/// Redis's `ACLKillPubsubClientsIfNeeded`: subscribers of `new`'s user whose channels the
/// new rules no longer grant are closed.
fn kill_revoked_subscribers(ctx: &mut Ctx<'_>, new: &User, old: &User) {
    if !new.channels_shrank_from(old) {
        return;
    }
    let name = new.name_text();
    for h in ctx.server.clients.all() {
        if !h.is_pubsub() {
            continue;
        }
        let user = h.meta.lock().user.to_string();
        let user = if user.is_empty() {
            "default".into()
        } else {
            user
        };
        if user != name {
            continue;
        }
        let (channels, patterns) = ctx.server.pubsub.subscriptions_of(h.id);
        let keep = channels.iter().all(|c| new.may_keep_subscription(c, false))
            && patterns.iter().all(|p| new.may_keep_subscription(p, true));
        if !keep {
            if h.id == ctx.client.id() {
                ctx.client.close_after_reply = true;
            } else {
                ctx.server.clients.kill(&h);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// The commands

fn has_spaces(s: &[u8]) -> bool {
    s.iter()
        .any(|&c| c.is_ascii_whitespace() || c == 0 || c == 0x0b)
}

fn acl_setuser(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let name = args.next_arg()?.clone();
    if has_spaces(&name) {
        return Err(CommandError::msg(
            "ERR Usernames can't contain spaces or null characters",
        ));
    }
    let rules: Vec<Vec<u8>> = args.rest().iter().map(|r| r.to_vec()).collect();
    let (new, old) = ctx
        .server
        .acl
        .set_user(catalog(), &name, &rules)
        .map_err(|e| CommandError::msg(format!("ERR {e}")))?;
    if let Some(old) = old {
        kill_revoked_subscribers(ctx, &new, &old);
    }
    sync_auth(ctx.server);
    Ok(Reply::ok())
}

fn acl_deluser(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let names = args.rest();
    if names.iter().any(|n| &n[..] == b"default") {
        return Err(CommandError::msg(
            "ERR The 'default' user cannot be removed",
        ));
    }
    let names: Vec<&[u8]> = names.iter().map(|n| &n[..]).collect();
    let gone = ctx.server.acl.delete(&names);
    let gone_names: Vec<Vec<u8>> = gone.iter().map(|u| u.name.clone()).collect();
    kill_users(ctx, &gone_names);
    Ok(Reply::Int(gone.len() as i64))
}

fn acl_getuser(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let Some(u) = ctx.server.acl.get(args.next_arg()?) else {
        return Ok(Reply::Nil);
    };
    let describe = |s: &crate::state::acl::Selector| {
        vec![
            (
                Reply::bulk_str("commands"),
                Reply::bulk(s.describe_commands()),
            ),
            (Reply::bulk_str("keys"), Reply::bulk(s.describe_keys())),
            (
                Reply::bulk_str("channels"),
                Reply::bulk(s.describe_channels()),
            ),
        ]
    };
    let mut fields = vec![
        (
            Reply::bulk_str("flags"),
            Reply::Set(u.flag_names().into_iter().map(Reply::bulk_str).collect()),
        ),
        (
            Reply::bulk_str("passwords"),
            Reply::Array(
                u.passwords
                    .iter()
                    .map(|p| Reply::bulk(crate::util::sha256::hex(p)))
                    .collect(),
            ),
        ),
    ];
    fields.extend(describe(&u.selectors[0]));
    fields.push((
        Reply::bulk_str("selectors"),
        Reply::Array(
            u.selectors[1..]
                .iter()
                .map(|s| Reply::Map(describe(s)))
                .collect(),
        ),
    ));
    Ok(Reply::Map(fields))
}

fn user_line(u: &User) -> String {
    format!("user {} {}", u.name_text(), u.describe())
}

fn acl_list(ctx: &mut Ctx<'_>, _args: &mut Args<'_>) -> CmdResult {
    Ok(Reply::Array(
        ctx.server
            .acl
            .users()
            .iter()
            .map(|u| Reply::bulk(user_line(u)))
            .collect(),
    ))
}

fn acl_users(ctx: &mut Ctx<'_>, _args: &mut Args<'_>) -> CmdResult {
    Ok(Reply::Array(
        ctx.server
            .acl
            .users()
            .iter()
            .map(|u| Reply::bulk(u.name.clone()))
            .collect(),
    ))
}

fn acl_whoami(ctx: &mut Ctx<'_>, _args: &mut Args<'_>) -> CmdResult {
    Ok(match &ctx.client.user {
        Some(u) => Reply::bulk(u.name.clone()),
        None => Reply::bulk_str("default"),
    })
}

fn acl_cat(_ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let cat = catalog();
    match args.rest() {
        [] => Ok(Reply::Array(
            cat.categories
                .iter()
                .map(|(_, n)| Reply::bulk_str(n))
                .collect(),
        )),
        [name] => {
            let Some(flag) = cat.category(name) else {
                let shown: String = text(name).chars().take(128).collect();
                return Err(CommandError::msg(format!("ERR Unknown category '{shown}'")));
            };
            Ok(Reply::Array(
                cat.cmds
                    .iter()
                    .filter(|c| c.categories & flag != 0)
                    .map(|c| Reply::bulk_str(c.name))
                    .collect(),
            ))
        }
        _ => Err(subcommand_syntax(args)),
    }
}

/// Redis's `addReplySubcommandSyntaxError`.
fn subcommand_syntax(args: &Args<'_>) -> CommandError {
    let sub: String = text(&args.all()[1]).chars().take(128).collect();
    CommandError::msg(format!(
        "ERR unknown subcommand or wrong number of arguments for '{sub}'. Try ACL HELP."
    ))
}

fn acl_genpass(_ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let bits = match args.rest() {
        [] => 256,
        [n] => crate::util::num::parse_i64(n).ok_or_else(CommandError::not_integer)?,
        _ => return Err(subcommand_syntax(args)),
    };
    if bits <= 0 || bits > 4096 {
        return Err(CommandError::msg("ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to 4096"));
    }
    let chars = ((bits + 3) / 4) as usize;
    let mut raw = vec![0u8; chars.div_ceil(2)];
    random_bytes(&mut raw);
    let hex: String = raw
        .iter()
        .flat_map(|b| [b >> 4, b & 15])
        .take(chars)
        .map(|d| char::from_digit(d as u32, 16).unwrap_or('0'))
        .collect();
    Ok(Reply::bulk(hex))
}

/// Bytes from the kernel's generator; passwords must not be predictable.
fn random_bytes(out: &mut [u8]) {
    use std::io::Read;
    if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
        if f.read_exact(out).is_ok() {
            return;
        }
    }
    // No /dev/urandom: mix the clock and the allocator's addresses (never reached on Linux).
    let mut x = crate::state::unix_millis() ^ (out.as_ptr() as u64).rotate_left(17);
    for b in out {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
}

fn acl_log(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let count = match args.rest() {
        [] => 10,
        [a] if crate::commands::is(a, "reset") => {
            ctx.server.acl.log_reset();
            return Ok(Reply::ok());
        }
        [a] => crate::util::num::parse_i64(a)
            .ok_or_else(CommandError::not_integer)?
            .max(0) as usize,
        _ => return Err(subcommand_syntax(args)),
    };
    let now = crate::state::unix_millis();
    let entries = ctx.server.acl.log_entries(count);
    Ok(Reply::Array(
        entries
            .into_iter()
            .map(|e| {
                let reason = match e.reason {
                    Reason::Command => "command",
                    Reason::Key => "key",
                    Reason::Channel => "channel",
                    Reason::Auth => "auth",
                };
                let context = match e.context {
                    Context::Toplevel => "toplevel",
                    Context::Multi => "multi",
                    Context::Lua => "lua",
                };
                Reply::Map(vec![
                    (Reply::bulk_str("count"), Reply::Int(e.count as i64)),
                    (Reply::bulk_str("reason"), Reply::bulk_str(reason)),
                    (Reply::bulk_str("context"), Reply::bulk_str(context)),
                    (Reply::bulk_str("object"), Reply::bulk(e.object)),
                    (Reply::bulk_str("username"), Reply::bulk(e.username)),
                    (
                        Reply::bulk_str("age-seconds"),
                        Reply::Double(now.saturating_sub(e.ctime_ms) as f64 / 1000.0),
                    ),
                    (Reply::bulk_str("client-info"), Reply::bulk(e.client_info)),
                    // Redis 7.2's fields.
                    (Reply::bulk_str("entry-id"), Reply::Int(e.entry_id as i64)),
                    (
                        Reply::bulk_str("timestamp-created"),
                        Reply::Int(e.created_ms as i64),
                    ),
                    (
                        Reply::bulk_str("timestamp-last-updated"),
                        Reply::Int(e.ctime_ms as i64),
                    ),
                ])
            })
            .collect(),
    ))
}

fn acl_dryrun(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let name = args.next_arg()?;
    let Some(user) = ctx.server.acl.get(name) else {
        return Err(CommandError::msg(format!(
            "ERR User '{}' not found",
            text(name)
        )));
    };
    let call = args.rest();
    let spec = match crate::commands::resolve(call) {
        Ok(s) => s,
        Err(e) if e_is_arity(&e) => return Err(CommandError::Reply(e)),
        Err(_) => {
            return Err(CommandError::msg(format!(
                "ERR Command '{}' not found",
                text(&call[0])
            )))
        }
    };
    Ok(match check_user(&user, spec, call) {
        Ok(()) => Reply::ok(),
        Err(Denied::Command) => Reply::bulk(format!(
            "This user has no permissions to run the '{}' command",
            spec.name
        )),
        Err(Denied::Key(i)) => Reply::bulk(format!(
            "This user has no permissions to access the '{}' key",
            text(&call[i])
        )),
        Err(Denied::Channel(i)) => Reply::bulk(format!(
            "This user has no permissions to access the '{}' channel",
            text(&call[i])
        )),
    })
}

fn e_is_arity(e: &Reply) -> bool {
    matches!(e, Reply::Error(t) if t.starts_with("ERR wrong number of arguments"))
}

/// The ACL file, relative to `dir` as Redis (which runs inside `dir`) reads it.
fn acl_file(server: &Server) -> Option<std::path::PathBuf> {
    let cfg = server.config.read();
    let file = cfg.get("aclfile");
    if file.is_empty() {
        return None;
    }
    Some(std::path::Path::new(cfg.get("dir")).join(file))
}

const NO_ACL_FILE: &str = "ERR This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration.";

fn acl_save(ctx: &mut Ctx<'_>, _args: &mut Args<'_>) -> CmdResult {
    let Some(path) = acl_file(ctx.server) else {
        return Err(CommandError::msg(NO_ACL_FILE));
    };
    let mut text = String::new();
    for u in ctx.server.acl.users() {
        text.push_str(&user_line(&u));
        text.push('\n');
    }
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    let written = std::fs::write(&tmp, text).and_then(|_| std::fs::rename(&tmp, &path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        tracing::warn!("Writing ACL file for ACL SAVE: {e}");
        return Err(CommandError::msg("ERR There was an error trying to save the ACLs. Please check the server logs for more information"));
    }
    Ok(Reply::ok())
}

fn acl_load(ctx: &mut Ctx<'_>, _args: &mut Args<'_>) -> CmdResult {
    let Some(path) = acl_file(ctx.server) else {
        return Err(CommandError::msg(NO_ACL_FILE));
    };
    let users = load_file(ctx.server, &path).map_err(|e| CommandError::msg(format!("ERR {e}")))?;
    let replaced = ctx.server.acl.replace_all(users);
    let names: Vec<Vec<u8>> = replaced.iter().map(|u| u.name.clone()).collect();
    kill_users(ctx, &names);
    sync_auth(ctx.server);
    Ok(Reply::ok())
}

/// Redis's `ACLLoadFromFile`: every line validated, nothing applied if one is wrong (the
/// error lists every problem found).
fn load_file(server: &Server, path: &std::path::Path) -> Result<BTreeMap<Vec<u8>, User>, String> {
    let shown = path.display().to_string();
    let body = std::fs::read(path)
        .map_err(|e| format!("Error loading ACLs, opening file '{shown}': {e}"))?;
    let name = server.config.read().get("aclfile").to_string();
    let mut errors = String::new();
    let mut users = BTreeMap::new();
    for (i, raw) in body.split(|&c| c == b'\n').enumerate() {
        let n = i + 1;
        let line = raw.trim_ascii();
        if line.is_empty() {
            continue;
        }
        let words: Vec<Vec<u8>> = line
            .split(|&c| c == b' ')
            .filter(|w| !w.is_empty())
            .map(|w| w.to_vec())
            .collect();
        if words.len() < 2 || words[0] != b"user" {
            errors.push_str(&format!(
                "{name}:{n} should start with user keyword followed by the username. "
            ));
            continue;
        }
        if has_spaces(&words[1]) {
            errors.push_str(&format!(
                "'{name}:{n}: username '{}' contains invalid characters. ",
                text(&words[1])
            ));
            continue;
        }
        if users.contains_key(&words[1]) {
            errors.push_str(&format!(
                "WARNING: Duplicate user '{}' found on line {n}. ",
                text(&words[1])
            ));
            continue;
        }
        let rules = match crate::state::acl::merge_selector_args(&words[2..]) {
            Ok(r) => r,
            Err(_) => {
                errors.push_str(&format!(
                    "{name}:{n}: Unmatched parenthesis in selector definition."
                ));
                continue;
            }
        };
        let rules: Vec<Vec<u8>> = rules.into_iter().map(|r| r.trim_ascii().to_vec()).collect();
        match server.acl.build_user(catalog(), &words[1], &rules) {
            Ok(u) => {
                users.insert(words[1].clone(), u);
            }
            Err((op, e)) => {
                if e == crate::state::acl::RuleError::UnknownName {
                    errors.push_str(&format!(
                        "{name}:{n}: Error in applying operation '{}': {}. ",
                        text(&op),
                        e.text()
                    ));
                } else {
                    errors.push_str(&format!("{name}:{n}: {}. ", e.text()));
                }
            }
        }
    }
    if errors.is_empty() {
        Ok(users)
    } else {
        errors.push_str("WARNING: ACL errors detected, no change to the previously active ACL rules was performed");
        Err(errors)
    }
}

/// At start: the `user` lines of the configuration, or the ACL file (not both, as Redis).
/// An error stops the start.
pub fn load_at_startup(server: &Server) -> Result<(), String> {
    let (lines, file) = {
        let cfg = server.config.read();
        (cfg.users.clone(), cfg.get("aclfile").to_string())
    };
    if !file.is_empty() && !lines.is_empty() {
        return Err("Configuring Redis with users defined in redis.conf and at the same setting an ACL file path is invalid. This setup is very likely to lead to configuration errors and security holes, please define either an ACL file or declare users directly in your redis.conf, but not both.".into());
    }
    if !lines.is_empty() {
        let mut users = BTreeMap::new();
        for words in &lines {
            let name = words[0].as_bytes().to_vec();
            if has_spaces(&name) {
                return Err("Spaces not allowed in ACL usernames".into());
            }
            let raw: Vec<Vec<u8>> = words[1..].iter().map(|w| w.as_bytes().to_vec()).collect();
            let rules = crate::state::acl::merge_selector_args(&raw).map_err(|i| {
                format!(
                    "Error in user declaration '{}': Unmatched parenthesis",
                    words[i + 1]
                )
            })?;
            let u = server
                .acl
                .build_user(catalog(), &name, &rules)
                .map_err(|(op, e)| {
                    format!(
                        "Error loading ACL rule '{}' for the user named '{}': {}",
                        text(&op),
                        words[0],
                        e.text()
                    )
                })?;
            if !u.enabled {
                tracing::info!("The user '{}' is disabled (there is no 'on' modifier in the user description). Make sure this is not a configuration error.", words[0]);
            }
            users.insert(name, u);
        }
        server.acl.replace_all(users);
    }
    if let Some(path) = acl_file(server) {
        let users = load_file(server, &path)
            .map_err(|e| format!("Aborting Redis startup because of ACL errors: {e}"))?;
        server.acl.replace_all(users);
    }
    sync_auth(server);
    Ok(())
}

/// The users as `user` lines for CONFIG REWRITE (each line's words after `user`): every
/// user but a default user with Redis's defaults, or none when an ACL file holds them.
pub fn config_users(server: &Server) -> Vec<Vec<String>> {
    if acl_file(server).is_some() {
        return Vec::new();
    }
    let fresh = "on nopass ~* &* +@all";
    server
        .acl
        .users()
        .iter()
        .map(|u| (u.name_text(), u.describe()))
        .filter(|(name, rules)| !(name == "default" && rules == fresh))
        .map(|(name, rules)| {
            std::iter::once(name)
                .chain(rules.split(' ').filter(|w| !w.is_empty()).map(String::from))
                .collect()
        })
        .collect()
}

fn acl_help(_ctx: &mut Ctx<'_>, _args: &mut Args<'_>) -> CmdResult {
    Ok(help_reply(
        "acl",
        &[
            "CAT [<category>]",
            "    List all commands that belong to <category>, or all command categories",
            "    when no category is specified.",
            "DELUSER <username> [<username> ...]",
            "    Delete a list of users.",
            "DRYRUN <username> <command> [<arg> ...]",
            "    Returns whether the user can execute the given command without executing the command.",
            "GETUSER <username>",
            "    Get the user's details.",
            "GENPASS [<bits>]",
            "    Generate a secure 256-bit user password. The optional `bits` argument can",
            "    be used to specify a different size.",
            "LIST",
            "    Show users details in config file format.",
            "LOAD",
            "    Reload users from the ACL file.",
            "LOG [<count> | RESET]",
            "    Show the ACL log entries.",
            "SAVE",
            "    Save the current config to the ACL file.",
            "SETUSER <username> <attribute> [<attribute> ...]",
            "    Create or modify a user with the specified attributes.",
            "USERS",
            "    List all the registered usernames.",
            "WHOAMI",
            "    Return the current connection username.",
        ],
    ))
}
