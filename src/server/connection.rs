//! One connection: read bytes, execute every complete request in the buffer, write all the
//! replies of that batch with one write, repeat. No shard lock is held across an `.await`:
//! commands run synchronously between reads and writes.
//!
//! The task also wakes when another client pushes to this one's outbox (pub/sub messages,
//! MONITOR lines): it drains the outbox after each batch, so a message never lands inside a
//! reply, and it releases the outbox's accounted bytes once they are on the socket. Every
//! write also races the kill signal, so a client that stopped reading and went over its
//! output limit is dropped even while its socket is full.

use crate::commands::{dispatch, Ctx};
use crate::protocol::{next_request, ParseLimits, ParseState, Reply};
use crate::state::client::{ClientHandle, ClientState, ReplyMode};
use crate::state::Server;
use bytes::BytesMut;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

/// Replies are written out once this much is pending, even mid-batch, so one huge pipeline
/// does not hold all its replies in memory.
const FLUSH_AT: usize = 1 << 20;
const READ_CHUNK: usize = 16 * 1024;
/// A client quiet for this many tenths of a second gives its read buffer back. Redis waits
/// for more than 2 seconds; here a burst of 10,000 clients that each ran one command would
/// then hold 160 MB for those seconds, and the allocator keeps pages it got back that way
/// until it next runs. Within 0.3 seconds, a wave of new clients mostly reuses the buffers
/// of the ones before it. Redis's own tests (unit/querybuf) pass either way: they look at
/// a buffer right after a command, and again once the client has idled 3 seconds.
const QUERYBUF_IDLE: u32 = 3;
/// How long after a batch the buffer's timer looks at the client (re-armed while active).
const QUERYBUF_CHECK: Duration = Duration::from_millis(400);
/// A reply buffer that grew past this (a large reply) is given back after it is written.
const OUT_KEEP: usize = 64 * 1024;
/// The most script requests handed to the script thread at once (see `run_batch`).
const SCRIPT_BATCH: usize = 64;

/// What a connection is served over: a plain TCP stream or a TLS one. `serve` is generic
/// over it, so the plain path is compiled on its own, exactly as it was without TLS.
pub trait ClientStream: AsyncRead + AsyncWrite + Unpin + Send + 'static {
    /// Waits for input and appends what arrived to `buf` (Ok(0): the peer closed). The
    /// buffer takes memory only once there is input, so an idle connection holds none.
    fn read_into(
        &mut self,
        buf: &mut BytesMut,
    ) -> impl Future<Output = std::io::Result<usize>> + Send;

    /// Writes all of `out` to the peer (not just into a TLS session's buffer).
    fn write_reply(&mut self, out: &[u8]) -> impl Future<Output = std::io::Result<()>> + Send;

    /// A blocking-capable duplicate of the socket for a Lua debugging session, which talks
    /// to the client directly (`commands::scripting::ldb`); None over TLS.
    fn debug_socket(&self) -> Option<std::net::TcpStream> {
        None
    }
}

impl ClientStream for TcpStream {
    /// A poll function over the socket's read readiness rather than an `async fn` awaiting
    /// `readable()`: the waiting connection's task then holds the socket's one reader
    /// waker slot instead of a `readable()` future (152 bytes with its waiter-list entry),
    /// and every idle connection's task is that much smaller. The work per read is the
    /// same: a readiness check, and the waker registered only when the socket has nothing.
    fn read_into(
        &mut self,
        buf: &mut BytesMut,
    ) -> impl Future<Output = std::io::Result<usize>> + Send {
        std::future::poll_fn(move |cx| loop {
            std::task::ready!(self.poll_read_ready(cx))?;
            if buf.capacity() - buf.len() < READ_CHUNK / 4 {
                buf.reserve(READ_CHUNK);
            }
            match read_available(self, buf) {
                // Readiness can be stale (`read_available` cleared it): wait again, without
                // holding the buffer while idle.
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if buf.is_empty() {
                        *buf = BytesMut::new();
                    }
                }
                r => return std::task::Poll::Ready(r),
            }
        })
    }

    fn write_reply(&mut self, out: &[u8]) -> impl Future<Output = std::io::Result<()>> + Send {
        write_all_polled(self, out)
    }

    fn debug_socket(&self) -> Option<std::net::TcpStream> {
        use std::os::fd::AsFd;
        let fd = self.as_fd().try_clone_to_owned().ok()?;
        Some(std::net::TcpStream::from(fd))
    }
}

