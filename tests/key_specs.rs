//! Every command both servers know has the key specs redis-server 7 reports in `COMMAND`
//! (first/last/step and each spec's flags, begin_search and find_keys): ACL `%R~`/`%W~`
//! selectors, `ACL DRYRUN` and `COMMAND GETKEYSANDFLAGS` read those flags, so a spec that
//! says `RW` where Redis says `RW insert` changes who may run what. Skipped, with a
//! notice, when `redis-server` is not on PATH.
//!
//! Not compared: a spec's `notes` (free text), and SORT / SORT_RO, whose BY/GET/STORE specs
//! Redis marks `unknown` (a search type the table does not model; STORE is a keyword spec
//! here, so GETKEYS and ACL still see the destination).

mod support;

use redis::Value;
use std::collections::BTreeMap;
use support::{ReferenceRedis, TestServer};

const NOT_COMPARED: &[&str] = &["sort", "sort_ro"];

/// A reply as text, with RESP3 maps/sets and RESP2 arrays alike, and `notes` pairs gone.
fn norm(v: &Value) -> String {
    match v {
        Value::Nil => "nil".into(),
        Value::Int(i) => i.to_string(),
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        Value::Okay => "OK".into(),
        Value::Array(items) | Value::Set(items) => {
            let mut out = Vec::new();
            let mut i = 0;
            while i < items.len() {
                if matches!(&items[i], Value::BulkString(b) if b == b"notes") {
                    i += 2;
                    continue;
                }
                out.push(norm(&items[i]));
                i += 1;
            }
            format!("[{}]", out.join(" "))
        }
        Value::Map(pairs) => format!(
            "[{}]",
            pairs
                .iter()
                .filter(|(k, _)| norm(k) != "notes")
                .map(|(k, v)| format!("{} {}", norm(k), norm(v)))
                .collect::<Vec<_>>()
                .join(" ")
        ),
        other => format!("{other:?}"),
    }
}

/// name -> "first last step specs", subcommands included.
fn table(port: u16) -> BTreeMap<String, String> {
    let c = redis::Client::open(format!("redis://127.0.0.1:{port}/")).expect("client");
    let mut conn = c.get_connection().expect("connect");
    let all: Value = redis::cmd("COMMAND").query(&mut conn).expect("COMMAND");
    let mut out = BTreeMap::new();
    fn walk(v: &Value, out: &mut BTreeMap<String, String>) {
        let Value::Array(f) = v else { return };
        if f.len() < 10 {
            return;
        }
        out.insert(
            norm(&f[0]),
            format!(
                "{} {} {} {}",
                norm(&f[3]),
                norm(&f[4]),
                norm(&f[5]),
                norm(&f[8])
            ),
        );
        if let Value::Array(subs) = &f[9] {
            for s in subs {
                walk(s, out);
            }
        }
    }
    if let Value::Array(cmds) = all {
        for c in &cmds {
            walk(c, &mut out);
        }
    }
    out
}

#[test]
fn key_specs_match_redis() {
    let Some(redis) = ReferenceRedis::start() else {
        return;
    };
    let ours = TestServer::start(&[]);
    let theirs = table(redis.port);
    let mine = table(ours.port);
    assert!(theirs.len() > 200 && mine.len() > 200, "both tables read");
    let mut diffs = Vec::new();
    let mut compared = 0;
    for (name, want) in &theirs {
        let Some(got) = mine.get(name) else { continue };
        if NOT_COMPARED.contains(&name.as_str()) {
            continue;
        }
        compared += 1;
        if got != want {
            diffs.push(format!("{name}\n  redis:     {want}\n  tidecache: {got}"));
        }
    }
    assert!(compared > 200, "compared {compared} commands");
    assert!(
        diffs.is_empty(),
        "{} commands differ:\n{}",
        diffs.len(),
        diffs.join("\n")
    );
}
