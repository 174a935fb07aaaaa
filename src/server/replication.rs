//! Replication's network side, with Redis 7's wire protocol (`replication.c`).
//!
//! **Master side.** A replica's connection runs commands as any client's (AUTH, REPLCONF)
//! until PSYNC or SYNC; then the connection hands its socket here ([`serve_replica`]). A
//! partial resynchronisation (`+CONTINUE`) is granted when the replica names this server's
//! replication ID (or the previous one, up to where it ended) and an offset still in the
//! backlog; otherwise a full one: `+FULLRESYNC <replid> <offset>`, the snapshot as
//! `$<len>\r\n<RDB>` (documents after the RDB, see `commands::journal::replication_snapshot`),
//! then the stream from the snapshot's cut. The stream is the journal's record stream
//! (`store/journal/feed.rs`), kept for every replica in one backlog; each replica's task
//! sends from its own offset and reads its `REPLCONF ACK`s.
//!
//! **Replica side.** [`link`] runs in the background for each REPLICAOF: connect, PING,
//! AUTH with `masterauth`, REPLCONF, PSYNC, load the snapshot (after a FLUSHALL), then apply
//! the stream through the command table as the master's client, answering `REPLCONF
//! GETACK` and acknowledging once a second. Any failure drops the link and retries a
//! second later, with a partial resynchronisation when the master still has the bytes.

use crate::state::client::{ClientHandle, ClientState};
use crate::state::replication::{self, repl, Psync, Replica};
use crate::state::Server;
use bytes::{Bytes, BytesMut};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

/// Starts replication's background work: the link of a `replicaof` from the config file,
/// and once a second the PING to replicas (every `repl-ping-replica-period`) and the count
/// of good replicas for `min-replicas-to-write`.
pub fn start(server: &Arc<Server>) {
    replication::set_link_starter(start_link);
    let conf = server.config.read().get("replicaof").to_string();
    let mut parts = conf.split_whitespace();
    if let (Some(h), Some(p)) = (parts.next(), parts.next()) {
        if let Ok(port) = p.parse::<u16>() {
            replication::follow(server, h.to_string(), port);
        }
    }
    let s = server.clone();
    tokio::spawn(async move {
        let mut since_ping = 0u64;
        let mut alone_since = 0u64;
        while !s.is_shutting_down() {
            tokio::time::sleep(Duration::from_secs(1)).await;
            s.thawed().await;
            let (to, lag, period, ttl) = {
                let c = s.config.read();
                (
                    c.get_u64("min-replicas-to-write"),
                    c.get_u64("min-replicas-max-lag"),
                    c.get_u64("repl-ping-replica-period").max(1),
                    c.get_u64("repl-backlog-ttl"),
                )
            };
            replication::refresh_good_replicas(to, lag);
            if let Some(line) = replication::expire_backlog(ttl, &mut alone_since) {
                rlog(&s, false, &line);
            }
            since_ping += 1;
            if since_ping >= period {
                since_ping = 0;
                let any = !repl().replicas.lock().is_empty();
                // Not during a cluster manual failover: the replica waits for the offset the
                // paused master announced, which a PING would move (Redis's replicationCron).
                let manual_failover = s
                    .cluster
                    .get()
                    .is_some_and(|c| c.lock().failover.mf_end != 0);
                if any && !replication::is_replica() && !manual_failover {
                    crate::store::journal::replicate_only(None, &[b"PING"]);
                }
            }
        }
    });
}

/// A line of the replication log (see [`crate::state::redis_log`]).
fn rlog(server: &Server, warn: bool, msg: &str) {
    crate::state::redis_log::line(server, warn, msg);
}

/// Writes all of `out` to a replica (through a TLS session's buffer too).
async fn send<S: AsyncWrite + Unpin>(stream: &mut S, out: &[u8]) -> std::io::Result<()> {
    stream.write_all(out).await?;
    stream.flush().await
}

fn now_ms() -> u64 {
    crate::util::clock::now_ms() as u64
}

// ---------------------------------------------------------------------------------------
// Master side

/// Serves a replica on the connection that sent PSYNC/SYNC, until it goes away, is killed,
/// falls out of the backlog or this server becomes a replica.
pub async fn serve_replica<S: AsyncRead + AsyncWrite + Unpin>(
    server: &Arc<Server>,
    stream: &mut S,
    handle: &Arc<ClientHandle>,
    inbuf: &mut BytesMut,
    req: Psync,
) {
    let id = handle.id;
    let conf = repl().confs.lock().get(&id).cloned().unwrap_or_default();
    let ip = conf.ip.unwrap_or_else(|| handle.addr.ip().to_string());
    let port = conf.port.unwrap_or(0);
    let name = format!("{ip}:{port}");
    replication::add_replica(Replica {
        id,
        ip,
        port,
        state: "wait_bgsave",
        ack: 0,
        ack_ms: now_ms(),
        fack: 0,
    });
    if let Err(e) = replica_session(server, stream, handle, inbuf, req, &name).await {
        rlog(
            server,
            true,
            &format!("Connection with replica {name} lost: {e}"),
        );
    }
    replication::remove_replica(id);
}

