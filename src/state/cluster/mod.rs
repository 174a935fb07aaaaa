//! Redis Cluster: this node's view of the cluster (nodes, slots, epochs, the links of the
//! bus) as one service the server owns (`Server::cluster`). The bus's wire format is
//! `protocol::cluster_bus`; the sockets and the cron's schedule are the network side's
//! (`server::cluster_bus`). Everything here is a port of Redis 7.0's `cluster.c`, kept in
//! its shape so that a reader of one finds the same step in the other: `bus.rs` processes
//! packets and runs the cron, `nodes_conf.rs` reads and writes `nodes.conf` and the
//! CLUSTER NODES / SLOTS / SHARDS descriptions, this file holds the state and the slot
//! table clients are redirected by.

pub mod bus;
pub mod failover;
pub mod migration;
pub mod nodes_conf;

use crate::config::Config;
use crate::protocol::cluster_bus::{self as wire, node_flag as nf, NodeName, SlotBitmap};
use bytes::Bytes;
use parking_lot::{Mutex, MutexGuard};
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::mpsc;

pub const SLOTS: usize = wire::SLOTS;

/// A key's hash slot, as Redis's `keyHashSlot`: CRC16 of the key, or of the part between
/// the first `{` and the next `}` when that part is not empty.
pub fn key_slot(key: &[u8]) -> u16 {
    // The store's fast form of it (held to redis_protocol::redis_keyslot by its tests).
    crate::store::slots::slot_of(key)
}

/// The replication offset this node announces on the bus: a replica loading a full sync
/// announces 0, as Redis's `replicationGetSlaveOffset` (CLUSTER SHARDS shows it `loading`).
pub fn my_offset() -> u64 {
    let r = crate::state::replication::repl();
    if crate::state::replication::is_replica() && r.sync_in_progress.get() {
        0
    } else {
        crate::state::replication::offset()
    }
}

