//! The journal's commands and its start: replaying `appendonlydir` at start through the
//! command table (a loading client, while other clients are answered `-LOADING`),
//! `WAITAOF`, the two internal commands that redo a document change exactly
//! (`DOC.JOURNALPUT`, `DOC.JOURNALDEL`), and the snapshots: `BGREWRITEAOF` and the
//! automatic rewrite (a new RESP base from a copy-on-write snapshot, `store::journal::
//! snapshot`, while the journal goes on into a new incremental file), `SAVE`/`BGSAVE`
//! (`dump.rdb`, RDB version 10), `LASTSAVE`, and `INFO persistence`.
//!
//! Document changes are journaled as their result, not as the command that made them: the
//! whole document as raw BSON (its generated `_id`, resolved `$$NOW`/`$currentDate`, exact
//! number types), or its `_id` for a delete or an expiry. The two commands that replay them
//! are refused outside a replay: a client has `DOC.INSERT`/`DOC.UPDATE`/`DOC.DELETE`.

use crate::commands::args::{Args, CommandError};
use crate::commands::spec::{acl, family, flag::*, CmdResult, CommandSpec};
use crate::commands::Ctx;
use crate::protocol::Reply;
use crate::state::client::ClientState;
use crate::state::Server;
use crate::store::journal::{self, aof, writer};
use bson::Document;
use bytes::Bytes;
use std::sync::Arc;

const JRN: CommandSpec = family("document", acl::DOCUMENT).flags(COLLECTION);

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    JRN.cmd("doc.journalput", 3, doc_journalput).flags(WRITE | DENYOOM | LOADING).key()
        .doc("1.0.0", "Internal: the journal's record of a document change (the whole document as raw BSON, put by _id). Only run while the journal is replayed.")
        .complexity("O(1) plus the cost of the collection's indexes")
        .args("collection:key document"),
    JRN.cmd("doc.journaldel", 3, doc_journaldel).flags(WRITE | LOADING).key()
        .doc("1.0.0", "Internal: the journal's record of a document deletion or expiry ({_id} as raw BSON). Only run while the journal is replayed.")
        .complexity("O(1) plus the cost of the collection's indexes")
        .args("collection:key id"),
    JRN.cmd("doc.journaldrop", 2, doc_journaldrop).flags(WRITE | LOADING | JOURNAL_SELF).key()
        .doc("1.0.0", "Internal: the journal's record of a collection that left this server whole (moved by MIGRATE): removed without a change stream entry. Only run while the journal is replayed.")
        .complexity("O(N) where N is the number of documents")
        .args("collection:key"),
];

fn replay_only() -> Result<(), CommandError> {
    // Also from a master's replication stream, which carries document changes this way.
    if journal::loading() || crate::state::replication::applying() {
        Ok(())
    } else {
        Err(CommandError::msg(
            "ERR this command is the journal's internal record of a document change and only runs while the journal is replayed at start",
        ))
    }
}

/// The raw BSON arguments of a journal record, and the `{_id: …}` filter they address.
fn id_filter(raw: &[u8]) -> Result<(Document, crate::documents::query::Node), CommandError> {
    let doc = Document::from_reader(raw)
        .map_err(|e| CommandError::msg(format!("ERR bad BSON in journal record: {e}")))?;
    let id = doc
        .get("_id")
        .cloned()
        .ok_or_else(|| CommandError::msg("ERR journal record without _id"))?;
    let mut f = Document::new();
    f.insert("_id", id);
    let node =
        crate::documents::query::parse(&f).map_err(|e| CommandError::msg(format!("ERR {e}")))?;
    Ok((doc, node))
}

fn doc_journalput(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    replay_only()?;
    let coll = args.next_text()?;
    let (doc, filter) = id_filter(args.next_arg()?)?;
    args.finish()?;
    let max = ctx.server.config.read().get_u64("max-document-size") as usize;
    let now = bson::DateTime::from_millis(crate::util::clock::now_ms());
    ctx.server
        .store
        .collection(ctx.client.db, &coll)
        .update(
            &filter,
            &crate::documents::update::Update::Replace(doc),
            false,
            true,
            now,
            max,
        )
        .map_err(CommandError::msg)?;
    Ok(Reply::ok())
}

fn doc_journaldel(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    replay_only()?;
    let coll = args.next_text()?;
    let (_, filter) = id_filter(args.next_arg()?)?;
    args.finish()?;
    let n = ctx
        .server
        .store
        .collection(ctx.client.db, &coll)
        .delete(&filter, true);
    Ok(Reply::Int(n as i64))
}

/// The record of a collection that moved away: removed as MIGRATE removed it, without the
/// `drop` entry `DOC.DROP` appends to a change stream (the collection was not dropped).
fn doc_journaldrop(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    replay_only()?;
    let coll = args.next_text()?;
    args.finish()?;
    let removed = ctx
        .server
        .store
        .remove_moved(ctx.client.db, &coll, None, || {});
    Ok(Reply::Int(removed as i64))
}

/// `WAITAOF numlocal numreplicas timeout` (Redis 7.2): waits until this client's last write
/// is fsynced. Replicas' fsyncs are not counted yet: `numreplicas > 0` waits out the timeout,
/// as Redis does when no replica acknowledges.
pub fn waitaof(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let numlocal = args.next_i64()?;
    if !(0..=1).contains(&numlocal) {
        return Err(CommandError::msg(
            "ERR value is out of range, value must between 0 and 1",
        ));
    }
    let numreplicas = args.next_i64()?;
    if numreplicas < 0 {
        return Err(CommandError::msg(
            "ERR value is out of range, must be positive",
        ));
    }
    let timeout = std::str::from_utf8(args.next_arg()?)
        .ok()
        .and_then(|t| t.parse::<i64>().ok())
        .ok_or_else(|| CommandError::msg("ERR timeout is not an integer or out of range"))?;
    if timeout < 0 {
        return Err(CommandError::msg("ERR timeout is negative"));
    }
    use crate::state::replication;
    if replication::is_replica() {
        return Err(CommandError::msg(
            "ERR WAITAOF cannot be used with replica instances. Please also note that writes to replicas are just local and are not propagated.",
        ));
    }
    let local_journal = journal::journal().filter(|_| journal::enabled());
    if numlocal > 0 && local_journal.is_none() {
        return Err(CommandError::msg(
            "ERR WAITAOF cannot be used when numlocal is set but appendonly is disabled.",
        ));
    }
    let woff = ctx.client.journal_seq;
    // Replicas count once their journal has the stream up to here on disk (`FACK`).
    let target = replication::offset();
    let local_now = local_journal.is_some_and(|j| j.durable() >= woff);
    let replicas_now = replication::facked(target) as i64;
    // Inside MULTI or a script nothing blocks: the answer is what is true now.
    if (local_now as i64 >= numlocal && replicas_now >= numreplicas)
        || ctx.client.multi.is_some()
        || ctx.client.in_exec
    {
        return Ok(Reply::Array(vec![
            Reply::Int(local_now as i64),
            Reply::Int(replicas_now),
        ]));
    }
    if numreplicas > 0 {
        return wait_for_replicas_journals(
            ctx,
            local_journal,
            woff,
            numlocal,
            numreplicas,
            target,
            timeout,
        );
    }
    let Some(j) = local_journal else {
        return Ok(Reply::Array(vec![Reply::Int(0), Reply::Int(replicas_now)]));
    };
    let deadline = (timeout > 0)
        .then(|| std::time::Instant::now() + std::time::Duration::from_millis(timeout as u64));
    let (tx, rx) = tokio::sync::oneshot::channel();
    let journal = j.clone();
    j.on_durable(
        woff,
        deadline,
        false,
        Box::new(move |_| {
            let local = journal.durable() >= woff;
            let replicas = replication::facked(target) as i64;
            let _ = tx.send(Reply::Array(vec![
                Reply::Int(local as i64),
                Reply::Int(replicas),
            ]));
        }),
    );
    ctx.client.blocked = Some(crate::state::blocking::Blocked {
        id: ctx.client.id(),
        reply: rx,
        deadline: None,
    });
    Ok(Reply::NoReply)
}

