//! Scripting family: EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT LOAD|EXISTS|FLUSH|KILL|HELP,
//! running Lua 5.1 as Redis 7.0 does (`eval.c`, `script_lua.c`, `script.c`).
//!
//! **One Lua state per server**, behind a mutex ([`ENGINE`], created at first use, replaced by
//! SCRIPT FLUSH), with the script cache (SHA1 hex of the body → compiled function and shebang
//! flags) shared by every client, as Redis has one interpreter. A script runs with the exec
//! gate held exclusively ([`run_inline`], the script thread, or EXEC for queued ones), so the
//! state's mutex is never contended by two scripts; only SCRIPT LOAD / EXISTS / FLUSH from
//! other clients may wait on it.
//!
//! **Atomicity**: with the gate exclusive no other client's command runs until the script ends,
//! whatever keys (declared or not) and shards it touches. The commands a script calls go through
//! the command table (`resolve` + `execute`), with `in_exec` set so blocking commands answer at
//! once as on timeout. `redis.call`, `redis.pcall` and `redis.acl_check_cmd` are made once per
//! engine ([`run_callbacks`]); for a run the caller's client state is moved into a thread-local
//! slot they reach ([`CURRENT`], a spare state standing in the caller's `Ctx` meanwhile) and
//! moved back after it (no raw pointers). Before, an `mlua` scope made the three closures each
//! run and set them into the `redis` table and back to nil, which made Lua rehash that table
//! on most runs: scope, closures and rehash were a third of a short script's instructions.
//!
//! **Sandbox**: vanilla Lua 5.1 has no read-only tables (Redis patches its Lua for them), so a
//! script runs in an environment table that is an empty proxy: reads fall through to the real
//! globals (a missing name raises Redis's "Script attempted to access nonexistent global
//! variable" error), writes raise "Attempt to modify a readonly table", and the library tables
//! (`redis`, `string`, `math`, `table`, `cjson`, `bit`, `coroutine`) are read-only proxies too;
//! `setmetatable`/`rawset` refuse protected tables and `getmetatable` sees a read-only copy.
//! `os`, `io`, `debug`, `print`, `dofile`, `loadfile`, `require` are not there; `loadstring`
//! refuses bytecode. `cjson`, `bit`, `cmsgpack` and `struct` (`lua_struct.rs`) are implemented
//! here in Rust.
//!
//! **Where a script runs.** On the multi-thread runtime (any `io-threads`: with 1, one worker
//! with its LIFO slot off, see `main.rs`), on its caller's thread: the dispatcher hands the script commands to [`run_inline`], which takes
//! the exec gate exclusively, runs the script with the caller's client state (its database,
//! RESP2 until `redis.setresp`, never blocking: `in_exec`), then serves the clients blocked on
//! keys the script filled. No hand-off, so a short script costs what a command costs. The
//! instruction hook (every 100,000 instructions, as Redis's `luaMaskCountHook`) looks at the
//! clock: once a script has run [`HAND_OFF_AFTER`], its thread gives its runtime worker (the
//! connections queued there, its share of the I/O) to a fresh thread with `block_in_place`,
//! so other clients are still read, hear `-BUSY` once it runs past `busy-reply-threshold`
//! (`state::gate`), and may send SCRIPT KILL / FUNCTION KILL. On the current-thread runtime
//! (`io-threads 1` in a build without `tokio_unstable`, or with TIDECACHE_CURRENT_THREAD set)
//! its one thread must never run a script: scripts go to one dedicated thread,
//! the script thread. The connection hands it the script request it just parsed together
//! with the script requests buffered right behind it ([`run_batch`]), and its own client
//! state: there each goes through the whole dispatcher and runs inline as on the
//! multi-thread runtime (its own checks, exclusive gate, journal record, reply or error),
//! one after another, and the state comes back with every reply in one wake-up. One
//! hand-off a batch, where each script cost two cross-thread wake-ups (4-8 µs) before, so a
//! pipeline of 16 EVALSHAs paid 16 of them. Each script of a batch is atomic on its own
//! (the gate is released between them, so other clients' commands may run in between, as
//! between two requests of any pipeline). A pause that starts in between does not hold back
//! the rest of the batch, as in Redis, which runs a client's buffered requests before it
//! serves another client; a client killed in between runs nothing more. The connection
//! waits without reading (its state is away), and closes a client killed meanwhile once
//! the running script ends. A script that is not
//! the start of a batch (MULTI, CLIENT REPLY OFF/SKIP, a pause in force) goes one at a time
//! ([`detach`]), the caller's connection waiting for the reply as a blocked client does. The
//! kill commands run without the gate and set [`KILL`], which the hook turns into "Script
//! killed by user with SCRIPT KILL..." — unless the script wrote ([`RUN_DIRTY`]:
//! UNKILLABLE). A script queued in MULTI runs inline under EXEC's exclusive gate. Functions
//! (`functions.rs`) share all of this, with their own Lua state.
//!
//! **SCRIPT DEBUG** (the Lua debugger, sync sessions only; YES is refused): `ldb.rs`.
use crate::commands::args::{Args, CommandError};
use crate::commands::spec::{acl, family, flag::*, CmdResult, CommandSpec, KeySpec};
use crate::commands::{execute, help_reply, resolve, table, Ctx};
use crate::protocol::Reply;
use bytes::{Bytes, BytesMut};
use mlua::{Function, LightUserData, Lua, LuaOptions, MultiValue, StdLib, Table, Value};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

mod functions;
pub mod ldb;
mod lua_struct;
use crate::state::gate::{busy_text, SCRIPT_EVAL, SCRIPT_FUNCTION};
pub use functions::stats as function_stats;
pub use functions::{flush_libraries, library_codes};

const FAMILY: CommandSpec = family("scripting", acl::SCRIPTING);

const EVAL_KEYS: &[KeySpec] = &[KeySpec::keynum(2, &["RW", "access", "update"])];
const EVAL_RO_KEYS: &[KeySpec] = &[KeySpec::keynum(2, &["RO", "access"])];

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    FAMILY.cmd("eval", -3, eval).flags(NOSCRIPT | SKIP_MONITOR | STALE | NO_MANDATORY_KEYS | MOVABLEKEYS).key_specs(EVAL_KEYS)
        .doc("2.6.0", "Execute a Lua script server side")
        .complexity("Depends on the script that is executed.")
        .args("script numkeys:integer [key:key...] [arg...]"),
    FAMILY.cmd("evalsha", -3, evalsha).flags(NOSCRIPT | SKIP_MONITOR | STALE | NO_MANDATORY_KEYS | MOVABLEKEYS).key_specs(EVAL_KEYS)
        .doc("2.6.0", "Execute a Lua script server side")
        .complexity("Depends on the script that is executed.")
        .args("sha1 numkeys:integer [key:key...] [arg...]"),
    FAMILY.cmd("eval_ro", -3, eval_ro).flags(READONLY | NOSCRIPT | SKIP_MONITOR | STALE | NO_MANDATORY_KEYS | MOVABLEKEYS).key_specs(EVAL_RO_KEYS)
        .doc("7.0.0", "Execute a read-only Lua script server side")
        .complexity("Depends on the script that is executed.")
        .args("script numkeys:integer [key:key...] [arg...]"),
    FAMILY.cmd("evalsha_ro", -3, evalsha_ro).flags(READONLY | NOSCRIPT | SKIP_MONITOR | STALE | NO_MANDATORY_KEYS | MOVABLEKEYS).key_specs(EVAL_RO_KEYS)
        .doc("7.0.0", "Execute a read-only Lua script server side")
        .complexity("Depends on the script that is executed.")
        .args("sha1 numkeys:integer [key:key...] [arg...]"),
    FAMILY.cmd("fcall", -3, functions::fcall).flags(NOSCRIPT | SKIP_MONITOR | STALE | NO_MANDATORY_KEYS | MOVABLEKEYS).key_specs(EVAL_KEYS)
        .doc("7.0.0", "Invoke a function")
        .complexity("Depends on the function that is executed.")
        .args("function numkeys:integer [key:key...] [arg...]"),
    FAMILY.cmd("fcall_ro", -3, functions::fcall_ro).flags(READONLY | NOSCRIPT | SKIP_MONITOR | STALE | NO_MANDATORY_KEYS | MOVABLEKEYS).key_specs(EVAL_RO_KEYS)
        .doc("7.0.0", "Invoke a read-only function")
        .complexity("Depends on the function that is executed.")
        .args("function numkeys:integer [key:key...] [arg...]"),
    FAMILY.cmd("function", -2, container)
        .doc("7.0.0", "A container for function commands")
        .complexity("Depends on subcommand.").subs(FUNCTION_SUBCOMMANDS),
    FAMILY.cmd("script", -2, container)
        .doc("2.6.0", "A container for Lua scripts management commands")
        .complexity("Depends on subcommand.").subs(SCRIPT_SUBCOMMANDS),
];

#[rustfmt::skip]
static SCRIPT_SUBCOMMANDS: &[CommandSpec] = &[
    FAMILY.cmd("script|help", 2, script_help).flags(LOADING | STALE)
        .doc("5.0.0", "Show helpful text about the different subcommands").complexity("O(1)"),
    FAMILY.cmd("script|flush", -2, script_flush).flags(NOSCRIPT)
        .doc("2.6.0", "Remove all the scripts from the script cache.")
        .complexity("O(N) with N being the number of scripts in cache")
        .args("[flush_type:(ASYNC|SYNC)]"),
    FAMILY.cmd("script|debug", 3, script_debug).flags(NOSCRIPT)
        .doc("3.2.0", "Set the debug mode for executed scripts.").complexity("O(1)")
        .args("mode:(YES|SYNC|NO)"),
    FAMILY.cmd("script|exists", -3, script_exists).flags(NOSCRIPT)
        .doc("2.6.0", "Check existence of scripts in the script cache.")
        .complexity("O(N) with N being the number of scripts to check (so checking a single script is an O(1) operation).")
        .args("sha1..."),
    FAMILY.cmd("script|kill", 2, script_kill).flags(NOSCRIPT | ALLOW_BUSY)
        .doc("2.6.0", "Kill the script currently in execution.").complexity("O(1)"),
    FAMILY.cmd("script|load", 3, script_load).flags(NOSCRIPT | STALE)
        .doc("2.6.0", "Load the specified Lua script into the script cache.")
        .complexity("O(N) with N being the length in bytes of the script body.")
        .args("script"),
];

#[rustfmt::skip]
static FUNCTION_SUBCOMMANDS: &[CommandSpec] = &[
    FAMILY.cmd("function|delete", 3, functions::function_delete).flags(WRITE | NOSCRIPT | JOURNAL_SELF)
        .doc("7.0.0", "Delete a function by name").complexity("O(1)")
        .args("library-name"),
    FAMILY.cmd("function|dump", 2, functions::function_dump).flags(NOSCRIPT)
        .doc("7.0.0", "Dump all functions into a serialized binary payload")
        .complexity("O(N) where N is the number of functions"),
    FAMILY.cmd("function|flush", -2, functions::function_flush).flags(WRITE | NOSCRIPT | JOURNAL_SELF)
        .doc("7.0.0", "Deleting all functions")
        .complexity("O(N) where N is the number of functions deleted")
        .args("[flush-type:(ASYNC|SYNC)]"),
    FAMILY.cmd("function|help", 2, functions::function_help).flags(LOADING | STALE)
        .doc("7.0.0", "Show helpful text about the different subcommands").complexity("O(1)"),
    FAMILY.cmd("function|kill", 2, functions::function_kill).flags(NOSCRIPT | ALLOW_BUSY)
        .doc("7.0.0", "Kill the function currently in execution.").complexity("O(1)"),
    FAMILY.cmd("function|list", -2, functions::function_list).flags(NOSCRIPT)
        .doc("7.0.0", "List information about all the functions")
        .complexity("O(N) where N is the number of functions")
        .args("[LIBRARYNAME=library-name-pattern] [WITHCODE]"),
    FAMILY.cmd("function|load", -3, functions::function_load).flags(WRITE | DENYOOM | NOSCRIPT | JOURNAL_SELF)
        .doc("7.0.0", "Create a function with the given arguments (name, code, description)")
        .complexity("O(1) (considering compilation time is redundant)")
        .args("[REPLACE] function-code"),
    FAMILY.cmd("function|restore", -3, functions::function_restore).flags(WRITE | DENYOOM | NOSCRIPT | JOURNAL_SELF)
        .doc("7.0.0", "Restore all the functions on the given payload")
        .complexity("O(N) where N is the number of functions on the payload")
        .args("serialized-value [policy:(FLUSH|APPEND|REPLACE)]"),
    FAMILY.cmd("function|stats", 2, functions::function_stats).flags(NOSCRIPT | ALLOW_BUSY)
        .doc("7.0.0", "Return information about the function currently running (name, description, duration)")
        .complexity("O(1)"),
];

/// The dispatcher's answer to a command refused because a script is busy: BUSY, which also
/// marks (or, for EXEC, aborts) a transaction in progress, as Redis's `rejectCommand`.
pub fn refuse_busy(ctx: &mut Ctx<'_>, spec: &CommandSpec) -> Reply {
    let text = ctx.server.exec_gate.busy_error();
    if spec.name == "exec" && ctx.client.multi.is_some() {
        crate::commands::transactions::reset_state(ctx);
        return Reply::error(format!(
            "EXECABORT Transaction discarded because of: {text}"
        ));
    }
    crate::commands::transactions::refuse(ctx, Reply::error(text))
}

/// A kill was asked for the running script (SCRIPT KILL / FUNCTION KILL).
static KILL: AtomicBool = AtomicBool::new(false);
/// The running script has called a write command (it can no longer be killed).
static RUN_DIRTY: AtomicBool = AtomicBool::new(false);

/// SCRIPT KILL (`kind` SCRIPT_EVAL) and FUNCTION KILL (SCRIPT_FUNCTION): Redis's `scriptKill`.
fn kill(ctx: &mut Ctx<'_>, kind: u8) -> CmdResult {
    let Some((running, _)) = ctx.server.exec_gate.script_running() else {
        return Err(CommandError::msg(
            "NOTBUSY No scripts in execution right now.",
        ));
    };
    if RUN_DIRTY.load(Ordering::Acquire) {
        return Err(CommandError::msg(
            "UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.",
        ));
    }
    if running != kind {
        return Err(CommandError::msg(busy_text(running)));
    }
    KILL.store(true, Ordering::Release);
    Ok(Reply::ok())
}

/// The stack a thread that runs scripts needs: replies nest as deep as the tables a script
/// returns (1000 levels before Redis's "reached lua stack limit"), each level a few frames
/// of conversion.
pub const STACK_SIZE: usize = 64 << 20;

type Job = Box<dyn FnOnce() + Send>;

/// What the script thread is given: a script command's job ([`detach`]), or a batch of a
/// connection's consecutive script requests ([`run_batch`]).
enum Work {
    Job(Job),
    Batch(Box<Batch>, tokio::sync::oneshot::Sender<Box<Batch>>),
}

/// A connection's consecutive script requests, run on the script thread one after another
/// with the connection's own client state (moved there for the batch and back with the
/// replies), as the multi-thread runtime runs them inline: each request goes through the
/// whole dispatcher there, so each script is one atomic step under the exclusive gate,
/// with its own checks, statistics and journal record, and its own reply or error.
pub struct Batch {
    server: Arc<crate::state::Server>,
    pub client: crate::state::client::ClientState,
    requests: Vec<Vec<Bytes>>,
    /// One a request, in order; fewer than the requests if the client was killed
    /// meanwhile or a run panicked (the connection then closes).
    pub replies: Vec<Reply>,
}

/// DEBUG SET-DISABLE-DENY-SCRIPTS 1 (Redis's `server.script_disable_deny_script`): scripts
/// may call commands flagged NOSCRIPT, as Redis's tests need to watch a running script with
/// CLIENT LIST.
pub static DENY_SCRIPTS_DISABLED: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// This thread is the script thread: script commands dispatched here run inline.
    static SCRIPT_THREAD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

#[inline]
fn on_script_thread() -> bool {
    SCRIPT_THREAD.with(|c| c.get())
}

