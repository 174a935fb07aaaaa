//! Stream IDs and the packed stream they order (src/store/stream.rs), then the stream
//! commands with IDs from the input.
//!
//! Input: one byte of block size, then operations. Each operation runs on a `StreamValue`
//! (small blocks, so entries cross block boundaries) and on a model, a `BTreeMap` from ID to
//! fields; after every operation they must hold the same entries in the same order, and
//! ranges, gets, trims and deletes must answer as the model does. Text IDs are parsed with
//! `StreamId::parse`, whose canonical rendering must parse back to the same ID. The last
//! part of the input (after a 0xFF byte) is a list of ID strings given to XADD, XRANGE,
//! XREVRANGE, XDEL, XTRIM, XSETID, XGROUP and XAUTOCLAIM on an in-process server.
#![no_main]

#[path = "../common/mod.rs"]
mod common;

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use std::collections::BTreeMap;
use std::sync::Mutex;
use tidecache::protocol::Reply;
use tidecache::store::encoding::LIMITS;
use tidecache::store::stream::{StreamId, StreamValue, Trim};

static HARNESS: Mutex<Option<common::Harness>> = Mutex::new(None);

struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn byte(&mut self) -> Option<u8> {
        let (&b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(b)
    }

    /// An ID near the interesting edges: small values, and values next to `u64::MAX`.
    fn id(&mut self) -> Option<StreamId> {
        let part = |b: u8| match b >> 6 {
            0..=2 => (b & 0x3f) as u64,
            _ => u64::MAX - (b & 0x3f) as u64,
        };
        Some(StreamId::new(part(self.byte()?), part(self.byte()?)))
    }
}

fn check_parse(text: &[u8]) {
    for missing in [0, u64::MAX] {
        if let Some((id, given)) = StreamId::parse(text, missing) {
            if !given {
                assert_eq!(id.seq, missing);
            }
            let canon = id.to_bytes();
            assert_eq!(StreamId::parse(&canon, 7), Some((id, true)), "{canon:?}");
        }
    }
}

fn model_run(ops: &[u8]) {
    let mut input = Input(ops);
    let Some(block) = input.byte() else { return };
    // A block of 1 to 8 entries (and, with the high bit, of a few hundred bytes).
    LIMITS.apply("stream-node-max-entries", 1 + (block & 7) as i64);
    LIMITS.apply(
        "stream-node-max-bytes",
        if block & 0x80 != 0 { 200 } else { 4096 },
    );
    let mut s = StreamValue::default();
    let mut model: BTreeMap<StreamId, Vec<Bytes>> = BTreeMap::new();
    let mut n = 0u64;
    while let Some(op) = input.byte() {
        match op % 6 {
            0 | 1 => {
                let Some(id) = input.id() else { break };
                // The caller's check, as XADD makes it.
                if id > s.last_id {
                    n += 1;
                    let width = (op >> 3) as usize % 40;
                    let fv = vec![
                        Bytes::from(format!("f{}", n % 3)),
                        Bytes::from(vec![b'v'; width]),
                    ];
                    s.append(id, &fv);
                    model.insert(id, fv);
                }
            }
            2 => {
                let Some(id) = input.id() else { break };
                // Mostly an ID that is there.
                let id = match input.byte() {
                    Some(k) if !model.is_empty() && k & 1 == 0 => *model
                        .keys()
                        .nth(k as usize % model.len())
                        .expect("in range"),
                    _ => id,
                };
                assert_eq!(s.delete(id), model.remove(&id).is_some(), "XDEL {id}");
            }
            3 => {
                let (Some(a), Some(b), Some(c)) = (input.id(), input.id(), input.byte()) else {
                    break;
                };
                let count = (c & 7) as usize;
                let rev = c & 8 != 0;
                let got = s.range(a, b, count, rev);
                let mut want: Vec<(StreamId, Vec<Bytes>)> = if a > b {
                    Vec::new()
                } else if rev {
                    model
                        .range(a..=b)
                        .rev()
                        .map(|(k, v)| (*k, v.clone()))
                        .collect()
                } else {
                    model.range(a..=b).map(|(k, v)| (*k, v.clone())).collect()
                };
                if count > 0 {
                    want.truncate(count);
                }
                assert_eq!(got, want, "range {a} {b} count {count} rev {rev}");
                let mut visited = Vec::new();
                s.visit_range(a, b, count, |id, _| visited.push(id));
                if !rev {
                    assert_eq!(visited, want.iter().map(|e| e.0).collect::<Vec<_>>());
                }
            }
            4 => {
                let Some(c) = input.byte() else { break };
                let max = (c & 15) as u64;
                let removed = s.trim(Trim::MaxLen(max), false, 0);
                let excess = (model.len() as u64).saturating_sub(max);
                assert_eq!(removed, excess, "XTRIM MAXLEN {max}");
                for _ in 0..excess {
                    model.pop_first();
                }
            }
            _ => {
                let Some(id) = input.id() else { break };
                let removed = s.trim(Trim::MinId(id), false, 0);
                let before = model.len();
                model.retain(|k, _| *k >= id);
                assert_eq!(removed as usize, before - model.len(), "XTRIM MINID {id}");
            }
        }
        assert_eq!(s.len(), model.len() as u64);
        assert_eq!(s.last_entry_id(), model.keys().next_back().copied());
        if let Some((&first, _)) = model.iter().next() {
            assert_eq!(s.first_id(), first);
            assert!(s.contains(first));
            assert_eq!(s.get(first).map(|e| e.0), Some(first));
        }
        let all = s.range(StreamId::MIN, StreamId::MAX, 0, false);
        assert_eq!(all.len(), model.len());
    }
}