async fn replica_session<S: AsyncRead + AsyncWrite + Unpin>(
    server: &Arc<Server>,
    stream: &mut S,
    handle: &Arc<ClientHandle>,
    inbuf: &mut BytesMut,
    req: Psync,
    name: &str,
) -> Result<(), String> {
    let io = |e: std::io::Error| e.to_string();
    let mut dropped = repl().replicas_epoch.subscribe();
    let epoch = *dropped.borrow_and_update();
    let (mut pos, gen) = match partial_from(&req) {
        Some((from, gen)) => {
            let replid = replication::current_replid();
            send(stream, format!("+CONTINUE {replid}\r\n").as_bytes())
                .await
                .map_err(io)?;
            repl().sync_partial_ok.fetch_add(1, Ordering::Relaxed);
            let end = crate::store::journal::feed().map_or(0, |f| f.offset());
            rlog(server, false, &format!(
                "Partial resynchronization request from {name} accepted. Sending {} bytes of backlog starting from offset {from}.",
                (end + 1).saturating_sub(from)
            ));
            (from, gen)
        }
        None => {
            if req.replid.as_deref().is_some_and(|r| r != "?") {
                repl().sync_partial_err.fetch_add(1, Ordering::Relaxed);
            }
            rlog(
                server,
                false,
                &format!("Replica {name} asks for synchronization"),
            );
            rlog(
                server,
                false,
                &format!("Full resync requested by replica {name}"),
            );
            let (offset, gen) = full_sync(server, stream, handle, &req, name).await?;
            repl().sync_full.fetch_add(1, Ordering::Relaxed);
            (offset + 1, gen)
        }
    };
    replication::update_replica(handle.id, |r| {
        r.state = "online";
        r.ack_ms = now_ms();
    });
    rlog(
        server,
        false,
        &format!("Synchronization with replica {name} succeeded"),
    );
    let Some(feed) = crate::store::journal::feed() else {
        return Err("no replication stream".into());
    };
    let mut appended = feed.appended.subscribe();
    let mut parse = crate::protocol::ParseState::default();
    let mut out = Vec::new();
    loop {
        // Held still by DEBUG SLEEP: nothing is sent meanwhile.
        server.thawed().await;
        loop {
            // A new history of this replica's backlog (its own full resynchronisation) or a
            // new replication ID: the replica reconnects and learns it.
            if *repl().replicas_epoch.borrow() != epoch {
                return Ok(());
            }
            out.clear();
            if feed.read_from_gen(gen, pos, &mut out, 1 << 20).is_none() {
                if feed.gen() != gen {
                    return Ok(());
                }
                return Err("the replica fell out of the replication backlog".into());
            }
            // The chunk being sent is this link's output buffer (its capacity stays
            // allocated between chunks): MEMORY STATS' `clients.slaves`.
            handle.bufs.output(out.len(), out.capacity());
            if out.is_empty() {
                handle.bufs.rbs.store(out.capacity(), Ordering::Relaxed);
                break;
            }
            tokio::select! {
                biased;
                r = send(stream, &out) => r.map_err(io)?,
                _ = handle.killed_signal() => return Ok(()),
            }
            handle.bufs.output(0, out.capacity());
            server
                .stats
                .net_output_bytes
                .fetch_add(out.len() as u64, Ordering::Relaxed);
            pos += out.len() as u64;
        }
        if handle.is_killed()
            || server.is_shutting_down()
            || *repl().replicas_epoch.borrow() != epoch
        {
            return Ok(());
        }
        if inbuf.capacity() - inbuf.len() < 4096 {
            inbuf.reserve(16 * 1024);
        }
        handle.bufs.input(inbuf.len(), inbuf.capacity());
        tokio::select! {
            _ = appended.changed() => {}
            _ = dropped.changed() => return Ok(()),
            r = stream.read_buf(inbuf) => match r {
                Ok(0) => return Err("the replica closed the connection".into()),
                Err(e) => return Err(e.to_string()),
                Ok(_) => {
                    read_acks(handle.id, inbuf, &mut parse);
                    handle.bufs.input(inbuf.len(), inbuf.capacity());
                }
            },
            _ = handle.attention(server) => {}
            _ = tokio::time::sleep(Duration::from_secs(1)) => {
                // A replica that stopped acknowledging for `repl-timeout` is dropped (it
                // reconnects and resumes if it is still there), as Redis's master does.
                let timeout = server.config.read().get_u64("repl-timeout").max(1) * 1000;
                let last = repl()
                    .replicas
                    .lock()
                    .iter()
                    .find(|r| r.id == handle.id)
                    .map_or(0, |r| r.ack_ms);
                if now_ms().saturating_sub(last) > timeout {
                    return Err("Disconnecting timedout replica (streaming sync)".into());
                }
            }
        }
    }
}

/// The offset a PSYNC may continue from, if a partial resynchronisation is possible, and
/// the backlog's history it reads.
fn partial_from(req: &Psync) -> Option<(u64, u64)> {
    let replid = req.replid.as_deref()?;
    let feed = crate::store::journal::feed()?;
    let gen = feed.gen();
    let from = u64::try_from(req.offset).ok()?;
    let ours = replication::current_replid() == replid;
    let previous = *repl().replid2.lock() == replid
        && req.offset <= repl().second_offset.load(Ordering::Acquire);
    if !ours && !previous {
        if replid != "?" {
            tracing::info!(
                "Partial resynchronization not accepted: Replication ID mismatch (Replica asked for '{replid}', my replication IDs are '{}' and '{}')",
                replication::current_replid(),
                repl().replid2.lock()
            );
        }
        return None;
    }
    let (first, held) = feed.window();
    if held == 0 && from == feed.offset() + 1 {
        return Some((from, gen));
    }
    if from < first || from > feed.offset() + 1 {
        tracing::info!(
            "Unable to partial resync with replica: lack of backlog (Replica request was: {from})."
        );
        return None;
    }
    Some((from, gen))
}

/// The full resynchronisation: snapshot at a cut (which starts the stream if it was not
/// running), `+FULLRESYNC`, the payload. Returns the stream offset of the cut.
async fn full_sync<S: AsyncRead + AsyncWrite + Unpin>(
    server: &Arc<Server>,
    stream: &mut S,
    handle: &Arc<ClientHandle>,
    req: &Psync,
    name: &str,
) -> Result<(u64, u64), String> {
    let dir = std::env::temp_dir().join(format!(
        "tidecache-repl-{}-{}",
        std::process::id(),
        handle.id
    ));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let target = dir.join("sync.rdb");
    let r = full_sync_from(server, stream, handle, req, name, &target).await;
    let _ = std::fs::remove_dir_all(&dir);
    r
}

