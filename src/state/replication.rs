//! Replication's shared state: this server's role, its replication IDs and offsets, the
//! replicas connected to it (master side) and its link to a master (replica side). The
//! network side is `server/replication.rs`; the stream itself is the journal's record
//! stream (`store/journal/feed.rs`).

use parking_lot::Mutex;
use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, OnceLock};

/// One replica connected to this master, as INFO's `slaveN` line shows it.
#[derive(Clone, Debug)]
pub struct Replica {
    pub id: u64,
    pub ip: String,
    pub port: u16,
    /// `wait_bgsave`, `send_bulk` or `online`.
    pub state: &'static str,
    /// The offset it acknowledged (REPLCONF ACK).
    pub ack: u64,
    /// When it last acknowledged (Unix ms).
    pub ack_ms: u64,
    /// The offset it has fsynced to its journal (`REPLCONF ACK … FACK <offset>`; 0: none
    /// said, its journal is off): what WAITAOF counts.
    pub fack: u64,
}

/// What a replica said with REPLCONF before its PSYNC.
#[derive(Clone, Debug, Default)]
pub struct ReplConf {
    pub port: Option<u16>,
    pub ip: Option<String>,
    /// `capa eof`: it reads a snapshot streamed with an end mark (a diskless transfer).
    pub eof: bool,
}

/// A PSYNC (or SYNC) the connection hands to the replication side once its reply batch is
/// out: the socket then carries the stream.
#[derive(Clone, Debug)]
pub struct Psync {
    /// `None`: SYNC (no partial resync, no `+FULLRESYNC` line).
    pub replid: Option<String>,
    pub offset: i64,
}

pub struct Repl {
    pub replid: Mutex<String>,
    pub replid2: Mutex<String>,
    pub second_offset: AtomicI64,
    pub replicas: Mutex<Vec<Replica>>,
    pub confs: Mutex<HashMap<u64, ReplConf>>,
    /// Replica side: the master (`None`: this server is a master).
    pub master: Mutex<Option<(String, u16)>>,
    /// Bumped by each REPLICAOF: a link whose generation is not current ends.
    pub link_gen: AtomicU64,
    /// Set by the link of one generation: a link that ended after a newer REPLICAOF must not
    /// clear what the current link set.
    pub link_up: LinkFlag,
    pub sync_in_progress: LinkFlag,
    /// Unix ms of the last byte from the master.
    pub last_io_ms: AtomicU64,
    /// The client id of this replica's link to its master (0: none): CLIENT LIST/KILL
    /// `TYPE master`.
    pub master_client: AtomicU64,
    /// The stream offset this replica has applied (and read).
    pub applied: AtomicU64,
    pub read: AtomicU64,
    /// The master's replication ID this replica's data follows (for a partial resync on
    /// reconnect); empty: none.
    pub master_replid: Mutex<String>,
    pub sync_full: AtomicU64,
    pub sync_partial_ok: AtomicU64,
    pub sync_partial_err: AtomicU64,
    /// FAILOVER's progress (master side).
    pub failover: Mutex<Failover>,
    /// Replica side: held by the link while it applies one command of the master's stream
    /// and places its bytes in the backlog, and by a snapshot's cut for a replica of this
    /// replica, so the cut falls between two commands and its offset matches its data.
    pub applying: Mutex<()>,
    /// Replica side: the database the master's stream has selected, after the last command
    /// applied (the snapshot's `repl-stream-db` for a replica of this replica); kept across
    /// reconnections, since a partial resynchronisation continues the stream where it was.
    pub stream_db: std::sync::atomic::AtomicUsize,
    /// Bumped to drop every replica of this server ([`disconnect_replicas`]).
    pub replicas_epoch: tokio::sync::watch::Sender<u64>,
    /// Bumped by every acknowledgement a replica sends (REPLCONF ACK): WAIT and WAITAOF
    /// wake on it.
    pub acks: tokio::sync::watch::Sender<u64>,
    /// Replica side: where the link's session is before its transfer ([`LINK_CONNECTING`],
    /// [`LINK_HANDSHAKE`]; 0: not started), for ROLE.
    pub link_phase: std::sync::atomic::AtomicU8,
}

/// The link is opening its TCP connection (ROLE's `connecting`).
pub const LINK_CONNECTING: u8 = 1;
/// Connected, not yet answered PSYNC (ROLE's `handshake`).
pub const LINK_HANDSHAKE: u8 = 2;

