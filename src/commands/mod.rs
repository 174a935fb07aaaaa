//! Commands: the one command table and its dispatcher.
//!
//! Each family file (`connection.rs`, `server.rs`, `strings.rs`, ...) exports a static slice of
//! [`CommandSpec`]s, each entry carrying its own documentation next to its handler. The table
//! built from them here drives dispatch, arity and unknown-command errors, authentication,
//! `COMMAND` and key extraction.

pub mod acl;
pub mod args;
pub mod bitmaps;
pub mod blocking;
pub mod cluster;
pub mod command_info;
pub mod connection;
pub mod debug;
pub mod documents;
pub mod dump;
pub mod geo;
pub mod hashes;
pub mod hyperloglog;
pub mod journal;
pub mod keys;
pub mod keyspace_admin;
pub mod lists;
pub mod memory;
pub mod migrate;
pub mod pubsub;
pub mod replication;
pub mod scripting;
pub mod server;
pub mod sets;
pub mod sort;
pub mod spec;
pub mod stats;
pub mod streams;
pub mod strings;
pub mod tracking;
pub mod transactions;
pub mod warm;
pub mod zsets;

use crate::protocol::Reply;
use crate::state::client::ClientState;
use crate::state::Server;
use bytes::Bytes;
use spec::{flag, CommandSpec};
use std::cell::Cell;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};

/// What a handler gets: the shared server and this client's own state.
pub struct Ctx<'a> {
    pub server: &'a Arc<Server>,
    pub client: &'a mut ClientState,
}

/// Every family, in the order `COMMAND` lists them (a slice, so adding a family is one row).
const FAMILIES: &[&[CommandSpec]] = &[
    connection::COMMANDS,
    server::COMMANDS,
    acl::COMMANDS,
    keys::COMMANDS,
    dump::COMMANDS,
    migrate::COMMANDS,
    sort::COMMANDS,
    strings::COMMANDS,
    hashes::COMMANDS,
    lists::COMMANDS,
    sets::COMMANDS,
    zsets::COMMANDS,
    streams::COMMANDS,
    geo::COMMANDS,
    bitmaps::COMMANDS,
    hyperloglog::COMMANDS,
    transactions::COMMANDS,
    scripting::COMMANDS,
    pubsub::COMMANDS,
    documents::COMMANDS,
    journal::COMMANDS,
    debug::COMMANDS,
    stats::COMMANDS,
    cluster::COMMANDS,
    replication::COMMANDS,
];

fn families() -> &'static [&'static [CommandSpec]] {
    FAMILIES
}

pub struct Table {
    /// Keyed by the name's bytes, so a lookup needs no UTF-8 check; both the lower-case and
    /// the upper-case spelling, so the names clients send (`GET`, `get`) are found without
    /// folding their case first.
    by_name: hashbrown::HashMap<Box<[u8]>, &'static CommandSpec>,
    all: Vec<&'static CommandSpec>,
    /// Commands and subcommands in the order of their statistics rows
    /// (`state::cmdstats`), and each one's row by its address.
    stat_rows: Vec<&'static CommandSpec>,
    stat_row_of: hashbrown::HashMap<usize, usize>,
}

/// `rename-command` (old, new) pairs, lower-cased, set at start before the table is built.
static RENAMES: OnceLock<Vec<(String, String)>> = OnceLock::new();

/// Renames commands as Redis's `rename-command` (an empty new name removes the command);
/// called at start, before any command runs. The error is Redis's.
pub fn set_renames(renames: &[(String, String)]) -> Result<(), String> {
    let exists = |n: &str| families().iter().any(|f| f.iter().any(|s| s.name == n));
    let mut names = Vec::new();
    for (from, to) in renames {
        let (from, to) = (from.to_ascii_lowercase(), to.to_ascii_lowercase());
        if !exists(&from) || names.iter().any(|(f, _): &(String, String)| *f == from) {
            return Err(format!(
                "'rename-command {from} {to}' No such command in rename-command"
            ));
        }
        if !to.is_empty() && (exists(&to) || names.iter().any(|(_, t)| *t == to)) {
            return Err(format!(
                "'rename-command {from} {to}' Target command name already exists"
            ));
        }
        names.push((from, to));
    }
    RENAMES
        .set(names)
        .map_err(|_| "rename-command applied twice".to_string())
}

