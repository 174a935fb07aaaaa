//! The replication stream: the journal's records, merged into application order as the
//! journal's writer merges them (`writer.rs`), appended to an in-memory backlog (a ring of
//! `repl-backlog-size` bytes) instead of a file. Replicas read it by byte offset
//! (`master_repl_offset` counts every byte ever appended), so one stream serves all of them
//! and a replica that reconnects with an offset still in the ring resumes from there.
//!
//! It runs while the server has had a replica (Redis creates its backlog with the first
//! replica, and so does this); starting it is a snapshot's cut (`start`), so the first
//! number it places is the first change after that cut.
//!
//! **Proxying.** A replica's backlog holds its master's stream byte for byte, at the
//! master's offsets (Redis's `replicationFeedStreamFromMasterStream`): its own replicas then
//! follow the same history, and once it is promoted the others continue from it with a
//! partial resynchronisation. In proxy mode the link places each applied command's bytes
//! ([`Rec::Raw`]) and the records of what those commands changed become fillers; in record
//! mode it is the other way round. A switch is itself placed by number ([`Rec::Mode`]), so
//! every record on either side of it is read in the mode it was made in.

use super::writer::Sub;
use parking_lot::Mutex;
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};

/// A full resynchronisation's cut: the byte offset of the stream where the change numbered
/// `seq` starts, known once every smaller number is placed.
struct Mark {
    seq: u64,
    tx: MarkTx,
}

/// Who waits for a mark: a replica's sync, whose stream starts there and names its
/// database first (Redis's `slaveseldb = -1` on a full sync), or a save, which records the
/// database the stream has selected (`repl-stream-db`) and changes nothing.
enum MarkTx {
    Sync(tokio::sync::oneshot::Sender<u64>),
    Save(tokio::sync::oneshot::Sender<(u64, Option<usize>)>),
}

/// What is placed at a number.
pub enum Rec {
    /// A record of this server's changes (record mode).
    Subs(Vec<Sub>),
    /// Bytes of the master's stream that the link applied (proxy mode), with the database
    /// they start in and the one they leave selected, and the highest number the command
    /// that ran them took for its changes (0: none).
    Raw {
        bytes: Vec<u8>,
        db_before: usize,
        db_after: usize,
        changed: u64,
    },
    /// From here on, proxy mode (`true`) or record mode.
    Mode(bool),
}

struct Inner {
    /// The next sequence number to place.
    next: u64,
    pending: BTreeMap<u64, Option<Rec>>,
    /// The database the stream has SELECTed (`usize::MAX`: none, a SELECT goes first).
    db: usize,
    ring: VecDeque<u8>,
    cap: usize,
    marks: Vec<Mark>,
    /// Proxy mode (see the module's text).
    proxy: bool,
    /// The number of the last switch to record mode: a command of the master's stream that
    /// made its changes before it had them dropped as proxy-mode records, so its bytes are
    /// still placed after the switch.
    record_since: u64,
    /// Bumped by [`Feed::reset`]: a replica reading by offset stops at a new history.
    gen: u64,
}

pub struct Feed {
    inner: Mutex<Inner>,
    /// `master_repl_offset`: bytes ever appended. Read without the lock by INFO and WAIT.
    offset: AtomicU64,
    /// Wakes the tasks that send the stream to replicas.
    pub appended: tokio::sync::watch::Sender<u64>,
}

impl Feed {
    pub fn new(first: u64, cap: usize, offset: u64) -> Feed {
        let (appended, _) = tokio::sync::watch::channel(offset);
        Feed {
            inner: Mutex::new(Inner {
                next: first,
                pending: BTreeMap::new(),
                db: usize::MAX,
                ring: VecDeque::new(),
                cap: cap.max(16 * 1024),
                marks: Vec::new(),
                proxy: false,
                record_since: 0,
                gen: 0,
            }),
            offset: AtomicU64::new(offset),
            appended,
        }
    }

    pub fn offset(&self) -> u64 {
        self.offset.load(Ordering::Acquire)
    }

