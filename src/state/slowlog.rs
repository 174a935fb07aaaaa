//! The slow log (Redis's `slowlog.c`): commands that ran at least `slowlog-log-slower-than`
//! microseconds, newest first, at most `slowlog-max-len` of them.
//!
//! The per-command cost while nothing is slow is one relaxed load and a compare
//! ([`wanted`]); the log's mutex is taken only to add a slow entry or to read the log.

use bytes::Bytes;
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};

/// Redis's `SLOWLOG_ENTRY_MAX_ARGC` and `SLOWLOG_ENTRY_MAX_STRING`.
const MAX_ARGC: usize = 32;
const MAX_STRING: usize = 128;

/// One logged command, as SLOWLOG GET shows it.
pub struct Entry {
    pub id: u64,
    /// Unix time in seconds when it was logged.
    pub time: i64,
    pub micros: u64,
    pub argv: Vec<Bytes>,
    pub addr: String,
    pub name: String,
}

static LOG: Mutex<VecDeque<Entry>> = Mutex::new(VecDeque::new());
static NEXT_ID: AtomicU64 = AtomicU64::new(0);
/// Negative: the log is off (as Redis).
static SLOWER_THAN: AtomicI64 = AtomicI64::new(10_000);
static MAX_LEN: AtomicUsize = AtomicUsize::new(128);

/// Takes the two settings (at start and on CONFIG SET). A shorter `slowlog-max-len` trims the
/// log at the next entry, as Redis does.
pub fn configure(slower_than: i64, max_len: u64) {
    SLOWER_THAN.store(slower_than, Ordering::Relaxed);
    MAX_LEN.store(
        usize::try_from(max_len).unwrap_or(usize::MAX),
        Ordering::Relaxed,
    );
}

/// Whether the log is on (`slowlog-log-slower-than` not negative).
#[inline]
pub fn enabled() -> bool {
    SLOWER_THAN.load(Ordering::Relaxed) >= 0
}

/// Whether a command that ran `micros` belongs in the log.
#[inline]
pub fn wanted(micros: u64) -> bool {
    let t = SLOWER_THAN.load(Ordering::Relaxed);
    t >= 0 && micros >= t as u64
}

/// The arguments as Redis keeps them: at most 32 (the last one then saying how many more
/// there were), each string at most 128 bytes (then saying how many more bytes).
pub fn trimmed(argv: &[Bytes]) -> Vec<Bytes> {
    let argc = argv.len();
    let kept = argc.min(MAX_ARGC);
    let mut out = Vec::with_capacity(kept);
    for (j, a) in argv.iter().take(kept).enumerate() {
        if kept != argc && j == kept - 1 {
            out.push(Bytes::from(format!(
                "... ({} more arguments)",
                argc - kept + 1
            )));
        } else if a.len() > MAX_STRING {
            let mut s = a[..MAX_STRING].to_vec();
            s.extend_from_slice(format!("... ({} more bytes)", a.len() - MAX_STRING).as_bytes());
            out.push(Bytes::from(s));
        } else {
            // A copy, not a clone: the argument is a slice of the connection's read buffer,
            // and an entry holding it would keep the whole buffer (a 500 KB pipeline) alive
            // as long as the entry lives.
            out.push(Bytes::copy_from_slice(a));
        }
    }
    out
}

/// Adds an entry (the arguments already trimmed and redacted), dropping the oldest past
/// `slowlog-max-len`.
#[cold]
pub fn push(argv: Vec<Bytes>, micros: u64, addr: String, name: String) {
    let entry = Entry {
        id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
        time: crate::util::clock::now_ms().div_euclid(1000),
        micros,
        argv,
        addr,
        name,
    };
    let max = MAX_LEN.load(Ordering::Relaxed);
    let mut log = LOG.lock();
    log.push_front(entry);
    log.truncate(max);
}

/// Calls `f` with up to `count` entries, newest first.
pub fn with_entries<R>(count: usize, f: impl FnOnce(&mut dyn Iterator<Item = &Entry>) -> R) -> R {
    let log = LOG.lock();
    f(&mut log.iter().take(count))
}

pub fn len() -> usize {
    LOG.lock().len()
}

/// SLOWLOG RESET: empties the log (entry ids keep counting, as Redis's).
pub fn reset() {
    let old = std::mem::take(&mut *LOG.lock());
    drop(old);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trims_as_redis() {
        let many: Vec<Bytes> = (0..34).map(|i| Bytes::from(i.to_string())).collect();
        let t = trimmed(&many);
        assert_eq!(t.len(), 32);
        assert_eq!(&t[31][..], b"... (3 more arguments)");
        assert_eq!(&t[30][..], b"30");
        let long = vec![Bytes::from(vec![b'A'; 129])];
        let t = trimmed(&long);
        assert_eq!(t[0].len(), 128 + "... (1 more bytes)".len());
        assert!(t[0].ends_with(b"... (1 more bytes)"));
        let exact: Vec<Bytes> = (0..32).map(|i| Bytes::from(i.to_string())).collect();
        assert_eq!(trimmed(&exact), exact);
    }
}