impl Table {
    fn build() -> Table {
        let mut by_name = hashbrown::HashMap::new();
        let mut all = Vec::new();
        for fam in families() {
            for spec in *fam {
                let dup = by_name.insert(spec.name.as_bytes().into(), spec);
                debug_assert!(dup.is_none(), "command {} registered twice", spec.name);
                by_name.insert(spec.name.to_ascii_uppercase().into_bytes().into(), spec);
                all.push(spec);
            }
        }
        for (from, to) in RENAMES.get().into_iter().flatten() {
            let spec = by_name.remove(from.as_bytes());
            by_name.remove(from.to_ascii_uppercase().as_bytes());
            if let (Some(spec), false) = (spec, to.is_empty()) {
                by_name.insert(to.as_bytes().into(), spec);
                by_name.insert(to.to_ascii_uppercase().into_bytes().into(), spec);
            }
        }
        let stat_rows: Vec<&'static CommandSpec> = all
            .iter()
            .flat_map(|s| std::iter::once(*s).chain(s.subcommands.iter()))
            .collect();
        let stat_row_of = stat_rows
            .iter()
            .enumerate()
            .map(|(i, s)| (*s as *const CommandSpec as usize, i))
            .collect();
        crate::state::cmdstats::init(stat_rows.len());
        Table {
            by_name,
            all,
            stat_rows,
            stat_row_of,
        }
    }

    /// Every command and subcommand, in statistics-row order.
    pub fn stat_rows(&self) -> &[&'static CommandSpec] {
        &self.stat_rows
    }

    /// Looks a command up by name, case-insensitively, without allocating.
    pub fn get(&self, name: &[u8]) -> Option<&'static CommandSpec> {
        if let Some(spec) = self.by_name.get(name) {
            return Some(spec);
        }
        let mut buf = [0u8; 32];
        if name.len() > buf.len() {
            return None;
        }
        for (d, s) in buf.iter_mut().zip(name) {
            *d = s.to_ascii_lowercase();
        }
        self.by_name.get(&buf[..name.len()]).copied()
    }

    pub fn all(&self) -> &[&'static CommandSpec] {
        &self.all
    }
}

pub fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(Table::build)
}

/// The statistics row of a command or subcommand of the table.
#[inline]
pub fn stat_index(spec: &'static CommandSpec) -> usize {
    thread_local! {
        /// The last entry counted on this thread and its row (as `LAST_NAME`: a pipeline
        /// repeats one command, and the rows never move).
        static LAST_ROW: Cell<(usize, usize)> = const { Cell::new((0, usize::MAX)) };
    }
    let addr = spec as *const CommandSpec as usize;
    let (last, row) = LAST_ROW.get();
    if last == addr {
        return row;
    }
    let row = table()
        .stat_row_of
        .get(&addr)
        .copied()
        .unwrap_or(usize::MAX);
    LAST_ROW.set((addr, row));
    row
}

/// Finds a container's subcommand (`CLIENT ID` → `client|id`).
pub fn subcommand(container: &'static CommandSpec, name: &[u8]) -> Option<&'static CommandSpec> {
    container.subcommands.iter().find(|s| {
        let short = s.name.rsplit('|').next().unwrap_or(s.name);
        short.as_bytes().eq_ignore_ascii_case(name)
    })
}

/// `ERR unknown command 'x', with args beginning with: 'a' 'b' ` exactly as Redis 7 words it.
fn unknown_command(args: &[Bytes]) -> Reply {
    let mut shown = String::new();
    for a in &args[1..] {
        if shown.len() >= 128 {
            break;
        }
        let room = 128 - shown.len();
        let text = String::from_utf8_lossy(a);
        let cut: String = text.chars().take(room).collect();
        shown.push_str(&format!("'{cut}' "));
    }
    let name = String::from_utf8_lossy(&args[0]);
    let name: String = name.chars().take(128).collect();
    Reply::error(format!(
        "ERR unknown command '{name}', with args beginning with: {shown}"
    ))
}

pub fn wrong_arity(name: &str) -> Reply {
    Reply::error(format!(
        "ERR wrong number of arguments for '{name}' command"
    ))
}

pub fn wrongtype() -> Reply {
    Reply::error("WRONGTYPE Operation against a key holding the wrong kind of value")
}

/// The error for an unknown subcommand: `ERR unknown subcommand 'x'. Try CLIENT HELP.`
pub fn unknown_subcommand(container: &str, sub: &[u8]) -> Reply {
    let sub: String = String::from_utf8_lossy(sub).chars().take(128).collect();
    Reply::error(format!(
        "ERR unknown subcommand '{sub}'. Try {} HELP.",
        container.to_uppercase()
    ))
}

/// Resolves the table entry that will run `args`, or the error Redis would give.
pub fn resolve(args: &[Bytes]) -> Result<&'static CommandSpec, Reply> {
    lookup(args).map_err(|(_, e)| e)
}

