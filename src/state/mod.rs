//! The shared state every command acts on: the `Server` (store, configuration, statistics,
//! connection settings), client state and the client registry, pub/sub and keyspace
//! notifications, WATCH, the exec gate, the TTL monitors' counters, and the hooks through
//! which the store reports key and document changes. Commands use it; the network side
//! (`server/`) drives it.

pub mod acl;
pub mod blocking;
pub mod client;
pub mod cluster;
pub mod cmdstats;
pub mod gate;
pub mod lazyfree;
pub mod listeners;
pub mod outbox;
pub mod pause;
pub mod pubsub;
pub mod redis_log;
pub mod replication;
pub mod slowlog;
pub mod tracking;
pub mod ttl;
pub mod watches;

use crate::config::Config;
use crate::store::collections::{Change, DocHooks};
use crate::store::encoding::{EncodingLimits, LIMITS};
use crate::store::{KeyHooks, Removal, Store};
use client::ClientRegistry;
use parking_lot::RwLock;
use pubsub::PubSub;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::watch;
use watches::Watches;

pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// What `INFO` and `HELLO` report as `redis_version`: clients gate features on it (redis-py's
/// client-side cache wants 7.4). The commands and options Redis 7.1–7.4 added are here; what
/// differs is in docs/differences-redis.md (sentinel and modules this server has in no
/// version).
pub const REDIS_COMPAT_VERSION: &str = "7.4.0";

/// Counters shown by `INFO stats` (reset by `CONFIG RESETSTAT`).
#[derive(Default)]
pub struct Stats {
    pub connections_received: AtomicU64,
    pub rejected_connections: AtomicU64,
    pub net_input_bytes: AtomicU64,
    pub net_output_bytes: AtomicU64,
    pub keyspace_hits: AtomicU64,
    pub keyspace_misses: AtomicU64,
    /// Encoded blobs of RESTORE payloads checked as `sanitize-dump-payload` asks (INFO's
    /// `dump_payload_sanitizations`).
    pub dump_payload_sanitizations: AtomicU64,
    /// Clients closed for their query buffer (INFO `client_query_buffer_limit_disconnections`).
    pub qbuf_limit_disconnections: AtomicU64,
    /// Keys handed to a background thread to free (FLUSHALL/FLUSHDB ASYNC) and not freed yet.
    pub lazyfree_pending: Arc<AtomicU64>,
    /// Keys freed in the background since start (or CONFIG RESETSTAT).
    pub lazyfreed: Arc<AtomicU64>,
}

impl Stats {
    pub fn reset(&self) {
        for c in [
            &self.connections_received,
            &self.rejected_connections,
            &self.net_input_bytes,
            &self.net_output_bytes,
            &self.keyspace_hits,
            &self.keyspace_misses,
            &self.dump_payload_sanitizations,
            &self.qbuf_limit_disconnections,
            &self.lazyfreed,
        ] {
            c.store(0, Ordering::Relaxed);
        }
    }
}

/// What sets the log's level from a `loglevel` value.
pub type LogLevelSetter = Box<dyn Fn(&str) -> Result<(), String> + Send + Sync>;