/// How long the script thread keeps polling its queue after its last job before it sleeps
/// on it. The connection that just got its replies usually sends its next scripts within a
/// few microseconds; a sleeping thread costs the sender a futex wake-up and itself a
/// context switch, each a system call.
const SPIN: std::time::Duration = std::time::Duration::from_micros(20);

/// The script thread's queue; the thread starts with the first script.
fn script_thread() -> &'static std::sync::mpsc::Sender<Work> {
    static TX: std::sync::OnceLock<std::sync::mpsc::Sender<Work>> = std::sync::OnceLock::new();
    TX.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel::<Work>();
        let runtime = tokio::runtime::Handle::try_current().ok();
        let spawned = std::thread::Builder::new()
            .name("scripts".into())
            .stack_size(STACK_SIZE)
            .spawn(move || {
                // Inside the runtime's context, in case a command a script calls needs it.
                let _rt = runtime.as_ref().map(|h| h.enter());
                SCRIPT_THREAD.with(|c| c.set(true));
                while let Some(work) = next_work(&rx) {
                    match work {
                        // A panic ends only that script (its caller's connection closes, as
                        // its reply never comes), not the thread every later script needs.
                        Work::Job(job) => {
                            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
                        }
                        Work::Batch(mut batch, tx) => {
                            serve_batch(&mut batch);
                            let _ = tx.send(batch);
                        }
                    }
                }
            });
        if let Err(e) = spawned {
            tracing::error!("could not start the script thread: {e}");
        }
        tx
    })
}

/// The script thread's next work: polled for [`SPIN`] before it sleeps on the queue.
fn next_work(rx: &std::sync::mpsc::Receiver<Work>) -> Option<Work> {
    use std::sync::mpsc::TryRecvError;
    let mut since: Option<std::time::Instant> = None;
    loop {
        match rx.try_recv() {
            Ok(w) => return Some(w),
            Err(TryRecvError::Disconnected) => return None,
            Err(TryRecvError::Empty) => {}
        }
        let t = *since.get_or_insert_with(std::time::Instant::now);
        if t.elapsed() >= SPIN {
            return rx.recv().ok();
        }
        std::hint::spin_loop();
    }
}

/// Runs a batch's requests in order through the dispatcher, on the script thread. A panic
/// ends the batch (its client state still goes back: the run's guard restored it).
fn serve_batch(b: &mut Batch) {
    let Batch {
        server,
        client,
        requests,
        replies,
    } = b;
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        for req in requests.iter() {
            // Killed meanwhile (CLIENT KILL from another client): nothing more of its runs.
            if client.handle.killed.load(Ordering::Acquire) {
                break;
            }
            let mut ctx = Ctx {
                server,
                client: &mut *client,
            };
            let reply = crate::commands::dispatch(&mut ctx, req);
            replies.push(reply);
        }
    }));
}

/// The script requests that may go to the script thread together: EVAL, EVALSHA, FCALL and
/// their `_RO` forms, by name (checked before the lookup, on every request of a batch, so
/// it is a length and a first letter before any compare).
#[inline]
pub fn is_script_name(name: &[u8]) -> bool {
    const NAMES: [&[u8]; 6] = [
        b"eval",
        b"evalsha",
        b"eval_ro",
        b"evalsha_ro",
        b"fcall",
        b"fcall_ro",
    ];
    matches!(name.len(), 4 | 5 | 7 | 8 | 10)
        && matches!(name[0] | 0x20, b'e' | b'f')
        && NAMES.iter().any(|n| name.eq_ignore_ascii_case(n))
}

/// A script command's flags as Redis's `getCommandFlags` sees them when it is queued in
/// MULTI (`evalGetCommandFlags`, `fcallGetCommandFlags`, `scriptFlagsToCmdFlags`): a script
/// or function that declared flags in a shebang is a write (and `denyoom`) unless it says
/// `no-writes` (`allow-oom`), and `stale` only with `allow-stale`, so EXEC of a transaction
/// holding it is refused on a read-only replica (EXECABORT) as Redis does. A script without
/// a shebang, an unknown SHA or function, and every other command keep the table's flags.
pub fn command_flags(spec: &'static CommandSpec, args: &[Bytes]) -> u32 {
    if !is_script_name(spec.name.as_bytes()) || args.len() < 2 {
        return spec.flags;
    }
    let script_flags = match spec.name {
        "eval" | "eval_ro" => shebang(&args[1]).ok().map(|(f, _)| f),
        // A script debugging session holds the engine for its whole length: rather than
        // wait for it, the command keeps its table flags while the engine is busy.
        "evalsha" | "evalsha_ro" if args[1].len() == 40 => {
            let sha = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
            let guard = ENGINE.try_lock();
            guard
                .as_ref()
                .and_then(|g| g.as_ref())
                .and_then(|e| e.scripts.get(&sha).map(|s| s.flags))
        }
        "fcall" | "fcall_ro" => {
            let name = String::from_utf8_lossy(&args[1]);
            let guard = functions::FENGINE.try_lock();
            guard
                .as_ref()
                .and_then(|g| g.as_ref())
                .and_then(|e| e.functions.function(&name).map(|d| d.flags))
        }
        _ => None,
    };
    match script_flags {
        Some(f) if f & sflag::COMPAT == 0 => {
            let mut flags = spec.flags & !(STALE | DENYOOM | WRITE);
            if f & (sflag::ALLOW_OOM | sflag::NO_WRITES) == 0 {
                flags |= DENYOOM;
            }
            if f & sflag::NO_WRITES == 0 {
                flags |= WRITE;
            }
            if f & sflag::ALLOW_STALE != 0 {
                flags |= STALE;
            }
            flags
        }
        _ => spec.flags,
    }
}

/// Whether the connection may hand `args` (a request just parsed) to the script thread as
/// the start of a batch ([`run_batch`]): a script request, one I/O thread (on the
/// multi-thread runtime scripts run inline), and a client in its plain state (no MULTI, its
/// replies on, no pause in force: those go the one-by-one way).
#[inline]
pub fn batchable(client: &crate::state::client::ClientState, args: &[Bytes]) -> bool {
    is_script_name(&args[0])
        && !inline()
        && client.multi.is_none()
        && client.reply_mode == crate::state::client::ReplyMode::On
        && !crate::state::pause::active()
}

/// Whether the next request in `buf`, not parsed yet, is a complete script request (read
/// in place by `peek_requests`; an inline or incomplete request is not).
pub fn next_is_script(buf: &[u8]) -> bool {
    let mut script = false;
    crate::protocol::request::peek_requests(buf, 1, |_, lead| {
        script = lead.first().is_some_and(|name| is_script_name(name));
    });
    script
}

/// Runs a connection's consecutive script requests on the script thread, one after another
/// (see [`Batch`]): one hand-off there and one wake-up back for all of them, where each
/// used to cost both. `client` is the connection's state, given back with the replies.
pub async fn run_batch(
    server: &Arc<crate::state::Server>,
    client: crate::state::client::ClientState,
    requests: Vec<Vec<Bytes>>,
) -> Option<Box<Batch>> {
    let replies = Vec::with_capacity(requests.len());
    let batch = Box::new(Batch {
        server: server.clone(),
        client,
        requests,
        replies,
    });
    let (tx, rx) = tokio::sync::oneshot::channel();
    if let Err(std::sync::mpsc::SendError(Work::Batch(mut batch, _))) =
        script_thread().send(Work::Batch(batch, tx))
    {
        batch.replies.clear();
        for _ in 0..batch.requests.len() {
            batch
                .replies
                .push(Reply::error("ERR the script thread is not running"));
        }
        return Some(batch);
    }
    // The script thread never drops a batch unanswered; if it did, the client state is
    // gone with it and the connection closes.
    rx.await.ok()
}

/// Whether scripts run on their caller's thread (the multi-thread runtime, see the module
/// comment) rather than on the script thread (the current-thread runtime, where the one
/// runtime thread must stay free to hear other clients while a script runs). Decided at the
/// first script from the runtime's flavour, which never changes.
pub fn inline() -> bool {
    static MODE: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);
    match MODE.load(Ordering::Relaxed) {
        1 => true,
        2 => false,
        _ => {
            let Ok(h) = tokio::runtime::Handle::try_current() else {
                return false;
            };
            let multi = h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread;
            MODE.store(if multi { 1 } else { 2 }, Ordering::Relaxed);
            multi
        }
    }
}

/// The scripts the dispatcher hands to [`run_inline`] instead of running them under the
/// shared gate: EVAL, FCALL and their variants (the only commands flagged SKIP_MONITOR), on
/// the multi-thread runtime.
#[inline]
pub fn runs_inline(spec: &CommandSpec) -> bool {
    spec.has(SKIP_MONITOR) && (inline() || on_script_thread())
}

/// Runs a script command on the caller's thread (the multi-thread runtime; see the module
/// comment): the exec gate exclusively, the script's writes one journal record (the
/// dispatcher's record context, made atomic), then the clients blocked on keys it filled
/// served under the shared gate, as after EXEC. A script already past
/// `busy-reply-threshold` makes this one BUSY instead of a wait that may never end.
pub fn run_inline(ctx: &mut Ctx<'_>, spec: &'static CommandSpec, args: &[Bytes]) -> Reply {
    let server = ctx.server;
    let Some(exclusive) = server.exec_gate.exclusive_unless_busy() else {
        return refuse_busy(ctx, spec);
    };
    crate::store::journal::set_atomic();
    let reply = crate::commands::execute(ctx, spec, args);
    drop(exclusive);
    server
        .blocking
        .serve_after_exclusive(server, ctx.client.id());
    reply
}

/// How long an inline script runs before its thread hands its runtime worker (the other
/// connections queued there, and the worker's share of the I/O) to a fresh thread.
const HAND_OFF_AFTER: std::time::Duration = std::time::Duration::from_millis(2);

thread_local! {
    /// When the inline script running on this thread started, until it handed its worker
    /// off: the instruction hook looks at it.
    static INLINE_SINCE: std::cell::Cell<Option<std::time::Instant>> =
        const { std::cell::Cell::new(None) };
    static HAND_OFF_TRIES: std::cell::Cell<u8> = const { std::cell::Cell::new(0) };
}

/// Runs `job` inline (under EXEC's gate, or [`run_inline`]'s), with the hand-off armed when
/// this thread is a runtime worker of the multi-thread runtime.
fn run_armed(ctx: &mut Ctx<'_>, argv: &[Bytes], job: fn(&mut Ctx<'_>, &[Bytes]) -> Reply) -> Reply {
    // Never on the script thread or a debugging session's: neither is a runtime worker.
    let arm = inline() && !on_script_thread();
    if arm {
        INLINE_SINCE.with(|s| s.set(Some(std::time::Instant::now())));
        HAND_OFF_TRIES.with(|t| t.set(0));
    }
    let reply = job(ctx, argv);
    if arm {
        INLINE_SINCE.with(|s| s.set(None));
    }
    reply
}

/// Called by the instruction hook (every 100,000 instructions): an inline script that has
/// run past [`HAND_OFF_AFTER`] hands its runtime worker to another thread, once.
#[inline]
fn maybe_hand_off() {
    let due = INLINE_SINCE.with(|s| s.get().is_some_and(|t| t.elapsed() >= HAND_OFF_AFTER));
    if !due {
        return;
    }
    // At most three tries (each waits up to 10 ms): the marker also waits while the
    // worker's new thread is itself held up, e.g. by a command waiting for the gate.
    let tries = HAND_OFF_TRIES.with(|t| {
        let n = t.get() + 1;
        t.set(n);
        n
    });
    if hand_off_worker() || tries >= 3 {
        INLINE_SINCE.with(|s| s.set(None));
    }
}

/// `block_in_place` moves this worker's core (its run queue, LIFO slot included) to a new
/// thread, which then serves the worker's connections (and parks on the I/O driver like
/// any worker) while this thread goes on with the script and, once the connection's task
/// yields, leaves the runtime. tokio takes the core back when the closure returns if the
/// new thread has not started yet, so the closure waits (at most 10 ms) until a marker task
/// queued on this core has run: then someone serves the core's queue. True when it did
/// (else the next hook tries again, up to three times).
#[cold]
fn hand_off_worker() -> bool {
    let Ok(rt) = tokio::runtime::Handle::try_current() else {
        return true;
    };
    let ran = Arc::new(AtomicBool::new(false));
    let marker = ran.clone();
    drop(rt.spawn(async move { marker.store(true, Ordering::Release) }));
    tokio::task::block_in_place(|| {
        let until = std::time::Instant::now() + std::time::Duration::from_millis(10);
        while !ran.load(Ordering::Acquire) && std::time::Instant::now() < until {
            std::thread::sleep(std::time::Duration::from_micros(50));
        }
    });
    ran.load(Ordering::Acquire)
}

/// Runs a script command (`job`): inline inside EXEC (already exclusive) and on the
/// multi-thread runtime (the dispatcher called [`run_inline`]); else on the script thread,
/// the calling connection waiting for its reply as a blocked client (see the module comment).
fn detach(ctx: &mut Ctx<'_>, argv: &[Bytes], job: fn(&mut Ctx<'_>, &[Bytes]) -> Reply) -> Reply {
    if ctx.client.in_exec || inline() || on_script_thread() {
        return run_armed(ctx, argv, job);
    }
    let server = ctx.server.clone();
    let mut client = crate::state::client::ClientState::new(ctx.client.handle.clone(), true);
    client.db = ctx.client.db;
    // The script runs as its caller's ACL user.
    client.user = ctx.client.user.clone();
    client.acl_seen = ctx.client.acl_seen;
    client.acl_fast = ctx.client.acl_fast;
    let argv = argv.to_vec();
    let (tx, rx) = tokio::sync::oneshot::channel();
    let task: Job = Box::new(move || {
        let reply = {
            let _exclusive = server.exec_gate.exclusive();
            // The script's writes are one journal record (`MULTI … EXEC`), made on this
            // thread; the caller's reply waits for it (`Blocking::owe`), so under `always`
            // it is on disk.
            let record = crate::store::journal::Command::begin();
            crate::store::journal::set_atomic();
            crate::store::journal::enter(client.db);
            let mut ctx = Ctx {
                server: &server,
                client: &mut client,
            };
            // The script's statistics (commands/stats): its commands nest in it here, and
            // its run time and whether its error was counted go back with the client.
            let started = crate::util::clock::stamp();
            let depth = crate::state::cmdstats::script_begin();
            let reply = job(&mut ctx, &argv);
            let error = match &reply {
                Reply::Error(e) => Some(e.as_str()),
                _ => None,
            };
            let error_counted = crate::state::cmdstats::script_end(depth, error);
            client
                .handle
                .script_run
                .set(crate::state::client::ScriptRun {
                    nanos: crate::util::clock::stamp_elapsed_ns(started),
                    error_counted,
                });
            crate::store::journal::leave(&[], false, false);
            // The caller's reply waits for the script's own record (and WAITAOF counts it).
            server.blocking.owe(client.id(), record.end());
            reply
        };
        // Clients blocked on keys the script filled are served after it, as after EXEC.
        {
            let _shared = server.exec_gate.shared(client.id());
            server.blocking.serve_ready(&server);
        }
        let _ = tx.send(reply);
    });
    if script_thread().send(Work::Job(task)).is_err() {
        return Reply::error("ERR the script thread is not running");
    }
    DETACHED.with(|d| d.set(true));
    ctx.client.blocked = Some(crate::state::blocking::Blocked {
        id: ctx.client.id(),
        reply: rx,
        deadline: None,
    });
    Reply::NoReply
}

