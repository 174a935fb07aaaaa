//! The admin port (`admin-port`, off by default, on `admin-bind`, loopback by default): an
//! HTTP/1.1 server (hyper) on the server's own runtime with
//!
//! - `GET /metrics`: Prometheus text format 0.0.4, under redis_exporter's names where the
//!   meaning is the same (`redis_commands_processed_total`, `redis_keyspace_hits_total`, ...)
//!   and `tidecache_*` for the documents (per collection: documents, bytes, TTL passes and
//!   deletions);
//! - `GET /`: the status page (`status.html`, built into the binary, no external URL), which
//!   polls
//! - `GET /stats.json`: the current figures and the last five minutes of samples.
//!
//! Every number is read from the state INFO and `DOC.STATS` read (the stats atomics, the
//! shards' counters, `cmdstats`, the collections' `TtlStats`): nothing is counted twice. The
//! only state of its own is the sample history the charts draw, taken once a second while
//! the port is on, so a page opened now shows the last minutes at once and rates are
//! computed from the server's clock rather than the browser's.

use crate::documents::stats::Totals;
use crate::server::listener::bind_addresses;
use crate::state::{cmdstats, Server, REDIS_COMPAT_VERSION, VERSION};
use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{HeaderValue, ALLOW, CACHE_CONTROL, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use parking_lot::Mutex;
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::fmt::Write;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;

/// The status page: one document with its CSS and JavaScript inline.
const PAGE: &str = include_str!("status.html");
/// Samples kept for the charts: five minutes at one a second.
const HISTORY: usize = 300;
/// Expirations per minute count the deletions over this window.
const MINUTE_MS: u64 = 60_000;
/// Collections drawn in the expirations chart (those with the most in the last minute).
const CHARTED_COLLECTIONS: usize = 8;
/// Commands shown in the slowest-commands table.
const SLOWEST: usize = 10;
/// Connections served at once; more are closed on accept (an admin port has few clients,
/// and this bounds what a flood of them can hold).
const MAX_CONNECTIONS: usize = 64;
/// A client that has not sent its request headers by then is dropped.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// The admin port's bound sockets, between binding (before the start is announced, so a
/// port in use stops the start) and serving.
pub struct AdminListeners {
    sockets: Vec<TcpListener>,
    pub port: u16,
}

/// Binds `admin-port` on every address of `admin-bind`; `None` when the port is 0 (off).
pub async fn bind(server: &Server) -> std::io::Result<Option<AdminListeners>> {
    let (port, bind) = {
        let cfg = server.config.read();
        (
            cfg.get_i64("admin-port") as u16,
            cfg.get("admin-bind").to_string(),
        )
    };
    if port == 0 {
        return Ok(None);
    }
    let (sockets, port) = bind_addresses(&bind, port, 511).await?;
    // The figures are readable by anyone who reaches the port (no AUTH, unlike RESP).
    for addr in sockets.iter().filter_map(|s| s.local_addr().ok()) {
        if !addr.ip().is_loopback() {
            tracing::warn!(
                "the admin port has no authentication and listens on {addr}: anyone who reaches it can read the server's metrics"
            );
        }
    }
    tracing::info!(
        "accepting admin HTTP connections on {} port {port} (/metrics, /, /stats.json)",
        bind
    );
    Ok(Some(AdminListeners { sockets, port }))
}

/// Serves the admin port and starts its sampler, until shutdown.
pub fn spawn(server: &Arc<Server>, listeners: AdminListeners) {
    let admin = Arc::new(Admin {
        server: server.clone(),
        history: Mutex::new(VecDeque::with_capacity(HISTORY)),
        slots: Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS)),
    });
    tokio::spawn(sampler(admin.clone()));
    for socket in listeners.sockets {
        tokio::spawn(accept_loop(admin.clone(), socket));
    }
}

struct Admin {
    server: Arc<Server>,
    history: Mutex<VecDeque<Sample>>,
    slots: Arc<tokio::sync::Semaphore>,
}

/// One second's figures, for the charts.
struct Sample {
    /// Milliseconds since the server started (monotonic).
    at_ms: u64,
    commands: u64,
    used_memory: u64,
    rss: u64,
    /// TTL deletions so far of each collection that has had any, as (db, name, deleted),
    /// sorted by (db, name). (The others would add a name a second to the history and
    /// draw a flat line.)
    ttl_deleted: Vec<(usize, String, u64)>,
}

