//! The process's Linux OOM score (`/proc/self/oom_score_adj`), as Redis's `setOOMScoreAdj`.

use std::sync::Mutex;

const PATH: &str = "/proc/self/oom_score_adj";

/// The score the process had before the server first changed it, while the server is in
/// control of it (`oom-score-adj` not `no`): `relative` adds to it, and turning the
/// setting off writes it back.
static BASE: Mutex<Option<i32>> = Mutex::new(None);

/// `mode` is the normalized `oom-score-adj` (`no`, `yes` for relative, `absolute`) and
/// `value` the `oom-score-adj-values` entry for the server's role. The error names what
/// failed (the caller logs it).
pub fn apply(mode: &str, value: i32) -> Result<(), String> {
    let mut base = BASE.lock().unwrap_or_else(|e| e.into_inner());
    let score = if mode != "no" {
        let b = match *base {
            Some(b) => b,
            None => {
                let text = std::fs::read_to_string(PATH)
                    .map_err(|e| format!("Unable to read oom_score_adj: {e}"))?;
                let b = text.trim().parse().unwrap_or(0);
                *base = Some(b);
                b
            }
        };
        let v = if mode == "absolute" { value } else { value + b };
        v.clamp(-1000, 1000)
    } else if let Some(b) = base.take() {
        b
    } else {
        return Ok(());
    };
    std::fs::write(PATH, format!("{score}\n"))
        .map_err(|e| format!("Unable to write oom_score_adj: {e}"))
}
