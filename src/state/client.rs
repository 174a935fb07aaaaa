//! Per-client state. `ClientState` belongs to the connection task alone; the part other
//! clients may read (`CLIENT LIST`) or act on (`CLIENT KILL`) lives in a shared `ClientHandle`.

use crate::state::outbox::Outbox;
use bytes::Bytes;
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::Waker;
use std::time::Duration;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplyMode {
    On,
    Off,
    /// Skip the reply of the next command only.
    Skip,
}

/// The `laddr` a client of the Unix socket is registered with (`[::]:0`, which no TCP
/// connection has): the handle has no room for more, and the socket's path is the server's
/// one `unixsocket`.
pub const UNIX_LADDR: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED), 0);

/// What other clients can see of a client and do to it.
pub struct ClientHandle {
    pub id: u64,
    pub addr: SocketAddr,
    pub laddr: SocketAddr,
    pub created: Connected,
    pub meta: Mutex<ClientMeta>,
    /// The coarse process clock (`util::clock::coarse`, tenths of a second) at the last input,
    /// or at connection (for `idle`).
    pub last_active: AtomicU32,
    pub killed: AtomicBool,
    /// The connection task's waker while it waits for input or for a blocked write, for what
    /// other clients and the server do to it: a kill, a pushed message, the shutdown.
    /// Registering is one
    /// uncontended lock and a waker comparison per wait; polling a `Notify` per event instead
    /// took each one's waiter-list lock every time (about 240 instructions per request at
    /// pipeline 1, measured with callgrind).
    waker: Mutex<Option<Waker>>,
    /// Pushed messages (pub/sub, MONITOR) waiting for this client's connection task.
    pub outbox: Outbox,
    /// Channel and pattern subscriptions (CLIENT LIST `sub`/`psub`, TYPE pubsub).
    /// (32 bits, as `multi_len`: with the other 4-byte fields they keep the handle, which
    /// every connection allocates, in a smaller size class.)
    pub sub_count: AtomicU32,
    pub psub_count: AtomicU32,
    /// Shard channels (SSUBSCRIBE), CLIENT LIST's `ssub`.
    pub ssub_count: AtomicU32,
    pub monitor: AtomicBool,
    /// Commands queued in MULTI, or -1 outside a transaction (CLIENT LIST `multi`).
    pub multi_len: AtomicI32,
    /// What the script thread measured of this client's last script (its run time, and
    /// whether its error was already counted by the command inside it that failed), read
    /// when the connection gets the script's reply (`commands::stats::unblocked`).
    pub script_run: ScriptRunSlot,
    /// The buffer figures CLIENT LIST shows, published by the connection task after each
    /// read and each write (never per command).
    pub bufs: ClientBufs,
    /// The socket's file descriptor (CLIENT LIST `fd`), set by the listener once it is
    /// registered; -1 for internal clients, which have none (as Redis's fake clients).
    pub fd: std::sync::atomic::AtomicI32,
}

/// Every connection allocates its handle in an `Arc` (two counters ahead of it): at most 304
/// bytes keeps that allocation in mimalloc's 320-byte class rather than the 384-byte one.
const _: () = assert!(std::mem::size_of::<ClientHandle>() <= 304);

/// When a client connected, on the coarse clock (`util::clock::coarse`, tenths of a
/// second): 4 bytes in every client's handle where an `Instant` takes 16, and ages are
/// reported in whole seconds (CLIENT LIST `age`, CLIENT KILL `MAXAGE`).
#[derive(Clone, Copy, Debug)]
pub struct Connected(u32);

impl Connected {
    fn now() -> Connected {
        crate::util::clock::tick();
        Connected(crate::util::clock::coarse())
    }

    /// Time since the connection, to the tenth of a second.
    pub fn elapsed(&self) -> Duration {
        crate::util::clock::tick();
        let tenths = crate::util::clock::coarse().saturating_sub(self.0);
        Duration::from_millis(u64::from(tenths) * 100)
    }
}