/// State shared by every connection.
pub struct Server {
    pub config: RwLock<Config>,
    pub store: Store,
    pub clients: ClientRegistry,
    pub stats: Stats,
    pub started: Instant,
    pub started_unix: u64,
    pub run_id: String,
    /// The port actually listened on (differs from the config with `port 0`).
    pub port: AtomicU64,
    /// Set to true once to begin a graceful shutdown.
    shutdown_tx: watch::Sender<bool>,
    shutting_down: AtomicBool,
    /// A shutdown waiting for lagging replicas (`shutdown-timeout`), and whether SHUTDOWN
    /// ABORT has cancelled it.
    pub shutdown_wait: ShutdownWait,
    /// Unix ms until which DEBUG SLEEP holds the whole server still (0: it runs): the
    /// background work that Redis's one thread would not do meanwhile (the replication link,
    /// the replicas' streams, the cluster bus) waits for it ([`Server::thawed`]).
    pub frozen_until: std::sync::atomic::AtomicU64,
    /// Whether new connections must authenticate (the default user has a password or is
    /// off), cached from the ACL for every command's NOAUTH check.
    pub auth_required: AtomicBool,
    /// Channels, patterns, MONITOR clients, keyspace notifications.
    pub pubsub: Arc<PubSub>,
    /// WATCHed keys and the dirty flags writes raise.
    pub watches: Arc<Watches>,
    /// Ordinary commands hold it shared while they run; EXEC holds it exclusively, so a
    /// transaction is atomic with respect to every other client (see ARCHITECTURE.md).
    pub exec_gate: gate::ExecGate,
    /// Resident memory when the server was created (code, runtime, empty tables).
    pub base_memory: u64,
    /// The TTL monitors' schedule and counters.
    pub ttl: ttl::TtlMonitors,
    /// Settings every connection reads before each batch, cached so that the loop takes no
    /// lock and parses no string (kept in step by `config_changed`).
    pub conn_settings: ConnSettings,
    /// Clients blocked on keys (BLPOP, BZPOPMIN, ...) and the keys ready to serve them.
    pub blocking: Arc<blocking::Blocking>,
    /// The background thread that frees large values (UNLINK, FLUSH ... ASYNC).
    pub lazyfree: lazyfree::LazyFree,
    /// ACL users, the ACL log and the epoch connections cache their permissions by.
    pub acl: acl::Acl,
    /// Client-side caching (CLIENT TRACKING): who may cache which keys.
    pub tracking: Arc<tracking::Tracking>,
    /// The TLS configuration new connections on `tls-port` get (`config::tls`).
    pub tls: crate::config::tls::TlsContext,
    /// Sets the level of the log's own lines (CONFIG SET loglevel): installed by the binary
    /// once its logger is, as the logger is made before the server.
    pub log_level: std::sync::OnceLock<LogLevelSetter>,
    /// Binds a RESP listener anew (`CONFIG SET port` / `tls-port`): installed by the network
    /// side, which owns the listening sockets, once it accepts; see `Server::rebind`.
    pub rebind: std::sync::OnceLock<RebindHook>,
    /// Redis Cluster (`cluster-enabled yes`): set once at start, after the client port is
    /// bound; absent on a standalone server.
    pub cluster: std::sync::OnceLock<cluster::Cluster>,
}

/// `(tls, port)`: bind `port` on the `bind` addresses for plain (false) or TLS (true)
/// clients and let it replace the listener of that kind, or close that listener when
/// `port` is 0. Binding happens before the call returns, so an error leaves the listener in
/// force as it was.
pub type RebindHook = Box<dyn Fn(bool, u16) -> Result<(), String> + Send + Sync>;

/// `proto-max-bulk-len`, `client-query-buffer-limit` and `timeout`, as atomics.
#[derive(Debug, Default)]
pub struct ConnSettings {
    pub max_bulk_len: AtomicU64,
    pub qbuf_limit: AtomicU64,
    pub timeout: AtomicU64,
}

impl ConnSettings {
    fn load_from(&self, cfg: &Config) {
        self.max_bulk_len
            .store(cfg.get_u64("proto-max-bulk-len"), Ordering::Relaxed);
        self.qbuf_limit
            .store(cfg.get_u64("client-query-buffer-limit"), Ordering::Relaxed);
        self.timeout
            .store(cfg.get_u64("timeout"), Ordering::Relaxed);
    }
}

/// A shutdown in its wait for lagging replicas (Redis's `shutdown_mstime` and
/// `abortShutdown`): one at a time; SHUTDOWN ABORT sets `abort`.
#[derive(Default)]
pub struct ShutdownWait {
    pub abort: AtomicBool,
    /// When the wait ends at the latest (unix ms; 0: no wait in progress), for INFO's
    /// `shutdown_in_milliseconds`.
    pub deadline_ms: AtomicU64,
}

impl ShutdownWait {
    pub fn in_progress(&self) -> bool {
        self.deadline_ms.load(Ordering::SeqCst) != 0
    }
}