/// WAITAOF with replicas: until this server's journal has the client's last write on disk
/// (if `numlocal`) and `numreplicas` replicas said with `FACK` that theirs has the stream up
/// to `target`, or the timeout. A task looks again at each acknowledgement, as WAIT's does;
/// replicas are asked to acknowledge at once.
fn wait_for_replicas_journals(
    ctx: &mut Ctx<'_>,
    local_journal: Option<&'static std::sync::Arc<writer::Journal>>,
    woff: u64,
    numlocal: i64,
    numreplicas: i64,
    target: u64,
    timeout: i64,
) -> CmdResult {
    use crate::state::replication;
    let Ok(rt) = tokio::runtime::Handle::try_current() else {
        return Err(CommandError::msg("ERR WAITAOF needs the server's runtime"));
    };
    if let Some(j) = local_journal {
        j.request_sync(woff);
    }
    journal::replicate_only(None, &[b"REPLCONF", b"GETACK", b"*"]);
    let deadline = (timeout > 0)
        .then(|| std::time::Instant::now() + std::time::Duration::from_millis(timeout as u64));
    let (tx, rx) = tokio::sync::oneshot::channel();
    rt.spawn(async move {
        let mut tx = tx;
        // Woken by each replica's acknowledgement; the local journal's fsync is looked at
        // then and at least every 100 ms.
        let wait = replication::wait_acks(deadline, || {
            let local = local_journal.is_some_and(|j| j.durable() >= woff);
            let replicas = replication::facked(target) as i64;
            (
                local as i64 >= numlocal && replicas >= numreplicas,
                (local, replicas),
            )
        });
        tokio::select! {
            (local, replicas) = wait => {
                let _ = tx.send(Reply::Array(vec![
                    Reply::Int(local as i64),
                    Reply::Int(replicas),
                ]));
            }
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

pub fn policy_of(name: &str) -> u8 {
    match name {
        "always" => writer::ALWAYS,
        "no" => writer::NO,
        _ => writer::EVERYSEC,
    }
}

/// At start with `appendonly yes`, on a thread of its own while clients are answered
/// `-LOADING` (see [`begin_loading`]): replays the manifest's files through the command
/// table as a loading client (nothing is journaled meanwhile and no key expires lazily), cuts a torn last record (`aof-load-truncated yes`) or stops at
/// corruption naming the file and offset, then opens the last incremental file for
/// appending — or creates the directory, an empty base and the first incremental file.
/// `log` receives Redis's log lines.
pub fn load(server: &Arc<Server>, log: &mut dyn FnMut(bool, &str)) -> Result<(), String> {
    let (dir, dirname, prefix, truncated_ok, policy) = {
        let c = server.config.read();
        (
            c.get("dir").to_string(),
            c.get("appenddirname").to_string(),
            c.get("appendfilename").to_string(),
            c.get_bool("aof-load-truncated"),
            policy_of(c.get("appendfsync")),
        )
    };
    let path = aof::dir_of(&dir, &dirname);
    // Absolute, so a later CONFIG SET dir does not move it.
    let _ = AOF_DIR.set(std::path::absolute(&path).unwrap_or_else(|_| path.clone()));
    let dir_existed = path.is_dir();
    let mname = aof::Manifest::manifest_name(&prefix);
    let mpath = path.join(&mname);
    let mut manifest = match std::fs::read(&mpath) {
        Ok(text) => Some(aof::Manifest::parse(&text).map_err(|e| {
            // Redis's report, the reason last (the line the caller logs).
            log(true, "*** FATAL AOF MANIFEST FILE ERROR ***");
            if let Some((n, line)) = &e.line {
                log(true, &format!("Reading the manifest file, at line {n}"));
                log(true, &format!(">>> '{line}'"));
            }
            e.reason.to_string()
        })?),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            return Err(format!(
                "Fatal error: can't open the AOF manifest file {} for reading: {}",
                mpath.display(),
                aof::strerror(&e)
            ))
        }
    };
    // An append-only file of Redis before 7.0 (`appendfilename` in `dir`) becomes the base
    // of a manifest, as Redis's `aofUpgradePrepare` does, rather than being left out of
    // the data set: when there is no journal directory, when its manifest names no base
    // and no incremental file, or when an upgrade stopped between writing the manifest
    // and moving the file.
    let old = std::path::Path::new(&dir).join(&prefix);
    if old.is_file() {
        let names_nothing = manifest
            .as_ref()
            .is_none_or(|m| m.base.is_none() && m.incr.is_empty());
        let interrupted = manifest.as_ref().is_some_and(|m| {
            m.incr.is_empty()
                && m.base.as_ref().is_some_and(|b| b.name == prefix)
                && !path.join(&prefix).exists()
        });
        if !dir_existed || names_nothing || interrupted {
            std::fs::create_dir_all(&path).map_err(|e| {
                format!(
                    "Can't open or create append-only dir {}: {}",
                    path.display(),
                    aof::strerror(&e)
                )
            })?;
            let m = aof::Manifest {
                base: Some(aof::FileInfo {
                    name: prefix.clone(),
                    seq: 1,
                    kind: 'b',
                }),
                incr: manifest.take().map(|m| m.incr).unwrap_or_default(),
            };
            aof::write_manifest(&path, &mname, &m.to_text())
                .map_err(|e| format!("Can't write the AOF manifest: {e}"))?;
            std::fs::rename(&old, path.join(&prefix)).map_err(|e| {
                format!(
                    "Error trying to move the old AOF file {prefix} into dir {dirname}: {}",
                    aof::strerror(&e)
                )
            })?;
            log(
                false,
                &format!("Successfully migrated an old-style AOF file ({prefix}) into the AOF directory ({dirname})."),
            );
            manifest = Some(m);
        }
    }
    std::fs::create_dir_all(&path).map_err(|e| {
        format!(
            "Can't open or create append-only dir {}: {}",
            path.display(),
            aof::strerror(&e)
        )
    })?;
    let manifest = match manifest {
        Some(m) if m.incr.is_empty() && m.base.is_none() => None,
        m => m,
    };
    let mut base_size = 0;
    let manifest = match manifest {
        Some(mut m) => {
            let files: Vec<aof::FileInfo> = m.base.iter().chain(&m.incr).cloned().collect();
            LOAD.total.store(files_size(&path, &files)?, Relaxed);
            let started = std::time::Instant::now();
            replay(server, &path, &files, truncated_ok, log)?;
            log(
                false,
                &format!(
                    "DB loaded from append only file: {:.3} seconds",
                    started.elapsed().as_secs_f64()
                ),
            );
            if let Some(b) = &m.base {
                base_size = std::fs::metadata(path.join(&b.name)).map_or(0, |m| m.len());
            }
            if m.incr.is_empty() {
                // A base alone: appends go to a new incremental file.
                let seq = m.base.as_ref().map_or(1, |b| b.seq);
                m.incr.push(aof::FileInfo {
                    name: aof::incr_name(&prefix, seq),
                    seq,
                    kind: 'i',
                });
                std::fs::File::create(path.join(&m.incr[0].name))
                    .map_err(|e| format!("Can't create the AOF file: {e}"))?;
                aof::write_manifest(&path, &mname, &m.to_text())
                    .map_err(|e| format!("Can't write the AOF manifest: {e}"))?;
            }
            m
        }
        None => {
            let m = aof::Manifest {
                base: Some(aof::FileInfo {
                    name: aof::base_name(&prefix, 1),
                    seq: 1,
                    kind: 'b',
                }),
                incr: vec![aof::FileInfo {
                    name: aof::incr_name(&prefix, 1),
                    seq: 1,
                    kind: 'i',
                }],
            };
            for f in m.base.iter().chain(&m.incr) {
                std::fs::File::create(path.join(&f.name))
                    .and_then(|f| f.sync_all())
                    .map_err(|e| format!("Can't create the AOF file {}: {e}", f.name))?;
            }
            aof::write_manifest(&path, &mname, &m.to_text())
                .map_err(|e| format!("Can't write the AOF manifest: {e}"))?;
            log(
                false,
                "Creating AOF base file and incr file on server start",
            );
            m
        }
    };
    let Some(last) = manifest.incr.last() else {
        return Err("no incremental AOF file".into());
    };
    let file = std::fs::OpenOptions::new()
        .append(true)
        .open(path.join(&last.name))
        .map_err(|e| format!("Can't open the append-only file {}: {e}", last.name))?;
    let size: u64 = manifest
        .base
        .iter()
        .chain(&manifest.incr)
        .map(|f| std::fs::metadata(path.join(&f.name)).map_or(0, |m| m.len()))
        .sum();
    journal::start(file, size, base_size, policy)?;
    P.rewrite_base_size.store(size, Relaxed);
    // What was loaded is not a change since the last save (Redis resets its dirty count).
    P.dirty_at_save.store(dirty(server), Relaxed);
    ensure_cron(server);
    Ok(())
}

/// `DEBUG LOADAOF`, as Redis's: the data set is emptied and loaded again from the journal's
/// files, so a test sees what a restart would give. Clients are answered `-LOADING`
/// meanwhile; the data is emptied under the exec gate (no command half-way), every record
/// numbered by then is written to the file first, and the replay journals nothing.
pub fn debug_loadaof(ctx: &mut Ctx<'_>) -> CmdResult {
    // With appendonly no, Redis 7.0 still loads the files its manifest on disk names (the
    // base a BGREWRITEAOF wrote with the journal off); it exits when there are none: here
    // nothing changes then.
    let j = journal::journal().filter(|_| journal::enabled()).cloned();
    if j.is_none() {
        let (dir, prefix) = paths(ctx.server);
        if !dir.join(aof::Manifest::manifest_name(&prefix)).exists() {
            return Err(CommandError::msg(
                "ERR DEBUG LOADAOF: there is no append only file to load (appendonly no and no BGREWRITEAOF yet)",
            ));
        }
    }
    if ctx.client.multi.is_some() || ctx.client.in_exec || LOAD.on.load(Relaxed) {
        return Err(CommandError::msg(
            "ERR DEBUG LOADAOF cannot run inside a transaction, a script or a load",
        ));
    }
    let server = ctx.server.clone();
    let (tx, rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let s = server.clone();
        let emptied = tokio::task::spawn_blocking(move || {
            let _gate = s.exec_gate.exclusive();
            begin_loading();
            drop(crate::commands::transactions::empty_data(&s, None));
            crate::commands::scripting::flush_libraries();
            journal::next_seq().saturating_sub(1)
        })
        .await;
        let reply = match emptied {
            Ok(last) => {
                if let Some(j) = &j {
                    j.wait_written(last).await;
                }
                let s = server.clone();
                match tokio::task::spawn_blocking(move || replay_journal(&s)).await {
                    Ok(Ok(())) => {
                        tracing::warn!("Append Only File loaded by DEBUG LOADAOF");
                        Reply::ok()
                    }
                    Ok(Err(e)) => Reply::error(format!("ERR DEBUG LOADAOF: {e}")),
                    Err(e) => Reply::error(format!("ERR DEBUG LOADAOF: {e}")),
                }
            }
            Err(e) => Reply::error(format!("ERR DEBUG LOADAOF: {e}")),
        };
        end_loading();
        for d in 0..server.store.databases() {
            server.blocking.signal_db(d);
        }
        let _ = tx.send(reply);
    });
    ctx.client.blocked = Some(crate::state::blocking::Blocked {
        id: ctx.client.id(),
        reply: rx,
        deadline: None,
    });
    Ok(Reply::NoReply)
}

/// The manifest's files replayed over the (emptied) data set, as at start.
fn replay_journal(server: &Arc<Server>) -> Result<(), String> {
    let (dir, prefix) = paths(server);
    let mname = aof::Manifest::manifest_name(&prefix);
    let text =
        std::fs::read(dir.join(&mname)).map_err(|e| format!("can't read the AOF manifest: {e}"))?;
    let m = aof::Manifest::parse(&text)?;
    let files: Vec<aof::FileInfo> = m.base.iter().chain(&m.incr).cloned().collect();
    LOAD.total.store(files_size(&dir, &files)?, Relaxed);
    let mut log = |warn: bool, line: &str| {
        if warn {
            tracing::warn!("{line}");
        } else {
            tracing::info!("{line}");
        }
    };
    replay(server, &dir, &files, true, &mut log)
}

/// The size of every file a manifest names, checked before anything is loaded as Redis's
/// `getBaseAndIncrAppendOnlyFilesSize` does: a named file that cannot be found stops the
/// load, since loading the others would give a data set without that file's writes.
fn files_size(dir: &std::path::Path, files: &[aof::FileInfo]) -> Result<u64, String> {
    let mut total = 0;
    for f in files {
        match std::fs::metadata(dir.join(&f.name)) {
            Ok(m) => total += m.len(),
            Err(e) => {
                return Err(format!(
                    "Unable to obtain the AOF file {} length. stat: {}",
                    f.name,
                    aof::strerror(&e)
                ))
            }
        }
    }
    Ok(total)
}

fn file_len(p: &std::path::Path) -> u64 {
    std::fs::metadata(p).map_or(0, |m| m.len())
}

// ---------------------------------------------------------------------------------------
// Loading: clients are served while the journal is replayed

/// The replay's progress, for INFO persistence.
struct Loading {
    on: AtomicBool,
    /// The load runs beside the data set clients are served (a replica's
    /// `repl-diskless-load swapdb` from the same history): only the commands flagged
    /// `NO_ASYNC_LOADING` are refused. `on` is set with it, as Redis sets `loading`.
    asynchronous: AtomicBool,
    /// Unix seconds.
    started: AtomicU64,
    total: AtomicU64,
    loaded: AtomicU64,
}

static LOAD: Loading = Loading {
    on: AtomicBool::new(false),
    asynchronous: AtomicBool::new(false),
    started: AtomicU64::new(0),
    total: AtomicU64::new(0),
    loaded: AtomicU64::new(0),
};

thread_local! {
    /// The replaying thread: its commands are the journal's, not a client's.
    static LOADER: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// `key-load-delay` (microseconds), read when a load starts.
static KEY_LOAD_DELAY: AtomicU64 = AtomicU64::new(0);

/// Loading `dump.rdb` at start, `total` bytes: as [`begin_loading`], with the file's size
/// for INFO's progress.
pub fn begin_loading_rdb(server: &Server, total: u64) {
    begin_loading();
    LOAD.total.store(total, Relaxed);
    KEY_LOAD_DELAY.store(server.config.read().get_u64("key-load-delay"), Relaxed);
}

/// The load has reached byte `at` of its file (after a key); `key-load-delay` is applied
/// here.
pub fn loading_progress(at: u64) {
    LOAD.loaded.store(at, Relaxed);
    key_load_delay();
}

fn key_load_delay() {
    let d = KEY_LOAD_DELAY.load(Relaxed);
    if d > 0 {
        std::thread::sleep(std::time::Duration::from_micros(d));
    }
}

/// The data set is being loaded: clients are connected and answered, commands without the
/// `loading` flag with `-LOADING` (see [`refused_while_loading`]).
pub fn begin_loading() {
    LOAD.started
        .store(crate::util::clock::now_ms() as u64 / 1000, Relaxed);
    LOAD.loaded.store(0, Relaxed);
    LOAD.on.store(true, Relaxed);
}

/// A replica's asynchronous load starts (see `Loading::asynchronous`); `total` bytes, 0 when
/// the master streams with an end mark.
pub fn begin_async_loading(total: u64) {
    begin_loading();
    LOAD.total.store(total, Relaxed);
    LOAD.asynchronous.store(true, Relaxed);
}

/// Bytes of the load received so far, for INFO's progress (no `key-load-delay`).
pub fn loading_received(at: u64) {
    LOAD.loaded.store(at, Relaxed);
}

pub fn end_loading() {
    LOAD.on.store(false, Relaxed);
    LOAD.asynchronous.store(false, Relaxed);
}

/// Whether the load in progress is asynchronous (INFO's `async_loading`).
pub fn is_async_loading() -> bool {
    LOAD.asynchronous.load(Relaxed)
}

/// Whether this thread runs a load's own commands (the journal's replay, the libraries of a
/// `dump.rdb` or a master's snapshot): they are not a client's, so a read-only replica's
/// refusals do not apply to them.
pub fn is_loader() -> bool {
    LOADER.with(|l| l.get())
}

/// Whether a load (the journal or dump.rdb) is in progress.
pub fn is_loading() -> bool {
    LOAD.on.load(Relaxed)
}

/// Redis's `-LOADING` answer to a command without the `loading` flag while the data set is
/// loaded (the replay's own commands run).
#[inline]
pub fn refused_while_loading(spec: &CommandSpec) -> Option<Reply> {
    if !LOAD.on.load(Relaxed) || LOADER.with(|l| l.get()) {
        return None;
    }
    let refused = if LOAD.asynchronous.load(Relaxed) {
        spec.has(NO_ASYNC_LOADING)
    } else {
        !spec.has(LOADING)
    };
    if !refused {
        return None;
    }
    Some(Reply::error(
        "LOADING Redis is loading the dataset in memory",
    ))
}

fn loading_info() -> Vec<(&'static str, String)> {
    if !LOAD.on.load(Relaxed) {
        return Vec::new();
    }
    let started = LOAD.started.load(Relaxed);
    let total = LOAD.total.load(Relaxed);
    let loaded = LOAD.loaded.load(Relaxed).min(total);
    let perc = if total == 0 {
        0.0
    } else {
        loaded as f64 * 100.0 / total as f64
    };
    let elapsed = (crate::util::clock::now_ms() as u64 / 1000).saturating_sub(started);
    // Redis's estimate: the time so far, scaled by what is left.
    let eta = if loaded == 0 {
        1
    } else {
        (elapsed as f64 * (total - loaded) as f64 / loaded as f64) as i64
    };
    vec![
        ("loading_start_time", started.to_string()),
        ("loading_total_bytes", total.to_string()),
        ("loading_rdb_used_mem", "0".into()),
        ("loading_loaded_bytes", loaded.to_string()),
        ("loading_loaded_perc", format!("{perc:.2}")),
        ("loading_eta_seconds", eta.to_string()),
    ]
}

fn replay(
    server: &Arc<Server>,
    dir: &std::path::Path,
    files: &[aof::FileInfo],
    truncated_ok: bool,
    log: &mut dyn FnMut(bool, &str),
) -> Result<(), String> {
    let any: std::net::SocketAddr = ([0, 0, 0, 0], 0).into();
    let handle = server.clients.register(any, any);
    let mut client = ClientState::new(handle.clone(), true);
    journal::set_loading(true);
    LOADER.with(|l| l.set(true));
    KEY_LOAD_DELAY.store(server.config.read().get_u64("key-load-delay"), Relaxed);
    let result = (|| {
        for (i, f) in files.iter().enumerate() {
            let p = dir.join(&f.name);
            if std::fs::metadata(&p).map(|m| m.len()).unwrap_or(0) == 0 {
                if !p.exists() {
                    return Err(format!("The append log file {} doesn't exist", f.name));
                }
                continue;
            }
            let mut head = [0u8; 5];
            let rdb = std::fs::File::open(&p)
                .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut head))
                .is_ok()
                && &head == b"REDIS";
            if rdb {
                return Err(format!(
                    "The AOF file {} is in RDB format (Redis's RDB-preamble base), which this version cannot load: rewrite it with aof-use-rdb-preamble no in Redis first",
                    f.name
                ));
            }
            let mut ctx = Ctx {
                server,
                client: &mut client,
            };
            let done_before = LOAD.loaded.load(Relaxed);
            let end = aof::read_file(&p, |argv, at| {
                LOAD.loaded.store(done_before + at, Relaxed);
                key_load_delay();
                run_one(&mut ctx, argv, &f.name)
            })?;
            LOAD.loaded.store(done_before + file_len(&p), Relaxed);
            match end {
                aof::ReadEnd::Clean => {}
                aof::ReadEnd::Truncated { valid_up_to } => {
                    if i + 1 != files.len() {
                        return Err(format!(
                            "Fatal error: the truncated file is not the last file ({})",
                            f.name
                        ));
                    }
                    if !truncated_ok {
                        return Err(format!("Unexpected end of file reading the append only file {}. You can: 1) Make a backup of your AOF file, then use ./redis-check-aof --fix <filename.manifest>. 2) Alternatively you can set the 'aof-load-truncated' configuration option to yes and restart the server.", f.name));
                    }
                    log(
                        true,
                        &format!(
                            "!!! Warning: short read while loading the AOF file {}!!!",
                            f.name
                        ),
                    );
                    log(
                        true,
                        &format!(
                            "!!! Truncating the AOF {} at offset {valid_up_to} !!!",
                            f.name
                        ),
                    );
                    std::fs::OpenOptions::new()
                        .write(true)
                        .open(&p)
                        .and_then(|file| file.set_len(valid_up_to).and_then(|_| file.sync_all()))
                        .map_err(|e| format!("Error truncating the AOF file {}: {e}", f.name))?;
                    log(
                        true,
                        &format!(
                            "AOF {} loaded anyway because aof-load-truncated is enabled",
                            f.name
                        ),
                    );
                }
                aof::ReadEnd::Corrupt { offset } => {
                    return Err(format!("Bad file format reading the append only file {} at offset {offset}: make a backup of your AOF file, then use ./redis-check-aof --fix <filename.manifest>", f.name));
                }
            }
        }
        Ok(())
    })();
    journal::set_loading(false);
    LOADER.with(|l| l.set(false));
    crate::commands::transactions::reset_state(&mut Ctx {
        server,
        client: &mut client,
    });
    server.clients.unregister(handle.id);
    result
}

/// Loads the function libraries of a `dump.rdb` read at start (`FUNCTION LOAD REPLACE`
/// through the command table, as a loading client); the errors, in Redis's words.
/// A replica's FLUSHALL before it loads its master's snapshot, run here as the master's
/// command (a read-only replica takes it) without the exec gate, which the load holds.
fn flush_for_sync(server: &Arc<Server>) {
    let args = [Bytes::from_static(b"FLUSHALL")];
    let Some(spec) = crate::commands::table().get(&args[0]) else {
        return;
    };
    let any: std::net::SocketAddr = ([0, 0, 0, 0], 0).into();
    let handle = server.clients.register(any, any);
    let mut client = ClientState::new(handle.clone(), true);
    let was = LOADER.with(|l| l.replace(true));
    crate::state::replication::set_applying(true);
    let reply = crate::commands::execute(
        &mut Ctx {
            server,
            client: &mut client,
        },
        spec,
        &args,
    );
    crate::state::replication::set_applying(false);
    LOADER.with(|l| l.set(was));
    if let Reply::Error(e) = reply {
        tracing::warn!("Flushing the old data for the master's snapshot failed: {e}");
    }
    server.clients.unregister(handle.id);
}

pub fn load_functions(server: &Arc<Server>, codes: &[Vec<u8>]) -> Result<(), String> {
    if codes.is_empty() {
        return Ok(());
    }
    let any: std::net::SocketAddr = ([0, 0, 0, 0], 0).into();
    let handle = server.clients.register(any, any);
    let mut client = ClientState::new(handle.clone(), true);
    let mut ctx = Ctx {
        server,
        client: &mut client,
    };
    let mut result = Ok(());
    // Run while other clients are answered -LOADING: this thread's commands are the load's.
    let was = LOADER.with(|l| l.replace(true));
    for code in codes {
        let args = [
            Bytes::from_static(b"FUNCTION"),
            Bytes::from_static(b"LOAD"),
            Bytes::from_static(b"REPLACE"),
            Bytes::from(code.clone()),
        ];
        if let Reply::Error(e) = crate::commands::dispatch(&mut ctx, &args) {
            result = Err(format!("Failed loading library: {e}"));
            break;
        }
    }
    LOADER.with(|l| l.set(was));
    server.clients.unregister(handle.id);
    result
}

/// After a `dump.rdb` was loaded at start: what it held is not a change since the last save.
pub fn rdb_loaded(server: &Server, loaded: &crate::store::rdb_file::Loaded) {
    P.dirty_at_save.store(dirty(server), Relaxed);
    P.last_load_keys.store(loaded.keys, Relaxed);
    P.last_load_expired.store(loaded.expired, Relaxed);
}

fn run_one(ctx: &mut Ctx<'_>, argv: Vec<Vec<u8>>, file: &str) -> Result<(), String> {
    let args: Vec<Bytes> = argv.into_iter().map(Bytes::from).collect();
    if crate::commands::table().get(&args[0]).is_none() {
        return Err(format!(
            "Unknown command '{}' reading the append only file {file}",
            String::from_utf8_lossy(&args[0])
        ));
    }
    let reply = crate::commands::dispatch(ctx, &args);
    if let Reply::Error(e) = &reply {
        let cmd = String::from_utf8_lossy(&args[0]);
        tracing::debug!("journal replay: {cmd}: {e}");
        // propagation-error-behavior panic: a journal whose commands fail here would load a
        // data set other than the one it recorded; the start stops instead.
        if ctx.server.config.read().get("propagation-error-behavior") == "panic" {
            return Err(format!(
                "This server panicked sending an error to the append only file {file} after processing the command '{cmd}': {e}"
            ));
        }
    }
    Ok(())
}

/// After a handler ran through the table: its frame of the journal's record closes.
pub fn left(spec: &CommandSpec, args: &[Bytes], reply: &Reply) {
    let ddl = spec.has(JOURNAL_SELF) && !reply.is_error();
    // A document command's changes are records of their own (the documents, by `_id`):
    // its own arguments are never journaled, even when it changed a key (the change
    // stream's appends are journaled as their XADDs), or a replay would insert again.
    let own = spec.has(WRITE) && (!spec.has(COLLECTION) || ddl);
    // A blocking command that blocked is not journaled as itself (Redis never propagates
    // it): what it changed before blocking (the DEL of an expired key it met) is, and the
    // pop made for it later is journaled as that pop.
    let own = own && !(spec.has(BLOCKING) && matches!(reply, Reply::NoReply));
    journal::leave(args, own, ddl);
}

/// When a command ends: what the client's next replies and WAITAOF wait for.
pub fn ended(ctx: &mut Ctx<'_>, e: journal::Ended) {
    ctx.client.journal_ended(e);
}

/// A handler's change is journaled as `argv` instead of its own arguments (its resolved,
/// deterministic form). Costs nothing while the journal is off.
pub fn journal_as(argv: &[&[u8]]) {
    if journal::recording() {
        journal::rewrite(vec![argv.iter().map(|a| a.to_vec()).collect()]);
    }
}

/// [`journal_as`] with several commands.
pub fn journal_as_many(cmds: Vec<Vec<Vec<u8>>>) {
    if journal::recording() {
        journal::rewrite(cmds);
    }
}

/// Commands whose effect depends on the time in a way the journal does not record yet:
/// refused while it is on rather than replayed differently. XCLAIM/XAUTOCLAIM compare a
/// minimum idle time (or set one with IDLE) against delivery times, which a replay
/// re-creates at replay time.
pub fn refused(spec: &CommandSpec, args: &[Bytes]) -> Option<Reply> {
    if !matches!(spec.name, "xclaim" | "xautoclaim") {
        return None;
    }
    let idle = args.get(4).map(|a| a.as_ref() == b"0").unwrap_or(true);
    let idle_opt =
        spec.name == "xclaim" && args.iter().skip(5).any(|a| a.eq_ignore_ascii_case(b"IDLE"));
    if idle && !idle_opt {
        return None;
    }
    Some(Reply::error(format!(
        "ERR {} with a minimum idle time or IDLE is not available with appendonly yes: it depends on delivery times the journal does not keep yet (min-idle-time 0 works)",
        spec.name.to_uppercase()
    )))
}

// ---------------------------------------------------------------------------------------
// Snapshots: BGREWRITEAOF (and the automatic rewrite), SAVE, BGSAVE, LASTSAVE

use crate::store::journal::child::SaveChild;
use crate::store::journal::pacing::{Pacer, SyncingFile};
use crate::store::journal::snapshot::{self, Item, Snapshot};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering::Relaxed};

