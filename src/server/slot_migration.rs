//! Atomic slot migration's network side (Redis 8.4's `CLUSTER MIGRATION`; the tasks are
//! `state::cluster::migration`'s).
//!
//! **The target** (`CLUSTER MIGRATION IMPORT`) connects to the slots' owner as a client,
//! authenticates as a replica would (`masteruser` / `masterauth`) and sends
//! `CLUSTER SYNCSLOTS <task-id> <its node id> <ranges>`. Everything that comes back after
//! `+OK` is a stream of commands it applies as a master's stream is applied (never
//! redirected, journaled and sent to its own replicas as its own writes), with control
//! lines among them: `#ASM SNAPSHOT-END`, `#ASM PING`, `#ASM HANDOFF`, `#ASM ERR <why>`.
//! It says how far it has applied with `#ASM ACK <bytes>`. At `HANDOFF` everything the
//! source wrote to the slots is applied: it takes the slots (config epoch bumped without
//! consensus, as `CLUSTER SETSLOT … NODE` after an import; `nodes.conf` fsynced), tells the
//! whole cluster with a PONG, and answers `#ASM TAKEN <epoch>`. A task that ends any other
//! way deletes what it imported.
//!
//! **The source** sends, on that connection: a snapshot of the slots cut as a BGSAVE's is
//! (no fork, copy-on-write: `commands::journal::slot_snapshot`), then the replication
//! backlog from the cut on, filtered to the commands that touch the slots (read as it
//! grows while the snapshot goes out, so a small backlog does not end the task). Once the
//! target is less than `cluster-slot-migration-handoff-max-lag-bytes` behind, writes to
//! those slots only are held (`state::pause`), the stream is sent up to the last write
//! that ran, then `HANDOFF`; at `TAKEN` it gives the slots to the target in its own view,
//! lets the held writes go on (they meet `-MOVED`) and deletes the slots' keys and
//! collections, journaled so its replicas delete them too. If the target does not answer
//! within `cluster-slot-migration-write-pause-timeout`, the source keeps the slots.

use crate::commands::Ctx;
use crate::protocol::Reply;
use crate::state::client::{ClientHandle, ClientState};
use crate::state::cluster::migration::{self as asm, st};
use crate::state::cluster::{self, Cluster};
use crate::state::replication::SlotSync;
use crate::state::Server;
use bytes::{Bytes, BytesMut};
use parking_lot::Mutex;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

/// The name control lines carry: not a command, so no client's write can be taken for one.
const MARK: &[u8] = b"#ASM";

/// Registers the import task's starter (cluster mode only).
pub fn start(server: &Arc<Server>) {
    if let Some(c) = server.cluster.get() {
        c.migrations.set_starter(start_import);
    }
}

fn start_import(server: &Arc<Server>, id: String) {
    let Ok(rt) = tokio::runtime::Handle::try_current() else {
        if let Some(c) = server.cluster.get() {
            c.migrations
                .finish(&id, st::FAILED, "no runtime to start the task on");
        }
        return;
    };
    rt.spawn(import(server.clone(), id));
}

fn now_ms() -> i64 {
    crate::util::clock::now_ms()
}

fn log(server: &Server, warn: bool, msg: &str) {
    crate::state::redis_log::line(server, warn, msg);
}

fn control(out: &mut Vec<u8>, words: &[&[u8]]) {
    let mut argv: Vec<&[u8]> = vec![MARK];
    argv.extend_from_slice(words);
    crate::store::journal::aof::encode(out, &argv);
}

async fn send<S: AsyncWrite + Unpin>(stream: &mut S, bytes: &[u8]) -> Result<(), String> {
    stream
        .write_all(bytes)
        .await
        .map_err(|e| format!("write error: {e}"))
}

/// Deletes the slots' keys and collections off the runtime's threads.
async fn trim(server: &Arc<Server>, ranges: &[(u16, u16)]) -> usize {
    let s = server.clone();
    let ranges = ranges.to_vec();
    tokio::task::spawn_blocking(move || {
        crate::commands::cluster::trim_slots(&s, asm::slots_of(&ranges))
    })
    .await
    .unwrap_or(0)
}

// ---- the target ----