    /// The backlog's size setting (`repl-backlog-size`); a smaller one drops the oldest bytes.
    pub fn set_capacity(&self, cap: usize) {
        let mut m = self.inner.lock();
        m.cap = cap.max(16 * 1024);
        let excess = m.ring.len().saturating_sub(m.cap);
        m.ring.drain(..excess);
    }

    pub fn capacity(&self) -> usize {
        self.inner.lock().cap
    }

    /// Bytes the backlog's ring has allocated (MEMORY STATS `replication.backlog`).
    pub fn allocated(&self) -> usize {
        self.inner.lock().ring.capacity()
    }

    /// (first byte offset, bytes held): INFO's `repl_backlog_first_byte_offset` and
    /// `repl_backlog_histlen`. The first byte held has offset `offset - held + 1`.
    pub fn window(&self) -> (u64, u64) {
        let m = self.inner.lock();
        let held = m.ring.len() as u64;
        (self.offset() + 1 - held, held)
    }

    /// Copies the bytes from offset `from` (the replica's next byte, 1-based as Redis's
    /// PSYNC offsets) into `out`, at most `max`. `None`: those bytes left the backlog.
    pub fn read_from(&self, from: u64, out: &mut Vec<u8>, max: usize) -> Option<()> {
        self.read_from_gen(u64::MAX, from, out, max)
    }

    /// [`Feed::read_from`] for a reader of history `gen` ([`Feed::gen`]; `u64::MAX`: any):
    /// `None` once the backlog was reset to another history.
    pub fn read_from_gen(&self, gen: u64, from: u64, out: &mut Vec<u8>, max: usize) -> Option<()> {
        let m = self.inner.lock();
        if gen != u64::MAX && gen != m.gen {
            return None;
        }
        let end = self.offset();
        let held = m.ring.len() as u64;
        let first = end + 1 - held;
        if from < first || from > end + 1 {
            return None;
        }
        let skip = (from - first) as usize;
        let n = ((end + 1 - from) as usize).min(max);
        let (a, b) = m.ring.as_slices();
        if skip < a.len() {
            let take = n.min(a.len() - skip);
            out.extend_from_slice(&a[skip..skip + take]);
            out.extend_from_slice(&b[..n - take]);
        } else {
            let s = skip - a.len();
            out.extend_from_slice(&b[s..s + n]);
        }
        Some(())
    }

    /// The backlog's history: a reader keeps it and reads with [`Feed::read_from_gen`].
    pub fn gen(&self) -> u64 {
        self.inner.lock().gen
    }

    /// Whether the stream is proxied (a replica's backlog).
    pub fn proxying(&self) -> bool {
        self.inner.lock().proxy
    }

    /// A new history at `offset` (a replica's full resynchronisation): the ring is emptied,
    /// readers of the old one stop, marks not yet resolved are dropped, and the stream is
    /// proxied from there in database `db` (the master's `repl-stream-db`).
    pub fn reset(&self, offset: u64, db: usize) {
        let mut m = self.inner.lock();
        m.ring.clear();
        m.marks.clear();
        m.gen += 1;
        m.proxy = true;
        m.db = db;
        self.offset.store(offset, Ordering::Release);
        drop(m);
        self.appended.send_replace(offset);
    }

    /// Frees the backlog (`repl-backlog-ttl`): its bytes and readers go, the offset stays.
    pub fn free(&self) {
        let mut m = self.inner.lock();
        m.ring = VecDeque::new();
        m.pending.clear();
        m.marks.clear();
        m.gen += 1;
    }

    /// Takes records again from change `first` on (a snapshot's cut, after [`Feed::free`]):
    /// the stream goes on at its offset, naming its database first.
    pub fn restart(&self, first: u64) {
        let mut m = self.inner.lock();
        m.next = first;
        m.pending.clear();
        m.db = usize::MAX;
        m.proxy = false;
    }

    /// A record (`subs`, placed at the largest of `seqs`) and its fillers; numbers before
    /// the feed's start are ignored.
    pub fn submit(&self, seqs: &[u64], subs: Vec<Sub>) {
        self.submit_rec(seqs, Rec::Subs(subs));
    }

