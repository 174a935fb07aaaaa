//! Clients blocked on keys (BLPOP, BLMOVE, BZPOPMIN, ...): who waits on which key, in arrival
//! order, and which keys have become ready since the last time they were served.
//!
//! A blocked client is a [`Waiter`] queued on each of its keys. Its `attempt` is the pop or
//! move it is waiting to make, built by the command that blocked: it runs against the store
//! like a command and returns the client's reply once the data is there. Keys become ready
//! when a key is created (`KeyHooks::created`, the only way an empty list or sorted set gets
//! elements: an existing non-empty one has no waiters). After each command, the dispatcher
//! serves the ready keys (`commands::blocking::serve_ready`): for each key, its waiters first
//! come first served, each attempt made on the waiter's behalf and its reply handed to the
//! waiting connection through a oneshot channel. While nobody is blocked every hook is one
//! atomic load; a blocked connection waits on its channel, its timeout and its socket, so it
//! costs no CPU.
//!
//! Lock order: a shard lock may be held while taking the registry (`created` signals under
//! it); an attempt takes shard locks, so it always runs with the registry released, taken out
//! of its waiter meanwhile (`in_service`).

use crate::protocol::Reply;
use crate::state::Server;
use crate::store::journal::Ended;
use bytes::Bytes;
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use tokio::sync::oneshot;

/// The pop or move a blocked client waits to make: `None` while its keys hold nothing for it
/// (missing, empty or of another type: Redis keeps such a client blocked), else its reply.
/// It is given the key that became ready (Redis serves a client from the key that woke it).
pub type Attempt = Box<dyn FnMut(&Server, &Bytes) -> Option<Reply> + Send>;

pub struct Waiter {
    db: usize,
    keys: Vec<Bytes>,
    /// `None` while a server thread is making the attempt.
    attempt: Option<Attempt>,
    /// The reply a timeout (or `CLIENT UNBLOCK ... TIMEOUT`) gives.
    timeout_reply: Reply,
    /// Set when the client gave up while its attempt was in service: if the attempt finds
    /// nothing, the waiter is answered with its timeout reply instead of going back.
    gave_up: Option<Reply>,
    done: Option<oneshot::Sender<Reply>>,
    /// A read-only command of a READONLY client: a cluster replica may keep serving it for
    /// a slot of its master (see `waiting_keys`).
    replica_read: bool,
}

#[derive(Default)]
struct Inner {
    by_key: hashbrown::HashMap<(usize, Bytes), VecDeque<u64>>,
    waiters: hashbrown::HashMap<u64, Waiter>,
    ready: Vec<(usize, Bytes)>,
    ready_set: hashbrown::HashSet<(usize, Bytes)>,
}

#[derive(Default)]
pub struct Blocking {
    inner: Mutex<Inner>,
    /// Blocked clients; 0 makes `signal` one load.
    blocked: AtomicUsize,
    /// Keys were signalled and not yet served.
    has_ready: AtomicBool,
    /// One serving pass at a time, so waiters are served in their order.
    serving: Mutex<()>,
    /// The journal records that replies sent to blocked clients by other work (a pop served
    /// for them, a script run on the script thread, MIGRATE's background deletes) must not
    /// go out before, by client id: set before the reply is sent, taken with it.
    owed: Mutex<hashbrown::HashMap<u64, Ended>>,
}

/// The keys a client blocks on.
pub struct WaitOn {
    pub db: usize,
    pub keys: Vec<Bytes>,
    /// A read-only command of a READONLY client (see `Waiter::replica_read`).
    pub replica_read: bool,
}

/// What a blocked connection waits on.
pub struct Blocked {
    pub id: u64,
    pub reply: oneshot::Receiver<Reply>,
    /// `None`: forever.
    pub deadline: Option<std::time::Instant>,
}

impl Blocking {
    /// Number of blocked clients (INFO's `blocked_clients`).
    pub fn blocked_clients(&self) -> usize {
        self.blocked.load(Ordering::Relaxed)
    }

    /// Whether client `id` waits on keys (CLIENT LIST's `b` flag).
    pub fn is_blocked(&self, id: u64) -> bool {
        self.blocked.load(Ordering::Relaxed) > 0 && self.inner.lock().waiters.contains_key(&id)
    }

    /// Blocks client `id` on `keys` of `db`. The keys are marked ready at once, so data that
    /// arrived between the command's own check and this registration is not missed.
    pub fn block(
        &self,
        id: u64,
        on: WaitOn,
        attempt: Attempt,
        timeout_reply: Reply,
        deadline: Option<std::time::Instant>,
    ) -> Blocked {
        let WaitOn {
            db,
            keys,
            replica_read,
        } = on;
        let (tx, rx) = oneshot::channel();
        let mut g = self.inner.lock();
        let mut seen = hashbrown::HashSet::new();
        for k in &keys {
            if seen.insert(k.clone()) {
                g.by_key.entry((db, k.clone())).or_default().push_back(id);
                mark_ready(&mut g, db, k);
            }
        }
        g.waiters.insert(
            id,
            Waiter {
                db,
                keys,
                attempt: Some(attempt),
                timeout_reply,
                gave_up: None,
                done: Some(tx),
                replica_read,
            },
        );
        self.blocked.fetch_add(1, Ordering::Relaxed);
        self.has_ready.store(true, Ordering::Release);
        Blocked {
            id,
            reply: rx,
            deadline,
        }
    }

