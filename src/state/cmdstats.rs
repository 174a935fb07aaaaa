//! Command, error and latency statistics: `INFO commandstats`, `INFO errorstats`,
//! `INFO latencystats`, `LATENCY HISTOGRAM`, and the latency monitor's events (`LATENCY
//! LATEST/HISTORY`), with Redis 7's meanings.
//!
//! Per-command counters are per thread: each thread that runs commands owns one row of
//! counters per command of the table (indexed by the command's position, see
//! `commands::stat_index`), written only by that thread with plain load + store (no locked
//! instruction, no shared cache line), and summed by `INFO` over every thread. `CONFIG
//! RESETSTAT` does not touch other threads' rows: it advances a global epoch, a row whose
//! epoch is behind counts as empty for readers, and its owner clears it at its next write.
//!
//! Error replies are rarer: a global counter and one small table under a mutex, capped at
//! [`MAX_ERROR_CODES`] distinct codes as Redis 7.2 does (past it the table holds only
//! `ERRORSTATS_DISABLED` until the next `CONFIG RESETSTAT`).

use parking_lot::Mutex;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

/// Redis's `LATENCY_HISTOGRAM_MIN_VALUE`/`MAX_VALUE` (nanoseconds) and precision (2
/// significant digits), with HdrHistogram's bucket layout, so percentiles and `LATENCY
/// HISTOGRAM` buckets come out as Redis reports them.
const HIST_MAX: u64 = 1_000_000_000;
const SUB_BUCKET_HALF_MAG: u32 = 7;
const SUB_BUCKET_COUNT: u64 = 256;
const SUB_BUCKET_HALF: u64 = 128;
const SUB_BUCKET_MASK: u64 = SUB_BUCKET_COUNT - 1;
/// 23 buckets cover 1 ns .. 1 s at 2 significant digits: (23 + 1) × 128 counts.
const HIST_LEN: usize = 24 * 128;

fn bucket_index(v: u64) -> u32 {
    64 - (v | SUB_BUCKET_MASK).leading_zeros() - (SUB_BUCKET_HALF_MAG + 1)
}

fn counts_index(v: u64) -> usize {
    let b = bucket_index(v);
    let sub = v >> b;
    // Bucket 0 holds 0..256 from index 0: its base (128) plus sub - 128, added first.
    ((((b + 1) as u64) << SUB_BUCKET_HALF_MAG) + sub - SUB_BUCKET_HALF) as usize
}

fn value_at_index(i: usize) -> u64 {
    let mut bucket = (i >> SUB_BUCKET_HALF_MAG) as i64 - 1;
    let mut sub = (i as u64 & (SUB_BUCKET_HALF - 1)) + SUB_BUCKET_HALF;
    if bucket < 0 {
        sub -= SUB_BUCKET_HALF;
        bucket = 0;
    }
    sub << bucket
}

/// HdrHistogram's `highest_equivalent_value`: the largest value counted in `v`'s slot.
fn highest_equivalent(v: u64) -> u64 {
    let b = bucket_index(v);
    let sub = v >> b;
    let adjusted = if sub >= SUB_BUCKET_COUNT { b + 1 } else { b };
    let lowest = sub << b;
    lowest + (1u64 << adjusted) - 1
}

/// One thread's histogram of one command: counts written by the owner only.
struct Histogram {
    counts: Box<[AtomicU64]>,
}