thread_local! {
    /// The command just dispatched on this thread handed its script to the script thread.
    static DETACHED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether the command just dispatched on this thread (whose client is now blocked) is a
/// script waiting on the script thread rather than a command blocked on keys; clears it.
/// The connection then keeps the replies before it for the batch's one write.
pub fn take_detached() -> bool {
    DETACHED.with(|d| d.replace(false))
}

fn container(_ctx: &mut Ctx<'_>, _args: &mut Args<'_>) -> CmdResult {
    Err(CommandError::WrongArity)
}

// ---------------------------------------------------------------------------------------------
// The engine: one Lua state and the script cache.

/// Shebang flags (`#!lua flags=...`).
mod sflag {
    pub const NO_WRITES: u32 = 1 << 0;
    pub const ALLOW_OOM: u32 = 1 << 1;
    pub const ALLOW_STALE: u32 = 1 << 2;
    pub const NO_CLUSTER: u32 = 1 << 3;
    pub const ALLOW_CROSS_SLOT: u32 = 1 << 4;
    /// No shebang: Redis's "eval compatibility mode".
    pub const COMPAT: u32 = 1 << 5;
}

struct Script {
    /// In the Lua registry, not a `Function` handle: mlua keeps each live handle in a slot of
    /// a fixed auxiliary stack (about 8,000 slots), so a cache of handles panicked at the
    /// ~7,500th distinct script, and every script after it. The registry has no such bound.
    func: mlua::RegistryKey,
    flags: u32,
}

struct Engine {
    lua: Lua,
    /// By SHA1 (hashbrown's hasher: an EVALSHA hashes 40 bytes, which SipHash made cost
    /// about 300 instructions).
    scripts: hashbrown::HashMap<String, Script>,
    /// The environment scripts run in (the read-only proxy of the globals).
    env: Table,
    /// `function(f) return xpcall(f, handler) end`.
    runner: Function,
    /// Bytes of script bodies held (INFO's used_memory_scripts).
    body_bytes: usize,
    /// A function's call with its keys and arguments ([`fcall_run`]).
    fcall_run: Function,
    /// `function(f, numkeys, keys..., args...)`: an EVAL's run with its KEYS and ARGV.
    eval_run: Function,
    /// Switches the globals between the library API (while a library loads) and the
    /// runtime ones (functions engine only).
    set_loading: Function,
    /// The libraries (functions engine only).
    functions: functions::Registry,
}

static ENGINE: Mutex<Option<Engine>> = Mutex::new(None);

/// Redis's `redisLrand48` state, shared by every script (math.random).
static RAND48: AtomicU64 = AtomicU64::new(0x1234_ABCD_330E);

/// What INFO memory reports, kept in atomics: INFO may run inside a script, while the engine's
/// lock is held.
static CACHED_SCRIPTS: AtomicU64 = AtomicU64::new(0);
static SCRIPT_BYTES: AtomicU64 = AtomicU64::new(0);
static LUA_MEMORY: AtomicU64 = AtomicU64::new(0);

/// Number of cached scripts and the bytes their bodies hold (INFO memory).
pub fn cache_stats() -> (u64, u64) {
    (
        CACHED_SCRIPTS.load(Ordering::Relaxed),
        SCRIPT_BYTES.load(Ordering::Relaxed),
    )
}

/// Memory the Lua state uses (INFO's used_memory_lua), as of the last script run or load.
pub fn lua_memory() -> u64 {
    LUA_MEMORY.load(Ordering::Relaxed)
}

fn publish_stats(eng: Option<&Engine>) {
    let (n, bytes, mem) = eng
        .map(|e| (e.scripts.len(), e.body_bytes, e.lua.used_memory()))
        .unwrap_or((0, 0, 0));
    CACHED_SCRIPTS.store(n as u64, Ordering::Relaxed);
    SCRIPT_BYTES.store(bytes as u64, Ordering::Relaxed);
    LUA_MEMORY.store(mem as u64, Ordering::Relaxed);
}

fn engine(slot: &mut Option<Engine>) -> Result<&mut Engine, Reply> {
    if slot.is_none() {
        *slot = Some(Engine::new(false).map_err(|e| Reply::error(format!("ERR Lua init: {e}")))?);
    }
    Ok(slot.as_mut().expect("just set"))
}

const PRELUDE: &str = r#"
local api, handler = ...
local G = _G
local error, type, rawget, rawset, setmetatable, getmetatable, tostring, xpcall, setfenv =
      error, type, rawget, rawset, setmetatable, getmetatable, tostring, xpcall, setfenv
local raw_pcall, raw_loadstring, raw_load = pcall, loadstring, load

local function readonly_err() error("Attempt to modify a readonly table", 2) end
local protected = setmetatable({}, {__mode = "k"})
local function readonly(t)
  local mt = {__index = t, __newindex = readonly_err}
  local p = setmetatable({}, mt)
  local mtp = setmetatable({}, {__index = mt, __newindex = readonly_err})
  mt.__metatable = mtp
  protected[p] = true
  protected[mtp] = true
  return p
end


local redis = {}
redis.sha1hex = api.sha1hex
redis.error_reply = api.error_reply
redis.status_reply = api.status_reply
redis.log = api.log
redis.set_repl = api.set_repl
redis.replicate_commands = function() return true end
redis.breakpoint = api.breakpoint or function() return false end
redis.debug = api.debug or function() end
redis.acl_check_cmd = api.acl_check_cmd
redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING = 0, 1, 2, 3
redis.REPL_NONE, redis.REPL_AOF, redis.REPL_SLAVE, redis.REPL_REPLICA, redis.REPL_ALL = 0, 1, 2, 2, 3
redis.REDIS_VERSION = api.version
redis.REDIS_VERSION_NUM = api.version_num
G.redis = redis

local env_mt = {__index = G, __newindex = readonly_err}
local env = setmetatable({}, env_mt)
local env_mtp = setmetatable({}, {__index = env_mt, __newindex = readonly_err})
env_mt.__metatable = env_mtp
protected[env] = true
protected[env_mtp] = true

local function fix(ok, ...)
  if ok then return ok, ... end
  local e = ...
  if type(e) == "userdata" then e = api.errtext(e) end
  if type(e) == "table" and type(rawget(e, "err")) == "string" then e = rawget(e, "err") end
  return false, e
end
-- A killed script cannot catch its kill (Redis hooks every line from then on).
local function unless_killed(ok, ...)
  if not ok and api.killed() then
    local e = ...
    if type(e) ~= "table" then e = {err = tostring(e)} end
    error(e, 0)
  end
  return ok, ...
end
G.pcall = function(...) return unless_killed(fix(raw_pcall(...))) end
G.setmetatable = function(t, mt)
  if protected[t] then error("Attempt to modify a readonly table", 0) end
  return setmetatable(t, mt)
end
G.rawset = function(t, k, v)
  if protected[t] then error("Attempt to modify a readonly table", 0) end
  return rawset(t, k, v)
end
G.loadstring = function(s, name)
  if type(s) == "string" and s:byte(1) == 27 then return nil, "binary chunks are not allowed" end
  local f, e = raw_loadstring(s, name)
  if f then setfenv(f, env) end
  return f, e
end
G.load = function(fn, name)
  local f, e = raw_load(fn, name)
  if f then setfenv(f, env) end
  return f, e
end
G.math.random = api.random
G.math.randomseed = api.randomseed
G.cjson = api.cjson
G.bit = api.bit
G.cmsgpack = api.cmsgpack
G.struct = api.struct
for _, name in ipairs({"dofile", "loadfile", "print", "require", "module", "package", "os", "io", "debug", "gcinfo"}) do
  rawset(G, name, nil)
end
for _, name in ipairs({"redis", "string", "math", "table", "cjson", "bit", "cmsgpack", "struct", "coroutine"}) do
  rawset(G, name, readonly(rawget(G, name)))
end
G._G = env
setmetatable(G, {__index = function(_, k)
  error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
end})
-- The library API (FUNCTION LOAD): what a library's body sees as its globals.
local lib_api = G
if api.register_function then
  local lib_redis = {register_function = api.register_function, log = api.log,
    LOG_DEBUG = 0, LOG_VERBOSE = 1, LOG_NOTICE = 2, LOG_WARNING = 3,
    REDIS_VERSION = api.version, REDIS_VERSION_NUM = api.version_num}
  local lr_mt = {__newindex = readonly_err, __index = function(_, k)
    local v = rawget(lib_redis, k)
    if v == nil then
      error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
    end
    return v
  end}
  local lr = setmetatable({}, lr_mt)
  lr_mt.__metatable = setmetatable({}, {__index = lr_mt, __newindex = readonly_err})
  protected[lr] = true
  lib_api = setmetatable({}, {__index = function(_, k)
    if k == "redis" then return lr end
    error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
  end})
end
local function set_loading(on)
  if on then env_mt.__index = lib_api else env_mt.__index = G end
end
return env, function(f) return xpcall(f, handler) end, redis, set_loading
"#;

/// `xpcall`'s results for the function and `nargs` arguments on the top of the stack, with
/// the message handler at `handler`: (ok, first result), as the run's two return values.
unsafe fn pcall_ok_first(
    state: *mut mlua::ffi::lua_State,
    nargs: std::os::raw::c_int,
    handler: std::os::raw::c_int,
) -> std::os::raw::c_int {
    use mlua::ffi;
    // SAFETY: as the caller's (`eval_run`, `fcall_run`); the call's result and the flag
    // take the slots the function and its arguments held.
    unsafe {
        let status = ffi::lua_pcall(state, nargs, 1, handler);
        ffi::lua_pushboolean(state, (status == 0) as std::os::raw::c_int);
        ffi::lua_insert(state, -2);
    }
    2
}

/// An EVAL's or FCALL's keys and arguments, lent to [`eval_run`] or [`fcall_run`] for the
/// call.
struct EvalItems<'a> {
    keys: &'a [Bytes],
    argv: &'a [Bytes],
    /// The engine's memory after the run (Lua's own count), written by the closure: read
    /// through mlua it took the state's lock once more a run.
    used_memory: std::cell::Cell<usize>,
}

/// The script's (or function's) [`RegistryKey::id`] at argument 1 replaced by the function
/// it names in the registry: read there by the closure, since mlua's `registry_value`
/// took the state's lock and made a handle (and dropped it) on every run.
///
/// [`RegistryKey::id`]: mlua::RegistryKey::id
unsafe fn function_from_registry(state: *mut mlua::ffi::lua_State) {
    use mlua::ffi;
    // SAFETY: as the caller's; one slot is pushed and taken back by the replace.
    unsafe {
        let id = ffi::lua_tointeger(state, 1);
        ffi::lua_rawgeti(state, ffi::LUA_REGISTRYINDEX, id);
        ffi::lua_replace(state, 1);
    }
}

/// Lua's count of the bytes it holds (`collectgarbage("count")` in bytes), into `items`.
unsafe fn note_used_memory(state: *mut mlua::ffi::lua_State, items: &EvalItems<'_>) {
    use mlua::ffi;
    // SAFETY: as the caller's; reads the collector's counters, pushes nothing.
    let (kb, rem) = unsafe {
        (
            ffi::lua_gc(state, ffi::LUA_GCCOUNT, 0),
            ffi::lua_gc(state, ffi::LUA_GCCOUNTB, 0),
        )
    };
    items
        .used_memory
        .set(kb.max(0) as usize * 1024 + rem.max(0) as usize);
}

/// A table of `items` at the top of the stack.
unsafe fn push_strings(state: *mut mlua::ffi::lua_State, items: &[Bytes]) {
    let n = i32::try_from(items.len()).unwrap_or(i32::MAX);
    // SAFETY: `state` is a running C closure's ([`eval_run`], [`fcall_run`]), with one
    // slot over the table.
    unsafe {
        mlua::ffi::lua_createtable(state, n, 0);
        for (i, b) in (1..=n).zip(items) {
            // The bare API function: mlua's wrapper of the same name also reads the
            // string back. (An empty `Bytes` may hold a dangling pointer.)
            let at = if b.is_empty() {
                c"".as_ptr()
            } else {
                b.as_ptr().cast()
            };
            mlua::ffi::lua_pushlstring_(state, at, b.len());
            mlua::ffi::lua_rawseti_(state, -2, i);
        }
    }
}

/// An EVAL's run, called with the script's registry id and a light userdata pointing to its
/// [`EvalItems`]: sets KEYS and ARGV and runs the script as `xpcall(f, handler)` does,
/// returning (ok, first result). Upvalues: the globals table, the message handler and the
/// strings "KEYS" and "ARGV".
/// Written against Lua's C API: the same steps in Lua, or through mlua's handles, cost about
/// as much as the script's own command. Its frame holds nothing to drop, so a Lua error
/// (out of memory) may jump through it to the protected call that called it.
unsafe extern "C-unwind" fn eval_run(state: *mut mlua::ffi::lua_State) -> std::os::raw::c_int {
    use mlua::ffi;
    // SAFETY: called by Lua as the C closure `make_eval_run` makes (four upvalues), only by
    // `run_script`, with the script and a pointer to an `EvalItems` that outlives the call;
    // at most four slots are pushed (LUA_MINSTACK is 20).
    unsafe {
        let items = ffi::lua_touserdata(state, 2) as *const EvalItems<'_>;
        let Some(items) = items.as_ref() else {
            return 0;
        };
        function_from_registry(state);
        let globals = ffi::lua_upvalueindex(1);
        ffi::lua_pushvalue(state, ffi::lua_upvalueindex(3));
        push_strings(state, items.keys);
        ffi::lua_rawset(state, globals);
        ffi::lua_pushvalue(state, ffi::lua_upvalueindex(4));
        push_strings(state, items.argv);
        ffi::lua_rawset(state, globals);
        let handler = ffi::lua_gettop(state) + 1;
        ffi::lua_pushvalue(state, ffi::lua_upvalueindex(2));
        ffi::lua_pushvalue(state, 1);
        let n = pcall_ok_first(state, 0, handler);
        note_used_memory(state, items);
        n
    }
}

/// A function's call (FCALL): as [`eval_run`], with the keys' and arguments' tables passed
/// as the function's two arguments instead of set as globals. Upvalue: the message handler.
unsafe extern "C-unwind" fn fcall_run(state: *mut mlua::ffi::lua_State) -> std::os::raw::c_int {
    use mlua::ffi;
    // SAFETY: as eval_run's (one upvalue, made by `make_fcall_run`); at most five slots.
    unsafe {
        let items = ffi::lua_touserdata(state, 2) as *const EvalItems<'_>;
        let Some(items) = items.as_ref() else {
            return 0;
        };
        function_from_registry(state);
        let handler = ffi::lua_gettop(state) + 1;
        ffi::lua_pushvalue(state, ffi::lua_upvalueindex(1));
        ffi::lua_pushvalue(state, 1);
        push_strings(state, items.keys);
        push_strings(state, items.argv);
        let n = pcall_ok_first(state, 2, handler);
        note_used_memory(state, items);
        n
    }
}

/// [`fcall_run`] as a Lua function, closed over the message handler.
fn make_fcall_run(lua: &Lua, handler: &Function) -> mlua::Result<Function> {
    // SAFETY: as make_eval_run's, over one value.
    unsafe {
        lua.exec_raw::<Function>(handler, |state| {
            mlua::ffi::lua_pushcclosure(state, fcall_run, 1)
        })
    }
}

/// [`eval_run`] as a Lua function, closed over its four upvalues.
fn make_eval_run(lua: &Lua, handler: &Function) -> mlua::Result<Function> {
    // SAFETY: the closure is pushed inside mlua's protected call, over the four values
    // pushed as its arguments, which become its upvalues.
    unsafe {
        lua.exec_raw::<Function>((lua.globals(), handler, "KEYS", "ARGV"), |state| {
            mlua::ffi::lua_pushcclosure(state, eval_run, 4)
        })
    }
}