/// Where a FAILOVER stands (Redis's `failover_state`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FailoverPhase {
    #[default]
    None,
    /// Writes are paused; waiting for a replica to acknowledge every byte of the stream.
    WaitForSync,
    /// This server follows the chosen replica and asks it, with `PSYNC ... FAILOVER`, to
    /// become the master.
    InProgress,
}

impl FailoverPhase {
    /// INFO replication's `master_failover_state`.
    pub fn name(self) -> &'static str {
        match self {
            FailoverPhase::None => "no-failover",
            FailoverPhase::WaitForSync => "waiting-for-sync",
            FailoverPhase::InProgress => "failover-in-progress",
        }
    }
}

/// A FAILOVER in progress: its phase, its target (given, or the first replica found in
/// sync), its deadline (Unix ms) and FORCE.
#[derive(Clone, Debug, Default)]
pub struct Failover {
    pub phase: FailoverPhase,
    pub target: Option<(String, u16)>,
    pub deadline_ms: Option<u64>,
    pub force: bool,
}

/// Ends a failover, done or abandoned: writes resume (Redis's `clearFailoverState`).
pub fn clear_failover() {
    *repl().failover.lock() = Failover::default();
    crate::state::pause::unpause(crate::state::pause::Purpose::Failover);
}

/// Abandons a failover (Redis's `abortFailover`): a server already following its target
/// becomes a master again. The line logged, or None when there was no failover.
pub fn abort_failover(reason: &str) -> Option<String> {
    let f = repl().failover.lock().clone();
    if f.phase == FailoverPhase::None {
        return None;
    }
    let line = match &f.target {
        Some((h, p)) => format!("FAILOVER to {h}:{p} aborted: {reason}"),
        None => format!("FAILOVER to any replica aborted: {reason}"),
    };
    if f.phase == FailoverPhase::InProgress {
        unfollow();
    }
    clear_failover();
    Some(line)
}

/// The failover's phase.
pub fn failover_phase() -> FailoverPhase {
    repl().failover.lock().phase
}

/// A flag of the replica's link, holding the generation of the link that set it (0: clear).
/// It reads as set only while that generation is current, and a link clears it only if it
/// set it: an old link ending late (its master was silent until then) leaves the status of
/// the link that replaced it alone.
pub struct LinkFlag(AtomicU64);

impl LinkFlag {
    pub fn set(&self, gen: u64) {
        self.0.store(gen, Ordering::Release);
    }

    pub fn clear(&self, gen: u64) {
        let _ = self
            .0
            .compare_exchange(gen, 0, Ordering::AcqRel, Ordering::Acquire);
    }

    pub fn reset(&self) {
        self.0.store(0, Ordering::Release);
    }

    pub fn get(&self) -> bool {
        let g = self.0.load(Ordering::Acquire);
        g != 0 && g == repl().link_gen.load(Ordering::Acquire)
    }
}

static REPL: LazyLock<Repl> = LazyLock::new(|| Repl {
    replid: Mutex::new(random_id()),
    replid2: Mutex::new("0".repeat(40)),
    second_offset: AtomicI64::new(-1),
    replicas: Mutex::new(Vec::new()),
    confs: Mutex::new(HashMap::new()),
    master: Mutex::new(None),
    link_gen: AtomicU64::new(0),
    link_up: LinkFlag(AtomicU64::new(0)),
    sync_in_progress: LinkFlag(AtomicU64::new(0)),
    last_io_ms: AtomicU64::new(0),
    master_client: AtomicU64::new(0),
    applied: AtomicU64::new(0),
    read: AtomicU64::new(0),
    master_replid: Mutex::new(String::new()),
    sync_full: AtomicU64::new(0),
    sync_partial_ok: AtomicU64::new(0),
    sync_partial_err: AtomicU64::new(0),
    failover: Mutex::new(Failover {
        phase: FailoverPhase::None,
        target: None,
        deadline_ms: None,
        force: false,
    }),
    applying: Mutex::new(()),
    stream_db: std::sync::atomic::AtomicUsize::new(0),
    replicas_epoch: tokio::sync::watch::Sender::new(0),
    acks: tokio::sync::watch::Sender::new(0),
    link_phase: std::sync::atomic::AtomicU8::new(0),
});

