//! The journal's writer: merges records into application order, appends them to the open
//! incremental file on its own thread, and fsyncs per `appendfsync` (group commit).
//!
//! Records arrive from command threads tagged with sequence numbers taken under the shard
//! locks of their changes (see `journal/mod.rs`); a record goes into the output buffer only
//! once every smaller number has arrived (as a record, or as a filler: a number a record took
//! and then superseded). The buffer is written by one thread; under `always` each write is
//! followed by an fsync before the durable mark moves, so every record that arrived while the
//! previous fsync ran shares the next one.

use super::aof;
use parking_lot::{Condvar, Mutex};
use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One command of a record: the database it runs in (`None`: MULTI/EXEC, which need none)
/// and its RESP bytes.
pub struct Sub {
    pub db: Option<usize>,
    pub bytes: Vec<u8>,
}

pub const ALWAYS: u8 = 0;
pub const EVERYSEC: u8 = 1;
pub const NO: u8 = 2;

/// Called once when a WAITAOF's record is on disk (`true`) or its deadline passed (`false`).
pub type Notify = Box<dyn FnOnce(bool) + Send>;

struct Waiter {
    seq: u64,
    deadline: Option<Instant>,
    /// Answers at the deadline only (WAITAOF numreplicas > 0: no replica will ever ack).
    until_deadline: bool,
    notify: Notify,
}

/// Appends a record's commands to `out`, each after a SELECT when its database is not `db`
/// (the one the file or the replication stream has selected), which then becomes it.
pub fn encode_record(subs: Vec<Sub>, db: &mut usize, out: &mut Vec<u8>) {
    for sub in subs {
        if let Some(d) = sub.db {
            if d != *db {
                aof::encode(out, &[b"SELECT", d.to_string().as_bytes()]);
                *db = d;
            }
        }
        out.extend_from_slice(&sub.bytes);
    }
}

struct Merge {
    /// The next sequence number to place.
    next: u64,
    /// Arrived out of order: a record (`Some`) or a filler (`None`).
    pending: BTreeMap<u64, Option<Vec<Sub>>>,
    /// Encoded, in order, not yet written.
    buf: Vec<u8>,
    /// The last sequence number placed in `buf`.
    buf_upto: u64,
    /// The database the file has SELECTed (`usize::MAX`: none yet, in this file).
    db: usize,
    stop: bool,
    /// A rewrite's cut: records from this number on go to the next incremental file
    /// (`u64::MAX`: none pending).
    switch_at: u64,
    /// Where in `buf` the next file's bytes start, once `next` has reached `switch_at`.
    split: Option<usize>,
}

impl Merge {
    /// Appends the record numbered `next` to the buffer.
    fn place(&mut self, subs: Vec<Sub>) {
        encode_record(subs, &mut self.db, &mut self.buf);
        self.advance();
    }

    /// Moves past the number `next` (a record or a filler was placed there).
    fn advance(&mut self) {
        self.buf_upto = self.next;
        self.next += 1;
        self.check_split();
    }

    /// At the cut, the bytes after this point go to the next file, which starts without a
    /// SELECT.
    fn check_split(&mut self) {
        if self.next == self.switch_at && self.split.is_none() {
            self.split = Some(self.buf.len());
            self.db = usize::MAX;
        }
    }
}

pub struct Journal {
    merge: Mutex<Merge>,
    wake: Condvar,
    /// Highest sequence number written to the file, and fsynced.
    written: AtomicU64,
    durable: AtomicU64,
    /// Highest sequence number a waiter (J, WAITAOF) needs on disk whatever the policy.
    need_sync: AtomicU64,
    policy: AtomicU8,
    durable_tx: tokio::sync::watch::Sender<u64>,
    written_tx: tokio::sync::watch::Sender<u64>,
    /// The incremental file. Whoever holds it takes the buffer and writes it (the journal
    /// thread, or a connection about to reply), so buffers reach the file in order.
    file: Mutex<File>,
    waiters: Mutex<Vec<Waiter>>,
    pub current_size: AtomicU64,
    pub base_size: AtomicU64,
    pub last_write_ok: AtomicBool,
    pub last_fsync_ok: AtomicBool,
    /// Bytes in the current incremental file.
    pub incr_size: AtomicU64,
    /// The file records go to after a rewrite's cut, until the cut is reached.
    next_file: Mutex<Option<File>>,
    /// The incremental file before a rewrite's cut, written up to the cut and not fsynced
    /// since: the journal thread fsyncs it before the durable mark passes the cut.
    old_file: Mutex<Option<File>>,
    /// The descriptor the journal thread fsyncs (the current incremental file's), shared
    /// so the fsync runs without this lock (the cut replaces it meanwhile).
    sync_fd: Mutex<Option<Arc<File>>>,
    done: Mutex<bool>,
    done_cv: Condvar,
}