impl Engine {
    /// `functions`: the engine of FUNCTION/FCALL (with `redis.register_function`), else
    /// EVAL's.
    fn new(functions: bool) -> mlua::Result<Engine> {
        let lua = Lua::new_with(
            StdLib::TABLE | StdLib::STRING | StdLib::MATH,
            LuaOptions::default(),
        )?;
        // Every 100,000 instructions, as Redis's count hook: a kill asked for, or a library
        // body past its load timeout.
        lua.set_hook(
            mlua::HookTriggers::new().every_nth_instruction(100_000),
            |_, _| interrupt(),
        )?;
        let api = lua.create_table()?;
        if functions {
            api.set(
                "register_function",
                lua.create_function(functions::register_function)?,
            )?;
        }
        api.set(
            "killed",
            lua.create_function(|_, ()| Ok(KILL.load(Ordering::Relaxed)))?,
        )?;
        if !functions {
            // The debugger's (`ldb`): no-ops outside a debugging session, as in Redis.
            api.set(
                "breakpoint",
                lua.create_function(|_, ()| Ok(ldb::breakpoint()))?,
            )?;
            api.set(
                "debug",
                lua.create_function(|_, args: MultiValue| {
                    ldb::debug(&args);
                    Ok(())
                })?,
            )?;
        }
        api.set("version", "7.0.15")?;
        api.set("version_num", 0x0007_000f)?;
        api.set(
            "sha1hex",
            lua.create_function(|lua, args: MultiValue| {
                if args.len() != 1 {
                    return Err(raise("wrong number of arguments"));
                }
                let s = match &args[0] {
                    Value::String(s) => s.as_bytes().to_vec(),
                    Value::Number(n) => fmt_g(*n, 14).into_bytes(),
                    Value::Integer(n) => n.to_string().into_bytes(),
                    _ => Vec::new(),
                };
                Ok(Value::String(lua.create_string(sha1_hex(&s))?))
            })?,
        )?;
        api.set(
            "error_reply",
            lua.create_function(|lua, args: MultiValue| {
                let e = match (args.len(), args.front()) {
                    (1, Some(Value::String(s))) => {
                        let s = s.as_bytes();
                        let mut t = Vec::with_capacity(s.len() + 1);
                        if s.first() != Some(&b'-') {
                            t.push(b'-');
                        }
                        t.extend_from_slice(&s);
                        err_table(lua, &String::from_utf8_lossy(&t))?
                    }
                    _ => err_table(lua, "wrong number or type of arguments")?,
                };
                Ok(e)
            })?,
        )?;
        api.set(
            "status_reply",
            lua.create_function(|lua, args: MultiValue| match (args.len(), args.front()) {
                (1, Some(Value::String(s))) => {
                    let t = lua.create_table()?;
                    t.raw_set("ok", s.clone())?;
                    Ok(t)
                }
                _ => err_table(lua, "wrong number or type of arguments"),
            })?,
        )?;
        api.set(
            "log",
            lua.create_function(|_, args: MultiValue| {
                if args.len() < 2 {
                    return Err(raise("redis.log() requires two arguments or more."));
                }
                let level = match &args[0] {
                    Value::Number(n) => *n as i64,
                    Value::Integer(n) => *n,
                    Value::String(s) => {
                        match s.to_str().ok().and_then(|s| s.trim().parse::<f64>().ok()) {
                            Some(n) => n as i64,
                            None => {
                                return Err(raise("First argument must be a number (log level)."))
                            }
                        }
                    }
                    _ => return Err(raise("First argument must be a number (log level).")),
                };
                if !(0..=3).contains(&level) {
                    return Err(raise("Invalid debug level."));
                }
                let mut text = String::new();
                for (i, v) in args.iter().skip(1).enumerate() {
                    let part = match v {
                        Value::String(s) => String::from_utf8_lossy(&s.as_bytes()).into_owned(),
                        Value::Number(n) => fmt_g(*n, 14),
                        Value::Integer(n) => n.to_string(),
                        _ => continue,
                    };
                    if i > 0 {
                        text.push(' ');
                    }
                    text.push_str(&part);
                }
                match level {
                    3 => tracing::warn!(target: "lua", "{text}"),
                    2 => tracing::info!(target: "lua", "{text}"),
                    _ => tracing::debug!(target: "lua", "{text}"),
                }
                Ok(Value::Nil)
            })?,
        )?;
        api.set(
            "set_repl",
            lua.create_function(|_, args: MultiValue| {
                if args.len() != 1 {
                    return Err(raise("redis.set_repl() requires two arguments."));
                }
                let flags = match &args[0] {
                    Value::Number(n) => *n as i64,
                    Value::Integer(n) => *n,
                    _ => 0,
                };
                if flags & !3 != 0 {
                    return Err(raise(
                        "Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.",
                    ));
                }
                crate::store::journal::set_repl(flags as u8);
                Ok(Value::Nil)
            })?,
        )?;
        api.set(
            "acl_check_cmd",
            lua.create_function(|_, args: CallArgs| {
                let argv = args.0.map_err(raise)?;
                let known = crate::commands::resolve(&argv).is_ok();
                CallArgs::recycle(argv);
                if !known {
                    return Err(raise("Invalid command passed to redis.acl_check_cmd()"));
                }
                Ok(Value::Boolean(true))
            })?,
        )?;
        api.set(
            "random",
            lua.create_function(|_, args: MultiValue| {
                let r = (lrand48() % i32::MAX as u32) as f64 / i32::MAX as f64;
                let int = |v: &Value| -> mlua::Result<i64> {
                    match v {
                        Value::Number(n) => Ok(*n as i64),
                        Value::Integer(n) => Ok(*n),
                        Value::String(s) => s
                            .to_str()
                            .ok()
                            .and_then(|s| s.trim().parse::<f64>().ok())
                            .map(|n| n as i64)
                            .ok_or_else(|| mlua::Error::runtime("bad argument (number expected)")),
                        _ => Err(mlua::Error::runtime("bad argument (number expected)")),
                    }
                };
                match args.len() {
                    0 => Ok(r),
                    1 => {
                        let u = int(&args[0])?;
                        if u < 1 {
                            return Err(mlua::Error::runtime(
                                "bad argument #1 to 'random' (interval is empty)",
                            ));
                        }
                        Ok((r * u as f64).floor() + 1.0)
                    }
                    2 => {
                        let l = int(&args[0])?;
                        let u = int(&args[1])?;
                        if l > u {
                            return Err(mlua::Error::runtime(
                                "bad argument #2 to 'random' (interval is empty)",
                            ));
                        }
                        Ok((r * (u - l + 1) as f64).floor() + l as f64)
                    }
                    _ => Err(mlua::Error::runtime("wrong number of arguments")),
                }
            })?,
        )?;
        api.set(
            "randomseed",
            lua.create_function(|_, seed: Value| {
                let s = match seed {
                    Value::Number(n) => n as i64,
                    Value::Integer(n) => n,
                    Value::String(s) => s
                        .to_str()
                        .ok()
                        .and_then(|s| s.trim().parse::<f64>().ok())
                        .map(|n| n as i64)
                        .unwrap_or(0),
                    _ => 0,
                };
                srand48(s as i32);
                Ok(())
            })?,
        )?;
        api.set("cjson", cjson_lib(&lua)?)?;
        api.set("bit", bit_lib(&lua)?)?;
        api.set("cmsgpack", cmsgpack_lib(&lua)?)?;
        api.set("struct", lua_struct::struct_lib(&lua)?)?;
        let handler = lua.create_function(error_handler)?;
        api.set(
            "errtext",
            lua.create_function(|_, e: Value| {
                Ok(match e {
                    Value::Error(e) => raised(&e).unwrap_or_else(|| root_error(&e)),
                    _ => String::new(),
                })
            })?,
        )?;
        let eval_run = make_eval_run(&lua, &handler)?;
        let fcall_run = make_fcall_run(&lua, &handler)?;
        let (env, runner, redis, set_loading): (Table, Function, Table, Function) = lua
            .load(PRELUDE)
            .set_name("=prelude")
            .call((api.clone(), handler))?;
        // redis.setresp needs nothing of the run but the thread's RESP3 flag: made once,
        // not per run as the callbacks that reach the client are.
        redis.raw_set(
            "setresp",
            lua.create_function(|_, args: MultiValue| {
                if args.len() != 1 {
                    return Err(raise("redis.setresp() requires one argument."));
                }
                let v = match &args[0] {
                    Value::Number(n) => *n as i64,
                    Value::Integer(n) => *n,
                    Value::String(s) => s
                        .to_str()
                        .ok()
                        .and_then(|s| s.trim().parse::<f64>().ok())
                        .map(|n| n as i64)
                        .unwrap_or(0),
                    _ => 0,
                };
                if v != 2 && v != 3 {
                    return Err(raise("RESP version must be 2 or 3."));
                }
                ctx_resp3_set(v == 3);
                Ok(Value::Nil)
            })?,
        )?;
        run_callbacks(&lua, &redis)?;
        Ok(Engine {
            lua,
            scripts: hashbrown::HashMap::new(),
            env,
            runner,
            body_bytes: 0,
            fcall_run,
            eval_run,
            set_loading,
            functions: functions::Registry::default(),
        })
    }

    /// Compiles and caches `body` (no-op if cached); returns its SHA1 hex.
    fn create(&mut self, body: &[u8]) -> Result<String, Reply> {
        let sha = sha1_hex(body);
        if self.scripts.contains_key(&sha) {
            return Ok(sha);
        }
        let (flags, skip) = shebang(body).map_err(|e| Reply::error(format!("ERR {e}")))?;
        let func = self
            .lua
            .load(&body[skip..])
            .set_name("@user_script")
            .set_environment(self.env.clone())
            .into_function()
            .map_err(|e| {
                let msg = match e {
                    mlua::Error::SyntaxError { message, .. } => message,
                    e => e.to_string(),
                };
                Reply::error(format!("ERR Error compiling script (new function): {msg}"))
            })?;
        let func = self
            .lua
            .create_registry_value(func)
            .map_err(|e| Reply::error(format!("ERR Error compiling script (new function): {e}")))?;
        self.body_bytes += body.len() + 40;
        self.scripts.insert(sha.clone(), Script { func, flags });
        publish_stats(Some(self));
        Ok(sha)
    }
}

/// Raises Redis's error table for `msg` from a Rust function (see [`Raised`]).
fn raise(msg: &str) -> mlua::Error {
    mlua::Error::external(Raised(err_text(msg)))
}

fn fail(lua: &Lua, msg: &str) -> mlua::Result<(Value, Value)> {
    // Logged in a debugging session that steps, as Redis's `luaPushErrorBuff`.
    if ldb::enabled() {
        ldb::log_error(msg);
    }
    Ok((Value::Nil, Value::Table(err_table(lua, msg)?)))
}

/// Redis's `luaPushErrorBuff`: `-CODE msg` keeps its code, a bare message gets `ERR`.
fn err_table(lua: &Lua, text: &str) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set("err", err_text(text))?;
    Ok(t)
}

fn err_text(text: &str) -> String {
    let (code, msg) = match text.strip_prefix('-') {
        Some(rest) => match rest.split_once(' ') {
            Some((code, msg)) => (code, msg),
            None => ("ERR", rest),
        },
        None => ("ERR", text),
    };
    let msg = msg.trim_matches(|c| c == '\r' || c == '\n');
    format!("{code} {msg}")
}

/// The message handler of a script run: a non-table error becomes `{err="ERR <text>"}`, and
/// the error learns the line of the user script it was raised from.
fn error_handler(lua: &Lua, err: Value) -> mlua::Result<Value> {
    let t = match err {
        Value::Table(t) => t,
        other => {
            let text = match &other {
                Value::String(s) => String::from_utf8_lossy(&s.as_bytes()).into_owned(),
                Value::Nil => "nil".into(),
                Value::Boolean(b) => b.to_string(),
                Value::Number(n) => fmt_g(*n, 14),
                Value::Integer(n) => n.to_string(),
                Value::Error(e) => match raised(e) {
                    Some(text) => {
                        let t = lua.create_table()?;
                        t.raw_set("err", text)?;
                        return locate(lua, t);
                    }
                    None => root_error(e),
                },
                v => v.type_name().to_string(),
            };
            let t = lua.create_table()?;
            t.raw_set("err", format!("ERR {text}"))?;
            t
        }
    };
    locate(lua, t)
}

/// Adds the line of the innermost user-script frame to an error table.
fn locate(lua: &Lua, t: Table) -> mlua::Result<Value> {
    for level in 1..64 {
        let Some(found) = lua.inspect_stack(level, |d| {
            let src = d.source();
            let source = src.source.as_deref().unwrap_or_default();
            let is_user = source == "@user_script" || source == "@user_function";
            (is_user.then(|| source.to_string()), d.current_line())
        }) else {
            break;
        };
        if let (Some(source), Some(line)) = found {
            // A read-only table (the sandbox's) refuses this like Redis's would.
            let _ = t.raw_set("source", source);
            let _ = t.raw_set("line", line as i64);
            break;
        }
    }
    Ok(Value::Table(t))
}

/// An error table raised by redis.call (its `err` text), carried through mlua as an external
/// error so redis.call can be a C function (a Lua wrapper would be tail-called away and lose
/// the caller's line).
#[derive(Debug)]
struct Raised(String);