/// Redis's static reply buffer size: CLIENT LIST's `obl` counts the pending reply bytes up to
/// it, and `oll`/`omem` the rest, as if it were in Redis's reply list.
const REPLY_CHUNK: usize = 16 * 1024;

/// What CLIENT LIST reports of a client's buffers (Redis 7.0's `qbuf`, `qbuf-free`, `rbs`,
/// `rbp`, `obl`, `oll`, `omem`, `multi-mem`, `tot-mem`).
#[derive(Default)]
pub struct ClientBufs {
    /// Unprocessed input (the request being run included) and the room left after it.
    pub qbuf: AtomicUsize,
    pub qbuf_free: AtomicUsize,
    /// Replies waiting for the socket, the reply buffer's capacity, and the most the last
    /// write carried.
    pub out_pending: AtomicUsize,
    pub rbs: AtomicUsize,
    pub rbp: AtomicUsize,
    /// Bytes of the arguments queued in MULTI (plus 8 a argument, as Redis counts them).
    pub multi_mem: AtomicUsize,
}

impl ClientBufs {
    /// After a read: the input buffer's length and free room.
    #[inline]
    pub fn input(&self, len: usize, capacity: usize) {
        self.qbuf.store(len, Ordering::Relaxed);
        self.qbuf_free
            .store(capacity.saturating_sub(len), Ordering::Relaxed);
    }

    /// Before (`pending` > 0) and after (`pending` = 0) a write of the reply buffer.
    #[inline]
    pub fn output(&self, pending: usize, capacity: usize) {
        self.out_pending.store(pending, Ordering::Relaxed);
        if pending > 0 {
            self.rbs.store(capacity, Ordering::Relaxed);
            self.rbp.store(pending, Ordering::Relaxed);
        }
    }
}

/// Redis's `PROTO_RESIZE_THRESHOLD`: a query buffer smaller than this is never trimmed
/// while its client is active.
pub const QUERYBUF_RESIZE_THRESHOLD: usize = 32 * 1024;

/// Redis's `clientsCronResizeQueryBuffer`, for one connection's read buffer. The connection
/// keeps its buffer between requests (as Redis keeps `querybuf`) and calls this about ten
/// times a second while the client is active, and with `idle` once it has been quiet (Redis:
/// more than 2 seconds; the connection's `QUERYBUF_IDLE` says what here):
/// - a buffer wasting at least 4 KiB of an idle client is cut to
///   what it holds (nothing, usually: an idle connection then holds no buffer);
/// - a buffer past the 32 KiB threshold and more than twice the largest input seen since
///   the last call (`peak`, a burst that has passed) is cut to that peak, or to what it
///   holds if that is more.
///
/// `peak` restarts from what the buffer holds. Returns whether the buffer changed.
pub fn resize_query_buffer(buf: &mut bytes::BytesMut, peak: &mut usize, idle: bool) -> bool {
    let (len, size) = (buf.len(), buf.capacity());
    let mut changed = false;
    if idle && len == 0 && size > 0 {
        // However small: an idle connection holds no buffer.
        *buf = bytes::BytesMut::new();
        changed = true;
    } else if size - len > 4 * 1024 {
        let target = if idle {
            Some(len)
        } else if size > QUERYBUF_RESIZE_THRESHOLD && size / 2 > *peak {
            Some(len.max(*peak))
        } else {
            None
        };
        if let Some(target) = target {
            let mut smaller = bytes::BytesMut::with_capacity(target);
            smaller.extend_from_slice(buf);
            *buf = smaller;
            changed = true;
        }
    }
    *peak = buf.len();
    changed
}

/// One client's memory figures for CLIENT LIST / CLIENT INFO.
pub struct MemFields {
    pub qbuf: usize,
    pub qbuf_free: usize,
    pub argv_mem: usize,
    pub multi_mem: usize,
    pub rbs: usize,
    pub rbp: usize,
    pub obl: usize,
    pub oll: usize,
    pub omem: usize,
    pub tot_mem: usize,
}