/// `write_all` as a poll function rather than an `async fn` around it, which would hold its
/// arguments twice in every connection's task (TCP and Unix-socket clients).
#[inline]
fn write_all_polled<'w, 'o, W: AsyncWrite + Unpin + Send>(
    w: &'w mut W,
    mut out: &'o [u8],
) -> impl Future<Output = std::io::Result<()>> + Send + use<'w, 'o, W> {
    std::future::poll_fn(move |cx| {
        while !out.is_empty() {
            let n = std::task::ready!(std::pin::Pin::new(&mut *w).poll_write(cx, out))?;
            if n == 0 {
                return std::task::Poll::Ready(Err(std::io::ErrorKind::WriteZero.into()));
            }
            out = &out[n..];
        }
        std::task::Poll::Ready(Ok(()))
    })
}

/// A client of the Unix socket: read and written as a TCP socket is.
impl ClientStream for tokio::net::UnixStream {
    fn read_into(
        &mut self,
        buf: &mut BytesMut,
    ) -> impl Future<Output = std::io::Result<usize>> + Send {
        std::future::poll_fn(move |cx| loop {
            std::task::ready!(self.poll_read_ready(cx))?;
            if buf.capacity() - buf.len() < READ_CHUNK / 4 {
                buf.reserve(READ_CHUNK);
            }
            match self.try_read_buf(buf) {
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if buf.is_empty() {
                        *buf = BytesMut::new();
                    }
                }
                r => return std::task::Poll::Ready(r),
            }
        })
    }

    fn write_reply(&mut self, out: &[u8]) -> impl Future<Output = std::io::Result<()>> + Send {
        write_all_polled(self, out)
    }
}

impl ClientStream for tokio_rustls::server::TlsStream<TcpStream> {
    async fn read_into(&mut self, buf: &mut BytesMut) -> std::io::Result<usize> {
        std::future::poll_fn(|cx| poll_tls_read(self, cx, buf)).await
    }

    async fn write_reply(&mut self, out: &[u8]) -> std::io::Result<()> {
        self.write_all(out).await?;
        // What the session still holds encrypted goes out too.
        self.flush().await
    }
}