async fn import(server: Arc<Server>, id: String) {
    let Some(c) = server.cluster.get() else {
        return;
    };
    let m = &c.migrations;
    let Some(task) = m.get(&id) else {
        return;
    };
    m.update(&id, |t| t.start_time = now_ms());
    log(
        &server,
        false,
        &format!(
            "Import task {id} started: slots {} from {}",
            task.ranges_text(),
            task.source
        ),
    );
    // Whatever these slots held here (an earlier import that failed) goes first.
    trim(&server, &task.ranges).await;
    match import_session(&server, c, &task).await {
        Ok(()) => {
            m.finish(&id, st::COMPLETED, "");
            log(&server, false, &format!("Import task {id} completed"));
        }
        Err(e) => {
            let canceled = task.cancel.load(Ordering::Acquire);
            let n = trim(&server, &task.ranges).await;
            log(
                &server,
                true,
                &format!("Import task {id} failed: {e} ({n} keys and collections it had imported deleted)"),
            );
            m.finish(&id, if canceled { st::CANCELED } else { st::FAILED }, &e);
        }
    }
}

/// The import up to the takeover: Ok once the slots are this node's.
async fn import_session(server: &Arc<Server>, c: &Cluster, task: &asm::Task) -> Result<(), String> {
    let (host, port) = {
        let st = c.lock();
        let n = st
            .lookup(task.source.as_bytes())
            .ok_or_else(|| format!("the source node {} is not known", task.source))?;
        (n.ip.clone(), n.port)
    };
    let (timeout, auth, user) = {
        let cfg = server.config.read();
        if cfg.get_bool("tls-cluster") {
            return Err("atomic slot migration does not run over TLS yet (tls-cluster yes)".into());
        }
        (
            Duration::from_secs(cfg.get_u64("repl-timeout").max(1)),
            cfg.get("masterauth").to_string(),
            cfg.get("masteruser").to_string(),
        )
    };
    let mut stream = tokio::time::timeout(timeout, TcpStream::connect((host.as_str(), port)))
        .await
        .map_err(|_| format!("timeout connecting to the source {host}:{port}"))?
        .map_err(|e| format!("can't connect to the source {host}:{port}: {e}"))?;
    let _ = stream.set_nodelay(true);
    let mut buf = BytesMut::with_capacity(64 * 1024);
    let mut out = Vec::new();
    if !auth.is_empty() {
        out.clear();
        if user.is_empty() {
            crate::store::journal::aof::encode(&mut out, &[b"AUTH", auth.as_bytes()]);
        } else {
            crate::store::journal::aof::encode(
                &mut out,
                &[b"AUTH", user.as_bytes(), auth.as_bytes()],
            );
        }
        send(&mut stream, &out).await?;
        let r = line(&mut stream, &mut buf, timeout).await?;
        if r.starts_with('-') {
            return Err(format!("the source refused AUTH: {r}"));
        }
    }
    let me = task.dest.clone();
    let bounds: Vec<String> = task
        .ranges
        .iter()
        .flat_map(|&(a, b)| [a.to_string(), b.to_string()])
        .collect();
    let mut argv: Vec<&[u8]> = vec![b"CLUSTER", b"SYNCSLOTS", task.id.as_bytes(), me.as_bytes()];
    argv.extend(bounds.iter().map(|b| b.as_bytes()));
    out.clear();
    crate::store::journal::aof::encode(&mut out, &argv);
    c.migrations.set_state(&task.id, st::SYNCSLOTS_REPLY);
    send(&mut stream, &out).await?;
    let r = line(&mut stream, &mut buf, timeout).await?;
    if r != "+OK" {
        return Err(format!("the source refused CLUSTER SYNCSLOTS: {r}"));
    }
    c.migrations.set_state(&task.id, st::ACCUMULATE_BUF);
    let local = stream
        .local_addr()
        .unwrap_or_else(|_| ([0, 0, 0, 0], 0).into());
    let peer = stream
        .peer_addr()
        .unwrap_or_else(|_| ([0, 0, 0, 0], 0).into());
    let handle = server.clients.register(peer, local);
    handle.meta.lock().slot_migration = b'o';
    let mut client = ClientState::new(handle.clone(), true);
    let r = apply_stream(server, c, task, &mut stream, &mut buf, &mut client, timeout).await;
    c.migrations.input_buffer.store(0, Ordering::Relaxed);
    crate::commands::transactions::reset_state(&mut Ctx {
        server,
        client: &mut client,
    });
    server.clients.unregister(handle.id);
    r
}

/// One reply line, without `\r\n`.
async fn line(
    stream: &mut TcpStream,
    buf: &mut BytesMut,
    timeout: Duration,
) -> Result<String, String> {
    loop {
        if let Some(i) = buf.iter().position(|&b| b == b'\n') {
            let l = buf.split_to(i + 1);
            return Ok(String::from_utf8_lossy(&l[..i])
                .trim_end_matches('\r')
                .to_string());
        }
        read_more(stream, buf, timeout).await?;
    }
}

