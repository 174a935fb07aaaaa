//! Server family: COMMAND INFO CONFIG TIME DBSIZE FLUSHDB FLUSHALL SHUTDOWN and the
//! administrative commands whose implementations arrive with persistence and the key space.

use crate::commands::args::{Args, CommandError, CommandResult, Token};
use crate::commands::spec::{acl, family, flag::*, CmdResult, CommandSpec};
use crate::commands::{command_info, help_reply, keys_of, resolve, table, text, Ctx};
use crate::config::{self, SETTINGS};
use crate::protocol::Reply;
use crate::state::{unix_millis, Server, REDIS_COMPAT_VERSION, VERSION};
use crate::util::glob::glob_match;
use bytes::Bytes;
use std::fmt::Write;
use std::sync::atomic::Ordering;
use std::sync::Arc;

const SRV: CommandSpec = family("server", 0);

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    SRV.cmd("command", -1, command_all).flags(LOADING | STALE).acl(acl::CONNECTION)
        .doc("2.8.13", "Returns detailed information about all commands.")
        .complexity("O(N) where N is the total number of commands").subs(COMMAND_SUBCOMMANDS),
    SRV.cmd("info", -1, info).flags(LOADING | STALE).acl(acl::DANGEROUS)
        .doc("1.0.0", "Returns information and statistics about the server.").args("[section...]"),
    SRV.cmd("config", -2, container)
        .doc("2.0.0", "A container for server configuration commands.")
        .complexity("Depends on subcommand.").subs(CONFIG_SUBCOMMANDS),
    SRV.cmd("time", 1, time).flags(LOADING | STALE | FAST)
        .doc("2.6.0", "Returns the server time."),
    SRV.cmd("dbsize", 1, dbsize).flags(READONLY | FAST).acl(acl::KEYSPACE)
        .doc("1.0.0", "Returns the number of keys in the database."),
    SRV.cmd("flushdb", -1, flushdb).flags(WRITE).acl(acl::KEYSPACE | acl::DANGEROUS)
        .doc("1.0.0", "Removes all keys and document collections from the current database.")
        .complexity("O(N) where N is the number of keys and documents in the selected database")
        .args("[flush-type:(ASYNC|SYNC)]"),
    SRV.cmd("flushall", -1, flushall).flags(WRITE).acl(acl::KEYSPACE | acl::DANGEROUS)
        .doc("1.0.0", "Removes all keys and document collections from all databases.")
        .complexity("O(N) where N is the total number of keys and documents in all databases")
        .args("[flush-type:(ASYNC|SYNC)]"),
    SRV.cmd("shutdown", -1, shutdown).flags(ADMIN | NOSCRIPT | LOADING | STALE | NO_MULTI | ALLOW_BUSY)
        .doc("1.0.0", "Synchronously saves the database(s) to disk and shuts down the server.")
        .complexity("O(N) when saving, where N is the total number of keys in all databases when saving data, otherwise O(1)")
        .args("[save-selector:(NOSAVE|SAVE)] [NOW] [FORCE] [ABORT]"),
    SRV.cmd("swapdb", 3, swapdb).flags(WRITE | FAST).acl(acl::KEYSPACE | acl::DANGEROUS)
        .doc("4.0.0", "Swaps two databases, key spaces and document collections alike.")
        .complexity("O(N) where N is the count of clients watching or blocking on keys from both databases.")
        .args("index1:integer index2:integer"),
    SRV.cmd("save", 1, super::journal::save).flags(ADMIN | NOSCRIPT | NO_ASYNC_LOADING | NO_MULTI)
        .doc("1.0.0", "Synchronously saves the database(s) to disk.")
        .complexity("O(N) where N is the total number of keys in all databases"),
    SRV.cmd("bgsave", -1, super::journal::bgsave).flags(ADMIN | NOSCRIPT | NO_ASYNC_LOADING)
        .doc("1.0.0", "Asynchronously saves the database(s) to disk.")
        .complexity("O(N) where N is the total number of keys in all databases").args("[SCHEDULE]"),
    SRV.cmd("bgrewriteaof", 1, super::journal::bgrewriteaof).flags(ADMIN | NOSCRIPT | NO_ASYNC_LOADING)
        .doc("1.0.0", "Asynchronously rewrites the append-only journal to a snapshot plus tail.")
        .complexity("O(N) where N is the total number of keys and documents"),
    SRV.cmd("lastsave", 1, super::journal::lastsave).flags(LOADING | STALE | FAST).acl(acl::ADMIN | acl::DANGEROUS)
        .doc("1.0.0", "Returns the Unix timestamp of the last successful save to disk."),
    SRV.cmd("slowlog", -2, container).doc("2.2.12", "A container for slow log commands.")
        .complexity("Depends on subcommand.").subs(SLOWLOG_SUBCOMMANDS),
    SRV.cmd("module", -2, container)
        .doc("4.0.0", "A container for module commands")
        .complexity("Depends on subcommand.").subs(MODULE_SUBCOMMANDS),
    SRV.cmd("memory", -2, container)
        .doc("4.0.0", "A container for memory diagnostics commands.")
        .complexity("Depends on subcommand.").subs(MEMORY_SUBCOMMANDS),
    SRV.cmd("object", -2, container).group("generic")
        .doc("2.2.3", "A container for object introspection commands.")
        .complexity("Depends on subcommand.").subs(OBJECT_SUBCOMMANDS),
    SRV.cmd("waitaof", 4, super::journal::waitaof).flags(BLOCKING).acl(acl::CONNECTION).group("generic")
        .doc("7.2.0", "Blocks until all of the preceding write commands sent by the connection are written to the append-only file of the master and/or replicas.")
        .args("numlocal:integer numreplicas:integer timeout:integer"),
    SRV.cmd("wait", 3, wait).flags(NOSCRIPT).acl(acl::CONNECTION).group("generic")
        .doc("3.0.0", "Blocks until the asynchronous replication of all preceding write commands sent by the connection is completed.")
        .complexity("O(1)").args("numreplicas:integer timeout:integer"),
    SRV.cmd("role", 1, role).flags(NOSCRIPT | LOADING | STALE | FAST).acl(acl::ADMIN | acl::DANGEROUS)
        .doc("2.8.12", "Returns the replication role.").complexity("O(1)"),
    SRV.cmd("lolwut", -1, lolwut).flags(READONLY | FAST)
        .doc("5.0.0", "Displays computer art and the Redis version").args("[VERSION=version:integer]"),
    SRV.cmd("monitor", 1, monitor).flags(ADMIN | NOSCRIPT | LOADING | STALE)
        .doc("1.0.0", "Listens for all requests received by the server in real-time."),
];

