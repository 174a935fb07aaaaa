//! Client-side caching: `CLIENT TRACKING`, as Redis 7.0's `tracking.c`.
//!
//! **The table.** In the default mode, every key a tracking client reads (a read-only
//! command, or a document read: `DOC.FIND`, `DOC.FINDONE`, `DOC.COUNT`, `DOC.AGGREGATE`, whose
//! key is the collection) is remembered as key → the ids of the clients that may cache it.
//! The table is global, not per database, as Redis's (a key read in db 0 is invalidated by a
//! write of the same name in db 1). A change of the key sends one invalidation to each of
//! them and forgets the key; a client that turned tracking off (or went away) leaves its id
//! behind, ignored when the key changes, as Redis cleans lazily. In BCAST mode nothing is
//! remembered: each prefix a client subscribed to collects the keys changed under it, sent
//! once at the end of the command that changed them (Redis sends them before it sleeps).
//!
//! **Where changes come from.** The key space's choke points (`KeyHooks::modified`, and
//! `removed` for expiry and eviction) and the document hooks (`DocHooks::changed` for every
//! document insert, update, delete and TTL expiry; `DocHooks::dropped` for DOC.DROP and both
//! names of DOC.RENAME) call [`Tracking::key_changed`]; FLUSHALL/FLUSHDB call
//! [`Tracking::flushed`] (a null to every tracking client). While no client tracks, each of
//! these is one atomic load ([`Tracking::on`]).
//!
//! **Who is "current".** Redis's `server.current_client` decides NOLOOP and when an
//! invalidation for the client running the command is written. Here a thread-local scope
//! ([`Tracking::command`], [`Tracking::executing`]) holds the id of the client whose
//! command runs on this thread (a script's commands run under its caller's id). Messages
//! for that client made before its command runs (eviction, the table's limit) go before its
//! reply ([`take_before`]); those its command makes go to its outbox, written after its
//! replies, so never inside one (nor inside EXEC's).
//!
//! **Delivery.** A RESP3 client gets `>2 invalidate [keys]` (a null for a flush); with
//! `REDIRECT id` the target gets it instead: as that push when it speaks RESP3, else as a
//! message on `__redis__:invalidate` when it is subscribed (RESP2), else nothing. A target
//! that went away turns into `tracking-redir-broken` pushes to the tracking client.

use crate::state::client::ClientHandle;
use crate::state::outbox::Outgoing;
use bytes::Bytes;
use hashbrown::{HashMap, HashSet};
use parking_lot::Mutex;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// The options of `CLIENT TRACKING ON`.
#[derive(Default, Clone, Copy, Debug)]
pub struct Options {
    pub bcast: bool,
    pub optin: bool,
    pub optout: bool,
    pub noloop: bool,
}

/// One client with tracking on.
struct Tracker {
    handle: Arc<ClientHandle>,
    /// `REDIRECT` id (0: none) and the client it named when tracking was turned on; `None`
    /// once it went away.
    redirect: u64,
    redirect_to: Option<Arc<ClientHandle>>,
    opts: Options,
    /// `CLIENT CACHING yes` (OPTIN) / `no` (OPTOUT) given for the next command.
    caching: bool,
    /// The redirect target went away (`broken_redirect`).
    broken: bool,
    /// BCAST prefixes.
    prefixes: BTreeSet<Bytes>,
    /// The declared keys of the script this client runs: a read inside it remembers them
    /// (Redis tracks a script's keys when it calls a read-only command).
    script_keys: Option<Vec<Bytes>>,
}

/// A BCAST prefix: the keys changed under it since the last broadcast (with the id of the
/// client that changed each last, for NOLOOP) and its subscribers.
#[derive(Default)]
struct Prefix {
    keys: BTreeMap<Bytes, Option<u64>>,
    clients: BTreeSet<u64>,
}

