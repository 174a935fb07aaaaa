//! Pub/sub: the channel and pattern registry, per-client outboxes with bounded, accounted
//! memory, keyspace notifications and the MONITOR feed.
//!
//! A publisher never writes to another client's socket. It appends the message to the
//! subscriber's [`Outbox`] (a mutex-protected queue whose byte size is counted) and wakes the
//! subscriber's connection task, which drains the queue into its own output between batches.
//! The queue is bounded by `client-output-buffer-limit pubsub <hard> <soft> <seconds>`: past
//! the hard limit, or past the soft one for longer than its seconds, the client is killed and
//! its queue freed, so a subscriber that never reads costs at most about the hard limit.

use crate::state::client::ClientHandle;
use crate::state::outbox::Outgoing;
use crate::util::glob::glob_match;
use bytes::Bytes;
use hashbrown::HashMap;
use parking_lot::RwLock;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// Keyspace notification classes (`notify-keyspace-events` letters), as Redis's `NOTIFY_*`.
pub mod class {
    pub const KEYSPACE: u32 = 1 << 0; // K
    pub const KEYEVENT: u32 = 1 << 1; // E
    pub const GENERIC: u32 = 1 << 2; // g
    pub const STRING: u32 = 1 << 3; // $
    pub const LIST: u32 = 1 << 4; // l
    pub const SET: u32 = 1 << 5; // s
    pub const HASH: u32 = 1 << 6; // h
    pub const ZSET: u32 = 1 << 7; // z
    pub const EXPIRED: u32 = 1 << 8; // x (key expiry and doc.expired)
    pub const EVICTED: u32 = 1 << 9; // e
    pub const STREAM: u32 = 1 << 10; // t
    pub const KEY_MISS: u32 = 1 << 11; // m
    pub const LOADED: u32 = 1 << 12; // module loaded keys, never emitted here
    pub const MODULE: u32 = 1 << 13; // d
    pub const NEW: u32 = 1 << 14; // n

    /// Parses a normalized flags string (as `config::parse_notify_classes` stores it).
    pub fn parse(s: &str) -> u32 {
        let mut f = 0;
        for c in s.chars() {
            f |= match c {
                'A' => {
                    GENERIC
                        | STRING
                        | LIST
                        | SET
                        | HASH
                        | ZSET
                        | EXPIRED
                        | EVICTED
                        | STREAM
                        | MODULE
                }
                'K' => KEYSPACE,
                'E' => KEYEVENT,
                'g' => GENERIC,
                '$' => STRING,
                'l' => LIST,
                's' => SET,
                'h' => HASH,
                'z' => ZSET,
                'x' => EXPIRED,
                'e' => EVICTED,
                't' => STREAM,
                'm' => KEY_MISS,
                'd' => MODULE,
                'n' => NEW,
                _ => 0,
            };
        }
        f
    }
}

/// `client-output-buffer-limit` for one client class, cached from the config.
#[derive(Default)]
pub struct Limit {
    hard: AtomicU64,
    soft: AtomicU64,
    soft_secs: AtomicU64,
}

impl Limit {
    fn set(&self, [hard, soft, secs]: [u64; 3]) {
        self.hard.store(hard, Ordering::Relaxed);
        self.soft.store(soft, Ordering::Relaxed);
        self.soft_secs.store(secs, Ordering::Relaxed);
    }

    fn get(&self) -> (u64, u64, u64) {
        (
            self.hard.load(Ordering::Relaxed),
            self.soft.load(Ordering::Relaxed),
            self.soft_secs.load(Ordering::Relaxed),
        )
    }
}

type Subscribers = HashMap<u64, Arc<ClientHandle>>;

