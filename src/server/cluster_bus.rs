//! The cluster bus's sockets and schedule: the bus port's listener, one task per link
//! (reading frames into `state::cluster`, writing what the state queues), and the cron that
//! runs ten times a second (Redis's `clusterCron`), opening the connections it asks for.

use crate::protocol::cluster_bus as wire;
use crate::protocol::Reply;
use crate::state::cluster::{Cluster, ClusterState, Connect};
use crate::state::Server;
use bytes::BytesMut;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

/// Binds the bus port on the `bind` addresses: an error stops the start, as Redis's
/// "Failed listening on port … (cluster)".
pub async fn bind(server: &Server, cport: u16) -> std::io::Result<Vec<TcpListener>> {
    let (bind, backlog) = {
        let cfg = server.config.read();
        (cfg.get("bind").to_string(), cfg.get_u64("tcp-backlog"))
    };
    let backlog = u32::try_from(backlog).unwrap_or(u32::MAX);
    let (sockets, _) = crate::server::listener::bind_addresses(&bind, cport, backlog).await?;
    Ok(sockets)
}

/// Starts accepting on the bus listeners and the cron.
pub fn start(server: &Arc<Server>, listeners: Vec<TcpListener>) {
    crate::server::slot_migration::start(server);
    for l in listeners {
        let s = server.clone();
        tokio::spawn(async move {
            let mut stop = s.shutdown_signal();
            loop {
                tokio::select! {
                    r = l.accept() => match r {
                        Ok((sock, peer)) => {
                            let _ = sock.set_nodelay(true);
                            let local = sock.local_addr().map(|a| a.ip().to_string()).unwrap_or_default();
                            let Some(c) = s.cluster.get() else { return };
                            let now = crate::util::clock::now_ms();
                            let (id, rx, pending) =
                                c.with(|st| st.accept(ip_text(peer.ip()), local, now));
                            spawn_link(&s, id, sock, rx, pending);
                        }
                        Err(e) => {
                            tracing::debug!("cluster bus accept: {e}");
                            tokio::time::sleep(Duration::from_millis(10)).await;
                        }
                    },
                    _ = stop.changed() => return,
                }
            }
        });
    }
    let s = server.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        while !s.is_shutting_down() {
            tick.tick().await;
            s.thawed().await;
            let Some(c) = s.cluster.get() else { return };
            let now = crate::util::clock::now_ms();
            let offset = crate::state::cluster::my_offset();
            c.with(|st| {
                st.my_repl_offset = offset;
                st.cron(now);
            });
            after(&s, c);
            for (id, route) in c.blocked_redirects(&s.blocking.waiting_keys()) {
                s.blocking
                    .unblock(id, Some(Reply::error(route.error_text())));
            }
        }
    });
}

/// IPv4-mapped IPv6 peers are shown as IPv4, as Redis does.
fn ip_text(ip: std::net::IpAddr) -> String {
    match ip {
        std::net::IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => v6.to_string(),
        },
        v4 => v4.to_string(),
    }
}

/// What follows any change of the state: its effects (log lines, deliveries, replication),
/// the connections to open.
fn after(server: &Arc<Server>, c: &Cluster) {
    crate::commands::cluster::apply_effects(server, c);
    for conn in c.take_connects() {
        spawn_connect(server, conn);
    }
}