async fn read_more(
    stream: &mut TcpStream,
    buf: &mut BytesMut,
    timeout: Duration,
) -> Result<(), String> {
    if buf.capacity() - buf.len() < 16 * 1024 {
        buf.reserve(64 * 1024);
    }
    match tokio::time::timeout(timeout, stream.read_buf(buf)).await {
        Err(_) => Err("the source sent nothing for repl-timeout".into()),
        Ok(Ok(0)) => Err("the source closed the connection".into()),
        Ok(Err(e)) => Err(format!("read error: {e}")),
        Ok(Ok(_)) => Ok(()),
    }
}

/// Applies the source's stream until `HANDOFF`, then takes the slots.
async fn apply_stream(
    server: &Arc<Server>,
    c: &Cluster,
    task: &asm::Task,
    stream: &mut TcpStream,
    buf: &mut BytesMut,
    client: &mut ClientState,
    timeout: Duration,
) -> Result<(), String> {
    let mut parse = crate::protocol::ParseState::default();
    let limits = crate::protocol::ParseLimits {
        max_bulk_len: u64::MAX,
        unauthenticated: false,
    };
    let mut applied: u64 = 0;
    let mut acked: u64 = 0;
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_io = Instant::now();
    let mut out = Vec::new();
    loop {
        loop {
            if task.cancel.load(Ordering::Acquire) {
                return Err("canceled by user request".into());
            }
            let before = buf.len();
            let args = match crate::protocol::parse_request(buf, &mut parse, limits) {
                Ok(Some(a)) => a,
                Ok(None) => break,
                Err(e) => return Err(format!("protocol error from the source: {}", e.0)),
            };
            applied += (before - buf.len()) as u64;
            if args[0][..] == *MARK {
                let what = args
                    .get(1)
                    .map(|a| a.to_ascii_uppercase())
                    .unwrap_or_default();
                match &what[..] {
                    b"SNAPSHOT-END" => c.migrations.set_state(&task.id, st::STREAMING_BUF),
                    b"PING" => {}
                    b"ERR" => {
                        let why = args.get(2).map(|a| String::from_utf8_lossy(a).to_string());
                        return Err(format!(
                            "the source ended the task: {}",
                            why.unwrap_or_default()
                        ));
                    }
                    b"HANDOFF" => {
                        // Taken only while the source still holds the writes, by half a
                        // margin: past that it may have given up and taken writes again.
                        let left = args
                            .get(2)
                            .and_then(|a| crate::util::num::parse_i64(a))
                            .unwrap_or(0);
                        if started_handoff_late(left, last_io) {
                            return Err("the hand-off came too late to take the slots".into());
                        }
                        c.migrations.set_state(&task.id, st::TAKEOVER);
                        let epoch = take_over(server, c, &task.ranges);
                        out.clear();
                        control(&mut out, &[b"TAKEN", epoch.to_string().as_bytes()]);
                        // The slots are this node's now, whether the source hears it here or
                        // from the bus.
                        let _ = send(stream, &out).await;
                        return Ok(());
                    }
                    _ => return Err("an unknown control line from the source".into()),
                }
                continue;
            }
            apply(server, client, &args).await?;
        }
        tokio::select! {
            r = stream.read_buf(buf) => match r {
                Ok(0) => return Err("the source closed the connection".into()),
                Err(e) => return Err(format!("read error: {e}")),
                Ok(_) => {
                    last_io = Instant::now();
                    let held = buf.len() as u64;
                    c.migrations.input_buffer.store(held, Ordering::Relaxed);
                    c.migrations.input_buffer_peak.fetch_max(held, Ordering::Relaxed);
                }
            },
            _ = tick.tick() => {
                if last_io.elapsed() > timeout {
                    return Err("the source sent nothing for repl-timeout".into());
                }
                if applied != acked {
                    out.clear();
                    control(&mut out, &[b"ACK", applied.to_string().as_bytes()]);
                    send(stream, &out).await?;
                    acked = applied;
                }
            }
        }
        if buf.capacity() - buf.len() < 16 * 1024 {
            buf.reserve(64 * 1024);
        }
        // Acknowledged as soon as the stream is drained, not only on the tick: the source's
        // hand-off waits for it.
        if buf.is_empty() && applied != acked {
            out.clear();
            control(&mut out, &[b"ACK", applied.to_string().as_bytes()]);
            send(stream, &out).await?;
            acked = applied;
        }
    }
}

/// Whether a hand-off that left the source with `left_ms` of its pause, read from a buffer
/// filled at `read_at`, arrives too late: less than half of it is left now.
fn started_handoff_late(left_ms: i64, read_at: Instant) -> bool {
    let spent = read_at.elapsed().as_millis() as i64;
    left_ms <= 0 || spent * 2 >= left_ms
}

