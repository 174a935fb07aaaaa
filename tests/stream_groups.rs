//! A consumer group under load with a real client (the `redis` crate): 4 consumers of one
//! group read 100 000 entries with `XREADGROUP … BLOCK` while a producer adds them; one
//! consumer dies mid-way (its connection dropped with a batch read and not acknowledged);
//! another recovers its pending entries with `XAUTOCLAIM`. Every entry is acknowledged
//! exactly once (each `XACK` acknowledges all it names), none is lost, nothing stays
//! pending. About 9 s in a debug build on a 2-core machine; `STREAM_GROUP_ENTRIES` sets
//! another count.

mod support;

use redis::{Connection, Value};
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::{int, q, TestServer};

fn entries() -> u64 {
    std::env::var("STREAM_GROUP_ENTRIES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000)
}

fn text(v: &Value) -> String {
    redis::from_redis_value::<String>(v.clone()).expect("string")
}

/// (id, value of field `n`) of each entry in an XRANGE-style array.
fn items(v: &Value) -> Vec<(String, u64)> {
    let Value::Array(es) = v else {
        panic!("not an array: {v:?}")
    };
    es.iter()
        .map(|e| {
            let Value::Array(pair) = e else {
                panic!("not an entry: {e:?}")
            };
            let Value::Array(fv) = &pair[1] else {
                panic!("no fields: {e:?}")
            };
            (text(&pair[0]), text(&fv[1]).parse().expect("n"))
        })
        .collect()
}

/// One `XREADGROUP GROUP g <me> COUNT 100 BLOCK <ms> STREAMS s >`: the entries, empty on
/// timeout.
fn read(c: &mut Connection, me: &str, block_ms: u64) -> Vec<(String, u64)> {
    let v: Value = redis::cmd("XREADGROUP")
        .arg(&["GROUP", "g", me, "COUNT", "100", "BLOCK"])
        .arg(block_ms)
        .arg(&["STREAMS", "s", ">"])
        .query(c)
        .expect("xreadgroup");
    match v {
        Value::Nil => Vec::new(),
        Value::Array(streams) => {
            let Value::Array(kv) = &streams[0] else {
                panic!("bad reply")
            };
            items(&kv[1])
        }
        other => panic!("bad reply {other:?}"),
    }
}

/// Acknowledges `batch`, checking that every ID was still pending (acknowledged now, once).
fn ack(c: &mut Connection, batch: &[(String, u64)], acked: &Mutex<Vec<u64>>) {
    if batch.is_empty() {
        return;
    }
    let mut cmd = redis::cmd("XACK");
    cmd.arg("s").arg("g");
    for (id, _) in batch {
        cmd.arg(id);
    }
    let n: u64 = cmd.query(c).expect("xack");
    assert_eq!(n, batch.len() as u64, "an entry acknowledged twice");
    acked.lock().unwrap().extend(batch.iter().map(|e| e.1));
}

#[test]
fn four_consumers_one_dies_its_entries_are_claimed() {
    let total = entries();
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    let _: () = q(&mut c, &["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]).unwrap();
    let acked = Arc::new(Mutex::new(Vec::new()));
    let produced = Arc::new(AtomicBool::new(false));

    // The producer: pipelines of 1000 XADDs.
    let producer = {
        let mut p = s.conn();
        let produced = produced.clone();
        std::thread::spawn(move || {
            let mut n = 0u64;
            while n < total {
                let mut pipe = redis::pipe();
                for _ in 0..1000.min(total - n) {
                    pipe.cmd("XADD").arg("s").arg("*").arg("n").arg(n).ignore();
                    n += 1;
                }
                let _: () = pipe.query(&mut p).expect("xadd");
            }
            produced.store(true, Ordering::SeqCst);
        })
    };

    // The consumer that dies: acknowledges 20 batches, then reads one more and drops its
    // connection without acknowledging it.
    let doomed = {
        let mut dc = s.conn();
        let acked = acked.clone();
        let produced = produced.clone();
        std::thread::spawn(move || {
            let mut batches = 0;
            let mut idle = 0;
            loop {
                let batch = read(&mut dc, "c0", 500);
                if batch.is_empty() {
                    idle += 1;
                    assert!(
                        !(produced.load(Ordering::SeqCst) && idle > 4),
                        "c0 got no entries to die with"
                    );
                    continue;
                }
                if batches == 20 {
                    drop(dc);
                    return batch.len();
                }
                ack(&mut dc, &batch, &acked);
                batches += 1;
            }
        })
    };

    // The live consumers: read and acknowledge until the producer is done and nothing new
    // arrives for half a second.
    let live: Vec<_> = (1..4)
        .map(|i| {
            let mut lc = s.conn();
            let acked = acked.clone();
            let produced = produced.clone();
            std::thread::spawn(move || {
                let me = format!("c{i}");
                let started = Instant::now();
                loop {
                    let batch = read(&mut lc, &me, 500);
                    if batch.is_empty() && produced.load(Ordering::SeqCst) {
                        break;
                    }
                    ack(&mut lc, &batch, &acked);
                    assert!(started.elapsed() < Duration::from_secs(120), "too slow");
                }
                lc
            })
        })
        .collect();

    producer.join().expect("producer");
    let lost = doomed.join().expect("doomed consumer");
    let mut conns: Vec<Connection> = live
        .into_iter()
        .map(|h| h.join().expect("consumer"))
        .collect();

    // Only the dead consumer's batch is pending.
    let summary: Value = q(&mut c, &["XPENDING", "s", "g"]).unwrap();
    let Value::Array(summary) = summary else {
        panic!("{summary:?}")
    };
    assert_eq!(summary[0], Value::Int(lost as i64));
    assert_eq!(acked.lock().unwrap().len() as u64, total - lost as u64);

    // Consumer c1 recovers them: XAUTOCLAIM idle entries, 25 at a time, acknowledging each
    // claimed batch.
    std::thread::sleep(Duration::from_millis(150));
    let rc = &mut conns[0];
    let mut cursor = "0-0".to_string();
    let mut claimed = 0;
    loop {
        let v: Value = q(
            rc,
            &["XAUTOCLAIM", "s", "g", "c1", "100", &cursor, "COUNT", "25"],
        )
        .unwrap();
        let Value::Array(parts) = v else {
            panic!("{v:?}")
        };
        cursor = text(&parts[0]);
        let batch = items(&parts[1]);
        claimed += batch.len();
        ack(rc, &batch, &acked);
        if cursor == "0-0" {
            break;
        }
    }
    assert_eq!(claimed, lost);

    // Every entry acknowledged exactly once, none lost, nothing pending.
    let acked = acked.lock().unwrap();
    assert_eq!(acked.len() as u64, total);
    let distinct: HashSet<u64> = acked.iter().copied().collect();
    assert_eq!(distinct.len() as u64, total);
    assert!(distinct.iter().all(|n| *n < total));
    let summary: Value = q(&mut c, &["XPENDING", "s", "g"]).unwrap();
    let Value::Array(summary) = summary else {
        panic!("{summary:?}")
    };
    assert_eq!(summary[0], Value::Int(0));
    assert_eq!(int(&mut c, &["XLEN", "s"]), total as i64);
}