impl Journal {
    /// A journal appending to `file` (already at its end, `size` bytes), placing sequence
    /// numbers from `first`.
    pub fn start(file: File, size: u64, base_size: u64, first: u64, policy: u8) -> Arc<Journal> {
        let (durable_tx, _) = tokio::sync::watch::channel(first - 1);
        let (written_tx, _) = tokio::sync::watch::channel(first - 1);
        // fsync goes through its own descriptor, so writers do not wait behind it.
        let sync_fd = file.try_clone();
        let j = Arc::new(Journal {
            merge: Mutex::new(Merge {
                next: first,
                pending: BTreeMap::new(),
                buf: Vec::new(),
                buf_upto: first - 1,
                db: usize::MAX,
                stop: false,
                switch_at: u64::MAX,
                split: None,
            }),
            wake: Condvar::new(),
            written: AtomicU64::new(first - 1),
            durable: AtomicU64::new(first - 1),
            need_sync: AtomicU64::new(0),
            policy: AtomicU8::new(policy),
            durable_tx,
            written_tx,
            file: Mutex::new(file),
            waiters: Mutex::new(Vec::new()),
            current_size: AtomicU64::new(size),
            base_size: AtomicU64::new(base_size),
            last_write_ok: AtomicBool::new(true),
            last_fsync_ok: AtomicBool::new(true),
            incr_size: AtomicU64::new(0),
            next_file: Mutex::new(None),
            old_file: Mutex::new(None),
            sync_fd: Mutex::new(None),
            done: Mutex::new(false),
            done_cv: Condvar::new(),
        });
        let w = j.clone();
        let spawned = match sync_fd {
            Ok(fd) => {
                *j.sync_fd.lock() = Some(Arc::new(fd));
                std::thread::Builder::new()
                    .name("journal".into())
                    .spawn(move || w.run())
            }
            Err(e) => Err(e),
        };
        if let Err(e) = spawned {
            tracing::error!("cannot start the journal thread: {e}");
        }
        j
    }

    pub fn set_policy(&self, p: u8) {
        self.policy.store(p, Ordering::Relaxed);
        self.wake.notify_one();
    }

    pub fn policy(&self) -> u8 {
        self.policy.load(Ordering::Relaxed)
    }

    pub fn durable(&self) -> u64 {
        self.durable.load(Ordering::Acquire)
    }

    /// The highest sequence number placed in order so far (everything up to it is in the
    /// buffer or the file).
    pub fn placed(&self) -> u64 {
        self.merge.lock().buf_upto
    }

    /// Hands over a record (`subs`, placed at the largest of `seqs`) and the fillers (its
    /// other numbers). Called under shard locks: it takes only the merge lock.
    pub fn submit(&self, seqs: &[u64], subs: Vec<Sub>) {
        let Some(&pos) = seqs.iter().max() else {
            return;
        };
        let mut m = self.merge.lock();
        let was_empty = m.buf.is_empty();
        if seqs.len() == 1 && pos == m.next {
            // The common case: the next record in order, placed without the map.
            m.place(subs);
        } else {
            for &s in seqs {
                if s != pos {
                    m.pending.insert(s, None);
                }
            }
            m.pending.insert(pos, Some(subs));
        }
        while let Some(rec) = {
            let next = m.next;
            m.pending.remove(&next)
        } {
            match rec {
                Some(subs) => m.place(subs),
                None => m.advance(),
            }
        }
        // Fillers alone add no bytes but move the placed mark, which waiters need too.
        if was_empty && (!m.buf.is_empty() || m.buf_upto > self.written.load(Ordering::Acquire)) {
            self.wake.notify_one();
        }
    }

