//! The append-only journal (`appendonly yes`): every change, in the order it was applied,
//! as the Redis commands that redo it, in Redis 7's multi-part AOF (`aof.rs`), written and
//! fsynced by one thread (`writer.rs`).
//!
//! **How a write reaches the journal.** Commands run in parallel on different shards, and a
//! command's record is only complete when its handler returns, after its shard locks are
//! released. So the order is fixed under the locks and the bytes are sent later:
//! - every command runs inside a thread-local *context* ([`Command`], opened by the
//!   dispatcher; handlers never await, so the thread is the command's);
//! - each change, under the shard lock that makes it (the key space's `modified` hook,
//!   FLUSH/SWAPDB, the collection catalog), takes a number from one global counter
//!   ([`mark`]/[`stamp`]); a command keeps the numbers it took, and its record is placed at
//!   the largest, the others being fillers. Two changes to the same key take their numbers
//!   under the same lock, so their order is the order of application; a command that holds
//!   several shards at once takes its last number while holding them all;
//! - at the end of the command its record (the commands that redo it, in their resolved
//!   form: handlers replace their arguments with [`rewrite`]) goes to the writer, which
//!   places records strictly by number (buffering early arrivals) and writes them in order.
//!
//! A command that locks the same shards several times in sequence (a multi-document write
//! one shard at a time) does not make one record: each document change is its own record,
//! numbered under its shard's lock ([`change_record`]). Inside EXEC or a script (the exclusive
//! gate: no other command runs) everything joins the one record, a `MULTI … EXEC` block.
//! Keys removed by expiry or eviction become `DEL` records the same way.

pub mod aof;
pub mod base;
pub mod child;
pub mod feed;
pub mod pacing;
pub mod rdb_save;
pub mod snapshot;
pub mod writer;

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};
use std::sync::Arc;
use writer::{Journal, Sub};

static ENABLED: AtomicBool = AtomicBool::new(false);
/// The replication stream takes records (see `feed.rs`): on from the first replica's sync.
static FEED_ON: AtomicBool = AtomicBool::new(false);
static FEED: std::sync::OnceLock<feed::Feed> = std::sync::OnceLock::new();
static LOADING: AtomicBool = AtomicBool::new(false);
/// The next sequence number.
static NEXT: AtomicU64 = AtomicU64::new(1);
/// The current journal. Each start (at boot, or `CONFIG SET appendonly yes` after a `no`)
/// makes a new one and leaks its handle on purpose: callers keep `&'static` references
/// without a lock on the hot path, and a stopped journal is a few hundred bytes.
static JOURNAL: AtomicPtr<Arc<Journal>> = AtomicPtr::new(std::ptr::null_mut());

struct Slot;

impl Slot {
    #[inline]
    fn get(&self) -> Option<&'static Arc<Journal>> {
        let p = JOURNAL.load(Ordering::Acquire);
        // SAFETY: a non-null pointer comes from `Box::leak` in `start` and is never freed.
        unsafe { p.as_ref() }
    }
}

/// Whether writes are journaled now (to the file).
#[inline]
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// Whether changes are recorded at all: for the journal's file or the replication stream.
#[inline]
pub fn taking() -> bool {
    ENABLED.load(Ordering::Relaxed) || FEED_ON.load(Ordering::Relaxed)
}

/// The replication stream, once started.
pub fn feed() -> Option<&'static feed::Feed> {
    FEED.get().filter(|_| FEED_ON.load(Ordering::Acquire))
}

/// Starts the replication stream (once; later calls return it): called at a snapshot's cut
/// (the exec gate held exclusively and every shard locked), so it starts with the first
/// change after the cut.
pub fn start_feed(cap: usize) -> &'static feed::Feed {
    let f = FEED.get_or_init(|| feed::Feed::new(NEXT.load(Ordering::Acquire), cap, 0));
    if !FEED_ON.swap(true, Ordering::AcqRel) {
        // Freed since (or new): it takes the changes from this cut on.
        f.restart(NEXT.load(Ordering::Acquire));
    }
    f
}

/// Frees the replication backlog (`repl-backlog-ttl` on a master without replicas): no
/// record is taken for it until a replica's full sync starts it again.
pub fn free_feed() {
    if let Some(f) = feed() {
        FEED_ON.store(false, Ordering::Release);
        f.free();
    }
}

