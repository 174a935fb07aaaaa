//! The commands an AOF base file (`aof-use-rdb-preamble no`: RESP) holds for one key of a
//! snapshot: `SET key value [PXAT ms]` for a string, `RESTORE key ms payload REPLACE
//! ABSTTL` (the DUMP payload of `store::rdb`) for hashes, lists, sets and sorted sets, and
//! for a stream what Redis's `rewriteStreamObject` writes: its entries with their IDs,
//! `XSETID` with its counters, each group, consumer and pending entry (`XCLAIM … FORCE
//! JUSTID` with its delivery time and count), then `PEXPIREAT` for its deadline.

use super::aof::encode;
use super::snapshot::Item;
use crate::store::stream::{StreamId, StreamValue};
use crate::store::Value;

/// Appends the commands that re-create `it` (a `SELECT` first when `db` changes).
pub fn item(out: &mut Vec<u8>, db: &mut usize, it: &Item) {
    if it.db != *db {
        encode(out, &[b"SELECT", it.db.to_string().as_bytes()]);
        *db = it.db;
    }
    let key = it.key.as_slice();
    let at = it.deadline.map(|d| d.to_string());
    match &it.value {
        Value::Str(_) | Value::Raw(_) | Value::Int(_) => {
            let v = it.value.str_bytes().unwrap_or_default();
            match &at {
                Some(at) => encode(out, &[b"SET", key, &v, b"PXAT", at.as_bytes()]),
                None => encode(out, &[b"SET", key, &v]),
            }
        }
        Value::Stream(s) => {
            stream(out, key, s);
            if let Some(at) = &at {
                encode(out, &[b"PEXPIREAT", key, at.as_bytes()]);
            }
        }
        v => {
            let payload = crate::store::rdb::dump(v);
            let ttl = at.as_deref().unwrap_or("0");
            encode(
                out,
                &[
                    b"RESTORE",
                    key,
                    ttl.as_bytes(),
                    &payload,
                    b"REPLACE",
                    b"ABSTTL",
                ],
            );
            if let Value::Hash(h) = v {
                field_deadlines(out, key, h);
            }
        }
    }
}

/// A hash's field deadlines (Redis 7.4) after the hash itself: one `HPEXPIREAT key ms
/// FIELDS n field...` per distinct deadline. A deadline already past is written too: the
/// replay keeps it (as Redis's loading does) and the field expires when next seen.
fn field_deadlines(out: &mut Vec<u8>, key: &[u8], h: &crate::store::HashValue) {
    let mut ds = h.deadlines();
    if ds.is_empty() {
        return;
    }
    ds.sort_by_key(|&(_, d)| d);
    for group in ds.chunk_by(|a, b| a.1 == b.1) {
        let at = group[0].1.to_string();
        let n = group.len().to_string();
        let mut argv: Vec<&[u8]> = vec![b"HPEXPIREAT", key, at.as_bytes(), b"FIELDS", n.as_bytes()];
        argv.extend(group.iter().map(|&(f, _)| f));
        encode(out, &argv);
    }
}

fn stream(out: &mut Vec<u8>, key: &[u8], s: &StreamValue) {
    let last = s.last_id.to_string();
    if !s.has_entries() {
        // An empty stream still exists (with its last ID and groups): as Redis, it is
        // created with an entry 0-1 trimmed at once, and XSETID below sets its last ID (which
        // may be 0-0, which XADD would refuse).
        encode(out, &[b"XADD", key, b"MAXLEN", b"0", b"0-1", b"x", b"y"]);
    } else {
        let mut argv: Vec<Vec<u8>> = Vec::new();
        s.visit_range(
            StreamId::new(0, 0),
            StreamId::new(u64::MAX, u64::MAX),
            0,
            |id, fv| {
                argv.clear();
                argv.push(b"XADD".to_vec());
                argv.push(key.to_vec());
                argv.push(id.to_string().into_bytes());
                argv.extend(fv.iter().map(|f| f.to_vec()));
                let refs: Vec<&[u8]> = argv.iter().map(|a| a.as_slice()).collect();
                encode(out, &refs);
            },
        );
    }
    let added = s.entries_added.to_string();
    let maxdel = s.max_deleted_id.to_string();
    encode(
        out,
        &[
            b"XSETID",
            key,
            last.as_bytes(),
            b"ENTRIESADDED",
            added.as_bytes(),
            b"MAXDELETEDID",
            maxdel.as_bytes(),
        ],
    );
    for (name, g) in &s.groups {
        let gid = g.last_id.to_string();
        let read = g.entries_read.to_string();
        encode(
            out,
            &[
                b"XGROUP",
                b"CREATE",
                key,
                name,
                gid.as_bytes(),
                b"ENTRIESREAD",
                read.as_bytes(),
            ],
        );
        for cname in g.consumers.keys() {
            encode(out, &[b"XGROUP", b"CREATECONSUMER", key, name, cname]);
        }
        for (id, nack) in &g.pel {
            let id = id.to_string();
            let time = nack.delivery_time.to_string();
            let count = nack.delivery_count.to_string();
            encode(
                out,
                &[
                    b"XCLAIM",
                    key,
                    name,
                    &nack.consumer,
                    b"0",
                    id.as_bytes(),
                    b"TIME",
                    time.as_bytes(),
                    b"RETRYCOUNT",
                    count.as_bytes(),
                    b"JUSTID",
                    b"FORCE",
                ],
            );
        }
    }
}