    /// A rewrite's cut: records numbered `seq` and after go to `file` (a new, empty
    /// incremental file); the ones before still go to the current file, which the journal
    /// thread fsyncs (with the new one) before the durable mark passes the cut.
    pub fn switch_at(&self, seq: u64, file: File) {
        *self.next_file.lock() = Some(file);
        let mut m = self.merge.lock();
        m.switch_at = seq;
        m.split = None;
        m.check_split();
        self.wake.notify_one();
    }

    /// Whether the cut of [`Self::switch_at`] is behind (every later record goes to the
    /// new file). Writes what is buffered first.
    pub fn switched(&self) -> bool {
        self.write_pending();
        self.next_file.lock().is_none()
    }

    /// Asks for `seq` to reach the disk soon whatever the policy (J, WAITAOF).
    pub fn request_sync(&self, seq: u64) {
        if self.need_sync.fetch_max(seq, Ordering::AcqRel) < seq {
            let _m = self.merge.lock();
            self.wake.notify_one();
        }
    }

    /// Resolves once `seq` is on disk.
    pub async fn wait_durable(&self, seq: u64) {
        if self.durable() >= seq {
            return;
        }
        let mut rx = self.durable_tx.subscribe();
        let _ = rx.wait_for(|d| *d >= seq).await;
    }

    /// Calls `notify(true)` once `seq` is on disk, or `notify(false)` at `deadline`.
    pub fn on_durable(
        &self,
        seq: u64,
        deadline: Option<Instant>,
        until_deadline: bool,
        notify: Notify,
    ) {
        if !until_deadline {
            self.request_sync(seq);
        }
        self.waiters.lock().push(Waiter {
            seq,
            deadline,
            until_deadline,
            notify,
        });
        let _m = self.merge.lock();
        self.wake.notify_one();
    }

    /// Writes out what is buffered, fsyncs, and stops the thread (shutdown).
    pub fn close(&self) {
        self.merge.lock().stop = true;
        self.wake.notify_one();
        let mut done = self.done.lock();
        if !*done {
            self.done_cv.wait_for(&mut done, Duration::from_secs(10));
        }
    }

    /// Writes what is buffered, in order (the buffer is taken under the file's lock).
    /// Whether anything was written.
    fn write_pending(&self) -> bool {
        let mut file = self.file.lock();
        let (data, upto, split) = {
            let mut m = self.merge.lock();
            let split = m.split.take();
            if split.is_some() {
                m.switch_at = u64::MAX;
            }
            if m.buf.is_empty() && split.is_none() {
                let upto = m.buf_upto;
                drop(m);
                // Only fillers (numbers of records placed later, or commands that changed
                // nothing) since the last write: no bytes, but the marks move, and if all
                // before them is on disk so are they.
                let before = self.written.fetch_max(upto, Ordering::AcqRel);
                if upto > before {
                    self.written_tx.send_replace(upto);
                    if self.durable.load(Ordering::Acquire) >= before {
                        self.mark_durable(upto);
                    }
                }
                return false;
            }
            (std::mem::take(&mut m.buf), m.buf_upto, split)
        };
        match split {
            Some(off) => {
                // The cut of a rewrite: the old file gets what precedes it, then the new
                // file takes the rest. The old file is fsynced by the journal thread, not
                // here: this runs under the file's lock, which the replies of every
                // connection that writes wait for, and an fsync can take tens of ms.
                self.write_all(&mut file, &data[..off]);
                if let Some(next) = self.next_file.lock().take() {
                    let fd = next.try_clone().ok().map(Arc::new);
                    let old = std::mem::replace(&mut *file, next);
                    *self.old_file.lock() = Some(old);
                    *self.sync_fd.lock() = fd;
                    self.incr_size.store(0, Ordering::Relaxed);
                }
                self.write_all(&mut file, &data[off..]);
            }
            None => self.write_all(&mut file, &data),
        }
        self.written.store(upto, Ordering::Release);
        self.written_tx.send_replace(upto);
        true
    }