#[rustfmt::skip]
static COMMAND_SUBCOMMANDS: &[CommandSpec] = &[
    SRV.cmd("command|count", 2, command_count).flags(LOADING | STALE)
        .doc("2.8.13", "Returns a count of commands."),
    SRV.cmd("command|info", -2, command_info).flags(LOADING | STALE)
        .doc("2.8.13", "Returns information about one, multiple or all commands.")
        .complexity("O(N) where N is the number of commands to look up").args("[command-name...]"),
    SRV.cmd("command|docs", -2, command_docs).flags(LOADING | STALE)
        .doc("7.0.0", "Returns documentary information about one, multiple or all commands.")
        .complexity("O(N) where N is the number of commands to look up").args("[command-name...]"),
    SRV.cmd("command|list", -2, command_list).flags(LOADING | STALE)
        .doc("7.0.0", "Returns a list of command names.")
        .complexity("O(N) where N is the total number of commands")
        .args("[FILTERBY=filterby:(MODULE=module-name|ACLCAT=category|PATTERN=pattern:pattern)]"),
    SRV.cmd("command|getkeys", -3, command_getkeys).flags(LOADING | STALE)
        .doc("2.8.13", "Extracts the key names from an arbitrary command.")
        .complexity("O(N) where N is the number of arguments to the command")
        .args("command [arg...]"),
    SRV.cmd("command|getkeysandflags", -3, command_getkeysandflags).flags(LOADING | STALE)
        .doc("7.0.0", "Extracts the key names and access flags for an arbitrary command.")
        .complexity("O(N) where N is the number of arguments to the command")
        .args("command [arg...]"),
    SRV.cmd("command|help", 2, command_help).flags(LOADING | STALE)
        .doc("5.0.0", "Returns helpful text about the different subcommands."),
];

#[rustfmt::skip]
static CONFIG_SUBCOMMANDS: &[CommandSpec] = &[
    SRV.cmd("config|get", -3, config_get).flags(ADMIN | NOSCRIPT | LOADING | STALE)
        .doc("2.0.0", "Returns the effective values of configuration parameters.")
        .complexity("O(N) when N is the number of configuration parameters provided")
        .args("parameter..."),
    SRV.cmd("config|set", -4, config_set).flags(ADMIN | NOSCRIPT | LOADING | STALE)
        .doc("2.0.0", "Sets configuration parameters in-flight.")
        .complexity("O(N) when N is the number of configuration parameters provided")
        .args("data:{parameter value}..."),
    SRV.cmd("config|resetstat", 2, config_resetstat).flags(ADMIN | NOSCRIPT | LOADING | STALE)
        .doc("2.0.0", "Resets the server's statistics."),
    SRV.cmd("config|rewrite", 2, config_rewrite).flags(ADMIN | NOSCRIPT | LOADING | STALE)
        .doc("2.8.0", "Persists the effective configuration to file."),
    SRV.cmd("config|help", 2, config_help).flags(LOADING | STALE)
        .doc("5.0.0", "Returns helpful text about the different subcommands."),
];

#[rustfmt::skip]
static SLOWLOG_SUBCOMMANDS: &[CommandSpec] = &[
    SRV.cmd("slowlog|get", -2, super::stats::slowlog_get).flags(ADMIN | NOSCRIPT | LOADING | STALE)
        .doc("2.2.12", "Returns the slow log's entries.")
        .complexity("O(N) where N is the number of entries returned").args("[count:integer]"),
    SRV.cmd("slowlog|len", 2, super::stats::slowlog_len).flags(ADMIN | NOSCRIPT | LOADING | STALE)
        .doc("2.2.12", "Returns the number of entries in the slow log."),
    SRV.cmd("slowlog|reset", 2, super::stats::slowlog_reset).flags(ADMIN | NOSCRIPT | LOADING | STALE)
        .doc("2.2.12", "Clears all entries from the slow log.")
        .complexity("O(N) where N is the number of entries in the slowlog"),
    SRV.cmd("slowlog|help", 2, super::stats::slowlog_help).flags(LOADING | STALE)
        .doc("6.2.0", "Show helpful text about the different subcommands"),
];

/// MODULE: no module is ever loaded here (the server has no module API), so LIST is empty
/// and LOAD / LOADEX fail as a module that cannot load fails on Redis, with the reason in
/// the log; UNLOAD finds no module. All but HELP and LIST stay behind
/// `enable-module-command`, as on Redis.
#[rustfmt::skip]
static MODULE_SUBCOMMANDS: &[CommandSpec] = &[
    SRV.cmd("module|help", 2, module_help).flags(LOADING | STALE)
        .doc("5.0.0", "Show helpful text about the different subcommands").complexity("O(1)"),
    SRV.cmd("module|list", 2, module_list).flags(ADMIN | NOSCRIPT)
        .doc("4.0.0", "List all modules loaded by the server")
        .complexity("O(N) where N is the number of loaded modules."),
    SRV.cmd("module|load", -3, module_load).flags(ADMIN | NOSCRIPT | NO_ASYNC_LOADING)
        .doc("4.0.0", "Load a module").complexity("O(1)").args("path:string [arg:string...]"),
    SRV.cmd("module|loadex", -3, module_load).flags(ADMIN | NOSCRIPT | NO_ASYNC_LOADING)
        .doc("7.0.0", "Load a module with extended parameters").complexity("O(1)")
        .args("path:string [CONFIG=configs:{name value}+...] [ARGS=args:{arg}...]"),
    SRV.cmd("module|unload", 3, module_unload).flags(ADMIN | NOSCRIPT | NO_ASYNC_LOADING)
        .doc("4.0.0", "Unload a module").complexity("O(1)").args("name:string"),
];

#[rustfmt::skip]
static MEMORY_SUBCOMMANDS: &[CommandSpec] = &[
    SRV.cmd("memory|usage", -3, crate::commands::keyspace_admin::memory_usage).flags(READONLY).keys(2, 2, 1).key_spec_flags(&["RO"])
        .doc("4.0.0", "Estimates the memory usage of a key.")
        .complexity("O(N) where N is the number of samples.")
        .args("key:key [SAMPLES=count:integer]"),
    SRV.cmd("memory|help", 2, crate::commands::keyspace_admin::memory_help).flags(LOADING | STALE)
        .doc("4.0.0", "Returns helpful text about the different subcommands."),
    SRV.cmd("memory|stats", 2, crate::commands::memory::memory_stats)
        .doc("4.0.0", "Returns details about memory usage."),
    SRV.cmd("memory|doctor", 2, crate::commands::memory::memory_doctor)
        .doc("4.0.0", "Outputs a memory problems report."),
    SRV.cmd("memory|purge", 2, memory_purge)
        .doc("4.0.0", "Asks the allocator to release memory."),
    SRV.cmd("memory|malloc-stats", 2, crate::commands::memory::memory_malloc_stats)
        .doc("4.0.0", "Returns the allocator statistics."),
];

#[rustfmt::skip]
static OBJECT_SUBCOMMANDS: &[CommandSpec] = &[
    SRV.cmd("object|encoding", 3, crate::commands::keyspace_admin::object_encoding).flags(READONLY).keys(2, 2, 1).key_spec_flags(&["RO"]).acl(acl::KEYSPACE).group("generic")
        .doc("2.2.3", "Returns the internal encoding of an object.").args("key:key"),
    SRV.cmd("object|idletime", 3, crate::commands::keyspace_admin::object_idletime).flags(READONLY).keys(2, 2, 1).key_spec_flags(&["RO"]).acl(acl::KEYSPACE).group("generic")
        .doc("2.2.3", "Returns the time since the last access to an object.").args("key:key"),
    SRV.cmd("object|freq", 3, crate::commands::keyspace_admin::object_freq).flags(READONLY).keys(2, 2, 1).key_spec_flags(&["RO"]).acl(acl::KEYSPACE).group("generic")
        .doc("4.0.0", "Returns the logarithmic access frequency counter of an object.")
        .args("key:key"),
    SRV.cmd("object|refcount", 3, crate::commands::keyspace_admin::object_refcount).flags(READONLY).keys(2, 2, 1).key_spec_flags(&["RO"]).acl(acl::KEYSPACE).group("generic")
        .doc("2.2.3", "Returns the reference count of a key's value.").args("key:key"),
    SRV.cmd("object|help", 2, crate::commands::keyspace_admin::object_help).flags(LOADING | STALE).acl(acl::KEYSPACE).group("generic")
        .doc("6.2.0", "Returns helpful text about the different subcommands."),
];

