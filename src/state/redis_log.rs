//! Lines of Redis's log format, for what tools read from the log.

use super::Server;

/// A line written where Redis writes its log (standard output, or `logfile`) in its format,
/// since tools that watch the server (Redis's tests among them) read it there; also to
/// `tracing`. `warn`: Redis's `#` level, else `*` (notice).
pub fn line(server: &Server, warn: bool, msg: &str) {
    use std::io::Write;
    if warn {
        tracing::warn!("{msg}");
    } else {
        tracing::info!("{msg}");
    }
    let (level, file) = {
        let c = server.config.read();
        (c.get("loglevel").to_string(), c.get("logfile").to_string())
    };
    if level == "nothing" || (level == "warning" && !warn) {
        return;
    }
    let role = if super::replication::is_replica() {
        'S'
    } else {
        'M'
    };
    let mark = if warn { '#' } else { '*' };
    let text = format!(
        "{}:{role} {} {mark} {msg}\n",
        std::process::id(),
        crate::util::clock::redis_time()
    );
    let _ = if file.is_empty() {
        std::io::stdout().lock().write_all(text.as_bytes())
    } else {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&file)
            .and_then(|mut f| f.write_all(text.as_bytes()))
    };
}
