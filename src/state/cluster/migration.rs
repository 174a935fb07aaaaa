//! Atomic slot migration (Redis 8.4's `CLUSTER MIGRATION`): the tasks this node runs, as
//! the target that imports slot ranges or as the source that sends them, with what
//! `CLUSTER MIGRATION STATUS` and CLUSTER INFO report of them. The transfer itself is the
//! network side's (`server::slot_migration`): a snapshot of the slots, the stream of later
//! writes to them, a pause of writes to those slots only, and one ownership flip.
//!
//! A task's `cancel` flag is how CANCEL (and a shutdown) reaches the task's connection,
//! which looks at it between steps.

use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

/// Finished tasks kept for STATUS (the oldest go first).
const DONE_KEPT: usize = 32;

/// Redis 8.4's states (`asmTaskStateToString`), the ones this transfer passes through.
pub mod st {
    pub const CONNECTING: &str = "connecting";
    pub const SYNCSLOTS_REPLY: &str = "syncslots-reply";
    pub const ACCUMULATE_BUF: &str = "accumulate-buffer";
    pub const STREAMING_BUF: &str = "streaming-buffer";
    pub const WAIT_STREAM_EOF: &str = "wait-stream-eof";
    pub const TAKEOVER: &str = "takeover";
    pub const SEND_BULK_AND_STREAM: &str = "send-bulk-and-stream";
    pub const SEND_STREAM: &str = "send-stream";
    pub const HANDOFF_PREP: &str = "handoff-prep";
    pub const HANDOFF: &str = "handoff";
    pub const COMPLETED: &str = "completed";
    pub const FAILED: &str = "failed";
    pub const CANCELED: &str = "canceled";
}

/// One migration task as this node sees it.
#[derive(Clone, Debug)]
pub struct Task {
    pub id: String,
    pub ranges: Vec<(u16, u16)>,
    /// Node names (40 characters).
    pub source: String,
    pub dest: String,
    /// True on the target (`importing`), false on the source (`migrating`).
    pub importing: bool,
    pub state: &'static str,
    pub last_error: String,
    pub retries: u64,
    /// Unix ms; -1 when not reached.
    pub create_time: i64,
    pub start_time: i64,
    pub done_time: i64,
    /// How long writes to the slots were held at the source for the flip.
    pub write_pause_ms: i64,
    pub cancel: Arc<AtomicBool>,
}

impl Task {
    pub fn active(&self) -> bool {
        !matches!(self.state, st::COMPLETED | st::FAILED | st::CANCELED)
    }

    /// `0-100 200-300`, as Redis writes slot ranges.
    pub fn ranges_text(&self) -> String {
        ranges_text(&self.ranges)
    }

    pub fn holds(&self, slot: u16) -> bool {
        self.ranges.iter().any(|&(a, b)| (a..=b).contains(&slot))
    }
}