impl std::fmt::Display for Raised {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Raised {}

fn raised(e: &mlua::Error) -> Option<String> {
    match e {
        mlua::Error::CallbackError { cause, .. } => raised(cause),
        mlua::Error::ExternalError(x) => x.downcast_ref::<Raised>().map(|r| r.0.clone()),
        _ => None,
    }
}

/// The message of an error raised by a Rust callback, without mlua's wrapping.
fn root_error(e: &mlua::Error) -> String {
    match e {
        mlua::Error::CallbackError { cause, .. } => root_error(cause),
        mlua::Error::RuntimeError(m) => m.clone(),
        e => e.to_string(),
    }
}

/// Parses `#!lua flags=a,b` (Redis's `evalExtractShebangFlags`): the flags and the length of
/// the shebang line (the newline stays, so line numbers hold).
fn shebang(body: &[u8]) -> Result<(u32, usize), String> {
    if !body.starts_with(b"#!") {
        return Ok((sflag::COMPAT, 0));
    }
    let Some(end) = body.iter().position(|&b| b == b'\n') else {
        return Err("Invalid script shebang".into());
    };
    let line = String::from_utf8_lossy(&body[..end]);
    let parts: Vec<&str> = line.split_whitespace().collect();
    let Some(engine) = parts.first() else {
        return Err("Invalid engine in script shebang".into());
    };
    if *engine != "#!lua" {
        return Err(format!("Unexpected engine in script shebang: {engine}"));
    }
    let mut flags = 0;
    for p in &parts[1..] {
        let Some(list) = p.strip_prefix("flags=") else {
            return Err(format!("Unknown lua shebang option: {p}"));
        };
        if list.is_empty() {
            continue;
        }
        for f in list.split(',') {
            flags |= match f {
                "no-writes" => sflag::NO_WRITES,
                "allow-oom" => sflag::ALLOW_OOM,
                "allow-stale" => sflag::ALLOW_STALE,
                "no-cluster" => sflag::NO_CLUSTER,
                "allow-cross-slot-keys" => sflag::ALLOW_CROSS_SLOT,
                _ => return Err(format!("Unexpected flag in script shebang: {f}")),
            };
        }
    }
    Ok((flags, end))
}

pub fn sha1_hex(data: &[u8]) -> String {
    use sha1::{Digest, Sha1};
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let digest = Sha1::digest(data);
    let mut out = String::with_capacity(40);
    for b in digest.iter() {
        out.push(HEX[(b >> 4) as usize] as char);
        out.push(HEX[(b & 15) as usize] as char);
    }
    out
}

fn lrand48() -> u32 {
    let mut x = RAND48.load(Ordering::Relaxed);
    x = (x.wrapping_mul(0x5_DEEC_E66D).wrapping_add(0xB)) & 0xFFFF_FFFF_FFFF;
    RAND48.store(x, Ordering::Relaxed);
    (x >> 17) as u32
}

fn srand48(seed: i32) {
    RAND48.store(((seed as u32 as u64) << 16) | 0x330E, Ordering::Relaxed);
}

/// C's `%.<prec>g`.
pub fn fmt_g(x: f64, prec: usize) -> String {
    if x.is_nan() {
        return if x.is_sign_negative() { "-nan" } else { "nan" }.into();
    }
    if x.is_infinite() {
        return if x < 0.0 { "-inf" } else { "inf" }.into();
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0" } else { "0" }.into();
    }
    let p = prec.max(1);
    let e = format!("{:.*e}", p - 1, x);
    let (mant, exp) = e.split_once('e').unwrap_or((&e, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if exp < -4 || exp >= p as i32 {
        let mant = trim_zeros(mant);
        format!("{mant}e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs())
    } else {
        let decimals = (p as i32 - 1 - exp).max(0) as usize;
        trim_zeros(&format!("{x:.decimals$}")).to_string()
    }
}

fn trim_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

const NO_CALL_ARGS: &str = "Please specify at least one argument for this redis lib call";
const BAD_CALL_ARG: &str = "Lua redis lib command arguments must be strings or integers";

/// The arguments of `redis.call` and its siblings as byte strings, or the text of Redis's
/// error for them. Read straight off the Lua stack (Redis's `luaArgsToRedisArgv`): mlua's
/// general path makes a handle per argument first, which cost more than the command a
/// short script runs (about 3,000 instructions for INCR's two arguments).
struct CallArgs(Result<Vec<Bytes>, &'static str>);

thread_local! {
    /// The buffer `redis.call`'s arguments are cut from and the vector that lists them,
    /// kept between calls: once a command has dropped its arguments, the buffer is whole
    /// again and the next call writes over it, so a call allocates nothing. (Commands copy
    /// what they keep, as they do with the slices of a connection's read buffer.)
    static CALL_BUFFERS: std::cell::RefCell<(BytesMut, Vec<Bytes>)> =
        std::cell::RefCell::new((BytesMut::new(), Vec::new()));
}

/// What [`CALL_BUFFERS`]'s buffer holds at least before a call's arguments are written:
/// a call whose arguments fit cuts them all from it.
const CALL_BUFFER_BYTES: usize = 1024;

impl CallArgs {
    /// Cuts the arguments from the thread's buffer; `next` writes argument `i`'s bytes
    /// into it, or says it is neither a string nor a number.
    fn read(n: usize, next: impl FnMut(usize, &mut BytesMut) -> bool) -> CallArgs {
        if n == 0 {
            return CallArgs(Err(NO_CALL_ARGS));
        }
        CALL_BUFFERS.with(|b| match b.try_borrow_mut() {
            Ok(mut b) => {
                let (buf, list) = &mut *b;
                Self::cut(n, buf, list, next)
            }
            // Never expected (a call reads its arguments before running its command), but
            // buffers of its own are as good.
            Err(_) => Self::cut(n, &mut BytesMut::new(), &mut Vec::new(), next),
        })
    }

    fn cut(
        n: usize,
        buf: &mut BytesMut,
        list: &mut Vec<Bytes>,
        mut next: impl FnMut(usize, &mut BytesMut) -> bool,
    ) -> CallArgs {
        // Whole again once the last call's arguments are dropped: reserving then takes the
        // buffer back from its start, where reserving per argument, while the call's
        // earlier arguments still hold it, would allocate a new one.
        buf.reserve(CALL_BUFFER_BYTES);
        let mut argv = std::mem::take(list);
        argv.reserve(n);
        for i in 0..n {
            if !next(i, buf) {
                buf.clear();
                argv.clear();
                *list = argv;
                return CallArgs(Err(BAD_CALL_ARG));
            }
            argv.push(buf.split().freeze());
        }
        CallArgs(Ok(argv))
    }

    /// Gives the vector back for the next call (the buffer comes back whole as the last
    /// argument is dropped).
    fn recycle(mut argv: Vec<Bytes>) {
        argv.clear();
        CALL_BUFFERS.with(|b| {
            if let Ok(mut b) = b.try_borrow_mut() {
                if b.1.capacity() < argv.capacity() {
                    b.1 = argv;
                }
            }
        });
    }
}

impl mlua::FromLuaMulti for CallArgs {
    fn from_lua_multi(values: MultiValue, _: &Lua) -> mlua::Result<Self> {
        Ok(CallArgs::read(values.len(), |i, buf| match &values[i] {
            Value::String(s) => {
                buf.extend_from_slice(&s.as_bytes());
                true
            }
            Value::Number(n) => {
                number_arg(*n, buf);
                true
            }
            Value::Integer(n) => {
                number_arg(*n as f64, buf);
                true
            }
            _ => false,
        }))
    }

    unsafe fn from_stack_args(
        nargs: std::os::raw::c_int,
        _: usize,
        _: Option<&str>,
        lua: &mlua::state::RawLua,
    ) -> mlua::Result<Self> {
        use mlua::ffi;
        let state = lua.state();
        let n = nargs.max(0) as usize;
        // SAFETY: the callback's `nargs` arguments are the top of `state`'s stack while it
        // runs; reading a string's bytes or a number raises no Lua error, and the bytes are
        // copied before the callback returns.
        Ok(CallArgs::read(n, |i, buf| unsafe {
            let idx = i as std::os::raw::c_int - nargs;
            match ffi::lua_type(state, idx) {
                ffi::LUA_TSTRING => {
                    let mut len = 0usize;
                    let p = ffi::lua_tolstring(state, idx, &mut len);
                    if !p.is_null() {
                        buf.extend_from_slice(std::slice::from_raw_parts(p.cast::<u8>(), len));
                    }
                    true
                }
                ffi::LUA_TNUMBER => {
                    number_arg(ffi::lua_tonumber(state, idx), buf);
                    true
                }
                _ => false,
            }
        }))
    }
}

/// A Lua number as redis.call passes it: C's `%.17g` (Redis's `luaRedisGenericCommand`),
/// whose output for a whole number below 10^15 is its digits.
fn number_arg(n: f64, buf: &mut BytesMut) {
    if n.fract() == 0.0 && n.abs() < 1e15 && !(n == 0.0 && n.is_sign_negative()) {
        buf.extend_from_slice(itoa::Buffer::new().format(n as i64).as_bytes());
    } else {
        buf.extend_from_slice(fmt_g(n, 17).as_bytes());
    }
}

// ---------------------------------------------------------------------------------------------
// Running a script.

/// What one run knows: its flags and whether it wrote yet.
#[derive(Clone, Copy)]
struct Run {
    read_only: bool,
    allow_oom: bool,
    oom_at_start: bool,
    dirty: bool,
    /// Cluster mode: the slot of the keys the script declared or first touched, and
    /// whether it may touch keys of other slots (`allow-cross-slot-keys`).
    slot: Option<u16>,
    cross_slot: bool,
}

fn eval(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    Ok(detach(ctx, args.all(), |ctx, argv| {
        eval_generic(ctx, argv, false, false)
    }))
}
fn evalsha(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    no_debug_evalsha(ctx, args.all())?;
    Ok(detach(ctx, args.all(), |ctx, argv| {
        eval_generic(ctx, argv, true, false)
    }))
}
fn eval_ro(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    Ok(detach(ctx, args.all(), |ctx, argv| {
        eval_generic(ctx, argv, false, true)
    }))
}
fn evalsha_ro(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    no_debug_evalsha(ctx, args.all())?;
    Ok(detach(ctx, args.all(), |ctx, argv| {
        eval_generic(ctx, argv, true, true)
    }))
}

/// A client in debug mode debugs EVAL only (a SHA of the wrong length is NOSCRIPT first, as
/// in Redis's `evalShaCommand`).
fn no_debug_evalsha(ctx: &Ctx<'_>, argv: &[Bytes]) -> Result<(), CommandError> {
    if ctx.client.script_debug && argv.get(1).is_some_and(|sha| sha.len() == 40) {
        return Err(CommandError::msg(
            "ERR Please use EVAL instead of EVALSHA for debugging",
        ));
    }
    Ok(())
}

const NO_REPLICAS: &str = "NOREPLICAS Not enough good replicas to write.";

fn noscript() -> Reply {
    Reply::error("NOSCRIPT No matching script. Please use EVAL.")
}

fn eval_generic(ctx: &mut Ctx<'_>, argv: &[Bytes], evalsha: bool, ro: bool) -> Reply {
    if ctx.server.pubsub.monitoring() {
        let from = ctx.client.handle.addr.to_string();
        ctx.server.pubsub.feed_monitors(ctx.client.db, &from, argv);
    }
    if evalsha && argv[1].len() != 40 {
        return noscript();
    }
    // On a debugging session's thread, this EVAL is the session (`ldb`): it starts before
    // the arguments are checked, as Redis's `evalGenericCommandWithDebugging`.
    let debugging = !evalsha && ldb::begin(&argv[1]);
    let numkeys = match crate::util::num::parse_i64(&argv[2]) {
        Some(n) => n,
        None => return Reply::error("ERR value is not an integer or out of range"),
    };
    if numkeys > (argv.len() - 3) as i64 {
        return Reply::error("ERR Number of keys can't be greater than number of args");
    }
    if numkeys < 0 {
        return Reply::error("ERR Number of keys can't be negative");
    }
    let numkeys = numkeys as usize;
    let mut guard = ENGINE.lock();
    let eng = match engine(&mut guard) {
        Ok(e) => e,
        Err(r) => return r,
    };
    // EVALSHA's SHA lowercased on the stack (no allocation a run).
    let mut lower = [0u8; 40];
    let created;
    let sha: &str = if evalsha {
        for (d, s) in lower.iter_mut().zip(argv[1].iter()) {
            *d = s.to_ascii_lowercase();
        }
        match std::str::from_utf8(&lower) {
            Ok(s) => s,
            Err(_) => return noscript(),
        }
    } else {
        created = match eng.create(&argv[1]) {
            Ok(s) => s,
            Err(r) => return r,
        };
        &created
    };
    let Some(script) = eng.scripts.get(sha) else {
        return noscript();
    };
    let callable = Callable {
        func: script.func.id(),
        flags: script.flags,
        name: sha,
        function: false,
    };
    if debugging {
        // The line hook for this run only: other runs keep the instruction hook alone.
        ldb::set_env(&eng.env);
        let _ = eng.lua.set_hook(
            mlua::HookTriggers::new()
                .every_line()
                .every_nth_instruction(100_000),
            ldb::hook,
        );
    }
    let reply = run_callable(
        eng,
        ctx,
        callable,
        &argv[3..3 + numkeys],
        &argv[3 + numkeys..],
        ro,
    );
    if debugging {
        let _ = eng.lua.set_hook(
            mlua::HookTriggers::new().every_nth_instruction(100_000),
            |_, _| interrupt(),
        );
    }
    reply
}

/// What a run calls: a cached script (named by its SHA1) or a library's function.
struct Callable<'n> {
    /// The function's [`mlua::RegistryKey::id`] (the closures read it from the registry).
    func: std::os::raw::c_int,
    flags: u32,
    name: &'n str,
    function: bool,
}

/// Runs a script or function with Redis's flag checks (`scriptPrepareForRun`), on the
/// script client `ctx`, which holds the exec gate exclusively.
fn run_callable(
    eng: &Engine,
    ctx: &mut Ctx<'_>,
    c: Callable<'_>,
    keys: &[Bytes],
    args: &[Bytes],
    ro: bool,
) -> Reply {
    let flags = c.flags;
    let compat = flags & sflag::COMPAT != 0;
    // A script's flags are its command's (Redis's scriptFlagsToCmdFlags): one that may
    // write is a write on a read-only replica, one without allow-stale is refused while
    // the replica serves no stale data (so is any script without a shebang).
    if !compat && flags & sflag::NO_WRITES == 0 && crate::state::replication::refuses_writes() {
        return Reply::error(crate::state::replication::READONLY_ERR);
    }
    if crate::state::replication::refuses_stale() && (compat || flags & sflag::ALLOW_STALE == 0) {
        return Reply::error(crate::state::replication::MASTERDOWN_ERR);
    }
    // Redis's scriptPrepareForRun checks no-cluster first.
    if !compat && flags & sflag::NO_CLUSTER != 0 && ctx.server.cluster.get().is_some() {
        return Reply::error("ERR Can not run script on cluster, 'no-cluster' flag is set.");
    }
    let oom = crate::store::eviction::maxmemory() > 0
        && !crate::store::eviction::make_room(&ctx.server.store);
    if !compat {
        if ro && flags & sflag::NO_WRITES == 0 {
            return Reply::error(
                "ERR Can not execute a script with write flag using *_ro command.",
            );
        }
        // A script that may write is a write command (Redis's scriptPrepareForRun).
        if flags & sflag::NO_WRITES == 0 && crate::state::NO_GOOD_REPLICAS.load(Ordering::Relaxed) {
            return Reply::error(NO_REPLICAS);
        }
        if oom && flags & (sflag::ALLOW_OOM | sflag::NO_WRITES) == 0 {
            return Reply::error("OOM allow-oom flag is not set on the script, can not run it when used memory > 'maxmemory'");
        }
    }
    let mut run = Run {
        read_only: ro || (!compat && flags & sflag::NO_WRITES != 0),
        allow_oom: !compat && flags & sflag::ALLOW_OOM != 0,
        oom_at_start: oom,
        dirty: false,
        slot: keys.first().map(|k| crate::state::cluster::key_slot(k)),
        // Scripts without a shebang keep the cross-slot access Redis 6 allowed.
        cross_slot: compat || flags & sflag::ALLOW_CROSS_SLOT != 0,
    };
    // The script's client: RESP2 until redis.setresp(3), its own SELECT, never blocking.
    let saved_db = ctx.client.db;
    let saved_resp3 = ctx.client.resp3;
    CALLER_RESP3.with(|c| c.set(saved_resp3));
    let saved_in_exec = ctx.client.in_exec;
    ctx.client.resp3 = false;
    ctx.client.in_exec = true;
    KILL.store(false, Ordering::Release);
    RUN_DIRTY.store(false, Ordering::Release);
    let kind = if c.function {
        SCRIPT_FUNCTION
    } else {
        SCRIPT_EVAL
    };
    ctx.server.exec_gate.script_started(kind);
    IN_SCRIPT.with(|s| s.set(true));
    // Keys do not expire mid-run: the run sees the time it started (util/clock).
    let frozen = crate::util::clock::freeze();
    let result = run_script(eng, ctx, &mut run, &c, keys, args);
    drop(frozen);
    IN_SCRIPT.with(|s| s.set(false));
    ctx.server.exec_gate.script_ended();
    KILL.store(false, Ordering::Release);
    ctx.client.resp3 = saved_resp3;
    ctx.client.in_exec = saved_in_exec;
    if ctx.client.db != saved_db {
        ctx.client.db = saved_db;
        ctx.client.with_meta(|m| m.db = saved_db);
    }
    match result {
        Ok(r) => r,
        Err(e) => Reply::error(format!("ERR Error running script: {}", root_error(&e))),
    }
}

/// What a run's `redis.call` / `redis.pcall` / `redis.acl_check_cmd` reach: the script's
/// client, moved here for the run (see [`run_script`]), and the run's flags.
struct RunState {
    server: Arc<crate::state::Server>,
    client: crate::state::client::ClientState,
    run: Run,
}

thread_local! {
    /// The run in progress on this thread (None between runs: the callbacks then raise).
    static CURRENT: std::cell::RefCell<Option<RunState>> = const { std::cell::RefCell::new(None) };
    /// A client state kept to stand in the caller's `Ctx` while its own is moved into
    /// [`CURRENT`] (nothing reads it meanwhile), so a run allocates none.
    static SPARE: std::cell::RefCell<Option<crate::state::client::ClientState>> =
        const { std::cell::RefCell::new(None) };
}

/// Moves the run's client state and flags back from [`CURRENT`] when dropped.
struct Restore<'c> {
    client: &'c mut crate::state::client::ClientState,
    run: &'c mut Run,
}

impl Drop for Restore<'_> {
    fn drop(&mut self) {
        if let Some(st) = CURRENT.with(|cur| cur.borrow_mut().take()) {
            *self.run = st.run;
            let spare = std::mem::replace(self.client, st.client);
            SPARE.with(|s| *s.borrow_mut() = Some(spare));
        }
    }
}

/// Runs `f` on the run in progress; outside a run (a callback kept past its run), an error.
fn with_run<R>(f: impl FnOnce(&mut Ctx<'_>, &mut Run) -> mlua::Result<R>) -> mlua::Result<R> {
    CURRENT.with(|cur| {
        let mut cur = cur
            .try_borrow_mut()
            .map_err(|_| raise("redis.call reentered"))?;
        let Some(st) = cur.as_mut() else {
            return Err(raise("redis.call is only available while a script runs"));
        };
        let mut ctx = Ctx {
            server: &st.server,
            client: &mut st.client,
        };
        f(&mut ctx, &mut st.run)
    })
}

/// `redis.call`, `redis.pcall` and `redis.acl_check_cmd`, made once per engine: the closures
/// find the run through [`CURRENT`], so a run creates (and the collector frees) none of them.
fn run_callbacks(lua: &Lua, redis: &Table) -> mlua::Result<()> {
    let call = lua.create_function(|lua, args: CallArgs| {
        match with_run(|ctx, run| redis_call(lua, ctx, run, args))? {
            (_, Value::Table(e)) => {
                let text: String = e.raw_get("err")?;
                Err(mlua::Error::external(Raised(text)))
            }
            (v, _) => Ok(v),
        }
    })?;
    let pcall = lua.create_function(|lua, args: CallArgs| {
        match with_run(|ctx, run| redis_call(lua, ctx, run, args))? {
            (_, Value::Table(e)) => Ok(Value::Table(e)),
            (v, _) => Ok(v),
        }
    })?;
    // redis.acl_check_cmd: whether the script's user may run a command (ACL).
    let acl_check = lua.create_function(|_, args: CallArgs| {
        let argv = args.0.map_err(raise)?;
        let may = with_run(|ctx, _| Ok(crate::commands::acl::script_may_run(ctx, &argv)));
        CallArgs::recycle(argv);
        match may? {
            Some(ok) => Ok(Value::Boolean(ok)),
            None => Err(raise("Invalid command passed to redis.acl_check_cmd()")),
        }
    })?;
    redis.raw_set("call", call)?;
    redis.raw_set("pcall", pcall)?;
    redis.raw_set("acl_check_cmd", acl_check)?;
    Ok(())
}

fn run_script(
    eng: &Engine,
    ctx: &mut Ctx<'_>,
    run: &mut Run,
    c: &Callable<'_>,
    keys: &[Bytes],
    argv: &[Bytes],
) -> mlua::Result<Reply> {
    let lua = &eng.lua;
    // The caller's client state moves into CURRENT for the run (a spare stands in its
    // place) and back after it: the callbacks made once per engine reach it there, with no
    // borrow to tie them to this frame.
    let spare = SPARE.with(|s| s.borrow_mut().take()).unwrap_or_else(|| {
        crate::state::client::ClientState::new(ctx.client.handle.clone(), false)
    });
    let client = std::mem::replace(ctx.client, spare);
    let placed = CURRENT.with(|cur| match cur.try_borrow_mut() {
        Ok(mut cur) if cur.is_none() => {
            *cur = Some(RunState {
                server: ctx.server.clone(),
                client,
                run: *run,
            });
            None
        }
        _ => Some(client),
    });
    if let Some(client) = placed {
        // A run inside a run cannot happen (scripts are NOSCRIPT); refuse rather than mix.
        let spare = std::mem::replace(ctx.client, client);
        SPARE.with(|s| *s.borrow_mut() = Some(spare));
        return Err(raise("a script is already running on this thread"));
    }
    // Put back by a guard, so a panic out of a callback (caught on the script thread)
    // cannot leave the next run finding a run in progress.
    let guard = Restore {
        client: &mut *ctx.client,
        run,
    };
    RESP3.with(|c| c.set(false));
    // The keys and arguments are lent to the C closure that makes their tables: KEYS and
    // ARGV for an EVAL, a function's two arguments for FCALL.
    let items = EvalItems {
        keys,
        argv,
        used_memory: std::cell::Cell::new(0),
    };
    let at = LightUserData(std::ptr::from_ref(&items).cast_mut().cast());
    let run = if c.function {
        &eng.fcall_run
    } else {
        &eng.eval_run
    };
    let res = run.call::<(bool, Value)>((c.func, at));
    drop(guard);
    if c.function {
        functions::note_vm_memory(items.used_memory.get());
    } else {
        LUA_MEMORY.store(items.used_memory.get() as u64, Ordering::Relaxed);
    }
    let out = res.map(|(ok, val)| {
        let resp3 = RESP3.with(|c| c.get());
        if ok {
            lua_to_reply(&val, resp3, 0)
        } else {
            script_error(&val, c.name)
        }
    });
    // Redis steps the collector every 50 runs so garbage never piles up to a full cycle.
    GC_COUNT.with(|c| {
        let n = c.get() + 1;
        if n >= 50 {
            let _ = lua.gc_step();
            c.set(0);
        } else {
            c.set(n);
        }
    });
    out
}

/// The instruction hook: raises the kill SCRIPT KILL / FUNCTION KILL asked for, or stops a
/// library body that loads for too long.
fn interrupt() -> mlua::Result<mlua::VmState> {
    maybe_hand_off();
    if KILL.load(Ordering::Relaxed) {
        tracing::warn!("Lua script killed by user with SCRIPT KILL.");
        return Err(raise("Script killed by user with SCRIPT KILL..."));
    }
    if functions::load_timed_out() {
        return Err(raise("FUNCTION LOAD timeout"));
    }
    Ok(mlua::VmState::Continue)
}

/// Whether the command running on this thread was called by a script (Redis's
/// `CLIENT_SCRIPT`: SORT then sorts a set even `BY` a constant, so the result is the same on
/// every run).
pub fn in_script() -> bool {
    IN_SCRIPT.with(|s| s.get())
}

thread_local! {
    static IN_SCRIPT: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// The RESP version the running script chose (redis.setresp); reset at each run.
    static RESP3: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    static GC_COUNT: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
    /// The protocol of the client the running script answers: a `big_number` reply is a
    /// RESP3 big number to a RESP3 client, a bulk string to a RESP2 one (Redis's
    /// `addReplyBigNum`).
    static CALLER_RESP3: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

fn ctx_resp3_set(v: bool) {
    RESP3.with(|c| c.set(v));
}

/// The reply of a script that raised an error (Redis's `luaCallFunction` error path).
fn script_error(val: &Value, sha: &str) -> Reply {
    let Value::Table(t) = val else {
        let msg = match val {
            Value::String(s) => String::from_utf8_lossy(&s.as_bytes()).into_owned(),
            _ => "execution failure".into(),
        };
        let msg: String = msg.chars().take(100).collect();
        return Reply::error(format!("ERR Error running script {sha}, {msg}"));
    };
    let msg = match t.raw_get::<Value>("err") {
        Ok(Value::String(s)) => String::from_utf8_lossy(&s.as_bytes()).into_owned(),
        _ => String::new(),
    };
    let source = t.raw_get::<Option<String>>("source").ok().flatten();
    let line = match t.raw_get::<Value>("line") {
        Ok(Value::Integer(n)) => Some(n.to_string()),
        Ok(Value::Number(n)) => Some(fmt_g(n, 14)),
        _ => None,
    };
    let mut out = msg;
    if let (Some(source), Some(line)) = (source, line) {
        out.push_str(&format!(" script: {sha}, on {source}:{line}."));
    }
    Reply::Error(out.replace(['\r', '\n'], " "))
}

/// redis.call / redis.pcall: runs one command through the command table. Returns the
/// converted reply, or (nil, error table).
fn redis_call(
    lua: &Lua,
    ctx: &mut Ctx<'_>,
    run: &mut Run,
    args: CallArgs,
) -> mlua::Result<(Value, Value)> {
    let argv = match args.0 {
        Ok(a) => a,
        Err(e) => {
            if ldb::enabled() {
                ldb::log_error(&err_text(e));
            }
            return Ok((Value::Nil, Value::Table(err_table(lua, e)?)));
        }
    };
    let out = call_with(lua, ctx, run, &argv);
    CallArgs::recycle(argv);
    out
}

/// Why a command a script calls may not run on this cluster node, if it may not.
fn cluster_refusal(
    ctx: &Ctx<'_>,
    run: &mut Run,
    spec: &CommandSpec,
    argv: &[Bytes],
) -> Option<&'static str> {
    let c = ctx.server.cluster.get()?;
    // The master's stream and a load run whatever they hold (never redirected).
    if crate::state::replication::applying() || crate::store::journal::loading() {
        return None;
    }
    let (pos, pubsubshard) = spec.routing_positions(argv);
    let keys: Vec<&[u8]> = pos.into_iter().map(|i| argv[i].as_ref()).collect();
    let store = &ctx.server.store;
    let route = c.route(
        &crate::state::cluster::Query {
            keys: &keys,
            write: spec.has(WRITE),
            pubsubshard,
            asking: false,
            readonly: ctx.client.cluster_readonly,
            migrate: false,
        },
        &|k| store.holds(0, spec.has(COLLECTION), k),
    );
    use crate::state::cluster::Route;
    match route {
        Route::Here => {}
        Route::DownReadOnly => return Some(
            "Script attempted to execute a write command while the cluster is down and readonly",
        ),
        Route::Down => {
            return Some("Script attempted to execute a command while the cluster is down")
        }
        _ => return Some("Script attempted to access a non local key in a cluster node"),
    }
    if let (Some(first), false) = (keys.first(), run.cross_slot) {
        let slot = crate::state::cluster::key_slot(first);
        match run.slot {
            None => run.slot = Some(slot),
            Some(s) if s != slot => {
                return Some("Script attempted to access keys that do not hash to the same slot")
            }
            Some(_) => {}
        }
    }
    None
}

/// [`redis_call`] once its arguments are read.
fn call_with(
    lua: &Lua,
    ctx: &mut Ctx<'_>,
    run: &mut Run,
    argv: &[Bytes],
) -> mlua::Result<(Value, Value)> {
    // A debugging session that steps logs the command and its reply (Redis's
    // `luaRedisGenericCommand`).
    if ldb::enabled() {
        ldb::log_command(argv);
    }
    let spec = match resolve(argv) {
        Ok(s) => s,
        Err(Reply::Error(e)) if e.starts_with("ERR wrong number") => {
            return fail(
                lua,
                "Wrong number of args calling Redis command from script",
            )
        }
        Err(_) => return fail(lua, "Unknown Redis command called from script"),
    };
    let _ = table;
    // A refusal of a known command counts as its rejected call (Redis's scriptCall), and
    // the script's error repeating it is not counted twice.
    let refuse = |lua: &Lua, msg: &str| {
        crate::commands::stats::rejected_in_script(spec, &err_text(msg));
        fail(lua, msg)
    };
    if spec.has(NOSCRIPT) && !DENY_SCRIPTS_DISABLED.load(Ordering::Relaxed) {
        return refuse(lua, "This Redis command is not allowed from script");
    }
    if let Err(e) = crate::commands::acl::check_in_script(ctx, spec, argv) {
        return refuse(lua, &e);
    }
    if run.read_only && spec.has(WRITE) {
        return refuse(
            lua,
            "Write commands are not allowed from read-only scripts.",
        );
    }
    // A read-only replica: a script without flags is refused its first write (Redis's
    // scriptVerifyWriteCommandAllow; once it wrote, it runs to its end).
    if spec.has(WRITE) && !run.dirty && crate::state::replication::refuses_writes() {
        return refuse(
            lua,
            &format!("-{}", crate::state::replication::READONLY_ERR),
        );
    }
    // A replica cut off from its master with replica-serve-stale-data no (an allow-stale
    // script got this far): only commands flagged stale (Redis's scriptVerifyAllowStale).
    if !spec.has(STALE) && crate::state::replication::refuses_stale() {
        return refuse(lua, "Can not execute the command on a stale replica");
    }
    // min-replicas-to-write: a script without flags is refused its first write (Redis's
    // scriptVerifyWriteCommandAllow; once it wrote, it runs to its end).
    if spec.has(WRITE) && !run.dirty && crate::state::NO_GOOD_REPLICAS.load(Ordering::Relaxed) {
        return refuse(lua, &format!("-{NO_REPLICAS}"));
    }
    if !run.allow_oom && !run.dirty && run.oom_at_start && spec.has(DENYOOM) {
        return refuse(
            lua,
            "-OOM command not allowed when used memory > 'maxmemory'.",
        );
    }
    // Cluster mode: every key the script touches is served here, in one slot (Redis's
    // scriptVerifyClusterState).
    if let Some(e) = cluster_refusal(ctx, run, spec, argv) {
        return refuse(lua, e);
    }
    if spec.has(WRITE) {
        run.dirty = true;
        RUN_DIRTY.store(true, Ordering::Release);
    }
    let resp3 = RESP3.with(|c| c.get());
    ctx.client.resp3 = resp3;
    let reply = execute(ctx, spec, argv);
    if ldb::enabled() {
        // An error reply is logged twice, as Redis converts it to Lua through
        // `luaPushError` (which logs it) and then logs the reply.
        if let Reply::Error(e) = &reply {
            ldb::log_error(&format!("-{e}"));
        }
        ldb::log_reply(&reply, resp3);
    }
    if let Reply::Error(e) = &reply {
        let mut text = String::with_capacity(e.len() + 1);
        text.push('-');
        text.push_str(e);
        return Ok((Value::Nil, Value::Table(err_table(lua, &text)?)));
    }
    // The common replies straight into Lua values (what their RESP would convert to, in
    // either protocol); the rest through their RESP, as Redis converts a reply.
    let v = match &reply {
        Reply::Int(n) => Value::Number(*n as f64),
        Reply::Bulk(b) => Value::String(lua.create_string(b)?),
        Reply::Simple(text) => {
            let t = lua.create_table()?;
            t.raw_set("ok", lua.create_string(text)?)?;
            Value::Table(t)
        }
        _ => {
            let mut buf = BytesMut::new();
            reply.encode(&mut buf, resp3);
            let mut pos = 0;
            resp_to_lua(lua, &buf, &mut pos)?
        }
    };
    Ok((v, Value::Nil))
}

fn read_line<'b>(buf: &'b [u8], pos: &mut usize) -> &'b [u8] {
    let start = *pos;
    let end = buf[start..]
        .windows(2)
        .position(|w| w == b"\r\n")
        .map(|i| start + i)
        .unwrap_or(buf.len());
    *pos = (end + 2).min(buf.len());
    &buf[start..end]
}

fn line_i64(l: &[u8]) -> i64 {
    std::str::from_utf8(l)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

/// Redis's `redisProtocolToLuaType`: one RESP value from `buf` at `pos` as a Lua value.
fn resp_to_lua(lua: &Lua, buf: &[u8], pos: &mut usize) -> mlua::Result<Value> {
    if *pos >= buf.len() {
        return Ok(Value::Nil);
    }
    let kind = buf[*pos];
    *pos += 1;
    let line = read_line(buf, pos);
    Ok(match kind {
        b'+' => {
            let t = lua.create_table()?;
            t.raw_set("ok", lua.create_string(line)?)?;
            Value::Table(t)
        }
        b'-' => {
            let mut text = vec![b'-'];
            text.extend_from_slice(line);
            Value::Table(err_table(lua, &String::from_utf8_lossy(&text))?)
        }
        b':' => Value::Number(line_i64(line) as f64),
        b'$' | b'=' => {
            let n = line_i64(line);
            if n < 0 {
                return Ok(Value::Boolean(false));
            }
            let end = (*pos + n as usize).min(buf.len());
            let data = &buf[*pos..end];
            *pos = (end + 2).min(buf.len());
            if kind == b'=' && data.len() >= 4 {
                let t = lua.create_table()?;
                let inner = lua.create_table()?;
                inner.raw_set("string", lua.create_string(&data[4..])?)?;
                inner.raw_set("format", lua.create_string(&data[..3])?)?;
                t.raw_set("verbatim_string", inner)?;
                Value::Table(t)
            } else {
                Value::String(lua.create_string(data)?)
            }
        }
        b'*' | b'>' => {
            let n = line_i64(line);
            if n < 0 {
                return Ok(Value::Boolean(false));
            }
            let t = lua.create_table()?;
            for i in 0..n {
                let v = resp_to_lua(lua, buf, pos)?;
                t.raw_set(i + 1, v)?;
            }
            Value::Table(t)
        }
        b'%' => {
            let n = line_i64(line);
            let t = lua.create_table()?;
            let m = lua.create_table()?;
            for _ in 0..n {
                let k = resp_to_lua(lua, buf, pos)?;
                let v = resp_to_lua(lua, buf, pos)?;
                if !k.is_nil() {
                    m.raw_set(k, v)?;
                }
            }
            t.raw_set("map", m)?;
            Value::Table(t)
        }
        b'~' => {
            let n = line_i64(line);
            let t = lua.create_table()?;
            let s = lua.create_table()?;
            for _ in 0..n {
                let k = resp_to_lua(lua, buf, pos)?;
                if !k.is_nil() {
                    s.raw_set(k, true)?;
                }
            }
            t.raw_set("set", s)?;
            Value::Table(t)
        }
        b',' => {
            let text = String::from_utf8_lossy(line);
            let d = match text.as_ref() {
                "inf" => f64::INFINITY,
                "-inf" => f64::NEG_INFINITY,
                "nan" | "-nan" => f64::NAN,
                s => s.parse().unwrap_or(0.0),
            };
            let t = lua.create_table()?;
            t.raw_set("double", d)?;
            Value::Table(t)
        }
        b'(' => {
            let t = lua.create_table()?;
            t.raw_set("big_number", lua.create_string(line)?)?;
            Value::Table(t)
        }
        b'#' => Value::Boolean(line == b"t"),
        b'_' => Value::Nil,
        b'|' => {
            let n = line_i64(line);
            for _ in 0..2 * n {
                resp_to_lua(lua, buf, pos)?;
            }
            resp_to_lua(lua, buf, pos)?
        }
        _ => Value::Nil,
    })
}

/// Redis's `luaReplyToRedisReply`.
fn lua_to_reply(v: &Value, resp3: bool, depth: usize) -> Reply {
    if depth > 1000 {
        return Reply::error("ERR reached lua stack limit");
    }
    match v {
        Value::String(s) => Reply::Bulk(Bytes::copy_from_slice(&s.as_bytes())),
        Value::Boolean(b) => {
            if resp3 {
                Reply::Bool(*b)
            } else if *b {
                Reply::Int(1)
            } else {
                Reply::Nil
            }
        }
        // C's `(long long)` of a double: out of range (or NaN) gives INT64_MIN on x86-64.
        Value::Number(n) if !(i64::MIN as f64..-(i64::MIN as f64)).contains(n) => {
            Reply::Int(i64::MIN)
        }
        Value::Number(n) => Reply::Int(*n as i64),
        Value::Integer(n) => Reply::Int(*n),
        Value::Table(t) => table_to_reply(t, resp3, depth),
        _ => Reply::Nil,
    }
}

fn table_to_reply(t: &Table, resp3: bool, depth: usize) -> Reply {
    let one_line = |s: &[u8]| String::from_utf8_lossy(s).replace(['\r', '\n'], " ");
    if let Ok(Value::String(e)) = t.raw_get::<Value>("err") {
        return Reply::Error(one_line(&e.as_bytes()));
    }
    if let Ok(Value::String(s)) = t.raw_get::<Value>("ok") {
        return Reply::Status(one_line(&s.as_bytes()));
    }
    match t.raw_get::<Value>("double") {
        Ok(Value::Number(d)) => return Reply::Double(d),
        Ok(Value::Integer(d)) => return Reply::Double(d as f64),
        _ => {}
    }
    if let Ok(Value::String(s)) = t.raw_get::<Value>("big_number") {
        let text = one_line(&s.as_bytes());
        if CALLER_RESP3.with(|c| c.get()) {
            return Reply::Encoded(Bytes::from(format!("({text}\r\n")));
        }
        return Reply::Bulk(Bytes::from(text));
    }
    if let Ok(Value::Table(v)) = t.raw_get::<Value>("verbatim_string") {
        if let (Ok(Value::String(_)), Ok(Value::String(s))) =
            (v.raw_get::<Value>("format"), v.raw_get::<Value>("string"))
        {
            return Reply::Verbatim(Bytes::copy_from_slice(&s.as_bytes()));
        }
    }
    if let Ok(Value::Table(m)) = t.raw_get::<Value>("map") {
        let mut out = Vec::new();
        for (k, v) in m.pairs::<Value, Value>().flatten() {
            out.push((
                lua_to_reply(&k, resp3, depth + 1),
                lua_to_reply(&v, resp3, depth + 1),
            ));
        }
        return Reply::Map(out);
    }
    if let Ok(Value::Table(s)) = t.raw_get::<Value>("set") {
        let mut out = Vec::new();
        for (k, _) in s.pairs::<Value, Value>().flatten() {
            out.push(lua_to_reply(&k, resp3, depth + 1));
        }
        return Reply::Set(out);
    }
    let mut out = Vec::new();
    for i in 1.. {
        match t.raw_get::<Value>(i) {
            Ok(Value::Nil) | Err(_) => break,
            Ok(v) => {
                let r = lua_to_reply(&v, resp3, depth + 1);
                let stop = depth + 1 > 1000;
                out.push(r);
                if stop {
                    break;
                }
            }
        }
    }
    Reply::Array(out)
}

// ---------------------------------------------------------------------------------------------
// SCRIPT subcommands.

fn script_help(_ctx: &mut Ctx<'_>, _args: &mut Args<'_>) -> CmdResult {
    Ok(help_reply(
        "script",
        &[
            "DEBUG (YES|SYNC|NO)",
            "    Set the debug mode for subsequent scripts executed.",
            "EXISTS <sha1> [<sha1> ...]",
            "    Return information about the existence of the scripts in the script cache.",
            "FLUSH [ASYNC|SYNC]",
            "    Flush the Lua scripts cache. Very dangerous on replicas.",
            "    When called without the optional mode argument, the behavior is determined by the",
            "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
            "    * ASYNC: Asynchronously flush the scripts cache.",
            "    * SYNC: Synchronously flush the scripts cache.",
            "KILL",
            "    Kill the currently executing Lua script.",
            "LOAD <script>",
            "    Load a script into the scripts cache without executing it.",
        ],
    ))
}

fn script_flush(_ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let rest = args.rest();
    let ok = match rest {
        [] => true,
        [m] => crate::commands::is(m, "sync") || crate::commands::is(m, "async"),
        _ => false,
    };
    if !ok {
        return Err(CommandError::msg(
            "ERR SCRIPT FLUSH only support SYNC|ASYNC option",
        ));
    }
    // A fresh interpreter, as Redis's scriptingReset.
    *ENGINE.lock() = None;
    publish_stats(None);
    Ok(Reply::ok())
}

/// SCRIPT DEBUG YES|SYNC|NO. YES (Redis's forked session, whose writes are thrown away) is
/// refused: this server cannot fork, and a sync session keeps the writes (see `ldb`).
fn script_debug(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let mode = args.next_arg()?;
    if crate::commands::is(mode, "no") {
        ctx.client.script_debug = false;
    } else if crate::commands::is(mode, "sync") {
        ctx.client.script_debug = true;
    } else if crate::commands::is(mode, "yes") {
        return Err(CommandError::msg(
            "ERR SCRIPT DEBUG YES (a forked session whose changes are discarded) is not supported: use SCRIPT DEBUG SYNC, whose changes are kept",
        ));
    } else {
        return Err(CommandError::msg("ERR Use SCRIPT DEBUG YES/SYNC/NO"));
    }
    Ok(Reply::ok())
}

fn script_exists(_ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let g = ENGINE.lock();
    let out = args
        .rest()
        .iter()
        .map(|sha| {
            let sha = String::from_utf8_lossy(sha).to_ascii_lowercase();
            Reply::Int(g.as_ref().is_some_and(|e| e.scripts.contains_key(&sha)) as i64)
        })
        .collect();
    Ok(Reply::Array(out))
}

fn script_kill(ctx: &mut Ctx<'_>, _args: &mut Args<'_>) -> CmdResult {
    kill(ctx, SCRIPT_EVAL)
}

fn script_load(_ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let body = args.next_arg()?;
    let mut g = ENGINE.lock();
    let eng = match engine(&mut g) {
        Ok(e) => e,
        Err(r) => return Ok(r),
    };
    match eng.create(body) {
        Ok(sha) => Ok(Reply::Bulk(Bytes::from(sha))),
        Err(r) => Ok(r),
    }
}

// ---------------------------------------------------------------------------------------------
// cjson (lua-cjson's API over serde_json) and bit (LuaBitOp).

#[derive(Clone, Copy)]
struct CjsonCfg {
    encode_max_depth: i64,
    decode_max_depth: i64,
    encode_invalid_numbers: bool,
    decode_invalid_numbers: bool,
    sparse_convert: bool,
    sparse_ratio: i64,
    sparse_safe: i64,
    precision: usize,
}

fn cjson_lib(lua: &Lua) -> mlua::Result<Table> {
    let cfg = Arc::new(Mutex::new(CjsonCfg {
        encode_max_depth: 1000,
        decode_max_depth: 1000,
        encode_invalid_numbers: false,
        decode_invalid_numbers: true,
        sparse_convert: false,
        sparse_ratio: 2,
        sparse_safe: 10,
        precision: 14,
    }));
    let t = lua.create_table()?;
    t.raw_set(
        "null",
        Value::LightUserData(LightUserData(std::ptr::null_mut())),
    )?;
    t.raw_set("_NAME", "cjson")?;
    t.raw_set("_VERSION", "2.1.0")?;
    let c = cfg.clone();
    t.raw_set(
        "encode",
        lua.create_function(move |lua, v: Value| {
            let cfg = *c.lock();
            let mut out = Vec::new();
            json_encode(&v, &cfg, 0, &mut out)?;
            lua.create_string(&out)
        })?,
    )?;
    let c = cfg.clone();
    t.raw_set(
        "decode",
        lua.create_function(move |lua, s: mlua::LuaString| {
            let cfg = *c.lock();
            let bytes = s.as_bytes();
            let parsed: serde_json::Value = serde_json::from_slice(&bytes).map_err(|e| {
                mlua::Error::runtime(format!(
                    "Expected value but found invalid token at character {}",
                    e.column().max(1)
                ))
            })?;
            json_to_lua(lua, &parsed, &cfg, 1)
        })?,
    )?;
    let c = cfg.clone();
    t.raw_set(
        "encode_max_depth",
        lua.create_function(move |_, v: Option<i64>| {
            let mut g = c.lock();
            if let Some(v) = v {
                g.encode_max_depth = v;
            }
            Ok(g.encode_max_depth)
        })?,
    )?;
    let c = cfg.clone();
    t.raw_set(
        "decode_max_depth",
        lua.create_function(move |_, v: Option<i64>| {
            let mut g = c.lock();
            if let Some(v) = v {
                g.decode_max_depth = v;
            }
            Ok(g.decode_max_depth)
        })?,
    )?;
    let c = cfg.clone();
    t.raw_set(
        "encode_invalid_numbers",
        lua.create_function(move |_, v: Option<Value>| {
            let mut g = c.lock();
            if let Some(v) = v {
                g.encode_invalid_numbers = truthy(&v);
            }
            Ok(g.encode_invalid_numbers)
        })?,
    )?;
    let c = cfg.clone();
    t.raw_set(
        "decode_invalid_numbers",
        lua.create_function(move |_, v: Option<Value>| {
            let mut g = c.lock();
            if let Some(v) = v {
                g.decode_invalid_numbers = truthy(&v);
            }
            Ok(g.decode_invalid_numbers)
        })?,
    )?;
    let c = cfg.clone();
    t.raw_set(
        "encode_sparse_array",
        lua.create_function(
            move |_, (conv, ratio, safe): (Option<Value>, Option<i64>, Option<i64>)| {
                let mut g = c.lock();
                if let Some(v) = conv {
                    g.sparse_convert = truthy(&v);
                }
                if let Some(r) = ratio {
                    g.sparse_ratio = r;
                }
                if let Some(s) = safe {
                    g.sparse_safe = s;
                }
                Ok((g.sparse_convert, g.sparse_ratio, g.sparse_safe))
            },
        )?,
    )?;
    let c = cfg.clone();
    t.raw_set(
        "encode_number_precision",
        lua.create_function(move |_, p: Option<i64>| {
            let mut g = c.lock();
            if let Some(p) = p {
                if !(1..=14).contains(&p) {
                    return Err(mlua::Error::runtime(
                        "bad argument #1 to '?' (expected integer between 1 and 14)",
                    ));
                }
                g.precision = p as usize;
            }
            Ok(g.precision as i64)
        })?,
    )?;
    t.raw_set(
        "encode_keep_buffer",
        lua.create_function(|_, v: Option<Value>| Ok(v.map(|v| truthy(&v)).unwrap_or(true)))?,
    )?;
    Ok(t)
}

fn truthy(v: &Value) -> bool {
    match v {
        Value::Boolean(b) => *b,
        Value::Nil => false,
        Value::String(s) => &*s.as_bytes() == b"on",
        _ => true,
    }
}

fn json_string(s: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for &b in s {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'/' => out.extend_from_slice(b"\\/"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            b if b < 0x20 || b == 0x7f => out.extend_from_slice(format!("\\u{b:04x}").as_bytes()),
            b => out.push(b),
        }
    }
    out.push(b'"');
}

fn json_number(n: f64, cfg: &CjsonCfg, out: &mut Vec<u8>) -> mlua::Result<()> {
    if !n.is_finite() {
        if !cfg.encode_invalid_numbers {
            return Err(mlua::Error::runtime(
                "Cannot serialise number: must not be NaN or Inf",
            ));
        }
        out.extend_from_slice(if n.is_nan() {
            b"nan"
        } else if n > 0.0 {
            b"inf"
        } else {
            b"-inf"
        });
        return Ok(());
    }
    out.extend_from_slice(fmt_g(n, cfg.precision).as_bytes());
    Ok(())
}

fn json_encode(v: &Value, cfg: &CjsonCfg, depth: i64, out: &mut Vec<u8>) -> mlua::Result<()> {
    match v {
        Value::Nil => out.extend_from_slice(b"null"),
        Value::LightUserData(p) if p.0.is_null() => out.extend_from_slice(b"null"),
        Value::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Integer(n) => out.extend_from_slice(n.to_string().as_bytes()),
        Value::Number(n) => json_number(*n, cfg, out)?,
        Value::String(s) => json_string(&s.as_bytes(), out),
        Value::Table(t) => {
            let depth = depth + 1;
            if depth > cfg.encode_max_depth {
                return Err(mlua::Error::runtime(format!(
                    "Cannot serialise, excessive nesting ({depth})"
                )));
            }
            // An array if every key is a positive integer (lua-cjson's rule).
            let mut max = 0i64;
            let mut items = 0i64;
            let mut array = true;
            for pair in t.pairs::<Value, Value>() {
                let (k, _) = pair?;
                items += 1;
                let idx = match k {
                    Value::Integer(i) => Some(i as f64),
                    Value::Number(n) => Some(n),
                    _ => None,
                };
                match idx {
                    Some(n) if n >= 1.0 && n.fract() == 0.0 => max = max.max(n as i64),
                    _ => {
                        array = false;
                        break;
                    }
                }
            }
            if array && items > 0 {
                if cfg.sparse_ratio > 0 && max > items * cfg.sparse_ratio && max > cfg.sparse_safe {
                    if !cfg.sparse_convert {
                        return Err(mlua::Error::runtime(
                            "Cannot serialise table: excessively sparse array",
                        ));
                    }
                } else {
                    out.push(b'[');
                    for i in 1..=max {
                        if i > 1 {
                            out.push(b',');
                        }
                        let v: Value = t.raw_get(i)?;
                        json_encode(&v, cfg, depth, out)?;
                    }
                    out.push(b']');
                    return Ok(());
                }
            }
            out.push(b'{');
            let mut first = true;
            for pair in t.pairs::<Value, Value>() {
                let (k, v) = pair?;
                if !first {
                    out.push(b',');
                }
                first = false;
                match &k {
                    Value::String(s) => json_string(&s.as_bytes(), out),
                    Value::Integer(i) => json_string(i.to_string().as_bytes(), out),
                    Value::Number(n) => json_string(fmt_g(*n, cfg.precision).as_bytes(), out),
                    other => {
                        return Err(mlua::Error::runtime(format!(
                            "Cannot serialise {}: table key must be a number or string",
                            other.type_name()
                        )))
                    }
                }
                out.push(b':');
                json_encode(&v, cfg, depth, out)?;
            }
            out.push(b'}');
        }
        other => {
            return Err(mlua::Error::runtime(format!(
                "Cannot serialise {}: type not supported",
                other.type_name()
            )))
        }
    }
    Ok(())
}

fn json_to_lua(
    lua: &Lua,
    v: &serde_json::Value,
    cfg: &CjsonCfg,
    depth: i64,
) -> mlua::Result<Value> {
    use serde_json::Value as J;
    let nested = |depth: i64| -> mlua::Result<()> {
        if depth > cfg.decode_max_depth {
            return Err(mlua::Error::runtime(format!(
                "Found too many nested data structures ({depth}) at character 1"
            )));
        }
        Ok(())
    };
    Ok(match v {
        J::Null => Value::LightUserData(LightUserData(std::ptr::null_mut())),
        J::Bool(b) => Value::Boolean(*b),
        J::Number(n) => Value::Number(n.as_f64().unwrap_or(0.0)),
        J::String(s) => Value::String(lua.create_string(s)?),
        J::Array(items) => {
            nested(depth)?;
            let t = lua.create_table()?;
            for (i, item) in items.iter().enumerate() {
                t.raw_set(i + 1, json_to_lua(lua, item, cfg, depth + 1)?)?;
            }
            Value::Table(t)
        }
        J::Object(map) => {
            nested(depth)?;
            let t = lua.create_table()?;
            for (k, item) in map {
                t.raw_set(
                    lua.create_string(k)?,
                    json_to_lua(lua, item, cfg, depth + 1)?,
                )?;
            }
            Value::Table(t)
        }
    })
}

/// LuaBitOp's normalisation of a number to a signed 32-bit integer.
fn tobit(v: &Value) -> mlua::Result<i32> {
    let n = match v {
        Value::Integer(i) => *i as f64,
        Value::Number(n) => *n,
        Value::String(s) => s
            .to_str()
            .ok()
            .and_then(|s| s.trim().parse::<f64>().ok())
            .ok_or_else(|| mlua::Error::runtime("bad argument (number expected)"))?,
        other => {
            return Err(mlua::Error::runtime(format!(
                "bad argument (number expected, got {})",
                other.type_name()
            )))
        }
    };
    // x + 2^52 + 2^51 keeps the low 32 bits of the rounded integer in the mantissa.
    let b = (n + 6_755_399_441_055_744.0).to_bits();
    Ok(b as u32 as i32)
}

fn bit_lib(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set(
        "tobit",
        lua.create_function(|_, v: Value| Ok(tobit(&v)? as f64))?,
    )?;
    t.raw_set(
        "bnot",
        lua.create_function(|_, v: Value| Ok(!tobit(&v)? as f64))?,
    )?;
    fn fold(args: &MultiValue, f: fn(i32, i32) -> i32) -> mlua::Result<f64> {
        let mut it = args.iter();
        let mut acc = tobit(it.next().unwrap_or(&Value::Nil))?;
        for v in it {
            acc = f(acc, tobit(v)?);
        }
        Ok(acc as f64)
    }
    t.raw_set(
        "band",
        lua.create_function(|_, a: MultiValue| fold(&a, |x, y| x & y))?,
    )?;
    t.raw_set(
        "bor",
        lua.create_function(|_, a: MultiValue| fold(&a, |x, y| x | y))?,
    )?;
    t.raw_set(
        "bxor",
        lua.create_function(|_, a: MultiValue| fold(&a, |x, y| x ^ y))?,
    )?;
    fn shift(f: fn(i32, u32) -> i32) -> impl Fn(&Lua, (Value, Value)) -> mlua::Result<f64> {
        move |_, (x, n)| Ok(f(tobit(&x)?, (tobit(&n)? & 31) as u32) as f64)
    }
    t.raw_set(
        "lshift",
        lua.create_function(shift(|x, n| ((x as u32) << n) as i32))?,
    )?;
    t.raw_set(
        "rshift",
        lua.create_function(shift(|x, n| ((x as u32) >> n) as i32))?,
    )?;
    t.raw_set("arshift", lua.create_function(shift(|x, n| x >> n))?)?;
    t.raw_set(
        "rol",
        lua.create_function(shift(|x, n| (x as u32).rotate_left(n) as i32))?,
    )?;
    t.raw_set(
        "ror",
        lua.create_function(shift(|x, n| (x as u32).rotate_right(n) as i32))?,
    )?;
    t.raw_set(
        "bswap",
        lua.create_function(|_, v: Value| Ok(tobit(&v)?.swap_bytes() as f64))?,
    )?;
    t.raw_set(
        "tohex",
        lua.create_function(|_, (x, n): (Value, Option<Value>)| {
            let x = tobit(&x)? as u32;
            let n = match n {
                Some(v) => tobit(&v)?,
                None => 8,
            };
            let (upper, n) = if n < 0 {
                (true, (-n) as usize)
            } else {
                (false, n as usize)
            };
            let n = n.min(8);
            let s = format!("{x:08x}");
            let s = &s[8 - n..];
            Ok(if upper {
                s.to_uppercase()
            } else {
                s.to_string()
            })
        })?,
    )?;
    Ok(t)
}

// ---------------------------------------------------------------------------------------------
// cmsgpack (lua-cmsgpack as Redis bundles it).

const MSGPACK_MAX_NESTING: usize = 16;

fn mp_int(n: i64, out: &mut Vec<u8>) {
    if n >= 0 {
        if n <= 127 {
            out.push(n as u8);
        } else if n <= 0xff {
            out.extend_from_slice(&[0xcc, n as u8]);
        } else if n <= 0xffff {
            out.push(0xcd);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        } else if n <= 0xffff_ffff {
            out.push(0xce);
            out.extend_from_slice(&(n as u32).to_be_bytes());
        } else {
            out.push(0xcf);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    } else if n >= -32 {
        out.push(n as i8 as u8);
    } else if n >= -128 {
        out.extend_from_slice(&[0xd0, n as i8 as u8]);
    } else if n >= -32768 {
        out.push(0xd1);
        out.extend_from_slice(&(n as i16).to_be_bytes());
    } else if n >= -2_147_483_648 {
        out.push(0xd2);
        out.extend_from_slice(&(n as i32).to_be_bytes());
    } else {
        out.push(0xd3);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

fn mp_number(n: f64, out: &mut Vec<u8>) {
    if n.is_finite() && (n as i64) as f64 == n {
        mp_int(n as i64, out);
    } else if (n as f32) as f64 == n || n.is_nan() {
        out.push(0xca);
        out.extend_from_slice(&(n as f32).to_be_bytes());
    } else {
        out.push(0xcb);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

fn mp_len(len: usize, fix: u8, fix_max: usize, c16: u8, c32: u8, out: &mut Vec<u8>) {
    if len <= fix_max {
        out.push(fix | len as u8);
    } else if len <= 0xffff {
        out.push(c16);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.push(c32);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    }
}

fn mp_encode(v: &Value, level: usize, out: &mut Vec<u8>) -> mlua::Result<()> {
    match v {
        Value::Boolean(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
        Value::Integer(n) => mp_int(*n, out),
        Value::Number(n) => mp_number(*n, out),
        Value::String(s) => {
            let b = s.as_bytes();
            let len = b.len();
            if len < 32 {
                out.push(0xa0 | len as u8);
            } else if len <= 0xff {
                out.extend_from_slice(&[0xd9, len as u8]);
            } else if len <= 0xffff {
                out.push(0xda);
                out.extend_from_slice(&(len as u16).to_be_bytes());
            } else {
                out.push(0xdb);
                out.extend_from_slice(&(len as u32).to_be_bytes());
            }
            out.extend_from_slice(&b);
        }
        Value::Table(t) if level < MSGPACK_MAX_NESTING => {
            // An array if every key is a positive integer and there are no holes.
            let mut count = 0i64;
            let mut max = 0i64;
            let mut array = true;
            for pair in t.pairs::<Value, Value>() {
                let (k, _) = pair?;
                count += 1;
                let n = match k {
                    Value::Integer(i) => i as f64,
                    Value::Number(n) => n,
                    _ => {
                        array = false;
                        break;
                    }
                };
                if n <= 0.0 || n.fract() != 0.0 {
                    array = false;
                    break;
                }
                max = max.max(n as i64);
            }
            if array && max == count {
                let len = t.raw_len();
                mp_len(len, 0x90, 15, 0xdc, 0xdd, out);
                for i in 1..=len {
                    let v: Value = t.raw_get(i)?;
                    mp_encode(&v, level + 1, out)?;
                }
            } else {
                // Counted first, then encoded pair by pair (each live value holds a slot of
                // mlua's reference stack, so a big table is never collected whole).
                let len = t.pairs::<Value, Value>().count();
                mp_len(len, 0x80, 15, 0xde, 0xdf, out);
                for pair in t.pairs::<Value, Value>() {
                    let (k, v) = pair?;
                    mp_encode(&k, level + 1, out)?;
                    mp_encode(&v, level + 1, out)?;
                }
            }
        }
        _ => out.push(0xc0),
    }
    Ok(())
}

enum MpErr {
    Eof,
    BadFormat,
}

struct MpCur<'b> {
    buf: &'b [u8],
    pos: usize,
}

impl MpCur<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], MpErr> {
        if self.buf.len() - self.pos < n {
            return Err(MpErr::Eof);
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    fn uint(&mut self, n: usize) -> Result<u64, MpErr> {
        Ok(self.take(n)?.iter().fold(0u64, |a, &b| (a << 8) | b as u64))
    }
}

fn mp_decode(lua: &Lua, c: &mut MpCur<'_>) -> mlua::Result<Result<Value, MpErr>> {
    macro_rules! tri {
        ($e:expr) => {
            match $e {
                Ok(v) => v,
                Err(e) => return Ok(Err(e)),
            }
        };
    }
    let tag = tri!(c.take(1))[0];
    let num = |n: f64| Value::Number(n);
    let v = match tag {
        0x00..=0x7f => num(tag as f64),
        0xe0..=0xff => num(tag as i8 as f64),
        0xc0 => Value::Nil,
        0xc2 => Value::Boolean(false),
        0xc3 => Value::Boolean(true),
        0xca => num(f32::from_bits(tri!(c.uint(4)) as u32) as f64),
        0xcb => num(f64::from_bits(tri!(c.uint(8)))),
        0xcc => num(tri!(c.uint(1)) as f64),
        0xcd => num(tri!(c.uint(2)) as f64),
        0xce => num(tri!(c.uint(4)) as f64),
        0xcf => num(tri!(c.uint(8)) as f64),
        0xd0 => num(tri!(c.uint(1)) as u8 as i8 as f64),
        0xd1 => num(tri!(c.uint(2)) as u16 as i16 as f64),
        0xd2 => num(tri!(c.uint(4)) as u32 as i32 as f64),
        0xd3 => num(tri!(c.uint(8)) as i64 as f64),
        0xa0..=0xbf | 0xd9 | 0xda | 0xdb | 0xc4 | 0xc5 | 0xc6 => {
            let len = match tag {
                0xa0..=0xbf => (tag & 0x1f) as usize,
                0xd9 | 0xc4 => tri!(c.uint(1)) as usize,
                0xda | 0xc5 => tri!(c.uint(2)) as usize,
                _ => tri!(c.uint(4)) as usize,
            };
            Value::String(lua.create_string(tri!(c.take(len)))?)
        }
        0x90..=0x9f | 0xdc | 0xdd => {
            let len = match tag {
                0x90..=0x9f => (tag & 0x0f) as usize,
                0xdc => tri!(c.uint(2)) as usize,
                _ => tri!(c.uint(4)) as usize,
            };
            let t = lua.create_table()?;
            for i in 0..len {
                let v = tri!(mp_decode(lua, c)?);
                t.raw_set(i + 1, v)?;
            }
            Value::Table(t)
        }
        0x80..=0x8f | 0xde | 0xdf => {
            let len = match tag {
                0x80..=0x8f => (tag & 0x0f) as usize,
                0xde => tri!(c.uint(2)) as usize,
                _ => tri!(c.uint(4)) as usize,
            };
            let t = lua.create_table()?;
            for _ in 0..len {
                let k = tri!(mp_decode(lua, c)?);
                let v = tri!(mp_decode(lua, c)?);
                if !k.is_nil() {
                    t.raw_set(k, v)?;
                }
            }
            Value::Table(t)
        }
        _ => return Ok(Err(MpErr::BadFormat)),
    };
    Ok(Ok(v))
}

/// lua-cmsgpack's `mp_unpack_full`.
fn mp_unpack(lua: &Lua, s: &[u8], limit: i64, offset: i64) -> mlua::Result<MultiValue> {
    let decode_all = limit == 0 && offset == 0;
    let len = s.len() as i64;
    if offset < 0 || limit < 0 {
        return Err(mlua::Error::runtime(format!(
            "Invalid request to unpack with offset of {offset} and limit of {len}."
        )));
    }
    if offset > len {
        return Err(mlua::Error::runtime(format!(
            "Start offset {offset} greater than input length {len}."
        )));
    }
    let limit = if decode_all { i64::MAX } else { limit };
    let mut c = MpCur {
        buf: s,
        pos: offset as usize,
    };
    let mut out = Vec::new();
    let mut cnt = 0;
    while c.pos < s.len() && cnt < limit {
        match mp_decode(lua, &mut c)? {
            Ok(v) => out.push(v),
            Err(MpErr::Eof) => return Err(mlua::Error::runtime("Missing bytes in input.")),
            Err(MpErr::BadFormat) => return Err(mlua::Error::runtime("Bad data format in input.")),
        }
        cnt += 1;
    }
    if !decode_all {
        let next = if c.pos >= s.len() { -1 } else { c.pos as i64 };
        out.insert(0, Value::Integer(next));
    }
    Ok(MultiValue::from_iter(out))
}

fn cmsgpack_lib(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set("_NAME", "cmsgpack")?;
    t.raw_set("_VERSION", "lua-cmsgpack 0.4.0")?;
    t.raw_set(
        "pack",
        lua.create_function(|lua, args: MultiValue| {
            if args.is_empty() {
                return Err(mlua::Error::runtime("MessagePack pack needs input."));
            }
            let mut out = Vec::new();
            for v in args.iter() {
                mp_encode(v, 0, &mut out)?;
            }
            lua.create_string(&out)
        })?,
    )?;
    t.raw_set(
        "unpack",
        lua.create_function(|lua, s: mlua::LuaString| mp_unpack(lua, &s.as_bytes(), 0, 0))?,
    )?;
    t.raw_set(
        "unpack_one",
        lua.create_function(|lua, (s, offset): (mlua::LuaString, Option<i64>)| {
            mp_unpack(lua, &s.as_bytes(), 1, offset.unwrap_or(0))
        })?,
    )?;
    t.raw_set(
        "unpack_limit",
        lua.create_function(
            |lua, (s, limit, offset): (mlua::LuaString, i64, Option<i64>)| {
                mp_unpack(lua, &s.as_bytes(), limit, offset.unwrap_or(0))
            },
        )?,
    )?;
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fmt_g_matches_c() {
        assert_eq!(fmt_g(1.0, 17), "1");
        assert_eq!(fmt_g(0.1, 17), "0.10000000000000001");
        assert_eq!(fmt_g(1e20, 17), "1e+20");
        assert_eq!(fmt_g(123456789.0, 14), "123456789");
        assert_eq!(fmt_g(0.0003, 14), "0.0003");
        assert_eq!(fmt_g(-5000.0, 14), "-5000");
        assert_eq!(fmt_g(1.5e-7, 14), "1.5e-07");
    }

    #[test]
    fn sha1_of_empty() {
        assert_eq!(sha1_hex(b""), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
    }

    #[test]
    fn shebang_flags() {
        assert_eq!(shebang(b"return 1").unwrap(), (sflag::COMPAT, 0));
        assert_eq!(
            shebang(b"#!lua flags=no-writes\nreturn 1").unwrap().0,
            sflag::NO_WRITES
        );
        assert!(shebang(b"#!lua").is_err());
        assert!(shebang(b"#!lua x=1\n")
            .unwrap_err()
            .starts_with("Unknown lua shebang option"));
    }
}
