//! The journal's writer: merges records into application order, appends them to the open
//! incremental file on its own thread, and fsyncs per `appendfsync` (group commit).
//!
//! Records arrive from command threads tagged with sequence numbers taken under the shard
//! locks of their changes (see `journal/mod.rs`); a record goes into the output buffer only
//! once every smaller number has arrived (as a record, or as a filler: a number a record took
//! and then superseded). Whoever holds the file's lock writes the buffer: the journal
//! thread, or a connection about to reply. A reply that waits for the disk (`always`, J)
//! makes the write and the fsync itself after the other ready connections have run, and
//! those find their records on disk (group commit, [`Journal::wait_durable`]); one fsync
//! runs at a time, so records that arrive during one share the next. The journal thread
//! fsyncs under everysec, and what no waiting reply fsyncs.

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

/// `DEBUG AOF-FLUSH-SLEEP <microseconds>`: how long each write of buffered records to the
/// file is held back (0: not at all), so a test can see whether a reply leaves before its
/// record is in the file, as Redis's `aof_flush_sleep`.
static FLUSH_SLEEP_US: AtomicU64 = AtomicU64::new(0);

pub fn set_flush_sleep(us: u64) {
    FLUSH_SLEEP_US.store(us, Ordering::Relaxed);
}

pub const ALWAYS: u8 = 0;
/// How long after records arrive the journal thread looks at them, leaving the connections
/// about to reply the time to write (and fsync) them themselves (see `Journal::run`).
const LEADER_GRACE: Duration = Duration::from_millis(10);
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
pub fn encode_record(subs: impl IntoIterator<Item = Sub>, db: &mut usize, out: &mut Vec<u8>) {
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
    fn place(&mut self, subs: impl IntoIterator<Item = Sub>) {
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
    /// The descriptor fsyncs go through (the current incremental file's), shared so the
    /// fsync runs without the file's lock (the cut replaces it meanwhile).
    sync_fd: Mutex<Option<Arc<File>>>,
    /// Held by whoever writes the buffer out and fsyncs it as one step ([`Self::sync`]): a
    /// connection leading a group commit, or the journal thread. One fsync at a time, so
    /// records arriving during one share the next instead of starting their own.
    sync_lock: Mutex<()>,
    /// Bumped after every [`Self::sync`] (done or failed): a connection that found the
    /// lock taken waits for it and looks again (the fsync in flight may not cover it).
    synced_tx: tokio::sync::watch::Sender<u64>,
    done: Mutex<bool>,
    done_cv: Condvar,
}

impl Journal {
    /// Encoded records not yet written to the file, and the buffer's allocation (INFO's
    /// `aof_buffer_length`, MEMORY STATS `aof.buffer`).
    pub fn buffered(&self) -> (usize, usize) {
        let m = self.merge.lock();
        (m.buf.len(), m.buf.capacity())
    }

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
            sync_lock: Mutex::new(()),
            synced_tx: tokio::sync::watch::channel(0).0,
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
    pub fn submit(&self, seqs: &[u64], mut subs: Vec<Sub>) {
        self.submit_from(seqs, &mut subs);
    }

    /// [`Self::submit`] taking the commands out of `subs`, which keeps its allocation for
    /// the next command on this thread (the common case places the record at once).
    pub fn submit_from(&self, seqs: &[u64], subs: &mut Vec<Sub>) {
        let Some(&pos) = seqs.iter().max() else {
            return;
        };
        let mut m = self.merge.lock();
        let was_empty = m.buf.is_empty();
        if seqs.len() == 1 && pos == m.next {
            // The common case: the next record in order, placed without the map.
            m.place(subs.drain(..));
        } else {
            for &s in seqs {
                if s != pos {
                    m.pending.insert(s, None);
                }
            }
            m.pending.insert(pos, Some(std::mem::take(subs)));
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

    /// Resolves once `seq` is on disk: the group commit of `appendfsync always` and J.
    ///
    /// The waiting connection writes and fsyncs itself (as Redis's event loop does in
    /// `beforeSleep`), after letting the other connections that are ready run first: their
    /// records join the buffer, and the first of them to get here fsyncs them all while the
    /// others find their records on disk when they run. On the current-thread scheduler that
    /// blocks every client for the fsync, as Redis's loop is blocked; it measured better
    /// than handing the fsync to the journal thread, which fsynced smaller groups more
    /// often and woke connections across threads.
    pub async fn wait_durable(&self, seq: u64) {
        if self.durable() >= seq {
            return;
        }
        tokio::task::yield_now().await;
        loop {
            if self.durable() >= seq {
                return;
            }
            // Subscribed before trying the lock, so an fsync that ends in between is seen.
            let mut synced = self.synced_tx.subscribe();
            match self.sync(false, seq) {
                Some(true) => {
                    if self.durable() >= seq {
                        return;
                    }
                    // Nothing to fsync for us yet: an earlier number is still with its
                    // command (another thread); whoever places it writes it, or the
                    // journal thread does. Then the next round fsyncs it.
                    let mut rx = self.written_tx.subscribe();
                    let _ = rx.wait_for(|w| *w >= seq).await;
                }
                Some(false) => {
                    // The fsync failed: the journal thread retries it (no loop of failing
                    // fsyncs here, which would hold every client on this thread), and the
                    // reply waits until it succeeds.
                    self.request_sync(seq);
                    let mut rx = self.durable_tx.subscribe();
                    let _ = rx.wait_for(|d| *d >= seq).await;
                    return;
                }
                // Someone else is fsyncing: it may not cover `seq`; look again after it.
                None => {
                    let _ = synced.changed().await;
                }
            }
        }
    }

    /// Writes what is buffered and fsyncs it, holding the sync lock (`wait`: wait for it,
    /// otherwise `None` if it is taken), unless `need` (0: none) is on disk once the lock is
    /// held. `Some(false)` if an fsync failed (the durable mark then stays).
    fn sync(&self, wait: bool, need: u64) -> Option<bool> {
        let guard = if wait {
            self.sync_lock.lock()
        } else {
            self.sync_lock.try_lock()?
        };
        if need > 0 && self.durable() >= need {
            drop(guard);
            self.synced_tx.send_modify(|n| *n = n.wrapping_add(1));
            return Some(true);
        }
        self.write_pending();
        // What to fsync and up to which number, read together under the file's lock: a
        // cut (in `write_pending`, under that lock) replaces the descriptor and sets the
        // old file aside, so `written` is either all in `fd`, or partly in `old` (fsynced
        // first) and the rest in `fd`.
        let (written, old, fd) = {
            let _file = self.file.lock();
            (
                self.written.load(Ordering::Acquire),
                self.old_file.lock().take(),
                self.sync_fd.lock().clone(),
            )
        };
        let mut ok = true;
        let mut tried = false;
        if let Some(f) = old {
            tried = true;
            if f.sync_data().is_err() {
                // Tried again at the next fsync; the durable mark waits.
                self.old_file.lock().get_or_insert(f);
                ok = false;
            }
        }
        if ok && written > self.durable() {
            tried = true;
            ok = fd.is_some_and(|f| f.sync_data().is_ok());
        }
        if tried {
            self.last_fsync_ok.store(ok, Ordering::Relaxed);
        }
        if ok {
            self.mark_durable(written);
        }
        drop(guard);
        self.synced_tx.send_modify(|n| *n = n.wrapping_add(1));
        Some(ok)
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
        let sleep = FLUSH_SLEEP_US.load(Ordering::Relaxed);
        if sleep > 0 && !data.is_empty() {
            std::thread::sleep(Duration::from_micros(sleep));
        }
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

    /// The journal thread. Replies write their records (`wait_written`) and, when they
    /// wait for the disk, fsync them (`wait_durable`); this thread writes and fsyncs what
    /// none of them does (the writes of a client that takes no reply, expiries, WAITAOF, a
    /// failed fsync to retry), the everysec fsync, and everything at shutdown. It looks
    /// `LEADER_GRACE` after records arrived, so it does not take a group that is still
    /// arriving from the connections about to write it; while records keep arriving it
    /// keeps looking at that pace instead of sleeping on the condition variable, so a busy
    /// server does not pay a wake-up of this thread per batch.
    fn run(&self) {
        let mut last_fsync = Instant::now();
        let mut seen = 0u64;
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
                // Busy: records arrived since the last look (`seen`).
                if m.buf_upto <= seen && nothing(&m) {
                    // Wakes for data, for a sync request, or to look at timers (everysec,
                    // WAITAOF deadlines).
                    self.wake.wait_for(&mut m, Duration::from_millis(50));
                }
                m.stop
            };
            let policy = self.policy();
            if !stop {
                let target = self
                    .placed()
                    .max(self.written.load(Ordering::Acquire))
                    .max(self.need_sync.load(Ordering::Acquire));
                seen = self.placed();
                std::thread::sleep(LEADER_GRACE);
                let durable = self.durable();
                if (policy == ALWAYS || self.need_sync.load(Ordering::Acquire) > durable)
                    && durable < target
                {
                    self.sync(true, target);
                    last_fsync = Instant::now();
                } else {
                    if self.written.load(Ordering::Acquire) < target {
                        self.write_pending();
                    }
                    if policy == EVERYSEC
                        && self.written.load(Ordering::Acquire) > self.durable()
                        && last_fsync.elapsed() >= Duration::from_secs(1)
                    {
                        self.sync(true, 0);
                        last_fsync = Instant::now();
                    }
                }
                self.fire_waiters();
                continue;
            }
            // Shutdown: everything out and on disk.
            self.sync(true, 0);
            self.fire_waiters();
            let m = self.merge.lock();
            if m.buf.is_empty() {
                drop(m);
                *self.done.lock() = true;
                self.done_cv.notify_all();
                return;
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