/// Settings the bus and the redirections read, refreshed from CONFIG when one changes.
#[derive(Clone, Debug)]
pub struct Settings {
    pub node_timeout: i64,
    pub announce_ip: String,
    pub announce_hostname: String,
    pub announce_port: u16,
    pub announce_tls_port: u16,
    pub announce_bus_port: u16,
    pub require_full_coverage: bool,
    pub allow_reads_when_down: bool,
    pub allow_pubsubshard_when_down: bool,
    pub link_sendbuf_limit: usize,
    /// `ip`, `hostname` or `unknown-endpoint`.
    pub preferred_endpoint: Endpoint,
    pub replica_no_failover: bool,
    pub replica_validity_factor: i64,
    pub migration_barrier: usize,
    pub allow_replica_migration: bool,
    /// `repl-ping-replica-period`, in ms (a replica's data age allowance).
    pub repl_ping_period_ms: i64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endpoint {
    Ip,
    Hostname,
    Unknown,
}

impl Settings {
    pub fn from_config(c: &Config) -> Settings {
        Settings {
            node_timeout: c.get_i64("cluster-node-timeout"),
            announce_ip: c.get("cluster-announce-ip").to_string(),
            announce_hostname: c.get("cluster-announce-hostname").to_string(),
            announce_port: c.get_u64("cluster-announce-port") as u16,
            announce_tls_port: c.get_u64("cluster-announce-tls-port") as u16,
            announce_bus_port: c.get_u64("cluster-announce-bus-port") as u16,
            require_full_coverage: c.get_bool("cluster-require-full-coverage"),
            allow_reads_when_down: c.get_bool("cluster-allow-reads-when-down"),
            allow_pubsubshard_when_down: c.get_bool("cluster-allow-pubsubshard-when-down"),
            link_sendbuf_limit: c.get_u64("cluster-link-sendbuf-limit") as usize,
            preferred_endpoint: match c.get("cluster-preferred-endpoint-type") {
                "hostname" => Endpoint::Hostname,
                "unknown-endpoint" => Endpoint::Unknown,
                _ => Endpoint::Ip,
            },
            replica_no_failover: c.get_bool("cluster-replica-no-failover"),
            replica_validity_factor: c.get_i64("cluster-replica-validity-factor"),
            migration_barrier: c.get_u64("cluster-migration-barrier") as usize,
            allow_replica_migration: c.get_bool("cluster-allow-replica-migration"),
            repl_ping_period_ms: c.get_i64("repl-ping-replica-period") * 1000,
        }
    }
}

/// One node as this node sees it (Redis's `clusterNode`).
#[derive(Debug)]
pub struct Node {
    pub name: NodeName,
    pub flags: u16,
    pub config_epoch: u64,
    pub slots: Box<SlotBitmap>,
    pub numslots: usize,
    pub slaveof: Option<NodeName>,
    pub replicas: Vec<NodeName>,
    pub ctime: i64,
    pub ping_sent: i64,
    pub pong_received: i64,
    pub data_received: i64,
    pub fail_time: i64,
    pub voted_time: i64,
    pub repl_offset_time: i64,
    pub orphaned_time: i64,
    pub repl_offset: u64,
    pub ip: String,
    pub hostname: String,
    pub port: u16,
    pub pport: u16,
    pub cport: u16,
    /// The link this node opened towards it, and the one it accepted from it.
    pub link: Option<u64>,
    pub inbound_link: Option<u64>,
    /// Masters that reported this node as failing, with when they last did.
    pub fail_reports: Vec<(NodeName, i64)>,
    last_in_ping_gossip: u64,
}

impl Node {
    pub fn new(name: NodeName, flags: u16, now: i64) -> Node {
        Node {
            name,
            flags,
            config_epoch: 0,
            slots: Box::new([0; SLOTS / 8]),
            numslots: 0,
            slaveof: None,
            replicas: Vec::new(),
            ctime: now,
            ping_sent: 0,
            pong_received: 0,
            data_received: 0,
            fail_time: 0,
            voted_time: 0,
            repl_offset_time: 0,
            orphaned_time: 0,
            repl_offset: 0,
            ip: String::new(),
            hostname: String::new(),
            port: 0,
            pport: 0,
            cport: 0,
            link: None,
            inbound_link: None,
            fail_reports: Vec::new(),
            last_in_ping_gossip: 0,
        }
    }
    pub fn is_master(&self) -> bool {
        self.flags & nf::MASTER != 0
    }
    pub fn is_replica(&self) -> bool {
        self.flags & nf::SLAVE != 0
    }
    pub fn in_handshake(&self) -> bool {
        self.flags & nf::HANDSHAKE != 0
    }
    pub fn timed_out(&self) -> bool {
        self.flags & nf::PFAIL != 0
    }
    pub fn failed(&self) -> bool {
        self.flags & nf::FAIL != 0
    }
    pub fn has_slot(&self, slot: u16) -> bool {
        wire::slot_bit(&self.slots, slot)
    }
    pub fn name_str(&self) -> &str {
        wire::name_str(&self.name)
    }
}

/// One TCP connection of the bus (Redis's `clusterLink`). The network side owns the socket;
/// this end holds the sender its writer drains, so dropping the link closes the connection.
pub struct Link {
    pub id: u64,
    pub node: Option<NodeName>,
    pub inbound: bool,
    pub ctime: i64,
    tx: mpsc::UnboundedSender<Vec<u8>>,
    /// Bytes handed to the writer and not yet written (CLUSTER LINKS `send-buffer-*`).
    pub pending: Arc<AtomicUsize>,
    /// The peer's address, and this end's (a MEET teaches a node its own address).
    pub peer_ip: String,
    pub local_ip: String,
    /// An outbound link whose connection is not made yet.
    pub connecting: bool,
}

/// What the network side must do after a call: connect outbound links.
pub struct Connect {
    pub link: u64,
    pub ip: String,
    pub port: u16,
    pub rx: mpsc::UnboundedReceiver<Vec<u8>>,
    pub pending: Arc<AtomicUsize>,
}

/// What `clusterBeforeSleep` does once the current event is handled.
pub mod todo {
    pub const UPDATE_STATE: u8 = 1 << 1;
    pub const SAVE_CONFIG: u8 = 1 << 2;
    pub const FSYNC_CONFIG: u8 = 1 << 3;
}

/// The whole view (Redis's `clusterState`).
pub struct ClusterState {
    pub myself: NodeName,
    pub current_epoch: u64,
    pub last_vote_epoch: u64,
    pub ok: bool,
    pub size: usize,
    pub nodes: HashMap<NodeName, Node>,
    /// Forgotten nodes not re-added from gossip until the time (ms).
    pub blacklist: HashMap<NodeName, i64>,
    pub slots: Vec<Option<NodeName>>,
    pub migrating_to: BTreeMap<u16, NodeName>,
    pub importing_from: BTreeMap<u16, NodeName>,
    /// Slots an atomic migration is sending away: when their owner changes, the migration
    /// trims their keys (journaled, so this node's replicas drop them too), not the bus.
    pub exporting: std::collections::BTreeSet<u16>,
    owner_not_claiming: Box<SlotBitmap>,
    pub links: HashMap<u64, Link>,
    next_link: u64,
    pub stats_sent: [u64; wire::msg_type::COUNT as usize],
    pub stats_received: [u64; wire::msg_type::COUNT as usize],
    pub stats_pfail_nodes: usize,
    pub links_buffer_limit_exceeded: u64,
    pub todo: u8,
    iteration: u64,
    pings_sent: u64,
    first_update_call: i64,
    among_minority_time: i64,
    pub settings: Settings,
    /// The ports this node announces: clients (TLS or plain), plain when the first is TLS,
    /// and the bus.
    pub my_port: u16,
    pub my_pport: u16,
    pub my_cport: u16,
    pub conf_path: PathBuf,
    /// Outbound connections the network side has to open (`Connect`).
    connects: Vec<Connect>,
    /// Log lines for Redis's log, written by the caller once the lock is released.
    pub log: Vec<(crate::state::redis_log::Level, String)>,
    /// The slot table changed: redirections read it anew.
    slots_changed: bool,
    /// What this node's replication offset is (set by the caller before each use).
    pub my_repl_offset: u64,
    /// What the rest of the server has to do once the lock is released.
    pub fx: bus::Effects,
    /// Elections and manual failover (`failover.rs`).
    pub failover: failover::Failover,
    /// DEBUG DROP-CLUSTER-PACKET-FILTER: messages of this type are dropped (-1: none).
    pub drop_filter: i64,
    /// The state of the generator of node names (handshake nodes, a hard reset).
    rng: u64,
}

/// The slot table as redirections read it, without the state's lock: per slot, whether
/// this node serves it plainly (owner, nothing migrating or importing); with the state `ok`
/// bit. Anything else takes the lock.
struct SlotView {
    served_here: Box<[AtomicU8]>,
    ok: AtomicBool,
}

/// The cluster service: disabled (standalone) or the state behind its lock.
pub struct Cluster {
    state: Mutex<ClusterState>,
    view: SlotView,
    /// Atomic slot migrations (CLUSTER MIGRATION), apart from the bus's state.
    pub migrations: migration::Migrations,
}

/// Where a command's keys send it (Redis's `getNodeByQuery` results).
#[derive(Debug, PartialEq, Eq)]
pub enum Route {
    Here,
    CrossSlot,
    TryAgain,
    Down,
    DownReadOnly,
    DownUnbound,
    Moved(u16, String),
    Ask(u16, String),
}

impl Route {
    pub fn error_text(&self) -> String {
        match self {
            Route::Here => String::new(),
            Route::CrossSlot => "CROSSSLOT Keys in request don't hash to the same slot".into(),
            Route::TryAgain => "TRYAGAIN Multiple keys request during rehashing of slot".into(),
            Route::Down => "CLUSTERDOWN The cluster is down".into(),
            Route::DownReadOnly => {
                "CLUSTERDOWN The cluster is down and only accepts read commands".into()
            }
            Route::DownUnbound => "CLUSTERDOWN Hash slot not served".into(),
            Route::Moved(slot, addr) => format!("MOVED {slot} {addr}"),
            Route::Ask(slot, addr) => format!("ASK {slot} {addr}"),
        }
    }
}

/// What a query looks like to the router: its keys (by slot), whether it writes, whether it
/// is a shard channel command, whether the client sent ASKING or READONLY.
pub struct Query<'a> {
    pub keys: &'a [&'a [u8]],
    pub write: bool,
    pub pubsubshard: bool,
    pub asking: bool,
    pub readonly: bool,
    pub migrate: bool,
}