thread_local! {
    /// The last name this thread looked up, as sent (up to 16 bytes, packed in two words
    /// with its length, so `DOC.FINDONE` or `ZRANGEBYSCORE` fit), and its entry: a pipeline
    /// repeats one command, and one compare replaces hashing the name and probing the table
    /// (about 100 instructions a request). The table never changes, so the entry cannot go
    /// stale.
    static LAST_NAME: Cell<Option<(u128, usize, &'static CommandSpec)>> = const { Cell::new(None) };
}

/// [`Table::get`] through the thread's one-entry memo of the last name.
#[inline]
pub(crate) fn find_command(name: &[u8]) -> Option<&'static CommandSpec> {
    if name.len() > 16 {
        return table().get(name);
    }
    let mut word = [0u8; 16];
    word[..name.len()].copy_from_slice(name);
    let word = u128::from_le_bytes(word);
    if let Some((w, len, spec)) = LAST_NAME.get() {
        if w == word && len == name.len() {
            return Some(spec);
        }
    }
    let spec = table().get(name)?;
    LAST_NAME.set(Some((word, name.len(), spec)));
    Some(spec)
}

/// A refused request: the entry found when only its arity is wrong, and the error.
type Refusal = (Option<&'static CommandSpec>, Reply);

/// As [`resolve`], keeping the entry of a wrong-arity request (its rejected calls count).
fn lookup(args: &[Bytes]) -> Result<&'static CommandSpec, Refusal> {
    let Some(spec) = find_command(&args[0]) else {
        return Err((None, unknown_command(args)));
    };
    if !spec.subcommands.is_empty() && args.len() >= 2 {
        return match subcommand(spec, &args[1]) {
            Some(sub) if sub.arity_ok(args.len()) => Ok(sub),
            Some(sub) => Err((Some(sub), wrong_arity(sub.name))),
            None => Err((None, unknown_subcommand(spec.name, &args[1]))),
        };
    }
    if !spec.arity_ok(args.len()) {
        return Err((Some(spec), wrong_arity(spec.name)));
    }
    Ok(spec)
}

/// A refusal before the command runs: counted (rejected call, error reply), and inside
/// MULTI it marks the transaction.
#[cold]
fn refuse(ctx: &mut Ctx<'_>, spec: Option<&'static CommandSpec>, error: Reply) -> Reply {
    stats::rejected(spec, &error);
    transactions::refuse(ctx, error)
}

/// A write refused for the server's state (OOM, MISCONF, NOREPLICAS, READONLY): EXEC of a
/// transaction whose queued commands it covers is discarded with EXECABORT naming the
/// reason, as Redis's processCommand does; any other command is a [`refuse`].
#[cold]
fn refuse_write(ctx: &mut Ctx<'_>, spec: &'static CommandSpec, in_multi: bool, why: &str) -> Reply {
    if spec.name == "exec" && in_multi {
        transactions::reset_state(ctx);
        let e = Reply::error(format!("EXECABORT Transaction discarded because of: {why}"));
        stats::rejected(Some(spec), &e);
        return e;
    }
    refuse(ctx, Some(spec), Reply::error(why))
}

/// A script past `busy-reply-threshold` holds the gate. The master's stream is not refused:
/// its link waits for the script and sends the command again (`server::replication`'s
/// `Applied::Busy`), so nothing is counted or marked here (a MULTI block stays whole).
#[cold]
fn busy(ctx: &mut Ctx<'_>, spec: &CommandSpec) -> Reply {
    if crate::state::replication::applying() {
        return Reply::error(ctx.server.exec_gate.busy_error());
    }
    scripting::refuse_busy(ctx, spec)
}

/// Runs one request. `args` is never empty.
///
/// The order of checks is Redis 7's `processCommand`: unknown command and arity, NOAUTH,
/// `NO_MULTI` inside MULTI, the RESP2 subscribed-mode whitelist, then queueing inside MULTI.
/// Every refusal inside MULTI marks the transaction so EXEC answers EXECABORT.
pub fn dispatch(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    // Client-side caching: this client is the current one (one atomic load while nobody
    // tracks).
    let server = ctx.server;
    let tracked = server.tracking.command(ctx.client.id());
    let reply = if !crate::store::journal::taking() {
        dispatch_command(ctx, args)
    } else {
        // The journal's context of this command (store/journal: how a write reaches it).
        let record = crate::store::journal::Command::begin();
        let reply = dispatch_command(ctx, args);
        journal::ended(ctx, record.end());
        reply
    };
    match tracked {
        None => reply,
        Some(scope) => tracking::finish(ctx, args, reply, scope),
    }
}

