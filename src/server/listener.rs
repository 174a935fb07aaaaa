//! Binding, accepting, admission (maxclients, protected mode), the TLS handshake and
//! graceful shutdown.

use crate::config::tls::ClientAuth;
use crate::server::connection::{self, ClientStream};
use crate::state::client::ClientHandle;
use crate::state::Server;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

/// A TLS client that has not finished its handshake by then is dropped, so a stalled or
/// slow peer holds a task and a socket for a bounded time (it never holds up other accepts:
/// each handshake runs in its connection's own task).
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// A bound socket and whether it speaks TLS (`tls-port`) or plain RESP (`port`).
pub struct Listener {
    socket: Socket,
    tls: bool,
}

/// A listening socket: TCP (plain or TLS), or the Unix socket (`unixsocket`).
enum Socket {
    Tcp(TcpListener),
    Unix(tokio::net::UnixListener),
}

/// Binds `port` (plain) and `tls-port` (TLS) on every address of `bind`, after loading the
/// TLS certificates so a server with bad ones does not start. As in Redis, `port 0` with a
/// `tls-port` means TLS only; `port 0` alone picks a free port. INFO's `tcp_port` is the
/// plain port, or the TLS port when there is no plain one (as Redis).
pub async fn bind(server: &Server) -> std::io::Result<Vec<Listener>> {
    let (port, tls_port) = {
        let cfg = server.config.read();
        (cfg.get_i64("port") as u16, cfg.get_i64("tls-port") as u16)
    };
    let mut listeners = Vec::new();
    if tls_port != 0 || server.config.read().get_bool("tls-replication") {
        let cfg = server.config.read().clone();
        server.tls.reload(&cfg).map_err(|e| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("Failed to configure TLS: {e}"),
            )
        })?;
    }
    let mut bound = 0;
    if port != 0 || tls_port == 0 {
        bound = bind_port(server, port, false, &mut listeners).await?;
    }
    if tls_port != 0 {
        bind_port(server, tls_port, true, &mut listeners).await?;
        tracing::info!("accepting TLS connections on port {tls_port}");
        if bound == 0 {
            bound = tls_port;
        }
    }
    server.port.store(bound as u64, Ordering::Relaxed);
    if let Some(l) = bind_unix(server)? {
        listeners.push(Listener {
            socket: Socket::Unix(l),
            tls: false,
        });
    }
    Ok(listeners)
}

/// `unixsocket`: a file already at the path is replaced (Redis unlinks it first), and
/// `unixsocketperm` applied; a path that cannot be bound stops the start, as in Redis.
fn bind_unix(server: &Server) -> std::io::Result<Option<tokio::net::UnixListener>> {
    let (path, perm) = {
        let cfg = server.config.read();
        (
            cfg.get("unixsocket").to_string(),
            u32::from_str_radix(cfg.get("unixsocketperm"), 8).unwrap_or(0),
        )
    };
    if path.is_empty() {
        return Ok(None);
    }
    let _ = std::fs::remove_file(&path);
    let l = tokio::net::UnixListener::bind(&path)
        .map_err(|e| std::io::Error::new(e.kind(), format!("Failed opening Unix socket: {e}")))?;
    if perm != 0 {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(perm))?;
    }
    tracing::info!("The server is now ready to accept connections at {path}");
    Ok(Some(l))
}

/// Binds every address of `bind` on `port` for the RESP listeners.
async fn bind_port(
    server: &Server,
    port: u16,
    tls: bool,
    listeners: &mut Vec<Listener>,
) -> std::io::Result<u16> {
    let (bind, backlog) = {
        let cfg = server.config.read();
        (cfg.get("bind").to_string(), cfg.get_u64("tcp-backlog"))
    };
    let backlog = u32::try_from(backlog).unwrap_or(u32::MAX);
    let (sockets, port) = bind_addresses(&bind, port, backlog).await?;
    listeners.extend(sockets.into_iter().map(|socket| Listener {
        socket: Socket::Tcp(socket),
        tls,
    }));
    Ok(port)
}

/// Binds every address of `bind` (space-separated, as the `bind` setting) on `port` (0: a
/// free port, the same on every address). An address with a leading `-` is skipped when it
/// cannot be bound (as Redis does for `-::1` on hosts without IPv6). Returns the sockets
/// and the port bound. The admin port binds `admin-bind` with it too.
pub(crate) async fn bind_addresses(
    bind: &str,
    port: u16,
    backlog: u32,
) -> std::io::Result<(Vec<TcpListener>, u16)> {
    let (sockets, port) = bind_std(bind, port, backlog)?;
    let listeners = sockets
        .into_iter()
        .map(TcpListener::from_std)
        .collect::<std::io::Result<Vec<_>>>()?;
    Ok((listeners, port))
}