/// A seed for node names: the clock and the process id (names only need to differ
/// between nodes, as Redis's `getRandomHexChars`).
fn name_seed() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    (t as u64) ^ ((t >> 64) as u64) ^ (std::process::id() as u64).rotate_left(32)
}

/// 40 random hex characters from the splitmix64 sequence at `state`.
pub fn random_name(state: &mut u64) -> NodeName {
    let mut name = [0u8; 40];
    let hex = b"0123456789abcdef";
    for chunk in name.chunks_mut(16) {
        *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = *state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        for (i, b) in chunk.iter_mut().enumerate() {
            *b = hex[((z >> (i * 4)) & 0xf) as usize];
        }
    }
    name
}

impl Cluster {
    /// Cluster mode: loads `cluster-config-file` (relative to `dir`) or starts as a new
    /// node with a random name, and writes the file at once, as Redis's `clusterInit`.
    pub fn start(config: &Config, client_port: u16) -> Result<Cluster, String> {
        let settings = Settings::from_config(config);
        let dir = PathBuf::from(config.get("dir"));
        let file = config.get("cluster-config-file");
        let conf_path = if std::path::Path::new(file).is_absolute() {
            PathBuf::from(file)
        } else {
            dir.join(file)
        };
        let mut seed = name_seed();
        let mut st = ClusterState::new(random_name(&mut seed), settings);
        st.rng = seed;
        st.conf_path = conf_path.clone();
        st.set_ports(config, client_port);
        let loaded = nodes_conf::load(&mut st, &conf_path)?;
        if !loaded {
            let me = st.myself;
            let now = crate::util::clock::now_ms();
            let mut node = Node::new(me, nf::MYSELF | nf::MASTER, now);
            node.port = st.my_port;
            node.pport = st.my_pport;
            node.cport = st.my_cport;
            node.hostname = st.settings.announce_hostname.clone();
            st.nodes.insert(me, node);
            st.log.push((
                crate::state::redis_log::Level::Notice,
                format!(
                    "No cluster configuration found, I'm {}",
                    wire::name_str(&me)
                ),
            ));
        } else if let Some(me) = st.nodes.get_mut(&st.myself.clone()) {
            // The ports in force win over those the file remembers.
            me.port = st.my_port;
            me.pport = st.my_pport;
            me.cport = st.my_cport;
            me.hostname = st.settings.announce_hostname.clone();
        }
        if !st.settings.announce_ip.is_empty() {
            let ip = st.settings.announce_ip.clone();
            if let Some(me) = st.me_mut() {
                me.ip = ip;
            }
        }
        let nofailover = st.settings.replica_no_failover;
        if let Some(me) = st.me_mut() {
            if nofailover {
                me.flags |= nf::NOFAILOVER;
            } else {
                me.flags &= !nf::NOFAILOVER;
            }
        }
        nodes_conf::save(&mut st, true).map_err(|e| {
            format!(
                "Fatal: can't update cluster config file {}: {e}",
                conf_path.display()
            )
        })?;
        st.slots_changed = true;
        let cluster = Cluster {
            state: Mutex::new(st),
            view: SlotView::new(),
            migrations: migration::Migrations::default(),
        };
        cluster.with(|_| {});
        Ok(cluster)
    }