/// Only reached with no subcommand, which the arity check already refuses.
fn container(_ctx: &mut Ctx<'_>, _args: &mut Args<'_>) -> CmdResult {
    Err(CommandError::WrongArity)
}

fn command_all(_ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    if let Some(sub) = args.next_opt() {
        return Err(crate::commands::unknown_subcommand("command", sub).into());
    }
    Ok(Reply::Array(
        table()
            .all()
            .iter()
            .map(|s| command_info::info(s))
            .collect(),
    ))
}

fn command_count(_ctx: &mut Ctx<'_>, _args: &mut Args<'_>) -> CmdResult {
    Ok(Reply::Int(table().all().len() as i64))
}

fn command_info(_ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    if args.is_empty() {
        return Ok(Reply::Array(
            table()
                .all()
                .iter()
                .map(|s| command_info::info(s))
                .collect(),
        ));
    }
    Ok(Reply::Array(
        args.rest()
            .iter()
            .map(|n| {
                lookup_full(n)
                    .map(command_info::info)
                    .unwrap_or(Reply::NilArray)
            })
            .collect(),
    ))
}

/// Looks up `get` or `client|id`.
fn lookup_full(name: &[u8]) -> Option<&'static CommandSpec> {
    let name = text(name).to_lowercase();
    match name.split_once('|') {
        Some((c, s)) => crate::commands::subcommand(table().get(c.as_bytes())?, s.as_bytes()),
        None => table().get(name.as_bytes()),
    }
}

fn command_docs(_ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let specs: Vec<&'static CommandSpec> = if args.is_empty() {
        table().all().to_vec()
    } else {
        args.rest().iter().filter_map(|n| lookup_full(n)).collect()
    };
    Ok(Reply::Map(
        specs
            .into_iter()
            .map(|s| (Reply::bulk_str(s.name), command_info::docs(s)))
            .collect(),
    ))
}

fn command_list(_ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    // Containers and their subcommands (`client`, `client|id`, ...), as Redis 7 lists them.
    let all: Vec<&CommandSpec> = table()
        .all()
        .iter()
        .flat_map(|s| std::iter::once(*s).chain(s.subcommands.iter()))
        .collect();
    let names = all.iter().map(|s| s.name);
    let filtered: Vec<&str> = match args.len() {
        0 => names.collect(),
        3 if args.eat("FILTERBY") => {
            let (by, v) = (args.next_arg()?, args.next_arg()?);
            match &*Token::of(by) {
                b"PATTERN" => names
                    .filter(|n| glob_match(v, n.as_bytes(), true))
                    .collect(),
                b"ACLCAT" => {
                    let cat = acl::by_name(&text(v)).unwrap_or(0);
                    all.iter()
                        .filter(|s| s.categories() & cat != 0)
                        .map(|s| s.name)
                        .collect()
                }
                b"MODULE" => vec![],
                _ => return Err(CommandError::syntax()),
            }
        }
        _ => return Err(CommandError::syntax()),
    };
    Ok(Reply::Array(
        filtered.into_iter().map(Reply::bulk_str).collect(),
    ))
}

fn command_getkeys(_ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let inner = args.rest();
    let spec = getkeys_target(inner)?;
    let keys = keys_of(spec, inner);
    if keys.is_empty() {
        // Scripts and functions may name no keys.
        if spec.has(NO_MANDATORY_KEYS) {
            return Ok(Reply::Array(vec![]));
        }
        return Err(no_keys_error(spec));
    }
    Ok(Reply::Array(
        keys.into_iter().map(|k| Reply::Bulk(k.clone())).collect(),
    ))
}

/// COMMAND GETKEYSANDFLAGS: each key with the flags of the key spec that finds it.
fn command_getkeysandflags(_ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let inner = args.rest();
    let spec = getkeys_target(inner)?;
    let keys = spec.key_positions_with_flags(inner);
    if keys.is_empty() {
        return Err(no_keys_error(spec));
    }
    Ok(Reply::Array(
        keys.into_iter()
            .map(|(i, flags)| {
                Reply::Array(vec![
                    Reply::Bulk(inner[i].clone()),
                    Reply::Array(flags.iter().map(|f| Reply::Status(f.to_string())).collect()),
                ])
            })
            .collect(),
    ))
}

/// GETKEYS with no keys found: Redis says the arguments are invalid when the command does
/// have keys (ZUNIONSTORE with a key count past the arguments), and that it has none when
/// it has no key spec other than `not_key` ones (PING, SPUBLISH).
fn no_keys_error(spec: &CommandSpec) -> CommandError {
    let has_keys = spec
        .effective_key_specs()
        .iter()
        .any(|ks| !ks.flags.contains(&"not_key"));
    CommandError::msg(if has_keys {
        "ERR Invalid arguments specified for command"
    } else {
        "ERR The command has no key arguments"
    })
}

/// The command GETKEYS and GETKEYSANDFLAGS look into, with Redis's errors.
fn getkeys_target(inner: &[Bytes]) -> CommandResult<&'static CommandSpec> {
    match resolve(inner) {
        Ok(s) => Ok(s),
        Err(_) if table().get(&inner[0]).is_none() => {
            Err(CommandError::msg("ERR Invalid command specified"))
        }
        Err(_) => Err(CommandError::msg(
            "ERR Invalid number of arguments specified for command",
        )),
    }
}

fn command_help(_ctx: &mut Ctx<'_>, _args: &mut Args<'_>) -> CmdResult {
    Ok(help_reply(
        "command",
        &[
            "(no subcommand)",
            "    Return details about all commands.",
            "COUNT",
            "    Return the total number of commands in this server.",
            "GETKEYSANDFLAGS <full-command>",
            "    Return the keys and the access flags from a full Redis command.",
            "LIST",
            "    Return a list of all commands in this server.",
            "INFO [<command-name> ...]",
            "    Return details about multiple commands.",
            "DOCS [<command-name> ...]",
            "    Return documentation details about multiple commands.",
            "GETKEYS <full-command>",
            "    Return the keys from a full command.",
        ],
    ))
}

fn config_get(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let patterns: Vec<&[u8]> = args.rest().iter().map(|b| b.as_ref()).collect();
    let cfg = ctx.server.config.read();
    Ok(Reply::Map(
        cfg.matching(&patterns)
            .into_iter()
            .map(|(n, v)| (Reply::bulk_str(n), Reply::bulk(v)))
            .collect(),
    ))
}

