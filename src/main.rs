//! `tidecache-server [path/to/tidecache.conf] [--name value ...]`

use std::sync::Arc;
use tidecache::commands::server::ShutdownStop;
use tidecache::config::Config;
use tidecache::server::{listener, start_background};
use tidecache::state::redis_log::{Level, RedisLog};
use tidecache::state::{Server, VERSION};

/// mimalloc, with every allocation counted: `used_memory` and `maxmemory` (util::alloc).
#[global_allocator]
static GLOBAL: tidecache::util::alloc::Counting = tidecache::util::alloc::Counting;

fn main() {
    tidecache::util::alloc::activate();
    // Read before the process title takes over the memory they live in (util::proctitle).
    let mut argv = std::env::args();
    let arg0 = argv.next().unwrap_or_default();
    let args: Vec<String> = argv.collect();
    if args.first().map(String::as_str) == Some(tidecache::store::journal::child::CHILD_ARG) {
        // A background save's stand-in child (store::journal::child).
        tidecache::store::journal::child::run_child();
        return;
    }
    tidecache::store::journal::child::serve_as_child_binary();
    if args.iter().any(|a| a == "--version" || a == "-v") {
        println!("tidecache-server v={VERSION}");
        return;
    }
    let mut config = match Config::from_args(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    // Still one thread: the title's set-up moves the environment (util::proctitle).
    let title_setup = config
        .get_bool("set-proc-title")
        .then(|| tidecache::util::proctitle::init(&arg0));
    // Before the command table is first used (it is built with the renames).
    if let Err(e) = tidecache::commands::set_renames(&config.renames) {
        eprintln!("*** FATAL CONFIG FILE ERROR *** >>> {e}");
        std::process::exit(1);
    }
    let set_log_level = init_logging(&config);
    if let Some(Err(e)) = title_setup {
        tracing::warn!("The process title cannot be set: {e}");
    }
    if !config.ignored.is_empty() {
        tracing::warn!(
            "Ignoring settings that have no effect in tidecache: {}",
            config.ignored.join(", ")
        );
    }
    adjust_open_files_limit(&mut config);
    // Measured on 2 cores with the load generator on the same machine: one thread served
    // GET at pipeline 1 about 10% faster than two (no cross-thread wake-ups, no fight with
    // the client for a core); see docs/BENCHMARKS.md.
    let threads = config.io_threads();
    config.set_normalized("io-threads", threads.to_string());
    // One thread: the multi-thread scheduler with one worker and its LIFO slot off, so
    // scripts run inline on that worker and a long one hands the worker to another thread
    // (`block_in_place`; commands::scripting), where the current-thread scheduler needed a
    // script thread and two cross-thread wake-ups per batch of scripts. Without the LIFO
    // slot the worker runs the connections that became ready in the order they did, as
    // Redis's event loop does (with it, the last one woken ran first: a command sent just
    // after another client's could run before it, and Redis's tests that block one client
    // and then write from another failed). The current-thread scheduler is kept for a
    // build without tokio's unstable API (see .cargo/config.toml) and when
    // TIDECACHE_CURRENT_THREAD is set (to compare the two). More threads: the multi-thread
    // scheduler, its LIFO slot on.
    let mut builder = if threads == 1 {
        one_worker().unwrap_or_else(tokio::runtime::Builder::new_current_thread)
    } else {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        b.worker_threads(threads);
        b
    };
    // Scripts run on these threads (multi-thread) or the script thread: a reply nests as
    // deep as the tables a script returns (1000 levels before "reached lua stack limit"),
    // each level a few frames of conversion. Address space only: untouched pages cost
    // nothing.
    builder.thread_stack_size(tidecache::commands::scripting::STACK_SIZE);
    // `io-coalesce-us` (server::coalesce): one thread naps before it parks when many
    // clients keep it busy. More threads do not: a napping worker is not parked, so the
    // others would not hand it work meanwhile, and that case is unmeasured here.
    if threads == 1 {
        use tidecache::server::coalesce;
        builder
            .on_thread_park(coalesce::before_park)
            .on_thread_unpark(coalesce::after_unpark);
    }
    let runtime = match builder.enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("could not start the runtime: {e}");
            std::process::exit(1);
        }
    };
    let code = runtime.block_on(run(config, set_log_level));
    std::process::exit(code);
}