async fn full_sync_from<S: AsyncRead + AsyncWrite + Unpin>(
    server: &Arc<Server>,
    stream: &mut S,
    handle: &Arc<ClientHandle>,
    req: &Psync,
    name: &str,
    target: &std::path::Path,
) -> Result<(u64, u64), String> {
    let io = |e: std::io::Error| e.to_string();
    let cap = server.config.read().get_u64("repl-backlog-size") as usize;
    let mut tries = 0;
    let (diskless, delay) = {
        let c = server.config.read();
        (
            c.get_bool("repl-diskless-sync"),
            c.get_u64("repl-diskless-sync-delay"),
        )
    };
    let eof = repl().confs.lock().get(&handle.id).is_some_and(|c| c.eof);
    if diskless && eof {
        // Redis waits so that more replicas can share one transfer; each replica's transfer
        // here is its own, and the wait is what the setting asks for.
        for _ in 0..delay {
            // Enough replicas waiting (repl-diskless-sync-max-replicas) end the wait.
            let max = server
                .config
                .read()
                .get_u64("repl-diskless-sync-max-replicas");
            let waiting = repl()
                .replicas
                .lock()
                .iter()
                .filter(|r| r.state == "wait_bgsave")
                .count() as u64;
            if max > 0 && waiting >= max {
                break;
            }
            keep_alive(server, stream, handle, Duration::from_secs(1)).await?;
        }
        loop {
            match streamed_sync(server, stream, handle, req, cap).await {
                Ok(done) => return Ok(done),
                Err(crate::commands::journal::NotStreamed::Busy) if tries < 600 => {
                    tries += 1;
                    keep_alive(server, stream, handle, Duration::from_millis(100)).await?;
                }
                Err(crate::commands::journal::NotStreamed::Collections) => {
                    tracing::info!("Replica {name} gets the snapshot through a file: the data set holds collections");
                    break;
                }
                Err(crate::commands::journal::NotStreamed::Busy) => {
                    return Err("a snapshot was being taken for too long".into())
                }
                Err(crate::commands::journal::NotStreamed::Failed(e)) => return Err(e),
            }
        }
    }
    let (mark, gen) = loop {
        let s = server.clone();
        let path = target.to_path_buf();
        let r = tokio::task::spawn_blocking(move || {
            let mut mark = None;
            // A replica's cut falls between two commands its link applies: the data then
            // matches the offset its backlog has reached, and the stream's database is known.
            let applying = replication::is_replica().then(|| repl().applying.lock());
            let r = crate::commands::journal::replication_snapshot(&s, &path, |seq| {
                let (cut, db) = at_sync_cut(cap, seq, applying.is_some());
                mark = Some(cut);
                drop(applying);
                db
            });
            r.map(|keys| (keys, mark))
        })
        .await
        .map_err(|e| e.to_string())?;
        match r {
            Ok((_, Some(mark))) => break mark,
            Ok((_, None)) => return Err("no cut".into()),
            // Another snapshot (BGSAVE, a rewrite, another replica's) is being taken.
            Err(e) if e.contains("already being taken") && tries < 600 => {
                tries += 1;
                keep_alive(server, stream, handle, Duration::from_millis(100)).await?;
            }
            Err(e) => return Err(e),
        }
    };
    let offset = mark.await.map_err(|e| e.to_string())?;
    tracing::info!("Starting BGSAVE for SYNC with target: replica {name} (no fork: a snapshot)");
    announce_full_resync(stream, handle, req, offset)
        .await
        .map_err(io)?;
    let mut f = std::fs::File::open(target).map_err(io)?;
    let len = f.metadata().map_err(io)?.len();
    send(stream, format!("${len}\r\n").as_bytes())
        .await
        .map_err(io)?;
    let mut chunk = vec![0u8; 1 << 20];
    // The chunk is this link's output buffer while the snapshot goes out (MEMORY STATS'
    // `clients.slaves`, CLIENT LIST's `rbs`/`omem`).
    handle.bufs.rbs.store(chunk.len(), Ordering::Relaxed);
    loop {
        let n = std::io::Read::read(&mut f, &mut chunk).map_err(io)?;
        if n == 0 {
            break;
        }
        handle.bufs.output(n, chunk.len());
        tokio::select! {
            biased;
            r = send(stream, &chunk[..n]) => r.map_err(io)?,
            _ = handle.killed_signal() => return Err("killed".into()),
        }
        handle.bufs.output(0, chunk.len());
    }
    drop(chunk);
    handle.bufs.rbs.store(0, Ordering::Relaxed);
    Ok((offset, gen))
}

/// A wait before a full resynchronisation's snapshot (its turn, or the diskless delay):
/// a bare newline keeps the replica's read timeout away, then `pause`. Ends the sync if the
/// replica was killed or the server is stopping.
async fn keep_alive<S: AsyncWrite + Unpin>(
    server: &Server,
    stream: &mut S,
    handle: &ClientHandle,
    pause: Duration,
) -> Result<(), String> {
    if handle.is_killed() || server.is_shutting_down() {
        return Err("gone".into());
    }
    send(stream, b"\n").await.map_err(|e| e.to_string())?;
    tokio::time::sleep(pause).await;
    Ok(())
}

/// At a full resynchronisation's cut (change `seq`): the backlog, started if it was not, and
/// where the cut falls in it (resolved once every smaller number is placed) with its
/// history; for a replica whose link is held between two commands (`link_held`), the
/// database its master's stream has selected there (`repl-stream-db`).
fn at_sync_cut(
    cap: usize,
    seq: u64,
    link_held: bool,
) -> ((tokio::sync::oneshot::Receiver<u64>, u64), Option<usize>) {
    let feed = crate::store::journal::start_feed(cap);
    let db = link_held.then(|| repl().stream_db.load(Ordering::Acquire));
    ((feed.mark(seq), feed.gen()), db)
}

/// `+FULLRESYNC <replid> <offset>` (not for SYNC, which has no such line); the replica is
/// then receiving its snapshot.
async fn announce_full_resync<S: AsyncWrite + Unpin>(
    stream: &mut S,
    handle: &ClientHandle,
    req: &Psync,
    offset: u64,
) -> std::io::Result<()> {
    if req.replid.is_some() {
        let replid = replication::current_replid();
        send(
            stream,
            format!("+FULLRESYNC {replid} {offset}\r\n").as_bytes(),
        )
        .await?;
    }
    replication::update_replica(handle.id, |r| r.state = "send_bulk");
    Ok(())
}

/// A sink of a streamed snapshot: the RDB's bytes, chunk by chunk, to the task sending them
/// (bounded, so the copy goes at the pace of the replica's socket).
struct ChannelWriter(tokio::sync::mpsc::Sender<Vec<u8>>);

impl std::io::Write for ChannelWriter {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.0
            .blocking_send(data.to_vec())
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::BrokenPipe))?;
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A diskless full resynchronisation (Redis's `rdbSaveToSlavesSockets`): `+FULLRESYNC`, then
/// `$EOF:<mark>`, the RDB as it is copied from the snapshot, and the mark. Nothing is sent
/// before the snapshot is sure to be streamed ([`NotStreamed`]).
///
/// [`NotStreamed`]: crate::commands::journal::NotStreamed
async fn streamed_sync<S: AsyncRead + AsyncWrite + Unpin>(
    server: &Arc<Server>,
    stream: &mut S,
    handle: &Arc<ClientHandle>,
    req: &Psync,
    cap: usize,
) -> Result<(u64, u64), crate::commands::journal::NotStreamed> {
    use crate::commands::journal::NotStreamed;
    let failed = |e: std::io::Error| NotStreamed::Failed(e.to_string());
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Vec<u8>>(16);
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
    let s = server.clone();
    let copy = tokio::task::spawn_blocking(move || {
        let cut = std::cell::RefCell::new(None);
        let applying = replication::is_replica().then(|| repl().applying.lock());
        crate::commands::journal::replication_snapshot_streamed(
            &s,
            Box::new(ChannelWriter(tx)),
            |seq| {
                let (at, db) = at_sync_cut(cap, seq, applying.is_some());
                *cut.borrow_mut() = Some(at);
                drop(applying);
                db
            },
            || {
                let _ = ready_tx.send(cut.borrow_mut().take());
            },
        )
    });
    let Ok(Some((mark, gen))) = ready_rx.await else {
        return match copy.await {
            Ok(Err(e)) => Err(e),
            _ => Err(NotStreamed::Failed(
                "the snapshot ended before its cut".into(),
            )),
        };
    };
    let offset = mark
        .await
        .map_err(|_| NotStreamed::Failed("the backlog was reset".into()))?;
    tracing::info!("Starting BGSAVE for SYNC with target: replicas sockets (no fork: a snapshot)");
    announce_full_resync(stream, handle, req, offset)
        .await
        .map_err(failed)?;
    let mark = replication::random_id();
    send(stream, format!("$EOF:{mark}\r\n").as_bytes())
        .await
        .map_err(failed)?;
    loop {
        // CLIENT KILL ends the transfer while the copy has nothing to send too, as Redis
        // frees the replica's client at once.
        let chunk = tokio::select! {
            biased;
            _ = handle.killed_signal() => return Err(NotStreamed::Failed("killed".into())),
            c = rx.recv() => c,
        };
        let Some(chunk) = chunk else { break };
        // The chunk being sent is this link's output buffer (MEMORY STATS' `clients.slaves`).
        handle.bufs.output(chunk.len(), chunk.capacity());
        tokio::select! {
            biased;
            r = send(stream, &chunk) => r.map_err(failed)?,
            _ = handle.killed_signal() => return Err(NotStreamed::Failed("killed".into())),
        }
    }
    handle.bufs.output(0, 0);
    handle.bufs.rbs.store(0, Ordering::Relaxed);
    match copy.await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => return Err(e),
        Err(e) => return Err(NotStreamed::Failed(e.to_string())),
    }
    send(stream, mark.as_bytes()).await.map_err(failed)?;
    tracing::info!(
        "Streamed RDB transfer with replica {} succeeded (socket).",
        handle.addr
    );
    Ok((offset, gen))
}