/// A script's run on the script thread, for the statistics of its command.
#[derive(Debug, Clone, Copy)]
pub struct ScriptRun {
    pub nanos: u64,
    /// Its error reply repeats the error of a command it called, which counted it.
    pub error_counted: bool,
}

/// Where the script thread leaves a client's [`ScriptRun`] for its connection: one word
/// in every client's handle (a locked `Option` took three). 0: none; else the run time in
/// nanoseconds shifted left by 2, the error flag in bit 1, and bit 0 set.
#[derive(Default)]
pub struct ScriptRunSlot(AtomicU64);

impl ScriptRunSlot {
    pub fn set(&self, run: ScriptRun) {
        let word = (run.nanos.min(u64::MAX >> 2) << 2) | (u64::from(run.error_counted) << 1) | 1;
        self.0.store(word, Ordering::Release);
    }

    pub fn take(&self) -> Option<ScriptRun> {
        let word = self.0.swap(0, Ordering::AcqRel);
        (word != 0).then_some(ScriptRun {
            nanos: word >> 2,
            error_counted: word & 2 != 0,
        })
    }
}

/// A client's name, library name and version, or user name: usually empty, so one pointer
/// (8 bytes where a `String` takes 24) in every client's handle, which keeps the handle in
/// mimalloc's 320-byte class instead of the 384-byte one.
/// (The box is the point: a thin pointer to the rare `String`.)
#[allow(clippy::box_collection)]
#[derive(Default, Clone, Debug, PartialEq, Eq)]
pub struct Text(Option<Box<String>>);

impl Text {
    pub fn as_str(&self) -> &str {
        self.0.as_deref().map_or("", String::as_str)
    }
}

impl std::ops::Deref for Text {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl From<String> for Text {
    fn from(s: String) -> Text {
        Text((!s.is_empty()).then(|| Box::new(s)))
    }
}

impl std::fmt::Display for Text {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Default, Clone, Debug)]
pub struct ClientMeta {
    pub name: Text,
    pub lib_name: Text,
    pub lib_ver: Text,
    pub db: usize,
    pub resp: u8,
    /// Name of the last command run (a table entry's name, so no allocation per command).
    pub last_cmd: &'static str,
    pub no_evict: bool,
    /// An atomic slot migration's connection: `g` on the source (sending slots), `o` on
    /// the target (importing them), as Redis 8.4's CLIENT LIST flags; 0 otherwise.
    pub slot_migration: u8,
    /// CLIENT NO-TOUCH: this client's commands (but TOUCH) leave the keys' access clocks.
    pub no_touch: bool,
    /// Keys the client WATCHes (CLIENT LIST `watch`, INFO `watching_clients`).
    pub watch: u32,
    /// The ACL user (CLIENT LIST `user`, CLIENT KILL USER); empty: `default`.
    pub user: Text,
}

impl ClientHandle {
    /// The peer as CLIENT LIST's `addr` shows it: `ip:port`, or `<path>:0` for a client of
    /// the Unix socket at `unix_path` (the `unixsocket` setting, fixed at start).
    pub fn addr_text(&self, unix_path: &str) -> String {
        if self.is_unix() {
            format!("{unix_path}:0")
        } else {
            self.addr.to_string()
        }
    }

    /// CLIENT LIST's `laddr`: as [`ClientHandle::addr_text`], `<path>:0` for a client of
    /// the Unix socket.
    pub fn laddr_text(&self, unix_path: &str) -> String {
        if self.is_unix() {
            format!("{unix_path}:0")
        } else {
            self.laddr.to_string()
        }
    }

    /// Whether the client came through the Unix socket.
    pub fn is_unix(&self) -> bool {
        self.laddr == UNIX_LADDR
    }

