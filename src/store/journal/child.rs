//! The background save's child process, without `fork()`, and Redis's `rdb-key-save-delay`.
//!
//! Redis writes BGSAVE, BGREWRITEAOF's base and a full sync's RDB in a forked child, and
//! both its tests and its operators act on that child: `kill -9` it to abort the save
//! (`rdb_last_bgsave_status:err`, the next save starts afresh), watch it with
//! `pgrep -P <server pid>`. Here the copy runs on a thread of the server (see `snapshot`),
//! so a background copy starts a *stand-in child*: the server's own binary re-executed with
//! [`CHILD_ARG`], which only waits for its standard input to close. The copy ends it when
//! it is done; if it dies first (killed), the copy fails at its next key, as Redis's save
//! fails when its child is killed. It costs one process start per background save.
//!
//! Only the server binary answers [`CHILD_ARG`], and it says so at its start
//! ([`serve_as_child_binary`]). Any other program that runs the library (the fuzz targets, a
//! test, an embedding program) gets its background copies without a stand-in child:
//! re-executed, its binary would not wait for its input but run as itself again — a fuzz
//! target re-executed per scheduled save would fuzz forever and, under the default `save`
//! schedule, save and start copies of itself in turn.
//!
//! `rdb-key-save-delay` (a hidden test knob, as in Redis) sleeps that many microseconds
//! after each key a snapshot writes (negative: 1 µs once in `-n` keys on average, Redis's
//! `debugDelay`). As in Redis, where the child keeps the value it was forked with, a copy
//! reads it once when it starts. The sleep is cut into short slices, so a killed child or a
//! SHUTDOWN ([`abort_running`]) ends even a copy that sleeps for minutes per key.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The argument that makes the binary a stand-in child (`main.rs` checks it first).
pub const CHILD_ARG: &str = "--tidecache-save-child";

/// Set by [`serve_as_child_binary`]: this process's binary is the server's.
static CHILD_BINARY: AtomicBool = AtomicBool::new(false);

/// Called by the server binary at its start: it answers [`CHILD_ARG`], so background
/// copies may re-execute it as their stand-in child.
pub fn serve_as_child_binary() {
    CHILD_BINARY.store(true, Relaxed);
}

/// `rdb-key-save-delay` as configured now (µs).
static KEY_SAVE_DELAY: AtomicI64 = AtomicI64::new(0);
/// Bumped by [`abort_running`]: a copy that started under another number stops.
static ABORTS: AtomicU64 = AtomicU64::new(0);

/// Sets `rdb-key-save-delay` for the copies that start from now on.
pub fn set_key_save_delay(us: i64) {
    KEY_SAVE_DELAY.store(us, Relaxed);
}

/// `rdb-key-save-delay` now (µs; negative: the sparse form), for a copy that has no
/// stand-in child (an atomic slot migration's snapshot).
pub fn key_save_delay() -> i64 {
    KEY_SAVE_DELAY.load(Relaxed)
}

/// Ends the snapshot copies in progress at their next key, as Redis kills its save child
/// at SHUTDOWN: they fail and their files are removed.
pub fn abort_running() {
    ABORTS.fetch_add(1, Relaxed);
}

/// The stand-in child's whole life: wait until the server closes our standard input (the
/// copy is done, or the server died), then exit.
pub fn run_child() {
    let mut stdin = std::io::stdin();
    let mut buf = [0u8; 64];
    while let Ok(n) = stdin.read(&mut buf) {
        if n == 0 {
            break;
        }
    }
}

/// One snapshot copy's child and delay: [`SaveChild::key_saved`] after each key written.
pub struct SaveChild {
    delay: i64,
    aborts: u64,
    rng: u64,
    /// Set by the watcher when the child ended before the copy did.
    died: Arc<AtomicBool>,
    /// Set before the copy ends the child, so its exit is not taken for a kill.
    ending: Arc<AtomicBool>,
    stdin: Option<std::process::ChildStdin>,
    watcher: Option<std::thread::JoinHandle<()>>,
}

impl SaveChild {
    /// Starts a copy: with a stand-in child when `background` (SAVE and the save at
    /// shutdown run in the foreground in Redis too, with no child) and this is the server
    /// binary. A child that cannot be started is logged and the copy goes on without one.
    pub fn start(background: bool) -> SaveChild {
        let mut c = SaveChild {
            delay: KEY_SAVE_DELAY.load(Relaxed),
            aborts: ABORTS.load(Relaxed),
            rng: 0x9E37_79B9_7F4A_7C15 ^ crate::util::clock::now_ms() as u64,
            died: Arc::new(AtomicBool::new(false)),
            ending: Arc::new(AtomicBool::new(false)),
            stdin: None,
            watcher: None,
        };
        if background && CHILD_BINARY.load(Relaxed) {
            c.spawn();
        }
        c
    }

    fn spawn(&mut self) {
        // /proc/self/exe runs even when the file was replaced or deleted since the start.
        // Named as Redis names its save child, for `ps`.
        let spawned = Command::new("/proc/self/exe")
            .arg0("tidecache-rdb-bgsave")
            .arg(CHILD_ARG)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        let mut child = match spawned {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!("Can't start the save's child process (the save goes on): {e}");
                return;
            }
        };
        self.stdin = child.stdin.take();
        let (died, ending) = (self.died.clone(), self.ending.clone());
        let watcher = std::thread::Builder::new()
            .name("save-child".into())
            .spawn(move || {
                let status = child.wait();
                if !ending.load(Relaxed) {
                    tracing::warn!(
                        "The save's child process ended early ({status:?}): the save is aborted"
                    );
                    died.store(true, Relaxed);
                }
            });
        match watcher {
            Ok(w) => self.watcher = Some(w),
            // Without a watcher nobody would reap it: closing its input ends it.
            Err(_) => self.stdin = None,
        }
    }

    fn check(&self) -> std::io::Result<()> {
        if self.died.load(Relaxed) {
            return Err(std::io::Error::other("the save's child process was killed"));
        }
        if ABORTS.load(Relaxed) != self.aborts {
            return Err(std::io::Error::other("the save was aborted"));
        }
        Ok(())
    }

    /// After each key written: the delay, and an error once the copy must stop.
    pub fn key_saved(&mut self) -> std::io::Result<()> {
        self.check()?;
        let us = match self.delay {
            0 => return Ok(()),
            d if d < 0 => {
                // xorshift64: 1 µs once in -d keys on average, as Redis's debugDelay.
                self.rng ^= self.rng << 13;
                self.rng ^= self.rng >> 7;
                self.rng ^= self.rng << 17;
                u64::from(self.rng.is_multiple_of(d.unsigned_abs()))
            }
            d => d as u64,
        };
        let until = Instant::now() + Duration::from_micros(us);
        loop {
            let now = Instant::now();
            if now >= until {
                return Ok(());
            }
            std::thread::sleep((until - now).min(Duration::from_millis(10)));
            self.check()?;
        }
    }
}

impl Drop for SaveChild {
    fn drop(&mut self) {
        self.ending.store(true, Relaxed);
        // Its input closes: it exits, and the watcher reaps it.
        self.stdin = None;
        if let Some(w) = self.watcher.take() {
            let _ = w.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A test binary is not the server's: re-executed with `CHILD_ARG` it would run its
    /// tests again instead of waiting, so a background copy here starts no child.
    #[test]
    fn only_the_server_binary_is_re_executed_as_the_child() {
        assert!(!CHILD_BINARY.load(Relaxed));
        let copy = SaveChild::start(true);
        assert!(copy.stdin.is_none() && copy.watcher.is_none());
        assert!(copy.check().is_ok());
    }
}