fn config_set(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    // Validate everything first: CONFIG SET of several settings is all or nothing.
    let mut updates = Vec::new();
    for pair in args.pairs()? {
        let name = text(&pair[0]);
        if let Some((ignored, _)) = config::ignored(&name) {
            // Accepted from a config file with a warning; they have no meaning to change.
            return Err(CommandError::msg(format!(
                "ERR CONFIG SET failed (possibly related to argument '{ignored}') - can't set immutable config"
            )));
        }
        let Some(s) = config::setting(&name) else {
            return Err(CommandError::msg(format!(
                "ERR Unknown option or number of arguments for CONFIG SET - '{name}'"
            )));
        };
        let fail = |why: &str| {
            CommandError::msg(format!(
                "ERR CONFIG SET failed (possibly related to argument '{}') - {why}",
                s.name
            ))
        };
        if config::PROTECTED.contains(&s.name) && !allowed_by(ctx, "enable-protected-configs") {
            return Err(fail("can't set protected config"));
        }
        if config::DENY_LOADING.contains(&s.name) && crate::commands::journal::is_loading() {
            return Err(CommandError::msg(
                "LOADING Redis is loading the dataset in memory",
            ));
        }
        if !s.live {
            // Settings Redis changes at run time and tidecache only at start: setting the
            // value in force changes nothing and is accepted (tools that write back what
            // CONFIG GET * said, Redis's test suite among them, do that).
            let unchanged = config::SAME_VALUE_OK.contains(&s.name)
                && config::normalize(s, &text(&pair[1])).ok().as_deref()
                    == Some(ctx.server.config.read().get(s.name));
            if unchanged {
                continue;
            }
            return Err(fail("can't set immutable config"));
        }
        if updates.iter().any(|(n, _)| *n == s.name) {
            return Err(fail("duplicate parameter"));
        }
        match config::normalize(s, &text(&pair[1])) {
            Ok(v) => updates.push((s.name, v)),
            Err(e) => return Err(fail(&e)),
        }
    }
    if updates
        .iter()
        .any(|(n, v)| *n == "appendonly" && v == "yes")
        && ctx.client.in_exec
        && !crate::store::journal::enabled()
    {
        // Its cut waits for the transaction's end (it needs the exec gate).
        crate::state::redis_log::line(
            ctx.server,
            true,
            "AOF was enabled during a transaction. An AOF background was scheduled to start when possible.",
        );
    }
    // As Redis: the new values are set, then each setting with an apply step is applied
    // (one step per group of settings); if one fails, the old values come back and the steps
    // already run are run again with them, so CONFIG SET is all or nothing even for what
    // touches the world (files, sockets, the OOM score).
    let old: Vec<String> = {
        let cfg = ctx.server.config.read();
        updates
            .iter()
            .map(|(n, _)| cfg.get(n).to_string())
            .collect()
    };
    let restore = |server: &Server| {
        let mut cfg = server.config.write();
        for ((n, _), v) in updates.iter().zip(&old) {
            cfg.set_normalized(n, v.clone());
        }
    };
    {
        let mut cfg = ctx.server.config.write();
        for (n, v) in &updates {
            cfg.set_normalized(n, v.clone());
        }
    }
    let mut steps: Vec<(Apply, &'static str)> = Vec::new();
    for ((n, v), was) in updates.iter().zip(&old) {
        let Some(step) = Apply::of(n) else { continue };
        // A port set to the port in force is not bound again (it could not be).
        if matches!(step, Apply::Port | Apply::TlsPort) && v == was {
            continue;
        }
        if !steps.iter().any(|(s, _)| *s == step) {
            steps.push((step, n));
        }
    }
    // Listeners last: binding is the step most likely to fail and the hardest to undo.
    steps.sort_by_key(|(s, _)| matches!(s, Apply::Port | Apply::TlsPort));
    for (j, (step, name)) in steps.iter().enumerate() {
        if let Err(why) = step.run(ctx.server) {
            restore(ctx.server);
            for (undo, undo_name) in steps[..j].iter().rev() {
                if let Err(e) = undo.run(ctx.server) {
                    tracing::warn!("CONFIG SET rollback of '{undo_name}' failed: {e}");
                }
            }
            return Err(CommandError::msg(format!(
                "ERR CONFIG SET failed (possibly related to argument '{name}') - {why}"
            )));
        }
    }
    for (n, _) in &updates {
        ctx.server.config_changed(n);
    }
    Ok(Reply::ok())
}

/// The settings whose change does something that can fail, each group with one step.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Apply {
    /// `appendonly`: the journal starts (a base is written) or stops, as Redis's startAppendOnly.
    Aof,
    /// `tls-*`: the certificates, key and CAs they name must load (Redis's applyTlsCfg).
    Tls,
    Port,
    TlsPort,
    Oom,
    Title,
    LogLevel,
}

impl Apply {
    fn of(name: &str) -> Option<Apply> {
        Some(match name {
            "appendonly" => Apply::Aof,
            "port" => Apply::Port,
            "tls-port" => Apply::TlsPort,
            "oom-score-adj" | "oom-score-adj-values" => Apply::Oom,
            "proc-title-template" => Apply::Title,
            "loglevel" => Apply::LogLevel,
            n if n.starts_with("tls-") => Apply::Tls,
            _ => return None,
        })
    }

    /// Applies the values in the configuration now; the error is the text after Redis's
    /// `CONFIG SET failed (...) - `, and the cause is logged.
    fn run(self, server: &std::sync::Arc<Server>) -> Result<(), String> {
        let logged = |e: String, why: &str| {
            tracing::warn!("{e}");
            why.to_string()
        };
        match self {
            Apply::Aof => {
                let on = server.config.read().get_bool("appendonly");
                crate::commands::journal::set_appendonly(server, on)
                    .map_err(|e| format!("Unable to turn on AOF. Check server logs. ({e})"))
            }
            Apply::Tls => {
                let cfg = server.config.read().clone();
                server
                    .tls
                    .reload(&cfg)
                    .map_err(|e| format!("Unable to update TLS configuration. {e}"))
            }
            Apply::Port | Apply::TlsPort => {
                let tls = self == Apply::TlsPort;
                let port = {
                    let cfg = server.config.read();
                    if tls && cfg.get_i64("tls-port") != 0 {
                        // New TLS clients need the certificates in force to load.
                        server
                            .tls
                            .reload(&cfg)
                            .map_err(|e| format!("Unable to update TLS configuration. {e}"))?;
                    }
                    cfg.get_i64(if tls { "tls-port" } else { "port" }) as u16
                };
                server
                    .rebind(tls, port)
                    .map_err(|e| logged(e, "Unable to listen on this port. Check server logs."))?;
                // The title shows the port (Redis's changeListenPort sets it too).
                if let Err(e) = server.set_proc_title() {
                    tracing::debug!("process title: {e}");
                }
                Ok(())
            }
            Apply::Oom => server
                .apply_oom_score_adj()
                .map_err(|e| logged(e, "Failed to set current oom_score_adj. Check server logs.")),
            Apply::Title => server
                .set_proc_title()
                .map_err(|e| logged(e, "failed to set process title")),
            Apply::LogLevel => {
                let level = server.config.read().get("loglevel").to_string();
                match server.log_level.get() {
                    Some(set) => set(&level).map_err(|e| logged(e, "failed to set the log level")),
                    None => Ok(()),
                }
            }
        }
    }
}