/// `master_repl_offset`: the stream's offset, kept while the backlog is freed.
pub fn stream_offset() -> u64 {
    FEED.get().map_or(0, |f| f.offset())
}

/// Starts the replication stream at `offset` (a restart that continues a replication
/// history: the offset its file was saved at), before anything is served.
pub fn start_feed_at(cap: usize, offset: u64) -> &'static feed::Feed {
    let f = FEED.get_or_init(|| feed::Feed::new(NEXT.load(Ordering::Acquire), cap, offset));
    FEED_ON.store(true, Ordering::Release);
    f
}

/// A record for the replication stream only (PUBLISH, the PING to replicas: Redis sends
/// them to replicas and not to its AOF), numbered now; the journal gets a filler.
pub fn replicate_only(db: Option<usize>, argv: &[&[u8]]) {
    let Some(f) = feed() else { return };
    let s = NEXT.fetch_add(1, Ordering::AcqRel);
    if enabled() {
        if let Some(j) = JOURNAL_SLOT.get() {
            j.submit(&[s], Vec::new());
        }
    }
    f.submit(&[s], vec![command(db, argv)]);
}

/// Replica side: bytes of the master's stream the link applied, for the backlog (see
/// `feed.rs`, proxying), numbered now: after everything the command that ran them changed
/// (`changed`, its highest number, 0 if none). The journal's file gets a filler.
///
/// Returns the number it took (0: no backlog), which the journal's file reaches on disk
/// once everything the bytes changed is there.
pub fn place_proxied(bytes: Vec<u8>, db_before: usize, db_after: usize, changed: u64) -> u64 {
    let Some(f) = feed() else { return 0 };
    let s = NEXT.fetch_add(1, Ordering::AcqRel);
    if enabled() {
        if let Some(j) = JOURNAL_SLOT.get() {
            j.submit(&[s], Vec::new());
        }
    }
    f.submit_rec(
        &[s],
        feed::Rec::Raw {
            bytes,
            db_before,
            db_after,
            changed,
        },
    );
    s
}

/// Switches the backlog between proxying the master's stream (a replica) and recording
/// this server's changes (a master), at the number taken now: changes numbered before it
/// are read in the old mode.
pub fn set_proxying(on: bool) {
    let Some(f) = feed() else { return };
    let s = NEXT.fetch_add(1, Ordering::AcqRel);
    if enabled() {
        if let Some(j) = JOURNAL_SLOT.get() {
            j.submit(&[s], Vec::new());
        }
    }
    f.submit_rec(&[s], feed::Rec::Mode(on));
}

/// The highest number the last command run on this thread took for its changes (0: none),
/// read once: the replica's link places the command's bytes after them.
pub fn take_last_changed() -> u64 {
    LAST_CHANGED.with(|l| l.replace(0))
}

/// EXEC's or a script's writes as one `MULTI … EXEC` block (a single write needs none).
fn wrap(atomic: bool, subs: &mut Vec<Sub>) {
    if !atomic || subs.len() < 2 {
        return;
    }
    // In the first write's database, so its SELECT comes before MULTI, as in Redis's AOF.
    subs.insert(0, command(subs[0].db, &[b"MULTI"]));
    subs.push(command(None, &[b"EXEC"]));
}

/// [`submit_to`] with different contents for the file and the stream (either may be empty:
/// the numbers are placed all the same).
fn submit_split(seqs: &[u64], aof: Vec<Sub>, replica: Vec<Sub>) {
    if enabled() {
        if let Some(j) = JOURNAL_SLOT.get() {
            j.submit(seqs, aof);
        }
    }
    if let Some(f) = feed() {
        f.submit(seqs, replica);
    }
}

/// Hands a record to the journal's file and to the replication stream (whichever run),
/// taking the commands out of `subs`.
fn submit_to(seqs: &[u64], subs: &mut Vec<Sub>) {
    let file = if enabled() { JOURNAL_SLOT.get() } else { None };
    match (file, feed()) {
        (Some(j), Some(f)) => {
            let copy = subs
                .iter()
                .map(|s| Sub {
                    db: s.db,
                    bytes: s.bytes.clone(),
                })
                .collect();
            j.submit(seqs, copy);
            f.submit(seqs, std::mem::take(subs));
        }
        (Some(j), None) => j.submit_from(seqs, subs),
        (None, Some(f)) => f.submit(seqs, std::mem::take(subs)),
        (None, None) => subs.clear(),
    }
}