/// The runtime of `io-threads 1`: the multi-thread scheduler with one worker and no LIFO
/// slot (see `main`); None where it cannot be had (a build without `tokio_unstable`) or
/// the current-thread scheduler is asked for.
#[allow(unexpected_cfgs)]
fn one_worker() -> Option<tokio::runtime::Builder> {
    if std::env::var_os("TIDECACHE_CURRENT_THREAD").is_some_and(|v| !v.is_empty()) {
        return None;
    }
    #[cfg(tokio_unstable)]
    {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        b.worker_threads(1).disable_lifo_slot();
        Some(b)
    }
    #[cfg(not(tokio_unstable))]
    None
}

/// Redis's `adjustOpenFilesLimit`: `maxclients` clients need as many descriptors plus 32
/// for the server's own (listeners, files); the limit is raised to that, and where the
/// system refuses, `maxclients` is lowered to what the limit allows, with Redis's warnings.
fn adjust_open_files_limit(config: &mut Config) {
    const RESERVED_FDS: u64 = 32;
    let maxclients = config.get_i64("maxclients").max(1) as u64;
    let want = maxclients + RESERVED_FDS;
    match tidecache::util::proc::raise_open_files(want) {
        Ok((old, now)) if now >= want => {
            if now > old {
                tracing::info!(
                    "Increased maximum number of open files to {now} (it was originally set to {old})."
                );
            }
        }
        Ok((_, now)) => {
            let reduced = now.saturating_sub(RESERVED_FDS).max(1);
            tracing::warn!(
                "You requested maxclients of {maxclients} requiring at least {want} max file descriptors."
            );
            tracing::warn!(
                "Current maximum open files is {now}. maxclients has been reduced to {reduced} to compensate for low ulimit. If you need higher maxclients increase 'ulimit -n'."
            );
            config.set_normalized("maxclients", reduced.to_string());
        }
        Err(e) => tracing::warn!("Unable to obtain the current NOFILE limit ({e}), assuming 1024."),
    }
}