impl Histogram {
    fn new() -> Histogram {
        Histogram {
            counts: (0..HIST_LEN).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    #[inline]
    fn record(&self, nanos: u64) {
        let c = &self.counts[counts_index(nanos.clamp(1, HIST_MAX))];
        c.store(c.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    }

    fn clear(&self) {
        for c in self.counts.iter() {
            c.store(0, Ordering::Relaxed);
        }
    }
}

/// A histogram summed over threads, for reading.
pub struct Merged {
    counts: Vec<u64>,
    pub total: u64,
}

impl Merged {
    /// HdrHistogram's `hdr_value_at_percentile`, in nanoseconds.
    pub fn value_at_percentile(&self, p: f64) -> u64 {
        let p = p.min(100.0);
        let want = (((p / 100.0) * self.total as f64) + 0.5) as u64;
        let want = want.max(1);
        let mut seen = 0;
        for (i, c) in self.counts.iter().enumerate() {
            seen += c;
            if *c > 0 && seen >= want {
                return highest_equivalent(value_at_index(i));
            }
        }
        0
    }

    /// Redis's `LATENCY HISTOGRAM` buckets: (upper bound in µs, cumulative count) at
    /// 1024 ns × 2^k, each bucket shown only when its cumulative count grew.
    pub fn cdf_usec(&self) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        let (mut level, mut i, mut cum, mut prev) = (1024u64, 0usize, 0u64, 0u64);
        while cum < self.total && level <= HIST_MAX * 2 {
            let top = highest_equivalent(level);
            while i < self.counts.len() && value_at_index(i) <= top {
                cum += self.counts[i];
                i += 1;
            }
            if cum > prev {
                out.push((top / 1000, cum));
            }
            prev = cum;
            level *= 2;
        }
        out
    }
}

/// One command's counters in one thread.
#[derive(Default)]
struct Row {
    calls: AtomicU64,
    nanos: AtomicU64,
    rejected: AtomicU64,
    failed: AtomicU64,
    hist: OnceLock<Box<Histogram>>,
}

#[inline]
fn bump(c: &AtomicU64, by: u64) {
    // Only the owning thread writes: no locked read-modify-write needed.
    c.store(
        c.load(Ordering::Relaxed).wrapping_add(by),
        Ordering::Relaxed,
    );
}

struct ThreadRows {
    epoch: AtomicU64,
    rows: Box<[Row]>,
}

impl ThreadRows {
    fn clear(&self) {
        for r in self.rows.iter() {
            for c in [&r.calls, &r.nanos, &r.rejected, &r.failed] {
                c.store(0, Ordering::Relaxed);
            }
            if let Some(h) = r.hist.get() {
                h.clear();
            }
        }
    }
}

/// Every thread's rows (kept after a thread ends: a new thread takes over a free one, so
/// counts survive and the list stays as long as the most threads ever alive at once).
static THREADS: Mutex<Vec<Arc<ThreadRows>>> = Mutex::new(Vec::new());
static FREE: Mutex<Vec<Arc<ThreadRows>>> = Mutex::new(Vec::new());
static ROWS: AtomicUsize = AtomicUsize::new(0);
static EPOCH: AtomicU64 = AtomicU64::new(1);
static LATENCY_TRACKING: AtomicBool = AtomicBool::new(true);
static MONITOR_THRESHOLD_MS: AtomicU64 = AtomicU64::new(0);

struct Local(Arc<ThreadRows>);

impl Drop for Local {
    fn drop(&mut self) {
        FREE.lock().push(self.0.clone());
    }
}

thread_local! {
    static LOCAL: Local = Local(adopt());
    /// Nesting of command runs on this thread (a script's or EXEC's commands run inside it).
    static DEPTH: Cell<u32> = const { Cell::new(0) };
    /// Whether `NESTED_ERROR` holds something (so a command with no nested error run does
    /// not touch it).
    static NESTED_SET: Cell<bool> = const { Cell::new(false) };
    /// The last error a nested command answered during the current outer command: the
    /// outer one failing with that same error (a script passing on `redis.call`'s error)
    /// does not count it twice, as Redis 7.
    static NESTED_ERROR: RefCell<String> = const { RefCell::new(String::new()) };
}

fn adopt() -> Arc<ThreadRows> {
    if let Some(t) = FREE.lock().pop() {
        return t;
    }
    let n = ROWS.load(Ordering::Relaxed);
    let t = Arc::new(ThreadRows {
        epoch: AtomicU64::new(EPOCH.load(Ordering::Relaxed)),
        rows: (0..n).map(|_| Row::default()).collect(),
    });
    THREADS.lock().push(t.clone());
    t
}

/// Sets the number of rows (commands and subcommands of the table); called once when the
/// command table is built, before any command runs.
pub fn init(rows: usize) {
    ROWS.store(rows, Ordering::Relaxed);
}

#[inline]
fn with_row(idx: usize, f: impl FnOnce(&Row)) {
    LOCAL.with(|l| {
        let t = &l.0;
        let epoch = EPOCH.load(Ordering::Relaxed);
        if t.epoch.load(Ordering::Relaxed) != epoch {
            t.clear();
            t.epoch.store(epoch, Ordering::Relaxed);
        }
        if let Some(r) = t.rows.get(idx) {
            f(r)
        }
    })
}

/// The start of a command run: its nesting depth (1 for a client's own command).
#[inline]
pub fn enter() -> u32 {
    DEPTH.with(|d| {
        let depth = d.get() + 1;
        d.set(depth);
        if depth == 1 && NESTED_SET.with(|s| s.replace(false)) {
            NESTED_ERROR.with(|e| {
                if let Ok(mut e) = e.try_borrow_mut() {
                    e.clear();
                }
            });
        }
        depth
    })
}

/// The end of a run begun with [`enter`]: records a call of command `idx` that took
/// `nanos`; `error` is its error reply, if it answered one. `blocked`: the command is
/// waiting for keys, its latency is recorded when it is answered ([`unblocked`]).
#[inline]
pub fn leave(idx: usize, depth: u32, nanos: u64, error: Option<&str>, blocked: bool) {
    DEPTH.with(|d| d.set(depth - 1));
    let failed = match error {
        None => false,
        Some(text) => {
            let repeated = depth == 1
                && NESTED_SET.with(|s| s.get())
                && NESTED_ERROR.with(|e| {
                    e.try_borrow()
                        .is_ok_and(|e| !e.is_empty() && text.starts_with(e.as_str()))
                });
            if depth > 1 {
                NESTED_SET.with(|s| s.set(true));
                NESTED_ERROR.with(|e| {
                    if let Ok(mut e) = e.try_borrow_mut() {
                        e.clear();
                        e.push_str(text);
                    }
                });
            }
            if !repeated {
                error_reply(text);
            }
            true
        }
    };
    let track = !blocked && LATENCY_TRACKING.load(Ordering::Relaxed);
    with_row(idx, |r| {
        bump(&r.calls, 1);
        bump(&r.nanos, nanos);
        if failed {
            bump(&r.failed, 1);
        }
        if track {
            r.hist
                .get_or_init(|| Box::new(Histogram::new()))
                .record(nanos);
        }
    });
}

/// The start of a script's run on the script thread: its commands are nested in it, as in
/// a command run on the caller's thread. Returns the depth for [`script_end`].
pub fn script_begin() -> u32 {
    enter()
}

/// The end of a run begun with [`script_begin`]: whether `error` (the script's error reply)
/// repeats the error a command inside it answered, which that command already counted.
pub fn script_end(depth: u32, error: Option<&str>) -> bool {
    DEPTH.with(|d| d.set(depth - 1));
    let Some(text) = error else { return false };
    NESTED_SET.with(|s| s.get())
        && NESTED_ERROR.with(|e| {
            e.try_borrow()
                .is_ok_and(|e| !e.is_empty() && text.starts_with(e.as_str()))
        })
}

/// A blocked command (counted as a call when it blocked) was answered: its latency, and a
/// failure if the answer is an error (`CLIENT UNBLOCK ... ERROR`); `error_counted`: the
/// error was already counted (a script passing on the error of a command it called).
pub fn unblocked(idx: usize, nanos: u64, error: Option<&str>, error_counted: bool) {
    if let Some(text) = error {
        if !error_counted {
            error_reply(text);
        }
    }
    let track = LATENCY_TRACKING.load(Ordering::Relaxed);
    with_row(idx, |r| {
        bump(&r.nanos, nanos);
        if error.is_some() {
            bump(&r.failed, 1);
        }
        if track {
            r.hist
                .get_or_init(|| Box::new(Histogram::new()))
                .record(nanos);
        }
    });
}

/// A script's `redis.call`/`redis.pcall` refused command `idx` before running it (not
/// allowed from scripts, a write in a read-only script, OOM): a rejected call and an error
/// reply, as Redis's `scriptCall`; the script failing with the same error is not counted
/// again.
pub fn rejected_in_script(idx: usize, error: &str) {
    rejected(Some(idx), error);
    NESTED_SET.with(|s| s.set(true));
    NESTED_ERROR.with(|e| {
        if let Ok(mut e) = e.try_borrow_mut() {
            e.clear();
            e.push_str(error);
        }
    });
}

/// Command `idx` (when the command is known) was refused before it ran with `error`.
pub fn rejected(idx: Option<usize>, error: &str) {
    error_reply(error);
    if let Some(idx) = idx {
        with_row(idx, |r| bump(&r.rejected, 1));
    }
}

/// One command's totals over every thread.
#[derive(Default, Debug, Clone, Copy)]
pub struct Totals {
    pub calls: u64,
    pub usec: u64,
    pub rejected: u64,
    pub failed: u64,
}

fn live_threads() -> Vec<Arc<ThreadRows>> {
    let epoch = EPOCH.load(Ordering::Relaxed);
    THREADS
        .lock()
        .iter()
        .filter(|t| t.epoch.load(Ordering::Relaxed) == epoch)
        .cloned()
        .collect()
}

/// Calls of every command on every thread (`total_commands_processed`: as Redis's
/// `stat_numcommands`, commands that ran, those a script or EXEC called included, refused
/// ones not). Summed here rather than counted per command in a shared counter, which was a
/// locked instruction on every command.
pub fn total_calls() -> u64 {
    let rows = ROWS.load(Ordering::Relaxed);
    live_threads()
        .iter()
        .flat_map(|t| t.rows.iter().take(rows))
        .map(|r| r.calls.load(Ordering::Relaxed))
        .sum()
}

/// Every command's totals, indexed as the rows.
pub fn totals() -> Vec<Totals> {
    let mut out = vec![Totals::default(); ROWS.load(Ordering::Relaxed)];
    let mut nanos = vec![0u64; out.len()];
    for t in live_threads() {
        for (i, r) in t.rows.iter().enumerate().take(out.len()) {
            out[i].calls += r.calls.load(Ordering::Relaxed);
            out[i].rejected += r.rejected.load(Ordering::Relaxed);
            out[i].failed += r.failed.load(Ordering::Relaxed);
            nanos[i] += r.nanos.load(Ordering::Relaxed);
        }
    }
    for (o, n) in out.iter_mut().zip(nanos) {
        o.usec = n / 1000;
    }
    out
}

/// Every command's latency histogram that has samples, indexed as the rows.
pub fn histograms() -> Vec<Option<Merged>> {
    let n = ROWS.load(Ordering::Relaxed);
    let mut out: Vec<Option<Merged>> = (0..n).map(|_| None).collect();
    for t in live_threads() {
        for (i, r) in t.rows.iter().enumerate().take(n) {
            let Some(h) = r.hist.get() else { continue };
            let m = out[i].get_or_insert_with(|| Merged {
                counts: vec![0; HIST_LEN],
                total: 0,
            });
            for (d, c) in m.counts.iter_mut().zip(h.counts.iter()) {
                let c = c.load(Ordering::Relaxed);
                *d += c;
                m.total += c;
            }
        }
    }
    for o in out.iter_mut() {
        if o.as_ref().is_some_and(|m| m.total == 0) {
            *o = None;
        }
    }
    out
}

/// `latency-tracking`.
pub fn set_latency_tracking(on: bool) {
    LATENCY_TRACKING.store(on, Ordering::Relaxed);
}

pub fn latency_tracking() -> bool {
    LATENCY_TRACKING.load(Ordering::Relaxed)
}

// ---- error replies ----

/// Redis 7.2's cap on distinct error codes in `INFO errorstats` (a script can make up any
/// number of codes with `redis.error_reply`).
pub const MAX_ERROR_CODES: usize = 128;

struct ErrorTable {
    codes: BTreeMap<Box<str>, u64>,
    disabled: bool,
}

static ERRORS: Mutex<ErrorTable> = Mutex::new(ErrorTable {
    codes: BTreeMap::new(),
    disabled: false,
});
static TOTAL_ERRORS: AtomicU64 = AtomicU64::new(0);

/// An error reply went to a client: `total_error_replies` and its code's count (the text
/// up to the first space, within the first 32 bytes, else `ERR`, as Redis's
/// `afterErrorReply`).
pub fn error_reply(text: &str) {
    TOTAL_ERRORS.fetch_add(1, Ordering::Relaxed);
    let head = &text.as_bytes()[..text.len().min(31)];
    let code = match head.iter().position(|&b| b == b' ') {
        Some(n) if n > 0 => &text[..n],
        _ => "ERR",
    };
    let mut t = ERRORS.lock();
    if t.disabled {
        return;
    }
    if let Some(c) = t.codes.get_mut(code) {
        *c += 1;
        return;
    }
    if t.codes.len() >= MAX_ERROR_CODES {
        let list: Vec<&str> = t.codes.keys().map(|k| &**k).collect();
        tracing::warn!(
            "Errorstats stopped adding new errors because the number of errors reached the limit, may be misuse of lua error_reply, please check INFO ERRORSTATS, this can be re-enabled via CONFIG RESETSTAT."
        );
        tracing::warn!("Current errors code list: {}", list.join(", "));
        t.codes.clear();
        t.codes.insert("ERRORSTATS_DISABLED".into(), 1);
        t.disabled = true;
        return;
    }
    t.codes.insert(code.into(), 1);
}

pub fn total_error_replies() -> u64 {
    TOTAL_ERRORS.load(Ordering::Relaxed)
}

/// `INFO errorstats`: (code, count) in byte order.
pub fn error_counts() -> Vec<(String, u64)> {
    ERRORS
        .lock()
        .codes
        .iter()
        .map(|(k, v)| (k.to_string(), *v))
        .collect()
}

/// `CONFIG RESETSTAT`: command counters, histograms, error counts.
pub fn reset() {
    EPOCH.fetch_add(1, Ordering::Relaxed);
    TOTAL_ERRORS.store(0, Ordering::Relaxed);
    let mut t = ERRORS.lock();
    t.codes.clear();
    t.disabled = false;
}

// ---- latency monitor ----

/// Samples kept per event (Redis's `LATENCY_TS_LEN`).
const EVENT_SAMPLES: usize = 160;

#[derive(Default)]
pub struct EventSeries {
    /// (unix seconds, milliseconds), oldest first.
    pub samples: VecDeque<(u64, u64)>,
    pub max: u64,
}

static EVENTS: Mutex<BTreeMap<String, EventSeries>> = Mutex::new(BTreeMap::new());

/// `latency-monitor-threshold` in milliseconds (0: off).
pub fn set_monitor_threshold(ms: u64) {
    MONITOR_THRESHOLD_MS.store(ms, Ordering::Relaxed);
}

/// Redis's `latencyAddSampleIfNeeded`: one relaxed load unless the event is slow enough.
#[inline]
pub fn latency_sample(event: &str, nanos: u64) {
    let threshold = MONITOR_THRESHOLD_MS.load(Ordering::Relaxed);
    if threshold == 0 || nanos < threshold * 1_000_000 {
        return;
    }
    add_sample(event, nanos / 1_000_000);
}

#[cold]
fn add_sample(event: &str, ms: u64) {
    let now = crate::util::clock::now_ms().max(0) as u64 / 1000;
    let mut events = EVENTS.lock();
    let s = events.entry(event.to_string()).or_default();
    s.max = s.max.max(ms);
    // Samples in the same second are merged, keeping the worst.
    if let Some(last) = s.samples.back_mut() {
        if last.0 == now {
            last.1 = last.1.max(ms);
            return;
        }
    }
    if s.samples.len() == EVENT_SAMPLES {
        s.samples.pop_front();
    }
    s.samples.push_back((now, ms));
}

/// Runs `f` on the events (LATENCY LATEST/HISTORY/DOCTOR/GRAPH).
pub fn with_events<R>(f: impl FnOnce(&BTreeMap<String, EventSeries>) -> R) -> R {
    f(&EVENTS.lock())
}

/// LATENCY RESET: the named events (all when empty); how many were reset.
pub fn reset_events(names: &[String]) -> usize {
    let mut events = EVENTS.lock();
    if names.is_empty() {
        let n = events.len();
        events.clear();
        return n;
    }
    names
        .iter()
        .filter(|n| events.remove(n.as_str()).is_some())
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_layout_matches_hdr() {
        // Values below 256 are exact; above, slots are 2 significant digits wide.
        assert_eq!(highest_equivalent(100), 100);
        assert_eq!(highest_equivalent(1024), 1031);
        assert_eq!(highest_equivalent(2048), 2063);
        assert!(counts_index(HIST_MAX) < HIST_LEN);
        for v in [1u64, 255, 256, 1000, 12_345, 999_999, HIST_MAX] {
            let i = counts_index(v);
            assert!(value_at_index(i) <= v && v <= highest_equivalent(value_at_index(i)));
        }
    }

    #[test]
    fn percentiles_and_cdf() {
        let h = Histogram::new();
        for _ in 0..99 {
            h.record(1000);
        }
        h.record(1_000_000);
        let m = Merged {
            counts: h.counts.iter().map(|c| c.load(Ordering::Relaxed)).collect(),
            total: 100,
        };
        assert_eq!(m.value_at_percentile(50.0), highest_equivalent(1000));
        assert_eq!(m.value_at_percentile(100.0), highest_equivalent(1_000_000));
        let cdf = m.cdf_usec();
        assert_eq!(cdf.first(), Some(&(1, 99)));
        assert_eq!(cdf.last().map(|c| c.1), Some(100));
    }

    fn count_of(code: &str) -> u64 {
        error_counts()
            .into_iter()
            .find(|(k, _)| k == code)
            .map_or(0, |(_, v)| v)
    }

    #[test]
    fn a_script_passing_on_a_counted_error_does_not_count_it_again() {
        let depth = enter();
        rejected_in_script(0, "TESTOOM not allowed");
        leave(0, depth, 10, Some("TESTOOM not allowed script: abc"), false);
        assert_eq!(count_of("TESTOOM"), 1);
        // The next command starts clean: the same error of its own counts.
        let depth = enter();
        leave(0, depth, 10, Some("TESTOOM not allowed"), false);
        assert_eq!(count_of("TESTOOM"), 2);
    }

    #[test]
    fn error_codes_are_the_first_word() {
        // Other tests may count errors at the same time: compare differences only.
        let before = error_counts()
            .into_iter()
            .find(|(k, _)| k == "TESTCODE")
            .map_or(0, |(_, v)| v);
        error_reply("TESTCODE something went wrong");
        let after = error_counts()
            .into_iter()
            .find(|(k, _)| k == "TESTCODE")
            .map_or(0, |(_, v)| v);
        assert_eq!(after, before + 1);
    }
}