#[derive(Default)]
struct Inner {
    table: HashMap<Bytes, HashSet<u64>>,
    /// Ids across the table (INFO `tracking_total_items`).
    items: usize,
    trackers: HashMap<u64, Tracker>,
    prefixes: BTreeMap<Bytes, Prefix>,
    /// Some prefix holds keys not broadcast yet.
    bcast_pending: bool,
}

/// The tracking state of the server (one per `Server`).
pub struct Tracking {
    /// Clients with tracking on: 0 lets every hook return after this one load.
    clients_on: AtomicUsize,
    /// Of those, the ones in the default mode (reads are remembered only for them), the
    /// ones with `CLIENT CACHING` given, and the ones running a script: while 0, the
    /// per-command steps that concern them take no lock.
    default_mode: AtomicUsize,
    caching_given: AtomicUsize,
    in_script: AtomicUsize,
    /// Keys in the table, readable without the lock (the limit check before each command).
    keys_len: AtomicUsize,
    /// `tracking-table-max-keys` (0: no limit).
    max_keys: AtomicUsize,
    /// A BCAST prefix holds keys not sent yet (so the end of every command need not lock).
    bcast_due: AtomicBool,
    inner: Mutex<Inner>,
}

impl Default for Tracking {
    fn default() -> Self {
        Tracking {
            clients_on: AtomicUsize::new(0),
            default_mode: AtomicUsize::new(0),
            caching_given: AtomicUsize::new(0),
            in_script: AtomicUsize::new(0),
            keys_len: AtomicUsize::new(0),
            max_keys: AtomicUsize::new(1_000_000),
            bcast_due: AtomicBool::new(false),
            inner: Mutex::new(Inner::default()),
        }
    }
}

/// What `CLIENT TRACKINGINFO` shows.
pub struct TrackingInfo {
    pub flags: Vec<&'static str>,
    pub redirect: i64,
    pub prefixes: Vec<Bytes>,
}

/// The command running on this thread, for NOLOOP and for the order of its own messages.
struct Scope {
    client: u64,
    depth: u32,
    /// The command itself runs (before: the checks before it, where eviction happens).
    running: bool,
    /// Messages for `client` made before its command ran, written before its reply.
    before: Vec<Outgoing>,
}

thread_local! {
    static SCOPE: RefCell<Option<Scope>> = const { RefCell::new(None) };
    /// Set by an expiry or eviction for the `modified` call that follows it: the change was
    /// made by the server, not by the running client (Redis passes a NULL client).
    static BY_SERVER: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Ends a scope begun by [`Tracking::command`] or [`Tracking::executing`]; the outermost one
/// broadcasts the BCAST keys its command changed.
pub struct ScopeGuard<'a> {
    tracking: &'a Tracking,
}

impl Drop for ScopeGuard<'_> {
    fn drop(&mut self) {
        let outer = SCOPE.with(|s| {
            let mut s = s.borrow_mut();
            match s.as_mut() {
                Some(sc) if sc.depth > 1 => {
                    sc.depth -= 1;
                    false
                }
                _ => {
                    *s = None;
                    true
                }
            }
        });
        if outer {
            self.tracking.broadcast();
        }
    }
}

/// Messages for the current client made before its command ran (eviction, the table's
/// limit): the dispatcher writes them before the reply, as Redis does.
pub fn take_before() -> Vec<Outgoing> {
    SCOPE.with(|s| {
        s.borrow_mut()
            .as_mut()
            .map(|sc| std::mem::take(&mut sc.before))
            .unwrap_or_default()
    })
}

fn current() -> Option<u64> {
    SCOPE.with(|s| s.borrow().as_ref().map(|sc| sc.client))
}

/// Where a message goes: the current client before its command ran (`before`), else its
/// recipient's outbox.
fn send(to: &Arc<ClientHandle>, msg: Outgoing) {
    let held = SCOPE.with(|s| {
        let mut s = s.borrow_mut();
        match s.as_mut() {
            Some(sc) if sc.client == to.id && !sc.running => {
                sc.before.push(msg);
                None
            }
            _ => Some(msg),
        }
    });
    if let Some(msg) = held {
        to.outbox.push(msg);
        to.wake();
    }
}