    /// Runs `f` on the state, then what Redis's `clusterBeforeSleep` does (state update,
    /// config save) and refreshes the redirection table.
    pub fn with<R>(&self, f: impl FnOnce(&mut ClusterState) -> R) -> R {
        let mut st = self.state.lock();
        let r = f(&mut st);
        self.before_sleep(&mut st);
        r
    }

    /// The state's lock without the after-work (reads).
    pub fn lock(&self) -> MutexGuard<'_, ClusterState> {
        self.state.lock()
    }

    fn before_sleep(&self, st: &mut ClusterState) {
        let todo = std::mem::take(&mut st.todo);
        if todo & todo::UPDATE_STATE != 0 {
            st.update_state();
        }
        if todo & todo::SAVE_CONFIG != 0 {
            if let Err(e) = nodes_conf::save(st, todo & todo::FSYNC_CONFIG != 0) {
                st.log.push((
                    crate::state::redis_log::Level::Warning,
                    format!("Fatal: can't update cluster config file: {e}"),
                ));
            }
        }
        if st.slots_changed || self.view.ok.load(Ordering::Relaxed) != st.ok {
            st.slots_changed = false;
            self.view.ok.store(st.ok, Ordering::Relaxed);
            let me = st.myself;
            for (slot, owner) in st.slots.iter().enumerate() {
                let plain = owner.as_ref() == Some(&me)
                    && !st.migrating_to.contains_key(&(slot as u16))
                    && !st.importing_from.contains_key(&(slot as u16));
                self.view.served_here[slot].store(plain as u8, Ordering::Relaxed);
            }
        }
    }

    /// Connections the network side has to open.
    pub fn take_connects(&self) -> Vec<Connect> {
        std::mem::take(&mut self.state.lock().connects)
    }

    /// Where a query goes (Redis's `getNodeByQuery`). `exists` says whether a key is in
    /// database 0, asked only for slots being migrated or imported.
    pub fn route(&self, q: &Query<'_>, exists: &dyn Fn(&[u8]) -> bool) -> Route {
        let Some(first) = q.keys.first() else {
            return Route::Here;
        };
        let slot = key_slot(first);
        let mut multiple = false;
        for k in &q.keys[1..] {
            if *k != *first {
                if key_slot(k) != slot {
                    return Route::CrossSlot;
                }
                multiple = true;
            }
        }
        // The common case without the lock: the slot is ours, stable, and the cluster is up.
        if self.served_plainly(slot) {
            return Route::Here;
        }
        let st = self.state.lock();
        let Some(owner) = st.slots[slot as usize] else {
            return Route::DownUnbound;
        };
        let migrating = owner == st.myself && st.migrating_to.contains_key(&slot);
        let importing = !migrating && st.importing_from.contains_key(&slot);
        let (mut missing, mut existing) = (0, 0);
        if (migrating || importing) && !q.pubsubshard {
            for k in q.keys {
                if exists(k) {
                    existing += 1;
                } else {
                    missing += 1;
                }
            }
        }
        if !st.ok {
            if q.pubsubshard {
                if !st.settings.allow_pubsubshard_when_down {
                    return Route::Down;
                }
            } else if !st.settings.allow_reads_when_down {
                return Route::Down;
            } else if q.write {
                return Route::DownReadOnly;
            }
        }
        if (migrating || importing) && q.migrate {
            return Route::Here;
        }
        if migrating && missing > 0 {
            if existing > 0 {
                return Route::TryAgain;
            }
            let target = st.migrating_to.get(&slot).copied();
            return match target.and_then(|t| st.nodes.get(&t)) {
                Some(n) => Route::Ask(slot, st.endpoint_of(n)),
                None => Route::DownUnbound,
            };
        }
        if importing && q.asking {
            if multiple && missing > 0 {
                return Route::TryAgain;
            }
            return Route::Here;
        }
        let me = st.nodes.get(&st.myself);
        if (q.readonly || q.pubsubshard)
            && !q.write
            && me.is_some_and(|m| m.is_replica() && m.slaveof == Some(owner))
        {
            return Route::Here;
        }
        if owner == st.myself {
            return Route::Here;
        }
        match st.nodes.get(&owner) {
            Some(n) => Route::Moved(slot, st.endpoint_of(n)),
            None => Route::DownUnbound,
        }
    }

    /// Where a blocked client's wait ends with an error (Redis's
    /// `clusterRedirectBlockedClientIfNeeded`): CLUSTERDOWN while the cluster is down, MOVED
    /// (or CLUSTERDOWN unbound) once its key's slot is neither served nor imported here. Given
    /// each waiter's (id, first key, whether it reads from a replica); the blocking commands'
    /// keys share one slot.
    pub fn blocked_redirects(&self, waiting: &[(u64, Bytes, bool)]) -> Vec<(u64, Route)> {
        if waiting.is_empty() {
            return Vec::new();
        }
        let st = self.state.lock();
        let me = st.nodes.get(&st.myself);
        let mut out = Vec::new();
        for (id, key, replica_read) in waiting {
            if !st.ok {
                out.push((*id, Route::Down));
                continue;
            }
            let slot = key_slot(key);
            let mut owner = st.slots[slot as usize];
            if *replica_read && me.is_some_and(|m| m.is_replica() && m.slaveof == owner) {
                owner = Some(st.myself);
            }
            if owner == Some(st.myself) || st.importing_from.contains_key(&slot) {
                continue;
            }
            out.push((
                *id,
                match owner.and_then(|o| st.nodes.get(&o)) {
                    Some(n) => Route::Moved(slot, st.endpoint_of(n)),
                    None => Route::DownUnbound,
                },
            ));
        }
        out
    }

    /// Whether `slot` is served here, neither migrating nor importing, and the cluster is
    /// up: any command on it runs here whatever its flags. Two loads, no lock.
    #[inline]
    pub fn served_plainly(&self, slot: u16) -> bool {
        self.view.ok.load(Ordering::Relaxed)
            && self.view.served_here[slot as usize].load(Ordering::Relaxed) == 1
    }

    /// Whether the cluster is up from this node's view.
    pub fn is_ok(&self) -> bool {
        self.view.ok.load(Ordering::Relaxed)
    }
}

