//! Lines of Redis's log format (`<pid>:<role> <date> <mark> text`), written where Redis
//! writes its log: standard output when `logfile` is empty, else that file. Tools that start
//! or watch Redis (its own test suite among them) read them there.

use super::Server;
use crate::config::Config;

#[derive(Clone, Copy, PartialEq, PartialOrd)]
pub enum Level {
    Verbose,
    Notice,
    Warning,
}

/// Where and from which level Redis-format lines are written (`loglevel`, `logfile`): the
/// start-up lines tools wait for (the banner's ` PID: <pid>`, "Ready to accept
/// connections", "Failed listening on port") and the few others they read (replication,
/// persistence); every other line goes through `tracing` only.
#[derive(Clone)]
pub struct RedisLog {
    file: Option<std::path::PathBuf>,
    min: Option<Level>,
}

/// `logfile`, a relative path read from `dir` as Redis reads it (Redis works in `dir`);
/// None when empty (standard output for Redis-format lines, standard error for the rest).
pub fn logfile_path(config: &Config) -> Option<std::path::PathBuf> {
    let f = config.get("logfile");
    if f.is_empty() {
        return None;
    }
    let p = std::path::Path::new(f);
    Some(if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::path::Path::new(config.get("dir")).join(p)
    })
}

impl RedisLog {
    pub fn new(config: &Config) -> RedisLog {
        let min = match config.get("loglevel") {
            "debug" | "verbose" => Some(Level::Verbose),
            "notice" => Some(Level::Notice),
            "warning" => Some(Level::Warning),
            _ => None,
        };
        let file = logfile_path(config);
        RedisLog { file, min }
    }

    pub fn line(&self, level: Level, msg: &str) {
        use std::io::Write;
        if self.min.is_none_or(|min| level < min) {
            return;
        }
        let mark = match level {
            Level::Verbose => '-',
            Level::Notice => '*',
            Level::Warning => '#',
        };
        let role = if super::replication::is_replica() {
            'S'
        } else {
            'M'
        };
        let text = format!(
            "{}:{role} {} {mark} {msg}\n",
            std::process::id(),
            crate::util::clock::redis_time()
        );
        let _ = match &self.file {
            None => std::io::stdout().lock().write_all(text.as_bytes()),
            Some(path) => std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .and_then(|mut f| f.write_all(text.as_bytes())),
        };
    }
}

/// A line of the running server's log (its current `loglevel` and `logfile`); also to
/// `tracing`. `warn`: Redis's `#` level, else `*` (notice).
pub fn line(server: &Server, warn: bool, msg: &str) {
    if warn {
        tracing::warn!("{msg}");
    } else {
        tracing::info!("{msg}");
    }
    let level = if warn { Level::Warning } else { Level::Notice };
    RedisLog::new(&server.config.read()).line(level, msg);
}