impl Server {
    pub fn new(config: Config) -> Arc<Server> {
        let shards = match config.get_i64("shards") {
            0 => {
                2 * std::thread::available_parallelism()
                    .map(|n| n.get())
                    .unwrap_or(1)
            }
            n => n as usize,
        };
        let databases = config.get_i64("databases") as usize;
        let mut config = config;
        config.set_normalized("shards", shards.to_string());
        let acl = acl::Acl::new();
        acl.set_default_password(config.get("requirepass"));
        acl.log_max
            .store(config.get_u64("acllog-max-len") as usize, Ordering::Relaxed);
        acl.pubsub_all.store(
            config.get("acl-pubsub-default") == "allchannels",
            Ordering::Relaxed,
        );
        let auth_required = acl.default_needs_auth();
        Self::apply_memory_config(&config);
        for name in EncodingLimits::NAMES {
            LIMITS.apply(name, config.get_i64(name));
        }
        BUSY_REPLY_THRESHOLD_MS.store(config.get_u64("busy-reply-threshold"), Ordering::Relaxed);
        IO_COALESCE_US.store(config.get_u64("io-coalesce-us"), Ordering::Relaxed);
        crate::store::journal::child::set_key_save_delay(config.get_i64("rdb-key-save-delay"));
        replication::refresh_good_replicas(
            config.get_u64("min-replicas-to-write"),
            config.get_u64("min-replicas-max-lag"),
        );
        replication::READ_ONLY.store(config.get_bool("replica-read-only"), Ordering::Relaxed);
        replication::SERVE_STALE.store(
            config.get_bool("replica-serve-stale-data"),
            Ordering::Relaxed,
        );
        cmdstats::set_latency_tracking(config.get_bool("latency-tracking"));
        // Before any command is timed (the command clock's unit is fixed from here on).
        crate::util::clock::calibrate();
        cmdstats::set_monitor_threshold(config.get_u64("latency-monitor-threshold"));
        slowlog::configure(
            config.get_i64("slowlog-log-slower-than"),
            config.get_u64("slowlog-max-len"),
        );
        crate::documents::ttl::set_strict_reads(config.get_bool("ttl-strict-reads"));
        crate::documents::codec::set_max_size(config.get_u64("max-document-size") as usize);
        let (shutdown_tx, _) = watch::channel(false);
        let pubsub = Arc::new(PubSub::new());
        let watches = Arc::new(Watches::default());
        pubsub.configure(
            config.get("notify-keyspace-events"),
            config.get("client-output-buffer-limit"),
        );
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        // Cluster mode (read once, at start): database 0 keeps its keys by hash slot.
        let store = Store::with_slot_index(shards, databases, config.get_bool("cluster-enabled"));
        let blocking = Arc::new(blocking::Blocking::default());
        let tracking = Arc::new(tracking::Tracking::default());
        tracking.set_max_keys(config.get_u64("tracking-table-max-keys"));
        let hooks: Arc<dyn KeyHooks> = Arc::new(KeyEvents {
            pubsub: pubsub.clone(),
            watches: watches.clone(),
            blocking: blocking.clone(),
            tracking: tracking.clone(),
        });
        for c in store.counters() {
            let _ = c.hooks.set(hooks.clone());
        }
        store.set_doc_hooks(Arc::new(DocEvents {
            pubsub: pubsub.clone(),
            blocking: blocking.clone(),
            tracking: tracking.clone(),
        }));
        let conn_settings = ConnSettings::default();
        conn_settings.load_from(&config);
        let stats = Stats::default();
        let lazyfree =
            lazyfree::LazyFree::new(stats.lazyfree_pending.clone(), stats.lazyfreed.clone());
        let exec_gate = gate::ExecGate::for_io_threads(config.io_threads());
        Arc::new(Server {
            store,
            conn_settings,
            config: RwLock::new(config),
            clients: ClientRegistry::default(),
            stats,
            started: Instant::now(),
            started_unix: now.as_secs(),
            run_id: run_id(now.as_nanos()),
            port: AtomicU64::new(0),
            shutdown_tx,
            shutting_down: AtomicBool::new(false),
            shutdown_wait: ShutdownWait::default(),
            frozen_until: std::sync::atomic::AtomicU64::new(0),
            auth_required: AtomicBool::new(auth_required),
            pubsub,
            watches,
            exec_gate,
            base_memory: crate::util::proc::rss_bytes(),
            ttl: ttl::TtlMonitors::new(shards),
            blocking,
            lazyfree,
            acl,
            tracking,
            tls: Default::default(),
            log_level: std::sync::OnceLock::new(),
            rebind: std::sync::OnceLock::new(),
            cluster: std::sync::OnceLock::new(),
        })
    }