impl SlotView {
    fn new() -> SlotView {
        SlotView {
            served_here: (0..SLOTS).map(|_| AtomicU8::new(0)).collect(),
            ok: AtomicBool::new(false),
        }
    }
}

impl ClusterState {
    fn new(myself: NodeName, settings: Settings) -> ClusterState {
        ClusterState {
            myself,
            current_epoch: 0,
            last_vote_epoch: 0,
            ok: false,
            size: 0,
            nodes: HashMap::new(),
            blacklist: HashMap::new(),
            slots: vec![None; SLOTS],
            migrating_to: BTreeMap::new(),
            importing_from: BTreeMap::new(),
            exporting: Default::default(),
            owner_not_claiming: Box::new([0; SLOTS / 8]),
            links: HashMap::new(),
            next_link: 1,
            stats_sent: [0; wire::msg_type::COUNT as usize],
            stats_received: [0; wire::msg_type::COUNT as usize],
            stats_pfail_nodes: 0,
            links_buffer_limit_exceeded: 0,
            todo: 0,
            iteration: 0,
            pings_sent: 0,
            first_update_call: 0,
            among_minority_time: 0,
            settings,
            my_port: 0,
            my_pport: 0,
            my_cport: 0,
            conf_path: PathBuf::new(),
            connects: Vec::new(),
            log: Vec::new(),
            slots_changed: true,
            my_repl_offset: 0,
            fx: bus::Effects::default(),
            failover: failover::Failover::default(),
            drop_filter: -1,
            rng: name_seed(),
        }
    }

    /// Redis's `deriveAnnouncedPorts`, from the settings and the port listened on.
    pub fn set_ports(&mut self, config: &Config, client_port: u16) {
        let tls_port = config.get_u64("tls-port") as u16;
        let tls_cluster = false;
        let mut port = if tls_cluster { tls_port } else { client_port };
        let mut pport = if tls_cluster { client_port } else { 0 };
        let bus = config.get_u64("cluster-port") as u16;
        let mut cport = if bus != 0 {
            bus
        } else {
            client_port.wrapping_add(10000)
        };
        let s = &self.settings;
        if tls_cluster {
            if s.announce_tls_port != 0 {
                port = s.announce_tls_port;
            }
            if s.announce_port != 0 {
                pport = s.announce_port;
            }
        } else if s.announce_port != 0 {
            port = s.announce_port;
        }
        if s.announce_bus_port != 0 {
            cport = s.announce_bus_port;
        }
        self.my_port = port;
        self.my_pport = pport;
        self.my_cport = cport;
        let me = self.myself;
        if let Some(n) = self.nodes.get_mut(&me) {
            n.port = port;
            n.pport = pport;
            n.cport = cport;
        }
    }

    /// The settings changed (CONFIG SET): what this node announces follows them
    /// (Redis's clusterUpdateMyself* functions).
    pub fn configure(&mut self, config: &Config, client_port: u16) {
        self.settings = Settings::from_config(config);
        self.set_ports(config, client_port);
        let s = self.settings.clone();
        let nofailover = s.replica_no_failover;
        if let Some(m) = self.me_mut() {
            m.hostname = s.announce_hostname.clone();
            if !s.announce_ip.is_empty() {
                m.ip = s.announce_ip.clone();
            }
            if nofailover {
                m.flags |= nf::NOFAILOVER;
            } else {
                m.flags &= !nf::NOFAILOVER;
            }
        }
        self.todo(todo::SAVE_CONFIG);
    }

    pub fn me(&self) -> Option<&Node> {
        self.nodes.get(&self.myself)
    }
    pub fn me_mut(&mut self) -> Option<&mut Node> {
        let me = self.myself;
        self.nodes.get_mut(&me)
    }
    pub fn myself_is_master(&self) -> bool {
        self.me().is_some_and(Node::is_master)
    }
    pub fn my_master(&self) -> Option<NodeName> {
        self.me().and_then(|m| m.slaveof)
    }