fn module_help(_ctx: &mut Ctx<'_>, _args: &mut Args<'_>) -> CmdResult {
    Ok(crate::commands::help_reply(
        "module",
        &[
            "LIST",
            "    Return a list of loaded modules.",
            "LOAD <path> [<arg> ...]",
            "    Load a module library from <path>, passing to it any optional arguments.",
            "LOADEX <path> [[CONFIG NAME VALUE] [CONFIG NAME VALUE]] [ARGS ...]",
            "    Load a module library from <path>, while passing it module configurations and optional arguments.",
            "UNLOAD <name>",
            "    Unload a module.",
        ],
    ))
}

fn module_list(_ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    args.finish()?;
    Ok(Reply::Array(Vec::new()))
}

/// Redis's refusal of a MODULE subcommand `enable-module-command` does not allow.
fn module_guard(ctx: &Ctx<'_>) -> Result<(), CommandError> {
    if allowed_by(ctx, "enable-module-command") {
        return Ok(());
    }
    Err(CommandError::msg(
        "ERR MODULE command not allowed. If the enable-module-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.",
    ))
}

fn module_load(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    module_guard(ctx)?;
    let path = text(args.next_arg()?);
    tracing::warn!("Module {path} failed to load: this server has no module API");
    Err(CommandError::msg(
        "ERR Error loading the extension. Please check the server logs.",
    ))
}

fn module_unload(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    module_guard(ctx)?;
    args.next_arg()?;
    Err(CommandError::msg(
        "ERR Error unloading module: no such module with that name",
    ))
}

/// Whether a `no | yes | local` guard setting (`enable-debug-command`,
/// `enable-protected-configs`) lets this client through: `local` is loopback clients only.
pub fn allowed_by(ctx: &Ctx<'_>, guard: &str) -> bool {
    match ctx.server.config.read().get(guard) {
        "yes" => true,
        "local" => ctx.client.handle.addr.ip().is_loopback(),
        _ => false,
    }
}

fn config_resetstat(ctx: &mut Ctx<'_>, _args: &mut Args<'_>) -> CmdResult {
    ctx.server.stats.reset();
    // The replication counters of INFO stats too, as Redis's resetServerStats.
    let r = crate::state::replication::repl();
    for counter in [&r.sync_full, &r.sync_partial_ok, &r.sync_partial_err] {
        counter.store(0, Ordering::Relaxed);
    }
    crate::state::cmdstats::reset();
    ctx.server.store.reset_stats();
    ctx.server
        .pubsub
        .limit_disconnections
        .store(0, Ordering::Relaxed);
    Ok(Reply::ok())
}

fn config_rewrite(ctx: &mut Ctx<'_>, _args: &mut Args<'_>) -> CmdResult {
    let mut cfg = ctx.server.config.read().clone();
    // The ACL users in force, as `user` lines (none when they live in an ACL file).
    cfg.users = crate::commands::acl::config_users(ctx.server);
    // The master this server follows now (REPLICAOF since the start included), as Redis's
    // rewriteConfigReplicaOfOption; not in cluster mode, where nodes.conf says it.
    if ctx.server.cluster.get().is_none() {
        let master = crate::state::replication::repl().master.lock().clone();
        let line = master.map_or(String::new(), |(h, p)| format!("{h} {p}"));
        cfg.set_normalized("replicaof", line);
    }
    cfg.rewrite()
        .map_err(|e| CommandError::msg(format!("ERR {e}")))?;
    Ok(Reply::ok())
}

fn config_help(_ctx: &mut Ctx<'_>, _args: &mut Args<'_>) -> CmdResult {
    Ok(help_reply(
        "config",
        &[
            "GET <pattern>",
            "    Return parameters matching the glob-like <pattern> and their values.",
            "SET <directive> <value>",
            "    Set the configuration <directive> to <value>.",
            "RESETSTAT",
            "    Reset statistics reported by the INFO command.",
            "REWRITE",
            "    Rewrite the configuration file.",
        ],
    ))
}

fn time(_ctx: &mut Ctx<'_>, _args: &mut Args<'_>) -> CmdResult {
    let now = crate::util::clock::now_us();
    Ok(Reply::Array(vec![
        Reply::bulk((now / 1_000_000).to_string()),
        Reply::bulk((now % 1_000_000).to_string()),
    ]))
}

fn dbsize(ctx: &mut Ctx<'_>, _args: &mut Args<'_>) -> CmdResult {
    Ok(Reply::Int(ctx.server.store.dbsize(ctx.client.db) as i64))
}

/// Reads `[ASYNC|SYNC]`; true for ASYNC.
fn flush_mode(args: &mut Args<'_>) -> CommandResult<bool> {
    let mode = match args.next_token().as_deref() {
        None | Some(b"SYNC") => false,
        Some(b"ASYNC") => true,
        Some(_) => return Err(CommandError::syntax()),
    };
    args.finish()?;
    Ok(mode)
}

fn flush(ctx: &mut Ctx<'_>, args: &mut Args<'_>, db: Option<usize>) -> CmdResult {
    let background = flush_mode(args)?;
    let old = crate::commands::transactions::empty_data(ctx.server, db);
    // The data is already unreachable; ASYNC only moves the freeing off this client's path.
    if background {
        let keys: usize = old.iter().map(|d| d.keys.len()).sum();
        ctx.server.lazyfree.free(Box::new(old), keys as u64);
    } else {
        drop(old);
    }
    Ok(Reply::ok())
}

fn flushdb(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let db = ctx.client.db;
    flush(ctx, args, Some(db))
}

fn flushall(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let reply = flush(ctx, args, None)?;
    if super::journal::save_after_flushall(ctx) {
        // Answered once the save is written (the client waits, as for SAVE).
        return Ok(Reply::NoReply);
    }
    Ok(reply)
}

fn swapdb(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let n = ctx.server.store.databases() as i64;
    let mut index = |which: &str| match crate::util::num::parse_i64(args.next_arg()?) {
        None => Err(CommandError::msg(format!("ERR invalid {which} DB index"))),
        Some(i) if i < 0 || i >= n || i32::try_from(i).is_err() => {
            Err(CommandError::msg("ERR DB index is out of range"))
        }
        Some(i) => Ok(i as usize),
    };
    let a = index("first")?;
    let b = index("second")?;
    if a != b {
        crate::commands::transactions::touch_watched_in(ctx.server, Some(a), Some(b));
        crate::commands::transactions::touch_watched_in(ctx.server, Some(b), Some(a));
        ctx.server.store.swap_dbs(a, b);
        // Keys that clients block on may hold data now (served after this command).
        ctx.server.blocking.signal_db(a);
        ctx.server.blocking.signal_db(b);
    }
    Ok(Reply::ok())
}