/// `bind_addresses` without a runtime: the sockets, non-blocking, for the runtime to take.
/// `CONFIG SET port` binds with it inside a command, which must not await.
fn bind_std(
    bind: &str,
    mut port: u16,
    backlog: u32,
) -> std::io::Result<(Vec<std::net::TcpListener>, u16)> {
    let mut listeners = Vec::new();
    for word in bind.split_whitespace() {
        let (optional, addr) = match word.strip_prefix('-') {
            Some(a) => (true, a),
            None => (false, word),
        };
        let ip: IpAddr = match addr.parse() {
            Ok(ip) => ip,
            // Redis's wildcards: every IPv4 address, every IPv6 address.
            Err(_) if addr == "*" => IpAddr::from([0, 0, 0, 0]),
            Err(_) if addr == "::*" => IpAddr::from([0u16; 8]),
            Err(_) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!("bad bind address '{addr}'"),
                ))
            }
        };
        match listen(SocketAddr::new(ip, port), backlog) {
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
    Ok((listeners, port))
}

/// One listening socket with `backlog` (`tcp-backlog`), SO_REUSEADDR as tokio's own
/// `TcpListener::bind` sets it, non-blocking for the runtime.
fn listen(addr: SocketAddr, backlog: u32) -> std::io::Result<std::net::TcpListener> {
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )?;
    socket.set_reuse_address(true)?;
    // IPv6 sockets take IPv6 only, as Redis's do: `* ::*` binds both wildcards on one port.
    if addr.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    socket.bind(&addr.into())?;
    socket.listen(i32::try_from(backlog).unwrap_or(i32::MAX))?;
    socket.set_nonblocking(true)?;
    Ok(socket.into())
}

/// What `CONFIG SET port`/`tls-port` hands the accept loop: the kind of listener and its
/// new sockets (none: close that kind).
type Swap = (bool, Vec<std::net::TcpListener>);

/// The hook `Server::rebind` calls: binds at once (so the command can answer an error and
/// change nothing), then passes the sockets to the accept loop, which closes the old ones.
fn install_rebind(server: &Arc<Server>, swaps: tokio::sync::mpsc::UnboundedSender<Swap>) {
    let weak = Arc::downgrade(server);
    let hook = move |tls: bool, port: u16| -> Result<(), String> {
        let server = weak.upgrade().ok_or("the server is stopping")?;
        let (bind, backlog, other) = {
            let cfg = server.config.read();
            let other = cfg.get_i64(if tls { "port" } else { "tls-port" }) as u16;
            (
                cfg.get("bind").to_string(),
                u32::try_from(cfg.get_u64("tcp-backlog")).unwrap_or(u32::MAX),
                other,
            )
        };
        let sockets = if port == 0 {
            Vec::new()
        } else {
            bind_std(&bind, port, backlog).map_err(|e| e.to_string())?.0
        };
        swaps
            .send((tls, sockets))
            .map_err(|_| "the server is stopping".to_string())?;
        // INFO's tcp_port: the plain port, or the TLS one when there is no plain one.
        let plain = if tls { other } else { port };
        let shown = if plain != 0 {
            plain
        } else if tls {
            port
        } else {
            other
        };
        server.port.store(u64::from(shown), Ordering::Relaxed);
        if tls && port != 0 {
            tracing::info!("accepting TLS connections on port {port}");
        } else if port != 0 {
            tracing::info!("accepting connections on port {port}");
        }
        Ok(())
    };
    let _ = server.rebind.set(Box::new(hook));
}