    /// The address a redirection names: `endpoint:port` (Redis's `getPreferredEndpoint`).
    pub fn endpoint_of(&self, n: &Node) -> String {
        format!("{}:{}", self.preferred_endpoint(n), n.port)
    }

    pub fn preferred_endpoint<'a>(&self, n: &'a Node) -> &'a str {
        match self.settings.preferred_endpoint {
            Endpoint::Ip => &n.ip,
            Endpoint::Hostname if n.hostname.is_empty() => "?",
            Endpoint::Hostname => &n.hostname,
            Endpoint::Unknown => "",
        }
    }

    pub fn lookup(&self, name: &[u8]) -> Option<&Node> {
        let name = wire::parse_name(name)?;
        self.nodes.get(&name)
    }

    pub fn lookup_name(&self, name: &[u8]) -> Option<NodeName> {
        self.lookup(name).map(|n| n.name)
    }

    pub fn todo(&mut self, flags: u8) {
        self.todo |= flags;
    }

    pub fn log(&mut self, level: crate::state::redis_log::Level, msg: String) {
        self.log.push((level, msg));
    }

    // ---- slots (Redis's clusterAddSlot, clusterDelSlot, ...) ----

    pub fn add_slot(&mut self, name: NodeName, slot: u16) -> bool {
        if self.slots[slot as usize].is_some() {
            return false;
        }
        let Some(n) = self.nodes.get_mut(&name) else {
            return false;
        };
        if !wire::slot_bit(&n.slots, slot) {
            wire::set_slot_bit(&mut n.slots, slot, true);
            n.numslots += 1;
            // A master that gets its first slot is a migration target for orphaned
            // replicas (Redis's clusterNodeSetSlotBit).
            if n.numslots == 1 && self.nodes_have_replicas() {
                if let Some(n) = self.nodes.get_mut(&name) {
                    n.flags |= nf::MIGRATE_TO;
                }
            }
        }
        self.slots[slot as usize] = Some(name);
        self.slots_changed = true;
        true
    }

    fn nodes_have_replicas(&self) -> bool {
        self.nodes
            .values()
            .any(|n| n.is_master() && !n.replicas.is_empty())
    }

    pub fn del_slot(&mut self, slot: u16) -> bool {
        let Some(owner) = self.slots[slot as usize].take() else {
            return false;
        };
        // The shard this node is in (as its master or a replica) no longer serves the slot:
        // its shard channels go (Redis's clusterDelSlot).
        let my_master = self.nodes.get(&self.myself).and_then(|m| m.slaveof);
        if owner == self.myself || Some(owner) == my_master {
            self.fx.channel_slots.push(slot);
        }
        if let Some(n) = self.nodes.get_mut(&owner) {
            if wire::slot_bit(&n.slots, slot) {
                wire::set_slot_bit(&mut n.slots, slot, false);
                n.numslots -= 1;
            }
        }
        wire::set_slot_bit(&mut self.owner_not_claiming, slot, false);
        self.slots_changed = true;
        true
    }

    pub fn del_node_slots(&mut self, name: NodeName) -> usize {
        let mut deleted = 0;
        for slot in 0..SLOTS as u16 {
            if self.slots[slot as usize] == Some(name) {
                self.del_slot(slot);
                deleted += 1;
            }
        }
        deleted
    }

    pub fn close_all_slots(&mut self) {
        self.migrating_to.clear();
        self.importing_from.clear();
        self.slots_changed = true;
    }

    pub fn set_migrating(&mut self, slot: u16, to: Option<NodeName>) {
        match to {
            Some(n) => self.migrating_to.insert(slot, n),
            None => self.migrating_to.remove(&slot),
        };
        self.slots_changed = true;
    }

    pub fn set_importing(&mut self, slot: u16, from: Option<NodeName>) {
        match from {
            Some(n) => self.importing_from.insert(slot, n),
            None => self.importing_from.remove(&slot),
        };
        self.slots_changed = true;
    }

    /// The runs of consecutive slots with one owner, in slot order: (first, last, owner);
    /// unassigned slots are in none.
    pub fn slot_runs(&self) -> Vec<(u16, u16, NodeName)> {
        let mut out = Vec::new();
        let mut start = 0usize;
        while start < SLOTS {
            let Some(owner) = self.slots[start] else {
                start += 1;
                continue;
            };
            let mut end = start;
            while end + 1 < SLOTS && self.slots[end + 1] == Some(owner) {
                end += 1;
            }
            out.push((start as u16, end as u16, owner));
            start = end + 1;
        }
        out
    }

    /// A slot nobody claims, or whose owner stopped claiming it (Redis's `isSlotUnclaimed`).
    pub fn slot_is_unclaimed(&self, slot: u16) -> bool {
        self.slots[slot as usize].is_none() || wire::slot_bit(&self.owner_not_claiming, slot)
    }

    // ---- nodes ----

    pub fn add_node(&mut self, node: Node) {
        self.nodes.insert(node.name, node);
    }

    /// Removes a node, its slots, its links and the failure reports it made (Redis's
    /// `clusterDelNode`).
    pub fn del_node(&mut self, name: NodeName) {
        for slot in 0..SLOTS as u16 {
            if self.importing_from.get(&slot) == Some(&name) {
                self.importing_from.remove(&slot);
            }
            if self.migrating_to.get(&slot) == Some(&name) {
                self.migrating_to.remove(&slot);
            }
            if self.slots[slot as usize] == Some(name) {
                self.slots[slot as usize] = None;
            }
        }
        self.slots_changed = true;
        for n in self.nodes.values_mut() {
            n.fail_reports.retain(|(r, _)| *r != name);
        }
        if let Some(n) = self.nodes.remove(&name) {
            if let Some(master) = n.slaveof {
                if let Some(m) = self.nodes.get_mut(&master) {
                    m.replicas.retain(|r| *r != name);
                }
            }
            for r in &n.replicas {
                if let Some(rep) = self.nodes.get_mut(r) {
                    rep.slaveof = None;
                }
            }
            if let Some(l) = n.link {
                self.links.remove(&l);
            }
            if let Some(l) = n.inbound_link {
                self.links.remove(&l);
            }
        }
    }

    /// A handshake node learns its real name (Redis's `clusterRenameNode`).
    fn rename_node(&mut self, old: NodeName, new: NodeName) {
        let Some(mut n) = self.nodes.remove(&old) else {
            return;
        };
        n.name = new;
        for l in [n.link, n.inbound_link].into_iter().flatten() {
            if let Some(link) = self.links.get_mut(&l) {
                link.node = Some(new);
            }
        }
        self.nodes.insert(new, n);
    }

    pub fn set_node_as_master(&mut self, name: NodeName) {
        let Some(n) = self.nodes.get(&name) else {
            return;
        };
        if n.is_master() {
            return;
        }
        let master = n.slaveof;
        if let Some(m) = master {
            if let Some(mn) = self.nodes.get_mut(&m) {
                mn.replicas.retain(|r| *r != name);
            }
        }
        let me = self.myself;
        if let Some(n) = self.nodes.get_mut(&name) {
            if master.is_some() && name != me {
                n.flags |= nf::MIGRATE_TO;
            }
            n.flags &= !nf::SLAVE;
            n.flags |= nf::MASTER;
            n.slaveof = None;
        }
        self.todo(todo::SAVE_CONFIG | todo::UPDATE_STATE);
    }

    pub fn failure_reports(&mut self, name: NodeName, now: i64) -> usize {
        let maxtime = self.settings.node_timeout * 2;
        match self.nodes.get_mut(&name) {
            Some(n) => {
                n.fail_reports.retain(|(_, t)| now - t <= maxtime);
                n.fail_reports.len()
            }
            None => 0,
        }
    }

    /// The highest config epoch of any node (Redis's `clusterGetMaxEpoch`).
    pub fn max_epoch(&self) -> u64 {
        self.nodes
            .values()
            .map(|n| n.config_epoch)
            .max()
            .unwrap_or(0)
            .max(self.current_epoch)
    }

    /// Redis's `clusterBumpConfigEpochWithoutConsensus`: true when the epoch was bumped.
    pub fn bump_epoch_without_consensus(&mut self) -> bool {
        let max = self.max_epoch();
        let mine = self.me().map(|m| m.config_epoch).unwrap_or(0);
        if mine == 0 || mine != max {
            self.current_epoch += 1;
            let e = self.current_epoch;
            if let Some(m) = self.me_mut() {
                m.config_epoch = e;
            }
            self.todo(todo::SAVE_CONFIG | todo::FSYNC_CONFIG);
            self.log(
                crate::state::redis_log::Level::Warning,
                format!("New configEpoch set to {e}"),
            );
            true
        } else {
            false
        }
    }

    /// Makes this node a replica of `master` (Redis's `clusterSetMaster`); the caller
    /// starts replication from the master's address.
    pub fn set_master(&mut self, master: NodeName) {
        let me = self.myself;
        let was_master = self.myself_is_master();
        if was_master {
            if let Some(m) = self.me_mut() {
                m.flags &= !(nf::MASTER | nf::MIGRATE_TO);
                m.flags |= nf::SLAVE;
            }
            self.close_all_slots();
        } else if let Some(old) = self.my_master() {
            if let Some(o) = self.nodes.get_mut(&old) {
                o.replicas.retain(|r| *r != me);
            }
        }
        if let Some(m) = self.me_mut() {
            m.slaveof = Some(master);
        }
        if let Some(mn) = self.nodes.get_mut(&master) {
            if !mn.replicas.contains(&me) {
                mn.replicas.push(me);
            }
            self.fx.replicate_to = Some((mn.ip.clone(), mn.port));
        }
        self.reset_manual_failover();
    }

    /// Redis's `clusterUpdateState`.
    pub fn update_state(&mut self) {
        const WRITABLE_DELAY: i64 = 2000;
        const MAX_REJOIN_DELAY: i64 = 5000;
        const MIN_REJOIN_DELAY: i64 = 500;
        let now = crate::util::clock::now_ms();
        if self.first_update_call == 0 {
            self.first_update_call = now;
        }
        if self.myself_is_master() && !self.ok && now - self.first_update_call < WRITABLE_DELAY {
            // Try again soon (Redis re-runs this from its cron while the state is fail).
            return;
        }
        let mut new_ok = true;
        if self.settings.require_full_coverage {
            // Every slot assigned, to a node not failed (one lookup a run of slots).
            let runs = self.slot_runs();
            let covered: usize = runs.iter().map(|(a, b, _)| (b - a) as usize + 1).sum();
            let all_up = runs
                .iter()
                .all(|(_, _, o)| self.nodes.get(o).is_some_and(|n| !n.failed()));
            new_ok = covered == SLOTS && all_up;
        }
        let mut size = 0;
        let mut reachable = 0;
        for n in self.nodes.values() {
            if n.is_master() && n.numslots > 0 {
                size += 1;
                if n.flags & (nf::FAIL | nf::PFAIL) == 0 {
                    reachable += 1;
                }
            }
        }
        self.size = size;
        if reachable < size / 2 + 1 {
            new_ok = false;
            self.among_minority_time = now;
        }
        if new_ok != self.ok {
            let rejoin = self
                .settings
                .node_timeout
                .clamp(MIN_REJOIN_DELAY, MAX_REJOIN_DELAY);
            if new_ok && self.myself_is_master() && now - self.among_minority_time < rejoin {
                return;
            }
            self.log(
                crate::state::redis_log::Level::Warning,
                format!(
                    "Cluster state changed: {}",
                    if new_ok { "ok" } else { "fail" }
                ),
            );
            self.ok = new_ok;
            self.slots_changed = true;
        }
    }

    /// CLUSTER MEET: a node in handshake at that address, unless one is there already
    /// (Redis's `clusterStartHandshake`). The address is already normalized.
    pub fn start_handshake(&mut self, ip: String, port: u16, cport: u16, now: i64) -> bool {
        let in_progress = self.nodes.values().any(|n| {
            n.in_handshake() && n.ip.eq_ignore_ascii_case(&ip) && n.port == port && n.cport == cport
        });
        if in_progress {
            return false;
        }
        let mut n = Node::new(random_name(&mut self.rng), nf::HANDSHAKE | nf::MEET, now);
        n.ip = ip;
        n.port = port;
        n.cport = cport;
        self.add_node(n);
        true
    }

    /// CLUSTER RESET (Redis's `clusterReset`): a replica becomes an empty master, every slot
    /// and every other node is forgotten; HARD also takes a new name and zeroes the epochs.
    pub fn reset(&mut self, hard: bool, now: i64) {
        let me = self.myself;
        if !self.myself_is_master() {
            self.set_node_as_master(me);
        }
        self.close_all_slots();
        for slot in 0..SLOTS as u16 {
            self.del_slot(slot);
        }
        let others: Vec<NodeName> = self.nodes.keys().filter(|n| **n != me).copied().collect();
        for n in others {
            self.del_node(n);
        }
        if hard {
            self.current_epoch = 0;
            self.last_vote_epoch = 0;
            let new = random_name(&mut self.rng);
            if let Some(m) = self.me_mut() {
                m.config_epoch = 0;
            }
            self.rename_node(me, new);
            self.myself = new;
            self.log(
                crate::state::redis_log::Level::Notice,
                format!("Node hard reset, now I'm {}", wire::name_str(&new)),
            );
        }
        let _ = now;
        self.todo(todo::SAVE_CONFIG | todo::UPDATE_STATE | todo::FSYNC_CONFIG);
    }

    // ---- links ----

    fn new_link(
        &mut self,
        node: Option<NodeName>,
        inbound: bool,
        now: i64,
    ) -> (u64, mpsc::UnboundedReceiver<Vec<u8>>, Arc<AtomicUsize>) {
        let id = self.next_link;
        self.next_link += 1;
        let (tx, rx) = mpsc::unbounded_channel();
        let pending = Arc::new(AtomicUsize::new(0));
        self.links.insert(
            id,
            Link {
                id,
                node,
                inbound,
                ctime: now,
                tx,
                pending: pending.clone(),
                peer_ip: String::new(),
                local_ip: String::new(),
                connecting: !inbound,
            },
        );
        (id, rx, pending)
    }

    /// Drops a link: its connection closes (Redis's `freeClusterLink`).
    pub fn free_link(&mut self, id: u64) {
        if let Some(l) = self.links.remove(&id) {
            if let Some(name) = l.node {
                if let Some(n) = self.nodes.get_mut(&name) {
                    if n.link == Some(id) {
                        n.link = None;
                    }
                    if n.inbound_link == Some(id) {
                        n.inbound_link = None;
                    }
                }
            }
        }
    }

    /// Sends an encoded message on a link (Redis's `clusterSendMessage`).
    pub fn send_bytes(&mut self, link: u64, bytes: Vec<u8>, ty: u16) {
        if let Some(l) = self.links.get(&link) {
            l.pending.fetch_add(bytes.len(), Ordering::Relaxed);
            if l.tx.send(bytes).is_ok() {
                if let Some(c) = self.stats_sent.get_mut(ty as usize) {
                    *c += 1;
                }
            }
        }
    }
}