fn shutdown(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let mut abort = false;
    let (mut save, mut nosave, mut now, mut force) = (false, false, false, false);
    while let Some(kw) = args.next_token() {
        match &*kw {
            b"ABORT" => abort = true,
            b"SAVE" => save = true,
            b"NOSAVE" => nosave = true,
            b"NOW" => now = true,
            b"FORCE" => force = true,
            _ => return Err(CommandError::syntax()),
        }
    }
    // Illegal combinations, as Redis.
    if (abort && (save || nosave || now || force)) || (save && nosave) {
        return Err(CommandError::syntax());
    }
    if abort {
        let wait = &ctx.server.shutdown_wait;
        if !wait.in_progress() {
            return Err(CommandError::msg("ERR No shutdown in progress."));
        }
        wait.abort.store(true, Ordering::SeqCst);
        return Ok(Reply::ok());
    }
    if ctx.server.shutdown_wait.in_progress() {
        return Err(CommandError::msg(SHUTDOWN_FAILED));
    }
    let flags = if save {
        "save"
    } else if nosave {
        "nosave"
    } else {
        ""
    };
    tracing::warn!("User requested shutdown...");
    let saves = crate::config::shutdown_saves(flags, ctx.server.config.read().get("save"));
    let waits = !now && super::replication::shutdown_waits_for_replicas(ctx.server);
    if !saves && !waits {
        ctx.server.shutdown();
        // As Redis: the connection is closed without a reply.
        ctx.client.close_after_reply = true;
        return Ok(Reply::NoReply);
    }
    // The wait for lagging replicas (unless NOW) and the save run on a thread of their own
    // (the snapshot's cut takes the exec gate this command holds) and the client waits for
    // them as for SAVE. A failed save keeps the server running unless FORCE, as Redis's
    // prepareForShutdown; so does SHUTDOWN ABORT during the replicas' wait.
    let (tx, rx) = tokio::sync::oneshot::channel();
    let server = ctx.server.clone();
    let spawned = std::thread::Builder::new()
        .name("shutdown-save".into())
        .spawn(move || {
            let reply = match prepare_for_shutdown(&server, waits, saves, force) {
                Ok(()) => {
                    server.shutdown();
                    Reply::NoReply
                }
                Err(stop) => {
                    if stop == ShutdownStop::SaveFailed {
                        tracing::warn!("Errors trying to shut down the server. Check the logs for more information.");
                    }
                    Reply::error(SHUTDOWN_FAILED)
                }
            };
            let _ = tx.send(reply);
        });
    if spawned.is_err() {
        return Err(CommandError::msg(SHUTDOWN_FAILED));
    }
    ctx.client.blocked = Some(crate::state::blocking::Blocked {
        id: ctx.client.id(),
        reply: rx,
        deadline: None,
    });
    Ok(Reply::NoReply)
}

/// SHUTDOWN's refusal when the shutdown cannot go on, as Redis words it.
const SHUTDOWN_FAILED: &str = "ERR Errors trying to SHUTDOWN. Check logs.";

/// Why a shutdown does not go on.
#[derive(Debug, PartialEq, Eq)]
pub enum ShutdownStop {
    /// SHUTDOWN ABORT during the wait for replicas.
    Aborted,
    /// The final save failed (without FORCE).
    SaveFailed,
}

/// The steps before a shutdown, as Redis's `prepareForShutdown`, for SHUTDOWN and the
/// signals alike: the wait for lagging replicas (`waits`), then the final save (`saves`),
/// whose failure stops the shutdown unless `force`. What goes wrong is logged here. Blocks
/// its thread.
pub fn prepare_for_shutdown(
    server: &Arc<Server>,
    waits: bool,
    saves: bool,
    force: bool,
) -> Result<(), ShutdownStop> {
    if waits && !super::replication::wait_replicas_before_shutdown(server) {
        tracing::warn!("Shutdown was aborted.");
        return Err(ShutdownStop::Aborted);
    }
    if !saves {
        return Ok(());
    }
    match super::journal::save_before_shutdown(server) {
        Ok(()) => Ok(()),
        Err(e) if force => {
            tracing::warn!("Error trying to save the DB ({e}). Exit anyway.");
            Ok(())
        }
        Err(e) => {
            tracing::warn!("Error trying to save the DB, can't exit: {e}");
            Err(ShutdownStop::SaveFailed)
        }
    }
}

/// Every section, in Redis's order; `INFO` alone (or `default`) shows all but those in
/// [`NOT_DEFAULT`], `all` and `everything` show all.
const INFO_SECTIONS: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "commandstats",
    "errorstats",
    "latencystats",
    "keyspace",
    "cluster",
    "documents",
];
const NOT_DEFAULT: &[&str] = &["commandstats", "latencystats"];

fn info(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let mut wanted: Vec<String> = args.rest().iter().map(|a| text(a).to_lowercase()).collect();
    if wanted.is_empty() {
        wanted.push("default".into());
    }
    if wanted.iter().any(|w| w == "all" || w == "everything") {
        wanted = INFO_SECTIONS.iter().map(|s| s.to_string()).collect();
    } else if wanted.iter().any(|w| w == "default") {
        wanted.extend(
            INFO_SECTIONS
                .iter()
                .filter(|s| !NOT_DEFAULT.contains(s))
                .map(|s| s.to_string()),
        );
    }
    let mut out = String::new();
    for section in INFO_SECTIONS
        .iter()
        .filter(|s| wanted.iter().any(|w| w == *s))
    {
        if !out.is_empty() {
            out.push_str("\r\n");
        }
        info_section(ctx, section, &mut out);
    }
    Ok(Reply::Verbatim(Bytes::from(out)))
}