/// The registry: channels and patterns to their subscribers, the MONITOR clients, and the
/// cached notification flags and output limits.
#[derive(Default)]
pub struct PubSub {
    channels: RwLock<HashMap<Bytes, Subscribers>>,
    patterns: RwLock<HashMap<Bytes, Subscribers>>,
    /// Shard channels (SSUBSCRIBE/SPUBLISH): a namespace of their own, never matched by
    /// patterns, as Redis 7 without cluster mode (one shard holds every slot).
    shard_channels: RwLock<HashMap<Bytes, Subscribers>>,
    /// Number of patterns with at least one subscriber (lets PUBLISH skip the pattern scan).
    pattern_count: AtomicUsize,
    monitors: RwLock<HashMap<u64, Arc<ClientHandle>>>,
    monitor_count: AtomicUsize,
    /// `notify-keyspace-events` as [`class`] bits; 0 = off.
    notify_flags: AtomicU32,
    pub normal_limit: Limit,
    pub pubsub_limit: Limit,
    /// Clients killed for exceeding their output buffer limit (INFO stats
    /// `client_output_buffer_limit_disconnections`).
    pub limit_disconnections: AtomicU64,
    /// Set by the server so limit checks can kill clients.
    epoch: std::sync::OnceLock<std::time::Instant>,
}

impl PubSub {
    pub fn new() -> PubSub {
        let p = PubSub::default();
        let _ = p.epoch.set(std::time::Instant::now());
        p
    }

    /// The limits of the class a client's replies count in (Redis's `getClientType`):
    /// pubsub while it is subscribed, else normal.
    fn reply_limits(&self, client: &ClientHandle) -> (u64, u64, u64) {
        if client.is_pubsub() {
            self.pubsub_limit.get()
        } else {
            self.normal_limit.get()
        }
    }

    /// Counts and logs a client past its output-buffer limit; the caller closes it.
    fn closing(&self, client: &ClientHandle, bytes: u64) {
        self.limit_disconnections.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(
            client = client.id,
            bytes,
            "Client scheduled to be closed ASAP for overcoming of output buffer limits."
        );
    }

    /// Whether an output-buffer limit applies to the client's class.
    pub fn output_limit_applies(&self, client: &ClientHandle) -> bool {
        let (hard, soft, _) = self.reply_limits(client);
        hard > 0 || soft > 0
    }

    /// Whether a client with `pending` bytes of output not yet written is past its
    /// output-buffer limit (Redis's `checkClientOutputBufferLimits`): the hard limit at once,
    /// the soft one once held for its seconds. Counted and logged when true: the caller
    /// closes the client.
    pub fn output_over_limit(&self, client: &ClientHandle, pending: usize) -> bool {
        let (hard, soft, secs) = self.reply_limits(client);
        if hard == 0 && soft == 0 {
            return false;
        }
        let pending = pending as u64;
        let over_hard = hard > 0 && pending >= hard;
        let over_soft = client
            .outbox
            .over_soft_limit(soft > 0 && pending >= soft, secs, || self.now_ms());
        if over_hard || over_soft {
            self.closing(client, pending);
            return true;
        }
        false
    }

    fn now_ms(&self) -> u64 {
        self.epoch
            .get()
            .map(|e| e.elapsed().as_millis() as u64)
            .unwrap_or(0)
            .max(1)
    }

    /// Caches the live settings this module reads (called at start and on CONFIG SET).
    pub fn configure(&self, notify: &str, output_limits: &str) {
        self.notify_flags
            .store(class::parse(notify), Ordering::Relaxed);
        let words: Vec<&str> = output_limits.split_whitespace().collect();
        for chunk in words.chunks(4) {
            if chunk.len() != 4 {
                continue;
            }
            let nums = [chunk[1], chunk[2], chunk[3]].map(|w| w.parse::<u64>().unwrap_or(0));
            match chunk[0] {
                "normal" => self.normal_limit.set(nums),
                "pubsub" => self.pubsub_limit.set(nums),
                _ => {}
            }
        }
    }

    // ----- subscriptions -------------------------------------------------------------