    /// [`Feed::submit`] for any kind of record.
    pub fn submit_rec(&self, seqs: &[u64], rec: Rec) {
        let Some(&pos) = seqs.iter().max() else {
            return;
        };
        let subs = rec;
        let mut m = self.inner.lock();
        let before = self.offset();
        for &s in seqs {
            if s >= m.next && s != pos {
                m.pending.insert(s, None);
            }
        }
        if pos >= m.next {
            m.pending.insert(pos, Some(subs));
        }
        self.drain(&mut m);
        if self.offset() != before {
            self.appended.send_replace(self.offset());
        }
    }

    fn drain(&self, m: &mut Inner) {
        loop {
            self.resolve_marks(m);
            let next = m.next;
            let Some(rec) = m.pending.remove(&next) else {
                break;
            };
            match rec {
                None => {}
                Some(Rec::Subs(subs)) if !m.proxy => {
                    let mut bytes = Vec::new();
                    super::writer::encode_record(subs, &mut m.db, &mut bytes);
                    self.append(m, &bytes);
                }
                // A proxied stream carries the master's bytes instead.
                Some(Rec::Subs(_)) => {}
                Some(Rec::Raw {
                    bytes,
                    db_before,
                    db_after,
                    changed,
                }) => {
                    if m.proxy {
                        self.append(m, &bytes);
                        m.db = db_after;
                    } else if changed != 0 && changed < m.record_since {
                        // Its changes were made (and their records dropped) before the
                        // switch: its bytes stand for them, in the database they ran in.
                        let mut out = Vec::new();
                        let sub = Sub {
                            db: Some(db_before),
                            bytes,
                        };
                        super::writer::encode_record([sub], &mut m.db, &mut out);
                        self.append(m, &out);
                        m.db = db_after;
                    }
                }
                Some(Rec::Mode(proxy)) => {
                    if m.proxy && !proxy {
                        m.record_since = next;
                        // The first record names its database, as Redis's promoted
                        // replica forgets `slaveseldb`.
                        m.db = usize::MAX;
                    }
                    m.proxy = proxy;
                }
            }
            m.next += 1;
        }
    }

    fn append(&self, m: &mut Inner, bytes: &[u8]) {
        m.ring.extend(bytes.iter().copied());
        let excess = m.ring.len().saturating_sub(m.cap);
        m.ring.drain(..excess);
        self.offset.fetch_add(bytes.len() as u64, Ordering::AcqRel);
    }

    /// Marks resolved once the stream has reached their number. A replica starting there
    /// starts in database 0 of its own, so the next record names its database.
    fn resolve_marks(&self, m: &mut Inner) {
        if m.marks.iter().all(|k| k.seq > m.next) {
            return;
        }
        let next = m.next;
        let offset = self.offset();
        let mut i = 0;
        while i < m.marks.len() {
            if m.marks[i].seq <= next {
                let k = m.marks.swap_remove(i);
                match k.tx {
                    MarkTx::Sync(tx) => {
                        let _ = tx.send(offset);
                        // A proxied stream cannot name its database again: the replica
                        // learns it from the snapshot (`repl-stream-db`).
                        if !m.proxy {
                            m.db = usize::MAX;
                        }
                    }
                    MarkTx::Save(tx) => {
                        let db = (m.db != usize::MAX).then_some(m.db);
                        let _ = tx.send((offset, db));
                    }
                }
            } else {
                i += 1;
            }
        }
    }

    /// The offset where change `seq` starts (a snapshot's cut), once it is known.
    /// A replica's stream starts there: the next record names its database.
    pub fn mark(&self, seq: u64) -> tokio::sync::oneshot::Receiver<u64> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let mut m = self.inner.lock();
        m.marks.push(Mark {
            seq,
            tx: MarkTx::Sync(tx),
        });
        self.resolve_marks(&mut m);
        rx
    }

    /// [`Feed::mark`] for a save: the offset and the database the stream has selected
    /// there (`None`: none yet, the next record names it); the stream is left as it is.
    pub fn mark_for_save(&self, seq: u64) -> tokio::sync::oneshot::Receiver<(u64, Option<usize>)> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let mut m = self.inner.lock();
        m.marks.push(Mark {
            seq,
            tx: MarkTx::Save(tx),
        });
        self.resolve_marks(&mut m);
        rx
    }
}