    /// A key was created: its waiters may be served after the current command.
    #[inline]
    pub fn signal(&self, db: usize, key: &[u8]) {
        if self.blocked.load(Ordering::Relaxed) == 0 {
            return;
        }
        let mut g = self.inner.lock();
        if g.by_key.contains_key(&(db, Bytes::copy_from_slice(key))) {
            mark_ready(&mut g, db, key);
            self.has_ready.store(true, Ordering::Release);
        }
    }

    /// Every key clients block on in `db` may have changed (SWAPDB).
    pub fn signal_db(&self, db: usize) {
        if self.blocked.load(Ordering::Relaxed) == 0 {
            return;
        }
        let mut g = self.inner.lock();
        let keys: Vec<Bytes> = g
            .by_key
            .keys()
            .filter(|(d, _)| *d == db)
            .map(|(_, k)| k.clone())
            .collect();
        for k in keys {
            mark_ready(&mut g, db, &k);
        }
        self.has_ready.store(true, Ordering::Release);
    }

    /// Ends a client's wait with `reply` (`None`: its timeout reply) unless its attempt is
    /// being made right now. True if the client was blocked. With `force`, a waiter in
    /// service is answered with `reply` if its attempt finds nothing.
    pub fn unblock(&self, id: u64, reply: Option<Reply>) -> bool {
        let mut g = self.inner.lock();
        let Some(w) = g.waiters.get_mut(&id) else {
            return false;
        };
        if w.attempt.is_none() {
            // In service: the serving thread answers.
            let r = reply.unwrap_or_else(|| w.timeout_reply.clone());
            w.gave_up = Some(r);
            return true;
        }
        let w = remove(&mut g, id);
        drop(g);
        self.blocked.fetch_sub(1, Ordering::Relaxed);
        if let Some(mut w) = w {
            let r = reply.unwrap_or_else(|| w.timeout_reply.clone());
            if let Some(tx) = w.done.take() {
                let _ = tx.send(r);
            }
        }
        true
    }

    /// Each waiting client's id, first key and whether it reads from a replica, for a check
    /// that may unblock it with an error (a cluster slot that moved away: Redis's
    /// `clusterRedirectBlockedClientIfNeeded`). Clients whose attempt is in service are left
    /// out; they are answered by it.
    pub fn waiting_keys(&self) -> Vec<(u64, Bytes, bool)> {
        if self.blocked.load(Ordering::Relaxed) == 0 {
            return Vec::new();
        }
        let g = self.inner.lock();
        g.waiters
            .iter()
            .filter(|(_, w)| w.attempt.is_some())
            .filter_map(|(id, w)| Some((*id, w.keys.first()?.clone(), w.replica_read)))
            .collect()
    }

    /// Ends every blocking command with `reply` (a master turned replica: Redis's
    /// `disconnectAllBlockedClients`). The number of clients answered.
    pub fn unblock_all(&self, reply: &Reply) -> usize {
        if self.blocked.load(Ordering::Relaxed) == 0 {
            return 0;
        }
        let ids: Vec<u64> = self.inner.lock().waiters.keys().copied().collect();
        ids.into_iter()
            .filter(|&id| self.unblock(id, Some(reply.clone())))
            .count()
    }