/// Runs one command of the source's stream as a master's stream is run: never redirected,
/// keys seen as the source has them. An error means the copies differ: the task fails.
async fn apply(
    server: &Arc<Server>,
    client: &mut ClientState,
    args: &[Bytes],
) -> Result<(), String> {
    crate::state::replication::set_applying(true);
    let reply = {
        let mut ctx = Ctx { server, client };
        crate::commands::dispatch(&mut ctx, args)
    };
    crate::state::replication::set_applying(false);
    if let Some(b) = client.blocked.take() {
        let _ = b.reply.await;
    }
    if let Reply::Error(e) = &reply {
        return Err(format!(
            "'{e}' applying '{}' from the source",
            String::from_utf8_lossy(&args[0])
        ));
    }
    Ok(())
}

/// The takeover: the slots become this node's with a config epoch of its own, saved and
/// told to every node. Returns this node's config epoch.
fn take_over(server: &Arc<Server>, c: &Cluster, ranges: &[(u16, u16)]) -> u64 {
    let now = crate::util::clock::now_ms();
    let epoch = c.with(|st| {
        let me = st.myself;
        for slot in asm::slots_of(ranges) {
            st.del_slot(slot);
            st.add_slot(me, slot);
        }
        if st.bump_epoch_without_consensus() {
            st.log(
                crate::state::redis_log::Level::Warning,
                format!(
                    "configEpoch updated after importing slots {}",
                    asm::ranges_text(ranges)
                ),
            );
        }
        st.broadcast_pong(now);
        st.todo(
            cluster::todo::SAVE_CONFIG | cluster::todo::UPDATE_STATE | cluster::todo::FSYNC_CONFIG,
        );
        st.me().map_or(0, |m| m.config_epoch)
    });
    crate::commands::cluster::apply_effects(server, c);
    epoch
}

// ---- the source ----

/// What the filter of the backlog has for the target.
#[derive(Default)]
struct Filtered {
    out: Vec<u8>,
    /// The backlog offset the filter has read up to (the next byte to read).
    pos: u64,
    err: Option<String>,
}

/// CLUSTER SYNCSLOTS's connection: sends the slots to the target, and gives them up once
/// the target has them.
pub async fn serve_export<S: AsyncRead + AsyncWrite + Unpin>(
    server: &Arc<Server>,
    stream: &mut S,
    handle: &Arc<ClientHandle>,
    inbuf: &mut BytesMut,
    req: SlotSync,
) {
    let Some(c) = server.cluster.get() else {
        return;
    };
    handle.meta.lock().slot_migration = b'g';
    log(
        server,
        false,
        &format!(
            "Migrate task {} started: slots {} to {}",
            req.id,
            asm::ranges_text(&req.ranges),
            req.dest
        ),
    );
    let cancel = c
        .migrations
        .get(&req.id)
        .map(|t| t.cancel)
        .unwrap_or_default();
    let r = export(server, c, stream, handle, inbuf, &req, &cancel).await;
    c.migrations.output_buffer.store(0, Ordering::Relaxed);
    crate::state::pause::unpause_slots();
    {
        let mut st = c.lock();
        for slot in asm::slots_of(&req.ranges) {
            st.exporting.remove(&slot);
        }
    }
    match r {
        Ok(()) => {
            c.migrations.finish(&req.id, st::COMPLETED, "");
            log(server, false, &format!("Migrate task {} completed", req.id));
        }
        Err(e) => {
            let mut out = Vec::new();
            control(&mut out, &[b"ERR", e.as_bytes()]);
            let _ = stream.write_all(&out).await;
            let canceled = cancel.load(Ordering::Acquire);
            c.migrations.finish(
                &req.id,
                if canceled { st::CANCELED } else { st::FAILED },
                &e,
            );
            log(
                server,
                true,
                &format!("Migrate task {} failed: {e}", req.id),
            );
        }
    }
}