fn dispatch_command(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let spec = match lookup(args) {
        Ok(s) => s,
        Err((spec, e)) => return refuse(ctx, spec, e),
    };
    if !ctx.client.authenticated
        && !spec.has(flag::NO_AUTH)
        && ctx.server.auth_required.load(Ordering::Relaxed)
    {
        return refuse(
            ctx,
            Some(spec),
            Reply::error("NOAUTH Authentication required."),
        );
    }
    // The data set is being loaded: only commands flagged `loading` (Redis's processCommand).
    if let Some(e) = journal::refused_while_loading(spec) {
        return refuse(ctx, Some(spec), e);
    }
    // A script past busy-reply-threshold: only ALLOW_BUSY commands (Redis's processCommand).
    if ctx.server.exec_gate.busy() && !spec.has(flag::ALLOW_BUSY) {
        return busy(ctx, spec);
    }
    let in_multi = ctx.client.multi.is_some();
    if in_multi && spec.has(flag::NO_MULTI) {
        return refuse(
            ctx,
            Some(spec),
            Reply::error("ERR Command not allowed inside a transaction"),
        );
    }
    // ACL: while the connection's user may run everything, one compare (commands/acl.rs).
    if ctx.client.acl_fast != ctx.server.acl.epoch() {
        if let Err(e) = acl::check(ctx, spec, args) {
            return refuse(ctx, Some(spec), e);
        }
    }
    // Cluster mode: a command whose keys are served elsewhere is redirected (Redis's
    // processCommand, right after the ACL check); the master's stream is never redirected.
    if ctx.server.cluster.get().is_some()
        && !journal::is_loader()
        && !crate::state::replication::applying()
    {
        if let Some(e) = cluster::redirect(ctx, spec, args) {
            if spec.name == "exec" {
                transactions::reset_state(ctx);
                stats::rejected(Some(spec), &e);
                return e;
            }
            return refuse(ctx, Some(spec), e);
        }
    }
    // maxmemory: before every command, evict per the policy (as Redis's processCommand, so
    // a read after the limit was lowered finds keys already gone, and a tracking client
    // hears of them first); what may grow memory (DENYOOM) is refused if that cannot get
    // under the limit. EXEC is checked with the
    // flags of everything it queued, as Redis does.
    let flags = match (&ctx.client.multi, spec.name) {
        (Some(m), "exec") => m.queued.iter().fold(0, |f, (flags, _)| f | flags),
        // A script queued in MULTI counts with its shebang's flags (Redis's getCommandFlags).
        (Some(_), _) => scripting::command_flags(spec, args),
        _ => spec.flags,
    };
    // (Not while the journal is replayed: Redis loads whatever it holds.)
    if crate::store::eviction::maxmemory() > 0
        && !crate::store::journal::loading()
        && !crate::store::eviction::make_room(&ctx.server.store)
        && flags & flag::DENYOOM != 0
    {
        const OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";
        return refuse_write(ctx, spec, in_multi, OOM);
    }
    // A failed background save with stop-writes-on-bgsave-error: writes and PING are
    // refused until a save succeeds (Redis's processCommand, which names PING too).
    if (flags & flag::WRITE != 0 || spec.name == "ping")
        && crate::state::MISCONF.load(Ordering::Relaxed)
    {
        const MISCONF: &str = "MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk. Commands that may modify the data set are disabled, because this instance is configured to report errors during writes if RDB snapshotting fails (stop-writes-on-bgsave-error option). Please check the Redis logs for details about the RDB error.";
        return refuse_write(ctx, spec, in_multi, MISCONF);
    }
    // min-replicas-to-write: with no replicas, writes are refused (Redis's processCommand).
    if flags & flag::WRITE != 0 && crate::state::NO_GOOD_REPLICAS.load(Ordering::Relaxed) {
        const NOREPLICAS: &str = "NOREPLICAS Not enough good replicas to write.";
        return refuse_write(ctx, spec, in_multi, NOREPLICAS);
    }
    // A read-only replica takes writes only from its master (Redis's processCommand).
    if flags & flag::WRITE != 0
        && crate::state::replication::refuses_writes()
        && writes_on_replica(spec, args)
        && !journal::is_loader()
    {
        let readonly = crate::state::replication::READONLY_ERR;
        return refuse_write(ctx, spec, in_multi, readonly);
    }
    if !ctx.client.resp3 && ctx.client.subscriptions() > 0 && !pubsub::allowed_when_subscribed(spec)
    {
        return refuse(
            ctx,
            Some(spec),
            Reply::error(format!(
                "ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
                spec.name
            )),
        );
    }
    // A replica cut off from its master with replica-serve-stale-data no: only `stale`
    // commands (EXEC: only if everything it queued is).
    if crate::state::replication::refuses_stale() && !journal::is_loader() {
        let stale = match (&ctx.client.multi, spec.name) {
            (Some(m), "exec") => m.queued.iter().all(|(f, _)| f & flag::STALE != 0),
            _ => flags & flag::STALE != 0,
        };
        if !stale {
            let masterdown = crate::state::replication::MASTERDOWN_ERR;
            return refuse_write(ctx, spec, in_multi, masterdown);
        }
    }
    if in_multi && !transactions::runs_inside_multi(spec) {
        return transactions::queue(ctx, args, flags);
    }
    if !std::ptr::eq(ctx.client.last_cmd, spec.name) {
        ctx.client.last_cmd = spec.name;
        ctx.client.with_meta(|m| m.last_cmd = spec.name);
    }
    if spec.name == "exec" {
        // EXEC takes the gate exclusively itself; MONITOR shows it after its commands.
        let begun = stats::start();
        crate::store::journal::set_atomic();
        let reply = transactions::exec(ctx);
        stats::finish(ctx.client, spec, args, begun, &reply);
        if ctx.server.pubsub.monitoring() {
            feed_monitors(ctx, spec, args);
        }
        // Clients blocked on keys the transaction filled are served after it, as a whole.
        ctx.server
            .blocking
            .serve_after_exclusive(ctx.server, ctx.client.id());
        return reply;
    }
    // On the multi-thread runtime a script runs here, holding the gate exclusively itself.
    if scripting::runs_inline(spec) {
        return scripting::run_inline(ctx, spec, args);
    }
    // A script holds the gate exclusively (on this thread or the script thread); past the
    // threshold, waiting for it ends in BUSY, and the ALLOW_BUSY commands run without it.
    let _shared = match ctx.server.exec_gate.shared_unless_busy(ctx.client.id()) {
        Some(g) => Some(g),
        None if spec.has(flag::ALLOW_BUSY) => None,
        None => return busy(ctx, spec),
    };
    let reply = execute(ctx, spec, args);
    // While a script runs (an ALLOW_BUSY command without the gate) this serves nobody: a
    // client blocked on a key the script filled is served at the script's end.
    ctx.server.blocking.serve_ready(ctx.server);
    reply
}