/// One poll of a TLS read into `buf`, which, as on a plain connection, takes its memory only
/// once there is input: the session's own decrypted input first, else the socket's
/// readiness. Readiness can be stale (the session then finds nothing to decrypt): the read
/// is pending again and an empty buffer is given back while it waits.
fn poll_tls_read(
    stream: &mut tokio_rustls::server::TlsStream<TcpStream>,
    cx: &mut std::task::Context<'_>,
    buf: &mut BytesMut,
) -> std::task::Poll<std::io::Result<usize>> {
    use std::task::Poll;
    if buf.capacity() - buf.len() < READ_CHUNK / 4 {
        let (tcp, session) = stream.get_mut();
        // Only reports what earlier reads left decrypted: new records are read and
        // processed by the stream's own read below.
        let state = session
            .process_new_packets()
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
        if state.plaintext_bytes_to_read() == 0 && !state.peer_has_closed() {
            match tcp.poll_read_ready(cx) {
                Poll::Ready(Ok(())) => {}
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
        buf.reserve(READ_CHUNK);
    }
    match std::pin::pin!(stream.read_buf(buf)).poll(cx) {
        Poll::Pending => {
            if buf.is_empty() {
                *buf = BytesMut::new();
            }
            Poll::Pending
        }
        r => r,
    }
}

/// Connection tasks running in this process. The listener spawns them detached (a
/// `JoinSet` keeps a 64-byte entry for each, idle or not), so its graceful shutdown waits
/// on this count instead.
static RUNNING: AtomicUsize = AtomicUsize::new(0);

/// How many connection tasks are running.
pub fn running() -> usize {
    RUNNING.load(Ordering::Acquire)
}

/// Counts a connection task for as long as it lives (dropped with the task, however it
/// ends).
struct Running;

impl Running {
    fn start() -> Running {
        RUNNING.fetch_add(1, Ordering::AcqRel);
        Running
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        RUNNING.fetch_sub(1, Ordering::AcqRel);
    }
}

#[allow(clippy::manual_async_fn)] // see the comment on the `async` block
pub fn serve<S: ClientStream>(
    server: Arc<Server>,
    mut stream: S,
    handle: Arc<ClientHandle>,
) -> impl Future<Output = ()> + Send {
    // An `async` block rather than an `async fn`: the latter's future keeps its arguments
    // (56 bytes) besides the locals they are moved into, in every connection's task.
    async move {
        let _running = Running::start();
        let authenticated = !server.auth_required.load(Ordering::Relaxed);
        let mut client = ClientState::new(handle.clone(), authenticated);
        // Every connection starts as the default user (authenticated if it needs no password).
        client.user = Some(server.acl.default_user());
        // Both buffers start empty. The read buffer is taken when the socket is first readable
        // and kept between requests, trimmed as Redis trims its query buffer
        // (`state::client::resize_query_buffer`): `qpeak` is the most input held since the last
        // trim check, made at most every tenth of a second after a batch, and by `qtimer`,
        // armed while a buffer is held, which gives the buffer back once the client has been
        // quiet for `QUERYBUF_IDLE` (Redis waits 2 seconds; see there why not here). So an
        // idle connection holds no buffer (10,000 idle connections cost what their sockets
        // and client state cost), and one that just ran a command holds its 16 KiB briefly.
        let mut inbuf = BytesMut::new();
        let mut out = BytesMut::new();
        let mut parse_state = ParseState::default();
        handle.bufs.rbs.store(out.capacity(), Ordering::Relaxed);
        let mut qpeak = 0usize;
        let mut qchecked = crate::util::clock::coarse();
        let mut qtimer: Option<std::pin::Pin<Box<tokio::time::Sleep>>> = None;
        let mut warmer = crate::commands::warm::KeyWarmer::default();
        'conn: loop {
            // The settings are read where they are used rather than held for the iteration:
            // what a loop iteration holds sits in every idle connection's task.
            // Execute every complete request already buffered, their keys warmed a batch at
            // a time (`commands::warm`).
            let mut close = false;
            loop {
                warmer.before_request(&server, client.db, &inbuf);
                match next_request(&mut inbuf, &mut parse_state, parse_limits(&server, &client)) {
                    Ok(Some(args)) => {
                        // CLIENT KILL sets the flag before it replies, so once the killer has its
                        // answer, nothing more of this client's runs.
                        if handle.killed.load(Ordering::Acquire) {
                            close = true;
                            break;
                        }
                        // CLIENT PAUSE: a covered request waits (replies so far go out first),
                        // asleep until the pause ends or the client is killed.
                        if crate::state::pause::active()
                            && crate::commands::connection::postponed_by_pause(
                                &client,
                                args,
                                crate::state::pause::current().0,
                            )
                        {
                            if !out.is_empty()
                                && write_out(
                                    &server,
                                    &handle,
                                    &mut stream,
                                    &mut out,
                                    (&mut client.journal_wait, &mut client.journal_written),
                                )
                                .await
                                .is_err()
                            {
                                break 'conn;
                            }
                            let c = &client;
                            // Boxed: the pause's timer and notification would otherwise sit
                            // in every connection's task, paused or not.
                            let ended = Box::pin(async {
                            tokio::select! {
                                _ = crate::state::pause::wait_while(|mode| {
                                    crate::commands::connection::postponed_by_pause(c, args, mode)
                                }) => false,
                                _ = handle.ended(&server) => true,
                            }
                        })
                        .await;
                            if ended {
                                break 'conn;
                            }
                        }
                        // SCRIPT DEBUG SYNC: this EVAL is a debugging session, which talks to
                        // the client over the socket itself (commands::scripting::ldb).
                        if crate::commands::scripting::ldb::starts_session(&client, args) {
                            let argv = args.to_vec();
                            match Box::pin(debug_session(
                                &server,
                                &handle,
                                &mut stream,
                                &mut inbuf,
                                &mut out,
                                &mut client,
                                argv,
                            ))
                            .await
                            {
                                Some(true) => continue,
                                Some(false) => {
                                    close = true;
                                    break;
                                }
                                None => break 'conn,
                            }
                        }
                        // Scripts, with one I/O thread: this one and the scripts buffered right
                        // behind it go to the script thread together (commands::scripting).
                        if crate::commands::scripting::batchable(&client, args) {
                            let mut batch = vec![args.to_vec()];
                            let mut bad = None;
                            while batch.len() < SCRIPT_BATCH
                                && crate::commands::scripting::next_is_script(&inbuf)
                            {
                                let limits = parse_limits(&server, &client);
                                match next_request(&mut inbuf, &mut parse_state, limits) {
                                    Ok(Some(a)) => batch.push(a.to_vec()),
                                    Ok(None) => break,
                                    Err(e) => {
                                        bad = Some(e);
                                        break;
                                    }
                                }
                            }
                            let n = batch.len();
                            let state = std::mem::replace(
                                &mut client,
                                ClientState::new(handle.clone(), false),
                            );
                            let Some(done) = Box::pin(crate::commands::scripting::run_batch(
                                &server, state, batch,
                            ))
                            .await
                            else {
                                break 'conn;
                            };
                            client = done.client;
                            for reply in &done.replies {
                                reply.encode(&mut out, client.resp3);
                            }
                            if let Some(e) = bad {
                                crate::state::cmdstats::error_reply(&e.0);
                                Reply::Error(e.0).encode(&mut out, client.resp3);
                                close = true;
                                break;
                            }
                            if done.replies.len() < n || handle.killed.load(Ordering::Relaxed) {
                                close = true;
                                break;
                            }
                            continue;
                        }
                        // In a block of its own: a borrowed local lives until its scope ends,
                        // and one alive across the awaits below would take its own room in
                        // every connection's task.
                        {
                            let skip_this = client.reply_mode == ReplyMode::Skip;
                            let reply = {
                                let mut ctx = Ctx {
                                    server: &server,
                                    client: &mut client,
                                };
                                dispatch(&mut ctx, args)
                            };
                            if skip_this && client.reply_mode == ReplyMode::Skip {
                                client.reply_mode = ReplyMode::On;
                                if reply.is_push() {
                                    reply.encode(&mut out, client.resp3);
                                }
                            } else if client.reply_mode != ReplyMode::Off || reply.is_push() {
                                reply.encode(&mut out, client.resp3);
                            }
                        }
                        // Replies count against client-output-buffer-limit as pushes do: a
                        // client past it is closed, its replies dropped.
                        if server.pubsub.output_over_limit(&handle, out.len()) {
                            handle.kill();
                            break 'conn;
                        }
                        // PSYNC/SYNC: once what precedes is out, the socket carries the
                        // replication stream until the replica goes. Boxed with the request
                        // (`map`, so no `Option<Psync>` is held across the await): the replica's
                        // loop is rare and large, and an idle connection's task must not carry
                        // its state.
                        if let Some(replica) =
                            crate::state::replication::take_hand_off().map(|req| {
                                Box::pin(hand_off(
                                    &server,
                                    &handle,
                                    &mut stream,
                                    &mut inbuf,
                                    &mut out,
                                    &mut client,
                                    req,
                                ))
                            })
                        {
                            replica.await;
                            break 'conn;
                        }
                        // Blocked on keys: boxed, as above, with the blocked request.
                        if let Some(wait) = client.blocked.take().map(|blocked| {
                            Box::pin(serve_blocked(
                                &server,
                                &handle,
                                &mut stream,
                                &mut inbuf,
                                &mut out,
                                &mut client,
                                blocked,
                            ))
                        }) {
                            if wait.await.is_none() {
                                break 'conn;
                            }
                        }
                        if client.close_after_reply || handle.killed.load(Ordering::Relaxed) {
                            close = true;
                            break;
                        }
                        if out.len() >= FLUSH_AT
                            && write_out(
                                &server,
                                &handle,
                                &mut stream,
                                &mut out,
                                (&mut client.journal_wait, &mut client.journal_written),
                            )
                            .await
                            .is_err()
                        {
                            break 'conn;
                        }
                    }
                    Ok(None) => break,
                    Err(e) => {
                        tracing::debug!(client = handle.id, "protocol error: {}", e.0);
                        crate::state::cmdstats::error_reply(&e.0);
                        Reply::Error(e.0).encode(&mut out, client.resp3);
                        close = true;
                        break;
                    }
                }
            }
            // The replies wait until every other connection that was ready has read and run its
            // batch: as Redis, which writes all its replies just before it waits for events
            // again. Each write wakes its client, and a client woken while the server still has
            // reads to do takes the server's core from it (the kernel places a socket's wakee on
            // the waker's core): written one connection at a time, between reads, that was an
            // involuntary context switch every other batch at GET pipeline 16, two to three
            // times as many as Redis has. `yield_now` runs this task again only after the worker
            // has polled its I/O driver, so connections that became readable meanwhile read
            // first too. (Waking itself instead, to the back of the run queue without that
            // poll, measured no better than not yielding.)
            if !out.is_empty() && !close {
                tokio::task::yield_now().await;
            }
            // Messages pushed by other clients go after this batch's replies.
            let (pushed, cost) = handle.outbox.drain();
            for m in pushed {
                if let crate::state::outbox::Outgoing::ShardSlotLost(slot) = m {
                    let mut ctx = crate::commands::Ctx {
                        server: &server,
                        client: &mut client,
                    };
                    let confirmations = crate::commands::pubsub::shard_slot_lost(&mut ctx, slot);
                    for r in confirmations {
                        r.encode(&mut out, client.resp3);
                    }
                    continue;
                }
                m.into_reply().encode(&mut out, client.resp3);
            }
            let written = out.is_empty()
                || write_out(
                    &server,
                    &handle,
                    &mut stream,
                    &mut out,
                    (&mut client.journal_wait, &mut client.journal_written),
                )
                .await
                .is_ok();
            // (An atomic subtraction: skipped for the usual batch, which had nothing pushed.)
            if cost > 0 {
                handle.outbox.written(cost);
            }
            if !written || handle.is_killed() {
                break;
            }
            if close || server.is_shutting_down() {
                break;
            }
            if inbuf.is_empty() {
                // Back to the start of the whole allocation once no argument borrows from it
                // (no copy, never an allocation), so its size is what CLIENT LIST reports.
                let _ = inbuf.try_reclaim(inbuf.capacity() + 1);
            }
            if crate::util::clock::coarse() != qchecked {
                qchecked = crate::util::clock::coarse();
                crate::state::client::resize_query_buffer(&mut inbuf, &mut qpeak, false);
            }
            if inbuf.capacity() > 0 && qtimer.is_none() {
                let t = qtimer.insert(Box::pin(tokio::time::sleep(QUERYBUF_CHECK)));
                arm(t).await;
            }
            if out.capacity() > OUT_KEEP {
                out = BytesMut::new();
                handle.bufs.output(0, 0);
            }
            handle.bufs.input(inbuf.len(), inbuf.capacity());
            if inbuf.len() > server.conn_settings.qbuf_limit.load(Ordering::Relaxed) as usize {
                server
                    .stats
                    .qbuf_limit_disconnections
                    .fetch_add(1, Ordering::Relaxed);
                tracing::warn!(
                    client = handle.id,
                    "closing client that reached max query buffer length"
                );
                break;
            }

            let idle_secs = match server.conn_settings.timeout.load(Ordering::Relaxed) {
                // As in Redis, `timeout` never closes a subscriber or a MONITOR client: they
                // are expected to sit idle. Boxed, only when a timeout is set, and only once
                // the client waits (`idle_timer`): a timer entry in every connection's task
                // would cost each idle connection its size.
                secs if secs > 0
                    && client.subscriptions() == 0
                    && !handle.monitor.load(Ordering::Relaxed) =>
                {
                    secs
                }
                _ => 0,
            };
            let mut idle = None;
            tokio::select! {
                biased;
                    // Input first: when the socket is readable the other futures are not polled
                    // at all. A kill or a shutdown that arrives with input is still seen before
                    // the next command runs: the request loop checks the kill flag before each
                    // command, and the shutdown flag after each batch. Input before pushes also
                    // means a flood of messages cannot keep a subscriber from being heard (every
                    // iteration drains the outbox anyway).
                r = stream.read_into(&mut inbuf) => match r {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        server.stats.net_input_bytes.fetch_add(n as u64, Ordering::Relaxed);
                        let tick = crate::util::clock::coarse();
                        // Stored once a tick: the first read of a tick also counts the
                        // connection as active for read coalescing.
                        let first_in_tick = handle.last_active.load(Ordering::Relaxed) != tick;
                        if first_in_tick {
                            handle.last_active.store(tick, Ordering::Relaxed);
                        }
                        super::coalesce::note_read(tick, first_in_tick);
                        handle.bufs.input(inbuf.len(), inbuf.capacity());
                        qpeak = qpeak.max(inbuf.len());
                    }
                },
                // Killed, pushed to, or shutting down: the loop's own checks tell which.
                _ = handle.attention(&server) => {}
                    _ = timer(&mut qtimer) => {
                    // Re-armed after this iteration while a buffer is still held.
                    qtimer = None;
                    let idle = crate::util::clock::coarse()
                        .wrapping_sub(handle.last_active.load(Ordering::Relaxed)) >= QUERYBUF_IDLE;
                    if crate::state::client::resize_query_buffer(&mut inbuf, &mut qpeak, idle) {
                        handle.bufs.input(inbuf.len(), inbuf.capacity());
                    }
                    if idle && inbuf.is_empty() {
                        // The reply buffer and the argument list go too (kept while the client
                        // is active, so a busy client allocates neither per request): an idle
                        // connection holds no buffer at all. With nothing buffered, the parse
                        // state holds no partial frame.
                        out = BytesMut::new();
                        handle.bufs.rbs.store(0, Ordering::Relaxed);
                        parse_state = ParseState::default();
                    }
                }
                    _ = idle_timer(&mut idle, idle_secs) => break,
            }
        }
        {
            // Leave pub/sub, MONITOR and WATCH so no one keeps pushing to a closed client.
            let mut ctx = Ctx {
                server: &server,
                client: &mut client,
            };
            crate::commands::pubsub::leave_all(&mut ctx);
            crate::commands::transactions::reset_state(&mut ctx);
        }
        server.blocking.forget(handle.id);
        server.tracking.client_closed(handle.id);
        let (_, cost) = handle.outbox.drain();
        handle.outbox.written(cost);
        if !handle.is_killed() {
            let _ = stream.shutdown().await;
        }
        server.clients.unregister(handle.id);
    }
}