    pub fn kill(&self) {
        self.killed.store(true, Ordering::SeqCst);
        self.wake();
    }

    /// Wakes the connection task if it waits for input, after the caller changed what
    /// [`attention`](Self::attention) looks at.
    pub fn wake(&self) {
        let w = self.waker.lock().take();
        if let Some(w) = w {
            w.wake();
        }
    }

    /// Resolves once the client is killed, has pushed messages waiting, or the server shuts
    /// down (what a connection waiting for input must act on).
    pub fn attention<'a>(
        &'a self,
        server: &'a crate::state::Server,
    ) -> impl std::future::Future<Output = ()> + 'a {
        self.woken_when(move || {
            self.is_killed() || self.outbox.has_pending() || server.is_shutting_down()
        })
    }

    /// Resolves once the client is killed or the server shuts down (what a client blocked
    /// on keys must act on).
    pub fn ended<'a>(
        &'a self,
        server: &'a crate::state::Server,
    ) -> impl std::future::Future<Output = ()> + 'a {
        self.woken_when(move || self.is_killed() || server.is_shutting_down())
    }

    /// Resolves once the client is killed (what a blocked write must act on).
    pub fn killed_signal(&self) -> impl std::future::Future<Output = ()> + '_ {
        self.woken_when(|| self.is_killed())
    }

    /// Resolves once `ready` holds. The waker is registered before the check, and every
    /// event changes its state before it wakes, so none is missed.
    fn woken_when<'a>(
        &'a self,
        ready: impl Fn() -> bool + 'a,
    ) -> impl std::future::Future<Output = ()> + 'a {
        std::future::poll_fn(move |cx| {
            {
                let mut w = self.waker.lock();
                if !w.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                    *w = Some(cx.waker().clone());
                }
            }
            if ready() {
                std::task::Poll::Ready(())
            } else {
                std::task::Poll::Pending
            }
        })
    }

    pub fn is_killed(&self) -> bool {
        self.killed.load(Ordering::Acquire)
    }

    /// Redis's client type, for CLIENT LIST/KILL `TYPE`: pubsub while subscribed, else normal
    /// (a MONITOR client counts as normal, as in Redis).
    /// The memory fields of CLIENT LIST; `argv_mem` is the size of the arguments of the
    /// command the client is running (non-zero only for the client asking about itself).
    pub fn mem_fields(&self, argv_mem: usize) -> MemFields {
        let b = &self.bufs;
        let load = |a: &AtomicUsize| a.load(Ordering::Relaxed);
        let pending = load(&b.out_pending);
        let obl = pending.min(REPLY_CHUNK);
        let spill = pending - obl;
        let oll = self.outbox.queued_len() + spill.div_ceil(REPLY_CHUNK);
        let omem = self.outbox.pending_bytes() + spill;
        let multi_mem = if self.multi_len.load(Ordering::Relaxed) > 0 {
            load(&b.multi_mem)
        } else {
            0
        };
        let (qbuf, qbuf_free, rbs) = (load(&b.qbuf), load(&b.qbuf_free), load(&b.rbs));
        let tot_mem = omem
            + qbuf
            + qbuf_free
            + rbs
            + argv_mem
            + multi_mem
            + std::mem::size_of::<ClientHandle>()
            + std::mem::size_of::<ClientState>();
        MemFields {
            qbuf,
            qbuf_free,
            argv_mem,
            multi_mem,
            rbs,
            rbp: load(&b.rbp),
            obl,
            oll,
            omem,
            tot_mem,
        }
    }

    /// One `CLIENT LIST` line, with Redis's field names (also the ACL LOG's client-info).
    /// `tracking` is the client's CLIENT TRACKING flags and redirection, which
    /// `state::tracking` knows (passed in so this file does not import it back).
    pub fn info_line(&self, argv_mem: usize, tracking: (&str, i64), unix_path: &str) -> String {
        let h = self;
        let mem = h.mem_fields(argv_mem);
        let m = h.meta.lock().clone();
        crate::util::clock::tick();
        let idle =
            crate::util::clock::coarse().saturating_sub(h.last_active.load(Ordering::Relaxed)) / 10;
        let cmd = if m.last_cmd.is_empty() {
            "NULL"
        } else {
            m.last_cmd
        };
        let sub = h.sub_count.load(Ordering::Relaxed);
        let psub = h.psub_count.load(Ordering::Relaxed);
        let ssub = h.ssub_count.load(Ordering::Relaxed);
        let multi = h.multi_len.load(Ordering::Relaxed);
        let watch = m.watch;
        // Redis's flag letters: O monitor, P subscribed, x in MULTI; N when none applies.
        let mut flags = String::new();
        if h.monitor.load(Ordering::Relaxed) {
            flags.push('O');
        }
        if (sub | psub | ssub) != 0 {
            flags.push('P');
        }
        if multi >= 0 {
            flags.push('x');
        }
        let (tracking_flags, redir) = tracking;
        flags.push_str(tracking_flags);
        if h.is_unix() {
            flags.push('U');
        }
        if m.no_evict {
            flags.push('e');
        }
        if m.no_touch {
            flags.push('T');
        }
        if m.slot_migration != 0 {
            flags.push(m.slot_migration as char);
        }
        if flags.is_empty() {
            flags.push('N');
        }
        format!(
            "id={} addr={} laddr={} fd={} name={} age={} idle={} flags={} db={} sub={} psub={} ssub={} multi={} watch={} qbuf={} qbuf-free={} argv-mem={} multi-mem={} rbs={} rbp={} obl={} oll={} omem={} tot-mem={} events=r cmd={} user={} redir={} resp={} lib-name={} lib-ver={}\n",
            h.id,
            h.addr_text(unix_path),
            h.laddr_text(unix_path),
            h.fd.load(Ordering::Relaxed),
            m.name,
            h.created.elapsed().as_secs(),
            idle,
            flags,
            m.db,
            sub,
            psub,
            ssub,
            multi,
            watch,
            mem.qbuf,
            mem.qbuf_free,
            mem.argv_mem,
            mem.multi_mem,
            mem.rbs,
            mem.rbp,
            mem.obl,
            mem.oll,
            mem.omem,
            mem.tot_mem,
            cmd,
            if m.user.is_empty() { "default" } else { m.user.as_str() },
            redir,
            m.resp,
            m.lib_name,
            m.lib_ver
        )
    }

    pub fn is_pubsub(&self) -> bool {
        (self.sub_count.load(Ordering::Relaxed)
            | self.psub_count.load(Ordering::Relaxed)
            | self.ssub_count.load(Ordering::Relaxed))
            != 0
    }
}

