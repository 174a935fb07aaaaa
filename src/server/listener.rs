//! Binding, accepting, admission (maxclients, protected mode) and graceful shutdown.

use crate::server::connection;
use crate::state::Server;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

/// Binds every address of `bind` on `port`. An address with a leading `-` is skipped when it
/// cannot be bound (as Redis does for `-::1` on hosts without IPv6).
pub async fn bind(server: &Server) -> std::io::Result<Vec<TcpListener>> {
    let (bind, mut port) = {
        let cfg = server.config.read();
        (cfg.get("bind").to_string(), cfg.get_i64("port") as u16)
    };
    let mut listeners = Vec::new();
    for word in bind.split_whitespace() {
        let (optional, addr) = match word.strip_prefix('-') {
            Some(a) => (true, a),
            None => (false, word),
        };
        let ip: IpAddr = match addr.parse() {
            Ok(ip) => ip,
            Err(_) if addr == "*" => IpAddr::from([0, 0, 0, 0]),
            Err(_) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!("bad bind address '{addr}'"),
                ))
            }
        };
        match TcpListener::bind(SocketAddr::new(ip, port)).await {
            Ok(l) => {
                if port == 0 {
                    port = l.local_addr()?.port();
                }
                listeners.push(l);
            }
            Err(e) if optional => tracing::debug!("skipping optional bind address {addr}: {e}"),
            Err(e) => {
                return Err(std::io::Error::new(
                    e.kind(),
                    format!(
                        "Could not create server TCP listening socket {addr}:{port}: bind: {e}"
                    ),
                ))
            }
        }
    }
    if listeners.is_empty() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::AddrNotAvailable,
            "no address could be bound",
        ));
    }
    server.port.store(port as u64, Ordering::Relaxed);
    Ok(listeners)
}

/// Accepts clients until shutdown, then waits (briefly) for connections to finish their
/// in-flight replies.
pub async fn run(server: Arc<Server>, listeners: Vec<TcpListener>) {
    let mut conns = JoinSet::new();
    let mut accepts = JoinSet::new();
    let (tx, mut rx) = tokio::sync::mpsc::channel::<(TcpStream, SocketAddr, SocketAddr)>(1024);
    for l in listeners {
        let tx = tx.clone();
        let mut stop = server.shutdown_signal();
        accepts.spawn(async move {
            loop {
                tokio::select! {
                    r = l.accept() => match r {
                        Ok((s, peer)) => {
                            let local = s.local_addr().unwrap_or(peer);
                            if tx.send((s, peer, local)).await.is_err() {
                                return;
                            }
                        }
                        // Out of descriptors and the like: back off instead of spinning.
                        Err(e) => {
                            tracing::warn!("accept failed: {e}");
                            tokio::time::sleep(Duration::from_millis(50)).await;
                        }
                    },
                    _ = stop.changed() => return,
                }
            }
        });
    }
    drop(tx);
    let mut stop = server.shutdown_signal();
    loop {
        tokio::select! {
            Some((stream, peer, local)) = rx.recv() => {
                admit(&server, stream, peer, local, &mut conns).await;
            }
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
            _ = stop.changed() => break,
            else => break,
        }
    }
    accepts.abort_all();
    // Connections notice the shutdown signal themselves after their current batch.
    let _ = tokio::time::timeout(Duration::from_secs(5), async {
        while conns.join_next().await.is_some() {}
    })
    .await;
}

async fn admit(
    server: &Arc<Server>,
    mut stream: TcpStream,
    peer: SocketAddr,
    local: SocketAddr,
    conns: &mut JoinSet<()>,
) {
    server
        .stats
        .connections_received
        .fetch_add(1, Ordering::Relaxed);
    let (maxclients, protected) = {
        let cfg = server.config.read();
        (
            cfg.get_i64("maxclients") as usize,
            // No password for the default user (requirepass or ACL), as Redis 7 decides.
            cfg.get_bool("protected-mode") && server.acl.default_user().nopass,
        )
    };
    let refusal: Option<&[u8]> = if server.clients.count() >= maxclients {
        Some(b"-ERR max number of clients reached\r\n")
    } else if protected && !peer.ip().is_loopback() {
        Some(
            b"-DENIED tidecache is running in protected mode because protected mode is enabled and no password is set for the default user. Connect from the loopback interface, or set requirepass, or disable protected-mode.\r\n",
        )
    } else {
        None
    };
    if let Some(msg) = refusal {
        server
            .stats
            .rejected_connections
            .fetch_add(1, Ordering::Relaxed);
        let _ = stream.write_all(msg).await;
        return;
    }
    let handle = server.clients.register(peer, local);
    conns.spawn(connection::serve(server.clone(), stream, handle));
}