    /// Forgets a client that went away (its channel is dropped unanswered).
    pub fn forget(&self, id: u64) {
        self.owed.lock().remove(&id);
        let mut g = self.inner.lock();
        if let Some(w) = g.waiters.get_mut(&id) {
            if w.attempt.is_none() {
                w.gave_up = Some(Reply::NoReply);
                return;
            }
            remove(&mut g, id);
            self.blocked.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// The reply about to be sent to blocked client `id` must not leave before record `e` is
    /// written (on disk, when `e.wait`). Nothing when `e` journaled nothing.
    pub fn owe(&self, id: u64, e: Ended) {
        if e.seq > 0 {
            let mut owed = self.owed.lock();
            let slot = owed.entry(id).or_default();
            slot.seq = slot.seq.max(e.seq);
            slot.wait |= e.wait;
        }
    }

    /// What the reply just received by blocked client `id` waits on, if another's work owed
    /// it a record.
    pub fn take_owed(&self, id: u64) -> Option<Ended> {
        self.owed.lock().remove(&id)
    }

    /// Serves the keys an EXEC or a script of `client_id` filled, once its exclusive gate is
    /// released: under the shared gate, so the pops land between two scripts, never inside
    /// one (as a whole, after it). When no key is ready it takes nothing: one atomic load,
    /// where taking and releasing the gate were two locked instructions after every script.
    pub fn serve_after_exclusive(&self, server: &Server, client_id: u64) {
        if !self.has_ready.load(Ordering::Acquire) {
            return;
        }
        if let Some(_shared) = server.exec_gate.shared_unless_busy(client_id) {
            self.serve_ready(server);
        }
    }

    /// Serves the ready keys: for each, its waiters in arrival order while their attempts
    /// succeed. Called after each command (cheap when nothing is ready).
    pub fn serve_ready(&self, server: &Server) {
        if !self.has_ready.load(Ordering::Acquire) {
            return;
        }
        // A script holds the exec gate (only commands allowed while BUSY run meanwhile, and
        // they call this too): a pop now would land in the middle of the script. The keys
        // stay ready; the script's end serves them.
        if server.exec_gate.script_running().is_some() {
            return;
        }
        let _one = self.serving.lock();
        // Out of the running command's record: what the attempts change (a pop, the DEL of
        // an expired key they meet) is journaled after it, as Redis propagates it.
        crate::store::journal::detached(|| self.serve_loop(server));
    }

    fn serve_loop(&self, server: &Server) {
        loop {
            let ready = {
                let mut g = self.inner.lock();
                self.has_ready.store(false, Ordering::Release);
                g.ready_set.clear();
                std::mem::take(&mut g.ready)
            };
            if ready.is_empty() {
                return;
            }
            for (db, key) in ready {
                self.serve_key(server, db, key);
            }
        }
    }

    fn serve_key(&self, server: &Server, db: usize, key: Bytes) {
        let mut skip = 0usize;
        loop {
            // The next waiter of this key, its attempt taken out for the call.
            let (id, mut attempt) = {
                let mut g = self.inner.lock();
                let Some(q) = g.by_key.get(&(db, key.clone())) else {
                    return;
                };
                let Some(&id) = q.get(skip) else {
                    return;
                };
                let Some(w) = g.waiters.get_mut(&id) else {
                    return;
                };
                let Some(a) = w.attempt.take() else {
                    return;
                };
                (id, a)
            };
            // A pop made for a blocked client is journaled as a record of its own (the
            // serving is `detached` from the command that woke it), as the plain pop its
            // attempt names (`commands::journal::journal_as`).
            crate::store::journal::enter(db);
            let got = attempt(server, &key);
            let record = crate::store::journal::leave(&[], false, false);
            let mut g = self.inner.lock();
            let gave_up = g.waiters.get_mut(&id).and_then(|w| w.gave_up.take());
            match (got, gave_up) {
                (None, None) => {
                    if let Some(w) = g.waiters.get_mut(&id) {
                        w.attempt = Some(attempt);
                    }
                    // Nothing for this waiter (the key is empty, or of a type another waiter
                    // of the key may want): try the next one.
                    skip += 1;
                }
                (got, gave_up) => {
                    let w = remove(&mut g, id);
                    drop(g);
                    self.blocked.fetch_sub(1, Ordering::Relaxed);
                    let r = got.or(gave_up).unwrap_or(Reply::NoReply);
                    if let Some(tx) = w.and_then(|mut w| w.done.take()) {
                        // The pop's own record: the command that woke the client took a
                        // lower number and may hand its record over later, so what the
                        // journal has placed when the reply arrives may not cover the pop.
                        if let Some(e) = record {
                            self.owe(id, e);
                        }
                        let _ = tx.send(r);
                    }
                }
            }
        }
    }
}

fn mark_ready(g: &mut Inner, db: usize, key: &[u8]) {
    let k = (db, Bytes::copy_from_slice(key));
    if g.ready_set.insert(k.clone()) {
        g.ready.push(k);
    }
}

/// Takes a waiter out of the registry and out of every key queue.
fn remove(g: &mut Inner, id: u64) -> Option<Waiter> {
    let w = g.waiters.remove(&id)?;
    for k in &w.keys {
        let slot = (w.db, k.clone());
        if let Some(q) = g.by_key.get_mut(&slot) {
            q.retain(|x| *x != id);
            if q.is_empty() {
                g.by_key.remove(&slot);
            }
        }
    }
    Some(w)
}

/// Clients blocked in a way that must hear of every write to their keys, not only of their
/// creation (XREADGROUP: a stream deleted or replaced takes its group with it). While there
/// are none, the key space's `modified` hook costs one load for this.
static WRITE_WATCHERS: AtomicUsize = AtomicUsize::new(0);

/// Whether some blocked client watches every write to its keys.
pub fn write_watchers() -> bool {
    WRITE_WATCHERS.load(Ordering::Relaxed) > 0
}

/// Counts one such blocked client for as long as its attempt lives (the registry drops it
/// when the client is served, times out, is unblocked or goes away).
pub struct WriteWatch;

impl WriteWatch {
    #[allow(clippy::new_without_default)]
    pub fn new() -> WriteWatch {
        WRITE_WATCHERS.fetch_add(1, Ordering::Relaxed);
        WriteWatch
    }
}

impl Drop for WriteWatch {
    fn drop(&mut self) {
        WRITE_WATCHERS.fetch_sub(1, Ordering::Relaxed);
    }
}