    /// Makes `port` (`tls` false) or `tls-port` (true) the one listened on; the error says
    /// why it could not be bound (the caller logs it).
    pub fn rebind(&self, tls: bool, port: u16) -> Result<(), String> {
        let hook = self
            .rebind
            .get()
            .ok_or("the server is not accepting connections yet")?;
        hook(tls, port)
    }

    /// Sets the process title from `proc-title-template` (Redis's `redisSetProcTitle`),
    /// when `set-proc-title` is on.
    pub fn set_proc_title(&self) -> Result<(), String> {
        let title = {
            let c = self.config.read();
            if !c.get_bool("set-proc-title") {
                return Ok(());
            }
            let port = c.get_i64("port");
            let tls_port = c.get_i64("tls-port");
            let bound = self.port.load(Ordering::Relaxed);
            let var = |name: &str| -> Option<String> {
                Some(match name {
                    "title" => crate::util::proctitle::arg0(),
                    // Redis's first bind address and its port; `port 0` picks a free port
                    // here, so the port actually bound is shown.
                    "listen-addr" => {
                        let addr = c.get("bind").split_whitespace().next().unwrap_or("*");
                        format!("{addr}:{bound}")
                    }
                    // Redis's `[cluster]` in cluster mode.
                    "server-mode" if c.get_bool("cluster-enabled") => "[cluster]".into(),
                    "server-mode" => String::new(),
                    "unixsocket" => c.get("unixsocket").to_string(),
                    // `port 0` alone picks a free port here: that is the port listened on.
                    "port" if port == 0 && tls_port == 0 => bound.to_string(),
                    "port" => port.to_string(),
                    "tls-port" => tls_port.to_string(),
                    "config-file" => c
                        .file
                        .as_ref()
                        .map_or("-".into(), |p| p.display().to_string()),
                    _ => return None,
                })
            };
            crate::config::expand_proc_title(c.get("proc-title-template"), &var)
                .ok_or("invalid proc-title-template")?
        };
        crate::util::proctitle::set(&title)
    }

    /// Sets the process's OOM score from `oom-score-adj` and the `oom-score-adj-values`
    /// entry of its role (Redis's `setOOMScoreAdj(-1)`): master, or replica.
    pub fn apply_oom_score_adj(&self) -> Result<(), String> {
        let (mode, values) = {
            let c = self.config.read();
            (
                c.get("oom-score-adj").to_string(),
                crate::config::oom_score_adj_values(c.get("oom-score-adj-values")),
            )
        };
        if values[1] < values[0] || values[2] < values[1] {
            tracing::warn!("The oom-score-adj-values configuration may not work for non-privileged processes! Please consult the documentation.");
        }
        let value = values[usize::from(replication::is_replica())];
        crate::util::oom::apply(&mode, value)
    }

    pub fn shutdown(&self) {
        self.shutting_down.store(true, Ordering::SeqCst);
        // Before anything else, as Redis: a client connecting from now on is refused.
        listeners::close_all();
        // As Redis kills its save child: a background save in progress stops.
        crate::store::journal::child::abort_running();
        let _ = self.shutdown_tx.send(true);
        for c in self.clients.all() {
            c.wake();
        }
    }

    /// Whether this server holds a master's data rather than its own (Redis's `!iAmMaster()`):
    /// it follows a master, or its cluster configuration makes it a replica (which it is
    /// from the start, before the bus has it follow anyone). A replica's keys and documents
    /// leave by its master's deletions: it neither expires them itself nor drops the expired
    /// ones of a file it loads.
    pub fn holds_masters_data(&self) -> bool {
        replication::is_replica()
            || self
                .cluster
                .get()
                .is_some_and(|c| c.lock().me().is_some_and(|m| m.is_replica()))
    }