/// Whether a WRITE command changes data here: `DOC.FIND`/`DOC.FINDONE` (flagged write for
/// their TOUCH, in the `read` category) read unless they TOUCH, so a read-only replica
/// serves them.
fn writes_on_replica(spec: &CommandSpec, args: &[Bytes]) -> bool {
    if spec.has(flag::COLLECTION) && spec.acl & spec::acl::READ != 0 {
        return args.iter().skip(2).any(|a| is(a, "TOUCH"));
    }
    true
}

/// Runs a resolved command (no checks, no gate) and feeds it to MONITOR clients.
#[inline]
pub fn execute(ctx: &mut Ctx<'_>, spec: &'static CommandSpec, args: &[Bytes]) -> Reply {
    let journaled = crate::store::journal::taking();
    if journaled {
        if let Some(refusal) = journal::refused(spec, args) {
            return refusal;
        }
        crate::store::journal::enter(ctx.client.db);
    }
    let begun = stats::start();
    let server = ctx.server;
    let tracked = tracking::executing(server, ctx.client, spec, args);
    // CLIENT NO-TOUCH: the command's reads leave access clocks, except TOUCH's (Redis 7.2).
    let no_touch = ctx.client.no_touch && spec.name != "touch";
    if no_touch {
        crate::store::eviction::set_no_touch(true);
    }
    let reply = match (spec.handler)(ctx, &mut args::Args::new(args, spec.first_arg)) {
        Ok(r) => r,
        Err(e) => e.into_reply(spec.name),
    };
    if no_touch {
        crate::store::eviction::set_no_touch(false);
    }
    if tracked.is_some() {
        tracking::executed(server, ctx.client, spec, args, begun.0 > 1);
    }
    drop(tracked);
    stats::finish(ctx.client, spec, args, begun, &reply);
    if journaled {
        journal::left(spec, args, &reply);
    }
    if ctx.server.pubsub.monitoring() && !spec.has(flag::SKIP_MONITOR | flag::ADMIN) {
        feed_monitors(ctx, spec, args);
    }
    reply
}