pub fn ranges_text(ranges: &[(u16, u16)]) -> String {
    ranges
        .iter()
        .map(|&(a, b)| format!("{a}-{b}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Starts an import task's connection (the network side registers itself at start:
/// `state` cannot see `server`).
pub type Starter = fn(&Arc<crate::state::Server>, String);

/// The migration tasks of this node (`Cluster::migrations`).
#[derive(Default)]
pub struct Migrations {
    tasks: Mutex<Vec<Task>>,
    starter: OnceLock<Starter>,
    /// Slot trims (the keys of slots given away or of an import that failed) begun, ended
    /// and abandoned (CLUSTER INFO's `cluster_slot_migration_stats_active_trim_*`).
    pub trims_started: AtomicU64,
    pub trims_completed: AtomicU64,
    pub trims_cancelled: AtomicU64,
    /// Trims running now.
    pub trims_running: AtomicU64,
    /// The running trim's names to delete and those deleted so far (0 between trims).
    pub trim_job_keys: AtomicU64,
    pub trim_job_trimmed: AtomicU64,
    /// INFO's `mem_cluster_slot_migration_*`: on the source, the slots' stream found in the
    /// backlog and not yet sent; on the target, bytes received and not yet applied, and
    /// the most there ever were.
    pub output_buffer: AtomicU64,
    pub input_buffer: AtomicU64,
    pub input_buffer_peak: AtomicU64,
}

impl Migrations {
    pub fn set_starter(&self, f: Starter) {
        let _ = self.starter.set(f);
    }

    pub fn starter(&self) -> Option<Starter> {
        self.starter.get().copied()
    }

    /// Adds a task, unless one is active (Redis 8.4 runs one at a time): the error then.
    /// A failed task in the way is ended (`canceled`) as Redis ends it for a new import.
    pub fn add(&self, task: Task) -> Result<(), String> {
        let mut g = self.tasks.lock();
        if g.iter().any(|t| t.active()) {
            return Err("another ASM task is already in progress".into());
        }
        g.push(task);
        let done = g.iter().filter(|t| !t.active()).count();
        if done > DONE_KEPT {
            if let Some(i) = g.iter().position(|t| !t.active()) {
                g.remove(i);
            }
        }
        Ok(())
    }

    /// Changes task `id`; false if there is none.
    pub fn update(&self, id: &str, f: impl FnOnce(&mut Task)) -> bool {
        let mut g = self.tasks.lock();
        match g.iter_mut().find(|t| t.id == id) {
            Some(t) => {
                f(t);
                true
            }
            None => false,
        }
    }

    /// Moves task `id` to `state`, unless it has ended already.
    pub fn set_state(&self, id: &str, state: &'static str) {
        self.update(id, |t| {
            if t.active() {
                t.state = state;
            }
        });
    }

    /// Ends task `id` as `state` (completed, failed, canceled) with `error`.
    pub fn finish(&self, id: &str, state: &'static str, error: &str) {
        self.update(id, |t| {
            if t.active() {
                t.state = state;
                if !error.is_empty() {
                    t.last_error = error.to_string();
                }
                t.done_time = crate::util::clock::now_ms();
            }
        });
    }

    pub fn get(&self, id: &str) -> Option<Task> {
        self.tasks.lock().iter().find(|t| t.id == id).cloned()
    }

    pub fn all(&self) -> Vec<Task> {
        self.tasks.lock().clone()
    }

    pub fn active_count(&self) -> usize {
        self.tasks.lock().iter().filter(|t| t.active()).count()
    }

    /// CANCEL: raises the flag of the active task `id` (every active one when `None`);
    /// how many.
    pub fn cancel(&self, id: Option<&str>) -> usize {
        let g = self.tasks.lock();
        let mut n = 0;
        for t in g.iter().filter(|t| t.active()) {
            if id.is_none_or(|i| i == t.id) {
                t.cancel.store(true, Ordering::Release);
                n += 1;
            }
        }
        n
    }

    /// Whether an active import covers `slot` (its data is the source's until the flip).
    pub fn importing(&self, slot: u16) -> bool {
        self.tasks
            .lock()
            .iter()
            .any(|t| t.importing && t.active() && t.holds(slot))
    }

    /// Whether an active task (either side) covers `slot`.
    pub fn busy_slot(&self, slot: u16) -> bool {
        self.tasks
            .lock()
            .iter()
            .any(|t| t.active() && t.holds(slot))
    }
}

/// A new task id: 40 hexadecimal characters, as Redis's.
pub fn new_id() -> String {
    crate::state::replication::random_id()
}

/// Parses `start end [start end ...]`: each within 0..=16383 and start ≤ end, no overlap.
pub fn parse_ranges(args: &[&[u8]]) -> Result<Vec<(u16, u16)>, String> {
    if args.is_empty() || !args.len().is_multiple_of(2) {
        return Err("wrong number of arguments for 'cluster|migration' command".into());
    }
    let slot = |b: &[u8]| -> Result<u16, String> {
        std::str::from_utf8(b)
            .ok()
            .and_then(|s| s.parse::<i64>().ok())
            .filter(|&n| (0..crate::state::cluster::SLOTS as i64).contains(&n))
            .map(|n| n as u16)
            .ok_or_else(|| {
                format!(
                    "Invalid or out of range slot: {}",
                    String::from_utf8_lossy(b)
                )
            })
    };
    let mut out: Vec<(u16, u16)> = Vec::new();
    for pair in args.chunks(2) {
        let (a, b) = (slot(pair[0])?, slot(pair[1])?);
        if a > b {
            return Err(format!(
                "Start slot number {a} is greater than end slot number {b}"
            ));
        }
        if out.iter().any(|&(x, y)| a <= y && x <= b) {
            return Err(format!("Slot range {a}-{b} overlaps with another range"));
        }
        out.push((a, b));
    }
    out.sort_unstable();
    Ok(out)
}

/// Every slot of `ranges`.
pub fn slots_of(ranges: &[(u16, u16)]) -> impl Iterator<Item = u16> + '_ {
    ranges.iter().flat_map(|&(a, b)| a..=b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_parse_as_redis_checks_them() {
        let r = |a: &[&str]| {
            let v: Vec<&[u8]> = a.iter().map(|s| s.as_bytes()).collect();
            parse_ranges(&v)
        };
        assert_eq!(r(&["5", "10", "0", "1"]), Ok(vec![(0, 1), (5, 10)]));
        assert!(r(&["5"]).is_err());
        assert!(r(&["10", "5"]).unwrap_err().contains("greater"));
        assert!(r(&["0", "16384"]).unwrap_err().contains("out of range"));
        assert!(r(&["0", "10", "10", "20"])
            .unwrap_err()
            .contains("overlaps"));
    }

    #[test]
    fn one_active_task_at_a_time() {
        let m = Migrations::default();
        let task = |id: &str| Task {
            id: id.into(),
            ranges: vec![(0, 10)],
            source: "a".into(),
            dest: "b".into(),
            importing: true,
            state: st::CONNECTING,
            last_error: String::new(),
            retries: 0,
            create_time: 0,
            start_time: -1,
            done_time: -1,
            write_pause_ms: 0,
            cancel: Arc::default(),
        };
        m.add(task("one")).expect("first");
        assert!(m.add(task("two")).is_err());
        assert!(m.busy_slot(5) && !m.busy_slot(11));
        assert_eq!(m.cancel(None), 1);
        m.finish("one", st::CANCELED, "user request");
        m.add(task("two")).expect("after the first ended");
        assert_eq!(m.active_count(), 1);
    }
}
