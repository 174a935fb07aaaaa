//! `tidecache-server [path/to/tidecache.conf] [--name value ...]`

use mimalloc::MiMalloc;
use std::sync::Arc;
use tidecache::config::Config;
use tidecache::server::{listener, start_background};
use tidecache::state::{Server, VERSION};

#[global_allocator]
static GLOBAL: MiMalloc = MiMalloc;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
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
    init_logging(&config);
    // Measured on 2 cores with the load generator on the same machine: one thread served
    // GET at pipeline 1 about 10% faster than two (no cross-thread wake-ups, no fight with
    // the client for a core); see docs/BENCHMARKS.md.
    let threads = config.io_threads();
    config.set_normalized("io-threads", threads.to_string());
    // One thread: the current-thread scheduler (a local run queue, no work-stealing
    // bookkeeping); more: the multi-thread one.
    let mut builder = if threads == 1 {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        b.worker_threads(threads);
        b
    };
    let runtime = match builder.enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("could not start the runtime: {e}");
            std::process::exit(1);
        }
    };
    let code = runtime.block_on(run(config));
    std::process::exit(code);
}

async fn run(config: Config) -> i32 {
    let server = Server::new(config);
    let listeners = match listener::bind(&server).await {
        Ok(l) => l,
        Err(e) => {
            tracing::error!("{e}");
            return 1;
        }
    };
    tracing::info!(
        "tidecache {VERSION} (Redis {} compatible) started: port {}, pid {}, {} shards, {} databases",
        tidecache::state::REDIS_COMPAT_VERSION,
        server.port.load(std::sync::atomic::Ordering::Relaxed),
        std::process::id(),
        server.store.shard_count(),
        server.store.databases()
    );
    tracing::info!("Ready to accept connections tcp");
    tokio::spawn(watch_signals(server.clone()));
    start_background(&server);
    listener::run(server, listeners).await;
    tracing::info!("tidecache is now ready to exit, bye bye...");
    0
}

async fn watch_signals(server: Arc<Server>) {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!("cannot watch SIGTERM: {e}");
            return;
        }
    };
    tokio::select! {
        _ = term.recv() => tracing::warn!("Received SIGTERM scheduling shutdown..."),
        _ = tokio::signal::ctrl_c() => tracing::warn!("Received SIGINT scheduling shutdown..."),
    }
    server.shutdown();
}

fn init_logging(config: &Config) {
    let level = match config.get("loglevel") {
        "debug" => "debug",
        "verbose" => "info",
        "notice" => "info",
        "warning" => "warn",
        _ => "off",
    };
    let filter = tracing_subscriber::EnvFilter::new(level);
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false);
    let logfile = config.get("logfile");
    if logfile.is_empty() {
        builder.with_writer(std::io::stderr).init();
    } else {
        match std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(logfile)
        {
            Ok(f) => builder
                .with_writer(std::sync::Mutex::new(f))
                .with_ansi(false)
                .init(),
            Err(e) => {
                eprintln!("Can't open the log file '{logfile}': {e}");
                std::process::exit(1);
            }
        }
    }
}