/// What INFO persistence reports of snapshots, and what is scheduled.
struct Persist {
    rewrite_running: AtomicBool,
    rewrite_scheduled: AtomicBool,
    /// Unix ms when the running rewrite started.
    rewrite_started: AtomicU64,
    last_rewrite_secs: AtomicI64,
    last_rewrite_ok: AtomicBool,
    rewrites: AtomicU64,
    rewrite_failures: AtomicU64,
    last_rewrite_cow: AtomicU64,
    /// The journal's size after the last rewrite (or at start): automatic rewrites compare
    /// the growth since with `auto-aof-rewrite-percentage`.
    rewrite_base_size: AtomicU64,
    bgsave_running: AtomicBool,
    bgsave_scheduled: AtomicBool,
    bgsave_started: AtomicU64,
    last_bgsave_secs: AtomicI64,
    last_bgsave_ok: AtomicBool,
    /// Unix seconds of the last successful save (0: none since start).
    last_save: AtomicU64,
    saves: AtomicU64,
    /// The last RDB load's keys stored and keys skipped as expired (at start or from a
    /// master's full sync): INFO's `rdb_last_load_keys_loaded` / `_expired`.
    last_load_keys: AtomicU64,
    last_load_expired: AtomicU64,
    /// The snapshot being copied (a save or a rewrite): keys at its cut and keys copied so
    /// far; 0 when none runs.
    save_keys_total: AtomicU64,
    save_keys_processed: AtomicU64,
    last_save_cow: AtomicU64,
    /// The key space's change counter when the last successful save took its cut.
    dirty_at_save: AtomicU64,
    /// Unix seconds when the last BGSAVE was started (a failed one is retried by the
    /// `save` schedule only `BGSAVE_RETRY_DELAY` seconds after it).
    last_bgsave_try: AtomicU64,
    /// Unix seconds of the last check of the `save` schedule.
    schedule_checked: AtomicU64,
    /// `CONFIG SET appendonly yes` is writing the first base, or waits to (INFO shows
    /// aof_enabled:1).
    aof_starting: AtomicBool,
    /// `CONFIG SET appendonly yes` came during a save: the journal starts after it.
    aof_start_scheduled: AtomicBool,
    /// `CONFIG SET appendonly no` came while the journal starts: it stops once started.
    aof_stop_requested: AtomicBool,
    /// The start that ended is stopping the journal again.
    aof_stopping: AtomicBool,
    /// Whether the scheduling thread runs.
    cron: AtomicBool,
    /// Snapshot cuts taken (BGSAVE, SAVE, BGREWRITEAOF, the journal's start), and how long
    /// the last one stopped commands: what Redis's INFO reports as `total_forks` and
    /// `latest_fork_usec`, its fork being the moment its snapshot is taken.
    cuts: AtomicU64,
    last_cut_us: AtomicU64,
}