/// Whether the journal is being replayed: keys are not expired lazily meanwhile (as Redis,
/// which expires nothing while loading), since a key the journal wrote to while it was live
/// must take those writes even if its deadline has passed since; the sweep removes it once
/// the server runs.
#[inline]
pub fn loading() -> bool {
    LOADING.load(Ordering::Relaxed)
}

pub fn set_loading(on: bool) {
    LOADING.store(on, Ordering::Relaxed);
}

/// The number the next change will take: called with every shard locked and the exec gate
/// held exclusively, the cut between what a snapshot holds and what the journal holds after.
pub fn next_seq() -> u64 {
    NEXT.load(Ordering::Acquire)
}

/// The running journal, if any.
pub fn journal() -> Option<&'static Arc<Journal>> {
    JOURNAL_SLOT.get()
}

const JOURNAL_SLOT: Slot = Slot;

/// Starts journaling into `file` (see [`Journal::start`]), numbering from the next change.
/// At run time (`CONFIG SET appendonly yes`) the caller holds the exec gate exclusively and
/// every shard lock: no command is half done, so each one is wholly journaled or not.
pub fn start(file: std::fs::File, size: u64, base_size: u64, policy: u8) -> Result<(), String> {
    if enabled() {
        return Err("the journal is already open".to_string());
    }
    let first = NEXT.load(Ordering::Relaxed);
    let j = Journal::start(file, size, base_size, first, policy);
    JOURNAL.store(Box::leak(Box::new(j)), Ordering::Release);
    ENABLED.store(true, Ordering::Release);
    Ok(())
}

/// Stops taking records (`CONFIG SET appendonly no`, under the exec gate and every shard
/// lock, or shutdown); [`close`] then writes and fsyncs what is buffered.
pub fn disable() {
    ENABLED.store(false, Ordering::Release);
}

/// Writes out and fsyncs what the journal holds, and stops its thread.
pub fn close() {
    if let Some(j) = journal() {
        j.close();
    }
}

/// Stops journaling (shutdown): what is buffered is written and fsynced.
pub fn stop() {
    disable();
    close();
}

pub fn set_policy(p: u8) {
    if let Some(j) = JOURNAL_SLOT.get() {
        j.set_policy(p);
    }
}

/// One command frame: a handler run through the table (nested ones: EXEC's commands, a
/// script's calls).
struct Frame {
    db: usize,
    modified: bool,
    /// The commands to journal instead of the frame's own arguments.
    rewrite: Option<Vec<Vec<Vec<u8>>>>,
}

#[derive(Default)]
struct Ctx {
    active: bool,
    /// EXEC or a script: everything joins one record, wrapped in MULTI … EXEC.
    atomic: bool,
    seqs: Vec<u64>,
    /// The last number taken, reused while no one else has taken one since.
    last: u64,
    subs: Vec<Sub>,
    frames: Vec<Frame>,
    /// The highest number of anything this command journaled (its own record, or the
    /// document records it made), for a reply that waits for the disk.
    wait: u64,
    /// J on a document write: the reply waits for the disk whatever the policy.
    j: bool,
    /// Opened by [`enter`], not by the dispatcher: the command passed the dispatcher's
    /// check while the journal was off and ran after `CONFIG SET appendonly yes` turned it
    /// on; its record is handed over when its outermost frame closes.
    late: bool,
    /// Where the writes from now on go (a script's `redis.set_repl`): [`REPL_AOF`] |
    /// [`REPL_REPLICA`].
    repl: u8,
    /// The destinations of each of `subs`, in step with it.
    targets: Vec<u8>,
}

/// `redis.set_repl` flags: the journal's file, the replication stream.
pub const REPL_AOF: u8 = 1;
pub const REPL_REPLICA: u8 = 2;
const REPL_ALL: u8 = REPL_AOF | REPL_REPLICA;

/// A script's `redis.set_repl(flags)`: its later writes go only where `flags` say (Redis's
/// `PROPAGATE_AOF`/`PROPAGATE_REPL`); the command's next run starts with both again.
pub fn set_repl(flags: u8) {
    CTX.with(|c| c.borrow_mut().repl = flags & REPL_ALL);
}