fuzz_target!(|data: &[u8]| {
    let mut f = common::fields(data);
    let texts = if f.len() > 1 {
        f.pop().unwrap_or_default()
    } else {
        &[]
    };
    model_run(f.first().copied().unwrap_or_default());
    let ids: Vec<&[u8]> = texts.split(|&b| b == b' ').take(24).collect();
    for t in &ids {
        check_parse(t);
    }
    if ids.is_empty() {
        return;
    }
    let mut guard = HARNESS.lock().unwrap_or_else(|e| e.into_inner());
    let h = guard.get_or_insert_with(common::Harness::new);
    h.reset();
    let run = |h: &mut common::Harness, args: &[&[u8]]| {
        let args: Vec<Bytes> = args.iter().map(|a| Bytes::copy_from_slice(a)).collect();
        h.run(&args)
    };
    let id = |i: usize| ids[i % ids.len()];
    for i in 0..ids.len() {
        run(h, &[b"XADD", b"s", id(i), b"f", b"v"]);
    }
    run(h, &[b"XGROUP", b"CREATE", b"s", b"g", id(1), b"MKSTREAM"]);
    run(
        h,
        &[
            b"XREADGROUP",
            b"GROUP",
            b"g",
            b"c",
            b"COUNT",
            b"3",
            b"STREAMS",
            b"s",
            b">",
        ],
    );
    run(h, &[b"XRANGE", b"s", id(2), id(3)]);
    run(h, &[b"XREVRANGE", b"s", id(4), id(5), b"COUNT", b"2"]);
    run(h, &[b"XDEL", b"s", id(6), id(7)]);
    run(
        h,
        &[b"XPENDING", b"s", b"g", b"IDLE", b"0", id(8), id(9), b"10"],
    );
    run(h, &[b"XAUTOCLAIM", b"s", b"g", b"d", b"0", id(10)]);
    run(h, &[b"XCLAIM", b"s", b"g", b"d", b"0", id(11), b"FORCE"]);
    run(h, &[b"XACK", b"s", b"g", id(12)]);
    run(h, &[b"XTRIM", b"s", b"MINID", id(13)]);
    run(h, &[b"XREAD", b"COUNT", b"5", b"STREAMS", b"s", id(14)]);
    run(
        h,
        &[
            b"XSETID",
            b"s",
            id(15),
            b"ENTRIESADDED",
            b"100",
            b"MAXDELETEDID",
            id(16),
        ],
    );
    run(h, &[b"XGROUP", b"SETID", b"s", b"g", id(17)]);
    run(h, &[b"XINFO", b"STREAM", b"s", b"FULL"]);
    // Whatever was done, XRANGE - + lists strictly increasing IDs, as many as XLEN says.
    let len = run(h, &[b"XLEN", b"s"]);
    if let (Reply::Int(n), Reply::Array(items)) = (len, run(h, &[b"XRANGE", b"s", b"-", b"+"])) {
        assert_eq!(n as usize, items.len(), "XLEN and XRANGE - + disagree");
        let mut last: Option<StreamId> = None;
        for item in &items {
            if let Reply::Array(e) = item {
                if let Some(Reply::Bulk(b)) = e.first() {
                    let (id, _) = StreamId::parse(b, 0).expect("XRANGE gives valid IDs");
                    assert!(last.is_none_or(|l| l < id), "XRANGE out of order");
                    last = Some(id);
                }
            }
        }
    }
});