    /// Resolves once no DEBUG SLEEP holds the server still (at once, usually).
    pub async fn thawed(&self) {
        loop {
            let until = self.frozen_until.load(std::sync::atomic::Ordering::Acquire);
            let now = crate::util::clock::now_ms().max(0) as u64;
            if until == 0 || now >= until {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(until - now)).await;
        }
    }

    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::SeqCst)
    }

    pub fn shutdown_signal(&self) -> watch::Receiver<bool> {
        self.shutdown_tx.subscribe()
    }

    /// Pushes the maxmemory settings to the eviction module's cached copies.
    fn apply_memory_config(config: &Config) {
        crate::store::eviction::configure(
            config.get_u64("maxmemory"),
            config.get("maxmemory-policy"),
            config.get_u64("maxmemory-samples") as u32,
        );
    }

    /// A `maxmemory` lowered under the memory in use evicts at once, as Redis's
    /// `updateMaxmemory` starts its eviction job: otherwise keys would stay until some client
    /// sends its next command (eviction runs before each command), and a subscriber waiting
    /// for `evicted` events on an idle server would hear nothing. The work is bounded as
    /// before a command; the commands that follow go on if the overshoot was larger.
    fn evict_to_new_limit(&self) {
        let max = crate::store::eviction::maxmemory();
        let used = self.used_memory();
        if max == 0 || used <= max {
            return;
        }
        tracing::warn!(
            "WARNING: the new maxmemory value set via CONFIG SET ({max}) is smaller than the current memory usage ({used}). This will result in key eviction and/or the inability to accept new write commands depending on the maxmemory-policy."
        );
        crate::store::eviction::make_room(&self.store);
    }

    /// INFO's `used_memory`: every live heap block of the process, as the counting allocator
    /// sees them (`util::alloc`), as Redis counts every allocation; where the allocator does
    /// not count (the library without the binary), the baseline at start plus the key
    /// space's estimate.
    pub fn used_memory(&self) -> u64 {
        if let Some(n) = crate::util::alloc::allocated() {
            return n;
        }
        self.base_memory + self.store.used_bytes() as u64
    }

    /// Called after a live config change so cached copies follow.
    /// A background save ended (`ok` or not): MISCONF follows it.
    pub fn bgsave_finished(&self, ok: bool) {
        LAST_BGSAVE_FAILED.store(!ok, Ordering::Relaxed);
        self.update_misconf();
    }

    fn update_misconf(&self) {
        let c = self.config.read();
        let deny = LAST_BGSAVE_FAILED.load(Ordering::Relaxed)
            && c.get_bool("stop-writes-on-bgsave-error")
            && !c.get("save").trim().is_empty();
        MISCONF.store(deny, Ordering::Relaxed);
    }

    pub fn config_changed(&self, name: &str) {
        if name.starts_with("cluster-") || name == "repl-ping-replica-period" {
            if let Some(c) = self.cluster.get() {
                let cfg = self.config.read().clone();
                let port = self.port.load(Ordering::Relaxed) as u16;
                c.with(|st| st.configure(&cfg, port));
            }
        }
        if matches!(name, "save" | "stop-writes-on-bgsave-error") {
            self.update_misconf();
        }
        if name == "rdb-key-save-delay" {
            let v = self.config.read().get_i64(name);
            crate::store::journal::child::set_key_save_delay(v);
        }
        if name == "busy-reply-threshold" {
            let v = self.config.read().get_u64(name);
            BUSY_REPLY_THRESHOLD_MS.store(v, Ordering::Relaxed);
        }
        if name == "io-coalesce-us" {
            let v = self.config.read().get_u64(name);
            IO_COALESCE_US.store(v, Ordering::Relaxed);
        }
        if matches!(name, "min-replicas-to-write" | "min-replicas-max-lag") {
            let c = self.config.read();
            replication::refresh_good_replicas(
                c.get_u64("min-replicas-to-write"),
                c.get_u64("min-replicas-max-lag"),
            );
        }
        if name == "replica-serve-stale-data" {
            let v = self.config.read().get_bool(name);
            replication::SERVE_STALE.store(v, Ordering::Relaxed);
        }
        if name == "replica-read-only" {
            let v = self.config.read().get_bool(name);
            replication::READ_ONLY.store(v, Ordering::Relaxed);
        }
        if name == "repl-backlog-size" {
            if let Some(f) = crate::store::journal::feed() {
                f.set_capacity(self.config.read().get_u64(name) as usize);
            }
        }
        if name == "latency-tracking" {
            cmdstats::set_latency_tracking(self.config.read().get_bool(name));
        }
        if name == "slowlog-log-slower-than" || name == "slowlog-max-len" {
            let c = self.config.read();
            slowlog::configure(
                c.get_i64("slowlog-log-slower-than"),
                c.get_u64("slowlog-max-len"),
            );
        }
        if name == "latency-monitor-threshold" {
            cmdstats::set_monitor_threshold(self.config.read().get_u64(name));
        }
        if EncodingLimits::NAMES.contains(&name) {
            let v = self.config.read().get_i64(name);
            LIMITS.apply(name, v);
        }
        if matches!(
            name,
            "proto-max-bulk-len" | "client-query-buffer-limit" | "timeout"
        ) {
            self.conn_settings.load_from(&self.config.read());
        }
        if name.starts_with("maxmemory") {
            Self::apply_memory_config(&self.config.read());
        }
        if name == "maxmemory" {
            self.evict_to_new_limit();
        }
        if name == "requirepass" {
            // An alias of the default user's password, as in Redis.
            let pass = self.config.read().get("requirepass").to_string();
            self.acl.set_default_password(&pass);
            self.auth_required
                .store(self.acl.default_needs_auth(), Ordering::Relaxed);
        }
        if name == "acllog-max-len" {
            let max = self.config.read().get_u64(name) as usize;
            self.acl.log_max.store(max, Ordering::Relaxed);
            self.acl.trim_log();
        }
        if name == "acl-pubsub-default" {
            let all = self.config.read().get(name) == "allchannels";
            self.acl.pubsub_all.store(all, Ordering::Relaxed);
        }
        if name == "appendfsync" {
            let p = match self.config.read().get(name) {
                "always" => crate::store::journal::writer::ALWAYS,
                "no" => crate::store::journal::writer::NO,
                _ => crate::store::journal::writer::EVERYSEC,
            };
            crate::store::journal::set_policy(p);
        }
        if name == "tracking-table-max-keys" {
            let v = self.config.read().get_u64(name);
            self.tracking.set_max_keys(v);
        }
        if name == "ttl-monitor-period" {
            self.ttl.period_changed();
        }
        if name == "ttl-strict-reads" {
            let on = self.config.read().get_bool("ttl-strict-reads");
            crate::documents::ttl::set_strict_reads(on);
        }
        if name == "max-document-size" {
            let n = self.config.read().get_u64(name) as usize;
            crate::documents::codec::set_max_size(n);
        }
        if name == "notify-keyspace-events" || name == "client-output-buffer-limit" {
            let cfg = self.config.read();
            self.pubsub.configure(
                cfg.get("notify-keyspace-events"),
                cfg.get("client-output-buffer-limit"),
            );
        }
    }

    /// Publishes a keyspace notification (`notify-keyspace-events`); one atomic load when
    /// notifications are off. `class` is one of [`pubsub::class`].
    #[inline]
    pub fn notify(&self, db: usize, class: u32, event: &str, key: &[u8]) {
        self.pubsub.notify(db, class, event, key);
    }
}