fn push_sub(c: &mut Ctx, sub: Sub) {
    c.subs.push(sub);
    c.targets.push(c.repl);
}

thread_local! {
    static CTX: RefCell<Ctx> = RefCell::new(Ctx::default());
    /// See [`take_last_changed`].
    static LAST_CHANGED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// What the dispatcher learns when a command ends.
#[derive(Default, Clone, Copy, Debug)]
pub struct Ended {
    /// The highest sequence number of what it journaled (0: nothing).
    pub seq: u64,
    /// The reply must wait until `seq` is on disk (`appendfsync always`, or J); otherwise
    /// until it is written to the file.
    pub wait: bool,
}

/// The journal context of one command, for the dispatcher: opened before the command runs,
/// its record handed over when [`Command::end`] is called or the guard is dropped (so a
/// panicking handler leaves no number unplaced, which would stall the journal).
pub struct Command {
    open: bool,
}

impl Command {
    pub fn begin() -> Command {
        if !taking() {
            return Command { open: false };
        }
        CTX.with(|c| open(&mut c.borrow_mut()));
        Command { open: true }
    }

    pub fn end(mut self) -> Ended {
        self.finish()
    }

    fn finish(&mut self) -> Ended {
        if !std::mem::take(&mut self.open) {
            return Ended::default();
        }
        CTX.with(|c| close_ctx(&mut c.borrow_mut()))
    }
}

fn open(c: &mut Ctx) {
    // The vectors keep their allocations from one command to the next.
    c.active = true;
    c.atomic = false;
    c.seqs.clear();
    c.last = 0;
    c.subs.clear();
    c.frames.clear();
    c.wait = 0;
    c.j = false;
    c.late = false;
    c.repl = REPL_ALL;
    c.targets.clear();
}

/// Hands the command's record to the journal.
fn close_ctx(c: &mut Ctx) -> Ended {
    {
        {
            c.active = false;
            c.frames.clear();
            let seq = c.seqs.iter().copied().max().unwrap_or(0);
            if seq > 0 {
                if c.targets.iter().all(|&t| t == REPL_ALL) {
                    wrap(c.atomic, &mut c.subs);
                    // `c.subs` keeps its allocation for the next command.
                    submit_to(&c.seqs, &mut c.subs);
                } else {
                    // Some writes go to one destination only: each gets its own block.
                    let (mut aof, mut replica) = (Vec::new(), Vec::new());
                    for (sub, &t) in c.subs.drain(..).zip(&c.targets) {
                        if t & REPL_AOF != 0 {
                            aof.push(Sub {
                                db: sub.db,
                                bytes: sub.bytes.clone(),
                            });
                        }
                        if t & REPL_REPLICA != 0 {
                            replica.push(sub);
                        }
                    }
                    wrap(c.atomic, &mut aof);
                    wrap(c.atomic, &mut replica);
                    submit_split(&c.seqs, aof, replica);
                }
            }
            c.subs.clear();
            c.targets.clear();
            c.seqs.clear();
            if seq.max(c.wait) > 0 {
                LAST_CHANGED.with(|l| l.set(seq.max(c.wait)));
            }
            // Replies wait for the file only: without it, nothing to wait for.
            let seq = if enabled() { seq.max(c.wait) } else { 0 };
            let wait = seq > 0
                && (c.j
                    || JOURNAL_SLOT
                        .get()
                        .is_some_and(|j| j.policy() == writer::ALWAYS));
            // No sync is asked of the journal thread for J: the reply that waits fsyncs
            // (`Journal::wait_durable`), with the other replies ready at the same time.
            Ended { seq, wait }
        }
    }
}

impl Drop for Command {
    fn drop(&mut self) {
        self.finish();
    }
}

fn command(db: Option<usize>, argv: &[&[u8]]) -> Sub {
    let mut bytes = Vec::new();
    aof::encode(&mut bytes, argv);
    Sub { db, bytes }
}

/// EXEC or a script: the command's writes make one `MULTI … EXEC` record.
pub fn set_atomic() {
    CTX.with(|c| c.borrow_mut().atomic = true);
}

/// A document write with J: its reply waits until its changes are on disk.
pub fn want_journaled() {
    CTX.with(|c| c.borrow_mut().j = true);
}

/// Takes a sequence number for the current command (under the lock of what it changes):
/// the last one again if no one has taken one since.
#[inline]
pub fn stamp() {
    if !taking() {
        return;
    }
    CTX.with(|c| {
        let mut c = c.borrow_mut();
        if !c.active {
            return;
        }
        take(&mut c);
    })
}

fn take(c: &mut Ctx) {
    if c.last != 0 && NEXT.load(Ordering::Acquire) == c.last + 1 {
        return;
    }
    let s = NEXT.fetch_add(1, Ordering::AcqRel);
    c.seqs.push(s);
    c.last = s;
}

/// A change to data under its shard lock: the current command's frame will be journaled,
/// and its record is placed after this point.
#[inline]
pub fn mark() {
    if !taking() {
        return;
    }
    CTX.with(|c| {
        let mut c = c.borrow_mut();
        if !c.active {
            return;
        }
        if let Some(f) = c.frames.last_mut() {
            f.modified = true;
        }
        take(&mut c);
    })
}

/// Runs `f` outside the running command's journal context (put aside and restored after):
/// what `f` changes is journaled as records of its own, numbered after everything the
/// command changed so far, so they follow its record. Serving blocked clients after a
/// command uses it: Redis propagates a served pop, or the DEL of an expired key the serving
/// met, after the command (after EXEC, not inside its MULTI … EXEC).
pub fn detached<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(Option<Ctx>);
    impl Drop for Restore {
        fn drop(&mut self) {
            if let Some(saved) = self.0.take() {
                CTX.with(|c| *c.borrow_mut() = saved);
            }
        }
    }
    let _restore = Restore(Some(CTX.with(|c| std::mem::take(&mut *c.borrow_mut()))));
    f()
}