async fn export<S: AsyncRead + AsyncWrite + Unpin>(
    server: &Arc<Server>,
    c: &Cluster,
    stream: &mut S,
    handle: &Arc<ClientHandle>,
    inbuf: &mut BytesMut,
    req: &SlotSync,
    cancel: &Arc<std::sync::atomic::AtomicBool>,
) -> Result<(), String> {
    let (cap, max_lag, pause_ms, timeout) = {
        let cfg = server.config.read();
        (
            cfg.get_u64("repl-backlog-size") as usize,
            cfg.get_u64("cluster-slot-migration-handoff-max-lag-bytes"),
            cfg.get_u64("cluster-slot-migration-write-pause-timeout"),
            Duration::from_secs(cfg.get_u64("repl-timeout").max(1)),
        )
    };
    send(stream, b"+OK\r\n").await?;
    // The snapshot, on a thread of its own, in pieces the loop below sends.
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Vec<u8>>(16);
    let (cut_tx, cut_rx) = tokio::sync::oneshot::channel();
    let s = server.clone();
    let ranges = req.ranges.clone();
    let copy = tokio::task::spawn_blocking(move || {
        let keep = |k: &[u8]| {
            let slot = cluster::key_slot(k);
            ranges.iter().any(|&(a, b)| (a..=b).contains(&slot))
        };
        let mut cut_tx = Some(cut_tx);
        for _ in 0..600 {
            let r = crate::commands::journal::slot_snapshot(
                &s,
                &keep,
                &mut |piece| {
                    tx.blocking_send(piece)
                        .map_err(|_| std::io::Error::from(std::io::ErrorKind::BrokenPipe))
                },
                |seq| {
                    let feed = crate::store::journal::start_feed(cap);
                    if let Some(t) = cut_tx.take() {
                        let _ = t.send((feed.mark(seq), feed.gen()));
                    }
                },
            );
            match r {
                Ok(Some(keys)) => return Ok(keys),
                Ok(None) => std::thread::sleep(Duration::from_millis(100)),
                Err(e) => return Err(e),
            }
        }
        Err("another snapshot was being taken for too long".to_string())
    });
    let Ok((mark, gen)) = cut_rx.await else {
        return Err(match copy.await {
            Ok(Err(e)) => e,
            _ => "the snapshot ended before its cut".into(),
        });
    };
    let cut = mark
        .await
        .map_err(|_| "the replication backlog was reset".to_string())?;
    // The backlog from the cut on, filtered, as it grows.
    let filtered = Arc::new(Mutex::new(Filtered {
        pos: cut + 1,
        ..Default::default()
    }));
    let more = Arc::new(tokio::sync::Notify::new());
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let filter = tokio::spawn(filter_backlog(
        server.clone(),
        gen,
        req.ranges.clone(),
        filtered.clone(),
        more.clone(),
        stop.clone(),
    ));
    let r = send_all(
        server,
        c,
        stream,
        handle,
        inbuf,
        req,
        cancel,
        &mut rx,
        copy,
        (&filtered, &more, &stop),
        (max_lag, pause_ms, timeout),
    )
    .await;
    stop.store(true, Ordering::Release);
    more.notify_waiters();
    let _ = filter.await;
    r
}

/// The filter of the backlog: every command after the cut that touches the slots, in
/// order (a MULTI block whole, with only its commands on the slots).
async fn filter_backlog(
    server: Arc<Server>,
    gen: u64,
    ranges: Vec<(u16, u16)>,
    filtered: Arc<Mutex<Filtered>>,
    more: Arc<tokio::sync::Notify>,
    stop: Arc<std::sync::atomic::AtomicBool>,
) {
    let Some(feed) = crate::store::journal::feed() else {
        filtered.lock().err = Some("no replication backlog".into());
        more.notify_waiters();
        return;
    };
    let mut appended = feed.appended.subscribe();
    let mut raw = Vec::new();
    let mut pending = BytesMut::new();
    let mut parse = crate::protocol::ParseState::default();
    let limits = crate::protocol::ParseLimits {
        max_bulk_len: u64::MAX,
        unauthenticated: false,
    };
    let mut multi: Option<Vec<Vec<Bytes>>> = None;
    let mut pos = filtered.lock().pos;
    let mut mine = Vec::new();
    while !stop.load(Ordering::Acquire) {
        raw.clear();
        if feed.read_from_gen(gen, pos, &mut raw, 1 << 20).is_none() {
            filtered.lock().err =
                Some("the slots' stream fell out of the replication backlog".into());
            more.notify_waiters();
            return;
        }
        if raw.is_empty() {
            tokio::select! {
                _ = appended.changed() => {}
                _ = tokio::time::sleep(Duration::from_millis(50)) => {}
            }
            continue;
        }
        pos += raw.len() as u64;
        pending.extend_from_slice(&raw);
        mine.clear();
        loop {
            let args = match crate::protocol::parse_request(&mut pending, &mut parse, limits) {
                Ok(Some(a)) => a,
                Ok(None) => break,
                Err(e) => {
                    filtered.lock().err = Some(format!("the backlog did not parse: {}", e.0));
                    more.notify_waiters();
                    return;
                }
            };
            if let Err(e) = keep_command(&args, &ranges, &mut multi, &mut mine) {
                filtered.lock().err = Some(e);
                more.notify_waiters();
                return;
            }
        }
        {
            let mut f = filtered.lock();
            f.out.extend_from_slice(&mine);
            f.pos = pos;
            if let Some(c) = server.cluster.get() {
                let held = f.out.len() as u64;
                c.migrations.output_buffer.store(held, Ordering::Relaxed);
            }
        }
        more.notify_waiters();
    }
}