/// Resolves when the timer, if there is one, fires: a poll function, which a waiting
/// connection's task holds as one pointer (an `async` block around the timer held more).
/// The timer was polled once when armed ([`arm`]), which left the task's waker with it, and
/// it wakes the task when it fires; until then it is not polled again: a `Sleep`'s poll
/// (about 200 instructions) on every wait of a busy connection was 3% of a GET at
/// pipeline 1, and an elapsed check is a load.
fn timer(
    t: &mut Option<std::pin::Pin<Box<tokio::time::Sleep>>>,
) -> impl Future<Output = ()> + Send + '_ {
    std::future::poll_fn(move |cx| match t.as_mut() {
        Some(t) if t.is_elapsed() => t.as_mut().poll(cx),
        _ => std::task::Poll::Pending,
    })
}

/// Polls a timer just armed once, so that it holds the task's waker and wakes it when it
/// fires (see [`timer`]). Outside the task's cooperative budget, which could refuse the poll
/// and leave the timer without a waker: an idle connection would then keep its buffer.
async fn arm(t: &mut std::pin::Pin<Box<tokio::time::Sleep>>) {
    std::future::poll_fn(|cx| {
        let _ = std::pin::Pin::new(&mut tokio::task::unconstrained(t.as_mut())).poll(cx);
        std::task::Poll::Ready(())
    })
    .await
}