    /// Adds a subscription; false if the client already had it.
    pub fn subscribe(&self, client: &Arc<ClientHandle>, channel: &Bytes, pattern: bool) -> bool {
        let map = if pattern {
            &self.patterns
        } else {
            &self.channels
        };
        let mut m = map.write();
        let subs = m.entry(channel.clone()).or_default();
        let fresh = subs.insert(client.id, client.clone()).is_none();
        if pattern && subs.len() == 1 && fresh {
            self.pattern_count.fetch_add(1, Ordering::Relaxed);
        }
        fresh
    }

    /// Adds a shard-channel subscription (SSUBSCRIBE); false if the client already had it.
    pub fn ssubscribe(&self, client: &Arc<ClientHandle>, channel: &Bytes) -> bool {
        self.shard_channels
            .write()
            .entry(channel.clone())
            .or_default()
            .insert(client.id, client.clone())
            .is_none()
    }

    /// Removes a shard-channel subscription; false if the client did not have it.
    pub fn sunsubscribe(&self, client_id: u64, channel: &[u8]) -> bool {
        let mut m = self.shard_channels.write();
        let Some(subs) = m.get_mut(channel) else {
            return false;
        };
        let had = subs.remove(&client_id).is_some();
        if subs.is_empty() {
            m.remove(channel);
        }
        had
    }

    /// Delivers `payload` as an `smessage` to the subscribers of a shard channel (SPUBLISH);
    /// patterns never see shard channels. Returns the number of receivers.
    pub fn spublish(&self, channel: &[u8], payload: &[u8]) -> usize {
        let Some(subs) = self
            .shard_channels
            .read()
            .get(channel)
            .map(|s| s.values().cloned().collect::<Vec<_>>())
        else {
            return 0;
        };
        let channel = Bytes::copy_from_slice(channel);
        let payload = Bytes::copy_from_slice(payload);
        subs.iter()
            .map(|c| {
                self.push(
                    c,
                    Outgoing::SMessage {
                        channel: channel.clone(),
                        payload: payload.clone(),
                    },
                    true,
                ) as usize
            })
            .sum()
    }

    /// Tells each subscriber of a shard channel of `slot` (by `slot_of`) that the slot left
    /// this node's shard; its connection unsubscribes it (see `Outgoing::ShardSlotLost`).
    pub fn shard_slot_lost(&self, slot: u16, slot_of: impl Fn(&[u8]) -> u16) {
        let mut told: hashbrown::HashSet<u64> = hashbrown::HashSet::new();
        let subs: Vec<Arc<ClientHandle>> = self
            .shard_channels
            .read()
            .iter()
            .filter(|(c, _)| slot_of(c) == slot)
            .flat_map(|(_, s)| s.values().cloned())
            .filter(|c| told.insert(c.id))
            .collect();
        for c in subs {
            self.push(&c, Outgoing::ShardSlotLost(slot), true);
        }
    }

    /// Active shard channels, optionally matching a glob (PUBSUB SHARDCHANNELS).
    pub fn shard_channel_names(&self, pattern: Option<&[u8]>) -> Vec<Bytes> {
        self.shard_channels
            .read()
            .keys()
            .filter(|c| pattern.is_none_or(|p| glob_match(p, c, false)))
            .cloned()
            .collect()
    }

    /// Subscribers of a shard channel (PUBSUB SHARDNUMSUB).
    pub fn shard_numsub(&self, channel: &[u8]) -> usize {
        self.shard_channels
            .read()
            .get(channel)
            .map_or(0, |s| s.len())
    }

    /// A client's channels (shard channels included) and patterns (ACL SETUSER checks them
    /// when it narrows a user's channels; rare, so a walk of the maps).
    pub fn subscriptions_of(&self, client_id: u64) -> (Vec<Bytes>, Vec<Bytes>) {
        let of = |map: &RwLock<HashMap<Bytes, Subscribers>>| {
            map.read()
                .iter()
                .filter(|(_, subs)| subs.contains_key(&client_id))
                .map(|(c, _)| c.clone())
                .collect()
        };
        let mut channels: Vec<Bytes> = of(&self.channels);
        channels.extend(of(&self.shard_channels));
        (channels, of(&self.patterns))
    }