pub fn repl() -> &'static Repl {
    &REPL
}

/// 40 hex digits, as Redis's replication IDs.
pub fn random_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut s = String::with_capacity(40);
    let mut i = 0u64;
    while s.len() < 40 {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(i ^ crate::util::clock::now_us() as u64);
        h.write_u32(std::process::id());
        s.push_str(&format!("{:016x}", h.finish()));
        i += 1;
    }
    s.truncate(40);
    s
}

thread_local! {
    static APPLYING: Cell<bool> = const { Cell::new(false) };
    static HANDOFF: std::cell::RefCell<Option<HandOff>> = const { std::cell::RefCell::new(None) };
}

/// Whether the running command comes from this replica's master (it may write on a
/// read-only replica, and run the journal's internal document records).
#[inline]
pub fn applying() -> bool {
    APPLYING.with(|a| a.get())
}

pub fn set_applying(on: bool) {
    APPLYING.with(|a| a.set(on));
    crate::store::expiry::set_from_master(on);
}

/// What a connection becomes once its command's reply is out.
pub enum HandOff {
    /// PSYNC/SYNC: a replica's stream.
    Replica(Psync),
    /// CLUSTER SYNCSLOTS: the source's side of an atomic slot migration.
    Slots(SlotSync),
}

/// What CLUSTER SYNCSLOTS hands to the connection it came on: the task (made on this node,
/// the source, under the target's id; `state::cluster::migration`) and its slots.
pub struct SlotSync {
    pub id: String,
    pub ranges: Vec<(u16, u16)>,
    /// The target node's name.
    pub dest: String,
}

/// PSYNC/SYNC asks its connection to become a replica's stream.
pub fn hand_off(p: Psync) {
    HANDOFF.with(|h| *h.borrow_mut() = Some(HandOff::Replica(p)));
}

/// CLUSTER SYNCSLOTS asks its connection to send slots to the migration's target.
pub fn hand_off_slots(s: SlotSync) {
    HANDOFF.with(|h| *h.borrow_mut() = Some(HandOff::Slots(s)));
}

/// The connection's check after a command (one thread-local read).
#[inline]
pub fn take_hand_off() -> Option<HandOff> {
    HANDOFF.with(|h| h.borrow_mut().take())
}

/// Whether this server is a replica now.
pub fn is_replica() -> bool {
    IS_REPLICA.load(Ordering::Relaxed)
}

static IS_REPLICA: AtomicBool = AtomicBool::new(false);

/// `replica-read-only` (default yes), cached for the dispatcher.
pub static READ_ONLY: AtomicBool = AtomicBool::new(true);

/// Redis's refusal of a client's write on a read-only replica (`shared.roslaveerr`).
pub const READONLY_ERR: &str = "READONLY You can't write against a read only replica.";
/// Redis's refusal while the link is down and stale data is not served
/// (`shared.masterdownerr`).
pub const MASTERDOWN_ERR: &str =
    "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.";

/// `replica-serve-stale-data`.
pub static SERVE_STALE: AtomicBool = AtomicBool::new(true);

/// Whether a command not flagged `stale` must be refused with `-MASTERDOWN`: a replica
/// with `replica-serve-stale-data no` whose link is not up (Redis's processCommand).
#[inline]
pub fn refuses_stale() -> bool {
    !SERVE_STALE.load(Ordering::Relaxed)
        && IS_REPLICA.load(Ordering::Relaxed)
        && !repl().link_up.get()
        && !applying()
}

/// Whether a client's write must be refused with `-READONLY`.
#[inline]
pub fn refuses_writes() -> bool {
    IS_REPLICA.load(Ordering::Relaxed) && READ_ONLY.load(Ordering::Relaxed) && !applying()
}

/// Who starts the replica's link (the network side registers itself at start: `state`
/// cannot see `server`).
pub type LinkStarter = fn(&Arc<crate::state::Server>, u64);
static LINK_STARTER: OnceLock<LinkStarter> = OnceLock::new();

pub fn set_link_starter(f: LinkStarter) {
    let _ = LINK_STARTER.set(f);
}