/// Opens a frame for a handler about to run on database `db`.
pub fn enter(db: usize) {
    CTX.with(|c| {
        let mut c = c.borrow_mut();
        if !c.active && taking() {
            open(&mut c);
            c.late = true;
        }
        if c.active {
            c.frames.push(Frame {
                db,
                modified: false,
                rewrite: None,
            });
        }
    })
}

/// Closes the frame of a handler: its commands join the record if it changed something.
/// `own` is its own arguments, journaled when `write` and the handler did not rewrite them;
/// `always` journals them even if no key changed (document DDL).
///
/// A context [`enter`] opened (outside the dispatcher: a pop served for a blocked client)
/// ends with its outermost frame: its [`Ended`] is returned, for the reply that waits on it.
pub fn leave(own: &[bytes::Bytes], write: bool, always: bool) -> Option<Ended> {
    CTX.with(|c| {
        let mut c = c.borrow_mut();
        if !c.active {
            return None;
        }
        let f = c.frames.pop()?;
        if f.modified || always {
            leave_frame(&mut c, f, own, write, always);
        }
        // Every number a late context took is handed over, record or filler.
        (c.late && c.frames.is_empty()).then(|| close_ctx(&mut c))
    })
}

fn leave_frame(c: &mut Ctx, f: Frame, own: &[bytes::Bytes], write: bool, always: bool) {
    {
        match f.rewrite {
            Some(cmds) => {
                for argv in cmds {
                    let mut bytes = Vec::new();
                    aof::encode_args(&mut bytes, &argv);
                    push_sub(
                        c,
                        Sub {
                            db: Some(f.db),
                            bytes,
                        },
                    );
                }
            }
            None if write => {
                let mut bytes = Vec::new();
                aof::encode_args(&mut bytes, own);
                push_sub(
                    c,
                    Sub {
                        db: Some(f.db),
                        bytes,
                    },
                );
            }
            None => {}
        }
        if always && c.seqs.is_empty() {
            take(c);
        }
    }
}

/// The current handler's change is journaled as `cmds` instead of its own arguments
/// (resolved, deterministic forms: absolute deadlines, what a random pop removed...). An
/// empty list journals nothing.
pub fn rewrite(cmds: Vec<Vec<Vec<u8>>>) {
    if !taking() {
        return;
    }
    CTX.with(|c| {
        if let Some(f) = c.borrow_mut().frames.last_mut() {
            f.rewrite = Some(cmds);
        }
    })
}