/// Every connected client, by id.
#[derive(Default)]
pub struct ClientRegistry {
    next_id: AtomicU64,
    clients: Mutex<BTreeMap<u64, Arc<ClientHandle>>>,
}

impl ClientRegistry {
    pub fn register(&self, addr: SocketAddr, laddr: SocketAddr) -> Arc<ClientHandle> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        let handle = Arc::new(ClientHandle {
            id,
            addr,
            laddr,
            created: Connected::now(),
            meta: Mutex::new(ClientMeta {
                resp: 2,
                ..Default::default()
            }),
            last_active: AtomicU32::new(crate::util::clock::coarse()),
            killed: AtomicBool::new(false),
            waker: Mutex::new(None),
            outbox: Outbox::default(),
            sub_count: AtomicU32::new(0),
            psub_count: AtomicU32::new(0),
            ssub_count: AtomicU32::new(0),
            monitor: AtomicBool::new(false),
            multi_len: AtomicI32::new(-1),
            script_run: ScriptRunSlot::default(),
            bufs: ClientBufs::default(),
            fd: std::sync::atomic::AtomicI32::new(-1),
        });
        self.clients.lock().insert(id, handle.clone());
        handle
    }

    /// Kills a client: it leaves the registry at once (as Redis frees a killed client), and its
    /// task closes the connection without running anything more.
    pub fn kill(&self, h: &ClientHandle) {
        h.kill();
        self.unregister(h.id);
    }

    pub fn unregister(&self, id: u64) {
        self.clients.lock().remove(&id);
    }

    pub fn count(&self) -> usize {
        self.clients.lock().len()
    }

    pub fn all(&self) -> Vec<Arc<ClientHandle>> {
        self.clients.lock().values().cloned().collect()
    }
}