/// Resolves `secs` seconds after its first poll (never when 0): the timer is made only
/// when the connection waits, not when input is already there (the select polls input
/// first).
fn idle_timer(
    t: &mut Option<std::pin::Pin<Box<tokio::time::Sleep>>>,
    secs: u64,
) -> impl Future<Output = ()> + Send + '_ {
    std::future::poll_fn(move |cx| {
        if secs == 0 {
            return std::task::Poll::Pending;
        }
        t.get_or_insert_with(|| Box::pin(tokio::time::sleep(Duration::from_secs(secs))))
            .as_mut()
            .poll(cx)
    })
}

/// The parser's limits for the next request, read from the connection settings' atomics
/// (and per request, so an AUTH earlier in a pipeline lifts the unauthenticated limit for
/// the requests after it).
fn parse_limits(server: &Server, client: &ClientState) -> ParseLimits {
    ParseLimits {
        max_bulk_len: server.conn_settings.max_bulk_len.load(Ordering::Relaxed),
        unauthenticated: !client.authenticated && server.auth_required.load(Ordering::Relaxed),
    }
}

/// Reads what the socket holds into `buf`'s spare capacity. A read that leaves room in the
/// buffer emptied the socket (a stream socket's `recv` returns short only when its queue is
/// empty), so the socket's readiness is cleared there and then: otherwise the next
/// `readable()` would return at once on stale readiness and cost a `recv` that answers
/// `EAGAIN` — one wasted system call per batch, half of all reads at pipeline 16. Clearing
/// goes through `try_io`, whose readiness tick makes it a no-op when new bytes arrived
/// meanwhile, exactly as a real `EAGAIN` would.
fn read_available(stream: &TcpStream, buf: &mut BytesMut) -> std::io::Result<usize> {
    let spare = buf.capacity() - buf.len();
    let mut got = 0;
    let r = stream.try_io(tokio::io::Interest::READABLE, || {
        got = stream.try_read_buf(buf)?;
        if got > 0 && got < spare {
            return Err(std::io::ErrorKind::WouldBlock.into());
        }
        Ok(got)
    });
    match r {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock && got > 0 => Ok(got),
        r => r,
    }
}