static P: Persist = Persist {
    rewrite_running: AtomicBool::new(false),
    rewrite_scheduled: AtomicBool::new(false),
    rewrite_started: AtomicU64::new(0),
    last_rewrite_secs: AtomicI64::new(-1),
    last_rewrite_ok: AtomicBool::new(true),
    rewrites: AtomicU64::new(0),
    rewrite_failures: AtomicU64::new(0),
    last_rewrite_cow: AtomicU64::new(0),
    rewrite_base_size: AtomicU64::new(0),
    bgsave_running: AtomicBool::new(false),
    bgsave_scheduled: AtomicBool::new(false),
    bgsave_started: AtomicU64::new(0),
    last_bgsave_secs: AtomicI64::new(-1),
    last_bgsave_ok: AtomicBool::new(true),
    last_save: AtomicU64::new(0),
    saves: AtomicU64::new(0),
    last_load_keys: AtomicU64::new(0),
    last_load_expired: AtomicU64::new(0),
    save_keys_total: AtomicU64::new(0),
    save_keys_processed: AtomicU64::new(0),
    last_save_cow: AtomicU64::new(0),
    dirty_at_save: AtomicU64::new(0),
    last_bgsave_try: AtomicU64::new(0),
    schedule_checked: AtomicU64::new(0),
    aof_starting: AtomicBool::new(false),
    aof_start_scheduled: AtomicBool::new(false),
    aof_stop_requested: AtomicBool::new(false),
    aof_stopping: AtomicBool::new(false),
    cron: AtomicBool::new(false),
    cuts: AtomicU64::new(0),
    last_cut_us: AtomicU64::new(0),
};

/// INFO stats' `latest_fork_usec` and `total_forks`: the last snapshot cut's duration and
/// the number of cuts (see `Persist::cuts`).
pub fn fork_stats() -> (u64, u64) {
    (P.last_cut_us.load(Relaxed), P.cuts.load(Relaxed))
}

/// Redis's `CONFIG_BGSAVE_RETRY_DELAY`: seconds before the schedule retries a failed BGSAVE.
const BGSAVE_RETRY_DELAY: u64 = 5;

fn dirty(server: &Server) -> u64 {
    server
        .store
        .counters()
        .iter()
        .map(|c| c.dirty.load(Relaxed))
        .sum()
}

/// The cut of a snapshot: with the exec gate held exclusively (no command half-way, no
/// EXEC or script between two of its commands) and every shard locked, `then` runs (the
/// journal's switch to a new file) and the snapshot starts. A few microseconds for the
/// clients; waiting for the gate waits for the commands running now (and a script).
fn cut(server: &Server, then: impl FnOnce(u64)) -> Option<(Snapshot, Vec<Bytes>, u64)> {
    let begun = std::time::Instant::now();
    let r = {
        let _gate = server.exec_gate.exclusive();
        let all: Vec<usize> = (0..server.store.shard_count()).collect();
        let _locks = server.store.lock_many(&all);
        let snap = Snapshot::install(&server.store)?;
        then(journal::next_seq());
        let functions = crate::commands::scripting::library_codes();
        (snap, functions, dirty(server))
    };
    let us = begun.elapsed().as_micros() as u64;
    P.cuts.fetch_add(1, Relaxed);
    P.last_cut_us.store(us, Relaxed);
    tracing::info!("Snapshot cut in {us} us (waiting for the commands in flight included)");
    Some(r)
}

/// The snapshot's figures for the log once it is written.
fn log_snapshot(what: &str, snap: &Snapshot, keys: u64, started: std::time::Instant) {
    tracing::info!(
        "{what}: {keys} keys in {:.3} s, longest shard lock hold {} us, {} bytes copied on write",
        started.elapsed().as_secs_f64(),
        snap.max_hold_us(),
        snap.cow_bytes()
    );
}

/// Copies every key of the snapshot, chunk by chunk, into `sink`; `paced`: resting
/// between chunks while clients are served (`pacing`), not at shutdown. `child`: the
/// stand-in child started when the copy was asked for (BGSAVE), else one is started here.
fn each_item(
    server: &Server,
    snap: &Snapshot,
    paced: bool,
    child: Option<SaveChild>,
    mut sink: impl FnMut(&Item) -> std::io::Result<()>,
) -> std::io::Result<u64> {
    let mut items = Vec::new();
    let mut n = 0;
    let mut pacer = Pacer::new();
    // rdb-key-save-delay, and the stand-in child whose death aborts the copy (`child`).
    let mut child = child.unwrap_or_else(|| SaveChild::start(paced));
    // INFO's current_save_keys_total / _processed while the copy runs (Redis's child info).
    let total: usize = (0..server.store.databases())
        .map(|db| server.store.dbsize(db))
        .sum();
    P.save_keys_total.store(total as u64, Relaxed);
    P.save_keys_processed.store(0, Relaxed);
    let copied = (|| {
        for shard in 0..server.store.shard_count() {
            while snap.next_chunk(&server.store, shard, &mut items) {
                for it in &items {
                    sink(it)?;
                    child.key_saved()?;
                    n += 1;
                }
                P.save_keys_processed.store(n, Relaxed);
                // The next lock hold comes first thing after the rest (see `pacing`).
                if paced {
                    pacer.rest();
                }
            }
        }
        Ok(n)
    })();
    P.save_keys_total.store(0, Relaxed);
    P.save_keys_processed.store(0, Relaxed);
    copied
}

/// The journal's directory as it was opened at start (`dir` may change at run time; the
/// files stay where they are), and the file name prefix.
static AOF_DIR: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();

fn paths(server: &Server) -> (std::path::PathBuf, String) {
    let c = server.config.read();
    (
        AOF_DIR
            .get()
            .cloned()
            .unwrap_or_else(|| aof::dir_of(c.get("dir"), c.get("appenddirname"))),
        c.get("appendfilename").to_string(),
    )
}

/// `CONFIG SET appendonly yes|no` at run time (Redis's `startAppendOnly`/`stopAppendOnly`).
/// `yes`: on a thread of its own, a cut (the exec gate held exclusively and every shard
/// locked) starts the journal into a new incremental file, then a base is written from the
/// snapshot taken at that cut and the manifest names both; INFO shows `aof_enabled:1` and
/// `aof_rewrite_in_progress:1` meanwhile. If the base cannot be written the journal stops
/// again and `appendonly` goes back to `no`. `no`: at a cut, no more records are taken; what
/// is buffered is written and fsynced and the files are closed. During a BGSAVE (or the
/// save that follows FLUSHALL), `yes` is scheduled instead, as Redis schedules the rewrite
/// that turns its AOF on while another child runs: the persistence thread starts it once
/// the save is done, and a `no` before then cancels it. A `no` while the start runs is
/// answered at once, as Redis kills its AOF child then: the start stops the journal again
/// when it ends (a `yes` before that takes the `no` back).
pub fn set_appendonly(server: &Arc<Server>, on: bool) -> Result<(), String> {
    // Decisions about a running start are taken under this lock, and so is its end's.
    let end = START_END.lock();
    if P.aof_stop_requested.load(Relaxed) {
        if on {
            P.aof_stop_requested.store(false, Relaxed);
        }
        return Ok(());
    }
    if P.aof_stopping.load(Relaxed) {
        return Err("a rewrite of the journal is in progress: retry when it is done".into());
    }
    let running = journal::enabled() || P.aof_starting.load(Relaxed);
    if on == running {
        return Ok(());
    }
    // Whoever takes the flag first, this or the persistence thread, decides.
    if !on && P.aof_start_scheduled.swap(false, Relaxed) {
        P.aof_starting.store(false, Relaxed);
        return Ok(());
    }
    if !on && P.aof_starting.load(Relaxed) && P.rewrite_running.load(Relaxed) {
        P.aof_stop_requested.store(true, Relaxed);
        return Ok(());
    }
    drop(end);
    if P.rewrite_running.load(Relaxed) {
        return Err("a rewrite of the journal is in progress: retry when it is done".into());
    }
    if !on {
        let s = server.clone();
        std::thread::Builder::new()
            .name("aof-stop".into())
            .spawn(move || stop_journal(&s))
            .map_err(|e| e.to_string())?;
        return Ok(());
    }
    if P.bgsave_running.load(Relaxed) {
        // INFO shows aof_enabled:1 and aof_rewrite_scheduled:1 meanwhile, as Redis's.
        P.aof_starting.store(true, Relaxed);
        P.aof_start_scheduled.store(true, Relaxed);
        ensure_cron(server);
        tracing::warn!("AOF was enabled but there is already another background operation. An AOF background was scheduled to start when possible.");
        return Ok(());
    }
    start_aof(server)
}

/// Held while deciding about a running start of the journal, and by the start as it ends.
static START_END: parking_lot::Mutex<()> = parking_lot::Mutex::new(());

/// `appendonly no`: at a cut no more records are taken; the buffer is written and fsynced
/// and the files closed.
fn stop_journal(s: &Arc<Server>) {
    {
        let _gate = s.exec_gate.exclusive();
        let all: Vec<usize> = (0..s.store.shard_count()).collect();
        let _locks = s.store.lock_many(&all);
        journal::disable();
    }
    journal::close();
    tracing::info!("Background append only file stopped (appendonly no)");
}