async fn run(config: Config, set_log_level: tidecache::state::LogLevelSetter) -> i32 {
    let log = RedisLog::new(&config);
    let port = config.get_i64("port");
    // Redis loads its append-only journal instead of the snapshot when `appendonly` is on.
    let snapshot = (config.get("appendonly") != "yes")
        .then(|| std::path::Path::new(config.get("dir")).join(config.get("dbfilename")));
    let server = Server::new(config);
    let _ = server.log_level.set(set_log_level);
    // ACL users from `user` lines or the ACL file; an error stops the start, as in Redis.
    if let Err(e) = tidecache::commands::acl::load_at_startup(&server) {
        log.line(Level::Warning, &e);
        eprintln!("{e}");
        return 1;
    }
    let listeners = match listener::bind(&server).await {
        Ok(l) => l,
        Err(e) if e.to_string().starts_with("Failed opening Unix socket") => {
            // Redis's words for the Unix socket, which no other port would cure.
            tracing::error!("{e}");
            log.line(Level::Warning, &e.to_string());
            return 1;
        }
        Err(e) => {
            tracing::error!("{e}");
            // Redis's words, which its test suite waits for to retry on another port.
            log.line(Level::Warning, &format!("Warning: {e}"));
            log.line(
                Level::Warning,
                &format!("Failed listening on port {port} (TCP), aborting."),
            );
            return 1;
        }
    };
    // Cluster mode: nodes.conf is loaded (or a new node made) once the client port is known,
    // and the bus port bound; either failing stops the start, as in Redis. The bus is served
    // once the data is loaded (below), as Redis's cron runs after its load.
    let mut cluster_bus = None;
    if server.config.read().get_bool("cluster-enabled") {
        let bound = server.port.load(std::sync::atomic::Ordering::Relaxed) as u16;
        // The bus port is 10000 above the client port unless cluster-port names one: Redis's
        // clusterInit refuses a client port that leaves no room for it.
        if bound > 55535 && server.config.read().get_u64("cluster-port") == 0 {
            let msg = "Redis port number too high. Cluster communication port is 10,000 port numbers higher than your Redis port. Your Redis port number must be 55535 or less.";
            log.line(Level::Warning, msg);
            eprintln!("{msg}");
            return 1;
        }
        let started = {
            let cfg = server.config.read();
            tidecache::state::cluster::Cluster::start(&cfg, bound)
        };
        let cluster = match started {
            Ok(c) => c,
            Err(e) => {
                log.line(Level::Warning, &e);
                eprintln!("{e}");
                return 1;
            }
        };
        let cport = cluster.lock().my_cport;
        let bus_port = {
            let p = server.config.read().get_u64("cluster-port") as u16;
            if p != 0 {
                p
            } else {
                bound.wrapping_add(10000)
            }
        };
        let lines = std::mem::take(&mut cluster.lock().log);
        for (level, line) in lines {
            log.line(level, &line);
        }
        let _ = server.cluster.set(cluster);
        match tidecache::server::cluster_bus::bind(&server, bus_port).await {
            Ok(bus) => cluster_bus = Some(bus),
            Err(e) => {
                log.line(Level::Warning, &format!("Warning: {e}"));
                log.line(
                    Level::Warning,
                    &format!("Failed listening on port {bus_port} (cluster), aborting."),
                );
                return 1;
            }
        }
        tracing::info!("cluster bus on port {bus_port}, announced as {cport}");
    }
    // The banner with the PID, before any load, as Redis prints it: tools that start the
    // server (Redis's test suite) wait for it, then watch INFO's `loading` during a load.
    log.line(
        Level::Notice,
        &format!(
            "tidecache {VERSION} (Redis {} compatible) {}, port {}, PID: {}",
            tidecache::state::REDIS_COMPAT_VERSION,
            if server.cluster.get().is_some() {
                "cluster"
            } else {
                "standalone"
            },
            server.port.load(std::sync::atomic::Ordering::Relaxed),
            std::process::id(),
        ),
    );
    // As Redis once it listens: the OOM score of a master (or replica), and the title.
    if let Err(e) = server.apply_oom_score_adj() {
        tracing::warn!("{e}");
    }
    if let Err(e) = server.set_proc_title() {
        tracing::debug!("process title: {e}");
    }
    // The admin port (off unless admin-port is set): bound now so a port in use stops the
    // start as the RESP port's does, and served at once (metrics during a journal replay).
    match tidecache::server::admin::bind(&server).await {
        Ok(Some(admin)) => tidecache::server::admin::spawn(&server, admin),
        Ok(None) => {}
        Err(e) => {
            let port = server.config.read().get_i64("admin-port");
            tracing::error!("{e}");
            log.line(Level::Warning, &format!("Warning: {e}"));
            log.line(
                Level::Warning,
                &format!("Failed listening on admin port {port} (TCP), aborting."),
            );
            return 1;
        }
    }
    // The journal is replayed while clients are already served, as Redis loads: they are
    // answered `-LOADING` except by the commands flagged `loading` (INFO shows the progress).
    let mut serving = None;
    let mut listeners = Some(listeners);
    if server.config.read().get_bool("appendonly") {
        tidecache::commands::journal::begin_loading();
        tokio::spawn(watch_signals(server.clone()));
        if let Some(l) = listeners.take() {
            serving = Some(tokio::spawn(listener::run(server.clone(), l)));
        }
        let s = server.clone();
        let replay_log = log.clone();
        let loaded = tokio::task::spawn_blocking(move || {
            let mut logger = |warn: bool, line: &str| {
                let level = if warn { Level::Warning } else { Level::Notice };
                replay_log.line(level, line);
            };
            tidecache::commands::journal::load(&s, &mut logger)
        })
        .await
        .unwrap_or_else(|e| Err(format!("the journal's replay stopped: {e}")));
        tidecache::commands::journal::end_loading();
        if let Err(e) = loaded {
            log.line(Level::Warning, &e);
            tracing::error!("{e}");
            return 1;
        }
    }
    // dump.rdb is loaded as the journal is replayed: on a thread of its own while clients
    // are served and answered `-LOADING`.
    if let Some(size) = snapshot
        .as_ref()
        .and_then(|p| std::fs::metadata(p).ok())
        .map(|m| m.len())
    {
        tidecache::commands::journal::begin_loading_rdb(&server, size);
        if serving.is_none() {
            tokio::spawn(watch_signals(server.clone()));
            if let Some(l) = listeners.take() {
                serving = Some(tokio::spawn(listener::run(server.clone(), l)));
            }
        }
        let s = server.clone();
        let load_log = log.clone();
        let path = snapshot.clone().unwrap_or_default();
        let loaded = tokio::task::spawn_blocking(move || load_snapshot(&s, &path, &load_log))
            .await
            .unwrap_or(false);
        tidecache::commands::journal::end_loading();
        if !loaded {
            return 1;
        }
    }
    // What an atomic slot migration left here when this node stopped mid-import.
    if server.cluster.get().is_some() {
        let s = server.clone();
        let (slots, n) =
            tokio::task::spawn_blocking(move || tidecache::commands::cluster::trim_unowned(&s))
                .await
                .unwrap_or_default();
        if n > 0 {
            log.line(
                Level::Warning,
                &format!(
                    "Deleted {n} keys and collections of {} slots other nodes own (slots {}..={})",
                    slots.len(),
                    slots.first().copied().unwrap_or(0),
                    slots.last().copied().unwrap_or(0)
                ),
            );
        }
    }
    let pid = std::process::id();
    tracing::info!(
        "tidecache {VERSION} (Redis {} compatible) started: port {}, pid {}, {} shards, {} databases",
        tidecache::state::REDIS_COMPAT_VERSION,
        server.port.load(std::sync::atomic::Ordering::Relaxed),
        pid,
        server.store.shard_count(),
        server.store.databases()
    );
    if serving.is_none() {
        tokio::spawn(watch_signals(server.clone()));
    }
    start_background(&server);
    if let Some(bus) = cluster_bus.take() {
        tidecache::server::cluster_bus::start(&server, bus);
    }
    // A `replicaof` of the config file made it a replica just now: the replica's OOM score.
    if tidecache::state::replication::is_replica() {
        if let Err(e) = server.apply_oom_score_adj() {
            tracing::warn!("{e}");
        }
    }
    tidecache::commands::journal::start_schedules(&server);
    tidecache::util::alloc::mark_startup();
    log.line(Level::Notice, "Ready to accept connections");
    match (serving, listeners) {
        (Some(h), _) => {
            let _ = h.await;
        }
        (None, Some(l)) => listener::run(server.clone(), l).await,
        (None, None) => {}
    }
    // What the journal holds is written and fsynced before the process exits.
    tidecache::store::journal::stop();
    tracing::info!("tidecache is now ready to exit, bye bye...");
    0
}