fn spawn_connect(server: &Arc<Server>, conn: Connect) {
    let s = server.clone();
    tokio::spawn(async move {
        let Connect {
            link,
            ip,
            port,
            rx,
            pending,
        } = conn;
        let timeout = {
            let t = s.config.read().get_u64("cluster-node-timeout");
            Duration::from_millis(t.clamp(100, 10_000))
        };
        let addr = if ip.contains(':') {
            format!("[{ip}]:{port}")
        } else {
            format!("{ip}:{port}")
        };
        let Some(c) = s.cluster.get() else { return };
        match tokio::time::timeout(timeout, TcpStream::connect(&addr)).await {
            Ok(Ok(sock)) => {
                let _ = sock.set_nodelay(true);
                let peer = sock
                    .peer_addr()
                    .map(|a| ip_text(a.ip()))
                    .unwrap_or_default();
                let local = sock
                    .local_addr()
                    .map(|a| ip_text(a.ip()))
                    .unwrap_or_default();
                let now = crate::util::clock::now_ms();
                let offset = crate::state::cluster::my_offset();
                c.with(|st| {
                    st.my_repl_offset = offset;
                    st.connected(link, peer, local, now)
                });
                spawn_link(&s, link, sock, rx, pending);
            }
            _ => {
                tracing::debug!("Unable to connect to Cluster Node [{ip}]:{port}");
                c.with(|st| st.link_lost(link));
            }
        }
        after(&s, c);
    });
}

/// One link's task: frames read go to the state; what the state queues is written. The
/// task ends when the peer closes, on an I/O or framing error, or when the state drops the
/// link (its sender closes).
fn spawn_link(
    server: &Arc<Server>,
    link: u64,
    sock: TcpStream,
    mut rx: mpsc::UnboundedReceiver<Vec<u8>>,
    pending: Arc<AtomicUsize>,
) {
    let s = server.clone();
    tokio::spawn(async move {
        let (mut rd, mut wr) = sock.into_split();
        let mut buf = BytesMut::with_capacity(wire::HEADER_LEN * 2);
        let mut stop = s.shutdown_signal();
        let reason = loop {
            tokio::select! {
                r = rd.read_buf(&mut buf) => match r {
                    Ok(0) => break "connection closed",
                    Err(_) => break "I/O error",
                    Ok(_) => {
                        // Held still by DEBUG SLEEP: the frames wait, as in Redis's socket.
                        s.thawed().await;
                        if !drain_frames(&s, link, &mut buf) {
                            break "link freed";
                        }
                    }
                },
                out = rx.recv() => match out {
                    Some(bytes) => {
                        let n = bytes.len();
                        let r = wr.write_all(&bytes).await;
                        pending.fetch_sub(n, Ordering::Relaxed);
                        if r.is_err() {
                            break "I/O error";
                        }
                    }
                    None => break "link freed",
                },
                _ = stop.changed() => break "shutdown",
            }
        };
        tracing::debug!("cluster link {link} closed: {reason}");
        if reason != "link freed" {
            if let Some(c) = s.cluster.get() {
                c.with(|st| st.link_lost(link));
                after(&s, c);
            }
        }
    });
}

/// Processes every complete frame in `buf`; false when the link must close.
fn drain_frames(server: &Arc<Server>, link: u64, buf: &mut BytesMut) -> bool {
    let Some(c) = server.cluster.get() else {
        return false;
    };
    loop {
        let len = match wire::frame_len(buf) {
            Ok(Some(n)) => n,
            Ok(None) => return true,
            Err(e) => {
                tracing::debug!("cluster bus: closing link on a bad frame: {e}");
                return false;
            }
        };
        if buf.len() < len {
            buf.reserve(len - buf.len());
            return true;
        }
        let frame = buf.split_to(len);
        let msg = match wire::decode(&frame) {
            Ok((m, _)) => m,
            // A message Redis ignores (another protocol version, a length that does not
            // match its type) is dropped and the link kept.
            Err(e) => {
                tracing::debug!("cluster bus: dropped a message: {e}");
                continue;
            }
        };
        let now = crate::util::clock::now_ms();
        let offset = crate::state::cluster::my_offset();
        let store = &server.store;
        let keep = c.with(|st: &mut ClusterState| {
            st.my_repl_offset = offset;
            st.process(link, msg, now, &|slot| count_keys_in_slot(store, slot))
        });
        after(server, c);
        if !keep {
            return false;
        }
    }
}

/// Keys and collections of database 0 in `slot` (CLUSTER COUNTKEYSINSLOT and the slot
/// checks of the bus).
pub fn count_keys_in_slot(store: &crate::store::Store, slot: u16) -> usize {
    crate::commands::cluster::count_names_in_slot(store, slot)
}