/// The replica's `REPLCONF ACK <offset>` lines.
fn read_acks(id: u64, inbuf: &mut BytesMut, parse: &mut crate::protocol::ParseState) {
    let limits = crate::protocol::ParseLimits {
        max_bulk_len: 1 << 20,
        unauthenticated: false,
    };
    while let Ok(Some(args)) = crate::protocol::next_request(inbuf, parse, limits) {
        if args.len() >= 3
            && crate::commands::is(&args[0], "replconf")
            && crate::commands::is(&args[1], "ack")
        {
            // `ACK <offset> [FACK <fsynced offset>]` (Redis 7.2).
            let fack = (args.len() >= 5 && crate::commands::is(&args[3], "fack"))
                .then(|| crate::util::num::parse_i64(&args[4]))
                .flatten();
            if let Some(off) = crate::util::num::parse_i64(&args[2]) {
                replication::update_replica(id, |r| {
                    r.ack = r.ack.max(off.max(0) as u64);
                    if let Some(f) = fack {
                        r.fack = r.fack.max(f.max(0) as u64);
                    }
                    r.ack_ms = now_ms();
                });
                repl().acks.send_modify(|n| *n = n.wrapping_add(1));
            }
        }
    }
    if inbuf.is_empty() {
        let _ = inbuf.try_reclaim(inbuf.capacity() + 1);
    }
}

// ---------------------------------------------------------------------------------------
// Replica side

fn start_link(server: &Arc<Server>, gen: u64) {
    let Ok(rt) = tokio::runtime::Handle::try_current() else {
        tracing::warn!("cannot start the replication link: no runtime");
        return;
    };
    rt.spawn(link(server.clone(), gen));
}

fn current(server: &Server, gen: u64) -> bool {
    repl().link_gen.load(Ordering::Acquire) == gen && !server.is_shutting_down()
}