/// Whether one command of the backlog goes to the target; appends it to `out` if so (a
/// MULTI block is held in `multi` until its EXEC).
fn keep_command(
    args: &[Bytes],
    ranges: &[(u16, u16)],
    multi: &mut Option<Vec<Vec<Bytes>>>,
    out: &mut Vec<u8>,
) -> Result<(), String> {
    let is = |n: &str| crate::commands::is(&args[0], n);
    if is("select") || is("ping") || is("replconf") {
        return Ok(());
    }
    if is("multi") {
        *multi = Some(Vec::new());
        return Ok(());
    }
    if is("exec") {
        let block = multi.take().unwrap_or_default();
        if !block.is_empty() {
            crate::store::journal::aof::encode(out, &[b"MULTI"]);
            for cmd in &block {
                let argv: Vec<&[u8]> = cmd.iter().map(|a| &a[..]).collect();
                crate::store::journal::aof::encode(out, &argv);
            }
            crate::store::journal::aof::encode(out, &[b"EXEC"]);
        }
        return Ok(());
    }
    let Ok(spec) = crate::commands::resolve(args) else {
        return Ok(());
    };
    let (pos, channels) = spec.routing_positions(args);
    if pos.is_empty() || channels {
        // A keyless write empties every slot at once: the copy can't follow it.
        if is("flushall") || is("flushdb") || is("swapdb") {
            return Err(format!(
                "{} ran on the source during the migration",
                String::from_utf8_lossy(&args[0]).to_uppercase()
            ));
        }
        return Ok(());
    }
    let inside = |i: &usize| {
        let slot = cluster::key_slot(&args[*i]);
        ranges.iter().any(|&(a, b)| (a..=b).contains(&slot))
    };
    let n = pos.iter().filter(|i| inside(i)).count();
    if n == 0 {
        return Ok(());
    }
    if n != pos.len() {
        return Err("a command on both migrated and other slots".into());
    }
    match multi {
        Some(block) => block.push(args.to_vec()),
        None => {
            let argv: Vec<&[u8]> = args.iter().map(|a| &a[..]).collect();
            crate::store::journal::aof::encode(out, &argv);
        }
    }
    Ok(())
}

/// Reads the target's control lines from `inbuf`: its acknowledged bytes, and the epoch it
/// took the slots with.
fn read_control(
    inbuf: &mut BytesMut,
    parse: &mut crate::protocol::ParseState,
    acked: &mut u64,
    taken: &mut Option<u64>,
) -> Result<(), String> {
    let limits = crate::protocol::ParseLimits {
        max_bulk_len: 1 << 20,
        unauthenticated: false,
    };
    loop {
        let args = match crate::protocol::parse_request(inbuf, parse, limits) {
            Ok(Some(a)) => a,
            Ok(None) => return Ok(()),
            Err(e) => return Err(format!("protocol error from the target: {}", e.0)),
        };
        if args.len() < 3 || args[0][..] != *MARK {
            continue;
        }
        let n = crate::util::num::parse_i64(&args[2]).unwrap_or(0).max(0) as u64;
        if args[1].eq_ignore_ascii_case(b"ACK") {
            *acked = (*acked).max(n);
        } else if args[1].eq_ignore_ascii_case(b"TAKEN") {
            *taken = Some(n);
        }
    }
}