    /// Removes a subscription; false if the client did not have it.
    pub fn unsubscribe(&self, client_id: u64, channel: &[u8], pattern: bool) -> bool {
        let map = if pattern {
            &self.patterns
        } else {
            &self.channels
        };
        let mut m = map.write();
        let Some(subs) = m.get_mut(channel) else {
            return false;
        };
        let had = subs.remove(&client_id).is_some();
        if subs.is_empty() {
            m.remove(channel);
            if pattern {
                self.pattern_count.fetch_sub(1, Ordering::Relaxed);
            }
        }
        had
    }

    /// Delivers `payload` on `channel` to every subscriber and matching pattern; returns the
    /// number of receivers (PUBLISH's reply).
    pub fn publish(&self, channel: &[u8], payload: &[u8]) -> usize {
        let mut n = 0;
        let channel_b = Bytes::copy_from_slice(channel);
        let payload_b = Bytes::copy_from_slice(payload);
        if let Some(subs) = self.channels.read().get(channel) {
            for c in subs.values() {
                n += self.push(
                    c,
                    Outgoing::Message {
                        channel: channel_b.clone(),
                        payload: payload_b.clone(),
                    },
                    true,
                ) as usize;
            }
        }
        if self.pattern_count.load(Ordering::Relaxed) > 0 {
            for (pat, subs) in self.patterns.read().iter() {
                if !glob_match(pat, channel, false) {
                    continue;
                }
                for c in subs.values() {
                    n += self.push(
                        c,
                        Outgoing::PMessage {
                            pattern: pat.clone(),
                            channel: channel_b.clone(),
                            payload: payload_b.clone(),
                        },
                        true,
                    ) as usize;
                }
            }
        }
        n
    }

    /// Queues `msg` for `client`, enforcing its output buffer limit; false if the client is
    /// being disconnected (then nothing is queued).
    fn push(&self, client: &ClientHandle, msg: Outgoing, pubsub_class: bool) -> bool {
        if client.is_killed() {
            return false;
        }
        let ob = &client.outbox;
        let total = ob.push(msg);
        // Subscribers use the pubsub class; a MONITOR client uses the normal class, or the
        // pubsub one when normal is unlimited, so no pushed stream is ever unbounded.
        let (mut hard, mut soft, mut secs) = self.normal_limit.get();
        if pubsub_class || (hard == 0 && soft == 0) {
            (hard, soft, secs) = self.pubsub_limit.get();
        }
        let over_hard = hard > 0 && total as u64 > hard;
        let over_soft = ob.over_soft_limit(soft > 0 && total as u64 > soft, secs, || self.now_ms());
        if over_hard || over_soft {
            self.closing(client, total as u64);
            client.kill();
            ob.clear();
        } else {
            client.wake();
        }
        true
    }

    /// Forgets every subscription and the MONITOR status of a client (disconnect, RESET).
    pub fn forget_client(
        &self,
        client_id: u64,
        channels: &[Bytes],
        patterns: &[Bytes],
        shard_channels: &[Bytes],
    ) {
        for c in channels {
            self.unsubscribe(client_id, c, false);
        }
        for c in shard_channels {
            self.sunsubscribe(client_id, c);
        }
        for p in patterns {
            self.unsubscribe(client_id, p, true);
        }
        self.stop_monitor(client_id);
    }

    /// Active channels, optionally matching a glob (PUBSUB CHANNELS).
    pub fn channel_names(&self, pattern: Option<&[u8]>) -> Vec<Bytes> {
        self.channels
            .read()
            .keys()
            .filter(|c| pattern.is_none_or(|p| glob_match(p, c, false)))
            .cloned()
            .collect()
    }