/// PSYNC/SYNC: writes what precedes, then serves the replication stream on this socket until
/// the replica goes; CLUSTER SYNCSLOTS: sends the slots to an atomic migration's target.
async fn hand_off<S: ClientStream>(
    server: &Arc<Server>,
    handle: &Arc<ClientHandle>,
    stream: &mut S,
    inbuf: &mut BytesMut,
    out: &mut BytesMut,
    client: &mut ClientState,
    req: crate::state::replication::HandOff,
) {
    if out.is_empty()
        || write_out(
            server,
            handle,
            stream,
            out,
            (&mut client.journal_wait, &mut client.journal_written),
        )
        .await
        .is_ok()
    {
        // The reply buffer is not used while the link streams to the replica: it is given
        // back, so what the link holds is what the replica session allocates.
        *out = BytesMut::new();
        handle.bufs.output(0, 0);
        handle.bufs.rbs.store(0, Ordering::Relaxed);
        match req {
            crate::state::replication::HandOff::Replica(req) => {
                crate::server::replication::serve_replica(server, stream, handle, inbuf, req).await
            }
            crate::state::replication::HandOff::Slots(req) => {
                crate::server::slot_migration::serve_export(server, stream, handle, inbuf, req)
                    .await
            }
        }
    }
}

/// Blocked on keys: what is pending goes out now, the request's reply (into `out`) when it
/// is served, times out or is unblocked; the requests behind it wait, as in Redis. A script
/// handed to the script thread instead keeps the batch's replies for the batch's one write
/// (Redis writes nothing to a script's caller while it runs). None: close the connection.
async fn serve_blocked<S: ClientStream>(
    server: &Arc<Server>,
    handle: &Arc<ClientHandle>,
    stream: &mut S,
    inbuf: &mut BytesMut,
    out: &mut BytesMut,
    client: &mut ClientState,
    blocked: crate::state::blocking::Blocked,
) -> Option<()> {
    if !crate::commands::scripting::take_detached()
        && !out.is_empty()
        && write_out(
            server,
            handle,
            stream,
            out,
            (&mut client.journal_wait, &mut client.journal_written),
        )
        .await
        .is_err()
    {
        return None;
    }
    let id = blocked.id;
    let r = wait_blocked(server, handle, stream, inbuf, blocked).await?;
    crate::commands::stats::unblocked(client, &r);
    match server.blocking.take_owed(id) {
        // Answered by work made for it (a pop served by another client's push, a script on
        // the script thread): the reply waits for that work's own record, which WAITAOF
        // then counts.
        Some(e) => client.journal_ended(e),
        // Anything else (a timeout, a reply of the journal's own): what is journaled so far.
        None => {
            let placed = crate::store::journal::placed();
            if crate::store::journal::wait_on_reply() {
                client.journal_wait = client.journal_wait.max(placed);
            } else {
                client.journal_written = client.journal_written.max(placed);
            }
        }
    }
    r.encode(out, client.resp3);
    Some(())
}