/// The replica's link: one session after another (a second apart) while this REPLICAOF is
/// current.
async fn link(server: Arc<Server>, gen: u64) {
    while current(&server, gen) {
        let Some((host, port)) = repl().master.lock().clone() else {
            return;
        };
        server.thawed().await;
        if let Err(e) = session(&server, gen, &host, port).await {
            if !e.is_empty() {
                rlog(&server, true, &e);
            }
        }
        repl().link_up.clear(gen);
        repl().sync_in_progress.clear(gen);
        repl().link_phase.store(0, Ordering::Release);
        if !current(&server, gen) {
            return;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// The name a TLS handshake to `host` carries (SNI when it is a DNS name). The master's
/// certificate is not held to it (`config::tls::replication_client`).
fn rustls_name(host: &str) -> tokio_rustls::rustls::pki_types::ServerName<'static> {
    use tokio_rustls::rustls::pki_types::ServerName;
    ServerName::try_from(host.to_string())
        .unwrap_or_else(|_| ServerName::IpAddress(std::net::Ipv4Addr::LOCALHOST.into()))
}

/// The link's transport: TCP, or TLS over it (`tls-replication yes`).
trait LinkIo: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> LinkIo for T {}

/// A connection to the master, buffered.
struct Conn {
    stream: Box<dyn LinkIo>,
    buf: BytesMut,
}

impl Conn {
    async fn fill(&mut self, timeout: Duration) -> Result<(), String> {
        if self.buf.capacity() - self.buf.len() < 16 * 1024 {
            self.buf.reserve(64 * 1024);
        }
        match tokio::time::timeout(timeout, self.stream.read_buf(&mut self.buf)).await {
            Err(_) => Err("Timeout connecting to the MASTER...".into()),
            Ok(Ok(0)) => Err("Master closed the connection".into()),
            Ok(Err(e)) => Err(format!("Error condition on socket for SYNC: {e}")),
            Ok(Ok(_)) => {
                repl().last_io_ms.store(now_ms(), Ordering::Release);
                Ok(())
            }
        }
    }

    /// One reply line (without `\r\n`), skipping the bare newlines a master sends while it
    /// prepares the snapshot.
    async fn line(&mut self, timeout: Duration) -> Result<String, String> {
        loop {
            while self.buf.first() == Some(&b'\n') {
                let _ = self.buf.split_to(1);
            }
            if let Some(i) = self.buf.iter().position(|&b| b == b'\n') {
                let l = self.buf.split_to(i + 1);
                let l = String::from_utf8_lossy(&l[..i])
                    .trim_end_matches('\r')
                    .to_string();
                return Ok(l);
            }
            self.fill(timeout).await?;
        }
    }

    async fn send(&mut self, argv: &[&[u8]]) -> Result<(), String> {
        let mut out = Vec::new();
        crate::store::journal::aof::encode(&mut out, argv);
        let io = |e: std::io::Error| format!("Error condition on socket for SYNC: {e}");
        self.stream.write_all(&out).await.map_err(io)?;
        // TLS may hold a record back until flushed.
        self.stream.flush().await.map_err(io)
    }

    async fn command(&mut self, argv: &[&[u8]], timeout: Duration) -> Result<String, String> {
        self.send(argv).await?;
        self.line(timeout).await
    }
}

async fn session(server: &Arc<Server>, gen: u64, host: &str, port: u16) -> Result<(), String> {
    let (timeout, auth, user, my_port, my_ip, tls) = {
        let c = server.config.read();
        (
            Duration::from_secs(c.get_u64("repl-timeout").max(1)),
            c.get("masterauth").to_string(),
            c.get("masteruser").to_string(),
            // The announced port, else the port bound (`port 0` picks one).
            match c.get_u64("replica-announce-port") {
                0 => server.port.load(Ordering::Relaxed).to_string(),
                p => p.to_string(),
            },
            c.get("replica-announce-ip").to_string(),
            c.get_bool("tls-replication"),
        )
    };
    rlog(
        server,
        false,
        &format!("Connecting to MASTER {host}:{port}"),
    );
    let phase = &repl().link_phase;
    phase.store(replication::LINK_CONNECTING, Ordering::Release);
    let stream = tokio::time::timeout(timeout, TcpStream::connect((host, port)))
        .await
        .map_err(|_| "Timeout connecting to the MASTER...".to_string())?
        .map_err(|e| format!("Unable to connect to MASTER: {e}"))?;
    let _ = stream.set_nodelay(true);
    let peer = stream
        .peer_addr()
        .unwrap_or_else(|_| ([0, 0, 0, 0], 0).into());
    let local = stream
        .local_addr()
        .unwrap_or_else(|_| ([0, 0, 0, 0], 0).into());
    let stream: Box<dyn LinkIo> = if tls {
        let config = crate::config::tls::replication_client(&server.config.read())
            .map_err(|e| format!("Unable to connect to MASTER over TLS: {e}"))?;
        let name = rustls_name(host);
        let tls = tokio_rustls::TlsConnector::from(config).connect(name, stream);
        match tokio::time::timeout(timeout, tls).await {
            Err(_) => return Err("Timeout connecting to the MASTER...".into()),
            Ok(Err(e)) => return Err(format!("Unable to connect to MASTER over TLS: {e}")),
            Ok(Ok(s)) => Box::new(s),
        }
    } else {
        Box::new(stream)
    };
    let mut conn = Conn {
        stream,
        buf: BytesMut::new(),
    };
    phase.store(replication::LINK_HANDSHAKE, Ordering::Release);
    rlog(server, false, "MASTER <-> REPLICA sync started");
    let pong = conn.command(&[b"PING"], timeout).await?;
    if pong.starts_with('-')
        && !pong.starts_with("-NOAUTH")
        && !pong.starts_with("-NOPERM")
        && !pong.starts_with("-ERR operation not permitted")
    {
        return Err(format!("Error reply to PING from master: '{pong}'"));
    }
    rlog(
        server,
        false,
        "Master replied to PING, replication can continue...",
    );
    if !auth.is_empty() {
        let r = if user.is_empty() {
            conn.command(&[b"AUTH", auth.as_bytes()], timeout).await?
        } else {
            conn.command(&[b"AUTH", user.as_bytes(), auth.as_bytes()], timeout)
                .await?
        };
        if r.starts_with('-') {
            return Err(format!("Unable to AUTH to MASTER: {r}"));
        }
    }
    let r = conn
        .command(
            &[b"REPLCONF", b"listening-port", my_port.as_bytes()],
            timeout,
        )
        .await?;
    if r.starts_with('-') {
        tracing::info!("(Non critical) Master does not understand REPLCONF listening-port: {r}");
    }
    if !my_ip.is_empty() {
        let r = conn
            .command(&[b"REPLCONF", b"ip-address", my_ip.as_bytes()], timeout)
            .await?;
        if r.starts_with('-') {
            tracing::info!("(Non critical) Master does not understand REPLCONF ip-address: {r}");
        }
    }
    let r = conn
        // `eof`: a payload streamed with an end mark rather than a length (a diskless master's
        // `$EOF:<mark>`) is read too.
        .command(&[b"REPLCONF", b"capa", b"eof", b"capa", b"psync2"], timeout)
        .await?;
    if r.starts_with('-') {
        tracing::info!("(Non critical) Master does not understand REPLCONF capa: {r}");
    }
    if !current(server, gen) {
        return Ok(());
    }
    let cached = repl().master_replid.lock().clone();
    let applied = repl().applied.load(Ordering::Acquire);
    // A master handing its role over (FAILOVER) asks its target to take it.
    let failing_over = crate::state::replication::failover_phase()
        == crate::state::replication::FailoverPhase::InProgress;
    let sent = if cached.is_empty() {
        tracing::info!("Partial resynchronization not possible (no cached master)");
        if failing_over {
            conn.command(&[b"PSYNC", b"?", b"-1", b"FAILOVER"], timeout)
                .await
        } else {
            conn.command(&[b"PSYNC", b"?", b"-1"], timeout).await
        }
    } else {
        let off = (applied + 1).to_string();
        tracing::info!("Trying a partial resynchronization (request {cached}:{off}).");
        if failing_over {
            conn.command(
                &[b"PSYNC", cached.as_bytes(), off.as_bytes(), b"FAILOVER"],
                timeout,
            )
            .await
        } else {
            conn.command(&[b"PSYNC", cached.as_bytes(), off.as_bytes()], timeout)
                .await
        }
    };
    let r = match sent {
        Ok(r) => r,
        Err(e) => {
            if failing_over {
                if let Some(line) =
                    crate::state::replication::abort_failover("Write error to failover target")
                {
                    rlog(server, false, &line);
                }
            }
            return Err(e);
        }
    };
    // Redis expects +CONTINUE; a full resync is fine too. Anything else abandons the
    // failover: this server is a master again.
    if failing_over {
        if r.starts_with("+FULLRESYNC") || r.starts_with("+CONTINUE") {
            crate::state::replication::clear_failover();
        } else {
            if let Some(line) =
                crate::state::replication::abort_failover("Failover target rejected psync request")
            {
                rlog(server, false, &line);
            }
            return Err(format!("PSYNC FAILOVER refused: {r}"));
        }
    }
    let any: std::net::SocketAddr = peer;
    let handle = server.clients.register(any, local);
    repl().master_client.store(handle.id, Ordering::Relaxed);
    let mut client = ClientState::new(handle.clone(), true);
    let backlog = server.config.read().get_u64("repl-backlog-size") as usize;
    let r = if let Some(rest) = r.strip_prefix("+FULLRESYNC") {
        let mut parts = rest.split_whitespace();
        let (Some(replid), Some(off)) = (parts.next(), parts.next()) else {
            server.clients.unregister(handle.id);
            return Err(format!("Bad PSYNC reply from master: {r}"));
        };
        let off: u64 = off.parse().unwrap_or(0);
        rlog(
            server,
            false,
            &format!("Full resync from master: {replid}:{off}"),
        );
        // This server's own replicas follow a history that ends here: they resynchronise
        // with the new one (Redis's replicationAttachToNewMaster).
        replication::disconnect_replicas();
        let replid = replid.to_string();
        let same_history = replid == cached;
        let loaded =
            load_snapshot(server, gen, &mut conn, &mut client, timeout, same_history).await;
        match loaded {
            Ok(()) => {
                *repl().master_replid.lock() = replid;
                *repl().replid2.lock() = "0".repeat(40);
                repl().second_offset.store(-1, Ordering::Release);
                repl().applied.store(off, Ordering::Release);
                repl().read.store(off, Ordering::Release);
                repl().stream_db.store(client.db, Ordering::Release);
                // The backlog proxies the master's stream from the snapshot's offset.
                crate::store::journal::start_feed(backlog).reset(off, client.db);
                Ok(())
            }
            Err(e) => Err(e),
        }
    } else if let Some(rest) = r.strip_prefix("+CONTINUE") {
        let applied = repl().applied.load(Ordering::Acquire);
        if let Some(new) = rest.split_whitespace().next() {
            if *new != cached {
                tracing::info!("Master replication ID changed to {new}");
                // The history so far keeps its ID as the second one, up to here, for this
                // server's replicas; they reconnect to learn the new one (Redis's
                // replicationSetupSlaveForFullResync... `PSYNC_CONTINUE` branch).
                *repl().replid2.lock() = cached.clone();
                repl()
                    .second_offset
                    .store(applied as i64 + 1, Ordering::Release);
                *repl().master_replid.lock() = new.to_string();
                replication::disconnect_replicas();
            }
        }
        client.db = repl().stream_db.load(Ordering::Acquire);
        // The backlog continues with the master's bytes: a former master's own records
        // end here (the offsets agree), any other history starts again at this offset.
        match crate::store::journal::feed() {
            Some(f) if f.offset() == applied => crate::store::journal::set_proxying(true),
            Some(f) => {
                replication::disconnect_replicas();
                f.reset(applied, client.db);
            }
            None => crate::store::journal::start_feed(backlog).reset(applied, client.db),
        }
        rlog(
            server,
            false,
            "Successful partial resynchronization with master.",
        );
        tracing::info!("MASTER <-> REPLICA sync: Master accepted a Partial Resynchronization.");
        Ok(())
    } else {
        Err(format!("Unexpected reply to PSYNC from master: {r}"))
    };
    let r = match r {
        Ok(()) if current(server, gen) => {
            repl().link_up.set(gen);
            stream_loop(server, gen, &mut conn, &mut client, timeout).await
        }
        other => other,
    };
    repl().stream_db.store(client.db, Ordering::Release);
    crate::commands::transactions::reset_state(&mut crate::commands::Ctx {
        server,
        client: &mut client,
    });
    server.clients.unregister(handle.id);
    r
}

/// Receives the snapshot (`$<len>` and the payload) into a file or into memory
/// (`repl-diskless-load`), empties the data set and loads it, then runs the documents'
/// records that followed the RDB. `replid`: the history the master's `+FULLRESYNC` named.
async fn load_snapshot(
    server: &Arc<Server>,
    gen: u64,
    conn: &mut Conn,
    client: &mut ClientState,
    timeout: Duration,
    same_history: bool,
) -> Result<(), String> {
    repl().sync_in_progress.set(gen);
    let head = conn.line(timeout).await?;
    if head.starts_with('-') {
        return Err(format!("MASTER aborted replication with an error: {head}"));
    }
    let mode = server.config.read().get("repl-diskless-load").to_string();
    let in_memory = match mode.as_str() {
        "swapdb" => true,
        // Nothing to lose should the transfer fail half-way.
        "on-empty-db" => store_is_empty(server),
        _ => false,
    };
    let whither = if in_memory { "memory" } else { "disk" };
    // `$EOF:<40 bytes>`: a diskless master's stream, as long as it takes, ended by the mark.
    let size = match head.strip_prefix("$EOF:") {
        Some(mark) if mark.len() == 40 => {
            tracing::info!(
                "MASTER <-> REPLICA sync: receiving streamed RDB from master with EOF to {whither}"
            );
            Payload::Marked(mark.as_bytes().to_vec())
        }
        _ => {
            let len: u64 = head
                .strip_prefix('$')
                .and_then(|l| l.parse().ok())
                .ok_or_else(|| format!("Bad protocol from MASTER, the first byte is not '$' (we received '{head}'), are you sure the host and port are right?"))?;
            tracing::info!(
                "MASTER <-> REPLICA sync: receiving {len} bytes from master to {whither}"
            );
            Payload::Length(len)
        }
    };
    let r = if in_memory {
        let asynchronous = same_history && mode == "swapdb";
        receive_into_memory(server, conn, client, timeout, size, asynchronous).await
    } else {
        let path = std::env::temp_dir().join(format!(
            "tidecache-replica-{}-{}.rdb",
            std::process::id(),
            crate::util::clock::now_us()
        ));
        let r = receive_and_load(server, conn, client, timeout, size, &path).await;
        let _ = std::fs::remove_file(&path);
        r
    };
    repl().sync_in_progress.clear(gen);
    r
}

/// Whether no database holds a key or a collection (`repl-diskless-load on-empty-db`).
fn store_is_empty(server: &Server) -> bool {
    let mut empty = true;
    server.store.for_each_shard(|s| {
        empty &= s
            .dbs
            .iter()
            .all(|d| d.keys.is_empty() && d.collections.is_empty())
    });
    empty
}

/// Reads the payload from the link into `sink` until its length or its end mark; `seen`
/// hears the bytes received so far.
async fn receive_payload(
    conn: &mut Conn,
    timeout: Duration,
    size: Payload,
    sink: &mut impl std::io::Write,
    seen: &mut impl FnMut(u64),
) -> Result<(), String> {
    let io = |e: std::io::Error| format!("Failed trying to write the temp DB to disk: {e}");
    let mut received = 0u64;
    match size {
        Payload::Length(len) => {
            let mut left = len;
            while left > 0 {
                if conn.buf.is_empty() {
                    conn.fill(timeout).await?;
                }
                let n = (conn.buf.len() as u64).min(left) as usize;
                let part = conn.buf.split_to(n);
                sink.write_all(&part).map_err(io)?;
                left -= n as u64;
                received += n as u64;
                seen(received);
            }
        }
        Payload::Marked(mark) => {
            // The last bytes read stay back until more come: they may be the mark. The master
            // sends nothing after it until this replica's first acknowledgement.
            let mut tail: Vec<u8> = Vec::new();
            loop {
                if conn.buf.is_empty() {
                    conn.fill(timeout).await?;
                }
                let part = conn.buf.split_to(conn.buf.len());
                received += part.len() as u64;
                seen(received);
                tail.extend_from_slice(&part);
                if tail.ends_with(&mark) {
                    sink.write_all(&tail[..tail.len() - mark.len()])
                        .map_err(io)?;
                    break;
                }
                if tail.len() > mark.len() {
                    let keep = tail.len() - mark.len();
                    sink.write_all(&tail[..keep]).map_err(io)?;
                    tail.drain(..keep);
                }
            }
        }
    }
    Ok(())
}

/// `repl-diskless-load swapdb` / `on-empty-db`: the payload comes into memory, no file.
/// `asynchronous` (swapdb, from the same history): the old data is served meanwhile
/// and only the commands flagged `NO_ASYNC_LOADING` are refused (INFO `async_loading:1`);
/// otherwise clients are answered `-LOADING` from the first byte (`loading:1`). Either way
/// the old data stays whole should the transfer fail.
async fn receive_into_memory(
    server: &Arc<Server>,
    conn: &mut Conn,
    client: &mut ClientState,
    timeout: Duration,
    size: Payload,
    asynchronous: bool,
) -> Result<(), String> {
    use crate::commands::journal as j;
    let total = match size {
        Payload::Length(n) => n,
        Payload::Marked(_) => 0,
    };
    if asynchronous {
        j::begin_async_loading(total);
    } else {
        j::begin_loading_rdb(server, total);
    }
    rlog(
        server,
        false,
        "MASTER <-> REPLICA sync: Loading DB in memory",
    );
    let mut bytes: Vec<u8> = Vec::new();
    let got = receive_payload(conn, timeout, size, &mut bytes, &mut j::loading_received).await;
    if let Err(e) = got {
        j::end_loading();
        // Redis's words for a diskless load cut short (rdbReportReadError).
        rlog(
            server,
            true,
            &format!(
                "Internal error in RDB reading offset {}, function at replication -> Unexpected EOF reading RDB file ({e})",
                bytes.len()
            ),
        );
        if asynchronous {
            rlog(
                server,
                false,
                "MASTER <-> REPLICA sync: Discarding temporary DB in background",
            );
        }
        return Err(e);
    }
    let s = server.clone();
    let loaded = tokio::task::spawn_blocking(move || {
        j::load_replication_payload(&s, j::SyncPayload::Memory(bytes))
    })
    .await
    .map_err(|e| e.to_string())
    .and_then(|r| r);
    if loaded.is_err() {
        j::end_loading();
    }
    finish_load(server, client, loaded?).await
}

async fn receive_and_load(
    server: &Arc<Server>,
    conn: &mut Conn,
    client: &mut ClientState,
    timeout: Duration,
    size: Payload,
    path: &std::path::Path,
) -> Result<(), String> {
    let io = |e: std::io::Error| format!("Failed trying to write the temp DB to disk: {e}");
    let mut f = std::fs::File::create(path).map_err(io)?;
    receive_payload(conn, timeout, size, &mut f, &mut |_| {}).await?;
    f.sync_all().map_err(io)?;
    drop(f);
    let s = server.clone();
    let p = path.to_path_buf();
    let loaded = tokio::task::spawn_blocking(move || {
        crate::commands::journal::load_replication_payload(
            &s,
            crate::commands::journal::SyncPayload::File(&p),
        )
    })
    .await
    .map_err(|e| e.to_string())??;
    finish_load(server, client, loaded).await
}

/// After the RDB: runs the documents' records that followed it and takes the stream's
/// database.
async fn finish_load(
    server: &Arc<Server>,
    client: &mut ClientState,
    (keys, docs, stream_db): (u64, Vec<u8>, Option<usize>),
) -> Result<(), String> {
    client.db = 0;
    let mut docs = BytesMut::from(&docs[..]);
    let mut parse = crate::protocol::ParseState::default();
    let limits = crate::protocol::ParseLimits {
        max_bulk_len: u64::MAX,
        unauthenticated: false,
    };
    while let Ok(Some(args)) = crate::protocol::parse_request(&mut docs, &mut parse, limits) {
        apply(server, client, &args).await;
    }
    // A master's stream names its database after the snapshot; a replica's proxied one
    // cannot, and its snapshot says which it is.
    client.db = stream_db.unwrap_or(0);
    tracing::info!("Done loading RDB, keys loaded: {keys}");
    rlog(
        server,
        false,
        "MASTER <-> REPLICA sync: Finished with success",
    );
    Ok(())
}

/// How a snapshot's payload ends: after `$<len>` bytes, or at a diskless master's mark.
enum Payload {
    Length(u64),
    Marked(Vec<u8>),
}

/// Runs one command of the master's stream as the master's client (it may write on a
/// read-only replica); the reply is dropped, as Redis drops its master client's replies.
async fn apply(server: &Arc<Server>, client: &mut ClientState, args: &[Bytes]) {
    loop {
        match apply_now(server, client, args) {
            Applied::Done => return,
            // A command that blocked (a script on the script thread) is waited for.
            Applied::Blocked(b) => {
                let _ = b.reply.await;
                return;
            }
            Applied::Busy => busy_script_ended(server).await,
        }
    }
}

/// What became of one command of the master's stream.
enum Applied {
    Done,
    /// It waits on this (a script on the script thread).
    Blocked(crate::state::blocking::Blocked),
    /// Not run: a script holds the gate past `busy-reply-threshold`. It runs once the
    /// script ends, as Redis leaves its master client's input unread while a script is
    /// busy: refused, the write would be lost and this replica's data part from its master's.
    Busy,
}

/// Waits until no script is busy (see [`Applied::Busy`]).
async fn busy_script_ended(server: &Server) {
    while server.exec_gate.busy() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// [`apply`]'s synchronous part: the command, or what it waits on if it blocked.
fn apply_now(server: &Arc<Server>, client: &mut ClientState, args: &[Bytes]) -> Applied {
    replication::set_applying(true);
    let reply = {
        let mut ctx = crate::commands::Ctx { server, client };
        crate::commands::dispatch(&mut ctx, args)
    };
    replication::set_applying(false);
    if matches!(&reply, crate::protocol::Reply::Error(e) if e.starts_with("BUSY ")) {
        return Applied::Busy;
    }
    if let crate::protocol::Reply::Error(e) = &reply {
        let cmd = String::from_utf8_lossy(&args[0]);
        rlog(
            server,
            true,
            &format!(
                "== CRITICAL == This replica is sending an error to its master: '{e}' after processing the command '{cmd}'"
            ),
        );
        // propagation-error-behavior: a read-only replica's data would diverge from its
        // master's; the setting may say that is worse than stopping (Redis's serverPanic).
        let (behavior, read_only) = {
            let c = server.config.read();
            (
                c.get("propagation-error-behavior").to_string(),
                c.get_bool("replica-read-only"),
            )
        };
        if read_only && behavior != "ignore" {
            rlog(
                server,
                true,
                &format!(
                    "This replica panicked sending an error to its master after processing the command '{cmd}'"
                ),
            );
            std::process::abort();
        }
    }
    match client.blocked.take() {
        Some(b) => Applied::Blocked(b),
        None => Applied::Done,
    }
}

/// The master's bytes applied but not yet in the backlog: a MULTI block's, placed whole at
/// its EXEC (Redis counts a master client's offset only outside MULTI).
struct Held {
    bytes: Vec<u8>,
    /// The database the held bytes start in.
    db: usize,
    /// (number, stream offset after it) of what was placed, until the journal has it on
    /// disk: see [`fsynced_offset`].
    fsync: std::collections::VecDeque<(u64, u64)>,
    fsynced: u64,
}

/// After a command of the master's stream ran: its bytes join what is held, and unless the
/// client is inside MULTI, everything held goes to the backlog after the changes it made and
/// counts as applied. Called with [`Repl::applying`] held, so a snapshot's cut sees the data
/// and the applied offset agree.
///
/// [`Repl::applying`]: crate::state::replication::Repl::applying
fn settle(client: &ClientState, held: &mut Held, raw: &[u8], db_before: usize) {
    if held.bytes.is_empty() {
        held.db = db_before;
    }
    held.bytes.extend_from_slice(raw);
    let changed = crate::store::journal::take_last_changed();
    if client.multi.is_some() {
        return;
    }
    let bytes = std::mem::take(&mut held.bytes);
    let n = bytes.len() as u64;
    let seq = crate::store::journal::place_proxied(bytes, held.db, client.db, changed);
    repl().stream_db.store(client.db, Ordering::Release);
    let reached = repl().applied.fetch_add(n, Ordering::AcqRel) + n;
    if seq != 0 && crate::store::journal::enabled() {
        let f = &mut held.fsync;
        // Bounded: an offset whose number is not yet on disk waits here (at most a second
        // of stream under everysec); past the bound the oldest give way to newer ones.
        if f.len() >= 1 << 16 {
            f.pop_front();
        }
        f.push_back((seq, reached));
    }
}

/// The stream offset this replica's journal holds on disk (Redis's `fsynced_reploff`), for
/// `REPLCONF ACK … FACK`: the newest placed offset whose number the journal has fsynced.
/// `None` while the journal is off (no FACK is sent, as Redis sends none).
fn fsynced_offset(held: &mut Held) -> Option<u64> {
    let j = crate::store::journal::journal().filter(|_| crate::store::journal::enabled())?;
    let durable = j.durable();
    while let Some(&(seq, off)) = held.fsync.front() {
        if seq > durable {
            break;
        }
        held.fsynced = off;
        held.fsync.pop_front();
    }
    if held.fsync.is_empty() && held.bytes.is_empty() {
        // Everything placed is on disk: the whole stream applied so far is.
        held.fsynced = held.fsynced.max(repl().applied.load(Ordering::Acquire));
    }
    Some(held.fsynced)
}

/// `REPLCONF ACK <applied> [FACK <fsynced>]`.
async fn send_ack(conn: &mut Conn, held: &mut Held) -> Result<(), String> {
    let off = repl().applied.load(Ordering::Acquire).to_string();
    match fsynced_offset(held) {
        Some(f) => {
            let f = f.to_string();
            conn.send(&[b"REPLCONF", b"ACK", off.as_bytes(), b"FACK", f.as_bytes()])
                .await
        }
        None => conn.send(&[b"REPLCONF", b"ACK", off.as_bytes()]).await,
    }
}

/// Applies the stream, acknowledging once a second and when asked (`REPLCONF GETACK`).
async fn stream_loop(
    server: &Arc<Server>,
    gen: u64,
    conn: &mut Conn,
    client: &mut ClientState,
    timeout: Duration,
) -> Result<(), String> {
    let mut parse = crate::protocol::ParseState::default();
    let limits = crate::protocol::ParseLimits {
        max_bulk_len: u64::MAX,
        unauthenticated: false,
    };
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The stream's bytes as received, in step with `conn.buf`: each command's own bytes go
    // to the backlog as they came (see `store/journal/feed.rs`, proxying).
    let mut mirror = BytesMut::from(&conn.buf[..]);
    let mut held = Held {
        bytes: Vec::new(),
        db: client.db,
        fsync: Default::default(),
        fsynced: 0,
    };
    let mut fsync_tick = tokio::time::interval(Duration::from_millis(100));
    fsync_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        // Held still by DEBUG SLEEP: nothing is applied or acknowledged meanwhile.
        server.thawed().await;
        // Bytes already buffered (after the snapshot, or from the last read) first.
        loop {
            // A REPLICAOF since (another master, or NO ONE) ends this link before it applies
            // anything more: the bytes belong to a stream this server no longer follows.
            if !current(server, gen) {
                return Ok(());
            }
            let before = conn.buf.len();
            let args = match crate::protocol::parse_request(&mut conn.buf, &mut parse, limits) {
                Ok(Some(a)) => a,
                Ok(None) => break,
                Err(e) => return Err(format!("Protocol error from master: {}", e.0)),
            };
            let raw = mirror.split_to(before - conn.buf.len());
            if args.len() >= 2
                && crate::commands::is(&args[0], "replconf")
                && crate::commands::is(&args[1], "getack")
            {
                send_ack(conn, &mut held).await?;
                // Proxied too: this server's replicas answer it to this server.
                let _applying = repl().applying.lock();
                settle(client, &mut held, &raw, client.db);
                continue;
            }
            let db_before = client.db;
            let blocked = loop {
                let applied = {
                    let _applying = repl().applying.lock();
                    crate::store::journal::take_last_changed();
                    let applied = apply_now(server, client, &args);
                    if let Applied::Done = applied {
                        settle(client, &mut held, &raw, db_before);
                    }
                    applied
                };
                match applied {
                    Applied::Done => break None,
                    Applied::Blocked(b) => break Some(b),
                    Applied::Busy => busy_script_ended(server).await,
                }
            };
            if let Some(b) = blocked {
                // A script on the script thread: its bytes follow its changes, placed once
                // it is done (the lock is not held across the wait).
                let _ = b.reply.await;
                let _applying = repl().applying.lock();
                settle(client, &mut held, &raw, db_before);
            }
        }
        if conn.buf.capacity() - conn.buf.len() < 16 * 1024 {
            conn.buf.reserve(64 * 1024);
        }
        let handle = client.handle.clone();
        tokio::select! {
            // CLIENT KILL of the master's client ends the link, as Redis frees its master
            // client: it reconnects, and its data ages from the last byte it had.
            _ = handle.killed_signal() => return Err("Connection with master lost (killed).".into()),
            r = conn.stream.read_buf(&mut conn.buf) => match r {
                Ok(0) | Err(_) => return Err("Connection with master lost.".into()),
                Ok(n) => {
                    mirror.extend_from_slice(&conn.buf[conn.buf.len() - n..]);
                    repl().read.fetch_add(n as u64, Ordering::AcqRel);
                    repl().last_io_ms.store(now_ms(), Ordering::Release);
                }
            },
            _ = tick.tick() => {
                if !current(server, gen) {
                    return Ok(());
                }
                let idle = now_ms().saturating_sub(repl().last_io_ms.load(Ordering::Acquire));
                if idle > timeout.as_millis() as u64 {
                    return Err("MASTER timeout: no data nor PING received...".into());
                }
                send_ack(conn, &mut held).await?;
            }
            _ = fsync_tick.tick() => {
                // A journal that reached the disk further is said at once: a WAITAOF on the
                // master waits for it.
                let before = held.fsynced;
                if fsynced_offset(&mut held).is_some_and(|f| f > before) {
                    send_ack(conn, &mut held).await?;
                }
            }
        }
    }
}