/// Starts the journal on a thread of its own (see [`set_appendonly`]).
fn start_aof(server: &Arc<Server>) -> Result<(), String> {
    let s = server.clone();
    P.aof_starting.store(true, Relaxed);
    P.rewrite_running.store(true, Relaxed);
    P.rewrite_started
        .store(crate::util::clock::now_ms() as u64, Relaxed);
    let spawned = std::thread::Builder::new()
        .name("aof-start".into())
        .spawn(move || {
            let started = std::time::Instant::now();
            let r = start_journal(&s);
            P.last_rewrite_secs
                .store(started.elapsed().as_secs() as i64, Relaxed);
            match r {
                Ok(()) => {
                    P.last_rewrite_ok.store(true, Relaxed);
                    P.rewrites.fetch_add(1, Relaxed);
                    tracing::info!(
                        "Background AOF rewrite finished successfully: the append only file is on"
                    );
                }
                Err(e) => {
                    P.last_rewrite_ok.store(false, Relaxed);
                    P.rewrite_failures.fetch_add(1, Relaxed);
                    tracing::warn!("Can't turn on the append only file: {e}");
                    journal::stop();
                    s.config.write().set_normalized("appendonly", "no".into());
                }
            }
            let stop = {
                let _end = START_END.lock();
                let stop = P.aof_stop_requested.swap(false, Relaxed);
                P.aof_stopping.store(stop, Relaxed);
                P.aof_starting.store(false, Relaxed);
                stop
            };
            // `appendonly no` came while it started.
            if stop && journal::enabled() {
                stop_journal(&s);
            }
            P.aof_stopping.store(false, Relaxed);
            P.rewrite_running.store(false, Relaxed);
        });
    if let Err(e) = spawned {
        P.aof_starting.store(false, Relaxed);
        P.rewrite_running.store(false, Relaxed);
        return Err(e.to_string());
    }
    Ok(())
}

/// The work of `CONFIG SET appendonly yes`: a new incremental file, the journal started
/// into it at a cut, the base of that cut, then the manifest naming both (the files of an
/// earlier journal in the directory are replaced: their numbers are continued).
fn start_journal(server: &Arc<Server>) -> Result<(), String> {
    let (dir, prefix, policy) = {
        let c = server.config.read();
        (
            std::path::absolute(aof::dir_of(c.get("dir"), c.get("appenddirname")))
                .map_err(|e| e.to_string())?,
            c.get("appendfilename").to_string(),
            policy_of(c.get("appendfsync")),
        )
    };
    let dir = AOF_DIR.get_or_init(|| dir).clone();
    let (mname, old) = existing_manifest(&dir, &prefix)?;
    let incr_seq = old
        .as_ref()
        .and_then(|m| m.incr.iter().map(|f| f.seq).max())
        .unwrap_or(0)
        + 1;
    let base_seq = old
        .as_ref()
        .and_then(|m| m.base.as_ref().map(|b| b.seq))
        .unwrap_or(0)
        + 1;
    let incr = aof::FileInfo {
        name: aof::incr_name(&prefix, incr_seq),
        seq: incr_seq,
        kind: 'i',
    };
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(dir.join(&incr.name))
        .map_err(|e| format!("can't create {}: {e}", incr.name))?;
    file.sync_all().map_err(|e| e.to_string())?;
    let mut started = Ok(());
    let (snap, functions, _) = cut(server, |_| started = journal::start(file, 0, 0, policy))
        .ok_or("a snapshot is already being taken")?;
    started?;
    let base = install_base(server, snap, &functions, &dir, &prefix, base_seq)?;
    let new = aof::Manifest {
        base: Some(base.clone()),
        incr: vec![incr],
    };
    aof::write_manifest(&dir, &mname, &new.to_text())
        .map_err(|e| format!("can't write the AOF manifest: {e}"))?;
    if let Some(old) = old {
        for f in old.base.iter().chain(&old.incr) {
            if f.name != base.name && f.name != new.incr[0].name {
                let _ = std::fs::remove_file(dir.join(&f.name));
            }
        }
    }
    let base_size = std::fs::metadata(dir.join(&base.name)).map_or(0, |m| m.len());
    if let Some(j) = journal::journal() {
        j.base_size.store(base_size, Relaxed);
        let now = base_size + j.incr_size.load(Relaxed);
        j.current_size.store(now, Relaxed);
        P.rewrite_base_size.store(now, Relaxed);
    }
    ensure_cron(server);
    Ok(())
}

/// `BGREWRITEAOF`, as Redis 7.0 answers it.
pub fn bgrewriteaof(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    args.finish()?;
    if P.rewrite_running.load(Relaxed) {
        return Err(CommandError::msg(
            "ERR Background append only file rewriting already in progress",
        ));
    }
    // During a BGSAVE, or inside EXEC (whose end the rewrite's cut would wait for), the
    // rewrite starts once that is over, as in Redis.
    if P.bgsave_running.load(Relaxed) || ctx.client.in_exec {
        P.rewrite_scheduled.store(true, Relaxed);
        ensure_cron(ctx.server);
        return Ok(Reply::Status(
            "Background append only file rewriting scheduled".into(),
        ));
    }
    start_rewrite(ctx.server);
    Ok(Reply::Status(
        "Background append only file rewriting started".into(),
    ))
}

fn start_rewrite(server: &Arc<Server>) -> bool {
    if P.rewrite_running.swap(true, Relaxed) {
        return false;
    }
    P.rewrite_scheduled.store(false, Relaxed);
    P.rewrite_started
        .store(crate::util::clock::now_ms() as u64, Relaxed);
    let s = server.clone();
    let spawned = std::thread::Builder::new()
        .name("aof-rewrite".into())
        .spawn(move || {
            let started = std::time::Instant::now();
            // With the journal off, Redis 7 still writes a new base and a manifest naming it
            // alone, from which `appendonly yes` at the next start loads.
            let r = if journal::enabled() {
                rewrite(&s)
            } else {
                rewrite_base_only(&s)
            };
            let secs = started.elapsed().as_secs() as i64;
            P.last_rewrite_secs.store(secs, Relaxed);
            match r {
                Ok(()) => {
                    P.last_rewrite_ok.store(true, Relaxed);
                    P.rewrites.fetch_add(1, Relaxed);
                    P.rewrite_failures.store(0, Relaxed);
                    tracing::info!("Background AOF rewrite finished successfully");
                }
                Err(e) => {
                    P.last_rewrite_ok.store(false, Relaxed);
                    P.rewrite_failures.fetch_add(1, Relaxed);
                    tracing::warn!("Background AOF rewrite failed: {e}");
                }
            }
            P.rewrite_running.store(false, Relaxed);
        });
    if let Err(e) = spawned {
        tracing::warn!("Can't start the AOF rewrite: {e}");
        P.rewrite_running.store(false, Relaxed);
        return false;
    }
    tracing::info!("Background append only file rewriting started");
    true
}