fn info_section(ctx: &Ctx<'_>, section: &str, out: &mut String) {
    let s = ctx.server;
    let cfg = s.config.read();
    let uptime = s.started.elapsed().as_secs();
    let title = if section == "cpu" {
        "CPU".to_string()
    } else if section.ends_with("stats") {
        // Redis's spelling: Commandstats, Errorstats, Latencystats.
        let mut c = section.chars();
        c.next()
            .map(|f| f.to_uppercase().collect::<String>() + c.as_str())
            .unwrap_or_default()
    } else {
        let mut c = section.chars();
        c.next()
            .map(|f| f.to_uppercase().collect::<String>() + c.as_str())
            .unwrap_or_default()
    };
    let _ = write!(out, "# {title}\r\n");
    let mut kv = |k: &str, v: &dyn std::fmt::Display| {
        let _ = write!(out, "{k}:{v}\r\n");
    };
    match section {
        "server" => {
            kv("redis_version", &REDIS_COMPAT_VERSION);
            kv("server_name", &"tidecache");
            kv("tidecache_version", &VERSION);
            let mode = if s.cluster.get().is_some() {
                "cluster"
            } else {
                "standalone"
            };
            kv("redis_mode", &mode);
            kv("os", &std::env::consts::OS);
            kv("arch_bits", &(usize::BITS));
            kv("multiplexing_api", &"tokio");
            kv("process_id", &std::process::id());
            kv("run_id", &s.run_id);
            kv("tcp_port", &s.port.load(Ordering::Relaxed));
            kv("server_time_usec", &(unix_millis() * 1000));
            kv("uptime_in_seconds", &uptime);
            kv("uptime_in_days", &(uptime / 86400));
            // The frequency in force (dynamic-hz may raise it) and the one configured.
            let hz = crate::state::EFFECTIVE_HZ.load(Ordering::Relaxed);
            kv("hz", &if hz == 0 { cfg.get_u64("hz") } else { hz });
            kv("configured_hz", &cfg.get("hz"));
            kv("shards", &s.store.shard_count());
            let until = s.shutdown_wait.deadline_ms.load(Ordering::SeqCst);
            kv(
                "shutdown_in_milliseconds",
                &until.saturating_sub(crate::util::clock::now_ms() as u64),
            );
            kv(
                "executable",
                &std::env::current_exe()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default(),
            );
            kv(
                "config_file",
                &cfg.file
                    .as_ref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default(),
            );
        }
        "clients" => {
            kv("connected_clients", &s.clients.count());
            kv("maxclients", &cfg.get("maxclients"));
            kv(
                "blocked_clients",
                &(ctx.server.blocking.blocked_clients() + crate::state::pause::postponed()),
            );
            kv("tracking_clients", &s.tracking.info().0);
            let all = s.clients.all();
            kv(
                "pubsub_clients",
                &all.iter().filter(|c| c.is_pubsub()).count(),
            );
            kv(
                "watching_clients",
                &all.iter().filter(|c| c.meta.lock().watch > 0).count(),
            );
            kv("total_watched_keys", &s.watches.watched_keys());
        }
        "memory" => {
            let rss = crate::util::proc::rss_bytes();
            let used = s.used_memory();
            kv("used_memory", &used);
            kv("used_memory_human", &human(used));
            kv("used_memory_dataset", &s.store.used_bytes());
            for (k, v) in super::memory::info_fields(s) {
                if k == "used_memory_peak" {
                    kv(k, &v);
                    kv("used_memory_peak_human", &human(v.parse().unwrap_or(0)));
                } else {
                    kv(k, &v);
                }
            }
            let (scripts, script_bytes) = crate::commands::scripting::cache_stats();
            let lua = crate::commands::scripting::lua_memory();
            let (_, functions, function_bytes, function_vm) =
                crate::commands::scripting::function_stats();
            kv("used_memory_lua", &lua);
            kv("used_memory_vm_eval", &lua);
            kv("used_memory_lua_human", &human(lua));
            kv("used_memory_scripts_eval", &script_bytes);
            kv("number_of_cached_scripts", &scripts);
            kv("number_of_functions", &functions);
            kv("used_memory_vm_functions", &function_vm);
            kv("used_memory_vm_total", &(lua + function_vm));
            kv("used_memory_vm_total_human", &human(lua + function_vm));
            kv("used_memory_functions", &function_bytes);
            kv("used_memory_scripts", &(script_bytes + function_bytes));
            kv(
                "used_memory_scripts_human",
                &human(script_bytes + function_bytes),
            );
            kv("used_memory_rss", &rss);
            kv("used_memory_rss_human", &human(rss));
            kv("maxmemory", &cfg.get("maxmemory"));
            kv("maxmemory_human", &human(cfg.get_u64("maxmemory")));
            kv("maxmemory_policy", &cfg.get("maxmemory-policy"));
            // Redis leaves replication and AOF buffers out of the eviction measure; here
            // eviction measures what INFO's used_memory does.
            kv("mem_not_counted_for_evict", &0);
            if let Some(c) = s.cluster.get() {
                // Redis 8.4's atomic slot migration buffers.
                let m = &c.migrations;
                kv(
                    "mem_cluster_slot_migration_output_buffer",
                    &m.output_buffer.load(Ordering::Relaxed),
                );
                kv(
                    "mem_cluster_slot_migration_input_buffer",
                    &m.input_buffer.load(Ordering::Relaxed),
                );
                kv(
                    "mem_cluster_slot_migration_input_buffer_peak",
                    &m.input_buffer_peak.load(Ordering::Relaxed),
                );
            }
            kv("mem_allocator", &"mimalloc");
            kv(
                "lazyfree_pending_objects",
                &s.stats.lazyfree_pending.load(Ordering::Relaxed),
            );
        }
        "persistence" => {
            for (k, v) in super::journal::persistence_info(s) {
                kv(k, &v);
            }
        }
        "stats" => {
            let st = &s.stats;
            let g = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
            kv("total_connections_received", &g(&st.connections_received));
            kv(
                "total_commands_processed",
                &crate::state::cmdstats::total_calls(),
            );
            kv("total_net_input_bytes", &g(&st.net_input_bytes));
            kv("total_net_output_bytes", &g(&st.net_output_bytes));
            kv("rejected_connections", &g(&st.rejected_connections));
            let r = crate::state::replication::repl();
            kv("sync_full", &g(&r.sync_full));
            kv("sync_partial_ok", &g(&r.sync_partial_ok));
            kv("sync_partial_err", &g(&r.sync_partial_err));
            kv(
                "total_error_replies",
                &crate::state::cmdstats::total_error_replies(),
            );
            kv(
                "dump_payload_sanitizations",
                &g(&st.dump_payload_sanitizations),
            );
            let k = keyspace_counters(s);
            kv("expired_keys", &k.expired);
            kv("evicted_keys", &k.evicted);
            kv("keyspace_hits", &k.hits);
            kv("keyspace_misses", &k.misses);
            kv("lazyfreed_objects", &g(&st.lazyfreed));
            let (_, tracked_keys, tracked_items, prefixes) = s.tracking.info();
            kv("tracking_total_keys", &tracked_keys);
            kv("tracking_total_items", &tracked_items);
            kv("tracking_total_prefixes", &prefixes);
            kv("pubsub_channels", &s.pubsub.channel_count());
            kv("pubsub_patterns", &s.pubsub.numpat());
            kv("pubsubshard_channels", &s.pubsub.shard_channel_count());
            let (fork_us, forks) = super::journal::fork_stats();
            kv("latest_fork_usec", &fork_us);
            kv("total_forks", &forks);
            kv("migrate_cached_sockets", &super::migrate::cached_sockets());
            kv(
                "client_query_buffer_limit_disconnections",
                &g(&st.qbuf_limit_disconnections),
            );
            kv(
                "client_output_buffer_limit_disconnections",
                &s.pubsub.limit_disconnections.load(Ordering::Relaxed),
            );
        }
        "replication" => {
            let backlog = cfg.get_u64("repl-backlog-size");
            let priority = cfg.get_u64("replica-priority");
            let announced = cfg.get_bool("replica-announced");
            for (k, v) in crate::state::replication::info(backlog, priority, announced) {
                kv(&k, &v);
            }
        }
        "commandstats" => crate::commands::stats::info_commandstats(out),
        "errorstats" => crate::commands::stats::info_errorstats(out),
        "latencystats" => crate::commands::stats::info_latencystats(
            out,
            cfg.get("latency-tracking-info-percentiles"),
        ),
        "cpu" => {
            let t = crate::util::proc::cpu_times();
            for (name, v) in [
                ("used_cpu_sys", t.sys),
                ("used_cpu_user", t.user),
                ("used_cpu_sys_children", t.children_sys),
                ("used_cpu_user_children", t.children_user),
                ("used_cpu_sys_main_thread", t.thread_sys),
                ("used_cpu_user_main_thread", t.thread_user),
            ] {
                kv(name, &format!("{v:.6}"));
            }
        }
        "cluster" => {
            kv("cluster_enabled", &(s.cluster.get().is_some() as u8));
        }
        "keyspace" => {
            for (db, (keys, expires, avg_ttl)) in s.store.keyspace_info().into_iter().enumerate() {
                if keys > 0 {
                    kv(
                        &format!("db{db}"),
                        &format!("keys={keys},expires={expires},avg_ttl={avg_ttl}"),
                    );
                }
            }
        }
        "documents" => {
            let t = s.store.document_totals();
            kv("collections", &t.collections);
            kv("documents", &t.documents);
            kv("document_bytes", &t.document_bytes);
            kv("index_bytes", &t.index_bytes);
            kv("documents_memory", &s.store.document_bytes());
            // The monitors' own counters: a pass is one every shard's monitor has made, and
            // deletions stay counted after their collection is gone.
            kv("ttl_passes", &s.ttl.passes());
            kv("ttl_deleted_documents", &s.ttl.deleted_documents());
        }
        _ => {}
    }
    let _ = SETTINGS;
}