/// State owned by one connection task.
pub struct ClientState {
    pub handle: Arc<ClientHandle>,
    pub db: usize,
    pub resp3: bool,
    pub authenticated: bool,
    pub reply_mode: ReplyMode,
    /// Close the connection once the replies so far are written (QUIT, protocol error).
    pub close_after_reply: bool,
    /// Subscribed channels and patterns.
    pub channels: Subscriptions,
    pub patterns: Subscriptions,
    /// Subscribed shard channels (SSUBSCRIBE), counted apart from the others as Redis 7.
    pub shard_channels: Subscriptions,
    /// Inside MULTI: the queued commands. Boxed: this state lives in every connection's
    /// task, and most never queue a transaction.
    pub multi: Option<Box<MultiState>>,
    /// WATCHed keys, and the flag a write to any of them raises.
    pub watched: Vec<(usize, Bytes)>,
    pub watch_dirty: WatchFlag,
    /// True while EXEC runs this client's queue (MONITOR refuses to start then, as Redis's
    /// DENY_BLOCKING rule).
    pub in_exec: bool,
    /// The name last stored in `ClientMeta::last_cmd`: the shared copy (CLIENT LIST) is
    /// locked only when the command changes, not for every command.
    pub last_cmd: &'static str,
    /// Set by a blocking command (BLPOP ...) that found nothing: the connection waits on it
    /// before running the next request.
    pub blocked: Option<crate::state::blocking::Blocked>,
    /// The statistics row and run time of the command that blocked, counted when it is
    /// answered (`INFO latencystats` records a blocked command's latency then).
    pub blocked_stat: Option<(usize, u64)>,
    /// The slow log's copy of the arguments of the command that blocked, logged when it is
    /// answered if it ran long enough (only kept while the slow log is on).
    pub blocked_slow: Option<Vec<Bytes>>,
    /// CLIENT NO-TOUCH (the copy the dispatcher reads; `ClientMeta::no_touch` is CLIENT LIST's).
    pub no_touch: bool,
    /// SCRIPT DEBUG SYNC is on: this client's next EVAL is a Lua debugging session
    /// (`commands::scripting::ldb`), which the connection serves apart.
    pub script_debug: bool,
    /// The journal's sequence number of this client's last write (WAITAOF waits for it).
    pub journal_seq: u64,
    /// Replies written after this must wait until this journal number is on disk
    /// (`appendfsync always`, J); 0: no wait.
    pub journal_wait: u64,
    /// Replies written after this must wait until this journal number is written to the
    /// file (everysec/no: a crash of the process loses nothing acknowledged); 0: no wait.
    pub journal_written: u64,
    /// The ACL user this connection runs as (a snapshot, refreshed when the registry's
    /// epoch moves); None for internal clients (journal replay), which may run anything.
    pub user: Option<Arc<crate::state::acl::User>>,
    /// The ACL epoch `user` was read at.
    pub acl_seen: u64,
    /// Equal to the ACL epoch while `user` may run everything: the dispatcher's whole
    /// check is comparing it with the epoch (`commands::acl`).
    pub acl_fast: u64,
    /// Cluster mode: ASKING was sent (the next command may use a slot being imported), and
    /// READONLY (reads are served by a replica of the slot's master).
    pub cluster_asking: bool,
    pub cluster_readonly: bool,
}