    pub fn numsub(&self, channel: &[u8]) -> usize {
        self.channels.read().get(channel).map_or(0, |s| s.len())
    }

    pub fn channel_count(&self) -> usize {
        self.channels.read().len()
    }

    /// Shard channels with a subscriber (INFO `pubsubshard_channels`).
    pub fn shard_channel_count(&self) -> usize {
        self.shard_channels.read().len()
    }

    pub fn numpat(&self) -> usize {
        self.pattern_count.load(Ordering::Relaxed)
    }

    // ----- keyspace notifications -----------------------------------------------------

    /// True when events of `class` would be published at all (one atomic load).
    #[inline]
    pub fn notifies(&self, class: u32) -> bool {
        let f = self.notify_flags.load(Ordering::Relaxed);
        f & class != 0 && f & (class::KEYSPACE | class::KEYEVENT) != 0
    }

    /// Publishes a keyspace notification as Redis's `notifyKeyspaceEvent`:
    /// `__keyspace@<db>__:<key>` carrying `event` (class K) and `__keyevent@<db>__:<event>`
    /// carrying `key` (class E), when `class` is enabled. Costs one atomic load when off.
    #[inline]
    pub fn notify(&self, db: usize, class: u32, event: &str, key: &[u8]) {
        if !self.notifies(class) {
            return;
        }
        self.notify_slow(db, event, key, key, event.as_bytes());
    }

    /// The general form: the keyspace channel for `key` carries `keyspace_msg`, the keyevent
    /// channel for `event` carries `keyevent_msg`. The document layer uses it for
    /// `doc.expired` (keyevent message: the collection; keyspace message: the `_id`).
    pub fn notify_with(
        &self,
        db: usize,
        class: u32,
        event: &str,
        key: &[u8],
        keyspace_msg: &[u8],
        keyevent_msg: &[u8],
    ) {
        if !self.notifies(class) {
            return;
        }
        self.notify_slow(db, event, key, keyevent_msg, keyspace_msg);
    }

    #[cold]
    fn notify_slow(
        &self,
        db: usize,
        event: &str,
        key: &[u8],
        keyevent_msg: &[u8],
        keyspace_msg: &[u8],
    ) {
        let f = self.notify_flags.load(Ordering::Relaxed);
        if f & class::KEYSPACE != 0 {
            let mut ch = format!("__keyspace@{db}__:").into_bytes();
            ch.extend_from_slice(key);
            self.publish(&ch, keyspace_msg);
        }
        if f & class::KEYEVENT != 0 {
            let ch = format!("__keyevent@{db}__:{event}");
            self.publish(ch.as_bytes(), keyevent_msg);
        }
    }

    // ----- MONITOR ----------------------------------------------------------------------