/// Spawns the loop accepting on one listening socket, handing its clients to `tx`.
fn spawn_accept(
    server: &Server,
    accepts: &mut JoinSet<()>,
    l: TcpListener,
    tls: bool,
    tx: tokio::sync::mpsc::Sender<Accepted>,
) -> tokio::task::AbortHandle {
    let mut stop = server.shutdown_signal();
    let l = Registered::new(l);
    accepts.spawn(async move {
        loop {
            tokio::select! {
                r = l.socket.accept() => match r {
                    Ok((stream, peer)) => {
                        let local = stream.local_addr().unwrap_or(peer);
                        let a = Accepted { stream, peer, local, tls };
                        if tx.send(a).await.is_err() {
                            return;
                        }
                    }
                    // Shut by `state::listeners::close_all` (the shutdown): it never
                    // listens again.
                    Err(e) if e.raw_os_error() == Some(libc::EINVAL) => return,
                    // Out of descriptors and the like: back off instead of spinning.
                    Err(e) => {
                        tracing::warn!("accept failed: {e}");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                },
                _ = stop.changed() => return,
            }
        }
    })
}

/// The Unix socket's accept loop: its clients are admitted at once, as local ones
/// (protected mode does not apply to them, as in Redis).
fn spawn_accept_unix(server: &Arc<Server>, accepts: &mut JoinSet<()>, l: tokio::net::UnixListener) {
    let mut stop = server.shutdown_signal();
    let fd = l.as_raw_fd();
    crate::state::listeners::register(fd);
    let server = server.clone();
    accepts.spawn(async move {
        loop {
            tokio::select! {
                r = l.accept() => match r {
                    Ok((stream, _)) => admit_unix(&server, stream).await,
                    Err(e) if e.raw_os_error() == Some(libc::EINVAL) => break,
                    Err(e) => {
                        tracing::warn!("accept failed: {e}");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                },
                _ = stop.changed() => break,
            }
        }
        crate::state::listeners::unregister(fd);
    });
}

async fn admit_unix(server: &Arc<Server>, mut stream: tokio::net::UnixStream) {
    server
        .stats
        .connections_received
        .fetch_add(1, Ordering::Relaxed);
    let maxclients = server.config.read().get_i64("maxclients") as usize;
    if server.clients.count() >= maxclients {
        server
            .stats
            .rejected_connections
            .fetch_add(1, Ordering::Relaxed);
        let _ = stream
            .write_all(b"-ERR max number of clients reached\r\n")
            .await;
        return;
    }
    let fd = std::os::fd::AsRawFd::as_raw_fd(&stream);
    let unix = crate::state::client::UNIX_LADDR;
    let handle = server.clients.register(unix, unix);
    handle.fd.store(fd, Ordering::Relaxed);
    tokio::spawn(connection::serve(server.clone(), stream, handle));
}

/// A listening socket known to `state::listeners` (so a shutdown stops it at once) for as
/// long as it is open: it leaves the list before the socket is closed.
struct Registered {
    socket: TcpListener,
}

impl Registered {
    fn new(socket: TcpListener) -> Registered {
        crate::state::listeners::register(socket.as_raw_fd());
        Registered { socket }
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        crate::state::listeners::unregister(self.socket.as_raw_fd());
    }
}

/// An accepted socket on its way to admission.
struct Accepted {
    stream: TcpStream,
    peer: SocketAddr,
    local: SocketAddr,
    tls: bool,
}

/// Accepts clients until shutdown, then waits (briefly) for connections to finish their
/// in-flight replies.
pub async fn run(server: Arc<Server>, listeners: Vec<Listener>) {
    let (plain, tls, handle, state) = connection::footprint();
    tracing::debug!(
        "per connection: task future {plain} bytes ({tls} over TLS), client handle {handle}, client state {state}"
    );
    let mut accepts = JoinSet::new();
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Accepted>(1024);
    // The accept loops in force, with their kind (TLS or not), so a rebind stops the old
    // ones of its kind: their sockets close as their tasks end.
    let mut loops = Vec::new();
    let mut unix_path = None;
    for Listener { socket, tls } in listeners {
        match socket {
            Socket::Tcp(socket) => loops.push((
                tls,
                spawn_accept(&server, &mut accepts, socket, tls, tx.clone()),
            )),
            Socket::Unix(socket) => {
                unix_path = Some(server.config.read().get("unixsocket").to_string());
                spawn_accept_unix(&server, &mut accepts, socket);
            }
        }
    }
    let (swap_tx, mut swaps) = tokio::sync::mpsc::unbounded_channel::<Swap>();
    install_rebind(&server, swap_tx);
    let mut stop = server.shutdown_signal();
    loop {
        tokio::select! {
            Some(a) = rx.recv() => admit(&server, a).await,
            Some((tls, sockets)) = swaps.recv() => {
                loops.retain(|(kind, h): &(bool, tokio::task::AbortHandle)| {
                    if *kind == tls {
                        h.abort();
                    }
                    *kind != tls
                });
                for s in sockets {
                    match TcpListener::from_std(s) {
                        Ok(l) => loops.push((tls, spawn_accept(&server, &mut accepts, l, tls, tx.clone()))),
                        Err(e) => tracing::warn!("could not listen on the new port: {e}"),
                    }
                }
                // Ended loops leave their results here; collect them.
                while accepts.try_join_next().is_some() {}
            }
            _ = stop.changed() => break,
            else => break,
        }
    }
    accepts.abort_all();
    // Redis removes its socket file at shutdown.
    if let Some(p) = unix_path {
        let _ = std::fs::remove_file(p);
    }
    // Connections notice the shutdown signal themselves after their current batch. They
    // are spawned detached (a `JoinSet` would keep an entry for each), so this polls their
    // count; what is still running after 5 seconds ends with the runtime.
    let _ = tokio::time::timeout(Duration::from_secs(5), async {
        while connection::running() > 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
}

async fn admit(server: &Arc<Server>, a: Accepted) {
    let Accepted {
        mut stream,
        peer,
        local,
        tls,
    } = a;
    server
        .stats
        .connections_received
        .fetch_add(1, Ordering::Relaxed);
    let _ = stream.set_nodelay(true);
    set_keepalive(&stream, server.config.read().get_u64("tcp-keepalive"));
    // CLIENT LIST's `fd`: the descriptor stays the connection's until it closes.
    let fd = std::os::fd::AsRawFd::as_raw_fd(&stream);
    let (maxclients, protected, auth) = {
        let cfg = server.config.read();
        (
            cfg.get_i64("maxclients") as usize,
            // No password for the default user (requirepass or ACL), as Redis 7 decides.
            cfg.get_bool("protected-mode") && server.acl.default_user().nopass,
            ClientAuth::from_setting(cfg.get("tls-auth-clients")),
        )
    };
    let refusal: Option<&'static [u8]> = if server.clients.count() >= maxclients {
        Some(b"-ERR max number of clients reached\r\n")
    } else if protected && !peer.ip().is_loopback() {
        Some(
            b"-DENIED tidecache is running in protected mode because protected mode is enabled and no password is set for the default user. Connect from the loopback interface, or set requirepass, or disable protected-mode.\r\n",
        )
    } else {
        None
    };
    if refusal.is_some() {
        server
            .stats
            .rejected_connections
            .fetch_add(1, Ordering::Relaxed);
    }
    if !tls {
        if let Some(msg) = refusal {
            let _ = stream.write_all(msg).await;
            return;
        }
        let handle = server.clients.register(peer, local);
        handle.fd.store(fd, Ordering::Relaxed);
        tokio::spawn(connection::serve(server.clone(), stream, handle));
        return;
    }
    let Some(config) = server.tls.server_config(auth) else {
        // tls-auth-clients asks for client certificates and no CA is configured to check
        // them against (CONFIG SET refuses that, a config file can still say it).
        tracing::warn!(
            "TLS client {peer} refused: tls-auth-clients needs tls-ca-cert-file or tls-ca-cert-dir"
        );
        return;
    };
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    // Registered before the handshake, as Redis creates the client before its TLS accept:
    // a client in its handshake counts against maxclients and shows in CLIENT LIST.
    let handle = refusal.is_none().then(|| {
        let h = server.clients.register(peer, local);
        h.fd.store(fd, Ordering::Relaxed);
        h
    });
    let server = server.clone();
    tokio::spawn(async move {
        let mut stop = server.shutdown_signal();
        let shake = tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake(acceptor, stream));
        let stream = tokio::select! {
            r = shake => match r {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => {
                    tracing::debug!("TLS handshake with {peer} failed: {e}");
                    return unregister(&server, handle);
                }
                Err(_) => {
                    tracing::debug!("TLS handshake with {peer} timed out");
                    return unregister(&server, handle);
                }
            },
            _ = stop.changed() => return unregister(&server, handle),
        };
        match (handle, refusal) {
            (Some(handle), None) => connection::serve(server, stream, handle).await,
            (_, msg) => refuse(stream, msg.unwrap_or_default()).await,
        }
    });
}

/// The TLS handshake. A peer whose first byte does not start a TLS handshake record (a
/// plain RESP client on the TLS port) is closed without a TLS alert, as Redis's OpenSSL
/// does: the client sees the connection end rather than bytes it would take for a reply.
async fn handshake(
    acceptor: tokio_rustls::TlsAcceptor,
    stream: TcpStream,
) -> std::io::Result<tokio_rustls::server::TlsStream<TcpStream>> {
    const HANDSHAKE_RECORD: u8 = 0x16;
    let mut first = [0u8; 1];
    if stream.peek(&mut first).await? == 0 || first[0] != HANDSHAKE_RECORD {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "not a TLS client",
        ));
    }
    acceptor.accept(stream).await
}

fn unregister(server: &Server, handle: Option<Arc<ClientHandle>>) {
    if let Some(h) = handle {
        server.clients.unregister(h.id);
    }
}

/// Tells a client why it is turned away (after the handshake, on TLS, so it can read it).
async fn refuse<S: ClientStream>(mut stream: S, msg: &[u8]) {
    let _ = stream.write_reply(msg).await;
    let _ = stream.shutdown().await;
}

/// `tcp-keepalive`: probes after `secs` of silence, then every third of it, as Redis's
/// `anetKeepAlive` (which gives up after 3 unanswered probes).
fn set_keepalive(stream: &tokio::net::TcpStream, secs: u64) {
    if secs == 0 {
        return;
    }
    let idle = std::time::Duration::from_secs(secs);
    let keepalive = socket2::TcpKeepalive::new()
        .with_time(idle)
        .with_interval((idle / 3).max(std::time::Duration::from_secs(1)))
        .with_retries(3);
    if let Err(e) = socket2::SockRef::from(stream).set_tcp_keepalive(&keepalive) {
        tracing::debug!("tcp-keepalive: {e}");
    }
}