/// A client's subscriptions of one kind (channels, patterns or shard channels). Most
/// clients never subscribe, and this lives in every connection's task: the set is
/// allocated with the first subscription and given back with the last, so an idle client
/// holds one pointer here instead of an empty table (40 bytes).
#[derive(Default)]
pub struct Subscriptions(Option<Box<hashbrown::HashSet<Bytes>>>);

impl Subscriptions {
    /// True if `ch` was not there yet.
    pub fn insert(&mut self, ch: Bytes) -> bool {
        self.0.get_or_insert_with(Box::default).insert(ch)
    }

    /// True if `ch` was there.
    pub fn remove(&mut self, ch: &[u8]) -> bool {
        let Some(set) = self.0.as_mut() else {
            return false;
        };
        let removed = set.remove(ch);
        if set.is_empty() {
            self.0 = None;
        }
        removed
    }

    pub fn contains(&self, ch: &[u8]) -> bool {
        self.0.as_ref().is_some_and(|s| s.contains(ch))
    }

    pub fn len(&self) -> usize {
        self.0.as_ref().map_or(0, |s| s.len())
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Bytes> {
        self.0.iter().flat_map(|s| s.iter())
    }

    /// Empties the set, handing out what it held.
    pub fn drain(&mut self) -> impl Iterator<Item = Bytes> {
        self.0.take().into_iter().flat_map(|s| *s)
    }
}

/// The flag a write to any of a client's WATCHed keys raises. Allocated by the first WATCH
/// (most clients never watch, and an idle connection should not hold one), kept after.
#[derive(Default)]
pub struct WatchFlag(Option<Arc<AtomicBool>>);

impl WatchFlag {
    /// The flag to hand to the watch registry, made on first use.
    pub fn flag(&mut self) -> &Arc<AtomicBool> {
        self.0
            .get_or_insert_with(|| Arc::new(AtomicBool::new(false)))
    }

    pub fn load(&self, order: Ordering) -> bool {
        self.0.as_ref().is_some_and(|f| f.load(order))
    }

    pub fn store(&self, v: bool, order: Ordering) {
        if let Some(f) = &self.0 {
            f.store(v, order);
        }
    }
}

/// A transaction being queued.
#[derive(Default)]
pub struct MultiState {
    /// Each queued request with its command's table flags (EXEC's maxmemory check reads
    /// them); EXEC finds the command in the table again.
    pub queued: Vec<(u32, Vec<Bytes>)>,
    /// A queued command was refused (unknown, arity, ...): EXEC will answer EXECABORT.
    pub aborted: bool,
    /// Bytes of the queued arguments, as Redis's `multi-mem` counts them.
    pub argv_len: usize,
}

impl ClientState {
    /// A record this client's replies wait on from now (its command's, or one another's
    /// work made for it): WAITAOF counts it, and the next reply waits until it is on disk
    /// (`e.wait`) or written to the file.
    pub fn journal_ended(&mut self, e: crate::store::journal::Ended) {
        if e.seq > 0 {
            self.journal_seq = self.journal_seq.max(e.seq);
            if e.wait {
                self.journal_wait = self.journal_wait.max(e.seq);
            } else {
                self.journal_written = self.journal_written.max(e.seq);
            }
        }
    }

    pub fn new(handle: Arc<ClientHandle>, authenticated: bool) -> ClientState {
        ClientState {
            handle,
            db: 0,
            resp3: false,
            authenticated,
            reply_mode: ReplyMode::On,
            close_after_reply: false,
            channels: Subscriptions::default(),
            patterns: Subscriptions::default(),
            shard_channels: Subscriptions::default(),
            multi: None,
            watched: Vec::new(),
            watch_dirty: WatchFlag::default(),
            in_exec: false,
            last_cmd: "",
            blocked: None,
            blocked_stat: None,
            blocked_slow: None,
            no_touch: false,
            script_debug: false,
            journal_seq: 0,
            journal_wait: 0,
            journal_written: 0,
            user: None,
            acl_seen: 0,
            acl_fast: 0,
            cluster_asking: false,
            cluster_readonly: false,
        }
    }