async fn sampler(admin: Arc<Admin>) {
    let mut stop = admin.server.shutdown_signal();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.changed() => return,
        }
        if admin.server.is_shutting_down() {
            return;
        }
        // Off the runtime's workers: the per-collection figures lock each shard in turn.
        let a = admin.clone();
        let _ = tokio::task::spawn_blocking(move || {
            let s = &a.server;
            let sample = Sample {
                at_ms: s.started.elapsed().as_millis() as u64,
                commands: crate::state::cmdstats::total_calls(),
                used_memory: s.used_memory(),
                rss: crate::util::proc::rss_bytes(),
                ttl_deleted: s
                    .store
                    .collection_totals()
                    .into_iter()
                    .filter(|(_, _, t)| t.ttl.deleted_documents > 0)
                    .map(|(db, name, t)| (db, name, t.ttl.deleted_documents))
                    .collect(),
            };
            let mut h = a.history.lock();
            if h.len() == HISTORY {
                h.pop_front();
            }
            h.push_back(sample);
        })
        .await;
    }
}

async fn accept_loop(admin: Arc<Admin>, socket: TcpListener) {
    let mut stop = admin.server.shutdown_signal();
    loop {
        let (stream, peer) = tokio::select! {
            r = socket.accept() => match r {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!("admin port: accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = stop.changed() => return,
        };
        let Ok(slot) = admin.slots.clone().try_acquire_owned() else {
            tracing::debug!("admin port: refusing {peer}, {MAX_CONNECTIONS} connections open");
            continue;
        };
        let admin = admin.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let mut stop = admin.server.shutdown_signal();
            let service = hyper::service::service_fn(move |req| {
                let admin = admin.clone();
                async move { Ok::<_, std::convert::Infallible>(admin.handle(req).await) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .max_buf_size(64 * 1024)
                .serve_connection(TokioIo::new(stream), service);
            tokio::select! {
                r = conn => if let Err(e) = r {
                    tracing::debug!("admin port: connection from {peer}: {e}");
                },
                _ = stop.changed() => {}
            }
        });
    }
}

type Body = Full<Bytes>;

fn respond(
    status: StatusCode,
    content_type: &'static str,
    body: impl Into<Bytes>,
) -> Response<Body> {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    let h = r.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    // Live figures: a cached copy would be a wrong one.
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

impl Admin {
    async fn handle<B>(self: Arc<Self>, req: Request<B>) -> Response<Body> {
        if req.method() != Method::GET && req.method() != Method::HEAD {
            let mut r = respond(
                StatusCode::METHOD_NOT_ALLOWED,
                "text/plain; charset=utf-8",
                "only GET and HEAD\n",
            );
            r.headers_mut()
                .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
            return r;
        }
        let path = req.uri().path().to_string();
        match path.as_str() {
            "/" | "/index.html" => respond(StatusCode::OK, "text/html; charset=utf-8", PAGE),
            "/metrics" | "/stats.json" => {
                let me = self.clone();
                let json = path == "/stats.json";
                // Off the runtime's workers: the figures lock each shard in turn.
                let body = tokio::task::spawn_blocking(move || {
                    let snap = Snapshot::take(&me.server);
                    if json {
                        me.stats_json(&snap).to_string()
                    } else {
                        metrics(&me.server, &snap)
                    }
                })
                .await;
                match (body, json) {
                    (Ok(b), true) => respond(StatusCode::OK, "application/json", b),
                    (Ok(b), false) => respond(
                        StatusCode::OK,
                        "text/plain; version=0.0.4; charset=utf-8",
                        b,
                    ),
                    (Err(_), _) => respond(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        "text/plain; charset=utf-8",
                        "the figures could not be read\n",
                    ),
                }
            }
            _ => respond(
                StatusCode::NOT_FOUND,
                "text/plain; charset=utf-8",
                "not found: try /, /metrics or /stats.json\n",
            ),
        }
    }

    /// What the status page polls: the figures now, per collection, the slowest commands
    /// and the sampled series the charts draw.
    fn stats_json(&self, snap: &Snapshot) -> Value {
        let h = self.history.lock();
        let samples: Vec<&Sample> = h.iter().collect();
        let mut t = Vec::new();
        let mut ops = Vec::new();
        let mut mem = Vec::new();
        let mut rss = Vec::new();
        for pair in samples.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            let secs = (b.at_ms.saturating_sub(a.at_ms)) as f64 / 1000.0;
            if secs <= 0.0 {
                continue;
            }
            t.push(b.at_ms / 1000);
            // CONFIG RESETSTAT zeroes the counter: a negative step is no commands.
            ops.push(round1(b.commands.saturating_sub(a.commands) as f64 / secs));
            mem.push(b.used_memory);
            rss.push(b.rss);
        }
        // Per collection: deletions over the minute before each sample (or since the
        // first sample, when the history is shorter than a minute). A collection missing
        // from a sample had no deletions yet.
        let mut per_collection = Vec::new();
        if let Some(last) = samples.last() {
            for (db, name, _) in &last.ttl_deleted {
                let deleted_at = |s: &Sample| {
                    s.ttl_deleted
                        .binary_search_by(|(d, n, _)| (d, n.as_str()).cmp(&(db, name.as_str())))
                        .map_or(0, |i| s.ttl_deleted[i].2)
                };
                let mut series = Vec::with_capacity(samples.len());
                let mut from = 0;
                for i in 1..samples.len() {
                    while samples[i].at_ms.saturating_sub(samples[from].at_ms) > MINUTE_MS {
                        from += 1;
                    }
                    series.push(deleted_at(samples[i]).saturating_sub(deleted_at(samples[from])));
                }
                let now = series.last().copied().unwrap_or(0);
                per_collection.push((now, *db, name.as_str(), series));
            }
        }
        let last_minute: std::collections::HashMap<(usize, &str), u64> = per_collection
            .iter()
            .map(|(now, db, name, _)| ((*db, *name), *now))
            .collect();
        // The chart draws the collections with the most expirations in the last minute.
        per_collection.sort_by(|a, b| b.0.cmp(&a.0).then((a.1, a.2).cmp(&(b.1, b.2))));
        let expired: serde_json::Map<String, Value> = per_collection
            .into_iter()
            .take(CHARTED_COLLECTIONS)
            .map(|(_, db, name, series)| (format!("{db}/{name}"), json!(series)))
            .collect();
        let collections: Vec<Value> = snap
            .collections
            .iter()
            .map(|(db, name, c)| {
                json!({
                    "db": db,
                    "name": name,
                    "documents": c.documents,
                    "bytes": c.document_bytes,
                    "index_bytes": c.index_bytes,
                    "ttl_passes": c.ttl.passes,
                    "ttl_deleted": c.ttl.deleted_documents,
                    "expired_last_minute": last_minute.get(&(*db, name.as_str())).copied().unwrap_or(0),
                })
            })
            .collect();
        let mut slowest: Vec<&CommandFigures> =
            snap.commands.iter().filter(|c| c.calls > 0).collect();
        slowest.sort_by(|a, b| b.usec_per_call().total_cmp(&a.usec_per_call()));
        let slowest: Vec<Value> = slowest
            .into_iter()
            .take(SLOWEST)
            .map(|c| {
                json!({
                    "cmd": c.name,
                    "calls": c.calls,
                    "usec": c.usec,
                    "usec_per_call": round1(c.usec_per_call()),
                    "p99_usec": c.p99_usec,
                    "max_usec": c.max_usec,
                })
            })
            .collect();
        let keys: usize = snap.keyspace.iter().map(|k| k.0).sum();
        json!({
            "version": VERSION,
            "uptime_in_seconds": snap.uptime_secs,
            "connected_clients": snap.clients,
            "blocked_clients": snap.blocked,
            "used_memory": snap.used_memory,
            "used_memory_rss": snap.rss,
            "maxmemory": snap.maxmemory,
            "commands_processed": snap.commands_processed,
            "keyspace_hits": snap.counters.hits,
            "keyspace_misses": snap.counters.misses,
            "expired_keys": snap.counters.expired,
            "evicted_keys": snap.counters.evicted,
            "keys": keys,
            "collections": snap.collections.len(),
            "documents": snap.documents.documents,
            "ttl_passes": snap.ttl_passes,
            "ttl_deleted_documents": snap.ttl_deleted,
            "ops_per_sec": ops.last().copied().unwrap_or(0.0),
            "collection_stats": collections,
            "slowest": slowest,
            "history": {
                "t": t,
                "ops_per_sec": ops,
                "used_memory": mem,
                "used_memory_rss": rss,
                "expired_per_min": expired,
            },
        })
    }
}

fn round1(v: f64) -> f64 {
    (v * 10.0).round() / 10.0
}

/// One command's figures (a row of INFO commandstats and its latency histogram).
struct CommandFigures {
    name: &'static str,
    calls: u64,
    usec: u64,
    rejected: u64,
    failed: u64,
    /// From the latency histogram, when `latency-tracking` has samples.
    p99_usec: Option<f64>,
    max_usec: Option<f64>,
}

impl CommandFigures {
    fn usec_per_call(&self) -> f64 {
        if self.calls == 0 {
            0.0
        } else {
            self.usec as f64 / self.calls as f64
        }
    }
}

/// Everything `/metrics` and `/stats.json` report, read once per request.
struct Snapshot {
    uptime_secs: u64,
    clients: usize,
    blocked: usize,
    used_memory: u64,
    rss: u64,
    maxmemory: u64,
    commands_processed: u64,
    counters: crate::commands::server::KeyspaceCounters,
    /// Per database: (keys, keys with a deadline, average TTL in ms), as INFO keyspace.
    keyspace: Vec<(usize, usize, i64)>,
    commands: Vec<CommandFigures>,
    documents: Totals,
    ttl_passes: u64,
    ttl_deleted: u64,
    collections: Vec<(usize, String, Totals)>,
}

impl Snapshot {
    fn take(s: &Server) -> Snapshot {
        let rows = crate::commands::table().stat_rows();
        let hists = cmdstats::histograms();
        let commands = rows
            .iter()
            .zip(cmdstats::totals())
            .enumerate()
            .filter(|(_, (_, t))| t.calls > 0 || t.rejected > 0 || t.failed > 0)
            .map(|(i, (spec, t))| {
                let h = hists.get(i).and_then(|h| h.as_ref());
                CommandFigures {
                    name: spec.name,
                    calls: t.calls,
                    usec: t.usec,
                    rejected: t.rejected,
                    failed: t.failed,
                    p99_usec: h.map(|h| h.value_at_percentile(99.0) as f64 / 1000.0),
                    max_usec: h.map(|h| h.value_at_percentile(100.0) as f64 / 1000.0),
                }
            })
            .collect();
        let counters = crate::commands::server::keyspace_counters(s);
        Snapshot {
            uptime_secs: s.started.elapsed().as_secs(),
            clients: s.clients.count(),
            blocked: s.blocking.blocked_clients(),
            used_memory: s.used_memory(),
            rss: crate::util::proc::rss_bytes(),
            maxmemory: s.config.read().get_u64("maxmemory"),
            commands_processed: crate::state::cmdstats::total_calls(),
            counters,
            keyspace: s.store.keyspace_info(),
            commands,
            documents: s.store.document_totals(),
            ttl_passes: s.ttl.passes(),
            ttl_deleted: s.ttl.deleted_documents(),
            collections: s.store.collection_totals(),
        }
    }
}

/// Prometheus's text format 0.0.4: a family's `# HELP` and `# TYPE` lines, then its samples.
struct Prom(String);

impl Prom {
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let help = help.replace('\\', "\\\\").replace('\n', "\\n");
        let _ = write!(self.0, "# HELP {name} {help}\n# TYPE {name} {kind}\n");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: impl std::fmt::Display) {
        self.0.push_str(name);
        if !labels.is_empty() {
            self.0.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.0.push(',');
                }
                let v = v
                    .replace('\\', "\\\\")
                    .replace('"', "\\\"")
                    .replace('\n', "\\n");
                let _ = write!(self.0, "{k}=\"{v}\"");
            }
            self.0.push('}');
        }
        let _ = writeln!(self.0, " {value}");
    }

    /// A family of one unlabelled sample.
    fn one(&mut self, name: &str, kind: &str, help: &str, value: impl std::fmt::Display) {
        self.family(name, kind, help);
        self.sample(name, &[], value);
    }
}

