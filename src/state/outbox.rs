//! A client's outbox: what other clients push to it (pub/sub messages, keyspace
//! notifications, MONITOR lines), queued until its connection task writes it after its own
//! replies. Its own module because both the client state (which owns one) and the pub/sub
//! registry (which fills them) use it.

use crate::protocol::Reply;
use bytes::Bytes;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Something queued for a client's connection task. Encoded by that task, in its protocol.
#[derive(Debug)]
pub enum Outgoing {
    Message {
        channel: Bytes,
        payload: Bytes,
    },
    /// A shard channel's message (SPUBLISH): `smessage`.
    SMessage {
        channel: Bytes,
        payload: Bytes,
    },
    PMessage {
        pattern: Bytes,
        channel: Bytes,
        payload: Bytes,
    },
    /// A MONITOR line (status reply text).
    Monitor(String),
    /// Client-side caching (`state/tracking.rs`): the keys a client must drop (None: all of
    /// them, after a flush), as a RESP3 `invalidate` push or, to a RESP2 redirect target,
    /// as a message on `__redis__:invalidate`.
    Invalidate {
        keys: Option<Vec<Bytes>>,
        as_message: bool,
    },
    /// `tracking-redir-broken` with the id of the redirect target that went away.
    RedirBroken(u64),
    /// The cluster slot of some of the client's shard channels left this node's shard: the
    /// connection unsubscribes them and sends a `sunsubscribe` for each (it holds the
    /// client's own list of them; see `commands::pubsub::shard_slot_lost`).
    ShardSlotLost(u16),
}

impl Outgoing {
    /// Bytes accounted for this entry: the payload sizes plus a fixed overhead for framing
    /// and the queue slot.
    fn cost(&self) -> usize {
        const OVERHEAD: usize = 64;
        OVERHEAD
            + match self {
                Outgoing::Message { channel, payload }
                | Outgoing::SMessage { channel, payload } => channel.len() + payload.len(),
                Outgoing::PMessage {
                    pattern,
                    channel,
                    payload,
                } => pattern.len() + channel.len() + payload.len(),
                Outgoing::Monitor(s) => s.len(),
                Outgoing::Invalidate { keys, .. } => keys
                    .as_ref()
                    .map_or(0, |k| k.iter().map(|k| k.len() + 16).sum()),
                Outgoing::RedirBroken(_) | Outgoing::ShardSlotLost(_) => 0,
            }
    }

    pub fn into_reply(self) -> Reply {
        match self {
            Outgoing::Message { channel, payload } => Reply::Push(vec![
                Reply::bulk_str("message"),
                Reply::Bulk(channel),
                Reply::Bulk(payload),
            ]),
            Outgoing::SMessage { channel, payload } => Reply::Push(vec![
                Reply::bulk_str("smessage"),
                Reply::Bulk(channel),
                Reply::Bulk(payload),
            ]),
            Outgoing::PMessage {
                pattern,
                channel,
                payload,
            } => Reply::Push(vec![
                Reply::bulk_str("pmessage"),
                Reply::Bulk(pattern),
                Reply::Bulk(channel),
                Reply::Bulk(payload),
            ]),
            Outgoing::Monitor(s) => Reply::Status(s),
            Outgoing::Invalidate { keys, as_message } => {
                let keys = match keys {
                    Some(k) => Reply::Array(k.into_iter().map(Reply::Bulk).collect()),
                    None => Reply::Nil,
                };
                if as_message {
                    Reply::Push(vec![
                        Reply::bulk_str("message"),
                        Reply::bulk_str("__redis__:invalidate"),
                        keys,
                    ])
                } else {
                    Reply::Push(vec![Reply::bulk_str("invalidate"), keys])
                }
            }
            Outgoing::RedirBroken(id) => Reply::Push(vec![
                Reply::bulk_str("tracking-redir-broken"),
                Reply::Int(id as i64),
            ]),
            // Handled by the connection before it encodes (it needs the client's state).
            Outgoing::ShardSlotLost(_) => Reply::NoReply,
        }
    }
}

/// A client's queue of pushed messages. Its byte size counts what is queued plus what the
/// connection task has taken but not yet written to the socket.
#[derive(Default)]
pub struct Outbox {
    /// In arrival order (drained whole, never popped one at a time: a `Vec`, 8 bytes
    /// smaller than a `VecDeque` in every client's handle).
    queue: Mutex<Vec<Outgoing>>,
    /// Bytes queued or being written.
    bytes: AtomicUsize,
    /// Milliseconds (server clock) since when the soft limit has been exceeded; 0 = not over.
    soft_since: AtomicU64,
}

impl Outbox {
    /// Queues `msg` and returns the bytes queued or in flight, this message included.
    pub fn push(&self, msg: Outgoing) -> usize {
        let cost = msg.cost();
        // Counted under the queue lock, so a concurrent drain never subtracts bytes that
        // were not added yet.
        let mut q = self.queue.lock();
        q.push(msg);
        self.bytes.fetch_add(cost, Ordering::AcqRel) + cost
    }

    /// Redis's soft output limit: true once the outbox has been `over` the soft limit for
    /// `secs` seconds without a break (`now` in ms, read only while over).
    pub fn over_soft_limit(&self, over: bool, secs: u64, now: impl FnOnce() -> u64) -> bool {
        if !over {
            if self.soft_since.load(Ordering::Relaxed) != 0 {
                self.soft_since.store(0, Ordering::Relaxed);
            }
            return false;
        }
        let now = now();
        match self
            .soft_since
            .compare_exchange(0, now, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => secs == 0,
            Err(since) => now.saturating_sub(since) >= secs * 1000,
        }
    }

    /// Takes everything queued; the caller calls [`Outbox::written`] with the returned cost
    /// once the bytes are on the socket.
    pub fn drain(&self) -> (Vec<Outgoing>, usize) {
        // Every connection calls this after every batch: skip the lock when nothing is
        // queued or in flight. A message pushed right after this load is followed by a
        // `ClientHandle::wake`, which wakes the connection to drain it.
        if self.bytes.load(Ordering::Acquire) == 0 {
            return (Vec::new(), 0);
        }
        let items = std::mem::take(&mut *self.queue.lock());
        let cost = items.iter().map(Outgoing::cost).sum();
        (items, cost)
    }

    /// Messages queued since the last drain (or still being written).
    pub fn has_pending(&self) -> bool {
        self.bytes.load(Ordering::Acquire) > 0
    }

    pub fn written(&self, cost: usize) {
        self.bytes.fetch_sub(cost, Ordering::AcqRel);
    }

    pub fn pending_bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }

    pub fn queued_len(&self) -> usize {
        self.queue.lock().len()
    }

    pub fn clear(&self) {
        let old = std::mem::take(&mut *self.queue.lock());
        let cost: usize = old.iter().map(Outgoing::cost).sum();
        self.bytes.fetch_sub(cost, Ordering::AcqRel);
    }
}
