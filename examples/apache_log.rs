//! Loads an Apache access log (combined or common format) into a running tidecache as event
//! documents, in bulk `DOC.INSERT` batches — the "Storing Log Data" use case.
//!
//! ```text
//! cargo run --release --example apache_log -- access.log [redis://127.0.0.1:6379/] [events] [batch]
//! ```
//! Then, for example:
//! ```text
//! redis-cli DOC.CREATEINDEX events '{"host":1,"time":1}'
//! redis-cli DOC.AGGREGATE events '[{"$group":{"_id":"$path","hits":{"$sum":1}}},{"$sort":{"hits":-1}},{"$limit":10}]'
//! ```

#[path = "support/apache.rs"]
mod apache;

use std::io::{BufRead, BufReader};
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(path) = args.get(1) else {
        eprintln!("usage: apache_log <access.log> [redis-url] [collection] [batch-size]");
        std::process::exit(2);
    };
    let url = args
        .get(2)
        .map_or("redis://127.0.0.1:6379/", String::as_str);
    let coll = args.get(3).map_or("events", String::as_str);
    let batch: usize = args
        .get(4)
        .and_then(|b| b.parse().ok())
        .unwrap_or(1000)
        .max(1);
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("cannot open {path}: {e}");
            std::process::exit(1);
        }
    };
    let client = match redis::Client::open(url) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("bad url {url}: {e}");
            std::process::exit(1);
        }
    };
    let mut conn = match client.get_connection() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("cannot connect to {url}: {e}");
            std::process::exit(1);
        }
    };
    let started = Instant::now();
    let (mut inserted, mut skipped) = (0u64, 0u64);
    let mut pending: Vec<String> = Vec::with_capacity(batch);
    let mut flush = |pending: &mut Vec<String>, inserted: &mut u64| {
        if pending.is_empty() {
            return;
        }
        let mut cmd = redis::cmd("DOC.INSERT");
        cmd.arg(coll);
        for d in pending.iter() {
            cmd.arg(d);
        }
        match cmd.query::<Vec<redis::Value>>(&mut conn) {
            Ok(ids) => *inserted += ids.len() as u64,
            Err(e) => {
                eprintln!("DOC.INSERT failed: {e}");
                std::process::exit(1);
            }
        }
        pending.clear();
    };
    for line in BufReader::new(file).lines() {
        let Ok(line) = line else {
            skipped += 1;
            continue;
        };
        match apache::parse_line(&line) {
            Ok(doc) => {
                pending.push(bson::Bson::Document(doc).into_relaxed_extjson().to_string());
                if pending.len() >= batch {
                    flush(&mut pending, &mut inserted);
                }
            }
            Err(_) => skipped += 1,
        }
    }
    flush(&mut pending, &mut inserted);
    let secs = started.elapsed().as_secs_f64();
    println!(
        "{inserted} events inserted into {coll}, {skipped} lines skipped, {:.1}s ({:.0} events/s)",
        secs,
        inserted as f64 / secs.max(1e-9)
    );
}