/// Loads a Redis RDB file found at `path` at start (clients are answered `-LOADING`
/// meanwhile, as Redis does); false (after logging why, naming the file and the offset) when it cannot be
/// loaded, and the server does not start.
fn load_snapshot(server: &Arc<Server>, path: &std::path::Path, log: &RedisLog) -> bool {
    use tidecache::store::rdb_file::{load_path_as, Note};
    let started = std::time::Instant::now();
    let mut report = |note: Note, line: &str| match note {
        Note::Notice => log.line(Level::Notice, line),
        Note::Warning => {
            tracing::warn!("{line}");
            log.line(Level::Warning, line);
        }
    };
    let mut progress = tidecache::commands::journal::loading_progress;
    // A `replicaof` of the config file makes it a replica before anything loads, as
    // Redis's masterhost is set from the file.
    let replica = server.holds_masters_data() || !server.config.read().get("replicaof").is_empty();
    tidecache::store::expiry::set_replica(replica);
    match load_path_as(&server.store, path, &mut report, &mut progress, replica) {
        Ok(None) => true,
        Ok(Some(loaded)) => {
            tidecache::commands::journal::rdb_loaded(server, &loaded);
            if let (Some(id), Some(offset)) = (loaded.repl_id.clone(), loaded.repl_offset) {
                let backlog = server.config.read().get_u64("repl-backlog-size") as usize;
                log.line(
                    Level::Notice,
                    &format!("Replication history restored from the RDB: {id}:{offset}"),
                );
                tidecache::state::replication::restore_history(
                    id,
                    offset,
                    loaded.stream_db,
                    backlog,
                    replica,
                );
                // The keys that expired while it was down leave its replicas too: their DELs
                // start the new history's stream (Redis feeds them while it loads).
                if !replica {
                    for (db, key) in &loaded.expired_keys {
                        tidecache::store::journal::replicate_only(Some(*db), &[b"DEL", key]);
                    }
                }
            }
            if let Err(e) = tidecache::commands::journal::load_functions(server, &loaded.functions)
            {
                let msg = format!("Can't load the RDB file {}: {e}", path.display());
                tracing::error!("{msg}");
                log.line(Level::Warning, &msg);
                return false;
            }
            let secs = started.elapsed().as_secs_f64();
            let done = format!(
                "Done loading RDB, keys loaded: {}, keys expired: {}",
                loaded.keys, loaded.expired
            );
            if loaded.empty_skipped > 0 {
                report(
                    Note::Warning,
                    &format!("{done}, empty keys skipped: {}.", loaded.empty_skipped),
                );
            } else {
                report(Note::Notice, &format!("{done}."));
            }
            log.line(
                Level::Notice,
                &format!("DB loaded from disk: {secs:.3} seconds"),
            );
            tracing::info!(
                "DB loaded from disk: {secs:.3} seconds ({}: {} keys loaded, {} expired keys skipped)",
                path.display(),
                loaded.keys,
                loaded.expired
            );
            true
        }
        Err(e) => {
            let msg = format!("Can't load the RDB file {} {e}", path.display());
            tracing::error!("{msg}");
            log.line(Level::Warning, &msg);
            false
        }
    }
}