/// `busy-reply-threshold` in milliseconds: a script that runs longer without writing is
/// stopped (read on the scripting engine's instruction hook, without a lock).
pub static BUSY_REPLY_THRESHOLD_MS: AtomicU64 = AtomicU64::new(5000);

/// `io-coalesce-us`: how long a busy I/O thread naps before it waits for input (read by
/// `server::coalesce` each time the thread is about to park).
pub static IO_COALESCE_US: AtomicU64 = AtomicU64::new(40);

/// Redis's `writeCommandsDeniedByDiskError` for snapshots: the last background save failed,
/// a save schedule is set and `stop-writes-on-bgsave-error` is on, so the dispatcher refuses
/// writes and PING with `-MISCONF` until a save succeeds.
pub static MISCONF: AtomicBool = AtomicBool::new(false);
static LAST_BGSAVE_FAILED: AtomicBool = AtomicBool::new(false);

/// The background work's frequency in force (`hz`, raised by `dynamic-hz`), for INFO.
pub static EFFECTIVE_HZ: AtomicU64 = AtomicU64::new(0);

/// `DEBUG PAUSE-CRON 1` (Redis's `server.pause_cron`): the periodic work (active expiry of
/// keys and hash fields) skips its turns until `DEBUG PAUSE-CRON 0`, so a test can watch a
/// state the cron would otherwise change.
pub static CRON_PAUSED: AtomicBool = AtomicBool::new(false);

/// Redis's `!checkGoodReplicasStatus()`: `min-replicas-to-write` and `min-replicas-max-lag`
/// are both set and fewer replicas acknowledged within the lag, so writes are refused with
/// `-NOREPLICAS` (the dispatcher, and a script's write calls). Kept by
/// `replication::refresh_good_replicas` (config changes, and once a second).
pub static NO_GOOD_REPLICAS: AtomicBool = AtomicBool::new(false);