fn resp3(h: &ClientHandle) -> bool {
    h.meta.lock().resp >= 3
}

/// Prefix overlap as Redis's `stringCheckPrefix`: one is a prefix of the other.
fn overlaps(a: &[u8], b: &[u8]) -> bool {
    let n = a.len().min(b.len());
    a[..n] == b[..n]
}

impl Inner {
    /// Sends `keys` (None: every key, after a flush) to tracker `id` as Redis's
    /// `sendTrackingMessage`.
    fn deliver(&mut self, id: u64, keys: Option<Vec<Bytes>>) {
        let Some(t) = self.trackers.get_mut(&id) else {
            return;
        };
        let (to, redirected) = if t.redirect != 0 {
            match &t.redirect_to {
                Some(h) if !h.is_killed() => (h.clone(), true),
                _ => {
                    t.broken = true;
                    t.redirect_to = None;
                    if resp3(&t.handle) {
                        send(&t.handle, Outgoing::RedirBroken(t.redirect));
                    }
                    return;
                }
            }
        } else {
            (t.handle.clone(), false)
        };
        let as_message = if resp3(&to) {
            false
        } else if redirected && to.is_pubsub() {
            true
        } else {
            // A RESP2 connection cannot take a push on its own connection.
            return;
        };
        send(&to, Outgoing::Invalidate { keys, as_message });
    }

    /// Redis's `trackingInvalidateKey`: the clients that may cache `key` hear it changed
    /// and it leaves the table; with `bcast`, it is also queued for the prefixes it is
    /// under. `writer` made the change (None: the server). `bcast` false is the table's
    /// limit: the key did not change, so NOLOOP does not hold it back either.
    fn invalidate(&mut self, key: &[u8], writer: Option<u64>, bcast: bool) {
        if bcast && !self.prefixes.is_empty() {
            for (p, state) in self.prefixes.iter_mut() {
                if key.starts_with(p) {
                    state.keys.insert(Bytes::copy_from_slice(key), writer);
                    self.bcast_pending = true;
                }
            }
        }
        let Some(ids) = self.table.remove(key) else {
            return;
        };
        self.items -= ids.len();
        let current = if bcast { current() } else { None };
        for id in ids {
            let Some(t) = self.trackers.get(&id) else {
                continue;
            };
            // Keys remembered before a switch to BCAST are not sent.
            if t.opts.bcast || (t.opts.noloop && current == Some(id)) {
                continue;
            }
            self.deliver(id, Some(vec![Bytes::copy_from_slice(key)]));
        }
    }

    fn remove_prefixes(&mut self, id: u64, prefixes: &BTreeSet<Bytes>) {
        for p in prefixes {
            if let Some(state) = self.prefixes.get_mut(p) {
                state.clients.remove(&id);
                if state.clients.is_empty() {
                    self.prefixes.remove(p);
                }
            }
        }
    }
}

impl Tracking {
    /// Whether any client tracks (the one check every hook makes first).
    #[inline]
    pub fn on(&self) -> bool {
        self.clients_on.load(Ordering::Acquire) > 0
    }

    /// INFO: `tracking_clients`, `tracking_total_keys`, `tracking_total_items`,
    /// `tracking_total_prefixes`.
    pub fn info(&self) -> (usize, usize, usize, usize) {
        let g = self.inner.lock();
        (
            self.clients_on.load(Ordering::Relaxed),
            g.table.len(),
            g.items,
            g.prefixes.len(),
        )
    }