#[cold]
fn feed_monitors(ctx: &Ctx<'_>, spec: &CommandSpec, args: &[Bytes]) {
    // A command a script runs is shown as Redis shows it: from `lua`, not the caller.
    let from = if scripting::in_script() {
        "lua".to_string()
    } else if ctx.client.handle.is_unix() {
        // Redis's form for a Unix-socket client.
        format!("unix:{}", ctx.server.config.read().get("unixsocket"))
    } else {
        ctx.client.handle.addr.to_string()
    };
    // Passwords are not shown (Redis redacts them): for a REDACTED command, every argument
    // after an `AUTH` or `AUTH2` word (AUTH's own name included) until a `SETNAME` word (HELLO's).
    let redacted: Vec<Bytes>;
    let shown = if spec.has(flag::REDACTED) {
        let mut hide = false;
        redacted = args
            .iter()
            .map(|a| {
                if is(a, "SETNAME") && !is(&args[0], "AUTH") {
                    hide = false;
                }
                let out = if hide {
                    Bytes::from_static(b"(redacted)")
                } else {
                    a.clone()
                };
                // MIGRATE's AUTH2 hides its username too.
                if is(a, "AUTH") || is(a, "AUTH2") {
                    hide = true;
                }
                out
            })
            .collect();
        &redacted[..]
    } else {
        args
    };
    ctx.server.pubsub.feed_monitors(ctx.client.db, &from, shown);
}

/// The key arguments of a request, per its table entry (`COMMAND GETKEYS`, shard routing).
pub fn keys_of<'a>(spec: &CommandSpec, args: &'a [Bytes]) -> Vec<&'a Bytes> {
    spec.key_positions(args)
        .into_iter()
        .map(|i| &args[i])
        .collect()
}

/// A `HELP` subcommand reply: the lines as simple strings, as Redis's `addReplyHelp`.
pub fn help_reply(container: &str, lines: &[&str]) -> Reply {
    let mut out = vec![Reply::Status(format!(
        "{} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        container.to_uppercase()
    ))];
    out.extend(lines.iter().map(|l| Reply::Status(l.to_string())));
    out.push(Reply::Status("HELP".into()));
    out.push(Reply::Status("    Prints this help.".into()));
    Reply::Array(out)
}

/// Reads an argument as UTF-8 text (lossy) for error messages and names.
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Case-insensitive comparison of an argument with a keyword.
pub fn is(arg: &[u8], keyword: &str) -> bool {
    arg.eq_ignore_ascii_case(keyword.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every row of the table is well formed: its argument notation parses, its name is
    /// lower case and unique, a subcommand is named after its container, and only flags the
    /// table defines are set.
    #[test]
    fn every_row_is_well_formed() {
        let mut seen = hashbrown::HashSet::new();
        let known = flag::NAMES.iter().fold(0, |f, (b, _)| f | b)
            | flag::TX_CONTROL
            | flag::SUBSCRIBED
            | flag::REDACTED
            | flag::COLLECTION
            | flag::JOURNAL_SELF;
        let mut check = |s: &CommandSpec, container: Option<&str>| {
            assert!(seen.insert(s.name), "{} twice", s.name);
            assert_eq!(s.name, s.name.to_lowercase());
            if let Err(e) = spec::parse_args(s.args) {
                panic!("{}: bad argument notation: {e}", s.name);
            }
            assert_eq!(s.flags & !known, 0, "{}: unknown flag bits", s.name);
            // The document family, and only it, names collections in its key positions.
            assert_eq!(
                s.has(flag::COLLECTION),
                s.group == "document",
                "{}: COLLECTION",
                s.name
            );
            if let Some(c) = container {
                assert!(s.name.starts_with(&format!("{c}|")), "{}", s.name);
            }
        };
        for s in table().all() {
            check(s, None);
            for sub in s.subcommands {
                check(sub, Some(s.name));
            }
        }
    }
}