/// The key space's choke points report here: writes touch WATCHers, expiry and eviction
/// publish their keyspace notifications.
struct KeyEvents {
    pubsub: Arc<PubSub>,
    watches: Arc<Watches>,
    blocking: Arc<blocking::Blocking>,
    tracking: Arc<tracking::Tracking>,
}

impl KeyHooks for KeyEvents {
    #[inline]
    fn modified(&self, db: usize, key: &[u8]) {
        crate::store::journal::mark();
        self.watches.touch(db, key);
        self.tracking.key_changed(key);
        // A client blocked in XREADGROUP learns that its stream (and group) went away.
        if blocking::write_watchers() {
            self.blocking.signal(db, key);
        }
    }

    fn removed(&self, db: usize, key: &[u8], why: Removal) {
        // Expiry and eviction are journaled as DEL (replay expires nothing itself).
        crate::store::journal::key_removed(db, key);
        // The `modified` call that follows is the server's change, not the running client's.
        self.tracking.by_server();
        match why {
            Removal::Expired => self
                .pubsub
                .notify(db, pubsub::class::EXPIRED, "expired", key),
            Removal::Evicted => self
                .pubsub
                .notify(db, pubsub::class::EVICTED, "evicted", key),
            Removal::Deleted => {}
        }
    }

    #[inline]
    fn created(&self, db: usize, key: &[u8]) {
        self.pubsub.notify(db, pubsub::class::NEW, "new", key);
        self.blocking.signal(db, key);
    }

    #[inline]
    fn missed(&self, db: usize, key: &[u8]) {
        self.pubsub
            .notify(db, pubsub::class::KEY_MISS, "keymiss", key);
    }
}

/// What the server does with document changes: `doc.expired` keyspace events for expiries,
/// one per document — the keyevent channel `__keyevent@<db>__:doc.expired` carries the
/// collection, the keyspace channel `__keyspace@<db>__:<collection>` the document's `_id` as
/// Extended JSON; both are class `x`. A collection's change stream, when appended to, fires
/// `xadd` (and `xtrim`) and wakes its blocked readers, as an `XADD` does.
struct DocEvents {
    pubsub: Arc<PubSub>,
    blocking: Arc<blocking::Blocking>,
    tracking: Arc<tracking::Tracking>,
}

impl DocHooks for DocEvents {
    fn changed(&self, db: usize, collection: &str, change: Change<'_>) {
        crate::store::journal::doc_change(db, collection, change);
        // Clients that read the collection drop what they cached of it (its name is the key).
        if let Change::Expire(_) = change {
            self.tracking.by_server();
        }
        self.tracking.key_changed(collection.as_bytes());
        let Change::Expire(id) = change else { return };
        if !self.pubsub.notifies(pubsub::class::EXPIRED) {
            return;
        }
        let coll = collection.as_bytes();
        let id = crate::documents::codec::value_json(id);
        self.pubsub.notify_with(
            db,
            pubsub::class::EXPIRED,
            "doc.expired",
            coll,
            id.as_bytes(),
            coll,
        );
    }

    fn dropped(&self, _db: usize, collection: &str) {
        self.tracking.key_changed(collection.as_bytes());
    }

    fn appended(&self, db: usize, key: &[u8], trimmed: bool) {
        self.pubsub.notify(db, pubsub::class::STREAM, "xadd", key);
        if trimmed {
            self.pubsub.notify(db, pubsub::class::STREAM, "xtrim", key);
        }
        self.blocking.signal(db, key);
    }
}

/// A 40-hex-character run id, as Redis's `run_id`.
fn run_id(seed: u128) -> String {
    let mut x = seed as u64 ^ ((seed >> 64) as u64) ^ (std::process::id() as u64).rotate_left(32);
    let mut s = String::with_capacity(40);
    while s.len() < 40 {
        // splitmix64
        x = x.wrapping_add(0x9e3779b97f4a7c15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
        z ^= z >> 31;
        s.push_str(&format!("{z:016x}"));
    }
    s.truncate(40);
    s
}

pub fn unix_millis() -> u64 {
    crate::util::clock::now_ms().max(0) as u64
}