    /// `CLIENT TRACKING ON`, with Redis's checks in its order; the redirect target was
    /// found by the caller.
    pub fn enable(
        &self,
        handle: &Arc<ClientHandle>,
        redirect: Option<Arc<ClientHandle>>,
        opts: Options,
        prefixes: Vec<Bytes>,
    ) -> Result<(), String> {
        let mut g = self.inner.lock();
        let id = handle.id;
        if !opts.bcast && !prefixes.is_empty() {
            return Err("ERR PREFIX option requires BCAST mode to be enabled".into());
        }
        if let Some(t) = g.trackers.get(&id) {
            if t.opts.bcast != opts.bcast {
                return Err("ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.".into());
            }
        }
        if opts.bcast && (opts.optin || opts.optout) {
            return Err("ERR OPTIN and OPTOUT are not compatible with BCAST".into());
        }
        if opts.optin && opts.optout {
            return Err("ERR You can't specify both OPTIN mode and OPTOUT mode".into());
        }
        if let Some(t) = g.trackers.get(&id) {
            if (opts.optin && t.opts.optout) || (opts.optout && t.opts.optin) {
                return Err("ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.".into());
            }
        }
        if opts.bcast {
            let existing = g.trackers.get(&id).map(|t| &t.prefixes);
            for (i, p) in prefixes.iter().enumerate() {
                if let Some(e) = existing.and_then(|e| e.iter().find(|e| overlaps(e, p))) {
                    return Err(format!(
                        "ERR Prefix '{}' overlaps with an existing prefix '{}'. Prefixes for a single client must not overlap.",
                        String::from_utf8_lossy(p),
                        String::from_utf8_lossy(e)
                    ));
                }
                if let Some(o) = prefixes[i + 1..].iter().find(|o| overlaps(p, o)) {
                    return Err(format!(
                        "ERR Prefix '{}' overlaps with another provided prefix '{}'. Prefixes for a single client must not overlap.",
                        String::from_utf8_lossy(p),
                        String::from_utf8_lossy(o)
                    ));
                }
            }
        }
        let redirect_id = redirect.as_ref().map_or(0, |h| h.id);
        let t = match g.trackers.entry(id) {
            hashbrown::hash_map::Entry::Occupied(o) => o.into_mut(),
            hashbrown::hash_map::Entry::Vacant(v) => {
                self.clients_on.fetch_add(1, Ordering::AcqRel);
                if !opts.bcast {
                    self.default_mode.fetch_add(1, Ordering::AcqRel);
                }
                v.insert(Tracker {
                    handle: handle.clone(),
                    redirect: 0,
                    redirect_to: None,
                    opts: Options::default(),
                    caching: false,
                    broken: false,
                    prefixes: BTreeSet::new(),
                    script_keys: None,
                })
            }
        };
        t.redirect = redirect_id;
        t.redirect_to = redirect;
        t.broken = false;
        t.opts = opts;
        if opts.bcast {
            let mut wanted = prefixes;
            if wanted.is_empty() {
                wanted.push(Bytes::new());
            }
            let mut added = Vec::new();
            for p in wanted {
                if t.prefixes.insert(p.clone()) {
                    added.push(p);
                }
            }
            for p in added {
                g.prefixes.entry(p).or_default().clients.insert(id);
            }
        }
        Ok(())
    }

    /// `CLIENT TRACKING OFF`, RESET, and a client that goes away (Redis's `disableTracking`).
    pub fn disable(&self, id: u64) {
        if !self.on() {
            return;
        }
        let mut g = self.inner.lock();
        if let Some(t) = g.trackers.remove(&id) {
            g.remove_prefixes(id, &t.prefixes);
            if !t.opts.bcast {
                self.default_mode.fetch_sub(1, Ordering::AcqRel);
            }
            if t.caching {
                self.caching_given.fetch_sub(1, Ordering::AcqRel);
            }
            if t.script_keys.is_some() {
                self.in_script.fetch_sub(1, Ordering::AcqRel);
            }
            if self.clients_on.fetch_sub(1, Ordering::AcqRel) == 1 {
                // Nobody tracks: writes stop looking at the table (one load), so what it
                // holds could never be cleaned; every id in it is of a client that turned
                // tracking off or left, which Redis would skip anyway.
                g.table = HashMap::new();
                g.items = 0;
                self.keys_len.store(0, Ordering::Relaxed);
            }
        }
    }