    pub fn id(&self) -> u64 {
        self.handle.id
    }

    /// Subscriptions of every kind, shard channels included (RESP2 subscribed mode while
    /// non-zero, as Redis's `clientTotalPubSubSubscriptionCount`).
    pub fn subscriptions(&self) -> usize {
        self.channels.len() + self.patterns.len() + self.shard_channels.len()
    }

    /// Publishes the fields CLIENT LIST shows.
    pub fn with_meta(&self, f: impl FnOnce(&mut ClientMeta)) {
        f(&mut self.handle.meta.lock());
    }
}

#[cfg(test)]
mod querybuf_tests {
    use super::*;
    use bytes::BytesMut;

    #[test]
    fn a_burst_is_trimmed_to_the_recent_peak_and_an_idle_buffer_freed() {
        let mut buf = BytesMut::with_capacity(400_000);
        buf.extend_from_slice(b"*1\r\n$4\r\nPING\r\n");
        // Right after the burst its size is the peak: nothing is trimmed yet.
        let mut peak = 400_000;
        assert!(!resize_query_buffer(&mut buf, &mut peak, false));
        assert_eq!(peak, 14);
        // A later call sees a small peak: the buffer is cut to it.
        assert!(resize_query_buffer(&mut buf, &mut peak, false));
        assert_eq!(&buf[..], b"*1\r\n$4\r\nPING\r\n");
        assert!(buf.capacity() >= 14 && buf.capacity() < 4096);
        // Small buffers stay while active, and go once idle for more than 2 seconds.
        let mut small = BytesMut::with_capacity(16 * 1024);
        let mut peak = 0;
        assert!(!resize_query_buffer(&mut small, &mut peak, false));
        assert_eq!(small.capacity(), 16 * 1024);
        assert!(resize_query_buffer(&mut small, &mut peak, true));
        assert_eq!(small.capacity(), 0);
        // Never below what the buffer holds (a request half read).
        let mut partial = BytesMut::with_capacity(64 * 1024);
        partial.extend_from_slice(&[b'x'; 10_000]);
        let mut peak = 0;
        assert!(resize_query_buffer(&mut partial, &mut peak, true));
        assert_eq!(partial.len(), 10_000);
        assert!(partial.capacity() < 64 * 1024);
    }
}

#[cfg(test)]
mod cold_state_tests {
    use super::*;

    #[test]
    fn a_script_run_round_trips_through_its_slot_once() {
        let slot = ScriptRunSlot::default();
        assert!(slot.take().is_none());
        for (nanos, error_counted) in [(0, false), (0, true), (123_456_789, true), (7, false)] {
            slot.set(ScriptRun {
                nanos,
                error_counted,
            });
            let run = slot.take().expect("set");
            assert_eq!((run.nanos, run.error_counted), (nanos, error_counted));
            assert!(slot.take().is_none());
        }
    }

    #[test]
    fn subscriptions_hold_memory_only_while_there_are_some() {
        let mut subs = Subscriptions::default();
        assert!(subs.is_empty() && !subs.remove(b"a"));
        assert!(subs.insert(Bytes::from_static(b"a")));
        assert!(!subs.insert(Bytes::from_static(b"a")));
        assert!(subs.insert(Bytes::from_static(b"b")));
        assert_eq!(subs.len(), 2);
        assert!(subs.contains(b"b"));
        assert!(subs.remove(b"a") && subs.remove(b"b"));
        assert!(
            subs.0.is_none(),
            "the table is given back with the last one"
        );
        subs.insert(Bytes::from_static(b"c"));
        assert_eq!(
            subs.drain().collect::<Vec<_>>(),
            vec![Bytes::from_static(b"c")]
        );
        assert!(subs.0.is_none() && subs.is_empty());
    }
}
