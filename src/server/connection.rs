//! One connection: read bytes, execute every complete request in the buffer, write all the
//! replies of that batch with one write, repeat. No shard lock is held across an `.await`:
//! commands run synchronously between reads and writes.

use crate::commands::{dispatch, Ctx};
use crate::protocol::{parse_request, ParseLimits, ParseState, Reply};
use crate::server::client::{ClientHandle, ClientState, ReplyMode};
use crate::server::Server;
use bytes::BytesMut;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Replies are written out once this much is pending, even mid-batch, so one huge pipeline
/// does not hold all its replies in memory.
const FLUSH_AT: usize = 1 << 20;
const READ_CHUNK: usize = 16 * 1024;

pub async fn serve(server: Arc<Server>, mut stream: TcpStream, handle: Arc<ClientHandle>) {
    let _ = stream.set_nodelay(true);
    let authenticated = !server.auth_required.load(Ordering::Relaxed);
    let mut client = ClientState::new(handle.clone(), authenticated);
    let mut inbuf = BytesMut::with_capacity(READ_CHUNK);
    let mut out = BytesMut::with_capacity(READ_CHUNK);
    let mut parse_state = ParseState::default();
    let mut shutdown = server.shutdown_signal();

    'conn: loop {
        let (limits, qbuf_limit, idle_timeout) = {
            let cfg = server.config.read();
            let limits = ParseLimits {
                max_bulk_len: cfg.get_u64("proto-max-bulk-len"),
                unauthenticated: !client.authenticated
                    && server.auth_required.load(Ordering::Relaxed),
            };
            (
                limits,
                cfg.get_u64("client-query-buffer-limit") as usize,
                cfg.get_u64("timeout"),
            )
        };

        // Execute every complete request already buffered.
        let mut close = false;
        loop {
            match parse_request(&mut inbuf, &mut parse_state, limits) {
                Ok(Some(args)) => {
                    // CLIENT KILL sets the flag before it replies, so once the killer has its
                    // answer, nothing more of this client's runs.
                    if handle.killed.load(Ordering::Acquire) {
                        close = true;
                        break;
                    }
                    let skip_this = client.reply_mode == ReplyMode::Skip;
                    let reply = {
                        let mut ctx = Ctx {
                            server: &server,
                            client: &mut client,
                        };
                        dispatch(&mut ctx, &args)
                    };
                    if skip_this && client.reply_mode == ReplyMode::Skip {
                        client.reply_mode = ReplyMode::On;
                    } else if client.reply_mode != ReplyMode::Off || matches!(reply, Reply::Push(_))
                    {
                        reply.encode(&mut out, client.resp3);
                    }
                    if client.close_after_reply || handle.killed.load(Ordering::Relaxed) {
                        close = true;
                        break;
                    }
                    if out.len() >= FLUSH_AT
                        && write_out(&server, &mut stream, &mut out).await.is_err()
                    {
                        break 'conn;
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    tracing::debug!(client = handle.id, "protocol error: {}", e.0);
                    Reply::Error(e.0).encode(&mut out, client.resp3);
                    close = true;
                    break;
                }
            }
        }
        if !out.is_empty() && write_out(&server, &mut stream, &mut out).await.is_err() {
            break;
        }
        if close || server.is_shutting_down() {
            break;
        }
        if inbuf.len() > qbuf_limit {
            tracing::warn!(
                client = handle.id,
                "closing client that reached max query buffer length"
            );
            break;
        }

        if inbuf.capacity() - inbuf.len() < READ_CHUNK / 4 {
            inbuf.reserve(READ_CHUNK);
        }
        let idle = async {
            if idle_timeout == 0 {
                std::future::pending::<()>().await
            } else {
                tokio::time::sleep(Duration::from_secs(idle_timeout)).await
            }
        };
        tokio::select! {
            biased;
            _ = handle.kill_notify.notified() => break,
            r = stream.read_buf(&mut inbuf) => match r {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    server.stats.net_input_bytes.fetch_add(n as u64, Ordering::Relaxed);
                    handle.last_active.store(server.started.elapsed().as_secs(), Ordering::Relaxed);
                }
            },
            _ = shutdown.changed() => break,
            _ = idle => break,
        }
    }
    let _ = stream.shutdown().await;
    server.clients.unregister(handle.id);
}

async fn write_out(
    server: &Server,
    stream: &mut TcpStream,
    out: &mut BytesMut,
) -> std::io::Result<()> {
    server
        .stats
        .net_output_bytes
        .fetch_add(out.len() as u64, Ordering::Relaxed);
    stream.write_all(out).await?;
    out.clear();
    Ok(())
}