/// REPLICAOF host port: this server follows `host:port` from now on (a link of the next
/// generation; the previous one ends).
pub fn follow(server: &Arc<crate::state::Server>, host: String, port: u16) {
    let same = repl()
        .master
        .lock()
        .as_ref()
        .is_some_and(|(h, p)| *h == host && *p == port);
    if same {
        return;
    }
    // Clients blocked on this server as it was would be served by the new master's
    // stream (Redis's `disconnectAllBlockedClients`, issue #2473).
    server.blocking.unblock_all(&crate::protocol::Reply::error(
        "UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)",
    ));
    let was_master = !IS_REPLICA.swap(true, Ordering::AcqRel);
    crate::store::expiry::set_replica(true);
    crate::state::NO_GOOD_REPLICAS.store(false, Ordering::Relaxed);
    *repl().master.lock() = Some((host, port));
    repl().link_up.reset();
    if was_master {
        // The data this master had is the starting point a partial resync can use.
        *repl().master_replid.lock() = repl().replid.lock().clone();
        let off = crate::store::journal::feed().map_or(0, |f| f.offset());
        repl().applied.store(off, Ordering::Release);
        repl().read.store(off, Ordering::Release);
        // Replicas of this server stay (Redis 7's replicationSetMaster): a partial
        // resynchronisation with the new master keeps their stream going, a full one or a
        // new replication ID drops them.
    }
    let gen = repl().link_gen.fetch_add(1, Ordering::AcqRel) + 1;
    if let Some(start) = LINK_STARTER.get() {
        start(server, gen);
    }
}

/// REPLICAOF NO ONE: this server is a master again, keeping its data; its replication ID
/// moves on, the previous one stays valid up to the offset reached (Redis's
/// `shiftReplicationId`).
pub fn unfollow() {
    if !IS_REPLICA.swap(false, Ordering::AcqRel) {
        return;
    }
    crate::store::expiry::set_replica(false);
    repl().link_gen.fetch_add(1, Ordering::AcqRel);
    *repl().master.lock() = None;
    repl().link_up.reset();
    repl().sync_in_progress.reset();
    // The backlog holds the master's stream up to here: this server's own records follow
    // it, and its replid2 names that history (Redis's `shiftReplicationId`).
    let reached = match crate::store::journal::feed() {
        Some(f) => {
            crate::store::journal::set_proxying(false);
            f.offset()
        }
        None => repl().applied.load(Ordering::Acquire),
    };
    let followed = std::mem::take(&mut *repl().master_replid.lock());
    if !followed.is_empty() {
        *repl().replid2.lock() = followed;
        repl()
            .second_offset
            .store(reached as i64 + 1, Ordering::Release);
    }
    *repl().replid.lock() = random_id();
    // Its replicas learn the new ID by reconnecting; they continue where they were.
    disconnect_replicas();
}

/// Where a snapshot cut at change `seq` stands in the replication history, for its RDB's
/// `repl-id` / `repl-offset` / `repl-stream-db` (Redis's rdbPopulateSaveInfo): a replica that
/// has synchronised (`link_held`: its link is between two commands) is at its applied offset
/// in its master's stream; a master with a backlog at the offset where `seq` starts, known
/// once every smaller number is placed. Nothing for a server without a history to continue.
pub fn history_at_cut(seq: u64, link_held: bool) -> Option<HistoryAt> {
    if link_held {
        let id = repl().master_replid.lock().clone();
        if id.is_empty() {
            return None;
        }
        return Some(HistoryAt::Known(
            id,
            repl().applied.load(Ordering::Acquire),
            Some(repl().stream_db.load(Ordering::Acquire)),
        ));
    }
    if is_replica() {
        return None;
    }
    let feed = crate::store::journal::feed()?;
    Some(HistoryAt::Pending(
        repl().replid.lock().clone(),
        feed.mark_for_save(seq),
    ))
}

/// See [`history_at_cut`].
pub enum HistoryAt {
    Known(String, u64, Option<usize>),
    Pending(String, tokio::sync::oneshot::Receiver<(u64, Option<usize>)>),
}

impl HistoryAt {
    /// (replication ID, offset, the stream's database if it must be said), waiting for the
    /// offset if it is not known yet; `None` if the history was reset meanwhile. Blocking.
    pub fn resolve(self) -> Option<(String, u64, Option<usize>)> {
        match self {
            HistoryAt::Known(id, off, db) => Some((id, off, db)),
            HistoryAt::Pending(id, rx) => rx.blocking_recv().ok().map(|(off, db)| (id, off, db)),
        }
    }
}