/// Registers the SIGTERM and SIGINT handlers before it returns, so that a signal sent once
/// "Ready to accept connections" is out finds them (a handler registered inside the spawned
/// task is only in place once that task first runs, which on a busy machine can be after the
/// line); the future it returns waits for either and shuts down.
fn watch_signals(server: Arc<Server>) -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{signal, SignalKind};
    let handlers = signal(SignalKind::terminate())
        .and_then(|term| Ok((term, signal(SignalKind::interrupt())?)));
    async move {
        let (mut term, mut int) = match handlers {
            Ok(h) => h,
            Err(e) => {
                tracing::warn!("cannot watch SIGTERM and SIGINT: {e}");
                return;
            }
        };
        loop {
            let (setting, name) = tokio::select! {
                _ = term.recv() => {
                    tracing::warn!("Received SIGTERM scheduling shutdown...");
                    ("shutdown-on-sigterm", "SIGTERM")
                }
                _ = int.recv() => {
                    tracing::warn!("Received SIGINT scheduling shutdown...");
                    ("shutdown-on-sigint", "SIGINT")
                }
            };
            // The signal's setting says what SHUTDOWN with flags would: save (always, never,
            // or when a save schedule is set), and with `force` exit even if that save fails;
            // without it a failed save keeps the server running, as Redis's.
            let (saves, force, now) = {
                let config = server.config.read();
                let flags = config.get(setting);
                (
                    tidecache::config::shutdown_saves(flags, config.get("save")),
                    flags.split_whitespace().any(|f| f == "force"),
                    flags.split_whitespace().any(|f| f == "now"),
                )
            };
            // Lagging replicas first (`shutdown-timeout`, unless the flags say `now`), then
            // the save.
            let s = server.clone();
            let prepared = tokio::task::spawn_blocking(move || {
                tidecache::commands::server::prepare_for_shutdown(&s, !now, saves, force)
            })
            .await
            .unwrap_or_else(|e| {
                // The steps' thread panicked: as a save that failed.
                if force {
                    tracing::warn!("Error trying to save the DB ({e}). Exit anyway.");
                    Ok(())
                } else {
                    tracing::warn!("Error trying to save the DB, can't exit: {e}");
                    Err(ShutdownStop::SaveFailed)
                }
            });
            if prepared == Err(ShutdownStop::SaveFailed) {
                tracing::warn!("{name} received but errors trying to shut down the server, check the logs for more information");
            }
            if prepared.is_err() {
                continue;
            }
            server.shutdown();
            return;
        }
    }
}

/// tracing's level for a `loglevel` value (the Redis-format lines are filtered apart, by
/// `state::redis_log`).
fn tracing_level(loglevel: &str) -> &'static str {
    match loglevel {
        "debug" => "debug",
        "verbose" => "info",
        "notice" => "info",
        "warning" => "warn",
        _ => "off",
    }
}

/// What sets the log's level through its filter's reload handle (one per writer type).
fn level_setter<S: 'static>(
    handle: tracing_subscriber::reload::Handle<tracing_subscriber::EnvFilter, S>,
) -> tidecache::state::LogLevelSetter {
    Box::new(move |level: &str| {
        handle
            .reload(tracing_subscriber::EnvFilter::new(tracing_level(level)))
            .map_err(|e| e.to_string())
    })
}

/// Starts the log; what sets its level later (CONFIG SET loglevel).
fn init_logging(config: &Config) -> tidecache::state::LogLevelSetter {
    let filter = tracing_subscriber::EnvFilter::new(tracing_level(config.get("loglevel")));
    // A log line that cannot be written is dropped, as Redis drops it. The subscriber's
    // own report of the failure goes to standard error with `eprintln!`, which panics when
    // standard error is a closed pipe: the task that logged died with it (the signal
    // watcher, after "Received SIGTERM", and the server never shut down).
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false)
        .log_internal_errors(false);
    let logfile = tidecache::state::redis_log::logfile_path(config);
    let logfile = logfile.as_deref().unwrap_or(std::path::Path::new(""));
    if logfile.as_os_str().is_empty() {
        // Colours only on a terminal, not in a file the standard error was sent to.
        let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
        let builder = builder
            .with_writer(std::io::stderr)
            .with_ansi(ansi)
            .with_filter_reloading();
        let setter = level_setter(builder.reload_handle());
        builder.init();
        setter
    } else {
        match std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(logfile)
        {
            Ok(f) => {
                let builder = builder
                    .with_writer(std::sync::Mutex::new(f))
                    .with_ansi(false)
                    .with_filter_reloading();
                let setter = level_setter(builder.reload_handle());
                builder.init();
                setter
            }
            Err(e) => {
                eprintln!("Can't open the log file '{}': {e}", logfile.display());
                std::process::exit(1);
            }
        }
    }
}