#[allow(clippy::too_many_arguments)]
async fn send_all<S: AsyncRead + AsyncWrite + Unpin>(
    server: &Arc<Server>,
    c: &Cluster,
    stream: &mut S,
    handle: &Arc<ClientHandle>,
    inbuf: &mut BytesMut,
    req: &SlotSync,
    cancel: &Arc<std::sync::atomic::AtomicBool>,
    rx: &mut tokio::sync::mpsc::Receiver<Vec<u8>>,
    copy: tokio::task::JoinHandle<Result<u64, String>>,
    (filtered, more, stop): (
        &Arc<Mutex<Filtered>>,
        &Arc<tokio::sync::Notify>,
        &Arc<std::sync::atomic::AtomicBool>,
    ),
    (max_lag, pause_ms, timeout): (u64, u64, Duration),
) -> Result<(), String> {
    let mut copy = Some(copy);
    let mut parse = crate::protocol::ParseState::default();
    let (mut sent, mut acked, mut taken) = (0u64, 0u64, None);
    let mut snapshot_done = false;
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_ping = Instant::now();
    let mut last_heard = Instant::now();
    let mut out = Vec::new();
    let mut paused: Option<(Instant, u64)> = None;
    let mut handed_off = false;
    loop {
        if cancel.load(Ordering::Acquire) {
            return Err("canceled by user request".into());
        }
        if handle.is_killed() || server.is_shutting_down() {
            return Err("the connection was closed here".into());
        }
        if inbuf.capacity() - inbuf.len() < 4096 {
            inbuf.reserve(16 * 1024);
        }
        let notified = more.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        // What the filter has, once the snapshot is out, and how far it has read: taken
        // together, so everything it found before that point is sent before HANDOFF.
        out.clear();
        let mut read_to = 0;
        if snapshot_done {
            let mut f = filtered.lock();
            if let Some(e) = f.err.take() {
                return Err(e);
            }
            std::mem::swap(&mut out, &mut f.out);
            read_to = f.pos;
            c.migrations.output_buffer.store(0, Ordering::Relaxed);
        }
        if !out.is_empty() {
            send(stream, &out).await?;
            sent += out.len() as u64;
            continue;
        }
        if let Some((at, end)) = paused {
            let reached = read_to > end;
            if reached && !handed_off {
                // The target may take the slots only within the time left of the pause (it
                // keeps half of it as a margin for the way back).
                let left = Duration::from_millis(pause_ms).saturating_sub(at.elapsed());
                out.clear();
                control(
                    &mut out,
                    &[b"HANDOFF", left.as_millis().to_string().as_bytes()],
                );
                send(stream, &out).await?;
                sent += out.len() as u64;
                handed_off = true;
                c.migrations.set_state(&req.id, st::HANDOFF);
            }
            if let Some(epoch) = taken {
                // Nothing more of the backlog goes to the target (the trim's DELs below
                // would only pile up in the filter).
                stop.store(true, Ordering::Release);
                let replica_now = give_up_slots(server, c, req, epoch);
                let held = at.elapsed().as_millis() as i64;
                crate::state::pause::unpause_slots();
                c.migrations.update(&req.id, |t| t.write_pause_ms = held);
                // A node left without slots follows the target now: its full resync
                // replaces the data.
                let n = if replica_now {
                    0
                } else {
                    trim(server, &req.ranges).await
                };
                log(
                    server,
                    false,
                    &format!("Migrate task {}: slots handed over after a {held} ms write pause; {n} keys and collections deleted here", req.id),
                );
                return Ok(());
            }
            if at.elapsed() > Duration::from_millis(pause_ms) {
                // The bus may have told what the stream did not.
                let target = c.lock().lookup_name(req.dest.as_bytes());
                let first = req.ranges.first().map_or(0, |r| r.0);
                if target.is_some() && c.lock().slots[first as usize] == target {
                    taken = Some(0);
                    continue;
                }
                return Err("the target did not take the slots over within cluster-slot-migration-write-pause-timeout".into());
            }
        } else if snapshot_done && sent.saturating_sub(acked) <= max_lag {
            // Close enough: writes to the slots wait, and the stream is sent up to the last
            // one that ran (every command running now ends before the mark: the gate).
            c.migrations.set_state(&req.id, st::HANDOFF_PREP);
            let at = Instant::now();
            crate::state::pause::pause_slots(
                asm::slots_of(&req.ranges),
                at + Duration::from_millis(pause_ms),
            );
            let s = server.clone();
            let seq = tokio::task::spawn_blocking(move || {
                let _gate = s.exec_gate.exclusive();
                crate::store::journal::next_seq()
            })
            .await
            .map_err(|e| e.to_string())?;
            let feed = crate::store::journal::feed().ok_or("no replication backlog")?;
            let end = feed
                .mark(seq)
                .await
                .map_err(|_| "the replication backlog was reset".to_string())?;
            paused = Some((at, end));
            continue;
        }
        tokio::select! {
            biased;
            r = stream.read_buf(inbuf) => match r {
                Ok(0) => return Err("the target closed the connection".into()),
                Err(e) => return Err(format!("read error: {e}")),
                Ok(_) => {
                    last_heard = Instant::now();
                    read_control(inbuf, &mut parse, &mut acked, &mut taken)?;
                }
            },
            piece = rx.recv(), if !snapshot_done => match piece {
                Some(piece) => {
                    send(stream, &piece).await?;
                    sent += piece.len() as u64;
                }
                None => {
                    let keys = match copy.take() {
                        Some(j) => j.await.map_err(|e| e.to_string())??,
                        None => 0,
                    };
                    snapshot_done = true;
                    out.clear();
                    control(&mut out, &[b"SNAPSHOT-END"]);
                    send(stream, &out).await?;
                    sent += out.len() as u64;
                    c.migrations.set_state(&req.id, st::SEND_STREAM);
                    log(server, false, &format!("Migrate task {}: snapshot of {keys} keys sent", req.id));
                }
            },
            _ = &mut notified, if snapshot_done => {}
            _ = tick.tick() => {
                if last_heard.elapsed() > timeout && snapshot_done {
                    return Err("the target acknowledged nothing for repl-timeout".into());
                }
                if last_ping.elapsed() >= Duration::from_secs(1) {
                    out.clear();
                    control(&mut out, &[b"PING"]);
                    send(stream, &out).await?;
                    sent += out.len() as u64;
                    last_ping = Instant::now();
                }
            }
        }
    }
}

