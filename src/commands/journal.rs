//! The journal's commands and its start: replaying `appendonlydir` at start through the
//! command table (a loading client), `WAITAOF`, and the two internal commands that redo a
//! document change exactly (`DOC.JOURNALPUT`, `DOC.JOURNALDEL`).
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

const JRN: CommandSpec = family("document", acl::DOCUMENT);

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
];

fn replay_only() -> Result<(), CommandError> {
    if journal::loading() {
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

/// `WAITAOF numlocal numreplicas timeout` (Redis 7.2): waits until this client's last write
/// is fsynced. There are no replicas: `numreplicas > 0` waits out the timeout, as Redis does
/// when no replica acknowledges.
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
    let Some(j) = journal::journal().filter(|_| journal::enabled()) else {
        if numlocal > 0 {
            return Err(CommandError::msg(
                "ERR WAITAOF cannot be used when numlocal is set but appendonly is disabled.",
            ));
        }
        return Ok(Reply::Array(vec![Reply::Int(0), Reply::Int(0)]));
    };
    let woff = ctx.client.journal_seq;
    let acked = j.durable() >= woff;
    // Inside MULTI or a script nothing blocks: the answer is what is true now.
    if (acked && numreplicas == 0) || ctx.client.multi.is_some() || ctx.client.in_exec {
        return Ok(Reply::Array(vec![Reply::Int(acked as i64), Reply::Int(0)]));
    }
    let deadline = (timeout > 0)
        .then(|| std::time::Instant::now() + std::time::Duration::from_millis(timeout as u64));
    let (tx, rx) = tokio::sync::oneshot::channel();
    let journal = j.clone();
    j.on_durable(
        woff,
        deadline,
        numreplicas > 0,
        Box::new(move |_| {
            let local = journal.durable() >= woff;
            let _ = tx.send(Reply::Array(vec![Reply::Int(local as i64), Reply::Int(0)]));
        }),
    );
    ctx.client.blocked = Some(crate::state::blocking::Blocked {
        id: ctx.client.id(),
        reply: rx,
        deadline: None,
    });
    Ok(Reply::NoReply)
}

/// `INFO persistence`'s journal fields.
pub fn info_fields() -> Vec<(&'static str, String)> {
    let Some(j) = journal::journal().filter(|_| journal::enabled()) else {
        return vec![
            ("aof_enabled", "0".into()),
            ("aof_rewrite_in_progress", "0".into()),
            ("aof_rewrite_scheduled", "0".into()),
            ("aof_last_rewrite_time_sec", "-1".into()),
            ("aof_current_rewrite_time_sec", "-1".into()),
            ("aof_last_bgrewrite_status", "ok".into()),
            ("aof_rewrites", "0".into()),
            ("aof_rewrites_consecutive_failures", "0".into()),
            ("aof_last_write_status", "ok".into()),
            ("aof_last_cow_size", "0".into()),
        ];
    };
    use std::sync::atomic::Ordering::Relaxed;
    let ok = |b: bool| if b { "ok" } else { "err" }.to_string();
    vec![
        ("aof_enabled", "1".into()),
        ("aof_rewrite_in_progress", "0".into()),
        ("aof_rewrite_scheduled", "0".into()),
        ("aof_last_rewrite_time_sec", "-1".into()),
        ("aof_current_rewrite_time_sec", "-1".into()),
        ("aof_last_bgrewrite_status", "ok".into()),
        ("aof_rewrites", "0".into()),
        ("aof_rewrites_consecutive_failures", "0".into()),
        (
            "aof_last_write_status",
            ok(j.last_write_ok.load(Relaxed) && j.last_fsync_ok.load(Relaxed)),
        ),
        ("aof_last_cow_size", "0".into()),
        ("module_fork_in_progress", "0".into()),
        ("module_fork_last_cow_size", "0".into()),
        ("aof_current_size", j.current_size.load(Relaxed).to_string()),
        ("aof_base_size", j.base_size.load(Relaxed).to_string()),
        ("aof_pending_rewrite", "0".into()),
        ("aof_buffer_length", "0".into()),
        ("aof_pending_bio_fsync", "0".into()),
        ("aof_delayed_fsync", "0".into()),
    ]
}

pub fn policy_of(name: &str) -> u8 {
    match name {
        "always" => writer::ALWAYS,
        "no" => writer::NO,
        _ => writer::EVERYSEC,
    }
}

/// At start with `appendonly yes`, before any client connects: replays the manifest's files
/// through the command table as a loading client (nothing is journaled meanwhile and no key
/// expires lazily), cuts a torn last record (`aof-load-truncated yes`) or stops at
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
    std::fs::create_dir_all(&path).map_err(|e| {
        format!(
            "Can't open or create append-only dir {}: {e}",
            path.display()
        )
    })?;
    let mname = aof::Manifest::manifest_name(&prefix);
    let mpath = path.join(&mname);
    let manifest = match std::fs::read_to_string(&mpath) {
        Ok(text) => Some(aof::Manifest::parse(&text)?),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            return Err(format!(
                "Can't open the AOF manifest {}: {e}",
                mpath.display()
            ))
        }
    };
    let manifest = match manifest {
        Some(m) if m.incr.is_empty() && m.base.is_none() => None,
        m => m,
    };
    let mut base_size = 0;
    let manifest = match manifest {
        Some(mut m) => {
            let files: Vec<aof::FileInfo> = m.base.iter().chain(&m.incr).cloned().collect();
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
    journal::start(file, size, base_size, policy)
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
            let end = aof::read_file(&p, |argv| run_one(&mut ctx, argv, &f.name))?;
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
    crate::commands::transactions::reset_state(&mut Ctx {
        server,
        client: &mut client,
    });
    server.clients.unregister(handle.id);
    result
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
        tracing::debug!("journal replay: {}: {e}", String::from_utf8_lossy(&args[0]));
    }
    Ok(())
}

/// Collection and index DDL: journaled as the command itself when it succeeds (it changes no
/// key and reports no document change, and replays the same).
const DDL: &[&str] = &[
    "doc.create",
    "doc.drop",
    "doc.rename",
    "doc.createindex",
    "doc.dropindex",
    "doc.expireindex",
];

/// After a handler ran through the table: its frame of the journal's record closes.
pub fn left(spec: &CommandSpec, args: &[Bytes], reply: &Reply) {
    let ddl = DDL.contains(&spec.name) && !reply.is_error();
    journal::leave(args, spec.has(WRITE), ddl);
}

/// When a command ends: what the client's next replies and WAITAOF wait for.
pub fn ended(ctx: &mut Ctx<'_>, e: journal::Ended) {
    if e.seq > 0 {
        ctx.client.journal_seq = ctx.client.journal_seq.max(e.seq);
        if e.wait {
            ctx.client.journal_wait = ctx.client.journal_wait.max(e.seq);
        } else {
            ctx.client.journal_written = ctx.client.journal_written.max(e.seq);
        }
    }
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