/// Rewrites the journal: a new incremental file takes every change from the cut on, a new
/// base holds the data at the cut (RESP commands: `aof-use-rdb-preamble no`), and the
/// manifest switches from (old base, old incrementals, new incremental) to (new base, new
/// incremental) atomically; the old files are deleted. At every moment the manifest on
/// disk names files that together hold every acknowledged write.
fn rewrite(server: &Arc<Server>) -> Result<(), String> {
    let j = journal::journal()
        .filter(|_| journal::enabled())
        .ok_or("the journal is off")?;
    let (dir, prefix) = paths(server);
    let mname = aof::Manifest::manifest_name(&prefix);
    let text =
        std::fs::read(dir.join(&mname)).map_err(|e| format!("can't read the AOF manifest: {e}"))?;
    let old = aof::Manifest::parse(&text)?;
    let incr_seq = old.incr.iter().map(|f| f.seq).max().unwrap_or(0) + 1;
    let base_seq = old.base.as_ref().map_or(0, |b| b.seq) + 1;
    // 1. The new incremental file, named in the manifest before anything is written to it.
    let incr = aof::FileInfo {
        name: aof::incr_name(&prefix, incr_seq),
        seq: incr_seq,
        kind: 'i',
    };
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(dir.join(&incr.name))
        .map_err(|e| format!("can't create {}: {e}", incr.name))?;
    file.sync_all().map_err(|e| e.to_string())?;
    let mut during = old.clone();
    during.incr.push(incr.clone());
    aof::write_manifest(&dir, &mname, &during.to_text())
        .map_err(|e| format!("can't write the AOF manifest: {e}"))?;
    // 2. The cut: records from here on go to the new file; the snapshot holds the rest.
    let (snap, functions, _) =
        cut(server, |seq| j.switch_at(seq, file)).ok_or("a snapshot is already being taken")?;
    // 3. The base, in a temporary file.
    let base = install_base(server, snap, &functions, &dir, &prefix, base_seq)?;
    // 4. The cut is written before the manifest drops the old files (it is, unless the
    // commands that took their numbers before it have not ended yet).
    let waited = std::time::Instant::now();
    while !j.switched() {
        if waited.elapsed() > std::time::Duration::from_secs(30) {
            return Err("the journal did not reach the rewrite's cut".into());
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let new = aof::Manifest {
        base: Some(base.clone()),
        incr: vec![incr],
    };
    aof::write_manifest(&dir, &mname, &new.to_text())
        .map_err(|e| format!("can't write the AOF manifest: {e}"))?;
    for f in old.base.iter().chain(&old.incr) {
        if f.name != base.name {
            let _ = std::fs::remove_file(dir.join(&f.name));
        }
    }
    let base_size = std::fs::metadata(dir.join(&base.name)).map_or(0, |m| m.len());
    j.base_size.store(base_size, Relaxed);
    let now = base_size + j.incr_size.load(Relaxed);
    j.current_size.store(now, Relaxed);
    P.rewrite_base_size.store(now, Relaxed);
    Ok(())
}

/// The journal's directory, made if missing, with its manifest's name and the manifest an
/// earlier journal left there (if any): a new base and incremental file continue its numbers.
fn existing_manifest(
    dir: &std::path::Path,
    prefix: &str,
) -> Result<(String, Option<aof::Manifest>), String> {
    std::fs::create_dir_all(dir).map_err(|e| {
        format!(
            "Can't open or create append-only dir {}: {e}",
            dir.display()
        )
    })?;
    let mname = aof::Manifest::manifest_name(prefix);
    let old = match std::fs::read(dir.join(&mname)) {
        Ok(text) => Some(aof::Manifest::parse(&text)?),
        Err(_) => None,
    };
    Ok((mname, old))
}

/// BGREWRITEAOF with the journal off: a base from a snapshot, then a manifest naming only it
/// (the incremental files of an earlier journal are folded into it and removed).
fn rewrite_base_only(server: &Arc<Server>) -> Result<(), String> {
    let (dir, prefix) = paths(server);
    let (mname, old) = existing_manifest(&dir, &prefix)?;
    let base_seq = old
        .as_ref()
        .and_then(|m| m.base.as_ref().map(|b| b.seq))
        .unwrap_or(0)
        + 1;
    let (snap, functions, _) = cut(server, |_| ()).ok_or("a snapshot is already being taken")?;
    let base = install_base(server, snap, &functions, &dir, &prefix, base_seq)?;
    let new = aof::Manifest {
        base: Some(base.clone()),
        incr: Vec::new(),
    };
    aof::write_manifest(&dir, &mname, &new.to_text())
        .map_err(|e| format!("can't write the AOF manifest: {e}"))?;
    for f in old.iter().flat_map(|m| m.base.iter().chain(&m.incr)) {
        if f.name != base.name {
            let _ = std::fs::remove_file(dir.join(&f.name));
        }
    }
    Ok(())
}

/// Writes a new AOF base from `snap` (a temporary file renamed into place, the directory
/// fsynced) and lets the snapshot go; the base's entry for the manifest. Shared by
/// BGREWRITEAOF and `CONFIG SET appendonly yes`.
fn install_base(
    server: &Arc<Server>,
    snap: Snapshot,
    functions: &[Bytes],
    dir: &std::path::Path,
    prefix: &str,
    base_seq: i64,
) -> Result<aof::FileInfo, String> {
    let tmp = dir.join(format!("temp-rewriteaof-bg-{}.aof", std::process::id()));
    let copying = std::time::Instant::now();
    let r = write_base(server, &snap, functions, &tmp);
    if let Ok(keys) = &r {
        log_snapshot("AOF base written", &snap, *keys, copying);
    }
    P.last_rewrite_cow.store(snap.cow_bytes() as u64, Relaxed);
    drop(snap);
    if let Err(e) = r {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    let base = aof::FileInfo {
        name: aof::base_name(prefix, base_seq),
        seq: base_seq,
        kind: 'b',
    };
    std::fs::rename(&tmp, dir.join(&base.name)).map_err(|e| e.to_string())?;
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| e.to_string())?;
    Ok(base)
}

fn write_base(
    server: &Arc<Server>,
    snap: &Snapshot,
    functions: &[Bytes],
    path: &std::path::Path,
) -> Result<u64, String> {
    use std::io::Seek;
    let io = |e: std::io::Error| format!("can't write the AOF base: {e}");
    let mut f = SyncingFile::new(std::fs::File::create(path).map_err(io)?);
    let mut buf: Vec<u8> = Vec::with_capacity(1 << 16);
    for code in functions {
        aof::encode(&mut buf, &[b"FUNCTION", b"LOAD", b"REPLACE", code]);
    }
    let mut db = usize::MAX;
    let keys = each_item(server, snap, true, None, |it| {
        crate::store::journal::base::item(&mut buf, &mut db, it);
        if buf.len() >= 1 << 16 {
            f.write_all(&buf)?;
            buf.clear();
        }
        Ok(())
    })
    .map_err(io)?;
    f.write_all(&buf).map_err(io)?;
    buf.clear();
    // Documents: not part of the cut (their records are idempotent, see `snapshot`), but
    // the catalog must be one catalog: if a collection is created, dropped or renamed while
    // they are copied, the copy starts over.
    let start = f.file.stream_position().map_err(io)?;
    for _attempt in 0..5 {
        f.file.set_len(start).map_err(io)?;
        f.file.seek(std::io::SeekFrom::Start(start)).map_err(io)?;
        let mut dbsel = db;
        if write_documents(server, snap, &mut f, &mut dbsel).map_err(io)? {
            f.file.sync_all().map_err(io)?;
            return Ok(keys);
        }
    }
    Err("the collection catalog kept changing while the documents were copied".into())
}

/// The collections, their indexes and documents; false if the catalog changed meanwhile.
fn write_documents(
    server: &Arc<Server>,
    snap: &Snapshot,
    f: &mut SyncingFile,
    db: &mut usize,
) -> std::io::Result<bool> {
    let gen = snapshot::catalog_gen();
    let defs = snapshot::collections(&server.store);
    let mut buf = Vec::with_capacity(1 << 16);
    let mut docs = Vec::new();
    let mut pacer = Pacer::new();
    for def in &defs {
        // Databases are named as at the cut, as the keys are: a SWAPDB since then is in the
        // journal after the base.
        let at_cut = snap.db_at_cut(def.db);
        if at_cut != *db {
            aof::encode(&mut buf, &[b"SELECT", at_cut.to_string().as_bytes()]);
            *db = at_cut;
        }
        let name = def.name.as_bytes();
        def.encode(&mut buf);
        for shard in 0..server.store.shard_count() {
            let mut from = 0;
            loop {
                let next = match snapshot::copy_docs(
                    &server.store,
                    gen,
                    def.db,
                    &def.name,
                    shard,
                    from,
                    &mut docs,
                ) {
                    Ok(n) => n,
                    Err(()) => return Ok(false),
                };
                for d in &docs {
                    aof::encode(&mut buf, &[b"DOC.JOURNALPUT", name, d]);
                }
                if buf.len() >= 1 << 16 {
                    f.write_all(&buf)?;
                    buf.clear();
                }
                pacer.rest();
                match next {
                    Some(n) => from = n,
                    None => break,
                }
            }
        }
    }
    f.write_all(&buf)?;
    Ok(snapshot::catalog_gen() == gen)
}

/// `SAVE`: a snapshot written to `dir`/`dbfilename` before the reply. The client waits
/// (blocked, as for WAITAOF: the save runs on a thread of its own, which takes the exec gate
/// for its cut); the others do not, the snapshot being copy-on-write.
pub fn save(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    args.finish()?;
    if P.rewrite_running.load(Relaxed) {
        return Err(CommandError::msg(
            "ERR Background append only file rewriting in progress: this version takes one snapshot at a time, retry SAVE when it is done",
        ));
    }
    if P.bgsave_running.swap(true, Relaxed) {
        return Err(CommandError::msg("ERR Background save already in progress"));
    }
    let (tx, rx) = tokio::sync::oneshot::channel();
    let s = ctx.server.clone();
    let spawned = std::thread::Builder::new()
        .name("save".into())
        .spawn(move || {
            let r = save_rdb(&s, true, None);
            P.bgsave_running.store(false, Relaxed);
            let reply = match r {
                Ok(()) => Reply::ok(),
                Err(e) => {
                    tracing::warn!("{e}");
                    Reply::error("ERR")
                }
            };
            let _ = tx.send(reply);
        });
    if spawned.is_err() {
        P.bgsave_running.store(false, Relaxed);
        return Err(CommandError::msg("ERR"));
    }
    ctx.client.blocked = Some(crate::state::blocking::Blocked {
        id: ctx.client.id(),
        reply: rx,
        deadline: None,
    });
    Ok(Reply::NoReply)
}

/// FLUSHALL under a `save` schedule saves the emptied data set in the foreground, as Redis
/// does (`flushAllDataAndResetRDB`): `rdb_changes_since_last_save` goes back to 0, so no
/// scheduled save follows the flush. The client waits for it as for SAVE (true: it waits,
/// answered OK whatever the outcome, as Redis only logs a failed save). Inside MULTI/EXEC
/// or a script, where a command cannot wait, and while another snapshot is being written
/// (Redis kills a running BGSAVE's child first), nothing is saved here: the schedule saves
/// later, as after any other write.
pub fn save_after_flushall(ctx: &mut Ctx<'_>) -> bool {
    if crate::config::save_schedule(ctx.server.config.read().get("save")).is_empty()
        || ctx.client.in_exec
        || crate::commands::scripting::in_script()
        || P.rewrite_running.load(Relaxed)
        || P.bgsave_running.swap(true, Relaxed)
    {
        return false;
    }
    let (tx, rx) = tokio::sync::oneshot::channel();
    let s = ctx.server.clone();
    let spawned = std::thread::Builder::new()
        .name("save".into())
        .spawn(move || {
            if let Err(e) = save_rdb(&s, true, None) {
                tracing::warn!("{e}");
            }
            P.bgsave_running.store(false, Relaxed);
            let _ = tx.send(Reply::ok());
        });
    if spawned.is_err() {
        P.bgsave_running.store(false, Relaxed);
        return false;
    }
    ctx.client.blocked = Some(crate::state::blocking::Blocked {
        id: ctx.client.id(),
        reply: rx,
        deadline: None,
    });
    true
}

/// `BGSAVE [SCHEDULE]`, as Redis 7.0 answers it.
pub fn bgsave(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let schedule = match args.next_token() {
        None => false,
        Some(t) if &*t == b"SCHEDULE" => true,
        Some(_) => return Err(CommandError::syntax()),
    };
    args.finish()?;
    if P.bgsave_running.load(Relaxed) {
        return Err(CommandError::msg("ERR Background save already in progress"));
    }
    if P.rewrite_running.load(Relaxed) || ctx.client.in_exec {
        if schedule || ctx.client.in_exec {
            P.bgsave_scheduled.store(true, Relaxed);
            ensure_cron(ctx.server);
            return Ok(Reply::Status("Background saving scheduled".into()));
        }
        return Err(CommandError::msg(
            "ERR Another child process is active (AOF?): can't BGSAVE right now. Use BGSAVE SCHEDULE in order to schedule a BGSAVE whenever possible.",
        ));
    }
    start_bgsave(ctx.server);
    Ok(Reply::Status("Background saving started".into()))
}

fn start_bgsave(server: &Arc<Server>) -> bool {
    if P.bgsave_running.swap(true, Relaxed) {
        return false;
    }
    P.bgsave_scheduled.store(false, Relaxed);
    let now = crate::util::clock::now_ms() as u64;
    P.bgsave_started.store(now, Relaxed);
    P.last_bgsave_try.store(now / 1000, Relaxed);
    let s = server.clone();
    // The child exists before BGSAVE answers, as Redis's forked one: a test that sees the
    // save in progress finds it (`pgrep -P`) and may kill it.
    let child = SaveChild::start(true);
    let spawned = std::thread::Builder::new()
        .name("bgsave".into())
        .spawn(move || {
            let started = std::time::Instant::now();
            let r = save_rdb(&s, true, Some(child));
            P.last_bgsave_secs
                .store(started.elapsed().as_secs() as i64, Relaxed);
            P.last_bgsave_ok.store(r.is_ok(), Relaxed);
            s.bgsave_finished(r.is_ok());
            if let Err(e) = r {
                tracing::warn!("Background saving error: {e}");
            } else {
                tracing::info!("Background saving terminated with success");
            }
            P.bgsave_running.store(false, Relaxed);
        });
    if spawned.is_err() {
        P.bgsave_running.store(false, Relaxed);
        return false;
    }
    true
}

/// Writes the snapshot as `dump.rdb` (RDB version 10); `paced` and `child` as for
/// [`each_item`].
fn save_rdb(server: &Arc<Server>, paced: bool, child: Option<SaveChild>) -> Result<(), String> {
    let (dir, file) = {
        let c = server.config.read();
        (
            std::path::PathBuf::from(c.get("dir")),
            c.get("dbfilename").to_string(),
        )
    };
    let io = |e: std::io::Error| format!("Failed saving the DB: {e}");
    let mut w = crate::store::journal::rdb_save::RdbWriter::create(
        &dir,
        crate::state::REDIS_COMPAT_VERSION,
        server.store.used_bytes(),
    )
    .map_err(io)?
    .compressed(server.config.read().get_bool("rdbcompression"));
    // Where the data stands in the replication history (Redis's rdbSaveInfo): a restart
    // from the file continues with a partial resynchronisation. A replica's cut falls between
    // two commands its link applies, so its applied offset is the data's.
    let applying = crate::state::replication::is_replica()
        .then(|| crate::state::replication::repl().applying.lock());
    let mut history = None;
    let (snap, functions, dirty_at_cut) = cut(server, |seq| {
        history = crate::state::replication::history_at_cut(seq, applying.is_some());
        drop(applying);
    })
    .ok_or_else(|| "Failed saving the DB: a snapshot is already being taken".to_string())?;
    let copying = std::time::Instant::now();
    let r = w
        .functions(&functions)
        .and_then(|_| each_item(server, &snap, paced, child, |it| w.item(it)))
        .and_then(|n| {
            if let Some((id, offset, db)) = history.and_then(|h| h.resolve()) {
                if let Some(db) = db {
                    w.aux("repl-stream-db", &db.to_string())?;
                }
                w.aux("repl-id", &id)?;
                w.aux("repl-offset", &offset.to_string())?;
            }
            Ok(n)
        });
    if let Ok(keys) = &r {
        log_snapshot("RDB snapshot written", &snap, *keys, copying);
    }
    P.last_save_cow.store(snap.cow_bytes() as u64, Relaxed);
    drop(snap);
    if let Err(e) = r {
        w.abort();
        return Err(io(e));
    }
    let keys = w.keys;
    w.finish(&dir.join(&file)).map_err(io)?;
    P.last_save
        .store(crate::util::clock::now_ms() as u64 / 1000, Relaxed);
    P.dirty_at_save.store(dirty_at_cut, Relaxed);
    P.saves.fetch_add(1, Relaxed);
    tracing::info!("DB saved on disk ({keys} keys in {file})");
    let colls = server.store.document_totals();
    if colls.collections > 0 {
        tracing::warn!(
            "{} collections are not in {file}: RDB has no place for documents, which only the journal (appendonly yes) keeps",
            colls.collections
        );
    }
    Ok(())
}

/// The save SHUTDOWN (or a signal's `shutdown-on-*`) asks for, made before the server stops
/// serving so that a failure can keep it running (Redis's `prepareForShutdown`). Writes are
/// paused first: one that arrives waits unanswered and never runs, so the file holds every
/// acknowledged write. A write already past the pause check when the pause began may still
/// run after the snapshot's cut; the store's change count tells, and the save is made again.
/// On failure the pause is lifted and the error returned (Redis's "Error trying to save the
/// DB, can't exit"). Blocks the calling thread: not for a thread holding the exec gate.
pub fn save_before_shutdown(server: &Arc<Server>) -> Result<(), String> {
    use crate::state::pause::{pause, unpause, Purpose, WRITE};
    pause(Purpose::Shutdown, WRITE, None);
    let r = save_while_paused(server);
    if r.is_err() {
        unpause(Purpose::Shutdown);
    }
    r
}

fn save_while_paused(server: &Arc<Server>) -> Result<(), String> {
    let waited = std::time::Instant::now();
    while P.bgsave_running.load(Relaxed) || P.rewrite_running.load(Relaxed) {
        if waited.elapsed() > std::time::Duration::from_secs(60) {
            return Err("a background snapshot did not end".into());
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    tracing::info!("Saving the final RDB snapshot before exiting.");
    for _ in 0..3 {
        if P.bgsave_running.swap(true, Relaxed) {
            return Err("Background save already in progress".into());
        }
        let r = save_rdb(server, false, None);
        P.bgsave_running.store(false, Relaxed);
        r?;
        if dirty(server) == P.dirty_at_save.load(Relaxed) {
            return Ok(());
        }
    }
    Err("writes went on during the final save".into())
}

/// `LASTSAVE`: the last successful save, or the start of the server.
pub fn lastsave(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    args.finish()?;
    let t = match P.last_save.load(Relaxed) {
        0 => ctx.server.started_unix,
        t => t,
    };
    Ok(Reply::Int(t as i64))
}

/// Starts the thread of [`ensure_cron`] at start: the `save` schedule may be set at any
/// time.
pub fn start_schedules(server: &Arc<Server>) {
    ensure_cron(server);
}

/// The thread that starts what was scheduled (a rewrite asked for during a BGSAVE, a
/// BGSAVE SCHEDULE during a rewrite), the saves of the `save` schedule and the automatic
/// rewrites, ten times a second.
fn ensure_cron(server: &Arc<Server>) {
    if P.cron.swap(true, Relaxed) {
        return;
    }
    let s = Arc::downgrade(server);
    let spawned = std::thread::Builder::new()
        .name("persist-cron".into())
        .spawn(move || loop {
            std::thread::sleep(std::time::Duration::from_millis(100));
            let Some(server) = s.upgrade() else { return };
            cron(&server);
        });
    if spawned.is_err() {
        P.cron.store(false, Relaxed);
    }
}

fn cron(server: &Arc<Server>) {
    let busy = P.rewrite_running.load(Relaxed) || P.bgsave_running.load(Relaxed);
    if busy {
        return;
    }
    // Claimed as a rewrite first, so an `appendonly no` from then on is told to retry (as
    // during any start) rather than stopping a journal that is not started yet.
    if P.aof_start_scheduled.load(Relaxed) && !P.rewrite_running.swap(true, Relaxed) {
        if !P.aof_start_scheduled.swap(false, Relaxed) {
            P.rewrite_running.store(false, Relaxed);
        } else if let Err(e) = start_aof(server) {
            tracing::warn!("Can't turn on the append only file: {e}");
            P.aof_starting.store(false, Relaxed);
            server
                .config
                .write()
                .set_normalized("appendonly", "no".into());
        }
        return;
    }
    if P.rewrite_scheduled.load(Relaxed) {
        start_rewrite(server);
        return;
    }
    if P.bgsave_scheduled.load(Relaxed) {
        start_bgsave(server);
        return;
    }
    if save_schedule_due(server) {
        start_bgsave(server);
        return;
    }
    // Redis's `auto-aof-rewrite-percentage` / `auto-aof-rewrite-min-size`.
    let Some(j) = journal::journal().filter(|_| journal::enabled()) else {
        return;
    };
    let (perc, min) = {
        let c = server.config.read();
        (
            c.get_u64("auto-aof-rewrite-percentage"),
            c.get_u64("auto-aof-rewrite-min-size"),
        )
    };
    let size = j.current_size.load(Relaxed);
    if perc > 0 && size > min {
        let base = P.rewrite_base_size.load(Relaxed).max(1);
        let growth = (size * 100 / base).saturating_sub(100);
        if growth >= perc {
            tracing::info!("Starting automatic rewriting of AOF on {growth}% growth");
            start_rewrite(server);
        }
    }
}

/// Redis's `serverCron` check of the `save` schedule (once a second here): a pair whose
/// seconds have passed since the last successful save (or the start), with at least its
/// changes made since, starts a BGSAVE, unless the last BGSAVE failed less than
/// `BGSAVE_RETRY_DELAY` seconds ago.
fn save_schedule_due(server: &Server) -> bool {
    let now = crate::util::clock::now_ms() as u64 / 1000;
    if P.schedule_checked.swap(now, Relaxed) == now {
        return false;
    }
    let schedule = crate::config::save_schedule(server.config.read().get("save"));
    if schedule.is_empty() {
        return false;
    }
    let changes = dirty(server).saturating_sub(P.dirty_at_save.load(Relaxed));
    let last = match P.last_save.load(Relaxed) {
        0 => server.started_unix,
        t => t,
    };
    let may_retry = P.last_bgsave_ok.load(Relaxed)
        || now.saturating_sub(P.last_bgsave_try.load(Relaxed)) > BGSAVE_RETRY_DELAY;
    let due = schedule
        .iter()
        .find(|&&(secs, min)| changes >= min && now.saturating_sub(last) > secs && may_retry);
    if let Some((secs, min)) = due {
        tracing::info!("{min} changes in {secs} seconds. Saving...");
        return true;
    }
    false
}

/// `INFO persistence`, in Redis 7.0's order.
pub fn persistence_info(server: &Server) -> Vec<(&'static str, String)> {
    let now_ms = crate::util::clock::now_ms() as u64;
    let since = |started: &AtomicU64, running: &AtomicBool| {
        if running.load(Relaxed) {
            (now_ms.saturating_sub(started.load(Relaxed)) / 1000).to_string()
        } else {
            "-1".into()
        }
    };
    let ok = |b: bool| if b { "ok" } else { "err" }.to_string();
    let last_save = match P.last_save.load(Relaxed) {
        0 => server.started_unix,
        t => t,
    };
    let mut v: Vec<(&'static str, String)> = vec![
        (
            "loading",
            ((LOAD.on.load(Relaxed) && !is_async_loading()) as u8).to_string(),
        ),
        ("async_loading", (is_async_loading() as u8).to_string()),
        ("current_cow_peak", "0".into()),
        ("current_cow_size", "0".into()),
        ("current_cow_size_age", "0".into()),
        ("current_fork_perc", "0.00".into()),
        (
            "current_save_keys_processed",
            P.save_keys_processed.load(Relaxed).to_string(),
        ),
        (
            "current_save_keys_total",
            P.save_keys_total.load(Relaxed).to_string(),
        ),
        (
            "rdb_changes_since_last_save",
            dirty(server)
                .saturating_sub(P.dirty_at_save.load(Relaxed))
                .to_string(),
        ),
        (
            "rdb_bgsave_in_progress",
            (P.bgsave_running.load(Relaxed) as u8).to_string(),
        ),
        ("rdb_last_save_time", last_save.to_string()),
        ("rdb_last_bgsave_status", ok(P.last_bgsave_ok.load(Relaxed))),
        (
            "rdb_last_bgsave_time_sec",
            P.last_bgsave_secs.load(Relaxed).to_string(),
        ),
        (
            "rdb_current_bgsave_time_sec",
            since(&P.bgsave_started, &P.bgsave_running),
        ),
        ("rdb_saves", P.saves.load(Relaxed).to_string()),
        (
            "rdb_last_cow_size",
            P.last_save_cow.load(Relaxed).to_string(),
        ),
        (
            "rdb_last_load_keys_expired",
            P.last_load_expired.load(Relaxed).to_string(),
        ),
        (
            "rdb_last_load_keys_loaded",
            P.last_load_keys.load(Relaxed).to_string(),
        ),
    ];
    let j = journal::journal().filter(|_| journal::enabled());
    let starting = P.aof_starting.load(Relaxed);
    v.extend([
        (
            "aof_enabled",
            (((j.is_some() || starting)
                && !P.aof_stop_requested.load(Relaxed)
                && !P.aof_stopping.load(Relaxed)) as u8)
                .to_string(),
        ),
        (
            "aof_rewrite_in_progress",
            (P.rewrite_running.load(Relaxed) as u8).to_string(),
        ),
        (
            "aof_rewrite_scheduled",
            ((P.rewrite_scheduled.load(Relaxed) || P.aof_start_scheduled.load(Relaxed)) as u8)
                .to_string(),
        ),
        (
            "aof_last_rewrite_time_sec",
            P.last_rewrite_secs.load(Relaxed).to_string(),
        ),
        (
            "aof_current_rewrite_time_sec",
            since(&P.rewrite_started, &P.rewrite_running),
        ),
        (
            "aof_last_bgrewrite_status",
            ok(P.last_rewrite_ok.load(Relaxed)),
        ),
        ("aof_rewrites", P.rewrites.load(Relaxed).to_string()),
        (
            "aof_rewrites_consecutive_failures",
            P.rewrite_failures.load(Relaxed).to_string(),
        ),
        (
            "aof_last_write_status",
            ok(j.is_none_or(|j| j.last_write_ok.load(Relaxed) && j.last_fsync_ok.load(Relaxed))),
        ),
        (
            "aof_last_cow_size",
            P.last_rewrite_cow.load(Relaxed).to_string(),
        ),
        ("module_fork_in_progress", "0".into()),
        ("module_fork_last_cow_size", "0".into()),
    ]);
    if let Some(j) = j {
        v.extend([
            ("aof_current_size", j.current_size.load(Relaxed).to_string()),
            ("aof_base_size", j.base_size.load(Relaxed).to_string()),
            (
                "aof_pending_rewrite",
                (P.rewrite_scheduled.load(Relaxed) as u8).to_string(),
            ),
            ("aof_buffer_length", j.buffered().0.to_string()),
            ("aof_pending_bio_fsync", "0".into()),
            ("aof_delayed_fsync", "0".into()),
        ]);
    }
    v.extend(loading_info());
    v
}

// ---------------------------------------------------------------------------------------
// Replication: the snapshot a full resynchronisation sends

/// The magic of the trailer after the RDB of a full resynchronisation when there are
/// documents: the documents' RESP records, then this and their length (u64, little endian).
/// RDB has no place for documents; a replica of this server finds them here.
pub const DOCS_TRAILER: &[u8; 8] = b"TIDEDOCS";

/// Writes the payload of a full resynchronisation to `target`: the key space at a cut as
/// RDB version 10, then the collections as `DOC.CREATE`/`DOC.JOURNALPUT` records (copied
/// after the cut, as a rewrite's base copies them: their records are idempotent, and the
/// stream from the cut brings every later change). `at_cut` runs at the cut with the
/// number of the first change after it, and returns the database a replica's proxied stream
/// has selected there (see `server/replication.rs`). The key count, or why not.
pub fn replication_snapshot(
    server: &Arc<Server>,
    target: &std::path::Path,
    at_cut: impl FnOnce(u64) -> Option<usize>,
) -> Result<u64, String> {
    use std::io::{Seek, Write};
    let io = |e: std::io::Error| format!("can't write the RDB for the replica: {e}");
    let dir = target
        .parent()
        .map(|p| p.to_path_buf())
        .unwrap_or_else(|| std::path::PathBuf::from("."));
    let mut w = crate::store::journal::rdb_save::RdbWriter::create(
        &dir,
        crate::state::REDIS_COMPAT_VERSION,
        server.store.used_bytes(),
    )
    .map_err(io)?
    .compressed(server.config.read().get_bool("rdbcompression"));
    let mut stream_db = None;
    let Some((snap, functions, _)) = cut(server, |seq| stream_db = at_cut(seq)) else {
        w.abort();
        return Err("a snapshot is already being taken".into());
    };
    let r = w
        .functions(&functions)
        .and_then(|_| each_item(server, &snap, true, None, |it| w.item(it)))
        .and_then(|_| match stream_db {
            // A replica's snapshot: the database its master's stream has selected at the
            // cut, as Redis's `repl-stream-db` (its stream cannot name it again).
            Some(db) => w.aux("repl-stream-db", &db.to_string()),
            None => Ok(()),
        });
    if let Err(e) = r {
        w.abort();
        return Err(io(e));
    }
    let keys = w.keys;
    w.finish(target).map_err(io)?;
    if server.store.document_totals().collections == 0 {
        return Ok(keys);
    }
    let mut f = SyncingFile::new(
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(target)
            .map_err(io)?,
    );
    let start = f.file.seek(std::io::SeekFrom::End(0)).map_err(io)?;
    for _attempt in 0..5 {
        f.file.set_len(start).map_err(io)?;
        f.file.seek(std::io::SeekFrom::Start(start)).map_err(io)?;
        let mut db = usize::MAX;
        if write_documents(server, &snap, &mut f, &mut db).map_err(io)? {
            let end = f.file.stream_position().map_err(io)?;
            f.file.write_all(DOCS_TRAILER).map_err(io)?;
            f.file.write_all(&(end - start).to_le_bytes()).map_err(io)?;
            return Ok(keys);
        }
    }
    Err("the collection catalog kept changing while the documents were copied".into())
}

/// Why a diskless transfer did not start (nothing was sent yet).
#[derive(Debug)]
pub enum NotStreamed {
    /// Another snapshot is being taken: try again.
    Busy,
    /// The data holds collections, whose records are copied after the cut and may be copied
    /// again: only a file can take that, so the transfer goes through one.
    Collections,
    Failed(String),
}

/// A diskless full resynchronisation's payload (`repl-diskless-sync`): the key space at a
/// cut as RDB, written into `sink` as it is copied, with no file. `at_cut` runs at the cut as
/// for [`replication_snapshot`]; `ready` runs once the transfer is sure to go this way,
/// before the first byte reaches `sink`.
pub fn replication_snapshot_streamed(
    server: &Arc<Server>,
    sink: Box<dyn std::io::Write + Send>,
    at_cut: impl FnOnce(u64) -> Option<usize>,
    ready: impl FnOnce(),
) -> Result<u64, NotStreamed> {
    if server.store.document_totals().collections > 0 {
        return Err(NotStreamed::Collections);
    }
    let mut w = crate::store::journal::rdb_save::RdbWriter::streaming(
        sink,
        crate::state::REDIS_COMPAT_VERSION,
        server.store.used_bytes(),
    )
    .compressed(server.config.read().get_bool("rdbcompression"));
    let mut stream_db = None;
    let Some((snap, functions, _)) = cut(server, |seq| stream_db = at_cut(seq)) else {
        return Err(NotStreamed::Busy);
    };
    // The header is still in the writer's buffer: nothing has been sent.
    if server.store.document_totals().collections > 0 {
        return Err(NotStreamed::Collections);
    }
    ready();
    let r = w
        .functions(&functions)
        .and_then(|_| each_item(server, &snap, true, None, |it| w.item(it)))
        .and_then(|_| match stream_db {
            Some(db) => w.aux("repl-stream-db", &db.to_string()),
            None => Ok(()),
        });
    let keys = w.keys;
    r.and_then(|_| w.finish_stream())
        .map_err(|e| NotStreamed::Failed(format!("can't stream the RDB to the replica: {e}")))?;
    Ok(keys)
}

/// An atomic slot migration's snapshot, on the source: the collections of database 0 `keep`
/// accepts (by name) with their indexes and documents, then the keys it accepts, as the
/// commands that re-create them (the AOF base's form, `store::journal::base`), handed to
/// `sink` about 64 KB at a time. `at_cut` runs at the cut with the
/// journal's next number, as for [`replication_snapshot`]: the stream of later writes starts
/// there. Documents are copied after the cut as for a rewrite (their records are
/// idempotent, see `store::journal::snapshot`). `Ok(None)`: another snapshot is being
/// taken, try again. The number of keys.
pub fn slot_snapshot(
    server: &Arc<Server>,
    keep: &dyn Fn(&[u8]) -> bool,
    sink: &mut dyn FnMut(Vec<u8>) -> std::io::Result<()>,
    at_cut: impl FnOnce(u64),
) -> Result<Option<u64>, String> {
    const PIECE: usize = 1 << 16;
    let io = |e: std::io::Error| format!("can't send the slots' snapshot: {e}");
    let Some((snap, _, _)) = cut(server, at_cut) else {
        return Ok(None);
    };
    let mut buf = Vec::with_capacity(PIECE);
    let mut db = 0;
    let mut items = Vec::new();
    let mut pacer = Pacer::new();
    let mut keys = 0;
    let gen = snapshot::catalog_gen();
    let defs = snapshot::collections(&server.store);
    let changed = || "the collection catalog changed while the documents were copied".to_string();
    let mut docs = Vec::new();
    for def in defs
        .iter()
        .filter(|d| snap.db_at_cut(d.db) == 0 && keep(d.name.as_bytes()))
    {
        def.encode(&mut buf);
        let name = def.name.as_bytes();
        for shard in 0..server.store.shard_count() {
            let mut from = 0;
            loop {
                let next = snapshot::copy_docs(
                    &server.store,
                    gen,
                    def.db,
                    &def.name,
                    shard,
                    from,
                    &mut docs,
                )
                .map_err(|()| changed())?;
                for d in &docs {
                    aof::encode(&mut buf, &[b"DOC.JOURNALPUT", name, d]);
                }
                if buf.len() >= PIECE {
                    sink(std::mem::replace(&mut buf, Vec::with_capacity(PIECE))).map_err(io)?;
                }
                pacer.rest();
                match next {
                    Some(n) => from = n,
                    None => break,
                }
            }
        }
    }
    if snapshot::catalog_gen() != gen {
        return Err(changed());
    }
    if !buf.is_empty() {
        sink(std::mem::replace(&mut buf, Vec::with_capacity(PIECE))).map_err(io)?;
    }
    let keep_key = |d: usize, k: &[u8]| d == 0 && keep(k);
    // rdb-key-save-delay (a test knob) slows this copy as it slows a save's.
    let delay = crate::store::journal::child::key_save_delay().max(0) as u64;
    for shard in 0..server.store.shard_count() {
        while snap.next_chunk_where(&server.store, shard, &mut items, &keep_key) {
            for it in &items {
                crate::store::journal::base::item(&mut buf, &mut db, it);
                keys += 1;
                if delay > 0 {
                    std::thread::sleep(std::time::Duration::from_micros(delay));
                }
            }
            if buf.len() >= PIECE {
                sink(std::mem::replace(&mut buf, Vec::with_capacity(PIECE))).map_err(io)?;
            }
            pacer.rest();
        }
    }
    if !buf.is_empty() {
        sink(buf).map_err(io)?;
    }
    Ok(Some(keys))
}

/// Where a full resynchronisation's payload was received.
pub enum SyncPayload<'a> {
    /// A file (`repl-diskless-load disabled`): nothing is loading while it arrives.
    File(&'a std::path::Path),
    /// Memory (`repl-diskless-load swapdb`, or `on-empty-db` with nothing to keep): the
    /// caller began the load when the transfer started, asynchronous or not
    /// ([`begin_async_loading`], [`begin_loading_rdb`]), and the old data was served or
    /// answered `-LOADING` until now.
    Memory(Vec<u8>),
}

/// Loads a full resynchronisation's payload (written by [`replication_snapshot`] or by
/// Redis) in place of the data set: the RDB's keys and functions. Returns the key count,
/// the documents' RESP records that followed it (for the caller to run) and the stream's
/// database (`repl-stream-db`), if the payload names one.
pub fn load_replication_payload(
    server: &Arc<Server>,
    payload: SyncPayload<'_>,
) -> Result<(u64, Vec<u8>, Option<usize>), String> {
    match payload {
        SyncPayload::File(path) => load_payload_file(server, path),
        SyncPayload::Memory(mut bytes) => {
            let docs = split_docs_trailer(&mut bytes);
            // An asynchronous load has served the old data while the payload arrived; the
            // change from old to new happens with every client held back, so none reads
            // an empty data set or is answered -LOADING.
            let hold = is_async_loading().then(|| server.exec_gate.exclusive());
            let total = bytes.len() as u64;
            LOAD.total.store(total, Relaxed);
            KEY_LOAD_DELAY.store(server.config.read().get_u64("key-load-delay"), Relaxed);
            tracing::info!("MASTER <-> REPLICA sync: Flushing old data");
            flush_for_sync(server);
            let r = load_rdb_as_replica(server, &bytes[..]);
            end_loading();
            drop(hold);
            finish_replication_load(server, r, docs, "memory")
        }
    }
}

/// The documents' records a payload carries after its RDB (`DOCS_TRAILER`), cut off.
fn split_docs_trailer(bytes: &mut Vec<u8>) -> Vec<u8> {
    let len = bytes.len();
    if len < 16 || &bytes[len - 16..len - 8] != DOCS_TRAILER {
        return Vec::new();
    }
    let n = u64::from_le_bytes(bytes[len - 8..].try_into().unwrap_or_default());
    if n > (len - 16) as u64 {
        return Vec::new();
    }
    let at = len - 16 - n as usize;
    let docs = bytes[at..len - 16].to_vec();
    bytes.truncate(at);
    docs
}

fn load_rdb_as_replica(
    server: &Arc<Server>,
    src: impl std::io::Read,
) -> Result<Option<crate::store::rdb_file::Loaded>, crate::store::rdb_file::LoadError> {
    let mut log = |note: crate::store::rdb_file::Note, line: &str| match note {
        crate::store::rdb_file::Note::Notice => tracing::info!("{line}"),
        crate::store::rdb_file::Note::Warning => tracing::warn!("{line}"),
    };
    // A replica keeps its master's keys that are already past their deadline (Redis's
    // rdbLoad as a replica): the master's DELs remove them.
    crate::store::rdb_file::load_reader_as(
        &server.store,
        src,
        &mut log,
        &mut loading_progress,
        true,
    )
    .map(Some)
}

fn load_payload_file(
    server: &Arc<Server>,
    path: &std::path::Path,
) -> Result<(u64, Vec<u8>, Option<usize>), String> {
    use std::io::{Read, Seek};
    let io = |e: std::io::Error| format!("can't read the RDB from the master: {e}");
    let mut docs = Vec::new();
    {
        let mut f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(io)?;
        let len = f.metadata().map_err(io)?.len();
        if len >= 16 {
            let mut tail = [0u8; 16];
            f.seek(std::io::SeekFrom::Start(len - 16)).map_err(io)?;
            f.read_exact(&mut tail).map_err(io)?;
            if &tail[..8] == DOCS_TRAILER {
                let n = u64::from_le_bytes(tail[8..].try_into().unwrap_or_default());
                if n <= len - 16 {
                    let at = len - 16 - n;
                    f.seek(std::io::SeekFrom::Start(at)).map_err(io)?;
                    (&mut f).take(n).read_to_end(&mut docs).map_err(io)?;
                    f.set_len(at).map_err(io)?;
                }
            }
        }
    }
    let total = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    // Redis loads on its one thread and answers clients only every
    // loading-process-events-interval-bytes: a snapshot smaller than that is loaded with
    // every client waiting (the exec gate held exclusively), never answered -LOADING; a
    // larger one is loaded while they are answered -LOADING, as Redis answers them between
    // its intervals.
    let interval = server
        .config
        .read()
        .get_u64("loading-process-events-interval-bytes");
    let hold = (total <= interval).then(|| server.exec_gate.exclusive());
    if total > interval {
        begin_loading_rdb(server, total);
    }
    // The old data goes only now, with clients held back or answered -LOADING: none reads
    // an empty data set between the flush and the load.
    tracing::info!("MASTER <-> REPLICA sync: Flushing old data");
    flush_for_sync(server);
    tracing::info!("MASTER <-> REPLICA sync: Loading DB in memory");
    let r = match std::fs::File::open(path) {
        Ok(f) => load_rdb_as_replica(server, f),
        Err(e) => Err(crate::store::rdb_file::LoadError {
            offset: 0,
            what: format!("cannot open the file: {e}"),
        }),
    };
    end_loading();
    // Before the functions: FUNCTION LOAD runs through the dispatcher, which takes the gate.
    drop(hold);
    finish_replication_load(server, r, docs, "disk")
}

fn finish_replication_load(
    server: &Arc<Server>,
    r: Result<Option<crate::store::rdb_file::Loaded>, crate::store::rdb_file::LoadError>,
    docs: Vec<u8>,
    from: &str,
) -> Result<(u64, Vec<u8>, Option<usize>), String> {
    let loaded = match r {
        Ok(Some(l)) => l,
        Ok(None) => return Err("the RDB from the master is missing".into()),
        Err(e) => {
            return Err(format!(
                "Failed trying to load the MASTER synchronization DB from {from}: {e}"
            ))
        }
    };
    rdb_loaded(server, &loaded);
    load_functions(server, &loaded.functions)?;
    Ok((loaded.keys, docs, loaded.stream_db))
}