/// At `TAKEN`: the slots are the target's in this node's view too (with the target's
/// new config epoch, as the bus would tell it), and saved. Whether this node became the
/// target's replica (it has no slot left).
fn give_up_slots(server: &Arc<Server>, c: &Cluster, req: &SlotSync, epoch: u64) -> bool {
    let replica_now = c.with(|st| {
        let Some(target) = st.lookup_name(req.dest.as_bytes()) else {
            return false;
        };
        if let Some(n) = st.nodes.get_mut(&target) {
            n.config_epoch = n.config_epoch.max(epoch);
        }
        st.current_epoch = st.current_epoch.max(epoch);
        let me = st.myself;
        for slot in asm::slots_of(&req.ranges) {
            if st.slots[slot as usize] == Some(me) {
                st.del_slot(slot);
                st.add_slot(target, slot);
            }
        }
        let left_empty = st.me().is_some_and(|m| m.numslots == 0);
        if left_empty && st.settings.allow_replica_migration {
            st.log(
                crate::state::redis_log::Level::Warning,
                format!(
                    "Configuration change detected. Reconfiguring myself as a replica of {}",
                    req.dest
                ),
            );
            st.set_master(target);
        }
        st.todo(
            cluster::todo::SAVE_CONFIG | cluster::todo::UPDATE_STATE | cluster::todo::FSYNC_CONFIG,
        );
        left_empty && st.settings.allow_replica_migration
    });
    crate::commands::cluster::apply_effects(server, c);
    replica_now
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(words: &[&str]) -> Vec<Bytes> {
        words
            .iter()
            .map(|w| Bytes::copy_from_slice(w.as_bytes()))
            .collect()
    }

    /// The backlog's filter keeps the commands on the slots (a MULTI block with only its
    /// commands on them), drops the others and the stream's own lines, and refuses what the
    /// copy cannot follow.
    #[test]
    fn the_filter_keeps_the_slots_commands() {
        let a = "{a}x"; // slot 15495
        let b = "{b}x"; // slot 3300
        let ranges = [(15000, 16000)];
        let run = |cmds: &[Vec<Bytes>]| {
            let mut multi = None;
            let mut out = Vec::new();
            for c in cmds {
                keep_command(c, &ranges, &mut multi, &mut out)?;
            }
            Ok::<String, String>(String::from_utf8_lossy(&out).to_string())
        };
        let got = run(&[
            cmd(&["SELECT", "0"]),
            cmd(&["PING"]),
            cmd(&["SET", a, "1"]),
            cmd(&["SET", b, "2"]),
            cmd(&["MULTI"]),
            cmd(&["INCR", b]),
            cmd(&["INCR", a]),
            cmd(&["EXEC"]),
            cmd(&["MULTI"]),
            cmd(&["INCR", b]),
            cmd(&["EXEC"]),
            cmd(&["DOC.JOURNALPUT", a, "doc"]),
            cmd(&["FUNCTION", "FLUSH"]),
        ])
        .expect("kept");
        assert_eq!(
            got,
            "*3\r\n$3\r\nSET\r\n$4\r\n{a}x\r\n$1\r\n1\r\n*1\r\n$5\r\nMULTI\r\n*2\r\n$4\r\nINCR\r\n$4\r\n{a}x\r\n*1\r\n$4\r\nEXEC\r\n*3\r\n$14\r\nDOC.JOURNALPUT\r\n$4\r\n{a}x\r\n$3\r\ndoc\r\n"
        );
        assert!(run(&[cmd(&["FLUSHALL"])]).unwrap_err().contains("FLUSHALL"));
        assert!(run(&[cmd(&["MSET", a, "1", b, "2"])]).is_err());
        assert_eq!(run(&[cmd(&["MSET", b, "1", b, "2"])]).unwrap(), "");
    }
}
