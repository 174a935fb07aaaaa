//! Change streams: how a collection's changes reach its Redis stream.
//!
//! A change is queued on the collection's feed (`documents::changes::ChangeFeed`, one FIFO
//! per collection) under the shard lock that makes it, by the same call that reports it to
//! the hooks. Whoever made it then appends the queue to the stream after releasing its
//! shard locks and before replying: a command when it is done with the collection (`Coll`'s
//! drop), the TTL monitor after each batch, `DOC.DROP`/`DOC.RENAME` after their critical
//! section. The append takes the feed's append lock, then the stream's shard lock, and is
//! never made under a document shard's lock, so the ascending shard order is never broken
//! (the stream's shard may be lower than the document's).

use super::{Change, ChangeFeed};
use crate::documents::changes::{Op, Payload, Pending};
use crate::documents::{codec, json};
use crate::store::stream::{StreamId, StreamValue, Trim};
use crate::store::Store;
use bson::{Bson, RawDocument};
use bytes::Bytes;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// The `_id` of a stored document (`null` if it has none, which a stored one always has).
fn id_of(doc: &RawDocument) -> Bson {
    doc.get("_id")
        .ok()
        .flatten()
        .and_then(|v| Bson::try_from(v).ok())
        .unwrap_or(Bson::Null)
}

impl Store {
    /// Queues `change` on `feed` if the collection has a change stream; whether it did.
    /// Called under the shard lock of the change.
    pub(crate) fn queue_change(
        &self,
        feed: &ChangeFeed,
        db: usize,
        collection: &str,
        change: Change<'_>,
    ) -> bool {
        // While the journal is replayed, the stream's own records (below) bring its
        // entries back with their IDs: the replayed changes must not append them again. So
        // does a master's stream (or a slot migration's source's) to what applies it.
        if crate::store::journal::loading() || crate::store::expiry::from_master() {
            return false;
        }
        let (op, doc) = match change {
            Change::Insert(d) => (Op::Insert, d),
            Change::Update(d) => (Op::Update, d),
            Change::Replace(d) => (Op::Replace, d),
            Change::Delete(d) => {
                return feed.push(db, collection, Op::Delete, || Payload::Id(id_of(d)));
            }
            Change::Expire(id) => {
                return feed.push(db, collection, Op::Expire, || Payload::Id(id.clone()));
            }
        };
        feed.push(db, collection, op, || Payload::Doc(doc.to_owned()))
    }

    /// Appends every change queued on `feed` to its stream, in order. Never called under a
    /// shard lock. When it returns, every change queued before the call is in the stream
    /// (or counted as lost, when the key holds another type).
    pub fn drain_changes(&self, feed: &ChangeFeed) {
        feed.drain(|batch| {
            let mut rest = batch.as_slice();
            while let Some(first) = rest.first() {
                // Consecutive changes bound for the same stream go in one lock hold.
                let n = rest
                    .iter()
                    .take_while(|p| p.db == first.db && Arc::ptr_eq(&p.target, &first.target))
                    .count();
                let lost = self.append_entries(&rest[..n]);
                if lost > 0 {
                    feed.lost.fetch_add(lost, Ordering::Relaxed);
                }
                rest = &rest[n..];
            }
        });
    }

    /// Appends `run` (same database, same target) to the target stream as `XADD key
    /// [MAXLEN [~] n] * field value ...` would, one entry each; returns how many could not
    /// be appended.
    fn append_entries(&self, run: &[Pending]) -> u64 {
        let Some(first) = run.first() else { return 0 };
        let db = first.db;
        let target = first.target.clone();
        let key = target.stream.as_slice();
        // Encoded before the stream's lock is taken.
        let entries: Vec<Vec<Bytes>> = run.iter().map(entry_fields).collect();
        let limit = match target.maxlen {
            Some((_, true)) => {
                let per = crate::store::encoding::LIMITS
                    .stream_node_entries
                    .load(Ordering::Relaxed)
                    .saturating_mul(100);
                if per <= 0 {
                    10_000
                } else {
                    per.min(1_000_000) as u64
                }
            }
            _ => 0,
        };
        let total = entries.len() as u64;
        self.with_key(db, key, |ks, h| {
            let r = ks.write_as::<StreamValue, _>(h, key, true, |s| {
                let mut added = 0u64;
                for fields in &entries {
                    // A stream whose IDs are exhausted (XSETID to the maximum) takes no more.
                    let Some(id) = s.next_id(None) else { break };
                    s.append(id, fields);
                    journal_xadd(db, key, id, fields);
                    added += 1;
                }
                let trimmed = match target.maxlen {
                    Some((n, approx)) if added > 0 => s.trim(Trim::MaxLen(n), approx, limit),
                    _ => 0,
                };
                if trimmed > 0 {
                    journal_trim(db, key, s.first_entry().map(|e| e.0));
                }
                ((added, trimmed), added > 0)
            });
            match r {
                Ok(Some((added, trimmed))) => {
                    if added > 0 {
                        if let Some(hooks) = self.doc_hooks.get() {
                            hooks.appended(db, key, trimmed > 0);
                        }
                    }
                    total - added
                }
                // The key holds another type: the entries have nowhere to go.
                Ok(None) | Err(_) => total,
            }
        })
    }
}

/// The journal's record of an appended entry: the XADD with the ID it got, so a replay
/// rebuilds the stream with the IDs readers resume from. Under the stream's shard lock.
fn journal_xadd(db: usize, key: &[u8], id: StreamId, fields: &[Bytes]) {
    if !crate::store::journal::taking() {
        return;
    }
    let id = id.to_bytes();
    let mut argv: Vec<&[u8]> = vec![b"XADD", key, &id];
    argv.extend(fields.iter().map(|f| &f[..]));
    crate::store::journal::change_record(db, &argv);
}

/// The journal's record of a trim after an append: exact, to the first entry left (an
/// approximate trim depends on how the entries lie in blocks).
fn journal_trim(db: usize, key: &[u8], first_left: Option<StreamId>) {
    if !crate::store::journal::taking() {
        return;
    }
    match first_left {
        Some(id) => {
            let id = id.to_bytes();
            crate::store::journal::change_record(db, &[b"XTRIM", key, b"MINID", b"=", &id]);
        }
        None => {
            crate::store::journal::change_record(db, &[b"XTRIM", key, b"MAXLEN", b"=", b"0"]);
        }
    }
}

/// A change's stream entry: `op`, `ns` (`<db>.<collection>`), then `_id` (relaxed Extended
/// JSON) and `doc` (the document after the change) as the change has them, or `to` (the
/// new namespace) for a rename.
fn entry_fields(p: &Pending) -> Vec<Bytes> {
    let mut f = vec![
        Bytes::from_static(b"op"),
        Bytes::from_static(p.op.name().as_bytes()),
        Bytes::from_static(b"ns"),
        Bytes::from(format!("{}.{}", p.db, p.collection)),
    ];
    match &p.payload {
        Payload::Doc(d) => {
            f.push(Bytes::from_static(b"_id"));
            f.push(Bytes::from(codec::value_json(&id_of(d))));
            f.push(Bytes::from_static(b"doc"));
            f.push(Bytes::from(json::raw_doc_json(d).unwrap_or_default()));
        }
        Payload::Id(id) => {
            f.push(Bytes::from_static(b"_id"));
            f.push(Bytes::from(codec::value_json(id)));
        }
        Payload::To(to) => {
            f.push(Bytes::from_static(b"to"));
            f.push(Bytes::from(format!("{}.{}", p.db, to)));
        }
        Payload::None => {}
    }
    f
}