/// Waits for a blocked request's reply: served by another client's write, its timeout, or
/// CLIENT UNBLOCK. Input that arrives meanwhile is kept for later; `None` when the client
/// went away, was killed, or the server is shutting down.
async fn wait_blocked<S: ClientStream>(
    server: &Arc<Server>,
    handle: &ClientHandle,
    stream: &mut S,
    inbuf: &mut BytesMut,
    mut blocked: crate::state::blocking::Blocked,
) -> Option<Reply> {
    let deadline = blocked.deadline;
    let timeout = async move {
        match deadline {
            Some(d) => tokio::time::sleep_until(d.into()).await,
            None => std::future::pending::<()>().await,
        }
    };
    tokio::pin!(timeout);
    let qbuf_limit = server.conn_settings.qbuf_limit.load(Ordering::Relaxed) as usize;
    loop {
        if inbuf.capacity() - inbuf.len() < READ_CHUNK / 4 {
            inbuf.reserve(READ_CHUNK);
        }
        tokio::select! {
            r = &mut blocked.reply => return r.ok(),
            _ = &mut timeout => {
                // Answered with the timeout reply, or by the attempt being made right now.
                server.blocking.unblock(blocked.id, None);
                return blocked.reply.await.ok();
            }
            r = stream.read_buf(inbuf), if inbuf.len() <= qbuf_limit => match r {
                Ok(0) | Err(_) => {
                    server.blocking.forget(blocked.id);
                    return None;
                }
                Ok(n) => {
                    server.stats.net_input_bytes.fetch_add(n as u64, Ordering::Relaxed);
                    handle.bufs.input(inbuf.len(), inbuf.capacity());
                }
            },
            _ = handle.ended(server) => {
                server.blocking.forget(blocked.id);
                return None;
            }
        }
    }
}

/// Serves an EVAL as a Lua debugging session: what is owed goes out first, then the session
/// owns the socket until the script ends, and its reply goes into `out`. Some(true): the
/// connection goes on (the EVAL was refused before its run, or the stream has no plain
/// socket); Some(false): the session ran, close after the reply (Redis's sync mode);
/// None: close now.
async fn debug_session<S: ClientStream>(
    server: &Arc<Server>,
    handle: &Arc<ClientHandle>,
    stream: &mut S,
    inbuf: &mut BytesMut,
    out: &mut BytesMut,
    client: &mut ClientState,
    argv: Vec<bytes::Bytes>,
) -> Option<bool> {
    let Some(sock) = stream.debug_socket() else {
        client.script_debug = false;
        Reply::error("ERR SCRIPT DEBUG is not available over TLS: debug mode turned off")
            .encode(out, client.resp3);
        return Some(true);
    };
    if !out.is_empty()
        && write_out(
            server,
            handle,
            stream,
            out,
            (&mut client.journal_wait, &mut client.journal_written),
        )
        .await
        .is_err()
    {
        return None;
    }
    let pending = inbuf.split().to_vec();
    let state = std::mem::replace(client, ClientState::new(handle.clone(), false));
    let done = crate::commands::scripting::ldb::run(server, state, argv, sock, pending).await?;
    *client = done.client;
    done.reply.encode(out, client.resp3);
    Some(!done.ended)
}