/// A restart from a file that says where its data stands in a replication history
/// (`repl-id`, `repl-offset`): the history goes on from there, with a backlog at that offset,
/// so replicas (or, for a replica, its master) continue with a partial resynchronisation
/// (Redis's loadDataFromDisk with a valid rdbSaveInfo).
///
/// A replica takes the ID as its own (its link then asks its master to continue it); a master
/// keeps it as its second ID up to that offset and starts a new one, as Redis 7.0 does.
pub fn restore_history(
    id: String,
    offset: u64,
    stream_db: Option<usize>,
    backlog: usize,
    replica: bool,
) {
    if replica {
        *repl().replid.lock() = id;
    } else {
        *repl().replid2.lock() = id;
        repl()
            .second_offset
            .store(offset as i64 + 1, Ordering::Release);
        *repl().replid.lock() = random_id();
    }
    crate::store::journal::start_feed_at(backlog, offset);
    repl()
        .stream_db
        .store(stream_db.unwrap_or(0), Ordering::Release);
}

/// The replication ID this server's history goes by: its master's, for a replica that has
/// synchronised (it proxies that stream), else its own.
pub fn current_replid() -> String {
    if is_replica() {
        let m = repl().master_replid.lock();
        if !m.is_empty() {
            return m.clone();
        }
    }
    repl().replid.lock().clone()
}

/// Drops every replica connected to this server at once (they reconnect and learn what
/// changed: a new replication ID, or a new history): each one's task watches
/// [`Repl::replicas_epoch`].
pub fn disconnect_replicas() {
    repl().replicas_epoch.send_modify(|e| *e += 1);
}

pub fn add_replica(r: Replica) {
    repl().replicas.lock().push(r);
}

pub fn update_replica(id: u64, f: impl FnOnce(&mut Replica)) {
    if let Some(r) = repl().replicas.lock().iter_mut().find(|r| r.id == id) {
        f(r);
    }
}

/// Waits until `done` says so (checked at each replica acknowledgement, and at least every
/// 100 ms) or the deadline; then `done`'s last answer. The wait of WAIT and WAITAOF.
pub async fn wait_acks<T>(
    deadline: Option<std::time::Instant>,
    mut done: impl FnMut() -> (bool, T),
) -> T {
    let mut acks = repl().acks.subscribe();
    loop {
        let (ok, value) = done();
        if ok || deadline.is_some_and(|d| std::time::Instant::now() >= d) {
            return value;
        }
        let nap = deadline.map_or(std::time::Duration::from_millis(100), |d| {
            d.saturating_duration_since(std::time::Instant::now())
                .min(std::time::Duration::from_millis(100))
        });
        let _ = tokio::time::timeout(nap, acks.changed()).await;
    }
}

pub fn remove_replica(id: u64) {
    repl().replicas.lock().retain(|r| r.id != id);
    repl().confs.lock().remove(&id);
}

/// Replicas online whose last acknowledgement is at most `max_lag` seconds old.
pub fn good_replicas(max_lag: u64) -> usize {
    let now = crate::util::clock::now_ms() as u64;
    repl()
        .replicas
        .lock()
        .iter()
        .filter(|r| r.state == "online" && now.saturating_sub(r.ack_ms) <= max_lag * 1000)
        .count()
}

/// Replicas online that acknowledged at least `offset`.
pub fn acked(offset: u64) -> usize {
    repl()
        .replicas
        .lock()
        .iter()
        .filter(|r| r.state == "online" && r.ack >= offset)
        .count()
}

/// Replicas online whose journal holds at least `offset` on disk (WAITAOF).
pub fn facked(offset: u64) -> usize {
    repl()
        .replicas
        .lock()
        .iter()
        .filter(|r| r.state == "online" && r.fack >= offset)
        .count()
}

/// Redis's `checkGoodReplicasStatus`, cached in `NO_GOOD_REPLICAS` for the dispatcher:
/// with `min-replicas-to-write` and `min-replicas-max-lag` set, writes need that many
/// replicas that acknowledged within the lag.
pub fn refresh_good_replicas(to_write: u64, max_lag: u64) {
    // A replica's writes come from its master: the rule is a master's (Redis's
    // checkGoodReplicasStatus is true while masterhost is set).
    let refuse =
        !is_replica() && to_write > 0 && max_lag > 0 && (good_replicas(max_lag) as u64) < to_write;
    crate::state::NO_GOOD_REPLICAS.store(refuse, Ordering::Relaxed);
}