/// INFO stats' key-space counters, each the server's own count plus every shard's (the
/// admin port's `/metrics` reports the same numbers).
#[derive(Debug, Default, Clone, Copy)]
pub struct KeyspaceCounters {
    pub hits: u64,
    pub misses: u64,
    pub expired: u64,
    pub evicted: u64,
}

pub fn keyspace_counters(s: &Server) -> KeyspaceCounters {
    let mut k = KeyspaceCounters {
        hits: s.stats.keyspace_hits.load(Ordering::Relaxed),
        misses: s.stats.keyspace_misses.load(Ordering::Relaxed),
        ..Default::default()
    };
    for c in s.store.counters() {
        k.hits += c.hits.load(Ordering::Relaxed);
        k.misses += c.misses.load(Ordering::Relaxed);
        k.expired += c.expired.load(Ordering::Relaxed);
        k.evicted += c.evicted.load(Ordering::Relaxed);
    }
    k
}

fn human(bytes: u64) -> String {
    const UNITS: &[(&str, f64)] = &[("G", 1073741824.0), ("M", 1048576.0), ("K", 1024.0)];
    for (u, size) in UNITS {
        if bytes as f64 >= *size {
            return format!("{:.2}{u}", bytes as f64 / size);
        }
    }
    format!("{bytes}B")
}

/// MONITOR: from now on every command any client runs is pushed to this client as a status
/// line (see `server::pubsub::PubSub::feed_monitors`). A second MONITOR is ignored, as in
/// Redis.
fn monitor(ctx: &mut Ctx<'_>, _args: &mut Args<'_>) -> CmdResult {
    if ctx.client.in_exec {
        return Err(CommandError::msg(
            "ERR MONITOR isn't allowed for DENY BLOCKING client",
        ));
    }
    if ctx
        .client
        .handle
        .monitor
        .swap(true, std::sync::atomic::Ordering::Relaxed)
    {
        return Ok(Reply::NoReply);
    }
    ctx.server.pubsub.start_monitor(&ctx.client.handle);
    Ok(Reply::ok())
}

/// WAIT numreplicas timeout: the number of replicas that acknowledged the replication
/// stream up to its offset now (which covers this client's writes, already in the stream
/// when it got their replies), once that is `numreplicas`, or at the timeout (0: none).
/// Inside MULTI or a script it answers at once (Redis's `CLIENT_DENY_BLOCKING`).
fn wait(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    use crate::state::replication;
    let numreplicas = args.next_i64()?;
    let timeout = args.next_arg()?;
    let ms = crate::util::num::parse_i64(timeout)
        .ok_or_else(|| CommandError::msg("ERR timeout is not an integer or out of range"))?;
    if ms < 0 {
        return Err(CommandError::msg("ERR timeout is negative"));
    }
    if replication::is_replica() {
        return Err(CommandError::msg(
            "ERR WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a replica is configured to be writable (which is not the default) writes to replicas are just local and are not propagated.",
        ));
    }
    let target = replication::offset();
    let now = replication::acked(target) as i64;
    if numreplicas <= 0 || now >= numreplicas || ctx.client.multi.is_some() || ctx.client.in_exec {
        return Ok(Reply::Int(now));
    }
    let Ok(rt) = tokio::runtime::Handle::try_current() else {
        return Ok(Reply::Int(now));
    };
    // Replicas acknowledge once a second; asking now makes them answer at once.
    crate::store::journal::replicate_only(None, &[b"REPLCONF", b"GETACK", b"*"]);
    let deadline = (ms > 0)
        .then(|| std::time::Instant::now() + std::time::Duration::from_millis(ms.unsigned_abs()));
    let (tx, rx) = tokio::sync::oneshot::channel();
    // A task holds the sender: it looks again at each acknowledgement until enough arrived
    // or the deadline, or ends when the client goes away (the receiver is dropped).
    rt.spawn(async move {
        let mut tx = tx;
        let wait = replication::wait_acks(deadline, || {
            let n = replication::acked(target) as i64;
            (n >= numreplicas, n)
        });
        tokio::select! {
            n = wait => { let _ = tx.send(Reply::Int(n)); }
            _ = tx.closed() => {}
        }
    });
    ctx.client.blocked = Some(crate::state::blocking::Blocked {
        id: ctx.client.id(),
        reply: rx,
        deadline: None,
    });
    Ok(Reply::NoReply)
}

/// ROLE: `master`, its offset and its replicas; or `slave`, its master, the link's state and
/// the offset applied.
fn role(_ctx: &mut Ctx<'_>, _args: &mut Args<'_>) -> CmdResult {
    use crate::state::replication::{self, repl};
    use std::sync::atomic::Ordering::Acquire;
    if let Some((host, port)) = repl().master.lock().clone() {
        let state = if repl().link_up.get() {
            "connected"
        } else if repl().sync_in_progress.get() {
            "sync"
        } else {
            match repl().link_phase.load(Acquire) {
                replication::LINK_CONNECTING => "connecting",
                replication::LINK_HANDSHAKE => "handshake",
                _ => "connect",
            }
        };
        let applied = repl().applied.load(Acquire);
        return Ok(Reply::Array(vec![
            Reply::bulk_str("slave"),
            Reply::bulk(host.into_bytes()),
            Reply::Int(port as i64),
            Reply::bulk_str(state),
            Reply::Int(if state == "connected" {
                applied as i64
            } else {
                -1
            }),
        ]));
    }
    let replicas = repl()
        .replicas
        .lock()
        .iter()
        .map(|r| {
            Reply::Array(vec![
                Reply::bulk(r.ip.clone().into_bytes()),
                Reply::bulk(r.port.to_string().into_bytes()),
                Reply::bulk(r.ack.to_string().into_bytes()),
            ])
        })
        .collect();
    Ok(Reply::Array(vec![
        Reply::bulk_str("master"),
        Reply::Int(replication::offset() as i64),
        Reply::Array(replicas),
    ]))
}

/// LOLWUT [VERSION n]: Redis 7's output for its own version and for every version but 5
/// and 6, which draw computer art (not drawn here: those answer the same version line).
fn lolwut(_ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    if args.len() >= 2
        && args
            .peek()
            .is_some_and(|a| crate::commands::is(a, "VERSION"))
    {
        args.next_arg()?;
        args.next_i64()?;
    }
    Ok(Reply::Verbatim(Bytes::from(format!(
        "Redis ver. {REDIS_COMPAT_VERSION}\n"
    ))))
}

/// MEMORY PURGE: gives free memory back to the OS (see `util::alloc::collect` for what
/// mimalloc can reach from this thread).
fn memory_purge(_ctx: &mut Ctx<'_>, _args: &mut Args<'_>) -> CmdResult {
    crate::util::alloc::collect();
    Ok(Reply::ok())
}