#[cfg(test)]
mod tests {
    use super::super::aof;
    use super::*;

    fn sub(db: usize, arg: &[u8]) -> Sub {
        let mut bytes = Vec::new();
        aof::encode(&mut bytes, &[b"SET", arg, b"v"]);
        Sub {
            db: Some(db),
            bytes,
        }
    }

    /// Records placed by number with their SELECTs; the backlog keeps its last bytes and
    /// answers reads by offset; a mark resolves where its number starts.
    #[test]
    fn records_reach_the_backlog_in_order() {
        let f = Feed::new(10, 16 * 1024, 0);
        let mark = f.mark(12);
        f.submit(&[11], vec![sub(0, b"b")]);
        assert_eq!(f.offset(), 0);
        f.submit(&[10], vec![sub(0, b"a")]);
        let mut out = Vec::new();
        f.read_from(1, &mut out, usize::MAX).unwrap();
        let text = String::from_utf8_lossy(&out).to_string();
        assert!(text.starts_with("*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n*3\r\n$3\r\nSET\r\n$1\r\na"));
        let mut rx = mark;
        let at = rx.try_recv().unwrap();
        assert_eq!(at, f.offset());
        // After a mark the next record names its database again.
        f.submit(&[12], vec![sub(0, b"c")]);
        out.clear();
        f.read_from(at + 1, &mut out, usize::MAX).unwrap();
        assert!(out.starts_with(b"*2\r\n$6\r\nSELECT"));
        // Bytes that left the ring cannot be read.
        let f = Feed::new(1, 0, 0);
        for i in 1..2000u64 {
            f.submit(&[i], vec![sub(0, b"0123456789")]);
        }
        assert!(f.read_from(1, &mut Vec::new(), 10).is_none());
        let (first, held) = f.window();
        assert_eq!(held, 16 * 1024);
        assert_eq!(first + held - 1, f.offset());
        assert!(f.read_from(first, &mut Vec::new(), 10).is_some());
    }

    fn raw(bytes: &[u8], changed: u64) -> Rec {
        Rec::Raw {
            bytes: bytes.to_vec(),
            db_before: 3,
            db_after: 3,
            changed,
        }
    }

    /// A replica's backlog: its master's bytes as they came, its own records as fillers; at
    /// the switch to record mode (a promotion), a command whose changes came before the
    /// switch is still placed (by its bytes, after a SELECT), one whose changes came after
    /// it is placed by its records only, and the replica's own records follow.
    #[test]
    fn a_proxied_stream_keeps_the_masters_bytes_and_switches_by_number() {
        let f = Feed::new(1, 16 * 1024, 0);
        f.reset(100, 3);
        assert_eq!(f.offset(), 100);
        f.submit(&[1], vec![sub(0, b"local")]);
        f.submit_rec(&[2], raw(b"MASTER1", 1));
        assert_eq!(f.offset(), 107);
        let mut out = Vec::new();
        f.read_from(101, &mut out, usize::MAX).unwrap();
        assert_eq!(out, b"MASTER1");
        // Changes numbered 3 (before the switch at 4), its bytes placed at 5: kept.
        f.submit(&[3], vec![sub(3, b"dropped")]);
        f.submit_rec(&[4], Rec::Mode(false));
        f.submit_rec(&[5], raw(b"LATE", 3));
        // Changes at 6 after the switch, recorded; its bytes at 7 are not placed again.
        f.submit(&[6], vec![sub(3, b"mine")]);
        f.submit_rec(&[7], raw(b"TWICE", 6));
        out.clear();
        f.read_from(108, &mut out, usize::MAX).unwrap();
        let text = String::from_utf8_lossy(&out).to_string();
        assert!(
            text.starts_with("*2\r\n$6\r\nSELECT\r\n$1\r\n3\r\nLATE*3"),
            "{text}"
        );
        assert!(text.contains("mine") && !text.contains("dropped") && !text.contains("TWICE"));
        // A reset is a new history: its readers stop.
        let gen = f.gen();
        f.reset(500, 0);
        assert!(f.read_from_gen(gen, 501, &mut out, 10).is_none());
        assert!(f.read_from_gen(f.gen(), 501, &mut out, 10).is_some());
    }
}