    /// Appends `data` to `file`. A failed write is retried until it succeeds: nothing
    /// placed is dropped, and replies that wait for it wait.
    fn write_all(&self, file: &mut File, data: &[u8]) {
        let mut off = 0;
        while off < data.len() {
            match file.write(&data[off..]) {
                Ok(n) if n > 0 => off += n,
                _ => {
                    if self.last_write_ok.swap(false, Ordering::Relaxed) {
                        tracing::warn!("Error writing to the AOF file, retrying");
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        }
        self.last_write_ok.store(true, Ordering::Relaxed);
        self.current_size
            .fetch_add(data.len() as u64, Ordering::Relaxed);
        self.incr_size
            .fetch_add(data.len() as u64, Ordering::Relaxed);
    }

    /// Moves the durable mark forward (never back: a filler-only step may have moved it
    /// past what an fsync in progress covers).
    fn mark_durable(&self, upto: u64) {
        let before = self.durable.fetch_max(upto, Ordering::AcqRel);
        if upto > before {
            self.durable_tx.send_replace(upto);
        }
    }

    /// Resolves once `seq` is written to the file (not necessarily fsynced): what a reply
    /// under everysec/no waits for, so a crash of the process (not of the machine) loses
    /// nothing acknowledged, as with Redis. The caller writes the buffer itself when it can.
    pub async fn wait_written(&self, seq: u64) {
        if self.written.load(Ordering::Acquire) >= seq {
            return;
        }
        // Other connections on this thread first: their records join the buffer, and the
        // first of us to write writes them all (one write for many replies, as Redis writes
        // its AOF buffer once per event-loop turn).
        tokio::task::yield_now().await;
        if self.written.load(Ordering::Acquire) >= seq {
            return;
        }
        self.write_pending();
        if self.written.load(Ordering::Acquire) >= seq {
            return;
        }
        // An earlier record is still with its command: whoever places it writes it, or
        // the journal thread does.
        let mut rx = self.written_tx.subscribe();
        let _ = rx.wait_for(|w| *w >= seq).await;
    }

    fn run(&self) {
        let mut last_fsync = Instant::now();
        loop {
            let stop = {
                let mut m = self.merge.lock();
                let nothing = |m: &Merge| {
                    let durable = self.durable.load(Ordering::Acquire);
                    m.buf.is_empty()
                        && m.buf_upto <= self.written.load(Ordering::Acquire)
                        && !m.stop
                        && !(self.need_sync.load(Ordering::Acquire) > durable
                            && self.written.load(Ordering::Acquire) > durable)
                };
                if nothing(&m) {
                    // Wakes for data, for a sync request, or to look at timers (everysec,
                    // WAITAOF deadlines).
                    self.wake.wait_for(&mut m, Duration::from_millis(50));
                }
                m.stop
            };
            if self.write_pending() && self.policy() != ALWAYS && !stop {
                // Under everysec/no a short pause lets records gather (replies that need
                // them written write them themselves, `wait_written`), so a busy server
                // makes about one write a millisecond from this thread, not one per command.
                std::thread::sleep(Duration::from_micros(500));
            }
            let written = self.written.load(Ordering::Acquire);
            let durable = self.durable.load(Ordering::Acquire);
            let policy = self.policy();
            let due = written > durable
                && (policy == ALWAYS
                    || stop
                    || self.need_sync.load(Ordering::Acquire) > durable
                    || (policy == EVERYSEC && last_fsync.elapsed() >= Duration::from_secs(1)));
            if due {
                // The file before a cut first (`written` was read after it was set aside,
                // so everything up to `written` is in it or in the current file).
                let old = self.old_file.lock().take();
                let old_ok = match old {
                    None => true,
                    Some(f) if f.sync_data().is_ok() => true,
                    Some(f) => {
                        // Tried again at the next fsync; the durable mark waits.
                        self.old_file.lock().get_or_insert(f);
                        false
                    }
                };
                let fd = self.sync_fd.lock().clone();
                let ok = old_ok && fd.is_some_and(|f| f.sync_data().is_ok());
                self.last_fsync_ok.store(ok, Ordering::Relaxed);
                if ok {
                    self.mark_durable(written);
                }
                last_fsync = Instant::now();
            }
            self.fire_waiters();
            if stop {
                let m = self.merge.lock();
                if m.buf.is_empty() {
                    drop(m);
                    *self.done.lock() = true;
                    self.done_cv.notify_all();
                    return;
                }
            }
        }
    }

    fn fire_waiters(&self) {
        let mut w = self.waiters.lock();
        if w.is_empty() {
            return;
        }
        let durable = self.durable();
        let now = Instant::now();
        let mut i = 0;
        while i < w.len() {
            let past = w[i].deadline.is_some_and(|d| d <= now);
            let ready = !w[i].until_deadline && w[i].seq <= durable;
            if ready || past {
                let x = w.swap_remove(i);
                (x.notify)(x.seq <= durable);
            } else {
                i += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sub(db: usize, arg: &[u8]) -> Sub {
        let mut bytes = Vec::new();
        aof::encode(&mut bytes, &[b"SET", arg, b"v"]);
        Sub {
            db: Some(db),
            bytes,
        }
    }

    /// Records arriving out of order are written by number; a record is placed at its
    /// largest number and its others are fillers; SELECT goes out when the database changes.
    #[test]
    fn records_are_written_in_number_order() {
        let path = std::env::temp_dir().join(format!(
            "tidecache-writer-test-{}-{}",
            std::process::id(),
            crate::util::clock::now_us()
        ));
        let file = File::create(&path).unwrap();
        let j = Journal::start(file, 0, 0, 1, ALWAYS);
        j.submit(&[2], vec![sub(0, b"b")]);
        // 3 is a filler of the record placed at 5.
        j.submit(&[5, 3], vec![sub(1, b"d")]);
        assert_eq!(j.placed(), 0);
        j.submit(&[4], vec![sub(1, b"c")]);
        assert_eq!(j.placed(), 0);
        j.submit(&[1], vec![sub(0, b"a")]);
        assert_eq!(j.placed(), 5);
        let deadline = Instant::now() + Duration::from_secs(5);
        while j.durable() < 5 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(j.durable(), 5);
        j.close();
        let mut got = Vec::new();
        aof::read_file(&path, |a, _| {
            got.push(String::from_utf8_lossy(&a[1]).into_owned());
            Ok(())
        })
        .unwrap();
        let _ = std::fs::remove_file(&path);
        assert_eq!(got, ["0", "a", "b", "1", "c", "d"]);
    }

    /// A rewrite's cut: the records before it go to the old file, the ones from it on to
    /// the new one, which starts with its own SELECT; records arriving out of order around
    /// the cut land on the right side.
    #[test]
    fn the_cut_splits_records_between_the_files() {
        let tmp = |n: &str| {
            std::env::temp_dir().join(format!(
                "tidecache-switch-{n}-{}-{}",
                std::process::id(),
                crate::util::clock::now_us()
            ))
        };
        let (old, new) = (tmp("old"), tmp("new"));
        let j = Journal::start(File::create(&old).unwrap(), 0, 0, 1, ALWAYS);
        j.submit(&[1], vec![sub(2, b"a")]);
        j.switch_at(4, File::create(&new).unwrap());
        // 4 arrives before 3: it waits, and is written to the new file.
        j.submit(&[4], vec![sub(2, b"d")]);
        j.submit(&[2], vec![sub(2, b"b")]);
        assert!(!j.switched());
        j.submit(&[3], vec![sub(2, b"c")]);
        let deadline = Instant::now() + Duration::from_secs(5);
        while !j.switched() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(j.switched());
        j.submit(&[5], vec![sub(2, b"e")]);
        while j.durable() < 5 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(j.durable(), 5);
        j.close();
        let read = |p: &std::path::Path| {
            let mut got = Vec::new();
            aof::read_file(p, |a, _| {
                got.push(String::from_utf8_lossy(&a[1]).into_owned());
                Ok(())
            })
            .unwrap();
            let _ = std::fs::remove_file(p);
            got
        };
        assert_eq!(read(&old), ["2", "a", "b", "c"]);
        assert_eq!(read(&new), ["2", "d", "e"]);
    }
}