    pub fn start_monitor(&self, client: &Arc<ClientHandle>) {
        if self
            .monitors
            .write()
            .insert(client.id, client.clone())
            .is_none()
        {
            self.monitor_count.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub fn stop_monitor(&self, client_id: u64) {
        if self.monitor_count.load(Ordering::Relaxed) == 0 {
            return;
        }
        if self.monitors.write().remove(&client_id).is_some() {
            self.monitor_count.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// True when some client is monitoring (one atomic load).
    #[inline]
    pub fn monitoring(&self) -> bool {
        self.monitor_count.load(Ordering::Relaxed) > 0
    }

    /// Sends one executed command to every monitor, in Redis's line format:
    /// `1339518083.107412 [0 127.0.0.1:60866] "keys" "*"`.
    pub fn feed_monitors(&self, db: usize, from: &str, args: &[Bytes]) {
        let now = crate::util::clock::now_us();
        let mut line = format!("{}.{:06} [{db} {from}]", now / 1_000_000, now % 1_000_000);
        for a in args {
            line.push(' ');
            crate::util::sds::repr(&mut line, a);
        }
        for c in self.monitors.read().values() {
            let _ = self.push(c, Outgoing::Monitor(line.clone()), false);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doc_expired_shape_through_notify_with() {
        let reg = crate::state::client::ClientRegistry::default();
        let addr: std::net::SocketAddr = "127.0.0.1:1".parse().unwrap();
        let c = reg.register(addr, addr);
        let ps = PubSub::new();
        ps.subscribe(
            &c,
            &Bytes::from_static(b"__keyevent@2__:doc.expired"),
            false,
        );
        ps.subscribe(&c, &Bytes::from_static(b"__keyspace@2__:sessions"), false);
        // Off: nothing queued.
        ps.notify_with(
            2,
            class::EXPIRED,
            "doc.expired",
            b"sessions",
            b"{}",
            b"sessions",
        );
        assert_eq!(c.outbox.queued_len(), 0);
        ps.configure("KEx", "pubsub 0 0 0");
        ps.notify_with(
            2,
            class::EXPIRED,
            "doc.expired",
            b"sessions",
            br#"{"$oid":"65a1"}"#,
            b"sessions",
        );
        let (got, cost) = c.outbox.drain();
        c.outbox.written(cost);
        assert_eq!(c.outbox.pending_bytes(), 0);
        let got: Vec<(Bytes, Bytes)> = got
            .into_iter()
            .map(|m| match m {
                Outgoing::Message { channel, payload } => (channel, payload),
                other => panic!("unexpected {other:?}"),
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (
                    Bytes::from_static(b"__keyspace@2__:sessions"),
                    Bytes::from_static(br#"{"$oid":"65a1"}"#)
                ),
                (
                    Bytes::from_static(b"__keyevent@2__:doc.expired"),
                    Bytes::from_static(b"sessions")
                ),
            ]
        );
    }

    #[test]
    fn soft_and_hard_output_limits_disconnect() {
        let reg = crate::state::client::ClientRegistry::default();
        let addr: std::net::SocketAddr = "127.0.0.1:1".parse().unwrap();
        let ch = Bytes::from_static(b"c");
        let payload = vec![0u8; 1000];
        // Soft limit with 0 seconds: the first message over it disconnects.
        let ps = PubSub::new();
        ps.configure("", "pubsub 0 2500 0");
        let c = reg.register(addr, addr);
        ps.subscribe(&c, &ch, false);
        assert_eq!(ps.publish(b"c", &payload), 1);
        assert_eq!(ps.publish(b"c", &payload), 1);
        assert!(!c.is_killed());
        assert_eq!(ps.publish(b"c", &payload), 1);
        assert!(c.is_killed());
        assert_eq!(c.outbox.pending_bytes(), 0, "the queue is freed at once");
        assert_eq!(
            ps.publish(b"c", &payload),
            0,
            "a dropped client receives nothing"
        );
        // Soft limit with time: being over it briefly is fine.
        let ps = PubSub::new();
        ps.configure("", "pubsub 0 1500 3600");
        let c = reg.register(addr, addr);
        ps.subscribe(&c, &ch, false);
        for _ in 0..5 {
            ps.publish(b"c", &payload);
        }
        assert!(!c.is_killed());
        // Hard limit: disconnects at once.
        let ps = PubSub::new();
        ps.configure("", "pubsub 3000 0 0");
        let c = reg.register(addr, addr);
        ps.subscribe(&c, &ch, false);
        ps.publish(b"c", &payload);
        ps.publish(b"c", &payload);
        assert!(!c.is_killed());
        ps.publish(b"c", &payload);
        assert!(c.is_killed());
        assert_eq!(ps.limit_disconnections.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn class_parse() {
        let f = class::parse("AKE");
        assert!(f & class::EXPIRED != 0 && f & class::KEYSPACE != 0);
        assert_eq!(f & class::KEY_MISS, 0);
        assert_eq!(class::parse(""), 0);
    }
}