/// Writes `out` unless the client is killed first (a stalled reader must not keep its task,
/// and the memory it holds, alive).
#[allow(clippy::manual_async_fn)] // see the comment on the `async` block
fn write_out<'a, S: ClientStream>(
    server: &'a Server,
    handle: &'a ClientHandle,
    stream: &'a mut S,
    out: &'a mut BytesMut,
    journal: (&'a mut u64, &'a mut u64),
) -> impl Future<Output = std::io::Result<()>> + Send + 'a {
    // An `async` block rather than an `async fn`, whose future would hold its arguments
    // twice, in every connection's task.
    async move {
        // A reply to a write journaled under `appendfsync always` (or with J) leaves only once
        // the journal holds it on disk, and under everysec/no once it is written to the file;
        // no lock is held here, and concurrent writers share the fsync the journal thread makes.
        let (durable, written) = (std::mem::take(journal.0), std::mem::take(journal.1));
        // Boxed, and only when there is something to wait for: the journal's wait would
        // otherwise sit in every connection's task. It waits for the journal thread anyway (a
        // cross-thread wake-up at least), next to which the allocation is noise.
        if durable > 0 {
            Box::pin(crate::store::journal::wait_durable(durable)).await;
        } else if written > 0 {
            Box::pin(crate::store::journal::wait_written(written)).await;
        }
        server
            .stats
            .net_output_bytes
            .fetch_add(out.len() as u64, Ordering::Relaxed);
        handle.bufs.output(out.len(), out.capacity());
        tokio::select! {
            // The write first: it usually completes at once, and then the kill signal is not
            // polled.
            biased;
            r = stream.write_reply(out) => r?,
            _ = handle.killed_signal() => {
                return Err(std::io::Error::new(std::io::ErrorKind::ConnectionAborted, "client killed"));
            }
            // A client that does not read: its output held past the soft limit's seconds
            // closes it (checked once a second while the write waits).
            // Boxed, and only where a limit applies: its timer would otherwise sit in every
            // connection's task.
            _ = async {
                if server.pubsub.output_limit_applies(handle) {
                    Box::pin(over_limit_while_waiting(server, handle, out.len())).await
                } else {
                    std::future::pending::<()>().await
                }
            } => {
                handle.kill();
                return Err(std::io::Error::new(std::io::ErrorKind::ConnectionAborted, "output buffer limit"));
            }
        }
        out.clear();
        handle.bufs.output(0, out.capacity());
        Ok(())
    }
}

/// Resolves once the client's unwritten output (`pending` bytes) has been past its
/// output-buffer limit long enough (see `PubSub::output_over_limit`); never when no limit
/// applies.
async fn over_limit_while_waiting(server: &Server, handle: &ClientHandle, pending: usize) {
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        if server.pubsub.output_over_limit(handle, pending) {
            return;
        }
    }
}

/// The size of what `f` returns: for an `async fn`, its future.
fn output_size<A, B, C, R>(_: fn(A, B, C) -> R) -> usize {
    std::mem::size_of::<R>()
}

/// What every connection holds however idle it is: its task's future (plain, TLS), its
/// shared handle and its state (in the future), in bytes. Logged at start (debug level),
/// so a release build's figures can be read without a test build.
pub fn footprint() -> (usize, usize, usize, usize) {
    (
        output_size(serve::<TcpStream>),
        output_size(serve::<tokio_rustls::server::TlsStream<TcpStream>>),
        std::mem::size_of::<ClientHandle>(),
        std::mem::size_of::<ClientState>(),
    )
}

#[cfg(test)]
mod size_tests {
    use super::*;

    /// The size of what `f` returns: for an `async fn`, its future.
    fn output_size5<A, B, C, D, E, R>(_: fn(A, B, C, D, E) -> R) -> usize {
        std::mem::size_of::<R>()
    }

    /// What an idle connection's task holds stays small. tokio allocates a task as its
    /// future plus 112 bytes (header, scheduler, id, trailer), 128-byte aligned: a future
    /// of at most 656 bytes keeps the task in mimalloc's 768-byte class. The future was
    /// 944 bytes in a release build (960 in a debug one), a 1,280-byte task: what it held
    /// then, and where it went, is in the comments of `serve`, `read_into`, `write_reply`,
    /// `write_out` and `timer` (608 bytes in a debug build when this was written). What
    /// this guards is the rare paths' state moving back into every task.
    #[test]
    fn the_connection_task_and_state_stay_small() {
        let (plain, _tls, handle, state) = footprint();
        let write = output_size5(write_out::<TcpStream>);
        eprintln!(
            "task future {plain}, handle {handle}, state {state}, write_out {write}, wait_blocked {}",
            output_size5(wait_blocked::<TcpStream>),
        );
        let task = (plain + 112).next_multiple_of(128);
        assert!(
            task <= 768,
            "connection future {plain} bytes: a {task}-byte task"
        );
        assert!(state <= 240, "client state {state} bytes");
        // The journal's waits are boxed: they were 240 bytes in every write's future.
        // And the arguments are no longer held twice: 184 bytes before. The output-limit
        // watch (boxed, allocated only where a limit applies) adds its references: 160.
        assert!(write <= 160, "write_out future {write} bytes");
    }
}