    /// A client closed (or is closing: QUIT): its tracking ends, and the clients that
    /// redirect to it find their redirect broken at their next invalidation.
    pub fn client_closed(&self, id: u64) {
        if !self.on() {
            return;
        }
        self.disable(id);
        let mut g = self.inner.lock();
        for t in g.trackers.values_mut() {
            if t.redirect == id {
                t.redirect_to = None;
            }
        }
    }

    /// `CLIENT CACHING yes|no`.
    pub fn caching(&self, id: u64, yes: bool) -> Result<(), &'static str> {
        let mut g = self.inner.lock();
        let Some(t) = g.trackers.get_mut(&id) else {
            return Err("ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled");
        };
        if yes && !t.opts.optin {
            return Err(
                "ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.",
            );
        }
        if !yes && !t.opts.optout {
            return Err(
                "ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.",
            );
        }
        if !t.caching {
            t.caching = true;
            self.caching_given.fetch_add(1, Ordering::AcqRel);
        }
        Ok(())
    }

    /// `CLIENT GETREDIR`: the redirect id, 0 without one, -1 with tracking off.
    pub fn redirect_of(&self, id: u64) -> i64 {
        if !self.on() {
            return -1;
        }
        self.inner
            .lock()
            .trackers
            .get(&id)
            .map_or(-1, |t| t.redirect as i64)
    }

    /// `CLIENT TRACKINGINFO`.
    pub fn info_of(&self, id: u64) -> TrackingInfo {
        let g = self.inner.lock();
        let Some(t) = g.trackers.get(&id) else {
            return TrackingInfo {
                flags: vec!["off"],
                redirect: -1,
                prefixes: Vec::new(),
            };
        };
        let mut flags = vec!["on"];
        if t.opts.bcast {
            flags.push("bcast");
        }
        if t.opts.optin {
            flags.push("optin");
            if t.caching {
                flags.push("caching-yes");
            }
        }
        if t.opts.optout {
            flags.push("optout");
            if t.caching {
                flags.push("caching-no");
            }
        }
        if t.opts.noloop {
            flags.push("noloop");
        }
        if t.broken {
            flags.push("broken_redirect");
        }
        TrackingInfo {
            flags,
            redirect: t.redirect as i64,
            prefixes: t.prefixes.iter().cloned().collect(),
        }
    }

    /// CLIENT LIST's tracking letters (`t`, `R` broken redirect, `B` BCAST) and `redir`.
    pub fn list_fields(&self, id: u64) -> (&'static str, i64) {
        if !self.on() {
            return ("", -1);
        }
        let g = self.inner.lock();
        match g.trackers.get(&id) {
            None => ("", -1),
            Some(t) => {
                let letters = match (t.broken, t.opts.bcast) {
                    (false, false) => "t",
                    (true, false) => "tR",
                    (false, true) => "tB",
                    (true, true) => "tRB",
                };
                (letters, t.redirect as i64)
            }
        }
    }

    /// The start of a command from a connection: the scope that makes this client the
    /// current one, the end of the script keys of its previous script, and the table's
    /// limit (Redis checks it before every command).
    pub fn command(&self, client: u64) -> Option<ScopeGuard<'_>> {
        if !self.on() {
            return None;
        }
        let guard = self.enter(client, false);
        BY_SERVER.with(|f| f.set(false));
        self.script_ended(client);
        self.enforce_limit();
        Some(guard)
    }

    /// The handler of a command is about to run (also a script's commands, on the script
    /// thread, under their caller's id).
    pub fn executing(&self, client: u64) -> Option<ScopeGuard<'_>> {
        if !self.on() {
            return None;
        }
        Some(self.enter(client, true))
    }

    fn enter(&self, client: u64, running: bool) -> ScopeGuard<'_> {
        SCOPE.with(|s| {
            let mut s = s.borrow_mut();
            match s.as_mut() {
                Some(sc) => {
                    sc.depth += 1;
                    sc.running |= running;
                }
                None => {
                    *s = Some(Scope {
                        client,
                        depth: 1,
                        running,
                        before: Vec::new(),
                    })
                }
            }
        });
        ScopeGuard { tracking: self }
    }

    /// The end of a command from a connection: `CLIENT CACHING` applied to this one
    /// command (or transaction), as Redis clears the flag after any command but CLIENT's
    /// and outside MULTI.
    pub fn command_done(&self, client: u64, was_client_cmd: bool, in_multi: bool) {
        if was_client_cmd || in_multi || self.caching_given.load(Ordering::Acquire) == 0 {
            return;
        }
        let mut g = self.inner.lock();
        if let Some(t) = g.trackers.get_mut(&client) {
            if t.caching {
                t.caching = false;
                self.caching_given.fetch_sub(1, Ordering::AcqRel);
            }
        }
    }

    /// A script command is about to run for `client`: a read-only command inside it will
    /// remember `keys`, the script's declared keys.
    pub fn script_starts(&self, client: u64, keys: Vec<Bytes>) {
        if self.default_mode.load(Ordering::Acquire) == 0 {
            return;
        }
        let mut g = self.inner.lock();
        if let Some(t) = g.trackers.get_mut(&client) {
            if !t.opts.bcast {
                if t.script_keys.is_none() {
                    self.in_script.fetch_add(1, Ordering::AcqRel);
                }
                t.script_keys = Some(keys);
            }
        }
    }

    /// The script `client` ran inline (inside EXEC) is over: later reads in the
    /// transaction remember their own keys.
    pub fn script_ended(&self, client: u64) {
        if self.in_script.load(Ordering::Acquire) == 0 {
            return;
        }
        let mut g = self.inner.lock();
        if let Some(t) = g.trackers.get_mut(&client) {
            if t.script_keys.take().is_some() {
                self.in_script.fetch_sub(1, Ordering::AcqRel);
            }
        }
    }

    /// `client` read `keys` (Redis's `trackingRememberKeys`); `in_script`: the read was made
    /// by a script, which remembers the script's declared keys instead.
    pub fn remember<'k>(
        &self,
        client: u64,
        keys: impl IntoIterator<Item = &'k [u8]>,
        in_script: bool,
    ) {
        // BCAST clients remember nothing: only default-mode ones cost a lock per read.
        if self.default_mode.load(Ordering::Acquire) == 0 {
            return;
        }
        let mut g = self.inner.lock();
        let g = &mut *g;
        let Some(t) = g.trackers.get(&client) else {
            return;
        };
        if t.opts.bcast || (t.opts.optin && !t.caching) || (t.opts.optout && t.caching) {
            return;
        }
        let script: Option<Vec<Bytes>> = if in_script {
            t.script_keys.clone()
        } else {
            None
        };
        let mut add = |k: &[u8]| {
            let ids = match g.table.get_mut(k) {
                Some(ids) => ids,
                None => g.table.entry(Bytes::copy_from_slice(k)).or_default(),
            };
            if ids.insert(client) {
                g.items += 1;
            }
        };
        match script {
            Some(keys) => keys.iter().for_each(|k| add(k)),
            None => keys.into_iter().for_each(add),
        }
        self.keys_len.store(g.table.len(), Ordering::Relaxed);
    }

    /// A key (or a collection) changed: Redis's `signalModifiedKey` → `trackingInvalidateKey`.
    #[inline]
    pub fn key_changed(&self, key: &[u8]) {
        if !self.on() {
            return;
        }
        let by_server = BY_SERVER.with(|f| f.replace(false));
        let writer = if by_server { None } else { current() };
        let mut g = self.inner.lock();
        g.invalidate(key, writer, true);
        self.keys_len.store(g.table.len(), Ordering::Relaxed);
        let pending = g.bcast_pending;
        if pending {
            self.bcast_due.store(true, Ordering::Release);
        }
        drop(g);
        // Outside a command (active expiry, the TTL monitor) nothing else would send them.
        if pending && current().is_none() {
            self.broadcast();
        }
    }

    /// The next `key_changed` on this thread is an expiry or an eviction (made by the
    /// server, not by the client whose command runs).
    #[inline]
    pub fn by_server(&self) {
        if self.on() {
            BY_SERVER.with(|f| f.set(true));
        }
    }

    /// FLUSHALL / FLUSHDB: every tracking client hears that every key is invalid (a null),
    /// and the table is emptied (Redis's `trackingInvalidateKeysOnFlush`).
    pub fn flushed(&self) {
        if !self.on() {
            return;
        }
        let mut g = self.inner.lock();
        let ids: Vec<u64> = g.trackers.keys().copied().collect();
        for id in ids {
            g.deliver(id, None);
        }
        g.table = HashMap::new();
        g.items = 0;
        self.keys_len.store(0, Ordering::Relaxed);
    }

    /// `tracking-table-max-keys` changed (applied at once, and before every command).
    pub fn set_max_keys(&self, n: u64) {
        self.max_keys
            .store(usize::try_from(n).unwrap_or(usize::MAX), Ordering::Relaxed);
        self.enforce_limit();
    }

    /// Past `tracking-table-max-keys`, keys leave the table until it is back at the limit,
    /// each sending its invalidations as if it changed (Redis's `trackingLimitUsedSlots`;
    /// Redis evicts random keys, a growing effort per call; here every key over the limit
    /// goes at once, in the table's order).
    pub fn enforce_limit(&self) {
        let max = self.max_keys.load(Ordering::Relaxed);
        if max == 0 || self.keys_len.load(Ordering::Relaxed) <= max {
            return;
        }
        let mut g = self.inner.lock();
        let excess = g.table.len().saturating_sub(max);
        let victims: Vec<Bytes> = g.table.keys().take(excess).cloned().collect();
        for k in victims {
            g.invalidate(&k, None, false);
        }
        self.keys_len.store(g.table.len(), Ordering::Relaxed);
    }

    /// Sends each prefix's changed keys to its subscribers (Redis's
    /// `trackingBroadcastInvalidationMessages`): one message per prefix and client, without
    /// the keys a NOLOOP client changed itself.
    pub fn broadcast(&self) {
        if !self.bcast_due.swap(false, Ordering::AcqRel) {
            return;
        }
        let mut guard = self.inner.lock();
        let g = &mut *guard;
        if !g.bcast_pending {
            return;
        }
        g.bcast_pending = false;
        let mut sends: Vec<(u64, Vec<Bytes>)> = Vec::new();
        for state in g.prefixes.values_mut() {
            if state.keys.is_empty() {
                continue;
            }
            let keys = std::mem::take(&mut state.keys);
            for &id in &state.clients {
                let noloop = g.trackers.get(&id).is_some_and(|t| t.opts.noloop);
                let list: Vec<Bytes> = keys
                    .iter()
                    .filter(|(_, w)| !(noloop && **w == Some(id)))
                    .map(|(k, _)| k.clone())
                    .collect();
                sends.push((id, list));
            }
        }
        for (id, keys) in sends {
            if !keys.is_empty() {
                g.deliver(id, Some(keys));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::overlaps;

    #[test]
    fn prefixes_overlap_when_one_starts_the_other() {
        assert!(overlaps(b"FOO", b"FOOBAR"));
        assert!(overlaps(b"FOOBAR", b"FOO"));
        assert!(overlaps(b"", b"x"));
        assert!(!overlaps(b"FOO", b"BAR"));
    }
}
