//! The replication stream: the journal's records, merged into application order as the
//! journal's writer merges them (`writer.rs`), appended to an in-memory backlog (a ring of
//! `repl-backlog-size` bytes) instead of a file. Replicas read it by byte offset
//! (`master_repl_offset` counts every byte ever appended), so one stream serves all of them
//! and a replica that reconnects with an offset still in the ring resumes from there.
//!
//! It runs while the server has had a replica (Redis creates its backlog with the first
//! replica, and so does this); starting it is a snapshot's cut (`start`), so the first
//! number it places is the first change after that cut.

use super::writer::Sub;
use parking_lot::Mutex;
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};

/// A full resynchronisation's cut: the byte offset of the stream where the change numbered
/// `seq` starts, known once every smaller number is placed.
struct Mark {
    seq: u64,
    tx: tokio::sync::oneshot::Sender<u64>,
}

struct Inner {
    /// The next sequence number to place.
    next: u64,
    pending: BTreeMap<u64, Option<Vec<Sub>>>,
    /// The database the stream has SELECTed (`usize::MAX`: none, a SELECT goes first).
    db: usize,
    ring: VecDeque<u8>,
    cap: usize,
    marks: Vec<Mark>,
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
        let m = self.inner.lock();
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

    /// A record (`subs`, placed at the largest of `seqs`) and its fillers; numbers before
    /// the feed's start are ignored.
    pub fn submit(&self, seqs: &[u64], subs: Vec<Sub>) {
        let Some(&pos) = seqs.iter().max() else {
            return;
        };
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
            if let Some(subs) = rec {
                let mut bytes = Vec::new();
                super::writer::encode_record(subs, &mut m.db, &mut bytes);
                self.append(m, &bytes);
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
                let _ = k.tx.send(offset);
                m.db = usize::MAX;
            } else {
                i += 1;
            }
        }
    }

    /// The offset where change `seq` starts (a snapshot's cut), once it is known.
    pub fn mark(&self, seq: u64) -> tokio::sync::oneshot::Receiver<u64> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let mut m = self.inner.lock();
        m.marks.push(Mark { seq, tx });
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
}