/// The master offset INFO shows: the stream's (a master), or what was applied (a replica).
pub fn offset() -> u64 {
    if is_replica() {
        repl().applied.load(Ordering::Acquire)
    } else {
        crate::store::journal::stream_offset()
    }
}

/// `repl-backlog-ttl` (Redis's replicationCron): a master that has had no replica for
/// `ttl` seconds frees its backlog and starts a new history (a new replication ID, no
/// second one), since no replica can continue the old one from it. `since` keeps when the
/// last replica left (0: some are connected). Returns the line to log when it frees it.
pub fn expire_backlog(ttl: u64, since: &mut u64) -> Option<String> {
    let now = crate::util::clock::now_ms() as u64;
    if is_replica() || !repl().replicas.lock().is_empty() || crate::store::journal::feed().is_none()
    {
        *since = 0;
        return None;
    }
    if *since == 0 {
        *since = now;
    }
    if ttl == 0 || now.saturating_sub(*since) < ttl * 1000 {
        return None;
    }
    *repl().replid.lock() = random_id();
    *repl().replid2.lock() = "0".repeat(40);
    repl().second_offset.store(-1, Ordering::Release);
    crate::store::journal::free_feed();
    *since = 0;
    Some(format!(
        "Replication backlog freed after {ttl} seconds without connected replicas."
    ))
}

/// INFO replication's lines.
pub fn info(backlog_size: u64, replica_priority: u64, announced: bool) -> Vec<(String, String)> {
    let r = repl();
    let mut out: Vec<(String, String)> = Vec::new();
    let mut kv = |k: &str, v: String| out.push((k.to_string(), v));
    let now = crate::util::clock::now_ms() as u64;
    if let Some((host, port)) = r.master.lock().clone() {
        kv("role", "slave".into());
        kv("master_host", host);
        kv("master_port", port.to_string());
        let up = r.link_up.get();
        kv("master_link_status", if up { "up" } else { "down" }.into());
        let last = r.last_io_ms.load(Ordering::Acquire);
        let ago = if last == 0 {
            -1
        } else {
            (now.saturating_sub(last) / 1000) as i64
        };
        kv("master_last_io_seconds_ago", ago.to_string());
        kv(
            "master_sync_in_progress",
            (r.sync_in_progress.get() as u8).to_string(),
        );
        kv(
            "slave_read_repl_offset",
            r.read.load(Ordering::Acquire).to_string(),
        );
        kv(
            "slave_repl_offset",
            r.applied.load(Ordering::Acquire).to_string(),
        );
        // Read by Sentinel, which never promotes a replica of priority 0.
        kv("slave_priority", replica_priority.to_string());
        kv(
            "slave_read_only",
            (READ_ONLY.load(Ordering::Relaxed) as u8).to_string(),
        );
        kv("replica_announced", (announced as u8).to_string());
    } else {
        kv("role", "master".into());
    }
    let replicas = r.replicas.lock().clone();
    kv("connected_slaves", replicas.len().to_string());
    for (i, s) in replicas.iter().enumerate() {
        let lag = now.saturating_sub(s.ack_ms) / 1000;
        kv(
            &format!("slave{i}"),
            format!(
                "ip={},port={},state={},offset={},lag={}",
                s.ip, s.port, s.state, s.ack, lag
            ),
        );
    }
    kv("master_failover_state", failover_phase().name().into());
    kv("master_replid", current_replid());
    kv("master_replid2", r.replid2.lock().clone());
    kv("master_repl_offset", offset().to_string());
    kv(
        "second_repl_offset",
        r.second_offset.load(Ordering::Acquire).to_string(),
    );
    match crate::store::journal::feed() {
        Some(f) => {
            let (first, held) = f.window();
            kv("repl_backlog_active", "1".into());
            kv("repl_backlog_size", f.capacity().to_string());
            kv("repl_backlog_first_byte_offset", first.to_string());
            kv("repl_backlog_histlen", held.to_string());
        }
        None => {
            kv("repl_backlog_active", "0".into());
            kv("repl_backlog_size", backlog_size.to_string());
            kv("repl_backlog_first_byte_offset", "0".into());
            kv("repl_backlog_histlen", "0".into());
        }
    }
    out
}