/// `/metrics`.
fn metrics(s: &Server, snap: &Snapshot) -> String {
    let mut p = Prom(String::with_capacity(16 * 1024));
    let g = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
    let st = &s.stats;
    p.one(
        "redis_up",
        "gauge",
        "Information about the Redis instance",
        1,
    );
    p.family(
        "redis_instance_info",
        "gauge",
        "Information about the Redis instance",
    );
    let (policy, port, pid) = (
        s.config.read().get("maxmemory-policy").to_string(),
        s.port.load(Ordering::Relaxed).to_string(),
        std::process::id().to_string(),
    );
    p.sample(
        "redis_instance_info",
        &[
            ("role", "master"),
            ("redis_version", REDIS_COMPAT_VERSION),
            ("redis_mode", "standalone"),
            ("os", std::env::consts::OS),
            ("maxmemory_policy", &policy),
            ("tcp_port", &port),
            ("run_id", &s.run_id),
            ("process_id", &pid),
            ("tidecache_version", VERSION),
        ],
        1,
    );
    p.one(
        "redis_uptime_in_seconds",
        "gauge",
        "Seconds since the server started",
        snap.uptime_secs,
    );
    p.one(
        "redis_start_time_seconds",
        "gauge",
        "Start time of the Redis instance since unix epoch in seconds.",
        s.started_unix,
    );
    p.one(
        "redis_connected_clients",
        "gauge",
        "Clients connected",
        snap.clients,
    );
    p.one(
        "redis_blocked_clients",
        "gauge",
        "Clients blocked on a key (BLPOP, XREAD BLOCK, ...)",
        snap.blocked,
    );
    p.one(
        "redis_max_clients",
        "gauge",
        "maxclients",
        s.config.read().get_u64("maxclients"),
    );
    p.one(
        "redis_memory_used_bytes",
        "gauge",
        "Bytes allocated by the server (INFO used_memory)",
        snap.used_memory,
    );
    p.one(
        "redis_memory_used_rss_bytes",
        "gauge",
        "Resident set size of the process (INFO used_memory_rss)",
        snap.rss,
    );
    p.one(
        "redis_memory_used_dataset_bytes",
        "gauge",
        "Estimated bytes held by keys and documents (INFO used_memory_dataset)",
        s.store.used_bytes(),
    );
    p.one(
        "redis_memory_max_bytes",
        "gauge",
        "maxmemory (0: no limit)",
        snap.maxmemory,
    );
    p.one(
        "redis_connections_received_total",
        "counter",
        "Connections accepted",
        g(&st.connections_received),
    );
    p.one(
        "redis_rejected_connections_total",
        "counter",
        "Connections refused (maxclients, protected mode)",
        g(&st.rejected_connections),
    );
    p.one(
        "redis_commands_processed_total",
        "counter",
        "Commands processed",
        snap.commands_processed,
    );
    p.one(
        "redis_net_input_bytes_total",
        "counter",
        "Bytes read from clients",
        g(&st.net_input_bytes),
    );
    p.one(
        "redis_net_output_bytes_total",
        "counter",
        "Bytes written to clients",
        g(&st.net_output_bytes),
    );
    p.one(
        "redis_keyspace_hits_total",
        "counter",
        "Key lookups that found the key",
        snap.counters.hits,
    );
    p.one(
        "redis_keyspace_misses_total",
        "counter",
        "Key lookups that did not find the key",
        snap.counters.misses,
    );
    p.one(
        "redis_expired_keys_total",
        "counter",
        "Keys removed because their TTL passed",
        snap.counters.expired,
    );
    p.one(
        "redis_evicted_keys_total",
        "counter",
        "Keys evicted under maxmemory",
        snap.counters.evicted,
    );
    p.one(
        "redis_total_error_replies",
        "counter",
        "Error replies sent",
        cmdstats::total_error_replies(),
    );
    let cpu = crate::util::proc::cpu_times();
    p.one(
        "redis_cpu_sys_seconds_total",
        "counter",
        "System CPU time of the process",
        cpu.sys,
    );
    p.one(
        "redis_cpu_user_seconds_total",
        "counter",
        "User CPU time of the process",
        cpu.user,
    );
    type Field = fn(&CommandFigures) -> f64;
    let per_command: [(&str, &str, Field); 4] = [
        (
            "redis_commands_total",
            "Total number of calls per command",
            |c| c.calls as f64,
        ),
        (
            "redis_commands_duration_seconds_total",
            "Total amount of time in seconds spent per command",
            |c| c.usec as f64 / 1e6,
        ),
        (
            "redis_commands_rejected_calls_total",
            "Calls refused before running, per command (arity, ACL, OOM, ...)",
            |c| c.rejected as f64,
        ),
        (
            "redis_commands_failed_calls_total",
            "Calls that ran and answered an error, per command",
            |c| c.failed as f64,
        ),
    ];
    for (name, help, field) in per_command {
        p.family(name, "counter", help);
        for c in &snap.commands {
            p.sample(name, &[("cmd", c.name)], field(c));
        }
    }
    p.family(
        "redis_errors_total",
        "counter",
        "Total number of errors per error type",
    );
    for (code, n) in cmdstats::error_counts() {
        p.sample("redis_errors_total", &[("err", &code)], n);
    }
    let dbs: Vec<String> = (0..snap.keyspace.len()).map(|d| format!("db{d}")).collect();
    p.family("redis_db_keys", "gauge", "Total number of keys by DB");
    for (db, k) in dbs.iter().zip(snap.keyspace.iter()) {
        p.sample("redis_db_keys", &[("db", db)], k.0);
    }
    p.family(
        "redis_db_keys_expiring",
        "gauge",
        "Total number of expiring keys by DB",
    );
    for (db, k) in dbs.iter().zip(snap.keyspace.iter()) {
        p.sample("redis_db_keys_expiring", &[("db", db)], k.1);
    }
    p.family("redis_db_avg_ttl_seconds", "gauge", "Avg TTL in seconds");
    for (db, k) in dbs.iter().zip(snap.keyspace.iter()) {
        p.sample(
            "redis_db_avg_ttl_seconds",
            &[("db", db)],
            k.2 as f64 / 1000.0,
        );
    }
    let d = &snap.documents;
    p.one(
        "tidecache_collections",
        "gauge",
        "Document collections, all databases",
        snap.collections.len(),
    );
    p.one(
        "tidecache_documents",
        "gauge",
        "Documents, all collections",
        d.documents,
    );
    p.one(
        "tidecache_document_bytes",
        "gauge",
        "BSON bytes of the documents (INFO documents document_bytes)",
        d.document_bytes,
    );
    p.one(
        "tidecache_index_bytes",
        "gauge",
        "Estimated bytes of the collections' indexes",
        d.index_bytes,
    );
    p.one(
        "tidecache_ttl_passes_total",
        "counter",
        "TTL monitor passes (a pass is one every shard's monitor has made)",
        snap.ttl_passes,
    );
    p.one(
        "tidecache_ttl_deleted_documents_total",
        "counter",
        "Documents removed by the TTL monitors (dropped collections included)",
        snap.ttl_deleted,
    );
    type CollField = fn(&Totals) -> u64;
    let per_collection: [(&str, &str, &str, CollField); 5] = [
        (
            "tidecache_collection_documents",
            "gauge",
            "Documents in the collection",
            |t| t.documents,
        ),
        (
            "tidecache_collection_bytes",
            "gauge",
            "BSON bytes of the collection's documents",
            |t| t.document_bytes,
        ),
        (
            "tidecache_collection_index_bytes",
            "gauge",
            "Estimated bytes of the collection's indexes",
            |t| t.index_bytes,
        ),
        (
            "tidecache_collection_ttl_passes_total",
            "counter",
            "TTL monitor passes over the collection (DOC.STATS ttl.passes)",
            |t| t.ttl.passes,
        ),
        (
            "tidecache_collection_ttl_deleted_total",
            "counter",
            "Documents of the collection removed by the TTL monitor (DOC.STATS ttl.deletedDocuments)",
            |t| t.ttl.deleted_documents,
        ),
    ];
    for (name, kind, help, field) in per_collection {
        p.family(name, kind, help);
        for (db, coll, t) in &snap.collections {
            let db = format!("db{db}");
            p.sample(name, &[("db", &db), ("collection", coll)], field(t));
        }
    }
    p.0
}
