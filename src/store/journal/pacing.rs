//! How a snapshot's thread (BGREWRITEAOF, BGSAVE, `CONFIG SET appendonly yes`) keeps out
//! of the clients' way while it copies and writes a whole key space: it rests between
//! chunks as long as each chunk took ([`Pacer`]), and the file it writes is flushed to the
//! disk every [`AUTOSYNC_BYTES`] instead of all at once at its end ([`SyncingFile`]).
//!
//! Why the rests: the copy clones each chunk under its shard's lock, and a thread that
//! computes without pause (the copy at full speed) is the one the scheduler preempts when
//! its slice runs out, on a busy machine for tens or hundreds of milliseconds, often while
//! it holds that lock (measured: 612 ms for a 1024-key hold of 100 us of work, 1M keys, a
//! loaded 2-core machine), and every client of the shard waits that long. A thread that
//! works a fraction of a millisecond and then sleeps is woken ahead of the busy ones and
//! is rarely preempted in that fraction; the lock is taken first thing after each rest.
//! It also leaves clients at least half a core, as the TTL monitor does. What it costs:
//! the copy takes up to twice as long. A lower CPU priority (`nice`) was the other
//! candidate and was rejected: a low-priority thread preempted while it holds a shard's
//! lock waits longer still to run again (priority inversion).
//!
//! Why the flushes: one `fsync` of a base of hundreds of megabytes at the end makes the
//! file system's journal commit all of it at once, and meanwhile the journal's own small
//! appends (which replies wait for) queue behind that commit. Redis does the same
//! (`aof-rewrite-incremental-fsync`, `rdb-save-incremental-fsync`, 4 MB).

use std::fs::File;
use std::io::Write;
use std::time::{Duration, Instant};

/// Bytes written between two flushes of a snapshot's file (Redis's `REDIS_AUTOSYNC_BYTES`).
pub const AUTOSYNC_BYTES: u64 = 4 << 20;

/// A file written from start to end, flushed to the disk every [`AUTOSYNC_BYTES`].
pub struct SyncingFile {
    pub file: File,
    unsynced: u64,
}

impl SyncingFile {
    pub fn new(file: File) -> SyncingFile {
        SyncingFile { file, unsynced: 0 }
    }

    /// Writes `data`, then flushes the file if [`AUTOSYNC_BYTES`] were written since the
    /// last flush.
    pub fn write_all(&mut self, data: &[u8]) -> std::io::Result<()> {
        self.file.write_all(data)?;
        self.unsynced += data.len() as u64;
        if self.unsynced >= AUTOSYNC_BYTES {
            self.file.sync_data()?;
            self.unsynced = 0;
        }
        Ok(())
    }
}

/// The longest rest between two chunks.
const MAX_REST: Duration = Duration::from_millis(2);

/// Paces a copy: [`Pacer::rest`] after each chunk sleeps as long as the chunk took (its
/// lock hold and the encoding of what it cloned), so the copy uses at most half a core.
pub struct Pacer {
    since: Instant,
}

impl Default for Pacer {
    fn default() -> Self {
        Self::new()
    }
}

impl Pacer {
    pub fn new() -> Pacer {
        Pacer {
            since: Instant::now(),
        }
    }

    /// Sleeps as long as the work since the last rest took (at most [`MAX_REST`]).
    pub fn rest(&mut self) {
        std::thread::sleep(self.since.elapsed().min(MAX_REST));
        self.since = Instant::now();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A rest lasts about as long as the work before it, within its bound.
    #[test]
    fn a_rest_is_as_long_as_the_work() {
        let mut p = Pacer::new();
        std::thread::sleep(Duration::from_millis(1));
        let t = Instant::now();
        p.rest();
        assert!(t.elapsed() >= Duration::from_millis(1));
        std::thread::sleep(Duration::from_millis(500));
        let t = Instant::now();
        p.rest();
        let rested = t.elapsed();
        assert!(rested >= MAX_REST, "{rested:?}");
        assert!(rested < Duration::from_millis(400), "{rested:?}");
    }

    /// What is written is the file's content, across several flushes.
    #[test]
    fn writes_reach_the_file_across_flushes() {
        let path = std::env::temp_dir().join(format!(
            "tidecache-syncing-{}-{}",
            std::process::id(),
            crate::util::clock::now_us()
        ));
        let mut f = SyncingFile::new(File::create(&path).unwrap());
        let chunk: Vec<u8> = (0..=255u8).cycle().take(1 << 20).collect();
        for _ in 0..9 {
            f.write_all(&chunk).unwrap();
        }
        f.file.sync_all().unwrap();
        drop(f);
        let got = std::fs::read(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        assert_eq!(got.len(), 9 << 20);
        assert!(got.chunks(1 << 20).all(|c| c == chunk.as_slice()));
    }
}