/// Whether the current handler's arguments will be journaled (so it should rewrite them).
#[inline]
pub fn recording() -> bool {
    taking() && CTX.with(|c| !c.borrow().frames.is_empty())
}

/// A key left by expiry or eviction: a `DEL` record of its own, numbered now under the
/// key's shard lock, so it sits exactly where the key left even when the command that met it
/// changes other shards later (the key was already dead, and the replay expires nothing
/// itself). Inside EXEC or a script it joins the block instead, after the block's earlier
/// writes: one of them may have given the key the deadline that just passed.
pub fn key_removed(db: usize, key: &[u8]) {
    change_record(db, &[b"DEL", key]);
}

/// A change made outside a command's own record (a document change, a key removed by
/// expiry or eviction, a change-stream entry), as the command that redoes it. Inside EXEC or
/// a script it joins the record; otherwise it is a record of its own, numbered now (under
/// its shard's lock).
///
/// Returns the record's number when it is one of its own (0 when it joined a record or the
/// journal is off), for work off a command's thread whose reply must wait on it.
pub fn change_record(db: usize, argv: &[&[u8]]) -> u64 {
    if !taking() {
        return 0;
    }
    let sub = command(Some(db), argv);
    let own = CTX.with(|c| {
        let mut c = c.borrow_mut();
        if c.active && c.atomic {
            push_sub(&mut c, sub);
            take(&mut c);
            None
        } else {
            Some(sub)
        }
    });
    let Some(sub) = own else { return 0 };
    let seq = submit_alone(vec![sub]);
    CTX.with(|c| {
        let mut c = c.borrow_mut();
        if c.active {
            c.wait = c.wait.max(seq);
        }
    });
    seq
}

fn submit_alone(mut subs: Vec<Sub>) -> u64 {
    let s = NEXT.fetch_add(1, Ordering::AcqRel);
    submit_to(&[s], &mut subs);
    s
}

/// The highest number placed in order so far: a client served by another's command (a
/// blocked pop) waits for it under `always`.
pub fn placed() -> u64 {
    JOURNAL_SLOT.get().map_or(0, |j| j.placed())
}

/// Resolves once `seq` is written to the file (at once when there is no journal).
pub async fn wait_written(seq: u64) {
    if !enabled() {
        return;
    }
    if let Some(j) = JOURNAL_SLOT.get() {
        j.wait_written(seq).await;
    }
}

/// Resolves once `seq` is on disk (at once when there is no journal).
pub async fn wait_durable(seq: u64) {
    if !enabled() {
        return;
    }
    if let Some(j) = JOURNAL_SLOT.get() {
        j.wait_durable(seq).await;
    }
}

/// The record of a document change, for the document hooks (under the change's shard lock).
pub fn doc_change(db: usize, coll: &str, change: crate::store::collections::Change<'_>) {
    use crate::store::collections::Change;
    if !taking() {
        return;
    }
    match change {
        Change::Insert(d) | Change::Update(d) | Change::Replace(d) => {
            change_record(db, &[b"DOC.JOURNALPUT", coll.as_bytes(), d.as_bytes()]);
        }
        Change::Delete(d) => {
            if let Ok(id) = d.get("_id") {
                if let Some(id) = id.and_then(|v| bson::Bson::try_from(v).ok()) {
                    del_record(db, coll, id);
                }
            }
        }
        Change::Expire(id) => del_record(db, coll, id.clone()),
    }
}

fn del_record(db: usize, coll: &str, id: bson::Bson) {
    let mut f = bson::Document::new();
    f.insert("_id", id);
    let mut raw = Vec::new();
    if f.to_writer(&mut raw).is_ok() {
        change_record(db, &[b"DOC.JOURNALDEL", coll.as_bytes(), &raw]);
    }
}

impl Ended {
    /// Record `seq`, made off the dispatcher (0: nothing), as the reply that waits on it sees
    /// it: on disk first under `appendfsync always`, else written to the file.
    pub fn at(seq: u64) -> Ended {
        Ended {
            seq,
            wait: seq > 0 && wait_on_reply(),
        }
    }
}

/// Whether replies wait for the disk by policy (`appendfsync always`).
pub fn wait_on_reply() -> bool {
    enabled()
        && JOURNAL_SLOT
            .get()
            .is_some_and(|j| j.policy() == writer::ALWAYS)
}
